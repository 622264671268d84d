//! The handheld's side of one connection as a state machine, with no I/O:
//! feed it each decoded [`Message`] (or the decoder's error), and it answers
//! with [`Action`]s for the I/O shell to carry out (send, load a model, run a
//! suffix, close).
//!
//! ```text
//! AwaitHello --Hello (model known)----------> Loading --model_loaded--> Ready
//!            --Hello (model unknown)--------> Receiving --last chunk, digest ok--> Loading
//!            --Hello (other version)--------> Closed (Error{Version})
//! Receiving  --chunk out of order / digest mismatch--> Closed (Error{...})
//! Ready      --RunSuffix{frame}-------------> Ready (Run; frames must increase)
//! Ready      --Prepare{cuts}----------------> Ready (Prepare; at most MAX_PREPARE cuts)
//! Ready      --Cancel{frames}---------------> Ready (Cancel; frames already sent, at most MAX_CANCEL)
//! any        --Probe------------------------> same (Echo)
//! any        --Bye / error------------------> Closed
//! ```

use tract_onnx::prelude::Tensor;

use crate::encoding::Encoding;
use crate::protocol::{
    model_digest, Digest, ErrorCode, Header, LatencySummary, Message, PackedTensor, ProtocolError,
    StatusReport, MAX_CANCEL, MAX_OVERRIDES, MAX_OVERRIDE_LEN, MAX_PREPARE, PROTOCOL_VERSION,
};
use tandem_core::InputShapes;

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
    },
    /// Run the suffix of the cut on these tensors and reply with
    /// [`HandheldSession::result`].
    Run {
        /// The frame.
        frame: u64,
        /// The cut's key ([`tandem_core::Cut::from_key`]).
        cut: String,
        /// The message carrying the tensors (split them with [`Message::tensors`]).
        message: Message,
    },
    /// Build the suffix plans of these cuts in the background, answering
    /// each with [`HandheldSession::prepared`].
    Prepare {
        /// The cuts' keys.
        cuts: Vec<String>,
    },
    /// Do not run these frames if they have not started (the wearable
    /// ran them itself); all were sent in this session.
    Cancel {
        /// The frames.
        frames: Vec<u64>,
    },
    /// Close the connection (after sending anything queued before it).
    Close,
}

#[derive(Clone, Debug, PartialEq)]
enum State {
    AwaitHello,
    Receiving { digest: Digest, size: u64, bytes: Vec<u8>, shapes: InputShapes },
    Loading { digest: Digest },
    Ready { digest: Digest, last_frame: Option<u64> },
    Closed,
}

/// One connection's protocol state on the handheld.
#[derive(Clone, Debug)]
pub struct HandheldSession {
    device: String,
    status: StatusReport,
    state: State,
    max_push: u64,
    /// Why this peer may not push a model, if it may not.
    pushes_refused: Option<String>,
}

/// A wearable's overrides, checked: a bounded number of short specs that
/// parse. The model load then checks that they fit the model.
fn overrides(specs: &[String], dims: &[String]) -> Result<InputShapes, String> {
    if specs.len() + dims.len() > MAX_OVERRIDES {
        return Err(format!("{} input-shape overrides exceed {MAX_OVERRIDES}", specs.len() + dims.len()));
    }
    if let Some(long) = specs.iter().chain(dims).find(|s| s.len() > MAX_OVERRIDE_LEN) {
        return Err(format!("an input-shape override of {} bytes exceeds {MAX_OVERRIDE_LEN}", long.len()));
    }
    InputShapes::parse_with_dims(specs, dims).map_err(|e| format!("bad input-shape override: {e}"))
}

fn hex_digest(d: &Digest) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

fn error(code: ErrorCode, reason: impl Into<String>) -> Vec<Action> {
    vec![Action::Send(Message::new(Header::Error { code, reason: reason.into() })), Action::Close]
}

fn name(h: &Header) -> &'static str {
    match h {
        Header::Hello { .. } => "Hello",
        Header::Welcome { .. } => "Welcome",
        Header::ModelChunk { .. } => "ModelChunk",
        Header::ModelReady { .. } => "ModelReady",
        Header::RunSuffix { .. } => "RunSuffix",
        Header::Prepare { .. } => "Prepare",
        Header::Prepared { .. } => "Prepared",
        Header::Result { .. } => "Result",
        Header::Status(_) => "Status",
        Header::Probe { .. } => "Probe",
        Header::Echo { .. } => "Echo",
        Header::Error { .. } => "Error",
        Header::Bye => "Bye",
        Header::Cancel { .. } => "Cancel",
    }
}

impl HandheldSession {
    /// A new connection to a handheld with this profile name and status.
    pub fn new(device: impl Into<String>, status: StatusReport) -> HandheldSession {
        HandheldSession {
            device: device.into(),
            status,
            state: State::AwaitHello,
            max_push: MAX_MODEL_BYTES,
            pushes_refused: None,
        }
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

    /// The latest status to report in `Welcome` and `Status` messages.
    pub fn set_status(&mut self, status: StatusReport) {
        self.status = status;
    }

    /// A periodic status message (nothing once closed).
    pub fn status_message(&self) -> Option<Message> {
        (!self.is_closed()).then(|| Message::new(Header::Status(self.status)))
    }

    /// The bytes from the peer did not decode: answer with the error and close.
    pub fn on_decode_error(&mut self, e: &ProtocolError) -> Vec<Action> {
        self.state = State::Closed;
        error(ErrorCode::Malformed, e.to_string())
    }

    /// Handles one message; `has_model` tells whether a model with this
    /// digest is stored locally.
    pub fn on_message(&mut self, message: Message, has_model: impl Fn(&Digest) -> bool) -> Vec<Action> {
        if self.is_closed() {
            return vec![Action::Close];
        }
        let out = match (&mut self.state, message.header) {
            (_, Header::Bye) => {
                self.state = State::Closed;
                return vec![Action::Close];
            }
            (_, Header::Probe { id, echo_payload }) => {
                let received = message.body.len() as u64;
                let body = if echo_payload { message.body } else { vec![] };
                return vec![Action::Send(Message { header: Header::Echo { id, received }, body })];
            }
            (_, Header::Error { .. }) => {
                self.state = State::Closed;
                return vec![Action::Close];
            }
            (
                State::AwaitHello,
                Header::Hello { version, model_digest, model_bytes, device: _, input_shapes, dims },
            ) => {
                let shapes = overrides(&input_shapes, &dims);
                if version != PROTOCOL_VERSION {
                    Err((
                        ErrorCode::Version,
                        format!("protocol version {version} is not supported (this handheld speaks {PROTOCOL_VERSION})"),
                    ))
                } else if let (Some(why), false) = (&self.pushes_refused, has_model(&model_digest)) {
                    Err((
                        ErrorCode::Model,
                        format!("model {} is not here, and {why}", hex_digest(&model_digest)),
                    ))
                } else if model_bytes > self.max_push && !has_model(&model_digest) {
                    Err((
                        ErrorCode::Model,
                        format!(
                            "a pushed model of {model_bytes} bytes exceeds this handheld's {} limit",
                            self.max_push
                        ),
                    ))
                } else if let Err(reason) = &shapes {
                    Err((ErrorCode::Model, reason.clone()))
                } else {
                    let shapes = shapes.unwrap_or_default();
                    let known = has_model(&model_digest);
                    let welcome = Message::new(Header::Welcome {
                        version: PROTOCOL_VERSION,
                        device: self.device.clone(),
                        has_model: known,
                        status: self.status,
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
                        Ok(vec![Action::LoadPushed { digest, bytes, shapes }])
                    }
                }
            }
            (State::Ready { last_frame, .. }, Header::RunSuffix { frame, cut, tensors, answer }) => {
                if last_frame.is_some_and(|l| frame <= l) {
                    Err((
                        ErrorCode::Unexpected,
                        format!(
                            "frame {frame} after frame {}: frames must increase",
                            last_frame.unwrap_or(0)
                        ),
                    ))
                } else {
                    *last_frame = Some(frame);
                    let message = Message {
                        header: Header::RunSuffix { frame, cut: cut.clone(), tensors, answer },
                        body: message.body,
                    };
                    Ok(vec![Action::Run { frame, cut, message }])
                }
            }
            (State::Ready { last_frame, .. }, Header::Cancel { mut frames }) => {
                if frames.len() > MAX_CANCEL {
                    Err((
                        ErrorCode::Unexpected,
                        format!("Cancel names {} frames, more than {MAX_CANCEL}", frames.len()),
                    ))
                } else {
                    // Only frames sent (a frame not yet sent is not a cancel).
                    frames.retain(|f| last_frame.is_some_and(|l| *f <= l));
                    frames.sort_unstable();
                    frames.dedup();
                    Ok(if frames.is_empty() { vec![] } else { vec![Action::Cancel { frames }] })
                }
            }
            (State::Ready { .. }, Header::Prepare { cuts }) => {
                if cuts.len() > MAX_PREPARE {
                    Err((
                        ErrorCode::Unexpected,
                        format!("Prepare names {} cuts, more than {MAX_PREPARE}", cuts.len()),
                    ))
                } else {
                    Ok(vec![Action::Prepare { cuts }])
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
        out.unwrap_or_else(|(code, reason)| {
            self.state = State::Closed;
            error(code, reason)
        })
    }

    /// The model is loaded: tell the wearable, with this side's latency summary.
    pub fn model_loaded(&mut self, latency: LatencySummary) -> Vec<Action> {
        match self.state {
            State::Loading { digest } => {
                self.state = State::Ready { digest, last_frame: None };
                vec![Action::Send(Message::new(Header::ModelReady { latency }))]
            }
            _ => vec![],
        }
    }

    /// A cut's suffix plan was built (`error`: or why not): the message telling the wearable.
    pub fn prepared(cut: String, build_us: u64, error: Option<String>) -> Message {
        Message::new(Header::Prepared { cut, build_us, error })
    }

    /// The model failed to load: tell the wearable why and close.
    pub fn model_failed(&mut self, reason: impl Into<String>) -> Vec<Action> {
        self.state = State::Closed;
        error(ErrorCode::Model, reason)
    }

    /// A suffix ran: its result message, each output packed in the
    /// encoding `answer` asks for it (the request's `answer`, in the same
    /// order) when that is a generic lossless one, else raw.
    pub fn result(
        frame: u64,
        handheld_compute_us: u64,
        outputs: &[(String, &Tensor)],
        answer: &[Encoding],
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
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Message::from_packed(|tensors| Header::Result { frame, handheld_compute_us, tensors }, packed))
    }
}

/// What the wearable's I/O shell and runtime must do.
#[derive(Clone, Debug, PartialEq)]
pub enum WearableAction {
    /// Send this message to the handheld.
    Send(Message),
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
    /// A probe came back: `received` bytes reached the handheld.
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
        /// The message carrying the outputs.
        message: Message,
    },
    /// These offloaded frames will not be answered (the link failed or the
    /// handheld refused): run them on the wearable, in this order.
    RunLocally(Vec<u64>),
    /// The handheld built a cut's suffix plan (or says why it could not).
    Prepared {
        /// The cut's key.
        cut: String,
        /// How long building it took (µs).
        build_us: u64,
        /// Why it could not be built, if it could not.
        error: Option<String>,
    },
    /// Close the connection.
    Close,
}

#[derive(Clone, Debug, PartialEq)]
enum WearableState {
    Start,
    AwaitWelcome,
    AwaitReady,
    Ready,
    Closed,
}

/// One connection's protocol state on the wearable: the handshake, the
/// model push, and the frames offloaded but not yet answered (so that none
/// is lost when the link fails).
#[derive(Clone, Debug)]
pub struct WearableSession {
    device: String,
    digest: Digest,
    model: std::sync::Arc<Vec<u8>>,
    shapes: InputShapes,
    chunk_bytes: usize,
    state: WearableState,
    in_flight: std::collections::VecDeque<u64>,
    /// Frames cancelled whose answer may still come (at most [`MAX_CANCELLED`]).
    cancelled: std::collections::VecDeque<u64>,
    handheld: Option<String>,
    layers: Option<usize>,
}

/// Most cancelled frames remembered: an answer to an older one is out of order.
pub const MAX_CANCELLED: usize = 256;

/// Longest per-layer or overhead time a handheld may report (an hour):
/// beyond it the profile is not a measurement.
pub const MAX_REPORTED_S: f64 = 3600.0;

/// Checks a handheld's latency profile: one finite, non-negative time per
/// layer (when the count is known) and a finite, non-negative overhead.
pub fn check_latency(latency: &LatencySummary, layers: Option<usize>) -> Result<(), String> {
    if let Some(n) = layers {
        if latency.per_layer_s.len() != n {
            return Err(format!("{} per-layer times for a model of {n} layers", latency.per_layer_s.len()));
        }
    }
    let ok = |v: f64| v.is_finite() && (0.0..=MAX_REPORTED_S).contains(&v);
    if let Some((i, v)) = latency.per_layer_s.iter().enumerate().find(|(_, v)| !ok(**v)) {
        return Err(format!("layer {i}'s time is {v} s (not a time from 0 to {MAX_REPORTED_S} s)"));
    }
    if !ok(latency.overhead_s) {
        return Err(format!(
            "the overhead is {} s (not a time from 0 to {MAX_REPORTED_S} s)",
            latency.overhead_s
        ));
    }
    Ok(())
}

/// Checks a handheld's status: load and battery shares in [0, 1].
pub fn check_status(s: &StatusReport) -> Result<(), String> {
    let share = |v: f32| v.is_finite() && (0.0..=1.0).contains(&v);
    if !share(s.load) {
        return Err(format!("a load of {} (not a share from 0 to 1)", s.load));
    }
    if !share(s.battery) {
        return Err(format!("a battery level of {} (not a share from 0 to 1)", s.battery));
    }
    Ok(())
}

impl WearableSession {
    /// A session for the model `model` (its ONNX bytes, loaded with the
    /// input-shape overrides `shapes`, which the handheld is told), pushing
    /// it in chunks of `chunk_bytes` if the handheld lacks it.
    pub fn new(
        device: impl Into<String>,
        model: std::sync::Arc<Vec<u8>>,
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
            in_flight: Default::default(),
            cancelled: Default::default(),
            handheld: None,
            layers: None,
        }
    }

    /// The model's layer count: a handheld's latency profile must have one
    /// time per layer, or the session fails.
    pub fn expect_layers(mut self, layers: usize) -> WearableSession {
        self.layers = Some(layers);
        self
    }

    /// Starts the handshake.
    pub fn start(&mut self) -> Vec<WearableAction> {
        if self.state != WearableState::Start {
            return vec![];
        }
        self.state = WearableState::AwaitWelcome;
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

    /// Frames offloaded and not yet answered, oldest first.
    pub fn in_flight(&self) -> Vec<u64> {
        self.in_flight.iter().copied().collect()
    }

    /// Offloads `frame`'s suffix, its crossing tensors packed (raw or
    /// encoded, [`crate::protocol::pack_tensor`]), asking for the answer's
    /// tensors in `answer` (see [`Header::RunSuffix`]): the message to send
    /// (`None` unless ready).
    pub fn offload(
        &mut self,
        frame: u64,
        cut: String,
        packed: Vec<PackedTensor>,
        answer: Vec<Encoding>,
    ) -> Option<Message> {
        if !self.is_ready() {
            return None;
        }
        let m = Message::from_packed(|tensors| Header::RunSuffix { frame, cut, tensors, answer }, packed);
        self.in_flight.push_back(frame);
        Some(m)
    }

    /// Gives up on these in-flight frames (the wearable runs them itself):
    /// the `Cancel` to send, naming those that were in flight (`None` if
    /// none was, or the session is not ready). A late answer to one of
    /// them is dropped without a word.
    pub fn cancel(&mut self, frames: &[u64]) -> Option<Message> {
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
        Some(Message::new(Header::Cancel { frames: gone }))
    }

    /// A request to build `cuts`' suffix plans ahead (at most
    /// [`MAX_PREPARE`], the rest dropped): the message to send (`None`
    /// unless ready).
    pub fn prepare(&self, mut cuts: Vec<String>) -> Option<Message> {
        if !self.is_ready() || cuts.is_empty() {
            return None;
        }
        cuts.truncate(MAX_PREPARE);
        Some(Message::new(Header::Prepare { cuts }))
    }

    /// The link failed: every unanswered frame runs locally.
    pub fn on_disconnect(&mut self) -> Vec<WearableAction> {
        self.state = WearableState::Closed;
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
        let mut out = vec![WearableAction::Send(Message::new(Header::Error {
            code: ErrorCode::Malformed,
            reason: e.to_string(),
        }))];
        out.extend(self.on_disconnect());
        out.push(WearableAction::Close);
        out
    }

    fn fail(&mut self, code: ErrorCode, reason: String) -> Vec<WearableAction> {
        let mut out = vec![WearableAction::Send(Message::new(Header::Error { code, reason }))];
        out.extend(self.on_disconnect());
        out.push(WearableAction::Close);
        out
    }

    /// Handles one message from the handheld.
    pub fn on_message(&mut self, message: Message) -> Vec<WearableAction> {
        if self.is_closed() {
            return vec![WearableAction::Close];
        }
        match (&self.state, message.header) {
            (_, Header::Bye) | (_, Header::Error { .. }) => {
                let mut out = self.on_disconnect();
                out.push(WearableAction::Close);
                out
            }
            (_, Header::Status(s)) => match check_status(&s) {
                Ok(()) => vec![WearableAction::Status(s)],
                Err(e) => self.fail(ErrorCode::Malformed, format!("the handheld's status: {e}")),
            },
            (_, Header::Echo { id, received }) => {
                vec![WearableAction::Echo { id, received, echoed: message.body.len() as u64 }]
            }
            (_, Header::Probe { id, echo_payload }) => {
                let received = message.body.len() as u64;
                let body = if echo_payload { message.body } else { vec![] };
                vec![WearableAction::Send(Message { header: Header::Echo { id, received }, body })]
            }
            (WearableState::AwaitWelcome, Header::Welcome { version, device, has_model, status }) => {
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
                self.state = WearableState::Ready;
                vec![WearableAction::Ready { device: self.handheld.clone().unwrap_or_default(), latency }]
            }
            (WearableState::Ready, Header::Prepared { cut, build_us, error }) => {
                vec![WearableAction::Prepared { cut, build_us, error }]
            }
            (WearableState::Ready, Header::Result { frame, handheld_compute_us, tensors }) => {
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
                let message = Message {
                    header: Header::Result { frame, handheld_compute_us, tensors },
                    body: message.body,
                };
                vec![WearableAction::Delivered { frame, handheld_compute_us, message }]
            }
            (state, header) => {
                let reason = format!("unexpected {} in state {state:?}", name(&header));
                self.fail(ErrorCode::Unexpected, reason)
            }
        }
    }
}
