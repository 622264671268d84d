//! Every partition method on every zoo and light model: DeepWear's
//! simplification finds the repeated blocks each architecture is built from
//! (by structure, not by name), every method decides a valid cut under every
//! latency hint, single and stream, and the exact method never loses to the
//! heuristic on the objective it is exact for.

use std::time::Duration;

use anyhow::Context;
use tandem::energy::{ClusterEnergy, PowerModel};
use tandem::partition::{
    decide, Decision, DecisionInput, EnergyWeights, HandheldStatus, LatencyHint, LinkEstimate, Method, Mode,
    Side, Simplified, EXHAUSTIVE_LIMIT,
};
use tandem::predict::FlopsModel;
use tandem::{enumerate_cuts, Cut, InputShapes, Model};
use tandem_models::ensure_models;

/// Repeated blocks each architecture is known to contain.
fn expected_blocks(name: &str) -> Option<usize> {
    match name {
        // 9 Inception modules (3a-b, 4a-e, 5a-b).
        "light_inception_v1" => Some(9),
        // 10 Inception modules of two structures (plain and stride-2 reduction).
        "light_inception_v2" => Some(10),
        // 16 bottlenecks: 4 with a projection shortcut, 12 with identity.
        "light_resnet50" => Some(16),
        // 58 dense layers (6 + 12 + 24 + 16).
        "light_densenet121" => Some(58),
        // 8 Fire modules: the expand pair of each.
        "light_squeezenet" => Some(8),
        // 16 ShuffleNet units.
        "light_shufflenet" => Some(16),
        _ => None,
    }
}

fn all_models() -> anyhow::Result<Vec<Model>> {
    let paths = ensure_models()?;
    let files = paths.zoo.iter().map(|e| e.path.clone()).chain(paths.light.iter().map(|e| e.model.clone()));
    files
        .map(|p| Model::from_path(&p, &InputShapes::none()).with_context(|| p.display().to_string()))
        .collect()
}

#[test]
fn simplification_bundles_the_known_blocks_and_keeps_valid_cuts() -> anyhow::Result<()> {
    for model in all_models()? {
        let g = model.graph();
        let s = Simplified::new(g);
        let st = s.stats();
        eprintln!("{}: {:?}", model.name(), st);
        let mut seen: Vec<usize> = s.members().iter().flatten().copied().collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..g.nodes().len()).collect::<Vec<_>>(), "{}: a partition", model.name());
        assert!(st.after_pruning < st.layers, "{}: light layers pruned", model.name());
        if let Some(blocks) = expected_blocks(&model.name()) {
            assert_eq!(st.bundled_blocks, blocks, "{}: repeated blocks", model.name());
        }
        if model.name().starts_with("wavenet") {
            // 16 gated layers; the first (no skip sum yet) and last differ from the rest.
            assert_eq!(st.bundled_blocks, 14, "{}", model.name());
        }
        if !g.is_chain() {
            assert!(st.after_bundling * 3 < st.layers, "{}: {:?} is not much simpler", model.name(), st);
        }
        let cuts = s.cuts(g, EXHAUSTIVE_LIMIT).context("few representative cuts")??;
        // Nearly linear: about one cut per virtual node.
        assert!(cuts.len() <= 2 * st.after_bundling + 2, "{}: {} cuts", model.name(), cuts.len());
        for c in &cuts {
            Cut::from_mask(g, c.prefix_mask().to_vec())?;
        }
    }
    Ok(())
}

#[test]
fn every_method_decides_on_every_model() -> anyhow::Result<()> {
    let watch_p = tandem::device::DeviceProfile::shipped("watch-w5")?;
    let phone_p = tandem::device::DeviceProfile::shipped("pixel-8-pro")?;
    let (we, pe) = (
        ClusterEnergy::new(&watch_p, PowerModel::Analytical)?,
        ClusterEnergy::new(&phone_p, PowerModel::Analytical)?,
    );
    let watch = FlopsModel { us_per_mac: 2e-3, overhead_us: 200.0 };
    let phone = FlopsModel { us_per_mac: 3e-4, overhead_us: 100.0 };
    for model in all_models()? {
        let g = model.graph();
        let exhaustive_fits = enumerate_cuts(g, 5_000).is_some();
        for (rate, load) in [(12_500.0, 0.0), (125_000.0, 0.5), (625_000.0, 0.8)] {
            let base = DecisionInput {
                graph: g,
                wearable: Side { latency: &watch, energy: &we },
                handheld: Side { latency: &phone, energy: &pe },
                link: LinkEstimate {
                    up_bytes_per_s: rate,
                    down_bytes_per_s: rate,
                    rtt: Duration::from_millis(30),
                },
                status: HandheldStatus { load },
                weights: EnergyWeights::default(),
                hint: LatencyHint::Fastest,
                mode: Mode::Single,
                codecs: None,
            };
            for mode in [Mode::Single, Mode::Stream] {
                let fastest = decide(&DecisionInput { mode, ..base }, Method::MinCut)?;
                let t = |d: &Decision| match mode {
                    Mode::Single => d.evaluation.latency_s,
                    Mode::Stream => d.evaluation.stream_period_s,
                };
                let hints = [
                    LatencyHint::Fastest,
                    LatencyHint::EnergyFirst,
                    LatencyHint::Within(Duration::from_secs_f64(t(&fastest) * 1.5)),
                ];
                for hint in hints {
                    let input = DecisionInput { mode, hint, ..base };
                    let what = format!("{} at {rate} B/s, load {load}, {mode:?}, {hint:?}", model.name());
                    let heuristic = decide(&input, Method::Heuristic).with_context(|| what.clone())?;
                    let exact = decide(&input, Method::MinCut).with_context(|| what.clone())?;
                    for d in [&heuristic, &exact] {
                        Cut::from_mask(g, d.chosen.prefix_mask().to_vec())?;
                        if let LatencyHint::Within(limit) = hint {
                            assert!(
                                t(d) <= limit.as_secs_f64() + 1e-12,
                                "{what}: {:?} misses PropT",
                                d.method
                            );
                        }
                    }
                    let slack = 1e-9;
                    match hint {
                        LatencyHint::Fastest => {
                            assert!(t(&exact) <= t(&heuristic) * (1.0 + slack), "{what}: exact slower")
                        }
                        LatencyHint::EnergyFirst => assert!(
                            exact.evaluation.energy_j <= heuristic.evaluation.energy_j * (1.0 + slack),
                            "{what}: exact spends more"
                        ),
                        LatencyHint::Within(_) => {}
                    }
                    if mode == Mode::Stream && hint != LatencyHint::EnergyFirst {
                        // The stream search finishes within its budget on every model here.
                        assert!(exact.optimal, "{what}: {}", exact.reason);
                    }
                    if exhaustive_fits {
                        let best = decide(&input, Method::Exhaustive)?;
                        if exact.optimal && hint != LatencyHint::EnergyFirst {
                            assert!(
                                (t(&exact) - t(&best)).abs() <= 1e-9 * t(&best)
                                    || hint != LatencyHint::Fastest
                            );
                        }
                        if hint == LatencyHint::EnergyFirst {
                            let (a, b) = (exact.evaluation.energy_j, best.evaluation.energy_j);
                            assert!((a - b).abs() <= 1e-9 * b, "{what}: min-cut {a} vs exhaustive {b}");
                        }
                    }
                }
            }
        }
    }
    Ok(())
}
