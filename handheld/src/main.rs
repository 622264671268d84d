//! `tandem-handheld`: the handheld (phone) side of Tandem.
//!
//! - `serve`: the paired server. Wearables connect over TCP (optionally
//!   through an emulated Bluetooth link), push or name a model, and send
//!   suffixes to run; several at once.
//! - `pair`: shows a 6-digit code and pairs one wearable that types it
//!   (`tandem-wearable pair`); `serve` then takes its encrypted sessions.
//! - `profile`: time every node of a model on this CPU (what `serve`
//!   reports to wearables as its latency profile).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use tandem::check::random_inputs;
use tandem::Model;

#[derive(Parser)]
#[command(name = "tandem-handheld", version, about = "Tandem's handheld side")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// What one handheld gives its wearables at most.
#[derive(Args)]
struct Limits {
    /// Most wearables served at once; more are told the handheld is busy.
    #[arg(long, default_value_t = 32)]
    max_connections: usize,
    /// Largest model a wearable may push, in MB (pushes above it are refused by name).
    #[arg(long, default_value_t = 1024)]
    max_push_mb: u64,
    /// Pushes in progress at once over all wearables, in MB; a push that
    /// does not fit is refused as busy.
    #[arg(long, default_value_t = 2048)]
    max_pushing_mb: u64,
    /// Pushed models kept (in `--models`, else in memory), in MB; the least
    /// recently used go first.
    #[arg(long, default_value_t = 4096)]
    max_pushed_mb: u64,
    /// Loaded models kept, in MB of their working sets (every tensor of
    /// the graph at once); the least recently used go first. A model whose
    /// working set alone passes it is refused before tract allocates it.
    #[arg(long, default_value_t = 2048)]
    max_loaded_mb: u64,
    /// Largest tensor a model may declare or compute, in MB (refused by
    /// name before tract allocates it).
    #[arg(long, default_value_t = tandem::ModelLimits::TENSOR_BYTES >> 20)]
    max_tensor_mb: u64,
    /// Longest a model's load and profiling may take, in seconds (and its
    /// CPU time): the sandbox is stopped past it and the wearable told why.
    #[arg(long, default_value_t = 60.0)]
    max_load_s: f64,
    /// Each loaded model's built plans, in MB of the weights they copy; the
    /// least recently used go first.
    #[arg(long, default_value_t = 1024)]
    max_plan_mb: u64,
    /// Close a wearable that sends no byte for this many seconds after its
    /// Hello (wearables send a keepalive every 20 s).
    #[arg(long, default_value_t = 60.0)]
    idle_s: f64,
}

/// The edge tier this handheld may relay to.
#[derive(Args)]
struct EdgeArgs {
    /// An edge server wearables may ask this handheld to relay to: an Open
    /// Inference Protocol server (`http://HOST:PORT`, `tandem-wearable
    /// --edge-oip URL`) or a Tandem server paired with this handheld
    /// (`tandem://HOST:PORT`, `tandem-wearable --edge HOST:PORT`);
    /// repeatable. None: it relays nowhere.
    #[arg(long, value_name = "URL")]
    edge_allow: Vec<String>,
    /// The keystore this handheld talks to Tandem edges with
    /// (`tandem-handheld pair-edge`; default `~/.config/tandem/handheld-edge`).
    #[arg(long, value_name = "DIR")]
    edge_keys: Option<PathBuf>,
    /// Longest a relayed frame waits for the edge, in milliseconds; past it
    /// (or on any edge error) this handheld runs the rest itself.
    #[arg(long, default_value_t = 2000)]
    edge_timeout_ms: u64,
    /// Emulate the link to the edge: `UP_MBIT,DOWN_MBIT,RTT_MS` (for
    /// example `0.1,0.1,40` for DeepWear's poor Wi-Fi): the client waits
    /// each request's and answer's time on such a link.
    #[arg(long, value_name = "UP,DOWN,RTT")]
    edge_link: Option<String>,
}

/// The edge client's options from the command line.
fn edge_client(args: &EdgeArgs) -> anyhow::Result<tandem_oip::ClientOptions> {
    let mut options = tandem_oip::ClientOptions {
        timeout: std::time::Duration::from_millis(args.edge_timeout_ms.max(1)),
        ..tandem_oip::ClientOptions::default()
    };
    if let Some(spec) = &args.edge_link {
        let parts: Vec<f64> =
            spec.split(',').map(|p| p.trim().parse::<f64>()).collect::<Result<_, _>>().map_err(|e| {
                anyhow::anyhow!("--edge-link {spec}: {e} (expected UP_MBIT,DOWN_MBIT,RTT_MS)")
            })?;
        let [up, down, rtt] = parts[..] else {
            anyhow::bail!("--edge-link {spec}: expected three numbers, UP_MBIT,DOWN_MBIT,RTT_MS");
        };
        if !(up > 0.0 && down > 0.0 && up.is_finite() && down.is_finite() && (0.0..=10_000.0).contains(&rtt))
        {
            anyhow::bail!("--edge-link {spec}: rates must be positive, the RTT from 0 to 10000 ms");
        }
        options.emulate = Some(tandem_oip::EmulatedLink {
            up_bits_per_s: up * 1e6,
            down_bits_per_s: down * 1e6,
            rtt: std::time::Duration::from_secs_f64(rtt / 1e3),
        });
    }
    for url in &args.edge_allow {
        if !url.starts_with("http://") && !url.starts_with("tandem://") {
            anyhow::bail!(
                "--edge-allow {url}: an http:// URL (an Open Inference Protocol server; TLS is not built in) \
                 or tandem://HOST:PORT (a Tandem server)"
            );
        }
    }
    Ok(options)
}

#[derive(Subcommand)]
// Parsed once per process: the size of the largest variant costs nothing.
#[allow(clippy::large_enum_variant)]
enum Command {
    /// Serve wearables until SIGINT or SIGTERM.
    Serve {
        /// Address to listen on (`127.0.0.1:0` picks a free port; the bound address is printed).
        #[arg(long, default_value = "127.0.0.1:7878")]
        listen: String,
        /// Emulate this link on every connection (ble-1m, ble-2m, bt-classic, wifi-poor, wifi-good, wear-data-layer).
        /// Shape one side only: usually the wearable's `--link`.
        #[arg(long)]
        link: Option<String>,
        /// The handheld's device profile (a shipped name or a TOML file).
        #[arg(long, default_value = "pixel-8-pro")]
        profile: String,
        /// Compute dilation: run suffixes this many times their CPU time on
        /// this host (default 1), and 1 / (1 − load) times that under `--load`.
        #[arg(long, default_value_t = 1.0)]
        slowdown: f64,
        /// The engine suffixes run on; `auto`: for each model, the faster of
        /// the engines this machine has (each profiled when the model loads).
        #[command(flatten)]
        engine: tandem_tools::cli::EngineArgs,
        /// Scale the latency profile sent to wearables by this (1: as
        /// measured): a handheld whose profile is wrong, to watch wearables
        /// learn its real speed.
        #[arg(long, default_value_t = 1.0)]
        profile_scale: f64,
        /// Background CPU load in percent, generated on every core; the
        /// suffixes run 1 / (1 − load) times slower, as processor sharing
        /// leaves them. Status reports the load measured: the share of a
        /// core the suffixes and an idle probe get, as an emulated handheld
        /// (`--slowdown` above 1) gets it, or this host's own otherwise.
        #[arg(long, default_value_t = 0.0)]
        load: f64,
        /// Report `--load` in Status as given instead of the load measured.
        #[arg(long)]
        fixed_load: bool,
        /// Models to serve by digest; pushed models are stored here.
        #[arg(long)]
        models: Option<PathBuf>,
        /// Battery level to report, in percent (default: 100, charging).
        #[arg(long)]
        battery: Option<f64>,
        /// Status period in milliseconds.
        #[arg(long, default_value_t = 500)]
        status_ms: u64,
        /// Also cap this process at PCT% of one CPU through the cgroup v1 cpu
        /// controller (root; /sys/fs/cgroup/cpu).
        #[arg(long, value_name = "PCT")]
        cpu_quota: Option<f64>,
        /// Serve over Bluetooth LE (a GATT peripheral through BlueZ) instead of TCP.
        /// Needs a build with `--features ble`.
        #[arg(long)]
        ble: bool,
        /// The keystore: this handheld's key and its paired wearables
        /// (default `~/.config/tandem/handheld`; created owner-only).
        #[arg(long, value_name = "DIR")]
        keys: Option<PathBuf>,
        #[command(flatten)]
        limits: Limits,
        #[command(flatten)]
        edge: EdgeArgs,
        /// Also serve unpaired wearables over plain links: no encryption,
        /// no authentication (tests and benchmarks on one machine). They
        /// may use the models in `--models` only, unless `--insecure-push`.
        #[arg(long)]
        insecure: bool,
        /// With `--insecure`: let unpaired wearables push models too.
        #[arg(long, requires = "insecure")]
        insecure_push: bool,
        /// Start over with a new key when the old one is gone: the
        /// wearables paired with the old key are set aside and must pair again.
        #[arg(long)]
        new_identity: bool,
    },
    /// Pair one wearable: print a 6-digit code and wait for a wearable to
    /// type it (`tandem-wearable pair --connect ADDR --code NNNNNN`).
    Pair {
        /// Address to listen on for the pairing (`127.0.0.1:0` picks a free port).
        #[arg(long, default_value = "127.0.0.1:7879")]
        listen: String,
        /// The keystore (as for `serve`).
        #[arg(long, value_name = "DIR")]
        keys: Option<PathBuf>,
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 300.0)]
        timeout: f64,
        /// Start over with a new key when the old one is gone (as for `serve`).
        #[arg(long)]
        new_identity: bool,
    },
    /// Pair this handheld with a Tandem server it will relay to as an edge
    /// (`serve --edge-allow tandem://ADDR`): type the 6-digit code that
    /// `tandem-handheld pair` shows on the edge server.
    PairEdge {
        /// The edge's pairing address (its `tandem-handheld pair --listen`).
        #[arg(long)]
        connect: String,
        /// The 6-digit code the edge shows.
        #[arg(long)]
        code: String,
        /// The keystore for edges (as for `serve --edge-keys`).
        #[arg(long, value_name = "DIR")]
        edge_keys: Option<PathBuf>,
        /// The address relayed frames go to, if not the pairing one (the
        /// edge's `serve --listen`); it names this pairing in the keystore.
        #[arg(long, value_name = "ADDR")]
        serve_addr: Option<String>,
    },
    /// (Internal) load and profile one model from standard input under
    /// memory and CPU limits, as `serve` does for every model a wearable
    /// sends or names: a child process, so that nothing tract does to it
    /// can end the server.
    #[command(hide = true)]
    SandboxLoad,
    /// Time every node of the optimized plan on this machine and check additivity.
    Profile {
        /// The ONNX model file.
        #[arg(long)]
        model: PathBuf,
        #[command(flatten)]
        shapes: tandem_tools::cli::ShapeArgs,
        /// Measured runs (after warm-up).
        #[arg(long, default_value_t = 20)]
        runs: usize,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if matches!(cli.command, Command::SandboxLoad) {
        return tandem::sandbox::child_main();
    }
    // Connections, refusals and loads at info unless RUST_LOG says otherwise.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .init();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", tandem_tools::cli::error_chain(e.as_ref()));
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve {
            listen,
            link,
            profile,
            slowdown,
            engine,
            profile_scale,
            load,
            fixed_load,
            models,
            battery,
            status_ms,
            cpu_quota,
            ble,
            keys,
            insecure,
            insecure_push,
            new_identity,
            limits,
            edge,
        } => {
            let _quota = match cpu_quota {
                Some(pct) => Some(tandem_tools::quota::CpuQuota::apply(
                    std::path::Path::new("/sys/fs/cgroup/cpu"),
                    pct,
                )?),
                None => None,
            };
            if !(limits.idle_s.is_finite() && (1.0..=86_400.0).contains(&limits.idle_s)) {
                anyhow::bail!("--idle-s {}: must be from 1 to 86400 seconds", limits.idle_s);
            }
            if limits.idle_s < 20.0 {
                eprintln!(
                    "warning: --idle-s {} is below the wearables' 20 s keepalive: idle wearables will reconnect",
                    limits.idle_s
                );
            }
            if !(limits.max_load_s.is_finite() && (1.0..=3600.0).contains(&limits.max_load_s)) {
                anyhow::bail!("--max-load-s {}: must be from 1 to 3600 seconds", limits.max_load_s);
            }
            if limits.max_pushing_mb < limits.max_push_mb {
                anyhow::bail!(
                    "--max-pushing-mb {} is below --max-push-mb {}: a push the size of the limit could never be taken",
                    limits.max_pushing_mb,
                    limits.max_push_mb
                );
            }
            if limits.max_tensor_mb == 0 || limits.max_loaded_mb == 0 {
                anyhow::bail!("--max-tensor-mb and --max-loaded-mb must be at least 1");
            }
            if limits.max_connections == 0 {
                anyhow::bail!("--max-connections 0: a handheld must serve at least one wearable");
            }
            let security = security(keys, insecure, new_identity)?;
            if !(profile_scale.is_finite() && profile_scale > 0.0 && profile_scale <= 1e3) {
                anyhow::bail!("--profile-scale {profile_scale}: must be a number above 0 and at most 1000");
            }
            let engine = engine.apply()?;
            serve(
                listen,
                link,
                (profile, engine),
                (slowdown, profile_scale),
                (load, fixed_load),
                models,
                battery,
                status_ms,
                ble,
                (security, insecure_push),
                limits,
                edge,
            )
        }
        Command::Pair { listen, keys, timeout, new_identity } => pair(listen, keys, timeout, new_identity),
        Command::PairEdge { connect, code, edge_keys, serve_addr } => {
            pair_edge(connect, code, edge_keys, serve_addr)
        }
        Command::SandboxLoad => unreachable!("handled in main"),
        Command::Profile { model, shapes, runs } => {
            let model = Model::from_path(&model, &shapes.shapes()?)?;
            let profile = tandem::profile::profile(&model, &random_inputs(&model, 0)?, 3, runs)?;
            print!("{}", tandem_tools::report::profile_table(model.graph(), &profile));
            println!(
                "{}",
                serde_json::json!({"model": model.name(), "additivity_ratio": profile.additivity_ratio()})
            );
            Ok(())
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn serve(
    listen: String,
    link: Option<String>,
    (profile, engine): (String, tandem::engine::EngineChoice),
    (slowdown, profile_scale): (f64, f64),
    (load, fixed_load): (f64, bool),
    models: Option<PathBuf>,
    battery: Option<f64>,
    status_ms: u64,
    ble: bool,
    (security, plain_pushes): (tandem::secure::Policy, bool),
    limits: Limits,
    edge: EdgeArgs,
) -> anyhow::Result<()> {
    use anyhow::{bail, Context};
    use tandem::emulate::{LinkControl, LinkProfile, Schedule};
    use tandem::server::{LoadGenerator, ServerConfig};

    if !(slowdown.is_finite() && slowdown >= 1.0) {
        bail!("--slowdown {slowdown}: must be at least 1 (the host cannot run faster than itself)");
    }
    if !(0.0..=95.0).contains(&load) {
        bail!("--load {load}: must be a percentage from 0 to 95");
    }
    if let Some(b) = battery {
        if !(0.0..=100.0).contains(&b) {
            bail!("--battery {b}: must be a percentage from 0 to 100");
        }
    }
    if let Some(dir) = &models {
        if !dir.is_dir() {
            bail!("--models {}: not a directory", dir.display());
        }
    }
    let device =
        tandem::device::DeviceProfile::load(&profile).with_context(|| format!("--profile {profile}"))?;
    let link = match link {
        Some(name) => {
            let p = LinkProfile::named(&name)?;
            let control = LinkControl::new(&p, Schedule::default());
            Some((p, control))
        }
        None => None,
    };
    let config = ServerConfig {
        device: device.name.clone(),
        engine,
        slowdown,
        profile_scale,
        models_dir: models,
        link,
        load: load / 100.0,
        background_load: load / 100.0,
        measure_load: !fixed_load,
        battery: battery.map_or((1.0, true), |b| ((b / 100.0) as f32, false)),
        status_interval: std::time::Duration::from_millis(status_ms.max(10)),
        security,
        plain_pushes,
        max_connections: limits.max_connections,
        max_push_bytes: mb(limits.max_push_mb),
        max_pushed_bytes: mb(limits.max_pushed_mb),
        max_pushing_bytes: mb(limits.max_pushing_mb),
        max_loaded_bytes: mb(limits.max_loaded_mb),
        max_plan_bytes: mb(limits.max_plan_mb),
        idle_timeout: std::time::Duration::from_secs_f64(limits.idle_s),
        model_limits: tandem::ModelLimits {
            max_tensor_bytes: mb(limits.max_tensor_mb),
            max_working_bytes: mb(limits.max_loaded_mb),
        },
        sandbox: Some(tandem::sandbox::Sandbox {
            program: std::env::current_exe().context("finding this program, to load models in a child")?,
            args: vec!["sandbox-load".into()],
            // Room for tract's copies of the weights beside the working set.
            max_memory_bytes: mb(limits.max_loaded_mb).saturating_mul(2).saturating_add(512 << 20),
            max_cpu: std::time::Duration::from_secs_f64(limits.max_load_s.ceil() + 1.0),
            deadline: std::time::Duration::from_secs_f64(limits.max_load_s),
        }),
        edge_client: edge_client(&edge)?,
        edge_keys: Some(
            edge.edge_keys.unwrap_or_else(|| tandem::secure::Keystore::default_dir("handheld-edge")),
        ),
        edge_allow: edge.edge_allow,
        ..ServerConfig::default()
    };
    let _load = (load > 0.0).then(|| {
        LoadGenerator::start(load / 100.0, std::thread::available_parallelism().map_or(1, |n| n.get()))
    });
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    runtime.block_on(async move {
        use std::io::Write;
        let acceptor: Box<dyn tandem::link::Acceptor> = if ble {
            ble_acceptor().await?
        } else {
            let acceptor = tandem::link::TcpAcceptor::bind(&listen).await?;
            println!("listening on {}", acceptor.local_addr()?);
            Box::new(acceptor)
        };
        std::io::stdout().flush()?;
        let shutdown = async {
            use tokio::signal::unix::{signal, SignalKind};
            match (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) {
                (Ok(mut int), Ok(mut term)) => {
                    tokio::select! {
                        _ = int.recv() => {}
                        _ = term.recv() => {}
                    }
                }
                _ => std::future::pending::<()>().await,
            }
        };
        tandem::server::serve(config, acceptor, shutdown).await?;
        println!("stopped");
        anyhow::Ok(())
    })
}

fn mb(n: u64) -> u64 {
    n.saturating_mul(1 << 20)
}

/// The keystore and whether plain links are served.
fn security(
    keys: Option<PathBuf>,
    insecure: bool,
    new_identity: bool,
) -> anyhow::Result<tandem::secure::Policy> {
    use anyhow::Context;
    let dir = keys.unwrap_or_else(|| tandem::secure::Keystore::default_dir("handheld"));
    let keystore = open_keystore(&dir, new_identity)?;
    let paired = keystore.peers().with_context(|| format!("the keystore {}", dir.display()))?.len();
    eprintln!(
        "handheld {}: {paired} paired wearable(s) in {}{}",
        keystore.fingerprint(),
        dir.display(),
        if insecure { "; --insecure: unpaired wearables are served too, unencrypted" } else { "" }
    );
    Ok(tandem::secure::Policy { keystore: Some(std::sync::Arc::new(keystore)), allow_plain: insecure })
}

/// The keystore in `dir` (a new identity only when asked).
fn open_keystore(dir: &std::path::Path, new_identity: bool) -> anyhow::Result<tandem::secure::Keystore> {
    use anyhow::Context;
    let ks = if new_identity {
        tandem::secure::Keystore::start_over(dir)
    } else {
        tandem::secure::Keystore::open_or_create(dir)
    };
    ks.with_context(|| format!("the keystore {}", dir.display()))
}

/// `tandem-handheld pair`.
fn pair(listen: String, keys: Option<PathBuf>, timeout: f64, new_identity: bool) -> anyhow::Result<()> {
    use anyhow::bail;
    use std::io::Write;
    if !(timeout.is_finite() && timeout > 0.0) {
        bail!("--timeout {timeout}: must be a positive number of seconds");
    }
    let dir = keys.unwrap_or_else(|| tandem::secure::Keystore::default_dir("handheld"));
    let keystore = open_keystore(&dir, new_identity)?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async move {
        let mut acceptor = tandem::link::TcpAcceptor::bind(&listen).await?;
        let code = tandem::secure::new_code();
        println!("listening on {}", acceptor.local_addr()?);
        println!("pairing code: {code}");
        std::io::stdout().flush()?;
        let paired = tokio::time::timeout(
            std::time::Duration::from_secs_f64(timeout),
            tandem::secure::pair_handheld(&mut acceptor, &keystore, &code),
        )
        .await
        .map_err(|_| anyhow::anyhow!("no wearable paired within {timeout} s"))??;
        println!(
            "paired with wearable {} (this handheld is {}; keys in {})",
            tandem::secure::fingerprint(&paired),
            keystore.fingerprint(),
            dir.display()
        );
        anyhow::Ok(())
    })
}

/// `tandem-handheld pair-edge`: pairs as a wearable would, into the edge keystore.
fn pair_edge(
    connect: String,
    code: String,
    edge_keys: Option<PathBuf>,
    serve_addr: Option<String>,
) -> anyhow::Result<()> {
    use anyhow::Context;
    tandem::secure::check_code(&code).map_err(anyhow::Error::msg).context("--code")?;
    let dir = edge_keys.unwrap_or_else(|| tandem::secure::Keystore::default_dir("handheld-edge"));
    let keystore = open_keystore(&dir, false)?;
    let label = serve_addr.unwrap_or_else(|| connect.clone());
    let transport = tandem::link::TcpTransport::new(connect.clone());
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let peer = runtime
        .block_on(tandem::secure::pair_wearable(&transport, &keystore, &code, &label))
        .with_context(|| format!("pairing with the edge at {connect}"))?;
    println!(
        "paired with edge {} at {label} (this handheld is {}; keys in {})",
        tandem::secure::fingerprint(&peer),
        keystore.fingerprint(),
        dir.display()
    );
    Ok(())
}

async fn ble_acceptor() -> anyhow::Result<Box<dyn tandem::link::Acceptor>> {
    let acceptor = tandem::ble::peripheral_acceptor("tandem").await?;
    println!("listening on {}", acceptor.describe());
    Ok(acceptor)
}
