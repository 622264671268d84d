//! The link task: connect, handshake, carry frames, reconnect with backoff; it talks to the app thread by channels.

use std::time::{Duration, Instant};

use crossbeam_channel as cb;
use tokio::sync::mpsc;
use tracing::debug;

use crate::link::{Link, Transport};

use tandem_proto::protocol::{
    encode, ErrorCode, FrameDecoder, Header, LatencySummary, Message, PackedTensor, StatusReport,
    MAX_FRAME_BYTES,
};
use tandem_proto::session::{WearableAction, WearableSession};

use super::{Backoff, ModelFile};

/// From the app thread to the link task.
pub(super) enum Command {
    /// A frame's suffix, its crossing tensors packed (encoded) already.
    Offload {
        frame: u64,
        cut: String,
        packed: Vec<PackedTensor>,
        answer: Vec<tandem_proto::encoding::Encoding>,
    },
    Probe {
        id: u64,
        bytes: usize,
    },
    /// Ask the handheld to build these cuts' suffix plans ahead.
    Prepare(Vec<String>),
    /// These frames missed their deadline and run here: the handheld need not.
    Cancel(Vec<u64>),
    /// Drop the link as lost (why), and open it again.
    Reset(String),
    Shutdown,
}

/// From the link task to the app thread.
pub(super) enum Event {
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
        message: Message,
        at: Instant,
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
        cut: String,
        error: Option<String>,
    },
    /// The handheld refused the model or the protocol (its reason).
    Refused(String),
    Disconnected(String),
}

/// The latest status from the handheld, not yet taken by the session.
pub(super) type StatusSlot = std::sync::Arc<std::sync::Mutex<Option<StatusReport>>>;

/// Most answers to the handheld's probes waiting to be sent; beyond them
/// its probes go unanswered.
pub(super) const MAX_QUEUED_ECHOES: usize = 16;

/// Most probes or prepared cuts awaiting an answer (older ones are forgotten).
const MAX_ASKED: usize = 64;

/// How the link task connects and when it gives a link up.
pub(super) struct LinkSettings {
    /// Model push chunk size (bytes).
    pub chunk_bytes: usize,
    /// Reconnection backoff.
    pub backoff: Backoff,
    /// No bytes from the handheld for this long: the link is lost.
    pub silence: Duration,
    /// Nothing sent for this long: send a keepalive.
    pub keepalive: Duration,
}

/// The probe id of keepalives (their echo is dropped, as unasked).
pub(super) const KEEPALIVE_ID: u64 = u64::MAX;

/// The link task: connect, handshake, carry frames, reconnect with backoff.
pub(super) async fn manage_link(
    transport: Box<dyn Transport>,
    model: ModelFile,
    device: String,
    LinkSettings { chunk_bytes, backoff, silence, keepalive }: LinkSettings,
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
                wait = backoff.initial;
                let session = WearableSession::new(
                    device.clone(),
                    model.bytes.clone(),
                    model.model.input_shapes().clone(),
                    chunk_bytes,
                )
                .expect_layers(model.model.graph().nodes().len());
                match run_link(link, session, (silence, keepalive), &mut commands, &events, &status).await {
                    Ok(()) => return,
                    Err(reason) => reason,
                }
            }
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!("connecting to {} timed out", transport.describe()),
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
        Some(Command::Probe { .. } | Command::Prepare(_) | Command::Cancel(_) | Command::Reset(_)) => true,
    }
}

/// One connection; `Ok` on shutdown, else why it ended.
async fn run_link(
    link: Link,
    mut session: WearableSession,
    (silence, keepalive): (Duration, Duration),
    commands: &mut mpsc::UnboundedReceiver<Command>,
    events: &cb::Sender<Event>,
    status: &StatusSlot,
) -> std::result::Result<(), String> {
    // What the handheld may only answer: probes sent and cuts asked (a
    // peer cannot fill the app's event queue with answers nobody asked for).
    let mut probes: std::collections::VecDeque<u64> = Default::default();
    let mut asked: std::collections::VecDeque<String> = Default::default();
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
    // When the last message went out (a Mutex: this future moves between threads).
    let sent_at = std::sync::Mutex::new(tokio::time::Instant::now());
    let last_sent = || *sent_at.lock().unwrap_or_else(|p| p.into_inner());
    let send = |m: &Message| -> std::result::Result<(), String> {
        let echo = matches!(m.header, Header::Echo { .. });
        if echo && echoes_queued.load(std::sync::atomic::Ordering::Relaxed) >= MAX_QUEUED_ECHOES {
            debug!("the handheld probes faster than it reads: an echo dropped");
            return Ok(());
        }
        let bytes = encode(m).map_err(|e| format!("encoding: {e}"))?;
        *sent_at.lock().unwrap_or_else(|p| p.into_inner()) = tokio::time::Instant::now();
        if echo {
            echoes_queued.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        out_tx.send((bytes, echo)).map_err(|_| "the writer stopped".to_string())
    };
    let mut decoder = FrameDecoder::new(MAX_FRAME_BYTES);
    let mut pending = session.start();
    let mut why: Option<String> = None;
    // A stalled handheld (stopped, or its process wedged) keeps the socket
    // open but says nothing; it sends Status twice a second when alive.
    let mut heard = tokio::time::Instant::now();
    let result = 'conn: loop {
        for a in pending.drain(..) {
            match a {
                WearableAction::Send(m) => {
                    if let Err(e) = send(&m) {
                        why = Some(e);
                    }
                }
                WearableAction::Ready { device, latency } => {
                    let _ = events.send(Event::Ready { device, latency });
                }
                WearableAction::Status(s) => {
                    // Coalesced: one event waits at most; it carries the latest status.
                    let waiting = status.lock().unwrap_or_else(|p| p.into_inner()).replace(s).is_some();
                    if !waiting {
                        let _ = events.send(Event::Status(s));
                    }
                }
                WearableAction::Echo { id, received, echoed } => {
                    if let Some(i) = probes.iter().position(|&p| p == id) {
                        probes.remove(i);
                        let _ = events.send(Event::Echo { id, received, echoed, at: Instant::now() });
                    }
                }
                WearableAction::Delivered { frame, handheld_compute_us, message } => {
                    let _ = events.send(Event::Delivered {
                        frame,
                        handheld_us: handheld_compute_us,
                        message,
                        at: Instant::now(),
                    });
                }
                WearableAction::Prepared { cut, build_us, error } => {
                    debug!(cut = %cut, build_us, ?error, "the handheld prepared a cut");
                    if let Some(i) = asked.iter().position(|c| *c == cut) {
                        asked.remove(i);
                        let _ = events.send(Event::Prepared { cut, error });
                    }
                }
                WearableAction::RunLocally(frames) => {
                    let reason = why.clone().unwrap_or_else(|| "the link failed".into());
                    let _ = events.send(Event::RunLocally { frames, reason });
                }
                WearableAction::Close => {
                    break 'conn Err(why.take().unwrap_or_else(|| "the handheld closed the session".into()));
                }
            }
        }
        if let Some(reason) = why.take() {
            pending = session.on_disconnect();
            why = Some(reason);
            pending.push(WearableAction::Close);
            continue;
        }
        tokio::select! {
            () = tokio::time::sleep_until(last_sent() + keepalive) => {
                let m = Message::new(Header::Probe { id: KEEPALIVE_ID, echo_payload: false });
                if let Err(e) = send(&m) {
                    why = Some(e);
                }
            },
            () = tokio::time::sleep_until(heard + silence) => {
                why = Some(format!("no bytes from the handheld for {silence:?}: the link is taken as lost"));
                pending = session.on_disconnect();
                pending.push(WearableAction::Close);
            },
            r = rx.recv() => match r {
                Ok(Some(bytes)) => {
                    heard = tokio::time::Instant::now();
                    let (messages, failed) = decoder.push_and_decode(&bytes);
                    for m in messages {
                        match &m.header {
                            Header::Error { code, reason } => {
                                debug!(?code, "the handheld sent an error: {reason}");
                                if matches!(code, ErrorCode::Model | ErrorCode::Version | ErrorCode::Digest) {
                                    let _ = events.send(Event::Refused(reason.clone()));
                                }
                                why = Some(format!("the handheld refused ({code:?}): {reason}"));
                            }
                            Header::Bye => why = Some("the handheld said bye".into()),
                            _ => {}
                        }
                        pending.extend(session.on_message(m));
                    }
                    if let Some(e) = failed {
                        why = Some(format!("bad bytes from the handheld: {e}"));
                        pending.extend(session.on_decode_error(&e));
                    }
                }
                Ok(None) => {
                    why = Some("the handheld closed the link".into());
                    pending = session.on_disconnect();
                    pending.push(WearableAction::Close);
                }
                Err(e) => {
                    why = Some(format!("receiving failed: {e}"));
                    pending = session.on_disconnect();
                    pending.push(WearableAction::Close);
                }
            },
            Some(reason) = dead_rx.recv() => {
                why = Some(reason);
                pending = session.on_disconnect();
                pending.push(WearableAction::Close);
            },
            c = commands.recv() => match c {
                None | Some(Command::Shutdown) => {
                    let _ = send(&Message::new(Header::Bye));
                    break 'conn Ok(());
                }
                Some(Command::Offload { frame, cut, packed, answer }) => match session.offload(frame, cut, packed, answer) {
                    Some(m) => {
                        if let Err(e) = send(&m) {
                            why = Some(e);
                        }
                    }
                    None => {
                        let _ = events.send(Event::RunLocally {
                            frames: vec![frame],
                            reason: "the handheld is not ready".into(),
                        });
                    }
                },
                Some(Command::Prepare(cuts)) => {
                    asked.extend(cuts.iter().cloned());
                    while asked.len() > MAX_ASKED {
                        asked.pop_front();
                    }
                    if let Some(m) = session.prepare(cuts) {
                        if let Err(e) = send(&m) {
                            why = Some(e);
                        }
                    }
                }
                Some(Command::Cancel(frames)) => {
                    if let Some(m) = session.cancel(&frames) {
                        if let Err(e) = send(&m) {
                            why = Some(e);
                        }
                    }
                }
                Some(Command::Reset(reason)) => {
                    why = Some(reason);
                    pending = session.on_disconnect();
                    pending.push(WearableAction::Close);
                }
                Some(Command::Probe { id, bytes }) => {
                    probes.push_back(id);
                    while probes.len() > MAX_ASKED {
                        probes.pop_front();
                    }
                    let m = Message { header: Header::Probe { id, echo_payload: false }, body: vec![0; bytes] };
                    if let Err(e) = send(&m) {
                        why = Some(e);
                    }
                }
            },
        }
    };
    drop(out_tx);
    let _ = tokio::time::timeout(Duration::from_secs(1), writer).await;
    result
}
