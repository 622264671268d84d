//! Small ONNX graphs built from the input's bytes (ops, shapes, constants
//! drawn from tables that mix ordinary values with huge ones: issue 28's
//! generator, `tandem_models::hostile::graph_from_bytes`), loaded under
//! tight limits: a model within them or a named refusal, never a panic,
//! an abort or memory past libFuzzer's `-rss_limit_mb`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tandem_core::{InputShapes, Model, ModelLimits};

const LIMITS: ModelLimits = ModelLimits { max_tensor_bytes: 64 << 20, max_working_bytes: 256 << 20 };

fuzz_target!(|data: &[u8]| {
    let bytes = tandem_models::hostile::graph_from_bytes(data);
    if let Ok(m) = Model::from_bytes_within(&bytes, &InputShapes::none(), &LIMITS) {
        assert!(m.working_bytes() <= LIMITS.max_working_bytes);
    }
});
