//! `tandem-wearable price`: prices cuts of a model in predicted time and
//! model-based energy on a wearable/handheld pair (SPEC 3.4, 3.5).
//!
//! Latency comes from trained predictors (host times scaled by each device
//! profile's slowdown); energy is that predicted busy time × the inference
//! cluster's power plus radio power × transfer time. Nothing is measured on a
//! device here: every joule is a model output.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use tandem::device::DeviceProfile;
use tandem::energy::{price_cut, ClusterEnergy, LinkRates, PowerModel};
use tandem::predict::{LatencyModel, Scaled};

use crate::predict_cmd::load_predictors;
use tandem::{cuts_to_check, Cut, Model};

/// Which trained predictor prices the layers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Predictor {
    /// The DeepWear-style decision tree + linear regressions.
    DtLr,
    /// The EvoLP-style MLPs with the saved evolution matrix.
    Evolp,
    /// The FLOPs-proportional baseline.
    Flops,
}

/// Arguments of `price`.
#[derive(clap::Args)]
pub struct PriceArgs {
    /// The ONNX model.
    #[arg(long)]
    pub model: PathBuf,
    #[command(flatten)]
    pub shapes: tandem_tools::cli::ShapeArgs,
    /// Predictors written by `predict fit --out`.
    #[arg(long)]
    pub predictors: PathBuf,
    /// Which predictor to use.
    #[arg(long, value_enum, default_value = "dt-lr")]
    pub predictor: Predictor,
    /// The wearable's profile (a shipped name or a file).
    #[arg(long, default_value = "watch-w5")]
    pub wearable: String,
    /// The handheld's profile (a shipped name or a file).
    #[arg(long, default_value = "pixel-8-pro")]
    pub handheld: String,
    /// Uplink rate, wearable to handheld, in kbit/s.
    #[arg(long, default_value_t = 700.0)]
    pub up_kbps: f64,
    /// Downlink rate, handheld to wearable, in kbit/s.
    #[arg(long, default_value_t = 700.0)]
    pub down_kbps: f64,
    /// The CPU power model.
    #[arg(long, value_enum, default_value = "analytical")]
    pub power: PowerArg,
    /// Cuts priced: every cut of a chain, else this many sampled ones plus the trivial two.
    #[arg(long, default_value_t = 20)]
    pub cuts: usize,
}

/// The CPU power model, as a CLI value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PowerArg {
    /// C_eff · V(f)² · f.
    Analytical,
    /// ε · f³ (the baseline).
    Approximate,
}

/// Prices the cuts and prints a table, then one JSON line per cut.
pub fn run(args: PriceArgs) -> Result<ExitCode> {
    let model = Model::from_path(&args.model, &args.shapes.shapes()?)?;
    let set = load_predictors(&args.predictors)?;
    let wearable = DeviceProfile::load(&args.wearable)?;
    let handheld = DeviceProfile::load(&args.handheld)?;
    let power = match args.power {
        PowerArg::Analytical => PowerModel::Analytical,
        PowerArg::Approximate => PowerModel::Approximate,
    };
    let (w_energy, h_energy) = (ClusterEnergy::new(&wearable, power)?, ClusterEnergy::new(&handheld, power)?);
    let base: &dyn LatencyModel = match args.predictor {
        Predictor::DtLr => &set.dt_lr,
        Predictor::Evolp => &set.evolp,
        Predictor::Flops => &set.flops,
    };
    let w_lat = Scaled { inner: base, slowdown: wearable.slowdown };
    let h_lat = Scaled { inner: base, slowdown: handheld.slowdown };
    let link =
        LinkRates { up_bytes_per_s: args.up_kbps * 1e3 / 8.0, down_bytes_per_s: args.down_kbps * 1e3 / 8.0 };
    let graph = model.graph();
    let mut cuts: Vec<Cut> = cuts_to_check(graph, args.cuts, 0);
    cuts.sort_by_key(|c| c.prefix_len());
    println!(
        "{} on {} (wearable, x{}) + {} (handheld, x{}), {} power, link {}/{} kbit/s; energy is model-based",
        model.name(),
        wearable.name,
        wearable.slowdown,
        handheld.name,
        handheld.slowdown,
        power,
        args.up_kbps,
        args.down_kbps
    );
    println!(
        "{:>6} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "prefix", "up bytes", "T_w ms", "T_up ms", "T_p ms", "T_dn ms", "T ms", "E_w mJ", "E_p mJ"
    );
    for cut in &cuts {
        let p = price_cut(graph, cut, (&w_lat, &w_energy), (&h_lat, &h_energy), link);
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        println!(
            "{:>6} {:>10} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3}",
            cut.prefix_len(),
            cut.up_bytes(),
            ms(p.t_wearable),
            ms(p.t_up),
            ms(p.t_handheld),
            ms(p.t_down),
            ms(p.total_latency()),
            p.wearable_j() * 1e3,
            p.handheld_j() * 1e3
        );
        println!(
            "{}",
            serde_json::json!({
                "prefix_nodes": cut.prefix_len(),
                "up_bytes": cut.up_bytes(),
                "down_bytes": cut.down_bytes(),
                "t_wearable_ms": ms(p.t_wearable),
                "t_up_ms": ms(p.t_up),
                "t_handheld_ms": ms(p.t_handheld),
                "t_down_ms": ms(p.t_down),
                "t_ms": ms(p.total_latency()),
                "e_wearable_mj": p.wearable_j() * 1e3,
                "e_handheld_mj": p.handheld_j() * 1e3,
                "energy": "model-based",
            })
        );
    }
    Ok(ExitCode::SUCCESS)
}
