//! The layer DAG: ONNX nodes as a user sees them, with kind, parameters,
//! FLOPs, and the type, shape and size of every tensor between them.
//!
//! Nodes that depend only on constants (initializers, `Constant`,
//! `ConstantOfShape` of a constant shape, ...) are not layers: both sides
//! recompute them, so they never cross a cut. They are kept apart as
//! "const nodes".

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::num::Saturating as S;

use serde::Serialize;
use tract_onnx::pb;
use tract_onnx::prelude::DatumType;

use crate::error::{Error, Result};
use crate::model::node_display_name;

/// Index of a layer in [`LayerGraph::nodes`].
pub type NodeId = usize;
/// Index of a tensor in [`LayerGraph::tensors`].
pub type TensorId = usize;

/// Concrete type and shape of every named tensor, as inferred by tract.
#[derive(Debug, Default, Clone)]
pub struct TensorFacts(HashMap<String, (DatumType, Vec<usize>)>);

impl TensorFacts {
    /// Records the type and shape of `name`.
    pub fn insert(&mut self, name: String, dt: DatumType, shape: Vec<usize>) {
        self.0.insert(name, (dt, shape));
    }

    /// The type and shape of `name`.
    pub fn get(&self, name: &str) -> Option<&(DatumType, Vec<usize>)> {
        self.0.get(name)
    }
}

/// The coarse layer type used by predictors (SPEC 3.1: a few heavy types dominate).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LayerKind {
    /// Convolution (Conv, ConvTranspose, quantized variants).
    Conv,
    /// Fully connected: MatMul and Gemm.
    Fc,
    /// Max, average, global and Lp pooling.
    Pool,
    /// Element-wise activations and Softmax.
    Activation,
    /// LSTM, GRU and RNN.
    Recurrent,
    /// Everything else (BatchNormalization, Add, Concat, Reshape, ...).
    Other,
}

impl LayerKind {
    fn of(op: &str) -> LayerKind {
        match op {
            "Conv" | "ConvTranspose" | "ConvInteger" | "QLinearConv" => LayerKind::Conv,
            "MatMul" | "Gemm" | "MatMulInteger" | "QLinearMatMul" => LayerKind::Fc,
            "MaxPool" | "AveragePool" | "GlobalAveragePool" | "GlobalMaxPool" | "LpPool" | "GlobalLpPool" => {
                LayerKind::Pool
            }
            "Relu" | "LeakyRelu" | "PRelu" | "Sigmoid" | "Tanh" | "Softmax" | "LogSoftmax" | "Elu"
            | "Selu" | "HardSigmoid" | "HardSwish" | "Softplus" | "Softsign" | "Gelu" | "Mish"
            | "ThresholdedRelu" | "Celu" | "Clip" => LayerKind::Activation,
            "LSTM" | "GRU" | "RNN" => LayerKind::Recurrent,
            _ => LayerKind::Other,
        }
    }
}

impl fmt::Display for LayerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            LayerKind::Conv => "conv",
            LayerKind::Fc => "fc",
            LayerKind::Pool => "pool",
            LayerKind::Activation => "activation",
            LayerKind::Recurrent => "recurrent",
            LayerKind::Other => "other",
        };
        f.write_str(s)
    }
}

/// A layer's parameters. Fields that do not apply to its kind stay empty or 0.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LayerParams {
    /// Kernel size per spatial axis (conv, pool).
    pub kernel: Vec<usize>,
    /// Stride per spatial axis.
    pub stride: Vec<usize>,
    /// Padding, begins then ends, per spatial axis.
    pub pads: Vec<usize>,
    /// Dilation per spatial axis.
    pub dilation: Vec<usize>,
    /// Convolution groups (channels for depthwise).
    pub groups: usize,
    /// Input channels (conv), input features (fc, recurrent).
    pub channels_in: usize,
    /// Output channels (conv), output features (fc), hidden size (recurrent).
    pub channels_out: usize,
    /// Spatial sizes of the main input (H, W, or T), or sequence length.
    pub input_spatial: Vec<usize>,
    /// Spatial sizes of the main output.
    pub output_spatial: Vec<usize>,
}

impl fmt::Display for LayerParams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dims = |v: &[usize]| v.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("x");
        let mut parts = vec![];
        if !self.kernel.is_empty() {
            parts.push(format!("k{}", dims(&self.kernel)));
        }
        if self.stride.iter().any(|&s| s != 1) {
            parts.push(format!("s{}", dims(&self.stride)));
        }
        if self.pads.iter().any(|&p| p != 0) {
            parts.push(format!("p{}", dims(&self.pads)));
        }
        if self.dilation.iter().any(|&d| d != 1) {
            parts.push(format!("d{}", dims(&self.dilation)));
        }
        if self.groups > 1 {
            parts.push(format!("g{}", self.groups));
        }
        if self.channels_in > 0 || self.channels_out > 0 {
            parts.push(format!("{}->{}", self.channels_in, self.channels_out));
        }
        if !self.input_spatial.is_empty() {
            parts.push(format!("@{}", dims(&self.input_spatial)));
        }
        f.write_str(&parts.join(" "))
    }
}

/// Who produces a tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Producer {
    /// The model input with this index (fed on the wearable).
    Input(usize),
    /// A layer.
    Node(NodeId),
    /// An initializer or a const node: recomputed on both sides.
    Const,
}

/// A named tensor of the model.
#[derive(Debug, Clone)]
pub struct TensorInfo {
    /// The ONNX tensor name.
    pub name: String,
    /// Element type (shape computations are reported as i64).
    pub dtype: DatumType,
    /// Concrete shape (empty when unknown, for const tensors only).
    pub shape: Vec<usize>,
    /// Size in bytes of the raw data.
    pub bytes: u64,
    /// Who computes it.
    pub producer: Producer,
    /// The layers that read it.
    pub consumers: Vec<NodeId>,
}

/// One ONNX node that depends on the model inputs.
#[derive(Debug, Clone, Serialize)]
pub struct LayerNode {
    /// Node name, as tract names it (the ONNX name, else its first output).
    pub name: String,
    /// Coarse kind.
    pub kind: LayerKind,
    /// The ONNX op type.
    pub op: String,
    /// Kernel, stride, channels, ...
    pub params: LayerParams,
    /// Floating-point operations (a multiply-add counts 2).
    pub flops: u64,
    /// Tensors read (non-const only).
    #[serde(skip)]
    pub inputs: Vec<TensorId>,
    /// Tensors written.
    #[serde(skip)]
    pub outputs: Vec<TensorId>,
    /// Output shapes.
    pub output_shapes: Vec<Vec<usize>>,
    /// Total bytes of the outputs.
    pub output_bytes: u64,
    /// Index of the node in the ONNX graph.
    #[serde(skip)]
    pub proto_index: usize,
}

/// The model as a DAG of layers.
#[derive(Debug, Clone)]
pub struct LayerGraph {
    nodes: Vec<LayerNode>,
    tensors: Vec<TensorInfo>,
    by_name: HashMap<String, TensorId>,
    inputs: Vec<TensorId>,
    outputs: Vec<TensorId>,
    preds: Vec<Vec<NodeId>>,
    succs: Vec<Vec<NodeId>>,
    /// ONNX node index of the producer of each const tensor that a node computes.
    const_producers: HashMap<String, usize>,
    const_node_count: usize,
    /// Dequantizers that are not layers ([`LayerGraph::dequantizer`]): each
    /// float output's ONNX node index and the quantized tensor it reads.
    dequantizers: HashMap<String, (usize, TensorId)>,
    /// ONNX node indices in the topological order used to build the graph.
    order: Vec<usize>,
    /// A hash of what the partitioner reads: layers' edges, tensors'
    /// producers, readers and sizes, the model's inputs and outputs.
    fingerprint: u64,
}

impl LayerGraph {
    /// Builds the DAG from an ONNX graph and the inferred facts of its tensors.
    pub fn build(graph: &pb::GraphProto, facts: &TensorFacts) -> Result<LayerGraph> {
        let initializers: HashSet<&str> = graph
            .initializer
            .iter()
            .map(|t| t.name.as_str())
            .chain(graph.sparse_initializer.iter().filter_map(|t| t.values.as_ref().map(|v| v.name.as_str())))
            .collect();
        let order = topological_order(graph)?;
        let mut g = LayerGraph {
            nodes: vec![],
            tensors: vec![],
            by_name: HashMap::new(),
            inputs: vec![],
            outputs: vec![],
            preds: vec![],
            succs: vec![],
            const_producers: HashMap::new(),
            const_node_count: 0,
            dequantizers: HashMap::new(),
            order: order.clone(),
            fingerprint: 0,
        };
        let mut const_tensors: HashSet<String> = initializers.iter().map(|s| s.to_string()).collect();
        let graph_outputs: HashSet<&str> = graph.output.iter().map(|o| o.name.as_str()).collect();
        for input in &graph.input {
            if initializers.contains(input.name.as_str()) {
                continue;
            }
            let ix = g.inputs.len();
            let id = g.add_tensor(&input.name, Producer::Input(ix), facts)?;
            g.inputs.push(id);
        }
        for &pi in &order {
            let node = &graph.node[pi];
            let inputs = node_inputs(node);
            if inputs.iter().all(|i| const_tensors.contains(i)) {
                for o in node.output.iter().filter(|o| !o.is_empty()) {
                    const_tensors.insert(o.clone());
                    g.const_producers.insert(o.clone(), pi);
                }
                g.const_node_count += 1;
                continue;
            }
            let resolve = |g: &LayerGraph, name: &str| -> Result<TensorId> {
                if let Some(&(_, quantized)) = g.dequantizers.get(name) {
                    return Ok(quantized);
                }
                g.by_name.get(name).copied().ok_or_else(|| Error::NotOnnx {
                    origin: None,
                    reason: format!("node '{}' reads undefined tensor '{name}'", node_display_name(node, pi)),
                })
            };
            if let Some(out) = dequantizer_output(node, &const_tensors, &graph_outputs) {
                let quantized = resolve(&g, &node.input[0])?;
                if matches!(g.tensors[quantized].dtype, DatumType::I8 | DatumType::U8) {
                    g.dequantizers.insert(out.to_string(), (pi, quantized));
                    continue;
                }
            }
            let id = g.nodes.len();
            let mut tin = vec![];
            for name in inputs.iter().filter(|i| !const_tensors.contains(*i)) {
                let t = resolve(&g, name)?;
                if !tin.contains(&t) {
                    tin.push(t);
                    g.tensors[t].consumers.push(id);
                }
            }
            let mut tout = vec![];
            for o in node.output.iter().filter(|o| !o.is_empty()) {
                tout.push(g.add_tensor(o, Producer::Node(id), facts)?);
            }
            let shape_of = |name: &str| facts.get(name).map(|f| f.1.clone()).unwrap_or_default();
            let input_shapes: Vec<Vec<usize>> = node.input.iter().map(|i| shape_of(i)).collect();
            let output_shapes: Vec<Vec<usize>> = tout.iter().map(|&t| g.tensors[t].shape.clone()).collect();
            let (params, flops) = describe(node, &input_shapes, &output_shapes);
            g.nodes.push(LayerNode {
                name: node_display_name(node, pi),
                kind: LayerKind::of(&node.op_type),
                op: node.op_type.clone(),
                params,
                flops,
                inputs: tin,
                output_bytes: tout.iter().map(|&t| g.tensors[t].bytes).sum(),
                outputs: tout,
                output_shapes,
                proto_index: pi,
            });
        }
        for output in &graph.output {
            match g.by_name.get(&output.name) {
                Some(&t) => g.outputs.push(t),
                None if const_tensors.contains(&output.name) => {
                    let t = g.add_tensor(&output.name, Producer::Const, facts)?;
                    g.outputs.push(t);
                }
                None => {
                    return Err(Error::NotOnnx {
                        origin: None,
                        reason: format!("graph output '{}' is never computed", output.name),
                    })
                }
            }
        }
        g.preds = vec![vec![]; g.nodes.len()];
        g.succs = vec![vec![]; g.nodes.len()];
        for (id, node) in g.nodes.iter().enumerate() {
            for &t in &node.inputs {
                if let Producer::Node(p) = g.tensors[t].producer {
                    if !g.preds[id].contains(&p) {
                        g.preds[id].push(p);
                        g.succs[p].push(id);
                    }
                }
            }
        }
        g.fingerprint = {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            (&g.preds, &g.inputs, &g.outputs).hash(&mut h);
            for t in &g.tensors {
                (t.bytes, t.producer, &t.consumers).hash(&mut h);
            }
            h.finish()
        };
        Ok(g)
    }

    /// A hash of what the partitioner reads (the layers' edges, the
    /// tensors' producers, readers and sizes, the model's inputs and
    /// outputs), computed once: two graphs that differ there differ here
    /// (but for a hash collision). Work computed once per graph keeps it
    /// to know its graph again.
    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }

    fn add_tensor(&mut self, name: &str, producer: Producer, facts: &TensorFacts) -> Result<TensorId> {
        let (dtype, shape) = facts.get(name).cloned().ok_or_else(|| Error::UnknownShape(name.to_string()))?;
        let bytes =
            shape.iter().try_fold(dtype.size_of() as u64, |a, &d| a.checked_mul(d as u64)).ok_or_else(
                || Error::TooLarge { what: format!("tensor '{name}'"), bytes: None, limit: u64::MAX },
            )?;
        let id = self.tensors.len();
        self.tensors.push(TensorInfo {
            name: name.to_string(),
            dtype,
            shape,
            bytes,
            producer,
            consumers: vec![],
        });
        self.by_name.insert(name.to_string(), id);
        Ok(id)
    }

    /// The layers, in a topological order.
    pub fn nodes(&self) -> &[LayerNode] {
        &self.nodes
    }

    /// All non-const tensors (plus const model outputs).
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// A tensor by id.
    pub fn tensor(&self, id: TensorId) -> &TensorInfo {
        &self.tensors[id]
    }

    /// A tensor's id by ONNX name.
    pub fn tensor_id(&self, name: &str) -> Option<TensorId> {
        self.by_name.get(name).copied()
    }

    /// A tensor by ONNX name.
    pub fn tensor_by_name(&self, name: &str) -> Option<&TensorInfo> {
        self.by_name.get(name).map(|&t| &self.tensors[t])
    }

    /// The model inputs (fed on the wearable).
    pub fn inputs(&self) -> &[TensorId] {
        &self.inputs
    }

    /// The model outputs.
    pub fn outputs(&self) -> &[TensorId] {
        &self.outputs
    }

    /// Layers whose outputs `node` reads.
    pub fn preds(&self, node: NodeId) -> &[NodeId] {
        &self.preds[node]
    }

    /// Layers that read `node`'s outputs.
    pub fn succs(&self, node: NodeId) -> &[NodeId] {
        &self.succs[node]
    }

    /// Number of edges between layers.
    pub fn edge_count(&self) -> usize {
        self.preds.iter().map(Vec::len).sum()
    }

    /// Number of ONNX nodes folded as constants.
    pub fn const_node_count(&self) -> usize {
        self.const_node_count
    }

    /// Total FLOPs of all layers.
    pub fn total_flops(&self) -> u64 {
        self.nodes.iter().map(|n| n.flops).sum()
    }

    /// ONNX node index that computes const tensor `name`, if a node does.
    pub(crate) fn const_producer(&self, name: &str) -> Option<usize> {
        self.const_producers.get(name).copied()
    }

    /// The ONNX node index of the dequantizer whose float output is `name`,
    /// if it is one that is not a layer: a `DequantizeLinear` of an int8 or
    /// uint8 tensor with a constant scale and zero point, whose output is
    /// not a model output (or one that `workaround` unfolded into `Cast`,
    /// `Sub`, `Mul`). Its readers read the quantized tensor instead,
    /// so a cut there sends the integers (a quarter of the bytes) and every
    /// half that reads the float recomputes it as the unsplit model does:
    /// a float crossing would let the engine fuse the quantize/dequantize
    /// pairs one way unsplit and another way in each half.
    pub(crate) fn dequantizer(&self, name: &str) -> Option<usize> {
        self.dequantizers.get(name).map(|&(pi, _)| pi)
    }

    /// The quantized tensor a non-layer dequantizer reads, by the name of
    /// its float output ([`LayerGraph::dequantizer`]).
    pub fn dequantized_from(&self, name: &str) -> Option<TensorId> {
        self.dequantizers.get(name).map(|&(_, t)| t)
    }

    /// Whether a non-layer dequantizer reads tensor `t` (an int8 or uint8
    /// tensor that crosses where a cut meets a `DequantizeLinear`).
    pub fn is_dequantized(&self, t: TensorId) -> bool {
        self.dequantizers.values().any(|&(_, q)| q == t)
    }

    /// How many dequantizers are recomputed by each half rather than cut
    /// at ([`LayerGraph::dequantizer`]).
    pub fn dequantizer_count(&self) -> usize {
        self.dequantizers.len()
    }

    /// ONNX node indices in topological order (layers and const nodes).
    pub(crate) fn proto_order(&self) -> &[usize] {
        &self.order
    }

    /// Whether every layer has at most one predecessor and one successor
    /// among layers, so that cuts are the n+1 prefixes of one order.
    pub fn is_chain(&self) -> bool {
        self.preds.iter().all(|p| p.len() <= 1) && self.succs.iter().all(|s| s.len() <= 1)
    }
}

/// The output of `node` when it is a `DequantizeLinear` that need not be a
/// layer: its scale and zero point are constants, its input is not, and its
/// output is not a model output ([`LayerGraph::dequantizer`]).
fn dequantizer_output<'a>(
    node: &'a pb::NodeProto,
    const_tensors: &HashSet<String>,
    graph_outputs: &HashSet<&str>,
) -> Option<&'a str> {
    let out = node.output.first().filter(|o| !o.is_empty())?;
    let params_const = node.input.iter().skip(1).all(|i| i.is_empty() || const_tensors.contains(i));
    // `workaround` writes some as `Cast`, `Sub`, `Mul`, marked as such.
    let unfolded = node.doc_string == crate::workaround::UNFOLDED_DEQUANTIZE
        && matches!(node.op_type.as_str(), "Cast" | "Sub" | "Mul");
    let ok = (node.op_type == "DequantizeLinear" || unfolded)
        && matches!(node.domain.as_str(), "" | "ai.onnx")
        && node.output.len() == 1
        && node.input.first().is_some_and(|x| !x.is_empty() && !const_tensors.contains(x))
        && params_const
        && !graph_outputs.contains(out.as_str());
    ok.then_some(out.as_str())
}

/// A node's inputs by name: its declared ones, then tensors its subgraphs
/// capture from the enclosing scope.
pub(crate) fn node_inputs(node: &pb::NodeProto) -> Vec<String> {
    let mut names: Vec<String> = node.input.iter().filter(|i| !i.is_empty()).cloned().collect();
    for attr in &node.attribute {
        for g in attr.g.iter().chain(attr.graphs.iter()) {
            for captured in captured_names(g) {
                if !names.contains(&captured) {
                    names.push(captured);
                }
            }
        }
    }
    names
}

/// Names a subgraph reads but does not define itself.
fn captured_names(g: &pb::GraphProto) -> Vec<String> {
    let mut defined: HashSet<String> = g.input.iter().map(|i| i.name.clone()).collect();
    defined.extend(g.initializer.iter().map(|i| i.name.clone()));
    for n in &g.node {
        defined.extend(n.output.iter().cloned());
    }
    let mut out = vec![];
    for n in &g.node {
        for i in node_inputs(n) {
            if !defined.contains(&i) && !out.contains(&i) {
                out.push(i);
            }
        }
    }
    out
}

/// Kahn's order over ONNX nodes, stable with respect to the file's order.
fn topological_order(graph: &pb::GraphProto) -> Result<Vec<usize>> {
    let mut producer: HashMap<&str, usize> = HashMap::new();
    for (ix, n) in graph.node.iter().enumerate() {
        for o in n.output.iter().filter(|o| !o.is_empty()) {
            producer.insert(o.as_str(), ix);
        }
    }
    let n = graph.node.len();
    let mut indegree = vec![0usize; n];
    let mut succs = vec![vec![]; n];
    for (ix, node) in graph.node.iter().enumerate() {
        let mut seen = HashSet::new();
        for i in node_inputs(node) {
            if let Some(&p) = producer.get(i.as_str()) {
                if seen.insert(p) {
                    indegree[ix] += 1;
                    succs[p].push(ix);
                }
            }
        }
    }
    let mut ready: VecDeque<usize> = (0..n).filter(|&i| indegree[i] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(i) = ready.pop_front() {
        order.push(i);
        for &s in &succs[i] {
            indegree[s] -= 1;
            if indegree[s] == 0 {
                ready.push_back(s);
            }
        }
    }
    if order.len() != n {
        return Err(Error::NotOnnx { origin: None, reason: "the graph has a cycle".into() });
    }
    Ok(order)
}

fn attr<'a>(node: &'a pb::NodeProto, name: &str) -> Option<&'a pb::AttributeProto> {
    node.attribute.iter().find(|a| a.name == name)
}

fn attr_ints(node: &pb::NodeProto, name: &str) -> Option<Vec<usize>> {
    attr(node, name).map(|a| a.ints.iter().map(|&i| i.max(0) as usize).collect())
}

fn attr_int(node: &pb::NodeProto, name: &str) -> Option<i64> {
    attr(node, name).map(|a| a.i)
}

/// A product that saturates: attributes and shapes come from the file.
fn prod(v: &[usize]) -> S<u64> {
    v.iter().fold(S(1), |a, &d| a * S(d as u64))
}

/// Parameters and FLOPs of a node from its attributes and tensor shapes
/// (saturating: a hostile file's attributes cannot overflow them).
fn describe(node: &pb::NodeProto, inputs: &[Vec<usize>], outputs: &[Vec<usize>]) -> (LayerParams, u64) {
    let empty = vec![];
    let x = inputs.first().unwrap_or(&empty);
    let y = outputs.first().unwrap_or(&empty);
    let out_elems = prod(y);
    let spatial = |s: &[usize]| if s.len() > 2 { s[2..].to_vec() } else { vec![] };
    let mut p = LayerParams::default();
    let flops = match node.op_type.as_str() {
        "Conv" | "ConvInteger" | "ConvTranspose" => {
            let w = inputs.get(1).unwrap_or(&empty);
            let rank = x.len().saturating_sub(2);
            p.kernel = attr_ints(node, "kernel_shape").unwrap_or_else(|| spatial(w));
            p.stride = attr_ints(node, "strides").unwrap_or_else(|| vec![1; rank]);
            p.pads = attr_ints(node, "pads").unwrap_or_else(|| vec![0; 2 * rank]);
            p.dilation = attr_ints(node, "dilations").unwrap_or_else(|| vec![1; rank]);
            p.groups = attr_int(node, "group").unwrap_or(1).max(1) as usize;
            p.channels_in = x.get(1).copied().unwrap_or(0);
            p.channels_out = y.get(1).copied().unwrap_or(0);
            p.input_spatial = spatial(x);
            p.output_spatial = spatial(y);
            let macs_per = prod(&p.kernel) * S((p.channels_in / p.groups.max(1)) as u64);
            let macs = if node.op_type == "ConvTranspose" {
                prod(x) * prod(&p.kernel) * S((p.channels_out / p.groups.max(1)) as u64)
            } else {
                out_elems * macs_per
            };
            S(2) * macs + if inputs.len() > 2 { out_elems } else { S(0) }
        }
        "Gemm" | "MatMul" | "MatMulInteger" => {
            let k = if node.op_type == "Gemm" {
                let trans_a = attr_int(node, "transA").unwrap_or(0) != 0;
                let a = x;
                if trans_a {
                    a.first().copied().unwrap_or(0)
                } else {
                    a.get(1).copied().unwrap_or(0)
                }
            } else {
                x.last().copied().unwrap_or(0)
            };
            p.channels_in = k;
            p.channels_out = y.last().copied().unwrap_or(0);
            S(2) * out_elems * S(k as u64)
                + if node.op_type == "Gemm" && inputs.len() > 2 { out_elems } else { S(0) }
        }
        "MaxPool" | "AveragePool" | "LpPool" => {
            let rank = x.len().saturating_sub(2);
            p.kernel = attr_ints(node, "kernel_shape").unwrap_or_default();
            p.stride = attr_ints(node, "strides").unwrap_or_else(|| vec![1; rank]);
            p.pads = attr_ints(node, "pads").unwrap_or_else(|| vec![0; 2 * rank]);
            p.dilation = attr_ints(node, "dilations").unwrap_or_else(|| vec![1; rank]);
            p.channels_in = x.get(1).copied().unwrap_or(0);
            p.channels_out = y.get(1).copied().unwrap_or(0);
            p.input_spatial = spatial(x);
            p.output_spatial = spatial(y);
            out_elems * prod(&p.kernel)
        }
        "GlobalAveragePool" | "GlobalMaxPool" | "GlobalLpPool" => {
            p.kernel = spatial(x);
            p.channels_in = x.get(1).copied().unwrap_or(0);
            p.channels_out = p.channels_in;
            p.input_spatial = spatial(x);
            prod(x)
        }
        "LSTM" | "GRU" | "RNN" => {
            let gates = match node.op_type.as_str() {
                "LSTM" => 4,
                "GRU" => 3,
                _ => 1,
            };
            let hidden = attr_int(node, "hidden_size").unwrap_or(0).max(0) as u64;
            let (seq, batch, feat) = (
                x.first().copied().unwrap_or(0) as u64,
                x.get(1).copied().unwrap_or(0) as u64,
                x.get(2).copied().unwrap_or(0) as u64,
            );
            let dirs = inputs.get(1).and_then(|w| w.first()).copied().unwrap_or(1) as u64;
            p.channels_in = feat as usize;
            p.channels_out = hidden as usize;
            p.input_spatial = vec![seq as usize];
            let (gates, hidden) = (S(gates as u64), S(hidden));
            let per_step = S(2) * gates * hidden * (S(feat) + hidden) + S(8) * gates * hidden;
            S(seq) * S(batch) * S(dirs) * per_step
        }
        "Sigmoid" | "Tanh" | "Elu" | "Selu" | "Softplus" | "Gelu" | "Mish" | "HardSwish" => S(4) * out_elems,
        "Softmax" | "LogSoftmax" => S(5) * out_elems,
        "BatchNormalization" | "InstanceNormalization" | "LayerNormalization" => S(2) * out_elems,
        "LRN" => {
            let size = attr_int(node, "size").unwrap_or(1).max(1) as u64;
            S(size.saturating_add(3)) * out_elems
        }
        "Reshape" | "Flatten" | "Squeeze" | "Unsqueeze" | "Identity" | "Shape" | "Dropout" => S(0),
        _ => out_elems,
    };
    (p, flops.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_cover_the_heavy_types() {
        assert_eq!(LayerKind::of("Conv"), LayerKind::Conv);
        assert_eq!(LayerKind::of("Gemm"), LayerKind::Fc);
        assert_eq!(LayerKind::of("MatMul"), LayerKind::Fc);
        assert_eq!(LayerKind::of("GlobalAveragePool"), LayerKind::Pool);
        assert_eq!(LayerKind::of("Relu"), LayerKind::Activation);
        assert_eq!(LayerKind::of("LSTM"), LayerKind::Recurrent);
        assert_eq!(LayerKind::of("Concat"), LayerKind::Other);
    }

    #[test]
    fn conv_flops_count_multiply_adds_twice() {
        let node = pb::NodeProto {
            op_type: "Conv".into(),
            attribute: vec![
                pb::AttributeProto { name: "kernel_shape".into(), ints: vec![3, 3], ..Default::default() },
                pb::AttributeProto { name: "group".into(), i: 1, ..Default::default() },
            ],
            ..Default::default()
        };
        let (p, flops) = describe(&node, &[vec![1, 8, 10, 10], vec![16, 8, 3, 3]], &[vec![1, 16, 8, 8]]);
        assert_eq!(p.kernel, vec![3, 3]);
        assert_eq!((p.channels_in, p.channels_out), (8, 16));
        assert_eq!(flops, 2 * 16 * 8 * 8 * 8 * 9);
    }
}
