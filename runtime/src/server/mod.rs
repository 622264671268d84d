//! The handheld's server: the I/O shell around [`HandheldSession`].
//!
//! # Layout
//! - this file: the configuration and the accept loop;
//! - `admission`: handshakes bounded apart from served connections, a
//!   slot taken once a peer authenticates (beyond the limit it is told the
//!   handheld is busy);
//! - `store`: the model store (the models directory, pushed models on disk
//!   or in memory, loaded models shared by every connection, all bounded);
//! - `connection`: one connection's driver, a `select!` loop that feeds
//!   bytes and times into its session and carries the actions out;
//! - `runner`: the suffix runner and the builds ahead, on tokio's blocking pool.
//!
//! Every rule and timer of the protocol is the session's (`tandem_proto`).
//! A connection that sends garbage gets an `Error` naming the problem and
//! is closed; the others go on.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tracing::{info, warn};

use crate::emulate::{LinkControl, LinkProfile};
use crate::link::Acceptor;
use tandem_core::lru::ByteLru;
use tandem_proto::protocol::MAX_FRAME_BYTES;

pub(crate) mod admission;
mod connection;
mod edge;
mod edge_tandem;
mod runner;
mod store;

pub use crate::load::LoadGenerator;
use crate::load::LoadMeter;
pub use admission::{MAX_HANDSHAKES, MAX_HANDSHAKES_PER_ADDRESS};
use store::{forget_pushed, scan_models, Shared, Stored};

/// Where pushed models are kept, under the models directory.
pub const PUSHED_DIR: &str = "pushed";

/// How the handheld serves.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// The device profile name reported to wearables.
    pub device: String,
    /// The engine suffixes run on (`auto`: for each model, the faster of
    /// the engines this process has, from a profile on each).
    pub engine: crate::engine::EngineChoice,
    /// Compute dilation: suffixes run this many times slower than the host (≥ 1).
    pub slowdown: f64,
    /// Scales the latency profile reported to wearables (1: as measured).
    /// Anything else makes a handheld whose profile is wrong, for tests of
    /// predictors that learn.
    pub profile_scale: f64,
    /// Where models are found by digest, and pushed models stored.
    pub models_dir: Option<PathBuf>,
    /// An emulated link on every connection (this side shapes both ways).
    pub link: Option<(LinkProfile, LinkControl)>,
    /// The load reported in `Status` (0–1) unless `measure_load`.
    pub load: f64,
    /// The share of each core taken by this handheld's background load
    /// (`tandem-handheld serve --load`, generated on every core; 0–0.95):
    /// a suffix runs `slowdown / (1 − it)` times slower than the host, as
    /// processor sharing leaves it the rest of a core. The device clock
    /// counts a suffix's CPU time ([`tandem_core::device_clock`]), so the
    /// generator's contention on this host does not slow it by itself.
    pub background_load: f64,
    /// Report the CPU load measured ([`LoadMeter`]: the share of a core
    /// the suffixes' threads get, and a probe's while no frame runs), not
    /// `load`.
    pub measure_load: bool,
    /// The battery reported: level in [0, 1] and charging.
    pub battery: (f32, bool),
    /// How often `Status` goes out.
    pub status_interval: Duration,
    /// Largest frame accepted.
    pub max_frame: usize,
    /// Most connections served at once (counted once authenticated); more
    /// are told the handheld is busy and closed. Handshakes have their own
    /// budget ([`admission::MAX_HANDSHAKES`]).
    pub max_connections: usize,
    /// Largest model a wearable may push (bytes; at most [`tandem_proto::session::MAX_MODEL_BYTES`]).
    pub max_push_bytes: u64,
    /// Bytes of pushes in progress at once over all connections (each one
    /// also within `max_push_bytes`); a push beyond it is refused as busy.
    pub max_pushing_bytes: u64,
    /// Pushed models kept (in `models_dir/pushed/`, else in memory), in
    /// bytes; the least recently used are deleted first.
    pub max_pushed_bytes: u64,
    /// Loaded models kept, in bytes of their working sets (every tensor
    /// of the graph: weights, inputs, intermediates, outputs); the least
    /// recently used are dropped first (a connection using one keeps it
    /// alive).
    pub max_loaded_bytes: u64,
    /// What one model may cost, checked before tract allocates it: its
    /// largest tensor and its working set (see [`tandem_core::budget`]).
    pub model_limits: crate::ModelLimits,
    /// Where models are loaded and profiled first, under memory and CPU
    /// limits (`tandem-handheld serve` always sets one); `None` loads in
    /// this process, after the size checks only.
    pub sandbox: Option<crate::sandbox::Sandbox>,
    /// Each loaded model's built plans, in bytes of the weights they copy
    /// ([`tandem_core::split::plan_weight_bytes`]); least recently used first.
    pub max_plan_bytes: u64,
    /// A peer that has said Hello and then sends no byte for this long is
    /// closed (wearables send a keepalive every 20 s when idle).
    pub idle_timeout: Duration,
    /// Whether wearables on plain (unpaired) links may push models; when
    /// not, they may use the models in `models_dir` only.
    pub plain_pushes: bool,
    /// Which links are served: encrypted sessions with paired wearables,
    /// plain ones, or both. The default serves plain links only (in-process
    /// links and tests); `tandem-handheld serve` serves paired wearables
    /// only unless `--insecure`.
    pub security: crate::secure::Policy,
    /// The edge servers a wearable may ask this handheld to relay to: Open
    /// Inference Protocol base URLs (`http://HOST:PORT`) and Tandem servers
    /// (`tandem://HOST:PORT`); none: it relays nowhere.
    pub edge_allow: Vec<String>,
    /// The keystore this handheld talks to Tandem edges with, as a wearable
    /// does (`tandem-handheld pair-edge`); `None`: Tandem edges are refused.
    pub edge_keys: Option<std::path::PathBuf>,
    /// How this handheld talks to an edge (its timeout bounds how long a
    /// relayed frame waits before the rest runs here).
    pub edge_client: tandem_oip::ClientOptions,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            device: "host".into(),
            engine: crate::engine::EngineChoice::default(),
            slowdown: 1.0,
            profile_scale: 1.0,
            models_dir: None,
            link: None,
            load: 0.0,
            background_load: 0.0,
            measure_load: false,
            battery: (1.0, true),
            status_interval: Duration::from_millis(500),
            max_frame: MAX_FRAME_BYTES,
            max_connections: 32,
            max_push_bytes: tandem_proto::session::MAX_MODEL_BYTES,
            max_pushed_bytes: 4 << 30,
            max_pushing_bytes: 2 << 30,
            max_loaded_bytes: 2 << 30,
            model_limits: crate::ModelLimits {
                max_tensor_bytes: crate::ModelLimits::TENSOR_BYTES,
                max_working_bytes: 2 << 30,
            },
            sandbox: None,
            max_plan_bytes: 1 << 30,
            plain_pushes: true,
            idle_timeout: Duration::from_secs(60),
            security: crate::secure::Policy::plain(),
            edge_allow: vec![],
            edge_keys: None,
            edge_client: tandem_oip::ClientOptions::default(),
        }
    }
}

/// Serves links from `acceptor` until `shutdown` completes; then every
/// connection is sent `Bye` and closed.
pub async fn serve(
    config: ServerConfig,
    mut acceptor: impl Acceptor,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    // Hashing every model file is blocking work: off the async threads.
    let (files, earlier) = match config.models_dir.clone() {
        Some(dir) => tokio::task::spawn_blocking(move || scan_models(&dir))
            .await
            .map_err(|e| io::Error::other(format!("scanning the models directory: {e}")))??,
        None => (HashMap::new(), vec![]),
    };
    let mut pushed = ByteLru::new(config.max_pushed_bytes);
    for (digest, path, bytes) in earlier {
        forget_pushed(pushed.insert(digest, Stored::Disk(path), bytes));
    }
    info!(listen = %acceptor.describe(), models = files.len(), pushed = pushed.len(), device = %config.device, slowdown = config.slowdown, "serving");
    let queue = Arc::new(AtomicU32::new(0));
    // Measured while no frame of this handheld's is queued or running: its
    // own work is not load on its wearables' frames.
    let meter = config.measure_load.then(|| {
        let queue = queue.clone();
        let interval = config.status_interval.max(Duration::from_millis(200));
        LoadMeter::start(interval, (config.slowdown, config.background_load), move || {
            queue.load(Ordering::Relaxed) == 0
        })
    });
    let shared = Arc::new(Shared {
        push_budget: tandem_proto::session::PushBudget::new(config.max_pushing_bytes),
        loaded: Mutex::new(ByteLru::new(config.max_loaded_bytes)),
        config,
        files: Mutex::new(files),
        pushed: Mutex::new(pushed),
        loading: Mutex::default(),
        load_slots: store::Slots::new(store::MAX_LOADS),
        queue,
        meter,
    });
    let admission = admission::Admission::new(shared.config.max_connections);
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut connections = tokio::task::JoinSet::new();
    tokio::pin!(shutdown);
    let mut next_id = 0u64;
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = acceptor.accept() => match accepted {
                Ok(link) => {
                    next_id += 1;
                    // The handshake starts now; a slot is taken once it authenticates.
                    let (link, heard) = crate::link::watch_first_bytes(link);
                    let now = tokio::time::Instant::now().into_std();
                    let evicted = admission.begin(next_id, admission::address(&link.name), heard, now);
                    let admitted = connection::Admitted { admission: admission.clone(), evicted };
                    connections.spawn(connection::connection(shared.clone(), link, next_id, admitted, stop_rx.clone()));
                }
                Err(e) if e.kind() == io::ErrorKind::NotConnected => break,
                Err(e) => {
                    // Out of file descriptors, say: wait rather than spin.
                    warn!("accept failed: {e}; retrying in 100 ms");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    info!("shutting down: saying Bye to {} connection(s)", connections.len());
    let _ = stop_tx.send(true);
    let drain = async { while connections.join_next().await.is_some() {} };
    if tokio::time::timeout(Duration::from_secs(3), drain).await.is_err() {
        connections.abort_all();
    }
    Ok(())
}

/// Longest wait for a peer to take bytes; then its connection closes.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// Most frames queued to run per connection; beyond it the link is not read.
pub const MAX_QUEUED_JOBS: usize = 32;
/// Most frames handed to a connection's runner at once: with answers sent
/// up to four at a time ([`runner::Batch`]), a runner that sends four
/// still finds a frame waiting while the session hands out the next four.
const RUN_AHEAD: usize = runner::Batch::MAX + 2;
/// Most messages waiting to be written to one peer; beyond it the peer is
/// not reading, and its connection closes.
pub const MAX_UNSENT: usize = 256;

/// Most cuts one connection may ask this handheld to build ahead
/// (`Prepare`); later ones are answered with a refusal.
pub const MAX_PREPARED_PER_CONNECTION: usize = 64;

/// Serves in-memory links on a thread of its own (for tests and examples):
/// returns the transport to open sessions with. The server stops once
/// every clone of the transport is dropped.
pub fn spawn_memory(config: ServerConfig) -> io::Result<crate::link::MemoryTransport> {
    let (transport, acceptor) = crate::link::memory_transport();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
    std::thread::Builder::new().name("tandem-memory-handheld".into()).spawn(move || {
        let r = runtime.block_on(serve(config, acceptor, std::future::pending::<()>()));
        if let Err(e) = r {
            warn!("the in-memory handheld stopped: {e}");
        }
    })?;
    Ok(transport)
}
