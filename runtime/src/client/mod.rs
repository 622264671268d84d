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
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel as cb;
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use crate::cpufreq::CpuFreq;
use crate::link::Transport;
use crate::{Cut, Error, Model, Result, Sides, SplitExecutor, SplitPlan, Tensor, Values};
use tandem_plan::device::DeviceProfile;
use tandem_plan::energy::{ClusterEnergy, EnergyModel, PowerModel};
use tandem_plan::partition::{
    beats, evaluate, Conditions, Decision, EnergyWeights, Evaluation, HandheldStatus, LatencyHint,
    LinkCodecs, LinkEstimate, Mode, NodePrices, Planner, PlannerConfig, Side,
};
use tandem_plan::predict::{OnlineLatency, ProfiledLatency};
use tandem_proto::encoding::{Allowed, Encoding};
use tandem_proto::pipeline::FramePipeline;
use tandem_proto::profiler::LinkProfiler;
use tandem_proto::protocol::PackedTensor;

pub mod codecs;
mod config;
mod link_task;
mod planning;
mod report;
mod status;
mod switch;

pub use config::{Accuracy, Backoff, ConfigParseError, ModelFile, Placement, SessionConfig, Strategy};
use link_task::{manage_link, Command, Event};
pub use report::{FrameReport, StreamReport};
pub use status::{Frame, Status};

use crate::tensor::Outputs;

/// What the wearable keeps of an offloaded frame until it is answered (or
/// handed back and run here).
struct InFlight {
    inputs: Values,
    local_outputs: Values,
    cut: Cut,
    started: Instant,
    sent_at: Instant,
    wearable: Duration,
    /// The prefix's compute alone (no packing): what its prediction is of.
    prefix: Duration,
    up_bytes: u64,
    up_raw_bytes: u64,
    predicted_ms: Option<f64>,
    switch_wait_ms: Option<f64>,
    plan_build_ms: f64,
    /// How the prefix ran: the report's `dvfs` line.
    dvfs: Option<String>,
}

/// The frames started and not yet delivered: the pure state machine of
/// `tandem_proto::pipeline`, with what this shell keeps per frame.
type Pipe = FramePipeline<Box<InFlight>, Result<(FrameReport, Values)>>;

/// Puts a finished frame into the pipeline. It cannot be refused (the frame
/// was just taken out of it); if it were, the frame would be lost, so say so.
fn complete(pipe: &mut Pipe, frame: u64, done: Result<(FrameReport, Values)>) {
    if pipe.complete(frame, done).is_err() {
        warn!(frame, "the frame pipeline refused a finished frame");
    }
}

/// The last check of an offloading decision against running alone: its cut
/// key, the conditions, the mode, and `Some((local ms, why))` if running
/// alone won.
type OffloadCheck = (String, Conditions, Mode, Option<(f64, String)>);

/// A paired inference session on the wearable.
pub struct Session {
    model: ModelFile,
    executor: Arc<SplitExecutor>,
    config: SessionConfig,
    /// Which cuts are built where, and a switch waiting for its plans.
    switch: switch::SwitchGate,
    /// Builds prefixes ahead (`None` when [`SessionConfig::prepare_ahead`] is off).
    builder: Option<switch::Builder>,
    /// The planner's runners-up for its last new decision, to build ahead.
    ahead: Vec<Cut>,
    planner: Planner,
    profiler: LinkProfiler,
    fed_link: LinkEstimate,
    /// This side's layer times, learning from every frame ([`OnlineLatency`]).
    wearable_latency: OnlineLatency,
    wearable_energy: ClusterEnergy,
    handheld_energy: ClusterEnergy,
    /// The handheld's, from its profile, learning from the times it reports.
    handheld_latency: Option<OnlineLatency>,
    /// Both sides' whole-model predictions (s) when the planner last had them.
    fed_totals: (f64, f64),
    handheld_device: Option<String>,
    /// The last check of an offloading decision against running alone:
    /// (its cut key, the conditions, the mode, `Some((local ms, why))` if running alone wins).
    offload_check: Option<OffloadCheck>,
    /// The first planned cut, kept when the config does not adapt.
    kept_cut: Option<(Cut, Option<f64>, Option<String>)>,
    /// Where the session stands with the handheld; ready iff `Ready`.
    status: Status,
    transport_name: String,
    /// The handheld's latest status, coalesced by the link task.
    status_slot: link_task::StatusSlot,
    /// Runs the link task (kept alive with the session; taken on drop).
    runtime: Option<tokio::runtime::Runtime>,
    commands: mpsc::UnboundedSender<Command>,
    events: cb::Receiver<Event>,
    origin: Instant,
    next_frame: u64,
    next_probe: u64,
    /// Deadlines missed since the last answer in time.
    missed_in_row: u32,
    /// Energy measured by the battery's fuel gauge, or why there is none.
    fuel: Result<(tandem_plan::fuel::FuelMeter, crate::battery::FuelGauge), String>,
    /// This machine's cpufreq for `dvfs` settings, or why they are emulated.
    cpufreq: Result<CpuFreq, String>,
    probes: BTreeMap<u64, (Instant, u64)>,
    fed: Values,
    fetched: Option<Outputs>,
    last: Option<FrameReport>,
    /// Link encodings: measured on the first frame that could be offloaded
    /// (`None` before, or when they are off), updated by what frames send.
    codecs: Option<LinkCodecs>,
    /// The encodings the planner last decided with.
    planned_codecs: Option<std::sync::Arc<LinkCodecs>>,
    codecs_tried: bool,
    /// The frame lossy encodings are measured on (with `Lossy` encodings).
    calibration: Option<codecs::Calibration>,
    /// (cut key, encodings) already measured against the accuracy budget.
    budget_checked: std::collections::HashMap<(String, Vec<Encoding>), bool>,
}

fn session_err(e: impl std::fmt::Display) -> Error {
    Error::Session(e.to_string())
}

impl Session {
    /// Opens a session for `model` over `transport`: measures the wearable's
    /// layer times, connects (in the background, with reconnection), and
    /// waits up to `ready_timeout` for the handheld to have the model ready,
    /// then primes the link estimate with a probe. If the handheld cannot be
    /// reached or refuses the model, `open` returns at the first such error
    /// and frames run on the wearable (see [`Session::status`]), unless
    /// [`SessionConfig::require_handheld`] is set: then `open` keeps trying
    /// until that timeout and fails with the reason.
    pub fn open(model: ModelFile, transport: Box<dyn Transport>, config: SessionConfig) -> Result<Session> {
        let executor = Arc::new(SplitExecutor::new(model.model.clone()));
        let builder = match config.prepare_ahead {
            true => Some(switch::Builder::start(executor.clone()).map_err(session_err)?),
            false => None,
        };
        let inputs = tandem_core::check::random_inputs(&model.model, 1)?;
        let host = ProfiledLatency::measure(&model.model, &inputs)?;
        let k = config.dilation.max(1.0);
        let wearable_latency = OnlineLatency::new(
            model.model.graph(),
            ProfiledLatency {
                per_node_s: host.per_node_s.iter().map(|s| s * k).collect(),
                overhead_s: host.overhead_s * k,
            },
        );
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
        let transport_name = transport.describe();
        let (commands, command_rx) = mpsc::unbounded_channel();
        let (event_tx, events) = cb::unbounded();
        let status_slot = link_task::StatusSlot::default();
        if config.placement != Placement::WearableOnly {
            runtime.spawn(manage_link(
                transport,
                model.clone(),
                config.wearable.name.clone(),
                link_task::LinkSettings {
                    chunk_bytes: config.chunk_bytes,
                    backoff: config.backoff,
                    silence: config.link_silence,
                    keepalive: config.keepalive,
                },
                command_rx,
                (event_tx, status_slot.clone()),
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
        let mut planner =
            Planner::new(PlannerConfig { margin: config.margin, method: config.method }, conditions);
        if config.dvfs {
            planner = planner.with_dvfs(config.wearable.clone());
        }
        let mut s = Session {
            model,
            executor,
            switch: Default::default(),
            builder,
            ahead: vec![],
            planner,
            profiler,
            fed_link: config.link_default,
            wearable_latency,
            wearable_energy,
            handheld_energy,
            handheld_latency: None,
            fed_totals: (0.0, 0.0),
            handheld_device: None,
            offload_check: None,
            kept_cut: None,
            status: Status::Connecting,
            transport_name,
            runtime: Some(runtime),
            status_slot,
            commands,
            events,
            origin: Instant::now(),
            next_frame: 1,
            next_probe: 1,
            missed_in_row: 0,
            fuel: Err(String::new()),
            cpufreq: Err(String::new()),
            probes: BTreeMap::new(),
            fed: Values::new(),
            fetched: None,
            last: None,
            codecs: None,
            planned_codecs: None,
            codecs_tried: false,
            calibration: None,
            budget_checked: Default::default(),
            config,
        };
        s.cpufreq = match (&s.config.cpufreq, s.config.dvfs) {
            (_, false) => Err("no setting is chosen without dvfs".into()),
            (None, true) => Err("no cpufreq folder configured".into()),
            // This host's clock is not the emulated watch's.
            (Some(_), true) if s.config.dilation > 1.0 => {
                Err(format!("the watch is emulated (dilation {}): so is its clock", s.config.dilation))
            }
            (Some(dir), true) => CpuFreq::open(dir, &s.config.wearable),
        };
        if let (Err(why), true) = (&s.cpufreq, s.config.dvfs) {
            info!("the wearable's cluster and frequency are emulated: {why}");
        }
        s.fuel = match &s.config.fuel_gauge {
            None => Err("no fuel gauge configured: energy is model-based only".into()),
            Some(dir) => crate::battery::FuelGauge::find(dir)
                .map(|gauge| (tandem_plan::fuel::FuelMeter::new(s.config.energy_window), gauge))
                .map_err(|e| format!("{e}; energy is model-based only")),
        };
        if s.config.placement == Placement::WearableOnly {
            s.status = Status::LocalOnly;
            return Ok(s);
        }
        let required = s.config.require_handheld;
        let until = Instant::now() + required.unwrap_or(s.config.ready_timeout);
        while !s.is_ready() && Instant::now() < until {
            match s.events.recv_timeout(until.saturating_duration_since(Instant::now())) {
                Ok(ev) => {
                    let lost = matches!(ev, Event::Disconnected(_));
                    s.on_event(ev, &mut Pipe::new(1, false));
                    // Not required: the first failure ends the wait (frames
                    // run here, saying why). Required: only a refusal does.
                    let refused = matches!(s.status, Status::Refused { .. });
                    if lost && (required.is_none() || refused) {
                        break;
                    }
                }
                Err(_) => break,
            }
        }
        if !s.is_ready() {
            if s.status == Status::Connecting {
                s.status = Status::Unreachable {
                    error: format!(
                        "no answer from {} within {:?}",
                        s.transport_name,
                        required.unwrap_or(s.config.ready_timeout)
                    ),
                };
            }
            if required.is_some() {
                return Err(Error::Session(format!("no handheld ready: {}", s.status)));
            }
            warn!("running on the wearable: {}", s.status);
            return Ok(s);
        }
        s.prime_link_estimate();
        Ok(s)
    }

    /// Measures the link before the first decision: an empty probe for the
    /// round trip, then one of about 50 ms of the default estimate for the
    /// upload rate (2 s at most in all), so that the planner does not
    /// decide on [`SessionConfig::link_default`].
    fn prime_link_estimate(&mut self) {
        let until = Instant::now() + Duration::from_secs(2);
        let mut pipe = Pipe::new(1, false);
        for bytes in [0, self.profiler.bandwidth_probe_bytes()] {
            let id = self.next_probe;
            self.next_probe += 1;
            self.probes.insert(id, (Instant::now(), bytes as u64));
            if self.commands.send(Command::Probe { id, bytes }).is_err() {
                return;
            }
            while self.probes.contains_key(&id) && Instant::now() < until {
                match self.events.recv_timeout(until.saturating_duration_since(Instant::now())) {
                    Ok(ev) => self.on_event(ev, &mut pipe),
                    Err(_) => break,
                }
            }
        }
        // An unanswered probe is dropped here rather than left to expire.
        self.probes.clear();
        debug!(link = ?self.profiler.estimate(), "link estimate primed");
    }

    /// A session that runs every frame on the wearable, with no handheld.
    pub fn open_local(model: ModelFile, mut config: SessionConfig) -> Result<Session> {
        config.placement = Placement::WearableOnly;
        Session::open(model, Box::new(crate::link::memory_transport().0), config)
    }

    /// Where the session stands with its handheld.
    pub fn status(&self) -> Status {
        self.status.clone()
    }

    /// Whether the handheld is ready to take suffixes.
    pub fn is_ready(&self) -> bool {
        matches!(self.status, Status::Ready { .. })
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

    /// Sets a float input from a slice and its shape (row-major).
    pub fn feed_f32(&mut self, name: &str, shape: &[usize], data: &[f32]) -> Result<()> {
        self.feed(name, crate::tensor::tensor_f32(shape, data)?)
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
    /// the planner says so) and returns its report; read the outputs with
    /// [`Session::fetch`], [`Session::fetch_f32`] or [`Session::outputs`].
    pub fn run(&mut self) -> Result<FrameReport> {
        let g = self.model.model.graph();
        if let Some(&missing) = g.inputs().iter().find(|&&t| !self.fed.contains_key(&g.tensor(t).name)) {
            return Err(Error::Session(format!("input '{}' was not fed", g.tensor(missing).name)));
        }
        let inputs = self.fed.clone();
        let mut results = vec![];
        self.drive(vec![inputs], Mode::Single, false, None, |r| results.push(r))?;
        let frame = results.pop().ok_or_else(|| Error::Session("the run delivered no frame".into()))??;
        self.fetched = Some(frame.outputs);
        self.last = Some(frame.report.clone());
        Ok(frame.report)
    }

    /// An output of the last [`Session::run`].
    pub fn fetch(&self, name: &str) -> Result<Tensor> {
        Ok(self.outputs()?.require(name)?.clone())
    }

    /// A float output of the last [`Session::run`]: its shape and values.
    pub fn fetch_f32(&self, name: &str) -> Result<(Vec<usize>, Vec<f32>)> {
        self.outputs()?.f32(name)
    }

    /// Every output of the last [`Session::run`], in the model's order.
    pub fn outputs(&self) -> Result<&Outputs> {
        self.fetched.as_ref().ok_or_else(|| {
            Error::Session("nothing has run yet: fetch reads the outputs of the last run()".into())
        })
    }

    /// The last run's report.
    pub fn last_report(&self) -> Option<&FrameReport> {
        self.last.as_ref()
    }

    /// Runs a stream of frames (see [`crate::tensor::frame`]); returns each
    /// frame's result in order. A frame that cannot run (a missing, unknown
    /// or mis-shaped input) gets its own error and the others go on; `Err`
    /// only when the session itself fails.
    pub fn stream(&mut self, frames: impl IntoIterator<Item = Values>) -> Result<Vec<Result<Frame>>> {
        let mut out = vec![];
        let pipeline = self.config.pipeline;
        self.drive(frames, Mode::Stream, pipeline, None, |r| out.push(r))?;
        Ok(out)
    }

    /// Runs a stream, handing each frame's result to `deliver` in order as
    /// it completes; frames are released at `fps` when given (latency counts
    /// from the release), else as fast as the pipeline takes them.
    pub fn stream_with(
        &mut self,
        frames: impl IntoIterator<Item = Values>,
        fps: Option<f64>,
        deliver: impl FnMut(Result<Frame>),
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
                // A new link: the last one's misses do not count against it.
                self.missed_in_row = 0;
                // A name from the peer: a shipped profile or none (never a path).
                if let Ok(p) = DeviceProfile::shipped(&device) {
                    if let Ok(e) = ClusterEnergy::new(&p, PowerModel::Analytical) {
                        self.handheld_energy = e;
                    }
                }
                let profile =
                    ProfiledLatency { per_node_s: latency.per_layer_s, overhead_s: latency.overhead_s };
                self.handheld_latency = Some(OnlineLatency::new(self.model.model.graph(), profile));
                self.status = Status::Ready { handheld: device.clone() };
                self.handheld_device = Some(device);
                self.offload_check = None;
                self.switch.reconnected();
                self.planner.handle_predictor_update();
            }
            Event::Status(first) => {
                // The latest status since this event was queued.
                let s = self.status_slot.lock().unwrap_or_else(|p| p.into_inner()).take().unwrap_or(first);
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
            Event::Delivered { frame, handheld_us, tensors, at } => {
                let lone = pipe.is_lone(frame);
                let Some(f) = pipe.answer(frame) else {
                    // Already handed back (a missed deadline): its local
                    // run, pending or done, is the one delivered.
                    debug!(frame, "late answer dropped");
                    return;
                };
                self.missed_in_row = 0;
                let handheld = Duration::from_micros(handheld_us);
                self.learn(f.cut.prefix_mask(), f.prefix, Some(handheld));
                let down_bytes = tensors.body_len() as u64;
                let decoding = Instant::now();
                let outputs =
                    match crate::encoding::received(&tensors).map_err(|e| e.to_string()).and_then(|t| {
                        check_answer(self.model.model.graph(), &f.cut, &t)?;
                        Ok(t)
                    }) {
                        Ok(t) => t,
                        Err(e) => {
                            let _ =
                                pipe.return_local(frame, f, &format!("the handheld's answer was bad: {e}"));
                            return;
                        }
                    };
                // Decoding an encoded answer is the watch's work.
                if tensors.metas().iter().any(|m| m.encoding != Encoding::Raw) {
                    dilate(decoding.elapsed(), self.config.dilation);
                    self.observe_answer_ratios(tensors.metas());
                }
                let round = at.saturating_duration_since(f.sent_at);
                if lone {
                    let now = self.now();
                    self.profiler.on_round_trip(f.up_bytes, down_bytes, round, handheld, now);
                }
                self.switch.answered(&f.cut);
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
                let report = FrameReport {
                    up_raw_bytes: f.up_raw_bytes,
                    switch_wait_ms: f.switch_wait_ms,
                    plan_build_ms: f.plan_build_ms,
                    dvfs: f.dvfs,
                    ..report
                };
                complete(pipe, frame, Ok((report, values)));
            }
            Event::RunLocally { frames, reason } => {
                for frame in frames {
                    pipe.hand_back(frame, &reason);
                }
            }
            Event::Prepared { cut, error } => self.switch.handheld_prepared(cut, error),
            Event::Disconnected(closed) => {
                self.missed_in_row = 0;
                // A refusal is the status until something else happens.
                match closed.peer_reason().filter(|_| closed.is_refusal()) {
                    Some(reason) => {
                        warn!("the handheld refused the model: {reason}");
                        self.status = Status::Refused { reason: reason.to_string() };
                    }
                    None => {
                        let reason = link_task::describe(&closed);
                        if self.is_ready() {
                            warn!("lost the handheld: {reason}");
                        }
                        self.status = Status::Unreachable { error: reason };
                    }
                }
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
        let t_up = secs(up_bytes as f64 / est.up_bytes_per_s);
        let t_down = secs(down_bytes as f64 / est.down_bytes_per_s);
        let setting = self.setting_for(cut);
        let at_setting = setting.as_ref().and_then(|s| {
            ClusterEnergy::at(&self.config.wearable, &s.cluster, s.f_hz, PowerModel::Analytical).ok()
        });
        let (w, h) = (at_setting.as_ref().unwrap_or(&self.wearable_energy), &self.handheld_energy);
        FrameReport {
            frame,
            offloaded,
            local_reason: if offloaded { None } else { fallback.clone() },
            fallback,
            cut: cut.key(),
            prefix_layers: cut.prefix_len(),
            layers: self.model.model.graph().nodes().len(),
            wearable_ms: wearable.as_secs_f64() * 1e3,
            link_ms: link.as_secs_f64() * 1e3,
            handheld_ms: handheld.as_secs_f64() * 1e3,
            latency_ms: latency.as_secs_f64() * 1e3,
            up_bytes,
            up_raw_bytes: up_bytes,
            down_bytes,
            predicted_ms,
            wearable_j: w.compute_energy_j(wearable) + w.transmit_energy_j(t_up) + w.receive_energy_j(t_down),
            handheld_j: h.compute_energy_j(handheld) + h.receive_energy_j(t_up) + h.transmit_energy_j(t_down),
            switch_wait_ms: None,
            plan_build_ms: 0.0,
            // Set by the caller: how the prefix ran ([`Session::run_prefix_at_setting`]).
            dvfs: None,
        }
    }

    /// The wearable's setting for a frame at `cut`: the planner's, when it
    /// decided this cut with one (`SessionConfig::dvfs`).
    fn setting_for(&self, cut: &Cut) -> Option<tandem_plan::partition::dvfs::Setting> {
        let d = self.planner.current()?;
        (d.chosen.key() == cut.key()).then(|| d.setting.clone()).flatten()
    }

    /// Runs `cut`'s prefix (by `plan`) at the planner's setting for it,
    /// if any: for real where cpufreq could be opened (the policy held,
    /// this thread pinned to the cluster's CPUs for the run), else dilated
    /// by the setting's busy-time scale. Returns its values, the time it
    /// took, that time at the inference setting (what the predictors
    /// hold), and the frame report's `dvfs` line.
    fn run_prefix_at_setting(
        &mut self,
        plan: &SplitPlan,
        cut: &Cut,
        inputs: &Values,
    ) -> Result<(Values, Duration, Duration, Option<String>)> {
        let watch = self.config.dilation;
        let setting = self.setting_for(cut);
        // Pinned for real (the policy held), or dilated; the report's line.
        let (pinned, dilation, line) = match &setting {
            None => {
                // No setting for this cut (one kept while the planner's is
                // prepared): a policy held for another runs free again.
                if let Ok(c) = &mut self.cpufreq {
                    c.give_back();
                }
                (None, watch, None)
            }
            Some(s) => {
                let name = format!("{}@{:.0} MHz", s.cluster, s.f_hz / 1e6);
                let applied = match &mut self.cpufreq {
                    Ok(c) => c.hold(&s.cluster, s.f_hz).and_then(|a| Ok((CpuFreq::pin(&a)?, a))).inspect_err(
                        |_| {
                            // Emulated instead: the policy must not slow it too.
                            c.give_back()
                        },
                    ),
                    Err(why) => Err(why.clone()),
                };
                match applied {
                    Ok((pinned, a)) => (Some(pinned), watch, Some(format!("{name}, applied: {a}"))),
                    Err(why) => (None, watch * s.time_scale, Some(format!("{name}, emulated ({why})"))),
                }
            }
        };
        let started = Instant::now();
        let values = plan.run_prefix_dilated(self.model.model.graph(), inputs, dilation)?;
        let took = started.elapsed();
        let (at_default, line) = match (pinned, &setting) {
            // The hardware's own scale is not known apart from the
            // profile's: the predictors learn against the profile's.
            (Some(pinned), Some(s)) => {
                let line = line.map(|l| format!("{l} (ran on cpu {})", pinned.cpu()));
                (took.div_f64(s.time_scale), line)
            }
            _ => (took.div_f64(effective_scale(dilation, watch)), line),
        };
        Ok((values, took, at_default, line))
    }

    /// Runs one frame entirely on the wearable; also returns how long it
    /// took and the report's `dvfs` line.
    fn run_local(&mut self, inputs: &Values) -> Result<(Values, Duration, Option<String>)> {
        let local = Cut::wearable_only(self.model.model.graph());
        let plan = self.executor.plan(&local)?;
        let (all, took, at_default, dvfs) = self.run_prefix_at_setting(&plan, &local, inputs)?;
        let g = self.model.model.graph();
        let outputs = tandem_core::split::model_outputs(g, &all)?;
        self.learn(&vec![true; g.nodes().len()], at_default, None);
        Ok((outputs, took, dvfs))
    }

    /// Feeds a measured inference back into the predictors: the layers in
    /// `prefix` ran here in `wearable`; the others, if `handheld` is given,
    /// on the handheld in that (as it reported). When either side's
    /// whole-model prediction has moved past the planner's margin since it
    /// last decided, the planner re-decides.
    fn learn(&mut self, prefix: &[bool], wearable: Duration, handheld: Option<Duration>) {
        self.wearable_latency.observe(prefix, wearable.as_secs_f64());
        if let (Some(h), Some(online)) = (handheld, &mut self.handheld_latency) {
            // Its profile is of an idle handheld: the load it reported is priced apart.
            let idle_s = h.as_secs_f64() / self.profiler.handheld_status().dilation();
            let suffix: Vec<bool> = prefix.iter().map(|&p| !p).collect();
            online.observe(&suffix, idle_s);
        }
        let all = vec![true; prefix.len()];
        let now = (
            self.wearable_latency.predict_s(&all),
            self.handheld_latency.as_ref().map_or(0.0, |h| h.predict_s(&all)),
        );
        let moved = |a: f64, b: f64| (a - b).abs() > self.config.margin * b.max(1e-9);
        if moved(now.0, self.fed_totals.0) || moved(now.1, self.fed_totals.1) {
            debug!(wearable_s = now.0, handheld_s = now.1, "the predictions moved: re-deciding");
            self.fed_totals = now;
            self.offload_check = None;
            self.planner.handle_predictor_update();
        }
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
        self.ensure_codecs(&inputs);
        let (decided, predicted_ms, local_reason) = self.next_cut(mode);
        let (cut, predicted_ms, local_reason, waited) = self.gate(decided, predicted_ms, local_reason);
        let encodings = if cut.is_wearable_only() { vec![] } else { self.encodings_for(&cut) };
        if cut.is_wearable_only() {
            let (outputs, took, dvfs) = self.run_local(&inputs)?;
            let mut report = self.report(
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
            report.local_reason =
                Some(local_reason.unwrap_or_else(|| "the cut runs every layer here".into()));
            report.switch_wait_ms = waited.map(|w| w.as_secs_f64() * 1e3);
            report.dvfs = dvfs;
            return pipe
                .start_done(frame, Ok((report, outputs)))
                .map_err(|_| Error::Session(format!("frame {frame} was already started")));
        }
        let building = Instant::now();
        let inline = !self.executor.is_cached_sides(&cut, Sides::Prefix);
        let plan = self.executor.plan_sides(&cut, Sides::Prefix)?;
        let built = if inline { building.elapsed() } else { Duration::ZERO };
        let t0 = Instant::now();
        let (up, _, prefix, dvfs) = self.run_prefix_at_setting(&plan, &cut, &inputs)?;
        let g = self.model.model.graph();
        // Packing (encoding) the crossing tensors is the watch's work too.
        let mut packed = vec![];
        let mut raw_bytes = 0u64;
        let encoding_started = Instant::now();
        for (&t, &encoding) in cut.up_tensors().iter().zip(&encodings) {
            let name = &g.tensor(t).name;
            let v = up.get(name).ok_or_else(|| Error::MissingTensor(name.clone()))?;
            raw_bytes += v.as_bytes().len() as u64;
            let wire = tandem_core::wire::to_wire(v)?;
            let p =
                tandem_proto::protocol::pack_tensor(name, &wire, encoding, self.config.widenings.get(name))
                    .map_err(|e| Error::Link(format!("packing '{name}': {e}")))?;
            packed.push(p);
        }
        dilate(encoding_started.elapsed(), self.config.dilation);
        let wearable = t0.elapsed();
        let mut local_outputs = Values::new();
        for &t in g.outputs() {
            let name = &g.tensor(t).name;
            if !cut.down_tensors().contains(&t) {
                if let Some(v) = up.get(name) {
                    local_outputs.insert(name.clone(), v.clone());
                }
            }
        }
        let up_bytes = packed.iter().map(|p| p.bytes.len() as u64).sum();
        debug!(frame, raw_bytes, up_bytes, "crossing tensors packed");
        let remote_s = predicted_ms.map_or(0.0, |p| p / 1e3 - wearable.as_secs_f64()).max(0.0);
        let sent_at = Instant::now();
        let budget = secs(remote_s * self.config.deadline_factor).max(self.config.deadline_floor);
        let key = cut.key();
        debug!(
            frame,
            prefix = cut.prefix_len(),
            predicted_ms = ?predicted_ms,
            deadline_s = budget.as_secs_f64(),
            link = ?self.profiler.estimate(),
            "offloading"
        );
        self.observe_ratios(&cut, &encodings, &packed);
        let answer = self.answer_encodings(&cut);
        let in_flight = Box::new(InFlight {
            inputs,
            local_outputs,
            cut,
            started,
            sent_at,
            wearable,
            prefix,
            up_bytes,
            up_raw_bytes: raw_bytes,
            predicted_ms,
            switch_wait_ms: waited.map(|w| w.as_secs_f64() * 1e3),
            plan_build_ms: built.as_secs_f64() * 1e3,
            dvfs,
        });
        pipe.start_offloaded(frame, in_flight, self.now().checked_add(budget).unwrap_or(Duration::MAX))
            .map_err(|_| Error::Session(format!("frame {frame} was already started")))?;
        if self.commands.send(Command::Offload { frame, cut: key, packed, answer }).is_err() {
            return Err(Error::Session("the link task stopped".into()));
        }
        Ok(())
    }

    /// Checks one frame's inputs against the model: every input there, no
    /// other name, each of the right type and shape.
    fn check_frame(&self, inputs: &Values) -> Result<()> {
        let g = self.model.model.graph();
        let known: Vec<String> = g.inputs().iter().map(|&t| g.tensor(t).name.clone()).collect();
        let mut names: Vec<&String> = inputs.keys().collect();
        names.sort();
        if let Some(unknown) = names.iter().find(|n| !known.contains(n)) {
            return Err(Error::UnknownInput { name: unknown.to_string(), known });
        }
        for &t in g.inputs() {
            let name = &g.tensor(t).name;
            let v = inputs.get(name).ok_or_else(|| Error::Session(format!("input '{name}' is missing")))?;
            tandem_core::split::check_tensor(g, t, v)?;
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
        mut deliver: impl FnMut(Result<Frame>),
    ) -> Result<()> {
        let mut frames = frames.into_iter().peekable();
        let mut pipe = Pipe::new(self.config.max_in_flight, pipeline);
        self.sample_fuel(false);
        let first_release = Instant::now();
        let mut released = 0u64;
        loop {
            while let Ok(ev) = self.events.try_recv() {
                self.on_event(ev, &mut pipe);
            }
            // Late answers: run those frames here.
            let missed = pipe.tick(self.now());
            if !missed.is_empty() {
                self.missed_deadlines(missed);
            }
            while let Some((_, result)) = pipe.pop_deliverable() {
                let g = self.model.model.graph();
                deliver(result.and_then(|(report, values)| {
                    Ok(Frame { report, outputs: Outputs::in_model_order(g, values)? })
                }));
                self.sample_fuel(true);
            }
            // Work: frames handed back first (oldest first), then a new frame.
            if let Some((f, back, reason)) = pipe.next_local() {
                let done = self.run_local(&back.inputs).map(|(outputs, took, dvfs)| {
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
                    (FrameReport { plan_build_ms: back.plan_build_ms, dvfs, ..report }, outputs)
                });
                complete(&mut pipe, f, done);
                continue;
            }
            // A stale link estimate is probed whenever nothing is in flight,
            // also while frames run here back to back (the link task sends
            // it; this thread does not wait): so that a link that recovers
            // is seen even when no frame crosses it.
            self.maybe_probe(pipe.in_flight() == 0);
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
                let started = self
                    .check_frame(&inputs)
                    .map_err(|e| Error::Session(format!("frame {frame}: {e}")))
                    .and_then(|()| self.start_frame(&mut pipe, frame, inputs, started, mode));
                if let Err(e) = started {
                    // A frame that failed before entering the pipeline gets
                    // its error in its place; one already in it means the
                    // session itself failed.
                    if let Err(Err(e)) = pipe.start_done(frame, Err(e)) {
                        return Err(e);
                    }
                }
                continue;
            }
            if pipe.is_empty() && frames.peek().is_none() {
                return Ok(());
            }
            let until = Instant::now() + Duration::from_millis(50);
            let deadline = pipe.next_deadline().map(|d| self.origin + d);
            self.wait(&mut pipe, deadline.map_or(until, |d| d.min(until)));
        }
    }

    /// Reads the fuel gauge into the meter (after a delivered frame when
    /// `frame_done`); a gauge that cannot be read now is skipped.
    /// Without `frame_done`, a new window starts here (a stream begins:
    /// idle time before it is not counted).
    fn sample_fuel(&mut self, frame_done: bool) {
        let now = self.origin.elapsed();
        let Ok((meter, gauge)) = &mut self.fuel else { return };
        if gauge.charging() {
            meter.interrupt();
            return;
        }
        match gauge.read() {
            Ok(reading) if frame_done => meter.sample(now, reading, true),
            Ok(reading) => meter.begin(now, reading),
            Err(_) => {}
        }
    }

    /// The energy the battery's fuel gauge measured over the windows of
    /// frames closed so far (the whole device's, measured), or why there is
    /// none (then energy is model-based only).
    pub fn measured_energy(&self) -> Result<&tandem_plan::fuel::Measured, &str> {
        self.fuel.as_ref().map(|(m, _)| m.measured()).map_err(|e| e.as_str())
    }

    /// Frames past their deadline run here: the handheld is told not to
    /// run them, and enough misses in a row drop the link as stalled.
    fn missed_deadlines(&mut self, frames: Vec<u64>) {
        for f in &frames {
            warn!(frame = f, "the handheld missed the deadline; running the frame here");
        }
        // One handheld pause can make several pipelined frames late at
        // once: it counts as one miss.
        self.missed_in_row = self.missed_in_row.saturating_add(1);
        let _ = self.commands.send(Command::Cancel(frames));
        let limit = self.config.max_missed_deadlines.max(1);
        if self.missed_in_row >= limit {
            let reason = format!(
                "the handheld missed {} deadlines in a row (a stall): the link is taken as lost",
                self.missed_in_row
            );
            warn!("{reason}");
            self.missed_in_row = 0;
            let _ = self.commands.send(Command::Reset(reason));
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
        if !self.is_ready() || !self.probes.is_empty() {
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

/// How much slower a run dilated by `dilation` is than one dilated by
/// `default`: dilation never speeds a run up, so factors below 1 count as 1.
fn effective_scale(dilation: f64, default: f64) -> f64 {
    dilation.max(1.0) / default.max(1.0)
}

/// Sleeps `(factor − 1) × took`: work that took `took` here, on a device
/// `factor` times slower (the emulated watch).
fn dilate(took: Duration, factor: f64) {
    if factor > 1.0 {
        std::thread::sleep(took.mul_f64(factor - 1.0));
    }
}

/// Seconds as a Duration, saturating: NaN and negatives are zero, and
/// anything too large is the longest Duration (never a panic).
fn secs(s: f64) -> Duration {
    Duration::try_from_secs_f64(s.max(0.0)).unwrap_or(Duration::MAX)
}

/// Checks a handheld's answer: exactly the tensors that cross back at
/// `cut`, each of the model's type and shape (a peer's numbers are checked
/// even after pairing).
fn check_answer(
    g: &crate::LayerGraph,
    cut: &Cut,
    answer: &[(String, crate::Tensor)],
) -> std::result::Result<(), String> {
    let want = cut.down_tensors();
    if answer.len() != want.len() {
        return Err(format!("{} tensors where {} cross back at this cut", answer.len(), want.len()));
    }
    let mut seen = std::collections::HashSet::new();
    for (name, t) in answer {
        if !seen.insert(name.as_str()) {
            return Err(format!("'{name}' twice in one answer"));
        }
        let Some(info) = g.tensor_id(name).filter(|id| want.contains(id)).map(|id| g.tensor(id)) else {
            return Err(format!("a tensor '{name}' that does not cross back at this cut"));
        };
        if t.datum_type() != info.dtype || (!info.shape.is_empty() && t.shape() != info.shape.as_slice()) {
            return Err(format!(
                "'{name}' is {:?} {:?}, the model's is {:?} {:?}",
                t.datum_type(),
                t.shape(),
                info.dtype,
                info.shape
            ));
        }
    }
    Ok(())
}
