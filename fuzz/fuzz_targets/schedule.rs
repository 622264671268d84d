//! Link schedule files: any text parses to a schedule or a named error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tandem::emulate::Schedule;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let _ = Schedule::parse(text, "fuzz");
});
