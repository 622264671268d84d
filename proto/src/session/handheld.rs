//! The handheld's side of one connection as a state machine, with no I/O
//! and no clock: feed it the bytes received ([`HandheldSession::handle_bytes`]),
//! the time ([`HandheldSession::handle_timeout`] at
//! [`HandheldSession::poll_timeout`]) and what the shell finished (a model
//! loaded, a frame run), and it answers with [`Action`]s for the I/O shell
//! to carry out (send, load a model, run a suffix, close). Every rule is
//! here: the hello deadline, the idle timeout, periodic status, the queue
//! of frames to run (one at a time, in frame order; a limit; cancels drop
//! queued ones), the prepare budget, and every refusal.
//!
//! ```text
//! AwaitHello --Hello (model known)----------> Loading --model_loaded--> Ready
//!            --Hello (model unknown)--------> Receiving --last chunk, digest ok--> Loading
//!            --Hello (other version)--------> Closed (Error{Version})
//! Receiving  --chunk out of order / digest mismatch--> Closed (Error{...})
//! Ready      --RunSuffix{frame}-------------> Ready (Run; frames must increase)
//! Ready      --Prepare{cuts}----------------> Ready (Prepare; at most MAX_PREPARE cuts)
//! Ready      --Edge{url, cuts}--------------> Ready (Edge; at most MAX_EDGE_CUTS cuts, MAX_EDGE_ASKS per connection)
//! Ready      --RunSuffix{edge: S2}----------> Ready (Run with the edge's cut; only once an edge is attached)
//! Ready      --Cancel{frames}---------------> Ready (queued ones dropped; frames already sent, at most MAX_CANCEL)
//! any        --Probe------------------------> same (Echo)
//! AwaitHello --hello deadline---------------> Closed (Error{Unexpected})
//! other      --no bytes for the idle timeout--> Closed (Error{Unexpected})
//! any        --Bye / error / link lost------> Closed
//! ```

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tandem_types::WireTensor;

use super::{echo, name, CloseReason, Tensors};
use crate::encoding::Encoding;
use crate::protocol::EdgeReport;
use crate::protocol::{
    encode, model_digest, Digest, Engine, ErrorCode, FrameDecoder, Header, LatencySummary, Message,
    PackedTensor, ProtocolError, StatusReport, MAX_CANCEL, MAX_EDGE_CUTS, MAX_EDGE_SPEED, MAX_EDGE_URL,
    MAX_FRAME_BYTES, MAX_OVERRIDES, MAX_OVERRIDE_LEN, MAX_PREPARE, PROTOCOL_VERSION,
};

/// Most [`Header::Edge`] asks one connection may make (each costs the
/// handheld calls to the edge server).
pub const MAX_EDGE_ASKS: usize = 8;
use tandem_types::{CutKey, InputShapes};

/// Largest model a wearable may push (bytes).
pub const MAX_MODEL_BYTES: u64 = 1 << 30;

/// What the I/O shell must do.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Send this message to the peer.
    Send(Message),
    /// Load the model with this digest from local storage, with the
    /// wearable's input-shape overrides, then call
    /// [`HandheldSession::model_loaded`] (or [`HandheldSession::model_failed`]).
    LoadKnown {
        /// The model's digest.
        digest: Digest,
        /// The overrides the wearable loaded it with.
        shapes: InputShapes,
    },
    /// Store and load these pushed bytes (their digest is verified) with
    /// the wearable's overrides, then call [`HandheldSession::model_loaded`]
    /// (or [`HandheldSession::model_failed`]).
    LoadPushed {
        /// The model's digest.
        digest: Digest,
        /// The ONNX bytes.
        bytes: Vec<u8>,
        /// The overrides the wearable loaded it with.
        shapes: InputShapes,
        /// Its share of the handheld's push budget, when it has one: keep it
        /// while the bytes are held.
        reservation: Option<PushReservation>,
    },
    /// Run the suffix of the cut on these tensors, then call
    /// [`HandheldSession::frame_done`] with [`HandheldSession::result`]'s
    /// message (or why it failed). Frames are handed out in frame order,
    /// up to [`HandheldLimits::run_ahead`] at once, to be run one at a time
    /// in that order and answered (`frame_done`) in that order; each
    /// `frame_done` hands out the next.
    Run {
        /// The frame.
        frame: u64,
        /// The cut's key as the peer sent it (`tandem_core::Cut::from_key` checks it).
        cut: CutKey,
        /// The crossing tensors.
        tensors: Tensors,
        /// How the wearable asks for each output to be encoded.
        answer: Vec<Encoding>,
        /// Relayed: S2's key, the cut whose suffix the attached edge runs
        /// (the shell runs the layers between `cut` and it, then the
        /// edge; when the edge fails, the rest itself).
        edge: Option<CutKey>,
        /// The engine to run the suffix on (one this handheld offered);
        /// `None`: the model's own (its `ModelReady`'s).
        engine: Option<Engine>,
    },
    /// The wearable asks this handheld to relay to the Open Inference
    /// Protocol server at `url`: check which of `cuts`' suffixes it serves
    /// (and whether this handheld may relay there at all), then send
    /// [`HandheldSession::edge_ready`]'s message.
    Edge {
        /// The server's base URL, as the peer sent it (unchecked beyond its length).
        url: String,
        /// The cuts' keys as the peer sent them.
        cuts: Vec<CutKey>,
    },
    /// These frames, handed out to run, were cancelled by the wearable:
    /// skip those not started. Whatever their results, none is sent.
    Skip {
        /// The frames.
        frames: Vec<u64>,
    },
    /// Build the suffix plans of these cuts in the background, answering
    /// each with [`HandheldSession::prepared`].
    Prepare {
        /// The cuts' keys as the peer sent them.
        cuts: Vec<CutKey>,
        /// The engine to build them on (offered), `None`: the model's own.
        engine: Option<Engine>,
    },
    /// Close the connection (after sending anything queued before it);
    /// [`HandheldSession::close_reason`] says why.
    Close,
}

/// The handheld's limits and timers for one connection.
#[derive(Clone, Debug)]
pub struct HandheldLimits {
    /// A peer must say Hello this soon after the link opens (the secure
    /// handshake, if any, was timed already).
    pub hello_timeout: Duration,
    /// A peer that has said Hello and then sends no byte for this long is
    /// closed (wearables send a keepalive every 20 s when idle). Time while
    /// this side does not read (its run queue is full) does not count.
    pub idle_timeout: Duration,
    /// How often `Status` goes out.
    pub status_interval: Duration,
    /// Most frames queued to run (besides those handed out to run); while full,
    /// the shell does not read ([`HandheldSession::wants_bytes`]), and a
    /// frame beyond it closes the connection.
    pub max_queued: usize,
    /// Most cuts the peer may have built ahead (`Prepare`) over the
    /// connection; later ones are answered with a refusal.
    pub max_prepared: usize,
    /// Largest frame accepted (bytes).
    pub max_frame: usize,
    /// Most frames handed out to run at once (at least 1). With 2, the
    /// runner finds the next frame waiting when one finishes: no round
    /// trip through the shell sits between two runs.
    pub run_ahead: usize,
}

impl Default for HandheldLimits {
    /// Tuned for a phone serving a few wearables over BLE or Wi-Fi.
    fn default() -> Self {
        HandheldLimits {
            hello_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            status_interval: Duration::from_millis(500),
            max_queued: 32,
            max_prepared: 64,
            max_frame: MAX_FRAME_BYTES,
            run_ahead: 2,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
enum State {
    AwaitHello,
    Receiving { digest: Digest, size: u64, bytes: Vec<u8>, shapes: InputShapes },
    Loading { digest: Digest },
    Ready { digest: Digest, last_frame: Option<u64> },
    Closed,
}

/// A frame received and not yet run.
#[derive(Clone, Debug)]
struct Queued {
    frame: u64,
    cut: CutKey,
    tensors: Tensors,
    answer: Vec<Encoding>,
    edge: Option<CutKey>,
    engine: Option<Engine>,
}

/// Why a peer may not ask for `engine`: one this handheld did not offer.
fn unoffered(offered: &[Engine], engine: Option<Engine>) -> Option<String> {
    let e = engine?;
    (!offered.contains(&e)).then(|| {
        let offered: Vec<String> = offered.iter().map(|e| e.to_string()).collect();
        format!(
            "asks for the engine {e}, which this handheld did not offer (it offered {})",
            offered.join(", ")
        )
    })
}

/// One connection's protocol state on the handheld.
#[derive(Debug)]
pub struct HandheldSession {
    device: String,
    /// The engines offered in the `Welcome`.
    engines: Vec<Engine>,
    status: StatusReport,
    state: State,
    max_push: u64,
    /// Why this peer may not push a model, if it may not.
    pushes_refused: Option<String>,
    limits: HandheldLimits,
    decoder: FrameDecoder,
    opened: Instant,
    /// When the peer last sent bytes (or this side last chose not to read).
    heard: Instant,
    next_status: Instant,
    /// Frames received and not yet handed out to run, in frame order.
    queue: VecDeque<Queued>,
    /// Frames handed out to run and not yet done, oldest first, and
    /// whether the wearable cancelled each since (its result is not sent).
    running: VecDeque<(u64, bool)>,
    /// Cuts the peer may still have built ahead.
    prepares_left: usize,
    /// Edge asks the peer may still make.
    edge_asks_left: usize,
    /// The edge attached (its URL), once the shell said it relays there.
    edge: Option<String>,
    close: Option<CloseReason>,
    /// Bytes of pushes in progress across the handheld's connections.
    push_budget: Option<Arc<PushBudget>>,
    /// This connection's share of it, held from its `Hello` until its model
    /// is loaded or refused (the bytes live until then).
    push_reserved: Option<PushReservation>,
}

/// Bytes of model pushes in progress, shared by every connection of one
/// handheld: each may push up to its own limit, and all together up to
/// this one, so that many connections cannot each buffer a maximal push.
#[derive(Debug)]
pub struct PushBudget {
    limit: u64,
    used: AtomicU64,
}

impl PushBudget {
    /// A budget of `limit` bytes.
    pub fn new(limit: u64) -> Arc<PushBudget> {
        Arc::new(PushBudget { limit, used: AtomicU64::new(0) })
    }

    /// Bytes reserved now.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// `bytes` of the budget, or `None` when they do not fit.
    fn reserve(self: &Arc<Self>, bytes: u64) -> Option<Reservation> {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|&u| u <= self.limit)
            })
            .ok()
            .map(|_| Reservation { budget: self.clone(), bytes })
    }
}

/// A push's share of a [`PushBudget`], held by the session and by the
/// load its bytes went to (`Action::LoadPushed`): given back when the last
/// holder drops it, since the bytes live until then.
#[derive(Clone, Debug)]
pub struct PushReservation(Arc<Reservation>);

impl PartialEq for PushReservation {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// A share of a [`PushBudget`], given back on drop.
#[derive(Debug)]
struct Reservation {
    budget: Arc<PushBudget>,
    bytes: u64,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

/// A wearable's overrides, checked: a bounded number of short specs that
/// parse. The model load then checks that they fit the model.
fn overrides(specs: &[String], dims: &[String]) -> Result<InputShapes, OverrideError> {
    if specs.len() + dims.len() > MAX_OVERRIDES {
        return Err(OverrideError::TooMany(specs.len() + dims.len()));
    }
    if let Some(long) = specs.iter().chain(dims).find(|s| s.len() > MAX_OVERRIDE_LEN) {
        return Err(OverrideError::TooLong(long.len()));
    }
    Ok(InputShapes::parse_with_dims(specs, dims)?)
}

/// Why a `Hello`'s input-shape overrides are refused.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
enum OverrideError {
    #[error("{0} input-shape overrides exceed {MAX_OVERRIDES}")]
    TooMany(usize),
    #[error("an input-shape override of {0} bytes exceeds {MAX_OVERRIDE_LEN}")]
    TooLong(usize),
    #[error("bad input-shape override: {0}")]
    Bad(#[from] tandem_types::ShapeError),
}

/// Why a suffix could not run: the runtime's own error, whatever it is.
pub type RunError = Box<dyn std::error::Error + Send + Sync>;

fn hex_digest(d: &Digest) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

impl HandheldSession {
    /// A new connection, opened at `now`, to a handheld with this profile
    /// name and status, under the default [`HandheldLimits`].
    pub fn new(device: impl Into<String>, status: StatusReport, now: Instant) -> HandheldSession {
        let limits = HandheldLimits::default();
        HandheldSession {
            device: device.into(),
            engines: vec![Engine::Tract],
            status,
            state: State::AwaitHello,
            max_push: MAX_MODEL_BYTES,
            pushes_refused: None,
            decoder: FrameDecoder::new(limits.max_frame),
            opened: now,
            heard: now,
            next_status: now + limits.status_interval,
            queue: VecDeque::new(),
            running: VecDeque::new(),
            prepares_left: limits.max_prepared,
            edge_asks_left: MAX_EDGE_ASKS,
            edge: None,
            close: None,
            push_budget: None,
            push_reserved: None,
            limits,
        }
    }

    /// The engines this handheld offers (in its `Welcome`); tract alone by default.
    pub fn engines(mut self, engines: Vec<Engine>) -> HandheldSession {
        self.engines = engines;
        self
    }

    /// Reserves `bytes` of the shared push budget for this connection's
    /// push: a push larger than the whole budget is refused for good, one
    /// that does not fit now as busy.
    fn reserve_push(&mut self, bytes: u64) -> Result<(), (ErrorCode, String)> {
        let Some(budget) = &self.push_budget else { return Ok(()) };
        if bytes > budget.limit {
            return Err((
                ErrorCode::Model,
                format!(
                    "a pushed model of {bytes} bytes exceeds this handheld's {} bytes for all pushes",
                    budget.limit
                ),
            ));
        }
        let r = budget.reserve(bytes).ok_or_else(|| {
            (
                ErrorCode::Busy,
                format!(
                "the handheld is busy: pushes of {} MiB are in progress on it, and a push of {bytes} bytes \
                 would pass its {} MiB for all pushes at once; try again later",
                budget.used() >> 20,
                budget.limit >> 20
            ),
            )
        })?;
        self.push_reserved = Some(PushReservation(Arc::new(r)));
        Ok(())
    }

    /// Pushes count against `budget`, shared with the handheld's other
    /// connections; a push that does not fit is refused as busy.
    pub fn push_budget(mut self, budget: Arc<PushBudget>) -> HandheldSession {
        self.push_budget = Some(budget);
        self
    }

    /// These limits and timers instead of the defaults.
    pub fn limits(mut self, limits: HandheldLimits) -> HandheldSession {
        self.decoder = FrameDecoder::new(limits.max_frame);
        self.next_status = self.opened + limits.status_interval;
        self.prepares_left = limits.max_prepared;
        self.limits = limits;
        self
    }

    /// Refuses pushed models above `bytes` (at most [`MAX_MODEL_BYTES`]).
    pub fn max_push(mut self, bytes: u64) -> HandheldSession {
        self.max_push = bytes.min(MAX_MODEL_BYTES);
        self
    }

    /// Refuses any model push from this peer (an unpaired one), saying
    /// `why`: it may only name a model the handheld has.
    pub fn refuse_pushes(mut self, why: impl Into<String>) -> HandheldSession {
        self.pushes_refused = Some(why.into());
        self
    }

    /// Whether the session has closed.
    pub fn is_closed(&self) -> bool {
        self.state == State::Closed
    }

    /// Why the session closed, once it has.
    pub fn close_reason(&self) -> Option<&CloseReason> {
        self.close.as_ref()
    }

    /// Whether the model is loaded and suffixes can run.
    pub fn is_ready(&self) -> bool {
        matches!(self.state, State::Ready { .. })
    }

    /// The digest of the session's model, once announced.
    pub fn digest(&self) -> Option<Digest> {
        match &self.state {
            State::Receiving { digest, .. } | State::Loading { digest } | State::Ready { digest, .. } => {
                Some(*digest)
            }
            _ => None,
        }
    }

    /// Whether the shell should read the link: not while the run queue is
    /// full (backpressure on the peer), nor while messages read before it
    /// filled wait ([`Self::handle_held`]), nor once closed.
    pub fn wants_bytes(&self) -> bool {
        !self.is_closed() && self.queue.len() < self.limits.max_queued && self.decoder.ready() == 0
    }

    /// Whether messages read before the run queue filled wait for room:
    /// the shell hands them in with [`Self::handle_held`] once
    /// [`Self::wants_bytes`]'s queue has room again (after a frame is done).
    pub fn holds_messages(&self) -> bool {
        !self.is_closed() && self.decoder.ready() > 0 && self.queue.len() < self.limits.max_queued
    }

    /// Frames queued or running on this connection.
    pub fn queued(&self) -> usize {
        self.queue.len() + self.running.len()
    }

    /// The latest status to report in `Welcome` and `Status` messages.
    pub fn set_status(&mut self, status: StatusReport) {
        self.status = status;
    }

    /// A status message now (nothing once closed); the periodic ones come
    /// out of [`Self::handle_timeout`].
    pub fn status_message(&self) -> Option<Message> {
        (!self.is_closed()).then(|| Message::new(Header::Status(self.status)))
    }

    /// When [`Self::handle_timeout`] must next be called (`None` once closed).
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.is_closed() {
            return None;
        }
        let deadline = match self.state {
            State::AwaitHello => Some(self.opened + self.limits.hello_timeout),
            _ if self.wants_bytes() => Some(self.heard + self.limits.idle_timeout),
            _ => None,
        };
        Some(deadline.map_or(self.next_status, |d| d.min(self.next_status)))
    }

    /// The time has come (`now`): the hello deadline, the idle timeout, a
    /// status message.
    pub fn handle_timeout(&mut self, now: Instant) -> Vec<Action> {
        if self.is_closed() {
            return vec![];
        }
        if self.state == State::AwaitHello && now >= self.opened + self.limits.hello_timeout {
            let reason = format!("no Hello within {:?}", self.limits.hello_timeout);
            return self.fail(ErrorCode::Unexpected, reason);
        }
        if self.state != State::AwaitHello
            && self.wants_bytes()
            && now >= self.heard + self.limits.idle_timeout
        {
            let reason = format!("no bytes for {:?} (an idle peer is closed)", self.limits.idle_timeout);
            return self.fail(ErrorCode::Unexpected, reason);
        }
        let mut out = vec![];
        if now >= self.next_status {
            out.extend(self.status_message().map(Action::Send));
            // After a pause (a stalled shell), one status, then on schedule.
            let interval = self.limits.status_interval.max(Duration::from_millis(1));
            self.next_status += interval;
            if self.next_status <= now {
                self.next_status = now + interval;
            }
        }
        out
    }

    /// Bytes received at `now`; `has_model` tells whether a model with a
    /// digest is stored locally.
    pub fn handle_bytes(
        &mut self,
        now: Instant,
        bytes: &[u8],
        has_model: impl Fn(&Digest) -> bool,
    ) -> Vec<Action> {
        if self.is_closed() {
            return vec![];
        }
        self.heard = now;
        self.decoder.push(bytes);
        self.handle_held(now, has_model)
    }

    /// Handles the messages received whole, in order, while the run queue
    /// has room. One read can hold more frames than the queue has room
    /// for (a pipelined peer's small frames, sent while this side was not
    /// reading, arrive together): the rest wait here, and nothing more is
    /// read, until frames are done. So a peer that the link holds back is
    /// never refused for it, and what waits is at most one read.
    pub fn handle_held(&mut self, _now: Instant, has_model: impl Fn(&Digest) -> bool) -> Vec<Action> {
        let mut out = vec![];
        while !self.is_closed() && self.queue.len() < self.limits.max_queued {
            match self.decoder.next_message() {
                Ok(Some(m)) => out.extend(self.on_message(m, &has_model)),
                Ok(None) => break,
                Err(e) => out.extend(self.on_decode_error(&e)),
            }
        }
        out
    }

    /// The peer closed the link at `now`.
    pub fn handle_link_closed(&mut self, _now: Instant) -> Vec<Action> {
        if self.is_closed() {
            return vec![];
        }
        let pending = self.decoder.pending();
        if pending > 0 {
            let reason = format!("the link closed inside a frame ({pending} bytes of a frame were received)");
            return self.fail(ErrorCode::Malformed, reason);
        }
        self.closed(CloseReason::Lost("the peer closed the link".into()))
    }

    /// The link failed (`reason`): the session ends.
    pub fn handle_link_error(&mut self, reason: impl Into<String>) -> Vec<Action> {
        if self.is_closed() {
            return vec![];
        }
        self.closed(CloseReason::Lost(reason.into()))
    }

    /// This handheld shuts down: `Bye`, then close.
    pub fn shutdown(&mut self) -> Vec<Action> {
        if self.is_closed() {
            return vec![];
        }
        let mut out = vec![Action::Send(Message::new(Header::Bye))];
        out.extend(self.closed(CloseReason::Shutdown));
        out
    }

    /// The bytes from the peer did not decode: answer with the error and close.
    pub fn on_decode_error(&mut self, e: &ProtocolError) -> Vec<Action> {
        self.fail(ErrorCode::Malformed, e.to_string())
    }

    fn closed(&mut self, reason: CloseReason) -> Vec<Action> {
        self.state = State::Closed;
        self.push_reserved = None;
        self.queue.clear();
        self.close = Some(reason);
        vec![Action::Close]
    }

    /// Refuses the peer: the `Error` naming why, then close.
    fn fail(&mut self, code: ErrorCode, reason: String) -> Vec<Action> {
        let send = Action::Send(super::error_message(code, reason.clone()));
        let mut out = vec![send];
        out.extend(self.closed(CloseReason::Refused { code, reason }));
        out
    }

    /// Handles one decoded message ([`Self::handle_bytes`] decodes and
    /// calls this); `has_model` tells whether a model with this digest is
    /// stored locally.
    pub fn on_message(&mut self, message: Message, has_model: impl Fn(&Digest) -> bool) -> Vec<Action> {
        if self.is_closed() {
            return vec![Action::Close];
        }
        let out = match (&mut self.state, message.header) {
            (_, Header::Bye) => return self.closed(CloseReason::PeerBye),
            (_, Header::Probe { id, echo_payload }) => {
                return vec![Action::Send(echo(id, echo_payload, message.body))];
            }
            (_, Header::Error { code, reason }) => {
                return self.closed(CloseReason::PeerRefused { code, reason });
            }
            (
                State::AwaitHello,
                Header::Hello { version, model_digest, model_bytes, device: _, input_shapes, dims },
            ) => {
                let shapes = overrides(&input_shapes, &dims);
                // Asked once: a pushed model may be evicted between two asks.
                let known = has_model(&model_digest);
                if version != PROTOCOL_VERSION {
                    Err((
                        ErrorCode::Version,
                        format!("protocol version {version} is not supported (this handheld speaks {PROTOCOL_VERSION})"),
                    ))
                } else if let (Some(why), false) = (&self.pushes_refused, known) {
                    Err((
                        ErrorCode::Model,
                        format!("model {} is not here, and {why}", hex_digest(&model_digest)),
                    ))
                } else if model_bytes > self.max_push && !known {
                    Err((
                        ErrorCode::Model,
                        format!(
                            "a pushed model of {model_bytes} bytes exceeds this handheld's {} limit",
                            self.max_push
                        ),
                    ))
                } else if let Err(reason) = &shapes {
                    Err((ErrorCode::Model, reason.to_string()))
                } else if let Some(Err(refused)) = (!known).then(|| self.reserve_push(model_bytes)) {
                    Err(refused)
                } else {
                    let shapes = shapes.unwrap_or_default();
                    let welcome = Message::new(Header::Welcome {
                        version: PROTOCOL_VERSION,
                        device: self.device.clone(),
                        has_model: known,
                        status: self.status,
                        engines: self.engines.clone(),
                    });
                    if known {
                        self.state = State::Loading { digest: model_digest };
                        Ok(vec![Action::Send(welcome), Action::LoadKnown { digest: model_digest, shapes }])
                    } else {
                        self.state = State::Receiving {
                            digest: model_digest,
                            size: model_bytes,
                            bytes: vec![],
                            shapes,
                        };
                        Ok(vec![Action::Send(welcome)])
                    }
                }
            }
            (State::Receiving { digest, size, bytes, shapes }, Header::ModelChunk { offset }) => {
                if offset != bytes.len() as u64 {
                    Err((ErrorCode::Unexpected, format!("model chunk at {offset}, expected {}", bytes.len())))
                } else if bytes.len() as u64 + message.body.len() as u64 > *size {
                    Err((ErrorCode::Model, format!("model push exceeds the announced {size} bytes")))
                } else {
                    bytes.extend_from_slice(&message.body);
                    if (bytes.len() as u64) < *size {
                        Ok(vec![])
                    } else if model_digest(bytes) != *digest {
                        Err((
                            ErrorCode::Digest,
                            "the pushed model's SHA-256 differs from the announced digest".into(),
                        ))
                    } else {
                        let (digest, bytes, shapes) =
                            (*digest, std::mem::take(bytes), std::mem::take(shapes));
                        self.state = State::Loading { digest };
                        let reservation = self.push_reserved.clone();
                        Ok(vec![Action::LoadPushed { digest, bytes, shapes, reservation }])
                    }
                }
            }
            (
                State::Ready { last_frame, .. },
                Header::RunSuffix { frame, cut, tensors, answer, edge, engine },
            ) => {
                if edge.is_some() && self.edge.is_none() {
                    Err((
                        ErrorCode::Unexpected,
                        format!("frame {frame} asks for a relay, but no edge is attached to this connection"),
                    ))
                } else if let Some(why) = unoffered(&self.engines, engine) {
                    Err((ErrorCode::Unexpected, format!("frame {frame} {why}")))
                } else if edge.is_some() && engine.is_some() {
                    Err((
                        ErrorCode::Unexpected,
                        format!("frame {frame} names an engine for a relay, which runs on the model's own"),
                    ))
                } else if last_frame.is_some_and(|l| frame <= l) {
                    Err((
                        ErrorCode::Unexpected,
                        format!(
                            "frame {frame} after frame {}: frames must increase",
                            last_frame.unwrap_or(0)
                        ),
                    ))
                } else if self.queue.len() >= self.limits.max_queued {
                    Err((
                        ErrorCode::Unexpected,
                        format!("more than {} frames queued on this connection", self.limits.max_queued),
                    ))
                } else {
                    *last_frame = Some(frame);
                    let tensors = Tensors(Message {
                        header: Header::RunSuffix {
                            frame,
                            cut: String::new(),
                            tensors,
                            answer: vec![],
                            edge: None,
                            engine: None,
                        },
                        body: message.body,
                    });
                    let edge = edge.map(CutKey::from_wire);
                    self.queue.push_back(Queued {
                        frame,
                        cut: CutKey::from_wire(cut),
                        tensors,
                        answer,
                        edge,
                        engine,
                    });
                    Ok(self.next_runs())
                }
            }
            (State::Ready { last_frame, .. }, Header::Cancel { frames }) => {
                if frames.len() > MAX_CANCEL {
                    Err((
                        ErrorCode::Unexpected,
                        format!("Cancel names {} frames, more than {MAX_CANCEL}", frames.len()),
                    ))
                } else {
                    // Only frames sent are cancelled (a frame not yet sent is
                    // not a cancel); those queued are dropped; those handed
                    // out are skipped if not started, and their results,
                    // if any, not sent.
                    let last = *last_frame;
                    self.queue.retain(|q| !(frames.contains(&q.frame) && last.is_some_and(|l| q.frame <= l)));
                    let mut skip = vec![];
                    for (f, cancelled) in self.running.iter_mut().filter(|(f, _)| frames.contains(f)) {
                        if !*cancelled {
                            *cancelled = true;
                            skip.push(*f);
                        }
                    }
                    Ok(if skip.is_empty() { vec![] } else { vec![Action::Skip { frames: skip }] })
                }
            }
            (State::Ready { .. }, Header::Edge { url, cuts }) => {
                if cuts.len() > MAX_EDGE_CUTS {
                    Err((
                        ErrorCode::Unexpected,
                        format!("Edge names {} cuts, more than {MAX_EDGE_CUTS}", cuts.len()),
                    ))
                } else if url.len() > MAX_EDGE_URL {
                    Err((
                        ErrorCode::Unexpected,
                        format!("an edge URL of {} bytes, more than {MAX_EDGE_URL}", url.len()),
                    ))
                } else if self.edge_asks_left == 0 {
                    Ok(vec![Action::Send(Self::edge_refused(format!(
                        "this handheld answers at most {MAX_EDGE_ASKS} edge asks per connection"
                    )))])
                } else {
                    self.edge_asks_left -= 1;
                    // Attached only once the shell says it relays there.
                    self.edge = None;
                    Ok(vec![Action::Edge { url, cuts: cuts.into_iter().map(CutKey::from_wire).collect() }])
                }
            }
            (State::Ready { .. }, Header::Prepare { mut cuts, engine }) => {
                if cuts.len() > MAX_PREPARE {
                    Err((
                        ErrorCode::Unexpected,
                        format!("Prepare names {} cuts, more than {MAX_PREPARE}", cuts.len()),
                    ))
                } else if let Some(why) = unoffered(&self.engines, engine) {
                    Err((ErrorCode::Unexpected, format!("Prepare {why}")))
                } else {
                    // A peer may not make this handheld build without end.
                    let allowed = self.prepares_left.min(cuts.len());
                    self.prepares_left -= allowed;
                    let reason = format!(
                        "this handheld builds at most {} cuts ahead per connection",
                        self.limits.max_prepared
                    );
                    let mut out: Vec<Action> = cuts
                        .split_off(allowed)
                        .into_iter()
                        .map(|key| {
                            Action::Send(Self::prepared_on(
                                CutKey::from_wire(key),
                                engine,
                                0,
                                Some(reason.clone()),
                            ))
                        })
                        .collect();
                    if !cuts.is_empty() {
                        out.push(Action::Prepare {
                            cuts: cuts.into_iter().map(CutKey::from_wire).collect(),
                            engine,
                        });
                    }
                    Ok(out)
                }
            }
            (state, header) => {
                let when = match state {
                    State::AwaitHello => "before the handshake",
                    State::Receiving { .. } => "during the model push",
                    State::Loading { .. } => "while the model loads",
                    State::Ready { .. } => "in a ready session",
                    State::Closed => "after close",
                };
                Err((ErrorCode::Unexpected, format!("unexpected {} {when}", name(&header))))
            }
        };
        out.unwrap_or_else(|(code, reason)| self.fail(code, reason))
    }

    /// The queued frames to hand out to run, up to `run_ahead` handed out.
    fn next_runs(&mut self) -> Vec<Action> {
        let mut out = vec![];
        while !self.is_closed() && self.running.len() < self.limits.run_ahead.max(1) {
            let Some(Queued { frame, cut, tensors, answer, edge, engine }) = self.queue.pop_front() else {
                break;
            };
            self.running.push_back((frame, false));
            out.push(Action::Run { frame, cut, tensors, answer, edge, engine });
        }
        out
    }

    /// `frame` ran at `now`: its result message ([`Self::result`]) or why
    /// it failed. Sends the result (a failure closes the connection, naming
    /// the frame; a cancelled frame's result, or its skip, is dropped),
    /// then hands out the next frame to run. Frames must be done in the
    /// order handed out: any other order is the shell's error, and closes.
    pub fn frame_done(&mut self, now: Instant, frame: u64, result: Result<Message, RunError>) -> Vec<Action> {
        let cancelled = match self.running.front() {
            Some(&(f, cancelled)) if f == frame => cancelled,
            _ if self.is_closed() => return vec![],
            front => {
                let reason = format!("frame {frame} done while {:?} was first to run", front.map(|f| f.0));
                return self.fail(ErrorCode::Unexpected, reason);
            }
        };
        self.running.pop_front();
        // Not reading was this side's choice: it does not count as idle.
        if self.queue.len() >= self.limits.max_queued {
            self.heard = now;
        }
        let mut out = match result {
            _ if cancelled => vec![],
            // A result computed goes out even after a close, ahead of it.
            Ok(m) => vec![Action::Send(m)],
            Err(_) if self.is_closed() => vec![],
            Err(reason) => return self.fail(ErrorCode::Tensor, format!("frame {frame}: {reason}")),
        };
        out.extend(self.next_runs());
        out
    }

    /// The model is loaded: tell the wearable, with this side's latency summary.
    pub fn model_loaded(&mut self, latency: LatencySummary) -> Vec<Action> {
        match self.state {
            State::Loading { digest } => {
                self.state = State::Ready { digest, last_frame: None };
                self.push_reserved = None;
                vec![Action::Send(Message::new(Header::ModelReady { latency }))]
            }
            _ => vec![],
        }
    }

    /// Whether a latency summary fits the `ModelReady` message that
    /// carries it (a model of too many layers cannot be served).
    pub fn check_latency_fits(latency: &LatencySummary) -> Result<(), ProtocolError> {
        encode(&Message::new(Header::ModelReady { latency: latency.clone() })).map(|_| ())
    }

    /// The shell checked the edge at `url` an [`Action::Edge`] named: the
    /// message telling the wearable which cuts it serves (`deployed`), its
    /// round trip, its measured speed against this handheld (dropped unless
    /// finite, above 0 and at most [`MAX_EDGE_SPEED`]), or why this
    /// handheld will not relay there (`error`). Relayed frames are accepted
    /// from here on when there is no error.
    pub fn edge_ready(
        &mut self,
        url: &str,
        deployed: Vec<CutKey>,
        (rtt_us, speed): (u64, Option<f64>),
        error: Option<String>,
    ) -> Message {
        self.edge = error.is_none().then(|| url.to_string());
        Message::new(Header::EdgeReady {
            deployed: deployed.into_iter().map(CutKey::into_string).collect(),
            rtt_us,
            speed: speed.filter(|s| s.is_finite() && *s > 0.0 && *s <= MAX_EDGE_SPEED),
            error,
        })
    }

    /// The edge this connection relays to, once attached.
    pub fn edge(&self) -> Option<&str> {
        self.edge.as_deref()
    }

    /// An edge ask answered with a refusal (the connection stays open).
    fn edge_refused(why: String) -> Message {
        Message::new(Header::EdgeReady { deployed: vec![], rtt_us: 0, speed: None, error: Some(why) })
    }

    /// A cut's suffix plan was built (`error`: or why not): the message telling the wearable.
    pub fn prepared(cut: CutKey, build_us: u64, error: Option<String>) -> Message {
        Self::prepared_on(cut, None, build_us, error)
    }

    /// [`HandheldSession::prepared`] for a cut asked on `engine`.
    pub fn prepared_on(cut: CutKey, engine: Option<Engine>, build_us: u64, error: Option<String>) -> Message {
        Message::new(Header::Prepared { cut: cut.into_string(), engine, build_us, error })
    }

    /// The model failed to load: tell the wearable why and close.
    pub fn model_failed(&mut self, reason: impl Into<String>) -> Vec<Action> {
        if self.is_closed() {
            return vec![];
        }
        self.fail(ErrorCode::Model, reason.into())
    }

    /// The refusal for a link the handheld cannot take: it already serves
    /// `limit` wearables (said in the plain protocol; no session is opened).
    pub fn busy(limit: usize) -> Message {
        super::error_message(
            ErrorCode::Busy,
            format!("the handheld is busy: it serves at most {limit} wearables at once"),
        )
    }

    /// A suffix ran: its result message, each output packed in the
    /// encoding `answer` asks for it (the request's `answer`, in the same
    /// order) when that is a generic lossless one, else raw.
    pub fn result(
        frame: u64,
        handheld_compute_us: u64,
        outputs: &[(String, WireTensor<'_>)],
        answer: &[Encoding],
        edge: Option<EdgeReport>,
    ) -> Result<Message, ProtocolError> {
        let packed = outputs
            .iter()
            .enumerate()
            .map(|(i, (name, t))| {
                let e = answer
                    .get(i)
                    .copied()
                    .filter(|e| e.is_lossless() && !e.needs_widening())
                    .unwrap_or(Encoding::Raw);
                crate::protocol::pack_tensor(name, t, e, None)
            })
            .collect::<Result<Vec<PackedTensor>, _>>()?;
        Ok(Message::from_packed(
            |tensors| Header::Result { frame, handheld_compute_us, tensors, edge },
            packed,
        ))
    }
}
