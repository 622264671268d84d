//! A small helper for writing ONNX graphs by hand with seeded weights.
//!
//! Every node gets a unique, non-empty name; a node's (first) output tensor is
//! named after the node unless the caller says otherwise. Weights are
//! initializers stored as little-endian `raw_data`.

use std::collections::HashSet;

use anyhow::{bail, Result};
use prost::Message;
use rand::distributions::{Distribution, Uniform};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use tract_onnx::pb::{
    attribute_proto::AttributeType, tensor_proto::DataType, tensor_shape_proto, type_proto, AttributeProto,
    GraphProto, ModelProto, NodeProto, OperatorSetIdProto, StringStringEntryProto, TensorProto,
    TensorShapeProto, TypeProto, ValueInfoProto,
};

/// The ONNX opset every generated model imports.
pub const OPSET: i64 = 14;
/// The ONNX IR version every generated model declares.
pub const IR_VERSION: i64 = 7;

/// Draws `n` values uniform in `[lo, hi)` from `rng`.
pub(crate) fn uniform_values(rng: &mut ChaCha8Rng, n: usize, lo: f32, hi: f32) -> Vec<f32> {
    if hi <= lo {
        return vec![lo; n];
    }
    let dist = Uniform::new(lo, hi);
    (0..n).map(|_| dist.sample(rng)).collect()
}

/// Half-width of a zero-mean uniform distribution with standard deviation `std`.
pub(crate) fn uniform_bound(std: f32) -> f32 {
    std * 3f32.sqrt()
}

/// Little-endian bytes of a slice of `f32`.
pub(crate) fn f32_bytes(v: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len() * 4);
    for x in v {
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}

/// Little-endian bytes of a slice of `i64`.
pub(crate) fn i64_bytes(v: &[i64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len() * 8);
    for x in v {
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}

/// A float32 tensor proto with `raw_data`.
pub(crate) fn f32_tensor(name: &str, dims: &[i64], data: &[f32]) -> TensorProto {
    TensorProto {
        name: name.to_string(),
        dims: dims.to_vec(),
        data_type: DataType::Float as i32,
        raw_data: f32_bytes(data),
        ..Default::default()
    }
}

/// An int64 tensor proto with `raw_data`.
pub(crate) fn i64_tensor(name: &str, dims: &[i64], data: &[i64]) -> TensorProto {
    TensorProto {
        name: name.to_string(),
        dims: dims.to_vec(),
        data_type: DataType::Int64 as i32,
        raw_data: i64_bytes(data),
        ..Default::default()
    }
}

/// A value info with a static shape.
pub(crate) fn value_info(name: &str, elem_type: DataType, dims: &[i64]) -> ValueInfoProto {
    ValueInfoProto {
        name: name.to_string(),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: elem_type as i32,
                shape: Some(TensorShapeProto {
                    dim: dims
                        .iter()
                        .map(|&d| tensor_shape_proto::Dimension {
                            value: Some(tensor_shape_proto::dimension::Value::DimValue(d)),
                            ..Default::default()
                        })
                        .collect(),
                }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A float32 value info with no shape (tract infers it): for graph outputs.
pub(crate) fn float_output(name: &str) -> ValueInfoProto {
    ValueInfoProto {
        name: name.to_string(),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: DataType::Float as i32,
                shape: None,
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// An integer attribute.
pub(crate) fn attr_i(name: &str, i: i64) -> AttributeProto {
    AttributeProto { name: name.to_string(), r#type: AttributeType::Int as i32, i, ..Default::default() }
}

/// A float attribute.
pub(crate) fn attr_f(name: &str, f: f32) -> AttributeProto {
    AttributeProto { name: name.to_string(), r#type: AttributeType::Float as i32, f, ..Default::default() }
}

/// A list-of-integers attribute.
pub(crate) fn attr_ints(name: &str, ints: &[i64]) -> AttributeProto {
    AttributeProto {
        name: name.to_string(),
        r#type: AttributeType::Ints as i32,
        ints: ints.to_vec(),
        ..Default::default()
    }
}

/// Builds one ONNX graph with seeded weights.
pub(crate) struct GraphBuilder {
    rng: ChaCha8Rng,
    nodes: Vec<NodeProto>,
    initializers: Vec<TensorProto>,
    names: HashSet<String>,
}

impl GraphBuilder {
    /// A builder whose weights are drawn from a ChaCha8 stream seeded by `seed`.
    pub fn new(seed: u64) -> Self {
        GraphBuilder {
            rng: ChaCha8Rng::seed_from_u64(seed),
            nodes: Vec::new(),
            initializers: Vec::new(),
            names: HashSet::new(),
        }
    }

    fn claim(&mut self, name: &str) -> Result<()> {
        if name.is_empty() {
            bail!("empty name in generated graph");
        }
        if !self.names.insert(name.to_string()) {
            bail!("duplicate name {name:?} in generated graph");
        }
        Ok(())
    }

    /// Adds a node named `name` with one output tensor named `out`.
    pub fn node_to(
        &mut self,
        op: &str,
        name: &str,
        inputs: &[&str],
        out: &str,
        attrs: Vec<AttributeProto>,
    ) -> Result<String> {
        self.node_multi(op, name, inputs, &[out], attrs)?;
        Ok(out.to_string())
    }

    /// Adds a node named `name` whose single output tensor is also named `name`.
    pub fn node(
        &mut self,
        op: &str,
        name: &str,
        inputs: &[&str],
        attrs: Vec<AttributeProto>,
    ) -> Result<String> {
        self.node_to(op, name, inputs, name, attrs)
    }

    /// Adds a node with explicit output names (`""` for an omitted optional output).
    pub fn node_multi(
        &mut self,
        op: &str,
        name: &str,
        inputs: &[&str],
        outputs: &[&str],
        attrs: Vec<AttributeProto>,
    ) -> Result<()> {
        self.claim(&format!("node:{name}"))?;
        for o in outputs.iter().filter(|o| !o.is_empty()) {
            self.claim(o)?;
        }
        self.nodes.push(NodeProto {
            name: name.to_string(),
            op_type: op.to_string(),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: outputs.iter().map(|s| s.to_string()).collect(),
            attribute: attrs,
            ..Default::default()
        });
        Ok(())
    }

    /// Adds a float initializer.
    pub fn init_f32(&mut self, name: &str, dims: &[i64], data: &[f32]) -> Result<String> {
        let n: i64 = dims.iter().product();
        if n as usize != data.len() {
            bail!("initializer {name}: {} values for dims {dims:?}", data.len());
        }
        self.claim(name)?;
        self.initializers.push(f32_tensor(name, dims, data));
        Ok(name.to_string())
    }

    /// Adds an int64 initializer.
    pub fn init_i64(&mut self, name: &str, dims: &[i64], data: &[i64]) -> Result<String> {
        self.claim(name)?;
        self.initializers.push(i64_tensor(name, dims, data));
        Ok(name.to_string())
    }

    /// Adds a float initializer uniform in `[lo, hi)`.
    pub fn uniform(&mut self, name: &str, dims: &[i64], lo: f32, hi: f32) -> Result<String> {
        let n = dims.iter().product::<i64>() as usize;
        let data = uniform_values(&mut self.rng, n, lo, hi);
        self.init_f32(name, dims, &data)
    }

    /// Adds a zero-mean uniform float initializer with standard deviation `std`.
    pub fn with_std(&mut self, name: &str, dims: &[i64], std: f32) -> Result<String> {
        let b = uniform_bound(std);
        self.uniform(name, dims, -b, b)
    }

    /// He-scaled weights: standard deviation `sqrt(2 / fan_in)`.
    pub fn he(&mut self, name: &str, dims: &[i64], fan_in: i64) -> Result<String> {
        self.with_std(name, dims, (2.0 / fan_in.max(1) as f32).sqrt())
    }

    /// A small bias.
    pub fn bias(&mut self, name: &str, dims: &[i64]) -> Result<String> {
        self.uniform(name, dims, -0.05, 0.05)
    }

    // ---- layers -------------------------------------------------------------

    /// 2-D convolution with He weights, optional bias.
    #[allow(clippy::too_many_arguments)]
    pub fn conv2d(
        &mut self,
        name: &str,
        x: &str,
        cin: i64,
        cout: i64,
        k: i64,
        stride: i64,
        pad: i64,
        group: i64,
        bias: bool,
    ) -> Result<String> {
        let w = self.he(&format!("{name}.weight"), &[cout, cin / group, k, k], cin / group * k * k)?;
        let mut inputs = vec![x.to_string(), w];
        if bias {
            inputs.push(self.bias(&format!("{name}.bias"), &[cout])?);
        }
        let inputs: Vec<&str> = inputs.iter().map(|s| s.as_str()).collect();
        self.node(
            "Conv",
            name,
            &inputs,
            vec![
                attr_ints("kernel_shape", &[k, k]),
                attr_ints("strides", &[stride, stride]),
                attr_ints("pads", &[pad, pad, pad, pad]),
                attr_ints("dilations", &[1, 1]),
                attr_i("group", group),
            ],
        )
    }

    /// 1-D convolution with explicit (begin, end) padding and dilation.
    #[allow(clippy::too_many_arguments)]
    pub fn conv1d(
        &mut self,
        name: &str,
        x: &str,
        cin: i64,
        cout: i64,
        k: i64,
        dilation: i64,
        pads: [i64; 2],
        weight_gain: f32,
    ) -> Result<String> {
        let std = weight_gain * (2.0 / (cin * k) as f32).sqrt();
        let w = self.with_std(&format!("{name}.weight"), &[cout, cin, k], std)?;
        let b = self.bias(&format!("{name}.bias"), &[cout])?;
        self.node(
            "Conv",
            name,
            &[x, &w, &b],
            vec![
                attr_ints("kernel_shape", &[k]),
                attr_ints("strides", &[1]),
                attr_ints("pads", &pads),
                attr_ints("dilations", &[dilation]),
                attr_i("group", 1),
            ],
        )
    }

    /// Inference-mode batch normalization with sensible random statistics.
    pub fn batch_norm(&mut self, name: &str, x: &str, c: i64) -> Result<String> {
        let scale = self.uniform(&format!("{name}.scale"), &[c], 0.5, 1.5)?;
        let bias = self.uniform(&format!("{name}.bias"), &[c], -0.1, 0.1)?;
        let mean = self.uniform(&format!("{name}.mean"), &[c], -0.1, 0.1)?;
        let var = self.uniform(&format!("{name}.var"), &[c], 0.5, 1.5)?;
        self.node("BatchNormalization", name, &[x, &scale, &bias, &mean, &var], vec![attr_f("epsilon", 1e-5)])
    }

    /// A unary op with no attributes (Relu, Tanh, Sigmoid, Flatten...).
    pub fn unary(&mut self, op: &str, name: &str, x: &str) -> Result<String> {
        self.node(op, name, &[x], vec![])
    }

    /// A binary op with no attributes (Add, Mul...).
    pub fn binary(&mut self, op: &str, name: &str, a: &str, b: &str) -> Result<String> {
        self.node(op, name, &[a, b], vec![])
    }

    /// Square max pooling, no padding.
    pub fn max_pool(&mut self, name: &str, x: &str, k: i64, stride: i64) -> Result<String> {
        self.node(
            "MaxPool",
            name,
            &[x],
            vec![attr_ints("kernel_shape", &[k, k]), attr_ints("strides", &[stride, stride])],
        )
    }

    /// `Flatten(axis=1)`.
    pub fn flatten(&mut self, name: &str, x: &str) -> Result<String> {
        self.node("Flatten", name, &[x], vec![attr_i("axis", 1)])
    }

    /// Fully connected layer `x · Wᵀ + b` with He weights `[cout, cin]`.
    pub fn gemm(&mut self, name: &str, x: &str, cin: i64, cout: i64) -> Result<String> {
        let w = self.he(&format!("{name}.weight"), &[cout, cin], cin)?;
        let b = self.bias(&format!("{name}.bias"), &[cout])?;
        self.node("Gemm", name, &[x, &w, &b], vec![attr_i("transB", 1)])
    }

    /// `Reshape(x, shape)` with the target shape as an initializer.
    pub fn reshape(&mut self, name: &str, x: &str, shape: &[i64]) -> Result<String> {
        let s = self.init_i64(&format!("{name}.shape"), &[shape.len() as i64], shape)?;
        self.node("Reshape", name, &[x, &s], vec![])
    }

    /// `Squeeze(x, axes)` (opset 13+: axes is an input).
    pub fn squeeze(&mut self, name: &str, x: &str, axes: &[i64]) -> Result<String> {
        let a = self.init_i64(&format!("{name}.axes"), &[axes.len() as i64], axes)?;
        self.node("Squeeze", name, &[x, &a], vec![])
    }

    /// The final `Softmax(axis=-1)`, writing the graph output tensor `output`.
    pub fn softmax_output(&mut self, name: &str, x: &str) -> Result<String> {
        self.node_to("Softmax", name, &[x], "output", vec![attr_i("axis", -1)])
    }

    /// Wraps the graph into a model and encodes it.
    pub fn finish(
        self,
        graph_name: &str,
        inputs: Vec<ValueInfoProto>,
        outputs: Vec<ValueInfoProto>,
        metadata: &[(&str, &str)],
    ) -> Result<Vec<u8>> {
        let graph = GraphProto {
            name: graph_name.to_string(),
            node: self.nodes,
            initializer: self.initializers,
            input: inputs,
            output: outputs,
            ..Default::default()
        };
        let model = ModelProto {
            ir_version: IR_VERSION,
            opset_import: vec![OperatorSetIdProto { domain: String::new(), version: OPSET }],
            producer_name: "tandem-models".to_string(),
            producer_version: env!("CARGO_PKG_VERSION").to_string(),
            graph: Some(graph),
            metadata_props: metadata
                .iter()
                .map(|(k, v)| StringStringEntryProto { key: k.to_string(), value: v.to_string() })
                .collect(),
            ..Default::default()
        };
        Ok(model.encode_to_vec())
    }
}
