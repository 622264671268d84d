//! The quantized test set: two small float models of our own (an audio
//! transformer and an image CNN), each quantized by onnxruntime's quantizer
//! five ways (static QDQ int8 per tensor and per channel, static QDQ uint8,
//! static QOperator, dynamic), with a seeded input and onnxruntime's
//! outputs on it, written by `models/quantized.py` into `<cache>/quantized`
//! with a manifest (`quantized.json`).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{anyhow, Context, Result};
use serde::Deserialize;

/// One model of the set, as the manifest lists it.
#[derive(Clone, Debug, Deserialize)]
pub struct QuantizedModel {
    /// Short name (`qtransformer_qdq_s8_pc`).
    pub name: String,
    /// The model file, relative to the set's directory.
    pub file: String,
    /// The float model it was quantized from (`None` for a float model).
    pub source: Option<String>,
    /// How it was quantized, and by which onnxruntime.
    pub how: String,
    /// `NAME=D1,D2,...` for each input.
    pub input_shapes: Vec<String>,
    /// The seeded inputs (TensorProto files), relative.
    pub inputs: Vec<String>,
    /// onnxruntime's outputs on them (TensorProto files), relative.
    pub outputs: Vec<String>,
}

impl QuantizedModel {
    /// Whether it is quantized in the QDQ format (`QuantizeLinear` and
    /// `DequantizeLinear` around float ops).
    pub fn is_qdq(&self) -> bool {
        self.name.contains("_qdq_")
    }
}

#[derive(Deserialize)]
struct Manifest {
    models: Vec<QuantizedModel>,
}

/// The quantized test set and where it lives.
#[derive(Clone, Debug)]
pub struct QuantizedModels {
    /// The directory (`<cache>/quantized`).
    pub dir: PathBuf,
    /// Every model of the manifest, float sources included.
    pub models: Vec<QuantizedModel>,
}

impl QuantizedModels {
    /// A model by name.
    pub fn get(&self, name: &str) -> Option<&QuantizedModel> {
        self.models.iter().find(|m| m.name == name)
    }

    /// The path of a file the manifest names.
    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }
}

/// Runs `models/quantized.py --cache <cache>` (it skips what is there) and
/// reads the manifest. Needs the Python packages `scripts/test.sh` installs
/// (onnx, onnxruntime); no network.
pub fn ensure_quantized_models_in(cache: &Path) -> Result<QuantizedModels> {
    let _lock = crate::CacheLock::acquire(cache)?;
    let dir = cache.join("quantized");
    let manifest = dir.join("quantized.json");
    crate::light::run_fetch_script(
        "quantized.py",
        cache,
        "the Python packages scripts/test.sh installs (onnx, onnxruntime)",
    )?;
    let text =
        std::fs::read_to_string(&manifest).with_context(|| format!("reading {}", manifest.display()))?;
    let m: Manifest =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", manifest.display()))?;
    Ok(QuantizedModels { dir, models: m.models })
}

/// [`ensure_quantized_models_in`] the default cache, once per process.
pub fn ensure_quantized_models() -> Result<&'static QuantizedModels> {
    static MODELS: OnceLock<std::result::Result<QuantizedModels, anyhow::Error>> = OnceLock::new();
    MODELS
        .get_or_init(|| ensure_quantized_models_in(&crate::cache_dir()))
        .as_ref()
        .map_err(|e| anyhow!("ensure_quantized_models failed: {e:#}"))
}
