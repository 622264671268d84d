//! The frame decoder and message decoding on arbitrary bytes, cut into
//! arbitrary chunks: never a panic, and every message it accepts encodes
//! back and decodes to the same bytes, with its tensors (encoded ones through
//! their decoders) built or refused by name.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tandem_proto::protocol::{encode, FrameDecoder};

fuzz_target!(|data: &[u8]| {
    let Some((&cut, bytes)) = data.split_first() else { return };
    let step = usize::from(cut).max(1);
    let mut decoder = FrameDecoder::new(1 << 20);
    for chunk in bytes.chunks(step) {
        let (messages, failed) = decoder.push_and_decode(chunk);
        for m in messages {
            let _ = m.tensors();
            let again = encode(&m).expect("an accepted message encodes");
            let mut d = FrameDecoder::new(1 << 20);
            let (back, e) = d.push_and_decode(&again);
            assert!(e.is_none(), "a re-encoded message does not decode: {e:?}");
            // Compared as bytes: a NaN in a header is not equal to itself.
            assert_eq!(back.len(), 1, "one frame decoded to {} messages", back.len());
            let twice = encode(&back[0]).expect("encodes again");
            assert_eq!(twice, again, "a message changed through encode and decode");
        }
        if failed.is_some() {
            assert!(decoder.next_message().is_err(), "a failed decoder must stay failed");
            return;
        }
    }
});
