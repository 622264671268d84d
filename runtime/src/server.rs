//! The handheld's server: the I/O shell around [`HandheldSession`].
//!
//! Each accepted link gets its own task: a reader that feeds bytes to a
//! [`FrameDecoder`] and messages to the session, a writer that sends what
//! the session says, and a runner that executes suffixes one after the
//! other (in frame order) on tokio's blocking pool. A connection that sends
//! garbage gets an `Error` naming the problem and is closed; the others go
//! on. Models come from `--models DIR` (by digest) or are pushed by the
//! wearable; each is loaded, profiled and planned once and shared by every
//! connection.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};
use tracing::{debug, info, warn};

use crate::emulate::{self, LinkControl, LinkProfile, Role};
use crate::link::{Acceptor, Link};
use crate::{Cut, InputShapes, Model, Sides, SplitExecutor, Values};
use tandem_core::lru::ByteLru;
use tandem_plan::predict::ProfiledLatency;
use tandem_proto::protocol::{
    encode, model_digest, Digest, ErrorCode, Header, LatencySummary, Message, StatusReport, MAX_FRAME_BYTES,
};
use tandem_proto::session::{Action, HandheldSession};

pub use crate::load::LoadGenerator;
use crate::load::LoadMeter;

/// How the handheld serves.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// The device profile name reported to wearables.
    pub device: String,
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
    /// Most connections served at once; more are told the handheld is busy and closed.
    pub max_connections: usize,
    /// Largest model a wearable may push (bytes; at most [`tandem_proto::session::MAX_MODEL_BYTES`]).
    pub max_push_bytes: u64,
    /// Pushed models kept (in `models_dir/pushed/`, else in memory), in
    /// bytes; the least recently used are deleted first.
    pub max_pushed_bytes: u64,
    /// Loaded models kept, in bytes of their ONNX files; the least recently
    /// used are dropped first (a connection using one keeps it alive).
    pub max_loaded_bytes: u64,
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
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            device: "host".into(),
            slowdown: 1.0,
            profile_scale: 1.0,
            models_dir: None,
            link: None,
            load: 0.0,
            measure_load: false,
            battery: (1.0, true),
            status_interval: Duration::from_millis(500),
            max_frame: MAX_FRAME_BYTES,
            max_connections: 32,
            max_push_bytes: tandem_proto::session::MAX_MODEL_BYTES,
            max_pushed_bytes: 4 << 30,
            max_loaded_bytes: 2 << 30,
            max_plan_bytes: 1 << 30,
            plain_pushes: true,
            idle_timeout: Duration::from_secs(60),
            security: crate::secure::Policy::plain(),
        }
    }
}

/// A model ready to serve.
struct Loaded {
    model: Model,
    executor: SplitExecutor,
    latency: LatencySummary,
}

/// Where a pushed model is kept.
#[derive(Clone)]
enum Stored {
    Disk(PathBuf),
    Memory(Arc<Vec<u8>>),
}

struct Shared {
    config: ServerConfig,
    /// The models directory's own models (never evicted).
    files: Mutex<HashMap<Digest, PathBuf>>,
    /// Models wearables pushed, bounded in bytes.
    pushed: Mutex<ByteLru<Digest, Stored>>,
    /// Loaded models by digest and the overrides they were loaded with.
    loaded: Mutex<ByteLru<(Digest, InputShapes), Arc<Loaded>>>,
    /// Held while a model loads.
    loading: Mutex<()>,
    queue: Arc<AtomicU32>,
    /// The measured load, when `config.measure_load`.
    meter: Option<LoadMeter>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn hex(d: &Digest) -> String {
    hex::encode(d)
}

impl Shared {
    /// Whether this handheld holds the model's bytes (a loaded copy alone
    /// is not enough: it may be at other input shapes, and evicted before
    /// the wearable's load). Asking counts as a use of a pushed model.
    fn has_model(&self, d: &Digest) -> bool {
        lock(&self.files).contains_key(d) || lock(&self.pushed).get(d).is_some()
    }

    fn status(&self) -> StatusReport {
        StatusReport {
            load: self.meter.as_ref().map_or(self.config.load, LoadMeter::load) as f32,
            queue: self.queue.load(Ordering::Relaxed),
            battery: self.config.battery.0,
            charging: self.config.battery.1,
        }
    }

    /// Loads (once) the model with this digest with the wearable's
    /// input-shape overrides; `bytes` when just pushed. Once `gone` (the
    /// peer that asked has left) it stops before each costly step.
    fn load(
        &self,
        digest: Digest,
        bytes: Option<Vec<u8>>,
        shapes: InputShapes,
        gone: &AtomicBool,
    ) -> Result<Arc<Loaded>, String> {
        let left = || {
            gone.load(Ordering::Relaxed).then(|| "the wearable left before its model was loaded".to_string())
        };
        let key = (digest, shapes);
        if let Some(l) = lock(&self.loaded).get(&key) {
            return Ok(l.clone());
        }
        // One load at a time: wearables that connect together (after a
        // restart, say) wait for the first load instead of each loading and
        // profiling the model again (the soak measured 850 MB for 8 at once).
        let _one = lock(&self.loading);
        if let Some(l) = lock(&self.loaded).get(&key) {
            return Ok(l.clone());
        }
        if let Some(why) = left() {
            return Err(why);
        }
        let (digest, shapes) = (&key.0, &key.1);
        let pushed = bytes.is_some();
        let bytes = match bytes {
            Some(b) => b,
            None => {
                // A pushed model's use counts: it is the last to be evicted.
                let stored = lock(&self.pushed).get(digest).cloned();
                let path = lock(&self.files).get(digest).cloned();
                match (stored, path) {
                    (Some(Stored::Memory(b)), _) => b.to_vec(),
                    (Some(Stored::Disk(p)), _) | (None, Some(p)) => {
                        std::fs::read(&p).map_err(|e| format!("reading {}: {e}", p.display()))?
                    }
                    (None, None) => return Err(format!("no model with digest {}", hex(digest))),
                }
            }
        };
        if model_digest(&bytes) != *digest {
            return Err(format!("the stored model {} no longer matches its digest", hex(digest)));
        }
        let started = Instant::now();
        let model = Model::from_bytes(&bytes, shapes).map_err(|e| e.to_string())?;
        if let Some(why) = left() {
            return Err(why);
        }
        let inputs = tandem_core::check::random_inputs(&model, 1).map_err(|e| e.to_string())?;
        let profile = tandem_core::profile::profile(&model, &inputs, 1, 3).map_err(|e| e.to_string())?;
        let p = ProfiledLatency::from_profile(&profile);
        let k = self.config.slowdown.max(1.0) * self.config.profile_scale;
        let latency = LatencySummary {
            per_layer_s: p.per_node_s.iter().map(|s| s * k).collect(),
            overhead_s: p.overhead_s * k,
        };
        // Its profile must fit one header, or ModelReady could never be sent.
        encode(&Message::new(Header::ModelReady { latency: latency.clone() })).map_err(|e| {
            format!(
                "the model has {} layers: its latency profile does not fit a message ({e})",
                latency.per_layer_s.len()
            )
        })?;
        info!(model = %model.name(), digest = %hex(digest), ?shapes, took_ms = started.elapsed().as_millis() as u64, "model loaded and profiled");
        // Only a model that loaded and ran is kept: a refused push leaves nothing behind.
        if pushed {
            self.store_pushed(*digest, &bytes);
        }
        let executor = SplitExecutor::with_cache_limit(model.clone(), self.config.max_plan_bytes);
        let loaded = Arc::new(Loaded { executor, model, latency });
        let size = bytes.len() as u64;
        for ((d, shapes), _) in lock(&self.loaded).insert(key, loaded.clone(), size) {
            info!(digest = %hex(&d), ?shapes, "a loaded model dropped (least recently used; --max-loaded-mb)");
        }
        Ok(loaded)
    }

    fn store_pushed(&self, digest: Digest, bytes: &[u8]) {
        let stored = match &self.config.models_dir {
            Some(dir) => {
                let path = dir.join(PUSHED_DIR).join(format!("{}.onnx", hex(&digest)));
                // Written aside, then renamed: a crash leaves no partial model.
                let partial = path.with_extension("partial");
                let written = std::fs::create_dir_all(dir.join(PUSHED_DIR))
                    .and_then(|()| std::fs::write(&partial, bytes))
                    .and_then(|()| std::fs::rename(&partial, &path));
                match written {
                    Ok(()) => Stored::Disk(path),
                    Err(e) => {
                        warn!(
                            "could not store the pushed model in {}: {e}; keeping it in memory",
                            path.display()
                        );
                        Stored::Memory(Arc::new(bytes.to_vec()))
                    }
                }
            }
            None => Stored::Memory(Arc::new(bytes.to_vec())),
        };
        let evicted = lock(&self.pushed).insert(digest, stored, bytes.len() as u64);
        forget_pushed(evicted);
    }
}

/// Where pushed models are kept, under the models directory.
pub const PUSHED_DIR: &str = "pushed";

/// Deletes evicted pushed models' files.
fn forget_pushed(evicted: Vec<(Digest, Stored)>) {
    for (d, stored) in evicted {
        info!(digest = %hex(&d), "a pushed model deleted (least recently used; --max-pushed-mb)");
        if let Stored::Disk(path) = stored {
            if let Err(e) = std::fs::remove_file(&path) {
                warn!("could not delete {}: {e}", path.display());
            }
        }
    }
}

/// The `.onnx` files of `dir`, oldest first (by mtime): digest, path, bytes.
fn onnx_files(dir: &std::path::Path) -> io::Result<Vec<(Digest, PathBuf, u64)>> {
    let mut found = vec![];
    for entry in
        std::fs::read_dir(dir).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?
    {
        let entry = entry?;
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "onnx") {
            continue;
        }
        let modified = entry.metadata().and_then(|m| m.modified()).unwrap_or(std::time::UNIX_EPOCH);
        match std::fs::read(&path) {
            Ok(bytes) => found.push((modified, model_digest(&bytes), path, bytes.len() as u64)),
            Err(e) => warn!("skipping {}: {e}", path.display()),
        }
    }
    found.sort_by_key(|f| f.0);
    Ok(found.into_iter().map(|(_, d, p, n)| (d, p, n)).collect())
}

/// The models directory's own models by digest, and the models pushed in
/// earlier runs (in its `pushed/`), oldest first.
type Scanned = (HashMap<Digest, PathBuf>, Vec<(Digest, PathBuf, u64)>);

fn scan_models(dir: &std::path::Path) -> io::Result<Scanned> {
    let own = onnx_files(dir)?.into_iter().map(|(d, p, _)| (d, p)).collect();
    let pushed = dir.join(PUSHED_DIR);
    let earlier = if pushed.is_dir() { onnx_files(&pushed)? } else { vec![] };
    Ok((own, earlier))
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
        LoadMeter::start(config.status_interval.max(Duration::from_millis(200)), move || {
            queue.load(Ordering::Relaxed) == 0
        })
    });
    let shared = Arc::new(Shared {
        loaded: Mutex::new(ByteLru::new(config.max_loaded_bytes)),
        config,
        files: Mutex::new(files),
        pushed: Mutex::new(pushed),
        loading: Mutex::default(),
        queue,
        meter,
    });
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut connections = tokio::task::JoinSet::new();
    tokio::pin!(shutdown);
    let mut next_id = 0u64;
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = acceptor.accept() => match accepted {
                Ok(mut link) if connections.len() >= shared.config.max_connections => {
                    let limit = shared.config.max_connections;
                    warn!("refusing a connection: {limit} already served");
                    // Told in the plain protocol, off the accept loop; no handshake is owed.
                    tokio::spawn(async move {
                        let reason = format!("the handheld is busy: it serves at most {limit} wearables at once");
                        let m = Message::new(Header::Error { code: ErrorCode::Internal, reason });
                        if let Ok(bytes) = encode(&m) {
                            let _ = tokio::time::timeout(Duration::from_secs(2), link.tx.send(bytes)).await;
                        }
                        let _ = link.tx.close().await;
                    });
                }
                Ok(link) => {
                    next_id += 1;
                    connections.spawn(connection(shared.clone(), link, next_id, stop_rx.clone()));
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

enum Event {
    Loaded(Result<Arc<Loaded>, String>),
    RunFailed(u64, String),
}

struct Job {
    frame: u64,
    cut: String,
    message: Message,
    loaded: Arc<Loaded>,
}

/// Longest wait for a peer to take bytes; then its connection closes.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// Most frames queued to run per connection; beyond it the link is not read.
pub const MAX_QUEUED_JOBS: usize = 32;
/// Most messages waiting to be written to one peer; beyond it the peer is
/// not reading, and its connection closes.
pub const MAX_UNSENT: usize = 256;

/// Most cuts one connection may ask this handheld to build ahead
/// (`Prepare`); later ones are answered with a refusal.
pub const MAX_PREPARED_PER_CONNECTION: usize = 64;

/// Runs one suffix; the result message or a reason. Its share of a core
/// goes to `meter`.
fn run_job(job: &Job, slowdown: f64, meter: Option<&LoadMeter>) -> Result<Message, String> {
    let g = job.loaded.model.graph();
    let cut = Cut::from_key(g, &job.cut).map_err(|e| e.to_string())?;
    let plan = job.loaded.executor.plan_sides(&cut, Sides::Suffix).map_err(|e| e.to_string())?;
    let mut received = Values::new();
    for (name, t) in job.message.tensors().map_err(|e| e.to_string())? {
        received.insert(name, t.into());
    }
    let (started, cpu) = (Instant::now(), crate::load::thread_cpu());
    let out = plan.run_suffix_dilated(g, &received, slowdown).map_err(|e| e.to_string())?;
    let compute_us = started.elapsed().as_micros() as u64;
    if let Some(m) = meter {
        // The dilation's sleeps stretch the run about `slowdown` times (not
        // the set-up before the first layer): not load.
        m.observe(
            crate::load::thread_cpu().saturating_sub(cpu),
            started.elapsed().div_f64(slowdown.max(1.0)),
        );
    }
    let outputs: Vec<(String, &crate::Tensor)> = cut
        .down_tensors()
        .iter()
        .map(|&t| {
            let name = &g.tensor(t).name;
            out.get(name)
                .map(|v| (name.clone(), &**v))
                .ok_or_else(|| format!("the suffix did not compute '{name}'"))
        })
        .collect::<Result<_, _>>()?;
    let answer = match &job.message.header {
        Header::RunSuffix { answer, .. } => answer.as_slice(),
        _ => &[],
    };
    HandheldSession::result(job.frame, compute_us, &outputs, answer).map_err(|e| e.to_string())
}

async fn connection(shared: Arc<Shared>, link: Link, id: u64, mut stop: watch::Receiver<bool>) {
    let link = match &shared.config.link {
        Some((profile, control)) => match emulate::wrap(link, profile, control, Role::Handheld, id) {
            Ok(l) => l,
            Err(e) => {
                warn!(conn = id, "cannot emulate the link: {e}");
                return;
            }
        },
        None => link,
    };
    let (link, paired) = match crate::secure::accept(link, &shared.config.security).await {
        Ok(crate::secure::Accepted::Secure(link, _)) => (link, true),
        Ok(crate::secure::Accepted::Plain(link)) => (link, false),
        Err(e) => {
            warn!(conn = id, "refused: {e}");
            return;
        }
    };
    let Link { mut tx, mut rx, name } = link;
    info!(conn = id, peer = %name, "connected");

    // Bounded both ways: a peer that stops reading, or sends frames faster
    // than they run, cannot grow this handheld's memory.
    let (out_tx, mut out_rx) = mpsc::channel::<Message>(MAX_UNSENT);
    let writer = tokio::spawn(async move {
        while let Some(m) = out_rx.recv().await {
            let bytes = match encode(&m) {
                Ok(b) => b,
                Err(e) => {
                    warn!(conn = id, "cannot encode a reply: {e}");
                    break;
                }
            };
            // A peer that stops reading cannot hold this connection forever.
            match tokio::time::timeout(WRITE_TIMEOUT, tx.send(bytes)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    debug!(conn = id, "send failed: {e}");
                    break;
                }
                Err(_) => {
                    warn!(conn = id, "the peer took no bytes for {WRITE_TIMEOUT:?}: closing");
                    break;
                }
            }
        }
        let _ = tokio::time::timeout(Duration::from_secs(1), tx.close()).await;
    });

    let (event_tx, mut events) = mpsc::unbounded_channel::<Event>();
    let (job_tx, mut jobs) = mpsc::channel::<Job>(MAX_QUEUED_JOBS);
    // Set when the peer has gone: its queued frames are not run.
    let peer_gone = Arc::new(AtomicBool::new(false));
    // Frames the peer cancelled (it ran them itself): skipped if not started.
    let cancelled: Arc<Mutex<std::collections::BTreeSet<u64>>> = Arc::default();
    let runner = {
        let (shared, out_tx, event_tx) = (shared.clone(), out_tx.clone(), event_tx.clone());
        let (gone, cancelled) = (peer_gone.clone(), cancelled.clone());
        tokio::spawn(async move {
            let failed = Arc::new(AtomicBool::new(false));
            while let Some(job) = jobs.recv().await {
                // Frames run in order: cancels of earlier ones are spent.
                let skip = {
                    let mut c = lock(&cancelled);
                    let rest = c.split_off(&job.frame);
                    *c = rest;
                    c.remove(&job.frame)
                };
                if skip {
                    debug!(conn = id, frame = job.frame, "cancelled by the peer: not run");
                }
                // After a failure, once the peer has gone, or when cancelled,
                // queued frames are dropped, not run.
                if skip || failed.load(Ordering::Relaxed) || gone.load(Ordering::Relaxed) {
                    shared.queue.fetch_sub(1, Ordering::Relaxed);
                    continue;
                }
                let slowdown = shared.config.slowdown;
                let frame = job.frame;
                let shared_run = shared.clone();
                let r =
                    tokio::task::spawn_blocking(move || run_job(&job, slowdown, shared_run.meter.as_ref()))
                        .await;
                shared.queue.fetch_sub(1, Ordering::Relaxed);
                match r {
                    Ok(Ok(m)) => {
                        // Waits while the writer is behind: results are not dropped.
                        let _ = out_tx.send(m).await;
                    }
                    Ok(Err(reason)) => {
                        failed.store(true, Ordering::Relaxed);
                        let _ = event_tx.send(Event::RunFailed(frame, reason));
                    }
                    Err(e) => {
                        failed.store(true, Ordering::Relaxed);
                        let _ = event_tx.send(Event::RunFailed(frame, format!("the suffix panicked: {e}")));
                    }
                }
            }
        })
    };

    let mut session = HandheldSession::new(shared.config.device.clone(), shared.status())
        .max_push(shared.config.max_push_bytes);
    if !paired && !shared.config.plain_pushes {
        session = session.refuse_pushes(
            "this handheld takes pushed models from paired wearables only: pair \
             (`tandem-handheld pair`, `tandem-wearable pair`), or name a model in its --models \
             directory (or serve with --insecure-push)",
        );
    }
    let mut decoder = tandem_proto::protocol::FrameDecoder::new(shared.config.max_frame);
    let mut loaded: Option<Arc<Loaded>> = None;
    let mut status_tick = tokio::time::interval(shared.config.status_interval);
    status_tick.tick().await;
    let mut close = false;

    let prepare_budget = AtomicUsize::new(MAX_PREPARED_PER_CONNECTION);
    // Carries out the session's actions; returns true when the connection must close.
    let act = |actions: Vec<Action>, loaded: &Option<Arc<Loaded>>| -> bool {
        let mut close = false;
        for a in actions {
            match a {
                Action::Send(m) => {
                    if let Header::Error { code, reason } = &m.header {
                        warn!(conn = id, ?code, "refusing the peer: {reason}");
                    }
                    if out_tx.try_send(m).is_err() {
                        warn!(
                            conn = id,
                            "the peer is not reading its answers ({MAX_UNSENT} unsent): closing"
                        );
                        close = true;
                    }
                }
                Action::LoadKnown { digest, shapes } => {
                    let (shared, event_tx, gone) = (shared.clone(), event_tx.clone(), peer_gone.clone());
                    tokio::task::spawn_blocking(move || {
                        let _ = event_tx.send(Event::Loaded(shared.load(digest, None, shapes, &gone)));
                    });
                }
                Action::LoadPushed { digest, bytes, shapes } => {
                    let (shared, event_tx, gone) = (shared.clone(), event_tx.clone(), peer_gone.clone());
                    tokio::task::spawn_blocking(move || {
                        let _ = event_tx.send(Event::Loaded(shared.load(digest, Some(bytes), shapes, &gone)));
                    });
                }
                Action::Prepare { mut cuts } => match loaded {
                    Some(l) => {
                        // A peer may not make this handheld build without end.
                        let left = prepare_budget.load(Ordering::Relaxed);
                        let allowed = left.min(cuts.len());
                        prepare_budget.store(left - allowed, Ordering::Relaxed);
                        for key in cuts.split_off(allowed) {
                            let reason = format!(
                                "this handheld builds at most {MAX_PREPARED_PER_CONNECTION} cuts ahead per connection"
                            );
                            let _ = out_tx.try_send(HandheldSession::prepared(key, 0, Some(reason)));
                        }
                        let (l, out_tx) = (l.clone(), out_tx.clone());
                        // One after the other, off the async threads: builds
                        // ahead must not take every core from the frames.
                        tokio::task::spawn_blocking(move || {
                            for key in cuts {
                                let started = Instant::now();
                                let built = Cut::from_key(l.model.graph(), &key)
                                    .and_then(|cut| l.executor.plan_sides(&cut, Sides::Suffix));
                                let build_us = started.elapsed().as_micros() as u64;
                                let error = built.err().map(|e| e.to_string());
                                debug!(conn = id, cut = %key, build_us, ?error, "prepared");
                                let _ = out_tx.blocking_send(HandheldSession::prepared(key, build_us, error));
                            }
                        });
                    }
                    None => close = true,
                },
                Action::Run { frame, cut, message } => match loaded {
                    Some(l) => {
                        shared.queue.fetch_add(1, Ordering::Relaxed);
                        if job_tx.try_send(Job { frame, cut, message, loaded: l.clone() }).is_err() {
                            shared.queue.fetch_sub(1, Ordering::Relaxed);
                            let reason =
                                format!("more than {MAX_QUEUED_JOBS} frames queued on this connection");
                            warn!(conn = id, "{reason}");
                            let _ = out_tx.try_send(Message::new(Header::Error {
                                code: ErrorCode::Unexpected,
                                reason,
                            }));
                            close = true;
                        }
                    }
                    None => close = true,
                },
                Action::Cancel { frames } => {
                    // The session passes only frames this peer sent, at most
                    // MAX_CANCEL a message; the runner forgets those it passes.
                    let mut c = lock(&cancelled);
                    if c.len() + frames.len() <= 4 * MAX_QUEUED_JOBS {
                        c.extend(frames);
                    }
                }
                Action::Close => close = true,
            }
        }
        close
    };

    // A peer must say Hello soon after the link opens (the secure handshake was timed already).
    let hello_deadline = tokio::time::Instant::now() + crate::secure::HANDSHAKE_TIMEOUT;
    let mut said_hello = false;
    // When the peer last sent bytes (or this side last chose not to read).
    let mut heard = tokio::time::Instant::now();
    let idle = shared.config.idle_timeout;
    while !close {
        tokio::select! {
            _ = tokio::time::sleep_until(heard + idle), if said_hello && job_tx.capacity() > 0 => {
                warn!(conn = id, "no bytes from the peer for {idle:?}: closing");
                let reason = format!("no bytes for {idle:?} (an idle peer is closed)");
                let _ = out_tx.try_send(Message::new(Header::Error { code: ErrorCode::Unexpected, reason }));
                break;
            }
            _ = tokio::time::sleep_until(hello_deadline), if !said_hello => {
                warn!(conn = id, "no Hello within {:?}: closing", crate::secure::HANDSHAKE_TIMEOUT);
                let reason = format!("no Hello within {:?}", crate::secure::HANDSHAKE_TIMEOUT);
                let _ = out_tx.try_send(Message::new(Header::Error { code: ErrorCode::Unexpected, reason }));
                break;
            }
            // No reading while the run queue is full (backpressure on the
            // link); the timer below polls it again.
            r = rx.recv(), if job_tx.capacity() > 0 => match r {
                Ok(Some(bytes)) => {
                    heard = tokio::time::Instant::now();
                    let (messages, failed) = decoder.push_and_decode(&bytes);
                    for m in messages {
                        if close {
                            break;
                        }
                        said_hello |= matches!(m.header, Header::Hello { .. });
                        close |= act(session.on_message(m, |d| shared.has_model(d)), &loaded);
                    }
                    if let (Some(e), false) = (failed, close) {
                        close |= act(session.on_decode_error(&e), &loaded);
                    }
                }
                Ok(None) => {
                    if decoder.pending() > 0 {
                        let reason = format!(
                            "the link closed inside a frame ({} bytes of a frame were received)",
                            decoder.pending()
                        );
                        warn!(conn = id, "{reason}");
                        let _ = out_tx.try_send(Message::new(Header::Error { code: ErrorCode::Malformed, reason }));
                    } else {
                        debug!(conn = id, "peer closed");
                    }
                    peer_gone.store(true, Ordering::Relaxed);
                    break;
                }
                Err(e) => {
                    debug!(conn = id, "receive failed: {e}");
                    peer_gone.store(true, Ordering::Relaxed);
                    break;
                }
            },
            Some(ev) = events.recv() => {
                let actions = match ev {
                    Event::Loaded(Ok(l)) => {
                        let latency = l.latency.clone();
                        loaded = Some(l);
                        session.model_loaded(latency)
                    }
                    Event::Loaded(Err(reason)) => session.model_failed(reason),
                    Event::RunFailed(frame, reason) => {
                        let reason = format!("frame {frame}: {reason}");
                        warn!(conn = id, "{reason}");
                        let _ = out_tx.try_send(Message::new(Header::Error { code: ErrorCode::Tensor, reason }));
                        vec![Action::Close]
                    }
                };
                close |= act(actions, &loaded);
            },
            // Not reading is this side's choice: it does not count as idle.
            _ = tokio::time::sleep(Duration::from_millis(5)), if job_tx.capacity() == 0 => {
                heard = tokio::time::Instant::now();
            }
            _ = status_tick.tick() => {
                session.set_status(shared.status());
                if let Some(m) = session.status_message() {
                    if out_tx.try_send(m).is_err() {
                        warn!(conn = id, "the peer is not reading ({MAX_UNSENT} messages unsent): closing");
                        break;
                    }
                }
            },
            _ = stop.changed() => {
                let _ = out_tx.try_send(Message::new(Header::Bye));
                break;
            }
        }
    }
    // However it ended, frames still queued and a model still loading are not wanted.
    peer_gone.store(true, Ordering::Relaxed);
    drop(job_tx);
    // Results already computed still go out before the close, within bounds:
    // a peer that stopped reading does not keep this task.
    let mut runner = runner;
    if tokio::time::timeout(WRITE_TIMEOUT, &mut runner).await.is_err() {
        runner.abort();
    }
    drop(out_tx);
    let mut writer = writer;
    if tokio::time::timeout(WRITE_TIMEOUT, &mut writer).await.is_err() {
        writer.abort();
    }
    info!(conn = id, "closed");
}

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
