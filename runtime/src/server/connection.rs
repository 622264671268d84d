//! One connection's driver: a `select!` loop that feeds the link's bytes,
//! the time and the finished work (a model loaded, a frame run) into the
//! connection's [`HandheldSession`] and carries its actions out. Every rule
//! and timer is the session's; this file only moves bytes, spawns work
//! and logs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};
use tracing::{debug, info, warn};

use super::admission::Admission;
use super::runner::{self, Job};
use super::store::{LoadError, Loaded, Shared};
use super::{MAX_PREPARED_PER_CONNECTION, MAX_QUEUED_JOBS, MAX_UNSENT, RUN_AHEAD, WRITE_TIMEOUT};
use crate::emulate::{self, Role};
use crate::error::EdgeError;
use crate::link::Link;
use tandem_proto::protocol::{encode, Message};
use tandem_proto::session::{Action, CloseReason, HandheldLimits, HandheldSession, RunError};

/// A model load finished (off the I/O threads).
type LoadResult = Result<Arc<Loaded>, LoadError>;

/// The session's clock: tokio's (virtual under `tokio::time::pause`).
fn now() -> std::time::Instant {
    tokio::time::Instant::now().into_std()
}

/// A frame's run: its number and result message, or why it failed.
type Ran = (u64, Result<Message, RunError>);

/// Frames the wearable cancelled after they were handed to the runner.
type Skipped = Arc<std::sync::Mutex<std::collections::HashSet<u64>>>;

/// The connection's runner: one thread that runs the frames handed to it
/// one at a time, in order (the session hands out the next before one
/// finishes, so no round trip through this task sits between two runs),
/// and sends their answers on as [`runner::Batch`] says. It ends when the
/// connection drops its sender; once the peer is gone, frames still
/// waiting are answered with an error, not run, and so are frames
/// cancelled before they started.
fn spawn_runner(
    id: u64,
    shared: Arc<Shared>,
    (peer_gone, skipped): (Arc<AtomicBool>, Skipped),
    done: mpsc::UnboundedSender<Ran>,
) -> std::io::Result<std::sync::mpsc::Sender<Job>> {
    let (jobs, queue) = std::sync::mpsc::channel::<Job>();
    // Relayed frames wait on the edge through the connection's runtime.
    let handle = tokio::runtime::Handle::current();
    std::thread::Builder::new().name(format!("tandem-runner-{id}")).spawn(move || {
        let mut last = runner::LastPlan::default();
        // The server's settings are fixed for its life.
        let speed = runner::Speed::of(&shared.config);
        let (mut batch, mut held) = (runner::Batch::default(), Vec::with_capacity(runner::Batch::MAX));
        let mut next = None;
        loop {
            let job = match next.take() {
                Some(job) => job,
                None => match queue.recv() {
                    Ok(job) => job,
                    Err(_) => return,
                },
            };
            let (frame, started) = (job.frame, Instant::now());
            let skip = {
                let mut s = skipped.lock().unwrap_or_else(|p| p.into_inner());
                let skip = s.remove(&frame);
                // Frames come in order: older cancels are past.
                s.retain(|&f| f > frame);
                skip
            };
            let ran = if skip {
                (frame, Err("cancelled by the wearable".to_string().into()))
            } else if peer_gone.load(Ordering::Relaxed) {
                (frame, Err("the connection closed".to_string().into()))
            } else {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    runner::run(job, &mut last, speed, shared.meter.as_ref(), &handle)
                }))
                .unwrap_or_else(|p| {
                    let why = tandem_core::guard::panic_message(&*p);
                    (frame, Err(format!("the suffix panicked: {why}").into()))
                })
            };
            held.push(ran);
            next = queue.try_recv().ok();
            let like = next.as_ref().is_some_and(|n| last.runs_as_built(n));
            if batch.hold(started.elapsed(), like) {
                continue;
            }
            // The first send wakes the connection's task; the rest find it
            // awake.
            for ran in held.drain(..) {
                if done.send(ran).is_err() {
                    return;
                }
            }
        }
    })?;
    Ok(jobs)
}

/// What one connection holds besides its session.
struct Driver {
    id: u64,
    shared: Arc<Shared>,
    out_tx: mpsc::Sender<Message>,
    loads: mpsc::UnboundedSender<LoadResult>,
    /// Set when the peer has gone: a model still loading for it stops.
    peer_gone: Arc<AtomicBool>,
    loaded: Option<Arc<Loaded>>,
    /// The runner's queue (started with the first frame), and its results.
    jobs: Option<std::sync::mpsc::Sender<Job>>,
    done_tx: mpsc::UnboundedSender<Ran>,
    /// Frames handed to the runner and not yet finished.
    handed: usize,
    /// Of those, the ones cancelled: the runner skips them if not started.
    skipped: Skipped,
    /// Frames this connection counts in the shared status's queue.
    counted: u32,
    /// The edge this connection relays to, once checked.
    edge: Option<Arc<super::edge::Edge>>,
    /// An edge check is running.
    edge_checking: bool,
    /// Edge checks finish here.
    edges: mpsc::UnboundedSender<super::edge::Checked>,
}

impl Driver {
    /// Carries out the session's actions.
    fn carry(&mut self, session: &mut HandheldSession, actions: Vec<Action>) {
        for a in actions {
            match a {
                Action::Send(m) => {
                    if self.out_tx.try_send(m).is_err() {
                        let why = format!("the peer is not reading its answers ({MAX_UNSENT} unsent)");
                        warn!(conn = self.id, "{why}: closing");
                        session.handle_link_error(why);
                    }
                }
                Action::LoadKnown { digest, shapes } => self.load(digest, None, shapes, None),
                Action::LoadPushed { digest, bytes, shapes, reservation } => {
                    self.load(digest, Some(bytes), shapes, reservation)
                }
                Action::Prepare { cuts, engine } => {
                    if let Some(l) = self.loaded.clone() {
                        let (out, id) = (self.out_tx.clone(), self.id);
                        tokio::task::spawn_blocking(move || runner::prepare(&l, (cuts, engine), &out, id));
                    }
                }
                Action::Run { frame, cut, tensors, answer, edge, engine } => {
                    // The session runs frames only once the model is loaded,
                    // and relays only once an edge is attached.
                    if let Some(loaded) = self.loaded.clone() {
                        let edge = edge.and_then(|near| Some((near, self.edge.clone()?)));
                        let received = crate::encoding::Received::of(tensors);
                        self.run(Job { frame, cut, received, answer, loaded, edge, engine });
                    }
                }
                // One edge check at a time: each may attach a Tandem edge
                // (a link, the model pushed); a wearable asks once per
                // session, so a second ask before the answer is refused.
                Action::Edge { url, .. } if self.edge_checking => {
                    let why = "an edge is being checked already: one ask at a time".to_string();
                    let m = session.edge_ready(&url, vec![], (0, None), Some(why));
                    if self.out_tx.try_send(m).is_err() {
                        let why = format!("the peer is not reading its answers ({MAX_UNSENT} unsent)");
                        session.handle_link_error(why);
                    }
                }
                Action::Edge { url, cuts } => {
                    if let Some(loaded) = self.loaded.clone() {
                        self.edge_checking = true;
                        let (shared, done) = (self.shared.clone(), self.edges.clone());
                        tokio::spawn(async move {
                            let config = &shared.config;
                            let settings = super::edge::EdgeSettings {
                                allow: &config.edge_allow,
                                options: config.edge_client.clone(),
                                keys: config.edge_keys.as_deref(),
                            };
                            let (store, digest) = (shared.clone(), loaded.digest);
                            // The edge gets exactly the model this connection loaded.
                            let bytes = move || {
                                let bytes =
                                    store.model_bytes(&digest).map_err(|e| EdgeError::ModelFile(e.into()))?;
                                match tandem_proto::protocol::model_digest(&bytes) == digest {
                                    true => Ok(bytes),
                                    false => Err(EdgeError::ModelChanged),
                                }
                            };
                            let checked = super::edge::check(settings, loaded, bytes, url, cuts).await;
                            let _ = done.send(checked);
                        });
                    }
                }
                Action::Skip { frames } => {
                    self.skipped.lock().unwrap_or_else(|p| p.into_inner()).extend(frames);
                }
                Action::Close => {}
            }
        }
        // The shared status counts this connection's frames queued or running.
        let now = session.queued() as u32;
        if now >= self.counted {
            self.shared.queue.fetch_add(now - self.counted, Ordering::Relaxed);
        } else {
            self.shared.queue.fetch_sub(self.counted - now, Ordering::Relaxed);
        }
        self.counted = now;
    }

    /// Hands `job` to the runner, starting it with the first frame; a
    /// runner that cannot start answers the frame with why.
    fn run(&mut self, job: Job) {
        let frame = job.frame;
        if self.jobs.is_none() {
            let (shared, done) = (self.shared.clone(), self.done_tx.clone());
            let flags = (self.peer_gone.clone(), self.skipped.clone());
            match spawn_runner(self.id, shared, flags, done) {
                Ok(jobs) => self.jobs = Some(jobs),
                Err(e) => warn!(conn = self.id, "cannot start a runner thread: {e}"),
            }
        }
        self.handed += 1;
        let sent = self.jobs.as_ref().map(|jobs| jobs.send(job).is_ok()).unwrap_or(false);
        if !sent {
            let _ = self
                .done_tx
                .send((frame, Err("this handheld cannot run frames now (no runner)".to_string().into())));
        }
    }

    fn load(
        &self,
        digest: tandem_proto::protocol::Digest,
        bytes: Option<Vec<u8>>,
        shapes: crate::InputShapes,
        reservation: Option<tandem_proto::session::PushReservation>,
    ) {
        let (shared, loads, gone) = (self.shared.clone(), self.loads.clone(), self.peer_gone.clone());
        tokio::task::spawn_blocking(move || {
            // The push's share of the budget lives as long as its bytes.
            let _reservation = reservation;
            // Whatever happens in the load, the peer hears of it: a panic
            // is a reason too, never silence.
            let loaded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                shared.load(digest, bytes, shapes, &gone)
            }))
            .unwrap_or_else(|p| Err(LoadError::Panicked(tandem_core::guard::panic_message(&*p))));
            if let Err(reason) = &loaded {
                info!(%reason, "a model load refused");
            }
            let _ = loads.send(loaded);
        });
    }
}

impl Drop for Driver {
    /// However the connection ends (its task aborted at shutdown too): the
    /// runner and any load stop taking this peer's work, and its frames
    /// leave the shared status's queue.
    fn drop(&mut self) {
        self.peer_gone.store(true, Ordering::Relaxed);
        self.shared.queue.fetch_sub(self.counted, Ordering::Relaxed);
    }
}

/// A connection's place in the [`Admission`]: its handshake may be
/// evicted until it authenticates.
pub(super) struct Admitted {
    pub(super) admission: Arc<Admission>,
    pub(super) evicted: tokio::sync::oneshot::Receiver<()>,
}

pub(super) async fn connection(
    shared: Arc<Shared>,
    link: Link,
    id: u64,
    admitted: Admitted,
    mut stop: watch::Receiver<bool>,
) {
    let link = match &shared.config.link {
        Some((profile, control)) => match emulate::wrap(link, profile, control, Role::Handheld, id) {
            Ok(l) => l,
            Err(e) => {
                admitted.admission.abandoned(id);
                warn!(conn = id, "cannot emulate the link: {e}");
                return;
            }
        },
        None => link,
    };
    let Admitted { admission, evicted } = admitted;
    let accepted = tokio::select! {
        accepted = crate::secure::accept(link, &shared.config.security) => accepted,
        _ = evicted => {
            admission.abandoned(id);
            info!(conn = id, "dropped in its handshake: newer handshakes need the room");
            return;
        }
    };
    let (link, paired) = match accepted {
        Ok(crate::secure::Accepted::Secure(link, _)) => (link, true),
        Ok(crate::secure::Accepted::Plain(link)) => (link, false),
        Err(e) => {
            admission.abandoned(id);
            warn!(conn = id, "refused: {e}");
            return;
        }
    };
    // A slot is taken only now, once the peer has authenticated.
    let Some(_slot) = admission.authenticated(id) else {
        let limit = shared.config.max_connections;
        warn!(conn = id, peer = %link.name, paired, "refused: busy ({limit} wearables already served)");
        let mut link = link;
        // Told in the protocol the peer speaks (sealed, once paired).
        if let Ok(bytes) = encode(&HandheldSession::busy(limit)) {
            let _ = tokio::time::timeout(Duration::from_secs(2), link.tx.send(bytes)).await;
        }
        let _ = tokio::time::timeout(Duration::from_secs(1), link.tx.close()).await;
        return;
    };
    let Link { mut tx, mut rx, name } = link;
    let (handshakes, served) = admission.counts();
    info!(conn = id, peer = %name, paired, served, handshakes, "connected");

    // Bounded: a peer that stops reading cannot grow this handheld's memory.
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

    let config = &shared.config;
    let limits = HandheldLimits {
        hello_timeout: crate::secure::HANDSHAKE_TIMEOUT,
        idle_timeout: config.idle_timeout,
        status_interval: config.status_interval,
        max_queued: MAX_QUEUED_JOBS,
        max_prepared: MAX_PREPARED_PER_CONNECTION,
        max_frame: config.max_frame,
        run_ahead: RUN_AHEAD,
    };
    let mut session = HandheldSession::new(config.device.clone(), shared.status(), now())
        .engines(offered_engines(config.engine))
        .limits(limits)
        .max_push(config.max_push_bytes)
        .push_budget(shared.push_budget.clone());
    if !paired && !config.plain_pushes {
        session = session.refuse_pushes(
            "this handheld takes pushed models from paired wearables only: pair \
             (`tandem-handheld pair`, `tandem-wearable pair`), or name a model in its --models \
             directory (or serve with --insecure-push)",
        );
    }
    let (loads_tx, mut loads) = mpsc::unbounded_channel::<LoadResult>();
    let (done_tx, mut done) = mpsc::unbounded_channel::<Ran>();
    let (edges_tx, mut edges) = mpsc::unbounded_channel::<super::edge::Checked>();
    let mut d = Driver {
        id,
        shared: shared.clone(),
        out_tx,
        loads: loads_tx,
        peer_gone: Arc::new(AtomicBool::new(false)),
        loaded: None,
        jobs: None,
        done_tx,
        handed: 0,
        skipped: Skipped::default(),
        counted: 0,
        edge: None,
        edge_checking: false,
        edges: edges_tx,
    };
    while !session.is_closed() {
        let deadline = session.poll_timeout().map(tokio::time::Instant::from_std);
        let actions = tokio::select! {
            () = tokio::time::sleep_until(deadline.unwrap_or_else(tokio::time::Instant::now)), if deadline.is_some() => {
                session.set_status(shared.status());
                session.handle_timeout(now())
            }
            // No reading while the run queue is full: backpressure on the link.
            r = rx.recv(), if session.wants_bytes() => match r {
                Ok(Some(bytes)) => session.handle_bytes(now(), &bytes, |digest| shared.has_model(digest)),
                Ok(None) => session.handle_link_closed(now()),
                Err(e) => session.handle_link_error(format!("receiving failed: {e}")),
            },
            Some(loaded) = loads.recv() => match loaded {
                Ok(l) => {
                    let latency = l.latency.clone();
                    d.loaded = Some(l);
                    session.model_loaded(latency)
                }
                Err(reason) => session.model_failed(reason.to_string()),
            },
            Some((frame, result)) = done.recv(), if d.handed > 0 => {
                d.handed -= 1;
                session.frame_done(now(), frame, result)
            }
            Some(checked) = edges.recv() => {
                d.edge_checking = false;
                d.edge = checked.edge;
                let m = session.edge_ready(&checked.url, checked.deployed, (checked.rtt_us, checked.speed), checked.error);
                vec![Action::Send(m)]
            }
            _ = stop.changed() => session.shutdown(),
        };
        d.carry(&mut session, actions);
        // Messages read before the run queue filled, handled as it drains.
        if session.holds_messages() {
            let actions = session.handle_held(now(), |digest| shared.has_model(digest));
            d.carry(&mut session, actions);
        }
    }
    match session.close_reason() {
        Some(CloseReason::Refused { code, reason }) => warn!(conn = id, ?code, "refused the peer: {reason}"),
        Some(CloseReason::PeerRefused { code, reason }) => {
            info!(conn = id, ?code, "the peer refused: {reason}")
        }
        Some(other) => debug!(conn = id, "closing: {other}"),
        None => {}
    }
    // However it ended, a model still loading is not wanted, nor frames
    // not yet started; a frame still running is answered before the
    // close, within bounds.
    d.peer_gone.store(true, Ordering::Relaxed);
    d.jobs = None;
    let until = tokio::time::Instant::now() + WRITE_TIMEOUT;
    while d.handed > 0 {
        let Ok(Some((frame, result))) = tokio::time::timeout_at(until, done.recv()).await else { break };
        d.handed -= 1;
        let actions = session.frame_done(now(), frame, result);
        d.carry(&mut session, actions);
    }
    drop(d);
    let mut writer = writer;
    if tokio::time::timeout(WRITE_TIMEOUT, &mut writer).await.is_err() {
        writer.abort();
    }
    info!(conn = id, "closed");
}

/// The engines a handheld configured with `choice` offers: the one named,
/// or every engine it has for `auto`.
fn offered_engines(choice: crate::engine::EngineChoice) -> Vec<crate::engine::Engine> {
    match choice {
        crate::engine::EngineChoice::One(e) => vec![e],
        crate::engine::EngineChoice::Auto => crate::engine::available(),
    }
}
