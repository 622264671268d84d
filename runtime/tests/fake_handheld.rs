//! What the hand-written handhelds of these tests share: the model they
//! serve, the runtime they run in, and a well-formed handshake.

use tandem::client::ModelFile;
use tandem::protocol::{Header, LatencySummary, Message, StatusReport, PROTOCOL_VERSION};
use tandem::InputShapes;

/// A status a well-behaved handheld reports.
pub const GOOD: StatusReport = StatusReport { load: 0.1, queue: 0, battery: 0.9, charging: false };

/// MNIST from the zoo.
pub fn mnist() -> ModelFile {
    let path = tandem_models::ensure_models().expect("zoo").zoo_path("mnist").expect("mnist").to_path_buf();
    ModelFile::load(&path, &InputShapes::none()).expect("model")
}

/// A one-worker runtime for a fake handheld.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("rt")
}

/// The answers to a Hello: a Welcome (the model is known) and a
/// `ModelReady` with a plausible profile of `layers` layers.
pub fn ready(layers: usize) -> [Message; 2] {
    [
        Message::new(Header::Welcome {
            version: PROTOCOL_VERSION,
            device: "pixel-8-pro".into(),
            has_model: true,
            status: GOOD,
            engines: vec![Default::default()],
        }),
        Message::new(Header::ModelReady {
            latency: LatencySummary {
                per_layer_s: vec![1e-4; layers],
                overhead_s: 1e-4,
                engine: Default::default(),
                others: vec![],
            },
        }),
    ]
}
