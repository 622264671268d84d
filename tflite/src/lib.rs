//! Tandem's TFLite importer: reads a `.tflite` flatbuffer without trusting
//! it and translates its first subgraph to an ONNX graph, the one form
//! Tandem splits and runs. No TensorFlow and no Python are needed.
//!
//! The ONNX graph keeps the TFLite interface (NHWC inputs and outputs, their
//! names, shapes and types). What has no translation (custom ops, resource
//! variables, control flow, ops not covered) is refused with an
//! [`Error::Unsupported`] naming the op and the node; nothing is dropped.
//!
//! # Coverage
//! Subgraph 0 is translated; `IF` branches (other subgraphs) are inlined,
//! both computed and `Where` picking the taken one's outputs. Both branches
//! run on every frame: a run-time failure in the branch not taken (a shape
//! it cannot take, say) fails the frame, where TFLite would not. Ops: the
//! convolutions (`CONV_2D`, `DEPTHWISE_CONV_2D`, grouped, dilated), pooling
//! (`MAX_POOL_2D`, `AVERAGE_POOL_2D`), `FULLY_CONNECTED`, `BATCH_MATMUL`,
//! `RESIZE_BILINEAR` and `RESIZE_NEAREST_NEIGHBOR` (align_corners,
//! half_pixel_centers), `DEPTH_TO_SPACE`, `SPACE_TO_DEPTH`, `PAD`, `PADV2`,
//! `MIRROR_PAD` (REFLECT), `CONCATENATION`, `PACK`, `RESHAPE`, `SQUEEZE`,
//! `EXPAND_DIMS`, `TRANSPOSE`, `SLICE`, `STRIDED_SLICE`, `GATHER`, `TILE`,
//! `CAST`, the reductions (`MEAN`, `SUM`, `REDUCE_MAX`, `REDUCE_MIN`,
//! `REDUCE_PROD`), `SOFTMAX`, `LOG_SOFTMAX`, the element-wise ops (`ADD`,
//! `SUB`, `MUL`, `DIV`, `MAXIMUM`, `MINIMUM`, `POW`, `SQUARED_DIFFERENCE`,
//! `ADD_N`, comparisons, logical ops, `SELECT`, `ABS`, `NEG`, `EXP`, `LOG`,
//! `SQRT`, `RSQRT`, `SQUARE`, `FLOOR`, `CEIL`, `ROUND`, `SIGN`, `SIN`,
//! `COS`), activations (`RELU`, `RELU6`, `RELU_N1_TO_1`, `RELU_0_TO_1`,
//! `TANH`, `LOGISTIC`, `HARD_SWISH`, `LEAKY_RELU`, `PRELU`) and fused ones
//! (NONE, RELU, RELU6, RELU_N1_TO_1, TANH); `DEQUANTIZE` and `DENSIFY` of
//! constants are folded (fp16, int8 and sparse weights become float32
//! initializers). int8/uint8 tensors are computed as tf2onnx does:
//! `DequantizeLinear`, the float op, `QuantizeLinear` (ONNX rounds ties to
//! even where TFLite rounds them away from zero: one step at most).
//!
//! A dimension TFLite leaves open (-1 in a tensor's shape signature) stays
//! open: SAME padding, resize sizes and the like follow the size at run
//! time, or the op is refused by name. Folded constants are bounded (one of
//! 500 MiB, 1 GiB in all, a dense form at most 256 times its stored values).
//!
//! Translations are deterministic: the same TFLite bytes give the same ONNX
//! bytes, so a wearable and a handheld that both translate a file agree on
//! its digest.
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
