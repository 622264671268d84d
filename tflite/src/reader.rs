//! Reading a TFLite flatbuffer into plain Rust values: subgraph 0's tensors
//! (shapes, types, constant data, quantization, sparsity) and operators.
//!
//! Every access goes through planus's checked readers, and every index the
//! file gives (tensor, buffer, opcode) is checked here, so a truncated or
//! hostile file is an [`Error`], never a panic. Operator options stay as
//! planus references and are read by the translations that need them.

use crate::error::{Error, FlatbufferContext, Result};
use planus::ReadAsRoot;
use tandem_tflite_schema::builtin_name;
use tandem_tflite_schema::tflite;

/// The flatbuffer file identifier of TFLite models, at bytes 4..8.
pub const FILE_IDENTIFIER: &[u8; 4] = b"TFL3";

/// Builtin codes of the ops that hold state or call other subgraphs.
const CALL: i32 = 31;
const CUSTOM: i32 = 32;

/// Whether `bytes` carry TFLite's flatbuffer identifier.
pub fn is_tflite(bytes: &[u8]) -> bool {
    bytes.get(4..8) == Some(FILE_IDENTIFIER.as_slice())
}

/// A TFLite model, read: its subgraphs (the first is the model; others are
/// called by control-flow ops).
pub(crate) struct TfModel<'a> {
    /// Every subgraph, by index.
    pub graphs: Vec<TfGraph<'a>>,
    /// The model's description string, if any.
    pub description: Option<String>,
}

/// One subgraph.
pub(crate) struct TfGraph<'a> {
    /// Its index in the file.
    pub index: usize,
    /// Every tensor of the subgraph, by index.
    pub tensors: Vec<TfTensor<'a>>,
    /// Operators in execution order.
    pub operators: Vec<TfOperator<'a>>,
    /// Indices of the subgraph's inputs.
    pub inputs: Vec<usize>,
    /// Indices of the subgraph's outputs.
    pub outputs: Vec<usize>,
}

/// One TFLite tensor.
pub(crate) struct TfTensor<'a> {
    /// Its name in the file (may be empty or repeated).
    pub name: String,
    /// Its static shape (TFLite writes 1 where `signature` says -1).
    pub shape: Vec<i64>,
    /// The shape with -1 for dimensions unknown before run time, if given.
    pub signature: Option<Vec<i64>>,
    /// The element type.
    pub dtype: tflite::TensorType,
    /// The constant's little-endian bytes, when the tensor has a buffer.
    pub data: Option<&'a [u8]>,
    /// Affine quantization, when the tensor has scales.
    pub quant: Option<Quantization>,
    /// How a sparse constant is stored, when it is.
    pub sparsity: Option<Sparsity>,
    /// A resource variable (state across calls), which ONNX cannot hold.
    pub is_variable: bool,
}

/// `real = scale * (q - zero_point)`, per tensor or along one axis.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Quantization {
    /// One scale per tensor, or one per slice along `axis`.
    pub scale: Vec<f32>,
    /// Zero points, as many as scales (or one).
    pub zero_point: Vec<i64>,
    /// The axis of per-channel scales.
    pub axis: usize,
}

/// TFLite's sparse storage (a TACO-like format; see schema.fbs).
#[derive(Clone, Debug)]
pub(crate) struct Sparsity {
    /// Traversal order of the dense dimensions, then of the block dimensions.
    pub traversal_order: Vec<usize>,
    /// For each block dimension, the dense dimension it splits.
    pub block_map: Vec<usize>,
    /// One entry per traversed dimension.
    pub dims: Vec<SparseDim>,
}

/// How one traversed dimension is stored.
#[derive(Clone, Debug)]
pub(crate) enum SparseDim {
    /// Every index present, `size` of them.
    Dense {
        /// Its size.
        size: usize,
    },
    /// CSR: `segments[i]..segments[i + 1]` index into `indices`.
    Csr {
        /// Row pointers.
        segments: Vec<usize>,
        /// Column indices.
        indices: Vec<usize>,
    },
}

/// One operator of subgraph 0.
pub(crate) struct TfOperator<'a> {
    /// The builtin code (`CUSTOM` for custom ops).
    pub code: i32,
    /// `CONV_2D`, or a custom op's code.
    pub name: String,
    /// Input tensor indices; `None` for an omitted optional input (-1).
    pub inputs: Vec<Option<usize>>,
    /// Output tensor indices.
    pub outputs: Vec<usize>,
    /// The flatbuffer table, for its options.
    pub raw: tflite::OperatorRef<'a>,
}

impl TfOperator<'_> {
    /// Whether it is a custom op (MediaPipe's, say).
    pub fn is_custom(&self) -> bool {
        self.code == CUSTOM
    }

    /// Whether it calls another subgraph.
    pub fn calls_subgraph(&self) -> bool {
        self.code == CALL
    }
}

/// Reads the model in `bytes`.
pub(crate) fn read(bytes: &[u8]) -> Result<TfModel<'_>> {
    if bytes.len() < 8 {
        return Err(Error::Malformed(format!("{} bytes is too short for a flatbuffer", bytes.len())));
    }
    if !is_tflite(bytes) {
        return Err(Error::Malformed("no TFL3 identifier at bytes 4..8".into()));
    }
    let model = tflite::ModelRef::read_as_root(bytes).context(|| "the root table".into())?;
    let codes = model.operator_codes().context(|| "operator codes".into())?;
    let buffers = model.buffers().context(|| "buffers".into())?;
    let subgraphs = model
        .subgraphs()
        .context(|| "subgraphs".into())?
        .ok_or_else(|| Error::Malformed("no subgraphs".into()))?;
    if subgraphs.is_empty() {
        return Err(Error::Malformed("no subgraphs".into()));
    }
    let description = model.description().context(|| "description".into())?.map(str::to_string);
    let mut graphs = Vec::new();
    for (index, graph) in subgraphs.into_iter().enumerate() {
        let graph = graph.context(|| format!("subgraph {index}"))?;
        graphs.push(read_graph(bytes, index, graph, codes, buffers)?);
    }
    Ok(TfModel { graphs, description })
}

type Codes<'a> = Option<planus::Vector<'a, planus::Result<tflite::OperatorCodeRef<'a>>>>;
type Buffers<'a> = Option<planus::Vector<'a, planus::Result<tflite::BufferRef<'a>>>>;

fn read_graph<'a>(
    bytes: &'a [u8],
    index: usize,
    graph: tflite::SubGraphRef<'a>,
    codes: Codes<'a>,
    buffers: Buffers<'a>,
) -> Result<TfGraph<'a>> {
    let raw_tensors = graph.tensors().context(|| format!("subgraph {index}'s tensors"))?;
    let mut tensors = Vec::new();
    for (ix, t) in raw_tensors.into_iter().flatten().enumerate() {
        let t = t.context(|| format!("tensor {ix}"))?;
        tensors.push(read_tensor(bytes, ix, t, buffers)?);
    }
    let tensor_index = |i: i32, what: &dyn Fn() -> String| -> Result<usize> {
        usize::try_from(i)
            .ok()
            .filter(|&i| i < tensors.len())
            .ok_or_else(|| Error::Malformed(format!("{} names tensor {i} of {}", what(), tensors.len())))
    };
    let ints =
        |v: Option<planus::Vector<'_, i32>>| v.map(|v| v.iter().collect::<Vec<i32>>()).unwrap_or_default();
    let inputs = ints(graph.inputs().context(|| "graph inputs".into())?)
        .into_iter()
        .map(|i| tensor_index(i, &|| "a graph input".into()))
        .collect::<Result<Vec<_>>>()?;
    let outputs = ints(graph.outputs().context(|| "graph outputs".into())?)
        .into_iter()
        .map(|i| tensor_index(i, &|| "a graph output".into()))
        .collect::<Result<Vec<_>>>()?;

    let mut operators = Vec::new();
    for (ix, op) in graph.operators().context(|| "operators".into())?.into_iter().flatten().enumerate() {
        let raw = op.context(|| format!("operator {ix}"))?;
        let opcode_index = raw.opcode_index().context(|| format!("operator {ix}'s opcode"))? as usize;
        let code = codes
            .and_then(|c| c.get(opcode_index))
            .ok_or_else(|| {
                Error::Malformed(format!("operator {ix} names opcode {opcode_index}, which is not there"))
            })?
            .context(|| format!("opcode {opcode_index}"))?;
        let deprecated =
            i32::from(code.deprecated_builtin_code().context(|| format!("opcode {opcode_index}"))?);
        // A code newer than this schema is an unknown tag: named by number.
        let builtin = match code.builtin_code() {
            Ok(b) => b as i32,
            Err(planus::Error {
                error_kind: planus::errors::ErrorKind::UnknownEnumTag { source }, ..
            }) => i32::try_from(source.tag).unwrap_or(i32::MAX),
            Err(source) => {
                return Err(Error::Flatbuffer { context: format!("opcode {opcode_index}"), source })
            }
        };
        // Files older than schema 3a only set the deprecated field.
        let code_value = builtin.max(deprecated);
        let name = if code_value == CUSTOM {
            code.custom_code().context(|| format!("opcode {opcode_index}"))?.unwrap_or("CUSTOM").to_string()
        } else {
            builtin_name(code_value).map(str::to_string).unwrap_or_else(|| format!("BUILTIN_{code_value}"))
        };
        let what = || format!("operator {ix} ({name})");
        let op_inputs = ints(raw.inputs().context(what)?)
            .into_iter()
            .map(|i| if i < 0 { Ok(None) } else { tensor_index(i, &what).map(Some) })
            .collect::<Result<Vec<_>>>()?;
        let op_outputs = ints(raw.outputs().context(what)?)
            .into_iter()
            .map(|i| tensor_index(i, &what))
            .collect::<Result<Vec<_>>>()?;
        operators.push(TfOperator { code: code_value, name, inputs: op_inputs, outputs: op_outputs, raw });
    }
    Ok(TfGraph { index, tensors, operators, inputs, outputs })
}

fn read_tensor<'a>(
    bytes: &'a [u8],
    ix: usize,
    t: tflite::TensorRef<'a>,
    buffers: Buffers<'a>,
) -> Result<TfTensor<'a>> {
    let what = || format!("tensor {ix}");
    let name = t.name().context(what)?.unwrap_or_default().to_string();
    let dims = |v: Option<planus::Vector<'a, i32>>| v.map(|v| v.iter().map(i64::from).collect::<Vec<i64>>());
    let shape = dims(t.shape().context(what)?).unwrap_or_default();
    if let Some(d) = shape.iter().find(|&&d| d < 0) {
        return Err(Error::Malformed(format!("tensor {ix} ('{name}') has dimension {d}")));
    }
    let signature = dims(t.shape_signature().context(what)?).filter(|s| s.len() == shape.len());
    let dtype = t.type_().context(what)?;
    let buffer = t.buffer().context(what)? as usize;
    // Buffer 0 is the always-empty buffer of non-constant tensors.
    let data = if buffer == 0 {
        None
    } else {
        let b = buffers
            .and_then(|b| b.get(buffer))
            .ok_or_else(|| {
                Error::Malformed(format!("tensor {ix} ('{name}') names buffer {buffer}, which is not there"))
            })?
            .context(|| format!("buffer {buffer}"))?;
        let inline = b.data().context(|| format!("buffer {buffer}"))?;
        let offset = b.offset().context(|| format!("buffer {buffer}"))?;
        let size = b.size().context(|| format!("buffer {buffer}"))?;
        match inline {
            Some(d) if !d.is_empty() => Some(d),
            // Models over 2 GiB keep buffers after the flatbuffer.
            _ if offset > 1 => {
                let start = usize::try_from(offset).ok();
                let end = start.and_then(|s| s.checked_add(usize::try_from(size).ok()?));
                match (start, end) {
                    (Some(s), Some(e)) if e <= bytes.len() => Some(&bytes[s..e]),
                    _ => {
                        return Err(Error::Malformed(format!(
                            "buffer {buffer} lies at {offset}+{size}, past the file's {} bytes",
                            bytes.len()
                        )))
                    }
                }
            }
            // A constant with no elements (a shape of [0]) has empty data;
            // other tensors may have their own empty buffer (old converters).
            _ if shape.contains(&0) => Some(&bytes[..0]),
            _ => None,
        }
    };
    let quant = match t.quantization().context(what)? {
        Some(q) => {
            let scale: Vec<f32> = q.scale().context(what)?.map(|v| v.iter().collect()).unwrap_or_default();
            let zero_point: Vec<i64> =
                q.zero_point().context(what)?.map(|v| v.iter().collect()).unwrap_or_default();
            let axis = q.quantized_dimension().context(what)?;
            if q.details().context(what)?.is_some() {
                return Err(Error::Malformed(format!(
                    "tensor {ix} ('{name}') uses custom quantization, which cannot be translated"
                )));
            }
            if scale.is_empty() {
                None
            } else {
                let axis =
                    usize::try_from(axis).ok().filter(|&a| scale.len() == 1 || a < shape.len()).ok_or_else(
                        || Error::Malformed(format!("tensor {ix} ('{name}') quantized along axis {axis}")),
                    )?;
                if !(zero_point.is_empty() || zero_point.len() == 1 || zero_point.len() == scale.len()) {
                    return Err(Error::Malformed(format!(
                        "tensor {ix} ('{name}') has {} scales and {} zero points",
                        scale.len(),
                        zero_point.len()
                    )));
                }
                Some(Quantization { scale, zero_point, axis })
            }
        }
        None => None,
    };
    let sparsity = match t.sparsity().context(what)? {
        Some(s) => Some(read_sparsity(ix, s)?),
        None => None,
    };
    let is_variable = t.is_variable().context(what)?;
    Ok(TfTensor { name, shape, signature, dtype, data, quant, sparsity, is_variable })
}

fn read_sparsity(ix: usize, s: tflite::SparsityParametersRef<'_>) -> Result<Sparsity> {
    let what = || format!("tensor {ix}'s sparsity");
    let bad = |m: &str| Error::Malformed(format!("tensor {ix}'s sparsity: {m}"));
    let to_usize = |v: Option<planus::Vector<'_, i32>>| -> Result<Vec<usize>> {
        v.map(|v| v.iter().map(|i| usize::try_from(i).map_err(|_| bad("a negative index"))).collect())
            .unwrap_or(Ok(Vec::new()))
    };
    let traversal_order = to_usize(s.traversal_order().context(what)?)?;
    let block_map = to_usize(s.block_map().context(what)?)?;
    let mut dims = Vec::new();
    for d in s.dim_metadata().context(what)?.into_iter().flatten() {
        let d = d.context(what)?;
        match d.format().context(what)? {
            tflite::DimensionType::Dense => {
                let size =
                    usize::try_from(d.dense_size().context(what)?).map_err(|_| bad("a negative size"))?;
                dims.push(SparseDim::Dense { size });
            }
            tflite::DimensionType::SparseCsr => {
                let segments =
                    index_vector(d.array_segments().context(what)?).ok_or_else(|| bad("no segments"))??;
                let indices =
                    index_vector(d.array_indices().context(what)?).ok_or_else(|| bad("no indices"))??;
                dims.push(SparseDim::Csr { segments, indices });
            }
        }
    }
    Ok(Sparsity { traversal_order, block_map, dims })
}

fn index_vector(v: Option<tflite::SparseIndexVectorRef<'_>>) -> Option<Result<Vec<usize>>> {
    let ctx = || "a sparse index vector".to_string();
    let read = |v: tflite::SparseIndexVectorRef<'_>| -> Result<Vec<usize>> {
        Ok(match v {
            tflite::SparseIndexVectorRef::Int32Vector(v) => v
                .values()
                .context(ctx)?
                .map(|v| v.iter().map(|i| usize::try_from(i).unwrap_or(usize::MAX)).collect())
                .unwrap_or_default(),
            tflite::SparseIndexVectorRef::Uint16Vector(v) => {
                v.values().context(ctx)?.map(|v| v.iter().map(usize::from).collect()).unwrap_or_default()
            }
            tflite::SparseIndexVectorRef::Uint8Vector(v) => v
                .values()
                .context(ctx)?
                .map(|v| v.iter().map(|&b| usize::from(b)).collect())
                .unwrap_or_default(),
        })
    };
    v.map(read)
}
