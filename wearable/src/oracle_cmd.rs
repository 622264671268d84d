//! `tandem-wearable oracle`: the partitioner's choices against an oracle
//! that measured every candidate cut, on an emulated pair (see
//! `tandem_tools::oracle`). Prints one line per case, a summary per method, then
//! one JSON line.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use tandem::device::DeviceProfile;
use tandem::partition::{EnergyWeights, Method, Mode};
use tandem::predict::{LatencyModel, ProfiledLatency};
use tandem::Model;
use tandem_tools::oracle::{run_oracle, summarize, Measure, OracleCase, OracleGrid, PairSetup};

use crate::predict_cmd::load_predictors;
use crate::sweep_cmd::parse_duration;

/// Arguments of `oracle`.
#[derive(clap::Args)]
pub struct OracleArgs {
    /// ONNX models to check; repeatable.
    #[arg(long, required = true)]
    pub model: Vec<PathBuf>,
    /// Shape overrides and symbol values, applied to every model.
    #[command(flatten)]
    pub shapes: tandem_tools::cli::ShapeArgs,
    /// The wearable's profile (a shipped name or a file).
    #[arg(long, default_value = "watch-w5")]
    pub wearable: String,
    /// The handheld's profile (a shipped name or a file).
    #[arg(long, default_value = "pixel-8-pro")]
    pub handheld: String,
    /// Round-trip time of the emulated link.
    #[arg(long, default_value = "30ms", value_parser = parse_duration)]
    pub rtt: Duration,
    /// Wearable energy weight Ww in [0, 1]; Wp = 1 − Ww.
    #[arg(long, default_value_t = 0.5)]
    pub ww: f64,
    /// Measured rounds per candidate cut (medians), after one warm-up.
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Check the stream objective (per-frame period) instead of single inference.
    #[arg(long)]
    pub stream: bool,
    /// Measure every cut twice and report the noise ceiling: how often the
    /// first measurement's best cut is still best on the second.
    #[arg(long)]
    pub remeasure: bool,
    /// Trained predictors (`predict fit --out`); without, each model is profiled here first.
    #[arg(long)]
    pub predictors: Option<PathBuf>,
}

/// Runs the check and prints it.
pub fn run(args: OracleArgs) -> Result<ExitCode> {
    if !(0.0..=1.0).contains(&args.ww) {
        bail!("--ww {} is outside [0, 1]", args.ww);
    }
    if args.runs == 0 {
        bail!("--runs must be at least 1");
    }
    let setup = PairSetup::new(
        DeviceProfile::load(&args.wearable)?,
        DeviceProfile::load(&args.handheld)?,
        args.rtt,
        EnergyWeights { wearable: args.ww, handheld: 1.0 - args.ww },
        if args.stream { Mode::Stream } else { Mode::Single },
    )?;
    let (wearable, handheld) = (&setup.wearable, &setup.handheld);
    let trained = args.predictors.as_deref().map(load_predictors).transpose()?;
    let methods = [Method::Heuristic, Method::MinCut];
    let grid = OracleGrid::default();
    println!(
        "emulated pair: {} (x{} host time) + {} (x{} host time, x1/(1-load)), RTT {:?}; energy model-based",
        wearable.name, wearable.slowdown, handheld.name, handheld.slowdown, args.rtt
    );
    let mut all: Vec<OracleCase> = vec![];
    let shapes = args.shapes.shapes()?;
    for path in &args.model {
        let model = Model::from_path(path, &shapes).with_context(|| path.display().to_string())?;
        let inputs = tandem::check::random_inputs(&model, 0)?;
        let profiled;
        let predictor: &dyn LatencyModel = match &trained {
            Some(p) => &p.dt_lr,
            None => {
                profiled = ProfiledLatency::measure(&model, &inputs)?;
                &profiled
            }
        };
        let pair = setup.pair(predictor);
        let bar = ProgressBar::new(0).with_message(model.name().to_string());
        bar.set_style(
            ProgressStyle::with_template("{msg} measuring cuts {pos}/{len} [{elapsed}]")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        let run = run_oracle(
            &model,
            &inputs,
            &pair,
            &grid,
            &methods,
            Measure { runs: args.runs, remeasure: args.remeasure },
            |done, total| {
                bar.set_length(total as u64);
                bar.set_position(done as u64);
            },
        )?;
        let (cases, candidates) = (run.cases, run.timings.len());
        bar.finish_and_clear();
        println!("{}: {} candidate cuts measured", model.name(), candidates);
        for c in &cases {
            println!(
                "  {:>5.2} Mbit/s load {:>3.0}% PropT {:<4} {:<9} chose {:>4} layers, oracle {:>4}: x{:.3}{}",
                c.bandwidth_mbit,
                c.load * 100.0,
                c.hint,
                format!("{:?}", c.method).to_lowercase(),
                c.chosen_prefix_nodes,
                c.oracle_prefix_nodes,
                c.ratio,
                if c.optimal { "" } else { "  (not optimal)" }
            );
        }
        all.extend(cases);
    }
    let summaries: Vec<_> = methods.iter().map(|&m| summarize(&all, m)).collect();
    for s in &summaries {
        println!(
            "{:<9} optimal in {}/{} ({:.1}%), within 1% in {}, within 5% in {}/{}, worst x{:.3}, mean x{:.4}; \
             best cut a partial offload in {} cases, {} of them chosen",
            format!("{:?}", s.method).to_lowercase(),
            s.optimal,
            s.cases,
            100.0 * s.optimal as f64 / s.cases.max(1) as f64,
            s.within_1pct,
            s.within_5pct,
            s.cases,
            s.worst_ratio,
            s.mean_ratio,
            s.partial_cases,
            s.partial_optimal
        );
        if let (Some(o), Some(w)) = (s.remeasured_optimal, s.remeasured_worst_ratio) {
            println!(
                "          noise ceiling: a measurement's own best is best again on re-measuring in {o}/{}, worst x{w:.3}",
                s.cases
            );
        }
    }
    println!(
        "{}",
        serde_json::json!({
            "check": "oracle",
            "emulated_pair": true,
            "wearable": wearable.name,
            "handheld": handheld.name,
            "models": args.model.len(),
            "runs": args.runs,
            "summaries": summaries,
        })
    );
    Ok(ExitCode::SUCCESS)
}
