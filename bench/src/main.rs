//! `tandem-bench`: Tandem's benchmark harness. Writes one JSON line per
//! measurement to stdout (logs go to stderr).
//!
//! `split-overhead` times, side by side in one process and one run, the
//! unsplit plan against prefix + suffix at the cuts holding about 25%, 50%
//! and 75% of the model's FLOPs, alternating the two so both see the same
//! machine conditions, and reports the ratio of medians. It also reports the
//! cost of building the plans of a new cut and of switching back to a cached
//! one.
//!
//! `oracle` checks the partitioner's choices against an oracle that measured
//! every candidate cut, on an emulated pair (`tandem_tools::oracle`), over the
//! bandwidth × load × PropT grid, for each decision method.
//!
//! `decision-time` times the partition decision (the heuristic; the min-cut
//! method with PropT = 0 and with a finite PropT, which needs the Lagrangian
//! search; and the stream objective's search) against the model's own
//! unsplit inference, side by side, and reports the ratio.
//!
//! `loopback` measures TCP loopback throughput for 1 MB tensors (raw bytes,
//! and the whole protocol path); `emulation` each emulated link profile's
//! achieved rate and delay against its configuration; `pipeline` pipelined
//! streams against sequential ones and the ideal 1 / max(stage), per model.
//!
//! `encodings` measures each link encoding on the tensors that cross at a
//! model's representative cuts: bytes, speed, and the lossy ones' error.
//!
//! `plot-learning` draws a stream's predicted and measured latency per
//! frame (`scripts/learning.py` runs the stream).

mod bins;
mod compare;
mod deepwear;
mod dvfs;
mod encodings;
mod engines;
mod interval;
mod paired;
mod plots;
mod soak;
mod tiers;
mod traces;
mod workload;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Parser, Subcommand};
use serde_json::json;
use tandem::check::{inputs_from_pb, random_inputs};
use tandem::profile::median;
use tandem::split::full_plan;
use tandem::{Cut, InputShapes, Model, SplitExecutor};

#[derive(Parser)]
#[command(name = "tandem-bench", about = "Tandem's benchmark harness (JSON lines on stdout)")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Energy saved by choosing the cluster and frequency with the cut (model-based).
    Dvfs {
        /// Models (default: the zoo, the light models and the real models).
        #[arg(long)]
        model: Vec<PathBuf>,
        /// The link profile (ble-1m, ble-2m, bt-classic, wifi-poor, wifi-good).
        #[arg(long, default_value = "ble-2m")]
        link: String,
    },
    /// tract against onnxruntime, one thread each, interleaved: every model
    /// whole and the halves of its cut at half its FLOPs.
    Engines {
        /// Models (default: the zoo, the light models and the real models).
        #[arg(long)]
        model: Vec<PathBuf>,
        /// Measured runs per piece and engine, after two warm-up pairs.
        #[arg(long, default_value_t = 15)]
        runs: usize,
        /// onnxruntime's library (default: $ORT_DYLIB_PATH, else the pinned wheel's).
        #[arg(long)]
        ort_lib: Option<PathBuf>,
    },
    /// Unsplit vs prefix+suffix at ~25/50/75% of FLOPs, and cut-switch cost.
    SplitOverhead {
        /// Models to measure (default: the whole zoo and the light models).
        #[arg(long)]
        model: Vec<PathBuf>,
        /// Measured runs per variant, after warm-up.
        #[arg(long, default_value_t = 30)]
        runs: usize,
    },
    /// Chosen cut vs the measured best of every candidate, on an emulated pair.
    Oracle {
        /// Models to check (default: the whole zoo and the light models).
        #[arg(long)]
        model: Vec<PathBuf>,
        /// Measured rounds per candidate cut (medians), after one warm-up.
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// The stream objective (per-frame period) instead of single inference.
        #[arg(long)]
        stream: bool,
        /// Measure every cut twice and report the noise ceiling.
        #[arg(long)]
        remeasure: bool,
    },
    /// Decision time (min-cut; PropT = 0, and PropT halfway between the fastest and
    /// the least-energy cut) as a share of inference time.
    DecisionTime {
        /// Models to measure (default: the whole zoo and the light models).
        #[arg(long)]
        model: Vec<PathBuf>,
        /// Measured decisions and inferences, after warm-up.
        #[arg(long, default_value_t = 15)]
        runs: usize,
        /// Decide the watch's cluster and frequency with the cut too (its
        /// profile's 5 operating points).
        #[arg(long)]
        dvfs: bool,
    },
    /// TCP loopback throughput for 1 MB tensors (goal: at least 1 GB/s unshaped).
    Loopback {
        /// Messages in the measured batch.
        #[arg(long, default_value_t = 500)]
        messages: usize,
    },
    /// Emulated links: achieved rate and delay against the configured ones (goal: within 5%).
    Emulation {
        /// Seconds of data sent each way per profile.
        #[arg(long, default_value_t = 2.0)]
        seconds: f64,
    },
    /// Each link encoding on the tensors crossing at the model input and at
    /// 25/50/75% of FLOPs: bytes, encode/decode MB/s, lossy error.
    Encodings {
        /// Models (default: the zoo, the light models, the real models on their real inputs).
        #[arg(long)]
        model: Vec<PathBuf>,
        #[command(flatten)]
        shapes: tandem_tools::cli::ShapeArgs,
        /// Timed encode/decode runs per tensor (medians).
        #[arg(long, default_value_t = 5)]
        runs: usize,
    },
    /// One handheld and N paired wearables streaming through proxies, with
    /// faults injected (`--faults`): one JSON line of frames fed and
    /// delivered (duplicates, out of order) and the handheld's memory and
    /// file descriptors.
    Soak {
        /// Wearable processes.
        #[arg(long, default_value_t = 2)]
        wearables: usize,
        /// Seconds of frames each streams.
        #[arg(long, default_value_t = 20.0)]
        seconds: f64,
        /// Kill and restart, stall, flap the links, drop, corrupt and reorder bytes.
        #[arg(long)]
        faults: bool,
        /// Frames per second per wearable.
        #[arg(long, default_value_t = 10.0)]
        fps: f64,
        /// Output directory (keystores, frames, logs, soak.json).
        #[arg(long, default_value = "target/soak")]
        out: PathBuf,
    },
    /// Every offload strategy side by side on real processes over emulated
    /// links: `DIR/results.jsonl` (one line per cell, strategy and run) and
    /// `DIR/report.md` (the headline per strategy).
    Compare {
        /// A few cells (two models, BLE 2M and Wi-Fi, and a short walk-away
        /// trace), one run per strategy and cell: for CI.
        #[arg(long)]
        quick: bool,
        /// Where results.jsonl and report.md go.
        #[arg(long, default_value = "target/compare")]
        out: PathBuf,
        /// Models by name, zoo (mnist, deepear, ...) or real (ppocr_cls, ...),
        /// or ONNX files (`.onnx`, fed random inputs at `--input-shape`);
        /// default: all the zoo and real models.
        #[arg(long)]
        model: Vec<String>,
        /// Input shapes for the models given as files.
        #[command(flatten)]
        shapes: tandem_tools::cli::ShapeArgs,
        /// Measured frames per run, after one warm-up.
        #[arg(long, default_value_t = 5)]
        frames: usize,
        /// Runs of each strategy in each cell, interleaved (`--quick`: 1).
        #[arg(long, default_value_t = 2, conflicts_with = "quick")]
        runs: usize,
        /// Keep the cells results.jsonl already has.
        #[arg(long)]
        resume: bool,
        /// Run nothing: write DIR/report.md and the plots again from
        /// DIR/results.jsonl (a run stopped early, or runs put together).
        #[arg(long, conflicts_with_all = ["quick", "resume"])]
        report_only: bool,
        /// A link trace to stream over beside the built-in walk-away trace
        /// (`seconds up_mbit [down_mbit]` lines, the last line's time its
        /// length, over BLE 2M; named by its file's stem): `traces/commute.txt`,
        /// `traces/crowded-room.txt`, or any; repeatable.
        #[arg(long, value_name = "FILE")]
        trace: Vec<PathBuf>,
        /// Run Tandem's strategy with `--dvfs` (the watch's cluster and
        /// frequency chosen with the cut).
        #[arg(long)]
        dvfs: bool,
        /// The engine every process of every strategy runs on (`auto`: each
        /// side's faster one, so wearable-only is the model on the watch in
        /// its faster engine); onnxruntime's library from $ORT_DYLIB_PATH,
        /// else the pinned wheel's.
        #[arg(long, default_value = "tract", value_parser = tandem::engine::EngineChoice::parse)]
        engine: tandem::engine::EngineChoice,
        /// Only each model's base cell (watch and phone over BLE 2M, no
        /// load, PropT 0, single inference).
        #[arg(long, conflicts_with = "quick")]
        base_only: bool,
        /// Only the cells on DeepWear's pairs: its era pair (watch-sd400 +
        /// nexus-6, assumed profiles) and the pair as the paper measured it
        /// (lg-urbane + nexus-6-cpu, nexus-6-gpu), over BLE 2M, Bluetooth
        /// classic and Wi-Fi, lossless and, where the model has a budget, lossy.
        #[arg(long, conflicts_with_all = ["quick", "base_only", "edge_only"])]
        era_only: bool,
        /// Only the cells streamed at a source rate (each model's camera or
        /// microphone rates, on the base pair and link): the deadline-miss
        /// table alone.
        #[arg(long, conflicts_with_all = ["quick", "base_only", "era_only", "edge", "edge_only"])]
        rate_only: bool,
        /// Also the edge grid (issue 31, DeepWear's cloud comparison): an
        /// edge server (KServe on loopback, serving the suffixes) behind
        /// 100 kbit/s, 5 Mbit/s and 50 Mbit/s links, the phone idle,
        /// loaded at 80% or a Galaxy A16; strategies: wearable-only,
        /// handheld-only, Tandem on two tiers, cloud-only, phone relay,
        /// Tandem on three tiers. `--quick` runs one such cell.
        #[arg(long)]
        edge: bool,
        /// Only the edge grid.
        #[arg(long, conflicts_with_all = ["edge", "base_only"])]
        edge_only: bool,
    },
    /// Predicted against measured latency per frame of a stream
    /// (`tandem-wearable stream --frames-out F`): `DIR/NAME.svg` and `.png`,
    /// and the error per frame as JSON lines on stdout.
    PlotLearning {
        /// The stream's frame lines.
        #[arg(long)]
        frames: PathBuf,
        /// Where the figure goes.
        #[arg(long, default_value = "docs/img")]
        out: PathBuf,
        /// The figure's file name, without extension.
        #[arg(long, default_value = "learning")]
        name: String,
    },
    /// Pipelined stream throughput vs sequential and vs the ideal 1 / max(stage), per model.
    Pipeline {
        /// Models (default: the zoo).
        #[arg(long)]
        model: Vec<PathBuf>,
        /// The emulated link, or `none` for the unshaped in-memory link.
        #[arg(long, default_value = "wifi-good")]
        link: String,
        /// The wearable's compute dilation (the demo's 8x: on this host it
        /// puts the small models' watch stages at 2-6 ms).
        #[arg(long, default_value_t = 8.0)]
        dilation: f64,
        /// Frames per run.
        #[arg(long, default_value_t = 60)]
        frames: usize,
        /// Most frames in flight: at least the round trip over the slowest
        /// stage keeps the pipe full (emulated BLE's 20 ms over a 0.9 ms
        /// stage needs 23; 16 held TextRNN at 0.58 of the ideal).
        #[arg(long, default_value_t = 64)]
        max_in_flight: usize,
        /// Pipelined runs per model: the row is the median run's (by
        /// steady / ideal), and every run's ratio is reported beside it.
        /// With `--link none` both devices share this host's cores, and
        /// one run of a sub-millisecond stage lasts a quarter of a second.
        #[arg(long, default_value_t = 1)]
        repeats: usize,
        /// Run at this cut (its key, as the output's `cut_key` gives it)
        /// instead of the planner's stream choice: a cut to measure that
        /// the planner does not choose today.
        #[arg(long, value_name = "KEY")]
        cut: Option<String>,
    },
}

fn main() -> anyhow::Result<()> {
    // The in-process sessions and handheld (pipeline, encodings) log here.
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    match Cli::parse().command {
        Command::SplitOverhead { model, runs } => split_overhead(model, runs),
        Command::Engines { model, runs, ort_lib } => engines::engines(model, runs, ort_lib),
        Command::Dvfs { model, link } => dvfs::dvfs(model, &link),
        Command::PlotLearning { frames, out, name } => plot_learning(&frames, &out, &name),
        Command::DecisionTime { model, runs, dvfs } => decision_time(model, runs, dvfs),
        Command::Oracle { model, runs, stream, remeasure } => oracle(model, runs, stream, remeasure),
        Command::Loopback { messages } => paired::loopback(messages),
        Command::Soak { wearables, seconds, faults, fps, out } => {
            soak::soak(wearables, seconds, faults, fps, &out)
        }
        Command::Compare {
            quick,
            out,
            model,
            shapes,
            frames,
            runs,
            resume,
            report_only,
            trace,
            dvfs,
            engine,
            base_only,
            era_only,
            rate_only,
            edge,
            edge_only,
        } => {
            let file_args: Vec<String> = shapes
                .input_shape
                .iter()
                .flat_map(|s| ["--input-shape".to_string(), s.clone()])
                .chain(shapes.dim.iter().flat_map(|d| ["--dim".to_string(), d.clone()]))
                .collect();
            let edge = match (edge, edge_only) {
                (_, true) => compare::EdgeGrid::Only,
                (true, false) => compare::EdgeGrid::With,
                _ => compare::EdgeGrid::Off,
            };
            let shapes = shapes.shapes()?;
            let settings = compare::Settings {
                frames: frames.max(1),
                runs: runs.max(1),
                dvfs,
                engine,
                base_only,
                era_only,
                rate_only,
                edge,
                shapes,
                traces: trace,
            };
            if report_only {
                return compare::report_only(&out);
            }
            compare::compare(&out, quick, model, &file_args, settings, resume)
        }
        Command::Encodings { model, shapes, runs } => encodings::encodings(model, &shapes.shapes()?, runs),
        Command::Emulation { seconds } => paired::emulation(seconds),
        Command::Pipeline { model, link, dilation, frames, max_in_flight, repeats, cut } => {
            let runs = paired::PipelineRuns { frames, max_in_flight, repeats, cut };
            paired::pipeline(model, &link, dilation, runs)
        }
    }
}

/// `plot-learning`: reads a stream's frame lines, prints each frame's
/// prediction error, draws the figure.
fn plot_learning(frames: &Path, out: &Path, name: &str) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(frames).with_context(|| frames.display().to_string())?;
    let mut points = vec![];
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let j: serde_json::Value =
            serde_json::from_str(line).with_context(|| format!("{} line {}", frames.display(), i + 1))?;
        let (Some(frame), Some(measured)) = (j["frame"].as_u64(), j["latency_ms"].as_f64()) else {
            anyhow::bail!("{} line {}: no frame or latency_ms", frames.display(), i + 1);
        };
        // A frame without a prediction (none made yet) is not plotted.
        let Some(predicted) = j["predicted_ms"].as_f64() else { continue };
        let error_pct = (predicted - measured).abs() / measured.max(1e-9) * 100.0;
        println!(
            "{}",
            json!({"frame": frame, "predicted_ms": predicted, "measured_ms": measured, "error_pct": error_pct})
        );
        points.push((frame, predicted, measured));
    }
    anyhow::ensure!(!points.is_empty(), "{}: no frame has a prediction", frames.display());
    std::fs::create_dir_all(out).with_context(|| out.display().to_string())?;
    let written = plots::learning(out, name, &points)?;
    eprintln!(
        "wrote {}",
        written.iter().map(|w| out.join(w).display().to_string()).collect::<Vec<_>>().join(", ")
    );
    Ok(())
}

fn default_models() -> anyhow::Result<Vec<(PathBuf, Option<PathBuf>)>> {
    let paths = tandem_models::ensure_models()?;
    let mut models: Vec<(PathBuf, Option<PathBuf>)> =
        paths.zoo.iter().map(|e| (e.path.clone(), None)).collect();
    models.extend(paths.light.iter().map(|e| (e.model.clone(), Some(e.input.clone()))));
    Ok(models)
}

fn split_overhead(models: Vec<PathBuf>, runs: usize) -> anyhow::Result<()> {
    let models =
        if models.is_empty() { default_models()? } else { models.into_iter().map(|m| (m, None)).collect() };
    let mut ratios = vec![];
    for (path, input) in models {
        let model =
            Model::from_path(&path, &InputShapes::none()).with_context(|| path.display().to_string())?;
        let g = model.graph();
        let inputs = match input {
            Some(pb) => inputs_from_pb(&model, &pb)?,
            None => random_inputs(&model, 0)?,
        };
        let full = full_plan(&model)?;
        let exec = SplitExecutor::new(model.clone());
        for fraction in [0.25, 0.5, 0.75] {
            let cut = Cut::at_flops_fraction(g, fraction);
            let started = Instant::now();
            let plan = exec.plan(&cut)?;
            let build = started.elapsed();
            let started = Instant::now();
            let again = exec.plan(&cut)?;
            let switch = started.elapsed();
            anyhow::ensure!(std::sync::Arc::ptr_eq(&plan, &again), "cached plan was rebuilt");
            let warmup = 3;
            let (mut unsplit, mut split) = (vec![], vec![]);
            for i in 0..warmup + runs {
                let t = Instant::now();
                full.run(g, &inputs)?;
                let u = t.elapsed();
                let t = Instant::now();
                plan.run(g, &inputs)?;
                let s = t.elapsed();
                if i >= warmup {
                    unsplit.push(u);
                    split.push(s);
                }
            }
            let (u, s) = (median(&mut unsplit), median(&mut split));
            let ratio = s.as_secs_f64() / u.as_secs_f64();
            ratios.push(ratio);
            println!(
                "{}",
                json!({
                    "bench": "split_overhead",
                    "model": model.name(),
                    "flops_fraction": fraction,
                    "prefix_flops_fraction": cut.prefix_flops(g) as f64 / g.total_flops().max(1) as f64,
                    "prefix_layers": cut.prefix_len(),
                    "layers": g.nodes().len(),
                    "crossing_tensors": cut.up_tensors().len(),
                    "up_bytes": cut.up_bytes(),
                    "unsplit_ms": ms(u),
                    "split_ms": ms(s),
                    "ratio": ratio,
                    "runs": runs,
                    "new_cut_build_ms": ms(build),
                    "cached_switch_us": switch.as_secs_f64() * 1e6,
                })
            );
            eprintln!(
                "{:<22} cut@{:>3.0}%  unsplit {:>9.3} ms  split {:>9.3} ms  ratio {:.3}  build {:>8.1} ms  cached {:>6.1} us",
                model.name(),
                fraction * 100.0,
                ms(u),
                ms(s),
                ratio,
                ms(build),
                switch.as_secs_f64() * 1e6
            );
        }
    }
    ratios.sort_by(f64::total_cmp);
    if let (Some(first), Some(last)) = (ratios.first(), ratios.last()) {
        println!(
            "{}",
            json!({"bench": "split_overhead_summary", "cases": ratios.len(), "min_ratio": first,
                   "median_ratio": ratios[ratios.len() / 2], "max_ratio": last})
        );
    }
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn decision_time(models: Vec<PathBuf>, runs: usize, dvfs: bool) -> anyhow::Result<()> {
    use tandem::device::DeviceProfile;
    use tandem::energy::{ClusterEnergy, PowerModel};
    use tandem::partition::{
        decide, decide_with, DecisionInput, EnergyWeights, HandheldStatus, LatencyHint, LinkEstimate, Method,
        Mode, Side, Simplified,
    };
    use tandem::predict::{FlopsModel, Scaled};

    let models =
        if models.is_empty() { default_models()? } else { models.into_iter().map(|m| (m, None)).collect() };
    let watch = DeviceProfile::shipped("watch-w5")?;
    let phone = DeviceProfile::shipped("pixel-8-pro")?;
    let (we, pe) = (
        ClusterEnergy::new(&watch, PowerModel::Analytical)?,
        ClusterEnergy::new(&phone, PowerModel::Analytical)?,
    );
    // The decision's cost does not depend on which predictor priced the layers.
    let host = FlopsModel { us_per_mac: 1e-4, overhead_us: 20.0 };
    let (wl, pl) = (
        Scaled { inner: &host, slowdown: watch.slowdown },
        Scaled { inner: &host, slowdown: phone.slowdown },
    );
    for (path, input) in models {
        let model =
            Model::from_path(&path, &InputShapes::none()).with_context(|| path.display().to_string())?;
        let g = model.graph();
        let inputs = match &input {
            Some(pb) => inputs_from_pb(&model, pb)?,
            None => random_inputs(&model, 0)?,
        };
        let plan = full_plan(&model)?;
        let input_for = |hint| DecisionInput {
            graph: g,
            wearable: Side { latency: &wl, energy: &we },
            handheld: Side { latency: &pl, energy: &pe },
            link: LinkEstimate {
                up_bytes_per_s: 125e3,
                down_bytes_per_s: 125e3,
                rtt: Duration::from_millis(30),
            },
            status: HandheldStatus { load: 0.5 },
            weights: EnergyWeights::default(),
            hint,
            mode: Mode::Single,
            codecs: None,
        };
        // A finite PropT halfway between the fastest and the least-energy
        // cut's latency: the case that needs the Lagrangian search.
        let fast = decide(&input_for(LatencyHint::Fastest), Method::MinCut)?.evaluation.latency_s;
        let frugal = decide(&input_for(LatencyHint::EnergyFirst), Method::MinCut)?.evaluation.latency_s;
        let mid = Duration::from_secs_f64((fast + frugal.max(fast)) / 2.0);
        // The simplified DAG depends on the graph alone: a planner computes it once.
        let started = Instant::now();
        let simplified = Simplified::new(g);
        let simplify_time = started.elapsed();
        let variants = [
            (Method::Heuristic, LatencyHint::Fastest, Mode::Single),
            (Method::MinCut, LatencyHint::Fastest, Mode::Single),
            (Method::MinCut, LatencyHint::Within(mid), Mode::Single),
            (Method::MinCut, LatencyHint::Fastest, Mode::Stream),
        ];
        for (method, hint, mode) in variants {
            let decision_input = DecisionInput { mode, ..input_for(hint) };
            // Alternate decisions and inferences so both see the same machine.
            let (mut d_times, mut i_times) = (vec![], vec![]);
            for i in 0..runs + 2 {
                let t = Instant::now();
                let d = if dvfs {
                    let spec = tandem::partition::dvfs::Dvfs {
                        wearable: &watch,
                        handheld: None,
                        power: PowerModel::Analytical,
                        simplified: Some(&simplified),
                    };
                    tandem::partition::dvfs::decide_dvfs(&decision_input, method, spec)
                        .map_err(anyhow::Error::msg)?
                        .decision
                } else {
                    decide_with(&decision_input, method, Some(&simplified))?
                };
                let dt = t.elapsed();
                let t = Instant::now();
                plan.run(g, &inputs)?;
                let it = t.elapsed();
                std::hint::black_box(d);
                if i >= 2 {
                    d_times.push(dt);
                    i_times.push(it);
                }
            }
            let (d, inf) = (median(&mut d_times), median(&mut i_times));
            let share = d.as_secs_f64() / inf.as_secs_f64().max(1e-12) * 100.0;
            let hint_name = match hint {
                LatencyHint::Within(_) => "mid",
                _ => "0",
            };
            let method_name = format!("{method:?}").to_lowercase();
            let mode_name = format!("{mode:?}").to_lowercase();
            println!(
                "{}",
                json!({"bench": "decision_time", "model": model.name(), "layers": g.nodes().len(),
                       "method": method_name, "mode": mode_name,
                       "latency_hint": hint_name, "decision_ms": ms(d), "inference_ms": ms(inf),
                       "decision_pct_of_inference": share, "simplify_once_ms": ms(simplify_time),
                       "dvfs": dvfs, "runs": runs})
            );
            eprintln!(
                "{:<22} {:>5} layers  {:<9} {:<6} PropT {:<4} decision {:>8.3} ms  inference {:>9.3} ms  {:>7.3}%",
                model.name(),
                g.nodes().len(),
                method_name,
                mode_name,
                hint_name,
                ms(d),
                ms(inf),
                share
            );
        }
    }
    Ok(())
}

fn oracle(models: Vec<PathBuf>, runs: usize, stream: bool, remeasure: bool) -> anyhow::Result<()> {
    use tandem::partition::{EnergyWeights, Method, Mode};
    use tandem_tools::oracle::{run_oracle, summarize, Measure, OracleGrid, PairSetup};
    let models =
        if models.is_empty() { default_models()? } else { models.into_iter().map(|m| (m, None)).collect() };
    let setup = PairSetup::new(
        tandem::device::DeviceProfile::shipped("watch-w5")?,
        tandem::device::DeviceProfile::shipped("pixel-8-pro")?,
        Duration::from_millis(30),
        EnergyWeights::default(),
        if stream { Mode::Stream } else { Mode::Single },
    )?;
    let methods = [Method::Heuristic, Method::MinCut];
    let mut all = vec![];
    for (path, input) in models {
        let model =
            Model::from_path(&path, &InputShapes::none()).with_context(|| path.display().to_string())?;
        let inputs = match &input {
            Some(pb) => inputs_from_pb(&model, pb)?,
            None => random_inputs(&model, 0)?,
        };
        let started = Instant::now();
        let predictor = tandem::predict::ProfiledLatency::measure(&model, &inputs)?;
        let pair = setup.pair(&predictor);
        let run = run_oracle(
            &model,
            &inputs,
            &pair,
            &OracleGrid::default(),
            &methods,
            Measure { runs, remeasure },
            |_, _| {},
        )?;
        let (cases, candidates) = (run.cases, run.timings.len());
        for (t, p) in run.timings.iter().zip(&run.predicted) {
            println!(
                "{}",
                json!({"bench": "oracle_cut", "model": model.name(), "prefix_nodes": t.cut.prefix_len(),
                       "up_bytes": t.cut.up_bytes(), "down_bytes": t.cut.down_bytes(),
                       "prefix_ms": ms(Duration::from_secs_f64(t.prefix_s)),
                       "suffix_ms": ms(Duration::from_secs_f64(t.suffix_s)),
                       "predicted_prefix_ms": p.0 * 1e3, "predicted_suffix_ms": p.1 * 1e3})
            );
        }
        for c in &cases {
            println!("{}", json!({"bench": "oracle_case", "emulated_pair": true, "case": c}));
        }
        let line: Vec<_> = methods.iter().map(|&m| summarize(&cases, m)).collect();
        println!(
            "{}",
            json!({"bench": "oracle_model", "model": model.name(), "candidates": candidates,
                   "seconds": started.elapsed().as_secs_f64(), "summaries": line})
        );
        for s in &line {
            eprintln!(
                "{:<22} {:<9} {:>3} cuts  optimal {:>2}/{}  within 5% {:>2}  worst x{:.3}  re-measured best {:?} worst {:?}",
                model.name(),
                format!("{:?}", s.method).to_lowercase(),
                candidates,
                s.optimal,
                s.cases,
                s.within_5pct,
                s.worst_ratio,
                s.remeasured_optimal,
                s.remeasured_worst_ratio
            );
        }
        all.extend(cases);
    }
    let summaries: Vec<_> = methods.iter().map(|&m| summarize(&all, m)).collect();
    println!(
        "{}",
        json!({"bench": "oracle", "emulated_pair": true, "wearable": setup.wearable.name,
               "handheld": setup.handheld.name, "stream": stream, "runs": runs, "remeasure": remeasure,
               "summaries": summaries})
    );
    Ok(())
}
