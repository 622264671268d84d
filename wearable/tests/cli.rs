//! The wearable CLI as a real process: its outputs, its exit codes, and the
//! one-line errors bad input gets.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::common;
use common::{stderr, stdout, wearable};

use tandem_models::ensure_models;

fn last_json(o: &Output) -> serde_json::Value {
    let out = stdout(o);
    let line = out.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("last line is not JSON ({e}): {line}"))
}

fn temp_file(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tandem-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("temp file");
    path
}

fn zoo(name: &str) -> PathBuf {
    ensure_models().expect("models").zoo_path(name).expect("zoo model").to_path_buf()
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

#[test]
fn inspect_prints_the_layer_table() {
    let path = zoo("mnist");
    let o = wearable(&["inspect", "--model", s(&path)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.lines().next().unwrap_or_default().contains("flops"), "{out}");
    assert_eq!(out.lines().filter(|l| l.contains(" conv ")).count(), 2, "two convolutions: {out}");
    assert!(out.contains(" fc ") && out.contains(" pool ") && out.contains(" activation "), "{out}");
    assert!(out.lines().last().unwrap_or_default().contains("layers"), "{out}");
}

#[test]
fn split_check_passes_on_every_cut_of_a_chain() {
    let path = zoo("mnist");
    let o = wearable(&["split-check", "--model", s(&path)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let j = last_json(&o);
    assert_eq!(j["ok"], true, "{j}");
    assert_eq!(j["model"], "mnist");
    assert!(j["cuts_checked"].as_u64().unwrap_or(0) >= 10, "{j}");
    assert!(j["max_abs_diff"].as_f64().is_some(), "{j}");
}

/// `--encoding`: lossless encodings pass every cut bit for bit and shrink
/// the ReLU maps; a lossy one reports its error and halves the bytes.
#[test]
fn split_check_sends_crossing_tensors_through_an_encoding() {
    let path = zoo("mnist");
    let run = |e: &str| {
        let o = wearable(&["split-check", "--model", s(&path), "--encoding", e]);
        assert!(o.status.success(), "{e}: {}", stderr(&o));
        last_json(&o)
    };
    for e in ["shuffle-lz4", "sparse-lz4"] {
        let j = run(e);
        assert_eq!(
            (j["ok"].as_bool(), j["lossless"].as_bool(), j["max_abs_diff"].as_f64()),
            (Some(true), Some(true), Some(0.0)),
            "{j}"
        );
        assert!(j["crossing_encoded_bytes"].as_u64() < j["crossing_raw_bytes"].as_u64(), "{j}");
    }
    let j = run("f16");
    assert_eq!(j["lossless"], false, "{j}");
    assert_eq!(j["crossing_encoded_bytes"].as_u64().map(|b| b * 2), j["crossing_raw_bytes"].as_u64(), "{j}");
    assert!(j["max_abs_diff"].as_f64().is_some_and(|d| d > 0.0 && d < 0.01), "f16's error is reported: {j}");
}

#[test]
fn split_check_compares_light_models_with_shipped_outputs() {
    let paths = ensure_models().expect("models");
    let e = paths.light("squeezenet").expect("squeezenet");
    let o = wearable(&[
        "split-check",
        "--model",
        s(&e.model),
        "--cuts",
        "8",
        "--input",
        s(&e.input),
        "--expected",
        s(&e.expected_output),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let j = last_json(&o);
    assert_eq!(j["ok"], true, "{j}");
    assert_eq!(j["expected_output_ok"], true, "{j}");
    // Comparing with a perturbed expected output must fail, with exit 1.
    let bad = temp_file("wrong_output.pb", &load_and_perturb(&e.expected_output));
    let o = wearable(&[
        "split-check",
        "--model",
        s(&e.model),
        "--cuts",
        "2",
        "--input",
        s(&e.input),
        "--expected",
        s(&bad),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(last_json(&o)["ok"], false);
}

/// The expected-output file with one float changed in its raw data.
fn load_and_perturb(path: &Path) -> Vec<u8> {
    use prost::Message;
    let bytes = std::fs::read(path).expect("pb");
    let mut t = tract_onnx::pb::TensorProto::decode(bytes.as_slice()).expect("tensor proto");
    if t.raw_data.len() >= 4 {
        t.raw_data[0..4].copy_from_slice(&1000f32.to_le_bytes());
    } else if let Some(x) = t.float_data.first_mut() {
        *x = 1000.0;
    } else {
        panic!("expected output has no float data");
    }
    t.encode_to_vec()
}

#[test]
fn profile_reports_per_layer_times_and_additivity() {
    let path = zoo("mnist");
    let o = wearable(&["profile", "--model", s(&path), "--runs", "3", "--warmup", "1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("additivity"), "{out}");
    // tract fuses fc1 with its Relu; the time must land on fc1, the heavy layer.
    let fc1 = out.lines().find(|l| l.split_whitespace().nth(1) == Some("fc1")).expect("fc1 row");
    assert!(!fc1.contains("fused"), "{fc1}");
    for conv in ["conv1", "conv2"] {
        let row = out.lines().find(|l| l.split_whitespace().nth(1) == Some(conv)).expect("conv row");
        assert!(!row.contains("fused"), "{row}");
    }
    let j = last_json(&o);
    let ratio = j["additivity_ratio"].as_f64().expect("ratio");
    assert!(ratio > 0.2 && ratio < 5.0, "per-node times should roughly add up: {ratio}");
}

fn assert_bad_input(o: &Output, needle: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "exit 2 for bad input: {err}");
    assert!(!err.contains("panicked"), "no panic: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line: {err}");
    assert!(lines[0].contains(needle), "'{needle}' in: {err}");
}

#[test]
fn bad_input_gets_one_line_and_exit_2() {
    let o = wearable(&["inspect", "--model", "/no/such/model.onnx"]);
    assert_bad_input(&o, "/no/such/model.onnx");
    // The OS's reason is said once, not once per error in the chain.
    assert_eq!(stderr(&o).matches("No such file or directory").count(), 1, "{}", stderr(&o));

    let text = temp_file("notes.onnx", b"these are my notes, not a model\n");
    assert_bad_input(&wearable(&["inspect", "--model", s(&text)]), "not an ONNX model");

    let empty = temp_file("empty.onnx", b"");
    assert_bad_input(&wearable(&["split-check", "--model", s(&empty)]), "empty");

    let unsupported = temp_file("unsupported.onnx", &tandem_models::tiny::unsupported_op_onnx());
    assert_bad_input(&wearable(&["split-check", "--model", s(&unsupported)]), "FrobnicateV7");

    let symbolic = temp_file("symbolic.onnx", &tandem_models::tiny::symbolic_mlp_onnx());
    assert_bad_input(&wearable(&["inspect", "--model", s(&symbolic)]), "--input-shape x=");
    let o = wearable(&["inspect", "--model", s(&symbolic), "--input-shape", "x=3,4"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_bad_input(
        &wearable(&["inspect", "--model", s(&symbolic), "--input-shape", "x=3,,4"]),
        "bad input shape",
    );
    assert_bad_input(
        &wearable(&["inspect", "--model", s(&symbolic), "--input-shape", "y=3,4"]),
        "unknown input 'y'",
    );
}

/// Every command that runs a model, told to use onnxruntime from a file
/// that is not there, says which file and how to get the library, and
/// exits 2; `auto` without it runs on tract.
#[test]
fn without_onnxruntime_every_command_says_how_to_get_it() {
    let mnist = zoo("mnist");
    let lib = "/nonexistent/libonnxruntime.so";
    let commands: [&[&str]; 4] = [
        &["run", "--model", s(&mnist), "--connect", "127.0.0.1:9"],
        &["stream", "--model", s(&mnist), "--connect", "127.0.0.1:9", "--frames", "1"],
        &["split-check", "--model", s(&mnist)],
        &["profile", "--model", s(&mnist)],
    ];
    let run = |args: &[&str], engine: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_tandem-wearable"))
            .args(args)
            .args(["--engine", engine, "--ort-lib", lib])
            .env_remove("ORT_DYLIB_PATH")
            .output()
            .expect("the binary runs")
    };
    for args in commands {
        let o = run(args, "onnxruntime");
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        let last = err.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or_default();
        assert!(last.contains(lib) && last.contains("pip install onnxruntime==1.20.1"), "{args:?}: {last}");
    }
    let o = run(&["profile", "--model", s(&mnist)], "auto");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(last_json(&o)["engine"], "tract", "auto without the library runs on tract");
}
