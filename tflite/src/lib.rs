//! Tandem's TFLite importer: reads a `.tflite` flatbuffer without trusting
//! it and translates its first subgraph to an ONNX graph, the one form
//! Tandem splits and runs. No TensorFlow and no Python are needed.
//!
//! The ONNX graph keeps the TFLite interface (NHWC inputs and outputs, their
//! names, shapes and types). What has no translation (custom ops, resource
//! variables, control flow, ops not covered) is refused with an
//! [`Error::Unsupported`] naming the op and the node; nothing is dropped.
//!
//! ```
//! // Not a TFLite file: an error, never a panic.
//! assert!(!tandem_tflite::is_tflite(b"\x08\x07"));
//! assert!(tandem_tflite::translate(b"0000TFL3 truncated").is_err());
//! ```
//!
//! # Layout
//! - `reader`: the flatbuffer read into plain values, every index checked;
//! - `constant`: constants folded at translation time (fp16 and int8
//!   weights dequantized, sparse weights densified, filters to OIHW);
//! - `translate`: the driver (interface, tensor names, the float view of
//!   quantized tensors); `ops`: one translation per TFLite op;
//! - `onnx`: building the ONNX graph; `cache`: translations cached by hash;
//! - TFLite's schema is read through `tandem-tflite-schema`, planus's
//!   generated code (kept apart: it holds `unsafe`, which this crate forbids).

mod constant;
mod error;
mod onnx;
mod ops;
mod reader;
mod translate;

pub mod cache;

pub use error::{Error, Result};
pub use onnx::OPSET;
pub use reader::{is_tflite, FILE_IDENTIFIER};
pub use translate::{translate, translate_to_bytes};
