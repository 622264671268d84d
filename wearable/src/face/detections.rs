//! MediaPipe's detection decoding (`TensorsToDetectionsCalculator`) and
//! weighted non-maximum suppression (`NonMaxSuppressionCalculator`'s
//! WEIGHTED algorithm, "blending"), without I/O: raw regressor and score
//! tensors in, boxes and keypoints relative to the model's input out.

use anyhow::{bail, Result};

use super::anchors::Anchor;

/// How raw outputs are decoded (`TensorsToDetectionsCalculatorOptions`).
#[derive(Clone, Debug, PartialEq)]
pub struct DecodeOptions {
    /// Values per anchor in the regressors: 4 box values, then keypoints.
    pub coords: usize,
    /// Keypoints per anchor, each (x, y).
    pub keypoints: usize,
    /// Regressor values are in input pixels: divided by this (x, y, w, h alike).
    pub scale: f32,
    /// Raw scores are clipped to ± this before the sigmoid.
    pub score_clip: f32,
    /// Detections scoring below this are dropped.
    pub min_score: f32,
}

impl DecodeOptions {
    /// `face_detection_short_range`'s: 16 values per anchor (box and 6
    /// keypoints), scale 128, clip 100, score at least 0.5.
    pub fn face_short_range() -> DecodeOptions {
        DecodeOptions { coords: 16, keypoints: 6, scale: 128.0, score_clip: 100.0, min_score: 0.5 }
    }
}

/// One detection. Coordinates are relative (0..1) to the frame they were
/// decoded in, until projected (`Roi::project_detection`).
#[derive(Clone, Debug, PartialEq)]
pub struct Detection {
    /// Its score, after the sigmoid.
    pub score: f32,
    /// Left, top, right, bottom.
    pub bbox: [f32; 4],
    /// (x, y) of each keypoint; for faces: right eye, left eye, nose tip,
    /// mouth, right ear tragion, left ear tragion (the subject's right and left).
    pub keypoints: Vec<[f32; 2]>,
}

/// The logistic function of a raw score clipped to ± `clip`.
pub fn clipped_sigmoid(raw: f32, clip: f32) -> f32 {
    1.0 / (1.0 + (-raw.clamp(-clip, clip)).exp())
}

/// Decodes every anchor scoring at least `min_score`: centre offsets and
/// sizes in input pixels (x, y, w, h order) scaled by the anchor, then the
/// keypoints the same way. Detections come back in anchor order.
pub fn decode(
    regressors: &[f32],
    scores: &[f32],
    anchors: &[Anchor],
    o: &DecodeOptions,
) -> Result<Vec<Detection>> {
    let n = anchors.len();
    if 4 + 2 * o.keypoints > o.coords {
        bail!("{} keypoints do not fit in {} values per anchor", o.keypoints, o.coords);
    }
    if regressors.len() != n * o.coords {
        bail!("the regressors hold {} values, not {n} anchors × {}", regressors.len(), o.coords);
    }
    if scores.len() != n {
        bail!("the scores hold {} values for {n} anchors", scores.len());
    }
    let mut found = vec![];
    for (i, a) in anchors.iter().enumerate() {
        let score = clipped_sigmoid(scores[i], o.score_clip);
        // A NaN score (a broken model) drops its anchor.
        if score.is_nan() || score < o.min_score {
            continue;
        }
        let raw = &regressors[i * o.coords..][..o.coords];
        let xc = raw[0] / o.scale * a.w + a.x_center;
        let yc = raw[1] / o.scale * a.h + a.y_center;
        let w = raw[2] / o.scale * a.w;
        let h = raw[3] / o.scale * a.h;
        if !(w >= 0.0 && h >= 0.0) {
            continue;
        }
        let keypoints = (0..o.keypoints)
            .map(|k| {
                let (kx, ky) = (raw[4 + 2 * k], raw[5 + 2 * k]);
                [kx / o.scale * a.w + a.x_center, ky / o.scale * a.h + a.y_center]
            })
            .collect();
        found.push(Detection {
            score,
            bbox: [xc - w / 2.0, yc - h / 2.0, xc + w / 2.0, yc + h / 2.0],
            keypoints,
        });
    }
    Ok(found)
}

/// Intersection over union of two boxes (left, top, right, bottom); 0 when
/// they do not overlap.
pub fn iou(a: &[f32; 4], b: &[f32; 4]) -> f32 {
    let (w, h) = (a[2].min(b[2]) - a[0].max(b[0]), a[3].min(b[3]) - a[1].max(b[1]));
    if w <= 0.0 || h <= 0.0 {
        return 0.0;
    }
    let inter = w * h;
    let union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter;
    if union > 0.0 {
        inter / union
    } else {
        0.0
    }
}

/// Weighted NMS: the best remaining detection takes every remaining one
/// overlapping it by more than `min_suppression` (itself included) and
/// becomes their score-weighted mean box and keypoints, keeping its own
/// score; the others remain for the next round. Best first.
pub fn weighted_nms(mut detections: Vec<Detection>, min_suppression: f32) -> Vec<Detection> {
    // A stable sort: equal scores keep anchor order, as MediaPipe's does.
    detections.sort_by(|a, b| b.score.total_cmp(&a.score));
    let mut kept = vec![];
    while let Some(top) = detections.first().cloned() {
        let (near, rest): (Vec<Detection>, Vec<Detection>) =
            detections.into_iter().partition(|d| iou(&d.bbox, &top.bbox) > min_suppression);
        detections = rest;
        if near.is_empty() {
            // A degenerate box (zero area) overlaps nothing, not even itself.
            kept.push(top);
            detections.remove(0);
            continue;
        }
        let total: f32 = near.iter().map(|d| d.score).sum();
        let mut bbox = [0.0f32; 4];
        let mut keypoints = vec![[0.0f32; 2]; top.keypoints.len()];
        for d in &near {
            for (b, v) in bbox.iter_mut().zip(d.bbox) {
                *b += v * d.score;
            }
            for (k, v) in keypoints.iter_mut().zip(&d.keypoints) {
                k[0] += v[0] * d.score;
                k[1] += v[1] * d.score;
            }
        }
        kept.push(Detection {
            score: top.score,
            bbox: bbox.map(|v| v / total),
            keypoints: keypoints.into_iter().map(|[x, y]| [x / total, y / total]).collect(),
        });
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    fn anchor(x: f32, y: f32) -> Anchor {
        Anchor { x_center: x, y_center: y, w: 1.0, h: 1.0 }
    }

    #[test]
    fn decoding_scales_offsets_by_the_anchor_and_clips_scores() {
        let o = DecodeOptions { coords: 6, keypoints: 1, scale: 100.0, score_clip: 5.0, min_score: 0.5 };
        let anchors = [anchor(0.5, 0.5), anchor(0.25, 0.75), Anchor { w: 0.5, ..anchor(0.5, 0.5) }];
        // Anchor 0: shifted 10 px right, 20 wide, 40 high; anchor 1 scores
        // too low; anchor 2 is half-size, so its offsets count half.
        let regressors = [
            10.0, 0.0, 20.0, 40.0, -10.0, 5.0, //
            0.0, 0.0, 10.0, 10.0, 0.0, 0.0, //
            10.0, 0.0, 20.0, 40.0, 0.0, 0.0,
        ];
        let d = decode(&regressors, &[1000.0, -1.0, 0.0], &anchors, &o).expect("decodes");
        assert_eq!(d.len(), 2, "{d:?}");
        assert_eq!(d[0].score, clipped_sigmoid(5.0, 5.0), "1000 is clipped to 5");
        assert!(d[0].score < 0.9934, "{}", d[0].score);
        let near = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-6);
        assert!(near(&d[0].bbox, &[0.5, 0.3, 0.7, 0.7]), "{:?}", d[0].bbox);
        assert!(near(&d[0].keypoints[0], &[0.4, 0.55]), "{:?}", d[0].keypoints);
        assert_eq!(d[1].score, 0.5, "a score of exactly min_score is kept");
        assert!(
            near(&d[1].bbox, &[0.5, 0.3, 0.6, 0.7]),
            "x and w scale with the anchor's width: {:?}",
            d[1].bbox
        );
        let e = decode(&regressors[..17], &[0.0; 3], &anchors, &o).expect_err("ragged");
        assert!(e.to_string().contains("17 values, not 3 anchors × 6"), "{e}");
        let e = decode(&regressors, &[0.0; 2], &anchors, &o).expect_err("short");
        assert!(e.to_string().contains("2 values for 3 anchors"), "{e}");
    }

    #[test]
    fn nan_scores_and_negative_sizes_are_dropped() {
        let o = DecodeOptions { coords: 4, keypoints: 0, scale: 1.0, score_clip: 100.0, min_score: 0.5 };
        let anchors = [anchor(0.5, 0.5), anchor(0.5, 0.5)];
        let d = decode(&[0.0, 0.0, 0.1, 0.1, 0.0, 0.0, -0.1, 0.1], &[f32::NAN, 3.0], &anchors, &o);
        assert_eq!(d.expect("decodes"), vec![]);
    }

    fn det(score: f32, bbox: [f32; 4], kp: [f32; 2]) -> Detection {
        Detection { score, bbox, keypoints: vec![kp] }
    }

    #[test]
    fn weighted_nms_blends_overlapping_boxes_by_score() {
        let dets = vec![
            det(0.6, [0.1, 0.1, 0.3, 0.3], [0.2, 0.2]),
            det(0.9, [0.0, 0.0, 0.2, 0.2], [0.1, 0.1]),
            // Overlaps the best by IoU 0.143 (< 0.3): its own face.
            det(0.8, [0.1, 0.1, 0.3, 0.3], [0.2, 0.2]),
            det(0.7, [0.6, 0.6, 0.8, 0.8], [0.7, 0.7]),
            det(0.65, [0.61, 0.6, 0.81, 0.8], [0.8, 0.8]),
        ];
        let kept = weighted_nms(dets, 0.3);
        assert_eq!(kept.len(), 3, "{kept:?}");
        assert_eq!(kept[0], det(0.9, [0.0, 0.0, 0.2, 0.2], [0.1, 0.1]), "alone: unchanged");
        assert_eq!(kept[1].score, 0.8, "the blend keeps its best score");
        let near = |a: f32, b: f32| (a - b).abs() < 1e-6;
        assert!(
            kept[1].bbox.iter().zip([0.1, 0.1, 0.3, 0.3]).all(|(a, b)| near(*a, b)),
            "equal boxes blend to themselves"
        );
        // 0.7 and 0.65 blend: x weighted 0.7 : 0.65.
        let w = |a: f32, b: f32| (a * 0.7 + b * 0.65) / 1.35;
        assert_eq!(kept[2].score, 0.7);
        assert!(near(kept[2].bbox[0], w(0.6, 0.61)) && near(kept[2].bbox[2], w(0.8, 0.81)), "{:?}", kept[2]);
        assert!(near(kept[2].bbox[1], 0.6) && near(kept[2].keypoints[0][0], w(0.7, 0.8)), "{:?}", kept[2]);
    }

    #[test]
    fn nms_at_the_threshold_keeps_both_and_iou_is_symmetric() {
        // IoU exactly 1/3 > 0.3: blended; at a threshold of 0.34 they are not.
        let a = [0.0, 0.0, 0.2, 0.1];
        let b = [0.1, 0.0, 0.3, 0.1];
        assert!((iou(&a, &b) - 1.0 / 3.0).abs() < 1e-6);
        assert_eq!(iou(&a, &b), iou(&b, &a));
        assert_eq!(iou(&a, &[0.2, 0.0, 0.4, 0.1]), 0.0, "touching is not overlapping");
        let two = vec![det(0.9, a, [0.0, 0.0]), det(0.8, b, [0.0, 0.0])];
        assert_eq!(weighted_nms(two.clone(), 0.3).len(), 1);
        assert_eq!(weighted_nms(two, 0.34).len(), 2);
        let degenerate = vec![det(0.9, [0.5, 0.5, 0.5, 0.5], [0.5, 0.5])];
        assert_eq!(weighted_nms(degenerate.clone(), 0.3), degenerate, "a zero-area box is kept alone");
    }
}
