//! A sensor's own values (u8 pixels, i16 PCM) and the floats a model is fed:
//! the widening a model card describes, `(v · scale − mean[c]) / std[c]`,
//! shared by the apps' preprocessing and the link's narrow encodings, so a
//! value narrowed on one side widens to the same bits on the other.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The type a sensor produces (the link may carry it, and the handheld widen it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SensorType {
    /// 8-bit pixels.
    U8,
    /// 16-bit PCM.
    I16,
    /// Floats.
    F32,
}

/// Why a widening cannot apply to a tensor.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum WideningError {
    /// Floats are not a narrower sensor type.
    #[error("a sensor type of {0:?} is not narrower than f32")]
    NotNarrow(SensorType),
    /// The layout has not one upper-case letter per axis.
    #[error("layout '{layout}' does not fit a rank-{rank} tensor")]
    Layout {
        /// The layout given.
        layout: String,
        /// The tensor's rank.
        rank: usize,
    },
    /// More than [`MAX_CHANNEL_PARAMS`] means or stds.
    #[error("too many per-channel parameters")]
    TooManyParams,
    /// A parameter is not finite, or the scale or a std is zero.
    #[error("scale, means and stds must be finite (scale and stds non-zero)")]
    Unusable,
}

/// Longest layout string a widening may carry (one letter per axis).
pub const MAX_LAYOUT: usize = 8;
/// Most per-channel means or stds a widening may carry.
pub const MAX_CHANNEL_PARAMS: usize = 4096;

/// How an input's sensor values become the model's floats.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Widening {
    /// The sensor's type: [`SensorType::U8`] or [`SensorType::I16`].
    pub ty: SensorType,
    /// One letter per axis (`NCHW`, `NHWC`, `NT`); `C` marks the channel axis.
    pub layout: String,
    /// Each sensor value is multiplied by this first.
    pub scale: f32,
    /// Then this is subtracted, per channel (one for all, or one per channel).
    pub mean: Vec<f32>,
    /// Then divided by this, per channel (non-zero).
    pub std: Vec<f32>,
}

/// `(v · scale − mean[c]) / std[c]`, where a one-value list applies to every
/// channel and a missing entry is the default (mean 0, std 1).
pub fn widen_value(v: f32, c: usize, scale: f32, mean: &[f32], std: &[f32]) -> f32 {
    (v * scale - pick(mean, c, 0.0)) / pick(std, c, 1.0)
}

/// Channel `c`'s entry of a per-channel list (its only entry for all).
fn pick(v: &[f32], c: usize, default: f32) -> f32 {
    if v.len() == 1 {
        v[0]
    } else {
        v.get(c).copied().unwrap_or(default)
    }
}

impl Widening {
    /// Checks it against a tensor of shape `shape`: a narrow type, a layout
    /// of one letter per axis, finite parameters, non-zero stds and scale.
    pub fn check(&self, shape: &[usize]) -> Result<(), WideningError> {
        if !matches!(self.ty, SensorType::U8 | SensorType::I16) {
            return Err(WideningError::NotNarrow(self.ty));
        }
        if self.layout.len() > MAX_LAYOUT
            || self.layout.chars().count() != shape.len()
            || !self.layout.chars().all(|c| c.is_ascii_uppercase())
        {
            return Err(WideningError::Layout { layout: self.layout.clone(), rank: shape.len() });
        }
        if self.mean.len() > MAX_CHANNEL_PARAMS || self.std.len() > MAX_CHANNEL_PARAMS {
            return Err(WideningError::TooManyParams);
        }
        let finite = |v: &[f32]| v.iter().all(|x| x.is_finite());
        let usable = self.scale.is_finite() && self.scale != 0.0 && finite(&self.mean) && finite(&self.std);
        if !usable || self.std.contains(&0.0) {
            return Err(WideningError::Unusable);
        }
        Ok(())
    }

    /// The channel axis, if the layout has one.
    pub fn channel_axis(&self) -> Option<usize> {
        self.layout.find('C')
    }

    /// (channels, elements per channel run) of a tensor of shape `shape`
    /// laid out as this says (one channel without a `C` axis).
    pub fn runs(&self, shape: &[usize]) -> (usize, usize) {
        match self.channel_axis().filter(|&a| a < shape.len()) {
            Some(a) => (shape[a], shape[a + 1..].iter().product()),
            None => (1, shape.iter().product()),
        }
    }

    /// The sensor type's smallest and largest values.
    pub fn range(&self) -> (f32, f32) {
        match self.ty {
            SensorType::U8 => (0.0, 255.0),
            _ => (-32768.0, 32767.0),
        }
    }

    /// Sensor value `q` of channel `c` as the model's float.
    pub fn widen(&self, q: f32, c: usize) -> f32 {
        widen_value(q, c, self.scale, &self.mean, &self.std)
    }

    /// The sensor value nearest to widening to `x` (rounded; maybe out of range).
    fn inverse(&self, x: f32, c: usize) -> f32 {
        ((x * pick(&self.std, c, 1.0) + pick(&self.mean, c, 0.0)) / self.scale).round()
    }

    /// The sensor value whose widening is exactly `x` (same bits), if any.
    pub fn narrow(&self, x: f32, c: usize) -> Option<i32> {
        let guess = self.inverse(x, c);
        let (lo, hi) = self.range();
        // The inverse is approximate: try the neighbours too.
        [guess, guess - 1.0, guess + 1.0]
            .into_iter()
            .filter(|q| (lo..=hi).contains(q))
            .find(|&q| self.widen(q, c).to_bits() == x.to_bits())
            .map(|q| q as i32)
    }

    /// The nearest sensor value to `x` (clamped to the type's range): for
    /// lossy encodings of the sensor's values.
    pub fn nearest(&self, x: f32, c: usize) -> i32 {
        let q = self.inverse(x, c);
        let (lo, hi) = self.range();
        if q.is_nan() {
            0
        } else {
            q.clamp(lo, hi) as i32
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pixels() -> Widening {
        Widening {
            ty: SensorType::U8,
            layout: "NCHW".into(),
            scale: 1.0 / 255.0,
            mean: vec![0.485, 0.456, 0.406],
            std: vec![0.229, 0.224, 0.225],
        }
    }

    #[test]
    fn every_pixel_narrows_back_to_itself() {
        let w = pixels();
        for c in 0..3 {
            for p in 0..=255 {
                assert_eq!(w.narrow(w.widen(p as f32, c), c), Some(p), "pixel {p} channel {c}");
            }
        }
        // One ulp off is not a pixel.
        let x = w.widen(100.0, 1);
        assert_eq!(w.narrow(f32::from_bits(x.to_bits() + 1), 1), None);
        assert_eq!(w.narrow(f32::NAN, 0), None);
        assert_eq!(w.nearest(f32::from_bits(x.to_bits() + 1), 1), 100);
        assert_eq!(w.nearest(1e9, 0), 255);
    }

    #[test]
    fn pcm_narrows_at_its_ends() {
        let w = Widening { ty: SensorType::I16, layout: "NT".into(), scale: 1.0, mean: vec![], std: vec![] };
        for q in [-32768, -1, 0, 1, 32767] {
            assert_eq!(w.narrow(q as f32, 0), Some(q));
        }
        assert_eq!(w.narrow(32768.0, 0), None);
        assert_eq!(w.narrow(0.5, 0), None);
        assert_eq!(w.runs(&[1, 1760]), (1, 1760));
    }

    #[test]
    fn check_refuses_what_cannot_widen() {
        assert!(pixels().check(&[1, 3, 4, 4]).is_ok());
        assert!(pixels().check(&[1, 3, 4]).expect_err("rank 3").to_string().contains("layout"));
        let bad = [
            Widening { ty: SensorType::F32, ..pixels() },
            Widening { scale: 0.0, ..pixels() },
            Widening { std: vec![0.0], ..pixels() },
            Widening { mean: vec![f32::NAN], ..pixels() },
            Widening { layout: "nchw".into(), ..pixels() },
        ];
        for w in bad {
            assert!(w.check(&[1, 3, 4, 4]).is_err(), "{w:?}");
        }
        assert_eq!(pixels().runs(&[1, 3, 4, 5]), (3, 20));
    }
}
