//! The model's error type: what loading, checking, planning or running a
//! model can refuse or fail at, each variant naming what was wrong and
//! where. The paired runtime has its own (`tandem::Error`), which wraps it.

use std::path::PathBuf;

/// Everything a model can be refused for or fail at.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The model file could not be read.
    #[error("cannot read model file {path}: {source}")]
    Io {
        /// The file that was asked for.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The bytes do not hold an ONNX model.
    #[error("not an ONNX model{}: {reason}", origin.as_ref().map(|o| format!(" ({o})")).unwrap_or_default())]
    NotOnnx {
        /// Where the bytes came from, when known.
        origin: Option<String>,
        /// Why the bytes were rejected.
        reason: String,
    },
    /// A `.npy` file cannot be read or written.
    #[error("{}: {source}", path.display())]
    Npy {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        source: crate::npy::NpyError,
    },
    /// A TFLite model that could not be read or translated to ONNX (an op
    /// with no translation is named with its node).
    #[error("TFLite model {origin}: {source}")]
    Tflite {
        /// Where the bytes came from.
        origin: String,
        /// What the importer refused (boxed: it names the op and node).
        source: Box<tandem_tflite::Error>,
    },
    /// The model uses an operator that tract cannot run.
    #[error("unsupported operator {op} (domain '{domain}') at node '{node}'")]
    UnsupportedOp {
        /// The ONNX node name.
        node: String,
        /// The ONNX op type.
        op: String,
        /// The op's domain ("" is the default ONNX domain).
        domain: String,
    },
    /// A model input has a symbolic or unknown dimension and no override.
    #[error(
        "input '{input}' has shape {shape} with symbolic or unknown dimensions; \
         give it a concrete shape (--input-shape {input}=1,3,224,224) or bind its symbols (--dim batch=1)"
    )]
    SymbolicInput {
        /// The input's name.
        input: String,
        /// The shape as declared in the model.
        shape: String,
    },
    /// An input-shape override could not be parsed.
    #[error("bad input shape '{spec}': {reason} (expected NAME=D1,D2,...)")]
    BadInputShape {
        /// The text given.
        spec: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An `--input` argument names no file, or not one per input.
    #[error("bad input '{spec}': {reason} (expected random, FILE, or NAME=FILE for each input; FILE is .npy or a TensorProto .pb)")]
    BadInput {
        /// The text given.
        spec: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An override or a fed tensor names an input the model does not have.
    #[error("unknown input '{name}'; the model's inputs are: {}", known.join(", "))]
    UnknownInput {
        /// The name given.
        name: String,
        /// The model's actual input names.
        known: Vec<String>,
    },
    /// A tensor name that is not in the model.
    #[error("unknown tensor '{0}'")]
    UnknownTensor(String),
    /// A tensor's shape or type does not match what the plan expects.
    #[error("tensor '{name}': expected {expected}, got {got}")]
    TensorMismatch {
        /// The tensor's name.
        name: String,
        /// Expected type and shape.
        expected: String,
        /// What was given.
        got: String,
    },
    /// A set of nodes that is not a valid wearable prefix.
    #[error("invalid cut: {0}")]
    InvalidCut(String),
    /// A tensor needed to run a half was not supplied.
    #[error("missing tensor '{0}' needed by the plan")]
    MissingTensor(String),
    /// The model's shapes could not be fully inferred.
    #[error("cannot infer the shape of tensor '{0}'; try --input-shape overrides")]
    UnknownShape(String),
    /// A tensor could not cross the link: its type has no wire form, its
    /// bytes do not fit its shape, or a split check's link refused it.
    #[error("link: {0}")]
    Link(String),
    /// A model card could not be read, or does not fit its model.
    #[error("model card{}: {reason}", path.as_ref().map(|p| format!(" {}", p.display())).unwrap_or_default())]
    Card {
        /// The card's file, when read from one.
        path: Option<std::path::PathBuf>,
        /// What is wrong.
        reason: String,
    },
    /// A tensor, or a model's working set, passes a memory limit (or its
    /// size does not fit 64 bits): refused before anything is allocated.
    #[error("{what} {} (the limit is {} MiB)", bytes.map_or("has a size that overflows 64 bits".to_string(), |b| format!("needs {} MiB", b.div_ceil(1 << 20))), limit >> 20)]
    TooLarge {
        /// What is too large (a tensor named, or the working set).
        what: String,
        /// Its bytes, or `None` when they overflow.
        bytes: Option<u64>,
        /// The limit passed (bytes).
        limit: u64,
    },
    /// An engine this build or this machine cannot run (its library is
    /// missing or too old, or the build leaves it out).
    #[error("the {engine} engine is not available: {reason}")]
    EngineUnavailable {
        /// The engine asked for.
        engine: tandem_types::Engine,
        /// Why, and how to get it.
        reason: String,
    },
    /// An engine other than tract failed while loading or running a model.
    #[error("{engine} failed while {context}: {message}")]
    Engine {
        /// The engine.
        engine: tandem_types::Engine,
        /// What the runtime was doing.
        context: String,
        /// The engine's error.
        message: String,
    },
    /// tract failed while analysing, optimizing or running a model.
    #[error("tract failed while {context}: {message}")]
    Tract {
        /// What the runtime was doing.
        context: String,
        /// tract's error chain, flattened.
        message: String,
    },
}

/// The model's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Wraps a tract error with what the runtime was doing at the time.
pub trait TractContext<T> {
    /// Maps a tract error into [`Error::Tract`].
    fn tract(self, context: impl FnOnce() -> String) -> Result<T>;
}

impl<T> TractContext<T> for std::result::Result<T, tract_onnx::prelude::TractError> {
    fn tract(self, context: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|e| Error::Tract { context: context(), message: format!("{e:#}").replace('\n', " ") })
    }
}

impl From<tandem_types::ShapeError> for Error {
    fn from(e: tandem_types::ShapeError) -> Self {
        Error::BadInputShape { spec: e.spec, reason: e.reason }
    }
}
