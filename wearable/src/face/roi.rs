//! Regions of a frame and the pixels in them, without I/O: the detector's
//! letterbox and the face's crop as MediaPipe's `ImageToTensorCalculator`
//! takes them (a rotated rectangle warped onto the model's input, bilinear,
//! rounded to bytes), the face's region from its detection
//! (`DetectionsToRectsCalculator` with the eyes' rotation, then
//! `RectTransformationCalculator`: square on the long side, scaled), and
//! points projected back into the frame (`LandmarkProjectionCalculator`).

use super::detections::Detection;

/// A rotated rectangle in frame pixels.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Roi {
    /// Centre, across (pixels).
    pub cx: f64,
    /// Centre, down (pixels).
    pub cy: f64,
    /// Width (pixels), along the rectangle's own first axis.
    pub width: f64,
    /// Height (pixels).
    pub height: f64,
    /// Clockwise in the image (y down), in radians.
    pub rotation: f64,
}

/// What a warp reads outside the frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Border {
    /// Black (the detector's letterbox).
    Zero,
    /// The nearest edge pixel (the landmark crop).
    Replicate,
}

/// MediaPipe's `NormalizeRadians`: into [-π, π).
fn normalize_radians(a: f64) -> f64 {
    use std::f64::consts::PI;
    a - 2.0 * PI * ((a + PI) / (2.0 * PI)).floor()
}

impl Roi {
    /// A `w × h` frame letterboxed into a square input: the square on its
    /// long side, centred (the padding falls outside the frame).
    pub fn letterbox(w: usize, h: usize) -> Roi {
        let side = w.max(h) as f64;
        Roi { cx: w as f64 / 2.0, cy: h as f64 / 2.0, width: side, height: side, rotation: 0.0 }
    }

    /// The face landmark model's region for a face detected in frame
    /// pixels: centred on the box, a square of `scale` times its long side,
    /// turned so that keypoint 0 (the right eye) and keypoint 1 (the left
    /// eye) lie level.
    pub fn around_face(face: &Detection, scale: f64) -> Roi {
        let b = face.bbox.map(f64::from);
        let rotation = match (face.keypoints.first(), face.keypoints.get(1)) {
            (Some(a), Some(e)) => {
                let (dx, dy) = (f64::from(e[0] - a[0]), f64::from(e[1] - a[1]));
                normalize_radians(-(-dy).atan2(dx))
            }
            _ => 0.0,
        };
        let side = (b[2] - b[0]).max(b[3] - b[1]) * scale;
        Roi { cx: (b[0] + b[2]) / 2.0, cy: (b[1] + b[3]) / 2.0, width: side, height: side, rotation }
    }

    /// The frame pixel at (u, v), relative to the rectangle (0..1 across
    /// its width and height, (0.5, 0.5) its centre).
    pub fn frame_point(&self, u: f64, v: f64) -> [f64; 2] {
        let (s, t) = ((u - 0.5) * self.width, (v - 0.5) * self.height);
        let (sin, cos) = self.rotation.sin_cos();
        [self.cx + cos * s - sin * t, self.cy + sin * s + cos * t]
    }

    /// A detection decoded relative to this rectangle, in frame pixels
    /// (MediaPipe's letterbox removal). The box is the image of its two
    /// corners: exact for an unrotated rectangle, which the detector's is.
    pub fn project_detection(&self, d: &Detection) -> Detection {
        let [x0, y0] = self.frame_point(f64::from(d.bbox[0]), f64::from(d.bbox[1]));
        let [x1, y1] = self.frame_point(f64::from(d.bbox[2]), f64::from(d.bbox[3]));
        Detection {
            score: d.score,
            bbox: [x0.min(x1), y0.min(y1), x0.max(x1), y0.max(y1)].map(|v| v as f32),
            keypoints: d
                .keypoints
                .iter()
                .map(|k| self.frame_point(f64::from(k[0]), f64::from(k[1])).map(|v| v as f32))
                .collect(),
        }
    }

    /// Landmarks as a `side × side` model gives them (x, y, z in its input
    /// pixels, three values each) in frame pixels; z on the same scale as x.
    pub fn project_landmarks(&self, raw: &[f32], side: usize) -> Vec<[f32; 3]> {
        let side = side as f64;
        raw.chunks_exact(3)
            .map(|p| {
                let [x, y] = self.frame_point(f64::from(p[0]) / side, f64::from(p[1]) / side);
                [x as f32, y as f32, (f64::from(p[2]) / side * self.width) as f32]
            })
            .collect()
    }
}

/// The rectangle `roi` of an RGB frame (`w × h`, 3 bytes per pixel)
/// warped onto `out_w × out_h` RGB bytes: its corners onto the output's
/// corners, output pixel (u, v) read at `roi.frame_point(u / out_w, v / out_h)`
/// with pixel centres at whole coordinates, bilinear, rounded.
pub fn warp(
    rgb: &[u8],
    w: usize,
    h: usize,
    roi: &Roi,
    out_w: usize,
    out_h: usize,
    border: Border,
) -> Vec<u8> {
    let mut out = vec![0u8; out_w * out_h * 3];
    if w == 0 || h == 0 || rgb.len() < w * h * 3 {
        return out;
    }
    let pixel = |x: i64, y: i64, c: usize| -> f64 {
        let inside = x >= 0 && y >= 0 && (x as usize) < w && (y as usize) < h;
        if !inside && border == Border::Zero {
            return 0.0;
        }
        let (x, y) = (x.clamp(0, w as i64 - 1) as usize, y.clamp(0, h as i64 - 1) as usize);
        f64::from(rgb[(y * w + x) * 3 + c])
    };
    for v in 0..out_h {
        for u in 0..out_w {
            let [x, y] = roi.frame_point(u as f64 / out_w as f64, v as f64 / out_h as f64);
            if !(x.is_finite() && y.is_finite()) {
                // A region from a non-finite detection: nothing to sample (the pixel stays 0).
                continue;
            }
            let (x0, y0) = (x.floor(), y.floor());
            let (fx, fy) = (x - x0, y - y0);
            let (x0, y0) = (x0 as i64, y0 as i64);
            for c in 0..3 {
                // `as i64` saturates far outside the frame: +1 must not overflow.
                let (x1, y1) = (x0.saturating_add(1), y0.saturating_add(1));
                let top = pixel(x0, y0, c) * (1.0 - fx) + pixel(x1, y0, c) * fx;
                let bottom = pixel(x0, y1, c) * (1.0 - fx) + pixel(x1, y1, c) * fx;
                let value = top * (1.0 - fy) + bottom * fy;
                out[(v * out_w + u) * 3 + c] = (value + 0.5).floor().clamp(0.0, 255.0) as u8;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wide_frame_is_letterboxed_on_its_long_side() {
        let roi = Roi::letterbox(200, 100);
        assert_eq!((roi.width, roi.height), (200.0, 200.0));
        assert_eq!(roi.frame_point(0.0, 0.0), [0.0, -50.0], "the top padding is above the frame");
        assert_eq!(roi.frame_point(1.0, 0.75), [200.0, 100.0], "the frame ends three quarters down");
        // A detection in the square's coordinates, back in the frame's.
        let d = Detection { score: 0.9, bbox: [0.25, 0.25, 0.5, 0.5], keypoints: vec![[0.5, 0.75]] };
        let p = roi.project_detection(&d);
        assert_eq!(p.bbox, [50.0, 0.0, 100.0, 50.0]);
        assert_eq!(p.keypoints, vec![[100.0, 100.0]]);
        assert_eq!(p.score, 0.9);
    }

    #[test]
    fn the_face_region_is_square_scaled_and_turned_by_the_eyes() {
        // Eyes level: no rotation; a 40 x 60 box gives a 90 px square.
        let level = Detection {
            score: 1.0,
            bbox: [10.0, 20.0, 50.0, 80.0],
            keypoints: vec![[20.0, 40.0], [40.0, 40.0]],
        };
        let roi = Roi::around_face(&level, 1.5);
        assert_eq!(roi, Roi { cx: 30.0, cy: 50.0, width: 90.0, height: 90.0, rotation: 0.0 });
        // The left eye (keypoint 1) lower than the right one by as much as it
        // is further across: the head leans 45° clockwise in the image.
        let leaning = Detection { keypoints: vec![[20.0, 40.0], [40.0, 60.0]], ..level.clone() };
        let roi = Roi::around_face(&leaning, 1.5);
        assert!((roi.rotation - std::f64::consts::FRAC_PI_4).abs() < 1e-12, "{}", roi.rotation);
        // The crop's right edge's middle lies down and right of the centre, along the eyes.
        let [x, y] = roi.frame_point(1.0, 0.5);
        let d = 45.0 / 2f64.sqrt();
        assert!((x - (30.0 + d)).abs() < 1e-9 && (y - (50.0 + d)).abs() < 1e-9, "{x} {y}");
        // Upside down: the left eye to the left.
        let flipped = Detection { keypoints: vec![[40.0, 40.0], [20.0, 40.0]], ..level };
        assert!((Roi::around_face(&flipped, 1.5).rotation.abs() - std::f64::consts::PI).abs() < 1e-12);
    }

    #[test]
    fn landmarks_project_through_the_rotation() {
        let roi =
            Roi { cx: 100.0, cy: 50.0, width: 20.0, height: 20.0, rotation: std::f64::consts::FRAC_PI_2 };
        // The model's centre, its right edge's middle, and a depth.
        let marks = roi.project_landmarks(&[96.0, 96.0, 0.0, 192.0, 96.0, 0.0, 96.0, 96.0, -19.2], 192);
        let near = |a: [f32; 3], b: [f32; 3]| a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-4);
        assert!(near(marks[0], [100.0, 50.0, 0.0]), "{:?}", marks[0]);
        assert!(near(marks[1], [100.0, 60.0, 0.0]), "turned 90° clockwise, right is down: {:?}", marks[1]);
        assert!(near(marks[2], [100.0, 50.0, -2.0]), "z scales as x does: {:?}", marks[2]);
    }

    #[test]
    fn warping_samples_bilinearly_with_either_border() {
        // A 2 x 1 frame: black, white.
        let rgb = [0, 0, 0, 255, 255, 255];
        // Its own rectangle onto 4 x 2 pixels: u reads x = u / 2.
        let roi = Roi { cx: 1.0, cy: 0.5, width: 2.0, height: 1.0, rotation: 0.0 };
        let out = warp(&rgb, 2, 1, &roi, 4, 2, Border::Replicate);
        let row: Vec<u8> = out.chunks(3).take(4).map(|p| p[0]).collect();
        assert_eq!(row, [0, 128, 255, 255], "x = 0, 0.5, 1, 1.5 (past the edge: replicated)");
        let out = warp(&rgb, 2, 1, &roi, 4, 2, Border::Zero);
        let rows: Vec<u8> = out.chunks(3).map(|p| p[0]).collect();
        assert_eq!(rows, [0, 128, 255, 128, 0, 64, 128, 64], "half past the edges: black mixed in");
        // A 180° turn about the frame's first pixel's corner reads it backwards.
        let turned = Roi { rotation: std::f64::consts::PI, cx: 0.0, cy: -0.5, ..roi };
        let out = warp(&rgb, 2, 1, &turned, 2, 1, Border::Replicate);
        assert_eq!(out.chunks(3).map(|p| p[0]).collect::<Vec<_>>(), [255, 0]);
        assert_eq!(warp(&rgb, 0, 0, &roi, 2, 2, Border::Zero), vec![0; 12], "an empty frame reads black");
    }

    /// A region from a detection gone wrong (infinite or NaN regressors, or
    /// far past any frame) reads black or the border, and never panics.
    #[test]
    fn a_region_far_outside_or_not_finite_is_no_panic() {
        let rgb = [0, 0, 0, 255, 255, 255];
        for cx in [f64::INFINITY, f64::NAN, 1e300, -1e300] {
            let roi = Roi { cx, cy: 0.5, width: 2.0, height: 1.0, rotation: 0.0 };
            let out = warp(&rgb, 2, 1, &roi, 2, 2, Border::Zero);
            assert_eq!(out, vec![0; 12], "cx {cx}");
            let out = warp(&rgb, 2, 1, &roi, 2, 2, Border::Replicate);
            assert_eq!(out.len(), 12, "cx {cx}");
        }
    }
}
