//! Single-layer ONNX models for the layer sweep (the "layer pool" of
//! SPEC 3.2 and 3.3), and the generic sweep's parameter ranges.
//!
//! Every model reads float input `input` (and `input2` for binary ops) and
//! writes `output`. Convolutions and fully connected layers may carry the
//! BatchNormalization and activation that tract fuses into them, so the sweep
//! measures them the way they run inside real models.

use anyhow::{bail, Result};
use rand::seq::SliceRandom;
use rand::Rng;
use tract_onnx::pb::tensor_proto::DataType;

use crate::builder::{attr_f, attr_i, attr_ints, float_output, value_info, GraphBuilder};

/// One single-layer model of the pool.
#[derive(Clone, Debug, PartialEq)]
pub enum LayerSpec {
    /// A convolution over `[1, cin, size(, size)]`, padded to keep the size
    /// (before stride), optionally followed by BatchNormalization and an activation.
    Conv {
        /// 1 for Conv1d over `[1, cin, size]`, 2 for images.
        rank: u8,
        /// Input channels.
        cin: i64,
        /// Output channels.
        cout: i64,
        /// Kernel side.
        kernel: i64,
        /// Stride.
        stride: i64,
        /// Input height and width (or length).
        size: i64,
        /// Groups (`cin` for depthwise).
        groups: i64,
        /// Followed by BatchNormalization.
        bn: bool,
        /// Followed by this activation (`Relu`, `Clip`).
        activation: Option<String>,
    },
    /// `Gemm` over `[rows, cin]`, optionally followed by an activation.
    Fc {
        /// Rows of the input (1 for a vector).
        rows: i64,
        /// Input features.
        cin: i64,
        /// Output features.
        cout: i64,
        /// Followed by this activation.
        activation: Option<String>,
    },
    /// `MaxPool` or `AveragePool` over `shape` (NCHW).
    Pool {
        /// `MaxPool` or `AveragePool`.
        op: String,
        /// The input shape.
        shape: Vec<i64>,
        /// Kernel side.
        kernel: i64,
        /// Stride.
        stride: i64,
    },
    /// `GlobalAveragePool` or `GlobalMaxPool` over `shape` (NCHW).
    GlobalPool {
        /// The op.
        op: String,
        /// The input shape.
        shape: Vec<i64>,
    },
    /// An element-wise activation or Softmax over `shape`.
    Activation {
        /// The ONNX op (`Relu`, `Sigmoid`, `Tanh`, `Softmax`, ...).
        op: String,
        /// The input shape.
        shape: Vec<i64>,
    },
    /// An LSTM or GRU over `[seq, 1, input]`.
    Recurrent {
        /// `LSTM` or `GRU`.
        op: String,
        /// Sequence length.
        seq: i64,
        /// Input features.
        input: i64,
        /// Hidden size.
        hidden: i64,
    },
    /// A binary element-wise op (`Add`, `Mul`) of two inputs of `shape`.
    Binary {
        /// The op.
        op: String,
        /// Shape of both inputs.
        shape: Vec<i64>,
    },
    /// A standalone op with no weights over `shape`: `BatchNormalization`,
    /// `Transpose` (last two axes), `Flatten`, `Identity`.
    Other {
        /// The op.
        op: String,
        /// The input shape.
        shape: Vec<i64>,
    },
}

impl LayerSpec {
    /// The shapes of the model's inputs.
    pub fn input_shapes(&self) -> Vec<Vec<i64>> {
        match self {
            LayerSpec::Conv { rank: 1, cin, size, .. } => vec![vec![1, *cin, *size]],
            LayerSpec::Conv { cin, size, .. } => vec![vec![1, *cin, *size, *size]],
            LayerSpec::Fc { rows, cin, .. } => vec![vec![*rows, *cin]],
            LayerSpec::Pool { shape, .. } | LayerSpec::GlobalPool { shape, .. } => vec![shape.clone()],
            LayerSpec::Recurrent { seq, input, .. } => vec![vec![*seq, 1, *input]],
            LayerSpec::Binary { shape, .. } => vec![shape.clone(), shape.clone()],
            LayerSpec::Activation { shape, .. } | LayerSpec::Other { shape, .. } => vec![shape.clone()],
        }
    }

    /// Multiply-adds of the layer (for budgeting a sweep).
    pub fn macs(&self) -> i64 {
        match self {
            LayerSpec::Conv { rank, cin, cout, kernel, stride, size, groups, .. } => {
                let out = (size / stride).max(1).pow(u32::from(*rank));
                out * cout * (cin / groups) * kernel.pow(u32::from(*rank))
            }
            LayerSpec::Fc { rows, cin, cout, .. } => rows * cin * cout,
            LayerSpec::Pool { shape, kernel, stride, .. } => {
                shape.iter().product::<i64>() / (stride * stride).max(1) * kernel * kernel
            }
            LayerSpec::Recurrent { op, seq, input, hidden } => {
                let gates = if op == "GRU" { 3 } else { 4 };
                seq * gates * hidden * (input + hidden)
            }
            LayerSpec::GlobalPool { shape, .. }
            | LayerSpec::Activation { shape, .. }
            | LayerSpec::Binary { shape, .. }
            | LayerSpec::Other { shape, .. } => shape.iter().product(),
        }
    }

    /// Builds and encodes the single-layer model.
    pub fn build(&self, seed: u64) -> Result<Vec<u8>> {
        let mut b = GraphBuilder::new(seed);
        let mut inputs = vec![value_info("input", DataType::Float, &self.input_shapes()[0])];
        match self {
            LayerSpec::Conv { rank, cin, cout, kernel, stride, size: _, groups, bn, activation } => {
                if *groups < 1 || cin % groups != 0 || cout % groups != 0 {
                    bail!("conv groups {groups} must divide cin {cin} and cout {cout}");
                }
                let r = usize::from(*rank);
                let fan_in = cin / groups * kernel.pow(u32::from(*rank));
                let mut wdims = vec![*cout, cin / groups];
                wdims.extend(std::iter::repeat_n(*kernel, r));
                let w = b.he("layer.weight", &wdims, fan_in)?;
                let pad = (kernel - 1) / 2;
                let pad_end = kernel - 1 - pad;
                let mut pads = vec![pad; r];
                pads.extend(std::iter::repeat_n(pad_end, r));
                let attrs = vec![
                    attr_ints("kernel_shape", &vec![*kernel; r]),
                    attr_ints("strides", &vec![*stride; r]),
                    attr_ints("pads", &pads),
                    attr_ints("dilations", &vec![1; r]),
                    attr_i("group", *groups),
                ];
                let conv_out = if *bn || activation.is_some() { "layer" } else { "output" };
                let mut last = b.node_to("Conv", "layer", &["input", &w], conv_out, attrs)?;
                if *bn {
                    let out = if activation.is_some() { "layer_bn" } else { "output" };
                    last = batch_norm_to(&mut b, "layer_bn", &last, *cout, out)?;
                }
                if let Some(act) = activation {
                    b.node_to(act, "layer_act", &[&last], "output", vec![])?;
                }
            }
            LayerSpec::Fc { cin, cout, activation, .. } => {
                let w = b.he("layer.weight", &[*cout, *cin], *cin)?;
                let bias = b.bias("layer.bias", &[*cout])?;
                let attrs = vec![attr_i("transB", 1)];
                match activation {
                    None => {
                        b.node_to("Gemm", "layer", &["input", &w, &bias], "output", attrs)?;
                    }
                    Some(act) => {
                        let y = b.node("Gemm", "layer", &["input", &w, &bias], attrs)?;
                        b.node_to(act, "layer_act", &[&y], "output", vec![])?;
                    }
                }
            }
            LayerSpec::Pool { op, kernel, stride, .. } => {
                let attrs = vec![
                    attr_ints("kernel_shape", &[*kernel, *kernel]),
                    attr_ints("strides", &[*stride, *stride]),
                ];
                b.node_to(op, "layer", &["input"], "output", attrs)?;
            }
            LayerSpec::GlobalPool { op, .. } => {
                b.node_to(op, "layer", &["input"], "output", vec![])?;
            }
            LayerSpec::Activation { op, .. } => {
                let attrs = if op == "Softmax" { vec![attr_i("axis", -1)] } else { vec![] };
                b.node_to(op, "layer", &["input"], "output", attrs)?;
            }
            LayerSpec::Recurrent { op, input, hidden, .. } => {
                crate::zoo::recurrent(&mut b, op, "layer", "input", *input, *hidden, &["output"])?;
            }
            LayerSpec::Binary { op, shape } => {
                inputs.push(value_info("input2", DataType::Float, shape));
                b.node_to(op, "layer", &["input", "input2"], "output", vec![])?;
            }
            LayerSpec::Other { op, shape } => match op.as_str() {
                "BatchNormalization" => {
                    let c = shape.get(1).copied().unwrap_or(1);
                    batch_norm_to(&mut b, "layer", "input", c, "output")?;
                }
                "Transpose" => {
                    let mut perm: Vec<i64> = (0..shape.len() as i64).collect();
                    let n = perm.len();
                    if n >= 2 {
                        perm.swap(n - 1, n - 2);
                    }
                    b.node_to("Transpose", "layer", &["input"], "output", vec![attr_ints("perm", &perm)])?;
                }
                "Flatten" => {
                    b.node_to("Flatten", "layer", &["input"], "output", vec![attr_i("axis", 1)])?;
                }
                "Identity" => {
                    b.node_to("Identity", "layer", &["input"], "output", vec![])?;
                }
                other => bail!("unsupported sweep op {other}"),
            },
        }
        b.finish("layer", inputs, vec![float_output("output")], &[])
    }
}

fn batch_norm_to(b: &mut GraphBuilder, name: &str, x: &str, c: i64, out: &str) -> Result<String> {
    let scale = b.uniform(&format!("{name}.scale"), &[c], 0.5, 1.5)?;
    let bias = b.uniform(&format!("{name}.bias"), &[c], -0.1, 0.1)?;
    let mean = b.uniform(&format!("{name}.mean"), &[c], -0.1, 0.1)?;
    let var = b.uniform(&format!("{name}.var"), &[c], 0.5, 1.5)?;
    b.node_to(
        "BatchNormalization",
        name,
        &[x, &scale, &bias, &mean, &var],
        out,
        vec![attr_f("epsilon", 1e-5)],
    )
}

/// The empty model every sweep measures first: its time is the fixed cost of
/// one plan run.
pub fn overhead_probe() -> LayerSpec {
    LayerSpec::Other { op: "Identity".into(), shape: vec![1, 4] }
}

/// Most multiply-adds of one generic sample, so one measurement stays in the
/// tens of milliseconds on a slow core.
pub const MAX_SAMPLE_MACS: i64 = 120_000_000;

fn pick<T: Clone>(rng: &mut impl Rng, v: &[T]) -> T {
    // `v` is a non-empty literal everywhere below.
    v.choose(rng).cloned().unwrap_or_else(|| v[0].clone())
}

/// One random layer of the generic sweep (SPEC 3.2 ranges): conv (kernel
/// 1/3/5/7/11, stride, channels, size, depthwise and grouped, Conv1d), fc,
/// max/avg/global pooling, activations, LSTM/GRU, binary ops and data
/// movement. Samples above [`MAX_SAMPLE_MACS`] are shrunk.
pub fn sample_generic(rng: &mut impl Rng) -> LayerSpec {
    let class = rng.gen_range(0..100);
    let mut spec = if class < 40 {
        sample_conv(rng)
    } else if class < 55 {
        let rows = if rng.gen_bool(0.7) { 1 } else { pick(rng, &[4, 16, 64]) };
        LayerSpec::Fc {
            rows,
            cin: log_uniform(rng, 16, 4096),
            cout: log_uniform(rng, 2, 4096),
            activation: if rng.gen_bool(0.5) { Some("Relu".into()) } else { None },
        }
    } else if class < 65 {
        let size = log_uniform(rng, 4, 112);
        let shape = vec![1, log_uniform(rng, 8, 512), size, size];
        if rng.gen_bool(0.3) {
            LayerSpec::GlobalPool {
                op: pick(rng, &["GlobalAveragePool".into(), "GlobalMaxPool".into()]),
                shape,
            }
        } else {
            let kernel = pick(rng, &[2, 3]).min(size);
            LayerSpec::Pool {
                op: pick(rng, &["MaxPool".into(), "AveragePool".into()]),
                shape,
                kernel,
                stride: pick(rng, &[1, 2]).min(kernel),
            }
        }
    } else if class < 78 {
        let op: String = pick(
            rng,
            &["Relu", "Sigmoid", "Tanh", "Softmax", "LeakyRelu", "Clip", "HardSigmoid", "Elu"]
                .map(String::from),
        );
        LayerSpec::Activation { op, shape: random_shape(rng) }
    } else if class < 86 {
        LayerSpec::Recurrent {
            op: pick(rng, &["LSTM".into(), "GRU".into()]),
            seq: log_uniform(rng, 4, 128),
            input: log_uniform(rng, 4, 256),
            hidden: log_uniform(rng, 8, 256),
        }
    } else if class < 93 {
        LayerSpec::Binary { op: pick(rng, &["Add".into(), "Mul".into()]), shape: random_shape(rng) }
    } else {
        let op: String = pick(rng, &["BatchNormalization", "Transpose", "Flatten"].map(String::from));
        LayerSpec::Other { op, shape: random_shape(rng) }
    };
    for _ in 0..64 {
        if spec.macs() <= MAX_SAMPLE_MACS {
            break;
        }
        spec = shrink(spec);
    }
    spec
}

fn log_uniform(rng: &mut impl Rng, lo: i64, hi: i64) -> i64 {
    let (l, h) = ((lo as f64).ln(), (hi as f64).ln());
    (rng.gen_range(l..=h).exp().round() as i64).clamp(lo, hi)
}

fn random_shape(rng: &mut impl Rng) -> Vec<i64> {
    let c = log_uniform(rng, 4, 512);
    let s = log_uniform(rng, 1, 112);
    vec![1, c, s, s]
}

fn sample_conv(rng: &mut impl Rng) -> LayerSpec {
    let rank = if rng.gen_bool(0.2) { 1 } else { 2 };
    let kernel = if rank == 1 { pick(rng, &[1, 2, 3, 5]) } else { pick(rng, &[1, 1, 3, 3, 3, 5, 7, 11]) };
    let stride = if rng.gen_bool(0.7) { 1 } else { 2 };
    let size = if rank == 1 { log_uniform(rng, 64, 2048) } else { log_uniform(rng, 7, 112).max(kernel) };
    let cin = log_uniform(rng, 1, 512);
    let grouping = rng.gen_range(0..10);
    let (cin, cout, groups) = if grouping < 3 && rank == 2 {
        // Depthwise.
        let c = cin.max(8);
        (c, c, c)
    } else if grouping < 4 && cin >= 8 {
        let groups = pick(rng, &[2, 4, 8]);
        let cin = (cin / groups).max(1) * groups;
        let cout = (log_uniform(rng, 8, 512) / groups).max(1) * groups;
        (cin, cout, groups)
    } else {
        (cin, log_uniform(rng, 4, 512), 1)
    };
    let activation = match rng.gen_range(0..3) {
        0 => None,
        _ => Some("Relu".to_string()),
    };
    LayerSpec::Conv {
        rank,
        cin,
        cout,
        kernel,
        stride,
        size,
        groups,
        bn: rank == 2 && rng.gen_bool(0.4),
        activation,
    }
}

/// Halves the biggest dimension of a too-expensive sample.
fn shrink(spec: LayerSpec) -> LayerSpec {
    match spec {
        LayerSpec::Conv { rank, cin, cout, kernel, stride, size, groups, bn, activation } => {
            if size > kernel.max(8) {
                LayerSpec::Conv { rank, cin, cout, kernel, stride, size: size / 2, groups, bn, activation }
            } else if groups == 1 && cout > 4 {
                LayerSpec::Conv { rank, cin, cout: cout / 2, kernel, stride, size, groups, bn, activation }
            } else if groups == cin && cin > 1 {
                let c = cin / 2;
                LayerSpec::Conv { rank, cin: c, cout: c, kernel, stride, size, groups: c, bn, activation }
            } else if cout > groups {
                let cout = ((cout / 2) / groups).max(1) * groups;
                LayerSpec::Conv { rank, cin, cout, kernel, stride, size, groups, bn, activation }
            } else {
                LayerSpec::Conv {
                    rank,
                    cin: groups,
                    cout: groups,
                    kernel,
                    stride,
                    size,
                    groups,
                    bn,
                    activation,
                }
            }
        }
        LayerSpec::Fc { rows, cin, cout, activation } => {
            LayerSpec::Fc { rows, cin: cin / 2, cout, activation }
        }
        LayerSpec::Recurrent { op, seq, input, hidden } => {
            LayerSpec::Recurrent { op, seq: seq / 2, input, hidden }
        }
        other => other,
    }
}
