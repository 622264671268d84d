//! Dynamic power from a battery log (SPEC.md 3.4, "Measuring P_dyn on a device
//! without a power meter").
//!
//! The log is a CSV `t_s,v_batt,i_batt,phase`: time in seconds, battery voltage
//! in volts, battery current in amps, and the phase the device was in. Power is
//! `|V·I|`: fuel gauges disagree on the sign of a discharging current (many
//! Android gauges report it negative, others positive), and a calibration run
//! only ever discharges, so the sign is dropped.
//!
//! # Phase labels
//! ```text
//! label := KIND "@" FREQ
//! KIND  := "idle" | "load"          per-cluster activation
//!        | "idle0"                  single activation: only core 0 online, idle
//!        | "idle0+" K               cores 0 and K online, idle
//!        | "load" K                 cores 0 and K online, K loaded
//! K     := a core index >= 1        (core 0 is the housekeeping core)
//! FREQ  := Hz, optionally with a unit: 1800000000, 1.8e9, 1.8GHz, 300MHz, 576000kHz
//! ```
//! An empty label marks an unlabelled sample (settling, a transition): it is
//! skipped and ends the current segment.
//!
//! # Derivation
//! A *segment* is a maximal run of consecutive samples with the same label; its
//! power is the mean of its samples. A label that occurs in several segments
//! was repeated, and the r-th segment of each label makes up repeat r. Then:
//! - per-cluster activation: `P_dyn(F) = P[load@F] − P[idle@F]`;
//! - single activation: `P_core_K(F) = P[loadK@F] + P[idle0@F] − P[idle0+K@F]`,
//!   and a cluster's `P_dyn(F)` is the sum over its cores (from `--cores`).
//!
//! Each derived quantity is computed per repeat, over as many repeats as the
//! scarcest phase it uses has, and reported as mean and sample std.

use std::collections::BTreeMap;
use std::fmt;
use std::fmt::Write as _;

use serde::Serialize;

use super::fit::Table;
use super::{parse_frequency, CalibrateError, ClusterCores, Spread};

/// The header `calibrate trace` reads (and `calibrate measure` writes).
pub const TRACE_HEADER: &str = "t_s,v_batt,i_batt,phase";

/// What the device was doing during a phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PhaseKind {
    /// `idle`: the target cluster online and idle.
    Idle,
    /// `load`: every target core (but core 0) loaded.
    Load,
    /// `idle0`: only core 0 online, idle.
    IdleBase,
    /// `idle0+K`: cores 0 and K online, idle.
    IdleWith(usize),
    /// `loadK`: cores 0 and K online, K loaded.
    LoadCore(usize),
}

/// What is wrong with a phase label.
#[derive(Debug, thiserror::Error)]
pub enum PhaseError {
    /// No `@FREQ`.
    #[error("expected KIND@FREQ, e.g. idle@1.8GHz")]
    NoFrequency,
    /// `K` is not a number.
    #[error("'{0}' is not a core index")]
    NotACore(String),
    /// `K` is 0.
    #[error("core 0 is the housekeeping core; K must be 1 or more")]
    Housekeeping,
    /// Not a kind of the grammar.
    #[error("unknown phase kind '{0}'; expected idle, load, idle0, idle0+K or loadK")]
    UnknownKind(String),
    /// The frequency does not parse.
    #[error("{0}")]
    Frequency(Box<super::CalibrateError>),
}

/// A phase label: what ran, at which pinned frequency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Phase {
    /// What ran.
    pub kind: PhaseKind,
    /// The target cluster's pinned frequency, in Hz.
    pub f_hz: u64,
}

impl Phase {
    /// Parses a label of the grammar in the module docs.
    pub fn parse(label: &str) -> Result<Phase, PhaseError> {
        let (kind, freq) = label.split_once('@').ok_or(PhaseError::NoFrequency)?;
        let core = |k: &str| -> Result<usize, PhaseError> {
            let k: usize = k.parse().map_err(|_| PhaseError::NotACore(k.to_string()))?;
            if k == 0 {
                return Err(PhaseError::Housekeeping);
            }
            Ok(k)
        };
        let kind = match kind.trim() {
            "idle" => PhaseKind::Idle,
            "load" => PhaseKind::Load,
            "idle0" => PhaseKind::IdleBase,
            k => {
                if let Some(k) = k.strip_prefix("idle0+") {
                    PhaseKind::IdleWith(core(k)?)
                } else if let Some(k) =
                    k.strip_prefix("load").filter(|k| k.starts_with(|c: char| c.is_ascii_digit()))
                {
                    PhaseKind::LoadCore(core(k)?)
                } else {
                    return Err(PhaseError::UnknownKind(k.to_string()));
                }
            }
        };
        let hz = parse_frequency(freq).map_err(|e| PhaseError::Frequency(Box::new(e)))?;
        Ok(Phase { kind, f_hz: hz.round() as u64 })
    }
}

impl fmt::Display for Phase {
    /// The canonical label, with the frequency in plain Hz.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            PhaseKind::Idle => write!(f, "idle@{}", self.f_hz),
            PhaseKind::Load => write!(f, "load@{}", self.f_hz),
            PhaseKind::IdleBase => write!(f, "idle0@{}", self.f_hz),
            PhaseKind::IdleWith(k) => write!(f, "idle0+{k}@{}", self.f_hz),
            PhaseKind::LoadCore(k) => write!(f, "load{k}@{}", self.f_hz),
        }
    }
}

/// One row of the battery log.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Time, in seconds.
    pub t_s: f64,
    /// Battery voltage, in volts.
    pub v_batt: f64,
    /// Battery current, in amps, either sign.
    pub i_batt: f64,
    /// The phase, or `None` for an unlabelled sample.
    pub phase: Option<Phase>,
    /// The 1-based line it came from.
    pub line: u64,
}

impl Sample {
    /// Battery power `|V·I|`, in watts.
    pub fn power_w(&self) -> f64 {
        (self.v_batt * self.i_batt).abs()
    }
}

/// Parses a battery log with the columns of [`TRACE_HEADER`] (any order, extra
/// columns ignored, `#` comments). Time must not run backwards.
pub fn parse_log(text: &str) -> Result<Vec<Sample>, CalibrateError> {
    let table = Table::parse(text, TRACE_HEADER)?;
    let mut samples: Vec<Sample> = Vec::with_capacity(table.rows.len());
    for row in &table.rows {
        let t_s = row.number("t_s")?;
        if let Some(prev) = samples.last().filter(|p| p.t_s > t_s) {
            return Err(row.bad(format!("t_s {t_s} runs backwards (line {} has {})", prev.line, prev.t_s)));
        }
        let v_batt = row.number("v_batt")?;
        let i_batt = row.number("i_batt")?;
        let label = row.field("phase")?;
        let phase = if label.is_empty() {
            None
        } else {
            let phase = Phase::parse(label).map_err(|reason| CalibrateError::BadLabel {
                line: row.line,
                label: label.into(),
                reason: reason.to_string(),
            })?;
            Some(phase)
        };
        samples.push(Sample { t_s, v_batt, i_batt, phase, line: row.line });
    }
    Ok(samples)
}

/// A maximal run of consecutive samples with one label.
#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    /// Its label.
    pub phase: Phase,
    /// Time of its first and last sample, in seconds.
    pub t_s: (f64, f64),
    /// How many samples.
    pub samples: usize,
    /// Mean of `|V·I|` over its samples, in watts.
    pub mean_w: f64,
}

/// Cuts the labelled samples into segments, in time order.
pub fn segments(samples: &[Sample]) -> Vec<Segment> {
    let mut out = Vec::new();
    let mut run: Vec<&Sample> = Vec::new();
    let flush = |run: &mut Vec<&Sample>, out: &mut Vec<Segment>| {
        if let (Some(first), Some(last)) = (run.first(), run.last()) {
            if let Some(phase) = first.phase {
                let mean_w = run.iter().map(|s| s.power_w()).sum::<f64>() / run.len() as f64;
                out.push(Segment { phase, t_s: (first.t_s, last.t_s), samples: run.len(), mean_w });
            }
        }
        run.clear();
    };
    for s in samples {
        if run.first().is_some_and(|first| first.phase != s.phase) {
            flush(&mut run, &mut out);
        }
        if s.phase.is_some() {
            run.push(s);
        } else {
            flush(&mut run, &mut out);
        }
    }
    flush(&mut run, &mut out);
    out
}

/// One reported quantity: a phase's power or a derived dynamic power, with
/// its mean and std over repeats. Serializes to one JSON line of
/// `calibrate trace`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Quantity {
    /// `phase` (a measured phase), `cluster_activation` (`P_load − P_idle`),
    /// `core` (single activation, one core) or `cluster` (single activation,
    /// summed over a cluster's cores).
    pub kind: &'static str,
    /// A readable name: the phase label, `P_dyn@F`, `P_core5@F` or `P_dyn[big]@F`.
    pub label: String,
    /// The cluster, for `cluster`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// The core, for `core`; the cores summed, for `cluster`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cores: Vec<usize>,
    /// The pinned frequency, in Hz.
    pub f_hz: u64,
    /// How many repeats.
    pub repeats: usize,
    /// Mean over repeats, in watts.
    pub mean_w: f64,
    /// Sample std over repeats, in watts; null for a single repeat.
    pub std_w: Option<f64>,
    /// The value of every repeat, in watts.
    pub per_repeat_w: Vec<f64>,
}

impl Quantity {
    fn new(kind: &'static str, label: String, f_hz: u64, per_repeat_w: Vec<f64>) -> Quantity {
        let spread = Spread::of(&per_repeat_w);
        Quantity {
            kind,
            label,
            cluster: None,
            cores: Vec::new(),
            f_hz,
            repeats: spread.n,
            mean_w: spread.mean,
            std_w: spread.std,
            per_repeat_w,
        }
    }
}

/// Everything `calibrate trace` reports: measured phases first (in order of
/// first appearance), then derived powers (by frequency, then core).
#[derive(Debug, Clone, PartialEq)]
pub struct TraceReport {
    /// The mean power of every phase.
    pub phases: Vec<Quantity>,
    /// The derived dynamic powers.
    pub derived: Vec<Quantity>,
}

/// Derives phase powers and dynamic powers from a parsed log; `clusters` maps
/// cores to clusters for single activation (may be empty).
pub fn analyse(samples: &[Sample], clusters: &[ClusterCores]) -> Result<TraceReport, CalibrateError> {
    let segments = segments(samples);
    if segments.is_empty() {
        return Err(CalibrateError::Empty { what: "the log has no labelled samples".into() });
    }
    let mut order: Vec<Phase> = Vec::new();
    let mut repeats: BTreeMap<Phase, Vec<f64>> = BTreeMap::new();
    for s in &segments {
        if !repeats.contains_key(&s.phase) {
            order.push(s.phase);
        }
        repeats.entry(s.phase).or_default().push(s.mean_w);
    }
    let phases =
        order.iter().map(|p| Quantity::new("phase", p.to_string(), p.f_hz, repeats[p].clone())).collect();

    let need = |have: Phase, kind: PhaseKind| -> Result<&Vec<f64>, CalibrateError> {
        let want = Phase { kind, f_hz: have.f_hz };
        repeats
            .get(&want)
            .ok_or_else(|| CalibrateError::MissingPhase { have: have.to_string(), missing: want.to_string() })
    };
    let mut derived = Vec::new();
    let mut per_core: BTreeMap<(u64, usize), Vec<f64>> = BTreeMap::new();
    for (&phase, load) in &repeats {
        match phase.kind {
            PhaseKind::Load => {
                let idle = need(phase, PhaseKind::Idle)?;
                let values = load.iter().zip(idle).map(|(l, i)| l - i).collect();
                derived.push(Quantity::new(
                    "cluster_activation",
                    format!("P_dyn@{}", phase.f_hz),
                    phase.f_hz,
                    values,
                ));
            }
            PhaseKind::LoadCore(k) => {
                let base = need(phase, PhaseKind::IdleBase)?;
                let with = need(phase, PhaseKind::IdleWith(k))?;
                let values: Vec<f64> = load.iter().zip(base).zip(with).map(|((l, b), w)| l + b - w).collect();
                let mut q =
                    Quantity::new("core", format!("P_core{k}@{}", phase.f_hz), phase.f_hz, values.clone());
                q.cores = vec![k];
                derived.push(q);
                per_core.insert((phase.f_hz, k), values);
            }
            _ => {}
        }
    }
    let mut freqs: Vec<u64> = per_core.keys().map(|(f, _)| *f).collect();
    freqs.dedup();
    for cluster in clusters {
        for &f_hz in &freqs {
            if !cluster.cores.iter().any(|k| per_core.contains_key(&(f_hz, *k))) {
                continue;
            }
            let mut cores = Vec::new();
            for &core in &cluster.cores {
                let values = per_core.get(&(f_hz, core)).ok_or_else(|| CalibrateError::MissingCore {
                    cluster: cluster.name.clone(),
                    f_hz,
                    core,
                })?;
                cores.push(values);
            }
            let n = cores.iter().map(|v| v.len()).min().unwrap_or(0);
            let values = (0..n).map(|r| cores.iter().map(|v| v[r]).sum()).collect();
            let mut q = Quantity::new("cluster", format!("P_dyn[{}]@{f_hz}", cluster.name), f_hz, values);
            q.cluster = Some(cluster.name.clone());
            q.cores = cluster.cores.clone();
            derived.push(q);
        }
    }
    let rank = |q: &Quantity| match q.kind {
        "cluster_activation" => 0,
        "core" => 1,
        _ => 2,
    };
    derived.sort_by(|a, b| {
        (a.f_hz, rank(a), a.cores.first())
            .cmp(&(b.f_hz, rank(b), b.cores.first()))
            .then(a.label.cmp(&b.label))
    });
    Ok(TraceReport { phases, derived })
}

/// The human table: phases, then derived powers.
pub fn trace_table(report: &TraceReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{:<28} {:>8} {:>12} {:>12}", "quantity", "repeats", "mean_W", "std_W");
    for (title, list) in [("measured phases", &report.phases), ("dynamic power", &report.derived)] {
        if list.is_empty() {
            continue;
        }
        let _ = writeln!(out, "# {title}");
        for q in list {
            let std = q.std_w.map_or_else(|| "-".to_string(), |s| format!("{s:.6}"));
            let _ = writeln!(out, "{:<28} {:>8} {:>12.6} {:>12}", q.label, q.repeats, q.mean_w, std);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibrate::parse_cluster_cores;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
    }

    #[test]
    fn labels_parse_and_print_canonically() {
        let p = |s: &str| Phase::parse(s).expect("test value");
        assert_eq!(p("idle@1.8GHz"), Phase { kind: PhaseKind::Idle, f_hz: 1_800_000_000 });
        assert_eq!(p("load@300MHz").to_string(), "load@300000000");
        assert_eq!(p("idle0@1e9").kind, PhaseKind::IdleBase);
        assert_eq!(p("idle0+5@1e9").kind, PhaseKind::IdleWith(5));
        assert_eq!(p("load12@1e9").kind, PhaseKind::LoadCore(12));
        assert_eq!(p("idle0+5@2GHz").to_string(), "idle0+5@2000000000");
        for (bad, needle) in [
            ("idle", "expected KIND@FREQ"),
            ("busy@1GHz", "unknown phase kind 'busy'"),
            ("loadx@1GHz", "unknown phase kind 'loadx'"),
            ("load0@1GHz", "housekeeping"),
            ("idle0+0@1GHz", "housekeeping"),
            ("idle0+x@1GHz", "'x' is not a core index"),
            ("idle@fast", "bad frequency 'fast'"),
        ] {
            let e = Phase::parse(bad).expect_err("an error").to_string();
            assert!(e.contains(needle), "{bad}: {e}");
        }
    }

    #[test]
    fn cluster_activation_from_a_hand_made_log() {
        // Two repeats of idle then load at 1 GHz. |V·I| per sample:
        // idle r0: 4·0.25, 4·0.25 → 1.0;  load r0: 4·0.75, 4·0.75 → 3.0
        // idle r1: 4·0.5 → 2.0 (one sample); load r1: 4·1.0, 4·1.5 → mean 5.0
        // P_dyn per repeat: 2.0 and 3.0 → mean 2.5, sample std √0.5.
        // Discharge current is negative here, as many gauges report it.
        let text = "t_s,v_batt,i_batt,phase\n\
                    0,4,-0.25,idle@1GHz\n0.5,4,-0.25,idle@1GHz\n\
                    1,4,-0.75,load@1GHz\n1.5,4,-0.75,load@1GHz\n\
                    2,4,-9,\n\
                    2.5,4,-0.5,idle@1000MHz\n\
                    3,4,-1.0,load@1e9\n3.5,4,-1.5,load@1e9\n";
        let samples = parse_log(text).expect("test value");
        let segs = segments(&samples);
        assert_eq!(segs.len(), 4, "the unlabelled sample is skipped: {segs:?}");
        assert_eq!(segs[3].samples, 2);
        let r = analyse(&samples, &[]).expect("test value");
        assert_eq!(r.phases.len(), 2);
        let idle = &r.phases[0];
        assert_eq!((idle.label.as_str(), idle.repeats), ("idle@1000000000", 2));
        assert_eq!(idle.per_repeat_w, [1.0, 2.0]);
        assert!(close(idle.mean_w, 1.5) && close(idle.std_w.expect("test value"), 0.5f64.sqrt()));
        assert_eq!(r.phases[1].per_repeat_w, [3.0, 5.0]);
        let [dyn_] = &r.derived[..] else { panic!("one derived: {:?}", r.derived) };
        assert_eq!(dyn_.kind, "cluster_activation");
        assert_eq!(dyn_.per_repeat_w, [2.0, 3.0]);
        assert!(close(dyn_.mean_w, 2.5) && close(dyn_.std_w.expect("test value"), 0.5f64.sqrt()));
        assert!(trace_table(&r).contains("P_dyn@1000000000"));
    }

    #[test]
    fn single_activation_sums_cores_into_clusters() {
        let text = include_str!("../../tests/fixtures/calibrate/single-activation.csv");
        let samples = parse_log(text).expect("test value");
        let clusters = parse_cluster_cores("big=4-5").expect("test value");
        let r = analyse(&samples, &clusters).expect("test value");
        // Fixture (V = 4 V, one sample per segment, two repeats):
        //   idle0 1.0/1.2, idle0+4 1.5/1.5, load4 2.5/2.7, idle0+5 1.6/1.6, load5 2.9/2.9
        //   P_core4 = load4 + idle0 − idle0+4 = 2.0, 2.4
        //   P_core5 = 2.3, 2.5;  P_dyn[big] = 4.3, 4.9
        let get =
            |label: &str| r.derived.iter().find(|q| q.label == label).unwrap_or_else(|| panic!("{label}"));
        let c4 = get("P_core4@1700000000");
        assert!(c4.per_repeat_w.iter().zip([2.0, 2.4]).all(|(a, b)| close(*a, b)), "{c4:?}");
        let c5 = get("P_core5@1700000000");
        assert!(c5.per_repeat_w.iter().zip([2.3, 2.5]).all(|(a, b)| close(*a, b)), "{c5:?}");
        let big = get("P_dyn[big]@1700000000");
        assert_eq!(big.cluster.as_deref(), Some("big"));
        assert_eq!(big.cores, [4, 5]);
        assert!(big.per_repeat_w.iter().zip([4.3, 4.9]).all(|(a, b)| close(*a, b)), "{big:?}");
        assert!(close(big.mean_w, 4.6) && close(big.std_w.expect("test value"), 0.18f64.sqrt()), "{big:?}");
        assert_eq!(r.derived.last().map(|q| q.kind), Some("cluster"));

        let e = analyse(&samples, &parse_cluster_cores("big=4-6").expect("test value"))
            .expect_err("an error")
            .to_string();
        assert!(e.contains("cluster 'big' at 1700000000 Hz: core 6 has no load6@1700000000 phase"), "{e}");
    }

    #[test]
    fn missing_idle_phases_are_named() {
        let h = "t_s,v_batt,i_batt,phase\n";
        for (rows, needle) in [
            ("0,4,1,load@1GHz\n", "phase load@1000000000 needs phase idle@1000000000"),
            ("0,4,1,idle@2GHz\n1,4,2,load@1GHz\n", "needs phase idle@1000000000"),
            ("0,4,1,idle0@1GHz\n1,4,2,load3@1GHz\n", "needs phase idle0+3@1000000000"),
            ("0,4,1,idle0+3@1GHz\n1,4,2,load3@1GHz\n", "needs phase idle0@1000000000"),
        ] {
            let samples = parse_log(&format!("{h}{rows}")).expect("test value");
            let e = analyse(&samples, &[]).expect_err("an error").to_string();
            assert!(e.contains(needle), "{rows}: {e}");
        }
    }

    #[test]
    fn bad_logs_name_the_line() {
        let h = "t_s,v_batt,i_batt,phase\n";
        for (text, needle) in [
            ("".to_string(), "empty"),
            ("t_s,v,i,phase\n0,1,1,idle@1GHz\n".into(), "missing column 'v_batt'"),
            (format!("{h}0,4,1,idle@1GHz\n1,4,x,idle@1GHz\n"), "line 3: i_batt 'x' is not a number"),
            (format!("{h}1,4,1,idle@1GHz\n0.5,4,1,idle@1GHz\n"), "line 3: t_s 0.5 runs backwards"),
            (format!("{h}0,4,1,nap@1GHz\n"), "line 2: bad phase label 'nap@1GHz': unknown phase kind"),
            (format!("{h}0,4,1\n"), "line 2: missing field 'phase'"),
            (format!("{h}0,4,1,\n"), "no labelled samples"),
        ] {
            let e = parse_log(&text).and_then(|s| analyse(&s, &[])).expect_err("an error").to_string();
            assert!(e.contains(needle), "{text:?}: {e}");
        }
    }
}
