//! Both pairing state machines fed arbitrary records: never a panic, and
//! never a pairing without the code's SPAKE2 exchange.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use tandem_proto::secure::{PairHandheld, PairStep, PairWearable, Records, StaticKeys};

fn keys() -> &'static StaticKeys {
    static KEYS: OnceLock<StaticKeys> = OnceLock::new();
    KEYS.get_or_init(|| StaticKeys::generate().expect("keys"))
}

fuzz_target!(|data: &[u8]| {
    let mut records = Records::new();
    records.push(data);
    let mut handheld = PairHandheld::new("123456", keys()).expect("code");
    let (mut wearable, _) = PairWearable::start("123456", keys()).expect("code");
    let (mut h_done, mut w_done) = (false, false);
    while let Ok(Some((kind, payload))) = records.next_owned() {
        if !h_done {
            match handheld.on_record(kind, &payload) {
                Ok(PairStep::Paired { .. }) => panic!("the handheld paired with forged records"),
                Ok(PairStep::Send(_)) => {}
                Err(_) => h_done = true,
            }
        }
        if !w_done {
            match wearable.on_record(kind, &payload) {
                Ok(PairStep::Paired { .. }) => panic!("the wearable paired with forged records"),
                Ok(PairStep::Send(_)) => {}
                Err(_) => w_done = true,
            }
        }
    }
});
