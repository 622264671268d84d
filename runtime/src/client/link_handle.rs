//! The app thread's handle on the link task: the task started on its own
//! runtime, commands out, events in, the handheld's coalesced status, the
//! link probes in flight ([`Probes`]), and a shutdown that says Bye
//! without blocking an async caller.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crossbeam_channel as cb;
use tokio::sync::mpsc;

use super::link_task::{manage_link, Command, Event, LinkSettings, StatusSlot};
use super::ModelFile;
use crate::link::Transport;
use crate::CutKey;
use tandem_proto::encoding::Encoding;
use tandem_proto::protocol::{PackedTensor, StatusReport};

/// The link task is gone: the session can no longer offload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the link task stopped")]
pub struct LinkStopped;

/// Probes sent and not yet echoed: their ids, when each left and its size.
#[derive(Debug, Default)]
pub(super) struct Probes {
    next: u64,
    sent: BTreeMap<u64, (Instant, u64)>,
}

/// A probe unanswered for this long is taken as lost.
pub(super) const PROBE_LOST_AFTER: Duration = Duration::from_secs(5);

impl Probes {
    /// A probe of `bytes` leaving at `now`: its id.
    pub fn start(&mut self, bytes: usize, now: Instant) -> u64 {
        self.next += 1;
        self.sent.insert(self.next, (now, bytes as u64));
        self.next
    }

    /// The echo of probe `id`, with `received` bytes: when it left, if it
    /// was ours and came back whole. Either way the probe is done.
    pub fn echoed(&mut self, id: u64, received: u64) -> Option<Instant> {
        let (sent, bytes) = self.sent.remove(&id)?;
        (received == bytes).then_some(sent)
    }

    /// Whether probe `id` is still out.
    pub fn is_out(&self, id: u64) -> bool {
        self.sent.contains_key(&id)
    }

    /// Whether no probe is out, after dropping those out past [`PROBE_LOST_AFTER`] at `now`.
    pub fn none_out(&mut self, now: Instant) -> bool {
        self.sent.retain(|_, (sent, _)| now.saturating_duration_since(*sent) < PROBE_LOST_AFTER);
        self.sent.is_empty()
    }

    /// Forgets every probe (the link ended).
    pub fn clear(&mut self) {
        self.sent.clear();
    }
}

/// The link task and the channels to it.
pub(super) struct LinkHandle {
    /// Runs the link task (kept alive with the session; taken on drop).
    runtime: Option<tokio::runtime::Runtime>,
    commands: mpsc::UnboundedSender<Command>,
    events: cb::Receiver<Event>,
    /// The handheld's latest status, coalesced by the link task.
    status: StatusSlot,
    name: String,
    pub probes: Probes,
}

impl LinkHandle {
    /// Starts the link task over `transport` for `model` (`connect`: false
    /// for a session that never offloads: no task, no link).
    pub fn open(
        transport: Box<dyn Transport>,
        model: ModelFile,
        device: String,
        settings: LinkSettings,
        connect: bool,
    ) -> std::io::Result<LinkHandle> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("tandem-link")
            .enable_all()
            .build()?;
        let name = transport.describe();
        let (commands, command_rx) = mpsc::unbounded_channel();
        let (event_tx, events) = cb::unbounded();
        let status = StatusSlot::default();
        if connect {
            runtime.spawn(manage_link(
                transport,
                model,
                device,
                settings,
                command_rx,
                (event_tx, status.clone()),
            ));
        }
        Ok(LinkHandle { runtime: Some(runtime), commands, events, status, name, probes: Probes::default() })
    }

    /// The transport's description (for messages).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sends a frame's packed crossing tensors at `cut`.
    pub fn offload(
        &self,
        frame: u64,
        cut: (CutKey, Option<crate::engine::Engine>),
        packed: Vec<PackedTensor>,
        answer: Vec<Encoding>,
        edge: Option<CutKey>,
    ) -> Result<(), LinkStopped> {
        self.commands.send(Command::Offload { frame, cut, packed, answer, edge }).map_err(|_| LinkStopped)
    }

    /// Sends a probe of `bytes` now: its id, or `None` when the task is gone.
    pub fn probe(&mut self, bytes: usize) -> Option<u64> {
        let id = self.probes.start(bytes, Instant::now());
        self.commands.send(Command::Probe { id, bytes }).ok().map(|()| id)
    }

    /// Asks the handheld to build these cuts' suffixes ahead.
    pub fn prepare(&self, cuts: Vec<CutKey>, engine: Option<crate::engine::Engine>) {
        let _ = self.commands.send(Command::Prepare(cuts, engine));
    }

    /// Tells the handheld not to run these frames (they run here).
    pub fn cancel(&self, frames: Vec<u64>) {
        let _ = self.commands.send(Command::Cancel(frames));
    }

    /// Drops the link as lost, for `reason`, and opens it again.
    pub fn reset(&self, reason: String) {
        let _ = self.commands.send(Command::Reset(reason));
    }

    /// Where events arrive (to wait on beside other channels).
    pub fn events(&self) -> &cb::Receiver<Event> {
        &self.events
    }

    /// An event, if one is waiting.
    pub fn try_event(&self) -> Option<Event> {
        self.events.try_recv().ok()
    }

    /// The next event, waiting until `until` at most.
    pub fn event_until(&self, until: Instant) -> Option<Event> {
        self.events.recv_timeout(until.saturating_duration_since(Instant::now())).ok()
    }

    /// The handheld's latest status: `first` (what the event carried) unless
    /// a newer one came since.
    pub fn latest_status(&self, first: StatusReport) -> StatusReport {
        self.status.lock().unwrap_or_else(|p| p.into_inner()).take().unwrap_or(first)
    }
}

impl Drop for LinkHandle {
    fn drop(&mut self) {
        let _ = self.commands.send(Command::Shutdown);
        // Inside an async runtime (an app's tokio task) nothing may block:
        // the link task is left to say Bye on its own threads.
        if tokio::runtime::Handle::try_current().is_err() {
            // Give the link task a moment to say Bye.
            let until = Instant::now() + Duration::from_millis(300);
            while Instant::now() < until {
                match self.events.recv_timeout(Duration::from_millis(20)) {
                    Err(cb::RecvTimeoutError::Disconnected) => break,
                    _ => continue,
                }
            }
        }
        // Dropping a runtime inside another panics; this never waits.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_counts_only_when_it_comes_back_whole_and_once() {
        let mut p = Probes::default();
        let t0 = Instant::now();
        let a = p.start(0, t0);
        let b = p.start(5000, t0);
        assert_ne!(a, b);
        assert_eq!(p.echoed(b, 4000), None, "a short echo is not a measurement");
        assert!(!p.is_out(b), "but the probe is done");
        assert_eq!(p.echoed(a, 0), Some(t0));
        assert_eq!(p.echoed(a, 0), None, "an echo twice counts once");
        assert_eq!(p.echoed(99, 0), None, "an id never sent");
    }

    #[test]
    fn probes_out_too_long_are_lost() {
        let mut p = Probes::default();
        let t0 = Instant::now();
        let id = p.start(10, t0);
        assert!(!p.none_out(t0 + Duration::from_secs(4)));
        assert!(p.is_out(id));
        assert!(p.none_out(t0 + PROBE_LOST_AFTER));
        let id = p.start(10, t0);
        p.clear();
        assert!(!p.is_out(id));
    }
}
