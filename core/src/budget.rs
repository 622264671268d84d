//! A model's memory cost, known before it is paid. A 71-byte file can
//! declare an input of 40 GB, and a 126-byte one a `ConstantOfShape` of
//! half a gigabyte: tract would allocate them while inferring shapes or
//! building random inputs, and an allocation failure aborts the process.
//!
//! Two checks, both with arithmetic that cannot overflow:
//! - [`check_proto`], before tract sees the file: the declared inputs (with
//!   their overrides), the initializers and constants, the outputs of the
//!   ops that make big tensors from small constant inputs
//!   (`ConstantOfShape`, `Expand`, `Tile`, `Range`, `Resize`/`Upsample`),
//!   and the shapes that follow from those through broadcasting,
//!   element-wise, `MatMul` and `Concat` nodes (which tract folds when
//!   their inputs are constants). A size only tract's own inference finds
//!   (a shape computed by arithmetic, say) is caught once inferred, or by
//!   the handheld's sandbox if tract allocates it first.
//! - [`check_graph`], once every tensor's shape is inferred: each tensor
//!   and the working set (every tensor of the graph at once, an upper bound
//!   of what running it holds).
//!
//! A refusal ([`Error::TooLarge`]) names the tensor and the limit.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use tract_onnx::pb;
use tract_onnx::pb::tensor_shape_proto::dimension::Value as Dim;

use crate::error::{Error, Result};
use crate::graph::LayerGraph;
use crate::model::InputShapes;

/// How much memory a model may cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelLimits {
    /// Largest single tensor (bytes).
    pub max_tensor_bytes: u64,
    /// Largest working set: every tensor of the graph (bytes).
    pub max_working_bytes: u64,
}

/// The process's default limits (see [`ModelLimits::set_default`]).
static DEFAULT_TENSOR: AtomicU64 = AtomicU64::new(ModelLimits::TENSOR_BYTES);
static DEFAULT_WORKING: AtomicU64 = AtomicU64::new(ModelLimits::WORKING_BYTES);

impl Default for ModelLimits {
    /// The process's defaults: at first 500 MiB per tensor and 4 GiB in
    /// all, above any model the zoo or the wheels ship (VGG-19's largest
    /// weight is 392 MiB), far below what aborts a phone or a watch.
    fn default() -> Self {
        ModelLimits {
            max_tensor_bytes: DEFAULT_TENSOR.load(Ordering::Relaxed),
            max_working_bytes: DEFAULT_WORKING.load(Ordering::Relaxed),
        }
    }
}

impl ModelLimits {
    /// The first default per tensor: 500 MiB.
    pub const TENSOR_BYTES: u64 = 500 << 20;
    /// The first default working set: 4 GiB.
    pub const WORKING_BYTES: u64 = 4 << 30;

    /// Sets what [`ModelLimits::default`] returns in this process (a
    /// command-line tool's `--max-tensor-mb`, say), so that every model
    /// loaded without limits of its own is held to them.
    pub fn set_default(limits: ModelLimits) {
        DEFAULT_TENSOR.store(limits.max_tensor_bytes, Ordering::Relaxed);
        DEFAULT_WORKING.store(limits.max_working_bytes, Ordering::Relaxed);
    }

    fn tensor(&self, name: &str, bytes: Option<u64>) -> Result<()> {
        match bytes {
            Some(b) if b <= self.max_tensor_bytes => Ok(()),
            _ => {
                Err(Error::TooLarge { what: format!("tensor '{name}'"), bytes, limit: self.max_tensor_bytes })
            }
        }
    }
}

/// Bytes of one element of ONNX data type `t` (8 for types we do not
/// know: a bound, never an underestimate of the common ones).
fn elem_bytes(t: i32) -> u64 {
    use pb::tensor_proto::DataType as D;
    match D::try_from(t) {
        Ok(D::Uint8 | D::Int8 | D::Bool) => 1,
        Ok(D::Uint16 | D::Int16 | D::Float16 | D::Bfloat16) => 2,
        Ok(D::Float | D::Int32 | D::Uint32) => 4,
        Ok(D::Complex128) => 16,
        _ => 8,
    }
}

/// `n · d₁ · d₂ ...`, or `None` when it overflows.
fn product(n: u64, dims: impl IntoIterator<Item = u64>) -> Option<u64> {
    dims.into_iter().try_fold(n, |a, d| a.checked_mul(d))
}

/// What the pre-pass knows of a tensor: its shape and element size, and
/// its values when it is a small integer constant (a shape, repeats).
#[derive(Clone, Debug, Default)]
struct Known {
    shape: Option<Vec<u64>>,
    elem: u64,
    ints: Option<Vec<i64>>,
}

/// A small integer tensor's values (at most 64), from its typed or raw data.
fn int_values(t: &pb::TensorProto) -> Option<Vec<i64>> {
    use pb::tensor_proto::DataType as D;
    let n = product(1, t.dims.iter().map(|&d| d.max(0) as u64))?;
    if n > 64 {
        return None;
    }
    let v: Vec<i64> = match D::try_from(t.data_type).ok()? {
        D::Int64 if !t.int64_data.is_empty() => t.int64_data.clone(),
        D::Int64 => {
            t.raw_data.chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().unwrap_or([0; 8]))).collect()
        }
        D::Int32 if !t.int32_data.is_empty() => t.int32_data.iter().map(|&v| v as i64).collect(),
        D::Int32 => t
            .raw_data
            .chunks_exact(4)
            .map(|b| i32::from_le_bytes(b.try_into().unwrap_or([0; 4])) as i64)
            .collect(),
        D::Float if !t.float_data.is_empty() => t.float_data.iter().map(|&v| v as i64).collect(),
        D::Float => t
            .raw_data
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap_or([0; 4])) as i64)
            .collect(),
        _ => return None,
    };
    (v.len() as u64 == n).then_some(v)
}

fn known_tensor(t: &pb::TensorProto) -> Known {
    Known {
        shape: Some(t.dims.iter().map(|&d| d.max(0) as u64).collect()),
        elem: elem_bytes(t.data_type),
        ints: int_values(t),
    }
}

/// A shape from a constant's values: each a dimension (negative or zero
/// dimensions make an empty or invalid tensor, which costs nothing here).
fn as_dims(v: &[i64]) -> Vec<u64> {
    v.iter().map(|&d| d.max(0) as u64).collect()
}

/// ONNX broadcasting of two shapes (right-aligned, the larger of each pair).
fn broadcast(a: &[u64], b: &[u64]) -> Vec<u64> {
    let n = a.len().max(b.len());
    let at = |s: &[u64], i: usize| if i + s.len() >= n { s[i + s.len() - n] } else { 1 };
    (0..n).map(|i| at(a, i).max(at(b, i))).collect()
}

/// Element-wise ops whose output takes the broadcast of their inputs' shapes.
const BROADCASTING: [&str; 17] = [
    "Add", "Sub", "Mul", "Div", "Pow", "Sum", "Max", "Min", "Mean", "Where", "And", "Or", "Xor", "Equal",
    "Less", "Greater", "Mod",
];

/// Ops whose output has their first input's shape.
const UNARY: [&str; 20] = [
    "Relu",
    "Cos",
    "Sin",
    "Exp",
    "Log",
    "Neg",
    "Abs",
    "Sigmoid",
    "Tanh",
    "Identity",
    "Sqrt",
    "Floor",
    "Ceil",
    "Erf",
    "Softplus",
    "Not",
    "Sign",
    "Reciprocal",
    "LeakyRelu",
    "Elu",
];

/// Checks what the file declares before tract parses it: every graph
/// input (at its override), initializer and constant, and the outputs of
/// the ops that expand small constant inputs into big tensors, against
/// `limits.max_tensor_bytes`; their sum against the working set.
pub fn check_proto(proto: &pb::ModelProto, overrides: &InputShapes, limits: &ModelLimits) -> Result<()> {
    let Some(graph) = proto.graph.as_ref() else { return Ok(()) };
    let mut known: HashMap<&str, Known> = HashMap::new();
    let mut total: u64 = 0;
    let mut count = |name: &str, k: &Known| -> Result<()> {
        let Some(shape) = &k.shape else { return Ok(()) };
        let bytes = product(k.elem, shape.iter().copied());
        limits.tensor(name, bytes)?;
        total = total.saturating_add(bytes.unwrap_or(u64::MAX));
        if total > limits.max_working_bytes {
            return Err(Error::TooLarge {
                what: format!("the model's declared tensors (at '{name}')"),
                bytes: Some(total),
                limit: limits.max_working_bytes,
            });
        }
        Ok(())
    };
    for t in &graph.initializer {
        let k = known_tensor(t);
        count(&t.name, &k)?;
        known.insert(&t.name, k);
    }
    let initializers: std::collections::HashSet<&str> =
        graph.initializer.iter().map(|t| t.name.as_str()).collect();
    for input in graph.input.iter().filter(|i| !initializers.contains(i.name.as_str())) {
        let Some(pb::type_proto::Value::TensorType(t)) = input.r#type.as_ref().and_then(|t| t.value.as_ref())
        else {
            continue;
        };
        let declared = t.shape.as_ref().map(|s| {
            s.dim
                .iter()
                .map(|d| match &d.value {
                    Some(Dim::DimValue(v)) if *v > 0 => Some(*v as u64),
                    Some(Dim::DimParam(sym)) => overrides.dim(sym).map(|v| v as u64),
                    _ => None,
                })
                .collect::<Option<Vec<u64>>>()
        });
        let shape = match overrides.shape(&input.name) {
            Some(s) => Some(s.iter().map(|&d| d as u64).collect()),
            None => declared.flatten(),
        };
        let k = Known { shape, elem: elem_bytes(t.elem_type), ints: None };
        count(&input.name, &k)?;
        known.insert(&input.name, k);
    }
    for node in &graph.node {
        if !node.domain.is_empty() && node.domain != "ai.onnx" {
            continue;
        }
        let Some(output) = node.output.first() else { continue };
        let input = |i: usize| node.input.get(i).and_then(|n| known.get(n.as_str()));
        let attr = |name: &str| node.attribute.iter().find(|a| a.name == name);
        let k = match node.op_type.as_str() {
            "Constant" => match attr("value").and_then(|a| a.t.as_ref()) {
                Some(t) => known_tensor(t),
                None => continue,
            },
            "ConstantOfShape" => {
                let Some(dims) = input(0).and_then(|k| k.ints.clone()) else { continue };
                let elem = attr("value").and_then(|a| a.t.as_ref()).map_or(4, |t| elem_bytes(t.data_type));
                Known { shape: Some(as_dims(&dims)), elem, ints: None }
            }
            "Expand" => {
                let Some(dims) = input(1).and_then(|k| k.ints.clone()) else { continue };
                let (from, elem) = input(0).map_or((None, 4), |k| (k.shape.clone(), k.elem));
                Known { shape: Some(broadcast(&from.unwrap_or_default(), &as_dims(&dims))), elem, ints: None }
            }
            "Tile" => {
                let (Some(from), Some(reps)) = (input(0), input(1).and_then(|k| k.ints.clone())) else {
                    continue;
                };
                let Some(shape) = &from.shape else { continue };
                if shape.len() != reps.len() {
                    continue;
                }
                let tiled = shape.iter().zip(as_dims(&reps)).map(|(&d, r)| d.saturating_mul(r)).collect();
                Known { shape: Some(tiled), elem: from.elem, ints: None }
            }
            "Range" => {
                let one = |i: usize| input(i).and_then(|k| k.ints.as_ref()).and_then(|v| v.first().copied());
                let (Some(start), Some(limit), Some(delta)) = (one(0), one(1), one(2)) else { continue };
                if delta == 0 {
                    continue;
                }
                let n = ((limit as i128 - start as i128) / delta as i128).max(0) as u64;
                Known { shape: Some(vec![n]), elem: input(0).map_or(8, |k| k.elem), ints: None }
            }
            "Resize" | "Upsample" => {
                let Some(from) = input(0) else { continue };
                let sizes = input(3).and_then(|k| k.ints.clone()).filter(|s| !s.is_empty());
                match (sizes, &from.shape) {
                    (Some(sizes), _) => Known { shape: Some(as_dims(&sizes)), elem: from.elem, ints: None },
                    // Float scales (read as integers: a lower bound, exact for whole factors).
                    (None, Some(shape)) => {
                        let scales =
                            input(if node.op_type == "Resize" { 2 } else { 1 }).and_then(|k| k.ints.clone());
                        let Some(scales) = scales.filter(|s| s.len() == shape.len()) else { continue };
                        let scaled =
                            shape.iter().zip(as_dims(&scales)).map(|(&d, s)| d.saturating_mul(s)).collect();
                        Known { shape: Some(scaled), elem: from.elem, ints: None }
                    }
                    _ => continue,
                }
            }
            // Shapes that carry through: broadcasting element-wise ops
            // (folded by tract when their inputs are constants), unary
            // ops, MatMul and Concat, where every input's shape is known.
            op if BROADCASTING.contains(&op) => {
                let shapes: Option<Vec<&Vec<u64>>> =
                    (0..node.input.len()).map(|i| input(i).and_then(|k| k.shape.as_ref())).collect();
                let Some(shapes) = shapes.filter(|s| !s.is_empty()) else { continue };
                let shape = shapes.iter().fold(vec![], |acc, s| broadcast(&acc, s));
                let elem = (0..node.input.len()).filter_map(|i| input(i).map(|k| k.elem)).max().unwrap_or(4);
                Known { shape: Some(shape), elem, ints: None }
            }
            op if UNARY.contains(&op) => match input(0) {
                Some(k) => Known { shape: k.shape.clone(), elem: k.elem, ints: None },
                None => continue,
            },
            "MatMul" => {
                let (Some(a), Some(b)) =
                    (input(0).and_then(|k| k.shape.clone()), input(1).and_then(|k| k.shape.clone()))
                else {
                    continue;
                };
                let (Some(&m), Some(&n)) = (a.iter().rev().nth(1).or(a.last()), b.last()) else { continue };
                let batch = broadcast(&a[..a.len().saturating_sub(2)], &b[..b.len().saturating_sub(2)]);
                let shape = batch.into_iter().chain([m, n]).collect();
                Known { shape: Some(shape), elem: input(0).map_or(4, |k| k.elem), ints: None }
            }
            "Concat" => {
                let shapes: Option<Vec<Vec<u64>>> =
                    (0..node.input.len()).map(|i| input(i).and_then(|k| k.shape.clone())).collect();
                let Some(shapes) = shapes.filter(|s| !s.is_empty()) else { continue };
                // A bound: every input's elements, laid end to end.
                let n = shapes
                    .iter()
                    .map(|s| product(1, s.iter().copied()).unwrap_or(u64::MAX))
                    .fold(0u64, u64::saturating_add);
                Known { shape: Some(vec![n]), elem: input(0).map_or(4, |k| k.elem), ints: None }
            }
            _ => continue,
        };
        count(output, &k)?;
        known.insert(output, k);
    }
    Ok(())
}

/// Checks every tensor tract inferred (constants, inputs, intermediates,
/// outputs) against `limits`, and their sum as the working set. Returns
/// the working set's bytes.
pub fn check_graph(graph: &LayerGraph, limits: &ModelLimits) -> Result<u64> {
    let mut total: u64 = 0;
    for t in graph.tensors() {
        limits.tensor(&t.name, Some(t.bytes))?;
        total = total.saturating_add(t.bytes);
    }
    if total > limits.max_working_bytes {
        return Err(Error::TooLarge {
            what: "the model's working set (every tensor at once)".into(),
            bytes: Some(total),
            limit: limits.max_working_bytes,
        });
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_broadcast_right_aligned() {
        assert_eq!(broadcast(&[3, 1], &[2, 1, 4]), vec![2, 3, 4]);
        assert_eq!(broadcast(&[], &[5]), vec![5]);
        assert_eq!(product(4, [1 << 40, 1 << 40]), None);
        assert_eq!(product(4, [2, 3]), Some(24));
    }
}
