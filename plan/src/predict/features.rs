//! What a predictor sees of a layer: [`Unit`]s (a layer plus the nodes tract
//! fuses into it) and their [`LayerFeatures`].
//!
//! tract folds a BatchNormalization that follows a convolution into the
//! convolution's weights, and fuses an activation that follows a convolution
//! or a matmul into its kernel. Timing such followers on their own would
//! count time that never runs, so a unit is a head node (conv or fc) plus the
//! chain of BN and activation nodes it absorbs. Every other node is a unit of
//! its own. The layer sweep measures units built the same way, so features
//! of a swept layer and of a model's layer come from the same code.

use serde::{Deserialize, Serialize};

use tandem_core::graph::{LayerGraph, LayerKind, LayerNode, NodeId, Producer};

/// Convolution grouping, a sub-type split of the conv predictor.
pub const GROUPING_REGULAR: &str = "regular";
/// One group per input channel.
pub const GROUPING_DEPTHWISE: &str = "depthwise";
/// Several groups, but not depthwise.
pub const GROUPING_GROUPED: &str = "grouped";

/// A head node and the followers tract fuses into it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unit {
    /// The node whose parameters describe the unit.
    pub head: NodeId,
    /// Absorbed followers (BatchNormalization, activations), in order.
    pub fused: Vec<NodeId>,
}

impl Unit {
    /// All nodes of the unit, head first.
    pub fn nodes(&self) -> impl Iterator<Item = NodeId> + '_ {
        std::iter::once(self.head).chain(self.fused.iter().copied())
    }
}

/// The features of one unit: categorical attributes the DeepWear-style tree
/// splits on, and numeric ones the regressions use.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LayerFeatures {
    /// The predictor class (conv, fc, pool, activation, recurrent, other).
    pub kind: String,
    /// The head's ONNX op type.
    pub op: String,
    /// Largest kernel side (conv, pool), 0 where none.
    pub kernel: u32,
    /// Largest stride, 1 where none.
    pub stride: u32,
    /// Number of spatial axes of the input (1 for Conv1d, 2 for images).
    pub rank: u32,
    /// `regular`, `depthwise` or `grouped` (conv); empty otherwise.
    pub grouping: String,
    /// Op types of the absorbed followers joined by `+` (`BatchNormalization+Relu`), or empty.
    pub fused: String,
    /// Multiply-adds (FLOPs / 2) of the head.
    pub macs: f64,
    /// Elements of the head's non-const inputs.
    pub in_elems: f64,
    /// Elements of the unit's output.
    pub out_elems: f64,
    /// Elements of the head's weights (conv, fc, recurrent), 0 otherwise.
    pub weight_elems: f64,
    /// Input channels or features.
    pub channels_in: f64,
    /// Output channels, features or hidden size.
    pub channels_out: f64,
    /// Rows of a matmul (fc), sequence length (recurrent), output positions (conv).
    pub rows: f64,
}

impl LayerFeatures {
    /// The value of a categorical attribute by name, for tree splits.
    pub fn category(&self, attribute: &str) -> String {
        match attribute {
            "op" => self.op.clone(),
            "kernel" => self.kernel.to_string(),
            "stride" => self.stride.to_string(),
            "rank" => self.rank.to_string(),
            "grouping" => self.grouping.clone(),
            "fused" => self.fused.clone(),
            "vector" => (self.rows <= 1.0).to_string(),
            // The decade of elements touched: lets a tree give tiny layers,
            // where fixed costs dominate, their own regression.
            "scale" => format!("1e{}", (self.in_elems + self.out_elems).max(1.0).log10().floor() as i32),
            _ => String::new(),
        }
    }

    /// The numeric regressors of this unit's class, without the constant term.
    pub fn regressors(&self) -> Vec<f64> {
        match self.kind.as_str() {
            // macs / channels: the im2col and packing volumes, which set a
            // matmul's efficiency on narrow layers.
            "conv" | "fc" => vec![
                self.macs,
                self.in_elems,
                self.out_elems,
                self.weight_elems,
                self.macs / self.channels_out.max(1.0),
                self.macs / self.channels_in.max(1.0),
            ],
            "pool" => vec![self.in_elems, self.out_elems * f64::from(self.kernel.max(1)).powi(2)],
            "recurrent" => vec![self.macs, self.rows, self.rows * self.channels_out],
            _ => vec![self.in_elems, self.out_elems],
        }
    }

    /// A key identifying this exact configuration, for direct lookups of
    /// measured (const) layers.
    pub fn config_key(&self) -> String {
        format!(
            "{}|{}|k{}|s{}|r{}|{}|{}|m{}|i{}|o{}|w{}",
            self.kind,
            self.op,
            self.kernel,
            self.stride,
            self.rank,
            self.grouping,
            self.fused,
            self.macs,
            self.in_elems,
            self.out_elems,
            self.weight_elems
        )
    }
}

/// The categorical attributes the tree may split each class on (SPEC 3.2:
/// kernel size, activation, ...).
pub fn split_attributes(kind: &str) -> &'static [&'static str] {
    match kind {
        "conv" => &["kernel", "grouping", "stride", "rank", "fused", "scale"],
        "fc" => &["vector", "fused", "op", "scale"],
        "pool" => &["op", "kernel", "scale"],
        "activation" => &["op", "scale"],
        "recurrent" => &["op", "scale"],
        _ => &["op", "scale"],
    }
}

/// The predictor classes, in report order.
pub const CLASSES: [&str; 6] = ["conv", "fc", "pool", "activation", "recurrent", "other"];

fn absorbable(head: &LayerNode, follower: &LayerNode, seen_activation: bool) -> bool {
    let heavy = matches!(head.kind, LayerKind::Conv | LayerKind::Fc);
    match follower.op.as_str() {
        "BatchNormalization" => head.kind == LayerKind::Conv && !seen_activation,
        "Relu" | "Clip" | "LeakyRelu" => heavy,
        _ => false,
    }
}

/// Groups the graph's nodes into units (see the module doc), in topological
/// order of their heads. Every node belongs to exactly one unit.
pub fn units(graph: &LayerGraph) -> Vec<Unit> {
    let n = graph.nodes().len();
    let mut owner: Vec<Option<usize>> = vec![None; n];
    let mut out: Vec<Unit> = vec![];
    for id in 0..n {
        if owner[id].is_some() {
            continue;
        }
        let head = &graph.nodes()[id];
        let mut unit = Unit { head: id, fused: vec![] };
        let mut last = id;
        let mut seen_activation = false;
        loop {
            // Follow only a single-output, single-consumer chain that is not a model output.
            let node = &graph.nodes()[last];
            let [t] = node.outputs.as_slice() else { break };
            let tensor = graph.tensor(*t);
            if tensor.consumers.len() != 1 || graph.outputs().contains(t) {
                break;
            }
            let next = tensor.consumers[0];
            let follower = &graph.nodes()[next];
            let only_input = follower
                .inputs
                .iter()
                .all(|&i| matches!(graph.tensor(i).producer, Producer::Node(p) if p == last));
            if owner[next].is_some() || !only_input || !absorbable(head, follower, seen_activation) {
                break;
            }
            seen_activation |= follower.kind == LayerKind::Activation;
            unit.fused.push(next);
            owner[next] = Some(out.len());
            last = next;
        }
        owner[id] = Some(out.len());
        out.push(unit);
    }
    out
}

/// The features of `unit` in `graph`.
pub fn features(graph: &LayerGraph, unit: &Unit) -> LayerFeatures {
    let head = &graph.nodes()[unit.head];
    let p = &head.params;
    let last = unit.fused.last().copied().unwrap_or(unit.head);
    let elems = |shape: &[usize]| shape.iter().map(|&d| d as f64).product::<f64>();
    let in_elems: f64 = head.inputs.iter().map(|&t| elems(&graph.tensor(t).shape)).sum();
    let out_elems: f64 =
        graph.nodes()[last].outputs.first().map(|&t| elems(&graph.tensor(t).shape)).unwrap_or(0.0);
    // The class names are LayerKind's Display: conv, fc, pool, ...
    let kind = head.kind.to_string();
    let groups = p.groups.max(1);
    let grouping = match head.kind {
        LayerKind::Conv if groups == 1 => GROUPING_REGULAR,
        LayerKind::Conv if groups == p.channels_in && groups == p.channels_out => GROUPING_DEPTHWISE,
        LayerKind::Conv => GROUPING_GROUPED,
        _ => "",
    };
    let kernel_elems = p.kernel.iter().map(|&k| k as f64).product::<f64>();
    let (weight_elems, rows) = match head.kind {
        LayerKind::Conv => (
            p.channels_out as f64 * (p.channels_in / groups) as f64 * kernel_elems,
            p.output_spatial.iter().map(|&d| d as f64).product::<f64>(),
        ),
        LayerKind::Fc => {
            let head_out = head.outputs.first().map(|&t| elems(&graph.tensor(t).shape)).unwrap_or(0.0);
            (p.channels_in as f64 * p.channels_out as f64, (head_out / p.channels_out.max(1) as f64).max(1.0))
        }
        LayerKind::Recurrent => {
            let gates = match head.op.as_str() {
                "LSTM" => 4.0,
                "GRU" => 3.0,
                _ => 1.0,
            };
            (
                gates * p.channels_out as f64 * (p.channels_in + p.channels_out) as f64,
                p.input_spatial.first().copied().unwrap_or(1) as f64,
            )
        }
        _ => (0.0, 1.0),
    };
    let rank = graph.tensor(head.inputs.first().copied().unwrap_or(0)).shape.len().saturating_sub(2) as u32;
    LayerFeatures {
        kind,
        op: head.op.clone(),
        kernel: p.kernel.iter().copied().max().unwrap_or(0) as u32,
        stride: p.stride.iter().copied().max().unwrap_or(1) as u32,
        rank,
        grouping: grouping.to_string(),
        fused: unit.fused.iter().map(|&f| graph.nodes()[f].op.as_str()).collect::<Vec<_>>().join("+"),
        macs: head.flops as f64 / 2.0,
        in_elems,
        out_elems,
        weight_elems,
        channels_in: p.channels_in as f64,
        channels_out: p.channels_out as f64,
        rows,
    }
}

/// Units and their features, for every unit of `graph`.
pub fn graph_features(graph: &LayerGraph) -> Vec<(Unit, LayerFeatures)> {
    units(graph)
        .into_iter()
        .map(|u| {
            let f = features(graph, &u);
            (u, f)
        })
        .collect()
}
