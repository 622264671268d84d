//! An emulated device's clock: work on a device `factor` times slower than
//! this host takes `factor` times the CPU time its thread spent on it here.
//!
//! The emulated watch and phone share this host's cores with each other,
//! with the bench and with plans built ahead. Stretching the wall time a
//! run took here would stretch that contention too, `factor` times over (a
//! watch 8× slower than the host loses 8 ms for each 1 ms its thread
//! waited for a core). The thread's own CPU time is what the work cost, so
//! the device's clock is that, times `factor`; waiting for a core is
//! absorbed by sleeping less. The thread's and the process's CPU time are
//! read here too (the bench reads the latter).

use std::time::{Duration, Instant};

/// The clock of work running on this thread as on a device `factor` times
/// slower: each step of it through [`DeviceClock::time`], then
/// [`DeviceClock::finish`]. Only the steps are stretched: what runs
/// between them (an engine's own bookkeeping between nodes) is the
/// host's, as the device profiles' calibration measured it.
#[derive(Debug)]
#[must_use = "a device clock sleeps what it owes at `finish`"]
pub struct DeviceClock {
    factor: f64,
    /// Seconds owed the device: each step's `factor` × CPU time less the
    /// wall time it took here, less what was slept (an overslept sleep,
    /// and a step that waited for a core, carried as a negative).
    owed: f64,
}

/// Owed time is slept once it reaches this, and the rest at the end.
const SLEEP_FROM_S: f64 = 1e-3;

impl DeviceClock {
    /// Starts the clock of work about to run on this thread (a `factor` of
    /// 1 or less, infinite or NaN is this host: nothing is timed or slept).
    pub fn start(factor: f64) -> DeviceClock {
        DeviceClock { factor: factor_of(factor), owed: 0.0 }
    }

    /// Work of the device's that another thread did, at this host's speed,
    /// with `cpu` of its CPU time, before this one waited for it: the rest
    /// of the device's time is owed here.
    pub fn ran_elsewhere(&mut self, cpu: Duration) {
        if self.factor > 1.0 {
            self.owed += cpu.as_secs_f64() * (self.factor - 1.0);
        }
    }

    /// Runs a step of the work, then sleeps what the device owes once that
    /// reaches 1 ms.
    pub fn time<R>(&mut self, step: impl FnOnce() -> R) -> R {
        if self.factor <= 1.0 {
            return step();
        }
        let (wall, cpu) = (Instant::now(), thread_cpu_time());
        let r = step();
        let took = wall.elapsed().as_secs_f64();
        let cost = (thread_cpu_time().saturating_sub(cpu).as_secs_f64() - read_cost_s()).max(0.0);
        self.owed += cost * self.factor - took;
        if self.owed >= SLEEP_FROM_S {
            self.sleep_owed();
        }
        r
    }

    /// Ends the work: sleeps what the device still owes.
    pub fn finish(mut self) {
        if self.owed > 0.0 {
            self.sleep_owed();
        }
    }

    fn sleep_owed(&mut self) {
        let slept = Instant::now();
        std::thread::sleep(Duration::try_from_secs_f64(self.owed).unwrap_or(Duration::MAX));
        self.owed -= slept.elapsed().as_secs_f64();
    }
}

/// What reading the CPU clock costs inside the window it measures (a
/// system call, about 0.2 µs here: two per node of a model with hundreds,
/// 1% of PP-OCR's run at 8×, when counted as the device's): the least of a
/// few back-to-back reads, measured once.
fn read_cost_s() -> f64 {
    static COST: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *COST.get_or_init(|| {
        (0..32)
            .map(|_| {
                let a = thread_cpu_time();
                thread_cpu_time().saturating_sub(a).as_secs_f64()
            })
            .fold(1e-5, f64::min)
    })
}

/// An emulated device's factor as given: a finite slowdown of at least 1,
/// else (less than 1, infinite or NaN) this host's, 1.
pub fn factor_of(slowdown: f64) -> f64 {
    if slowdown.is_finite() {
        slowdown.max(1.0)
    } else {
        1.0
    }
}

/// The CPU time this thread has used so far.
pub fn thread_cpu_time() -> Duration {
    cpu_time(rustix::time::ClockId::ThreadCPUTime)
}

/// This process's CPU time so far, every thread's.
pub fn process_cpu_time() -> Duration {
    cpu_time(rustix::time::ClockId::ProcessCPUTime)
}

fn cpu_time(clock: rustix::time::ClockId) -> Duration {
    let t = rustix::time::clock_gettime(clock);
    Duration::new(t.tv_sec.max(0) as u64, t.tv_nsec.clamp(0, 999_999_999) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spins this thread for about `d` of its CPU time.
    fn spin(d: Duration) {
        let start = thread_cpu_time();
        while thread_cpu_time().saturating_sub(start) < d {}
    }

    #[test]
    fn work_takes_the_factor_times_its_cpu_time() {
        let (started, cpu) = (Instant::now(), thread_cpu_time());
        let mut clock = DeviceClock::start(3.0);
        for _ in 0..4 {
            clock.time(|| spin(Duration::from_millis(2)));
        }
        clock.finish();
        let used = thread_cpu_time().saturating_sub(cpu).as_secs_f64();
        let took = started.elapsed().as_secs_f64();
        assert!(took >= 3.0 * used * 0.95, "took {took} s for {used} s of CPU at 3x");
    }

    /// A step that waited without running (as a thread waits for a core
    /// taken by another process) is not stretched: the device's time is its
    /// CPU time's, and the wait is slept off, in that step and the next.
    /// Stretching the wall time would take at least twice the wait at 2x.
    #[test]
    fn time_spent_waiting_for_a_core_is_not_stretched() {
        let wait = Duration::from_millis(60);
        let started = Instant::now();
        let mut clock = DeviceClock::start(2.0);
        clock.time(|| {
            spin(Duration::from_millis(2));
            std::thread::sleep(wait);
        });
        clock.time(|| spin(Duration::from_millis(2)));
        clock.finish();
        let took = started.elapsed();
        assert!(
            took >= wait && took < wait.mul_f64(1.8),
            "took {took:?} for a {wait:?} wait and 4 ms of CPU at 2x"
        );
    }

    /// Only the steps are stretched: time between them is the host's.
    #[test]
    fn what_runs_between_steps_is_not_stretched() {
        let started = Instant::now();
        let mut clock = DeviceClock::start(4.0);
        clock.time(|| spin(Duration::from_millis(1)));
        let between = Instant::now();
        spin(Duration::from_millis(20));
        let between = between.elapsed();
        clock.finish();
        let rest = started.elapsed().saturating_sub(between);
        // The step's 4 ms; stretching what ran between would add 60 ms.
        assert!(rest < Duration::from_millis(30), "{rest:?} besides {between:?} between the steps");
    }

    /// Work another thread did is owed at `factor − 1` times its CPU time.
    #[test]
    fn work_done_elsewhere_is_owed_the_rest_of_the_device_time() {
        let started = Instant::now();
        let mut clock = DeviceClock::start(3.0);
        clock.ran_elsewhere(Duration::from_millis(10));
        assert!((clock.owed - 0.020).abs() < 1e-9, "{}", clock.owed);
        clock.finish();
        assert!(started.elapsed() >= Duration::from_millis(20), "{:?}", started.elapsed());
    }

    #[test]
    fn this_host_sleeps_nothing() {
        for factor in [1.0, 0.5, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let mut clock = DeviceClock::start(factor);
            assert_eq!(clock.factor, 1.0, "{factor}");
            clock.time(|| spin(Duration::from_millis(1)));
            clock.ran_elsewhere(Duration::from_secs(1));
            assert_eq!(clock.owed, 0.0, "{factor}");
        }
    }
}
