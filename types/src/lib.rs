//! Plain data every Tandem layer shares, with no tract and no I/O, so that
//! the protocol (`tandem-proto`) needs neither the ONNX runtime nor the
//! partitioner: what the profiler measures of the link and the handheld,
//! the energy weights, a sensor's type and widening, input-shape overrides,
//! and tensors as the wire carries them (a type, a shape, bytes).
//!
//! # Layout
//! - [`cut_key`]: [`CutKey`], a cut's identity.
//! - [`engine`]: [`Engine`], [`EngineChoice`] and [`Engines`]: which runtime runs each half.
//! - [`link`]: [`LinkEstimate`], [`HandheldStatus`], [`EnergyWeights`].
//! - [`sensor`]: [`SensorType`] and [`Widening`] (a sensor's values as the model's floats).
//! - [`shapes`]: [`InputShapes`], the `NAME=D1,D2,...` overrides.
//! - [`tensor`]: [`WireType`] and [`WireTensor`].

pub mod cut_key;
pub mod engine;
pub mod link;
pub mod sensor;
pub mod shapes;
pub mod tensor;

pub use cut_key::CutKey;
pub use engine::{Engine, EngineChoice, EngineParseError, Engines};
pub use link::{EnergyWeights, HandheldStatus, LinkEstimate};
pub use sensor::{SensorType, Widening, WideningError};
pub use shapes::{InputShapes, ShapeError, MAX_OVERRIDE_DIM};
pub use tensor::{TensorError, WireTensor, WireType};
