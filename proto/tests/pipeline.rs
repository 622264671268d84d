//! The frame pipeline under a virtual clock: deadlines, late answers,
//! out-of-order answers, link loss with frames in flight, reconnection, and
//! prefixes running on the wearable's runner, and
//! random event sequences, each checked for exactly-once, in-order delivery.
//! No sleeps, no sockets: every test runs in microseconds.

use std::time::Duration;

use proptest::prelude::*;
use tandem_proto::pipeline::{FramePipeline, DEADLINE_MISSED};

/// A result names its frame and where it ran.
#[derive(Clone, Debug, PartialEq)]
enum Ran {
    Handheld(u64),
    Wearable(u64, String),
}

type Pipe = FramePipeline<u64, Ran>;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Runs every handed-back frame on the "wearable".
fn run_locals(p: &mut Pipe) {
    while let Some((f, payload, reason)) = p.next_local() {
        assert_eq!(payload, f, "a frame keeps its own payload");
        p.complete(f, Ran::Wearable(f, reason)).expect("a taken-out frame completes");
    }
}

fn deliver_all(p: &mut Pipe) -> Vec<(u64, Ran)> {
    std::iter::from_fn(|| p.pop_deliverable()).collect()
}

fn answer(p: &mut Pipe, f: u64) -> bool {
    match p.answer(f) {
        Some(payload) => {
            assert_eq!(payload, f);
            p.complete(f, Ran::Handheld(f)).expect("completes");
            true
        }
        None => false,
    }
}

#[test]
fn a_missed_deadline_runs_the_frame_here_and_its_late_answer_is_dropped() {
    let mut p = Pipe::new(4, true);
    p.start_offloaded(1, 1, ms(100)).expect("starts");
    p.start_offloaded(2, 2, ms(150)).expect("starts");
    assert_eq!(p.next_deadline(), Some(ms(100)));
    assert_eq!(p.tick(ms(99)), Vec::<u64>::new());
    assert_eq!(p.tick(ms(100)), vec![1]);
    assert_eq!(p.in_flight(), 1);
    run_locals(&mut p);
    // Frame 1's answer arrives after all: dropped, and frame 1 stays the local run.
    assert!(!answer(&mut p, 1));
    assert!(answer(&mut p, 2));
    assert_eq!(
        deliver_all(&mut p),
        vec![(1, Ran::Wearable(1, DEADLINE_MISSED.into())), (2, Ran::Handheld(2))]
    );
    assert!(p.is_empty());
}

/// Frames in flight queue on the link and the handheld: each one's
/// deadline counts the answers expected before its own; with none in
/// flight it is the factor times its own time, never under the floor.
#[test]
fn deadlines_count_the_frames_queued_before_them() {
    let mut p = Pipe::new(8, true);
    // Alone: 4 × 100 ms, above the 300 ms floor.
    let d1 = p.deadline(ms(1000), ms(100), None, 4.0, ms(300));
    assert_eq!(d1, ms(1400));
    p.start_offloaded(1, 1, d1).expect("starts");
    // Sent 10 ms later behind frame 1: expected at 1200 ms, so 4 × 190 ms.
    let d2 = p.deadline(ms(1010), ms(100), None, 4.0, ms(300));
    assert_eq!(d2, ms(1010 + 760));
    p.start_offloaded(2, 2, d2).expect("starts");
    // A third, long after the second was expected: nothing queued before it.
    let d3 = p.deadline(ms(5000), ms(100), None, 4.0, ms(300));
    assert_eq!(d3, ms(5400));
    p.start_offloaded(3, 3, d3).expect("starts");
    // Everything answered: the next one starts afresh, and the floor holds.
    for f in 1..=3 {
        assert!(answer(&mut p, f));
    }
    assert_eq!(p.deadline(ms(5010), ms(10), None, 4.0, ms(300)), ms(5310));
    // At the end of time, no overflow.
    let far = Duration::MAX - ms(1);
    assert_eq!(p.deadline(far, ms(100), None, 4.0, ms(300)), Duration::MAX);
}

/// A long stream through a pipeline whose slowest stage holds each frame
/// for `service` of its `remote` round trip: a frame is sent whenever an
/// answer frees a place, and answers leave the bottleneck `service` apart.
/// Returns, for each frame, its send time, its answer's time and its
/// deadline.
fn long_stream(service: Option<Duration>, frames: u64) -> Vec<(Duration, Duration, Duration)> {
    let (remote, bottleneck, in_flight) = (ms(60), ms(20), 8);
    let mut p = Pipe::new(in_flight, true);
    let mut answers: std::collections::VecDeque<(u64, Duration)> = Default::default();
    let (mut now, mut last_answer, mut out) = (Duration::ZERO, Duration::ZERO, Vec::new());
    for f in 1..=frames {
        if !p.can_start() {
            let (g, at) = answers.pop_front().expect("a frame is in flight");
            now = now.max(at);
            assert!(p.tick(now).is_empty(), "frame {g}: a deadline passed before its answer at {now:?}");
            assert!(answer(&mut p, g));
            deliver_all(&mut p);
        }
        let d = p.deadline(now, remote, service, 4.0, ms(100));
        // The answer: its own round trip, or one bottleneck after the one before.
        let at = (now + remote).max(last_answer + bottleneck);
        last_answer = at;
        p.start_offloaded(f, f, d).expect("starts");
        answers.push_back((f, at));
        out.push((now, at, d));
    }
    out
}

/// Over thousands of frames the expected answers keep pace with the real
/// ones: no deadline passes before its answer, and none drifts away from
/// it (counting each frame's whole round trip per frame in the queue let
/// the wait grow by 40 ms a frame here, without bound, so a stalled
/// handheld went unseen longer and longer).
#[test]
fn deadlines_keep_pace_with_a_long_pipelined_stream() {
    let bottleneck = ms(20);
    let known = long_stream(Some(bottleneck), 3000);
    let worst = known.iter().map(|(now, _, d)| *d - *now).max().expect("frames");
    // 8 in flight: the answer is at most 60 + 7 × 20 ms away, times 4.
    assert!(worst <= ms(4 * (60 + 7 * 20)), "the deadlines drifted: {worst:?} from the send");
    for (now, at, d) in &known {
        assert!(d >= at, "sent at {now:?}, answered at {at:?}, deadline {d:?}");
    }
    // The steady state is reached and holds: the last frames' waits are
    // the queue's, 8 bottlenecks, not the first frames'.
    let (now, at, d) = known[known.len() - 1];
    assert_eq!(at - now, ms(8 * 20));
    assert_eq!(d - now, ms(4 * 8 * 20));
    // The service unknown: each frame counted whole, but never more than
    // the round trip for each frame in flight and itself.
    let unknown = long_stream(None, 3000);
    let worst = unknown.iter().map(|(now, _, d)| *d - *now).max().expect("frames");
    assert!(worst <= ms(4 * 8 * 60), "the deadlines drifted: {worst:?} from the send");
    assert!(unknown.iter().all(|(_, at, d)| d >= at));
}

/// A service longer than the round trip it is part of is taken as the round trip.
#[test]
fn a_service_is_never_more_than_its_round_trip() {
    let mut p = Pipe::new(8, true);
    let d1 = p.deadline(ms(0), ms(50), Some(ms(500)), 2.0, ms(0));
    assert_eq!(d1, ms(100));
    p.start_offloaded(1, 1, d1).expect("starts");
    // Sent at 40 ms behind frame 1 (expected at 50 ms): expected 50 ms
    // after it, at 100 ms, so twice 60 ms from now; not at 140 ms, the
    // most a round trip for each frame could take.
    assert_eq!(p.deadline(ms(40), ms(50), Some(ms(500)), 2.0, ms(0)), ms(160));
}

#[test]
fn answers_out_of_order_are_delivered_in_order() {
    let mut p = Pipe::new(8, true);
    for f in 1..=4 {
        p.start_offloaded(f, f, ms(1000)).expect("starts");
    }
    for f in [3, 1, 4] {
        assert!(answer(&mut p, f));
    }
    // Frame 2 holds back 3 and 4.
    assert_eq!(deliver_all(&mut p), vec![(1, Ran::Handheld(1))]);
    assert!(answer(&mut p, 2));
    let frames: Vec<u64> = deliver_all(&mut p).into_iter().map(|(f, _)| f).collect();
    assert_eq!(frames, [2, 3, 4]);
}

#[test]
fn a_lost_link_hands_back_every_frame_in_flight_and_new_frames_offload_after_reconnection() {
    let mut p = Pipe::new(3, true);
    p.start_done(1, Ran::Wearable(1, "local cut".into())).expect("starts");
    for f in 2..=4 {
        p.start_offloaded(f, f, ms(500)).expect("starts");
    }
    assert!(!p.can_start(), "three in flight is the bound");
    assert!(answer(&mut p, 2));
    p.link_lost("connection reset");
    assert_eq!(p.in_flight(), 0);
    assert!(p.can_start());
    run_locals(&mut p);
    // Reconnected: the next frame goes to the handheld again.
    p.start_offloaded(5, 5, ms(900)).expect("starts");
    assert!(p.is_lone(5));
    assert!(answer(&mut p, 5));
    assert_eq!(
        deliver_all(&mut p),
        vec![
            (1, Ran::Wearable(1, "local cut".into())),
            (2, Ran::Handheld(2)),
            (3, Ran::Wearable(3, "connection reset".into())),
            (4, Ran::Wearable(4, "connection reset".into())),
            (5, Ran::Handheld(5)),
        ]
    );
}

#[test]
fn a_bad_answer_goes_back_to_the_wearable_once() {
    let mut p = Pipe::new(2, true);
    p.start_offloaded(1, 1, ms(10)).expect("starts");
    let payload = p.answer(1).expect("in flight");
    p.return_local(1, payload, "bad answer").expect("taken out");
    // Neither the deadline nor a duplicate answer touch it now.
    assert_eq!(p.tick(ms(50)), Vec::<u64>::new());
    assert!(!answer(&mut p, 1));
    run_locals(&mut p);
    assert_eq!(deliver_all(&mut p), vec![(1, Ran::Wearable(1, "bad answer".into()))]);
}

#[test]
fn one_at_a_time_waits_for_delivery_and_frames_must_increase() {
    let mut p = Pipe::new(8, false);
    p.start_offloaded(1, 1, ms(10)).expect("starts");
    assert!(!p.can_start());
    assert!(answer(&mut p, 1));
    assert!(!p.can_start(), "done but not delivered");
    assert_eq!(deliver_all(&mut p).len(), 1);
    assert!(p.can_start());
    assert_eq!(p.start_offloaded(1, 1, ms(10)), Err(1), "a frame number is used once");
    p.start_offloaded(3, 3, ms(10)).expect("starts");
    assert_eq!(p.start_done(2, Ran::Handheld(2)), Err(Ran::Handheld(2)), "older than the last");
    assert_eq!(p.complete(9, Ran::Handheld(9)), Err(Ran::Handheld(9)), "never started");
    assert_eq!(p.complete(3, Ran::Handheld(3)), Err(Ran::Handheld(3)), "still in flight");
}

#[test]
fn a_running_prefix_holds_its_place_and_counts_toward_the_bound() {
    let mut p = Pipe::new(2, true);
    assert!(p.start_running(1));
    assert!(!p.start_running(1), "a frame number is used once");
    assert_eq!((p.running(), p.in_flight()), (1, 0));
    p.start_done(2, Ran::Wearable(2, "local cut".into())).expect("starts");
    assert!(p.can_start(), "a done frame does not count");
    assert!(p.start_running(3));
    assert!(!p.can_start(), "two running reach the bound of two");
    assert_eq!(deliver_all(&mut p), vec![], "frame 2 waits for frame 1");
    assert_eq!(p.answer(1), None, "a running frame has no answer yet");
    assert_eq!(p.tick(ms(1_000)), Vec::<u64>::new(), "nor a deadline");
    p.link_lost("gone");
    assert_eq!(p.next_local().map(|(f, _, _)| f), None, "nor a link to lose");
    p.ran(1, 1, ms(1_010)).expect("frame 1 is sent");
    assert_eq!(p.ran(1, 1, ms(1_010)), Err(1), "sent once");
    assert_eq!(p.ran(2, 2, ms(1_010)), Err(2), "frame 2 never ran here");
    assert_eq!((p.running(), p.in_flight()), (1, 1));
    assert_eq!(p.finish_running(1, Ran::Handheld(1)), Err(Ran::Handheld(1)), "frame 1 is in flight now");
    p.finish_running(3, Ran::Wearable(3, "its prefix failed".into())).expect("frame 3 ends");
    assert!(answer(&mut p, 1));
    assert!(p.can_start());
    p.start_offloaded(4, 4, ms(1_010)).expect("starts");
    p.link_lost("gone again");
    let (f, payload, _) = p.next_local().expect("frame 4 came back");
    assert_eq!((f, payload), (4, 4));
    assert_eq!(deliver_all(&mut p).iter().map(|(f, _)| *f).collect::<Vec<_>>(), vec![1, 2, 3]);
    assert!(!p.is_empty(), "frame 4 runs on the wearable: not delivered yet");
    p.complete(4, Ran::Wearable(4, "gone again".into())).expect("frame 4 ends");
    assert_eq!(deliver_all(&mut p).iter().map(|(f, _)| *f).collect::<Vec<_>>(), vec![4]);
    assert!(p.is_empty());
}

/// One event of a random run.
#[derive(Clone, Debug)]
enum Ev {
    /// `how`: 0 offloaded, 1 done here, 2 its prefix running.
    Start {
        how: u8,
        budget_ms: u64,
    },
    /// The oldest running prefix ends: sent with this budget, or failed.
    Ran {
        sent: bool,
        budget_ms: u64,
    },
    Answer(usize),
    BadAnswer(usize),
    HandBack(usize),
    LinkLost,
    Tick(u64),
    RunLocal,
    Deliver,
}

fn event() -> impl Strategy<Value = Ev> {
    prop_oneof![
        3 => (0u8..3, 1u64..200).prop_map(|(how, budget_ms)| Ev::Start { how, budget_ms }),
        2 => (any::<bool>(), 1u64..200).prop_map(|(sent, budget_ms)| Ev::Ran { sent, budget_ms }),
        3 => any::<usize>().prop_map(Ev::Answer),
        1 => any::<usize>().prop_map(Ev::BadAnswer),
        1 => any::<usize>().prop_map(Ev::HandBack),
        1 => Just(Ev::LinkLost),
        2 => (0u64..100).prop_map(Ev::Tick),
        2 => Just(Ev::RunLocal),
        2 => Just(Ev::Deliver),
    ]
}

/// Where the test's model says a frame stands.
#[derive(Clone, Debug, PartialEq)]
enum St {
    Running,
    InFlight(Duration),
    Local,
    Done,
}

fn in_flight(model: &std::collections::BTreeMap<u64, St>) -> usize {
    model.values().filter(|st| matches!(st, St::InFlight(_))).count()
}

fn running(model: &std::collections::BTreeMap<u64, St>) -> usize {
    model.values().filter(|st| matches!(st, St::Running)).count()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Whatever happens, the pipeline agrees after every event with a model
    /// of the documented rules (answers only for frames in flight, deadlines,
    /// hand-backs, local runs oldest first, the in-flight bound), and every
    /// started frame is delivered exactly once, in order, with the result of
    /// the one place it finished.
    #[test]
    fn every_frame_is_delivered_once_and_in_order(
        events in proptest::collection::vec(event(), 0..120),
        bound in 1usize..5,
        overlap in any::<bool>(),
    ) {
        let mut p = Pipe::new(bound, overlap);
        let mut now = Duration::ZERO;
        let mut started: Vec<u64> = vec![];
        let mut finished: std::collections::BTreeMap<u64, Ran> = Default::default();
        let mut delivered: Vec<(u64, Ran)> = vec![];
        // A model of where each undelivered frame stands, by the documented
        // rules; the pipeline must agree with it after every event.
        let mut model: std::collections::BTreeMap<u64, St> = Default::default();
        let mut next = 1u64;
        let pick = |started: &[u64], i: usize| (!started.is_empty()).then(|| started[i % started.len()]);
        for ev in events {
            match ev {
                Ev::Start { how, budget_ms } => {
                    let limit = if overlap { bound } else { 1 };
                    let may = if overlap { in_flight(&model) + running(&model) < limit } else { model.is_empty() };
                    prop_assert_eq!(p.can_start(), may);
                    if !may {
                        continue;
                    }
                    let f = next;
                    next += 1 + (budget_ms % 3); // frame numbers increase, not always by one
                    match how {
                        0 => {
                            prop_assert!(p.start_offloaded(f, f, now + ms(budget_ms)).is_ok());
                            model.insert(f, St::InFlight(now + ms(budget_ms)));
                        }
                        1 => {
                            prop_assert!(p.start_done(f, Ran::Wearable(f, "local cut".into())).is_ok());
                            finished.insert(f, Ran::Wearable(f, "local cut".into()));
                            model.insert(f, St::Done);
                        }
                        _ => {
                            prop_assert!(p.start_running(f));
                            model.insert(f, St::Running);
                        }
                    }
                    started.push(f);
                }
                Ev::Ran { sent, budget_ms } => {
                    let Some(f) = model.iter().find_map(|(&f, st)| matches!(st, St::Running).then_some(f)) else {
                        continue;
                    };
                    if sent {
                        prop_assert!(p.ran(f, f, now + ms(budget_ms)).is_ok());
                        model.insert(f, St::InFlight(now + ms(budget_ms)));
                    } else {
                        let failed = Ran::Wearable(f, "its prefix failed".into());
                        prop_assert!(p.finish_running(f, failed.clone()).is_ok());
                        finished.insert(f, failed);
                        model.insert(f, St::Done);
                    }
                }
                Ev::Answer(i) => {
                    if let Some(f) = pick(&started, i) {
                        let expected = matches!(model.get(&f), Some(St::InFlight(_)));
                        let got = p.answer(f);
                        prop_assert_eq!(got.is_some(), expected, "answer to frame {} in state {:?}", f, model.get(&f));
                        if let Some(payload) = got {
                            prop_assert_eq!(payload, f);
                            prop_assert!(p.complete(f, Ran::Handheld(f)).is_ok());
                            finished.insert(f, Ran::Handheld(f));
                            model.insert(f, St::Done);
                        }
                    }
                }
                Ev::BadAnswer(i) => {
                    if let Some(f) = pick(&started, i) {
                        let expected = matches!(model.get(&f), Some(St::InFlight(_)));
                        let got = p.answer(f);
                        prop_assert_eq!(got.is_some(), expected);
                        if let Some(payload) = got {
                            prop_assert!(p.return_local(f, payload, "bad answer").is_ok());
                            model.insert(f, St::Local);
                        }
                    }
                }
                Ev::HandBack(i) => {
                    if let Some(f) = pick(&started, i) {
                        p.hand_back(f, "refused");
                        if let Some(st @ St::InFlight(_)) = model.get_mut(&f) {
                            *st = St::Local;
                        }
                    }
                }
                Ev::LinkLost => {
                    p.link_lost("link lost");
                    for st in model.values_mut() {
                        if matches!(st, St::InFlight(_)) {
                            *st = St::Local;
                        }
                    }
                }
                Ev::Tick(step) => {
                    now += ms(step);
                    let expired: Vec<u64> = model
                        .iter()
                        .filter_map(|(&f, st)| matches!(st, St::InFlight(d) if *d <= now).then_some(f))
                        .collect();
                    prop_assert_eq!(p.tick(now), expired.clone());
                    for f in expired {
                        model.insert(f, St::Local);
                    }
                    let next_deadline =
                        model.values().filter_map(|st| if let St::InFlight(d) = st { Some(*d) } else { None }).min();
                    prop_assert_eq!(p.next_deadline(), next_deadline);
                }
                Ev::RunLocal => {
                    let expected = model.iter().find_map(|(&f, st)| matches!(st, St::Local).then_some(f));
                    let got = p.next_local();
                    prop_assert_eq!(got.as_ref().map(|(f, _, _)| *f), expected);
                    if let Some((f, payload, reason)) = got {
                        prop_assert_eq!(payload, f);
                        prop_assert!(!finished.contains_key(&f), "frame {} ran twice", f);
                        prop_assert!(p.complete(f, Ran::Wearable(f, reason.clone())).is_ok());
                        finished.insert(f, Ran::Wearable(f, reason));
                        model.insert(f, St::Done);
                    }
                }
                Ev::Deliver => {
                    while let Some(d) = p.pop_deliverable() {
                        prop_assert_eq!(model.first_key_value().map(|(f, st)| (*f, st.clone())), Some((d.0, St::Done)));
                        model.remove(&d.0);
                        delivered.push(d);
                    }
                    prop_assert!(!matches!(model.first_key_value(), Some((_, St::Done))), "a deliverable frame held back");
                }
            }
            prop_assert_eq!(p.in_flight(), in_flight(&model));
            prop_assert_eq!(p.running(), running(&model));
        }
        // Running prefixes end (sent), then the link goes; everything left
        // runs here and leaves.
        let running_frames: Vec<u64> =
            model.iter().filter_map(|(&f, st)| matches!(st, St::Running).then_some(f)).collect();
        for f in running_frames {
            prop_assert!(p.ran(f, f, now).is_ok());
        }
        p.link_lost("end");
        while let Some((f, _, reason)) = p.next_local() {
            prop_assert!(!finished.contains_key(&f), "frame {} ran twice", f);
            prop_assert!(p.complete(f, Ran::Wearable(f, reason.clone())).is_ok());
            finished.insert(f, Ran::Wearable(f, reason));
        }
        while let Some(d) = p.pop_deliverable() {
            delivered.push(d);
        }
        prop_assert!(p.is_empty());
        let frames: Vec<u64> = delivered.iter().map(|(f, _)| *f).collect();
        prop_assert_eq!(&frames, &started, "every started frame once, in order");
        for (f, r) in &delivered {
            prop_assert_eq!(Some(r), finished.get(f), "frame {} delivered what it finished with", f);
        }
    }
}
