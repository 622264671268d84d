//! A test double in the manner of quinn-proto's tests' `Pair`: a
//! [`WearableSession`] and a [`HandheldSession`] joined by byte queues with
//! a one-way delay, a virtual clock, and a handheld shell that loads at
//! once and runs each suffix in a set time by a rule given. A whole
//! exchange, timeouts included, runs in microseconds with no socket and no
//! sleep; faults (a dropped link, a stalled handheld, bytes injected) are
//! knobs.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tandem_types::WireTensor;

use crate::encoding::Encoding;
use crate::protocol::{encode, pack_tensor, LatencySummary, Message, StatusReport};
use crate::session::{Action, HandheldSession, RunError, Tensors, WearableAction, WearableSession};
use tandem_types::InputShapes;

/// Computes a frame's outputs from its crossing tensors (the handheld's suffix).
pub type Runner = Box<dyn FnMut(&Tensors) -> Outputs>;

/// A suffix's outputs, or why it failed.
type Outputs = Result<Vec<(String, WireTensor<'static>)>, RunError>;

/// What travels on one direction of the link.
#[derive(Debug)]
enum Segment {
    Bytes(Vec<u8>),
    /// The sender closed its end.
    Eof,
}

/// A frame handed to the handheld's runner.
struct Running {
    start: Instant,
    done: Instant,
    frame: u64,
    outputs: Outputs,
    started: bool,
    /// Cancelled before it started: never runs.
    skip: bool,
}

/// Two sessions, a link and a clock.
pub struct Pair {
    /// The virtual clock.
    pub now: Instant,
    /// The wearable's session.
    pub wearable: WearableSession,
    /// The handheld's session.
    pub handheld: HandheldSession,
    /// One-way delay of the link.
    pub delay: Duration,
    /// How long each suffix runs on the handheld.
    pub run_time: Duration,
    /// Whether the handheld has the wearable's model (else it is pushed).
    pub has_model: bool,
    /// Why the handheld's model load fails, if it should.
    pub load_error: Option<String>,
    /// The handheld's process is wedged: it reads nothing, sends nothing,
    /// and none of its timers fire.
    pub handheld_stalled: bool,
    /// What the wearable's shell was told (everything but sends), in order.
    pub events: Vec<WearableAction>,
    /// Frames the handheld started to run, in order.
    pub ran: Vec<u64>,
    /// Cuts the handheld was asked to build ahead, in order.
    pub prepared: Vec<tandem_types::CutKey>,
    /// Whether each side's shell closed its end.
    pub wearable_closed: bool,
    /// See [`Pair::wearable_closed`].
    pub handheld_closed: bool,
    latency: LatencySummary,
    runner: Runner,
    /// Frames handed to the handheld's runner, which runs them one at a
    /// time in order: each one's start and end, and its outputs.
    running: VecDeque<Running>,
    to_handheld: VecDeque<(Instant, Segment)>,
    to_wearable: VecDeque<(Instant, Segment)>,
}

/// The handheld's status in the pair.
pub fn status() -> StatusReport {
    StatusReport { load: 0.1, queue: 0, battery: 0.8, charging: false }
}

impl Pair {
    /// A pair for a model of `layers` layers (its bytes `model`), the
    /// handheld's latency profile `latency`, not yet connected
    /// ([`Pair::connect`]); the handheld echoes each frame's tensors back
    /// as its outputs, 5 ms a frame, over a link of 2 ms each way.
    pub fn new(model: Vec<u8>, latency: LatencySummary) -> Pair {
        let now = Instant::now();
        let layers = latency.per_layer_s.len();
        Pair {
            now,
            wearable: WearableSession::new("watch-w5", Arc::new(model), InputShapes::none(), 1 << 12)
                .expect_layers(layers),
            handheld: HandheldSession::new("pixel-8-pro", status(), now),
            delay: Duration::from_millis(2),
            run_time: Duration::from_millis(5),
            has_model: true,
            load_error: None,
            handheld_stalled: false,
            events: vec![],
            ran: vec![],
            prepared: vec![],
            wearable_closed: false,
            handheld_closed: false,
            latency,
            runner: Box::new(|t: &Tensors| {
                Ok(t.decode()?.into_iter().map(|(n, t)| (n, t.into_owned())).collect())
            }),
            running: VecDeque::new(),
            to_handheld: VecDeque::new(),
            to_wearable: VecDeque::new(),
        }
    }

    /// The handheld computes outputs with `runner` instead of echoing.
    pub fn runner(mut self, runner: Runner) -> Pair {
        self.runner = runner;
        self
    }

    /// The wearable says Hello now.
    pub fn connect(&mut self) {
        let out = self.wearable.start(self.now);
        self.wearable_acts(out);
    }

    /// Offloads `frame` with these tensors (raw), answered raw.
    pub fn offload(&mut self, frame: u64, cut: &str, tensors: &[(&str, &WireTensor<'_>)]) -> bool {
        let packed = tensors
            .iter()
            .map(|(n, t)| pack_tensor(n, t, Encoding::Raw, None).expect("a tensor the wire carries"))
            .collect();
        match self.wearable.offload(
            self.now,
            frame,
            tandem_types::CutKey::from_wire(cut),
            packed,
            vec![],
            None,
        ) {
            Some(m) => {
                self.send_to_handheld(&m);
                true
            }
            None => false,
        }
    }

    /// The wearable's session makes a message (a cancel, a probe, a
    /// prepare); it is sent.
    pub fn wearable_sends(&mut self, m: Option<Message>) {
        if let Some(m) = m {
            self.send_to_handheld(&m);
        }
    }

    /// Bytes arrive at the handheld as if the wearable sent them.
    pub fn inject_to_handheld(&mut self, bytes: Vec<u8>) {
        self.to_handheld.push_back((self.now + self.delay, Segment::Bytes(bytes)));
    }

    /// Bytes arrive at the wearable as if the handheld sent them.
    pub fn inject_to_wearable(&mut self, bytes: Vec<u8>) {
        self.to_wearable.push_back((self.now + self.delay, Segment::Bytes(bytes)));
    }

    /// The link drops: each side's shell sees it fail now, nothing in
    /// flight arrives.
    pub fn drop_link(&mut self) {
        self.to_handheld.clear();
        self.to_wearable.clear();
        let out = self.wearable.handle_lost("the link dropped");
        self.wearable_acts(out);
        let out = self.handheld.handle_link_error("the link dropped");
        self.handheld_acts(out);
    }

    fn send_to_handheld(&mut self, m: &Message) {
        let bytes = encode(m).expect("the wearable's message encodes");
        self.to_handheld.push_back((self.now + self.delay, Segment::Bytes(bytes)));
    }

    fn wearable_acts(&mut self, actions: Vec<WearableAction>) {
        for a in actions {
            match a {
                WearableAction::Send(m) | WearableAction::SendEcho(m) => self.send_to_handheld(&m),
                WearableAction::Close => {
                    if !self.wearable_closed {
                        self.wearable_closed = true;
                        self.to_handheld.push_back((self.now + self.delay, Segment::Eof));
                    }
                }
                other => self.events.push(other),
            }
        }
    }

    fn handheld_acts(&mut self, actions: Vec<Action>) {
        for a in actions {
            match a {
                Action::Send(m) => {
                    let bytes = encode(&m).expect("the handheld's message encodes");
                    self.to_wearable.push_back((self.now + self.delay, Segment::Bytes(bytes)));
                }
                Action::LoadKnown { .. } | Action::LoadPushed { .. } => {
                    let out = match self.load_error.clone() {
                        Some(why) => self.handheld.model_failed(why),
                        None => self.handheld.model_loaded(self.latency.clone()),
                    };
                    self.handheld_acts(out);
                }
                Action::Run { frame, tensors, .. } => {
                    let outputs = (self.runner)(&tensors);
                    let start = self.running.back().map_or(self.now, |r| r.done.max(self.now));
                    let done = start + self.run_time;
                    self.running.push_back(Running {
                        start,
                        done,
                        frame,
                        outputs,
                        started: false,
                        skip: false,
                    });
                    self.start_runs();
                }
                Action::Skip { frames } => {
                    // Not started: skipped, taking no time; the rest move up.
                    let mut free = self.now;
                    for r in self.running.iter_mut() {
                        if r.started {
                            free = r.done;
                            continue;
                        }
                        r.skip |= frames.contains(&r.frame);
                        r.start = free.max(self.now);
                        r.done = if r.skip { r.start } else { r.start + self.run_time };
                        free = r.done;
                    }
                }
                Action::Prepare { cuts, engine } => {
                    for cut in cuts {
                        self.prepared.push(cut.clone());
                        let m = HandheldSession::prepared_on(cut, engine, 0, None);
                        let bytes = encode(&m).expect("encodes");
                        self.to_wearable.push_back((self.now + self.delay, Segment::Bytes(bytes)));
                    }
                }
                Action::Edge { url, cuts } => {
                    // An edge that serves every cut asked about.
                    let m = self.handheld.edge_ready(&url, cuts, (0, None), None);
                    let bytes = encode(&m).expect("encodes");
                    self.to_wearable.push_back((self.now + self.delay, Segment::Bytes(bytes)));
                }
                Action::Close => {
                    if !self.handheld_closed {
                        self.handheld_closed = true;
                        self.to_wearable.push_back((self.now + self.delay, Segment::Eof));
                    }
                }
            }
        }
    }

    /// Carries out everything due by now; returns whether anything happened.
    fn step(&mut self) -> bool {
        let mut moved = false;
        while self.to_wearable.front().is_some_and(|(at, _)| *at <= self.now) {
            let Some((_, segment)) = self.to_wearable.pop_front() else { break };
            moved = true;
            let out = match segment {
                Segment::Bytes(b) => self.wearable.handle_bytes(self.now, &b),
                Segment::Eof => self.wearable.handle_lost("the handheld closed the link"),
            };
            self.wearable_acts(out);
        }
        if !self.handheld_stalled {
            while self.handheld.wants_bytes()
                && self.to_handheld.front().is_some_and(|(at, _)| *at <= self.now)
            {
                let Some((_, segment)) = self.to_handheld.pop_front() else { break };
                moved = true;
                let has = self.has_model;
                let out = match segment {
                    Segment::Bytes(b) => self.handheld.handle_bytes(self.now, &b, |_| has),
                    Segment::Eof => self.handheld.handle_link_closed(self.now),
                };
                self.handheld_acts(out);
            }
            self.start_runs();
            if self.running.front().is_some_and(|r| r.done <= self.now) {
                if let Some(Running { frame, outputs, .. }) = self.running.pop_front() {
                    moved = true;
                    let result = outputs.and_then(|o| {
                        let us = self.run_time.as_micros() as u64;
                        HandheldSession::result(frame, us, &o, &[], None).map_err(RunError::from)
                    });
                    let out = self.handheld.frame_done(self.now, frame, result);
                    self.handheld_acts(out);
                }
            }
            if self.handheld.holds_messages() {
                moved = true;
                let has = self.has_model;
                let out = self.handheld.handle_held(self.now, |_| has);
                self.handheld_acts(out);
            }
            if self.handheld.poll_timeout().is_some_and(|t| t <= self.now) {
                moved = true;
                let out = self.handheld.handle_timeout(self.now);
                self.handheld_acts(out);
            }
        }
        if self.wearable.poll_timeout().is_some_and(|t| t <= self.now) {
            moved = true;
            let out = self.wearable.handle_timeout(self.now);
            self.wearable_acts(out);
        }
        moved
    }

    /// Marks the runs that have started by now, in order, as ran.
    fn start_runs(&mut self) {
        for r in self.running.iter_mut().filter(|r| !r.started && r.start <= self.now) {
            r.started = true;
            if !r.skip {
                self.ran.push(r.frame);
            }
        }
    }

    /// Carries out everything due by now, until nothing is.
    pub fn drive(&mut self) {
        while self.step() {}
    }

    /// The next time anything is due.
    fn next_event(&self) -> Option<Instant> {
        let mut times = vec![];
        times.extend(self.to_wearable.front().map(|(at, _)| *at));
        times.extend(self.wearable.poll_timeout());
        if !self.handheld_stalled {
            if self.handheld.wants_bytes() {
                times.extend(self.to_handheld.front().map(|(at, _)| *at));
            }
            times.extend(self.running.front().map(|r| r.done));
            times.extend(self.handheld.poll_timeout());
        }
        times.into_iter().min()
    }

    /// Moves the clock on by `d`, carrying out each event at its time.
    pub fn advance(&mut self, d: Duration) {
        let until = self.now + d;
        self.drive();
        while let Some(t) = self.next_event().filter(|t| *t <= until) {
            self.now = self.now.max(t);
            self.drive();
        }
        self.now = until;
        self.drive();
    }

    /// The frames delivered to the wearable, in order.
    pub fn delivered(&self) -> Vec<u64> {
        self.events
            .iter()
            .filter_map(|e| match e {
                WearableAction::Delivered { frame, .. } => Some(*frame),
                _ => None,
            })
            .collect()
    }

    /// The frames handed back to run on the wearable, in order.
    pub fn run_locally(&self) -> Vec<u64> {
        self.events
            .iter()
            .filter_map(|e| match e {
                WearableAction::RunLocally(f) => Some(f.clone()),
                _ => None,
            })
            .flatten()
            .collect()
    }

    /// Whether the wearable was told the handheld is ready.
    pub fn is_ready(&self) -> bool {
        self.events.iter().any(|e| matches!(e, WearableAction::Ready { .. }))
    }
}
