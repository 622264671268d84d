//! Quantized models split exactly and cross the link as int8 (issue 33).
//!
//! The set (`models/quantized.py`): an audio transformer and an image CNN of
//! our own, each quantized by onnxruntime's quantizer five ways (static QDQ
//! int8 per tensor and per channel, static QDQ uint8, static QOperator,
//! dynamic), and the real int8 QDQ copies of `models/fetch_real.py`. For
//! each: tract's unsplit outputs against onnxruntime's, every sampled cut
//! against the unsplit run (crossing tensors and outputs, through the
//! lossless encodings, judged in float tolerance and in quanta), and, where
//! a `DequantizeLinear` stands at a cut, the integers cross, not its float
//! output, on every sampled cut and on the planner's.

use std::collections::HashSet;

use anyhow::Context;
use tandem::check::{check_cuts_over, load_tensor_pb, onnx_closeness};
use tandem::{sampled_cuts_to_check, Cut, InputShapes, Model, Values};
use tandem_core::DatumType;
use tandem_models::quantized::ensure_quantized_models;
use tandem_models::real::ensure_real_models;

/// Sampled cuts per model (plus both trivial ones).
const CUTS: usize = 10;

/// The names a model's `DequantizeLinear` nodes read and write.
fn dequantizers(model: &Model) -> (HashSet<String>, HashSet<String>) {
    let (mut reads, mut writes) = (HashSet::new(), HashSet::new());
    for node in model.proto().graph.iter().flat_map(|g| &g.node) {
        if node.op_type == "DequantizeLinear" {
            reads.extend(node.input.first().cloned());
            writes.extend(node.output.first().cloned());
        }
    }
    (reads, writes)
}

/// Where a `DequantizeLinear` stands at `cut`, the integers cross: no
/// crossing tensor is a dequantizer's float output (unless it is a model
/// output), and every crossing tensor a dequantizer reads is int8 or uint8.
/// Returns how many int8 or uint8 tensors cross.
fn crosses_integers(model: &Model, cut: &Cut) -> anyhow::Result<usize> {
    let g = model.graph();
    let (reads, writes) = dequantizers(model);
    let outputs: HashSet<&str> = g.outputs().iter().map(|&t| g.tensor(t).name.as_str()).collect();
    let mut integers = 0;
    for &t in cut.up_tensors() {
        let info = g.tensor(t);
        anyhow::ensure!(
            !writes.contains(&info.name) || outputs.contains(info.name.as_str()),
            "{}: cut {} sends '{}', a DequantizeLinear's float output",
            model.name(),
            cut.key(),
            info.name
        );
        let int = matches!(info.dtype, DatumType::I8 | DatumType::U8);
        anyhow::ensure!(
            !reads.contains(&info.name) || int,
            "{}: cut {} sends '{}' ({:?}) into a DequantizeLinear",
            model.name(),
            cut.key(),
            info.name,
            info.dtype
        );
        integers += usize::from(int);
    }
    Ok(integers)
}

/// Over `cuts`, the bytes sent and the bytes their float versions would send.
fn bytes_against_float(model: &Model, cuts: &[Cut]) -> (u64, u64) {
    cuts.iter().fold((0, 0), |(a, b), c| (a + c.up_bytes(), b + c.float_version_up_bytes(model.graph())))
}

/// One model of the quantized set: loads, matches onnxruntime, splits
/// exactly on every sampled cut, and crosses integers where it dequantizes.
fn check_quantized(name: &str) -> anyhow::Result<()> {
    let set = ensure_quantized_models()?;
    let entry = set.get(name).with_context(|| format!("{name} in the manifest"))?;
    let model = Model::from_path(set.path(&entry.file), &InputShapes::parse(&entry.input_shapes)?)?;
    let g = model.graph();
    let mut inputs = Values::new();
    for (spec, file) in entry.input_shapes.iter().zip(&entry.inputs) {
        let input = spec.split_once('=').map(|(n, _)| n).context("NAME=dims")?;
        inputs.insert(input.to_string(), load_tensor_pb(&set.path(file))?.into());
    }

    // 1. Unsplit, against onnxruntime (its optimizations off: the Q/DQ nodes
    //    as ONNX defines them), within 1e-3 relative or one quantum of the
    //    output's scale.
    let unsplit = tandem::split::full_plan(&model)?.run(g, &inputs)?;
    let quanta = tandem::quanta::quanta(&model);
    let mut worst = 0f32;
    for (&t, file) in g.outputs().iter().zip(&entry.outputs) {
        let out = &g.tensor(t).name;
        let want = load_tensor_pb(&set.path(file))?;
        let ratio = onnx_closeness(&want, &unsplit[out], 1e-3, 1e-5)?;
        let d = tandem::check::diff(&want, &unsplit[out])?;
        let in_quanta = quanta.get(out).map(|q| d.max_abs / q);
        assert!(
            ratio <= 1.0 || in_quanta.is_some_and(|r| r <= 1.0),
            "{name}: output '{out}' differs from onnxruntime's (worst ratio {ratio}, {in_quanta:?} quanta)"
        );
        worst = worst.max(ratio.min(in_quanta.unwrap_or(f32::INFINITY)));
    }

    // 2. Every sampled cut against unsplit, through the lossless encodings.
    let cuts = sampled_cuts_to_check(g, CUTS, 33);
    let report = check_cuts_over(&model, &cuts, &inputs, &mut crate::lossless::lossless_link, true)?;
    assert!(report.ok, "{name}: {:?}", report.mismatches);
    assert_eq!(report.cuts_checked, cuts.len());

    // 3. Where a DequantizeLinear stands at a cut, the integers cross: on
    //    every sampled cut, and on the planner's.
    let mut integers = 0;
    for cut in &cuts {
        integers += crosses_integers(&model, cut)?;
    }
    if entry.is_qdq() {
        assert!(integers > 0, "{name}: no sampled cut sends int8 or uint8");
        assert!(g.dequantizer_count() > 0, "{name}: no dequantizer recomputed by the halves");
    }
    let chosen = crate::real_models::planned(&model, &inputs)?.chosen;
    crosses_integers(&model, &chosen)?;
    if !cuts.contains(&chosen) {
        let one = check_cuts_over(
            &model,
            std::slice::from_ref(&chosen),
            &inputs,
            &mut crate::lossless::lossless_link,
            true,
        )?;
        assert!(one.ok, "{name}: the planned cut does not reproduce the unsplit run: {:?}", one.mismatches);
    }
    println!(
        "{}",
        serde_json::json!({
            "model": name, "how": entry.how, "layers": g.nodes().len(), "cuts_checked": report.cuts_checked,
            "onnxruntime_worst_ratio": worst, "split_max_abs_diff": report.max_abs_diff,
            "judged_in_quanta": report.judged_in_quanta, "within_a_quantum": report.within_a_quantum.len(),
            "integer_crossings": integers, "planned_prefix_layers": chosen.prefix_len(),
            "planned_up_bytes": chosen.up_bytes(), "planned_float_version_bytes": chosen.float_version_up_bytes(model.graph()),
            "sampled_up_bytes": bytes_against_float(&model, &cuts),
        })
    );
    Ok(())
}

macro_rules! quantized_tests {
    ($($test:ident),* $(,)?) => {
        $(
            #[test]
            fn $test() -> anyhow::Result<()> {
                check_quantized(stringify!($test))
            }
        )*
    };
}

quantized_tests!(
    qtransformer,
    qtransformer_qdq_s8,
    qtransformer_qdq_s8_pc,
    qtransformer_qdq_u8,
    qtransformer_qop_u8,
    qtransformer_dyn_u8,
    qcnn,
    qcnn_qdq_s8,
    qcnn_qdq_s8_pc,
    qcnn_qdq_u8,
    qcnn_qop_u8,
    qcnn_dyn_u8,
);

/// The real int8 QDQ copies (PP-OCR's classifier, openWakeWord's
/// embedding): every sampled cut and the planner's send the integers where
/// a `DequantizeLinear` stands at the cut, a quarter of the bytes their
/// float versions would (their split checks are in `real_models`).
#[test]
fn real_int8_models_cross_integers() -> anyhow::Result<()> {
    let set = ensure_real_models()?;
    for (name, float) in [("ppocr_cls_int8", "ppocr_cls"), ("oww_embedding_int8", "oww_embedding")] {
        let load = |name: &str| -> anyhow::Result<(Model, Values)> {
            let entry = set.get(name).with_context(|| format!("{name} in the manifest"))?;
            let model = Model::from_path(set.path(&entry.file), &InputShapes::parse(&entry.input_shapes)?)?;
            let mut inputs = Values::new();
            for (spec, file) in entry.input_shapes.iter().zip(&entry.inputs) {
                let input = spec.split_once('=').map(|(n, _)| n).context("NAME=dims")?;
                inputs.insert(input.to_string(), load_tensor_pb(&set.path(file))?.into());
            }
            Ok((model, inputs))
        };
        let (model, inputs) = load(name)?;
        let float_layers = load(float)?.0.graph().nodes().len();
        let cuts = sampled_cuts_to_check(model.graph(), CUTS, 5);
        let mut integers = 0;
        for cut in &cuts {
            integers += crosses_integers(&model, cut)?;
        }
        assert!(integers > 0, "{name}: no sampled cut sends int8");
        let chosen = crate::real_models::planned(&model, &inputs)?.chosen;
        crosses_integers(&model, &chosen)?;
        let (sent, float_sent) = bytes_against_float(&model, &cuts);
        assert!(
            sent < float_sent,
            "{name}: the sampled cuts send {sent} bytes, their float versions {float_sent}"
        );
        println!(
            "{}",
            serde_json::json!({
                "model": name, "layers": model.graph().nodes().len(), "float_model": float,
                "float_model_layers": float_layers, "integer_crossings": integers,
                "sampled_up_bytes": sent, "sampled_float_version_bytes": float_sent,
                "planned_prefix_layers": chosen.prefix_len(), "planned_up_bytes": chosen.up_bytes(),
                "planned_float_version_bytes": chosen.float_version_up_bytes(model.graph()),
            })
        );
    }
    Ok(())
}
