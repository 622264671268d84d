//! The session's link encodings: measured once on the first frame that
//! could be offloaded, chosen per crossing tensor for each cut, lossy ones
//! held to the accuracy budget, and the ratios frames achieve folded in.
//! A part of the session without a link, a clock or a planner of its own:
//! it says when the planner must decide again ([`LinkEncodings::take_replan`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use tracing::{info, warn};

use super::codecs::{self, Calibration};
use super::{Placement, SessionConfig};
use crate::{Cut, CutKey, Model, SplitExecutor, Values};
use tandem_plan::partition::rules::{moved, RATIO_CHANGE};
use tandem_plan::partition::{Decision, HandheldStatus, LinkCodecs, LinkEstimate};
use tandem_proto::encoding::{Allowed, Encoding};
use tandem_proto::protocol::{PackedTensor, TensorMeta};

/// What the encodings read of the session: its model, plans and settings.
#[derive(Clone, Copy)]
pub(super) struct Context<'a> {
    pub model: &'a Model,
    pub executor: &'a SplitExecutor,
    pub config: &'a SessionConfig,
}

/// What prices a crossing now: the link estimate and the handheld's status.
#[derive(Clone, Copy, Debug)]
pub(super) struct Pricing {
    pub link: LinkEstimate,
    pub status: HandheldStatus,
}

/// The session's link encodings and what it learnt of them.
#[derive(Default)]
pub(super) struct LinkEncodings {
    /// Measured on the first frame that could be offloaded (`None` before,
    /// or when they are off), updated by what frames send.
    measured: Option<LinkCodecs>,
    /// The encodings the planner last decided with.
    planned: Option<Arc<LinkCodecs>>,
    /// Whether the measurement was tried (once per session).
    tried: bool,
    /// The frame lossy encodings are measured on (with `Lossy` encodings).
    calibration: Option<Calibration>,
    /// (cut, encodings) already measured against the accuracy budget.
    budget_checked: HashMap<(CutKey, Vec<Encoding>), bool>,
    /// The planner must decide again with [`LinkEncodings::planned`].
    replan: bool,
}

impl LinkEncodings {
    /// The encodings as measured and learnt, for pricing a cut.
    pub fn measured(&self) -> Option<&LinkCodecs> {
        self.measured.as_ref()
    }

    /// When the planner must decide again: the encodings to decide with
    /// (taken once).
    pub fn take_replan(&mut self) -> Option<Arc<LinkCodecs>> {
        std::mem::take(&mut self.replan).then(|| self.planned.clone()).flatten()
    }

    fn replan(&mut self) {
        self.planned = self.measured.clone().map(Arc::new);
        self.replan = true;
    }

    /// Measures the link encodings on `inputs`, the first frame that could
    /// be offloaded (`ready`: the handheld is), once.
    pub fn ensure(&mut self, cx: Context<'_>, inputs: &Values, ready: bool) {
        let config = cx.config;
        if self.tried
            || config.encodings == Allowed::Raw
            || config.placement == Placement::WearableOnly
            || !ready
        {
            return;
        }
        self.tried = true;
        let started = Instant::now();
        // The handheld decodes at this host's speed: its profile's slowdown is
        // relative to a phone, not to this host (see docs).
        let slowdown = (tandem_core::device_clock::factor_of(config.dilation), 1.0);
        // Lossy encodings only with a budget to hold them to, measured on this frame.
        let mut allowed = config.encodings;
        if allowed == Allowed::Lossy {
            match (config.accuracy, Calibration::new(cx.model, inputs)) {
                (Some(_), Ok(c)) => self.calibration = Some(c),
                (None, _) => {
                    warn!("lossy link encodings need an accuracy budget; using lossless ones");
                    allowed = Allowed::Lossless;
                }
                (Some(_), Err(e)) => {
                    warn!("the calibration frame failed to run ({e}); using lossless encodings");
                    allowed = Allowed::Lossless;
                }
            }
        }
        match codecs::calibrate(cx.model, inputs, allowed, slowdown, &config.widenings) {
            Ok(c) => {
                let tensors = c.per_tensor.iter().filter(|o| !o.is_empty()).count();
                info!(tensors, took_ms = started.elapsed().as_millis() as u64, "link encodings measured");
                self.measured = Some(c);
                self.replan();
            }
            Err(e) => warn!("measuring the link encodings failed ({e}); sending raw tensors"),
        }
    }

    /// The encoding of each tensor `cut` sends up, in `up_tensors` order:
    /// the planner's choice (`decided`) for its decided cut; for another
    /// cut (a fixed placement), each tensor's cheapest at `pricing`; raw
    /// without link encodings. Lossy ones are used only once the
    /// calibration frame shows the cut within the accuracy budget with
    /// them; a cut that breaks it loses those tensors' lossy options, and
    /// the planner must decide again.
    pub fn for_cut(
        &mut self,
        cx: Context<'_>,
        cut: &Cut,
        decided: Option<&Decision>,
        pricing: Pricing,
    ) -> Vec<Encoding> {
        let mut encodings = self.chosen(cx.model, cut, false, decided, pricing);
        // Each refusal removes at least one lossy option: this ends.
        while !encodings.iter().all(|e| e.is_lossless()) {
            if self.within_budget(cx, cut, &encodings) {
                break;
            }
            encodings = self.cheapest(cx.model, cut, false, pricing);
        }
        encodings
    }

    /// The encoding each tensor `cut` brings back down should come in, in
    /// `down_tensors` order: as [`LinkEncodings::for_cut`], lossless only.
    pub fn answer(
        &self,
        model: &Model,
        cut: &Cut,
        decided: Option<&Decision>,
        pricing: Pricing,
    ) -> Vec<Encoding> {
        let lossless = |e: Encoding| if e.is_lossless() { e } else { Encoding::Raw };
        self.chosen(model, cut, true, decided, pricing).into_iter().map(lossless).collect()
    }

    /// Whether `cut` with `encodings` is within the accuracy budget on the
    /// calibration frame (measured once per pair); when not, those tensors
    /// lose the lossy options used.
    fn within_budget(&mut self, cx: Context<'_>, cut: &Cut, encodings: &[Encoding]) -> bool {
        let key = (cut.key(), encodings.to_vec());
        let ok = match self.budget_checked.get(&key) {
            Some(&ok) => ok,
            None => {
                let ok = match (cx.config.accuracy, &self.calibration) {
                    (Some(accuracy), Some(calibration)) => {
                        let widenings = &cx.config.widenings;
                        match codecs::within_budget(
                            cx.model,
                            cx.executor,
                            cut,
                            encodings,
                            calibration,
                            accuracy,
                            widenings,
                        ) {
                            Ok((ok, worst)) => {
                                info!(cut = %cut.describe(cx.model.graph()), ?encodings, ok, worst, "lossy encodings against the accuracy budget");
                                ok
                            }
                            Err(e) => {
                                warn!("measuring lossy encodings failed ({e}); not using them");
                                false
                            }
                        }
                    }
                    _ => false,
                };
                self.budget_checked.insert(key, ok);
                ok
            }
        };
        if !ok {
            self.drop_lossy(cut, encodings);
        }
        ok
    }

    /// `cut`'s tensors lose the lossy options in `encodings`; the planner
    /// must decide again.
    fn drop_lossy(&mut self, cut: &Cut, encodings: &[Encoding]) {
        let Some(measured) = &mut self.measured else { return };
        for (&t, e) in cut.up_tensors().iter().zip(encodings) {
            if !e.is_lossless() {
                measured.per_tensor[t].retain(|o| o.label != e.name());
            }
        }
        self.replan();
    }

    /// Up (or `down`), in crossing order: the planner's choice for its
    /// decided cut, else each tensor's cheapest.
    fn chosen(
        &self,
        model: &Model,
        cut: &Cut,
        down: bool,
        decided: Option<&Decision>,
        pricing: Pricing,
    ) -> Vec<Encoding> {
        let g = model.graph();
        match decided.filter(|d| d.chosen.key() == cut.key()) {
            Some(d) => crossing(cut, down)
                .iter()
                .map(|&t| d.encodings.get(&g.tensor(t).name).map_or(Encoding::Raw, |l| parse_label(l)))
                .collect(),
            None => self.cheapest(model, cut, down, pricing),
        }
    }

    /// Each tensor's cheapest encoding up (`down`: down, lossless only) at
    /// `pricing` (raw without measured encodings).
    fn cheapest(&self, model: &Model, cut: &Cut, down: bool, pricing: Pricing) -> Vec<Encoding> {
        let g = model.graph();
        let tensors = crossing(cut, down);
        let Some(measured) = &self.measured else { return vec![Encoding::Raw; tensors.len()] };
        let link = pricing.link;
        let rate = if down { link.down_bytes_per_s } else { link.up_bytes_per_s };
        let (per_byte, k) = (1.0 / rate.max(1e-9), pricing.status.dilation());
        tensors
            .iter()
            .map(|&t| {
                let bytes = g.tensor(t).bytes;
                let way = match down {
                    true => measured.cheapest_down(t, bytes, per_byte, k),
                    false => measured.cheapest(t, bytes, per_byte, k),
                };
                parse_label(&way.label)
            })
            .collect()
    }

    /// Folds the ratios a frame's packed tensors achieved into the
    /// predictions. A narrow encoding that fell back (the input was not the
    /// card's sensor values) is dropped for its tensor.
    pub fn observe_sent(&mut self, cut: &Cut, encodings: &[Encoding], packed: &[PackedTensor]) {
        let Some(measured) = &mut self.measured else { return };
        let mut dropped = false;
        let mut seen = vec![];
        for ((&t, &e), p) in cut.up_tensors().iter().zip(encodings).zip(packed) {
            if p.meta.encoding != e && e.needs_widening() {
                measured.per_tensor[t].retain(|o| o.label != e.name());
                dropped = true;
            } else if e != Encoding::Raw && p.meta.encoding == e {
                seen.push((t, e, ratio_of(&p.meta)));
            }
        }
        self.fold(seen, dropped);
    }

    /// Folds the ratios an answer's encoded tensors achieved into the
    /// predictions.
    pub fn observe_answer(&mut self, model: &Model, metas: &[TensorMeta]) {
        let g = model.graph();
        let seen = metas
            .iter()
            .filter(|m| m.encoding != Encoding::Raw)
            .filter_map(|m| Some((g.tensor_id(&m.name)?, m.encoding, ratio_of(m))))
            .collect();
        self.fold(seen, false);
    }

    /// Folds observed (tensor, encoding, ratio) into the predictions (an
    /// EWMA of the log ratio); the planner decides again when one moved
    /// more than [`RATIO_CHANGE`] from what it decided with, or when
    /// `changed` already.
    fn fold(&mut self, seen: Vec<(usize, Encoding, f64)>, changed: bool) {
        let (Some(measured), Some(planned)) = (&mut self.measured, &self.planned) else { return };
        let mut changed = changed;
        for (t, e, ratio) in seen {
            if let (Some(now), Some(then)) =
                (measured.observe(t, e.name(), ratio, codecs::RATIO_ALPHA), planned.ratio(t, e.name()))
            {
                changed |= moved(now, then, RATIO_CHANGE);
            }
        }
        if changed {
            self.replan();
        }
    }
}

/// A cut's tensors going up, or (`down`) coming back down.
fn crossing(cut: &Cut, down: bool) -> &[usize] {
    match down {
        true => cut.down_tensors(),
        false => cut.up_tensors(),
    }
}

/// An encoding by its label; raw for one this build does not know.
fn parse_label(label: &str) -> Encoding {
    Encoding::parse(label).unwrap_or(Encoding::Raw)
}

/// A packed tensor's ratio: its raw bytes over the bytes it was sent in.
fn ratio_of(meta: &TensorMeta) -> f64 {
    meta.byte_len().unwrap_or(0) as f64 / meta.len.max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::InputShapes;
    use std::time::Duration;
    use tandem_plan::partition::CodecOption;

    fn model() -> Model {
        Model::from_bytes(&tandem_models::tiny::tiny_mlp_onnx(), &InputShapes::none()).expect("tiny model")
    }

    fn option(label: &str, ratio: f64, lossless: bool) -> CodecOption {
        CodecOption { label: label.into(), ratio, encode_bytes_per_s: 1e9, decode_bytes_per_s: 1e9, lossless }
    }

    /// Every tensor of `model` may go as shuffle + LZ4 (2×) or int8 (4×).
    fn measured(model: &Model) -> LinkEncodings {
        let per_tensor = vec![
            vec![option("shuffle-lz4", 2.0, true), option("int8", 4.0, false)];
            model.graph().tensors().len()
        ];
        let mut e = LinkEncodings {
            measured: Some(LinkCodecs { per_tensor, slowdown: (1.0, 1.0) }),
            ..LinkEncodings::default()
        };
        e.replan();
        e
    }

    fn pricing(bytes_per_s: f64) -> Pricing {
        let link =
            LinkEstimate { up_bytes_per_s: bytes_per_s, down_bytes_per_s: bytes_per_s, rtt: Duration::ZERO };
        Pricing { link, status: HandheldStatus::default() }
    }

    /// A cut that sends one tensor up and brings one down.
    fn split(model: &Model) -> Cut {
        let g = model.graph();
        crate::enumerate_cuts(g, 10_000)
            .expect("a small model")
            .into_iter()
            .find(|c| !c.is_wearable_only() && !c.is_handheld_only() && !c.down_tensors().is_empty())
            .expect("a split cut")
    }

    #[test]
    fn raw_until_measured_then_the_cheapest_and_answers_lossless() {
        let m = model();
        let cut = split(&m);
        let fresh = LinkEncodings::default();
        assert!(fresh.cheapest(&m, &cut, false, pricing(1e3)).iter().all(|&e| e == Encoding::Raw));
        let e = measured(&m);
        // A slow link: every byte counts, int8 (4×) is cheapest up.
        assert!(e.cheapest(&m, &cut, false, pricing(1e3)).iter().all(|&e| e.name() == "int8"));
        // Answers come back lossless, whatever is cheapest.
        let down = e.answer(&m, &cut, None, pricing(1e3));
        assert!(!down.is_empty() && down.iter().all(|e| e.is_lossless()), "{down:?}");
    }

    #[test]
    fn a_ratio_that_moves_past_the_threshold_asks_the_planner_again() {
        let m = model();
        let mut e = measured(&m);
        assert!(e.take_replan().is_some(), "measuring asks for a decision");
        assert!(e.take_replan().is_none(), "taken once");
        let t = split(&m).up_tensors()[0];
        // 2.0 → 2.0·(2.1/2.0)^0.3: under 10%, no new decision.
        e.fold(vec![(t, Encoding::ShuffleLz4, 2.1)], false);
        assert!(e.take_replan().is_none());
        // Far off: the EWMA moves past 10% of what was planned.
        e.fold(vec![(t, Encoding::ShuffleLz4, 20.0)], false);
        let planned = e.take_replan().expect("a new decision");
        let now = planned.ratio(t, "shuffle-lz4").expect("listed");
        assert!(now > 2.2, "the planner decides with the learnt ratio ({now})");
    }

    #[test]
    fn a_cut_over_the_budget_loses_its_lossy_options() {
        let m = model();
        let mut e = measured(&m);
        e.take_replan();
        let cut = split(&m);
        let int8 = vec![Encoding::parse("int8").expect("int8"); cut.up_tensors().len()];
        e.drop_lossy(&cut, &int8);
        assert!(e.take_replan().is_some(), "the planner decides again");
        let t = cut.up_tensors()[0];
        let left = &e.measured().expect("measured").per_tensor[t];
        assert_eq!(left.iter().map(|o| o.label.as_str()).collect::<Vec<_>>(), ["shuffle-lz4"]);
        assert!(e.cheapest(&m, &cut, false, pricing(1e3)).iter().all(|e| e.is_lossless()));
    }
}
