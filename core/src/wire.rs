//! tract's tensors as the wire carries them ([`WireTensor`]: a type, a
//! shape, little-endian bytes) and back: the one place the protocol's
//! tract-free tensors meet tract.

use tandem_types::{WireTensor, WireType};
use tract_onnx::prelude::{tract_ndarray, DatumType, Tensor};

use crate::error::{Error, Result};

/// The tract type of a wire type.
pub fn datum_type(w: WireType) -> DatumType {
    match w {
        WireType::F32 => DatumType::F32,
        WireType::F64 => DatumType::F64,
        WireType::I64 => DatumType::I64,
        WireType::I32 => DatumType::I32,
        WireType::U8 => DatumType::U8,
        WireType::I8 => DatumType::I8,
        WireType::Bool => DatumType::Bool,
    }
}

/// The wire type of a tract type, if it can cross.
pub fn wire_type(dt: DatumType) -> Option<WireType> {
    Some(match dt {
        DatumType::F32 => WireType::F32,
        DatumType::F64 => WireType::F64,
        DatumType::I64 => WireType::I64,
        DatumType::I32 => WireType::I32,
        DatumType::U8 => WireType::U8,
        DatumType::I8 => WireType::I8,
        DatumType::Bool => WireType::Bool,
        _ => return None,
    })
}

/// `t` as a wire tensor borrowing its bytes (little-endian hosts only).
pub fn to_wire(t: &Tensor) -> Result<WireTensor<'_>> {
    let dtype = wire_type(t.datum_type())
        .ok_or_else(|| Error::Link(format!("type {:?} cannot cross the link", t.datum_type())))?;
    WireTensor::new(dtype, t.shape().to_vec(), t.as_bytes()).map_err(|e| Error::Link(e.to_string()))
}

/// A tract tensor from a wire tensor (one copy of its bytes).
pub fn from_wire(t: WireTensor<'_>) -> Result<Tensor> {
    let (dtype, shape, data) = t.into_parts();
    let bad = |e: String| Error::Link(format!("a {dtype:?} tensor of shape {shape:?}: {e}"));
    if dtype == WireType::F32 {
        // The common case, built in one pass (no zeroed buffer to overwrite).
        let values: Vec<f32> =
            data.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        return tract_ndarray::ArrayD::from_shape_vec(shape.clone(), values)
            .map(Tensor::from)
            .map_err(|e| bad(e.to_string()));
    }
    let mut out = Tensor::zero_dt(datum_type(dtype), &shape).map_err(|e| bad(e.to_string()))?;
    out.as_bytes_mut().copy_from_slice(&data);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensors_cross_with_their_bits_and_types_that_cannot_are_named() {
        let x = Tensor::from(tract_ndarray::arr2(&[[1.5f32, -0.0], [f32::NAN, 7.0]]));
        let back = from_wire(to_wire(&x).expect("f32 crosses")).expect("back");
        assert_eq!(back.as_bytes(), x.as_bytes());
        assert_eq!(back.shape(), &[2, 2]);
        let ids = Tensor::from(tract_ndarray::arr1(&[3i64, -9]));
        assert_eq!(from_wire(to_wire(&ids).expect("i64")).expect("back"), ids);
        let mask = Tensor::from(tract_ndarray::arr1(&[true, false]));
        assert_eq!(from_wire(to_wire(&mask).expect("bool")).expect("back"), mask);
        let half = Tensor::from(tract_ndarray::arr1(&[tract_onnx::prelude::f16::from_f32(1.0)]));
        assert!(to_wire(&half).expect_err("f16").to_string().contains("cannot cross"));
    }
}
