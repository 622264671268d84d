//! The partitioner against brute force on random DAGs: the min-cut finds
//! the optimum of the sum objectives, decisions are valid cuts, and the
//! latency hint's semantics hold.

use std::time::Duration;

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use tandem_core::{enumerate_cuts, Cut, InputShapes, LayerGraph, Model};
use tandem_plan::energy::EnergyModel;
use tandem_plan::partition::stream::{search, StreamGoal};
use tandem_plan::partition::{
    choose, decide, evaluate, min_cut_candidates, mincut::min_cut_prefix, CodecOption, DecisionInput,
    EnergyWeights, Evaluation, HandheldStatus, LatencyHint, LinkCodecs, LinkEstimate, Method, Mode,
    NodePrices, Objective, Side, Simplified,
};
use tandem_plan::predict::{LatencyModel, NodeCosts};

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
        up_links: vec![],
        down_links: vec![],
    }
}

/// With `on`, two tensors in three may also cross in one or two link
/// encodings of seeded ratio (1–8×) and speed (1 kB/s to 100 MB/s): the prices
/// then pick each tensor's cheapest, which the searches must respect.
fn maybe_codecs(p: NodePrices, graph: &LayerGraph, seeds: &[u32], on: bool) -> NodePrices {
    if !on {
        return p;
    }
    p.with_codecs(graph, &random_codecs(graph, seeds), &HandheldStatus { load: 0.0 })
}

/// Seeded link encodings for every other tensor (see [`maybe_codecs`]).
fn random_codecs(graph: &LayerGraph, seeds: &[u32]) -> LinkCodecs {
    let at = |i: usize| f64::from(seeds[i % seeds.len()] % 1000) / 1000.0;
    let per_tensor = (0..graph.tensors().len())
        .map(|t| {
            (0..t % 3)
                .map(|k| CodecOption {
                    label: format!("codec{k}"),
                    ratio: 1.0 + 7.0 * at(t + 3 * k),
                    encode_bytes_per_s: 10f64.powf(3.0 + 5.0 * at(t + 5 * k + 1)),
                    decode_bytes_per_s: 10f64.powf(3.0 + 5.0 * at(t + 7 * k + 2)),
                    // Half are lossless: those may also price answers coming down.
                    lossless: k == 0,
                })
                .collect()
        })
        .collect();
    LinkCodecs { per_tensor, slowdown: (2.0, 1.0) }
}

/// The sum objective the min-cut minimizes, for a cut.
fn sum_objective(graph: &LayerGraph, p: &NodePrices, cut: &Cut, objective: Objective) -> f64 {
    let mut total = 0.0;
    for v in 0..graph.nodes().len() {
        let (w, h) = p.node(v, objective);
        total += if cut.on_wearable(v) { w } else { h };
    }
    let up: f64 = cut.up_tensors().iter().map(|&t| p.up_tensor(t, graph.tensor(t).bytes, objective)).sum();
    let down: f64 =
        cut.down_tensors().iter().map(|&t| p.down_tensor(t, graph.tensor(t).bytes, objective)).sum();
    total + up + down
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
        codecs in any::<bool>(),
    ) {
        let model = load(&tandem_models::tiny::random_dag_onnx(&ops));
        let g = model.graph();
        let p = maybe_codecs(prices(g, &seeds, rate, (0.7, 0.3)), g, &seeds, codecs);
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
        codecs in any::<bool>(),
    ) {
        let model = load(&tandem_models::tiny::random_dag_onnx(&ops));
        let g = model.graph();
        let p = maybe_codecs(prices(g, &seeds, rate, (0.5, 0.5)), g, &seeds, codecs);
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
        let model = load(&tandem_models::tiny::random_dag_onnx(&ops));
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
        let model = load(&tandem_models::tiny::random_dag_onnx(&ops));
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

/// Per-layer times drawn from seeds, as a latency model (the wearable's
/// are `slowdown` times the handheld's, shifted so they are not proportional).
struct Table {
    seeds: Vec<u32>,
    slowdown: f64,
    shift: usize,
}

impl LatencyModel for Table {
    fn name(&self) -> String {
        "table".into()
    }

    fn node_costs(&self, graph: &LayerGraph) -> NodeCosts {
        let at = |i: usize| f64::from(self.seeds[(i + self.shift) % self.seeds.len()] % 1000 + 1) * 1e-5;
        NodeCosts {
            per_node_s: (0..graph.nodes().len()).map(|i| self.slowdown * at(i)).collect(),
            overhead_s: 2e-5,
        }
    }
}

/// Fixed compute and radio powers.
struct Power(f64, f64, f64);

impl EnergyModel for Power {
    fn name(&self) -> String {
        "fixed".into()
    }
    fn compute_power_w(&self) -> f64 {
        self.0
    }
    fn transmit_power_w(&self) -> f64 {
        self.1
    }
    fn receive_power_w(&self) -> f64 {
        self.2
    }
}

/// The stream goal's value of every cut, by brute force.
fn stream_values(g: &LayerGraph, p: &NodePrices, all: &[Cut], goal: StreamGoal) -> Vec<f64> {
    all.iter()
        .map(|c| {
            let e = evaluate(g, p, c, Duration::ZERO);
            match goal {
                StreamGoal::Period => e.stream_period_s,
                StreamGoal::EnergyWithin(d) if e.stream_period_s <= d => e.energy_j,
                StreamGoal::EnergyWithin(_) => f64::INFINITY,
            }
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn stream_search_equals_brute_force(
        ops in proptest::collection::vec((0u8..4, 0usize..64, 0usize..64), 2..13),
        seeds in proptest::collection::vec(any::<u32>(), 4..16),
        rate in 1e3f64..1e7,
        hint_frac in 0.0f64..1.0,
        seed_incumbent in any::<bool>(),
        codecs in any::<bool>(),
    ) {
        let model = load(&tandem_models::tiny::random_dag_onnx(&ops));
        let g = model.graph();
        let p = maybe_codecs(prices(g, &seeds, rate, (0.6, 0.4)), g, &seeds, codecs);
        let all = enumerate_cuts(g, 100_000).expect("small DAG");
        let periods = stream_values(g, &p, &all, StreamGoal::Period);
        let (lo, hi) = periods.iter().fold((f64::INFINITY, 0.0f64), |(a, b), &x| (a.min(x), b.max(x)));
        let d = lo + hint_frac * (hi - lo);
        // Starting from a poor incumbent (or none) must not change the answer.
        let incumbents = if seed_incumbent { vec![Cut::handheld_only(g)] } else { vec![] };
        for goal in [StreamGoal::Period, StreamGoal::EnergyWithin(d)] {
            let best = stream_values(g, &p, &all, goal).into_iter().fold(f64::INFINITY, f64::min);
            let found = search(g, &p, goal, &incumbents, 10_000_000);
            prop_assert!(found.proven, "the budget suffices on small DAGs");
            let cut = found.cut.expect("a cut meets the goal (d is at least the best period)");
            let got = stream_values(g, &p, std::slice::from_ref(&cut), goal)[0];
            prop_assert!((got - best).abs() <= 1e-12 + 1e-9 * best, "{goal:?}: search {got} vs brute force {best}");
        }
    }

    #[test]
    fn every_method_decides_a_valid_cut_and_the_exact_ones_match_brute_force(
        ops in dag(),
        seeds in proptest::collection::vec(any::<u32>(), 4..16),
        rate in 1e3f64..1e7,
        hint_frac in 0.0f64..1.2,
        handheld_load in 0.0f64..0.9,
        with_codecs in any::<bool>(),
    ) {
        let model = load(&tandem_models::tiny::random_dag_onnx(&ops));
        let g = model.graph();
        let watch = Table { seeds: seeds.clone(), slowdown: 4.0, shift: 0 };
        let phone = Table { seeds: seeds.clone(), slowdown: 1.0, shift: 3 };
        let (we, pe) = (Power(0.4, 0.03, 0.025), Power(3.0, 0.08, 0.06));
        let codecs = random_codecs(g, &seeds);
        let base = DecisionInput {
            graph: g,
            wearable: Side { latency: &watch, energy: &we },
            handheld: Side { latency: &phone, energy: &pe },
            link: LinkEstimate { up_bytes_per_s: rate, down_bytes_per_s: 2.0 * rate, rtt: Duration::from_millis(3) },
            status: HandheldStatus { load: handheld_load },
            weights: EnergyWeights { wearable: 0.7, handheld: 0.3 },
            hint: LatencyHint::Fastest,
            mode: Mode::Single,
            codecs: with_codecs.then_some(&codecs),
        };
        for mode in [Mode::Single, Mode::Stream] {
            let exhaustive = decide(&DecisionInput { mode, ..base }, Method::Exhaustive).expect("decides");
            let t = |d: &tandem_plan::partition::Decision| match mode {
                Mode::Single => d.evaluation.latency_s,
                Mode::Stream => d.evaluation.stream_period_s,
            };
            let fastest = t(&exhaustive);
            let within = LatencyHint::Within(Duration::from_secs_f64(fastest * (1.0 + hint_frac)));
            for hint in [LatencyHint::Fastest, LatencyHint::EnergyFirst, within] {
                let input = DecisionInput { mode, hint, ..base };
                let best = decide(&input, Method::Exhaustive).expect("decides");
                for method in [Method::Heuristic, Method::MinCut] {
                    let d = decide(&input, method).expect("decides");
                    // A valid cut: its mask rebuilds into the same cut.
                    let again = Cut::from_mask(g, d.chosen.prefix_mask().to_vec()).expect("valid cut");
                    prop_assert_eq!(again.up_tensors(), d.chosen.up_tensors());
                    let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 + 1e-9 * b.abs();
                    if method == Method::MinCut && d.optimal {
                        // Proven optimal means equal to brute force on the hint's objective.
                        let limit = match hint {
                            LatencyHint::Within(x) => x.as_secs_f64(),
                            _ => f64::INFINITY,
                        };
                        match hint {
                            LatencyHint::Fastest => prop_assert!(close(t(&d), t(&best)), "{mode:?} {hint:?}"),
                            _ if t(&best) <= limit => {
                                prop_assert!(t(&d) <= limit, "{mode:?} {hint:?}: misses PropT");
                                prop_assert!(
                                    close(d.evaluation.energy_j, best.evaluation.energy_j),
                                    "{mode:?} {hint:?}: {} vs {}", d.evaluation.energy_j, best.evaluation.energy_j
                                );
                            }
                            _ => prop_assert!(close(t(&d), t(&best)), "{mode:?} {hint:?}: no cut meets PropT"),
                        }
                    }
                    if method == Method::MinCut && (mode == Mode::Stream || hint != within) {
                        prop_assert!(d.optimal, "{mode:?} {hint:?}: the exact method is proven on small DAGs");
                    }
                }
            }
        }
    }

    #[test]
    fn simplified_dag_partitions_the_layers_and_its_cuts_are_valid(ops in dag()) {
        let model = load(&tandem_models::tiny::random_dag_onnx(&ops));
        let g = model.graph();
        let s = Simplified::new(g);
        let mut seen: Vec<usize> = s.members().iter().flatten().copied().collect();
        seen.sort_unstable();
        prop_assert_eq!(seen, (0..g.nodes().len()).collect::<Vec<_>>());
        prop_assert_eq!(s.stats().after_bundling, s.members().len());
        prop_assert!(s.stats().after_bundling <= s.stats().after_pruning);
        let cuts = s.cuts(g, 100_000).expect("small").expect("every ideal maps to a valid cut");
        // Ideals of the simplified DAG: both trivial cuts and one per virtual-node prefix at least.
        prop_assert!(cuts.len() > s.members().len());
        prop_assert!(cuts.iter().any(Cut::is_wearable_only) && cuts.iter().any(Cut::is_handheld_only));
        let all = enumerate_cuts(g, 100_000).expect("small DAG");
        prop_assert!(cuts.iter().all(|c| all.contains(c)));
    }
}

/// A slow link where the watch alone beats sending the raw input, and a
/// 4× link encoding of the input makes handheld-only the fastest: the
/// decision follows the encoding, reports the encoded bytes, and pays the
/// encoding's time on the watch.
#[test]
fn an_encoding_that_shrinks_the_input_moves_the_decision() {
    let model = load(&tandem_models::tiny::tiny_mlp_onnx());
    let g = model.graph();
    let watch = Table { seeds: vec![5999], slowdown: 6.0, shift: 0 }; // 60 ms a layer
    let phone = Table { seeds: vec![9], slowdown: 1.0, shift: 0 }; // 0.1 ms a layer
    let (we, pe) = (Power(0.4, 0.03, 0.025), Power(3.0, 0.08, 0.06));
    let x = g.tensors().iter().position(|t| t.name == "x").expect("input x");
    let mut per_tensor = vec![vec![]; g.tensors().len()];
    per_tensor[x] = vec![CodecOption {
        label: "int8".into(),
        ratio: 4.0,
        encode_bytes_per_s: 1e6,
        decode_bytes_per_s: 1e7,
        lossless: false,
    }];
    let codecs = LinkCodecs { per_tensor, slowdown: (2.0, 1.0) };
    // 100 B/s: x (16 B) raw takes 160 ms, y (12 B) comes back in 60 ms.
    let input = DecisionInput {
        graph: g,
        wearable: Side { latency: &watch, energy: &we },
        handheld: Side { latency: &phone, energy: &pe },
        link: LinkEstimate { up_bytes_per_s: 100.0, down_bytes_per_s: 200.0, rtt: Duration::ZERO },
        status: HandheldStatus { load: 0.0 },
        weights: EnergyWeights { wearable: 0.7, handheld: 0.3 },
        hint: LatencyHint::Fastest,
        mode: Mode::Single,
        codecs: None,
    };
    for method in [Method::MinCut, Method::Exhaustive] {
        let raw = decide(&input, method).expect("decides");
        assert!(raw.chosen.is_wearable_only(), "{method:?}: {raw:?}");
        let coded = decide(&DecisionInput { codecs: Some(&codecs), ..input }, method).expect("decides");
        assert!(coded.chosen.is_handheld_only(), "{method:?}: {coded:?}");
        assert_eq!(coded.evaluation.up_bytes, 4, "16 bytes at 4x");
        // Encoding 16 bytes at 1 MB/s on a watch 2x slower: 32 µs on the watch.
        assert!((coded.evaluation.t_wearable - 32e-6).abs() < 1e-12, "{:?}", coded.evaluation);
        assert!(coded.evaluation.latency_s < raw.evaluation.latency_s);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Slow links, where what a tensor crosses in decides the cut: the
    /// min-cut and the stream search, pricing each tensor in its cheapest
    /// encoding, still equal brute force over the same prices.
    #[test]
    fn the_searches_stay_exact_with_link_encodings(
        ops in proptest::collection::vec((0u8..4, 0usize..64, 0usize..64), 4..11),
        seeds in proptest::collection::vec(any::<u32>(), 4..16),
        rate in 3e2f64..3e3,
    ) {
        let model = load(&tandem_models::tiny::random_dag_onnx(&ops));
        let g = model.graph();
        let p = maybe_codecs(prices(g, &seeds, rate, (0.7, 0.3)), g, &seeds, true);
        let all = enumerate_cuts(g, 100_000).expect("small DAG");
        for objective in [Objective::Latency, Objective::Energy] {
            let cut = Cut::from_mask(g, min_cut_prefix(g, &p, objective)).expect("a valid prefix");
            let got = sum_objective(g, &p, &cut, objective);
            let best = all.iter().map(|c| sum_objective(g, &p, c, objective)).fold(f64::INFINITY, f64::min);
            prop_assert!(got <= best * (1.0 + 1e-9) + 1e-15, "{objective:?}: min-cut {got} vs brute force {best}");
        }
        let best = stream_values(g, &p, &all, StreamGoal::Period).into_iter().fold(f64::INFINITY, f64::min);
        let found = search(g, &p, StreamGoal::Period, &[], 10_000_000);
        let cut = found.cut.expect("a cut");
        let got = stream_values(g, &p, std::slice::from_ref(&cut), StreamGoal::Period)[0];
        prop_assert!((got - best).abs() <= 1e-12 + 1e-9 * best, "stream: search {got} vs brute force {best}");
    }
}

/// Neurosurgeon's chain: every prefix of the topological order is a
/// candidate. On a chain that is every cut, so it decides as the
/// exhaustive search does; on a diamond it sees only the n + 1 prefixes.
#[test]
fn the_chain_method_is_exhaustive_on_a_chain_and_prefixes_only_on_a_dag() {
    let watch = Table { seeds: vec![5999], slowdown: 6.0, shift: 0 };
    let phone = Table { seeds: vec![9], slowdown: 1.0, shift: 0 };
    let (we, pe) = (Power(0.4, 0.03, 0.025), Power(3.0, 0.08, 0.06));
    for (onnx, chain) in
        [(tandem_models::tiny::tiny_mlp_onnx(), true), (tandem_models::tiny::tiny_diamond_onnx(), false)]
    {
        let model = load(&onnx);
        let g = model.graph();
        for rate in [10.0, 1e3, 1e6] {
            let input = DecisionInput {
                graph: g,
                wearable: Side { latency: &watch, energy: &we },
                handheld: Side { latency: &phone, energy: &pe },
                link: LinkEstimate { up_bytes_per_s: rate, down_bytes_per_s: rate, rtt: Duration::ZERO },
                status: HandheldStatus { load: 0.0 },
                weights: EnergyWeights { wearable: 0.7, handheld: 0.3 },
                hint: LatencyHint::Fastest,
                mode: Mode::Single,
                codecs: None,
            };
            let prefixes = decide(&input, Method::Chain).expect("decides");
            assert_eq!(prefixes.candidates, g.nodes().len() + 1, "one candidate per prefix");
            let all = decide(&input, Method::Exhaustive).expect("decides");
            if chain {
                assert_eq!(all.candidates, prefixes.candidates, "a chain's cuts are its prefixes");
                assert_eq!(prefixes.chosen, all.chosen, "rate {rate}");
            } else {
                assert!(all.candidates > prefixes.candidates, "a DAG has cuts off the chain");
                assert!(prefixes.evaluation.latency_s >= all.evaluation.latency_s - 1e-12);
            }
        }
    }
}
