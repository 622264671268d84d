//! A frame's accounting, turned into its [`FrameReport`] in one place:
//! where it ran and why, its measured stages, its bytes, and their
//! model-based energy ([`CutPrice::of_stages`], the partitioner's formula).

use std::time::Duration;

use super::report::FrameReport;
use crate::engine::Engines;
use crate::CutKey;
use tandem_plan::energy::{CutPrice, EnergyModel};
use tandem_plan::partition::LinkEstimate;

/// Where a frame ran.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Ran {
    /// The handheld answered it.
    Offloaded,
    /// It ran here from the start, for this reason.
    Local(String),
    /// It was offloaded, then run here for this reason (a lost link, a
    /// refusal, a missed deadline, a bad answer).
    FellBack(String),
}

/// Measured times of one frame.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Stages {
    /// Compute here (prefix or whole model, and packing), dilation included.
    pub wearable: Duration,
    /// From sending to the answer, less the handheld's compute.
    pub link: Duration,
    /// The handheld's compute, as it reported.
    pub handheld: Duration,
    /// From the frame's start to its delivery.
    pub latency: Duration,
}

/// Everything a frame's report says, gathered as the frame goes.
#[derive(Clone, Debug)]
pub(super) struct Account {
    pub frame: u64,
    pub cut: CutKey,
    pub prefix_layers: usize,
    pub ran: Ran,
    pub stages: Stages,
    /// Bytes sent up, and those tensors' raw size.
    pub up_bytes: u64,
    pub up_raw_bytes: u64,
    pub down_bytes: u64,
    /// The request and the answer on the link, whole (headers included).
    pub up_message_bytes: u64,
    pub down_message_bytes: u64,
    pub predicted_ms: Option<f64>,
    pub switch_wait_ms: Option<f64>,
    pub plan_build_ms: f64,
    /// How the prefix (or the whole model) ran: cluster and frequency.
    pub dvfs: Option<String>,
    /// The wearable's engine and the handheld's (as it said when ready).
    pub engines: Engines,
    /// Layers on each tier, when an edge tier is configured.
    pub tiers: Option<super::report::Tiers>,
    /// The edge's part of a relayed frame.
    pub edge: Option<super::report::EdgeLeg>,
}

impl Account {
    /// A frame at a cut of `prefix_layers` layers (`key`), ran as `ran`.
    pub fn new(frame: u64, cut: CutKey, prefix_layers: usize, ran: Ran, engines: Engines) -> Account {
        Account {
            frame,
            cut,
            prefix_layers,
            ran,
            stages: Stages::default(),
            up_bytes: 0,
            up_raw_bytes: 0,
            down_bytes: 0,
            up_message_bytes: 0,
            down_message_bytes: 0,
            predicted_ms: None,
            switch_wait_ms: None,
            plan_build_ms: 0.0,
            dvfs: None,
            engines,
            tiers: None,
            edge: None,
        }
    }

    /// The report of a model of `layers` layers. Radio time is the bytes
    /// over the link estimate's rates; energy is model-based: each side's
    /// compute and radio power over those times.
    pub fn report(
        self,
        layers: usize,
        link: &LinkEstimate,
        wearable: &dyn EnergyModel,
        handheld: &dyn EnergyModel,
    ) -> FrameReport {
        let time = |bytes: u64, rate: f64| match bytes {
            0 => Duration::ZERO,
            _ => Duration::try_from_secs_f64(bytes as f64 / rate).unwrap_or(Duration::MAX),
        };
        let s = self.stages;
        let price = CutPrice::of_stages(
            (
                s.wearable,
                time(self.up_bytes, link.up_bytes_per_s),
                s.handheld,
                time(self.down_bytes, link.down_bytes_per_s),
            ),
            wearable,
            handheld,
        );
        let (offloaded, local_reason, fallback) = match self.ran {
            Ran::Offloaded => (true, None, None),
            Ran::Local(why) => (false, Some(why), None),
            Ran::FellBack(why) => (false, Some(why.clone()), Some(why)),
        };
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        FrameReport {
            frame: self.frame,
            offloaded,
            local_reason,
            fallback,
            cut: self.cut,
            prefix_layers: self.prefix_layers,
            layers,
            wearable_ms: ms(s.wearable),
            link_ms: ms(s.link),
            handheld_ms: ms(s.handheld),
            latency_ms: ms(s.latency),
            up_bytes: self.up_bytes,
            up_raw_bytes: self.up_raw_bytes,
            down_bytes: self.down_bytes,
            up_message_bytes: self.up_message_bytes,
            down_message_bytes: self.down_message_bytes,
            predicted_ms: self.predicted_ms,
            wearable_j: price.wearable_j(),
            handheld_j: price.handheld_j(),
            switch_wait_ms: self.switch_wait_ms,
            plan_build_ms: self.plan_build_ms,
            dvfs: self.dvfs,
            prefix_engine: (self.prefix_layers > 0).then_some(self.engines.prefix),
            suffix_engine: offloaded.then_some(self.engines.suffix),
            tiers: self.tiers,
            edge: self.edge,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1 W computing, 0.5 W sending, 0.25 W receiving.
    struct Watts(f64);
    impl EnergyModel for Watts {
        fn name(&self) -> String {
            "test".into()
        }
        fn compute_power_w(&self) -> f64 {
            self.0
        }
        fn transmit_power_w(&self) -> f64 {
            self.0 / 2.0
        }
        fn receive_power_w(&self) -> f64 {
            self.0 / 4.0
        }
    }

    const LINK: LinkEstimate =
        LinkEstimate { up_bytes_per_s: 1000.0, down_bytes_per_s: 500.0, rtt: Duration::from_millis(5) };

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn an_offloaded_frame_is_priced_from_its_measured_stages_and_bytes() {
        let mut a = Account::new(7, CutKey::from_wire("3"), 2, Ran::Offloaded, Engines::TRACT);
        a.stages = Stages { wearable: ms(100), link: ms(30), handheld: ms(20), latency: ms(150) };
        (a.up_bytes, a.up_raw_bytes, a.down_bytes) = (1000, 4000, 250);
        a.predicted_ms = Some(140.0);
        let r = a.report(5, &LINK, &Watts(1.0), &Watts(2.0));
        assert!(r.offloaded && r.local_reason.is_none() && r.fallback.is_none());
        assert_eq!((r.frame, r.cut.as_str(), r.prefix_layers, r.layers), (7, "3", 2, 5));
        assert_eq!((r.wearable_ms, r.link_ms, r.handheld_ms, r.latency_ms), (100.0, 30.0, 20.0, 150.0));
        assert_eq!((r.up_bytes, r.up_raw_bytes, r.down_bytes), (1000, 4000, 250));
        // Up: 1000 B at 1000 B/s = 1 s; down: 250 B at 500 B/s = 0.5 s.
        // Wearable: 0.1 s × 1 W + 1 s × 0.5 W + 0.5 s × 0.25 W.
        assert!((r.wearable_j - (0.1 + 0.5 + 0.125)).abs() < 1e-9, "{}", r.wearable_j);
        // Handheld: 0.02 s × 2 W + 1 s × 0.5 W (receiving) + 0.5 s × 1 W (sending).
        assert!((r.handheld_j - (0.04 + 0.5 + 0.5)).abs() < 1e-9, "{}", r.handheld_j);
    }

    #[test]
    fn a_local_frame_says_why_and_a_fallback_says_it_twice() {
        let mut a = Account::new(
            1,
            CutKey::from_wire("f"),
            4,
            Ran::Local("placement: wearable only".into()),
            Engines::TRACT,
        );
        a.stages.wearable = ms(10);
        let r = a.clone().report(4, &LINK, &Watts(1.0), &Watts(1.0));
        assert!(!r.offloaded);
        assert_eq!(r.local_reason.as_deref(), Some("placement: wearable only"));
        assert_eq!(r.fallback, None);
        assert!((r.wearable_j - 0.01).abs() < 1e-12 && r.handheld_j == 0.0, "compute only");
        let zero = LinkEstimate { up_bytes_per_s: 0.0, down_bytes_per_s: 0.0, ..LINK };
        let r = a.clone().report(4, &zero, &Watts(1.0), &Watts(1.0));
        assert!(
            (r.wearable_j - 0.01).abs() < 1e-12,
            "no bytes take no time, whatever the rate: {}",
            r.wearable_j
        );
        a.ran = Ran::FellBack("the link dropped".into());
        (a.up_bytes, a.up_raw_bytes) = (100, 400);
        let r = a.report(4, &LINK, &Watts(1.0), &Watts(1.0));
        assert_eq!(r.fallback.as_deref(), Some("the link dropped"));
        assert_eq!(r.local_reason, r.fallback);
        assert_eq!((r.up_bytes, r.up_raw_bytes), (100, 400));
        assert!(r.wearable_j > 0.01 && r.handheld_j > 0.0, "the bytes that went up were paid for");
    }
}
