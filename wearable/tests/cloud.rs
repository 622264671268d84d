//! Cloud-only end to end (DeepWear's cloud baseline): `tandem-wearable
//! --strategy cloud-only` sends each frame's input straight to a real Open
//! Inference Protocol server (KServe, onnxruntime) on loopback over its
//! own emulated link, no phone involved, on a real model (PP-OCR's
//! text-direction classifier and its real input). The outputs equal the
//! unsplit model's; killing the edge mid-stream runs the rest on the watch,
//! every frame delivered once and in order.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::{stderr, stdout, wearable};
use crate::edge::{json_last, load, real_model, SHAPE};
use tandem::{Cut, Model};
use tandem_oip::testing::start_or_skip;
use tandem_tools::testing::temp_dir;

/// Writes the whole model's suffix ([`Cut::handheld_only`]'s, one of the
/// default edge cuts) into `dir`, as `tandem-models export-suffix` does.
fn export_whole(path: &Path, dir: &Path) -> Model {
    let model = load(path);
    let whole = Cut::handheld_only(model.graph());
    let cuts = tandem::tier::edge_cuts(model.graph(), tandem::tier::EDGE_FRACTIONS);
    assert!(cuts.contains(&whole), "the whole model is among the default edge cuts");
    let bytes = tandem::tier::suffix_onnx(&model, &whole).expect("a suffix");
    std::fs::write(dir.join(format!("{}.onnx", tandem::tier::edge_model_name(&bytes))), bytes)
        .expect("write");
    model
}

#[test]
fn cloud_only_over_a_real_oip_server_equals_the_unsplit_model() {
    let (path, input) = real_model();
    let repo = temp_dir("cloud-repo").expect("dir");
    let model = export_whole(&path, &repo);
    let Some(server) = start_or_skip(&repo, "cloud_only_over_a_real_oip_server").expect("the OIP server")
    else {
        return;
    };
    let out = temp_dir("cloud-out").expect("dir");
    let (m, x, o) =
        (path.to_str().expect("utf-8"), input.to_str().expect("utf-8"), out.to_str().expect("utf-8"));
    // No phone: the address is never dialled.
    let args = [
        "run",
        "--model",
        m,
        "--input-shape",
        SHAPE,
        "--connect",
        "127.0.0.1:9",
        "--input",
        x,
        "--save-outputs",
        o,
        "--strategy",
        "cloud-only",
        "--edge-oip",
        server.url(),
        "--edge-direct-link",
        "5,5,20",
    ];
    let run = wearable(&args);
    assert!(run.status.success(), "{}", stderr(&run));
    let j = json_last(&stdout(&run));
    let n = model.graph().nodes().len();
    assert_eq!(j["offloaded"], true, "{j}");
    assert!(j["fallback"].is_null(), "{j}");
    assert_eq!(j["tiers"]["wearable"], 0, "{j}");
    assert_eq!(j["tiers"]["handheld"], 0, "{j}");
    assert_eq!(j["tiers"]["edge"], n, "{j}");
    assert!(j["edge"]["error"].is_null(), "the edge failed: {j}");
    assert_eq!(j["edge"]["cut"], Cut::handheld_only(model.graph()).key().to_string(), "{j}");
    // The input crossed the watch's own link: 1×3×48×192 floats and the HTTP framing.
    let up = j["edge"]["up_bytes"].as_u64().expect("up bytes");
    assert!(up > 3 * 48 * 192 * 4, "{j}");
    // Over 5 Mbit/s that is at least 88 ms, plus the 20 ms RTT.
    assert!(j["latency_ms"]["total"].as_f64() > Some(100.0), "the link is not emulated: {j}");
    // The watch paid its radio (model-based); the phone nothing.
    assert!(j["energy_j_model_based"]["wearable"].as_f64() > Some(0.0), "{j}");
    assert_eq!(j["energy_j_model_based"]["handheld"].as_f64(), Some(0.0), "{j}");
    crate::edge::assert_equals_unsplit(&model, x, &j);
    // Cloud-only with no edge is refused by name.
    let run = wearable(&args[..args.len() - 4]);
    assert!(!run.status.success());
    assert!(stderr(&run).contains("--edge-oip"), "{}", stderr(&run));
    let _ = std::fs::remove_dir_all(&repo);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn killing_the_edge_mid_stream_runs_the_rest_on_the_watch_none_lost() {
    let (path, input) = real_model();
    let repo = temp_dir("cloud-kill-repo").expect("dir");
    export_whole(&path, &repo);
    let Some(mut server) = start_or_skip(&repo, "cloud_only_killing_the_edge").expect("the OIP server")
    else {
        return;
    };
    let frames_out = temp_dir("cloud-kill-frames").expect("dir").join("frames.jsonl");
    let frames = 30;
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_tandem-wearable"))
        .args(["stream", "--model", path.to_str().expect("utf-8"), "--input-shape", SHAPE])
        .args(["--connect", "127.0.0.1:9", "--strategy", "cloud-only", "--edge-oip", server.url()])
        .args(["--input", input.to_str().expect("utf-8"), "--frames", &frames.to_string(), "--fps", "20"])
        .arg("--frames-out")
        .arg(&frames_out)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the wearable starts");
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let done = std::fs::read_to_string(&frames_out).map_or(0, |t| t.lines().count());
        if done >= 5 {
            break;
        }
        assert!(Instant::now() < deadline, "no frames after two minutes");
        std::thread::sleep(Duration::from_millis(20));
    }
    server.stop();
    let out = child.wait_with_output().expect("the wearable ends");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&frames_out).expect("frames-out");
    let reports: Vec<serde_json::Value> =
        text.lines().map(|l| serde_json::from_str(l).expect("JSON")).collect();
    let ids: Vec<u64> = reports.iter().map(|r| r["frame"].as_u64().expect("frame")).collect();
    assert_eq!(ids.len(), frames, "{text}");
    assert!(ids.windows(2).all(|w| w[0] + 1 == w[1]), "not once each, in order: {ids:?}");
    let on_edge = |r: &serde_json::Value| r["tiers"]["edge"].as_u64().unwrap_or(0) > 0;
    assert!(reports[..5].iter().all(on_edge), "the first frames did not reach the edge: {text}");
    let after = &reports[reports.len() - 5..];
    assert!(after.iter().all(|r| !on_edge(r) && r["offloaded"] == false), "frames on a dead edge: {text}");
    // The first frame after the kill fell back, saying why; the next ones ran here in the backoff.
    let fell: Vec<&serde_json::Value> = reports.iter().filter(|r| !r["fallback"].is_null()).collect();
    assert!(!fell.is_empty(), "no fallback: {text}");
    assert!(fell.iter().all(|r| r["edge"]["error"].is_string()), "{text}");
    let summary = serde_json::from_str::<serde_json::Value>(
        String::from_utf8_lossy(&out.stdout).lines().last().expect("a summary"),
    )
    .expect("JSON");
    assert_eq!(summary["frames"], frames, "{summary}");
    assert!(summary["edge_frames"].as_u64() >= Some(5), "{summary}");
    assert!(summary["edge_failures"].as_u64() >= Some(1), "{summary}");
    let _ = std::fs::remove_dir_all(&repo);
}
