//! Accuracy metrics of latency predictions (SPEC 3.3): RMSE, RMSPE and the
//! share of predictions within ±5% and ±10%, plus R² for layer regressions.

use serde::Serialize;

/// Accuracy of a set of (predicted, measured) pairs.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Accuracy {
    /// Number of pairs.
    pub n: usize,
    /// Root mean squared error (ms).
    pub rmse_ms: f64,
    /// Root mean squared percentage error (%).
    pub rmspe_pct: f64,
    /// Share of pairs within ±5% of the measurement (%).
    pub within_5_pct: f64,
    /// Share of pairs within ±10% of the measurement (%).
    pub within_10_pct: f64,
}

impl Accuracy {
    /// Computes the metrics over `(predicted_s, measured_s)` pairs; pairs with
    /// a non-positive measurement are skipped.
    pub fn of(pairs: &[(f64, f64)]) -> Accuracy {
        let pairs: Vec<(f64, f64)> = pairs.iter().copied().filter(|&(_, m)| m > 0.0).collect();
        let n = pairs.len();
        if n == 0 {
            return Accuracy::default();
        }
        let nf = n as f64;
        let mse = pairs.iter().map(|(p, m)| (p - m).powi(2)).sum::<f64>() / nf;
        let rel: Vec<f64> = pairs.iter().map(|(p, m)| (p - m) / m).collect();
        let mspe = rel.iter().map(|r| r * r).sum::<f64>() / nf;
        let within = |t: f64| 100.0 * rel.iter().filter(|r| r.abs() <= t).count() as f64 / nf;
        Accuracy {
            n,
            rmse_ms: mse.sqrt() * 1e3,
            rmspe_pct: mspe.sqrt() * 100.0,
            within_5_pct: within(0.05),
            within_10_pct: within(0.10),
        }
    }
}

/// R² = 1 − SSE/SST of predictions against measurements.
pub fn r_squared(pairs: &[(f64, f64)]) -> f64 {
    if pairs.is_empty() {
        return f64::NAN;
    }
    let mean = pairs.iter().map(|(_, m)| m).sum::<f64>() / pairs.len() as f64;
    let sse: f64 = pairs.iter().map(|(p, m)| (p - m).powi(2)).sum();
    let sst: f64 = pairs.iter().map(|(_, m)| (m - mean).powi(2)).sum();
    if sst > 0.0 {
        1.0 - sse / sst
    } else {
        f64::NAN
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_computed_metrics() {
        // Errors: +10%, −4%, 0%, +30%.
        let a = Accuracy::of(&[(0.011, 0.010), (0.0048, 0.005), (0.002, 0.002), (0.0013, 0.001)]);
        assert_eq!(a.n, 4);
        assert!((a.within_5_pct - 50.0).abs() < 1e-9);
        assert!((a.within_10_pct - 75.0).abs() < 1e-9);
        let rmspe = ((0.01 + 0.0016 + 0.0 + 0.09) / 4.0f64).sqrt() * 100.0;
        assert!((a.rmspe_pct - rmspe).abs() < 1e-6, "{}", a.rmspe_pct);
        let rmse = ((1e-6 + 0.04e-6 + 0.0 + 0.09e-6) / 4.0f64).sqrt() * 1e3;
        assert!((a.rmse_ms - rmse).abs() < 1e-9);
    }

    #[test]
    fn r_squared_is_one_for_perfect_and_zero_for_the_mean() {
        assert_eq!(r_squared(&[(1.0, 1.0), (2.0, 2.0), (3.0, 3.0)]), 1.0);
        assert!((r_squared(&[(2.0, 1.0), (2.0, 2.0), (2.0, 3.0)])).abs() < 1e-12);
    }
}
