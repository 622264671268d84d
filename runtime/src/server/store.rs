//! The handheld's model store: the models directory's own models (by
//! digest), models wearables pushed (on disk or in memory, least recently
//! used deleted first), and models loaded, profiled and planned once and
//! shared by every connection (least recently used dropped first).

use std::collections::HashMap;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tracing::{info, warn};

use super::ServerConfig;
use crate::engine::{Engine, Engines};
use crate::load::LoadMeter;
use crate::{InputShapes, Model, SplitExecutor};
use tandem_core::lru::ByteLru;
use tandem_proto::protocol::{model_digest, Digest, LatencySummary, StatusReport};
use tandem_proto::session::HandheldSession;

/// A model ready to serve.
pub(super) struct Loaded {
    /// The model's digest (its ONNX bytes').
    pub(super) digest: Digest,
    pub(super) model: Model,
    pub(super) executor: SplitExecutor,
    pub(super) latency: LatencySummary,
}

/// Why a model was not loaded; its text is the reason the peer is sent.
#[derive(Debug, thiserror::Error)]
pub(super) enum LoadError {
    /// The wearable that asked left first.
    #[error("the wearable left before its model was loaded")]
    PeerLeft,
    /// A stored model's file could not be read.
    #[error("reading {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// No model with this digest is stored.
    #[error("no model with digest {}", hex(digest))]
    Unknown {
        /// The digest asked for.
        digest: Digest,
    },
    /// A stored model's bytes no longer hash to its digest.
    #[error("the stored model {} no longer matches its digest", hex(digest))]
    Changed {
        /// The digest it was stored under.
        digest: Digest,
    },
    /// The sandboxed load refused the model, failed or was stopped.
    #[error(transparent)]
    Sandbox(#[from] crate::sandbox::SandboxError),
    /// Loading or profiling the model here failed.
    #[error(transparent)]
    Model(#[from] crate::ModelError),
    /// The model's latency profile is too large for a `ModelReady` header.
    #[error("the model has {layers} layers: its latency profile does not fit a message ({source})")]
    ProfileTooLarge {
        /// The model's layers.
        layers: usize,
        /// Why the header cannot be encoded.
        source: tandem_proto::protocol::ProtocolError,
    },
    /// The load panicked (caught: the server keeps serving).
    #[error("loading the model failed: {0}")]
    Panicked(String),
}

/// Where a pushed model is kept.
#[derive(Clone)]
pub(super) enum Stored {
    Disk(PathBuf),
    Memory(Arc<Vec<u8>>),
}

/// A loaded model's identity: its digest and the overrides it was loaded with.
pub(super) type ModelKey = (Digest, InputShapes);

/// What every connection shares: the configuration, the models, the status.
pub(super) struct Shared {
    pub(super) config: ServerConfig,
    /// The models directory's own models (never evicted).
    pub(super) files: Mutex<HashMap<Digest, PathBuf>>,
    /// Models wearables pushed, bounded in bytes.
    pub(super) pushed: Mutex<ByteLru<Digest, Stored>>,
    /// Loaded models by digest and the overrides they were loaded with.
    pub(super) loaded: Mutex<ByteLru<ModelKey, Arc<Loaded>>>,
    /// One lock per model being loaded (its digest and overrides).
    pub(super) loading: Mutex<HashMap<ModelKey, Arc<Mutex<()>>>>,
    /// Bytes of pushes in progress over every connection.
    pub(super) push_budget: Arc<tandem_proto::session::PushBudget>,
    /// Sandboxed loads running at once (at most [`MAX_LOADS`]).
    pub(super) load_slots: Slots,
    /// Frames queued or running over all connections (the status's `queue`).
    pub(super) queue: Arc<AtomicU32>,
    /// The measured load, when `config.measure_load`.
    pub(super) meter: Option<LoadMeter>,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Most sandboxed loads at once: each may use the sandbox's memory.
pub const MAX_LOADS: usize = 2;

/// A counting semaphore for blocking threads.
pub(super) struct Slots {
    free: Mutex<usize>,
    freed: std::sync::Condvar,
}

impl Slots {
    pub(super) fn new(n: usize) -> Self {
        Slots { free: Mutex::new(n), freed: std::sync::Condvar::new() }
    }

    /// Waits for a slot (given back when the guard drops), or `None`
    /// once `give_up` says so (checked every 50 ms).
    pub(super) fn take_unless(&self, give_up: &dyn Fn() -> bool) -> Option<SlotGuard<'_>> {
        let mut free = lock(&self.free);
        while *free == 0 {
            if give_up() {
                return None;
            }
            free = self
                .freed
                .wait_timeout(free, std::time::Duration::from_millis(50))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        *free -= 1;
        Some(SlotGuard(self))
    }
}

/// A slot of [`Slots`], given back on drop.
pub(super) struct SlotGuard<'a>(&'a Slots);

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        *lock(&self.0.free) += 1;
        self.0.freed.notify_one();
    }
}

fn hex(d: &Digest) -> String {
    hex::encode(d)
}

impl Shared {
    /// Whether this handheld holds the model's bytes (a loaded copy alone
    /// is not enough: it may be at other input shapes, and evicted before
    /// the wearable's load). Asking counts as a use of a pushed model.
    pub(super) fn has_model(&self, d: &Digest) -> bool {
        lock(&self.files).contains_key(d) || lock(&self.pushed).get(d).is_some()
    }

    pub(super) fn status(&self) -> StatusReport {
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
    ///
    /// The model is checked against the configured [`ModelLimits`] before
    /// tract sees it, and (with a [`Sandbox`](crate::sandbox::Sandbox))
    /// loaded and profiled first in a child process under memory and
    /// CPU-time limits and a deadline: what would abort or hang tract ends
    /// the child, never the server. Only a model that passed is loaded
    /// here. Loads of different models run side by side (at most
    /// [`MAX_LOADS`] at once); wearables asking for the same model wait
    /// for its one load.
    pub(super) fn load(
        &self,
        digest: Digest,
        bytes: Option<Vec<u8>>,
        shapes: InputShapes,
        gone: &AtomicBool,
    ) -> Result<Arc<Loaded>, LoadError> {
        let left = || gone.load(Ordering::Relaxed);
        let key = (digest, shapes);
        if let Some(l) = lock(&self.loaded).get(&key) {
            return Ok(l.clone());
        }
        // One load per model: wearables that connect together (after a
        // restart, say) wait for the first load instead of each loading and
        // profiling the model again (the soak measured 850 MB for 8 at once).
        let this = lock(&self.loading).entry(key.clone()).or_default().clone();
        let _one = lock(&this);
        let result = self.load_once(&key, bytes, &left);
        {
            let mut loading = lock(&self.loading);
            if Arc::strong_count(&this) <= 2 {
                loading.remove(&key);
            }
        }
        result
    }

    fn load_once(
        &self,
        key: &ModelKey,
        bytes: Option<Vec<u8>>,
        left: &dyn Fn() -> bool,
    ) -> Result<Arc<Loaded>, LoadError> {
        if let Some(l) = lock(&self.loaded).get(key) {
            return Ok(l.clone());
        }
        if left() {
            return Err(LoadError::PeerLeft);
        }
        let (digest, shapes) = (&key.0, &key.1);
        let pushed = bytes.is_some();
        let bytes = match bytes {
            Some(b) => Arc::new(b),
            None => self.model_bytes(digest)?,
        };
        if model_digest(&bytes) != *digest {
            return Err(LoadError::Changed { digest: *digest });
        }
        let started = Instant::now();
        let limits = &self.config.model_limits;
        let scale = tandem_core::device_clock::factor_of(self.config.slowdown) * self.config.profile_scale;
        let latency = match &self.config.sandbox {
            Some(sandbox) => {
                // Waiting for a sandbox ends when the peer leaves.
                let Some(_slot) = self.load_slots.take_unless(left) else {
                    return Err(LoadError::PeerLeft);
                };
                let (latency, _) = crate::sandbox::profile_in_child(
                    sandbox,
                    &bytes,
                    shapes,
                    limits,
                    scale,
                    self.config.engine,
                )?;
                Some(latency)
            }
            None => None,
        };
        if left() {
            return Err(LoadError::PeerLeft);
        }
        let model = Model::from_bytes_within(&bytes, shapes, limits)?;
        let mut latency = match latency {
            Some(l) => l,
            None => crate::sandbox::profile(&model, scale, self.config.engine)?,
        };
        if !latency.others.is_empty() && HandheldSession::check_latency_fits(&latency).is_err() {
            // Each engine's times do not fit one header: the model's own engine only.
            warn!(
                layers = latency.per_layer_s.len(),
                "the other engines' layer times do not fit ModelReady: not offered per cut"
            );
            latency.others.clear();
        }
        // Its profile must fit one header, or ModelReady could never be sent.
        HandheldSession::check_latency_fits(&latency)
            .map_err(|source| LoadError::ProfileTooLarge { layers: latency.per_layer_s.len(), source })?;
        info!(model = %model.name(), digest = %hex(digest), ?shapes, working_mb = model.working_bytes() >> 20, took_ms = started.elapsed().as_millis() as u64, sandboxed = self.config.sandbox.is_some(), "model loaded and profiled");
        // Only a model that loaded and ran is kept: a refused push leaves nothing behind.
        if pushed {
            self.store_pushed(*digest, &bytes);
        }
        let engines = Engines { prefix: Engine::Tract, suffix: latency.engine };
        let executor =
            SplitExecutor::with_cache_limit(model.clone(), self.config.max_plan_bytes).with_engines(engines);
        // Counted by what running it may hold, not by its file's bytes
        // (a 126-byte file can compute half a gigabyte).
        let size = model.working_bytes().max(bytes.len() as u64);
        let loaded = Arc::new(Loaded { digest: *digest, executor, model, latency });
        for ((d, shapes), _) in lock(&self.loaded).insert(key.clone(), loaded.clone(), size) {
            info!(digest = %hex(&d), ?shapes, "a loaded model dropped (least recently used; --max-loaded-mb)");
        }
        Ok(loaded)
    }

    /// The ONNX bytes of the model with this digest, pushed or in the
    /// models directory (not checked against the digest here).
    pub(super) fn model_bytes(&self, digest: &Digest) -> Result<Arc<Vec<u8>>, LoadError> {
        // A pushed model's use counts: it is the last to be evicted.
        let stored = lock(&self.pushed).get(digest).cloned();
        let path = lock(&self.files).get(digest).cloned();
        match (stored, path) {
            (Some(Stored::Memory(b)), _) => Ok(b),
            // A .tflite in the models directory: its (cached) ONNX translation.
            (Some(Stored::Disk(p)), _) | (None, Some(p)) => match crate::model::onnx_bytes_of(&p) {
                Ok(bytes) => Ok(Arc::new(bytes)),
                Err(crate::ModelError::Io { source, .. }) => Err(LoadError::Read { path: p, source }),
                Err(e) => Err(LoadError::Model(e)),
            },
            (None, None) => Err(LoadError::Unknown { digest: *digest }),
        }
    }

    fn store_pushed(&self, digest: Digest, bytes: &[u8]) {
        let stored = match &self.config.models_dir {
            Some(dir) => {
                let path = dir.join(super::PUSHED_DIR).join(format!("{}.onnx", hex(&digest)));
                // Written aside, then renamed: a crash leaves no partial model.
                let partial = path.with_extension("partial");
                let written = std::fs::create_dir_all(dir.join(super::PUSHED_DIR))
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

/// Deletes evicted pushed models' files.
pub(super) fn forget_pushed(evicted: Vec<(Digest, Stored)>) {
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
        if path.extension().is_none_or(|e| e != "onnx" && e != "tflite") {
            continue;
        }
        let modified = entry.metadata().and_then(|m| m.modified()).unwrap_or(std::time::UNIX_EPOCH);
        // A TFLite model is known by the digest of its ONNX translation,
        // which is what a wearable loading the same file sends.
        match crate::model::onnx_bytes_of(&path) {
            Ok(bytes) => found.push((modified, model_digest(&bytes), path, bytes.len() as u64)),
            Err(e) => warn!("skipping {}: {e}", path.display()),
        }
    }
    found.sort_by_key(|f| f.0);
    Ok(found.into_iter().map(|(_, d, p, n)| (d, p, n)).collect())
}

/// The models directory's own models by digest, and the models pushed in
/// earlier runs (in its `pushed/`), oldest first.
pub(super) type Scanned = (HashMap<Digest, PathBuf>, Vec<(Digest, PathBuf, u64)>);

pub(super) fn scan_models(dir: &std::path::Path) -> io::Result<Scanned> {
    let own = onnx_files(dir)?.into_iter().map(|(d, p, _)| (d, p)).collect();
    let pushed = dir.join(super::PUSHED_DIR);
    let earlier = if pushed.is_dir() { onnx_files(&pushed)? } else { vec![] };
    Ok((own, earlier))
}
