//! The wearable's system profiler (SPEC 2), with no I/O: the session feeds
//! it what it observes (transfers, probe echoes, the handheld's status,
//! battery readings) and reads back a [`LinkEstimate`], a
//! [`HandheldStatus`] and [`EnergyWeights`] for the partitioner's `Planner` (in `tandem-plan`).
//!
//! - **Bandwidth, passively**: every upload's bytes over the time the link
//!   took to carry them, and every lone round trip (nothing else in flight)
//!   minus the handheld's compute and the RTT. Each direction is an EWMA;
//!   a sample more than 4× off the average is rejected as an outlier,
//!   unless three in a row agree (then the link really changed).
//! - **Actively**: when no sample came for `stale_after`, [`LinkProfiler::probe_due`]
//!   asks for a probe: an empty one for the RTT (again whenever the RTT is
//!   older than four times `stale_after`), else one padded to about 50 ms
//!   of the estimated rate. A padded probe answered faster than the RTT
//!   estimate says that estimate is stale (a link that recovered): the
//!   next probe measures the RTT again, and the one after it the rate.
//! - **Battery**: read from sysfs or set by the app; with the handheld's
//!   charging flag and battery it picks the energy weights.

use std::time::Duration;

use crate::protocol::StatusReport;
use tandem_types::{EnergyWeights, HandheldStatus, LinkEstimate};

/// An exponentially weighted average with outlier rejection.
#[derive(Clone, Debug)]
pub struct Ewma {
    value: Option<f64>,
    alpha: f64,
    samples: u32,
    outliers_in_row: u32,
    rejected: u32,
}

impl Ewma {
    /// An empty average; `alpha` weighs the newest sample.
    pub fn new(alpha: f64) -> Ewma {
        Ewma { value: None, alpha: alpha.clamp(0.01, 1.0), samples: 0, outliers_in_row: 0, rejected: 0 }
    }

    /// The average, if any sample was taken.
    pub fn value(&self) -> Option<f64> {
        self.value
    }

    /// Samples rejected as outliers so far.
    pub fn rejected(&self) -> u32 {
        self.rejected
    }

    /// Adds a sample; returns whether it was taken.
    pub fn push(&mut self, x: f64) -> bool {
        if !x.is_finite() || x <= 0.0 {
            return false;
        }
        match self.value {
            None => {
                self.value = Some(x);
                self.samples = 1;
                true
            }
            Some(v) => {
                let outlier = self.samples >= 3 && (x > 4.0 * v || x < v / 4.0);
                if outlier {
                    self.outliers_in_row += 1;
                    if self.outliers_in_row < 3 {
                        self.rejected += 1;
                        return false;
                    }
                    // Three in a row: a level shift, not noise.
                    self.value = Some(x);
                    self.samples = 1;
                    self.outliers_in_row = 0;
                    return true;
                }
                self.outliers_in_row = 0;
                self.value = Some(self.alpha * x + (1.0 - self.alpha) * v);
                self.samples += 1;
                true
            }
        }
    }
}

/// A probe the session should send now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeRequest {
    /// Padding bytes (0: an RTT probe).
    pub bytes: usize,
}

/// What the profiler knows.
#[derive(Clone, Debug)]
pub struct LinkProfiler {
    up: Ewma,
    down: Ewma,
    rtt: Ewma,
    default: LinkEstimate,
    last_sample: Option<Duration>,
    /// When the RTT was last measured.
    last_rtt: Option<Duration>,
    stale_after: Duration,
    status: Option<StatusReport>,
    wearable_battery: Option<(f64, bool)>,
    /// Both batteries' capacities (wearable, handheld; any one unit) when
    /// energy is weighed by them ([`LinkProfiler::weigh_by_capacity`]).
    capacities: Option<(f64, f64)>,
}

/// Smallest transfer taken as a bandwidth sample: below it, fixed costs dominate.
const MIN_SAMPLE_BYTES: u64 = 2048;

impl LinkProfiler {
    /// A profiler assuming `default` until it measures; it probes when no
    /// sample came for `stale_after`. Times are offsets from any fixed origin.
    pub fn new(default: LinkEstimate, stale_after: Duration) -> LinkProfiler {
        LinkProfiler {
            up: Ewma::new(0.3),
            down: Ewma::new(0.3),
            rtt: Ewma::new(0.3),
            default,
            last_sample: None,
            last_rtt: None,
            stale_after,
            status: None,
            wearable_battery: None,
            capacities: None,
        }
    }

    /// The estimate now (measured where measured, else the default).
    pub fn estimate(&self) -> LinkEstimate {
        LinkEstimate {
            up_bytes_per_s: self.up.value().unwrap_or(self.default.up_bytes_per_s),
            down_bytes_per_s: self.down.value().unwrap_or(self.default.down_bytes_per_s),
            rtt: self.rtt.value().map_or(self.default.rtt, Duration::from_secs_f64),
        }
    }

    /// Whether any bandwidth was measured.
    pub fn has_measured(&self) -> bool {
        self.up.value().is_some()
    }

    /// Samples rejected as outliers (up, down, RTT).
    pub fn rejected(&self) -> (u32, u32, u32) {
        (self.up.rejected(), self.down.rejected(), self.rtt.rejected())
    }

    /// `bytes` went up in `took` (the link carried them; no queueing in it).
    pub fn on_upload(&mut self, bytes: u64, took: Duration, now: Duration) {
        if bytes >= MIN_SAMPLE_BYTES && !took.is_zero() && self.up.push(bytes as f64 / took.as_secs_f64()) {
            self.last_sample = Some(now);
        }
    }

    /// A frame was answered with nothing else in flight: `elapsed` from
    /// sending to the result, of which `handheld` was the handheld's compute.
    pub fn on_round_trip(
        &mut self,
        up_bytes: u64,
        down_bytes: u64,
        elapsed: Duration,
        handheld: Duration,
        now: Duration,
    ) {
        let est = self.estimate();
        let transfer = elapsed.as_secs_f64() - handheld.as_secs_f64() - est.rtt.as_secs_f64();
        if transfer <= 0.0 || up_bytes + down_bytes < MIN_SAMPLE_BYTES {
            return;
        }
        // Split the transfer time by the bytes each way at the current rates.
        let t_up = up_bytes as f64 / est.up_bytes_per_s;
        let t_down = down_bytes as f64 / est.down_bytes_per_s;
        let scale = transfer / (t_up + t_down).max(1e-9);
        let mut took = false;
        if up_bytes >= MIN_SAMPLE_BYTES {
            took |= self.up.push(up_bytes as f64 / (t_up * scale));
        }
        if down_bytes >= MIN_SAMPLE_BYTES {
            took |= self.down.push(down_bytes as f64 / (t_down * scale));
        }
        if took {
            self.last_sample = Some(now);
        }
    }

    /// A probe came back after `elapsed`: `up` padding bytes went up, `down` came back.
    pub fn on_echo(&mut self, up: u64, down: u64, elapsed: Duration, now: Duration) {
        let s = elapsed.as_secs_f64();
        if up == 0 && down == 0 {
            // The RTT alone: the rate's estimate is as stale as before.
            if self.rtt.push(s) {
                self.last_rtt = Some(now);
            }
            return;
        }
        let est = self.estimate();
        let transfer = s - est.rtt.as_secs_f64() - down as f64 / est.down_bytes_per_s;
        if transfer <= 0.0 {
            // Faster than the RTT estimate alone: that estimate is stale,
            // so the next probe measures the RTT.
            self.last_rtt = None;
            return;
        }
        if up > 0 && transfer > 0.0 && self.up.push(up as f64 / transfer) {
            self.last_sample = Some(now);
        }
    }

    /// The probe to send now, if the estimate is stale (and nothing else is
    /// using the link).
    pub fn probe_due(&self, now: Duration, link_idle: bool) -> Option<ProbeRequest> {
        if !link_idle {
            return None;
        }
        let stale = self.last_sample.is_none_or(|t| now.saturating_sub(t) >= self.stale_after);
        if !stale {
            return None;
        }
        let rtt_stale = self.last_rtt.is_none_or(|t| now.saturating_sub(t) >= 4 * self.stale_after);
        if self.rtt.value().is_none() || rtt_stale {
            return Some(ProbeRequest { bytes: 0 });
        }
        Some(ProbeRequest { bytes: self.bandwidth_probe_bytes() })
    }

    /// The size of a bandwidth probe: about 50 ms of the current upload
    /// estimate, from 2 KiB to 64 KiB.
    pub fn bandwidth_probe_bytes(&self) -> usize {
        (self.estimate().up_bytes_per_s * 0.05).clamp(2048.0, 64.0 * 1024.0) as usize
    }

    /// The handheld's latest status.
    pub fn on_status(&mut self, status: StatusReport) {
        self.status = Some(status);
    }

    /// The handheld's status for the planner.
    pub fn handheld_status(&self) -> HandheldStatus {
        HandheldStatus { load: self.status.map_or(0.0, |s| f64::from(s.load).clamp(0.0, 1.0)) }
    }

    /// The wearable's battery: level in [0, 1] and whether it charges.
    pub fn on_wearable_battery(&mut self, level: f64, charging: bool) {
        self.wearable_battery = Some((level.clamp(0.0, 1.0), charging));
    }

    /// Weighs each side's energy by the share of its own battery it
    /// spends (joules over capacity, as DeepWear's paper accounts), not by
    /// the batteries' levels: Ww = Cp / (Cw + Cp), Wp = Cw / (Cw + Cp)
    /// for capacities `wearable` and `handheld` (in one unit). Returns
    /// false, and changes nothing, unless both are positive and finite.
    pub fn weigh_by_capacity(&mut self, wearable: f64, handheld: f64) -> bool {
        let fine = |c: f64| c.is_finite() && c > 0.0;
        let ok = fine(wearable) && fine(handheld);
        if ok {
            self.capacities = Some((wearable, handheld));
        }
        ok
    }

    /// Energy weights from both batteries (SPEC 2's policy): a charging
    /// handheld's energy is free (Ww=1, Wp=0); a handheld below 20% weighs
    /// 0.8; a wearable below 20% (handheld fine) weighs 0.8; else, weighed
    /// by capacity ([`LinkProfiler::weigh_by_capacity`]), each side by its
    /// share of the two batteries' capacities, or 0.5 each. A nearly flat
    /// battery is spared whatever its capacity.
    pub fn weights(&self) -> EnergyWeights {
        let low = 0.2;
        match (self.status, self.wearable_battery, self.capacities) {
            (Some(s), _, _) if s.charging => EnergyWeights { wearable: 1.0, handheld: 0.0 },
            (Some(s), _, _) if f64::from(s.battery) < low => EnergyWeights { wearable: 0.2, handheld: 0.8 },
            (_, Some((level, false)), _) if level < low => EnergyWeights { wearable: 0.8, handheld: 0.2 },
            (_, _, Some((w, h))) => EnergyWeights { wearable: h / (w + h), handheld: w / (w + h) },
            _ => EnergyWeights::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn default() -> LinkEstimate {
        LinkEstimate { up_bytes_per_s: 1e5, down_bytes_per_s: 1e5, rtt: Duration::from_millis(20) }
    }

    #[test]
    fn ewma_rejects_outliers_but_follows_a_level_shift() {
        let mut e = Ewma::new(0.3);
        for _ in 0..5 {
            assert!(e.push(100.0));
        }
        assert!(!e.push(1000.0), "a lone 10x sample is an outlier");
        assert_eq!(e.value(), Some(100.0));
        assert!(!e.push(1000.0));
        assert!(e.push(1000.0), "three in a row is a new level");
        assert_eq!(e.value(), Some(1000.0));
        assert!(!e.push(f64::NAN) && !e.push(-1.0));
    }

    #[test]
    fn uploads_and_echoes_measure_the_link() {
        let mut p = LinkProfiler::new(default(), Duration::from_secs(2));
        assert_eq!(p.probe_due(Duration::ZERO, true), Some(ProbeRequest { bytes: 0 }));
        p.on_echo(0, 0, Duration::from_millis(30), Duration::ZERO);
        assert_eq!(p.estimate().rtt, Duration::from_millis(30));
        // 50 kB in 0.5 s: 100 kB/s.
        p.on_upload(50_000, Duration::from_millis(500), Duration::from_secs(1));
        assert!((p.estimate().up_bytes_per_s - 1e5).abs() < 1.0);
        assert_eq!(p.probe_due(Duration::from_secs(2), true), None, "fresh");
        let due = p.probe_due(Duration::from_secs(4), true).expect("stale");
        assert_eq!(due.bytes, 5000);
        assert_eq!(p.probe_due(Duration::from_secs(4), false), None, "busy link");
        // A 20 kB probe that took RTT + 0.1 s: 200 kB/s.
        p.on_echo(20_000, 0, Duration::from_millis(130), Duration::from_secs(5));
        let up = p.estimate().up_bytes_per_s;
        assert!((up - (0.3 * 2e5 + 0.7 * 1e5)).abs() < 1.0, "{up}");
        // An RTT older than 4 × 2 s is measured again.
        assert!(p.probe_due(Duration::from_secs(7), true).is_some_and(|p| p.bytes > 0));
        assert_eq!(p.probe_due(Duration::from_secs(8), true), Some(ProbeRequest { bytes: 0 }));
    }

    /// After a collapse the RTT estimate is high. Once the link recovers, a
    /// padded probe answered faster than that RTT makes the next probe an
    /// RTT probe; then padded probes measure the rate again (each new
    /// level takes three samples in a row, outliers to the old one).
    #[test]
    fn a_recovered_link_is_measured_again() {
        let mut p = LinkProfiler::new(default(), Duration::from_secs(2));
        p.on_echo(0, 0, Duration::from_millis(80), Duration::ZERO);
        for i in 0..4 {
            p.on_upload(6_250, Duration::from_secs(1), Duration::from_secs(i)); // 50 kbit/s
        }
        // Recovered: 5 ms RTT and 5 Mbit/s. Probe as the session does, whenever one is due.
        let (rtt, rate) = (0.005, 625_000.0);
        let mut now = Duration::from_secs(10);
        let mut probes = 0;
        while let Some(probe) = p.probe_due(now, true) {
            probes += 1;
            assert!(probes <= 40, "still probing: {:?}", p.estimate());
            let took = Duration::from_secs_f64(rtt + probe.bytes as f64 / rate);
            now += took;
            p.on_echo(probe.bytes as u64, 0, took, now);
        }
        let e = p.estimate();
        assert!(now < Duration::from_secs(11), "{now:?}");
        assert!(e.rtt < Duration::from_millis(10), "{e:?}");
        assert!(e.up_bytes_per_s > 300_000.0, "{e:?}");
    }

    #[test]
    fn lone_round_trips_split_time_by_bytes() {
        let mut p = LinkProfiler::new(default(), Duration::from_secs(2));
        // 100 kB up, nothing down, 1.02 s - 20 ms RTT - 0 compute = 1 s: 100 kB/s.
        p.on_round_trip(100_000, 0, Duration::from_millis(1020), Duration::ZERO, Duration::ZERO);
        assert!((p.estimate().up_bytes_per_s - 1e5).abs() < 1.0);
        // Compute longer than the round trip: no sample.
        p.on_round_trip(100_000, 0, Duration::from_millis(10), Duration::from_millis(50), Duration::ZERO);
        assert!((p.estimate().up_bytes_per_s - 1e5).abs() < 1.0);
    }

    #[test]
    fn weights_follow_batteries() {
        let mut p = LinkProfiler::new(default(), Duration::from_secs(2));
        assert_eq!(p.weights(), EnergyWeights::default());
        p.on_wearable_battery(0.1, false);
        assert_eq!(p.weights(), EnergyWeights { wearable: 0.8, handheld: 0.2 });
        let status = StatusReport { load: 0.5, queue: 0, battery: 0.1, charging: false };
        p.on_status(status);
        assert_eq!(p.weights(), EnergyWeights { wearable: 0.2, handheld: 0.8 });
        assert_eq!(p.handheld_status().load, 0.5);
        p.on_status(StatusReport { charging: true, ..status });
        assert_eq!(p.weights(), EnergyWeights { wearable: 1.0, handheld: 0.0 });
    }

    #[test]
    fn weights_by_capacity_price_each_battery_share_and_spare_a_flat_one() {
        let mut p = LinkProfiler::new(default(), Duration::from_secs(2));
        p.on_wearable_battery(0.8, false);
        for bad in [0.0, -410.0, f64::NAN, f64::INFINITY] {
            assert!(!p.weigh_by_capacity(bad, 3220.0) && !p.weigh_by_capacity(410.0, bad), "{bad}");
        }
        assert_eq!(p.weights(), EnergyWeights::default(), "refused: by level still");
        // The LG Watch Urbane (410 mAh) and the Nexus 6 (3220 mAh): a
        // joule on the watch weighs 3220/410 of one on the phone.
        assert!(p.weigh_by_capacity(410.0, 3220.0));
        let w = p.weights();
        assert!(
            (w.wearable - 3220.0 / 3630.0).abs() < 1e-12 && (w.handheld - 410.0 / 3630.0).abs() < 1e-12,
            "{w:?}"
        );
        let phone = |battery, charging| StatusReport { load: 0.0, queue: 0, battery, charging };
        p.on_status(phone(0.8, false));
        assert_eq!(p.weights(), w, "both batteries fine: by capacity");
        // A nearly flat battery is spared whatever its capacity, and a
        // charging phone's energy is free.
        p.on_status(phone(0.1, false));
        assert_eq!(p.weights(), EnergyWeights { wearable: 0.2, handheld: 0.8 });
        p.on_status(phone(0.1, true));
        assert_eq!(p.weights(), EnergyWeights { wearable: 1.0, handheld: 0.0 });
        p.on_status(phone(0.8, false));
        p.on_wearable_battery(0.1, false);
        assert_eq!(p.weights(), EnergyWeights { wearable: 0.8, handheld: 0.2 });
    }
}
