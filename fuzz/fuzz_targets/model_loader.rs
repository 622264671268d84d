//! `Model::from_bytes` on arbitrary bytes (tract's ONNX parser and our
//! layer DAG): a model or a named error, never a panic. Slow per input:
//! run it in the longer fuzz run, not in CI's smoke.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tandem_core::{InputShapes, Model};

fuzz_target!(|data: &[u8]| {
    // `Model::from_bytes` turns tract's panics into errors; libFuzzer's
    // hook would abort at the panic itself, so it is replaced. A panic
    // escaping `from_bytes` still aborts (libfuzzer-sys catches it).
    static QUIET: std::sync::Once = std::sync::Once::new();
    QUIET.call_once(|| std::panic::set_hook(Box::new(|_| {})));
    let _ = Model::from_bytes(data, &InputShapes::none());
});
