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

/// A real model of the TFLite set, fetched when it is not there yet
/// (`models/fetch_tflite.py`); a test without it fails.
fn real_model() -> Vec<u8> {
    static MODEL: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    MODEL
        .get_or_init(|| {
            let set = tandem_models::tflite::ensure_tflite_models().expect("the TFLite test set");
            let model = set.get("face_detection_short_range").expect("face_detection_short_range in the set");
            let path = set.path(&model.file);
            std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
        })
        .clone()
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
        let mut tflite = real_model();
        for (at, byte, front) in flips {
            let n = if front { tflite.len().min(8192) } else { tflite.len() };
            tflite[at % n] = byte;
        }
        let _ = tandem_tflite::translate(&tflite);
        let cut = cut % tflite.len();
        prop_assert!(tandem_tflite::translate(&tflite[..cut]).is_err() || cut > tflite.len() / 2);
    }
}

/// Writes `tflite` and its float inputs under `$TANDEM_TFLITE_DUMP` when
/// set, to check the expected values below against LiteRT.
fn dump(name: &str, tflite: &[u8], inputs: &[(&[usize], &[f32])]) {
    let Some(dir) = std::env::var_os("TANDEM_TFLITE_DUMP") else { return };
    let dir = std::path::PathBuf::from(dir);
    std::fs::create_dir_all(&dir).expect("dump directory");
    std::fs::write(dir.join(format!("{name}.tflite")), tflite).expect("dump");
    let inputs: Vec<String> =
        inputs.iter().map(|(s, v)| format!("{{\"shape\":{s:?},\"values\":{v:?}}}")).collect();
    std::fs::write(dir.join(format!("{name}.json")), format!("[{}]", inputs.join(","))).expect("dump");
}

/// Translates `tflite`, runs it on float `inputs` (their shapes bound
/// before optimizing, as Tandem binds a model's input shapes) and compares
/// output 0.
fn check(name: &str, tflite: &[u8], inputs: &[(&[usize], &[f32])], expected: &[f32]) -> TractResult<()> {
    dump(name, tflite, inputs);
    let mut model = tract_onnx::onnx().model_for_proto_model(&tandem_tflite::translate(tflite)?)?;
    for (k, (shape, _)) in inputs.iter().enumerate() {
        model.set_input_fact(k, f32::fact(*shape).into())?;
    }
    let model = model.into_optimized()?.into_runnable()?;
    let tensors = inputs
        .iter()
        .map(|(s, v)| Ok(tensor1(v).into_shape(s)?.into()))
        .collect::<TractResult<TVec<TValue>>>()?;
    let out = model.run(tensors)?;
    assert_close(&out[0].clone().into_tensor(), expected);
    Ok(())
}

/// The translation's refusal, which must name `op`.
fn refusal(tflite: &[u8], op: &str) -> String {
    let err = tandem_tflite::translate(tflite).expect_err("refused").to_string();
    assert!(err.contains(op), "{err}");
    err
}

fn i64s(m: &mut TinyModel, name: &str, values: &[i64]) -> i32 {
    let shape = [values.len() as i32];
    m.tensor(name, &shape, TensorType::Int64, Some(values.iter().flat_map(|v| v.to_le_bytes()).collect()))
}

/// A float tensor whose dimensions marked -1 in `signature` are open
/// (TFLite declares them 1).
fn open_tensor(m: &mut TinyModel, name: &str, signature: &[i32]) -> i32 {
    let shape: Vec<i32> = signature.iter().map(|&d| d.max(1)).collect();
    let t = m.tensor(name, &shape, TensorType::Float32, None);
    m.tensors[t as usize].shape_signature = Some(signature.to_vec());
    t
}

fn strided_slice_model(
    input: &[i32],
    output: &[i32],
    [begin, end, strides]: [&[i32]; 3],
    options: tandem_tflite_schema::tflite::StridedSliceOptions,
) -> Vec<u8> {
    let mut m = TinyModel::new();
    let x = m.tensor("x", input, TensorType::Float32, None);
    let b = m.i32s("begin", begin);
    let e = m.i32s("end", end);
    let s = m.i32s("strides", strides);
    let y = m.tensor("y", output, TensorType::Float32, None);
    let options = BuiltinOptions::StridedSliceOptions(Box::new(options));
    m.op(BuiltinOperator::StridedSlice, None, &[x, b, e, s], &[y], Some(options));
    m.finish(&[x], &[y])
}

#[test]
fn strided_slice_shrinking_with_a_negative_stride_is_refused_not_a_panic() {
    use tandem_tflite_schema::tflite::StridedSliceOptions;
    // x[:, last] with begin_mask and a stride of -1 on the shrunk axis: the
    // translation computed i64::MAX + 1 (a panic in debug builds). LiteRT
    // 1.x reads no element there ([0, 0] for [[0, 1, 2], [3, 4, 5]]), so it
    // is refused.
    let options = StridedSliceOptions { begin_mask: 0b10, shrink_axis_mask: 0b10, ..Default::default() };
    let tflite = strided_slice_model(&[2, 3], &[2], [&[0, 0], &[2, 0], &[1, -1]], options);
    dump("strided_slice_shrink_masked", &tflite, &[(&[2, 3], &[0., 1., 2., 3., 4., 5.])]);
    refusal(&tflite, "STRIDED_SLICE");
    // A begin of i64::MAX on a shrunk axis: its end overflows.
    let mut m = TinyModel::new();
    let x = m.tensor("x", &[4], TensorType::Float32, None);
    let b = i64s(&mut m, "begin", &[i64::MAX]);
    let e = i64s(&mut m, "end", &[0]);
    let s = i64s(&mut m, "strides", &[1]);
    let y = m.tensor("y", &[], TensorType::Float32, None);
    let options = StridedSliceOptions { shrink_axis_mask: 1, ..Default::default() };
    let options = BuiltinOptions::StridedSliceOptions(Box::new(options));
    m.op(BuiltinOperator::StridedSlice, None, &[x, b, e, s], &[y], Some(options));
    refusal(&m.finish(&[x], &[y]), "STRIDED_SLICE");
}

#[test]
fn strided_slice_honours_begin_end_and_shrink_masks() -> TractResult<()> {
    use tandem_tflite_schema::tflite::StridedSliceOptions;
    let x: Vec<f32> = (0..24).map(|v| v as f32).collect();
    // x[1:, ::-2, 1] on [2, 3, 4]: begin_mask and end_mask on axis 1 (negative
    // stride), begin 1 on axis 0, end ignored by end_mask on axis 0, axis 2
    // shrunk at 1.
    let options = StridedSliceOptions {
        begin_mask: 0b010,
        end_mask: 0b011,
        shrink_axis_mask: 0b100,
        ..Default::default()
    };
    let tflite = strided_slice_model(&[2, 3, 4], &[1, 2], [&[1, 0, 1], &[0, 0, 2], &[1, -2, 1]], options);
    // Rows 2 and 0 of the second block, column 1: 12 + 4·2 + 1, 12 + 1
    // (LiteRT 1.x agrees, as on every check below).
    check("strided_slice_masks", &tflite, &[(&[2, 3, 4], &x)], &[21., 13.])?;
    // A negative begin and end, stride 2: x[0, -3:-1:2, :] → row 0 only.
    let options = StridedSliceOptions { shrink_axis_mask: 0b001, ..Default::default() };
    let tflite = strided_slice_model(&[2, 3, 4], &[1, 4], [&[0, -3, 0], &[1, -1, 4], &[1, 2, 1]], options);
    check("strided_slice_negative", &tflite, &[(&[2, 3, 4], &x)], &[0., 1., 2., 3.])
}

#[test]
fn strided_slice_ellipsis_and_new_axis_are_refused_by_name() {
    use tandem_tflite_schema::tflite::StridedSliceOptions;
    for options in [
        StridedSliceOptions { ellipsis_mask: 1, ..Default::default() },
        StridedSliceOptions { new_axis_mask: 1, ..Default::default() },
    ] {
        let tflite = strided_slice_model(&[2, 3], &[2, 3], [&[0, 0], &[2, 3], &[1, 1]], options);
        refusal(&tflite, "STRIDED_SLICE");
    }
}

#[test]
fn slice_whose_end_overflows_is_refused_not_a_panic() {
    let mut m = TinyModel::new();
    let x = m.tensor("x", &[4], TensorType::Float32, None);
    let b = i64s(&mut m, "begin", &[i64::MAX - 1]);
    let s = i64s(&mut m, "size", &[2]);
    let y = m.tensor("y", &[2], TensorType::Float32, None);
    m.op(BuiltinOperator::Slice, None, &[x, b, s], &[y], None);
    refusal(&m.finish(&[x], &[y]), "SLICE");
}

/// A sparse float constant of `shape` storing `values` in CSR over its
/// last axis (`segments`, `indices`), and a DENSIFY of it into "dense".
fn sparse_model(
    m: &mut TinyModel,
    shape: &[i32],
    values: &[f32],
    segments: &[i32],
    indices: &[i32],
) -> (i32, i32) {
    use tandem_tflite_schema::tflite::{
        DimensionMetadata, DimensionType, Int32Vector, SparseIndexVector, SparsityParameters,
    };
    let s = m.f32s("sparse", shape, values);
    let int32s =
        |v: &[i32]| SparseIndexVector::Int32Vector(Box::new(Int32Vector { values: Some(v.to_vec()) }));
    m.tensors[s as usize].sparsity = Some(Box::new(SparsityParameters {
        traversal_order: Some(vec![0, 1]),
        block_map: Some(vec![]),
        dim_metadata: Some(vec![
            DimensionMetadata { format: DimensionType::Dense, dense_size: shape[0], ..Default::default() },
            DimensionMetadata {
                format: DimensionType::SparseCsr,
                array_segments: Some(int32s(segments)),
                array_indices: Some(int32s(indices)),
                ..Default::default()
            },
        ]),
    }));
    let d = m.tensor("dense", shape, TensorType::Float32, None);
    m.op(BuiltinOperator::Densify, None, &[s], &[d], None);
    (s, d)
}

#[test]
fn a_dense_form_far_larger_than_its_stored_values_is_refused() {
    // Two stored values densified to 2^24 float32 (64 MiB): refused before
    // anything is allocated.
    let mut m = TinyModel::new();
    let (_, d) = sparse_model(&mut m, &[1, 1 << 24], &[1., 2.], &[0, 2], &[0, 5]);
    let x = m.tensor("x", &[1, 1 << 24], TensorType::Float32, None);
    let y = m.tensor("y", &[1, 1 << 24], TensorType::Float32, None);
    m.op(BuiltinOperator::Add, None, &[x, d], &[y], None);
    let err = refusal(&m.finish(&[x], &[y]), "DENSIFY");
    assert!(err.contains("dense form"), "{err}");
}

#[test]
fn a_sparse_tensor_read_without_densify_is_refused_even_after_a_densify() -> TractResult<()> {
    let mut m = TinyModel::new();
    // [[0, 7, 0], [5, 0, 6]].
    let (s, d) = sparse_model(&mut m, &[2, 3], &[7., 5., 6.], &[0, 1, 3], &[1, 0, 2]);
    let x = m.tensor("x", &[2, 3], TensorType::Float32, None);
    let y = m.tensor("y", &[2, 3], TensorType::Float32, None);
    m.op(BuiltinOperator::Add, None, &[x, d], &[y], None);
    let z = m.tensor("z", &[2, 3], TensorType::Float32, None);
    m.op(BuiltinOperator::Add, None, &[y, s], &[z], None);
    let err = refusal(&m.finish(&[x], &[z]), "ADD");
    assert!(err.contains("without DENSIFY"), "{err}");
    Ok(())
}

#[test]
fn densify_feeds_the_dense_weights() -> TractResult<()> {
    let mut m = TinyModel::new();
    let (_, d) = sparse_model(&mut m, &[2, 3], &[7., 5., 6.], &[0, 1, 3], &[1, 0, 2]);
    let x = m.tensor("x", &[2, 3], TensorType::Float32, None);
    let y = m.tensor("y", &[2, 3], TensorType::Float32, None);
    m.op(BuiltinOperator::Add, None, &[x, d], &[y], None);
    let x_values = [1f32, 1., 1., 1., 1., 1.];
    check("densify", &m.finish(&[x], &[y]), &[(&[2, 3], &x_values)], &[1., 8., 1., 6., 1., 7.])
}

#[test]
fn outputs_listed_twice_are_one_output_and_too_many_are_refused() -> TractResult<()> {
    let mut m = TinyModel::new();
    let x = m.tensor("x", &[2], TensorType::Float32, None);
    let y = m.tensor("y", &[2], TensorType::Float32, None);
    m.op(BuiltinOperator::Relu, None, &[x], &[y], None);
    let proto = tandem_tflite::translate(&m.finish(&[x], &[y, y]))?;
    let names: Vec<&str> =
        proto.graph.as_ref().map(|g| g.output.iter().map(|o| o.name.as_str()).collect()).unwrap_or_default();
    assert_eq!(names, ["y"]);

    let mut m = TinyModel::new();
    let x = m.tensor("x", &[2], TensorType::Float32, None);
    let y = m.tensor("y", &[2], TensorType::Float32, None);
    m.op(BuiltinOperator::Relu, None, &[x], &[y], None);
    let err = tandem_tflite::translate(&m.finish(&[x], &vec![y; 5000])).expect_err("refused").to_string();
    assert!(err.contains("outputs"), "{err}");
    Ok(())
}

fn max_pool_same(m: &mut TinyModel, x: i32, y: i32, kernel: [i32; 2], stride: [i32; 2]) {
    let options = tandem_tflite_schema::tflite::Pool2DOptions {
        padding: Padding::Same,
        stride_h: stride[0],
        stride_w: stride[1],
        filter_height: kernel[0],
        filter_width: kernel[1],
        fused_activation_function: ActivationFunctionType::None,
    };
    m.op(
        BuiltinOperator::MaxPool2d,
        None,
        &[x],
        &[y],
        Some(BuiltinOptions::Pool2DOptions(Box::new(options))),
    );
}

#[test]
fn same_padding_follows_an_open_height_at_run_time() -> TractResult<()> {
    let mut m = TinyModel::new();
    let x = open_tensor(&mut m, "x", &[1, -1, 1, 1]);
    let y = open_tensor(&mut m, "y", &[1, -1, 1, 1]);
    max_pool_same(&mut m, x, y, [3, 1], [2, 1]);
    let tflite = m.finish(&[x], &[y]);
    // Height 6: SAME pads 0 rows before and 1 after (the declared height 1
    // would pad 1 and 1): windows [0, 2], [2, 4], [4, 5].
    let x: Vec<f32> = vec![0., 1., 2., 3., 4., 5.];
    // LiteRT 1.x gives [2, 4, 5].
    check("max_pool_open_height", &tflite, &[(&[1, 6, 1, 1], &x)], &[2., 4., 5.])
}

fn resize_nearest_model(
    input: &[i32],
    output: &[i32],
    size: [i32; 2],
    align_corners: bool,
    half_pixel_centers: bool,
) -> Vec<u8> {
    use tandem_tflite_schema::tflite::ResizeNearestNeighborOptions;
    let mut m = TinyModel::new();
    let x = open_tensor(&mut m, "x", input);
    let s = m.i32s("size", &size);
    let y = open_tensor(&mut m, "y", output);
    let options = ResizeNearestNeighborOptions { align_corners, half_pixel_centers };
    let options = BuiltinOptions::ResizeNearestNeighborOptions(Box::new(options));
    m.op(BuiltinOperator::ResizeNearestNeighbor, None, &[x, s], &[y], Some(options));
    m.finish(&[x], &[y])
}

#[test]
fn resize_nearest_takes_an_open_batch_from_the_input() -> TractResult<()> {
    let tflite = resize_nearest_model(&[-1, 2, 2, 1], &[-1, 4, 4, 1], [4, 4], false, false);
    let x = [1f32, 2., 3., 4., 5., 6., 7., 8.];
    // out[y][x] = in[y / 2][x / 2] per image, for two images.
    let mut expected = Vec::new();
    for image in 0..2 {
        for r in 0..4 {
            for c in 0..4 {
                expected.push(x[image * 4 + (r / 2) * 2 + c / 2]);
            }
        }
    }
    check("resize_nearest_open_batch", &tflite, &[(&[2, 2, 2, 1], &x)], &expected)
}

#[test]
fn resize_nearest_honours_align_corners_and_half_pixel_centers() -> TractResult<()> {
    let x: Vec<f32> = (0..3).map(|v| v as f32).collect();
    // 1 × 3 → 1 × 5 along the width; LiteRT 1.x gives these values.
    for (align, half, expected) in [
        (false, false, [0f32, 0., 1., 1., 2.]),
        (true, false, [0., 1., 1., 2., 2.]),
        (false, true, [0., 0., 1., 2., 2.]),
    ] {
        let tflite = resize_nearest_model(&[1, 1, 3, 1], &[1, 1, 5, 1], [1, 5], align, half);
        check(&format!("resize_nearest_{align}_{half}"), &tflite, &[(&[1, 1, 3, 1], &x)], &expected)?;
    }
    let tflite = resize_nearest_model(&[1, 1, 3, 1], &[1, 1, 5, 1], [1, 5], true, true);
    refusal(&tflite, "RESIZE_NEAREST_NEIGHBOR");
    Ok(())
}

fn squeeze_model(input: &[i32], output: &[i32], dims: Option<Vec<i32>>) -> Vec<u8> {
    let mut m = TinyModel::new();
    let x = open_tensor(&mut m, "x", input);
    let y = open_tensor(&mut m, "y", output);
    let options = tandem_tflite_schema::tflite::SqueezeOptions { squeeze_dims: dims };
    m.op(BuiltinOperator::Squeeze, None, &[x], &[y], Some(BuiltinOptions::SqueezeOptions(Box::new(options))));
    m.finish(&[x], &[y])
}

#[test]
fn squeeze_removes_the_named_or_unit_dimensions_and_refuses_open_ones() -> TractResult<()> {
    let x = [1f32, 2., 3.];
    check("squeeze_all", &squeeze_model(&[1, 3, 1], &[3], None), &[(&[1, 3, 1], &x)], &x)?;
    let tflite = squeeze_model(&[1, 3, 1], &[1, 3], Some(vec![-1]));
    let out = run(&tflite, tensor1(&x).into_shape(&[1, 3, 1])?)?;
    assert_eq!(out[0].shape(), [1, 3]);
    // No axes and an open batch: which dimensions go depends on the run.
    let err = refusal(&squeeze_model(&[-1, 3, 1], &[3], None), "SQUEEZE");
    assert!(err.contains("open"), "{err}");
    Ok(())
}

fn unary_model(code: BuiltinOperator, shape: &[i32], options: Option<BuiltinOptions>) -> Vec<u8> {
    let mut m = TinyModel::new();
    let x = m.tensor("x", shape, TensorType::Float32, None);
    let y = m.tensor("y", shape, TensorType::Float32, None);
    m.op(code, None, &[x], &[y], options);
    m.finish(&[x], &[y])
}

#[test]
fn leaky_relu_without_options_has_alpha_zero() -> TractResult<()> {
    let tflite = unary_model(BuiltinOperator::LeakyRelu, &[3], None);
    // LiteRT 1.x gives [0, 0, 3] (its options default alpha to 0).
    check("leaky_relu_no_options", &tflite, &[(&[3], &[-2., 0., 3.])], &[0., 0., 3.])?;
    let options =
        BuiltinOptions::LeakyReluOptions(Box::new(tandem_tflite_schema::tflite::LeakyReluOptions {
            alpha: 0.5,
        }));
    let tflite = unary_model(BuiltinOperator::LeakyRelu, &[3], Some(options));
    check("leaky_relu_half", &tflite, &[(&[3], &[-2., 0., 3.])], &[-1., 0., 3.])
}

fn reduce_model(
    code: BuiltinOperator,
    input: &[i32],
    axes: &[i32],
    output: &[i32],
    keep_dims: bool,
) -> Vec<u8> {
    let mut m = TinyModel::new();
    let x = m.tensor("x", input, TensorType::Float32, None);
    let a = m.i32s("axes", axes);
    let y = m.tensor("y", output, TensorType::Float32, None);
    let options = tandem_tflite_schema::tflite::ReducerOptions { keep_dims };
    m.op(code, None, &[x, a], &[y], Some(BuiltinOptions::ReducerOptions(Box::new(options))));
    m.finish(&[x], &[y])
}

#[test]
fn reductions_over_no_axis_leave_the_input_and_keep_dims_is_honoured() -> TractResult<()> {
    let x = [1f32, 2., 3., 4., 5., 6.];
    for code in [BuiltinOperator::Mean, BuiltinOperator::Sum, BuiltinOperator::ReduceMax] {
        let tflite = reduce_model(code, &[2, 3], &[], &[2, 3], false);
        // LiteRT 1.x returns the input unchanged.
        check("reduce_no_axis", &tflite, &[(&[2, 3], &x)], &x)?;
    }
    let tflite = reduce_model(BuiltinOperator::Sum, &[2, 3], &[-1], &[2, 1], true);
    let out = run(&tflite, tensor1(&x).into_shape(&[2, 3])?)?;
    assert_eq!(out[0].shape(), [2, 1]);
    assert_close(&out[0], &[6., 15.]);
    let tflite = reduce_model(BuiltinOperator::Mean, &[2, 3], &[0], &[3], false);
    let out = run(&tflite, tensor1(&x).into_shape(&[2, 3])?)?;
    assert_eq!(out[0].shape(), [3]);
    assert_close(&out[0], &[2.5, 3.5, 4.5]);
    Ok(())
}

#[test]
fn select_v1_with_a_rank_1_condition_picks_rows() -> TractResult<()> {
    let mut m = TinyModel::new();
    let c = m.tensor("c", &[2], TensorType::Bool, Some(vec![1, 0]));
    let a = m.tensor("a", &[2, 3], TensorType::Float32, None);
    let b = m.tensor("b", &[2, 3], TensorType::Float32, None);
    let y = m.tensor("y", &[2, 3], TensorType::Float32, None);
    m.op(BuiltinOperator::Select, None, &[c, a, b], &[y], None);
    let tflite = m.finish(&[a, b], &[y]);
    let (av, bv) = ([1f32, 2., 3., 4., 5., 6.], [-1f32, -2., -3., -4., -5., -6.]);
    // Row 0 from a, row 1 from b (LiteRT 1.x agrees).
    check("select_rows", &tflite, &[(&[2, 3], &av), (&[2, 3], &bv)], &[1., 2., 3., -4., -5., -6.])
}

fn pad_model(code: BuiltinOperator, paddings: &[i32], options: Option<BuiltinOptions>) -> Vec<u8> {
    let mut m = TinyModel::new();
    let x = m.tensor("x", &[2, 3], TensorType::Float32, None);
    let p = m.tensor(
        "paddings",
        &[2, 2],
        TensorType::Int32,
        Some(paddings.iter().flat_map(|v| v.to_le_bytes()).collect()),
    );
    let shape = [2 + paddings[0] + paddings[1], 3 + paddings[2] + paddings[3]];
    let y = m.tensor("y", &shape, TensorType::Float32, None);
    m.op(code, None, &[x, p], &[y], options);
    m.finish(&[x], &[y])
}

#[test]
fn pad_and_mirror_pad_match_tflite() -> TractResult<()> {
    use tandem_tflite_schema::tflite::{MirrorPadMode, MirrorPadOptions};
    let x = [1f32, 2., 3., 4., 5., 6.];
    // [[1, 2, 3], [4, 5, 6]] padded by one row before, two columns after.
    let tflite = pad_model(BuiltinOperator::Pad, &[1, 0, 0, 2], None);
    #[rustfmt::skip]
    let expected = [0., 0., 0., 0., 0., 1., 2., 3., 0., 0., 4., 5., 6., 0., 0.];
    check("pad", &tflite, &[(&[2, 3], &x)], &expected)?;
    let reflect = |mode| Some(BuiltinOptions::MirrorPadOptions(Box::new(MirrorPadOptions { mode })));
    let tflite = pad_model(BuiltinOperator::MirrorPad, &[1, 0, 1, 1], reflect(MirrorPadMode::Reflect));
    // REFLECT leaves the edge out: row 1 above, columns 1 and 1 beside.
    #[rustfmt::skip]
    let expected = [5., 4., 5., 6., 5., 2., 1., 2., 3., 2., 5., 4., 5., 6., 5.];
    check("mirror_pad_reflect", &tflite, &[(&[2, 3], &x)], &expected)?;
    let tflite = pad_model(BuiltinOperator::MirrorPad, &[1, 0, 1, 1], reflect(MirrorPadMode::Symmetric));
    refusal(&tflite, "MIRROR_PAD");
    // A negative padding: ONNX would crop, TFLite refuses.
    refusal(&pad_model(BuiltinOperator::Pad, &[-1, 0, 0, 0], None), "PAD");
    Ok(())
}

#[test]
fn fully_connected_keeps_its_leading_dimensions() -> TractResult<()> {
    use tandem_tflite_schema::tflite::FullyConnectedOptions;
    let mut m = TinyModel::new();
    let x = m.tensor("x", &[2, 2, 3], TensorType::Float32, None);
    let w = m.f32s("w", &[2, 3], &[1., 0., 1., 0., 1., -1.]);
    let y = m.tensor("y", &[2, 2, 2], TensorType::Float32, None);
    let options = FullyConnectedOptions { keep_num_dims: true, ..Default::default() };
    m.op(
        BuiltinOperator::FullyConnected,
        None,
        &[x, w],
        &[y],
        Some(BuiltinOptions::FullyConnectedOptions(Box::new(options))),
    );
    let tflite = m.finish(&[x], &[y]);
    let xv: Vec<f32> = (0..12).map(|v| v as f32).collect();
    let out = run(&tflite, tensor1(&xv).into_shape(&[2, 2, 3])?)?;
    assert_eq!(out[0].shape(), [2, 2, 2]);
    // Each row r: [r0 + r2, r1 - r2].
    check(
        "fully_connected_keep_num_dims",
        &tflite,
        &[(&[2, 2, 3], &xv)],
        &[2., -1., 8., -1., 14., -1., 20., -1.],
    )
}
