//! The wearable's view of the edge tier: what the handheld said of the
//! edge (the cuts it serves, its round trip, or why it will not relay),
//! the placement over three tiers for the next frame, and what each
//! relayed frame taught (the phone–edge link, an edge that failed).

use std::time::Duration;

use tracing::{info, warn};

use super::config::EdgeConfig;
use super::driver::{Driver, EdgeView, Now};
use super::report::{EdgeLeg, Tiers};
use crate::{Cut, CutKey, LayerGraph};
use tandem_plan::partition::tiers::{Route, TierDecision};
use tandem_plan::partition::Mode;
use tandem_proto::session::EdgeReport;

/// After an edge failure, frames leave the edge out this long.
pub(super) const EDGE_BACKOFF: Duration = Duration::from_secs(5);

/// A three-tier decision is made again after this long at the latest; it
/// is made again at once when the two-tier planner's cut moves (its
/// conditions changed), the edge answers again, an edge frame fails, or
/// the phone–edge rate moves by more than 10%. Each decision is a set of
/// min-cuts per served cut: not a price every frame should pay.
const REDECIDE: Duration = Duration::from_secs(10);

/// Where the next frame goes when the edge takes part.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum EdgePlan {
    /// The watch runs S1's prefix, the phone S2 \ S1, the edge the rest.
    Relay {
        /// S1.
        watch: Cut,
        /// S2.
        near: Cut,
        /// The predicted latency (ms).
        ms: Option<f64>,
    },
    /// The whole model on the edge, the input sent over the watch's own link.
    Direct {
        /// The predicted latency (ms).
        ms: f64,
    },
}

/// Where a session stands with its edge tier.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct EdgeStatus {
    /// The edge server's URL.
    pub url: String,
    /// Cuts asked about whose suffixes it serves (0 before the handheld answered).
    pub served: usize,
    /// Cuts asked about.
    pub asked: usize,
    /// Why the handheld will not relay there, when it will not.
    pub refused: Option<String>,
    /// How many times faster than the handheld the plan takes the edge to
    /// be: as the handheld measured it, else the configured assumption
    /// (`--edge-speedup`).
    pub speedup: f64,
    /// Whether `speedup` was measured.
    pub speed_measured: bool,
}

/// The session's edge tier.
pub(super) struct EdgeState {
    config: EdgeConfig,
    /// The cuts asked about: [`tandem_core::tier::edge_cuts`] and the configured one.
    asked: Vec<Cut>,
    /// What the handheld said: `None` until it answered, or when it refused.
    view: Option<EdgeView>,
    /// Why the handheld will not relay (its answer).
    refused: Option<String>,
    /// The edge's speed against the handheld, as the handheld measured it.
    measured: Option<f64>,
    /// Frames leave the edge out until then (session time).
    avoid_until: Option<Duration>,
    /// The last decision, when (session time), whether the watch's own
    /// link to the edge could be used then, and the mode it was priced in.
    decided: Option<(Duration, CutKey, bool, Mode, TierDecision)>,
}

impl EdgeState {
    /// The edge of `config` for a model of `graph`.
    pub fn new(config: EdgeConfig, graph: &LayerGraph) -> EdgeState {
        let mut asked = tandem_core::tier::edge_cuts(graph, tandem_core::tier::EDGE_FRACTIONS);
        if let Some(c) = config.cut.as_ref().and_then(|k| Cut::from_key(graph, k.as_str()).ok()) {
            if !asked.contains(&c) {
                asked.insert(0, c);
            }
        }
        EdgeState {
            config,
            asked,
            view: None,
            refused: None,
            measured: None,
            avoid_until: None,
            decided: None,
        }
    }

    /// What the link task asks the handheld each time it is ready.
    pub fn ask(&self) -> (String, Vec<CutKey>) {
        (self.config.url.clone(), self.asked.iter().map(Cut::key).collect())
    }

    /// The handheld's answer: the cuts the edge serves, or why not.
    pub fn on_ready(
        &mut self,
        graph: &LayerGraph,
        deployed: Vec<CutKey>,
        (rtt_us, speed): (u64, Option<f64>),
        error: Option<String>,
    ) {
        self.decided = None;
        if let Some(why) = error {
            warn!(url = %self.config.url, "the handheld will not relay to the edge: {why}; two tiers");
            self.view = None;
            self.refused = Some(why);
            return;
        }
        let served: Vec<Cut> =
            deployed.iter().filter_map(|k| Cut::from_key(graph, k.as_str()).ok()).collect();
        info!(url = %self.config.url, served = served.len(), asked = self.asked.len(), rtt_us, ?speed, "the edge tier is ready");
        let mut link = self.view.as_ref().map_or(self.config.link, |v| v.link);
        link.rtt = Duration::from_micros(rtt_us);
        self.refused = None;
        self.measured = speed;
        // A measured speed wins over the configured assumption.
        self.view = Some(EdgeView { served, link, speedup: speed.unwrap_or(self.config.speedup) });
    }

    /// Where the session stands with the edge.
    pub fn status(&self) -> EdgeStatus {
        EdgeStatus {
            url: self.config.url.clone(),
            served: self.view.as_ref().map_or(0, |v| v.served.len()),
            asked: self.asked.len(),
            refused: self.refused.clone(),
            speedup: self.measured.unwrap_or(self.config.speedup),
            speed_measured: self.measured.is_some(),
        }
    }

    /// Whether the handheld has answered the edge ask (served cuts or a refusal).
    pub fn answered(&self) -> bool {
        self.view.is_some() || self.refused.is_some()
    }

    /// The placement for the next frame, offloaded at `two_tier` by the
    /// two-tier planner (predicted `two_tier_ms`), when the edge takes
    /// part, else `None`. A configured S2's is relayed, predicted as the
    /// two-tier prediction plus the phone–edge leg at the link's estimate
    /// (its bytes and RTT; the edge's compute not counted). `direct_ok`:
    /// the watch's own link to the edge can take the whole model now.
    #[allow(clippy::too_many_arguments)]
    pub fn placement(
        &mut self,
        driver: &Driver,
        graph: &LayerGraph,
        mode: Mode,
        now: Now,
        at: Duration,
        (two_tier, two_tier_ms): (&Cut, Option<f64>),
        direct_ok: bool,
    ) -> Option<EdgePlan> {
        let view = self.view.as_ref()?;
        if self.avoid_until.is_some_and(|t| at < t) {
            return None;
        }
        if let Some(forced) = &self.config.cut {
            let near = view.served.iter().find(|c| c.key() == *forced)?.clone();
            // S1: the two-tier cut within S2 (both closed: so is their intersection).
            let mask: Vec<bool> =
                two_tier.prefix_mask().iter().zip(near.prefix_mask()).map(|(&a, &b)| a && b).collect();
            let watch = Cut::from_mask(graph, mask).ok()?;
            let l = &view.link;
            let leg_s = l.rtt.as_secs_f64()
                + near.up_bytes() as f64 / l.up_bytes_per_s.max(1.0)
                + near.down_bytes() as f64 / l.down_bytes_per_s.max(1.0);
            return Some(EdgePlan::Relay { watch, near, ms: two_tier_ms.map(|ms| ms + leg_s * 1e3) });
        }
        let key = two_tier.key();
        let fresh = self.decided.as_ref().is_some_and(|(t, k, ok, m, _)| {
            at.saturating_sub(*t) < REDECIDE && *k == key && *ok == direct_ok && *m == mode
        });
        if !fresh {
            let direct = self.config.direct_estimate().filter(|_| direct_ok);
            let d = driver.edge_placement(graph, view, mode, now, direct.as_ref())?;
            self.decided = Some((at, key, direct_ok, mode, d));
        }
        let d = &self.decided.as_ref()?.4;
        let p = &d.placement;
        let ms = d.evaluation.latency_s * 1e3;
        if p.route() == Route::Direct && p.uses_edge() {
            return Some(EdgePlan::Direct { ms });
        }
        if !p.uses_edge() || p.watch().is_wearable_only() {
            return None;
        }
        Some(EdgePlan::Relay { watch: p.watch().clone(), near: p.near().clone(), ms: Some(ms) })
    }

    /// A relayed frame's report from the phone, at session time `at`: an
    /// edge failure keeps frames off it for [`EDGE_BACKOFF`]; a success
    /// updates the phone–edge rate (its bytes over the request's time less
    /// the RTT: the edge's compute counted as link time, a conservative
    /// rate). Returns the frame report's edge part.
    pub fn on_report(&mut self, report: &EdgeReport, at: Duration) -> EdgeLeg {
        if let Some(why) = &report.error {
            warn!(url = %self.config.url, "the edge failed; the phone ran its part ({why})");
            self.avoid_until = Some(at + EDGE_BACKOFF);
            self.decided = None;
        } else if let Some(view) = &mut self.view {
            let s = Duration::from_micros(report.edge_us).saturating_sub(view.link.rtt).as_secs_f64();
            let bytes = (report.up_bytes + report.down_bytes) as f64;
            if s > 1e-4 && bytes > 0.0 {
                let rate = bytes / s;
                let old = view.link.up_bytes_per_s;
                let new = 0.7 * old + 0.3 * rate;
                view.link.up_bytes_per_s = new;
                view.link.down_bytes_per_s = new;
                if (new - old).abs() > 0.1 * old {
                    self.decided = None;
                }
            }
        }
        EdgeLeg {
            cut: CutKey::from_wire(report.near.clone()),
            up_bytes: report.up_bytes,
            down_bytes: report.down_bytes,
            edge_ms: report.edge_us as f64 / 1e3,
            error: report.error.clone(),
        }
    }
}

/// Layers on each tier for a frame at `watch` (S1), relayed to the edge
/// from `near` (S2) when given, run on the phone otherwise.
pub(super) fn tiers(graph: &LayerGraph, watch: &Cut, near: Option<&Cut>) -> Tiers {
    let n = graph.nodes().len();
    let w = watch.prefix_len();
    match near {
        Some(s2) => Tiers { wearable: w, handheld: s2.prefix_len() - w, edge: n - s2.prefix_len() },
        None => Tiers { wearable: w, handheld: n - w, edge: 0 },
    }
}
