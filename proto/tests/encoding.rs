//! Link encodings: every encoding round-trips (lossless ones bit for bit,
//! NaN payloads and −0.0 included; lossy ones within their error bound),
//! and hostile bytes and parameters get a named error, never a panic or an
//! allocation the shape does not justify.

use crate::tract::{decode, encode};
use proptest::prelude::*;
use tandem_core::DatumType;
use tandem_core::Tensor;
use tandem_proto::encoding::{Allowed, Encoded, Encoding, EncodingError, Params, MAX_RATIO};

fn f32_tensor(shape: &[usize], values: &[f32]) -> Tensor {
    Tensor::from_shape(shape, values).expect("tensor")
}

/// Values like a ReLU map's: about half exact zeros.
fn relu_like() -> impl Strategy<Value = (Vec<usize>, Vec<f32>)> {
    (1usize..4, 1usize..6, 1usize..9).prop_flat_map(|(n, c, hw)| {
        let len = n * c * hw;
        (Just(vec![n, c, hw]), proptest::collection::vec(prop_oneof![Just(0.0f32), -50f32..50.0], len))
    })
}

proptest! {
    #[test]
    fn lossless_encodings_give_back_the_same_bytes((shape, values) in relu_like()) {
        let t = f32_tensor(&shape, &values);
        for e in [Encoding::Raw, Encoding::ShuffleLz4, Encoding::SparseLz4] {
            let packed = encode(&t, e).expect("encodes");
            let back = decode(DatumType::F32, &shape, &packed).expect("decodes");
            prop_assert_eq!(back.as_bytes(), t.as_bytes(), "{}", e);
        }
    }

    #[test]
    fn lossy_encodings_stay_within_their_bound((shape, values) in relu_like()) {
        let t = f32_tensor(&shape, &values);
        let back = |e| decode(DatumType::F32, &shape, &encode(&t, e).expect("encodes")).expect("decodes");
        let half = back(Encoding::F16);
        for (a, b) in values.iter().zip(&tandem_core::check::as_f32(&half).expect("f32")) {
            prop_assert!((a - b).abs() <= a.abs() / 1024.0 + 1e-7, "f16: {} vs {}", a, b);
        }
        // int8: within half a step; zero is exact (ReLU zeros stay zeros).
        for e in [false, true].into_iter().flat_map(|per_channel| [Encoding::Int8 { per_channel }, Encoding::Int8Lz4 { per_channel }]) {
            let packed = encode(&t, e).expect("encodes");
            let Params::Int8 { scales, .. } = &packed.params else { panic!("int8 params") };
            let step = scales.iter().cloned().fold(0f32, f32::max);
            let got = decode(DatumType::F32, &shape, &packed).expect("decodes");
            for (a, b) in values.iter().zip(&tandem_core::check::as_f32(&got).expect("f32")) {
                prop_assert!((a - b).abs() <= step / 2.0 + 1e-4, "{}: {} vs {} (step {})", e, a, b, step);
                if *a == 0.0 {
                    prop_assert_eq!(*b, 0.0);
                }
            }
        }
    }
}

#[test]
fn special_values_and_other_types_round_trip_exactly() {
    let odd = [f32::NAN, -0.0, f32::INFINITY, f32::MIN_POSITIVE / 2.0, 1.0, 0.0, 0.0];
    let nan_payload = f32::from_bits(0x7fc0_1234);
    let mut values = odd.to_vec();
    values.push(nan_payload);
    let t = f32_tensor(&[8], &values);
    for e in [Encoding::ShuffleLz4, Encoding::SparseLz4] {
        let back = decode(DatumType::F32, &[8], &encode(&t, e).expect("encodes")).expect("decodes");
        assert_eq!(back.as_bytes(), t.as_bytes(), "{e}");
    }
    let ids = Tensor::from_shape(&[2, 3], &[0i64, 7, 0, -1, 1 << 40, 0]).expect("i64");
    let flags = Tensor::from_shape(&[5], &[true, false, false, true, false]).expect("bool");
    for t in [&ids, &flags] {
        for e in [Encoding::ShuffleLz4, Encoding::SparseLz4] {
            let back = decode(t.datum_type(), t.shape(), &encode(t, e).expect("encodes")).expect("decodes");
            assert_eq!(back.as_bytes(), t.as_bytes(), "{e} {:?}", t.datum_type());
        }
        let e = encode(t, Encoding::F16).expect_err("f32 only").to_string();
        assert!(e.contains("does not apply"), "{e}");
    }
    assert_eq!(encode(&t, Encoding::Int8 { per_channel: false }), Err(EncodingError::NotFinite));
}

#[test]
fn relu_maps_shrink_and_the_ratio_is_what_the_data_allows() {
    // 90% zeros: the sparse encoding keeps about a tenth plus the bitmap.
    let values: Vec<f32> = (0..4096).map(|i| if i % 10 == 0 { i as f32 * 0.37 } else { 0.0 }).collect();
    let t = f32_tensor(&[1, 16, 256], &values);
    let raw = t.as_bytes().len();
    let sparse = encode(&t, Encoding::SparseLz4).expect("encodes").bytes.len();
    assert!(sparse * 5 < raw, "sparse {sparse} of {raw}");
    let int8 = encode(&t, Encoding::Int8 { per_channel: true }).expect("encodes").bytes.len();
    assert_eq!(int8 * 4, raw);
    // int8, then LZ4: the zeros are one repeated value.
    let int8_lz4 = encode(&t, Encoding::Int8Lz4 { per_channel: true }).expect("encodes").bytes.len();
    assert!(int8_lz4 * 3 < int8, "int8-lz4 {int8_lz4} of int8's {int8}");
    assert_eq!(encode(&t, Encoding::F16).expect("encodes").bytes.len() * 2, raw);
}

#[test]
fn names_parse_and_the_allowed_sets_nest() {
    for e in Encoding::ALL {
        assert_eq!(Encoding::parse(e.name()), Ok(e));
        assert!(e.allowed_by(Allowed::Lossy));
        assert_eq!(e.allowed_by(Allowed::Lossless), e.is_lossless(), "{e}");
    }
    assert!(Encoding::Raw.allowed_by(Allowed::Raw) && !Encoding::ShuffleLz4.allowed_by(Allowed::Raw));
    let e = Encoding::parse("zip").expect_err("unknown").to_string();
    assert!(e.contains("unknown encoding 'zip'") && e.contains("sparse-lz4"), "{e}");
}

/// What a hostile peer might send: each gets a named error.
#[test]
fn hostile_tensors_are_refused_before_decompressing() {
    let t = f32_tensor(&[2, 3, 4], &(0..24).map(|i| (i % 5) as f32).collect::<Vec<_>>());
    let good = |e| encode(&t, e).expect("encodes");
    let shape = [2usize, 3, 4];
    let cases: Vec<(Encoded, Vec<usize>, &str)> = vec![
        // A shape of 2^32 f32 claimed from 10 bytes.
        (
            Encoded { encoding: Encoding::ShuffleLz4, params: Params::None, bytes: vec![0; 10] },
            vec![1 << 16, 1 << 16],
            "ratio above",
        ),
        // LZ4 that would write past the shape's size.
        (
            Encoded { bytes: good(Encoding::ShuffleLz4).bytes, ..good(Encoding::ShuffleLz4) },
            vec![2, 3, 3],
            "corrupt shuffle-lz4",
        ),
        // Garbage where LZ4 is expected.
        (
            Encoded { encoding: Encoding::SparseLz4, params: Params::None, bytes: vec![0xff; 40] },
            shape.to_vec(),
            "corrupt sparse-lz4",
        ),
        // Raw bytes of the wrong length.
        (
            Encoded { encoding: Encoding::Raw, params: Params::None, bytes: vec![0; 95] },
            shape.to_vec(),
            "95 bytes",
        ),
        // int8 with a scale per channel but three channels claimed as two.
        (
            Encoded {
                params: Params::Int8 { scales: vec![1.0; 2], zeros: vec![0; 2] },
                ..good(Encoding::Int8 { per_channel: true })
            },
            shape.to_vec(),
            "for 3 channels",
        ),
        // int8 with a NaN scale.
        (
            Encoded {
                params: Params::Int8 { scales: vec![f32::NAN], zeros: vec![0] },
                ..good(Encoding::Int8 { per_channel: false })
            },
            shape.to_vec(),
            "finite and positive",
        ),
        // int8 without its parameters, and raw with int8's.
        (
            Encoded { params: Params::None, ..good(Encoding::Int8 { per_channel: false }) },
            shape.to_vec(),
            "parameters of another",
        ),
        (
            Encoded { params: Params::Int8 { scales: vec![1.0], zeros: vec![0] }, ..good(Encoding::Raw) },
            shape.to_vec(),
            "parameters of another",
        ),
        // f16 of the wrong length.
        (Encoded { bytes: vec![0; 7], ..good(Encoding::F16) }, shape.to_vec(), "7 bytes"),
        // int8 + LZ4 that unpacks to fewer values than the shape, and corrupt LZ4.
        (good(Encoding::Int8Lz4 { per_channel: false }), vec![2, 3, 5], "int8 values"),
        (
            Encoded { bytes: vec![0xf0; 12], ..good(Encoding::Int8Lz4 { per_channel: false }) },
            shape.to_vec(),
            "corrupt int8-lz4",
        ),
    ];
    for (encoded, shape, says) in cases {
        let e = decode(DatumType::F32, &shape, &encoded).expect_err(says).to_string();
        assert!(e.contains(says), "{says}: {e}");
    }
    // A sparse bitmap that claims more values than were sent, or bits past the end.
    let mut packed = vec![0b0000_0111u8, 0, 0];
    packed.extend_from_slice(&1.0f32.to_le_bytes());
    let e = decode(
        DatumType::F32,
        &[24],
        &Encoded {
            encoding: Encoding::SparseLz4,
            params: Params::None,
            bytes: lz4_flex::block::compress(&packed),
        },
    )
    .expect_err("short")
    .to_string();
    assert!(e.contains("4 value bytes for 3 non-zero elements"), "{e}");
    let e = decode(
        DatumType::F32,
        &[3],
        &Encoded {
            encoding: Encoding::SparseLz4,
            params: Params::None,
            bytes: lz4_flex::block::compress(&[0b0000_1000u8, 0, 0, 128, 63]),
        },
    )
    .expect_err("past the end")
    .to_string();
    assert!(e.contains("past the last element"), "{e}");
    // Bools must be 0 or 1 however they arrive.
    let e = decode(
        DatumType::Bool,
        &[2],
        &Encoded { encoding: Encoding::Raw, params: Params::None, bytes: vec![1, 2] },
    )
    .expect_err("bool")
    .to_string();
    assert!(e.contains("not 0 or 1"), "{e}");
}

#[test]
fn an_all_zero_map_decodes_at_its_full_ratio() {
    let t = f32_tensor(&[1, 64, 32, 32], &vec![0.0; 65536]);
    let packed = encode(&t, Encoding::SparseLz4).expect("encodes");
    let ratio = t.as_bytes().len() / packed.bytes.len();
    assert!(ratio > 1000 && ratio <= MAX_RATIO, "ratio {ratio}");
    let back = decode(DatumType::F32, &[1, 64, 32, 32], &packed).expect("decodes");
    assert_eq!(back.as_bytes(), t.as_bytes());
}

/// On the wire: each tensor's header names its encoding; lossless ones
/// come back bit for bit, lossy ones close; tensors a lossy encoding does
/// not apply to (int64 ids) travel raw.
#[test]
fn encoded_tensors_cross_the_wire() {
    use crate::tract::{pack_tensor, tensors};
    use tandem_proto::protocol::{encode as frame, FrameDecoder, Header, Message, MAX_FRAME_BYTES};
    let values: Vec<f32> = (0..32).map(|i| if i % 3 == 0 { 0.0 } else { i as f32 * 0.5 }).collect();
    let x = f32_tensor(&[1, 4, 8], &values);
    let ids = Tensor::from_shape(&[3], &[1i64, 0, 5]).expect("ids");
    // The sensor encodings need a widening: without one (or for values that
    // are not a sensor's) the narrow ones fall back to shuffle + LZ4.
    let fallback = pack_tensor("x", &x, Encoding::U8Lz4, None).expect("packs");
    assert_eq!(fallback.meta.encoding, Encoding::ShuffleLz4);
    let e = pack_tensor("x", &x, Encoding::Jpeg { quality: 90 }, None).expect_err("no widening");
    assert!(e.to_string().contains("sensor type"), "{e}");
    for e in Encoding::ALL.into_iter().filter(|e| !e.needs_widening()) {
        let packed = vec![
            pack_tensor("x", &x, e, None).expect("packs"),
            pack_tensor("ids", &ids, e, None).expect("packs"),
        ];
        let m = Message::from_packed(
            |tensors| Header::RunSuffix {
                frame: 1,
                cut: "1".into(),
                tensors,
                answer: vec![],
                edge: None,
                engine: None,
            },
            packed,
        );
        let mut d = FrameDecoder::new(MAX_FRAME_BYTES);
        d.push(&frame(&m).expect("frame"));
        let got = d.next_message().expect("decodes").expect("a message");
        let metas = got.tensor_metas();
        assert_eq!(metas[0].encoding, e);
        assert_eq!(metas[1].encoding, if e.is_lossless() { e } else { Encoding::Raw }, "{e}");
        let tensors = tensors(&got).expect("tensors");
        assert_eq!(tensors[1].1.as_bytes(), ids.as_bytes(), "{e}");
        let back = tandem_core::check::as_f32(&tensors[0].1).expect("f32");
        for (a, b) in values.iter().zip(&back) {
            if e.is_lossless() {
                assert_eq!(a.to_bits(), b.to_bits(), "{e}");
            } else {
                assert!((a - b).abs() <= 0.1, "{e}: {a} vs {b}");
            }
        }
    }
}

/// Encoded tensors may claim more than their frame carries, up to the ratio
/// cap each; one message may not decode to more than MAX_DECODED_BYTES.
#[test]
fn one_message_may_not_decode_to_more_than_the_cap() {
    use tandem_proto::protocol::{encode as frame, Header, Message, TensorMeta, WireType, MAX_DECODED_BYTES};
    // 80 tensors of 16 MiB, each from 1 KiB: within the ratio, over the total.
    let meta = |i: usize| TensorMeta {
        name: format!("t{i}"),
        dtype: WireType::F32,
        shape: vec![4 << 20],
        encoding: Encoding::ShuffleLz4,
        params: Params::None,
        len: 1024,
    };
    let m = Message {
        header: Header::RunSuffix {
            frame: 1,
            cut: "1".into(),
            tensors: (0..80).map(meta).collect(),
            answer: vec![],
            edge: None,
            engine: None,
        },
        body: vec![0; 80 * 1024],
    };
    let e = frame(&m).expect_err("over the cap").to_string();
    assert!(e.contains(&format!("exceed {MAX_DECODED_BYTES}")), "{e}");
}
