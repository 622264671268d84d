//! Test helpers: a handheld child process for end-to-end tests.

/// A `tandem-handheld serve` child process for end-to-end tests: started
/// on a free loopback port (`--listen 127.0.0.1:0` unless `args` names
/// one), killed when dropped.
pub struct HandheldProcess {
    child: std::process::Child,
    /// The address it listens on.
    pub addr: String,
    stdout: std::sync::mpsc::Receiver<String>,
}

impl HandheldProcess {
    /// Starts `bin serve <args>` and waits (up to 60 s) for its "listening on" line.
    pub fn start(bin: &std::path::Path, args: &[&str]) -> std::io::Result<HandheldProcess> {
        use std::io::BufRead;
        let mut cmd = std::process::Command::new(bin);
        cmd.arg("serve");
        if !args.contains(&"--listen") {
            cmd.args(["--listen", "127.0.0.1:0"]);
        }
        cmd.args(args).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::inherit());
        let mut child = cmd.spawn()?;
        let out = child.stdout.take().ok_or_else(|| std::io::Error::other("no stdout"))?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(out).lines().map_while(|l| l.ok()) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    if let Some(addr) = line.strip_prefix("listening on ") {
                        return Ok(HandheldProcess { child, addr: addr.trim().to_string(), stdout: rx });
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
    }
}
