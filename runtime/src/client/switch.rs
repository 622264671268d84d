//! Switching cuts without stalling a stream: a new cut's plans (the
//! wearable's prefix, the handheld's suffix) are built in the background
//! while frames keep running at the cut in force, and the switch happens
//! once both sides say they are ready. A cut is switched to on a pair of
//! engines: the same cut on another engine is a switch too, built the
//! same way. [`SwitchGate`] is the bookkeeping,
//! without I/O or clocks (time is passed in); [`Builder`] is the wearable's
//! background thread.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel as cb;
use tracing::{debug, warn};

use super::driver::Next;
use crate::engine::{Engine, Engines};
use crate::{Cut, CutKey, Sides, SplitExecutor};

/// A cut on its engines (`None`: each side's own).
pub(super) type Placed = (Cut, Option<Engines>);

/// The link rates, as multiples of today's estimate, whose decisions are
/// built ahead: the next likely switches when the link falls or recovers.
pub(super) const AHEAD_FACTORS: [f64; 4] = [0.25, 0.5, 2.0, 4.0];

/// While `decided`'s plans are built: the cut in force (`held`, predicted
/// `held_ms`), or every layer here (`here`, `here_ms`) when that is
/// predicted faster now (a link that is falling away), saying why.
pub(super) fn hold(decided: &Cut, held: (Placed, Option<f64>), here: (Placed, Option<f64>)) -> Next {
    let ((cut, engines), ms) = match (held.1, here.1) {
        (Some(h), Some(l)) if l < h => here,
        _ => held,
    };
    let why = cut.is_wearable_only().then(|| {
        format!(
            "switching to a cut with {} layers here once its plans are built; until then every layer here",
            decided.prefix_len()
        )
    });
    Next { local_reason: why, ..Next::at(cut, ms).on(engines) }
}

/// How long a decided cut may wait for its plans before the next frame
/// builds them itself: past this, a lost `Prepared` (a reconnect between
/// the request and its answer, say) must not hold a switch forever.
pub(super) const PATIENCE: Duration = Duration::from_secs(5);

/// What the next frame runs at.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Gate {
    /// The decided cut: its plans are ready (or it is the session's first
    /// offloading cut, built in the frame). `waited`: for the first frame of
    /// a switch that had to wait, the time since the decision.
    Go { waited: Option<Duration> },
    /// Keep running at `cut` on `engines` (the cut in force) while the
    /// decided one's plans are built; `build`: start building it now (both sides).
    Hold { cut: Cut, engines: Option<Engines>, build: Option<Placed> },
}

/// Which cuts are ready on each side, which are being built, and the
/// switch waiting for them.
#[derive(Debug, Default)]
pub(super) struct SwitchGate {
    /// The cut the last frame ran at, on its engines.
    running: Option<Placed>,
    /// A decided cut waiting for its plans, and when it was decided.
    pending: Option<(Placed, Duration)>,
    /// Cut keys whose suffix the handheld has built, on which engine
    /// (`None`: its own).
    handheld_ready: HashSet<(CutKey, Option<Engine>)>,
    /// Cut keys and engines asked for (either side), so each is asked once.
    requested: HashSet<(CutKey, Option<Engines>)>,
    /// Cut keys whose plans failed to build, by side and engine (`None`:
    /// the side's own), and why.
    failed: HashMap<(Sides, CutKey, Option<Engine>), String>,
    /// Whether a handheld has been connected before (the next connection
    /// is a reconnect).
    connected_before: bool,
}

impl SwitchGate {
    /// The gate for a frame whose planner decided `decided` at `now`;
    /// `local_ready`: whether the wearable's prefix plan for it is built.
    pub(super) fn choose(&mut self, decided: &Placed, local_ready: bool, now: Duration) -> Gate {
        let key = decided.0.key();
        let suffix = (key.clone(), decided.1.map(|e| e.suffix));
        let ready = decided.0.is_wearable_only() || (local_ready && self.handheld_ready.contains(&suffix));
        let overdue =
            self.pending.as_ref().is_some_and(|(p, at)| p == decided && now.saturating_sub(*at) > PATIENCE);
        let running = match &self.running {
            Some(r) if r != decided && !ready && !overdue => r.clone(),
            // Ready, or already running there, or nothing to fall back on
            // (the first frame: its plans are built inline).
            _ => {
                let waited = match self.pending.take() {
                    Some((p, at)) if &p == decided => Some(now.saturating_sub(at)),
                    _ => None,
                };
                self.running = Some(decided.clone());
                return Gate::Go { waited };
            }
        };
        let (cut, engines) = running;
        let on = |side| match side {
            Sides::Prefix => decided.1.map(|e| e.prefix),
            _ => decided.1.map(|e| e.suffix),
        };
        let failed = |side| self.failed.contains_key(&(side, key.clone(), on(side)));
        if failed(Sides::Prefix) || failed(Sides::Suffix) {
            // It cannot be built: stay where we are (said once, when it failed).
            self.pending = None;
            return Gate::Hold { cut, engines, build: None };
        }
        if self.pending.as_ref().is_none_or(|(p, _)| p != decided) {
            self.pending = Some((decided.clone(), now));
        }
        let build = self.requested.insert((key, decided.1)).then(|| decided.clone());
        Gate::Hold { cut, engines, build }
    }

    /// Of `cuts` (the planner's runners-up) on `engines`, those not asked
    /// for yet, marked as asked.
    pub(super) fn unasked(&mut self, cuts: Vec<Cut>, engines: Option<Engines>) -> Vec<Cut> {
        cuts.into_iter()
            .filter(|c| !c.is_wearable_only() && self.requested.insert((c.key(), engines)))
            .collect()
    }

    /// The handheld built `key`'s suffix on `engine`, or could not.
    pub(super) fn handheld_prepared(&mut self, key: CutKey, engine: Option<Engine>, error: Option<String>) {
        match error {
            None => {
                self.handheld_ready.insert((key, engine));
            }
            Some(e) => {
                warn!(cut = %key, ?engine, "the handheld could not build the cut: {e}");
                self.failed.insert((Sides::Suffix, key, engine), e);
            }
        }
    }

    /// A frame at `cut` with its suffix on `engine` was answered: the
    /// handheld has that suffix.
    pub(super) fn answered(&mut self, cut: &Cut, engine: Option<Engine>) {
        self.handheld_ready.insert((cut.key(), engine));
    }

    /// The wearable could not build `key`'s prefix on `engine`.
    pub(super) fn local_failed(&mut self, key: CutKey, engine: Engine, error: String) {
        warn!(cut = %key, %engine, "the wearable could not build the cut: {error}");
        self.failed.insert((Sides::Prefix, key, Some(engine)), error);
    }

    /// A new connection (perhaps a restarted handheld): nothing is known
    /// to be built there, and nothing is pending. On the first connection
    /// nothing is in force either, so the first offloading cut is built in
    /// its frame. On a reconnect, a stream keeps running every layer here
    /// (`here`, a cut always ready; on the engines of the cut in force)
    /// until the next cut's plans are built on both sides, as for any
    /// switch: a frame that built them itself would stall the stream. That
    /// holds whether the stream ran here while the link was down or a split
    /// cut was in force, whose suffix the new connection may not have.
    pub(super) fn reconnected(&mut self, here: Cut) {
        self.handheld_ready.clear();
        self.requested.clear();
        self.failed.clear();
        self.pending = None;
        debug_assert!(here.is_wearable_only(), "held here: every layer on the wearable");
        let running = self.running.take().filter(|_| self.connected_before);
        self.running = running.map(|(_, engines)| (here, engines));
        self.connected_before = true;
    }
}

/// The wearable's background plan builder: one thread, one cut at a time,
/// so that builds ahead leave the other cores to the frames.
pub(super) struct Builder {
    jobs: cb::Sender<(Cut, Sides, Engines)>,
    failures: cb::Receiver<(CutKey, Engine, String)>,
}

impl Builder {
    /// Starts the thread; it ends when the builder is dropped.
    pub(super) fn start(executor: Arc<SplitExecutor>) -> std::io::Result<Builder> {
        let (jobs, queue) = cb::unbounded::<(Cut, Sides, Engines)>();
        let (fail_tx, failures) = cb::unbounded();
        std::thread::Builder::new().name("tandem-plans".into()).spawn(move || {
            for (cut, sides, engines) in queue {
                let started = std::time::Instant::now();
                match executor.plan_on(&cut, sides, engines) {
                    Ok(_) => debug!(cut = %cut.key(), ?sides, took = ?started.elapsed(), "plan built ahead"),
                    // The whole model's plan is built again by the frame
                    // that needs it, which reports its error.
                    Err(e) if sides == Sides::Both => {
                        warn!(engine = %engines.prefix, "the whole model's plan was not built ahead: {e}")
                    }
                    Err(e) => {
                        let _ = fail_tx.send((cut.key(), engines.prefix, e.to_string()));
                    }
                }
            }
        })?;
        Ok(Builder { jobs, failures })
    }

    /// Queues `cut`'s prefix on `engines` (its prefix engine; the executor's
    /// own for the rest, as [`SplitExecutor::plan_on`] keys it).
    pub(super) fn build(&self, cut: Cut, engines: Engines) {
        let _ = self.jobs.send((cut, Sides::Prefix, engines));
    }

    /// Queues the plan of every layer here on `engines` (`whole`: the
    /// wearable-only cut), as a frame run whole asks for it: what a
    /// fallback or the watch alone needs on that engine, a cut the planner
    /// never lists among those to build ahead. The session asks at its
    /// first decision to offload: else the first frame run whole after
    /// offloaded ones built it, and PP-OCR's classifier at
    /// 15 frames/s started 155 ms behind its clock on this VM and was late
    /// on half its frames. A failure is logged, not reported: the frame
    /// that needs it builds it.
    pub(super) fn build_whole(&self, whole: Cut, engines: Engines) {
        debug_assert!(whole.is_wearable_only());
        let _ = self.jobs.send((whole, Sides::Both, engines));
    }

    /// Builds that failed since the last call: (cut key, prefix engine, why).
    pub(super) fn failures(&self) -> Vec<(CutKey, Engine, String)> {
        self.failures.try_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{InputShapes, Model};

    fn cuts() -> (Cut, Cut, Cut) {
        let bytes = tandem_models::ZooSpec::Mnist.build(1).expect("builds");
        let model = Model::from_bytes(&bytes, &InputShapes::none()).expect("loads");
        let g = model.graph();
        let mid = Cut::at_flops_fraction(g, 0.5);
        assert!(!mid.is_wearable_only() && !mid.is_handheld_only());
        (Cut::wearable_only(g), Cut::handheld_only(g), mid)
    }

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn the_builder_makes_a_frame_run_whole_find_its_plan_and_a_cut_its_prefix() {
        let bytes = tandem_models::ZooSpec::Mnist.build(1).expect("builds");
        let model = Model::from_bytes(&bytes, &InputShapes::none()).expect("loads");
        let (whole, mid) = (Cut::wearable_only(model.graph()), Cut::at_flops_fraction(model.graph(), 0.5));
        let executor = Arc::new(SplitExecutor::new(model));
        let engines = executor.engines();
        let builder = Builder::start(executor.clone()).expect("starts");
        builder.build(mid.clone(), engines);
        builder.build_whole(whole.clone(), engines);
        let started = std::time::Instant::now();
        while !executor.is_cached_on(&whole, Sides::Both, engines) {
            assert!(builder.failures().is_empty(), "the cut's prefix failed");
            assert!(started.elapsed() < 30 * S, "the whole plan was never built");
            std::thread::sleep(Duration::from_millis(5));
        }
        // One thread, in order: the cut's prefix was built before.
        assert!(executor.is_cached_on(&mid, Sides::Prefix, engines));
        assert!(!executor.is_cached_on(&mid, Sides::Both, engines), "a cut's prefix only");
        assert!(builder.failures().is_empty());
    }

    #[test]
    fn the_first_cut_goes_at_once_and_a_new_one_waits_for_both_sides() {
        let (_, all_there, mid) = cuts();
        let mut gate = SwitchGate::default();
        // The first offloading cut: nothing to fall back on, built inline.
        assert_eq!(gate.choose(&(all_there.clone(), None), false, S), Gate::Go { waited: None });
        gate.answered(&all_there, None);
        // A new decision at 2 s: hold at the cut in force and build it, once.
        assert_eq!(
            gate.choose(&(mid.clone(), None), false, 2 * S),
            Gate::Hold { cut: all_there.clone(), engines: None, build: Some((mid.clone(), None)) }
        );
        assert_eq!(
            gate.choose(&(mid.clone(), None), true, 3 * S),
            Gate::Hold { cut: all_there.clone(), engines: None, build: None }
        );
        // The handheld is ready too at 4 s: go, 2 s after the decision.
        gate.handheld_prepared(mid.key(), None, None);
        assert_eq!(
            gate.choose(&(mid.clone(), None), false, 4 * S),
            Gate::Hold { cut: all_there.clone(), engines: None, build: None }
        );
        assert_eq!(gate.choose(&(mid.clone(), None), true, 4 * S), Gate::Go { waited: Some(2 * S) });
        // Staying there reports no more waits.
        assert_eq!(gate.choose(&(mid.clone(), None), true, 5 * S), Gate::Go { waited: None });
    }

    #[test]
    fn running_alone_is_always_ready_and_prepared_cuts_switch_without_waiting() {
        let (here, all_there, mid) = cuts();
        let mut gate = SwitchGate::default();
        assert_eq!(gate.choose(&(all_there.clone(), None), false, S), Gate::Go { waited: None });
        // The link collapses: every layer here, at once.
        assert_eq!(gate.choose(&(here.clone(), None), false, 2 * S), Gate::Go { waited: None });
        // A runner-up built ahead on both sides is taken at once.
        assert_eq!(gate.unasked(vec![mid.clone(), here.clone()], None), vec![mid.clone()]);
        assert!(gate.unasked(vec![mid.clone()], None).is_empty(), "asked once");
        gate.handheld_prepared(mid.key(), None, None);
        assert_eq!(gate.choose(&(mid.clone(), None), true, 3 * S), Gate::Go { waited: None });
    }

    #[test]
    fn a_cut_that_cannot_be_built_is_never_switched_to_and_a_reconnect_forgets() {
        let (here, all_there, mid) = cuts();
        let mut gate = SwitchGate::default();
        assert_eq!(gate.choose(&(all_there.clone(), None), false, S), Gate::Go { waited: None });
        assert_eq!(
            gate.choose(&(mid.clone(), None), false, S),
            Gate::Hold { cut: all_there.clone(), engines: None, build: Some((mid.clone(), None)) }
        );
        gate.handheld_prepared(mid.key(), None, Some("out of memory".into()));
        assert_eq!(
            gate.choose(&(mid.clone(), None), true, 2 * S),
            Gate::Hold { cut: all_there.clone(), engines: None, build: None }
        );
        // Past the patience, a cut whose answer never comes is built inline.
        let (_, _, other) = cuts();
        let mut patient = SwitchGate::default();
        assert_eq!(patient.choose(&(all_there.clone(), None), false, S), Gate::Go { waited: None });
        assert!(matches!(patient.choose(&(other.clone(), None), true, S), Gate::Hold { .. }));
        assert!(matches!(patient.choose(&(other.clone(), None), true, S + PATIENCE), Gate::Hold { .. }));
        assert_eq!(
            patient.choose(&(other.clone(), None), true, 2 * S + PATIENCE),
            Gate::Go { waited: Some(S + PATIENCE) }
        );
        // The gate's first connection forgets the failure: nothing is in
        // force, so the next cut goes inline.
        gate.reconnected(here);
        assert_eq!(gate.choose(&(mid.clone(), None), false, 3 * S), Gate::Go { waited: None });
    }

    /// A link lost mid-stream: its frames ran here, and once a handheld
    /// is back the decided cut waits for its plans there, as any switch.
    #[test]
    fn after_a_reconnect_a_stream_running_here_waits_for_the_next_cut_s_plans() {
        let (here, _, mid) = cuts();
        let mut gate = SwitchGate::default();
        // The first connection: the first offloading cut goes inline.
        gate.reconnected(here.clone());
        assert_eq!(gate.choose(&(mid.clone(), None), true, S), Gate::Go { waited: None });
        // The link is lost: frames run every layer here.
        assert_eq!(gate.choose(&(here.clone(), None), true, 2 * S), Gate::Go { waited: None });
        gate.reconnected(here.clone());
        // Built here, but not on the new connection: held here, built there.
        assert_eq!(
            gate.choose(&(mid.clone(), None), true, 3 * S),
            Gate::Hold { cut: here.clone(), engines: None, build: Some((mid.clone(), None)) }
        );
        gate.handheld_prepared(mid.key(), None, None);
        assert_eq!(gate.choose(&(mid.clone(), None), true, 4 * S), Gate::Go { waited: Some(S) });
    }

    /// A reconnect while a split cut was in force (a stall taken as a lost
    /// link, say): the new connection may not have its suffix, so frames
    /// run here, on the engines in force, until the decided cut is built on
    /// both sides. It was built in a frame before (the walk-away run of
    /// 2026-12-06 built the handheld-only cut's empty prefix inline).
    #[test]
    fn after_a_reconnect_at_a_split_cut_frames_run_here_until_the_next_cut_is_built() {
        let (here, all_there, mid) = cuts();
        let tract = Some(Engines::TRACT);
        let mut gate = SwitchGate::default();
        gate.reconnected(here.clone());
        assert_eq!(gate.choose(&(mid.clone(), tract), true, S), Gate::Go { waited: None });
        gate.answered(&mid, Some(Engine::Tract));
        gate.reconnected(here.clone());
        // The handheld-only cut, its empty prefix not built here yet.
        assert_eq!(
            gate.choose(&(all_there.clone(), tract), false, 2 * S),
            Gate::Hold { cut: here.clone(), engines: tract, build: Some((all_there.clone(), tract)) }
        );
        // Built on the handheld but not here: still held.
        gate.handheld_prepared(all_there.key(), Some(Engine::Tract), None);
        assert!(matches!(gate.choose(&(all_there.clone(), tract), false, 3 * S), Gate::Hold { .. }));
        assert_eq!(gate.choose(&(all_there.clone(), tract), true, 4 * S), Gate::Go { waited: Some(2 * S) });
        // Even the cut in force before the reconnect waits for the new
        // connection's answer.
        gate.reconnected(here.clone());
        assert!(matches!(gate.choose(&(all_there.clone(), tract), true, 5 * S), Gate::Hold { .. }));
    }

    #[test]
    fn a_held_switch_runs_here_only_when_that_is_predicted_faster() {
        let (here, split, decided) = cuts();
        let held = |h, l| hold(&decided, ((split.clone(), None), h), ((here.clone(), None), l));
        let n = held(Some(10.0), Some(30.0));
        assert_eq!((n.cut.key(), n.predicted_ms, n.local_reason), (split.key(), Some(10.0), None));
        let n = held(Some(30.0), Some(10.0));
        assert!(n.cut.is_wearable_only());
        assert_eq!(n.predicted_ms, Some(10.0));
        let why = n.local_reason.expect("a reason");
        assert!(why.contains(&format!("{} layers here", decided.prefix_len())), "{why}");
        // Without a prediction for both: the cut in force.
        assert_eq!(held(None, Some(1.0)).cut.key(), split.key());
    }

    /// The same cut on another engine is a switch: held until the new
    /// engine's plans are built on both sides.
    #[test]
    fn the_same_cut_on_another_engine_waits_for_that_engine_s_plans() {
        let (_, _, mid) = cuts();
        let (tract, ort) = (Engines::TRACT, Engines::both(Engine::OnnxRuntime));
        let mut gate = SwitchGate::default();
        assert_eq!(gate.choose(&(mid.clone(), Some(tract)), true, S), Gate::Go { waited: None });
        gate.answered(&mid, Some(Engine::Tract));
        let moved = gate.choose(&(mid.clone(), Some(ort)), true, 2 * S);
        assert_eq!(
            moved,
            Gate::Hold { cut: mid.clone(), engines: Some(tract), build: Some((mid.clone(), Some(ort))) }
        );
        // Built on tract only: still held.
        gate.handheld_prepared(mid.key(), Some(Engine::Tract), None);
        assert!(matches!(gate.choose(&(mid.clone(), Some(ort)), true, 3 * S), Gate::Hold { .. }));
        gate.handheld_prepared(mid.key(), Some(Engine::OnnxRuntime), None);
        assert_eq!(gate.choose(&(mid.clone(), Some(ort)), true, 4 * S), Gate::Go { waited: Some(2 * S) });
    }
}
