//! Link encodings measured for the planner: on a calibration frame (the
//! app's first frame that could be offloaded), every tensor a cut could
//! send is encoded with each allowed encoding, giving its ratio and this
//! host's encode and decode speeds; the tensors later frames send update
//! their ratios (an EWMA), and the planner re-decides when one moves.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::encoding::{
    applies, decode, encode_with, round_trip_with, Allowed, Encoding, EncodingError, Widening,
};
use tandem_core::graph::Producer;
use tandem_plan::partition::{CodecOption, LinkCodecs};

use super::Accuracy;
use crate::{Cut, Error, Model, ModelError, Result, SplitExecutor, Values};

/// Weight of a new observation in a tensor's predicted ratio.
pub const RATIO_ALPHA: f64 = 0.3;

/// Measures `allowed`'s encodings on every tensor of `model` that a cut
/// could send, computed from `inputs`. `slowdown` is (wearable, handheld)
/// against this host. An encoding that does not shrink a tensor is left
/// out for it. Lossy ones are listed here; whether they keep a cut within
/// the accuracy budget is checked per cut ([`within_budget`]). Inputs with
/// a `widenings` entry also try the sensor encodings (u8/i16, and JPEG when
/// lossy); one whose values are not exactly sensor values leaves the
/// narrow ones out.
pub fn calibrate(
    model: &Model,
    inputs: &Values,
    allowed: Allowed,
    slowdown: (f64, f64),
    widenings: &BTreeMap<String, Widening>,
) -> Result<LinkCodecs> {
    let g = model.graph();
    let encodings: Vec<Encoding> =
        Encoding::ALL.into_iter().filter(|e| *e != Encoding::Raw && e.allowed_by(allowed)).collect();
    let mut per_tensor = vec![vec![]; g.tensors().len()];
    if encodings.is_empty() {
        return Ok(LinkCodecs { per_tensor, slowdown });
    }
    let taps: Vec<usize> =
        (0..g.tensors().len()).filter(|&t| matches!(g.tensor(t).producer, Producer::Node(_))).collect();
    let computed = apart(|| tandem_core::split::tapped_plan(model, &taps)?.run(g, inputs))?;
    // Per encoding: raw bytes and seconds, encoding and decoding, over every tensor.
    let mut totals = vec![(0u64, Duration::ZERO, Duration::ZERO); encodings.len()];
    let mut ratios = vec![vec![]; g.tensors().len()];
    for (t, info) in g.tensors().iter().enumerate() {
        let value = match info.producer {
            Producer::Const => continue,
            Producer::Input(_) => inputs.get(&info.name),
            Producer::Node(_) => computed.get(&info.name),
        };
        let Some(value) = value else { continue };
        let widening = widenings.get(&info.name).filter(|_| matches!(info.producer, Producer::Input(_)));
        for (k, &e) in encodings.iter().enumerate() {
            if !applies(e, value) {
                continue;
            }
            if e.needs_widening() && !widening.is_some_and(|w| e.fits(w, value.shape())) {
                continue;
            }
            let bad = |source| Error::Encoding { tensor: info.name.clone(), encoding: e, source };
            let started = Instant::now();
            let packed = match encode_with(value, e, widening) {
                Ok(p) => p,
                Err(EncodingError::NotExact { index, value: v, .. }) => {
                    tracing::warn!(input = %info.name, index, value = v, "{e}: not the card's sensor values; not used");
                    continue;
                }
                Err(err) => return Err(bad(err)),
            };
            let encoded = started.elapsed();
            let started = Instant::now();
            decode(value.datum_type(), value.shape(), &packed).map_err(bad)?;
            let decoded = started.elapsed();
            let raw = value.as_bytes().len() as u64;
            totals[k].0 += raw;
            totals[k].1 += encoded;
            totals[k].2 += decoded;
            let ratio = raw as f64 / packed.bytes.len().max(1) as f64;
            if ratio > 1.0 {
                ratios[t].push((k, ratio));
            }
        }
    }
    let speed = |bytes: u64, d: Duration| bytes as f64 / d.as_secs_f64().max(1e-9);
    for (t, found) in ratios.into_iter().enumerate() {
        per_tensor[t] = found
            .into_iter()
            .map(|(k, ratio)| CodecOption {
                label: encodings[k].name().into(),
                ratio,
                encode_bytes_per_s: speed(totals[k].0, totals[k].1),
                decode_bytes_per_s: speed(totals[k].0, totals[k].2),
                lossless: encodings[k].is_lossless() && !encodings[k].needs_widening(),
            })
            .collect();
    }
    Ok(LinkCodecs { per_tensor, slowdown })
}

/// The frame lossy encodings are measured on, and its unsplit outputs.
pub struct Calibration {
    /// The frame's inputs.
    pub inputs: Values,
    /// The unsplit run's model outputs on them.
    pub outputs: Values,
}

impl Calibration {
    /// Runs `model` unsplit on `inputs` (on a thread of its own: [`apart`]).
    pub fn new(model: &Model, inputs: &Values) -> Result<Calibration> {
        let g = model.graph();
        let all = apart(|| tandem_core::split::full_plan(model)?.run(g, inputs))?;
        let outputs = tandem_core::split::model_outputs(g, &all)?;
        Ok(Calibration { inputs: inputs.clone(), outputs })
    }
}

/// How far `got` is from `want` under `accuracy`: the largest relative
/// error (max |a − b| over max |a|) for [`Accuracy::MaxRelError`], the
/// share of rows (over the last axis) whose argmax changed for
/// [`Accuracy::Argmax`].
pub fn error_of(want: &tandem_core::Tensor, got: &tandem_core::Tensor, accuracy: Accuracy) -> Result<f64> {
    let (a, b) = (tandem_core::check::as_f32(want)?, tandem_core::check::as_f32(got)?);
    if a.len() != b.len() {
        return Ok(f64::INFINITY);
    }
    Ok(match accuracy {
        Accuracy::MaxRelError(_) => {
            let scale = a.iter().fold(0f32, |m, v| m.max(v.abs()));
            let worst = a.iter().zip(&b).fold(0f32, |m, (x, y)| m.max((x - y).abs()));
            let e = if scale > 0.0 { f64::from(worst / scale) } else { f64::from(worst) };
            if e.is_nan() {
                f64::INFINITY
            } else {
                e
            }
        }
        Accuracy::Argmax => {
            let row = want.shape().last().copied().unwrap_or(1).max(1);
            let argmax = |v: &[f32]| {
                v.iter()
                    .enumerate()
                    .fold((0, f32::NEG_INFINITY), |best, (i, &x)| if x > best.1 { (i, x) } else { best })
                    .0
            };
            let changed = a.chunks(row).zip(b.chunks(row)).filter(|(x, y)| argmax(x) != argmax(y)).count();
            changed as f64 / (a.len() / row).max(1) as f64
        }
    })
}

/// The frames' errors under `accuracy`, each the worst over the model's
/// outputs of its delivered `outputs` against the model run unsplit on its
/// inputs (one plan of the whole model for all of them): what lossy
/// encodings cost each frame (0 when it crossed bit-exact).
pub fn frame_errors<'a>(
    model: &Model,
    frames: impl IntoIterator<Item = (Values, &'a crate::tensor::Outputs)>,
    accuracy: Accuracy,
) -> Result<Vec<f64>> {
    let g = model.graph();
    let whole = tandem_core::split::full_plan(model)?;
    let mut errors = vec![];
    for (inputs, outputs) in frames {
        let reference = tandem_core::split::model_outputs(g, &whole.run(g, &inputs)?)?;
        let mut worst = 0f64;
        for (name, want) in &reference {
            let got = outputs.get(name).ok_or_else(|| ModelError::MissingTensor(name.clone()))?;
            worst = worst.max(error_of(want, got, accuracy)?);
        }
        errors.push(worst);
    }
    Ok(errors)
}

/// Whether `cut`, sending its crossing tensors in `encodings` (in
/// `up_tensors` order), keeps every output of the calibration frame within
/// `accuracy`; and the worst error seen.
pub fn within_budget(
    model: &Model,
    executor: &SplitExecutor,
    cut: &Cut,
    encodings: &[Encoding],
    calibration: &Calibration,
    accuracy: Accuracy,
    widenings: &BTreeMap<String, Widening>,
) -> Result<(bool, f64)> {
    let g = model.graph();
    let plan = executor.plan(cut)?;
    let up = plan.run_prefix(g, &calibration.inputs)?;
    let mut sent = up.clone();
    for (&t, &e) in cut.up_tensors().iter().zip(encodings) {
        let name = &g.tensor(t).name;
        let v = up.get(name).ok_or_else(|| ModelError::MissingTensor(name.clone()))?;
        if e.is_lossless() || !applies(e, v) {
            continue;
        }
        let (back, _) = round_trip_with(v, e, widenings.get(name)).map_err(|source| Error::Encoding {
            tensor: name.clone(),
            encoding: e,
            source,
        })?;
        sent.insert(name.clone(), back.into());
    }
    let down = plan.run_suffix(g, &sent)?;
    let mut worst = 0f64;
    for (name, want) in &calibration.outputs {
        let got =
            down.get(name).or_else(|| up.get(name)).ok_or_else(|| ModelError::MissingTensor(name.clone()))?;
        worst = worst.max(error_of(want, got, accuracy)?);
    }
    Ok((accuracy.holds(worst), worst))
}

/// Runs `work` (a plan built and run once) on a thread of its own, and
/// waits for it: what the run leaves in its thread's locals (tract keeps a
/// run's matrix-multiply scratch there, for the next plan that thread
/// runs) goes with the thread. Run on the session's thread, the
/// calibration left the frames run whole there about 6% slower on the
/// emulated watch (the face detector's base cell, by hand: see
/// docs/results.md); which part of it did is not established. Without a
/// thread to be had, it runs here.
fn apart<T: Send, E: Send>(
    work: impl FnOnce() -> std::result::Result<T, E> + Send,
) -> std::result::Result<T, E> {
    let work = std::sync::Mutex::new(Some(work));
    let take = || work.lock().unwrap_or_else(|e| e.into_inner()).take();
    let ran = std::thread::scope(|scope| {
        let thread = std::thread::Builder::new().name("tandem-calibrate".into());
        match thread.spawn_scoped(scope, || take().map(|w| w())).map(|t| t.join()) {
            Ok(Ok(ran)) => ran,
            Ok(Err(panic)) => std::panic::resume_unwind(panic),
            Err(_) => None,
        }
    });
    // No thread to be had: here, then.
    ran.or_else(|| take().map(|w| w())).unwrap_or_else(|| unreachable!("the work ran nowhere"))
}
