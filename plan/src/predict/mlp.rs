//! EvoLP's layer-wise latency predictor (SPEC 3.3): per layer class, a small
//! 3-layer MLP `g(x) = W2·σ(W1·σ(W0·x))` (σ = ReLU) from a unit's encoded
//! configuration to its log latency.
//!
//! Hand-written: it is 500–2,200 multiply-adds per prediction ([`Mlp::macs`],
//! reported by `predict fit`) and a fixed number of Adam steps to train, where
//! an ML framework (burn, candle) would add minutes of build time for the same
//! arithmetic. Training is Adam on
//! mini-batches with a seeded initialization, so a fit is reproducible.

use std::collections::BTreeMap;

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::features::{split_attributes, LayerFeatures, CLASSES};
use super::{LayerSample, UnitPredictor};

/// Training settings.
#[derive(Clone, Debug)]
pub struct MlpConfig {
    /// Width of both hidden layers.
    pub hidden: usize,
    /// Mini-batch steps; a fixed count, so training time does not grow
    /// with the dataset (a long sweep just gives each step fresher rows).
    pub steps: usize,
    /// Adam step size.
    pub learning_rate: f64,
    /// Rows per mini-batch.
    pub batch: usize,
    /// Seed of the initialization and the shuffles.
    pub seed: u64,
}

impl Default for MlpConfig {
    /// About 2 s per class in an optimized build, whatever the dataset size.
    fn default() -> Self {
        MlpConfig { hidden: 16, steps: 30_000, learning_rate: 3e-3, batch: 16, seed: 0 }
    }
}

/// Turns features into the network's input vector.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Encoder {
    /// The categorical attributes and the values seen in training (one-hot).
    pub categories: Vec<(String, Vec<String>)>,
    /// Per-input mean, for standardization.
    pub mean: Vec<f64>,
    /// Per-input standard deviation.
    pub std: Vec<f64>,
}

impl Encoder {
    fn raw(&self, f: &LayerFeatures) -> Vec<f64> {
        let mut x: Vec<f64> = f.regressors().iter().map(|v| v.max(0.0).ln_1p()).collect();
        for v in [f.channels_in, f.channels_out, f.rows, f64::from(f.kernel), f64::from(f.stride)] {
            x.push(v.max(0.0).ln_1p());
        }
        for (attribute, values) in &self.categories {
            let value = f.category(attribute);
            x.extend(values.iter().map(|v| if *v == value { 1.0 } else { 0.0 }));
        }
        x
    }

    fn encode(&self, f: &LayerFeatures) -> Vec<f64> {
        self.raw(f).iter().zip(self.mean.iter().zip(&self.std)).map(|(v, (m, s))| (v - m) / s).collect()
    }
}

/// A 3-layer perceptron with one output.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Mlp {
    inputs: usize,
    hidden: usize,
    /// All weights and biases, flat: W0, b0, W1, b1, W2, b2.
    params: Vec<f64>,
}

struct Layout {
    w0: usize,
    b0: usize,
    w1: usize,
    b1: usize,
    w2: usize,
    b2: usize,
    len: usize,
}

impl Mlp {
    fn layout(&self) -> Layout {
        let (i, h) = (self.inputs, self.hidden);
        let w0 = 0;
        let b0 = w0 + h * i;
        let w1 = b0 + h;
        let b1 = w1 + h * h;
        let w2 = b1 + h;
        let b2 = w2 + h;
        Layout { w0, b0, w1, b1, w2, b2, len: b2 + 1 }
    }

    fn new(inputs: usize, hidden: usize, rng: &mut ChaCha8Rng) -> Mlp {
        let mut m = Mlp { inputs, hidden, params: vec![] };
        let l = m.layout();
        m.params = vec![0.0; l.len];
        let mut init = |from: usize, n: usize, fan_in: usize| {
            let bound = (6.0 / fan_in.max(1) as f64).sqrt();
            for p in &mut m.params[from..from + n] {
                *p = rng.gen_range(-bound..bound);
            }
        };
        init(l.w0, hidden * inputs, inputs);
        init(l.w1, hidden * hidden, hidden);
        init(l.w2, hidden, hidden);
        m
    }

    /// Forward pass; returns the output and the hidden activations.
    fn forward(&self, x: &[f64]) -> (f64, Vec<f64>, Vec<f64>) {
        let l = self.layout();
        let (i, h) = (self.inputs, self.hidden);
        let p = &self.params;
        let h0: Vec<f64> = (0..h)
            .map(|r| {
                let z = p[l.b0 + r] + (0..i).map(|c| p[l.w0 + r * i + c] * x[c]).sum::<f64>();
                z.max(0.0)
            })
            .collect();
        let h1: Vec<f64> = (0..h)
            .map(|r| {
                let z = p[l.b1 + r] + (0..h).map(|c| p[l.w1 + r * h + c] * h0[c]).sum::<f64>();
                z.max(0.0)
            })
            .collect();
        let y = p[l.b2] + (0..h).map(|c| p[l.w2 + c] * h1[c]).sum::<f64>();
        (y, h0, h1)
    }

    /// Adds the gradient of ½(y − t)² to `grad`.
    fn backward(&self, x: &[f64], target: f64, grad: &mut [f64]) {
        let l = self.layout();
        let (i, h) = (self.inputs, self.hidden);
        let p = &self.params;
        let (y, h0, h1) = self.forward(x);
        let dy = y - target;
        grad[l.b2] += dy;
        let mut d1 = vec![0.0; h];
        for c in 0..h {
            grad[l.w2 + c] += dy * h1[c];
            d1[c] = if h1[c] > 0.0 { dy * p[l.w2 + c] } else { 0.0 };
        }
        let mut d0 = vec![0.0; h];
        for r in 0..h {
            grad[l.b1 + r] += d1[r];
            for c in 0..h {
                grad[l.w1 + r * h + c] += d1[r] * h0[c];
                d0[c] += d1[r] * p[l.w1 + r * h + c];
            }
        }
        for r in 0..h {
            let d = if h0[r] > 0.0 { d0[r] } else { 0.0 };
            grad[l.b0 + r] += d;
            for c in 0..i {
                grad[l.w0 + r * i + c] += d * x[c];
            }
        }
    }

    /// Multiply-adds of one prediction.
    pub fn macs(&self) -> usize {
        self.hidden * self.inputs + self.hidden * self.hidden + self.hidden
    }
}

/// One class's network and its encoding.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClassNet {
    /// Input encoding.
    pub encoder: Encoder,
    /// The network, predicting standardized ln(µs).
    pub mlp: Mlp,
    /// Mean of ln(µs) over training rows.
    pub y_mean: f64,
    /// Standard deviation of ln(µs).
    pub y_std: f64,
}

impl ClassNet {
    fn predict_us(&self, f: &LayerFeatures) -> f64 {
        let (y, _, _) = self.mlp.forward(&self.encoder.encode(f));
        (y * self.y_std + self.y_mean).exp()
    }
}

/// The layer-wise predictor: one network per class.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Lwlp {
    /// Networks by class name.
    pub nets: BTreeMap<String, ClassNet>,
}

impl Lwlp {
    /// Trains one network per class present in `samples`.
    pub fn fit(samples: &[LayerSample], config: &MlpConfig) -> Lwlp {
        let mut nets = BTreeMap::new();
        for (k, class) in CLASSES.iter().enumerate() {
            let rows: Vec<&LayerSample> = samples.iter().filter(|s| s.features.kind == *class).collect();
            if rows.len() < 4 {
                continue;
            }
            let seed = config.seed.wrapping_add(k as u64);
            nets.insert(class.to_string(), fit_class(class, &rows, config, seed));
        }
        Lwlp { nets }
    }
}

impl UnitPredictor for Lwlp {
    fn unit_us(&self, f: &LayerFeatures) -> Option<f64> {
        self.nets.get(&f.kind).map(|n| n.predict_us(f))
    }
}

fn mean_std(values: impl Iterator<Item = f64> + Clone) -> (f64, f64) {
    let n = values.clone().count().max(1) as f64;
    let mean = values.clone().sum::<f64>() / n;
    let var = values.map(|v| (v - mean).powi(2)).sum::<f64>() / n;
    (mean, var.sqrt().max(1e-6))
}

fn fit_class(class: &str, rows: &[&LayerSample], config: &MlpConfig, seed: u64) -> ClassNet {
    let categories: Vec<(String, Vec<String>)> = split_attributes(class)
        .iter()
        .map(|a| {
            let mut values: Vec<String> = rows.iter().map(|r| r.features.category(a)).collect();
            values.sort();
            values.dedup();
            (a.to_string(), values)
        })
        .filter(|(_, v)| v.len() > 1)
        .collect();
    let mut encoder = Encoder { categories, mean: vec![], std: vec![] };
    let raw: Vec<Vec<f64>> = rows.iter().map(|r| encoder.raw(&r.features)).collect();
    let width = raw.first().map(Vec::len).unwrap_or(0);
    for j in 0..width {
        let (m, s) = mean_std(raw.iter().map(|x| x[j]));
        encoder.mean.push(m);
        encoder.std.push(s);
    }
    let xs: Vec<Vec<f64>> = rows.iter().map(|r| encoder.encode(&r.features)).collect();
    let logs: Vec<f64> = rows.iter().map(|r| r.target_us().max(0.05).ln()).collect();
    let (y_mean, y_std) = mean_std(logs.iter().copied());
    let ys: Vec<f64> = logs.iter().map(|y| (y - y_mean) / y_std).collect();

    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut mlp = Mlp::new(width, config.hidden, &mut rng);
    let n = mlp.params.len();
    let (mut m1, mut m2) = (vec![0.0; n], vec![0.0; n]);
    let (beta1, beta2, eps) = (0.9f64, 0.999f64, 1e-8);
    let mut order: Vec<usize> = (0..xs.len()).collect();
    let mut grad = vec![0.0; n];
    let batch = config.batch.max(1);
    let mut at = order.len();
    for step in 1..=config.steps {
        if at + batch > order.len() {
            order.shuffle(&mut rng);
            at = 0;
        }
        let rows = &order[at..(at + batch).min(order.len())];
        at += batch;
        grad.iter_mut().for_each(|g| *g = 0.0);
        for &i in rows {
            mlp.backward(&xs[i], ys[i], &mut grad);
        }
        let scale = 1.0 / rows.len() as f64;
        // Step decay: the last third runs at a tenth of the rate to settle.
        let lr = if step * 3 > config.steps * 2 { config.learning_rate / 10.0 } else { config.learning_rate };
        let t = step.min(i32::MAX as usize) as i32;
        let (c1, c2) = (1.0 - beta1.powi(t), 1.0 - beta2.powi(t));
        for k in 0..n {
            let g = grad[k] * scale;
            m1[k] = beta1 * m1[k] + (1.0 - beta1) * g;
            m2[k] = beta2 * m2[k] + (1.0 - beta2) * g * g;
            mlp.params[k] -= lr * (m1[k] / c1) / ((m2[k] / c2).sqrt() + eps);
        }
    }
    ClassNet { encoder, mlp, y_mean, y_std }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gradient_matches_finite_differences() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut mlp = Mlp::new(3, 4, &mut rng);
        let x = [0.3, -1.2, 0.7];
        let mut grad = vec![0.0; mlp.params.len()];
        mlp.backward(&x, 0.5, &mut grad);
        for (k, &analytic) in grad.iter().enumerate() {
            let h = 1e-6;
            let loss = |m: &Mlp| 0.5 * (m.forward(&x).0 - 0.5).powi(2);
            let orig = mlp.params[k];
            mlp.params[k] = orig + h;
            let up = loss(&mlp);
            mlp.params[k] = orig - h;
            let down = loss(&mlp);
            mlp.params[k] = orig;
            let numeric = (up - down) / (2.0 * h);
            assert!((numeric - analytic).abs() < 1e-5, "param {k}: {numeric} vs {analytic}");
        }
    }
}
