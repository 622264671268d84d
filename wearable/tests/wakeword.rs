//! `tandem-wearable wakeword` on speech from espeak-ng, with openWakeWord's
//! real models: "alexa" is detected in its clip only, "hey jarvis" by its own
//! head only, and the scores are the same when the speech embedding runs on a
//! real `tandem-handheld serve` process as when it runs on the watch.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{stderr, stdout, wearable};
use tandem_models::real::ensure_real_models;
use tandem_tools::testing::HandheldProcess;

fn handheld_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tandem-wearable")).with_file_name("tandem-handheld")
}

fn speak(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(format!("{name}.wav"));
    let status = Command::new("espeak-ng")
        .args(["-v", "en-us", "-s", "140", "-w"])
        .arg(&path)
        .arg(text)
        .status()
        .expect("espeak-ng runs (Debian package espeak-ng)");
    assert!(status.success());
    path.to_string_lossy().into_owned()
}

/// (detections as (keyword, score), the summary line).
fn detect(wav: &str, extra: &[&str]) -> (Vec<(String, f64)>, serde_json::Value) {
    let set = ensure_real_models().expect("real models");
    let p = |n: &str| set.path(&format!("{n}.onnx")).to_string_lossy().into_owned();
    let (mel, emb, alexa, jarvis) =
        (p("oww_melspectrogram"), p("oww_embedding"), p("oww_alexa"), p("oww_hey_jarvis"));
    let cards = tandem_models::real::cards_dir().to_string_lossy().into_owned();
    let mut args = vec!["wakeword", "--wav", wav, "--mel", &mel, "--embedding", &emb, "--keyword", &alexa];
    args.extend(["--keyword", &jarvis, "--cards", &cards]);
    args.extend(extra);
    let o = wearable(&args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    let lines: Vec<serde_json::Value> =
        stdout(&o).lines().map(|l| serde_json::from_str(l).expect("JSON lines")).collect();
    let (summary, hits) = lines.split_last().expect("a summary line");
    let hits = hits
        .iter()
        .map(|h| (h["keyword"].as_str().expect("keyword").to_string(), h["score"].as_f64().expect("score")))
        .collect();
    (hits, summary.clone())
}

#[test]
fn keywords_are_detected_in_their_clips_only_and_split_scores_match_local_ones() {
    let dir = std::env::temp_dir().join(format!("tandem-wakeword-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let alexa = speak(&dir, "alexa", "alexa");
    let jarvis = speak(&dir, "jarvis", "hey jarvis");
    let other = speak(&dir, "other", "hello there, how are you");

    let (hits, local) = detect(&alexa, &[]);
    assert_eq!(hits.len(), 1, "{hits:?} {local}");
    assert_eq!(hits[0].0, "alexa");
    assert!(hits[0].1 > 0.5, "{hits:?}");
    let (hits, _) = detect(&jarvis, &[]);
    assert_eq!(hits.iter().map(|h| h.0.as_str()).collect::<Vec<_>>(), ["hey_jarvis"], "{hits:?}");
    let (hits, summary) = detect(&other, &[]);
    assert!(hits.is_empty(), "a detection in speech without a keyword: {hits:?} {summary}");
    assert!(summary["max_score"]["alexa"].as_f64().expect("score") < 0.1, "{summary}");

    // The embedding on a real handheld, over emulated BLE 2M: same scores.
    let server = HandheldProcess::start(&handheld_bin(), &[]).expect("handheld");
    let (hits, split) =
        detect(&alexa, &["--connect", &server.addr, "--link", "ble-2m", "--placement", "handheld"]);
    assert_eq!(
        split["embeddings_offloaded"], split["embeddings"],
        "every embedding ran on the handheld: {split}"
    );
    assert_eq!(hits.len(), 1, "{hits:?}");
    for name in ["alexa", "hey_jarvis"] {
        let (a, b) = (
            local["max_score"][name].as_f64().expect("local"),
            split["max_score"][name].as_f64().expect("split"),
        );
        assert!((a - b).abs() <= 1e-5, "{name}: local {a} vs split {b}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_wakeword_input_gets_one_line() {
    let set = ensure_real_models().expect("real models");
    let mel = set.path("oww_melspectrogram.onnx").to_string_lossy().into_owned();
    for (args, want) in [
        (
            vec!["wakeword", "--wav", "/no/such.wav", "--mel", &mel, "--embedding", &mel, "--keyword", &mel],
            "/no/such.wav",
        ),
        (
            vec![
                "wakeword",
                "--wav",
                &mel,
                "--mel",
                &mel,
                "--embedding",
                &mel,
                "--keyword",
                &mel,
                "--link",
                "ble-2m",
            ],
            "--connect",
        ),
    ] {
        let o = wearable(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(want), "{args:?}: {}", stderr(&o));
    }
}

/// Cards that contradict the models are refused, naming the mismatch: an
/// embedding hop other than the mel model's frames per chunk, and a window
/// the embedding model was not built for.
#[test]
fn cards_that_contradict_the_models_are_refused() {
    let set = ensure_real_models().expect("real models");
    let p = |n: &str| set.path(&format!("{n}.onnx")).to_string_lossy().into_owned();
    let dir = std::env::temp_dir().join(format!("tandem-wakeword-cards-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let wav = speak(&dir, "hi", "hi");
    let card =
        std::fs::read_to_string(tandem_models::real::cards_dir().join("oww_embedding.toml")).expect("card");
    for (edit, want) in [
        (("hop = 8", "hop = 7"), "hop is 7"),
        (("window = 76", "window = 70"), "window 70 differs from its shape's 76"),
    ] {
        std::fs::write(dir.join("oww_embedding.toml"), card.replace(edit.0, edit.1)).expect("card");
        let cards = dir.to_string_lossy().into_owned();
        let (mel, emb, alexa) = (p("oww_melspectrogram"), p("oww_embedding"), p("oww_alexa"));
        let args = [
            "wakeword",
            "--wav",
            &wav,
            "--mel",
            &mel,
            "--embedding",
            &emb,
            "--keyword",
            &alexa,
            "--cards",
            &cards,
        ];
        let o = wearable(&args);
        assert_eq!(o.status.code(), Some(2), "{want}: {}", stdout(&o));
        assert!(stderr(&o).contains(want), "{want}: {}", stderr(&o));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
