//! Latency predictors: the [`LatencyModel`] trait the partitioner prices
//! prefixes and suffixes with, and its implementations.
//!
//! Predictors are trained on host measurements (the layer sweep); a device
//! profile's compute slowdown scales them to the emulated device
//! ([`Scaled`]). Nothing here reads a clock or a file.

pub mod evolp;
pub mod features;
pub mod metrics;
pub mod mlp;
pub mod online;
pub mod tree;

use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use evolp::{EvoLp, EvolutionMatrix};
pub use features::{LayerFeatures, Unit};
pub use online::OnlineLatency;
pub use tree::DtLr;

use tandem_core::{Cut, LayerGraph};

/// One measured layer of the sweep dataset (one JSON line).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LayerSample {
    /// What the predictor sees of the layer.
    pub features: LayerFeatures,
    /// Median wall-clock time of running the single-layer model (µs).
    pub latency_us: f64,
    /// Median time of an empty plan run in the same sweep (µs): the fixed cost
    /// every run pays once, not per layer.
    pub overhead_us: f64,
    /// `generic`, or `model:<name>` for the model-specific sweep, with
    /// `:exact` when the row is one of that model's own layers.
    pub source: String,
    /// The engine it was measured on (rows before engines: tract).
    /// Predictors are fitted per (device, engine): a dataset is one engine's.
    #[serde(default)]
    pub engine: tandem_core::Engine,
}

impl LayerSample {
    /// The layer's own time (µs): the measurement less the fixed run cost.
    pub fn target_us(&self) -> f64 {
        self.latency_us - self.overhead_us
    }

    /// Whether this row measures one of a model's own layers exactly.
    pub fn is_exact(&self) -> bool {
        self.source.ends_with(":exact")
    }
}

/// Why a sweep dataset does not parse.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DatasetError {
    /// A line is not a [`LayerSample`].
    #[error("line {line}: {source}")]
    BadLine {
        /// Its number, from 1.
        line: usize,
        /// What is wrong with it.
        source: serde_json::Error,
    },
}

/// Reads a dataset of JSON lines (blank lines skipped).
pub fn parse_dataset(text: &str) -> Result<Vec<LayerSample>, DatasetError> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| serde_json::from_str(l).map_err(|source| DatasetError::BadLine { line: i + 1, source }))
        .collect()
}

pub(crate) fn mean_overhead_us(samples: &[LayerSample]) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    samples.iter().map(|s| s.overhead_us).sum::<f64>() / samples.len() as f64
}

/// Predicted busy time per node of a graph, ready to be summed over any
/// prefix or suffix in O(nodes).
#[derive(Clone, Debug, PartialEq)]
pub struct NodeCosts {
    /// Seconds per node; a fused unit's whole time sits on its head node.
    pub per_node_s: Vec<f64>,
    /// Fixed seconds of one plan run, paid once by any non-empty part.
    pub overhead_s: f64,
}

impl NodeCosts {
    /// The predicted time of running the nodes `mask[i] == true`.
    pub fn sum(&self, mask: &[bool]) -> Duration {
        let mut total = 0.0;
        let mut any = false;
        for (c, &m) in self.per_node_s.iter().zip(mask) {
            if m {
                total += c.max(0.0);
                any = true;
            }
        }
        if any {
            Duration::from_secs_f64(total + self.overhead_s.max(0.0))
        } else {
            Duration::ZERO
        }
    }
}

/// A predictor of one unit's latency from its features (µs).
pub trait UnitPredictor {
    /// Predicted µs, or `None` when the predictor has no model for the unit's class.
    fn unit_us(&self, features: &LayerFeatures) -> Option<f64>;
}

/// Node costs from a per-unit cost function (µs), placed on each unit's head.
pub fn unit_costs(
    graph: &LayerGraph,
    overhead_us: f64,
    mut cost_us: impl FnMut(&Unit, &LayerFeatures) -> f64,
) -> NodeCosts {
    let mut per_node_s = vec![0.0; graph.nodes().len()];
    for (unit, f) in features::graph_features(graph) {
        per_node_s[unit.head] = cost_us(&unit, &f).max(0.0) * 1e-6;
    }
    NodeCosts { per_node_s, overhead_s: overhead_us * 1e-6 }
}

/// The baseline: latency proportional to FLOPs, with one rate fitted on the
/// same sweep the other predictors learn from.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FlopsModel {
    /// µs per multiply-add.
    pub us_per_mac: f64,
    /// Fixed cost of one plan run (µs).
    pub overhead_us: f64,
}

impl FlopsModel {
    /// The machine's aggregate rate on heavy layers: Σ time / Σ multiply-adds
    /// over the conv and fc samples (all samples with work if there are none).
    pub fn fit(samples: &[LayerSample]) -> FlopsModel {
        let heavy = |s: &&LayerSample| matches!(s.features.kind.as_str(), "conv" | "fc");
        let pick: Vec<&LayerSample> = if samples.iter().any(|s| heavy(&s)) {
            samples.iter().filter(heavy).collect()
        } else {
            samples.iter().filter(|s| s.features.macs > 0.0).collect()
        };
        let time: f64 = pick.iter().map(|s| s.target_us().max(0.0)).sum();
        let macs: f64 = pick.iter().map(|s| s.features.macs).sum();
        FlopsModel {
            us_per_mac: if macs > 0.0 { time / macs } else { 0.0 },
            overhead_us: mean_overhead_us(samples),
        }
    }
}

impl LatencyModel for FlopsModel {
    fn name(&self) -> String {
        "flops".into()
    }

    fn node_costs(&self, graph: &LayerGraph) -> NodeCosts {
        let per_node_s =
            graph.nodes().iter().map(|n| n.flops as f64 / 2.0 * self.us_per_mac * 1e-6).collect();
        NodeCosts { per_node_s, overhead_s: self.overhead_us * 1e-6 }
    }
}

/// Predicts how long a set of a model's layers takes to run on one device.
pub trait LatencyModel {
    /// A short name for reports (`dt-lr`, `evolp`, `flops`, ...).
    fn name(&self) -> String;

    /// Predicted busy time of every node of `graph`. Callers that price many
    /// cuts of one graph compute this once and sum it per cut.
    fn node_costs(&self, graph: &LayerGraph) -> NodeCosts;

    /// Predicted busy time of running the nodes `nodes[i] == true` of `graph`
    /// (a prefix or a suffix), in one pass.
    fn predict_nodes(&self, graph: &LayerGraph, nodes: &[bool]) -> Duration {
        self.node_costs(graph).sum(nodes)
    }

    /// Predicted time of the whole model.
    fn predict_model(&self, graph: &LayerGraph) -> Duration {
        self.predict_nodes(graph, &vec![true; graph.nodes().len()])
    }

    /// Predicted time of the wearable's part of `cut`.
    fn predict_prefix(&self, graph: &LayerGraph, cut: &Cut) -> Duration {
        self.predict_nodes(graph, cut.prefix_mask())
    }

    /// Predicted time of the handheld's part of `cut`.
    fn predict_suffix(&self, graph: &LayerGraph, cut: &Cut) -> Duration {
        let mask: Vec<bool> = cut.prefix_mask().iter().map(|w| !w).collect();
        self.predict_nodes(graph, &mask)
    }
}

impl<M: LatencyModel + ?Sized> LatencyModel for &M {
    fn name(&self) -> String {
        (**self).name()
    }

    fn node_costs(&self, graph: &LayerGraph) -> NodeCosts {
        (**self).node_costs(graph)
    }
}

/// A predictor scaled by a device's compute slowdown relative to the host it
/// was trained on.
#[derive(Clone, Debug)]
pub struct Scaled<M> {
    /// The host predictor.
    pub inner: M,
    /// Device time / host time (2.0: the device is twice as slow).
    pub slowdown: f64,
}

impl<M: LatencyModel> LatencyModel for Scaled<M> {
    fn name(&self) -> String {
        format!("{}x{}", self.inner.name(), self.slowdown)
    }

    fn node_costs(&self, graph: &LayerGraph) -> NodeCosts {
        let k = self.slowdown.max(0.0);
        let c = self.inner.node_costs(graph);
        NodeCosts { per_node_s: c.per_node_s.iter().map(|s| s * k).collect(), overhead_s: c.overhead_s * k }
    }
}

/// The trained predictors of one device, as stored in a predictor file.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PredictorSet {
    /// The DeepWear-style predictor.
    pub dt_lr: DtLr,
    /// The EvoLP-style predictor (its evolution matrix as last saved).
    pub evolp: EvoLp,
    /// The FLOPs-proportional baseline.
    pub flops: FlopsModel,
}

impl PredictorSet {
    /// Trains all three on a sweep dataset.
    pub fn fit(samples: &[LayerSample], mlp: &mlp::MlpConfig) -> PredictorSet {
        PredictorSet {
            dt_lr: DtLr::fit(samples),
            evolp: EvoLp::new(mlp::Lwlp::fit(samples, mlp), samples),
            flops: FlopsModel::fit(samples),
        }
    }
}

/// A measured per-node profile of one model standing in as a predictor:
/// each layer costs its measured median, and what no layer claims (glue,
/// sources) is the fixed per-run cost. Valid only for the graph it profiled.
#[derive(Clone, Debug)]
pub struct ProfiledLatency {
    /// Seconds per layer.
    pub per_node_s: Vec<f64>,
    /// Seconds no layer claims, paid once per run.
    pub overhead_s: f64,
}

impl ProfiledLatency {
    /// From a profile of the model. The per-node medians are scaled so that
    /// they add up to the median whole run (measured alternately with them):
    /// the eval hook misses time between nodes and adds its own per node.
    pub fn from_profile(profile: &tandem_core::profile::Profile) -> ProfiledLatency {
        let sum = profile.sum_of_nodes.as_secs_f64();
        let k = if sum > 0.0 { profile.whole_run.as_secs_f64() / sum } else { 1.0 };
        ProfiledLatency {
            per_node_s: profile.per_layer.iter().map(|d| d.as_secs_f64() * k).collect(),
            overhead_s: profile.unattributed.as_secs_f64() * k,
        }
    }

    /// Profiles `model` on this host (2 warm-up runs, median of 7).
    pub fn measure(
        model: &tandem_core::Model,
        inputs: &tandem_core::Values,
    ) -> tandem_core::Result<ProfiledLatency> {
        Self::measure_on(model, tandem_core::Engine::Tract, inputs)
    }

    /// [`ProfiledLatency::measure`] on `engine`.
    pub fn measure_on(
        model: &tandem_core::Model,
        engine: tandem_core::Engine,
        inputs: &tandem_core::Values,
    ) -> tandem_core::Result<ProfiledLatency> {
        Self::measure_runs(model, engine, inputs, (2, 7))
    }

    /// [`ProfiledLatency::measure_on`] with `(warmup, runs)` runs.
    pub fn measure_runs(
        model: &tandem_core::Model,
        engine: tandem_core::Engine,
        inputs: &tandem_core::Values,
        (warmup, runs): (usize, usize),
    ) -> tandem_core::Result<ProfiledLatency> {
        Ok(Self::from_profile(&tandem_core::profile::profile_on(model, engine, inputs, warmup, runs)?))
    }

    /// The model's profile on the engine `choice` resolves to (the fastest
    /// whole model for `auto`), and on each other engine it allows (for
    /// `auto`, every other available one; none for a named engine): what a
    /// planner choosing each half's engine with its cut needs. With a
    /// `spacing`, each profile is then scaled to a served frame's time
    /// ([`ProfiledLatency::served`]): the profile a side predicts its
    /// first frames with.
    pub fn measure_all(
        model: &tandem_core::Model,
        choice: tandem_core::EngineChoice,
        inputs: &tandem_core::Values,
        runs: (usize, usize),
        spacing: Option<Spacing>,
    ) -> tandem_core::Result<(EngineProfile, Vec<EngineProfile>)> {
        // Each engine profiled (and timed spaced) on one plan build.
        // With its whole model's time back to back, which chooses.
        let measure = |engine| -> tandem_core::Result<(EngineProfile, f64)> {
            let spacing = spacing.map(|s| (s.gap, s.runs));
            let (profile, spaced) =
                tandem_core::profile::profile_spaced_on(model, engine, inputs, runs, spacing)?;
            let latency = Self::from_profile(&profile);
            let back_to_back_s = latency.total_s();
            let (latency, served_scale) = match spaced {
                Some(whole) => latency.served(whole.as_secs_f64()),
                None => (latency, 1.0),
            };
            Ok((EngineProfile { engine, latency, served_scale }, back_to_back_s))
        };
        let mut measured: Vec<EngineProfile> = vec![];
        let engine = tandem_core::engine::resolve(choice, |e| {
            let (p, total) = measure(e)?;
            measured.push(p);
            Ok(total)
        })?;
        let chosen = match measured.iter().position(|p| p.engine == engine) {
            Some(i) => measured.remove(i),
            None => measure(engine)?.0,
        };
        Ok((chosen, measured))
    }

    /// The whole model's predicted time: every node and the overhead.
    pub fn total_s(&self) -> f64 {
        self.per_node_s.iter().sum::<f64>() + self.overhead_s
    }

    /// This profile (runs back to back) scaled so that the whole model
    /// takes `spaced_s`, a run after the idle a served frame follows, and
    /// the scale: never below 1 (a spaced run faster than back-to-back
    /// ones is noise) nor above [`MAX_SERVED_SCALE`] (one slow spaced run
    /// is not a machine). Its shape (each layer's share) stays.
    pub fn served(self, spaced_s: f64) -> (ProfiledLatency, f64) {
        let total = self.total_s();
        let k = if total > 0.0 && spaced_s.is_finite() {
            (spaced_s / total).clamp(1.0, MAX_SERVED_SCALE)
        } else {
            1.0
        };
        let p = ProfiledLatency {
            per_node_s: self.per_node_s.iter().map(|s| s * k).collect(),
            overhead_s: self.overhead_s * k,
        };
        (p, k)
    }
}

/// The most a profile is scaled to a served frame's time: on this host
/// spaced runs took 1.6-1.9x back-to-back ones, and a loaded host's
/// spaced runs must not make a side look slower than that (a side never
/// chosen is never measured, so never corrected).
pub const MAX_SERVED_SCALE: f64 = 2.0;

/// One engine's profile of a model ([`ProfiledLatency::measure_all`]).
#[derive(Clone, Debug)]
pub struct EngineProfile {
    /// The engine.
    pub engine: tandem_core::Engine,
    /// Its profile.
    pub latency: ProfiledLatency,
    /// How much the back-to-back profile was scaled to a served frame's
    /// time (1 when not asked).
    pub served_scale: f64,
}

/// How a session times a served frame before it has served one: whole runs,
/// each after an idle `gap`, the median of `runs`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spacing {
    /// Idle before each run.
    pub gap: Duration,
    /// Runs timed (one more first, not counted).
    pub runs: usize,
}

impl Spacing {
    /// What sessions use: 30 ms idle (a frame's round trip over Wi-Fi or
    /// BLE is 20-100 ms) before each of 3 runs.
    pub const SERVED: Spacing = Spacing { gap: Duration::from_millis(30), runs: 3 };
}

impl LatencyModel for ProfiledLatency {
    fn name(&self) -> String {
        "profiled".into()
    }

    fn node_costs(&self, graph: &LayerGraph) -> NodeCosts {
        let mut per_node_s = self.per_node_s.clone();
        per_node_s.resize(graph.nodes().len(), 0.0);
        NodeCosts { per_node_s, overhead_s: self.overhead_s }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A served frame's time scales every layer and the overhead alike,
    /// within [1, MAX_SERVED_SCALE].
    #[test]
    fn a_profile_is_scaled_to_a_served_frame_within_bounds() {
        let p = ProfiledLatency { per_node_s: vec![1e-3, 3e-3], overhead_s: 1e-3 };
        let (slower, k) = p.clone().served(7.5e-3);
        assert!((k - 1.5).abs() < 1e-12, "{k}");
        let close = |a: f64, b: f64| (a - b).abs() < 1e-15;
        assert!(close(slower.per_node_s[0], 1.5e-3) && close(slower.per_node_s[1], 4.5e-3), "{slower:?}");
        assert!(close(slower.overhead_s, 1.5e-3) && (slower.total_s() - 7.5e-3).abs() < 1e-12);
        assert_eq!(p.clone().served(1e-3).1, 1.0, "faster spaced runs are noise");
        assert_eq!(p.clone().served(1.0).1, MAX_SERVED_SCALE);
        assert_eq!(p.clone().served(f64::NAN).1, 1.0);
        let none = ProfiledLatency { per_node_s: vec![0.0], overhead_s: 0.0 };
        assert_eq!(none.served(1e-3).1, 1.0);
    }

    /// Spaced runs wait their gap before every run (the uncounted first
    /// too) and time the run alone; a session's first profile on tract
    /// comes with a scale within [1, MAX_SERVED_SCALE].
    #[test]
    fn spaced_runs_wait_their_gaps_and_a_served_profile_is_scaled_within_bounds() {
        use tandem_core::{Engine, EngineChoice, InputShapes, Model};
        let model = Model::from_bytes(&tandem_models::tiny::tiny_mlp_onnx(), &InputShapes::none())
            .expect("tiny model");
        let inputs = tandem_core::check::random_inputs(&model, 1).expect("inputs");
        let gap = Duration::from_millis(40);
        let started = std::time::Instant::now();
        let spaced = tandem_core::profile::spaced_runs(&model, Engine::Tract, &inputs, gap, 3).expect("runs");
        let wall = started.elapsed();
        assert!(wall >= gap * 4, "four gaps: {wall:?}");
        assert!(spaced > Duration::ZERO && spaced < gap, "the run alone is timed: {spaced:?}");
        let choice = EngineChoice::One(Engine::Tract);
        let (chosen, others) =
            ProfiledLatency::measure_all(&model, choice, &inputs, (1, 3), Some(Spacing::SERVED))
                .expect("profiled");
        let EngineProfile { engine, latency: p, served_scale: k } = chosen;
        assert_eq!(engine, Engine::Tract);
        assert!(others.is_empty(), "a named engine profiles no other");
        assert!((1.0..=MAX_SERVED_SCALE).contains(&k), "{k}");
        assert!(p.total_s() > 0.0 && p.per_node_s.len() == model.graph().nodes().len(), "{p:?}");
        // Not asked to scale: back to back, scale 1.
        let (plain, _) =
            ProfiledLatency::measure_all(&model, choice, &inputs, (1, 3), None).expect("profiled");
        assert_eq!(plain.served_scale, 1.0);
    }

    #[test]
    fn a_dataset_skips_blank_lines_and_names_a_bad_one() {
        let features = LayerFeatures {
            kind: "conv".into(),
            op: "Conv".into(),
            kernel: 3,
            stride: 1,
            rank: 2,
            grouping: "regular".into(),
            fused: String::new(),
            macs: 1e6,
            in_elems: 1e3,
            out_elems: 1e3,
            weight_elems: 27.0,
            channels_in: 3.0,
            channels_out: 8.0,
            rows: 100.0,
        };
        let sample = LayerSample {
            features,
            latency_us: 12.0,
            overhead_us: 2.0,
            source: "generic".into(),
            engine: Default::default(),
        };
        let line = serde_json::to_string(&sample).expect("a sample serializes");
        let samples = parse_dataset(&format!("{line}\n\n{line}\n")).expect("two samples");
        assert_eq!(samples.len(), 2);
        assert_eq!(samples[1].target_us(), 10.0);
        let err = parse_dataset(&format!("{line}\n\n{{\"features\": 1}}\n")).expect_err("a bad line");
        assert!(matches!(err, DatasetError::BadLine { line: 3, .. }), "{err}");
        assert!(err.to_string().starts_with("line 3: "), "{err}");
    }
}
