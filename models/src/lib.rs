//! Tandem's model zoo.
//!
//! * [`zoo`]: seeded ONNX generators for the models Tandem splits (MNIST CNN,
//!   MobileNet v1 and its 16 width/resolution variants, LSTM-HAR, text GRU/LSTM,
//!   WaveNet-like, DeepEar-like);
//! * [`light`]: the nine ONNX "light" test models (fetched from the onnx wheel)
//!   and their deterministic test inputs;
//! * [`randomize_constant_weights`]: copies of the light models whose constant
//!   weights are replaced by seeded random ones;
//! * [`onnxruntime`]: onnxruntime's shared library from its pinned wheel (the second engine);
//! * [`quantized`]: an audio transformer and an image CNN of our own, quantized by onnxruntime five ways (issue 33);
//! * [`hostile`]: tiny ONNX files that declare or compute tensors no phone can hold (issue 28).
//! * [`suffix`]: suffix models for an edge server's model repository, and their index (`export-suffix`).
//! * [`ensure_models`]: materializes all of the above under [`cache_dir`].

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{anyhow, Context, Result};

mod builder;
pub mod hostile;
pub mod layers;
pub mod light;
pub mod onnxruntime;
pub mod quantized;
mod randomize;
pub mod real;
pub mod suffix;
pub mod tflite;
pub mod tiny;
pub mod zoo;

pub use builder::{IR_VERSION, OPSET};
pub use light::{fetch_light, light_dummy_input, LIGHT_MODELS, ONNX_VERSION};
pub use onnxruntime::{ensure_onnxruntime, ONNXRUNTIME_VERSION};
pub use randomize::randomize_constant_weights;
pub use zoo::{mobilenet_variants, pruned_variants, zoo_specs, PrunedBase, ZooModel, ZooSpec};

/// The seed of the zoo models and randomized light copies that
/// [`ensure_models`] writes.
pub const DEFAULT_SEED: u64 = 42;

/// Bumped whenever a generator changes its output, so that stale caches are
/// regenerated.
pub const GENERATOR_VERSION: u32 = 2;

/// The workspace root (the parent of this crate's manifest directory).
pub fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(Path::to_path_buf).unwrap_or_else(|| manifest.to_path_buf())
}

/// `<root>/models/cache` (git-ignored), or `$TANDEM_MODELS_CACHE` when set.
pub fn cache_dir() -> PathBuf {
    match std::env::var_os("TANDEM_MODELS_CACHE") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => workspace_root().join("models").join("cache"),
    }
}

/// A generated model on disk.
#[derive(Clone, Debug)]
pub struct ZooEntry {
    /// Its generator.
    pub spec: ZooSpec,
    /// `spec.name()`.
    pub name: String,
    /// `<cache>/zoo/<name>.onnx`.
    pub path: PathBuf,
}

/// One light model's files.
#[derive(Clone, Debug)]
pub struct LightEntry {
    /// Short name, one of [`LIGHT_MODELS`].
    pub name: &'static str,
    /// `<cache>/light/light_<name>.onnx` (weights are ConstantOfShape 0.02).
    pub model: PathBuf,
    /// `<cache>/light/light_<name>_input_0.pb`: the ONNX runner's input.
    pub input: PathBuf,
    /// `<cache>/light/light_<name>_output_0.pb`: the expected output.
    pub expected_output: PathBuf,
    /// `<cache>/light-random/<name>.onnx`: a copy with seeded random weights
    /// ([`randomize_constant_weights`] with [`DEFAULT_SEED`]); same input.
    pub randomized: PathBuf,
}

/// Paths of every model [`ensure_models`] materialized.
#[derive(Clone, Debug)]
pub struct ModelPaths {
    /// The cache directory.
    pub cache: PathBuf,
    /// The default zoo ([`zoo_specs`]), in order.
    pub zoo: Vec<ZooEntry>,
    /// The 16 MobileNet v1 variants ([`mobilenet_variants`]), in
    /// `<cache>/zoo` too; the 1.0/224 one is the zoo's `mobilenet_v1` file.
    pub mobilenet_variants: Vec<ZooEntry>,
    /// The channel-pruned CNNs ([`pruned_variants`]), in `<cache>/zoo` too.
    pub pruned_variants: Vec<ZooEntry>,
    /// The light models, in [`LIGHT_MODELS`] order.
    pub light: Vec<LightEntry>,
}

impl ModelPaths {
    /// A zoo model or MobileNet variant by name.
    pub fn zoo_path(&self, name: &str) -> Option<&Path> {
        self.zoo
            .iter()
            .chain(&self.mobilenet_variants)
            .chain(&self.pruned_variants)
            .find(|e| e.name == name)
            .map(|e| e.path.as_path())
    }

    /// A light model by short name (`"resnet50"`) or file stem (`"light_resnet50"`).
    pub fn light(&self, name: &str) -> Option<&LightEntry> {
        let name = name.strip_prefix("light_").unwrap_or(name);
        self.light.iter().find(|e| e.name == name)
    }
}

/// Writes `data` to `path` atomically (temporary file, then rename).
pub fn write_atomic(path: &Path, data: &[u8]) -> Result<()> {
    let dir = path.parent().ok_or_else(|| anyhow!("{} has no parent directory", path.display()))?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let file_name = path.file_name().ok_or_else(|| anyhow!("{} has no file name", path.display()))?;
    let tmp = dir.join(format!(".{}.tmp{}", file_name.to_string_lossy(), std::process::id()));
    std::fs::write(&tmp, data).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))?;
    Ok(())
}

fn stamp_text(seed: u64) -> String {
    format!("tandem-models generator v{GENERATOR_VERSION} seed {seed}\n")
}

fn stamp_ok(dir: &Path, seed: u64) -> bool {
    std::fs::read_to_string(dir.join("STAMP")).is_ok_and(|s| s == stamp_text(seed))
}

/// Writes the given specs into `dir/<name>.onnx`. With `only_missing`, keeps
/// the files that exist.
pub fn write_zoo(dir: &Path, specs: &[ZooSpec], seed: u64, only_missing: bool) -> Result<Vec<ZooEntry>> {
    let mut out = Vec::new();
    for &spec in specs {
        let name = spec.name();
        let path = dir.join(format!("{name}.onnx"));
        if !(only_missing && path.exists()) {
            write_atomic(&path, &spec.build(seed)?)?;
        }
        out.push(ZooEntry { spec, name, path });
    }
    Ok(out)
}

fn light_entry(cache: &Path, name: &'static str) -> LightEntry {
    let light = cache.join("light");
    LightEntry {
        name,
        model: light.join(format!("light_{name}.onnx")),
        input: light.join(format!("light_{name}_input_0.pb")),
        expected_output: light.join(format!("light_{name}_output_0.pb")),
        randomized: cache.join("light-random").join(format!("{name}.onnx")),
    }
}

/// Generates the default zoo and the MobileNet variants into `<cache>/zoo`
/// (what is missing, or everything when the cache is stale), without touching
/// the network. Returns (zoo, MobileNet variants, pruned variants).
pub fn ensure_zoo_in(cache: &Path) -> Result<(Vec<ZooEntry>, Vec<ZooEntry>, Vec<ZooEntry>)> {
    let seed = DEFAULT_SEED;
    let zoo_dir = cache.join("zoo");
    let fresh = stamp_ok(&zoo_dir, seed);
    let zoo = write_zoo(&zoo_dir, &zoo_specs(), seed, fresh)?;
    let mut variants = Vec::new();
    for spec in mobilenet_variants() {
        match zoo.iter().find(|e| e.spec == spec) {
            Some(e) => variants.push(e.clone()),
            None => variants.extend(write_zoo(&zoo_dir, &[spec], seed, fresh)?),
        }
    }
    // Same staleness as the rest of the zoo: a generator bump rewrites them too.
    let pruned = write_zoo(&zoo_dir, &pruned_variants(), seed, fresh)?;
    if !fresh {
        write_atomic(&zoo_dir.join("STAMP"), stamp_text(seed).as_bytes())?;
    }
    Ok((zoo, variants, pruned))
}

/// Makes sure `<cache>/light` holds the nine light models, their expected
/// outputs and their inputs: runs `fetch_light.py` when anything is missing,
/// then writes any input it left out (with [`light_dummy_input`]).
pub fn ensure_light_models(cache: &Path) -> Result<Vec<LightEntry>> {
    let light: Vec<LightEntry> = LIGHT_MODELS.iter().map(|n| light_entry(cache, n)).collect();
    let complete = |l: &[LightEntry]| {
        l.iter().all(|e| e.model.exists() && e.input.exists() && e.expected_output.exists())
    };
    if !complete(&light) {
        fetch_light(cache)?;
        for e in &light {
            if !e.input.exists() {
                let bytes =
                    std::fs::read(&e.model).with_context(|| format!("reading {}", e.model.display()))?;
                write_atomic(&e.input, &light_dummy_input(&bytes)?)?;
            }
        }
        if !complete(&light) {
            return Err(anyhow!(
                "light models are still incomplete in {} after the fetch",
                cache.join("light").display()
            ));
        }
    }
    Ok(light)
}

/// Holds an exclusive lock on `<cache>/.lock` while it lives, so that
/// processes filling the same cache at once (test runners that start one
/// process per test) generate each file once instead of racing.
pub struct CacheLock {
    _file: std::fs::File,
}

impl CacheLock {
    /// Blocks until this process holds the lock on `cache`.
    pub fn acquire(cache: &Path) -> Result<CacheLock> {
        std::fs::create_dir_all(cache).with_context(|| format!("creating {}", cache.display()))?;
        let path = cache.join(".lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        file.lock().with_context(|| format!("locking {}", path.display()))?;
        Ok(CacheLock { _file: file })
    }
}

/// Materializes every model under `cache` (see [`ensure_models`]), holding
/// the cache's [`CacheLock`] meanwhile.
pub fn ensure_models_in(cache: &Path) -> Result<ModelPaths> {
    let _lock = CacheLock::acquire(cache)?;
    let seed = DEFAULT_SEED;

    let (zoo, mobilenet_variants, pruned_variants) = ensure_zoo_in(cache)?;
    let light = ensure_light_models(cache)?;

    // Randomized copies.
    let random_dir = cache.join("light-random");
    let fresh = stamp_ok(&random_dir, seed);
    for e in &light {
        if fresh && e.randomized.exists() {
            continue;
        }
        let bytes = std::fs::read(&e.model).with_context(|| format!("reading {}", e.model.display()))?;
        let randomized = randomize_constant_weights(&bytes, seed)
            .with_context(|| format!("randomizing {}", e.model.display()))?;
        drop(bytes);
        write_atomic(&e.randomized, &randomized)?;
    }
    if !fresh {
        write_atomic(&random_dir.join("STAMP"), stamp_text(seed).as_bytes())?;
    }

    Ok(ModelPaths { cache: cache.to_path_buf(), zoo, mobilenet_variants, pruned_variants, light })
}

/// Generates the zoo (and the MobileNet variants) into `cache/zoo/<name>.onnx`
/// (idempotent; regenerates what is missing or stale) and the randomized light
/// copies into `cache/light-random/<name>.onnx`; fetches the light models by
/// running `fetch_light.py` if `cache/light` is incomplete. Runs once per
/// process; later calls return the same paths (or the same error).
pub fn ensure_models() -> Result<&'static ModelPaths> {
    // The first error is kept whole (anyhow's is not `Clone`): each call
    // gets a new one with its chain's text.
    static PATHS: OnceLock<std::result::Result<ModelPaths, anyhow::Error>> = OnceLock::new();
    PATHS
        .get_or_init(|| ensure_models_in(&cache_dir()))
        .as_ref()
        .map_err(|e| anyhow!("ensure_models failed: {e:#}"))
}
