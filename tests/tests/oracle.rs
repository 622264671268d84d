//! The oracle check's machinery on MNIST (a chain, so every cut is a
//! candidate): each candidate is measured, the oracle is the measured best,
//! and where one choice is far better than the rest the partitioner makes it.

use std::time::Duration;

use tandem::check::random_inputs;
use tandem::device::DeviceProfile;
use tandem_tools::oracle::{run_oracle, summarize, Measure, OracleGrid, PairSetup};
use tandem::partition::{EnergyWeights, LatencyHint, Method, Mode};
use tandem::predict::ProfiledLatency;
use tandem::{enumerate_cuts, InputShapes, Model};
use tandem_models::ensure_models;

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
    for c in &run.cases {
        assert!(c.ratio >= 1.0 && c.chosen_cost >= c.oracle_cost, "{c:?}");
        assert!(c.remeasured_ratio.is_some_and(|r| r >= 1.0), "{c:?}");
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
        assert!(s.optimal <= s.within_1pct && s.within_1pct <= s.within_5pct, "{s:?}");
    }
    Ok(())
}
