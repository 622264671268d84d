//! The rules a session applies around its [`Planner`] between frames, pure
//! and with time passed in: when a moved link estimate or moved predictions
//! call for a new decision ([`ChangeGate`]), whether an offloading decision
//! beats running alone by the margin ([`OffloadCheck`]), when missed
//! deadlines mean the handheld has stalled ([`StallPolicy`]), and when a
//! stream at a source rate runs a frame here to measure it again
//! ([`Revisit`]).

use std::time::Duration;

use serde::Serialize;

use super::{beats, evaluate, Conditions, Decision, Evaluation, LatencyHint, Mode, NodePrices, Side};
use tandem_core::{Cut, CutKey, LayerGraph};
use tandem_types::LinkEstimate;

/// How far the link estimate (either rate, or the round trip) must move,
/// as a share of what the planner last decided with, before it is told:
/// estimates jitter by a few percent between probes.
pub const LINK_CHANGE: f64 = 0.1;

/// How far a link encoding's observed ratio must move from the one the
/// planner decided with before it re-decides.
pub const RATIO_CHANGE: f64 = 0.1;

/// Whether `now` differs from `then` by more than `share` of `then`.
pub fn moved(now: f64, then: f64, share: f64) -> bool {
    (now - then).abs() > share * then.max(1e-9)
}

/// Passes on a value only when it moved past a share of the one last
/// passed on: the link estimate (at [`LINK_CHANGE`]) and both sides'
/// whole-model predictions (at the planner's margin).
#[derive(Clone, Debug)]
pub struct ChangeGate<T> {
    fed: T,
    share: f64,
}

impl<T: Copy + Changes> ChangeGate<T> {
    /// A gate that last passed on `fed`.
    pub fn new(fed: T, share: f64) -> ChangeGate<T> {
        ChangeGate { fed, share }
    }

    /// `Some(now)` when `now` moved past the share since the last value
    /// passed on (which it then becomes), else `None`.
    pub fn update(&mut self, now: T) -> Option<T> {
        if !self.fed.changed(&now, self.share) {
            return None;
        }
        self.fed = now;
        Some(now)
    }

    /// The value last passed on.
    pub fn fed(&self) -> T {
        self.fed
    }
}

/// A value whose parts are compared by [`moved`].
pub trait Changes {
    /// Whether any part of `now` moved past `share` of this one's.
    fn changed(&self, now: &Self, share: f64) -> bool;
}

impl Changes for LinkEstimate {
    fn changed(&self, now: &Self, share: f64) -> bool {
        moved(now.up_bytes_per_s, self.up_bytes_per_s, share)
            || moved(now.down_bytes_per_s, self.down_bytes_per_s, share)
            || moved(now.rtt.as_secs_f64(), self.rtt.as_secs_f64(), share)
    }
}

/// Both sides' whole-model predictions, in seconds (wearable, handheld).
impl Changes for (f64, f64) {
    fn changed(&self, now: &Self, share: f64) -> bool {
        moved(now.0, self.0, share) || moved(now.1, self.1, share)
    }
}

/// Whole-model predictions per side and engine, in seconds (0 where a side
/// lacks the engine): any one moving past the share is a change.
impl<const N: usize> Changes for [f64; N] {
    fn changed(&self, now: &Self, share: f64) -> bool {
        self.iter().zip(now).any(|(&was, &is)| moved(is, was, share))
    }
}

/// What the check of a decision against running alone says.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum Verdict {
    /// Offload at the decided cut, predicted this latency (ms).
    Offload {
        /// The decision's predicted latency (ms).
        predicted_ms: f64,
        /// The remote stages' per-frame time (ms,
        /// [`Evaluation::remote_period_s`]): how far apart answers follow
        /// each other when frames are pipelined.
        service_ms: f64,
    },
    /// Run alone instead: predicted this latency (ms), and why.
    Local {
        /// Running alone's predicted latency (ms).
        predicted_ms: f64,
        /// The numbers that decided it, for the frame's report.
        why: String,
    },
}

/// Offloading must beat running every layer on the wearable by the
/// planner's margin, and once frames offload, running them all here must
/// beat offloading by the margin to bring them back: between two
/// placements predicted within the margin of each other, the one in force
/// stays (a prediction that moved by noise, one side's learned and the
/// other's not yet, does not send a frame back and forth). For streams, a
/// frame's latency over the frames in flight bounds the period, as a
/// runtime that pipelines that deep achieves. The verdict is kept per
/// (cut, conditions, mode): checked once per decision and conditions, not
/// per frame.
#[derive(Clone, Debug)]
pub struct OffloadCheck {
    margin: f64,
    in_flight: usize,
    last: Option<(CutKey, Conditions, Mode, Verdict)>,
    /// Whether the last verdict offloaded (and the planner has not chosen
    /// every layer here since): the wearable alone must then win by the margin.
    offloading: bool,
}

impl OffloadCheck {
    /// A check at `margin` (0.1 = 10%) for a runtime with up to `in_flight`
    /// frames in flight (1 when it does not pipeline).
    pub fn new(margin: f64, in_flight: usize) -> OffloadCheck {
        OffloadCheck { margin, in_flight: in_flight.max(1), last: None, offloading: false }
    }

    /// Forgets the kept verdict (the predictions or encodings changed);
    /// frames offloaded still stay so unless running here wins by the margin.
    pub fn forget(&mut self) {
        self.last = None;
    }

    /// A new link or handheld, or the planner chose every layer here:
    /// nothing is offloaded in force, and offloading must win by the margin again.
    pub fn here(&mut self) {
        self.last = None;
        self.offloading = false;
    }

    /// The verdict on `decision` (which offloads) under `conditions`.
    pub fn check(
        &mut self,
        graph: &LayerGraph,
        decision: &Decision,
        wearable: Side,
        handheld: Side,
        conditions: &Conditions,
        mode: Mode,
    ) -> Verdict {
        let key = decision.chosen.key();
        if let Some((k, c, m, verdict)) = &self.last {
            if *k == key && c == conditions && *m == mode {
                self.offloading = matches!(verdict, Verdict::Offload { .. });
                return verdict.clone();
            }
        }
        let c = conditions;
        let prices = NodePrices::new(graph, wearable, handheld, &c.link, &c.status, c.weights);
        let local = evaluate(graph, &prices, &Cut::wearable_only(graph), c.link.rtt);
        let in_flight = self.in_flight as f64;
        let bounded = |e: &Evaluation| {
            let mut e = e.clone();
            e.stream_period_s = e.stream_period_s.max(e.latency_s / in_flight);
            e
        };
        let there_ms = decision.evaluation.latency_s * 1e3;
        let (there, here) = (bounded(&decision.evaluation), bounded(&local));
        let offload = match self.offloading {
            true => !beats(&here, &there, c.hint, mode, self.margin),
            false => beats(&there, &here, c.hint, mode, self.margin),
        };
        let verdict = if offload {
            let service_ms = decision.evaluation.remote_period_s() * 1e3;
            Verdict::Offload { predicted_ms: there_ms, service_ms }
        } else {
            let here_ms = local.latency_s * 1e3;
            let margin = self.margin * 100.0;
            // Which meets a latency bound: meeting it decides first.
            let meets = match c.hint {
                LatencyHint::Within(d) => {
                    let d = d.as_secs_f64();
                    Some((d, here.time(mode) <= d, there.time(mode) <= d))
                }
                _ => None,
            };
            // Energy decided it at PropT ∞, and within a bound both meet.
            let by_energy = match meets {
                Some((_, here_meets, there_meets)) => here_meets && there_meets,
                None => c.hint == LatencyHint::EnergyFirst,
            };
            let rule = match (meets, self.offloading, by_energy) {
                (Some((d, true, false)), _, _) => {
                    format!("running here meets the {:.0} ms bound, offloading misses it", d * 1e3)
                }
                (_, true, true) => format!("running here saves more than the {margin:.0}% margin"),
                (_, true, false) => format!("running here wins by more than the {margin:.0}% margin"),
                (_, false, true) => format!("offloading must save the {margin:.0}% margin"),
                (_, false, false) => format!("offloading must win by the {margin:.0}% margin"),
            };
            let why = if by_energy {
                format!(
                    "the planner: local predicted {:.2} mJ vs best offload {:.2} mJ, weighted \
                     ({here_ms:.1} ms vs {there_ms:.1} ms; {rule})",
                    local.energy_j * 1e3,
                    decision.evaluation.energy_j * 1e3,
                )
            } else {
                format!(
                    "the planner: local predicted {here_ms:.1} ms vs best offload {there_ms:.1} ms ({rule})"
                )
            };
            Verdict::Local { predicted_ms: here_ms, why }
        };
        self.offloading = matches!(verdict, Verdict::Offload { .. });
        self.last = Some((key, *c, mode, verdict.clone()));
        verdict
    }
}

/// Deadlines missed in a row: enough of them mean the handheld stalled and
/// the link is taken as lost. Several pipelined frames made late by one
/// pause count as one miss.
#[derive(Clone, Debug)]
pub struct StallPolicy {
    limit: u32,
    missed_in_row: u32,
}

impl StallPolicy {
    /// A policy that gives up after `limit` misses in a row (at least 1).
    pub fn new(limit: u32) -> StallPolicy {
        StallPolicy { limit: limit.max(1), missed_in_row: 0 }
    }

    /// A tick found frames past their deadline. `Some(reason)` when that
    /// makes the limit: the link is to be dropped (and the count starts
    /// again).
    pub fn missed(&mut self) -> Option<String> {
        self.missed_in_row = self.missed_in_row.saturating_add(1);
        if self.missed_in_row < self.limit {
            return None;
        }
        let reason = format!(
            "the handheld missed {} deadlines in a row (a stall): the link is taken as lost",
            self.missed_in_row
        );
        self.missed_in_row = 0;
        Some(reason)
    }

    /// An answer came in time, or a new link began: the count starts again.
    pub fn reset(&mut self) {
        self.missed_in_row = 0;
    }

    /// Misses counted since the last reset.
    pub fn missed_in_row(&self) -> u32 {
        self.missed_in_row
    }
}

/// Frames offloaded late (by prediction) before a [`Revisit`].
pub const REVISIT_EVERY: u32 = 8;

/// How far past the period the whole model here may be predicted for a
/// [`Revisit`]: a quarter. A measure can bring a prediction pushed that
/// far by a few slow frames back under the period; past it the frame
/// only holds up the next ones (PP-OCR's classifier on the W5 at 30 Hz,
/// 62 ms against 33 ms, revisited every ninth frame and slowed the
/// stream's p95 from 73–78 ms to 103–111 ms).
pub const REVISIT_WITHIN: f64 = 1.25;

/// At a source rate, a frame now and then runs every layer here while the
/// cut in force offloads and misses the period. A cut that does not run is
/// never measured again, so a few slow frames (a busy start) that moved the
/// whole model's prediction past the period would keep the stream off it
/// for good, late on every frame. A revisit costs little: the frame it
/// takes would be late offloaded too, and the whole model here must be
/// predicted within [`REVISIT_WITHIN`] of the period (so it holds up the
/// next frame by less than a quarter of one). The count is of frames
/// started, so with frames in flight a revisit's measure comes back a few
/// frames later: at least `every` frames apart.
#[derive(Clone, Debug)]
pub struct Revisit {
    every: u32,
    /// Frames offloaded late since every layer last ran here.
    offloaded: u32,
    pending: bool,
}

impl Revisit {
    /// A revisit after `every` frames offloaded (at least 1).
    pub fn new(every: u32) -> Revisit {
        Revisit { every: every.max(1), offloaded: 0, pending: false }
    }

    /// The next frame would offload, predicted at `offload_s`, and frames
    /// arrive every `period` (`None`: no source rate): `Some` of the whole
    /// model's prediction here where the frame runs every layer here
    /// instead. `here_s` gives that prediction (`None`: none yet); it is
    /// asked only once `every` offloads have missed the period, and then of
    /// each one that misses it until a revisit.
    pub fn due(
        &mut self,
        period: Option<Duration>,
        offload_s: f64,
        here_s: impl FnOnce() -> Option<f64>,
    ) -> Option<f64> {
        let p = period.map(|p| p.as_secs_f64()).filter(|&p| offload_s > p)?;
        self.offloaded = self.offloaded.saturating_add(1);
        if self.offloaded <= self.every {
            return None;
        }
        let here_s = here_s().filter(|&h| h <= REVISIT_WITHIN * p)?;
        self.offloaded = 0;
        self.pending = true;
        Some(here_s)
    }

    /// Every layer ran here and was measured: the count starts again.
    /// Whether a revisit was due (its measure then re-decides, even when
    /// the prediction moved less than the margin; a revisit frame that the
    /// edge took instead leaves that to the next frame run here).
    pub fn ran_here(&mut self) -> bool {
        self.offloaded = 0;
        std::mem::take(&mut self.pending)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::energy::ClusterEnergy;
    use crate::partition::{LatencyHint, Planner, PlannerConfig};
    use crate::predict::ProfiledLatency;
    use tandem_core::{InputShapes, Model};
    use tandem_types::{EnergyWeights, HandheldStatus};

    fn link(up: f64, rtt_ms: u64) -> LinkEstimate {
        LinkEstimate { up_bytes_per_s: up, down_bytes_per_s: up, rtt: Duration::from_millis(rtt_ms) }
    }

    #[test]
    fn a_revisit_comes_after_its_frames_offloaded_and_only_where_the_offload_is_late_anyway() {
        let p = Some(Duration::from_millis(66));
        let mut r = Revisit::new(3);
        let due = |r: &mut Revisit, period, offload_s, here_s: f64| {
            r.due(period, offload_s, || Some(here_s)).is_some()
        };
        for _ in 0..3 {
            assert_eq!(r.due(p, 0.072, || panic!("priced before its frames")), None);
        }
        assert_eq!(r.due(p, 0.072, || Some(0.070)), Some(0.070), "the fourth frame offloaded late runs here");
        assert!(r.ran_here(), "its measure re-decides");
        assert!(!r.ran_here(), "once");
        // An offload that meets the period, no source rate: not counted, the whole model not priced.
        for (period, offload_s) in [(p, 0.060), (None, 0.072)] {
            for _ in 0..10 {
                assert_eq!(r.due(period, offload_s, || panic!("priced")), None, "{period:?} {offload_s}");
            }
        }
        assert!(!due(&mut r, p, 0.072, 0.070), "the first frame offloaded late since");
        assert!(!r.ran_here(), "a frame run here for any other reason");
        // A whole model more than a quarter past the period, or not predicted: counted, never revisited.
        for _ in 0..10 {
            assert!(!due(&mut r, p, 0.072, 0.0826));
            assert_eq!(r.due(p, 0.072, || None), None);
        }
        assert!(due(&mut r, p, 0.072, 0.0824), "its prediction back within a quarter past it");
        r.ran_here();
        // That frame started the count again.
        for _ in 0..3 {
            assert!(!due(&mut r, p, 0.072, 0.070));
        }
        assert!(due(&mut r, p, 0.072, 0.070));
    }

    #[test]
    fn the_link_gate_passes_on_moves_past_its_share_only() {
        let mut gate = ChangeGate::new(link(1e6, 10), LINK_CHANGE);
        assert_eq!(gate.update(link(1.09e6, 10)), None, "9% is jitter");
        assert_eq!(gate.update(link(1e6, 11)), None, "so is 10% of the round trip, exactly");
        assert_eq!(gate.update(link(1.2e6, 10)), Some(link(1.2e6, 10)));
        assert_eq!(gate.fed(), link(1.2e6, 10), "the last passed on is what later moves are from");
        assert_eq!(gate.update(link(1.25e6, 10)), None);
        assert_eq!(gate.update(link(1.2e6, 12)), Some(link(1.2e6, 12)), "the round trip alone moves it");
    }

    #[test]
    fn the_prediction_gate_watches_both_sides() {
        let mut gate = ChangeGate::new((0.0, 0.0), 0.1);
        assert_eq!(gate.update((0.01, 0.0)), Some((0.01, 0.0)), "the first predictions always pass");
        assert_eq!(gate.update((0.0105, 0.0)), None);
        assert_eq!(gate.update((0.0105, 0.002)), Some((0.0105, 0.002)), "the handheld's side moved");
    }

    #[test]
    fn a_stall_is_so_many_misses_in_a_row() {
        let mut p = StallPolicy::new(3);
        assert_eq!(p.missed(), None);
        assert_eq!(p.missed(), None);
        p.reset();
        assert_eq!(p.missed(), None);
        assert_eq!(p.missed(), None);
        let why = p.missed().expect("the third in a row");
        assert!(why.contains("missed 3 deadlines"), "{why}");
        assert_eq!(p.missed_in_row(), 0, "counting starts again");
        assert!(StallPolicy::new(0).missed().is_some(), "a limit of 0 is 1");
    }

    /// The tiny MLP, each layer `per_layer_s` on the wearable and 10× faster on the handheld.
    fn sides(per_layer_s: f64) -> (Model, ProfiledLatency, ProfiledLatency, ClusterEnergy) {
        let model = Model::from_bytes(&tandem_models_tiny(), &InputShapes::none()).expect("tiny model");
        let n = model.graph().nodes().len();
        let w = ProfiledLatency { per_node_s: vec![per_layer_s; n], overhead_s: 0.0 };
        let h = ProfiledLatency { per_node_s: vec![per_layer_s / 10.0; n], overhead_s: 0.0 };
        let energy = ClusterEnergy::new(
            &crate::device::DeviceProfile::shipped("watch-w5").expect("shipped profile"),
            crate::device::PowerModel::Analytical,
        )
        .expect("energy");
        (model, w, h, energy)
    }

    fn tandem_models_tiny() -> Vec<u8> {
        tandem_models::tiny::tiny_mlp_onnx()
    }

    fn conditions(l: LinkEstimate) -> Conditions {
        Conditions {
            link: l,
            status: HandheldStatus::default(),
            weights: EnergyWeights::default(),
            hint: LatencyHint::Fastest,
            mode: Mode::Single,
        }
    }

    /// The handheld-only decision, priced on `l` (the planner decides it
    /// on a fast link whatever the check then says).
    fn offload_decision(model: &Model, w: Side, h: Side, l: LinkEstimate) -> Decision {
        let g = model.graph();
        let mut planner = Planner::new(PlannerConfig::default(), conditions(l));
        let mut d = planner.poll_decision(g, w, h).expect("decides").expect("a first decision");
        let cut = Cut::handheld_only(g);
        let prices = NodePrices::new(g, w, h, &l, &HandheldStatus::default(), EnergyWeights::default());
        d.evaluation = evaluate(g, &prices, &cut, l.rtt);
        d.chosen = cut;
        d
    }

    #[test]
    fn offloading_must_beat_running_alone_by_the_margin_and_the_verdict_is_kept() {
        let (model, wl, hl, energy) = sides(0.005);
        let g = model.graph();
        let w = Side { latency: &wl, energy: &energy };
        let h = Side { latency: &hl, energy: &energy };
        let fast = link(1e9, 1);
        let d = offload_decision(&model, w, h, fast);
        let mut check = OffloadCheck::new(0.1, 1);
        let Verdict::Offload { predicted_ms, service_ms } =
            check.check(g, &d, w, h, &conditions(fast), Mode::Single)
        else {
            panic!("a 10× faster handheld one fast millisecond away wins");
        };
        assert!((predicted_ms - d.evaluation.latency_s * 1e3).abs() < 1e-9);
        // Every layer on a handheld 10x faster: it holds a frame longer than the link.
        let e = &d.evaluation;
        assert!(e.t_handheld > e.t_up + e.t_down, "{e:?}");
        assert!((service_ms - e.t_handheld * 1e3).abs() < 1e-9, "{service_ms} vs {e:?}");
        // A round trip that eats the gain: local wins, with its numbers.
        let slow = link(1e9, 1000);
        let d = offload_decision(&model, w, h, slow);
        let Verdict::Local { predicted_ms, why } = check.check(g, &d, w, h, &conditions(slow), Mode::Single)
        else {
            panic!("a one-second round trip loses to running alone");
        };
        let layers = g.nodes().len() as f64;
        assert!((predicted_ms - layers * 5.0).abs() < 1e-6, "local is every layer here: {predicted_ms}");
        assert!(why.contains("10% margin"), "{why}");
        // Kept per (cut, conditions, mode): the same question is not priced
        // again, even with sides that would now answer otherwise.
        let (_, quick, _, _) = sides(0.000_001);
        let fast_watch = Side { latency: &quick, energy: &energy };
        let again = check.check(g, &d, fast_watch, h, &conditions(slow), Mode::Single);
        assert!(
            matches!(&again, Verdict::Local { predicted_ms, .. } if (predicted_ms - layers * 5.0).abs() < 1e-6),
            "the kept verdict: {again:?}"
        );
        let mut fresh = OffloadCheck::new(0.1, 1);
        let priced = fresh.check(g, &d, fast_watch, h, &conditions(slow), Mode::Single);
        assert!(matches!(&priced, Verdict::Local { predicted_ms, .. } if *predicted_ms < 1.0), "{priced:?}");
        check.forget();
        assert!(matches!(check.check(g, &d, w, h, &conditions(slow), Mode::Single), Verdict::Local { .. }));
        // At PropT ∞ energy decides it, and the reason says so in joules.
        let frugal = Conditions { hint: LatencyHint::EnergyFirst, ..conditions(slow) };
        let Verdict::Local { why, .. } = fresh.check(g, &d, fast_watch, h, &frugal, Mode::Single) else {
            panic!("a watch that runs every layer in a microsecond spends less than sending");
        };
        assert!(why.contains("mJ vs best offload") && why.contains("save the 10% margin"), "{why}");
    }

    #[test]
    fn frames_offloaded_stay_so_unless_running_here_wins_by_the_margin() {
        let (model, wl, hl, energy) = sides(0.005);
        let g = model.graph();
        let w = Side { latency: &wl, energy: &energy };
        let h = Side { latency: &hl, energy: &energy };
        let at = |rtt_s: f64| LinkEstimate { rtt: Duration::from_secs_f64(rtt_s), ..link(1e9, 0) };
        // The round trip that makes offloading `ratio` times running here.
        let here_s = {
            let prices =
                NodePrices::new(g, w, h, &at(0.0), &HandheldStatus::default(), EnergyWeights::default());
            evaluate(g, &prices, &Cut::wearable_only(g), Duration::ZERO).latency_s
        };
        let there_s = offload_decision(&model, w, h, at(0.0)).evaluation.latency_s;
        let rtt_for = |ratio: f64| at(ratio * here_s - there_s);
        let verdict = |check: &mut OffloadCheck, ratio: f64| {
            let l = rtt_for(ratio);
            let d = offload_decision(&model, w, h, l);
            check.check(g, &d, w, h, &conditions(l), Mode::Single)
        };
        let offloads = |v: &Verdict| matches!(v, Verdict::Offload { .. });
        // Offloading 5% slower than running here: not taken fresh...
        let mut fresh = OffloadCheck::new(0.1, 1);
        let v = verdict(&mut fresh, 1.05);
        assert!(!offloads(&v), "{v:?}");
        // ...but kept where frames already offload (15% faster first).
        let mut check = OffloadCheck::new(0.1, 1);
        assert!(offloads(&verdict(&mut check, 0.85)));
        assert!(offloads(&verdict(&mut check, 1.05)), "within the margin: the placement in force stays");
        check.forget();
        assert!(offloads(&verdict(&mut check, 1.05)), "forgetting prices keeps what is in force");
        // Running here 20% faster brings them back, and says why.
        let Verdict::Local { why, .. } = verdict(&mut check, 1.25) else {
            panic!("running here a fifth faster wins");
        };
        assert!(why.contains("running here wins by more than the 10% margin"), "{why}");
        // From there, offloading must win by the margin again.
        assert!(!offloads(&verdict(&mut check, 0.95)));
        assert!(offloads(&verdict(&mut check, 0.85)));
        // The planner choosing every layer here (or a new link) ends it too.
        check.here();
        assert!(!offloads(&verdict(&mut check, 1.05)));
        // Under a bound only running here meets, the bound is the reason.
        let l = rtt_for(1.05);
        let d = offload_decision(&model, w, h, l);
        let bound = Duration::from_secs_f64(here_s * 1.02);
        let within = Conditions { hint: LatencyHint::Within(bound), ..conditions(l) };
        let Verdict::Local { why, .. } = OffloadCheck::new(0.1, 1).check(g, &d, w, h, &within, Mode::Single)
        else {
            panic!("only running here meets the bound");
        };
        assert!(why.contains("bound, offloading misses it"), "{why}");
    }

    #[test]
    fn a_verdict_is_not_reused_under_other_conditions() {
        let (model, wl, hl, energy) = sides(0.005);
        let g = model.graph();
        let w = Side { latency: &wl, energy: &energy };
        let h = Side { latency: &hl, energy: &energy };
        let fast = link(1e9, 1);
        let d = offload_decision(&model, w, h, fast);
        let mut check = OffloadCheck::new(0.1, 1);
        assert!(matches!(check.check(g, &d, w, h, &conditions(fast), Mode::Single), Verdict::Offload { .. }));
        // The same decision, now asked on a link with a one-second round trip.
        let slow = link(1e9, 1000);
        let mut d_slow = d.clone();
        let prices = NodePrices::new(g, w, h, &slow, &HandheldStatus::default(), EnergyWeights::default());
        d_slow.evaluation = evaluate(g, &prices, &d.chosen, slow.rtt);
        assert!(matches!(
            check.check(g, &d_slow, w, h, &conditions(slow), Mode::Single),
            Verdict::Local { .. }
        ));
    }
}
