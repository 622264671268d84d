//! Tandem's core: load an ONNX model with tract, see it as a layer DAG, cut
//! it into a wearable prefix and a handheld suffix, and run the halves
//! exactly as the unsplit model.
//!
//! # Layout
//! - [`card`]: model cards (how to feed a model and read its outputs), from TOML.
//! - [`model`]: loading ONNX with tract, input-shape overrides, refusing bad input.
//! - [`budget`]: a model's memory cost checked before it is paid (each tensor, the working set).
//! - [`guard`]: tract's panics as errors, without the panic hook's output.
//! - `concretize`: symbols bound, stale annotations dropped, shape computations folded (before cutting).
//! - `workaround`: exact rewrites of ONNX patterns tract runs wrongly (a softmax between int8 dequantize and quantize).
//! - [`graph`]: the layer DAG (kinds, parameters, FLOPs, tensor sizes).
//! - [`cut`]: valid cuts, their crossing tensors, enumeration and sampling.
//! - [`device_clock`]: an emulated device's clock (its thread's CPU time, stretched).
//! - [`engine`]: the backend trait a half is loaded, run and profiled behind; tract, and onnxruntime (feature `onnxruntime`).
//! - [`split`]: prefix and suffix plans per cut, cached (bounded in weight bytes).
//! - [`tier`]: three-part execution (watch, phone, edge server): the phone's middle part, the edge's suffix as ONNX.
//! - [`lru`]: a map bounded in bytes, least recently used out first.
//! - [`check`]: split execution compared with the unsplit model.
//! - [`quanta`]: the quantum of a quantized model's tensors (a split check judges them in quanta too).
//! - [`profile`]: per-node timing and the additivity check.
//! - [`wire`]: tract tensors as the wire's tract-free tensors, and back.
//!
//! # Example: split execution by hand
//! ```
//! use tandem_core::{Cut, InputShapes, Model, SplitExecutor};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let bytes = tandem_models::tiny::tiny_mlp_onnx();
//! let model = Model::from_bytes(&bytes, &InputShapes::none())?;
//! let graph = model.graph();
//! // Run the first layer on the wearable and the rest on the handheld.
//! let cut = Cut::new(graph, [0])?;
//! let executor = SplitExecutor::new(model.clone());
//! let plan = executor.plan(&cut)?;
//! let inputs = tandem_core::check::random_inputs(&model, 7)?;
//! let up = plan.run_prefix(graph, &inputs)?;       // on the wearable
//! let outputs = plan.run_suffix(graph, &up)?;      // on the handheld
//! let unsplit = tandem_core::split::full_plan(&model)?.run(graph, &inputs)?;
//! let d = tandem_core::check::diff(&unsplit["y"], &outputs["y"])?;
//! assert!(d.ok());
//! # Ok(())
//! # }
//! ```

pub mod budget;
pub mod card;
pub mod check;
mod concretize;
pub mod cut;
pub mod device_clock;
pub mod engine;
pub mod error;
pub mod graph;
pub mod guard;
pub mod lru;
pub mod model;
pub mod npy;
pub mod profile;
pub mod quanta;
pub mod sensor;
pub mod split;
pub mod tier;
pub mod wire;
mod workaround;

pub use cut::{cuts_to_check, enumerate_cuts, sample_cuts, sampled_cuts_to_check, Cut, CutKey};
pub use engine::{Engine, EngineChoice, Engines};
pub use error::{Error, Result};
pub use graph::{LayerGraph, LayerKind, LayerNode, NodeId, TensorId};
pub use model::{InputShapes, Model, ModelLimits};
pub use split::{Sides, SplitExecutor, SplitPlan, Values};
pub use tract_onnx::prelude::{DatumType, TValue, Tensor};
