//! Both sides' protocol sessions as state machines with no I/O and no
//! clocks, in the manner of quinn-proto's `Connection`: received bytes and
//! the time (`now`) go in through `handle_*`, typed actions come out, and
//! each side owns its rules and timers (`poll_timeout` says when to call
//! `handle_timeout` next). The I/O shells only move bytes and carry
//! actions out; they never build or inspect a [`Header`].
//!
//! - [`HandheldSession`]: the handshake, a model push, the hello deadline
//!   and idle timeout, periodic status, the frames queued to run (the queue
//!   limit, cancels), the prepare budget.
//! - [`WearableSession`]: the handshake, the push, keepalive and silence,
//!   the frames in flight (none lost when the link fails), answers nobody
//!   asked for dropped.
//! - [`CloseReason`]: why a session closed, typed (a refusal is not a lost
//!   link).

mod handheld;
mod wearable;

pub use crate::protocol::EdgeReport;
pub use handheld::{
    Action, HandheldLimits, HandheldSession, PushBudget, PushReservation, RunError, MAX_EDGE_ASKS,
    MAX_MODEL_BYTES,
};
pub use wearable::{
    check_latency, check_others, check_status, ReportError, WearableAction, WearableSession, WearableTimers,
    KEEPALIVE_ID, MAX_ASKED, MAX_CANCELLED, MAX_REPORTED_S,
};

use tandem_types::WireTensor;

use crate::protocol::{ErrorCode, Header, Message, ProtocolError, TensorMeta};

/// Why a session closed.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum CloseReason {
    /// This side refused the peer, and told it so (an `Error` went out).
    Refused {
        /// The error's code.
        code: ErrorCode,
        /// The sentence sent.
        reason: String,
    },
    /// The peer refused this side (its `Error`).
    PeerRefused {
        /// The peer's code.
        code: ErrorCode,
        /// The peer's sentence.
        reason: String,
    },
    /// The peer said `Bye`.
    PeerBye,
    /// This side closed in order (`Bye` went out).
    Shutdown,
    /// The link closed or failed, or the peer went silent.
    Lost(String),
}

impl CloseReason {
    /// Whether the peer refused this side's model or protocol version:
    /// connecting again with the same model fails the same way.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            CloseReason::PeerRefused { code: ErrorCode::Model | ErrorCode::Version | ErrorCode::Digest, .. }
        )
    }

    /// The peer's own sentence, when it refused.
    pub fn peer_reason(&self) -> Option<&str> {
        match self {
            CloseReason::PeerRefused { reason, .. } => Some(reason),
            _ => None,
        }
    }
}

impl std::fmt::Display for CloseReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CloseReason::Refused { code, reason } => write!(f, "refused the peer ({code:?}): {reason}"),
            CloseReason::PeerRefused { code, reason } => {
                write!(f, "refused by the peer ({code:?}): {reason}")
            }
            CloseReason::PeerBye => f.write_str("the peer said bye"),
            CloseReason::Shutdown => f.write_str("this side shut down"),
            CloseReason::Lost(why) => f.write_str(why),
        }
    }
}

/// The tensors a frame's message carries (a `RunSuffix`'s crossing
/// tensors, a `Result`'s outputs), decoded on demand: off the I/O thread,
/// by whoever uses them.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensors(Message);

impl Tensors {
    /// Their descriptions, in the message's order.
    pub fn metas(&self) -> &[TensorMeta] {
        self.0.tensor_metas()
    }

    /// Bytes of the body that carries them (as received: encoded ones encoded).
    pub fn body_len(&self) -> usize {
        self.0.body.len()
    }

    /// The bytes their message took on the link, header included.
    pub fn wire_len(&self) -> usize {
        crate::protocol::wire_len(&self.0)
    }

    /// Each tensor by name, encoded ones decoded (and checked), raw ones
    /// borrowing the body.
    pub fn decode(&self) -> Result<Vec<(String, WireTensor<'_>)>, ProtocolError> {
        self.0.tensors()
    }
}

/// An `Error` message: the code and a sentence naming what was wrong. For
/// a refusal before any session exists (a link refused at accept).
pub fn error_message(code: ErrorCode, reason: impl Into<String>) -> Message {
    Message::new(Header::Error { code, reason: reason.into() })
}

fn name(h: &Header) -> &'static str {
    match h {
        Header::Hello { .. } => "Hello",
        Header::Welcome { .. } => "Welcome",
        Header::ModelChunk { .. } => "ModelChunk",
        Header::ModelReady { .. } => "ModelReady",
        Header::RunSuffix { .. } => "RunSuffix",
        Header::Prepare { .. } => "Prepare",
        Header::Edge { .. } => "Edge",
        Header::EdgeReady { .. } => "EdgeReady",
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

/// The echo of a probe (its payload back when asked).
fn echo(id: u64, echo_payload: bool, body: Vec<u8>) -> Message {
    let received = body.len() as u64;
    let body = if echo_payload { body } else { vec![] };
    Message { header: Header::Echo { id, received }, body }
}
