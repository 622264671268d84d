//! `tandem-wearable plan` as a real process: the decision's JSON line, the
//! latency hint's effect, and clear errors for bad arguments.

mod common;
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
    ] {
        let o = wearable(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
    }
}
