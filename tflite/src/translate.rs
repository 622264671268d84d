//! The translation driver: the graph interface (TFLite names, NHWC shapes,
//! types), tensor values (ONNX names or folded constants), and the float
//! view of quantized and fp16 tensors that every op translation works on.
//!
//! Quantized (int8, uint8) and fp16 tensors are translated as tf2onnx does
//! for float kernels: a `DequantizeLinear` (or `Cast`) gives each op float
//! inputs, and a `QuantizeLinear` (or `Cast`) writes its quantized output.

use std::collections::{HashMap, HashSet};

use prost::Message;
use tract_onnx::pb::{tensor_proto::DataType, ModelProto};

use crate::constant::{element_count, element_size, Const, MAX_FOLDED_TENSOR_BYTES, MAX_FOLDED_TOTAL_BYTES};
use crate::error::{Error, Result};
use crate::onnx::{self, GraphBuilder};
use crate::reader::{self, TfGraph, TfModel, TfOperator, TfTensor};
use tandem_tflite_schema::tflite::TensorType;

/// Builtin codes of ops that hold state or loop: refused by name (resource
/// variables, `WHILE`, `CALL_ONCE`, hash tables).
const STATEFUL: &[i32] = &[119, 129, 136, 137, 138, 139, 142, 143, 144];
/// The builtin code of `IF`.
const IF: i32 = 118;
/// How deep `IF` branches may nest.
const MAX_NESTING: usize = 8;
/// The most ONNX nodes a translation may hold: inlined branches could
/// otherwise multiply a hostile file's ops without bound.
const MAX_NODES: usize = 500_000;
/// The most inputs and outputs a subgraph may declare: far above any real
/// model's, and a bound on the interface work a hostile file can ask for.
const MAX_INTERFACE: usize = 4096;

/// Translates the TFLite model in `bytes` to an ONNX model.
pub fn translate(bytes: &[u8]) -> Result<ModelProto> {
    let tf = reader::read(bytes)?;
    let mut ctx = Ctx::new(&tf, &tf.graphs[0], GraphBuilder::default(), vec![0], None)?;
    ctx.translate_ops()?;
    ctx.finish()
}

/// Translates the TFLite model in `bytes` to ONNX protobuf bytes.
pub fn translate_to_bytes(bytes: &[u8]) -> Result<Vec<u8>> {
    Ok(translate(bytes)?.encode_to_vec())
}

/// The ONNX element type of a TFLite type.
pub(crate) fn onnx_type(t: &TfTensor<'_>) -> Result<DataType> {
    Ok(match t.dtype {
        TensorType::Float32 => DataType::Float,
        TensorType::Float16 => DataType::Float16,
        TensorType::Float64 => DataType::Double,
        TensorType::Int32 => DataType::Int32,
        TensorType::Int64 => DataType::Int64,
        TensorType::Int16 => DataType::Int16,
        TensorType::Int8 => DataType::Int8,
        TensorType::Uint8 => DataType::Uint8,
        TensorType::Uint16 => DataType::Uint16,
        TensorType::Uint32 => DataType::Uint32,
        TensorType::Uint64 => DataType::Uint64,
        TensorType::Bool => DataType::Bool,
        other => return Err(Error::UnsupportedType { tensor: t.name.clone(), dtype: format!("{other:?}") }),
    })
}

/// Whether a tensor is computed on as float through dequantization.
fn is_quantized(t: &TfTensor<'_>) -> bool {
    t.quant.is_some() && matches!(t.dtype, TensorType::Int8 | TensorType::Uint8 | TensorType::Int16)
}

/// The translation state of one model.
pub(crate) struct Ctx<'a> {
    /// The whole model (its other subgraphs are `IF` branches).
    model: &'a TfModel<'a>,
    /// The subgraph being translated.
    pub tf: &'a TfGraph<'a>,
    pub g: GraphBuilder,
    /// Subgraphs being translated, outermost first (no recursion).
    stack: Vec<usize>,
    /// ONNX names of tensors computed so far (or graph inputs).
    names: Vec<Option<String>>,
    /// The subgraph's outputs, each once, in declared order.
    outputs: Vec<usize>,
    /// The same, to look up.
    output_set: HashSet<usize>,
    /// Values computed at translation time (`DEQUANTIZE`, `DENSIFY`), by
    /// output tensor: their float view.
    folded: HashMap<usize, Const>,
    /// Buffers decoded as stored (not dequantized), by tensor; a sparse
    /// tensor's stored values are never here.
    decoded: HashMap<usize, Const>,
    /// Bytes of constants folded so far, against [`MAX_FOLDED_TOTAL_BYTES`]
    /// (shared with inlined branches).
    folded_bytes: usize,
    /// Initializers already written for constant tensors (float view).
    materialized: HashMap<usize, String>,
    /// Float views of quantized or fp16 dynamic tensors.
    float_views: HashMap<usize, String>,
    /// Outputs of the current op that need quantizing or casting back.
    pending: Vec<(String, usize)>,
    /// The current op, for errors: (index, name, first output's name).
    current: (usize, String, String),
}

impl<'a> Ctx<'a> {
    /// A context for subgraph `tf`; `arguments` names its inputs when it
    /// is an `IF` branch inlined into the graph being built.
    fn new(
        model: &'a TfModel<'a>,
        tf: &'a TfGraph<'a>,
        mut g: GraphBuilder,
        stack: Vec<usize>,
        arguments: Option<Vec<String>>,
    ) -> Result<Ctx<'a>> {
        if tf.inputs.len() + tf.outputs.len() > MAX_INTERFACE {
            return Err(Error::Malformed(format!(
                "subgraph {} declares {} inputs and {} outputs (at most {MAX_INTERFACE} in all)",
                tf.index,
                tf.inputs.len(),
                tf.outputs.len()
            )));
        }
        let mut output_set = HashSet::new();
        let outputs: Vec<usize> = tf.outputs.iter().copied().filter(|&o| output_set.insert(o)).collect();
        let mut names = vec![None; tf.tensors.len()];
        if let Some(args) = arguments {
            for (&i, name) in tf.inputs.iter().zip(args) {
                names[i] = Some(name);
            }
        }
        // The interface keeps TFLite's names: reserve them first.
        for &i in tf.inputs.iter().chain(&tf.outputs) {
            let t = &tf.tensors[i];
            if names[i].is_none() {
                let name = if g.reserve(&t.name) { t.name.clone() } else { g.fresh(&format!("tensor_{i}")) };
                names[i] = Some(name);
            }
        }
        for &i in &tf.inputs {
            if tf.tensors[i].data.is_some() {
                return Err(Error::Malformed(format!("graph input {i} is a constant")));
            }
        }
        Ok(Ctx {
            model,
            tf,
            g,
            stack,
            names,
            outputs,
            output_set,
            folded: HashMap::new(),
            decoded: HashMap::new(),
            folded_bytes: 0,
            materialized: HashMap::new(),
            float_views: HashMap::new(),
            pending: Vec::new(),
            current: (0, String::new(), String::new()),
        })
    }

    fn translate_ops(&mut self) -> Result<()> {
        let tf = self.tf;
        for (index, op) in tf.operators.iter().enumerate() {
            self.translate_op(index, op)?;
        }
        Ok(())
    }

    fn translate_op(&mut self, index: usize, op: &TfOperator<'a>) -> Result<()> {
        let node = op.outputs.first().map(|&o| self.tf.tensors[o].name.clone()).unwrap_or_default();
        self.current = (index, op.name.clone(), node);
        if op.is_custom() {
            return Err(self.unsupported("custom operators have no ONNX translation"));
        }
        if self.g.nodes.len() > MAX_NODES {
            return Err(self.unsupported(&format!("the translation passes {MAX_NODES} ONNX nodes")));
        }
        if op.calls_subgraph() || STATEFUL.contains(&op.code) {
            return Err(self.unsupported(&format!(
                "loops, calls and resource variables cannot be translated (the model has {} subgraphs)",
                self.model.graphs.len()
            )));
        }
        for &o in &op.outputs {
            if self.tf.tensors[o].is_variable {
                return Err(self.unsupported("it writes a variable tensor"));
            }
        }
        if op.code == IF {
            self.translate_if(op)?;
        } else {
            crate::ops::translate(self, op)?;
        }
        for (float, tensor) in std::mem::take(&mut self.pending) {
            let t = &self.tf.tensors[tensor];
            let name = self.name_of(tensor);
            if t.dtype == TensorType::Float16 {
                self.g.node("Cast", &[&float], &[&name], vec![onnx::int("to", DataType::Float16 as i64)]);
            } else {
                let (scale, zero) = self.quant_params(tensor)?;
                let axis = t.quant.as_ref().map(|q| q.axis as i64).unwrap_or(1);
                self.g.node(
                    "QuantizeLinear",
                    &[&float, &scale, &zero],
                    &[&name],
                    vec![onnx::int("axis", axis)],
                );
            }
        }
        for &o in &op.outputs {
            if self.names[o].is_none() && !self.folded.contains_key(&o) {
                return Err(self.unsupported("an output was left unwritten"));
            }
        }
        Ok(())
    }

    fn finish(mut self) -> Result<ModelProto> {
        let tf = self.tf;
        let mut inputs = Vec::new();
        for &i in &tf.inputs {
            inputs.push(self.interface(i, "input")?);
        }
        let written: HashSet<String> = self.g.nodes.iter().flat_map(|n| n.output.iter().cloned()).collect();
        let mut outputs = Vec::new();
        for o in self.outputs.clone() {
            // An output that is a constant or an input still needs a node.
            let name = self.name_of(o);
            let written = written.contains(&name);
            if !written {
                let source = if self.folded.contains_key(&o) || tf.tensors[o].data.is_some() {
                    self.constant_name(o)?
                } else {
                    return Err(Error::Malformed(format!("output '{name}' is never computed")));
                };
                self.g.node("Identity", &[&source], &[&name], vec![]);
            }
            outputs.push(self.interface(o, "output")?);
        }
        Ok(self.g.finish("tflite".into(), inputs, outputs, self.model.description.clone()))
    }

    /// `IF`: both branches are pure functions of the op's inputs, so both
    /// are inlined and `Where` picks the taken one's outputs (branches that
    /// write variables or loop are refused inside them).
    fn translate_if(&mut self, op: &TfOperator<'a>) -> Result<()> {
        use tandem_tflite_schema::tflite::BuiltinOptionsRef;
        let (then_graph, else_graph) = match op.raw.builtin_options() {
            Ok(Some(BuiltinOptionsRef::IfOptions(o))) => {
                let read = |v: planus::Result<i32>| {
                    v.map_err(|source| Error::Flatbuffer { context: "IF's options".into(), source })
                };
                (read(o.then_subgraph_index())?, read(o.else_subgraph_index())?)
            }
            _ => return Err(self.unsupported("no IfOptions")),
        };
        let cond = self.input(op, 0)?;
        let arguments = (1..op.inputs.len()).map(|k| self.input_tensor(op, k)).collect::<Result<Vec<_>>>()?;
        let then_out = self.inline(then_graph, &arguments)?;
        let else_out = self.inline(else_graph, &arguments)?;
        if then_out.len() != op.outputs.len() || else_out.len() != op.outputs.len() {
            return Err(self.unsupported("branches with another number of outputs than the op"));
        }
        for (k, (a, b)) in then_out.iter().zip(&else_out).enumerate() {
            let out = self.output(op, k)?;
            self.g.node("Where", &[&cond, a, b], &[&out], vec![]);
        }
        Ok(())
    }

    /// Translates subgraph `index` into the graph being built, its inputs
    /// bound to `arguments`; returns the names of its outputs' float views.
    fn inline(&mut self, index: i32, arguments: &[usize]) -> Result<Vec<String>> {
        let model = self.model;
        let graph = usize::try_from(index)
            .ok()
            .and_then(|i| model.graphs.get(i))
            .ok_or_else(|| self.unsupported(&format!("it names subgraph {index}, which is not there")))?;
        if self.stack.contains(&graph.index) || self.stack.len() >= MAX_NESTING {
            return Err(self.unsupported(&format!("subgraph {index} is recursive or nested too deep")));
        }
        if graph.inputs.len() != arguments.len() {
            return Err(self.unsupported(&format!("subgraph {index} takes {} inputs", graph.inputs.len())));
        }
        let mut names = Vec::new();
        for &a in arguments {
            let t = &self.tf.tensors[a];
            if is_quantized(t) || t.dtype == TensorType::Float16 {
                return Err(self.unsupported("a quantized or fp16 tensor passed to a branch"));
            }
            names.push(self.float_view(a)?);
        }
        let mut stack = self.stack.clone();
        stack.push(graph.index);
        let g = std::mem::take(&mut self.g);
        let mut branch = Ctx::new(model, graph, g, stack, Some(names))?;
        branch.folded_bytes = self.folded_bytes;
        let result = branch
            .translate_ops()
            .and_then(|()| graph.outputs.iter().map(|&o| branch.float_view(o)).collect::<Result<Vec<_>>>());
        self.g = std::mem::take(&mut branch.g);
        self.folded_bytes = branch.folded_bytes;
        result
    }

    /// The value info of interface tensor `i`.
    fn interface(&mut self, i: usize, what: &str) -> Result<tract_onnx::pb::ValueInfoProto> {
        let t = &self.tf.tensors[i];
        let dims: Vec<Option<i64>> = match &t.signature {
            Some(sig) => {
                sig.iter().zip(&t.shape).map(|(&s, &d)| if s < 0 { None } else { Some(d) }).collect()
            }
            None => t.shape.iter().map(|&d| Some(d)).collect(),
        };
        let name = self.name_of(i);
        Ok(onnx::value_info(&name, onnx_type(t)? as i32, &dims, &format!("{what}_{i}")))
    }

    /// An error naming the current op and node.
    pub fn unsupported(&self, reason: &str) -> Error {
        Error::Unsupported {
            op: self.current.1.clone(),
            index: self.current.0,
            node: self.current.2.clone(),
            reason: match self.tf.index {
                0 => reason.to_string(),
                n => format!("in subgraph {n} (an IF branch): {reason}"),
            },
        }
    }

    /// The ONNX name of tensor `i` (given out on first use).
    pub fn name_of(&mut self, i: usize) -> String {
        if let Some(n) = &self.names[i] {
            return n.clone();
        }
        let t = &self.tf.tensors[i];
        let base = if t.name.is_empty() { format!("tensor_{i}") } else { t.name.clone() };
        let name = self.g.fresh(&base);
        self.names[i] = Some(name.clone());
        name
    }

    /// The TFLite tensor behind input `k` of `op`, refusing a missing one.
    pub fn input_tensor(&self, op: &TfOperator<'_>, k: usize) -> Result<usize> {
        op.inputs.get(k).copied().flatten().ok_or_else(|| self.unsupported(&format!("input {k} is missing")))
    }

    /// Whether `op` has input `k`.
    pub fn has_input(&self, op: &TfOperator<'_>, k: usize) -> bool {
        op.inputs.get(k).copied().flatten().is_some()
    }

    /// Tensor `i` itself.
    pub fn tensor(&self, i: usize) -> &'a TfTensor<'a> {
        &self.tf.tensors[i]
    }

    /// The shape of tensor `i`, as TFLite declares it.
    pub fn shape(&self, i: usize) -> Vec<usize> {
        self.tf.tensors[i].shape.iter().map(|&d| d as usize).collect()
    }

    /// Which dimensions of tensor `i` are open (-1 in its shape signature):
    /// TFLite declares them 1, and they take any size at run time.
    pub fn open_dims(&self, i: usize) -> Vec<bool> {
        let t = &self.tf.tensors[i];
        match &t.signature {
            Some(sig) => sig.iter().map(|&d| d < 0).collect(),
            None => vec![false; t.shape.len()],
        }
    }

    /// The raw constant value of tensor `i` (not dequantized), if it is one;
    /// a sparse tensor is refused (only `DENSIFY` reads it, through
    /// [`Ctx::sparse_values`]).
    pub fn raw_constant(&mut self, i: usize) -> Result<Option<Const>> {
        if let Some(c) = self.folded.get(&i) {
            return Ok(Some(c.clone()));
        }
        let t = &self.tf.tensors[i];
        if t.sparsity.is_some() {
            return Err(self.unsupported(&format!("sparse tensor '{}' is read without DENSIFY", t.name)));
        }
        if let Some(c) = self.decoded.get(&i) {
            return Ok(Some(c.clone()));
        }
        let Some(data) = t.data else { return Ok(None) };
        let shape = self.shape(i);
        let count = element_count(&shape)?;
        let c = Const::decode(&t.name, t.dtype, shape, data, count)?;
        self.decoded.insert(i, c.clone());
        Ok(Some(c))
    }

    /// The values sparse constant `i` stores (fewer than its shape holds),
    /// as a vector, for `DENSIFY`.
    pub fn sparse_values(&self, i: usize) -> Result<Option<Const>> {
        let t = &self.tf.tensors[i];
        let Some(data) = t.data else { return Ok(None) };
        let count = data.len() / element_size(&t.name, t.dtype)?;
        Const::decode(&t.name, t.dtype, vec![count], data, count).map(Some)
    }

    /// Accounts for a constant of `bytes` folded at translation time,
    /// refusing one past [`MAX_FOLDED_TENSOR_BYTES`] or a translation whose
    /// folded constants pass [`MAX_FOLDED_TOTAL_BYTES`].
    pub fn charge_folded(&mut self, bytes: usize) -> Result<()> {
        if bytes > MAX_FOLDED_TENSOR_BYTES {
            return Err(self.unsupported(&format!(
                "a folded constant of {bytes} bytes (more than {MAX_FOLDED_TENSOR_BYTES})"
            )));
        }
        let total = self.folded_bytes.saturating_add(bytes);
        if total > MAX_FOLDED_TOTAL_BYTES {
            return Err(self.unsupported(&format!(
                "folded constants of {total} bytes in all (more than {MAX_FOLDED_TOTAL_BYTES})"
            )));
        }
        self.folded_bytes = total;
        Ok(())
    }

    /// The value of input `k` of `op` when it is a constant, as float32 if
    /// it is quantized or fp16 (as the float ops see it).
    pub fn constant(&mut self, op: &TfOperator<'_>, k: usize) -> Result<Option<Const>> {
        let i = self.input_tensor(op, k)?;
        self.float_constant(i)
    }

    fn float_constant(&mut self, i: usize) -> Result<Option<Const>> {
        let t = &self.tf.tensors[i];
        let Some(c) = self.raw_constant(i)? else { return Ok(None) };
        let needs_float = matches!(c.data, crate::constant::ConstData::F16(_))
            || (t.quant.is_some()
                && matches!(
                    t.dtype,
                    TensorType::Int8 | TensorType::Uint8 | TensorType::Int16 | TensorType::Int32
                ));
        // A folded value is already the float view.
        if needs_float && !self.folded.contains_key(&i) {
            self.charge_folded(c.len().saturating_mul(4))?;
            return Ok(Some(c.dequantize(t.quant.as_ref())?));
        }
        Ok(Some(c))
    }

    /// The integer values of constant input `k` (axes, shapes, paddings).
    pub fn int_constant(&mut self, op: &TfOperator<'_>, k: usize, what: &str) -> Result<Vec<i64>> {
        let i = self.input_tensor(op, k)?;
        self.raw_constant(i)?
            .and_then(|c| c.to_i64())
            .ok_or_else(|| self.unsupported(&format!("its {what} (input {k}) is not an integer constant")))
    }

    /// Records that output `k` of `op` is the constant `value`.
    pub fn fold(&mut self, op: &TfOperator<'_>, k: usize, value: Const) -> Result<()> {
        let o = *op.outputs.get(k).ok_or_else(|| self.unsupported(&format!("output {k} is missing")))?;
        self.charge_folded(value.byte_len())?;
        self.folded.insert(o, value);
        Ok(())
    }

    /// The ONNX name of the float view of input `k` of `op`.
    pub fn input(&mut self, op: &TfOperator<'_>, k: usize) -> Result<String> {
        let i = self.input_tensor(op, k)?;
        self.float_view(i)
    }

    /// The ONNX name of the float view of tensor `i`.
    pub fn float_view(&mut self, i: usize) -> Result<String> {
        if self.folded.contains_key(&i) || self.tf.tensors[i].data.is_some() {
            return self.constant_name(i);
        }
        let name = match &self.names[i] {
            Some(n) => n.clone(),
            None => {
                let t = &self.tf.tensors[i];
                return Err(self.unsupported(&format!("tensor '{}' is read before it is written", t.name)));
            }
        };
        let t = &self.tf.tensors[i];
        if t.dtype == TensorType::Float16 {
            if let Some(v) = self.float_views.get(&i) {
                return Ok(v.clone());
            }
            let v = self.g.op(
                "Cast",
                &[&name],
                &format!("{name}_f32"),
                vec![onnx::int("to", DataType::Float as i64)],
            );
            self.float_views.insert(i, v.clone());
            return Ok(v);
        }
        if is_quantized(t) {
            if let Some(v) = self.float_views.get(&i) {
                return Ok(v.clone());
            }
            if t.dtype == TensorType::Int16 {
                return Err(self.unsupported(&format!("int16-quantized tensor '{}'", t.name)));
            }
            let (scale, zero) = self.quant_params(i)?;
            let axis = t.quant.as_ref().map(|q| q.axis as i64).unwrap_or(1);
            let v = self.g.op(
                "DequantizeLinear",
                &[&name, &scale, &zero],
                &format!("{name}_dequantized"),
                vec![onnx::int("axis", axis)],
            );
            self.float_views.insert(i, v.clone());
            return Ok(v);
        }
        Ok(name)
    }

    /// The initializer holding constant tensor `i` as the ops see it.
    fn constant_name(&mut self, i: usize) -> Result<String> {
        if let Some(n) = self.materialized.get(&i) {
            return Ok(n.clone());
        }
        let value = self.float_constant(i)?.ok_or_else(|| self.unsupported("a constant without data"))?;
        let t = &self.tf.tensors[i];
        let base = if t.name.is_empty() { format!("const_{i}") } else { t.name.clone() };
        // An interface tensor keeps its reserved name.
        let name = if self.output_set.contains(&i) { format!("{base}_value") } else { base };
        let name = self.g.constant(&name, &value);
        self.materialized.insert(i, name.clone());
        Ok(name)
    }

    /// The name the current op writes output `k`'s float value to.
    pub fn output(&mut self, op: &TfOperator<'_>, k: usize) -> Result<String> {
        let o = *op.outputs.get(k).ok_or_else(|| self.unsupported(&format!("output {k} is missing")))?;
        let t = &self.tf.tensors[o];
        let name = self.name_of(o);
        if is_quantized(t) || t.dtype == TensorType::Float16 {
            if t.dtype == TensorType::Int16 {
                return Err(self.unsupported(&format!("int16-quantized tensor '{}'", t.name)));
            }
            let float = self.g.fresh(&format!("{name}_float"));
            self.pending.push((float.clone(), o));
            return Ok(float);
        }
        Ok(name)
    }

    /// The output tensor index `k` of `op`.
    pub fn output_tensor(&self, op: &TfOperator<'_>, k: usize) -> Result<usize> {
        op.outputs.get(k).copied().ok_or_else(|| self.unsupported(&format!("output {k} is missing")))
    }

    /// Scale and zero-point initializers of quantized tensor `i`.
    fn quant_params(&mut self, i: usize) -> Result<(String, String)> {
        let t = &self.tf.tensors[i];
        let q =
            t.quant.as_ref().ok_or_else(|| self.unsupported(&format!("tensor '{}' has no scale", t.name)))?;
        let n = q.scale.len();
        let shape = if n == 1 { vec![] } else { vec![n] };
        let scale = Const::f32(shape.clone(), q.scale.clone());
        let zeros: Vec<i64> =
            (0..n).map(|c| q.zero_point.get(c).or(q.zero_point.first()).copied().unwrap_or(0)).collect();
        let zero = match t.dtype {
            TensorType::Uint8 => Const {
                shape,
                data: crate::constant::ConstData::U8(zeros.iter().map(|&z| z.clamp(0, 255) as u8).collect()),
            },
            _ => Const {
                shape,
                data: crate::constant::ConstData::I8(
                    zeros.iter().map(|&z| z.clamp(-128, 127) as i8).collect(),
                ),
            },
        };
        let base = self.name_of(i);
        let s = self.g.constant(&format!("{base}_scale"), &scale);
        let z = self.g.constant(&format!("{base}_zero_point"), &zero);
        Ok((s, z))
    }
}
