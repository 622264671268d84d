//! The wearable's side of one connection as a state machine, with no I/O
//! and no clock: the handshake, the model push, keepalive and silence, the
//! frames offloaded and not yet answered (none is lost when the link
//! fails: each comes back to run locally), and answers nobody asked for
//! (echoes of probes not sent, cuts not asked to be prepared) dropped.
//!
//! ```text
//! Start --start--> AwaitWelcome --Welcome (pushes the model if asked)--> AwaitReady --ModelReady--> Ready
//! any   --Error / Bye / bad bytes / silence / link lost--> Closed (in-flight frames: RunLocally)
//! ```

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{echo, name, CloseReason, Tensors};
use crate::encoding::Encoding;
use crate::protocol::EdgeReport;
use crate::protocol::{
    model_digest, Digest, Engine, ErrorCode, FrameDecoder, Header, LatencySummary, Message, PackedTensor,
    ProtocolError, StatusReport, MAX_CANCEL, MAX_EDGE_CUTS, MAX_EDGE_SPEED, MAX_FRAME_BYTES, MAX_PREPARE,
    PROTOCOL_VERSION,
};
use tandem_types::{CutKey, InputShapes};

/// What the wearable's I/O shell and runtime must do.
#[derive(Clone, Debug, PartialEq)]
pub enum WearableAction {
    /// Send this message to the handheld.
    Send(Message),
    /// Send this answer to the handheld's probe; it may be dropped when
    /// the writer is behind (a peer must not grow this side's queue by
    /// probing while not reading).
    SendEcho(Message),
    /// The handheld has the model loaded: offloading can start. Its latency
    /// summary prices the handheld's part of any cut.
    Ready {
        /// The handheld's profile name.
        device: String,
        /// Its latency summary for the model.
        latency: LatencySummary,
    },
    /// The handheld's status changed.
    Status(StatusReport),
    /// A probe this side sent came back: `received` bytes reached the handheld.
    Echo {
        /// The probe's id.
        id: u64,
        /// Bytes the probe carried.
        received: u64,
        /// Bytes echoed back.
        echoed: u64,
    },
    /// A frame's outputs arrived.
    Delivered {
        /// The frame.
        frame: u64,
        /// Handheld compute time (µs).
        handheld_compute_us: u64,
        /// The outputs.
        tensors: Tensors,
        /// How its edge part went, when it was relayed.
        edge: Option<EdgeReport>,
    },
    /// The handheld answered an edge ask ([`WearableSession::edge`]).
    EdgeReady {
        /// The cuts asked about whose suffixes the edge serves.
        deployed: Vec<CutKey>,
        /// Round trip of one readiness call from the handheld (µs).
        rtt_us: u64,
        /// How many times faster than the handheld the edge runs the
        /// model's layers, when measured.
        speed: Option<f64>,
        /// Why the handheld will not relay, when it will not.
        error: Option<String>,
    },
    /// These offloaded frames will not be answered (the link failed or the
    /// handheld refused; [`WearableSession::close_reason`] says why): run
    /// them on the wearable, in this order.
    RunLocally(Vec<u64>),
    /// The handheld built a cut this side asked for ahead (or says why it could not).
    Prepared {
        /// The cut's key.
        cut: CutKey,
        /// The engine it was asked on (`None`: the handheld's own).
        engine: Option<Engine>,
        /// How long building it took (µs).
        build_us: u64,
        /// Why it could not be built, if it could not.
        error: Option<String>,
    },
    /// Close the connection; [`WearableSession::close_reason`] says why.
    Close,
}

/// The wearable's timers for one connection.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WearableTimers {
    /// No bytes from the handheld for this long: the link is taken as lost
    /// (a live handheld sends `Status` twice a second).
    pub silence: Duration,
    /// Nothing sent for this long: a keepalive probe goes out (the
    /// handheld closes peers idle for its idle timeout).
    pub keepalive: Duration,
}

impl Default for WearableTimers {
    /// Tuned against the handheld's 500 ms status and 60 s idle timeout.
    fn default() -> Self {
        WearableTimers { silence: Duration::from_secs(10), keepalive: Duration::from_secs(20) }
    }
}

/// The probe id of keepalives (their echo is dropped, as unasked).
pub const KEEPALIVE_ID: u64 = u64::MAX;

/// Most probes or prepared cuts awaiting an answer (older ones are forgotten).
pub const MAX_ASKED: usize = 64;

#[derive(Clone, Debug, PartialEq)]
enum WearableState {
    Start,
    AwaitWelcome,
    AwaitReady,
    Ready,
    Closed,
}

/// One connection's protocol state on the wearable: the handshake, the
/// model push, the timers, and the frames offloaded but not yet answered
/// (so that none is lost when the link fails).
#[derive(Debug)]
pub struct WearableSession {
    device: String,
    digest: Digest,
    model: Arc<Vec<u8>>,
    shapes: InputShapes,
    chunk_bytes: usize,
    state: WearableState,
    in_flight: VecDeque<u64>,
    /// Frames cancelled whose answer may still come (at most [`MAX_CANCELLED`]).
    cancelled: VecDeque<u64>,
    handheld: Option<String>,
    /// The engines the handheld offered in its `Welcome`.
    engines: Vec<Engine>,
    layers: Option<usize>,
    decoder: FrameDecoder,
    timers: WearableTimers,
    /// When the handheld last sent bytes, and this side last sent a
    /// message (set by [`WearableSession::start`]).
    heard: Option<Instant>,
    sent: Option<Instant>,
    /// Probes sent and cuts asked for, awaiting their answers.
    probes: VecDeque<u64>,
    asked: VecDeque<(CutKey, Option<Engine>)>,
    /// An edge ask awaits its answer.
    edge_asked: bool,
    close: Option<CloseReason>,
}

/// Most cancelled frames remembered: an answer to an older one is out of order.
pub const MAX_CANCELLED: usize = 256;

/// Longest per-layer or overhead time a handheld may report (an hour):
/// beyond it the profile is not a measurement.
pub const MAX_REPORTED_S: f64 = 3600.0;

/// Checks a handheld's latency profile: one finite, non-negative time per
/// layer (when the count is known) and a finite, non-negative overhead.
pub fn check_latency(latency: &LatencySummary, layers: Option<usize>) -> Result<(), ReportError> {
    check_times(&latency.per_layer_s, latency.overhead_s, layers)
}

/// [`check_latency`] of one engine's times.
fn check_times(per_layer_s: &[f64], overhead_s: f64, layers: Option<usize>) -> Result<(), ReportError> {
    if let Some(n) = layers {
        if per_layer_s.len() != n {
            return Err(ReportError::Layers { got: per_layer_s.len(), layers: n });
        }
    }
    let ok = |v: f64| v.is_finite() && (0.0..=MAX_REPORTED_S).contains(&v);
    if let Some((i, &v)) = per_layer_s.iter().enumerate().find(|(_, v)| !ok(**v)) {
        return Err(ReportError::LayerTime { layer: i, seconds: v });
    }
    if !ok(overhead_s) {
        return Err(ReportError::Overhead(overhead_s));
    }
    Ok(())
}

/// Checks the handheld's times on its other engines: each an engine it
/// offered, named once and not the model's own, with times checked as
/// [`check_latency`] checks them.
pub fn check_others(
    latency: &LatencySummary,
    offered: &[Engine],
    layers: Option<usize>,
) -> Result<(), ReportError> {
    let mut seen = vec![latency.engine];
    for other in &latency.others {
        if !offered.contains(&other.engine) || seen.contains(&other.engine) {
            return Err(ReportError::Engine(other.engine));
        }
        seen.push(other.engine);
        check_times(&other.per_layer_s, other.overhead_s, layers)?;
    }
    Ok(())
}

/// Checks a handheld's status: load and battery shares in [0, 1].
pub fn check_status(s: &StatusReport) -> Result<(), ReportError> {
    let share = |v: f32| v.is_finite() && (0.0..=1.0).contains(&v);
    if !share(s.load) {
        return Err(ReportError::Load(s.load));
    }
    if !share(s.battery) {
        return Err(ReportError::Battery(s.battery));
    }
    Ok(())
}

/// What is wrong with a handheld's report of itself.
#[derive(Clone, Debug, thiserror::Error, PartialEq)]
pub enum ReportError {
    /// Not one per-layer time per layer.
    #[error("{got} per-layer times for a model of {layers} layers")]
    Layers {
        /// Times given.
        got: usize,
        /// The model's layers.
        layers: usize,
    },
    /// A layer's time is not a time.
    #[error("layer {layer}'s time is {seconds} s (not a time from 0 to {MAX_REPORTED_S} s)")]
    LayerTime {
        /// The layer.
        layer: usize,
        /// Its reported time.
        seconds: f64,
    },
    /// The overhead is not a time.
    #[error("the overhead is {0} s (not a time from 0 to {MAX_REPORTED_S} s)")]
    Overhead(f64),
    /// Times on an engine not offered, or named twice.
    #[error("times on the engine {0}, which the handheld did not offer, or named twice")]
    Engine(Engine),
    /// The load is not a share.
    #[error("a load of {0} (not a share from 0 to 1)")]
    Load(f32),
    /// The battery level is not a share.
    #[error("a battery level of {0} (not a share from 0 to 1)")]
    Battery(f32),
}

impl WearableSession {
    /// A session for the model `model` (its ONNX bytes, loaded with the
    /// input-shape overrides `shapes`, which the handheld is told), pushing
    /// it in chunks of `chunk_bytes` if the handheld lacks it.
    pub fn new(
        device: impl Into<String>,
        model: Arc<Vec<u8>>,
        shapes: InputShapes,
        chunk_bytes: usize,
    ) -> WearableSession {
        WearableSession {
            device: device.into(),
            digest: model_digest(&model),
            model,
            shapes,
            chunk_bytes: chunk_bytes.max(1),
            state: WearableState::Start,
            in_flight: VecDeque::new(),
            cancelled: VecDeque::new(),
            handheld: None,
            engines: vec![],
            layers: None,
            decoder: FrameDecoder::new(MAX_FRAME_BYTES),
            timers: WearableTimers::default(),
            heard: None,
            sent: None,
            probes: VecDeque::new(),
            asked: VecDeque::new(),
            edge_asked: false,
            close: None,
        }
    }

    /// The model's layer count: a handheld's latency profile must have one
    /// time per layer, or the session fails.
    pub fn expect_layers(mut self, layers: usize) -> WearableSession {
        self.layers = Some(layers);
        self
    }

    /// These timers instead of the defaults.
    pub fn timers(mut self, timers: WearableTimers) -> WearableSession {
        // A zero timer would fire at every call.
        let least = Duration::from_millis(1);
        self.timers =
            WearableTimers { silence: timers.silence.max(least), keepalive: timers.keepalive.max(least) };
        self
    }

    /// Starts the handshake at `now` (the link just opened).
    pub fn start(&mut self, now: Instant) -> Vec<WearableAction> {
        if self.state != WearableState::Start {
            return vec![];
        }
        self.state = WearableState::AwaitWelcome;
        self.heard = Some(now);
        self.sent = Some(now);
        vec![WearableAction::Send(Message::new(Header::Hello {
            version: PROTOCOL_VERSION,
            model_digest: self.digest,
            model_bytes: self.model.len() as u64,
            device: self.device.clone(),
            input_shapes: self.shapes.to_specs().0,
            dims: self.shapes.to_specs().1,
        }))]
    }

    /// Whether suffixes can be offloaded.
    pub fn is_ready(&self) -> bool {
        self.state == WearableState::Ready
    }

    /// Whether the session has closed.
    pub fn is_closed(&self) -> bool {
        self.state == WearableState::Closed
    }

    /// Why the session closed, once it has.
    pub fn close_reason(&self) -> Option<&CloseReason> {
        self.close.as_ref()
    }

    /// Frames offloaded and not yet answered, oldest first.
    pub fn in_flight(&self) -> Vec<u64> {
        self.in_flight.iter().copied().collect()
    }

    fn sent_at(&mut self, now: Instant, m: Message) -> Message {
        self.sent = Some(now);
        m
    }

    /// Offloads `frame`'s suffix at `now`, its crossing tensors packed (raw
    /// or encoded, [`crate::protocol::pack_tensor`]), asking for the
    /// answer's tensors in `answer` (see [`Header::RunSuffix`]): the message
    /// to send (`None` unless ready).
    pub fn offload(
        &mut self,
        now: Instant,
        frame: u64,
        cut: CutKey,
        packed: Vec<PackedTensor>,
        answer: Vec<Encoding>,
        edge: Option<CutKey>,
    ) -> Option<Message> {
        self.offload_on(now, frame, (cut, None), packed, answer, edge)
    }

    /// [`WearableSession::offload`] with the suffix on `engine` (one the
    /// handheld offered; `None`: its own).
    pub fn offload_on(
        &mut self,
        now: Instant,
        frame: u64,
        (cut, engine): (CutKey, Option<Engine>),
        packed: Vec<PackedTensor>,
        answer: Vec<Encoding>,
        edge: Option<CutKey>,
    ) -> Option<Message> {
        if !self.is_ready() {
            return None;
        }
        let cut = cut.into_string();
        let edge = edge.map(CutKey::into_string);
        let m = Message::from_packed(
            |tensors| Header::RunSuffix { frame, cut, tensors, answer, edge, engine },
            packed,
        );
        self.in_flight.push_back(frame);
        Some(self.sent_at(now, m))
    }

    /// Asks the handheld at `now` to relay to the Open Inference Protocol
    /// server at `url`, and which of `cuts`' suffixes it serves (at most
    /// [`MAX_EDGE_CUTS`]; more are dropped): the message to send (`None`
    /// unless ready). Answered by [`WearableAction::EdgeReady`].
    pub fn edge(&mut self, now: Instant, url: &str, mut cuts: Vec<CutKey>) -> Option<Message> {
        if !self.is_ready() {
            return None;
        }
        cuts.truncate(MAX_EDGE_CUTS);
        self.edge_asked = true;
        let cuts = cuts.into_iter().map(CutKey::into_string).collect();
        Some(self.sent_at(now, Message::new(Header::Edge { url: url.to_string(), cuts })))
    }

    /// Gives up on these in-flight frames at `now` (the wearable runs them
    /// itself): the `Cancel` to send, naming those that were in flight
    /// (`None` if none was, or the session is not ready). A late answer to
    /// one of them is dropped without a word.
    pub fn cancel(&mut self, now: Instant, frames: &[u64]) -> Option<Message> {
        let mut gone: Vec<u64> = vec![];
        for &f in frames {
            if let Some(i) = self.in_flight.iter().position(|&x| x == f) {
                self.in_flight.remove(i);
                gone.push(f);
            }
        }
        if gone.is_empty() || !self.is_ready() {
            return None;
        }
        self.cancelled.extend(gone.iter().copied());
        while self.cancelled.len() > MAX_CANCELLED {
            self.cancelled.pop_front();
        }
        gone.truncate(MAX_CANCEL);
        Some(self.sent_at(now, Message::new(Header::Cancel { frames: gone })))
    }

    /// A request at `now` to build `cuts`' suffix plans ahead (at most
    /// [`MAX_PREPARE`], the rest dropped): the message to send (`None`
    /// unless ready). Only the cuts asked for are answered
    /// ([`WearableAction::Prepared`]).
    pub fn prepare(&mut self, now: Instant, cuts: Vec<CutKey>) -> Option<Message> {
        self.prepare_on(now, cuts, None)
    }

    /// [`WearableSession::prepare`] with the suffixes on `engine` (`None`:
    /// the handheld's own).
    pub fn prepare_on(
        &mut self,
        now: Instant,
        mut cuts: Vec<CutKey>,
        engine: Option<Engine>,
    ) -> Option<Message> {
        if !self.is_ready() || cuts.is_empty() {
            return None;
        }
        cuts.truncate(MAX_PREPARE);
        self.asked.extend(cuts.iter().map(|c| (c.clone(), engine)));
        while self.asked.len() > MAX_ASKED {
            self.asked.pop_front();
        }
        let cuts = cuts.into_iter().map(CutKey::into_string).collect();
        Some(self.sent_at(now, Message::new(Header::Prepare { cuts, engine })))
    }

    /// A probe of `bytes` padding at `now`, echoed as [`WearableAction::Echo`]
    /// (`None` once closed).
    pub fn probe(&mut self, now: Instant, id: u64, bytes: usize) -> Option<Message> {
        if self.is_closed() {
            return None;
        }
        self.probes.push_back(id);
        while self.probes.len() > MAX_ASKED {
            self.probes.pop_front();
        }
        let m = Message { header: Header::Probe { id, echo_payload: false }, body: vec![0; bytes] };
        Some(self.sent_at(now, m))
    }

    /// This side shuts down: the `Bye` to send (`None` once closed).
    pub fn shutdown(&mut self) -> Option<Message> {
        if self.is_closed() {
            return None;
        }
        self.state = WearableState::Closed;
        self.close = Some(CloseReason::Shutdown);
        Some(Message::new(Header::Bye))
    }

    /// When [`Self::handle_timeout`] must next be called (`None` before
    /// the start and once closed).
    pub fn poll_timeout(&self) -> Option<Instant> {
        match (self.heard, self.sent) {
            (Some(heard), Some(sent)) if !self.is_closed() => {
                Some((heard + self.timers.silence).min(sent + self.timers.keepalive))
            }
            _ => None,
        }
    }

    /// The time has come (`now`): silence (the link is lost) or a keepalive.
    pub fn handle_timeout(&mut self, now: Instant) -> Vec<WearableAction> {
        let (Some(heard), Some(sent)) = (self.heard, self.sent) else { return vec![] };
        if self.is_closed() {
            return vec![];
        }
        if now >= heard + self.timers.silence {
            let silence = self.timers.silence;
            return self.handle_lost(format!(
                "no bytes from the handheld for {silence:?}: the link is taken as lost"
            ));
        }
        if now >= sent + self.timers.keepalive {
            let m = Message::new(Header::Probe { id: KEEPALIVE_ID, echo_payload: false });
            return vec![WearableAction::Send(self.sent_at(now, m))];
        }
        vec![]
    }

    /// Bytes from the handheld at `now`.
    pub fn handle_bytes(&mut self, now: Instant, bytes: &[u8]) -> Vec<WearableAction> {
        if self.is_closed() {
            return vec![];
        }
        self.heard = Some(now);
        let (messages, failed) = self.decoder.push_and_decode(bytes);
        let mut out = vec![];
        for m in messages {
            out.extend(self.on_message(m));
            if self.is_closed() {
                return out;
            }
        }
        if let Some(e) = failed {
            out.extend(self.on_decode_error(&e));
        }
        out
    }

    /// The link closed, failed or was given up (`reason`): every unanswered
    /// frame runs locally, then close.
    pub fn handle_lost(&mut self, reason: impl Into<String>) -> Vec<WearableAction> {
        if self.is_closed() {
            return vec![];
        }
        self.close = Some(CloseReason::Lost(reason.into()));
        let mut out = self.on_disconnect();
        out.push(WearableAction::Close);
        out
    }

    /// The link failed: every unanswered frame runs locally (no `Close`:
    /// the link is gone already).
    pub fn on_disconnect(&mut self) -> Vec<WearableAction> {
        self.state = WearableState::Closed;
        self.close.get_or_insert_with(|| CloseReason::Lost("the link failed".into()));
        self.cancelled.clear();
        let lost: Vec<u64> = self.in_flight.drain(..).collect();
        if lost.is_empty() {
            vec![]
        } else {
            vec![WearableAction::RunLocally(lost)]
        }
    }

    /// The bytes from the handheld did not decode: close, and run every
    /// unanswered frame locally.
    pub fn on_decode_error(&mut self, e: &ProtocolError) -> Vec<WearableAction> {
        self.fail(ErrorCode::Malformed, format!("bad bytes from the handheld: {e}"))
    }

    /// Refuses the handheld: the `Error` naming why, the frames in flight
    /// back, then close.
    fn fail(&mut self, code: ErrorCode, reason: String) -> Vec<WearableAction> {
        let mut out = vec![WearableAction::Send(super::error_message(code, reason.clone()))];
        self.close = Some(CloseReason::Refused { code, reason });
        out.extend(self.on_disconnect());
        out.push(WearableAction::Close);
        out
    }

    fn closed(&mut self, reason: CloseReason) -> Vec<WearableAction> {
        self.close = Some(reason);
        let mut out = self.on_disconnect();
        out.push(WearableAction::Close);
        out
    }

    /// Handles one decoded message from the handheld ([`Self::handle_bytes`]
    /// decodes and calls this).
    pub fn on_message(&mut self, message: Message) -> Vec<WearableAction> {
        if self.is_closed() {
            return vec![WearableAction::Close];
        }
        match (&self.state, message.header) {
            (_, Header::Bye) => self.closed(CloseReason::PeerBye),
            (_, Header::Error { code, reason }) => self.closed(CloseReason::PeerRefused { code, reason }),
            (_, Header::Status(s)) => match check_status(&s) {
                Ok(()) => vec![WearableAction::Status(s)],
                Err(e) => self.fail(ErrorCode::Malformed, format!("the handheld's status: {e}")),
            },
            (_, Header::Echo { id, received }) => match self.probes.iter().position(|&p| p == id) {
                Some(i) => {
                    self.probes.remove(i);
                    vec![WearableAction::Echo { id, received, echoed: message.body.len() as u64 }]
                }
                // Unasked (a keepalive's echo, or a peer's invention): dropped.
                None => vec![],
            },
            (_, Header::Probe { id, echo_payload }) => {
                vec![WearableAction::SendEcho(echo(id, echo_payload, message.body))]
            }
            (
                WearableState::AwaitWelcome,
                Header::Welcome { version, device, has_model, status, engines },
            ) => {
                if version != PROTOCOL_VERSION {
                    return self.fail(
                        ErrorCode::Version,
                        format!("the handheld speaks protocol {version}, this wearable {PROTOCOL_VERSION}"),
                    );
                }
                if let Err(e) = check_status(&status) {
                    return self.fail(ErrorCode::Malformed, format!("the handheld's status: {e}"));
                }
                self.handheld = Some(device);
                self.engines = engines;
                self.state = WearableState::AwaitReady;
                let mut out = vec![WearableAction::Status(status)];
                if !has_model {
                    for (i, chunk) in self.model.chunks(self.chunk_bytes).enumerate() {
                        out.push(WearableAction::Send(Message {
                            header: Header::ModelChunk { offset: (i * self.chunk_bytes) as u64 },
                            body: chunk.to_vec(),
                        }));
                    }
                }
                out
            }
            (WearableState::AwaitReady, Header::ModelReady { latency }) => {
                if let Err(e) = check_latency(&latency, self.layers) {
                    return self.fail(ErrorCode::Malformed, format!("the handheld's latency profile: {e}"));
                }
                if !self.engines.contains(&latency.engine) {
                    return self.fail(
                        ErrorCode::Malformed,
                        format!("the handheld runs the model on {}, which it did not offer", latency.engine),
                    );
                }
                if let Err(e) = check_others(&latency, &self.engines, self.layers) {
                    return self.fail(ErrorCode::Malformed, format!("the handheld's latency profile: {e}"));
                }
                self.state = WearableState::Ready;
                vec![WearableAction::Ready { device: self.handheld.clone().unwrap_or_default(), latency }]
            }
            (WearableState::Ready, Header::Prepared { cut, engine, build_us, error }) => {
                match self.asked.iter().position(|(c, e)| c.as_str() == cut && *e == engine) {
                    Some(i) => {
                        self.asked.remove(i);
                        vec![WearableAction::Prepared {
                            cut: CutKey::from_wire(cut),
                            engine,
                            build_us,
                            error,
                        }]
                    }
                    None => vec![],
                }
            }
            (WearableState::Ready, Header::EdgeReady { deployed, rtt_us, speed, error }) => {
                if !std::mem::take(&mut self.edge_asked) {
                    return self.fail(ErrorCode::Unexpected, "EdgeReady without an edge asked for".into());
                }
                if deployed.len() > MAX_EDGE_CUTS {
                    return self.fail(
                        ErrorCode::Malformed,
                        format!("EdgeReady names {} cuts, more than {MAX_EDGE_CUTS}", deployed.len()),
                    );
                }
                if speed.is_some_and(|s| !(s.is_finite() && s > 0.0 && s <= MAX_EDGE_SPEED)) {
                    return self.fail(
                        ErrorCode::Malformed,
                        format!("EdgeReady says the edge is {speed:?} times faster: not a speed"),
                    );
                }
                let deployed = deployed.into_iter().map(CutKey::from_wire).collect();
                vec![WearableAction::EdgeReady { deployed, rtt_us, speed, error }]
            }
            (WearableState::Ready, Header::Result { frame, handheld_compute_us, tensors, edge }) => {
                // A cancelled frame's answer may still come (it was running):
                // dropped. Answers come in frame order, so no cancelled
                // frame before this one will be answered any more (frames
                // may have been cancelled out of order: deadlines differ).
                let was_cancelled = self.cancelled.contains(&frame);
                self.cancelled.retain(|&f| f > frame);
                if was_cancelled {
                    return vec![];
                }
                // The handheld answers in order: the result must be for the oldest frame.
                if self.in_flight.front() != Some(&frame) {
                    let expected = self.in_flight.front().copied();
                    return self.fail(
                        ErrorCode::Unexpected,
                        format!("result for frame {frame}, expected {expected:?}"),
                    );
                }
                self.in_flight.pop_front();
                let tensors = Tensors(Message {
                    header: Header::Result { frame, handheld_compute_us, tensors, edge: None },
                    body: message.body,
                });
                vec![WearableAction::Delivered { frame, handheld_compute_us, tensors, edge }]
            }
            (state, header) => {
                let reason = format!("unexpected {} in state {state:?}", name(&header));
                self.fail(ErrorCode::Unexpected, reason)
            }
        }
    }
}
