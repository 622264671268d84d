//! `run` and `stream`: inference paired with a handheld (`tandem-handheld serve`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use tandem::client::{FrameReport, ModelFile, Placement, Session, SessionConfig, Status, StreamReport};
use tandem::device::DeviceProfile;
use tandem::emulate::{EmulatedTransport, LinkControl, LinkProfile, Schedule};
use tandem::link::{TcpTransport, Transport};
use tandem::partition::{LatencyHint, Method};
use tandem_tools::quota::CpuQuota;

/// Where frames run.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum PlacementArg {
    /// The planner decides (the product).
    Auto,
    /// Everything on the wearable.
    Wearable,
    /// Everything on the handheld.
    Handheld,
    /// Everything on the edge (`--edge-oip`), sent there over the watch's
    /// own link (cloud-only).
    Edge,
}

/// How the planner weighs each side's energy.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum EnergyWeightsArg {
    /// By both batteries' levels: a charging phone's energy is free, a side
    /// below 20% weighs 0.8, else 0.5 each.
    Levels,
    /// By the share of its own battery each side spends (joules over the
    /// capacity in each profile, as DeepWear's paper counts energy); a
    /// charging phone is still free and a side below 20% still spared.
    Capacity,
}

/// What `run` and `stream` share.
#[derive(Args, Debug)]
pub struct PairArgs {
    /// The ONNX model file.
    #[arg(long)]
    pub model: PathBuf,
    #[command(flatten)]
    pub shapes: tandem_tools::cli::ShapeArgs,
    /// The handheld's address (`tandem-handheld serve --listen`), or `ble` to
    /// scan for a handheld over Bluetooth LE (needs a build with `--features ble`).
    #[arg(long)]
    pub connect: String,
    /// Emulate this link (ble-1m, ble-2m, bt-classic, wifi-poor, wifi-good, wear-data-layer); this side shapes both ways.
    #[arg(long)]
    pub link: Option<String>,
    /// Rate changes during the run: lines of `seconds up_mbit [down_mbit]` (needs --link), counted
    /// from `stream`'s first measured frame (other commands: from the first packet).
    #[arg(long)]
    pub schedule: Option<PathBuf>,
    /// The wearable's device profile (a shipped name or a TOML file).
    #[arg(long, default_value = "watch-w5")]
    pub profile: String,
    /// The handheld profile to price with until the handheld names its own.
    #[arg(long, default_value = "pixel-8-pro")]
    pub handheld_profile: String,
    /// Compute dilation: a number ≥ 1, or `profile` for the wearable profile's slowdown.
    #[arg(long, default_value = "1")]
    pub slowdown: String,
    /// Latency hint PropT: milliseconds, `0` for the fastest, `inf` for the least energy.
    #[arg(long, default_value = "0")]
    pub latency_hint: String,
    /// Where frames run.
    #[arg(long, value_enum, default_value = "auto")]
    pub placement: PlacementArg,
    /// Candidate search: heuristic, mincut or exhaustive.
    #[arg(long, value_enum, default_value = "mincut")]
    pub method: crate::plan_cmd::MethodArg,
    /// The wearable's battery in percent (default: read sysfs).
    #[arg(long)]
    pub battery: Option<f64>,
    /// How the planner weighs each side's energy (`capacity` needs a battery
    /// capacity in both profiles).
    #[arg(long, value_enum, default_value = "levels")]
    pub energy_weights: EnergyWeightsArg,
    /// Also cap this process at PCT% of one CPU through the cgroup v1 cpu
    /// controller (root; /sys/fs/cgroup/cpu).
    #[arg(long, value_name = "PCT")]
    pub cpu_quota: Option<f64>,
    /// Seconds to wait for the handheld to be ready (the wait ends at the
    /// first connection error: frames then run here, saying why).
    #[arg(long, default_value_t = 60.0)]
    pub ready_timeout: f64,
    /// Fail unless a handheld is ready within SECS (connection errors are
    /// retried until then; a refused model fails at once).
    #[arg(long, value_name = "SECS")]
    pub require_handheld: Option<f64>,
    /// Link encodings and their accuracy budget.
    #[command(flatten)]
    pub coding: EncodingArgs,
    /// The engine the wearable's layers run on (the handheld picks its own).
    #[command(flatten)]
    pub engine: tandem_tools::cli::EngineArgs,
    /// The model's card: inputs it gives a sensor type (u8 pixels, i16
    /// PCM) may cross the link as those values, or as JPEG when lossy.
    #[arg(long)]
    pub card: Option<PathBuf>,
    /// An offload strategy to compare (tandem, deepwear, dads,
    /// neurosurgeon, wearable-only, handheld-only, handheld-compressed;
    /// cloud-only with --edge-oip: every frame to the edge over the
    /// watch's own link, `--edge-direct-link`):
    /// it sets the placement, the search method, the objective, the
    /// encodings and whether the cut adapts, over `--placement`,
    /// `--method` and `--encodings`.
    #[arg(long, value_parser = tandem::client::Strategy::parse)]
    pub strategy: Option<tandem::client::Strategy>,
    /// Build a new cut's plans inside the first frame that runs at it,
    /// instead of ahead, in the background, on both sides (the default,
    /// and Tandem's strategy; the other strategies never build ahead).
    #[arg(long)]
    pub no_prepare_ahead: bool,
    /// Choose the watch's cluster and frequency (from `--profile`) with
    /// each cut, named in each frame's report: applied where `--cpufreq`
    /// is writable (the prefix pinned to the cluster's CPUs, its policy
    /// held at the frequency, both given back), else emulated (the prefix
    /// dilated by the setting's busy-time scale), saying why.
    #[arg(long)]
    pub dvfs: bool,
    /// The sysfs CPU folder whose cpufreq policies `--dvfs` settings are
    /// applied through; `none`: always emulate.
    #[arg(long, value_name = "DIR", default_value = tandem::cpufreq::CPU_DIR)]
    pub cpufreq: PathBuf,
    /// The keystore (`tandem-wearable pair --keys`): with a paired handheld
    /// every link is encrypted; without one, links are plain and a handheld
    /// refuses them unless started with `--insecure`.
    #[arg(long, value_name = "DIR")]
    pub keys: Option<PathBuf>,
    /// A third tier: an Open Inference Protocol server (`http://HOST:PORT`:
    /// KServe, Triton, MLServer) that the handheld relays to; the handheld
    /// must list it (`tandem-handheld serve --edge-allow URL`). It serves
    /// the suffixes `tandem-models export-suffix` wrote; the planner puts
    /// layers there only at those cuts, and each frame's report gives
    /// its `tiers` and `edge` link.
    #[arg(long, value_name = "URL", conflicts_with = "edge")]
    pub edge_oip: Option<String>,
    /// A third tier: a Tandem server (`tandem-handheld serve` on an edge
    /// server, `HOST:PORT`) that the handheld relays to, over an encrypted
    /// session paired once (`tandem-handheld pair-edge`); the handheld must
    /// list it (`serve --edge-allow tandem://HOST:PORT`). It holds the whole
    /// model, so it serves every cut's suffix, and its speed is measured
    /// from its own profile.
    #[arg(long, value_name = "ADDR")]
    pub edge: Option<String>,
    /// Run every frame at this cut (its key, as reports give it) instead
    /// of the planner's choice.
    #[arg(long, value_name = "KEY")]
    pub cut: Option<String>,
    /// With --edge-oip or --edge: run every offloaded frame's edge part
    /// from this cut (its key) instead of the planner's choice.
    #[arg(long, value_name = "KEY")]
    pub edge_cut: Option<String>,
    /// With --edge-oip or --edge: how many times faster than the phone the
    /// edge runs a layer, an assumption the planner prices the edge with
    /// until the phone has measured it (it times one suffix on an Open
    /// Inference Protocol server; a Tandem edge reports its profile).
    #[arg(long, value_name = "X", default_value_t = 8.0)]
    pub edge_speedup: f64,
    /// With --edge-oip or --edge: the phone–edge link the planner assumes
    /// until the phone has measured it, `UP_MBIT,DOWN_MBIT,RTT_MS` (default
    /// 50,50,5).
    #[arg(long, value_name = "UP,DOWN,RTT", value_parser = tandem::client::EmulatedLink::parse_mbit)]
    pub edge_link: Option<tandem::client::EmulatedLink>,
    /// With --edge-oip: the watch has its own link to the edge (Wi-Fi,
    /// LTE), emulated at `UP_MBIT,DOWN_MBIT,RTT_MS` (`0.1,0.1,40`:
    /// DeepWear's poor Wi-Fi); its rates also price the radio's
    /// model-based energy. Cloud-only (`--strategy cloud-only`,
    /// `--placement edge`) sends every frame that way; otherwise the
    /// planner sends a frame's input straight to the edge when that is
    /// predicted best.
    #[arg(long, value_name = "UP,DOWN,RTT", requires = "edge_oip", value_parser = tandem::client::EmulatedLink::parse_mbit)]
    pub edge_direct_link: Option<tandem::client::EmulatedLink>,
}

/// The transport to `addr` through the keystore at `keys` (default dir
/// when none): encrypted with the paired handheld, or plain, saying so.
pub fn secure_transport(
    inner: Box<dyn Transport>,
    keys: Option<&std::path::Path>,
    addr: &str,
) -> Result<Box<dyn Transport>> {
    let dir = keys.map_or_else(|| tandem::secure::Keystore::default_dir("wearable"), |d| d.to_path_buf());
    let (transport, encrypted) = tandem::secure::for_wearable(inner, &dir, addr)
        .with_context(|| format!("the keystore {}", dir.display()))?;
    if !encrypted {
        eprintln!(
            "no handheld paired in {}: this link is NOT encrypted (pair with `tandem-wearable pair --connect ADDR --code NNNNNN`)",
            dir.display()
        );
    }
    Ok(transport)
}

/// `--encodings` and `--accuracy`, for every command that runs a Session.
#[derive(Args, Debug, Clone)]
pub struct EncodingArgs {
    /// Link encodings the planner may choose per crossing tensor: `raw`
    /// (none), `lossless` (bit-exact: shuffle + LZ4, sparse + LZ4), or
    /// `lossy` (f16 and int8 too, within `--accuracy`).
    #[arg(long, value_enum, default_value = "lossless")]
    pub encodings: EncodingsArg,
    /// The accuracy budget of lossy encodings: `rel:X` (every output within
    /// relative error X of the unsplit run) or `argmax` (every output's
    /// argmax unchanged), measured on the first frame.
    #[arg(long, value_parser = tandem::client::Accuracy::parse)]
    pub accuracy: Option<tandem::client::Accuracy>,
}

impl EncodingArgs {
    /// Sets them on `config`; lossy encodings need a budget.
    pub fn apply(&self, config: &mut SessionConfig) -> Result<()> {
        config.encodings = match self.encodings {
            EncodingsArg::Raw => tandem::encoding::Allowed::Raw,
            EncodingsArg::Lossless => tandem::encoding::Allowed::Lossless,
            EncodingsArg::Lossy => tandem::encoding::Allowed::Lossy,
        };
        if self.encodings == EncodingsArg::Lossy && self.accuracy.is_none() {
            bail!("--encodings lossy needs an --accuracy budget (rel:X or argmax)");
        }
        config.accuracy = self.accuracy;
        Ok(())
    }
}

/// Which link encodings a session may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum EncodingsArg {
    /// Raw tensors.
    Raw,
    /// Bit-exact encodings where they pay.
    Lossless,
    /// Lossy ones too, where they keep the outputs within `--accuracy`.
    Lossy,
}

/// `run`'s own arguments.
#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub pair: PairArgs,
    /// The input: `random` (the default), a file for a single-input model,
    /// or `NAME=FILE` for each input (repeat the flag); a FILE is NumPy
    /// `.npy` or a serialized TensorProto `.pb`.
    #[arg(long, value_name = "FILE|NAME=FILE")]
    pub input: Vec<String>,
    /// Seed of the random input.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Write each output to DIR as `.npy` (its name with characters other
    /// than letters, digits, `.`, `-` and `_` made `_`), to compare with
    /// another runtime in numpy.
    #[arg(long, value_name = "DIR")]
    pub save_outputs: Option<PathBuf>,
}

/// `stream`'s own arguments.
#[derive(Args, Debug)]
pub struct StreamArgs {
    #[command(flatten)]
    pub pair: PairArgs,
    /// Frames to stream.
    #[arg(long, default_value_t = 50)]
    pub frames: usize,
    /// Every frame's input: `random` (a new random input per frame, the
    /// default), a file for a single-input model, or `NAME=FILE` for each
    /// input (repeat the flag); a FILE is `.npy` or a TensorProto `.pb`.
    #[arg(long, value_name = "FILE|NAME=FILE")]
    pub input: Vec<String>,
    /// Release frames at this rate (default: as fast as the pipeline takes them).
    #[arg(long)]
    pub fps: Option<f64>,
    /// One frame at a time (no pipelining).
    #[arg(long)]
    pub no_pipeline: bool,
    /// Most frames in flight when pipelining.
    #[arg(long, default_value_t = 8)]
    pub max_in_flight: usize,
    /// Warm-up frames before the measured ones (they build plans and fill caches; not counted).
    #[arg(long, default_value_t = 2)]
    pub warmup: usize,
    /// Write every frame's report as a JSON line to this file, with `t_s`:
    /// when it was delivered, in seconds from the stream's start.
    #[arg(long)]
    pub frames_out: Option<PathBuf>,
    /// After the stream, run the model unsplit here on each measured
    /// frame's input and report how far the delivered outputs were under
    /// `--accuracy` (`accuracy` in the summary: the worst and mean error,
    /// the frames over the budget): what lossy encodings cost. Not timed.
    #[arg(long, requires = "accuracy")]
    pub check_accuracy: bool,
}

fn parse_hint_ms(s: &str) -> Result<LatencyHint> {
    let s = s.trim();
    if let Ok(ms) = s.parse::<f64>() {
        if ms == f64::INFINITY {
            return Ok(LatencyHint::EnergyFirst);
        }
        if !(ms.is_finite() && ms >= 0.0) {
            bail!("--latency-hint {s}: must be a non-negative number of milliseconds or inf");
        }
        return Ok(if ms == 0.0 {
            LatencyHint::Fastest
        } else {
            LatencyHint::Within(Duration::from_secs_f64(ms / 1e3))
        });
    }
    crate::plan_cmd::parse_hint(s).map_err(|e| anyhow::anyhow!("--latency-hint: {e}"))
}

/// A session opened from the command line, with what the command keeps
/// beside it.
struct Opened {
    session: Session,
    /// The CPU quota, held for the run.
    _quota: Option<CpuQuota>,
    /// The emulated link's rates, when `--link` emulates one.
    link: Option<LinkControl>,
}

fn open(p: &PairArgs, pipeline: bool, max_in_flight: usize) -> Result<Opened> {
    let quota = match p.cpu_quota {
        Some(pct) => Some(CpuQuota::apply(std::path::Path::new("/sys/fs/cgroup/cpu"), pct)?),
        None => None,
    };
    let (session, link) = open_session(p, pipeline, max_in_flight)?;
    Ok(Opened { session, _quota: quota, link })
}

fn open_session(
    p: &PairArgs,
    pipeline: bool,
    max_in_flight: usize,
) -> Result<(Session, Option<LinkControl>)> {
    let model = ModelFile::load(&p.model, &p.shapes.shapes()?)?;
    let wearable = DeviceProfile::load(&p.profile).with_context(|| format!("--profile {}", p.profile))?;
    let handheld = DeviceProfile::load(&p.handheld_profile)
        .with_context(|| format!("--handheld-profile {}", p.handheld_profile))?;
    let dilation = match p.slowdown.as_str() {
        "profile" => wearable.slowdown.max(1.0),
        s => match s.parse::<f64>() {
            Ok(k) if k.is_finite() && k >= 1.0 => k,
            _ => bail!("--slowdown {s}: must be a number ≥ 1 or 'profile'"),
        },
    };
    if let Some(b) = p.battery {
        if !(0.0..=100.0).contains(&b) {
            bail!("--battery {b}: must be a percentage from 0 to 100");
        }
    }
    if p.schedule.is_some() && p.link.is_none() {
        bail!("--schedule needs --link (the schedule changes the emulated link's rates)");
    }
    let (transport, link): (Box<dyn Transport>, _) = if p.connect == "ble" {
        if p.link.is_some() {
            bail!("--link emulates a link over TCP; with --connect ble the radio is the link");
        }
        (tandem::ble::central_transport()?, None)
    } else {
        tcp_transport(p)?
    };
    let transport = secure_transport(transport, p.keys.as_deref(), &p.connect)?;
    let mut config = SessionConfig::new(wearable, handheld);
    config.engine = p.engine.apply()?;
    config.dilation = dilation;
    config.hint = parse_hint_ms(&p.latency_hint)?;
    config.method = Method::from(p.method);
    config.pipeline = pipeline;
    config.max_in_flight = max_in_flight.max(1);
    config.battery = p.battery.map(|b| b / 100.0);
    config.energy_weights = match p.energy_weights {
        EnergyWeightsArg::Levels => tandem::EnergyWeighing::Levels,
        EnergyWeightsArg::Capacity => tandem::EnergyWeighing::Capacity,
    };
    config.ready_timeout = Duration::from_secs_f64(p.ready_timeout.max(0.0));
    if let Some(t) = p.require_handheld {
        if !(t.is_finite() && t > 0.0) {
            bail!("--require-handheld {t}: must be a positive number of seconds");
        }
        config.require_handheld = Some(Duration::from_secs_f64(t));
    }
    if let Some(name) = &p.link {
        let l = LinkProfile::named(name)?;
        config.link_default = l.nominal_estimate();
    }
    p.coding.apply(&mut config)?;
    if let Some(path) = &p.card {
        let card = tandem::card::ModelCard::load(path)?;
        card.check(&model.model).with_context(|| format!("--card {}", path.display()))?;
        let taken = config.use_card(&card);
        eprintln!("card {}: {taken} input(s) may cross in their sensor's type", path.display());
    }
    config.placement = match p.placement {
        PlacementArg::Auto => Placement::Auto,
        PlacementArg::Wearable => Placement::WearableOnly,
        PlacementArg::Handheld => Placement::HandheldOnly,
        PlacementArg::Edge => Placement::EdgeOnly,
    };
    if let Some(key) = &p.cut {
        let cut = tandem::Cut::from_key(model.model.graph(), key).with_context(|| format!("--cut {key}"))?;
        config.placement = Placement::Fixed(cut);
    }
    config.prepare_ahead = !p.no_prepare_ahead;
    let tandem_edge =
        p.edge.as_ref().map(|addr| format!("tandem://{}", addr.trim_start_matches("tandem://")));
    if p.edge_oip.is_none() && tandem_edge.is_none() {
        for (set, flag) in [
            (p.edge_cut.is_some(), "--edge-cut"),
            (p.edge_link.is_some(), "--edge-link"),
            (p.edge_direct_link.is_some(), "--edge-direct-link"),
        ] {
            if set {
                bail!("{flag} needs an edge tier: --edge-oip URL or --edge ADDR");
            }
        }
    }
    if tandem_edge.is_some() && p.edge_direct_link.is_some() {
        bail!("--edge-direct-link is the watch's own link to an Open Inference Protocol server (--edge-oip); a Tandem edge is reached through the phone, or directly as the handheld (--connect ADDR)");
    }
    if let Some(url) = p.edge_oip.as_ref().or(tandem_edge.as_ref()) {
        if !(p.edge_speedup.is_finite() && p.edge_speedup > 0.0) {
            bail!("--edge-speedup {}: must be a positive number", p.edge_speedup);
        }
        let mut edge = tandem::client::EdgeConfig::new(url.clone());
        edge.speedup = p.edge_speedup;
        edge.direct = p.edge_direct_link;
        if let Some(l) = p.edge_link {
            edge.link = tandem::partition::LinkEstimate {
                up_bytes_per_s: l.up_bits_per_s / 8.0,
                down_bytes_per_s: l.down_bits_per_s / 8.0,
                rtt: l.rtt,
            };
        }
        if let Some(key) = &p.edge_cut {
            tandem::Cut::from_key(model.model.graph(), key).with_context(|| format!("--edge-cut {key}"))?;
            edge.cut = Some(tandem::CutKey::from_wire(key.clone()));
        }
        config.edge = Some(edge);
    }
    config.dvfs = p.dvfs;
    config.cpufreq = (p.cpufreq.as_os_str() != "none").then(|| p.cpufreq.clone());
    if let Some(strategy) = p.strategy {
        let asked = config.encodings;
        strategy.apply(&mut config);
        config.prepare_ahead &= !p.no_prepare_ahead;
        if config.encodings != asked {
            let now = format!("{:?}", config.encodings).to_lowercase();
            let asked = format!("{asked:?}").to_lowercase();
            eprintln!(
                "--strategy {}: link encodings {now} (the strategy sets them), not --encodings {asked}",
                strategy.name()
            );
        }
    }
    if config.placement == Placement::EdgeOnly && (config.edge.is_none() || tandem_edge.is_some()) {
        bail!(
            "cloud-only (--strategy cloud-only, --placement edge) needs --edge-oip URL (for a Tandem server as the only partner, connect to it: --connect ADDR)"
        );
    }
    eprintln!("connecting to {} ({})", p.connect, transport.describe());
    let session = Session::open(model, transport, config)?;
    if let Some(e) = session.edge_status() {
        match &e.refused {
            Some(why) => eprintln!("edge {}: not used ({why})", e.url),
            None => eprintln!("edge {}: serves {} of the {} cuts asked about", e.url, e.served, e.asked),
        }
    }
    match session.status() {
        Status::Ready { handheld } => eprintln!("paired with {handheld}"),
        Status::LocalOnly => {}
        other => eprintln!(
            "the handheld is not ready ({other}): running on the wearable, retrying in the background"
        ),
    }
    Ok((session, link))
}

/// `tandem-wearable run`.
pub fn run(args: RunArgs) -> Result<ExitCode> {
    let Opened { session: mut s, _quota, .. } = open(&args.pair, false, 1)?;
    let inputs = tandem::check::inputs_from_specs(s.model(), &args.input, args.seed)?;
    if let Some(dir) = &args.save_outputs {
        std::fs::create_dir_all(dir).with_context(|| format!("--save-outputs {}", dir.display()))?;
    }
    for (name, v) in inputs {
        s.feed(&name, (*v).clone())?;
    }
    let report = s.run()?;
    let g = s.model().graph();
    let mut saved = serde_json::Map::new();
    for &t in g.outputs() {
        let name = &g.tensor(t).name;
        let y = s.fetch(name)?;
        println!("{}", summarize(name, &y));
        if let Some(dir) = &args.save_outputs {
            // Two names that differ only in replaced characters get distinct files.
            let stem = file_stem(name);
            let mut path = dir.join(format!("{stem}.npy"));
            for k in 1.. {
                if !saved.values().any(|p| p.as_str() == path.to_str()) {
                    break;
                }
                path = dir.join(format!("{stem}_{k}.npy"));
            }
            tandem::npy::write(&path, &y)?;
            saved.insert(name.clone(), path.display().to_string().into());
        }
    }
    let decision = s.decision().map(|d| serde_json::json!({"reason": d.reason, "optimal": d.optimal}));
    let line = serde_json::json!({
        "model": s.model().name(),
        "handheld": s.handheld_device(),
        "offloaded": report.offloaded,
        "local_reason": report.local_reason,
        "fallback": report.fallback,
        "cut": report.cut,
        "prefix_layers": report.prefix_layers,
        "layers": report.layers,
        "engines": {"prefix": report.prefix_engine, "suffix": report.suffix_engine},
        "latency_ms": {
            "wearable": report.wearable_ms,
            "link": report.link_ms,
            "handheld": report.handheld_ms,
            "total": report.latency_ms,
        },
        "bytes": {"up": report.up_bytes, "up_raw": report.up_raw_bytes, "down": report.down_bytes},
        "tiers": report.tiers,
        "links": {
            "watch_phone": {"up": report.up_bytes, "down": report.down_bytes},
            "phone_edge": report.edge.as_ref().map(|e| serde_json::json!({"up": e.up_bytes, "down": e.down_bytes})),
        },
        "edge": report.edge,
        "edge_tier": s.edge_status(),
        "predicted_ms": report.predicted_ms,
        "measured_ms": report.latency_ms,
        "energy_j_model_based": {"wearable": report.wearable_j, "handheld": report.handheld_j},
        "decision": decision,
    });
    let mut line = line;
    if args.save_outputs.is_some() {
        line["saved_outputs"] = saved.into();
    }
    println!("{line}");
    Ok(ExitCode::SUCCESS)
}

/// A tensor's name as a file name: letters, digits, `.`, `-` and `_` kept, the rest `_`.
fn file_stem(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') { c } else { '_' })
        .collect()
}

/// A one-line summary of an output tensor.
fn summarize(name: &str, t: &tandem::Tensor) -> String {
    let shape = format!("{:?}", t.shape());
    match tandem::check::as_f32(t) {
        Ok(v) if !v.is_empty() => {
            let (arg, max) =
                v.iter()
                    .enumerate()
                    .fold((0, f32::NEG_INFINITY), |a, (i, &x)| if x > a.1 { (i, x) } else { a });
            let head: Vec<String> = v.iter().take(4).map(|x| format!("{x:.4}")).collect();
            format!("{name} {shape} argmax {arg} ({max:.4}) first [{}]", head.join(", "))
        }
        _ => format!("{name} {shape} {:?}", t.datum_type()),
    }
}

/// `tandem-wearable stream`.
pub fn stream(args: StreamArgs) -> Result<ExitCode> {
    if args.frames == 0 {
        bail!("--frames must be at least 1");
    }
    if let Some(f) = args.fps {
        if !(f.is_finite() && f > 0.0) {
            bail!("--fps {f}: must be positive");
        }
    }
    let pipeline = !args.no_pipeline;
    let Opened { session: mut s, _quota, link } = open(&args.pair, pipeline, args.max_in_flight)?;
    let model = s.model().clone();
    let real = match args.input.as_slice() {
        [] => None,
        [only] if only == "random" => None,
        specs => Some(tandem::check::inputs_from_specs(&model, specs, 0)?),
    };
    let input = move |i: u64| match &real {
        Some(inputs) => Ok(inputs.clone()),
        None => tandem::check::random_inputs(&model, i),
    };
    let warmup: Vec<_> = (0..args.warmup as u64).map(|i| input(1_000_000 + i)).collect::<Result<_, _>>()?;
    // Warmed up as measured: the same pricing (pipelined or not) and rate.
    s.stream_with(warmup, args.fps, drop)?;
    let frames = (0..args.frames as u64).map(|i| input(i).unwrap_or_default());
    let mut out = match &args.frames_out {
        Some(p) => Some(std::fs::File::create(p).with_context(|| format!("--frames-out {}", p.display()))?),
        None => None,
    };
    let mut reports: Vec<FrameReport> = vec![];
    let mut errors = 0usize;
    // Frames are delivered once each, in order: the k-th result is input(k)'s.
    let (mut delivered, mut index) = (vec![], 0u64);
    let started = Instant::now();
    // A schedule (`--schedule`) runs from the first measured frame: the
    // frames see the whole trace, however long the model took to load.
    if let Some(link) = &link {
        link.restart_schedule(started);
    }
    s.stream_with(frames, args.fps, |r| match r {
        Ok(frame) => {
            if args.check_accuracy {
                delivered.push((index, frame.outputs));
            }
            index += 1;
            if let Some(f) = &mut out {
                use std::io::Write;
                // With when it was delivered, in seconds from the stream's start.
                let mut line = serde_json::to_value(&frame.report).unwrap_or_default();
                if let Some(obj) = line.as_object_mut() {
                    obj.insert("t_s".into(), started.elapsed().as_secs_f64().into());
                }
                let _ = writeln!(f, "{line}");
            }
            reports.push(frame.report);
        }
        Err(e) => {
            index += 1;
            errors += 1;
            eprintln!("error: {e}");
        }
    })?;
    let wall = started.elapsed();
    let accuracy = match args.pair.coding.accuracy.filter(|_| args.check_accuracy) {
        Some(rule) => Some(accuracy_cost(s.model(), &delivered, rule, &input)?),
        None => None,
    };
    // At a source rate (--fps) each frame's latency counts from its arrival:
    // one later than the next arrival missed its deadline.
    let summary = match args.fps {
        Some(fps) => StreamReport::at_rate(&reports, wall, fps),
        None => StreamReport::from_frames(&reports, wall),
    };
    print_table(&summary);
    match s.measured_energy().map(|m| m.j_per_frame()) {
        Ok(Some(j)) => println!("{:<28} {:>12.4}", "device J/frame (measured)", j),
        Ok(None) => println!("{:<28} {:>12}", "device J/frame (measured)", "-"),
        Err(why) => println!("measured energy: {why}"),
    }
    let mut line = serde_json::to_value(&summary)?;
    if let Some(obj) = line.as_object_mut() {
        obj.insert("model".into(), s.model().name().into());
        obj.insert("pipeline".into(), pipeline.into());
        obj.insert("link".into(), args.pair.link.clone().into());
        use tandem::client::Strategy;
        let placement = match args.pair.strategy {
            None => format!("{:?}", args.pair.placement).to_lowercase(),
            Some(Strategy::WearableOnly) => "wearable".into(),
            Some(Strategy::HandheldOnly | Strategy::HandheldCompressed) => "handheld".into(),
            Some(_) => "auto".into(),
        };
        obj.insert("placement".into(), placement.into());
        obj.insert("strategy".into(), args.pair.strategy.map(|s| s.name()).into());
        obj.insert("handheld".into(), s.handheld_device().into());
        obj.insert("status".into(), s.status().to_string().into());
        obj.insert("frame_errors".into(), errors.into());
        if let Some(a) = accuracy {
            obj.insert("accuracy".into(), a);
        }
        let mut reasons = std::collections::BTreeMap::<String, usize>::new();
        for r in &reports {
            if let Some(why) = &r.local_reason {
                *reasons.entry(why.clone()).or_default() += 1;
            }
        }
        obj.insert("local_reasons".into(), serde_json::to_value(reasons)?);
        if let Some(last) = reports.last() {
            obj.insert("last_prefix_layers".into(), last.prefix_layers.into());
            obj.insert("layers".into(), last.layers.into());
        }
        obj.insert(
            "energy".into(),
            "model-based: busy time x profile power + radio time x radio power".into(),
        );
        let engines = s.engines();
        obj.insert("engines".into(), serde_json::json!({"prefix": engines.prefix, "suffix": engines.suffix}));
        // The whole watch's energy, as its fuel gauge measured it, when it has one.
        match s.measured_energy() {
            Ok(m) => {
                let mut v = serde_json::to_value(m)?;
                if let Some(o) = v.as_object_mut() {
                    o.insert("j_per_frame".into(), m.j_per_frame().into());
                    o.insert("what".into(), "measured: the whole device's battery energy".into());
                }
                obj.insert("measured_energy".into(), v);
            }
            Err(why) => {
                obj.insert("measured_energy".into(), serde_json::Value::Null);
                obj.insert("measured_energy_note".into(), why.to_string().into());
            }
        }
    }
    println!("{line}");
    Ok(if errors == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// The delivered frames' errors against the model run unsplit here on
/// the same inputs, under `rule`: the worst, the mean and how many were
/// over it (a JSON object for the summary).
fn accuracy_cost(
    model: &tandem::Model,
    delivered: &[(u64, tandem::tensor::Outputs)],
    rule: tandem::client::Accuracy,
    input: &dyn Fn(u64) -> Result<tandem::Values, tandem::ModelError>,
) -> Result<serde_json::Value> {
    let mut inputs = Vec::with_capacity(delivered.len());
    for (i, _) in delivered {
        inputs.push(input(*i).with_context(|| format!("--check-accuracy: frame {i}'s input"))?);
    }
    let frames = inputs.into_iter().zip(delivered.iter().map(|(_, outputs)| outputs));
    let errors = tandem::client::codecs::frame_errors(model, frames, rule).context("--check-accuracy")?;
    let over = errors.iter().filter(|&&e| !rule.holds(e)).count();
    let worst = errors.iter().copied().fold(0f64, f64::max);
    let mean = errors.iter().sum::<f64>() / errors.len().max(1) as f64;
    println!("{:<28} {:>12}", format!("accuracy cost ({rule})"), format!("worst {worst:.2e}, {over} over"));
    Ok(serde_json::json!({
        "rule": rule.to_string(),
        "frames": errors.len(),
        "worst": worst,
        "mean": mean,
        "over_budget": over,
        "what": "measured: each delivered frame's outputs against the model run unsplit on its input",
    }))
}

fn print_table(r: &StreamReport) {
    println!("{:<28} {:>12}", "frames", r.frames);
    println!("{:<28} {:>12.2}", "throughput (frames/s)", r.throughput_fps);
    println!("{:<28} {:>12.1}", "latency p50 (ms)", r.p50_ms);
    println!("{:<28} {:>12.1}", "latency p95 (ms)", r.p95_ms);
    if let (Some(hz), Some(late), Some(share)) = (r.rate_hz, r.deadline_misses, r.deadline_miss_share) {
        println!(
            "{:<28} {:>12}",
            format!("deadline misses at {hz} Hz"),
            format!("{late} ({:.0}%)", share * 100.0)
        );
    }
    println!("{:<28} {:>12.1}", "latency p99 (ms)", r.p99_ms);
    println!("{:<28} {:>12}", "cut switches", r.cut_switches);
    println!("{:<28} {:>12.1}", "longest switch wait (ms)", r.switch_wait_max_ms);
    println!("{:<28} {:>12.1}", "plan building in frames (ms)", r.plan_build_ms);
    println!("{:<28} {:>12}", "offloaded", r.offloaded);
    println!("{:<28} {:>12}", "run locally", r.local);
    println!("{:<28} {:>12}", "  of which fell back", r.fallbacks);
    println!("{:<28} {:>12.4}", "wearable J/frame (model)", r.wearable_j_per_frame);
    println!("{:<28} {:>12.4}", "handheld J/frame (model)", r.handheld_j_per_frame);
    let pct = |p: Option<f64>| p.map_or("-".to_string(), |p| format!("{p:.1}"));
    println!("{:<28} {:>12}", "prediction error, first 20 (%)", pct(r.prediction_error_first_pct));
    println!("{:<28} {:>12}", "prediction error, last 20 (%)", pct(r.prediction_error_last_pct));
}

fn tcp_transport(p: &PairArgs) -> Result<(Box<dyn Transport>, Option<LinkControl>)> {
    let tcp = TcpTransport::new(p.connect.clone());
    Ok(match &p.link {
        Some(name) => {
            let profile = LinkProfile::named(name)?;
            let schedule = match &p.schedule {
                Some(path) => Schedule::from_path(path)?,
                None => Schedule::default(),
            };
            let control = LinkControl::new(&profile, schedule);
            (Box::new(EmulatedTransport::new(tcp, profile, control.clone(), 7)), Some(control))
        }
        None => (Box::new(tcp), None),
    })
}
