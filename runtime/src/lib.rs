//! Tandem: run ONNX inference split between a wearable and its paired
//! handheld.
//!
//! The wearable runs a prefix of the model's layer DAG (a [`Cut`]), sends the
//! tensors that cross the cut over the link, and the handheld runs the rest.
//! This crate is the library behind both processes.
//!
//! # Layout
//! This crate is the I/O shell around the crates without I/O, re-exported
//! here so that an app needs one import (`tandem_types` holds the plain
//! data they share, the protocol's tensors among them):
//! - [`tandem_core`] ([`model`], [`graph`], [`cut`], [`split`], [`check`], [`quanta`], [`profile`]):
//!   models, the layer DAG, cuts and exact split execution.
//! - [`tandem_plan`] ([`device`], [`predict`], [`energy`], [`partition`], [`calibrate`]):
//!   profiles, predictors, the energy model and the partitioner.
//! - [`tandem_proto`] ([`protocol`], [`session`], [`profiler`]): the wire format, both
//!   sides' state machines and the profiler, with time passed in; no tract.
//! - [`encoding`]: the protocol's tensor encodings on tract's tensors.
//!
//! Its own modules do the I/O:
//! - [`sandbox`]: peers' models loaded and profiled in a child process with rlimits.
//! - [`link`], [`emulate`], [`ble`]: TCP and in-memory links, emulated Bluetooth / Wi-Fi, BLE.
//! - [`client`]: the wearable's [`Session`] (feed, run, fetch, stream); [`server`]: the handheld's.
//! - [`secure`]: pairing on a 6-digit code and encrypted sessions (Noise) over any link.
//! - [`battery`]: the fuel gauge from sysfs.
//! - [`load`]: the handheld's CPU load, generated and measured.
//! - [`cpufreq`]: a DVFS setting applied for real (affinity and cpufreq), restored after.
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
//! let model = ModelFile::from_bytes(tandem_models::tiny::tiny_mlp_onnx(), &InputShapes::none())?;
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
//! // A stream: results come back in order, pipelined, one result per frame.
//! let frames: Vec<_> = (0..5).map(|i| tandem::check::random_inputs(&model.model, i)).collect::<Result<_, _>>()?;
//! let results = s.stream(frames)?;
//! let numbers: Vec<u64> = results.into_iter().map(|r| r.map(|f| f.report.frame)).collect::<Result<_, _>>()?;
//! assert!(numbers.windows(2).all(|w| w[0] < w[1]));
//! # Ok(())
//! # }
//! ```

pub mod battery;
pub mod ble;
pub mod client;
pub mod cpufreq;
pub mod emulate;
pub mod encoding;
pub mod error;
pub mod link;
pub mod load;
pub mod sandbox;
pub mod secure;
pub mod server;
pub mod tensor;

pub use tandem_core::{
    card, check, cut, device_clock, engine, graph, model, npy, profile, quanta, split, tier, wire,
};
pub use tandem_plan::{calibrate, device, energy, fuel, partition, predict};
pub use tandem_proto::{profiler, protocol, session};

pub use client::{EnergyWeighing, Frame, FrameReport, ModelFile, Placement, Session, SessionConfig, Status};
pub use error::{Error, ModelError, Result};
pub use tandem_core::{
    cuts_to_check, enumerate_cuts, sample_cuts, sampled_cuts_to_check, Cut, CutKey, InputShapes, LayerGraph,
    LayerKind, LayerNode, Model, ModelLimits, NodeId, Sides, SplitExecutor, SplitPlan, TValue, Tensor,
    TensorId, Values,
};
pub use tensor::{frame, read_f32, tensor_f32, tensor_from_ndarray, tensor_from_slice, Outputs};
