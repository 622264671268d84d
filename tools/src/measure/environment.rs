//! What a run needs from its surroundings: root, a clock, and a CPU load pinned to cores.

use super::*;

/// The effective uid of this process.
pub fn current_uid() -> Option<u32> {
    Some(rustix::process::geteuid().as_raw())
}

/// Refuses to drive the real `/sys` (a root that resolves to `/`) unless `uid`
/// is 0. A fixture tree needs no privileges.
pub fn require_root(sysfs_root: &Path, uid: Option<u32>) -> Result<(), CalibrateError> {
    let real = fs::canonicalize(sysfs_root).map_or(sysfs_root == Path::new("/"), |p| p == Path::new("/"));
    if real && uid != Some(0) {
        let uid = uid.map_or_else(|| "an unknown uid".to_string(), |u| format!("uid {u}"));
        return Err(CalibrateError::NotRoot { uid });
    }
    Ok(())
}

/// Time for the driver: real in the CLI, virtual in tests.
pub trait Clock {
    /// Time since the run started.
    fn now(&self) -> Duration;
    /// Waits for `d`.
    fn sleep(&mut self, d: Duration);
}

/// Wall-clock time since it was made.
#[derive(Debug, Clone, Copy)]
pub struct SystemClock(Instant);

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock(Instant::now())
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Duration {
        self.0.elapsed()
    }

    fn sleep(&mut self, d: Duration) {
        std::thread::sleep(d);
    }
}

/// The CPU load of a load phase.
pub trait Stress {
    /// Starts one busy worker per CPU in `cpus`.
    fn start(&mut self, cpus: &[usize]) -> Result<(), CalibrateError>;
    /// Stops every worker; a no-op when none runs.
    fn stop(&mut self);
}

/// Busy-loop threads, each pinned to its CPU with `sched_setaffinity`.
/// Where that fails
/// (e.g. the CPU does not exist on this machine), the worker runs unpinned and
/// its CPU is listed in [`BusyLoop::unpinned`]; with the other cores offline
/// the scheduler has only the target cores to run it on anyway.
#[derive(Debug, Default)]
pub struct BusyLoop {
    stop: Arc<AtomicBool>,
    workers: Vec<JoinHandle<()>>,
    unpinned: BTreeSet<usize>,
}

impl BusyLoop {
    /// No workers yet.
    pub fn new() -> BusyLoop {
        BusyLoop::default()
    }

    /// CPUs whose worker could not be pinned, over the whole run.
    pub fn unpinned(&self) -> &BTreeSet<usize> {
        &self.unpinned
    }
}

impl Stress for BusyLoop {
    fn start(&mut self, cpus: &[usize]) -> Result<(), CalibrateError> {
        self.stop();
        self.stop = Arc::new(AtomicBool::new(false));
        let (pinned_tx, pinned_rx) = mpsc::channel();
        for &cpu in cpus {
            let stop = self.stop.clone();
            let pinned_tx = pinned_tx.clone();
            let worker = std::thread::Builder::new()
                .name(format!("stress-cpu{cpu}"))
                .spawn(move || {
                    let _ = pinned_tx.send((cpu, pin_this_thread(cpu)));
                    drop(pinned_tx);
                    let mut x = 1u64;
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..10_000 {
                            x = std::hint::black_box(
                                x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1),
                            );
                        }
                    }
                })
                .map_err(|source| CalibrateError::Worker { cpu, source })?;
            self.workers.push(worker);
        }
        drop(pinned_tx);
        // Each worker reports once and drops its sender; one that died early just ends the wait.
        for (cpu, pinned) in pinned_rx.iter().take(cpus.len()) {
            if !pinned {
                self.unpinned.insert(cpu);
            }
        }
        Ok(())
    }

    fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
    }
}

impl Drop for BusyLoop {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Pins the calling thread to `cpu`; false when that fails.
pub(super) fn pin_this_thread(cpu: usize) -> bool {
    use rustix::thread::{sched_setaffinity, CpuSet};
    if cpu >= CpuSet::MAX_CPU {
        return false;
    }
    let mut set = CpuSet::new();
    set.set(cpu);
    sched_setaffinity(None, &set).is_ok()
}
