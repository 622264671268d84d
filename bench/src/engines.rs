//! `tandem-bench engines`: tract against onnxruntime on every model, one
//! thread each, the same ONNX bytes. For each model, the whole model and
//! the two halves of its cut at half its FLOPs are built on both engines
//! and run interleaved (tract, onnxruntime, tract, ...), so both see the
//! same machine; each line gives the medians, the ratio of medians
//! (tract ÷ onnxruntime) and the interquartile range of the per-pair ratios.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use tandem::check::random_inputs;
use tandem::engine::{Engine, Engines};
use tandem::split::{full_plan_on, Half, Sides, SplitPlan};
use tandem::{Cut, LayerGraph, Model, Values};

/// One measured piece on both engines.
struct Pair {
    tract: Vec<Duration>,
    ort: Vec<Duration>,
}

impl Pair {
    /// Runs `a` and `b` alternately: `warmup` pairs, then `runs` measured.
    fn measure(
        g: &LayerGraph,
        a: &Half,
        b: &Half,
        inputs: &Values,
        warmup: usize,
        runs: usize,
    ) -> anyhow::Result<Pair> {
        let mut p = Pair { tract: vec![], ort: vec![] };
        for i in 0..warmup + runs {
            let t = Instant::now();
            a.run(g, inputs)?;
            let ta = t.elapsed();
            let t = Instant::now();
            b.run(g, inputs)?;
            let tb = t.elapsed();
            if i >= warmup {
                p.tract.push(ta);
                p.ort.push(tb);
            }
        }
        Ok(p)
    }

    fn json(&self) -> serde_json::Value {
        let ms = |v: &[Duration]| median(v).as_secs_f64() * 1e3;
        let (tract, ort) = (ms(&self.tract), ms(&self.ort));
        let mut ratios: Vec<f64> = self
            .tract
            .iter()
            .zip(&self.ort)
            .map(|(a, b)| a.as_secs_f64() / b.as_secs_f64().max(1e-9))
            .collect();
        ratios.sort_by(f64::total_cmp);
        let q = |f: f64| {
            ratios.get(((ratios.len() - 1) as f64 * f).round() as usize).copied().unwrap_or(f64::NAN)
        };
        serde_json::json!({
            "tract_ms": tract,
            "onnxruntime_ms": ort,
            "ratio": tract / ort.max(1e-9),
            "ratio_p25": q(0.25),
            "ratio_p75": q(0.75),
        })
    }
}

fn median(v: &[Duration]) -> Duration {
    let mut v = v.to_vec();
    tandem::profile::median(&mut v)
}

/// The halves of `cut` on `engine`, both.
fn halves(model: &Model, cut: &Cut, engine: Engine) -> anyhow::Result<SplitPlan> {
    Ok(SplitPlan::build_on(model, cut, Sides::Both, Engines::both(engine))?)
}

/// Measures every model (`paths`, or the zoo, the light and the real ones).
pub fn engines(paths: Vec<PathBuf>, runs: usize, lib: Option<PathBuf>) -> anyhow::Result<()> {
    let lib = match lib {
        Some(l) => l,
        None => tandem_models::ensure_onnxruntime()?,
    };
    tandem::engine::set_onnxruntime_library(&lib)?;
    let version = tandem::engine::onnxruntime::init()?;
    eprintln!("onnxruntime {version} from {}; {runs} interleaved runs per piece", lib.display());
    println!(
        "{:<28} {:>10} {:>10} {:>7} {:>13}   {:>7} {:>7}",
        "model", "tract ms", "ort ms", "ratio", "pair IQR", "prefix", "suffix"
    );
    let mut whole_ratios = vec![];
    for (name, path, shapes) in crate::dvfs::models(paths)? {
        let model = Model::from_path(&path, &shapes).with_context(|| path.display().to_string())?;
        let g = model.graph();
        let inputs = random_inputs(&model, 0)?;
        let warmup = 2;
        let whole = Pair::measure(
            g,
            &full_plan_on(&model, Engine::Tract)?,
            &full_plan_on(&model, Engine::OnnxRuntime)?,
            &inputs,
            warmup,
            runs,
        )?;
        let cut = Cut::at_flops_fraction(g, 0.5);
        let (t, o) = (halves(&model, &cut, Engine::Tract)?, halves(&model, &cut, Engine::OnnxRuntime)?);
        let half = |side: Sides| -> anyhow::Result<Option<serde_json::Value>> {
            let (a, b, feed) = match side {
                Sides::Prefix => (t.prefix(), o.prefix(), inputs.clone()),
                _ => (t.suffix(), o.suffix(), t.run_prefix(g, &inputs)?),
            };
            match (a, b) {
                (Some(a), Some(b)) => Ok(Some(Pair::measure(g, a, b, &feed, warmup, runs)?.json())),
                _ => Ok(None),
            }
        };
        let (prefix, suffix) = (half(Sides::Prefix)?, half(Sides::Suffix)?);
        let w = whole.json();
        let ratio_of = |v: &Option<serde_json::Value>| {
            v.as_ref().and_then(|v| v["ratio"].as_f64()).map_or("-".into(), |r| format!("{r:.2}"))
        };
        println!(
            "{:<28} {:>10.3} {:>10.3} {:>7.2} {:>6.2}–{:<6.2}   {:>7} {:>7}",
            name,
            w["tract_ms"].as_f64().unwrap_or(f64::NAN),
            w["onnxruntime_ms"].as_f64().unwrap_or(f64::NAN),
            w["ratio"].as_f64().unwrap_or(f64::NAN),
            w["ratio_p25"].as_f64().unwrap_or(f64::NAN),
            w["ratio_p75"].as_f64().unwrap_or(f64::NAN),
            ratio_of(&prefix),
            ratio_of(&suffix),
        );
        whole_ratios.push(w["ratio"].as_f64().unwrap_or(f64::NAN));
        eprintln!(
            "{}",
            serde_json::json!({
                "model": name,
                "runs": runs,
                "whole": w,
                "cut": cut.key(),
                "prefix_layers": cut.prefix_len(),
                "prefix": prefix,
                "suffix": suffix,
            })
        );
    }
    let n = whole_ratios.len().max(1) as f64;
    let geomean = (whole_ratios.iter().map(|r| r.ln()).sum::<f64>() / n).exp();
    println!(
        "geometric mean of tract ÷ onnxruntime over {} models (whole): {geomean:.2}",
        whole_ratios.len()
    );
    Ok(())
}
