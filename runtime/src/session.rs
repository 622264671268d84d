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
//! any        --Probe------------------------> same (Echo)
//! any        --Bye / error------------------> Closed
//! ```

use crate::protocol::{
    model_digest, Digest, ErrorCode, Header, LatencySummary, Message, ProtocolError, StatusReport,
    TensorMeta, PROTOCOL_VERSION,
};

/// Largest model a wearable may push (bytes).
pub const MAX_MODEL_BYTES: u64 = 1 << 30;

/// What the I/O shell must do.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Send this message to the peer.
    Send(Message),
    /// Load the model with this digest from local storage, then call
    /// [`HandheldSession::model_loaded`] (or [`HandheldSession::model_failed`]).
    LoadKnown(Digest),
    /// Store and load these pushed bytes (their digest is verified), then
    /// call [`HandheldSession::model_loaded`] (or [`HandheldSession::model_failed`]).
    LoadPushed {
        /// The model's digest.
        digest: Digest,
        /// The ONNX bytes.
        bytes: Vec<u8>,
    },
    /// Run the suffix of the cut on these tensors and reply with
    /// [`HandheldSession::result`].
    Run {
        /// The frame.
        frame: u64,
        /// Names of the crossing tensors.
        cut: Vec<String>,
        /// The message carrying the tensors (split them with [`Message::tensors`]).
        message: Message,
    },
    /// Close the connection (after sending anything queued before it).
    Close,
}

#[derive(Clone, Debug, PartialEq)]
enum State {
    AwaitHello,
    Receiving { digest: Digest, size: u64, bytes: Vec<u8> },
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
        Header::Result { .. } => "Result",
        Header::Status(_) => "Status",
        Header::Probe { .. } => "Probe",
        Header::Echo { .. } => "Echo",
        Header::Error { .. } => "Error",
        Header::Bye => "Bye",
    }
}

impl HandheldSession {
    /// A new connection to a handheld with this profile name and status.
    pub fn new(device: impl Into<String>, status: StatusReport) -> HandheldSession {
        HandheldSession { device: device.into(), status, state: State::AwaitHello }
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
            (State::AwaitHello, Header::Hello { version, model_digest, model_bytes, device: _ }) => {
                if version != PROTOCOL_VERSION {
                    Err((
                        ErrorCode::Version,
                        format!("protocol version {version} is not supported (this handheld speaks {PROTOCOL_VERSION})"),
                    ))
                } else if model_bytes > MAX_MODEL_BYTES {
                    Err((
                        ErrorCode::Model,
                        format!("a model of {model_bytes} bytes exceeds {MAX_MODEL_BYTES}"),
                    ))
                } else {
                    let known = has_model(&model_digest);
                    let welcome = Message::new(Header::Welcome {
                        version: PROTOCOL_VERSION,
                        device: self.device.clone(),
                        has_model: known,
                        status: self.status,
                    });
                    if known {
                        self.state = State::Loading { digest: model_digest };
                        Ok(vec![Action::Send(welcome), Action::LoadKnown(model_digest)])
                    } else {
                        self.state =
                            State::Receiving { digest: model_digest, size: model_bytes, bytes: vec![] };
                        Ok(vec![Action::Send(welcome)])
                    }
                }
            }
            (State::Receiving { digest, size, bytes }, Header::ModelChunk { offset }) => {
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
                        let (digest, bytes) = (*digest, std::mem::take(bytes));
                        self.state = State::Loading { digest };
                        Ok(vec![Action::LoadPushed { digest, bytes }])
                    }
                }
            }
            (State::Ready { last_frame, .. }, Header::RunSuffix { frame, cut, tensors }) => {
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
                        header: Header::RunSuffix { frame, cut: cut.clone(), tensors },
                        body: message.body,
                    };
                    Ok(vec![Action::Run { frame, cut, message }])
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

    /// The model failed to load: tell the wearable why and close.
    pub fn model_failed(&mut self, reason: impl Into<String>) -> Vec<Action> {
        self.state = State::Closed;
        error(ErrorCode::Model, reason)
    }

    /// A suffix ran: its result message.
    pub fn result(
        frame: u64,
        handheld_compute_us: u64,
        outputs: &[(String, &tract_onnx::prelude::Tensor)],
    ) -> Result<Message, ProtocolError> {
        Message::with_tensors(
            |tensors: Vec<TensorMeta>| Header::Result { frame, handheld_compute_us, tensors },
            outputs,
        )
    }
}
