//! Split execution on tiny hand-built models: exact cut enumeration,
//! crossing tensors, caching, and the errors bad input gets.

use proptest::prelude::*;
use tandem_core::check::{check_cuts, random_inputs};
use tandem_core::{enumerate_cuts, sample_cuts, Cut, Error, InputShapes, Model, SplitExecutor};
use tandem_models::tiny as testing;

fn load(bytes: &[u8]) -> Model {
    Model::from_bytes(bytes, &InputShapes::none()).expect("model loads")
}

#[test]
fn chain_has_n_plus_one_cuts_and_all_match() {
    let model = load(&testing::tiny_mlp_onnx());
    let g = model.graph();
    assert_eq!(g.nodes().len(), 3);
    assert!(g.is_chain());
    let cuts = enumerate_cuts(g, 100).expect("few cuts");
    assert_eq!(cuts.len(), 4);
    let report = check_cuts(&model, &cuts, &random_inputs(&model, 1).expect("inputs")).expect("check");
    assert!(report.ok, "{report:?}");
    assert_eq!(report.cuts_checked, 4);
    // Each non-trivial cut sends exactly one tensor: h ([1,8]) or a ([1,8]) or x.
    let up: Vec<Vec<&str>> =
        cuts.iter().map(|c| c.up_tensors().iter().map(|&t| g.tensor(t).name.as_str()).collect()).collect();
    assert!(up.contains(&vec!["x"]), "{up:?}");
    assert!(up.contains(&vec!["h"]), "{up:?}");
    assert!(up.contains(&vec!["a"]), "{up:?}");
}

#[test]
fn diamond_cuts_cross_both_branches_and_never_ship_constants() {
    let model = load(&testing::tiny_diamond_onnx());
    let g = model.graph();
    // fc, left, right, shift, join; ConstantOfShape is a const node.
    assert_eq!(g.nodes().len(), 5, "{:?}", g.nodes().iter().map(|n| &n.name).collect::<Vec<_>>());
    assert_eq!(g.const_node_count(), 1);
    assert!(!g.is_chain());
    let cuts = enumerate_cuts(g, 1000).expect("few cuts");
    // Ideals of fc → {left, right → shift} → join: {}, {fc}, {fc,l}, {fc,r}, {fc,l,r}, {fc,r,s}, {fc,l,r,s}, all.
    assert_eq!(cuts.len(), 8);
    for cut in &cuts {
        for &t in cut.up_tensors() {
            assert_ne!(g.tensor(t).name, "kval", "const tensors never cross");
        }
    }
    let through_branches = cuts.iter().filter(|c| c.up_tensors().len() == 2).count();
    assert!(through_branches >= 2, "some cuts cross both branches");
    let report = check_cuts(&model, &cuts, &random_inputs(&model, 2).expect("inputs")).expect("check");
    assert!(report.ok, "{report:?}");
}

#[test]
fn a_wrongly_wired_value_is_caught() {
    // Feed the suffix a different tensor than the prefix computed: the check
    // must see the difference in the crossing tensor and the output.
    let model = load(&testing::tiny_mlp_onnx());
    let g = model.graph();
    let cut = Cut::new(g, [0]).expect("valid cut");
    let exec = SplitExecutor::new(model.clone());
    let plan = exec.plan(&cut).expect("plan");
    let inputs = random_inputs(&model, 3).expect("inputs");
    let other = random_inputs(&model, 4).expect("inputs");
    let good = plan.run(g, &inputs).expect("run");
    let wrong_up = plan.run_prefix(g, &other).expect("prefix");
    let wrong = plan.run_suffix(g, &wrong_up).expect("suffix");
    let d = tandem_core::check::diff(&good["y"], &wrong["y"]).expect("diff");
    assert!(!d.ok(), "different crossing values must give different outputs: {d:?}");
}

#[test]
fn invalid_cuts_are_refused_with_names() {
    let model = load(&testing::tiny_mlp_onnx());
    let err = Cut::new(model.graph(), [1]).expect_err("relu without fc1");
    assert!(matches!(err, Error::InvalidCut(_)));
    assert!(err.to_string().contains("fc1"), "{err}");
    assert!(Cut::new(model.graph(), [7]).is_err());
}

#[test]
fn plans_are_cached_per_cut() {
    let model = load(&testing::tiny_diamond_onnx());
    let exec = SplitExecutor::new(model.clone());
    let cut = Cut::new(model.graph(), [0, 1]).expect("valid");
    assert!(!exec.is_cached(&cut));
    let a = exec.plan(&cut).expect("plan");
    assert!(exec.is_cached(&cut));
    let b = exec.plan(&cut).expect("plan");
    assert!(std::sync::Arc::ptr_eq(&a, &b), "the second lookup reuses the plans");
    assert_eq!(exec.cached(), 1);
}

#[test]
fn a_plan_another_thread_is_building_is_waited_for_not_built_twice() {
    // 300 element-wise nodes: building the plan takes long enough that
    // threads released together all miss the cache.
    let ops: Vec<(u8, usize, usize)> = (0..300).map(|i| ((i % 4) as u8, i, i / 2)).collect();
    let model = load(&testing::random_dag_onnx(&ops));
    let exec = SplitExecutor::new(model.clone());
    let cut = Cut::new(model.graph(), [0]).expect("valid cut");
    let started = std::time::Instant::now();
    let barrier = std::sync::Barrier::new(4);
    let plans: Vec<_> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    exec.plan(&cut)
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().expect("no panic").expect("plan")).collect()
    });
    assert_eq!(
        exec.plans_built(),
        1,
        "four threads asked at once: one built, three waited ({:?})",
        started.elapsed()
    );
    assert!(plans.iter().all(|p| std::sync::Arc::ptr_eq(p, &plans[0])), "every thread has the one plan");
    // Another cut is another plan.
    exec.plan(&Cut::wearable_only(model.graph())).expect("plan");
    assert_eq!(exec.plans_built(), 2);
}

#[test]
fn the_plan_cache_is_bounded_in_weight_bytes_least_recently_used_first() {
    use tandem_core::split::{plan_weight_bytes, Sides};
    let model = load(&testing::tiny_mlp_onnx());
    let g = model.graph();
    let cuts = enumerate_cuts(g, 100).expect("few cuts");
    let weights = |c: &Cut| plan_weight_bytes(&model, c, Sides::Both);
    // Both halves together read every weight once, whatever the cut.
    let all = weights(&cuts[0]);
    assert!(all > 0, "an MLP has weights");
    assert!(cuts.iter().all(|c| weights(c) == all));
    // Halves split them: prefix + suffix = both.
    let mid = Cut::new(g, [0]).expect("cut");
    assert_eq!(
        plan_weight_bytes(&model, &mid, Sides::Prefix) + plan_weight_bytes(&model, &mid, Sides::Suffix),
        all
    );
    // Room for two plans: the third evicts the least recently used.
    let exec = SplitExecutor::with_cache_limit(model.clone(), 2 * all);
    exec.plan(&cuts[0]).expect("plan");
    exec.plan(&cuts[1]).expect("plan");
    exec.plan(&cuts[0]).expect("plan"); // cuts[1] is now the older
    exec.plan(&cuts[2]).expect("plan");
    assert_eq!(exec.cached(), 2);
    assert_eq!(exec.cached_bytes(), 2 * all);
    assert!(exec.is_cached(&cuts[0]) && exec.is_cached(&cuts[2]));
    assert!(!exec.is_cached(&cuts[1]), "the least recently used plan stays cached");
    // A limit below one plan still keeps the plan just built, alone.
    let exec = SplitExecutor::with_cache_limit(model.clone(), 1);
    for c in &cuts {
        exec.plan(c).expect("plan");
        assert!(exec.is_cached(c));
        assert_eq!(exec.cached(), 1);
    }
}

#[test]
fn unsupported_op_is_named() {
    let err =
        Model::from_bytes(&testing::unsupported_op_onnx(), &InputShapes::none()).expect_err("unsupported");
    assert!(matches!(err, Error::UnsupportedOp { .. }), "{err}");
    assert!(err.to_string().contains("FrobnicateV7") && err.to_string().contains("weird"), "{err}");
}

#[test]
fn symbolic_inputs_need_overrides() {
    let bytes = testing::symbolic_mlp_onnx();
    let err = Model::from_bytes(&bytes, &InputShapes::none()).expect_err("symbolic");
    assert!(matches!(err, Error::SymbolicInput { .. }), "{err}");
    assert!(err.to_string().contains("--input-shape x="), "{err}");
    let shapes = InputShapes::parse(&["x=5,4"]).expect("spec");
    let model = Model::from_bytes(&bytes, &shapes).expect("override makes it concrete");
    let y = model.graph().tensor_by_name("y").expect("y");
    assert_eq!(y.shape, vec![5, 8]);
    let err =
        Model::from_bytes(&bytes, &InputShapes::parse(&["nope=1,4"]).expect("spec")).expect_err("unknown");
    assert!(matches!(err, Error::UnknownInput { .. }), "{err}");
}

#[test]
fn fed_tensors_are_checked() {
    let model = load(&testing::tiny_mlp_onnx());
    let g = model.graph();
    let plan = SplitExecutor::new(model.clone()).plan(&Cut::new(g, [0]).expect("cut")).expect("plan");
    let mut inputs = random_inputs(&model, 1).expect("inputs");
    inputs.insert("x".into(), tandem_core::Tensor::zero::<f32>(&[2, 4]).expect("tensor").into());
    let err = plan.run_prefix(g, &inputs).expect_err("wrong shape");
    assert!(matches!(err, Error::TensorMismatch { .. }), "{err}");
    let err = plan.run_prefix(g, &Default::default()).expect_err("missing");
    assert!(matches!(err, Error::MissingTensor(_)), "{err}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn every_sampled_cut_of_a_random_dag_reproduces_the_unsplit_run(
        ops in proptest::collection::vec((0u8..4, 0usize..64, 0usize..64), 2..12),
        seed in 0u64..1000,
    ) {
        let model = load(&tandem_models::tiny::random_dag_onnx(&ops));
        let g = model.graph();
        let mut cuts = sample_cuts(g, 6, seed);
        cuts.push(Cut::wearable_only(g));
        cuts.push(Cut::handheld_only(g));
        for cut in &cuts {
            for &n in &cut.prefix_nodes() {
                for &p in g.preds(n) {
                    prop_assert!(cut.on_wearable(p), "sampled cut is not predecessor-closed");
                }
            }
        }
        let report = check_cuts(&model, &cuts, &random_inputs(&model, seed).expect("inputs")).expect("check");
        prop_assert!(report.ok, "{:?}", report);
    }
}

/// Found by the property test: on this DAG (one Relu applied to the same
/// tensor by several nodes, each an output) tract 0.23.9's optimizer leaves a
/// placeholder op that fails when run. The runtime must detect it and fall
/// back, so that the unsplit model and every cut still run.
#[test]
fn a_dag_that_trips_tracts_optimizer_still_runs() {
    let ops = [
        (0u8, 0usize, 0usize),
        (0, 1, 0),
        (0, 16, 0),
        (0, 11, 0),
        (0, 3, 0),
        (0, 55, 0),
        (0, 24, 0),
        (1, 1, 35),
    ];
    let model = load(&tandem_models::tiny::random_dag_onnx(&ops));
    let cuts = enumerate_cuts(model.graph(), 10_000).expect("a small DAG");
    let report = check_cuts(&model, &cuts, &random_inputs(&model, 587).expect("inputs")).expect("check");
    assert!(report.ok, "{report:?}");
    assert_eq!(report.cuts_checked, cuts.len());
}

/// A dynamic-batch export whose state is built from the input's shape and
/// whose annotations carry the symbol: with the batch bound (by the
/// input's shape or by `--dim N=..`), the shape chain folds into constants
/// that both halves recompute, and every cut reproduces the unsplit run.
#[test]
fn a_shape_built_state_folds_and_every_cut_matches_once_the_batch_is_bound() {
    let bytes = testing::shape_state_onnx();
    let by_shape = InputShapes::parse(&["x=2,4"]).expect("spec");
    let mut by_dim = InputShapes::none();
    by_dim.push_dim("N=3").expect("spec");
    for (shapes, batch) in [(by_shape, 2), (by_dim, 3)] {
        let model = Model::from_bytes(&bytes, &shapes).expect("loads with the batch bound");
        let g = model.graph();
        let ops: Vec<&str> = g.nodes().iter().map(|n| n.op.as_str()).collect();
        assert_eq!(ops, ["MatMul", "Add", "Relu"], "the shape chain is not made of layers");
        assert_eq!(g.tensor(g.inputs()[0]).shape, vec![batch, 4]);
        let cuts = enumerate_cuts(g, 100).expect("few cuts");
        assert_eq!(cuts.len(), 4);
        let report = check_cuts(&model, &cuts, &random_inputs(&model, 2).expect("inputs")).expect("check");
        assert!(report.ok, "{report:?}");
    }
    let e = Model::from_bytes(&bytes, &InputShapes::none()).expect_err("N unbound").to_string();
    assert!(e.contains("--dim") && e.contains("--input-shape"), "{e}");
    let mut bad = InputShapes::none();
    for spec in ["N", "N=0", "=3", "N=x"] {
        assert!(bad.push_dim(spec).is_err(), "{spec}");
    }
}

/// `If` and `Scan` (control flow tract runs) are one layer each: a cut
/// never splits a subgraph, and the tensors a subgraph reads from the
/// enclosing graph count as the layer's inputs, so a cut that leaves them
/// on the wearable sends them. Every cut reproduces the unsplit run.
#[test]
fn control_flow_runs_whole_on_one_side_and_every_cut_matches() {
    let model = load(&testing::control_flow_onnx());
    let g = model.graph();
    let layer = |op: &str| g.nodes().iter().position(|n| n.op == op).unwrap_or_else(|| panic!("{op} layer"));
    let (branch, scan) = (layer("If"), layer("Scan"));
    let name_of = |ids: &[usize]| ids.iter().map(|&i| g.nodes()[i].name.clone()).collect::<Vec<_>>();
    // The If reads `a` and `b` only inside its branches; the Scan reads `scale` inside its body.
    let branch_preds = name_of(g.preds(branch));
    for captured in ["relu", "weigh"] {
        assert!(branch_preds.iter().any(|p| p == captured), "If after {captured}: {branch_preds:?}");
    }
    assert!(name_of(g.preds(scan)).iter().any(|p| p == "scale_of"), "{:?}", name_of(g.preds(scan)));
    let cuts = enumerate_cuts(g, 10_000).expect("few cuts");
    let captured_crossing = cuts
        .iter()
        .any(|c| !c.on_wearable(branch) && c.up_tensors().iter().any(|&t| g.tensor(t).name == "b"));
    assert!(captured_crossing, "some cut sends a tensor only a branch reads");
    let report = check_cuts(&model, &cuts, &random_inputs(&model, 3).expect("inputs")).expect("check");
    assert!(report.ok, "{report:?}");
    assert_eq!(report.cuts_checked, cuts.len());
}

#[test]
fn a_loop_is_refused_with_its_node_named() {
    let err = Model::from_bytes(&testing::loop_onnx(), &InputShapes::none()).expect_err("Loop");
    let text = err.to_string();
    assert!(matches!(err, Error::UnsupportedOp { .. }), "{text}");
    assert!(text.contains("Loop") && text.contains("repeat"), "{text}");
}

/// A cut at a `DequantizeLinear` sends its int8 input, never its float
/// output: the dequantizer is no layer, every half that reads the float
/// recomputes it (both do when its readers are split), and every cut
/// matches the unsplit run, the integers crossing bit for bit.
#[test]
fn a_cut_at_a_dequantizer_sends_the_integers() {
    let model = load(&testing::qdq_residual_onnx());
    let g = model.graph();
    // fc, h_q, relu, sum: h_dq is recomputed by the halves that read it.
    let names: Vec<&str> = g.nodes().iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["fc", "h_q", "relu", "sum"]);
    assert_eq!(g.dequantizer_count(), 1);
    assert!(g.tensor_by_name("hd").is_none(), "the float output is no tensor of the DAG");
    let cuts = enumerate_cuts(g, 100).expect("few cuts");
    let up: Vec<Vec<&str>> =
        cuts.iter().map(|c| c.up_tensors().iter().map(|&t| g.tensor(t).name.as_str()).collect()).collect();
    assert!(up.iter().all(|u| !u.contains(&"hd")), "{up:?}");
    // After h_q, and after relu (the Add still reads the dequantized value).
    assert!(up.contains(&vec!["hq"]), "{up:?}");
    assert!(up.contains(&vec!["hq", "r"]), "{up:?}");
    let hq = g.tensor_by_name("hq").expect("hq");
    assert_eq!((hq.dtype, hq.bytes), (tandem_core::DatumType::I8, 8));
    let after_q = Cut::new(g, [0, 1]).expect("cut");
    assert_eq!(
        (after_q.up_bytes(), after_q.float_version_up_bytes(g)),
        (8, 32),
        "a quarter of the float's bytes"
    );
    let inputs = random_inputs(&model, 3).expect("inputs");
    let report = check_cuts(&model, &cuts, &inputs).expect("check");
    assert!(report.ok, "{report:?}");
    assert!(report.judged_in_quanta > 0, "hq and h have a quantum: {report:?}");
    // The integers the prefix made are the ones the suffix reads.
    let hq_id = g.tensor_id("hq").expect("hq");
    let cut = cuts.iter().find(|c| c.up_tensors() == [hq_id]).expect("the cut after h_q");
    let plan = SplitExecutor::new(model.clone()).plan(cut).expect("plan");
    let up = plan.run_prefix(g, &inputs).expect("prefix");
    let unsplit = tandem_core::split::full_plan(&model).expect("plan").run(g, &inputs).expect("run");
    let down = plan.run_suffix(g, &up).expect("suffix");
    assert_eq!(up["hq"].datum_type(), tandem_core::DatumType::I8);
    assert_eq!(down["y"].as_bytes(), unsplit["y"].as_bytes(), "the suffix dequantizes as the unsplit run");
}

/// tract folds `DequantizeLinear → Softmax → QuantizeLinear` into a lookup
/// table as if softmax were element-wise; the model is rewritten so that
/// the result is the quantized softmax ONNX defines, computed here by hand.
#[test]
fn an_int8_softmax_gives_onnx_values() {
    let model = load(&testing::qdq_softmax_onnx());
    let rows = [[0.5f32, -1.0, 2.0, 0.25], [3.0, 3.0, -2.0, 0.0]];
    let x = tandem_core::Tensor::from_shape(&[2, 4], &rows.concat()).expect("x");
    let inputs: tandem_core::Values = [("x".to_string(), x.into())].into_iter().collect();
    let y = tandem_core::split::full_plan(&model).expect("plan").run(model.graph(), &inputs).expect("run");
    let got = tandem_core::check::as_f32(&y["y"]).expect("f32");
    // ONNX: quantize (round half to even, saturate), dequantize, softmax, again.
    let q = |v: f32, scale: f32, zero: f32| ((v / scale).round_ties_even() + zero).clamp(-128.0, 127.0);
    let mut want = vec![];
    for row in rows {
        let xd: Vec<f32> = row.iter().map(|&v| (q(v, 1.0 / 16.0, -6.0) + 6.0) / 16.0).collect();
        let max = xd.iter().cloned().fold(f32::MIN, f32::max);
        let sum: f32 = xd.iter().map(|v| (v - max).exp()).sum();
        want.extend(xd.iter().map(|v| (q((v - max).exp() / sum, 1.0 / 255.0, -128.0) + 128.0) / 255.0));
    }
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() <= 1.0 / 255.0 + 1e-6, "got {got:?}, want {want:?}");
    }
    let cuts = enumerate_cuts(model.graph(), 1000).expect("few cuts");
    let report = check_cuts(&model, &cuts, &inputs).expect("check");
    assert!(report.ok, "{report:?}");
    // The unfolded dequantizer is still one: its Cast, Sub and Mul are
    // recomputed by the suffix, and the cut before the softmax sends int8.
    let g = model.graph();
    let names: Vec<&str> = g.nodes().iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["x_q", "softmax", "p_q", "p_dq"]);
    let before_softmax = Cut::new(g, [0]).expect("cut");
    let up: Vec<&str> = before_softmax.up_tensors().iter().map(|&t| g.tensor(t).name.as_str()).collect();
    assert_eq!(up, ["xq"]);
}
