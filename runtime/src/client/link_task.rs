//! The link task: connect, handshake, carry frames, reconnect with backoff; it talks to the app thread by channels.

use std::time::{Duration, Instant};

use crossbeam_channel as cb;
use tokio::sync::mpsc;
use tracing::debug;

use crate::link::{Link, Transport};

use tandem_proto::protocol::{encode, LatencySummary, Message, PackedTensor, StatusReport, TensorMeta};
use tandem_proto::session::{CloseReason, Tensors, WearableAction, WearableSession, WearableTimers};

use super::{Backoff, ModelFile};
use crate::CutKey;

/// From the app thread to the link task.
pub(crate) enum Command {
    /// A frame's suffix, its crossing tensors packed (encoded) already.
    Offload {
        frame: u64,
        /// The cut, and the engine its suffix runs on (`None`: the handheld's own).
        cut: (CutKey, Option<crate::engine::Engine>),
        packed: Vec<PackedTensor>,
        answer: Vec<tandem_proto::encoding::Encoding>,
        /// Relayed: S2's key, the edge's cut.
        edge: Option<CutKey>,
    },
    Probe {
        id: u64,
        bytes: usize,
    },
    /// Ask the handheld to build these cuts' suffix plans ahead, on this
    /// engine (`None`: its own).
    Prepare(Vec<CutKey>, Option<crate::engine::Engine>),
    /// These frames missed their deadline and run here: the handheld need not.
    Cancel(Vec<u64>),
    /// Drop the link as lost (why), and open it again.
    Reset(String),
    Shutdown,
}

/// A frame's answer as the link task read it: its tensors decoded there,
/// off the app thread (which runs the watch's prefixes: a 1 MB answer
/// decoded on it held WaveNet's stream below its ideal), with what the
/// message said of them.
pub(crate) struct Answer {
    /// The tensors, decoded or still as they came (a handheld's link to its
    /// edge runs on the server's tasks). Decoding them is the watch's work:
    /// for an encoded answer the app thread sleeps the rest of the watch's
    /// time for it, (factor − 1) × the decoding's CPU time on the link task
    /// ([`tandem_core::device_clock::DeviceClock::ran_elsewhere`]), and
    /// its checks run as a step of the device clock.
    pub(crate) body: crate::encoding::Received,
    /// Their descriptions, in the message's order.
    pub(crate) metas: Vec<TensorMeta>,
    /// The message's body, and the bytes it took on the link, header included.
    pub(crate) body_len: usize,
    pub(crate) wire_len: usize,
}

impl Answer {
    /// `tensors` decoded now when they are small enough, else as they came.
    pub(crate) fn decode(tensors: Tensors) -> Answer {
        let (metas, body_len, wire_len) = (tensors.metas().to_vec(), tensors.body_len(), tensors.wire_len());
        Answer { body: crate::encoding::Received::of(tensors), metas, body_len, wire_len }
    }
}

/// From the link task to the app thread.
pub(crate) enum Event {
    Ready {
        device: String,
        latency: LatencySummary,
    },
    Status(StatusReport),
    Echo {
        id: u64,
        received: u64,
        echoed: u64,
        at: Instant,
    },
    Delivered {
        frame: u64,
        handheld_us: u64,
        answer: Box<Answer>,
        at: Instant,
        edge: Option<tandem_proto::session::EdgeReport>,
    },
    /// The handheld checked the edge: the cuts it serves, its round trip, or why not.
    EdgeReady {
        deployed: Vec<CutKey>,
        rtt_us: u64,
        speed: Option<f64>,
        error: Option<String>,
    },
    Sent {
        bytes: u64,
        took: Duration,
    },
    RunLocally {
        frames: Vec<u64>,
        reason: String,
    },
    /// The handheld built a cut's suffix plan (or could not: why).
    Prepared {
        cut: CutKey,
        engine: Option<crate::engine::Engine>,
        error: Option<String>,
    },
    /// The link ended (a refusal included: [`CloseReason::is_refusal`]), or could not open.
    Disconnected(CloseReason),
}

/// Why a message could not be queued for the link (the link is then lost).
#[derive(Debug, thiserror::Error)]
enum SendFailed {
    #[error("encoding: {0}")]
    Encoding(tandem_proto::protocol::ProtocolError),
    #[error("the writer stopped")]
    WriterStopped,
}

/// The latest status from the handheld, not yet taken by the session.
pub(crate) type StatusSlot = std::sync::Arc<std::sync::Mutex<Option<StatusReport>>>;

/// Most answers to the handheld's probes waiting to be sent; beyond them
/// its probes go unanswered.
pub(crate) const MAX_QUEUED_ECHOES: usize = 16;

/// How the link task connects and when it gives a link up.
pub(crate) struct LinkSettings {
    /// Model push chunk size (bytes).
    pub chunk_bytes: usize,
    /// Reconnection backoff.
    pub backoff: Backoff,
    /// No bytes from the handheld for this long: the link is lost.
    pub silence: Duration,
    /// Nothing sent for this long: send a keepalive.
    pub keepalive: Duration,
    /// The edge to ask the handheld to relay to, and the cuts to ask
    /// about, each time it is ready.
    pub edge: Option<(String, Vec<CutKey>)>,
}

/// The link task: connect, handshake, carry frames, reconnect with backoff.
pub(crate) async fn manage_link(
    transport: Box<dyn Transport>,
    model: ModelFile,
    device: String,
    LinkSettings { chunk_bytes, backoff, silence, keepalive, edge }: LinkSettings,
    mut commands: mpsc::UnboundedReceiver<Command>,
    (events, status): (cb::Sender<Event>, StatusSlot),
) {
    let mut wait = backoff.initial;
    loop {
        let connect = tokio::time::timeout(Duration::from_secs(5), transport.connect());
        tokio::pin!(connect);
        let link = loop {
            tokio::select! {
                r = &mut connect => break r,
                c = commands.recv() => if !refuse(c, &events) { return },
            }
        };
        let reason = match link {
            Ok(Ok(link)) => {
                let wait_after_connect = wait;
                wait = backoff.initial;
                let session = WearableSession::new(
                    device.clone(),
                    model.bytes.clone(),
                    model.model.input_shapes().clone(),
                    chunk_bytes,
                )
                .expect_layers(model.model.graph().nodes().len())
                .timers(WearableTimers { silence, keepalive });
                match run_link(link, session, &mut commands, &events, &status, edge.as_ref()).await {
                    Ok(()) => return,
                    // A busy handheld is asked again later and later, not at once.
                    Err(
                        reason @ CloseReason::PeerRefused {
                            code: tandem_proto::protocol::ErrorCode::Busy,
                            ..
                        },
                    ) => {
                        wait = wait_after_connect;
                        reason
                    }
                    Err(reason) => reason,
                }
            }
            Ok(Err(e)) => CloseReason::Lost(e.to_string()),
            Err(_) => CloseReason::Lost(format!("connecting to {} timed out", transport.describe())),
        };
        if events.send(Event::Disconnected(reason)).is_err() {
            return;
        }
        let sleep = tokio::time::sleep(wait);
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                _ = &mut sleep => break,
                c = commands.recv() => if !refuse(c, &events) { return },
            }
        }
        wait = (wait * 2).min(backoff.max);
    }
}

/// A command while disconnected: offloads come straight back. False: shut down.
fn refuse(c: Option<Command>, events: &cb::Sender<Event>) -> bool {
    match c {
        None | Some(Command::Shutdown) => false,
        Some(Command::Offload { frame, .. }) => events
            .send(Event::RunLocally { frames: vec![frame], reason: "the handheld is not connected".into() })
            .is_ok(),
        Some(Command::Probe { .. } | Command::Prepare(..) | Command::Cancel(_) | Command::Reset(_)) => true,
    }
}

/// A close reason in the wearable's words.
pub(crate) fn describe(reason: &CloseReason) -> String {
    describe_peer(reason, "the handheld")
}

/// A close reason, the peer called `peer` (`the handheld`, `the edge server`).
pub(crate) fn describe_peer(reason: &CloseReason, peer: &str) -> String {
    match reason {
        CloseReason::PeerRefused { code, reason } => format!("{peer} refused ({code:?}): {reason}"),
        CloseReason::Refused { code, reason } => format!("refused {peer} ({code:?}): {reason}"),
        CloseReason::PeerBye => format!("{peer} said bye"),
        other => other.to_string(),
    }
}

/// The session's clock: tokio's (virtual under `tokio::time::pause`).
fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// One connection; `Ok` on shutdown, else why it ended. A `select!` loop:
/// bytes, times and the app's commands go into the session, its actions
/// come out; every rule and timer is the session's.
async fn run_link(
    link: Link,
    mut session: WearableSession,
    commands: &mut mpsc::UnboundedReceiver<Command>,
    events: &cb::Sender<Event>,
    status: &StatusSlot,
    edge: Option<&(String, Vec<CutKey>)>,
) -> std::result::Result<(), CloseReason> {
    let Link { mut tx, mut rx, name } = link;
    debug!(link = %name, "connected");
    // Unbounded for this side's own messages (frames are bounded by the
    // frames in flight, a push by the model); answers to the handheld's
    // probes are bounded apart: it cannot grow this queue by probing while
    // not reading.
    let (out_tx, mut out_rx) = mpsc::unbounded_channel::<(Vec<u8>, bool)>();
    let (dead_tx, mut dead_rx) = mpsc::unbounded_channel::<String>();
    let echoes_queued = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let writer_echoes = echoes_queued.clone();
    let writer_events = events.clone();
    let writer = tokio::spawn(async move {
        while let Some((bytes, echo)) = out_rx.recv().await {
            let n = bytes.len() as u64;
            let started = Instant::now();
            if let Err(e) = tx.send(bytes).await {
                let _ = dead_tx.send(format!("sending failed: {e}"));
                return;
            }
            if echo {
                writer_echoes.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            }
            let _ = writer_events.send(Event::Sent { bytes: n, took: started.elapsed() });
        }
        let _ = tx.close().await;
    });
    // Queues a message for the writer; an echo is dropped while too many wait.
    let send = |m: &Message, echo: bool| -> std::result::Result<(), SendFailed> {
        if echo && echoes_queued.load(std::sync::atomic::Ordering::Relaxed) >= MAX_QUEUED_ECHOES {
            debug!("the handheld probes faster than it reads: an echo dropped");
            return Ok(());
        }
        let bytes = encode(m).map_err(SendFailed::Encoding)?;
        if echo {
            echoes_queued.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        out_tx.send((bytes, echo)).map_err(|_| SendFailed::WriterStopped)
    };
    let mut pending = session.start(now());
    let result = 'conn: loop {
        let mut failed = None;
        for a in pending.drain(..) {
            match a {
                WearableAction::Send(m) => failed = send(&m, false).err().or(failed),
                WearableAction::SendEcho(m) => failed = send(&m, true).err().or(failed),
                WearableAction::Ready { device, latency } => {
                    let _ = events.send(Event::Ready { device, latency });
                    if let Some(m) = edge.and_then(|(url, cuts)| session.edge(now(), url, cuts.clone())) {
                        failed = send(&m, false).err().or(failed);
                    }
                }
                WearableAction::EdgeReady { deployed, rtt_us, speed, error } => {
                    let _ = events.send(Event::EdgeReady { deployed, rtt_us, speed, error });
                }
                WearableAction::Status(s) => {
                    // Coalesced: one event waits at most; it carries the latest status.
                    let waiting = status.lock().unwrap_or_else(|p| p.into_inner()).replace(s).is_some();
                    if !waiting {
                        let _ = events.send(Event::Status(s));
                    }
                }
                WearableAction::Echo { id, received, echoed } => {
                    let _ = events.send(Event::Echo { id, received, echoed, at: Instant::now() });
                }
                WearableAction::Delivered { frame, handheld_compute_us, tensors, edge } => {
                    // Arrived now: the decoding after is the watch's work, not the link's.
                    let at = Instant::now();
                    let answer = Box::new(Answer::decode(tensors));
                    let _ = events.send(Event::Delivered {
                        frame,
                        handheld_us: handheld_compute_us,
                        answer,
                        at,
                        edge,
                    });
                }
                WearableAction::Prepared { cut, engine, build_us, error } => {
                    debug!(cut = %cut, ?engine, build_us, ?error, "the handheld prepared a cut");
                    let _ = events.send(Event::Prepared { cut, engine, error });
                }
                WearableAction::RunLocally(frames) => {
                    let reason = session.close_reason().map_or_else(|| "the link failed".into(), describe);
                    let _ = events.send(Event::RunLocally { frames, reason });
                }
                WearableAction::Close => {
                    let lost = CloseReason::Lost("the handheld closed the session".into());
                    break 'conn Err(session.close_reason().cloned().unwrap_or(lost));
                }
            }
        }
        if let Some(reason) = failed {
            pending = session.handle_lost(reason.to_string());
            continue;
        }
        let deadline = session.poll_timeout().map(tokio::time::Instant::from_std);
        pending = tokio::select! {
            () = tokio::time::sleep_until(deadline.unwrap_or_else(tokio::time::Instant::now)), if deadline.is_some() => {
                session.handle_timeout(now())
            }
            r = rx.recv() => match r {
                Ok(Some(bytes)) => session.handle_bytes(now(), &bytes),
                Ok(None) => session.handle_lost("the handheld closed the link"),
                Err(e) => session.handle_lost(format!("receiving failed: {e}")),
            },
            Some(reason) = dead_rx.recv() => session.handle_lost(reason),
            c = commands.recv() => {
                let sent = match c {
                    None | Some(Command::Shutdown) => {
                        if let Some(bye) = session.shutdown() {
                            let _ = send(&bye, false);
                        }
                        break 'conn Ok(());
                    }
                    Some(Command::Offload { frame, cut, packed, answer, edge }) => {
                        let m = session.offload_on(now(), frame, cut, packed, answer, edge);
                        if m.is_none() {
                            let reason = "the handheld is not ready".into();
                            let _ = events.send(Event::RunLocally { frames: vec![frame], reason });
                        }
                        m
                    }
                    Some(Command::Prepare(cuts, engine)) => session.prepare_on(now(), cuts, engine),
                    Some(Command::Cancel(frames)) => session.cancel(now(), &frames),
                    Some(Command::Probe { id, bytes }) => session.probe(now(), id, bytes),
                    Some(Command::Reset(reason)) => {
                        pending = session.handle_lost(reason);
                        continue;
                    }
                };
                match sent.map(|m| send(&m, false)) {
                    Some(Err(e)) => session.handle_lost(e.to_string()),
                    _ => vec![],
                }
            }
        };
    };
    drop(out_tx);
    let _ = tokio::time::timeout(Duration::from_secs(1), writer).await;
    result
}
