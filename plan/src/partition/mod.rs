//! The partition decision (SPEC 4, 5): price every layer and tensor once,
//! find candidate cuts, and choose among them with DeepWear's Algorithm 1.
//! No I/O, no clocks: a decision on a thousand-layer DAG takes milliseconds.
//!
//! Candidates come from one of four methods ([`Method`]):
//! - [`Method::Heuristic`], DeepWear's: the cuts of the simplified DAG
//!   ([`simplify`]: light layers pruned, repeated blocks bundled);
//! - [`Method::MinCut`], exact: s–t minimum cuts for the sum objectives, a
//!   Lagrangian search for the latency hint, and for streams a branch and
//!   bound over every cut ([`stream`]);
//! - [`Method::Exhaustive`]: every cut of the DAG (small DAGs only);
//! - [`Method::Chain`], Neurosurgeon's: the layers in topological order as
//!   a chain, every prefix a candidate (a baseline for comparisons).
//!
//! [`Planner`] re-decides as conditions change, with hysteresis; [`rules`]
//! holds what a session decides around it (when to tell it, offloading
//! against running alone, stalls). [`tiers`] places a model over three
//! tiers (watch, phone, edge server) on the same prices, exactly for the
//! sum objectives.

pub mod codecs;
pub mod dvfs;
pub mod mincut;
pub mod rules;
pub mod simplify;
pub mod stream;
pub mod tiers;

pub use codecs::{CodecOption, Crossing, LinkCodecs};
pub use simplify::{Simplified, SimplifyStats};
// Shared with the protocol's profiler, which measures them (tract-free).
pub use tandem_types::{EnergyWeights, HandheldStatus, LinkEstimate};

use std::time::Duration;

use serde::Serialize;

use crate::energy::EnergyModel;
use crate::predict::LatencyModel;
use tandem_core::{enumerate_cuts, Cut, Engine, Engines, Error, LayerGraph, Result};

/// One device's cost source: its latency predictor and energy model.
#[derive(Clone, Copy)]
pub struct Side<'a> {
    /// Predicted busy time of any set of layers on this device.
    pub latency: &'a dyn LatencyModel,
    /// Joules of compute, transmit and receive time on this device.
    pub energy: &'a dyn EnergyModel,
}

/// One engine's predictors on one side: a side that has several engines
/// offers one of these for each ([`Planner::poll_engines`]).
#[derive(Clone, Copy)]
pub struct EngineSide<'a> {
    /// The engine.
    pub engine: Engine,
    /// Its predictors on this device.
    pub side: Side<'a>,
}

/// The app's latency hint PropT.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub enum LatencyHint {
    /// PropT = 0: the fastest partition.
    Fastest,
    /// The least energy among partitions at most this slow, else the fastest.
    Within(Duration),
    /// PropT = ∞: the least energy.
    EnergyFirst,
}

/// Single inferences, or a pipelined stream (cost per frame = slowest stage).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Mode {
    /// One inference at a time: T is the sum of the stages.
    Single,
    /// Pipelined frames: T is max(T_w, T_link, T_p).
    Stream,
}

/// How candidates are found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// DeepWear's representative cuts: every cut of the simplified DAG.
    Heuristic,
    /// s–t minimum cuts of the sum objectives, a Lagrangian sweep for the
    /// latency hint, and branch and bound for streams.
    MinCut,
    /// Every cut of the DAG (refused above a limit).
    Exhaustive,
    /// Neurosurgeon's: the layers taken in topological order as a chain,
    /// each of its n + 1 prefixes a candidate (a baseline: on a DAG, a
    /// prefix may send many tensors, and cuts off the chain are missed).
    Chain,
}

/// Per-layer and per-byte prices of one decision, computed once.
#[derive(Clone, Debug)]
pub struct NodePrices {
    /// Wearable busy seconds per layer.
    pub t_wearable: Vec<f64>,
    /// Handheld busy seconds per layer, load included.
    pub t_handheld: Vec<f64>,
    /// Fixed seconds of one run on each side, paid by a non-empty part.
    pub overhead_s: (f64, f64),
    /// Wearable and handheld compute power (W).
    pub compute_w: (f64, f64),
    /// Wearable P_T, P_R (W).
    pub radio_wearable_w: (f64, f64),
    /// Handheld P_T, P_R (W).
    pub radio_handheld_w: (f64, f64),
    /// Seconds per byte up and down.
    pub s_per_byte: (f64, f64),
    /// Energy weights.
    pub weights: EnergyWeights,
    /// How each tensor (by id) crosses the link, when link encodings are
    /// priced ([`NodePrices::with_codecs`]); empty: every tensor raw.
    pub up_links: Vec<Crossing>,
    /// How each tensor (by id) comes back down, likewise.
    pub down_links: Vec<Crossing>,
}

/// A sum-of-costs objective the min-cut can optimize.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Objective {
    /// Seconds.
    Latency,
    /// Weighted joules.
    Energy,
    /// Weighted joules + λ · seconds.
    Lagrangian(f64),
}

impl NodePrices {
    /// Prices the graph's layers with both sides' predictors.
    pub fn new(
        graph: &LayerGraph,
        wearable: Side,
        handheld: Side,
        link: &LinkEstimate,
        status: &HandheldStatus,
        weights: EnergyWeights,
    ) -> NodePrices {
        let w = wearable.latency.node_costs(graph);
        let h = handheld.latency.node_costs(graph);
        let k = status.dilation();
        let rate = |r: f64| if r > 0.0 { 1.0 / r } else { f64::INFINITY };
        NodePrices {
            t_wearable: w.per_node_s.iter().map(|s| s.max(0.0)).collect(),
            t_handheld: h.per_node_s.iter().map(|s| s.max(0.0) * k).collect(),
            overhead_s: (w.overhead_s.max(0.0), h.overhead_s.max(0.0) * k),
            compute_w: (wearable.energy.compute_power_w(), handheld.energy.compute_power_w()),
            radio_wearable_w: (wearable.energy.transmit_power_w(), wearable.energy.receive_power_w()),
            radio_handheld_w: (handheld.energy.transmit_power_w(), handheld.energy.receive_power_w()),
            s_per_byte: (rate(link.up_bytes_per_s), rate(link.down_bytes_per_s)),
            weights,
            up_links: vec![],
            down_links: vec![],
        }
    }

    /// (price if on the wearable, price if on the handheld) of layer `v`.
    pub fn node(&self, v: usize, objective: Objective) -> (f64, f64) {
        let (tw, tp) = (self.t_wearable[v], self.t_handheld[v]);
        let (ew, ep) =
            (self.weights.wearable * self.compute_w.0 * tw, self.weights.handheld * self.compute_w.1 * tp);
        match objective {
            Objective::Latency => (tw, tp),
            Objective::Energy => (ew, ep),
            Objective::Lagrangian(l) => (ew + l * tw, ep + l * tp),
        }
    }

    /// Price of sending `bytes` up (wearable transmits, handheld receives).
    pub fn up(&self, bytes: u64, objective: Objective) -> f64 {
        let t = bytes as f64 * self.s_per_byte.0;
        let e = self.weights.wearable * self.radio_wearable_w.0 * t
            + self.weights.handheld * self.radio_handheld_w.1 * t;
        match objective {
            Objective::Latency => t,
            Objective::Energy => e,
            Objective::Lagrangian(l) => e + l * t,
        }
    }

    /// Price of sending `bytes` down (handheld transmits, wearable receives).
    pub fn down(&self, bytes: u64, objective: Objective) -> f64 {
        let t = bytes as f64 * self.s_per_byte.1;
        let e = self.weights.wearable * self.radio_wearable_w.1 * t
            + self.weights.handheld * self.radio_handheld_w.0 * t;
        match objective {
            Objective::Latency => t,
            Objective::Energy => e,
            Objective::Lagrangian(l) => e + l * t,
        }
    }
}

/// The predicted cost of one partition.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Evaluation {
    /// Wearable compute (s).
    pub t_wearable: f64,
    /// Uplink transfer (s).
    pub t_up: f64,
    /// Bytes sent up (encoded, when link encodings are priced).
    pub up_bytes: u64,
    /// Bytes sent down (likewise).
    pub down_bytes: u64,
    /// Handheld compute, load included (s).
    pub t_handheld: f64,
    /// Downlink transfer (s).
    pub t_down: f64,
    /// RTT paid (s): 0 for wearable-only.
    pub t_rtt: f64,
    /// Single-inference latency: the sum of the stages (s).
    pub latency_s: f64,
    /// Per-frame time of a pipelined stream: the slowest stage (s).
    pub stream_period_s: f64,
    /// Weighted energy (J): Ww·(E_w + P_T·t_up + P_R·t_down) + Wp·(E_p + P_R·t_up + P_T·t_down).
    pub energy_j: f64,
}

impl Evaluation {
    /// The time the mode cares about: latency, or the stream's period.
    pub fn time(&self, mode: Mode) -> f64 {
        match mode {
            Mode::Single => self.latency_s,
            Mode::Stream => self.stream_period_s,
        }
    }

    /// Per-frame time of the remote stages of a pipelined stream: the
    /// link (both ways: one radio) or the handheld, whichever is slower
    /// (s). The stream's period without the wearable's stage, so how far
    /// apart the answers of frames in flight follow each other.
    pub fn remote_period_s(&self) -> f64 {
        remote_period(self.t_up, self.t_down, self.t_handheld)
    }
}

/// [`Evaluation::remote_period_s`] of these stages (s): the link, both
/// ways on one radio, or the handheld, whichever is slower.
fn remote_period(t_up: f64, t_down: f64, t_handheld: f64) -> f64 {
    (t_up + t_down).max(t_handheld)
}

/// Prices a cut under the full formulas (fixed run costs and RTT included).
pub fn evaluate(graph: &LayerGraph, prices: &NodePrices, cut: &Cut, rtt: Duration) -> Evaluation {
    let n = graph.nodes().len();
    let (mut tw, mut tp) = (0.0, 0.0);
    let (mut any_w, mut any_p) = (false, false);
    for v in 0..n {
        if cut.on_wearable(v) {
            tw += prices.t_wearable[v];
            any_w = true;
        } else {
            tp += prices.t_handheld[v];
            any_p = true;
        }
    }
    if any_w {
        tw += prices.overhead_s.0;
    }
    if any_p {
        tp += prices.overhead_s.1;
    }
    evaluate_stages(prices, cut, tw, tp, rtt)
}

/// Prices a cut whose compute stages are already known (predicted or
/// measured): `tw` on the wearable, `tp` on the handheld (load included).
/// Link time and radio energy come from the cut's bytes and `prices`.
pub fn evaluate_stages(prices: &NodePrices, cut: &Cut, tw: f64, tp: f64, rtt: Duration) -> Evaluation {
    // Encoding is the sender's work, decoding the receiver's, in their stages.
    let (up_bytes, up_enc, up_dec) = coded(&prices.up_links, cut.up_tensors(), cut.up_bytes());
    let (down_bytes, down_enc, down_dec) = coded(&prices.down_links, cut.down_tensors(), cut.down_bytes());
    let (tw, tp) = (tw + up_enc + down_dec, tp + up_dec + down_enc);
    let t_up = prices.up(up_bytes, Objective::Latency);
    let t_down = prices.down(down_bytes, Objective::Latency);
    let offloads = !cut.is_wearable_only();
    let t_rtt = if offloads { rtt.as_secs_f64() } else { 0.0 };
    let energy_j = prices.weights.wearable * prices.compute_w.0 * tw
        + prices.weights.handheld * prices.compute_w.1 * tp
        + prices.up(up_bytes, Objective::Energy)
        + prices.down(down_bytes, Objective::Energy);
    Evaluation {
        t_wearable: tw,
        t_up,
        up_bytes,
        down_bytes,
        t_handheld: tp,
        t_down,
        t_rtt,
        latency_s: tw + t_up + t_rtt + tp + t_down,
        // Pipelined, the link's stage is its transfer time; RTT adds latency, not period.
        stream_period_s: tw.max(remote_period(t_up, t_down, tp)),
        energy_j,
    }
}

/// Link bytes and (sender, receiver) coding seconds of tensors `ids`
/// crossing as `links` says; `raw` bytes, uncoded, when no links are priced.
fn coded(links: &[Crossing], ids: &[usize], raw: u64) -> (u64, f64, f64) {
    if links.is_empty() {
        return (raw, 0.0, 0.0);
    }
    ids.iter().fold((0, 0.0, 0.0), |(b, e, d), &t| {
        (b + links[t].bytes, e + links[t].encode_s, d + links[t].decode_s)
    })
}

/// Everything one decision depends on.
#[derive(Clone, Copy)]
pub struct DecisionInput<'a> {
    /// The model's layer DAG.
    pub graph: &'a LayerGraph,
    /// The wearable's predictors.
    pub wearable: Side<'a>,
    /// The handheld's predictors.
    pub handheld: Side<'a>,
    /// The link estimate.
    pub link: LinkEstimate,
    /// The handheld's status.
    pub status: HandheldStatus,
    /// Energy weights.
    pub weights: EnergyWeights,
    /// The latency hint.
    pub hint: LatencyHint,
    /// Single inference or stream.
    pub mode: Mode,
    /// Link encodings each tensor may cross in (`None`: raw only).
    pub codecs: Option<&'a LinkCodecs>,
}

/// The chosen partition and why.
#[derive(Clone, Debug, Serialize)]
pub struct Decision {
    /// Names of the tensors sent up.
    pub cut: Vec<String>,
    /// The encoding each of them crosses in, by name (empty when link
    /// encodings were not priced: all raw).
    pub encodings: std::collections::BTreeMap<String, String>,
    /// Layers on the wearable.
    pub prefix_nodes: usize,
    /// The cut itself (not serialized).
    #[serde(skip)]
    pub chosen: Cut,
    /// Its predicted cost.
    pub evaluation: Evaluation,
    /// How candidates were found.
    pub method: Method,
    /// Candidates compared.
    pub candidates: usize,
    /// Whether the cut is proven optimal over every cut of the DAG (under
    /// the predicted costs): exhaustive search, a min-cut of the objective,
    /// or a completed stream search. The heuristic and the Lagrangian
    /// search for a latency hint are not.
    pub optimal: bool,
    /// Why this one.
    pub reason: String,
    /// The wearable's cluster and frequency, when they were chosen with
    /// the cut ([`dvfs`]); `None`: the profile's inference setting.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub setting: Option<dvfs::Setting>,
    /// The engine of each half, when the planner chose them with the cut
    /// ([`Planner::poll_engines`]); `None`: the caller's single pair.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engines: Option<Engines>,
}

/// Most cuts [`Method::Exhaustive`] enumerates.
pub const EXHAUSTIVE_LIMIT: usize = 200_000;

/// What Algorithm 1 ([`choose`]) compares of a candidate: its time under
/// each mode and its weighted energy. Two-tier cuts ([`Evaluation`]) and
/// three-tier placements ([`tiers::TierEvaluation`]) are chosen alike.
pub trait Priced {
    /// Seconds: a single inference's latency, or a stream's period.
    fn time(&self, mode: Mode) -> f64;
    /// Weighted joules.
    fn energy_j(&self) -> f64;
}

impl Priced for Evaluation {
    fn time(&self, mode: Mode) -> f64 {
        Evaluation::time(self, mode)
    }

    fn energy_j(&self) -> f64 {
        self.energy_j
    }
}

/// Algorithm 1 over evaluated candidates; returns the chosen index and why.
pub fn choose<E: Priced>(evaluations: &[E], hint: LatencyHint, mode: Mode) -> Option<(usize, String)> {
    let by = |f: &dyn Fn(&E) -> f64, pool: &mut dyn Iterator<Item = usize>| {
        pool.min_by(|&a, &b| f(&evaluations[a]).total_cmp(&f(&evaluations[b])))
    };
    let time = |e: &E| e.time(mode);
    let energy = |e: &E| e.energy_j();
    match hint {
        LatencyHint::Fastest => {
            by(&time, &mut (0..evaluations.len())).map(|i| (i, "PropT = 0: the fastest".into()))
        }
        LatencyHint::EnergyFirst => {
            by(&energy, &mut (0..evaluations.len())).map(|i| (i, "PropT = inf: the least energy".into()))
        }
        LatencyHint::Within(d) => {
            let limit = d.as_secs_f64();
            let mut meeting = (0..evaluations.len()).filter(|&i| time(&evaluations[i]) <= limit);
            match by(&energy, &mut meeting) {
                Some(i) => Some((i, format!("the least energy within PropT = {:.1} ms", limit * 1e3))),
                None => by(&time, &mut (0..evaluations.len()))
                    .map(|i| (i, format!("no cut meets PropT = {:.1} ms: the fastest", limit * 1e3))),
            }
        }
    }
}

/// Candidate prefixes from min-cuts: latency, energy, and a Lagrangian
/// sweep of energy + λ·time (bisection on λ toward the latency hint), plus
/// both trivial cuts.
pub fn min_cut_candidates(
    graph: &LayerGraph,
    prices: &NodePrices,
    hint: LatencyHint,
    rtt: Duration,
) -> Vec<Cut> {
    min_cut_candidates_in(graph, prices, hint, rtt, &mincut::Windows::new(graph))
}

/// [`min_cut_candidates`] with the graph's windows computed beforehand.
pub fn min_cut_candidates_in(
    graph: &LayerGraph,
    prices: &NodePrices,
    hint: LatencyHint,
    rtt: Duration,
    windows: &mincut::Windows,
) -> Vec<Cut> {
    // A min-cut's source side is predecessor-closed by construction (the
    // infinite edges).
    let min_cut = |objective| mincut::min_cut_in(graph, prices, objective, windows);
    let mut cuts: Vec<Cut> = windows.trivial.to_vec();
    cuts.extend([min_cut(Objective::Latency), min_cut(Objective::Energy)]);
    let meets = |cut: &Cut, d: Duration| evaluate(graph, prices, cut, rtt).latency_s <= d.as_secs_f64();
    // The search is needed only when the least-energy cut is too slow and
    // the fastest cut is fast enough; otherwise one of those two is the answer.
    let search = match hint {
        LatencyHint::Within(d) => {
            !cuts.last().is_some_and(|c| meets(c, d)) && cuts.iter().any(|c| meets(c, d))
        }
        _ => false,
    };
    if let (true, LatencyHint::Within(d)) = (search, hint) {
        // λ in J/s: bisection in log space for the smallest weight on time
        // whose min-cut meets the hint; every visited cut is a candidate.
        let (mut lo, mut hi) = (1e-9f64, 1e9f64);
        for _ in 0..40 {
            let mid = (lo * hi).sqrt();
            let cut = min_cut(Objective::Lagrangian(mid));
            if meets(&cut, d) {
                hi = mid;
            } else {
                lo = mid;
            }
            cuts.push(cut);
            if hi / lo < 1.01 {
                break;
            }
        }
    }
    dedup_cuts(&mut cuts);
    cuts
}

/// Sorts cuts by prefix and drops repeats.
fn dedup_cuts(cuts: &mut Vec<Cut>) {
    cuts.sort_by(|a, b| a.prefix_mask().cmp(b.prefix_mask()));
    cuts.dedup_by(|a, b| a.prefix_mask() == b.prefix_mask());
}

/// Decides the partition for `input` with `method`.
pub fn decide(input: &DecisionInput, method: Method) -> Result<Decision> {
    decide_with(input, method, None)
}

/// [`decide`] with the model's simplified DAG computed once beforehand
/// (it depends on the graph alone); `None` computes it when needed.
pub fn decide_with(
    input: &DecisionInput,
    method: Method,
    simplified: Option<&Simplified>,
) -> Result<Decision> {
    let graph = input.graph;
    let mut prices =
        NodePrices::new(graph, input.wearable, input.handheld, &input.link, &input.status, input.weights);
    if let Some(codecs) = input.codecs {
        prices = prices.with_codecs(graph, codecs, &input.status);
    }
    let own = std::cell::OnceCell::new();
    let own_windows = std::cell::OnceCell::new();
    let windows = simplified.map(Simplified::windows).filter(|w| w.fits(graph));
    let windows = || windows.unwrap_or_else(|| own_windows.get_or_init(|| mincut::Windows::new(graph)));
    let representative = || -> Result<Vec<Cut>> {
        let simplified = simplified.unwrap_or_else(|| own.get_or_init(|| Simplified::new(graph)));
        simplified.cuts(graph, EXHAUSTIVE_LIMIT).unwrap_or_else(|| {
            Err(Error::InvalidCut(format!(
                "the simplified DAG ({} virtual nodes) has more than {EXHAUSTIVE_LIMIT} cuts: use the min-cut method",
                simplified.stats().after_bundling
            )))
        })
    };
    let rtt = input.link.rtt;
    let mut optimal = false;
    let mut note = String::new();
    let cuts = match (method, input.mode) {
        (Method::Exhaustive, _) => {
            optimal = true;
            enumerate_cuts(graph, EXHAUSTIVE_LIMIT).ok_or_else(|| {
                Error::InvalidCut(format!("more than {EXHAUSTIVE_LIMIT} cuts: use the min-cut method"))
            })?
        }
        (Method::Heuristic, _) => representative()?,
        (Method::Chain, _) => {
            let n = graph.nodes().len();
            (0..=n)
                .map(|k| Cut::from_mask(graph, (0..n).map(|v| v < k).collect()))
                .collect::<Result<Vec<_>>>()?
        }
        (Method::MinCut, Mode::Single) => {
            // Latency and energy are sums: their min-cuts are exact.
            optimal = !matches!(input.hint, LatencyHint::Within(_));
            min_cut_candidates_in(graph, &prices, input.hint, rtt, windows())
        }
        (Method::MinCut, Mode::Stream) => {
            let mut cuts = min_cut_candidates_in(graph, &prices, input.hint, rtt, windows());
            if let Ok(more) = representative() {
                cuts.extend(more);
            }
            let goal = match input.hint {
                // Energy is a sum: its min-cut is already a candidate.
                LatencyHint::EnergyFirst => None,
                LatencyHint::Fastest => Some(stream::StreamGoal::Period),
                LatencyHint::Within(d) => {
                    // The least energy within PropT if some cut meets it, else the fastest.
                    let fastest = stream::search_in(
                        graph,
                        &prices,
                        stream::StreamGoal::Period,
                        &cuts,
                        stream::STREAM_BUDGET,
                        windows(),
                    );
                    let meets = fastest
                        .cut
                        .as_ref()
                        .is_some_and(|c| evaluate(graph, &prices, c, rtt).stream_period_s <= d.as_secs_f64());
                    let proven = fastest.proven;
                    cuts.extend(fastest.cut);
                    if !meets && proven {
                        optimal = true;
                        note = "; stream search proved no cut meets PropT".into();
                        None
                    } else {
                        Some(stream::StreamGoal::EnergyWithin(d.as_secs_f64()))
                    }
                }
            };
            match goal {
                None => optimal |= input.hint == LatencyHint::EnergyFirst,
                Some(goal) => {
                    let found =
                        stream::search_in(graph, &prices, goal, &cuts, stream::STREAM_BUDGET, windows());
                    optimal = found.proven;
                    note = if found.proven {
                        format!("; stream search proved it optimal ({} states)", found.states)
                    } else {
                        format!(
                            "; stream search stopped after {} states: best found, not proven",
                            found.states
                        )
                    };
                    cuts.extend(found.cut);
                }
            }
            dedup_cuts(&mut cuts);
            cuts
        }
    };
    let evaluations: Vec<Evaluation> = cuts.iter().map(|c| evaluate(graph, &prices, c, rtt)).collect();
    let (i, reason) = choose(&evaluations, input.hint, input.mode)
        .ok_or_else(|| Error::InvalidCut("the model has no candidate cut".into()))?;
    let chosen = cuts[i].clone();
    let encodings = prices.encodings_of(graph, &chosen);
    Ok(Decision {
        cut: chosen.up_tensors().iter().map(|&t| graph.tensor(t).name.clone()).collect(),
        encodings,
        prefix_nodes: chosen.prefix_len(),
        evaluation: evaluations[i].clone(),
        chosen,
        method,
        candidates: cuts.len(),
        optimal,
        reason: reason + &note,
        setting: None,
        engines: None,
    })
}

/// The conditions a [`Planner`] decides under; each has a `handle_*` update.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Conditions {
    /// The link estimate.
    pub link: LinkEstimate,
    /// The handheld's status.
    pub status: HandheldStatus,
    /// Energy weights.
    pub weights: EnergyWeights,
    /// The latency hint.
    pub hint: LatencyHint,
    /// Single inference or stream.
    pub mode: Mode,
}

/// Settings of the [`Planner`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct PlannerConfig {
    /// A new cut must beat the current one's predicted cost by this fraction
    /// (0.1 = 10%) before the planner switches: the hysteresis.
    pub margin: f64,
    /// Candidate search.
    pub method: Method,
}

impl Default for PlannerConfig {
    /// A 10% margin: link estimates jitter by about that much.
    fn default() -> Self {
        PlannerConfig { margin: 0.1, method: Method::MinCut }
    }
}

/// Re-decides the partition as conditions change, switching only when the
/// gain beats the margin (at a source rate, meeting the period wins
/// outright: [`Planner::handle_rate`]). No I/O: feed it `handle_*`, call `poll_decision`.
/// A planner serves one model: the simplified DAG is computed once.
#[derive(Clone, Debug)]
pub struct Planner {
    config: PlannerConfig,
    conditions: Conditions,
    current: Option<Decision>,
    dirty: bool,
    simplified: Option<Simplified>,
    codecs: Option<std::sync::Arc<LinkCodecs>>,
    /// The wearable's profile when its cluster and frequency are chosen
    /// with the cut (priced analytically).
    dvfs: Option<std::sync::Arc<crate::device::DeviceProfile>>,
    /// Frames arrive every this long (a source rate), when they do.
    rate: Option<Duration>,
    /// The decision in force met the period in force when it was chosen
    /// or kept, and its prediction has stayed within the margin past it since.
    meets_period: bool,
    /// Searches of the cuts so far (the planner's own cost).
    searches: u64,
    /// The hint and mode of the search that chose or kept the decision in force.
    judged: Option<(LatencyHint, Mode)>,
}

impl Planner {
    /// A planner with no decision yet.
    pub fn new(config: PlannerConfig, conditions: Conditions) -> Planner {
        Planner {
            config,
            conditions,
            current: None,
            dirty: true,
            simplified: None,
            codecs: None,
            dvfs: None,
            rate: None,
            meets_period: false,
            searches: 0,
            judged: None,
        }
    }

    /// Chooses the wearable's cluster and frequency from `profile` with
    /// each cut ([`dvfs::decide_dvfs`]); decisions carry the setting.
    pub fn with_dvfs(mut self, profile: crate::device::DeviceProfile) -> Planner {
        self.dvfs = Some(std::sync::Arc::new(profile));
        self
    }

    /// The conditions now.
    pub fn conditions(&self) -> &Conditions {
        &self.conditions
    }

    /// How many times the cuts were searched: polls that found nothing
    /// changed, or a decision in force that no search could replace
    /// (every layer here, faster than the round trip), do not search.
    pub fn searches(&self) -> u64 {
        self.searches
    }

    /// The decision in force.
    pub fn current(&self) -> Option<&Decision> {
        self.current.as_ref()
    }

    /// A new link estimate (bandwidth, RTT).
    pub fn handle_link(&mut self, link: LinkEstimate) {
        self.dirty |= self.conditions.link != link;
        self.conditions.link = link;
    }

    /// A new handheld status (load).
    pub fn handle_status(&mut self, status: HandheldStatus) {
        self.dirty |= self.conditions.status != status;
        self.conditions.status = status;
    }

    /// New energy weights (battery levels, charging).
    pub fn handle_weights(&mut self, weights: EnergyWeights) {
        self.dirty |= self.conditions.weights != weights;
        self.conditions.weights = weights;
    }

    /// A new latency hint.
    pub fn handle_hint(&mut self, hint: LatencyHint) {
        self.dirty |= self.conditions.hint != hint;
        self.conditions.hint = hint;
    }

    /// Single inference or stream.
    pub fn handle_mode(&mut self, mode: Mode) {
        self.dirty |= self.conditions.mode != mode;
        self.conditions.mode = mode;
    }

    /// A stream's frames arrive every `period` (a camera's or a
    /// microphone's rate), or whenever the last is done (`None`). A frame
    /// is on time when delivered before the next one arrives, so at a
    /// source rate a stream is planned for each frame's latency when some
    /// cut's latency fits the period (it then also keeps up: no stage is
    /// longer than the whole), and for the period only when none does; a
    /// cut that meets the period replaces one that misses it outright, and
    /// the one chosen for meeting it stays while within the margin past it.
    pub fn handle_rate(&mut self, period: Option<Duration>) {
        self.dirty |= self.rate != period;
        self.rate = period;
    }

    /// The source rate's period in force.
    pub fn rate(&self) -> Option<Duration> {
        self.rate
    }

    /// The period the rate rule plans for: a stream at a source rate, its
    /// hint not energy first, the wearable's setting not chosen with the cut.
    pub fn planned_period(&self) -> Option<Duration> {
        let c = &self.conditions;
        let applies = self.dvfs.is_none() && c.mode == Mode::Stream && c.hint != LatencyHint::EnergyFirst;
        self.rate.filter(|_| applies)
    }

    /// Whether the decision in force, predicted at `latency_s` now, keeps
    /// its standing for meeting the period: it met it when chosen or kept,
    /// and it is within the margin past the period in force (predictions
    /// jitter by about that much; a few slow frames, a busy start, move
    /// them that far).
    fn keeps_period(&self, latency_s: f64) -> bool {
        let within = |p: Duration| latency_s <= p.as_secs_f64() * (1.0 + self.config.margin);
        self.meets_period && self.planned_period().is_some_and(within)
    }

    /// New link encodings per tensor (predicted ratios and speeds), or none.
    pub fn handle_codecs(&mut self, codecs: Option<std::sync::Arc<LinkCodecs>>) {
        self.dirty |= self.codecs != codecs;
        self.codecs = codecs;
    }

    /// A predictor changed (for example it evolved): re-decide on next poll.
    pub fn handle_predictor_update(&mut self) {
        self.dirty = true;
    }

    /// Re-decides if anything changed; returns the new decision when the
    /// planner switches cuts (or makes its first decision), else `None`.
    pub fn poll_decision(
        &mut self,
        graph: &LayerGraph,
        wearable: Side,
        handheld: Side,
    ) -> Result<Option<Decision>> {
        self.poll(graph, &[(None, wearable)], &[(None, handheld)])
    }

    /// [`Planner::poll_decision`] where each side may run its half on
    /// several engines, each with its own predictors: the cut and the
    /// engine of each half are chosen together. For each pair of engines
    /// the best cut is decided as for one pair; the best of those is the
    /// best (cut, engines) overall, since a cut's halves are priced
    /// independently of the other side's engine. The decision names its
    /// engines; the one in force is priced on its own engines for the
    /// hysteresis, so a switch of engines must beat the margin as a switch
    /// of cuts does. Each side needs at least one engine.
    pub fn poll_engines(
        &mut self,
        graph: &LayerGraph,
        wearable: &[EngineSide],
        handheld: &[EngineSide],
    ) -> Result<Option<Decision>> {
        if wearable.is_empty() || handheld.is_empty() {
            return Err(Error::InvalidCut("the planner needs at least one engine on each side".into()));
        }
        let w: Vec<_> = wearable.iter().map(|e| (Some(e.engine), e.side)).collect();
        let h: Vec<_> = handheld.iter().map(|e| (Some(e.engine), e.side)).collect();
        self.poll(graph, &w, &h)
    }

    /// [`Planner::poll_engines`] with the engines optional (`None`: the
    /// caller's single pair, decisions without engines).
    fn poll(
        &mut self,
        graph: &LayerGraph,
        wearable: &[(Option<Engine>, Side)],
        handheld: &[(Option<Engine>, Side)],
    ) -> Result<Option<Decision>> {
        if !self.dirty {
            return Ok(None);
        }
        self.dirty = false;
        if let Some(now) = self.here_stands(graph, wearable, handheld)? {
            if let Some(current) = &mut self.current {
                current.evaluation = now;
            }
            return Ok(None);
        }
        self.searches += 1;
        let simplified = match self.simplified.take() {
            Some(s) if s.windows().fits(graph) => s,
            _ => Simplified::new(graph),
        };
        // The best decision for each pair of engines, then the best of those.
        let mut best: Option<Result<Judged>> = None;
        for &(we, ws) in wearable {
            for &(he, hs) in handheld {
                let engines = we.zip(he).map(|(prefix, suffix)| Engines { prefix, suffix });
                let found = self
                    .decide_pair(graph, ws, hs, &simplified)
                    .map(|j| Judged { decision: Decision { engines, ..j.decision }, ..j });
                best = match (best, found) {
                    (None, found) | (Some(Err(_)), found @ Ok(_)) => Some(found),
                    (Some(Ok(old)), Ok(new)) if new.better_than(&old) => Some(Ok(new)),
                    (kept, _) => kept,
                };
            }
        }
        self.simplified = Some(simplified);
        let Judged { decision: best, hint, mode, meets_period } =
            best.unwrap_or_else(|| Err(Error::InvalidCut("the planner was given no engines".into())))?;
        self.judged = Some((self.conditions.hint, self.conditions.mode));
        let Some(current) = &self.current else {
            self.current = Some(best.clone());
            self.meets_period = meets_period;
            return Ok(Some(best));
        };
        if current.chosen.key() == best.chosen.key()
            && current.setting == best.setting
            && current.engines == best.engines
        {
            // Same cut: keep it, with its price under the new conditions.
            self.meets_period = meets_period || self.keeps_period(best.evaluation.latency_s);
            self.current = Some(best);
            return Ok(None);
        }
        // The current cut priced now, on its own engines and at its own setting.
        let Some(now) = self.priced_now(graph, current, wearable, handheld)? else {
            // Its engine is no longer offered: it cannot stay.
            self.current = Some(best.clone());
            self.meets_period = meets_period;
            return Ok(Some(best));
        };
        // At a source rate meeting the period decides first: a cut that
        // meets it replaces one that misses it outright (as meeting PropT
        // does), and when no cut is predicted to meet it, the cut in force
        // that met it stays while within the margin past it, where a cut
        // chosen for the period alone would be late on every frame.
        let missed = self.planned_period().is_some_and(|p| now.latency_s > p.as_secs_f64());
        let switch = match (meets_period, missed) {
            (true, true) => true,
            (false, _) if self.keeps_period(now.latency_s) => false,
            _ => beats(&best.evaluation, &now, hint, mode, self.config.margin),
        };
        if switch {
            self.current = Some(best.clone());
            self.meets_period = meets_period;
            Ok(Some(best))
        } else {
            self.meets_period = (meets_period && !missed) || self.keeps_period(now.latency_s);
            if let Some(cur) = &mut self.current {
                cur.evaluation = now;
            }
            Ok(None)
        }
    }

    /// `decision` priced under the conditions now, on its own engines and
    /// at its own setting; `None` when one of its engines is no longer offered.
    fn priced_now(
        &self,
        graph: &LayerGraph,
        decision: &Decision,
        wearable: &[(Option<Engine>, Side)],
        handheld: &[(Option<Engine>, Side)],
    ) -> Result<Option<Evaluation>> {
        let c = &self.conditions;
        let (Some(wearable), Some(handheld)) = (
            side_of(wearable, decision.engines.map(|e| e.prefix)),
            side_of(handheld, decision.engines.map(|e| e.suffix)),
        ) else {
            return Ok(None);
        };
        let (scaled, energy);
        let wearable = match (&decision.setting, &self.dvfs) {
            (Some(s), Some(profile)) => {
                scaled = crate::predict::Scaled { inner: wearable.latency, slowdown: s.time_scale };
                energy = crate::energy::ClusterEnergy::at(
                    profile,
                    &s.cluster,
                    s.f_hz,
                    crate::device::PowerModel::Analytical,
                )
                .map_err(|e| Error::InvalidCut(e.to_string()))?;
                Side { latency: &scaled, energy: &energy }
            }
            _ => wearable,
        };
        let mut prices = NodePrices::new(graph, wearable, handheld, &c.link, &c.status, c.weights);
        if let Some(codecs) = &self.codecs {
            prices = prices.with_codecs(graph, codecs, &c.status);
        }
        Ok(Some(evaluate(graph, &prices, &decision.chosen, c.link.rtt)))
    }

    /// The decision in force priced now, when no search could replace it:
    /// it runs every layer here for the fastest single frame (on the
    /// wearable's only engine, chosen or kept by a search for the fastest
    /// single frame), and the round trip alone, which every cut
    /// that offloads pays in full whatever either side's predictions, is
    /// no faster than it less the margin. A tiny model's predictions move
    /// past the margin every few frames while they learn; each search
    /// would cost more than such a frame.
    fn here_stands(
        &self,
        graph: &LayerGraph,
        wearable: &[(Option<Engine>, Side)],
        handheld: &[(Option<Engine>, Side)],
    ) -> Result<Option<Evaluation>> {
        let c = &self.conditions;
        let Some(current) = &self.current else { return Ok(None) };
        // Chosen or kept for the fastest single frame too: under another
        // hint or mode its setting (DVFS) need not be the fastest.
        let fastest_single = (LatencyHint::Fastest, Mode::Single);
        let judged_so = self.judged == Some(fastest_single);
        if (c.hint, c.mode) != fastest_single
            || !judged_so
            || !current.chosen.is_wearable_only()
            || wearable.len() != 1
        {
            return Ok(None);
        }
        let Some(now) = self.priced_now(graph, current, wearable, handheld)? else { return Ok(None) };
        let keep = 1.0 - self.config.margin.clamp(0.0, 0.99);
        Ok((now.latency_s * keep <= c.link.rtt.as_secs_f64()).then_some(now))
    }

    /// The best decision on one pair of sides under the conditions now
    /// (the wearable's setting with it under DVFS; at a source rate, the
    /// fastest single frame when it fits the period), and the hint and
    /// mode it was judged by.
    fn decide_pair(
        &self,
        graph: &LayerGraph,
        wearable: Side,
        handheld: Side,
        simplified: &Simplified,
    ) -> Result<Judged> {
        let c = self.conditions;
        let input = DecisionInput {
            graph,
            wearable,
            handheld,
            link: c.link,
            status: c.status,
            weights: c.weights,
            hint: c.hint,
            mode: c.mode,
            codecs: self.codecs.as_deref(),
        };
        let best = match &self.dvfs {
            Some(profile) => {
                let spec = dvfs::Dvfs {
                    wearable: profile,
                    handheld: None,
                    power: crate::device::PowerModel::Analytical,
                    simplified: Some(simplified),
                };
                dvfs::decide_dvfs(&input, self.config.method, spec)
                    .map(|d| Decision { setting: Some(d.setting), ..d.decision })
                    .map_err(|e| match e {
                        dvfs::DvfsError::Decision(e) => e,
                        device => Error::InvalidCut(device.to_string()),
                    })?
            }
            None => decide_with(&input, self.config.method, Some(simplified))?,
        };
        let judged = Judged { decision: best, hint: c.hint, mode: c.mode, meets_period: false };
        // At a source rate: the frame's latency first, when a cut fits the period.
        let Some(period) = self.planned_period() else { return Ok(judged) };
        let single_hint = match c.hint {
            LatencyHint::Within(d) => LatencyHint::Within(d.min(period)),
            _ => LatencyHint::Fastest,
        };
        let single = DecisionInput { hint: single_hint, mode: Mode::Single, ..input };
        match decide_with(&single, self.config.method, Some(simplified)) {
            Ok(d) if d.evaluation.latency_s <= period.as_secs_f64() => {
                let reason = format!(
                    "{}; frames arrive every {:.1} ms and this cut delivers each before the next",
                    d.reason,
                    period.as_secs_f64() * 1e3
                );
                Ok(Judged {
                    decision: Decision { reason, ..d },
                    hint: single_hint,
                    mode: Mode::Single,
                    meets_period: true,
                })
            }
            _ => Ok(judged),
        }
    }

    /// The cuts this planner would choose if the link's rates were each of
    /// `factors` times today's estimate: the next likely decisions, whose
    /// plans are worth building before they are needed. The current cut,
    /// the wearable-only cut and repeats are left out; so are conditions
    /// where the search fails.
    pub fn runners_up(
        &mut self,
        graph: &LayerGraph,
        wearable: Side,
        handheld: Side,
        factors: &[f64],
    ) -> Vec<Cut> {
        let simplified = match self.simplified.take() {
            Some(s) if s.windows().fits(graph) => s,
            _ => Simplified::new(graph),
        };
        let c = self.conditions;
        let mut out: Vec<Cut> = vec![];
        for &f in factors {
            let link = LinkEstimate {
                up_bytes_per_s: c.link.up_bytes_per_s * f,
                down_bytes_per_s: c.link.down_bytes_per_s * f,
                ..c.link
            };
            let input = DecisionInput {
                graph,
                wearable,
                handheld,
                link,
                status: c.status,
                weights: c.weights,
                hint: c.hint,
                mode: c.mode,
                codecs: self.codecs.as_deref(),
            };
            let Ok(d) = decide_with(&input, self.config.method, Some(&simplified)) else { continue };
            let current = self.current.as_ref().is_some_and(|cur| cur.chosen == d.chosen);
            if !current && !d.chosen.is_wearable_only() && !out.contains(&d.chosen) {
                out.push(d.chosen);
            }
        }
        self.simplified = Some(simplified);
        out
    }
}

/// The side of engine `e` in `sides` (`None`: the first).
fn side_of<'a>(sides: &[(Option<Engine>, Side<'a>)], e: Option<Engine>) -> Option<Side<'a>> {
    sides.iter().find(|(x, _)| e.is_none() || *x == e).map(|&(_, s)| s)
}

/// One pair of engines' best decision, and what it was judged by.
struct Judged {
    decision: Decision,
    hint: LatencyHint,
    mode: Mode,
    /// Chosen by the rate rule: each frame delivered within the period.
    meets_period: bool,
}

impl Judged {
    /// Whether this beats `old` (another pair of engines' best, under the
    /// same conditions): meeting the period first, then the objective.
    fn better_than(&self, old: &Judged) -> bool {
        match (self.meets_period, old.meets_period) {
            (true, false) => true,
            (false, true) => false,
            _ => beats(&self.decision.evaluation, &old.decision.evaluation, self.hint, self.mode, 0.0),
        }
    }
}

/// Whether `new` beats `old` by more than `margin` on the hint's objective.
pub fn beats(new: &Evaluation, old: &Evaluation, hint: LatencyHint, mode: Mode, margin: f64) -> bool {
    let keep = 1.0 - margin.clamp(0.0, 0.99);
    match hint {
        LatencyHint::Fastest => new.time(mode) < old.time(mode) * keep,
        LatencyHint::EnergyFirst => new.energy_j < old.energy_j * keep,
        LatencyHint::Within(d) => {
            let d = d.as_secs_f64();
            match (new.time(mode) <= d, old.time(mode) <= d) {
                // Meeting PropT wins outright; among cuts meeting it, energy decides.
                (true, false) => true,
                (false, true) => false,
                (true, true) => new.energy_j < old.energy_j * keep,
                (false, false) => new.time(mode) < old.time(mode) * keep,
            }
        }
    }
}
