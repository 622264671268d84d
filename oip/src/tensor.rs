//! Named tensors as the protocol carries them ([`OipTensor`]: a datatype,
//! a shape, little-endian element bytes) and the protocol's names of
//! Tandem's element types ([`datatype_name`], [`parse_datatype`]).

use tandem_types::{WireTensor, WireType};

use crate::error::OipError;

/// Every datatype the protocol names (its specification's list), for
/// telling a datatype Tandem does not carry from one that does not exist.
pub const OIP_DATATYPES: [&str; 14] = [
    "BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64", "FP16", "FP32", "FP64",
    "BF16", "BYTES",
];

/// The protocol's name of an element type.
pub fn datatype_name(t: WireType) -> &'static str {
    match t {
        WireType::F32 => "FP32",
        WireType::F64 => "FP64",
        WireType::I64 => "INT64",
        WireType::I32 => "INT32",
        WireType::U8 => "UINT8",
        WireType::I8 => "INT8",
        WireType::Bool => "BOOL",
    }
}

/// The element type a protocol datatype names, if Tandem carries it
/// (`None` for FP16, BYTES, UINT16 and the others).
pub fn parse_datatype(name: &str) -> Option<WireType> {
    Some(match name {
        "FP32" => WireType::F32,
        "FP64" => WireType::F64,
        "INT64" => WireType::I64,
        "INT32" => WireType::I32,
        "UINT8" => WireType::U8,
        "INT8" => WireType::I8,
        "BOOL" => WireType::Bool,
        _ => return None,
    })
}

/// A named tensor: its datatype, its shape and its elements'
/// little-endian bytes (`shape`'s product × the element size of them; a
/// bool is one byte, 0 or 1). Build it with [`OipTensor::new`], which
/// checks that; the client checks again before sending.
#[derive(Clone, Debug, PartialEq)]
pub struct OipTensor {
    /// The model's name for the tensor.
    pub name: String,
    /// The element type.
    pub datatype: WireType,
    /// The dimensions.
    pub shape: Vec<usize>,
    /// The elements' little-endian bytes, in row-major order.
    pub data: Vec<u8>,
}

impl OipTensor {
    /// A tensor of `datatype` and `shape` over `data`: refused when the
    /// bytes are not the shape's size, or a bool byte is not 0 or 1.
    pub fn new(
        name: impl Into<String>,
        datatype: WireType,
        shape: Vec<usize>,
        data: Vec<u8>,
    ) -> Result<OipTensor, OipError> {
        let t = OipTensor { name: name.into(), datatype, shape, data };
        t.check()?;
        Ok(t)
    }

    /// An FP32 tensor of `shape` holding `values`.
    pub fn from_f32(
        name: impl Into<String>,
        shape: Vec<usize>,
        values: &[f32],
    ) -> Result<OipTensor, OipError> {
        OipTensor::new(name, WireType::F32, shape, values.iter().flat_map(|v| v.to_le_bytes()).collect())
    }

    /// A tensor from a wire tensor (its bytes copied).
    pub fn from_wire(name: impl Into<String>, t: &WireTensor<'_>) -> OipTensor {
        OipTensor {
            name: name.into(),
            datatype: t.dtype(),
            shape: t.shape().to_vec(),
            data: t.bytes().to_vec(),
        }
    }

    /// The tensor as a wire tensor borrowing its bytes (checked again: the
    /// fields are public).
    pub fn to_wire(&self) -> Result<WireTensor<'_>, OipError> {
        WireTensor::new(self.datatype, self.shape.clone(), &self.data[..])
            .map_err(|e| OipError::InvalidTensor { name: self.name.clone(), reason: e.to_string() })
    }

    /// The values of an FP32 tensor, else `None`.
    pub fn f32s(&self) -> Option<Vec<f32>> {
        (self.datatype == WireType::F32).then(|| {
            self.data.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
        })
    }

    /// The number of elements (the shape's product).
    pub fn len(&self) -> usize {
        self.data.len() / self.datatype.size()
    }

    /// Whether it holds no element.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Checks the bytes against the shape (and bool bytes).
    pub fn check(&self) -> Result<(), OipError> {
        self.to_wire().map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_wire_type_has_a_protocol_name_and_back() {
        for t in [
            WireType::F32,
            WireType::F64,
            WireType::I64,
            WireType::I32,
            WireType::U8,
            WireType::I8,
            WireType::Bool,
        ] {
            assert_eq!(parse_datatype(datatype_name(t)), Some(t));
            assert!(OIP_DATATYPES.contains(&datatype_name(t)));
        }
        assert_eq!(parse_datatype("FP16"), None);
        assert_eq!(parse_datatype("fp32"), None, "names are case-sensitive");
    }

    #[test]
    fn tensors_whose_bytes_do_not_fit_are_refused_by_name() {
        let e = OipTensor::new("x", WireType::I64, vec![2, 3], vec![0; 40]).expect_err("48 bytes needed");
        assert!(e.to_string().contains("'x'") && e.to_string().contains("48"), "{e}");
        let e = OipTensor::new("m", WireType::Bool, vec![2], vec![1, 2]).expect_err("bool byte 2");
        assert!(e.to_string().contains("'m'"), "{e}");
        let e = OipTensor::new("o", WireType::F32, vec![usize::MAX, 2], vec![]).expect_err("overflow");
        assert!(e.to_string().contains("overflows"), "{e}");
        let t = OipTensor::from_f32("y", vec![2], &[1.5, -2.0]).expect("fits");
        assert_eq!(t.f32s(), Some(vec![1.5, -2.0]));
        assert_eq!((t.len(), t.is_empty()), (2, false));
    }
}
