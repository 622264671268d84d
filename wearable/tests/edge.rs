//! Three tiers end to end: `tandem-wearable` → `tandem-handheld serve` →
//! a real Open Inference Protocol server (KServe, onnxruntime) on
//! loopback, all real processes, on a real model (PP-OCR's text-direction
//! classifier and its real input). The outputs equal the unsplit model's;
//! killing the edge mid-stream loses and duplicates no frame.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common::{stderr, stdout, wearable};
use tandem::{Cut, InputShapes, Model};
use tandem_oip::testing::start_or_skip;
use tandem_tools::testing::{temp_dir, HandheldProcess};

fn handheld_bin() -> PathBuf {
    let me = PathBuf::from(env!("CARGO_BIN_EXE_tandem-wearable"));
    me.with_file_name("tandem-handheld")
}

/// The real model and its real input (`models/fetch_real.py`).
pub(crate) fn real_model() -> (PathBuf, PathBuf) {
    let dir = tandem_models::cache_dir().join("real");
    let (m, x) = (dir.join("ppocr_cls.onnx"), dir.join("ppocr_cls_input_0.pb"));
    assert!(
        m.exists() && x.exists(),
        "{} is missing: run models/fetch_real.py (scripts/test.sh does)",
        m.display()
    );
    (m, x)
}

/// Writes the suffixes of the default edge cuts into `dir` (the layout
/// `tandem-models export-suffix` writes and the server serves), and picks
/// a placement that uses all three tiers ([`nested`]).
fn export(model: &Model, dir: &Path) -> (Cut, Cut) {
    let cuts = tandem::tier::edge_cuts(model.graph(), tandem::tier::EDGE_FRACTIONS);
    for c in &cuts {
        let bytes = tandem::tier::suffix_onnx(model, c).expect("a suffix");
        std::fs::write(dir.join(format!("{}.onnx", tandem::tier::edge_model_name(&bytes))), bytes)
            .expect("write");
    }
    nested(model)
}

/// A placement among the default edge cuts that uses all three tiers: S1
/// with layers on the watch, S2 ⊋ S1 with layers on the phone, and layers
/// left for the edge.
fn nested(model: &Model) -> (Cut, Cut) {
    let cuts = tandem::tier::edge_cuts(model.graph(), tandem::tier::EDGE_FRACTIONS);
    let within = |a: &Cut, b: &Cut| a.prefix_mask().iter().zip(b.prefix_mask()).all(|(&x, &y)| !x || y);
    for near in cuts.iter().rev() {
        for watch in &cuts {
            if watch.prefix_len() > 0 && watch.prefix_len() < near.prefix_len() && within(watch, near) {
                return (watch.clone(), near.clone());
            }
        }
    }
    panic!("no nested pair of edge cuts with three busy tiers among {}", cuts.len());
}

/// PP-OCR's classifier takes any image size: its real input's.
pub(crate) const SHAPE: &str = "x=1,3,48,192";

pub(crate) fn load(path: &Path) -> Model {
    let shapes = InputShapes::parse_with_dims::<&str, &str>(&[SHAPE], &[]).expect("shape");
    Model::from_path(path, &shapes).expect("model")
}

pub(crate) fn json_last(out: &str) -> serde_json::Value {
    serde_json::from_str(out.lines().last().expect("a line")).expect("the last line is JSON")
}

/// The outputs a run saved (`--save-outputs`, named in its JSON `j`) equal
/// the unsplit model's on the same input file `x`.
pub(crate) fn assert_equals_unsplit(model: &Model, x: &str, j: &serde_json::Value) {
    let inputs = tandem::check::inputs_from_specs(model, &[x.to_string()], 0).expect("input");
    let unsplit =
        tandem::split::full_plan(model).and_then(|p| p.run(model.graph(), &inputs)).expect("unsplit");
    let saved = j["saved_outputs"].as_object().expect("saved_outputs");
    assert_eq!(saved.len(), model.graph().outputs().len(), "{j}");
    for (name, file) in saved {
        let got = tandem::npy::read(Path::new(file.as_str().expect("a path"))).expect("read");
        let d = tandem::check::diff(&unsplit[name.as_str()], &got).expect("comparable");
        assert!(d.ok(), "{name}: differs from the unsplit model: {d:?}\n{j}");
    }
}

/// Runs one frame of the real model through the phone at `phone` at
/// (S1, S2), the edge named by `edge` (`--edge-oip URL` or `--edge ADDR`),
/// and checks it: layers on all three tiers as placed, bytes on both
/// links, the edge's speed measured, outputs equal to the unsplit model's.
/// Returns the frame's JSON.
fn three_tiers(model: &Model, phone: &str, (watch, near): (&Cut, &Cut), edge: &[&str]) -> serde_json::Value {
    let (path, input) = real_model();
    let out = temp_dir("edge-out").expect("dir");
    let (m, x, o) =
        (path.to_str().expect("utf-8"), input.to_str().expect("utf-8"), out.to_str().expect("utf-8"));
    let (s1, s2) = (watch.key().to_string(), near.key().to_string());
    let mut args = vec![
        "run",
        "--model",
        m,
        "--input-shape",
        SHAPE,
        "--connect",
        phone,
        "--input",
        x,
        "--save-outputs",
        o,
        "--cut",
        &s1,
        "--edge-cut",
        &s2,
    ];
    args.extend_from_slice(edge);
    let run = wearable(&args);
    assert!(run.status.success(), "{}", stderr(&run));
    let j = json_last(&stdout(&run));
    let n = model.graph().nodes().len();
    assert_eq!(j["offloaded"], true, "{j}");
    assert_eq!(j["tiers"]["wearable"], watch.prefix_len(), "{j}");
    assert_eq!(j["tiers"]["handheld"], near.prefix_len() - watch.prefix_len(), "{j}");
    assert_eq!(j["tiers"]["edge"], n - near.prefix_len(), "{j}");
    assert!(j["edge"]["error"].is_null(), "the edge failed: {j}");
    assert_eq!(j["edge"]["cut"], s2, "{j}");
    assert!(j["links"]["phone_edge"]["up"].as_u64() > Some(0), "{j}");
    assert!(j["links"]["phone_edge"]["down"].as_u64() > Some(0), "{j}");
    assert!(j["links"]["watch_phone"]["up"].as_u64() > Some(0), "{j}");
    // The plan priced the edge as the phone measured it, not as assumed.
    assert_eq!(j["edge_tier"]["speed_measured"], true, "{j}");
    assert!(j["edge_tier"]["speedup"].as_f64().is_some_and(|s| s > 0.0 && s.is_finite()), "{j}");
    assert_equals_unsplit(model, x, &j);
    let _ = std::fs::remove_dir_all(&out);
    j
}

/// One frame of the real model through the phone at `phone`, the edge
/// named by `edge`, which that phone refuses: the frame runs on two tiers,
/// and the refusal, naming `named` (the flag that would allow it), reaches
/// the wearable's JSON and its log. Returns the frame's JSON.
fn refused_edge(phone: &str, edge: &[&str], named: &str) -> serde_json::Value {
    let (path, input) = real_model();
    let (m, x) = (path.to_str().expect("utf-8"), input.to_str().expect("utf-8"));
    let mut args = vec![
        "run",
        "--model",
        m,
        "--input-shape",
        SHAPE,
        "--connect",
        phone,
        "--input",
        x,
        "--placement",
        "handheld",
    ];
    args.extend_from_slice(edge);
    let run = wearable(&args);
    assert!(run.status.success(), "{}", stderr(&run));
    let j = json_last(&stdout(&run));
    assert_eq!(j["offloaded"], true, "{j}");
    assert_eq!(j["tiers"]["edge"], 0, "{j}");
    assert!(stderr(&run).contains(named), "the refusal is not named: {}", stderr(&run));
    assert!(j["edge_tier"]["refused"].as_str().is_some_and(|r| r.contains(named)), "{j}");
    j
}

#[test]
fn three_tiers_over_a_real_oip_server_equal_the_unsplit_model() {
    let (path, _) = real_model();
    let model = load(&path);
    let repo = temp_dir("edge-repo").expect("dir");
    let (watch, near) = export(&model, &repo);
    let Some(server) = start_or_skip(&repo, "three_tiers_over_a_real_oip_server").expect("the OIP server")
    else {
        return;
    };
    let phone = HandheldProcess::start(&handheld_bin(), &["--edge-allow", server.url()]).expect("handheld");
    three_tiers(&model, &phone.addr, (&watch, &near), &["--edge-oip", server.url()]);
    // An edge the handheld does not list is refused by name: two tiers, no edge.
    let other = HandheldProcess::start(&handheld_bin(), &[]).expect("handheld");
    let j = refused_edge(&other.addr, &["--edge-oip", server.url()], "--edge-allow");
    assert!(j["edge"].is_null(), "{j}");
    let _ = std::fs::remove_dir_all(&repo);
}

#[test]
fn killing_the_edge_mid_stream_delivers_every_frame_once_in_order() {
    let (path, _) = real_model();
    let model = load(&path);
    let repo = temp_dir("edge-kill-repo").expect("dir");
    let (watch, near) = export(&model, &repo);
    let Some(mut server) = start_or_skip(&repo, "killing_the_edge_mid_stream").expect("the OIP server")
    else {
        return;
    };
    let url = server.url().to_string();
    let phone = ["--edge-allow", url.as_str()];
    kill_mid_stream((&watch, &near), &phone, &["--edge-oip", &url], || server.stop());
    let _ = std::fs::remove_dir_all(&repo);
}

#[test]
fn killing_a_tandem_edge_mid_stream_delivers_every_frame_once_in_order() {
    let (path, _) = real_model();
    let (watch, near) = nested(&load(&path));
    let mut edge = tandem_edge("tandem-edge-kill");
    let phone = edge.phone_args();
    let phone: Vec<&str> = phone.iter().map(String::as_str).collect();
    let addr = edge.server.addr.clone();
    kill_mid_stream((&watch, &near), &phone, &["--edge", &addr], || edge.server.kill());
}

/// Streams 40 frames through a phone started with `phone_args` to the edge
/// the wearable names with `edge_args`, placed at (S1, S2); calls `kill`
/// once six frames are out. Every frame is delivered once, in order, the
/// first ones through the edge, the last ones not, all answered by the phone.
fn kill_mid_stream(
    (watch, near): (&Cut, &Cut),
    phone_args: &[&str],
    edge_args: &[&str],
    kill: impl FnOnce(),
) {
    let (path, input) = real_model();
    let phone = HandheldProcess::start(&handheld_bin(), phone_args).expect("handheld");
    let frames_out = temp_dir("edge-kill-frames").expect("dir").join("frames.jsonl");
    let (s1, s2) = (watch.key().to_string(), near.key().to_string());
    let frames = 40;
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_tandem-wearable"))
        .args([
            "stream",
            "--model",
            path.to_str().expect("utf-8"),
            "--input-shape",
            SHAPE,
            "--connect",
            &phone.addr,
        ])
        .args(["--input", input.to_str().expect("utf-8"), "--frames", &frames.to_string(), "--fps", "20"])
        .args(["--cut", &s1, "--edge-cut", &s2])
        .args(edge_args)
        .arg("--frames-out")
        .arg(&frames_out)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the wearable starts");
    // Kill the edge once a few frames went through it.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let done = std::fs::read_to_string(&frames_out).map_or(0, |t| t.lines().count());
        if done >= 6 {
            break;
        }
        assert!(Instant::now() < deadline, "no frames after two minutes");
        std::thread::sleep(Duration::from_millis(20));
    }
    kill();
    let out = child.wait_with_output().expect("the wearable ends");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&frames_out).expect("frames-out");
    let reports: Vec<serde_json::Value> =
        text.lines().map(|l| serde_json::from_str(l).expect("JSON")).collect();
    let ids: Vec<u64> = reports.iter().map(|r| r["frame"].as_u64().expect("frame")).collect();
    assert_eq!(ids.len(), frames, "{text}");
    assert!(ids.windows(2).all(|w| w[0] + 1 == w[1]), "not once each, in order: {ids:?}");
    let on_edge = |r: &serde_json::Value| r["tiers"]["edge"].as_u64().unwrap_or(0) > 0;
    let first: Vec<bool> = reports[..6].iter().map(on_edge).collect();
    assert!(first.iter().all(|&e| e), "the first frames did not reach the edge: {first:?}\n{text}");
    let after = &reports[reports.len() - 5..];
    assert!(after.iter().all(|r| !on_edge(r)), "frames still on a dead edge: {text}");
    // After the kill every frame was still answered by the phone (none fell back to the watch).
    assert!(reports.iter().all(|r| r["offloaded"] == true), "{text}");
    let summary = json_last(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(summary["frames"], frames, "{summary}");
    assert!(summary["edge_frames"].as_u64() >= Some(6), "{summary}");
    // At 20 frames/s a frame later than 50 ms missed the next arrival.
    let late = reports.iter().filter(|r| r["latency_ms"].as_f64().is_some_and(|ms| ms > 50.0)).count();
    assert_eq!(summary["rate_hz"], 20.0, "{summary}");
    assert_eq!(summary["deadline_misses"], late, "{summary}");
    let _ = std::fs::remove_dir_all(frames_out.parent().expect("a dir"));
}

/// A Tandem edge: a second `tandem-handheld serve` (the edge server),
/// paired once with the phone (`pair-edge`) and serving only paired peers,
/// so the phone–edge session is encrypted; the phone pushes it the model.
struct TandemEdge {
    dir: PathBuf,
    server: HandheldProcess,
    phone_keys: PathBuf,
}

impl Drop for TandemEdge {
    fn drop(&mut self) {
        self.server.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn tandem_edge(tag: &str) -> TandemEdge {
    let dir = temp_dir(tag).expect("dir");
    let (edge_keys, phone_keys) = (dir.join("edge"), dir.join("phone-edge"));
    let keys = edge_keys.to_str().expect("utf-8");
    let server = HandheldProcess::start(&handheld_bin(), &["--keys", keys, "--profile", "cloud-k80"])
        .expect("the edge server");
    // Paired while it serves, under its serving address (how the phone finds the key).
    tandem_tools::testing::pair_edge(&handheld_bin(), &edge_keys, &phone_keys, Some(&server.addr))
        .expect("pairing the edge");
    TandemEdge { dir, server, phone_keys }
}

impl TandemEdge {
    /// The phone's `serve` flags that let it relay here.
    fn phone_args(&self) -> Vec<String> {
        let keys = self.phone_keys.to_str().expect("utf-8").to_string();
        vec!["--edge-allow".into(), format!("tandem://{}", self.server.addr), "--edge-keys".into(), keys]
    }
}

#[test]
fn three_tiers_over_a_paired_tandem_edge_equal_the_unsplit_model() {
    let (path, _) = real_model();
    let model = load(&path);
    let (watch, near) = nested(&model);
    let edge = tandem_edge("tandem-edge");
    let phone_args = edge.phone_args();
    let phone_args: Vec<&str> = phone_args.iter().map(String::as_str).collect();
    let phone = HandheldProcess::start(&handheld_bin(), &phone_args).expect("handheld");
    let j = three_tiers(&model, &phone.addr, (&watch, &near), &["--edge", &edge.server.addr]);
    assert_eq!(j["edge_tier"]["url"], format!("tandem://{}", edge.server.addr), "{j}");
    // A phone not paired with the edge is refused by name: two tiers.
    let unpaired = temp_dir("tandem-edge-unpaired").expect("dir");
    let allow = format!("tandem://{}", edge.server.addr);
    let lone = ["--edge-allow", allow.as_str(), "--edge-keys", unpaired.to_str().expect("utf-8")];
    let other = HandheldProcess::start(&handheld_bin(), &lone).expect("handheld");
    refused_edge(&other.addr, &["--edge", &edge.server.addr], "pair-edge");
    let _ = std::fs::remove_dir_all(&unpaired);
}

/// The watch's own link to the edge is one more placement for the
/// planner: with a slow watch, a slow link to the phone and a fast one of
/// its own, it sends the input straight to the edge (the whole model
/// there, outputs equal to the unsplit model's); with DeepWear's poor
/// Wi-Fi as that link, it does not.
#[test]
fn the_planner_sends_frames_straight_to_the_edge_only_when_that_pays() {
    let (path, input) = real_model();
    let model = load(&path);
    let repo = temp_dir("edge-direct-repo").expect("dir");
    export(&model, &repo);
    let Some(server) = start_or_skip(&repo, "the_planner_sends_frames_straight").expect("the OIP server")
    else {
        return;
    };
    let phone = HandheldProcess::start(&handheld_bin(), &["--edge-allow", server.url(), "--slowdown", "2"])
        .expect("handheld");
    let out = temp_dir("edge-direct-out").expect("dir");
    let (m, x, o) =
        (path.to_str().expect("utf-8"), input.to_str().expect("utf-8"), out.to_str().expect("utf-8"));
    let run = |direct: &str| {
        let args = [
            "run",
            "--model",
            m,
            "--input-shape",
            SHAPE,
            "--connect",
            &phone.addr,
            "--input",
            x,
            "--save-outputs",
            o,
            "--link",
            "ble-1m",
            "--slowdown",
            "200",
            "--edge-oip",
            server.url(),
            "--edge-direct-link",
            direct,
        ];
        let run = wearable(&args);
        assert!(run.status.success(), "{}", stderr(&run));
        json_last(&stdout(&run))
    };
    let n = model.graph().nodes().len();
    let j = run("100,100,5");
    assert_eq!(j["tiers"]["edge"], n, "not straight to the edge over a fast link: {j}");
    assert_eq!(j["tiers"]["handheld"], 0, "{j}");
    assert!(j["edge"]["error"].is_null(), "the edge failed: {j}");
    assert_equals_unsplit(&model, x, &j);
    // 110 kB over 100 kbit/s takes about 9 s: not worth it.
    let j = run("0.1,0.1,40");
    assert!(
        j["tiers"]["edge"] != n || j["tiers"]["handheld"] != 0,
        "straight to the edge over DeepWear's poor Wi-Fi: {j}"
    );
    let _ = std::fs::remove_dir_all(&repo);
    let _ = std::fs::remove_dir_all(&out);
}

/// An edge that says it is ready and serves every model, then answers
/// each inference with the model's output name at a shape the graph does
/// not give it (`[1, 3]` for `[1, 2]`): a tiny HTTP server on loopback.
/// Returns its URL; it serves until the test process ends.
fn lying_edge(output: &str) -> String {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let body = serde_json::json!({
        "outputs": [{"name": output, "datatype": "FP32", "shape": [1, 3], "data": [0.25, 0.5, 0.25]}],
    })
    .to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming().map_while(Result::ok) {
            let mut reader = BufReader::new(stream);
            let mut length = 0usize;
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
                line.clear();
            }
            let mut request = vec![0; length];
            let _ = reader.read_exact(&mut request);
            // Readiness calls carry no body: every server and model is ready.
            let answer = if request.is_empty() { r#"{"ready": true}"#.to_string() } else { body.clone() };
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                answer.len()
            );
            let mut stream = reader.into_inner();
            let _ = stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(answer.as_bytes()));
        }
    });
    url
}

/// An edge that lies is checked even after it attached: its answer of the
/// wrong shape is refused, the phone runs the rest itself, and the frame's
/// outputs still equal the unsplit model's, its report naming why.
#[test]
fn an_edge_answering_the_wrong_shape_is_refused_and_the_phone_runs_the_rest() {
    let (path, input) = real_model();
    let model = load(&path);
    let (watch, near) = nested(&model);
    let output = model.graph().tensor(model.graph().outputs()[0]).name.clone();
    let url = lying_edge(&output);
    let phone = HandheldProcess::start(&handheld_bin(), &["--edge-allow", &url]).expect("handheld");
    let out = temp_dir("edge-lying-out").expect("dir");
    let (m, x, o) =
        (path.to_str().expect("utf-8"), input.to_str().expect("utf-8"), out.to_str().expect("utf-8"));
    let (s1, s2) = (watch.key().to_string(), near.key().to_string());
    let args = [
        "run",
        "--model",
        m,
        "--input-shape",
        SHAPE,
        "--connect",
        &phone.addr,
        "--input",
        x,
        "--save-outputs",
        o,
        "--cut",
        &s1,
        "--edge-oip",
        &url,
        "--edge-cut",
        &s2,
    ];
    let run = wearable(&args);
    assert!(run.status.success(), "{}", stderr(&run));
    let j = json_last(&stdout(&run));
    assert_eq!(j["offloaded"], true, "the phone did not answer: {j}");
    let why = j["edge"]["error"].as_str().unwrap_or_default();
    // The graph's check named the tensor and both shapes (not a refusal of the HTTP answer).
    assert!(
        why.contains(&format!("tensor '{output}'")) && why.contains("[1, 3]"),
        "the lie is not named: {j}"
    );
    // The phone ran the rest: nothing counted on the edge, outputs exact.
    assert_eq!(j["tiers"]["edge"], 0, "{j}");
    assert_equals_unsplit(&model, x, &j);
    // It said it served the suffixes but its speed could not be measured.
    assert_eq!(j["edge_tier"]["speed_measured"], false, "{j}");
    let _ = std::fs::remove_dir_all(&out);
}
