//! Hostile models: tiny ONNX files that declare or compute tensors far
//! bigger than any phone's memory (issue 28). Each is what an attacker would
//! push to a handheld; the tests check that every Tandem process refuses
//! them by name, quickly, without allocating what they ask for.

use anyhow::Result;
use prost::Message;
use tract_onnx::pb::tensor_proto::DataType;
use tract_onnx::pb::{GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto, ValueInfoProto};

use crate::builder::{float_output, i64_tensor, value_info, IR_VERSION, OPSET};

/// One hostile model.
#[derive(Clone, Debug)]
pub struct Hostile {
    /// A short file name (no extension).
    pub name: &'static str,
    /// The ONNX bytes.
    pub bytes: Vec<u8>,
    /// What it would cost, in words.
    pub attack: &'static str,
    /// The name of the tensor a refusal must name, when the size checks
    /// made before tract sees the file can see it (`None`: only tract's own
    /// shape inference finds its size, so only a sandbox stops it).
    pub culprit: Option<&'static str>,
}

fn node(op: &str, inputs: &[&str], output: &str) -> NodeProto {
    NodeProto {
        op_type: op.to_string(),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec![output.to_string()],
        ..Default::default()
    }
}

fn model(nodes: Vec<NodeProto>, init: Vec<TensorProto>, inputs: Vec<ValueInfoProto>) -> Vec<u8> {
    ModelProto {
        ir_version: IR_VERSION,
        opset_import: vec![OperatorSetIdProto { domain: String::new(), version: OPSET }],
        graph: Some(GraphProto {
            node: nodes,
            initializer: init,
            input: inputs,
            output: vec![float_output("y")],
            ..Default::default()
        }),
        ..Default::default()
    }
    .encode_to_vec()
}

/// The hostile models of issue 28, smallest first.
pub fn hostile_models() -> Vec<Hostile> {
    let relu = |dims: &[i64]| {
        model(vec![node("Relu", &["x"], "y")], vec![], vec![value_info("x", DataType::Float, dims)])
    };
    vec![
        Hostile {
            name: "relu_40gb",
            bytes: relu(&[100_000, 100_000]),
            attack: "a Relu whose input is declared float [100000, 100000] (40 GB)",
            culprit: Some("x"),
        },
        Hostile {
            name: "relu_overflow",
            bytes: relu(&[1 << 31, 1 << 31]),
            attack: "an input declared [2^31, 2^31]: its element count overflows 64 bits of bytes",
            culprit: Some("x"),
        },
        Hostile {
            name: "expand_40gb",
            bytes: model(
                vec![node("Expand", &["x", "shape"], "y")],
                vec![i64_tensor("shape", &[2], &[100_000, 100_000])],
                vec![value_info("x", DataType::Float, &[1])],
            ),
            attack: "an Expand of a [1] input to [100000, 100000] (40 GB)",
            culprit: Some("y"),
        },
        Hostile {
            name: "constant_of_shape_512mb",
            bytes: model(
                vec![node("ConstantOfShape", &["shape"], "zeros"), node("Add", &["x", "zeros"], "y")],
                vec![i64_tensor("shape", &[1], &[128 << 20])],
                vec![value_info("x", DataType::Float, &[1])],
            ),
            attack: "a ConstantOfShape of 128 Mi floats (512 MiB computed from a 126-byte file), then an Add",
            culprit: Some("zeros"),
        },
        Hostile {
            name: "computed_shape_40gb",
            bytes: model(
                vec![
                    node("Mul", &["dims", "ones"], "shape"),
                    node("ConstantOfShape", &["shape"], "zeros"),
                    node("Add", &["x", "zeros"], "y"),
                ],
                vec![i64_tensor("dims", &[2], &[100_000, 100_000]), i64_tensor("ones", &[2], &[1, 1])],
                vec![value_info("x", DataType::Float, &[1])],
            ),
            attack: "a ConstantOfShape of [100000, 100000] floats (40 GB) whose shape is computed (a Mul), \
                     so no check of the file's constants sees it: tract folds it while inferring shapes",
            culprit: None,
        },
    ]
}

/// The hostile model named `name`.
pub fn hostile(name: &str) -> Result<Hostile> {
    hostile_models()
        .into_iter()
        .find(|h| h.name == name)
        .ok_or_else(|| anyhow::anyhow!("no hostile model named {name:?}"))
}

/// A model within any size limit that is slow to profile: a `Cos` over a
/// float input of `rows × 4096` (256 MiB at 16384 rows, about 0.2 s a run
/// here). A handheld's cap on load time must stop it.
pub fn slow_cos(rows: i64) -> Vec<u8> {
    model(vec![node("Cos", &["x"], "y")], vec![], vec![value_info("x", DataType::Float, &[rows, 4096])])
}

/// A small ONNX graph built from arbitrary bytes, for fuzzing the model
/// checks: each byte picks an op, a dimension or a constant from tables
/// that mix ordinary values with huge ones (up to 2^40 elements), so the
/// graphs declare, expand, tile, range and broadcast their way past any
/// limit, or not. Every input gives a well-formed protobuf; whether it is
/// a valid model is for the loader to say.
pub fn graph_from_bytes(data: &[u8]) -> Vec<u8> {
    const DIMS: [i64; 10] = [1, 2, 3, 4, 7, 64, 1000, 100_000, 1 << 20, 1 << 31];
    const OPS: [&str; 12] = [
        "Relu",
        "Add",
        "Mul",
        "Cos",
        "Expand",
        "ConstantOfShape",
        "Tile",
        "Range",
        "Reshape",
        "Concat",
        "MatMul",
        "Sum",
    ];
    let mut bytes = data.iter().copied();
    let mut next = move || bytes.next().unwrap_or(0) as usize;
    let rank = 1 + next() % 3;
    let x: Vec<i64> = (0..rank).map(|_| DIMS[next() % DIMS.len()]).collect();
    let mut init = vec![];
    let mut nodes = vec![];
    let mut tensors = vec!["x".to_string()];
    for i in 0..1 + next() % 5 {
        let op = OPS[next() % OPS.len()];
        let pick = |k: usize| tensors[k % tensors.len()].clone();
        let (a, b) = (pick(next()), pick(next()));
        let c = format!("c{i}");
        let dims: Vec<i64> = (0..1 + next() % 3).map(|_| DIMS[next() % DIMS.len()]).collect();
        let inputs: Vec<String> = match op {
            "Relu" | "Cos" => vec![a],
            "Add" | "Mul" | "MatMul" | "Sum" | "Concat" => vec![a, b],
            "Expand" | "Tile" | "Reshape" => {
                init.push(i64_tensor(&c, &[dims.len() as i64], &dims));
                vec![a, c]
            }
            "ConstantOfShape" => {
                init.push(i64_tensor(&c, &[dims.len() as i64], &dims));
                vec![c]
            }
            _ => {
                // Range(start, limit, delta) of scalar int64 constants.
                let names: Vec<String> = (0..3).map(|k| format!("{c}_{k}")).collect();
                for (n, v) in names.iter().zip([0, dims[0], 1 + (next() % 3) as i64]) {
                    init.push(i64_tensor(n, &[], &[v]));
                }
                names
            }
        };
        let out = format!("t{i}");
        let mut n = node(op, &inputs.iter().map(String::as_str).collect::<Vec<_>>(), &out);
        if op == "Concat" {
            n.attribute.push(crate::builder::attr_i("axis", 0));
        }
        nodes.push(n);
        tensors.push(out);
    }
    let last = tensors.last().cloned().unwrap_or_default();
    nodes.push(node("Identity", &[&last], "y"));
    model(nodes, init, vec![value_info("x", DataType::Float, &x)])
}
