//! Reading and writing sysfs for a measurement: CPUs, cpufreq policies, the battery, regulators.

use super::*;

pub(super) fn missing(path: &Path, what: &str) -> CalibrateError {
    CalibrateError::MissingSysfs { path: path.to_path_buf(), what: what.into() }
}

pub(super) fn read_trimmed(path: &Path) -> Result<String, CalibrateError> {
    fs::read_to_string(path).map(|s| s.trim().to_string()).map_err(|source| CalibrateError::Io {
        action: "read",
        path: path.into(),
        source,
    })
}

pub(super) fn read_u64(path: &Path) -> Result<u64, CalibrateError> {
    let text = read_trimmed(path)?;
    text.parse()
        .map_err(|_| CalibrateError::BadConfig(format!("{} holds '{text}', not a number", path.display())))
}

pub(super) fn read_i64(path: &Path) -> Result<i64, CalibrateError> {
    let text = read_trimmed(path)?;
    text.parse()
        .map_err(|_| CalibrateError::BadConfig(format!("{} holds '{text}', not a number", path.display())))
}

pub(super) fn write(path: &Path, value: &str) -> Result<(), CalibrateError> {
    fs::write(path, value).map_err(|source| CalibrateError::Io { action: "write", path: path.into(), source })
}

pub(super) fn list(dir: &Path) -> Result<Vec<PathBuf>, CalibrateError> {
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
pub(super) fn cpus_in(cpu_dir: &Path) -> Result<BTreeSet<usize>, CalibrateError> {
    Ok(list(cpu_dir)?
        .iter()
        .filter_map(|p| p.file_name()?.to_str()?.strip_prefix("cpu")?.parse().ok())
        .collect())
}

/// The one cpufreq policy folder all `cpus` share.
pub(super) fn policy_of_all(cpu_dir: &Path, cpus: &[usize]) -> Result<PathBuf, CalibrateError> {
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
pub(super) fn policy_of(cpu_dir: &Path, cpu: usize) -> Result<PathBuf, CalibrateError> {
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
pub(super) fn pinnable_khz(policy: &Path, choice: FreqChoice) -> Result<u64, CalibrateError> {
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
pub(super) fn battery_supply(root: &Path) -> Result<PathBuf, CalibrateError> {
    let dir = root.join(POWER_SUPPLY_DIR);
    if !dir.is_dir() {
        return Err(missing(&dir, "power-supply folder (the fuel gauge)"));
    }
    let battery = tandem::battery::first_battery(&dir)
        .ok_or_else(|| missing(&dir.join("*/type"), "power supply of type Battery (the fuel gauge)"))?;
    for file in ["voltage_now", "current_now"] {
        if !battery.join(file).exists() {
            return Err(missing(&battery.join(file), "fuel-gauge file"));
        }
    }
    Ok(battery)
}

/// Regulators with a `microvolts` file, and their `name` (empty when absent).
pub(super) fn regulators(root: &Path) -> Result<Vec<(PathBuf, String)>, CalibrateError> {
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
