//! Tandem: run ONNX inference split between a wearable and its paired
//! handheld.
//!
//! The wearable runs a prefix of the model's layer DAG (a [`Cut`]), sends the
//! tensors that cross the cut over the link, and the handheld runs the rest.
//! This crate is the library behind both processes.
//!
//! # Layout
//! - [`model`]: loading ONNX with tract, input-shape overrides, refusing bad input.
//! - [`graph`]: the layer DAG (kinds, parameters, FLOPs, tensor sizes).
//! - [`cut`]: valid cuts, their crossing tensors, enumeration and sampling.
//! - [`split`]: prefix and suffix plans per cut, cached.
//! - [`check`]: split execution compared with the unsplit model.
//! - [`profile`]: per-node timing and the additivity check.
//! - [`device`]: device profiles (clusters, V(f), radio power, slowdown) and host detection.
//! - [`predict`]: latency predictors (DeepWear-style DT+LR, EvoLP-style MLP + evolution).
//! - [`energy`]: the cluster-aware energy model and pricing a cut.
//! - [`calibrate`]: fitting the power model from measurements and battery traces.
//! - [`partition`]: pricing layers, min-cut and exhaustive candidates, Algorithm 1.
//! - [`protocol`], [`session`]: the wire format and both sides' protocol state machines (no I/O).
//! - [`link`], [`emulate`]: TCP and in-memory links, and emulated Bluetooth / Wi-Fi.
//! - [`profiler`]: bandwidth, RTT, the handheld's status and batteries, for the planner.
//! - [`client`]: the wearable's [`Session`] (feed, run, fetch, stream); [`server`]: the handheld's.
//!
//! # Example: a paired session
//! The wearable's app feeds inputs, sets a latency hint, runs and fetches,
//! as in TensorFlow; the session splits the model with the handheld. Here
//! the handheld is served in this process over an in-memory link (the
//! binaries use TCP, optionally through an emulated Bluetooth link).
//! ```
//! use std::time::Duration;
//! use tandem::{Cut, InputShapes, ModelFile, Placement, Session, SessionConfig};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let model = ModelFile::from_bytes(tandem::testing::tiny_mlp_onnx(), &InputShapes::none())?;
//! let link = tandem::server::spawn_memory(tandem::server::ServerConfig::default())?;
//! let mut config = SessionConfig::watch_and_phone()?;
//! // Run the first layer on the wearable, the rest on the handheld.
//! config.placement = Placement::Fixed(Cut::new(model.model.graph(), [0])?);
//! let mut s = Session::open(model.clone(), Box::new(link), config)?;
//! let inputs = tandem::check::random_inputs(&model.model, 7)?;
//! s.feed("x", (*inputs["x"]).clone())?;
//! s.set_latency_hint(Some(Duration::from_millis(50)));
//! let report = s.run()?;
//! assert!(report.offloaded, "the handheld answered");
//! let y = s.fetch("y")?;
//!
//! // The same as the unsplit model.
//! let unsplit = tandem::split::full_plan(&model.model)?.run(model.model.graph(), &inputs)?;
//! assert!(tandem::check::diff(&unsplit["y"], &y)?.ok());
//!
//! // A stream: results come back in order, pipelined.
//! let frames: Vec<_> = (0..5).map(|i| tandem::check::random_inputs(&model.model, i)).collect::<Result<_, _>>()?;
//! let results = s.stream(frames)?;
//! assert!(results.windows(2).all(|w| w[0].0.frame < w[1].0.frame));
//! # Ok(())
//! # }
//! ```
//!
//! # Example: split execution by hand
//! ```
//! use tandem::{Cut, InputShapes, Model, SplitExecutor};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let bytes = tandem::testing::tiny_mlp_onnx();
//! let model = Model::from_bytes(&bytes, &InputShapes::none())?;
//! let graph = model.graph();
//! // Run the first layer on the wearable and the rest on the handheld.
//! let cut = Cut::new(graph, [0])?;
//! let executor = SplitExecutor::new(model.clone());
//! let plan = executor.plan(&cut)?;
//! let inputs = tandem::check::random_inputs(&model, 7)?;
//! let up = plan.run_prefix(graph, &inputs)?;       // on the wearable
//! let outputs = plan.run_suffix(graph, &up)?;      // on the handheld
//! let unsplit = tandem::split::full_plan(&model)?.run(graph, &inputs)?;
//! let d = tandem::check::diff(&unsplit["y"], &outputs["y"])?;
//! assert!(d.ok());
//! # Ok(())
//! # }
//! ```

pub mod ble;
pub mod calibrate;
pub mod check;
pub mod client;
pub mod cut;
pub mod device;
pub mod emulate;
pub mod energy;
pub mod error;
pub mod graph;
pub mod link;
pub mod model;
pub mod oracle;
pub mod partition;
pub mod predict;
pub mod profile;
pub mod profiler;
pub mod protocol;
pub mod quota;
pub mod report;
pub mod server;
pub mod session;
pub mod split;
pub mod testing;

pub use client::{ModelFile, Placement, Session, SessionConfig};
pub use cut::{cuts_to_check, enumerate_cuts, sample_cuts, Cut};
pub use error::{Error, Result};
pub use graph::{LayerGraph, LayerKind, LayerNode, NodeId, TensorId};
pub use model::{InputShapes, Model};
pub use split::{SplitExecutor, SplitPlan, Values};
pub use tract_onnx::prelude::{TValue, Tensor};
