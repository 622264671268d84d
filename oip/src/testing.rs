//! A real Open Inference Protocol server on loopback, for tests (this
//! crate's and others'): [`OipServer`] runs `scripts/oip_server.py`
//! (KServe's model server with onnxruntime: every `NAME.onnx` in a
//! directory served as model `NAME`) in the venv `scripts/test.sh`
//! installs, and kills it when dropped.
//!
//! The project's rule for a missing test engine: a test fails when the
//! environment variable `CI` is set, and otherwise prints a loud skip
//! message and passes ([`start_or_skip`] does both).

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use thiserror::Error;

/// How long the server may take to announce itself (KServe starts in
/// about 1.5 s; a loaded 2-core machine is slower).
const START_TIMEOUT: Duration = Duration::from_secs(120);

/// Why a test server did not start.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The engine's venv is not installed.
    #[error(
        "the Open Inference Protocol engine is not installed: no python at {python} (set TANDEM_OIP_PYTHON, \
         or install it: python3 -m venv models/cache/oip-venv && models/cache/oip-venv/bin/pip install \
         --require-hashes -r scripts/oip_server_requirements.txt; scripts/test.sh does this)"
    )]
    NotInstalled {
        /// Where the python was looked for.
        python: PathBuf,
    },
    /// The server was started but did not announce itself.
    #[error("scripts/oip_server.py on {model_dir} did not start: {reason}")]
    Start {
        /// The directory it was to serve.
        model_dir: PathBuf,
        /// What went wrong, with the end of its log.
        reason: String,
    },
}

impl ServerError {
    /// Whether the engine is missing (not a failure to start).
    pub fn is_not_installed(&self) -> bool {
        matches!(self, ServerError::NotInstalled { .. })
    }
}

/// The workspace's root (this crate's parent directory).
pub fn workspace_root() -> PathBuf {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    crate_dir.parent().unwrap_or(crate_dir).to_path_buf()
}

/// The engine's python: `$TANDEM_OIP_PYTHON`, else
/// `<workspace>/models/cache/oip-venv/bin/python`.
pub fn python() -> PathBuf {
    match std::env::var_os("TANDEM_OIP_PYTHON") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => workspace_root().join("models/cache/oip-venv/bin/python"),
    }
}

/// A KServe server on 127.0.0.1 serving a directory of ONNX files, with
/// the repository extension (`--poll 0`: only load and unload calls
/// change what it serves after the start). Killed when dropped.
#[derive(Debug)]
pub struct OipServer {
    child: Option<Child>,
    /// Kept open: the server's stdout (it writes nothing after its announcement).
    _stdout: Option<ChildStdout>,
    url: String,
    grpc_addr: String,
    log: PathBuf,
}

impl OipServer {
    /// Starts `scripts/oip_server.py --model-dir model_dir --port 0
    /// --poll 0` and waits for its `listening on 127.0.0.1:PORT grpc ...`
    /// line. The engine's log goes to a temporary file, whose end a
    /// failure quotes.
    pub fn start(model_dir: &Path) -> Result<OipServer, ServerError> {
        let python = python();
        if !python.is_file() {
            return Err(ServerError::NotInstalled { python });
        }
        static COUNT: AtomicU64 = AtomicU64::new(0);
        let log = std::env::temp_dir().join(format!(
            "tandem-oip-server-{}-{}.log",
            std::process::id(),
            COUNT.fetch_add(1, Ordering::Relaxed)
        ));
        let fail = |reason: String| ServerError::Start { model_dir: model_dir.to_path_buf(), reason };
        let log_file =
            std::fs::File::create(&log).map_err(|e| fail(format!("creating {}: {e}", log.display())))?;
        let script = workspace_root().join("scripts/oip_server.py");
        let mut child = Command::new(&python)
            .arg(&script)
            .arg("--model-dir")
            .arg(model_dir)
            .args(["--port", "0", "--poll", "0"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log_file)
            .spawn()
            .map_err(|e| fail(format!("running {} {}: {e}", python.display(), script.display())))?;
        let Some(stdout) = child.stdout.take() else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(fail("no stdout".into()));
        };
        // The first line, read on a thread so that a silent server times out.
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            let got = reader.read_line(&mut line).map(|_| line);
            let _ = tx.send((got, reader.into_inner()));
        });
        let mut server = OipServer {
            child: Some(child),
            _stdout: None,
            url: String::new(),
            grpc_addr: String::new(),
            log,
        };
        let (line, stdout) = match rx.recv_timeout(START_TIMEOUT) {
            Ok((Ok(line), stdout)) => (line, stdout),
            Ok((Err(e), _)) => return Err(fail(format!("reading its stdout: {e}{}", server.log_tail()))),
            Err(_) => {
                return Err(fail(format!("no announcement within {START_TIMEOUT:?}{}", server.log_tail())));
            }
        };
        server._stdout = Some(stdout);
        let words: Vec<&str> = line.split_whitespace().collect();
        match words[..] {
            ["listening", "on", http, "grpc", grpc] if http.starts_with("127.0.0.1:") => {
                server.url = format!("http://{http}");
                server.grpc_addr = grpc.to_string();
                Ok(server)
            }
            _ => Err(fail(format!("it announced {line:?}{}", server.log_tail()))),
        }
    }

    /// The REST base URL, `http://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The gRPC address, `127.0.0.1:PORT`.
    pub fn grpc_addr(&self) -> &str {
        &self.grpc_addr
    }

    /// Kills the server now (SIGKILL: an edge that dies, not one that
    /// shuts down) and waits for it. Idempotent.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Whether the server process is still running.
    pub fn is_running(&mut self) -> bool {
        self.child.as_mut().is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// The last 2,000 bytes of the engine's log, on a new line (empty if none).
    pub fn log_tail(&self) -> String {
        let mut text = Vec::new();
        if let Ok(mut f) = std::fs::File::open(&self.log) {
            let _ = f.read_to_end(&mut text);
        }
        let from = text.len().saturating_sub(2000);
        let tail = String::from_utf8_lossy(&text[from..]);
        if tail.trim().is_empty() {
            String::new()
        } else {
            format!("\n--- the end of its log ({}):\n{tail}", self.log.display())
        }
    }
}

impl Drop for OipServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// [`OipServer::start`] under the project's rule for a missing engine:
/// `Ok(None)` after a loud skip message on stderr when it is not
/// installed and `CI` is unset; an error when `CI` is set (a test there
/// must not pass without its engine) or the server fails to start.
pub fn start_or_skip(model_dir: &Path, test: &str) -> Result<Option<OipServer>, ServerError> {
    match OipServer::start(model_dir) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.is_not_installed() && std::env::var_os("CI").is_none() => {
            eprintln!("\n!!!!! SKIPPED {test}: {e} !!!!!\n");
            Ok(None)
        }
        Err(e) => Err(e),
    }
}
