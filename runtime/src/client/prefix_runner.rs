//! The watch's prefix runner: in a pipelined stream a frame's prefix runs,
//! and its crossing tensors are packed, on a thread of their own (a frame
//! run whole is a prefix of every layer, packing nothing), so that the app
//! thread plans the next frame, sends, checks answers and learns beside it
//! (as the handheld's runner runs suffixes beside its connection's task).
//! One job runs at a time, in the order given: the watch has one compute
//! stage. Results come back in that order.

use std::collections::{BTreeMap, VecDeque};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel as cb;

use crate::{Cut, Error, LayerGraph, Model, ModelError, Result, SplitPlan, Values};
use tandem_proto::encoding::{Encoding, Widening};
use tandem_proto::protocol::PackedTensor;

/// One frame's prefix to run and pack.
pub(super) struct Job {
    pub frame: u64,
    /// The cut's prefix plan (its cut is the job's).
    pub plan: Arc<SplitPlan>,
    pub inputs: Values,
    /// The compute dilation it runs at (the watch's, times a DVFS
    /// setting's scale where one is emulated).
    pub dilation: f64,
    /// That dilation over the watch's own: the run's time divided by it is
    /// the time at the inference setting (what the predictors hold).
    pub scale: f64,
    /// Each crossing tensor's encoding, in the cut's order.
    pub encodings: Vec<Encoding>,
}

/// A prefix run and its crossing tensors packed.
pub(super) struct Prefix {
    /// Every value the prefix produced.
    pub up: Values,
    pub packed: Vec<PackedTensor>,
    /// The crossing tensors' size before encoding.
    pub raw_bytes: u64,
    /// The prefix's compute alone at the inference setting.
    pub at_default: Duration,
    /// The prefix and its packing as they ran: the frame's wearable stage.
    pub wearable: Duration,
}

/// What packing needs beside a prefix's values: the watch's dilation
/// (encoding is the watch's work) and the sensor inputs' widenings.
#[derive(Clone)]
pub(super) struct Packing {
    pub dilation: f64,
    pub widenings: Arc<BTreeMap<String, Widening>>,
}

/// Runs `job`'s prefix and packs what it sends up.
pub(super) fn run(graph: &LayerGraph, packing: &Packing, job: &Job) -> Result<Prefix> {
    let started = Instant::now();
    let up = job.plan.run_prefix_dilated(graph, &job.inputs, job.dilation)?;
    let took = started.elapsed();
    let (packed, raw_bytes) = pack(graph, packing, job.plan.cut(), &up, &job.encodings)?;
    Ok(Prefix { up, packed, raw_bytes, at_default: took.div_f64(job.scale), wearable: started.elapsed() })
}

/// Packs (encodes) the tensors `cut` sends up, from the prefix's values
/// `up`, each in its encoding: the watch's work, dilated as such.
/// Returns them and their raw size.
pub(super) fn pack(
    graph: &LayerGraph,
    packing: &Packing,
    cut: &Cut,
    up: &Values,
    encodings: &[Encoding],
) -> Result<(Vec<PackedTensor>, u64)> {
    let mut raw_bytes = 0u64;
    let mut clock = tandem_core::device_clock::DeviceClock::start(packing.dilation);
    let packed = clock.time(|| {
        let mut packed = vec![];
        for (&t, &encoding) in cut.up_tensors().iter().zip(encodings) {
            let name = &graph.tensor(t).name;
            let v = up.get(name).ok_or_else(|| ModelError::MissingTensor(name.clone()))?;
            raw_bytes += v.as_bytes().len() as u64;
            let wire = tandem_core::wire::to_wire(v)?;
            let p = tandem_proto::protocol::pack_tensor(name, &wire, encoding, packing.widenings.get(name))
                .map_err(|source| Error::Pack { tensor: name.clone(), source })?;
            packed.push(p);
        }
        Ok::<_, Error>(packed)
    })?;
    clock.finish();
    Ok((packed, raw_bytes))
}

/// The runner's thread, the jobs given to it and not yet returned.
pub(super) struct PrefixRunner {
    jobs: cb::Sender<Job>,
    done: cb::Receiver<(u64, Result<Prefix>)>,
    /// Frames given and not yet returned, oldest first.
    pending: VecDeque<u64>,
}

impl PrefixRunner {
    /// Starts the thread for `model`'s prefixes. It ends when the runner
    /// is dropped, after the job it is running.
    pub fn spawn(model: Model, packing: Packing) -> std::io::Result<PrefixRunner> {
        let (jobs, job_rx) = cb::unbounded::<Job>();
        let (done_tx, done) = cb::unbounded();
        std::thread::Builder::new().name("tandem-prefix".into()).spawn(move || {
            for job in job_rx {
                let graph = model.graph();
                // A panic in an engine fails its frame, not the session.
                let result = std::panic::catch_unwind(AssertUnwindSafe(|| run(graph, &packing, &job)))
                    .unwrap_or_else(|_| Err(Error::PrefixRunner("it panicked")));
                if done_tx.send((job.frame, result)).is_err() {
                    return;
                }
            }
        })?;
        Ok(PrefixRunner { jobs, done, pending: VecDeque::new() })
    }

    /// Gives it a job; it runs after those given before.
    pub fn submit(&mut self, job: Job) {
        let frame = job.frame;
        // The thread ends only when this runner is dropped (or panicked
        // outside a job): a job it cannot take fails in `next_done`.
        let _ = self.jobs.send(job);
        self.pending.push_back(frame);
    }

    /// Jobs given and not yet returned.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Where finished jobs arrive (to wait on beside other channels);
    /// what is received goes to [`PrefixRunner::take`].
    pub fn done(&self) -> &cb::Receiver<(u64, Result<Prefix>)> {
        &self.done
    }

    /// The oldest job's result if it is done, or `None`.
    pub fn try_done(&mut self) -> Option<(u64, Result<Prefix>)> {
        self.pending.front()?;
        let got = self.done.try_recv().map_err(|e| e.is_disconnected());
        self.take(got)
    }

    /// The oldest job's result, once it is done; `None` when no job is
    /// pending.
    pub fn wait_done(&mut self) -> Option<(u64, Result<Prefix>)> {
        self.pending.front()?;
        let got = self.done.recv().map_err(|_| true);
        self.take(got)
    }

    /// A result received from [`PrefixRunner::done`] (or why none was:
    /// `Err(true)` when the thread is gone), matched to its job.
    pub fn take(
        &mut self,
        got: std::result::Result<(u64, Result<Prefix>), bool>,
    ) -> Option<(u64, Result<Prefix>)> {
        match got {
            Ok((frame, result)) => {
                let oldest = self.pending.pop_front();
                debug_assert_eq!(oldest, Some(frame), "the runner returns jobs in order");
                Some((frame, result))
            }
            Err(true) => {
                let frame = self.pending.pop_front()?;
                Some((frame, Err(Error::PrefixRunner("its thread is gone"))))
            }
            Err(false) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{InputShapes, Sides};

    /// MNIST from the zoo and its prefix plan at half its work.
    fn mnist() -> (Model, Arc<SplitPlan>) {
        let bytes = tandem_models::ZooSpec::Mnist.build(1).expect("builds");
        let model = Model::from_bytes(&bytes, &InputShapes::none()).expect("loads");
        let cut = Cut::at_flops_fraction(model.graph(), 0.5);
        assert!(!cut.is_wearable_only() && !cut.is_handheld_only());
        let plan = SplitPlan::build_sides(&model, &cut, Sides::Prefix).expect("builds");
        (model, Arc::new(plan))
    }

    fn job(model: &Model, plan: &Arc<SplitPlan>, frame: u64) -> Job {
        Job {
            frame,
            plan: plan.clone(),
            inputs: tandem_core::check::random_inputs(model, frame).expect("inputs"),
            dilation: 1.0,
            scale: 1.0,
            encodings: vec![Encoding::Raw; plan.cut().up_tensors().len()],
        }
    }

    fn packing() -> Packing {
        Packing { dilation: 1.0, widenings: Default::default() }
    }

    #[test]
    fn frames_come_back_in_order_with_what_running_them_here_gives() {
        let (model, plan) = mnist();
        let mut runner = PrefixRunner::spawn(model.clone(), packing()).expect("spawns");
        assert!(runner.try_done().is_none(), "nothing given, nothing back");
        for frame in 1..=4 {
            runner.submit(job(&model, &plan, frame));
        }
        assert_eq!(runner.pending(), 4);
        for frame in 1..=4 {
            let (got, prefix) = runner.wait_done().expect("a job was pending");
            assert_eq!(got, frame, "in the order given");
            let prefix = prefix.expect("runs");
            let here = run(model.graph(), &packing(), &job(&model, &plan, frame)).expect("runs");
            let bytes = |p: &Prefix| p.packed.iter().map(|t| t.bytes.clone()).collect::<Vec<_>>();
            assert_eq!(bytes(&prefix), bytes(&here), "frame {frame}: the same tensors cross");
            assert_eq!(prefix.raw_bytes, here.raw_bytes);
            assert!(prefix.raw_bytes > 0);
            assert!(prefix.at_default <= prefix.wearable, "packing is in the stage, not the prefix's time");
        }
        assert_eq!(runner.pending(), 0);
        assert!(runner.wait_done().is_none(), "nothing pending: no wait");
    }

    #[test]
    fn a_failing_prefix_fails_its_frame_alone() {
        let (model, plan) = mnist();
        let mut runner = PrefixRunner::spawn(model.clone(), packing()).expect("spawns");
        let mut bad = job(&model, &plan, 1);
        bad.inputs.clear();
        runner.submit(bad);
        runner.submit(job(&model, &plan, 2));
        let (frame, result) = runner.wait_done().expect("pending");
        let err = result.err().expect("no inputs: an error");
        assert_eq!(frame, 1);
        assert!(err.to_string().contains("missing tensor 'input'"), "the error names what is missing: {err}");
        let (frame, result) = runner.wait_done().expect("pending");
        assert_eq!(frame, 2);
        assert!(result.is_ok(), "the next frame runs");
    }

    #[test]
    fn a_thread_gone_fails_the_oldest_frame_given() {
        let (model, plan) = mnist();
        let mut runner = PrefixRunner::spawn(model.clone(), packing()).expect("spawns");
        runner.submit(job(&model, &plan, 7));
        runner.submit(job(&model, &plan, 8));
        let (frame, result) = runner.take(Err(true)).expect("a frame was pending");
        assert_eq!(frame, 7);
        assert!(matches!(result, Err(Error::PrefixRunner(_))));
        assert!(runner.take(Err(false)).is_none(), "not done is not failed");
        assert_eq!(runner.pending(), 1);
    }

    #[test]
    fn a_scale_divides_the_prefix_time_and_dilation_stretches_the_stage() {
        let (model, plan) = mnist();
        let mut slow = job(&model, &plan, 1);
        (slow.dilation, slow.scale) = (4.0, 4.0);
        let p = run(model.graph(), &packing(), &slow).expect("runs");
        // Dilated 4×: the run took 4× its compute; at the inference
        // setting that is the compute again, a quarter of the stage.
        assert!(
            p.at_default.as_secs_f64() <= p.wearable.as_secs_f64() / 3.0,
            "{:?} of {:?}",
            p.at_default,
            p.wearable
        );
    }
}
