//! The I/O shell of calibration: records a battery log on a rooted Linux or
//! Android device (SPEC.md 3.4, "Measuring P_dyn on a device without a power
//! meter").
//!
//! [`plan`] reads sysfs under an explicit root (`/` on a device, a fixture tree
//! in tests) and turns a [`MeasureConfig`] into [`Step`]s: CPU-hotplug writes
//! (`cpuN/online`), frequency pins (`scaling_min_freq = scaling_max_freq`, in
//! kHz) and timed phases. [`run`] executes them with a [`Clock`] and a
//! [`Stress`] load, samples the fuel gauge (`voltage_now` in µV, `current_now`
//! in µA, of the supply whose `type` is `Battery`) every sample period into the
//! trace format of [`tandem::calibrate::trace`], logs every `regulator/*/microvolts` into a
//! second CSV for rail-to-cluster mapping, and restores every file it wrote
//! (online files, then frequency ranges), on success, on error and on panic.
//!
//! A `SIGKILL` or Ctrl-C cannot be caught without a signal crate, so
//! [`Plan::restore_commands`] gives the shell commands that undo the run by
//! hand; the CLI prints them before it starts.
//!
//! This file holds the configuration and [`plan`]; `sysfs.rs` reads and
//! writes sysfs, `environment.rs` holds root, the clock and the pinned load,
//! `execution.rs` runs a plan and restores.
//!
//! Phases run idle before load. Per-cluster activation (`cluster` mode) keeps
//! core 0 and the target cores online and runs `idle@F`, `load@F` per repeat.
//! Single activation (`single` mode) runs `idle0@F` with only core 0 online,
//! then for every target core K: `idle0+K@F` and `loadK@F` with cores 0 and K
//! online. Core 0 is never taken offline and never loaded.

use std::collections::BTreeSet;
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tandem::calibrate::trace::{Phase, PhaseKind, TRACE_HEADER};
use tandem::calibrate::{parse_cpu_list, CalibrateError};

mod environment;
mod execution;
mod sysfs;

pub use environment::{current_uid, require_root, BusyLoop, Clock, Stress, SystemClock};
pub use execution::{run, MeasureSummary};
pub use sysfs::regulators_path;
use sysfs::*;

/// CPU topology, hotplug and cpufreq, relative to the sysfs root.
pub const CPU_DIR: &str = "sys/devices/system/cpu";
/// Power supplies (the fuel gauge), relative to the sysfs root.
pub const POWER_SUPPLY_DIR: &str = "sys/class/power_supply";
/// Voltage regulators, relative to the sysfs root.
pub const REGULATOR_DIR: &str = "sys/class/regulator";
/// The header of the regulator log.
pub const REGULATOR_HEADER: &str = "t_s,regulator,name,microvolts";

/// How the target cluster is activated (SPEC.md 3.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActivationMode {
    /// Every other cluster offline, all target cores loaded at once.
    Cluster,
    /// Only core 0 and one target core online at a time; the paper's more
    /// accurate method.
    Single,
}

/// A frequency to pin, as asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FreqChoice {
    /// The policy's `cpuinfo_min_freq`.
    Min,
    /// The policy's `cpuinfo_max_freq`.
    Max,
    /// A frequency in Hz (pinned to the nearest kHz).
    Hz(u64),
}

impl FreqChoice {
    /// Parses `min`, `max` or a frequency such as `1.8GHz`.
    pub fn parse(spec: &str) -> Result<FreqChoice, CalibrateError> {
        match spec.trim() {
            "min" => Ok(FreqChoice::Min),
            "max" => Ok(FreqChoice::Max),
            other => Ok(FreqChoice::Hz(tandem::calibrate::parse_frequency(other)?.round() as u64)),
        }
    }
}

/// What to measure and for how long.
#[derive(Debug, Clone, PartialEq)]
pub struct MeasureConfig {
    /// Where sysfs lives: `/` on a device, a fixture tree in tests.
    pub sysfs_root: PathBuf,
    /// The target cluster's CPUs; core 0 among them is kept online but never
    /// loaded. They must share one cpufreq policy.
    pub cluster_cpus: Vec<usize>,
    /// The frequencies to pin, in order (typically f_min and f_max).
    pub freqs: Vec<FreqChoice>,
    /// Per-cluster or single activation.
    pub mode: ActivationMode,
    /// Length of every phase. The paper uses 10 min.
    pub phase: Duration,
    /// How often the idle/load sequence repeats at each frequency. The paper uses 5.
    pub repeats: usize,
    /// Fuel-gauge sampling period. 0.5 s, as in the paper.
    pub sample_period: Duration,
}

impl MeasureConfig {
    /// The paper's protocol (5 × 10 min phases, 0.5 s samples, per-cluster
    /// activation) on the real sysfs at `/`.
    pub fn new(cluster_cpus: Vec<usize>, freqs: Vec<FreqChoice>) -> MeasureConfig {
        MeasureConfig {
            sysfs_root: PathBuf::from("/"),
            cluster_cpus,
            freqs,
            mode: ActivationMode::Cluster,
            phase: Duration::from_secs(600),
            repeats: 5,
            sample_period: Duration::from_millis(500),
        }
    }
}

/// One thing the driver does, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Write `value` to a sysfs file (CPU hotplug).
    Write {
        /// The file.
        path: PathBuf,
        /// What to write.
        value: String,
    },
    /// Pin a cpufreq policy: `scaling_min_freq = scaling_max_freq = khz`,
    /// written in the order the kernel accepts.
    Pin {
        /// The policy folder.
        policy: PathBuf,
        /// The frequency, in kHz.
        khz: u64,
    },
    /// Sample the fuel gauge for `duration` under `phase`, with a stress
    /// worker on each of `load_cpus`.
    Phase {
        /// The label written to the trace.
        phase: Phase,
        /// The CPUs to load (empty for an idle phase).
        load_cpus: Vec<usize>,
        /// How long.
        duration: Duration,
    },
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Write { path, value } => write!(f, "echo {value} > {}", path.display()),
            Step::Pin { policy, khz } => {
                write!(f, "pin {} to {khz} kHz (scaling_min_freq = scaling_max_freq)", policy.display())
            }
            Step::Phase { phase, load_cpus, duration } => {
                write!(f, "phase {phase} for {:.3} s", duration.as_secs_f64())?;
                if load_cpus.is_empty() {
                    write!(f, ", idle")
                } else {
                    let cpus: Vec<String> = load_cpus.iter().map(ToString::to_string).collect();
                    write!(f, ", stress on cpu {}", cpus.join(","))
                }
            }
        }
    }
}

/// A file to put back as it was.
#[derive(Debug, Clone, PartialEq)]
enum Restore {
    Online { path: PathBuf, value: String },
    Range { policy: PathBuf, min_khz: u64, max_khz: u64 },
}

/// Everything [`run`] will do, found by [`plan`].
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The sysfs root it was planned on.
    pub sysfs_root: PathBuf,
    /// The steps, in order.
    pub steps: Vec<Step>,
    /// The battery supply folder (with `voltage_now` and `current_now`).
    pub battery: PathBuf,
    /// Regulator folders with a `microvolts` file, and their `name`.
    pub regulators: Vec<(PathBuf, String)>,
    /// Things the driver cannot control and that may bias the result.
    pub warnings: Vec<String>,
    /// How long the phases take in all.
    pub duration: Duration,
    sample_period: Duration,
    restore: Vec<Restore>,
}

impl Plan {
    /// Shell commands that put back every file the run writes, in order: for
    /// a run that was killed before it could restore them itself.
    pub fn restore_commands(&self) -> Vec<String> {
        let mut out = Vec::new();
        for r in ordered(&self.restore) {
            match r {
                Restore::Online { path, value } => out.push(format!("echo {value} > {}", path.display())),
                Restore::Range { policy, min_khz, max_khz } => {
                    // Min first is safe when going back down; the second write of min
                    // covers going up. Redundant writes are harmless.
                    let (min, max) = (policy.join("scaling_min_freq"), policy.join("scaling_max_freq"));
                    out.push(format!("echo {min_khz} > {}", min.display()));
                    out.push(format!("echo {max_khz} > {}", max.display()));
                    out.push(format!("echo {min_khz} > {}", min.display()));
                }
            }
        }
        out
    }
}

/// Online-ing writes first (so the policies are live), then frequency ranges,
/// then offline-ing writes.
fn ordered(restore: &[Restore]) -> Vec<&Restore> {
    let online = |r: &&Restore| matches!(r, Restore::Online { value, .. } if value != "0");
    let offline = |r: &&Restore| matches!(r, Restore::Online { value, .. } if value == "0");
    let range = |r: &&Restore| matches!(r, Restore::Range { .. });
    let mut out: Vec<&Restore> = restore.iter().filter(online).collect();
    out.extend(restore.iter().filter(range));
    out.extend(restore.iter().filter(offline));
    out
}

/// Reads sysfs under `config.sysfs_root` and plans the run. It writes nothing.
/// Refuses, naming the path, when the CPU folder, the target CPUs, their
/// cpufreq policy (or its `scaling_{min,max}_freq`), an `online` file it needs,
/// or a battery-type power supply with `voltage_now` and `current_now` is
/// missing. Regulators are optional.
pub fn plan(config: &MeasureConfig) -> Result<Plan, CalibrateError> {
    if config.freqs.is_empty() {
        return Err(CalibrateError::BadConfig("no frequencies to measure".into()));
    }
    if config.repeats == 0 {
        return Err(CalibrateError::BadConfig("repeats must be 1 or more".into()));
    }
    if config.sample_period.is_zero() || config.phase.is_zero() {
        return Err(CalibrateError::BadConfig("the phase and the sample period must be above 0".into()));
    }
    let root = &config.sysfs_root;
    let cpu_dir = root.join(CPU_DIR);
    if !cpu_dir.is_dir() {
        return Err(missing(&cpu_dir, "CPU folder"));
    }
    let present = cpus_in(&cpu_dir)?;
    let targets: Vec<usize> = config.cluster_cpus.iter().copied().filter(|&c| c != 0).collect();
    if targets.is_empty() {
        return Err(CalibrateError::BadConfig(
            "no target CPUs besides core 0, the housekeeping core, which is never loaded".into(),
        ));
    }
    for &cpu in &targets {
        if !present.contains(&cpu) {
            return Err(missing(&cpu_dir.join(format!("cpu{cpu}")), "target CPU"));
        }
    }

    let policy = policy_of_all(&cpu_dir, &targets)?;
    let core0_shares = policy_of(&cpu_dir, 0).is_ok_and(|p| p == policy);
    let mut warnings = Vec::new();
    let mut khz = Vec::new();
    for &choice in &config.freqs {
        khz.push(pinnable_khz(&policy, choice)?);
    }
    let range = Restore::Range {
        policy: policy.clone(),
        min_khz: read_u64(&policy.join("scaling_min_freq"))?,
        max_khz: read_u64(&policy.join("scaling_max_freq"))?,
    };

    let online_file = |cpu: usize| cpu_dir.join(format!("cpu{cpu}/online"));
    let mut restore = Vec::new();
    let mut steps = Vec::new();
    // Targets online first, so the policy is live; then everything else off.
    for &cpu in &targets {
        let path = online_file(cpu);
        if path.exists() {
            restore.push(Restore::Online { path: path.clone(), value: read_trimmed(&path)? });
            steps.push(Step::Write { path, value: "1".into() });
        } else if config.mode == ActivationMode::Single {
            return Err(missing(
                &path,
                "CPU-hotplug file, needed to take a target core offline for single activation",
            ));
        }
    }
    for &cpu in present.iter().filter(|c| **c != 0 && !targets.contains(c)) {
        let path = online_file(cpu);
        if path.exists() {
            restore.push(Restore::Online { path: path.clone(), value: read_trimmed(&path)? });
            steps.push(Step::Write { path, value: "0".into() });
        } else {
            warnings.push(format!("cpu{cpu} has no online file and stays online in every phase"));
        }
    }
    restore.push(range);

    let phase = |kind, khz: u64, load_cpus: Vec<usize>| Step::Phase {
        phase: Phase { kind, f_hz: khz * 1000 },
        load_cpus,
        duration: config.phase,
    };
    for &khz in &khz {
        match config.mode {
            ActivationMode::Cluster => {
                steps.push(Step::Pin { policy: policy.clone(), khz });
                for _ in 0..config.repeats {
                    steps.push(phase(PhaseKind::Idle, khz, Vec::new()));
                    steps.push(phase(PhaseKind::Load, khz, targets.clone()));
                }
            }
            ActivationMode::Single => {
                for _ in 0..config.repeats {
                    for &cpu in &targets {
                        steps.push(Step::Write { path: online_file(cpu), value: "0".into() });
                    }
                    // Core 0 alone still runs this policy's clock when it belongs to it.
                    if core0_shares {
                        steps.push(Step::Pin { policy: policy.clone(), khz });
                    }
                    steps.push(phase(PhaseKind::IdleBase, khz, Vec::new()));
                    for &cpu in &targets {
                        steps.push(Step::Write { path: online_file(cpu), value: "1".into() });
                        // Re-pin: a policy whose CPUs all went offline may come back reset.
                        steps.push(Step::Pin { policy: policy.clone(), khz });
                        steps.push(phase(PhaseKind::IdleWith(cpu), khz, Vec::new()));
                        steps.push(phase(PhaseKind::LoadCore(cpu), khz, vec![cpu]));
                        steps.push(Step::Write { path: online_file(cpu), value: "0".into() });
                    }
                }
            }
        }
    }
    let duration = steps
        .iter()
        .map(|s| match s {
            Step::Phase { duration, .. } => *duration,
            _ => Duration::ZERO,
        })
        .sum();
    Ok(Plan {
        sysfs_root: root.clone(),
        steps,
        battery: battery_supply(root)?,
        regulators: regulators(root)?,
        warnings,
        duration,
        sample_period: config.sample_period,
        restore,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tandem::calibrate::trace::{analyse, parse_log};
    use tandem::calibrate::{parse_cluster_cores, ClusterCores};

    /// A temp folder unique to this test.
    fn temp_root(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tandem-measure-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("test value");
        dir
    }

    fn put(root: &Path, rel: &str, text: &str) {
        let path = root.join(rel);
        fs::create_dir_all(path.parent().expect("test value")).expect("test value");
        fs::write(path, text).expect("test value");
    }

    fn get(root: &Path, rel: &str) -> String {
        fs::read_to_string(root.join(rel)).expect("test value").trim().to_string()
    }

    /// A tri-cluster phone: little 0-3, big 4-6, prime 7; cpu7 offline; a 4 V
    /// battery drawing 0.5 A at idle; one regulator.
    fn fake_phone(root: &Path) {
        let cpu = CPU_DIR;
        for n in 0..8 {
            put(root, &format!("{cpu}/cpu{n}/topology/core_id"), &n.to_string());
            if n > 0 {
                put(root, &format!("{cpu}/cpu{n}/online"), if n == 7 { "0\n" } else { "1\n" });
            }
        }
        for (policy, related, lo, hi) in
            [(0, "0-3", 300000, 1700000), (4, "4-6", 400000, 2370000), (7, "7", 500000, 2910000)]
        {
            let p = format!("{cpu}/cpufreq/policy{policy}");
            put(root, &format!("{p}/related_cpus"), &format!("{related}\n"));
            put(root, &format!("{p}/cpuinfo_min_freq"), &format!("{lo}\n"));
            put(root, &format!("{p}/cpuinfo_max_freq"), &format!("{hi}\n"));
            put(root, &format!("{p}/scaling_min_freq"), &format!("{lo}\n"));
            put(root, &format!("{p}/scaling_max_freq"), &format!("{hi}\n"));
        }
        put(
            root,
            &format!("{cpu}/cpufreq/policy4/scaling_available_frequencies"),
            "400000 1200000 2370000\n",
        );
        put(root, "sys/class/power_supply/usb/type", "USB\n");
        put(root, "sys/class/power_supply/battery/type", "Battery\n");
        put(root, "sys/class/power_supply/battery/voltage_now", "4000000\n");
        put(root, "sys/class/power_supply/battery/current_now", "-500000\n");
        put(root, "sys/class/regulator/regulator.7/name", "vdd_cpu_big\n");
        put(root, "sys/class/regulator/regulator.7/microvolts", "550000\n");
    }

    /// Time that passes only when slept.
    struct VirtualClock(Duration);

    impl Clock for VirtualClock {
        fn now(&self) -> Duration {
            self.0
        }
        fn sleep(&mut self, d: Duration) {
            self.0 += d;
        }
    }

    /// A load that raises the fake battery current by 0.25 A per loaded CPU,
    /// and records what sysfs looked like when it started.
    struct FakeLoad {
        root: PathBuf,
        seen: Vec<(Vec<usize>, String, String, Vec<String>)>,
    }

    impl Stress for FakeLoad {
        fn start(&mut self, cpus: &[usize]) -> Result<(), CalibrateError> {
            let ua = -500_000 - 250_000 * cpus.len() as i64;
            put(&self.root, "sys/class/power_supply/battery/current_now", &ua.to_string());
            let p = format!("{CPU_DIR}/cpufreq/policy4");
            let online = (1..8).map(|n| get(&self.root, &format!("{CPU_DIR}/cpu{n}/online"))).collect();
            self.seen.push((
                cpus.to_vec(),
                get(&self.root, &format!("{p}/scaling_min_freq")),
                get(&self.root, &format!("{p}/scaling_max_freq")),
                online,
            ));
            Ok(())
        }
        fn stop(&mut self) {
            put(&self.root, "sys/class/power_supply/battery/current_now", "-500000");
        }
    }

    fn config(root: &Path, mode: ActivationMode) -> MeasureConfig {
        MeasureConfig {
            sysfs_root: root.into(),
            cluster_cpus: vec![4, 5, 6],
            freqs: vec![FreqChoice::Min, FreqChoice::Hz(2_370_000_000)],
            mode,
            phase: Duration::from_secs(1),
            repeats: 2,
            sample_period: Duration::from_millis(250),
        }
    }

    fn measure(root: &Path, mode: ActivationMode) -> (MeasureSummary, FakeLoad, String, String) {
        let plan = plan(&config(root, mode)).expect("test value");
        let mut load = FakeLoad { root: root.into(), seen: Vec::new() };
        let (trace, regs) = (root.join("trace.csv"), root.join("trace.regulators.csv"));
        let summary = run(&plan, &mut VirtualClock(Duration::ZERO), &mut load, &trace, &regs, &mut |_| {})
            .expect("test value");
        (
            summary,
            load,
            fs::read_to_string(trace).expect("test value"),
            fs::read_to_string(regs).expect("test value"),
        )
    }

    fn assert_restored(root: &Path) {
        let p = format!("{CPU_DIR}/cpufreq/policy4");
        assert_eq!(get(root, &format!("{p}/scaling_min_freq")), "400000");
        assert_eq!(get(root, &format!("{p}/scaling_max_freq")), "2370000");
        for n in 1..8 {
            let want = if n == 7 { "0" } else { "1" };
            assert_eq!(get(root, &format!("{CPU_DIR}/cpu{n}/online")), want, "cpu{n}");
        }
        assert!(!root.join(format!("{CPU_DIR}/cpu0/online")).exists(), "core 0 is never touched");
    }

    #[test]
    fn cluster_mode_pins_offlines_samples_and_restores() {
        let root = temp_root("cluster");
        fake_phone(&root);
        let (summary, load, trace, regs) = measure(&root, ActivationMode::Cluster);
        assert_eq!(summary, MeasureSummary { phases: 8, samples: 32, regulator_rows: 32 });
        // Each load phase ran with the policy pinned and only cores 0 and 4-6 online.
        assert_eq!(load.seen.len(), 4);
        for (i, (cpus, min, max, online)) in load.seen.iter().enumerate() {
            let khz = if i < 2 { "400000" } else { "2370000" };
            assert_eq!((cpus.as_slice(), min.as_str(), max.as_str()), (&[4, 5, 6][..], khz, khz));
            assert_eq!(online, &["0", "0", "0", "1", "1", "1", "0"]);
        }
        assert_restored(&root);

        let lines: Vec<&str> = trace.lines().collect();
        assert_eq!(lines[0], TRACE_HEADER);
        assert_eq!(lines[1], "0.000,4,-0.5,idle@400000000");
        assert_eq!(lines[5], "1.000,4,-1.25,load@400000000");
        assert!(lines.last().expect("test value").ends_with(",load@2370000000"));
        assert_eq!(regs.lines().next(), Some(REGULATOR_HEADER));
        assert_eq!(regs.lines().nth(1), Some("0.000,regulator.7,vdd_cpu_big,550000"));

        // The trace it wrote is what `calibrate trace` reads: 4 V × 0.75 A more under load.
        let report = analyse(&parse_log(&trace).expect("test value"), &[]).expect("test value");
        let dyn_: Vec<(u64, f64, usize)> =
            report.derived.iter().map(|q| (q.f_hz, q.mean_w, q.repeats)).collect();
        assert_eq!(dyn_, [(400_000_000, 3.0, 2), (2_370_000_000, 3.0, 2)]);
    }

    #[test]
    fn single_mode_activates_one_core_at_a_time() {
        let root = temp_root("single");
        fake_phone(&root);
        let (summary, load, trace, _) = measure(&root, ActivationMode::Single);
        // Per frequency and repeat: idle0, then idle0+K and loadK for K = 4, 5, 6.
        assert_eq!(summary.phases, 2 * 2 * 7);
        assert_eq!(load.seen.len(), 2 * 2 * 3);
        let (cpus, min, max, online) = &load.seen[1];
        assert_eq!((cpus.as_slice(), min.as_str(), max.as_str()), (&[5][..], "400000", "400000"));
        assert_eq!(online, &["0", "0", "0", "0", "1", "0", "0"], "only cores 0 and 5");
        assert_restored(&root);

        let clusters: Vec<ClusterCores> = parse_cluster_cores("big=4-6").expect("test value");
        let report = analyse(&parse_log(&trace).expect("test value"), &clusters).expect("test value");
        let labels: Vec<&str> = report.phases.iter().map(|q| q.label.as_str()).take(3).collect();
        assert_eq!(labels, ["idle0@400000000", "idle0+4@400000000", "load4@400000000"]);
        let big = report.derived.iter().find(|q| q.label == "P_dyn[big]@2370000000").expect("test value");
        // P_core_K = 4·0.75 + 2 − 2 = 3 W per core, 9 W for the cluster.
        assert_eq!((big.mean_w, big.repeats), (9.0, 2));
    }

    #[test]
    fn a_failing_step_still_restores() {
        let root = temp_root("failing");
        fake_phone(&root);
        let plan = plan(&config(&root, ActivationMode::Cluster)).expect("test value");
        // The gauge disappears mid-run.
        fs::remove_file(root.join("sys/class/power_supply/battery/voltage_now")).expect("test value");
        let mut load = FakeLoad { root: root.clone(), seen: Vec::new() };
        let e = run(
            &plan,
            &mut VirtualClock(Duration::ZERO),
            &mut load,
            &root.join("t.csv"),
            &root.join("t.regulators.csv"),
            &mut |_| {},
        )
        .expect_err("an error");
        assert!(e.to_string().contains("voltage_now"), "{e}");
        assert_restored(&root);
    }

    #[test]
    fn missing_sysfs_is_named() {
        let root = temp_root("missing");
        fake_phone(&root);
        let cases: [(&str, &str); 5] = [
            ("sys/class/power_supply/battery/current_now", "missing fuel-gauge file"),
            ("sys/class/power_supply/battery/type", "power supply of type Battery"),
            ("sys/devices/system/cpu/cpufreq/policy4/related_cpus", "cpufreq policy of cpu4"),
            ("sys/devices/system/cpu/cpufreq/policy4/scaling_max_freq", "policy4/scaling_max_freq"),
            ("sys/devices/system/cpu/cpu5/online", "cpu5/online"),
        ];
        for (file, needle) in cases {
            fake_phone(&root);
            fs::remove_file(root.join(file)).expect("test value");
            let e = plan(&config(&root, ActivationMode::Single)).expect_err("an error").to_string();
            assert!(e.contains(needle), "{file}: {e}");
        }
        let e =
            plan(&config(&root.join("nowhere"), ActivationMode::Cluster)).expect_err("an error").to_string();
        assert!(e.contains("missing CPU folder") && e.contains("nowhere"), "{e}");
    }

    #[test]
    fn bad_configs_are_refused() {
        let root = temp_root("config");
        fake_phone(&root);
        let mut c = config(&root, ActivationMode::Cluster);
        c.freqs = vec![FreqChoice::Hz(1_000_000_000)];
        assert!(plan(&c).expect_err("an error").to_string().contains("does not offer 1000000 kHz"));
        c.freqs = vec![FreqChoice::Max];
        c.cluster_cpus = vec![3, 4];
        assert!(plan(&c).expect_err("an error").to_string().contains("several cpufreq policies"));
        c.cluster_cpus = vec![0];
        assert!(plan(&c).expect_err("an error").to_string().contains("housekeeping"));
        c.cluster_cpus = vec![9];
        assert!(plan(&c).expect_err("an error").to_string().contains("cpu9"));
    }

    #[test]
    fn the_real_sysfs_needs_root() {
        let e = require_root(Path::new("/"), Some(1000)).expect_err("an error").to_string();
        assert!(e.contains("must run as root") && e.contains("uid 1000") && e.contains("--dry-run"), "{e}");
        assert!(require_root(Path::new("/"), None).is_err());
        assert!(require_root(Path::new("/"), Some(0)).is_ok());
        assert!(require_root(&std::env::temp_dir(), Some(1000)).is_ok());
    }

    #[test]
    fn plan_prints_and_lists_undo_commands() {
        let root = temp_root("plan");
        fake_phone(&root);
        let plan = plan(&config(&root, ActivationMode::Cluster)).expect("test value");
        assert_eq!(plan.duration, Duration::from_secs(8));
        let text: Vec<String> = plan.steps.iter().map(ToString::to_string).collect();
        assert!(text[0].starts_with("echo 1 > ") && text[0].ends_with("cpu4/online"), "{text:?}");
        assert!(text.iter().any(|s| s.contains("to 400000 kHz")), "{text:?}");
        assert!(
            text.iter().any(|s| s == "phase load@2370000000 for 1.000 s, stress on cpu 4,5,6"),
            "{text:?}"
        );
        let undo = plan.restore_commands();
        assert!(undo.first().is_some_and(|c| c.starts_with("echo 1 > ")), "{undo:?}");
        assert!(
            undo.last().is_some_and(|c| c.starts_with("echo 0 > ") && c.ends_with("cpu7/online")),
            "{undo:?}"
        );
        assert_eq!(regulators_path(Path::new("a/run.csv")), Path::new("a/run.regulators.csv"));
        assert_eq!(regulators_path(Path::new("run.log")), Path::new("run.log.regulators.csv"));
    }

    #[test]
    fn busy_loop_starts_and_stops() {
        let mut load = BusyLoop::new();
        load.start(&[0]).expect("test value");
        load.stop();
        load.stop();
    }
}
