//! The handheld's storage limits, in process: pushed models are kept
//! within `max_pushed_bytes` (least recently used deleted first), loaded
//! models within `max_loaded_bytes`, and a plain wearable may not push when
//! `plain_pushes` is off. Each is seen from outside: the files in
//! `pushed/`, and whether a wearable has to push again.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tandem::client::{ModelFile, Placement, Session, SessionConfig};
use tandem::protocol::model_digest;
use tandem::server::{spawn_memory, ServerConfig, PUSHED_DIR};
use tandem::{tensor_f32, InputShapes};

fn models() -> (ModelFile, ModelFile) {
    let a = ModelFile::from_bytes(tandem_models::tiny::tiny_mlp_onnx(), &InputShapes::none()).expect("mlp");
    let b = ModelFile::from_bytes(tandem_models::tiny::tiny_diamond_onnx(), &InputShapes::none())
        .expect("diamond");
    (a, b)
}

fn offload_config() -> SessionConfig {
    let mut c = SessionConfig::watch_and_phone().expect("profiles");
    c.placement = Placement::HandheldOnly;
    c.ready_timeout = Duration::from_secs(30);
    c
}

/// Opens a session for `model`, runs one frame on the handheld, and closes.
fn use_model(server: &tandem::link::MemoryTransport, model: &ModelFile) -> Result<(), String> {
    let mut s = Session::open(model.clone(), Box::new(server.clone()), offload_config())
        .map_err(|e| e.to_string())?;
    if !s.is_ready() {
        return Err(format!("not ready: {:?}", s.status()));
    }
    let g = model.model.graph();
    let input = g.tensor(g.inputs()[0]);
    let n: usize = input.shape.iter().product();
    s.feed(&input.name, tensor_f32(&input.shape, &vec![0.5; n]).expect("tensor"))
        .map_err(|e| e.to_string())?;
    let report = s.run().map_err(|e| e.to_string())?;
    if !report.offloaded {
        return Err(format!("ran here: {report:?}"));
    }
    Ok(())
}

fn pushed(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join(PUSHED_DIR))
        .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    names.sort();
    names
}

fn file_of(model: &ModelFile) -> String {
    format!("{}.onnx", hex::encode(model_digest(&model.bytes)))
}

fn temp(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tandem-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

#[test]
fn pushed_and_loaded_models_are_evicted_least_recently_used_first() {
    let (a, b) = models();
    let dir = temp("limits-evict");
    // Room for the larger of the two alone, in both stores.
    let room = a.bytes.len().max(b.bytes.len()) as u64;
    let server = spawn_memory(ServerConfig {
        models_dir: Some(dir.clone()),
        max_pushed_bytes: room,
        max_loaded_bytes: room,
        ..ServerConfig::default()
    })
    .expect("server");
    use_model(&server, &a).expect("a");
    assert_eq!(pushed(&dir), vec![file_of(&a)]);
    use_model(&server, &b).expect("b");
    assert_eq!(pushed(&dir), vec![file_of(&b)], "a, least recently used, stays on disk");
    // a is neither stored nor loaded any more: it is pushed again, and b goes.
    use_model(&server, &a).expect("a again");
    assert_eq!(pushed(&dir), vec![file_of(&a)]);

    // A handheld started on that directory keeps what was pushed, within its limit.
    let again = spawn_memory(ServerConfig {
        models_dir: Some(dir.clone()),
        max_pushed_bytes: room,
        ..ServerConfig::default()
    })
    .expect("server");
    use_model(&again, &a).expect("a, known from the last run");
    assert_eq!(pushed(&dir), vec![file_of(&a)]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_plain_wearable_may_not_push_when_plain_pushes_are_off_but_may_name_a_model_here() {
    let (a, b) = models();
    let dir = temp("limits-plain");
    std::fs::write(dir.join("mlp.onnx"), &*a.bytes).expect("write");
    let server = spawn_memory(ServerConfig {
        models_dir: Some(dir.clone()),
        plain_pushes: false,
        ..ServerConfig::default()
    })
    .expect("server");
    use_model(&server, &a).expect("a model in --models needs no push");
    let e = match Session::open(b.clone(), Box::new(server.clone()), {
        let mut c = offload_config();
        c.require_handheld = Some(Duration::from_secs(10));
        c
    }) {
        Ok(_) => panic!("an unpaired push was taken"),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("paired wearables only") && e.contains("tandem-wearable pair"), "{e}");
    assert!(pushed(&dir).is_empty(), "{:?}", pushed(&dir));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A peer that says Hello and then nothing is closed after `idle_timeout`,
/// with a reason.
#[test]
fn an_idle_peer_is_closed_with_a_reason() {
    use tandem::link::Transport;
    use tandem::protocol::{encode, FrameDecoder, Header, Message, PROTOCOL_VERSION};
    let server =
        spawn_memory(ServerConfig { idle_timeout: Duration::from_millis(300), ..ServerConfig::default() })
            .expect("server");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("rt");
    let reason = rt.block_on(async {
        let mut link = server.connect().await.expect("link");
        let hello = Message::new(Header::Hello {
            version: PROTOCOL_VERSION,
            model_digest: [7; 32],
            model_bytes: 100,
            device: "test".into(),
            input_shapes: vec![],
            dims: vec![],
        });
        link.tx.send(encode(&hello).expect("hello")).await.expect("send");
        let mut decoder = FrameDecoder::default();
        let wait = async {
            while let Ok(Some(bytes)) = link.rx.recv().await {
                let (messages, _) = decoder.push_and_decode(&bytes);
                for m in messages {
                    if let Header::Error { reason, .. } = m.header {
                        return Some(reason);
                    }
                }
            }
            None
        };
        tokio::time::timeout(Duration::from_secs(20), wait).await.ok().flatten()
    });
    let reason = reason.expect("closed without a reason, or never");
    assert!(reason.contains("idle"), "{reason}");
}
