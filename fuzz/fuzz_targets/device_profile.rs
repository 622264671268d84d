//! Device-profile TOML: any text parses to a validated profile or a named
//! error, and a parsed profile's figures are usable without a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tandem_plan::device::DeviceProfile;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(p) = DeviceProfile::from_toml_str(text) {
        let _ = p.summary();
        let _ = p.to_toml_string();
        let _ = p.inference_cluster().map(|c| c.voltage_range());
    }
});
