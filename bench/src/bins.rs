//! The programs a benchmark starts: the `tandem-*` binaries built beside
//! the running `tandem-bench` (the same profile and target directory, so a
//! release build runs release binaries and `CARGO_TARGET_DIR` is
//! followed), never a fixed path under the repository.

use std::path::{Path, PathBuf};

use anyhow::bail;

/// The directory of the binaries a benchmark runs.
#[derive(Clone, Debug)]
pub struct Bins {
    dir: PathBuf,
}

/// The binaries every benchmark needs.
const NEEDED: [&str; 3] = ["tandem-handheld", "tandem-wearable", "tandem-models"];

impl Bins {
    /// The binaries beside this executable (beside its directory when it
    /// is a test in `deps/`), each checked to exist.
    pub fn beside_me() -> anyhow::Result<Bins> {
        let exe = std::env::current_exe()?;
        Self::in_dir(exe.parent().unwrap_or(Path::new(".")))
    }

    /// The binaries in `dir` (or its parent when `dir` is cargo's `deps`).
    pub fn in_dir(dir: &Path) -> anyhow::Result<Bins> {
        let dir = match dir.file_name() {
            Some(n) if n == "deps" => dir.parent().unwrap_or(dir),
            _ => dir,
        };
        for name in NEEDED {
            let path = dir.join(name);
            if !path.exists() {
                bail!(
                    "{} is missing: tandem-bench runs the binaries built beside it \
                     (`cargo build --workspace --bins`, with the same profile and target directory)",
                    path.display()
                );
            }
        }
        Ok(Bins { dir: dir.to_path_buf() })
    }

    /// The binary `name` (`tandem-handheld`, ...).
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Which build the binaries are, for reports: their directory and its profile.
    pub fn describe(&self) -> String {
        let profile = self.dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        format!("binaries from {} (cargo profile directory `{profile}`)", self.dir.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_binaries_are_found_beside_a_build_or_named_when_missing() {
        let dir = std::env::temp_dir().join(format!("tandem-bins-{}", std::process::id()));
        let deps = dir.join("release").join("deps");
        std::fs::create_dir_all(&deps).expect("dir");
        let e = Bins::in_dir(&deps).expect_err("nothing built");
        assert!(e.to_string().contains("tandem-handheld is missing"), "{e}");
        for n in NEEDED {
            std::fs::write(dir.join("release").join(n), b"").expect("write");
        }
        // From the profile directory and from a test in its deps/.
        for from in [dir.join("release"), deps] {
            let b = Bins::in_dir(&from).expect("found");
            assert_eq!(b.path("tandem-wearable"), dir.join("release").join("tandem-wearable"));
            assert!(b.describe().contains("`release`"), "{}", b.describe());
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
