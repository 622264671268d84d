//! Checking split execution against the unsplit model: every crossing tensor
//! and every output of prefix-then-suffix is compared with the same tensor of
//! an unsplit run.
//!
//! Comparing the crossing tensors, not just the outputs, is what makes the
//! check hard to fool: a model whose outputs barely depend on its input (the
//! ONNX "light" models, whose weights are constants) would hide a wrongly
//! wired split if only outputs were compared.
//!
//! Two rules judge a tensor: the float tolerance ([`TOLERANCE`], relative)
//! for every tensor, and, for a tensor of a quantized model that has a
//! quantum ([`crate::quanta`]: int8 and uint8 tensors, a `QuantizeLinear`'s
//! input, a `DequantizeLinear`'s output), at most one quantum. A tensor
//! passes when either rule passes it; [`Diff::rule`] says which did, and the
//! report lists the tensors that only the quanta rule passed.

use std::path::Path;

use prost::Message;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use tract_onnx::pb;
use tract_onnx::prelude::*;

use crate::cut::Cut;
use crate::engine::{Engine, Engines};
use crate::error::{Error, Result, TractContext};
use crate::graph::{Producer, TensorId};
use crate::model::Model;
use crate::split::{full_plan, tapped_plan, tapped_plan_on, Sides, SplitPlan, Values};

/// Relative tolerance: a tensor matches when its max abs difference is at
/// most `TOLERANCE × max(1, max |reference|)`.
pub const TOLERANCE: f32 = 1e-4;

/// Relative slack on one quantum, for the float rounding of a one-step
/// difference between two dequantized values.
pub const QUANTUM_SLACK: f32 = 1e-3;

/// The outcome of a split check, printed as the CLI's last JSON line.
#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    /// The model's name.
    pub model: String,
    /// How many cuts were checked.
    pub cuts_checked: usize,
    /// How many tensors were compared (crossing and outputs, over all cuts).
    pub tensors_compared: usize,
    /// The largest absolute difference seen.
    pub max_abs_diff: f32,
    /// The largest difference relative to its tensor's tolerance (≤ 1 passes).
    pub worst_tolerance_ratio: f32,
    /// Whether every tensor matched.
    pub ok: bool,
    /// One line per mismatch.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mismatches: Vec<String>,
    /// How many compared tensors had a quantum (were judged in quanta as
    /// well as in float tolerance).
    pub judged_in_quanta: usize,
    /// One line per tensor outside the float tolerance that the quanta rule
    /// passed (within one step of its scale).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub within_a_quantum: Vec<String>,
    /// The unsplit run's model outputs, the reference every cut was held to.
    #[serde(skip)]
    pub reference_outputs: Values,
}

impl CheckReport {
    /// Two checks of one model (on other engines, say) as one: every cut
    /// and tensor counted, the worst of each, ok when both are.
    pub fn merge(mut self, other: CheckReport) -> CheckReport {
        self.cuts_checked += other.cuts_checked;
        self.tensors_compared += other.tensors_compared;
        self.max_abs_diff = self.max_abs_diff.max(other.max_abs_diff);
        self.worst_tolerance_ratio = self.worst_tolerance_ratio.max(other.worst_tolerance_ratio);
        self.ok &= other.ok;
        self.mismatches.extend(other.mismatches);
        self.judged_in_quanta += other.judged_in_quanta;
        self.within_a_quantum.extend(other.within_a_quantum);
        self
    }
}

/// Which rule judged a tensor.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// The float tolerance: `max_abs ≤ TOLERANCE × max(1, max |reference|)`.
    Float,
    /// At most one quantum: `max_abs ≤ quantum` (the tensor's scale; 1 for
    /// int8 and uint8 tensors).
    Quanta {
        /// One step of the tensor's scale.
        quantum: f32,
    },
    /// Across engines: the float tolerance plus `allowance`, the most the
    /// engines' own unsplit runs differ on this tensor (what running on
    /// another engine changes, not what splitting does).
    Engines {
        /// The engines' own largest difference on the tensor.
        allowance: f32,
    },
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rule::Float => write!(f, "float tolerance {TOLERANCE} relative"),
            Rule::Quanta { quantum } => write!(f, "one quantum ({quantum})"),
            Rule::Engines { allowance } => {
                write!(f, "float tolerance {TOLERANCE} relative plus the engines' own unsplit difference {allowance}")
            }
        }
    }
}

/// How two tensors differ.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Diff {
    /// Max absolute difference (infinite on a shape or type mismatch).
    pub max_abs: f32,
    /// The difference over what the rule allows (≤ 1 passes): under the
    /// float rule `max_abs / (TOLERANCE × max(1, max |reference|))`, under
    /// the quanta rule `max_abs / quantum`.
    pub tolerance_ratio: f32,
    /// The rule that judged it: the float rule unless the tensor has a
    /// quantum and only the quanta rule passes it (or neither does, and
    /// the quanta rule is the looser).
    pub rule: Rule,
}

impl Diff {
    /// Whether the difference is within tolerance.
    pub fn ok(&self) -> bool {
        self.tolerance_ratio <= 1.0
    }

    /// This difference judged across engines whose own unsplit runs differ
    /// on the tensor by up to `allowance`: the float rule when it passes,
    /// else the float tolerance widened by `allowance`.
    pub fn across_engines(self, allowance: f32) -> Diff {
        if self.ok() || !self.max_abs.is_finite() || allowance <= 0.0 || self.rule != Rule::Float {
            return self;
        }
        // The float rule's own allowance, from its ratio.
        let float = self.max_abs / self.tolerance_ratio;
        Diff {
            tolerance_ratio: self.max_abs / (float + allowance),
            rule: Rule::Engines { allowance },
            ..self
        }
    }

    /// This difference judged also in quanta of `quantum`: the float rule
    /// when it passes, else the quanta rule when it is the looser.
    pub fn in_quanta(self, quantum: Option<f32>) -> Diff {
        let Some(quantum) = quantum.filter(|q| q.is_finite() && *q > 0.0) else { return self };
        if self.ok() || !self.max_abs.is_finite() {
            return self;
        }
        // A difference of one step, computed in float from two dequantized
        // values, may come out a rounding above the scale itself.
        let ratio = self.max_abs / (quantum * (1.0 + QUANTUM_SLACK));
        if ratio < self.tolerance_ratio {
            Diff { tolerance_ratio: ratio, rule: Rule::Quanta { quantum }, ..self }
        } else {
            self
        }
    }
}

/// Compares `got` with `reference` element by element.
pub fn diff(reference: &Tensor, got: &Tensor) -> Result<Diff> {
    let mismatch = Diff { max_abs: f32::INFINITY, tolerance_ratio: f32::INFINITY, rule: Rule::Float };
    if reference.shape() != got.shape() {
        return Ok(mismatch);
    }
    let mut max_abs = 0f32;
    let mut max_ref = 0f32;
    let (r, g) = (as_f32(reference)?, as_f32(got)?);
    for (a, b) in r.iter().zip(g.iter()) {
        if a.is_nan() != b.is_nan() {
            return Ok(mismatch);
        }
        max_abs = max_abs.max((a - b).abs());
        max_ref = max_ref.max(a.abs());
    }
    Ok(Diff { max_abs, tolerance_ratio: max_abs / (TOLERANCE * max_ref.max(1.0)), rule: Rule::Float })
}

/// The elements of `t` as f32, for comparisons.
pub fn as_f32(t: &Tensor) -> Result<Vec<f32>> {
    let t = t.cast_to::<f32>().tract(|| "comparing tensors".into())?;
    Ok(t.to_plain_array_view::<f32>().tract(|| "comparing tensors".into())?.iter().copied().collect())
}

/// Deterministic random inputs for every model input.
///
/// Floats are uniform in [0, 1); integers are uniform in [0, max) where max
/// comes from the model's `tandem.input.<name>.max` metadata (default 2), so
/// that token ids stay inside an embedding table.
pub fn random_inputs(model: &Model, seed: u64) -> Result<Values> {
    let g = model.graph();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut values = Values::new();
    for &t in g.inputs() {
        let info = g.tensor(t);
        let n: usize = info.shape.iter().product();
        let max: i64 = model
            .metadata(&format!("tandem.input.{}.max", info.name))
            .and_then(|m| m.parse().ok())
            .unwrap_or(2)
            .max(1);
        let tensor = match info.dtype {
            DatumType::F32 => {
                let data: Vec<f32> = (0..n).map(|_| rng.gen::<f32>()).collect();
                Tensor::from_shape(&info.shape, &data)
            }
            DatumType::F64 => {
                let data: Vec<f64> = (0..n).map(|_| rng.gen::<f64>()).collect();
                Tensor::from_shape(&info.shape, &data)
            }
            DatumType::I64 => {
                let data: Vec<i64> = (0..n).map(|_| rng.gen_range(0..max)).collect();
                Tensor::from_shape(&info.shape, &data)
            }
            DatumType::I32 => {
                let data: Vec<i32> =
                    (0..n).map(|_| rng.gen_range(0..max.min(i32::MAX as i64) as i32)).collect();
                Tensor::from_shape(&info.shape, &data)
            }
            DatumType::Bool => {
                let data: Vec<bool> = (0..n).map(|_| rng.gen()).collect();
                Tensor::from_shape(&info.shape, &data)
            }
            other => {
                return Err(Error::TensorMismatch {
                    name: info.name.clone(),
                    expected: "an f32, f64, i64, i32 or bool input".into(),
                    got: format!("{other:?}"),
                })
            }
        }
        .tract(|| format!("making input '{}'", info.name))?;
        values.insert(info.name.clone(), tensor.into_tvalue());
    }
    Ok(values)
}

/// Reads a serialized ONNX `TensorProto` (e.g. `*_input_0.pb`).
pub fn load_tensor_pb(path: &Path) -> Result<Tensor> {
    let bytes = std::fs::read(path).map_err(|source| Error::Io { path: path.to_path_buf(), source })?;
    let proto = pb::TensorProto::decode(bytes.as_slice()).map_err(|e| Error::NotOnnx {
        origin: Some(path.display().to_string()),
        reason: format!("not a TensorProto: {e}"),
    })?;
    tract_onnx::tensor::load_tensor(&tract_onnx::data_resolver::FopenDataResolver, &proto, None)
        .tract(|| format!("decoding tensor {}", path.display()))
}

/// Reads a tensor file: NumPy `.npy` (by its magic bytes) or a serialized
/// ONNX `TensorProto` (`.pb`).
pub fn load_tensor(path: &Path) -> Result<Tensor> {
    let mut head = [0u8; 6];
    let is_npy = std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head))
        .is_ok_and(|()| crate::npy::is_npy(&head));
    if is_npy {
        crate::npy::read(path)
    } else {
        load_tensor_pb(path)
    }
}

/// Inputs from `--input` arguments: none or `random` (random inputs from
/// `seed`), one `FILE` for a single-input model, or `NAME=FILE` for each
/// input. A file is `.npy` or a `TensorProto` `.pb`; its type and shape must
/// be the input's.
pub fn inputs_from_specs(model: &Model, specs: &[String], seed: u64) -> Result<Values> {
    let bad = |spec: &str, reason: String| Error::BadInput { spec: spec.to_string(), reason };
    if specs.is_empty() || specs == ["random"] {
        return random_inputs(model, seed);
    }
    let g = model.graph();
    let names: Vec<&str> = g.inputs().iter().map(|&t| g.tensor(t).name.as_str()).collect();
    let mut values = Values::new();
    for spec in specs {
        let (name, file) = match spec.split_once('=') {
            Some((name, file)) => (name.to_string(), file),
            None if specs.len() == 1 && names.len() == 1 => (names[0].to_string(), spec.as_str()),
            None => {
                return Err(bad(
                    spec,
                    format!("the model has {} inputs: give NAME=FILE for each", names.len()),
                ))
            }
        };
        if !names.contains(&name.as_str()) {
            return Err(Error::UnknownInput { name, known: names.iter().map(|n| n.to_string()).collect() });
        }
        let tensor = load_tensor(Path::new(file))?;
        let info = g.tensor(g.inputs()[names.iter().position(|n| *n == name).unwrap_or(0)]);
        if tensor.datum_type() != info.dtype || tensor.shape() != info.shape.as_slice() {
            return Err(Error::TensorMismatch {
                name,
                expected: format!("{:?} {:?}", info.dtype, info.shape),
                got: format!("{:?} {:?} (from {file})", tensor.datum_type(), tensor.shape()),
            });
        }
        if values.insert(name.clone(), tensor.into_tvalue()).is_some() {
            return Err(bad(spec, format!("input '{name}' is given twice")));
        }
    }
    if let Some(missing) = names.iter().find(|n| !values.contains_key(**n)) {
        return Err(bad(&specs.join(" "), format!("no file for input '{missing}'")));
    }
    Ok(values)
}

/// One output compared with a reference file (`split-check --expected`).
#[derive(Clone, Debug, Serialize)]
pub struct ExpectedCheck {
    /// The output.
    pub output: String,
    /// The reference file.
    pub file: String,
    /// The ONNX backend-test rule's worst ratio ([`onnx_closeness`] at
    /// rtol 1e-3, atol 1e-7; ≤ 1 passes).
    pub worst_ratio: f32,
    /// The largest difference.
    pub max_abs: f32,
    /// The reference's largest magnitude.
    pub scale: f32,
    /// `max_abs / scale` (0 when both are 0).
    pub max_abs_over_scale: f32,
}

/// Compares `outputs` with reference files: `FILE` for the first output,
/// or `NAME=FILE` for any (`.npy` or a `TensorProto` `.pb`).
pub fn check_expected(model: &Model, specs: &[String], outputs: &Values) -> Result<Vec<ExpectedCheck>> {
    let g = model.graph();
    let first = g.outputs().first().map(|&t| g.tensor(t).name.clone()).unwrap_or_default();
    let mut checks = Vec::new();
    for spec in specs {
        let (name, file) = match spec.split_once('=') {
            Some((name, file)) => (name.to_string(), file),
            None => (first.clone(), spec.as_str()),
        };
        let got = outputs.get(&name).ok_or_else(|| Error::UnknownTensor(name.clone()))?;
        let want = load_tensor(Path::new(file))?;
        let worst_ratio = onnx_closeness(&want, got, 1e-3, 1e-7)?;
        let scale = as_f32(&want)?.iter().fold(0f32, |m, x| m.max(x.abs()));
        let d = diff(&want, got)?;
        let max_abs_over_scale = if d.max_abs == 0.0 { 0.0 } else { d.max_abs / scale };
        checks.push(ExpectedCheck {
            output: name,
            file: file.to_string(),
            worst_ratio,
            max_abs: d.max_abs,
            scale,
            max_abs_over_scale,
        });
    }
    Ok(checks)
}

/// Inputs for a single-input model from a serialized `TensorProto` file.
pub fn inputs_from_pb(model: &Model, path: &Path) -> Result<Values> {
    let g = model.graph();
    let first = g.inputs().first().ok_or_else(|| Error::MissingTensor("a model input".into()))?;
    let mut values = Values::new();
    values.insert(g.tensor(*first).name.clone(), load_tensor_pb(path)?.into());
    Ok(values)
}

/// Checks `cuts` of `model` on `inputs`: for each cut, the crossing tensors
/// and the outputs of prefix-then-suffix against an unsplit run.
pub fn check_cuts(model: &Model, cuts: &[Cut], inputs: &Values) -> Result<CheckReport> {
    check_cuts_on(model, cuts, inputs, Engines::TRACT)
}

/// [`check_cuts`] with the prefix on `engines.prefix` and the suffix on
/// `engines.suffix`; the reference is still tract's unsplit run, and the
/// tolerance the same [`TOLERANCE`] (onnxruntime against tract stays
/// within it on every model checked: `tests/tests/engines.rs`).
pub fn check_cuts_on(model: &Model, cuts: &[Cut], inputs: &Values, engines: Engines) -> Result<CheckReport> {
    check_cuts_over_on(model, cuts, inputs, &mut |_, t| Ok(t.clone()), true, engines)
}

/// What crosses the link in a check: each crossing tensor (by name) goes
/// through it before the suffix runs (an encoding's round trip).
pub type LinkFn<'a> = dyn FnMut(&str, &TValue) -> Result<TValue> + 'a;

/// [`check_cuts`] with every crossing tensor sent through `link` before
/// the suffix runs. With `exact`, a tensor that comes out of the link with
/// other bytes is a mismatch (lossless encodings); without, only the
/// outputs' difference from the unsplit run is measured and reported, and
/// the check does not fail on it (lossy encodings).
pub fn check_cuts_over(
    model: &Model,
    cuts: &[Cut],
    inputs: &Values,
    link: &mut LinkFn<'_>,
    exact: bool,
) -> Result<CheckReport> {
    check_cuts_over_on(model, cuts, inputs, link, exact, Engines::TRACT)
}

/// [`check_cuts_over`] with each half on its engine ([`check_cuts_on`]).
pub fn check_cuts_over_on(
    model: &Model,
    cuts: &[Cut],
    inputs: &Values,
    link: &mut LinkFn<'_>,
    exact: bool,
    engines: Engines,
) -> Result<CheckReport> {
    let g = model.graph();
    let full = full_plan(model)?;
    let reference = full.run(g, inputs)?;
    let mut taps: Vec<TensorId> = vec![];
    for cut in cuts {
        for &t in cut.up_tensors() {
            if !taps.contains(&t) {
                taps.push(t);
            }
        }
    }
    let tapped = tapped_plan(model, &taps)?.run(g, inputs)?;
    // A half on another engine than tract's is judged with the engines'
    // own unsplit difference on each tensor allowed beside the tolerance:
    // its tapped run on each such engine against tract's.
    let mut allowances: std::collections::HashMap<String, f32> = Default::default();
    for engine in [engines.prefix, engines.suffix] {
        if engine == Engine::Tract {
            continue;
        }
        let own = tapped_plan_on(model, &taps, engine)?.run(g, inputs)?;
        for (name, t) in &tapped {
            let d = diff(t, lookup(&own, name)?)?.max_abs;
            let a = allowances.entry(name.clone()).or_default();
            *a = a.max(d);
        }
    }
    let allowance = |name: &str| allowances.get(name).copied().unwrap_or(0.0);
    let mut report = CheckReport {
        model: model.name(),
        cuts_checked: 0,
        tensors_compared: 0,
        max_abs_diff: 0.0,
        worst_tolerance_ratio: 0.0,
        ok: true,
        mismatches: vec![],
        judged_in_quanta: 0,
        within_a_quantum: vec![],
        reference_outputs: Values::new(),
    };
    let quanta = crate::quanta::quanta(model);
    let record = |report: &mut CheckReport, what: String, name: &str, d: Diff, allowance: f32| {
        let quantum = quanta.get(name).copied();
        let d = d.in_quanta(quantum).across_engines(allowance);
        report.tensors_compared += 1;
        report.judged_in_quanta += usize::from(quantum.is_some());
        report.max_abs_diff = report.max_abs_diff.max(d.max_abs);
        report.worst_tolerance_ratio = report.worst_tolerance_ratio.max(d.tolerance_ratio);
        if !d.ok() && (exact || !what.contains(": output ")) {
            report.ok = false;
            report.mismatches.push(format!("{what}: max abs diff {} (judged by {})", d.max_abs, d.rule));
        } else if d.ok() && matches!(d.rule, Rule::Quanta { .. }) {
            report.within_a_quantum.push(format!("{what}: max abs diff {} (within {})", d.max_abs, d.rule));
        }
    };
    // The tapped run must itself agree with the plain one.
    for &t in g.outputs() {
        let name = &g.tensor(t).name;
        let (r, v) = (lookup(&reference, name)?, lookup(&tapped, name)?);
        record(&mut report, format!("tapped output '{name}'"), name, diff(r, v)?, 0.0);
    }
    for cut in cuts {
        let plan = SplitPlan::build_on(model, cut, Sides::Both, engines)?;
        let up = plan.run_prefix(g, inputs)?;
        for &t in cut.up_tensors() {
            let name = &g.tensor(t).name;
            let reference = match g.tensor(t).producer {
                Producer::Input(_) => lookup(inputs, name)?,
                _ => lookup(&tapped, name)?,
            };
            let d = diff(reference, lookup(&up, name)?)?;
            record(&mut report, format!("cut {}: crossing '{name}'", cut.key()), name, d, allowance(name));
        }
        let crossing: Vec<&str> = cut.up_tensors().iter().map(|&t| g.tensor(t).name.as_str()).collect();
        let mut sent = Values::new();
        for (name, t) in &up {
            if !crossing.contains(&name.as_str()) {
                sent.insert(name.clone(), t.clone());
                continue;
            }
            let crossed = link(name, t)?;
            if exact && crossed.as_bytes() != t.as_bytes() {
                report.ok = false;
                report.mismatches.push(format!("cut {}: '{name}' changed on the link", cut.key()));
            }
            sent.insert(name.clone(), crossed);
        }
        let down = plan.run_suffix(g, &sent)?;
        for &t in g.outputs() {
            let name = &g.tensor(t).name;
            let got =
                down.get(name).or_else(|| up.get(name)).ok_or_else(|| Error::MissingTensor(name.clone()))?;
            let d = diff(lookup(&reference, name)?, got)?;
            record(&mut report, format!("cut {}: output '{name}'", cut.key()), name, d, allowance(name));
        }
        report.cuts_checked += 1;
    }
    report.reference_outputs = reference;
    Ok(report)
}

/// ONNX backend-test closeness: `|got − expected| ≤ atol + rtol·|expected|`
/// everywhere. Returns the worst `|got − expected| / (atol + rtol·|expected|)`
/// (≤ 1 passes), infinite on a shape mismatch.
pub fn onnx_closeness(expected: &Tensor, got: &Tensor, rtol: f32, atol: f32) -> Result<f32> {
    if expected.shape() != got.shape() {
        return Ok(f32::INFINITY);
    }
    let (e, g) = (as_f32(expected)?, as_f32(got)?);
    let mut worst = 0f32;
    for (a, b) in e.iter().zip(g.iter()) {
        let r = (a - b).abs() / (atol + rtol * a.abs());
        worst = if r.is_nan() { f32::INFINITY } else { worst.max(r) };
    }
    Ok(worst)
}

fn lookup<'a>(values: &'a Values, name: &str) -> Result<&'a TValue> {
    values.get(name).ok_or_else(|| Error::MissingTensor(name.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_is_relative_to_the_reference_scale() {
        let a = Tensor::from_shape(&[3], &[1000f32, 0.0, -5.0]).expect("tensor");
        let b = Tensor::from_shape(&[3], &[1000.05f32, 0.0, -5.0]).expect("tensor");
        assert!(diff(&a, &b).expect("diff").ok(), "0.05 on a scale of 1000 is within 1e-4");
        let c = Tensor::from_shape(&[3], &[1000f32, 0.2, -5.0]).expect("tensor");
        assert!(!diff(&a, &c).expect("diff").ok(), "0.2 on a scale of 1000 is not");
        let d = Tensor::from_shape(&[1, 3], &[1000f32, 0.0, -5.0]).expect("tensor");
        assert!(!diff(&a, &d).expect("diff").ok(), "shapes differ");
    }

    /// Across engines, a difference past the float tolerance passes when
    /// the engines' own unsplit runs differ as much, and says so; a split
    /// that adds more than that still fails.
    #[test]
    fn across_engines_the_engines_own_difference_is_allowed_and_no_more() {
        let a = Tensor::from_shape(&[2], &[1000f32, 0.0]).expect("tensor");
        let b = Tensor::from_shape(&[2], &[1000.25f32, 0.0]).expect("tensor");
        let d = diff(&a, &b).expect("diff");
        assert!(!d.ok(), "0.25 on a scale of 1000 is outside 1e-4");
        let across = d.across_engines(0.2);
        assert!(across.ok(), "{across:?}");
        assert_eq!(across.rule, Rule::Engines { allowance: 0.2 });
        assert!(!d.across_engines(0.1).ok(), "0.1 + 0.1 allowed, 0.25 found");
        assert_eq!(d.across_engines(0.0), d, "no allowance: the float rule");
    }

    #[test]
    fn a_quantized_tensor_passes_within_one_quantum_and_says_so() {
        let a = Tensor::from_shape(&[3], &[6.9f32, 0.0, -1.0]).expect("tensor");
        let b = Tensor::from_shape(&[3], &[6.9f32 - 0.17, 0.0, -1.0]).expect("tensor");
        let d = diff(&a, &b).expect("diff");
        assert!(!d.ok() && d.rule == Rule::Float, "0.17 on a scale of 6.9 is far outside 1e-4");
        assert_eq!(d.in_quanta(None), d, "no quantum: the float rule stands");
        let q = d.in_quanta(Some(0.1728));
        assert!(q.ok() && q.rule == Rule::Quanta { quantum: 0.1728 }, "one step of 0.1728: {q:?}");
        let two = d.in_quanta(Some(0.08));
        assert!(!two.ok(), "two steps of 0.08 are not one: {two:?}");
        let exact = diff(&a, &a).expect("diff");
        assert_eq!(exact.in_quanta(Some(0.1)).rule, Rule::Float, "a pass under the float rule stays one");
    }
}
