//! The ONNX light models (fetched by `ensure_models`) and their randomized
//! copies.

use crate::common;

use anyhow::{ensure, Context, Result};
use common::*;
use tandem_models::{ensure_models, light_dummy_input, LIGHT_MODELS};

/// The fetched files are complete and each input is the ONNX runner's
/// formula. (Each model's unsplit output against the shipped one is checked
/// by `tests/tests/split_zoo.rs`, `light_<name>::shipped`, with the
/// runtime's own plans.)
#[test]
fn light_inputs_follow_the_onnx_runners_formula() -> Result<()> {
    let paths = ensure_models()?;
    assert_eq!(paths.light.len(), LIGHT_MODELS.len());
    for e in &paths.light {
        let bytes = std::fs::read(&e.model)?;
        let expected_input = load_pb(&light_dummy_input(&bytes)?)?;
        let input = load_pb(&std::fs::read(&e.input)?)?;
        ensure!(input == expected_input, "{}: input file differs from the formula", e.name);
        ensure!(e.expected_output.exists(), "{}: no expected output", e.name);
    }
    Ok(())
}

#[test]
fn randomized_light_models_depend_on_input() -> Result<()> {
    let paths = ensure_models()?;
    for e in &paths.light {
        let bytes = std::fs::read(&e.randomized)?;
        let plan = plan(&bytes).with_context(|| e.name)?;
        let ramp = load_pb(&std::fs::read(&e.input)?)?;
        let shape = ramp.shape().to_vec();
        let noise1 = random_f32(&shape, 0.0, 1.0, 7)?;
        let noise2 = random_f32(&shape, 0.0, 1.0, 8)?;
        let mut outs = Vec::new();
        for input in [ramp, noise1, noise2] {
            let v = f32s(&run1(&plan, input)?)?;
            ensure!(v.iter().all(|x| x.is_finite()), "{}: non-finite output", e.name);
            outs.push(v);
        }
        // Relative L2 differences: the light outputs are 1000 probabilities
        // around 0.001, so absolute differences are small even when the
        // distribution changes a lot.
        let d_ramp = rel_l2_diff(&outs[0], &outs[1]);
        let d_noise = rel_l2_diff(&outs[1], &outs[2]);
        let max_p = outs[1].iter().copied().fold(f32::MIN, f32::max);
        eprintln!(
            "{}: max output (noise) {max_p:.4}, relative diff ramp/noise {d_ramp:.3e}, \
             noise/noise {d_noise:.3e}",
            e.name
        );
        ensure!(d_ramp > 1e-2, "{}: output hardly depends on the input ({d_ramp})", e.name);
        ensure!(d_noise > 1e-2, "{}: output hardly depends on the input ({d_noise})", e.name);
    }
    Ok(())
}

/// The randomized copies are valid ONNX (`check_model(full_check=True)`).
#[test]
fn randomized_light_models_pass_onnx_checker() -> Result<()> {
    let py = python_with_onnx()?;
    let paths = ensure_models()?;
    let files: Vec<_> = paths.light.iter().map(|e| e.randomized.clone()).collect();
    let script = "import onnx, sys\n\
                  for p in sys.argv[1:]:\n\
                  \x20   onnx.checker.check_model(p, full_check=True)\n";
    run_python(&py, script, &files).context("onnx.checker.check_model(full_check=True)")?;
    Ok(())
}
