//! The wire protocol between the wearable and the handheld, with no I/O:
//! messages, their encoding, and a decoder fed bytes as they arrive.
//!
//! **Framing.** Every message is one frame:
//!
//! ```text
//! u32 LE  frame length (bytes after this field)
//! u32 LE  header length
//! ...     header: a `Header`, bincode 2 (serde, standard config)
//! ...     body: raw bytes the header describes
//! ```
//!
//! Tensor bodies are the tensors' raw little-endian bytes one after the
//! other, each described in the header by name, dtype and shape; they are
//! never serialized element by element. A model push carries its chunk in
//! the body; a bandwidth probe carries its padding there.
//!
//! **Hostile input.** The decoder refuses, with a [`ProtocolError`] that
//! names the problem: a frame longer than the limit (before buffering it), a
//! header longer than its limit or than the frame, a header that does not
//! decode, a tensor of unknown dtype, rank above [`MAX_RANK`], a dimension
//! above [`MAX_DIM`], a shape whose byte size overflows, bodies whose length
//! differs from what the header describes, and booleans other than 0 or 1.
//! After an error the decoder stays failed: the connection must close.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::encoding::{self, decode_parts, Encoding, Params, MAX_RATIO};
pub use tandem_types::{Engine, WireTensor, WireType};

/// The protocol version both sides must speak.
pub const PROTOCOL_VERSION: u32 = 12;

/// The most an [`Header::EdgeReady`] may say an edge outruns the handheld.
pub const MAX_EDGE_SPEED: f64 = 10_000.0;

/// Most cuts one [`Header::Edge`] may ask about.
pub const MAX_EDGE_CUTS: usize = 64;
/// Longest edge server URL a [`Header::Edge`] may carry (bytes).
pub const MAX_EDGE_URL: usize = 1024;

/// Most cuts one `Prepare` may name.
pub const MAX_PREPARE: usize = 8;
/// Most frames one [`Header::Cancel`] names.
pub const MAX_CANCEL: usize = 64;

/// Most input-shape overrides plus symbol values a `Hello` may carry.
pub const MAX_OVERRIDES: usize = 64;
/// Longest override spec a `Hello` may carry (bytes).
pub const MAX_OVERRIDE_LEN: usize = 256;
/// Default largest frame accepted (bytes).
pub const MAX_FRAME_BYTES: usize = 256 << 20;
/// Largest header accepted (bytes).
pub const MAX_HEADER_BYTES: usize = 64 << 10;
/// Largest probe (and echo) padding: the profiler's probes are at most 64 KiB.
pub const MAX_PROBE_BYTES: usize = 1 << 20;
/// Largest tensor rank accepted.
pub const MAX_RANK: usize = 8;
/// Largest single dimension accepted.
pub const MAX_DIM: u64 = 1 << 28;
/// Most tensors in one message.
pub const MAX_TENSORS: usize = 256;
/// Most bytes the tensors of one message may decode to (encoded tensors
/// can claim more than the frame carries; raw ones never exceed the frame).
pub const MAX_DECODED_BYTES: usize = 1 << 30;

/// SHA-256 of a model's ONNX bytes.
pub type Digest = [u8; 32];

/// The digest both sides compare: SHA-256 of the model's ONNX bytes.
pub fn model_digest(bytes: &[u8]) -> Digest {
    use sha2::{Digest as _, Sha256};
    Sha256::digest(bytes).into()
}

/// What went wrong with bytes from the peer.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ProtocolError {
    /// The frame announces more bytes than allowed.
    #[error("frame of {len} bytes exceeds the limit of {limit}")]
    FrameTooLarge {
        /// Announced length.
        len: usize,
        /// The limit.
        limit: usize,
    },
    /// The header is longer than allowed or than its frame.
    #[error("header of {len} bytes does not fit (frame {frame} bytes, limit {limit})")]
    HeaderTooLarge {
        /// Announced header length.
        len: usize,
        /// The frame's length.
        frame: usize,
        /// The header limit.
        limit: usize,
    },
    /// The header does not decode.
    #[error("malformed header: {0}")]
    BadHeader(String),
    /// A tensor description is invalid.
    #[error("bad tensor '{name}': {reason}")]
    BadTensor {
        /// The tensor's name.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// The body's length differs from what the header describes.
    #[error("body of {got} bytes, but the header describes {expected}")]
    BodyMismatch {
        /// Bytes described.
        expected: usize,
        /// Bytes present.
        got: usize,
    },
    /// The decoder already failed.
    #[error("the stream already failed; close the connection")]
    Failed,
}

/// A tensor's description in a header; its bytes are in the body.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TensorMeta {
    /// The ONNX tensor name.
    pub name: String,
    /// Element type.
    pub dtype: WireType,
    /// Dimensions.
    pub shape: Vec<u64>,
    /// How its bytes are packed in the body.
    pub encoding: Encoding,
    /// What its decoder needs (int8's scales and zero points).
    pub params: Params,
    /// Its bytes in the body (for raw: its decoded size).
    pub len: u64,
}

impl TensorMeta {
    /// Its bytes in the body, checked against its decoded size: raw must
    /// be exactly that size, and no encoding may claim more than
    /// [`MAX_RATIO`] times the bytes it sends.
    pub fn body_len(&self) -> Result<usize, ProtocolError> {
        let decoded = self.byte_len()?;
        let len = usize::try_from(self.len).map_err(|_| self.bad(format!("{} body bytes", self.len)))?;
        if self.encoding == Encoding::Raw && len != decoded {
            return Err(self.bad(format!("raw with {len} body bytes for a {decoded}-byte tensor")));
        }
        if decoded > len.max(1).saturating_mul(MAX_RATIO) {
            return Err(self.bad(format!(
                "{decoded} bytes from {len} ({}): a ratio above {MAX_RATIO} is refused",
                self.encoding
            )));
        }
        Ok(len)
    }

    fn bad(&self, reason: String) -> ProtocolError {
        ProtocolError::BadTensor { name: self.name.clone(), reason }
    }

    /// Byte length of the tensor, after checking rank and dimensions.
    pub fn byte_len(&self) -> Result<usize, ProtocolError> {
        let bad = |reason: String| ProtocolError::BadTensor { name: self.name.clone(), reason };
        if self.shape.len() > MAX_RANK {
            return Err(bad(format!("rank {} exceeds {MAX_RANK}", self.shape.len())));
        }
        let mut n: u64 = self.dtype.size() as u64;
        for &d in &self.shape {
            if d > MAX_DIM {
                return Err(bad(format!("dimension {d} exceeds {MAX_DIM}")));
            }
            n = n.checked_mul(d).ok_or_else(|| bad(format!("shape {:?} overflows", self.shape)))?;
        }
        usize::try_from(n).map_err(|_| bad(format!("shape {:?} is too large", self.shape)))
    }
}

/// The handheld's status, sent at the handshake and periodically.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct StatusReport {
    /// CPU load in [0, 1].
    pub load: f32,
    /// Suffixes waiting to run.
    pub queue: u32,
    /// Battery level in [0, 1].
    pub battery: f32,
    /// Whether it is charging.
    pub charging: bool,
}

/// What each side tells the other of its latency, so the wearable can
/// price the handheld's part: per-layer predicted seconds of the shared
/// model on this device, and its fixed per-run cost.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Seconds per layer of the model, in the layer DAG's order.
    pub per_layer_s: Vec<f64>,
    /// Fixed seconds per run.
    pub overhead_s: f64,
    /// The engine the handheld runs this model's suffixes on (protocol v9)
    /// unless a frame names another it offered.
    pub engine: Engine,
    /// (v12) The same model's times on each other engine the handheld
    /// offers (it profiled every one: `auto`), so that the wearable may
    /// choose a suffix's engine with its cut; empty: `engine` alone.
    #[serde(default)]
    pub others: Vec<EngineLatency>,
}

/// One more engine's times of the model on the handheld ([`LatencySummary::others`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EngineLatency {
    /// The engine (one the handheld offered, not [`LatencySummary::engine`]).
    pub engine: Engine,
    /// Seconds per layer of the model on it, in the layer DAG's order.
    pub per_layer_s: Vec<f64>,
    /// Fixed seconds per run on it.
    pub overhead_s: f64,
}

/// Error codes of [`Header::Error`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ErrorCode {
    /// The peer speaks another protocol version.
    Version,
    /// The pushed model's digest differs from the announced one.
    Digest,
    /// Bytes that are not a valid message.
    Malformed,
    /// A message out of order (for example a run before the handshake).
    Unexpected,
    /// The model cannot be loaded or run.
    Model,
    /// A tensor that does not fit the model.
    Tensor,
    /// Anything else on the handheld.
    Internal,
    /// The handheld serves paired wearables only, over encrypted links.
    Unpaired,
    /// The handheld is full (every connection slot, or its budget for
    /// model pushes, is taken): try again later (protocol v8).
    Busy,
}

/// A message's header.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Header {
    /// Wearable → handheld, first: who it is and which model it runs.
    Hello {
        /// [`PROTOCOL_VERSION`].
        version: u32,
        /// SHA-256 of the model's ONNX bytes.
        model_digest: Digest,
        /// Size of the model's ONNX bytes (for a push).
        model_bytes: u64,
        /// The wearable's device profile name.
        device: String,
        /// Input-shape overrides the model is loaded with (`NAME=D1,D2,...`),
        /// at most [`MAX_OVERRIDES`] of at most [`MAX_OVERRIDE_LEN`] bytes.
        input_shapes: Vec<String>,
        /// Symbol values it is loaded with (`SYMBOL=VALUE`), same limits.
        dims: Vec<String>,
    },
    /// Handheld → wearable: the handshake's answer.
    Welcome {
        /// [`PROTOCOL_VERSION`].
        version: u32,
        /// The handheld's device profile name.
        device: String,
        /// Whether the handheld has the model (else the wearable pushes it).
        has_model: bool,
        /// The handheld's status.
        status: StatusReport,
        /// The engines it can run suffixes on (protocol v9).
        engines: Vec<Engine>,
    },
    /// Wearable → handheld: part of a model push; the body holds the bytes.
    ModelChunk {
        /// Offset of the body in the model's bytes.
        offset: u64,
    },
    /// Handheld → wearable: the model is loaded (digest verified) and priced.
    ModelReady {
        /// The handheld's latency summary for this model.
        latency: LatencySummary,
    },
    /// Wearable → handheld: run the suffix of `cut` for `frame`.
    RunSuffix {
        /// Frame number (unique per session, in order).
        frame: u64,
        /// The cut's [`tandem_core::Cut::key`]: the wearable's layers as a hex mask.
        cut: String,
        /// The crossing tensors, in the body.
        tensors: Vec<TensorMeta>,
        /// The encodings the answer's tensors should come back in, in the
        /// cut's down-tensor order. Only the generic lossless ones are
        /// honoured (answers are never lossy); others and missing ones: raw.
        answer: Vec<Encoding>,
        /// Relayed (protocol v10): the key of S2, the cut whose suffix the
        /// edge server runs; the handheld runs only the layers between
        /// `cut` and it, and forwards. `None`: the handheld runs the whole suffix.
        edge: Option<String>,
        /// (v12) The engine to run the suffix on, one the handheld offered;
        /// `None`: the one its `ModelReady` named. A relayed frame names
        /// none (the handheld's part of a relay runs on that one).
        engine: Option<Engine>,
    },
    /// Wearable → handheld (v10): relay to this Open Inference Protocol
    /// server; which of these cuts' suffixes does it serve? At most
    /// [`MAX_EDGE_CUTS`] cuts, a URL of at most [`MAX_EDGE_URL`] bytes.
    /// Answered by [`Header::EdgeReady`].
    Edge {
        /// The server's base URL (`http://HOST:PORT`).
        url: String,
        /// The cuts' [`tandem_core::Cut::key`]s.
        cuts: Vec<String>,
    },
    /// Handheld → wearable (v10): the edge as the handheld sees it.
    EdgeReady {
        /// The cuts asked about whose suffixes the edge serves.
        deployed: Vec<String>,
        /// Round trip of one readiness call (µs).
        rtt_us: u64,
        /// (v11) How many times faster than the handheld the edge runs the
        /// model's layers, as measured (a Tandem edge's own profile of the
        /// model, or one suffix timed on an Open Inference Protocol
        /// server); `None`: not measured. Finite, above 0, at most
        /// [`MAX_EDGE_SPEED`].
        speed: Option<f64>,
        /// Why the handheld will not relay there, when it will not.
        error: Option<String>,
    },
    /// Wearable → handheld: build these cuts' suffix plans in the
    /// background (the cuts the wearable may switch to next), at most
    /// [`MAX_PREPARE`]; each is answered by a [`Header::Prepared`].
    Prepare {
        /// The cuts' [`tandem_core::Cut::key`]s.
        cuts: Vec<String>,
        /// (v12) The engine to build them on, as in [`Header::RunSuffix`].
        engine: Option<Engine>,
    },
    /// Handheld → wearable: a cut's suffix plan is built (or why not).
    Prepared {
        /// The cut's key.
        cut: String,
        /// (v12) The engine it was asked on, as asked.
        engine: Option<Engine>,
        /// How long building it took (µs).
        build_us: u64,
        /// Why it could not be built, if it could not.
        error: Option<String>,
    },
    /// Handheld → wearable: a suffix's outputs.
    Result {
        /// The frame answered.
        frame: u64,
        /// Handheld compute time (µs).
        handheld_compute_us: u64,
        /// The outputs, in the body.
        tensors: Vec<TensorMeta>,
        /// How a relayed frame's edge part went (protocol v10).
        edge: Option<EdgeReport>,
    },
    /// Handheld → wearable, periodically.
    Status(StatusReport),
    /// Either way: a bandwidth and RTT probe; the body is padding.
    Probe {
        /// Probe id.
        id: u64,
        /// Whether the answer should carry the same padding back.
        echo_payload: bool,
    },
    /// The answer to a probe.
    Echo {
        /// The probe's id.
        id: u64,
        /// Body bytes the probe carried.
        received: u64,
    },
    /// Something went wrong; the sender closes after it.
    Error {
        /// What kind of failure.
        code: ErrorCode,
        /// A sentence naming it.
        reason: String,
    },
    /// Orderly close.
    Bye,
    /// Wearable → handheld: these frames' answers are no longer wanted
    /// (each missed its deadline and ran on the wearable), at most
    /// [`MAX_CANCEL`]. Those not yet started are dropped; one already
    /// running may still be answered, and the wearable drops that answer.
    Cancel {
        /// The frames.
        frames: Vec<u64>,
    },
}

/// How the edge part of one relayed frame went.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EdgeReport {
    /// The key of S2, the cut whose suffix the edge ran.
    pub near: String,
    /// Bytes sent to the edge (its request as sent).
    pub up_bytes: u64,
    /// Bytes received from it.
    pub down_bytes: u64,
    /// The edge request's round trip, its compute included (µs).
    pub edge_us: u64,
    /// Why the edge failed, when it did: the handheld then ran the rest
    /// itself (the frame is answered all the same, on two tiers).
    pub error: Option<String>,
}

/// One message: a header and its body.
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    /// The header.
    pub header: Header,
    /// Raw bytes the header describes.
    pub body: Vec<u8>,
}

impl Message {
    /// A message without a body.
    pub fn new(header: Header) -> Message {
        Message { header, body: vec![] }
    }

    /// The tensor descriptions the header carries, if any.
    pub fn tensor_metas(&self) -> &[TensorMeta] {
        match &self.header {
            Header::RunSuffix { tensors, .. } | Header::Result { tensors, .. } => tensors,
            _ => &[],
        }
    }

    /// Splits the body into the described tensors, decoding encoded ones
    /// (raw ones borrow the body).
    pub fn tensors(&self) -> Result<Vec<(String, WireTensor<'_>)>, ProtocolError> {
        // The decoder checked this for received frames; a message built in
        // this process is held to the same limits.
        check_body(&self.header, self.body.len())?;
        self.tensor_bytes()?
            .into_iter()
            .map(|(meta, bytes)| Ok((meta.name.clone(), tensor_from_wire(meta, bytes)?)))
            .collect()
    }

    /// Each described tensor with its slice of the body.
    fn tensor_bytes(&self) -> Result<Vec<(&TensorMeta, &[u8])>, ProtocolError> {
        let mut at = 0;
        let mut out = vec![];
        for meta in self.tensor_metas() {
            let len = meta.body_len()?;
            let bytes = self
                .body
                .get(at..at + len)
                .ok_or(ProtocolError::BodyMismatch { expected: at + len, got: self.body.len() })?;
            out.push((meta, bytes));
            at += len;
        }
        Ok(out)
    }

    /// Checks the raw tensors' bytes without building them (bool bytes
    /// are 0 or 1); lengths were checked against the header.
    fn check_raw_tensors(&self) -> Result<(), ProtocolError> {
        for (meta, bytes) in self.tensor_bytes()? {
            if meta.encoding == Encoding::Raw && meta.dtype == WireType::Bool && bytes.iter().any(|&b| b > 1)
            {
                return Err(ProtocolError::BadTensor {
                    name: meta.name.clone(),
                    reason: "a bool byte is not 0 or 1".into(),
                });
            }
        }
        Ok(())
    }

    /// A message carrying tensors packed by [`pack_tensor`] (a lone
    /// tensor's bytes become the body as they are, uncopied).
    pub fn from_packed(make: impl FnOnce(Vec<TensorMeta>) -> Header, packed: Vec<PackedTensor>) -> Message {
        let mut metas = Vec::with_capacity(packed.len());
        let mut body = vec![];
        for p in packed {
            if body.is_empty() {
                body = p.bytes;
            } else {
                body.extend_from_slice(&p.bytes);
            }
            metas.push(p.meta);
        }
        Message { header: make(metas), body }
    }

    /// A message carrying `tensors` in its body; `header` gets their descriptions.
    pub fn with_tensors(
        make: impl FnOnce(Vec<TensorMeta>) -> Header,
        tensors: &[(String, WireTensor<'_>)],
    ) -> Result<Message, ProtocolError> {
        let mut metas = Vec::with_capacity(tensors.len());
        let mut body = vec![];
        for (name, t) in tensors {
            let (meta, bytes) = tensor_to_wire(name, t)?;
            metas.push(meta);
            body.extend_from_slice(bytes);
        }
        Ok(Message { header: make(metas), body })
    }
}

/// A tensor ready for a message body: its description and its bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct PackedTensor {
    /// Its description (encoding and body length included).
    pub meta: TensorMeta,
    /// Its bytes, raw or encoded.
    pub bytes: Vec<u8>,
}

/// Packs a tensor with `encoding` (raw where the encoding does not apply to
/// it). The sensor encodings use `widening`; a tensor whose values are not
/// exactly sensor values under it is packed with shuffle + LZ4 instead
/// (also lossless), and its meta says so.
pub fn pack_tensor(
    name: &str,
    t: &WireTensor<'_>,
    encoding: Encoding,
    widening: Option<&encoding::Widening>,
) -> Result<PackedTensor, ProtocolError> {
    let (mut meta, raw) = tensor_to_wire(name, t)?;
    if encoding == Encoding::Raw || !encoding.applies(t.dtype(), t.shape()) {
        return Ok(PackedTensor { meta, bytes: raw.to_vec() });
    }
    let packed = match encoding::encode_with(t, encoding, widening) {
        Err(encoding::EncodingError::NotExact { .. } | encoding::EncodingError::NoWidening(_))
            if encoding.is_lossless() =>
        {
            encoding::encode(t, Encoding::ShuffleLz4)
        }
        other => other,
    };
    let packed = packed.map_err(|e| meta.bad(e.to_string()))?;
    meta.encoding = packed.encoding;
    meta.params = packed.params;
    meta.len = packed.bytes.len() as u64;
    Ok(PackedTensor { meta, bytes: packed.bytes })
}

/// A tensor's wire description and bytes.
pub fn tensor_to_wire<'t>(
    name: &str,
    t: &'t WireTensor<'_>,
) -> Result<(TensorMeta, &'t [u8]), ProtocolError> {
    let mut meta = TensorMeta {
        name: name.to_string(),
        dtype: t.dtype(),
        shape: t.shape().iter().map(|&d| d as u64).collect(),
        encoding: Encoding::Raw,
        params: Params::None,
        len: 0,
    };
    meta.len = meta.byte_len()? as u64;
    Ok((meta, t.bytes()))
}

/// A tensor from its description and its (possibly encoded) bytes: raw
/// ones borrow `bytes`, encoded ones are decoded.
pub fn tensor_from_wire<'b>(meta: &TensorMeta, bytes: &'b [u8]) -> Result<WireTensor<'b>, ProtocolError> {
    let shape: Vec<usize> = meta.shape.iter().map(|&d| d as usize).collect();
    if meta.encoding != Encoding::Raw {
        meta.body_len()?;
        return decode_parts(meta.dtype, &shape, meta.encoding, &meta.params, bytes)
            .map_err(|e| meta.bad(e.to_string()));
    }
    let len = meta.byte_len()?;
    if bytes.len() != len {
        return Err(ProtocolError::BodyMismatch { expected: len, got: bytes.len() });
    }
    WireTensor::new(meta.dtype, shape, bytes).map_err(|e| meta.bad(e.to_string()))
}

fn bincode_config() -> impl bincode::config::Config {
    bincode::config::standard().with_limit::<MAX_HEADER_BYTES>()
}

/// Encodes a message into one frame.
pub fn encode(message: &Message) -> Result<Vec<u8>, ProtocolError> {
    let header = bincode::serde::encode_to_vec(&message.header, bincode_config())
        .map_err(|e| ProtocolError::BadHeader(e.to_string()))?;
    if header.len() > MAX_HEADER_BYTES {
        return Err(ProtocolError::HeaderTooLarge { len: header.len(), frame: 0, limit: MAX_HEADER_BYTES });
    }
    check_body(&message.header, message.body.len())?;
    // What every decoder refuses is refused here, before anything is sent.
    let frame = 4 + header.len() + message.body.len();
    if frame > MAX_FRAME_BYTES {
        return Err(ProtocolError::FrameTooLarge { len: frame, limit: MAX_FRAME_BYTES });
    }
    let mut out = Vec::with_capacity(4 + frame);
    out.extend_from_slice(&(frame as u32).to_le_bytes());
    out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    out.extend_from_slice(&header);
    out.extend_from_slice(&message.body);
    Ok(out)
}

/// Bytes `message` takes on the link, as [`encode`] frames it (the two
/// lengths, the header, the body), without building the frame.
pub fn wire_len(message: &Message) -> usize {
    header_wire_len(&message.header) + message.body.len()
}

/// Bytes a frame's `RunSuffix` takes on the link: its header (frame, cut,
/// the tensors' descriptions, the answer's encodings) and the packed
/// tensors, as [`Message::from_packed`] would build it.
pub fn run_suffix_wire_len(
    frame: u64,
    cut: &str,
    packed: &[PackedTensor],
    answer: &[Encoding],
    edge: Option<&str>,
    engine: Option<Engine>,
) -> usize {
    let header = Header::RunSuffix {
        frame,
        cut: cut.to_string(),
        tensors: packed.iter().map(|p| p.meta.clone()).collect(),
        answer: answer.to_vec(),
        edge: edge.map(str::to_string),
        engine,
    };
    header_wire_len(&header) + packed.iter().map(|p| p.bytes.len()).sum::<usize>()
}

/// The two lengths and the encoded header.
fn header_wire_len(header: &Header) -> usize {
    8 + bincode::serde::encode_to_vec(header, bincode_config()).map_or(0, |h| h.len())
}

/// Checks that a body has the length its header describes.
fn check_body(header: &Header, body: usize) -> Result<(), ProtocolError> {
    let expected = match header {
        Header::RunSuffix { tensors, .. } | Header::Result { tensors, .. } => {
            if tensors.len() > MAX_TENSORS {
                return Err(ProtocolError::BadTensor {
                    name: format!("({} tensors)", tensors.len()),
                    reason: format!("more than {MAX_TENSORS} tensors in one message"),
                });
            }
            let (mut sum, mut decoded) = (0usize, 0usize);
            for t in tensors {
                sum = sum
                    .checked_add(t.body_len()?)
                    .ok_or(ProtocolError::FrameTooLarge { len: usize::MAX, limit: MAX_FRAME_BYTES })?;
                decoded = decoded.saturating_add(t.byte_len()?);
            }
            if decoded > MAX_DECODED_BYTES {
                return Err(ProtocolError::BadTensor {
                    name: format!("({} tensors)", tensors.len()),
                    reason: format!("{decoded} decoded bytes in one message exceed {MAX_DECODED_BYTES}"),
                });
            }
            sum
        }
        // Probe padding is bounded (an echo must not amplify what a peer sends).
        Header::Probe { .. } | Header::Echo { .. } => {
            if body > MAX_PROBE_BYTES {
                return Err(ProtocolError::FrameTooLarge { len: body, limit: MAX_PROBE_BYTES });
            }
            body
        }
        // Chunks carry any body (within the frame limit); the rest carry none.
        Header::ModelChunk { .. } => body,
        _ => 0,
    };
    if expected != body {
        return Err(ProtocolError::BodyMismatch { expected, got: body });
    }
    Ok(())
}

/// Turns bytes, fed as they arrive, into messages.
///
/// Each body is copied once, from the received bytes into its own buffer
/// (sized from the header, which is checked before any body byte is
/// kept). Raw tensors are checked without being built (lengths, bool
/// bytes); encoded ones are checked by their decoders when used.
#[derive(Debug)]
pub struct FrameDecoder {
    /// The frame's length prefix and header, as they arrive.
    head: Vec<u8>,
    /// The header, once whole, and the body being filled.
    current: Option<(Header, Vec<u8>)>,
    /// Body bytes the current frame still needs.
    body_left: usize,
    /// Decoded messages not yet taken, then the error that stopped decoding.
    ready: std::collections::VecDeque<Message>,
    error: Option<ProtocolError>,
    max_frame: usize,
    failed: bool,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        FrameDecoder::new(MAX_FRAME_BYTES)
    }
}

impl FrameDecoder {
    /// A decoder refusing frames above `max_frame` bytes.
    pub fn new(max_frame: usize) -> FrameDecoder {
        FrameDecoder {
            head: vec![],
            current: None,
            body_left: 0,
            ready: Default::default(),
            error: None,
            max_frame,
            failed: false,
        }
    }

    /// Takes received bytes: whole frames become messages for [`Self::next_message`].
    pub fn push(&mut self, bytes: &[u8]) {
        if self.failed || self.error.is_some() {
            return;
        }
        if let Err(e) = self.consume(bytes) {
            self.error = Some(e);
            self.head = vec![];
            self.current = None;
        }
    }

    /// Takes received bytes and returns every message now whole, then the
    /// error that stopped decoding, if any (after which the decoder stays failed).
    pub fn push_and_decode(&mut self, bytes: &[u8]) -> (Vec<Message>, Option<ProtocolError>) {
        self.push(bytes);
        let mut messages = vec![];
        loop {
            match self.next_message() {
                Ok(Some(m)) => messages.push(m),
                Ok(None) => return (messages, None),
                Err(e) => return (messages, Some(e)),
            }
        }
    }

    /// Whole messages decoded and not yet taken by
    /// [`Self::next_message`].
    pub fn ready(&self) -> usize {
        self.ready.len()
    }

    /// Bytes received of the frame not yet whole.
    pub fn pending(&self) -> usize {
        self.head.len() + self.current.as_ref().map_or(0, |(_, b)| b.len())
    }

    /// How many more bytes the frame being received needs (the length
    /// prefix's 4 when none has started; at least 1 while its header is incomplete).
    pub fn wanted(&self) -> usize {
        if self.current.is_some() {
            return self.body_left;
        }
        if self.head.len() < 4 {
            return 4 - self.head.len();
        }
        let frame = u32::from_le_bytes([self.head[0], self.head[1], self.head[2], self.head[3]]) as usize;
        (4 + frame).saturating_sub(self.head.len())
    }

    /// The next complete message, `None` if more bytes are needed.
    pub fn next_message(&mut self) -> Result<Option<Message>, ProtocolError> {
        if let Some(m) = self.ready.pop_front() {
            return Ok(Some(m));
        }
        if self.failed {
            return Err(ProtocolError::Failed);
        }
        if let Some(e) = self.error.take() {
            self.failed = true;
            return Err(e);
        }
        Ok(None)
    }

    /// Cuts `input` into frames.
    fn consume(&mut self, mut input: &[u8]) -> Result<(), ProtocolError> {
        while !input.is_empty() {
            if let Some((_, body)) = &mut self.current {
                let n = self.body_left.min(input.len());
                body.extend_from_slice(&input[..n]);
                input = &input[n..];
                self.body_left -= n;
                if self.body_left == 0 {
                    self.finish()?;
                }
                continue;
            }
            // The frame's length (checked at once), then the header's: 4 bytes each.
            if self.head.len() < 8 {
                let want = if self.head.len() < 4 { 4 } else { 8 };
                let n = (want - self.head.len()).min(input.len());
                self.head.extend_from_slice(&input[..n]);
                input = &input[n..];
                if self.head.len() == 4 {
                    self.check_length()?;
                } else if self.head.len() == 8 {
                    self.check_prefix()?;
                }
                continue;
            }
            let header_len =
                u32::from_le_bytes([self.head[4], self.head[5], self.head[6], self.head[7]]) as usize;
            let n = (8 + header_len - self.head.len()).min(input.len());
            self.head.extend_from_slice(&input[..n]);
            input = &input[n..];
            if self.head.len() == 8 + header_len {
                self.start_body()?;
            }
        }
        Ok(())
    }

    fn check_length(&self) -> Result<(), ProtocolError> {
        let frame = u32::from_le_bytes([self.head[0], self.head[1], self.head[2], self.head[3]]) as usize;
        if frame > self.max_frame {
            return Err(ProtocolError::FrameTooLarge { len: frame, limit: self.max_frame });
        }
        if frame < 4 {
            return Err(ProtocolError::HeaderTooLarge { len: 4, frame, limit: MAX_HEADER_BYTES });
        }
        Ok(())
    }

    fn check_prefix(&mut self) -> Result<(), ProtocolError> {
        let frame = u32::from_le_bytes([self.head[0], self.head[1], self.head[2], self.head[3]]) as usize;
        let header_len =
            u32::from_le_bytes([self.head[4], self.head[5], self.head[6], self.head[7]]) as usize;
        if frame < 4 || header_len > MAX_HEADER_BYTES || header_len > frame - 4 {
            return Err(ProtocolError::HeaderTooLarge { len: header_len, frame, limit: MAX_HEADER_BYTES });
        }
        if header_len == 0 {
            self.start_body()?;
        }
        Ok(())
    }

    /// The header is whole: decode and check it, and size the body.
    fn start_body(&mut self) -> Result<(), ProtocolError> {
        let frame = u32::from_le_bytes([self.head[0], self.head[1], self.head[2], self.head[3]]) as usize;
        let header_len = self.head.len() - 8;
        let (header, used): (Header, usize) =
            bincode::serde::decode_from_slice(&self.head[8..], bincode_config())
                .map_err(|e| ProtocolError::BadHeader(e.to_string()))?;
        if used != header_len {
            return Err(ProtocolError::BadHeader(format!(
                "{} trailing bytes after the header",
                header_len - used
            )));
        }
        let body_len = frame - 4 - header_len;
        check_body(&header, body_len)?;
        self.head.clear();
        // Reserved as bytes arrive beyond 4 MiB: a peer's declared length
        // alone cannot make this side allocate 256 MiB.
        self.current = Some((header, Vec::with_capacity(body_len.min(4 << 20))));
        self.body_left = body_len;
        if body_len == 0 {
            self.finish()?;
        }
        Ok(())
    }

    /// The body is whole: check its tensors and hand the message out.
    fn finish(&mut self) -> Result<(), ProtocolError> {
        let Some((header, body)) = self.current.take() else { return Ok(()) };
        let message = Message { header, body };
        message.check_raw_tensors()?;
        self.ready.push_back(message);
        Ok(())
    }
}
