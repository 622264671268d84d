//! `tandem-wearable detect` with NudeNet's YOLOv8n: on a real photo (the
//! astronaut from the scikit-image wheel) it finds the face, and on that
//! photo and on a Y4M video generated here the boxes are the same when the
//! model runs on a real `tandem-handheld serve` process as on the watch.

use std::path::{Path, PathBuf};

use crate::common::{stderr, stdout, wearable};
use tandem_models::real::ensure_real_models;
use tandem_tools::testing::HandheldProcess;

fn handheld_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tandem-wearable")).with_file_name("tandem-handheld")
}

/// A 4:2:0 Y4M of `frames` shifted crops of an RGB image (BT.601 limited range).
pub(crate) fn write_y4m(path: &Path, rgb: &image::RgbImage, frames: usize) {
    let (w, h) = (rgb.width() as usize - 8 * frames, rgb.height() as usize - 8 * frames);
    let (w, h) = (w & !1, h & !1);
    let mut out = format!("YUV4MPEG2 W{w} H{h} F10:1 Ip A1:1 C420jpeg\n").into_bytes();
    for f in 0..frames {
        let px = |x: usize, y: usize| {
            let p = rgb.get_pixel((x + 8 * f) as u32, (y + 8 * f) as u32).0.map(f32::from);
            let luma = 16.0 + 0.257 * p[0] + 0.504 * p[1] + 0.098 * p[2];
            let u = 128.0 - 0.148 * p[0] - 0.291 * p[1] + 0.439 * p[2];
            let v = 128.0 + 0.439 * p[0] - 0.368 * p[1] - 0.071 * p[2];
            [luma, u, v].map(|c| c.round().clamp(0.0, 255.0) as u8)
        };
        out.extend_from_slice(b"FRAME\n");
        out.extend((0..h).flat_map(|y| (0..w).map(move |x| (x, y))).map(|(x, y)| px(x, y)[0]));
        for c in 1..3 {
            out.extend(
                (0..h / 2).flat_map(|y| (0..w / 2).map(move |x| (x, y))).map(|(x, y)| px(2 * x, 2 * y)[c]),
            );
        }
    }
    std::fs::write(path, out).expect("write y4m");
}

fn card(name: &str) -> String {
    tandem_models::real::cards_dir().join(format!("{name}.toml")).to_string_lossy().into_owned()
}

fn detect(source: &[&str], extra: &[&str]) -> Vec<serde_json::Value> {
    let set = ensure_real_models().expect("real models");
    let model = set.path("nudenet_320n.onnx").to_string_lossy().into_owned();
    let card = card("nudenet_320n");
    let mut args = vec!["detect", "--model", &model, "--card", &card];
    args.extend(source);
    args.extend(extra);
    let o = wearable(&args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    stdout(&o).lines().map(|l| serde_json::from_str(l).expect("JSON lines")).collect()
}

/// (label, box) of each frame's detections, and the scores.
fn boxes(lines: &[serde_json::Value]) -> (Vec<Vec<(String, String)>>, Vec<f64>) {
    let frames = &lines[..lines.len() - 1];
    let labelled = frames
        .iter()
        .map(|f| {
            f["boxes"]
                .as_array()
                .expect("boxes")
                .iter()
                .map(|b| (b["label"].as_str().expect("label").to_string(), b["box"].to_string()))
                .collect()
        })
        .collect();
    let scores = frames
        .iter()
        .flat_map(|f| {
            f["boxes"].as_array().expect("boxes").iter().map(|b| b["score"].as_f64().expect("score"))
        })
        .collect();
    (labelled, scores)
}

#[test]
fn a_real_photo_and_a_generated_video_give_the_same_boxes_split_and_unsplit() {
    let set = ensure_real_models().expect("real models");
    let photos = set.dir.join("photos");
    let dir = std::env::temp_dir().join(format!("tandem-detect-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let images = dir.join("images");
    std::fs::create_dir_all(&images).expect("dir");
    std::fs::copy(photos.join("astronaut.png"), images.join("astronaut.png")).expect("copy");
    let astronaut = image::open(photos.join("astronaut.png")).expect("png").to_rgb8();
    let video = dir.join("astronaut.y4m");
    write_y4m(&video, &astronaut, 3);
    let (images, video) = (images.to_string_lossy().into_owned(), video.to_string_lossy().into_owned());

    let server = HandheldProcess::start(&handheld_bin(), &[]).expect("handheld");
    for source in [["--images", images.as_str()], ["--video", video.as_str()]] {
        let local = detect(&source, &[]);
        let split = detect(&source, &["--connect", &server.addr, "--placement", "handheld"]);
        let summary = split.last().expect("summary");
        assert_eq!(summary["offloaded"], summary["frames"], "every frame ran on the handheld: {summary}");
        let ((lb, ls), (sb, ss)) = (boxes(&local), boxes(&split));
        assert_eq!(lb, sb, "{source:?}: different boxes split and unsplit");
        for (a, b) in ls.iter().zip(&ss) {
            assert!((a - b).abs() <= 1e-4, "{source:?}: scores {a} vs {b}");
        }
        let faces = lb.iter().flatten().filter(|(label, _)| label == "FACE_FEMALE").count();
        assert!(faces >= lb.len(), "{source:?}: the astronaut's face is found in every frame: {lb:?}");
    }
    // Without its card the model is fed the same way (YOLOv8's own
    // letterbox), but its classes have no names.
    let set = ensure_real_models().expect("real models");
    let model = set.path("nudenet_320n.onnx").to_string_lossy().into_owned();
    let o = wearable(&["detect", "--model", &model, "--images", &images]);
    assert!(o.status.success(), "{}", stderr(&o));
    let bare: Vec<serde_json::Value> =
        stdout(&o).lines().map(|l| serde_json::from_str(l).expect("JSON")).collect();
    let (with_card, without) = (boxes(&detect(&["--images", &images], &[])).0, boxes(&bare).0);
    let unnamed =
        |b: &Vec<Vec<(String, String)>>| -> Vec<String> { b.iter().flatten().map(|x| x.1.clone()).collect() };
    assert_eq!(unnamed(&with_card), unnamed(&without), "the same boxes with and without the card");
    assert!(without.iter().flatten().any(|(label, _)| label == "class 1"), "{without:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_detect_input_gets_one_line() {
    let set = ensure_real_models().expect("real models");
    let model = set.path("nudenet_320n.onnx").to_string_lossy().into_owned();
    let empty = std::env::temp_dir().join(format!("tandem-detect-empty-{}", std::process::id()));
    std::fs::create_dir_all(&empty).expect("dir");
    let bad_y4m = empty.join("bad.y4m");
    std::fs::write(&bad_y4m, b"not a video").expect("write");
    let (e, b) = (empty.to_string_lossy().into_owned(), bad_y4m.to_string_lossy().into_owned());
    for (args, want) in [
        (vec!["detect", "--model", &model, "--images", &e], "no PNG or JPEG"),
        (vec!["detect", "--model", &model, "--video", &b], "not a Y4M"),
        (vec!["detect", "--model", &model, "--images", &e, "--link", "ble-2m"], "--connect"),
        (vec!["detect", "--model", &model, "--images", &e, "--card", &card("ppocr_cls")], "decodes YOLOv8"),
        (vec!["detect", "--model", &model, "--images", &e, "--card", &e], "model card"),
    ] {
        let o = wearable(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(want), "{args:?}: {}", stderr(&o));
    }
    let _ = std::fs::remove_dir_all(&empty);
}
