//! An emulated device's clock: work on a device `factor` times slower than
//! this host takes `factor` times the CPU time its thread spent on it here.
//!
//! The emulated watch and phone share this host's cores with each other,
//! with the bench and with plans built ahead. Stretching the wall time a
//! run took here would stretch that contention too, `factor` times over (a
//! watch 8× slower than the host loses 8 ms for each 1 ms its thread
//! waited for a core). The thread's own CPU time is what the work cost, so
//! the device's clock is that, times `factor`; waiting for a core is
//! absorbed by sleeping less. Where the platform has no per-thread CPU
//! clock, the wall time of each step is stretched instead.

use std::time::{Duration, Instant};

/// The clock of work running on this thread as on a device `factor` times
/// slower: [`DeviceClock::step`] after each step of it, then
/// [`DeviceClock::finish`].
#[derive(Debug)]
pub struct DeviceClock {
    factor: f64,
    started: Instant,
    /// This thread's CPU time at the start, where the platform tells it.
    cpu: Option<Duration>,
    /// Seconds owed. With a CPU clock: (factor − 1) × the wall time of the
    /// steps since the last sleep, a cue to look at the clocks. Without
    /// one: what is owed, an overslept sleep carried as a negative.
    due: f64,
}

/// Owed time is slept once it reaches this, and the rest at the end.
const SLEEP_FROM_S: f64 = 1e-3;

impl DeviceClock {
    /// Starts the clock of work about to run on this thread (a `factor` of
    /// 1 or less, or NaN, is this host: nothing is slept).
    pub fn start(factor: f64) -> DeviceClock {
        let factor = if factor > 1.0 { factor } else { 1.0 };
        let cpu = if factor > 1.0 { thread_cpu_time() } else { None };
        DeviceClock { factor, started: Instant::now(), cpu, due: 0.0 }
    }

    /// After a step of the work that took `took` of wall time here: sleeps
    /// what the device owes once that reaches 1 ms.
    pub fn step(&mut self, took: Duration) {
        if self.factor > 1.0 {
            self.due += took.as_secs_f64() * (self.factor - 1.0);
            if self.due >= SLEEP_FROM_S {
                self.sleep_owed();
            }
        }
    }

    /// Ends the work: sleeps until it has taken the device's time.
    pub fn finish(mut self) {
        if self.factor > 1.0 {
            self.sleep_owed();
        }
    }

    fn sleep_owed(&mut self) {
        let cpu_owed = self.cpu.zip(thread_cpu_time()).map(|(start, now)| {
            now.saturating_sub(start).as_secs_f64() * self.factor - self.started.elapsed().as_secs_f64()
        });
        let owed = cpu_owed.unwrap_or(self.due);
        self.due = if cpu_owed.is_some() { 0.0 } else { owed };
        if owed > 0.0 {
            let slept = Instant::now();
            std::thread::sleep(Duration::try_from_secs_f64(owed).unwrap_or(Duration::MAX));
            if cpu_owed.is_none() {
                self.due -= slept.elapsed().as_secs_f64();
            }
        }
    }
}

/// The CPU time this thread has used, where the platform has the clock.
#[cfg(unix)]
fn thread_cpu_time() -> Option<Duration> {
    use nix::time::{clock_gettime, ClockId};
    clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID).ok().map(Duration::from)
}

#[cfg(not(unix))]
fn thread_cpu_time() -> Option<Duration> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spins this thread for about `d` of its CPU time.
    fn spin(d: Duration) {
        let start = thread_cpu_time().expect("a thread CPU clock here");
        while thread_cpu_time().expect("clock").saturating_sub(start) < d {}
    }

    #[test]
    fn work_takes_the_factor_times_its_cpu_time() {
        let (started, cpu) = (Instant::now(), thread_cpu_time().expect("a thread CPU clock here"));
        let mut clock = DeviceClock::start(3.0);
        for _ in 0..4 {
            let step = Instant::now();
            spin(Duration::from_millis(2));
            clock.step(step.elapsed());
        }
        clock.finish();
        let used = thread_cpu_time().expect("clock").saturating_sub(cpu).as_secs_f64();
        let took = started.elapsed().as_secs_f64();
        assert!(took >= 3.0 * used * 0.99, "took {took} s for {used} s of CPU at 3x");
    }

    /// A step that waited without running (as a thread waits for a core
    /// taken by another process) is not stretched: the device's time is its
    /// CPU time's, and the wait is slept off. Stretching the wall time would
    /// take at least twice the wait at 2x.
    #[test]
    fn time_spent_waiting_for_a_core_is_not_stretched() {
        let wait = Duration::from_millis(60);
        let started = Instant::now();
        let mut clock = DeviceClock::start(2.0);
        let step = Instant::now();
        spin(Duration::from_millis(2));
        std::thread::sleep(wait);
        clock.step(step.elapsed());
        clock.finish();
        let took = started.elapsed();
        assert!(
            took >= wait && took < wait.mul_f64(1.5),
            "took {took:?} for a {wait:?} wait and 2 ms of CPU at 2x"
        );
    }

    #[test]
    fn this_host_sleeps_nothing() {
        for factor in [1.0, 0.5, f64::NAN] {
            let clock = DeviceClock::start(factor);
            assert_eq!((clock.factor, clock.cpu), (1.0, None));
        }
    }
}
