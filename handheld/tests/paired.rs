//! The paired runtime end to end: a real `tandem-handheld serve` process,
//! real TCP on loopback, and the wearable's `Session` in this process.
//! Every result is compared with the unsplit model run here.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tandem::check::{diff, random_inputs};
use tandem::client::{Backoff, ModelFile, Placement, Session, SessionConfig};
use tandem::emulate::{EmulatedTransport, LinkControl, LinkProfile, Schedule};
use tandem::encoding::Encoding;
use tandem::link::{TcpTransport, Transport};
use tandem::protocol::{
    encode, model_digest, ErrorCode, FrameDecoder, Header, Message, TensorMeta, WireType, PROTOCOL_VERSION,
};
use tandem::{Cut, InputShapes, Values};
use tandem_tools::testing::HandheldProcess;

const BIN: &str = env!("CARGO_BIN_EXE_tandem-handheld");

fn model_path() -> PathBuf {
    tandem_models::ensure_models()
        .expect("zoo")
        .zoo_path("mobilenet_v1_0.25_128")
        .expect("mobilenet_v1_0.25_128 in the zoo")
        .to_path_buf()
}

/// A models directory holding `model` (so the handheld knows it by digest).
fn models_dir(tag: &str, model: &Path) -> PathBuf {
    let dir = empty_dir(tag);
    if let Some(name) = model.file_name() {
        std::fs::copy(model, dir.join(name)).expect("copy model");
    }
    dir
}

/// MobileNet, loaded, a models directory (named by `tag`) that holds it,
/// and the directory as a `--models` argument.
fn served(tag: &str) -> (ModelFile, PathBuf, String) {
    let path = model_path();
    let model = ModelFile::load(&path, &InputShapes::none()).expect("model");
    let dir = models_dir(tag, &path);
    let arg = dir.to_string_lossy().to_string();
    (model, dir, arg)
}

fn empty_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tandem-paired-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn config(placement: Placement) -> SessionConfig {
    let mut c = SessionConfig::watch_and_phone().expect("shipped profiles");
    c.placement = placement;
    c.backoff = Backoff { initial: Duration::from_millis(50), max: Duration::from_millis(200) };
    c.ready_timeout = Duration::from_secs(60);
    c
}

fn reference(model: &ModelFile, inputs: &Values) -> Values {
    tandem::split::full_plan(&model.model).expect("plan").run(model.model.graph(), inputs).expect("runs")
}

fn assert_same(model: &ModelFile, got: &Values, want: &Values, what: &str) {
    let g = model.model.graph();
    for &t in g.outputs() {
        let name = &g.tensor(t).name;
        let d = diff(&want[name], &got[name]).expect("comparable");
        assert!(d.ok(), "{what}: output '{name}' differs from the unsplit model: {d:?}");
    }
}

#[test]
fn split_runs_over_tcp_match_the_unsplit_model_and_a_pushed_model_is_kept() {
    let path = model_path();
    let model = ModelFile::load(&path, &InputShapes::none()).expect("model");
    let g = model.model.graph();
    // The handheld starts without the model: the first session pushes it.
    let dir = empty_dir("push");
    let dir_arg = dir.to_string_lossy().to_string();
    let server = HandheldProcess::start(Path::new(BIN), &["--models", &dir_arg]).expect("server");
    let mid = Cut::at_flops_fraction(g, 0.5);
    let placements = [
        ("handheld-only", Placement::HandheldOnly),
        ("mid cut", Placement::Fixed(mid.clone())),
        ("auto, emulated link", Placement::Auto),
    ];
    for (what, placement) in placements {
        let tcp = TcpTransport::new(server.addr.clone());
        let transport: Box<dyn Transport> = if placement == Placement::Auto {
            let profile = LinkProfile::named("wifi-good").expect("shipped");
            let control = LinkControl::new(&profile, Schedule::default());
            Box::new(EmulatedTransport::new(tcp, profile, control, 1))
        } else {
            Box::new(tcp)
        };
        let mut s = Session::open(model.clone(), transport, config(placement)).expect("session");
        assert!(s.is_ready(), "{what}: the handheld never became ready");
        assert_eq!(s.handheld_device(), Some("pixel-8-pro"));
        for seed in 0..3 {
            let inputs = random_inputs(&model.model, seed).expect("inputs");
            for (name, v) in &inputs {
                s.feed(name, (**v).clone()).expect("feed");
            }
            let report = s.run().expect("run");
            if what != "auto, emulated link" {
                assert!(report.offloaded, "{what}: frame not offloaded: {report:?}");
                assert!(report.up_bytes > 0 && report.down_bytes > 0, "{report:?}");
            }
            let mut got = Values::new();
            for &t in g.outputs() {
                let name = &g.tensor(t).name;
                got.insert(name.clone(), s.fetch(name).expect("fetch").into());
            }
            assert_same(&model, &got, &reference(&model, &inputs), what);
        }
    }
    let digest = hex::encode(model_digest(&model.bytes));
    let stored = dir.join(tandem::server::PUSHED_DIR).join(format!("{digest}.onnx"));
    assert!(stored.exists(), "the pushed model was not stored under its digest");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A handheld whose suffixes run on onnxruntime and a wearable whose
/// prefixes run on tract, then on onnxruntime: split runs over TCP match
/// the unsplit model (tract's), and every report names both engines.
#[test]
fn splits_across_engines_over_tcp_match_the_unsplit_model() {
    use tandem::engine::{Engine, EngineChoice};
    let lib = tandem_models::ensure_onnxruntime().expect("onnxruntime's library");
    tandem::engine::set_onnxruntime_library(&lib).expect("set before first use");
    let path = model_path();
    let model = ModelFile::load(&path, &InputShapes::none()).expect("model");
    let dir = models_dir("engines", &path);
    let (dir_arg, lib_arg) = (dir.to_string_lossy().to_string(), lib.to_string_lossy().to_string());
    let server = HandheldProcess::start(
        Path::new(BIN),
        &["--models", &dir_arg, "--engine", "onnxruntime", "--ort-lib", &lib_arg],
    )
    .expect("server");
    let mid = Cut::at_flops_fraction(model.model.graph(), 0.5);
    for wearable in [Engine::Tract, Engine::OnnxRuntime] {
        let mut c = config(Placement::Fixed(mid.clone()));
        c.engine = EngineChoice::One(wearable);
        let tcp = TcpTransport::new(server.addr.clone());
        let mut s = Session::open(model.clone(), Box::new(tcp), c).expect("session");
        assert!(s.is_ready(), "the handheld never became ready");
        for seed in 0..2 {
            let inputs = random_inputs(&model.model, seed).expect("inputs");
            for (name, v) in &inputs {
                s.feed(name, (**v).clone()).expect("feed");
            }
            let report = s.run().expect("run");
            assert!(report.offloaded, "{wearable}: frame not offloaded: {report:?}");
            assert_eq!(report.prefix_engine, Some(wearable), "{report:?}");
            assert_eq!(report.suffix_engine, Some(Engine::OnnxRuntime), "{report:?}");
            let mut got = Values::new();
            for &t in model.model.graph().outputs() {
                let name = &model.model.graph().tensor(t).name;
                got.insert(name.clone(), s.fetch(name).expect("fetch").into());
            }
            assert_same(&model, &got, &reference(&model, &inputs), &format!("{wearable}+onnxruntime"));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A handheld offering both engines (`--engine auto`) sends its times on
/// the other one in `ModelReady`, and runs and builds each suffix on the
/// engine the frame names: on a real process over TCP, every frame's
/// answer matches the unsplit model whichever engine ran it. One offering
/// tract alone refuses a frame naming onnxruntime, saying which it offered.
#[test]
fn a_handheld_offering_both_engines_runs_each_suffix_on_the_one_named() {
    use tandem::engine::Engine;
    let lib = tandem_models::ensure_onnxruntime().expect("onnxruntime's library");
    let path = model_path();
    let model = ModelFile::load(&path, &InputShapes::none()).expect("model");
    let g = model.model.graph();
    let dir = models_dir("both-engines", &path);
    let (dir_arg, lib_arg) = (dir.to_string_lossy().to_string(), lib.to_string_lossy().to_string());
    let server = HandheldProcess::start(
        Path::new(BIN),
        &["--models", &dir_arg, "--engine", "auto", "--ort-lib", &lib_arg],
    )
    .expect("server");
    let mut s = TcpStream::connect(&server.addr).expect("connect");
    let digest = model_digest(&model.bytes);
    s.write_all(&hello(PROTOCOL_VERSION, digest, model.bytes.len() as u64)).expect("hello");
    let ready = read_until(&mut s, |m| matches!(m.header, Header::ModelReady { .. } | Header::Error { .. }));
    let latency = ready
        .iter()
        .find_map(|m| match &m.header {
            Header::ModelReady { latency } => Some(latency.clone()),
            _ => None,
        })
        .expect("ModelReady");
    let others: Vec<Engine> = latency.others.iter().map(|o| o.engine).collect();
    assert_eq!(others.len(), 1, "the other engine's times: {others:?}");
    assert_ne!(others[0], latency.engine);
    assert_eq!(latency.others[0].per_layer_s.len(), g.nodes().len());
    let inputs = random_inputs(&model.model, 3).expect("inputs");
    let want = reference(&model, &inputs);
    let tensors: Vec<(String, &tandem::Tensor)> = inputs.iter().map(|(n, v)| (n.clone(), &**v)).collect();
    let tensors = tandem::encoding::to_send(&tensors).expect("crosses");
    let key = Cut::handheld_only(g).key().into_string();
    let run = |frame: u64, engine: Option<Engine>| {
        let header = |tensors| Header::RunSuffix {
            frame,
            cut: key.clone(),
            tensors,
            answer: vec![],
            edge: None,
            engine,
        };
        encode(&Message::with_tensors(header, &tensors).expect("message")).expect("encodes")
    };
    // Built ahead on the other engine first, then run on each.
    let prepare = Header::Prepare { cuts: vec![key.clone()], engine: Some(others[0]) };
    s.write_all(&encode(&Message::new(prepare)).expect("prepare")).expect("write");
    let prepared = read_until(&mut s, |m| matches!(m.header, Header::Prepared { .. } | Header::Error { .. }));
    assert!(
        prepared.iter().any(|m| matches!(&m.header, Header::Prepared { engine, error: None, .. } if *engine == Some(others[0]))),
        "{:?}",
        prepared.iter().map(|m| &m.header).collect::<Vec<_>>()
    );
    for (frame, engine) in [(1, Some(others[0])), (2, Some(latency.engine)), (3, None), (4, Some(others[0]))]
    {
        s.write_all(&run(frame, engine)).expect("write");
        let got = read_until(&mut s, |m| matches!(m.header, Header::Result { .. } | Header::Error { .. }));
        let answer = got
            .iter()
            .find(|m| matches!(m.header, Header::Result { .. }))
            .unwrap_or_else(|| panic!("frame {frame} on {engine:?}: {:?}", error_of(&got)));
        let mut values = Values::new();
        for (name, t) in answer.tensors().expect("decodes") {
            values.insert(name, tandem::wire::from_wire(t).expect("a tensor").into());
        }
        assert_same(&model, &values, &want, &format!("the suffix on {engine:?}"));
    }
    drop(s);
    // A session with `auto` on both sides over an emulated Wi-Fi link: each
    // frame runs on the engines the planner chose with its cut, and matches
    // the unsplit model.
    tandem::engine::set_onnxruntime_library(&lib).expect("set before first use");
    let mut c = config(Placement::Auto);
    c.engine = tandem::engine::EngineChoice::Auto;
    let profile = LinkProfile::named("wifi-good").expect("shipped");
    let control = LinkControl::new(&profile, Schedule::default());
    let link = EmulatedTransport::new(TcpTransport::new(server.addr.clone()), profile, control, 1);
    let mut session = Session::open(model.clone(), Box::new(link), c).expect("session");
    assert!(session.is_ready(), "the handheld never became ready");
    for seed in 0..4 {
        let inputs = random_inputs(&model.model, seed).expect("inputs");
        for (name, v) in &inputs {
            session.feed(name, (**v).clone()).expect("feed");
        }
        let report = session.run().expect("run");
        let chosen = session.decision().and_then(|d| d.engines).expect("the planner chose engines");
        if report.offloaded {
            assert_eq!(
                (report.prefix_engine, report.suffix_engine),
                (Some(chosen.prefix), Some(chosen.suffix)),
                "{report:?}"
            );
        }
        let mut got = Values::new();
        for &t in g.outputs() {
            let name = &g.tensor(t).name;
            got.insert(name.clone(), session.fetch(name).expect("fetch").into());
        }
        assert_same(&model, &got, &reference(&model, &inputs), &format!("auto on both sides, on {chosen}"));
    }
    drop(session);
    // A handheld offering tract alone.
    let tract_only = HandheldProcess::start(Path::new(BIN), &["--models", &dir_arg]).expect("server");
    let mut s = TcpStream::connect(&tract_only.addr).expect("connect");
    s.write_all(&hello(PROTOCOL_VERSION, digest, model.bytes.len() as u64)).expect("hello");
    let ready = read_until(&mut s, |m| matches!(m.header, Header::ModelReady { .. } | Header::Error { .. }));
    assert!(
        ready
            .iter()
            .any(|m| matches!(&m.header, Header::ModelReady { latency } if latency.others.is_empty())),
        "tract alone: no other engine's times"
    );
    s.write_all(&run(1, Some(Engine::OnnxRuntime))).expect("write");
    let (code, reason) = error_of(&read_until(&mut s, |m| matches!(m.header, Header::Error { .. })));
    assert_eq!(code, ErrorCode::Unexpected, "{reason}");
    assert!(reason.contains("onnxruntime") && reason.contains("it offered tract"), "{reason}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A handheld told to use onnxruntime from a file that is not there
/// refuses to start, saying how to get it.
#[test]
fn a_handheld_without_onnxruntime_says_how_to_get_it() {
    let out = std::process::Command::new(BIN)
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--engine",
            "onnxruntime",
            "--ort-lib",
            "/nonexistent/libonnxruntime.so",
        ])
        .env_remove("ORT_DYLIB_PATH")
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("/nonexistent/libonnxruntime.so") && err.contains("pip install onnxruntime==1.20.1"),
        "{err}"
    );
}

#[test]
fn killing_the_handheld_mid_stream_loses_no_frame_and_offloading_resumes_after_a_restart() {
    let (model, dir, dir_arg) = served("kill");
    // A slowed handheld: its suffix takes longer than the frame period, so
    // frames are in flight at the kill (MNIST's suffix takes ~0.3 ms on a
    // fast host: 60x makes it ~18 ms, beyond the 10 ms period).
    let first =
        HandheldProcess::start(Path::new(BIN), &["--models", &dir_arg, "--slowdown", "60"]).expect("server");
    let addr = first.addr.clone();
    let server = Arc::new(Mutex::new(Some(first)));
    let mut c = config(Placement::Fixed(Cut::at_flops_fraction(model.model.graph(), 0.3)));
    c.max_in_flight = 3;
    let mut s = Session::open(model.clone(), Box::new(TcpTransport::new(addr.clone())), c).expect("session");
    assert!(s.is_ready());

    let n = 400u64;
    let inputs: Vec<Values> = (0..n).map(|i| random_inputs(&model.model, i).expect("inputs")).collect();
    let mut delivered = vec![];
    let mut restarter = None;
    let mut killed_at = None;
    let started = Instant::now();
    // Two streams of 200 frames: the kill and the restart in the first, and
    // the second only once the restarted handheld is up, so that 2 s of
    // frames follow it however long a loaded machine takes to start it
    // (nextest runs tests side by side: a clean clone's took 4 s, past
    // the end of one 4 s stream). Frame numbers run on across the two.
    let (first_half, second_half) = inputs.split_at(200);
    s.stream_with(first_half.to_vec(), Some(100.0), |result| {
        let frame = result.expect("every frame has a result");
        let (report, outputs) = (frame.report, frame.outputs.into_values());
        if delivered.len() == 20 {
            // Kill the handheld with frames in flight, and restart it 0.5 s later on the same port.
            if let Some(mut p) = server.lock().expect("lock").take() {
                p.kill();
            }
            killed_at = Some(report.frame);
            let (server, addr, dir_arg) = (server.clone(), addr.clone(), dir_arg.clone());
            restarter = Some(std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(500));
                let p = HandheldProcess::start(Path::new(BIN), &["--listen", &addr, "--models", &dir_arg])
                    .expect("restart");
                *server.lock().expect("lock") = Some(p);
            }));
        }
        delivered.push((report, outputs));
    })
    .expect("stream");
    restarter.expect("killed in the first stream").join().expect("restarted");
    s.stream_with(second_half.to_vec(), Some(100.0), |result| {
        let frame = result.expect("every frame has a result");
        delivered.push((frame.report, frame.outputs.into_values()));
    })
    .expect("stream");
    let killed_at = killed_at.expect("killed");
    eprintln!("{n} frames in {:.1} s", started.elapsed().as_secs_f64());

    // Every frame, exactly once, in order, and right.
    let frames: Vec<u64> = delivered.iter().map(|(r, _)| r.frame).collect();
    let first_frame = frames[0];
    assert_eq!(
        frames,
        (first_frame..first_frame + n).collect::<Vec<_>>(),
        "frames lost, duplicated or reordered"
    );
    for (i, (r, out)) in delivered.iter().enumerate() {
        assert_same(&model, out, &reference(&model, &inputs[i]), &format!("frame {}", r.frame));
    }
    let after: Vec<_> = delivered.iter().filter(|(r, _)| r.frame > killed_at).map(|(r, _)| r).collect();
    let fell_back = after.iter().filter(|r| r.fallback.is_some()).count();
    let local = after.iter().filter(|r| !r.offloaded).count();
    let resumed = after.iter().skip_while(|r| r.offloaded).skip_while(|r| !r.offloaded).count();
    eprintln!("after the kill: {fell_back} fell back, {local} local, {resumed} from the first offload after the outage");
    assert!(local > 0, "no frame ran locally while the handheld was down");
    assert!(fell_back > 0, "no frame in flight at the kill was handed back to the wearable");
    assert!(
        after.iter().skip_while(|r| r.offloaded).any(|r| r.offloaded),
        "offloading did not resume after the restart"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Connects, sends `bytes`, optionally half-closes, and reads messages
/// until `stop` says so or the server closes (10 s at most).
fn talk(addr: &str, bytes: &[u8], half_close: bool) -> Vec<Message> {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.write_all(bytes).expect("write");
    if half_close {
        s.shutdown(std::net::Shutdown::Write).expect("shutdown");
    }
    read_until(&mut s, |_| false)
}

fn read_until(s: &mut TcpStream, stop: impl Fn(&Message) -> bool) -> Vec<Message> {
    s.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
    let mut dec = FrameDecoder::new(1 << 30);
    let mut out = vec![];
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = match s.read(&mut buf) {
            Ok(0) | Err(_) => return out,
            Ok(n) => n,
        };
        dec.push(&buf[..n]);
        while let Ok(Some(m)) = dec.next_message() {
            let done = stop(&m);
            out.push(m);
            if done {
                return out;
            }
        }
    }
}

fn error_of(messages: &[Message]) -> (ErrorCode, String) {
    messages
        .iter()
        .find_map(|m| match &m.header {
            Header::Error { code, reason } => Some((*code, reason.clone())),
            _ => None,
        })
        .unwrap_or_else(|| {
            panic!("no Error among {:?}", messages.iter().map(|m| &m.header).collect::<Vec<_>>())
        })
}

fn raw_frame(header: &Header, body: &[u8]) -> Vec<u8> {
    let h = bincode::serde::encode_to_vec(header, bincode::config::standard()).expect("header");
    let mut out = ((4 + h.len() + body.len()) as u32).to_le_bytes().to_vec();
    out.extend_from_slice(&(h.len() as u32).to_le_bytes());
    out.extend_from_slice(&h);
    out.extend_from_slice(body);
    out
}

fn hello(version: u32, digest: [u8; 32], bytes: u64) -> Vec<u8> {
    encode(&Message::new(Header::Hello {
        version,
        model_digest: digest,
        model_bytes: bytes,
        device: "test".into(),
        input_shapes: vec![],
        dims: vec![],
    }))
    .expect("hello")
}

#[test]
fn hostile_clients_get_clear_errors_while_a_good_client_is_served() {
    let (model, dir, dir_arg) = served("hostile");
    let g = model.model.graph();
    let server = HandheldProcess::start(Path::new(BIN), &["--models", &dir_arg]).expect("server");
    let addr = server.addr.clone();

    // The good client connects first and stays connected throughout.
    let mut good = Session::open(
        model.clone(),
        Box::new(TcpTransport::new(addr.clone())),
        config(Placement::HandheldOnly),
    )
    .expect("session");
    assert!(good.is_ready());
    let check_good = |good: &mut Session, seed: u64| {
        let inputs = random_inputs(&model.model, seed).expect("inputs");
        let got = good.stream(vec![inputs.clone()]).expect("stream").pop().expect("one frame").expect("runs");
        assert!(got.report.offloaded, "the good client was not served: {:?}", got.report);
        assert_same(&model, &got.outputs.into_values(), &reference(&model, &inputs), "good client");
    };
    check_good(&mut good, 1);

    let digest = model_digest(&model.bytes);
    let cases: Vec<(&str, Vec<u8>, bool, ErrorCode, &str)> = vec![
        (
            "garbage",
            vec![8, 0, 0, 0, 4, 0, 0, 0, 0xff, 0xff, 0xff, 0xff],
            false,
            ErrorCode::Malformed,
            "malformed header",
        ),
        (
            "oversized length",
            vec![0xff, 0xff, 0xff, 0x7f, 1, 2, 3],
            false,
            ErrorCode::Malformed,
            "exceeds the limit",
        ),
        (
            "truncated frame",
            hello(PROTOCOL_VERSION, digest, 0)[..10].to_vec(),
            true,
            ErrorCode::Malformed,
            "closed inside a frame",
        ),
        ("wrong version", hello(99, digest, 0), false, ErrorCode::Version, "protocol version 99"),
    ];
    for (what, bytes, half_close, code, text) in cases {
        let replies = talk(&addr, &bytes, half_close);
        let (got_code, reason) = error_of(&replies);
        assert_eq!(got_code, code, "{what}: {reason}");
        assert!(reason.contains(text), "{what}: the error does not say '{text}': {reason}");
    }

    // A push whose bytes do not match the announced digest.
    let fake = b"not the model that was announced".to_vec();
    let mut push = hello(PROTOCOL_VERSION, [7; 32], fake.len() as u64);
    push.extend(encode(&Message { header: Header::ModelChunk { offset: 0 }, body: fake }).expect("chunk"));
    let (code, reason) = error_of(&talk(&addr, &push, false));
    assert_eq!(code, ErrorCode::Digest, "{reason}");
    assert!(reason.contains("SHA-256"), "{reason}");

    // After a proper handshake: a tensor whose bytes do not match its
    // shape, then a tensor whose shape does not match the model.
    let input = g.tensor(g.inputs()[0]);
    let handheld_only = Cut::handheld_only(g).key().into_string();
    let encoded_suffix = |shape: Vec<u64>, body: Vec<u8>, encoding: Encoding, len: u64| {
        let tensor = TensorMeta {
            name: input.name.clone(),
            dtype: WireType::F32,
            shape,
            encoding,
            params: tandem::encoding::Params::None,
            len,
        };
        raw_frame(
            &Header::RunSuffix {
                frame: 1,
                cut: handheld_only.clone(),
                tensors: vec![tensor],
                answer: vec![],
                edge: None,
                engine: None,
            },
            &body,
        )
    };
    let run_suffix = |shape: Vec<u64>, body: Vec<u8>| {
        let len = shape.iter().product::<u64>() * 4;
        encoded_suffix(shape, body, Encoding::Raw, len)
    };
    let shape: Vec<u64> = input.shape.iter().map(|&d| d as u64).collect();
    let elements: u64 = shape.iter().product();
    let mut wrong_model_shape = shape.clone();
    wrong_model_shape[0] += 1;
    let after_handshake: Vec<(&str, Vec<u8>, ErrorCode, String)> = vec![
        (
            "shape/byte mismatch",
            run_suffix(shape.clone(), vec![0; 12]),
            ErrorCode::Malformed,
            format!("body of 12 bytes, but the header describes {}", elements * 4),
        ),
        (
            "shape differs from the model's",
            run_suffix(wrong_model_shape.clone(), vec![0; (elements * 4 * 2) as usize]),
            ErrorCode::Tensor,
            format!("tensor '{}': expected", input.name),
        ),
        (
            "a decompression bomb: 1 GiB claimed from 10 bytes",
            encoded_suffix(vec![1 << 14, 1 << 14], vec![0; 10], Encoding::ShuffleLz4, 10),
            ErrorCode::Malformed,
            "a ratio above 16384 is refused".into(),
        ),
        (
            // Encoded bodies are checked where they are decoded, once (not
            // also by the frame decoder): a tensor error naming the frame.
            "LZ4 that is not LZ4",
            encoded_suffix(shape.clone(), vec![0xff; 64], Encoding::ShuffleLz4, 64),
            ErrorCode::Tensor,
            "corrupt shuffle-lz4".into(),
        ),
    ];
    for (what, frame, code, text) in after_handshake {
        let mut s = TcpStream::connect(&addr).expect("connect");
        s.write_all(&hello(PROTOCOL_VERSION, digest, model.bytes.len() as u64)).expect("hello");
        let ready =
            read_until(&mut s, |m| matches!(m.header, Header::ModelReady { .. } | Header::Error { .. }));
        assert!(
            ready.iter().any(|m| matches!(m.header, Header::ModelReady { .. })),
            "{what}: no ModelReady: {:?}",
            ready.iter().map(|m| &m.header).collect::<Vec<_>>()
        );
        s.write_all(&frame).expect("frame");
        let (got, reason) = error_of(&read_until(&mut s, |m| matches!(m.header, Header::Error { .. })));
        assert_eq!(got, code, "{what}: {reason}");
        assert!(reason.contains(&text), "{what}: the error does not say '{text}': {reason}");
    }

    // The good client, connected all along, is still served.
    check_good(&mut good, 2);
    // And a new one too.
    let mut fresh =
        Session::open(model.clone(), Box::new(TcpTransport::new(addr)), config(Placement::HandheldOnly))
            .expect("session");
    check_good(&mut fresh, 3);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn status_reports_the_load_and_sigterm_stops_the_server_cleanly() {
    let (model, dir, dir_arg) = served("term");
    let mut server = HandheldProcess::start(
        Path::new(BIN),
        &["--models", &dir_arg, "--load", "40", "--fixed-load", "--status-ms", "50"],
    )
    .expect("server");
    let mut s = Session::open(
        model.clone(),
        Box::new(TcpTransport::new(server.addr.clone())),
        config(Placement::HandheldOnly),
    )
    .expect("session");
    assert!(s.is_ready());
    std::thread::sleep(Duration::from_millis(200));
    let inputs = random_inputs(&model.model, 0).expect("inputs");
    s.stream(vec![inputs]).expect("stream");
    let load = s.handheld_status().load;
    assert!((load - 0.4).abs() < 1e-6, "the handheld reported load {load}, not 0.4");

    let (status, lines) = server.terminate(Duration::from_secs(10)).expect("signal");
    let status = status.expect("the server did not exit within 10 s of SIGTERM");
    assert!(status.success(), "exit status {status}");
    assert!(lines.iter().any(|l| l == "stopped"), "{lines:?}");
    // The session noticed, and runs the next frame itself.
    let inputs = random_inputs(&model.model, 1).expect("inputs");
    let f = s.stream(vec![inputs.clone()]).expect("stream").pop().expect("frame").expect("runs");
    assert!(!f.report.offloaded, "{:?}", f.report);
    assert!(f.report.local_reason.as_deref().is_some_and(|r| r.starts_with("no handheld")), "{:?}", f.report);
    assert_same(&model, &f.outputs.into_values(), &reference(&model, &inputs), "after shutdown");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--load` slows the emulated phone's suffixes as processor sharing
/// would, `1 / (1 − load)`: the device clock counts a suffix's CPU time,
/// so the load generator's contention on this host would not slow a
/// suffix at `--slowdown 8` by itself (it ran 8× its CPU time either way;
/// 8× absorbs waits down to an eighth of a core, whatever else runs).
#[test]
fn a_handheld_under_load_runs_its_suffixes_slower_by_the_share_it_leaves() {
    let (model, dir, dir_arg) = served("background-load");
    let median_suffix_ms = |extra: &[&str]| {
        let args = [&["--models", dir_arg.as_str(), "--slowdown", "8", "--fixed-load"], extra].concat();
        let server = HandheldProcess::start(Path::new(BIN), &args).expect("server");
        let mut s = Session::open(
            model.clone(),
            Box::new(TcpTransport::new(server.addr.clone())),
            config(Placement::HandheldOnly),
        )
        .expect("session");
        let inputs: Vec<Values> = (0..15).map(|i| random_inputs(&model.model, i).expect("inputs")).collect();
        let mut ms: Vec<f64> = s
            .stream(inputs)
            .expect("stream")
            .into_iter()
            .map(|f| f.expect("runs").report)
            .filter(|r| r.offloaded)
            .map(|r| r.handheld_ms)
            .collect();
        assert!(ms.len() >= 10, "{} of 15 frames offloaded", ms.len());
        ms.sort_by(f64::total_cmp);
        ms[ms.len() / 2]
    };
    let idle = median_suffix_ms(&[]);
    let loaded = median_suffix_ms(&["--load", "50"]);
    assert!(
        loaded > 1.5 * idle,
        "at 50% load a suffix took {loaded:.2} ms against {idle:.2} ms idle (processor sharing: 2x)"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Without `--fixed-load` the handheld reports the load it measures,
/// whatever makes it: here a load generator in this test's process, busy
/// 90% of the time on every core, while the handheld itself was told of
/// no load (a handheld that reported its `--load` would say 0).
#[test]
fn status_reports_the_load_measured() {
    let (model, dir, dir_arg) = served("measured-load");
    let server =
        HandheldProcess::start(Path::new(BIN), &["--models", &dir_arg, "--status-ms", "50"]).expect("server");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let _load = tandem::load::LoadGenerator::start(0.9, cores);
    let mut s = Session::open(
        model.clone(),
        Box::new(TcpTransport::new(server.addr.clone())),
        config(Placement::HandheldOnly),
    )
    .expect("session");
    // The probe samples every 200 ms (its floor) and averages; statuses come every 50 ms.
    std::thread::sleep(Duration::from_millis(2500));
    let inputs = random_inputs(&model.model, 0).expect("inputs");
    s.stream(vec![inputs]).expect("stream");
    let load = s.handheld_status().load;
    assert!(load > 0.25, "with every core busy 90% of the time the handheld measured load {load}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `Prepare` over a real socket: a cut of the model is built and answered
/// `Prepared` without an error, a key that is no cut gets its reason, and
/// past 64 cuts per connection every further one is refused, named: a peer
/// cannot make the handheld build without end.
#[test]
fn prepares_are_built_answered_and_capped_per_connection() {
    use tandem::server::MAX_PREPARED_PER_CONNECTION;
    let (model, dir, dir_arg) = served("prepare");
    let g = model.model.graph();
    let server = HandheldProcess::start(Path::new(BIN), &["--models", &dir_arg]).expect("server");
    let mut s = TcpStream::connect(&server.addr).expect("connect");
    let digest = model_digest(&model.bytes);
    s.write_all(&hello(PROTOCOL_VERSION, digest, model.bytes.len() as u64)).expect("hello");
    let ready = read_until(&mut s, |m| matches!(m.header, Header::ModelReady { .. } | Header::Error { .. }));
    assert!(ready.iter().any(|m| matches!(m.header, Header::ModelReady { .. })), "no ModelReady");
    let prepared = |s: &mut TcpStream, cuts: Vec<String>| {
        let n = cuts.len();
        s.write_all(&encode(&Message::new(Header::Prepare { cuts, engine: None })).expect("prepare"))
            .expect("write");
        // One decoder for the n answers: several may arrive in one read.
        let seen = std::cell::Cell::new(0);
        let stop = |m: &Message| match m.header {
            Header::Prepared { .. } => {
                seen.set(seen.get() + 1);
                seen.get() == n
            }
            Header::Error { .. } => true,
            _ => false,
        };
        let got: Vec<(String, Option<String>)> = read_until(s, stop)
            .into_iter()
            .filter_map(|m| match m.header {
                Header::Prepared { cut, error, .. } => Some((cut, error)),
                Header::Error { reason, .. } => panic!("refused: {reason}"),
                _ => None,
            })
            .collect();
        assert_eq!(got.len(), n, "{got:?}");
        got
    };
    let key = Cut::handheld_only(g).key().into_string();
    let got = prepared(&mut s, vec![key.clone(), "not-a-cut".into()]);
    assert!(got.contains(&(key, None)), "{got:?}");
    assert!(got.iter().any(|(c, e)| c == "not-a-cut" && e.is_some()), "{got:?}");
    // 2 asked so far; ask for the rest of the budget and 8 more, 8 at a time.
    let mut refused = 0;
    let mut asked = 2;
    while asked < MAX_PREPARED_PER_CONNECTION + 8 {
        let cuts: Vec<String> = (asked..asked + 8).map(|i| format!("x{i}")).collect();
        asked += cuts.len();
        for (_, e) in prepared(&mut s, cuts) {
            refused += usize::from(e.is_some_and(|e| e.contains("at most 64 cuts")));
        }
    }
    assert_eq!(refused, asked - MAX_PREPARED_PER_CONNECTION, "the cap refuses what is past it");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn connections_beyond_the_cap_are_told_busy_and_pushes_beyond_the_limit_are_refused_by_name() {
    let path = model_path();
    let model = ModelFile::load(&path, &InputShapes::none()).expect("model");
    let digest = model_digest(&model.bytes);
    // No models directory: the wearable must push, and pushes stop at 1 MB.
    let server = HandheldProcess::start(Path::new(BIN), &["--max-connections", "1", "--max-push-mb", "1"])
        .expect("server");
    assert!(model.bytes.len() > 1 << 20, "the test model must be above the push limit");
    // The first connection holds the only slot.
    let mut first = TcpStream::connect(&server.addr).expect("connect");
    first.write_all(&hello(PROTOCOL_VERSION, [3; 32], 10)).expect("hello");
    let welcome = read_until(&mut first, |m| matches!(m.header, Header::Welcome { .. }));
    assert!(welcome.iter().any(|m| matches!(m.header, Header::Welcome { .. })));
    let (code, reason) = error_of(&talk(&server.addr, &hello(PROTOCOL_VERSION, digest, 10), false));
    assert_eq!(code, ErrorCode::Busy, "{reason}");
    assert!(reason.contains("busy") && reason.contains("at most 1"), "{reason}");
    drop(first);
    // The slot is free again once the first wearable leaves; a push over the limit is refused by name.
    let deadline = Instant::now() + Duration::from_secs(10);
    let (code, reason) = loop {
        let got =
            error_of(&talk(&server.addr, &hello(PROTOCOL_VERSION, digest, model.bytes.len() as u64), false));
        if !got.1.contains("busy") || Instant::now() > deadline {
            break got;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(code, ErrorCode::Model, "{reason}");
    assert!(reason.contains("exceeds this handheld's 1048576 limit"), "{reason}");
}

/// `--insecure` lets unpaired wearables in for the models in `--models`
/// only: a push is refused by name unless `--insecure-push`.
#[test]
fn an_unpaired_wearable_may_not_push_unless_insecure_push() {
    let keys = empty_dir("plain-push-keys");
    let keys_arg = keys.to_string_lossy().to_string();
    let server =
        HandheldProcess::start(Path::new(BIN), &["--keys", &keys_arg, "--insecure"]).expect("server");
    let (code, reason) = error_of(&talk(&server.addr, &hello(PROTOCOL_VERSION, [3; 32], 1000), false));
    assert_eq!(code, ErrorCode::Model, "{reason}");
    assert!(reason.contains("paired wearables only") && reason.contains("--insecure-push"), "{reason}");
    drop(server);
    let server =
        HandheldProcess::start(Path::new(BIN), &["--keys", &keys_arg, "--insecure", "--insecure-push"])
            .expect("server");
    let mut s = TcpStream::connect(&server.addr).expect("connect");
    s.write_all(&hello(PROTOCOL_VERSION, [3; 32], 1000)).expect("hello");
    let got = read_until(&mut s, |m| matches!(m.header, Header::Welcome { .. } | Header::Error { .. }));
    assert!(
        got.iter().any(|m| matches!(m.header, Header::Welcome { has_model: false, .. })),
        "{:?}",
        got.iter().map(|m| &m.header).collect::<Vec<_>>()
    );
    let _ = std::fs::remove_dir_all(&keys);
}

#[test]
fn a_peer_that_never_says_hello_is_closed_with_a_reason() {
    let server = HandheldProcess::start(Path::new(BIN), &[]).expect("server");
    let started = Instant::now();
    // A probe, then silence: the handheld must not hold the connection forever.
    let probe = encode(&Message { header: Header::Probe { id: 1, echo_payload: false }, body: vec![0; 16] })
        .expect("probe");
    let (code, reason) = error_of(&talk(&server.addr, &probe, false));
    assert_eq!(code, ErrorCode::Unexpected, "{reason}");
    assert!(reason.contains("no Hello within"), "{reason}");
    assert!(started.elapsed() < Duration::from_secs(30), "closed only after {:?}", started.elapsed());
}

/// Frames the wearable cancels (they missed their deadline and ran there)
/// are not run if they have not started: with the handheld slowed 30x,
/// frame 1 runs while 2-5 wait, the cancel drops 3-5 (2 may have started),
/// and frame 6 is answered next.
#[test]
fn cancelled_frames_that_have_not_started_are_not_run() {
    let (model, dir, dir_arg) = served("cancel");
    let g = model.model.graph();
    let server =
        HandheldProcess::start(Path::new(BIN), &["--models", &dir_arg, "--slowdown", "30"]).expect("server");
    let mut s = TcpStream::connect(&server.addr).expect("connect");
    let digest = model_digest(&model.bytes);
    s.write_all(&hello(PROTOCOL_VERSION, digest, model.bytes.len() as u64)).expect("hello");
    let ready = read_until(&mut s, |m| matches!(m.header, Header::ModelReady { .. } | Header::Error { .. }));
    assert!(ready.iter().any(|m| matches!(m.header, Header::ModelReady { .. })), "no ModelReady");
    let inputs = random_inputs(&model.model, 1).expect("inputs");
    let tensors: Vec<(String, &tandem::Tensor)> = inputs.iter().map(|(n, v)| (n.clone(), &**v)).collect();
    let tensors = tandem::encoding::to_send(&tensors).expect("crosses");
    let key = Cut::handheld_only(g).key().into_string();
    let mut bytes = vec![];
    for frame in 1..=6 {
        let m = Message::with_tensors(
            |tensors| Header::RunSuffix {
                frame,
                cut: key.clone(),
                tensors,
                answer: vec![],
                edge: None,
                engine: None,
            },
            &tensors,
        )
        .expect("message");
        bytes.extend(encode(&m).expect("encodes"));
    }
    bytes.extend(encode(&Message::new(Header::Cancel { frames: vec![2, 3, 4, 5] })).expect("encodes"));
    s.write_all(&bytes).expect("write");
    let got =
        read_until(&mut s, |m| matches!(m.header, Header::Result { frame: 6, .. } | Header::Error { .. }));
    let answered: Vec<u64> = got
        .iter()
        .filter_map(|m| match m.header {
            Header::Result { frame, .. } => Some(frame),
            Header::Error { ref reason, .. } => panic!("refused: {reason}"),
            _ => None,
        })
        .collect();
    assert_eq!(answered.first(), Some(&1), "{answered:?}");
    assert_eq!(answered.last(), Some(&6), "{answered:?}");
    assert!(!answered.iter().any(|f| (3..=5).contains(f)), "cancelled frames were run: {answered:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
