//! `tandem-bench soak`: one `tandem-handheld serve` and N `tandem-wearable
//! stream` processes, each paired, streaming over an emulated link through
//! a proxy of this process. With `--faults`, an injector takes turns at
//! killing and restarting the handheld, stalling it (SIGSTOP, SIGCONT),
//! flapping every link, and dropping, corrupting and reordering link bytes.
//! It counts what the wearables delivered (exactly once, in order) and
//! samples the handheld's memory and file descriptors.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde_json::json;
use tandem_tools::testing::HandheldProcess;

/// What the proxies do to the bytes they carry next.
#[derive(Default)]
struct Faults {
    /// Bumped to close every open connection (a link flap).
    generation: AtomicU64,
    /// Chunks to corrupt (one bit), drop, or hold back and send after the next.
    corrupt: AtomicUsize,
    drop: AtomicUsize,
    reorder: AtomicUsize,
    stop: AtomicBool,
}

fn take(n: &AtomicUsize) -> bool {
    n.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| v.checked_sub(1)).is_ok()
}

/// Copies `from` to `to` until either closes or the generation moves;
/// the wearable-to-handheld direction (`faulty`) takes the injected faults.
fn pump(mut from: TcpStream, mut to: TcpStream, faults: Arc<Faults>, generation: u64, faulty: bool) {
    let _ = from.set_read_timeout(Some(Duration::from_millis(100)));
    let mut buf = vec![0u8; 64 << 10];
    let mut held: Option<Vec<u8>> = None;
    loop {
        if faults.generation.load(Ordering::Relaxed) != generation || faults.stop.load(Ordering::Relaxed) {
            break;
        }
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                continue
            }
            Err(_) => break,
        };
        let mut chunk = buf[..n].to_vec();
        if faulty {
            if take(&faults.drop) {
                continue;
            }
            if take(&faults.corrupt) {
                let i = chunk.len() / 2;
                chunk[i] ^= 0x20;
            }
            if held.is_none() && take(&faults.reorder) {
                held = Some(chunk);
                continue;
            }
        }
        if to.write_all(&chunk).is_err() {
            break;
        }
        if let Some(h) = held.take() {
            if to.write_all(&h).is_err() {
                break;
            }
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Both);
    let _ = from.shutdown(std::net::Shutdown::Both);
}

/// A proxy to `target`: its address.
fn proxy(target: String, faults: Arc<Faults>) -> anyhow::Result<String> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?.to_string();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            if faults.stop.load(Ordering::Relaxed) {
                break;
            }
            let Ok(client) = client else { continue };
            // The handheld may be down (killed, restarting): the wearable sees a refused link.
            let Ok(server) = TcpStream::connect(&target) else { continue };
            let generation = faults.generation.load(Ordering::Relaxed);
            let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) else { continue };
            let (f1, f2) = (faults.clone(), faults.clone());
            std::thread::spawn(move || pump(client, server, f1, generation, true));
            std::thread::spawn(move || pump(s2, c2, f2, generation, false));
        }
    });
    Ok(addr)
}

/// The handheld's resident memory (MB) and open file descriptors.
fn usage(pid: u32) -> Option<(f64, usize)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb: f64 =
        status.lines().find(|l| l.starts_with("VmRSS:"))?.split_whitespace().nth(1)?.parse().ok()?;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count();
    Some((kb / 1024.0, fds))
}

fn signal(pid: u32, sig: rustix::process::Signal) {
    if let Some(pid) = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw) {
        let _ = rustix::process::kill_process(pid, sig);
    }
}

/// Frames delivered by one wearable, from its `--frames-out` file:
/// (delivered, offloaded, duplicates, out of order).
fn count(path: &Path) -> anyhow::Result<(usize, usize, usize, usize)> {
    let text = std::fs::read_to_string(path).with_context(|| path.display().to_string())?;
    let mut seen = std::collections::HashSet::new();
    let (mut delivered, mut offloaded, mut dup, mut disorder, mut last) = (0, 0, 0, 0, None::<u64>);
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let j: serde_json::Value = serde_json::from_str(line)?;
        let frame = j["frame"].as_u64().context("a frame number")?;
        delivered += 1;
        offloaded += usize::from(j["offloaded"] == true);
        if !seen.insert(frame) {
            dup += 1;
        }
        if last.is_some_and(|l| frame != l + 1) {
            disorder += 1;
        }
        last = Some(frame);
    }
    Ok((delivered, offloaded, dup, disorder))
}

/// `tandem-bench soak`.
pub fn soak(wearables: usize, seconds: f64, faults_on: bool, fps: f64, out: &Path) -> anyhow::Result<()> {
    if wearables == 0 || !seconds.is_finite() || seconds <= 0.0 || !fps.is_finite() || fps <= 0.0 {
        bail!("--wearables, --seconds and --fps must be positive (and finite)");
    }
    let bins = crate::bins::Bins::beside_me()?;
    eprintln!("tandem-bench soak: {}", bins.describe());
    let (handheld_bin, wearable_bin) = (bins.path("tandem-handheld"), bins.path("tandem-wearable"));
    let model = tandem_models::ensure_models()?.zoo_path("mnist").context("mnist")?.to_path_buf();
    let models_dir = model.parent().context("the zoo")?.to_path_buf();
    let _ = std::fs::remove_dir_all(out);
    std::fs::create_dir_all(out)?;
    // Every wearable paired with the handheld, as a user would.
    let h_keys = out.join("keys/handheld");
    let w_keys: Vec<PathBuf> = (0..wearables).map(|i| out.join(format!("keys/wearable-{i}"))).collect();
    for w in &w_keys {
        tandem_tools::testing::pair_into(&handheld_bin, &wearable_bin, &h_keys, w).context("pairing")?;
    }
    // A fixed port, so that a restarted handheld is found where it was.
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let addr = format!("127.0.0.1:{port}");
    let args = ["--listen", &addr, "--keys", h_keys.to_str().context("path")?, "--models"];
    let models_arg = models_dir.to_str().context("path")?.to_string();
    let start = || -> anyhow::Result<HandheldProcess> {
        let mut a: Vec<&str> = args.to_vec();
        a.push(&models_arg);
        Ok(HandheldProcess::start(&handheld_bin, &a)?)
    };
    let mut handheld = start()?;
    let faults = Arc::new(Faults::default());
    let frames = (seconds * fps).round().max(1.0) as usize;
    let mut children: Vec<Child> = vec![];
    let mut outs = vec![];
    for (i, keys) in w_keys.iter().enumerate() {
        let via = proxy(addr.clone(), faults.clone())?;
        let frames_out = out.join(format!("frames-{i}.jsonl"));
        let child = Command::new(&wearable_bin)
            .args(["stream", "--model"])
            .arg(&model)
            .args(["--connect", &via, "--keys"])
            .arg(keys)
            .args(["--link", "wifi-good", "--placement", "handheld", "--warmup", "0", "--ready-timeout", "5"])
            .args(["--frames", &frames.to_string(), "--fps", &fps.to_string(), "--frames-out"])
            .arg(&frames_out)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(out.join(format!("wearable-{i}.err")))?)
            .spawn()
            .context("tandem-wearable stream")?;
        children.push(child);
        outs.push(frames_out);
    }
    // Memory "at the start": once the model is loaded and the wearables
    // stream (the first sample after 2 s), then its peak to the end.
    let mut rss_start = None;
    let (mut rss_max, mut fds_max, mut rss_end) = (0.0f64, 0usize, 0.0f64);
    // Each handheld process's peak: a leak shows as a rising list, restarts or not.
    let (mut peaks, mut peak) = (vec![], 0.0f64);
    let mut injected: std::collections::BTreeMap<&str, usize> = Default::default();
    let kinds = ["restart", "stall", "flap", "corrupt", "drop", "reorder"];
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(seconds * 3.0 + 60.0);
    let mut next_fault = started + Duration::from_secs(2);
    let mut turn = 0;
    loop {
        if let Some((rss, fds)) = usage(handheld.pid()) {
            if rss_start.is_none() && started.elapsed() >= Duration::from_secs(2) {
                rss_start = Some(rss);
            }
            rss_max = rss_max.max(rss);
            fds_max = fds_max.max(fds);
            rss_end = rss;
            peak = peak.max(rss);
        }
        let running = children.iter_mut().map(|c| c.try_wait()).filter(|w| matches!(w, Ok(None))).count();
        if running == 0 {
            break;
        }
        if Instant::now() > deadline {
            children.iter_mut().for_each(|c| drop(c.kill()));
            bail!("the wearables did not finish within {:?}", deadline - started);
        }
        if faults_on && Instant::now() >= next_fault {
            let kind = kinds[turn % kinds.len()];
            turn += 1;
            match kind {
                "restart" => {
                    peaks.push(peak);
                    peak = 0.0;
                    handheld.kill();
                    handheld = start()?;
                }
                "stall" => {
                    signal(handheld.pid(), rustix::process::Signal::STOP);
                    std::thread::sleep(Duration::from_secs(2));
                    signal(handheld.pid(), rustix::process::Signal::CONT);
                }
                "flap" => {
                    faults.generation.fetch_add(1, Ordering::Relaxed);
                }
                "corrupt" => faults.corrupt.store(wearables, Ordering::Relaxed),
                "drop" => faults.drop.store(wearables, Ordering::Relaxed),
                _ => faults.reorder.store(wearables, Ordering::Relaxed),
            }
            *injected.entry(kind).or_default() += 1;
            next_fault = Instant::now() + Duration::from_secs(3);
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    faults.stop.store(true, Ordering::Relaxed);
    let mut failed = 0;
    for c in &mut children {
        if !c.wait()?.success() {
            failed += 1;
        }
    }
    let (mut delivered, mut offloaded, mut duplicates, mut disorder) = (0, 0, 0, 0);
    for o in &outs {
        let (d, off, dup, dis) = count(o)?;
        delivered += d;
        offloaded += off;
        duplicates += dup;
        disorder += dis;
    }
    peaks.push(peak);
    let peaks: Vec<f64> = peaks.iter().map(|p| (p * 10.0).round() / 10.0).collect();
    let line = json!({
        "wearables": wearables,
        "seconds": seconds,
        "faults": faults_on,
        "frames_fed": frames * wearables,
        "frames_delivered": delivered,
        "frames_offloaded": offloaded,
        "duplicates": duplicates,
        "out_of_order": disorder,
        "wearables_failed": failed,
        "faults_injected": injected,
        "handheld_rss_start_mb": rss_start.unwrap_or(rss_end),
        "handheld_rss_max_mb": rss_max,
        "handheld_rss_end_mb": rss_end,
        "handheld_fds_max": fds_max,
        "handheld_rss_peak_mb_per_process": peaks,
        "wall_s": started.elapsed().as_secs_f64(),
    });
    std::fs::write(out.join("soak.json"), format!("{line}\n"))?;
    println!("{line}");
    Ok(())
}
