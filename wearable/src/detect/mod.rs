//! `tandem-wearable detect`: a YOLOv8 detector on images or Y4M video
//! through a paired, pipelined Session: each frame letterboxed on the
//! watch, the model split with the handheld as the planner (or
//! `--placement`) says, boxes decoded and suppressed on the watch. Prints
//! one JSON line per frame, then the stream summary.

mod y4m;
mod yolo;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use tandem::client::StreamReport;
use tandem::{frame, tensor_f32};

use crate::apps::{load_with_input_shape, AppPairArgs};

/// NudeNet 3.4's classes (its `320n.onnx`), the default `--labels`.
const NUDENET: [&str; 18] = [
    "FEMALE_GENITALIA_COVERED",
    "FACE_FEMALE",
    "BUTTOCKS_EXPOSED",
    "FEMALE_BREAST_EXPOSED",
    "FEMALE_GENITALIA_EXPOSED",
    "MALE_BREAST_EXPOSED",
    "ANUS_EXPOSED",
    "FEET_EXPOSED",
    "BELLY_COVERED",
    "FEET_COVERED",
    "ARMPITS_COVERED",
    "ARMPITS_EXPOSED",
    "FACE_MALE",
    "BELLY_EXPOSED",
    "MALE_GENITALIA_EXPOSED",
    "ANUS_COVERED",
    "FEMALE_BREAST_COVERED",
    "BUTTOCKS_COVERED",
];

/// `detect`'s arguments.
#[derive(clap::Args, Debug)]
pub struct DetectArgs {
    /// A YOLOv8 ONNX export ([1, 3, S, S] in, [1, 4 + classes, anchors] out).
    #[arg(long)]
    pub model: PathBuf,
    /// A directory of PNG / JPEG images, read in name order.
    #[arg(long, conflicts_with = "video", required_unless_present = "video")]
    pub images: Option<PathBuf>,
    /// A Y4M video (4:2:0).
    #[arg(long)]
    pub video: Option<PathBuf>,
    /// The model's square input side.
    #[arg(long, default_value_t = 320)]
    pub size: usize,
    /// Class names, one per line (default: NudeNet's 18).
    #[arg(long)]
    pub labels: Option<PathBuf>,
    /// Score at or above which a box is kept.
    #[arg(long, default_value_t = 0.25)]
    pub conf: f32,
    /// Overlap above which the weaker box of a class is dropped.
    #[arg(long, default_value_t = 0.45)]
    pub iou: f32,
    /// Where the model runs.
    #[command(flatten)]
    pub pair: AppPairArgs,
}

/// An input frame: its name, width, height, and RGB bytes.
type Frame = (String, usize, usize, Vec<u8>);

/// Every input frame.
fn read_frames(args: &DetectArgs) -> Result<Vec<Frame>> {
    if let Some(dir) = &args.images {
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
    } else if let Some(video) = &args.video {
        let bytes = std::fs::read(video).with_context(|| format!("--video {}", video.display()))?;
        let frames = y4m::frames(&bytes).with_context(|| format!("--video {}", video.display()))?;
        Ok(frames.into_iter().enumerate().map(|(i, (w, h, rgb))| (format!("frame {i}"), w, h, rgb)).collect())
    } else {
        bail!("give --images DIR or --video F.y4m")
    }
}

fn labels(path: Option<&Path>) -> Result<Vec<String>> {
    match path {
        Some(p) => Ok(std::fs::read_to_string(p)
            .with_context(|| format!("--labels {}", p.display()))?
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect()),
        None => Ok(NUDENET.iter().map(|s| s.to_string()).collect()),
    }
}

/// `tandem-wearable detect`.
pub fn detect(args: DetectArgs) -> Result<ExitCode> {
    args.pair.check()?;
    if !(16..=4096).contains(&args.size) {
        bail!("--size {}: must be from 16 to 4096", args.size);
    }
    let names = labels(args.labels.as_deref())?;
    let frames = read_frames(&args)?;
    let s = args.size;
    let (model, input) = load_with_input_shape(&args.model, &format!("1,3,{s},{s}"))?;
    let mut session = args.pair.open(model, 13)?;
    let mut boxes = vec![];
    let inputs = frames
        .iter()
        .map(|(_, w, h, rgb)| {
            let (t, lb) = yolo::letterbox(rgb, *w, *h, s);
            boxes.push(lb);
            Ok(frame([(input.as_str(), tensor_f32(&[1, 3, s, s], &t)?)]))
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
        let found = yolo::decode(&values, classes, boxes[i], *w, *h, args.conf, args.iou);
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
