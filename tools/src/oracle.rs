//! The oracle check: does the partitioner pick the cut that is really best?
//!
//! This is an **emulated pair** on one machine, not a watch and a phone:
//! - every candidate cut runs split, in process: the prefix plan, then the
//!   suffix plan on the prefix's crossing tensors; each half's wall-clock
//!   time is the median of several runs, measured round-robin over the cuts
//!   so that machine drift hits all of them alike (models whose plans do not
//!   all fit in memory are measured in chunks, each rescaled by an unsplit
//!   reference run measured alongside it);
//! - the wearable's stage is the measured prefix time × the wearable
//!   profile's slowdown; the handheld's is the measured suffix time × the
//!   handheld profile's slowdown × 1/(1 − load) (processor sharing);
//! - the link adds bytes / bandwidth each way, plus the RTT when anything is
//!   offloaded;
//! - energy is model-based: these stage times × each profile's power, plus
//!   radio power × transfer time.
//!
//! The decisions come from the predictors alone (never from these
//! measurements). For every grid point the chosen cut's measured cost is
//! compared with the best measured cost over all candidates: the oracle.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde::Serialize;

use tandem::device::DeviceProfile;
use tandem::energy::{ClusterEnergy, EnergyModel, PowerModel};
use tandem::partition::{
    decide_with, evaluate_stages, DecisionInput, EnergyWeights, Evaluation, HandheldStatus, LatencyHint,
    LinkEstimate, Method, Mode, NodePrices, Side, Simplified, EXHAUSTIVE_LIMIT,
};
use tandem::predict::{LatencyModel, Scaled};
use tandem::profile::median;
use tandem::{enumerate_cuts, Cut, LayerGraph, Model, ModelError as Error, SplitPlan, Values};

type Result<T, E = Error> = std::result::Result<T, E>;

/// The conditions swept.
#[derive(Clone, Debug, Serialize)]
pub struct OracleGrid {
    /// Link rates both ways, bytes per second.
    pub bandwidths: Vec<f64>,
    /// Handheld loads in [0, 1).
    pub loads: Vec<f64>,
    /// Latency hints.
    pub hints: Vec<LatencyHint>,
}

impl Default for OracleGrid {
    /// The grid: 0.1, 0.25, 0.5, 1, 2, 5 Mbit/s × load 0, 50, 80% × PropT 0, ∞.
    fn default() -> Self {
        OracleGrid {
            bandwidths: [0.1, 0.25, 0.5, 1.0, 2.0, 5.0].iter().map(|m| m * 1e6 / 8.0).collect(),
            loads: vec![0.0, 0.5, 0.8],
            hints: vec![LatencyHint::Fastest, LatencyHint::EnergyFirst],
        }
    }
}

/// The emulated pair and what the partitioner knows of it.
pub struct EmulatedPair<'a> {
    /// The wearable's profile (slowdown, powers).
    pub wearable: &'a DeviceProfile,
    /// The handheld's profile.
    pub handheld: &'a DeviceProfile,
    /// The wearable's energy model.
    pub wearable_energy: &'a dyn EnergyModel,
    /// The handheld's energy model.
    pub handheld_energy: &'a dyn EnergyModel,
    /// The host latency predictor, scaled by each profile's slowdown.
    pub predictor: &'a dyn LatencyModel,
    /// Round-trip time of the link.
    pub rtt: Duration,
    /// Energy weights.
    pub weights: EnergyWeights,
    /// Single inference or stream.
    pub mode: Mode,
}

/// Owns what an [`EmulatedPair`] borrows: both profiles and their energy models.
pub struct PairSetup {
    /// The wearable's profile.
    pub wearable: DeviceProfile,
    /// The handheld's profile.
    pub handheld: DeviceProfile,
    wearable_energy: ClusterEnergy,
    handheld_energy: ClusterEnergy,
    /// Round-trip time of the link.
    pub rtt: Duration,
    /// Energy weights.
    pub weights: EnergyWeights,
    /// Single inference or stream.
    pub mode: Mode,
}

impl PairSetup {
    /// Both profiles with the analytical power model.
    pub fn new(
        wearable: DeviceProfile,
        handheld: DeviceProfile,
        rtt: Duration,
        weights: EnergyWeights,
        mode: Mode,
    ) -> std::result::Result<PairSetup, tandem::device::DeviceError> {
        Ok(PairSetup {
            wearable_energy: ClusterEnergy::new(&wearable, PowerModel::Analytical)?,
            handheld_energy: ClusterEnergy::new(&handheld, PowerModel::Analytical)?,
            wearable,
            handheld,
            rtt,
            weights,
            mode,
        })
    }

    /// The pair, deciding with `predictor`.
    pub fn pair<'a>(&'a self, predictor: &'a dyn LatencyModel) -> EmulatedPair<'a> {
        EmulatedPair {
            wearable: &self.wearable,
            handheld: &self.handheld,
            wearable_energy: &self.wearable_energy,
            handheld_energy: &self.handheld_energy,
            predictor,
            rtt: self.rtt,
            weights: self.weights,
            mode: self.mode,
        }
    }
}

/// A candidate's measured host times (medians).
#[derive(Clone, Debug)]
pub struct CutTiming {
    /// The cut.
    pub cut: Cut,
    /// Prefix seconds on this host (0 when empty).
    pub prefix_s: f64,
    /// Suffix seconds on this host (0 when empty).
    pub suffix_s: f64,
}

/// One grid point, one method.
#[derive(Clone, Debug, Serialize)]
pub struct OracleCase {
    /// The model.
    pub model: String,
    /// The method that decided.
    pub method: Method,
    /// Link rate, Mbit/s.
    pub bandwidth_mbit: f64,
    /// Handheld load.
    pub load: f64,
    /// PropT: `0`, `inf` or milliseconds.
    pub hint: String,
    /// Layers on the wearable in the chosen cut.
    pub chosen_prefix_nodes: usize,
    /// Layers on the wearable in the measured best cut.
    pub oracle_prefix_nodes: usize,
    /// The chosen cut's measured cost (s or J, by the hint).
    pub chosen_cost: f64,
    /// The measured best cost.
    pub oracle_cost: f64,
    /// chosen / oracle (≥ 1).
    pub ratio: f64,
    /// Whether the chosen cut is the measured best (or costs exactly as much).
    pub optimal: bool,
    /// Whether the measured best is a partial offload (neither trivial cut).
    pub oracle_partial: bool,
    /// With a second measurement: the first measurement's best cut, judged
    /// by the second (its ratio to the second's best).
    pub remeasured_ratio: Option<f64>,
}

/// Share optimal and worst ratio over cases.
#[derive(Clone, Debug, Serialize)]
pub struct OracleSummary {
    /// The method.
    pub method: Method,
    /// Cases compared.
    pub cases: usize,
    /// Cases where the chosen cut was the measured best.
    pub optimal: usize,
    /// Cases within 1% of the measured best.
    pub within_1pct: usize,
    /// Cases within 5% of the measured best.
    pub within_5pct: usize,
    /// Cases whose measured best is a partial offload.
    pub partial_cases: usize,
    /// Of those, cases where the chosen cut was the measured best.
    pub partial_optimal: usize,
    /// The worst chosen / oracle ratio.
    pub worst_ratio: f64,
    /// The mean ratio.
    pub mean_ratio: f64,
    /// With a second measurement: cases where the first measurement's best
    /// cut was the second's best too.
    pub remeasured_optimal: Option<usize>,
    /// With a second measurement: the worst ratio of the first
    /// measurement's best cut on the second.
    pub remeasured_worst_ratio: Option<f64>,
}

/// Summarizes the cases of one method.
pub fn summarize(cases: &[OracleCase], method: Method) -> OracleSummary {
    let mine: Vec<&OracleCase> = cases.iter().filter(|c| c.method == method).collect();
    let n = mine.len();
    OracleSummary {
        method,
        cases: n,
        optimal: mine.iter().filter(|c| c.optimal).count(),
        within_1pct: mine.iter().filter(|c| c.ratio <= 1.01).count(),
        within_5pct: mine.iter().filter(|c| c.ratio <= 1.05).count(),
        partial_cases: mine.iter().filter(|c| c.oracle_partial).count(),
        partial_optimal: mine.iter().filter(|c| c.oracle_partial && c.optimal).count(),
        worst_ratio: mine.iter().map(|c| c.ratio).fold(1.0, f64::max),
        mean_ratio: if n == 0 { 1.0 } else { mine.iter().map(|c| c.ratio).sum::<f64>() / n as f64 },
        remeasured_optimal: mine
            .iter()
            .map(|c| c.remeasured_ratio.map(|r| usize::from(r <= 1.0)))
            .sum::<Option<usize>>(),
        remeasured_worst_ratio: mine
            .iter()
            .map(|c| c.remeasured_ratio)
            .try_fold(1.0f64, |w, r| r.map(|r| w.max(r))),
    }
}

/// Most candidates for which every cut of the DAG is measured; above it,
/// DeepWear's representative cuts plus every cut a method chose.
pub const ALL_CUTS_LIMIT: usize = 120;

/// Plans alive at once are capped so their weights fit in this many bytes.
const PLAN_MEMORY_BUDGET: u64 = 6 << 30;

/// Estimated weight bytes of the model (conv and fc kernels, f32).
fn weight_bytes(graph: &LayerGraph) -> u64 {
    graph
        .nodes()
        .iter()
        .map(|n| {
            let p = &n.params;
            let k: u64 = p.kernel.iter().map(|&k| k as u64).product::<u64>().max(1);
            (p.channels_in / p.groups.max(1)) as u64 * p.channels_out as u64 * k * 4
        })
        .sum()
}

/// Measures the prefix and suffix of every cut: `runs` rounds (after one
/// warm-up), each running every cut once, in chunks of cuts whose plans fit
/// in memory together.
///
/// Each round also runs the unsplit model once. This VM's speed drifts by
/// tens of percent over minutes, so each chunk's times are scaled by the
/// unsplit model's median over all chunks divided by its median in that chunk.
pub fn measure_cuts(
    model: &Model,
    cuts: &[Cut],
    inputs: &Values,
    runs: usize,
    mut progress: impl FnMut(usize),
) -> Result<Vec<CutTiming>> {
    let g = model.graph();
    let reference = tandem::split::full_plan(model)?;
    // A split plan holds about one copy of the weights (both halves), and
    // tract may keep a packed copy too.
    let per_plan = 2 * weight_bytes(g) + 1;
    let chunk = (PLAN_MEMORY_BUDGET / per_plan).clamp(1, 64) as usize;
    let mut raw = Vec::with_capacity(cuts.len());
    let mut all_reference = vec![];
    for group in cuts.chunks(chunk) {
        let plans: Vec<SplitPlan> =
            group.iter().map(|c| SplitPlan::build(model, c)).collect::<Result<_>>()?;
        let mut samples = vec![(vec![], vec![]); group.len()];
        let mut chunk_reference = vec![];
        for round in 0..=runs.max(1) {
            let t = Instant::now();
            std::hint::black_box(reference.run(g, inputs)?);
            let r = t.elapsed();
            for (plan, (pre, suf)) in plans.iter().zip(samples.iter_mut()) {
                let t = Instant::now();
                let sent = plan.run_prefix(g, inputs)?;
                let tp = t.elapsed();
                let t = Instant::now();
                let outputs = plan.run_suffix(g, &sent)?;
                let ts = t.elapsed();
                std::hint::black_box(outputs);
                if round > 0 {
                    pre.push(tp);
                    suf.push(ts);
                }
            }
            if round > 0 {
                chunk_reference.push(r);
            }
        }
        all_reference.extend_from_slice(&chunk_reference);
        let chunk_median = median(&mut chunk_reference).as_secs_f64();
        for ((cut, plan), (mut pre, mut suf)) in group.iter().zip(&plans).zip(samples) {
            let half =
                |present: bool, s: &mut Vec<Duration>| if present { median(s).as_secs_f64() } else { 0.0 };
            let timing = CutTiming {
                cut: cut.clone(),
                prefix_s: half(plan.prefix().is_some(), &mut pre),
                suffix_s: half(plan.suffix().is_some(), &mut suf),
            };
            raw.push((timing, chunk_median));
            progress(raw.len());
        }
    }
    let overall = median(&mut all_reference).as_secs_f64();
    Ok(raw
        .into_iter()
        .map(|(mut t, chunk_median)| {
            let k = if chunk_median > 0.0 { overall / chunk_median } else { 1.0 };
            t.prefix_s *= k;
            t.suffix_s *= k;
            t
        })
        .collect())
}

/// Rank of an evaluation under a hint: meeting PropT first, then the
/// hint's objective (time for PropT = 0, energy otherwise).
fn rank(e: &Evaluation, hint: LatencyHint, mode: Mode) -> (bool, f64) {
    match hint {
        LatencyHint::Fastest => (false, e.time(mode)),
        LatencyHint::EnergyFirst => (false, e.energy_j),
        LatencyHint::Within(d) if e.time(mode) <= d.as_secs_f64() => (false, e.energy_j),
        LatencyHint::Within(_) => (true, e.time(mode)),
    }
}

fn hint_name(hint: LatencyHint) -> String {
    match hint {
        LatencyHint::Fastest => "0".into(),
        LatencyHint::EnergyFirst => "inf".into(),
        LatencyHint::Within(d) => format!("{}ms", d.as_millis()),
    }
}

/// How [`run_oracle`] measures.
#[derive(Clone, Copy, Debug)]
pub struct Measure {
    /// Rounds per candidate cut (medians), after one warm-up.
    pub runs: usize,
    /// Measure every cut twice (see [`run_oracle`]).
    pub remeasure: bool,
}

/// What [`run_oracle`] found.
#[derive(Clone, Debug)]
pub struct OracleRun {
    /// One case per grid point and method.
    pub cases: Vec<OracleCase>,
    /// Every candidate's measured times.
    pub timings: Vec<CutTiming>,
    /// Every candidate's predicted host times (prefix, suffix), seconds.
    pub predicted: Vec<(f64, f64)>,
}

/// Decisions of `methods` on every grid point, the cuts to measure, and
/// the measured comparison. With `remeasure`, every cut is measured twice:
/// cases are judged on the second measurement, and each also says how the
/// first measurement's own best cut fares on the second (the noise ceiling:
/// no choice made before measuring can do better than a measurement does).
/// `progress` gets (cuts measured, cuts in all).
pub fn run_oracle(
    model: &Model,
    inputs: &Values,
    pair: &EmulatedPair,
    grid: &OracleGrid,
    methods: &[Method],
    measure: Measure,
    mut progress: impl FnMut(usize, usize),
) -> Result<OracleRun> {
    let Measure { runs, remeasure } = measure;
    let g = model.graph();
    let w_lat = Scaled { inner: pair.predictor, slowdown: pair.wearable.slowdown };
    let h_lat = Scaled { inner: pair.predictor, slowdown: pair.handheld.slowdown };
    let wearable = Side { latency: &w_lat, energy: pair.wearable_energy };
    let handheld = Side { latency: &h_lat, energy: pair.handheld_energy };
    let simplified = Simplified::new(g);
    let mut cuts: Vec<Cut> = match enumerate_cuts(g, ALL_CUTS_LIMIT) {
        Some(all) => all,
        None => simplified.cuts(g, EXHAUSTIVE_LIMIT).unwrap_or_else(|| Ok(vec![]))?,
    };
    let mut index: HashMap<Vec<bool>, usize> =
        cuts.iter().enumerate().map(|(i, c)| (c.prefix_mask().to_vec(), i)).collect();
    // Decide first, from predictions only.
    let mut points = vec![];
    for &bandwidth in &grid.bandwidths {
        for &load in &grid.loads {
            for &hint in &grid.hints {
                let input = DecisionInput {
                    graph: g,
                    wearable,
                    handheld,
                    link: LinkEstimate {
                        up_bytes_per_s: bandwidth,
                        down_bytes_per_s: bandwidth,
                        rtt: pair.rtt,
                    },
                    status: HandheldStatus { load },
                    weights: pair.weights,
                    hint,
                    mode: pair.mode,
                    codecs: None,
                };
                for &method in methods {
                    let d = decide_with(&input, method, Some(&simplified))?;
                    let key = d.chosen.prefix_mask().to_vec();
                    let i = *index.entry(key).or_insert_with(|| {
                        cuts.push(d.chosen.clone());
                        cuts.len() - 1
                    });
                    points.push((bandwidth, load, hint, method, i));
                }
            }
        }
    }
    let total = cuts.len() * if remeasure { 2 } else { 1 };
    let first = measure_cuts(model, &cuts, inputs, runs, |done| progress(done, total))?;
    let (first, timings) = if remeasure {
        let second = measure_cuts(model, &cuts, inputs, runs, |done| progress(cuts.len() + done, total))?;
        (Some(first), second)
    } else {
        (None, first)
    };
    let mut cases = vec![];
    for (bandwidth, load, hint, method, chosen) in points {
        let status = HandheldStatus { load };
        // Only the link, powers and weights of these prices are used.
        let prices = NodePrices::new(
            g,
            wearable,
            handheld,
            &LinkEstimate { up_bytes_per_s: bandwidth, down_bytes_per_s: bandwidth, rtt: pair.rtt },
            &status,
            pair.weights,
        );
        let ranks_of = |timings: &[CutTiming]| -> Vec<(bool, f64)> {
            timings
                .iter()
                .map(|t| {
                    let tw = t.prefix_s * pair.wearable.slowdown;
                    let tp = t.suffix_s * pair.handheld.slowdown * status.dilation();
                    rank(&evaluate_stages(&prices, &t.cut, tw, tp, pair.rtt), hint, pair.mode)
                })
                .collect()
        };
        let argmin = |ranks: &[(bool, f64)]| {
            (0..ranks.len())
                .min_by(|&a, &b| ranks[a].partial_cmp(&ranks[b]).unwrap_or(std::cmp::Ordering::Equal))
                .ok_or_else(|| Error::InvalidCut("no candidate cut".into()))
        };
        let ratio_of = |c: (bool, f64), o: (bool, f64)| {
            if c.0 == o.0 {
                c.1 / o.1.max(f64::MIN_POSITIVE)
            } else {
                f64::INFINITY
            }
        };
        let ranks = ranks_of(&timings);
        let best = argmin(&ranks)?;
        let (c, o) = (ranks[chosen], ranks[best]);
        let ratio = ratio_of(c, o);
        // The noise ceiling: the first measurement's best cut, judged by the second.
        let remeasured_ratio = match &first {
            Some(first) => Some(ratio_of(ranks[argmin(&ranks_of(first))?], o)),
            None => None,
        };
        cases.push(OracleCase {
            model: model.name().to_string(),
            method,
            bandwidth_mbit: bandwidth * 8.0 / 1e6,
            load,
            hint: hint_name(hint),
            chosen_prefix_nodes: timings[chosen].cut.prefix_len(),
            oracle_prefix_nodes: timings[best].cut.prefix_len(),
            chosen_cost: c.1,
            oracle_cost: o.1,
            ratio,
            optimal: chosen == best || ratio <= 1.0,
            oracle_partial: !timings[best].cut.is_wearable_only() && !timings[best].cut.is_handheld_only(),
            remeasured_ratio,
        });
    }
    let costs = pair.predictor.node_costs(g);
    let predicted = timings
        .iter()
        .map(|t| {
            let suffix: Vec<bool> = t.cut.prefix_mask().iter().map(|w| !w).collect();
            (costs.sum(t.cut.prefix_mask()).as_secs_f64(), costs.sum(&suffix).as_secs_f64())
        })
        .collect();
    Ok(OracleRun { cases, timings, predicted })
}
