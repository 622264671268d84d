//! Sensor encodings: an input that is a sensor's u8 pixels or i16 PCM
//! under its model card's normalization crosses as those values (bit-exact,
//! refused where a value is not one), and an image as a JPEG (lossy,
//! bounded); hostile widenings and JPEGs get a named error, never a panic.

use crate::tract::{decode, encode, encode_with};
use proptest::prelude::*;
use tandem_core::card::SensorType;
use tandem_core::DatumType;
use tandem_core::Tensor;
use tandem_proto::encoding::{Encoded, Encoding, EncodingError, Params, Widening};

fn pixels(layout: &str) -> Widening {
    Widening {
        ty: SensorType::U8,
        layout: layout.into(),
        scale: 1.0 / 255.0,
        mean: vec![0.485, 0.456, 0.406],
        std: vec![0.229, 0.224, 0.225],
    }
}

fn pcm() -> Widening {
    Widening { ty: SensorType::I16, layout: "NT".into(), scale: 1.0, mean: vec![], std: vec![] }
}

/// An NCHW or NHWC image of `h` × `w` pixels `p(y, x, c)`, normalized by `w8`.
fn image(p: impl Fn(usize, usize, usize) -> u8, h: usize, w: usize, c: usize, w8: &Widening) -> Tensor {
    let last = w8.layout == "NHWC";
    let shape = if last { [1, h, w, c] } else { [1, c, h, w] };
    let mut x = vec![0f32; h * w * c];
    for (y, xx, ch) in (0..h).flat_map(|y| (0..w).flat_map(move |xx| (0..c).map(move |ch| (y, xx, ch)))) {
        let i = if last { (y * w + xx) * c + ch } else { (ch * h + y) * w + xx };
        x[i] = w8.widen(f32::from(p(y, xx, ch)), ch);
    }
    Tensor::from_shape(&shape, &x).expect("tensor")
}

fn f32s(t: &Tensor) -> Vec<f32> {
    tandem_core::check::as_f32(t).expect("f32")
}

/// A smooth picture with an edge, like a photo's pixels.
fn photo(y: usize, x: usize, c: usize) -> u8 {
    (x + y + c * 30 + if x > 32 { 60 } else { 0 }) as u8
}

proptest! {
    #[test]
    fn sensor_values_cross_bit_exactly(p in proptest::collection::vec(any::<u8>(), 3 * 5 * 7), q in proptest::collection::vec(any::<i16>(), 1..200)) {
        for layout in ["NCHW", "NHWC"] {
            let w = pixels(layout);
            let t = image(|y, x, c| p[(y * 7 + x) * 3 + c], 5, 7, 3, &w);
            let packed = encode_with(&t, Encoding::U8Lz4, Some(&w)).expect("pixels narrow");
            let back = decode(DatumType::F32, t.shape(), &packed).expect("decodes");
            prop_assert_eq!(back.as_bytes(), t.as_bytes(), "{}", layout);
        }
        let x: Vec<f32> = q.iter().map(|&v| f32::from(v)).collect();
        let t = Tensor::from_shape(&[1, x.len()], &x).expect("tensor");
        let packed = encode_with(&t, Encoding::I16Lz4, Some(&pcm())).expect("pcm narrows");
        prop_assert!(packed.bytes.len() <= x.len() * 2 + x.len() / 100 + 16, "i16 is at most half, plus LZ4's framing");
        let back = decode(DatumType::F32, t.shape(), &packed).expect("decodes");
        prop_assert_eq!(back.as_bytes(), t.as_bytes());
    }
}

#[test]
fn a_value_that_is_not_a_sensor_value_is_refused_by_name() {
    let w = pixels("NCHW");
    let mut x = f32s(&image(photo, 4, 4, 3, &w));
    x[17] = f32::from_bits(x[17].to_bits() + 1); // one ulp off
    let t = Tensor::from_shape(&[1, 3, 4, 4], &x).expect("tensor");
    match encode_with(&t, Encoding::U8Lz4, Some(&w)) {
        Err(EncodingError::NotExact { index: 17, .. }) => {}
        other => panic!("want NotExact at 17, got {other:?}"),
    }
    // Resampled audio is not PCM.
    let t = Tensor::from_shape(&[1, 3], &[1.0f32, 2.5, 3.0]).expect("tensor");
    assert!(matches!(
        encode_with(&t, Encoding::I16Lz4, Some(&pcm())),
        Err(EncodingError::NotExact { index: 1, .. })
    ));
    // The wrong sensor type, and none at all.
    assert!(matches!(
        encode_with(&t, Encoding::U8Lz4, Some(&pcm())),
        Err(EncodingError::NotApplicable { .. })
    ));
    assert_eq!(encode(&t, Encoding::I16Lz4), Err(EncodingError::NoWidening(Encoding::I16Lz4)));
}

#[test]
fn jpeg_keeps_a_photo_close_and_small() {
    for (layout, c) in [("NCHW", 3), ("NHWC", 3), ("NCHW", 1)] {
        let w = Widening { mean: vec![0.0], std: vec![1.0], ..pixels(layout) };
        let t = image(photo, 48, 64, c, &w);
        let pixels = 48 * 64 * c;
        for quality in [90, 75] {
            let packed = encode_with(&t, Encoding::Jpeg { quality }, Some(&w)).expect("encodes");
            assert!(
                packed.bytes.len() * 4 < pixels,
                "{layout}/{c} q{quality}: {} bytes of {pixels}",
                packed.bytes.len()
            );
            let back = decode(DatumType::F32, t.shape(), &packed).expect("decodes");
            let (a, b) = (f32s(&t), f32s(&back));
            let mean_err = a.iter().zip(&b).map(|(x, y)| (x - y).abs()).sum::<f32>() / a.len() as f32;
            // Pixels in [0, 1]: a mean error of a few grey levels at most.
            assert!(mean_err < 8.0 / 255.0, "{layout}/{c} q{quality}: mean error {mean_err}");
            assert!(mean_err > 0.0, "JPEG is lossy: an exact result means it was not applied");
        }
    }
    // Not an image: PCM, a batch of two, four channels.
    let t = Tensor::from_shape(&[2, 3, 4, 4], &vec![0.0f32; 96]).expect("tensor");
    let e = encode_with(&t, Encoding::Jpeg { quality: 90 }, Some(&pixels("NCHW"))).expect_err("batch 2");
    assert!(matches!(e, EncodingError::NotApplicable { .. }), "{e}");
}

/// What a hostile wearable might send: each gets a named error.
#[test]
fn hostile_widenings_and_jpegs_are_refused() {
    let w = Widening { mean: vec![0.0], std: vec![1.0], ..pixels("NCHW") };
    let t = image(photo, 16, 16, 3, &w);
    let good = encode_with(&t, Encoding::Jpeg { quality: 75 }, Some(&w)).expect("encodes");
    let narrow = encode_with(&t, Encoding::U8Lz4, Some(&w)).expect("encodes");
    let shape = [1usize, 3, 16, 16];
    let cases: Vec<(Encoded, Vec<usize>, &str)> = vec![
        // A JPEG of 16 × 16 for a 32 × 16 image.
        (good.clone(), vec![1, 3, 32, 16], "JPEG for a 16x32"),
        // A grey JPEG for a colour image.
        (
            encode_with(&image(photo, 16, 16, 1, &w), Encoding::Jpeg { quality: 75 }, Some(&w))
                .expect("grey"),
            shape.to_vec(),
            "L8",
        ),
        // Truncated, and garbage.
        (
            Encoded { bytes: good.bytes[..good.bytes.len() / 2].to_vec(), ..good.clone() },
            shape.to_vec(),
            "corrupt jpeg",
        ),
        (Encoded { bytes: vec![0xff; 64], ..good.clone() }, shape.to_vec(), "corrupt jpeg"),
        // Widenings that cannot be.
        (
            Encoded { params: Params::Widen(Widening { std: vec![0.0], ..w.clone() }), ..narrow.clone() },
            shape.to_vec(),
            "non-zero",
        ),
        (
            Encoded { params: Params::Widen(Widening { scale: f32::NAN, ..w.clone() }), ..narrow.clone() },
            shape.to_vec(),
            "finite",
        ),
        (
            Encoded {
                params: Params::Widen(Widening { layout: "NC".into(), ..w.clone() }),
                ..narrow.clone()
            },
            shape.to_vec(),
            "layout",
        ),
        (Encoded { params: Params::Widen(pcm()), ..narrow.clone() }, vec![1, 768], "I16 sensor"),
        (
            Encoded { params: Params::None, ..narrow.clone() },
            shape.to_vec(),
            "parameters of another encoding",
        ),
        // Fewer pixels than the shape.
        (narrow.clone(), vec![1, 3, 16, 17], "bytes decompressed"),
    ];
    for (packed, shape, want) in cases {
        let e = decode(DatumType::F32, &shape, &packed).expect_err(want).to_string();
        assert!(e.contains(want), "{want}: got {e}");
    }
    // A narrow encoding onto a non-f32 tensor.
    let e = decode(DatumType::I64, &shape, &narrow).expect_err("i64").to_string();
    assert!(e.contains("does not apply"), "{e}");
}

proptest! {
    /// Random bytes as a JPEG or a narrow tensor: an error or a tensor of the shape, never a panic.
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600), jpeg in any::<bool>()) {
        let w = pixels("NHWC");
        let encoding = if jpeg { Encoding::Jpeg { quality: 90 } } else { Encoding::U8Lz4 };
        let packed = Encoded { encoding, params: Params::Widen(w), bytes };
        if let Ok(t) = decode(DatumType::F32, &[1, 8, 8, 3], &packed) {
            prop_assert_eq!(t.shape(), &[1, 8, 8, 3]);
        }
    }
}
