//! A DVFS setting applied for real (issue 17): the prefix's thread pinned to
//! the chosen cluster's CPUs and that cluster's cpufreq policy held at the
//! chosen frequency, both restored afterwards. Where this machine has no
//! writable cpufreq, [`CpuFreq::open`] says why and the caller emulates.
//!
//! The pure parts (which policy is which cluster, which offered frequency
//! is nearest, in which order to write a range) are functions of their
//! arguments; the rest reads and writes the sysfs CPU folder it is given
//! (`/sys/devices/system/cpu` on a device, a fake tree in tests).

use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tandem_plan::calibrate::{parse_cpu_list, CalibrateError};
use tandem_plan::device::DeviceProfile;
use tracing::{info, warn};

/// The sysfs CPU folder on a device.
pub const CPU_DIR: &str = "/sys/devices/system/cpu";

/// Why this machine's cpufreq cannot be used, or a setting not applied.
/// Cloned where the reason is reported again for each frame: the sources
/// are shared.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CpuFreqError {
    /// The CPU folder has no `cpufreq` folder, or it cannot be listed.
    #[error("no cpufreq folder {}: {source}", path.display())]
    NoFolder {
        /// The `cpufreq` folder.
        path: PathBuf,
        /// Why it cannot be listed.
        source: Arc<io::Error>,
    },
    /// The `cpufreq` folder lists no policy.
    #[error("no cpufreq policies")]
    NoPolicies,
    /// A policy's folder has neither `related_cpus` nor `affected_cpus`.
    #[error("{} has no related_cpus", dir.display())]
    NoRelatedCpus {
        /// The policy's folder.
        dir: PathBuf,
    },
    /// A policy's CPU list is malformed.
    #[error("{}: {source}", path.display())]
    CpuList {
        /// The `related_cpus` (or `affected_cpus`) file.
        path: PathBuf,
        /// What is wrong with it.
        source: Arc<CalibrateError>,
    },
    /// A file cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: Arc<io::Error>,
    },
    /// A file (`scaling_min_freq`, `scaling_max_freq`) cannot be written
    /// or opened for writing.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: Arc<io::Error>,
    },
    /// A file holds something else than a frequency in kHz.
    #[error("{} holds '{text}', not a frequency in kHz", path.display())]
    NotKhz {
        /// The file.
        path: PathBuf,
        /// The word it holds.
        text: String,
    },
    /// A policy's `cpuinfo_min_freq` is above its `cpuinfo_max_freq`.
    #[error("{}: cpuinfo_min_freq {min_khz} is above cpuinfo_max_freq {max_khz}", dir.display())]
    InvertedRange {
        /// The policy's folder.
        dir: PathBuf,
        /// `cpuinfo_min_freq`, kHz.
        min_khz: u64,
        /// `cpuinfo_max_freq`, kHz.
        max_khz: u64,
    },
    /// No one policy clocks all the CPUs a profile's cluster lists.
    #[error("no one cpufreq policy clocks cluster '{cluster}''s CPUs {cpus:?}")]
    ClusterCpus {
        /// The cluster's name.
        cluster: String,
        /// The CPUs it lists.
        cpus: Vec<u32>,
    },
    /// Clusters without CPU lists are matched by rank, which needs as many
    /// policies as clusters.
    #[error("profile '{profile}' has {clusters} cluster(s), this machine {policies} cpufreq policies")]
    ClusterCount {
        /// The profile's name.
        profile: String,
        /// Its clusters.
        clusters: usize,
        /// This machine's policies.
        policies: usize,
    },
    /// A cluster the profile matched has no such name.
    #[error("no cluster '{cluster}' in the profile cpufreq was matched to")]
    UnknownCluster {
        /// The name asked for.
        cluster: String,
    },
    /// This thread's CPU affinity cannot be read.
    #[error("cannot read this thread's CPU affinity: {source}")]
    ReadAffinity {
        /// Why.
        source: Arc<io::Error>,
    },
    /// This thread cannot be pinned to the CPUs.
    #[error("cannot pin this thread to cpu {cpus:?}: {source}")]
    Pin {
        /// The CPUs.
        cpus: Vec<usize>,
        /// Why.
        source: Arc<io::Error>,
    },
    /// This thread cannot be pinned to a cluster's CPUs, found when opening.
    #[error("{source} (cluster '{cluster}')")]
    Unpinnable {
        /// The cluster.
        cluster: String,
        /// Why.
        source: Box<CpuFreqError>,
    },
    /// Thread affinity is not set on this OS.
    #[error("thread affinity is set on Linux and Android only")]
    NoAffinity,
}

impl CpuFreqError {
    fn read(path: &Path, source: io::Error) -> CpuFreqError {
        CpuFreqError::Read { path: path.to_path_buf(), source: Arc::new(source) }
    }

    fn write(path: &Path, source: io::Error) -> CpuFreqError {
        CpuFreqError::Write { path: path.to_path_buf(), source: Arc::new(source) }
    }
}

/// One cpufreq policy: a cluster's CPUs and the frequencies it offers.
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    /// Its folder (`.../cpufreq/policy4`).
    pub dir: PathBuf,
    /// The CPUs it clocks (`related_cpus`).
    pub cpus: Vec<usize>,
    /// `cpuinfo_min_freq`, kHz.
    pub min_khz: u64,
    /// `cpuinfo_max_freq`, kHz.
    pub max_khz: u64,
    /// `scaling_available_frequencies`, ascending (empty: any in range).
    pub offered_khz: Vec<u64>,
}

impl Policy {
    /// The folder's name (`policy4`).
    pub fn name(&self) -> String {
        self.dir
            .file_name()
            .map_or_else(|| self.dir.display().to_string(), |n| n.to_string_lossy().into_owned())
    }

    /// The frequency it can be held at nearest `f_hz`, in kHz: an offered
    /// one, or `f_hz` clamped to its range when it lists none.
    pub fn nearest_khz(&self, f_hz: f64) -> u64 {
        let want = (f_hz / 1e3).round().max(0.0) as u64;
        match self.offered_khz.iter().min_by_key(|&&k| k.abs_diff(want)) {
            Some(&k) => k,
            None => want.clamp(self.min_khz, self.max_khz),
        }
    }
}

/// `scaling_min_freq` or `scaling_max_freq`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// `scaling_min_freq`.
    Min,
    /// `scaling_max_freq`.
    Max,
}

impl Bound {
    /// Its file in a policy's folder.
    pub fn file(self) -> &'static str {
        match self {
            Bound::Min => "scaling_min_freq",
            Bound::Max => "scaling_max_freq",
        }
    }
}

/// The two writes that move a policy's range from `from` to `to` (both
/// `(min, max)` kHz) so that min ≤ max after each: the kernel refuses a
/// write that would cross the other bound.
pub fn range_writes(from: (u64, u64), to: (u64, u64)) -> [(Bound, u64); 2] {
    if to.0 <= from.1 {
        [(Bound::Min, to.0), (Bound::Max, to.1)]
    } else {
        [(Bound::Max, to.1), (Bound::Min, to.0)]
    }
}

/// Which policy runs each of `profile`'s clusters, by cluster order: by
/// the CPUs a cluster lists when every cluster lists them (a detected
/// host), else by rank (clusters by peak speed, `relative_speed × f_max`,
/// against policies by `cpuinfo_max_freq`), which needs as many policies
/// as clusters.
pub fn match_clusters(profile: &DeviceProfile, policies: &[Policy]) -> Result<Vec<usize>, CpuFreqError> {
    if policies.is_empty() {
        return Err(CpuFreqError::NoPolicies);
    }
    let clusters = &profile.clusters;
    if clusters.iter().all(|c| !c.cpus.is_empty()) {
        return clusters
            .iter()
            .map(|c| {
                policies
                    .iter()
                    .position(|p| c.cpus.iter().all(|&cpu| p.cpus.contains(&(cpu as usize))))
                    .ok_or_else(|| CpuFreqError::ClusterCpus {
                        cluster: c.name.clone(),
                        cpus: c.cpus.clone(),
                    })
            })
            .collect();
    }
    if clusters.len() != policies.len() {
        return Err(CpuFreqError::ClusterCount {
            profile: profile.name.clone(),
            clusters: clusters.len(),
            policies: policies.len(),
        });
    }
    let mut by_speed: Vec<usize> = (0..clusters.len()).collect();
    by_speed.sort_by(|&a, &b| {
        let peak = |i: usize| clusters[i].relative_speed * clusters[i].f_max_hz;
        peak(a).total_cmp(&peak(b))
    });
    let mut by_clock: Vec<usize> = (0..policies.len()).collect();
    by_clock.sort_by_key(|&i| (policies[i].max_khz, policies[i].cpus.first().copied()));
    let mut out = vec![0; clusters.len()];
    for (&c, &p) in by_speed.iter().zip(&by_clock) {
        out[c] = p;
    }
    Ok(out)
}

/// The policies under `cpu_dir/cpufreq`, by name; a malformed file is an
/// error naming it.
pub fn read_policies(cpu_dir: &Path) -> Result<Vec<Policy>, CpuFreqError> {
    let dir = cpu_dir.join("cpufreq");
    let entries =
        fs::read_dir(&dir).map_err(|e| CpuFreqError::NoFolder { path: dir.clone(), source: Arc::new(e) })?;
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("policy")))
        .collect();
    dirs.sort();
    let mut out = vec![];
    for dir in dirs {
        let cpus_file = ["related_cpus", "affected_cpus"].iter().map(|f| dir.join(f)).find(|p| p.exists());
        let cpus_file = cpus_file.ok_or_else(|| CpuFreqError::NoRelatedCpus { dir: dir.clone() })?;
        let cpus = parse_cpu_list(&read(&cpus_file)?)
            .map_err(|e| CpuFreqError::CpuList { path: cpus_file.clone(), source: Arc::new(e) })?;
        let offered_file = dir.join("scaling_available_frequencies");
        let mut offered_khz = vec![];
        if offered_file.exists() {
            for word in read(&offered_file)?.split_whitespace() {
                offered_khz.push(number(&offered_file, word)?);
            }
        }
        offered_khz.sort_unstable();
        let min_khz = khz(&dir, "cpuinfo_min_freq")?;
        let max_khz = khz(&dir, "cpuinfo_max_freq")?;
        if min_khz > max_khz {
            return Err(CpuFreqError::InvertedRange { dir, min_khz, max_khz });
        }
        out.push(Policy { dir, cpus, min_khz, max_khz, offered_khz });
    }
    Ok(out)
}

fn read(path: &Path) -> Result<String, CpuFreqError> {
    fs::read_to_string(path).map(|s| s.trim().to_string()).map_err(|e| CpuFreqError::read(path, e))
}

fn number(path: &Path, text: &str) -> Result<u64, CpuFreqError> {
    text.parse().map_err(|_| CpuFreqError::NotKhz { path: path.to_path_buf(), text: text.to_string() })
}

fn khz(dir: &Path, file: &str) -> Result<u64, CpuFreqError> {
    let path = dir.join(file);
    number(&path, &read(&path)?)
}

/// A policy's `(scaling_min_freq, scaling_max_freq)`, kHz.
fn scaling_range(dir: &Path) -> Result<(u64, u64), CpuFreqError> {
    Ok((khz(dir, Bound::Min.file())?, khz(dir, Bound::Max.file())?))
}

fn write(path: &Path, khz: u64) -> Result<(), CpuFreqError> {
    fs::write(path, khz.to_string()).map_err(|e| CpuFreqError::write(path, e))
}

/// How a setting was applied: the policy held, its frequency, the CPUs
/// the prefix was pinned to.
#[derive(Clone, Debug, PartialEq)]
pub struct Applied {
    /// The policy's folder name.
    pub policy: String,
    /// The frequency it is held at, kHz.
    pub khz: u64,
    /// The CPUs the prefix may run on: the policy's (`related_cpus`).
    pub cpus: Vec<usize>,
}

impl fmt::Display for Applied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cpus: Vec<String> = self.cpus.iter().map(|c| c.to_string()).collect();
        write!(f, "{} held at {} MHz, prefix pinned to cpu {}", self.policy, self.khz / 1000, cpus.join(","))
    }
}

/// This machine's cpufreq, matched to a profile's clusters: holds one
/// policy at a time and gives each the range it had when this was
/// opened, when another is held, on [`CpuFreq::release`] and on drop.
#[derive(Debug)]
pub struct CpuFreq {
    policies: Vec<Policy>,
    /// Per policy: `(scaling_min_freq, scaling_max_freq)` when opened
    /// (read before anything was written: a limit in force then, thermal
    /// or the user's, is what comes back).
    original: Vec<(u64, u64)>,
    /// Per profile cluster: its name, its policy, the CPUs to pin to.
    clusters: Vec<(String, usize, Vec<usize>)>,
    /// The policy held, and its frequency once both writes went through
    /// (`None`: a move that failed half-way, to be given back).
    held: Option<(usize, Option<u64>)>,
}

impl CpuFreq {
    /// Matches `profile`'s clusters to the policies under `cpu_dir`, reads
    /// each policy's range, and checks that it can be written (both files
    /// opened for writing, nothing written) and that the calling thread,
    /// which runs the prefixes, can be pinned to each cluster's CPUs. The
    /// error is why the setting must be emulated.
    pub fn open(cpu_dir: &Path, profile: &DeviceProfile) -> Result<CpuFreq, CpuFreqError> {
        let policies = read_policies(cpu_dir)?;
        let matched = match_clusters(profile, &policies)?;
        let mut original = vec![(0, 0); policies.len()];
        let mut clusters = vec![];
        for (c, &p) in profile.clusters.iter().zip(&matched) {
            let policy = &policies[p];
            for bound in [Bound::Min, Bound::Max] {
                let path = policy.dir.join(bound.file());
                fs::OpenOptions::new().write(true).open(&path).map_err(|e| CpuFreqError::write(&path, e))?;
            }
            original[p] = scaling_range(&policy.dir)?;
            let cpus: Vec<usize> = policy.cpus.iter().copied().filter(|&cpu| cpu < MAX_CPU).collect();
            // This thread runs the prefixes: it must be able to go there.
            let probe = Applied { policy: policy.name(), khz: 0, cpus: cpus.clone() };
            drop(
                CpuFreq::pin(&probe)
                    .map_err(|e| CpuFreqError::Unpinnable { cluster: c.name.clone(), source: Box::new(e) })?,
            );
            clusters.push((c.name.clone(), p, cpus));
        }
        for (&p, c) in matched.iter().zip(&profile.clusters) {
            let (dir, (lo, hi)) = (policies[p].dir.display(), original[p]);
            // Min, max, min again: whichever way the range moved, one order holds.
            let min = format!("echo {lo} > {dir}/scaling_min_freq");
            info!(
                "cluster '{}' is {dir}; if this process is killed while it holds it, give it back with \
                 `{min}; echo {hi} > {dir}/scaling_max_freq; {min}`",
                c.name
            );
        }
        Ok(CpuFreq { policies, original, clusters, held: None })
    }

    /// Holds `cluster`'s policy at the frequency nearest `f_hz`
    /// (`scaling_min_freq = scaling_max_freq`), first giving back the range
    /// of another policy held before. Nothing is written when it is
    /// already held there. On an error the policy is still recorded as
    /// held (at no known frequency), to be given back.
    pub fn hold(&mut self, cluster: &str, f_hz: f64) -> Result<Applied, CpuFreqError> {
        let (_, p, cpus) = self
            .clusters
            .iter()
            .find(|(name, ..)| name == cluster)
            .ok_or_else(|| CpuFreqError::UnknownCluster { cluster: cluster.to_string() })?
            .clone();
        let policy = &self.policies[p];
        let khz = policy.nearest_khz(f_hz);
        let applied = Applied { policy: policy.name(), khz, cpus };
        match self.held {
            Some((q, Some(k))) if q == p && k == khz => return Ok(applied),
            Some((q, _)) if q != p => self.release()?,
            _ => {}
        }
        let dir = self.policies[p].dir.clone();
        // Recorded before writing: a half-done move is still given back.
        self.held = Some((p, None));
        let now = scaling_range(&dir)?;
        for (bound, value) in range_writes(now, (khz, khz)) {
            write(&dir.join(bound.file()), value)?;
        }
        self.held = Some((p, Some(khz)));
        Ok(applied)
    }

    /// Gives the held policy the range it had when this was opened; it
    /// stays recorded as held until that went through.
    pub fn release(&mut self) -> Result<(), CpuFreqError> {
        let Some((p, _)) = self.held else { return Ok(()) };
        let dir = &self.policies[p].dir;
        let now = scaling_range(dir)?;
        for (bound, value) in range_writes(now, self.original[p]) {
            write(&dir.join(bound.file()), value)?;
        }
        self.held = None;
        Ok(())
    }

    /// [`CpuFreq::release`], a failure logged (the policy stays recorded
    /// as held: a later call, or drop, tries again).
    pub fn give_back(&mut self) {
        if let Err(e) = self.release() {
            warn!("cannot give the cpufreq range back: {e}");
        }
    }

    /// Pins the calling thread to `applied`'s CPUs until the guard drops.
    pub fn pin(applied: &Applied) -> Result<Pinned, CpuFreqError> {
        affinity::pin(&applied.cpus)
    }
}

impl Drop for CpuFreq {
    fn drop(&mut self) {
        self.give_back();
    }
}

pub use affinity::{Pinned, MAX_CPU};

/// Thread affinity, where the kernel has it (Linux, Android).
#[cfg(any(target_os = "linux", target_os = "android"))]
mod affinity {
    use std::sync::Arc;

    use rustix::thread::{sched_getaffinity, sched_getcpu, sched_setaffinity, CpuSet};
    use tracing::warn;

    use super::CpuFreqError;

    /// CPU numbers at or above this cannot be pinned to.
    pub const MAX_CPU: usize = CpuSet::MAX_CPU;

    /// A thread pinned to a cluster's CPUs; its affinity before comes back
    /// on drop (on this thread: the guard cannot be sent to another).
    #[must_use = "the pin lasts as long as this guard"]
    pub struct Pinned {
        before: CpuSet,
        _this_thread: std::marker::PhantomData<*const ()>,
    }

    impl Pinned {
        /// The CPU this thread runs on now.
        pub fn cpu(&self) -> usize {
            sched_getcpu()
        }
    }

    impl Drop for Pinned {
        fn drop(&mut self) {
            if let Err(e) = sched_setaffinity(None, &self.before) {
                warn!("cannot give this thread its CPU affinity back: {e}");
            }
        }
    }

    pub(super) fn pin(cpus: &[usize]) -> Result<Pinned, CpuFreqError> {
        let before = sched_getaffinity(None)
            .map_err(|e| CpuFreqError::ReadAffinity { source: Arc::new(std::io::Error::from(e)) })?;
        let mut set = CpuSet::new();
        for &cpu in cpus.iter().filter(|&&cpu| cpu < MAX_CPU) {
            set.set(cpu);
        }
        sched_setaffinity(None, &set).map_err(|e| CpuFreqError::Pin {
            cpus: cpus.to_vec(),
            source: Arc::new(std::io::Error::from(e)),
        })?;
        Ok(Pinned { before, _this_thread: std::marker::PhantomData })
    }
}

/// Elsewhere nothing can be pinned: settings are emulated.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
mod affinity {
    /// CPU numbers at or above this cannot be pinned to.
    pub const MAX_CPU: usize = 1024;

    /// Never made here.
    pub struct Pinned(std::convert::Infallible);

    impl Pinned {
        /// The CPU this thread runs on now.
        pub fn cpu(&self) -> usize {
            match self.0 {}
        }
    }

    pub(super) fn pin(_: &[usize]) -> Result<Pinned, super::CpuFreqError> {
        Err(super::CpuFreqError::NoAffinity)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(name: &str, cpus: &[usize], min: u64, max: u64, offered: &[u64]) -> Policy {
        Policy {
            dir: PathBuf::from(format!("/x/cpufreq/{name}")),
            cpus: cpus.to_vec(),
            min_khz: min,
            max_khz: max,
            offered_khz: offered.to_vec(),
        }
    }

    #[test]
    fn the_nearest_offered_frequency_is_held() {
        let p = policy("policy0", &[0], 300_000, 1_700_000, &[300_000, 900_000, 1_700_000]);
        assert_eq!(p.nearest_khz(1.0e9), 900_000);
        assert_eq!(p.nearest_khz(1.4e9), 1_700_000);
        assert_eq!(p.nearest_khz(5.0e9), 1_700_000);
        let any = policy("policy0", &[0], 300_000, 1_700_000, &[]);
        assert_eq!(any.nearest_khz(1.0e9), 1_000_000);
        assert_eq!(any.nearest_khz(1.0e8), 300_000);
        assert_eq!(any.nearest_khz(9.0e9), 1_700_000);
    }

    #[test]
    fn a_range_is_moved_without_crossing_its_bounds() {
        let check = |from: (u64, u64), to: (u64, u64)| {
            let mut at = from;
            for (bound, v) in range_writes(from, to) {
                match bound {
                    Bound::Min => at.0 = v,
                    Bound::Max => at.1 = v,
                }
                assert!(at.0 <= at.1, "{from:?} -> {to:?} passes {at:?}");
            }
            assert_eq!(at, to);
        };
        check((300, 1700), (1700, 1700));
        check((300, 1700), (300, 300));
        check((300, 300), (1700, 1700));
        check((1700, 1700), (300, 300));
        check((900, 900), (300, 1700));
        check((300, 1700), (900, 900));
    }

    fn profile(clusters: &[(&str, f64, f64, &[u32])]) -> DeviceProfile {
        let mut p = DeviceProfile::shipped("pixel-8-pro").expect("shipped profile");
        let template = p.clusters[0].clone();
        p.clusters = clusters
            .iter()
            .map(|&(name, f_max, speed, cpus)| tandem_plan::device::Cluster {
                name: name.into(),
                f_max_hz: f_max,
                relative_speed: speed,
                cores: cpus.len().max(1) as u32,
                cpus: cpus.to_vec(),
                ..template.clone()
            })
            .collect();
        p
    }

    /// A CPU this thread may run on.
    fn allowed_cpu() -> usize {
        let set = rustix::thread::sched_getaffinity(None).expect("affinity");
        (0..MAX_CPU).find(|&c| set.is_set(c)).expect("a CPU")
    }

    /// A fake tree: two policies clocking a CPU this thread can go to.
    fn tree(tag: &str) -> PathBuf {
        let root = std::env::temp_dir().join(format!("tandem-cpufreq-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        for (name, lo, hi) in [("policy0", 300_000, 1_700_000), ("policy4", 400_000, 2_400_000)] {
            let dir = root.join("cpufreq").join(name);
            fs::create_dir_all(&dir).expect("fake tree");
            for (file, v) in [
                ("related_cpus", allowed_cpu().to_string()),
                ("cpuinfo_min_freq", lo.to_string()),
                ("cpuinfo_max_freq", hi.to_string()),
                ("scaling_min_freq", lo.to_string()),
                ("scaling_max_freq", hi.to_string()),
            ] {
                fs::write(dir.join(file), v).expect("fake file");
            }
        }
        root
    }

    /// Two clusters without CPU lists, matched to the fake tree's two
    /// policies by rank.
    fn big_little() -> DeviceProfile {
        profile(&[("big", 2.4e9, 1.0, &[]), ("little", 1.7e9, 0.5, &[])])
    }

    fn range(root: &Path, policy: &str) -> (u64, u64) {
        scaling_range(&root.join("cpufreq").join(policy)).expect("a range")
    }

    #[test]
    fn one_policy_is_held_at_a_time_and_each_gets_its_range_back() {
        let root = tree("hold");
        let p = big_little();
        let mut c = CpuFreq::open(&root, &p).expect("writable fake tree");
        let little = c.hold("little", 1.0e9).expect("hold little");
        assert_eq!(little, Applied { policy: "policy0".into(), khz: 1_000_000, cpus: vec![allowed_cpu()] });
        assert_eq!(range(&root, "policy0"), (1_000_000, 1_000_000));
        c.hold("little", 3.0e8).expect("lower");
        assert_eq!(range(&root, "policy0"), (300_000, 300_000));
        c.hold("big", 2.4e9).expect("hold big");
        assert_eq!(range(&root, "policy0"), (300_000, 1_700_000), "little's range given back");
        assert_eq!(range(&root, "policy4"), (2_400_000, 2_400_000));
        let err = c.hold("prime", 1e9).expect_err("an error");
        assert!(
            matches!(&err, CpuFreqError::UnknownCluster { .. }) && err.to_string().contains("'prime'"),
            "{err}"
        );
        drop(c);
        assert_eq!(range(&root, "policy4"), (400_000, 2_400_000), "big's range given back on drop");
        let _ = fs::remove_dir_all(&root);
    }

    /// A write that fails half-way: the move is an error, the next hold
    /// at the same setting tries again (it is not taken as held), and the
    /// range given back is the one the policy had when opened.
    #[test]
    fn a_failed_move_is_retried_and_given_back() {
        let root = tree("fail");
        let p = big_little();
        let mut c = CpuFreq::open(&root, &p).expect("writable fake tree");
        let max = root.join("cpufreq/policy4/scaling_max_freq");
        fs::remove_file(&max).expect("remove");
        fs::create_dir(&max).expect("a folder in its place");
        let err = c.hold("big", 2.4e9).expect_err("cannot read max");
        assert!(matches!(&err, CpuFreqError::Read { path, .. } if path == &max), "{err}");
        assert!(err.to_string().contains("scaling_max_freq"), "{err}");
        assert!(c.hold("big", 2.4e9).is_err(), "not taken as held");
        assert!(c.release().is_err(), "nothing to give back yet");
        fs::remove_dir(&max).expect("remove");
        fs::write(&max, "1000000").expect("a lower limit meanwhile");
        c.hold("big", 2.4e9).expect("hold");
        assert_eq!(range(&root, "policy4"), (2_400_000, 2_400_000));
        drop(c);
        assert_eq!(range(&root, "policy4"), (400_000, 2_400_000), "the range when opened");
        let _ = fs::remove_dir_all(&root);
    }

    #[test]
    fn why_cpufreq_cannot_be_used_is_said() {
        let root = tree("why");
        let p = big_little();
        let max = root.join("cpufreq/policy4/cpuinfo_max_freq");
        fs::write(&max, "fast").expect("write");
        let err = CpuFreq::open(&root, &p).expect_err("an error");
        assert!(matches!(&err, CpuFreqError::NotKhz { text, .. } if text == "fast"), "{err}");
        let text = err.to_string();
        assert!(text.contains("policy4/cpuinfo_max_freq") && text.contains("'fast'"), "{text}");
        let err = CpuFreq::open(&root.join("nowhere"), &p).expect_err("an error");
        assert!(matches!(err, CpuFreqError::NoFolder { .. }), "{err}");
        assert!(err.to_string().contains("no cpufreq folder"), "{err}");
        let one = profile(&[("big", 2.4e9, 1.0, &[])]);
        fs::write(&max, "2400000").expect("write");
        let err = CpuFreq::open(&root, &one).expect_err("an error");
        assert!(err.to_string().contains("1 cluster(s)"), "{err}");
        let _ = fs::remove_dir_all(&root);
    }

    #[test]
    fn clusters_are_matched_by_rank_or_by_their_cpus() {
        let policies = [
            policy("policy0", &[0, 1, 2, 3], 300_000, 1_700_000, &[]),
            policy("policy4", &[4, 5, 6, 7], 400_000, 2_400_000, &[]),
            policy("policy8", &[8], 500_000, 2_900_000, &[]),
        ];
        // Listed fastest first: matched by peak speed, not by order.
        let by_rank =
            profile(&[("prime", 2.9e9, 1.0, &[]), ("little", 1.7e9, 0.4, &[]), ("mid", 2.4e9, 0.8, &[])]);
        assert_eq!(match_clusters(&by_rank, &policies).expect("matched"), vec![2, 0, 1]);
        let by_cpus = profile(&[("a", 2.9e9, 1.0, &[4, 5, 6, 7]), ("b", 1.7e9, 0.4, &[8])]);
        assert_eq!(match_clusters(&by_cpus, &policies).expect("matched"), vec![1, 2]);
        let spans = profile(&[("a", 2.9e9, 1.0, &[3, 4])]);
        let err = match_clusters(&spans, &policies).expect_err("an error");
        assert!(matches!(&err, CpuFreqError::ClusterCpus { cluster, .. } if cluster == "a"), "{err}");
        assert!(err.to_string().contains("'a'"), "{err}");
        let two = profile(&[("big", 2.9e9, 1.0, &[]), ("little", 1.7e9, 0.4, &[])]);
        let err = match_clusters(&two, &policies).expect_err("an error");
        assert!(matches!(err, CpuFreqError::ClusterCount { clusters: 2, policies: 3, .. }), "{err}");
        let text = err.to_string();
        assert!(text.contains("2 cluster(s)") && text.contains("3 cpufreq"), "{text}");
        let err = match_clusters(&two, &[]).expect_err("an error");
        assert!(matches!(err, CpuFreqError::NoPolicies) && err.to_string().contains("no cpufreq"), "{err}");
    }
}
