//! The handheld's session state machine fed any sequence of decodable
//! messages: never a panic, and once it closes it stays closed.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tandem_proto::protocol::{FrameDecoder, StatusReport};
use tandem_proto::session::{Action, HandheldSession};

fuzz_target!(|data: &[u8]| {
    let status = StatusReport { load: 0.1, queue: 0, battery: 0.5, charging: false };
    let t0 = std::time::Instant::now();
    let mut session = HandheldSession::new("pixel-8-pro", status, t0).max_push(1 << 16);
    let mut decoder = FrameDecoder::new(1 << 20);
    let (messages, failed) = decoder.push_and_decode(data);
    let mut closed = false;
    for m in messages {
        let actions = session.on_message(m, |d| d[0] % 2 == 0);
        if closed {
            assert!(actions.iter().all(|a| matches!(a, Action::Close)), "a closed session acted");
        }
        closed |= actions.iter().any(|a| matches!(a, Action::Close));
    }
    if let Some(e) = failed {
        let _ = session.on_decode_error(&e);
    }
    let _ = session.status_message();
    // Its timers after any of it: the hello deadline or the idle timeout
    // closes what is left open (unless frames wait to run: then it is not
    // reading, and that is not idle).
    let _ = session.handle_timeout(t0 + std::time::Duration::from_secs(3600));
    assert!(session.is_closed() || session.queued() > 0, "an hour of silence left the session open");
});
