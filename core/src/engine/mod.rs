//! Execution backends: the trait behind which a half of a split model (or
//! the whole model) is loaded, optimized, run and profiled.
//!
//! A cut is two ONNX graphs, so any ONNX runtime can run either half.
//! tract is the default and the only engine with no native dependency;
//! onnxruntime (the `onnxruntime` feature) is loaded from its shared
//! library at run time, never downloaded or linked at build time.
//!
//! - `tract`: [`Backend`] over tract's optimized plans, with its
//!   per-node evaluation hook for profiling.
//! - [`onnxruntime`]: [`Backend`] over the `ort` crate, the library found
//!   by path and checked for its version before use.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tract_onnx::pb;
use tract_onnx::prelude::{TValue, TVec};

pub use tandem_types::{Engine, EngineChoice, EngineParseError, Engines};

use crate::error::Result;
use crate::model::Model;

#[cfg(feature = "onnxruntime")]
pub mod onnxruntime;
mod tract;

/// How to get onnxruntime's library, for every error that lacks it.
pub const ONNXRUNTIME_HOW_TO: &str = "install the pinned wheel (python3 -m pip install onnxruntime==1.20.1) \
     and set ORT_DYLIB_PATH to its onnxruntime/capi/libonnxruntime.so.1.20.1, or pass --ort-lib PATH";

/// Loads halves onto one engine.
pub trait Backend: Send + Sync {
    /// Which engine this is.
    fn engine(&self) -> Engine;

    /// Loads and optimizes `proto` (a half cut from `model`, or all of it),
    /// whose inputs and outputs keep the order its graph lists them in;
    /// `what` names it in errors ("the prefix").
    fn load(&self, model: &Model, proto: &pb::ModelProto, what: &str) -> Result<Arc<dyn Runner>>;
}

/// A loaded half, ready to run and to profile. Runs may come from several
/// threads at once.
pub trait Runner: Send + Sync + fmt::Debug {
    /// The engine it runs on.
    fn engine(&self) -> Engine;

    /// Runs on `feed` (one value per input, in order) and returns one value
    /// per output, in order. With `factor` > 1 the run takes that many
    /// times its thread's CPU time in wall-clock time, as a device that
    /// much slower would (the rest is slept; a wait for a core is not
    /// stretched: [`crate::device_clock`]).
    fn run(&self, feed: TVec<TValue>, factor: f64) -> Result<TVec<TValue>>;

    /// `warmup` runs, then `runs` measured ones: the time of every node the
    /// engine executed (its own names and ops, after its own fusions) and
    /// of whole unprofiled runs, alternated so both see the same machine.
    fn profile(&self, feed: &TVec<TValue>, warmup: usize, runs: usize) -> Result<EngineProfile>;
}

/// One executed node of an engine's optimized graph and its median time.
#[derive(Debug, Clone)]
pub struct EngineNode {
    /// The engine's name for the node (derived from the ONNX node names it
    /// was fused from).
    pub name: String,
    /// The engine's op name.
    pub op: String,
    /// Median over the measured runs.
    pub median: Duration,
}

/// What [`Runner::profile`] measured, before it is attributed to ONNX layers.
#[derive(Debug, Clone)]
pub struct EngineProfile {
    /// Every executed node, in execution order.
    pub nodes: Vec<EngineNode>,
    /// Median of whole unprofiled runs.
    pub whole_run: Duration,
    /// Measured runs.
    pub runs: usize,
    /// Characters after which an engine's node name may continue an ONNX
    /// node's name (`conv1.matmatmul` in tract, `conv1_relu_nchwc` in
    /// onnxruntime), for attribution by longest prefix.
    pub name_separators: &'static [char],
}

/// The backend of `engine`, or why this build or this machine has none.
pub fn backend(engine: Engine) -> Result<&'static dyn Backend> {
    match engine {
        Engine::Tract => Ok(&tract::TractBackend),
        Engine::OnnxRuntime => onnxruntime_backend(),
    }
}

#[cfg(feature = "onnxruntime")]
fn onnxruntime_backend() -> Result<&'static dyn Backend> {
    onnxruntime::init()?;
    Ok(&onnxruntime::OrtBackend)
}

#[cfg(not(feature = "onnxruntime"))]
fn onnxruntime_backend() -> Result<&'static dyn Backend> {
    Err(crate::error::Error::EngineUnavailable {
        engine: Engine::OnnxRuntime,
        reason: "this build has no onnxruntime engine (rebuild with the `onnxruntime` feature)".into(),
    })
}

/// Uses onnxruntime's library at `path` (instead of `ORT_DYLIB_PATH`);
/// must come before the engine's first use. Without the `onnxruntime`
/// feature, an error saying so.
pub fn set_onnxruntime_library(path: impl Into<std::path::PathBuf>) -> Result<()> {
    #[cfg(feature = "onnxruntime")]
    return onnxruntime::set_library_path(path);
    #[cfg(not(feature = "onnxruntime"))]
    {
        let _ = path.into();
        onnxruntime_backend().map(|_| ())
    }
}

/// The onnxruntime library this process uses or would use (the
/// configured path, else `ORT_DYLIB_PATH`); `None` without the feature.
pub fn onnxruntime_library() -> Option<std::path::PathBuf> {
    #[cfg(feature = "onnxruntime")]
    return onnxruntime::library_path();
    #[cfg(not(feature = "onnxruntime"))]
    None
}

/// The engine `choice` names, checked to be available here; for
/// [`EngineChoice::Auto`], every available engine is measured with
/// `seconds` (its time for the same work) and the fastest wins (tract on a
/// tie or when only tract is available).
pub fn resolve(choice: EngineChoice, mut seconds: impl FnMut(Engine) -> Result<f64>) -> Result<Engine> {
    match choice {
        EngineChoice::One(e) => backend(e).map(|b| b.engine()),
        EngineChoice::Auto => {
            let mut best = (Engine::Tract, f64::INFINITY);
            for e in available() {
                let s = seconds(e)?;
                tracing::debug!(engine = %e, seconds = s, "engine measured");
                if s < best.1 {
                    best = (e, s);
                }
            }
            Ok(best.0)
        }
    }
}

/// The engines this process can run now: tract always, onnxruntime when
/// the feature is built in and its library loads (why not is logged at debug).
pub fn available() -> Vec<Engine> {
    Engine::ALL
        .into_iter()
        .filter(|&e| match backend(e) {
            Ok(_) => true,
            Err(why) => {
                tracing::debug!(engine = %e, "not available: {why}");
                false
            }
        })
        .collect()
}

/// Loads `proto` on `engine`: [`Backend::load`] on [`backend`]`(engine)`.
pub fn load(engine: Engine, model: &Model, proto: &pb::ModelProto, what: &str) -> Result<Arc<dyn Runner>> {
    backend(engine)?.load(model, proto, what)
}

/// The median of some durations (zero when empty).
pub fn median(samples: &mut [Duration]) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    samples.sort_unstable();
    samples[samples.len() / 2]
}
