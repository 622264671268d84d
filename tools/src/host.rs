//! Host detection: a device profile for this machine from its sysfs tree.

use std::path::{Path, PathBuf};

use tandem::battery::{read_battery, BatteryStatus};
use tandem::device::{Cluster, DeviceError, DeviceKind, DeviceProfile, InferenceSetting, Radio, Voltage};

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

/// A sysfs CPU list (`0-3`, `4,5`, `0-3,7`) as CPU indices, by the one
/// CPU-list parser ([`tandem::calibrate::parse_cpu_list`]); `None` when
/// malformed or empty.
pub fn parse_cpu_list(text: &str) -> Option<Vec<u32>> {
    let cpus = tandem::calibrate::parse_cpu_list(text).ok()?;
    cpus.into_iter().map(|c| u32::try_from(c).ok()).collect()
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
        // assumed: the host's clusters are told apart by frequency only.
        relative_speed: 1.0,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sysfs").join(name)
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1e-300)
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
