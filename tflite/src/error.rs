//! What translating a TFLite model can refuse or fail at.

use std::path::PathBuf;

/// Everything the TFLite importer can refuse or fail at.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The bytes are not a readable TFLite flatbuffer (truncated, hostile,
    /// or another format).
    #[error("not a valid TFLite model: {0}")]
    Malformed(String),
    /// The flatbuffer reader found an offset, length or tag that does not hold.
    #[error("not a valid TFLite model: {context}: {source}")]
    Flatbuffer {
        /// What was being read.
        context: String,
        /// What planus found wrong.
        source: planus::Error,
    },
    /// An operator that has no translation, or options this translation
    /// does not cover: nothing is dropped silently.
    #[error("cannot translate TFLite operator {op} at node {index} ('{node}'): {reason}")]
    Unsupported {
        /// The operator's name (`CONV_2D`, or a custom op's code).
        op: String,
        /// The operator's index in subgraph 0.
        index: usize,
        /// The name of its first output tensor.
        node: String,
        /// Why it cannot be translated.
        reason: String,
    },
    /// A tensor type ONNX (or this translation) has no equivalent for.
    #[error("tensor '{tensor}' has type {dtype}, which cannot be translated")]
    UnsupportedType {
        /// The tensor's name.
        tensor: String,
        /// The TFLite type.
        dtype: String,
    },
    /// The translation cache could not be read or written.
    #[error("TFLite translation cache at {path}: {source}")]
    Cache {
        /// The file or directory.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
}

/// A `Result` with the importer's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// Adds what was being read to a planus error.
pub(crate) trait FlatbufferContext<T> {
    /// Wraps the error with `context`.
    fn context(self, context: impl FnOnce() -> String) -> Result<T>;
}

impl<T> FlatbufferContext<T> for std::result::Result<T, planus::Error> {
    fn context(self, context: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|source| Error::Flatbuffer { context: context(), source })
    }
}
