//! A malicious handheld on a real socket: NaN, huge, negative or
//! miscounted latency profiles and status values, a device name that is a
//! path, answers of the wrong shape, and answers for frames never sent.
//! The wearable never panics: every frame is delivered once, in order,
//! equal to the unsplit model's, run here when the handheld cannot be
//! trusted with it.

use std::time::Duration;

use tandem::check::{diff, random_inputs};
use tandem::client::{Backoff, ModelFile, Placement, Session, SessionConfig};
use tandem::link::{Acceptor, TcpAcceptor, TcpTransport};
use tandem::protocol::{
    encode, FrameDecoder, Header, LatencySummary, Message, StatusReport, PROTOCOL_VERSION,
};
use tandem::{InputShapes, Tensor};

#[derive(Clone, Copy, Debug)]
enum Attack {
    NanLatency,
    HugeLatency,
    NegativeOverhead,
    MiscountedLatency,
    NegativeLoad,
    NanStatusLater,
    WrongShape,
    FrameNeverSent,
}

use crate::fake_handheld::GOOD;

/// Serves every connection with `attack`, speaking the protocol by hand.
async fn hostile(mut acceptor: TcpAcceptor, attack: Attack, layers: usize, output: String) {
    loop {
        let Ok(mut link) = acceptor.accept().await else { return };
        let output = output.clone();
        tokio::spawn(async move {
            let mut decoder = FrameDecoder::default();
            let send = |m: Message| encode(&m).expect("encodes");
            while let Ok(Some(bytes)) = link.rx.recv().await {
                let (messages, failed) = decoder.push_and_decode(&bytes);
                if failed.is_some() {
                    return;
                }
                for m in messages {
                    let replies = match m.header {
                        Header::Hello { .. } => {
                            let status = match attack {
                                Attack::NegativeLoad => StatusReport { load: -5.0, ..GOOD },
                                _ => GOOD,
                            };
                            let mut per_layer_s = vec![1e-4; layers];
                            let mut overhead_s = 1e-4;
                            match attack {
                                Attack::NanLatency => per_layer_s[0] = f64::NAN,
                                Attack::HugeLatency => per_layer_s[0] = 1e300,
                                Attack::NegativeOverhead => overhead_s = -1.0,
                                Attack::MiscountedLatency => per_layer_s.pop().map_or((), drop),
                                _ => {}
                            }
                            let mut out = vec![
                                // A device name that is a path: never read as one.
                                Message::new(Header::Welcome {
                                    version: PROTOCOL_VERSION,
                                    device: "../../../../etc/passwd".into(),
                                    has_model: true,
                                    status,
                                    engines: vec![Default::default()],
                                }),
                                Message::new(Header::ModelReady {
                                    latency: LatencySummary {
                                        per_layer_s,
                                        overhead_s,
                                        engine: Default::default(),
                                        others: vec![],
                                    },
                                }),
                            ];
                            if let Attack::NanStatusLater = attack {
                                out.push(Message::new(Header::Status(StatusReport {
                                    battery: f32::NAN,
                                    ..GOOD
                                })));
                            }
                            out
                        }
                        Header::RunSuffix { frame, .. } => {
                            let (frame, shape) = match attack {
                                Attack::FrameNeverSent => (frame + 1000, vec![1, 10]),
                                _ => (frame, vec![1, 3]),
                            };
                            let t = Tensor::zero::<f32>(&shape).expect("tensor");
                            vec![tandem::session::HandheldSession::result(
                                frame,
                                10,
                                &[(output.clone(), tandem::wire::to_wire(&t).expect("crosses"))],
                                &[],
                                None,
                            )
                            .expect("result")]
                        }
                        _ => vec![],
                    };
                    for r in replies {
                        if link.tx.send(send(r)).await.is_err() {
                            return;
                        }
                    }
                }
            }
        });
    }
}

#[test]
fn a_hostile_handheld_never_crashes_the_wearable_nor_changes_a_result() {
    let path = tandem_models::ensure_models().expect("zoo").zoo_path("mnist").expect("mnist").to_path_buf();
    let model = ModelFile::load(&path, &InputShapes::none()).expect("model");
    let g = model.model.graph();
    let output = g.tensor(g.outputs()[0]).name.clone();
    let reference = tandem::split::full_plan(&model.model).expect("plan");
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("rt");
    for attack in [
        Attack::NanLatency,
        Attack::HugeLatency,
        Attack::NegativeOverhead,
        Attack::MiscountedLatency,
        Attack::NegativeLoad,
        Attack::NanStatusLater,
        Attack::WrongShape,
        Attack::FrameNeverSent,
    ] {
        let acceptor = runtime.block_on(TcpAcceptor::bind("127.0.0.1:0")).expect("bind");
        let addr = acceptor.local_addr().expect("addr").to_string();
        runtime.spawn(hostile(acceptor, attack, g.nodes().len(), output.clone()));
        let mut config = SessionConfig::watch_and_phone().expect("profiles");
        config.placement = Placement::HandheldOnly;
        config.ready_timeout = Duration::from_secs(2);
        config.backoff = Backoff { initial: Duration::from_millis(50), max: Duration::from_millis(200) };
        let mut s = Session::open(model.clone(), Box::new(TcpTransport::new(addr)), config).expect("session");
        let frames: Vec<_> = (0..4).map(|i| random_inputs(&model.model, i).expect("inputs")).collect();
        let results = s.stream(frames.clone()).expect("the stream runs");
        assert_eq!(results.len(), 4, "{attack:?}: a frame was lost");
        let mut numbers = vec![];
        for (r, inputs) in results.into_iter().zip(&frames) {
            let f = r.unwrap_or_else(|e| panic!("{attack:?}: a frame failed: {e}"));
            assert!(!f.report.offloaded, "{attack:?}: a hostile handheld's answer was taken: {:?}", f.report);
            let want = reference.run(g, inputs).expect("runs");
            let got = f.outputs.into_values();
            assert!(
                diff(&want[&output], &got[&output]).expect("comparable").ok(),
                "{attack:?}: a result changed"
            );
            numbers.push(f.report.frame);
        }
        assert!(numbers.windows(2).all(|w| w[1] == w[0] + 1), "{attack:?}: frames out of order: {numbers:?}");
    }
}

/// A handheld that floods the wearable with probes asking for their 1 MiB
/// padding back, and does not read: the wearable queues at most a few
/// echoes (`MAX_QUEUED_ECHOES`, 16) and drops the rest, rather than
/// holding every echo in memory. Counted when the handheld reads again.
#[test]
fn a_handheld_that_probes_without_reading_cannot_fill_the_wearables_memory() {
    use tandem::link::Link;
    let model = crate::fake_handheld::mnist();
    let layers = model.model.graph().nodes().len();
    let runtime = crate::fake_handheld::runtime();
    let mut acceptor = runtime.block_on(TcpAcceptor::bind("127.0.0.1:0")).expect("bind");
    let addr = acceptor.local_addr().expect("addr").to_string();
    const PROBES: u64 = 120;
    let echoes = runtime.spawn(async move {
        let Link { mut tx, mut rx, .. } = acceptor.accept().await.expect("accept");
        let mut decoder = FrameDecoder::default();
        // The handshake, then the flood.
        loop {
            let bytes = rx.recv().await.expect("recv").expect("open");
            let (messages, _) = decoder.push_and_decode(&bytes);
            if messages.iter().any(|m| matches!(m.header, Header::Hello { .. })) {
                break;
            }
        }
        for m in crate::fake_handheld::ready(layers) {
            tx.send(encode(&m).expect("encodes")).await.expect("send");
        }
        for id in 0..PROBES {
            let m = Message { header: Header::Probe { id, echo_payload: true }, body: vec![0; 1 << 20] };
            tx.send(encode(&m).expect("encodes")).await.expect("send");
        }
        // Let the wearable answer (or not) while nothing is read, then read it all.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let mut echoes = 0;
        let read = async {
            while let Ok(Some(bytes)) = rx.recv().await {
                let (messages, _) = decoder.push_and_decode(&bytes);
                echoes += messages.iter().filter(|m| matches!(m.header, Header::Echo { .. })).count();
            }
        };
        let _ = tokio::time::timeout(Duration::from_secs(3), read).await;
        echoes
    });
    let mut config = SessionConfig::watch_and_phone().expect("profiles");
    config.placement = Placement::HandheldOnly;
    config.link_silence = Duration::from_secs(600);
    let s = Session::open(model, Box::new(TcpTransport::new(addr)), config).expect("session");
    let echoes = runtime.block_on(echoes).expect("the flood ran");
    drop(s);
    // 16 queued, plus what the sockets' buffers held when the queue filled.
    assert!(
        echoes < PROBES as usize / 2,
        "{echoes} of {PROBES} 1 MiB echoes were queued for a handheld not reading"
    );
    assert!(echoes >= 1, "probes are still answered");
}
