//! Every generated model loads in tract, optimizes, runs, and passes the ONNX
//! checker.

use crate::common;

use std::path::PathBuf;

use anyhow::{ensure, Context, Result};
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

fn check_dir(what: &str) -> Result<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("zoo-{what}"));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// `onnx.checker.check_model(path, full_check=True)` on every zoo model and
/// MobileNet variant. Fails (does not skip) when python's `onnx` is missing.
#[test]
fn zoo_models_pass_onnx_checker() -> Result<()> {
    let py = python_with_onnx()?;
    let dir = check_dir("checker")?;
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
    run_python(&py, script, &paths).context("onnx.checker.check_model(full_check=True)")?;
    Ok(())
}

/// tract agrees with onnx's reference evaluator on every zoo model.
#[test]
fn zoo_models_match_onnx_reference() -> Result<()> {
    let py = python_with_onnx()?;
    let dir = check_dir("reference")?;
    let mut args = Vec::new();
    for spec in zoo_specs() {
        let name = spec.name();
        let bytes = spec.build(DEFAULT_SEED)?;
        let input = input_for(spec, 11)?;
        let raw = input.try_as_plain_ram()?.as_bytes().to_vec();
        let out = run1(&plan(&bytes)?, input)?;
        let out: Vec<u8> = f32s(&out)?.iter().flat_map(|x| x.to_le_bytes()).collect();
        let stem = dir.join(&name);
        std::fs::write(stem.with_extension("onnx"), &bytes)?;
        std::fs::write(stem.with_extension("in"), raw)?;
        std::fs::write(stem.with_extension("out"), out)?;
        args.push(stem);
    }
    let script = r#"
import sys, numpy as np, onnx
from onnx.reference import ReferenceEvaluator
bad = []
for stem in sys.argv[1:]:
    m = onnx.load(stem + ".onnx")
    t = m.graph.input[0].type.tensor_type
    shape = [d.dim_value for d in t.shape.dim]
    x = np.fromfile(stem + ".in", dtype=np.int64 if t.elem_type == 7 else np.float32)
    ref = ReferenceEvaluator(m).run(None, {"input": x.reshape(shape)})[0]
    got = np.fromfile(stem + ".out", dtype=np.float32).reshape(ref.shape)
    if not np.allclose(got, ref, rtol=1e-3, atol=1e-6):
        bad.append(f"{stem}: max abs diff {np.abs(got - ref).max()}")
if bad:
    sys.exit("tract differs from onnx.reference:\n" + "\n".join(bad))
"#;
    run_python(&py, script, &args)?;
    Ok(())
}

/// `tandem-models gen NAME...` writes exactly the named models (a variant
/// included) and refuses an unknown name, listing the known ones.
#[test]
fn gen_writes_the_named_models_only() -> Result<()> {
    let bin = env!("CARGO_BIN_EXE_tandem-models");
    let dir = std::env::temp_dir().join(format!("tandem-gen-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = std::process::Command::new(bin)
        .args(["gen", "--out"])
        .arg(&dir)
        .args(["mnist", "mobilenet_v1_0.25_128"])
        .output()?;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut written: Vec<String> = std::fs::read_dir(&dir)?
        .map(|e| Ok(e?.file_name().to_string_lossy().into_owned()))
        .collect::<Result<_>>()?;
    written.sort();
    assert_eq!(written, ["mnist.onnx", "mobilenet_v1_0.25_128.onnx"]);
    let out = std::process::Command::new(bin).args(["gen", "--out"]).arg(&dir).arg("mnist_v9").output()?;
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("unknown zoo model 'mnist_v9'") && err.contains("wavenet"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

/// DeepWear's WaveNet at the paper's size (not in the default zoo): it
/// runs, and tandem-core counts the 3.8 GFLOPs the paper gives (within 5%).
#[test]
fn wavenet_s2t_runs_at_the_papers_size() -> Result<()> {
    let spec = ZooSpec::from_name("wavenet_s2t").context("wavenet_s2t by name")?;
    assert!(!zoo_specs().contains(&spec), "not in the default zoo");
    check_runs(spec)?;
    let model = tandem_core::Model::from_bytes(&spec.build(DEFAULT_SEED)?, &Default::default())?;
    let gflops = model.graph().total_flops() as f64 / 1e9;
    assert!((gflops / 3.8 - 1.0).abs() < 0.05, "{gflops:.2} GFLOPs, the paper's WaveNet 3.8");
    Ok(())
}
