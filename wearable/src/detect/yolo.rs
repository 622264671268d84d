//! YOLOv8 pre- and post-processing without I/O: letterboxing an RGB frame
//! into the model's square input, decoding the `[1, 4 + classes, anchors]`
//! output, non-maximum suppression, and boxes back in frame pixels.

/// Where a frame sits in the model's square input.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Letterbox {
    /// Model pixels per frame pixel.
    pub scale: f32,
    /// Left padding, in model pixels.
    pub pad_x: f32,
    /// Top padding, in model pixels.
    pub pad_y: f32,
}

/// Fits an RGB frame (`w × h`, row-major, 3 bytes per pixel) inside a
/// `side × side` square, centred on grey 114 (as YOLOv8 trains), scaled to
/// [0, 1], as CHW floats. Nearest-neighbour resampling.
pub fn letterbox(rgb: &[u8], w: usize, h: usize, side: usize) -> (Vec<f32>, Letterbox) {
    let scale = side as f32 / w.max(h).max(1) as f32;
    let (nw, nh) =
        (((w as f32 * scale).round() as usize).min(side), ((h as f32 * scale).round() as usize).min(side));
    let (px, py) = ((side - nw) / 2, (side - nh) / 2);
    let mut out = vec![114.0 / 255.0; 3 * side * side];
    for y in 0..nh {
        let sy = ((y as f32 + 0.5) / scale).floor().min(h as f32 - 1.0) as usize;
        for x in 0..nw {
            let sx = ((x as f32 + 0.5) / scale).floor().min(w as f32 - 1.0) as usize;
            for c in 0..3 {
                out[c * side * side + (y + py) * side + (x + px)] = rgb[(sy * w + sx) * 3 + c] as f32 / 255.0;
            }
        }
    }
    (out, Letterbox { scale, pad_x: px as f32, pad_y: py as f32 })
}

/// One detection, in frame pixels.
#[derive(Clone, Debug, PartialEq)]
pub struct Detection {
    /// Class index.
    pub class: usize,
    /// Its score.
    pub score: f32,
    /// Left, top, width, height.
    pub box_xywh: [f32; 4],
}

fn iou(a: &[f32; 4], b: &[f32; 4]) -> f32 {
    let (x1, y1) = (a[0].max(b[0]), a[1].max(b[1]));
    let (x2, y2) = ((a[0] + a[2]).min(b[0] + b[2]), (a[1] + a[3]).min(b[1] + b[3]));
    let inter = (x2 - x1).max(0.0) * (y2 - y1).max(0.0);
    let union = a[2] * a[3] + b[2] * b[3] - inter;
    if union > 0.0 {
        inter / union
    } else {
        0.0
    }
}

/// Decodes YOLOv8's output (`4 + classes` rows of `anchors` values: cx, cy,
/// w, h in model pixels, then class scores), keeps anchors whose best score
/// reaches `conf`, maps them into a `w × h` frame, and suppresses overlaps
/// above `iou_max` (per class, best first).
#[allow(clippy::too_many_arguments)]
pub fn decode(
    output: &[f32],
    classes: usize,
    lb: Letterbox,
    w: usize,
    h: usize,
    conf: f32,
    iou_max: f32,
) -> Vec<Detection> {
    let rows = 4 + classes;
    if classes == 0 || !output.len().is_multiple_of(rows) {
        return vec![];
    }
    let anchors = output.len() / rows;
    let at = |r: usize, a: usize| output[r * anchors + a];
    let mut found: Vec<Detection> = (0..anchors)
        .filter_map(|a| {
            let (class, score) = (0..classes)
                .map(|c| (c, at(4 + c, a)))
                .fold((0, f32::NEG_INFINITY), |best, x| if x.1 > best.1 { x } else { best });
            if score < conf {
                return None;
            }
            let (cx, cy, bw, bh) = (at(0, a), at(1, a), at(2, a), at(3, a));
            let x0 = ((cx - bw / 2.0 - lb.pad_x) / lb.scale).clamp(0.0, w as f32);
            let y0 = ((cy - bh / 2.0 - lb.pad_y) / lb.scale).clamp(0.0, h as f32);
            let x1 = ((cx + bw / 2.0 - lb.pad_x) / lb.scale).clamp(0.0, w as f32);
            let y1 = ((cy + bh / 2.0 - lb.pad_y) / lb.scale).clamp(0.0, h as f32);
            Some(Detection { class, score, box_xywh: [x0, y0, x1 - x0, y1 - y0] })
        })
        .collect();
    found.sort_by(|a, b| b.score.total_cmp(&a.score));
    let mut kept: Vec<Detection> = vec![];
    for d in found {
        if kept.iter().all(|k| k.class != d.class || iou(&k.box_xywh, &d.box_xywh) <= iou_max) {
            kept.push(d);
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn letterbox_centres_the_frame_and_keeps_its_pixels() {
        // A 4 x 2 frame: left half red, right half blue.
        let mut rgb = vec![0u8; 4 * 2 * 3];
        for y in 0..2 {
            for x in 0..4 {
                let i = (y * 4 + x) * 3;
                if x < 2 {
                    rgb[i] = 255
                } else {
                    rgb[i + 2] = 255
                }
            }
        }
        let (t, lb) = letterbox(&rgb, 4, 2, 8);
        assert_eq!(lb, Letterbox { scale: 2.0, pad_x: 0.0, pad_y: 2.0 });
        let px = |c: usize, x: usize, y: usize| t[c * 64 + y * 8 + x];
        assert_eq!(px(0, 0, 0), 114.0 / 255.0, "padding is grey");
        assert_eq!((px(0, 0, 2), px(2, 0, 2)), (1.0, 0.0), "top-left of the frame is red");
        assert_eq!((px(0, 7, 5), px(2, 7, 5)), (0.0, 1.0), "bottom-right is blue");
        assert_eq!(px(0, 0, 6), 114.0 / 255.0, "below the frame");
    }

    #[test]
    fn decoding_maps_boxes_back_and_suppresses_overlaps_per_class() {
        // 2 classes, 4 anchors: a, b overlap (class 0), c is class 1 at the
        // same place, d scores too low.
        let cols = [
            [20.0, 20.0, 10.0, 10.0, 0.9, 0.1],
            [21.0, 20.0, 10.0, 10.0, 0.8, 0.0],
            [20.0, 20.0, 10.0, 10.0, 0.1, 0.7],
            [50.0, 50.0, 4.0, 4.0, 0.1, 0.1],
        ];
        let mut out = vec![0.0; 6 * 4];
        for (a, col) in cols.iter().enumerate() {
            for (r, v) in col.iter().enumerate() {
                out[r * 4 + a] = *v;
            }
        }
        let lb = Letterbox { scale: 2.0, pad_x: 0.0, pad_y: 10.0 };
        let d = decode(&out, 2, lb, 40, 20, 0.25, 0.45);
        assert_eq!(d.len(), 2, "{d:?}");
        assert_eq!((d[0].class, d[0].score), (0, 0.9));
        assert_eq!(
            d[0].box_xywh,
            [7.5, 2.5, 5.0, 5.0],
            "model (15..25, 15..25) → frame (7.5..12.5, 2.5..7.5)"
        );
        assert_eq!((d[1].class, d[1].score), (1, 0.7), "another class at the same place is kept");
        assert!(
            decode(&out[..5], 2, lb, 40, 20, 0.25, 0.45).is_empty(),
            "a ragged output decodes to nothing"
        );
    }
}
