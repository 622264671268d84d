//! `tandem-wearable sweep`: measures single-layer models on one engine (tract by default) on this
//! machine and appends one JSON line per layer ([`tandem::predict::LayerSample`]).
//!
//! Two modes (SPEC 3.2, 3.3): `generic` draws layers from the whole
//! parameter space; `model` (EvoLP's layer pool) profiles one model's own
//! const layers in place and samples its variable layers (conv, fc,
//! recurrent) around their configurations. Both stop at `--budget`.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tandem::predict::evolp::CONST_CLASSES;
use tandem::predict::features::{graph_features, LayerFeatures, Unit};
use tandem::predict::LayerSample;
use tandem::{InputShapes, LayerGraph, Model};
use tandem_models::layers::{overhead_probe, sample_generic, LayerSpec, MAX_SAMPLE_MACS};

/// Which layer pool to sweep.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Random layers over the whole parameter ranges.
    Generic,
    /// Layers around one model's own (`--model`).
    Model,
}

/// Arguments of `sweep`.
#[derive(clap::Args)]
pub struct SweepArgs {
    /// Append the dataset (JSON lines) to this file.
    #[arg(long)]
    pub out: PathBuf,
    /// The layer pool.
    #[arg(long, value_enum, default_value = "generic")]
    pub mode: Mode,
    /// The model for `--mode model`.
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Stop after this long, e.g. `90s`, `5m`.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub budget: Duration,
    /// Measured runs per layer (the median is kept), after warm-up.
    #[arg(long, default_value_t = 7)]
    pub repeats: usize,
    /// Warm-up runs per layer.
    #[arg(long, default_value_t = 2)]
    pub warmup: usize,
    /// Seed of the layer draws.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// No progress bar (for logs).
    #[arg(long)]
    pub quiet: bool,
    /// The engine the layers are measured on (one per dataset: predictors
    /// are fitted per device and engine).
    #[command(flatten)]
    pub engine: tandem_tools::cli::EngineArgs,
}

/// Parses a duration as humantime does (`90s`, `5m`, `1h 30m`, `250ms`), or
/// a bare number of seconds (`1.5`).
pub fn parse_duration(s: &str) -> std::result::Result<Duration, String> {
    let s = s.trim();
    if let Ok(secs) = s.parse::<f64>() {
        return Duration::try_from_secs_f64(secs).map_err(|_| format!("bad duration '{s}'"));
    }
    humantime::parse_duration(s).map_err(|e| format!("bad duration '{s}': {e} (e.g. 90s, 5m, 250ms)"))
}

/// Runs the sweep.
pub fn run(args: SweepArgs) -> Result<ExitCode> {
    let started = Instant::now();
    let mut out = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&args.out)
        .with_context(|| format!("cannot open {} for appending", args.out.display()))?;
    let bar = progress(&args);
    let engine = match args.engine.apply()? {
        tandem::engine::EngineChoice::One(e) => e,
        tandem::engine::EngineChoice::Auto => {
            bail!("--engine auto: a sweep measures one engine (tract or onnxruntime)")
        }
    };
    let timing = Timing { warmup: args.warmup, repeats: args.repeats.max(1), engine };
    let overhead_us = measure_spec(&overhead_probe(), &timing)?.1;
    let mut written = 0usize;
    let mut emit = |sample: LayerSample, bar: &ProgressBar| -> Result<()> {
        writeln!(out, "{}", serde_json::to_string(&sample)?)?;
        written += 1;
        bar.set_position(started.elapsed().as_millis() as u64);
        bar.set_message(format!("{written} layers"));
        Ok(())
    };
    match args.mode {
        Mode::Generic => {
            let mut rng = ChaCha8Rng::seed_from_u64(args.seed);
            while started.elapsed() < args.budget {
                let spec = sample_generic(&mut rng);
                match measure_spec(&spec, &timing) {
                    Ok((features, us)) => emit(
                        LayerSample {
                            features,
                            latency_us: us,
                            overhead_us,
                            source: "generic".into(),
                            engine,
                        },
                        &bar,
                    )?,
                    Err(e) => tracing::warn!("skipping {spec:?}: {e:#}"),
                }
            }
        }
        Mode::Model => {
            let path = args.model.as_deref().context("--mode model needs --model FILE")?;
            let model = Model::from_path(path, &InputShapes::none())?;
            let name = model.name().to_string();
            for sample in const_layers(&model, overhead_us, &timing)? {
                emit(sample, &bar)?;
            }
            let variable: Vec<(Unit, LayerFeatures)> = graph_features(model.graph())
                .into_iter()
                .filter(|(_, f)| !CONST_CLASSES.contains(&f.kind.as_str()))
                .collect();
            if variable.is_empty() {
                bail!("{} has no conv, fc or recurrent layers to sample around", path.display());
            }
            let mut rng = ChaCha8Rng::seed_from_u64(args.seed);
            let mut round = 0usize;
            while started.elapsed() < args.budget {
                let (unit, _) = &variable[round % variable.len()];
                // The first pass measures each variable layer as it is.
                let scale = if round < variable.len() { None } else { Some(&mut rng) };
                round += 1;
                let Some(spec) = spec_around(model.graph(), unit, scale) else { continue };
                match measure_spec(&spec, &timing) {
                    Ok((features, us)) => emit(
                        LayerSample {
                            features,
                            latency_us: us,
                            overhead_us,
                            source: format!("model:{name}"),
                            engine,
                        },
                        &bar,
                    )?,
                    Err(e) => tracing::warn!("skipping {spec:?}: {e:#}"),
                }
            }
        }
    }
    bar.finish_and_clear();
    eprintln!(
        "sweep: {written} layers in {:.1} s (budget {:.0} s), run overhead {overhead_us:.1} µs -> {}",
        started.elapsed().as_secs_f64(),
        args.budget.as_secs_f64(),
        args.out.display()
    );
    println!(
        "{}",
        serde_json::json!({
            "mode": format!("{:?}", args.mode).to_lowercase(),
            "layers": written,
            "seconds": started.elapsed().as_secs_f64(),
            "budget_s": args.budget.as_secs_f64(),
            "overhead_us": overhead_us,
            "out": args.out.display().to_string(),
        })
    );
    Ok(ExitCode::SUCCESS)
}

fn progress(args: &SweepArgs) -> ProgressBar {
    if args.quiet {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(args.budget.as_millis() as u64);
    if let Ok(style) = ProgressStyle::with_template("{spinner} sweep [{bar:30}] {elapsed}/{duration} {msg}") {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

/// Warm-up and repeat counts of one measurement.
pub struct Timing {
    /// Unmeasured runs first.
    pub warmup: usize,
    /// Measured runs; the median is kept.
    pub repeats: usize,
    /// The engine measured.
    pub engine: tandem::engine::Engine,
}

/// Runs `f` `warmup` times, then `runs` times timed; the median of the timed runs.
pub fn time_median(warmup: usize, runs: usize, mut f: impl FnMut() -> Result<()>) -> Result<Duration> {
    for _ in 0..warmup {
        f()?;
    }
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs.max(1) {
        let t = Instant::now();
        f()?;
        times.push(t.elapsed());
    }
    Ok(tandem::profile::median(&mut times))
}

/// Builds, loads and times one single-layer model; returns its unit's
/// features and the median run time (µs).
pub fn measure_spec(spec: &LayerSpec, timing: &Timing) -> Result<(LayerFeatures, f64)> {
    let bytes = spec.build(0)?;
    let model = Model::from_bytes(&bytes, &InputShapes::none())?;
    let units = graph_features(model.graph());
    let [(_, features)] = units.as_slice() else {
        bail!("expected one unit, the model has {}", units.len());
    };
    let plan = tandem::split::full_plan_on(&model, timing.engine)?;
    let inputs = tandem::check::random_inputs(&model, 0)?;
    let median = time_median(timing.warmup, timing.repeats, || {
        plan.run(model.graph(), &inputs)?;
        Ok(())
    })?;
    Ok((features.clone(), median.as_secs_f64() * 1e6))
}

/// The model's const-class units, timed in place by the per-node profiler.
fn const_layers(model: &Model, overhead_us: f64, timing: &Timing) -> Result<Vec<LayerSample>> {
    let inputs = tandem::check::random_inputs(model, 0)?;
    let profile = tandem::profile::profile_on(model, timing.engine, &inputs, timing.warmup, timing.repeats)?;
    let source = format!("model:{}:exact", model.name());
    Ok(graph_features(model.graph())
        .into_iter()
        .filter(|(_, f)| CONST_CLASSES.contains(&f.kind.as_str()))
        .map(|(unit, features)| {
            let own: f64 = unit.nodes().map(|n| profile.per_layer[n].as_secs_f64() * 1e6).sum();
            LayerSample {
                features,
                latency_us: own + overhead_us,
                overhead_us,
                source: source.clone(),
                engine: timing.engine,
            }
        })
        .collect())
}

/// A single-layer spec for a variable unit, as it is (`rng` None) or with its
/// channels and size scaled at random (EvoLP's sampling around a model).
fn spec_around(graph: &LayerGraph, unit: &Unit, rng: Option<&mut ChaCha8Rng>) -> Option<LayerSpec> {
    let head = &graph.nodes()[unit.head];
    let p = &head.params;
    let (c_scale, s_scale) = match rng {
        Some(r) => (r.gen_range(0.25..1.5), r.gen_range(0.5..1.25)),
        None => (1.0, 1.0),
    };
    let scale = |v: usize, k: f64| ((v as f64 * k).round() as i64).max(1);
    let fused: Vec<&str> = unit.fused.iter().map(|&f| graph.nodes()[f].op.as_str()).collect();
    let activation = fused.iter().find(|op| **op != "BatchNormalization").map(|s| s.to_string());
    let spec = match head.op.as_str() {
        "Conv" => {
            let rank = p.input_spatial.len() as u8;
            if !(1..=2).contains(&rank) {
                return None;
            }
            // Non-square inputs become the square of the same area.
            let area: f64 = p.input_spatial.iter().map(|&d| d as f64).product();
            let size = ((area.powf(1.0 / f64::from(rank)) * s_scale).round() as i64).max(1);
            let depthwise = p.groups > 1 && p.groups == p.channels_in;
            let (cin, cout, groups) = if depthwise {
                let c = scale(p.channels_in, c_scale);
                (c, c, c)
            } else {
                let g = p.groups.max(1) as i64;
                let cin = (scale(p.channels_in, c_scale) / g).max(1) * g;
                let cout = (scale(p.channels_out, c_scale) / g).max(1) * g;
                (cin, cout, g)
            };
            LayerSpec::Conv {
                rank,
                cin,
                cout,
                kernel: p.kernel.iter().copied().max().unwrap_or(1) as i64,
                stride: p.stride.iter().copied().max().unwrap_or(1) as i64,
                size: size.max(p.kernel.iter().copied().max().unwrap_or(1) as i64),
                groups,
                bn: fused.contains(&"BatchNormalization"),
                activation,
            }
        }
        "Gemm" | "MatMul" => {
            let out_elems: usize = head.output_shapes.first().map(|s| s.iter().product()).unwrap_or(1);
            LayerSpec::Fc {
                rows: (out_elems / p.channels_out.max(1)).max(1) as i64,
                cin: scale(p.channels_in, c_scale),
                cout: scale(p.channels_out, c_scale),
                activation,
            }
        }
        "LSTM" | "GRU" => LayerSpec::Recurrent {
            op: head.op.clone(),
            seq: scale(p.input_spatial.first().copied().unwrap_or(1), s_scale),
            input: scale(p.channels_in, c_scale),
            hidden: scale(p.channels_out, c_scale),
        },
        _ => return None,
    };
    (spec.macs() <= 4 * MAX_SAMPLE_MACS).then_some(spec)
}

/// Reads a dataset file written by `sweep`.
pub fn read_dataset(path: &Path) -> Result<Vec<LayerSample>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read dataset {}", path.display()))?;
    let samples =
        tandem::predict::parse_dataset(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    if samples.is_empty() {
        bail!("{} holds no layers; run `tandem-wearable sweep` first", path.display());
    }
    Ok(samples)
}
