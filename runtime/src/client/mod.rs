//! The wearable's app API: a TensorFlow-like [`Session`] (feed, run, fetch,
//! plus a latency hint) that splits each inference with the paired
//! handheld, pipelines streams, and falls back to running alone.
//!
//! **Threads.** The app's thread is the wearable's CPU: it runs prefixes
//! and local inferences. In a pipelined stream they run on the prefix
//! runner's thread instead (`prefix_runner.rs`), one at a time and in
//! order, while the app thread plans, sends, checks answers and learns;
//! what still runs on the app thread (a run pinned to a cpufreq cluster,
//! a direct edge frame's fallback) waits for the runner to drain first, so
//! the watch computes one thing at a time either way. A tokio task owns the link: it connects (and
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
//! **Re-partitioning** happens between frames: the planner is polled
//! before each frame starts, with the profiler's estimates; frames already
//! in flight keep their cut (each message names its cut).
//!
//! **Parts**, each with one job and its own tests: the planning driver
//! (`driver.rs`: predictions, planner and its rules: which cut next), the
//! switch gate (`switch.rs`: a new cut once its plans are built), the link
//! encodings (`planning.rs`, `codecs.rs`), the frame accounting
//! (`accounting.rs`: a frame's report built in one place), the link handle
//! (`link_handle.rs`: the link task, its commands, events and probes).
//! This file runs frames through them.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::{debug, info, warn};

use tandem_core::device_clock::DeviceClock;

use crate::cpufreq::CpuFreq;
use crate::link::Transport;
use crate::{Cut, Error, Model, ModelError, Result, Sides, SplitExecutor, Tensor, Values};
use tandem_plan::partition::{Decision, HandheldStatus, LatencyHint, LinkEstimate, Mode};
use tandem_plan::predict::{EngineProfile, OnlineLatency, ProfiledLatency, Spacing};
use tandem_proto::encoding::Encoding;
use tandem_proto::pipeline::FramePipeline;
use tandem_proto::profiler::LinkProfiler;

mod accounting;
pub mod codecs;
mod config;
mod direct;
mod driver;
mod edge;
mod encodings;
mod link_handle;
pub(crate) mod link_task;
mod prefix_runner;
mod report;
mod status;
mod switch;
mod unavailable;

use accounting::{Account, Ran, Stages};
use driver::{Driver, Next};
use link_handle::LinkHandle;
use prefix_runner::{Packing, Prefix, PrefixRunner};

pub use config::{
    Accuracy, Backoff, ConfigParseError, EdgeConfig, EnergyWeighing, ModelFile, Placement, SessionConfig,
    Strategy,
};
pub use edge::EdgeStatus;
pub use link_handle::LinkStopped;
use link_task::Event;
pub use report::{EdgeLeg, FrameReport, StreamReport, Tiers};
pub use status::{Frame, Status};
/// The wearable's own link to the edge, emulated ([`EdgeConfig::direct`]).
pub use tandem_oip::EmulatedLink;
pub use unavailable::Unavailable;

use crate::tensor::Outputs;

/// What the wearable keeps of an offloaded frame until it is answered (or
/// handed back and run here).
struct InFlight {
    inputs: Values,
    local_outputs: Values,
    cut: Cut,
    started: Instant,
    sent_at: Instant,
    /// The prefix's compute alone (no packing): what its prediction is of.
    prefix: Duration,
    /// The report so far: the wearable's stage, bytes up, prediction.
    account: Account,
    /// Relayed: S2, the cut whose suffix the edge runs.
    near: Option<Cut>,
}

/// A frame whose prefix runs (or ran) to be offloaded: what its offload
/// needs besides the prefix's results, decided before it ran.
struct Offload {
    frame: u64,
    cut: Cut,
    inputs: Values,
    started: Instant,
    predicted_ms: Option<f64>,
    /// How far apart pipelined answers follow each other (ms), when known.
    service_ms: Option<f64>,
    engines: crate::engine::Engines,
    /// Relayed: S2, the cut whose suffix the edge runs.
    near: Option<Cut>,
    encodings: Vec<Encoding>,
    /// How long it waited for a switch, how long its plan took to build
    /// inline, and the report's `dvfs` line.
    waited_ms: Option<f64>,
    built: Duration,
    dvfs: Option<String>,
}

/// A frame run whole on the watch: its report so far (its stages are
/// filled in when it has run) and the cut that report prices.
struct Whole {
    frame: u64,
    account: Account,
    cut: Cut,
    started: Instant,
    /// The layers' engines (what the run is learnt into).
    engines: crate::engine::Engines,
    /// How the frame is in the pipeline.
    how: WholeFrame,
}

/// How a frame run whole is in the pipeline.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum WholeFrame {
    /// Not yet: it starts done.
    New,
    /// Started as running (on the runner).
    Running,
    /// Handed back (taken out by `next_local`): it completes.
    FellBack,
}

/// A frame at the prefix runner: one to offload, or one run whole.
enum AtRunner {
    Offload(Box<Offload>),
    Whole(Box<Whole>),
}

/// How a prefix runs ([`Session::prefix_setting`]).
struct PrefixSetting {
    /// This thread pinned to the setting's cluster (its policy held), or
    /// `None`: the setting, if any, is emulated by `dilation`.
    pinned: Option<crate::cpufreq::Pinned>,
    dilation: f64,
    /// The run's time over the time at the inference setting.
    scale: f64,
    /// The report's `dvfs` line.
    line: Option<String>,
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

/// What `executor` keys a prefix plan on `prefix` by: that engine for the
/// prefix, the executor's own suffix engine (a prefix plan has no suffix).
fn prefix_key(executor: &SplitExecutor, prefix: crate::engine::Engine) -> crate::engine::Engines {
    crate::engine::Engines { prefix, ..executor.engines() }
}

/// A profile's battery capacity, in mAh, when it gives one (positive and finite).
fn battery_mah(profile: &tandem_plan::device::DeviceProfile) -> Option<f64> {
    profile.battery.as_ref()?.capacity_mah.filter(|c| c.is_finite() && *c > 0.0)
}

/// What prices a cut now: the link estimate, the handheld's status, the
/// link encodings (of the session's parts, borrowed apart from the driver).
fn now_of<'a>(profiler: &LinkProfiler, encodings: &'a encodings::LinkEncodings) -> driver::Now<'a> {
    driver::Now {
        link: profiler.estimate(),
        status: profiler.handheld_status(),
        codecs: encodings.measured(),
    }
}

/// A paired inference session on the wearable.
pub struct Session {
    model: ModelFile,
    executor: Arc<SplitExecutor>,
    config: SessionConfig,
    /// Predictions, the planner and its rules: the cut for each frame.
    driver: Driver,
    /// Which cuts are built where, and a switch waiting for its plans.
    switch: switch::SwitchGate,
    /// Builds prefixes ahead (`None` when [`SessionConfig::prepare_ahead`] is off).
    builder: Option<switch::Builder>,
    /// The engines whose plan of every layer here the builder has yet to
    /// build: asked for at the first decision to offload, so that a frame
    /// falling back to the watch, or a later move to it, finds it built.
    /// Not at open: with the plan built then, the frames run whole on the
    /// emulated watch were 4-8% slower than with the plan the first frame
    /// built (openWakeWord's embedding model and the face detector, by
    /// hand: see docs/results.md); why is not established.
    whole_ahead: Vec<crate::engine::Engine>,
    profiler: LinkProfiler,
    /// The link task, its channels and the probes in flight.
    link: LinkHandle,
    /// Where the session stands with the handheld; ready iff `Ready`.
    status: Status,
    handheld_device: Option<String>,
    /// The engine the handheld said its suffixes run on.
    handheld_engine: crate::engine::Engine,
    origin: Instant,
    next_frame: u64,
    /// Energy measured by the battery's fuel gauge, or why there is none.
    fuel: std::result::Result<(tandem_plan::fuel::FuelMeter, crate::battery::FuelGauge), Unavailable>,
    /// This machine's cpufreq for `dvfs` settings, or why they are emulated.
    cpufreq: std::result::Result<CpuFreq, Unavailable>,
    fed: Values,
    fetched: Option<Outputs>,
    last: Option<FrameReport>,
    /// The link encodings: measured, chosen per cut, kept to the budget.
    encodings: encodings::LinkEncodings,
    /// The edge tier, when one is configured.
    edge: Option<edge::EdgeState>,
    /// The wearable's own client of the edge: every frame's under
    /// [`Placement::EdgeOnly`] (cloud-only), else the frames the planner
    /// sends there (when [`EdgeConfig::direct`] gives the watch such a link).
    direct: Option<direct::Direct>,
    /// What packing crossing tensors needs (the watch's dilation, the widenings).
    packing: Packing,
    /// Runs pipelined frames' prefixes (started with the first).
    runner: Option<PrefixRunner>,
    /// Frames at the runner, oldest first.
    at_runner: std::collections::VecDeque<AtRunner>,
    /// Whether the stream now running hands prefixes to the runner.
    use_runner: bool,
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
        // Refused before anything starts: weighing energy by battery
        // capacity needs one in each profile.
        let capacities = match config.energy_weights {
            EnergyWeighing::Capacity => {
                let capacity = |p: &tandem_plan::device::DeviceProfile| {
                    battery_mah(p).ok_or_else(|| Error::NoBatteryCapacity(p.name.clone()))
                };
                Some((capacity(&config.wearable)?, capacity(&config.handheld_fallback)?))
            }
            EnergyWeighing::Levels => None,
        };
        let inputs = tandem_core::check::random_inputs(&model.model, 1)?;
        // Every engine `auto` allows is profiled: the planner chooses each
        // cut's prefix engine from them (the fastest whole model's is the
        // default). Frames one at a time meet this side after each one's
        // remote part, idle: each profile is then scaled to a served
        // frame's time, so that the first decisions do not take this side
        // for faster than its frames will find it. A pipelined stream that
        // runs here keeps this side busy, frame after frame: its
        // back-to-back profile stands. (The handheld scales its own profile
        // at load, not knowing how it will be streamed to.)
        let spacing = (!config.pipeline).then_some(Spacing::SERVED);
        let (chosen, others) =
            ProfiledLatency::measure_all(&model.model, config.engine, &inputs, (2, 7), spacing)?;
        let EngineProfile { engine, latency: host, served_scale } = chosen;
        if spacing.is_some() {
            info!(%engine, served = format!("{served_scale:.2}x back-to-back runs"), "frames one at a time: the wearable's profile scaled to a served frame");
        }
        info!(%engine, choice = %config.engine, "the wearable's layers run on this engine unless the planner says");
        let engines = crate::engine::Engines { prefix: engine, suffix: crate::engine::Engine::Tract };
        let executor = Arc::new(SplitExecutor::new(model.model.clone()).with_engines(engines));
        let builder = match config.prepare_ahead {
            true => Some(
                switch::Builder::start(executor.clone())
                    .map_err(|source| Error::Start { what: "the plan builder", source })?,
            ),
            false => None,
        };
        let k = tandem_core::device_clock::factor_of(config.dilation);
        let online = |p: &ProfiledLatency| {
            let dilated = ProfiledLatency {
                per_node_s: p.per_node_s.iter().map(|s| s * k).collect(),
                overhead_s: p.overhead_s * k,
            };
            OnlineLatency::new(model.model.graph(), dilated)
        };
        let profiled: Vec<_> = std::iter::once(engine).chain(others.iter().map(|o| o.engine)).collect();
        let others = others.iter().map(|o| (o.engine, online(&o.latency))).collect();
        let driver = Driver::new(&config, ((engine, online(&host)), others))?;
        let settings = link_task::LinkSettings {
            chunk_bytes: config.chunk_bytes,
            backoff: config.backoff,
            silence: config.link_silence,
            keepalive: config.keepalive,
            edge: config.edge.clone().map(|e| edge::EdgeState::new(e, model.model.graph()).ask()),
        };
        let alone = matches!(config.placement, Placement::WearableOnly | Placement::EdgeOnly);
        // The plan of every layer here, on each engine profiled here (the
        // one chosen first): built by the first frame run whole, as
        // wearable-only's is, unless a frame offloads first (see
        // `Session::gate`); with an edge, whose frames are relayed, at once.
        let mut whole_ahead = match (&builder, alone) {
            (Some(_), false) => profiled,
            _ => vec![],
        };
        if let Some(b) = builder.as_ref().filter(|_| config.edge.is_some()) {
            for e in whole_ahead.drain(..) {
                b.build_whole(Cut::wearable_only(model.model.graph()), prefix_key(&executor, e));
            }
        }
        let direct = match (&config.placement, &config.edge) {
            (Placement::EdgeOnly, Some(e)) => Some(direct::Direct::open(e, &model.model)?),
            (Placement::EdgeOnly, None) => return Err(Error::NoEdge),
            // The planner's own choice: an Open Inference Protocol edge
            // the watch has a link to.
            (Placement::Auto, Some(e)) if e.direct.is_some() && e.url.starts_with("http://") => {
                match direct::Direct::open(e, &model.model) {
                    Ok(d) => Some(d),
                    Err(why) => {
                        warn!(url = %e.url, "the watch's own link to the edge is not used: {why}");
                        None
                    }
                }
            }
            _ => None,
        };
        let connect = !alone;
        let device = config.wearable.name.clone();
        let link = LinkHandle::open(transport, model.clone(), device, settings, connect)
            .map_err(|source| Error::Start { what: "the link task", source })?;
        let mut profiler = LinkProfiler::new(config.link_default, Duration::from_secs(2));
        let battery = config.battery.map(|b| (b, false)).or_else(|| {
            crate::battery::battery_status(Path::new("/"))
                .and_then(|b| b.capacity_pct.map(|c| (c / 100.0, b.status.as_deref() == Some("Charging"))))
        });
        if let Some((level, charging)) = battery {
            profiler.on_wearable_battery(level, charging);
        }
        if let Some((w, h)) = capacities {
            profiler.weigh_by_capacity(w, h);
        }
        let edge = config.edge.clone().map(|e| edge::EdgeState::new(e, model.model.graph()));
        let mut s = Session {
            model,
            executor,
            driver,
            switch: Default::default(),
            builder,
            whole_ahead,
            profiler,
            link,
            status: Status::Connecting,
            handheld_device: None,
            handheld_engine: crate::engine::Engine::Tract,
            origin: Instant::now(),
            next_frame: 1,
            fuel: Err(Unavailable::NoFuelGauge),
            cpufreq: Err(Unavailable::NoDvfs),
            fed: Values::new(),
            fetched: None,
            last: None,
            encodings: Default::default(),
            edge,
            direct,
            packing: Packing { dilation: config.dilation, widenings: Arc::new(config.widenings.clone()) },
            runner: None,
            at_runner: Default::default(),
            use_runner: false,
            config,
        };
        s.cpufreq = match (&s.config.cpufreq, s.config.dvfs) {
            (_, false) => Err(Unavailable::NoDvfs),
            (None, true) => Err(Unavailable::NoCpuFreqDir),
            // This host's clock is not the emulated watch's.
            (Some(_), true) if s.config.dilation > 1.0 => {
                Err(Unavailable::EmulatedWatch { dilation: s.config.dilation })
            }
            (Some(dir), true) => CpuFreq::open(dir, &s.config.wearable).map_err(Unavailable::CpuFreq),
        };
        if let (Err(why), true) = (&s.cpufreq, s.config.dvfs) {
            info!("the wearable's cluster and frequency are emulated: {why}");
        }
        s.fuel = match &s.config.fuel_gauge {
            None => Err(Unavailable::NoFuelGauge),
            Some(dir) => crate::battery::FuelGauge::find(dir)
                .map(|gauge| (tandem_plan::fuel::FuelMeter::new(s.config.energy_window), gauge))
                .map_err(Unavailable::Gauge),
        };
        if alone {
            s.status = Status::LocalOnly;
            return Ok(s);
        }
        let required = s.config.require_handheld;
        let until = Instant::now() + required.unwrap_or(s.config.ready_timeout);
        while !s.is_ready() && Instant::now() < until {
            let Some(ev) = s.link.event_until(until) else { break };
            let lost = matches!(ev, Event::Disconnected(_));
            s.on_event(ev, &mut Pipe::new(1, false));
            // Not required: the first failure ends the wait (frames run
            // here, saying why). Required: only a refusal does.
            let refused = matches!(s.status, Status::Refused { .. });
            if lost && (required.is_none() || refused) {
                break;
            }
        }
        if !s.is_ready() {
            if s.status == Status::Connecting {
                s.status = Status::Unreachable {
                    error: format!(
                        "no answer from {} within {:?}",
                        s.link.name(),
                        required.unwrap_or(s.config.ready_timeout)
                    ),
                };
            }
            if required.is_some() {
                return Err(Error::NoHandheld(s.status.to_string()));
            }
            warn!("running on the wearable: {}", s.status);
            return Ok(s);
        }
        // The edge's answer comes right after ready: waited for, so that
        // the first frames can use it.
        let edge_until =
            Instant::now() + Duration::from_secs(30).min(s.config.ready_timeout.max(Duration::from_secs(5)));
        while s.edge.as_ref().is_some_and(|e| !e.answered()) && Instant::now() < edge_until {
            let Some(ev) = s.link.event_until(edge_until) else { break };
            let lost = matches!(ev, Event::Disconnected(_));
            s.on_event(ev, &mut Pipe::new(1, false));
            if lost {
                break;
            }
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
            let Some(id) = self.link.probe(bytes) else { return };
            while self.link.probes.is_out(id) && Instant::now() < until {
                match self.link.event_until(until) {
                    Some(ev) => self.on_event(ev, &mut pipe),
                    None => break,
                }
            }
        }
        // An unanswered probe is dropped here rather than left to expire.
        self.link.probes.clear();
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

    /// Where the session stands with its edge tier, when one is configured.
    pub fn edge_status(&self) -> Option<EdgeStatus> {
        self.edge.as_ref().map(edge::EdgeState::status)
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
        self.driver.current()
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
            ModelError::UnknownInput {
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
        self.driver.handle_hint(hint);
    }

    /// Runs one inference on the fed inputs (split with the handheld when
    /// the planner says so) and returns its report; read the outputs with
    /// [`Session::fetch`], [`Session::fetch_f32`] or [`Session::outputs`].
    pub fn run(&mut self) -> Result<FrameReport> {
        let g = self.model.model.graph();
        if let Some(&missing) = g.inputs().iter().find(|&&t| !self.fed.contains_key(&g.tensor(t).name)) {
            return Err(Error::InputNotFed(g.tensor(missing).name.clone()));
        }
        let inputs = self.fed.clone();
        let mut results = vec![];
        self.drive(vec![inputs], Mode::Single, false, None, |r| results.push(r))?;
        let frame = results.pop().ok_or(Error::NoFrame)??;
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
        self.fetched.as_ref().ok_or(Error::NothingRun)
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
        self.stream_with(frames, None, |r| out.push(r))?;
        Ok(out)
    }

    /// Runs a stream, handing each frame's result to `deliver` in order as
    /// it completes; frames are released at `fps` when given (latency counts
    /// from the release), else as fast as the pipeline takes them. The
    /// planner prices a pipelined stream by its slowest stage (at a source
    /// rate, by each frame's latency when some cut meets the period), and
    /// frames one at a time ([`SessionConfig::pipeline`] off) by the sum of
    /// their stages, as single runs.
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

    /// Hands the link encodings to the planner when they changed enough
    /// that it must decide again.
    fn sync_codecs(&mut self) {
        if let Some(codecs) = self.encodings.take_replan() {
            self.driver.handle_codecs(Some(codecs));
        }
    }

    /// What prices a crossing now: the link estimate, the handheld's status.
    fn pricing(&self) -> encodings::Pricing {
        encodings::Pricing { link: self.profiler.estimate(), status: self.profiler.handheld_status() }
    }

    /// What prices a cut now: [`Session::pricing`] and the link encodings.
    fn pricing_now(&self) -> driver::Now<'_> {
        now_of(&self.profiler, &self.encodings)
    }

    /// The cut for the next frame: the planning driver asked.
    fn next_cut(&mut self, mode: Mode) -> driver::Next {
        let not_ready = (!self.is_ready())
            .then(|| self.status.local_reason().unwrap_or_else(|| "the handheld is not ready".into()));
        let now = now_of(&self.profiler, &self.encodings);
        self.driver.next(self.model.model.graph(), &self.config.placement, not_ready, mode, now)
    }

    /// The energy weights once a handheld named its device (by capacity:
    /// its shipped profile's battery, else the fallback's, beside the
    /// wearable's), handed to the planner with the handheld's status so far.
    fn weigh_energy(&mut self, device: &str) {
        if self.config.energy_weights == EnergyWeighing::Capacity {
            let theirs =
                tandem_plan::device::DeviceProfile::shipped(device).ok().and_then(|p| battery_mah(&p));
            if theirs.is_none() {
                warn!(handheld = %device, fallback = %self.config.handheld_fallback.name, "no shipped profile of the handheld's name gives a battery capacity: the fallback's weighs its energy");
            }
            let ours = battery_mah(&self.config.wearable);
            if let (Some(w), Some(h)) = (ours, theirs.or_else(|| battery_mah(&self.config.handheld_fallback)))
            {
                self.profiler.weigh_by_capacity(w, h);
            }
        }
        self.driver.handle_status(self.profiler.handheld_status(), self.profiler.weights());
    }

    /// The cut the next frame runs at, given the planner's `decided` one:
    /// the decided cut once its plans are ready on both sides, else the cut
    /// in force while they are built in the background ([`switch::hold`]);
    /// and, for the first frame of a switch that waited, how long since
    /// the decision.
    fn gate(&mut self, decided: driver::Next) -> driver::Next {
        let Some(builder) = &self.builder else {
            return decided;
        };
        for (key, engine, e) in builder.failures() {
            self.switch.local_failed(key, engine, e);
        }
        if !decided.cut.is_wearable_only() {
            let g = self.model.model.graph();
            for e in std::mem::take(&mut self.whole_ahead) {
                builder.build_whole(Cut::wearable_only(g), prefix_key(&self.executor, e));
            }
        }
        // The runners-up are on the decision's engines.
        let ahead_on = self.frame_engines(self.driver.current().and_then(|d| d.engines));
        let ahead = self.driver.take_ahead();
        let ahead = self.switch.unasked(ahead, Some(ahead_on));
        self.prepare(ahead, ahead_on);
        let engines = self.frame_engines(decided.engines);
        if decided.revisit {
            // Measured here without moving the switch: the cut in force, or
            // one waiting for its plans, is still where later frames go.
            return driver::Next { engines: Some(engines), ..decided };
        }
        let local_ready =
            self.executor.is_cached_on(&decided.cut, Sides::Prefix, self.prefix_engines(engines));
        match self.switch.choose(&(decided.cut.clone(), Some(engines)), local_ready, self.now()) {
            switch::Gate::Go { waited } => driver::Next { waited, engines: Some(engines), ..decided },
            switch::Gate::Hold { cut, engines: held_on, build } => {
                if let Some((b, on)) = build {
                    self.prepare(vec![b], self.frame_engines(on));
                }
                let here = Cut::wearable_only(self.model.model.graph());
                let now = self.pricing_now();
                let g = self.model.model.graph();
                let held_ms = self.driver.predict_on(g, &cut, now, held_on);
                let here_ms = self.driver.predict_on(g, &here, now, held_on);
                switch::hold(&decided.cut, ((cut, held_on), held_ms), ((here, held_on), here_ms))
            }
        }
    }

    /// Builds `cuts`' plans on `engines` in the background: the prefixes
    /// here, the suffixes on the handheld.
    fn prepare(&mut self, cuts: Vec<Cut>, engines: crate::engine::Engines) {
        if cuts.is_empty() {
            return;
        }
        debug!(cuts = cuts.len(), %engines, "building plans ahead");
        let keys = cuts.iter().map(Cut::key).collect();
        if let Some(b) = &self.builder {
            for c in cuts {
                b.build(c, self.prefix_engines(engines));
            }
        }
        self.link.prepare(keys, Some(engines.suffix));
    }

    /// A frame's engines: `chosen` (by the planner, with its cut), else
    /// each side's own ([`Session::engines`]).
    fn frame_engines(&self, chosen: Option<crate::engine::Engines>) -> crate::engine::Engines {
        chosen.unwrap_or_else(|| self.engines())
    }

    /// `cut`'s plan of `sides` on `engines`, and how long building it took
    /// here (zero when it was built before, ahead or by an earlier frame).
    fn plan_timed(
        &self,
        cut: &Cut,
        sides: Sides,
        engines: crate::engine::Engines,
    ) -> Result<(Arc<crate::SplitPlan>, Duration)> {
        let building = (!self.executor.is_cached_on(cut, sides, engines)).then(Instant::now);
        let plan = self.executor.plan_on(cut, sides, engines)?;
        Ok((plan, building.map_or(Duration::ZERO, |t| t.elapsed())))
    }

    /// What the executor keys a prefix plan on `engines` by ([`prefix_key`]).
    fn prefix_engines(&self, engines: crate::engine::Engines) -> crate::engine::Engines {
        prefix_key(&self.executor, engines.prefix)
    }

    /// Runs one frame on the edge over the wearable's own link
    /// ([`direct::Direct::try_frame`]). When the edge cannot take it or
    /// fails: cloud-only (`here`) runs it on the watch (a fallback); a
    /// frame the planner sent there returns `None` and takes the two-tier
    /// path.
    fn run_direct(
        &mut self,
        frame: u64,
        inputs: &Values,
        started: Instant,
        here: bool,
    ) -> Result<Option<(FrameReport, Values)>> {
        let n = self.model.model.graph().nodes().len();
        let engines = self.engines();
        let Some(direct) = &mut self.direct else {
            return Err(Error::NoEdge);
        };
        let link = *direct.link();
        let (why, leg) = match direct.try_frame(frame, &self.model.model, inputs, started, engines) {
            direct::Tried::Ran { account, outputs } => {
                let wearable = self.driver.wearable_energy_at(&self.config.wearable, None);
                return Ok(Some((account.report(n, &link, &*wearable, direct::absent()), outputs)));
            }
            direct::Tried::Here { why, leg } => (why, leg),
        };
        if !here {
            return Ok(None);
        }
        let (outputs, took, dvfs) = self.run_local(inputs, None)?;
        let local = Cut::wearable_only(self.model.model.graph());
        let mut account = Account::new(frame, local.key(), local.prefix_len(), why, engines);
        account.stages = Stages { wearable: took, latency: started.elapsed(), ..Stages::default() };
        (account.dvfs, account.edge) = (dvfs, leg);
        account.tiers = Some(report::Tiers { wearable: n, handheld: 0, edge: 0 });
        let wearable = self.driver.wearable_energy_at(&self.config.wearable, None);
        Ok(Some((account.report(n, &link, &*wearable, direct::absent()), outputs)))
    }

    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    fn on_event(&mut self, ev: Event, pipe: &mut Pipe) {
        match ev {
            Event::Ready { device, latency } => {
                info!(handheld = %device, "the handheld is ready");
                info!(handheld = %device, engine = %latency.engine, "its suffixes run on this engine");
                self.handheld_engine = latency.engine;
                let profile =
                    ProfiledLatency { per_node_s: latency.per_layer_s, overhead_s: latency.overhead_s };
                let others: Vec<_> = latency
                    .others
                    .into_iter()
                    .map(|o| {
                        (o.engine, ProfiledLatency { per_node_s: o.per_layer_s, overhead_s: o.overhead_s })
                    })
                    .collect();
                if !others.is_empty() {
                    let offered: Vec<String> = others.iter().map(|(e, _)| e.to_string()).collect();
                    info!(handheld = %device, others = %offered.join(", "), "its suffixes may also run on these engines");
                }
                self.driver.handheld_ready(
                    self.model.model.graph(),
                    &device,
                    ((latency.engine, profile), others),
                );
                self.weigh_energy(&device);
                self.status = Status::Ready { handheld: device.clone() };
                self.handheld_device = Some(device);
                self.switch.reconnected(Cut::wearable_only(self.model.model.graph()));
            }
            Event::Status(first) => {
                // The latest status since this event was queued.
                self.profiler.on_status(self.link.latest_status(first));
                self.driver.handle_status(self.profiler.handheld_status(), self.profiler.weights());
            }
            Event::Echo { id, received, echoed, at } => {
                if let Some(sent) = self.link.probes.echoed(id, received) {
                    let now = self.now();
                    self.profiler.on_echo(received, echoed, at.saturating_duration_since(sent), now);
                }
            }
            Event::Sent { bytes, took } => {
                // Sends shorter than a millisecond only filled a socket buffer.
                if took >= Duration::from_millis(1) {
                    let now = self.now();
                    self.profiler.on_upload(bytes, took, now);
                }
            }
            Event::Delivered { frame, handheld_us, answer, at, edge } => {
                self.on_answer(pipe, frame, handheld_us, *answer, at, edge)
            }
            Event::EdgeReady { deployed, rtt_us, speed, error } => {
                let graph = self.model.model.graph();
                if let Some(e) = &mut self.edge {
                    e.on_ready(graph, deployed, (rtt_us, speed), error);
                }
            }
            Event::RunLocally { frames, reason } => {
                for frame in frames {
                    pipe.hand_back(frame, &reason);
                }
            }
            Event::Prepared { cut, engine, error } => self.switch.handheld_prepared(cut, engine, error),
            Event::Disconnected(closed) => {
                self.driver.reset_stall();
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
                self.link.probes.clear();
            }
        }
    }

    /// The handheld answered `frame` (received at `at`): checked, decoded,
    /// learnt from and completed; a bad answer runs the frame here.
    fn on_answer(
        &mut self,
        pipe: &mut Pipe,
        frame: u64,
        handheld_us: u64,
        answer: link_task::Answer,
        at: Instant,
        edge: Option<tandem_proto::session::EdgeReport>,
    ) {
        let lone = pipe.is_lone(frame);
        let Some(f) = pipe.answer(frame) else {
            // Already handed back (a missed deadline): its local run,
            // pending or done, is the one delivered.
            debug!(frame, "late answer dropped");
            return;
        };
        self.driver.reset_stall();
        let handheld = Duration::from_micros(handheld_us);
        let dilation = self.profiler.handheld_status().dilation();
        // A relayed frame's handheld time is the middle's alone: not a suffix's to learn from.
        let relayed = edge.as_ref().is_some_and(|r| r.error.is_none());
        let engines = Some(f.account.engines);
        self.driver.learn(f.cut.prefix_mask(), (f.prefix, (!relayed).then_some(handheld)), dilation, engines);
        let down_bytes = answer.body_len as u64;
        let (tensors, decoding) = answer.body.decode();
        // Decoding an encoded answer is the watch's work (the link task
        // did it once, at this host's speed: the device clock owes the rest).
        let encoded = answer.metas.iter().any(|m| m.encoding != Encoding::Raw);
        let mut clock = DeviceClock::start(if encoded { self.config.dilation } else { 1.0 });
        let checked = clock.time(|| {
            tensors
                .map_err(|e| BadAnswer::Undecodable(e.to_string()))
                .and_then(|t| check_answer(self.model.model.graph(), &f.cut, &t).map(|()| t))
        });
        if encoded {
            // Owed for a bad answer too: the watch decoded it.
            clock.ran_elsewhere(decoding);
            clock.finish();
        }
        let outputs = match checked {
            Ok(t) => t,
            Err(e) => {
                let _ = pipe.return_local(frame, f, &format!("the handheld's answer was bad: {e}"));
                return;
            }
        };
        if encoded {
            self.encodings.observe_answer(&self.model.model, &answer.metas);
            self.sync_codecs();
        }
        let round = at.saturating_duration_since(f.sent_at);
        if lone && !relayed {
            let now = self.now();
            self.profiler.on_round_trip(f.account.up_bytes, down_bytes, round, handheld, now);
        }
        self.switch.answered(&f.cut, (!relayed).then_some(f.account.engines.suffix));
        let mut values = f.local_outputs;
        for (name, t) in outputs {
            values.insert(name, t.into());
        }
        let mut account = f.account;
        // A relayed frame's round trip holds the edge's request too: not the watch's link.
        let edge_time = edge.as_ref().filter(|r| r.error.is_none()).map_or(0, |r| r.edge_us);
        account.stages.link = round.saturating_sub(handheld).saturating_sub(Duration::from_micros(edge_time));
        account.stages.handheld = handheld;
        account.stages.latency = at.saturating_duration_since(f.started);
        account.down_bytes = down_bytes;
        account.down_message_bytes = answer.wire_len as u64;
        if let (Some(report), Some(state)) = (&edge, &mut self.edge) {
            let at = self.origin.elapsed();
            account.edge = Some(state.on_report(report, at));
            let near = f.near.as_ref().filter(|_| report.error.is_none());
            account.tiers = Some(edge::tiers(self.model.model.graph(), &f.cut, near));
        }
        let report = self.report(account, &f.cut);
        complete(pipe, frame, Ok((report, values)));
    }

    /// A frame's report from its account: radio time at the link estimate,
    /// energy model-based, the wearable's at the setting the cut ran at.
    /// The wearable's engine, and the handheld's as it last said (tract
    /// until a handheld is ready).
    pub fn engines(&self) -> crate::engine::Engines {
        crate::engine::Engines { prefix: self.executor.engines().prefix, suffix: self.handheld_engine }
    }

    fn report(&self, account: Account, cut: &Cut) -> FrameReport {
        let setting = self.driver.setting_for(cut);
        let wearable = self.driver.wearable_energy_at(&self.config.wearable, setting.as_ref());
        let layers = self.model.model.graph().nodes().len();
        account.report(layers, &self.profiler.estimate(), &*wearable, self.driver.handheld_energy())
    }

    /// How `cut`'s prefix runs at the planner's setting for it: pinned for
    /// real (the policy held, this thread pinned until the result is
    /// dropped) or dilated, the run's time over the inference setting's,
    /// and the report's `dvfs` line.
    fn prefix_setting(&mut self, cut: &Cut) -> PrefixSetting {
        let watch = self.config.dilation;
        let setting = self.driver.setting_for(cut);
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
                    Ok(c) => c
                        .hold(&s.cluster, s.f_hz)
                        .and_then(|a| Ok((CpuFreq::pin(&a)?, a)))
                        .inspect_err(|_| {
                            // Emulated instead: the policy must not slow it too.
                            c.give_back()
                        })
                        .map_err(Unavailable::CpuFreq),
                    Err(why) => Err(why.clone()),
                };
                match applied {
                    Ok((pinned, a)) => (Some(pinned), watch, Some(format!("{name}, applied: {a}"))),
                    Err(why) => (None, watch * s.time_scale, Some(format!("{name}, emulated ({why})"))),
                }
            }
        };
        let scale = match (&pinned, &setting) {
            (Some(_), Some(s)) => s.time_scale,
            _ => effective_scale(dilation, watch),
        };
        PrefixSetting { pinned, dilation, scale, line }
    }

    /// Runs a frame whole on the watch (`inputs`, its layers on
    /// `engines`' prefix engine, `None`: the wearable's own): on the
    /// prefix runner in a pipelined stream (unless the planner's setting
    /// pins this thread to a cluster for real), else here, after the
    /// runner's frames.
    fn run_whole(
        &mut self,
        pipe: &mut Pipe,
        mut whole: Whole,
        inputs: &Values,
        engines: Option<crate::engine::Engines>,
    ) -> Result<()> {
        let local = Cut::wearable_only(self.model.model.graph());
        whole.engines = self.prefix_engines(self.frame_engines(engines));
        let pins = self.cpufreq.is_ok() && self.driver.setting_for(&local).is_some();
        let here = !self.use_runner || pins;
        if here {
            self.settle(pipe);
        }
        // Its plan, built here when nothing built it before (the first
        // frame run whole), or waited for while the background builder
        // builds it (asked at the first decision to offload): this frame's
        // plan building, as a switch's is.
        let (plan, built) = self.plan_timed(&local, Sides::Both, whole.engines)?;
        whole.account.plan_build_ms += built.as_secs_f64() * 1e3;
        if here {
            let ran = self.run_local(inputs, engines).map(|(outputs, took, line)| {
                whole.account.dvfs = line;
                (outputs, took)
            });
            return self.finish_whole(pipe, whole, ran);
        }
        let PrefixSetting { dilation, scale, line, .. } = self.prefix_setting(&local);
        whole.account.dvfs = line;
        let frame = whole.frame;
        let runner = self.runner()?;
        if whole.how == WholeFrame::New {
            if !pipe.start_running(frame) {
                return Err(Error::FrameStarted(frame));
            }
            whole.how = WholeFrame::Running;
        }
        // A cut of every layer sends nothing: the runner packs nothing.
        runner.submit(prefix_runner::Job {
            frame,
            plan,
            inputs: inputs.clone(),
            dilation,
            scale,
            encodings: vec![],
        });
        self.at_runner.push_back(AtRunner::Whole(Box::new(whole)));
        Ok(())
    }

    /// Runs one frame whole here, now: its outputs, how long it took and
    /// the report's `dvfs` line; the run is learnt from.
    fn run_local(
        &mut self,
        inputs: &Values,
        engines: Option<crate::engine::Engines>,
    ) -> Result<(Values, Duration, Option<String>)> {
        let local = Cut::wearable_only(self.model.model.graph());
        let engines = self.prefix_engines(self.frame_engines(engines));
        let plan = self.executor.plan_on(&local, Sides::Both, engines)?;
        let PrefixSetting { pinned, dilation, scale, line } = self.prefix_setting(&local);
        let job =
            prefix_runner::Job { frame: 0, plan, inputs: inputs.clone(), dilation, scale, encodings: vec![] };
        let ran = prefix_runner::run(self.model.model.graph(), &self.packing, &job)?;
        // The hardware's own scale is not known apart from the profile's:
        // the predictors learn against the profile's.
        let line = match pinned {
            Some(pinned) => line.map(|l| format!("{l} (ran on cpu {})", pinned.cpu())),
            None => line,
        };
        let g = self.model.model.graph();
        let outputs = tandem_core::split::model_outputs(g, &ran.up)?;
        self.driver.learn(&vec![true; g.nodes().len()], (ran.at_default, None), 1.0, Some(engines));
        Ok((outputs, ran.wearable, line))
    }

    /// A frame run whole is done (its outputs and the time it took, or
    /// its error): its report into the pipeline.
    fn finish_whole(&mut self, pipe: &mut Pipe, whole: Whole, ran: Result<(Values, Duration)>) -> Result<()> {
        let Whole { frame, mut account, cut, started, how, .. } = whole;
        let done = ran.map(|(outputs, took)| {
            account.stages = Stages { wearable: took, latency: started.elapsed(), ..Stages::default() };
            (self.report(account, &cut), outputs)
        });
        match how {
            WholeFrame::New => pipe.start_done(frame, done).map_err(|_| Error::FrameStarted(frame)),
            WholeFrame::Running => {
                if pipe.finish_running(frame, done).is_err() {
                    warn!(frame, "the frame pipeline refused a frame that ran whole");
                }
                Ok(())
            }
            WholeFrame::FellBack => {
                complete(pipe, frame, done);
                Ok(())
            }
        }
    }

    /// The runner ran `whole`'s frame (`result`): its outputs, the run
    /// learnt from, and the frame finished.
    fn on_whole(&mut self, pipe: &mut Pipe, whole: Whole, result: Result<Prefix>) {
        let g = self.model.model.graph();
        let ran = result.and_then(|p| {
            let outputs = tandem_core::split::model_outputs(g, &p.up)?;
            self.driver.learn(&vec![true; g.nodes().len()], (p.at_default, None), 1.0, Some(whole.engines));
            Ok((outputs, p.wearable))
        });
        // Refused only as a new frame, which this is not.
        let _ = self.finish_whole(pipe, whole, ran);
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
        if self.config.placement == Placement::EdgeOnly {
            let done = self.run_direct(frame, &inputs, started, true).and_then(|d| d.ok_or(Error::NoFrame));
            return pipe.start_done(frame, done).map_err(|_| Error::FrameStarted(frame));
        }
        let cx =
            encodings::Context { model: &self.model.model, executor: &self.executor, config: &self.config };
        let ready = matches!(self.status, Status::Ready { .. });
        self.encodings.ensure(cx, &inputs, ready);
        self.sync_codecs();
        let next = self.next_cut(mode);
        let mut next = self.gate(next);
        let waited_ms = next.waited.map(|w| w.as_secs_f64() * 1e3);
        // Three tiers, when an edge serves this model: its placement may
        // offload what two tiers would keep here.
        let mut near = None;
        if let (true, false, Some(e)) =
            (self.is_ready(), self.config.placement == Placement::WearableOnly, &mut self.edge)
        {
            let now = now_of(&self.profiler, &self.encodings);
            let at = self.origin.elapsed();
            let g = self.model.model.graph();
            let direct_ok = self.direct.as_ref().is_some_and(|d| d.unavailable().is_none());
            match e.placement(&self.driver, g, mode, now, at, (&next.cut, next.predicted_ms), direct_ok) {
                Some(edge::EdgePlan::Relay { watch, near: s2, ms }) => {
                    next.cut = watch;
                    next.local_reason = None;
                    next.predicted_ms = ms.or(next.predicted_ms);
                    // Its stages were priced for three tiers: its service is not known.
                    next.service_ms = None;
                    near = Some(s2);
                }
                Some(edge::EdgePlan::Direct { ms }) => {
                    self.settle(pipe);
                    // When the edge fails, the frame takes the two-tier path below.
                    if let Some(done) = self.run_direct(frame, &inputs, started, false).transpose() {
                        let done = done.map(|(mut report, outputs)| {
                            report.predicted_ms = Some(ms);
                            (report, outputs)
                        });
                        return pipe.start_done(frame, done).map_err(|_| Error::FrameStarted(frame));
                    }
                }
                None => {}
            }
        }
        if next.cut.is_wearable_only() {
            let why = next.local_reason.unwrap_or_else(|| "the cut runs every layer here".into());
            let engines = self.prefix_engines(self.frame_engines(next.engines));
            let mut account =
                Account::new(frame, next.cut.key(), next.cut.prefix_len(), Ran::Local(why), engines);
            (account.predicted_ms, account.switch_wait_ms) = (next.predicted_ms, waited_ms);
            if self.edge.is_some() {
                account.tiers = Some(edge::tiers(self.model.model.graph(), &next.cut, None));
            }
            let whole = Whole { frame, account, cut: next.cut, started, engines, how: WholeFrame::New };
            return self.run_whole(pipe, whole, &inputs, next.engines);
        }
        let Next { cut, predicted_ms, service_ms, engines, .. } = next;
        // A relayed frame runs on each side's own engines, as the three
        // tiers were priced.
        let engines = match near {
            Some(_) => self.engines(),
            None => self.frame_engines(engines),
        };
        let (pricing, decided) = (self.pricing(), self.driver.current());
        let cx =
            encodings::Context { model: &self.model.model, executor: &self.executor, config: &self.config };
        let encodings = self.encodings.for_cut(cx, &cut, decided, pricing);
        self.sync_codecs();
        let (plan, built) = self.plan_timed(&cut, Sides::Prefix, self.prefix_engines(engines))?;
        let PrefixSetting { pinned, dilation, scale, line } = self.prefix_setting(&cut);
        let mut offload = Offload {
            frame,
            cut,
            inputs,
            started,
            predicted_ms,
            service_ms,
            engines,
            near,
            encodings,
            waited_ms,
            built,
            dvfs: line,
        };
        // Pipelined: on the runner, unless this thread holds a cluster for real.
        let on_runner = self.use_runner && pinned.is_none();
        // The frame keeps its inputs (to run here if it comes back): the
        // runner gets copies, a prefix run here borrows them.
        let (inputs, encodings) = match on_runner {
            true => (offload.inputs.clone(), offload.encodings.clone()),
            false => (std::mem::take(&mut offload.inputs), std::mem::take(&mut offload.encodings)),
        };
        let job = prefix_runner::Job { frame, plan, inputs, dilation, scale, encodings };
        if on_runner {
            if !pipe.start_running(frame) {
                return Err(Error::FrameStarted(frame));
            }
            self.runner()?.submit(job);
            self.at_runner.push_back(AtRunner::Offload(Box::new(offload)));
            return Ok(());
        }
        self.settle(pipe);
        let prefix = prefix_runner::run(self.model.model.graph(), &self.packing, &job);
        (offload.inputs, offload.encodings) = (job.inputs, job.encodings);
        if let Some(pinned) = pinned {
            offload.dvfs = offload.dvfs.map(|l| format!("{l} (ran on cpu {})", pinned.cpu()));
        }
        self.send_offload(pipe, offload, prefix?, false)
    }

    /// The prefix runner, started if it was not.
    fn runner(&mut self) -> Result<&mut PrefixRunner> {
        let runner = match self.runner.take() {
            Some(runner) => runner,
            None => PrefixRunner::spawn(self.model.model.clone(), self.packing.clone())
                .map_err(|source| Error::Start { what: "the prefix runner", source })?,
        };
        Ok(self.runner.insert(runner))
    }

    /// Waits for the runner's jobs, offloading each frame as its prefix
    /// returns: before this thread computes, so that the watch runs one
    /// thing at a time.
    fn settle(&mut self, pipe: &mut Pipe) {
        while let Some((frame, result)) = self.runner.as_mut().and_then(PrefixRunner::wait_done) {
            self.on_prefix(pipe, frame, result);
        }
    }

    /// The runner returned `frame`: run whole, it is done; else its
    /// prefix ran and it is offloaded, or its error takes its place (a frame
    /// sent when the link task had stopped runs here).
    fn on_prefix(&mut self, pipe: &mut Pipe, frame: u64, result: Result<Prefix>) {
        let offload = match self.at_runner.pop_front() {
            Some(AtRunner::Offload(offload)) => *offload,
            Some(AtRunner::Whole(whole)) => {
                debug_assert_eq!(whole.frame, frame, "the runner returns frames in order");
                self.on_whole(pipe, *whole, result);
                return;
            }
            None => {
                warn!(frame, "the prefix runner returned a frame it was not given");
                return;
            }
        };
        debug_assert_eq!(offload.frame, frame, "the runner returns frames in order");
        let Err(e) = result.and_then(|prefix| self.send_offload(pipe, offload, prefix, true)) else {
            return;
        };
        if let Err(back) = pipe.finish_running(frame, Err(e)) {
            let reason = back.err().map_or_else(|| "the link task stopped".to_string(), |e| e.to_string());
            pipe.hand_back(frame, &reason);
        }
    }

    /// Offloads `o`, its prefix run (`on_runner`: by the runner, the frame
    /// already started as running): its in-flight record, then the send.
    fn send_offload(&mut self, pipe: &mut Pipe, o: Offload, p: Prefix, on_runner: bool) -> Result<()> {
        let Offload {
            frame,
            cut,
            inputs,
            started,
            predicted_ms,
            service_ms,
            engines,
            near,
            encodings,
            waited_ms,
            built,
            dvfs,
        } = o;
        let Prefix { up, packed, raw_bytes, at_default: prefix, wearable } = p;
        let g = self.model.model.graph();
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
        let now = self.now();
        let service = service_ms.map(|ms| secs(ms / 1e3));
        let (factor, floor) = (self.config.deadline_factor, self.config.deadline_floor);
        let deadline = pipe.deadline(now, secs(remote_s), service, factor, floor);
        debug!(
            frame,
            prefix = cut.prefix_len(),
            predicted_ms = ?predicted_ms,
            deadline_s = deadline.saturating_sub(now).as_secs_f64(),
            link = ?self.profiler.estimate(),
            "offloading"
        );
        self.encodings.observe_sent(&cut, &encodings, &packed);
        self.sync_codecs();
        let answer = self.encodings.answer(&self.model.model, &cut, self.driver.current(), self.pricing());
        let key = cut.key();
        let near_key = near.as_ref().map(Cut::key);
        let mut account = Account::new(frame, key.clone(), cut.prefix_len(), Ran::Offloaded, engines);
        let suffix_engine = near.is_none().then_some(engines.suffix);
        account.up_message_bytes = tandem_proto::protocol::run_suffix_wire_len(
            frame,
            key.as_str(),
            &packed,
            &answer,
            near_key.as_ref().map(|k| k.as_str()),
            suffix_engine,
        ) as u64;
        if self.edge.is_some() {
            account.tiers = Some(edge::tiers(self.model.model.graph(), &cut, near.as_ref()));
        }
        account.stages.wearable = wearable;
        (account.up_bytes, account.up_raw_bytes, account.predicted_ms) = (up_bytes, raw_bytes, predicted_ms);
        (account.switch_wait_ms, account.plan_build_ms, account.dvfs) =
            (waited_ms, built.as_secs_f64() * 1e3, dvfs);
        let in_flight =
            Box::new(InFlight { inputs, local_outputs, cut, started, sent_at, prefix, account, near });
        match on_runner {
            true => pipe.ran(frame, in_flight, deadline),
            false => pipe.start_offloaded(frame, in_flight, deadline),
        }
        .map_err(|_| Error::FrameStarted(frame))?;
        Ok(self.link.offload(frame, (key, suffix_engine), packed, answer, near_key)?)
    }

    /// Checks one frame's inputs against the model: every input there, no
    /// other name, each of the right type and shape.
    fn check_frame(&self, inputs: &Values) -> Result<()> {
        let g = self.model.model.graph();
        let known: Vec<String> = g.inputs().iter().map(|&t| g.tensor(t).name.clone()).collect();
        let mut names: Vec<&String> = inputs.keys().collect();
        names.sort();
        if let Some(unknown) = names.iter().find(|n| !known.contains(n)) {
            return Err(ModelError::UnknownInput { name: unknown.to_string(), known }.into());
        }
        for &t in g.inputs() {
            let name = &g.tensor(t).name;
            let v = inputs.get(name).ok_or_else(|| Error::InputNotFed(name.clone()))?;
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
        // Prefixes on their own thread when frames overlap.
        self.use_runner = pipeline && self.config.max_in_flight > 1;
        self.sample_fuel(false);
        // A source rate: each frame is due before the next one arrives.
        let period = fps.filter(|f| f.is_finite() && *f > 0.0).map(|f| Duration::from_secs_f64(1.0 / f));
        self.driver.handle_rate(period);
        let first_release = Instant::now();
        let mut released = 0u64;
        loop {
            while let Some((frame, result)) = self.runner.as_mut().and_then(PrefixRunner::try_done) {
                self.on_prefix(&mut pipe, frame, result);
            }
            while let Some(ev) = self.link.try_event() {
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
                let here = Cut::wearable_only(self.model.model.graph());
                let engines = self.engines();
                let mut account =
                    Account::new(f, here.key(), here.prefix_len(), Ran::FellBack(reason), engines);
                (account.up_bytes, account.up_raw_bytes) = (back.account.up_bytes, back.account.up_raw_bytes);
                account.plan_build_ms = back.account.plan_build_ms;
                account.up_message_bytes = back.account.up_message_bytes;
                let whole = Whole {
                    frame: f,
                    account,
                    cut: here,
                    started: back.started,
                    engines,
                    how: WholeFrame::FellBack,
                };
                if let Err(e) = self.run_whole(&mut pipe, whole, &back.inputs, None) {
                    complete(&mut pipe, f, Err(e));
                }
                continue;
            }
            // A stale link estimate is probed whenever nothing is in flight,
            // also while frames run here back to back (the link task sends
            // it; this thread does not wait): so that a link that recovers
            // is seen even when no frame crosses it.
            self.maybe_probe(pipe.in_flight() == 0);
            // The runner holds one frame queued behind the one it runs.
            let runner_free = self.runner.as_ref().is_none_or(|r| r.pending() < 2);
            if pipe.can_start() && runner_free && frames.peek().is_some() {
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
                    .map_err(|e| Error::Frame { frame, source: Box::new(e) })
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
    pub fn measured_energy(&self) -> Result<&tandem_plan::fuel::Measured, &Unavailable> {
        self.fuel.as_ref().map(|(m, _)| m.measured())
    }

    /// Frames past their deadline run here: the handheld is told not to
    /// run them, and enough misses in a row drop the link as stalled.
    fn missed_deadlines(&mut self, frames: Vec<u64>) {
        for f in &frames {
            warn!(frame = f, "the handheld missed the deadline; running the frame here");
        }
        self.link.cancel(frames);
        // One handheld pause can make several pipelined frames late at
        // once: it counts as one miss.
        if let Some(reason) = self.driver.missed_deadline() {
            warn!("{reason}");
            self.link.reset(reason);
        }
    }

    /// Waits for one event, or for a prefix from the runner, until `until`.
    fn wait(&mut self, pipe: &mut Pipe, until: Instant) {
        let Some(runner) = self.runner.as_mut().filter(|r| r.pending() > 0) else {
            if let Some(ev) = self.link.event_until(until) {
                self.on_event(ev, pipe);
            }
            return;
        };
        let timeout = until.saturating_duration_since(Instant::now());
        crossbeam_channel::select! {
            recv(runner.done()) -> got => {
                if let Some((frame, result)) = runner.take(got.map_err(|_| true)) {
                    self.on_prefix(pipe, frame, result);
                }
            }
            recv(self.link.events()) -> ev => {
                if let Ok(ev) = ev {
                    self.on_event(ev, pipe);
                }
            }
            default(timeout) => {}
        }
    }

    fn maybe_probe(&mut self, idle: bool) {
        if !self.link.probes.none_out(Instant::now()) || !self.is_ready() {
            return;
        }
        if let Some(p) = self.profiler.probe_due(self.now(), idle) {
            self.link.probe(p.bytes);
        }
    }
}

/// How much slower a run dilated by `dilation` is than one dilated by
/// `default`: dilation never speeds a run up, so factors below 1 count as 1
/// (and, as the device clock takes them, those not finite).
fn effective_scale(dilation: f64, default: f64) -> f64 {
    use tandem_core::device_clock::factor_of;
    factor_of(dilation) / factor_of(default)
}

/// Seconds as a Duration, saturating: NaN and negatives are zero, and
/// anything too large is the longest Duration (never a panic).
fn secs(s: f64) -> Duration {
    Duration::try_from_secs_f64(s.max(0.0)).unwrap_or(Duration::MAX)
}

/// What was wrong with a handheld's answer (the frame then runs here).
#[derive(Debug, thiserror::Error)]
enum BadAnswer {
    #[error("{0}")]
    Undecodable(String),
    #[error("{got} tensors where {want} cross back at this cut")]
    Count { got: usize, want: usize },
    #[error("'{0}' twice in one answer")]
    Twice(String),
    #[error("a tensor '{0}' that does not cross back at this cut")]
    NotCrossing(String),
    #[error("'{name}' is {got}, the model's is {want}")]
    Mismatch { name: String, got: String, want: String },
}

/// Checks a handheld's answer: exactly the tensors that cross back at
/// `cut`, each of the model's type and shape (a peer's numbers are checked
/// even after pairing).
fn check_answer(
    g: &crate::LayerGraph,
    cut: &Cut,
    answer: &[(String, crate::Tensor)],
) -> std::result::Result<(), BadAnswer> {
    let want = cut.down_tensors();
    if answer.len() != want.len() {
        return Err(BadAnswer::Count { got: answer.len(), want: want.len() });
    }
    let mut seen = std::collections::HashSet::new();
    for (name, t) in answer {
        if !seen.insert(name.as_str()) {
            return Err(BadAnswer::Twice(name.clone()));
        }
        let Some(info) = g.tensor_id(name).filter(|id| want.contains(id)).map(|id| g.tensor(id)) else {
            return Err(BadAnswer::NotCrossing(name.clone()));
        };
        if t.datum_type() != info.dtype || (!info.shape.is_empty() && t.shape() != info.shape.as_slice()) {
            return Err(BadAnswer::Mismatch {
                name: name.clone(),
                got: format!("{:?} {:?}", t.datum_type(), t.shape()),
                want: format!("{:?} {:?}", info.dtype, info.shape),
            });
        }
    }
    Ok(())
}
