//! Tiny hand-built ONNX models for doc tests, unit tests and error cases.

use prost::Message;
use tract_onnx::pb;

/// A small ONNX graph builder.
#[derive(Debug, Default)]
pub struct GraphBuilder {
    graph: pb::GraphProto,
    seed: u32,
}

impl GraphBuilder {
    /// An empty graph.
    pub fn new() -> Self {
        Self::default()
    }

    /// Declares a float input with `dims`; a negative dim becomes symbolic `N`.
    pub fn input(&mut self, name: &str, dims: &[i64]) -> &mut Self {
        self.graph.input.push(value_info(name, 1, dims));
        self
    }

    /// Declares a float output.
    pub fn output(&mut self, name: &str, dims: &[i64]) -> &mut Self {
        self.graph.output.push(value_info(name, 1, dims));
        self
    }

    /// Adds a float initializer filled with a deterministic pattern.
    pub fn weight(&mut self, name: &str, dims: &[i64]) -> &mut Self {
        let n: i64 = dims.iter().product();
        let data: Vec<f32> = (0..n)
            .map(|i| {
                self.seed = self.seed.wrapping_mul(1_103_515_245).wrapping_add(12_345 + i as u32);
                ((self.seed >> 16) % 200) as f32 / 100.0 - 1.0
            })
            .collect();
        self.graph.initializer.push(pb::TensorProto {
            name: name.into(),
            dims: dims.to_vec(),
            data_type: 1,
            float_data: data,
            ..Default::default()
        });
        self
    }

    /// Adds an int64 initializer.
    pub fn ints(&mut self, name: &str, values: &[i64]) -> &mut Self {
        self.graph.initializer.push(pb::TensorProto {
            name: name.into(),
            dims: vec![values.len() as i64],
            data_type: 7,
            int64_data: values.to_vec(),
            ..Default::default()
        });
        self
    }

    /// Adds a scalar float initializer.
    pub fn scalar(&mut self, name: &str, value: f32) -> &mut Self {
        self.graph.initializer.push(pb::TensorProto {
            name: name.into(),
            data_type: 1,
            float_data: vec![value],
            ..Default::default()
        });
        self
    }

    /// Adds a scalar int8 initializer (a quantization zero point).
    pub fn scalar_i8(&mut self, name: &str, value: i8) -> &mut Self {
        self.graph.initializer.push(pb::TensorProto {
            name: name.into(),
            data_type: 3,
            int32_data: vec![value as i32],
            ..Default::default()
        });
        self
    }

    /// Adds a node.
    pub fn node(&mut self, op: &str, name: &str, inputs: &[&str], outputs: &[&str]) -> &mut Self {
        self.graph.node.push(pb::NodeProto {
            op_type: op.into(),
            name: name.into(),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: outputs.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        });
        self
    }

    /// Sets an integer attribute on the last node added.
    pub fn int_attr(&mut self, name: &str, value: i64) -> &mut Self {
        if let Some(node) = self.graph.node.last_mut() {
            node.attribute.push(pb::AttributeProto {
                name: name.into(),
                r#type: pb::attribute_proto::AttributeType::Int as i32,
                i: value,
                ..Default::default()
            });
        }
        self
    }

    /// Sets a float tensor attribute on the last node added (a `Constant`'s
    /// `value`): `dims` and the values.
    pub fn tensor_attr(&mut self, name: &str, dims: &[i64], values: &[f32]) -> &mut Self {
        if let Some(node) = self.graph.node.last_mut() {
            node.attribute.push(pb::AttributeProto {
                name: name.into(),
                r#type: pb::attribute_proto::AttributeType::Tensor as i32,
                t: Some(pb::TensorProto {
                    dims: dims.to_vec(),
                    data_type: 1,
                    float_data: values.to_vec(),
                    ..Default::default()
                }),
                ..Default::default()
            });
        }
        self
    }

    /// Sets a graph attribute (an `If` branch, a `Scan` or `Loop` body) on
    /// the last node added: the graph `body` has built so far.
    pub fn graph_attr(&mut self, name: &str, body: &GraphBuilder) -> &mut Self {
        if let Some(node) = self.graph.node.last_mut() {
            node.attribute.push(pb::AttributeProto {
                name: name.into(),
                r#type: pb::attribute_proto::AttributeType::Graph as i32,
                g: Some(pb::GraphProto { name: name.into(), ..body.graph.clone() }),
                ..Default::default()
            });
        }
        self
    }

    /// Annotates an intermediate float tensor's shape (`value_info`), as
    /// exporters do; a negative dim becomes symbolic `N`.
    pub fn annotate(&mut self, name: &str, dims: &[i64]) -> &mut Self {
        self.graph.value_info.push(value_info(name, 1, dims));
        self
    }

    /// Encodes the model (opset 14).
    pub fn build(&self) -> Vec<u8> {
        pb::ModelProto {
            ir_version: 7,
            opset_import: vec![pb::OperatorSetIdProto { domain: String::new(), version: 14 }],
            producer_name: "tandem-testing".into(),
            graph: Some(pb::GraphProto { name: "test".into(), ..self.graph.clone() }),
            ..Default::default()
        }
        .encode_to_vec()
    }
}

fn value_info(name: &str, elem_type: i32, dims: &[i64]) -> pb::ValueInfoProto {
    use pb::tensor_shape_proto::{dimension::Value, Dimension};
    let dim = dims
        .iter()
        .map(|&d| Dimension {
            value: Some(if d < 0 { Value::DimParam("N".into()) } else { Value::DimValue(d) }),
            ..Default::default()
        })
        .collect();
    pb::ValueInfoProto {
        name: name.into(),
        r#type: Some(pb::TypeProto {
            value: Some(pb::type_proto::Value::TensorType(pb::type_proto::Tensor {
                elem_type,
                shape: Some(pb::TensorShapeProto { dim }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// x[1,4] → MatMul → Relu → MatMul → y[1,3]: a three-layer chain.
pub fn tiny_mlp_onnx() -> Vec<u8> {
    GraphBuilder::new()
        .input("x", &[1, 4])
        .weight("w1", &[4, 8])
        .weight("w2", &[8, 3])
        .node("MatMul", "fc1", &["x", "w1"], &["h"])
        .node("Relu", "relu1", &["h"], &["a"])
        .node("MatMul", "fc2", &["a", "w2"], &["y"])
        .output("y", &[1, 3])
        .build()
}

/// A diamond with a const subgraph: `b = x·w`, then two branches
/// (`Relu(b)`, `Sigmoid(b) + k` where `k = ConstantOfShape`), joined by Add.
pub fn tiny_diamond_onnx() -> Vec<u8> {
    let mut g = GraphBuilder::new();
    g.input("x", &[1, 6])
        .weight("w", &[6, 6])
        .ints("kshape", &[1, 6])
        .node("MatMul", "fc", &["x", "w"], &["b"])
        .node("ConstantOfShape", "k", &["kshape"], &["kval"])
        .node("Relu", "left", &["b"], &["l"])
        .node("Sigmoid", "right", &["b"], &["r0"])
        .node("Add", "shift", &["r0", "kval"], &["r"])
        .node("Add", "join", &["l", "r"], &["y"])
        .output("y", &[1, 6]);
    g.build()
}

/// A model using an op tract does not know.
pub fn unsupported_op_onnx() -> Vec<u8> {
    GraphBuilder::new()
        .input("x", &[1, 4])
        .node("Relu", "ok", &["x"], &["a"])
        .node("FrobnicateV7", "weird", &["a"], &["y"])
        .output("y", &[1, 4])
        .build()
}

/// The MLP with a symbolic batch dimension.
pub fn symbolic_mlp_onnx() -> Vec<u8> {
    GraphBuilder::new()
        .input("x", &[-1, 4])
        .weight("w1", &[4, 8])
        .node("MatMul", "fc1", &["x", "w1"], &["h"])
        .node("Relu", "relu1", &["h"], &["y"])
        .output("y", &[-1, 8])
        .build()
}

/// A PyTorch-style export with a dynamic batch `N`: the state added to the
/// first layer is built from the input's shape (`Shape → Gather → Concat →
/// ConstantOfShape`, as recurrent exports build their initial state), and
/// the symbol also sits in an intermediate annotation and the output's.
/// x[N,4] → MatMul → + zeros[N,8] → Relu → y[N,8].
pub fn shape_state_onnx() -> Vec<u8> {
    GraphBuilder::new()
        .input("x", &[-1, 4])
        .weight("w1", &[4, 8])
        .ints("first", &[0])
        .ints("width", &[8])
        .node("Shape", "shape", &["x"], &["x_shape"])
        .node("Gather", "batch", &["x_shape", "first"], &["n"])
        .node("Concat", "state_shape", &["n", "width"], &["h0_shape"])
        .int_attr("axis", 0)
        .node("ConstantOfShape", "h0", &["h0_shape"], &["h0"])
        .node("MatMul", "fc1", &["x", "w1"], &["h"])
        .annotate("h", &[-1, 8])
        .node("Add", "add_state", &["h", "h0"], &["a"])
        .annotate("a", &[-1, 8])
        .node("Relu", "relu", &["a"], &["y"])
        .output("y", &[-1, 8])
        .build()
}

/// Control flow tract runs, with subgraphs that read tensors of the
/// enclosing graph (as exporters write them):
/// - `a = Relu(x)`, `b = a · w` (element-wise);
/// - `If(sum(x) > 0)`: then `b + a`, else `b − a`; both branches read `a`
///   and `b` from outside and agree on shape;
/// - `Scan` over the rows of the `If`'s result: a running sum of
///   `row · a_row0`, where its body reads `scale` (computed outside);
/// - `y = rows + b`, and the scan's final state `h`.
///
/// x[2,3] → y[2,3], h[3].
pub fn control_flow_onnx() -> Vec<u8> {
    let mut then_branch = GraphBuilder::new();
    then_branch.node("Add", "then_add", &["b", "a"], &["then_out"]).output("then_out", &[2, 3]);
    let mut else_branch = GraphBuilder::new();
    else_branch.node("Sub", "else_sub", &["b", "a"], &["else_out"]).output("else_out", &[2, 3]);
    let mut body = GraphBuilder::new();
    body.input("h_in", &[3])
        .input("row", &[3])
        .node("Mul", "body_scale", &["row", "scale"], &["scaled"])
        .node("Add", "body_sum", &["h_in", "scaled"], &["h_out"])
        .node("Identity", "body_emit", &["h_out"], &["row_out"])
        .output("h_out", &[3])
        .output("row_out", &[3]);
    let mut g = GraphBuilder::new();
    g.input("x", &[2, 3])
        .weight("w", &[2, 3])
        .weight("h0", &[3])
        .node("Constant", "zero", &[], &["zero"])
        .tensor_attr("value", &[], &[0.0])
        .node("Relu", "relu", &["x"], &["a"])
        .node("Mul", "weigh", &["a", "w"], &["b"])
        .node("ReduceSum", "total", &["x"], &["s"])
        .int_attr("keepdims", 0)
        .node("Greater", "positive", &["s", "zero"], &["cond"])
        .node("Sigmoid", "squash", &["b"], &["sb"])
        .node("ReduceMean", "scale_of", &["sb"], &["scale"])
        .int_attr("keepdims", 0)
        .node("If", "branch", &["cond"], &["picked"])
        .graph_attr("then_branch", &then_branch)
        .graph_attr("else_branch", &else_branch)
        .node("Scan", "running_sum", &["h0", "picked"], &["h", "rows"])
        .int_attr("num_scan_inputs", 1)
        .graph_attr("body", &body)
        .node("Add", "join", &["rows", "b"], &["y"])
        .output("y", &[2, 3])
        .output("h", &[3]);
    g.build()
}

/// A `Loop` (ONNX control flow tract 0.23 does not run): refused, named.
pub fn loop_onnx() -> Vec<u8> {
    let mut body = GraphBuilder::new();
    body.input("i", &[])
        .input("cond_in", &[])
        .input("acc_in", &[1, 4])
        .node("Identity", "keep_going", &["cond_in"], &["cond_out"])
        .node("Relu", "step", &["acc_in"], &["acc_out"])
        .output("cond_out", &[])
        .output("acc_out", &[1, 4]);
    let mut g = GraphBuilder::new();
    g.input("x", &[1, 4])
        .ints("trips", &[3])
        .node("Relu", "before", &["x"], &["a"])
        .node("Loop", "repeat", &["trips", "", "a"], &["y"])
        .graph_attr("body", &body)
        .output("y", &[1, 4]);
    g.build()
}

/// An int8 QDQ softmax, as onnxruntime's static quantizer writes one:
/// `x → Q → DQ → Softmax → Q → DQ → y`, over the last axis of x[2,4]
/// (input scale 1/16, zero point −6; output scale 1/255, zero point −128).
pub fn qdq_softmax_onnx() -> Vec<u8> {
    GraphBuilder::new()
        .input("x", &[2, 4])
        .scalar("in_scale", 1.0 / 16.0)
        .scalar_i8("in_zero", -6)
        .scalar("out_scale", 1.0 / 255.0)
        .scalar_i8("out_zero", -128)
        .node("QuantizeLinear", "x_q", &["x", "in_scale", "in_zero"], &["xq"])
        .node("DequantizeLinear", "x_dq", &["xq", "in_scale", "in_zero"], &["xd"])
        .node("Softmax", "softmax", &["xd"], &["p"])
        .int_attr("axis", -1)
        .node("QuantizeLinear", "p_q", &["p", "out_scale", "out_zero"], &["pq"])
        .node("DequantizeLinear", "p_dq", &["pq", "out_scale", "out_zero"], &["y"])
        .output("y", &[2, 4])
        .build()
}

/// An int8 QDQ residual, as a QDQ export writes one: `h = x · w`, quantized
/// and dequantized (scale 1/32, zero point 3), its float read twice, by a
/// Relu and by the residual Add after it: `y = relu(hd) + hd`.
pub fn qdq_residual_onnx() -> Vec<u8> {
    let mut g = GraphBuilder::new();
    g.input("x", &[1, 8])
        .weight("w", &[8, 8])
        .scalar("scale", 1.0 / 32.0)
        .scalar_i8("zero", 3)
        .node("MatMul", "fc", &["x", "w"], &["h"])
        .node("QuantizeLinear", "h_q", &["h", "scale", "zero"], &["hq"])
        .node("DequantizeLinear", "h_dq", &["hq", "scale", "zero"], &["hd"])
        .node("Relu", "relu", &["hd"], &["r"])
        .node("Add", "sum", &["r", "hd"], &["y"])
        .output("y", &[1, 8]);
    g.build()
}

/// A random element-wise DAG for property tests: a MatMul on input `x`, then
/// one node per `(op, a, b)`: Relu, Sigmoid, Add or Mul (by `op % 4`) of the
/// outputs of earlier nodes `a` and `b` (modulo the count so far). Every
/// tensor no node reads becomes a model output.
pub fn random_dag_onnx(ops: &[(u8, usize, usize)]) -> Vec<u8> {
    let mut g = GraphBuilder::new();
    g.input("x", &[1, 8]).weight("w", &[8, 8]);
    g.node("MatMul", "n0", &["x", "w"], &["t0"]);
    let mut used = vec![false; ops.len() + 1];
    for (i, &(op, a, b)) in ops.iter().enumerate() {
        let (a, b) = (a % (i + 1), b % (i + 1));
        let (ta, tb, out) = (format!("t{a}"), format!("t{b}"), format!("t{}", i + 1));
        used[a] = true;
        match op % 4 {
            0 => g.node("Relu", &format!("n{}", i + 1), &[&ta], &[&out]),
            1 => g.node("Sigmoid", &format!("n{}", i + 1), &[&ta], &[&out]),
            2 => {
                used[b] = true;
                g.node("Add", &format!("n{}", i + 1), &[&ta, &tb], &[&out])
            }
            _ => {
                used[b] = true;
                g.node("Mul", &format!("n{}", i + 1), &[&ta, &tb], &[&out])
            }
        };
    }
    // Every dangling tensor becomes an output, so no layer is dead.
    for (i, &u) in used.iter().enumerate() {
        if !u || i == ops.len() {
            g.output(&format!("t{i}"), &[1, 8]);
        }
    }
    g.build()
}
