//! Models from peers loaded where tract cannot take the server down. A
//! child process (the handheld's own binary, `tandem-handheld
//! sandbox-load`) sets memory and CPU-time limits on itself (rlimits),
//! then loads, optimizes and profiles the model, and reports its latency
//! profile as one JSON line. An allocation over the limit aborts the
//! child, a panic ends it, a load past its deadline is killed: the server
//! reads a reason to send the peer, and keeps serving. Catching unwinds in
//! the server would not be enough, since a failed allocation aborts.
//!
//! The parent writes one JSON line (the input-shape overrides and the
//! limits), then the model's bytes, to the child's standard input.

use std::io::{self, BufRead, Read, Write};
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::engine::EngineChoice;
use crate::{InputShapes, Model, ModelLimits};
use tandem_plan::predict::{EngineProfile, ProfiledLatency, Spacing};
use tandem_proto::protocol::LatencySummary;

/// How to run a load in a child process, and its limits.
#[derive(Clone, Debug)]
pub struct Sandbox {
    /// The program that runs [`child_main`]: `tandem-handheld`.
    pub program: PathBuf,
    /// Its arguments before the request (`sandbox-load`).
    pub args: Vec<String>,
    /// Memory the child may allocate (its data segment: heap and private
    /// writable mappings), bytes.
    pub max_memory_bytes: u64,
    /// CPU time the child may use (above `deadline`, so that a load past
    /// its deadline is told so; the CPU limit catches what the wall clock
    /// cannot, such as a child that forks).
    pub max_cpu: Duration,
    /// Wall time before the child is killed (a peer's cap on load time).
    pub deadline: Duration,
}

/// What the child is asked.
#[derive(Serialize, Deserialize)]
struct Request {
    shapes: Vec<String>,
    dims: Vec<String>,
    max_tensor_bytes: u64,
    max_working_bytes: u64,
    max_memory_bytes: u64,
    max_cpu_s: u64,
    /// The profile's seconds are multiplied by this (the handheld's slowdown).
    scale: f64,
    /// The engine to load and profile on (`auto`: the faster).
    engine: EngineChoice,
    /// onnxruntime's library, when the parent was given one.
    ort_lib: Option<std::path::PathBuf>,
}

/// What the child answers.
#[derive(Serialize, Deserialize)]
enum Report {
    Loaded { latency: LatencySummary, working_bytes: u64 },
    Refused { reason: String },
}

/// Why a sandboxed load gave no profile.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The child could not be started or fed.
    #[error("could not run the model's sandbox ({program}): {source}")]
    Spawn {
        /// The program.
        program: String,
        /// Why.
        source: io::Error,
    },
    /// The model was refused or failed to load (the child's reason).
    #[error("{0}")]
    Refused(String),
    /// The load passed its deadline and was stopped.
    #[error("loading the model took longer than {0:?}: stopped")]
    Deadline(Duration),
    /// The child ended without a report.
    #[error("loading the model was stopped: {0}")]
    Killed(String),
}

/// Why the child refused a load: its report's reason, in words.
#[derive(Debug, thiserror::Error)]
enum ChildError {
    /// The request line could not be read from standard input.
    #[error("reading the request: {0}")]
    ReadRequest(#[source] io::Error),
    /// The request line is not a request.
    #[error("a bad request: {0}")]
    BadRequest(#[source] serde_json::Error),
    /// An rlimit could not be set.
    #[error("the sandbox could not limit itself ({resource}): {source}")]
    Limit {
        /// The resource, as rustix names it.
        resource: String,
        /// Why.
        source: io::Error,
    },
    /// This OS has no rlimits to sandbox with.
    #[cfg(not(unix))]
    #[error("the model sandbox needs rlimits (Unix)")]
    NoRlimits,
    /// The model's bytes could not be read from standard input.
    #[error("reading the model: {0}")]
    ReadModel(#[source] io::Error),
    /// The shapes, the model's load or its profile failed.
    #[error(transparent)]
    Model(#[from] crate::ModelError),
}

/// Loads and profiles `bytes` in a child process under `sandbox`'s
/// limits: the model's latency profile (scaled by `scale`) and its working
/// set in bytes, or why not.
pub fn profile_in_child(
    sandbox: &Sandbox,
    bytes: &[u8],
    shapes: &InputShapes,
    limits: &ModelLimits,
    scale: f64,
    engine: EngineChoice,
) -> Result<(LatencySummary, u64), SandboxError> {
    let spawn_error = |source| SandboxError::Spawn { program: sandbox.program.display().to_string(), source };
    let (specs, dims) = shapes.to_specs();
    let request = Request {
        shapes: specs,
        dims,
        max_tensor_bytes: limits.max_tensor_bytes,
        max_working_bytes: limits.max_working_bytes,
        max_memory_bytes: sandbox.max_memory_bytes,
        max_cpu_s: sandbox.max_cpu.as_secs().max(1),
        scale,
        engine,
        ort_lib: tandem_core::engine::onnxruntime_library(),
    };
    let mut child = Command::new(&sandbox.program)
        .args(&sandbox.args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_remove("RUST_LOG")
        .spawn()
        .map_err(spawn_error)?;
    let started = Instant::now();
    // Fed and read on threads of their own, so that a child that stops
    // reading or writing cannot hold this one past the deadline.
    let mut stdin = child.stdin.take().expect("piped");
    let mut line = serde_json::to_vec(&request).expect("a request serializes");
    line.push(b'\n');
    let model = bytes.to_vec();
    let feeder = std::thread::spawn(move || stdin.write_all(&line).and_then(|()| stdin.write_all(&model)));
    let (mut stdout, stderr) = (child.stdout.take().expect("piped"), child.stderr.take().expect("piped"));
    let reader = std::thread::spawn(move || {
        let mut out = vec![];
        let _ = stdout.by_ref().take(64 << 20).read_to_end(&mut out);
        out
    });
    let errors = std::thread::spawn(move || {
        let mut err = vec![];
        let _ = stderr.take(64 << 10).read_to_end(&mut err);
        err
    });
    let status = loop {
        let waited = child.try_wait();
        if waited.is_err() {
            let _ = child.kill();
            let _ = child.wait();
        }
        match waited.map_err(spawn_error)? {
            Some(status) => break status,
            None if started.elapsed() > sandbox.deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(SandboxError::Deadline(sandbox.deadline));
            }
            None => std::thread::sleep(Duration::from_millis(5)),
        }
    };
    let _ = feeder.join();
    let out = reader.join().unwrap_or_default();
    let err = errors.join().unwrap_or_default();
    match serde_json::from_slice::<Report>(out.trim_ascii()) {
        Ok(Report::Loaded { latency, working_bytes }) => Ok((latency, working_bytes)),
        Ok(Report::Refused { reason }) => Err(SandboxError::Refused(reason)),
        Err(_) => Err(SandboxError::Killed(ended(status, &err, sandbox))),
    }
}

/// Why a child ended without a report, in words.
fn ended(status: std::process::ExitStatus, stderr: &[u8], sandbox: &Sandbox) -> String {
    let last =
        String::from_utf8_lossy(stderr).lines().rev().find(|l| !l.trim().is_empty()).map(str::to_string);
    let said =
        last.map(|l| format!(" (it said: {})", l.chars().take(300).collect::<String>())).unwrap_or_default();
    let mib = sandbox.max_memory_bytes >> 20;
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        match status.signal() {
            Some(6) => {
                return format!(
                    "it aborted, which is how an allocation past the sandbox's {mib} MiB ends{said}"
                )
            }
            Some(9 | 24) => {
                return format!(
                    "it used up the sandbox's {} s of CPU time{said}",
                    sandbox.max_cpu.as_secs().max(1)
                )
            }
            Some(s) => return format!("the sandbox's process was killed by signal {s}{said}"),
            None => {}
        }
    }
    format!("the sandbox's process ended ({status}) without a report{said}")
}

/// The child's side (`tandem-handheld sandbox-load`): limits itself, reads
/// the request and the model from standard input, loads and profiles it,
/// and prints its report. Exit code 0 with a report, 2 without.
pub fn child_main() -> ExitCode {
    let report = match child() {
        Ok(report) => report,
        // The reason travels to the parent as text: its one JSON line.
        Err(e) => Report::Refused { reason: e.to_string() },
    };
    match serde_json::to_string(&report) {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: the report does not serialize: {e}");
            ExitCode::from(2)
        }
    }
}

fn child() -> Result<Report, ChildError> {
    let mut input = io::stdin().lock();
    let mut line = vec![];
    input.by_ref().take(1 << 20).read_until(b'\n', &mut line).map_err(ChildError::ReadRequest)?;
    let request: Request = serde_json::from_slice(&line).map_err(ChildError::BadRequest)?;
    limit_self(request.max_memory_bytes, request.max_cpu_s)?;
    if let Some(lib) = &request.ort_lib {
        tandem_core::engine::set_onnxruntime_library(lib)?;
    }
    let mut bytes = vec![];
    input
        .take(tandem_proto::session::MAX_MODEL_BYTES)
        .read_to_end(&mut bytes)
        .map_err(ChildError::ReadModel)?;
    let shapes =
        InputShapes::parse_with_dims(&request.shapes, &request.dims).map_err(crate::ModelError::from)?;
    let limits = ModelLimits {
        max_tensor_bytes: request.max_tensor_bytes,
        max_working_bytes: request.max_working_bytes,
    };
    let model = Model::from_bytes_within(&bytes, &shapes, &limits)?;
    let latency = profile(&model, request.scale, request.engine)?;
    Ok(Report::Loaded { latency, working_bytes: model.working_bytes() })
}

/// The handheld's latency profile of `model` on the engine `engine`
/// names (`auto`: each engine it has is profiled, and the faster whole
/// model kept): each layer's seconds and the per-run overhead from one
/// warm-up and three measured runs on random inputs, scaled to a served
/// frame's time ([`ProfiledLatency::measure_all`]), then multiplied
/// by `scale`.
pub fn profile(model: &Model, scale: f64, engine: EngineChoice) -> tandem_core::Result<LatencySummary> {
    let inputs = tandem_core::check::random_inputs(model, 1)?;
    let (chosen, others) =
        ProfiledLatency::measure_all(model, engine, &inputs, (1, 3), Some(Spacing::SERVED))?;
    let EngineProfile { engine, latency: p, served_scale } = chosen;
    tracing::debug!(%engine, served = format!("{served_scale:.2}x back-to-back runs"), "profiled as served");
    let scaled =
        |p: &ProfiledLatency| (p.per_node_s.iter().map(|s| s * scale).collect(), p.overhead_s * scale);
    let (per_layer_s, overhead_s) = scaled(&p);
    let others = others
        .iter()
        .map(|other| {
            let (per_layer_s, overhead_s) = scaled(&other.latency);
            tandem_proto::protocol::EngineLatency { engine: other.engine, per_layer_s, overhead_s }
        })
        .collect();
    Ok(LatencySummary { per_layer_s, overhead_s, engine, others })
}

/// Sets this process's data-segment and CPU-time limits.
#[cfg(unix)]
fn limit_self(memory: u64, cpu_s: u64) -> Result<(), ChildError> {
    use rustix::process::{setrlimit, Resource, Rlimit};
    let set = |resource: Resource, soft: u64, hard: u64| {
        setrlimit(resource, Rlimit { current: Some(soft), maximum: Some(hard) })
            .map_err(|e| ChildError::Limit { resource: format!("{resource:?}"), source: e.into() })
    };
    set(Resource::Data, memory, memory)?;
    // An abort past the memory limit is the expected end: no core dump.
    set(Resource::Core, 0, 0)?;
    // SIGXCPU at the soft limit, SIGKILL a second later.
    set(Resource::Cpu, cpu_s, cpu_s + 1)
}

#[cfg(not(unix))]
fn limit_self(_: u64, _: u64) -> Result<(), ChildError> {
    Err(ChildError::NoRlimits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shell(script: &str, deadline_ms: u64) -> Sandbox {
        Sandbox {
            program: "sh".into(),
            args: vec!["-c".into(), script.into()],
            max_memory_bytes: 1 << 30,
            max_cpu: Duration::from_secs(5),
            deadline: Duration::from_millis(deadline_ms),
        }
    }

    fn load(s: &Sandbox) -> Result<(LatencySummary, u64), SandboxError> {
        profile_in_child(
            s,
            b"model",
            &InputShapes::none(),
            &ModelLimits::default(),
            1.0,
            EngineChoice::default(),
        )
    }

    #[test]
    fn a_child_that_aborts_hangs_or_refuses_is_a_reason_and_a_report_is_read() {
        let err = load(&shell(
            "cat >/dev/null; echo 'memory allocation of 8 bytes failed' >&2; kill -ABRT $$",
            10_000,
        ))
        .expect_err("aborted");
        let text = err.to_string();
        assert!(matches!(err, SandboxError::Killed(_)) && text.contains("aborted"), "{text}");
        assert!(text.contains("memory allocation of 8 bytes failed"), "{text}");
        let started = Instant::now();
        let err = load(&shell("sleep 30", 300)).expect_err("stopped");
        assert!(matches!(err, SandboxError::Deadline(_)), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
        let err =
            load(&shell(r#"cat >/dev/null; echo '{"Refused":{"reason":"tensor x is too big"}}'"#, 10_000))
                .expect_err("refused");
        assert_eq!(err.to_string(), "tensor x is too big");
        let ok = r#"cat >/dev/null; echo '{"Loaded":{"latency":{"per_layer_s":[0.5],"overhead_s":0.1,"engine":"tract"},"working_bytes":7}}'"#;
        let (latency, bytes) = load(&shell(ok, 10_000)).expect("a report");
        assert_eq!((latency.per_layer_s, latency.overhead_s, bytes), (vec![0.5], 0.1, 7));
        let err = load(&shell("exit 3", 10_000)).expect_err("no report");
        assert!(err.to_string().contains("without a report"), "{err}");
        let missing = Sandbox { program: "/nonexistent/tandem".into(), ..shell("", 100) };
        assert!(matches!(load(&missing), Err(SandboxError::Spawn { .. })));
    }
}
