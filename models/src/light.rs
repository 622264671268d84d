//! The ONNX "light" models: fetching them and their deterministic test input.

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};
use prost::Message;
use tract_onnx::pb::{tensor_proto::DataType, tensor_shape_proto, type_proto, ModelProto};

use crate::builder::f32_tensor;

/// The nine light models shipped in the `onnx==1.23.2` wheel, by short name.
/// Their files are `light_<name>.onnx`, `light_<name>_input_0.pb` and
/// `light_<name>_output_0.pb`.
pub const LIGHT_MODELS: [&str; 9] = [
    "bvlc_alexnet",
    "densenet121",
    "inception_v1",
    "inception_v2",
    "resnet50",
    "shufflenet",
    "squeezenet",
    "vgg19",
    "zfnet512",
];

/// The onnx release whose wheel the light models come from.
pub const ONNX_VERSION: &str = "1.23.2";

/// The Python interpreter used for the fetch: `$TANDEM_PYTHON`, else `python3`.
pub fn python() -> String {
    std::env::var("TANDEM_PYTHON").unwrap_or_else(|_| "python3".to_string())
}

/// Runs `models/<script> --cache <cache>`, its output on stderr (the tools
/// print JSON lines on stdout); on failure, says what the script `needs`.
pub(crate) fn run_fetch_script(script: &str, cache: &Path, needs: &str) -> Result<()> {
    let script = crate::workspace_root().join("models").join(script);
    let py = python();
    let status = Command::new(&py)
        .arg(&script)
        .arg("--cache")
        .arg(cache)
        .stdout(std::io::stderr())
        .status()
        .with_context(|| format!("running {py} {}", script.display()))?;
    if !status.success() {
        bail!("{py} {} --cache {} failed ({status}); it needs {needs}", script.display(), cache.display());
    }
    Ok(())
}

/// Runs `models/fetch_light.py --cache <cache>`: downloads the onnx wheel (pip),
/// extracts the light models into `<cache>/light` and writes their inputs when
/// `onnx` is importable.
pub fn fetch_light(cache: &Path) -> Result<()> {
    run_fetch_script(
        "fetch_light.py",
        cache,
        &format!("network access to PyPI (`pip download onnx=={ONNX_VERSION}`)"),
    )
}

/// The input ONNX's backend test runner feeds a light model (its
/// `generate_dummy_data` with `random=False`): for the first graph input that is
/// not an initializer, unknown dimensions become 1 and the value is
/// `(arange(n).reshape(shape) / n).astype(float32)`. Returned as an encoded
/// `TensorProto` named after the input.
pub fn light_dummy_input(onnx_bytes: &[u8]) -> Result<Vec<u8>> {
    let model = ModelProto::decode(onnx_bytes).context("decoding ONNX model")?;
    let graph = model.graph.context("ONNX model has no graph")?;
    let inits: std::collections::HashSet<&str> = graph.initializer.iter().map(|t| t.name.as_str()).collect();
    let input = graph
        .input
        .iter()
        .find(|i| !inits.contains(i.name.as_str()))
        .context("model has no non-initializer input")?;
    let Some(type_proto::Value::TensorType(tt)) = input.r#type.as_ref().and_then(|t| t.value.as_ref()) else {
        bail!("input {:?} is not a tensor", input.name);
    };
    if tt.elem_type != DataType::Float as i32 {
        bail!("input {:?} is not float32", input.name);
    }
    let dims: Vec<i64> = tt
        .shape
        .as_ref()
        .map(|s| {
            s.dim
                .iter()
                .map(|d| match d.value {
                    Some(tensor_shape_proto::dimension::Value::DimValue(v)) => v,
                    _ => 1,
                })
                .collect()
        })
        .unwrap_or_default();
    let n: i64 = dims.iter().product();
    let values: Vec<f32> = (0..n).map(|i| (i as f64 / n as f64) as f32).collect();
    Ok(f32_tensor(&input.name, &dims, &values).encode_to_vec())
}
