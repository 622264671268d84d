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
use std::path::PathBuf;

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
    /// Work per cycle relative to the profile's inference cluster (1: the
    /// same core; 0.4: a little core doing 40% as much per cycle). Busy
    /// time on this cluster at `f` is the inference setting's × (f_inf / f)
    /// / relative_speed.
    pub relative_speed: f64,
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    relative_speed: Option<f64>,
}

/// How a cluster's voltage is given wrongly in a profile file.
#[derive(Debug, thiserror::Error)]
pub enum ClusterVoltageError {
    /// Neither form.
    #[error("cluster '{0}': give its voltage as v_min and v_max, or v_table")]
    Missing(String),
    /// Both forms.
    #[error("cluster '{0}': give either v_min/v_max or v_table, not both")]
    Both(String),
    /// Half a range.
    #[error("cluster '{0}': give both v_min and v_max")]
    HalfRange(String),
}

impl TryFrom<ClusterFile> for Cluster {
    type Error = ClusterVoltageError;

    fn try_from(f: ClusterFile) -> Result<Self, ClusterVoltageError> {
        let voltage = match (f.v_min, f.v_max, f.v_table) {
            (Some(v_min), Some(v_max), None) => Voltage::Range { v_min, v_max },
            (None, None, Some(t)) => Voltage::Table(t.into_iter().map(|[f, v]| (f, v)).collect()),
            (None, None, None) => return Err(ClusterVoltageError::Missing(f.name)),
            (_, _, Some(_)) => return Err(ClusterVoltageError::Both(f.name)),
            _ => return Err(ClusterVoltageError::HalfRange(f.name)),
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
            relative_speed: f.relative_speed.unwrap_or(1.0),
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
            relative_speed: (c.relative_speed != 1.0).then_some(c.relative_speed),
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

impl DeviceProfile {
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
        positive(self.slowdown).map_err(|r| bad("slowdown".into(), r.to_string()))?;
        non_negative(self.idle_power_w).map_err(|r| bad("idle_power_w".into(), r.to_string()))?;
        non_negative(self.radio.tx_w).map_err(|r| bad("radio.tx_w".into(), r.to_string()))?;
        non_negative(self.radio.rx_w).map_err(|r| bad("radio.rx_w".into(), r.to_string()))?;
        if let Some(b) = &self.battery {
            if let Some(c) = b.capacity_mah {
                positive(c).map_err(|r| bad("battery.capacity_mah".into(), r.to_string()))?;
            }
            if let Some(v) = b.nominal_voltage_v {
                positive(v).map_err(|r| bad("battery.nominal_voltage_v".into(), r.to_string()))?;
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
            positive(c.relative_speed).map_err(|r| bad(field("relative_speed"), r.to_string()))?;
            positive(c.f_min_hz).map_err(|r| bad(field("f_min_hz"), r.to_string()))?;
            positive(c.f_max_hz).map_err(|r| bad(field("f_max_hz"), r.to_string()))?;
            if c.f_max_hz < c.f_min_hz {
                return Err(bad(
                    field("f_max_hz"),
                    format!("{} Hz is below f_min_hz = {} Hz", c.f_max_hz, c.f_min_hz),
                ));
            }
            match &c.voltage {
                Voltage::Range { v_min, v_max } => {
                    positive(*v_min).map_err(|r| bad(field("v_min"), r.to_string()))?;
                    positive(*v_max).map_err(|r| bad(field("v_max"), r.to_string()))?;
                    if v_max < v_min {
                        return Err(bad(field("v_max"), format!("{v_max} V is below v_min = {v_min} V")));
                    }
                }
                Voltage::Table(points) => {
                    if points.is_empty() {
                        return Err(bad(field("v_table"), "needs at least one [f_hz, volts] point".into()));
                    }
                    for (i, &(f, v)) in points.iter().enumerate() {
                        positive(f).map_err(|r| {
                            bad(format!("{}[{i}] frequency", field("v_table")), r.to_string())
                        })?;
                        positive(v)
                            .map_err(|r| bad(format!("{}[{i}] voltage", field("v_table")), r.to_string()))?;
                    }
                    if let Some(i) = points.windows(2).position(|w| w[1].0 <= w[0].0) {
                        return Err(bad(
                            field("v_table"),
                            format!("frequencies must increase (point {} is not above point {i})", i + 1),
                        ));
                    }
                }
            }
            positive(c.c_eff_farads).map_err(|r| bad(field("c_eff_farads"), r.to_string()))?;
            positive(c.epsilon).map_err(|r| bad(field("epsilon"), r.to_string()))?;
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
        positive(inf.f_hz).map_err(|r| bad("inference.f_hz".into(), r.to_string()))?;
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

/// A number a field cannot hold.
#[derive(Debug, thiserror::Error)]
enum OutOfRange {
    #[error("must be a positive finite number, got {0}")]
    NotPositive(f64),
    #[error("must be a finite number >= 0, got {0}")]
    Negative(f64),
}

fn positive(v: f64) -> Result<(), OutOfRange> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(OutOfRange::NotPositive(v))
    }
}

fn non_negative(v: f64) -> Result<(), OutOfRange> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(OutOfRange::Negative(v))
    }
}

/// Rewrites the floats of one `key = value` TOML line whose value is a number
/// or an array of numbers in exponent form when they are below 1e-3 or at
mod format;

#[cfg(test)]
mod tests {
    use super::format::exponent_floats;
    use super::*;

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
}
