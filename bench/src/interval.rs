//! Bootstrap intervals for the harness's headline figures, so that a
//! reader can tell a tie from a win: the cells, and within each cell the
//! runs, resampled with replacement (a cell whose two sides are one pool
//! of runs is drawn as it is, even); the 2.5th and 97.5th percentiles of
//! the statistic over the resamples. Two statistics: a strategy against a
//! baseline, paired by cell ([`Paired`]), and a strategy against each
//! cell's measured best ([`Pools`]).

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
    bootstrap(cells, seed, geomean_ratio, |c, rng| {
        if c.one_pool {
            return c.clone();
        }
        Paired::new(draw(&c.baseline, rng), draw(&c.strategy, rng))
    })
}

/// One cell's runs as the measured best is found in it: pools of runs (a
/// placement's runs, whichever strategies ran them; or one strategy's own),
/// which of them may set the best, and the one the strategy is judged by.
#[derive(Clone, Debug, PartialEq)]
pub struct Pools {
    /// Each pool's runs (positive figures, lower is better).
    pools: Vec<Vec<f64>>,
    /// Whether each pool may set the cell's best.
    sets_best: Vec<bool>,
    /// The pool the strategy is judged by.
    judged: usize,
}

impl Pools {
    /// A cell of `pools`, each with whether it may set the best, the
    /// strategy judged by the pool at `judged`. `None` if there is no such
    /// pool.
    pub fn new(pools: Vec<(Vec<f64>, bool)>, judged: usize) -> Option<Pools> {
        (judged < pools.len()).then(|| {
            let (pools, sets_best) = pools.into_iter().unzip();
            Pools { pools, sets_best, judged }
        })
    }

    /// The cell's best over the judged pool's mean, at most 1 (a pool that
    /// may not set the best and measured below it counts as at it);
    /// `None` without runs to judge, or where the best or the judged mean
    /// is not positive (the cell is then left out of the mean).
    fn share(&self) -> Option<f64> {
        let means: Vec<Option<f64>> = self.pools.iter().map(|p| mean(p)).collect();
        let least = |only_setters: bool| {
            means
                .iter()
                .zip(&self.sets_best)
                .filter(|(_, &sets)| sets || !only_setters)
                .filter_map(|(m, _)| *m)
                .fold(f64::INFINITY, f64::min)
        };
        let best = match least(true) {
            b if b.is_finite() => b,
            _ => least(false),
        };
        let own = means[self.judged]?;
        (best > 0.0 && own > 0.0).then(|| (best / own).min(1.0))
    }
}

/// The geometric mean over `cells` of each cell's best over the judged
/// pool's mean, each at most 1 (1: the strategy at the best everywhere).
pub fn geomean_of_best(cells: &[Pools]) -> Option<f64> {
    let logs: Vec<f64> = cells.iter().filter_map(|c| Some(c.share()?.ln())).collect();
    (!logs.is_empty()).then(|| (logs.iter().sum::<f64>() / logs.len() as f64).exp())
}

/// The 95% bootstrap interval of [`geomean_of_best`]: cells drawn with
/// replacement, then each pool's runs (so strategies that share a pool
/// share its draw, and the best is found again in each resample).
pub fn geomean_of_best_interval(cells: &[Pools], seed: u64) -> Option<(f64, f64)> {
    bootstrap(cells, seed, geomean_of_best, |c, rng| Pools {
        pools: c.pools.iter().map(|p| draw(p, rng)).collect(),
        sets_best: c.sets_best.clone(),
        judged: c.judged,
    })
}

/// `v`'s values drawn with replacement, as many as it has.
fn draw(v: &[f64], rng: &mut ChaCha8Rng) -> Vec<f64> {
    (0..v.len()).map(|_| v[rng.gen_range(0..v.len())]).collect()
}

/// The 2.5th and 97.5th percentiles of `statistic` over [`RESAMPLES`]
/// resamples of `cells` (cells drawn with replacement, each redrawn by
/// `redraw`); `None` without a cell.
fn bootstrap<C>(
    cells: &[C],
    seed: u64,
    statistic: fn(&[C]) -> Option<f64>,
    redraw: fn(&C, &mut ChaCha8Rng) -> C,
) -> Option<(f64, f64)> {
    if cells.is_empty() {
        return None;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut stats = Vec::with_capacity(RESAMPLES);
    for _ in 0..RESAMPLES {
        let sample: Vec<C> =
            (0..cells.len()).map(|_| redraw(&cells[rng.gen_range(0..cells.len())], &mut rng)).collect();
        if let Some(g) = statistic(&sample) {
            stats.push(g);
        }
    }
    if stats.is_empty() {
        return None;
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

    fn pools(pools: &[(&[f64], bool)], judged: usize) -> Pools {
        Pools::new(pools.iter().map(|(runs, sets)| (runs.to_vec(), *sets)).collect(), judged)
            .expect("judged pool")
    }

    /// Against each cell's best: the least mean of the pools that may set
    /// it, over the judged pool's, at most 1; the best found again in each
    /// resample.
    #[test]
    fn the_best_is_found_in_each_cell_and_each_resample() {
        // Pools of 10, 20 (both may set the best) and 5 (moved runs: may not).
        let three: [(&[f64], bool); 3] = [(&[10.0, 10.0], true), (&[20.0, 20.0], true), (&[5.0, 5.0], false)];
        let share = |judged| geomean_of_best(&[pools(&three, judged)]).expect("cell");
        assert_eq!((share(0), share(1), share(2)), (1.0, 0.5, 1.0));
        // No pool may set it: the least of all.
        let moved: [(&[f64], bool); 2] = [(&[10.0], false), (&[40.0], false)];
        assert_eq!(geomean_of_best(&[pools(&moved, 1)]), Some(0.25));
        assert_eq!(Pools::new(vec![(vec![1.0], true)], 1), None);
        // The geometric mean over cells: 1 and 0.25 give 0.5.
        let cells = [pools(&three, 0), pools(&moved, 1)];
        assert!((geomean_of_best(&cells).expect("cells") - 0.5).abs() < 1e-12);
        // At the best pool of noisy runs that no other pool overtakes: 1 in
        // every resample.
        let noisy: [(&[f64], bool); 2] = [(&[5.0, 15.0], true), (&[30.0, 50.0], true)];
        assert_eq!(geomean_of_best_interval(&vec![pools(&noisy, 0); 5], 9), Some((1.0, 1.0)));
        // Judged by the other: around 10 / 40, the best found again in each
        // resample (drawn 5s against 50s: 0.1; 15s against 30s: 0.5).
        let (lo, hi) = geomean_of_best_interval(&vec![pools(&noisy, 1); 5], 9).expect("cells");
        assert!(0.12 < lo && lo < 0.2 && 0.3 < hi && hi < 0.4, "{lo} {hi}");
        // The best found again: B (10) is the best as measured, but a
        // resample drawing A's 9 twice (a quarter) puts A ahead, 9 / 20;
        // with the best kept at B's pool every resample would give 0.5.
        let again: [(&[f64], bool); 3] =
            [(&[9.0, 13.0], true), (&[10.0, 10.0], true), (&[20.0, 20.0], false)];
        assert_eq!(geomean_of_best(&[pools(&again, 2)]), Some(0.5));
        let (lo, hi) = geomean_of_best_interval(&[pools(&again, 2)], 9).expect("cell");
        assert!((lo - 0.45).abs() < 1e-12 && (hi - 0.5).abs() < 1e-12, "{lo} {hi}");
        // Judged by a pool that overlaps the best: a resample may put it
        // ahead, and clipped at 1 there, the interval reaches 1.
        let close: [(&[f64], bool); 2] = [(&[9.0, 11.0], true), (&[10.0, 12.0], true)];
        let (lo, hi) = geomean_of_best_interval(&vec![pools(&close, 1); 2], 9).expect("cells");
        assert!(lo < 0.95 && hi == 1.0, "{lo} {hi}");
        assert_eq!(geomean_of_best_interval(&[], 9), None);
    }
}
