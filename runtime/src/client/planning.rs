//! The cut for the next frame: the planner polled between frames, and offloading checked against running alone.

use super::*;

impl Session {
    /// The encoding of each tensor `cut` sends up, in `up_tensors` order:
    /// the planner's choice for its decided cut, raw otherwise.
    pub(super) fn encodings_for(&self, cut: &Cut) -> Vec<Encoding> {
        let raw = vec![Encoding::Raw; cut.up_tensors().len()];
        let Some(d) = self.planner.current().filter(|d| d.chosen.key() == cut.key()) else { return raw };
        let g = self.model.model.graph();
        cut.up_tensors()
            .iter()
            .map(|&t| {
                d.encodings
                    .get(&g.tensor(t).name)
                    .and_then(|label| Encoding::parse(label).ok())
                    .unwrap_or(Encoding::Raw)
            })
            .collect()
    }

    /// The cut for the next frame (polling the planner between frames),
    /// its predicted latency (ms), and why it runs every layer here when it does.
    pub(super) fn next_cut(&mut self, mode: Mode) -> (Cut, Option<f64>, Option<String>) {
        let g = self.model.model.graph();
        let here = |reason: String| (Cut::wearable_only(g), None, Some(reason));
        match &self.config.placement {
            Placement::WearableOnly => return here("placement: wearable only".into()),
            _ if !self.is_ready() => {
                return here(self.status.local_reason().unwrap_or_else(|| "the handheld is not ready".into()))
            }
            Placement::HandheldOnly => return (Cut::handheld_only(g), None, None),
            Placement::Fixed(c) => {
                let why = c.is_wearable_only().then(|| "placement: a fixed cut with every layer here".into());
                return (c.clone(), None, why);
            }
            Placement::Auto => {}
        }
        let est = self.profiler.estimate();
        let moved = |a: f64, b: f64| (a - b).abs() > 0.1 * b.max(1e-9);
        if moved(est.up_bytes_per_s, self.fed_link.up_bytes_per_s)
            || moved(est.down_bytes_per_s, self.fed_link.down_bytes_per_s)
            || moved(est.rtt.as_secs_f64(), self.fed_link.rtt.as_secs_f64())
        {
            self.fed_link = est;
            self.planner.handle_link(est);
        }
        self.planner.handle_mode(mode);
        let Some(handheld_latency) = &self.handheld_latency else {
            return here("the handheld has not sent its layer times yet".into());
        };
        let wearable = Side { latency: &self.wearable_latency, energy: &self.wearable_energy };
        let handheld = Side { latency: handheld_latency, energy: &self.handheld_energy };
        let mut failed = None;
        match self.planner.poll_decision(g, wearable, handheld) {
            Ok(Some(d)) => info!(cut = %d.chosen.describe(g), reason = %d.reason, "partition"),
            Ok(None) => {}
            Err(e) => {
                warn!("the planner failed ({e}); running on the wearable");
                failed = Some(e.to_string());
            }
        }
        let Some(d) = self.planner.current() else {
            return here(format!("the planner failed: {}", failed.unwrap_or_else(|| "no decision".into())));
        };
        if d.chosen.is_wearable_only() {
            let ms = d.evaluation.latency_s * 1e3;
            let why = format!("the planner: every layer here, predicted {ms:.1} ms ({})", d.reason);
            return (d.chosen.clone(), Some(ms), Some(why));
        }
        // Offloading must beat running alone by the planner's margin, with
        // the stream's period bounded by the frames in flight (a frame's
        // latency over the in-flight bound) as this runtime pipelines.
        // Checked once per decision and conditions, not per frame.
        let c = *self.planner.conditions();
        let key = d.chosen.key();
        if let Some((k, cond, m, local)) = &self.offload_check {
            if *k == key && *cond == c && *m == mode {
                return match local {
                    None => (d.chosen.clone(), Some(d.evaluation.latency_s * 1e3), None),
                    Some((ms, why)) => (Cut::wearable_only(g), Some(*ms), Some(why.clone())),
                };
            }
        }
        let prices = NodePrices::new(g, wearable, handheld, &c.link, &c.status, c.weights);
        let local_cut = Cut::wearable_only(g);
        let local = evaluate(g, &prices, &local_cut, c.link.rtt);
        let in_flight = if self.config.pipeline { self.config.max_in_flight.max(1) } else { 1 } as f64;
        let bounded = |e: &Evaluation| {
            let mut e = e.clone();
            e.stream_period_s = e.stream_period_s.max(e.latency_s / in_flight);
            e
        };
        if beats(&bounded(&d.evaluation), &bounded(&local), c.hint, mode, self.config.margin) {
            self.offload_check = Some((key, c, mode, None));
            (d.chosen.clone(), Some(d.evaluation.latency_s * 1e3), None)
        } else {
            let (here_ms, there_ms) = (local.latency_s * 1e3, d.evaluation.latency_s * 1e3);
            let why = format!(
                "the planner: local predicted {here_ms:.1} ms vs best offload {there_ms:.1} ms \
                 (offloading must win by the {:.0}% margin)",
                self.config.margin * 100.0
            );
            self.offload_check = Some((key, c, mode, Some((here_ms, why.clone()))));
            (local_cut, Some(here_ms), Some(why))
        }
    }
}
