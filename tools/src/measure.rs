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

fn missing(path: &Path, what: &str) -> CalibrateError {
    CalibrateError::MissingSysfs { path: path.to_path_buf(), what: what.into() }
}

fn read_trimmed(path: &Path) -> Result<String, CalibrateError> {
    fs::read_to_string(path).map(|s| s.trim().to_string()).map_err(|source| CalibrateError::Io {
        action: "read",
        path: path.into(),
        source,
    })
}

fn read_u64(path: &Path) -> Result<u64, CalibrateError> {
    let text = read_trimmed(path)?;
    text.parse()
        .map_err(|_| CalibrateError::BadConfig(format!("{} holds '{text}', not a number", path.display())))
}

fn read_i64(path: &Path) -> Result<i64, CalibrateError> {
    let text = read_trimmed(path)?;
    text.parse()
        .map_err(|_| CalibrateError::BadConfig(format!("{} holds '{text}', not a number", path.display())))
}

fn write(path: &Path, value: &str) -> Result<(), CalibrateError> {
    fs::write(path, value).map_err(|source| CalibrateError::Io { action: "write", path: path.into(), source })
}

fn list(dir: &Path) -> Result<Vec<PathBuf>, CalibrateError> {
    let entries = fs::read_dir(dir).map_err(|source| CalibrateError::Io {
        action: "list",
        path: dir.into(),
        source,
    })?;
    let mut out: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    out.sort();
    Ok(out)
}

/// The `cpuN` folders under the CPU folder.
fn cpus_in(cpu_dir: &Path) -> Result<BTreeSet<usize>, CalibrateError> {
    Ok(list(cpu_dir)?
        .iter()
        .filter_map(|p| p.file_name()?.to_str()?.strip_prefix("cpu")?.parse().ok())
        .collect())
}

/// The one cpufreq policy folder all `cpus` share.
fn policy_of_all(cpu_dir: &Path, cpus: &[usize]) -> Result<PathBuf, CalibrateError> {
    let mut policies = Vec::new();
    for &cpu in cpus {
        let policy = policy_of(cpu_dir, cpu)?;
        if !policies.contains(&policy) {
            policies.push(policy);
        }
    }
    if let [one] = &policies[..] {
        for file in ["scaling_min_freq", "scaling_max_freq"] {
            if !one.join(file).exists() {
                return Err(missing(&one.join(file), "cpufreq file"));
            }
        }
        return Ok(one.clone());
    }
    let names: Vec<String> = policies.iter().map(|p| p.display().to_string()).collect();
    Err(CalibrateError::BadConfig(format!(
        "the target CPUs span several cpufreq policies ({}); measure one cluster at a time",
        names.join(", ")
    )))
}

/// `cpuN/cpufreq` (a link to the policy on most kernels), else the
/// `cpufreq/policy*` whose `related_cpus` lists the CPU.
fn policy_of(cpu_dir: &Path, cpu: usize) -> Result<PathBuf, CalibrateError> {
    let direct = cpu_dir.join(format!("cpu{cpu}/cpufreq"));
    if direct.is_dir() {
        return Ok(fs::canonicalize(&direct).unwrap_or(direct));
    }
    let policies = cpu_dir.join("cpufreq");
    if policies.is_dir() {
        for policy in list(&policies)? {
            let related = ["related_cpus", "affected_cpus"]
                .iter()
                .find_map(|f| fs::read_to_string(policy.join(f)).ok())
                .and_then(|s| parse_cpu_list(&s).ok());
            if related.is_some_and(|cpus| cpus.contains(&cpu)) {
                return Ok(fs::canonicalize(&policy).unwrap_or(policy));
            }
        }
    }
    Err(missing(
        &direct,
        &format!(
            "cpufreq policy of cpu{cpu} (nor does any {}/policy*/related_cpus list it)",
            policies.display()
        ),
    ))
}

/// The frequency in kHz, checked against what the policy offers.
fn pinnable_khz(policy: &Path, choice: FreqChoice) -> Result<u64, CalibrateError> {
    let info = |name: &str| {
        let path = policy.join(name);
        if path.exists() {
            read_u64(&path).map(Some)
        } else {
            Ok(None)
        }
    };
    let (lo, hi) = (info("cpuinfo_min_freq")?, info("cpuinfo_max_freq")?);
    let khz = match choice {
        FreqChoice::Hz(hz) => (hz as f64 / 1000.0).round() as u64,
        FreqChoice::Min => {
            lo.ok_or_else(|| missing(&policy.join("cpuinfo_min_freq"), "cpufreq file for 'min'"))?
        }
        FreqChoice::Max => {
            hi.ok_or_else(|| missing(&policy.join("cpuinfo_max_freq"), "cpufreq file for 'max'"))?
        }
    };
    let available = policy.join("scaling_available_frequencies");
    if available.exists() {
        let text = read_trimmed(&available)?;
        let offered: Vec<u64> = text.split_whitespace().filter_map(|s| s.parse().ok()).collect();
        if !offered.is_empty() && !offered.contains(&khz) {
            return Err(CalibrateError::BadConfig(format!(
                "{} does not offer {khz} kHz; it offers: {text}",
                policy.display()
            )));
        }
    } else if lo.is_some_and(|lo| khz < lo) || hi.is_some_and(|hi| khz > hi) {
        return Err(CalibrateError::BadConfig(format!(
            "{khz} kHz is outside {}'s range {}..{} kHz",
            policy.display(),
            lo.unwrap_or(0),
            hi.unwrap_or(u64::MAX)
        )));
    }
    Ok(khz)
}

/// The first power supply (by name) whose `type` is `Battery`, with
/// `voltage_now` and `current_now`.
fn battery_supply(root: &Path) -> Result<PathBuf, CalibrateError> {
    let dir = root.join(POWER_SUPPLY_DIR);
    if !dir.is_dir() {
        return Err(missing(&dir, "power-supply folder (the fuel gauge)"));
    }
    let battery = list(&dir)?
        .into_iter()
        .find(|p| fs::read_to_string(p.join("type")).is_ok_and(|t| t.trim() == "Battery"))
        .ok_or_else(|| missing(&dir.join("*/type"), "power supply of type Battery (the fuel gauge)"))?;
    for file in ["voltage_now", "current_now"] {
        if !battery.join(file).exists() {
            return Err(missing(&battery.join(file), "fuel-gauge file"));
        }
    }
    Ok(battery)
}

/// Regulators with a `microvolts` file, and their `name` (empty when absent).
fn regulators(root: &Path) -> Result<Vec<(PathBuf, String)>, CalibrateError> {
    let dir = root.join(REGULATOR_DIR);
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    Ok(list(&dir)?
        .into_iter()
        .filter(|p| p.join("microvolts").exists())
        .map(|p| {
            let name = fs::read_to_string(p.join("name")).map(|s| s.trim().to_string()).unwrap_or_default();
            (p, name)
        })
        .collect())
}

/// The regulator log next to the trace: `run.csv` → `run.regulators.csv`.
pub fn regulators_path(trace: &Path) -> PathBuf {
    if trace.extension().is_some_and(|e| e == "csv") {
        trace.with_extension("regulators.csv")
    } else {
        let mut name = trace.as_os_str().to_owned();
        name.push(".regulators.csv");
        PathBuf::from(name)
    }
}

/// The effective uid of this process.
pub fn current_uid() -> Option<u32> {
    Some(rustix::process::geteuid().as_raw())
}

/// Refuses to drive the real `/sys` (a root that resolves to `/`) unless `uid`
/// is 0. A fixture tree needs no privileges.
pub fn require_root(sysfs_root: &Path, uid: Option<u32>) -> Result<(), CalibrateError> {
    let real = fs::canonicalize(sysfs_root).map_or(sysfs_root == Path::new("/"), |p| p == Path::new("/"));
    if real && uid != Some(0) {
        let uid = uid.map_or_else(|| "an unknown uid".to_string(), |u| format!("uid {u}"));
        return Err(CalibrateError::NotRoot { uid });
    }
    Ok(())
}

/// Time for the driver: real in the CLI, virtual in tests.
pub trait Clock {
    /// Time since the run started.
    fn now(&self) -> Duration;
    /// Waits for `d`.
    fn sleep(&mut self, d: Duration);
}

/// Wall-clock time since it was made.
#[derive(Debug, Clone, Copy)]
pub struct SystemClock(Instant);

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock(Instant::now())
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Duration {
        self.0.elapsed()
    }

    fn sleep(&mut self, d: Duration) {
        std::thread::sleep(d);
    }
}

/// The CPU load of a load phase.
pub trait Stress {
    /// Starts one busy worker per CPU in `cpus`.
    fn start(&mut self, cpus: &[usize]) -> Result<(), CalibrateError>;
    /// Stops every worker; a no-op when none runs.
    fn stop(&mut self);
}

/// Busy-loop threads, each pinned to its CPU with `sched_setaffinity`.
/// Where that fails
/// (e.g. the CPU does not exist on this machine), the worker runs unpinned and
/// its CPU is listed in [`BusyLoop::unpinned`]; with the other cores offline
/// the scheduler has only the target cores to run it on anyway.
#[derive(Debug, Default)]
pub struct BusyLoop {
    stop: Arc<AtomicBool>,
    workers: Vec<JoinHandle<()>>,
    unpinned: BTreeSet<usize>,
}

impl BusyLoop {
    /// No workers yet.
    pub fn new() -> BusyLoop {
        BusyLoop::default()
    }

    /// CPUs whose worker could not be pinned, over the whole run.
    pub fn unpinned(&self) -> &BTreeSet<usize> {
        &self.unpinned
    }
}

impl Stress for BusyLoop {
    fn start(&mut self, cpus: &[usize]) -> Result<(), CalibrateError> {
        self.stop();
        self.stop = Arc::new(AtomicBool::new(false));
        let (pinned_tx, pinned_rx) = mpsc::channel();
        for &cpu in cpus {
            let stop = self.stop.clone();
            let pinned_tx = pinned_tx.clone();
            let worker = std::thread::Builder::new()
                .name(format!("stress-cpu{cpu}"))
                .spawn(move || {
                    let _ = pinned_tx.send((cpu, pin_this_thread(cpu)));
                    drop(pinned_tx);
                    let mut x = 1u64;
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..10_000 {
                            x = std::hint::black_box(
                                x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1),
                            );
                        }
                    }
                })
                .map_err(|source| CalibrateError::Worker { cpu, source })?;
            self.workers.push(worker);
        }
        drop(pinned_tx);
        // Each worker reports once and drops its sender; one that died early just ends the wait.
        for (cpu, pinned) in pinned_rx.iter().take(cpus.len()) {
            if !pinned {
                self.unpinned.insert(cpu);
            }
        }
        Ok(())
    }

    fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
    }
}

impl Drop for BusyLoop {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Pins the calling thread to `cpu`; false when that fails.
fn pin_this_thread(cpu: usize) -> bool {
    use rustix::thread::{sched_setaffinity, CpuSet};
    if cpu >= CpuSet::MAX_CPU {
        return false;
    }
    let mut set = CpuSet::new();
    set.set(cpu);
    sched_setaffinity(None, &set).is_ok()
}

/// What a run recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeasureSummary {
    /// Phases run.
    pub phases: usize,
    /// Fuel-gauge samples written to the trace.
    pub samples: usize,
    /// Rows written to the regulator log.
    pub regulator_rows: usize,
}

/// Runs `plan`: writes the trace to `trace_out` (the format of
/// [`tandem::calibrate::trace`]) and the regulator log to `regulators_out`, calling
/// `progress` before each step, then restores every file it wrote, also when
/// a step fails or panics. Refuses the real `/sys` when not root
/// ([`require_root`]).
pub fn run(
    plan: &Plan,
    clock: &mut dyn Clock,
    stress: &mut dyn Stress,
    trace_out: &Path,
    regulators_out: &Path,
    progress: &mut dyn FnMut(&Step),
) -> Result<MeasureSummary, CalibrateError> {
    require_root(&plan.sysfs_root, current_uid())?;
    let mut trace = csv_writer(trace_out, TRACE_HEADER)?;
    let mut regs = csv_writer(regulators_out, REGULATOR_HEADER)?;
    let mut restorer = Restorer { restore: &plan.restore, done: false };
    let mut recorder = Recorder {
        plan,
        trace: &mut trace,
        trace_path: trace_out,
        regs: &mut regs,
        regs_path: regulators_out,
        summary: MeasureSummary { phases: 0, samples: 0, regulator_rows: 0 },
    };
    let result = plan.steps.iter().try_for_each(|step| {
        progress(step);
        recorder.step(step, clock, stress)
    });
    stress.stop();
    let summary = recorder.summary;
    let restored = restorer.restore();
    match (result, restored) {
        (Err(e), Err(r)) => {
            tracing::error!("restoring sysfs after a failed run also failed: {r}");
            Err(e)
        }
        (Err(e), Ok(())) | (Ok(()), Err(e)) => Err(e),
        (Ok(()), Ok(())) => Ok(summary),
    }
}

fn csv_writer(path: &Path, header: &str) -> Result<csv::Writer<fs::File>, CalibrateError> {
    let file = fs::File::create(path).map_err(|source| CalibrateError::Io {
        action: "create",
        path: path.into(),
        source,
    })?;
    let mut w = csv::Writer::from_writer(file);
    w.write_record(header.split(',')).map_err(|e| csv_io(path, e))?;
    Ok(w)
}

fn csv_io(path: &Path, e: csv::Error) -> CalibrateError {
    CalibrateError::Io { action: "write", path: path.into(), source: std::io::Error::other(e) }
}

struct Recorder<'a> {
    plan: &'a Plan,
    trace: &'a mut csv::Writer<fs::File>,
    trace_path: &'a Path,
    regs: &'a mut csv::Writer<fs::File>,
    regs_path: &'a Path,
    summary: MeasureSummary,
}

impl Recorder<'_> {
    fn step(
        &mut self,
        step: &Step,
        clock: &mut dyn Clock,
        stress: &mut dyn Stress,
    ) -> Result<(), CalibrateError> {
        match step {
            Step::Write { path, value } => write(path, value),
            Step::Pin { policy, khz } => set_range(policy, *khz, *khz),
            Step::Phase { phase, load_cpus, duration } => {
                if !load_cpus.is_empty() {
                    stress.start(load_cpus)?;
                }
                let sampled = self.phase(phase, *duration, clock);
                stress.stop();
                sampled?;
                self.summary.phases += 1;
                self.trace.flush().map_err(|source| CalibrateError::Io {
                    action: "write",
                    path: self.trace_path.into(),
                    source,
                })?;
                self.regs.flush().map_err(|source| CalibrateError::Io {
                    action: "write",
                    path: self.regs_path.into(),
                    source,
                })
            }
        }
    }

    /// Samples every period from the phase's start, then waits out its end.
    fn phase(
        &mut self,
        phase: &Phase,
        duration: Duration,
        clock: &mut dyn Clock,
    ) -> Result<(), CalibrateError> {
        let period = self.plan.sample_period;
        let start = clock.now();
        let samples = (duration.as_nanos() / period.as_nanos()).max(1);
        let label = phase.to_string();
        for i in 0..samples {
            let due = start + period.saturating_mul(i as u32);
            clock.sleep(due.saturating_sub(clock.now()));
            self.sample(clock.now(), &label)?;
        }
        clock.sleep((start + duration).saturating_sub(clock.now()));
        Ok(())
    }

    fn sample(&mut self, t: Duration, label: &str) -> Result<(), CalibrateError> {
        let t_s = format!("{:.3}", t.as_secs_f64());
        let microvolts = read_i64(&self.plan.battery.join("voltage_now"))?;
        let microamps = read_i64(&self.plan.battery.join("current_now"))?;
        let row = [
            t_s.clone(),
            (microvolts as f64 / 1e6).to_string(),
            (microamps as f64 / 1e6).to_string(),
            label.into(),
        ];
        self.trace.write_record(&row).map_err(|e| csv_io(self.trace_path, e))?;
        self.summary.samples += 1;
        for (dir, name) in &self.plan.regulators {
            // A regulator that is switched off may refuse the read; skip it then.
            let Ok(uv) = read_trimmed(&dir.join("microvolts")) else { continue };
            let id = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            self.regs.write_record([t_s.as_str(), &id, name, &uv]).map_err(|e| csv_io(self.regs_path, e))?;
            self.summary.regulator_rows += 1;
        }
        Ok(())
    }
}

/// Sets a policy's range, writing in the order the kernel accepts: max first
/// when the new max is not below the current min, else min first.
fn set_range(policy: &Path, min_khz: u64, max_khz: u64) -> Result<(), CalibrateError> {
    let (min_path, max_path) = (policy.join("scaling_min_freq"), policy.join("scaling_max_freq"));
    let current_min = read_u64(&min_path).unwrap_or(0);
    if max_khz >= current_min {
        write(&max_path, &max_khz.to_string())?;
        write(&min_path, &min_khz.to_string())
    } else {
        write(&min_path, &min_khz.to_string())?;
        write(&max_path, &max_khz.to_string())
    }
}

/// Puts every written file back; on drop too (a panic), if not done yet.
struct Restorer<'a> {
    restore: &'a [Restore],
    done: bool,
}

impl Restorer<'_> {
    /// Tries every item, and returns the first failure.
    fn restore(&mut self) -> Result<(), CalibrateError> {
        self.done = true;
        let mut first_error = None;
        for item in ordered(self.restore) {
            let result = match item {
                Restore::Online { path, value } => write(path, value),
                Restore::Range { policy, min_khz, max_khz } => set_range(policy, *min_khz, *max_khz),
            };
            if let Err(e) = result {
                tracing::error!("cannot restore: {e}");
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

impl Drop for Restorer<'_> {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.restore();
        }
    }
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
