//! One translation per TFLite builtin operator.
//!
//! The ONNX graph keeps TFLite's NHWC layout; ops that ONNX defines on
//! NCHW (convolutions, pooling, resizing, depth-to-space) are wrapped in a
//! pair of `Transpose`s, as tf2onnx does, and their filters are transposed
//! at translation time. Every option an op carries is either honoured or
//! refused with the op's name and node, save those that only tune TFLite's
//! integer kernels (`asymmetric_quantize_inputs`, `pot_scale_int16`,
//! `quantized_bias_type`: the translation computes in float) and those
//! restating the tensors (`depth_multiplier`, `values_count`, `CAST`'s
//! types, `RESHAPE`'s `new_shape` beside its shape input), read from the
//! tensors instead.

use crate::constant::{
    densify, element_count, Const, MAX_DENSE_RATIO, MAX_FOLDED_TENSOR_BYTES, MIN_DENSE_ELEMENTS,
};
use crate::error::{FlatbufferContext, Result};
use crate::onnx::{float, int, ints, string};
use crate::reader::TfOperator;
use crate::translate::{onnx_type, Ctx};
use tandem_tflite_schema::tflite::{ActivationFunctionType as Act, BuiltinOptionsRef as Opts, Padding};

/// NHWC → NCHW.
const TO_NCHW: [i64; 4] = [0, 3, 1, 2];
/// NCHW → NHWC.
const TO_NHWC: [i64; 4] = [0, 2, 3, 1];

/// Reads `op`'s builtin options as the variant `$v`, `None` when absent.
macro_rules! options {
    ($ctx:expr, $op:expr, $v:ident) => {
        match $op.raw.builtin_options().context(|| format!("{}'s options", $op.name))? {
            Some(Opts::$v(o)) => Some(o),
            None => None,
            Some(_) => return Err($ctx.unsupported(concat!("its options are not ", stringify!($v)))),
        }
    };
}

/// Reads one option field, naming the op on a bad value.
macro_rules! field {
    ($op:expr, $e:expr) => {
        $e.context(|| format!("{}'s options", $op.name))?
    };
}

/// Translates `op`, writing its nodes and outputs into `ctx`.
pub(crate) fn translate(ctx: &mut Ctx<'_>, op: &TfOperator<'_>) -> Result<()> {
    match op.name.as_str() {
        "ADD" | "SUB" | "MUL" | "DIV" => binary_with_activation(ctx, op),
        "MAXIMUM" => binary(ctx, op, "Max"),
        "MINIMUM" => binary(ctx, op, "Min"),
        "POW" => binary(ctx, op, "Pow"),
        "LESS" => binary(ctx, op, "Less"),
        "LESS_EQUAL" => binary(ctx, op, "LessOrEqual"),
        "GREATER" => binary(ctx, op, "Greater"),
        "GREATER_EQUAL" => binary(ctx, op, "GreaterOrEqual"),
        "EQUAL" => binary(ctx, op, "Equal"),
        "LOGICAL_AND" => binary(ctx, op, "And"),
        "LOGICAL_OR" => binary(ctx, op, "Or"),
        "SQUARED_DIFFERENCE" => squared_difference(ctx, op),
        "LOGISTIC" => unary(ctx, op, "Sigmoid", vec![]),
        "TANH" => unary(ctx, op, "Tanh", vec![]),
        "RELU" => unary(ctx, op, "Relu", vec![]),
        "RELU6" => clip(ctx, op, 0.0, 6.0),
        "RELU_N1_TO_1" => clip(ctx, op, -1.0, 1.0),
        "RELU_0_TO_1" => clip(ctx, op, 0.0, 1.0),
        "HARD_SWISH" => unary(ctx, op, "HardSwish", vec![]),
        "EXP" => unary(ctx, op, "Exp", vec![]),
        "LOG" => unary(ctx, op, "Log", vec![]),
        "SQRT" => unary(ctx, op, "Sqrt", vec![]),
        "ABS" => unary(ctx, op, "Abs", vec![]),
        "NEG" => unary(ctx, op, "Neg", vec![]),
        "FLOOR" => unary(ctx, op, "Floor", vec![]),
        "CEIL" => unary(ctx, op, "Ceil", vec![]),
        "SIN" => unary(ctx, op, "Sin", vec![]),
        "COS" => unary(ctx, op, "Cos", vec![]),
        "ROUND" => unary(ctx, op, "Round", vec![]),
        "SIGN" => unary(ctx, op, "Sign", vec![]),
        "LOGICAL_NOT" => unary(ctx, op, "Not", vec![]),
        "RSQRT" => rsqrt(ctx, op),
        "SQUARE" => square(ctx, op),
        "LEAKY_RELU" => {
            let alpha = options!(ctx, op, LeakyReluOptions).map(|o| o.alpha()).transpose();
            let alpha = alpha.context(|| "LEAKY_RELU's options".into())?.unwrap_or(0.0);
            unary(ctx, op, "LeakyRelu", vec![float("alpha", alpha)])
        }
        "PRELU" => {
            let (x, slope) = (ctx.input(op, 0)?, ctx.input(op, 1)?);
            let out = ctx.output(op, 0)?;
            ctx.g.node("PRelu", &[&x, &slope], &[&out], vec![]);
            Ok(())
        }
        "SOFTMAX" => softmax(ctx, op),
        "LOG_SOFTMAX" => unary(ctx, op, "LogSoftmax", vec![int("axis", -1)]),
        "CONV_2D" => conv(ctx, op, false),
        "DEPTHWISE_CONV_2D" => conv(ctx, op, true),
        "MAX_POOL_2D" => pool(ctx, op, "MaxPool"),
        "AVERAGE_POOL_2D" => pool(ctx, op, "AveragePool"),
        "FULLY_CONNECTED" => fully_connected(ctx, op),
        "BATCH_MATMUL" => batch_matmul(ctx, op),
        "RESHAPE" => reshape(ctx, op),
        "SQUEEZE" => squeeze(ctx, op),
        "EXPAND_DIMS" => expand_dims(ctx, op),
        "TRANSPOSE" => {
            let perm = ctx.int_constant(op, 1, "permutation")?;
            let x = ctx.input(op, 0)?;
            let out = ctx.output(op, 0)?;
            ctx.g.node("Transpose", &[&x], &[&out], vec![ints("perm", &perm)]);
            Ok(())
        }
        "CONCATENATION" => concatenation(ctx, op),
        "PAD" | "PADV2" | "MIRROR_PAD" => pad(ctx, op),
        "MEAN" => reduce(ctx, op, "ReduceMean"),
        "SUM" => reduce(ctx, op, "ReduceSum"),
        "REDUCE_MAX" => reduce(ctx, op, "ReduceMax"),
        "REDUCE_MIN" => reduce(ctx, op, "ReduceMin"),
        "REDUCE_PROD" => reduce(ctx, op, "ReduceProd"),
        "RESIZE_BILINEAR" => resize(ctx, op, true),
        "RESIZE_NEAREST_NEIGHBOR" => resize(ctx, op, false),
        "DEPTH_TO_SPACE" | "SPACE_TO_DEPTH" => depth_space(ctx, op),
        "STRIDED_SLICE" => strided_slice(ctx, op),
        "SLICE" => slice(ctx, op),
        "GATHER" => gather(ctx, op),
        "CAST" => {
            let o = ctx.output_tensor(op, 0)?;
            let to = onnx_type(ctx.tensor(o))? as i64;
            let x = ctx.input(op, 0)?;
            let out = ctx.output(op, 0)?;
            // A float16 output is written as float and cast back by the driver.
            let to = if to == tract_onnx::pb::tensor_proto::DataType::Float16 as i64 {
                tract_onnx::pb::tensor_proto::DataType::Float as i64
            } else {
                to
            };
            ctx.g.node("Cast", &[&x], &[&out], vec![int("to", to)]);
            Ok(())
        }
        "DEQUANTIZE" | "QUANTIZE" => {
            if let Some(c) = ctx.constant(op, 0)? {
                return ctx.fold(op, 0, c);
            }
            let x = ctx.input(op, 0)?;
            let out = ctx.output(op, 0)?;
            ctx.g.node("Identity", &[&x], &[&out], vec![]);
            Ok(())
        }
        "DENSIFY" => {
            let i = ctx.input_tensor(op, 0)?;
            let o = ctx.output_tensor(op, 0)?;
            let sparsity =
                ctx.tensor(i).sparsity.clone().ok_or_else(|| ctx.unsupported("its input is not sparse"))?;
            let values =
                ctx.sparse_values(i)?.ok_or_else(|| ctx.unsupported("its input is not a constant"))?;
            let shape = ctx.shape(o);
            // Checked before densifying: the dense form is float32.
            let count = element_count(&shape).map_err(|e| ctx.unsupported(&e.to_string()))?;
            if count.saturating_mul(4) > MAX_FOLDED_TENSOR_BYTES
                || count > values.len().saturating_mul(MAX_DENSE_RATIO).max(MIN_DENSE_ELEMENTS)
            {
                return Err(ctx.unsupported(&format!(
                    "a dense form of {count} values from {} stored ones",
                    values.len()
                )));
            }
            let dense = densify(&values, &sparsity, &shape)?;
            // Folded values of computed tensors are their float view.
            let dense = dense.dequantize(ctx.tensor(o).quant.as_ref())?;
            ctx.fold(op, 0, dense)
        }
        "TILE" => {
            let reps = ctx.int_constant(op, 1, "multiples")?;
            let x = ctx.input(op, 0)?;
            let reps = ctx.g.constant("multiples", &Const::i64(vec![reps.len()], reps));
            let out = ctx.output(op, 0)?;
            ctx.g.node("Tile", &[&x, &reps], &[&out], vec![]);
            Ok(())
        }
        "SELECT" | "SELECT_V2" => select(ctx, op),
        "ADD_N" => {
            let xs = (0..op.inputs.len()).map(|k| ctx.input(op, k)).collect::<Result<Vec<_>>>()?;
            let out = ctx.output(op, 0)?;
            ctx.g.node("Sum", &xs.iter().map(String::as_str).collect::<Vec<_>>(), &[&out], vec![]);
            Ok(())
        }
        "PACK" => pack(ctx, op),
        _ => Err(ctx.unsupported("no translation for this operator")),
    }
}

/// `SELECT_V2` broadcasts as ONNX's `Where` does; `SELECT` (v1) takes a
/// rank-1 condition as one choice per row (along the first axis), so it is
/// unsqueezed to the inputs' rank.
fn select(ctx: &mut Ctx<'_>, op: &TfOperator<'_>) -> Result<()> {
    let cond_rank = ctx.shape(ctx.input_tensor(op, 0)?).len();
    let rank = ctx.shape(ctx.input_tensor(op, 1)?).len();
    let (mut c, a, b) = (ctx.input(op, 0)?, ctx.input(op, 1)?, ctx.input(op, 2)?);
    let out = ctx.output(op, 0)?;
    if op.name == "SELECT" && cond_rank != rank {
        if cond_rank != 1 {
            return Err(ctx.unsupported(&format!("a rank-{cond_rank} condition for rank-{rank} inputs")));
        }
        let axes: Vec<i64> = (1..rank as i64).collect();
        let axes = ctx.g.constant(&format!("{out}_condition_axes"), &Const::i64(vec![axes.len()], axes));
        c = ctx.g.op("Unsqueeze", &[&c, &axes], &format!("{out}_condition"), vec![]);
    }
    ctx.g.node("Where", &[&c, &a, &b], &[&out], vec![]);
    Ok(())
}

/// A fused activation as ONNX: applied from `pre` into `out`.
fn activate(ctx: &mut Ctx<'_>, act: Act, pre: &str, out: &str) -> Result<()> {
    match act {
        Act::None => ctx.g.node("Identity", &[pre], &[out], vec![]),
        Act::Relu => ctx.g.node("Relu", &[pre], &[out], vec![]),
        Act::Relu6 => clip_node(ctx, pre, out, 0.0, 6.0),
        Act::ReluN1To1 => clip_node(ctx, pre, out, -1.0, 1.0),
        Act::Tanh => ctx.g.node("Tanh", &[pre], &[out], vec![]),
        Act::SignBit => return Err(ctx.unsupported("fused activation SIGN_BIT")),
    }
    Ok(())
}

/// Runs `body` writing to `out`, or to a temporary then the activation.
fn with_activation(
    ctx: &mut Ctx<'_>,
    act: Act,
    out: String,
    body: impl FnOnce(&mut Ctx<'_>, &str) -> Result<()>,
) -> Result<()> {
    if act == Act::None {
        return body(ctx, &out);
    }
    let pre = ctx.g.fresh(&format!("{out}_linear"));
    body(ctx, &pre)?;
    activate(ctx, act, &pre, &out)
}

fn clip_node(ctx: &mut Ctx<'_>, x: &str, out: &str, lo: f32, hi: f32) {
    let lo = ctx.g.constant("clip_min", &Const::f32(vec![], vec![lo]));
    let hi = ctx.g.constant("clip_max", &Const::f32(vec![], vec![hi]));
    ctx.g.node("Clip", &[x, &lo, &hi], &[out], vec![]);
}

fn clip(ctx: &mut Ctx<'_>, op: &TfOperator<'_>, lo: f32, hi: f32) -> Result<()> {
    let x = ctx.input(op, 0)?;
    let out = ctx.output(op, 0)?;
    clip_node(ctx, &x, &out, lo, hi);
    Ok(())
}

fn unary(
    ctx: &mut Ctx<'_>,
    op: &TfOperator<'_>,
    onnx_op: &str,
    attrs: Vec<tract_onnx::pb::AttributeProto>,
) -> Result<()> {
    let x = ctx.input(op, 0)?;
    let out = ctx.output(op, 0)?;
    ctx.g.node(onnx_op, &[&x], &[&out], attrs);
    Ok(())
}

fn binary(ctx: &mut Ctx<'_>, op: &TfOperator<'_>, onnx_op: &str) -> Result<()> {
    let (a, b) = (ctx.input(op, 0)?, ctx.input(op, 1)?);
    let out = ctx.output(op, 0)?;
    ctx.g.node(onnx_op, &[&a, &b], &[&out], vec![]);
    Ok(())
}

fn binary_with_activation(ctx: &mut Ctx<'_>, op: &TfOperator<'_>) -> Result<()> {
    let act = match op.name.as_str() {
        "ADD" => options!(ctx, op, AddOptions).map(|o| o.fused_activation_function()).transpose(),
        "SUB" => options!(ctx, op, SubOptions).map(|o| o.fused_activation_function()).transpose(),
        "MUL" => options!(ctx, op, MulOptions).map(|o| o.fused_activation_function()).transpose(),
        _ => options!(ctx, op, DivOptions).map(|o| o.fused_activation_function()).transpose(),
    };
    let act = field!(op, act).unwrap_or(Act::None);
    let onnx_op = match op.name.as_str() {
        "ADD" => "Add",
        "SUB" => "Sub",
        "MUL" => "Mul",
        _ => "Div",
    };
    let (a, b) = (ctx.input(op, 0)?, ctx.input(op, 1)?);
    let out = ctx.output(op, 0)?;
    with_activation(ctx, act, out, |ctx, target| {
        ctx.g.node(onnx_op, &[&a, &b], &[target], vec![]);
        Ok(())
    })
}

fn squared_difference(ctx: &mut Ctx<'_>, op: &TfOperator<'_>) -> Result<()> {
    let (a, b) = (ctx.input(op, 0)?, ctx.input(op, 1)?);
    let out = ctx.output(op, 0)?;
    let d = ctx.g.op("Sub", &[&a, &b], &format!("{out}_difference"), vec![]);
    ctx.g.node("Mul", &[&d, &d], &[&out], vec![]);
    Ok(())
}

fn rsqrt(ctx: &mut Ctx<'_>, op: &TfOperator<'_>) -> Result<()> {
    let x = ctx.input(op, 0)?;
    let out = ctx.output(op, 0)?;
    let s = ctx.g.op("Sqrt", &[&x], &format!("{out}_sqrt"), vec![]);
    ctx.g.node("Reciprocal", &[&s], &[&out], vec![]);
    Ok(())
}

fn square(ctx: &mut Ctx<'_>, op: &TfOperator<'_>) -> Result<()> {
    let x = ctx.input(op, 0)?;
    let out = ctx.output(op, 0)?;
    ctx.g.node("Mul", &[&x, &x], &[&out], vec![]);
    Ok(())
}

fn softmax(ctx: &mut Ctx<'_>, op: &TfOperator<'_>) -> Result<()> {
    let beta = field!(op, options!(ctx, op, SoftmaxOptions).map(|o| o.beta()).transpose()).unwrap_or(1.0);
    let mut x = ctx.input(op, 0)?;
    let out = ctx.output(op, 0)?;
    if beta != 1.0 {
        let b = ctx.g.constant("softmax_beta", &Const::f32(vec![], vec![beta]));
        x = ctx.g.op("Mul", &[&x, &b], &format!("{out}_scaled"), vec![]);
    }
    ctx.g.node("Softmax", &[&x], &[&out], vec![int("axis", -1)]);
    Ok(())
}

/// TensorFlow's SAME padding of one spatial dimension: (begin, end).
fn same_padding(input: usize, kernel: usize, stride: usize, dilation: usize) -> (i64, i64) {
    let stride = stride.max(1);
    let out = input.div_ceil(stride);
    // Saturating: kernel, stride and dilation come from the file.
    let effective = kernel.saturating_sub(1).saturating_mul(dilation.max(1)).saturating_add(1);
    let span = out.saturating_sub(1).saturating_mul(stride).saturating_add(effective);
    let total = i64::try_from(span.saturating_sub(input)).unwrap_or(i64::MAX);
    (total / 2, total - total / 2)
}

/// The ONNX padding attribute for a 2-D window over NHWC input `k` of
/// `op`: explicit `pads`, or `auto_pad` SAME_UPPER (TensorFlow's SAME, the
/// odd cell at the end) when its height or width is open, so that the
/// padding follows the size at run time.
fn pads(
    ctx: &Ctx<'_>,
    op: &TfOperator<'_>,
    padding: Padding,
    kernel: [usize; 2],
    stride: [usize; 2],
    dilation: [usize; 2],
) -> Result<tract_onnx::pb::AttributeProto> {
    let shape = nhwc_shape(ctx, op, 0)?;
    let open = ctx.open_dims(ctx.input_tensor(op, 0)?);
    Ok(match padding {
        Padding::Valid => ints("pads", &[0; 4]),
        Padding::Same if open[1] || open[2] => string("auto_pad", "SAME_UPPER"),
        Padding::Same => {
            let (t, b) = same_padding(shape[1], kernel[0], stride[0], dilation[0]);
            let (l, r) = same_padding(shape[2], kernel[1], stride[1], dilation[1]);
            ints("pads", &[t, l, b, r])
        }
    })
}

/// Checks a stride, dilation or window size read from the file.
fn positive(ctx: &Ctx<'_>, v: i32, what: &str) -> Result<usize> {
    usize::try_from(v).ok().filter(|&v| v > 0).ok_or_else(|| ctx.unsupported(&format!("{what} {v}")))
}

/// A rank-4 NHWC shape of input `k`, or a refusal.
fn nhwc_shape(ctx: &Ctx<'_>, op: &TfOperator<'_>, k: usize) -> Result<Vec<usize>> {
    let shape = ctx.shape(ctx.input_tensor(op, k)?);
    if shape.len() != 4 {
        return Err(ctx.unsupported(&format!("input {k} has rank {}, not 4", shape.len())));
    }
    Ok(shape)
}

fn conv(ctx: &mut Ctx<'_>, op: &TfOperator<'_>, depthwise: bool) -> Result<()> {
    let (padding, stride, dilation, act) = if depthwise {
        let o = options!(ctx, op, DepthwiseConv2DOptions).ok_or_else(|| ctx.unsupported("no options"))?;
        let s = [field!(op, o.stride_h()), field!(op, o.stride_w())];
        let d = [field!(op, o.dilation_h_factor()), field!(op, o.dilation_w_factor())];
        (field!(op, o.padding()), s, d, field!(op, o.fused_activation_function()))
    } else {
        let o = options!(ctx, op, Conv2DOptions).ok_or_else(|| ctx.unsupported("no options"))?;
        let s = [field!(op, o.stride_h()), field!(op, o.stride_w())];
        let d = [field!(op, o.dilation_h_factor()), field!(op, o.dilation_w_factor())];
        (field!(op, o.padding()), s, d, field!(op, o.fused_activation_function()))
    };
    let stride = [positive(ctx, stride[0], "stride")?, positive(ctx, stride[1], "stride")?];
    let dilation = [positive(ctx, dilation[0], "dilation")?, positive(ctx, dilation[1], "dilation")?];
    let shape = nhwc_shape(ctx, op, 0)?;
    let filter = ctx.constant(op, 1)?.ok_or_else(|| ctx.unsupported("its filter is not a constant"))?;
    if filter.shape.len() != 4 {
        return Err(ctx.unsupported(&format!("filter of rank {}", filter.shape.len())));
    }
    let channels = shape[3];
    let (weights, group) = if depthwise {
        // [1, KH, KW, C·M] → [C·M, 1, KH, KW], one group per input channel.
        let out_channels = filter.shape[3];
        if filter.shape[0] != 1 || channels == 0 || out_channels % channels != 0 {
            return Err(
                ctx.unsupported(&format!("depthwise filter {:?} on {channels} channels", filter.shape))
            );
        }
        (filter.transpose(&[3, 0, 1, 2]), channels)
    } else {
        // [O, KH, KW, I] → [O, I, KH, KW]; I < C means grouped.
        let per_group = filter.shape[3];
        if per_group == 0 || channels % per_group != 0 || filter.shape[0] % (channels / per_group).max(1) != 0
        {
            return Err(ctx.unsupported(&format!("filter {:?} on {channels} channels", filter.shape)));
        }
        (filter.transpose(&[0, 3, 1, 2]), channels / per_group)
    };
    let kernel = [weights.shape[2], weights.shape[3]];
    let pads = pads(ctx, op, padding, kernel, stride, dilation)?;
    let w_tensor = ctx.input_tensor(op, 1)?;
    let w_name = format!("{}_oihw", ctx.tensor(w_tensor).name);
    let w = ctx.g.constant(&w_name, &weights);
    let mut inputs = vec![ctx.input(op, 0)?, w];
    if ctx.has_input(op, 2) {
        inputs.push(ctx.input(op, 2)?);
    }
    let out = ctx.output(op, 0)?;
    let x = ctx.g.op("Transpose", &[&inputs[0]], &format!("{out}_nchw_input"), vec![ints("perm", &TO_NCHW)]);
    inputs[0] = x;
    let attrs = vec![
        ints("kernel_shape", &[kernel[0] as i64, kernel[1] as i64]),
        ints("strides", &[stride[0] as i64, stride[1] as i64]),
        ints("dilations", &[dilation[0] as i64, dilation[1] as i64]),
        pads,
        int("group", group as i64),
    ];
    let y = ctx.g.op(
        "Conv",
        &inputs.iter().map(String::as_str).collect::<Vec<_>>(),
        &format!("{out}_nchw"),
        attrs,
    );
    with_activation(ctx, act, out, |ctx, target| {
        ctx.g.node("Transpose", &[&y], &[target], vec![ints("perm", &TO_NHWC)]);
        Ok(())
    })
}

fn pool(ctx: &mut Ctx<'_>, op: &TfOperator<'_>, onnx_op: &str) -> Result<()> {
    let o = options!(ctx, op, Pool2DOptions).ok_or_else(|| ctx.unsupported("no options"))?;
    let stride = [
        positive(ctx, field!(op, o.stride_h()), "stride")?,
        positive(ctx, field!(op, o.stride_w()), "stride")?,
    ];
    let kernel = [
        positive(ctx, field!(op, o.filter_height()), "window")?,
        positive(ctx, field!(op, o.filter_width()), "window")?,
    ];
    let padding = field!(op, o.padding());
    let act = field!(op, o.fused_activation_function());
    let pads = pads(ctx, op, padding, kernel, stride, [1, 1])?;
    let x = ctx.input(op, 0)?;
    let out = ctx.output(op, 0)?;
    let x = ctx.g.op("Transpose", &[&x], &format!("{out}_nchw_input"), vec![ints("perm", &TO_NCHW)]);
    let mut attrs = vec![
        ints("kernel_shape", &[kernel[0] as i64, kernel[1] as i64]),
        ints("strides", &[stride[0] as i64, stride[1] as i64]),
        pads,
    ];
    if onnx_op == "AveragePool" {
        // TensorFlow averages over the window's valid cells only.
        attrs.push(int("count_include_pad", 0));
    }
    let y = ctx.g.op(onnx_op, &[&x], &format!("{out}_nchw"), attrs);
    with_activation(ctx, act, out, |ctx, target| {
        ctx.g.node("Transpose", &[&y], &[target], vec![ints("perm", &TO_NHWC)]);
        Ok(())
    })
}

/// The shape to reshape into for tensor `i`: TFLite's, with -1 where its
/// signature leaves a dimension open (one at most).
fn reshape_target(ctx: &Ctx<'_>, i: usize) -> Result<Vec<i64>> {
    let t = ctx.tensor(i);
    let dims: Vec<i64> = match &t.signature {
        Some(sig) => sig.iter().zip(&t.shape).map(|(&s, &d)| if s < 0 { -1 } else { d }).collect(),
        None => t.shape.clone(),
    };
    if dims.iter().filter(|&&d| d < 0).count() > 1 {
        return Err(ctx.unsupported(&format!("tensor '{}' has several open dimensions", t.name)));
    }
    Ok(dims)
}

fn reshape_into(ctx: &mut Ctx<'_>, x: &str, dims: &[i64], out: &str) {
    let shape = ctx.g.constant(&format!("{out}_shape"), &Const::i64(vec![dims.len()], dims.to_vec()));
    ctx.g.node("Reshape", &[x, &shape], &[out], vec![]);
}

fn fully_connected(ctx: &mut Ctx<'_>, op: &TfOperator<'_>) -> Result<()> {
    let o = options!(ctx, op, FullyConnectedOptions);
    // keep_num_dims is honoured through the output tensor's own shape, which
    // the result is reshaped to.
    let act = match o {
        Some(o) => {
            if field!(op, o.weights_format())
                != tandem_tflite_schema::tflite::FullyConnectedOptionsWeightsFormat::Default
            {
                return Err(ctx.unsupported("shuffled weights"));
            }
            field!(op, o.fused_activation_function())
        }
        None => Act::None,
    };
    let w_tensor = ctx.input_tensor(op, 1)?;
    let w_shape = ctx.shape(w_tensor);
    if w_shape.len() != 2 {
        return Err(ctx.unsupported(&format!("weights of rank {}", w_shape.len())));
    }
    let k = w_shape[1] as i64;
    let x_tensor = ctx.input_tensor(op, 0)?;
    let mut x = ctx.input(op, 0)?;
    let w = ctx.input(op, 1)?;
    let out_tensor = ctx.output_tensor(op, 0)?;
    let out = ctx.output(op, 0)?;
    let x_shape = ctx.shape(x_tensor);
    if !(x_shape.len() == 2 && x_shape[1] as i64 == k) {
        let flat = ctx.g.fresh(&format!("{out}_flat_input"));
        reshape_into(ctx, &x, &[-1, k], &flat);
        x = flat;
    }
    let mut inputs = vec![x, w];
    if ctx.has_input(op, 2) {
        inputs.push(ctx.input(op, 2)?);
    }
    let out_rank = ctx.shape(out_tensor).len();
    let target = reshape_target(ctx, out_tensor)?;
    with_activation(ctx, act, out, |ctx, target_name| {
        let refs: Vec<&str> = inputs.iter().map(String::as_str).collect();
        if out_rank == 2 {
            ctx.g.node("Gemm", &refs, &[target_name], vec![int("transB", 1)]);
        } else {
            let y = ctx.g.op("Gemm", &refs, &format!("{target_name}_2d"), vec![int("transB", 1)]);
            reshape_into(ctx, &y, &target, target_name);
        }
        Ok(())
    })
}

fn batch_matmul(ctx: &mut Ctx<'_>, op: &TfOperator<'_>) -> Result<()> {
    let (adj_x, adj_y) = match options!(ctx, op, BatchMatMulOptions) {
        Some(o) => (field!(op, o.adj_x()), field!(op, o.adj_y())),
        None => (false, false),
    };
    let mut a = ctx.input(op, 0)?;
    let mut b = ctx.input(op, 1)?;
    let ranks = [ctx.shape(ctx.input_tensor(op, 0)?).len(), ctx.shape(ctx.input_tensor(op, 1)?).len()];
    let out = ctx.output(op, 0)?;
    for (x, adj, rank) in [(&mut a, adj_x, ranks[0]), (&mut b, adj_y, ranks[1])] {
        if adj {
            if rank < 2 {
                return Err(ctx.unsupported("adjoint of a vector"));
            }
            let mut perm: Vec<i64> = (0..rank as i64).collect();
            perm.swap(rank - 2, rank - 1);
            *x = ctx.g.op("Transpose", &[x.as_str()], &format!("{out}_adjoint"), vec![ints("perm", &perm)]);
        }
    }
    ctx.g.node("MatMul", &[&a, &b], &[&out], vec![]);
    Ok(())
}

fn reshape(ctx: &mut Ctx<'_>, op: &TfOperator<'_>) -> Result<()> {
    let out_tensor = ctx.output_tensor(op, 0)?;
    let x = ctx.input(op, 0)?;
    let out = ctx.output(op, 0)?;
    // The shape input when it is a constant, else the output's own shape.
    let dims = if ctx.has_input(op, 1) {
        match ctx.raw_constant(ctx.input_tensor(op, 1)?)?.and_then(|c| c.to_i64()) {
            Some(d) => d,
            None => {
                let shape = ctx.input(op, 1)?;
                let shape = ctx.g.op("Cast", &[&shape], &format!("{out}_shape"), vec![int("to", 7)]);
                ctx.g.node("Reshape", &[&x, &shape], &[&out], vec![]);
                return Ok(());
            }
        }
    } else {
        reshape_target(ctx, out_tensor)?
    };
    reshape_into(ctx, &x, &dims, &out);
    Ok(())
}

/// Normalizes a possibly negative axis of a rank-`rank` tensor.
fn axis(ctx: &Ctx<'_>, a: i64, rank: usize) -> Result<i64> {
    let r = rank as i64;
    let a2 = if a < 0 { a + r } else { a };
    if !(0..r.max(1)).contains(&a2) {
        return Err(ctx.unsupported(&format!("axis {a} of a rank-{rank} tensor")));
    }
    Ok(a2)
}

fn squeeze(ctx: &mut Ctx<'_>, op: &TfOperator<'_>) -> Result<()> {
    let dims: Vec<i64> = match options!(ctx, op, SqueezeOptions) {
        Some(o) => {
            field!(op, o.squeeze_dims()).map(|v| v.iter().map(i64::from).collect()).unwrap_or_default()
        }
        None => vec![],
    };
    let shape = ctx.shape(ctx.input_tensor(op, 0)?);
    if dims.is_empty() && ctx.open_dims(ctx.input_tensor(op, 0)?).contains(&true) {
        return Err(ctx.unsupported("no squeeze_dims on an input with open dimensions"));
    }
    let axes: Vec<i64> = if dims.is_empty() {
        shape.iter().enumerate().filter(|(_, &d)| d == 1).map(|(i, _)| i as i64).collect()
    } else {
        dims.iter().map(|&a| axis(ctx, a, shape.len())).collect::<Result<_>>()?
    };
    let x = ctx.input(op, 0)?;
    let out = ctx.output(op, 0)?;
    let axes = ctx.g.constant(&format!("{out}_axes"), &Const::i64(vec![axes.len()], axes));
    ctx.g.node("Squeeze", &[&x, &axes], &[&out], vec![]);
    Ok(())
}

fn expand_dims(ctx: &mut Ctx<'_>, op: &TfOperator<'_>) -> Result<()> {
    let a = ctx.int_constant(op, 1, "axis")?;
    let [a] = a.as_slice() else { return Err(ctx.unsupported("an axis that is not one value")) };
    let rank = ctx.shape(ctx.input_tensor(op, 0)?).len() + 1;
    let a = axis(ctx, *a, rank)?;
    let x = ctx.input(op, 0)?;
    let out = ctx.output(op, 0)?;
    let axes = ctx.g.constant(&format!("{out}_axes"), &Const::i64(vec![1], vec![a]));
    ctx.g.node("Unsqueeze", &[&x, &axes], &[&out], vec![]);
    Ok(())
}

fn concatenation(ctx: &mut Ctx<'_>, op: &TfOperator<'_>) -> Result<()> {
    let o = options!(ctx, op, ConcatenationOptions).ok_or_else(|| ctx.unsupported("no options"))?;
    let act = field!(op, o.fused_activation_function());
    let rank = ctx.shape(ctx.output_tensor(op, 0)?).len();
    let a = axis(ctx, i64::from(field!(op, o.axis())), rank)?;
    let xs = (0..op.inputs.len()).map(|k| ctx.input(op, k)).collect::<Result<Vec<_>>>()?;
    let out = ctx.output(op, 0)?;
    with_activation(ctx, act, out, |ctx, target| {
        ctx.g.node(
            "Concat",
            &xs.iter().map(String::as_str).collect::<Vec<_>>(),
            &[target],
            vec![int("axis", a)],
        );
        Ok(())
    })
}

fn pack(ctx: &mut Ctx<'_>, op: &TfOperator<'_>) -> Result<()> {
    let o = options!(ctx, op, PackOptions).ok_or_else(|| ctx.unsupported("no options"))?;
    let rank = ctx.shape(ctx.output_tensor(op, 0)?).len();
    let a = axis(ctx, i64::from(field!(op, o.axis())), rank)?;
    let out = ctx.output(op, 0)?;
    let axes = ctx.g.constant(&format!("{out}_axes"), &Const::i64(vec![1], vec![a]));
    let mut parts = Vec::new();
    for k in 0..op.inputs.len() {
        let x = ctx.input(op, k)?;
        parts.push(ctx.g.op("Unsqueeze", &[&x, &axes], &format!("{out}_part"), vec![]));
    }
    ctx.g.node(
        "Concat",
        &parts.iter().map(String::as_str).collect::<Vec<_>>(),
        &[&out],
        vec![int("axis", a)],
    );
    Ok(())
}

fn pad(ctx: &mut Ctx<'_>, op: &TfOperator<'_>) -> Result<()> {
    let paddings = ctx.int_constant(op, 1, "paddings")?;
    let rank = paddings.len() / 2;
    if paddings.len() != rank * 2 || rank != ctx.shape(ctx.input_tensor(op, 0)?).len() {
        return Err(ctx.unsupported(&format!("{} padding values for its input's rank", paddings.len())));
    }
    if let Some(p) = paddings.iter().find(|&&p| p < 0) {
        // ONNX would crop; TFLite rejects it.
        return Err(ctx.unsupported(&format!("a negative padding {p}")));
    }
    // [[b0, e0], [b1, e1], ...] → [b0, b1, ..., e0, e1, ...].
    let onnx_pads: Vec<i64> =
        (0..rank).map(|d| paddings[2 * d]).chain((0..rank).map(|d| paddings[2 * d + 1])).collect();
    let mode = if op.name == "MIRROR_PAD" {
        let o = options!(ctx, op, MirrorPadOptions).ok_or_else(|| ctx.unsupported("no options"))?;
        match field!(op, o.mode()) {
            tandem_tflite_schema::tflite::MirrorPadMode::Reflect => "reflect",
            tandem_tflite_schema::tflite::MirrorPadMode::Symmetric => {
                return Err(ctx.unsupported("SYMMETRIC mirror padding has no ONNX equivalent"))
            }
        }
    } else {
        "constant"
    };
    let x = ctx.input(op, 0)?;
    let value = if op.name == "PADV2" && ctx.has_input(op, 2) { Some(ctx.input(op, 2)?) } else { None };
    let out = ctx.output(op, 0)?;
    let pads = ctx.g.constant(&format!("{out}_pads"), &Const::i64(vec![onnx_pads.len()], onnx_pads));
    let mut inputs = vec![x.as_str(), pads.as_str()];
    if let Some(v) = &value {
        inputs.push(v);
    }
    ctx.g.node("Pad", &inputs, &[&out], vec![string("mode", mode)]);
    Ok(())
}

fn reduce(ctx: &mut Ctx<'_>, op: &TfOperator<'_>, onnx_op: &str) -> Result<()> {
    let keep = match options!(ctx, op, ReducerOptions) {
        Some(o) => field!(op, o.keep_dims()),
        None => false,
    };
    let rank = ctx.shape(ctx.input_tensor(op, 0)?).len();
    let axes = ctx.int_constant(op, 1, "axes")?;
    let mut axes = axes.iter().map(|&a| axis(ctx, a, rank)).collect::<Result<Vec<_>>>()?;
    axes.sort_unstable();
    axes.dedup();
    let x = ctx.input(op, 0)?;
    let out = ctx.output(op, 0)?;
    if axes.is_empty() {
        // TFLite reduces over no axis (the input unchanged); ONNX would
        // reduce over every axis.
        ctx.g.node("Identity", &[&x], &[&out], vec![]);
        return Ok(());
    }
    let keep = int("keepdims", i64::from(keep));
    if onnx_op == "ReduceSum" {
        let a = ctx.g.constant(&format!("{out}_axes"), &Const::i64(vec![axes.len()], axes));
        ctx.g.node(onnx_op, &[&x, &a], &[&out], vec![keep]);
    } else {
        ctx.g.node(onnx_op, &[&x], &[&out], vec![ints("axes", &axes), keep]);
    }
    Ok(())
}

fn resize(ctx: &mut Ctx<'_>, op: &TfOperator<'_>, bilinear: bool) -> Result<()> {
    let (align_corners, half_pixel) = if bilinear {
        match options!(ctx, op, ResizeBilinearOptions) {
            Some(o) => (field!(op, o.align_corners()), field!(op, o.half_pixel_centers())),
            None => (false, false),
        }
    } else {
        match options!(ctx, op, ResizeNearestNeighborOptions) {
            Some(o) => (field!(op, o.align_corners()), field!(op, o.half_pixel_centers())),
            None => (false, false),
        }
    };
    if align_corners && half_pixel {
        return Err(ctx.unsupported("both align_corners and half_pixel_centers"));
    }
    let shape = nhwc_shape(ctx, op, 0)?;
    let open = ctx.open_dims(ctx.input_tensor(op, 0)?);
    let size = ctx.int_constant(op, 1, "size")?;
    let [h, w] = size.as_slice() else { return Err(ctx.unsupported("a size that is not [height, width]")) };
    let (h, w) = (*h, *w);
    if h <= 0 || w <= 0 {
        return Err(ctx.unsupported(&format!("an output size of {h} × {w}")));
    }
    let mut attrs = vec![string("mode", if bilinear { "linear" } else { "nearest" })];
    let coordinates = match (align_corners, half_pixel, bilinear) {
        (true, _, _) => "align_corners",
        (false, true, true) => "half_pixel",
        (false, true, false) => "tf_half_pixel_for_nn",
        (false, false, _) => "asymmetric",
    };
    attrs.push(string("coordinate_transformation_mode", coordinates));
    if !bilinear {
        attrs.push(string("nearest_mode", if align_corners { "round_prefer_ceil" } else { "floor" }));
    }
    let x = ctx.input(op, 0)?;
    let out = ctx.output(op, 0)?;
    let x = ctx.g.op("Transpose", &[&x], &format!("{out}_nchw_input"), vec![ints("perm", &TO_NCHW)]);
    let sizes = if open[0] || open[3] {
        // N or C is open: take them from the input at run time.
        let dims = ctx.g.op("Shape", &[&x], &format!("{out}_input_shape"), vec![]);
        let c = |ctx: &mut Ctx<'_>, what: &str, v: Vec<i64>| {
            ctx.g.constant(&format!("{out}_{what}"), &Const::i64(vec![v.len()], v))
        };
        let (from, to, hw) = (c(ctx, "from", vec![0]), c(ctx, "to", vec![2]), c(ctx, "hw", vec![h, w]));
        let nc = ctx.g.op("Slice", &[&dims, &from, &to], &format!("{out}_nc"), vec![]);
        ctx.g.op("Concat", &[&nc, &hw], &format!("{out}_sizes"), vec![int("axis", 0)])
    } else {
        let sizes = vec![shape[0] as i64, shape[3] as i64, h, w];
        ctx.g.constant(&format!("{out}_sizes"), &Const::i64(vec![4], sizes))
    };
    let y = ctx.g.op("Resize", &[&x, "", "", &sizes], &format!("{out}_nchw"), attrs);
    ctx.g.node("Transpose", &[&y], &[&out], vec![ints("perm", &TO_NHWC)]);
    Ok(())
}

fn depth_space(ctx: &mut Ctx<'_>, op: &TfOperator<'_>) -> Result<()> {
    let (onnx_op, block) = if op.name == "DEPTH_TO_SPACE" {
        let o = options!(ctx, op, DepthToSpaceOptions).ok_or_else(|| ctx.unsupported("no options"))?;
        ("DepthToSpace", field!(op, o.block_size()))
    } else {
        let o = options!(ctx, op, SpaceToDepthOptions).ok_or_else(|| ctx.unsupported("no options"))?;
        ("SpaceToDepth", field!(op, o.block_size()))
    };
    let block = positive(ctx, block, "block size")?;
    nhwc_shape(ctx, op, 0)?;
    let x = ctx.input(op, 0)?;
    let out = ctx.output(op, 0)?;
    let x = ctx.g.op("Transpose", &[&x], &format!("{out}_nchw_input"), vec![ints("perm", &TO_NCHW)]);
    // TensorFlow's channel order is ONNX's DCR.
    let mut attrs = vec![int("blocksize", block as i64)];
    if onnx_op == "DepthToSpace" {
        attrs.push(string("mode", "DCR"));
    }
    let y = ctx.g.op(onnx_op, &[&x], &format!("{out}_nchw"), attrs);
    ctx.g.node("Transpose", &[&y], &[&out], vec![ints("perm", &TO_NHWC)]);
    Ok(())
}

fn strided_slice(ctx: &mut Ctx<'_>, op: &TfOperator<'_>) -> Result<()> {
    let o = options!(ctx, op, StridedSliceOptions).ok_or_else(|| ctx.unsupported("no options"))?;
    let (begin_mask, end_mask) = (field!(op, o.begin_mask()), field!(op, o.end_mask()));
    let shrink = field!(op, o.shrink_axis_mask());
    if field!(op, o.ellipsis_mask()) != 0 || field!(op, o.new_axis_mask()) != 0 || field!(op, o.offset()) {
        return Err(ctx.unsupported("ellipsis, new-axis masks or offset"));
    }
    let begin = ctx.int_constant(op, 1, "begin")?;
    let end = ctx.int_constant(op, 2, "end")?;
    let strides =
        if ctx.has_input(op, 3) { ctx.int_constant(op, 3, "strides")? } else { vec![1; begin.len()] };
    if end.len() != begin.len() || strides.len() != begin.len() || begin.len() > 31 {
        return Err(ctx.unsupported("begin, end and strides of different lengths"));
    }
    let (mut starts, mut ends, mut steps, mut squeeze) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for d in 0..begin.len() {
        let bit = 1i32 << d;
        let s = strides[d];
        if s == 0 {
            return Err(ctx.unsupported("a zero stride"));
        }
        if shrink & bit != 0 {
            // A shrunk axis takes the one element at `begin` (the first under
            // begin_mask). LiteRT reads none for a negative stride there.
            if s < 0 {
                return Err(ctx.unsupported(&format!("shrinking axis {d} with a negative stride")));
            }
            let start = if begin_mask & bit != 0 { 0 } else { begin[d] };
            let stop = match start {
                -1 => i64::MAX,
                _ => start
                    .checked_add(1)
                    .ok_or_else(|| ctx.unsupported(&format!("begin {start} of axis {d} overflows")))?,
            };
            squeeze.push(d as i64);
            starts.push(start);
            ends.push(stop);
            steps.push(1);
            continue;
        }
        let start = match (begin_mask & bit != 0, s > 0) {
            (true, true) => 0,
            (true, false) => i64::MAX,
            (false, _) => begin[d],
        };
        let stop = match (end_mask & bit != 0, s > 0) {
            (true, true) => i64::MAX,
            (true, false) => i64::MIN,
            (false, _) => end[d],
        };
        starts.push(start);
        ends.push(stop);
        steps.push(s);
    }
    let n = begin.len();
    let x = ctx.input(op, 0)?;
    let out = ctx.output(op, 0)?;
    let c = |ctx: &mut Ctx<'_>, what: &str, v: Vec<i64>| {
        ctx.g.constant(&format!("{out}_{what}"), &Const::i64(vec![n], v))
    };
    let starts = c(ctx, "starts", starts);
    let ends = c(ctx, "ends", ends);
    let axes = c(ctx, "axes", (0..n as i64).collect());
    let steps = c(ctx, "steps", steps);
    if squeeze.is_empty() {
        ctx.g.node("Slice", &[&x, &starts, &ends, &axes, &steps], &[&out], vec![]);
    } else {
        let y = ctx.g.op("Slice", &[&x, &starts, &ends, &axes, &steps], &format!("{out}_unsqueezed"), vec![]);
        let sq = ctx.g.constant(&format!("{out}_squeezed_axes"), &Const::i64(vec![squeeze.len()], squeeze));
        ctx.g.node("Squeeze", &[&y, &sq], &[&out], vec![]);
    }
    Ok(())
}

fn slice(ctx: &mut Ctx<'_>, op: &TfOperator<'_>) -> Result<()> {
    let begin = ctx.int_constant(op, 1, "begin")?;
    let size = ctx.int_constant(op, 2, "size")?;
    if size.len() != begin.len() {
        return Err(ctx.unsupported("begin and size of different lengths"));
    }
    // A size of -1 takes the rest of the axis; begin + size must not overflow.
    let ends = begin
        .iter()
        .zip(&size)
        .enumerate()
        .map(|(d, (&b, &s))| match s {
            -1 => Ok(i64::MAX),
            s if s < 0 || b < 0 => Err(ctx.unsupported(&format!("begin {b} and size {s} on axis {d}"))),
            s => b.checked_add(s).ok_or_else(|| ctx.unsupported(&format!("begin {b} + size {s} overflows"))),
        })
        .collect::<Result<Vec<i64>>>()?;
    let n = begin.len();
    let x = ctx.input(op, 0)?;
    let out = ctx.output(op, 0)?;
    let starts = ctx.g.constant(&format!("{out}_starts"), &Const::i64(vec![n], begin));
    let ends = ctx.g.constant(&format!("{out}_ends"), &Const::i64(vec![n], ends));
    ctx.g.node("Slice", &[&x, &starts, &ends], &[&out], vec![]);
    Ok(())
}

fn gather(ctx: &mut Ctx<'_>, op: &TfOperator<'_>) -> Result<()> {
    let o = options!(ctx, op, GatherOptions);
    let (a, batch_dims) = match o {
        Some(o) => (i64::from(field!(op, o.axis())), field!(op, o.batch_dims())),
        None => (0, 0),
    };
    if batch_dims != 0 {
        return Err(ctx.unsupported("batch_dims"));
    }
    let rank = ctx.shape(ctx.input_tensor(op, 0)?).len();
    let a = axis(ctx, a, rank)?;
    let (x, idx) = (ctx.input(op, 0)?, ctx.input(op, 1)?);
    let out = ctx.output(op, 0)?;
    ctx.g.node("Gather", &[&x, &idx], &[&out], vec![int("axis", a)]);
    Ok(())
}
