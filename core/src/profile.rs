//! Per-node profiling of an optimized model on its engine (tract's
//! evaluation hook, onnxruntime's profiler), attributed back to ONNX
//! layers, with an additivity check (SPEC 3.1).
//!
//! tract fuses layers (a Conv absorbs its bias, BatchNormalization and often
//! its activation), so an optimized node is attributed to the ONNX layer
//! whose name it carries (`conv1` owns `conv1` and `conv1.matmatmul`). A
//! layer fused into another shows no time of its own.

use std::collections::HashMap;
use std::time::Duration;

use serde::Serialize;

use crate::engine::{Engine, EngineProfile};
use crate::error::Result;
use crate::graph::{LayerGraph, LayerKind, NodeId};
use crate::model::Model;
use crate::split::{full_plan_on, Values};

/// How long one node of the engine's optimized graph took.
#[derive(Debug, Clone, Serialize)]
pub struct NodeTiming {
    /// The engine's node name.
    pub name: String,
    /// The engine's op name.
    pub op: String,
    /// The ONNX layer it is attributed to, if any.
    pub layer: Option<NodeId>,
    /// Median over the measured runs.
    pub median: Duration,
}

/// Result of profiling a model.
#[derive(Debug, Clone, Serialize)]
pub struct Profile {
    /// Every optimized node, in plan order.
    pub nodes: Vec<NodeTiming>,
    /// Median time per ONNX layer, indexed by layer id (0 for fused-away layers).
    pub per_layer: Vec<Duration>,
    /// Time of optimized nodes no layer claims (sources, consts, glue).
    pub unattributed: Duration,
    /// Median of whole runs without the hook.
    pub whole_run: Duration,
    /// Sum of the per-node medians.
    pub sum_of_nodes: Duration,
    /// Number of measured runs.
    pub runs: usize,
}

impl Profile {
    /// `sum_of_nodes / whole_run`: 1.0 means per-node times add up exactly.
    pub fn additivity_ratio(&self) -> f64 {
        self.sum_of_nodes.as_secs_f64() / self.whole_run.as_secs_f64().max(1e-12)
    }
}

/// Profiles the unsplit optimized model on tract: `warmup` runs, then
/// `runs` measured runs, alternating hooked (per-node) and plain (whole)
/// runs so both see the same machine conditions.
pub fn profile(model: &Model, inputs: &Values, warmup: usize, runs: usize) -> Result<Profile> {
    profile_on(model, Engine::Tract, inputs, warmup, runs)
}

/// [`profile`] on `engine`: its own per-node times (tract's evaluation
/// hook, onnxruntime's profiler), attributed to ONNX layers by name.
pub fn profile_on(
    model: &Model,
    engine: Engine,
    inputs: &Values,
    warmup: usize,
    runs: usize,
) -> Result<Profile> {
    Ok(profile_spaced_on(model, engine, inputs, (warmup, runs), None)?.0)
}

/// [`profile_on`] with `(warmup, runs)`, then, given `spacing` (an idle
/// gap and a count), [`spaced_runs`] on the same plan: one build for both.
pub fn profile_spaced_on(
    model: &Model,
    engine: Engine,
    inputs: &Values,
    (warmup, runs): (usize, usize),
    spacing: Option<(Duration, usize)>,
) -> Result<(Profile, Option<Duration>)> {
    let g = model.graph();
    let half = full_plan_on(model, engine)?;
    let feed = half.feed(g, inputs)?;
    let measured = crate::guard::caught_on(
        engine,
        || "profiling".into(),
        || half.runner().profile(&feed, warmup, runs),
    )?;
    let spaced = spacing.map(|(gap, runs)| spaced_on(&half, &feed, engine, gap, runs)).transpose()?;
    Ok((attribute(g, measured), spaced))
}

/// The median of `runs` whole runs of the unsplit model on `engine`, each
/// after `gap` idle (one more first, not counted), through the path a
/// served frame takes: a frame meets caches and clocks cooled by the wait
/// since the last one, where [`profile`]'s runs follow one another. On
/// this host a small model ran 1.6-1.9x slower after 20-80 ms idle.
pub fn spaced_runs(
    model: &Model,
    engine: Engine,
    inputs: &Values,
    gap: Duration,
    runs: usize,
) -> Result<Duration> {
    let half = full_plan_on(model, engine)?;
    let feed = half.feed(model.graph(), inputs)?;
    spaced_on(&half, &feed, engine, gap, runs)
}

/// [`spaced_runs`] on a built plan and its feed.
fn spaced_on(
    half: &crate::split::Half,
    feed: &tract_onnx::prelude::TVec<tract_onnx::prelude::TValue>,
    engine: Engine,
    gap: Duration,
    runs: usize,
) -> Result<Duration> {
    let mut times = Vec::with_capacity(runs.max(1));
    for i in 0..=runs.max(1) {
        std::thread::sleep(gap);
        let started = std::time::Instant::now();
        crate::guard::caught_on(engine, || "a spaced run".into(), || half.runner().run(feed.clone(), 1.0))?;
        if i > 0 {
            times.push(started.elapsed());
        }
    }
    Ok(median(&mut times))
}

/// An engine's per-node times as per-layer times.
fn attribute(g: &LayerGraph, measured: EngineProfile) -> Profile {
    let owner = LayerNames::new(g, measured.name_separators);
    let mut per_layer = vec![Duration::ZERO; g.nodes().len()];
    let mut unattributed = Duration::ZERO;
    let mut nodes = Vec::with_capacity(measured.nodes.len());
    for node in measured.nodes {
        let layer = owner.owner(&node.name).map(|l| owner.fused_producer(l, &node.op));
        match layer {
            Some(l) => per_layer[l] += node.median,
            None => unattributed += node.median,
        }
        nodes.push(NodeTiming { name: node.name, op: node.op, layer, median: node.median });
    }
    let sum_of_nodes = nodes.iter().map(|n| n.median).sum();
    Profile {
        nodes,
        per_layer,
        unattributed,
        whole_run: measured.whole_run,
        sum_of_nodes,
        runs: measured.runs,
    }
}

/// The median of some durations (zero when empty).
pub use crate::engine::median;

/// Maps tract node names back to ONNX layers by longest name prefix.
struct LayerNames<'a> {
    graph: &'a LayerGraph,
    by_name: HashMap<&'a str, NodeId>,
    separators: &'static [char],
}

impl<'a> LayerNames<'a> {
    fn new(g: &'a LayerGraph, separators: &'static [char]) -> Self {
        LayerNames {
            graph: g,
            by_name: g.nodes().iter().enumerate().map(|(i, n)| (n.name.as_str(), i)).collect(),
            separators,
        }
    }

    /// When tract fuses a matmul or convolution with the activation after
    /// it, the fused node may carry the activation's name: give its time to
    /// the conv or fc layer upstream instead.
    fn fused_producer(&self, layer: NodeId, tract_op: &str) -> NodeId {
        let op = tract_op.to_ascii_lowercase();
        let heavy = ["matmul", "mmm", "conv", "gemm", "einsum"].iter().any(|k| op.contains(k));
        let is_heavy = |l: NodeId| matches!(self.graph.nodes()[l].kind, LayerKind::Conv | LayerKind::Fc);
        if !heavy || is_heavy(layer) {
            return layer;
        }
        let mut frontier = vec![layer];
        for _ in 0..3 {
            let next: Vec<NodeId> =
                frontier.iter().flat_map(|&l| self.graph.preds(l).iter().copied()).collect();
            if let Some(&found) = next.iter().find(|&&l| is_heavy(l)) {
                return found;
            }
            frontier = next;
        }
        layer
    }

    fn owner(&self, tract_name: &str) -> Option<NodeId> {
        let mut name = tract_name;
        loop {
            if let Some(&id) = self.by_name.get(name) {
                return Some(id);
            }
            let cut = name.rfind(self.separators)?;
            name = &name[..cut];
        }
    }
}
