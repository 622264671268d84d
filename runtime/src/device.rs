//! Device profiles: a device's CPU clusters with their frequency and voltage
//! ranges and power-model constants, its idle and radio power, and its
//! compute slowdown relative to the host that emulates it (SPEC.md 3.4-3.5).
//!
//! Profiles are TOML or JSON files ([`DeviceProfile::from_path`]); a few ship
//! inside the library ([`DeviceProfile::shipped`], from `profiles/*.toml`).
//! [`detect_host`] builds a profile for this machine from a sysfs tree, with
//! notes saying what was read and what was assumed.
//!
//! Power per cluster at frequency f (SPEC.md 3.4):
//! - analytical: `P_dyn(f) = C_eff · V(f)² · f`, with V(f) interpolated from
//!   the cluster's voltage range or table;
//! - approximate (the baseline): `P_dyn(f) ≈ ε · f³`.

use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// What can go wrong loading, checking or detecting a device profile.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeviceError {
    /// A profile file could not be read.
    #[error("cannot read device profile {path}: {error}")]
    Io {
        /// The file that was asked for.
        path: PathBuf,
        /// What the OS said.
        error: std::io::Error,
    },
    /// A profile's text is not valid TOML or JSON for a profile.
    #[error("bad device profile {origin}: {message}")]
    Parse {
        /// Where the text came from (a path, a shipped name, or `<string>`),
        /// with the line and column when known.
        origin: String,
        /// What the parser said.
        message: String,
    },
    /// A profile file whose extension is neither `.toml` nor `.json`.
    #[error("device profile {0}: unknown format; use a .toml or .json file")]
    UnknownFormat(PathBuf),
    /// A name that is neither a shipped profile nor a profile file.
    #[error("unknown device profile '{name}'; shipped profiles: {}; or give a .toml/.json file", known.join(", "))]
    UnknownProfile {
        /// The name given.
        name: String,
        /// The shipped profiles' names.
        known: Vec<String>,
    },
    /// A field holds a value the model cannot use.
    #[error("device profile '{profile}': {field}: {reason}")]
    Invalid {
        /// The profile's name.
        profile: String,
        /// The field, as a path such as `clusters[big].f_max_hz`.
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A cluster name the profile does not have.
    #[error("device profile '{profile}' has no cluster '{cluster}'; its clusters are: {}", known.join(", "))]
    UnknownCluster {
        /// The profile's name.
        profile: String,
        /// The name asked for.
        cluster: String,
        /// The profile's cluster names.
        known: Vec<String>,
    },
    /// A sysfs file that exists but does not hold what it should.
    #[error("malformed sysfs file {path}: {reason}")]
    Sysfs {
        /// The file.
        path: PathBuf,
        /// What is wrong with its content.
        reason: String,
    },
    /// A profile could not be written as TOML.
    #[error("cannot write device profile '{profile}' as TOML: {message}")]
    Serialize {
        /// The profile's name.
        profile: String,
        /// What the serializer said.
        message: String,
    },
}

/// What kind of device a profile describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceKind {
    /// A watch or other body-worn device: it runs the prefix.
    Wearable,
    /// A phone: it runs the suffix.
    Handheld,
    /// The machine this runs on, as detected.
    Host,
}

impl fmt::Display for DeviceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DeviceKind::Wearable => "wearable",
            DeviceKind::Handheld => "handheld",
            DeviceKind::Host => "host",
        })
    }
}

/// Which CPU power model prices compute (SPEC.md 3.4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PowerModel {
    /// `P_dyn = C_eff · V(f)² · f`: the cluster-aware CMOS model.
    #[default]
    Analytical,
    /// `P_dyn ≈ ε · f³` (V ∝ f): the baseline many frameworks use.
    Approximate,
}

impl PowerModel {
    /// Both models, analytical first.
    pub const ALL: [PowerModel; 2] = [PowerModel::Analytical, PowerModel::Approximate];
}

impl fmt::Display for PowerModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PowerModel::Analytical => "analytical",
            PowerModel::Approximate => "approximate",
        })
    }
}

/// A cluster's supply voltage as a function of its frequency.
#[derive(Clone, Debug, PartialEq)]
pub enum Voltage {
    /// `v_min` volts at `f_min_hz`, `v_max` volts at `f_max_hz`, linear in
    /// between and clamped outside.
    Range {
        /// Volts at the cluster's minimum frequency.
        v_min: f64,
        /// Volts at the cluster's maximum frequency.
        v_max: f64,
    },
    /// A measured V(f) table of `(f_hz, volts)` points with increasing
    /// frequencies, interpolated piecewise-linearly and clamped outside.
    Table(Vec<(f64, f64)>),
}

/// One CPU cluster: cores sharing a frequency and a voltage rail.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "ClusterFile", into = "ClusterFile")]
pub struct Cluster {
    /// The cluster's name (`LITTLE`, `big`, `prime`, `cpu`, ...).
    pub name: String,
    /// Number of cores.
    pub cores: u32,
    /// Linux CPU numbers of the cores, when known (detected hosts); empty
    /// otherwise.
    pub cpus: Vec<u32>,
    /// Lowest frequency, in Hz.
    pub f_min_hz: f64,
    /// Highest frequency, in Hz.
    pub f_max_hz: f64,
    /// Supply voltage V(f), in volts.
    pub voltage: Voltage,
    /// Effective switched capacitance of the cluster under full load, in
    /// farads (`C_eff` of `P_dyn = C_eff · V(f)² · f`).
    pub c_eff_farads: f64,
    /// Constant of the approximate model `P_dyn ≈ ε · f³`, in W/Hz³.
    pub epsilon: f64,
}

/// The on-disk shape of a [`Cluster`]: a flat table with either
/// `v_min`/`v_max` or `v_table`, and `epsilon` optional.
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClusterFile {
    name: String,
    cores: u32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    cpus: Vec<u32>,
    f_min_hz: f64,
    f_max_hz: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    v_min: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    v_max: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    v_table: Option<Vec<[f64; 2]>>,
    c_eff_farads: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    epsilon: Option<f64>,
}

impl TryFrom<ClusterFile> for Cluster {
    type Error = String;

    fn try_from(f: ClusterFile) -> Result<Self, String> {
        let voltage = match (f.v_min, f.v_max, f.v_table) {
            (Some(v_min), Some(v_max), None) => Voltage::Range { v_min, v_max },
            (None, None, Some(t)) => Voltage::Table(t.into_iter().map(|[f, v]| (f, v)).collect()),
            (None, None, None) => {
                return Err(format!("cluster '{}': give its voltage as v_min and v_max, or v_table", f.name))
            }
            (_, _, Some(_)) => {
                return Err(format!("cluster '{}': give either v_min/v_max or v_table, not both", f.name))
            }
            _ => return Err(format!("cluster '{}': give both v_min and v_max", f.name)),
        };
        let mut c = Cluster {
            name: f.name,
            cores: f.cores,
            cpus: f.cpus,
            f_min_hz: f.f_min_hz,
            f_max_hz: f.f_max_hz,
            voltage,
            c_eff_farads: f.c_eff_farads,
            epsilon: 0.0,
        };
        c.epsilon = f.epsilon.unwrap_or_else(|| c.epsilon_from_c_eff());
        Ok(c)
    }
}

impl From<Cluster> for ClusterFile {
    fn from(c: Cluster) -> Self {
        let (v_min, v_max, v_table) = match c.voltage {
            Voltage::Range { v_min, v_max } => (Some(v_min), Some(v_max), None),
            Voltage::Table(t) => (None, None, Some(t.into_iter().map(|(f, v)| [f, v]).collect())),
        };
        ClusterFile {
            name: c.name,
            cores: c.cores,
            cpus: c.cpus,
            f_min_hz: c.f_min_hz,
            f_max_hz: c.f_max_hz,
            v_min,
            v_max,
            v_table,
            c_eff_farads: c.c_eff_farads,
            epsilon: Some(c.epsilon),
        }
    }
}

impl Cluster {
    /// Supply voltage at `f_hz`, in volts: linear between (f_min, V_min) and
    /// (f_max, V_max), or piecewise-linear through the table; clamped to the
    /// end values outside.
    pub fn voltage_at(&self, f_hz: f64) -> f64 {
        match &self.voltage {
            Voltage::Range { v_min, v_max } => {
                interpolate(&[(self.f_min_hz, *v_min), (self.f_max_hz, *v_max)], f_hz)
            }
            Voltage::Table(points) => interpolate(points, f_hz),
        }
    }

    /// The lowest and highest voltage over `[f_min_hz, f_max_hz]`, in volts.
    pub fn voltage_range(&self) -> (f64, f64) {
        (self.voltage_at(self.f_min_hz), self.voltage_at(self.f_max_hz))
    }

    /// Analytical dynamic power at `f_hz`, in watts: `C_eff · V(f)² · f`.
    pub fn dynamic_power_w(&self, f_hz: f64) -> f64 {
        let v = self.voltage_at(f_hz);
        self.c_eff_farads * v * v * f_hz
    }

    /// Approximate dynamic power at `f_hz`, in watts: `ε · f³`.
    pub fn approx_power_w(&self, f_hz: f64) -> f64 {
        self.epsilon * f_hz * f_hz * f_hz
    }

    /// Dynamic power at `f_hz` under `model`, in watts.
    pub fn power_w(&self, f_hz: f64, model: PowerModel) -> f64 {
        match model {
            PowerModel::Analytical => self.dynamic_power_w(f_hz),
            PowerModel::Approximate => self.approx_power_w(f_hz),
        }
    }

    /// Energy of a workload of `cycles` CPU cycles at `f_hz`, in joules:
    /// `C_eff · V(f)² · W` (analytical) or `ε · f² · W` (approximate).
    pub fn energy_for_cycles_j(&self, f_hz: f64, cycles: f64, model: PowerModel) -> f64 {
        match model {
            PowerModel::Analytical => {
                let v = self.voltage_at(f_hz);
                self.c_eff_farads * v * v * cycles
            }
            PowerModel::Approximate => self.epsilon * f_hz * f_hz * cycles,
        }
    }

    /// The ε that calibration at f_min and f_max would fit if the analytical
    /// model were the truth, in W/Hz³: the mean over f ∈ {f_min, f_max} of
    /// `C_eff · V(f)² / f²`.
    pub fn epsilon_from_c_eff(&self) -> f64 {
        let at = |f: f64| {
            let v = self.voltage_at(f);
            self.c_eff_farads * v * v / (f * f)
        };
        (at(self.f_min_hz) + at(self.f_max_hz)) / 2.0
    }
}

/// Piecewise-linear interpolation through `points` (sorted by x), clamped to
/// the end values outside; a single point is a constant.
fn interpolate(points: &[(f64, f64)], x: f64) -> f64 {
    let (Some(&(x0, y0)), Some(&(xn, yn))) = (points.first(), points.last()) else {
        return f64::NAN;
    };
    if x <= x0 {
        return y0;
    }
    if x >= xn {
        return yn;
    }
    for w in points.windows(2) {
        let ((xa, ya), (xb, yb)) = (w[0], w[1]);
        if x <= xb {
            if xb <= xa {
                return yb;
            }
            return ya + (yb - ya) * (x - xa) / (xb - xa);
        }
    }
    yn
}

/// Which cluster runs inference by default, and at what frequency.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InferenceSetting {
    /// The cluster's name.
    pub cluster: String,
    /// Its frequency while running inference, in Hz.
    pub f_hz: f64,
}

/// Radio power while the link carries tensors (SPEC.md 3.5).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Radio {
    /// Transmit power P_T, in watts.
    pub tx_w: f64,
    /// Receive power P_R, in watts.
    pub rx_w: f64,
}

/// Nominal battery data, for reports (energy as a share of a charge).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatteryInfo {
    /// Design capacity, in mAh.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_mah: Option<f64>,
    /// Nominal voltage, in volts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nominal_voltage_v: Option<f64>,
}

impl BatteryInfo {
    /// Energy of a full charge, in joules, when both values are known.
    pub fn energy_j(&self) -> Option<f64> {
        Some(self.capacity_mah? * 3.6 * self.nominal_voltage_v?)
    }
}

/// A device: its clusters, default inference setting, idle and radio power,
/// and emulation slowdown.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceProfile {
    /// Short identifier (`pixel-8-pro`).
    pub name: String,
    /// Wearable, handheld or host.
    pub kind: DeviceKind,
    /// Free text: model, SoC, where the numbers come from.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Device compute time / host compute time for the same work (2.0: the
    /// device is twice as slow as the machine emulating it).
    pub slowdown: f64,
    /// Whole-device power while idle (screen and radios off), in watts.
    pub idle_power_w: f64,
    /// Whether compute energy adds `idle_power_w × busy time` to the
    /// cluster's dynamic power (off: dynamic energy only, as in SPEC.md 3.4).
    #[serde(default)]
    pub energy_includes_idle: bool,
    /// Default cluster and frequency for inference.
    pub inference: InferenceSetting,
    /// Radio transmit and receive power.
    pub radio: Radio,
    /// Nominal battery data, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub battery: Option<BatteryInfo>,
    /// CPU clusters, usually from the most efficient to the fastest.
    pub clusters: Vec<Cluster>,
}

/// The profiles shipped in `profiles/`, embedded at build time.
const SHIPPED: &[(&str, &str)] = &[
    ("pixel-8-pro", include_str!("../../profiles/pixel-8-pro.toml")),
    ("samsung-a16", include_str!("../../profiles/samsung-a16.toml")),
    ("nexus-6", include_str!("../../profiles/nexus-6.toml")),
    ("watch-sd400", include_str!("../../profiles/watch-sd400.toml")),
    ("watch-w5", include_str!("../../profiles/watch-w5.toml")),
];

impl DeviceProfile {
    /// Parses and validates a TOML profile.
    pub fn from_toml_str(text: &str) -> Result<DeviceProfile, DeviceError> {
        Self::parse_toml(text, "<string>")
    }

    /// Parses and validates a JSON profile.
    pub fn from_json_str(text: &str) -> Result<DeviceProfile, DeviceError> {
        Self::parse_json(text, "<string>")
    }

    /// Reads, parses and validates a profile file, TOML or JSON by extension.
    pub fn from_path(path: &Path) -> Result<DeviceProfile, DeviceError> {
        let ext = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
        let parse: fn(&str, &str) -> Result<DeviceProfile, DeviceError> = match ext.as_deref() {
            Some("toml") => Self::parse_toml,
            Some("json") => Self::parse_json,
            _ => return Err(DeviceError::UnknownFormat(path.to_path_buf())),
        };
        let text = std::fs::read_to_string(path)
            .map_err(|error| DeviceError::Io { path: path.to_path_buf(), error })?;
        parse(&text, &path.display().to_string())
    }

    /// A shipped profile by name (see [`DeviceProfile::shipped_names`]).
    pub fn shipped(name: &str) -> Result<DeviceProfile, DeviceError> {
        let (_, text) =
            SHIPPED.iter().find(|(n, _)| *n == name).ok_or_else(|| DeviceError::UnknownProfile {
                name: name.to_string(),
                known: Self::shipped_names().iter().map(|s| s.to_string()).collect(),
            })?;
        Self::parse_toml(text, &format!("profiles/{name}.toml"))
    }

    /// The names of the shipped profiles.
    pub fn shipped_names() -> Vec<&'static str> {
        SHIPPED.iter().map(|(n, _)| *n).collect()
    }

    /// A shipped profile if `name_or_path` names one, else the profile file at
    /// that path.
    pub fn load(name_or_path: &str) -> Result<DeviceProfile, DeviceError> {
        if SHIPPED.iter().any(|(n, _)| *n == name_or_path) {
            return Self::shipped(name_or_path);
        }
        let path = Path::new(name_or_path);
        if path.extension().is_some() || path.exists() {
            return Self::from_path(path);
        }
        Self::shipped(name_or_path)
    }

    /// The profile as TOML, with very small and very large floats written in
    /// exponent form (`1.19e-9`, not `0.00000000119`).
    pub fn to_toml_string(&self) -> Result<String, DeviceError> {
        let text = toml::to_string(self)
            .map_err(|e| DeviceError::Serialize { profile: self.name.clone(), message: e.to_string() })?;
        Ok(text.lines().map(|l| exponent_floats(l) + "\n").collect())
    }

    fn parse_toml(text: &str, origin: &str) -> Result<DeviceProfile, DeviceError> {
        let profile: DeviceProfile = toml::from_str(text).map_err(|e| {
            let at = e.span().map(|s| line_col(text, s.start)).unwrap_or_default();
            DeviceError::Parse { origin: format!("{origin}{at}"), message: e.message().trim().to_string() }
        })?;
        profile.validate()?;
        Ok(profile)
    }

    fn parse_json(text: &str, origin: &str) -> Result<DeviceProfile, DeviceError> {
        let profile: DeviceProfile = serde_json::from_str(text).map_err(|e| DeviceError::Parse {
            origin: format!("{origin}:{}:{}", e.line(), e.column()),
            message: e.to_string(),
        })?;
        profile.validate()?;
        Ok(profile)
    }

    /// Checks every value the models use; the error names the field.
    pub fn validate(&self) -> Result<(), DeviceError> {
        let bad = |field: String, reason: String| DeviceError::Invalid {
            profile: self.name.clone(),
            field,
            reason,
        };
        if self.name.trim().is_empty() {
            return Err(bad("name".into(), "must not be empty".into()));
        }
        positive(self.slowdown).map_err(|r| bad("slowdown".into(), r))?;
        non_negative(self.idle_power_w).map_err(|r| bad("idle_power_w".into(), r))?;
        non_negative(self.radio.tx_w).map_err(|r| bad("radio.tx_w".into(), r))?;
        non_negative(self.radio.rx_w).map_err(|r| bad("radio.rx_w".into(), r))?;
        if let Some(b) = &self.battery {
            if let Some(c) = b.capacity_mah {
                positive(c).map_err(|r| bad("battery.capacity_mah".into(), r))?;
            }
            if let Some(v) = b.nominal_voltage_v {
                positive(v).map_err(|r| bad("battery.nominal_voltage_v".into(), r))?;
            }
        }
        if self.clusters.is_empty() {
            return Err(bad("clusters".into(), "at least one cluster is needed".into()));
        }
        let mut names = HashSet::new();
        for c in &self.clusters {
            let field = |f: &str| format!("clusters[{}].{f}", c.name);
            if c.name.trim().is_empty() {
                return Err(bad("clusters[].name".into(), "must not be empty".into()));
            }
            if !names.insert(c.name.as_str()) {
                return Err(bad(field("name"), "two clusters have this name".into()));
            }
            if c.cores == 0 {
                return Err(bad(field("cores"), "must be at least 1".into()));
            }
            if !c.cpus.is_empty() && c.cpus.len() != c.cores as usize {
                return Err(bad(
                    field("cpus"),
                    format!("lists {} CPUs but cores is {}", c.cpus.len(), c.cores),
                ));
            }
            positive(c.f_min_hz).map_err(|r| bad(field("f_min_hz"), r))?;
            positive(c.f_max_hz).map_err(|r| bad(field("f_max_hz"), r))?;
            if c.f_max_hz < c.f_min_hz {
                return Err(bad(
                    field("f_max_hz"),
                    format!("{} Hz is below f_min_hz = {} Hz", c.f_max_hz, c.f_min_hz),
                ));
            }
            match &c.voltage {
                Voltage::Range { v_min, v_max } => {
                    positive(*v_min).map_err(|r| bad(field("v_min"), r))?;
                    positive(*v_max).map_err(|r| bad(field("v_max"), r))?;
                    if v_max < v_min {
                        return Err(bad(field("v_max"), format!("{v_max} V is below v_min = {v_min} V")));
                    }
                }
                Voltage::Table(points) => {
                    if points.is_empty() {
                        return Err(bad(field("v_table"), "needs at least one [f_hz, volts] point".into()));
                    }
                    for (i, &(f, v)) in points.iter().enumerate() {
                        positive(f).map_err(|r| bad(format!("{}[{i}] frequency", field("v_table")), r))?;
                        positive(v).map_err(|r| bad(format!("{}[{i}] voltage", field("v_table")), r))?;
                    }
                    if let Some(i) = points.windows(2).position(|w| w[1].0 <= w[0].0) {
                        return Err(bad(
                            field("v_table"),
                            format!("frequencies must increase (point {} is not above point {i})", i + 1),
                        ));
                    }
                }
            }
            positive(c.c_eff_farads).map_err(|r| bad(field("c_eff_farads"), r))?;
            positive(c.epsilon).map_err(|r| bad(field("epsilon"), r))?;
        }
        let inf = &self.inference;
        let Some(c) = self.clusters.iter().find(|c| c.name == inf.cluster) else {
            return Err(bad(
                "inference.cluster".into(),
                format!(
                    "no cluster '{}' (clusters: {})",
                    inf.cluster,
                    self.clusters.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", ")
                ),
            ));
        };
        positive(inf.f_hz).map_err(|r| bad("inference.f_hz".into(), r))?;
        // A relative slack so that values rounded in a file still pass.
        let slack = 1e-6 * c.f_max_hz;
        if inf.f_hz < c.f_min_hz - slack || inf.f_hz > c.f_max_hz + slack {
            return Err(bad(
                "inference.f_hz".into(),
                format!(
                    "{} Hz is outside cluster '{}' range {}..{} Hz",
                    inf.f_hz, c.name, c.f_min_hz, c.f_max_hz
                ),
            ));
        }
        Ok(())
    }

    /// The cluster called `name`.
    pub fn cluster(&self, name: &str) -> Result<&Cluster, DeviceError> {
        self.clusters.iter().find(|c| c.name == name).ok_or_else(|| DeviceError::UnknownCluster {
            profile: self.name.clone(),
            cluster: name.to_string(),
            known: self.clusters.iter().map(|c| c.name.clone()).collect(),
        })
    }

    /// The cluster that runs inference by default.
    pub fn inference_cluster(&self) -> Result<&Cluster, DeviceError> {
        self.cluster(&self.inference.cluster)
    }

    /// Supply voltage of cluster `cluster` at `f_hz`, in volts.
    pub fn voltage_at(&self, cluster: &str, f_hz: f64) -> Result<f64, DeviceError> {
        Ok(self.cluster(cluster)?.voltage_at(f_hz))
    }

    /// Analytical dynamic power `C_eff · V(f)² · f` of `cluster` at `f_hz`, in watts.
    pub fn dynamic_power_w(&self, cluster: &str, f_hz: f64) -> Result<f64, DeviceError> {
        Ok(self.cluster(cluster)?.dynamic_power_w(f_hz))
    }

    /// Approximate dynamic power `ε · f³` of `cluster` at `f_hz`, in watts.
    pub fn approx_power_w(&self, cluster: &str, f_hz: f64) -> Result<f64, DeviceError> {
        Ok(self.cluster(cluster)?.approx_power_w(f_hz))
    }

    /// Dynamic power of the default inference cluster at its inference
    /// frequency under `model`, in watts (idle power not included).
    pub fn inference_power_w(&self, model: PowerModel) -> Result<f64, DeviceError> {
        Ok(self.inference_cluster()?.power_w(self.inference.f_hz, model))
    }

    /// A human-readable table: clusters (f and V ranges, C_eff, ε, P_dyn at
    /// f_min and f_max under both models), inference setting, idle and radio
    /// power, slowdown, battery.
    pub fn summary(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        // Writing to a String cannot fail.
        let _ = writeln!(s, "{} ({})", self.name, self.kind);
        if !self.description.is_empty() {
            let _ = writeln!(s, "  {}", self.description);
        }
        let _ = writeln!(
            s,
            "{:<8} {:>5} {:>15} {:>13} {:>10} {:>10} {:>19} {:>19}",
            "cluster",
            "cores",
            "f GHz",
            "V volts",
            "C_eff F",
            "eps W/Hz3",
            "P@f_min W an/apx",
            "P@f_max W an/apx"
        );
        for c in &self.clusters {
            let (v_lo, v_hi) = c.voltage_range();
            let p = |f: f64| format!("{:.3}/{:.3}", c.dynamic_power_w(f), c.approx_power_w(f));
            let _ = writeln!(
                s,
                "{:<8} {:>5} {:>15} {:>13} {:>10.4e} {:>10.4e} {:>19} {:>19}",
                c.name,
                c.cores,
                format!("{:.3}-{:.3}", c.f_min_hz / 1e9, c.f_max_hz / 1e9),
                format!("{v_lo:.3}-{v_hi:.3}"),
                c.c_eff_farads,
                c.epsilon,
                p(c.f_min_hz),
                p(c.f_max_hz),
            );
        }
        let inf = &self.inference;
        let pw = |m| self.inference_power_w(m).map(|p| format!("{p:.3} W")).unwrap_or_else(|e| e.to_string());
        let _ = writeln!(
            s,
            "inference: {} @ {:.3} GHz: {} analytical, {} approximate",
            inf.cluster,
            inf.f_hz / 1e9,
            pw(PowerModel::Analytical),
            pw(PowerModel::Approximate)
        );
        let _ = writeln!(
            s,
            "idle: {:.3} W ({} in compute energy)",
            self.idle_power_w,
            if self.energy_includes_idle { "included" } else { "not included" }
        );
        let _ = writeln!(s, "radio: P_T {:.3} W, P_R {:.3} W", self.radio.tx_w, self.radio.rx_w);
        let _ = writeln!(s, "slowdown: {}x host compute time", self.slowdown);
        if let Some(b) = &self.battery {
            let opt = |v: Option<f64>, unit: &str| v.map(|v| format!("{v} {unit}")).unwrap_or("?".into());
            let _ = writeln!(
                s,
                "battery: {}, {}",
                opt(b.capacity_mah, "mAh"),
                opt(b.nominal_voltage_v, "V nominal")
            );
        }
        s
    }
}

fn positive(v: f64) -> Result<(), String> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(format!("must be a positive finite number, got {v}"))
    }
}

fn non_negative(v: f64) -> Result<(), String> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(format!("must be a finite number >= 0, got {v}"))
    }
}

/// Rewrites the floats of one `key = value` TOML line whose value is a number
/// or an array of numbers in exponent form when they are below 1e-3 or at
/// least 1e6; other lines (strings, tables) are returned unchanged.
fn exponent_floats(line: &str) -> String {
    let Some((key, value)) = line.split_once(" = ") else { return line.to_string() };
    if !value.starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '[') {
        return line.to_string();
    }
    let mut out = String::with_capacity(line.len());
    let mut token = String::new();
    let flush = |token: &mut String, out: &mut String| {
        match token.parse::<f64>() {
            Ok(v) if token.contains('.') && v != 0.0 && !(1e-3..1e6).contains(&v.abs()) => {
                out.push_str(&format!("{v:e}"))
            }
            _ => out.push_str(token),
        }
        token.clear();
    };
    for c in value.chars() {
        if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+') {
            token.push(c);
        } else {
            flush(&mut token, &mut out);
            out.push(c);
        }
    }
    flush(&mut token, &mut out);
    format!("{key} = {out}")
}

/// `:line:col` (1-based) of byte `offset` in `text`.
fn line_col(text: &str, offset: usize) -> String {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    format!(":{line}:{col}")
}

// ---------------------------------------------------------------------------
// Host detection.

/// Assumed supply voltage at a detected cluster's f_min, in volts: sysfs
/// cpufreq does not publish voltages; a typical low DVFS point.
const HOST_V_MIN: f64 = 0.6;
/// Assumed supply voltage at a detected cluster's f_max, in volts.
const HOST_V_MAX: f64 = 1.1;
/// Assumed dynamic power of one fully loaded core at f_max, in watts: between
/// a phone big core (~1 W) and a desktop core (~5 W). C_eff follows from it.
const HOST_CORE_POWER_W: f64 = 2.0;
/// Assumed frequency range without cpufreq and /proc/cpuinfo, in Hz.
const HOST_F_MIN_HZ: f64 = 8.0e8;
/// Assumed f_max without cpufreq and /proc/cpuinfo, in Hz.
const HOST_F_MAX_HZ: f64 = 3.0e9;
/// Assumed idle power of the host, in watts (not measurable from sysfs).
const HOST_IDLE_W: f64 = 0.1;
/// Assumed radio power of the host, in watts: a BLE-class radio (tens of mW).
const HOST_TX_W: f64 = 0.05;
/// Assumed receive power of the host, in watts.
const HOST_RX_W: f64 = 0.04;

/// What [`detect_host`] found.
#[derive(Clone, Debug)]
pub struct HostDetection {
    /// The profile, of kind [`DeviceKind::Host`], with slowdown 1.
    pub profile: DeviceProfile,
    /// What was read, and every value that was defaulted or assumed.
    pub notes: Vec<String>,
    /// The first battery found under `sys/class/power_supply`, if any.
    pub battery: Option<BatteryStatus>,
}

/// A battery's state as the kernel's fuel gauge reports it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BatteryStatus {
    /// The power-supply directory's name (`battery`, `BAT0`).
    pub supply: String,
    /// State of charge, in percent.
    pub capacity_pct: Option<f64>,
    /// `Charging`, `Discharging`, `Full`, ...
    pub status: Option<String>,
    /// Battery voltage, in volts (`voltage_now` is in µV).
    pub voltage_v: Option<f64>,
    /// Battery current, in amperes (`current_now` is in µA; its sign
    /// convention differs between drivers).
    pub current_a: Option<f64>,
}

impl BatteryStatus {
    /// Battery power `V · |I|`, in watts, when both are known.
    pub fn power_w(&self) -> Option<f64> {
        Some(self.voltage_v? * self.current_a?.abs())
    }
}

/// Parses a Linux CPU list such as `0-3`, `4,5` or `0-3,7`; `None` when
/// malformed or empty.
pub fn parse_cpu_list(text: &str) -> Option<Vec<u32>> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                if b < a || b - a > 4096 {
                    return None;
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().ok()?),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    (!cpus.is_empty()).then_some(cpus)
}

/// One cpufreq policy as read from sysfs.
struct Policy {
    cpus: Vec<u32>,
    f_min_hz: f64,
    f_max_hz: f64,
}

/// Builds a host profile from the sysfs tree under `root` (`/` on a live
/// system): clusters from `sys/devices/system/cpu/cpufreq/policy*`, or one
/// cluster from `sys/devices/system/cpu/present` when cpufreq is missing,
/// and battery data from `sys/class/power_supply`.
///
/// Voltages, C_eff, idle and radio power cannot be read from sysfs; they get
/// assumed defaults, each named in the notes. Malformed cpufreq or CPU-list
/// files are errors naming the file; malformed battery files are skipped with
/// a note.
pub fn detect_host(root: &Path) -> Result<HostDetection, DeviceError> {
    let mut notes = Vec::new();
    let cpu_dir = root.join("sys/devices/system/cpu");
    let policies = read_policies(&cpu_dir.join("cpufreq"), &mut notes)?;
    let clusters = if policies.is_empty() {
        vec![fallback_cluster(root, &cpu_dir, &mut notes)?]
    } else {
        clusters_from_policies(policies, &mut notes)
    };
    notes.push(format!(
        "assumed: V(f) from {HOST_V_MIN} V at f_min to {HOST_V_MAX} V at f_max (sysfs has no voltages)"
    ));
    notes.push(format!(
        "assumed: C_eff = cores x {HOST_CORE_POWER_W} W / (V_max^2 f_max) (a fully loaded core draws \
         {HOST_CORE_POWER_W} W at f_max); epsilon derived from C_eff as calibration would"
    ));
    // The fastest cluster runs inference, at its top frequency.
    let fastest = clusters
        .iter()
        .max_by(|a, b| a.f_max_hz.total_cmp(&b.f_max_hz))
        .map(|c| (c.name.clone(), c.f_max_hz))
        .unwrap_or_else(|| ("cpu".into(), HOST_F_MAX_HZ));
    notes.push(format!("inference on cluster '{}' at f_max = {} Hz", fastest.0, fastest.1));
    notes.push(format!(
        "assumed: idle power {HOST_IDLE_W} W, radio P_T {HOST_TX_W} W / P_R {HOST_RX_W} W (BLE-class)"
    ));
    let (battery, battery_info) = read_battery(&root.join("sys/class/power_supply"), &mut notes);
    let profile = DeviceProfile {
        name: "host".into(),
        kind: DeviceKind::Host,
        description: format!("detected from {}", root.display()),
        slowdown: 1.0,
        idle_power_w: HOST_IDLE_W,
        energy_includes_idle: false,
        inference: InferenceSetting { cluster: fastest.0, f_hz: fastest.1 },
        radio: Radio { tx_w: HOST_TX_W, rx_w: HOST_RX_W },
        battery: battery_info,
        clusters,
    };
    profile.validate()?;
    Ok(HostDetection { profile, notes, battery })
}

/// The text of a sysfs file, trimmed; `None` when it does not exist.
fn read_sysfs(path: &Path) -> Result<Option<String>, DeviceError> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(s.trim().to_string())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(DeviceError::Sysfs { path: path.to_path_buf(), reason: e.to_string() }),
    }
}

/// A frequency file in kHz, as Hz.
fn read_khz(path: &Path) -> Result<Option<f64>, DeviceError> {
    let Some(text) = read_sysfs(path)? else { return Ok(None) };
    match text.parse::<u64>() {
        Ok(k) if k > 0 => Ok(Some(k as f64 * 1e3)),
        _ => Err(DeviceError::Sysfs {
            path: path.to_path_buf(),
            reason: format!("expected a positive frequency in kHz, got '{text}'"),
        }),
    }
}

fn read_policies(dir: &Path, notes: &mut Vec<String>) -> Result<Vec<Policy>, DeviceError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(_) => {
            notes.push(format!("no cpufreq directory {}", dir.display()));
            return Ok(Vec::new());
        }
    };
    let mut dirs: Vec<(u32, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let n = e.file_name().to_str()?.strip_prefix("policy")?.parse().ok()?;
            Some((n, e.path()))
        })
        .collect();
    dirs.sort();
    if dirs.is_empty() {
        notes.push(format!("no cpufreq policies in {}", dir.display()));
    }
    let mut policies = Vec::new();
    for (_, p) in dirs {
        let related = match read_sysfs(&p.join("related_cpus"))? {
            Some(t) => Some((t, p.join("related_cpus"))),
            None => read_sysfs(&p.join("affected_cpus"))?.map(|t| (t, p.join("affected_cpus"))),
        };
        let Some((text, file)) = related else {
            notes.push(format!("skipped {}: no related_cpus", p.display()));
            continue;
        };
        let cpus = parse_cpu_list(&text).ok_or_else(|| DeviceError::Sysfs {
            path: file.clone(),
            reason: format!("expected a CPU list such as 0-3 or 4,5, got '{text}'"),
        })?;
        let (min_file, max_file) = (p.join("cpuinfo_min_freq"), p.join("cpuinfo_max_freq"));
        let (Some(f_min_hz), Some(f_max_hz)) = (read_khz(&min_file)?, read_khz(&max_file)?) else {
            notes.push(format!("skipped {}: no cpuinfo_min_freq/cpuinfo_max_freq", p.display()));
            continue;
        };
        if f_max_hz < f_min_hz {
            return Err(DeviceError::Sysfs {
                path: max_file,
                reason: format!("{} kHz is below cpuinfo_min_freq {} kHz", f_max_hz / 1e3, f_min_hz / 1e3),
            });
        }
        let avail = p.join("scaling_available_frequencies");
        if let Some(text) = read_sysfs(&avail)? {
            let n = text.split_whitespace().filter(|t| t.parse::<u64>().is_ok()).count();
            notes.push(format!("{}: {} available frequencies", avail.display(), n));
        }
        notes.push(format!("{}: CPUs {text}, {:.3}-{:.3} GHz", p.display(), f_min_hz / 1e9, f_max_hz / 1e9));
        policies.push(Policy { cpus, f_min_hz, f_max_hz });
    }
    Ok(policies)
}

/// One cluster per distinct frequency range (x86 has one policy per CPU, all
/// alike), named by ascending f_max.
fn clusters_from_policies(policies: Vec<Policy>, notes: &mut Vec<String>) -> Vec<Cluster> {
    let n_policies = policies.len();
    let mut merged: Vec<Policy> = Vec::new();
    for p in policies {
        match merged.iter_mut().find(|m| m.f_min_hz == p.f_min_hz && m.f_max_hz == p.f_max_hz) {
            Some(m) => m.cpus.extend(p.cpus),
            None => merged.push(p),
        }
    }
    if merged.len() < n_policies {
        notes.push(format!(
            "merged {n_policies} cpufreq policies with equal frequency ranges into {} clusters",
            merged.len()
        ));
    }
    merged.sort_by(|a, b| a.f_max_hz.total_cmp(&b.f_max_hz).then(a.cpus.cmp(&b.cpus)));
    let names: Vec<String> = match merged.len() {
        1 => vec!["cpu".into()],
        2 => vec!["little".into(), "big".into()],
        3 => vec!["little".into(), "big".into(), "prime".into()],
        4 => vec!["little".into(), "mid".into(), "big".into(), "prime".into()],
        n => (0..n).map(|i| format!("cluster{i}")).collect(),
    };
    merged
        .into_iter()
        .zip(names)
        .map(|(mut p, name)| {
            p.cpus.sort_unstable();
            p.cpus.dedup();
            assumed_cluster(name, p.cpus, p.f_min_hz, p.f_max_hz)
        })
        .collect()
}

/// A cluster with the assumed voltages, and C_eff such that each fully
/// loaded core draws [`HOST_CORE_POWER_W`] at f_max.
fn assumed_cluster(name: String, cpus: Vec<u32>, f_min_hz: f64, f_max_hz: f64) -> Cluster {
    let cores = u32::try_from(cpus.len()).unwrap_or(u32::MAX);
    let mut c = Cluster {
        name,
        cores,
        cpus,
        f_min_hz,
        f_max_hz,
        voltage: Voltage::Range { v_min: HOST_V_MIN, v_max: HOST_V_MAX },
        c_eff_farads: f64::from(cores) * HOST_CORE_POWER_W / (HOST_V_MAX * HOST_V_MAX * f_max_hz),
        epsilon: 0.0,
    };
    c.epsilon = c.epsilon_from_c_eff();
    c
}

/// The single cluster of a machine without cpufreq.
fn fallback_cluster(root: &Path, cpu_dir: &Path, notes: &mut Vec<String>) -> Result<Cluster, DeviceError> {
    let mut cpus = None;
    for file in ["present", "online"] {
        let path = cpu_dir.join(file);
        if let Some(text) = read_sysfs(&path)? {
            let list = parse_cpu_list(&text).ok_or_else(|| DeviceError::Sysfs {
                path: path.clone(),
                reason: format!("expected a CPU list such as 0-3 or 4,5, got '{text}'"),
            })?;
            notes.push(format!("{}: CPUs {text}", path.display()));
            cpus = Some(list);
            break;
        }
    }
    let cpus = match cpus {
        Some(c) => c,
        None => {
            let mut found: Vec<u32> = std::fs::read_dir(cpu_dir)
                .map(|entries| {
                    entries
                        .filter_map(|e| e.ok())
                        .filter_map(|e| e.file_name().to_str()?.strip_prefix("cpu")?.parse().ok())
                        .collect()
                })
                .unwrap_or_default();
            found.sort_unstable();
            if found.is_empty() {
                notes.push(format!("no CPU list under {}; assumed 1 core", cpu_dir.display()));
                vec![0]
            } else {
                notes.push(format!("counted {} cpuN directories in {}", found.len(), cpu_dir.display()));
                found
            }
        }
    };
    let cpuinfo = root.join("proc/cpuinfo");
    let mhz = std::fs::read_to_string(&cpuinfo).ok().and_then(|text| {
        text.lines()
            .filter(|l| l.starts_with("cpu MHz"))
            .filter_map(|l| l.split_once(':')?.1.trim().parse::<f64>().ok())
            .filter(|m| m.is_finite() && *m > 0.0)
            .reduce(f64::max)
    });
    let f_max_hz = match mhz {
        Some(m) => {
            notes.push(format!("f_max {} Hz from 'cpu MHz' in {}", m * 1e6, cpuinfo.display()));
            m * 1e6
        }
        None => {
            notes.push(format!("assumed: f_max {HOST_F_MAX_HZ} Hz (no cpufreq, no cpu MHz)"));
            HOST_F_MAX_HZ
        }
    };
    let f_min_hz = HOST_F_MIN_HZ.min(f_max_hz);
    notes.push(format!("assumed: f_min {f_min_hz} Hz (no cpufreq)"));
    Ok(assumed_cluster("cpu".into(), cpus, f_min_hz, f_max_hz))
}

/// The first battery under `root/sys/class/power_supply`, if any (`root`
/// is `/` on a real device).
pub fn battery_status(root: &Path) -> Option<BatteryStatus> {
    read_battery(&root.join("sys/class/power_supply"), &mut vec![]).0
}

/// The first `Battery` supply: its live status and, from design values, the
/// profile's battery info.
fn read_battery(dir: &Path, notes: &mut Vec<String>) -> (Option<BatteryStatus>, Option<BatteryInfo>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        notes.push(format!("no {}: no battery", dir.display()));
        return (None, None);
    };
    let mut supplies: Vec<PathBuf> = entries.filter_map(|e| e.ok()).map(|e| e.path()).collect();
    supplies.sort();
    for s in supplies {
        let is_battery = std::fs::read_to_string(s.join("type")).is_ok_and(|t| t.trim() == "Battery");
        if !is_battery {
            continue;
        }
        let number = |file: &str, notes: &mut Vec<String>| -> Option<f64> {
            let path = s.join(file);
            let text = std::fs::read_to_string(&path).ok()?;
            match text.trim().parse::<f64>() {
                Ok(v) if v.is_finite() => Some(v),
                _ => {
                    notes.push(format!("ignored malformed {}: '{}'", path.display(), text.trim()));
                    None
                }
            }
        };
        let status = BatteryStatus {
            supply: s.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
            capacity_pct: number("capacity", notes),
            status: std::fs::read_to_string(s.join("status")).ok().map(|t| t.trim().to_string()),
            voltage_v: number("voltage_now", notes).map(|uv| uv / 1e6),
            current_a: number("current_now", notes).map(|ua| ua / 1e6),
        };
        notes.push(format!(
            "battery {}: {}% {}, {} V, {} A",
            s.display(),
            status.capacity_pct.map_or("?".into(), |v| v.to_string()),
            status.status.as_deref().unwrap_or("?"),
            status.voltage_v.map_or("?".into(), |v| format!("{v:.3}")),
            status.current_a.map_or("?".into(), |v| format!("{v:.3}")),
        ));
        // sysfs has no nominal voltage (only min/max design values).
        let capacity_mah = number("charge_full_design", notes).filter(|v| *v > 0.0).map(|uah| uah / 1e3);
        let info = capacity_mah.map(|c| BatteryInfo { capacity_mah: Some(c), nominal_voltage_v: None });
        return (Some(status), info);
    }
    notes.push(format!("no Battery supply in {}", dir.display()));
    (None, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sysfs").join(name)
    }

    const MINIMAL: &str = r#"
name = "toy"
kind = "wearable"
slowdown = 2.0
idle_power_w = 0.01

[inference]
cluster = "cpu"
f_hz = 1.0e9

[radio]
tx_w = 0.05
rx_w = 0.04

[[clusters]]
name = "cpu"
cores = 4
f_min_hz = 5.0e8
f_max_hz = 1.5e9
v_min = 0.8
v_max = 1.2
c_eff_farads = 1.0e-9
epsilon = 1.0e-27
"#;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1e-300)
    }

    #[test]
    fn minimal_profile_loads_and_interpolates() {
        let p = DeviceProfile::from_toml_str(MINIMAL).expect("should succeed");
        let c = p.cluster("cpu").expect("should succeed");
        // The midpoint of 0.5-1.5 GHz is halfway between 0.8 V and 1.2 V.
        assert!(close(c.voltage_at(1.0e9), 1.0));
        assert!(close(c.voltage_at(1.0e8), 0.8), "clamped below");
        assert!(close(c.voltage_at(9.0e9), 1.2), "clamped above");
        // C_eff 1e-9 F, V 1.0 V, f 1e9 Hz: 1 W.
        assert!(close(p.dynamic_power_w("cpu", 1.0e9).expect("should succeed"), 1.0));
        assert!(close(p.inference_power_w(PowerModel::Analytical).expect("should succeed"), 1.0));
        // ε 1e-27 W/Hz³ at 1e9 Hz: 1 W.
        assert!(close(p.approx_power_w("cpu", 1.0e9).expect("should succeed"), 1.0));
        // 1e9 cycles at 1 GHz: C·V²·W = 1 J; ε·f²·W = 1 J.
        assert!(close(c.energy_for_cycles_j(1.0e9, 1.0e9, PowerModel::Analytical), 1.0));
        assert!(close(c.energy_for_cycles_j(1.0e9, 1.0e9, PowerModel::Approximate), 1.0));
        assert!(matches!(p.cluster("gpu"), Err(DeviceError::UnknownCluster { .. })));
    }

    #[test]
    fn table_interpolates_piecewise_and_epsilon_defaults_to_calibration() {
        let text = MINIMAL
            .replace("v_min = 0.8\nv_max = 1.2\n", "v_table = [[5.0e8, 0.6], [1.0e9, 0.8], [1.5e9, 1.2]]\n")
            .replace("epsilon = 1.0e-27\n", "");
        let p = DeviceProfile::from_toml_str(&text).expect("should succeed");
        let c = p.cluster("cpu").expect("should succeed");
        assert!(close(c.voltage_at(7.5e8), 0.7));
        assert!(close(c.voltage_at(1.25e9), 1.0));
        assert!(close(c.voltage_at(2.0e9), 1.2));
        // ε = mean(C·0.6²/(5e8)², C·1.2²/(1.5e9)²) = (1.44e-27 + 0.64e-27) / 2.
        assert!(close(c.epsilon, 1.04e-27));
    }

    #[test]
    fn toml_and_json_round_trip() {
        let p = DeviceProfile::from_toml_str(MINIMAL).expect("should succeed");
        let toml = p.to_toml_string().expect("should succeed");
        assert_eq!(DeviceProfile::from_toml_str(&toml).expect("should succeed"), p, "{toml}");
        let json = serde_json::to_string(&p).expect("should succeed");
        assert_eq!(DeviceProfile::from_json_str(&json).expect("should succeed"), p);
    }

    #[test]
    fn bad_profiles_name_the_field() {
        let cases = [
            ("f_max_hz = 1.5e9", "f_max_hz = 1.0e8", "clusters[cpu].f_max_hz"),
            ("v_max = 1.2", "v_max = 0.5", "clusters[cpu].v_max"),
            ("c_eff_farads = 1.0e-9", "c_eff_farads = -1.0", "clusters[cpu].c_eff_farads"),
            ("cluster = \"cpu\"", "cluster = \"gpu\"", "inference.cluster"),
            ("f_hz = 1.0e9", "f_hz = 2.0e9", "inference.f_hz"),
            ("slowdown = 2.0", "slowdown = 0.0", "slowdown"),
            ("tx_w = 0.05", "tx_w = -0.05", "radio.tx_w"),
            ("cores = 4", "cores = 0", "clusters[cpu].cores"),
        ];
        for (from, to, field) in cases {
            let err = DeviceProfile::from_toml_str(&MINIMAL.replace(from, to))
                .expect_err("should fail")
                .to_string();
            assert!(err.contains(field) && err.contains("toy"), "{to}: {err}");
        }
        let err =
            DeviceProfile::from_toml_str(&MINIMAL.replace("v_max = 1.2\n", "")).expect_err("should fail");
        assert!(err.to_string().contains("v_min and v_max"), "{err}");
        let err =
            DeviceProfile::from_toml_str(&MINIMAL.replace("slowdown", "slowdwn")).expect_err("should fail");
        assert!(err.to_string().contains("slowdwn") && err.to_string().contains(":4:"), "{err}");
        let err = DeviceProfile::from_json_str("{\"name\": 3}").expect_err("should fail");
        assert!(err.to_string().contains(":1:"), "{err}");
    }

    #[test]
    fn every_shipped_profile_is_valid_and_consistent() {
        let names = DeviceProfile::shipped_names();
        assert!(names.len() >= 5);
        let mut kinds = Vec::new();
        for name in names {
            let p = DeviceProfile::shipped(name).expect("should succeed");
            assert_eq!(p.name, name);
            kinds.push(p.kind);
            for c in &p.clusters {
                // ε is what calibration would fit from C_eff and V(f), to 4 digits.
                let derived = c.epsilon_from_c_eff();
                assert!((c.epsilon - derived).abs() / derived < 1e-3, "{name}/{}: {}", c.name, derived);
            }
            assert_eq!(
                DeviceProfile::from_toml_str(&p.to_toml_string().expect("should succeed"))
                    .expect("should succeed"),
                p
            );
        }
        assert!(kinds.iter().filter(|k| **k == DeviceKind::Wearable).count() >= 2);
        assert!(matches!(DeviceProfile::shipped("nope"), Err(DeviceError::UnknownProfile { .. })));
    }

    #[test]
    fn shipped_ranges_match_the_spec_table() {
        let p = DeviceProfile::shipped("pixel-8-pro").expect("should succeed");
        let rows: Vec<_> = p
            .clusters
            .iter()
            .map(|c| (c.name.as_str(), c.cores, c.f_min_hz, c.f_max_hz, c.voltage_range()))
            .collect();
        assert_eq!(
            rows,
            [
                ("LITTLE", 4, 3.24e8, 1.70e9, (0.56, 0.85)),
                ("big", 4, 4.02e8, 2.37e9, (0.55, 1.13)),
                ("prime", 1, 5.00e8, 2.91e9, (0.53, 1.20)),
            ]
        );
        let a16 = DeviceProfile::shipped("samsung-a16").expect("should succeed");
        let rows: Vec<_> = a16
            .clusters
            .iter()
            .map(|c| (c.name.as_str(), c.cores, c.f_min_hz, c.f_max_hz, c.voltage_range()))
            .collect();
        assert_eq!(
            rows,
            [("LITTLE", 6, 5.00e8, 2.00e9, (0.55, 0.81)), ("big", 2, 7.25e8, 2.20e9, (0.55, 0.76))]
        );
    }

    #[test]
    fn written_floats_are_readable() {
        assert_eq!(exponent_floats("c_eff_farads = 0.0000000011900000000000001"), "c_eff_farads = 1.19e-9");
        assert_eq!(exponent_floats("f_max_hz = 2370000000.0"), "f_max_hz = 2.37e9");
        assert_eq!(
            exponent_floats("v_table = [[300000000.0, 0.75], [1.0, 1.1]]"),
            "v_table = [[3e8, 0.75], [1.0, 1.1]]"
        );
        assert_eq!(exponent_floats("cpus = [0, 1]"), "cpus = [0, 1]");
        assert_eq!(exponent_floats("description = \"from 0.0000001\""), "description = \"from 0.0000001\"");
        let text = DeviceProfile::shipped("nexus-6")
            .expect("should succeed")
            .to_toml_string()
            .expect("should succeed");
        assert!(text.contains("c_eff_farads = 1.247e-9") && text.contains("[3e8, 0.75]"), "{text}");
    }

    #[test]
    fn cpu_lists_parse() {
        assert_eq!(parse_cpu_list("0-3\n"), Some(vec![0, 1, 2, 3]));
        assert_eq!(parse_cpu_list("4,5"), Some(vec![4, 5]));
        assert_eq!(parse_cpu_list("0-1,7"), Some(vec![0, 1, 7]));
        assert_eq!(parse_cpu_list(""), None);
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
    }

    #[test]
    fn detects_a_tri_cluster_phone() {
        let d = detect_host(&fixture("tri-cluster-phone")).expect("should succeed");
        let p = &d.profile;
        assert_eq!(p.kind, DeviceKind::Host);
        let rows: Vec<_> =
            p.clusters.iter().map(|c| (c.name.as_str(), c.cpus.clone(), c.f_min_hz, c.f_max_hz)).collect();
        assert_eq!(
            rows,
            [
                ("little", vec![0, 1, 2, 3], 3.0e8, 1.8e9),
                ("big", vec![4, 5, 6], 4.0e8, 2.4e9),
                ("prime", vec![7], 5.0e8, 3.0e9),
            ]
        );
        assert_eq!((p.inference.cluster.as_str(), p.inference.f_hz), ("prime", 3.0e9));
        // Assumed: 2 W per core at f_max, so the big cluster draws 6 W there.
        assert!(close(p.dynamic_power_w("big", 2.4e9).expect("should succeed"), 6.0));
        let b = d.battery.as_ref().expect("should succeed");
        assert_eq!(b.capacity_pct, Some(87.0));
        assert_eq!(b.status.as_deref(), Some("Discharging"));
        assert!(close(b.voltage_v.expect("should succeed"), 3.85));
        assert!(close(b.power_w().expect("should succeed"), 3.85 * 0.5));
        let info = p.battery.as_ref().expect("should succeed");
        assert!(close(info.capacity_mah.expect("should succeed"), 4500.0));
        assert!(d.notes.iter().any(|n| n.contains("assumed: V(f)")), "{:?}", d.notes);
    }

    #[test]
    fn detects_a_vm_without_cpufreq() {
        let d = detect_host(&fixture("no-cpufreq-vm")).expect("should succeed");
        let c = &d.profile.clusters[0];
        assert_eq!((d.profile.clusters.len(), c.name.as_str(), c.cores), (1, "cpu", 2));
        assert_eq!((c.f_min_hz, c.f_max_hz), (HOST_F_MIN_HZ, HOST_F_MAX_HZ));
        assert!(d.battery.is_none() && d.profile.battery.is_none());
        for what in ["no cpufreq", "assumed: f_max", "no battery"] {
            assert!(d.notes.iter().any(|n| n.contains(what)), "{what}: {:?}", d.notes);
        }
    }

    #[test]
    fn malformed_sysfs_names_the_file() {
        let dir = std::env::temp_dir().join(format!("tandem-sysfs-bad-{}", std::process::id()));
        let policy = dir.join("sys/devices/system/cpu/cpufreq/policy0");
        std::fs::create_dir_all(&policy).expect("should succeed");
        std::fs::write(policy.join("related_cpus"), "0-3\n").expect("should succeed");
        std::fs::write(policy.join("cpuinfo_min_freq"), "300000\n").expect("should succeed");
        std::fs::write(policy.join("cpuinfo_max_freq"), "fast\n").expect("should succeed");
        let err = detect_host(&dir).expect_err("should fail").to_string();
        assert!(err.contains("cpuinfo_max_freq") && err.contains("fast"), "{err}");
        std::fs::write(policy.join("cpuinfo_max_freq"), "1800000\n").expect("should succeed");
        std::fs::write(policy.join("related_cpus"), "0-\n").expect("should succeed");
        let err = detect_host(&dir).expect_err("should fail").to_string();
        assert!(err.contains("related_cpus"), "{err}");
        std::fs::remove_dir_all(&dir).expect("should succeed");
    }

    #[test]
    fn this_machine_is_detected() {
        let d = detect_host(Path::new("/")).expect("should succeed");
        assert!(!d.profile.clusters.is_empty());
        assert!(!d.notes.is_empty());
    }
}
