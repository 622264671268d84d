//! `tandem-wearable plan`, `simplify` and `oracle` as real processes: the
//! decision's JSON line, the latency hint's effect, every method, the node
//! counts, the oracle's summary, and clear errors for bad arguments.

use crate::common;
use common::{stderr, stdout, wearable};
use tandem_models::ensure_models;

fn mnist() -> String {
    let p = ensure_models().expect("models").zoo_path("mnist").expect("mnist").to_path_buf();
    p.to_str().expect("utf-8").to_string()
}

fn decision(args: &[&str]) -> serde_json::Value {
    let o = wearable(args);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    serde_json::from_str(out.lines().last().expect("a line")).expect("last line is JSON")
}

#[test]
fn plan_prints_the_decision_as_a_json_line() {
    let m = mnist();
    let slow = decision(&["plan", "--model", &m, "--bandwidth", "10kbit", "--method", "exhaustive"]);
    for key in ["cut", "prefix_nodes", "t_ms", "e_mj", "method"] {
        assert!(slow.get(key).is_some(), "no {key} in {slow}");
    }
    assert_eq!(slow["method"], "exhaustive");
    // At 10 kbit/s nothing is worth sending: all 11 layers stay on the watch.
    assert_eq!(slow["prefix_nodes"], 11, "{slow}");
    assert_eq!(slow["cut"].as_array().map(Vec::len), Some(0));
    // A fast link and an energy-first hint: the min-cut and exhaustive methods agree.
    let args = [
        "plan",
        "--model",
        &m,
        "--bandwidth",
        "50mbit",
        "--rtt",
        "1ms",
        "--latency-hint",
        "inf",
        "--ww",
        "1",
    ];
    let a = decision(&[&args[..], &["--method", "mincut"]].concat());
    let b = decision(&[&args[..], &["--method", "exhaustive"]].concat());
    assert_eq!(a["prefix_nodes"], b["prefix_nodes"], "{a} vs {b}");
    assert!(a["prefix_nodes"].as_u64().expect("n") < 11, "Ww = 1 offloads: {a}");
}

#[test]
fn bad_plan_arguments_get_one_line_and_exit_2() {
    let m = mnist();
    for (args, needle) in [
        (vec!["plan", "--model", &m, "--bandwidth", "fast"], "bad rate"),
        (vec!["plan", "--model", &m, "--bandwidth", "1mbit", "--load", "1.5"], "--load 1.5"),
        (vec!["plan", "--model", &m, "--bandwidth", "1mbit", "--latency-hint", "soon"], "bad duration"),
        (vec!["plan", "--model", &m, "--bandwidth", "1mbit", "--wearable", "no-such-watch"], "no-such-watch"),
        (vec!["plan", "--model", "/nonexistent.onnx", "--bandwidth", "1mbit"], "/nonexistent.onnx"),
        (vec!["plan", "--model", &m, "--bandwidth", "1mbit", "--method", "greedy"], "greedy"),
        (vec!["oracle", "--model", &m, "--runs", "0"], "--runs"),
        (vec!["oracle", "--model", &m, "--ww", "2"], "--ww 2"),
        (vec!["oracle", "--model", "/nonexistent.onnx"], "/nonexistent.onnx"),
        (vec!["simplify", "--model", "/nonexistent.onnx"], "/nonexistent.onnx"),
    ] {
        let o = wearable(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn every_method_plans_and_the_heuristic_reports_its_simplified_graph() {
    let paths = ensure_models().expect("models");
    let inception =
        paths.light("light_inception_v1").expect("inception").model.to_str().expect("utf-8").to_string();
    let counts = decision(&["simplify", "--model", &inception]);
    assert_eq!(counts["layers"], 143, "{counts}");
    assert_eq!(counts["bundled_blocks"], 9, "nine Inception modules: {counts}");
    assert!(counts["after_bundling"].as_u64().expect("n") < 20, "{counts}");
    let m = mnist();
    for method in ["heuristic", "mincut", "exhaustive"] {
        for stream in [false, true] {
            let mut args = vec!["plan", "--model", &m, "--bandwidth", "2mbit", "--method", method];
            if stream {
                args.push("--stream");
            }
            let d = decision(&args);
            assert_eq!(d["method"], method, "{d}");
            assert!(d["t_ms"].as_f64().expect("t") > 0.0, "{d}");
            if method != "heuristic" {
                assert_eq!(d["optimal"], true, "{method} stream={stream}: {d}");
            }
        }
    }
}

#[test]
fn oracle_reports_every_grid_point_for_each_method() {
    let paths = ensure_models().expect("models");
    let har = paths.zoo_path("lstm_har").expect("lstm_har").to_str().expect("utf-8").to_string();
    let line = decision(&["oracle", "--model", &har, "--runs", "2"]);
    assert_eq!(line["emulated_pair"], true, "{line}");
    let summaries = line["summaries"].as_array().expect("summaries");
    assert_eq!(summaries.len(), 2, "{line}");
    for s in summaries {
        // 6 bandwidths x 3 loads x 2 hints.
        assert_eq!(s["cases"], 36, "{s}");
        assert!(s["optimal"].as_u64() <= s["within_5pct"].as_u64(), "{s}");
        assert!(s["worst_ratio"].as_f64().expect("ratio") >= 1.0, "{s}");
    }
}

/// `plan --encodings lossy`: the chosen cut keeps its lossy encodings only
/// when its input, run split with them, stays within `--accuracy`.
#[test]
fn plan_keeps_lossy_encodings_only_within_the_budget() {
    let paths = ensure_models().expect("models");
    let m = paths.zoo_path("mobilenet_v1_1.0_128").expect("mobilenet").to_str().expect("utf-8").to_string();
    let args = ["plan", "--model", &m, "--bandwidth", "20mbit", "--rtt", "1ms", "--encodings", "lossy"];
    let lossy = |d: &serde_json::Value| {
        d["encodings"]
            .as_object()
            .expect("encodings")
            .values()
            .filter(|e| {
                ["f16", "int8", "jpeg"].iter().any(|lossy| e.as_str().unwrap_or_default().starts_with(lossy))
            })
            .count()
    };
    let loose = decision(&[&args[..], &["--accuracy", "rel:0.5"]].concat());
    assert!(lossy(&loose) > 0, "a lossy encoding within 50%: {loose}");
    assert!(loose["lossy_error"].as_f64().is_some_and(|e| e > 0.0 && e <= 0.5), "{loose}");
    let tight = decision(&[&args[..], &["--accuracy", "rel:1e-9"]].concat());
    assert_eq!(lossy(&tight), 0, "none within 1e-9: {tight}");
    assert!(tight["lossy_error"].is_null(), "{tight}");
    let o = wearable(&args);
    assert!(!o.status.success() && stderr(&o).contains("needs an --accuracy"), "{}", stderr(&o));
}
