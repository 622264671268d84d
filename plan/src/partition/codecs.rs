//! Link encodings in the partitioner's prices: each crossing tensor is
//! priced in its cheapest allowed encoding (up: encoded on the wearable,
//! fewer bytes on the link, decoded on the handheld; down, lossless ones
//! only: encoded on the handheld, decoded on the wearable). The choice
//! depends on the tensor and the link, never on the cut, so every search
//! (the min-cut included) stays exact over the per-tensor prices.

use serde::Serialize;

use super::{HandheldStatus, NodePrices};
use tandem_core::LayerGraph;

/// One encoding a tensor may cross in, besides raw.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CodecOption {
    /// Its name (`shuffle-lz4`, `int8`, ...).
    pub label: String,
    /// Predicted raw bytes over encoded bytes (> 0).
    pub ratio: f64,
    /// Raw bytes encoded per second on the host the speeds were measured on.
    pub encode_bytes_per_s: f64,
    /// Raw bytes decoded per second on that host.
    pub decode_bytes_per_s: f64,
    /// Bit-exact: it may also carry the tensor down (answers are never lossy).
    pub lossless: bool,
}

/// What each tensor may cross in: per tensor id, the encodings besides raw
/// (an empty list: raw only), and how much slower than the measuring host
/// the wearable encodes and the handheld decodes.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LinkCodecs {
    /// By tensor id.
    pub per_tensor: Vec<Vec<CodecOption>>,
    /// (wearable, handheld) slowdown against the measuring host (≥ 1 means slower).
    pub slowdown: (f64, f64),
}

/// How a tensor crosses the link, and what that costs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Crossing {
    /// The encoding (`raw` when none pays).
    pub label: String,
    /// Bytes on the link.
    pub bytes: u64,
    /// Seconds of encoding on the sending side (the handheld's with its load).
    pub encode_s: f64,
    /// Seconds of decoding on the receiving side (the handheld's with its load).
    pub decode_s: f64,
}

impl LinkCodecs {
    /// How tensor `id` of `raw_bytes` crosses fastest at `s_per_byte` up,
    /// with the handheld `handheld_dilation` times slower by its load: the
    /// encoding whose encode + transfer + decode time is least, raw when
    /// none beats it.
    pub fn cheapest(&self, id: usize, raw_bytes: u64, s_per_byte: f64, handheld_dilation: f64) -> Crossing {
        let (sw, sh) = (self.slowdown.0.max(0.0), self.slowdown.1.max(0.0) * handheld_dilation);
        self.fastest(id, raw_bytes, s_per_byte, (sw, sh), false)
    }

    /// How tensor `id` comes back down fastest: in a lossless encoding,
    /// encoded on the handheld (`handheld_dilation` times slower by its
    /// load) and decoded on the wearable; raw when none beats it.
    pub fn cheapest_down(
        &self,
        id: usize,
        raw_bytes: u64,
        s_per_byte: f64,
        handheld_dilation: f64,
    ) -> Crossing {
        let (sw, sh) = (self.slowdown.0.max(0.0), self.slowdown.1.max(0.0) * handheld_dilation);
        self.fastest(id, raw_bytes, s_per_byte, (sh, sw), true)
    }

    /// The least encode + transfer + decode time, the sender `slowdown.0`
    /// and the receiver `slowdown.1` times slower than the measuring host.
    fn fastest(
        &self,
        id: usize,
        raw_bytes: u64,
        s_per_byte: f64,
        slowdown: (f64, f64),
        lossless: bool,
    ) -> Crossing {
        let raw = Crossing { label: "raw".into(), bytes: raw_bytes, encode_s: 0.0, decode_s: 0.0 };
        let time = |l: &Crossing| l.encode_s + l.bytes as f64 * s_per_byte + l.decode_s;
        self.per_tensor
            .get(id)
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .filter(|o| o.ratio > 0.0 && o.encode_bytes_per_s > 0.0 && o.decode_bytes_per_s > 0.0)
            .filter(|o| o.lossless || !lossless)
            .map(|o| Crossing {
                label: o.label.clone(),
                bytes: ((raw_bytes as f64 / o.ratio).ceil() as u64).max(1),
                encode_s: raw_bytes as f64 / o.encode_bytes_per_s * slowdown.0,
                decode_s: raw_bytes as f64 / o.decode_bytes_per_s * slowdown.1,
            })
            .fold(raw, |best, l| if time(&l) < time(&best) { l } else { best })
    }

    /// Folds an observed ratio of tensor `id` in encoding `label` into its
    /// prediction: an EWMA of the logarithm with weight `alpha` on the new
    /// value (ratios multiply: a silent first frame that packed 170× must
    /// not take dozens of speech frames to fall to 1.6×). Returns the new
    /// prediction (`None` for an unknown tensor or encoding, or a ratio
    /// that is not positive and finite).
    pub fn observe(&mut self, id: usize, label: &str, ratio: f64, alpha: f64) -> Option<f64> {
        if !(ratio.is_finite() && ratio > 0.0) {
            return None;
        }
        let option = self.per_tensor.get_mut(id)?.iter_mut().find(|o| o.label == label)?;
        let log = option.ratio.ln() + alpha.clamp(0.0, 1.0) * (ratio.ln() - option.ratio.ln());
        option.ratio = log.exp();
        Some(option.ratio)
    }

    /// The predicted ratio of tensor `id` in encoding `label`.
    pub fn ratio(&self, id: usize, label: &str) -> Option<f64> {
        self.per_tensor.get(id)?.iter().find(|o| o.label == label).map(|o| o.ratio)
    }
}

impl NodePrices {
    /// These prices with each tensor sent in its cheapest encoding of
    /// `codecs`, up ([`LinkCodecs::cheapest`]) and down
    /// ([`LinkCodecs::cheapest_down`]). Tensors `codecs` does not list stay raw.
    pub fn with_codecs(
        mut self,
        graph: &LayerGraph,
        codecs: &LinkCodecs,
        status: &HandheldStatus,
    ) -> NodePrices {
        let ((up, down), k) = (self.s_per_byte, status.dilation());
        let tensors = graph.tensors().iter().enumerate();
        self.up_links = tensors.clone().map(|(id, t)| codecs.cheapest(id, t.bytes, up, k)).collect();
        self.down_links = tensors.map(|(id, t)| codecs.cheapest_down(id, t.bytes, down, k)).collect();
        self
    }

    /// The encoding of each tensor `cut` sends up or down, by name (empty
    /// when no codecs are priced).
    pub fn encodings_of(
        &self,
        graph: &LayerGraph,
        cut: &tandem_core::Cut,
    ) -> std::collections::BTreeMap<String, String> {
        if self.up_links.is_empty() {
            return Default::default();
        }
        let up = cut.up_tensors().iter().map(|&t| (t, &self.up_links[t]));
        let down = cut.down_tensors().iter().map(|&t| (t, &self.down_links[t]));
        up.chain(down).map(|(t, l)| (graph.tensor(t).name.clone(), l.label.clone())).collect()
    }

    /// How tensor `id` (of `raw_bytes`) comes down: its encoding's link
    /// bytes, encode seconds on the handheld and decode seconds on the
    /// wearable; raw when no codecs were given.
    pub fn down_link(&self, id: usize, raw_bytes: u64) -> (u64, f64, f64) {
        match self.down_links.get(id) {
            Some(l) => (l.bytes, l.encode_s, l.decode_s),
            None => (raw_bytes, 0.0, 0.0),
        }
    }

    /// What tensors `ids` of `graph` cost coming down together: (link
    /// bytes, encode seconds on the handheld, decode seconds on the wearable).
    pub fn down_total(&self, graph: &LayerGraph, ids: impl IntoIterator<Item = usize>) -> (u64, f64, f64) {
        ids.into_iter().fold((0, 0.0, 0.0), |(b, e, d), t| {
            let (bytes, enc, dec) = self.down_link(t, graph.tensor(t).bytes);
            (b + bytes, e + enc, d + dec)
        })
    }

    /// Price of sending tensor `id` down in its encoding: encoding on the
    /// handheld, the link, decoding on the wearable.
    pub fn down_tensor(&self, id: usize, raw_bytes: u64, objective: super::Objective) -> f64 {
        let (bytes, enc, dec) = self.down_link(id, raw_bytes);
        let e =
            self.weights.handheld * self.compute_w.1 * enc + self.weights.wearable * self.compute_w.0 * dec;
        self.down(bytes, objective) + coding_price(enc + dec, e, objective)
    }

    /// How tensor `id` (of `raw_bytes`) crosses: its encoding's link bytes
    /// and encode and decode seconds; raw when no codecs were given.
    pub fn up_link(&self, id: usize, raw_bytes: u64) -> (u64, f64, f64) {
        match self.up_links.get(id) {
            Some(l) => (l.bytes, l.encode_s, l.decode_s),
            None => (raw_bytes, 0.0, 0.0),
        }
    }

    /// Price of sending tensor `id` up in its encoding: encoding on the
    /// wearable, the link, decoding on the handheld.
    pub fn up_tensor(&self, id: usize, raw_bytes: u64, objective: super::Objective) -> f64 {
        let (bytes, enc, dec) = self.up_link(id, raw_bytes);
        let e =
            self.weights.wearable * self.compute_w.0 * enc + self.weights.handheld * self.compute_w.1 * dec;
        self.up(bytes, objective) + coding_price(enc + dec, e, objective)
    }
}

/// The price of `t` seconds of coding that cost `e` weighted joules.
fn coding_price(t: f64, e: f64, objective: super::Objective) -> f64 {
    match objective {
        super::Objective::Latency => t,
        super::Objective::Energy => e,
        super::Objective::Lagrangian(l) => e + l * t,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codecs(ratio: f64) -> LinkCodecs {
        let option = CodecOption {
            label: "lz".into(),
            ratio,
            encode_bytes_per_s: 1e6,
            decode_bytes_per_s: 2e6,
            lossless: true,
        };
        LinkCodecs { per_tensor: vec![vec![], vec![option]], slowdown: (2.0, 1.0) }
    }

    #[test]
    fn the_cheapest_way_across_weighs_coding_time_against_link_time() {
        let c = codecs(4.0);
        // 1 MB at 1 MB/s: raw takes 1 s; encoded, 0.25 s + 2 s encoding (a 2x slower watch) + 0.5 s.
        let slow_coder = c.cheapest(1, 1_000_000, 1e-6, 1.0);
        assert_eq!(slow_coder.label, "raw");
        // At 100 kB/s raw takes 10 s: 2.5 s of link plus 2.5 s of coding wins.
        let slow_link = c.cheapest(1, 1_000_000, 1e-5, 1.0);
        assert_eq!((slow_link.label.as_str(), slow_link.bytes), ("lz", 250_000));
        assert!((slow_link.encode_s - 2.0).abs() < 1e-12 && (slow_link.decode_s - 0.5).abs() < 1e-12);
        // A loaded handheld decodes slower; a tensor without options stays raw.
        assert!((c.cheapest(1, 1_000_000, 1e-5, 3.0).decode_s - 1.5).abs() < 1e-12);
        assert_eq!(c.cheapest(0, 10, 1.0, 1.0).label, "raw");
    }

    #[test]
    fn observed_ratios_move_the_prediction_by_the_ewma_weight() {
        let mut c = codecs(4.0);
        // 4 · (2 / 4)^0.25
        let want = 4.0 * 0.5f64.powf(0.25);
        assert!(c.observe(1, "lz", 2.0, 0.25).is_some_and(|r| (r - want).abs() < 1e-12));
        // From 170x to 1.6x: five observations at 0.3 bring it under 4x.
        let mut silent = codecs(170.0);
        for _ in 0..5 {
            silent.observe(1, "lz", 1.6, 0.3);
        }
        assert!(silent.ratio(1, "lz").is_some_and(|r| r < 4.0), "{:?}", silent.ratio(1, "lz"));
        assert_eq!(c.observe(1, "lz", f64::NAN, 0.25), None, "a bad observation is ignored");
        assert_eq!(c.observe(1, "zstd", 2.0, 0.25), None, "an encoding it was not measured with");
        assert_eq!(c.observe(7, "lz", 2.0, 0.25), None);
        assert!(c.ratio(1, "lz").is_some_and(|r| (r - want).abs() < 1e-12));
    }
}
