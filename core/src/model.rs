//! Loading an ONNX model: decoding, refusing what tract cannot run, applying
//! input-shape overrides and inferring every tensor's concrete type and shape.
//!
//! A [`Model`] keeps the decoded ONNX protobuf (so that halves can be cut out
//! of it at ONNX-node granularity) and its [`LayerGraph`].

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use prost::Message;
use tract_onnx::pb;
use tract_onnx::prelude::*;
use tract_onnx::tract_hir::infer::Factoid;

pub use crate::budget::ModelLimits;
use crate::error::{Error, Result, TractContext};
use crate::graph::{LayerGraph, TensorFacts};

pub use tandem_types::InputShapes;

/// A loaded ONNX model: its protobuf, its layer DAG, and where it came from.
#[derive(Clone)]
pub struct Model {
    proto: Arc<pb::ModelProto>,
    /// Directory of the file, for models with external data.
    model_dir: Option<String>,
    origin: String,
    graph: Arc<LayerGraph>,
    input_shapes: InputShapes,
    /// Every tensor of the graph at once (bytes): what running it may hold.
    working_bytes: u64,
}

impl fmt::Debug for Model {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Model")
            .field("origin", &self.origin)
            .field("nodes", &self.graph.nodes().len())
            .finish()
    }
}

impl Model {
    /// Loads a model from an ONNX or TFLite file, within the default
    /// [`ModelLimits`]. A TFLite file is translated to ONNX once (see
    /// [`onnx_bytes_of`]).
    pub fn from_path(path: impl AsRef<Path>, input_shapes: &InputShapes) -> Result<Model> {
        Self::from_path_within(path, input_shapes, &ModelLimits::default())
    }

    /// Loads a model from an ONNX or TFLite file, refusing one whose tensors
    /// pass `limits`.
    pub fn from_path_within(
        path: impl AsRef<Path>,
        input_shapes: &InputShapes,
        limits: &ModelLimits,
    ) -> Result<Model> {
        let path = path.as_ref();
        let bytes = onnx_bytes_of(path)?;
        let dir = path.parent().and_then(|d| d.to_str()).map(str::to_string);
        Self::load(&bytes, path.display().to_string(), dir, input_shapes, limits)
    }

    /// Loads a model from ONNX bytes read from `path` (as by
    /// [`onnx_bytes_of`]), which names it and locates its external data;
    /// within the default [`ModelLimits`].
    pub fn from_path_bytes(
        path: impl AsRef<Path>,
        bytes: &[u8],
        input_shapes: &InputShapes,
    ) -> Result<Model> {
        let path = path.as_ref();
        let dir = path.parent().and_then(|d| d.to_str()).map(str::to_string);
        Self::load(bytes, path.display().to_string(), dir, input_shapes, &ModelLimits::default())
    }

    /// Loads a model from ONNX (or TFLite) bytes, within the default [`ModelLimits`].
    pub fn from_bytes(bytes: &[u8], input_shapes: &InputShapes) -> Result<Model> {
        Self::from_bytes_within(bytes, input_shapes, &ModelLimits::default())
    }

    /// Loads a model from ONNX bytes (a peer's, say), refusing one whose
    /// tensors pass `limits` before tract allocates them.
    pub fn from_bytes_within(
        bytes: &[u8],
        input_shapes: &InputShapes,
        limits: &ModelLimits,
    ) -> Result<Model> {
        Self::load(bytes, "<bytes>".to_string(), None, input_shapes, limits)
    }

    fn load(
        bytes: &[u8],
        origin: String,
        model_dir: Option<String>,
        input_shapes: &InputShapes,
        limits: &ModelLimits,
    ) -> Result<Model> {
        let translated;
        let bytes = if tandem_tflite::is_tflite(bytes) {
            translated = onnx_bytes_of_tflite(bytes, &origin)?;
            translated.as_slice()
        } else {
            bytes
        };
        let not_onnx = |reason: String| Error::NotOnnx { origin: Some(origin.clone()), reason };
        if bytes.is_empty() {
            return Err(not_onnx("the file is empty".into()));
        }
        let mut proto =
            pb::ModelProto::decode(bytes).map_err(|e| not_onnx(format!("protobuf decoding failed: {e}")))?;
        let graph = proto.graph.as_ref().ok_or_else(|| not_onnx("no graph in the model".into()))?;
        if proto.ir_version <= 0 || proto.opset_import.is_empty() {
            return Err(not_onnx("missing ir_version or opset_import".into()));
        }
        if graph.node.is_empty() {
            return Err(not_onnx("the graph has no nodes".into()));
        }
        if graph.output.is_empty() {
            return Err(not_onnx("the graph has no outputs".into()));
        }
        check_ops(graph)?;
        // What the file declares, before tract allocates any of it.
        crate::budget::check_proto(&proto, input_shapes, limits)?;
        crate::concretize::bind_symbols(&mut proto, input_shapes);
        if let Some(graph) = proto.graph.as_mut() {
            crate::workaround::unfold_dequantize_before_softmax(graph);
        }
        // tract's ONNX parser panics on some malformed files (found by
        // fuzzing: a missing map key in tract-onnx's model.rs); a bad file
        // is an error here, never a panic (nor a panic's message).
        let facts = crate::guard::caught(
            || "parsing".into(),
            || infer_facts(&proto, model_dir.as_deref(), input_shapes),
        )
        .map_err(|e| match e {
            // A tensor folded while inferring shapes that cannot be allocated.
            Error::Tract { message, .. } if message.contains("failed to allocate") => Error::Tract {
                context: "inferring its shapes (a tensor it computes is too large to allocate)".into(),
                message,
            },
            Error::Tract { message, .. } => not_onnx(format!("tract could not parse it ({message})")),
            other => other,
        })?;
        crate::concretize::fold_shape_nodes(&mut proto, &facts);
        let graph = proto.graph.as_ref().ok_or_else(|| not_onnx("no graph in the model".into()))?;
        let graph = LayerGraph::build(graph, &facts)?;
        let working_bytes = crate::budget::check_graph(&graph, limits)?;
        Ok(Model {
            working_bytes,
            proto: Arc::new(proto),
            model_dir,
            origin,
            graph: Arc::new(graph),
            input_shapes: input_shapes.clone(),
        })
    }

    /// The layer DAG.
    pub fn graph(&self) -> &LayerGraph {
        &self.graph
    }

    /// The decoded ONNX protobuf.
    pub fn proto(&self) -> &pb::ModelProto {
        &self.proto
    }

    /// Where the model was loaded from (a path, or `<bytes>`).
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Bytes of every tensor of its graph (weights, inputs, intermediates,
    /// outputs): an upper bound of what running it holds, which the
    /// handheld counts against its loaded-model budget.
    pub fn working_bytes(&self) -> u64 {
        self.working_bytes
    }

    /// The input-shape overrides the model was loaded with.
    pub fn input_shapes(&self) -> &InputShapes {
        &self.input_shapes
    }

    /// A short name: the file stem, or the graph name.
    pub fn name(&self) -> String {
        Path::new(&self.origin)
            .file_stem()
            .and_then(|s| s.to_str())
            .filter(|_| self.origin != "<bytes>")
            .map(str::to_string)
            .or_else(|| self.proto.graph.as_ref().map(|g| g.name.clone()))
            .unwrap_or_else(|| "model".into())
    }

    /// A metadata property of the ONNX file.
    pub fn metadata(&self, key: &str) -> Option<&str> {
        self.proto.metadata_props.iter().find(|p| p.key == key).map(|p| p.value.as_str())
    }

    /// Parses `proto` (a whole model or a half cut from this one) with tract,
    /// fixes its inputs to concrete facts, and optimizes it.
    pub(crate) fn optimize(&self, proto: &pb::ModelProto, what: &str) -> Result<TypedModel> {
        let onnx = tract_onnx::onnx();
        let parsed = onnx.parse(proto, self.model_dir.as_deref()).tract(|| format!("parsing {what}"))?;
        if !parsed.unresolved_inputs.is_empty() {
            return Err(Error::Tract {
                context: format!("parsing {what}"),
                message: format!("unresolved tensors: {}", parsed.unresolved_inputs.join(", ")),
            });
        }
        let mut model = parsed.model;
        let input_names: Vec<String> = model
            .input_outlets()
            .tract(|| format!("listing inputs of {what}"))?
            .iter()
            .map(|o| model.node(o.node).name.clone())
            .collect();
        for (ix, name) in input_names.iter().enumerate() {
            let info = self.graph.tensor_by_name(name).ok_or_else(|| Error::UnknownTensor(name.clone()))?;
            let fact = InferenceFact::dt_shape(info.dtype, info.shape.clone());
            model.set_input_fact(ix, fact).tract(|| format!("setting input '{name}' of {what}"))?;
        }
        let typed = model.into_typed().tract(|| format!("typing {what}"))?;
        let optimized = typed.clone().into_optimized().tract(|| format!("optimizing {what}"))?;
        if !evaluates_dummy(&optimized)? {
            return Ok(optimized);
        }
        // tract 0.23.9 can leave a placeholder op in an optimized plan (seen
        // on a DAG where one Relu is applied to the same tensor by several
        // nodes, each a model output). Such a plan fails when run, so fall
        // back to the decluttered model, then to the plain typed one.
        tracing::warn!(what, "tract's optimized plan holds a Dummy op; using the decluttered model");
        let decluttered = typed.clone().into_decluttered().tract(|| format!("decluttering {what}"))?;
        if !evaluates_dummy(&decluttered)? {
            return Ok(decluttered);
        }
        Ok(typed)
    }
}

/// The ONNX bytes of the model file at `path`: the file itself, or, for a
/// TFLite file (the `TFL3` flatbuffer identifier at bytes 4..8, whatever its
/// extension), its translation to ONNX, made once and cached by the SHA-256
/// of the TFLite bytes (see [`tandem_tflite::cache`]).
pub fn onnx_bytes_of(path: impl AsRef<Path>) -> Result<Vec<u8>> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|source| Error::Io { path: path.to_path_buf(), source })?;
    if tandem_tflite::is_tflite(&bytes) {
        return onnx_bytes_of_tflite(&bytes, &path.display().to_string());
    }
    Ok(bytes)
}

/// The cached ONNX translation of TFLite bytes (from `origin`, for errors).
pub fn onnx_bytes_of_tflite(bytes: &[u8], origin: &str) -> Result<Vec<u8>> {
    tandem_tflite::cache::onnx_bytes(bytes)
        .map_err(|source| Error::Tflite { origin: origin.to_string(), source: Box::new(source) })
}

/// Whether running `model` would evaluate one of tract's placeholder ops.
fn evaluates_dummy(model: &TypedModel) -> Result<bool> {
    let order = model.eval_order().tract(|| "ordering the plan".into())?;
    Ok(order.iter().any(|&n| model.node(n).op().name() == "Dummy"))
}

/// Refuses ops that tract has no implementation for, naming the first one.
fn check_ops(graph: &pb::GraphProto) -> Result<()> {
    let onnx = tract_onnx::onnx();
    fn walk(graph: &pb::GraphProto, onnx: &tract_onnx::Onnx) -> Result<()> {
        for node in &graph.node {
            if !onnx.op_register.0.contains_key(&node.op_type) {
                return Err(Error::UnsupportedOp {
                    node: node_display_name(node, 0),
                    op: node.op_type.clone(),
                    domain: node.domain.clone(),
                });
            }
            for attr in &node.attribute {
                for g in attr.g.iter().chain(attr.graphs.iter()) {
                    walk(g, onnx)?;
                }
            }
        }
        Ok(())
    }
    walk(graph, &onnx)
}

/// The name tract gives an ONNX node: its own, else its first output's.
pub(crate) fn node_display_name(node: &pb::NodeProto, index: usize) -> String {
    if !node.name.is_empty() {
        node.name.clone()
    } else if let Some(o) = node.output.first().filter(|o| !o.is_empty()) {
        o.clone()
    } else {
        format!("{index}-{}", node.op_type)
    }
}

/// Infers the concrete type and shape of every tensor in the model.
fn infer_facts(
    proto: &pb::ModelProto,
    model_dir: Option<&str>,
    overrides: &InputShapes,
) -> Result<TensorFacts> {
    let onnx = tract_onnx::onnx();
    let parsed = onnx.parse(proto, model_dir).tract(|| "parsing the model".into())?;
    if !parsed.unresolved_inputs.is_empty() {
        return Err(Error::NotOnnx {
            origin: None,
            reason: format!("nodes use undefined tensors: {}", parsed.unresolved_inputs.join(", ")),
        });
    }
    let mut model = parsed.model;
    let inputs: Vec<OutletId> = model.input_outlets().tract(|| "listing inputs".into())?.to_vec();
    let names: Vec<String> = inputs.iter().map(|o| model.node(o.node).name.clone()).collect();
    for name in overrides.names() {
        if !names.iter().any(|n| n == name) {
            return Err(Error::UnknownInput { name: name.to_string(), known: names.clone() });
        }
    }
    for (ix, name) in names.iter().enumerate() {
        let fact = model.input_fact(ix).tract(|| format!("reading input '{name}'"))?.clone();
        let dt = fact.datum_type.concretize().unwrap_or(DatumType::F32);
        if let Some(shape) = overrides.shape(name) {
            model
                .set_input_fact(ix, InferenceFact::dt_shape(dt, shape.to_vec()))
                .tract(|| format!("overriding input '{name}'"))?;
        } else {
            let concrete = fact.shape.as_concrete_finite().ok().flatten();
            if concrete.is_none() {
                return Err(Error::SymbolicInput { input: name.clone(), shape: format!("{:?}", fact.shape) });
            }
        }
    }
    model.analyse(false).tract(|| "inferring shapes".into())?;
    let mut facts = TensorFacts::default();
    let mut missing = vec![];
    for (name, outlet) in &parsed.outlets_by_name {
        let fact = model.outlet_fact(*outlet).tract(|| format!("reading fact of '{name}'"))?;
        match concrete_fact(fact) {
            Some((dt, shape)) => {
                facts.insert(name.clone(), dt, shape);
            }
            None => missing.push(name.clone()),
        }
    }
    for name in &names {
        if let Some(shape) = overrides.shape(name) {
            let dt = facts.get(name).map(|f| f.0).unwrap_or(DatumType::F32);
            facts.insert(name.clone(), dt, shape.to_vec());
        }
    }
    if !missing.is_empty() {
        typed_fallback(proto, model_dir, &names, &mut facts, &missing)?;
    }
    Ok(facts)
}

fn concrete_fact(fact: &InferenceFact) -> Option<(DatumType, Vec<usize>)> {
    let dt = fact.datum_type.concretize()?;
    let shape = fact.shape.as_concrete_finite().ok().flatten()?;
    Some((normalize_dt(dt), shape.to_vec()))
}

/// Shape computations run as TDim inside tract; on the wire and in ONNX they are i64.
pub(crate) fn normalize_dt(dt: DatumType) -> DatumType {
    if dt == DatumType::TDim {
        DatumType::I64
    } else {
        dt
    }
}

/// Infers the tensors tract's inference pass left open by translating to a
/// typed model in which they are all outputs.
fn typed_fallback(
    proto: &pb::ModelProto,
    model_dir: Option<&str>,
    input_names: &[String],
    facts: &mut TensorFacts,
    missing: &[String],
) -> Result<()> {
    let mut tapped = proto.clone();
    if let Some(g) = tapped.graph.as_mut() {
        g.output =
            missing.iter().map(|n| pb::ValueInfoProto { name: n.clone(), ..Default::default() }).collect();
        g.value_info.clear();
    }
    let onnx = tract_onnx::onnx();
    let mut model = onnx.parse(&tapped, model_dir).tract(|| "parsing the model".into())?.model;
    for (ix, name) in input_names.iter().enumerate() {
        if let Some((dt, shape)) = facts.get(name).cloned() {
            model
                .set_input_fact(ix, InferenceFact::dt_shape(dt, shape))
                .tract(|| format!("setting input '{name}'"))?;
        }
    }
    let typed = model.into_typed().tract(|| "inferring shapes".into())?;
    for (ix, name) in missing.iter().enumerate() {
        let fact = typed.output_fact(ix).tract(|| format!("reading fact of '{name}'"))?;
        let shape = fact.shape.as_concrete().ok_or_else(|| Error::UnknownShape(name.clone()))?;
        facts.insert(name.clone(), normalize_dt(fact.datum_type), shape.to_vec());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_not_onnx() {
        for bytes in [&b""[..], b"hello world, not a model", &[0xff; 64]] {
            let err = Model::from_bytes(bytes, &InputShapes::none()).expect_err("garbage");
            assert!(matches!(err, Error::NotOnnx { .. }), "{err}");
        }
    }

    #[test]
    fn missing_file_names_the_path() {
        let err = Model::from_path("/nonexistent/model.onnx", &InputShapes::none()).expect_err("missing");
        assert!(err.to_string().contains("/nonexistent/model.onnx"), "{err}");
    }
}
