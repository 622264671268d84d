//! Bootstrap intervals for the harness's headline figures, so that a
//! reader can tell a tie from a win: the cells, and within each cell the
//! runs of both strategies, resampled with replacement (a cell whose two
//! sides are one pool of runs is drawn as it is, even); the 2.5th and
//! 97.5th percentiles of the statistic over the resamples.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Resamples drawn.
pub const RESAMPLES: usize = 2000;

/// One cell's runs of a strategy and of the baseline it is compared with
/// (latencies in ms, or any positive figure).
#[derive(Clone, Debug, PartialEq)]
pub struct Paired {
    /// The baseline's runs.
    baseline: Vec<f64>,
    /// The strategy's runs.
    strategy: Vec<f64>,
    /// Both sides are one pool of runs ([`Paired::one_pool`]; the two
    /// vectors are then the same): a resample draws the cell as it is.
    one_pool: bool,
}

impl Paired {
    /// A cell of the two sides' own runs.
    pub fn new(baseline: Vec<f64>, strategy: Vec<f64>) -> Paired {
        Paired { baseline, strategy, one_pool: false }
    }

    /// A cell where both sides are one pool of runs (two strategies that
    /// ran at one placement, whose runs are samples of one thing): its
    /// ratio is 1 in the estimate and in every resample.
    pub fn one_pool(runs: Vec<f64>) -> Paired {
        Paired { baseline: runs.clone(), strategy: runs, one_pool: true }
    }
}

/// The geometric mean over `cells` of the baseline's mean over the
/// strategy's mean (a speedup: above 1, the strategy is faster).
pub fn geomean_ratio(cells: &[Paired]) -> Option<f64> {
    let logs: Vec<f64> = cells
        .iter()
        .filter_map(|c| {
            let (b, s) = (mean(&c.baseline)?, mean(&c.strategy)?);
            (b > 0.0 && s > 0.0).then(|| (b / s).ln())
        })
        .collect();
    (!logs.is_empty()).then(|| (logs.iter().sum::<f64>() / logs.len() as f64).exp())
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// The 95% bootstrap interval of [`geomean_ratio`] over `cells`: cells
/// drawn with replacement, then each drawn cell's runs of both sides drawn
/// with replacement (a one-pool cell's not: it stays even); `seed` makes
/// it repeatable. `None` without a cell.
pub fn geomean_ratio_interval(cells: &[Paired], seed: u64) -> Option<(f64, f64)> {
    if cells.is_empty() {
        return None;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let draw = |v: &[f64], rng: &mut ChaCha8Rng| -> Vec<f64> {
        (0..v.len()).map(|_| v[rng.gen_range(0..v.len())]).collect()
    };
    let mut stats = Vec::with_capacity(RESAMPLES);
    for _ in 0..RESAMPLES {
        let sample: Vec<Paired> = (0..cells.len())
            .map(|_| {
                let c = &cells[rng.gen_range(0..cells.len())];
                if c.one_pool {
                    return c.clone();
                }
                let baseline = if c.baseline.is_empty() { vec![] } else { draw(&c.baseline, &mut rng) };
                let strategy = if c.strategy.is_empty() { vec![] } else { draw(&c.strategy, &mut rng) };
                Paired::new(baseline, strategy)
            })
            .collect();
        if let Some(g) = geomean_ratio(&sample) {
            stats.push(g);
        }
    }
    stats.sort_by(f64::total_cmp);
    let at = |q: f64| stats.get(((stats.len() - 1) as f64 * q).round() as usize).copied();
    Some((at(0.025)?, at(0.975)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(baseline: &[f64], strategy: &[f64]) -> Paired {
        Paired::new(baseline.to_vec(), strategy.to_vec())
    }

    #[test]
    fn the_interval_holds_the_estimate_and_narrows_with_agreement() {
        // Every cell 2x faster, runs identical: the interval is the point.
        let same: Vec<Paired> = (0..10).map(|_| cell(&[100.0, 100.0], &[50.0, 50.0])).collect();
        let (lo, hi) = geomean_ratio_interval(&same, 1).expect("cells");
        assert!((lo - 2.0).abs() < 1e-9 && (hi - 2.0).abs() < 1e-9, "{lo} {hi}");
        // Cells that disagree (some 4x, some 1x): wide, around the estimate.
        let mixed: Vec<Paired> = (0..10)
            .map(|i| if i % 2 == 0 { cell(&[100.0], &[25.0]) } else { cell(&[100.0], &[100.0]) })
            .collect();
        let g = geomean_ratio(&mixed).expect("estimate");
        assert!((g - 2.0).abs() < 1e-9, "{g}");
        let (lo, hi) = geomean_ratio_interval(&mixed, 1).expect("cells");
        assert!(lo < g && g < hi, "{lo} {g} {hi}");
        assert!(lo > 1.0 && hi < 4.0 && hi - lo > 0.5, "{lo} {hi}");
        // Noisy runs within one cell widen it too; the same seed repeats it.
        let noisy = vec![cell(&[90.0, 110.0], &[40.0, 60.0]); 6];
        let (lo, hi) = geomean_ratio_interval(&noisy, 7).expect("cells");
        assert!(lo < 2.0 && hi > 2.0, "{lo} {hi}");
        assert_eq!(geomean_ratio_interval(&noisy, 7), Some((lo, hi)));
        assert_eq!(geomean_ratio_interval(&[], 7), None);
    }

    /// A one-pool cell is even in the estimate and in every resample,
    /// however its runs spread; a cell of the same runs as two sides is
    /// resampled apart and spreads.
    #[test]
    fn a_one_pool_cell_stays_even() {
        let runs = vec![10.0, 20.0, 40.0];
        let pooled = vec![Paired::one_pool(runs.clone()); 4];
        assert_eq!(geomean_ratio(&pooled), Some(1.0));
        assert_eq!(geomean_ratio_interval(&pooled, 3), Some((1.0, 1.0)));
        let apart = vec![Paired::new(runs.clone(), runs); 4];
        assert_eq!(geomean_ratio(&apart), Some(1.0));
        let (lo, hi) = geomean_ratio_interval(&apart, 3).expect("cells");
        assert!(lo < 0.9 && hi > 1.1, "{lo} {hi}");
        // Beside a cell 2x faster: the estimate is the root of 2, and the
        // resamples range from all even to all 2x.
        let mixed = vec![Paired::one_pool(vec![10.0, 20.0]), Paired::new(vec![20.0], vec![10.0])];
        assert!((geomean_ratio(&mixed).expect("cells") - 2f64.sqrt()).abs() < 1e-12);
        let (lo, hi) = geomean_ratio_interval(&mixed, 5).expect("cells");
        assert!((lo - 1.0).abs() < 1e-12 && (hi - 2.0).abs() < 1e-12, "{lo} {hi}");
    }
}
