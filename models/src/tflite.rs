//! The TFLite test set (`models/fetch_tflite.py`): MediaPipe's and
//! openWakeWord's `.tflite` files from pinned wheels, a real input for each
//! and LiteRT's outputs on it, as `.npy` files under `<cache>/tflite`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{anyhow, Context, Result};
use serde::Deserialize;

/// One model of `tflite.json`.
#[derive(Clone, Debug, Deserialize)]
pub struct TfliteModel {
    /// Short name (`face_detection_short_range`, `oww_embedding`).
    pub name: String,
    /// The `.tflite` file, relative to the set's directory.
    pub file: String,
    /// Its SHA-256, pinned by the fetch script.
    pub sha256: String,
    /// The real inputs (`.npy`), relative, in `input_names` order.
    pub inputs: Vec<String>,
    /// The TFLite names of its inputs.
    pub input_names: Vec<String>,
    /// LiteRT's outputs on them (`.npy`), relative.
    pub outputs: Vec<String>,
    /// The TFLite names of its outputs.
    pub output_names: Vec<String>,
    /// For a model with a custom op: the op Tandem must refuse by name.
    pub refuse: Option<String>,
}

#[derive(Deserialize)]
struct Manifest {
    models: Vec<TfliteModel>,
}

/// The fetched set.
#[derive(Clone, Debug)]
pub struct TfliteModels {
    /// The directory (`<cache>/tflite`).
    pub dir: PathBuf,
    /// Every model of the manifest.
    pub models: Vec<TfliteModel>,
}

impl TfliteModels {
    /// A model by name.
    pub fn get(&self, name: &str) -> Option<&TfliteModel> {
        self.models.iter().find(|m| m.name == name)
    }

    /// The path of a file the manifest names.
    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }
}

/// Runs `fetch_tflite.py` into `cache` (it skips what is there) and reads
/// the manifest.
pub fn ensure_tflite_models_in(cache: &Path) -> Result<TfliteModels> {
    let _lock = crate::CacheLock::acquire(cache)?;
    let dir = cache.join("tflite");
    let manifest = dir.join("tflite.json");
    crate::light::run_fetch_script(
        "fetch_tflite.py",
        cache,
        "PyPI, espeak-ng and the Python packages scripts/test.sh installs (ai-edge-litert, numpy, Pillow)",
    )?;
    let text =
        std::fs::read_to_string(&manifest).with_context(|| format!("reading {}", manifest.display()))?;
    let m: Manifest =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", manifest.display()))?;
    Ok(TfliteModels { dir, models: m.models })
}

/// [`ensure_tflite_models_in`] the default cache, once per process.
pub fn ensure_tflite_models() -> Result<&'static TfliteModels> {
    static MODELS: OnceLock<std::result::Result<TfliteModels, anyhow::Error>> = OnceLock::new();
    MODELS
        .get_or_init(|| ensure_tflite_models_in(&crate::cache_dir()))
        .as_ref()
        .map_err(|e| anyhow!("ensure_tflite_models failed: {e:#}"))
}
