//! The real-model test set: pretrained ONNX exports from pinned PyPI
//! wheels, with a real input each and onnxruntime's outputs on it, written by
//! `models/fetch_real.py` into `<cache>/real` with a manifest (`real.json`).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{anyhow, Context, Result};
use serde::Deserialize;

/// One real model, as the manifest lists it.
#[derive(Clone, Debug, Deserialize)]
pub struct RealModel {
    /// Short name (`nudenet_320n`).
    pub name: String,
    /// The model file, relative to the real-model directory.
    pub file: String,
    /// The PyPI package it comes from, and its pinned version.
    pub package: String,
    /// See `package`.
    pub version: String,
    /// The licence of what is used (some forbid redistribution).
    pub licence: String,
    /// `mel`, `embedding`, `keyword`, `yolo`, `ocr_det`, `body`, `int8`, ... or `refused`.
    pub kind: String,
    /// `NAME=D1,D2,...` for each input: the shape of the real input.
    pub input_shapes: Vec<String>,
    /// The real inputs (TensorProto files), relative.
    pub inputs: Vec<String>,
    /// onnxruntime's outputs on them (TensorProto files), relative.
    pub outputs: Vec<String>,
    /// For a model made here from a fetched one (an int8 quantization): what
    /// it was made from, and by which tool.
    #[serde(default)]
    pub derived: Option<String>,
    /// For a model tract cannot run: the op of the node it must name.
    #[serde(default)]
    pub refused_node_op: Option<String>,
}

#[derive(Deserialize)]
struct Manifest {
    models: Vec<RealModel>,
}

/// The real models and where they live.
#[derive(Clone, Debug)]
pub struct RealModels {
    /// The directory (`<cache>/real`).
    pub dir: PathBuf,
    /// Every model of the manifest.
    pub models: Vec<RealModel>,
}

impl RealModels {
    /// A model by name.
    pub fn get(&self, name: &str) -> Option<&RealModel> {
        self.models.iter().find(|m| m.name == name)
    }

    /// The path of a file the manifest names.
    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }
}

/// Runs `models/fetch_real.py --cache <cache>` (it skips what is there) and
/// reads the manifest. Needs PyPI, espeak-ng, and the test-time Python
/// packages `scripts/test.sh` installs (onnx, onnxruntime, Pillow).
pub fn ensure_real_models_in(cache: &Path) -> Result<RealModels> {
    let _lock = crate::CacheLock::acquire(cache)?;
    let dir = cache.join("real");
    let manifest = dir.join("real.json");
    crate::light::run_fetch_script(
        "fetch_real.py",
        cache,
        "PyPI, espeak-ng and the Python packages scripts/test.sh installs (onnx, onnxruntime, Pillow)",
    )?;
    let text =
        std::fs::read_to_string(&manifest).with_context(|| format!("reading {}", manifest.display()))?;
    let m: Manifest =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", manifest.display()))?;
    Ok(RealModels { dir, models: m.models })
}

/// [`ensure_real_models_in`] the default cache, once per process.
pub fn ensure_real_models() -> Result<&'static RealModels> {
    // The first error is kept whole (anyhow's is not `Clone`): each call
    // gets a new one with its chain's text.
    static MODELS: OnceLock<std::result::Result<RealModels, anyhow::Error>> = OnceLock::new();
    MODELS
        .get_or_init(|| ensure_real_models_in(&crate::cache_dir()))
        .as_ref()
        .map_err(|e| anyhow!("ensure_real_models failed: {e:#}"))
}

/// The directory of the committed model cards (`models/cards`).
pub fn cards_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("cards")
}

/// The card of a real model (`<cards>/<name>.toml`); a quantized copy
/// (`NAME_int8`) is fed as its source is, so it shares its source's card.
pub fn card_path(name: &str) -> Option<PathBuf> {
    let path = cards_dir().join(format!("{}.toml", name.trim_end_matches("_int8")));
    path.exists().then_some(path)
}
