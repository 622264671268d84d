//! `tandem-wearable`: the wearable side of Tandem.
//!
//! It inspects models, checks split execution against the unsplit model,
//! profiles per-node latency, sweeps single layers, trains and evaluates the
//! latency predictors, shows device profiles and calibrates the power model.
//! Every subcommand parses its arguments and calls the library.

mod apps;
mod calibrate_cmd;
mod detect;
mod device_cmd;
mod face;
mod oracle_cmd;
mod pair_cmd;
mod paired_cmd;
mod plan_cmd;
mod predict_cmd;
mod price_cmd;
mod sweep_cmd;
mod wakeword;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use tandem::check::{check_cuts_on, check_cuts_over_on, random_inputs};
use tandem::engine::{EngineChoice, Engines};
use tandem::{cuts_to_check, Model};

#[derive(Parser)]
#[command(
    name = "tandem-wearable",
    version,
    about = "Tandem's wearable side: split ONNX inference with a paired phone"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Largest tensor a model may declare or compute, in MiB: a model past
    /// it is refused by name before anything is allocated.
    #[arg(long, global = true, default_value_t = tandem::ModelLimits::TENSOR_BYTES >> 20)]
    max_tensor_mb: u64,
    /// Largest working set a model may have (every tensor of its graph at
    /// once), in MiB.
    #[arg(long, global = true, default_value_t = tandem::ModelLimits::WORKING_BYTES >> 20)]
    max_model_mb: u64,
}

#[derive(Subcommand)]
enum Command {
    /// Print the layer table (node, kind, op, params, FLOPs, output bytes) and the DAG's size.
    Inspect {
        #[command(flatten)]
        model: ModelArgs,
        /// Print the table as JSON lines instead.
        #[arg(long)]
        json: bool,
    },
    /// Run random valid cuts (all of them for chain models) split, and compare
    /// crossing tensors and outputs with the unsplit model.
    SplitCheck {
        #[command(flatten)]
        model: ModelArgs,
        /// How many cuts to sample on a branchy DAG.
        #[arg(long, default_value_t = 50)]
        cuts: usize,
        /// Seed for cut sampling and random inputs.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Feed these instead of a random input: a file for a single-input
        /// model, or `NAME=FILE` for each input (repeat the flag); a FILE is
        /// NumPy `.npy` or a serialized TensorProto `.pb`.
        #[arg(long, value_name = "FILE|NAME=FILE")]
        input: Vec<String>,
        /// Also compare the unsplit outputs with reference files: `FILE`
        /// for the first output, or `NAME=FILE` for any (repeat the flag);
        /// `.npy` or a serialized TensorProto (ONNX backend-test
        /// tolerance: rtol 1e-3, atol 1e-7; each output's largest
        /// difference over its scale is reported too).
        #[arg(long, value_name = "FILE|NAME=FILE")]
        expected: Vec<String>,
        /// Send every crossing tensor through this link encoding (raw,
        /// shuffle-lz4, sparse-lz4, f16, int8, int8-channel). Lossless ones
        /// must give back the same bytes; for lossy ones the outputs' error
        /// is reported, not failed on.
        #[arg(long, value_parser = tandem::encoding::Encoding::parse)]
        encoding: Option<tandem::encoding::Encoding>,
        /// Both halves on this engine; `auto`: every pairing of the engines
        /// this machine has (prefix on one, suffix on the other included).
        #[command(flatten)]
        engine: tandem_tools::cli::EngineArgs,
    },
    /// Time every node of the optimized plan and check additivity.
    Profile {
        #[command(flatten)]
        model: ModelArgs,
        /// Measured runs (after warm-up).
        #[arg(long, default_value_t = 20)]
        runs: usize,
        /// Warm-up runs.
        #[arg(long, default_value_t = 3)]
        warmup: usize,
        /// `auto`: profile every engine this machine has and show the fastest.
        #[command(flatten)]
        engine: tandem_tools::cli::EngineArgs,
    },
    /// Device profiles: list the shipped ones, show one, detect this host.
    #[command(subcommand)]
    Device(device_cmd::DeviceCommand),
    /// Power-model calibration: fit C_eff and epsilon, analyse battery traces, measure.
    #[command(subcommand)]
    Calibrate(calibrate_cmd::CalibrateCommand),
    /// Measure single-layer models on this machine into a latency dataset.
    Sweep(sweep_cmd::SweepArgs),
    /// Train and evaluate the latency predictors.
    #[command(subcommand)]
    Predict(predict_cmd::PredictCommand),
    /// Price cuts in predicted time and model-based energy on a device pair.
    Price(price_cmd::PriceArgs),
    /// Decide the partition for a device pair, link, load, weights and latency hint.
    Plan(plan_cmd::PlanArgs),
    /// Check the partitioner's choices against an oracle that measured every candidate (emulated pair).
    Oracle(oracle_cmd::OracleArgs),
    /// Pair with a handheld once, on the 6-digit code it shows (`tandem-handheld pair`).
    Pair(pair_cmd::PairCmdArgs),
    /// One inference paired with a handheld (`tandem-handheld serve`): prints the
    /// outputs, then a JSON line (cut, latency breakdown, bytes, predicted vs measured).
    Run(paired_cmd::RunArgs),
    /// A stream of frames paired with a handheld, pipelined: prints throughput,
    /// latency percentiles, cut switches and fallbacks, then a JSON line.
    Stream(paired_cmd::StreamArgs),
    /// Wake-word detection on a WAV file (openWakeWord's models): mel and
    /// keyword heads on the watch, the speech embedding split with the handheld.
    Wakeword(wakeword::WakewordArgs),
    /// Object detection (YOLOv8) on images or Y4M video, split with the handheld.
    Detect(detect::DetectArgs),
    /// Faces (MediaPipe's detector and 468 landmarks) on images or Y4M video, split with the handheld.
    Face(face::FaceArgs),
    /// DeepWear's graph simplification: node counts before and after, and the virtual nodes.
    Simplify {
        #[command(flatten)]
        model: ModelArgs,
    },
}

#[derive(Args)]
struct ModelArgs {
    /// The ONNX model file.
    #[arg(long)]
    model: PathBuf,
    #[command(flatten)]
    shapes: tandem_tools::cli::ShapeArgs,
}

impl ModelArgs {
    fn load(&self) -> Result<Model, tandem::ModelError> {
        Model::from_path(&self.model, &self.shapes.shapes()?)
    }
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    tandem::ModelLimits::set_default(tandem::ModelLimits {
        max_tensor_bytes: cli.max_tensor_mb.saturating_mul(1 << 20),
        max_working_bytes: cli.max_model_mb.saturating_mul(1 << 20),
    });
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            // Bad input (a tandem::Error) exits 2; so does anything else.
            eprintln!("error: {}", tandem_tools::cli::error_chain(e.as_ref()));
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Inspect { model, json } => {
            let model = model.load()?;
            let g = model.graph();
            if json {
                for n in g.nodes() {
                    println!("{}", serde_json::to_string(n)?);
                }
            } else {
                print!("{}", tandem_tools::report::layer_table(g));
            }
            println!("{}: {}", model.name(), tandem_tools::report::graph_summary(g));
            Ok(ExitCode::SUCCESS)
        }
        Command::SplitCheck { model, cuts, seed, input, expected, encoding, engine } => {
            let pairings: Vec<Engines> = match engine.apply()? {
                EngineChoice::One(e) => vec![Engines::both(e)],
                EngineChoice::Auto => {
                    let have = tandem::engine::available();
                    have.iter()
                        .flat_map(|&prefix| have.iter().map(move |&suffix| Engines { prefix, suffix }))
                        .collect()
                }
            };
            let model = model.load()?;
            let inputs = tandem::check::inputs_from_specs(&model, &input, seed)?;
            let cut_list = cuts_to_check(model.graph(), cuts, seed);
            eprintln!("checking {} cuts of {}", cut_list.len(), model.name());
            let (mut raw_bytes, mut encoded_bytes) = (0usize, 0usize);
            let mut report: Option<tandem::check::CheckReport> = None;
            for &engines in &pairings {
                let one = match encoding {
                    None => check_cuts_on(&model, &cut_list, &inputs, engines)?,
                    Some(e) => {
                        let mut link =
                            |name: &str, t: &tandem::TValue| -> Result<tandem::TValue, tandem::ModelError> {
                                let bad = |err: tandem::encoding::EncodingError| {
                                    tandem::ModelError::Link(format!("'{name}': {err}"))
                                };
                                raw_bytes += t.as_bytes().len();
                                if !tandem::encoding::applies(e, t) {
                                    encoded_bytes += t.as_bytes().len();
                                    return Ok(t.clone());
                                }
                                let (back, sent) = tandem::encoding::round_trip(t, e).map_err(bad)?;
                                encoded_bytes += sent;
                                Ok(back.into())
                            };
                        check_cuts_over_on(&model, &cut_list, &inputs, &mut link, e.is_lossless(), engines)?
                    }
                };
                eprintln!(
                    "{engines}: {} cuts, worst ratio {:.3}{}{}",
                    one.cuts_checked,
                    one.worst_tolerance_ratio,
                    match one.within_a_quantum.len() {
                        0 => String::new(),
                        n => format!(" ({n} tensors passed by the quanta rule only)"),
                    },
                    if one.ok { "" } else { " (mismatches)" }
                );
                report = Some(match report {
                    None => one,
                    Some(r) => r.merge(one),
                });
            }
            let mut report = report.context("no engine to check on")?;
            let mut line = serde_json::to_value(&report)?;
            line["engines"] = pairings.iter().map(|e| e.to_string()).collect::<Vec<_>>().into();
            if let Some(e) = encoding {
                line["encoding"] = e.name().into();
                line["lossless"] = e.is_lossless().into();
                line["crossing_raw_bytes"] = raw_bytes.into();
                line["crossing_encoded_bytes"] = encoded_bytes.into();
            }
            if !expected.is_empty() {
                let checks = tandem::check::check_expected(&model, &expected, &report.reference_outputs)?;
                let worst = checks.iter().fold(0f32, |w, c| w.max(c.worst_ratio));
                let ok = worst <= 1.0;
                report.ok &= ok;
                line["expected_output_ok"] = ok.into();
                line["expected_worst_ratio"] = f64::from(worst).into();
                line["expected"] = serde_json::to_value(&checks)?;
                line["ok"] = report.ok.into();
            }
            for m in &report.mismatches {
                eprintln!("mismatch: {m}");
            }
            if let Some(obj) = line.as_object_mut() {
                obj.remove("mismatches");
            }
            println!("{line}");
            Ok(if report.ok { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }
        Command::Profile { model, runs, warmup, engine } => {
            let choice = engine.apply()?;
            let model = model.load()?;
            let inputs = random_inputs(&model, 0)?;
            let mut measured = std::collections::BTreeMap::new();
            let mut profiles = std::collections::HashMap::new();
            let engine = tandem::engine::resolve(choice, |e| {
                let p = tandem::profile::profile_on(&model, e, &inputs, warmup, runs)?;
                let whole = p.whole_run.as_secs_f64();
                measured.insert(e.name(), whole * 1e3);
                profiles.insert(e, p);
                Ok(whole)
            })?;
            let profile = match profiles.remove(&engine) {
                Some(p) => p,
                None => tandem::profile::profile_on(&model, engine, &inputs, warmup, runs)?,
            };
            print!("{}", tandem_tools::report::profile_table(model.graph(), &profile));
            println!(
                "{}",
                serde_json::json!({
                    "model": model.name(),
                    "engine": engine.name(),
                    "engines_whole_run_ms": measured,
                    "whole_run_ms": profile.whole_run.as_secs_f64() * 1e3,
                    "sum_of_nodes_ms": profile.sum_of_nodes.as_secs_f64() * 1e3,
                    "additivity_ratio": profile.additivity_ratio(),
                    "runs": profile.runs,
                })
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Device(cmd) => device_cmd::run(cmd),
        Command::Calibrate(cmd) => calibrate_cmd::run(cmd),
        Command::Sweep(args) => sweep_cmd::run(args),
        Command::Predict(cmd) => predict_cmd::run(cmd),
        Command::Price(args) => price_cmd::run(args),
        Command::Plan(args) => plan_cmd::run(args),
        Command::Oracle(args) => oracle_cmd::run(args),
        Command::Pair(args) => pair_cmd::run(args),
        Command::Run(args) => paired_cmd::run(args),
        Command::Stream(args) => paired_cmd::stream(args),
        Command::Wakeword(args) => wakeword::wakeword(args),
        Command::Detect(args) => detect::detect(args),
        Command::Face(args) => face::face(args),
        Command::Simplify { model } => {
            let model = model.load()?;
            let g = model.graph();
            let s = tandem::partition::Simplified::new(g);
            for (i, members) in s.members().iter().enumerate() {
                let head = &g.nodes()[members[0]];
                println!("{i:4}  {:<32} {:>4} layers  {}", head.name, members.len(), head.op);
            }
            let cuts = match s.cuts(g, tandem::partition::EXHAUSTIVE_LIMIT) {
                Some(cuts) => cuts?.len().to_string(),
                None => format!("> {}", tandem::partition::EXHAUSTIVE_LIMIT),
            };
            let st = s.stats();
            println!(
                "{}: {} layers -> {} after pruning light layers -> {} virtual nodes ({} repeated blocks of {} kinds bundled); {} representative cuts",
                model.name(),
                st.layers,
                st.after_pruning,
                st.after_bundling,
                st.bundled_blocks,
                st.block_kinds,
                cuts
            );
            let mut line = serde_json::to_value(st)?;
            line["model"] = model.name().into();
            line["cuts"] = cuts.into();
            println!("{line}");
            Ok(ExitCode::SUCCESS)
        }
    }
}
