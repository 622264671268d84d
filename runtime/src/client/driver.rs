//! The planning driver: both sides' predictions (learning from every
//! frame), the [`Planner`] polled between frames, and the rules around it
//! from [`tandem_plan::partition::rules`]. It answers one question, with
//! no I/O and no clock: which cut the next frame runs at, predicted how
//! fast, and why every layer runs here when they do ([`Next`]).

use std::time::Duration;

use tracing::{debug, info, warn};

use super::config::{Placement, SessionConfig};
use crate::{Cut, Error, LayerGraph, Result};
use tandem_plan::device::DeviceProfile;
use tandem_plan::energy::{ClusterEnergy, PowerModel};
use tandem_plan::partition::dvfs::Setting;
use tandem_plan::partition::rules::{ChangeGate, OffloadCheck, StallPolicy, Verdict, LINK_CHANGE};
use tandem_plan::partition::tiers::{
    decide_tiers_served, evaluate_placement, EdgeLink, EdgePrices, Placement as TierPlacement, Route, Tier,
    TierDecision, TierPrices,
};
use tandem_plan::partition::{
    evaluate, Conditions, Decision, EnergyWeights, HandheldStatus, LatencyHint, LinkCodecs, LinkEstimate,
    Mode, NodePrices, Planner, PlannerConfig, Side,
};
use tandem_plan::predict::{OnlineLatency, ProfiledLatency};

/// The cut a frame runs at, its predicted latency (ms), why every layer
/// runs here when they do, and (for the first frame of a switch that
/// waited for its plans) the wait since the decision.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Next {
    pub cut: Cut,
    pub predicted_ms: Option<f64>,
    pub local_reason: Option<String>,
    pub waited: Option<Duration>,
}

impl Next {
    /// Every layer here, for `reason`, with no prediction.
    pub fn here(graph: &LayerGraph, reason: impl Into<String>) -> Next {
        Next {
            cut: Cut::wearable_only(graph),
            predicted_ms: None,
            local_reason: Some(reason.into()),
            waited: None,
        }
    }

    /// `cut`, predicted at `predicted_ms`.
    pub fn at(cut: Cut, predicted_ms: Option<f64>) -> Next {
        Next { cut, predicted_ms, local_reason: None, waited: None }
    }
}

/// What the wearable knows of the edge tier: the cuts whose suffixes it
/// serves, the phone–edge link, and how much faster than the phone it
/// runs a layer.
#[derive(Clone, Debug)]
pub(super) struct EdgeView {
    pub served: Vec<Cut>,
    pub link: LinkEstimate,
    pub speedup: f64,
}

/// What the session knows now that prices a cut: the link estimate, the
/// handheld's status and the link encodings measured.
#[derive(Clone, Copy)]
pub(super) struct Now<'a> {
    pub link: LinkEstimate,
    pub status: HandheldStatus,
    pub codecs: Option<&'a LinkCodecs>,
}

/// The session's planning: predictions, planner, and its rules.
pub(super) struct Driver {
    planner: Planner,
    /// The link estimate the planner last heard, told again past 10%.
    link: ChangeGate<LinkEstimate>,
    /// Both sides' whole-model predictions (s) the planner last decided
    /// with, re-decided past the margin.
    totals: ChangeGate<(f64, f64)>,
    offload: OffloadCheck,
    /// Decide once and keep (Neurosurgeon's rule) when the config does not adapt.
    adapt: bool,
    kept: Option<Next>,
    /// Whether the planner's runners-up are wanted (plans built ahead).
    want_ahead: bool,
    /// The planner's runners-up for its last new decision, to build ahead.
    ahead: Vec<Cut>,
    /// This side's layer times, learning from every frame.
    wearable_latency: OnlineLatency,
    /// The handheld's, from the layer times it sent, learning from the times it reports.
    handheld_latency: Option<OnlineLatency>,
    wearable_energy: ClusterEnergy,
    handheld_energy: ClusterEnergy,
    /// Deadlines missed in a row.
    stall: StallPolicy,
}

impl Driver {
    /// A driver for `config`'s devices, the wearable's layer times
    /// measured already (`wearable_latency`).
    pub fn new(config: &SessionConfig, wearable_latency: OnlineLatency) -> Result<Driver> {
        let energy = |p: &DeviceProfile| ClusterEnergy::new(p, PowerModel::Analytical).map_err(Error::from);
        let conditions = Conditions {
            link: config.link_default,
            status: HandheldStatus::default(),
            weights: EnergyWeights::default(),
            hint: config.hint,
            mode: Mode::Single,
        };
        let mut planner =
            Planner::new(PlannerConfig { margin: config.margin, method: config.method }, conditions);
        if config.dvfs {
            planner = planner.with_dvfs(config.wearable.clone());
        }
        let in_flight = if config.pipeline { config.max_in_flight } else { 1 };
        Ok(Driver {
            planner,
            link: ChangeGate::new(config.link_default, LINK_CHANGE),
            totals: ChangeGate::new((0.0, 0.0), config.margin),
            offload: OffloadCheck::new(config.margin, in_flight),
            adapt: config.adapt,
            kept: None,
            want_ahead: config.prepare_ahead,
            ahead: vec![],
            wearable_latency,
            handheld_latency: None,
            wearable_energy: energy(&config.wearable)?,
            handheld_energy: energy(&config.handheld_fallback)?,
            stall: StallPolicy::new(config.max_missed_deadlines),
        })
    }

    /// A handheld is ready: its profile's name (a shipped profile prices
    /// its energy, any other name keeps the fallback's) and its layer times.
    pub fn handheld_ready(&mut self, graph: &LayerGraph, device: &str, latency: ProfiledLatency) {
        // A name from the peer: a shipped profile or none (never a path).
        if let Ok(e) =
            DeviceProfile::shipped(device).and_then(|p| ClusterEnergy::new(&p, PowerModel::Analytical))
        {
            self.handheld_energy = e;
        }
        self.handheld_latency = Some(OnlineLatency::new(graph, latency));
        // A new link: the last one's misses do not count against it.
        self.stall.reset();
        self.offload.forget();
        self.planner.handle_predictor_update();
    }

    /// The decision in force.
    pub fn current(&self) -> Option<&Decision> {
        self.planner.current()
    }

    /// The wearable's setting for a frame at `cut`: the planner's, when it
    /// decided this cut with one.
    pub fn setting_for(&self, cut: &Cut) -> Option<Setting> {
        let d = self.planner.current()?;
        (d.chosen.key() == cut.key()).then(|| d.setting.clone()).flatten()
    }

    /// The wearable's energy model at `setting` (its inference setting when `None`).
    /// Borrowed at the inference setting: no copy per frame.
    pub fn wearable_energy_at(
        &self,
        profile: &DeviceProfile,
        setting: Option<&Setting>,
    ) -> std::borrow::Cow<'_, ClusterEnergy> {
        use std::borrow::Cow;
        setting
            .and_then(|s| ClusterEnergy::at(profile, &s.cluster, s.f_hz, PowerModel::Analytical).ok())
            .map_or(Cow::Borrowed(&self.wearable_energy), Cow::Owned)
    }

    /// The handheld's energy model.
    pub fn handheld_energy(&self) -> &ClusterEnergy {
        &self.handheld_energy
    }

    /// The handheld reported its status.
    pub fn handle_status(&mut self, status: HandheldStatus, weights: EnergyWeights) {
        self.planner.handle_status(status);
        self.planner.handle_weights(weights);
    }

    /// The app set a latency hint.
    pub fn handle_hint(&mut self, hint: LatencyHint) {
        self.planner.handle_hint(hint);
    }

    /// Frames arrive every `period` (a source rate), or not: the planner
    /// then plans a stream for each frame's deadline when a cut meets it.
    pub fn handle_rate(&mut self, period: Option<Duration>) {
        self.planner.handle_rate(period);
    }

    /// The link encodings changed (measured, or an option dropped).
    pub fn handle_codecs(&mut self, codecs: Option<std::sync::Arc<LinkCodecs>>) {
        self.offload.forget();
        self.planner.handle_codecs(codecs);
    }

    /// The planner's runners-up for its last new decision, taken.
    pub fn take_ahead(&mut self) -> Vec<Cut> {
        std::mem::take(&mut self.ahead)
    }

    /// Feeds a measured inference into the predictions: the layers in
    /// `prefix` ran here in `wearable`; the others, if `handheld` is
    /// given, on the handheld in that, under a load that made it
    /// `handheld_dilation` times slower than idle. When either side's
    /// whole-model prediction moved past the margin, the planner re-decides.
    pub fn learn(
        &mut self,
        prefix: &[bool],
        wearable: Duration,
        handheld: Option<Duration>,
        handheld_dilation: f64,
    ) {
        self.wearable_latency.observe(prefix, wearable.as_secs_f64());
        if let (Some(h), Some(online)) = (handheld, &mut self.handheld_latency) {
            // Its profile is of an idle handheld: the load it reported is priced apart.
            let suffix: Vec<bool> = prefix.iter().map(|&p| !p).collect();
            online.observe(&suffix, h.as_secs_f64() / handheld_dilation);
        }
        let all = vec![true; prefix.len()];
        let now = (
            self.wearable_latency.predict_s(&all),
            self.handheld_latency.as_ref().map_or(0.0, |h| h.predict_s(&all)),
        );
        if self.totals.update(now).is_some() {
            debug!(wearable_s = now.0, handheld_s = now.1, "the predictions moved: re-deciding");
            self.offload.forget();
            self.planner.handle_predictor_update();
        }
    }

    /// A tick found frames past their deadline: `Some(why)` when the
    /// handheld is to be taken as stalled.
    pub fn missed_deadline(&mut self) -> Option<String> {
        self.stall.missed()
    }

    /// An answer came in time, or the link ended: misses start again.
    pub fn reset_stall(&mut self) {
        self.stall.reset();
    }

    /// The predicted latency (ms) of `cut` now, its tensors in their
    /// cheapest encodings; `None` before the handheld's layer times are known.
    pub fn predict_ms(&self, graph: &LayerGraph, cut: &Cut, now: Now) -> Option<f64> {
        let handheld_latency = self.handheld_latency.as_ref()?.latency();
        let wearable = Side { latency: self.wearable_latency.latency(), energy: &self.wearable_energy };
        let handheld = Side { latency: handheld_latency, energy: &self.handheld_energy };
        let weights = self.planner.conditions().weights;
        let mut prices = NodePrices::new(graph, wearable, handheld, &now.link, &now.status, weights);
        if let Some(codecs) = now.codecs {
            prices = prices.with_codecs(graph, codecs, &now.status);
        }
        Some(evaluate(graph, &prices, cut, now.link.rtt).latency_s * 1e3)
    }

    /// The best placement over three tiers for the next frame, the edge's
    /// part among the suffixes it serves (`edge`): the two-tier prices of
    /// now plus the edge's, exact as [`decide_tiers_served`] is. `None`
    /// before the handheld's layer times are known, or when the planner
    /// fails. The edge's layer times are the phone's profile (idle, as
    /// learnt) divided by `edge.speedup` (measured by the phone, else the
    /// configured assumption). With `direct` (the watch's own link to the
    /// edge, when it has one and the edge serves the whole model there),
    /// the whole model on the edge over that link is one more placement:
    /// the better of it and the relayed optimum is the optimum over both.
    pub fn edge_placement(
        &self,
        graph: &LayerGraph,
        edge: &EdgeView,
        mode: Mode,
        now: Now,
        direct: Option<&LinkEstimate>,
    ) -> Option<TierDecision> {
        let handheld_latency = self.handheld_latency.as_ref()?.latency();
        let wearable = Side { latency: self.wearable_latency.latency(), energy: &self.wearable_energy };
        let handheld = Side { latency: handheld_latency, energy: &self.handheld_energy };
        let conditions = self.planner.conditions();
        let mut pair = NodePrices::new(graph, wearable, handheld, &now.link, &now.status, conditions.weights);
        if let Some(codecs) = now.codecs {
            pair = pair.with_codecs(graph, codecs, &now.status);
        }
        let edge_latency = ProfiledLatency {
            per_node_s: handheld_latency.per_node_s.iter().map(|s| s / edge.speedup.max(1e-9)).collect(),
            overhead_s: handheld_latency.overhead_s / edge.speedup.max(1e-9),
        };
        // The phone's radio on its link to the edge: its powers on the watch's link.
        let relay = EdgeLink::new(&edge.link, pair.radio_handheld_w);
        // The watch's own link: its radio's powers.
        let own = direct.map(|l| EdgeLink::new(l, pair.radio_wearable_w));
        let prices = TierPrices {
            edge: EdgePrices::new(graph, &edge_latency, relay, None),
            pair_rtt: now.link.rtt,
            pair,
        };
        let relayed = match decide_tiers_served(graph, &prices, conditions.hint, mode, &edge.served) {
            Ok(d) => d,
            Err(e) => {
                warn!("the three-tier planner failed ({e}); two tiers");
                return None;
            }
        };
        let Some(own) = own else { return Some(relayed) };
        let prices = TierPrices { edge: EdgePrices { direct: Some(own), ..prices.edge }, ..prices };
        let whole = TierPlacement::all_on(graph, Tier::Edge, Route::Direct);
        let evaluations = [relayed.evaluation.clone(), evaluate_placement(graph, &prices, &whole)];
        match tandem_plan::partition::choose(&evaluations, conditions.hint, mode) {
            Some((1, reason)) => {
                let [_, evaluation] = evaluations;
                Some(TierDecision {
                    placement: whole,
                    evaluation,
                    candidates: relayed.candidates + 1,
                    optimal: relayed.optimal,
                    reason: format!("{reason}: the whole model on the edge over the watch's own link"),
                })
            }
            _ => Some(relayed),
        }
    }

    /// The cut for the next frame under `placement`, polling the planner;
    /// `not_ready`: why the handheld cannot take frames now, if it cannot.
    pub fn next(
        &mut self,
        graph: &LayerGraph,
        placement: &Placement,
        not_ready: Option<String>,
        mode: Mode,
        now: Now,
    ) -> Next {
        match placement {
            Placement::WearableOnly => return Next::here(graph, "placement: wearable only"),
            // Not planned here: the session sends such frames to the edge itself.
            Placement::EdgeOnly => {
                return Next::here(graph, "placement: edge only, and the edge is not used")
            }
            _ if not_ready.is_some() => return Next::here(graph, not_ready.unwrap_or_default()),
            Placement::HandheldOnly => {
                let cut = Cut::handheld_only(graph);
                let ms = self.predict_ms(graph, &cut, now);
                return Next::at(cut, ms);
            }
            Placement::Fixed(c) => {
                let why = c.is_wearable_only().then(|| "placement: a fixed cut with every layer here".into());
                return Next { local_reason: why, ..Next::at(c.clone(), self.predict_ms(graph, c, now)) };
            }
            Placement::Auto => {}
        }
        if let (false, Some(kept)) = (self.adapt, &self.kept) {
            return kept.clone();
        }
        let (decided, next) = self.planned(graph, mode, now.link);
        if decided && !self.adapt {
            self.kept = Some(next.clone());
        }
        next
    }

    /// [`Driver::next`] under [`Placement::Auto`]: whether a planner
    /// decision made it (not a wait for the handheld's layer times or a
    /// failed planner), and the cut.
    fn planned(&mut self, graph: &LayerGraph, mode: Mode, link: LinkEstimate) -> (bool, Next) {
        if let Some(link) = self.link.update(link) {
            self.planner.handle_link(link);
        }
        self.planner.handle_mode(mode);
        let Some(handheld_latency) = self.handheld_latency.as_ref().map(|h| h.latency()) else {
            return (false, Next::here(graph, "the handheld has not sent its layer times yet"));
        };
        let wearable = Side { latency: self.wearable_latency.latency(), energy: &self.wearable_energy };
        let handheld = Side { latency: handheld_latency, energy: &self.handheld_energy };
        let mut failed = None;
        match self.planner.poll_decision(graph, wearable, handheld) {
            Ok(Some(d)) => {
                info!(cut = %d.chosen.describe(graph), encodings = ?d.encodings, reason = %d.reason, "partition");
                if self.want_ahead {
                    self.ahead =
                        self.planner.runners_up(graph, wearable, handheld, &super::switch::AHEAD_FACTORS);
                }
            }
            Ok(None) => {}
            Err(e) => {
                warn!("the planner failed ({e}); running on the wearable");
                failed = Some(e.to_string());
            }
        }
        let Some(d) = self.planner.current() else {
            let why = failed.unwrap_or_else(|| "no decision".into());
            return (false, Next::here(graph, format!("the planner failed: {why}")));
        };
        if d.chosen.is_wearable_only() {
            let ms = d.evaluation.latency_s * 1e3;
            let why = format!("the planner: every layer here, predicted {ms:.1} ms ({})", d.reason);
            return (true, Next { local_reason: Some(why), ..Next::at(d.chosen.clone(), Some(ms)) });
        }
        let conditions = *self.planner.conditions();
        match self.offload.check(graph, d, wearable, handheld, &conditions, mode) {
            Verdict::Offload { predicted_ms } => (true, Next::at(d.chosen.clone(), Some(predicted_ms))),
            Verdict::Local { predicted_ms, why } => (
                true,
                Next { local_reason: Some(why), ..Next::at(Cut::wearable_only(graph), Some(predicted_ms)) },
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{InputShapes, Model};

    fn model() -> Model {
        Model::from_bytes(&tandem_models::tiny::tiny_mlp_onnx(), &InputShapes::none()).expect("tiny model")
    }

    /// Every layer `per_layer_s`, no fixed cost.
    fn layers(g: &LayerGraph, per_layer_s: f64) -> ProfiledLatency {
        ProfiledLatency { per_node_s: vec![per_layer_s; g.nodes().len()], overhead_s: 0.0 }
    }

    fn driver(g: &LayerGraph, adapt: bool) -> Driver {
        let mut config = SessionConfig::watch_and_phone().expect("shipped profiles");
        config.adapt = adapt;
        config.hint = LatencyHint::Fastest;
        Driver::new(&config, OnlineLatency::new(g, layers(g, 0.005))).expect("driver")
    }

    fn now(rtt_ms: u64) -> Now<'static> {
        Now {
            link: LinkEstimate {
                up_bytes_per_s: 1e9,
                down_bytes_per_s: 1e9,
                rtt: Duration::from_millis(rtt_ms),
            },
            status: HandheldStatus::default(),
            codecs: None,
        }
    }

    #[test]
    fn without_a_ready_handheld_or_its_layer_times_every_layer_runs_here_saying_why() {
        let m = model();
        let g = m.graph();
        let mut d = driver(g, true);
        let n = d.next(g, &Placement::Auto, Some("no handheld yet".into()), Mode::Single, now(1));
        assert_eq!(n, Next::here(g, "no handheld yet"));
        let n = d.next(g, &Placement::WearableOnly, None, Mode::Single, now(1));
        assert_eq!(n.local_reason.as_deref(), Some("placement: wearable only"));
        let n = d.next(g, &Placement::Auto, None, Mode::Single, now(1));
        assert!(n.cut.is_wearable_only());
        assert!(n.local_reason.unwrap_or_default().contains("has not sent its layer times"));
        assert_eq!(d.predict_ms(g, &Cut::handheld_only(g), now(1)), None);
    }

    #[test]
    fn a_faster_handheld_close_by_is_offloaded_to_and_a_distant_one_is_not() {
        let m = model();
        let g = m.graph();
        let mut d = driver(g, true);
        d.handheld_ready(g, "a name that is no shipped profile", layers(g, 0.0001));
        let n = d.next(g, &Placement::Auto, None, Mode::Single, now(1));
        assert!(!n.cut.is_wearable_only(), "a 50× faster handheld 1 ms away: {n:?}");
        assert_eq!(n.local_reason, None);
        let predicted = n.predicted_ms.expect("a decided cut has a prediction");
        let direct = d.predict_ms(g, &n.cut, now(1)).expect("layer times known");
        assert!((predicted - direct).abs() < 1e-6 * direct, "{predicted} vs {direct}");
        // A one-second round trip moves the link past 10%: the planner
        // re-decides, and running alone wins (by the planner, or by the check).
        let n = d.next(g, &Placement::Auto, None, Mode::Single, now(1000));
        assert!(n.cut.is_wearable_only(), "{n:?}");
        assert!(n.local_reason.expect("saying why").starts_with("the planner"));
    }

    #[test]
    fn a_session_that_does_not_adapt_keeps_its_first_decision() {
        let m = model();
        let g = m.graph();
        let mut d = driver(g, false);
        d.handheld_ready(g, "phone", layers(g, 0.0001));
        let first = d.next(g, &Placement::Auto, None, Mode::Single, now(1));
        assert!(!first.cut.is_wearable_only());
        assert_eq!(d.next(g, &Placement::Auto, None, Mode::Single, now(1000)), first);
    }

    #[test]
    fn predictions_that_move_past_the_margin_make_the_planner_re_decide() {
        let m = model();
        let g = m.graph();
        let mut d = driver(g, true);
        d.handheld_ready(g, "phone", layers(g, 0.0001));
        let first = d.next(g, &Placement::Auto, None, Mode::Single, now(5));
        assert!(!first.cut.is_wearable_only(), "{first:?}");
        // The watch turns out 1000× faster than its profile: measured runs
        // of every layer here teach the prediction, and the next frame runs here.
        let all = vec![true; g.nodes().len()];
        for _ in 0..50 {
            d.learn(&all, Duration::from_micros(5), None, 1.0);
        }
        let next = d.next(g, &Placement::Auto, None, Mode::Single, now(5));
        assert!(next.cut.is_wearable_only(), "{next:?}");
    }

    #[test]
    fn stalls_count_misses_in_a_row_and_a_ready_handheld_starts_again() {
        let m = model();
        let g = m.graph();
        let mut d = driver(g, true);
        let limit = SessionConfig::watch_and_phone().expect("config").max_missed_deadlines.max(1);
        for _ in 1..limit {
            assert_eq!(d.missed_deadline(), None);
        }
        d.handheld_ready(g, "phone", layers(g, 0.0001));
        for _ in 1..limit {
            assert_eq!(d.missed_deadline(), None, "a new link's count starts at 0");
        }
        assert!(d.missed_deadline().is_some());
    }
}
