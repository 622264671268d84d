//! The suffix runner: one frame's suffix on its crossing tensors (with the
//! handheld's compute dilation), on the connection's runner thread, and
//! the builds ahead a wearable asks for, on tokio's blocking pool; both off
//! the connection's I/O.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tracing::debug;

use super::store::Loaded;
use crate::load::LoadMeter;
use crate::{Cut, Sides, SplitPlan, Values};
use tandem_core::device_clock::{factor_of, thread_cpu_time};
use tandem_proto::encoding::Encoding;
use tandem_proto::protocol::Message;
use tandem_proto::session::{HandheldSession, RunError};

/// When a runner sends its answers on. Waking the connection's task costs
/// the runner 26-40 µs a frame in `tandem-bench pipeline --link none` on
/// this host (a thread parked on another core), 4-6% of DeepEar's 0.65 ms
/// suffix at 0/14, and the runner is a stream's slowest stage when the
/// phone runs most of the model. So while it is backlogged (the next frame
/// already waits) on short suffixes, an answer waits for the next ones',
/// and one wake carries them all (the sends after the first took 2-4 µs):
/// at most [`Batch::MAX`] answers, each run under [`Batch::SHORT`]. The
/// frame waiting must be one [`LastPlan::runs_as_built`] (its suffix plan
/// already built, not relayed, its tensors decoded), so an answer waits
/// only for runs like those that took under 2 ms, at most three, and only
/// when frames queue behind it anyway. A runner with nothing waiting sends
/// at once: paced and one-at-a-time streams are unchanged.
#[derive(Debug, Default)]
pub(super) struct Batch {
    held: usize,
}

impl Batch {
    /// Most answers sent with one wake (2 gave DeepEar at 0/14 0.940-0.956
    /// of the ideal, 4 gave 0.966-0.972, against 0.926-0.947 sending each).
    pub(super) const MAX: usize = 4;
    /// Runs longer than this send at once (a wake is under 2% of them).
    pub(super) const SHORT: Duration = Duration::from_millis(2);

    /// A frame's answer is ready after a run of `ran`, with another frame
    /// `waiting` or not: whether to hold it (`false`: send every held
    /// answer now, this one last).
    pub(super) fn hold(&mut self, ran: Duration, waiting: bool) -> bool {
        let hold = waiting && ran < Self::SHORT && self.held + 1 < Self::MAX;
        self.held = if hold { self.held + 1 } else { 0 };
        hold
    }
}

/// A frame to run: what the session's `Run` said, and the model.
pub(super) struct Job {
    pub(super) frame: u64,
    pub(super) cut: crate::CutKey,
    /// The crossing tensors, decoded by the connection's task when small
    /// (a sub-millisecond suffix on a 256 KB tensor lost up to a sixth of
    /// its rate to this copy on the runner), else by the runner.
    pub(super) received: crate::encoding::Received,
    pub(super) answer: Vec<Encoding>,
    pub(super) loaded: Arc<Loaded>,
    /// Relayed: S2's key and the edge that runs its suffix.
    pub(super) edge: Option<(crate::CutKey, Arc<super::edge::Edge>)>,
    /// The engine the wearable asked for (one offered), `None`: the model's own.
    pub(super) engine: Option<crate::engine::Engine>,
}

/// `loaded`'s suffix plan of `cut` on `engine` (`None`: the model's own).
fn suffix_plan(
    loaded: &Loaded,
    cut: &Cut,
    engine: Option<crate::engine::Engine>,
) -> crate::Result<Arc<SplitPlan>> {
    let own = loaded.executor.engines();
    let engines = crate::engine::Engines { suffix: engine.unwrap_or(own.suffix), ..own };
    Ok(loaded.executor.plan_on(cut, Sides::Suffix, engines)?)
}

/// A cut and its suffix plan.
type Suffix = Arc<(Cut, Arc<SplitPlan>)>;

/// The last cut a runner ran (of which model, by which key) and its
/// suffix plan: a stream's frames share one cut, so neither is looked up
/// again for each frame. One plan per connection is held past the
/// executor's own eviction at most.
#[derive(Default)]
pub(super) struct LastPlan(Option<(Arc<Loaded>, crate::CutKey, Option<crate::engine::Engine>, Suffix)>);

impl LastPlan {
    /// The suffix plan held, when it is `job`'s.
    fn held(&self, job: &Job) -> Option<&Suffix> {
        let (loaded, key, engine, found) = self.0.as_ref()?;
        (Arc::ptr_eq(loaded, &job.loaded) && *key == job.cut && *engine == job.engine).then_some(found)
    }

    /// The cut and suffix plan of `job`.
    fn get(&mut self, job: &Job) -> crate::Result<Suffix> {
        if let Some(found) = self.held(job) {
            return Ok(found.clone());
        }
        let cut = Cut::from_key(job.loaded.model.graph(), job.cut.as_str())?;
        let plan = suffix_plan(&job.loaded, &cut, job.engine)?;
        let found = Arc::new((cut, plan));
        self.0 = Some((job.loaded.clone(), job.cut.clone(), job.engine, found.clone()));
        Ok(found)
    }

    /// Whether `job` runs as the frames before it did: on the plan held
    /// (none built in its run), here (not relayed to an edge, which may
    /// take seconds), on tensors the connection's task decoded.
    pub(super) fn runs_as_built(&self, job: &Job) -> bool {
        self.held(job).is_some()
            && job.edge.is_none()
            && matches!(job.received, crate::encoding::Received::Decoded { .. })
    }
}

/// How fast a suffix runs here.
#[derive(Clone, Copy, Debug)]
pub(super) struct Speed {
    /// Times slower than this host: the device's slowdown under its
    /// background load ([`super::ServerConfig::background_load`]).
    factor: f64,
    /// The device's own slowdown, idle.
    slowdown: f64,
}

impl Speed {
    pub(super) fn of(config: &super::ServerConfig) -> Speed {
        let slowdown = factor_of(config.slowdown);
        Speed { factor: slowdown / (1.0 - crate::load::background_share(config.background_load)), slowdown }
    }
}

/// Runs one suffix: the frame and its result message or a reason. Its
/// share of a core goes to `meter`.
pub(super) fn run(
    mut job: Job,
    last: &mut LastPlan,
    speed: Speed,
    meter: Option<&LoadMeter>,
    handle: &tokio::runtime::Handle,
) -> (u64, Result<Message, RunError>) {
    let taken = crate::encoding::Received::Decoded { tensors: Ok(vec![]), took: Default::default() };
    let received = std::mem::replace(&mut job.received, taken).decode().0;
    let received = received.map(|t| t.into_iter().map(|(name, t)| (name, t.into())).collect::<Values>());
    (job.frame, received.map_err(Into::into).and_then(|r| run_job(&job, &r, last, speed, meter, handle)))
}

fn run_job(
    job: &Job,
    received: &Values,
    last: &mut LastPlan,
    speed: Speed,
    meter: Option<&LoadMeter>,
    handle: &tokio::runtime::Handle,
) -> Result<Message, RunError> {
    let g = job.loaded.model.graph();
    let (started, cpu) = (Instant::now(), thread_cpu_time());
    // A relayed frame needs the cut's suffix plan only when the edge fails
    // (the relay builds it then): not built ahead of the edge's answer.
    let (cut, out, compute_us, report) = match &job.edge {
        Some((near, edge)) => {
            let cut = Cut::from_key(g, job.cut.as_str())?;
            let r = super::edge::run(edge, &job.loaded, &job.cut, near, received, speed.factor, handle)?;
            (cut, r.outputs, r.compute.as_micros() as u64, Some(r.report))
        }
        None => {
            // The suffix's plan, built here when no build ahead made it.
            // Its build is not the frame's compute, from which the
            // wearable learns this side's speed (one first frame's 31 ms
            // build had MNIST's 5 ms suffix taken for 53 ms).
            let found = last.get(job)?;
            let computing = Instant::now();
            let out = found.1.run_suffix_dilated(g, received, speed.factor)?;
            (found.0.clone(), out, computing.elapsed().as_micros() as u64, None)
        }
    };
    if let Some(m) = meter {
        // The device clock stretches the run's CPU time `slowdown` times
        // (not the set-up before the first layer): not load. What the
        // background load adds, 1 / (1 − load), is the share measured.
        m.observe(thread_cpu_time().saturating_sub(cpu), started.elapsed().div_f64(speed.slowdown));
    }
    let outputs: Vec<(String, &crate::Tensor)> = cut
        .down_tensors()
        .iter()
        .map(|&t| {
            let name = &g.tensor(t).name;
            out.get(name)
                .map(|v| (name.clone(), &**v))
                .ok_or_else(|| crate::ModelError::MissingTensor(name.clone()))
        })
        .collect::<Result<_, _>>()?;
    let outputs = crate::encoding::to_send(&outputs)?;
    Ok(HandheldSession::result(job.frame, compute_us, &outputs, &job.answer, report)?)
}

/// Builds these cuts' suffix plans one after the other (builds ahead
/// must not take every core from the frames), sending each answer.
pub(super) fn prepare(
    loaded: &Loaded,
    (cuts, engine): (Vec<crate::CutKey>, Option<crate::engine::Engine>),
    out: &mpsc::Sender<Message>,
    conn: u64,
) {
    for key in cuts {
        let started = Instant::now();
        let built = Cut::from_key(loaded.model.graph(), key.as_str())
            .map_err(crate::Error::from)
            .and_then(|cut| suffix_plan(loaded, &cut, engine));
        let build_us = started.elapsed().as_micros() as u64;
        let error = built.err().map(|e| e.to_string());
        debug!(conn, cut = %key, build_us, ?error, ?engine, "prepared");
        if out.blocking_send(HandheldSession::prepared_on(key, engine, build_us, error)).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Engine;
    use crate::{InputShapes, Model, SplitExecutor};
    use tandem_proto::protocol::LatencySummary;

    const FAST: Duration = Duration::from_micros(650);

    #[test]
    fn a_suffix_runs_slower_by_the_share_its_background_load_leaves() {
        let speed = |slowdown, background_load| {
            let s =
                Speed::of(&super::super::ServerConfig { slowdown, background_load, ..Default::default() });
            (s.factor, s.slowdown)
        };
        assert_eq!(speed(4.0, 0.5), (8.0, 4.0));
        assert_eq!(speed(4.0, 0.0), (4.0, 4.0));
        let (most, _) = speed(1.0, 0.99);
        assert!((most - 20.0).abs() < 1e-9, "at most 95% load: {most}");
        assert_eq!(speed(4.0, f64::NAN), (4.0, 4.0), "a load not given is none");
        assert_eq!(speed(f64::INFINITY, 0.5), (2.0, 1.0), "a slowdown not given is none");
    }

    /// MNIST from the zoo, loaded as the store loads a model.
    fn loaded() -> Arc<Loaded> {
        let bytes = tandem_models::ZooSpec::Mnist.build(1).expect("builds");
        let model = Model::from_bytes(&bytes, &InputShapes::none()).expect("loads");
        let latency =
            LatencySummary { per_layer_s: vec![], overhead_s: 0.0, engine: Engine::Tract, others: vec![] };
        Arc::new(Loaded { digest: [0; 32], executor: SplitExecutor::new(model.clone()), model, latency })
    }

    fn job(loaded: &Arc<Loaded>, fraction: f64, engine: Option<Engine>) -> Job {
        let cut = Cut::at_flops_fraction(loaded.model.graph(), fraction);
        let tensors = Ok(vec![]);
        Job {
            frame: 1,
            cut: cut.key(),
            received: crate::encoding::Received::Decoded { tensors, took: Duration::ZERO },
            answer: vec![],
            loaded: loaded.clone(),
            edge: None,
            engine,
        }
    }

    #[test]
    fn only_a_frame_on_the_plan_held_runs_as_built() {
        let (model, other_model) = (loaded(), loaded());
        let (half, phone) = (job(&model, 0.5, None), job(&model, 0.0, None));
        assert_ne!(half.cut, phone.cut, "two cuts");
        let mut last = LastPlan::default();
        assert!(!last.runs_as_built(&half), "no plan held yet");
        last.get(&half).expect("builds");
        assert!(last.runs_as_built(&half));
        assert!(!last.runs_as_built(&phone), "another cut builds its plan in its run");
        assert!(!last.runs_as_built(&job(&other_model, 0.5, None)), "another model's plan");
        assert!(!last.runs_as_built(&job(&model, 0.5, Some(Engine::OnnxRuntime))), "another engine's plan");
        last.get(&phone).expect("builds");
        assert!(last.runs_as_built(&phone) && !last.runs_as_built(&half), "one plan held");
    }

    #[test]
    fn a_backlogged_runner_sends_short_answers_four_at_a_time_and_anything_else_at_once() {
        let mut b = Batch::default();
        // Backlogged on short runs: three answers wait for the fourth.
        let held: Vec<bool> = (0..8).map(|_| b.hold(FAST, true)).collect();
        assert_eq!(held, [true, true, true, false, true, true, true, false]);
        // Nothing waiting: sent at once, and what was held with it.
        assert!(b.hold(FAST, true));
        assert!(!b.hold(FAST, false));
        assert!(!b.hold(FAST, false), "a runner with nothing waiting holds nothing");
        // A long run is sent at once even with a frame waiting.
        assert!(b.hold(FAST, true));
        assert!(!b.hold(Batch::SHORT, true));
        assert!(!b.hold(Duration::from_millis(5), true));
    }
}
