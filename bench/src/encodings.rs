//! `tandem-bench encodings`: what each link encoding does to the tensors
//! that cross at a model's representative cuts (the model input, and the
//! cuts holding about 25%, 50% and 75% of its FLOPs), on real inputs where
//! the model has them: bytes, encode and decode speed (this host, median
//! of runs), and the error of the lossy ones. Real models whose card gives
//! an input a sensor type (u8 pixels, i16 PCM) also try the sensor
//! encodings on it (its pixels or samples, and JPEG). One JSON line per
//! (model, cut, tensor, encoding), then one summary line per model.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use serde_json::json;
use tandem::check::{as_f32, inputs_from_pb, load_tensor_pb, random_inputs};
use tandem::encoding::{applies, decode, encode_with, Encoding, EncodingError, Widening};
use tandem::graph::Producer;
use tandem::profile::median;
use tandem::split::tapped_plan;
use tandem::{Cut, InputShapes, Model, TValue, Values};

/// A model and the inputs it is measured on.
struct Subject {
    model: Model,
    inputs: Values,
    real_input: bool,
    /// Inputs that are a sensor's values, from the model's card.
    widenings: BTreeMap<String, Widening>,
}

/// The zoo (random inputs), the light models (their shipped ramp input;
/// their weights are one constant, so their tensors compress far better
/// than real ones) and the real models (their real inputs); or the given
/// files with random inputs.
fn subjects(models: Vec<PathBuf>, shapes: &InputShapes) -> anyhow::Result<Vec<Subject>> {
    let mut out = vec![];
    if !models.is_empty() {
        for path in models {
            let model = Model::from_path(&path, shapes).with_context(|| path.display().to_string())?;
            let inputs = random_inputs(&model, 5)?;
            out.push(Subject { model, inputs, real_input: false, widenings: BTreeMap::new() });
        }
        return Ok(out);
    }
    let paths = tandem_models::ensure_models()?;
    for e in &paths.zoo {
        let model = Model::from_path(&e.path, &InputShapes::none())?;
        let inputs = random_inputs(&model, 5)?;
        out.push(Subject { model, inputs, real_input: false, widenings: BTreeMap::new() });
    }
    for e in &paths.light {
        let model = Model::from_path(&e.model, &InputShapes::none())?;
        // A ramp input (ONNX's runner's) into constant weights: not real data.
        let inputs = inputs_from_pb(&model, &e.input)?;
        out.push(Subject { model, inputs, real_input: false, widenings: BTreeMap::new() });
    }
    let real = tandem_models::real::ensure_real_models()?;
    for e in real.models.iter().filter(|e| e.refused_node_op.is_none()) {
        let shapes = InputShapes::parse(&e.input_shapes)?;
        let model = Model::from_path(real.path(&e.file), &shapes)?;
        let mut widenings = BTreeMap::new();
        if let Some(path) = tandem_models::real::card_path(&e.name) {
            let card = tandem::card::ModelCard::load(path)?;
            if card.input_shapes() == shapes {
                widenings.extend(card.inputs.iter().filter_map(|i| Some((i.name.clone(), i.widening()?))));
            }
        }
        let mut inputs = Values::new();
        for (spec, file) in e.input_shapes.iter().zip(&e.inputs) {
            let name = spec.split_once('=').map(|(n, _)| n).context("NAME=dims")?;
            inputs.insert(name.to_string(), load_tensor_pb(&real.path(file))?.into());
        }
        out.push(Subject { model, inputs, real_input: true, widenings });
    }
    Ok(out)
}

/// The largest |a − b| over the largest |a| (0 for an all-zero tensor).
fn max_rel_err(a: &[f32], b: &[f32]) -> f64 {
    let scale = a.iter().fold(0f32, |m, v| m.max(v.abs()));
    let worst = a.iter().zip(b).fold(0f32, |m, (x, y)| m.max((x - y).abs()));
    if scale > 0.0 {
        f64::from(worst / scale)
    } else {
        f64::from(worst)
    }
}

/// `tandem-bench encodings`.
pub fn encodings(models: Vec<PathBuf>, shapes: &InputShapes, runs: usize) -> anyhow::Result<()> {
    let runs = runs.max(1);
    for subject in subjects(models, shapes)? {
        let (model, g) = (&subject.model, subject.model.graph());
        let mut cuts: Vec<Cut> = vec![Cut::handheld_only(g)];
        for fraction in [0.25, 0.5, 0.75] {
            let cut = Cut::at_flops_fraction(g, fraction);
            if !cut.is_wearable_only() && !cuts.contains(&cut) {
                cuts.push(cut);
            }
        }
        let mut taps = vec![];
        for &t in cuts.iter().flat_map(|c| c.up_tensors()) {
            if !taps.contains(&t) {
                taps.push(t);
            }
        }
        let computed = tapped_plan(model, &taps)?.run(g, &subject.inputs)?;
        let value = |name: &str| -> anyhow::Result<&TValue> {
            computed.get(name).or_else(|| subject.inputs.get(name)).with_context(|| format!("tensor {name}"))
        };
        let mut best_lossless = vec![];
        for cut in &cuts {
            let (mut raw_total, mut lossless_total) = (0usize, 0usize);
            for &t in cut.up_tensors() {
                let info = g.tensor(t);
                let tensor = value(&info.name)?;
                let raw = tensor.as_bytes().len();
                let mut smallest_lossless = raw;
                let widening =
                    subject.widenings.get(&info.name).filter(|_| matches!(info.producer, Producer::Input(_)));
                let fits = |e: &Encoding| {
                    applies(*e, tensor)
                        && (!e.needs_widening() || widening.is_some_and(|w| e.fits(w, tensor.shape())))
                };
                for e in Encoding::ALL.into_iter().filter(fits) {
                    let (mut enc, mut dec) = (vec![], vec![]);
                    let mut packed = match encode_with(tensor, e, widening) {
                        Err(EncodingError::NotExact { .. }) => {
                            println!(
                                "{}",
                                json!({"model": model.name(), "tensor": info.name, "encoding": e.name(), "skipped": "not exactly the card's sensor values"})
                            );
                            continue;
                        }
                        other => other?,
                    };
                    let mut back = decode(tensor.datum_type(), tensor.shape(), &packed)?;
                    for _ in 0..runs {
                        let t0 = Instant::now();
                        packed = encode_with(tensor, e, widening)?;
                        enc.push(t0.elapsed());
                        let t0 = Instant::now();
                        back = decode(tensor.datum_type(), tensor.shape(), &packed)?;
                        dec.push(t0.elapsed());
                    }
                    let exact = back.as_bytes() == tensor.as_bytes();
                    if e.is_lossless() {
                        anyhow::ensure!(exact, "{}: {e} changed '{}'", model.name(), info.name);
                        smallest_lossless = smallest_lossless.min(packed.bytes.len());
                    }
                    let err = if exact { 0.0 } else { max_rel_err(&as_f32(tensor)?, &as_f32(&back)?) };
                    let mb = raw as f64 / 1e6;
                    println!(
                        "{}",
                        json!({
                            "model": model.name(), "cut": format!("{}/{}", cut.prefix_len(), g.nodes().len()),
                            "tensor": info.name, "is_model_input": matches!(info.producer, Producer::Input(_)),
                            "real_input": subject.real_input, "encoding": e.name(), "raw_bytes": raw,
                            "encoded_bytes": packed.bytes.len(),
                            "encode_mb_s": mb / median(&mut enc).as_secs_f64().max(1e-9),
                            "decode_mb_s": mb / median(&mut dec).as_secs_f64().max(1e-9), "max_rel_err": err,
                        })
                    );
                }
                raw_total += raw;
                lossless_total += smallest_lossless;
            }
            best_lossless.push(json!({
                "cut": format!("{}/{}", cut.prefix_len(), g.nodes().len()), "raw_bytes": raw_total,
                "best_lossless_bytes": lossless_total,
                "lossless_ratio": raw_total as f64 / lossless_total.max(1) as f64,
            }));
        }
        println!("{}", json!({"model": model.name(), "summary": best_lossless}));
    }
    Ok(())
}
