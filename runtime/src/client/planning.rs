//! The cut for the next frame and its link encodings: the planning
//! driver asked with what the session knows now, and lossy encodings held
//! to the accuracy budget.

use super::driver::{Next, Now};
use super::*;
use tandem_plan::partition::rules::{moved, RATIO_CHANGE};
use tandem_proto::protocol::TensorMeta;

impl Session {
    /// The encoding of each tensor `cut` sends up, in `up_tensors` order:
    /// the planner's choice for its decided cut; for another cut (a fixed
    /// placement), each tensor's cheapest at the current link estimate;
    /// raw without link encodings.
    /// Lossy ones are used only once the calibration frame shows the cut
    /// within the accuracy budget with them; a cut that breaks it loses
    /// those tensors' lossy options, and the planner re-decides.
    pub(super) fn encodings_for(&mut self, cut: &Cut) -> Vec<Encoding> {
        let mut encodings = self.chosen_encodings(cut, false);
        // Each refusal removes at least one lossy option: this ends.
        while !encodings.iter().all(|e| e.is_lossless()) {
            if self.within_budget(cut, &encodings) {
                break;
            }
            encodings = self.cheapest_encodings(cut, false);
        }
        encodings
    }

    /// Whether `cut` with `encodings` is within the accuracy budget on the
    /// calibration frame (measured once per pair); when not, those tensors
    /// lose the lossy options used, and the planner re-decides.
    fn within_budget(&mut self, cut: &Cut, encodings: &[Encoding]) -> bool {
        let encodings = encodings.to_vec();
        let key = (cut.key(), encodings.clone());
        let ok = match self.budget_checked.get(&key) {
            Some(&ok) => ok,
            None => {
                let ok = match (self.config.accuracy, &self.calibration) {
                    (Some(accuracy), Some(calibration)) => {
                        let model = &self.model.model;
                        match codecs::within_budget(
                            model,
                            &self.executor,
                            cut,
                            &encodings,
                            calibration,
                            accuracy,
                            &self.config.widenings,
                        ) {
                            Ok((ok, worst)) => {
                                info!(cut = %cut.describe(model.graph()), ?encodings, ok, worst, "lossy encodings against the accuracy budget");
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
        if ok {
            return true;
        }
        if let Some(codecs) = &mut self.codecs {
            for (&t, e) in cut.up_tensors().iter().zip(&encodings) {
                if !e.is_lossless() {
                    codecs.per_tensor[t].retain(|o| o.label != e.name());
                }
            }
            self.replan_with_codecs();
        }
        false
    }

    /// Hands the current link encodings to the planner, which re-decides.
    fn replan_with_codecs(&mut self) {
        let planned = self.codecs.clone().map(std::sync::Arc::new);
        self.planned_codecs = planned.clone();
        self.driver.handle_codecs(planned);
    }

    /// The encoding of each tensor `cut` sends up (`down`: brings back
    /// down), in `up_tensors` (`down_tensors`) order: the planner's choice
    /// for its decided cut, else each tensor's cheapest.
    fn chosen_encodings(&self, cut: &Cut, down: bool) -> Vec<Encoding> {
        let g = self.model.model.graph();
        match self.driver.current().filter(|d| d.chosen.key() == cut.key()) {
            Some(d) => crossing(cut, down)
                .iter()
                .map(|&t| d.encodings.get(&g.tensor(t).name).map_or(Encoding::Raw, |l| parse_label(l)))
                .collect(),
            None => self.cheapest_encodings(cut, down),
        }
    }

    /// The encoding each tensor `cut` brings back down should come in, in
    /// `down_tensors` order ([`Session::chosen_encodings`]): lossless only.
    pub(super) fn answer_encodings(&self, cut: &Cut) -> Vec<Encoding> {
        let lossless = |e: Encoding| if e.is_lossless() { e } else { Encoding::Raw };
        self.chosen_encodings(cut, true).into_iter().map(lossless).collect()
    }

    /// Each tensor's cheapest encoding up (`down`: down, lossless only) at
    /// the current link estimate (raw without codecs).
    fn cheapest_encodings(&self, cut: &Cut, down: bool) -> Vec<Encoding> {
        let g = self.model.model.graph();
        let tensors = crossing(cut, down);
        let Some(codecs) = &self.codecs else { return vec![Encoding::Raw; tensors.len()] };
        let (link, status) = (self.profiler.estimate(), self.profiler.handheld_status());
        let rate = if down { link.down_bytes_per_s } else { link.up_bytes_per_s };
        let (per_byte, k) = (1.0 / rate.max(1e-9), status.dilation());
        tensors
            .iter()
            .map(|&t| {
                let bytes = g.tensor(t).bytes;
                let way = if down {
                    codecs.cheapest_down(t, bytes, per_byte, k)
                } else {
                    codecs.cheapest(t, bytes, per_byte, k)
                };
                parse_label(&way.label)
            })
            .collect()
    }

    /// Measures the link encodings on the first frame that could be
    /// offloaded, once, and hands them to the planner.
    pub(super) fn ensure_codecs(&mut self, inputs: &Values) {
        if self.codecs_tried
            || self.config.encodings == Allowed::Raw
            || self.config.placement == Placement::WearableOnly
            || !self.is_ready()
        {
            return;
        }
        self.codecs_tried = true;
        let started = Instant::now();
        // The handheld decodes at this host's speed: its profile's slowdown is
        // relative to a phone, not to this host (see docs).
        let slowdown = (self.config.dilation.max(1.0), 1.0);
        // Lossy encodings only with a budget to hold them to, measured on this frame.
        let mut allowed = self.config.encodings;
        if allowed == Allowed::Lossy {
            match (self.config.accuracy, codecs::Calibration::new(&self.model.model, inputs)) {
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
        match codecs::calibrate(&self.model.model, inputs, allowed, slowdown, &self.config.widenings) {
            Ok(c) => {
                let tensors = c.per_tensor.iter().filter(|o| !o.is_empty()).count();
                info!(tensors, took_ms = started.elapsed().as_millis() as u64, "link encodings measured");
                self.codecs = Some(c);
                self.replan_with_codecs();
            }
            Err(e) => warn!("measuring the link encodings failed ({e}); sending raw tensors"),
        }
    }

    /// Folds the ratios a frame's packed tensors achieved into the
    /// predictions ([`Session::fold_ratios`]). A narrow encoding that fell
    /// back (the input was not the card's sensor values) is dropped for its
    /// tensor.
    pub(super) fn observe_ratios(&mut self, cut: &Cut, encodings: &[Encoding], packed: &[PackedTensor]) {
        let Some(codecs) = &mut self.codecs else { return };
        let mut dropped = false;
        let mut seen = vec![];
        for ((&t, &e), p) in cut.up_tensors().iter().zip(encodings).zip(packed) {
            if p.meta.encoding != e && e.needs_widening() {
                codecs.per_tensor[t].retain(|o| o.label != e.name());
                dropped = true;
            } else if e != Encoding::Raw && p.meta.encoding == e {
                seen.push((t, e, ratio_of(&p.meta)));
            }
        }
        self.fold_ratios(seen, dropped);
    }

    /// Folds the ratios an answer's encoded tensors achieved into the
    /// predictions ([`Session::fold_ratios`]).
    pub(super) fn observe_answer_ratios(&mut self, metas: &[TensorMeta]) {
        let g = self.model.model.graph();
        let seen = metas
            .iter()
            .filter(|m| m.encoding != Encoding::Raw)
            .filter_map(|m| Some((g.tensor_id(&m.name)?, m.encoding, ratio_of(m))))
            .collect();
        self.fold_ratios(seen, false);
    }

    /// Folds observed (tensor, encoding, ratio) into the predictions (an
    /// EWMA of the log ratio); re-plans when one moved more than 10% from
    /// what the planner decided with, or when `changed` already.
    fn fold_ratios(&mut self, seen: Vec<(usize, Encoding, f64)>, changed: bool) {
        let (Some(codecs), Some(planned)) = (&mut self.codecs, &self.planned_codecs) else { return };
        let mut changed = changed;
        for (t, e, ratio) in seen {
            if let (Some(now), Some(then)) =
                (codecs.observe(t, e.name(), ratio, codecs::RATIO_ALPHA), planned.ratio(t, e.name()))
            {
                changed |= moved(now, then, RATIO_CHANGE);
            }
        }
        if changed {
            self.replan_with_codecs();
        }
    }

    /// What prices a cut now: the link estimate, the handheld's status,
    /// the link encodings measured.
    fn pricing_now(&self) -> Now<'_> {
        Now {
            link: self.profiler.estimate(),
            status: self.profiler.handheld_status(),
            codecs: self.codecs.as_ref(),
        }
    }

    /// The predicted latency (ms) of `cut` now, its tensors in their
    /// cheapest encodings: what a fixed placement's deadline is set from.
    /// `None` before the handheld's layer times are known.
    pub(super) fn predict_ms(&self, cut: &Cut) -> Option<f64> {
        self.driver.predict_ms(self.model.model.graph(), cut, self.pricing_now())
    }

    /// The cut for the next frame: the planning driver asked.
    pub(super) fn next_cut(&mut self, mode: Mode) -> Next {
        let not_ready = (!self.is_ready())
            .then(|| self.status.local_reason().unwrap_or_else(|| "the handheld is not ready".into()));
        let now = Now {
            link: self.profiler.estimate(),
            status: self.profiler.handheld_status(),
            codecs: self.codecs.as_ref(),
        };
        self.driver.next(self.model.model.graph(), &self.config.placement, not_ready, mode, now)
    }
}

/// A cut's tensors going up, or (`down`) coming back down.
fn crossing(cut: &Cut, down: bool) -> &[usize] {
    if down {
        cut.down_tensors()
    } else {
        cut.up_tensors()
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
