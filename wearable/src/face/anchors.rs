//! MediaPipe's SSD anchors (`SsdAnchorsCalculator`): one anchor per cell of
//! each feature map and per aspect ratio, layers of the same stride sharing
//! one feature map, as the face and palm detectors decode their boxes.

/// How the anchors are laid out (`SsdAnchorsCalculatorOptions`).
#[derive(Clone, Debug, PartialEq)]
pub struct AnchorOptions {
    /// Feature-map layers.
    pub num_layers: usize,
    /// The first layer's anchor scale, relative to the input.
    pub min_scale: f32,
    /// The last layer's.
    pub max_scale: f32,
    /// The model's input width, in pixels.
    pub input_width: usize,
    /// Its height, in pixels.
    pub input_height: usize,
    /// An anchor's centre within its cell, across (0.5: the middle).
    pub offset_x: f32,
    /// The same, down.
    pub offset_y: f32,
    /// Each layer's stride, in input pixels.
    pub strides: Vec<usize>,
    /// One anchor per cell for each of these (width / height).
    pub aspect_ratios: Vec<f32>,
    /// One more anchor per cell at the geometric mean of this layer's and
    /// the next one's scale, at this aspect ratio (0: none).
    pub interpolated_scale_aspect_ratio: f32,
    /// Every anchor 1 × 1: the model regresses sizes itself.
    pub fixed_anchor_size: bool,
}

impl AnchorOptions {
    /// `face_detection_short_range`'s: 128 × 128, strides 8, 16, 16, 16,
    /// two anchors per cell and layer (2 at stride 8, 6 at stride 16), fixed
    /// size: 512 + 384 = 896 anchors.
    pub fn face_short_range() -> AnchorOptions {
        AnchorOptions {
            num_layers: 4,
            min_scale: 0.148_437_5,
            max_scale: 0.75,
            input_width: 128,
            input_height: 128,
            offset_x: 0.5,
            offset_y: 0.5,
            strides: vec![8, 16, 16, 16],
            aspect_ratios: vec![1.0],
            interpolated_scale_aspect_ratio: 1.0,
            fixed_anchor_size: true,
        }
    }
}

/// One anchor, relative to the model's input (0..1).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Anchor {
    /// Centre, across.
    pub x_center: f32,
    /// Centre, down.
    pub y_center: f32,
    /// Width.
    pub w: f32,
    /// Height.
    pub h: f32,
}

fn layer_scale(min: f32, max: f32, layer: usize, layers: usize) -> f32 {
    if layers == 1 {
        (min + max) * 0.5
    } else {
        min + (max - min) * layer as f32 / (layers - 1) as f32
    }
}

/// The anchors, in the order the model's outputs list them: layer by
/// layer, row by row, cell by cell, then one per aspect ratio.
pub fn ssd_anchors(o: &AnchorOptions) -> Vec<Anchor> {
    let mut anchors = vec![];
    let layers = o.strides.len().min(o.num_layers);
    let mut layer = 0;
    while layer < layers {
        let mut sizes: Vec<(f32, f32)> = vec![];
        let mut last = layer;
        while last < layers && o.strides[last] == o.strides[layer] {
            let scale = layer_scale(o.min_scale, o.max_scale, last, layers);
            for &ratio in &o.aspect_ratios {
                sizes.push((scale * ratio.sqrt(), scale / ratio.sqrt()));
            }
            if o.interpolated_scale_aspect_ratio > 0.0 {
                let next = if last == layers - 1 {
                    1.0
                } else {
                    layer_scale(o.min_scale, o.max_scale, last + 1, layers)
                };
                let (mean, r) = ((scale * next).sqrt(), o.interpolated_scale_aspect_ratio.sqrt());
                sizes.push((mean * r, mean / r));
            }
            last += 1;
        }
        let stride = o.strides[layer].max(1);
        let (rows, cols) = (o.input_height.div_ceil(stride), o.input_width.div_ceil(stride));
        for y in 0..rows {
            for x in 0..cols {
                for &(w, h) in &sizes {
                    let (w, h) = if o.fixed_anchor_size { (1.0, 1.0) } else { (w, h) };
                    anchors.push(Anchor {
                        x_center: (x as f32 + o.offset_x) / cols as f32,
                        y_center: (y as f32 + o.offset_y) / rows as f32,
                        w,
                        h,
                    });
                }
            }
        }
        layer = last;
    }
    anchors
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_short_range_detector_has_896_anchors_two_per_cell_and_layer() {
        let a = ssd_anchors(&AnchorOptions::face_short_range());
        assert_eq!(a.len(), 896);
        // Stride 8: a 16 x 16 map, 2 anchors per cell, the first at the first cell's centre.
        assert_eq!(a[0], Anchor { x_center: 0.5 / 16.0, y_center: 0.5 / 16.0, w: 1.0, h: 1.0 });
        assert_eq!(a[1], a[0], "two anchors per cell");
        assert_eq!(a[2].x_center, 1.5 / 16.0);
        assert_eq!(a[511].x_center, 15.5 / 16.0);
        assert_eq!(a[511].y_center, 15.5 / 16.0);
        // Stride 16: three layers share an 8 x 8 map, 6 anchors per cell.
        assert_eq!((a[512].x_center, a[512].y_center), (0.5 / 8.0, 0.5 / 8.0));
        assert!(a[512..518].iter().all(|x| *x == a[512]));
        assert_eq!(a[518].x_center, 1.5 / 8.0);
        assert_eq!((a[895].x_center, a[895].y_center), (7.5 / 8.0, 7.5 / 8.0));
    }

    #[test]
    fn free_anchor_sizes_follow_the_scales_and_ratios() {
        // Two layers of different strides on a 32 x 32 input, ratios 1 and 2.
        let o = AnchorOptions {
            num_layers: 2,
            min_scale: 0.2,
            max_scale: 0.6,
            input_width: 32,
            input_height: 32,
            strides: vec![16, 32],
            aspect_ratios: vec![1.0, 2.0],
            fixed_anchor_size: false,
            ..AnchorOptions::face_short_range()
        };
        let a = ssd_anchors(&o);
        assert_eq!(a.len(), 2 * 2 * 3 + 3, "2 x 2 cells then 1 cell, 3 anchors each");
        let near = |x: f32, y: f32| (x - y).abs() < 1e-6;
        assert!(near(a[0].w, 0.2) && near(a[0].h, 0.2));
        assert!(near(a[1].w, 0.2 * 2f32.sqrt()) && near(a[1].h, 0.2 / 2f32.sqrt()));
        let mean = (0.2f32 * 0.6).sqrt();
        assert!(near(a[2].w, mean) && near(a[2].h, mean), "interpolated with the next layer's scale");
        assert!(near(a[14].w, 0.6f32.sqrt()), "the last layer interpolates with 1.0");
        assert_eq!((a[12].x_center, a[12].y_center), (0.5, 0.5));
    }
}
