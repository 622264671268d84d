//! The link's tensor encodings ([`tandem_proto::encoding`], which works on
//! the wire's tract-free tensors) on tract's tensors: the same names, each
//! crossing through [`tandem_core::wire`].

pub use tandem_proto::encoding::*;

use tandem_core::wire::{datum_type, from_wire, to_wire, wire_type};
use tract_onnx::prelude::{DatumType, Tensor};

/// `t` as the wire's tensor, or why its type cannot cross.
fn wire(t: &Tensor) -> Result<WireTensor<'_>, EncodingError> {
    to_wire(t).map_err(|_| EncodingError::UnsupportedType(format!("{:?}", t.datum_type())))
}

/// A decoded wire tensor as tract's.
fn tract(t: WireTensor<'_>, encoding: Encoding) -> Result<Tensor, EncodingError> {
    from_wire(t).map_err(|e| EncodingError::Corrupt { encoding, reason: e.to_string() })
}

/// Whether `encoding` applies to `t` ([`Encoding::applies`] on its type and shape).
pub fn applies(encoding: Encoding, t: &Tensor) -> bool {
    wire_type(t.datum_type()).is_some_and(|w| encoding.applies(w, t.shape()))
}

/// Encodes `t` with `encoding` (not one that needs a widening: see [`encode_with`]).
pub fn encode(t: &Tensor, encoding: Encoding) -> Result<Encoded, EncodingError> {
    encode_with(t, encoding, None)
}

/// Encodes `t` with `encoding`; the narrow and JPEG encodings use `widening`.
pub fn encode_with(
    t: &Tensor,
    encoding: Encoding,
    widening: Option<&Widening>,
) -> Result<Encoded, EncodingError> {
    tandem_proto::encoding::encode_with(&wire(t)?, encoding, widening)
}

/// `t` encoded and decoded again (what the other side gets), and the encoded size.
pub fn round_trip(t: &Tensor, encoding: Encoding) -> Result<(Tensor, usize), EncodingError> {
    round_trip_with(t, encoding, None)
}

/// [`round_trip`] with the input's widening, for the narrow and JPEG encodings.
pub fn round_trip_with(
    t: &Tensor,
    encoding: Encoding,
    widening: Option<&Widening>,
) -> Result<(Tensor, usize), EncodingError> {
    let (back, sent) = tandem_proto::encoding::round_trip_with(&wire(t)?, encoding, widening)?;
    Ok((tract(back, encoding)?, sent))
}

/// Decodes a tensor of type `dt` and shape `shape` ([`tandem_proto::encoding::decode`]).
pub fn decode(dt: DatumType, shape: &[usize], encoded: &Encoded) -> Result<Tensor, EncodingError> {
    let w = wire_type(dt).ok_or_else(|| EncodingError::UnsupportedType(format!("{dt:?}")))?;
    debug_assert_eq!(datum_type(w), dt);
    tract(tandem_proto::encoding::decode(w, shape, encoded)?, encoded.encoding)
}

/// Decoded bytes up to which an async task decodes a message's tensors
/// itself (about a millisecond of copying at most) before handing them to
/// a thread: a larger one, which a peer can claim in a few KB of
/// compressed bytes, is decoded on that thread, so that no connection's
/// I/O waits on another's tensors.
pub const DECODE_ON_TASK_BYTES: usize = 4 << 20;

/// A message's tensors as the async task that read them hands them on:
/// decoded there when they are small enough ([`DECODE_ON_TASK_BYTES`]), so
/// that the thread they go to spends its time on the model's halves, else
/// as they came, for that thread to decode.
pub enum Received {
    /// Decoded (or why they could not be).
    Decoded {
        /// The tensors by name, in the message's order.
        tensors: crate::Result<Vec<(String, Tensor)>>,
        /// The CPU time decoding them took, on the thread that did.
        took: std::time::Duration,
    },
    /// Still as they came.
    Wire(tandem_proto::session::Tensors),
}

impl Received {
    /// `tensors`, decoded now when they decode to at most [`DECODE_ON_TASK_BYTES`].
    pub fn of(tensors: tandem_proto::session::Tensors) -> Received {
        let decoded: Option<usize> =
            tensors.metas().iter().try_fold(0usize, |n, m| n.checked_add(m.byte_len().ok()?));
        match decoded.is_some_and(|n| n <= DECODE_ON_TASK_BYTES) {
            true => Received::decoded(&tensors),
            false => Received::Wire(tensors),
        }
    }

    fn decoded(tensors: &tandem_proto::session::Tensors) -> Received {
        let cpu = tandem_core::device_clock::thread_cpu_time();
        let tensors = received(tensors);
        Received::Decoded { tensors, took: tandem_core::device_clock::thread_cpu_time().saturating_sub(cpu) }
    }

    /// The tensors, decoded here if they were not yet, and the CPU time
    /// decoding them took.
    pub fn decode(self) -> (crate::Result<Vec<(String, Tensor)>>, std::time::Duration) {
        match self {
            Received::Decoded { tensors, took } => (tensors, took),
            Received::Wire(t) => Received::decoded(&t).decode(),
        }
    }
}

/// A message's tensors (raw ones borrowed, encoded ones decoded) as tract's.
pub fn received(tensors: &tandem_proto::session::Tensors) -> crate::Result<Vec<(String, Tensor)>> {
    let wire = tensors.decode().map_err(crate::Error::Decode)?;
    wire.into_iter().map(|(name, t)| Ok((name, from_wire(t)?))).collect()
}

/// Tract's tensors as the wire's, borrowing their bytes.
pub fn to_send<'t>(tensors: &[(String, &'t Tensor)]) -> tandem_core::Result<Vec<(String, WireTensor<'t>)>> {
    tensors.iter().map(|(name, t)| Ok((name.clone(), to_wire(t)?))).collect()
}
