//! The quantum of a quantized model's tensors: one step of the scale a
//! tensor is quantized to, or was dequantized from, so that a split check
//! can judge it in quanta as well as in float tolerance.
//!
//! A value that sits on a rounding boundary may land one step apart when
//! an engine evaluates the same ops in another order or fuses them
//! differently; one step is then the honest bound. A tensor has a quantum
//! when it is
//! - an int8 or uint8 tensor: one integer;
//! - the input of a `QuantizeLinear` (quantized next): that op's scale;
//! - the output of a `DequantizeLinear`: its scale.
//!
//! Per-axis scales give their largest. Other tensors (a float head after
//! integer matmuls, say) have none and are judged in float tolerance only.

use std::collections::HashMap;

use tract_onnx::pb;
use tract_onnx::prelude::DatumType;

use crate::model::Model;

/// The quantum of each tensor of `model` that has one, by name.
pub fn quanta(model: &Model) -> HashMap<String, f32> {
    let mut out = HashMap::new();
    let g = model.graph();
    for t in g.tensors() {
        if matches!(t.dtype, DatumType::I8 | DatumType::U8) {
            out.insert(t.name.clone(), 1.0);
        }
    }
    let Some(graph) = model.proto().graph.as_ref() else { return out };
    let scales: HashMap<&str, &pb::TensorProto> =
        graph.initializer.iter().map(|t| (t.name.as_str(), t)).collect();
    let scale_of = |node: &pb::NodeProto| -> Option<f32> {
        let t = scales.get(node.input.get(1)?.as_str())?;
        largest_f32(t)
    };
    for node in &graph.node {
        let tensor = match node.op_type.as_str() {
            "QuantizeLinear" => node.input.first(),
            "DequantizeLinear" => node.output.first(),
            _ => None,
        };
        let (Some(tensor), Some(scale)) = (tensor, scale_of(node)) else { continue };
        if tensor.is_empty() || !(scale.is_finite() && scale > 0.0) {
            continue;
        }
        let q = out.entry(tensor.clone()).or_insert(0.0);
        *q = q.max(scale);
    }
    out
}

/// The largest magnitude of a float32 initializer (raw or typed data).
fn largest_f32(t: &pb::TensorProto) -> Option<f32> {
    if t.data_type != pb::tensor_proto::DataType::Float as i32 {
        return None;
    }
    let values: Vec<f32> = if !t.raw_data.is_empty() {
        t.raw_data.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
    } else {
        t.float_data.clone()
    };
    values.iter().map(|v| v.abs()).reduce(f32::max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::InputShapes;

    #[test]
    fn quantized_tensors_get_their_scale_and_integers_one() {
        let model = Model::from_bytes(&tandem_models::tiny::qdq_softmax_onnx(), &InputShapes::none())
            .expect("the int8 softmax loads");
        let q = quanta(&model);
        // x is quantized at 1/16, softmax's output at 1/255; y is dequantized from it.
        assert_eq!(q.get("x"), Some(&(1.0 / 16.0)));
        assert_eq!(q.get("p"), Some(&(1.0 / 255.0)));
        assert_eq!(q.get("y"), Some(&(1.0 / 255.0)));
        assert_eq!(q.get("pq"), Some(&1.0));
    }
}
