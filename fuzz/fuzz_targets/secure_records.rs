//! The encrypted record layer after a real handshake: arbitrary bytes,
//! cut into arbitrary chunks, into the opener (buffered and in place)
//! never panic, and nothing opens that was not sealed; arbitrary first
//! handshake messages are refused, never a panic.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use tandem_proto::secure::{answer_session, Answer, Records, SessionInitiator, StaticKeys};

fn keys() -> &'static (StaticKeys, StaticKeys) {
    static KEYS: OnceLock<(StaticKeys, StaticKeys)> = OnceLock::new();
    KEYS.get_or_init(|| (StaticKeys::generate().expect("keys"), StaticKeys::generate().expect("keys")))
}

fuzz_target!(|data: &[u8]| {
    let (w, h) = keys();
    // Any first message: refused (it is not from a paired key's handshake).
    if let Answer::Accepted { .. } = answer_session(h, data, |_| true) {
        panic!("an arbitrary message was accepted as a handshake");
    }
    let (initiator, first) = SessionInitiator::start(w, &h.public).expect("start");
    let mut records = Records::new();
    records.push(&first[8..]);
    let _hello = records.next_owned().expect("hello");
    let (_, message) = records.next_owned().expect("record").expect("handshake");
    let Answer::Accepted { reply, channel, .. } = answer_session(h, &message, |k| *k == w.public) else {
        panic!("the paired wearable was refused");
    };
    let mut back = Records::new();
    back.push(&reply);
    let (kind, payload) = back.next_owned().expect("record").expect("reply");
    let _wearable = initiator.finish(kind, &payload).expect("finish");
    let (_, mut opener) = channel.split(Records::new());
    let Some((&cut, bytes)) = data.split_first() else { return };
    let mut out = vec![];
    for (i, chunk) in bytes.chunks(usize::from(cut).max(1)).enumerate() {
        let r = if i % 2 == 0 {
            opener.push(chunk);
            opener.open_into(&mut out)
        } else {
            opener.open_chunk(chunk, &mut out)
        };
        if r.is_err() {
            break;
        }
    }
    assert!(out.is_empty(), "bytes nobody sealed opened");
});
