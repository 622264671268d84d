//! Image detector pre- and post-processing without I/O: fitting an RGB
//! frame into the model's input as its card says (letterbox or stretch,
//! channel order, layout, normalization), decoding YOLOv8's
//! `[1, 4 + classes, anchors]` output, non-maximum suppression, and boxes
//! back in frame pixels.

use tandem::card::{ChannelOrder, InputCard, Resize};

/// Where a frame sits in the model's input.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Letterbox {
    /// Model pixels per frame pixel, across.
    pub scale_x: f32,
    /// Model pixels per frame pixel, down.
    pub scale_y: f32,
    /// Left padding, in model pixels.
    pub pad_x: f32,
    /// Top padding, in model pixels.
    pub pad_y: f32,
}

/// How frames are fed: the input's size and layout, and the card's fitting
/// and normalization.
#[derive(Clone, Debug)]
pub struct ImageSpec {
    /// Input width and height, in model pixels.
    pub width: usize,
    /// See `width`.
    pub height: usize,
    /// Channels last (`NHWC`) rather than first (`NCHW`).
    pub channels_last: bool,
    /// The card's input (channel order, resize, pad, scale, mean, std).
    pub card: InputCard,
}

/// Fits an RGB frame (`w × h`, row-major, 3 bytes per pixel) into the
/// input: letterboxed (aspect kept, centred on the pad value) or stretched,
/// channels reordered, each value normalized, in the input's layout.
/// Nearest-neighbour resampling.
pub fn fit(rgb: &[u8], w: usize, h: usize, spec: &ImageSpec) -> (Vec<f32>, Letterbox) {
    let (side_w, side_h) = (spec.width, spec.height);
    let (w1, h1) = (w.max(1) as f32, h.max(1) as f32);
    let (scale_x, scale_y) = match spec.card.resize.unwrap_or(Resize::Stretch) {
        Resize::Letterbox => {
            let s = (side_w as f32 / w1).min(side_h as f32 / h1);
            (s, s)
        }
        Resize::Stretch => (side_w as f32 / w1, side_h as f32 / h1),
    };
    let (nw, nh) = (
        ((w as f32 * scale_x).round() as usize).min(side_w),
        ((h as f32 * scale_y).round() as usize).min(side_h),
    );
    let (px, py) = ((side_w - nw) / 2, (side_h - nh) / 2);
    let order: [usize; 3] = match spec.card.channel_order.unwrap_or(ChannelOrder::Rgb) {
        ChannelOrder::Rgb => [0, 1, 2],
        ChannelOrder::Bgr => [2, 1, 0],
        ChannelOrder::Gray => [0, 0, 0],
    };
    let channels = if spec.card.channel_order == Some(ChannelOrder::Gray) { 1 } else { 3 };
    let plane = side_w * side_h;
    let at = |c: usize, x: usize, y: usize| {
        if spec.channels_last {
            (y * side_w + x) * channels + c
        } else {
            c * plane + y * side_w + x
        }
    };
    let pad = spec.card.pad.unwrap_or(0.0);
    let mut out = vec![0.0; channels * plane];
    for c in 0..channels {
        let padded = spec.card.normalize(pad, c);
        for y in 0..side_h {
            for x in 0..side_w {
                out[at(c, x, y)] = padded;
            }
        }
    }
    for y in 0..nh {
        let sy = ((y as f32 + 0.5) / scale_y).floor().min(h as f32 - 1.0) as usize;
        for x in 0..nw {
            let sx = ((x as f32 + 0.5) / scale_x).floor().min(w as f32 - 1.0) as usize;
            let pixel = &rgb[(sy * w + sx) * 3..][..3];
            for (c, &from) in order.iter().enumerate().take(channels) {
                let v = if channels == 1 {
                    0.299 * pixel[0] as f32 + 0.587 * pixel[1] as f32 + 0.114 * pixel[2] as f32
                } else {
                    pixel[from] as f32
                };
                out[at(c, x + px, y + py)] = spec.card.normalize(v, c);
            }
        }
    }
    (out, Letterbox { scale_x, scale_y, pad_x: px as f32, pad_y: py as f32 })
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
            let x0 = ((cx - bw / 2.0 - lb.pad_x) / lb.scale_x).clamp(0.0, w as f32);
            let y0 = ((cy - bh / 2.0 - lb.pad_y) / lb.scale_y).clamp(0.0, h as f32);
            let x1 = ((cx + bw / 2.0 - lb.pad_x) / lb.scale_x).clamp(0.0, w as f32);
            let y1 = ((cy + bh / 2.0 - lb.pad_y) / lb.scale_y).clamp(0.0, h as f32);
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
        let (t, lb) = fit(&rgb, 4, 2, &yolo_spec(8, 8, false, ChannelOrder::Rgb));
        assert_eq!(lb, Letterbox { scale_x: 2.0, scale_y: 2.0, pad_x: 0.0, pad_y: 2.0 });
        let grey = 114.0 / 255.0;
        let px = |c: usize, x: usize, y: usize| (t[c * 64 + y * 8 + x] * 1e5).round() / 1e5;
        let near = |v: f32| (v * 1e5).round() / 1e5;
        assert_eq!(px(0, 0, 0), near(grey), "padding is grey");
        assert_eq!((px(0, 0, 2), px(2, 0, 2)), (1.0, 0.0), "top-left of the frame is red");
        assert_eq!((px(0, 7, 5), px(2, 7, 5)), (0.0, 1.0), "bottom-right is blue");
        assert_eq!(px(0, 0, 6), near(grey), "below the frame");
        // The same frame channels last and blue first: the red pixel's
        // first channel is its blue value, in NHWC order.
        let (t, _) = fit(&rgb, 4, 2, &yolo_spec(8, 8, true, ChannelOrder::Bgr));
        let px = |c: usize, x: usize, y: usize| (t[(y * 8 + x) * 3 + c] * 1e5).round() / 1e5;
        assert_eq!((px(0, 0, 2), px(2, 0, 2)), (0.0, 1.0), "red is the last channel");
        assert_eq!(px(1, 0, 0), near(grey));
    }

    fn yolo_spec(width: usize, height: usize, channels_last: bool, order: ChannelOrder) -> ImageSpec {
        let card = tandem::card::ModelCard::parse(&format!(
            "[model]\nname = \"t\"\n[[input]]\nname = \"x\"\nkind = \"image\"\nresize = \"letterbox\"\n\
             pad = 114.0\nscale = {}\nchannel_order = \"{}\"",
            1.0 / 255.0,
            if order == ChannelOrder::Bgr { "bgr" } else { "rgb" }
        ))
        .expect("card");
        ImageSpec { width, height, channels_last, card: card.inputs[0].clone() }
    }

    #[test]
    fn stretching_fills_the_input_and_normalizes_per_channel() {
        // A 2 x 1 frame: one white, one black pixel, into 4 x 4, ImageNet-style.
        let rgb = [255, 255, 255, 0, 0, 0];
        let card = tandem::card::ModelCard::parse(
            "[model]\nname = \"t\"\n[[input]]\nname = \"x\"\nkind = \"image\"\nresize = \"stretch\"\n\
             scale = 0.00392156862745098\nmean = [0.5, 0.25, 0.0]\nstd = [0.5, 0.25, 1.0]",
        )
        .expect("card");
        let spec = ImageSpec { width: 4, height: 4, channels_last: false, card: card.inputs[0].clone() };
        let (t, lb) = fit(&rgb, 2, 1, &spec);
        assert_eq!(lb, Letterbox { scale_x: 2.0, scale_y: 4.0, pad_x: 0.0, pad_y: 0.0 });
        let px = |c: usize, x: usize, y: usize| t[c * 16 + y * 4 + x];
        assert_eq!([px(0, 0, 3), px(1, 1, 0), px(2, 0, 0)], [1.0, 3.0, 1.0], "white, normalized");
        assert_eq!([px(0, 3, 3), px(1, 2, 0), px(2, 3, 0)], [-1.0, -1.0, 0.0], "black, normalized");
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
        let lb = Letterbox { scale_x: 2.0, scale_y: 2.0, pad_x: 0.0, pad_y: 10.0 };
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
