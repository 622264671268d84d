//! Device emulation by CPU quota: this process in a cgroup v1 `cpu`
//! controller group of its own, capped at a share of one CPU
//! (`cpu.cfs_quota_us` / `cpu.cfs_period_us`). Works as root where the v1
//! controller is mounted (`/sys/fs/cgroup/cpu` here). The other form of
//! emulation, compute dilation, needs neither.

use std::io;
use std::path::{Path, PathBuf};

/// A quota in force; dropping it moves the process back and removes the group.
#[derive(Debug)]
pub struct CpuQuota {
    group: PathBuf,
    parent: PathBuf,
}

const PERIOD_US: u64 = 100_000;

impl CpuQuota {
    /// Caps this process at `percent` of one CPU (1–100 per CPU, e.g. 150
    /// for one and a half), in a group `tandem-<pid>` under `controller`.
    pub fn apply(controller: &Path, percent: f64) -> io::Result<CpuQuota> {
        if !(percent.is_finite() && percent >= 1.0) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a CPU quota of {percent}% is below 1% of one CPU"),
            ));
        }
        let ctx = |what: &str, p: &Path, e: io::Error| {
            io::Error::new(e.kind(), format!("cgroup v1 cpu quota: {what} {}: {e}", p.display()))
        };
        if !controller.join("cpu.cfs_period_us").exists() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "no cgroup v1 cpu controller at {} (cpu.cfs_period_us missing)",
                    controller.display()
                ),
            ));
        }
        let group = controller.join(format!("tandem-{}", std::process::id()));
        std::fs::create_dir_all(&group).map_err(|e| ctx("creating", &group, e))?;
        let write = |file: &str, value: String| {
            let p = group.join(file);
            std::fs::write(&p, value).map_err(|e| ctx("writing", &p, e))
        };
        write("cpu.cfs_period_us", PERIOD_US.to_string())?;
        write("cpu.cfs_quota_us", ((percent / 100.0 * PERIOD_US as f64) as u64).to_string())?;
        write("cgroup.procs", std::process::id().to_string())?;
        Ok(CpuQuota { group, parent: controller.to_path_buf() })
    }

    /// The group's directory.
    pub fn group(&self) -> &Path {
        &self.group
    }
}

impl Drop for CpuQuota {
    fn drop(&mut self) {
        let _ = std::fs::write(self.parent.join("cgroup.procs"), std::process::id().to_string());
        let _ = std::fs::remove_dir(&self.group);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_the_quota_and_joins_the_group() {
        let root = std::env::temp_dir().join(format!("tandem-quota-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).expect("dir");
        let e = CpuQuota::apply(&root, 50.0).expect_err("no controller");
        assert!(e.to_string().contains("no cgroup v1 cpu controller"), "{e}");
        std::fs::write(root.join("cpu.cfs_period_us"), "100000").expect("fake controller");
        assert!(CpuQuota::apply(&root, 0.5).is_err(), "below 1%");
        let q = CpuQuota::apply(&root, 25.0).expect("applies");
        let read = |f: &str| std::fs::read_to_string(q.group().join(f)).expect("written");
        assert_eq!(read("cpu.cfs_quota_us"), "25000");
        assert_eq!(read("cpu.cfs_period_us"), "100000");
        assert_eq!(read("cgroup.procs"), std::process::id().to_string());
        drop(q);
        assert_eq!(
            std::fs::read_to_string(root.join("cgroup.procs")).expect("moved back"),
            std::process::id().to_string()
        );
        let _ = std::fs::remove_dir_all(&root);
    }
}
