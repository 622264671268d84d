//! Building the ONNX graph: unique tensor names, nodes with their
//! attributes, initializers, and the model wrapper (opset, interface).

use std::collections::{HashMap, HashSet};

use tract_onnx::pb::{
    attribute_proto::AttributeType, tensor_shape_proto, type_proto, AttributeProto, GraphProto, ModelProto,
    NodeProto, OperatorSetIdProto, StringStringEntryProto, TensorShapeProto, TypeProto, ValueInfoProto,
};

use crate::constant::Const;

/// The ONNX opset the translation imports (14: `HardSwish`).
pub const OPSET: i64 = 14;
/// The ONNX IR version the translation declares.
pub const IR_VERSION: i64 = 8;

/// An ONNX graph under construction.
#[derive(Default)]
pub(crate) struct GraphBuilder {
    /// Nodes in topological order (TFLite's operator order, expanded).
    pub nodes: Vec<NodeProto>,
    /// Constant tensors.
    pub initializers: Vec<tract_onnx::pb::TensorProto>,
    /// Every tensor and node name given out so far.
    taken: HashSet<String>,
    /// The next suffix to try per base name (names repeat a lot: keeps
    /// [`GraphBuilder::fresh`] linear on a file that repeats one name).
    next_suffix: HashMap<String, usize>,
}

impl GraphBuilder {
    /// Reserves `name` if it is free and not empty; says whether it was.
    pub fn reserve(&mut self, name: &str) -> bool {
        !name.is_empty() && self.taken.insert(name.to_string())
    }

    /// A fresh name starting with `base`.
    pub fn fresh(&mut self, base: &str) -> String {
        if self.reserve(base) {
            return base.to_string();
        }
        let start = self.next_suffix.get(base).copied().unwrap_or(1);
        let (i, name) = (start..)
            .map(|i| (i, format!("{base}__{i}")))
            .find(|(_, n)| !self.taken.contains(n))
            .unwrap_or_default();
        self.next_suffix.insert(base.to_string(), i + 1);
        self.taken.insert(name.clone());
        name
    }

    /// Adds a node writing `outputs`; its name is its first output's.
    pub fn node(&mut self, op: &str, inputs: &[&str], outputs: &[&str], attributes: Vec<AttributeProto>) {
        let name = self.fresh(&format!("{}#{op}", outputs.first().copied().unwrap_or(op)));
        self.nodes.push(NodeProto {
            name,
            op_type: op.to_string(),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: outputs.iter().map(|s| s.to_string()).collect(),
            attribute: attributes,
            ..Default::default()
        });
    }

    /// Adds a node writing one fresh tensor named after `base`, and returns it.
    pub fn op(&mut self, op: &str, inputs: &[&str], base: &str, attributes: Vec<AttributeProto>) -> String {
        let out = self.fresh(base);
        self.node(op, inputs, &[&out], attributes);
        out
    }

    /// Adds an initializer named after `base` and returns its name.
    pub fn constant(&mut self, base: &str, value: &Const) -> String {
        let name = self.fresh(base);
        self.initializers.push(value.to_proto(&name));
        name
    }

    /// Wraps the graph in a model with the given interface.
    pub fn finish(
        self,
        name: String,
        inputs: Vec<ValueInfoProto>,
        outputs: Vec<ValueInfoProto>,
        doc: Option<String>,
    ) -> ModelProto {
        ModelProto {
            ir_version: IR_VERSION,
            opset_import: vec![OperatorSetIdProto { domain: String::new(), version: OPSET }],
            producer_name: "tandem-tflite".into(),
            producer_version: env!("CARGO_PKG_VERSION").into(),
            graph: Some(GraphProto {
                name,
                node: self.nodes,
                initializer: self.initializers,
                input: inputs,
                output: outputs,
                ..Default::default()
            }),
            metadata_props: doc
                .map(|d| vec![StringStringEntryProto { key: "tflite_description".into(), value: d }])
                .unwrap_or_default(),
            ..Default::default()
        }
    }
}

/// A graph input or output: element type and dimensions (`None`: unknown,
/// named `param`).
pub(crate) fn value_info(name: &str, elem_type: i32, dims: &[Option<i64>], param: &str) -> ValueInfoProto {
    let dim = dims
        .iter()
        .enumerate()
        .map(|(i, d)| tensor_shape_proto::Dimension {
            value: Some(match d {
                Some(v) => tensor_shape_proto::dimension::Value::DimValue(*v),
                None => tensor_shape_proto::dimension::Value::DimParam(format!("{param}_{i}")),
            }),
            ..Default::default()
        })
        .collect();
    ValueInfoProto {
        name: name.to_string(),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type,
                shape: Some(TensorShapeProto { dim }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// An integer attribute.
pub(crate) fn int(name: &str, i: i64) -> AttributeProto {
    AttributeProto { name: name.into(), r#type: AttributeType::Int as i32, i, ..Default::default() }
}

/// An integer-list attribute.
pub(crate) fn ints(name: &str, ints: &[i64]) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: AttributeType::Ints as i32,
        ints: ints.to_vec(),
        ..Default::default()
    }
}

/// A float attribute.
pub(crate) fn float(name: &str, f: f32) -> AttributeProto {
    AttributeProto { name: name.into(), r#type: AttributeType::Float as i32, f, ..Default::default() }
}

/// A string attribute.
pub(crate) fn string(name: &str, s: &str) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: AttributeType::String as i32,
        s: s.as_bytes().to_vec(),
        ..Default::default()
    }
}
