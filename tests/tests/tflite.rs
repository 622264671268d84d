//! TFLite models from two wheels (`models/fetch_tflite.py`: MediaPipe
//! 0.10.21 and wyoming-openwakeword 1.8.2), loaded as `.tflite` files
//! (translated to ONNX by tandem-tflite) and checked on real inputs (the
//! astronaut photo, espeak-ng speech) four ways: tract's outputs against
//! LiteRT's, onnxruntime's on the translated graph against LiteRT's,
//! sampled cuts split exactly, and the interface keeps TFLite's names.
//!
//! The tolerance is 1e-3 of each output's scale (its largest |value| in
//! LiteRT's output, at least 1): LiteRT (XNNPACK) and tract or onnxruntime
//! sum in other orders. The worst seen was 2.2e-4 (pose_landmark_full, whose
//! segmentation mask goes through five bilinear resizes); every other model
//! stayed under 1.6e-6. Each model's worst figure is printed.
//! Models with MediaPipe custom ops are refused by name.

use anyhow::Context;
use tandem::check::check_cuts_over;
use tandem::engine::Engine;
use tandem::split::{full_plan, full_plan_on};
use tandem::{sampled_cuts_to_check, InputShapes, Model, Tensor, Values};
use tandem_models::tflite::ensure_tflite_models;

/// Largest difference over each output's scale (at least 1).
const TOLERANCE: f32 = 1e-3;
/// Sampled cuts per model (plus both trivial ones).
const CUTS: usize = 6;

/// `max |got − expected| / max(1, max |expected|)`: relative to the output's
/// scale, absolute for outputs under 1 (a sigmoid's 2e-6 is not a scale).
/// Infinite on a shape mismatch or where only one side is NaN
/// (`tandem::check::diff`'s rule).
fn scaled_error(expected: &Tensor, got: &Tensor) -> anyhow::Result<f32> {
    let d = tandem::check::diff(expected, got)?;
    let scale = tandem::check::as_f32(expected)?.iter().fold(0f32, |m, x| m.max(x.abs())).max(1.0);
    Ok(d.max_abs / scale)
}

fn onnxruntime() -> anyhow::Result<()> {
    let lib = tandem_models::ensure_onnxruntime()?;
    let _ = tandem::engine::onnxruntime::set_library_path(&lib);
    tandem::engine::onnxruntime::init().with_context(|| format!("loading {}", lib.display()))?;
    Ok(())
}

/// Loads `name`'s `.tflite`, runs it unsplit on tract and onnxruntime
/// against LiteRT, and checks sampled cuts. Returns the worst error.
fn check_tflite(name: &str) -> anyhow::Result<f32> {
    let set = ensure_tflite_models()?;
    let entry = set.get(name).with_context(|| format!("{name} in the manifest"))?;
    let mut inputs = Values::new();
    let mut specs = Vec::new();
    for (input, file) in entry.input_names.iter().zip(&entry.inputs) {
        let x = tandem::npy::read(&set.path(file))?;
        let dims: Vec<String> = x.shape().iter().map(|d| d.to_string()).collect();
        specs.push(format!("{input}={}", dims.join(",")));
        inputs.insert(input.clone(), x.into());
    }
    // The real input's shape binds a dimension TFLite leaves open (audio length).
    let model = Model::from_path(set.path(&entry.file), &InputShapes::parse(&specs)?)?;
    let g = model.graph();
    let names: Vec<&str> = g.outputs().iter().map(|&t| g.tensor(t).name.as_str()).collect();
    assert_eq!(names, entry.output_names, "{name}: the interface keeps TFLite's output names");

    let tract = full_plan(&model)?.run(g, &inputs)?;
    onnxruntime()?;
    let ort = full_plan_on(&model, Engine::OnnxRuntime)?.run(g, &inputs)?;
    let mut worst = 0f32;
    for (out, file) in entry.output_names.iter().zip(&entry.outputs) {
        let litert = tandem::npy::read(&set.path(file))?;
        for (engine, got) in [("tract", &tract), ("onnxruntime", &ort)] {
            let e = scaled_error(&litert, &got[out])?;
            assert!(
                e <= TOLERANCE,
                "{name}: '{out}' on {engine} differs from LiteRT's by {e:.2e} of its scale"
            );
            worst = worst.max(e);
        }
    }

    let cuts = sampled_cuts_to_check(g, CUTS, 11);
    let report = check_cuts_over(&model, &cuts, &inputs, &mut |_, t| Ok(t.clone()), true)?;
    assert!(report.ok, "{name}: {:?}", report.mismatches);
    assert_eq!(report.cuts_checked, cuts.len());
    eprintln!(
        "{name}: {} nodes, worst error {worst:.2e} of the scale against LiteRT, {} cuts exact",
        g.nodes().len(),
        cuts.len()
    );
    Ok(worst)
}

/// Loading `name` is refused, naming `op` and its node.
fn check_refused(name: &str, op: &str) -> anyhow::Result<()> {
    let set = ensure_tflite_models()?;
    let entry = set.get(name).with_context(|| format!("{name} in the manifest"))?;
    let err = Model::from_path(set.path(&entry.file), &InputShapes::none()).expect_err("refused");
    let text = err.to_string();
    assert!(
        text.contains(&format!("operator {op} at node")),
        "{name}: the refusal names the op and its node: {text}"
    );
    eprintln!("{name}: {text}");
    Ok(())
}

macro_rules! matches_litert {
    ($($test:ident: $name:literal,)*) => {$(
        #[test]
        fn $test() -> anyhow::Result<()> {
            check_tflite($name).map(|_| ())
        }
    )*};
}

matches_litert! {
    face_detection_short_range_matches_litert: "face_detection_short_range",
    face_detection_full_range_sparse_matches_litert: "face_detection_full_range_sparse",
    face_landmark_matches_litert: "face_landmark",
    iris_landmark_matches_litert: "iris_landmark",
    hand_landmark_lite_matches_litert: "hand_landmark_lite",
    hand_landmark_full_matches_litert: "hand_landmark_full",
    palm_detection_lite_matches_litert: "palm_detection_lite",
    palm_detection_full_matches_litert: "palm_detection_full",
    pose_detection_matches_litert: "pose_detection",
    pose_landmark_full_matches_litert: "pose_landmark_full",
    hand_recrop_matches_litert: "hand_recrop",
    oww_melspectrogram_matches_litert: "oww_melspectrogram",
    oww_embedding_matches_litert: "oww_embedding",
    oww_alexa_matches_litert: "oww_alexa",
    oww_hey_mycroft_matches_litert: "oww_hey_mycroft",
    // Its score goes through an IF (a second model above its threshold):
    // both branches are inlined and Where picks one.
    oww_hey_jarvis_matches_litert: "oww_hey_jarvis",
}

#[test]
fn selfie_segmentation_is_refused_naming_its_custom_op() -> anyhow::Result<()> {
    check_refused("selfie_segmentation", "Convolution2DTransposeBias")?;
    check_refused("selfie_segmentation_landscape", "Convolution2DTransposeBias")
}

#[test]
fn face_landmark_with_attention_is_refused_naming_its_custom_op() -> anyhow::Result<()> {
    check_refused("face_landmark_with_attention", "Landmarks2TransformMatrix")
}

/// The comparison fails on a NaN where LiteRT has a number, and on a shape mismatch.
#[test]
fn the_comparison_with_litert_sees_nan_and_shapes() -> anyhow::Result<()> {
    let want = Tensor::from_shape(&[2], &[0.5f32, 1.0])?;
    assert_eq!(scaled_error(&want, &Tensor::from_shape(&[2], &[0.5f32, f32::NAN])?)?, f32::INFINITY);
    assert_eq!(scaled_error(&want, &Tensor::from_shape(&[1, 2], &[0.5f32, 1.0])?)?, f32::INFINITY);
    assert_eq!(scaled_error(&want, &Tensor::from_shape(&[2], &[0.5f32, 1.25])?)?, 0.25);
    Ok(())
}
