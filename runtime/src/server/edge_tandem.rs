//! The handheld's client to a Tandem edge (`tandem://HOST:PORT`): another
//! `tandem-handheld serve`, on an edge server, that this handheld talks to
//! as a wearable talks to it (the same link task and protocol session),
//! over an encrypted session with a key paired once
//! (`tandem-handheld pair-edge`). A relayed frame crosses as a frame
//! offloaded at S2: the edge runs S2's suffix and answers its down tensors.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crossbeam_channel as cb;
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use crate::client::link_task::{describe_peer, manage_link, Command, Event, LinkSettings, StatusSlot};
use crate::client::{Backoff, ModelFile};
use crate::emulate::{EmulatedTransport, LinkControl, LinkProfile, Schedule};
use crate::error::EdgeError;
use crate::link::{TcpTransport, Transport};
use crate::{CutKey, Values};
use tandem_oip::EmulatedLink;
use tandem_proto::encoding::Encoding;
use tandem_proto::protocol::{pack_tensor, LatencySummary};

/// The scheme of a Tandem edge's address in `Edge` asks and `--edge-allow`.
pub(crate) const SCHEME: &str = "tandem://";

/// How long attaching may take: connecting, the handshake, the model
/// pushed if the edge lacks it, loaded and profiled there.
const ATTACH: Duration = Duration::from_secs(25);
/// How long the first probe of an attached edge may take.
const PROBE: Duration = Duration::from_secs(5);

/// The probe that measures the phone–edge round trip.
const RTT_PROBE: u64 = 1;

/// A connected Tandem edge: its link task's commands and events.
pub(crate) struct TandemEdge {
    addr: String,
    commands: mpsc::UnboundedSender<Command>,
    events: Mutex<cb::Receiver<Event>>,
    next_frame: AtomicU64,
    /// Longest a relayed frame waits for the edge's answer.
    timeout: Duration,
}

/// What attaching found: the edge, its device and latency profile for the
/// model, and one probe's round trip.
pub(crate) struct Attached {
    pub(crate) edge: TandemEdge,
    pub(crate) device: String,
    pub(crate) latency: LatencySummary,
    pub(crate) rtt_us: u64,
}

/// What one relayed frame's edge part took.
pub(crate) struct EdgeAnswer {
    pub(crate) outputs: Values,
    pub(crate) up_bytes: u64,
    pub(crate) down_bytes: u64,
    /// The request's round trip, the edge's compute included (µs).
    pub(crate) edge_us: u64,
    /// The edge's compute alone, as it reported it (µs).
    pub(crate) compute_us: u64,
}

impl Drop for TandemEdge {
    fn drop(&mut self) {
        let _ = self.commands.send(Command::Shutdown);
    }
}

/// The link to the edge at `addr`: TCP, shaped to `emulate` when given,
/// inside an encrypted session with the edge paired in the keystore `keys`.
fn transport(
    addr: &str,
    keys: &Path,
    emulate: Option<EmulatedLink>,
) -> Result<Box<dyn Transport>, EdgeError> {
    let tcp = TcpTransport::new(addr.to_string());
    let inner: Box<dyn Transport> = match emulate {
        Some(e) => {
            let profile = LinkProfile {
                name: "edge-link".into(),
                up_bps: e.up_bits_per_s,
                down_bps: e.down_bits_per_s,
                latency: e.rtt / 2,
                jitter: Duration::ZERO,
                mtu: 1460,
            };
            let control = LinkControl::new(&profile, Schedule::default());
            Box::new(EmulatedTransport::new(tcp, profile, control, 7))
        }
        None => Box::new(tcp),
    };
    // The reasons go to the wearable: the keystore's path stays in this log.
    match crate::secure::for_wearable(inner, keys, addr) {
        Ok((secured, true)) => Ok(secured),
        Ok((_, false)) => {
            warn!(%addr, keys = %keys.display(), "no edge paired at this address in the edge keystore");
            Err(EdgeError::NotPaired(addr.to_string()))
        }
        Err(e) => {
            warn!(%addr, keys = %keys.display(), "the edge keystore: {e}");
            Err(EdgeError::Keystore(addr.to_string()))
        }
    }
}

impl TandemEdge {
    /// Connects to the Tandem server at `addr` for `model`, encrypted with
    /// the keys in `keys`, and waits until it has the model loaded; then
    /// measures one round trip. Blocking: call it off the async threads.
    pub(crate) fn attach(
        addr: &str,
        keys: &Path,
        emulate: Option<EmulatedLink>,
        model: ModelFile,
        timeout: Duration,
        handle: &tokio::runtime::Handle,
    ) -> Result<Attached, EdgeError> {
        let transport = transport(addr, keys, emulate)?;
        let (commands, command_rx) = mpsc::unbounded_channel();
        let (event_tx, events) = cb::unbounded();
        let settings = LinkSettings {
            chunk_bytes: 64 << 10,
            backoff: Backoff { initial: Duration::from_millis(500), max: Duration::from_secs(5) },
            silence: Duration::from_secs(10),
            keepalive: Duration::from_secs(20),
            edge: None,
        };
        let status: StatusSlot = Default::default();
        handle.spawn(manage_link(
            transport,
            model,
            "handheld-relay".into(),
            settings,
            command_rx,
            (event_tx, status),
        ));
        let edge = TandemEdge {
            addr: addr.to_string(),
            commands,
            events: Mutex::new(events),
            next_frame: AtomicU64::new(0),
            timeout,
        };
        let until = Instant::now() + ATTACH;
        let (device, latency) = loop {
            match edge.next_event(until) {
                Some(Event::Ready { device, latency }) => break (device, latency),
                Some(Event::Disconnected(why)) => return Err(closed(addr, &why)),
                Some(_) => {}
                None => {
                    return Err(EdgeError::Timeout { addr: addr.into(), what: "get ready", within: ATTACH })
                }
            }
        };
        let sent = Instant::now();
        let _ = edge.commands.send(Command::Probe { id: RTT_PROBE, bytes: 0 });
        let until = sent + PROBE;
        let rtt_us = loop {
            match edge.next_event(until) {
                Some(Event::Echo { id: RTT_PROBE, at, .. }) => {
                    break at.duration_since(sent).as_micros() as u64
                }
                Some(Event::Disconnected(why)) => return Err(closed(addr, &why)),
                Some(_) => {}
                None => {
                    return Err(EdgeError::Timeout {
                        addr: addr.into(),
                        what: "answer a probe",
                        within: PROBE,
                    })
                }
            }
        };
        info!(%addr, %device, rtt_us, "Tandem edge attached");
        Ok(Attached { edge, device, latency, rtt_us })
    }

    fn next_event(&self, until: Instant) -> Option<Event> {
        let events = self.events.lock().unwrap_or_else(|p| p.into_inner());
        events.recv_deadline(until).ok()
    }

    /// Runs the suffix of `near` on the edge on `inputs` (S2's up tensors,
    /// by name): its outputs, or why not (the link is down, the edge
    /// refused, no answer within the timeout: the frame is then cancelled
    /// there, and its late answer dropped).
    pub(crate) fn infer(
        &self,
        near: &CutKey,
        inputs: &[(String, &crate::Tensor)],
    ) -> Result<EdgeAnswer, EdgeError> {
        let frame = self.next_frame.fetch_add(1, Ordering::Relaxed);
        let mut packed = Vec::with_capacity(inputs.len());
        let mut up_bytes = 0;
        for (name, t) in inputs {
            let wire = tandem_core::wire::to_wire(t)?;
            let p = pack_tensor(name, &wire, Encoding::Raw, None)
                .map_err(|source| EdgeError::Pack { tensor: name.clone(), source })?;
            up_bytes += p.bytes.len() as u64;
            packed.push(p);
        }
        let offload =
            Command::Offload { frame, cut: (near.clone(), None), packed, answer: vec![], edge: None };
        self.commands.send(offload).map_err(|_| EdgeError::LinkStopped(self.addr.clone()))?;
        let started = Instant::now();
        let until = started + self.timeout;
        loop {
            match self.next_event(until) {
                Some(Event::Delivered { frame: f, handheld_us, answer, at, .. }) if f == frame => {
                    let edge_us = at.saturating_duration_since(started).as_micros() as u64;
                    let down_bytes = answer.body_len as u64;
                    let outputs = answer.body.decode().0.map_err(|e| EdgeError::Decode(Box::new(e)))?;
                    let outputs = outputs.into_iter().map(|(n, t)| (n, t.into())).collect();
                    return Ok(EdgeAnswer {
                        outputs,
                        up_bytes,
                        down_bytes,
                        edge_us,
                        compute_us: handheld_us,
                    });
                }
                Some(Event::RunLocally { frames, reason }) if frames.contains(&frame) => {
                    return Err(EdgeError::Closed { addr: self.addr.clone(), reason })
                }
                // A frame given up earlier: its late answer.
                Some(Event::Delivered { frame: f, .. }) => debug!(frame = f, "a late edge answer dropped"),
                Some(_) => {}
                None => {
                    let _ = self.commands.send(Command::Cancel(vec![frame]));
                    let (addr, within) = (self.addr.clone(), self.timeout);
                    return Err(EdgeError::Timeout { addr, what: "answer", within });
                }
            }
        }
    }
}

/// The edge's link closed, in the session's words.
fn closed(addr: &str, why: &tandem_proto::session::CloseReason) -> EdgeError {
    EdgeError::Closed { addr: addr.into(), reason: describe_peer(why, "the edge server") }
}
