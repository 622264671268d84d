//! What a frame and a stream report: measured times, bytes, placement and model-based energy.

use std::time::Duration;

use serde::Serialize;

/// One frame's outcome, with real wall-clock times.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FrameReport {
    /// Frame number.
    pub frame: u64,
    /// Whether the handheld answered it.
    pub offloaded: bool,
    /// Why it ran on the wearable, whenever it did: the planner's numbers,
    /// no handheld (and the error), the handheld's refusal, the placement,
    /// or a fallback (below).
    pub local_reason: Option<String>,
    /// Why it ran on the wearable after being offloaded (link loss, refusal, deadline).
    pub fallback: Option<String>,
    /// The cut's key (`Cut::key`) it ran under.
    pub cut: crate::CutKey,
    /// Layers run on the wearable / in the model.
    pub prefix_layers: usize,
    /// Layers in the model.
    pub layers: usize,
    /// Wearable compute (ms), dilation included.
    pub wearable_ms: f64,
    /// From sending to the answer, minus the handheld's compute (ms): the
    /// link both ways and queueing (and, relayed, minus the edge request's
    /// time, which is `edge.edge_ms`).
    pub link_ms: f64,
    /// Handheld compute (ms), as it reported.
    pub handheld_ms: f64,
    /// From the frame's start to its delivery (ms).
    pub latency_ms: f64,
    /// Bytes sent up.
    pub up_bytes: u64,
    /// Those tensors' raw size (more than `up_bytes` when they crossed encoded).
    pub up_raw_bytes: u64,
    /// Bytes received.
    pub down_bytes: u64,
    /// The frame's request on the link, whole: its tensors and the
    /// message's header and framing (0 when it ran here from the start).
    pub up_message_bytes: u64,
    /// The answer on the link, whole (0 when none came).
    pub down_message_bytes: u64,
    /// The planner's predicted latency for the cut (ms), when it decided it.
    pub predicted_ms: Option<f64>,
    /// Model-based energy on the wearable (J): busy time × compute power + radio time × radio power.
    pub wearable_j: f64,
    /// Model-based energy on the handheld (J).
    pub handheld_j: f64,
    /// For the first frame at a newly decided cut whose plans were built
    /// in the background: the time from the decision to this frame (ms).
    pub switch_wait_ms: Option<f64>,
    /// Plan building done inside this frame on the wearable (ms): the
    /// stall a switch costs when the cut's plans were not built ahead.
    pub plan_build_ms: f64,
    /// The wearable's cluster and frequency for this frame, when chosen
    /// with the cut (`SessionConfig::dvfs`), and how it was applied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dvfs: Option<String>,
    /// The engine the wearable's layers ran on (`None`: it ran none).
    pub prefix_engine: Option<crate::engine::Engine>,
    /// The engine the handheld's layers ran on (`None`: not offloaded).
    pub suffix_engine: Option<crate::engine::Engine>,
    /// Layers on each tier (the watch, the phone, the edge), when an edge
    /// tier is configured; `None` otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tiers: Option<Tiers>,
    /// The phone–edge link's part in a relayed frame, as the phone measured it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub edge: Option<EdgeLeg>,
}

/// Layers on each tier for one frame.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Tiers {
    /// On the watch.
    pub wearable: usize,
    /// On the phone.
    pub handheld: usize,
    /// On the edge server.
    pub edge: usize,
}

/// The edge part of a relayed frame, as the phone measured it.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct EdgeLeg {
    /// The cut whose suffix the edge ran (S2's key).
    pub cut: crate::CutKey,
    /// Bytes the phone sent to the edge.
    pub up_bytes: u64,
    /// Bytes it received back.
    pub down_bytes: u64,
    /// The edge request's round trip, its compute included (ms).
    pub edge_ms: f64,
    /// Why the edge failed, when it did (the phone then ran its part).
    pub error: Option<String>,
}

/// A stream's summary.
#[derive(Clone, Debug, Default, Serialize)]
pub struct StreamReport {
    /// Frames delivered.
    pub frames: usize,
    /// Frames the handheld answered.
    pub offloaded: usize,
    /// Frames run on the wearable.
    pub local: usize,
    /// Of those, frames offloaded first and then run locally.
    pub fallbacks: usize,
    /// Times the cut changed between consecutive frames.
    pub cut_switches: usize,
    /// Wall-clock seconds from the first frame's start to the last delivery.
    pub wall_s: f64,
    /// Frames per second.
    pub throughput_fps: f64,
    /// Latency percentiles (ms).
    pub p50_ms: f64,
    /// 95th percentile (ms).
    pub p95_ms: f64,
    /// 99th percentile (ms).
    pub p99_ms: f64,
    /// Mean wearable compute per frame (ms).
    pub mean_wearable_ms: f64,
    /// Mean handheld compute per offloaded frame (ms).
    pub mean_handheld_ms: f64,
    /// Model-based wearable energy per frame (J).
    pub wearable_j_per_frame: f64,
    /// Model-based handheld energy per frame (J).
    pub handheld_j_per_frame: f64,
    /// Bytes up in all.
    pub up_bytes: u64,
    /// Their raw size (more when they crossed encoded).
    pub up_raw_bytes: u64,
    /// Bytes down in all.
    pub down_bytes: u64,
    /// Switches that waited for plans built in the background.
    pub switch_waits: usize,
    /// The longest of those waits, from the decision to the first frame at the new cut (ms).
    pub switch_wait_max_ms: f64,
    /// Plan building inside frames on the wearable, in all (ms).
    pub plan_build_ms: f64,
    /// The most plan building inside one frame (ms).
    pub plan_build_max_ms: f64,
    /// The median |predicted − measured| / measured latency (%) over the
    /// first 20 frames with a prediction (`None` without any).
    pub prediction_error_first_pct: Option<f64>,
    /// The same over the last 20: lower as the predictors learn.
    pub prediction_error_last_pct: Option<f64>,
    /// Where every frame ran, when all ran alike ([`placement`]): `watch`
    /// for all on the wearable, else the cut's key; `None` when frames ran
    /// at several placements or any fell back.
    pub ran_at: Option<String>,
    /// Frames whose last layers ran on the edge.
    pub edge_frames: usize,
    /// Relayed frames whose edge failed (the phone then ran its part).
    pub edge_failures: usize,
    /// Bytes the phone sent to the edge, in all.
    pub edge_up_bytes: u64,
    /// Bytes it received back, in all.
    pub edge_down_bytes: u64,
    /// The source's rate when frames arrived on a clock (`--fps`); each
    /// frame's latency then counts from its arrival.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_hz: Option<f64>,
    /// At that rate, frames late: not delivered before the next one
    /// arrived (latency above the period).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline_misses: Option<usize>,
    /// Their share of the frames.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline_miss_share: Option<f64>,
}

/// Where one frame ran: `watch` when every layer ran on the wearable (the
/// cut it was planned at does not matter), else its cut's key.
fn placement(f: &FrameReport) -> String {
    if f.offloaded {
        f.cut.to_string()
    } else {
        "watch".into()
    }
}

/// The median relative error (%) of the predictions among `frames`.
fn median_error_pct<'a>(frames: impl Iterator<Item = &'a FrameReport>) -> Option<f64> {
    let mut e: Vec<f64> = frames
        .filter_map(|f| {
            let p = f.predicted_ms?;
            (f.latency_ms > 0.0).then(|| (p - f.latency_ms).abs() / f.latency_ms * 100.0)
        })
        .collect();
    if e.is_empty() {
        return None;
    }
    e.sort_by(f64::total_cmp);
    Some(if e.len() % 2 == 1 { e[e.len() / 2] } else { (e[e.len() / 2 - 1] + e[e.len() / 2]) / 2.0 })
}

/// Frames in each window of the prediction errors.
pub const PREDICTION_WINDOW: usize = 20;

impl StreamReport {
    /// The same summary of frames that arrived at `rate_hz` (their
    /// latencies counted from their arrival): with the frames that missed
    /// their deadline, the next frame's arrival.
    pub fn at_rate(frames: &[FrameReport], wall: Duration, rate_hz: f64) -> StreamReport {
        let mut r = Self::from_frames(frames, wall);
        if rate_hz.is_finite() && rate_hz > 0.0 && !frames.is_empty() {
            let period_ms = 1e3 / rate_hz;
            let late = frames.iter().filter(|f| f.latency_ms > period_ms).count();
            r.rate_hz = Some(rate_hz);
            r.deadline_misses = Some(late);
            r.deadline_miss_share = Some(late as f64 / frames.len() as f64);
        }
        r
    }

    /// Summarizes frame reports (in delivery order) over `wall`.
    pub fn from_frames(frames: &[FrameReport], wall: Duration) -> StreamReport {
        let n = frames.len();
        if n == 0 {
            return StreamReport::default();
        }
        let mut lat: Vec<f64> = frames.iter().map(|f| f.latency_ms).collect();
        lat.sort_by(f64::total_cmp);
        let pct = |p: f64| lat[((p * (n - 1) as f64).round() as usize).min(n - 1)];
        let offloaded = frames.iter().filter(|f| f.offloaded).count();
        let wall_s = wall.as_secs_f64();
        StreamReport {
            frames: n,
            offloaded,
            local: n - offloaded,
            fallbacks: frames.iter().filter(|f| f.fallback.is_some()).count(),
            cut_switches: frames.windows(2).filter(|w| w[0].cut != w[1].cut).count(),
            wall_s,
            throughput_fps: if wall_s > 0.0 { n as f64 / wall_s } else { 0.0 },
            p50_ms: pct(0.5),
            p95_ms: pct(0.95),
            p99_ms: pct(0.99),
            mean_wearable_ms: frames.iter().map(|f| f.wearable_ms).sum::<f64>() / n as f64,
            mean_handheld_ms: if offloaded > 0 {
                frames.iter().map(|f| f.handheld_ms).sum::<f64>() / offloaded as f64
            } else {
                0.0
            },
            wearable_j_per_frame: frames.iter().map(|f| f.wearable_j).sum::<f64>() / n as f64,
            handheld_j_per_frame: frames.iter().map(|f| f.handheld_j).sum::<f64>() / n as f64,
            up_bytes: frames.iter().map(|f| f.up_bytes).sum(),
            up_raw_bytes: frames.iter().map(|f| f.up_raw_bytes).sum(),
            down_bytes: frames.iter().map(|f| f.down_bytes).sum(),
            switch_waits: frames.iter().filter(|f| f.switch_wait_ms.is_some()).count(),
            switch_wait_max_ms: frames.iter().filter_map(|f| f.switch_wait_ms).fold(0.0, f64::max),
            plan_build_ms: frames.iter().map(|f| f.plan_build_ms).sum(),
            plan_build_max_ms: frames.iter().map(|f| f.plan_build_ms).fold(0.0, f64::max),
            prediction_error_first_pct: median_error_pct(
                frames.iter().filter(|f| f.predicted_ms.is_some()).take(PREDICTION_WINDOW),
            ),
            prediction_error_last_pct: median_error_pct(
                frames.iter().rev().filter(|f| f.predicted_ms.is_some()).take(PREDICTION_WINDOW),
            ),
            ran_at: (frames.iter().all(|f| f.fallback.is_none() && placement(f) == placement(&frames[0])))
                .then(|| placement(&frames[0])),
            edge_frames: frames.iter().filter(|f| f.tiers.is_some_and(|t| t.edge > 0)).count(),
            edge_failures: frames
                .iter()
                .filter(|f| f.edge.as_ref().is_some_and(|e| e.error.is_some()))
                .count(),
            edge_up_bytes: frames.iter().filter_map(|f| f.edge.as_ref()).map(|e| e.up_bytes).sum(),
            edge_down_bytes: frames.iter().filter_map(|f| f.edge.as_ref()).map(|e| e.down_bytes).sum(),
            rate_hz: None,
            deadline_misses: None,
            deadline_miss_share: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(predicted_ms: Option<f64>, latency_ms: f64) -> FrameReport {
        FrameReport { predicted_ms, latency_ms, ..FrameReport::default() }
    }

    #[test]
    fn at_a_source_rate_frames_later_than_the_next_arrival_are_misses() {
        // At 10 Hz the period is 100 ms: 2 of 5 frames were later than that.
        let frames: Vec<FrameReport> =
            [40.0, 99.0, 100.0, 100.5, 250.0].iter().map(|&ms| frame(None, ms)).collect();
        let r = StreamReport::at_rate(&frames, Duration::from_secs(1), 10.0);
        assert_eq!((r.rate_hz, r.deadline_misses), (Some(10.0), Some(2)));
        assert_eq!(r.deadline_miss_share, Some(0.4));
        assert_eq!(r.frames, 5);
        // Without a rate there is no deadline, and the JSON says nothing of one.
        let plain = StreamReport::from_frames(&frames, Duration::from_secs(1));
        assert_eq!(plain.deadline_misses, None);
        let j = serde_json::to_value(&plain).expect("json");
        assert!(j.get("deadline_miss_share").is_none(), "{j}");
        assert_eq!(StreamReport::at_rate(&[], Duration::ZERO, 10.0).deadline_misses, None);
    }

    #[test]
    fn prediction_errors_are_medians_over_the_first_and_last_twenty_predicted_frames() {
        // 25 frames: the first 20 predicted 2x their latency (100% off), the
        // last 5 exactly; one frame without a prediction is skipped.
        let mut frames: Vec<FrameReport> = (0..20).map(|_| frame(Some(20.0), 10.0)).collect();
        frames.push(frame(None, 10.0));
        frames.extend((0..5).map(|_| frame(Some(10.0), 10.0)));
        let r = StreamReport::from_frames(&frames, Duration::from_secs(1));
        assert_eq!(r.prediction_error_first_pct, Some(100.0));
        // The last 20 predicted: 15 at 100%, 5 at 0%: the median is 100%.
        assert_eq!(r.prediction_error_last_pct, Some(100.0));
        frames.extend((0..15).map(|_| frame(Some(9.0), 10.0)));
        let r = StreamReport::from_frames(&frames, Duration::from_secs(1));
        assert_eq!(r.prediction_error_first_pct, Some(100.0));
        let last = r.prediction_error_last_pct.expect("predicted");
        assert!((last - 10.0).abs() < 1e-9, "15 at 10%, 5 at 0%: median 10%, got {last}");
        assert_eq!(
            StreamReport::from_frames(&[frame(None, 1.0)], Duration::ZERO).prediction_error_first_pct,
            None
        );
    }

    #[test]
    fn a_placement_is_named_only_when_every_frame_ran_alike() {
        let at = |cut: &str, offloaded: bool, fallback: Option<&str>| FrameReport {
            cut: cut.into(),
            offloaded,
            fallback: fallback.map(str::to_string),
            ..FrameReport::default()
        };
        let of = |frames: &[FrameReport]| StreamReport::from_frames(frames, Duration::from_secs(1)).ran_at;
        assert_eq!(of(&[at("a", true, None), at("a", true, None)]), Some("a".into()));
        // Local frames are on the watch whatever cut they were planned at.
        assert_eq!(of(&[at("a", false, None), at("b", false, None)]), Some("watch".into()));
        assert_eq!(of(&[at("a", true, None), at("b", true, None)]), None);
        assert_eq!(of(&[at("a", true, None), at("a", false, None)]), None);
        // A fallback ran on the watch after waiting on the link: not the watch's placement.
        assert_eq!(of(&[at("a", false, None), at("a", false, Some("deadline"))]), None);
    }
}
