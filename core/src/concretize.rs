//! Before a model is cut: every symbolic dimension bound (input-shape
//! overrides, `--dim` values), stale shape annotations dropped, and shape
//! computations folded into constants, so that both halves of any cut see
//! one concrete graph.
//!
//! Real exports carry their dynamic axes (`batch`, `height`, ...) in
//! intermediate and output annotations too; once the inputs are concrete,
//! those annotations contradict tract's inference (`Impossible to unify
//! Sym(batch) with Val(1)`), so they go. PyTorch's recurrent exports build
//! their initial state from the input's shape (`Shape → Gather → Concat →
//! ConstantOfShape`); a cut could separate the `Shape` from the rest, leaving
//! the suffix a variable shape. With concrete inputs a `Shape` (or `Size`)
//! is a constant: it becomes a `Constant` node, and the chain below it
//! becomes const nodes that every half recomputes.

use std::collections::HashSet;

use tract_onnx::pb;
use tract_onnx::pb::tensor_shape_proto::{dimension::Value as Dim, Dimension};

use crate::graph::TensorFacts;
use crate::model::InputShapes;

/// The mutable dimensions of a value's tensor type, if it has a shape.
fn dims_mut(v: &mut pb::ValueInfoProto) -> Option<&mut Vec<Dimension>> {
    let pb::type_proto::Value::TensorType(t) = v.r#type.as_mut()?.value.as_mut()?;
    t.shape.as_mut().map(|s| &mut s.dim)
}

fn concrete(d: &Dimension) -> bool {
    matches!(d.value, Some(Dim::DimValue(v)) if v > 0)
}

/// Declares each graph input at a concrete shape where it can (its override,
/// else its symbols bound by `shapes`' dims), and drops every intermediate
/// annotation and every output annotation that is not concrete.
pub(crate) fn bind_symbols(proto: &mut pb::ModelProto, shapes: &InputShapes) {
    let Some(graph) = proto.graph.as_mut() else { return };
    let initializers: HashSet<String> = graph.initializer.iter().map(|t| t.name.clone()).collect();
    for input in graph.input.iter_mut().filter(|i| !initializers.contains(&i.name)) {
        let over = shapes.shape(&input.name).map(<[usize]>::to_vec);
        let Some(dims) = dims_mut(input) else { continue };
        match over {
            Some(shape) => {
                *dims = shape
                    .iter()
                    .map(|&d| Dimension { value: Some(Dim::DimValue(d as i64)), ..Default::default() })
                    .collect();
            }
            None => {
                for d in dims.iter_mut() {
                    if let Some(Dim::DimParam(sym)) = &d.value {
                        if let Some(v) = shapes.dim(sym) {
                            d.value = Some(Dim::DimValue(v as i64));
                        }
                    }
                }
            }
        }
    }
    graph.value_info.clear();
    for output in &mut graph.output {
        let symbolic = dims_mut(output).is_some_and(|d| !d.iter().all(concrete));
        if symbolic {
            if let Some(pb::type_proto::Value::TensorType(t)) =
                output.r#type.as_mut().and_then(|t| t.value.as_mut())
            {
                t.shape = None;
            }
        }
    }
}

/// Replaces each `Shape` and `Size` node whose input has a known shape by
/// a `Constant` holding it. Returns how many were folded.
pub(crate) fn fold_shape_nodes(proto: &mut pb::ModelProto, facts: &TensorFacts) -> usize {
    let Some(graph) = proto.graph.as_mut() else { return 0 };
    let mut folded = 0;
    for node in &mut graph.node {
        if !node.domain.is_empty() && node.domain != "ai.onnx" {
            continue;
        }
        let (Some(input), Some(output)) = (node.input.first(), node.output.first()) else { continue };
        let Some((_, shape)) = facts.get(input) else { continue };
        let shape: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
        let tensor = match node.op_type.as_str() {
            "Shape" => {
                let rank = shape.len() as i64;
                let attr = |name: &str, default: i64| {
                    node.attribute.iter().find(|a| a.name == name).map_or(default, |a| a.i)
                };
                let clamp = |v: i64| if v < 0 { (v + rank).max(0) } else { v.min(rank) };
                let (start, end) = (clamp(attr("start", 0)), clamp(attr("end", rank)));
                let values: Vec<i64> = shape[start as usize..end.max(start) as usize].to_vec();
                pb::TensorProto {
                    dims: vec![values.len() as i64],
                    data_type: pb::tensor_proto::DataType::Int64 as i32,
                    int64_data: values,
                    ..Default::default()
                }
            }
            "Size" => {
                // A size that overflows is left to tract (and then refused by the budget).
                let Some(size) = shape.iter().try_fold(1i64, |a, &d| a.checked_mul(d)) else { continue };
                pb::TensorProto {
                    dims: vec![],
                    data_type: pb::tensor_proto::DataType::Int64 as i32,
                    int64_data: vec![size],
                    ..Default::default()
                }
            }
            _ => continue,
        };
        *node = pb::NodeProto {
            name: node.name.clone(),
            op_type: "Constant".into(),
            output: vec![output.clone()],
            attribute: vec![pb::AttributeProto {
                name: "value".into(),
                r#type: pb::attribute_proto::AttributeType::Tensor as i32,
                t: Some(tensor),
                ..Default::default()
            }],
            ..Default::default()
        };
        folded += 1;
    }
    folded
}
