//! Link encodings measured for the planner: on a calibration frame (the
//! app's first frame that could be offloaded), every tensor a cut could
//! send is encoded with each allowed encoding, giving its ratio and this
//! host's encode and decode speeds; the tensors later frames send update
//! their ratios (an EWMA), and the planner re-decides when one moves.

use std::time::{Duration, Instant};

use tandem_core::graph::Producer;
use tandem_plan::partition::{CodecOption, LinkCodecs};
use tandem_proto::encoding::{decode, encode, Allowed, Encoding};

use crate::{Error, Model, Result, Values};

/// Weight of a new observation in a tensor's predicted ratio.
pub const RATIO_ALPHA: f64 = 0.3;

/// Measures `allowed`'s encodings (lossless ones only, for now: lossy ones
/// need an accuracy budget) on every tensor of `model` that a cut could
/// send, computed from `inputs`. `slowdown` is (wearable, handheld) against
/// this host. An encoding that does not shrink a tensor is left out for it.
pub fn calibrate(
    model: &Model,
    inputs: &Values,
    allowed: Allowed,
    slowdown: (f64, f64),
) -> Result<LinkCodecs> {
    let g = model.graph();
    let encodings: Vec<Encoding> = Encoding::ALL
        .into_iter()
        .filter(|e| *e != Encoding::Raw && e.is_lossless() && e.allowed_by(allowed))
        .collect();
    let mut per_tensor = vec![vec![]; g.tensors().len()];
    if encodings.is_empty() {
        return Ok(LinkCodecs { per_tensor, slowdown });
    }
    let taps: Vec<usize> =
        (0..g.tensors().len()).filter(|&t| matches!(g.tensor(t).producer, Producer::Node(_))).collect();
    let computed = tandem_core::split::tapped_plan(model, &taps)?.run(g, inputs)?;
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
        for (k, &e) in encodings.iter().enumerate() {
            if !e.applies(value.datum_type(), value.shape()) {
                continue;
            }
            let bad = |why: String| Error::Link(format!("calibrating {e} on '{}': {why}", info.name));
            let started = Instant::now();
            let packed = encode(value, e).map_err(|err| bad(err.to_string()))?;
            let encoded = started.elapsed();
            let started = Instant::now();
            decode(value.datum_type(), value.shape(), &packed).map_err(|err| bad(err.to_string()))?;
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
            })
            .collect();
    }
    Ok(LinkCodecs { per_tensor, slowdown })
}

/// Folds one observed ratio into `codecs` ([`LinkCodecs::observe`] at [`RATIO_ALPHA`]).
pub fn observe(codecs: &mut LinkCodecs, tensor: usize, label: &str, ratio: f64) -> Option<f64> {
    codecs.observe(tensor, label, ratio, RATIO_ALPHA)
}
