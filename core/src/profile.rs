//! Per-node profiling of an optimized plan through tract's evaluation hook,
//! attributed back to ONNX layers, with an additivity check (SPEC 3.1).
//!
//! tract fuses layers (a Conv absorbs its bias, BatchNormalization and often
//! its activation), so an optimized node is attributed to the ONNX layer
//! whose name it carries (`conv1` owns `conv1` and `conv1.matmatmul`). A
//! layer fused into another shows no time of its own.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde::Serialize;
use tract_onnx::prelude::*;
use tract_onnx::tract_core::plan::{eval, SimpleState};

use crate::error::{Result, TractContext};
use crate::graph::{LayerGraph, LayerKind, NodeId};
use crate::model::Model;
use crate::split::{check_tensor, full_plan, Values};

/// How long one optimized tract node took.
#[derive(Debug, Clone, Serialize)]
pub struct NodeTiming {
    /// tract's node name.
    pub name: String,
    /// tract's op name.
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

/// Profiles the unsplit optimized model: `warmup` runs, then `runs` measured
/// runs, alternating hooked (per-node) and plain (whole) runs so both see
/// the same machine conditions.
pub fn profile(model: &Model, inputs: &Values, warmup: usize, runs: usize) -> Result<Profile> {
    crate::guard::caught(|| "profiling".into(), || profile_unguarded(model, inputs, warmup, runs))
}

fn profile_unguarded(model: &Model, inputs: &Values, warmup: usize, runs: usize) -> Result<Profile> {
    let g = model.graph();
    let half = full_plan(model)?;
    let plan = half.plan().clone();
    let mut feed = TVec::new();
    for &t in half.inputs() {
        let name = &g.tensor(t).name;
        let v = inputs.get(name).ok_or_else(|| crate::Error::MissingTensor(name.clone()))?;
        check_tensor(g, t, v)?;
        feed.push(v.clone());
    }
    let tract_nodes = plan.model().nodes().len();
    let mut state = SimpleState::new(&plan).tract(|| "creating a plan state".into())?;
    let mut node_samples: Vec<Vec<Duration>> = vec![Vec::with_capacity(runs); tract_nodes];
    let mut whole_samples = Vec::with_capacity(runs);
    let runs = runs.max(1);
    for i in 0..warmup + runs {
        let mut elapsed = vec![Duration::ZERO; tract_nodes];
        state
            .run_plan_with_eval(feed.clone(), |ctx, op_state, node, input| {
                let started = Instant::now();
                let r = eval(ctx, op_state, node, input);
                elapsed[node.id] += started.elapsed();
                r
            })
            .tract(|| "profiling a run".into())?;
        let started = Instant::now();
        plan.run(feed.clone()).tract(|| "timing a run".into())?;
        let whole = started.elapsed();
        if i >= warmup {
            for (samples, e) in node_samples.iter_mut().zip(elapsed) {
                samples.push(e);
            }
            whole_samples.push(whole);
        }
    }
    let owner = LayerNames::new(g);
    let mut per_layer = vec![Duration::ZERO; g.nodes().len()];
    let mut unattributed = Duration::ZERO;
    let mut nodes = Vec::with_capacity(tract_nodes);
    for (node, samples) in plan.model().nodes().iter().zip(node_samples.iter_mut()) {
        let median = median(samples);
        let layer = owner.owner(&node.name).map(|l| owner.fused_producer(l, node.op().name().as_ref()));
        match layer {
            Some(l) => per_layer[l] += median,
            None => unattributed += median,
        }
        nodes.push(NodeTiming { name: node.name.clone(), op: node.op().name().to_string(), layer, median });
    }
    let sum_of_nodes = nodes.iter().map(|n| n.median).sum();
    Ok(Profile { nodes, per_layer, unattributed, whole_run: median(&mut whole_samples), sum_of_nodes, runs })
}

/// The median of some durations (zero when empty).
pub fn median(samples: &mut [Duration]) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    samples.sort_unstable();
    samples[samples.len() / 2]
}

/// Maps tract node names back to ONNX layers by longest name prefix.
struct LayerNames<'a> {
    graph: &'a LayerGraph,
    by_name: HashMap<&'a str, NodeId>,
}

impl<'a> LayerNames<'a> {
    fn new(g: &'a LayerGraph) -> Self {
        LayerNames {
            graph: g,
            by_name: g.nodes().iter().enumerate().map(|(i, n)| (n.name.as_str(), i)).collect(),
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
            let cut = name.rfind(['.', '#'])?;
            name = &name[..cut];
        }
    }
}
