//! Pretrained exports from PyPI wheels (`models/fetch_real.py`: openWakeWord,
//! NudeNet's YOLOv8n, PP-OCRv4, Silero VAD), each on a real input (speech
//! from espeak-ng, photos from the scikit-image wheel), checked three ways:
//! tract's unsplit outputs match onnxruntime's within 1e-3 relative, every
//! sampled cut matches unsplit, and the planner decides a cut that runs.
//! A model tract cannot run is refused with its node named.

use std::time::Duration;

use anyhow::Context;
use tandem::check::{check_cuts, check_cuts_over, load_tensor_pb, onnx_closeness};
use tandem::device::DeviceProfile;
use tandem::energy::{ClusterEnergy, PowerModel};
use tandem::partition::{
    Conditions, EnergyWeights, HandheldStatus, LatencyHint, LinkEstimate, Mode, Planner, PlannerConfig, Side,
};
use tandem::predict::{ProfiledLatency, Scaled};
use tandem::{sampled_cuts_to_check, InputShapes, Model, Values};
use tandem_models::real::ensure_real_models;

/// Sampled cuts per model (plus both trivial ones).
const CUTS: usize = 10;

fn check_real(name: &str) -> anyhow::Result<()> {
    let set = ensure_real_models()?;
    let entry = set.get(name).with_context(|| format!("{name} in the manifest"))?;
    let shapes = InputShapes::parse(&entry.input_shapes)?;
    let model = Model::from_path(set.path(&entry.file), &shapes)?;
    let g = model.graph();
    let mut inputs = Values::new();
    for (spec, file) in entry.input_shapes.iter().zip(&entry.inputs) {
        let input = spec.split_once('=').map(|(n, _)| n).context("NAME=dims")?;
        inputs.insert(input.to_string(), load_tensor_pb(&set.path(file))?.into());
    }

    // 0. Its model card, if it has one, fits it, loaded at the card's shapes.
    let card = tandem_models::real::card_path(name);
    if let Some(path) = &card {
        let card = tandem::card::ModelCard::load(path)?;
        if card.input_shapes() == shapes {
            card.check(&model)?;
            // Its real inputs are its sensor's values under its normalization:
            // they cross the link in the sensor's type, bit for bit.
            for input in &card.inputs {
                let Some(w) = input.widening() else { continue };
                let e = match w.ty {
                    tandem::card::SensorType::U8 => tandem::encoding::Encoding::U8Lz4,
                    _ => tandem::encoding::Encoding::I16Lz4,
                };
                let x = inputs.get(&input.name).with_context(|| format!("{name}: input {}", input.name))?;
                let (back, sent) = tandem::encoding::round_trip_with(x, e, Some(&w))
                    .with_context(|| format!("{name}: input '{}' in {e}", input.name))?;
                assert_eq!(back.as_bytes(), x.as_bytes(), "{name}: {e} changed input '{}'", input.name);
                assert!(sent * 2 <= x.as_bytes().len(), "{name}: {e} sent {sent} bytes");
            }
        } else {
            card.check(&Model::from_path(set.path(&entry.file), &card.input_shapes())?)?;
        }
    }

    // 1. Unsplit, against onnxruntime on the same real input.
    let unsplit = tandem::split::full_plan(&model)?.run(g, &inputs)?;
    let mut worst = 0f32;
    assert_eq!(g.outputs().len(), entry.outputs.len(), "{name}: output count");
    for (&t, file) in g.outputs().iter().zip(&entry.outputs) {
        let out = &g.tensor(t).name;
        let ratio = onnx_closeness(&load_tensor_pb(&set.path(file))?, &unsplit[out], 1e-3, 1e-5)?;
        assert!(ratio <= 1.0, "{name}: output '{out}' differs from onnxruntime's (worst ratio {ratio})");
        worst = worst.max(ratio);
    }

    // 2. Sampled cuts against unsplit, crossing tensors included, each
    //    crossing tensor sent through the lossless link encodings.
    let cuts = sampled_cuts_to_check(g, CUTS, 5);
    let report = check_cuts_over(&model, &cuts, &inputs, &mut crate::lossless::lossless_link, true)?;
    assert!(report.ok, "{name}: {:?}", report.mismatches);

    // 3. The planner decides (watch and phone over BLE 2M, 100 ms hint), and its cut runs.
    let decision = planned(&model, &inputs)?;
    if !cuts.contains(&decision.chosen) {
        let chosen = check_cuts(&model, std::slice::from_ref(&decision.chosen), &inputs)?;
        assert!(chosen.ok, "{name}: the planned cut does not reproduce the unsplit run");
    }
    println!(
        "{}",
        serde_json::json!({
            "model": name, "package": format!("{}=={}", entry.package, entry.version), "layers": g.nodes().len(),
            "cuts_checked": report.cuts_checked, "onnxruntime_worst_ratio": worst,
            "split_max_abs_diff": report.max_abs_diff, "planned_prefix_layers": decision.prefix_nodes,
            "predicted_ms": decision.evaluation.latency_s * 1e3, "card": card.is_some(),
        })
    );
    Ok(())
}

/// The planner's decision for `model` on a watch and a phone over BLE 2M
/// (100 ms hint); the quantized models' test plans the same way.
pub(crate) fn planned(model: &Model, inputs: &Values) -> anyhow::Result<tandem::partition::Decision> {
    let g = model.graph();
    let host = ProfiledLatency::measure(model, inputs)?;
    let (watch, phone) = (DeviceProfile::shipped("watch-w5")?, DeviceProfile::shipped("pixel-8-pro")?);
    let (w_lat, h_lat) = (
        Scaled { inner: host.clone(), slowdown: watch.slowdown },
        Scaled { inner: host, slowdown: phone.slowdown },
    );
    let (w_energy, h_energy) = (
        ClusterEnergy::new(&watch, PowerModel::Analytical)?,
        ClusterEnergy::new(&phone, PowerModel::Analytical)?,
    );
    let conditions = Conditions {
        link: LinkEstimate {
            up_bytes_per_s: 162_500.0,
            down_bytes_per_s: 162_500.0,
            rtt: Duration::from_millis(20),
        },
        status: HandheldStatus { load: 0.0 },
        weights: EnergyWeights { wearable: 0.7, handheld: 0.3 },
        hint: LatencyHint::Within(Duration::from_millis(100)),
        mode: Mode::Single,
    };
    let mut planner = Planner::new(PlannerConfig::default(), conditions);
    let decision = planner
        .poll_decision(
            g,
            Side { latency: &w_lat, energy: &w_energy },
            Side { latency: &h_lat, energy: &h_energy },
        )?
        .with_context(|| format!("{}: the planner decided nothing", model.name()))?;
    Ok(decision)
}

macro_rules! real_tests {
    ($($test:ident),* $(,)?) => {
        $(
            #[test]
            fn $test() -> anyhow::Result<()> {
                check_real(stringify!($test))
            }
        )*
    };
}

real_tests!(
    oww_melspectrogram,
    oww_embedding,
    oww_alexa,
    oww_hey_jarvis,
    oww_weather,
    oww_timer,
    nudenet_320n,
    ppocr_det,
    ppocr_rec,
    ppocr_cls,
    eeg_seizure,
    oww_embedding_int8,
    ppocr_cls_int8,
);

/// Every committed card describes a model of the set (or of the TFLite
/// set: the face app's), and the models the apps feed (audio, vision, body
/// sensor) have one.
#[test]
fn model_cards_name_real_models() -> anyhow::Result<()> {
    let set = ensure_real_models()?;
    let tflite = tandem_models::tflite::ensure_tflite_models()?;
    for entry in std::fs::read_dir(tandem_models::real::cards_dir())? {
        let path = entry?.path();
        let card = tandem::card::ModelCard::load(&path)?;
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
        assert_eq!(card.model.name, stem, "{}", path.display());
        if set.get(stem).is_some() {
            continue;
        }
        let m = tflite.get(stem).with_context(|| format!("{}: no such real model", path.display()))?;
        let model = Model::from_path(tflite.path(&m.file), &card.input_shapes())?;
        card.check(&model).with_context(|| path.display().to_string())?;
    }
    for name in ["nudenet_320n", "oww_melspectrogram", "oww_embedding", "oww_alexa", "eeg_seizure"] {
        assert!(tandem_models::real::card_path(name).is_some(), "{name} has no card");
    }
    Ok(())
}

/// Silero VAD wraps its model in an `If` whose branches disagree on shape:
/// tract refuses it, and the error names the node.
#[test]
fn silero_vad_is_refused_with_its_node_named() -> anyhow::Result<()> {
    let set = ensure_real_models()?;
    let entry = set.get("silero_vad").context("silero_vad in the manifest")?;
    let op = entry.refused_node_op.as_deref().context("a refused model")?;
    let shapes = InputShapes::parse(&["input=1,512", "state=2,1,128"])?;
    let e = Model::from_path(set.path(&entry.file), &shapes).expect_err("tract cannot run it").to_string();
    assert!(
        e.contains(&format!("\"{op}_0\"")) && e.contains(op),
        "the error does not name the {op} node: {e}"
    );
    Ok(())
}
