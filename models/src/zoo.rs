//! Seeded ONNX generators for the models Tandem splits.
//!
//! Each model follows the layer shapes of a published on-wearable model; its
//! weights are drawn deterministically from a seed (He-scaled, so activations
//! neither vanish nor explode). All models take one input named `input` and
//! produce one float32 output named `output` (a softmax over the last axis).

use anyhow::{bail, Context, Result};
use tract_onnx::pb::tensor_proto::DataType;

use crate::builder::{attr_i, attr_ints, value_info, GraphBuilder};

/// The metadata key prefix the runtime's random input generator honours:
/// `tandem.input.<name>.max` is the exclusive upper bound of valid integer values.
pub const INPUT_MAX_KEY_PREFIX: &str = "tandem.input.";

/// Width multipliers (in percent) of the MobileNet v1 variants.
pub const MOBILENET_ALPHAS_PERCENT: [u32; 4] = [25, 50, 75, 100];
/// Input resolutions of the MobileNet v1 variants.
pub const MOBILENET_RESOLUTIONS: [u32; 4] = [128, 160, 192, 224];

/// One generated model of the zoo.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ZooSpec {
    /// MNIST CNN: input 1×1×28×28, output 1×10.
    Mnist,
    /// MobileNet v1 with width multiplier `alpha_percent / 100` and input
    /// 1×3×`resolution`×`resolution`; output 1×1000.
    MobileNetV1 {
        /// Width multiplier in percent (25, 50, 75 or 100 for the standard variants).
        alpha_percent: u32,
        /// Input height and width (128, 160, 192 or 224 for the standard variants).
        resolution: u32,
    },
    /// Human-activity recognition: two stacked LSTMs (hidden 32) over input
    /// 128×1×9 (seq, batch, features); output 1×6.
    LstmHar,
    /// Text classifier: int64 token ids 50×1, embedding 5000×64, GRU hidden 128;
    /// output 1×2.
    TextRnn,
    /// Like [`ZooSpec::TextRnn`] with an LSTM instead of the GRU.
    TextRnnLstm,
    /// WaveNet-like causal dilated convolution stack over input 1×1×1024;
    /// output 1×1024×256.
    WaveNet,
    /// DeepEar-like CNN over log-mel frames: input 1×1×40×100; output 1×10.
    DeepEar,
    /// DeepWear's WaveNet at the paper's size: speech recognition on MFCC
    /// features, 3.8 GFLOPs an inference (its Table 2; the paper gives
    /// only FLOPs and the input's kind). Shaped like the public
    /// speech-to-text WaveNet for TensorFlow: 20 MFCCs × 512 frames in
    /// (1×20×512), a 1×1 convolution to 128 channels, three stacks of
    /// five non-causal gated residual blocks (kernel 7, dilations 1–16),
    /// two 1×1 convolutions to 28 characters' scores per frame; output
    /// 1×512×28. Not in the default zoo (every test walks that): built
    /// by name, `tandem-models gen wavenet_s2t`.
    WaveNetS2t,
    /// A channel-pruned copy of a CNN: every hidden layer keeps
    /// `keep_percent`% of its channels (inputs and outputs are unchanged).
    Pruned {
        /// The CNN pruned.
        base: PrunedBase,
        /// Share of channels kept, in percent (100 builds the unpruned model).
        keep_percent: u32,
    },
}

/// The CNNs that have channel-pruned variants.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PrunedBase {
    /// [`ZooSpec::Mnist`].
    Mnist,
    /// [`ZooSpec::WaveNet`].
    WaveNet,
    /// [`ZooSpec::DeepEar`].
    DeepEar,
}

/// Channel shares (percent) of the pruned variants.
pub const PRUNED_KEEP_PERCENT: [u32; 3] = [75, 50, 25];

/// The channel-pruned variants of MNIST, WaveNet and DeepEar (75/50/25% of channels).
pub fn pruned_variants() -> Vec<ZooSpec> {
    let mut v = vec![];
    for base in [PrunedBase::Mnist, PrunedBase::WaveNet, PrunedBase::DeepEar] {
        for keep_percent in PRUNED_KEEP_PERCENT {
            v.push(ZooSpec::Pruned { base, keep_percent });
        }
    }
    v
}

impl PrunedBase {
    fn unpruned(self) -> ZooSpec {
        match self {
            PrunedBase::Mnist => ZooSpec::Mnist,
            PrunedBase::WaveNet => ZooSpec::WaveNet,
            PrunedBase::DeepEar => ZooSpec::DeepEar,
        }
    }
}

/// `c` scaled to `keep_percent`%, at least 1.
fn keep(c: i64, keep_percent: u32) -> i64 {
    (c * i64::from(keep_percent) / 100).max(1)
}

/// A generated model, encoded.
#[derive(Clone, Debug)]
pub struct ZooModel {
    /// The model's name (see [`ZooSpec::name`]).
    pub name: String,
    /// The encoded ONNX `ModelProto`.
    pub bytes: Vec<u8>,
}

/// The default zoo: mnist, mobilenet_v1 (1.0/224), lstm_har, text_rnn,
/// text_rnn_lstm, wavenet, deepear.
pub fn zoo_specs() -> Vec<ZooSpec> {
    vec![
        ZooSpec::Mnist,
        ZooSpec::MobileNetV1 { alpha_percent: 100, resolution: 224 },
        ZooSpec::LstmHar,
        ZooSpec::TextRnn,
        ZooSpec::TextRnnLstm,
        ZooSpec::WaveNet,
        ZooSpec::DeepEar,
    ]
}

/// The 16 MobileNet v1 variants (alpha 0.25/0.5/0.75/1.0 × resolution
/// 128/160/192/224). The 1.0/224 one is named `mobilenet_v1`, like the default
/// zoo's, and is built identically for the same seed.
pub fn mobilenet_variants() -> Vec<ZooSpec> {
    let mut v = Vec::new();
    for alpha_percent in MOBILENET_ALPHAS_PERCENT {
        for resolution in MOBILENET_RESOLUTIONS {
            v.push(ZooSpec::MobileNetV1 { alpha_percent, resolution });
        }
    }
    v
}

fn alpha_str(alpha_percent: u32) -> String {
    if alpha_percent.is_multiple_of(100) {
        format!("{}.0", alpha_percent / 100)
    } else {
        let s = format!("{}.{:02}", alpha_percent / 100, alpha_percent % 100);
        s.trim_end_matches('0').to_string()
    }
}

impl ZooSpec {
    /// The model's name: `mnist`, `mobilenet_v1` (1.0/224) or
    /// `mobilenet_v1_<alpha>_<res>` (e.g. `mobilenet_v1_0.5_160`), `lstm_har`,
    /// `text_rnn`, `text_rnn_lstm`, `wavenet`, `deepear`.
    pub fn name(&self) -> String {
        match *self {
            ZooSpec::Mnist => "mnist".into(),
            ZooSpec::MobileNetV1 { alpha_percent: 100, resolution: 224 } => "mobilenet_v1".into(),
            ZooSpec::MobileNetV1 { alpha_percent, resolution } => {
                format!("mobilenet_v1_{}_{}", alpha_str(alpha_percent), resolution)
            }
            ZooSpec::LstmHar => "lstm_har".into(),
            ZooSpec::TextRnn => "text_rnn".into(),
            ZooSpec::TextRnnLstm => "text_rnn_lstm".into(),
            ZooSpec::WaveNet => "wavenet".into(),
            ZooSpec::DeepEar => "deepear".into(),
            ZooSpec::WaveNetS2t => "wavenet_s2t".into(),
            ZooSpec::Pruned { base, keep_percent } => format!("{}_p{keep_percent}", base.unpruned().name()),
        }
    }

    /// Parses a name produced by [`ZooSpec::name`]; also accepts
    /// `mobilenet_v1_1.0_224`.
    pub fn from_name(name: &str) -> Option<ZooSpec> {
        let simple = [
            ZooSpec::Mnist,
            ZooSpec::LstmHar,
            ZooSpec::TextRnn,
            ZooSpec::TextRnnLstm,
            ZooSpec::WaveNet,
            ZooSpec::DeepEar,
            ZooSpec::WaveNetS2t,
        ];
        if let Some(s) = simple.into_iter().find(|s| s.name() == name) {
            return Some(s);
        }
        if let Some((base, keep)) = name.rsplit_once("_p") {
            let base = [PrunedBase::Mnist, PrunedBase::WaveNet, PrunedBase::DeepEar]
                .into_iter()
                .find(|b| b.unpruned().name() == base)?;
            let keep_percent: u32 = keep.parse().ok().filter(|k| (1..=100).contains(k))?;
            return Some(ZooSpec::Pruned { base, keep_percent });
        }
        if name == "mobilenet_v1" {
            return Some(ZooSpec::MobileNetV1 { alpha_percent: 100, resolution: 224 });
        }
        let rest = name.strip_prefix("mobilenet_v1_")?;
        let (alpha, res) = rest.split_once('_')?;
        let resolution: u32 = res.parse().ok()?;
        let alpha: f64 = alpha.parse().ok()?;
        let alpha_percent = (alpha * 100.0).round();
        if !(1.0..=400.0).contains(&alpha_percent) || (alpha * 100.0 - alpha_percent).abs() > 1e-6 {
            return None;
        }
        Some(ZooSpec::MobileNetV1 { alpha_percent: alpha_percent as u32, resolution })
    }

    /// The static shape of the input tensor `input`.
    pub fn input_shape(&self) -> Vec<usize> {
        match *self {
            ZooSpec::Mnist => vec![1, 1, 28, 28],
            ZooSpec::MobileNetV1 { resolution, .. } => {
                vec![1, 3, resolution as usize, resolution as usize]
            }
            ZooSpec::LstmHar => vec![128, 1, 9],
            ZooSpec::TextRnn | ZooSpec::TextRnnLstm => vec![50, 1],
            ZooSpec::WaveNet => vec![1, 1, WAVENET_T as usize],
            ZooSpec::DeepEar => vec![1, 1, 40, 100],
            ZooSpec::WaveNetS2t => vec![1, S2T_MFCC as usize, S2T_T as usize],
            ZooSpec::Pruned { base, .. } => base.unpruned().input_shape(),
        }
    }

    /// The static shape of the output tensor `output`.
    pub fn output_shape(&self) -> Vec<usize> {
        match *self {
            ZooSpec::Mnist => vec![1, 10],
            ZooSpec::MobileNetV1 { .. } => vec![1, 1000],
            ZooSpec::LstmHar => vec![1, 6],
            ZooSpec::TextRnn | ZooSpec::TextRnnLstm => vec![1, TEXT_CLASSES as usize],
            ZooSpec::WaveNet => vec![1, WAVENET_T as usize, 256],
            ZooSpec::DeepEar => vec![1, 10],
            ZooSpec::WaveNetS2t => vec![1, S2T_T as usize, S2T_CHARS as usize],
            ZooSpec::Pruned { base, .. } => base.unpruned().output_shape(),
        }
    }

    /// For integer inputs, the exclusive upper bound of valid values (also
    /// written to the model's `tandem.input.input.max` metadata).
    pub fn input_max(&self) -> Option<i64> {
        match self {
            ZooSpec::TextRnn | ZooSpec::TextRnnLstm => Some(TEXT_VOCAB),
            _ => None,
        }
    }

    /// Builds and encodes the model with weights drawn from `seed`.
    pub fn build(&self, seed: u64) -> Result<Vec<u8>> {
        let name = self.name();
        match *self {
            ZooSpec::Mnist => mnist(seed, 100),
            ZooSpec::MobileNetV1 { alpha_percent, resolution } => {
                mobilenet_v1(seed, &name, alpha_percent, resolution)
            }
            ZooSpec::LstmHar => lstm_har(seed),
            ZooSpec::TextRnn => text_rnn(seed, &name, false),
            ZooSpec::TextRnnLstm => text_rnn(seed, &name, true),
            ZooSpec::WaveNet => wavenet(seed, 100),
            ZooSpec::DeepEar => deepear(seed, 100),
            ZooSpec::WaveNetS2t => wavenet_s2t(seed),
            ZooSpec::Pruned { base: PrunedBase::Mnist, keep_percent } => mnist(seed, keep_percent),
            ZooSpec::Pruned { base: PrunedBase::WaveNet, keep_percent } => wavenet(seed, keep_percent),
            ZooSpec::Pruned { base: PrunedBase::DeepEar, keep_percent } => deepear(seed, keep_percent),
        }
        .with_context(|| format!("building zoo model {name}"))
    }

    /// Builds the model into a [`ZooModel`].
    pub fn build_model(&self, seed: u64) -> Result<ZooModel> {
        Ok(ZooModel { name: self.name(), bytes: self.build(seed)? })
    }
}

fn dims(shape: &[usize]) -> Vec<i64> {
    shape.iter().map(|&d| d as i64).collect()
}

fn float_io(spec: ZooSpec) -> (Vec<i64>, Vec<i64>) {
    (dims(&spec.input_shape()), dims(&spec.output_shape()))
}

fn finish_float(b: GraphBuilder, spec: ZooSpec, meta: &[(&str, &str)]) -> Result<Vec<u8>> {
    let (i, o) = float_io(spec);
    b.finish(
        &spec.name(),
        vec![value_info("input", DataType::Float, &i)],
        vec![value_info("output", DataType::Float, &o)],
        meta,
    )
}

/// The spec a generator builds: the base model at 100%, else its pruned variant.
fn pruned_spec(base: PrunedBase, keep_percent: u32) -> ZooSpec {
    if keep_percent == 100 {
        base.unpruned()
    } else {
        ZooSpec::Pruned { base, keep_percent }
    }
}

fn mnist(seed: u64, keep_percent: u32) -> Result<Vec<u8>> {
    let (c1, c2, f1) = (keep(32, keep_percent), keep(64, keep_percent), keep(1024, keep_percent));
    let mut b = GraphBuilder::new(seed);
    let x = b.conv2d("conv1", "input", 1, c1, 5, 1, 2, 1, true)?;
    let x = b.unary("Relu", "conv1_relu", &x)?;
    let x = b.max_pool("pool1", &x, 2, 2)?;
    let x = b.conv2d("conv2", &x, c1, c2, 5, 1, 2, 1, true)?;
    let x = b.unary("Relu", "conv2_relu", &x)?;
    let x = b.max_pool("pool2", &x, 2, 2)?;
    let x = b.flatten("flatten", &x)?;
    let x = b.gemm("fc1", &x, 7 * 7 * c2, f1)?;
    let x = b.unary("Relu", "fc1_relu", &x)?;
    let x = b.gemm("fc2", &x, f1, 10)?;
    b.softmax_output("softmax", &x)?;
    finish_float(b, pruned_spec(PrunedBase::Mnist, keep_percent), &[])
}

fn mobilenet_v1(seed: u64, name: &str, alpha_percent: u32, resolution: u32) -> Result<Vec<u8>> {
    if alpha_percent == 0 || resolution < 32 {
        bail!("unsupported MobileNet v1 alpha {alpha_percent}% / resolution {resolution}");
    }
    let ch = |c: i64| -> i64 { (c * alpha_percent as i64 / 100).max(1) };
    let mut b = GraphBuilder::new(seed);
    let mut c = ch(32);
    let x = b.conv2d("conv1", "input", 3, c, 3, 2, 1, 1, false)?;
    let x = b.batch_norm("conv1_bn", &x, c)?;
    let mut x = b.unary("Relu", "conv1_relu", &x)?;
    // (pointwise output channels, depthwise stride) of the 13 separable blocks.
    let blocks: [(i64, i64); 13] = [
        (64, 1),
        (128, 2),
        (128, 1),
        (256, 2),
        (256, 1),
        (512, 2),
        (512, 1),
        (512, 1),
        (512, 1),
        (512, 1),
        (512, 1),
        (1024, 2),
        (1024, 1),
    ];
    for (i, &(cout, stride)) in blocks.iter().enumerate() {
        let n = i + 1;
        let cout = ch(cout);
        let y = b.conv2d(&format!("block{n}_dw"), &x, c, c, 3, stride, 1, c, false)?;
        let y = b.batch_norm(&format!("block{n}_dw_bn"), &y, c)?;
        let y = b.unary("Relu", &format!("block{n}_dw_relu"), &y)?;
        let y = b.conv2d(&format!("block{n}_pw"), &y, c, cout, 1, 1, 0, 1, false)?;
        let y = b.batch_norm(&format!("block{n}_pw_bn"), &y, cout)?;
        x = b.unary("Relu", &format!("block{n}_pw_relu"), &y)?;
        c = cout;
    }
    let x = b.unary("GlobalAveragePool", "avgpool", &x)?;
    let x = b.flatten("flatten", &x)?;
    let x = b.gemm("fc", &x, c, 1000)?;
    b.softmax_output("softmax", &x)?;
    let spec = ZooSpec::MobileNetV1 { alpha_percent, resolution };
    debug_assert_eq!(spec.name(), name);
    finish_float(b, spec, &[])
}

/// Adds a forward, one-direction ONNX recurrent layer with PyTorch-style
/// uniform weights `±1/sqrt(hidden)`: `"LSTM"` (4 gates) or `"GRU"` (3 gates,
/// `linear_before_reset=1` as PyTorch exports it). Outputs are named by the caller.
pub(crate) fn recurrent(
    b: &mut GraphBuilder,
    op: &str,
    name: &str,
    x: &str,
    input_size: i64,
    hidden: i64,
    outputs: &[&str],
) -> Result<()> {
    let gates = if op == "GRU" { 3 } else { 4 };
    let k = 1.0 / (hidden as f32).sqrt();
    let w = b.uniform(&format!("{name}.W"), &[1, gates * hidden, input_size], -k, k)?;
    let r = b.uniform(&format!("{name}.R"), &[1, gates * hidden, hidden], -k, k)?;
    let bias = b.uniform(&format!("{name}.B"), &[1, 2 * gates * hidden], -k, k)?;
    let mut attrs = vec![attr_i("hidden_size", hidden)];
    if op == "GRU" {
        attrs.push(attr_i("linear_before_reset", 1));
    }
    b.node_multi(op, name, &[x, &w, &r, &bias], outputs, attrs)
}

fn lstm_har(seed: u64) -> Result<Vec<u8>> {
    const H: i64 = 32;
    let mut b = GraphBuilder::new(seed);
    // Y: [seq, num_directions=1, batch, H]
    recurrent(&mut b, "LSTM", "lstm1", "input", 9, H, &["lstm1_Y"])?;
    let y = b.squeeze("lstm1_squeeze", "lstm1_Y", &[1])?;
    recurrent(&mut b, "LSTM", "lstm2", &y, H, H, &["", "lstm2_Y_h"])?;
    // Y_h: [num_directions=1, batch=1, H] -> [1, H]
    let h = b.reshape("lstm2_reshape", "lstm2_Y_h", &[1, H])?;
    let x = b.gemm("fc", &h, H, 6)?;
    b.softmax_output("softmax", &x)?;
    finish_float(b, ZooSpec::LstmHar, &[])
}

const TEXT_VOCAB: i64 = 5000;
const TEXT_EMBED: i64 = 64;
const TEXT_HIDDEN: i64 = 128;
const TEXT_CLASSES: i64 = 2;

fn text_rnn(seed: u64, name: &str, use_lstm: bool) -> Result<Vec<u8>> {
    let spec = if use_lstm { ZooSpec::TextRnnLstm } else { ZooSpec::TextRnn };
    let mut b = GraphBuilder::new(seed);
    let table = b.uniform("embedding.weight", &[TEXT_VOCAB, TEXT_EMBED], -1.0, 1.0)?;
    // [50, 1] ids -> [50, 1, 64]
    let e = b.node("Gather", "embedding", &[&table, "input"], vec![attr_i("axis", 0)])?;
    if use_lstm {
        recurrent(&mut b, "LSTM", "lstm", &e, TEXT_EMBED, TEXT_HIDDEN, &["", "rnn_Y_h"])?;
    } else {
        recurrent(&mut b, "GRU", "gru", &e, TEXT_EMBED, TEXT_HIDDEN, &["", "rnn_Y_h"])?;
    }
    let h = b.reshape("rnn_reshape", "rnn_Y_h", &[1, TEXT_HIDDEN])?;
    let x = b.gemm("fc", &h, TEXT_HIDDEN, TEXT_CLASSES)?;
    b.softmax_output("softmax", &x)?;
    let i = dims(&spec.input_shape());
    let o = dims(&spec.output_shape());
    let max = TEXT_VOCAB.to_string();
    b.finish(
        name,
        vec![value_info("input", DataType::Int64, &i)],
        vec![value_info("output", DataType::Float, &o)],
        &[(&format!("{INPUT_MAX_KEY_PREFIX}input.max"), &max)],
    )
}

const WAVENET_T: i64 = 1024;

fn wavenet(seed: u64, keep_percent: u32) -> Result<Vec<u8>> {
    let rc = keep(32, keep_percent); // residual channels
    let sc = keep(64, keep_percent); // skip channels
    const Q: i64 = 256; // output classes (8-bit mu-law)
    let mut b = GraphBuilder::new(seed);
    let mut x = b.conv1d("stem", "input", 1, rc, 2, 1, [1, 0], 1.0)?;
    let mut skip_sum: Option<String> = None;
    let mut layer = 0;
    for stack in 0..2 {
        for l in 0..8 {
            let d = 1i64 << l;
            let p = format!("s{stack}_l{l}");
            let f = b.conv1d(&format!("{p}_filter"), &x, rc, rc, 2, d, [d, 0], 1.0)?;
            let g = b.conv1d(&format!("{p}_gate"), &x, rc, rc, 2, d, [d, 0], 1.0)?;
            let f = b.unary("Tanh", &format!("{p}_tanh"), &f)?;
            let g = b.unary("Sigmoid", &format!("{p}_sigmoid"), &g)?;
            let z = b.binary("Mul", &format!("{p}_mul"), &f, &g)?;
            let res = b.conv1d(&format!("{p}_res"), &z, rc, rc, 1, 1, [0, 0], 1.0)?;
            let skip = b.conv1d(&format!("{p}_skip"), &z, rc, sc, 1, 1, [0, 0], 1.0)?;
            x = b.binary("Add", &format!("{p}_res_add"), &res, &x)?;
            skip_sum = Some(match skip_sum {
                None => skip,
                Some(s) => b.binary("Add", &format!("{p}_skip_add"), &s, &skip)?,
            });
            layer += 1;
        }
    }
    debug_assert_eq!(layer, 16);
    let s = skip_sum.context("wavenet has no layers")?;
    let y = b.unary("Relu", "post_relu1", &s)?;
    let y = b.conv1d("post_conv1", &y, sc, sc, 1, 1, [0, 0], 1.0)?;
    let y = b.unary("Relu", "post_relu2", &y)?;
    let y = b.conv1d("post_conv2", &y, sc, Q, 1, 1, [0, 0], 1.0)?;
    // [1, 256, T] -> [1, T, 256]
    let y = b.node("Transpose", "transpose", &[&y], vec![attr_ints("perm", &[0, 2, 1])])?;
    b.softmax_output("softmax", &y)?;
    finish_float(b, pruned_spec(PrunedBase::WaveNet, keep_percent), &[])
}

/// [`ZooSpec::WaveNetS2t`]'s frames, MFCCs and output characters.
const S2T_T: i64 = 512;
const S2T_MFCC: i64 = 20;
const S2T_CHARS: i64 = 28;

/// [`ZooSpec::WaveNetS2t`]: about 7.4 MFLOPs a frame (each block 2 × 7 ×
/// 128² multiply-adds for the filter and gate and 128² for its 1×1
/// output), 3.8 GFLOPs over 512 frames.
fn wavenet_s2t(seed: u64) -> Result<Vec<u8>> {
    const C: i64 = 128;
    let mut b = GraphBuilder::new(seed);
    let x = b.conv1d("front", "input", S2T_MFCC, C, 1, 1, [0, 0], 1.0)?;
    let mut x = b.unary("Tanh", "front_tanh", &x)?;
    let mut skip_sum: Option<String> = None;
    for stack in 0..3 {
        for l in 0..5 {
            let d = 1i64 << l;
            let p = format!("s{stack}_l{l}");
            // Kernel 7, "same" padding: 3 dilated steps each side.
            let f = b.conv1d(&format!("{p}_filter"), &x, C, C, 7, d, [3 * d, 3 * d], 1.0)?;
            let g = b.conv1d(&format!("{p}_gate"), &x, C, C, 7, d, [3 * d, 3 * d], 1.0)?;
            let f = b.unary("Tanh", &format!("{p}_tanh"), &f)?;
            let g = b.unary("Sigmoid", &format!("{p}_sigmoid"), &g)?;
            let z = b.binary("Mul", &format!("{p}_mul"), &f, &g)?;
            let out = b.conv1d(&format!("{p}_out"), &z, C, C, 1, 1, [0, 0], 1.0)?;
            let out = b.unary("Tanh", &format!("{p}_out_tanh"), &out)?;
            x = b.binary("Add", &format!("{p}_res_add"), &out, &x)?;
            skip_sum = Some(match skip_sum {
                None => out,
                Some(s) => b.binary("Add", &format!("{p}_skip_add"), &s, &out)?,
            });
        }
    }
    let s = skip_sum.context("wavenet_s2t has no blocks")?;
    let y = b.conv1d("post_conv1", &s, C, C, 1, 1, [0, 0], 1.0)?;
    let y = b.unary("Tanh", "post_tanh", &y)?;
    let y = b.conv1d("post_conv2", &y, C, S2T_CHARS, 1, 1, [0, 0], 1.0)?;
    // [1, 28, T] -> [1, T, 28]
    let y = b.node("Transpose", "transpose", &[&y], vec![attr_ints("perm", &[0, 2, 1])])?;
    b.softmax_output("softmax", &y)?;
    finish_float(b, ZooSpec::WaveNetS2t, &[])
}

fn deepear(seed: u64, keep_percent: u32) -> Result<Vec<u8>> {
    let [c1, c2, c3, f1] = [16, 32, 64, 128].map(|c| keep(c, keep_percent));
    let mut b = GraphBuilder::new(seed);
    let x = b.conv2d("conv1", "input", 1, c1, 3, 1, 1, 1, true)?;
    let x = b.unary("Relu", "conv1_relu", &x)?;
    let x = b.max_pool("pool1", &x, 2, 2)?;
    let x = b.conv2d("conv2", &x, c1, c2, 3, 1, 1, 1, true)?;
    let x = b.unary("Relu", "conv2_relu", &x)?;
    let x = b.max_pool("pool2", &x, 2, 2)?;
    let x = b.conv2d("conv3", &x, c2, c3, 3, 1, 1, 1, true)?;
    let x = b.unary("Relu", "conv3_relu", &x)?;
    let x = b.unary("GlobalAveragePool", "avgpool", &x)?;
    let x = b.flatten("flatten", &x)?;
    let x = b.gemm("fc1", &x, c3, f1)?;
    let x = b.unary("Relu", "fc1_relu", &x)?;
    let x = b.gemm("fc2", &x, f1, 10)?;
    b.softmax_output("softmax", &x)?;
    finish_float(b, pruned_spec(PrunedBase::DeepEar, keep_percent), &[])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        let mut all = zoo_specs();
        all.extend(mobilenet_variants());
        all.extend(pruned_variants());
        for s in all {
            assert_eq!(ZooSpec::from_name(&s.name()), Some(s), "{}", s.name());
        }
        assert_eq!(
            ZooSpec::from_name("mobilenet_v1_1.0_224"),
            Some(ZooSpec::MobileNetV1 { alpha_percent: 100, resolution: 224 })
        );
        assert_eq!(
            mobilenet_variants()
                .iter()
                .map(|s| s.name())
                .filter(|n| n == "mobilenet_v1_0.25_128" || n == "mobilenet_v1_0.75_192")
                .count(),
            2
        );
        assert_eq!(ZooSpec::from_name("nope"), None);
        assert_eq!(ZooSpec::from_name("mnist_p0"), None);
        assert_eq!(ZooSpec::from_name("mnist_p101"), None);
    }

    #[test]
    fn pruning_keeps_the_interface_and_shrinks_the_weights() -> Result<()> {
        for base in [PrunedBase::Mnist, PrunedBase::WaveNet, PrunedBase::DeepEar] {
            let full = base.unpruned().build(1)?;
            let half = ZooSpec::Pruned { base, keep_percent: 50 }.build(1)?;
            assert!(half.len() * 2 < full.len(), "{base:?}: {} vs {} bytes", half.len(), full.len());
        }
        Ok(())
    }

    #[test]
    fn builds_are_deterministic() -> Result<()> {
        let a = ZooSpec::DeepEar.build(7)?;
        assert_eq!(a, ZooSpec::DeepEar.build(7)?);
        assert_ne!(a, ZooSpec::DeepEar.build(8)?);
        Ok(())
    }
}
