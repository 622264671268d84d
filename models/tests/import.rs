//! `tandem-models import`: a TFLite model translated to the ONNX bytes that
//! loading it uses; a model with a custom op, or another format, exits 2
//! with the op and node named.

use std::process::Command;

use anyhow::{ensure, Context, Result};
use tandem_models::tflite::ensure_tflite_models;

fn import(args: &[&std::path::Path]) -> Result<std::process::Output> {
    Command::new(env!("CARGO_BIN_EXE_tandem-models"))
        .arg("import")
        .args(args)
        .output()
        .context("running tandem-models import")
}

#[test]
fn import_writes_the_translation_and_refuses_custom_ops_with_exit_2() -> Result<()> {
    let set = ensure_tflite_models()?;
    let dir = std::env::temp_dir().join(format!("tandem-models-import-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;

    let input = set.path("face_detection_short_range.tflite");
    let output = dir.join("face.onnx");
    let run = import(&[&input, &output])?;
    ensure!(run.status.success(), "import failed: {}", String::from_utf8_lossy(&run.stderr));
    let written = std::fs::read(&output)?;
    ensure!(written == tandem_tflite::translate_to_bytes(&std::fs::read(&input)?)?, "the same translation");

    let refused = import(&[&set.path("selfie_segmentation.tflite"), &dir.join("selfie.onnx")])?;
    let stderr = String::from_utf8_lossy(&refused.stderr);
    ensure!(refused.status.code() == Some(2), "a refusal exits 2, not {:?}", refused.status);
    ensure!(
        stderr.contains("Convolution2DTransposeBias") && stderr.contains("node 244 ('segment')"),
        "the op and node are named: {stderr}"
    );
    ensure!(!dir.join("selfie.onnx").exists(), "nothing written on a refusal");

    let not_tflite = import(&[&output])?;
    ensure!(not_tflite.status.code() == Some(2), "an ONNX file is not imported: {:?}", not_tflite.status);
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
