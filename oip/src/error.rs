//! What can go wrong talking to an Open Inference Protocol server, sorted
//! by what the caller does about it: an edge that is down or stalls
//! ([`OipError::Unreachable`]: fall back), a model it does not serve
//! ([`OipError::ModelNotFound`]: deploy it, or plan without it), a request
//! it refused ([`OipError::Refused`]), and an answer that cannot be
//! trusted ([`OipError::Malformed`], [`OipError::UnsupportedDatatype`]).

use thiserror::Error;

/// An Open Inference Protocol call that failed. Every message names the
/// server's URL (with the model, where there is one).
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum OipError {
    /// The server's URL cannot be used (not `http://`, or not a URL).
    #[error("OIP server URL '{url}': {reason}")]
    BadUrl {
        /// The URL given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The request cannot be sent as asked (a tensor whose bytes do not
    /// fit its shape, a NaN in a JSON request, a model name that is not a
    /// path segment); nothing was sent.
    #[error("OIP request to {url}: {reason}")]
    BadRequest {
        /// The endpoint it was for.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A tensor whose bytes are not its shape's size (or a bool byte
    /// other than 0 or 1).
    #[error("tensor '{name}': {reason}")]
    InvalidTensor {
        /// The tensor's name.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The server could not be reached, the connection broke, or it did
    /// not answer within [`crate::ClientOptions::timeout`]: the edge is
    /// down or stalled, and the caller falls back.
    #[error("OIP server {url} unreachable{}: {reason}", if *timed_out { " (timed out)" } else { "" })]
    Unreachable {
        /// The endpoint called.
        url: String,
        /// Whether the timeout expired (else the connection failed or broke).
        timed_out: bool,
        /// The transport's error.
        reason: String,
    },
    /// The server does not know the model (HTTP 404).
    #[error("OIP server {url}: model '{model}' not found: {message}")]
    ModelNotFound {
        /// The endpoint called.
        url: String,
        /// The model asked for.
        model: String,
        /// The server's error message.
        message: String,
    },
    /// The server refused the request: an error status, with its message.
    #[error("OIP server {url} refused the request: HTTP {status}: {message}")]
    Refused {
        /// The endpoint called.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The server's error message (its `error` field, else its body, shortened).
        message: String,
    },
    /// The server's answer breaks the protocol or contradicts itself.
    #[error("OIP server {url} answered malformed: {reason}")]
    Malformed {
        /// The endpoint called.
        url: String,
        /// What is wrong with the answer.
        reason: String,
    },
    /// An output (or a model's tensor) of a datatype Tandem's tensors
    /// cannot hold.
    #[error(
        "OIP server {url}: tensor '{tensor}' has datatype {datatype}, which Tandem cannot carry \
         (it carries FP32, FP64, INT64, INT32, UINT8, INT8 and BOOL)"
    )]
    UnsupportedDatatype {
        /// The endpoint called.
        url: String,
        /// The tensor's name.
        tensor: String,
        /// The datatype the server named.
        datatype: String,
    },
}

impl OipError {
    /// Whether the edge is down or stalled (the caller falls back to a
    /// placement without it).
    pub fn is_unreachable(&self) -> bool {
        matches!(self, OipError::Unreachable { .. })
    }

    /// Whether the server does not know the model.
    pub fn is_not_found(&self) -> bool {
        matches!(self, OipError::ModelNotFound { .. })
    }
}
