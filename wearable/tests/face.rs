//! `tandem-wearable face` with MediaPipe's face detector and face landmark
//! model, loaded from the mediapipe wheel's `.tflite` files: on the
//! astronaut (scikit-image's photo) and a Y4M video of it, the faces and
//! their 468 landmarks are the same on the watch alone as with the models on
//! a real `tandem-handheld serve` process (all there, or cut at half their
//! FLOPs over emulated BLE 2M), and within tolerance of LiteRT's through the
//! numpy reference (scripts/face_reference.py).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::common::{stderr, stdout, wearable};
use tandem_models::real::ensure_real_models;
use tandem_tools::testing::HandheldProcess;

fn handheld_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tandem-wearable")).with_file_name("tandem-handheld")
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn python(args: &[&std::ffi::OsStr], what: &str) {
    let o = std::process::Command::new("python3").args(args).output().expect("python3 runs");
    assert!(o.status.success(), "{what}: {}", String::from_utf8_lossy(&o.stderr));
}

/// The two `.tflite` files (models/fetch_tflite.py) and the reference's
/// faces on the astronaut (LiteRT through scripts/face_reference.py), once.
fn fixtures() -> &'static (String, String, serde_json::Value) {
    static FIXTURES: OnceLock<(String, String, serde_json::Value)> = OnceLock::new();
    FIXTURES.get_or_init(|| {
        ensure_real_models().expect("the astronaut (models/fetch_real.py)");
        let set = tandem_models::tflite::ensure_tflite_models()
            .expect("the TFLite models (models/fetch_tflite.py)");
        let model = |name: &str| set.path(&set.get(name).expect("in the TFLite set").file);
        let (detector, landmarks) = (model("face_detection_short_range"), model("face_landmark"));
        let (cache, models) = (tandem_models::cache_dir(), set.dir.clone());
        let out = cache.join("face");
        if !out.join("reference.json").exists() {
            let script = root().join("scripts/face_reference.py");
            python(
                &[
                    script.as_os_str(),
                    "--models".as_ref(),
                    models.as_os_str(),
                    "--out".as_ref(),
                    out.as_os_str(),
                ],
                "scripts/face_reference.py (ai-edge-litert, numpy, Pillow)",
            );
        }
        let text = std::fs::read_to_string(out.join("reference.json")).expect("the reference");
        let path = |p: PathBuf| p.to_string_lossy().into_owned();
        (path(detector), path(landmarks), serde_json::from_str(&text).expect("JSON"))
    })
}

fn face(source: &[&str], extra: &[&str]) -> Vec<serde_json::Value> {
    let (detector, landmarks, _) = fixtures();
    let mut args = vec!["face", "--detector", detector, "--landmarks", landmarks];
    args.extend(source);
    args.extend(extra);
    let o = wearable(&args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    stdout(&o).lines().map(|l| serde_json::from_str(l).expect("JSON lines")).collect()
}

fn floats(v: &serde_json::Value) -> Vec<f64> {
    match v {
        serde_json::Value::Array(a) => a.iter().flat_map(floats).collect(),
        other => vec![other.as_f64().expect("a number")],
    }
}

/// The largest difference between two faces' numbers: score, box,
/// keypoints, presence, and landmarks.
fn worst(a: &serde_json::Value, b: &serde_json::Value) -> [f64; 3] {
    let most = |key: &str| {
        let (x, y) = (floats(&a[key]), floats(&b[key]));
        assert_eq!(x.len(), y.len(), "{key}");
        x.iter().zip(&y).map(|(p, q)| (p - q).abs()).fold(0.0, f64::max)
    };
    [most("score").max(most("presence")), most("box").max(most("keypoints")), most("landmarks")]
}

fn faces(lines: &[serde_json::Value]) -> Vec<&serde_json::Value> {
    lines[..lines.len() - 1].iter().flat_map(|f| f["faces"].as_array().expect("faces")).collect()
}

#[test]
fn faces_and_landmarks_agree_split_unsplit_and_with_litert() {
    let (_, _, reference) = fixtures();
    let set = ensure_real_models().expect("real models");
    let dir = tandem_tools::testing::temp_dir("face").expect("dir");
    let images = dir.join("images");
    std::fs::create_dir_all(&images).expect("dir");
    std::fs::copy(set.dir.join("photos/astronaut.png"), images.join("astronaut.png")).expect("copy");
    let astronaut = image::open(set.dir.join("photos/astronaut.png")).expect("png").to_rgb8();
    let video = dir.join("astronaut.y4m");
    crate::detect::write_y4m(&video, &astronaut, 3);
    let (images, video) = (images.to_string_lossy().into_owned(), video.to_string_lossy().into_owned());

    // On the watch alone, against LiteRT.
    let local = face(&["--images", &images], &[]);
    let found = faces(&local);
    assert_eq!(found.len(), 1, "one face: {local:?}");
    let want = &reference["faces"][0];
    let [score, boxes, marks] = worst(found[0], want);
    eprintln!(
        "against LiteRT: scores {score:.2e}, box and keypoints {boxes:.2e} px, landmarks {marks:.2e} px"
    );
    assert!(score <= 1e-3, "scores differ by {score}");
    assert!(boxes <= 0.1, "boxes and keypoints differ by {boxes} px");
    assert!(marks <= 0.5, "landmarks differ by {marks} px");
    assert_eq!(found[0]["landmarks"].as_array().expect("landmarks").len(), 468);

    // On a real handheld: all there, then cut at half the FLOPs; the photo
    // over emulated BLE 2M, three frames of video over plain TCP (a split
    // photo takes 7 s over BLE 2M: 0.2 MB up per detector frame, 0.5 MB per face).
    let server = HandheldProcess::start(&handheld_bin(), &[]).expect("handheld");
    // The video first: the models are pushed to the handheld over TCP.
    for (source, link) in [(["--video", video.as_str()], "none"), (["--images", images.as_str()], "ble-2m")] {
        let local = face(&source, &[]);
        assert!(faces(&local).len() >= local.len() - 1, "a face in every frame: {source:?}");
        let link: &[&str] = if link == "none" { &[] } else { &["--link", link] };
        for placement in [&["--placement", "handheld"][..], &["--cut-flops", "0.5"][..]] {
            let extra = [placement, link].concat();
            let args = [&["--connect", server.addr.as_str()][..], &extra].concat();
            let split = face(&source, &args);
            let summary = split.last().expect("summary");
            for model in ["detector", "landmarks"] {
                let s = &summary[model];
                assert_eq!(
                    s["offloaded"], s["frames"],
                    "{source:?} {extra:?}: {model} ran on the handheld: {s}"
                );
            }
            if extra[0] == "--cut-flops" {
                // Both models really split: layers on each side.
                for line in &split[..split.len() - 1] {
                    let reports = std::iter::once(&line["detector_report"])
                        .chain(line["landmark_reports"].as_array().expect("reports"));
                    for r in reports {
                        let (prefix, all) = (r["prefix_layers"].as_u64(), r["layers"].as_u64());
                        assert!(prefix > Some(0) && prefix < all, "{extra:?}: not split: {r}");
                    }
                }
            }
            let (a, b) = (faces(&local), faces(&split));
            assert_eq!(a.len(), b.len(), "{source:?} {extra:?}: as many faces");
            for (x, y) in a.iter().zip(&b) {
                let w = worst(x, y);
                eprintln!("{source:?} {extra:?}: split vs unsplit {w:?}");
                assert!(
                    w.iter().all(|d| *d <= 1e-3),
                    "{source:?} {extra:?}: split vs unsplit differ by {w:?}"
                );
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_face_input_gets_one_line() {
    let (detector, landmarks, _) = fixtures();
    let dir = tandem_tools::testing::temp_dir("face-bad").expect("dir");
    let e = dir.to_string_lossy().into_owned();
    let yolo = tandem_models::real::cards_dir().join("nudenet_320n.toml").to_string_lossy().into_owned();
    let base = ["face", "--detector", detector.as_str(), "--landmarks", landmarks.as_str()];
    for (extra, want) in [
        (vec!["--images", &e], "no PNG or JPEG"),
        (vec!["--images", &e, "--detector-card", &yolo], "decodes the outputs itself"),
        (vec!["--images", &e, "--cut-flops", "0.5"], "--cut-flops"),
        (vec!["--images", &e, "--min-score", "2"], "must be in [0, 1]"),
    ] {
        let args = [&base[..], &extra].concat();
        let o = wearable(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(want), "{args:?}: {}", stderr(&o));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
