//! The wearable's frame pipeline without I/O or clocks: which frames are in
//! flight, which were handed back to run on the wearable, which are done,
//! and the order they leave in. Time is passed in (`now`, the time since the
//! session began); the I/O shell (`tandem::client`) runs prefixes and local
//! inferences, sends, receives, and tells this machine what happened.
//!
//! What it guarantees, whatever the order of events: every started frame is
//! delivered exactly once, in frame order. An answer for a frame no longer
//! in flight (handed back after a missed deadline or a lost link) is refused,
//! so the frame's local run is the one delivered; a frame handed back runs
//! locally once; a frame done stays done.
//!
//! A frame may also start *running*: its prefix runs on the wearable's
//! prefix runner, beside the shell's thread, and the frame is offloaded or
//! finished when the runner returns it. It counts toward the in-flight
//! bound and holds its place in the delivery order meanwhile.
//!
//! `P` is what the shell keeps for a frame until it is answered (its inputs,
//! its prefix's outputs, its timings); `R` is a delivered result.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// Where one frame stands.
#[derive(Debug)]
enum Slot<P, R> {
    /// Its prefix runs on the wearable's prefix runner.
    Running,
    /// Sent to the handheld, answer expected before `deadline`.
    InFlight { payload: P, deadline: Duration },
    /// Handed back: to run on the wearable.
    Local { payload: P, reason: String },
    /// Finished, waiting for the frames before it.
    Done(R),
}

/// The pipeline's state: frames started and not yet delivered.
#[derive(Debug)]
pub struct FramePipeline<P, R> {
    slots: BTreeMap<u64, Slot<P, R>>,
    order: VecDeque<u64>,
    /// The last frame started: numbers must increase past it.
    last_started: Option<u64>,
    max_in_flight: usize,
    overlap: bool,
    /// When the answer of the last frame sent is expected ([`FramePipeline::deadline`]).
    expected: Duration,
}

/// Why a frame went back to the wearable, as [`FramePipeline::tick`] reports it.
pub const DEADLINE_MISSED: &str = "deadline missed";

impl<P, R> FramePipeline<P, R> {
    /// A pipeline that keeps up to `max_in_flight` frames at the handheld
    /// when `overlap` is true, else one frame at a time end to end.
    pub fn new(max_in_flight: usize, overlap: bool) -> FramePipeline<P, R> {
        FramePipeline {
            slots: BTreeMap::new(),
            order: VecDeque::new(),
            last_started: None,
            max_in_flight: max_in_flight.max(1),
            overlap,
            expected: Duration::ZERO,
        }
    }

    /// The deadline of a frame about to be sent at `now` whose answer alone
    /// takes about `remote` (the link both ways and the handheld): `factor`
    /// times the wait for its answer, and never sooner than `floor`.
    ///
    /// The link and the handheld serve the frames in flight in order, one
    /// stage after another, so answers follow each other by the slowest
    /// stage's time, `service` (the link, both ways, or the handheld,
    /// whichever holds a frame longer). A frame's answer is expected `remote`
    /// after `now`, or `service` after the answer expected for the frame
    /// sent before it, whichever is later: a frame queued behind others is
    /// not late for the queue's length (without that, a link-bound stream
    /// with many frames in flight missed deadlines by the dozen, was taken
    /// as stalled, and ran those frames again on the wearable).
    ///
    /// With `service` unknown (`None`), each frame is taken to hold the
    /// pipeline for its whole `remote`, and the wait is never more than
    /// `remote` for each frame in flight and this one: no answer can take
    /// longer unless the handheld stalled. Both keep the expected times
    /// from drifting away from the answers over a long stream, which
    /// counting `remote` per frame did (about 13 ms more wait per frame
    /// over BLE), until a stalled handheld went unseen for seconds. A
    /// stalled handheld is seen by the oldest frame's deadline.
    pub fn deadline(
        &mut self,
        now: Duration,
        remote: Duration,
        service: Option<Duration>,
        factor: f64,
        floor: Duration,
    ) -> Duration {
        let alone = now.saturating_add(remote);
        let in_flight = self.in_flight();
        self.expected = if in_flight == 0 {
            alone
        } else {
            let queued = self.expected.saturating_add(service.unwrap_or(remote).min(remote)).max(alone);
            let most = u32::try_from(in_flight + 1).map_or(Duration::MAX, |n| remote.saturating_mul(n));
            queued.min(now.saturating_add(most))
        };
        let wait = self.expected.saturating_sub(now).as_secs_f64() * factor;
        let budget = Duration::try_from_secs_f64(wait.max(0.0)).unwrap_or(Duration::MAX).max(floor);
        now.saturating_add(budget)
    }

    /// Whether a new frame may start: frames at the handheld and running
    /// here below the in-flight bound (overlapped), or nothing pending at
    /// all (one at a time).
    pub fn can_start(&self) -> bool {
        if self.overlap {
            self.in_flight() + self.running() < self.max_in_flight
        } else {
            self.slots.is_empty()
        }
    }

    /// Frames at the handheld.
    pub fn in_flight(&self) -> usize {
        self.slots.values().filter(|s| matches!(s, Slot::InFlight { .. })).count()
    }

    /// Frames whose prefix runs on the wearable's prefix runner.
    pub fn running(&self) -> usize {
        self.slots.values().filter(|s| matches!(s, Slot::Running)).count()
    }

    /// Whether every started frame was delivered (a frame the shell took
    /// out to run, and has not completed, is not).
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Starts `frame`, sent to the handheld, to be answered by `deadline`.
    /// Frame numbers must increase; a repeated or older number is refused
    /// (the frame would be delivered twice or out of order).
    pub fn start_offloaded(&mut self, frame: u64, payload: P, deadline: Duration) -> Result<(), P> {
        if !self.admit(frame) {
            return Err(payload);
        }
        self.slots.insert(frame, Slot::InFlight { payload, deadline });
        Ok(())
    }

    /// Starts `frame`, already finished (it ran on the wearable). Refused as
    /// [`FramePipeline::start_offloaded`] refuses.
    pub fn start_done(&mut self, frame: u64, result: R) -> Result<(), R> {
        if !self.admit(frame) {
            return Err(result);
        }
        self.slots.insert(frame, Slot::Done(result));
        Ok(())
    }

    /// Starts `frame` with its prefix running on the wearable's prefix
    /// runner; it leaves that state by [`FramePipeline::ran`] or
    /// [`FramePipeline::finish_running`]. Refused (`false`) as
    /// [`FramePipeline::start_offloaded`] refuses.
    pub fn start_running(&mut self, frame: u64) -> bool {
        if !self.admit(frame) {
            return false;
        }
        self.slots.insert(frame, Slot::Running);
        true
    }

    /// `frame`'s prefix ran and the frame is sent, to be answered by
    /// `deadline`. Refused for a frame that is not running.
    pub fn ran(&mut self, frame: u64, payload: P, deadline: Duration) -> Result<(), P> {
        match self.slots.get_mut(&frame) {
            Some(slot @ Slot::Running) => {
                *slot = Slot::InFlight { payload, deadline };
                Ok(())
            }
            _ => Err(payload),
        }
    }

    /// `frame`'s prefix failed: the frame is done with `result` (its error).
    /// Refused for a frame that is not running.
    pub fn finish_running(&mut self, frame: u64, result: R) -> Result<(), R> {
        match self.slots.get_mut(&frame) {
            Some(slot @ Slot::Running) => {
                *slot = Slot::Done(result);
                Ok(())
            }
            _ => Err(result),
        }
    }

    /// An answer for `frame` arrived: its payload if the frame is still in
    /// flight (the shell then builds the result and calls
    /// [`FramePipeline::complete`]), `None` for a late or unknown answer,
    /// which must be dropped.
    pub fn answer(&mut self, frame: u64) -> Option<P> {
        if !matches!(self.slots.get(&frame), Some(Slot::InFlight { .. })) {
            return None;
        }
        match self.slots.remove(&frame) {
            Some(Slot::InFlight { payload, .. }) => Some(payload),
            _ => None,
        }
    }

    /// Whether `frame` is the only frame in flight (its round trip then
    /// measures the link without queueing behind other frames).
    pub fn is_lone(&self, frame: u64) -> bool {
        matches!(self.slots.get(&frame), Some(Slot::InFlight { .. })) && self.in_flight() == 1
    }

    /// `frame` finished with `result`: after [`FramePipeline::answer`] or
    /// [`FramePipeline::next_local`] took it out. A frame not taken out, or
    /// not started, is refused.
    pub fn complete(&mut self, frame: u64, result: R) -> Result<(), R> {
        if !self.taken_out(frame) {
            return Err(result);
        }
        self.slots.insert(frame, Slot::Done(result));
        Ok(())
    }

    /// `frame` goes back to the wearable with `reason` if it is in flight.
    /// A frame already handed back or done is left as it is, so no frame
    /// runs twice.
    pub fn hand_back(&mut self, frame: u64, reason: &str) {
        if let Some(payload) = self.answer(frame) {
            self.slots.insert(frame, Slot::Local { payload, reason: reason.to_string() });
        }
    }

    /// A frame taken out by [`FramePipeline::answer`] whose answer was
    /// unusable goes back to the wearable with `payload`.
    pub fn return_local(&mut self, frame: u64, payload: P, reason: &str) -> Result<(), P> {
        if !self.taken_out(frame) {
            return Err(payload);
        }
        self.slots.insert(frame, Slot::Local { payload, reason: reason.to_string() });
        Ok(())
    }

    /// The link is lost: every frame in flight goes back to the wearable.
    pub fn link_lost(&mut self, reason: &str) {
        let frames: Vec<u64> = self.in_flight_frames();
        for f in frames {
            self.hand_back(f, reason);
        }
    }

    /// The time is `now`: frames in flight past their deadline go back to
    /// the wearable (with [`DEADLINE_MISSED`]); returns them, oldest first.
    pub fn tick(&mut self, now: Duration) -> Vec<u64> {
        let late: Vec<u64> = self
            .slots
            .iter()
            .filter_map(|(&f, s)| {
                matches!(s, Slot::InFlight { deadline, .. } if *deadline <= now).then_some(f)
            })
            .collect();
        for &f in &late {
            self.hand_back(f, DEADLINE_MISSED);
        }
        late
    }

    /// The earliest deadline of a frame in flight.
    pub fn next_deadline(&self) -> Option<Duration> {
        self.slots
            .values()
            .filter_map(|s| if let Slot::InFlight { deadline, .. } = s { Some(*deadline) } else { None })
            .min()
    }

    /// The oldest frame handed back, taken out to run on the wearable, with
    /// why it came back; the shell runs it and calls [`FramePipeline::complete`].
    pub fn next_local(&mut self) -> Option<(u64, P, String)> {
        let frame = self.slots.iter().find_map(|(&f, s)| matches!(s, Slot::Local { .. }).then_some(f))?;
        match self.slots.remove(&frame) {
            Some(Slot::Local { payload, reason }) => Some((frame, payload, reason)),
            _ => None,
        }
    }

    /// The next frame to deliver, in frame order, once it and every frame
    /// before it are done.
    pub fn pop_deliverable(&mut self) -> Option<(u64, R)> {
        let &frame = self.order.front()?;
        if !matches!(self.slots.get(&frame), Some(Slot::Done(_))) {
            return None;
        }
        self.order.pop_front();
        match self.slots.remove(&frame) {
            Some(Slot::Done(r)) => Some((frame, r)),
            _ => None,
        }
    }

    /// Whether `frame` was started, is not yet delivered, and has no slot:
    /// the shell holds it (after `answer` or `next_local`).
    fn taken_out(&self, frame: u64) -> bool {
        !self.slots.contains_key(&frame) && self.order.contains(&frame)
    }

    /// Queues `frame` for delivery if its number is past every started one.
    fn admit(&mut self, frame: u64) -> bool {
        if self.last_started.is_some_and(|last| frame <= last) {
            return false;
        }
        self.last_started = Some(frame);
        self.order.push_back(frame);
        true
    }

    fn in_flight_frames(&self) -> Vec<u64> {
        self.slots.iter().filter_map(|(&f, s)| matches!(s, Slot::InFlight { .. }).then_some(f)).collect()
    }
}
