//! `tandem-wearable detect`: a YOLOv8 detector on images or Y4M video
//! through a paired, pipelined Session: each frame fitted on the watch as
//! the model's card says (letterbox, channel order, layout, normalization), the model split with the handheld as the planner (or
//! `--placement`) says, boxes decoded and suppressed on the watch. Prints
//! one JSON line per frame, then the stream summary.

mod y4m;
mod yolo;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use tandem::card::{ChannelOrder, InputCard, InputKind, ModelCard, Post};
use tandem::client::{ModelFile, StreamReport};
use tandem::{frame, tensor_f32, InputShapes};

use crate::apps::{first_input_name, AppPairArgs};
use yolo::ImageSpec;

/// YOLOv8's own feeding, for a model without a card: letterboxed on grey
/// 114, RGB, [0, 1], NCHW, 320 × 320.
const YOLOV8_CARD: &str = r#"
[model]
name = "yolov8"
task = "object detection"
[[input]]
name = "images"
kind = "image"
layout = "NCHW"
shape = [1, 3, 320, 320]
channel_order = "rgb"
resize = "letterbox"
pad = 114.0
scale = 0.00392156862745098
[output]
post = "yolov8"
threshold = 0.25
iou = 0.45
"#;

/// `detect`'s arguments.
#[derive(clap::Args, Debug)]
pub struct DetectArgs {
    /// A YOLOv8 ONNX export ([1, 3, H, W] or [1, H, W, 3] in, [1, 4 + classes, anchors] out).
    #[arg(long)]
    pub model: PathBuf,
    /// Its model card (TOML: input layout, size, channel order, letterbox or
    /// stretch, normalization, labels, thresholds). Default: the `.toml`
    /// beside the model, else YOLOv8's own feeding (letterbox, RGB, [0, 1], 320).
    #[arg(long)]
    pub card: Option<PathBuf>,
    /// A directory of PNG / JPEG images, read in name order.
    #[arg(long, conflicts_with = "video", required_unless_present = "video")]
    pub images: Option<PathBuf>,
    /// A Y4M video (4:2:0).
    #[arg(long)]
    pub video: Option<PathBuf>,
    /// A square input side, instead of the card's input size.
    #[arg(long)]
    pub size: Option<usize>,
    /// Class names, one per line, instead of the card's labels.
    #[arg(long)]
    pub labels: Option<PathBuf>,
    /// Score at or above which a box is kept (default: the card's threshold, else 0.25).
    #[arg(long)]
    pub conf: Option<f32>,
    /// Overlap above which the weaker box of a class is dropped (default: the card's, else 0.45).
    #[arg(long)]
    pub iou: Option<f32>,
    /// Where the model runs.
    #[command(flatten)]
    pub pair: AppPairArgs,
}

/// An input frame: its name, width, height, and RGB bytes.
pub(crate) type Frame = (String, usize, usize, Vec<u8>);

/// Every input frame: the PNG and JPEG files of `images` in name order, or
/// the frames of the Y4M file `video` (the apps' `--images` / `--video`).
pub(crate) fn read_frames(images: Option<&Path>, video: Option<&Path>) -> Result<Vec<Frame>> {
    if let Some(dir) = images {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
            .with_context(|| format!("--images {}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.extension().is_some_and(|e| {
                    ["png", "jpg", "jpeg"].contains(&e.to_string_lossy().to_lowercase().as_str())
                })
            })
            .collect();
        paths.sort();
        if paths.is_empty() {
            bail!("--images {}: no PNG or JPEG files", dir.display());
        }
        paths
            .iter()
            .map(|p| {
                let img = image::open(p).with_context(|| p.display().to_string())?.to_rgb8();
                let (w, h) = (img.width() as usize, img.height() as usize);
                let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                Ok((name, w, h, img.into_raw()))
            })
            .collect()
    } else if let Some(video) = video {
        let bytes = std::fs::read(video).with_context(|| format!("--video {}", video.display()))?;
        let frames = y4m::frames(&bytes).with_context(|| format!("--video {}", video.display()))?;
        Ok(frames.into_iter().enumerate().map(|(i, (w, h, rgb))| (format!("frame {i}"), w, h, rgb)).collect())
    } else {
        bail!("give --images DIR or --video F.y4m")
    }
}

fn labels(path: Option<&Path>, card: &ModelCard) -> Result<Vec<String>> {
    match path {
        Some(p) => Ok(std::fs::read_to_string(p)
            .with_context(|| format!("--labels {}", p.display()))?
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect()),
        None => Ok(card.output.labels.clone()),
    }
}

/// The card: `--card`, else the `.toml` beside the model, else YOLOv8's feeding.
fn card(args: &DetectArgs) -> Result<ModelCard> {
    let beside = args.model.with_extension("toml");
    let card = match &args.card {
        Some(path) => ModelCard::load(path)?,
        None if beside.exists() => ModelCard::load(&beside)?,
        None => ModelCard::parse(YOLOV8_CARD)?,
    };
    if card.output.post != Post::Yolov8 {
        bail!("detect decodes YOLOv8 boxes; the card says post = {:?}", card.output.post);
    }
    Ok(card)
}

/// The model loaded as the card feeds its first image input (at `--size`
/// if given), and how frames are fitted into it.
fn load(args: &DetectArgs, card: &ModelCard) -> Result<(ModelFile, String, Vec<usize>, ImageSpec)> {
    let first = first_input_name(&args.model)?;
    let mut input = match card.input(&first) {
        Some(i) => i.clone(),
        // A card written for another export of the model: its image input, renamed.
        None => match card.inputs.iter().find(|i| i.kind == InputKind::Image) {
            Some(i) => InputCard { name: first.clone(), ..i.clone() },
            None => bail!("the card has no image input"),
        },
    };
    let layout = input.layout.clone().unwrap_or_else(|| "NCHW".into());
    let channels_last = match layout.as_str() {
        "NCHW" => false,
        "NHWC" => true,
        other => bail!("detect feeds NCHW or NHWC images, not {other}"),
    };
    let (mut h, mut w) = match &input.shape {
        Some(s) if s.len() == 4 => (input.axis(s, 'H').unwrap_or(320), input.axis(s, 'W').unwrap_or(320)),
        _ => (320, 320),
    };
    if let Some(side) = args.size {
        if !(16..=4096).contains(&side) {
            bail!("--size {side}: must be from 16 to 4096");
        }
        (h, w) = (side, side);
    }
    let c = if input.channel_order == Some(ChannelOrder::Gray) { 1 } else { 3 };
    let shape = if channels_last { vec![1, h, w, c] } else { vec![1, c, h, w] };
    input.shape = Some(shape.clone());
    let mut shapes = InputShapes::none();
    shapes.set(&first, shape.clone());
    let model = ModelFile::load(&args.model, &shapes).with_context(|| args.model.display().to_string())?;
    let fed = ModelCard { inputs: vec![input.clone()], ..card.clone() };
    fed.check(&model.model)?;
    Ok((model, first, shape, ImageSpec { width: w, height: h, channels_last, card: input }))
}

/// `tandem-wearable detect`.
pub fn detect(args: DetectArgs) -> Result<ExitCode> {
    args.pair.check()?;
    let card = card(&args)?;
    let names = labels(args.labels.as_deref(), &card)?;
    let conf = args.conf.or(card.output.threshold).unwrap_or(0.25);
    let iou = args.iou.or(card.output.iou).unwrap_or(0.45);
    if !(0.0..=1.0).contains(&conf) || !(0.0..=1.0).contains(&iou) {
        bail!("--conf {conf} and --iou {iou}: must be in [0, 1]");
    }
    let frames = read_frames(args.images.as_deref(), args.video.as_deref())?;
    let (model, input, shape, spec) = load(&args, &card)?;
    let fed =
        ModelCard { inputs: vec![InputCard { name: input.clone(), ..spec.card.clone() }], ..card.clone() };
    let mut session = args.pair.open(model, 13, Some(&fed))?;
    let mut boxes = vec![];
    let inputs = frames
        .iter()
        .map(|(_, w, h, rgb)| {
            let (t, lb) = yolo::fit(rgb, *w, *h, &spec);
            boxes.push(lb);
            Ok(frame([(input.as_str(), tensor_f32(&shape, &t)?)]))
        })
        .collect::<Result<Vec<_>, tandem::Error>>()?;
    let started = Instant::now();
    let mut reports = vec![];
    let mut failed = 0;
    for (i, result) in session.stream(inputs)?.into_iter().enumerate() {
        let (name, w, h, _) = &frames[i];
        let f = match result {
            Ok(f) => f,
            Err(e) => {
                failed += 1;
                eprintln!("error: {name}: {e}");
                continue;
            }
        };
        let out_name = f.outputs.names().first().map(|n| n.to_string()).context("a model without outputs")?;
        let (shape, values) = f.outputs.f32(&out_name)?;
        let classes = shape.get(1).map_or(0, |r| r.saturating_sub(4));
        let found = yolo::decode(&values, classes, boxes[i], *w, *h, conf, iou);
        let json: Vec<serde_json::Value> = found
            .iter()
            .map(|d| {
                let label = names.get(d.class).cloned().unwrap_or_else(|| format!("class {}", d.class));
                let b = d.box_xywh.map(|v| (f64::from(v) * 10.0).round() / 10.0);
                serde_json::json!({"label": label, "score": d.score, "box": b})
            })
            .collect();
        println!(
            "{}",
            serde_json::json!({"frame": i, "source": name, "boxes": json, "offloaded": f.report.offloaded,
                               "local_reason": f.report.local_reason})
        );
        reports.push(f.report);
    }
    let summary = StreamReport::from_frames(&reports, started.elapsed());
    let mut line = serde_json::to_value(&summary)?;
    if let Some(obj) = line.as_object_mut() {
        obj.insert("status".into(), session.status().to_string().into());
        obj.insert("frame_errors".into(), failed.into());
    }
    println!("{line}");
    Ok(if failed == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
