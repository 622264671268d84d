//! The DeepWear-style predictor (SPEC 3.2): per layer class, a decision tree
//! splits the layers into sub-types on categorical attributes (kernel size,
//! grouping, activation, ...), and each leaf holds a linear regression of
//! latency on the layer's parameters.
//!
//! The tree is grown greedily: a split is kept only when it lowers the
//! cross-validated (weighted) error of the per-leaf regressions, so sub-types
//! are learned from the data rather than fixed by hand. The regressions are
//! least squares solved by QR (modified Gram–Schmidt, dropping dependent
//! columns; a leaf has a handful of regressors) on rows weighted by
//! 1/max(latency, 10 µs): a middle way between plain least squares, where the biggest
//! layers decide everything, and relative error, where the smallest do. On
//! held-out sweep layers it gave the best R² of the three.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::features::{split_attributes, LayerFeatures, CLASSES};
use super::{LayerSample, NodeCosts, UnitPredictor};
use tandem_core::LayerGraph;

/// Fewest rows a leaf regression is fitted on.
const MIN_LEAF: usize = 8;
/// Deepest tree (number of nested splits).
const MAX_DEPTH: usize = 3;
/// A split must cut the cross-validated error by this fraction to be kept.
const MIN_GAIN: f64 = 0.03;
/// Folds of the cross-validation that decides splits.
const FOLDS: usize = 4;
/// Smallest target (µs): a layer is never predicted to be free.
const FLOOR_US: f64 = 0.05;
/// Rows are weighted by 1/max(latency, this) (µs): below ~10 µs a
/// measurement is mostly timer and dispatch noise, and letting near-zero rows
/// (no-op transposes, folded reshapes) weigh thousands of times more than
/// real work wrecks the fit of everything else.
const WEIGHT_FLOOR_US: f64 = 10.0;

/// A fitted linear model `y = c0 + Σ c_j x_j` over a class's regressors (µs).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LinearFit {
    /// Intercept first, then one coefficient per regressor (µs per unit).
    pub coefficients: Vec<f64>,
}

impl LinearFit {
    fn predict(&self, x: &[f64]) -> f64 {
        let mut y = self.coefficients.first().copied().unwrap_or(0.0);
        for (c, v) in self.coefficients.iter().skip(1).zip(x) {
            y += c * v;
        }
        y.max(FLOOR_US)
    }
}

/// One node of a class's tree.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TreeNode {
    /// The regression over all rows reaching this node; used for values the
    /// split did not see.
    pub fit: LinearFit,
    /// Rows the node was fitted on.
    pub rows: usize,
    /// The split, if any: attribute name and one child per value.
    pub split: Option<(String, BTreeMap<String, TreeNode>)>,
}

impl TreeNode {
    fn predict(&self, f: &LayerFeatures) -> f64 {
        if let Some((attribute, children)) = &self.split {
            if let Some(child) = children.get(&f.category(attribute)) {
                return child.predict(f);
            }
        }
        self.fit.predict(&f.regressors())
    }

    /// Number of leaves (sub-types).
    pub fn leaves(&self) -> usize {
        match &self.split {
            None => 1,
            Some((_, children)) => children.values().map(TreeNode::leaves).sum(),
        }
    }

    /// The sub-type paths, e.g. `kernel=3/grouping=depthwise`.
    pub fn describe(&self) -> Vec<String> {
        match &self.split {
            None => vec![String::new()],
            Some((attribute, children)) => children
                .iter()
                .flat_map(|(value, child)| {
                    child.describe().into_iter().map(move |rest| {
                        let here = format!("{attribute}={value}");
                        if rest.is_empty() {
                            here
                        } else {
                            format!("{here}/{rest}")
                        }
                    })
                })
                .collect(),
        }
    }
}

/// The DeepWear-style predictor: one tree per layer class.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DtLr {
    /// Trees by class name.
    pub trees: BTreeMap<String, TreeNode>,
    /// Fixed cost of one plan run (µs), added once per predicted part.
    pub overhead_us: f64,
}

impl DtLr {
    /// Fits one tree per class present in `samples`.
    pub fn fit(samples: &[LayerSample]) -> DtLr {
        let mut trees = BTreeMap::new();
        for class in CLASSES {
            let rows: Vec<&LayerSample> = samples.iter().filter(|s| s.features.kind == class).collect();
            if rows.is_empty() {
                continue;
            }
            trees.insert(class.to_string(), grow(&rows, split_attributes(class), 0));
        }
        DtLr { trees, overhead_us: super::mean_overhead_us(samples) }
    }
}

impl UnitPredictor for DtLr {
    fn unit_us(&self, f: &LayerFeatures) -> Option<f64> {
        self.trees.get(&f.kind).map(|t| t.predict(f))
    }
}

impl super::LatencyModel for DtLr {
    fn name(&self) -> String {
        "dt-lr".into()
    }

    fn node_costs(&self, graph: &LayerGraph) -> NodeCosts {
        super::unit_costs(graph, self.overhead_us, |_, f| self.unit_us(f).unwrap_or(FLOOR_US))
    }
}

fn target(s: &LayerSample) -> f64 {
    s.target_us().max(FLOOR_US)
}

/// Fits `y ≈ c0 + Σ c_j x_j` minimizing Σ(ŷ − y)²/max(y, floor). Regressors that are
/// (numerically) linear combinations of earlier ones within these rows get a
/// zero coefficient, so a sub-type whose features move together still gets a
/// well-conditioned fit.
fn fit_linear(rows: &[&LayerSample]) -> LinearFit {
    let regressors = rows.first().map(|r| r.features.regressors().len()).unwrap_or(0);
    if let Some(fit) = try_fit(rows, regressors + 1) {
        return fit;
    }
    // The weighted optimum of a constant: Σ(w·y) / Σw.
    let (num, den) = rows.iter().fold((0.0, 0.0), |(n, d), r| {
        let w = 1.0 / target(r).max(WEIGHT_FLOOR_US);
        (n + w * target(r), d + w)
    });
    LinearFit { coefficients: vec![if den > 0.0 { num / den } else { FLOOR_US }] }
}

/// Least squares `min ‖X·b − y‖` for `X` given by its columns, by QR with
/// modified Gram–Schmidt: a column whose part orthogonal to the previous
/// ones is below `tol` × its norm is dropped (its coefficient is 0). `None`
/// when no column is left or there are fewer rows than kept columns.
fn least_squares(columns: &[Vec<f64>], y: &[f64], tol: f64) -> Option<Vec<f64>> {
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
    let mut q: Vec<Vec<f64>> = vec![]; // orthonormal basis
    let mut r: Vec<Vec<f64>> = vec![]; // r[k]: column k of R (kept columns only)
    let mut keep = vec![];
    for (j, col) in columns.iter().enumerate() {
        let norm = dot(col, col).sqrt();
        if norm <= 0.0 {
            continue;
        }
        let mut v = col.clone();
        let mut rk = Vec::with_capacity(q.len() + 1);
        for qi in &q {
            let p = dot(qi, &v);
            v.iter_mut().zip(qi).for_each(|(x, qx)| *x -= p * qx);
            rk.push(p);
        }
        let rest = dot(&v, &v).sqrt();
        if rest > tol * norm {
            v.iter_mut().for_each(|x| *x /= rest);
            rk.push(rest);
            q.push(v);
            r.push(rk);
            keep.push(j);
        }
    }
    if keep.is_empty() || y.len() < keep.len() {
        return None;
    }
    // z = Qᵀ·y, then back-substitution in R·b = z.
    let mut res = y.to_vec();
    let mut z = Vec::with_capacity(q.len());
    for qi in &q {
        let p = dot(qi, &res);
        res.iter_mut().zip(qi).for_each(|(x, qx)| *x -= p * qx);
        z.push(p);
    }
    let n = q.len();
    let mut b = vec![0.0; n];
    for i in (0..n).rev() {
        let s: f64 = (i + 1..n).map(|k| r[k][i] * b[k]).sum();
        b[i] = (z[i] - s) / r[i][i];
    }
    let mut out = vec![0.0; columns.len()];
    for (&j, v) in keep.iter().zip(b) {
        out[j] = v;
    }
    Some(out)
}

fn try_fit(rows: &[&LayerSample], cols: usize) -> Option<LinearFit> {
    let mut x = vec![vec![0.0; rows.len()]; cols];
    let mut y = vec![0.0; rows.len()];
    for (i, r) in rows.iter().enumerate() {
        let t = target(r);
        let w = 1.0 / t.max(WEIGHT_FLOOR_US).sqrt();
        x[0][i] = w;
        for (j, v) in r.features.regressors().iter().take(cols - 1).enumerate() {
            x[j + 1][i] = v * w;
        }
        y[i] = t * w;
    }
    // Scale columns to unit max so QR sees comparable magnitudes.
    let mut scale = vec![1.0; cols];
    for (col, s) in x.iter_mut().zip(&mut scale) {
        let m = col.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        if m > 0.0 {
            *s = m;
            col.iter_mut().for_each(|v| *v /= m);
        }
    }
    let fitted = least_squares(&x, &y, 1e-6)?;
    let coefficients: Vec<f64> = fitted.iter().zip(&scale).map(|(c, s)| c / s).collect();
    if coefficients.iter().any(|c| !c.is_finite()) {
        return None;
    }
    Some(LinearFit { coefficients })
}

/// Σ(ŷ − y)²/max(y, floor) of `fit` over `rows`: the criterion the fit minimizes.
fn weighted_sse(fit: &LinearFit, rows: &[&LayerSample]) -> f64 {
    rows.iter()
        .map(|r| {
            let y = target(r);
            (fit.predict(&r.features.regressors()) - y).powi(2) / y.max(WEIGHT_FLOOR_US)
        })
        .sum()
}

/// Cross-validated weighted SSE of one linear fit over `rows`.
fn cv_error(rows: &[&LayerSample]) -> f64 {
    if rows.len() < FOLDS * 2 {
        return weighted_sse(&fit_linear(rows), rows);
    }
    (0..FOLDS)
        .map(|k| {
            let train: Vec<&LayerSample> =
                rows.iter().enumerate().filter(|(i, _)| i % FOLDS != k).map(|(_, r)| *r).collect();
            let test: Vec<&LayerSample> =
                rows.iter().enumerate().filter(|(i, _)| i % FOLDS == k).map(|(_, r)| *r).collect();
            weighted_sse(&fit_linear(&train), &test)
        })
        .sum()
}

/// Rows grouped by a categorical value.
type Groups<'a> = BTreeMap<String, Vec<&'a LayerSample>>;

/// Groups rows by an attribute's value; values with too few rows are left
/// out (the parent's fit serves them).
fn partition<'a>(rows: &[&'a LayerSample], attribute: &str) -> Groups<'a> {
    let mut groups: BTreeMap<String, Vec<&LayerSample>> = BTreeMap::new();
    for r in rows {
        groups.entry(r.features.category(attribute)).or_default().push(r);
    }
    groups.retain(|_, g| g.len() >= MIN_LEAF);
    groups
}

fn grow(rows: &[&LayerSample], attributes: &[&str], depth: usize) -> TreeNode {
    let fit = fit_linear(rows);
    let mut node = TreeNode { fit, rows: rows.len(), split: None };
    if depth >= MAX_DEPTH || rows.len() < 2 * MIN_LEAF {
        return node;
    }
    let base = cv_error(rows);
    // Gains below rounding (exact fits on both sides) are not gains.
    let scale: f64 = rows.iter().map(|r| target(r).powi(2) / target(r).max(WEIGHT_FLOOR_US)).sum();
    let mut best: Option<(f64, &str, Groups)> = None;
    for &attribute in attributes {
        let groups = partition(rows, attribute);
        if groups.len() < 2 {
            continue;
        }
        // Rows in small groups keep the parent's fit.
        let leftover: Vec<&LayerSample> =
            rows.iter().filter(|r| !groups.contains_key(&r.features.category(attribute))).copied().collect();
        let err = groups.values().map(|g| cv_error(g)).sum::<f64>() + weighted_sse(&node.fit, &leftover);
        if err < base * (1.0 - MIN_GAIN)
            && base - err > 1e-9 * scale
            && best.as_ref().is_none_or(|(e, _, _)| err < *e)
        {
            best = Some((err, attribute, groups));
        }
    }
    if let Some((_, attribute, groups)) = best {
        let rest: Vec<&str> = attributes.iter().copied().filter(|a| *a != attribute).collect();
        let children = groups.into_iter().map(|(v, g)| (v, grow(&g, &rest, depth + 1))).collect();
        node.split = Some((attribute.to_string(), children));
    }
    node
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn least_squares_recovers_an_exact_fit_and_drops_a_dependent_column() {
        // y = 2 + 3·a, with a third column equal to 2·a (dependent).
        let a = [1.0, 2.0, 4.0, 7.0, 11.0];
        let cols = vec![vec![1.0; 5], a.to_vec(), a.iter().map(|v| 2.0 * v).collect()];
        let y: Vec<f64> = a.iter().map(|v| 2.0 + 3.0 * v).collect();
        let b = least_squares(&cols, &y, 1e-9).expect("fits");
        assert!((b[0] - 2.0).abs() < 1e-9 && (b[1] - 3.0).abs() < 1e-9 && b[2] == 0.0, "{b:?}");
        // Noisy: the residual is orthogonal to every column (normal equations).
        let y: Vec<f64> = y.iter().zip([0.3, -0.1, 0.2, -0.4, 0.1]).map(|(v, e)| v + e).collect();
        let b = least_squares(&cols[..2], &y, 1e-9).expect("fits");
        for c in &cols[..2] {
            let r: f64 = (0..5).map(|i| c[i] * (y[i] - b[0] * cols[0][i] - b[1] * cols[1][i])).sum();
            assert!(r.abs() < 1e-9, "residual·column = {r}");
        }
        assert_eq!(least_squares(&[vec![0.0; 3]], &[1.0, 2.0, 3.0], 1e-9), None);
    }

    fn sample(kind: &str, kernel: u32, macs: f64, latency_us: f64) -> LayerSample {
        LayerSample {
            features: LayerFeatures {
                kind: kind.into(),
                op: "Conv".into(),
                kernel,
                stride: 1,
                rank: 2,
                grouping: "regular".into(),
                fused: String::new(),
                macs,
                in_elems: macs / 100.0,
                out_elems: macs / 50.0,
                weight_elems: 10.0,
                channels_in: 1.0,
                channels_out: 1.0,
                rows: 1.0,
            },
            latency_us,
            overhead_us: 0.0,
            source: "test".into(),
            engine: Default::default(),
        }
    }

    #[test]
    fn splits_on_the_attribute_that_changes_the_slope() {
        // Kernel 1 runs at 1 µs per 1000 MACs, kernel 3 at 4 µs per 1000.
        let mut samples = vec![];
        for i in 1..=40 {
            let macs = 1000.0 * f64::from(i);
            samples.push(sample("conv", 1, macs, 2.0 + macs / 1000.0));
            samples.push(sample("conv", 3, macs, 2.0 + 4.0 * macs / 1000.0));
        }
        let model = DtLr::fit(&samples);
        let tree = &model.trees["conv"];
        assert_eq!(tree.split.as_ref().map(|(a, _)| a.as_str()), Some("kernel"));
        assert_eq!(tree.leaves(), 2);
        let k3 = sample("conv", 3, 50_000.0, 0.0);
        let p = model.unit_us(&k3.features).expect("conv tree");
        assert!((p - 202.0).abs() < 1e-6, "predicted {p}");
    }

    #[test]
    fn one_linear_law_needs_no_split() {
        let samples: Vec<LayerSample> = (1..=40)
            .flat_map(|i| {
                let macs = 500.0 * f64::from(i);
                [sample("conv", 1, macs, 1.0 + macs / 100.0), sample("conv", 3, macs, 1.0 + macs / 100.0)]
            })
            .collect();
        let model = DtLr::fit(&samples);
        assert!(model.trees["conv"].split.is_none());
    }
}
