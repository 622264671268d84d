//! Calibrating the cluster power model of SPEC.md 3.4 (the power-model paper's
//! methods).
//!
//! - [`fit`]: C_eff and ε per cluster from measured dynamic power, with the
//!   prediction error of the analytical (C_eff·V²·f) and the approximate (ε·f³)
//!   model at every point.
//! - [`trace`]: dynamic power from a battery log (`t_s,v_batt,i_batt,phase`), by
//!   per-cluster activation (`P_load − P_idle`) or single activation
//!   (`P_core_k = P_load_k + P_idle_0 − P_idle_{0+k}`), with mean and std over
//!   repeats.
//! - [`measure`]: the I/O shell that records such a log on a rooted Linux or
//!   Android device through cpufreq, CPU hotplug and the fuel gauge in sysfs.
//!
//! [`fit`] and [`trace`] are pure: they take text and return numbers. Only
//! [`measure`] touches files, clocks and threads.

pub mod fit;
pub mod trace;

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde::Serialize;

/// What calibration can refuse or fail at. Every variant names the line,
/// label or path at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CalibrateError {
    /// The input has no header or no data rows.
    #[error("{what}")]
    Empty {
        /// What is missing, e.g. "no data rows after the header".
        what: String,
    },
    /// The CSV header lacks a required column.
    #[error("missing column '{column}' (header has: {header}); expected {expected}")]
    MissingColumn {
        /// The column that is missing.
        column: String,
        /// The header as found.
        header: String,
        /// The full expected header.
        expected: &'static str,
    },
    /// A CSV row is malformed: a missing field, a non-number, a value out of range.
    #[error("line {line}: {reason}")]
    BadRow {
        /// The 1-based line in the file (the header is line 1).
        line: u64,
        /// What is wrong with it.
        reason: String,
    },
    /// A phase label does not follow the grammar of [`trace::Phase`].
    #[error("line {line}: bad phase label '{label}': {reason}")]
    BadLabel {
        /// The 1-based line in the file.
        line: u64,
        /// The label as written.
        label: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A derived quantity needs a phase the log does not have.
    #[error("phase {have} needs phase {missing}, which the log does not have")]
    MissingPhase {
        /// The phase that was found.
        have: String,
        /// The phase it needs.
        missing: String,
    },
    /// A cluster's single-activation power needs a core the log does not cover.
    #[error("cluster '{cluster}' at {f_hz} Hz: core {core} has no load{core}@{f_hz} phase")]
    MissingCore {
        /// The cluster name from `--cores`.
        cluster: String,
        /// The frequency, in Hz.
        f_hz: u64,
        /// The core without data.
        core: usize,
    },
    /// A frequency such as `1.8GHz` could not be parsed.
    #[error("bad frequency '{spec}': {reason} (expected e.g. 1800000000, 1.8GHz, 300MHz, 576000kHz)")]
    BadFrequency {
        /// The text given.
        spec: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A CPU list such as `4-6` or a cluster map such as `little=1-3,big=4-6`
    /// could not be parsed.
    #[error("bad CPU list '{spec}': {reason}")]
    BadCpuList {
        /// The text given.
        spec: String,
        /// What is wrong with it.
        reason: String,
    },
    /// `measure` writes to the real /sys and is not running as root.
    #[error(
        "calibrate measure writes cpufreq and CPU-hotplug files under /sys and must run as root \
         (uid 0), but this process runs as {uid}; re-run it as root (su/sudo), or add --dry-run \
         to only print the plan"
    )]
    NotRoot {
        /// The uid found in /proc/self/status, or "an unknown uid".
        uid: String,
    },
    /// A sysfs file or folder that `measure` needs is missing.
    #[error("missing {what}: {path}")]
    MissingSysfs {
        /// The path that was looked for.
        path: PathBuf,
        /// What it would have provided.
        what: String,
    },
    /// `measure`'s configuration is unusable.
    #[error("bad measure configuration: {0}")]
    BadConfig(String),
    /// A stress worker thread could not be started.
    #[error("cannot start the stress worker for cpu{cpu}: {source}")]
    Worker {
        /// The CPU it was meant for.
        cpu: usize,
        /// What the OS said.
        source: std::io::Error,
    },
    /// A device profile could not be read, or the fitted values make it invalid.
    #[error(transparent)]
    Profile(#[from] crate::device::DeviceError),
    /// None of the fitted devices is the profile's device.
    #[error("the measurements hold devices {devices}, none of them named '{profile}' like the profile")]
    OtherDevice {
        /// The profile's name.
        profile: String,
        /// The devices in the measurements.
        devices: String,
    },
    /// Reading or writing a file failed.
    #[error("cannot {action} {path}: {source}")]
    Io {
        /// "read", "write", "list" or "create".
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
}

/// Mean and spread of one quantity over its repeats.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Spread {
    /// Arithmetic mean.
    pub mean: f64,
    /// Sample standard deviation (n − 1 in the denominator); `None` for a
    /// single repeat.
    pub std: Option<f64>,
    /// How many repeats.
    pub n: usize,
}

impl Spread {
    /// Mean and sample standard deviation of `values` (none may be empty).
    pub fn of(values: &[f64]) -> Spread {
        let n = values.len();
        let mean = values.iter().sum::<f64>() / n as f64;
        let std = (n > 1).then(|| {
            let ss: f64 = values.iter().map(|v| (v - mean) * (v - mean)).sum();
            (ss / (n - 1) as f64).sqrt()
        });
        Spread { mean, std, n }
    }
}

/// Parses a frequency in Hz: a plain number (`1800000000`, `1.8e9`) or one with
/// a unit suffix `Hz`, `kHz`, `MHz` or `GHz` (any case). It must be finite and
/// above zero.
pub fn parse_frequency(spec: &str) -> Result<f64, CalibrateError> {
    let bad = |reason: &str| CalibrateError::BadFrequency { spec: spec.into(), reason: reason.into() };
    let text = spec.trim();
    let lower = text.to_ascii_lowercase();
    let (number, scale) = [("ghz", 1e9), ("mhz", 1e6), ("khz", 1e3), ("hz", 1.0)]
        .iter()
        .find_map(|(unit, scale)| lower.strip_suffix(unit).map(|n| (n.trim(), *scale)))
        .unwrap_or((lower.as_str(), 1.0));
    if number.is_empty() {
        return Err(bad("no number"));
    }
    let value: f64 = number.parse().map_err(|_| bad("not a number"))?;
    let hz = value * scale;
    if !hz.is_finite() {
        return Err(bad("not finite"));
    }
    if hz <= 0.0 {
        return Err(bad("must be above 0"));
    }
    Ok(hz)
}

/// Parses a Linux CPU list such as `4-6`, `4,5,6` or `1-3,7` into sorted,
/// distinct CPU indices.
pub fn parse_cpu_list(spec: &str) -> Result<Vec<usize>, CalibrateError> {
    let bad = |reason: String| CalibrateError::BadCpuList { spec: spec.into(), reason };
    let mut cpus = BTreeSet::new();
    for item in spec.split([',', ' ', '\n']).map(str::trim).filter(|s| !s.is_empty()) {
        let index = |s: &str| s.trim().parse::<usize>().map_err(|_| bad(format!("'{s}' is not a CPU index")));
        match item.split_once('-') {
            Some((lo, hi)) => {
                let (lo, hi) = (index(lo)?, index(hi)?);
                if lo > hi {
                    return Err(bad(format!("range {item} runs backwards")));
                }
                // No real machine has more CPUs.
                if hi - lo > 4096 {
                    return Err(bad(format!("range {item} is too wide")));
                }
                cpus.extend(lo..=hi);
            }
            None => {
                cpus.insert(index(item)?);
            }
        }
    }
    if cpus.is_empty() {
        return Err(bad("no CPUs".into()));
    }
    Ok(cpus.into_iter().collect())
}

/// The cores of one named cluster, from a `--cores` map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterCores {
    /// The cluster's name, e.g. `big`.
    pub name: String,
    /// Its cores, sorted; never core 0 (the housekeeping core, which single
    /// activation cannot measure).
    pub cores: Vec<usize>,
}

/// Parses a cluster map such as `little=1-3,big=4-6,prime=7`. An item without
/// `=` continues the previous cluster's list, so `little=1,2,3` works too.
/// A core may belong to one cluster only, and core 0 to none.
pub fn parse_cluster_cores(spec: &str) -> Result<Vec<ClusterCores>, CalibrateError> {
    let bad = |reason: String| CalibrateError::BadCpuList { spec: spec.into(), reason };
    let mut lists: Vec<(String, String)> = Vec::new();
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match (item.split_once('='), lists.last_mut()) {
            (Some((name, cpus)), _) => {
                let name = name.trim();
                if name.is_empty() {
                    return Err(bad(format!("'{item}' has no cluster name before '='")));
                }
                if lists.iter().any(|(n, _)| n == name) {
                    return Err(bad(format!("cluster '{name}' is listed twice")));
                }
                lists.push((name.to_string(), cpus.to_string()));
            }
            (None, Some((_, cpus))) => {
                cpus.push(',');
                cpus.push_str(item);
            }
            (None, None) => return Err(bad(format!("'{item}' has no cluster name (expected NAME=CPUS)"))),
        }
    }
    if lists.is_empty() {
        return Err(bad("no clusters (expected e.g. little=1-3,big=4-6)".into()));
    }
    let mut seen = BTreeSet::new();
    let mut clusters = Vec::new();
    for (name, cpus) in lists {
        let cores = parse_cpu_list(&cpus).map_err(|e| bad(format!("cluster '{name}': {e}")))?;
        for &core in &cores {
            if core == 0 {
                return Err(bad(format!(
                    "cluster '{name}' lists core 0, the housekeeping core, which single activation \
                     cannot measure; list its other cores"
                )));
            }
            if !seen.insert(core) {
                return Err(bad(format!("core {core} is in more than one cluster")));
            }
        }
        clusters.push(ClusterCores { name, cores });
    }
    Ok(clusters)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frequencies_take_units() {
        assert_eq!(parse_frequency("1800000000").expect("test value"), 1.8e9);
        assert_eq!(parse_frequency("1.8GHz").expect("test value"), 1.8e9);
        assert_eq!(parse_frequency("300 MHz").expect("test value"), 3e8);
        assert_eq!(parse_frequency("576000kHz").expect("test value"), 5.76e8);
        assert_eq!(parse_frequency("2e9").expect("test value"), 2e9);
        assert_eq!(parse_frequency("10hz").expect("test value"), 10.0);
        for bad in ["", "GHz", "fast", "0", "-1MHz", "inf"] {
            let e = parse_frequency(bad).expect_err("an error").to_string();
            assert!(e.contains(&format!("'{bad}'")), "{e}");
        }
    }

    #[test]
    fn cpu_lists_and_cluster_maps() {
        assert_eq!(parse_cpu_list("4-6").expect("test value"), vec![4, 5, 6]);
        assert_eq!(parse_cpu_list("1-2,7, 5").expect("test value"), vec![1, 2, 5, 7]);
        assert!(parse_cpu_list("6-4").expect_err("an error").to_string().contains("backwards"));
        assert!(parse_cpu_list("a").expect_err("an error").to_string().contains("'a' is not a CPU index"));
        assert!(parse_cpu_list("").is_err());

        let c = parse_cluster_cores("little=1-3,big=4,5,prime=7").expect("test value");
        assert_eq!(c.len(), 3);
        assert_eq!((c[0].name.as_str(), c[0].cores.as_slice()), ("little", &[1, 2, 3][..]));
        assert_eq!((c[1].name.as_str(), c[1].cores.as_slice()), ("big", &[4, 5][..]));
        assert_eq!((c[2].name.as_str(), c[2].cores.as_slice()), ("prime", &[7][..]));
        for (spec, needle) in [
            ("little=0-3", "core 0"),
            ("a=1-2,b=2-3", "core 2 is in more than one"),
            ("1-3", "no cluster name"),
            ("=1", "no cluster name"),
            ("a=1,a=2", "listed twice"),
            ("a=x", "'x' is not a CPU index"),
        ] {
            let e = parse_cluster_cores(spec).expect_err("an error").to_string();
            assert!(e.contains(needle), "{spec}: {e}");
        }
    }

    #[test]
    fn spread_is_mean_and_sample_std() {
        let s = Spread::of(&[1.0, 3.0]);
        assert_eq!(s.mean, 2.0);
        assert_eq!(s.std, Some(2f64.sqrt()));
        assert_eq!(s.n, 2);
        assert_eq!(Spread::of(&[5.0]).std, None);
    }
}
