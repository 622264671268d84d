//! `tandem-models`: writes the generated zoo, fetches the ONNX light models,
//! randomizes constant weights, translates TFLite models and exports suffix
//! models for an edge server.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use tandem_models::{
    cache_dir, ensure_light_models, mobilenet_variants, pruned_variants, randomize_constant_weights,
    write_atomic, write_zoo, zoo_specs, ZooSpec, DEFAULT_SEED,
};

/// Tandem's model zoo.
#[derive(Parser, Debug)]
#[command(name = "tandem-models", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Writes the generated zoo as <out>/<name>.onnx.
    Gen {
        /// Output directory (default: <cache>/zoo).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Weight seed.
        #[arg(long, default_value_t = DEFAULT_SEED)]
        seed: u64,
        /// Also write the 16 MobileNet v1 alpha × resolution variants and the
        /// channel-pruned MNIST, WaveNet and DeepEar.
        #[arg(long)]
        variants: bool,
        /// Write only these models, by name (any zoo model or variant, e.g.
        /// `mnist mobilenet_v1_1.0_128 wavenet_p50`); default: the whole zoo.
        names: Vec<String>,
    },
    /// Downloads the onnx wheel, extracts the light models into <cache>/light and
    /// writes their inputs (skipped when already there).
    FetchLight {
        /// Cache directory (default: models/cache or $TANDEM_MODELS_CACHE).
        #[arg(long)]
        cache: Option<PathBuf>,
    },
    /// Replaces a model's ConstantOfShape weights by seeded random initializers.
    Randomize {
        /// Input ONNX model.
        #[arg(long)]
        model: PathBuf,
        /// Output ONNX model.
        #[arg(long)]
        out: PathBuf,
        /// Weight seed.
        #[arg(long, default_value_t = DEFAULT_SEED)]
        seed: u64,
    },
    /// Generates/fetches everything into the cache (what tests use).
    Ensure,
    /// Writes the suffix models an edge server serves, one per cut, into a
    /// model repository: DIR/NAME.onnx (NAME from the ONNX bytes) and the
    /// index DIR/tandem-suffixes.json (merged with one already there).
    /// Prints a JSON line per suffix.
    ExportSuffix {
        /// The model (.onnx or .tflite).
        model: PathBuf,
        /// The repository directory (created if missing).
        #[arg(long)]
        repo: PathBuf,
        /// A cut by its key (repeatable); default: the cuts at each i/N of
        /// the model's FLOPs (N = --fractions) whose suffix computes a model output.
        #[arg(long = "cut", value_name = "KEY")]
        cuts: Vec<String>,
        /// N for the default cuts.
        #[arg(long, default_value_t = tandem_core::tier::EDGE_FRACTIONS)]
        fractions: usize,
        /// An input's concrete shape, as the wearable loads the model
        /// (`NAME=D1,D2,...`; repeatable): the suffixes are cut from the
        /// model so loaded, and their names follow.
        #[arg(long = "input-shape", value_name = "NAME=D1,D2,...")]
        input_shape: Vec<String>,
        /// A value for a symbolic dimension (`SYMBOL=VALUE`; repeatable).
        #[arg(long = "dim", value_name = "SYMBOL=VALUE")]
        dim: Vec<String>,
        /// Then load each through this Open Inference Protocol server's
        /// repository API (http://HOST:PORT; the server must read DIR).
        #[arg(long, value_name = "URL")]
        deploy: Option<String>,
    },
    /// Translates a TFLite model to ONNX (what loading a `.tflite` does, and
    /// caches). An op with no translation is refused by name and node: exit 2.
    Import {
        /// The TFLite model.
        input: PathBuf,
        /// The ONNX file to write (default: the input with `.onnx`).
        output: Option<PathBuf>,
    },
}

fn main() -> Result<std::process::ExitCode> {
    let cli = Cli::parse();
    match cli.command {
        Cmd::Import { input, output } => {
            // A model that cannot be translated is bad input: exit 2, as the
            // other binaries do.
            return Ok(match import(&input, output) {
                Ok(()) => std::process::ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {e:#}");
                    std::process::ExitCode::from(2)
                }
            });
        }
        Cmd::ExportSuffix { model, repo, cuts, fractions, input_shape, dim, deploy } => {
            let shapes = tandem_core::InputShapes::parse_with_dims(&input_shape, &dim)?;
            export_suffix(&model, &shapes, &repo, &cuts, fractions, deploy.as_deref())?;
        }
        Cmd::Gen { out, seed, variants, names } => {
            let out = out.unwrap_or_else(|| cache_dir().join("zoo"));
            let mut specs = if names.is_empty() { zoo_specs() } else { Vec::new() };
            for name in &names {
                let spec = ZooSpec::from_name(name).ok_or_else(|| {
                    let known: Vec<String> = zoo_specs()
                        .iter()
                        .chain(&mobilenet_variants())
                        .chain(&pruned_variants())
                        .map(|s| s.name())
                        .collect();
                    anyhow::anyhow!("unknown zoo model '{name}'; known: {}", known.join(", "))
                })?;
                if !specs.contains(&spec) {
                    specs.push(spec);
                }
            }
            if variants {
                for v in mobilenet_variants().into_iter().chain(pruned_variants()) {
                    if !specs.contains(&v) {
                        specs.push(v);
                    }
                }
            }
            for e in write_zoo(&out, &specs, seed, false)? {
                println!("{}", e.path.display());
            }
        }
        Cmd::FetchLight { cache } => {
            let cache = cache.unwrap_or_else(cache_dir);
            let _lock = tandem_models::CacheLock::acquire(&cache)?;
            for e in ensure_light_models(&cache)? {
                println!("{}", e.model.display());
            }
        }
        Cmd::Randomize { model, out, seed } => {
            let bytes = std::fs::read(&model).with_context(|| format!("reading {}", model.display()))?;
            let randomized = randomize_constant_weights(&bytes, seed)?;
            write_atomic(&out, &randomized)?;
            println!("{}", out.display());
        }
        Cmd::Ensure => {
            let paths = tandem_models::ensure_models()?;
            for e in paths.zoo.iter().chain(&paths.mobilenet_variants).chain(&paths.pruned_variants) {
                println!("{}", e.path.display());
            }
            for e in &paths.light {
                println!("{}", e.model.display());
                println!("{}", e.randomized.display());
            }
        }
    }
    Ok(std::process::ExitCode::SUCCESS)
}

/// `tandem-models import`: translates `input` and writes the ONNX bytes.
fn import(input: &std::path::Path, output: Option<PathBuf>) -> Result<()> {
    let output = output.unwrap_or_else(|| input.with_extension("onnx"));
    if same_file(input, &output) {
        anyhow::bail!(
            "the output {} is the input: name another (`tandem-models import IN OUT`)",
            output.display()
        );
    }
    let bytes = std::fs::read(input).with_context(|| format!("reading {}", input.display()))?;
    if !tandem_tflite::is_tflite(&bytes) {
        anyhow::bail!("{} is not a TFLite model (no TFL3 identifier)", input.display());
    }
    let onnx = tandem_tflite::translate_to_bytes(&bytes)
        .with_context(|| format!("translating {}", input.display()))?;
    write_atomic(&output, &onnx)?;
    println!("{}", output.display());
    Ok(())
}

/// `tandem-models export-suffix`: writes the suffixes and their index,
/// then loads each on the server at `deploy`, if given.
fn export_suffix(
    model: &std::path::Path,
    shapes: &tandem_core::InputShapes,
    repo: &std::path::Path,
    cuts: &[String],
    fractions: usize,
    deploy: Option<&str>,
) -> Result<()> {
    let entries = tandem_models::suffix::export_suffixes(model, shapes, repo, cuts, fractions)?;
    if let Some(url) = deploy {
        let client = tandem_oip::OipClient::new(
            url,
            tandem_oip::ClientOptions { timeout: std::time::Duration::from_secs(120), ..Default::default() },
        )?;
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        runtime.block_on(async {
            for e in &entries {
                client
                    .load(&e.name)
                    .await
                    .with_context(|| format!("deploying {} (cut {})", e.name, e.cut))?;
            }
            anyhow::Ok(())
        })?;
    }
    for e in &entries {
        let line = serde_json::json!({
            "name": e.name,
            "cut": e.cut,
            "path": repo.join(format!("{}.onnx", e.name)),
            "inputs": e.inputs.iter().map(|t| &t.name).collect::<Vec<_>>(),
            "outputs": e.outputs.iter().map(|t| &t.name).collect::<Vec<_>>(),
            "deployed": deploy.is_some(),
        });
        println!("{line}");
    }
    Ok(())
}

/// Whether `a` and `b` name one file (through links and `..`), or the same
/// path when neither can be resolved.
fn same_file(a: &std::path::Path, b: &std::path::Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn import_refuses_to_overwrite_its_input() -> Result<()> {
        let dir = std::env::temp_dir().join(format!("tandem-models-import-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        // A TFLite file named `.onnx`: the default output is the input.
        let input = dir.join("model.onnx");
        let bytes = b"\x1c\0\0\0TFL3 not a whole model".to_vec();
        std::fs::write(&input, &bytes)?;
        let err = import(&input, None).expect_err("refused");
        assert!(format!("{err:#}").contains("is the input"), "{err:#}");
        let err = import(&input, Some(dir.join(".").join("model.onnx"))).expect_err("refused");
        assert!(format!("{err:#}").contains("is the input"), "{err:#}");
        assert_eq!(std::fs::read(&input)?, bytes, "the input is untouched");
        std::fs::remove_dir_all(&dir)?;
        Ok(())
    }
}
