//! Test helpers: a handheld child process for end-to-end tests, pairing
//! two keystores through the real binaries, and finding the shared
//! libraries cargo builds beside a test.

use std::path::{Path, PathBuf};

/// A `tandem-handheld serve` child process for end-to-end tests: started
/// on a free loopback port (`--listen 127.0.0.1:0` unless `args` names
/// one), killed when dropped. Unless `args` names `--keys`, it serves
/// plain links that may push models (`--insecure --insecure-push`) with a
/// keystore of its own in a temporary
/// directory, removed when dropped.
pub struct HandheldProcess {
    child: std::process::Child,
    /// The address it listens on.
    pub addr: String,
    stdout: std::sync::mpsc::Receiver<String>,
    temp_keys: Option<PathBuf>,
}

/// A fresh, empty directory under the system's temporary one.
pub fn temp_dir(what: &str) -> std::io::Result<PathBuf> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "tandem-{what}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// The directory holding the shared library `file` (`libtandem_ffi.so`,
/// `libtandem_jni.so`) that cargo built with the running test: `deps`, next
/// to the test's executable, else the profile directory (`target/debug`).
/// `deps` comes first: `cargo test` builds a cdylib there without copying it
/// up, so the profile directory's may be an older `cargo build`'s.
pub fn library_dir(file: &str) -> std::io::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let deps = exe.parent().ok_or_else(|| std::io::Error::other("the test executable has no directory"))?;
    let found = [deps].into_iter().chain(deps.parent()).find(|dir| dir.join(file).exists());
    found
        .map(Path::to_path_buf)
        .ok_or_else(|| std::io::Error::other(format!("{file} is not next to {}", exe.display())))
}

/// Spawns `cmd` with its stdout read line by line on a thread.
fn spawn_lines(
    cmd: &mut std::process::Command,
) -> std::io::Result<(std::process::Child, std::sync::mpsc::Receiver<String>)> {
    use std::io::BufRead;
    let mut child = cmd.stdout(std::process::Stdio::piped()).spawn()?;
    let out = child.stdout.take().ok_or_else(|| std::io::Error::other("no stdout"))?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines().map_while(|l| l.ok()) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    Ok((child, rx))
}

/// Pairs a handheld keystore (`DIR/handheld`) and a wearable keystore
/// (`DIR/wearable`) through `handheld_bin pair` and `wearable_bin pair`,
/// as a user would: returns both directories.
pub fn pair(handheld_bin: &Path, wearable_bin: &Path, dir: &Path) -> std::io::Result<(PathBuf, PathBuf)> {
    let (h_keys, w_keys) = (dir.join("handheld"), dir.join("wearable"));
    pair_into(handheld_bin, wearable_bin, &h_keys, &w_keys)?;
    Ok((h_keys, w_keys))
}

/// Pairs the wearable keystore `w_keys` with the handheld keystore
/// `h_keys` (each created if missing): one more wearable for a handheld.
pub fn pair_into(
    handheld_bin: &Path,
    wearable_bin: &Path,
    h_keys: &Path,
    w_keys: &Path,
) -> std::io::Result<()> {
    pair_with(handheld_bin, h_keys, |addr, code| {
        std::process::Command::new(wearable_bin)
            .args(["pair", "--connect", addr, "--code", code])
            .arg("--keys")
            .arg(w_keys)
            .output()
    })
}

/// Pairs a phone's edge keystore `phone_edge_keys` with the edge server's
/// keystore `edge_keys` through `handheld_bin pair` (on the edge) and
/// `handheld_bin pair-edge` (on the phone), as an operator would; the
/// pairing named by the edge's serving address `serve_addr` when given.
pub fn pair_edge(
    handheld_bin: &Path,
    edge_keys: &Path,
    phone_edge_keys: &Path,
    serve_addr: Option<&str>,
) -> std::io::Result<()> {
    pair_with(handheld_bin, edge_keys, |addr, code| {
        let mut cmd = std::process::Command::new(handheld_bin);
        cmd.args(["pair-edge", "--connect", addr, "--code", code]).arg("--edge-keys").arg(phone_edge_keys);
        if let Some(a) = serve_addr {
            cmd.args(["--serve-addr", a]);
        }
        cmd.output()
    })
}

/// `handheld_bin pair` into `h_keys`, its address and code handed to
/// `client`, which pairs the other side.
fn pair_with(
    handheld_bin: &Path,
    h_keys: &Path,
    client: impl FnOnce(&str, &str) -> std::io::Result<std::process::Output>,
) -> std::io::Result<()> {
    let mut cmd = std::process::Command::new(handheld_bin);
    cmd.args(["pair", "--listen", "127.0.0.1:0", "--timeout", "60", "--keys"])
        .arg(h_keys)
        .stderr(std::process::Stdio::inherit());
    let (mut child, lines) = spawn_lines(&mut cmd)?;
    let (mut addr, mut code) = (None, None);
    while addr.is_none() || code.is_none() {
        let line = lines.recv_timeout(std::time::Duration::from_secs(60)).map_err(|_| {
            let _ = child.kill();
            std::io::Error::other("`tandem-handheld pair` printed no address and code")
        })?;
        if let Some(a) = line.strip_prefix("listening on ") {
            addr = Some(a.to_string());
        }
        if let Some(c) = line.strip_prefix("pairing code: ") {
            code = Some(c.to_string());
        }
    }
    let wearable = client(addr.as_deref().unwrap_or_default(), code.as_deref().unwrap_or_default())?;
    let handheld = child.wait()?;
    if !wearable.status.success() || !handheld.success() {
        return Err(std::io::Error::other(format!(
            "pairing failed (handheld: {handheld}; its peer: {}: {})",
            wearable.status,
            String::from_utf8_lossy(&wearable.stderr)
        )));
    }
    Ok(())
}

impl HandheldProcess {
    /// Starts `bin serve <args>` and waits (up to 60 s) for its "listening on" line.
    pub fn start(bin: &std::path::Path, args: &[&str]) -> std::io::Result<HandheldProcess> {
        let mut cmd = std::process::Command::new(bin);
        cmd.arg("serve");
        if !args.contains(&"--listen") {
            cmd.args(["--listen", "127.0.0.1:0"]);
        }
        let temp_keys = if args.contains(&"--keys") { None } else { Some(temp_dir("handheld-keys")?) };
        if let Some(dir) = &temp_keys {
            // Plain wearables, pushing their models: the tests' convenience.
            cmd.arg("--insecure").arg("--insecure-push").arg("--keys").arg(dir);
        }
        cmd.args(args).stderr(std::process::Stdio::inherit());
        let (mut child, rx) = spawn_lines(&mut cmd)?;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    if let Some(addr) = line.strip_prefix("listening on ") {
                        let addr = addr.trim().to_string();
                        return Ok(HandheldProcess { child, addr, stdout: rx, temp_keys });
                    }
                }
                Err(_) => {
                    let _ = child.kill();
                    let status = child.wait()?;
                    return Err(std::io::Error::other(format!(
                        "{} serve did not start listening ({status})",
                        bin.display()
                    )));
                }
            }
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills it (SIGKILL) and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends SIGTERM and waits up to `timeout` for it to exit: its exit
    /// status and the stdout lines after "listening on".
    pub fn terminate(
        &mut self,
        timeout: std::time::Duration,
    ) -> std::io::Result<(Option<std::process::ExitStatus>, Vec<String>)> {
        let pid = i32::try_from(self.pid())
            .ok()
            .and_then(rustix::process::Pid::from_raw)
            .ok_or_else(|| std::io::Error::other("the handheld's pid is not a valid pid"))?;
        rustix::process::kill_process(pid, rustix::process::Signal::TERM)?;
        let deadline = std::time::Instant::now() + timeout;
        let status = loop {
            if let Some(s) = self.child.try_wait()? {
                break Some(s);
            }
            if std::time::Instant::now() >= deadline {
                break None;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        let lines = self.stdout.try_iter().collect();
        Ok((status, lines))
    }
}

impl Drop for HandheldProcess {
    fn drop(&mut self) {
        self.kill();
        if let Some(dir) = &self.temp_keys {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}
