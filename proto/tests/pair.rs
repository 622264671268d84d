//! Both sessions over the `Pair` (byte queues, a virtual clock, a handheld
//! that runs each suffix in a set time): the timeouts, a stalled handheld,
//! cancels, the queue limit and backpressure, the prepare budget, answers
//! nobody asked for, and refusals told apart from lost links. Minutes of
//! protocol time run in microseconds, with no socket and no sleep.

use std::time::Duration;

use tandem_proto::encoding::Encoding;
use tandem_proto::pair::Pair;
use tandem_proto::protocol::{encode, pack_tensor, ErrorCode, Header, LatencySummary, Message, WireTensor};
use tandem_proto::session::{
    Action, CloseReason, HandheldLimits, HandheldSession, RunError, WearableAction, WearableTimers,
};

fn latency() -> LatencySummary {
    LatencySummary {
        per_layer_s: vec![1e-3; 4],
        overhead_s: 1e-4,
        engine: Default::default(),
        others: vec![],
    }
}

fn x(v: f32) -> WireTensor<'static> {
    WireTensor::from_f32(vec![2], &[v, v + 1.0]).expect("tensor")
}

/// A pair past the handshake, the model already on the handheld.
fn ready() -> Pair {
    let mut p = Pair::new(vec![7; 300], latency());
    p.connect();
    p.advance(Duration::from_millis(10));
    assert!(p.is_ready(), "{:?}", p.events);
    p
}

fn s(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

#[test]
fn frames_are_answered_in_order_with_their_own_tensors() {
    let mut p = ready();
    for f in 1..=4 {
        assert!(p.offload(f, "1", &[("x", &x(f as f32))]));
    }
    p.advance(s(100));
    assert_eq!(p.delivered(), vec![1, 2, 3, 4]);
    assert_eq!(p.ran, vec![1, 2, 3, 4]);
    // The handheld echoes its input: each frame's answer is its own.
    for e in &p.events {
        if let WearableAction::Delivered { frame, tensors, .. } = e {
            let out = tensors.decode().expect("decodes");
            assert_eq!(out[0].1, x(*frame as f32), "frame {frame}");
        }
    }
    assert!(p.wearable.in_flight().is_empty());
}

#[test]
fn a_push_is_verified_and_loaded_when_the_handheld_lacks_the_model() {
    let mut p = Pair::new((0..5000u32).flat_map(|i| i.to_le_bytes()).collect(), latency());
    p.has_model = false;
    p.connect();
    p.advance(s(50));
    assert!(p.is_ready(), "{:?}", p.events);
    // A load that fails is a refusal of the model, named to the wearable.
    let mut p = Pair::new(vec![1; 10], latency());
    p.load_error = Some("Relu's input of 40000000000 bytes exceeds the limit".into());
    p.connect();
    p.advance(s(50));
    let closed = p.wearable.close_reason().expect("closed");
    assert!(closed.is_refusal(), "{closed:?}");
    assert!(closed.peer_reason().is_some_and(|r| r.contains("exceeds the limit")), "{closed:?}");
    assert!(p.handheld_closed && p.wearable_closed);
}

#[test]
fn a_peer_that_never_says_hello_is_closed_at_the_deadline() {
    let mut p = Pair::new(vec![1; 10], latency());
    // No connect: the link is open and silent.
    p.advance(s(9_990));
    assert!(!p.handheld.is_closed(), "closed before the 10 s deadline");
    p.advance(s(20));
    assert!(matches!(
        p.handheld.close_reason(),
        Some(CloseReason::Refused { code: ErrorCode::Unexpected, reason }) if reason.contains("no Hello within 10s")
    ));
}

#[test]
fn keepalives_keep_an_idle_link_and_without_them_the_handheld_closes_it() {
    let mut p = ready();
    p.advance(Duration::from_secs(300));
    assert!(!p.handheld.is_closed() && !p.wearable.is_closed(), "an idle paired link was closed");
    let statuses = p.events.iter().filter(|e| matches!(e, WearableAction::Status(_))).count();
    // A status every 500 ms (the handshake's first one included).
    assert!((595..=605).contains(&statuses), "{statuses} statuses in 300 s");

    // A wearable that never sends (keepalive beyond the idle timeout).
    let mut p = Pair::new(vec![7; 300], latency());
    p.wearable = tandem_proto::session::WearableSession::new(
        "watch-w5",
        std::sync::Arc::new(vec![7; 300]),
        tandem_core::InputShapes::none(),
        4096,
    )
    .expect_layers(4)
    .timers(WearableTimers { silence: Duration::from_secs(10), keepalive: Duration::from_secs(3600) });
    p.connect();
    p.advance(Duration::from_secs(59));
    assert!(!p.handheld.is_closed());
    p.advance(Duration::from_secs(2));
    assert!(matches!(
        p.handheld.close_reason(),
        Some(CloseReason::Refused { reason, .. }) if reason.contains("an idle peer is closed")
    ));
    // The wearable hears the refusal, then the close: not a refusal of its model.
    p.advance(s(10));
    let closed = p.wearable.close_reason().expect("closed");
    assert!(matches!(closed, CloseReason::PeerRefused { code: ErrorCode::Unexpected, .. }), "{closed:?}");
    assert!(!closed.is_refusal());
}

#[test]
fn a_stalled_handheld_is_given_up_on_and_every_frame_comes_back_once() {
    let mut p = ready();
    for f in 1..=3 {
        p.offload(f, "1", &[("x", &x(1.0))]);
    }
    p.advance(s(20));
    assert_eq!(p.delivered(), vec![1, 2, 3]);
    p.handheld_stalled = true;
    for f in 4..=6 {
        p.offload(f, "1", &[("x", &x(1.0))]);
    }
    p.advance(s(9_900));
    assert!(!p.wearable.is_closed(), "given up before the 10 s silence");
    p.advance(s(200));
    assert!(matches!(
        p.wearable.close_reason(),
        Some(CloseReason::Lost(why)) if why.contains("no bytes from the handheld for 10s")
    ));
    assert_eq!(p.run_locally(), vec![4, 5, 6], "each unanswered frame back once, in order");
    assert_eq!(p.delivered(), vec![1, 2, 3]);
}

#[test]
fn a_dropped_link_hands_back_what_was_in_flight() {
    let mut p = ready();
    p.run_time = s(50);
    for f in 1..=3 {
        p.offload(f, "1", &[("x", &x(1.0))]);
    }
    p.advance(s(60));
    assert_eq!(p.delivered(), vec![1]);
    p.drop_link();
    p.advance(s(500));
    assert_eq!(p.run_locally(), vec![2, 3]);
    assert!(matches!(p.wearable.close_reason(), Some(CloseReason::Lost(_))));
    assert!(matches!(p.handheld.close_reason(), Some(CloseReason::Lost(_))));
    assert_eq!(p.handheld.queued(), 0);
}

#[test]
fn cancelled_frames_that_have_not_started_never_run() {
    let mut p = ready();
    p.run_time = s(100);
    for f in 1..=5 {
        p.offload(f, "1", &[("x", &x(1.0))]);
    }
    p.advance(s(10));
    assert_eq!(p.ran, vec![1]);
    // 3 and 4 missed their deadline: they run on the watch.
    let cancel = p.wearable.cancel(p.now, &[3, 4]);
    p.wearable_sends(cancel);
    p.advance(s(1_000));
    assert_eq!(p.ran, vec![1, 2, 5], "cancelled queued frames ran");
    assert_eq!(p.delivered(), vec![1, 2, 5]);
    assert!(!p.wearable.is_closed() && !p.handheld.is_closed());
}

#[test]
fn a_cancelled_frame_handed_out_to_run_is_skipped_and_never_answered() {
    let mut p = ready();
    p.run_time = s(100);
    for f in 1..=3 {
        p.offload(f, "1", &[("x", &x(1.0))]);
    }
    p.advance(s(10));
    // 1 runs, 2 waits in the runner (two handed out), 3 is queued.
    assert_eq!(p.ran, vec![1]);
    assert_eq!(p.handheld.queued(), 3);
    let cancel = p.wearable.cancel(p.now, &[2]);
    p.wearable_sends(cancel);
    p.advance(s(1_000));
    assert_eq!(p.ran, vec![1, 3], "the cancelled frame never started");
    assert_eq!(p.delivered(), vec![1, 3]);
    assert!(!p.wearable.is_closed() && !p.handheld.is_closed());
    assert_eq!(p.handheld.queued(), 0);
}

#[test]
fn a_full_run_queue_stops_reading_without_counting_as_idle() {
    let mut p = ready();
    // 40 frames of 5 s each: the handheld takes 32 queued and two handed to its runner,
    // then reads nothing for minutes (longer than its 60 s idle timeout).
    p.run_time = Duration::from_secs(5);
    for f in 1..=40 {
        p.offload(f, "1", &[("x", &x(1.0))]);
    }
    p.advance(s(100));
    assert_eq!(p.handheld.queued(), 34, "two handed out to run and 32 queued");
    assert!(!p.handheld.wants_bytes());
    p.advance(Duration::from_secs(200));
    assert!(!p.handheld.is_closed(), "{:?}", p.handheld.close_reason());
    assert_eq!(p.delivered(), (1..=40).collect::<Vec<_>>());

    // Frames beyond the queue in one read wait, and nothing more is read,
    // until it drains; then they run in order. A pipelined peer's small
    // frames, sent while this side was not reading, arrive together: it
    // is not refused for that (two handed out to run, two queued, the
    // fifth held).
    let digest = [1; 32];
    let t0 = p.now;
    let limits = HandheldLimits { max_queued: 2, ..HandheldLimits::default() };
    let mut h = HandheldSession::new("p", tandem_proto::pair::status(), t0).limits(limits);
    let hello = Message::new(Header::Hello {
        version: tandem_proto::protocol::PROTOCOL_VERSION,
        model_digest: digest,
        model_bytes: 1,
        device: "w".into(),
        input_shapes: vec![],
        dims: vec![],
    });
    h.handle_bytes(t0, &encode(&hello).expect("encodes"), |_| true);
    h.model_loaded(latency());
    let mut burst = vec![];
    for frame in 1..=5 {
        let packed = vec![pack_tensor("x", &x(1.0), Encoding::Raw, None).expect("packs")];
        let m = Message::from_packed(
            |tensors| Header::RunSuffix {
                frame,
                cut: "1".into(),
                tensors,
                answer: vec![],
                edge: None,
                engine: None,
            },
            packed,
        );
        burst.extend(encode(&m).expect("encodes"));
    }
    let runs = |actions: Vec<Action>| -> Vec<u64> {
        actions
            .into_iter()
            .filter_map(|a| match a {
                Action::Run { frame, .. } => Some(frame),
                _ => None,
            })
            .collect()
    };
    let mut ran = runs(h.handle_bytes(t0, &burst, |_| true));
    assert_eq!(ran, [1, 2]);
    assert_eq!(h.queued(), 4);
    assert!(!h.wants_bytes() && !h.holds_messages());
    let mut sent = 0;
    for frame in 1..=5 {
        let result = HandheldSession::result(frame, 1, &[], &[], None).map_err(RunError::from);
        let out = h.frame_done(t0, frame, result);
        sent += out.iter().filter(|a| matches!(a, Action::Send(_))).count();
        ran.extend(runs(out));
        if h.holds_messages() {
            ran.extend(runs(h.handle_held(t0, |_| true)));
        }
    }
    assert_eq!(ran, [1, 2, 3, 4, 5]);
    assert_eq!(sent, 5, "each frame answered");
    assert!(!h.is_closed(), "{:?}", h.close_reason());
    assert!(h.wants_bytes() && !h.holds_messages());
}

#[test]
fn builds_ahead_are_budgeted_per_connection_and_only_asked_answers_count() {
    let mut p = ready();
    // 70 cuts in batches of 8: 64 built, 6 refused with the reason.
    let mut asked = 0;
    while asked < 70 {
        let cuts: Vec<tandem_types::CutKey> =
            (asked..(asked + 8).min(70)).map(|i| format!("{i:x}").into()).collect();
        asked += cuts.len();
        let m = p.wearable.prepare(p.now, cuts);
        p.wearable_sends(m);
        p.advance(s(10));
    }
    assert_eq!(p.prepared.len(), 64);
    let answers: Vec<&Option<String>> = p
        .events
        .iter()
        .filter_map(|e| match e {
            WearableAction::Prepared { error, .. } => Some(error),
            _ => None,
        })
        .collect();
    // Each asked cut answered once.
    assert_eq!(answers.len(), 70, "{answers:?}");
    assert!(answers
        .iter()
        .filter(|e| e.is_some())
        .all(|e| e.as_deref().is_some_and(|r| r.contains("at most 64 cuts ahead"))));
    assert_eq!(answers.iter().filter(|e| e.is_some()).count(), 6);

    // Answers nobody asked for are dropped: a Prepared for a cut never
    // asked, an Echo of a probe never sent (a keepalive's included).
    let before = p.events.len();
    let unasked = HandheldSession::prepared("ffff".into(), 1, None);
    p.inject_to_wearable(encode(&unasked).expect("encodes"));
    let echo = Message::new(Header::Echo { id: 999, received: 0 });
    p.inject_to_wearable(encode(&echo).expect("encodes"));
    p.advance(s(1));
    assert_eq!(p.events.len(), before, "{:?}", &p.events[before..]);
    // A probe that was sent is answered once.
    let probe = p.wearable.probe(p.now, 7, 100);
    p.wearable_sends(probe);
    p.advance(s(10));
    let echoes: Vec<_> =
        p.events[before..].iter().filter(|e| matches!(e, WearableAction::Echo { .. })).collect();
    assert_eq!(echoes, vec![&WearableAction::Echo { id: 7, received: 100, echoed: 0 }]);
}

#[test]
fn bad_bytes_and_shutdowns_close_with_their_reason() {
    let mut p = ready();
    p.inject_to_handheld(vec![0xff; 16]);
    p.advance(s(10));
    assert!(matches!(
        p.handheld.close_reason(),
        Some(CloseReason::Refused { code: ErrorCode::Malformed, .. })
    ));
    let closed = p.wearable.close_reason().expect("the wearable heard it");
    assert!(matches!(closed, CloseReason::PeerRefused { code: ErrorCode::Malformed, .. }), "{closed:?}");

    let mut p = ready();
    let bye = p.handheld.shutdown();
    assert!(matches!(
        &bye[..],
        [tandem_proto::session::Action::Send(_), tandem_proto::session::Action::Close]
    ));
    assert_eq!(p.handheld.close_reason(), Some(&CloseReason::Shutdown));
}
