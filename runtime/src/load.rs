//! The handheld's CPU load: generated for load studies ([`LoadGenerator`]),
//! and measured as the share of a core a new thread gets ([`LoadMeter`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tandem_core::device_clock::{factor_of, thread_cpu_time};

/// A background CPU load for load studies: `threads` threads, each busy
/// for `share` of every 10 ms period. Stops when dropped.
#[derive(Debug)]
pub struct LoadGenerator {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl LoadGenerator {
    /// Starts the load (`share` in [0, 1]).
    pub fn start(share: f64, threads: usize) -> LoadGenerator {
        let stop = Arc::new(AtomicBool::new(false));
        let share = share.clamp(0.0, 1.0);
        let period = Duration::from_millis(10);
        let threads = (0..threads)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let start = Instant::now();
                        let busy = period.mul_f64(share);
                        spin(busy);
                        let rest = period.saturating_sub(start.elapsed());
                        if !rest.is_zero() {
                            std::thread::sleep(rest);
                        }
                    }
                })
            })
            .collect();
        LoadGenerator { stop, threads }
    }
}

impl Drop for LoadGenerator {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Keeps this thread busy for `wall` of wall-clock time.
fn spin(wall: Duration) {
    let start = Instant::now();
    let mut x = 0u64;
    while start.elapsed() < wall {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
}

/// The share of a core this thread got while spinning for `window`: its
/// CPU time over the wall-clock time (1 on an idle core; 0.5 beside one
/// busy thread under a fair scheduler).
pub fn core_share(window: Duration) -> f64 {
    let (wall0, cpu0) = (Instant::now(), thread_cpu_time());
    spin(window);
    let (wall, cpu) = (wall0.elapsed(), thread_cpu_time().saturating_sub(cpu0));
    (cpu.as_secs_f64() / wall.as_secs_f64().max(1e-9)).clamp(0.0, 1.0)
}

/// The load a share of a core means under processor sharing, as the
/// planner reads it (a suffix takes 1 / (1 − load) longer): 1 − share,
/// at most 0.95.
pub fn load_of_share(share: f64) -> f64 {
    (1.0 - share).clamp(0.0, 0.95)
}

/// The background load's share of a core as given (0–0.95; anything not
/// finite is none): what [`crate::server::ServerConfig::background_load`]
/// means.
pub fn background_share(load: f64) -> f64 {
    if load.is_finite() {
        load.clamp(0.0, 0.95)
    } else {
        0.0
    }
}

/// The share of a core `s` measured on this host, as an emulated handheld
/// `slowdown` times slower than it, under its `background_load`, gets it:
/// the device clock absorbs waits for a core up to `slowdown` times the
/// work's CPU time, and the background load leaves it `1 − load`. A
/// suffix's own sample reads this by construction; the idle probe's is
/// folded the same way, so both measure one thing. This host's share where
/// nothing is emulated (`slowdown` 1, no background load).
pub fn emulated_share(s: f64, slowdown: f64, background_load: f64) -> f64 {
    (s * factor_of(slowdown)).min(1.0 - background_share(background_load))
}

/// The CPU load as the share of a core that work gets, averaged over
/// samples from two sources: the frames' own runs ([`LoadMeter::observe`]:
/// a suffix's CPU time over its wall-clock time), and, while no frame runs
/// (this process's own work is not load), a probe on a thread of its own
/// that spins for [`LoadMeter::WINDOW`] every interval. The probe's window
/// is long beside a scheduler's wake-up credit (a thread that slept runs
/// first for a few ms), which would hide the load. Stops when dropped.
#[derive(Debug)]
pub struct LoadMeter {
    share: Arc<Mutex<Option<f64>>>,
    /// Dropped to stop the probe at once (it waits on the channel).
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn fold(share: &Mutex<Option<f64>>, s: f64) {
    let mut avg = share.lock().unwrap_or_else(|p| p.into_inner());
    let s = s.clamp(0.0, 1.0);
    *avg = Some(avg.map_or(s, |a| a + LoadMeter::ALPHA * (s - a)));
}

impl LoadMeter {
    /// Each probe's spin.
    pub const WINDOW: Duration = Duration::from_millis(10);
    /// The moving average's weight of a new sample.
    pub const ALPHA: f64 = 0.2;

    /// Starts measuring, probing every `interval` while `idle` (before
    /// and after the probe: a frame that ran meanwhile spoils the sample),
    /// each probe's share as a handheld `(slowdown, background_load)`
    /// gets it ([`emulated_share`]); the load reads 0 until the first
    /// sample.
    pub fn start(
        interval: Duration,
        (slowdown, background_load): (f64, f64),
        idle: impl Fn() -> bool + Send + 'static,
    ) -> LoadMeter {
        use std::sync::mpsc::RecvTimeoutError;
        let share = Arc::new(Mutex::new(None));
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let thread = {
            let share = share.clone();
            std::thread::spawn(move || {
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(interval) {
                    if idle() {
                        let s = emulated_share(core_share(Self::WINDOW), slowdown, background_load);
                        if idle() {
                            fold(&share, s);
                        }
                    }
                }
            })
        };
        LoadMeter { share, stop: Some(stop), thread: Some(thread) }
    }

    /// Folds in a run's share of a core: its thread's CPU time over its
    /// wall-clock time (time it slept on purpose left out).
    pub fn observe(&self, cpu: Duration, wall: Duration) {
        if wall >= Duration::from_micros(100) {
            fold(&self.share, cpu.as_secs_f64() / wall.as_secs_f64());
        }
    }

    /// The load measured so far, in [0, 0.95].
    pub fn load(&self) -> f64 {
        let share = *self.share.lock().unwrap_or_else(|p| p.into_inner());
        share.map_or(0.0, load_of_share)
    }
}

impl Drop for LoadMeter {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_fold_into_the_average() {
        let started = Instant::now();
        let m = LoadMeter::start(Duration::from_secs(3600), (1.0, 0.0), || false);
        assert_eq!(m.load(), 0.0);
        m.observe(Duration::from_millis(5), Duration::from_millis(10));
        assert!((m.load() - 0.5).abs() < 1e-9, "{}", m.load());
        // A full share moves the average a fifth of the way.
        m.observe(Duration::from_millis(10), Duration::from_millis(10));
        assert!((m.load() - 0.4).abs() < 1e-9, "{}", m.load());
        // Runs too short to time are left out.
        m.observe(Duration::ZERO, Duration::from_micros(10));
        assert!((m.load() - 0.4).abs() < 1e-9, "{}", m.load());
        // Dropping it stops its probe at once, not after its interval.
        drop(m);
        assert!(started.elapsed() < Duration::from_secs(60), "{:?}", started.elapsed());
    }

    /// An emulated handheld's probe reads the share its work would get:
    /// the background load's, unless this host starves it below what its
    /// slowdown absorbs; this host's own share where nothing is emulated.
    #[test]
    fn a_probe_reads_the_share_an_emulated_handheld_gets() {
        assert!((emulated_share(0.7, 1.0, 0.0) - 0.7).abs() < 1e-12, "this host's");
        assert!((emulated_share(0.7, 4.0, 0.5) - 0.5).abs() < 1e-12, "the background load's");
        assert!((emulated_share(0.1, 4.0, 0.5) - 0.4).abs() < 1e-12, "starved past the slowdown");
        assert!((emulated_share(0.7, 4.0, 0.0) - 1.0).abs() < 1e-12, "waits absorbed");
        assert!((emulated_share(0.7, f64::NAN, f64::NAN) - 0.7).abs() < 1e-12, "nothing emulated");
        assert_eq!(background_share(f64::INFINITY), 0.0);
        assert_eq!(background_share(2.0), 0.95);
    }

    #[test]
    fn load_is_the_share_of_a_core_not_got() {
        assert_eq!(load_of_share(1.0), 0.0);
        assert!((load_of_share(0.4) - 0.6).abs() < 1e-12);
        assert_eq!(load_of_share(0.0), 0.95);
        assert_eq!(load_of_share(1.3), 0.0);
    }

    /// Two threads pinned to one core: each gets about half of it. The
    /// spinner beside it is busy all the time, so the measured share is at
    /// most about 0.5 even on a loaded machine (more load, less share);
    /// a meter that read the wall clock alone would say 1.
    #[test]
    fn a_thread_beside_a_busy_one_on_its_core_gets_about_half() {
        use rustix::thread::{sched_getaffinity, sched_setaffinity, CpuSet};
        let Ok(mine) = sched_getaffinity(None) else { return };
        let Some(cpu) = (0..CpuSet::MAX_CPU).find(|&c| mine.is_set(c)) else { return };
        let mut one = CpuSet::new();
        one.set(cpu);
        let stop = Arc::new(AtomicBool::new(false));
        let busy = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                sched_setaffinity(None, &one).expect("pin to one core");
                while !stop.load(Ordering::Relaxed) {
                    spin(Duration::from_millis(1));
                }
            })
        };
        let measure = move || {
            std::thread::spawn(move || {
                sched_setaffinity(None, &one).expect("pin to one core");
                std::thread::sleep(Duration::from_millis(20));
                core_share(Duration::from_millis(200))
            })
            .join()
            .expect("the meter's thread")
        };
        let beside = measure();
        stop.store(true, Ordering::Relaxed);
        let _ = busy.join();
        // Alone on the core (other tests may share it: the best of three).
        let alone = (0..3).map(|_| measure()).fold(0.0, f64::max);
        assert!(beside < 0.7, "beside a busy thread on its core, a thread got {beside:.2} of it");
        assert!(beside > 0.05, "a fair scheduler gives it some: {beside:.2}");
        assert!(
            alone > beside + 0.05,
            "alone it got {alone:.2} of the core, beside a busy thread {beside:.2}"
        );
    }
}
