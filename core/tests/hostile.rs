//! Issue 28's models and random small graphs against the size checks:
//! every hostile model is refused by name before tract allocates it, and
//! any graph built from random bytes (the `onnx_graphs` fuzz target's
//! generator) either loads within the limits or is refused, never panics
//! or aborts this process.

use proptest::prelude::*;
use tandem_core::{Error, InputShapes, Model, ModelLimits};
use tandem_models::hostile::{graph_from_bytes, hostile_models};

const LIMITS: ModelLimits = ModelLimits { max_tensor_bytes: 64 << 20, max_working_bytes: 256 << 20 };

#[test]
fn each_hostile_model_is_refused_naming_its_tensor() {
    for h in hostile_models() {
        let started = std::time::Instant::now();
        let err = Model::from_bytes_within(&h.bytes, &InputShapes::none(), &LIMITS).expect_err(h.name);
        let text = err.to_string();
        match h.culprit {
            Some(c) => {
                assert!(matches!(err, Error::TooLarge { .. }), "{}: {text}", h.name);
                assert!(text.contains(&format!("'{c}'")) && text.contains("64 MiB"), "{}: {text}", h.name);
            }
            None => assert!(text.contains("too large to allocate"), "{}: {text}", h.name),
        }
        assert!(started.elapsed().as_secs() < 5, "{}: {:?}", h.name, started.elapsed());
    }
    // Within the limits a model loads, and its working set is counted.
    let tiny = Model::from_bytes_within(&tandem_models::tiny::tiny_mlp_onnx(), &InputShapes::none(), &LIMITS)
        .expect("the tiny MLP fits");
    assert!(tiny.working_bytes() > 0 && tiny.working_bytes() < 1 << 20, "{}", tiny.working_bytes());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn random_graphs_load_within_the_limits_or_are_refused(data in proptest::collection::vec(any::<u8>(), 0..48)) {
        let bytes = graph_from_bytes(&data);
        if let Ok(m) = Model::from_bytes_within(&bytes, &InputShapes::none(), &LIMITS) {
            prop_assert!(m.working_bytes() <= LIMITS.max_working_bytes, "{}", m.working_bytes());
            for t in m.graph().tensors() {
                prop_assert!(t.bytes <= LIMITS.max_tensor_bytes, "{}: {}", t.name, t.bytes);
            }
        }
    }
}

/// The generator is worth fuzzing with: of 400 byte strings, some graphs
/// load, some are refused for their size before tract allocates them.
#[test]
fn generated_graphs_both_load_and_pass_the_limits() {
    let (mut loaded, mut too_large, mut other) = (0, 0, 0);
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..400 {
        let data: Vec<u8> = (0..32)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        match Model::from_bytes_within(&graph_from_bytes(&data), &InputShapes::none(), &LIMITS) {
            Ok(_) => loaded += 1,
            Err(Error::TooLarge { .. }) => too_large += 1,
            Err(_) => other += 1,
        }
    }
    eprintln!("loaded {loaded}, too large {too_large}, other errors {other}");
    assert!(loaded >= 20 && too_large >= 20, "loaded {loaded}, too large {too_large}, other {other}");
}
