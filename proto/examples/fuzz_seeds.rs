//! Writes the fuzz targets' seed corpora (`fuzz/corpus/TARGET/`) from
//! valid samples: frame streams of every message kind, both sessions'
//! handshakes, record-shaped bytes, the shipped device profiles, schedule
//! files and a tiny ONNX model. `scripts/fuzz.sh` runs it first.

use std::path::{Path, PathBuf};

use tandem_proto::encoding::Encoding;
use tandem_proto::protocol::WireTensor;
use tandem_proto::protocol::{
    encode, model_digest, pack_tensor, ErrorCode, Header, LatencySummary, Message, StatusReport,
    PROTOCOL_VERSION,
};
use tandem_proto::secure::{record, Kind};

const STATUS: StatusReport = StatusReport { load: 0.2, queue: 1, battery: 0.8, charging: true };

fn frames(messages: &[Message]) -> Vec<u8> {
    messages.iter().flat_map(|m| encode(m).expect("a valid message encodes")).collect()
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join(name), bytes)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let corpus = root.join("fuzz/corpus");
    let model = tandem_models::tiny::tiny_mlp_onnx();
    let digest = model_digest(&model);
    let x = WireTensor::from_f32(vec![1, 4], &[0.5, -1.0, 2.0, 0.0])?;
    let packed = |e| pack_tensor("x", &x, e, None);
    let run = |frame, e| -> Result<Message, Box<dyn std::error::Error>> {
        Ok(Message::from_packed(
            |tensors| Header::RunSuffix {
                frame,
                cut: "0".into(),
                tensors,
                answer: vec![Encoding::Raw],
                edge: None,
                engine: None,
            },
            vec![packed(e)?],
        ))
    };
    let hello = |d| {
        Message::new(Header::Hello {
            version: PROTOCOL_VERSION,
            model_digest: d,
            model_bytes: model.len() as u64,
            device: "watch-w5".into(),
            input_shapes: vec!["x=1,4".into()],
            dims: vec![],
        })
    };
    let mut known = digest;
    known[0] = 2; // the fuzz targets' handheld knows even digests
    let all = vec![
        hello(digest),
        Message { header: Header::ModelChunk { offset: 0 }, body: model.clone() },
        Message::new(Header::Welcome {
            version: PROTOCOL_VERSION,
            device: "pixel-8-pro".into(),
            has_model: true,
            status: STATUS,
            engines: vec![Default::default()],
        }),
        Message::new(Header::ModelReady {
            latency: LatencySummary {
                per_layer_s: vec![1e-4; 4],
                overhead_s: 1e-4,
                engine: Default::default(),
                others: vec![],
            },
        }),
        run(1, Encoding::Raw)?,
        run(2, Encoding::ShuffleLz4)?,
        run(3, Encoding::F16)?,
        Message::new(Header::Prepare { cuts: vec!["0".into(), "0,1".into()], engine: None }),
        Message::new(Header::Cancel { frames: vec![1, 2] }),
        Message::new(Header::Status(STATUS)),
        Message { header: Header::Probe { id: 1, echo_payload: true }, body: vec![0; 64] },
        Message::new(Header::Error { code: ErrorCode::Tensor, reason: "x".into() }),
        Message::new(Header::Bye),
        Message::new(Header::Edge {
            url: "http://127.0.0.1:8500".into(),
            cuts: vec!["0".into(), "f".into()],
        }),
        Message::new(Header::EdgeReady {
            deployed: vec!["0".into()],
            rtt_us: 900,
            speed: Some(4.0),
            error: None,
        }),
    ];
    for (i, m) in all.iter().enumerate() {
        let mut seed = vec![7u8];
        seed.extend(frames(std::slice::from_ref(m)));
        write(&corpus.join("frame_decoder"), &format!("message-{i}"), &seed)?;
    }
    let mut stream = vec![64u8];
    stream.extend(frames(&all));
    write(&corpus.join("frame_decoder"), "stream", &stream)?;

    let dir = corpus.join("handheld_session");
    write(&dir, "known", &frames(&[hello(known), run(1, Encoding::Raw)?, run(2, Encoding::ShuffleLz4)?]))?;
    let push = [hello(digest), Message { header: Header::ModelChunk { offset: 0 }, body: model.clone() }];
    write(&dir, "push", &frames(&push))?;
    write(&dir, "prepare", &frames(&[hello(known), all[7].clone(), all[9].clone(), all[11].clone()]))?;

    let dir = corpus.join("wearable_session");
    let y = WireTensor::from_f32(vec![1, 2], &[1.0, 2.0])?;
    let result = Message::from_packed(
        |tensors| Header::Result { frame: 0, handheld_compute_us: 10, tensors, edge: None },
        vec![pack_tensor("y", &y, Encoding::Raw, None)?],
    );
    write(
        &dir,
        "ready",
        &frames(&[all[2].clone(), all[3].clone(), result.clone(), all[8].clone(), all[9].clone()]),
    )?;
    // Relayed: the edge's answer, then a result carrying an edge report.
    let report = tandem_proto::protocol::EdgeReport {
        near: "0".into(),
        up_bytes: 16,
        down_bytes: 8,
        edge_us: 900,
        error: Some("timed out".into()),
    };
    let relayed = Message {
        header: Header::Result { frame: 0, handheld_compute_us: 10, tensors: vec![], edge: Some(report) },
        body: vec![],
    };
    write(&dir, "edge", &frames(&[all[2].clone(), all[3].clone(), all[14].clone(), relayed]))?;

    let dir = corpus.join("secure_records");
    let mut seed = vec![40u8];
    seed.extend(record(Kind::Data, &[0; 40]));
    seed.extend(record(Kind::Refuse, b"no"));
    write(&dir, "records", &seed)?;
    let dir = corpus.join("pairing");
    let mut seed = record(Kind::Pake, &[1; 33]);
    seed.extend(record(Kind::Handshake, &[2; 48]));
    seed.extend(record(Kind::Data, &[3; 22]));
    write(&dir, "records", &seed)?;

    let dir = corpus.join("device_profile");
    for entry in std::fs::read_dir(root.join("profiles"))? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("profile").to_string();
        write(&dir, &name, &std::fs::read(&path)?)?;
    }
    let dir = corpus.join("schedule");
    write(&dir, "walk", b"# walk away\n0 1.3\n10 0.3 0.3\n20 0.6\n")?;
    write(&dir, "one", b"0 5\n")?;
    write(&corpus.join("model_loader"), "tiny_mlp.onnx", &model)?;
    println!("seeds in {}", corpus.display());
    Ok(())
}
