//! The protocol's tensor functions on tract's tensors, as the runtime
//! calls them (`tandem::encoding`, which the tests cannot depend on): each
//! crosses through `tandem_core::wire`, so the tests below build their
//! tensors with tract and compare bytes as before.

use tandem_core::wire::{from_wire, to_wire, wire_type};
use tandem_core::{DatumType, Tensor};
use tandem_proto::encoding::{self, Encoded, Encoding, EncodingError, Widening};
use tandem_proto::protocol::{self, Header, Message, PackedTensor, ProtocolError, TensorMeta};

fn wire(t: &Tensor) -> tandem_proto::protocol::WireTensor<'_> {
    to_wire(t).expect("a type the wire carries")
}

pub fn encode(t: &Tensor, e: Encoding) -> Result<Encoded, EncodingError> {
    encoding::encode(&wire(t), e)
}

pub fn encode_with(t: &Tensor, e: Encoding, w: Option<&Widening>) -> Result<Encoded, EncodingError> {
    encoding::encode_with(&wire(t), e, w)
}

pub fn decode(dt: DatumType, shape: &[usize], encoded: &Encoded) -> Result<Tensor, EncodingError> {
    let w = wire_type(dt).expect("a type the wire carries");
    encoding::decode(w, shape, encoded).map(|t| from_wire(t).expect("converts"))
}

pub fn pack_tensor(
    name: &str,
    t: &Tensor,
    e: Encoding,
    w: Option<&Widening>,
) -> Result<PackedTensor, ProtocolError> {
    protocol::pack_tensor(name, &wire(t), e, w)
}

pub fn tensors(m: &Message) -> Result<Vec<(String, Tensor)>, ProtocolError> {
    Ok(m.tensors()?.into_iter().map(|(n, t)| (n, from_wire(t).expect("converts"))).collect())
}

pub fn with_tensors(
    make: impl FnOnce(Vec<TensorMeta>) -> Header,
    tensors: &[(String, &Tensor)],
) -> Result<Message, ProtocolError> {
    let wire: Vec<_> = tensors.iter().map(|(n, t)| (n.clone(), wire(t))).collect();
    Message::with_tensors(make, &wire)
}

pub fn result(
    frame: u64,
    us: u64,
    outputs: &[(String, &Tensor)],
    answer: &[Encoding],
) -> Result<Message, ProtocolError> {
    let wire: Vec<_> = outputs.iter().map(|(n, t)| (n.clone(), wire(t))).collect();
    tandem_proto::session::HandheldSession::result(frame, us, &wire, answer, None)
}
