//! `tandem-wearable predict`: trains the latency predictors on a sweep
//! dataset and evaluates them against measurements on this machine.
//!
//! `fit` reports R² per layer class on held-out layers. `eval` measures
//! whole models, prefixes and suffixes at sampled cuts, and compares DT+LR,
//! EvoLP before and after evolution, and the FLOPs baseline side by side.
//! Evolution is trained on some variants of each model family and scored on
//! the others (held out), so no prediction is scored on data it learned from.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use tandem::predict::metrics::{r_squared, Accuracy};
use tandem::predict::mlp::MlpConfig;
use tandem::predict::{LatencyModel, LayerSample, PredictorSet, UnitPredictor};
use tandem::split::Half;
use tandem::{sample_cuts, InputShapes, Model, SplitExecutor, Values};
use tandem_models::{ensure_models, PrunedBase, ZooSpec};

use crate::sweep_cmd::{read_dataset, time_median};

/// Which models `eval` measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum EvalSet {
    /// A handful of models (a few minutes): the test's set.
    Quick,
    /// Every zoo model, the 16 MobileNet variants and the pruned CNNs.
    Full,
}

/// The `predict` subcommands.
#[derive(clap::Subcommand)]
pub enum PredictCommand {
    /// Fit DT+LR, EvoLP's layer-wise MLPs and the FLOPs baseline; report R² per
    /// layer class on held-out layers.
    Fit {
        /// Sweep datasets (JSON lines): `--data a.jsonl b.jsonl` or repeated.
        #[arg(long, required = true, num_args = 1..)]
        data: Vec<PathBuf>,
        /// Share of layers held out for R².
        #[arg(long, default_value_t = 0.2)]
        holdout: f64,
        /// Write the predictors trained on all layers to this JSON file.
        #[arg(long)]
        out: Option<PathBuf>,
        /// MLP training steps (mini-batches) per layer class.
        #[arg(long, default_value_t = MlpConfig::default().steps)]
        steps: usize,
    },
    /// Measure whole models and sampled prefixes/suffixes, and compare the
    /// predictors' RMSE, RMSPE and ±5%/±10% accuracy.
    Eval {
        /// Sweep datasets (JSON lines): `--data a.jsonl b.jsonl` or repeated.
        #[arg(long, required = true, num_args = 1..)]
        data: Vec<PathBuf>,
        /// The models to measure.
        #[arg(long, value_enum, default_value = "full")]
        set: EvalSet,
        /// Sampled cuts per model (each gives a prefix and a suffix).
        #[arg(long, default_value_t = 4)]
        cuts: usize,
        /// Measured runs per timing (median kept), after two warm-ups.
        #[arg(long, default_value_t = 9)]
        runs: usize,
        /// Seed of the cut sampling.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// MLP training steps (mini-batches) per layer class.
        #[arg(long, default_value_t = MlpConfig::default().steps)]
        steps: usize,
        /// Also print every measured part (model, part, nodes, measured and predicted ms).
        #[arg(long)]
        details: bool,
    },
}

/// Runs one `predict` subcommand.
pub fn run(cmd: PredictCommand) -> Result<ExitCode> {
    match cmd {
        PredictCommand::Fit { data, holdout, out, steps } => {
            let samples = load(&data)?;
            let config = MlpConfig { steps, ..MlpConfig::default() };
            layer_report(&samples, holdout, &config);
            if let Some(path) = out {
                let set = PredictorSet::fit(&samples, &config);
                std::fs::write(&path, serde_json::to_string(&set)?)
                    .with_context(|| format!("cannot write {}", path.display()))?;
                eprintln!("predictors written to {}", path.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        PredictCommand::Eval { data, set, cuts, runs, seed, steps, details } => {
            let samples = load(&data)?;
            let config = MlpConfig { steps, ..MlpConfig::default() };
            layer_report(&samples, 0.2, &config);
            let predictors = PredictorSet::fit(&samples, &config);
            model_report(&predictors, set, cuts, runs.max(1), seed, details)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Reads a predictors file written by `predict fit --out`.
pub fn load_predictors(path: &Path) -> Result<PredictorSet> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read predictors {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| {
        format!("{} is not a predictors file (write one with `predict fit --out`)", path.display())
    })
}

/// The rows of every dataset, all of one engine: predictors are fitted per
/// (device, engine), so rows of two engines in one fit are refused.
fn load(paths: &[PathBuf]) -> Result<Vec<LayerSample>> {
    let mut all: Vec<LayerSample> = vec![];
    for p in paths {
        for row in read_dataset(p)? {
            if let Some(first) = all.first().filter(|f| f.engine != row.engine) {
                anyhow::bail!(
                    "{} holds rows measured on {} after rows measured on {}: predictors are fitted per \
                     engine (sweep each engine into its own file with `sweep --engine`)",
                    p.display(),
                    row.engine,
                    first.engine
                );
            }
            all.push(row);
        }
    }
    Ok(all)
}

/// A stable pseudo-random split of the rows: every `1/holdout`-th by hash.
fn is_held_out(i: usize, holdout: f64) -> bool {
    let h = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 11;
    (h as f64 / (1u64 << 53) as f64) < holdout
}

/// Held-out R² and RMSPE per layer class for each predictor.
fn layer_report(samples: &[LayerSample], holdout: f64, config: &MlpConfig) {
    let test: Vec<&LayerSample> =
        samples.iter().enumerate().filter(|(i, _)| is_held_out(*i, holdout)).map(|(_, s)| s).collect();
    let train: Vec<LayerSample> = samples
        .iter()
        .enumerate()
        .filter(|(i, _)| !is_held_out(*i, holdout))
        .map(|(_, s)| s.clone())
        .collect();
    let set = PredictorSet::fit(&train, config);
    println!("layer-level, held-out {} of {} layers (R² = 1 - SSE/SST on µs)", test.len(), samples.len());
    println!(
        "{:<11} {:>5}  {:>8} {:>8} {:>8}  {:>9} {:>9} {:>9}",
        "class", "n", "R2 dt-lr", "R2 mlp", "R2 flops", "RMSPE dt", "RMSPE mlp", "RMSPE fl"
    );
    for class in tandem::predict::features::CLASSES {
        let rows: Vec<&LayerSample> = test.iter().copied().filter(|s| s.features.kind == class).collect();
        if rows.is_empty() {
            continue;
        }
        let pairs = |f: &dyn Fn(&LayerSample) -> f64| -> Vec<(f64, f64)> {
            rows.iter().map(|s| (f(s), s.target_us().max(0.05))).collect()
        };
        let dt = pairs(&|s| set.dt_lr.unit_us(&s.features).unwrap_or(0.0));
        let mlp = pairs(&|s| set.evolp.lwlp.unit_us(&s.features).unwrap_or(0.0));
        let fl = pairs(&|s| s.features.macs * set.flops.us_per_mac);
        let rmspe = |p: &[(f64, f64)]| Accuracy::of(p).rmspe_pct;
        println!(
            "{:<11} {:>5}  {:>8.3} {:>8.3} {:>8.3}  {:>8.1}% {:>8.1}% {:>8.1}%",
            class,
            rows.len(),
            r_squared(&dt),
            r_squared(&mlp),
            r_squared(&fl),
            rmspe(&dt),
            rmspe(&mlp),
            rmspe(&fl)
        );
        println!(
            "{}",
            serde_json::json!({
                "level": "layer", "class": class, "n": rows.len(),
                "r2_dt_lr": r_squared(&dt), "r2_mlp": r_squared(&mlp), "r2_flops": r_squared(&fl),
                "rmspe_dt_lr": rmspe(&dt), "rmspe_mlp": rmspe(&mlp), "rmspe_flops": rmspe(&fl),
                "subtypes": set.dt_lr.trees.get(class).map(|t| t.describe()).unwrap_or_default(),
                "mlp_macs": set.evolp.lwlp.nets.get(class).map(|n| n.mlp.macs()),
            })
        );
    }
}

/// One model to measure: its family (variants sharing layer names) and
/// whether its measurements train the evolution or are held out.
struct EvalModel {
    family: &'static str,
    spec: ZooSpec,
    evolve: bool,
}

fn eval_models(set: EvalSet) -> Vec<EvalModel> {
    let m = |family, spec, evolve| EvalModel { family, spec, evolve };
    let mobilenet = |a, r| ZooSpec::MobileNetV1 { alpha_percent: a, resolution: r };
    let pruned = |base, keep_percent| ZooSpec::Pruned { base, keep_percent };
    match set {
        EvalSet::Quick => vec![
            m("mobilenet", mobilenet(50, 128), true),
            m("mobilenet", mobilenet(50, 160), true),
            m("mobilenet", mobilenet(25, 128), false),
            m("mobilenet", mobilenet(75, 160), false),
            m("mnist", ZooSpec::Mnist, true),
            m("mnist", pruned(PrunedBase::Mnist, 50), true),
            m("mnist", pruned(PrunedBase::Mnist, 75), false),
            m("lstm_har", ZooSpec::LstmHar, true),
        ],
        EvalSet::Full => {
            let mut v = vec![];
            for spec in tandem_models::mobilenet_variants() {
                let ZooSpec::MobileNetV1 { alpha_percent, .. } = spec else { continue };
                v.push(m("mobilenet", spec, alpha_percent == 100 || alpha_percent == 50));
            }
            for (family, base, unpruned) in [
                ("mnist", PrunedBase::Mnist, ZooSpec::Mnist),
                ("wavenet", PrunedBase::WaveNet, ZooSpec::WaveNet),
                ("deepear", PrunedBase::DeepEar, ZooSpec::DeepEar),
            ] {
                v.push(m(family, unpruned, true));
                for keep in tandem_models::zoo::PRUNED_KEEP_PERCENT {
                    v.push(m(family, pruned(base, keep), keep == 50));
                }
            }
            v.push(m("lstm_har", ZooSpec::LstmHar, true));
            v.push(m("text_rnn", ZooSpec::TextRnn, true));
            v.push(m("text_rnn_lstm", ZooSpec::TextRnnLstm, true));
            v
        }
    }
}

/// A measured run of some nodes of a model.
struct Measured {
    /// `whole`, `prefix` or `suffix`.
    part: &'static str,
    mask: Vec<bool>,
    time: Duration,
}

/// The median of `runs` timed calls after two warm-ups.
fn median(runs: usize, f: impl FnMut() -> Result<()>) -> Result<Duration> {
    time_median(2, runs, f)
}

/// A model's measurements, with its unsplit plan and inputs kept so the
/// whole model can be timed again without rebuilding anything.
struct Timed {
    plan: Half,
    inputs: Values,
    parts: Vec<Measured>,
}

impl Timed {
    fn whole(&self, model: &Model, runs: usize) -> Result<Duration> {
        median(runs, || self.plan.run(model.graph(), &self.inputs).map(drop).map_err(Into::into))
    }
}

fn measure(model: &Model, cuts: usize, runs: usize, seed: u64) -> Result<Timed> {
    let graph = model.graph();
    let inputs = tandem::check::random_inputs(model, seed)?;
    let plan = tandem::split::full_plan(model)?;
    let mut timed = Timed { plan, inputs, parts: vec![] };
    let whole = timed.whole(model, runs)?;
    let inputs = &timed.inputs;
    let mut out = vec![Measured { part: "whole", mask: vec![true; graph.nodes().len()], time: whole }];
    let executor = SplitExecutor::new(model.clone());
    for cut in sample_cuts(graph, cuts, seed) {
        let plan = executor.plan(&cut)?;
        let up = plan.run_prefix(graph, inputs)?;
        let prefix = cut.prefix_mask().to_vec();
        let suffix: Vec<bool> = prefix.iter().map(|b| !b).collect();
        let t_prefix = median(runs, || plan.run_prefix(graph, inputs).map(drop).map_err(Into::into))?;
        let t_suffix = median(runs, || plan.run_suffix(graph, &up).map(drop).map_err(Into::into))?;
        out.push(Measured { part: "prefix", mask: prefix, time: t_prefix });
        out.push(Measured { part: "suffix", mask: suffix, time: t_suffix });
    }
    timed.parts = out;
    Ok(timed)
}

/// Predictions of every predictor for one measurement: (flops, dt-lr, evolp before, evolp after).
struct Scored {
    family: &'static str,
    model: String,
    part: &'static str,
    nodes: usize,
    held_out: bool,
    measured: f64,
    predicted: [f64; 4],
}

const PREDICTORS: [&str; 4] = ["flops", "dt-lr", "evolp", "evolp-evolved"];

fn model_report(
    predictors: &PredictorSet,
    set: EvalSet,
    cuts: usize,
    runs: usize,
    seed: u64,
    details: bool,
) -> Result<()> {
    let paths = ensure_models()?;
    let models = eval_models(set);
    let mut loaded = vec![];
    for (i, m) in models.iter().enumerate() {
        let name = m.spec.name();
        let path: &Path = paths.zoo_path(&name).with_context(|| format!("zoo model {name} missing"))?;
        let model = Model::from_path(path, &InputShapes::none())?;
        eprintln!("[{}/{}] measuring {name}", i + 1, models.len());
        let measured = measure(&model, cuts, runs, seed)?;
        loaded.push((m, model, measured));
    }
    // Evolve one EvoLP per family on its training models' measurements. A
    // family of one model evolves on its whole runs only; its parts stay held out.
    let single = |family: &str| models.iter().filter(|o| o.family == family).count() == 1;
    let mut evolved = std::collections::BTreeMap::new();
    for (m, model, measured) in loaded.iter().filter(|(m, _, _)| m.evolve) {
        let evo = evolved.entry(m.family).or_insert_with(|| predictors.evolp.clone());
        for x in measured.parts.iter().filter(|x| !single(m.family) || x.part == "whole") {
            evo.observe(model.graph(), &x.mask, x.time);
        }
    }
    let mut scored = vec![];
    for (m, model, measured) in &loaded {
        let g = model.graph();
        let costs = [
            predictors.flops.node_costs(g),
            predictors.dt_lr.node_costs(g),
            predictors.evolp.node_costs(g),
            evolved.get(m.family).unwrap_or(&predictors.evolp).node_costs(g),
        ];
        for x in &measured.parts {
            let held_out = !m.evolve || (single(m.family) && x.part != "whole");
            scored.push(Scored {
                family: m.family,
                model: model.name().to_string(),
                part: x.part,
                nodes: x.mask.iter().filter(|m| **m).count(),
                held_out,
                measured: x.time.as_secs_f64(),
                predicted: costs.each_ref().map(|c| c.sum(&x.mask).as_secs_f64()),
            });
        }
    }
    // The noise ceiling: every whole model timed again, after all the others.
    let mut again = vec![];
    for (m, model, measured) in &loaded {
        again.push((!m.evolve, measured.whole(model, runs)?.as_secs_f64()));
    }
    if details {
        println!(
            "{:<24} {:<7} {:>5} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "model", "part", "nodes", "measured", "flops", "dt-lr", "evolp", "evolved"
        );
        for s in &scored {
            let p = s.predicted.map(|v| v * 1e3);
            println!(
                "{:<24} {:<7} {:>5} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3}",
                s.model,
                s.part,
                s.nodes,
                s.measured * 1e3,
                p[0],
                p[1],
                p[2],
                p[3]
            );
        }
    }
    println!();
    println!("whole-model latency on this machine (ms)");
    println!(
        "{:<24} {:>9} {:>9} {:>9} {:>9} {:>9}  held-out",
        "model", "measured", "flops", "dt-lr", "evolp", "evolved"
    );
    for s in scored.iter().filter(|s| s.part == "whole") {
        let p = s.predicted.map(|v| v * 1e3);
        println!(
            "{:<24} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3}  {}",
            s.model,
            s.measured * 1e3,
            p[0],
            p[1],
            p[2],
            p[3],
            if s.held_out { "yes" } else { "" }
        );
    }
    println!();
    println!(
        "{:<34} {:<14} {:>4} {:>10} {:>9} {:>7} {:>7}",
        "set", "predictor", "n", "RMSE ms", "RMSPE %", "±5 %", "±10 %"
    );
    type Filter = Box<dyn Fn(&Scored) -> bool>;
    let sets: [(&str, Filter); 5] = [
        ("held-out whole models", Box::new(|s: &Scored| s.held_out && s.part == "whole")),
        ("held-out prefixes and suffixes", Box::new(|s: &Scored| s.held_out && s.part != "whole")),
        (
            "held-out parts >= 0.1 ms",
            Box::new(|s: &Scored| s.held_out && s.part != "whole" && s.measured >= 1e-4),
        ),
        ("held-out, all", Box::new(|s: &Scored| s.held_out)),
        ("all (evolution in-sample)", Box::new(|_: &Scored| true)),
    ];
    for (label, keep) in &sets {
        for (k, predictor) in PREDICTORS.iter().enumerate() {
            let pairs: Vec<(f64, f64)> =
                scored.iter().filter(|s| keep(s)).map(|s| (s.predicted[k], s.measured)).collect();
            if pairs.is_empty() {
                continue;
            }
            let a = Accuracy::of(&pairs);
            println!(
                "{:<34} {:<14} {:>4} {:>10.3} {:>9.1} {:>7.1} {:>7.1}",
                label, predictor, a.n, a.rmse_ms, a.rmspe_pct, a.within_5_pct, a.within_10_pct
            );
            println!(
                "{}",
                serde_json::json!({"level": "model", "set": label, "predictor": predictor, "accuracy": a})
            );
        }
    }
    let wholes = scored.iter().filter(|s| s.part == "whole");
    let pairs: Vec<(bool, (f64, f64))> =
        wholes.zip(&again).map(|(s, &(held_out, t))| (held_out, (t, s.measured))).collect();
    for (label, held_only) in [("held-out whole models", true), ("all whole models", false)] {
        let p: Vec<(f64, f64)> = pairs.iter().filter(|(h, _)| *h || !held_only).map(|(_, p)| *p).collect();
        let a = Accuracy::of(&p);
        println!(
            "{:<34} {:<14} {:>4} {:>10.3} {:>9.1} {:>7.1} {:>7.1}",
            label, "re-measured", a.n, a.rmse_ms, a.rmspe_pct, a.within_5_pct, a.within_10_pct
        );
        println!(
            "{}",
            serde_json::json!({"level": "model", "set": label, "predictor": "re-measured", "accuracy": a})
        );
    }
    let families: std::collections::BTreeSet<&str> = scored.iter().map(|s| s.family).collect();
    eprintln!("families: {}", families.into_iter().collect::<Vec<_>>().join(", "));
    Ok(())
}
