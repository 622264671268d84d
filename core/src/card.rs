//! Model cards: how to feed a model and read its outputs (layout, channel
//! order, normalization, window and hop, the sensor's type, labels,
//! post-processing), from a small TOML file kept beside the model.
//!
//! A card is parsed and checked against the model it describes; every
//! field is documented in `docs/models.md` (Model cards). Parsing is pure:
//! [`ModelCard::parse`] takes the text, [`ModelCard::load`] reads a file.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::{Error, Model, Result};
pub use tandem_types::SensorType;

/// A model card.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelCard {
    /// What the model is and where it comes from.
    pub model: About,
    /// How each input is fed (`[[input]]` tables), by input name.
    #[serde(default, rename = "input")]
    pub inputs: Vec<InputCard>,
    /// How the first output is read.
    #[serde(default)]
    pub output: OutputCard,
}

/// What the model is.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct About {
    /// Short name.
    pub name: String,
    /// What it does (free text: `object detection`, `speech embedding`, ...).
    #[serde(default)]
    pub task: Option<String>,
    /// Where the file comes from (package and path, with its version).
    #[serde(default)]
    pub source: Option<String>,
    /// The licence of the weights.
    #[serde(default)]
    pub licence: Option<String>,
}

/// What kind of data an input carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InputKind {
    /// A picture: resized, channel-ordered, normalized.
    Image,
    /// Audio samples at `rate_hz`, read in windows.
    Audio,
    /// Frames of features another model made (mel frames, embeddings), in windows.
    Frames,
    /// A body-sensor signal (accelerometer, PPG, EEG) at `rate_hz`, in windows.
    Signal,
    /// Anything else: fed as is.
    Tensor,
}

/// Colour channel order of an image input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChannelOrder {
    /// Red, green, blue.
    Rgb,
    /// Blue, green, red (OpenCV and Caffe exports).
    Bgr,
    /// One grey channel.
    Gray,
}

/// How a picture is fitted into the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Resize {
    /// Scaled to fit, aspect kept, centred on `pad` (YOLO).
    Letterbox,
    /// Scaled to the input's size, aspect not kept.
    Stretch,
}

/// How one input is fed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputCard {
    /// The model's input name.
    pub name: String,
    /// What it carries.
    pub kind: InputKind,
    /// One letter per axis: `N` batch, `C` channels, `H` height, `W` width,
    /// `T` time (samples or frames), `F` features (e.g. `NCHW`, `NHWC`, `NT`, `NTF`).
    #[serde(default)]
    pub layout: Option<String>,
    /// The shape the model is fed at (binds symbolic dimensions).
    #[serde(default)]
    pub shape: Option<Vec<usize>>,
    /// The sensor's own type (u8 pixels, i16 PCM).
    #[serde(default)]
    pub sensor_type: Option<SensorType>,
    /// Image: channel order.
    #[serde(default)]
    pub channel_order: Option<ChannelOrder>,
    /// Image: how a picture is fitted.
    #[serde(default)]
    pub resize: Option<Resize>,
    /// Image: the padding value, in sensor units (YOLO's grey is 114).
    #[serde(default)]
    pub pad: Option<f32>,
    /// Each sensor value is multiplied by this first (1/255 for [0, 1] pixels).
    #[serde(default)]
    pub scale: Option<f32>,
    /// Then this is subtracted, per channel (one value for all, or one per channel).
    #[serde(default)]
    pub mean: Option<Vec<f32>>,
    /// Then divided by this, per channel (non-zero).
    #[serde(default)]
    pub std: Option<Vec<f32>>,
    /// Audio or signal: samples per second; frames: frames per second.
    #[serde(default)]
    pub rate_hz: Option<f64>,
    /// Audio, frames or signal: samples (or frames) per window along `T`.
    #[serde(default)]
    pub window: Option<usize>,
    /// Samples (or frames) between the starts of consecutive windows.
    #[serde(default)]
    pub hop: Option<usize>,
}

/// What is done with the output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Post {
    /// Nothing: the values are the answer.
    None,
    /// YOLOv8 boxes: `[1, 4 + classes, anchors]`, decoded, then NMS at `iou`.
    Yolov8,
    /// One score per class (probabilities or logits), best first.
    Scores,
    /// Features for another model, each value `value * scale + offset`.
    Features,
}

/// How the output is read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputCard {
    /// The post-processing.
    #[serde(default = "no_post")]
    pub post: Post,
    /// Class names, in class order.
    #[serde(default)]
    pub labels: Vec<String>,
    /// Score at or above which something is reported.
    #[serde(default)]
    pub threshold: Option<f32>,
    /// Overlap above which the weaker of two boxes is dropped.
    #[serde(default)]
    pub iou: Option<f32>,
    /// `Features`: each value times this...
    #[serde(default)]
    pub scale: Option<f32>,
    /// ...plus this.
    #[serde(default)]
    pub offset: Option<f32>,
    /// How far lossy link encodings may move the outputs: `argmax` (each
    /// row's best class unchanged: classifiers, per-step CTC logits) or
    /// `rel:X` (every output within relative error X of the unsplit run:
    /// embeddings, scores, raw boxes). `tandem-bench compare` runs its
    /// lossy cells under it (`--accuracy`).
    #[serde(default)]
    pub budget: Option<String>,
}

fn no_post() -> Post {
    Post::None
}

impl Default for OutputCard {
    fn default() -> Self {
        OutputCard {
            post: Post::None,
            labels: vec![],
            threshold: None,
            iou: None,
            scale: None,
            offset: None,
            budget: None,
        }
    }
}

fn bad(reason: String) -> Error {
    Error::Card { path: None, reason }
}

impl ModelCard {
    /// Parses a card and checks it on its own (see [`ModelCard::check`] for
    /// the checks against a model).
    pub fn parse(text: &str) -> Result<ModelCard> {
        let card: ModelCard = toml::from_str(text).map_err(|e| bad(e.message().to_string()))?;
        card.validate()?;
        Ok(card)
    }

    /// Reads and parses a card file.
    pub fn load(path: impl AsRef<Path>) -> Result<ModelCard> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::Card { path: Some(path.to_path_buf()), reason: e.to_string() })?;
        Self::parse(&text).map_err(|e| match e {
            Error::Card { reason, .. } => Error::Card { path: Some(path.to_path_buf()), reason },
            other => other,
        })
    }

    /// The shapes the card feeds its inputs at, as overrides to load the
    /// model with (they bind the model's symbolic dimensions).
    pub fn input_shapes(&self) -> crate::InputShapes {
        let mut shapes = crate::InputShapes::none();
        for input in &self.inputs {
            if let Some(s) = &input.shape {
                shapes.set(&input.name, s.clone());
            }
        }
        shapes
    }

    /// The rate new inputs arrive at (Hz), where an input's card gives
    /// its sample (or frame) rate and its hop: `rate_hz / hop` (an 80 ms
    /// chunk of 16 kHz audio: 12.5 Hz).
    pub fn source_hz(&self) -> Option<f64> {
        self.inputs.iter().find_map(|i| match (i.rate_hz, i.hop) {
            (Some(rate), Some(hop)) if hop > 0 => Some(rate / hop as f64),
            _ => None,
        })
    }

    /// The card of input `name`.
    pub fn input(&self, name: &str) -> Option<&InputCard> {
        self.inputs.iter().find(|i| i.name == name)
    }

    fn validate(&self) -> Result<()> {
        for (i, input) in self.inputs.iter().enumerate() {
            if self.inputs[..i].iter().any(|o| o.name == input.name) {
                return Err(bad(format!("input '{}' has two cards", input.name)));
            }
            input.validate()?;
        }
        let out = &self.output;
        for (what, v) in [("threshold", out.threshold), ("iou", out.iou)] {
            if let Some(v) = v {
                if !(0.0..=1.0).contains(&v) {
                    return Err(bad(format!("output {what} {v}: must be in [0, 1]")));
                }
            }
        }
        if let Some(b) = &out.budget {
            let rel = b.strip_prefix("rel:").map(str::parse::<f64>);
            if b != "argmax" && !matches!(rel, Some(Ok(x)) if x > 0.0 && x.is_finite()) {
                return Err(bad(format!("output budget '{b}': argmax or rel:X (X above 0)")));
            }
        }
        for (what, v) in [("scale", out.scale), ("offset", out.offset)] {
            if v.is_some_and(|v| !v.is_finite()) {
                return Err(bad(format!("output {what}: must be finite")));
            }
        }
        Ok(())
    }

    /// Checks the card against the model it describes: every input card
    /// names an input of the model, its shape (if given) is the model's,
    /// its layout has one letter per axis, and per-channel values have one
    /// entry per channel.
    pub fn check(&self, model: &Model) -> Result<()> {
        let g = model.graph();
        let names: Vec<String> = g.inputs().iter().map(|&t| g.tensor(t).name.clone()).collect();
        for input in &self.inputs {
            let Some(&t) = g.inputs().iter().find(|&&t| g.tensor(t).name == input.name) else {
                return Err(bad(format!(
                    "input '{}' is not an input of the model (its inputs: {})",
                    input.name,
                    names.join(", ")
                )));
            };
            let shape = &g.tensor(t).shape;
            if let Some(s) = &input.shape {
                if s != shape {
                    return Err(bad(format!(
                        "input '{}': the card says shape {s:?}, the model (as loaded) has {shape:?}",
                        input.name
                    )));
                }
            }
            if let Some(layout) = &input.layout {
                if layout.len() != shape.len() {
                    return Err(bad(format!(
                        "input '{}': layout {layout} has {} axes, the input {} ({shape:?})",
                        input.name,
                        layout.len(),
                        shape.len()
                    )));
                }
                if let Some(c) = input.channels(shape) {
                    for (what, v) in [("mean", &input.mean), ("std", &input.std)] {
                        if let Some(v) = v {
                            if v.len() != 1 && v.len() != c {
                                return Err(bad(format!(
                                    "input '{}': {what} has {} values for {c} channels",
                                    input.name,
                                    v.len()
                                )));
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

impl InputCard {
    fn validate(&self) -> Result<()> {
        let name = &self.name;
        if let Some(layout) = &self.layout {
            let ok = !layout.is_empty()
                && layout.chars().all(|c| "NCHWTF".contains(c))
                && layout.chars().enumerate().all(|(i, c)| !layout[..i].contains(c));
            if !ok {
                return Err(bad(format!(
                    "input '{name}': layout '{layout}' must use each of N, C, H, W, T, F at most once"
                )));
            }
        }
        if let Some(std) = &self.std {
            if std.iter().any(|&s| s == 0.0 || !s.is_finite()) {
                return Err(bad(format!("input '{name}': std values must be finite and non-zero")));
            }
        }
        let finite = |v: &Option<Vec<f32>>| v.as_ref().is_none_or(|v| v.iter().all(|x| x.is_finite()));
        if !finite(&self.mean) || self.scale.is_some_and(|s| !s.is_finite() || s == 0.0) {
            return Err(bad(format!("input '{name}': mean and scale must be finite (scale non-zero)")));
        }
        if self.rate_hz.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
            return Err(bad(format!("input '{name}': rate_hz must be positive")));
        }
        if self.window == Some(0) || self.hop == Some(0) {
            return Err(bad(format!("input '{name}': window and hop must be at least 1")));
        }
        if let (Some(w), Some(h)) = (self.window, self.hop) {
            if h > w {
                return Err(bad(format!("input '{name}': a hop of {h} skips data between windows of {w}")));
            }
        }
        if self.kind == InputKind::Image && self.resize == Some(Resize::Letterbox) && self.pad.is_none() {
            return Err(bad(format!("input '{name}': a letterboxed image needs a pad value")));
        }
        Ok(())
    }

    /// The number of channels, by the layout's `C` axis (1 without one).
    pub fn channels(&self, shape: &[usize]) -> Option<usize> {
        let layout = self.layout.as_ref()?;
        Some(layout.find('C').and_then(|i| shape.get(i).copied()).unwrap_or(1))
    }

    /// The size of axis `axis` (a layout letter) of `shape`, if the layout has it.
    pub fn axis(&self, shape: &[usize], axis: char) -> Option<usize> {
        self.layout.as_ref()?.find(axis).and_then(|i| shape.get(i).copied())
    }

    /// A sensor value normalized for channel `c`: `(v · scale − mean[c]) / std[c]`.
    pub fn normalize(&self, v: f32, c: usize) -> f32 {
        let (mean, std) = (self.mean.as_deref().unwrap_or(&[]), self.std.as_deref().unwrap_or(&[]));
        crate::sensor::widen_value(v, c, self.scale.unwrap_or(1.0), mean, std)
    }

    /// How the link may carry this input in the sensor's own type (u8, i16)
    /// for the handheld to widen: with a layout and a narrow sensor type.
    pub fn widening(&self) -> Option<crate::sensor::Widening> {
        let ty = self.sensor_type.filter(|t| *t != SensorType::F32)?;
        let list = |v: &Option<Vec<f32>>| v.clone().unwrap_or_default();
        Some(crate::sensor::Widening {
            ty,
            layout: self.layout.clone()?,
            scale: self.scale.unwrap_or(1.0),
            mean: list(&self.mean),
            std: list(&self.std),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::InputShapes;

    const IMAGE: &str = r#"
        [model]
        name = "m"
        [[input]]
        name = "x"
        kind = "image"
        layout = "NCHW"
        shape = [1, 3, 8, 8]
        resize = "letterbox"
        pad = 114.0
        scale = 0.5
        mean = [1.0, 2.0, 3.0]
        std = [2.0]
        [output]
        post = "yolov8"
        labels = ["a"]
    "#;

    #[test]
    fn a_card_parses_and_normalizes_per_channel() {
        let card = ModelCard::parse(IMAGE).expect("valid");
        let x = card.input("x").expect("x");
        assert_eq!(
            (x.kind, x.resize, card.output.post),
            (InputKind::Image, Some(Resize::Letterbox), Post::Yolov8)
        );
        assert_eq!(x.channels(&[1, 3, 8, 8]), Some(3));
        assert_eq!(x.axis(&[1, 3, 8, 6], 'W'), Some(6));
        // (10 · 0.5 − mean[c]) / 2
        assert_eq!([x.normalize(10.0, 0), x.normalize(10.0, 2)], [2.0, 1.0]);
    }

    #[test]
    fn bad_cards_say_what_is_wrong() {
        let cases = [
            (IMAGE.replace("scale = 0.5", "scale = 0.5\ncolour = 1"), "unknown field"),
            (IMAGE.replace("\"NCHW\"", "\"NCHX\""), "layout 'NCHX'"),
            (IMAGE.replace("\"NCHW\"", "\"NCCW\""), "at most once"),
            (IMAGE.replace("std = [2.0]", "std = [0.0]"), "non-zero"),
            (IMAGE.replace("pad = 114.0", ""), "needs a pad"),
            (IMAGE.replace("kind = \"image\"", "kind = \"image\"\nwindow = 4\nhop = 5"), "skips data"),
            (IMAGE.replace("kind = \"image\"", "kind = \"smell\""), "unknown variant"),
            (IMAGE.replace("[output]", "[output]\nthreshold = 2.0"), "threshold 2"),
        ];
        for (text, says) in cases {
            let e = ModelCard::parse(&text).expect_err(says).to_string();
            assert!(e.starts_with("model card") && e.contains(says), "{says}: {e}");
        }
    }

    #[test]
    fn a_card_must_fit_its_model() {
        let model =
            Model::from_bytes(&tandem_models::tiny::tiny_mlp_onnx(), &InputShapes::none()).expect("mlp");
        let card = |input: &str| ModelCard::parse(&format!("[model]\nname = \"m\"\n[[input]]\n{input}"));
        let ok = card("name = \"x\"\nkind = \"tensor\"\nlayout = \"NF\"\nshape = [1, 4]").expect("valid");
        ok.check(&model).expect("fits");
        for (input, says) in [
            ("name = \"image\"\nkind = \"tensor\"", "not an input of the model (its inputs: x)"),
            ("name = \"x\"\nkind = \"tensor\"\nshape = [1, 5]", "the card says shape [1, 5]"),
            ("name = \"x\"\nkind = \"tensor\"\nlayout = \"NCF\"", "has 3 axes"),
            (
                "name = \"x\"\nkind = \"tensor\"\nlayout = \"NC\"\nmean = [1.0, 2.0]",
                "2 values for 4 channels",
            ),
        ] {
            let e = card(input).expect("parses").check(&model).expect_err(says).to_string();
            assert!(e.contains(says), "{says}: {e}");
        }
        let e = ModelCard::load("/nonexistent/card.toml").expect_err("missing").to_string();
        assert!(e.contains("/nonexistent/card.toml"), "{e}");
    }
}
