//! `tandem-wearable run` and `stream` against a real `tandem-handheld serve`
//! process over TCP loopback: the JSON lines, the emulated link, and clear
//! errors for bad arguments.

use crate::common;
use std::path::PathBuf;

use common::{stderr, stdout, wearable};
use tandem_models::ensure_models;
use tandem_tools::testing::HandheldProcess;

/// The handheld binary, built beside this one by `cargo test --workspace`.
fn handheld_bin() -> PathBuf {
    let me = PathBuf::from(env!("CARGO_BIN_EXE_tandem-wearable"));
    let bin = me.with_file_name("tandem-handheld");
    assert!(bin.exists(), "{} is missing: run the tests with `cargo test --workspace`", bin.display());
    bin
}

fn model() -> String {
    let p = ensure_models().expect("models").zoo_path("mobilenet_v1_0.25_128").expect("model").to_path_buf();
    p.to_str().expect("utf-8").to_string()
}

fn json_line(args: &[&str]) -> (serde_json::Value, String) {
    let o = wearable(args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    let out = stdout(&o);
    let line = out.lines().last().expect("a line");
    (serde_json::from_str(line).expect("last line is JSON"), out)
}

#[test]
fn run_prints_outputs_then_the_cut_latency_breakdown_and_bytes() {
    let server = HandheldProcess::start(&handheld_bin(), &[]).expect("server");
    let m = model();
    let run = ["run", "--model", &m, "--connect", &server.addr, "--placement", "handheld"];
    let (raw, raw_out) = json_line(&[&run[..], &["--encodings", "raw"]].concat());
    assert_eq!(raw["bytes"]["up"], 3 * 128 * 128 * 4, "the input crosses whole: {raw}");
    // Over emulated BLE 2M, where bytes cost more than the watch's encoding
    // (over loopback TCP raw is the cheapest, and the planner sends it).
    let (j, out) = json_line(&[&run[..], &["--link", "ble-2m"]].concat());
    assert!(out.lines().next().is_some_and(|l| l.contains("argmax")), "no output summary: {out}");
    assert_eq!(out.lines().next(), raw_out.lines().next(), "lossless encodings change no output");
    assert_eq!(j["offloaded"], true, "{j}");
    assert_eq!(j["handheld"], "pixel-8-pro", "{j}");
    assert_eq!(j["prefix_layers"], 0, "{j}");
    // The input crosses whole, shuffled and LZ4-compressed (random floats: a little smaller).
    assert_eq!(j["bytes"]["up_raw"], 3 * 128 * 128 * 4, "{j}");
    assert!(j["bytes"]["up"].as_u64().is_some_and(|b| b < 3 * 128 * 128 * 4), "{j}");
    // The answer comes back raw when asked raw, else in a lossless encoding where it pays.
    assert_eq!(raw["bytes"]["down"], 1000 * 4, "{raw}");
    assert!(j["bytes"]["down"].as_u64().is_some_and(|b| b > 0 && b <= 1000 * 4), "{j}");
    for k in ["wearable", "link", "handheld", "total"] {
        assert!(j["latency_ms"][k].as_f64().is_some(), "no latency_ms.{k}: {j}");
    }
    assert!(j["latency_ms"]["handheld"].as_f64().unwrap_or(0.0) > 0.0, "{j}");

    // The planner over an emulated link: a decision with a prediction to compare.
    let (j, _) = json_line(&[
        "run",
        "--model",
        &m,
        "--connect",
        &server.addr,
        "--link",
        "wifi-good",
        "--slowdown",
        "4",
        "--latency-hint",
        "inf",
    ]);
    assert!(j["predicted_ms"].as_f64().is_some(), "{j}");
    assert!(j["decision"]["reason"].as_str().is_some(), "{j}");
}

#[test]
fn stream_reports_throughput_percentiles_and_placement_counts() {
    let server = HandheldProcess::start(&handheld_bin(), &[]).expect("server");
    let m = model();
    for pipeline in [true, false] {
        let frames_out =
            std::env::temp_dir().join(format!("tandem-frames-{}-{pipeline}.jsonl", std::process::id()));
        let frames_arg = frames_out.to_string_lossy().into_owned();
        let mut args = vec![
            "stream",
            "--model",
            &m,
            "--connect",
            &server.addr,
            "--frames",
            "12",
            "--link",
            "wifi-good",
            "--frames-out",
            &frames_arg,
        ];
        if !pipeline {
            args.push("--no-pipeline");
        }
        let (j, out) = json_line(&args);
        assert!(out.contains("throughput (frames/s)") && out.contains("latency p95 (ms)"), "{out}");
        assert_eq!(j["frames"], 12, "{j}");
        assert_eq!(j["pipeline"], pipeline, "{j}");
        // The per-frame records, written as each frame was delivered: every
        // frame once, in order, and the summary's counts agree with them.
        let text = std::fs::read_to_string(&frames_out).expect("frames-out");
        let _ = std::fs::remove_file(&frames_out);
        let frames: Vec<serde_json::Value> =
            text.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
        let ids: Vec<u64> = frames.iter().map(|f| f["frame"].as_u64().expect("frame")).collect();
        assert_eq!(ids.len(), 12, "{text}");
        assert!(ids.windows(2).all(|w| w[0] + 1 == w[1]), "{ids:?}");
        let offloaded = frames.iter().filter(|f| f["offloaded"] == true).count();
        assert_eq!(j["offloaded"].as_u64(), Some(offloaded as u64), "{j}");
        assert_eq!(j["local"].as_u64(), Some((12 - offloaded) as u64), "{j}");
        for f in &frames {
            // An offloaded frame sent bytes and ran layers on the handheld; a
            // local one ran every layer on the wearable and sent nothing.
            let (prefix, layers) = (f["prefix_layers"].as_u64(), f["layers"].as_u64());
            if f["offloaded"] == true {
                assert!(f["up_bytes"].as_u64() > Some(0) && prefix < layers, "{f}");
            } else {
                assert!(f["up_bytes"] == 0 && prefix == layers, "{f}");
            }
        }
        let (p50, p99) = (j["p50_ms"].as_f64().unwrap_or(-1.0), j["p99_ms"].as_f64().unwrap_or(-1.0));
        assert!(p50 > 0.0 && p50 <= p99, "{j}");
        assert!(j["throughput_fps"].as_f64().unwrap_or(0.0) > 0.0, "{j}");
    }
}

#[test]
fn an_unreachable_handheld_means_the_wearable_runs_alone() {
    let m = model();
    // Nothing listens on port 1.
    let (j, _) = json_line(&["run", "--model", &m, "--connect", "127.0.0.1:1", "--ready-timeout", "2"]);
    assert_eq!(j["offloaded"], false, "{j}");
    assert_eq!(j["prefix_layers"], j["layers"], "{j}");
    let why = j["local_reason"].as_str().unwrap_or_default();
    assert!(why.starts_with("no handheld:") && why.contains("refused"), "{j}");
}

/// A strategy sets the link encodings (Tandem lossless at least, the
/// baselines raw): where that overrides `--encodings`, the wearable says so.
#[test]
fn a_strategy_that_overrides_the_asked_encodings_says_so() {
    let m = model();
    let alone = ["run", "--model", &m, "--connect", "127.0.0.1:1", "--ready-timeout", "2"];
    let said = |extra: &[&str]| {
        let o = wearable(&[&alone[..], extra].concat());
        assert!(o.status.success(), "{extra:?}: {}", stderr(&o));
        stderr(&o).lines().filter(|l| l.contains("(the strategy sets them)")).collect::<Vec<_>>().join("\n")
    };
    let raised = said(&["--strategy", "tandem", "--encodings", "raw"]);
    assert_eq!(
        raised,
        "--strategy tandem: link encodings lossless (the strategy sets them), not --encodings raw"
    );
    assert_eq!(said(&["--strategy", "tandem", "--encodings", "lossless"]), "", "as asked: nothing said");
    // --encodings lossless is the flag's default.
    let lowered = said(&["--strategy", "dads"]);
    assert_eq!(
        lowered,
        "--strategy dads: link encodings raw (the strategy sets them), not --encodings lossless"
    );
}

#[test]
fn bad_paired_arguments_get_clear_errors() {
    let m = model();
    let cases: [(&[&str], &str); 7] = [
        (&["run", "--model", &m, "--connect", "127.0.0.1:1", "--require-handheld", "1"], "no handheld ready"),
        (
            &["run", "--model", &m, "--connect", "127.0.0.1:1", "--require-handheld", "0"],
            "--require-handheld",
        ),
        (&["run", "--model", &m, "--connect", "127.0.0.1:1", "--slowdown", "0.5"], "--slowdown"),
        (&["run", "--model", &m, "--connect", "127.0.0.1:1", "--latency-hint", "soon"], "--latency-hint"),
        (
            &["run", "--model", &m, "--connect", "127.0.0.1:1", "--link", "ble-9"],
            "unknown link profile 'ble-9'",
        ),
        (
            &["stream", "--model", &m, "--connect", "127.0.0.1:1", "--schedule", "x.txt"],
            "--schedule needs --link",
        ),
        (&["run", "--model", "/no/such.onnx", "--connect", "127.0.0.1:1"], "/no/such.onnx"),
    ];
    for (args, want) in cases {
        let o = wearable(args);
        assert!(!o.status.success(), "{args:?} succeeded");
        let err = stderr(&o);
        assert!(err.contains(want), "{args:?}: the error does not say '{want}': {err}");
    }
}

/// `--input NAME=FILE.npy` feeds a NumPy file, and `--save-outputs DIR`
/// writes each output as `.npy`: the same input gives the same outputs on
/// the watch alone and offloaded, and a file of the wrong shape is refused
/// naming the input.
#[test]
fn run_reads_npy_inputs_and_saves_npy_outputs() {
    let server = HandheldProcess::start(&handheld_bin(), &[]).expect("server");
    let m = model();
    let dir = std::env::temp_dir().join(format!("tandem-npy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let model = tandem::Model::from_path(&m, &Default::default()).expect("model");
    let inputs = tandem::check::random_inputs(&model, 7).expect("inputs");
    let (name, x) = inputs.iter().next().expect("one input");
    let npy = dir.join("x.npy");
    tandem::npy::write(&npy, x).expect("write .npy");
    let spec = format!("{name}={}", npy.display());
    let mut saved = Vec::new();
    for placement in ["wearable", "handheld"] {
        let out = dir.join(placement);
        let (j, _) = json_line(&[
            "run",
            "--model",
            &m,
            "--connect",
            &server.addr,
            "--placement",
            placement,
            "--input",
            &spec,
            "--save-outputs",
            out.to_str().expect("utf-8"),
        ]);
        assert_eq!(j["offloaded"], placement == "handheld", "{j}");
        let files = j["saved_outputs"].as_object().expect("saved_outputs");
        assert_eq!(files.len(), model.graph().outputs().len(), "{j}");
        let file = files.values().next().and_then(|f| f.as_str()).expect("a file");
        saved.push(tandem::npy::read(std::path::Path::new(file)).expect("read saved .npy"));
    }
    // The unsplit model in this process, on the same input.
    let unsplit =
        tandem::split::full_plan(&model).and_then(|p| p.run(model.graph(), &inputs)).expect("unsplit");
    let out_name = &model.graph().tensor(model.graph().outputs()[0]).name;
    let want = &**unsplit.get(out_name).expect("the output");
    for got in &saved {
        let d = tandem::check::diff(want, got).expect("comparable");
        assert!(d.tolerance_ratio <= 1.0, "saved output differs from the unsplit run: {d:?}");
    }
    // A file of another shape is refused, naming the input; no output is written.
    let small = dir.join("small.npy");
    tandem::npy::write(&small, &tandem::Tensor::zero::<f32>(&[1, 3, 8, 8]).expect("tensor")).expect("write");
    let o = wearable(&[
        "run",
        "--model",
        &m,
        "--connect",
        &server.addr,
        "--input",
        &format!("{name}={}", small.display()),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains(name.as_str()) && err.contains("[1, 3, 8, 8]"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
