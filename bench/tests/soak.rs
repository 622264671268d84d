//! The short soak: `tandem-bench soak` with two paired wearables and every
//! kind of fault (the handheld killed and restarted, stalled, links
//! flapped, bytes dropped, corrupted and reordered). Every frame is
//! delivered exactly once and in order, the handheld still served most of
//! them, and its memory and file descriptors stay bounded.

#[test]
fn a_short_soak_with_faults_delivers_every_frame_once_in_order() {
    let out = std::env::temp_dir().join(format!("tandem-soak-{}", std::process::id()));
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_tandem-bench"))
        .args(["soak", "--wearables", "2", "--seconds", "20", "--faults", "--out"])
        .arg(&out)
        .output()
        .expect("tandem-bench runs");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&o.stderr));
    let j: serde_json::Value = serde_json::from_str(stdout.lines().last().expect("a line")).expect("JSON");
    assert_eq!(j["frames_fed"], 400, "{j}");
    assert_eq!(j["frames_delivered"], j["frames_fed"], "frames lost: {j}");
    assert_eq!(j["duplicates"], 0, "{j}");
    assert_eq!(j["out_of_order"], 0, "{j}");
    assert_eq!(j["wearables_failed"], 0, "{j}");
    // Every kind of fault happened (one every 3 s from 2 s on: six kinds in 20 s).
    let injected = j["faults_injected"].as_object().expect("faults");
    assert_eq!(injected.len(), 6, "not every fault was injected: {j}");
    // The handheld was used, not routed around: most frames went to it.
    assert!(j["frames_offloaded"].as_u64().unwrap_or(0) > 200, "{j}");
    // Bounded: file descriptors (a leak grows them by the reconnections) and memory.
    assert!(j["handheld_fds_max"].as_u64().unwrap_or(u64::MAX) < 64, "{j}");
    assert!(j["handheld_rss_max_mb"].as_f64().unwrap_or(f64::MAX) < 1024.0, "{j}");
    let _ = std::fs::remove_dir_all(out);
}
