//! Helpers shared by the model tests.
#![allow(dead_code)]

use anyhow::{bail, Context, Result};
use prost::Message;
use rand::distributions::{Distribution, Uniform};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use tract_onnx::pb::{tensor_proto::DataType, TensorProto};
use tract_onnx::prelude::*;

/// A loaded, optimized, runnable model.
pub type Plan = Arc<TypedRunnableModel>;

/// Loads an ONNX model from bytes, optimizes it and makes it runnable.
pub fn plan(bytes: &[u8]) -> Result<Plan> {
    let model = tract_onnx::onnx()
        .model_for_read(&mut &*bytes)
        .context("loading in tract")?
        .into_optimized()
        .context("optimizing")?;
    model.into_runnable()
}

/// Runs a single-input, single-output plan.
pub fn run1(plan: &Plan, input: Tensor) -> Result<Tensor> {
    let out = plan.run(tvec!(input.into_tvalue()))?;
    Ok(out[0].clone().into_tensor())
}

/// The f32 values of a tensor.
pub fn f32s(t: &Tensor) -> Result<Vec<f32>> {
    Ok(t.try_as_plain_ram()?.as_slice::<f32>()?.to_vec())
}

/// Decodes a float32 `TensorProto` file into a tract tensor.
pub fn load_pb(bytes: &[u8]) -> Result<Tensor> {
    let t = TensorProto::decode(bytes).context("decoding TensorProto")?;
    if t.data_type != DataType::Float as i32 {
        bail!("tensor {:?} is not float32", t.name);
    }
    let dims: Vec<usize> = t.dims.iter().map(|&d| d as usize).collect();
    let values: Vec<f32> = if !t.raw_data.is_empty() {
        t.raw_data.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
    } else {
        t.float_data.clone()
    };
    Tensor::from_shape(&dims, &values)
}

/// A seeded uniform f32 tensor.
pub fn random_f32(shape: &[usize], lo: f32, hi: f32, seed: u64) -> Result<Tensor> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let d = Uniform::new(lo, hi);
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n).map(|_| d.sample(&mut rng)).collect();
    Tensor::from_shape(shape, &v)
}

/// A seeded uniform i64 tensor in `[0, max)`.
pub fn random_i64(shape: &[usize], max: i64, seed: u64) -> Result<Tensor> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let d = Uniform::new(0, max);
    let n: usize = shape.iter().product();
    let v: Vec<i64> = (0..n).map(|_| d.sample(&mut rng)).collect();
    Tensor::from_shape(shape, &v)
}

/// Largest absolute difference.
pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

/// `||a - b|| / ||a||` (L2).
pub fn rel_l2_diff(a: &[f32], b: &[f32]) -> f32 {
    let num: f32 = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum();
    let den: f32 = a.iter().map(|x| x * x).sum();
    (num / den.max(f32::MIN_POSITIVE)).sqrt()
}

/// The Python interpreter, after checking that `onnx` is importable: fails
/// (does not skip) with install instructions otherwise.
pub fn python_with_onnx() -> Result<String> {
    let py = tandem_models::light::python();
    let probe = std::process::Command::new(&py)
        .args(["-c", "import onnx, numpy"])
        .output()
        .with_context(|| format!("running {py}"))?;
    if !probe.status.success() {
        bail!(
            "python `onnx` is not importable with {py}: install it with \
             `{py} -m pip install onnx==1.23.2` ({})",
            String::from_utf8_lossy(&probe.stderr).trim()
        );
    }
    Ok(py)
}

/// Runs a Python snippet with arguments; fails with its stderr.
pub fn run_python(py: &str, script: &str, args: &[std::path::PathBuf]) -> Result<String> {
    let out = std::process::Command::new(py)
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .with_context(|| format!("running {py}"))?;
    if !out.status.success() {
        bail!(
            "python failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
