//! The runtime's error type: what a session, its link and the app's tensors
//! can refuse or fail at, beside the model errors of `tandem-core` it wraps.

use tandem_plan::device::DeviceError;
use tandem_proto::encoding::{Encoding, EncodingError};
use tandem_proto::protocol::ProtocolError;

use crate::client::LinkStopped;

/// A model error from `tandem-core` (loading, shapes, plans, engines): the
/// runtime's [`Error::Model`] wraps it.
pub use tandem_core::Error as ModelError;

/// Everything the runtime can refuse or fail at.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Loading, checking, planning or running the model.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// A device profile that cannot price energy or time.
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// A tensor built from a slice whose length is not the shape's.
    #[error("a tensor of shape {shape:?} holds {want} values, but {got} were given")]
    SliceLength {
        /// The shape asked for.
        shape: Vec<usize>,
        /// The values that shape holds.
        want: usize,
        /// The values given.
        got: usize,
    },
    /// A tensor read as a type it does not hold.
    #[error("output '{name}' holds {found} values, not {wanted}")]
    WrongType {
        /// The output's name.
        name: String,
        /// The type it holds.
        found: String,
        /// The type asked for.
        wanted: &'static str,
    },
    /// An output name the model does not have.
    #[error("no output '{name}'; the model's outputs are: {}", known.join(", "))]
    UnknownOutput {
        /// The name asked for.
        name: String,
        /// The model's outputs.
        known: Vec<String>,
    },
    /// A frame without one of the model's inputs.
    #[error("input '{0}' was not fed")]
    InputNotFed(String),
    /// Outputs asked for before any frame ran.
    #[error("nothing has run yet: fetch reads the outputs of the last run()")]
    NothingRun,
    /// A run that delivered no frame (a session failing as it ran).
    #[error("the run delivered no frame")]
    NoFrame,
    /// A frame number started twice (a bug in the session's driver).
    #[error("frame {0} was already started")]
    FrameStarted(u64),
    /// A frame refused before it ran.
    #[error("frame {frame}: {source}")]
    Frame {
        /// The frame's number.
        frame: u64,
        /// Why.
        source: Box<Error>,
    },
    /// Energy weighed by battery capacity with a profile that gives none.
    #[error("weighing energy by battery capacity needs one in profile '{0}' (battery.capacity_mah)")]
    NoBatteryCapacity(String),
    /// The handheld was required and none was ready.
    #[error("no handheld ready: {0}")]
    NoHandheld(String),
    /// Cloud-only (placement edge-only) without an edge configured.
    #[error("cloud-only (placement edge-only) needs an edge server")]
    NoEdge,
    /// The watch's client of the edge could not be made.
    #[error("the edge client: {0}")]
    EdgeClient(#[from] tandem_oip::OipError),
    /// A thread or async runtime the session needs could not start.
    #[error("starting {what}: {source}")]
    Start {
        /// What was started.
        what: &'static str,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The link task is gone: nothing more can be offloaded.
    #[error(transparent)]
    LinkStopped(#[from] LinkStopped),
    /// The watch's prefix runner panicked (outside an engine, whose panics
    /// are its own errors) or its thread is gone: the frame failed.
    #[error("the prefix runner failed: {0}")]
    PrefixRunner(&'static str),
    /// A tensor that could not be encoded or decoded for the link (or
    /// round-tripped, where an encoding is measured against a budget).
    #[error("{encoding} on '{tensor}': {source}")]
    Encoding {
        /// The tensor.
        tensor: String,
        /// The encoding.
        encoding: Encoding,
        /// What the encoder refused.
        source: EncodingError,
    },
    /// A tensor that could not be packed into a message.
    #[error("packing '{tensor}': {source}")]
    Pack {
        /// The tensor.
        tensor: String,
        /// What the packer refused.
        source: ProtocolError,
    },
    /// A message's tensors that could not be decoded.
    #[error("decoding a message's tensors: {0}")]
    Decode(ProtocolError),
}

/// The runtime's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why an edge could not take a frame, or could not be attached: the frame
/// then runs on the phone (a relay) or the watch (a direct frame), and the
/// reason goes into its report.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EdgeError {
    /// The edge cannot take frames, for the reason given when it was checked.
    #[error("{0}")]
    Unavailable(String),
    /// The edge serves no suffix for this cut.
    #[error("the edge does not serve cut {0}'s suffix")]
    NotServed(crate::CutKey),
    /// The edge does not serve the whole model's suffix (cloud-only).
    #[error(
        "the edge at {url} does not serve this model's whole suffix ({name}: `tandem-models export-suffix`)"
    )]
    WholeNotServed {
        /// The edge's URL.
        url: String,
        /// The suffix's served name.
        name: String,
    },
    /// The phone's middle part did not compute a tensor the edge needs.
    #[error("the middle did not compute '{0}'")]
    MiddleMissing(String),
    /// The edge answered a tensor the model does not output.
    #[error("the edge answered '{0}', no output")]
    UnknownOutput(String),
    /// The edge's answer does not fit the model.
    #[error("the edge's answer: {0}")]
    BadAnswer(ModelError),
    /// The model's side of a relay (its plan, the middle, a tensor's wire form).
    #[error(transparent)]
    Model(#[from] ModelError),
    /// The Open Inference Protocol client or server.
    #[error(transparent)]
    Oip(#[from] tandem_oip::OipError),
    /// A tensor that could not be packed for the edge.
    #[error("packing '{tensor}': {source}")]
    Pack {
        /// The tensor.
        tensor: String,
        /// What the packer refused.
        source: ProtocolError,
    },
    /// The edge's answer could not be decoded.
    #[error("decoding the edge's answer: {0}")]
    Decode(Box<Error>),
    /// The edge (a Tandem server) closed the link or refused, in its words.
    #[error("the edge at {addr}: {reason}")]
    Closed {
        /// The edge's address.
        addr: String,
        /// Why, as the session describes it.
        reason: String,
    },
    /// The edge took longer than allowed.
    #[error("the edge at {addr} did not {what} within {within:?}")]
    Timeout {
        /// The edge's address.
        addr: String,
        /// What it did not do.
        what: &'static str,
        /// The time allowed.
        within: std::time::Duration,
    },
    /// The link task to the edge is gone.
    #[error("the link to the edge at {0} stopped")]
    LinkStopped(String),
    /// No key for the edge: this handheld was never paired with it.
    #[error(
        "this handheld is not paired with the edge at {0}: pair once with \
         `tandem-handheld pair-edge --connect PAIRING_ADDR --code CODE --serve-addr {0}`"
    )]
    NotPaired(String),
    /// The model's bytes for a Tandem edge could not be read.
    #[error("the model's file for the edge: {0}")]
    ModelFile(Box<dyn std::error::Error + Send + Sync>),
    /// The model's file changed since the connection loaded it.
    #[error("the model's file changed since it was loaded")]
    ModelChanged,
    /// The edge keystore cannot be used (its path stays in the handheld's log).
    #[error("this handheld's edge keystore cannot be used for {0}: see its log")]
    Keystore(String),
}
