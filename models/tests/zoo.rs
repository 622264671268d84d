//! Every generated model loads in tract, optimizes, runs, and passes the ONNX
//! checker.

mod common;

use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, ensure, Context, Result};
use common::*;
use tandem_models::{mobilenet_variants, zoo_specs, ZooSpec, DEFAULT_SEED};
use tract_onnx::prelude::*;

fn input_for(spec: ZooSpec, seed: u64) -> Result<Tensor> {
    let shape = spec.input_shape();
    match spec.input_max() {
        Some(max) => random_i64(&shape, max, seed),
        None => random_f32(&shape, -1.0, 1.0, seed),
    }
}

/// Runs `spec` on two random inputs and checks shape, finiteness, softmax sums,
/// that the output is neither uniform nor saturated, and that it depends on the
/// input.
fn check_runs(spec: ZooSpec) -> Result<()> {
    let name = spec.name();
    let bytes = spec.build(DEFAULT_SEED)?;
    let plan = plan(&bytes).with_context(|| name.clone())?;
    let a = run1(&plan, input_for(spec, 1)?).with_context(|| name.clone())?;
    let b = run1(&plan, input_for(spec, 2)?).with_context(|| name.clone())?;
    ensure!(
        a.shape() == spec.output_shape().as_slice(),
        "{name}: output shape {:?}, declared {:?}",
        a.shape(),
        spec.output_shape()
    );
    ensure!(a.datum_type() == f32::datum_type(), "{name}: output is not f32");
    let (va, vb) = (f32s(&a)?, f32s(&b)?);
    ensure!(va.iter().chain(&vb).all(|x| x.is_finite()), "{name}: non-finite output");
    let classes = *a.shape().last().context("scalar output")?;
    let mut max_p = 0f32;
    let mut min_spread = f32::INFINITY;
    for row in va.chunks(classes) {
        let sum: f32 = row.iter().sum();
        ensure!((sum - 1.0).abs() < 1e-3, "{name}: softmax row sums to {sum}");
        let hi = row.iter().copied().fold(0.0, f32::max);
        let lo = row.iter().copied().fold(1.0, f32::min);
        max_p = max_p.max(hi);
        min_spread = min_spread.min(hi - lo);
    }
    let diff = max_abs_diff(&va, &vb);
    eprintln!("{name}: max p {max_p:.4}, min spread {min_spread:.2e}, diff between inputs {diff:.2e}");
    ensure!(max_p < 0.9999, "{name}: saturated softmax (max p {max_p})");
    ensure!(min_spread > 1e-6, "{name}: uniform softmax rows (activations vanished)");
    ensure!(diff > 1e-5, "{name}: output hardly depends on the input ({diff})");
    Ok(())
}

#[test]
fn zoo_models_run_in_tract() -> Result<()> {
    for spec in zoo_specs() {
        check_runs(spec)?;
    }
    Ok(())
}

#[test]
fn mobilenet_variants_run_in_tract() -> Result<()> {
    let variants = mobilenet_variants();
    assert_eq!(variants.len(), 16);
    let mut names: Vec<String> = variants.iter().map(|s| s.name()).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 16, "variant names are not unique");
    for spec in variants {
        check_runs(spec)?;
    }
    Ok(())
}

#[test]
fn text_models_carry_input_max_metadata() -> Result<()> {
    for spec in [ZooSpec::TextRnn, ZooSpec::TextRnnLstm] {
        let model = tract_onnx::onnx().model_for_read(&mut &*spec.build(DEFAULT_SEED)?)?;
        let max = model
            .properties
            .get("onnx.metadata_props.tandem.input.input.max")
            .context("missing tandem.input.input.max")?;
        assert_eq!(max.try_as_plain_ram()?.to_scalar::<String>()?, "5000");
    }
    Ok(())
}

fn check_dir() -> Result<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("zoo-check");
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// `onnx.checker.check_model(path, full_check=True)` on every zoo model and
/// MobileNet variant. Fails (does not skip) when python's `onnx` is missing.
#[test]
fn zoo_models_pass_onnx_checker() -> Result<()> {
    let py = tandem_models::light::python();
    let probe =
        Command::new(&py).args(["-c", "import onnx"]).output().with_context(|| format!("running {py}"))?;
    if !probe.status.success() {
        bail!(
            "python `onnx` is not importable with {py}: install it with \
             `{py} -m pip install onnx==1.23.2` ({})",
            String::from_utf8_lossy(&probe.stderr).trim()
        );
    }
    let dir = check_dir()?;
    let mut specs = zoo_specs();
    specs.extend(mobilenet_variants().into_iter().filter(|v| !zoo_specs().contains(v)));
    let mut paths = Vec::new();
    for spec in specs {
        let p = dir.join(format!("{}.onnx", spec.name()));
        std::fs::write(&p, spec.build(DEFAULT_SEED)?)?;
        paths.push(p);
    }
    let script = "import onnx, sys\n\
                  for p in sys.argv[1:]:\n\
                  \x20   onnx.checker.check_model(p, full_check=True)\n";
    let out = Command::new(&py)
        .arg("-c")
        .arg(script)
        .args(&paths)
        .output()
        .with_context(|| format!("running {py}"))?;
    ensure!(
        out.status.success(),
        "onnx.checker.check_model(full_check=True) failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}
