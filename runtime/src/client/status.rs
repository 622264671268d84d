//! Where a session stands with its handheld, and one frame's outcome: what an app asks to know why frames run locally.

use std::fmt;

use super::FrameReport;
use crate::tensor::Outputs;

/// The handheld as this session sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// The placement is wearable-only: no link is opened.
    LocalOnly,
    /// Connecting, or handshaking and loading the model (no error yet).
    Connecting,
    /// The handheld has the model and takes suffixes.
    Ready {
        /// Its device profile name.
        handheld: String,
    },
    /// The handheld refused the model (or the protocol version); it retries
    /// on reconnection, which fails the same way unless the handheld changed.
    Refused {
        /// The handheld's reason.
        reason: String,
    },
    /// The handheld cannot be reached; the session keeps retrying with backoff.
    Unreachable {
        /// The last error (connection refused, timed out, link lost, ...).
        error: String,
    },
}

impl Status {
    /// Why a frame ran on the wearable because of this status, if it did.
    pub fn local_reason(&self) -> Option<String> {
        match self {
            Status::LocalOnly => Some("placement: wearable only".into()),
            Status::Connecting => Some("no handheld yet: still connecting".into()),
            Status::Ready { .. } => None,
            Status::Refused { reason } => Some(format!("the handheld refused the model: {reason}")),
            Status::Unreachable { error } => Some(format!("no handheld: {error}")),
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Status::LocalOnly => write!(f, "local only"),
            Status::Connecting => write!(f, "connecting"),
            Status::Ready { handheld } => write!(f, "ready ({handheld})"),
            Status::Refused { reason } => write!(f, "refused: {reason}"),
            Status::Unreachable { error } => write!(f, "unreachable: {error}"),
        }
    }
}

/// One delivered frame: its report and its outputs in the model's order.
#[derive(Clone, Debug)]
pub struct Frame {
    /// Where it ran, how long each part took, why it ran locally.
    pub report: FrameReport,
    /// Its outputs.
    pub outputs: Outputs,
}
