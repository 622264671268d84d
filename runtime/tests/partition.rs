//! The partitioner against brute force on random DAGs: the min-cut finds
//! the optimum of the sum objectives, decisions are valid cuts, and the
//! latency hint's semantics hold.

use std::time::Duration;

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use tandem::partition::{
    choose, evaluate, min_cut_candidates, mincut::min_cut_prefix, EnergyWeights, Evaluation, LatencyHint,
    Mode, NodePrices, Objective,
};
use tandem::{enumerate_cuts, Cut, InputShapes, LayerGraph, Model};

fn load(bytes: &[u8]) -> Model {
    Model::from_bytes(bytes, &InputShapes::none()).expect("random DAG loads")
}

/// Prices from seeds: per-layer times in 0.1–10 ms, a link rate, powers.
fn prices(graph: &LayerGraph, seeds: &[u32], rate: f64, weights: (f64, f64)) -> NodePrices {
    let n = graph.nodes().len();
    let at = |i: usize| f64::from(seeds[i % seeds.len()] % 1000 + 1) * 1e-5;
    NodePrices {
        t_wearable: (0..n).map(|i| 3.0 * at(i)).collect(),
        t_handheld: (0..n).map(|i| at(i + 7)).collect(),
        overhead_s: (2e-5, 3e-5),
        compute_w: (0.4, 3.0),
        radio_wearable_w: (0.03, 0.025),
        radio_handheld_w: (0.08, 0.06),
        s_per_byte: (1.0 / rate, 0.5 / rate),
        weights: EnergyWeights { wearable: weights.0, handheld: weights.1 },
    }
}

/// The sum objective the min-cut minimizes, for a cut.
fn sum_objective(graph: &LayerGraph, p: &NodePrices, cut: &Cut, objective: Objective) -> f64 {
    let mut total = 0.0;
    for v in 0..graph.nodes().len() {
        let (w, h) = p.node(v, objective);
        total += if cut.on_wearable(v) { w } else { h };
    }
    total + p.up(cut.up_bytes(), objective) + p.down(cut.down_bytes(), objective)
}

fn dag() -> impl Strategy<Value = Vec<(u8, usize, usize)>> {
    proptest::collection::vec((0u8..4, 0usize..64, 0usize..64), 2..10)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn min_cut_equals_brute_force_for_sum_objectives(
        ops in dag(),
        seeds in proptest::collection::vec(any::<u32>(), 4..16),
        rate in 1e3f64..1e7,
        lambda in 1e-3f64..1e3,
    ) {
        let model = load(&tandem::testing::random_dag_onnx(&ops));
        let g = model.graph();
        let p = prices(g, &seeds, rate, (0.7, 0.3));
        let all = enumerate_cuts(g, 100_000).expect("small DAG");
        for objective in [Objective::Latency, Objective::Energy, Objective::Lagrangian(lambda)] {
            let mask = min_cut_prefix(g, &p, objective);
            let cut = Cut::from_mask(g, mask).expect("min-cut prefix is predecessor-closed");
            let got = sum_objective(g, &p, &cut, objective);
            let best = all.iter().map(|c| sum_objective(g, &p, c, objective)).fold(f64::INFINITY, f64::min);
            // Capacities are integers at 2^-40 of the largest price: allow that rounding.
            let worst = all.iter().map(|c| sum_objective(g, &p, c, objective)).fold(0.0, f64::max);
            prop_assert!(got <= best + 1e-9 * worst, "{objective:?}: min-cut {got} vs brute force {best}");
        }
    }

    #[test]
    fn min_cut_decisions_match_exhaustive_for_latency_and_energy_and_meet_prop_t(
        ops in dag(),
        seeds in proptest::collection::vec(any::<u32>(), 4..16),
        rate in 1e3f64..1e7,
        rtt_ms in 0u64..50,
        hint_ms in 1u64..200,
    ) {
        let model = load(&tandem::testing::random_dag_onnx(&ops));
        let g = model.graph();
        let p = prices(g, &seeds, rate, (0.5, 0.5));
        let rtt = Duration::from_millis(rtt_ms);
        let all = enumerate_cuts(g, 100_000).expect("small DAG");
        let exhaustive: Vec<Evaluation> = all.iter().map(|c| evaluate(g, &p, c, rtt)).collect();
        let hint = LatencyHint::Within(Duration::from_millis(hint_ms));
        for h in [LatencyHint::Fastest, LatencyHint::EnergyFirst, hint] {
            let cands = min_cut_candidates(g, &p, h, rtt);
            let evals: Vec<Evaluation> = cands.iter().map(|c| evaluate(g, &p, c, rtt)).collect();
            let (i, _) = choose(&evals, h, Mode::Single).expect("a choice");
            let (j, _) = choose(&exhaustive, h, Mode::Single).expect("a choice");
            let (got, best) = (&evals[i], &exhaustive[j]);
            match h {
                LatencyHint::Fastest => prop_assert!((got.latency_s - best.latency_s).abs() <= 1e-12 + 1e-9 * best.latency_s),
                LatencyHint::EnergyFirst => prop_assert!((got.energy_j - best.energy_j).abs() <= 1e-15 + 1e-9 * best.energy_j),
                LatencyHint::Within(d) => {
                    let d = d.as_secs_f64();
                    if best.latency_s <= d {
                        // The Lagrangian search always finds a cut meeting PropT when one exists
                        // (its largest λ is the exact fastest cut), never beats brute force, and
                        // its gap to the optimum is bounded below.
                        prop_assert!(got.latency_s <= d, "PropT {d}: got {} while {} exists", got.latency_s, best.latency_s);
                        prop_assert!(got.energy_j >= best.energy_j * (1.0 - 1e-9));
                    } else {
                        prop_assert!((got.latency_s - best.latency_s).abs() <= 1e-12 + 1e-9 * best.latency_s);
                    }
                }
            }
        }
    }

    #[test]
    fn prop_t_semantics_hold_on_every_cut(
        ops in dag(),
        seeds in proptest::collection::vec(any::<u32>(), 4..16),
        hint_ms in 1u64..100,
    ) {
        let model = load(&tandem::testing::random_dag_onnx(&ops));
        let g = model.graph();
        let p = prices(g, &seeds, 1e5, (0.5, 0.5));
        let all = enumerate_cuts(g, 100_000).expect("small DAG");
        let evals: Vec<Evaluation> = all.iter().map(|c| evaluate(g, &p, c, Duration::ZERO)).collect();
        let d = hint_ms as f64 * 1e-3;
        for mode in [Mode::Single, Mode::Stream] {
            let t = |e: &Evaluation| if mode == Mode::Single { e.latency_s } else { e.stream_period_s };
            let (i, _) = choose(&evals, LatencyHint::Within(Duration::from_millis(hint_ms)), mode).expect("choice");
            let meeting: Vec<&Evaluation> = evals.iter().filter(|e| t(e) <= d).collect();
            if meeting.is_empty() {
                let fastest = evals.iter().map(t).fold(f64::INFINITY, f64::min);
                prop_assert_eq!(t(&evals[i]), fastest);
            } else {
                prop_assert!(t(&evals[i]) <= d);
                let least = meeting.iter().map(|e| e.energy_j).fold(f64::INFINITY, f64::min);
                prop_assert_eq!(evals[i].energy_j, least);
            }
        }
    }
}

/// The Lagrangian bound's gap to exhaustive search on small DAGs, printed:
/// the share of cases where it is exactly optimal and the worst ratio.
#[test]
fn lagrangian_gap_on_small_dags() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let mut cases = 0;
    let mut optimal = 0;
    let mut worst: f64 = 1.0;
    for _ in 0..60 {
        let ops = dag().new_tree(&mut runner).expect("tree").current();
        let seeds = proptest::collection::vec(any::<u32>(), 8).new_tree(&mut runner).expect("tree").current();
        let model = load(&tandem::testing::random_dag_onnx(&ops));
        let g = model.graph();
        let p = prices(g, &seeds, 2e4, (0.5, 0.5));
        let all = enumerate_cuts(g, 100_000).expect("small DAG");
        let exhaustive: Vec<Evaluation> = all.iter().map(|c| evaluate(g, &p, c, Duration::ZERO)).collect();
        let fastest = exhaustive.iter().map(|e| e.latency_s).fold(f64::INFINITY, f64::min);
        let slowest = exhaustive.iter().map(|e| e.latency_s).fold(0.0, f64::max);
        let hint = LatencyHint::Within(Duration::from_secs_f64((fastest + slowest) / 2.0));
        let (j, _) = choose(&exhaustive, hint, Mode::Single).expect("choice");
        let cands = min_cut_candidates(g, &p, hint, Duration::ZERO);
        let evals: Vec<Evaluation> = cands.iter().map(|c| evaluate(g, &p, c, Duration::ZERO)).collect();
        let (i, _) = choose(&evals, hint, Mode::Single).expect("choice");
        let ratio = evals[i].energy_j / exhaustive[j].energy_j;
        assert!(ratio >= 1.0 - 1e-9, "the bound beat brute force: {ratio}");
        cases += 1;
        if ratio <= 1.0 + 1e-9 {
            optimal += 1;
        }
        worst = worst.max(ratio);
    }
    eprintln!(
        "Lagrangian PropT search: optimal in {optimal}/{cases} small DAGs, worst energy ratio {worst:.4}"
    );
    assert!(optimal * 2 >= cases, "optimal in only {optimal}/{cases}");
}
