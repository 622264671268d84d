//! Issue 28 as an attacker tried it, on the real binaries: tiny models
//! that declare or compute tensors no phone can hold, pushed to a handheld
//! or named with a huge input-shape override; strangers holding sockets
//! open against a paired wearable and against a pairing; a keystore that
//! lost its key. Each is refused by name, quickly, and the handheld keeps
//! serving its paired wearable, within its memory limits.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{stderr, stdout, wearable};
use tandem::protocol::{encode, model_digest, ErrorCode, FrameDecoder, Header, Message, PROTOCOL_VERSION};
use tandem_models::hostile::hostile_models;
use tandem_tools::testing::{pair, temp_dir, HandheldProcess};

fn handheld_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tandem-wearable")).with_file_name("tandem-handheld")
}

fn wearable_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tandem-wearable"))
}

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8")
}

/// The tiny MLP (input `x` of [1, 4]) written to `dir`.
fn tiny_model(dir: &Path) -> PathBuf {
    let p = dir.join("tiny_mlp.onnx");
    std::fs::write(&p, tandem_models::tiny::tiny_mlp_onnx()).expect("write");
    p
}

/// A plain `Hello` (with these input-shape overrides), then the model's
/// bytes when `push`: every message the handheld sends back until it
/// answers the model (ready or refused) or closes.
fn offer(addr: &str, bytes: &[u8], shapes: &[&str], push: bool) -> Vec<Message> {
    let mut s = TcpStream::connect(addr).expect("connect");
    let hello = Message::new(Header::Hello {
        version: PROTOCOL_VERSION,
        model_digest: model_digest(bytes),
        model_bytes: bytes.len() as u64,
        device: "attacker".into(),
        input_shapes: shapes.iter().map(|s| s.to_string()).collect(),
        dims: vec![],
    });
    s.write_all(&encode(&hello).expect("hello")).expect("write");
    if push {
        let chunk = Message { header: Header::ModelChunk { offset: 0 }, body: bytes.to_vec() };
        s.write_all(&encode(&chunk).expect("chunk")).expect("write");
    }
    s.set_read_timeout(Some(Duration::from_secs(60))).expect("timeout");
    let mut dec = FrameDecoder::new(1 << 30);
    let (mut out, mut buf) = (vec![], vec![0u8; 1 << 16]);
    loop {
        let n = match s.read(&mut buf) {
            Ok(0) | Err(_) => return out,
            Ok(n) => n,
        };
        dec.push(&buf[..n]);
        while let Ok(Some(m)) = dec.next_message() {
            let done = matches!(m.header, Header::Error { .. } | Header::ModelReady { .. });
            out.push(m);
            if done {
                return out;
            }
        }
    }
}

fn refusal(messages: &[Message]) -> (ErrorCode, String) {
    messages
        .iter()
        .find_map(|m| match &m.header {
            Header::Error { code, reason } => Some((*code, reason.clone())),
            _ => None,
        })
        .unwrap_or_else(|| {
            panic!("no refusal among {:?}", messages.iter().map(|m| &m.header).collect::<Vec<_>>())
        })
}

/// The process's peak resident memory (VmHWM), in MiB.
fn peak_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc");
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmHWM");
    kb >> 10
}

/// `tandem-wearable run` of `model`, offloaded to the paired handheld.
fn paired_run(model: &Path, addr: &str, keys: &Path, require_s: &str) -> std::process::Output {
    wearable(&[
        "run",
        "--model",
        path(model),
        "--connect",
        addr,
        "--placement",
        "handheld",
        "--require-handheld",
        require_s,
        "--keys",
        path(keys),
    ])
}

fn assert_offloaded(o: &std::process::Output, what: &str) {
    assert!(o.status.success(), "{what}: {}", stderr(o));
    let out = stdout(o);
    let j: serde_json::Value = serde_json::from_str(out.lines().last().expect("a line")).expect("JSON");
    assert_eq!(j["offloaded"], true, "{what}: {j}");
}

/// A paired handheld serving the tiny model from `--models`, taking
/// plain pushes too (the attacker's way in), with `extra` flags: its temp
/// dir, the wearable's keys, the tiny model's path, and the process.
fn paired_handheld(tag: &str, extra: &[&str]) -> (PathBuf, PathBuf, PathBuf, HandheldProcess) {
    let dir = temp_dir(tag).expect("dir");
    let (h_keys, w_keys) = pair(&handheld_bin(), &wearable_bin(), &dir).expect("pairing");
    let models = dir.join("models");
    std::fs::create_dir_all(&models).expect("dir");
    let tiny = tiny_model(&models);
    let mut args = vec!["--keys", path(&h_keys), "--insecure", "--insecure-push", "--models", path(&models)];
    args.extend_from_slice(extra);
    let server = HandheldProcess::start(&handheld_bin(), &args).expect("server");
    (dir, w_keys, tiny, server)
}

/// Findings 1–5 and 10: every hostile model pushed (and the tiny model
/// named with a 40 GB override) is refused with a named reason, within
/// seconds; a paired wearable is served between attacks; the handheld's
/// own peak memory stays far below what the models ask for.
#[test]
fn hostile_models_are_refused_by_name_and_a_paired_wearable_is_still_served() {
    let (dir, w_keys, tiny, server) = paired_handheld(
        "hostile-models",
        &["--max-loaded-mb", "256", "--max-tensor-mb", "128", "--max-load-s", "20"],
    );
    assert_offloaded(&paired_run(&tiny, &server.addr, &w_keys, "20"), "before");
    for h in hostile_models() {
        let started = Instant::now();
        let (code, reason) = refusal(&offer(&server.addr, &h.bytes, &[], true));
        let took = started.elapsed();
        assert_eq!(code, ErrorCode::Model, "{}: {reason}", h.name);
        match h.culprit {
            // Refused by the size checks: the tensor and the limit named.
            Some(c) => assert!(
                reason.contains(&format!("'{c}'")) && reason.contains("limit"),
                "{}: {reason}",
                h.name
            ),
            // Only tract finds its size while folding it: its allocation
            // fails (in the sandbox, under its memory limit), named.
            None => assert!(reason.contains("too large to allocate"), "{}: {reason}", h.name),
        }
        assert!(took < Duration::from_secs(20), "{}: answered after {took:?}", h.name);
        eprintln!("{} ({} bytes): refused in {took:?}: {reason}", h.name, h.bytes.len());
        assert_offloaded(&paired_run(&tiny, &server.addr, &w_keys, "20"), h.name);
    }
    // Finding 2: a model the handheld serves, named with a 40 GB override.
    let bytes = std::fs::read(&tiny).expect("tiny");
    let (code, reason) = refusal(&offer(&server.addr, &bytes, &["x=100000,100000"], false));
    assert_eq!(code, ErrorCode::Model, "{reason}");
    assert!(reason.contains("'x'") && reason.contains("38147 MiB"), "{reason}");
    // Finding 3: an override whose size overflows.
    let (_, reason) = refusal(&offer(&server.addr, &bytes, &["x=2147483648,2147483648,8"], false));
    assert!(reason.contains("'x'") && reason.contains("overflows"), "{reason}");
    assert_offloaded(&paired_run(&tiny, &server.addr, &w_keys, "20"), "after");
    let peak = peak_mib(server.pid());
    assert!(peak < 256 + 128, "the handheld's peak memory was {peak} MiB");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Finding 5: a model too slow to load is stopped at the handheld's
/// `--max-load-s` and the peer told why, while another wearable's model
/// loads and runs beside it (loads of different models do not queue).
#[test]
fn a_slow_load_is_stopped_at_its_deadline_while_another_wearable_is_served() {
    let (dir, w_keys, tiny, server) = paired_handheld("slow-load", &["--max-load-s", "2"]);
    let slow = tandem_models::hostile::slow_cos(16384);
    let addr = server.addr.clone();
    let started = Instant::now();
    let attack = std::thread::spawn(move || {
        let answer = refusal(&offer(&addr, &slow, &[], true));
        (answer, Instant::now())
    });
    std::thread::sleep(Duration::from_millis(300));
    assert_offloaded(&paired_run(&tiny, &server.addr, &w_keys, "20"), "beside the slow load");
    let served = Instant::now();
    let ((code, reason), refused) = attack.join().expect("the attacker's thread");
    assert_eq!(code, ErrorCode::Model, "{reason}");
    assert!(reason.contains("longer than 2s") && reason.contains("stopped"), "{reason}");
    let stopped = refused - started;
    assert!(stopped < Duration::from_secs(10), "stopped after {stopped:?}");
    eprintln!(
        "the other wearable served after {:?}; the slow load stopped after {stopped:?}: {reason}",
        served - started
    );
    assert!(
        served < refused,
        "the other wearable waited for the slow load ({:?} vs {stopped:?})",
        served - started
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Finding 6 and 3: the wearable's commands refuse the same models with a
/// clear error and exit 2, and print no panic.
#[test]
fn the_wearable_refuses_hostile_models_with_exit_2_and_no_panic() {
    let dir = temp_dir("hostile-wearable").expect("dir");
    for h in hostile_models() {
        let file = dir.join(format!("{}.onnx", h.name));
        std::fs::write(&file, &h.bytes).expect("write");
        // `run` loads the model before it connects (nothing listens there).
        let run = vec!["run", "--model", path(&file), "--connect", "127.0.0.1:9"];
        for args in [vec!["inspect", "--model", path(&file)], run] {
            let o = wearable(&args);
            let err = stderr(&o);
            assert_eq!(o.status.code(), Some(2), "{} {args:?}: {err}", h.name);
            let named = match h.culprit {
                Some(c) => err.contains(&format!("'{c}'")),
                None => err.contains("too large to allocate"),
            };
            assert!(named, "{}: {err}", h.name);
            assert!(!err.contains("panicked at") && !err.contains("backtrace"), "{}: {err}", h.name);
        }
    }
    let tiny = tiny_model(&dir);
    let o = wearable(&["inspect", "--model", path(&tiny), "--input-shape", "x=2147483648,2147483648"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("'x'") && !err.contains("panicked"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Holds `n` idle sockets open to `addr` until `stop`, reopening each as
/// the handheld closes it: what a stranger does to take the slots.
fn strangers(addr: String, n: usize, stop: Arc<AtomicBool>) -> Vec<std::thread::JoinHandle<usize>> {
    (0..n)
        .map(|_| {
            let (addr, stop) = (addr.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut opened = 0;
                while !stop.load(Ordering::Relaxed) {
                    let Ok(mut s) = TcpStream::connect(&addr) else {
                        std::thread::sleep(Duration::from_millis(20));
                        continue;
                    };
                    opened += 1;
                    let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
                    let mut b = [0u8; 64];
                    // Idle until the handheld closes it (or the test ends).
                    while !stop.load(Ordering::Relaxed) {
                        match s.read(&mut b) {
                            Ok(0) => break,
                            Ok(_) => {}
                            Err(e)
                                if matches!(
                                    e.kind(),
                                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                                ) => {}
                            Err(_) => break,
                        }
                    }
                }
                opened
            })
        })
        .collect()
}

/// Findings 7 and 8: 40 strangers holding idle sockets cannot keep a
/// paired wearable from pairing or from being served, a full handheld says
/// "busy" as busy, and the handheld logs its connections by default.
#[test]
fn strangers_holding_sockets_cannot_crowd_out_a_paired_wearable() {
    let dir = temp_dir("flood").expect("dir");
    let (h_keys, w_keys) = (dir.join("handheld"), dir.join("wearable"));
    // Pairing, with strangers on the pairing port.
    let mut cmd = std::process::Command::new(handheld_bin());
    cmd.args(["pair", "--listen", "127.0.0.1:0", "--timeout", "60", "--keys", path(&h_keys)])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let mut pairing = cmd.spawn().expect("pair");
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(pairing.stdout.take().expect("stdout")));
    let addr = lines.next().expect("a line").expect("text");
    let addr = addr.strip_prefix("listening on ").expect("the address first").to_string();
    let code = lines.next().expect("a line").expect("text");
    let code = code.strip_prefix("pairing code: ").expect("the code").to_string();
    let stop = Arc::new(AtomicBool::new(false));
    let idle = strangers(addr.clone(), 12, stop.clone());
    std::thread::sleep(Duration::from_millis(300));
    let o = wearable(&["pair", "--connect", &addr, "--code", &code, "--keys", path(&w_keys)]);
    assert!(o.status.success(), "pairing beside idle sockets: {}", stderr(&o));
    assert!(pairing.wait().expect("exits").success());
    stop.store(true, Ordering::Relaxed);
    idle.into_iter().for_each(|t| drop(t.join()));

    // Serving, with 40 strangers against 4 slots.
    let models = dir.join("models");
    std::fs::create_dir_all(&models).expect("dir");
    let tiny = tiny_model(&models);
    let server = HandheldProcess::start(
        &handheld_bin(),
        &["--keys", path(&h_keys), "--models", path(&models), "--max-connections", "4"],
    )
    .expect("server");
    let stop = Arc::new(AtomicBool::new(false));
    let flood = strangers(server.addr.clone(), 40, stop.clone());
    std::thread::sleep(Duration::from_millis(500));
    for round in 0..3 {
        let started = Instant::now();
        assert_offloaded(
            &paired_run(&tiny, &server.addr, &w_keys, "30"),
            &format!("round {round} of the flood"),
        );
        eprintln!("served beside 40 strangers in {:?}", started.elapsed());
    }
    stop.store(true, Ordering::Relaxed);
    let opened: usize = flood.into_iter().map(|t| t.join().unwrap_or(0)).sum();
    assert!(opened >= 40, "the strangers opened {opened} sockets");
    drop(server);

    // A handheld whose only slot is taken says "busy" to a paired
    // wearable, sealed in the encrypted protocol it speaks.
    let server = HandheldProcess::start(
        &handheld_bin(),
        &["--keys", path(&h_keys), "--models", path(&models), "--max-connections", "1", "--insecure"],
    )
    .expect("server");
    let bytes = std::fs::read(&tiny).expect("tiny");
    let mut holder = TcpStream::connect(&server.addr).expect("connect");
    let hello = Message::new(Header::Hello {
        version: PROTOCOL_VERSION,
        model_digest: model_digest(&bytes),
        model_bytes: bytes.len() as u64,
        device: "holder".into(),
        input_shapes: vec![],
        dims: vec![],
    });
    holder.write_all(&encode(&hello).expect("hello")).expect("write");
    std::thread::sleep(Duration::from_millis(500));
    let o = paired_run(&tiny, &server.addr, &w_keys, "3");
    let err = stderr(&o);
    assert!(!o.status.success(), "a second wearable was served beyond --max-connections 1");
    assert!(err.contains("busy") && !err.contains("older build"), "{err}");
    drop(holder);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Finding 9: a keystore whose key is gone but whose peers remain is
/// refused with the reason; `--new-identity` starts over.
#[test]
fn a_lost_key_beside_paired_peers_is_refused_unless_starting_over() {
    let dir = temp_dir("lost-key").expect("dir");
    let (h_keys, _) = pair(&handheld_bin(), &wearable_bin(), &dir).expect("pairing");
    std::fs::remove_file(h_keys.join("static.key")).expect("rm");
    let o = std::process::Command::new(handheld_bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--keys", path(&h_keys)])
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("static.key is missing") && err.contains("--new-identity"), "{err}");
    assert!(!h_keys.join("static.key").exists(), "a new key was made silently");
    let mut server = HandheldProcess::start(&handheld_bin(), &["--keys", path(&h_keys), "--new-identity"])
        .expect("starts over");
    assert!(h_keys.join("static.key").exists() && h_keys.join("peers.json.old").exists());
    assert!(!h_keys.join("peers.json").exists(), "the old peers are set aside");
    server.kill();
    let _ = std::fs::remove_dir_all(&dir);
}
