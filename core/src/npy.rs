//! NumPy `.npy` files as tensors: a user's inputs (`--input NAME=FILE.npy`)
//! and saved outputs (`run --save-outputs`), so that Tandem can be checked
//! against another runtime with numpy.
//!
//! The format is read and written by the `npyz` crate. A file is checked
//! before its data is read: a header that claims more elements than the
//! file holds is refused, so a hostile file cannot make us allocate.

use std::io::Cursor;
use std::path::Path;

use npyz::{DType, Order, TypeChar, WriterBuilder};
use tract_onnx::prelude::*;

use crate::error::{Error, Result};

/// The bytes every `.npy` file starts with.
pub const MAGIC: &[u8] = b"\x93NUMPY";

/// Why a `.npy` file cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum NpyError {
    /// The file cannot be read or written.
    #[error("{0}")]
    Io(std::io::Error),
    /// The header cannot be parsed.
    #[error("not a NumPy .npy file: {0}")]
    Header(std::io::Error),
    /// The element type is not one a model takes.
    #[error("element type '{descr}' is not supported (expected float16/32/64, int8/16/32/64, uint8/16/32/64 or bool)")]
    Type {
        /// numpy's type string (`<c8`, `|O` ...).
        descr: String,
    },
    /// The header claims more elements than the file holds.
    #[error("the header's shape {shape:?} needs {needed} bytes of data, the file has {have}")]
    Truncated {
        /// The shape in the header.
        shape: Vec<u64>,
        /// Bytes the shape needs.
        needed: u128,
        /// Bytes after the header.
        have: usize,
    },
    /// The data cannot be decoded.
    #[error("reading the data: {0}")]
    Data(std::io::Error),
    /// The tensor's element type has no `.npy` form here.
    #[error("cannot save a {0:?} tensor as .npy")]
    Unsaveable(DatumType),
}

/// Reads a `.npy` file as a tensor of its own element type and shape.
pub fn read(path: &Path) -> Result<Tensor> {
    let npy = |source| Error::Npy { path: path.to_path_buf(), source };
    let bytes = std::fs::read(path).map_err(|e| npy(NpyError::Io(e)))?;
    from_bytes(&bytes).map_err(npy)
}

/// numpy's own bound on a header (`max_header_size`): longer ones are refused
/// before anything is allocated for them.
pub const MAX_HEADER_BYTES: usize = 10_000;

/// The deepest nesting of brackets a header may have (a dictionary holding a
/// shape tuple is 2): the header parser recurses per level.
const MAX_HEADER_DEPTH: usize = 4;

/// Checks the preamble and the header text before `npyz` parses them: the
/// length field within the file and `MAX_HEADER_BYTES`, the nesting shallow.
fn check_header(bytes: &[u8]) -> std::result::Result<(), NpyError> {
    let bad = |why: String| NpyError::Header(std::io::Error::new(std::io::ErrorKind::InvalidData, why));
    if !is_npy(bytes) || bytes.len() < 10 {
        return Err(bad("no .npy preamble (\\x93NUMPY, version, header length)".into()));
    }
    let (len, at) = match bytes[6] {
        1 => (usize::from(u16::from_le_bytes([bytes[8], bytes[9]])), 10),
        2 | 3 if bytes.len() >= 12 => {
            (u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize, 12)
        }
        v => return Err(bad(format!("format version {v} is not 1, 2 or 3"))),
    };
    if len > MAX_HEADER_BYTES {
        return Err(bad(format!("a header of {len} bytes (numpy's own limit is {MAX_HEADER_BYTES})")));
    }
    let Some(text) = bytes.get(at..at + len) else {
        return Err(bad(format!("a header of {len} bytes in a file of {}", bytes.len())));
    };
    let (mut depth, mut deepest) = (0usize, 0usize);
    for &b in text {
        match b {
            b'(' | b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    if deepest > MAX_HEADER_DEPTH {
        return Err(bad(format!("the header nests {deepest} levels deep (at most {MAX_HEADER_DEPTH})")));
    }
    Ok(())
}

/// Decodes the bytes of a `.npy` file.
pub fn from_bytes(bytes: &[u8]) -> std::result::Result<Tensor, NpyError> {
    check_header(bytes)?;
    let mut cursor = Cursor::new(bytes);
    let header = npyz::NpyHeader::from_reader(&mut cursor).map_err(NpyError::Header)?;
    let data_at = usize::try_from(cursor.position()).unwrap_or(usize::MAX).min(bytes.len());
    let dtype = header.dtype();
    let descr = dtype.descr();
    let DType::Plain(ts) = &dtype else { return Err(NpyError::Type { descr }) };
    let size = ts.size_field() as u128;
    let shape = header.shape().to_vec();
    let needed = shape.iter().fold(size, |n, &d| n.saturating_mul(u128::from(d)));
    let have = bytes.len() - data_at;
    if needed > have as u128 {
        return Err(NpyError::Truncated { shape, needed, have });
    }
    let file = npyz::NpyFile::with_header(header, &bytes[data_at..]);
    let fortran = file.order() == Order::Fortran;
    let dims: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
    // Fortran order stores the transpose: read it with the dimensions reversed.
    let stored: Vec<usize> = if fortran { dims.iter().rev().copied().collect() } else { dims.clone() };
    fn build<T: npyz::Deserialize + Datum + Copy>(
        file: npyz::NpyFile<&[u8]>,
        shape: &[usize],
    ) -> std::result::Result<Tensor, NpyError> {
        let data: Vec<T> = file.into_vec().map_err(NpyError::Data)?;
        Tensor::from_shape(shape, &data).map_err(|e| NpyError::Data(std::io::Error::other(e.to_string())))
    }
    let tensor = match (ts.type_char(), ts.size_field()) {
        (TypeChar::Float, 2) => {
            let data: Vec<half::f16> = file.into_vec().map_err(NpyError::Data)?;
            Tensor::from_shape(&stored, &data)
                .map_err(|e| NpyError::Data(std::io::Error::other(e.to_string())))?
        }
        (TypeChar::Float, 4) => build::<f32>(file, &stored)?,
        (TypeChar::Float, 8) => build::<f64>(file, &stored)?,
        (TypeChar::Int, 1) => build::<i8>(file, &stored)?,
        (TypeChar::Int, 2) => build::<i16>(file, &stored)?,
        (TypeChar::Int, 4) => build::<i32>(file, &stored)?,
        (TypeChar::Int, 8) => build::<i64>(file, &stored)?,
        (TypeChar::Uint, 1) => build::<u8>(file, &stored)?,
        (TypeChar::Uint, 2) => build::<u16>(file, &stored)?,
        (TypeChar::Uint, 4) => build::<u32>(file, &stored)?,
        (TypeChar::Uint, 8) => build::<u64>(file, &stored)?,
        (TypeChar::Bool, 1) => build::<bool>(file, &stored)?,
        _ => return Err(NpyError::Type { descr }),
    };
    if fortran && dims.len() > 1 {
        let axes: Vec<usize> = (0..dims.len()).rev().collect();
        return tensor.permute_axes(&axes).map_err(|e| NpyError::Data(std::io::Error::other(e.to_string())));
    }
    Ok(tensor)
}

/// Writes `tensor` as a `.npy` file (C order, little-endian).
pub fn write(path: &Path, tensor: &Tensor) -> Result<()> {
    let npy = |source| Error::Npy { path: path.to_path_buf(), source };
    std::fs::write(path, to_bytes(tensor).map_err(npy)?).map_err(|e| npy(NpyError::Io(e)))
}

/// The bytes of `tensor` as a `.npy` file.
pub fn to_bytes(tensor: &Tensor) -> std::result::Result<Vec<u8>, NpyError> {
    fn encode<T: npyz::AutoSerialize + Datum + Copy>(t: &Tensor) -> std::result::Result<Vec<u8>, NpyError> {
        let shape: Vec<u64> = t.shape().iter().map(|&d| d as u64).collect();
        let data =
            t.to_plain_array_view::<T>().map_err(|e| NpyError::Data(std::io::Error::other(e.to_string())))?;
        let mut out = Vec::new();
        let mut writer = npyz::WriteOptions::new()
            .default_dtype()
            .shape(&shape)
            .writer(&mut out)
            .begin_nd()
            .map_err(NpyError::Data)?;
        writer.extend(data.iter().copied()).map_err(NpyError::Data)?;
        writer.finish().map_err(NpyError::Data)?;
        Ok(out)
    }
    match tensor.datum_type() {
        DatumType::F16 => encode::<half::f16>(tensor),
        DatumType::F32 => encode::<f32>(tensor),
        DatumType::F64 => encode::<f64>(tensor),
        DatumType::I8 => encode::<i8>(tensor),
        DatumType::I16 => encode::<i16>(tensor),
        DatumType::I32 => encode::<i32>(tensor),
        DatumType::I64 => encode::<i64>(tensor),
        DatumType::U8 => encode::<u8>(tensor),
        DatumType::U16 => encode::<u16>(tensor),
        DatumType::U32 => encode::<u32>(tensor),
        DatumType::U64 => encode::<u64>(tensor),
        DatumType::Bool => encode::<bool>(tensor),
        other => Err(NpyError::Unsaveable(other)),
    }
}

/// Whether `bytes` start as a `.npy` file does.
pub fn is_npy(bytes: &[u8]) -> bool {
    bytes.starts_with(MAGIC)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What numpy 2 writes for `np.save(f, np.arange(6, dtype='<f4').reshape(2, 3))`.
    const NUMPY_F32: &[u8] = b"\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }                                                          \n\x00\x00\x00\x00\x00\x00\x80?\x00\x00\x00@\x00\x00@@\x00\x00\x80@\x00\x00\xa0@";

    /// A version 1.0 file with this header dictionary and data.
    fn npy_file(header: &str, data: &[u8]) -> Vec<u8> {
        let pad = 63 - (10 + header.len()) % 64;
        let text = format!("{header}{}\n", " ".repeat(pad));
        let mut bytes = MAGIC.to_vec();
        bytes.extend([1, 0]);
        bytes.extend((text.len() as u16).to_le_bytes());
        bytes.extend(text.as_bytes());
        bytes.extend(data);
        bytes
    }

    fn f32_bytes(values: &[f32]) -> Vec<u8> {
        values.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn a_file_numpy_wrote_reads_back() {
        let t = from_bytes(NUMPY_F32).expect("npy");
        assert_eq!(t.shape(), &[2, 3]);
        assert_eq!(
            t.to_plain_array_view::<f32>().expect("npy").as_slice().expect("npy"),
            &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
        );
        // What we write has numpy's layout: a header padded to 64 bytes
        // (npyz spells the shape `(2, 3, )`), then the same data bytes.
        let ours = to_bytes(&t).expect("npy");
        assert_eq!(ours.len(), NUMPY_F32.len());
        assert_eq!(ours[..10], NUMPY_F32[..10]);
        assert_eq!(ours[128..], NUMPY_F32[128..]);
    }

    #[test]
    fn every_type_round_trips() {
        let cases: Vec<Tensor> = vec![
            Tensor::from_shape(&[2, 2], &[1.5f32, -2.0, 3.25, 0.0]).expect("npy"),
            Tensor::from_shape(&[3], &[1.5f64, -2.0, 1e300]).expect("npy"),
            Tensor::from_shape(&[1, 3], &[-128i8, 0, 127]).expect("npy"),
            Tensor::from_shape(&[2], &[i64::MIN, i64::MAX]).expect("npy"),
            Tensor::from_shape(&[2], &[7i32, -9]).expect("npy"),
            Tensor::from_shape(&[4], &[0u8, 1, 254, 255]).expect("npy"),
            Tensor::from_shape(&[2], &[true, false]).expect("npy"),
            Tensor::from_shape(&[2], &[half::f16::from_f32(0.5), half::f16::from_f32(-3.0)]).expect("npy"),
            Tensor::from_shape::<f32>(&[0, 4], &[]).expect("npy"),
        ];
        for t in cases {
            let back = from_bytes(&to_bytes(&t).expect("npy")).expect("npy");
            assert_eq!(back, t, "{t:?}");
        }
    }

    #[test]
    fn fortran_order_is_transposed_back() {
        // The values of NUMPY_F32, stored column by column.
        let header = "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }";
        let t = from_bytes(&npy_file(header, &f32_bytes(&[0.0, 3.0, 1.0, 4.0, 2.0, 5.0]))).expect("npy");
        assert_eq!(t.shape(), &[2, 3]);
        let c_order = t.into_plain_array::<f32>().expect("npy").iter().copied().collect::<Vec<_>>();
        assert_eq!(c_order, [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    }

    #[test]
    fn a_header_claiming_more_than_the_file_holds_is_refused() {
        let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (9999999999, 3), }";
        match from_bytes(&npy_file(header, &f32_bytes(&[0.0; 6]))) {
            Err(NpyError::Truncated { needed, have, .. }) => {
                assert_eq!(needed, 9_999_999_999u128 * 3 * 4);
                assert_eq!(have, 24);
            }
            other => panic!("expected a truncation error, got {other:?}"),
        }
    }

    #[test]
    fn garbage_and_unsupported_types_are_errors() {
        assert!(matches!(from_bytes(b"not numpy"), Err(NpyError::Header(_))));
        assert!(from_bytes(&NUMPY_F32[..40]).is_err());
        let complex = "{'descr': '<c8', 'fortran_order': False, 'shape': (3,), }";
        assert!(matches!(from_bytes(&npy_file(complex, &[0; 24])), Err(NpyError::Type { .. })));
        let object = "{'descr': '|O', 'fortran_order': False, 'shape': (3,), }";
        assert!(from_bytes(&npy_file(object, &[0; 24])).is_err());
    }

    #[test]
    fn headers_that_are_too_long_or_too_deep_are_refused_before_parsing() {
        // A version 2 header claiming 4 GiB in a 16-byte file.
        let mut huge = MAGIC.to_vec();
        huge.extend([2, 0]);
        huge.extend(u32::MAX.to_le_bytes());
        huge.extend(b"{'d");
        let err = from_bytes(&huge).expect_err("refused").to_string();
        assert!(err.contains("4294967295 bytes"), "{err}");
        // A header within numpy's limit but nested 2000 levels deep.
        let deep = format!(
            "{{'descr': '<f4', 'fortran_order': False, 'shape': {}{}, }}",
            "(".repeat(2000),
            ")".repeat(2000)
        );
        let err = from_bytes(&npy_file(&deep, &[])).expect_err("refused").to_string();
        assert!(err.contains("2001 levels"), "{err}");
        // Version 9 does not exist.
        let mut v9 = NUMPY_F32.to_vec();
        v9[6] = 9;
        assert!(from_bytes(&v9).expect_err("refused").to_string().contains("version 9"));
    }

    proptest::proptest! {
        #[test]
        fn mangled_files_never_panic(cut in 0usize..200, flip in 0usize..200, byte in proptest::prelude::any::<u8>()) {
            let mut bytes = NUMPY_F32.to_vec();
            if flip < bytes.len() {
                bytes[flip] = byte;
            }
            bytes.truncate(cut);
            let _ = from_bytes(&bytes);
        }
    }
}
