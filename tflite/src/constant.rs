//! Constant tensors known at translation time: decoding a TFLite buffer,
//! folding `DEQUANTIZE` (fp16 and int8 weights) and `DENSIFY` (sparse
//! weights), and the weight layout changes ONNX needs (filters to OIHW).

use half::f16;
use tract_onnx::pb::{tensor_proto::DataType, TensorProto};

use crate::error::{Error, Result};
use crate::reader::{Quantization, SparseDim, Sparsity};
use tandem_tflite_schema::tflite::TensorType;

/// The most elements a constant may expand to (a sparse tensor's dense form):
/// 2^28, 1 GiB of float32, far above any mobile model's weight.
const MAX_ELEMENTS: usize = 1 << 28;
/// The most bytes one constant folded at translation time (densified,
/// dequantized) may hold: 500 MiB, `tandem_core::ModelLimits::TENSOR_BYTES`
/// (not a dependency: the core depends on this crate).
pub(crate) const MAX_FOLDED_TENSOR_BYTES: usize = 500 << 20;
/// The most bytes all constants folded in one translation may hold
/// together: 1 GiB. A few bytes of sparse encoding must not buy gigabytes.
pub(crate) const MAX_FOLDED_TOTAL_BYTES: usize = 1 << 30;
/// The most a sparse tensor's dense form may exceed its stored values, in
/// elements (and at least `MIN_DENSE_ELEMENTS`): pruned weights keep far
/// more than one value in 256.
pub(crate) const MAX_DENSE_RATIO: usize = 256;
/// Dense forms this small are allowed whatever their stored values.
pub(crate) const MIN_DENSE_ELEMENTS: usize = 1 << 16;

/// A constant tensor.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Const {
    /// Its shape.
    pub shape: Vec<usize>,
    /// Its values, row-major.
    pub data: ConstData,
}

/// A constant's values, by element type.
#[derive(Clone, Debug, PartialEq)]
#[allow(missing_docs)]
pub(crate) enum ConstData {
    F32(Vec<f32>),
    F16(Vec<f16>),
    I64(Vec<i64>),
    I32(Vec<i32>),
    I16(Vec<i16>),
    I8(Vec<i8>),
    U8(Vec<u8>),
    Bool(Vec<bool>),
}

macro_rules! map_data {
    ($data:expr, $v:ident => $e:expr) => {
        match $data {
            ConstData::F32($v) => ConstData::F32($e),
            ConstData::F16($v) => ConstData::F16($e),
            ConstData::I64($v) => ConstData::I64($e),
            ConstData::I32($v) => ConstData::I32($e),
            ConstData::I16($v) => ConstData::I16($e),
            ConstData::I8($v) => ConstData::I8($e),
            ConstData::U8($v) => ConstData::U8($e),
            ConstData::Bool($v) => ConstData::Bool($e),
        }
    };
}

/// The element count of `shape`, refused past [`MAX_ELEMENTS`].
pub(crate) fn element_count(shape: &[usize]) -> Result<usize> {
    shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .filter(|&n| n <= MAX_ELEMENTS)
        .ok_or_else(|| Error::Malformed(format!("a constant of shape {shape:?} is too large")))
}

/// The bytes one value of `dtype` takes in a buffer, for the types a
/// constant can hold (`name` is the tensor's, for the error).
pub(crate) fn element_size(name: &str, dtype: TensorType) -> Result<usize> {
    Ok(match dtype {
        TensorType::Float32 | TensorType::Int32 => 4,
        TensorType::Float16 | TensorType::Int16 => 2,
        TensorType::Int64 => 8,
        TensorType::Int8 | TensorType::Uint8 | TensorType::Bool => 1,
        other => {
            return Err(Error::UnsupportedType { tensor: name.to_string(), dtype: format!("{other:?}") })
        }
    })
}

impl Const {
    /// A float32 constant.
    pub fn f32(shape: Vec<usize>, values: Vec<f32>) -> Const {
        Const { shape, data: ConstData::F32(values) }
    }

    /// An int64 constant.
    pub fn i64(shape: Vec<usize>, values: Vec<i64>) -> Const {
        Const { shape, data: ConstData::I64(values) }
    }

    /// Decodes `bytes` (little-endian) as `count` values of `dtype`.
    pub fn decode(
        name: &str,
        dtype: TensorType,
        shape: Vec<usize>,
        bytes: &[u8],
        count: usize,
    ) -> Result<Const> {
        fn chunks<const N: usize, T>(bytes: &[u8], f: impl Fn([u8; N]) -> T) -> Vec<T> {
            bytes.chunks_exact(N).map(|c| f(c.try_into().unwrap_or([0; N]))).collect()
        }
        let size = element_size(name, dtype)?;
        if Some(bytes.len()) != count.checked_mul(size) {
            return Err(Error::Malformed(format!(
                "tensor '{name}': {} bytes of data for {count} values of {dtype:?}",
                bytes.len()
            )));
        }
        let data = match dtype {
            TensorType::Float32 => ConstData::F32(chunks(bytes, f32::from_le_bytes)),
            TensorType::Float16 => ConstData::F16(chunks(bytes, |b| f16::from_bits(u16::from_le_bytes(b)))),
            TensorType::Int32 => ConstData::I32(chunks(bytes, i32::from_le_bytes)),
            TensorType::Int16 => ConstData::I16(chunks(bytes, i16::from_le_bytes)),
            TensorType::Int64 => ConstData::I64(chunks(bytes, i64::from_le_bytes)),
            TensorType::Int8 => ConstData::I8(bytes.iter().map(|&b| b as i8).collect()),
            TensorType::Uint8 => ConstData::U8(bytes.to_vec()),
            _ => ConstData::Bool(bytes.iter().map(|&b| b != 0).collect()),
        };
        Ok(Const { shape, data })
    }

    /// The bytes its values take in memory.
    pub fn byte_len(&self) -> usize {
        let size = match &self.data {
            ConstData::F32(_) | ConstData::I32(_) => 4,
            ConstData::F16(_) | ConstData::I16(_) => 2,
            ConstData::I64(_) => 8,
            ConstData::I8(_) | ConstData::U8(_) | ConstData::Bool(_) => 1,
        };
        self.len().saturating_mul(size)
    }

    /// How many values it holds.
    pub fn len(&self) -> usize {
        match &self.data {
            ConstData::F32(v) => v.len(),
            ConstData::F16(v) => v.len(),
            ConstData::I64(v) => v.len(),
            ConstData::I32(v) => v.len(),
            ConstData::I16(v) => v.len(),
            ConstData::I8(v) => v.len(),
            ConstData::U8(v) => v.len(),
            ConstData::Bool(v) => v.len(),
        }
    }

    /// Its values as float32 (integers converted as numbers).
    pub fn to_f32(&self) -> Vec<f32> {
        match &self.data {
            ConstData::F32(v) => v.clone(),
            ConstData::F16(v) => v.iter().map(|x| x.to_f32()).collect(),
            ConstData::I64(v) => v.iter().map(|&x| x as f32).collect(),
            ConstData::I32(v) => v.iter().map(|&x| x as f32).collect(),
            ConstData::I16(v) => v.iter().map(|&x| f32::from(x)).collect(),
            ConstData::I8(v) => v.iter().map(|&x| f32::from(x)).collect(),
            ConstData::U8(v) => v.iter().map(|&x| f32::from(x)).collect(),
            ConstData::Bool(v) => v.iter().map(|&x| f32::from(u8::from(x))).collect(),
        }
    }

    /// Its values as integers, when it holds integers.
    pub fn to_i64(&self) -> Option<Vec<i64>> {
        Some(match &self.data {
            ConstData::I64(v) => v.clone(),
            ConstData::I32(v) => v.iter().map(|&x| i64::from(x)).collect(),
            ConstData::I16(v) => v.iter().map(|&x| i64::from(x)).collect(),
            ConstData::I8(v) => v.iter().map(|&x| i64::from(x)).collect(),
            ConstData::U8(v) => v.iter().map(|&x| i64::from(x)).collect(),
            _ => return None,
        })
    }

    /// The float32 values `scale * (q - zero_point)`, per tensor or per
    /// slice along the quantization axis; fp16 values widened.
    pub fn dequantize(&self, quant: Option<&Quantization>) -> Result<Const> {
        let values = self.to_f32();
        let Some(q) = quant else {
            return Ok(Const::f32(self.shape.clone(), values));
        };
        let axis_len = if q.scale.len() == 1 { 1 } else { self.shape.get(q.axis).copied().unwrap_or(0) };
        if axis_len != q.scale.len() {
            return Err(Error::Malformed(format!(
                "{} scales for axis {} of shape {:?}",
                q.scale.len(),
                q.axis,
                self.shape
            )));
        }
        let inner: usize = self.shape.iter().skip(q.axis + 1).product();
        let out = values
            .iter()
            .enumerate()
            .map(|(i, &x)| {
                let c = if q.scale.len() == 1 { 0 } else { (i / inner.max(1)) % axis_len };
                let zp = q.zero_point.get(c).or(q.zero_point.first()).copied().unwrap_or(0);
                q.scale[c] * (x - zp as f32)
            })
            .collect();
        Ok(Const::f32(self.shape.clone(), out))
    }

    /// The constant with its axes permuted (`perm[i]` is the source axis of
    /// output axis `i`).
    pub fn transpose(&self, perm: &[usize]) -> Const {
        let rank = self.shape.len();
        let shape: Vec<usize> = perm.iter().map(|&p| self.shape[p]).collect();
        let mut src_strides = vec![1usize; rank];
        for i in (0..rank.saturating_sub(1)).rev() {
            src_strides[i] = src_strides[i + 1] * self.shape[i + 1];
        }
        let n = self.len();
        let mut index = Vec::with_capacity(n);
        let mut coord = vec![0usize; rank];
        for _ in 0..n {
            index.push(coord.iter().zip(perm).map(|(&c, &p)| c * src_strides[p]).sum::<usize>());
            for axis in (0..rank).rev() {
                coord[axis] += 1;
                if coord[axis] < shape[axis] {
                    break;
                }
                coord[axis] = 0;
            }
        }
        let data = map_data!(&self.data, v => index.iter().map(|&i| v[i]).collect());
        Const { shape, data }
    }

    /// The ONNX initializer named `name`.
    pub fn to_proto(&self, name: &str) -> TensorProto {
        let dims = self.shape.iter().map(|&d| d as i64).collect();
        let (data_type, raw_data): (DataType, Vec<u8>) = match &self.data {
            ConstData::F32(v) => (DataType::Float, v.iter().flat_map(|x| x.to_le_bytes()).collect()),
            ConstData::F16(v) => {
                (DataType::Float16, v.iter().flat_map(|x| x.to_bits().to_le_bytes()).collect())
            }
            ConstData::I64(v) => (DataType::Int64, v.iter().flat_map(|x| x.to_le_bytes()).collect()),
            ConstData::I32(v) => (DataType::Int32, v.iter().flat_map(|x| x.to_le_bytes()).collect()),
            ConstData::I16(v) => (DataType::Int16, v.iter().flat_map(|x| x.to_le_bytes()).collect()),
            ConstData::I8(v) => (DataType::Int8, v.iter().map(|&x| x as u8).collect()),
            ConstData::U8(v) => (DataType::Uint8, v.clone()),
            ConstData::Bool(v) => (DataType::Bool, v.iter().map(|&x| u8::from(x)).collect()),
        };
        TensorProto {
            name: name.to_string(),
            dims,
            data_type: data_type as i32,
            raw_data,
            ..Default::default()
        }
    }
}

/// Expands the stored values of a sparse constant into its dense form of
/// `shape`, following TFLite's format converter (schema.fbs explains the
/// format). Every index is checked against the dense shape.
pub(crate) fn densify(values: &Const, sparsity: &Sparsity, shape: &[usize]) -> Result<Const> {
    let bad = |m: String| Error::Malformed(format!("sparse tensor of shape {shape:?}: {m}"));
    let rank = shape.len();
    let levels = sparsity.dims.len();
    if sparsity.traversal_order.len() != levels || levels != rank + sparsity.block_map.len() || levels > 16 {
        return Err(bad(format!(
            "{} traversal entries, {} dimension entries and {} block entries for rank {rank}",
            sparsity.traversal_order.len(),
            levels,
            sparsity.block_map.len()
        )));
    }
    if sparsity.traversal_order.iter().any(|&t| t >= levels) || sparsity.block_map.iter().any(|&b| b >= rank)
    {
        return Err(bad("an order or block entry out of range".into()));
    }
    // The size of each block dimension is its level's dense size.
    let mut block_size = vec![0usize; sparsity.block_map.len()];
    for (level, &t) in sparsity.traversal_order.iter().enumerate() {
        if t >= rank {
            match &sparsity.dims[level] {
                SparseDim::Dense { size } => block_size[t - rank] = *size,
                SparseDim::Csr { .. } => return Err(bad("a sparse block dimension".into())),
            }
        }
    }
    let count = element_count(shape)?;
    // The dense levels of a valid encoding span at most the tensor: this
    // bounds the walk of a hostile file (dense levels over empty rows).
    let dense_span = sparsity.dims.iter().try_fold(1usize, |acc, d| match d {
        SparseDim::Dense { size } => acc.checked_mul(*size),
        SparseDim::Csr { .. } => Some(acc),
    });
    if dense_span.is_none_or(|n| n > count.max(1)) {
        return Err(bad("dense dimensions larger than the tensor".into()));
    }
    let source = values.to_f32();
    let mut dense = vec![0f32; count];
    let mut state =
        Walk { sparsity, shape, block_size: &block_size, source: &source, next: 0, dense: &mut dense };
    let mut indices = vec![0usize; levels];
    state.populate(&mut indices, 0, 0)?;
    if state.next != source.len() {
        return Err(bad(format!("{} values stored, {} placed", source.len(), state.next)));
    }
    Ok(Const::f32(shape.to_vec(), dense))
}

/// The recursion of [`densify`].
struct Walk<'a> {
    sparsity: &'a Sparsity,
    shape: &'a [usize],
    block_size: &'a [usize],
    source: &'a [f32],
    /// The next stored value to place.
    next: usize,
    dense: &'a mut [f32],
}

impl Walk<'_> {
    fn populate(&mut self, indices: &mut [usize], level: usize, prev: usize) -> Result<()> {
        let shape = self.shape;
        let bad = |m: &str| Error::Malformed(format!("sparse tensor of shape {shape:?}: {m}"));
        let rank = self.shape.len();
        if level == indices.len() {
            let mut orig = vec![0usize; rank];
            for (i, &t) in self.sparsity.traversal_order.iter().enumerate() {
                if i < rank {
                    orig[t] = indices[i];
                } else {
                    let block = t - rank;
                    let dim = self.sparsity.block_map[block];
                    orig[dim] = orig[dim]
                        .checked_mul(self.block_size[block])
                        .and_then(|o| o.checked_add(indices[i]))
                        .ok_or_else(|| bad("index overflow"))?;
                }
            }
            let mut flat = 0usize;
            for (d, (&o, &size)) in orig.iter().zip(self.shape).enumerate() {
                if o >= size {
                    return Err(bad(&format!("index {o} past dimension {d}")));
                }
                // Cannot overflow: o < size and the shape's product fits.
                flat = flat * size + o;
            }
            let value = *self.source.get(self.next).ok_or_else(|| bad("fewer values than indices"))?;
            self.dense[flat] = value;
            self.next += 1;
            return Ok(());
        }
        match &self.sparsity.dims[level] {
            SparseDim::Dense { size } => {
                if *size > self.dense.len() {
                    return Err(bad("a dense dimension larger than the tensor"));
                }
                for i in 0..*size {
                    indices[level] = i;
                    let next_prev = prev.checked_mul(*size).and_then(|p| p.checked_add(i));
                    self.populate(indices, level + 1, next_prev.ok_or_else(|| bad("index overflow"))?)?;
                }
            }
            SparseDim::Csr { segments, indices: columns } => {
                let (Some(&from), Some(&to)) = (segments.get(prev), segments.get(prev + 1)) else {
                    return Err(bad("a segment out of range"));
                };
                if from > to || to > columns.len() {
                    return Err(bad("segments out of order or past the indices"));
                }
                for (i, &column) in columns.iter().enumerate().take(to).skip(from) {
                    indices[level] = column;
                    self.populate(indices, level + 1, i)?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transposes_ohwi_to_oihw() {
        // O=2, H=1, W=2, I=3.
        let c = Const::f32(vec![2, 1, 2, 3], (0..12).map(|x| x as f32).collect());
        let t = c.transpose(&[0, 3, 1, 2]);
        assert_eq!(t.shape, vec![2, 3, 1, 2]);
        assert_eq!(t.to_f32(), vec![0., 3., 1., 4., 2., 5., 6., 9., 7., 10., 8., 11.]);
    }

    #[test]
    fn dequantizes_per_channel() {
        let c = Const { shape: vec![2, 2], data: ConstData::I8(vec![1, 2, 3, 4]) };
        let q = Quantization { scale: vec![0.5, 2.0], zero_point: vec![0, 1], axis: 0 };
        assert_eq!(
            c.dequantize(Some(&q)).unwrap_or_else(|e| panic!("{e}")).to_f32(),
            vec![0.5, 1.0, 4.0, 6.0]
        );
    }

    #[test]
    fn densifies_csr_rows() {
        // [[0, 7, 0], [5, 0, 6]]: row 0 has column 1, row 1 columns 0 and 2.
        let sparsity = Sparsity {
            traversal_order: vec![0, 1],
            block_map: vec![],
            dims: vec![
                SparseDim::Dense { size: 2 },
                SparseDim::Csr { segments: vec![0, 1, 3], indices: vec![1, 0, 2] },
            ],
        };
        let values = Const::f32(vec![3], vec![7., 5., 6.]);
        let dense = densify(&values, &sparsity, &[2, 3]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(dense.to_f32(), vec![0., 7., 0., 5., 0., 6.]);
    }

    #[test]
    fn refuses_dense_levels_larger_than_the_tensor() {
        // Two dense levels of 2^20 over empty rows: a hostile file's walk of
        // 2^40 steps, refused before it starts.
        let sparsity = Sparsity {
            traversal_order: vec![0, 1, 2],
            block_map: vec![],
            dims: vec![
                SparseDim::Dense { size: 1 << 20 },
                SparseDim::Dense { size: 1 << 20 },
                SparseDim::Csr { segments: vec![0; (1 << 20) + 1], indices: vec![] },
            ],
        };
        assert!(densify(&Const::f32(vec![0], vec![]), &sparsity, &[4, 4, 4]).is_err());
    }

    #[test]
    fn refuses_sparse_indices_out_of_range() {
        let sparsity = Sparsity {
            traversal_order: vec![0, 1],
            block_map: vec![],
            dims: vec![
                SparseDim::Dense { size: 1 },
                SparseDim::Csr { segments: vec![0, 1], indices: vec![9] },
            ],
        };
        assert!(densify(&Const::f32(vec![1], vec![1.]), &sparsity, &[1, 3]).is_err());
    }
}
