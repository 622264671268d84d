//! Energy measured by a fuel gauge, with no I/O: the I/O shell reads the
//! battery's sysfs counters once per frame and feeds them here with the
//! time; [`FuelMeter`] turns them into joules over windows of frames.
//!
//! Three kinds of gauge, by what the battery's `power_supply` folder has:
//! `energy_now` (µWh, falling as it discharges), `charge_now` (µAh) with
//! `voltage_now` (µV), or `current_now` (µA) with `voltage_now`, whose
//! power is integrated between samples (trapezoids; the current's sign
//! differs between drivers, so its magnitude is used). A window in which a
//! counter rose (the battery was charging) or did not move (a coarse gauge)
//! measures nothing and is counted apart, and so does a window the shell
//! interrupts because the supply says it is charging ([`FuelMeter::interrupt`]).

use std::time::Duration;

use serde::Serialize;

/// One reading of the gauge.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum GaugeReading {
    /// `energy_now`, in µWh.
    Energy {
        /// Remaining energy, µWh.
        uwh: f64,
    },
    /// `charge_now` (µAh) and `voltage_now` (µV).
    Charge {
        /// Remaining charge, µAh.
        uah: f64,
        /// Voltage, µV.
        uv: f64,
    },
    /// `current_now` (µA) and `voltage_now` (µV).
    Power {
        /// Current, µA (either sign).
        ua: f64,
        /// Voltage, µV.
        uv: f64,
    },
}

impl GaugeReading {
    /// What kind of gauge this is, for reports.
    pub fn source(&self) -> &'static str {
        match self {
            GaugeReading::Energy { .. } => "energy_now",
            GaugeReading::Charge { .. } => "charge_now x voltage_now",
            GaugeReading::Power { .. } => "current_now x voltage_now, integrated",
        }
    }

    fn is_finite(&self) -> bool {
        match *self {
            GaugeReading::Energy { uwh } => uwh.is_finite(),
            GaugeReading::Charge { uah, uv } => uah.is_finite() && uv.is_finite(),
            GaugeReading::Power { ua, uv } => ua.is_finite() && uv.is_finite(),
        }
    }
}

/// What the windows measured so far.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Measured {
    /// The gauge read (`energy_now`, ...).
    pub source: String,
    /// Joules over the windows that measured something.
    pub joules: f64,
    /// Frames in those windows.
    pub frames: u64,
    /// Seconds those windows lasted.
    pub seconds: f64,
    /// Windows that measured something.
    pub windows: u64,
    /// Windows that did not: the counter rose (charging) or did not move.
    pub windows_unmeasured: u64,
}

impl Measured {
    /// Measured joules per frame, when any window measured something.
    pub fn j_per_frame(&self) -> Option<f64> {
        (self.frames > 0).then(|| self.joules / self.frames as f64)
    }

    /// Mean power over the measured windows (W).
    pub fn watts(&self) -> Option<f64> {
        (self.seconds > 0.0).then(|| self.joules / self.seconds)
    }
}

/// Joules over windows of frames, from gauge readings.
#[derive(Clone, Debug)]
pub struct FuelMeter {
    window: u64,
    start: Option<(Duration, GaugeReading)>,
    last: Option<(Duration, GaugeReading)>,
    frames: u64,
    /// ∫ P dt since the window started (power gauges), joules.
    integrated_j: f64,
    measured: Measured,
}

/// J per µWh.
const J_PER_UWH: f64 = 3.6e-3;

impl FuelMeter {
    /// A meter closing a window every `window` frames (at least 1).
    pub fn new(window: u64) -> FuelMeter {
        FuelMeter {
            window: window.max(1),
            start: None,
            last: None,
            frames: 0,
            integrated_j: 0.0,
            measured: Measured::default(),
        }
    }

    /// A reading at `t` (a monotonic time). Call it once before the first
    /// frame, then after each frame with `frame_done`. A reading of another
    /// kind than the window's, or not finite, restarts the window.
    pub fn sample(&mut self, t: Duration, reading: GaugeReading, frame_done: bool) {
        let same_kind = |a: &GaugeReading| std::mem::discriminant(a) == std::mem::discriminant(&reading);
        if !reading.is_finite() || self.start.is_some_and(|(_, s)| !same_kind(&s)) {
            self.restart(t, reading);
            return;
        }
        let Some((t0, first)) = self.start else {
            self.restart(t, reading);
            return;
        };
        if let (Some((tl, GaugeReading::Power { ua: a0, uv: v0 })), GaugeReading::Power { ua, uv }) =
            (self.last, reading)
        {
            let dt = t.saturating_sub(tl).as_secs_f64();
            let p = |ua: f64, uv: f64| ua.abs() * 1e-6 * uv * 1e-6;
            self.integrated_j += 0.5 * (p(a0, v0) + p(ua, uv)) * dt;
        }
        self.last = Some((t, reading));
        if frame_done {
            self.frames += 1;
        }
        if self.frames < self.window {
            return;
        }
        let joules = match (first, reading) {
            (GaugeReading::Energy { uwh: e0 }, GaugeReading::Energy { uwh: e1 }) => (e0 - e1) * J_PER_UWH,
            (GaugeReading::Charge { uah: q0, uv: v0 }, GaugeReading::Charge { uah: q1, uv: v1 }) => {
                (q0 - q1) * 0.5 * (v0 + v1) * 1e-6 * J_PER_UWH
            }
            _ => self.integrated_j,
        };
        self.measured.source = reading.source().to_string();
        if joules > 0.0 {
            self.measured.joules += joules;
            self.measured.frames += self.frames;
            self.measured.seconds += t.saturating_sub(t0).as_secs_f64();
            self.measured.windows += 1;
        } else {
            self.measured.windows_unmeasured += 1;
        }
        self.restart(t, reading);
    }

    /// The gauge cannot measure the device now (the battery is charging):
    /// the open window, if it held frames, is counted as unmeasured and
    /// dropped; the next reading starts a new one.
    pub fn interrupt(&mut self) {
        if self.start.is_some() && self.frames > 0 {
            self.measured.windows_unmeasured += 1;
        }
        self.start = None;
        self.last = None;
        self.frames = 0;
        self.integrated_j = 0.0;
    }

    /// Starts a new window at `t` (what the open one held is dropped: time
    /// between streams is not counted).
    pub fn begin(&mut self, t: Duration, reading: GaugeReading) {
        self.restart(t, reading);
    }

    fn restart(&mut self, t: Duration, reading: GaugeReading) {
        self.start = reading.is_finite().then_some((t, reading));
        self.last = self.start;
        self.frames = 0;
        self.integrated_j = 0.0;
    }

    /// What the closed windows measured.
    pub fn measured(&self) -> &Measured {
        &self.measured
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn constant_power_integrates_to_power_times_time() {
        // 0.5 A at 4 V = 2 W, sampled every 100 ms, windows of 5 frames.
        let mut m = FuelMeter::new(5);
        let r = GaugeReading::Power { ua: -500_000.0, uv: 4_000_000.0 };
        m.sample(ms(0), r, false);
        for i in 1..=10 {
            m.sample(ms(100 * i), r, true);
        }
        let got = m.measured();
        assert_eq!((got.windows, got.frames), (2, 10));
        assert!((got.joules - 2.0).abs() < 1e-9, "2 W for 1 s: {}", got.joules);
        assert!((got.j_per_frame().expect("frames") - 0.2).abs() < 1e-9);
        assert!((got.watts().expect("seconds") - 2.0).abs() < 1e-9);
        assert_eq!(got.source, "current_now x voltage_now, integrated");
    }

    #[test]
    fn energy_and_charge_counters_give_their_drop() {
        let mut m = FuelMeter::new(2);
        // 1 µWh = 3.6 mJ: a drop of 1000 µWh over 2 frames is 3.6 J.
        m.sample(ms(0), GaugeReading::Energy { uwh: 5_000_000.0 }, false);
        m.sample(ms(500), GaugeReading::Energy { uwh: 4_999_500.0 }, true);
        m.sample(ms(1000), GaugeReading::Energy { uwh: 4_999_000.0 }, true);
        assert!((m.measured().joules - 3.6).abs() < 1e-9, "{:?}", m.measured());
        // 100 µAh at 4 V = 400 µWh = 1.44 J.
        let mut m = FuelMeter::new(1);
        m.sample(ms(0), GaugeReading::Charge { uah: 1000.0, uv: 4e6 }, false);
        m.sample(ms(100), GaugeReading::Charge { uah: 900.0, uv: 4e6 }, true);
        assert!((m.measured().joules - 1.44).abs() < 1e-9, "{:?}", m.measured());
    }

    #[test]
    fn charging_or_still_counters_measure_nothing_and_bad_readings_restart() {
        let mut m = FuelMeter::new(1);
        m.sample(ms(0), GaugeReading::Energy { uwh: 100.0 }, false);
        m.sample(ms(10), GaugeReading::Energy { uwh: 200.0 }, true); // charging
        m.sample(ms(20), GaugeReading::Energy { uwh: 200.0 }, true); // did not move
        assert_eq!((m.measured().windows, m.measured().windows_unmeasured), (0, 2));
        assert_eq!(m.measured().j_per_frame(), None);
        // A NaN, or a reading of another kind, starts the window again.
        m.sample(ms(30), GaugeReading::Energy { uwh: f64::NAN }, true);
        m.sample(ms(40), GaugeReading::Power { ua: 1e6, uv: 1e6 }, true);
        m.sample(ms(50), GaugeReading::Energy { uwh: 150.0 }, true);
        assert_eq!(m.measured().windows, 0, "{:?}", m.measured());
        m.sample(ms(60), GaugeReading::Energy { uwh: 100.0 }, true);
        assert_eq!(m.measured().windows, 1);
        assert!((m.measured().joules - 50.0 * 3.6e-3).abs() < 1e-12);
        // Charging mid-window: that window is lost, the next one counts.
        let mut m = FuelMeter::new(2);
        let p = GaugeReading::Power { ua: 1e6, uv: 1e6 };
        m.sample(ms(0), p, false);
        m.sample(ms(100), p, true);
        m.interrupt();
        m.sample(ms(200), p, true); // starts a new window
        m.sample(ms(300), p, true);
        m.sample(ms(400), p, true);
        assert_eq!((m.measured().windows, m.measured().windows_unmeasured), (1, 1), "{:?}", m.measured());
        assert!((m.measured().joules - 0.2).abs() < 1e-12, "1 W over 200 ms: {:?}", m.measured());
    }
}
