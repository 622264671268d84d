//! The oracle check's machinery on MNIST (a chain, so every cut is a
//! candidate): each candidate is measured, the oracle is the measured best
//! (checked against a latency recomputed here from the measurements), and
//! where one choice is far better than the rest the partitioner makes it.

use std::time::Duration;

use tandem::check::random_inputs;
use tandem::device::DeviceProfile;
use tandem::partition::{EnergyWeights, LatencyHint, Method, Mode};
use tandem::predict::ProfiledLatency;
use tandem::{enumerate_cuts, InputShapes, Model};
use tandem_models::ensure_models;
use tandem_tools::oracle::{run_oracle, summarize, CutTiming, Measure, OracleGrid, PairSetup};

#[test]
fn oracle_measures_every_cut_and_the_obvious_choices_are_optimal() -> anyhow::Result<()> {
    let path = ensure_models()?.zoo_path("mnist").expect("mnist").to_path_buf();
    let model = Model::from_path(&path, &InputShapes::none())?;
    let g = model.graph();
    let inputs = random_inputs(&model, 3)?;
    let setup = PairSetup::new(
        DeviceProfile::shipped("watch-w5")?,
        DeviceProfile::shipped("pixel-8-pro")?,
        Duration::from_millis(30),
        EnergyWeights::default(),
        Mode::Single,
    )?;
    let predictor = ProfiledLatency::measure(&model, &inputs)?;
    let grid = OracleGrid {
        bandwidths: vec![100e3 / 8.0, 1e9 / 8.0],
        loads: vec![0.0],
        hints: vec![LatencyHint::Fastest, LatencyHint::EnergyFirst],
    };
    let methods = [Method::Heuristic, Method::MinCut];
    let run = run_oracle(
        &model,
        &inputs,
        &setup.pair(&predictor),
        &grid,
        &methods,
        Measure { runs: 2, remeasure: true },
        |_, _| {},
    )?;
    // Every cut of the chain was measured, each half only when it has layers.
    assert_eq!(run.timings.len(), enumerate_cuts(g, 1000).expect("chain").len());
    for t in &run.timings {
        assert_eq!(t.prefix_s > 0.0, t.cut.prefix_len() > 0, "{:?}", t.cut);
        assert_eq!(t.suffix_s > 0.0, t.cut.prefix_len() < g.nodes().len(), "{:?}", t.cut);
    }
    assert_eq!(run.cases.len(), 2 * 2 * methods.len());
    // The oracle recomputed here from the measured timings with SPEC 2's
    // latency (compute x slowdown + bytes / bandwidth + one RTT when the
    // handheld takes part): the library's oracle must be this minimum, at
    // this cut, and must price the chosen cut the same way.
    let latency = |t: &CutTiming, bytes_per_s: f64| {
        let rtt = if t.cut.is_wearable_only() { 0.0 } else { setup.rtt.as_secs_f64() };
        t.prefix_s * setup.wearable.slowdown
            + t.suffix_s * setup.handheld.slowdown
            + (t.cut.up_bytes() + t.cut.down_bytes()) as f64 / bytes_per_s
            + rtt
    };
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-6 * a.abs().max(b.abs());
    for c in run.cases.iter().filter(|c| c.hint == "0") {
        let bytes_per_s = c.bandwidth_mbit * 1e6 / 8.0;
        let best = run
            .timings
            .iter()
            .min_by(|a, b| latency(a, bytes_per_s).total_cmp(&latency(b, bytes_per_s)))
            .expect("timings");
        assert!(close(c.oracle_cost, latency(best, bytes_per_s)), "{c:?} vs {}", latency(best, bytes_per_s));
        assert_eq!(c.oracle_prefix_nodes, best.cut.prefix_len(), "{c:?}");
        // On a chain, the prefix length names the cut.
        let chosen =
            run.timings.iter().find(|t| t.cut.prefix_len() == c.chosen_prefix_nodes).expect("chosen");
        assert!(close(c.chosen_cost, latency(chosen, bytes_per_s)), "{c:?}");
        assert!(close(c.ratio, c.chosen_cost / c.oracle_cost), "{c:?}");
    }
    for c in &run.cases {
        assert!(c.remeasured_ratio.is_some(), "--remeasure gives the noise ceiling: {c:?}");
        // At 100 kbit/s, sending MNIST's 3 kB input alone takes 250 ms, about
        // a hundred times the whole model on the emulated watch: stay local.
        if c.bandwidth_mbit < 1.0 && c.hint == "0" {
            assert!(c.optimal, "{c:?}");
            assert_eq!(c.chosen_prefix_nodes, g.nodes().len(), "{c:?}");
        }
    }
    for m in methods {
        let s = summarize(&run.cases, m);
        assert_eq!(s.cases, 4);
        let of_m: Vec<_> = run.cases.iter().filter(|c| c.method == m).collect();
        assert_eq!(s.optimal, of_m.iter().filter(|c| c.optimal).count(), "{s:?}");
        assert_eq!(s.within_5pct, of_m.iter().filter(|c| c.ratio <= 1.05).count(), "{s:?}");
    }
    Ok(())
}
