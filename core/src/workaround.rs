//! Exact rewrites of ONNX patterns that tract 0.23.9 runs wrongly, applied
//! before a model is cut.
//!
//! **A softmax between int8 dequantize and quantize.** onnxruntime's static
//! quantizer writes `DequantizeLinear → Softmax → QuantizeLinear`. tract
//! folds a `DequantizeLinear → ops → QuantizeLinear` chain whose ops keep
//! every axis into a 256-entry lookup table, computed by running the ops on
//! the 256 possible values as one vector. A softmax keeps every axis but is
//! not element-wise, so the table is wrong: PP-OCR's direction classifier,
//! quantized, gives `[1, 1]` where onnxruntime gives `[0.133, 0.867]`.
//! Such a `DequantizeLinear` is rewritten as its definition,
//! `(Cast(x) − Cast(zero_point)) · scale`, which tract does not fold. Its
//! nodes carry [`UNFOLDED_DEQUANTIZE`] as their doc string, so that the
//! layer DAG still sees one dequantizer (recomputed by each half, the
//! integers crossing: [`crate::graph::LayerGraph::dequantizer`]).

use tract_onnx::pb;

/// The doc string of the nodes a rewritten `DequantizeLinear` becomes.
pub(crate) const UNFOLDED_DEQUANTIZE: &str = "tandem: an unfolded DequantizeLinear";

/// Ops that keep their input's axes but mix values along one of them.
const MIXING: [&str; 3] = ["Softmax", "LogSoftmax", "Hardmax"];

/// Whether `name` is an initializer of one value (a per-tensor scale; tract
/// dequantizes per-axis scales with `Sub` and `Mul` already, and folds
/// nothing).
fn scalar_initializer(graph: &pb::GraphProto, name: &str) -> bool {
    graph.initializer.iter().any(|t| t.name == name && t.dims.iter().product::<i64>() == 1)
}

/// Rewrites each `DequantizeLinear` with a per-tensor scale whose only
/// reader is a softmax into `Cast`, `Sub`, `Mul` (same output name, same
/// values). Returns how many.
pub(crate) fn unfold_dequantize_before_softmax(graph: &mut pb::GraphProto) -> usize {
    let readers = |name: &str, nodes: &[pb::NodeProto]| -> Vec<usize> {
        (0..nodes.len()).filter(|&i| nodes[i].input.iter().any(|n| n == name)).collect()
    };
    let outputs: Vec<String> = graph.output.iter().map(|o| o.name.clone()).collect();
    let mut rewritten = 0;
    let mut ix = 0;
    while ix < graph.node.len() {
        let node = &graph.node[ix];
        let out = node.output.first().cloned().unwrap_or_default();
        let mixes_next = node.op_type == "DequantizeLinear"
            && node.input.len() >= 2
            && !outputs.contains(&out)
            && scalar_initializer(graph, &node.input[1])
            && matches!(readers(&out, &graph.node)[..], [r] if MIXING.contains(&graph.node[r].op_type.as_str()));
        if !mixes_next {
            ix += 1;
            continue;
        }
        let node = graph.node.remove(ix);
        let base = if node.name.is_empty() { out.clone() } else { node.name.clone() };
        let cast = |name: String, input: &str, output: String| pb::NodeProto {
            op_type: "Cast".into(),
            name,
            input: vec![input.to_string()],
            output: vec![output],
            attribute: vec![pb::AttributeProto {
                name: "to".into(),
                r#type: pb::attribute_proto::AttributeType::Int as i32,
                i: pb::tensor_proto::DataType::Float as i64,
                ..Default::default()
            }],
            doc_string: UNFOLDED_DEQUANTIZE.into(),
            ..Default::default()
        };
        let binary = |op: &str, name: String, a: String, b: String, output: String| pb::NodeProto {
            op_type: op.into(),
            name,
            input: vec![a, b],
            output: vec![output],
            doc_string: UNFOLDED_DEQUANTIZE.into(),
            ..Default::default()
        };
        let x = format!("{base}/x_f32");
        let mut nodes = vec![cast(format!("{base}/cast"), &node.input[0], x.clone())];
        let centred = match node.input.get(2).filter(|z| !z.is_empty()) {
            Some(zero_point) => {
                let (z, c) = (format!("{base}/zero_point_f32"), format!("{base}/centred"));
                nodes.push(cast(format!("{base}/cast_zero_point"), zero_point, z.clone()));
                nodes.push(binary("Sub", format!("{base}/sub"), x, z, c.clone()));
                c
            }
            None => x,
        };
        nodes.push(binary("Mul", base, centred, node.input[1].clone(), out));
        let added = nodes.len();
        graph.node.splice(ix..ix, nodes);
        ix += added;
        rewritten += 1;
    }
    rewritten
}
