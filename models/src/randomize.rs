//! Replaces constant (`ConstantOfShape`) weights by seeded random ones.
//!
//! The ONNX "light" models store every weight as a `ConstantOfShape` node filled
//! with 0.02, so their outputs hardly depend on the input. This module rewrites
//! such a model so that each of those constants becomes an initializer with
//! sensible random values, chosen by the role of the tensor where it is used.

use std::collections::{HashMap, HashSet};

use anyhow::{anyhow, bail, Context, Result};
use prost::Message;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use tract_onnx::pb::{
    tensor_proto::DataType, AttributeProto, GraphProto, ModelProto, NodeProto, TensorProto,
};

use crate::builder::{float_output, uniform_bound, uniform_values, value_info};

/// How a constant tensor is used by the first non-constant node it reaches.
#[derive(Debug, Clone)]
struct Role {
    op: String,
    input: usize,
    attrs: Vec<AttributeProto>,
    /// The tensor's shape where it is used, when it could be followed.
    shape: Option<Vec<i64>>,
}

fn attr<'a>(attrs: &'a [AttributeProto], name: &str) -> Option<&'a AttributeProto> {
    attrs.iter().find(|a| a.name == name)
}

/// Values of an integer tensor (int64 or int32, raw or typed storage).
fn tensor_ints(t: &TensorProto) -> Result<Vec<i64>> {
    let dt = t.data_type;
    if dt == DataType::Int64 as i32 {
        if !t.raw_data.is_empty() {
            return Ok(t
                .raw_data
                .chunks_exact(8)
                .map(|c| {
                    let mut b = [0u8; 8];
                    b.copy_from_slice(c);
                    i64::from_le_bytes(b)
                })
                .collect());
        }
        return Ok(t.int64_data.clone());
    }
    if dt == DataType::Int32 as i32 {
        if !t.raw_data.is_empty() {
            return Ok(t
                .raw_data
                .chunks_exact(4)
                .map(|c| {
                    let mut b = [0u8; 4];
                    b.copy_from_slice(c);
                    i32::from_le_bytes(b) as i64
                })
                .collect());
        }
        return Ok(t.int32_data.iter().map(|&x| x as i64).collect());
    }
    bail!("tensor {:?} has data type {} where integers were expected", t.name, dt)
}

/// Integer values of a constant tensor, from an initializer or a `Constant` node.
fn const_ints(
    name: &str,
    inits: &HashMap<&str, &TensorProto>,
    producers: &HashMap<&str, &NodeProto>,
) -> Result<Vec<i64>> {
    if let Some(t) = inits.get(name) {
        return tensor_ints(t);
    }
    if let Some(n) = producers.get(name) {
        if n.op_type == "Constant" {
            if let Some(a) = attr(&n.attribute, "value").and_then(|a| a.t.as_ref()) {
                return tensor_ints(a);
            }
            if let Some(a) = attr(&n.attribute, "value_ints") {
                return Ok(a.ints.clone());
            }
            if let Some(a) = attr(&n.attribute, "value_int") {
                return Ok(vec![a.i]);
            }
        }
    }
    bail!("cannot evaluate constant integer tensor {name:?}")
}

/// Follows a shape through a constant-only op, when that is easy.
fn propagate_shape(
    node: &NodeProto,
    input: usize,
    shape: &[i64],
    opset: i64,
    inits: &HashMap<&str, &TensorProto>,
    producers: &HashMap<&str, &NodeProto>,
) -> Option<Vec<i64>> {
    let numel: i64 = shape.iter().product();
    match node.op_type.as_str() {
        "Identity" | "Dropout" | "Cast" if input == 0 => Some(shape.to_vec()),
        "Reshape" if input == 0 => {
            let target = const_ints(node.input.get(1)?, inits, producers).ok()?;
            let mut out: Vec<i64> = target
                .iter()
                .enumerate()
                .map(|(i, &d)| if d == 0 { shape.get(i).copied().unwrap_or(0) } else { d })
                .collect();
            let known: i64 = out.iter().filter(|&&d| d != -1).product();
            if let Some(p) = out.iter().position(|&d| d == -1) {
                out[p] = if known == 0 { 0 } else { numel / known };
            }
            (out.iter().product::<i64>() == numel).then_some(out)
        }
        "Unsqueeze" if input == 0 => {
            let axes = if opset >= 13 {
                const_ints(node.input.get(1)?, inits, producers).ok()?
            } else {
                attr(&node.attribute, "axes")?.ints.clone()
            };
            let rank = (shape.len() + axes.len()) as i64;
            let mut axes: Vec<i64> = axes.iter().map(|&a| if a < 0 { a + rank } else { a }).collect();
            axes.sort_unstable();
            let mut out = shape.to_vec();
            for a in axes {
                if a < 0 || a as usize > out.len() {
                    return None;
                }
                out.insert(a as usize, 1);
            }
            Some(out)
        }
        "Squeeze" if input == 0 => Some(shape.iter().copied().filter(|&d| d != 1).collect()),
        "Transpose" if input == 0 => {
            let perm = attr(&node.attribute, "perm")
                .map(|a| a.ints.clone())
                .unwrap_or_else(|| (0..shape.len() as i64).rev().collect());
            perm.iter().map(|&p| shape.get(p as usize).copied()).collect::<Option<Vec<i64>>>()
        }
        _ => None,
    }
}

/// What [`find_role`] needs to know about a graph.
struct GraphIndex<'a> {
    graph: &'a GraphProto,
    opset: i64,
    constant: HashSet<String>,
    consumers: HashMap<&'a str, Vec<(usize, usize)>>,
    inits: HashMap<&'a str, &'a TensorProto>,
    producers: HashMap<&'a str, &'a NodeProto>,
}

/// The (op, input index) of the first non-constant node that uses `start`,
/// following it through constant-only nodes.
fn find_role(start: &str, start_shape: &[i64], ctx: &GraphIndex) -> Option<Role> {
    let GraphIndex { graph, opset, constant, consumers, inits, producers } = ctx;
    let opset = *opset;
    let mut queue = vec![(start.to_string(), Some(start_shape.to_vec()))];
    let mut seen = HashSet::new();
    while let Some((tensor, shape)) = queue.pop() {
        if !seen.insert(tensor.clone()) {
            continue;
        }
        let Some(uses) = consumers.get(tensor.as_str()) else {
            continue;
        };
        for &(n, i) in uses {
            let node = &graph.node[n];
            let all_const = node.input.iter().all(|x| x.is_empty() || constant.contains(x));
            if all_const {
                let next =
                    shape.as_deref().and_then(|s| propagate_shape(node, i, s, opset, inits, producers));
                for o in node.output.iter().filter(|o| !o.is_empty()) {
                    queue.push((o.clone(), next.clone()));
                }
            } else {
                return Some(Role {
                    op: node.op_type.clone(),
                    input: i,
                    attrs: node.attribute.clone(),
                    shape,
                });
            }
        }
    }
    None
}

/// The `(lo, hi)` bounds of uniform values for a tensor of `shape` (its own
/// shape) used as `role`.
fn bounds_for(role: Option<&Role>, shape: &[i64]) -> (f32, f32) {
    let he = |fan_in: i64| {
        let b = uniform_bound((2.0 / fan_in.max(1) as f32).sqrt());
        (-b, b)
    };
    let generic = |s: &[i64]| {
        if s.len() >= 2 {
            he(s[1..].iter().product())
        } else {
            (-0.05, 0.05)
        }
    };
    let Some(role) = role else {
        return generic(shape);
    };
    let used = role.shape.as_deref().unwrap_or(shape);
    let int_attr = |name: &str| attr(&role.attrs, name).map(|a| a.i);
    match (role.op.as_str(), role.input) {
        ("Conv", 1) | ("ConvTranspose", 1) => generic(used),
        ("Conv", 2) | ("ConvTranspose", 2) | ("Gemm", 2) => (-0.05, 0.05),
        ("Gemm", 1) => {
            if used.len() != 2 {
                return generic(used);
            }
            let trans_b = int_attr("transB").unwrap_or(0) != 0;
            he(if trans_b { used[1] } else { used[0] })
        }
        ("Gemm", 0) => {
            if used.len() != 2 {
                return generic(used);
            }
            let trans_a = int_attr("transA").unwrap_or(0) != 0;
            he(if trans_a { used[0] } else { used[1] })
        }
        ("MatMul", 1) if used.len() >= 2 => he(used[used.len() - 2]),
        ("BatchNormalization", 1) | ("BatchNormalization", 4) => (0.5, 1.5),
        ("BatchNormalization", 2) | ("BatchNormalization", 3) => (-0.1, 0.1),
        ("InstanceNormalization", 1) | ("LayerNormalization", 1) => (0.5, 1.5),
        ("InstanceNormalization", 2) | ("LayerNormalization", 2) => (-0.1, 0.1),
        ("Mul", _) | ("Div", _) => (0.5, 1.5),
        ("Add", _) | ("Sum", _) | ("Sub", _) => (-0.1, 0.1),
        ("PRelu", 1) => (0.0, 0.25),
        ("LSTM", 1..=3) | ("GRU", 1..=3) | ("RNN", 1..=3) => {
            let h = int_attr("hidden_size").unwrap_or(64).max(1);
            let k = 1.0 / (h as f32).sqrt();
            (-k, k)
        }
        _ => generic(used),
    }
}

/// Replace every ConstantOfShape whose output feeds a weight/bias/BN input
/// (all constant-only subgraphs) by a seeded random initializer of the same
/// shape, with sensible scales (conv/gemm weights He-scaled by fan-in, biases
/// small, BN var/scale in [0.5,1.5]).
///
/// Only float `ConstantOfShape` nodes whose shape input is constant (an
/// initializer or a `Constant`) are replaced; the role of each (conv weight,
/// gemm weight, bias, BN scale/bias/mean/var, Mul/Add operand...) is that of the
/// first non-constant node it reaches through constant-only nodes (Unsqueeze,
/// Reshape...). Shape initializers left unused are dropped. For IR versions
/// below 4, the new initializers are also listed as graph inputs (after the
/// existing ones), as that IR requires.
///
/// Then, if the model has BatchNormalization nodes, their running mean and
/// variance (random or original) are replaced by the statistics measured on
/// one seeded uniform-[0, 1) input, as training would set them; without this,
/// random statistics let ResNet-like activations grow ~2× in variance at every
/// residual sum and the softmax saturates. The graph input stays the first
/// non-initializer input, and the model's structure is otherwise unchanged.
pub fn randomize_constant_weights(onnx_bytes: &[u8], seed: u64) -> Result<Vec<u8>> {
    let mut model = ModelProto::decode(onnx_bytes).context("decoding ONNX model")?;
    let opset = model
        .opset_import
        .iter()
        .find(|o| o.domain.is_empty() || o.domain == "ai.onnx")
        .map(|o| o.version)
        .unwrap_or(1);
    let ir_version = model.ir_version;
    let graph = model.graph.as_mut().ok_or_else(|| anyhow!("ONNX model has no graph"))?;

    let mut replacements: Vec<(usize, TensorProto)> = Vec::new();
    {
        let inits: HashMap<&str, &TensorProto> =
            graph.initializer.iter().map(|t| (t.name.as_str(), t)).collect();
        let mut producers: HashMap<&str, &NodeProto> = HashMap::new();
        let mut consumers: HashMap<&str, Vec<(usize, usize)>> = HashMap::new();
        for (n, node) in graph.node.iter().enumerate() {
            for o in node.output.iter().filter(|o| !o.is_empty()) {
                producers.insert(o.as_str(), node);
            }
            for (i, x) in node.input.iter().enumerate() {
                if !x.is_empty() {
                    consumers.entry(x.as_str()).or_default().push((n, i));
                }
            }
        }
        // Constant tensors: initializers, then outputs of nodes with only
        // constant inputs (ONNX nodes are topologically sorted).
        let mut constant: HashSet<String> = inits.keys().map(|s| s.to_string()).collect();
        for node in &graph.node {
            let random = node.op_type.starts_with("Random") || node.op_type == "Multinomial";
            if !random && node.input.iter().all(|x| x.is_empty() || constant.contains(x)) {
                constant.extend(node.output.iter().filter(|o| !o.is_empty()).cloned());
            }
        }

        let ctx = GraphIndex { graph, opset, constant, consumers, inits, producers };
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        for (n, node) in graph.node.iter().enumerate() {
            if node.op_type != "ConstantOfShape" || node.output.first().is_none_or(|o| o.is_empty()) {
                continue;
            }
            let Some(shape_name) = node.input.first() else {
                continue;
            };
            if !ctx.constant.contains(shape_name) {
                continue;
            }
            let value_type = attr(&node.attribute, "value")
                .and_then(|a| a.t.as_ref())
                .map(|t| t.data_type)
                .unwrap_or(DataType::Float as i32);
            if value_type != DataType::Float as i32 {
                continue;
            }
            let shape = const_ints(shape_name, &ctx.inits, &ctx.producers)
                .with_context(|| format!("shape of ConstantOfShape node {:?}", node.name))?;
            if shape.iter().any(|&d| d < 0) {
                bail!("negative dimension in ConstantOfShape {:?}: {shape:?}", node.name);
            }
            let out = &node.output[0];
            let role = find_role(out, &shape, &ctx);
            let (lo, hi) = bounds_for(role.as_ref(), &shape);
            let numel = shape.iter().product::<i64>() as usize;
            let values = uniform_values(&mut rng, numel, lo, hi);
            replacements.push((n, crate::builder::f32_tensor(out, &shape, &values)));
        }
    }

    // Apply: drop the nodes, add the initializers.
    let removed: HashSet<usize> = replacements.iter().map(|(n, _)| *n).collect();
    let shape_inputs: HashSet<String> =
        removed.iter().filter_map(|&n| graph.node[n].input.first().cloned()).collect();
    let nodes = std::mem::take(&mut graph.node);
    graph.node =
        nodes.into_iter().enumerate().filter(|(n, _)| !removed.contains(n)).map(|(_, node)| node).collect();
    let listed_inputs: HashSet<String> = graph.input.iter().map(|i| i.name.clone()).collect();
    for (_, t) in replacements {
        if ir_version < 4 && !listed_inputs.contains(&t.name) {
            graph.input.push(value_info(&t.name, DataType::Float, &t.dims));
        }
        graph.initializer.push(t);
    }

    // Drop the shape initializers that nothing uses any more.
    let mut used: HashSet<String> = graph.node.iter().flat_map(|n| n.input.iter().cloned()).collect();
    used.extend(graph.output.iter().map(|o| o.name.clone()));
    let unused: HashSet<String> = graph
        .initializer
        .iter()
        .filter(|t| shape_inputs.contains(&t.name) && !used.contains(&t.name))
        .map(|t| t.name.clone())
        .collect();
    graph.initializer.retain(|t| !unused.contains(&t.name));
    graph.input.retain(|i| !unused.contains(&i.name));

    calibrate_batch_norms(&mut model, seed).context("calibrating BatchNormalization statistics")?;
    Ok(model.encode_to_vec())
}

/// The variance floor, relative to the mean variance over a layer's channels,
/// so that channels that are dead on the calibration input do not blow up.
const VAR_FLOOR: f32 = 0.01;

/// Sets every BatchNormalization's running mean and variance to the statistics
/// of its input on one seeded calibration input, as training would: each BN
/// then really normalizes, and activations keep a sensible scale through deep
/// and residual networks (random "running" statistics let ResNet activations
/// grow by 2× in variance at each residual sum, saturating the softmax).
///
/// The statistics are measured in a single tract run of a calibration graph in
/// which each BN normalizes with the statistics of its actual input (computed
/// by ReduceMean over batch and spatial axes); writing them back makes the
/// inference graph reproduce that run on the calibration input. Variances are
/// floored at [`VAR_FLOOR`] × the layer's mean variance.
///
/// Skipped (`Ok(false)`) when the model has no BatchNormalization or an input
/// that is not float32.
fn calibrate_batch_norms(model: &mut ModelProto, seed: u64) -> Result<bool> {
    use tract_onnx::pb::{tensor_shape_proto::dimension, type_proto};
    use tract_onnx::prelude::*;

    let opset = model
        .opset_import
        .iter()
        .find(|o| o.domain.is_empty() || o.domain == "ai.onnx")
        .map(|o| o.version)
        .unwrap_or(1);
    let ir_version = model.ir_version;
    let graph = model.graph.as_ref().ok_or_else(|| anyhow!("ONNX model has no graph"))?;
    let inits: HashMap<&str, &TensorProto> = graph.initializer.iter().map(|t| (t.name.as_str(), t)).collect();
    let bns: Vec<usize> = graph
        .node
        .iter()
        .enumerate()
        .filter(|(_, n)| {
            n.op_type == "BatchNormalization"
                && n.input.len() == 5
                && n.output.iter().filter(|o| !o.is_empty()).count() == 1
                && inits.contains_key(n.input[1].as_str())
        })
        .map(|(i, _)| i)
        .collect();
    if bns.is_empty() {
        return Ok(false);
    }

    // Calibration inputs: seeded uniform [0, 1), unknown dims -> 1.
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xca11_b4a7e);
    let mut inputs: TVec<TValue> = tvec!();
    for i in graph.input.iter().filter(|i| !inits.contains_key(i.name.as_str())) {
        let Some(type_proto::Value::TensorType(tt)) = i.r#type.as_ref().and_then(|t| t.value.as_ref()) else {
            return Ok(false);
        };
        if tt.elem_type != DataType::Float as i32 {
            return Ok(false);
        }
        let shape: Vec<usize> = tt
            .shape
            .as_ref()
            .map(|s| {
                s.dim
                    .iter()
                    .map(|d| match d.value {
                        Some(dimension::Value::DimValue(v)) if v > 0 => v as usize,
                        _ => 1,
                    })
                    .collect()
            })
            .unwrap_or_default();
        let n = shape.iter().product();
        let values = uniform_values(&mut rng, n, 0.0, 1.0);
        inputs.push(Tensor::from_shape(&shape, &values)?.into_tvalue());
    }

    // The calibration graph.
    let mut calib = model.clone();
    let cg = calib.graph.as_mut().ok_or_else(|| anyhow!("ONNX model has no graph"))?;
    let bn_set: HashSet<usize> = bns.iter().copied().collect();
    let mut cb = CalibGraph { opset, nodes: Vec::new(), inits: Vec::new() };
    let mut stat_outputs: Vec<(usize, String, String)> = Vec::new();
    for (idx, node) in std::mem::take(&mut cg.node).into_iter().enumerate() {
        if bn_set.contains(&idx) {
            let c = inits[node.input[1].as_str()].dims.iter().product::<i64>();
            let (m, v) = cb.normalize(idx, &node, c)?;
            stat_outputs.push((idx, m, v));
        } else {
            cb.nodes.push(node);
        }
    }
    cg.node = cb.nodes;
    if ir_version < 4 {
        for t in &cb.inits {
            let et = DataType::try_from(t.data_type).unwrap_or(DataType::Float);
            cg.input.push(value_info(&t.name, et, &t.dims));
        }
    }
    cg.initializer.extend(cb.inits);
    cg.output = stat_outputs.iter().flat_map(|(_, m, v)| [float_output(m), float_output(v)]).collect();

    let plan = tract_onnx::onnx()
        .model_for_proto_model(&calib)
        .context("loading the BN calibration graph in tract")?
        .into_optimized()
        .context("optimizing the BN calibration graph")?
        .into_runnable()?;
    let outputs = plan.run(inputs).context("running the BN calibration graph")?;
    drop(plan);

    // Write the statistics back as new initializers.
    let graph = model.graph.as_mut().ok_or_else(|| anyhow!("ONNX model has no graph"))?;
    let mut old: HashSet<String> = HashSet::new();
    for (k, (idx, _, _)) in stat_outputs.iter().enumerate() {
        let mean = outputs[2 * k].try_as_plain_ram()?.as_slice::<f32>()?.to_vec();
        let var = outputs[2 * k + 1].try_as_plain_ram()?.as_slice::<f32>()?.to_vec();
        if mean.iter().chain(&var).any(|x| !x.is_finite()) {
            bail!("non-finite BN statistics at node #{idx}");
        }
        let node = &mut graph.node[*idx];
        let c = mean.len() as i64;
        let mname = format!("__tandem_bn{idx}_mean");
        let vname = format!("__tandem_bn{idx}_var");
        old.insert(std::mem::replace(&mut node.input[3], mname.clone()));
        old.insert(std::mem::replace(&mut node.input[4], vname.clone()));
        for (name, values) in [(mname, mean), (vname, var)] {
            if ir_version < 4 {
                graph.input.push(value_info(&name, DataType::Float, &[c]));
            }
            graph.initializer.push(crate::builder::f32_tensor(&name, &[c], &values));
        }
    }
    let used: HashSet<String> = graph
        .node
        .iter()
        .flat_map(|n| n.input.iter().cloned())
        .chain(graph.output.iter().map(|o| o.name.clone()))
        .collect();
    let unused: HashSet<String> = old.into_iter().filter(|n| !used.contains(n)).collect();
    graph.initializer.retain(|t| !unused.contains(&t.name));
    graph.input.retain(|i| !unused.contains(&i.name));
    Ok(true)
}

/// Accumulates the nodes of the BN calibration graph.
struct CalibGraph {
    opset: i64,
    nodes: Vec<NodeProto>,
    inits: Vec<TensorProto>,
}

impl CalibGraph {
    fn add(&mut self, op: &str, name: String, inputs: Vec<String>, attrs: Vec<AttributeProto>) -> String {
        self.nodes.push(NodeProto {
            name: name.clone(),
            op_type: op.to_string(),
            input: inputs,
            output: vec![name.clone()],
            attribute: attrs,
            ..Default::default()
        });
        name
    }

    fn reduce_mean(&mut self, name: String, x: String, axes: &[i64]) -> String {
        if self.opset >= 18 {
            let a = format!("{name}_axes");
            self.inits.push(crate::builder::i64_tensor(&a, &[axes.len() as i64], axes));
            self.add("ReduceMean", name, vec![x, a], vec![])
        } else {
            self.add("ReduceMean", name, vec![x], vec![crate::builder::attr_ints("axes", axes)])
        }
    }

    /// Replaces BN node `idx` (with `c` channels) by a normalization with the
    /// statistics of its input; returns the names of those statistics
    /// (mean and floored variance, each of shape [1, c, 1]).
    fn normalize(&mut self, idx: usize, node: &NodeProto, c: i64) -> Result<(String, String)> {
        let p = |s: &str| format!("__tandem_calib{idx}_{s}");
        let eps = attr(&node.attribute, "epsilon").map(|a| a.f).unwrap_or(1e-5);
        self.inits.push(crate::builder::i64_tensor(&p("shape3"), &[3], &[0, c, -1]));
        self.inits.push(crate::builder::i64_tensor(&p("cshape"), &[3], &[1, c, 1]));
        self.inits.push(crate::builder::f32_tensor(&p("eps"), &[], &[eps]));
        self.inits.push(crate::builder::f32_tensor(&p("floor"), &[], &[VAR_FLOOR]));
        let x = node.input[0].clone();
        // [N, C, spatial...] -> [N, C, S]
        let xr = self.add("Reshape", p("xr"), vec![x.clone(), p("shape3")], vec![]);
        let m = self.reduce_mean(p("mean"), xr.clone(), &[0, 2]);
        let d = self.add("Sub", p("d"), vec![xr, m.clone()], vec![]);
        let d2 = self.add("Mul", p("d2"), vec![d.clone(), d.clone()], vec![]);
        let v = self.reduce_mean(p("var_raw"), d2, &[0, 2]);
        let vm = self.reduce_mean(p("var_mean"), v.clone(), &[0, 1, 2]);
        let fl = self.add("Mul", p("var_floor"), vec![vm, p("floor")], vec![]);
        let v = self.add("Max", p("var"), vec![v, fl], vec![]);
        let ve = self.add("Add", p("var_eps"), vec![v.clone(), p("eps")], vec![]);
        let sd = self.add("Sqrt", p("std"), vec![ve], vec![]);
        let nrm = self.add("Div", p("norm"), vec![d, sd], vec![]);
        let sc = self.add("Reshape", p("scale3"), vec![node.input[1].clone(), p("cshape")], vec![]);
        let bi = self.add("Reshape", p("bias3"), vec![node.input[2].clone(), p("cshape")], vec![]);
        let y = self.add("Mul", p("scaled"), vec![nrm, sc], vec![]);
        let y = self.add("Add", p("shifted"), vec![y, bi], vec![]);
        let xs = self.add("Shape", p("xshape"), vec![x], vec![]);
        let y_name = node
            .output
            .iter()
            .find(|o| !o.is_empty())
            .cloned()
            .ok_or_else(|| anyhow!("BatchNormalization without output"))?;
        self.nodes.push(NodeProto {
            name: p("y"),
            op_type: "Reshape".to_string(),
            input: vec![y, xs],
            output: vec![y_name],
            ..Default::default()
        });
        Ok((m, v))
    }
}
