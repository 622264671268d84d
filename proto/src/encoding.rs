//! Tensor encodings for the link, without I/O: how a crossing tensor's
//! bytes are packed (raw; lossless byte-plane shuffle + LZ4 and sparse
//! bitmap + LZ4; a sensor input narrowed to its own u8 or i16 values, then
//! LZ4; lossy f16, int8 affine per tensor or per channel, alone or then
//! LZ4, and JPEG for u8 images) and unpacked, with every size checked before anything is
//! decompressed.
//!
//! Lossless encodings give back the same bytes (NaN payloads and −0.0
//! included); the narrow ones apply only where every value is exactly a
//! sensor value under the model card's widening, and say so when not.
//! Lossy ones are for f32 tensors only; whether their error is acceptable
//! is the caller's accuracy budget, measured, not assumed here.

use serde::{Deserialize, Serialize};
use tandem_types::SensorType;
pub use tandem_types::{Widening, WideningError, WireTensor, WireType};
use thiserror::Error;

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
    /// An f32 input as its sensor's u8 values (pixels), then LZ4; the
    /// handheld widens them as the model card says. Bit-exact: it applies
    /// only where every value widens back to the same bits.
    U8Lz4,
    /// An f32 input as its sensor's i16 values (PCM), byte planes, then
    /// LZ4; widened, and exact, as for [`Encoding::U8Lz4`].
    I16Lz4,
    /// f32 as IEEE half precision. Lossy; f32 only.
    F16,
    /// f32 as int8, `x ≈ (q − zero) · scale`, one scale and zero point per
    /// tensor, or per channel (axis 1) when `per_channel`. Lossy; f32 only.
    Int8 {
        /// One scale per channel of axis 1 (rank ≥ 2) instead of one per tensor.
        per_channel: bool,
    },
    /// [`Encoding::Int8`], then LZ4 (a ReLU map's zeros are one repeated
    /// value). Lossy; f32 only.
    Int8Lz4 {
        /// One scale per channel of axis 1, as for [`Encoding::Int8`].
        per_channel: bool,
    },
    /// An f32 image input (u8 sensor, NCHW or NHWC, batch 1, 1 or 3
    /// channels) as a JPEG of its pixels at this quality; widened as the
    /// model card says. Lossy.
    Jpeg {
        /// JPEG quality, 1 to 100.
        quality: u8,
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
    pub const ALL: [Encoding; 12] = [
        Encoding::Raw,
        Encoding::ShuffleLz4,
        Encoding::SparseLz4,
        Encoding::U8Lz4,
        Encoding::I16Lz4,
        Encoding::F16,
        Encoding::Int8 { per_channel: false },
        Encoding::Int8 { per_channel: true },
        Encoding::Int8Lz4 { per_channel: false },
        Encoding::Int8Lz4 { per_channel: true },
        Encoding::Jpeg { quality: 90 },
        Encoding::Jpeg { quality: 75 },
    ];

    /// Whether decoding gives back the same bytes.
    pub fn is_lossless(self) -> bool {
        matches!(
            self,
            Encoding::Raw | Encoding::ShuffleLz4 | Encoding::SparseLz4 | Encoding::U8Lz4 | Encoding::I16Lz4
        )
    }

    /// Whether it needs the input's [`Widening`] (a sensor type from the model card).
    pub fn needs_widening(self) -> bool {
        matches!(self, Encoding::U8Lz4 | Encoding::I16Lz4 | Encoding::Jpeg { .. })
    }

    /// Whether it applies to tensors of type `dt` (lossy and narrow ones: f32 only).
    pub fn applies_to(self, dt: WireType) -> bool {
        (self.is_lossless() && !self.needs_widening()) || dt == WireType::F32
    }

    /// Whether it applies to a tensor of shape `shape` widened by `w`: the
    /// sensor type fits (u8 or i16; JPEG: a u8 image with 1 or 3 channels,
    /// batch 1, NCHW or NHWC). Encodings that need no widening: always.
    pub fn fits(self, w: &Widening, shape: &[usize]) -> bool {
        if !self.needs_widening() {
            return true;
        }
        w.check(shape).is_ok()
            && match self {
                Encoding::U8Lz4 => w.ty == SensorType::U8,
                Encoding::I16Lz4 => w.ty == SensorType::I16,
                _ => w.ty == SensorType::U8 && image_dims(w, shape).is_some(),
            }
    }

    /// Whether it applies to a tensor of type `dt` and shape `shape`: lossy
    /// ones to f32 only, per-channel int8 to a rank ≥ 2 tensor with 1 to
    /// [`MAX_CHANNELS`] channels on axis 1.
    pub fn applies(self, dt: WireType, shape: &[usize]) -> bool {
        match self {
            Encoding::Int8 { per_channel: true } | Encoding::Int8Lz4 { per_channel: true } => {
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
            Encoding::Int8Lz4 { per_channel: false } => "int8-lz4",
            Encoding::Int8Lz4 { per_channel: true } => "int8-channel-lz4",
            Encoding::U8Lz4 => "u8-lz4",
            Encoding::I16Lz4 => "i16-lz4",
            Encoding::Jpeg { quality: 90 } => "jpeg-90",
            Encoding::Jpeg { quality: 75 } => "jpeg-75",
            Encoding::Jpeg { .. } => "jpeg",
        }
    }

    /// The encoding named `name` (see [`Encoding::name`]; `jpeg-Q` for any quality 1 to 100).
    pub fn parse(name: &str) -> Result<Encoding, UnknownEncoding> {
        if let Some(q) = name.strip_prefix("jpeg-").and_then(|q| q.parse::<u8>().ok()) {
            if (1..=100).contains(&q) {
                return Ok(Encoding::Jpeg { quality: q });
            }
        }
        Self::ALL.into_iter().find(|e| e.name() == name).ok_or_else(|| UnknownEncoding(name.to_string()))
    }
}

/// A name that is no [`Encoding`]'s.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("unknown encoding '{0}' (known: {known})", known = Encoding::ALL.map(Encoding::name).join(", "))]
pub struct UnknownEncoding(pub String);

impl std::fmt::Display for Encoding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Encoding::Jpeg { quality } => write!(f, "jpeg-{quality}"),
            e => f.write_str(e.name()),
        }
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
    /// u8, i16 and JPEG: how the sensor's values widen to the model's floats.
    Widen(Widening),
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
        dtype: WireType,
        /// Its shape.
        shape: Vec<usize>,
    },
    /// The tensor's element type cannot cross the link (the runtime's
    /// tensors have more types than the wire).
    #[error("a tensor of type {0} cannot cross the link")]
    UnsupportedType(String),
    /// int8 cannot represent NaN or infinity.
    #[error("int8 cannot encode a tensor holding NaN or infinity")]
    NotFinite,
    /// A narrow encoding needs the input's widening (its model card's sensor type).
    #[error("{0} needs the input's sensor type and normalization (a model card's sensor_type)")]
    NoWidening(Encoding),
    /// A value is not exactly a sensor value under the widening.
    #[error("{encoding}: value {index} ({value}) is not exactly a sensor value under the model card's normalization")]
    NotExact {
        /// The encoding.
        encoding: Encoding,
        /// The element's index.
        index: usize,
        /// Its value.
        value: f32,
    },
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

/// Encodes `t` with `encoding` (not one that needs a widening: see [`encode_with`]).
pub fn encode(t: &WireTensor<'_>, encoding: Encoding) -> Result<Encoded, EncodingError> {
    encode_with(t, encoding, None)
}

/// Encodes `t` with `encoding`; the narrow and JPEG encodings use `widening`,
/// how the input's sensor values become its floats.
pub fn encode_with(
    t: &WireTensor<'_>,
    encoding: Encoding,
    widening: Option<&Widening>,
) -> Result<Encoded, EncodingError> {
    let not_applicable =
        || EncodingError::NotApplicable { encoding, dtype: t.dtype(), shape: t.shape().to_vec() };
    if !encoding.applies(t.dtype(), t.shape()) {
        return Err(not_applicable());
    }
    if encoding.needs_widening() {
        let w = widening.ok_or(EncodingError::NoWidening(encoding))?;
        if !encoding.fits(w, t.shape()) {
            return Err(not_applicable());
        }
        let x: Vec<f32> = f32s(t.bytes()).collect();
        let bytes = match encoding {
            Encoding::Jpeg { quality } => jpeg(&x, t.shape(), w, quality)?,
            _ => narrow(&x, t.shape(), w, encoding)?,
        };
        return Ok(Encoded { encoding, params: Params::Widen(w.clone()), bytes });
    }
    let bytes = t.bytes();
    let size = t.dtype().size();
    let (params, packed) = match encoding {
        Encoding::Raw => (Params::None, bytes.to_vec()),
        Encoding::ShuffleLz4 => (Params::None, lz4_flex::block::compress(&shuffle(bytes, size))),
        Encoding::SparseLz4 => (Params::None, lz4_flex::block::compress(&sparse(bytes, size))),
        Encoding::F16 => {
            (Params::None, f32s(bytes).flat_map(|v| half::f16::from_f32(v).to_le_bytes()).collect())
        }
        Encoding::Int8 { per_channel } | Encoding::Int8Lz4 { per_channel } => {
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
            let q =
                if matches!(encoding, Encoding::Int8Lz4 { .. }) { lz4_flex::block::compress(&q) } else { q };
            (Params::Int8 { scales, zeros }, q)
        }
        Encoding::U8Lz4 | Encoding::I16Lz4 | Encoding::Jpeg { .. } => unreachable!("encoded above"),
    };
    Ok(Encoded { encoding, params, bytes: packed })
}

/// `t` encoded and decoded again (what the other side of the link gets), and
/// the encoded size in bytes.
pub fn round_trip(
    t: &WireTensor<'_>,
    encoding: Encoding,
) -> Result<(WireTensor<'static>, usize), EncodingError> {
    round_trip_with(t, encoding, None)
}

/// [`round_trip`] with the input's widening, for the narrow and JPEG encodings.
pub fn round_trip_with(
    t: &WireTensor<'_>,
    encoding: Encoding,
    widening: Option<&Widening>,
) -> Result<(WireTensor<'static>, usize), EncodingError> {
    let packed = encode_with(t, encoding, widening)?;
    Ok((decode(t.dtype(), t.shape(), &packed)?, packed.bytes.len()))
}

/// Decodes a tensor of type `dt` and shape `shape` from `encoded`. Sizes
/// are checked before anything is decompressed: a claimed size more than
/// [`MAX_RATIO`] times the bytes sent is refused, and no decompression
/// writes past the shape's size.
pub fn decode(
    dt: WireType,
    shape: &[usize],
    encoded: &Encoded,
) -> Result<WireTensor<'static>, EncodingError> {
    decode_parts(dt, shape, encoded.encoding, &encoded.params, &encoded.bytes)
}

/// [`decode`] from the parts a message carries: the encoding and its
/// parameters from the header, the bytes from the body.
pub fn decode_parts(
    dt: WireType,
    shape: &[usize],
    encoding: Encoding,
    params: &Params,
    bytes: &[u8],
) -> Result<WireTensor<'static>, EncodingError> {
    let bad = |reason: String| corrupt(encoding, reason);
    if !encoding.applies_to(dt) {
        return Err(EncodingError::NotApplicable { encoding, dtype: dt, shape: shape.to_vec() });
    }
    let n = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| bad("size overflows".into()))?;
    let size = dt.size();
    let raw_len = n.checked_mul(size).ok_or_else(|| bad("size overflows".into()))?;
    if raw_len > bytes.len().max(1).saturating_mul(MAX_RATIO) {
        return Err(EncodingError::Bomb { encoding, decoded: raw_len, encoded: bytes.len() });
    }
    let params_fit = match (encoding, params) {
        (Encoding::Int8 { .. } | Encoding::Int8Lz4 { .. }, params) => matches!(params, Params::Int8 { .. }),
        (e, params) if e.needs_widening() => matches!(params, Params::Widen(_)),
        (_, params) => *params == Params::None,
    };
    if !params_fit {
        return Err(bad("parameters of another encoding".into()));
    }
    if let Params::Widen(w) = params {
        w.check(shape).map_err(|r| bad(format!("widening: {r}")))?;
        if !encoding.fits(w, shape) {
            return Err(bad(format!("a {:?} sensor with layout '{}' for shape {shape:?}", w.ty, w.layout)));
        }
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
            unsparse(&packed, n, size)?
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
        Encoding::Int8 { per_channel } | Encoding::Int8Lz4 { per_channel } => {
            let Params::Int8 { scales, zeros } = params else { unreachable!("checked above") };
            let unpacked;
            let bytes = if matches!(encoding, Encoding::Int8Lz4 { .. }) {
                let mut q = vec![0u8; n];
                let got = lz4_flex::block::decompress_into(bytes, &mut q).map_err(|e| bad(e.to_string()))?;
                if got != n {
                    return Err(bad(format!("{got} bytes decompressed for {n} int8 values")));
                }
                unpacked = q;
                &unpacked[..]
            } else {
                bytes
            };
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
        Encoding::U8Lz4 | Encoding::I16Lz4 => {
            let Params::Widen(w) = params else { unreachable!("checked above") };
            let width = if encoding == Encoding::U8Lz4 { 1 } else { 2 };
            let mut packed = vec![0u8; n * width];
            let got = lz4_flex::block::decompress_into(bytes, &mut packed).map_err(|e| bad(e.to_string()))?;
            if got != packed.len() {
                return Err(bad(format!("{got} bytes decompressed for {n} sensor values")));
            }
            let values: Vec<f32> = if width == 1 {
                packed.iter().map(|&q| f32::from(q)).collect()
            } else {
                unshuffle(&packed, 2)
                    .chunks_exact(2)
                    .map(|b| f32::from(i16::from_le_bytes([b[0], b[1]])))
                    .collect()
            };
            widen_all(&values, shape, w)
        }
        Encoding::Jpeg { .. } => {
            let Params::Widen(w) = params else { unreachable!("checked above") };
            unjpeg(bytes, shape, w, encoding)?
        }
    };
    WireTensor::new(dt, shape.to_vec(), raw).map_err(|e| bad(e.to_string()))
}

/// Sensor values (in the tensor's order) widened to the model's f32 bytes.
fn widen_all(values: &[f32], shape: &[usize], w: &Widening) -> Vec<u8> {
    let (channels, inner) = w.runs(shape);
    let inner = inner.max(1);
    values
        .iter()
        .enumerate()
        .flat_map(|(i, &q)| w.widen(q, (i / inner) % channels.max(1)).to_le_bytes())
        .collect()
}

/// The sensor values of `x` (u8, or i16 in byte planes), then LZ4; refused
/// when a value is not exactly a sensor value.
fn narrow(x: &[f32], shape: &[usize], w: &Widening, encoding: Encoding) -> Result<Vec<u8>, EncodingError> {
    let (channels, inner) = w.runs(shape);
    let inner = inner.max(1);
    let width = if encoding == Encoding::U8Lz4 { 1 } else { 2 };
    let mut out = Vec::with_capacity(x.len() * width);
    for (index, &value) in x.iter().enumerate() {
        let q = w.narrow(value, (index / inner) % channels.max(1)).ok_or(EncodingError::NotExact {
            encoding,
            index,
            value,
        })?;
        if width == 1 {
            out.push(q as u8);
        } else {
            out.extend_from_slice(&(q as i16).to_le_bytes());
        }
    }
    let planes = if width == 2 { shuffle(&out, 2) } else { out };
    Ok(lz4_flex::block::compress(&planes))
}

/// A batch-1 NCHW or NHWC image tensor with 1 or 3 channels.
struct ImageDims {
    h: usize,
    w: usize,
    c: usize,
    channels_last: bool,
}

impl ImageDims {
    /// The tensor index of pixel buffer byte `p` (row-major, channels
    /// interleaved, as image codecs lay them out) and its channel.
    fn at(&self, p: usize) -> (usize, usize) {
        let (ch, pixel) = (p % self.c, p / self.c);
        let i = if self.channels_last { p } else { ch * self.h * self.w + pixel };
        (i, ch)
    }
}

/// The image dimensions of a tensor of `shape` laid out as `w` says.
fn image_dims(w: &Widening, shape: &[usize]) -> Option<ImageDims> {
    let (c, h, wd, channels_last) = match (w.layout.as_str(), shape) {
        ("NCHW", &[1, c, h, wd]) => (c, h, wd, false),
        ("NHWC", &[1, h, wd, c]) => (c, h, wd, true),
        _ => return None,
    };
    let side = 1..=usize::from(u16::MAX);
    (matches!(c, 1 | 3) && side.contains(&h) && side.contains(&wd)).then_some(ImageDims {
        h,
        w: wd,
        c,
        channels_last,
    })
}

/// The pixels of image `x` (each value's nearest sensor value) as a JPEG.
fn jpeg(x: &[f32], shape: &[usize], w: &Widening, quality: u8) -> Result<Vec<u8>, EncodingError> {
    use image::ImageEncoder;
    let bad = |reason: String| corrupt(Encoding::Jpeg { quality }, reason);
    let img = image_dims(w, shape).ok_or_else(|| bad("not a 1- or 3-channel batch-1 image".into()))?;
    let (wd, h, c) = (img.w, img.h, img.c);
    let pixels: Vec<u8> = (0..h * wd * c)
        .map(|p| {
            let (i, ch) = img.at(p);
            w.nearest(x[i], ch) as u8
        })
        .collect();
    let colour = if c == 3 { image::ExtendedColorType::Rgb8 } else { image::ExtendedColorType::L8 };
    let mut out = vec![];
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, quality.clamp(1, 100))
        .write_image(&pixels, wd as u32, h as u32, colour)
        .map_err(|e| bad(e.to_string()))?;
    Ok(out)
}

/// A JPEG's pixels widened into the tensor's layout; its size and colour
/// type are checked against the shape before its pixels are decoded.
fn unjpeg(bytes: &[u8], shape: &[usize], w: &Widening, encoding: Encoding) -> Result<Vec<u8>, EncodingError> {
    use image::ImageDecoder;
    let bad = |reason: String| corrupt(encoding, reason);
    let img = image_dims(w, shape).ok_or_else(|| bad("not a 1- or 3-channel batch-1 image".into()))?;
    let (wd, h, c) = (img.w, img.h, img.c);
    let decoder =
        image::codecs::jpeg::JpegDecoder::new(std::io::Cursor::new(bytes)).map_err(|e| bad(e.to_string()))?;
    let want = if c == 3 { image::ColorType::Rgb8 } else { image::ColorType::L8 };
    if decoder.dimensions() != (wd as u32, h as u32) || decoder.color_type() != want {
        return Err(bad(format!(
            "a {:?} {}x{} JPEG for a {wd}x{h} image of {c} channels",
            decoder.color_type(),
            decoder.dimensions().0,
            decoder.dimensions().1
        )));
    }
    let mut pixels = vec![0u8; h * wd * c];
    if decoder.total_bytes() != pixels.len() as u64 {
        return Err(bad("its pixel buffer does not match the shape".into()));
    }
    decoder.read_image(&mut pixels).map_err(|e| bad(e.to_string()))?;
    let mut out = vec![0f32; pixels.len()];
    for (p, &q) in pixels.iter().enumerate() {
        let (i, ch) = img.at(p);
        out[i] = w.widen(f32::from(q), ch);
    }
    Ok(out.iter().flat_map(|v| v.to_le_bytes()).collect())
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

fn unsparse(packed: &[u8], n: usize, size: usize) -> Result<Vec<u8>, EncodingError> {
    let bad = |reason: String| corrupt(Encoding::SparseLz4, reason);
    let map_len = n.div_ceil(8);
    let (map, values) =
        packed.split_at_checked(map_len).ok_or_else(|| bad("shorter than its bitmap".into()))?;
    let set: usize = map.iter().map(|b| b.count_ones() as usize).sum();
    if !n.is_multiple_of(8) && map[map_len - 1] >> (n % 8) != 0 {
        return Err(bad("bitmap bits set past the last element".into()));
    }
    if values.len() != set * size {
        return Err(bad(format!("{} value bytes for {set} non-zero elements", values.len())));
    }
    let mut out = vec![0u8; n * size];
    let mut next = values.chunks_exact(size);
    for i in 0..n {
        if map[i / 8] & (1 << (i % 8)) != 0 {
            let v = next.next().ok_or_else(|| bad("fewer values than bits".into()))?;
            out[i * size..(i + 1) * size].copy_from_slice(v);
        }
    }
    Ok(out)
}
