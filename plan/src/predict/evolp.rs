//! The EvoLP-style self-evolving predictor (SPEC 3.3).
//!
//! Each unit's uncorrected latency T_i comes from the layer-wise MLPs
//! ([`Lwlp`]), or, for a "const" layer measured directly by the
//! model-specific sweep, from that measurement. The [`EvolutionMatrix`]
//! (k = 1) corrects every term: P = Σ_i ReLU(T_i + a_i0 + a_i1·T_i). Its
//! coefficients are refitted by SGD on every recorded (uncorrected
//! prediction, measurement) pair each time the runtime reports a real
//! inference, so the predictor grows most accurate near where it runs.
//!
//! Coefficients are keyed by the unit's head node name. Variants of one
//! model (other widths, resolutions, pruned channels) share node names, so
//! what one variant teaches carries to the others, which is EvoLP's setting.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::features::{graph_features, LayerFeatures};
use super::mlp::Lwlp;
use super::{LatencyModel, LayerSample, NodeCosts, UnitPredictor};
use tandem_core::LayerGraph;

/// SGD settings of the evolution matrix.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EvolutionConfig {
    /// Passes over all records per refit.
    pub epochs: usize,
    /// SGD step size (on relative error).
    pub learning_rate: f64,
    /// Most records kept; the oldest are dropped beyond it, bounding refit time.
    pub max_records: usize,
    /// Normalized steps (NLMS): each record's step is divided by the sum of
    /// its squared terms, so a record with many small terms moves them as
    /// much as one with a few large ones, and a few records suffice. For
    /// online use, where a whole prefix or suffix is one record.
    #[serde(default)]
    pub normalized: bool,
}

impl Default for EvolutionConfig {
    /// Tuned so a refit over a few hundred records takes about a millisecond.
    fn default() -> Self {
        EvolutionConfig { epochs: 200, learning_rate: 0.05, max_records: 512, normalized: false }
    }
}

impl EvolutionConfig {
    /// Online settings: normalized steps over the last 32 records, 4
    /// passes each, so a refit's work is bounded per frame.
    pub fn online() -> EvolutionConfig {
        EvolutionConfig { epochs: 4, learning_rate: 0.3, max_records: 32, normalized: true }
    }
}

/// One real measurement and the uncorrected terms it was predicted from.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Record {
    /// (unit key, uncorrected T_i in seconds) of every unit that ran.
    pub terms: Vec<(String, f64)>,
    /// Fixed run cost included in the measurement (seconds).
    pub overhead_s: f64,
    /// The measured time (seconds).
    pub measured_s: f64,
}

/// The evolution matrix: (a_i0, a_i1) per unit key.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct EvolutionMatrix {
    /// (a_i0 in units of the key's reference time, a_i1), by key.
    coefficients: BTreeMap<String, [f64; 2]>,
    /// Reference time per key (seconds): its first uncorrected prediction.
    /// a_i0 is stored relative to it so both coefficients train at one scale.
    reference_s: BTreeMap<String, f64>,
    records: Vec<Record>,
    /// SGD settings.
    pub config: EvolutionConfig,
    /// The same by index, for the refits (rebuilt after deserializing).
    #[serde(skip)]
    fast: Indexed,
}

/// The matrix's keys and records by index: a session refits after every
/// frame, and by name a 150-layer suffix cost 4 passes × 32 records × 150
/// terms of map lookups (milliseconds on the watch's own thread).
#[derive(Clone, Debug, Default)]
struct Indexed {
    ids: HashMap<String, usize>,
    keys: Vec<String>,
    coefficients: Vec<[f64; 2]>,
    reference_s: Vec<f64>,
    /// Each record's (key index, T_i), in `records` order.
    terms: std::collections::VecDeque<Terms>,
}

/// One record's terms by key index, and the sum of their squares (the
/// normalized step's divisor: the same every pass, so summed once).
#[derive(Clone, Debug)]
struct Terms {
    by_index: Vec<(usize, f64)>,
    squares: f64,
}

impl Terms {
    fn new(by_index: Vec<(usize, f64)>) -> Terms {
        let squares = by_index.iter().map(|(_, t)| t * t).sum::<f64>().max(1e-18);
        Terms { by_index, squares }
    }
}

impl Indexed {
    /// The index of `key`, added with `coefficients` and `reference_s` when new.
    fn id(&mut self, key: &str, coefficients: [f64; 2], reference_s: f64) -> usize {
        if let Some(&i) = self.ids.get(key) {
            return i;
        }
        let i = self.keys.len();
        self.ids.insert(key.to_string(), i);
        self.keys.push(key.to_string());
        self.coefficients.push(coefficients);
        self.reference_s.push(reference_s);
        i
    }
}

/// The corrected term ReLU(T + a_0·S + a_1·T) of coefficients `c` and reference time `s`.
fn corrected(c: &[f64; 2], s: f64, t: f64) -> f64 {
    (t + c[0] * s + c[1] * t).max(0.0)
}

impl EvolutionMatrix {
    /// The corrected term ReLU(T + a_0 + a_1·T) for `key` (seconds).
    pub fn correct(&self, key: &str, t: f64) -> f64 {
        match (self.coefficients.get(key), self.reference_s.get(key)) {
            (Some(c), Some(&s)) => corrected(c, s, t),
            _ => t.max(0.0),
        }
    }

    /// Records a measurement and refits on all records.
    pub fn observe(&mut self, record: Record) {
        self.index();
        let mut terms = Vec::with_capacity(record.terms.len());
        for (key, t) in &record.terms {
            // Indexed keys are in both maps already (no key copied for them).
            let id = match self.fast.ids.get(key) {
                Some(&i) => i,
                None => {
                    let s = *self.reference_s.entry(key.clone()).or_insert(t.max(1e-9));
                    let c = *self.coefficients.entry(key.clone()).or_insert([0.0, 0.0]);
                    self.fast.id(key, c, s)
                }
            };
            terms.push((id, *t));
        }
        self.records.push(record);
        self.fast.terms.push_back(Terms::new(terms));
        if self.records.len() > self.config.max_records {
            let excess = self.records.len() - self.config.max_records;
            self.records.drain(..excess);
            self.fast.terms.drain(..excess);
        }
        self.refit();
    }

    /// Builds the index from the maps and records when it does not match
    /// them (a matrix just deserialized).
    fn index(&mut self) {
        if self.fast.keys.len() == self.coefficients.len() && self.fast.terms.len() == self.records.len() {
            return;
        }
        let mut fast = Indexed::default();
        for (key, &c) in &self.coefficients {
            let s = self.reference_s.get(key).copied().unwrap_or(1e-9);
            fast.id(key, c, s);
        }
        fast.terms = self
            .records
            .iter()
            .map(|r| Terms::new(r.terms.iter().filter_map(|(k, t)| Some((*fast.ids.get(k)?, *t))).collect()))
            .collect();
        self.fast = fast;
    }

    /// Number of records held.
    pub fn records(&self) -> usize {
        self.records.len()
    }

    /// An empty matrix with these settings.
    pub fn with_config(config: EvolutionConfig) -> EvolutionMatrix {
        EvolutionMatrix { config, ..EvolutionMatrix::default() }
    }

    /// Whether `key` has been seen in a record.
    pub fn knows(&self, key: &str) -> bool {
        self.coefficients.contains_key(key)
    }

    /// Each of `keys`' uncorrected terms `base` (seconds) corrected: a seen
    /// key by its own coefficients ([`EvolutionMatrix::correct`]), an unseen
    /// one by the mean slope. What [`crate::predict::OnlineLatency`] asks
    /// after every frame, by index (one hash per key, not three ordered-map
    /// lookups: 0.2 ms a frame on the watch's thread for WaveNet's 150 layers).
    pub fn correct_each(&self, keys: &[String], base: &[f64]) -> Vec<f64> {
        let shared = self.mean_slope();
        let indexed = self.fast.keys.len() == self.coefficients.len();
        let own = |k: &String, t: f64| match indexed {
            true => self
                .fast
                .ids
                .get(k)
                .map(|&i| corrected(&self.fast.coefficients[i], self.fast.reference_s[i], t)),
            false => self.knows(k).then(|| self.correct(k, t)),
        };
        keys.iter().zip(base).map(|(k, &t)| own(k, t).unwrap_or((t * (1.0 + shared)).max(0.0))).collect()
    }

    /// The mean slope a_1 over the keys seen (0 before any): what an unseen
    /// unit of the same device is corrected by.
    pub fn mean_slope(&self) -> f64 {
        if self.coefficients.is_empty() {
            return 0.0;
        }
        self.coefficients.values().map(|c| c[1]).sum::<f64>() / self.coefficients.len() as f64
    }

    /// SGD on Σ_r ((P_r − M_r)/M_r)², warm-started from the current
    /// coefficients, on the keys' indices; the maps take the result.
    fn refit(&mut self) {
        let lr = self.config.learning_rate;
        let normalized = self.config.normalized;
        let Indexed { keys, coefficients, reference_s, terms: records_terms, .. } = &mut self.fast;
        for _ in 0..self.config.epochs {
            for (Terms { by_index, squares }, r) in records_terms.iter().zip(&self.records) {
                if r.measured_s <= 0.0 {
                    continue;
                }
                let predicted: f64 = r.overhead_s
                    + by_index
                        .iter()
                        .map(|&(i, t)| corrected(&coefficients[i], reference_s[i], t))
                        .sum::<f64>();
                let rel = (predicted - r.measured_s) / r.measured_s;
                let g = if normalized {
                    // NLMS: the step that would fit this record exactly at lr = 1.
                    (predicted - r.measured_s) / squares
                } else {
                    2.0 * rel / r.measured_s
                };
                for &(i, t) in by_index {
                    let s = reference_s[i];
                    let c = &mut coefficients[i];
                    if corrected(c, s, t) <= 0.0 {
                        continue;
                    }
                    // The offset learns 10x slower than the slope: a slope
                    // carries over to pruned or resized variants, an
                    // absolute offset does not.
                    c[0] -= 0.1 * lr * g * s;
                    c[1] -= lr * g * t;
                }
            }
        }
        for (key, fitted) in keys.iter().zip(coefficients.iter()) {
            if let Some(c) = self.coefficients.get_mut(key) {
                *c = *fitted;
            }
        }
    }
}

/// Layer classes whose latency barely varies with a model's variants; the
/// model-specific sweep measures them directly.
pub const CONST_CLASSES: [&str; 3] = ["activation", "pool", "other"];

/// The EvoLP-style predictor.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EvoLp {
    /// The layer-wise predictor.
    pub lwlp: Lwlp,
    /// Directly measured const layers: config key → µs.
    pub measured_us: HashMap<String, f64>,
    /// The evolution matrix.
    pub evolution: EvolutionMatrix,
    /// Fixed cost of one plan run (µs).
    pub overhead_us: f64,
}

impl EvoLp {
    /// A fresh predictor (no evolution yet) from a trained LWLP and the sweep
    /// rows, whose exact const-layer rows become direct measurements.
    pub fn new(lwlp: Lwlp, samples: &[LayerSample]) -> EvoLp {
        let mut sums: HashMap<String, (f64, usize)> = HashMap::new();
        for s in samples.iter().filter(|s| s.is_exact() && CONST_CLASSES.contains(&s.features.kind.as_str()))
        {
            let e = sums.entry(s.features.config_key()).or_insert((0.0, 0));
            e.0 += s.target_us().max(0.0);
            e.1 += 1;
        }
        let measured_us = sums.into_iter().map(|(k, (sum, n))| (k, sum / n as f64)).collect();
        EvoLp {
            lwlp,
            measured_us,
            evolution: EvolutionMatrix::default(),
            overhead_us: super::mean_overhead_us(samples),
        }
    }

    /// The uncorrected prediction T_i of one unit (µs).
    pub fn uncorrected_us(&self, f: &LayerFeatures) -> f64 {
        if let Some(&m) = self.measured_us.get(&f.config_key()) {
            return m;
        }
        self.lwlp.unit_us(f).unwrap_or(0.05)
    }

    /// The uncorrected terms of the units whose heads are in `mask`.
    pub fn terms(&self, graph: &LayerGraph, mask: &[bool]) -> Vec<(String, f64)> {
        graph_features(graph)
            .into_iter()
            .filter(|(u, _)| mask.get(u.head).copied().unwrap_or(false))
            .map(|(u, f)| (graph.nodes()[u.head].name.clone(), self.uncorrected_us(&f) * 1e-6))
            .collect()
    }

    /// Feeds back one real measurement of running the nodes in `mask`
    /// (a whole model, a prefix or a suffix) and evolves.
    pub fn observe(&mut self, graph: &LayerGraph, mask: &[bool], measured: Duration) {
        let terms = self.terms(graph, mask);
        if terms.is_empty() {
            return;
        }
        let overhead_s = self.overhead_us * 1e-6;
        self.evolution.observe(Record { terms, overhead_s, measured_s: measured.as_secs_f64() });
    }
}

impl LatencyModel for EvoLp {
    fn name(&self) -> String {
        if self.evolution.records() == 0 {
            "evolp".into()
        } else {
            format!("evolp+{}", self.evolution.records())
        }
    }

    fn node_costs(&self, graph: &LayerGraph) -> NodeCosts {
        let mut per_node_s = vec![0.0; graph.nodes().len()];
        for (u, f) in graph_features(graph) {
            let key = &graph.nodes()[u.head].name;
            per_node_s[u.head] = self.evolution.correct(key, self.uncorrected_us(&f) * 1e-6);
        }
        NodeCosts { per_node_s, overhead_s: self.overhead_us * 1e-6 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The refit as it was, by name: the reference the indexed one must match.
    fn refit_by_name(m: &mut EvolutionMatrix, record: Record) {
        for (key, t) in &record.terms {
            m.reference_s.entry(key.clone()).or_insert(t.max(1e-9));
            m.coefficients.entry(key.clone()).or_insert([0.0, 0.0]);
        }
        m.records.push(record);
        if m.records.len() > m.config.max_records {
            let excess = m.records.len() - m.config.max_records;
            m.records.drain(..excess);
        }
        let lr = m.config.learning_rate;
        for _ in 0..m.config.epochs {
            for r in m.records.clone() {
                if r.measured_s <= 0.0 {
                    continue;
                }
                let predicted: f64 =
                    r.overhead_s + r.terms.iter().map(|(k, t)| m.correct(k, *t)).sum::<f64>();
                let g = if m.config.normalized {
                    let norm: f64 = r.terms.iter().map(|(_, t)| t * t).sum::<f64>().max(1e-18);
                    (predicted - r.measured_s) / norm
                } else {
                    2.0 * ((predicted - r.measured_s) / r.measured_s) / r.measured_s
                };
                for (key, t) in &r.terms {
                    let s = m.reference_s.get(key).copied().unwrap_or(1e-9);
                    if m.correct(key, *t) <= 0.0 {
                        continue;
                    }
                    if let Some(c) = m.coefficients.get_mut(key) {
                        c[0] -= 0.1 * lr * g * s;
                        c[1] -= lr * g * t;
                    }
                }
            }
        }
    }

    /// A stream of records over six keys, some units coming and going.
    fn record(i: usize) -> Record {
        let terms = vec![
            ("a".to_string(), 0.001 * (1 + i % 3) as f64),
            ("b".to_string(), 0.002),
            (format!("c{}", i % 4), 0.0005),
        ];
        Record { terms, overhead_s: 1e-4, measured_s: 0.004 + 3e-4 * (i % 5) as f64 }
    }

    #[test]
    fn the_indexed_refit_is_the_refit_by_name_and_survives_a_save_and_load() -> anyhow::Result<()> {
        for config in
            [EvolutionConfig { max_records: 5, ..EvolutionConfig::online() }, EvolutionConfig::default()]
        {
            let mut fast = EvolutionMatrix::with_config(config.clone());
            let mut by_name = EvolutionMatrix::with_config(config);
            for i in 0..12 {
                fast.observe(record(i));
                refit_by_name(&mut by_name, record(i));
            }
            // Saved and loaded mid-stream: the index is rebuilt, and learning goes on alike.
            let mut loaded: EvolutionMatrix = serde_json::from_str(&serde_json::to_string(&fast)?)?;
            for i in 12..20 {
                fast.observe(record(i));
                loaded.observe(record(i));
                refit_by_name(&mut by_name, record(i));
            }
            assert_eq!(fast.records(), by_name.records());
            for key in ["a", "b", "c0", "c1", "c2", "c3"] {
                let (f, n, l) =
                    (fast.correct(key, 1e-3), by_name.correct(key, 1e-3), loaded.correct(key, 1e-3));
                assert_eq!(f.to_bits(), n.to_bits(), "{key}: indexed {f} against by name {n}");
                // JSON reads a float back to within its last bit (serde_json
                // without `float_roundtrip`), so the loaded one is as close.
                assert!((f - l).abs() <= 1e-12 * f.abs(), "{key}: kept {f} against saved and loaded {l}");
            }
            assert_ne!(fast.correct("a", 1e-3), 1e-3, "it learned something");
            // All at once by index, an unseen key by the mean slope; a matrix
            // just loaded (not indexed yet) answers the same by name.
            let keys: Vec<String> = ["a", "b", "c0", "c3", "unseen"].map(String::from).to_vec();
            let base = [1e-3, 2e-3, 5e-4, 4e-4, 3e-3];
            let expected: Vec<f64> = keys
                .iter()
                .zip(base)
                .map(|(k, t)| match by_name.knows(k) {
                    true => by_name.correct(k, t),
                    false => (t * (1.0 + by_name.mean_slope())).max(0.0),
                })
                .collect();
            assert_ne!(expected[4], base[4], "the unseen key takes the mean slope");
            let reloaded: EvolutionMatrix = serde_json::from_str(&serde_json::to_string(&fast)?)?;
            // One answers from its index, the other by name.
            assert_eq!(fast.fast.keys.len(), fast.coefficients.len(), "the learning one is indexed");
            assert!(reloaded.fast.keys.is_empty(), "the loaded one is not indexed yet");
            for (m, what) in [(&fast, "indexed"), (&reloaded, "just loaded")] {
                for ((k, got), want) in keys.iter().zip(m.correct_each(&keys, &base)).zip(&expected) {
                    assert!((got - want).abs() <= 1e-12 * want.abs(), "{what} {k}: {got} against {want}");
                }
            }
        }
        Ok(())
    }

    #[test]
    fn evolution_learns_a_systematic_bias() {
        // The layer predictor says 1 ms and 3 ms; the device really takes 1.5x, plus 0.2 ms per layer.
        let mut em = EvolutionMatrix::default();
        let truth = |a: f64, b: f64| (1.5 * a + 0.0002) + (1.5 * b + 0.0002);
        let cases = [(0.001, 0.003), (0.002, 0.001), (0.0005, 0.004), (0.003, 0.003)];
        for &(a, b) in cases.iter().cycle().take(12) {
            em.observe(Record {
                terms: vec![("x".into(), a), ("y".into(), b)],
                overhead_s: 0.0,
                measured_s: truth(a, b),
            });
        }
        let (a, b) = (0.0015, 0.0025);
        let predicted = em.correct("x", a) + em.correct("y", b);
        let err = (predicted - truth(a, b)).abs() / truth(a, b);
        assert!(
            err < 0.02,
            "relative error {err} after evolution; uncorrected is {}",
            1.0 - (a + b) / truth(a, b)
        );
    }

    #[test]
    fn relu_clamps_a_term_at_zero() {
        let mut em = EvolutionMatrix::default();
        em.reference_s.insert("k".into(), 1.0);
        em.coefficients.insert("k".into(), [-2.0, 0.0]);
        assert_eq!(em.correct("k", 1.0), 0.0);
        assert_eq!(em.correct("unknown", 0.5), 0.5);
    }
}
