//! `tandem-wearable plan`: decides the partition of a model for a
//! wearable/handheld pair under given link, load, weights and latency hint,
//! and prints the decision (a table, then one JSON line).
//!
//! Latency comes from trained predictors (`--predictors`) or, without them,
//! from a per-node profile of the model measured on this host; either way
//! scaled by each profile's slowdown. Energy is model-based.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Result};
use tandem::device::DeviceProfile;
use tandem::energy::{ClusterEnergy, PowerModel};
use tandem::partition::{
    decide_with, DecisionInput, EnergyWeights, HandheldStatus, LatencyHint, LinkEstimate, Method, Mode, Side,
    Simplified,
};
use tandem::predict::{LatencyModel, ProfiledLatency, Scaled};

use crate::predict_cmd::load_predictors;
use tandem::Model;

use crate::sweep_cmd::parse_duration;

/// How candidates are found, as a CLI value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum MethodArg {
    /// DeepWear's representative cuts: every cut of the simplified DAG.
    Heuristic,
    /// s–t minimum cuts and a Lagrangian search for the latency hint.
    Mincut,
    /// Every cut (small DAGs only).
    Exhaustive,
    /// Neurosurgeon's: every prefix of the layers in topological order.
    Chain,
}

impl From<MethodArg> for Method {
    fn from(m: MethodArg) -> Method {
        match m {
            MethodArg::Heuristic => Method::Heuristic,
            MethodArg::Mincut => Method::MinCut,
            MethodArg::Exhaustive => Method::Exhaustive,
            MethodArg::Chain => Method::Chain,
        }
    }
}

/// Arguments of `plan`.
#[derive(clap::Args)]
pub struct PlanArgs {
    /// The ONNX model.
    #[arg(long)]
    pub model: PathBuf,
    #[command(flatten)]
    pub shapes: tandem_tools::cli::ShapeArgs,
    /// The wearable's profile (a shipped name or a file).
    #[arg(long, default_value = "watch-w5")]
    pub wearable: String,
    /// The handheld's profile (a shipped name or a file).
    #[arg(long, default_value = "pixel-8-pro")]
    pub handheld: String,
    /// Link rate both ways, e.g. `1mbit`, `700kbit`, `250kB` (bytes), `2mbps`.
    #[arg(long, value_parser = parse_rate)]
    pub bandwidth: f64,
    /// Round-trip time.
    #[arg(long, default_value = "30ms", value_parser = parse_duration)]
    pub rtt: Duration,
    /// Handheld CPU load in [0, 1].
    #[arg(long, default_value_t = 0.0)]
    pub load: f64,
    /// Wearable energy weight Ww in [0, 1]; Wp = 1 − Ww.
    #[arg(long, default_value_t = 0.5)]
    pub ww: f64,
    /// Latency hint PropT: `0` (fastest), `inf` (least energy) or a duration like `200ms`.
    #[arg(long, default_value = "0", value_parser = parse_hint)]
    pub latency_hint: LatencyHint,
    /// Partition for a pipelined stream (per-frame time = slowest stage).
    #[arg(long)]
    pub stream: bool,
    /// Candidate search.
    #[arg(long, value_enum, default_value = "mincut")]
    pub method: MethodArg,
    /// Trained predictors (`predict fit --out`); without, the model is profiled here.
    #[arg(long)]
    pub predictors: Option<PathBuf>,
    /// Link encodings to price per crossing tensor, as `run` and `stream`
    /// send them: `raw`, `lossless`, or `lossy` (within `--accuracy`),
    /// measured on `--input`, else on a random input.
    #[command(flatten)]
    pub coding: crate::paired_cmd::EncodingArgs,
    /// A real input to measure the encodings' ratios (and a lossy budget)
    /// on: a file for a single-input model, or `NAME=FILE` for each input;
    /// a FILE is `.npy` or a serialized TensorProto `.pb`.
    #[arg(long, value_name = "FILE|NAME=FILE")]
    pub input: Vec<String>,
    /// The model card: inputs it gives a sensor type (u8, i16) may cross
    /// as those values, or as JPEG when lossy.
    #[arg(long)]
    pub card: Option<PathBuf>,
    /// Choose the wearable's cluster and frequency with the cut (its
    /// profile's clusters, 5 operating points each); the JSON line gains
    /// `cluster` and `f_hz`.
    #[arg(long)]
    pub dvfs: bool,
}

/// Parses a link rate into bytes per second: `1mbit`, `700kbit`, `2mbps`
/// (bits), `250kB`, `1MB` (bytes), or a bare number of bits per second.
pub fn parse_rate(s: &str) -> std::result::Result<f64, String> {
    let t = s.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num.trim().parse().map_err(|_| format!("bad rate '{s}' (e.g. 1mbit, 700kbit, 250kB)"))?;
    let bytes_per_s = match unit {
        "" | "bit" | "bps" => v / 8.0,
        "kbit" | "kbps" => v * 1e3 / 8.0,
        "mbit" | "mbps" | "Mbit" | "Mbps" => v * 1e6 / 8.0,
        "B" => v,
        "kB" | "KB" => v * 1e3,
        "MB" => v * 1e6,
        _ => return Err(format!("bad rate unit in '{s}' (bit, kbit, mbit, B, kB, MB)")),
    };
    if !(bytes_per_s.is_finite() && bytes_per_s > 0.0) {
        return Err(format!("rate '{s}' must be positive"));
    }
    Ok(bytes_per_s)
}

/// Parses PropT: `0`, `inf`, or a duration.
pub fn parse_hint(s: &str) -> std::result::Result<LatencyHint, String> {
    match s.trim() {
        "0" => Ok(LatencyHint::Fastest),
        "inf" | "infinity" | "none" => Ok(LatencyHint::EnergyFirst),
        other => {
            parse_duration(other).map(
                |d| {
                    if d.is_zero() {
                        LatencyHint::Fastest
                    } else {
                        LatencyHint::Within(d)
                    }
                },
            )
        }
    }
}

/// Decides and prints.
pub fn run(args: PlanArgs) -> Result<ExitCode> {
    if !(0.0..=1.0).contains(&args.load) {
        bail!("--load {} is outside [0, 1]", args.load);
    }
    if !(0.0..=1.0).contains(&args.ww) {
        bail!("--ww {} is outside [0, 1]", args.ww);
    }
    let model = Model::from_path(&args.model, &args.shapes.shapes()?)?;
    let graph = model.graph();
    let wearable = DeviceProfile::load(&args.wearable)?;
    let handheld = DeviceProfile::load(&args.handheld)?;
    let (w_energy, h_energy) = (
        ClusterEnergy::new(&wearable, PowerModel::Analytical)?,
        ClusterEnergy::new(&handheld, PowerModel::Analytical)?,
    );
    let base: Box<dyn LatencyModel> = match &args.predictors {
        Some(path) => Box::new(load_predictors(path)?.dt_lr),
        None => Box::new(ProfiledLatency::measure(&model, &tandem::check::random_inputs(&model, 0)?)?),
    };
    let w_lat = Scaled { inner: base.as_ref(), slowdown: wearable.slowdown };
    let h_lat = Scaled { inner: base.as_ref(), slowdown: handheld.slowdown };
    let mut config = tandem::client::SessionConfig::new(wearable.clone(), handheld.clone());
    args.coding.apply(&mut config)?;
    if let Some(path) = &args.card {
        let card = tandem::card::ModelCard::load(path)?;
        card.check(&model)?;
        config.use_card(&card);
    }
    let inputs = tandem::check::inputs_from_specs(&model, &args.input, 0)?;
    let mut codecs = match config.encodings {
        tandem::encoding::Allowed::Raw => None,
        allowed => {
            // Encoding on the watch and decoding on the phone at their slowdowns against this host.
            let slowdown = (wearable.slowdown.max(1.0), handheld.slowdown.max(0.0));
            Some(tandem::client::codecs::calibrate(&model, &inputs, allowed, slowdown, &config.widenings)?)
        }
    };
    let budget = match config.accuracy.filter(|_| config.encodings == tandem::encoding::Allowed::Lossy) {
        Some(accuracy) => Some((accuracy, tandem::client::codecs::Calibration::new(&model, &inputs)?)),
        None => None,
    };
    let executor = tandem::SplitExecutor::new(model.clone());
    let method = Method::from(args.method);
    let simplified = Simplified::new(graph);
    // Lossy encodings stay only where the chosen cut keeps the input's
    // outputs within the budget; otherwise they are dropped and it re-decides.
    let mut worst = None;
    let mut setting;
    let d = loop {
        let input = DecisionInput {
            graph,
            wearable: Side { latency: &w_lat, energy: &w_energy },
            handheld: Side { latency: &h_lat, energy: &h_energy },
            link: LinkEstimate {
                up_bytes_per_s: args.bandwidth,
                down_bytes_per_s: args.bandwidth,
                rtt: args.rtt,
            },
            status: HandheldStatus { load: args.load },
            weights: EnergyWeights { wearable: args.ww, handheld: 1.0 - args.ww },
            hint: args.latency_hint,
            mode: if args.stream { Mode::Stream } else { Mode::Single },
            codecs: codecs.as_ref(),
        };
        let (d, s) = if args.dvfs {
            let dvfs = tandem::partition::dvfs::Dvfs {
                wearable: &wearable,
                handheld: None,
                power: PowerModel::Analytical,
                simplified: Some(&simplified),
            };
            let dd =
                tandem::partition::dvfs::decide_dvfs(&input, method, dvfs).map_err(anyhow::Error::msg)?;
            (dd.decision, Some(dd.setting))
        } else {
            (decide_with(&input, method, Some(&simplified))?, None)
        };
        setting = s;
        let chosen: Vec<tandem::encoding::Encoding> = d
            .chosen
            .up_tensors()
            .iter()
            .map(|&t| {
                let label = d.encodings.get(&graph.tensor(t).name).map_or("raw", String::as_str);
                tandem::encoding::Encoding::parse(label).unwrap_or(tandem::encoding::Encoding::Raw)
            })
            .collect();
        let (Some((accuracy, calibration)), Some(c)) = (&budget, &mut codecs) else { break d };
        if chosen.iter().all(|e| e.is_lossless()) {
            break d;
        }
        let (ok, error) = tandem::client::codecs::within_budget(
            &model,
            &executor,
            &d.chosen,
            &chosen,
            calibration,
            *accuracy,
            &config.widenings,
        )?;
        if ok {
            worst = Some(error);
            break d;
        }
        for (&t, e) in d.chosen.up_tensors().iter().zip(&chosen) {
            if !e.is_lossless() {
                c.per_tensor[t].retain(|o| o.label != e.name());
            }
        }
    };
    let e = &d.evaluation;
    let ms = |s: f64| s * 1e3;
    println!(
        "{} on {} + {} (emulated pair: host latency x slowdown; energy model-based), {:.0} kbit/s, RTT {:?}",
        model.name(),
        wearable.name,
        handheld.name,
        args.bandwidth * 8.0 / 1e3,
        args.rtt
    );
    println!(
        "method      {:?} ({} candidates{})",
        d.method,
        d.candidates,
        if d.optimal { ", proven optimal under the predictions" } else { "" }
    );
    println!(
        "choice      {} of {} layers on the wearable; {}",
        d.prefix_nodes,
        graph.nodes().len(),
        d.reason
    );
    if method == Method::Heuristic {
        let st = simplified.stats();
        println!(
            "simplified  {} layers -> {} after pruning light layers -> {} virtual nodes ({} repeated blocks bundled)",
            st.layers, st.after_pruning, st.after_bundling, st.bundled_blocks
        );
    }
    let crossing: Vec<String> = d
        .cut
        .iter()
        .map(|t| match d.encodings.get(t).filter(|e| *e != "raw") {
            Some(e) => format!("{t} ({e})"),
            None => t.clone(),
        })
        .collect();
    println!(
        "crossing    {}{}",
        if crossing.is_empty() { "(nothing)".to_string() } else { crossing.join(", ") },
        if d.cut.is_empty() { String::new() } else { format!(": {} bytes up", e.up_bytes) }
    );
    println!(
        "stages ms   wearable {:.3} | up {:.3} | rtt {:.3} | handheld {:.3} | down {:.3}",
        ms(e.t_wearable),
        ms(e.t_up),
        ms(e.t_rtt),
        ms(e.t_handheld),
        ms(e.t_down)
    );
    println!(
        "total       {:.3} ms (stream period {:.3} ms), {:.3} mJ weighted",
        ms(e.latency_s),
        ms(e.stream_period_s),
        e.energy_j * 1e3
    );
    if let Some(s) = &setting {
        println!(
            "setting     {} at {:.0} MHz (busy time x{:.2} of the profile's default)",
            s.cluster,
            s.f_hz / 1e6,
            s.time_scale
        );
    }
    let t = if args.stream { e.stream_period_s } else { e.latency_s };
    let mut line = serde_json::json!({
            "cut": d.cut,
            "prefix_nodes": d.prefix_nodes,
            "t_ms": ms(t),
            "e_mj": e.energy_j * 1e3,
            "method": d.method,
            "optimal": d.optimal,
            "reason": d.reason,
            "encodings": d.encodings,
            "up_bytes": e.up_bytes,
            "lossy_error": worst,
            "evaluation": e,
    });
    if let (Some(s), Some(obj)) = (&setting, line.as_object_mut()) {
        obj.insert("cluster".into(), s.cluster.clone().into());
        obj.insert("f_hz".into(), s.f_hz.into());
    }
    println!("{line}");
    Ok(ExitCode::SUCCESS)
}
