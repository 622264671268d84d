//! A handheld that stalls on a real socket: one that goes silent after the
//! handshake (stopped, or wedged), and one that keeps sending `Status` but
//! never answers. The wearable must notice each, cancel what it gave up
//! on, drop the link and open it again, and still deliver every frame once,
//! in order, equal to the unsplit model's.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::fake_handheld::{mnist, ready, runtime, GOOD};
use tandem::check::{diff, random_inputs};
use tandem::client::{Backoff, Placement, Session, SessionConfig};
use tandem::link::{Acceptor, TcpAcceptor, TcpTransport};
use tandem::protocol::{encode, FrameDecoder, Header, Message};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Stall {
    /// `Status` every 100 ms until the first frame; then nothing at all.
    Silent,
    /// `Status` every 100 ms, and no answer to any frame.
    Mute,
}

#[derive(Default)]
struct Seen {
    connections: AtomicUsize,
    keepalives: AtomicUsize,
    cancelled: Mutex<Vec<u64>>,
}

/// Handshakes properly on every connection, then stalls as told.
async fn stalling(mut acceptor: TcpAcceptor, stall: Stall, layers: usize, seen: Arc<Seen>) {
    loop {
        let Ok(link) = acceptor.accept().await else { return };
        seen.connections.fetch_add(1, Ordering::Relaxed);
        let seen = seen.clone();
        tokio::spawn(async move {
            let tandem::link::Link { mut tx, mut rx, .. } = link;
            let (out, mut out_rx) = tokio::sync::mpsc::unbounded_channel::<Message>();
            let stalled = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let writer_stalled = stalled.clone();
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(Duration::from_millis(100));
                loop {
                    let silent = stall == Stall::Silent && writer_stalled.load(Ordering::Relaxed);
                    tokio::select! {
                        m = out_rx.recv() => match m {
                            Some(m) => {
                                if tx.send(encode(&m).expect("encodes")).await.is_err() {
                                    return;
                                }
                            }
                            None => return,
                        },
                        _ = tick.tick(), if !silent => {
                            let m = Message::new(Header::Status(GOOD));
                            if tx.send(encode(&m).expect("encodes")).await.is_err() {
                                return;
                            }
                        }
                    }
                }
            });
            let mut decoder = FrameDecoder::default();
            while let Ok(Some(bytes)) = rx.recv().await {
                let (messages, failed) = decoder.push_and_decode(&bytes);
                if failed.is_some() {
                    return;
                }
                for m in messages {
                    match m.header {
                        Header::Hello { .. } => {
                            for m in ready(layers) {
                                let _ = out.send(m);
                            }
                        }
                        Header::Cancel { frames } => {
                            seen.cancelled.lock().expect("lock").extend(frames);
                        }
                        Header::RunSuffix { .. } => stalled.store(true, Ordering::Relaxed),
                        Header::Probe { id: u64::MAX, .. } => {
                            seen.keepalives.fetch_add(1, Ordering::Relaxed);
                        }
                        // Frames are taken, never answered.
                        _ => {}
                    }
                }
            }
        });
    }
}

fn run(stall: Stall) -> (Vec<tandem::client::FrameReport>, Arc<Seen>) {
    let model = mnist();
    let g = model.model.graph();
    let output = g.tensor(g.outputs()[0]).name.clone();
    let reference = tandem::split::full_plan(&model.model).expect("plan");
    let runtime = runtime();
    let acceptor = runtime.block_on(TcpAcceptor::bind("127.0.0.1:0")).expect("bind");
    let addr = acceptor.local_addr().expect("addr").to_string();
    let seen = Arc::new(Seen::default());
    runtime.spawn(stalling(acceptor, stall, g.nodes().len(), seen.clone()));

    let mut config = SessionConfig::watch_and_phone().expect("profiles");
    config.placement = Placement::HandheldOnly;
    config.backoff = Backoff { initial: Duration::from_millis(50), max: Duration::from_millis(200) };
    match stall {
        // Only the silence can be what gives the link up.
        Stall::Silent => {
            config.link_silence = Duration::from_millis(800);
            config.deadline_floor = Duration::from_secs(600);
            config.max_missed_deadlines = 1000;
        }
        // Only missed deadlines can.
        Stall::Mute => {
            config.link_silence = Duration::from_secs(600);
            config.deadline_factor = 1.0;
            config.deadline_floor = Duration::from_millis(200);
            config.max_missed_deadlines = 3;
            config.pipeline = false;
        }
    }
    let mut s = Session::open(model.clone(), Box::new(TcpTransport::new(addr)), config).expect("session");
    let frames: Vec<_> = (0..6).map(|i| random_inputs(&model.model, i).expect("inputs")).collect();
    let results = s.stream(frames.clone()).expect("the stream runs");
    assert_eq!(results.len(), frames.len(), "{stall:?}: a frame was lost");
    let mut reports = vec![];
    for (r, inputs) in results.into_iter().zip(&frames) {
        let f = r.unwrap_or_else(|e| panic!("{stall:?}: a frame failed: {e}"));
        assert!(!f.report.offloaded, "{stall:?}: nothing was answered, yet {:?}", f.report);
        let want = reference.run(g, inputs).expect("runs");
        let got = f.outputs.into_values();
        assert!(diff(&want[&output], &got[&output]).expect("comparable").ok(), "{stall:?}: a result changed");
        reports.push(f.report);
    }
    let numbers: Vec<u64> = reports.iter().map(|r| r.frame).collect();
    assert!(numbers.windows(2).all(|w| w[1] == w[0] + 1), "{stall:?}: frames out of order: {numbers:?}");
    // The link is opened again in the background: wait for it (bounded).
    for _ in 0..100 {
        if seen.connections.load(Ordering::Relaxed) >= 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(s);
    (reports, seen)
}

#[test]
fn a_silent_handheld_is_taken_as_lost_and_its_frames_run_here() {
    let (reports, seen) = run(Stall::Silent);
    let why: Vec<_> = reports.iter().filter_map(|r| r.fallback.clone()).collect();
    assert!(
        why.iter().any(|w| w.contains("no bytes from the handheld")),
        "no frame says the silence gave the link up: {why:?} {reports:?}"
    );
    assert!(seen.connections.load(Ordering::Relaxed) >= 2, "the wearable never opened the link again");
}

#[test]
fn a_handheld_that_misses_deadlines_is_told_to_cancel_then_dropped() {
    let (reports, seen) = run(Stall::Mute);
    let why: Vec<_> = reports.iter().filter_map(|r| r.fallback.clone()).collect();
    assert!(
        why.iter().any(|w| w.contains("missed") && w.contains("deadline")),
        "no frame says it missed its deadline: {why:?}"
    );
    let cancelled = seen.cancelled.lock().expect("lock").clone();
    assert!(
        cancelled.len() >= 3,
        "the handheld was told to cancel {cancelled:?}, fewer than the 3 misses that drop the link"
    );
    assert!(cancelled.windows(2).all(|w| w[0] < w[1]), "a frame cancelled twice: {cancelled:?}");
    assert!(
        seen.connections.load(Ordering::Relaxed) >= 2,
        "3 missed deadlines in a row did not drop the link"
    );
}

/// An idle wearable keeps its link: with nothing to send it sends a
/// keepalive every `keepalive`, so the handheld never takes it for idle.
#[test]
fn an_idle_wearable_sends_keepalives() {
    let model = mnist();
    let layers = model.model.graph().nodes().len();
    let runtime = runtime();
    let acceptor = runtime.block_on(TcpAcceptor::bind("127.0.0.1:0")).expect("bind");
    let addr = acceptor.local_addr().expect("addr").to_string();
    let seen = Arc::new(Seen::default());
    runtime.spawn(stalling(acceptor, Stall::Mute, layers, seen.clone()));
    let mut config = SessionConfig::watch_and_phone().expect("profiles");
    config.placement = Placement::HandheldOnly;
    config.keepalive = Duration::from_millis(100);
    let s = Session::open(model, Box::new(TcpTransport::new(addr)), config).expect("session");
    assert!(s.is_ready());
    std::thread::sleep(Duration::from_millis(1000));
    let n = seen.keepalives.load(Ordering::Relaxed);
    assert!((3..=30).contains(&n), "{n} keepalives in 1 s at one per 100 ms of silence");
    assert_eq!(seen.connections.load(Ordering::Relaxed), 1);
}
