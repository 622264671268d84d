//! Both sides' session state machines, driven message by message: the
//! handshake with and without a model push, digest and version refusals,
//! messages out of order, frame ordering, probes, close; and the two
//! sessions talking over encoded bytes, where a dropped link hands every
//! unanswered frame back to the wearable, in order.

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use crate::tract::pack_tensor;
use tandem_core::{CutKey, InputShapes, Tensor};
use tandem_proto::encoding::Encoding;
use tandem_proto::protocol::{
    encode, model_digest, ErrorCode, FrameDecoder, Header, LatencySummary, Message, ProtocolError,
    StatusReport, PROTOCOL_VERSION,
};
use tandem_proto::session::{Action, HandheldSession, WearableAction, WearableSession};

/// The sessions' clock: one instant, time is not what these tests are about.
fn t0() -> Instant {
    static T0: OnceLock<Instant> = OnceLock::new();
    *T0.get_or_init(Instant::now)
}

fn status() -> StatusReport {
    StatusReport { load: 0.1, queue: 0, battery: 0.9, charging: true }
}

fn hello(digest: [u8; 32], size: u64) -> Message {
    hello_with(digest, size, &[], &[])
}

fn hello_with(digest: [u8; 32], size: u64, input_shapes: &[&str], dims: &[&str]) -> Message {
    Message::new(Header::Hello {
        version: PROTOCOL_VERSION,
        model_digest: digest,
        model_bytes: size,
        device: "watch-w5".into(),
        input_shapes: input_shapes.iter().map(|s| s.to_string()).collect(),
        dims: dims.iter().map(|s| s.to_string()).collect(),
    })
}

fn summary() -> LatencySummary {
    LatencySummary {
        per_layer_s: vec![1e-3; 3],
        overhead_s: 1e-4,
        engine: Default::default(),
        others: vec![],
    }
}

fn error_code(actions: &[Action]) -> Option<ErrorCode> {
    actions.iter().find_map(|a| match a {
        Action::Send(Message { header: Header::Error { code, .. }, .. }) => Some(*code),
        _ => None,
    })
}

/// A handheld's `Welcome`: it has the model and offers `engines`.
fn welcome(engines: Vec<tandem_proto::protocol::Engine>) -> Message {
    Message::new(Header::Welcome {
        version: PROTOCOL_VERSION,
        device: "p".into(),
        has_model: true,
        status: status(),
        engines,
    })
}

/// A wearable session past the handshake with a handheld that has `model`.
fn ready_wearable(model: Vec<u8>) -> WearableSession {
    let mut w = WearableSession::new("watch-w5", Arc::new(model), InputShapes::none(), 2);
    w.start(t0());
    w.on_message(welcome(vec![Default::default()]));
    w.on_message(Message::new(Header::ModelReady { latency: summary() }));
    w
}

/// The handheld offers its engines in its `Welcome`; a `ModelReady` whose
/// suffixes run on an engine it did not offer is refused, one it offered is
/// taken.
#[test]
fn a_model_ready_on_an_engine_not_offered_is_refused() {
    use tandem_proto::protocol::Engine;
    for (offered, runs_on, ok) in [
        (vec![Engine::Tract], Engine::OnnxRuntime, false),
        (vec![Engine::Tract, Engine::OnnxRuntime], Engine::OnnxRuntime, true),
        (vec![], Engine::Tract, false),
    ] {
        let mut w = WearableSession::new("watch-w5", Arc::new(vec![1, 2, 3]), InputShapes::none(), 2);
        w.start(t0());
        w.on_message(welcome(offered.clone()));
        let latency = LatencySummary { engine: runs_on, ..summary() };
        let a = w.on_message(Message::new(Header::ModelReady { latency }));
        let ready =
            a.iter().any(|a| matches!(a, WearableAction::Ready { latency, .. } if latency.engine == runs_on));
        assert_eq!(ready, ok, "offered {offered:?}, runs on {runs_on}: {a:?}");
        assert_eq!(w.is_closed(), !ok, "offered {offered:?}, runs on {runs_on}");
    }
}

/// The handheld's times on its other engines are checked as its own are:
/// each an engine it offered, once, not the model's own, with one finite
/// time per layer; a `ModelReady` with any other is refused.
#[test]
fn the_times_of_other_engines_are_checked_as_the_model_s_own() {
    use tandem_proto::protocol::{Engine, EngineLatency};
    let other = |engine, per_layer_s: Vec<f64>| EngineLatency { engine, per_layer_s, overhead_s: 1e-4 };
    let both = vec![Engine::Tract, Engine::OnnxRuntime];
    let fine = other(Engine::OnnxRuntime, vec![5e-4; 3]);
    for (what, offered, others, ok) in [
        ("the other engine offered", both.clone(), vec![fine.clone()], true),
        ("not offered", vec![Engine::Tract], vec![fine.clone()], false),
        ("the model's own again", both.clone(), vec![other(Engine::Tract, vec![5e-4; 3])], false),
        ("named twice", both.clone(), vec![fine.clone(), fine.clone()], false),
        ("a NaN", both.clone(), vec![other(Engine::OnnxRuntime, vec![5e-4, f64::NAN, 5e-4])], false),
        ("a time per layer missing", both.clone(), vec![other(Engine::OnnxRuntime, vec![5e-4; 2])], false),
    ] {
        let mut w = WearableSession::new("watch-w5", Arc::new(vec![1, 2, 3]), InputShapes::none(), 2)
            .expect_layers(3);
        w.start(t0());
        w.on_message(welcome(offered));
        let latency = LatencySummary { others, ..summary() };
        let a = w.on_message(Message::new(Header::ModelReady { latency }));
        let ready = a.iter().any(|a| matches!(a, WearableAction::Ready { .. }));
        assert_eq!((ready, w.is_closed()), (ok, !ok), "{what}: {a:?}");
    }
}

/// A frame or a build ahead may name an engine the handheld offered (the
/// run carries it); naming one it did not offer closes the connection,
/// saying which it offered.
#[test]
fn a_frame_on_an_engine_not_offered_is_refused() {
    use tandem_proto::protocol::Engine;
    let digest = [9; 32];
    let on = |engine: Option<Engine>, frame| {
        let mut m = run(frame);
        if let Header::RunSuffix { engine: e, .. } = &mut m.header {
            *e = engine;
        }
        m
    };
    let ready = |offered: Vec<Engine>| {
        let mut s = HandheldSession::new("p", status(), t0()).engines(offered);
        s.on_message(hello(digest, 0), |_| true);
        s.model_loaded(summary());
        assert!(s.is_ready());
        s
    };
    let mut s = ready(vec![Engine::Tract, Engine::OnnxRuntime]);
    let a = s.on_message(on(Some(Engine::OnnxRuntime), 1), |_| false);
    assert!(matches!(&a[..], [Action::Run { frame: 1, engine: Some(Engine::OnnxRuntime), .. }]), "{a:?}");
    let prepare = Message::new(Header::Prepare { cuts: vec!["1".into()], engine: Some(Engine::OnnxRuntime) });
    let a = s.on_message(prepare, |_| false);
    assert!(matches!(&a[..], [Action::Prepare { engine: Some(Engine::OnnxRuntime), .. }]), "{a:?}");
    let mut s = ready(vec![Engine::Tract]);
    let a = s.on_message(on(Some(Engine::OnnxRuntime), 1), |_| false);
    assert_eq!(error_code(&a), Some(ErrorCode::Unexpected));
    let reason = a.iter().find_map(|a| match a {
        Action::Send(Message { header: Header::Error { reason, .. }, .. }) => Some(reason.clone()),
        _ => None,
    });
    assert!(reason.as_deref().is_some_and(|r| r.contains("it offered tract")), "{reason:?}");
    assert!(s.is_closed());
}

fn run(frame: u64) -> Message {
    let x = Tensor::from_shape(&[2], &[1.0f32, 2.0]).expect("tensor");
    crate::tract::with_tensors(
        |tensors| Header::RunSuffix {
            frame,
            cut: "1".into(),
            tensors,
            answer: vec![],
            edge: None,
            engine: None,
        },
        &[("x".into(), &x)],
    )
    .expect("message")
}

#[test]
fn a_pushed_model_is_verified_loaded_and_then_suffixes_run_in_order() {
    let model = b"pretend these are ONNX bytes".repeat(10);
    let digest = model_digest(&model);
    let mut s = HandheldSession::new("pixel-8-pro", status(), t0());
    let a = s.on_message(hello(digest, model.len() as u64), |_| false);
    assert!(
        matches!(&a[..], [Action::Send(Message { header: Header::Welcome { has_model: false, .. }, .. })]),
        "{a:?}"
    );
    // Two chunks; nothing happens until the last byte.
    let (first, second) = model.split_at(100);
    assert_eq!(
        s.on_message(Message { header: Header::ModelChunk { offset: 0 }, body: first.to_vec() }, |_| false),
        vec![]
    );
    let a = s
        .on_message(Message { header: Header::ModelChunk { offset: 100 }, body: second.to_vec() }, |_| false);
    assert_eq!(
        a,
        vec![Action::LoadPushed {
            digest,
            bytes: model.clone(),
            shapes: InputShapes::none(),
            reservation: None
        }]
    );
    assert!(!s.is_ready());
    let a = s.model_loaded(summary());
    assert!(matches!(&a[..], [Action::Send(Message { header: Header::ModelReady { .. }, .. })]));
    assert!(s.is_ready());
    for frame in [1, 2, 5] {
        let a = s.on_message(run(frame), |_| false);
        match &a[..] {
            [Action::Run { frame: f, cut, tensors, .. }] => {
                assert_eq!((*f, cut.as_str()), (frame, "1"));
                assert_eq!(tensors.decode().expect("tensors")[0].0, "x");
            }
            other => panic!("{other:?}"),
        }
        let answer = Message::new(Header::Bye);
        assert_eq!(s.frame_done(t0(), frame, Ok(answer.clone())), vec![Action::Send(answer)]);
    }
    // A repeated or older frame is refused: no frame runs twice.
    let a = s.on_message(run(5), |_| false);
    assert_eq!(error_code(&a), Some(ErrorCode::Unexpected));
    assert_eq!(a.last(), Some(&Action::Close));
    assert!(s.is_closed());
}

#[test]
fn a_known_model_is_loaded_without_a_push_with_the_wearables_overrides() {
    let digest = [9; 32];
    let mut s = HandheldSession::new("pixel-8-pro", status(), t0());
    let a = s.on_message(hello_with(digest, 1234, &["x=2,4"], &["batch=2"]), |d| *d == digest);
    let want = InputShapes::parse_with_dims(&["x=2,4"], &["batch=2"]).expect("specs");
    assert!(
        matches!(&a[..], [Action::Send(Message { header: Header::Welcome { has_model: true, .. }, .. }), Action::LoadKnown { digest: d, shapes }] if *d == digest && *shapes == want),
        "{a:?}"
    );
    assert_eq!(s.digest(), Some(digest));
    s.model_loaded(summary());
    assert!(s.is_ready());
}

/// Overrides a wearable sends are bounded and must parse; the refusal says
/// which rule they broke, before any model is loaded or pushed.
#[test]
fn bad_overrides_are_refused_before_loading() {
    let many: Vec<String> = (0..65).map(|i| format!("x{i}=1")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    let long = format!("x={}", vec!["1"; 200].join(","));
    let cases: [(&[&str], &[&str], &str); 4] = [
        (&many, &[], "exceed 64"),
        (&[long.as_str()], &[], "exceeds 256"),
        (&["x=0,4"], &[], "positive"),
        (&[], &["batch"], "bad input-shape override"),
    ];
    for (specs, dims, says) in cases {
        let mut s = HandheldSession::new("p", status(), t0());
        let a = s.on_message(hello_with([1; 32], 10, specs, dims), |_| true);
        let reason = a.iter().find_map(|a| match a {
            Action::Send(Message { header: Header::Error { code: ErrorCode::Model, reason }, .. }) => {
                Some(reason)
            }
            _ => None,
        });
        assert!(reason.is_some_and(|r| r.contains(says)), "{says}: {a:?}");
        assert!(!a.iter().any(|a| matches!(a, Action::LoadKnown { .. })), "{a:?}");
        assert!(s.is_closed());
    }
}

#[test]
fn refusals_name_what_went_wrong_and_close() {
    // Another protocol version.
    let mut s = HandheldSession::new("p", status(), t0());
    let mut m = hello([0; 32], 10);
    if let Header::Hello { version, .. } = &mut m.header {
        *version = PROTOCOL_VERSION + 1;
    }
    let a = s.on_message(m, |_| false);
    assert_eq!(error_code(&a), Some(ErrorCode::Version));
    assert!(s.is_closed());
    // A pushed model whose bytes do not match the digest.
    let mut s = HandheldSession::new("p", status(), t0());
    s.on_message(hello(model_digest(b"right"), 5), |_| false);
    let a = s
        .on_message(Message { header: Header::ModelChunk { offset: 0 }, body: b"wrong".to_vec() }, |_| false);
    assert_eq!(error_code(&a), Some(ErrorCode::Digest));
    // A chunk out of order, and a push longer than announced.
    let mut s = HandheldSession::new("p", status(), t0());
    s.on_message(hello([1; 32], 5), |_| false);
    let a = s.on_message(Message { header: Header::ModelChunk { offset: 3 }, body: vec![0; 2] }, |_| false);
    assert_eq!(error_code(&a), Some(ErrorCode::Unexpected));
    let mut s = HandheldSession::new("p", status(), t0());
    s.on_message(hello([1; 32], 5), |_| false);
    let a = s.on_message(Message { header: Header::ModelChunk { offset: 0 }, body: vec![0; 6] }, |_| false);
    assert_eq!(error_code(&a), Some(ErrorCode::Model));
    // A run before the handshake.
    let mut s = HandheldSession::new("p", status(), t0());
    let a = s.on_message(run(1), |_| false);
    assert_eq!(error_code(&a), Some(ErrorCode::Unexpected));
    // Bytes that did not decode.
    let mut s = HandheldSession::new("p", status(), t0());
    let a = s.on_decode_error(&ProtocolError::BadHeader("garbage".into()));
    assert_eq!(error_code(&a), Some(ErrorCode::Malformed));
    assert!(s.is_closed());
    // A model that fails to load.
    let mut s = HandheldSession::new("p", status(), t0());
    s.on_message(hello([2; 32], 5), |_| true);
    assert_eq!(error_code(&s.model_failed("unsupported op Foo")), Some(ErrorCode::Model));
}

#[test]
fn probes_echo_in_any_state_and_bye_closes() {
    let mut s = HandheldSession::new("p", status(), t0());
    let a = s.on_message(
        Message { header: Header::Probe { id: 4, echo_payload: true }, body: vec![3; 50] },
        |_| false,
    );
    assert_eq!(
        a,
        vec![Action::Send(Message { header: Header::Echo { id: 4, received: 50 }, body: vec![3; 50] })]
    );
    let a = s.on_message(
        Message { header: Header::Probe { id: 5, echo_payload: false }, body: vec![3; 50] },
        |_| false,
    );
    assert_eq!(a, vec![Action::Send(Message::new(Header::Echo { id: 5, received: 50 }))]);
    assert!(s.status_message().is_some());
    assert_eq!(s.on_message(Message::new(Header::Bye), |_| false), vec![Action::Close]);
    assert!(s.is_closed() && s.status_message().is_none());
}

#[test]
fn results_carry_the_outputs() {
    let y = Tensor::from_shape(&[1, 3], &[0.2f32, 0.3, 0.5]).expect("tensor");
    let m = crate::tract::result(9, 1500, &[("y".into(), &y)], &[]).expect("result");
    assert!(matches!(m.header, Header::Result { frame: 9, handheld_compute_us: 1500, .. }));
    assert_eq!(crate::tract::tensors(&m).expect("tensors"), vec![("y".to_string(), y)]);
}

#[test]
fn results_come_back_in_the_lossless_encodings_asked_for_and_never_lossy() {
    let probs: Vec<f32> = (0..4000).map(|i| if i % 97 == 0 { 0.9 } else { 1e-6 }).collect();
    let y = Tensor::from_shape(&[40, 100], &probs).expect("tensor");
    let z = Tensor::from_shape(&[2], &[1.5f32, -2.0]).expect("tensor");
    let outputs = [("y".to_string(), &y), ("z".to_string(), &z), ("w".to_string(), &y)];
    // Shuffle + LZ4 for y; f16 (lossy) and u8 (a sensor's) are refused: raw.
    let asked = [Encoding::ShuffleLz4, Encoding::F16, Encoding::U8Lz4];
    let m = deliver(&crate::tract::result(3, 10, &outputs, &asked).expect("result"));
    let Header::Result { tensors, .. } = &m.header else { panic!("a result") };
    let used: Vec<Encoding> = tensors.iter().map(|t| t.encoding).collect();
    assert_eq!(used, [Encoding::ShuffleLz4, Encoding::Raw, Encoding::Raw]);
    assert!(m.body.len() < 16_000 + 8 + 8_000, "y shrank: {} body bytes", m.body.len());
    let back = crate::tract::tensors(&m).expect("tensors");
    assert_eq!(back, outputs.iter().map(|(n, t)| (n.clone(), (*t).clone())).collect::<Vec<_>>());
}

/// Carries messages between the two sessions as encoded bytes, as a link would.
fn deliver(m: &Message) -> Message {
    let mut d = FrameDecoder::default();
    d.push(&encode(m).expect("encodes"));
    d.next_message().expect("decodes").expect("whole frame")
}

#[test]
fn both_sessions_handshake_push_and_run_frames_over_encoded_bytes() {
    let model = Arc::new((0..10_000u32).flat_map(|i| i.to_le_bytes()).collect::<Vec<u8>>());
    let mut w = WearableSession::new("watch-w5", model.clone(), InputShapes::none(), 4096);
    let mut h = HandheldSession::new("pixel-8-pro", status(), t0());
    let mut to_handheld: Vec<Message> = w
        .start(t0())
        .into_iter()
        .filter_map(|a| if let WearableAction::Send(m) = a { Some(m) } else { None })
        .collect();
    let mut ready = None;
    let mut loads = 0;
    // Pump messages both ways until the handshake settles.
    for _ in 0..10 {
        let mut to_wearable = vec![];
        for m in to_handheld.drain(..) {
            for a in h.on_message(deliver(&m), |_| false) {
                match a {
                    Action::Send(m) => to_wearable.push(m),
                    Action::LoadPushed { bytes, .. } => {
                        assert_eq!(&bytes, model.as_ref(), "the pushed model arrives intact");
                        loads += 1;
                        for a in h.model_loaded(summary()) {
                            if let Action::Send(m) = a {
                                to_wearable.push(m);
                            }
                        }
                    }
                    other => panic!("{other:?}"),
                }
            }
        }
        for m in to_wearable {
            for a in w.on_message(deliver(&m)) {
                match a {
                    WearableAction::Send(m) => to_handheld.push(m),
                    WearableAction::Ready { device, latency } => ready = Some((device, latency)),
                    WearableAction::Status(_) => {}
                    other => panic!("{other:?}"),
                }
            }
        }
    }
    assert_eq!(loads, 1);
    assert_eq!(ready, Some(("pixel-8-pro".to_string(), summary())));
    assert!(w.is_ready() && h.is_ready());
    // Three frames out, answered in order.
    let x = Tensor::from_shape(&[2], &[1.0f32, 2.0]).expect("tensor");
    for frame in 1..=3 {
        let m = w
            .offload(
                t0(),
                frame,
                "1".into(),
                vec![pack_tensor("x", &x, Encoding::Raw, None).expect("packs")],
                vec![],
                None,
            )
            .expect("ready");
        match &h.on_message(deliver(&m), |_| false)[..] {
            [Action::Run { frame: f, .. }] => assert_eq!(*f, frame),
            other => panic!("{other:?}"),
        }
        // Its answer is made below, by hand; the next frame can run.
        h.frame_done(t0(), frame, Ok(Message::new(Header::Bye)));
    }
    assert_eq!(w.in_flight(), vec![1, 2, 3]);
    let y = crate::tract::result(1, 100, &[("y".into(), &x)], &[]).expect("result");
    assert!(matches!(&w.on_message(deliver(&y))[..], [WearableAction::Delivered { frame: 1, .. }]));
    // The link drops: frames 2 and 3 run locally, in order, and none is lost.
    assert_eq!(w.on_disconnect(), vec![WearableAction::RunLocally(vec![2, 3])]);
    assert!(w.in_flight().is_empty() && w.is_closed());
}

#[test]
fn a_result_out_of_order_or_an_error_returns_the_frames_to_the_wearable() {
    let mut w = ready_wearable(vec![1, 2, 3]);
    let x = Tensor::from_shape(&[1], &[1.0f32]).expect("tensor");
    for frame in [10, 11] {
        w.offload(
            t0(),
            frame,
            "1".into(),
            vec![pack_tensor("x", &x, Encoding::Raw, None).expect("packs")],
            vec![],
            None,
        )
        .expect("ready");
    }
    let wrong = crate::tract::result(11, 1, &[("y".into(), &x)], &[]).expect("result");
    let a = w.on_message(wrong);
    assert!(a.contains(&WearableAction::RunLocally(vec![10, 11])), "{a:?}");
    assert_eq!(a.last(), Some(&WearableAction::Close));
    // A handheld error also returns what was in flight.
    let mut w = ready_wearable(vec![1]);
    w.offload(t0(), 1, CutKey::default(), vec![], vec![], None).expect("ready");
    let a = w.on_message(Message::new(Header::Error { code: ErrorCode::Model, reason: "boom".into() }));
    assert_eq!(a, vec![WearableAction::RunLocally(vec![1]), WearableAction::Close]);
    // Not ready: nothing is offloaded.
    let mut w = WearableSession::new("watch-w5", Arc::new(vec![1]), InputShapes::none(), 2);
    assert_eq!(w.offload(t0(), 1, CutKey::default(), vec![], vec![], None), None);
    // Another version in the Welcome.
    w.start(t0());
    let a = w.on_message(Message::new(Header::Welcome {
        version: 99,
        device: "p".into(),
        has_model: true,
        status: status(),
        engines: vec![],
    }));
    assert!(
        matches!(
            &a[0],
            WearableAction::Send(Message { header: Header::Error { code: ErrorCode::Version, .. }, .. })
        ),
        "{a:?}"
    );
}

/// Building cuts ahead: a ready handheld turns `Prepare` into one action
/// (at most `MAX_PREPARE` cuts; more is refused and closes), a handheld
/// still loading refuses it, and the answer reaches the wearable's side
/// over encoded bytes as `Prepared`, with the reason when a build failed.
#[test]
fn prepares_are_bounded_answered_and_refused_before_the_model_is_ready() {
    use tandem_proto::protocol::MAX_PREPARE;
    let digest = [3; 32];
    let ready = || {
        let mut s = HandheldSession::new("pixel-8-pro", status(), t0());
        s.on_message(hello(digest, 10), |d| *d == digest);
        s.model_loaded(summary());
        assert!(s.is_ready());
        s
    };
    let prepare = |n: usize| {
        Message::new(Header::Prepare { cuts: (0..n).map(|i| format!("{i:x}")).collect(), engine: None })
    };
    let mut s = ready();
    let a = s.on_message(deliver(&prepare(2)), |_| true);
    assert_eq!(a, vec![Action::Prepare { cuts: vec!["0".into(), "1".into()], engine: None }]);
    assert!(s.is_ready(), "a prepare keeps the session ready");
    let mut s = ready();
    let a = s.on_message(prepare(MAX_PREPARE + 1), |_| true);
    assert_eq!(error_code(&a), Some(ErrorCode::Unexpected), "{a:?}");
    assert!(s.is_closed());
    let mut loading = HandheldSession::new("pixel-8-pro", status(), t0());
    loading.on_message(hello(digest, 10), |d| *d == digest);
    let a = loading.on_message(prepare(1), |_| true);
    assert_eq!(error_code(&a), Some(ErrorCode::Unexpected), "{a:?}");

    // The wearable's side: only a ready session asks; the answer is an action.
    let model = Arc::new(vec![1u8; 64]);
    let mut w = WearableSession::new("watch-w5", model.clone(), InputShapes::none(), 4096);
    assert_eq!(w.prepare(t0(), vec!["7".into()]), None, "not ready yet");
    w.start(t0());
    let welcome = Message::new(Header::Welcome {
        version: PROTOCOL_VERSION,
        device: "pixel-8-pro".into(),
        has_model: true,
        status: status(),
        engines: vec![Default::default()],
    });
    w.on_message(deliver(&welcome));
    w.on_message(deliver(&Message::new(Header::ModelReady { latency: summary() })));
    assert!(w.is_ready());
    let asked = w.prepare(t0(), (0..20).map(|i| format!("{i:x}").into()).collect()).expect("ready");
    assert!(matches!(&asked.header, Header::Prepare { cuts, .. } if cuts.len() == MAX_PREPARE), "{asked:?}");
    let answer = HandheldSession::prepared("7".into(), 1200, Some("no such cut".into()));
    assert_eq!(
        w.on_message(deliver(&answer)),
        vec![WearableAction::Prepared {
            cut: "7".into(),
            engine: None,
            build_us: 1200,
            error: Some("no such cut".into())
        }]
    );
}

/// Cancelling frames that missed their deadline: the wearable stops
/// expecting them and drops a late answer without failing; the handheld
/// passes on only frames it was sent, and refuses an oversized cancel.
#[test]
fn cancelled_frames_leave_both_sides_and_a_late_answer_is_dropped() {
    let mut w = ready_wearable(vec![1]);
    let x = Tensor::from_shape(&[1], &[1.0f32]).expect("tensor");
    for frame in [1, 2, 3] {
        w.offload(
            t0(),
            frame,
            "1".into(),
            vec![pack_tensor("x", &x, Encoding::Raw, None).expect("packs")],
            vec![],
            None,
        )
        .expect("ready");
    }
    let m = w.cancel(t0(), &[1, 2, 9]).expect("two were in flight");
    assert_eq!(m.header, Header::Cancel { frames: vec![1, 2] }, "only frames in flight are named");
    assert_eq!(w.in_flight(), vec![3]);
    assert_eq!(w.cancel(t0(), &[1]), None, "a frame is cancelled once");
    // Frame 2 was already running: its answer comes, and goes nowhere.
    let late = crate::tract::result(2, 1, &[("y".into(), &x)], &[]).expect("result");
    assert_eq!(w.on_message(late), vec![]);
    // Frame 3's answer is next in order, and is delivered.
    let on_time = crate::tract::result(3, 1, &[("y".into(), &x)], &[]).expect("result");
    assert!(matches!(&w.on_message(on_time)[..], [WearableAction::Delivered { frame: 3, .. }]));
    // An answer to frame 1 now (older than one already passed) is out of order.
    let stale = crate::tract::result(1, 1, &[("y".into(), &x)], &[]).expect("result");
    assert!(w.on_message(stale).contains(&WearableAction::Close));

    // Deadlines differ per frame: 6 may be cancelled before 5. Both late
    // answers are dropped, and 7's is delivered.
    let mut w = ready_wearable(vec![1]);
    for frame in [5, 6, 7] {
        w.offload(
            t0(),
            frame,
            "1".into(),
            vec![pack_tensor("x", &x, Encoding::Raw, None).expect("packs")],
            vec![],
            None,
        )
        .expect("ready");
    }
    w.cancel(t0(), &[6]).expect("in flight");
    w.cancel(t0(), &[5]).expect("in flight");
    for late in [5, 6] {
        let m = crate::tract::result(late, 1, &[("y".into(), &x)], &[]).expect("result");
        assert_eq!(w.on_message(m), vec![], "frame {late}'s late answer");
    }
    let on_time = crate::tract::result(7, 1, &[("y".into(), &x)], &[]).expect("result");
    assert!(matches!(&w.on_message(on_time)[..], [WearableAction::Delivered { frame: 7, .. }]));

    let digest = [9; 32];
    let mut h = HandheldSession::new("pixel-8-pro", status(), t0());
    h.on_message(hello(digest, 10), |d| *d == digest);
    h.model_loaded(summary());
    // Frames 4 and 5 are handed out to run (two at a time); 6 and 7 wait.
    for frame in [4, 5] {
        let a = h.on_message(run(frame), |_| true);
        assert!(matches!(&a[..], [Action::Run { frame: f, .. }] if *f == frame), "{a:?}");
    }
    for frame in [6, 7] {
        assert_eq!(h.on_message(run(frame), |_| true), vec![], "frame {frame} is queued");
    }
    assert_eq!(h.queued(), 4);
    // A queued frame cancelled never runs; frames never sent (8) are not
    // cancels; one handed out (5) is skipped, its result not sent.
    let a = h.on_message(Message::new(Header::Cancel { frames: vec![6, 8, 6, 5] }), |_| true);
    assert_eq!(a, vec![Action::Skip { frames: vec![5] }]);
    assert_eq!(h.queued(), 3, "4 and 5 handed out, 7 queued");
    let answer = Message::new(Header::Bye);
    let a = h.frame_done(t0(), 4, Ok(answer.clone()));
    assert!(matches!(&a[..], [Action::Send(m), Action::Run { frame: 7, .. }] if *m == answer), "{a:?}");
    assert_eq!(h.frame_done(t0(), 5, Ok(answer.clone())), vec![], "a cancelled frame's result is not sent");
    assert_eq!(h.queued(), 1);
    assert_eq!(h.on_message(Message::new(Header::Cancel { frames: vec![8] }), |_| true), vec![]);
    let a = h.on_message(Message::new(Header::Cancel { frames: (0..65).collect() }), |_| true);
    assert_eq!(error_code(&a), Some(ErrorCode::Unexpected), "{a:?}");
    assert!(h.is_closed());
    // Before the model is ready a cancel is out of order.
    let mut h = HandheldSession::new("pixel-8-pro", status(), t0());
    h.on_message(hello(digest, 10), |d| *d == digest);
    let a = h.on_message(Message::new(Header::Cancel { frames: vec![1] }), |_| true);
    assert_eq!(error_code(&a), Some(ErrorCode::Unexpected), "{a:?}");
    // Frames are done in the order handed out; any other order closes.
    let mut h = HandheldSession::new("pixel-8-pro", status(), t0());
    h.on_message(hello(digest, 10), |d| *d == digest);
    h.model_loaded(summary());
    h.on_message(run(1), |_| true);
    h.on_message(run(2), |_| true);
    let a = h.frame_done(t0(), 2, Ok(Message::new(Header::Bye)));
    assert_eq!(error_code(&a), Some(ErrorCode::Unexpected), "{a:?}");
    assert!(h.is_closed());
}

/// Pushes in progress share one budget over a handheld's connections: one
/// that does not fit now is told busy, one larger than the whole budget is
/// refused for good, and a push's share comes back once its model is
/// loaded or refused, its connection closed and its load dropped.
#[test]
fn pushes_in_progress_share_one_budget_across_connections() {
    use tandem_proto::session::PushBudget;
    let budget = PushBudget::new(1000);
    let session = || HandheldSession::new("pixel-8-pro", status(), t0()).push_budget(budget.clone());
    let model = vec![7u8; 600];
    let digest = model_digest(&model);
    let mut first = session();
    let a = first.on_message(hello(digest, 600), |_| false);
    assert!(matches!(&a[..], [Action::Send(Message { header: Header::Welcome { .. }, .. })]), "{a:?}");
    assert_eq!(budget.used(), 600);
    // A second push of 600 does not fit beside it: busy, nothing reserved.
    let mut second = session();
    assert_eq!(error_code(&second.on_message(hello([1; 32], 600), |_| false)), Some(ErrorCode::Busy));
    assert_eq!(budget.used(), 600);
    // Larger than the whole budget: refused as a model, not as busy.
    assert_eq!(error_code(&session().on_message(hello([2; 32], 1001), |_| false)), Some(ErrorCode::Model));
    // A model the handheld holds needs no push and no budget.
    let mut known = session();
    known.on_message(hello([3; 32], 600), |_| true);
    assert_eq!(budget.used(), 600);
    // The pushed bytes go to the load with their share: closing the
    // connection alone does not free it while the load holds the bytes.
    let a = first
        .on_message(Message { header: Header::ModelChunk { offset: 0 }, body: model.clone() }, |_| false);
    let Some(Action::LoadPushed { reservation: Some(held), .. }) = a.into_iter().next() else {
        panic!("no load with its reservation")
    };
    first.handle_link_closed(t0());
    assert_eq!(budget.used(), 600, "the load still holds the bytes");
    drop(held);
    assert_eq!(budget.used(), 0);
    // A refused load gives its share back.
    let mut third = session();
    third.on_message(hello(digest, 600), |_| false);
    let a = third.on_message(Message { header: Header::ModelChunk { offset: 0 }, body: model }, |_| false);
    drop(a);
    assert_eq!(budget.used(), 600);
    third.model_failed("tensor 'x' is too large");
    assert_eq!(budget.used(), 0);
}

/// The edge tier's rules: a relayed frame only once the shell attached an
/// edge, asks bounded in count and size, an answer nobody asked for
/// refused, and the edge report carried back with the frame's result.
#[test]
fn relays_need_an_attached_edge_and_edge_asks_are_bounded() {
    use tandem_proto::protocol::{EdgeReport, MAX_EDGE_CUTS, MAX_EDGE_SPEED, MAX_EDGE_URL};
    use tandem_proto::session::MAX_EDGE_ASKS;
    let digest = [9; 32];
    let ready = || {
        let mut s = HandheldSession::new("pixel-8-pro", status(), t0());
        s.on_message(hello(digest, 10), |d| *d == digest);
        s.model_loaded(summary());
        assert!(s.is_ready());
        s
    };
    let relayed = |frame: u64| {
        let mut m = run(frame);
        if let Header::RunSuffix { edge, .. } = &mut m.header {
            *edge = Some("3".into());
        }
        m
    };
    // Relayed before any edge: refused, naming why.
    let mut s = ready();
    let a = s.on_message(relayed(1), |_| true);
    assert_eq!(error_code(&a), Some(ErrorCode::Unexpected), "{a:?}");
    assert!(format!("{a:?}").contains("no edge is attached"), "{a:?}");
    // Asked, refused by the shell: still not attached.
    let mut s = ready();
    let ask = |url: &str, n: usize| {
        Message::new(Header::Edge { url: url.into(), cuts: (0..n).map(|i| format!("{i:x}")).collect() })
    };
    let a = s.on_message(ask("http://127.0.0.1:9", 2), |_| true);
    assert!(
        matches!(&a[..], [Action::Edge { url, cuts }] if url == "http://127.0.0.1:9" && cuts.len() == 2),
        "{a:?}"
    );
    s.edge_ready("http://127.0.0.1:9", vec![], (0, None), Some("not allowed".into()));
    assert_eq!(s.edge(), None);
    assert_eq!(error_code(&s.on_message(relayed(1), |_| true)), Some(ErrorCode::Unexpected));
    // Attached: relayed frames run with S2's key.
    let mut s = ready();
    s.on_message(ask("http://127.0.0.1:9", 1), |_| true);
    let m =
        s.edge_ready("http://127.0.0.1:9", vec![CutKey::from_wire("3".to_string())], (250, Some(3.5)), None);
    assert!(
        matches!(&m.header, Header::EdgeReady { deployed, rtt_us: 250, speed: Some(3.5), error: None } if deployed == &["3"])
    );
    // A speed that is not one is not sent.
    for bad in [f64::NAN, 0.0, -1.0, f64::INFINITY, MAX_EDGE_SPEED * 2.0] {
        let m = ready().edge_ready("http://127.0.0.1:9", vec![], (1, Some(bad)), None);
        assert!(matches!(&m.header, Header::EdgeReady { speed: None, .. }), "{bad}: {m:?}");
    }
    assert_eq!(s.edge(), Some("http://127.0.0.1:9"));
    let a = s.on_message(relayed(1), |_| true);
    assert!(matches!(&a[..], [Action::Run { frame: 1, edge: Some(e), .. }] if e.as_str() == "3"), "{a:?}");
    // Too many cuts, too long a URL: refused; too many asks: answered with a refusal.
    let mut s = ready();
    assert_eq!(
        error_code(&s.on_message(ask("http://x", MAX_EDGE_CUTS + 1), |_| true)),
        Some(ErrorCode::Unexpected)
    );
    let mut s = ready();
    let long = format!("http://{}", "a".repeat(MAX_EDGE_URL));
    assert_eq!(error_code(&s.on_message(ask(&long, 1), |_| true)), Some(ErrorCode::Unexpected));
    let mut s = ready();
    for _ in 0..MAX_EDGE_ASKS {
        assert!(matches!(&s.on_message(ask("http://x", 1), |_| true)[..], [Action::Edge { .. }]));
    }
    let a = s.on_message(ask("http://x", 1), |_| true);
    assert!(
        matches!(&a[..], [Action::Send(Message { header: Header::EdgeReady { error: Some(why), .. }, .. })] if why.contains("at most")),
        "{a:?}"
    );
    assert!(!s.is_closed());
    // The wearable: an EdgeReady nobody asked for closes; one asked for is
    // handed up; a result's edge report reaches Delivered.
    let mut w = ready_wearable(vec![1, 2, 3]);
    let answer = Message::new(Header::EdgeReady {
        deployed: vec!["3".into()],
        rtt_us: 9,
        speed: Some(2.0),
        error: None,
    });
    w.on_message(answer.clone());
    assert!(w.is_closed(), "an unasked EdgeReady must close");
    let mut w = ready_wearable(vec![1, 2, 3]);
    assert!(w.edge(t0(), "http://127.0.0.1:9", vec![CutKey::from_wire("3".to_string())]).is_some());
    let a = w.on_message(answer);
    assert!(
        matches!(&a[..], [WearableAction::EdgeReady { deployed, rtt_us: 9, speed: Some(2.0), error: None }] if deployed.len() == 1),
        "{a:?}"
    );
    // A handheld claiming an edge of no speed, or of a speed past the cap, is malformed.
    for bad in [0.0, f64::NAN, MAX_EDGE_SPEED * 2.0] {
        let mut w = ready_wearable(vec![1, 2, 3]);
        w.edge(t0(), "http://127.0.0.1:9", vec![]);
        let m =
            Message::new(Header::EdgeReady { deployed: vec![], rtt_us: 9, speed: Some(bad), error: None });
        w.on_message(m);
        assert!(w.is_closed(), "{bad}: accepted");
    }
    let x = Tensor::from_shape(&[2], &[1.0f32, 2.0]).expect("tensor");
    w.offload(
        t0(),
        1,
        "1".into(),
        vec![pack_tensor("x", &x, Encoding::Raw, None).expect("packs")],
        vec![],
        Some(CutKey::from_wire("3".to_string())),
    )
    .expect("ready");
    let report = EdgeReport { near: "3".into(), up_bytes: 8, down_bytes: 8, edge_us: 40, error: None };
    let result = Message::new(Header::Result {
        frame: 1,
        handheld_compute_us: 5,
        tensors: vec![],
        edge: Some(report.clone()),
    });
    let a = w.on_message(result);
    assert!(
        matches!(&a[..], [WearableAction::Delivered { frame: 1, edge: Some(r), .. }] if *r == report),
        "{a:?}"
    );
}
