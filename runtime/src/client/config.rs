//! A session's configuration: the model file, where frames run, reconnection, devices and limits.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::{Cut, InputShapes, Model, Result};
use tandem_plan::device::DeviceProfile;
use tandem_plan::partition::{LatencyHint, LinkEstimate, Method};

/// A model with the ONNX bytes it came from (their digest identifies it to
/// the handheld, which may need them pushed). A TFLite file's are those of
/// its translation, so the handheld only ever receives ONNX.
#[derive(Clone)]
pub struct ModelFile {
    /// The ONNX bytes.
    pub bytes: Arc<Vec<u8>>,
    /// The loaded model.
    pub model: Model,
}

impl ModelFile {
    /// Loads an ONNX or TFLite file (translated to ONNX, see
    /// [`tandem_core::model::onnx_bytes_of`]), with input-shape overrides for
    /// symbolic dimensions. The handheld is told the overrides in the
    /// handshake and loads the same ONNX (by digest) with them.
    pub fn load(path: impl AsRef<Path>, shapes: &InputShapes) -> Result<ModelFile> {
        let path = path.as_ref();
        let bytes = tandem_core::model::onnx_bytes_of(path)?;
        let model = Model::from_path_bytes(path, &bytes, shapes)?;
        Ok(ModelFile { bytes: Arc::new(bytes), model })
    }

    /// From ONNX bytes, or TFLite bytes (kept as their ONNX translation);
    /// see [`ModelFile::load`] for the overrides.
    pub fn from_bytes(bytes: Vec<u8>, shapes: &InputShapes) -> Result<ModelFile> {
        let bytes = if tandem_tflite::is_tflite(&bytes) {
            tandem_core::model::onnx_bytes_of_tflite(&bytes, "<bytes>")?
        } else {
            bytes
        };
        let model = Model::from_bytes(&bytes, shapes)?;
        Ok(ModelFile { bytes: Arc::new(bytes), model })
    }
}

/// Where frames run.
#[derive(Clone, Debug, PartialEq)]
pub enum Placement {
    /// The planner decides, frame by frame.
    Auto,
    /// Everything on the wearable (no link needed).
    WearableOnly,
    /// Everything on the handheld (the wearable only sends the inputs).
    HandheldOnly,
    /// Always this cut.
    Fixed(Cut),
    /// Everything on the edge server, sent there straight over the
    /// wearable's own link ([`EdgeConfig::direct`]; the phone takes no
    /// part): DeepWear's cloud baseline. A frame the edge fails runs on
    /// the wearable. Needs [`SessionConfig::edge`].
    EdgeOnly,
}

/// Reconnection backoff: the first wait, doubled after each failure up to the cap.
#[derive(Clone, Copy, Debug)]
pub struct Backoff {
    /// First wait.
    pub initial: Duration,
    /// Longest wait.
    pub max: Duration,
}

/// How a [`Session`] behaves.
#[derive(Clone, Debug)]
pub struct SessionConfig {
    /// The engine the wearable's layers run on (`auto`: the faster of the
    /// engines this process has, from a profile of each at open). The
    /// handheld chooses its own (`tandem-handheld serve --engine`) and
    /// says which when the model is ready.
    pub engine: crate::engine::EngineChoice,
    /// The wearable's device profile (name, powers) for pricing and energy.
    pub wearable: DeviceProfile,
    /// The handheld profile to price with when the handheld's own name is unknown.
    pub handheld_fallback: DeviceProfile,
    /// Compute dilation: the wearable runs this many times slower than the host (≥ 1).
    pub dilation: f64,
    /// Where frames run.
    pub placement: Placement,
    /// The latency hint.
    pub hint: LatencyHint,
    /// Candidate search of the planner.
    pub method: Method,
    /// The planner's switching margin.
    pub margin: f64,
    /// Pipeline streams (several frames in flight); off: one at a time.
    pub pipeline: bool,
    /// Most frames offloaded and unanswered at once, when pipelining.
    pub max_in_flight: usize,
    /// A frame's answer is late after `deadline_factor` × the predicted
    /// wait for it (its remote time, after the answers expected for the
    /// frames in flight before it), and never before `deadline_floor`; then
    /// it runs locally.
    pub deadline_factor: f64,
    /// See `deadline_factor`.
    pub deadline_floor: Duration,
    /// This many missed deadlines in a row, with no answer in time between
    /// them, mean the handheld has stalled: the link is dropped (frames in
    /// flight run here) and opened again.
    pub max_missed_deadlines: u32,
    /// No bytes at all from the handheld for this long (it sends `Status`
    /// twice a second) mean the link is lost, as above.
    pub link_silence: Duration,
    /// With nothing else to send for this long, the link task sends a
    /// keepalive (an empty probe), so the handheld does not close the
    /// link as idle (it does after 60 s).
    pub keepalive: Duration,
    /// How long [`Session::open`] waits for the handheld to be ready (it
    /// stops waiting at the first connection error or refusal).
    pub ready_timeout: Duration,
    /// `Some(t)`: [`Session::open`] fails unless a handheld is ready within
    /// `t` (retrying connection errors meanwhile; a refusal fails at once).
    /// See [`SessionConfig::require_handheld`].
    pub require_handheld: Option<Duration>,
    /// Reconnection backoff.
    pub backoff: Backoff,
    /// The link estimate before anything is measured.
    pub link_default: LinkEstimate,
    /// The wearable's battery level in [0, 1]; `None`: read sysfs (else full).
    pub battery: Option<f64>,
    /// How the planner weighs each side's energy (SPEC 2's Ww and Wp).
    pub energy_weights: EnergyWeighing,
    /// The `power_supply` folder whose battery fuel gauge measures energy
    /// over windows of frames (`None`: model-based energy only).
    pub fuel_gauge: Option<std::path::PathBuf>,
    /// Frames per window of measured energy.
    pub energy_window: u64,
    /// Choose the wearable's cluster and frequency (from its profile) with
    /// each cut. Applied for real where [`SessionConfig::cpufreq`] is
    /// writable (the prefix's thread pinned to the cluster's CPUs, its
    /// policy held at the frequency, both given back), else by emulation
    /// (the prefix dilated by the setting's busy-time scale); frame
    /// reports name the setting and say which.
    pub dvfs: bool,
    /// The sysfs CPU folder whose cpufreq policies apply `dvfs` settings
    /// (`/sys/devices/system/cpu`); `None`: always emulate. A watch
    /// emulated on a host (`dilation` above 1) has its setting emulated too.
    pub cpufreq: Option<std::path::PathBuf>,
    /// Model push chunk size (bytes).
    pub chunk_bytes: usize,
    /// Link encodings the planner may choose per crossing tensor: `Raw`
    /// (none), `Lossless` (the default: results stay bit-identical), or
    /// `Lossy` (f16 and int8 too, each only where a measurement on the
    /// calibration frame shows it within `accuracy`).
    pub encodings: tandem_proto::encoding::Allowed,
    /// The accuracy budget lossy encodings must stay within (needed for `Lossy`).
    pub accuracy: Option<Accuracy>,
    /// Re-decide the cut as conditions change (the default); `false`: keep
    /// the first decision for the whole session (Neurosurgeon's rule).
    pub adapt: bool,
    /// Build the next likely cuts' plans in the background, on both sides,
    /// and switch once they are ready (the default); `false`: a new cut's
    /// plans are built inside the first frame that runs at it.
    pub prepare_ahead: bool,
    /// Inputs that are a sensor's own values (u8 pixels, i16 PCM) under a
    /// model card's normalization, by input name: the link may carry them
    /// narrow (bit-exact) or, within the budget, as JPEG. See
    /// [`SessionConfig::use_card`].
    pub widenings: std::collections::BTreeMap<String, tandem_proto::encoding::Widening>,
    /// A third tier: the edge server the handheld relays to, when any.
    pub edge: Option<EdgeConfig>,
}

/// How the planner weighs each side's energy (SPEC 2's Ww and Wp, in
/// [`tandem_plan::partition::EnergyWeights`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EnergyWeighing {
    /// By both batteries' levels (the default): a charging handheld's
    /// energy is free, a side below 20% weighs 0.8, else 0.5 each.
    #[default]
    Levels,
    /// By the share of its own battery each side spends (joules over the
    /// battery's capacity, as DeepWear's paper counts energy): from the
    /// wearable's profile and the handheld's (its shipped profile once it
    /// names its device, the fallback's before); both must give a
    /// capacity. A charging handheld's energy is still free, and a side
    /// below 20% is still spared as by level.
    Capacity,
}

/// The edge tier (SPEC 9): an Open Inference Protocol server the handheld
/// relays to. It serves the suffixes `tandem-models export-suffix` wrote
/// (the cuts of [`tandem_core::tier::edge_cuts`]); the planner places
/// layers on it only at those cuts.
#[derive(Clone, Debug, PartialEq)]
pub struct EdgeConfig {
    /// The server's base URL (`http://HOST:PORT`); the handheld must list
    /// it (`tandem-handheld serve --edge-allow URL`).
    pub url: String,
    /// Run every offloaded frame's edge part from this cut (S2's key)
    /// instead of the planner's choice, when the edge serves it.
    pub cut: Option<crate::CutKey>,
    /// How many times faster than the phone the edge runs a layer: an
    /// assumption the planner prices with (8 by default).
    pub speedup: f64,
    /// The phone–edge link the planner prices with before the phone has
    /// measured it (its RTT comes from the phone's first call).
    pub link: tandem_plan::partition::LinkEstimate,
    /// The wearable's own link to the edge: emulated at these rates and
    /// RTT (as the phone's `serve --edge-link` is), its rates also pricing
    /// the radio's energy. For [`Placement::EdgeOnly`] (`None`: the real
    /// network, unshaped, priced as 50 Mbit/s); under [`Placement::Auto`]
    /// its presence says the watch has such a link, so the planner may
    /// send a frame's input straight to the edge (the whole model there)
    /// when that is predicted best.
    pub direct: Option<tandem_oip::EmulatedLink>,
}

impl EdgeConfig {
    /// The watch's own link to the edge as the planner prices it, when it has one.
    pub fn direct_estimate(&self) -> Option<tandem_plan::partition::LinkEstimate> {
        self.direct.map(|l| tandem_plan::partition::LinkEstimate {
            up_bytes_per_s: l.up_bits_per_s / 8.0,
            down_bytes_per_s: l.down_bits_per_s / 8.0,
            rtt: l.rtt,
        })
    }

    /// The edge at `url`, with the default assumptions (8× the phone;
    /// 50 Mbit/s both ways until measured).
    pub fn new(url: impl Into<String>) -> EdgeConfig {
        EdgeConfig {
            url: url.into(),
            cut: None,
            speedup: 8.0,
            link: tandem_plan::partition::LinkEstimate {
                up_bytes_per_s: 50e6 / 8.0,
                down_bytes_per_s: 50e6 / 8.0,
                rtt: Duration::from_millis(5),
            },
            direct: None,
        }
    }
}

/// An offload strategy: a decision rule plugged into the same runtime, so
/// that strategies can be compared on the same frames, links and devices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// Tandem's own: the exact search (min-cut, stream branch and bound)
    /// under the app's hint and energy weights, link encodings, re-decided
    /// as conditions change, the next likely cuts' plans built ahead.
    Tandem,
    /// DeepWear: the heuristic over the simplified DAG under the app's hint
    /// and energy weights, raw tensors, re-decided.
    DeepWear,
    /// DADS: the exact min-cut for latency alone, raw tensors, re-decided.
    Dads,
    /// Neurosurgeon: the layers as a chain in topological order, latency
    /// alone, raw tensors, decided once at start and never again.
    Neurosurgeon,
    /// Every layer on the wearable.
    WearableOnly,
    /// Every layer on the handheld, the input raw.
    HandheldOnly,
    /// Every layer on the handheld, the input in its cheapest allowed encoding.
    HandheldCompressed,
    /// DeepWear's cloud baseline: every layer on the edge server, the
    /// input sent raw over the wearable's own link ([`Placement::EdgeOnly`];
    /// needs an edge). Not in [`Strategy::ALL`], the two-tier strategies.
    CloudOnly,
}

impl Strategy {
    /// Every two-tier strategy (the watch and the phone), in the order
    /// reports list them; [`Strategy::CloudOnly`] needs an edge and is apart.
    pub const ALL: [Strategy; 7] = [
        Strategy::WearableOnly,
        Strategy::HandheldOnly,
        Strategy::HandheldCompressed,
        Strategy::Neurosurgeon,
        Strategy::Dads,
        Strategy::DeepWear,
        Strategy::Tandem,
    ];

    /// Its name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Tandem => "tandem",
            Strategy::DeepWear => "deepwear",
            Strategy::Dads => "dads",
            Strategy::Neurosurgeon => "neurosurgeon",
            Strategy::WearableOnly => "wearable-only",
            Strategy::HandheldOnly => "handheld-only",
            Strategy::HandheldCompressed => "handheld-compressed",
            Strategy::CloudOnly => "cloud-only",
        }
    }

    /// The strategy named `name` (see [`Strategy::name`]).
    pub fn parse(name: &str) -> std::result::Result<Strategy, ConfigParseError> {
        Self::ALL
            .into_iter()
            .chain([Strategy::CloudOnly])
            .find(|s| s.name() == name)
            .ok_or_else(|| ConfigParseError::Strategy(name.to_string()))
    }

    /// Sets `config`'s placement, search method, objective, encodings,
    /// adaptation and building ahead as the strategy does; the rest
    /// (devices, link, budget) stays. Tandem and handheld-compressed keep
    /// `config.encodings` (lossless at least). Only Tandem builds plans
    /// ahead: the others build a new cut's plans when they switch to it.
    pub fn apply(self, config: &mut SessionConfig) {
        use tandem_proto::encoding::Allowed;
        config.placement = Placement::Auto;
        config.method = Method::MinCut;
        config.adapt = true;
        config.prepare_ahead = self == Strategy::Tandem;
        match self {
            Strategy::Tandem => config.encodings = config.encodings.max(Allowed::Lossless),
            Strategy::DeepWear => {
                config.method = Method::Heuristic;
                config.encodings = Allowed::Raw;
            }
            Strategy::Dads => {
                config.hint = LatencyHint::Fastest;
                config.encodings = Allowed::Raw;
            }
            Strategy::Neurosurgeon => {
                config.method = Method::Chain;
                config.hint = LatencyHint::Fastest;
                config.encodings = Allowed::Raw;
                config.adapt = false;
            }
            Strategy::WearableOnly => config.placement = Placement::WearableOnly,
            Strategy::HandheldOnly => {
                config.placement = Placement::HandheldOnly;
                config.encodings = Allowed::Raw;
            }
            Strategy::HandheldCompressed => {
                config.placement = Placement::HandheldOnly;
                config.encodings = config.encodings.max(Allowed::Lossless);
            }
            Strategy::CloudOnly => {
                config.placement = Placement::EdgeOnly;
                config.encodings = Allowed::Raw;
            }
        }
    }
}

/// How far a lossy link encoding may move a frame's outputs from the
/// unsplit run's, measured on the calibration frame.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Accuracy {
    /// Every output within this relative error: max |a − b| over max |a|.
    MaxRelError(f64),
    /// Every output's argmax (over its last axis, per row) unchanged.
    Argmax,
}

impl Accuracy {
    /// Parses `rel:X` (X > 0) or `argmax`.
    pub fn parse(s: &str) -> std::result::Result<Accuracy, ConfigParseError> {
        if s == "argmax" {
            return Ok(Accuracy::Argmax);
        }
        match s.strip_prefix("rel:").map(str::parse::<f64>) {
            Some(Ok(x)) if x > 0.0 && x.is_finite() => Ok(Accuracy::MaxRelError(x)),
            _ => Err(ConfigParseError::Accuracy(s.to_string())),
        }
    }

    /// Whether an error measured under this rule (`error_of`: a relative
    /// error, or the share of rows whose argmax changed) is within it.
    pub fn holds(&self, error: f64) -> bool {
        match *self {
            Accuracy::MaxRelError(bound) => error <= bound,
            Accuracy::Argmax => error == 0.0,
        }
    }
}

impl std::fmt::Display for Accuracy {
    /// As [`Accuracy::parse`] reads it: `rel:X` or `argmax`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Accuracy::MaxRelError(x) => write!(f, "rel:{x}"),
            Accuracy::Argmax => f.write_str("argmax"),
        }
    }
}

/// A strategy or accuracy named wrongly (command-line values).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigParseError {
    /// Not a strategy's name.
    #[error("unknown strategy '{0}' (known: {known})", known = Strategy::ALL.map(Strategy::name).join(", ") + ", cloud-only")]
    Strategy(String),
    /// Neither `rel:X` nor `argmax`.
    #[error("accuracy '{0}': rel:X (a relative error above 0) or argmax")]
    Accuracy(String),
}

impl SessionConfig {
    /// Defaults for a wearable with this profile: no dilation, the planner
    /// deciding with the fastest objective, pipelined streams.
    pub fn new(wearable: DeviceProfile, handheld_fallback: DeviceProfile) -> SessionConfig {
        SessionConfig {
            engine: crate::engine::EngineChoice::default(),
            wearable,
            handheld_fallback,
            dilation: 1.0,
            placement: Placement::Auto,
            hint: LatencyHint::Fastest,
            method: Method::MinCut,
            margin: 0.1,
            pipeline: true,
            max_in_flight: 8,
            deadline_factor: 4.0,
            deadline_floor: Duration::from_secs(2),
            max_missed_deadlines: 3,
            edge: None,
            link_silence: Duration::from_secs(10),
            keepalive: Duration::from_secs(20),
            ready_timeout: Duration::from_secs(60),
            require_handheld: None,
            backoff: Backoff { initial: Duration::from_millis(100), max: Duration::from_secs(2) },
            link_default: LinkEstimate {
                up_bytes_per_s: 1e6 / 8.0,
                down_bytes_per_s: 1e6 / 8.0,
                rtt: Duration::from_millis(30),
            },
            battery: None,
            energy_weights: EnergyWeighing::Levels,
            fuel_gauge: Some("/sys/class/power_supply".into()),
            energy_window: 10,
            dvfs: false,
            cpufreq: Some(crate::cpufreq::CPU_DIR.into()),
            chunk_bytes: 64 << 10,
            encodings: tandem_proto::encoding::Allowed::Lossless,
            accuracy: None,
            widenings: Default::default(),
            adapt: true,
            prepare_ahead: true,
        }
    }

    /// Takes the sensor types of `card`'s inputs (`sensor_type` u8 or i16,
    /// with a layout), so the link may carry those inputs in the sensor's
    /// own type; returns how many inputs it took.
    pub fn use_card(&mut self, card: &tandem_core::card::ModelCard) -> usize {
        let before = self.widenings.len();
        for input in &card.inputs {
            if let Some(w) = input.widening() {
                self.widenings.insert(input.name.clone(), w);
            }
        }
        self.widenings.len() - before
    }

    /// Shipped profiles: a Wear OS watch and a Pixel 8 Pro, for an app
    /// running on the watch itself (no dilation: the watch is slow already).
    pub fn watch_and_phone() -> Result<SessionConfig> {
        Ok(Self::new(DeviceProfile::shipped("watch-w5")?, DeviceProfile::shipped("pixel-8-pro")?))
    }

    /// [`SessionConfig::watch_and_phone`] for a watch emulated on a host
    /// (a laptop, CI): the host's compute is dilated by the watch profile's
    /// slowdown (8× for `watch-w5`), so that the "watch" is as much slower
    /// than the phone as a real one and offloading can pay off.
    pub fn emulated_watch_and_phone() -> Result<SessionConfig> {
        let mut c = Self::watch_and_phone()?;
        c.dilation = c.wearable.slowdown.max(1.0);
        Ok(c)
    }

    /// Makes [`Session::open`] fail unless a handheld is ready within `timeout`.
    pub fn require_handheld(mut self, timeout: Duration) -> SessionConfig {
        self.require_handheld = Some(timeout);
        self
    }
}
