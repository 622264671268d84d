//! Predictions that learn on the device: one side's profiled per-layer
//! latency, corrected by EvoLP's evolution matrix (SPEC 3.3) from every
//! measured inference (a prefix, a suffix or a whole run), with no I/O.
//!
//! The uncorrected term of a layer is its profiled time; each measurement
//! of a set of layers is one record. Layers never measured on this side
//! take the mean slope of those that were: a device that runs every
//! measured layer 2x slower than profiled likely runs the others so too.

use super::evolp::{EvolutionConfig, EvolutionMatrix, Record};
use super::ProfiledLatency;
use tandem_core::LayerGraph;

/// One side's latency, learning online.
#[derive(Clone, Debug)]
pub struct OnlineLatency {
    base: ProfiledLatency,
    keys: Vec<String>,
    evolution: EvolutionMatrix,
    corrected: ProfiledLatency,
}

impl OnlineLatency {
    /// Starts from `base` (per layer of `graph`), uncorrected.
    pub fn new(graph: &LayerGraph, base: ProfiledLatency) -> OnlineLatency {
        let keys = graph.nodes().iter().map(|n| n.name.clone()).collect();
        OnlineLatency {
            corrected: base.clone(),
            base,
            keys,
            evolution: EvolutionMatrix::with_config(EvolutionConfig::online()),
        }
    }

    /// The corrected per-layer latency (what the planner prices with).
    pub fn latency(&self) -> &ProfiledLatency {
        &self.corrected
    }

    /// The profile it started from.
    pub fn base(&self) -> &ProfiledLatency {
        &self.base
    }

    /// Records fed so far (at most the evolution's window).
    pub fn records(&self) -> usize {
        self.evolution.records()
    }

    /// The corrected prediction (s) of running the layers in `mask` once.
    pub fn predict_s(&self, mask: &[bool]) -> f64 {
        self.corrected.overhead_s
            + self.corrected.per_node_s.iter().zip(mask).filter(|(_, &m)| m).map(|(t, _)| t).sum::<f64>()
    }

    /// Feeds one measurement of running the layers in `mask` (seconds),
    /// and updates the corrected latency. Non-finite or non-positive
    /// measurements, and empty masks, are ignored.
    pub fn observe(&mut self, mask: &[bool], measured_s: f64) {
        if !(measured_s.is_finite() && measured_s > 0.0) {
            return;
        }
        let terms: Vec<(String, f64)> = self
            .keys
            .iter()
            .zip(&self.base.per_node_s)
            .zip(mask)
            .filter(|((_, &t), &m)| m && t > 0.0)
            .map(|((k, &t), _)| (k.clone(), t))
            .collect();
        if terms.is_empty() {
            return;
        }
        self.evolution.observe(Record { terms, overhead_s: self.base.overhead_s, measured_s });
        self.corrected.per_node_s = self.evolution.correct_each(&self.keys, &self.base.per_node_s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mlp() -> LayerGraph {
        let bytes = tandem_models::tiny::tiny_mlp_onnx();
        tandem_core::Model::from_bytes(&bytes, &tandem_core::InputShapes::none())
            .expect("model")
            .graph()
            .clone()
    }

    #[test]
    fn a_side_twice_as_slow_as_profiled_is_learned_within_a_few_frames_and_carried_to_unseen_layers() {
        let g = mlp();
        assert_eq!(g.nodes().len(), 3);
        let base = ProfiledLatency { per_node_s: vec![2e-3, 1e-3, 3e-3], overhead_s: 1e-4 };
        let mut online = OnlineLatency::new(&g, base.clone());
        // Only the first two layers ever run on this side (a prefix).
        let seen = [true, true, false];
        let truth = |mask: &[bool]| {
            1e-4 + base.per_node_s.iter().zip(mask).filter(|(_, &m)| m).map(|(t, _)| 2.0 * t).sum::<f64>()
        };
        let error = |o: &OnlineLatency, mask: &[bool]| (o.predict_s(mask) - truth(mask)).abs() / truth(mask);
        let first = error(&online, &seen);
        assert!(first > 0.45, "the profile starts wrong: {first}");
        for _ in 0..8 {
            online.observe(&seen, truth(&seen));
        }
        let last = error(&online, &seen);
        assert!(last < 0.05, "after 8 frames the error is {last} (it started at {first})");
        // The last layer never ran here: it borrows the learned slope.
        let unseen = [false, false, true];
        assert!(error(&online, &unseen) < 0.15, "unseen layers: {}", error(&online, &unseen));
        // Garbage is ignored.
        let before = online.predict_s(&seen);
        online.observe(&seen, f64::NAN);
        online.observe(&seen, -1.0);
        online.observe(&[false; 3], 1.0);
        assert_eq!(online.predict_s(&seen), before);
    }
}
