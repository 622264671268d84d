//! `tandem-wearable calibrate`: power-model calibration (SPEC.md 3.4).
//!
//! `fit` turns measured dynamic power into C_eff and ε per cluster, `trace`
//! derives dynamic power from a battery log, and `measure` records such a log
//! on a rooted device. The work is in [`tandem::calibrate`].

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use tandem::calibrate::{fit, parse_cluster_cores, parse_cpu_list, trace};
use tandem_tools::measure::{self, ActivationMode, BusyLoop, FreqChoice, MeasureConfig, Step, SystemClock};

/// The `calibrate` subcommands.
#[derive(clap::Subcommand)]
pub enum CalibrateCommand {
    /// Fit C_eff and epsilon per cluster from measured dynamic power, and show
    /// how well the analytical (C_eff·V²·f) and approximate (ε·f³) models
    /// predict every point.
    Fit {
        /// CSV with the header device,cluster,f_hz,v_volts,p_dyn_w.
        #[arg(long)]
        measurements: PathBuf,
        /// Store the fitted c_eff_farads and epsilon in this device profile
        /// (TOML or JSON), for the clusters it has by name.
        #[arg(long)]
        write_profile: Option<PathBuf>,
    },
    /// Derive phase powers and dynamic power (mean and std over repeats) from a
    /// battery log with the header t_s,v_batt,i_batt,phase.
    Trace {
        /// The battery log (as written by `calibrate measure`, or a Power
        /// Profiler export with a phase column).
        #[arg(long)]
        log: PathBuf,
        /// Cluster membership for single activation, e.g. little=1-3,big=4-6,prime=7.
        #[arg(long)]
        cores: Option<String>,
    },
    /// Record a battery log on a rooted Linux/Android device: pin the
    /// frequency, take cores offline, load the target cores, sample the fuel
    /// gauge, and restore everything at the end.
    Measure(MeasureArgs),
}

/// How a cluster is activated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Load all target cores at once, every other cluster offline.
    Cluster,
    /// Only core 0 and one target core online at a time (more accurate).
    Single,
}

/// Arguments of `calibrate measure`.
#[derive(clap::Args)]
pub struct MeasureArgs {
    /// Write the trace (t_s,v_batt,i_batt,phase) here, and the regulator log
    /// next to it as <stem>.regulators.csv.
    #[arg(long)]
    pub out: PathBuf,
    /// Where sysfs lives (a fixture tree in tests).
    #[arg(long, default_value = "/")]
    pub sysfs_root: PathBuf,
    /// The target cluster's CPUs, e.g. 4-6 (one cpufreq policy).
    #[arg(long)]
    pub cluster_cpus: String,
    /// Frequencies to pin, comma-separated: min, max, or Hz with an optional
    /// unit (e.g. min,max or 400MHz,2.37GHz).
    #[arg(long)]
    pub freqs: String,
    /// Per-cluster or single activation.
    #[arg(long, value_enum, default_value = "cluster")]
    pub mode: Mode,
    /// Length of each phase, in seconds (fractions allowed).
    #[arg(long, default_value_t = 600.0)]
    pub phase_secs: f64,
    /// Repeats of the idle/load sequence at each frequency.
    #[arg(long, default_value_t = 5)]
    pub repeats: usize,
    /// Fuel-gauge sampling period, in milliseconds.
    #[arg(long, default_value_t = 500)]
    pub sample_ms: u64,
    /// Print the plan (every write and phase) and the undo commands; change nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// Runs one `calibrate` subcommand.
pub fn run(cmd: CalibrateCommand) -> Result<ExitCode> {
    match cmd {
        CalibrateCommand::Fit { measurements, write_profile } => {
            run_fit(&measurements, write_profile.as_deref())
        }
        CalibrateCommand::Trace { log, cores } => run_trace(&log, cores.as_deref()),
        CalibrateCommand::Measure(args) => run_measure(&args),
    }
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}

fn run_fit(measurements: &Path, write_profile: Option<&Path>) -> Result<ExitCode> {
    let points = fit::parse_measurements(&read(measurements)?)
        .with_context(|| format!("{}", measurements.display()))?;
    let fits = fit::fit(&points);
    print!("{}", fit::fit_table(&fits));
    for f in &fits {
        println!("{}", serde_json::to_string(f)?);
    }
    if let Some(profile) = write_profile {
        write_fits_to_profile(&fits, profile, measurements)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Stores the fits in the profile file, through a temporary file and a rename.
fn write_fits_to_profile(fits: &[fit::ClusterFit], path: &Path, source: &Path) -> Result<()> {
    let Some(format) = fit::ProfileFormat::of_path(path) else {
        bail!("--write-profile {}: use a .toml or .json file", path.display());
    };
    let text = read(path)?;
    let update = fit::update_profile(&text, format, fits, &source.display().to_string())
        .with_context(|| format!("--write-profile {}", path.display()))?;
    let names = |v: &[String]| if v.is_empty() { "none".to_string() } else { v.join(", ") };
    if update.updated.is_empty() {
        bail!(
            "--write-profile {}: none of the fitted clusters ({}) is in the profile (its clusters: {}); \
             the file is unchanged",
            path.display(),
            names(&update.missing),
            names(&update.not_fitted)
        );
    }
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, &update.text).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot replace {}", path.display()))?;
    eprintln!("profile {}: updated clusters: {}", path.display(), names(&update.updated));
    if !update.missing.is_empty() {
        eprintln!("profile {}: no such cluster, not written: {}", path.display(), names(&update.missing));
    }
    if !update.not_fitted.is_empty() {
        eprintln!(
            "profile {}: not in the measurements, left as they were: {}",
            path.display(),
            names(&update.not_fitted)
        );
    }
    if !update.comments_kept {
        eprintln!("profile {}: rewritten whole; its comments were dropped", path.display());
    }
    Ok(())
}

fn run_trace(log: &Path, cores: Option<&str>) -> Result<ExitCode> {
    let clusters = cores.map(parse_cluster_cores).transpose().context("--cores")?.unwrap_or_default();
    let samples = trace::parse_log(&read(log)?).with_context(|| format!("{}", log.display()))?;
    let report = trace::analyse(&samples, &clusters).with_context(|| format!("{}", log.display()))?;
    print!("{}", trace::trace_table(&report));
    for q in report.phases.iter().chain(&report.derived) {
        println!("{}", serde_json::to_string(q)?);
    }
    Ok(ExitCode::SUCCESS)
}

fn run_measure(args: &MeasureArgs) -> Result<ExitCode> {
    let freqs = args
        .freqs
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(FreqChoice::parse)
        .collect::<Result<Vec<_>, _>>()
        .context("--freqs")?;
    if !args.phase_secs.is_finite() || args.phase_secs <= 0.0 {
        bail!("--phase-secs must be above 0, got {}", args.phase_secs);
    }
    let config = MeasureConfig {
        sysfs_root: args.sysfs_root.clone(),
        cluster_cpus: parse_cpu_list(&args.cluster_cpus).context("--cluster-cpus")?,
        freqs,
        mode: match args.mode {
            Mode::Cluster => ActivationMode::Cluster,
            Mode::Single => ActivationMode::Single,
        },
        phase: Duration::try_from_secs_f64(args.phase_secs)
            .map_err(|_| anyhow::anyhow!("--phase-secs {} is not a duration", args.phase_secs))?,
        repeats: args.repeats,
        sample_period: Duration::from_millis(args.sample_ms),
    };
    if !args.dry_run {
        measure::require_root(&config.sysfs_root, measure::current_uid())?;
    }
    let plan = measure::plan(&config)?;
    for w in &plan.warnings {
        eprintln!("warning: {w}");
    }
    let phases = plan.steps.iter().filter(|s| matches!(s, Step::Phase { .. })).count();
    if args.dry_run {
        for step in &plan.steps {
            println!("{step}");
        }
        println!("# restore afterwards:");
        for c in plan.restore_commands() {
            println!("{c}");
        }
        let summary = serde_json::json!({
            "dry_run": true,
            "steps": plan.steps.len(),
            "phases": phases,
            "duration_s": plan.duration.as_secs_f64(),
        });
        println!("{summary}");
        return Ok(ExitCode::SUCCESS);
    }

    let regulators_out = measure::regulators_path(&args.out);
    eprintln!(
        "measuring {phases} phases over {:.0} s; if this run is killed, restore by hand with:",
        plan.duration.as_secs_f64()
    );
    for c in plan.restore_commands() {
        eprintln!("  {c}");
    }
    let mut stress = BusyLoop::new();
    let mut done = 0;
    let summary = measure::run(
        &plan,
        &mut SystemClock::default(),
        &mut stress,
        &args.out,
        &regulators_out,
        &mut |step| {
            if let Step::Phase { .. } = step {
                done += 1;
                eprintln!("[{done}/{phases}] {step}");
            }
        },
    )?;
    let unpinned: Vec<usize> = stress.unpinned().iter().copied().collect();
    if !unpinned.is_empty() {
        eprintln!(
            "warning: could not pin the stress worker to cpu {unpinned:?} (taskset missing or refused)"
        );
    }
    let next = match config.mode {
        ActivationMode::Cluster => format!("tandem-wearable calibrate trace --log {}", args.out.display()),
        ActivationMode::Single => {
            let cores: Vec<String> =
                config.cluster_cpus.iter().filter(|&&c| c != 0).map(ToString::to_string).collect();
            format!(
                "tandem-wearable calibrate trace --log {} --cores cluster={}",
                args.out.display(),
                cores.join(",")
            )
        }
    };
    let line = serde_json::json!({
        "out": args.out,
        "regulators_out": regulators_out,
        "phases": summary.phases,
        "samples": summary.samples,
        "regulator_rows": summary.regulator_rows,
        "unpinned_cpus": unpinned,
        "restored": true,
        "next": next,
    });
    println!("{line}");
    Ok(ExitCode::SUCCESS)
}
