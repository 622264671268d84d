//! `tandem-wearable device` as a real process: listing, showing and
//! detecting profiles, and the one-line error a bad profile gets.

use std::path::{Path, PathBuf};

use crate::common;
use common::{stderr, stdout, wearable};

fn temp_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tandem-device-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/tests/fixtures/sysfs").join(name)
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

#[test]
fn list_names_every_shipped_profile() {
    let o = wearable(&["device", "list"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for name in ["pixel-8-pro", "samsung-a16", "nexus-6", "watch-sd400", "watch-w5"] {
        assert!(out.contains(name), "{name}: {out}");
    }
    assert!(out.contains("wearable") && out.contains("handheld"), "{out}");
}

#[test]
fn show_prints_the_table_and_json() {
    let o = wearable(&["device", "show", "pixel-8-pro"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for want in
        ["LITTLE", "prime", "0.324-1.700", "0.560-0.850", "inference: big @ 2.370 GHz", "P_T", "slowdown"]
    {
        assert!(out.contains(want), "{want}: {out}");
    }
    let o = wearable(&["device", "show", "watch-w5", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_str(stdout(&o).trim()).expect("one JSON object");
    assert_eq!(j["kind"], "wearable");
    assert_eq!(j["clusters"][0]["cores"], 4);
}

#[test]
fn detect_reads_a_fixture_tree_and_writes_a_loadable_profile() {
    let out_file = temp_dir().join("host.toml");
    let root = fixture("tri-cluster-phone");
    let o = wearable(&["device", "detect", "--sysfs-root", s(&root), "--write", s(&out_file)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("# note:") && out.contains("name = \"prime\""), "{out}");
    assert!(out.contains("# battery now:") && out.contains("Discharging"), "{out}");
    // The written file is a profile that `show` accepts.
    let o = wearable(&["device", "show", s(&out_file)]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("host (host)"), "{}", stdout(&o));

    let o = wearable(&["device", "detect", "--sysfs-root", s(&fixture("no-cpufreq-vm"))]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("no cpufreq"), "{}", stdout(&o));
}

#[test]
fn bad_profiles_get_a_one_line_error() {
    let dir = temp_dir();
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "name = \"x\"\nkind = \"watch\"\n").expect("write");
    let o = wearable(&["device", "show", s(&bad)]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("bad.toml:2:") && err.contains("watch"), "{err}");

    let o = wearable(&["device", "show", "no-such-device"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("pixel-8-pro"), "lists the shipped ones: {}", stderr(&o));
}
