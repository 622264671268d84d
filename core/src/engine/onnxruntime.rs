//! The onnxruntime backend, through the `ort` crate with its library loaded
//! at run time: from [`set_library_path`], else `ORT_DYLIB_PATH`. Before
//! `ort` touches it, the library is opened here and its version read, so a
//! missing, broken or too old library is an error naming the path and the
//! version needed, never a panic inside `ort`.
//!
//! Sessions run on one thread (as tract does), on the CPU execution
//! provider, with every graph optimization onnxruntime has. Per-node times
//! come from onnxruntime's own profiler (its JSON trace's `kernel_time`
//! events), attributed to ONNX layers by name.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use ort::session::builder::GraphOptimizationLevel;
use ort::session::{Session, SessionInputValue, SessionInputs};
use ort::tensor::TensorElementType;
use ort::value::{DynValue, Tensor as OrtTensor, ValueType};
use prost::Message;
use tract_onnx::pb;
use tract_onnx::prelude::*;

use super::{median, Backend, Engine, EngineNode, EngineProfile, Runner, ONNXRUNTIME_HOW_TO};
use crate::device_clock::DeviceClock;
use crate::error::{Error, Result};
use crate::model::Model;

/// The library path set by the process (a CLI flag), before first use.
static CONFIGURED: Mutex<Option<PathBuf>> = Mutex::new(None);
/// The outcome of loading the library, once per process: its version, or why not.
static LOADED: OnceLock<std::result::Result<String, String>> = OnceLock::new();

/// Uses the library at `path` instead of `ORT_DYLIB_PATH`; must come before
/// the engine's first use (later, another path is an error naming the
/// library in use; the same one is accepted).
pub fn set_library_path(path: impl Into<PathBuf>) -> Result<()> {
    let path = path.into();
    if LOADED.get().is_some() && library_path().as_deref() != Some(path.as_path()) {
        return Err(unavailable(format!(
            "its library is already loaded from {}; {} comes too late",
            library_path().map_or_else(|| "?".into(), |p| p.display().to_string()),
            path.display()
        )));
    }
    *CONFIGURED.lock().unwrap_or_else(|e| e.into_inner()) = Some(path);
    Ok(())
}

/// The library this process uses (or would): the configured path, else
/// `ORT_DYLIB_PATH`.
pub fn library_path() -> Option<PathBuf> {
    let configured = CONFIGURED.lock().unwrap_or_else(|e| e.into_inner()).clone();
    configured.or_else(|| std::env::var_os("ORT_DYLIB_PATH").filter(|p| !p.is_empty()).map(PathBuf::from))
}

fn unavailable(reason: String) -> Error {
    Error::EngineUnavailable { engine: Engine::OnnxRuntime, reason }
}

/// Loads the library once and returns its version ("1.20.1"), or an error
/// naming the path, what went wrong and how to get a good one.
pub fn init() -> Result<&'static str> {
    let loaded = LOADED.get_or_init(|| {
        let path = library_path().ok_or_else(|| format!("no library given; {ONNXRUNTIME_HOW_TO}"))?;
        if !path.is_file() {
            return Err(format!("no onnxruntime library at {}; {ONNXRUNTIME_HOW_TO}", path.display()));
        }
        // `ort` opens the library itself and panics when it cannot, when
        // it is not onnxruntime or when it is older than 1.20 (each
        // message names the path and the versions): caught here.
        crate::guard::caught_on(
            Engine::OnnxRuntime,
            || format!("loading {}", path.display()),
            || {
                ort::init_from(path.display().to_string())
                    .with_name("tandem")
                    .commit()
                    .map_err(|e| Error::engine(Engine::OnnxRuntime, "creating its environment", e))
            },
        )
        .map_err(|e| format!("{e}; {ONNXRUNTIME_HOW_TO}"))?;
        let version = version_of(ort::info());
        tracing::debug!(path = %path.display(), version, "onnxruntime loaded");
        Ok(version)
    });
    loaded.as_deref().map_err(|why| unavailable(why.clone()))
}

/// The release in onnxruntime's build string (`git-branch=rel-1.20.1, ...`).
fn version_of(build_info: &str) -> String {
    build_info
        .split([',', ' '])
        .find_map(|part| part.strip_prefix("git-branch=rel-"))
        .unwrap_or("unknown")
        .to_string()
}

impl Error {
    /// An engine's failure while doing `context`.
    fn engine(engine: Engine, context: impl Into<String>, message: impl std::fmt::Display) -> Error {
        Error::Engine { engine, context: context.into(), message: message.to_string().replace('\n', " ") }
    }
}

/// onnxruntime's CPU execution provider.
pub(crate) struct OrtBackend;

impl Backend for OrtBackend {
    fn engine(&self) -> Engine {
        Engine::OnnxRuntime
    }

    fn load(&self, _model: &Model, proto: &pb::ModelProto, what: &str) -> Result<Arc<dyn Runner>> {
        let bytes = proto.encode_to_vec();
        let session = session(&bytes, None, what)?;
        let inputs = session.inputs.iter().map(|i| i.name.clone()).collect();
        let outputs = session.outputs.iter().map(|o| o.name.clone()).collect();
        Ok(Arc::new(OrtRunner { session, bytes, inputs, outputs, what: what.to_string() }))
    }
}

/// A session on one thread with every optimization, profiled into
/// `profile` when given.
fn session(bytes: &[u8], profile: Option<&Path>, what: &str) -> Result<Session> {
    let fail = |e: ort::Error| Error::engine(Engine::OnnxRuntime, format!("loading {what}"), e);
    crate::guard::caught_on(
        Engine::OnnxRuntime,
        || format!("loading {what}"),
        || {
            let mut builder = Session::builder()
                .and_then(|b| b.with_optimization_level(GraphOptimizationLevel::Level3))
                .and_then(|b| b.with_intra_threads(1))
                .and_then(|b| b.with_inter_threads(1))
                .map_err(fail)?;
            if let Some(p) = profile {
                builder = builder.with_profiling(p).map_err(fail)?;
            }
            builder.commit_from_memory(bytes).map_err(fail)
        },
    )
}

/// A loaded onnxruntime session.
struct OrtRunner {
    session: Session,
    /// The half's ONNX bytes, for a profiling session.
    bytes: Vec<u8>,
    inputs: Vec<String>,
    outputs: Vec<String>,
    what: String,
}

impl std::fmt::Debug for OrtRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OrtRunner")
            .field("what", &self.what)
            .field("inputs", &self.inputs)
            .field("outputs", &self.outputs)
            .finish_non_exhaustive()
    }
}

impl OrtRunner {
    fn run_on(&self, session: &Session, feed: &TVec<TValue>) -> Result<TVec<TValue>> {
        if feed.len() != self.inputs.len() {
            return Err(Error::engine(
                Engine::OnnxRuntime,
                format!("running {}", self.what),
                format!("{} inputs fed, {} expected", feed.len(), self.inputs.len()),
            ));
        }
        let mut named = Vec::with_capacity(feed.len());
        for (name, value) in self.inputs.iter().zip(feed) {
            named.push((
                std::borrow::Cow::Borrowed(name.as_str()),
                SessionInputValue::from(to_ort(name, value)?),
            ));
        }
        let context = || format!("running {}", self.what);
        crate::guard::caught_on(
            Engine::OnnxRuntime,
            || format!("running {}", self.what),
            || {
                let out = session
                    .run(SessionInputs::from(named))
                    .map_err(|e| Error::engine(Engine::OnnxRuntime, context(), e))?;
                self.outputs
                    .iter()
                    .map(|name| {
                        let v = out.get(name.as_str()).ok_or_else(|| Error::MissingTensor(name.clone()))?;
                        from_ort(name, v).map(IntoTValue::into_tvalue)
                    })
                    .collect()
            },
        )
    }
}

impl Runner for OrtRunner {
    fn engine(&self) -> Engine {
        Engine::OnnxRuntime
    }

    fn run(&self, feed: TVec<TValue>, factor: f64) -> Result<TVec<TValue>> {
        // onnxruntime runs a session whole (on this thread: one intra-op
        // thread), so it is stretched whole.
        let mut clock = DeviceClock::start(factor);
        let out = clock.time(|| self.run_on(&self.session, &feed))?;
        clock.finish();
        Ok(out)
    }

    fn profile(&self, feed: &TVec<TValue>, warmup: usize, runs: usize) -> Result<EngineProfile> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let prefix = std::env::temp_dir().join(format!(
            "tandem-ort-profile-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let profiled = session(&self.bytes, Some(&prefix), &self.what)?;
        let runs = runs.max(1);
        let mut whole = Vec::with_capacity(runs);
        for i in 0..warmup + runs {
            self.run_on(&profiled, feed)?;
            let started = Instant::now();
            self.run_on(&self.session, feed)?;
            if i >= warmup {
                whole.push(started.elapsed());
            }
        }
        let file = profiled
            .end_profiling()
            .map_err(|e| Error::engine(Engine::OnnxRuntime, "ending the profile", e))?;
        let trace = std::fs::read(&file);
        // The trace is ours alone: remove it whether or not it reads.
        let _ = std::fs::remove_file(&file);
        let trace = trace.map_err(|source| Error::Io { path: PathBuf::from(&file), source })?;
        let nodes = nodes_of_trace(&trace, warmup)?;
        Ok(EngineProfile { nodes, whole_run: median(&mut whole), runs, name_separators: &['.', '#', '_'] })
    }
}

/// The kernel times in an onnxruntime profiling trace, per node: the first
/// `warmup` runs of each node dropped, the median of the rest, in the order
/// the nodes first ran.
fn nodes_of_trace(trace: &[u8], warmup: usize) -> Result<Vec<EngineNode>> {
    #[derive(serde::Deserialize)]
    struct Event {
        #[serde(default)]
        cat: String,
        #[serde(default)]
        name: String,
        #[serde(default)]
        dur: u64,
        #[serde(default)]
        args: serde_json::Map<String, serde_json::Value>,
    }
    let events: Vec<Event> = serde_json::from_slice(trace)
        .map_err(|e| Error::engine(Engine::OnnxRuntime, "reading its profile", e))?;
    let mut order: Vec<(String, String)> = vec![];
    let mut samples: std::collections::HashMap<String, Vec<Duration>> = Default::default();
    for e in events {
        let Some(node) = e.name.strip_suffix("_kernel_time").filter(|_| e.cat == "Node") else { continue };
        let entry = samples.entry(node.to_string()).or_insert_with(|| {
            let op = e.args.get("op_name").and_then(|v| v.as_str()).unwrap_or("?").to_string();
            order.push((node.to_string(), op));
            vec![]
        });
        entry.push(Duration::from_micros(e.dur));
    }
    Ok(order
        .into_iter()
        .map(|(name, op)| {
            let mut s = samples.remove(&name).unwrap_or_default();
            let skip = warmup.min(s.len().saturating_sub(1));
            let median = median(&mut s[skip..]);
            EngineNode { name, op, median }
        })
        .collect())
}

/// A tract value as an onnxruntime tensor (copied).
fn to_ort(name: &str, v: &TValue) -> Result<DynValue> {
    let shape: Vec<i64> = v.shape().iter().map(|&d| d as i64).collect();
    let read = |e: TractError| Error::engine(Engine::OnnxRuntime, format!("reading '{name}'"), e);
    let pass = |e: ort::Error| Error::engine(Engine::OnnxRuntime, format!("passing '{name}'"), e);
    macro_rules! copy {
        ($t:ty, $v:expr) => {{
            let data: Vec<$t> = $v.to_plain_array_view::<$t>().map_err(read)?.iter().copied().collect();
            OrtTensor::from_array((shape, data)).map(|t| t.into_dyn()).map_err(pass)
        }};
    }
    match v.datum_type() {
        DatumType::F32 => copy!(f32, v),
        DatumType::F64 => copy!(f64, v),
        DatumType::I64 => copy!(i64, v),
        DatumType::I32 => copy!(i32, v),
        DatumType::I16 => copy!(i16, v),
        DatumType::I8 => copy!(i8, v),
        DatumType::U8 => copy!(u8, v),
        DatumType::U16 => copy!(u16, v),
        DatumType::U32 => copy!(u32, v),
        DatumType::U64 => copy!(u64, v),
        DatumType::Bool => copy!(bool, v),
        DatumType::TDim => copy!(i64, v.cast_to::<i64>().map_err(read)?),
        other => Err(Error::TensorMismatch {
            name: name.to_string(),
            expected: "a tensor type onnxruntime takes here (float, integer or bool)".into(),
            got: format!("{other:?}"),
        }),
    }
}

/// An onnxruntime output as a tract tensor (copied).
fn from_ort(name: &str, v: &DynValue) -> Result<Tensor> {
    let bad = |what: String| Error::engine(Engine::OnnxRuntime, format!("reading output '{name}'"), what);
    let ValueType::Tensor { ty, .. } = v.dtype() else {
        return Err(bad(format!("it is a {:?}, not a tensor", v.dtype())));
    };
    macro_rules! copy {
        ($t:ty) => {{
            let (dims, data) = v.try_extract_raw_tensor::<$t>().map_err(|e| bad(e.to_string()))?;
            let shape: Vec<usize> = dims.iter().map(|&d| usize::try_from(d).unwrap_or(0)).collect();
            Tensor::from_shape(&shape, data).map_err(|e| bad(e.to_string()))
        }};
    }
    match ty {
        TensorElementType::Float32 => copy!(f32),
        TensorElementType::Float64 => copy!(f64),
        TensorElementType::Int64 => copy!(i64),
        TensorElementType::Int32 => copy!(i32),
        TensorElementType::Int16 => copy!(i16),
        TensorElementType::Int8 => copy!(i8),
        TensorElementType::Uint8 => copy!(u8),
        TensorElementType::Uint16 => copy!(u16),
        TensorElementType::Uint32 => copy!(u32),
        TensorElementType::Uint64 => copy!(u64),
        TensorElementType::Bool => copy!(bool),
        other => Err(bad(format!("its type {other} is not supported here"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trace_gives_each_nodes_median_after_warmup() {
        let trace = br#"[
            {"cat":"Session","name":"model_run","dur":900},
            {"cat":"Node","name":"conv1_relu_nchwc_fence_before","dur":0},
            {"cat":"Node","name":"conv1_relu_nchwc_kernel_time","dur":500,"args":{"op_name":"Conv"}},
            {"cat":"Node","name":"fc_kernel_time","dur":40,"args":{"op_name":"Gemm"}},
            {"cat":"Node","name":"conv1_relu_nchwc_kernel_time","dur":100,"args":{"op_name":"Conv"}},
            {"cat":"Node","name":"fc_kernel_time","dur":20,"args":{"op_name":"Gemm"}},
            {"cat":"Node","name":"conv1_relu_nchwc_kernel_time","dur":120,"args":{"op_name":"Conv"}},
            {"cat":"Node","name":"fc_kernel_time","dur":30,"args":{"op_name":"Gemm"}},
            {"cat":"Node","name":"conv1_relu_nchwc_kernel_time","dur":110,"args":{"op_name":"Conv"}},
            {"cat":"Node","name":"fc_kernel_time","dur":25,"args":{"op_name":"Gemm"}}
        ]"#;
        let nodes = nodes_of_trace(trace, 1).expect("parses");
        let got: Vec<(&str, &str, u128)> =
            nodes.iter().map(|n| (n.name.as_str(), n.op.as_str(), n.median.as_micros())).collect();
        assert_eq!(got, vec![("conv1_relu_nchwc", "Conv", 110), ("fc", "Gemm", 25)]);
        assert!(nodes_of_trace(b"{not json", 0).is_err());
    }

    #[test]
    fn the_release_is_read_from_the_build_string() {
        let info = "ORT Build Info: git-branch=rel-1.20.1, git-commit-id=5c1b7cc, build type=Release";
        assert_eq!(version_of(info), "1.20.1");
        assert_eq!(version_of("ORT Build Info: git-branch=main"), "unknown");
    }
}
