//! The bytes of an inference request ([`encode_infer`]: JSON `data`
//! arrays, or the binary tensor extension) and the checks of an answer
//! ([`decode_infer`]), without I/O: what the server sent is taken apart
//! here and trusted only once every length, shape, datatype and name has
//! been checked against what was asked.
//!
//! The binary tensor extension (Triton's, which KServe implements): the
//! body is a JSON header of `Inference-Header-Content-Length` bytes, then
//! each tensor's raw little-endian bytes in the header's order, each
//! tensor saying its length in `parameters.binary_data_size`.

use serde::de::{DeserializeSeed, Deserializer, SeqAccess, Visitor};
use serde::ser::{SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};
use tandem_types::WireType;

use crate::client::{ModelMetadata, TensorSpec};
use crate::error::OipError;
use crate::tensor::{datatype_name, parse_datatype, OipTensor, OIP_DATATYPES};

/// An encoded inference request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InferRequestBody {
    /// The whole body.
    pub body: Vec<u8>,
    /// The JSON header's length when the body uses the binary extension
    /// (the `Inference-Header-Content-Length` header), else `None`.
    pub header_len: Option<usize>,
}

impl InferRequestBody {
    /// The body's Content-Type.
    pub fn content_type(&self) -> &'static str {
        if self.header_len.is_some() {
            "application/octet-stream"
        } else {
            "application/json"
        }
    }
}

/// Why an answer cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AnswerError {
    /// The answer breaks the protocol or contradicts itself (what is wrong).
    Malformed(String),
    /// A tensor of a protocol datatype Tandem does not carry.
    Unsupported {
        /// The tensor's name.
        tensor: String,
        /// The datatype.
        datatype: String,
    },
}

/// Why a request cannot be sent.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// An input tensor whose bytes do not fit its shape and datatype.
    #[error("input {0}")]
    Input(OipError),
    /// Two inputs of one name.
    #[error("input '{0}' is given twice")]
    InputTwice(String),
    /// A NaN or an infinity in a JSON request.
    #[error("input '{0}' holds a NaN or an infinity, which JSON cannot carry: use the binary extension")]
    NotFinite(String),
    /// One output asked for twice.
    #[error("output '{0}' is asked for twice")]
    OutputTwice(String),
    /// The request's JSON could not be written.
    #[error("encoding the request: {0}")]
    Json(serde_json::Error),
}

fn malformed<T>(reason: impl Into<String>) -> Result<T, AnswerError> {
    Err(AnswerError::Malformed(reason.into()))
}

#[derive(Serialize)]
struct RequestHeader<'a> {
    id: &'a str,
    inputs: Vec<RequestInput<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    outputs: Option<Vec<RequestOutput<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parameters: Option<RequestParameters>,
}

#[derive(Serialize)]
struct RequestInput<'a> {
    name: &'a str,
    shape: &'a [usize],
    datatype: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    parameters: Option<BinarySize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<JsonData<'a>>,
}

#[derive(Serialize)]
struct BinarySize {
    binary_data_size: usize,
}

#[derive(Serialize)]
struct RequestOutput<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    parameters: Option<BinaryData>,
}

#[derive(Serialize)]
struct BinaryData {
    binary_data: bool,
}

#[derive(Serialize)]
struct RequestParameters {
    binary_data_output: bool,
}

/// A tensor's elements as a flat JSON array (floats written as the f64 of
/// their value, so the server's parse gives back the same bits).
struct JsonData<'a>(&'a OipTensor);

impl Serialize for JsonData<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let t = self.0;
        let size = t.datatype.size();
        let mut seq = s.serialize_seq(Some(t.data.len() / size))?;
        for c in t.data.chunks_exact(size) {
            match t.datatype {
                WireType::F32 => {
                    seq.serialize_element(&f64::from(f32::from_le_bytes([c[0], c[1], c[2], c[3]])))?
                }
                WireType::F64 => seq.serialize_element(&f64::from_le_bytes([
                    c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7],
                ]))?,
                WireType::I64 => seq.serialize_element(&i64::from_le_bytes([
                    c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7],
                ]))?,
                WireType::I32 => seq.serialize_element(&i32::from_le_bytes([c[0], c[1], c[2], c[3]]))?,
                WireType::U8 => seq.serialize_element(&c[0])?,
                WireType::I8 => seq.serialize_element(&(c[0] as i8))?,
                WireType::Bool => seq.serialize_element(&(c[0] != 0))?,
            }
        }
        seq.end()
    }
}

/// The body of an inference request with request id `id`: `inputs` (each
/// checked against its shape; names unique), asking for `outputs` by name
/// (empty: every output). `binary`: tensors both ways in the binary
/// extension, else JSON `data` arrays (where a NaN or an infinity cannot
/// be written, and is refused). Errors say what is wrong, by tensor.
pub fn encode_infer(
    id: &str,
    inputs: &[OipTensor],
    outputs: &[String],
    binary: bool,
) -> Result<InferRequestBody, RequestError> {
    for (i, t) in inputs.iter().enumerate() {
        t.check().map_err(RequestError::Input)?;
        if inputs[..i].iter().any(|u| u.name == t.name) {
            return Err(RequestError::InputTwice(t.name.clone()));
        }
        if !binary && matches!(t.datatype, WireType::F32 | WireType::F64) {
            let finite = match t.datatype {
                WireType::F32 => {
                    t.data.chunks_exact(4).all(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]).is_finite())
                }
                _ => t.data.chunks_exact(8).all(|c| {
                    f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]).is_finite()
                }),
            };
            if !finite {
                return Err(RequestError::NotFinite(t.name.clone()));
            }
        }
    }
    for (i, o) in outputs.iter().enumerate() {
        if outputs[..i].contains(o) {
            return Err(RequestError::OutputTwice(o.clone()));
        }
    }
    let header = RequestHeader {
        id,
        inputs: inputs
            .iter()
            .map(|t| RequestInput {
                name: &t.name,
                shape: &t.shape,
                datatype: datatype_name(t.datatype),
                parameters: binary.then_some(BinarySize { binary_data_size: t.data.len() }),
                data: (!binary).then_some(JsonData(t)),
            })
            .collect(),
        outputs: (!outputs.is_empty()).then(|| {
            outputs
                .iter()
                .map(|name| RequestOutput {
                    name,
                    parameters: binary.then_some(BinaryData { binary_data: true }),
                })
                .collect()
        }),
        parameters: (binary && outputs.is_empty()).then_some(RequestParameters { binary_data_output: true }),
    };
    let mut body = serde_json::to_vec(&header).map_err(RequestError::Json)?;
    if !binary {
        return Ok(InferRequestBody { body, header_len: None });
    }
    let header_len = body.len();
    body.reserve(inputs.iter().map(|t| t.data.len()).sum());
    for t in inputs {
        body.extend_from_slice(&t.data);
    }
    Ok(InferRequestBody { body, header_len: Some(header_len) })
}

#[derive(Deserialize)]
struct ResponseHeader {
    #[serde(default)]
    model_name: Option<String>,
    #[serde(default)]
    id: Option<String>,
    outputs: Vec<ResponseOutput>,
}

#[derive(Deserialize)]
struct ResponseOutput {
    name: String,
    datatype: String,
    shape: Vec<i64>,
    #[serde(default)]
    parameters: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(default)]
    data: Option<JsonElements>,
}

/// One element of a JSON `data` array, before its datatype is known (the
/// datatype may come after `data` in the object).
#[derive(Clone, Copy, Debug)]
enum Element {
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Null,
}

/// A `data` array's elements, nested arrays flattened in row-major order.
struct JsonElements(Vec<Element>);

impl<'de> Deserialize<'de> for JsonElements {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut out = Vec::new();
        d.deserialize_any(Flatten(&mut out))?;
        Ok(JsonElements(out))
    }
}

struct Flatten<'a>(&'a mut Vec<Element>);

impl<'de> Visitor<'de> for Flatten<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("numbers or booleans, in arrays")
    }
    fn visit_bool<E>(self, v: bool) -> Result<(), E> {
        self.0.push(Element::Bool(v));
        Ok(())
    }
    fn visit_i64<E>(self, v: i64) -> Result<(), E> {
        self.0.push(Element::Int(v));
        Ok(())
    }
    fn visit_u64<E>(self, v: u64) -> Result<(), E> {
        self.0.push(Element::UInt(v));
        Ok(())
    }
    fn visit_f64<E>(self, v: f64) -> Result<(), E> {
        self.0.push(Element::Float(v));
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        self.0.push(Element::Null);
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Flatten(&mut *self.0))?.is_some() {}
        Ok(())
    }
}

impl<'de> DeserializeSeed<'de> for Flatten<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

/// The little-endian bytes of `elements` as `dtype`, each element checked
/// (its JSON type, its range).
fn json_bytes(name: &str, dtype: WireType, elements: &[Element]) -> Result<Vec<u8>, AnswerError> {
    let mut out = Vec::with_capacity(elements.len() * dtype.size());
    let dt = datatype_name(dtype);
    for (i, &e) in elements.iter().enumerate() {
        let bad = |what: &str| {
            AnswerError::Malformed(format!("output '{name}': element {i} of its {dt} data is {what}"))
        };
        if let Element::Null = e {
            return Err(bad("null (a NaN or an infinity, which JSON cannot carry: ask for binary outputs)"));
        }
        match dtype {
            WireType::F32 | WireType::F64 => {
                let v = match e {
                    Element::Float(v) => v,
                    Element::Int(v) => v as f64,
                    Element::UInt(v) => v as f64,
                    _ => return Err(bad("not a number")),
                };
                if dtype == WireType::F64 {
                    out.extend_from_slice(&v.to_le_bytes());
                } else {
                    let f = v as f32;
                    if f.is_infinite() {
                        return Err(bad(&format!("{v}, beyond FP32's range")));
                    }
                    out.extend_from_slice(&f.to_le_bytes());
                }
            }
            WireType::Bool => match e {
                Element::Bool(b) => out.push(u8::from(b)),
                _ => return Err(bad("not true or false")),
            },
            _ => {
                let v: i128 = match e {
                    Element::Int(v) => i128::from(v),
                    Element::UInt(v) => i128::from(v),
                    Element::Float(v) => return Err(bad(&format!("{v}, not an integer"))),
                    _ => return Err(bad("not an integer")),
                };
                let range = || format!("{v}, beyond {dt}'s range");
                match dtype {
                    WireType::I64 => {
                        out.extend_from_slice(&i64::try_from(v).map_err(|_| bad(&range()))?.to_le_bytes())
                    }
                    WireType::I32 => {
                        out.extend_from_slice(&i32::try_from(v).map_err(|_| bad(&range()))?.to_le_bytes())
                    }
                    WireType::U8 => out.push(u8::try_from(v).map_err(|_| bad(&range()))?),
                    _ => out.extend_from_slice(&i8::try_from(v).map_err(|_| bad(&range()))?.to_le_bytes()),
                }
            }
        }
    }
    Ok(out)
}

/// The element type of a datatype the server named for `tensor`.
fn datatype(tensor: &str, name: &str) -> Result<WireType, AnswerError> {
    parse_datatype(name).ok_or_else(|| {
        if OIP_DATATYPES.contains(&name) {
            AnswerError::Unsupported { tensor: tensor.to_string(), datatype: name.to_string() }
        } else {
            AnswerError::Malformed(format!(
                "tensor '{tensor}' has datatype '{name}', which is not the protocol's"
            ))
        }
    })
}

/// The outputs of an inference answer for `model`, request `id`: `body`
/// with its JSON header's length `header_len` (the
/// `Inference-Header-Content-Length` header, `None` when absent: all
/// JSON), checked, in `asked`'s order (empty: every output the server
/// sent, in its order). Refused when the header's length is beyond the
/// body, the JSON is not the protocol's, the answer is for another model
/// or request, an output is missing, repeated or not asked for, a shape
/// is negative or overflows, an output's bytes (binary or JSON) are not
/// its shape × datatype, the binary sizes do not add up to the rest of
/// the body, or a datatype is not one Tandem carries.
pub fn decode_infer(
    model: &str,
    id: &str,
    header_len: Option<usize>,
    body: &[u8],
    asked: &[String],
) -> Result<Vec<OipTensor>, AnswerError> {
    let (header, rest) = match header_len {
        Some(n) if n > body.len() => {
            return malformed(format!(
                "Inference-Header-Content-Length is {n} but the body has {} bytes",
                body.len()
            ))
        }
        Some(n) => body.split_at(n),
        None => (body, &[][..]),
    };
    let header: ResponseHeader = serde_json::from_slice(header)
        .map_err(|e| AnswerError::Malformed(format!("its JSON is not an inference response: {e}")))?;
    if let Some(m) = header.model_name.as_deref().filter(|m| *m != model) {
        return malformed(format!("the answer is for model '{m}'"));
    }
    if let Some(i) = header.id.as_deref().filter(|i| *i != id) {
        return malformed(format!("the answer is for request '{i}', not '{id}'"));
    }
    let mut got: Vec<OipTensor> = Vec::with_capacity(header.outputs.len());
    let mut offset = 0usize;
    for o in header.outputs {
        if got.iter().any(|t| t.name == o.name) {
            return malformed(format!("output '{}' is answered twice", o.name));
        }
        if !asked.is_empty() && !asked.contains(&o.name) {
            return malformed(format!("output '{}' was not asked for (asked: {asked:?})", o.name));
        }
        let dtype = datatype(&o.name, &o.datatype)?;
        let shape =
            o.shape.iter().map(|&d| usize::try_from(d)).collect::<Result<Vec<usize>, _>>().or_else(|_| {
                malformed(format!("output '{}' has shape {:?}, with a negative dimension", o.name, o.shape))
            })?;
        let expected = shape.iter().try_fold(dtype.size(), |n, &d| n.checked_mul(d)).ok_or_else(|| {
            AnswerError::Malformed(format!("output '{}': shape {shape:?} overflows", o.name))
        })?;
        let binary_size = o.parameters.as_ref().and_then(|p| p.get("binary_data_size"));
        let data = match (binary_size, o.data) {
            (Some(_), Some(_)) => {
                return malformed(format!("output '{}' has both JSON data and a binary_data_size", o.name))
            }
            (None, None) => {
                return malformed(format!("output '{}' has neither data nor a binary_data_size", o.name))
            }
            (Some(size), None) => {
                if header_len.is_none() {
                    return malformed(format!(
                        "output '{}' has a binary_data_size but the answer has no Inference-Header-Content-Length",
                        o.name
                    ));
                }
                let size = size.as_u64().and_then(|s| usize::try_from(s).ok()).ok_or_else(|| {
                    AnswerError::Malformed(format!(
                        "output '{}': binary_data_size {size} is not a size",
                        o.name
                    ))
                })?;
                if size != expected {
                    return malformed(format!(
                        "output '{}': binary_data_size {size} but its shape {shape:?} of {} needs {expected} bytes",
                        o.name, o.datatype
                    ));
                }
                let end = offset.checked_add(size).filter(|&e| e <= rest.len()).ok_or_else(|| {
                    AnswerError::Malformed(format!(
                        "output '{}': binary_data_size {size} at byte {offset} runs past the {} bytes after the header",
                        o.name,
                        rest.len()
                    ))
                })?;
                let bytes = rest[offset..end].to_vec();
                offset = end;
                bytes
            }
            (None, Some(JsonElements(elements))) => {
                let count = expected / dtype.size().max(1);
                if elements.len() != count {
                    return malformed(format!(
                        "output '{}' has {} data elements for shape {shape:?} ({count})",
                        o.name,
                        elements.len()
                    ));
                }
                json_bytes(&o.name, dtype, &elements)?
            }
        };
        let t = OipTensor { name: o.name, datatype: dtype, shape, data };
        if let Err(e) = t.check() {
            return malformed(format!("output {e}"));
        }
        got.push(t);
    }
    if offset != rest.len() {
        return malformed(format!(
            "{} bytes after the header but the outputs' binary_data_size add up to {offset}",
            rest.len()
        ));
    }
    if asked.is_empty() {
        if got.is_empty() {
            return malformed("the answer has no outputs");
        }
        return Ok(got);
    }
    let missing: Vec<&String> = asked.iter().filter(|a| !got.iter().any(|t| &t.name == *a)).collect();
    if !missing.is_empty() {
        return malformed(format!("output(s) {missing:?} asked for are missing"));
    }
    let mut ordered = Vec::with_capacity(asked.len());
    for a in asked {
        if let Some(i) = got.iter().position(|t| &t.name == a) {
            ordered.push(got.swap_remove(i));
        }
    }
    Ok(ordered)
}

#[derive(Deserialize)]
struct MetadataBody {
    name: String,
    #[serde(default)]
    inputs: Vec<SpecBody>,
    #[serde(default)]
    outputs: Vec<SpecBody>,
}

#[derive(Deserialize)]
struct SpecBody {
    name: String,
    datatype: String,
    shape: Vec<i64>,
}

/// A model's metadata answer, checked: the model's own name, each tensor
/// named once, a protocol datatype, dimensions of -1 (any) or more.
pub fn decode_metadata(model: &str, body: &[u8]) -> Result<ModelMetadata, AnswerError> {
    let m: MetadataBody = match serde_json::from_slice(body) {
        Ok(m) => m,
        Err(e) => return malformed(format!("its JSON is not a model's metadata: {e}")),
    };
    if m.name != model {
        return malformed(format!("the metadata is of model '{}'", m.name));
    }
    let specs = |list: Vec<SpecBody>, what: &str| -> Result<Vec<TensorSpec>, AnswerError> {
        let mut out: Vec<TensorSpec> = Vec::with_capacity(list.len());
        for s in list {
            if out.iter().any(|t| t.name == s.name) {
                return malformed(format!("{what} '{}' is listed twice", s.name));
            }
            if !OIP_DATATYPES.contains(&s.datatype.as_str()) {
                return malformed(format!(
                    "{what} '{}' has datatype '{}', which is not the protocol's",
                    s.name, s.datatype
                ));
            }
            if s.shape.iter().any(|&d| d < -1) {
                return malformed(format!("{what} '{}' has shape {:?}", s.name, s.shape));
            }
            out.push(TensorSpec { name: s.name, datatype: s.datatype, shape: s.shape });
        }
        Ok(out)
    };
    Ok(ModelMetadata {
        inputs: specs(m.inputs, "input")?,
        outputs: specs(m.outputs, "output")?,
        name: m.name,
    })
}

/// The message of an error answer: its JSON `error` (or FastAPI's
/// `detail`) field, else its text, at most 500 characters.
pub fn error_message(body: &[u8]) -> String {
    #[derive(Deserialize)]
    struct ErrorBody {
        error: Option<serde_json::Value>,
        detail: Option<serde_json::Value>,
    }
    let text = match serde_json::from_slice::<ErrorBody>(body) {
        Ok(ErrorBody { error: Some(serde_json::Value::String(s)), .. }) => s,
        Ok(ErrorBody { error: Some(v), .. }) | Ok(ErrorBody { detail: Some(v), .. }) => v.to_string(),
        _ => String::from_utf8_lossy(body).into_owned(),
    };
    let text = text.trim();
    if text.is_empty() {
        return "(no message)".to_string();
    }
    match text.char_indices().nth(500) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    fn reason(e: AnswerError) -> String {
        match e {
            AnswerError::Malformed(r) => r,
            AnswerError::Unsupported { tensor, datatype } => format!("unsupported {datatype} of {tensor}"),
        }
    }

    #[test]
    fn a_binary_request_is_a_header_then_the_bytes_in_order() {
        let a = OipTensor::from_f32("a", vec![2], &[1.0, 2.0]).expect("a");
        let b = OipTensor::new("b", WireType::U8, vec![3], vec![7, 8, 9]).expect("b");
        let r = encode_infer("r1", &[a.clone(), b], &asked(&["y"]), true).expect("encodes");
        let n = r.header_len.expect("binary");
        assert_eq!(r.content_type(), "application/octet-stream");
        let header: serde_json::Value = serde_json::from_slice(&r.body[..n]).expect("json header");
        assert_eq!(header["inputs"][0]["parameters"]["binary_data_size"], 8);
        assert_eq!(header["inputs"][1]["datatype"], "UINT8");
        assert_eq!(header["outputs"][0]["parameters"]["binary_data"], true);
        assert_eq!(header["id"], "r1");
        assert_eq!(&r.body[n..n + 8], &a.data[..]);
        assert_eq!(&r.body[n + 8..], &[7, 8, 9]);
        // Every output, in binary: the request-level parameter.
        let r = encode_infer("r2", &[a], &[], true).expect("encodes");
        let header: serde_json::Value =
            serde_json::from_slice(&r.body[..r.header_len.expect("binary")]).expect("json header");
        assert_eq!(header["parameters"]["binary_data_output"], true);
        assert!(header.get("outputs").is_none());
    }

    #[test]
    fn a_json_request_keeps_every_float_bit_and_refuses_nan() {
        let values = [0.1f32, -3.4e38, 1e-45, 123456.79];
        let a = OipTensor::from_f32("a", vec![4], &values).expect("a");
        let r = encode_infer("r", &[a], &asked(&["y"]), false).expect("encodes");
        assert_eq!((r.header_len, r.content_type()), (None, "application/json"));
        let v: serde_json::Value = serde_json::from_slice(&r.body).expect("json");
        let back: Vec<f32> = v["inputs"][0]["data"]
            .as_array()
            .expect("array")
            .iter()
            .map(|x| x.as_f64().expect("number") as f32)
            .collect();
        assert_eq!(back.iter().map(|f| f.to_bits()).collect::<Vec<_>>(), values.map(f32::to_bits).to_vec());
        let nan = OipTensor::from_f32("n", vec![1], &[f32::NAN]).expect("n");
        let e =
            encode_infer("r", std::slice::from_ref(&nan), &[], false).expect_err("NaN in JSON").to_string();
        assert!(e.contains("'n'") && e.contains("binary"), "{e}");
        assert!(encode_infer("r", &[nan], &[], true).is_ok(), "binary carries NaN");
        let bad = OipTensor { name: "x".into(), datatype: WireType::F32, shape: vec![3], data: vec![0; 4] };
        assert!(encode_infer("r", &[bad], &[], true).expect_err("short").to_string().contains("'x'"));
        let i = OipTensor::new("i", WireType::I8, vec![2], vec![0xff, 1]).expect("i");
        let r = encode_infer("r", &[i.clone(), i], &[], false);
        assert!(matches!(r.expect_err("twice"), RequestError::InputTwice(n) if n == "i"));
    }

    #[test]
    fn binary_answers_are_checked_and_ordered_as_asked() {
        let header = br#"{"model_name":"m","id":"r","outputs":[
            {"name":"b","datatype":"INT64","shape":[1],"parameters":{"binary_data_size":8}},
            {"name":"a","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":8}}]}"#;
        let mut body = header.to_vec();
        body.extend_from_slice(&5i64.to_le_bytes());
        body.extend_from_slice(&[0, 0, 128, 63, 0, 0, 0, 64]);
        let out = decode_infer("m", "r", Some(header.len()), &body, &asked(&["a", "b"])).expect("valid");
        assert_eq!(out[0].f32s(), Some(vec![1.0, 2.0]));
        assert_eq!((out[1].name.as_str(), &out[1].data[..]), ("b", &5i64.to_le_bytes()[..]));
        let all = decode_infer("m", "r", Some(header.len()), &body, &[]).expect("all");
        assert_eq!(all[0].name, "b", "the server's order when none were asked");
        let e = |len: Option<usize>, body: &[u8], asked: &[String]| {
            reason(decode_infer("m", "r", len, body, asked).expect_err("refused"))
        };
        assert!(e(Some(body.len() + 1), &body, &asked(&["a"])).contains("Inference-Header-Content-Length"));
        assert!(e(Some(header.len()), &body[..body.len() - 1], &asked(&["a", "b"])).contains("runs past"));
        let mut long = body.clone();
        long.push(0);
        assert!(e(Some(header.len()), &long, &asked(&["a", "b"])).contains("add up to"));
        assert!(e(Some(header.len()), &body, &asked(&["a"])).contains("'b' was not asked"));
        assert!(e(Some(header.len()), &body, &asked(&["a", "b", "c"])).contains("missing"));
        assert!(decode_infer("other", "r", Some(header.len()), &body, &[]).is_err());
        assert!(decode_infer("m", "r2", Some(header.len()), &body, &[]).is_err());
    }

    #[test]
    fn json_answers_are_checked_element_by_element() {
        let ok = br#"{"outputs":[{"name":"y","datatype":"INT32","shape":[2,2],"data":[[1,-2],[3,4]]},
            {"name":"m","datatype":"BOOL","shape":[2],"data":[true,false]}]}"#;
        let out = decode_infer("m", "r", None, ok, &asked(&["y", "m"])).expect("nested arrays flatten");
        assert_eq!(out[0].data, [1i32, -2, 3, 4].iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>());
        assert_eq!(out[1].data, vec![1, 0]);
        let cases: [(&[u8], &str); 9] = [
            (br#"{"outputs":[{"name":"y","datatype":"FP32","shape":[3],"data":[1,2]}]}"#, "2 data elements"),
            (br#"{"outputs":[{"name":"y","datatype":"FP32","shape":[1],"data":["1"]}]}"#, "inference response"),
            (br#"{"outputs":[{"name":"y","datatype":"INT8","shape":[1],"data":[300]}]}"#, "range"),
            (br#"{"outputs":[{"name":"y","datatype":"INT64","shape":[1],"data":[1.5]}]}"#, "not an integer"),
            (br#"{"outputs":[{"name":"y","datatype":"FP32","shape":[1],"data":[null]}]}"#, "NaN"),
            (br#"{"outputs":[{"name":"y","datatype":"FP32","shape":[-1],"data":[]}]}"#, "negative"),
            (br#"{"outputs":[{"name":"y","datatype":"FOO","shape":[1],"data":[1]}]}"#, "not the protocol's"),
            (br#"{"outputs":[{"name":"y","datatype":"FP32","shape":[1]}]}"#, "neither"),
            (br#"{"outputs":[{"name":"y","datatype":"FP32","shape":[1],"data":[1]},{"name":"y","datatype":"FP32","shape":[1],"data":[1]}]}"#, "twice"),
        ];
        for (body, want) in cases {
            let got = reason(decode_infer("m", "r", None, body, &asked(&["y"])).expect_err(want));
            assert!(got.contains(want), "{} → {got}", String::from_utf8_lossy(body));
        }
        let fp16 = br#"{"outputs":[{"name":"y","datatype":"FP16","shape":[1],"data":[1]}]}"#;
        let e = decode_infer("m", "r", None, fp16, &asked(&["y"])).expect_err("FP16");
        assert_eq!(e, AnswerError::Unsupported { tensor: "y".into(), datatype: "FP16".into() });
    }

    #[test]
    fn metadata_and_error_bodies() {
        let body = br#"{"name":"m","versions":null,"platform":"","inputs":[{"name":"x","datatype":"FP32","shape":[-1,4]}],"outputs":[{"name":"y","datatype":"FP32","shape":[-1,3]}]}"#;
        let m = decode_metadata("m", body).expect("valid");
        assert_eq!((m.inputs[0].shape.clone(), m.outputs[0].name.as_str()), (vec![-1, 4], "y"));
        assert!(
            matches!(decode_metadata("n", body).expect_err("other model"), AnswerError::Malformed(r) if r.contains("'m'"))
        );
        assert_eq!(
            error_message(br#"{"error":"Model with name x does not exist."}"#),
            "Model with name x does not exist."
        );
        assert!(error_message(br#"{"detail":[{"msg":"Field required"}]}"#).contains("Field required"));
        assert_eq!(error_message(b"plain text\n"), "plain text");
        assert_eq!(error_message(&[b'x'; 600]).chars().count(), 501);
    }
}
