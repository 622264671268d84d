//! The wearable's session state machine fed any sequence of decodable
//! messages from a handheld, between offloads of its own: never a panic.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use tandem_types::InputShapes;
use tandem_proto::protocol::FrameDecoder;
use tandem_proto::session::WearableSession;

fuzz_target!(|data: &[u8]| {
    let model = Arc::new(vec![7u8; 300]);
    let mut session = WearableSession::new("watch-w5", model, InputShapes::none(), 128).expect_layers(4);
    let t0 = std::time::Instant::now();
    let _ = session.start(t0);
    let mut decoder = FrameDecoder::new(1 << 20);
    let (messages, _) = decoder.push_and_decode(data);
    for (i, m) in messages.into_iter().enumerate() {
        let _ = session.on_message(m);
        if i % 3 == 0 {
            let _ = session.offload(t0, i as u64, "0".into(), vec![], vec![], None);
        }
        if i % 5 == 1 {
            // An edge ask, so that an EdgeReady may be the answer awaited.
            let _ = session.edge(t0, "http://127.0.0.1:8500", vec!["0".into()]);
        }
    }
    let _ = session.handle_timeout(t0 + std::time::Duration::from_secs(3600));
    assert!(session.is_closed(), "an hour of silence left the session open");
});
