//! The wearable's app API: a TensorFlow-like [`Session`] (feed, run, fetch,
//! plus a latency hint) that splits each inference with the paired
//! handheld, pipelines streams, and falls back to running alone.
//!
//! **Threads.** The app's thread is the wearable's CPU: it runs prefixes
//! and local inferences. A tokio task owns the link: it connects (and
//! reconnects with backoff), runs the [`WearableSession`] protocol, and
//! sends and receives in the background, so that while the handheld runs
//! frame n's suffix and the link carries tensors, the app thread already
//! runs frame n+1's prefix. The two talk through channels (tokio's one way,
//! crossbeam's back).
//!
//! **No frame is lost or duplicated.** Every offloaded frame keeps its
//! inputs until answered. A frame whose link drops, whose handheld refuses
//! it, or whose answer misses its deadline runs on the wearable instead;
//! an answer arriving after that is dropped. Results leave in frame order.
//! That bookkeeping is `tandem_proto::pipeline::FramePipeline`, a state
//! machine without I/O or clocks tested under a virtual clock; this module
//! feeds it events (frame started, answer, link lost, the time) and does
//! what it says (run a frame here, deliver).
//!
//! **Re-partitioning** happens between frames: the [`Planner`] is polled
//! before each frame starts, with the profiler's estimates; frames already
//! in flight keep their cut (each message names its cut).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use crossbeam_channel as cb;
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use crate::link::Transport;
use crate::{Cut, Error, Model, Result, SplitExecutor, Tensor, Values};
use tandem_plan::device::DeviceProfile;
use tandem_plan::energy::{ClusterEnergy, EnergyModel, PowerModel};
use tandem_plan::partition::{
    beats, evaluate, Conditions, Decision, EnergyWeights, Evaluation, HandheldStatus, LatencyHint,
    LinkEstimate, Mode, NodePrices, Planner, PlannerConfig, Side,
};
use tandem_plan::predict::ProfiledLatency;
use tandem_proto::pipeline::FramePipeline;
use tandem_proto::profiler::LinkProfiler;

mod config;
mod link_task;
mod planning;
mod report;

pub use config::{Backoff, ModelFile, Placement, SessionConfig};
use link_task::{manage_link, Command, Event};
pub use report::{FrameReport, StreamReport};

/// What the wearable keeps of an offloaded frame until it is answered (or
/// handed back and run here).
struct InFlight {
    inputs: Values,
    local_outputs: Values,
    cut: Cut,
    started: Instant,
    sent_at: Instant,
    wearable: Duration,
    up_bytes: u64,
    predicted_ms: Option<f64>,
}

/// The frames started and not yet delivered: the pure state machine of
/// `tandem_proto::pipeline`, with what this shell keeps per frame.
type Pipe = FramePipeline<Box<InFlight>, (FrameReport, Values)>;

/// Puts a finished frame into the pipeline. It cannot be refused (the frame
/// was just taken out of it); if it were, the frame would be lost, so say so.
fn complete(pipe: &mut Pipe, frame: u64, done: (FrameReport, Values)) {
    if pipe.complete(frame, done).is_err() {
        warn!(frame, "the frame pipeline refused a finished frame");
    }
}

/// A paired inference session on the wearable.
pub struct Session {
    model: ModelFile,
    executor: SplitExecutor,
    config: SessionConfig,
    planner: Planner,
    profiler: LinkProfiler,
    fed_link: LinkEstimate,
    wearable_latency: ProfiledLatency,
    wearable_energy: ClusterEnergy,
    handheld_energy: ClusterEnergy,
    handheld_latency: Option<ProfiledLatency>,
    handheld_device: Option<String>,
    /// The last check of an offloading decision against running alone:
    /// (its cut key, the conditions, the mode, `Some(local ms)` if running alone wins).
    offload_check: Option<(String, Conditions, Mode, Option<f64>)>,
    ready: bool,
    /// Runs the link task (kept alive with the session).
    _runtime: tokio::runtime::Runtime,
    commands: mpsc::UnboundedSender<Command>,
    events: cb::Receiver<Event>,
    origin: Instant,
    next_frame: u64,
    next_probe: u64,
    probes: BTreeMap<u64, (Instant, u64)>,
    fed: Values,
    fetched: Values,
    last: Option<FrameReport>,
}

fn session_err(e: impl std::fmt::Display) -> Error {
    Error::Session(e.to_string())
}

impl Session {
    /// Opens a session for `model` over `transport`: measures the wearable's
    /// layer times, connects (in the background, with reconnection), and
    /// waits up to `ready_timeout` for the handheld to have the model ready.
    /// If the handheld cannot be reached, frames run on the wearable until it can.
    pub fn open(model: ModelFile, transport: Box<dyn Transport>, config: SessionConfig) -> Result<Session> {
        let executor = SplitExecutor::new(model.model.clone());
        let inputs = tandem_core::check::random_inputs(&model.model, 1)?;
        let host = ProfiledLatency::measure(&model.model, &inputs)?;
        let k = config.dilation.max(1.0);
        let wearable_latency = ProfiledLatency {
            per_node_s: host.per_node_s.iter().map(|s| s * k).collect(),
            overhead_s: host.overhead_s * k,
        };
        let wearable_energy =
            ClusterEnergy::new(&config.wearable, PowerModel::Analytical).map_err(session_err)?;
        let handheld_energy =
            ClusterEnergy::new(&config.handheld_fallback, PowerModel::Analytical).map_err(session_err)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("tandem-link")
            .enable_all()
            .build()
            .map_err(session_err)?;
        let (commands, command_rx) = mpsc::unbounded_channel();
        let (event_tx, events) = cb::unbounded();
        if config.placement != Placement::WearableOnly {
            runtime.spawn(manage_link(
                transport,
                model.bytes.clone(),
                config.wearable.name.clone(),
                config.chunk_bytes,
                config.backoff,
                command_rx,
                event_tx,
            ));
        }
        let mut profiler = LinkProfiler::new(config.link_default, Duration::from_secs(2));
        let battery = config.battery.map(|b| (b, false)).or_else(|| {
            crate::battery::battery_status(Path::new("/"))
                .and_then(|b| b.capacity_pct.map(|c| (c / 100.0, b.status.as_deref() == Some("Charging"))))
        });
        if let Some((level, charging)) = battery {
            profiler.on_wearable_battery(level, charging);
        }
        let conditions = Conditions {
            link: config.link_default,
            status: HandheldStatus::default(),
            weights: EnergyWeights::default(),
            hint: config.hint,
            mode: Mode::Single,
        };
        let planner =
            Planner::new(PlannerConfig { margin: config.margin, method: config.method }, conditions);
        let mut s = Session {
            model,
            executor,
            planner,
            profiler,
            fed_link: config.link_default,
            wearable_latency,
            wearable_energy,
            handheld_energy,
            handheld_latency: None,
            handheld_device: None,
            offload_check: None,
            ready: false,
            _runtime: runtime,
            commands,
            events,
            origin: Instant::now(),
            next_frame: 1,
            next_probe: 1,
            probes: BTreeMap::new(),
            fed: Values::new(),
            fetched: Values::new(),
            last: None,
            config,
        };
        if s.config.placement != Placement::WearableOnly {
            let until = Instant::now() + s.config.ready_timeout;
            while !s.ready && Instant::now() < until {
                match s.events.recv_timeout(until.saturating_duration_since(Instant::now())) {
                    Ok(Event::Disconnected(reason)) => {
                        warn!(
                            "the handheld is not reachable ({reason}); running on the wearable until it is"
                        );
                        break;
                    }
                    Ok(ev) => s.on_event(ev, &mut Pipe::new(1, false)),
                    Err(_) => break,
                }
            }
        }
        Ok(s)
    }

    /// Whether the handheld is ready to take suffixes.
    pub fn is_ready(&self) -> bool {
        self.ready
    }

    /// The handheld's profile name, once it answered.
    pub fn handheld_device(&self) -> Option<&str> {
        self.handheld_device.as_deref()
    }

    /// The model.
    pub fn model(&self) -> &Model {
        &self.model.model
    }

    /// The planner's decision in force.
    pub fn decision(&self) -> Option<&Decision> {
        self.planner.current()
    }

    /// The handheld's last reported status, as the planner sees it.
    pub fn handheld_status(&self) -> HandheldStatus {
        self.profiler.handheld_status()
    }

    /// The profiler's link estimate now.
    pub fn link_estimate(&self) -> LinkEstimate {
        self.profiler.estimate()
    }

    /// Sets an input for the next [`Session::run`].
    pub fn feed(&mut self, name: &str, tensor: Tensor) -> Result<()> {
        let g = self.model.model.graph();
        let t = g.inputs().iter().copied().find(|&t| g.tensor(t).name == name).ok_or_else(|| {
            Error::UnknownInput {
                name: name.into(),
                known: g.inputs().iter().map(|&t| g.tensor(t).name.clone()).collect(),
            }
        })?;
        tandem_core::split::check_tensor(g, t, &tensor)?;
        self.fed.insert(name.into(), tensor.into());
        Ok(())
    }

    /// The latency hint: `Some(d)` for the least energy within `d` (zero:
    /// the fastest), `None` for energy first.
    pub fn set_latency_hint(&mut self, hint: Option<Duration>) {
        let hint = match hint {
            None => LatencyHint::EnergyFirst,
            Some(d) if d.is_zero() => LatencyHint::Fastest,
            Some(d) => LatencyHint::Within(d),
        };
        self.config.hint = hint;
        self.planner.handle_hint(hint);
    }

    /// Runs one inference on the fed inputs (split with the handheld when
    /// the planner says so); fetch the outputs with [`Session::fetch`].
    pub fn run(&mut self) -> Result<&FrameReport> {
        let g = self.model.model.graph();
        if let Some(&missing) = g.inputs().iter().find(|&&t| !self.fed.contains_key(&g.tensor(t).name)) {
            return Err(Error::Session(format!("input '{}' was not fed", g.tensor(missing).name)));
        }
        let inputs = self.fed.clone();
        let mut reports = vec![];
        self.drive(vec![inputs], Mode::Single, false, None, |r, out| reports.push((r, out)))?;
        let (report, outputs) = reports.pop().ok_or_else(|| Error::Session("no result".into()))?;
        self.fetched = outputs;
        self.last = Some(report);
        self.last.as_ref().ok_or_else(|| Error::Session("no result".into()))
    }

    /// An output of the last [`Session::run`].
    pub fn fetch(&self, name: &str) -> Result<Tensor> {
        self.fetched.get(name).map(|v| (**v).clone()).ok_or_else(|| {
            let known: Vec<&str> = self.fetched.keys().map(String::as_str).collect();
            Error::Session(format!("no output '{name}' (outputs: {})", known.join(", ")))
        })
    }

    /// The last run's report.
    pub fn last_report(&self) -> Option<&FrameReport> {
        self.last.as_ref()
    }

    /// Runs a stream of frames; returns each frame's outputs and report, in order.
    pub fn stream(&mut self, frames: impl IntoIterator<Item = Values>) -> Result<Vec<(FrameReport, Values)>> {
        let mut out = vec![];
        let pipeline = self.config.pipeline;
        self.drive(frames, Mode::Stream, pipeline, None, |r, v| out.push((r, v)))?;
        Ok(out)
    }

    /// Runs a stream, handing each frame to `deliver` in order as it
    /// completes; frames are released at `fps` when given (latency counts
    /// from the release), else as fast as the pipeline takes them.
    pub fn stream_with(
        &mut self,
        frames: impl IntoIterator<Item = Values>,
        fps: Option<f64>,
        deliver: impl FnMut(FrameReport, Values),
    ) -> Result<()> {
        let pipeline = self.config.pipeline;
        let mode = if pipeline { Mode::Stream } else { Mode::Single };
        self.drive(frames, mode, pipeline, fps, deliver)
    }

    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    fn on_event(&mut self, ev: Event, pipe: &mut Pipe) {
        match ev {
            Event::Ready { device, latency } => {
                info!(handheld = %device, "the handheld is ready");
                if let Ok(p) = DeviceProfile::load(&device) {
                    if let Ok(e) = ClusterEnergy::new(&p, PowerModel::Analytical) {
                        self.handheld_energy = e;
                    }
                }
                self.handheld_latency =
                    Some(ProfiledLatency { per_node_s: latency.per_layer_s, overhead_s: latency.overhead_s });
                self.handheld_device = Some(device);
                self.offload_check = None;
                self.ready = true;
                self.planner.handle_predictor_update();
            }
            Event::Status(s) => {
                self.profiler.on_status(s);
                self.planner.handle_status(self.profiler.handheld_status());
                self.planner.handle_weights(self.profiler.weights());
            }
            Event::Echo { id, received, echoed, at } => {
                if let Some((sent, bytes)) = self.probes.remove(&id) {
                    if received == bytes {
                        let now = self.now();
                        self.profiler.on_echo(received, echoed, at.saturating_duration_since(sent), now);
                    }
                }
            }
            Event::Sent { bytes, took } => {
                // Sends shorter than a millisecond only filled a socket buffer.
                if took >= Duration::from_millis(1) {
                    let now = self.now();
                    self.profiler.on_upload(bytes, took, now);
                }
            }
            Event::Delivered { frame, handheld_us, message, at } => {
                let lone = pipe.is_lone(frame);
                let Some(f) = pipe.answer(frame) else {
                    // Already handed back (a missed deadline): its local
                    // run, pending or done, is the one delivered.
                    debug!(frame, "late answer dropped");
                    return;
                };
                let handheld = Duration::from_micros(handheld_us);
                let down_bytes = message.body.len() as u64;
                let outputs = match message.tensors() {
                    Ok(t) => t,
                    Err(e) => {
                        let _ = pipe.return_local(frame, f, &format!("bad answer: {e}"));
                        return;
                    }
                };
                let round = at.saturating_duration_since(f.sent_at);
                if lone {
                    let now = self.now();
                    self.profiler.on_round_trip(f.up_bytes, down_bytes, round, handheld, now);
                }
                let mut values = f.local_outputs;
                for (name, t) in outputs {
                    values.insert(name, t.into());
                }
                let link = round.saturating_sub(handheld);
                let report = self.report(
                    frame,
                    &f.cut,
                    true,
                    None,
                    f.wearable,
                    link,
                    handheld,
                    at.saturating_duration_since(f.started),
                    (f.up_bytes, down_bytes),
                    f.predicted_ms,
                );
                complete(pipe, frame, (report, values));
            }
            Event::RunLocally { frames, reason } => {
                for frame in frames {
                    pipe.hand_back(frame, &reason);
                }
            }
            Event::Disconnected(reason) => {
                if self.ready {
                    warn!("lost the handheld: {reason}");
                }
                self.ready = false;
                self.probes.clear();
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn report(
        &self,
        frame: u64,
        cut: &Cut,
        offloaded: bool,
        fallback: Option<String>,
        wearable: Duration,
        link: Duration,
        handheld: Duration,
        latency: Duration,
        (up_bytes, down_bytes): (u64, u64),
        predicted_ms: Option<f64>,
    ) -> FrameReport {
        let est = self.profiler.estimate();
        let t_up = Duration::from_secs_f64(up_bytes as f64 / est.up_bytes_per_s);
        let t_down = Duration::from_secs_f64(down_bytes as f64 / est.down_bytes_per_s);
        let (w, h) = (&self.wearable_energy, &self.handheld_energy);
        FrameReport {
            frame,
            offloaded,
            fallback,
            cut: cut.key(),
            prefix_layers: cut.prefix_len(),
            layers: self.model.model.graph().nodes().len(),
            wearable_ms: wearable.as_secs_f64() * 1e3,
            link_ms: link.as_secs_f64() * 1e3,
            handheld_ms: handheld.as_secs_f64() * 1e3,
            latency_ms: latency.as_secs_f64() * 1e3,
            up_bytes,
            down_bytes,
            predicted_ms,
            wearable_j: w.compute_energy_j(wearable) + w.transmit_energy_j(t_up) + w.receive_energy_j(t_down),
            handheld_j: h.compute_energy_j(handheld) + h.receive_energy_j(t_up) + h.transmit_energy_j(t_down),
        }
    }
    /// Runs one frame entirely on the wearable.
    fn run_local(&self, inputs: &Values) -> Result<(Values, Duration)> {
        let g = self.model.model.graph();
        let plan = self.executor.plan(&Cut::wearable_only(g))?;
        let started = Instant::now();
        let all = plan.run_prefix_dilated(g, inputs, self.config.dilation)?;
        let took = started.elapsed();
        let outputs = g
            .outputs()
            .iter()
            .map(|&t| {
                let name = &g.tensor(t).name;
                all.get(name)
                    .map(|v| (name.clone(), v.clone()))
                    .ok_or_else(|| Error::MissingTensor(name.clone()))
            })
            .collect::<Result<Values>>()?;
        Ok((outputs, took))
    }

    /// Starts a frame: runs its prefix and offloads it, or runs it whole.
    fn start_frame(
        &mut self,
        pipe: &mut Pipe,
        frame: u64,
        inputs: Values,
        started: Instant,
        mode: Mode,
    ) -> Result<()> {
        let (cut, predicted_ms) = self.next_cut(mode);
        let g = self.model.model.graph();
        if cut.is_wearable_only() {
            let (outputs, took) = self.run_local(&inputs)?;
            let report = self.report(
                frame,
                &cut,
                false,
                None,
                took,
                Duration::ZERO,
                Duration::ZERO,
                started.elapsed(),
                (0, 0),
                predicted_ms,
            );
            return pipe
                .start_done(frame, (report, outputs))
                .map_err(|_| Error::Session(format!("frame {frame} was already started")));
        }
        let plan = self.executor.plan(&cut)?;
        let t0 = Instant::now();
        let up = plan.run_prefix_dilated(g, &inputs, self.config.dilation)?;
        let wearable = t0.elapsed();
        let mut tensors = vec![];
        let mut local_outputs = Values::new();
        for &t in cut.up_tensors() {
            let name = &g.tensor(t).name;
            let v = up.get(name).ok_or_else(|| Error::MissingTensor(name.clone()))?;
            tensors.push((name.clone(), (**v).clone()));
        }
        for &t in g.outputs() {
            let name = &g.tensor(t).name;
            if !cut.down_tensors().contains(&t) {
                if let Some(v) = up.get(name) {
                    local_outputs.insert(name.clone(), v.clone());
                }
            }
        }
        let up_bytes = tensors.iter().map(|(_, t)| (t.len() * t.datum_type().size_of()) as u64).sum();
        let remote_s = predicted_ms.map_or(0.0, |p| p / 1e3 - wearable.as_secs_f64()).max(0.0);
        let sent_at = Instant::now();
        let budget =
            Duration::from_secs_f64(remote_s * self.config.deadline_factor).max(self.config.deadline_floor);
        let key = cut.key();
        debug!(
            frame,
            prefix = cut.prefix_len(),
            predicted_ms = ?predicted_ms,
            deadline_s = budget.as_secs_f64(),
            link = ?self.profiler.estimate(),
            "offloading"
        );
        let in_flight = Box::new(InFlight {
            inputs,
            local_outputs,
            cut,
            started,
            sent_at,
            wearable,
            up_bytes,
            predicted_ms,
        });
        pipe.start_offloaded(frame, in_flight, self.now() + budget)
            .map_err(|_| Error::Session(format!("frame {frame} was already started")))?;
        if self.commands.send(Command::Offload { frame, cut: key, tensors }).is_err() {
            return Err(Error::Session("the link task stopped".into()));
        }
        Ok(())
    }

    /// The stream engine: see the module docs.
    fn drive(
        &mut self,
        frames: impl IntoIterator<Item = Values>,
        mode: Mode,
        pipeline: bool,
        fps: Option<f64>,
        mut deliver: impl FnMut(FrameReport, Values),
    ) -> Result<()> {
        let mut frames = frames.into_iter().peekable();
        let mut pipe = Pipe::new(self.config.max_in_flight, pipeline);
        let first_release = Instant::now();
        let mut released = 0u64;
        loop {
            while let Ok(ev) = self.events.try_recv() {
                self.on_event(ev, &mut pipe);
            }
            // Late answers: run those frames here.
            for f in pipe.tick(self.now()) {
                warn!(frame = f, "the handheld missed the deadline; running the frame here");
            }
            while let Some((_, (report, values))) = pipe.pop_deliverable() {
                deliver(report, values);
            }
            // Work: frames handed back first (oldest first), then a new frame.
            if let Some((f, back, reason)) = pipe.next_local() {
                let (outputs, took) = self.run_local(&back.inputs)?;
                let g = self.model.model.graph();
                let report = self.report(
                    f,
                    &Cut::wearable_only(g),
                    false,
                    Some(reason),
                    took,
                    Duration::ZERO,
                    Duration::ZERO,
                    back.started.elapsed(),
                    (back.up_bytes, 0),
                    None,
                );
                complete(&mut pipe, f, (report, outputs));
                continue;
            }
            if pipe.can_start() && frames.peek().is_some() {
                let release = fps.map(|f| first_release + Duration::from_secs_f64(released as f64 / f));
                match release {
                    Some(r) if r > Instant::now() => {
                        self.wait(&mut pipe, r.min(Instant::now() + Duration::from_millis(50)));
                        continue;
                    }
                    _ => {}
                }
                let Some(inputs) = frames.next() else { continue };
                released += 1;
                let frame = self.next_frame;
                self.next_frame += 1;
                let started = release.unwrap_or_else(Instant::now);
                self.start_frame(&mut pipe, frame, inputs, started, mode)?;
                continue;
            }
            if pipe.is_empty() && frames.peek().is_none() {
                return Ok(());
            }
            self.maybe_probe(pipe.in_flight() == 0);
            let until = Instant::now() + Duration::from_millis(50);
            let deadline = pipe.next_deadline().map(|d| self.origin + d);
            self.wait(&mut pipe, deadline.map_or(until, |d| d.min(until)));
        }
    }

    /// Waits for one event until `until`.
    fn wait(&mut self, pipe: &mut Pipe, until: Instant) {
        if let Ok(ev) = self.events.recv_timeout(until.saturating_duration_since(Instant::now())) {
            self.on_event(ev, pipe);
        }
    }

    fn maybe_probe(&mut self, idle: bool) {
        // A probe unanswered for 5 s is lost.
        self.probes.retain(|_, (sent, _)| sent.elapsed() < Duration::from_secs(5));
        if !self.ready || !self.probes.is_empty() {
            return;
        }
        if let Some(p) = self.profiler.probe_due(self.now(), idle) {
            let id = self.next_probe;
            self.next_probe += 1;
            self.probes.insert(id, (Instant::now(), p.bytes as u64));
            let _ = self.commands.send(Command::Probe { id, bytes: p.bytes });
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.commands.send(Command::Shutdown);
        // Give the link task a moment to say Bye.
        let until = Instant::now() + Duration::from_millis(300);
        while Instant::now() < until {
            match self.events.recv_timeout(Duration::from_millis(20)) {
                Err(cb::RecvTimeoutError::Disconnected) => break,
                _ => continue,
            }
        }
    }
}
