//! `tandem-wearable face`: MediaPipe's face pipeline on the watch or
//! glasses, each model split with the handheld through a pipelined
//! Session. The short-range detector (128 × 128) finds faces in every
//! frame; its boxes are decoded and blended on the watch ([`anchors`],
//! [`detections`]); each face's region, square around the box and turned
//! level by the eyes, is cropped ([`roi`]) and fed to the face landmark
//! model (192 × 192: 468 landmarks and a face-presence score), whose points
//! are projected back into the frame. Prints one JSON line per frame, then
//! the two streams' summary.
//!
//! Every frame runs the detector (MediaPipe's static-image mode): no face
//! is tracked from the previous frame's landmarks. The detector's stream
//! runs first over all frames, then the landmark model's over all faces.

mod anchors;
mod detections;
mod roi;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use tandem::card::{InputCard, InputKind, ModelCard, Post};
use tandem::client::{FrameReport, ModelFile, Session, StreamReport};
use tandem::{frame, tensor_f32, InputShapes};

use crate::apps::{first_input_name, AppPairArgs};
use crate::detect::{read_frames, Frame};
use anchors::{ssd_anchors, AnchorOptions};
use detections::{decode, weighted_nms, DecodeOptions, Detection};
use roi::{warp, Border, Roi};

/// The face region's side over the detected box's long side (MediaPipe's
/// face_detection_front_detection_to_roi: `scale_x`, `scale_y`).
const ROI_SCALE: f64 = 1.5;
/// Landmarks the landmark model gives, x, y and z each.
const LANDMARKS: usize = 468;

/// `face`'s arguments.
#[derive(clap::Args, Debug)]
pub struct FaceArgs {
    /// MediaPipe's face_detection_short_range (`.tflite`, or its ONNX translation).
    #[arg(long)]
    pub detector: PathBuf,
    /// MediaPipe's face_landmark (`.tflite`, or its ONNX translation).
    #[arg(long)]
    pub landmarks: PathBuf,
    /// The detector's model card. Default: the `.toml` beside the model,
    /// else models/cards/face_detection_short_range.toml.
    #[arg(long)]
    pub detector_card: Option<PathBuf>,
    /// The landmark model's card. Default: beside it, else models/cards/face_landmark.toml.
    #[arg(long)]
    pub landmark_card: Option<PathBuf>,
    /// A directory of PNG / JPEG images, read in name order.
    #[arg(long, conflicts_with = "video", required_unless_present = "video")]
    pub images: Option<PathBuf>,
    /// A Y4M video (4:2:0).
    #[arg(long)]
    pub video: Option<PathBuf>,
    /// Score at or above which a face is kept (default: the card's threshold, else 0.5).
    #[arg(long)]
    pub min_score: Option<f32>,
    /// Overlap above which faces are blended into the best one (default: the card's iou, else 0.3).
    #[arg(long)]
    pub iou: Option<f32>,
    /// At most this many faces per frame, best first, get landmarks.
    #[arg(long, default_value_t = 4)]
    pub max_faces: usize,
    /// Where the models run (both alike).
    #[command(flatten)]
    pub pair: AppPairArgs,
}

/// One image model as its card feeds it.
struct Fed {
    model: ModelFile,
    /// The model's input name.
    input: String,
    /// Its shape: `[1, side, side, 3]`.
    shape: Vec<usize>,
    /// The input's side, in pixels.
    side: usize,
    /// The card, its input renamed to the model's.
    card: ModelCard,
}

/// The card: `path`, else the `.toml` beside the model, else the shipped `name`.
fn card(path: Option<&Path>, model: &Path, name: &str) -> Result<ModelCard> {
    let beside = model.with_extension("toml");
    let card = match path {
        Some(p) => ModelCard::load(p)?,
        None if beside.exists() => ModelCard::load(&beside)?,
        None => ModelCard::load(tandem_models::real::cards_dir().join(format!("{name}.toml")))?,
    };
    if card.output.post != Post::None {
        bail!(
            "{}: face decodes the outputs itself; its card says post = {:?}",
            model.display(),
            card.output.post
        );
    }
    Ok(card)
}

/// The model loaded as its card feeds its image input: NHWC, square, RGB.
fn load(path: &Path, card: ModelCard) -> Result<Fed> {
    let input = first_input_name(path)?;
    let fed_input =
        match card.input(&input).or_else(|| card.inputs.iter().find(|i| i.kind == InputKind::Image)) {
            Some(i) => InputCard { name: input.clone(), ..i.clone() },
            None => bail!("{}: the card has no image input", path.display()),
        };
    if fed_input.layout.as_deref() != Some("NHWC") {
        bail!("{}: face feeds NHWC images; the card says {:?}", path.display(), fed_input.layout);
    }
    let shape = match &fed_input.shape {
        Some(s) if s.len() == 4 && s[0] == 1 && s[1] == s[2] && s[3] == 3 => s.clone(),
        other => bail!(
            "{}: face feeds square RGB images [1, side, side, 3]; the card says {other:?}",
            path.display()
        ),
    };
    let mut shapes = InputShapes::none();
    shapes.set(&input, shape.clone());
    let model = ModelFile::load(path, &shapes).with_context(|| path.display().to_string())?;
    let card = ModelCard { inputs: vec![fed_input], ..card };
    card.check(&model.model).with_context(|| path.display().to_string())?;
    Ok(Fed { model, input, side: shape[1], shape, card })
}

/// RGB bytes (`side × side`) as the model's input tensor, normalized by its card.
fn input_frame(fed: &Fed, rgb: &[u8]) -> tandem::Result<tandem::Values> {
    let card = &fed.card.inputs[0];
    let values: Vec<f32> =
        rgb.iter().enumerate().map(|(i, &p)| card.normalize(f32::from(p), i % 3)).collect();
    Ok(frame([(fed.input.as_str(), tensor_f32(&fed.shape, &values)?)]))
}

/// A face found in a frame: its detection (frame pixels) and region.
struct Face {
    detection: Detection,
    roi: Roi,
}

/// A float output by name, else the `index`th.
fn output(f: &tandem::client::Frame, name: &str, index: usize) -> Result<Vec<f32>> {
    let names = f.outputs.names();
    let chosen = if names.contains(&name) {
        name.to_string()
    } else {
        names.get(index).map(|n| n.to_string()).with_context(|| format!("no output {name} (#{index})"))?
    };
    Ok(f.outputs.f32(&chosen)?.1)
}

fn round(v: f32, places: i32) -> f64 {
    let k = 10f64.powi(places);
    (f64::from(v) * k).round() / k
}

/// A stream's summary with its session's status.
fn summary(
    reports: &[FrameReport],
    wall: std::time::Duration,
    session: Option<&Session>,
) -> Result<serde_json::Value> {
    let mut line = serde_json::to_value(StreamReport::from_frames(reports, wall))?;
    if let (Some(obj), Some(s)) = (line.as_object_mut(), session) {
        obj.insert("status".into(), s.status().to_string().into());
    }
    Ok(line)
}

/// `tandem-wearable face`.
pub fn face(args: FaceArgs) -> Result<ExitCode> {
    args.pair.check()?;
    let det_card = card(args.detector_card.as_deref(), &args.detector, "face_detection_short_range")?;
    let lm_card = card(args.landmark_card.as_deref(), &args.landmarks, "face_landmark")?;
    let min_score = args.min_score.or(det_card.output.threshold).unwrap_or(0.5);
    let iou = args.iou.or(det_card.output.iou).unwrap_or(0.3);
    if !(0.0..=1.0).contains(&min_score) || !(0.0..=1.0).contains(&iou) {
        bail!("--min-score {min_score} and --iou {iou}: must be in [0, 1]");
    }
    let presence_min = lm_card.output.threshold.unwrap_or(0.5);
    let frames: Vec<Frame> = read_frames(args.images.as_deref(), args.video.as_deref())?;
    let detector = load(&args.detector, det_card)?;
    let landmarker = load(&args.landmarks, lm_card)?;
    if detector.side != 128 {
        bail!(
            "{}: the short-range detector's anchors are laid out for 128 × 128, not {}",
            args.detector.display(),
            detector.side
        );
    }
    let anchors = ssd_anchors(&AnchorOptions::face_short_range());
    let options = DecodeOptions { min_score, ..DecodeOptions::face_short_range() };

    // The detector over every frame, letterboxed.
    let mut session = args.pair.open(detector.model.clone(), 31, Some(&detector.card))?;
    let started = Instant::now();
    let inputs = frames
        .iter()
        .map(|(_, w, h, rgb)| {
            input_frame(&detector, &warp(rgb, *w, *h, &Roi::letterbox(*w, *h), 128, 128, Border::Zero))
        })
        .collect::<tandem::Result<Vec<_>>>()?;
    let mut failed = 0;
    let mut found: Vec<Option<(FrameReport, Vec<Face>)>> = vec![];
    for (i, result) in session.stream(inputs)?.into_iter().enumerate() {
        let (name, w, h, _) = &frames[i];
        let decoded = result.map_err(anyhow::Error::from).and_then(|f| {
            let regressors = output(&f, "regressors", 0)?;
            let scores = output(&f, "classificators", 1)?;
            let relative = weighted_nms(decode(&regressors, &scores, &anchors, &options)?, iou);
            let letterbox = Roi::letterbox(*w, *h);
            let faces = relative
                .iter()
                .take(args.max_faces)
                .map(|d| {
                    let detection = letterbox.project_detection(d);
                    Face { roi: Roi::around_face(&detection, ROI_SCALE), detection }
                })
                .collect();
            Ok((f.report, faces))
        });
        match decoded {
            Ok(x) => found.push(Some(x)),
            Err(e) => {
                failed += 1;
                eprintln!("error: {name}: {e:#}");
                found.push(None);
            }
        }
    }
    let det_reports: Vec<FrameReport> = found.iter().flatten().map(|(r, _)| r.clone()).collect();
    let det_summary = summary(&det_reports, started.elapsed(), Some(&session))?;
    drop(session);

    // The landmark model over every face's crop.
    let crops = found
        .iter()
        .enumerate()
        .flat_map(|(i, x)| x.iter().flat_map(move |(_, faces)| faces.iter().map(move |f| (i, f))))
        .map(|(i, face)| {
            let (_, w, h, rgb) = &frames[i];
            let side = landmarker.side;
            input_frame(&landmarker, &warp(rgb, *w, *h, &face.roi, side, side, Border::Replicate))
        })
        .collect::<tandem::Result<Vec<_>>>()?;
    let face_count = crops.len();
    let mut started = Instant::now();
    let (mut marks, mut lm_reports, mut lm_session) = (vec![], vec![], None);
    if !crops.is_empty() {
        let mut s = args.pair.open(landmarker.model.clone(), 37, Some(&landmarker.card))?;
        started = Instant::now();
        for result in s.stream(crops)? {
            marks.push(result.map_err(anyhow::Error::from).and_then(|f| {
                let points = output(&f, "conv2d_21", 0)?;
                let presence = output(&f, "conv2d_31", 1)?;
                if points.len() != LANDMARKS * 3 || presence.len() != 1 {
                    bail!(
                        "the landmark model gave {} values and {} scores, not {} and 1",
                        points.len(),
                        presence.len(),
                        LANDMARKS * 3
                    );
                }
                lm_reports.push(f.report.clone());
                Ok((points, detections::clipped_sigmoid(presence[0], 100.0), f.report))
            }));
        }
        lm_session = Some(s);
    }
    let lm_summary = summary(&lm_reports, started.elapsed(), lm_session.as_ref())?;

    let mut marks = marks.into_iter();
    for (i, entry) in found.iter().enumerate() {
        let Some((report, faces)) = entry else { continue };
        let mut json_faces = vec![];
        let mut face_reports = vec![];
        for face in faces {
            let d = &face.detection;
            let xywh =
                [d.bbox[0], d.bbox[1], d.bbox[2] - d.bbox[0], d.bbox[3] - d.bbox[1]].map(|v| round(v, 2));
            let keypoints: Vec<[f64; 2]> = d.keypoints.iter().map(|k| k.map(|v| round(v, 2))).collect();
            let center = [face.roi.cx, face.roi.cy].map(|v| round(v as f32, 2));
            let mut line = serde_json::json!({
                "score": d.score, "box": xywh, "keypoints": keypoints,
                "roi": {"center": center, "side": round(face.roi.width as f32, 2),
                        "rotation": round(face.roi.rotation as f32, 4)},
            });
            match marks.next() {
                Some(Ok((points, presence, r))) => {
                    line["presence"] = presence.into();
                    line["landmarks"] = if presence >= presence_min {
                        let projected = face.roi.project_landmarks(&points, landmarker.side);
                        projected.iter().map(|p| p.map(|v| round(v, 3))).collect::<Vec<_>>().into()
                    } else {
                        serde_json::Value::Null
                    };
                    face_reports.push(serde_json::to_value(r)?);
                }
                Some(Err(e)) => {
                    failed += 1;
                    eprintln!("error: {}: a face's landmarks: {e:#}", frames[i].0);
                    line["error"] = format!("{e:#}").into();
                }
                None => bail!("fewer landmark results than faces"),
            }
            json_faces.push(line);
        }
        println!(
            "{}",
            serde_json::json!({"frame": i, "source": frames[i].0, "faces": json_faces,
                               "detector_report": report, "landmark_reports": face_reports})
        );
    }
    println!(
        "{}",
        serde_json::json!({"frames": frames.len(), "faces": face_count, "frame_errors": failed,
                           "detector": det_summary, "landmarks": lm_summary})
    );
    Ok(if failed == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

#[cfg(test)]
mod tests {
    //! The decoding checked against MediaPipe's, as scripts/face_reference.py
    //! reimplements it in numpy around LiteRT (that reference matched the
    //! mediapipe 0.10.21 wheel's own FaceDetection and FaceMesh on the
    //! astronaut to 5e-5 px on the box and 0.02 px on the landmarks): fed
    //! LiteRT's raw tensors, the Rust decoder finds the same face.

    use std::sync::OnceLock;

    use super::*;

    /// The reference's two files (models/cache/face/), made once: LiteRT
    /// on the astronaut, with the `.tflite` files models/fetch_tflite.py
    /// extracts from the mediapipe wheel.
    pub(crate) fn reference() -> &'static (serde_json::Value, serde_json::Value) {
        static REFERENCE: OnceLock<(serde_json::Value, serde_json::Value)> = OnceLock::new();
        REFERENCE.get_or_init(|| {
            let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
            tandem_models::real::ensure_real_models().expect("the astronaut photo (models/fetch_real.py)");
            tandem_models::tflite::ensure_tflite_models()
                .expect("the TFLite models (models/fetch_tflite.py)");
            let cache = tandem_models::cache_dir();
            let out = cache.join("face");
            if !out.join("reference.json").exists() {
                let o = std::process::Command::new("python3")
                    .arg(root.join("scripts/face_reference.py"))
                    .args([
                        "--models".as_ref(),
                        cache.join("tflite").as_os_str(),
                        "--out".as_ref(),
                        out.as_os_str(),
                    ])
                    .output()
                    .expect("python3 runs");
                assert!(
                    o.status.success(),
                    "scripts/face_reference.py (needs ai-edge-litert, numpy, Pillow): {}",
                    String::from_utf8_lossy(&o.stderr)
                );
            }
            let read = |name: &str| -> serde_json::Value {
                let text = std::fs::read_to_string(out.join(name)).expect("the reference");
                serde_json::from_str(&text).expect("JSON")
            };
            (read("reference.json"), read("raw.json"))
        })
    }

    fn floats(v: &serde_json::Value) -> Vec<f32> {
        v.as_array().expect("an array").iter().map(|x| x.as_f64().expect("a number") as f32).collect()
    }

    fn bytes(v: &serde_json::Value) -> Vec<u8> {
        v.as_array().expect("an array").iter().map(|x| x.as_u64().expect("a byte") as u8).collect()
    }

    /// Bytes that differ, and by how much at most.
    fn byte_diff(a: &[u8], b: &[u8]) -> (usize, u8) {
        assert_eq!(a.len(), b.len());
        let d = a.iter().zip(b).map(|(x, y)| x.abs_diff(*y));
        (d.clone().filter(|&x| x > 0).count(), d.max().unwrap_or(0))
    }

    fn astronaut() -> (usize, usize, Vec<u8>) {
        let set = tandem_models::real::ensure_real_models().expect("real models");
        let img = image::open(set.dir.join("photos/astronaut.png")).expect("png").to_rgb8();
        (img.width() as usize, img.height() as usize, img.into_raw())
    }

    #[test]
    fn litert_tensors_decode_to_mediapipes_face() {
        let (want, raw) = reference();
        let (w, h, rgb) = astronaut();
        assert_eq!(
            (w as u64, h as u64),
            (raw["width"].as_u64().expect("w"), raw["height"].as_u64().expect("h"))
        );

        // The detector's input: the same bytes as the reference's warp
        // (bilinear ties may round apart by one).
        let input = warp(&rgb, w, h, &Roi::letterbox(w, h), 128, 128, Border::Zero);
        let (differ, most) = byte_diff(&input, &bytes(&raw["detector_input"]));
        assert!(most <= 1 && differ <= input.len() / 1000, "{differ} bytes differ, by up to {most}");

        // LiteRT's raw outputs, decoded and blended.
        let anchors = ssd_anchors(&AnchorOptions::face_short_range());
        let found = decode(
            &floats(&raw["regressors"]),
            &floats(&raw["classificators"]),
            &anchors,
            &DecodeOptions::face_short_range(),
        )
        .expect("decodes");
        assert!(found.len() > 1, "several anchors see the face: {}", found.len());
        let faces = weighted_nms(found, 0.3);
        let want_faces = want["faces"].as_array().expect("faces");
        assert_eq!(faces.len(), want_faces.len(), "{faces:?}");
        assert_eq!(faces.len(), 1, "one face in the astronaut");
        let face = Roi::letterbox(w, h).project_detection(&faces[0]);
        let reference = &want_faces[0];
        assert!((f64::from(face.score) - reference["score"].as_f64().expect("score")).abs() < 1e-6);
        let b = face.bbox;
        let got_box = [b[0], b[1], b[2] - b[0], b[3] - b[1]];
        for (g, r) in got_box.iter().zip(floats(&reference["box"])) {
            assert!((g - r).abs() < 1e-3, "box {got_box:?} vs {}", reference["box"]);
        }
        let want_kp: Vec<f32> =
            reference["keypoints"].as_array().expect("kp").iter().flat_map(floats).collect();
        let got_kp: Vec<f32> = face.keypoints.iter().flatten().copied().collect();
        assert_eq!(got_kp.len(), 12);
        for (g, r) in got_kp.iter().zip(&want_kp) {
            assert!((g - r).abs() < 1e-3, "keypoints {got_kp:?} vs {want_kp:?}");
        }

        // Its region and crop, then LiteRT's landmarks projected back.
        let roi = Roi::around_face(&face, ROI_SCALE);
        let r = &reference["roi"];
        let number = |v: &serde_json::Value| v.as_f64().expect("a number") as f32;
        let want_roi =
            [number(&r["center"][0]), number(&r["center"][1]), number(&r["side"]), number(&r["rotation"])];
        let got_roi = [roi.cx, roi.cy, roi.width, roi.rotation].map(|v| v as f32);
        for (g, r) in got_roi.iter().zip(&want_roi) {
            assert!((g - r).abs() < 1e-3, "roi {got_roi:?} vs {want_roi:?}");
        }
        let crop = warp(&rgb, w, h, &roi, 192, 192, Border::Replicate);
        let (differ, most) = byte_diff(&crop, &bytes(&raw["faces"][0]["crop"]));
        assert!(most <= 1 && differ <= crop.len() / 100, "crop: {differ} bytes differ, by up to {most}");
        let marks = roi.project_landmarks(&floats(&raw["faces"][0]["landmarks"]), 192);
        let want_marks: Vec<Vec<f32>> =
            reference["landmarks"].as_array().expect("landmarks").iter().map(floats).collect();
        assert_eq!((marks.len(), want_marks.len()), (LANDMARKS, LANDMARKS));
        let worst = marks
            .iter()
            .zip(&want_marks)
            .flat_map(|(g, r)| g.iter().zip(r).map(|(a, b)| (a - b).abs()))
            .fold(0.0f32, f32::max);
        assert!(worst < 0.01, "landmarks differ by up to {worst} px");
    }
}
