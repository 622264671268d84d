//! The planning driver: both sides' predictions (learning from every
//! frame), the [`Planner`] polled between frames, and the rules around it
//! from [`tandem_plan::partition::rules`]. It answers one question, with
//! no I/O and no clock: which cut the next frame runs at, predicted how
//! fast, on which engines, and why every layer runs here when they do
//! ([`Next`]). Each side may have several engines, each with its own
//! predictions: the planner chooses the cut and both halves' engines together.

use std::time::Duration;

use tracing::{debug, info, warn};

use super::config::{Placement, SessionConfig};
use crate::engine::{Engine, Engines};
use crate::{Cut, Error, LayerGraph, Result};
use tandem_plan::device::DeviceProfile;
use tandem_plan::energy::{ClusterEnergy, PowerModel};
use tandem_plan::partition::dvfs::Setting;
use tandem_plan::partition::rules::{
    ChangeGate, OffloadCheck, Revisit, StallPolicy, Verdict, LINK_CHANGE, REVISIT_EVERY,
};
use tandem_plan::partition::tiers::{
    decide_tiers_served, evaluate_placement, EdgeLink, EdgePrices, Placement as TierPlacement, Route, Tier,
    TierDecision, TierPrices,
};
use tandem_plan::partition::{
    evaluate, Conditions, Decision, EnergyWeights, EngineSide, HandheldStatus, LatencyHint, LinkCodecs,
    LinkEstimate, Mode, NodePrices, Planner, PlannerConfig, Side,
};
use tandem_plan::predict::{OnlineLatency, ProfiledLatency};

/// The cut a frame runs at, its predicted latency (ms), why every layer
/// runs here when they do, and (for the first frame of a switch that
/// waited for its plans) the wait since the decision.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Next {
    pub cut: Cut,
    pub predicted_ms: Option<f64>,
    /// How far apart the answers of pipelined frames follow each other
    /// (ms), when the planner priced the cut's stages
    /// (`Evaluation::remote_period_s`).
    pub service_ms: Option<f64>,
    pub local_reason: Option<String>,
    pub waited: Option<Duration>,
    /// The engine of each half, when chosen with the cut (`None`: each
    /// side's own, the faster whole model under `auto`).
    pub engines: Option<Engines>,
    /// Every layer here to measure the whole model again ([`Revisit`]),
    /// not a decision: the cut in force, or one waiting for its plans,
    /// stays where the next frame goes.
    pub revisit: bool,
}

impl Next {
    /// Every layer here, for `reason`, with no prediction.
    pub fn here(graph: &LayerGraph, reason: impl Into<String>) -> Next {
        Next {
            cut: Cut::wearable_only(graph),
            predicted_ms: None,
            service_ms: None,
            local_reason: Some(reason.into()),
            waited: None,
            engines: None,
            revisit: false,
        }
    }

    /// `cut`, predicted at `predicted_ms`.
    pub fn at(cut: Cut, predicted_ms: Option<f64>) -> Next {
        Next {
            cut,
            predicted_ms,
            service_ms: None,
            local_reason: None,
            waited: None,
            engines: None,
            revisit: false,
        }
    }

    /// The same, on `engines`.
    pub fn on(self, engines: Option<Engines>) -> Next {
        Next { engines, ..self }
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
    /// Both sides' whole-model predictions (s) on each engine
    /// ([`Driver::whole_model_s`]) the planner last decided with, re-decided
    /// when any moves past the margin.
    totals: ChangeGate<[f64; 2 * Engine::ALL.len()]>,
    offload: OffloadCheck,
    /// Decide once and keep (Neurosurgeon's rule) when the config does not adapt.
    adapt: bool,
    kept: Option<Next>,
    /// Whether the planner's runners-up are wanted (plans built ahead).
    want_ahead: bool,
    /// The planner's runners-up for its last new decision, to build ahead.
    ahead: Vec<Cut>,
    /// This side's layer times on each engine it has (its own first),
    /// each learning from the frames it runs.
    wearable_latency: Vec<(Engine, OnlineLatency)>,
    /// The handheld's on each engine it offered (its own first), from the
    /// layer times it sent, learning from the times it reports.
    handheld_latency: Option<Vec<(Engine, OnlineLatency)>>,
    wearable_energy: ClusterEnergy,
    /// The ready handheld's energy model: its shipped profile's, else the fallback's.
    handheld_energy: ClusterEnergy,
    /// The configured fallback handheld's, for a handheld of no shipped profile.
    fallback_energy: ClusterEnergy,
    /// Deadlines missed in a row.
    stall: StallPolicy,
    /// At a source rate, when a frame runs here to measure the whole model again.
    revisit: Revisit,
}

impl Driver {
    /// A driver for `config`'s devices, the wearable's layer times
    /// measured already on its own engine and on each other it has.
    pub fn new(
        config: &SessionConfig,
        (own, others): ((Engine, OnlineLatency), Vec<(Engine, OnlineLatency)>),
    ) -> Result<Driver> {
        let wearable_latency = std::iter::once(own).chain(others).collect();
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
        let fallback_energy = energy(&config.handheld_fallback)?;
        Ok(Driver {
            planner,
            link: ChangeGate::new(config.link_default, LINK_CHANGE),
            totals: ChangeGate::new([0.0; 2 * Engine::ALL.len()], config.margin),
            offload: OffloadCheck::new(config.margin, in_flight),
            adapt: config.adapt,
            kept: None,
            want_ahead: config.prepare_ahead,
            ahead: vec![],
            wearable_latency,
            handheld_latency: None,
            wearable_energy: energy(&config.wearable)?,
            handheld_energy: fallback_energy.clone(),
            fallback_energy,
            stall: StallPolicy::new(config.max_missed_deadlines),
            revisit: Revisit::new(REVISIT_EVERY),
        })
    }

    /// A handheld is ready: its profile's name (a shipped profile prices
    /// its energy, any other name the fallback's, never an earlier
    /// handheld's) and its layer times on each engine it offered, its own
    /// first.
    pub fn handheld_ready(
        &mut self,
        graph: &LayerGraph,
        device: &str,
        (own, others): ((Engine, ProfiledLatency), Vec<(Engine, ProfiledLatency)>),
    ) {
        // A name from the peer: a shipped profile or none (never a path).
        self.handheld_energy = DeviceProfile::shipped(device)
            .and_then(|p| ClusterEnergy::new(&p, PowerModel::Analytical))
            .unwrap_or_else(|_| self.fallback_energy.clone());
        let all = std::iter::once(own).chain(others);
        self.handheld_latency = Some(all.map(|(e, l)| (e, OnlineLatency::new(graph, l))).collect());
        // A new handheld may not offer the engines a kept decision named: decide again.
        self.kept = None;
        // A new link: the last one's misses do not count against it, and
        // nothing is offloaded in force.
        self.stall.reset();
        self.offload.here();
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
        // Another objective: what was in force does not hold under it.
        if self.planner.conditions().hint != hint {
            self.offload.here();
        }
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
    /// `handheld_dilation` times slower than idle; each side's into the
    /// predictions of the engine that ran it (`engines`; `None`: each
    /// side's own). When a whole-model prediction of either side on any
    /// engine moved past the margin, the planner re-decides.
    pub fn learn(
        &mut self,
        prefix: &[bool],
        (wearable, handheld): (Duration, Option<Duration>),
        handheld_dilation: f64,
        engines: Option<Engines>,
    ) {
        if let Some(online) = pick_mut(&mut self.wearable_latency, engines.map(|e| e.prefix)) {
            online.observe(prefix, wearable.as_secs_f64());
        }
        let on = engines.map(|e| e.suffix);
        if let (Some(h), Some(online)) =
            (handheld, self.handheld_latency.as_mut().and_then(|l| pick_mut(l, on)))
        {
            // Its profile is of an idle handheld: the load it reported is priced apart.
            let suffix: Vec<bool> = prefix.iter().map(|&p| !p).collect();
            online.observe(&suffix, h.as_secs_f64() / handheld_dilation);
        }
        let revisited = prefix.iter().all(|&p| p) && self.revisit.ran_here();
        let now = self.whole_model_s(prefix.len());
        if self.totals.update(now).is_some() || revisited {
            debug!(?now, revisited, "the predictions moved: re-deciding");
            self.offload.forget();
            self.planner.handle_predictor_update();
        }
    }

    /// Each side's whole-model prediction (s) on each engine of
    /// [`Engine::ALL`], the wearable's first (0 where it lacks the engine).
    fn whole_model_s(&self, layers: usize) -> [f64; 2 * Engine::ALL.len()] {
        let all = vec![true; layers];
        let mut out = [0.0; 2 * Engine::ALL.len()];
        let sides = [Some(&self.wearable_latency[..]), self.handheld_latency.as_deref()];
        for (i, side) in sides.into_iter().enumerate() {
            for (j, e) in Engine::ALL.into_iter().enumerate() {
                if let Some(l) = side.and_then(|s| pick(s, Some(e))) {
                    out[i * Engine::ALL.len() + j] = l.predict_s(&all);
                }
            }
        }
        out
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

    /// The predicted latency (ms) of `cut` now on `engines` (`None`: each
    /// side's own), its tensors in their cheapest encodings; `None` before
    /// the handheld's layer times are known.
    pub fn predict_on(
        &self,
        graph: &LayerGraph,
        cut: &Cut,
        now: Now,
        engines: Option<Engines>,
    ) -> Option<f64> {
        let (wearable, handheld) = self.sides(engines)?;
        Some(self.price(graph, cut, now, wearable, handheld) * 1e3)
    }

    /// The latency (s) of `cut` on these sides now.
    fn price(&self, graph: &LayerGraph, cut: &Cut, now: Now, wearable: Side, handheld: Side) -> f64 {
        let weights = self.planner.conditions().weights;
        let mut prices = NodePrices::new(graph, wearable, handheld, &now.link, &now.status, weights);
        if let Some(codecs) = now.codecs {
            prices = prices.with_codecs(graph, codecs, &now.status);
        }
        evaluate(graph, &prices, cut, now.link.rtt).latency_s
    }

    /// `cut` on the pair of engines predicted fastest for it now, and that
    /// prediction (ms); `None` before the handheld's layer times are known.
    pub fn fastest_engines(&self, graph: &LayerGraph, cut: &Cut, now: Now) -> Option<(Engines, f64)> {
        let handheld = self.handheld_latency.as_ref()?;
        let mut best: Option<(Engines, f64)> = None;
        for (we, w) in &self.wearable_latency {
            for (he, h) in handheld {
                let wearable = Side { latency: w.latency(), energy: &self.wearable_energy };
                let handheld = Side { latency: h.latency(), energy: &self.handheld_energy };
                let s = self.price(graph, cut, now, wearable, handheld);
                if best.is_none_or(|(_, b)| s < b) {
                    best = Some((Engines { prefix: *we, suffix: *he }, s));
                }
            }
        }
        best.map(|(e, s)| (e, s * 1e3))
    }

    /// Both sides' predictors on `engines` (`None`: each side's own);
    /// `None` before the handheld's layer times are known, or when a side
    /// lacks the engine named.
    fn sides(&self, engines: Option<Engines>) -> Option<(Side<'_>, Side<'_>)> {
        let handheld = pick(self.handheld_latency.as_deref()?, engines.map(|e| e.suffix))?;
        let wearable = pick(&self.wearable_latency, engines.map(|e| e.prefix))?;
        Some((
            Side { latency: wearable.latency(), energy: &self.wearable_energy },
            Side { latency: handheld.latency(), energy: &self.handheld_energy },
        ))
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
        // The three tiers are priced on each side's own engine.
        let (wearable, handheld) = self.sides(None)?;
        let handheld_latency = pick(self.handheld_latency.as_deref()?, None)?.latency();
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
            // A fixed cut's halves run on the engines predicted fastest for it.
            Placement::HandheldOnly => {
                let cut = Cut::handheld_only(graph);
                let best = self.fastest_engines(graph, &cut, now);
                return Next::at(cut, best.map(|b| b.1)).on(best.map(|b| b.0));
            }
            Placement::Fixed(c) => {
                let why = c.is_wearable_only().then(|| "placement: a fixed cut with every layer here".into());
                let best = self.fastest_engines(graph, c, now);
                let next = Next::at(c.clone(), best.map(|b| b.1)).on(best.map(|b| b.0));
                return Next { local_reason: why, ..next };
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
        let Some(handheld_latency) = self.handheld_latency.as_deref() else {
            return (false, Next::here(graph, "the handheld has not sent its layer times yet"));
        };
        let wearables = engine_sides(&self.wearable_latency, &self.wearable_energy);
        let handhelds = engine_sides(handheld_latency, &self.handheld_energy);
        let mut failed = None;
        match self.planner.poll_engines(graph, &wearables, &handhelds) {
            Ok(Some(d)) => {
                info!(
                    cut = %d.chosen.describe(graph),
                    engines = ?d.engines,
                    encodings = ?d.encodings,
                    reason = %d.reason,
                    "partition"
                );
                if self.want_ahead {
                    // The runners-up on the decision's engines.
                    let (w, h) = (
                        pick_side(&wearables, d.engines.map(|e| e.prefix)),
                        pick_side(&handhelds, d.engines.map(|e| e.suffix)),
                    );
                    if let (Some(w), Some(h)) = (w, h) {
                        self.ahead = self.planner.runners_up(graph, w, h, &super::switch::AHEAD_FACTORS);
                    }
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
        let engines = d.engines;
        if d.chosen.is_wearable_only() {
            self.offload.here();
            let ms = d.evaluation.latency_s * 1e3;
            let why = format!("the planner: every layer here, predicted {ms:.1} ms ({})", d.reason);
            let next = Next::at(d.chosen.clone(), Some(ms)).on(engines);
            return (true, Next { local_reason: Some(why), ..next });
        }
        let conditions = *self.planner.conditions();
        let (Some(wearable), Some(handheld)) = (
            pick_side(&wearables, engines.map(|e| e.prefix)),
            pick_side(&handhelds, engines.map(|e| e.suffix)),
        ) else {
            return (false, Next::here(graph, "the planner chose an engine it was not given"));
        };
        match self.offload.check(graph, d, wearable, handheld, &conditions, mode) {
            Verdict::Offload { predicted_ms, service_ms } => {
                // Only a stream at a source rate, offloaded late, prices the whole model here.
                let period = self.planner.planned_period();
                let here_s = || {
                    pick(&self.wearable_latency, engines.map(|e| e.prefix))
                        .map(|l| l.predict_s(&vec![true; graph.nodes().len()]))
                };
                if let Some(here_s) = self.revisit.due(period, predicted_ms / 1e3, here_s) {
                    let why = format!(
                        "a revisit: every layer here, predicted {:.1} ms, while the offload's {predicted_ms:.1} ms \
                         misses the {:.1} ms period (measured again after {REVISIT_EVERY} frames offloaded late)",
                        here_s * 1e3,
                        period.unwrap_or_default().as_secs_f64() * 1e3,
                    );
                    let next = Next::at(Cut::wearable_only(graph), Some(here_s * 1e3)).on(engines);
                    return (true, Next { local_reason: Some(why), revisit: true, ..next });
                }
                let next = Next::at(d.chosen.clone(), Some(predicted_ms)).on(engines);
                (true, Next { service_ms: Some(service_ms), ..next })
            }
            Verdict::Local { predicted_ms, why } => {
                let next = Next::at(Cut::wearable_only(graph), Some(predicted_ms)).on(engines);
                (true, Next { local_reason: Some(why), ..next })
            }
        }
    }
}

/// A planner's engine sides of one side's predictors, priced with `energy`.
fn engine_sides<'a>(side: &'a [(Engine, OnlineLatency)], energy: &'a ClusterEnergy) -> Vec<EngineSide<'a>> {
    side.iter()
        .map(|(engine, l)| EngineSide { engine: *engine, side: Side { latency: l.latency(), energy } })
        .collect()
}

/// The predictor of `engine` in `side` (`None`: the side's own, first).
fn pick(side: &[(Engine, OnlineLatency)], engine: Option<Engine>) -> Option<&OnlineLatency> {
    match engine {
        Some(e) => side.iter().find(|(x, _)| *x == e).map(|(_, l)| l),
        None => side.first().map(|(_, l)| l),
    }
}

/// [`pick`], to learn.
fn pick_mut(side: &mut [(Engine, OnlineLatency)], engine: Option<Engine>) -> Option<&mut OnlineLatency> {
    match engine {
        Some(e) => side.iter_mut().find(|(x, _)| *x == e).map(|(_, l)| l),
        None => side.first_mut().map(|(_, l)| l),
    }
}

/// The side of `engine` among a planner's engine sides (`None`: the first).
fn pick_side<'a>(sides: &[EngineSide<'a>], engine: Option<Engine>) -> Option<Side<'a>> {
    match engine {
        Some(e) => sides.iter().find(|s| s.engine == e).map(|s| s.side),
        None => sides.first().map(|s| s.side),
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
        Driver::new(&config, ((Engine::Tract, OnlineLatency::new(g, layers(g, 0.005))), vec![]))
            .expect("driver")
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
        assert_eq!(d.predict_on(g, &Cut::handheld_only(g), now(1), None), None);
    }

    #[test]
    fn a_faster_handheld_close_by_is_offloaded_to_and_a_distant_one_is_not() {
        let m = model();
        let g = m.graph();
        let mut d = driver(g, true);
        d.handheld_ready(
            g,
            "a name that is no shipped profile",
            ((Engine::Tract, layers(g, 0.0001)), vec![]),
        );
        let n = d.next(g, &Placement::Auto, None, Mode::Single, now(1));
        assert!(!n.cut.is_wearable_only(), "a 50× faster handheld 1 ms away: {n:?}");
        assert_eq!(n.local_reason, None);
        let predicted = n.predicted_ms.expect("a decided cut has a prediction");
        let direct = d.predict_on(g, &n.cut, now(1), None).expect("layer times known");
        assert!((predicted - direct).abs() < 1e-6 * direct, "{predicted} vs {direct}");
        // A one-second round trip moves the link past 10%: the planner
        // re-decides, and running alone wins (by the planner, or by the check).
        let n = d.next(g, &Placement::Auto, None, Mode::Single, now(1000));
        assert!(n.cut.is_wearable_only(), "{n:?}");
        assert!(n.local_reason.expect("saying why").starts_with("the planner"));
    }

    #[test]
    fn a_handheld_of_no_shipped_profile_is_priced_as_the_fallback_not_as_the_one_before() {
        let m = model();
        let g = m.graph();
        let mut d = driver(g, true);
        let fallback = d.handheld_energy().clone();
        let shipped = |name: &str| {
            let p = DeviceProfile::shipped(name).expect("a shipped profile");
            ClusterEnergy::new(&p, PowerModel::Analytical).expect("its energy model")
        };
        let times = || ((Engine::Tract, layers(g, 0.0001)), vec![]);
        d.handheld_ready(g, "samsung-a16", times());
        assert_eq!(d.handheld_energy(), &shipped("samsung-a16"));
        assert_ne!(d.handheld_energy(), &fallback, "the test needs a profile apart from the fallback");
        // A roaming watch meets a phone whose name is no shipped profile.
        d.handheld_ready(g, "a phone of no shipped profile", times());
        assert_eq!(d.handheld_energy(), &fallback);
        d.handheld_ready(g, "nexus-6", times());
        assert_eq!(d.handheld_energy(), &shipped("nexus-6"));
    }

    #[test]
    fn a_session_that_does_not_adapt_keeps_its_first_decision() {
        let m = model();
        let g = m.graph();
        let mut d = driver(g, false);
        d.handheld_ready(g, "phone", ((Engine::Tract, layers(g, 0.0001)), vec![]));
        let first = d.next(g, &Placement::Auto, None, Mode::Single, now(1));
        assert!(!first.cut.is_wearable_only());
        assert_eq!(d.next(g, &Placement::Auto, None, Mode::Single, now(1000)), first);
    }

    #[test]
    fn predictions_that_move_past_the_margin_make_the_planner_re_decide() {
        let m = model();
        let g = m.graph();
        let mut d = driver(g, true);
        d.handheld_ready(g, "phone", ((Engine::Tract, layers(g, 0.0001)), vec![]));
        let first = d.next(g, &Placement::Auto, None, Mode::Single, now(5));
        assert!(!first.cut.is_wearable_only(), "{first:?}");
        // The watch turns out 1000× faster than its profile: measured runs
        // of every layer here teach the prediction, and the next frame runs here.
        let all = vec![true; g.nodes().len()];
        for _ in 0..50 {
            d.learn(&all, (Duration::from_micros(5), None), 1.0, None);
        }
        let next = d.next(g, &Placement::Auto, None, Mode::Single, now(5));
        assert!(next.cut.is_wearable_only(), "{next:?}");
    }

    /// At a source rate where no cut meets the period, the stream offloads
    /// for the period and every layer here is run again after
    /// [`REVISIT_EVERY`] frames offloaded; once such a frame is measured
    /// fast enough, the stream comes back here to meet the period.
    #[test]
    fn at_a_source_rate_a_late_offload_revisits_every_layer_here() {
        let m = model();
        let g = m.graph();
        let mut d = driver(g, true);
        d.handheld_ready(g, "phone", ((Engine::Tract, layers(g, 0.0001)), vec![]));
        let all = vec![true; g.nodes().len()];
        let here_s = 0.005 * g.nodes().len() as f64;
        // Offloaded, a frame takes longer than here (the round trip), but the stream's period is short.
        let rtt = now((here_s * 1.3 * 1e3).ceil() as u64);
        d.handle_rate(Some(Duration::from_secs_f64(here_s * 0.96)));
        let mut revisits = vec![];
        for frame in 0..2 * (REVISIT_EVERY + 1) {
            let n = d.next(g, &Placement::Auto, None, Mode::Stream, rtt);
            if n.cut.is_wearable_only() {
                let why = n.local_reason.unwrap_or_default();
                assert!(why.starts_with("a revisit"), "frame {frame}: {why}");
                revisits.push(frame);
                // Measured as predicted: it re-decides, and the offload stays.
                d.learn(&all, (Duration::from_secs_f64(here_s), None), 1.0, None);
            }
        }
        let every = REVISIT_EVERY;
        assert_eq!(revisits, [every, 2 * every + 1], "one frame in {} after the first {every}", every + 1);
        // The whole model here measured 8% under its prediction (less than
        // the margin that moves predictions enough to re-decide by
        // themselves): within the period, the stream comes back here.
        let mut back = None;
        for frame in 0..8 * (REVISIT_EVERY + 1) {
            let n = d.next(g, &Placement::Auto, None, Mode::Stream, rtt);
            let why = n.local_reason.clone().unwrap_or_default();
            if n.cut.is_wearable_only() && why.starts_with("a revisit") {
                d.learn(&all, (Duration::from_secs_f64(here_s * 0.92), None), 1.0, None);
            } else if n.cut.is_wearable_only() {
                back = Some((frame, why));
                break;
            }
        }
        let (frame, why) = back.expect("the stream came back here");
        assert!(why.contains("frames arrive every"), "frame {frame}: {why}");
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
        d.handheld_ready(g, "phone", ((Engine::Tract, layers(g, 0.0001)), vec![]));
        for _ in 1..limit {
            assert_eq!(d.missed_deadline(), None, "a new link's count starts at 0");
        }
        assert!(d.missed_deadline().is_some());
    }

    /// With two engines on the handheld, the suffix runs on the one
    /// predicted faster for the cut; once its frames are measured slower,
    /// the predictions of that engine alone learn it, and the next frame's
    /// suffix moves to the other.
    #[test]
    fn each_engine_learns_from_its_own_frames_and_the_suffix_follows_the_faster() {
        let m = model();
        let g = m.graph();
        let mut d = driver(g, true);
        let own = (Engine::Tract, layers(g, 0.001));
        d.handheld_ready(g, "phone", (own, vec![(Engine::OnnxRuntime, layers(g, 0.0001))]));
        let first = d.next(g, &Placement::Auto, None, Mode::Single, now(1));
        assert!(!first.cut.is_wearable_only(), "{first:?}");
        let on = first.engines.expect("engines chosen with the cut");
        assert_eq!(on.suffix, Engine::OnnxRuntime, "{first:?}");
        // onnxruntime's suffixes take 20 ms each, measured.
        for _ in 0..50 {
            d.learn(
                first.cut.prefix_mask(),
                (Duration::ZERO, Some(Duration::from_millis(20))),
                1.0,
                Some(on),
            );
        }
        let next = d.next(g, &Placement::Auto, None, Mode::Single, now(1));
        assert!(!next.cut.is_wearable_only(), "tract's suffix is still faster than the watch: {next:?}");
        assert_eq!(next.engines.map(|e| e.suffix), Some(Engine::Tract), "{next:?}");
        // tract's predictions did not move.
        let tract = d.predict_on(g, &next.cut, now(1), next.engines).expect("known");
        assert!(tract < 10.0, "{tract} ms");
    }
}
