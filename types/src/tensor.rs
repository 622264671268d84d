//! Tensors as the wire carries them: an element type, a shape, and the
//! elements' little-endian bytes, borrowed where they already lie in a
//! buffer (a received frame's body, a tract tensor) and owned where they
//! were decoded. The runtime converts them to and from tract's tensors.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Element types that cross the link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum WireType {
    /// f32.
    F32,
    /// f64.
    F64,
    /// i64.
    I64,
    /// i32.
    I32,
    /// u8.
    U8,
    /// i8.
    I8,
    /// bool (one byte, 0 or 1).
    Bool,
}

impl WireType {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            WireType::F64 | WireType::I64 => 8,
            WireType::F32 | WireType::I32 => 4,
            WireType::U8 | WireType::I8 | WireType::Bool => 1,
        }
    }
}

/// Why bytes are not a tensor of the shape they claim.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum TensorError {
    /// The shape's byte size overflows.
    #[error("shape {0:?} overflows")]
    Overflow(Vec<usize>),
    /// The bytes are not the shape's size.
    #[error("{got} bytes for a {dtype:?} tensor of shape {shape:?} ({expected} bytes)")]
    Length {
        /// The element type.
        dtype: WireType,
        /// The shape.
        shape: Vec<usize>,
        /// Bytes the shape needs.
        expected: usize,
        /// Bytes given.
        got: usize,
    },
    /// A bool byte other than 0 or 1.
    #[error("a bool byte is not 0 or 1")]
    Bool,
}

/// Bytes a tensor of `dtype` and `shape` holds, if that does not overflow.
pub fn byte_len(dtype: WireType, shape: &[usize]) -> Result<usize, TensorError> {
    shape
        .iter()
        .try_fold(dtype.size(), |n, &d| n.checked_mul(d))
        .ok_or_else(|| TensorError::Overflow(shape.to_vec()))
}

/// A tensor's type, shape and little-endian bytes (its length checked).
#[derive(Clone, Debug, PartialEq)]
pub struct WireTensor<'a> {
    dtype: WireType,
    shape: Vec<usize>,
    data: Cow<'a, [u8]>,
}

impl<'a> WireTensor<'a> {
    /// A tensor of `dtype` and `shape` over `data`: refused when the bytes
    /// are not the shape's size, or a bool byte is not 0 or 1.
    pub fn new(
        dtype: WireType,
        shape: Vec<usize>,
        data: impl Into<Cow<'a, [u8]>>,
    ) -> Result<WireTensor<'a>, TensorError> {
        let data = data.into();
        let expected = byte_len(dtype, &shape)?;
        if data.len() != expected {
            return Err(TensorError::Length { dtype, shape, expected, got: data.len() });
        }
        if dtype == WireType::Bool && data.iter().any(|&b| b > 1) {
            return Err(TensorError::Bool);
        }
        Ok(WireTensor { dtype, shape, data })
    }

    /// An f32 tensor of `shape` holding `values`.
    pub fn from_f32(shape: Vec<usize>, values: &[f32]) -> Result<WireTensor<'static>, TensorError> {
        WireTensor::new(
            WireType::F32,
            shape,
            values.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>(),
        )
    }

    /// An i64 tensor of `shape` holding `values`.
    pub fn from_i64(shape: Vec<usize>, values: &[i64]) -> Result<WireTensor<'static>, TensorError> {
        WireTensor::new(
            WireType::I64,
            shape,
            values.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>(),
        )
    }

    /// The element type.
    pub fn dtype(&self) -> WireType {
        self.dtype
    }

    /// The dimensions.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The elements' little-endian bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.data
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.data.len() / self.dtype.size()
    }

    /// Whether it holds no element.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The values of an f32 tensor, else `None`.
    pub fn f32s(&self) -> Option<Vec<f32>> {
        (self.dtype == WireType::F32).then(|| {
            self.data.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
        })
    }

    /// The same tensor, borrowing these bytes.
    pub fn view(&self) -> WireTensor<'_> {
        WireTensor { dtype: self.dtype, shape: self.shape.clone(), data: Cow::Borrowed(&self.data) }
    }

    /// The same tensor owning its bytes (copied if borrowed).
    pub fn into_owned(self) -> WireTensor<'static> {
        WireTensor { dtype: self.dtype, shape: self.shape, data: Cow::Owned(self.data.into_owned()) }
    }

    /// Its parts: type, shape, bytes.
    pub fn into_parts(self) -> (WireType, Vec<usize>, Cow<'a, [u8]>) {
        (self.dtype, self.shape, self.data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_and_bools_are_checked() {
        let t = WireTensor::from_f32(vec![2, 2], &[1.0, -0.0, f32::NAN, 4.0]).expect("fits");
        assert_eq!((t.len(), t.bytes().len()), (4, 16));
        assert_eq!(t.f32s().expect("f32")[3], 4.0);
        assert!(matches!(
            WireTensor::new(WireType::F32, vec![3], vec![0u8; 8]),
            Err(TensorError::Length { expected: 12, got: 8, .. })
        ));
        assert_eq!(WireTensor::new(WireType::Bool, vec![2], vec![1u8, 2]), Err(TensorError::Bool));
        assert!(matches!(
            WireTensor::new(WireType::I64, vec![1 << 40, 1 << 40], vec![]),
            Err(TensorError::Overflow(_))
        ));
        let borrowed = t.view();
        assert!(matches!(borrowed.into_parts().2, Cow::Borrowed(_)));
    }
}
