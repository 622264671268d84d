//! An async client of the Open Inference Protocol's REST API (KServe v2:
//! the protocol Triton, KServe, MLServer and OpenVINO Model Server speak),
//! the wire of Tandem's edge tier: the phone, or the watch, sends a
//! suffix's tensors to a serving engine the user already runs and reads
//! the answer.
//!
//! The server is not trusted: every answer is checked before use (status,
//! Content-Type, the binary extension's lengths, each output's shape,
//! datatype and bytes, the outputs asked for and no others), read bodies
//! are capped while they arrive, and a bad answer is an [`OipError`] that
//! names the URL, never a panic. Plain HTTP only: the edge sits on
//! loopback or the LAN, and TLS is not built in.
//!
//! # Layout
//! - [`tensor`]: [`OipTensor`], a named tensor as little-endian bytes, and
//!   the protocol's datatype names.
//! - [`codec`]: request bodies (JSON or the binary tensor extension) and
//!   the checks of an inference answer, without I/O.
//! - [`client`]: [`OipClient`] (health, metadata, the repository's load and
//!   unload, inference), [`ClientOptions`] and [`EmulatedLink`].
//! - [`error`]: what can go wrong, sorted by what the caller does ([`OipError`]).
//! - [`testing`]: a real KServe server on loopback, for tests.
//!
//! # Example
//!
//! ```
//! use tandem_oip::{ClientOptions, OipClient, OipTensor};
//! use tandem_types::WireType;
//!
//! let x = OipTensor::from_f32("x", vec![1, 2], &[0.5, -1.0]).expect("2 values for 1×2");
//! assert_eq!((x.datatype, x.data.len()), (WireType::F32, 8));
//! assert!(OipTensor::new("x", WireType::F32, vec![1, 3], vec![0; 8]).is_err());
//! // A client only parses its URL: nothing is sent until it is asked.
//! let client = OipClient::new("http://127.0.0.1:8080", ClientOptions::default()).expect("http URL");
//! assert_eq!(client.base_url(), "http://127.0.0.1:8080");
//! let e = OipClient::new("https://edge.example", ClientOptions::default()).expect_err("no TLS");
//! assert!(e.to_string().contains("TLS is not built in"), "{e}");
//! ```

pub mod client;
pub mod codec;
pub mod error;
pub mod tensor;
pub mod testing;

pub use client::{
    ClientOptions, EmulatedLink, InferReply, LinkSpecError, ModelMetadata, OipClient, TensorSpec,
};
pub use error::OipError;
pub use tensor::OipTensor;
