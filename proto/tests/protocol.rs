//! The wire protocol without I/O: every message survives encoding and a
//! decoder fed bytes in arbitrary pieces; hostile bytes get a named error,
//! never a panic, and a failed stream stays failed.

use proptest::prelude::*;
use tandem_core::Tensor;
use tandem_proto::encoding::{Encoding, Params};
use tandem_proto::protocol::{
    encode, ErrorCode, FrameDecoder, Header, LatencySummary, Message, ProtocolError, StatusReport,
    TensorMeta, WireType, MAX_FRAME_BYTES, MAX_HEADER_BYTES, PROTOCOL_VERSION,
};

fn status() -> StatusReport {
    StatusReport { load: 0.25, queue: 2, battery: 0.8, charging: false }
}

fn samples() -> Vec<Message> {
    let x = Tensor::from_shape(&[2, 3], &[1.0f32, -2.0, 3.5, 0.0, 1e-9, f32::MAX]).expect("tensor");
    let ids = Tensor::from_shape(&[4], &[1i64, -7, 0, i64::MAX]).expect("tensor");
    let mask = Tensor::from_shape(&[2], &[true, false]).expect("tensor");
    let run = crate::tract::with_tensors(
        |tensors| Header::RunSuffix {
            frame: 7,
            cut: "3f".into(),
            tensors,
            answer: vec![],
            edge: None,
            engine: None,
        },
        &[("x".to_string(), &x), ("ids".to_string(), &ids), ("mask".to_string(), &mask)],
    )
    .expect("tensors");
    let result = crate::tract::with_tensors(
        |tensors| Header::Result { frame: 7, handheld_compute_us: 1234, tensors, edge: None },
        &[("y".to_string(), &x)],
    )
    .expect("tensors");
    vec![
        Message::new(Header::Hello {
            version: PROTOCOL_VERSION,
            model_digest: [7; 32],
            model_bytes: 1 << 20,
            device: "watch-w5".into(),
            input_shapes: vec!["images=1,3,320,320".into()],
            dims: vec!["batch=1".into()],
        }),
        Message::new(Header::Welcome {
            version: PROTOCOL_VERSION,
            device: "pixel-8-pro".into(),
            has_model: false,
            status: status(),
            engines: vec![Default::default()],
        }),
        Message { header: Header::ModelChunk { offset: 4096 }, body: vec![1, 2, 3, 4, 5] },
        Message::new(Header::ModelReady {
            latency: LatencySummary {
                per_layer_s: vec![1e-3, 2e-4],
                overhead_s: 5e-5,
                engine: Default::default(),
                others: vec![],
            },
        }),
        run,
        result,
        Message::new(Header::Status(status())),
        Message { header: Header::Probe { id: 3, echo_payload: true }, body: vec![0; 1000] },
        Message::new(Header::Echo { id: 3, received: 1000 }),
        Message::new(Header::Error { code: ErrorCode::Digest, reason: "digest mismatch".into() }),
        Message::new(Header::Bye),
    ]
}

#[test]
fn every_message_round_trips_and_tensors_keep_their_bytes() {
    for m in samples() {
        let bytes = encode(&m).expect("encodes");
        let mut d = FrameDecoder::default();
        // One byte at a time: nothing comes out before the frame is whole.
        for (i, b) in bytes.iter().enumerate() {
            d.push(std::slice::from_ref(b));
            let got = d.next_message().expect("decodes");
            if i + 1 < bytes.len() {
                assert!(got.is_none(), "{:?} decoded early at byte {i}", m.header);
            } else {
                assert_eq!(got.as_ref(), Some(&m));
            }
        }
        assert_eq!(d.pending(), 0);
    }
    let run = &samples()[4];
    let tensors = crate::tract::tensors(run).expect("tensors");
    assert_eq!(tensors.len(), 3);
    assert_eq!(tensors[0].1.as_bytes().len(), 24);
    assert_eq!(tensors[1].1.datum_type(), tandem_core::DatumType::I64);
    assert_eq!(run.tensors().expect("wire tensors")[1].1.dtype(), WireType::I64);
    let x = Tensor::from_shape(&[2, 3], &[1.0f32, -2.0, 3.5, 0.0, 1e-9, f32::MAX]).expect("tensor");
    assert_eq!(tensors[0].1, x);
}

fn frame(header: &[u8], body: &[u8]) -> Vec<u8> {
    let mut out = vec![];
    out.extend_from_slice(&((4 + header.len() + body.len()) as u32).to_le_bytes());
    out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    out.extend_from_slice(header);
    out.extend_from_slice(body);
    out
}

fn decode_all(bytes: &[u8]) -> Result<Vec<Message>, ProtocolError> {
    let mut d = FrameDecoder::default();
    d.push(bytes);
    let mut out = vec![];
    while let Some(m) = d.next_message()? {
        out.push(m);
    }
    Ok(out)
}

/// A RunSuffix whose header is re-encoded with `tensors` and given `body`.
fn run_frame(tensors: Vec<TensorMeta>, body: &[u8]) -> Vec<u8> {
    let good = Message::new(Header::RunSuffix {
        frame: 1,
        cut: String::new(),
        tensors,
        answer: vec![],
        edge: None,
        engine: None,
    });
    let encoded = bincode::serde::encode_to_vec(&good.header, bincode::config::standard()).expect("header");
    frame(&encoded, body)
}

#[test]
fn hostile_bytes_get_named_errors() {
    // An oversized length is refused before anything is buffered.
    let mut d = FrameDecoder::default();
    d.push(&u32::MAX.to_le_bytes());
    assert!(
        matches!(d.next_message(), Err(ProtocolError::FrameTooLarge { len, .. }) if len == u32::MAX as usize)
    );
    // The stream stays failed.
    d.push(&encode(&Message::new(Header::Bye)).expect("bye"));
    assert_eq!(d.next_message(), Err(ProtocolError::Failed));

    // A header longer than its frame, or than the limit.
    let mut bad = frame(&[0; 8], &[]);
    bad[4..8].copy_from_slice(&100u32.to_le_bytes());
    assert!(matches!(decode_all(&bad), Err(ProtocolError::HeaderTooLarge { len: 100, .. })));
    let big = vec![0u8; MAX_HEADER_BYTES + 1];
    assert!(matches!(decode_all(&frame(&big, &[])), Err(ProtocolError::HeaderTooLarge { .. })));

    // Garbage where a header should be.
    assert!(matches!(decode_all(&frame(&[0xff; 16], &[])), Err(ProtocolError::BadHeader(_))));

    // A shape whose byte size differs from the body.
    let meta = |shape: Vec<u64>, dtype: WireType| TensorMeta {
        name: "x".into(),
        len: shape.iter().try_fold(dtype.size() as u64, |a, &d| a.checked_mul(d)).unwrap_or(0),
        dtype,
        shape,
        encoding: Encoding::Raw,
        params: Params::None,
    };
    let err = decode_all(&run_frame(vec![meta(vec![2, 3], WireType::F32)], &[0; 20])).expect_err("mismatch");
    assert_eq!(err, ProtocolError::BodyMismatch { expected: 24, got: 20 });
    // Rank and dimension limits, and overflowing shapes.
    let err = decode_all(&run_frame(vec![meta(vec![1; 9], WireType::F32)], &[0; 4])).expect_err("rank");
    assert!(err.to_string().contains("rank 9"), "{err}");
    let err = decode_all(&run_frame(vec![meta(vec![1 << 40], WireType::F32)], &[])).expect_err("dim");
    assert!(err.to_string().contains("dimension"), "{err}");
    let huge = vec![1 << 28; 8];
    let err = decode_all(&run_frame(vec![meta(huge, WireType::F64)], &[])).expect_err("overflow");
    assert!(matches!(err, ProtocolError::BadTensor { .. }), "{err}");
    // Booleans other than 0 and 1.
    let err = decode_all(&run_frame(vec![meta(vec![2], WireType::Bool)], &[1, 2])).expect_err("bool");
    assert!(err.to_string().contains("bool"), "{err}");
    // A body on a message that takes none.
    let bye = bincode::serde::encode_to_vec(Header::Bye, bincode::config::standard()).expect("bye");
    assert_eq!(decode_all(&frame(&bye, &[1])), Err(ProtocolError::BodyMismatch { expected: 0, got: 1 }));
    // A frame shorter than its own header length field.
    assert!(matches!(decode_all(&[2, 0, 0, 0, 0, 0]), Err(ProtocolError::HeaderTooLarge { .. })));
}

#[test]
fn a_frame_over_the_decoders_limit_is_refused_and_encode_checks_bodies() {
    let mut d = FrameDecoder::new(1024);
    d.push(
        &encode(&Message { header: Header::Probe { id: 1, echo_payload: false }, body: vec![0; 2000] })
            .expect("probe"),
    );
    assert!(matches!(d.next_message(), Err(ProtocolError::FrameTooLarge { limit: 1024, .. })));
    // The default limit admits a 1 MB tensor-sized body.
    let mb = Message { header: Header::Probe { id: 2, echo_payload: false }, body: vec![7; 1 << 20] };
    let mut d = FrameDecoder::new(MAX_FRAME_BYTES);
    d.push(&encode(&mb).expect("probe"));
    assert_eq!(d.next_message().expect("decodes"), Some(mb));
    let lying = Message {
        header: Header::Result { frame: 1, handheld_compute_us: 0, tensors: vec![], edge: None },
        body: vec![0; 3],
    };
    assert!(matches!(encode(&lying), Err(ProtocolError::BodyMismatch { .. })));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn mutated_frames_decode_or_get_a_named_error(
        which in 0usize..64,
        edits in proptest::collection::vec((any::<u32>(), 0u8..4, any::<u8>()), 1..5),
    ) {
        let messages = samples();
        let bytes = mutate(&encode(&messages[which % messages.len()]).expect("encodes"), &edits);
        let mut d = FrameDecoder::default();
        d.push(&bytes);
        match d.next_message() {
            Ok(Some(m)) => {
                // Exactly one frame, and what was accepted is a valid message.
                prop_assert_eq!(d.next_message(), Ok(None));
                prop_assert_eq!(decode_all(&encode(&m).expect("a decoded message re-encodes")), Ok(vec![m]));
            }
            Ok(None) => prop_assert!(false, "a whole frame was fed, none decoded"),
            Err(e) => {
                // The length prefix stays valid, so the error is in the header or the tensors.
                prop_assert!(!matches!(e, ProtocolError::FrameTooLarge { .. } | ProtocolError::Failed), "{e}");
                prop_assert_eq!(d.next_message(), Err(ProtocolError::Failed));
            }
        }
    }

    #[test]
    fn valid_streams_decode_whatever_the_split(splits in proptest::collection::vec(0usize..4000, 0..8)) {
        let messages = samples();
        let stream: Vec<u8> = messages.iter().flat_map(|m| encode(m).expect("encodes")).collect();
        let mut points: Vec<usize> = splits.into_iter().map(|s| s % (stream.len() + 1)).collect();
        points.push(0);
        points.push(stream.len());
        points.sort_unstable();
        let mut d = FrameDecoder::default();
        let mut got = vec![];
        for w in points.windows(2) {
            d.push(&stream[w[0]..w[1]]);
            while let Some(m) = d.next_message().expect("valid stream") {
                got.push(m);
            }
        }
        prop_assert_eq!(got, messages);
    }
}

/// A valid frame with `edits` applied past its length prefix: each edit
/// (position, kind, value) flips bits of a byte, sets a byte, deletes a byte
/// or inserts one; the length prefix is then fixed to the new length, so a
/// decoder reads the mutated header and tensors instead of stopping at the
/// length.
fn mutate(frame: &[u8], edits: &[(u32, u8, u8)]) -> Vec<u8> {
    let mut bytes = frame.to_vec();
    for &(pos, kind, value) in edits {
        let at = 4 + pos as usize % (bytes.len() - 4);
        match kind {
            0 => bytes[at] ^= value.max(1),
            1 => bytes[at] = value,
            2 if bytes.len() > 9 => {
                bytes.remove(at);
            }
            _ => bytes.insert(at, value),
        }
    }
    let len = (bytes.len() - 4) as u32;
    bytes[..4].copy_from_slice(&len.to_le_bytes());
    bytes
}

/// Mutated frames reach every decoding stage: some still decode, and the
/// others fail in the header length, the header, a tensor or the body size,
/// each named. A check that random bytes only ever stop at the length prefix
/// would fail here.
#[test]
fn mutations_reach_the_header_and_the_tensors() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
    let messages = samples();
    let mut seen = std::collections::BTreeMap::<&str, usize>::new();
    for i in 0..4000 {
        let m = &messages[i % messages.len()];
        let edits: Vec<(u32, u8, u8)> =
            (0..rng.gen_range(1..3)).map(|_| (rng.gen(), rng.gen_range(0..4), rng.gen())).collect();
        let outcome = match decode_all(&mutate(&encode(m).expect("encodes"), &edits)) {
            Ok(_) => "decoded",
            Err(ProtocolError::HeaderTooLarge { .. }) => "header length",
            Err(ProtocolError::BadHeader(_)) => "header",
            Err(ProtocolError::BadTensor { .. }) => "tensor",
            Err(ProtocolError::BodyMismatch { .. }) => "body size",
            Err(e) => panic!("unexpected error for a frame with a valid length: {e}"),
        };
        *seen.entry(outcome).or_default() += 1;
    }
    for stage in ["decoded", "header length", "header", "tensor", "body size"] {
        assert!(seen.get(stage).is_some_and(|&n| n > 0), "no mutation reached '{stage}': {seen:?}");
    }
}

#[test]
fn model_digest_is_sha256() {
    let d = tandem_proto::protocol::model_digest(b"abc");
    let hex = hex::encode(d);
    assert_eq!(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}
