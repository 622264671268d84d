//! Op translations on tiny TFLite models built here with planus, run in
//! tract against values computed by hand from TFLite's definitions; and
//! truncated or mutated files, which must give errors, never panics.

use planus::Builder;
use proptest::prelude::*;
use tandem_tflite_schema::tflite::{
    ActivationFunctionType, Buffer, BuiltinOperator, BuiltinOptions, Conv2DOptions, DepthwiseConv2DOptions,
    Model, Operator, OperatorCode, Padding, ResizeBilinearOptions, SubGraph, Tensor as TfTensor, TensorType,
};
use tract_onnx::prelude::*;

/// A TFLite model under construction.
#[derive(Default)]
struct TinyModel {
    tensors: Vec<TfTensor>,
    buffers: Vec<Buffer>,
    codes: Vec<OperatorCode>,
    ops: Vec<Operator>,
}

impl TinyModel {
    fn new() -> TinyModel {
        // Buffer 0 is the empty buffer of non-constant tensors.
        TinyModel { buffers: vec![Buffer::default()], ..Default::default() }
    }

    fn tensor(&mut self, name: &str, shape: &[i32], dtype: TensorType, data: Option<Vec<u8>>) -> i32 {
        let buffer = match data {
            Some(d) => {
                self.buffers.push(Buffer { data: Some(d), ..Default::default() });
                self.buffers.len() as u32 - 1
            }
            None => 0,
        };
        self.tensors.push(TfTensor {
            name: Some(name.into()),
            shape: Some(shape.to_vec()),
            type_: dtype,
            buffer,
            ..Default::default()
        });
        self.tensors.len() as i32 - 1
    }

    fn f32s(&mut self, name: &str, shape: &[i32], values: &[f32]) -> i32 {
        self.tensor(
            name,
            shape,
            TensorType::Float32,
            Some(values.iter().flat_map(|v| v.to_le_bytes()).collect()),
        )
    }

    fn i32s(&mut self, name: &str, values: &[i32]) -> i32 {
        let shape = [values.len() as i32];
        self.tensor(
            name,
            &shape,
            TensorType::Int32,
            Some(values.iter().flat_map(|v| v.to_le_bytes()).collect()),
        )
    }

    fn op(
        &mut self,
        code: BuiltinOperator,
        custom: Option<&str>,
        inputs: &[i32],
        outputs: &[i32],
        options: Option<BuiltinOptions>,
    ) {
        self.codes.push(OperatorCode {
            builtin_code: code,
            deprecated_builtin_code: (code as i32).min(127) as i8,
            custom_code: custom.map(str::to_string),
            version: 1,
        });
        self.ops.push(Operator {
            opcode_index: self.codes.len() as u32 - 1,
            inputs: Some(inputs.to_vec()),
            outputs: Some(outputs.to_vec()),
            builtin_options: options,
            ..Default::default()
        });
    }

    fn finish(self, inputs: &[i32], outputs: &[i32]) -> Vec<u8> {
        self.finish_with(inputs, outputs, vec![])
    }

    /// The model, with more subgraphs (`IF` branches) after the main one.
    fn finish_with(mut self, inputs: &[i32], outputs: &[i32], mut branches: Vec<SubGraph>) -> Vec<u8> {
        let main = SubGraph {
            tensors: Some(std::mem::take(&mut self.tensors)),
            inputs: Some(inputs.to_vec()),
            outputs: Some(outputs.to_vec()),
            operators: Some(std::mem::take(&mut self.ops)),
            name: Some("main".into()),
            ..Default::default()
        };
        branches.insert(0, main);
        let model = Model {
            version: 3,
            operator_codes: Some(self.codes),
            subgraphs: Some(branches),
            buffers: Some(self.buffers),
            ..Default::default()
        };
        // planus 1.3 writes a file identifier before the root offset; the
        // format puts the offset first (relative to byte 0), then "TFL3".
        let mut bytes = Builder::new().finish(&model, Some(*b"TFL3")).to_vec();
        let offset = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]) + 4;
        bytes[..4].copy_from_slice(&offset.to_le_bytes());
        bytes[4..8].copy_from_slice(b"TFL3");
        bytes
    }
}

/// Translates `tflite` and runs it in tract on one input.
fn run(tflite: &[u8], input: Tensor) -> TractResult<Vec<Tensor>> {
    let proto = tandem_tflite::translate(tflite)?;
    let model = tract_onnx::onnx().model_for_proto_model(&proto)?.into_optimized()?.into_runnable()?;
    Ok(model.run(tvec!(input.into()))?.into_iter().map(|t| t.into_tensor()).collect())
}

/// Translates `tflite` and runs it in tract on several inputs.
fn run_many(tflite: &[u8], inputs: Vec<Tensor>) -> TractResult<Vec<Tensor>> {
    let proto = tandem_tflite::translate(tflite)?;
    let model = tract_onnx::onnx().model_for_proto_model(&proto)?.into_optimized()?.into_runnable()?;
    let inputs: TVec<TValue> = inputs.into_iter().map(|t| t.into()).collect();
    Ok(model.run(inputs)?.into_iter().map(|t| t.into_tensor()).collect())
}

fn values(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| (((i as u32).wrapping_mul(2654435761).wrapping_add(seed) >> 16) % 200) as f32 / 100.0 - 1.0)
        .collect()
}

fn assert_close(got: &Tensor, expected: &[f32]) {
    let got: Vec<f32> = got.to_plain_array_view::<f32>().expect("f32 output").iter().copied().collect();
    assert_eq!(got.len(), expected.len());
    for (i, (g, e)) in got.iter().zip(expected).enumerate() {
        assert!((g - e).abs() <= 1e-5 * e.abs().max(1.0), "element {i}: {g} vs {e}");
    }
}

/// TFLite's CONV_2D (NHWC input, OHWI filter, SAME padding) by hand.
#[allow(clippy::too_many_arguments)]
fn conv_reference(
    x: &[f32],
    [h, w, c]: [usize; 3],
    f: &[f32],
    [o, kh, kw]: [usize; 3],
    bias: &[f32],
    stride: usize,
    depthwise: bool,
) -> (Vec<f32>, [usize; 3]) {
    let (oh, ow) = (h.div_ceil(stride), w.div_ceil(stride));
    let pad_h = ((oh - 1) * stride + kh).saturating_sub(h) / 2;
    let pad_w = ((ow - 1) * stride + kw).saturating_sub(w) / 2;
    let mut out = vec![0f32; oh * ow * o];
    for (y, xo, oc) in (0..oh).flat_map(|y| (0..ow).flat_map(move |x| (0..o).map(move |oc| (y, x, oc)))) {
        let mut acc = bias[oc];
        for (ky, kx) in (0..kh).flat_map(|ky| (0..kw).map(move |kx| (ky, kx))) {
            let (iy, ix) =
                ((y * stride + ky) as isize - pad_h as isize, (xo * stride + kx) as isize - pad_w as isize);
            if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                continue;
            }
            let base = (iy as usize * w + ix as usize) * c;
            if depthwise {
                let ic = oc / (o / c);
                acc += x[base + ic] * f[(ky * kw + kx) * o + oc];
            } else {
                for ic in 0..c {
                    acc += x[base + ic] * f[((oc * kh + ky) * kw + kx) * c + ic];
                }
            }
        }
        out[(y * ow + xo) * o + oc] = acc;
    }
    (out, [oh, ow, o])
}

fn conv_model(depthwise: bool, act: ActivationFunctionType) -> (Vec<u8>, Vec<f32>, Vec<f32>, Vec<f32>) {
    let mut m = TinyModel::new();
    let x = m.tensor("image", &[1, 5, 5, 2], TensorType::Float32, None);
    let (filter_shape, o) = if depthwise { ([1, 3, 3, 4], 4) } else { ([3, 3, 3, 2], 3) };
    let f = values(filter_shape.iter().product::<i32>() as usize, 7);
    let b = values(o, 3);
    let fi = m.f32s("filter", &filter_shape, &f);
    let bi = m.f32s("bias", &[o as i32], &b);
    let y = m.tensor("features", &[1, 3, 3, o as i32], TensorType::Float32, None);
    if depthwise {
        let options = DepthwiseConv2DOptions {
            padding: Padding::Same,
            stride_w: 2,
            stride_h: 2,
            depth_multiplier: 2,
            fused_activation_function: act,
            dilation_w_factor: 1,
            dilation_h_factor: 1,
        };
        m.op(
            BuiltinOperator::DepthwiseConv2d,
            None,
            &[x, fi, bi],
            &[y],
            Some(BuiltinOptions::DepthwiseConv2DOptions(Box::new(options))),
        );
    } else {
        let options = Conv2DOptions {
            padding: Padding::Same,
            stride_w: 2,
            stride_h: 2,
            fused_activation_function: act,
            dilation_w_factor: 1,
            dilation_h_factor: 1,
            ..Default::default()
        };
        m.op(
            BuiltinOperator::Conv2d,
            None,
            &[x, fi, bi],
            &[y],
            Some(BuiltinOptions::Conv2DOptions(Box::new(options))),
        );
    }
    (m.finish(&[x], &[y]), f, b, values(50, 11))
}

#[test]
fn conv_2d_with_fused_relu6_matches_tflite_semantics() -> TractResult<()> {
    let (tflite, f, b, x) = conv_model(false, ActivationFunctionType::Relu6);
    let out = run(&tflite, tensor1(&x).into_shape(&[1, 5, 5, 2])?)?;
    let (expected, shape) = conv_reference(&x, [5, 5, 2], &f, [3, 3, 3], &b, 2, false);
    let expected: Vec<f32> = expected.iter().map(|v| v.clamp(0.0, 6.0)).collect();
    assert_eq!(out[0].shape(), &[1, shape[0], shape[1], shape[2]]);
    assert_close(&out[0], &expected);
    Ok(())
}

#[test]
fn depthwise_conv_2d_matches_tflite_semantics() -> TractResult<()> {
    let (tflite, f, b, x) = conv_model(true, ActivationFunctionType::None);
    let out = run(&tflite, tensor1(&x).into_shape(&[1, 5, 5, 2])?)?;
    let (expected, _) = conv_reference(&x, [5, 5, 2], &f, [4, 3, 3], &b, 2, true);
    assert_close(&out[0], &expected);
    Ok(())
}

#[test]
fn fp16_weights_behind_dequantize_are_folded() -> TractResult<()> {
    let mut m = TinyModel::new();
    let x = m.tensor("x", &[1, 4], TensorType::Float32, None);
    let halves = [0.5f32, -1.25, 2.0, 3.5];
    let bytes = halves.iter().flat_map(|v| half::f16::from_f32(*v).to_bits().to_le_bytes()).collect();
    let w16 = m.tensor("w16", &[4], TensorType::Float16, Some(bytes));
    let w = m.tensor("w", &[4], TensorType::Float32, None);
    let y = m.tensor("y", &[1, 4], TensorType::Float32, None);
    m.op(BuiltinOperator::Dequantize, None, &[w16], &[w], None);
    let add = tandem_tflite_schema::tflite::AddOptions {
        fused_activation_function: ActivationFunctionType::Relu,
        ..Default::default()
    };
    m.op(BuiltinOperator::Add, None, &[x, w], &[y], Some(BuiltinOptions::AddOptions(Box::new(add))));
    let tflite = m.finish(&[x], &[y]);
    let proto = tandem_tflite::translate(&tflite)?;
    let graph = proto.graph.as_ref().expect("a graph");
    assert!(graph.node.iter().all(|n| n.op_type != "Cast"), "the fp16 weight is folded to float32");
    let out = run(&tflite, tensor2(&[[1f32, 1., -3., 0.]]))?;
    assert_close(&out[0], &[1.5, 0.0, 0.0, 3.5]);
    Ok(())
}

/// TensorFlow's bilinear resize of a 1-D row by hand.
fn resize_reference(x: &[f32], out: usize, align_corners: bool, half_pixel: bool) -> Vec<f32> {
    let n = x.len();
    let scale =
        if align_corners && out > 1 { (n - 1) as f32 / (out - 1) as f32 } else { n as f32 / out as f32 };
    (0..out)
        .map(|i| {
            let src = if half_pixel { (i as f32 + 0.5) * scale - 0.5 } else { i as f32 * scale };
            let lo = src.floor().max(0.0) as usize;
            let hi = (src.ceil() as usize).min(n - 1);
            let t = src - src.floor();
            x[lo.min(n - 1)] * (1.0 - t) + x[hi] * t
        })
        .collect()
}

fn resize_model(align_corners: bool, half_pixel_centers: bool) -> Vec<u8> {
    let mut m = TinyModel::new();
    let x = m.tensor("x", &[1, 1, 4, 1], TensorType::Float32, None);
    let size = m.i32s("size", &[1, 7]);
    let y = m.tensor("y", &[1, 1, 7, 1], TensorType::Float32, None);
    let options = ResizeBilinearOptions { align_corners, half_pixel_centers };
    m.op(
        BuiltinOperator::ResizeBilinear,
        None,
        &[x, size],
        &[y],
        Some(BuiltinOptions::ResizeBilinearOptions(Box::new(options))),
    );
    m.finish(&[x], &[y])
}

#[test]
fn resize_bilinear_honours_align_corners_and_half_pixel_centers() -> TractResult<()> {
    let row = [1f32, 4., -2., 3.];
    for (align, half) in [(false, false), (true, false), (false, true)] {
        let out = run(&resize_model(align, half), tensor1(&row).into_shape(&[1, 1, 4, 1])?)?;
        assert_close(&out[0], &resize_reference(&row, 7, align, half));
    }
    Ok(())
}

#[test]
fn a_custom_op_is_refused_naming_it_and_its_node() {
    let mut m = TinyModel::new();
    let x = m.tensor("x", &[1, 4], TensorType::Float32, None);
    let y = m.tensor("segment", &[1, 4], TensorType::Float32, None);
    m.op(BuiltinOperator::Custom, Some("Convolution2DTransposeBias"), &[x], &[y], None);
    let err = tandem_tflite::translate(&m.finish(&[x], &[y])).expect_err("refused");
    let text = err.to_string();
    assert!(text.contains("Convolution2DTransposeBias") && text.contains("node 0 ('segment')"), "{text}");
}

#[test]
fn resource_variables_are_refused_by_name() {
    let mut m = TinyModel::new();
    let y = m.tensor("handle", &[], TensorType::Resource, None);
    m.op(BuiltinOperator::VarHandle, None, &[], &[y], None);
    let err = tandem_tflite::translate(&m.finish(&[], &[y])).expect_err("refused");
    assert!(err.to_string().contains("VAR_HANDLE"), "{err}");
}

#[test]
fn other_formats_are_not_tflite() {
    assert!(!tandem_tflite::is_tflite(b"\x08\x07\x12\x04onnx"));
    assert!(tandem_tflite::translate(b"").is_err());
    assert!(tandem_tflite::translate(b"1234TFL3").is_err());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// A truncated file is an error, never a panic.
    #[test]
    fn truncated_files_are_errors(cut in 0usize..2000) {
        let (tflite, ..) = conv_model(false, ActivationFunctionType::Relu);
        // The builder writes back to front: the first bytes hold the root
        // and the tables, so cutting into the first half leaves offsets past
        // the end; any cut must at least not panic.
        let cut = cut.min(tflite.len().saturating_sub(1));
        let result = tandem_tflite::translate(&tflite[..cut]);
        prop_assert!(result.is_err() || cut >= tflite.len() / 2);
    }

    /// Bytes flipped anywhere give a translation or an error, never a panic
    /// (nor an abort from a huge allocation).
    #[test]
    fn mutated_files_never_panic(flips in proptest::collection::vec((0usize..4096, any::<u8>()), 1..8)) {
        let (mut tflite, ..) = conv_model(true, ActivationFunctionType::Relu6);
        for (at, byte) in flips {
            let n = tflite.len();
            tflite[at % n] = byte;
        }
        let _ = tandem_tflite::translate(&tflite);
    }
}

/// Sets the affine quantization of tensor `t`.
fn quantize(m: &mut TinyModel, t: i32, scale: f32, zero_point: i64) {
    m.tensors[t as usize].quantization =
        Some(Box::new(tandem_tflite_schema::tflite::QuantizationParameters {
            scale: Some(vec![scale]),
            zero_point: Some(vec![zero_point]),
            ..Default::default()
        }));
}

/// `scale · (clamp(round(x / scale) + zp) − zp)`, TFLite's int8 round trip.
fn fake_quant(x: f32, scale: f32, zp: i32) -> f32 {
    let q = ((x / scale).round() as i32 + zp).clamp(-128, 127);
    scale * (q - zp) as f32
}

#[test]
fn int8_fully_connected_runs_as_quantize_dequantize_around_float() -> TractResult<()> {
    let mut m = TinyModel::new();
    let x = m.tensor("x", &[1, 4], TensorType::Float32, None);
    let xq = m.tensor("x_int8", &[1, 4], TensorType::Int8, None);
    quantize(&mut m, xq, 0.05, 3);
    let weights: [i8; 8] = [10, -20, 30, -40, 50, 60, -70, 80];
    let w = m.tensor("w", &[2, 4], TensorType::Int8, Some(weights.iter().map(|&v| v as u8).collect()));
    quantize(&mut m, w, 0.01, 0);
    let b = m.tensor(
        "b",
        &[2],
        TensorType::Int32,
        Some([100i32, -200].iter().flat_map(|v| v.to_le_bytes()).collect()),
    );
    quantize(&mut m, b, 0.0005, 0);
    let yq = m.tensor("y_int8", &[1, 2], TensorType::Int8, None);
    quantize(&mut m, yq, 0.02, -1);
    let y = m.tensor("y", &[1, 2], TensorType::Float32, None);
    m.op(BuiltinOperator::Quantize, None, &[x], &[xq], None);
    let fc = tandem_tflite_schema::tflite::FullyConnectedOptions::default();
    m.op(
        BuiltinOperator::FullyConnected,
        None,
        &[xq, w, b],
        &[yq],
        Some(BuiltinOptions::FullyConnectedOptions(Box::new(fc))),
    );
    m.op(BuiltinOperator::Dequantize, None, &[yq], &[y], None);
    let tflite = m.finish(&[x], &[y]);
    let input = [0.3f32, -0.7, 1.1, 0.05];
    let out = run(&tflite, tensor2(&[input]))?;
    let xs: Vec<f32> = input.iter().map(|&v| fake_quant(v, 0.05, 3)).collect();
    let by_hand: Vec<f32> = (0..2)
        .map(|o| {
            let acc: f32 = (0..4).map(|k| xs[k] * 0.01 * f32::from(weights[o * 4 + k])).sum();
            fake_quant(acc + [100.0, -200.0][o] * 0.0005, 0.02, -1)
        })
        .collect();
    // LiteRT 2.3.0 on this model and input gives [0.54, -1.1], as by hand.
    // Output 0 is a tie (26.5 steps): TFLite rounds it away from zero, ONNX's
    // QuantizeLinear to even, so the translation may be one step (0.02) off.
    assert_close(&tensor1(&by_hand), &[0.54, -1.1]);
    let got: Vec<f32> = out[0].to_plain_array_view::<f32>()?.iter().copied().collect();
    for (g, e) in got.iter().zip(&by_hand) {
        assert!((g - e).abs() <= 0.02 + 1e-6, "{got:?} vs LiteRT's {by_hand:?}");
    }
    Ok(())
}

#[test]
fn translations_are_cached_by_digest_and_a_bad_entry_is_rebuilt() -> TractResult<()> {
    let dir = std::env::temp_dir().join(format!("tandem-tflite-cache-{}", std::process::id()));
    let (tflite, ..) = conv_model(false, ActivationFunctionType::Relu);
    let first = tandem_tflite::cache::onnx_bytes_in(&dir, &tflite)?;
    assert_eq!(first, tandem_tflite::translate_to_bytes(&tflite)?, "translations are deterministic");
    let path = tandem_tflite::cache::entry_path(&dir, &tflite);
    assert_eq!(std::fs::read(&path)?, first, "written under the TFLite bytes' digest");
    std::fs::write(&path, b"\xff\xff not a protobuf")?;
    assert_eq!(tandem_tflite::cache::onnx_bytes_in(&dir, &tflite)?, first, "a corrupt entry is rebuilt");
    assert_eq!(std::fs::read(&path)?, first);
    let leftovers = std::fs::read_dir(&dir)?.count();
    assert_eq!(leftovers, 1, "no temporary file is left behind");
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

#[test]
fn if_runs_the_branch_its_condition_picks() -> TractResult<()> {
    let mut m = TinyModel::new();
    let flag = m.tensor("flag", &[1], TensorType::Bool, None);
    let x = m.tensor("x", &[3], TensorType::Float32, None);
    let y = m.tensor("y", &[3], TensorType::Float32, None);
    let options = tandem_tflite_schema::tflite::IfOptions { then_subgraph_index: 1, else_subgraph_index: 2 };
    m.op(BuiltinOperator::If, None, &[flag, x], &[y], Some(BuiltinOptions::IfOptions(Box::new(options))));
    // Subgraph 1 (then): x · 2, its own tensors and a constant; 2 (else): x.
    m.codes.push(OperatorCode {
        builtin_code: BuiltinOperator::Mul,
        deprecated_builtin_code: 18,
        ..Default::default()
    });
    let mul = m.codes.len() as u32 - 1;
    m.buffers.push(Buffer { data: Some(2f32.to_le_bytes().to_vec()), ..Default::default() });
    let two = m.buffers.len() as u32 - 1;
    let t = |name: &str, shape: &[i32], buffer: u32| TfTensor {
        name: Some(name.into()),
        shape: Some(shape.to_vec()),
        buffer,
        ..Default::default()
    };
    let then_graph = SubGraph {
        tensors: Some(vec![t("x", &[3], 0), t("two", &[], two), t("doubled", &[3], 0)]),
        inputs: Some(vec![0]),
        outputs: Some(vec![2]),
        operators: Some(vec![Operator {
            opcode_index: mul,
            inputs: Some(vec![0, 1]),
            outputs: Some(vec![2]),
            ..Default::default()
        }]),
        ..Default::default()
    };
    let else_graph = SubGraph {
        tensors: Some(vec![t("x", &[3], 0)]),
        inputs: Some(vec![0]),
        outputs: Some(vec![0]),
        ..Default::default()
    };
    let tflite = m.finish_with(&[flag, x], &[y], vec![then_graph, else_graph]);
    for (taken, expected) in [(true, [2f32, -4., 6.]), (false, [1., -2., 3.])] {
        let out = run_many(&tflite, vec![tensor1(&[taken]), tensor1(&[1f32, -2., 3.])])?;
        assert_close(&out[0], &expected);
    }
    Ok(())
}

#[test]
fn an_if_calling_its_own_subgraph_is_refused() {
    let mut m = TinyModel::new();
    let flag = m.tensor("flag", &[1], TensorType::Bool, None);
    let y = m.tensor("y", &[1], TensorType::Float32, None);
    let options = tandem_tflite_schema::tflite::IfOptions { then_subgraph_index: 0, else_subgraph_index: 0 };
    m.op(BuiltinOperator::If, None, &[flag], &[y], Some(BuiltinOptions::IfOptions(Box::new(options))));
    let err = tandem_tflite::translate(&m.finish(&[flag], &[y])).expect_err("refused");
    assert!(err.to_string().contains("IF"), "{err}");
}

#[test]
fn average_pool_same_excludes_the_padding_and_hard_swish_follows() -> TractResult<()> {
    let mut m = TinyModel::new();
    let x = m.tensor("x", &[1, 3, 3, 1], TensorType::Float32, None);
    let pooled = m.tensor("pooled", &[1, 3, 3, 1], TensorType::Float32, None);
    let y = m.tensor("y", &[1, 3, 3, 1], TensorType::Float32, None);
    let options = tandem_tflite_schema::tflite::Pool2DOptions {
        padding: Padding::Same,
        stride_w: 1,
        stride_h: 1,
        filter_width: 2,
        filter_height: 2,
        fused_activation_function: ActivationFunctionType::None,
    };
    m.op(
        BuiltinOperator::AveragePool2d,
        None,
        &[x],
        &[pooled],
        Some(BuiltinOptions::Pool2DOptions(Box::new(options))),
    );
    m.op(BuiltinOperator::HardSwish, None, &[pooled], &[y], None);
    let input: Vec<f32> = vec![1., -8., 3., 4., 5., -6., 7., 8., 9.];
    let out = run(&TinyModel::finish(m, &[x], &[y]), tensor1(&input).into_shape(&[1, 3, 3, 1])?)?;
    // SAME pads one row and column at the end; TFLite averages the cells
    // inside the image only.
    let at = |r: usize, c: usize| input[r * 3 + c];
    let mut expected = Vec::new();
    for r in 0..3 {
        for c in 0..3 {
            let cells: Vec<f32> = [(r, c), (r, c + 1), (r + 1, c), (r + 1, c + 1)]
                .into_iter()
                .filter(|&(rr, cc)| rr < 3 && cc < 3)
                .map(|(rr, cc)| at(rr, cc))
                .collect();
            let avg = cells.iter().sum::<f32>() / cells.len() as f32;
            expected.push(avg * (avg + 3.0).clamp(0.0, 6.0) / 6.0);
        }
    }
    assert_close(&out[0], &expected);
    Ok(())
}

/// A real model of the fetched TFLite set, when `models/fetch_tflite.py` has run.
fn real_model() -> Option<Vec<u8>> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../models/cache/tflite/face_detection_short_range.tflite");
    std::fs::read(path).ok()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// A real MediaPipe model, truncated or with bytes flipped (mostly in
    /// its tables, at the front), gives a translation or an error, never a
    /// panic.
    #[test]
    fn mutated_real_models_never_panic(
        cut in 0usize..300_000,
        flips in proptest::collection::vec((0usize..300_000, any::<u8>(), any::<bool>()), 1..6),
    ) {
        let Some(mut tflite) = real_model() else { return Ok(()) };
        for (at, byte, front) in flips {
            let n = if front { tflite.len().min(8192) } else { tflite.len() };
            tflite[at % n] = byte;
        }
        let _ = tandem_tflite::translate(&tflite);
        let cut = cut % tflite.len();
        prop_assert!(tandem_tflite::translate(&tflite[..cut]).is_err() || cut > tflite.len() / 2);
    }
}
