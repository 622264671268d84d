//! An app always learns why its frames run on the watch: an address where
//! nothing listens, a host that does not resolve, text that is not an
//! address, and a real `tandem-handheld serve` process refusing a model
//! (which it must not keep). `require_handheld` turns each into an error.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tandem::client::{ModelFile, Placement, Session, SessionConfig, Status};
use tandem::link::TcpTransport;
use tandem::{InputShapes, Model};
use tandem_tools::testing::HandheldProcess;

const BIN: &str = env!("CARGO_BIN_EXE_tandem-handheld");

fn tiny_mlp() -> ModelFile {
    ModelFile::from_bytes(tandem_models::tiny::tiny_mlp_onnx(), &InputShapes::none()).expect("tiny mlp")
}

fn config() -> SessionConfig {
    let mut c = SessionConfig::watch_and_phone().expect("profiles");
    c.placement = Placement::HandheldOnly;
    c.ready_timeout = Duration::from_secs(20);
    c
}

/// An address on loopback where nothing listens.
fn dead_address() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr").to_string();
    drop(l);
    addr
}

fn run_once(s: &mut Session) -> tandem::FrameReport {
    s.feed_f32("x", &[1, 4], &[0.1, 0.2, 0.3, 0.4]).expect("feed");
    s.run().expect("runs here")
}

#[test]
fn no_reachable_handheld_is_reported_and_every_frame_says_why() {
    let cases = [
        (dead_address(), "refused"),
        ("no-such-host.invalid:7000".to_string(), "no-such-host.invalid"),
        ("not an address".to_string(), "not an address"),
    ];
    for (addr, expected) in cases {
        let started = Instant::now();
        let mut s = Session::open(tiny_mlp(), Box::new(TcpTransport::new(addr.clone())), config())
            .expect("opens anyway");
        assert!(started.elapsed() < Duration::from_secs(15), "{addr}: open waited {:?}", started.elapsed());
        let Status::Unreachable { error } = s.status() else {
            panic!("{addr}: status {}", s.status());
        };
        assert!(
            error.to_lowercase().contains(expected),
            "{addr}: the error '{error}' does not say '{expected}'"
        );
        let report = run_once(&mut s);
        assert!(!report.offloaded);
        let why = report.local_reason.expect("a local frame says why");
        assert!(why.starts_with("no handheld:") && why.contains(&error), "{addr}: {why}");

        let started = Instant::now();
        let config = config().require_handheld(Duration::from_millis(800));
        let e = Session::open(tiny_mlp(), Box::new(TcpTransport::new(addr.clone())), config)
            .err()
            .expect("required and unreachable")
            .to_string();
        assert!(e.contains("no handheld ready") && e.contains("unreachable"), "{addr}: {e}");
        assert!(started.elapsed() < Duration::from_secs(10), "{addr}: {:?}", started.elapsed());
    }
}

#[test]
fn a_refused_model_is_reported_and_not_stored() {
    let dir = std::env::temp_dir().join(format!("tandem-refused-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let dir_arg = dir.to_string_lossy().to_string();
    let server = HandheldProcess::start(Path::new(BIN), &["--models", &dir_arg]).expect("server");
    // A model with a symbolic batch dimension, pushed without overrides
    // (an app that bypassed `ModelFile`, pairing the bytes with another
    // model): the handheld, told no overrides, cannot load it.
    let bytes = tandem_models::tiny::symbolic_mlp_onnx();
    let model = ModelFile {
        bytes: Arc::new(bytes),
        model: Model::from_bytes(&tandem_models::tiny::tiny_mlp_onnx(), &InputShapes::none()).expect("loads"),
    };

    let mut s = Session::open(model.clone(), Box::new(TcpTransport::new(server.addr.clone())), config())
        .expect("opens anyway");
    let Status::Refused { reason } = s.status() else {
        panic!("status {}", s.status());
    };
    assert!(reason.contains("symbolic"), "{reason}");
    let report = run_once(&mut s);
    let why = report.local_reason.expect("a local frame says why");
    assert!(why.starts_with("the handheld refused the model:") && why.contains("symbolic"), "{why}");
    drop(s);

    let e = Session::open(
        model,
        Box::new(TcpTransport::new(server.addr.clone())),
        config().require_handheld(Duration::from_secs(20)),
    )
    .err()
    .expect("required and refused")
    .to_string();
    assert!(e.contains("refused") && e.contains("symbolic"), "{e}");

    let stored: Vec<_> = std::fs::read_dir(&dir).expect("dir").flatten().map(|e| e.file_name()).collect();
    assert!(stored.is_empty(), "the handheld kept a model it refused: {stored:?}");
    // The handheld still serves a model it accepts, and keeps that one.
    let s = Session::open(tiny_mlp(), Box::new(TcpTransport::new(server.addr.clone())), config())
        .expect("session");
    assert!(matches!(s.status(), Status::Ready { .. }), "{}", s.status());
    let stored = std::fs::read_dir(&dir).expect("dir").count();
    assert_eq!(stored, 1, "the accepted model is stored");
    let _ = std::fs::remove_dir_all(&dir);
}
