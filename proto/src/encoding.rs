//! Tensor encodings for the link, without I/O: how a crossing tensor's
//! bytes are packed (raw; lossless byte-plane shuffle + LZ4 and sparse
//! bitmap + LZ4; lossy f16 and int8 affine, per tensor or per channel) and
//! unpacked, with every size checked before anything is decompressed.
//!
//! Lossless encodings give back the same bytes (NaN payloads and −0.0
//! included). Lossy ones are for f32 tensors only; whether their error is
//! acceptable is the caller's accuracy budget, measured, not assumed here.

use serde::{Deserialize, Serialize};
use thiserror::Error;
use tract_onnx::prelude::{DatumType, Tensor};

/// Largest decoded/encoded size ratio a peer may claim: an all-zero f32
/// map packs about 8,000× (sparse bitmap, then LZ4), so anything above this
/// is a decompression bomb.
pub const MAX_RATIO: usize = 1 << 14;
/// Most per-channel parameters an int8 tensor may carry.
pub const MAX_CHANNELS: usize = 4096;

/// How a tensor's bytes cross the link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Encoding {
    /// The bytes as they are.
    Raw,
    /// Byte planes (every element's first byte, then every second byte,
    /// ...), then LZ4. Bit-exact; any element type.
    ShuffleLz4,
    /// A bitmap of the elements that are not all-zero bytes, then those
    /// elements, then LZ4. Bit-exact; any element type; for ReLU maps.
    SparseLz4,
    /// f32 as IEEE half precision. Lossy; f32 only.
    F16,
    /// f32 as int8, `x ≈ (q − zero) · scale`, one scale and zero point per
    /// tensor, or per channel (axis 1) when `per_channel`. Lossy; f32 only.
    Int8 {
        /// One scale per channel of axis 1 (rank ≥ 2) instead of one per tensor.
        per_channel: bool,
    },
}

/// Which encodings an app allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Allowed {
    /// Raw tensors only.
    Raw,
    /// Raw and the bit-exact encodings.
    Lossless,
    /// Every encoding (the accuracy budget decides which lossy one may be used where).
    Lossy,
}

impl Encoding {
    /// Every encoding, raw first.
    pub const ALL: [Encoding; 6] = [
        Encoding::Raw,
        Encoding::ShuffleLz4,
        Encoding::SparseLz4,
        Encoding::F16,
        Encoding::Int8 { per_channel: false },
        Encoding::Int8 { per_channel: true },
    ];

    /// Whether decoding gives back the same bytes.
    pub fn is_lossless(self) -> bool {
        matches!(self, Encoding::Raw | Encoding::ShuffleLz4 | Encoding::SparseLz4)
    }

    /// Whether it applies to tensors of type `dt` (lossy ones: f32 only).
    pub fn applies_to(self, dt: DatumType) -> bool {
        self.is_lossless() || dt == DatumType::F32
    }

    /// Whether it applies to a tensor of type `dt` and shape `shape`: lossy
    /// ones to f32 only, per-channel int8 to a rank ≥ 2 tensor with 1 to
    /// [`MAX_CHANNELS`] channels on axis 1.
    pub fn applies(self, dt: DatumType, shape: &[usize]) -> bool {
        match self {
            Encoding::Int8 { per_channel: true } => {
                self.applies_to(dt) && shape.len() >= 2 && (1..=MAX_CHANNELS).contains(&shape[1])
            }
            _ => self.applies_to(dt),
        }
    }

    /// Whether `allowed` permits it.
    pub fn allowed_by(self, allowed: Allowed) -> bool {
        match allowed {
            Allowed::Raw => self == Encoding::Raw,
            Allowed::Lossless => self.is_lossless(),
            Allowed::Lossy => true,
        }
    }

    /// Its name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Raw => "raw",
            Encoding::ShuffleLz4 => "shuffle-lz4",
            Encoding::SparseLz4 => "sparse-lz4",
            Encoding::F16 => "f16",
            Encoding::Int8 { per_channel: false } => "int8",
            Encoding::Int8 { per_channel: true } => "int8-channel",
        }
    }

    /// The encoding named `name` (see [`Encoding::name`]).
    pub fn parse(name: &str) -> Result<Encoding, String> {
        Self::ALL.into_iter().find(|e| e.name() == name).ok_or_else(|| {
            let known: Vec<&str> = Self::ALL.iter().map(|e| e.name()).collect();
            format!("unknown encoding '{name}' (known: {})", known.join(", "))
        })
    }
}

impl std::fmt::Display for Encoding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What a decoder needs besides the encoding and the tensor's type and shape.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub enum Params {
    /// Nothing.
    #[default]
    None,
    /// int8: one scale and zero point per tensor, or per channel of axis 1.
    Int8 {
        /// Scales (> 0, finite).
        scales: Vec<f32>,
        /// Zero points.
        zeros: Vec<i8>,
    },
}

/// An encoded tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct Encoded {
    /// How it is packed.
    pub encoding: Encoding,
    /// What the decoder needs.
    pub params: Params,
    /// The packed bytes.
    pub bytes: Vec<u8>,
}

/// Why a tensor could not be encoded or decoded.
#[derive(Debug, Error, PartialEq)]
pub enum EncodingError {
    /// The encoding does not apply to the tensor.
    #[error("{encoding} does not apply to a {dtype:?} tensor of shape {shape:?}")]
    NotApplicable {
        /// The encoding.
        encoding: Encoding,
        /// The tensor's type.
        dtype: DatumType,
        /// Its shape.
        shape: Vec<usize>,
    },
    /// int8 cannot represent NaN or infinity.
    #[error("int8 cannot encode a tensor holding NaN or infinity")]
    NotFinite,
    /// The decoded size claimed is too large for the bytes sent.
    #[error("{decoded} bytes from {encoded} encoded ({encoding}): a ratio above {MAX_RATIO} is refused")]
    Bomb {
        /// The encoding.
        encoding: Encoding,
        /// Bytes the shape claims.
        decoded: usize,
        /// Bytes sent.
        encoded: usize,
    },
    /// The bytes or parameters do not decode to the shape.
    #[error("corrupt {encoding} tensor: {reason}")]
    Corrupt {
        /// The encoding.
        encoding: Encoding,
        /// What is wrong.
        reason: String,
    },
}

fn corrupt(encoding: Encoding, reason: impl Into<String>) -> EncodingError {
    EncodingError::Corrupt { encoding, reason: reason.into() }
}

/// Encodes `t` with `encoding`.
pub fn encode(t: &Tensor, encoding: Encoding) -> Result<Encoded, EncodingError> {
    let not_applicable =
        || EncodingError::NotApplicable { encoding, dtype: t.datum_type(), shape: t.shape().to_vec() };
    if !encoding.applies(t.datum_type(), t.shape()) {
        return Err(not_applicable());
    }
    let bytes = t.as_bytes();
    let size = t.datum_type().size_of();
    let (params, packed) = match encoding {
        Encoding::Raw => (Params::None, bytes.to_vec()),
        Encoding::ShuffleLz4 => (Params::None, lz4_flex::block::compress(&shuffle(bytes, size))),
        Encoding::SparseLz4 => (Params::None, lz4_flex::block::compress(&sparse(bytes, size))),
        Encoding::F16 => {
            (Params::None, f32s(bytes).flat_map(|v| half::f16::from_f32(v).to_le_bytes()).collect())
        }
        Encoding::Int8 { per_channel } => {
            let x: Vec<f32> = f32s(bytes).collect();
            if x.iter().any(|v| !v.is_finite()) {
                return Err(EncodingError::NotFinite);
            }
            let (channels, inner) = layout(t.shape(), per_channel).ok_or_else(not_applicable)?;
            let (mut scales, mut zeros) = (vec![], vec![]);
            let mut q = vec![0u8; x.len()];
            for c in 0..channels {
                let values = channel(&x, channels, inner, c);
                let (lo, hi) = values.clone().fold((0f32, 0f32), |(lo, hi), v| (lo.min(v), hi.max(v)));
                let scale = if hi > lo { (hi - lo) / 255.0 } else { 1.0 };
                let zero = (-128.0 - lo / scale).round().clamp(-128.0, 127.0);
                for i in channel_indices(x.len(), channels, inner, c) {
                    q[i] = ((x[i] / scale).round() + zero).clamp(-128.0, 127.0) as i8 as u8;
                }
                scales.push(scale);
                zeros.push(zero as i8);
            }
            (Params::Int8 { scales, zeros }, q)
        }
    };
    Ok(Encoded { encoding, params, bytes: packed })
}

/// `t` encoded and decoded again (what the other side of the link gets), and
/// the encoded size in bytes.
pub fn round_trip(t: &Tensor, encoding: Encoding) -> Result<(Tensor, usize), EncodingError> {
    let packed = encode(t, encoding)?;
    Ok((decode(t.datum_type(), t.shape(), &packed)?, packed.bytes.len()))
}

/// Decodes a tensor of type `dt` and shape `shape` from `encoded`. Sizes
/// are checked before anything is decompressed: a claimed size more than
/// [`MAX_RATIO`] times the bytes sent is refused, and no decompression
/// writes past the shape's size.
pub fn decode(dt: DatumType, shape: &[usize], encoded: &Encoded) -> Result<Tensor, EncodingError> {
    decode_parts(dt, shape, encoded.encoding, &encoded.params, &encoded.bytes)
}

/// [`decode`] from the parts a message carries: the encoding and its
/// parameters from the header, the bytes from the body.
pub fn decode_parts(
    dt: DatumType,
    shape: &[usize],
    encoding: Encoding,
    params: &Params,
    bytes: &[u8],
) -> Result<Tensor, EncodingError> {
    let bad = |reason: String| corrupt(encoding, reason);
    if !encoding.applies_to(dt) {
        return Err(EncodingError::NotApplicable { encoding, dtype: dt, shape: shape.to_vec() });
    }
    let n = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| bad("size overflows".into()))?;
    let size = dt.size_of();
    let raw_len = n.checked_mul(size).ok_or_else(|| bad("size overflows".into()))?;
    if raw_len > bytes.len().max(1).saturating_mul(MAX_RATIO) {
        return Err(EncodingError::Bomb { encoding, decoded: raw_len, encoded: bytes.len() });
    }
    let params_fit = match (encoding, params) {
        (Encoding::Int8 { .. }, params) => matches!(params, Params::Int8 { .. }),
        (_, params) => *params == Params::None,
    };
    if !params_fit {
        return Err(bad("parameters of another encoding".into()));
    }
    let raw: Vec<u8> = match encoding {
        Encoding::Raw => {
            if bytes.len() != raw_len {
                return Err(bad(format!("{} bytes for a {raw_len}-byte tensor", bytes.len())));
            }
            bytes.to_vec()
        }
        Encoding::ShuffleLz4 => {
            let mut planes = vec![0u8; raw_len];
            let got = lz4_flex::block::decompress_into(bytes, &mut planes).map_err(|e| bad(e.to_string()))?;
            if got != raw_len {
                return Err(bad(format!("{got} bytes decompressed for a {raw_len}-byte tensor")));
            }
            unshuffle(&planes, size)
        }
        Encoding::SparseLz4 => {
            let map_len = n.div_ceil(8);
            let mut packed = vec![0u8; map_len + raw_len];
            let got = lz4_flex::block::decompress_into(bytes, &mut packed).map_err(|e| bad(e.to_string()))?;
            packed.truncate(got);
            unsparse(&packed, n, size).map_err(bad)?
        }
        Encoding::F16 => {
            if bytes.len() != n * 2 {
                return Err(bad(format!("{} bytes for {n} halves", bytes.len())));
            }
            bytes
                .chunks_exact(2)
                .flat_map(|h| half::f16::from_le_bytes([h[0], h[1]]).to_f32().to_le_bytes())
                .collect()
        }
        Encoding::Int8 { per_channel } => {
            let Params::Int8 { scales, zeros } = params else { unreachable!("checked above") };
            let (channels, inner) =
                layout(shape, per_channel).ok_or_else(|| bad("no channel axis".into()))?;
            if scales.len() != channels || zeros.len() != channels {
                return Err(bad(format!(
                    "{} scales and {} zero points for {channels} channels",
                    scales.len(),
                    zeros.len()
                )));
            }
            if scales.iter().any(|s| !(s.is_finite() && *s > 0.0)) {
                return Err(bad("a scale is not finite and positive".into()));
            }
            if bytes.len() != n {
                return Err(bad(format!("{} bytes for {n} int8 values", bytes.len())));
            }
            let mut out = vec![0f32; n];
            for c in 0..channels {
                for i in channel_indices(n, channels, inner, c) {
                    out[i] = (bytes[i] as i8 as f32 - zeros[c] as f32) * scales[c];
                }
            }
            out.iter().flat_map(|v| v.to_le_bytes()).collect()
        }
    };
    let mut t = Tensor::zero_dt(dt, shape).map_err(|e| bad(e.to_string()))?;
    t.as_bytes_mut().copy_from_slice(&raw);
    if dt == DatumType::Bool && raw.iter().any(|&b| b > 1) {
        return Err(bad("a bool byte is not 0 or 1".into()));
    }
    Ok(t)
}

/// Little-endian f32 bytes as values.
fn f32s(bytes: &[u8]) -> impl Iterator<Item = f32> + '_ {
    bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// (channels, elements per channel run) for per-channel int8 over axis 1,
/// or one channel; `None` when there are too many channels.
fn layout(shape: &[usize], per_channel: bool) -> Option<(usize, usize)> {
    if !per_channel || shape.len() < 2 {
        return Some((1, shape.iter().product()));
    }
    let channels = shape[1];
    (1..=MAX_CHANNELS).contains(&channels).then(|| (channels, shape[2..].iter().product()))
}

/// The indices of channel `c`: runs of `inner` elements every `channels · inner`.
fn channel_indices(n: usize, channels: usize, inner: usize, c: usize) -> impl Iterator<Item = usize> + Clone {
    let stride = channels * inner.max(1);
    (0..n.div_ceil(stride.max(1)))
        .flat_map(move |o| (0..inner).map(move |i| o * stride + c * inner + i))
        .filter(move |&i| i < n)
}

fn channel(x: &[f32], channels: usize, inner: usize, c: usize) -> impl Iterator<Item = f32> + Clone + '_ {
    channel_indices(x.len(), channels, inner, c).map(move |i| x[i])
}

/// Every element's byte 0, then every byte 1, ...
fn shuffle(bytes: &[u8], size: usize) -> Vec<u8> {
    let n = bytes.len() / size.max(1);
    let mut out = vec![0u8; bytes.len()];
    for (i, e) in bytes.chunks_exact(size).enumerate() {
        for (b, &v) in e.iter().enumerate() {
            out[b * n + i] = v;
        }
    }
    out
}

fn unshuffle(planes: &[u8], size: usize) -> Vec<u8> {
    let n = planes.len() / size.max(1);
    let mut out = vec![0u8; planes.len()];
    for b in 0..size {
        for i in 0..n {
            out[i * size + b] = planes[b * n + i];
        }
    }
    out
}

/// A bitmap (bit i of byte i / 8: element i is not all-zero bytes), then
/// the non-zero elements' bytes.
fn sparse(bytes: &[u8], size: usize) -> Vec<u8> {
    let n = bytes.len() / size.max(1);
    let mut out = vec![0u8; n.div_ceil(8)];
    for (i, e) in bytes.chunks_exact(size).enumerate() {
        if e.iter().any(|&b| b != 0) {
            out[i / 8] |= 1 << (i % 8);
            out.extend_from_slice(e);
        }
    }
    out
}

fn unsparse(packed: &[u8], n: usize, size: usize) -> Result<Vec<u8>, String> {
    let map_len = n.div_ceil(8);
    let (map, values) = packed.split_at_checked(map_len).ok_or("shorter than its bitmap")?;
    let set: usize = map.iter().map(|b| b.count_ones() as usize).sum();
    if !n.is_multiple_of(8) && map[map_len - 1] >> (n % 8) != 0 {
        return Err("bitmap bits set past the last element".into());
    }
    if values.len() != set * size {
        return Err(format!("{} value bytes for {set} non-zero elements", values.len()));
    }
    let mut out = vec![0u8; n * size];
    let mut next = values.chunks_exact(size);
    for i in 0..n {
        if map[i / 8] & (1 << (i % 8)) != 0 {
            let v = next.next().ok_or("fewer values than bits")?;
            out[i * size..(i + 1) * size].copy_from_slice(v);
        }
    }
    Ok(out)
}
