//! Making input tensors and reading outputs: from a slice and a shape, from
//! an `ndarray` array, typed reads, and a frame's outputs in the model's order.

use std::collections::HashMap;

use tract_onnx::prelude::{Datum, IntoTValue};

use crate::error::ModelError;
use crate::{Error, LayerGraph, Result, TValue, Tensor, Values};
use tandem_core::error::TractContext;

/// tract's `ndarray` (the version its tensors convert from and to).
pub use tract_onnx::prelude::tract_ndarray as ndarray;

/// A tensor of `shape` holding `data` (row-major); the element count must
/// be the product of the shape.
pub fn tensor_from_slice<T: Datum + Copy>(shape: &[usize], data: &[T]) -> Result<Tensor> {
    let want: usize = shape.iter().product();
    if want != data.len() {
        return Err(Error::SliceLength { shape: shape.to_vec(), want, got: data.len() });
    }
    Tensor::from_shape(shape, data)
        .tract(|| format!("building a tensor of shape {shape:?}"))
        .map_err(Error::from)
}

/// A float tensor of `shape` holding `data` (row-major).
pub fn tensor_f32(shape: &[usize], data: &[f32]) -> Result<Tensor> {
    tensor_from_slice(shape, data)
}

/// A tensor from an `ndarray` array (any dimension; see [`ndarray`]).
pub fn tensor_from_ndarray<T: Datum, D: ndarray::Dimension>(array: ndarray::Array<T, D>) -> Tensor {
    Tensor::from(array.into_dyn())
}

/// A float tensor's shape and values (row-major); other types are an error
/// naming the type.
pub fn read_f32(name: &str, t: &Tensor) -> Result<(Vec<usize>, Vec<f32>)> {
    if t.datum_type() != f32::datum_type() {
        let found = format!("{:?}", t.datum_type());
        return Err(Error::WrongType { name: name.into(), found, wanted: "f32" });
    }
    let view = t.to_plain_array_view::<f32>().tract(|| format!("reading output '{name}' as f32"))?;
    Ok((t.shape().to_vec(), view.iter().copied().collect()))
}

/// One frame's inputs from `(name, tensor)` pairs, for [`crate::Session::stream`].
pub fn frame<N: Into<String>>(inputs: impl IntoIterator<Item = (N, Tensor)>) -> Values {
    inputs.into_iter().map(|(n, t)| (n.into(), t.into_tvalue())).collect()
}

/// A frame's outputs, in the order the model declares them.
#[derive(Clone, Debug, Default)]
pub struct Outputs {
    entries: Vec<(String, TValue)>,
}

impl Outputs {
    /// Orders `values` as the model's outputs; every output must be there.
    pub(crate) fn in_model_order(graph: &LayerGraph, mut values: Values) -> Result<Outputs> {
        let mut entries = Vec::with_capacity(graph.outputs().len());
        for &t in graph.outputs() {
            let name = &graph.tensor(t).name;
            let v = values.remove(name).ok_or_else(|| ModelError::MissingTensor(name.clone()))?;
            entries.push((name.clone(), v));
        }
        Ok(Outputs { entries })
    }

    /// The output called `name`.
    pub fn get(&self, name: &str) -> Option<&Tensor> {
        self.entries.iter().find(|(n, _)| n == name).map(|(_, v)| &**v)
    }

    /// An output by name, or an error listing the model's outputs.
    pub fn require(&self, name: &str) -> Result<&Tensor> {
        self.get(name).ok_or_else(|| Error::UnknownOutput {
            name: name.into(),
            known: self.names().into_iter().map(String::from).collect(),
        })
    }

    /// A float output's shape and values.
    pub fn f32(&self, name: &str) -> Result<(Vec<usize>, Vec<f32>)> {
        read_f32(name, self.require(name)?)
    }

    /// Output names, in the model's order.
    pub fn names(&self) -> Vec<&str> {
        self.entries.iter().map(|(n, _)| n.as_str()).collect()
    }

    /// `(name, tensor)` in the model's order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Tensor)> {
        self.entries.iter().map(|(n, v)| (n.as_str(), &**v))
    }

    /// How many outputs.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// By name (as the split executor's values).
    pub fn into_values(self) -> Values {
        self.entries.into_iter().collect::<HashMap<_, _>>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_need_the_shapes_element_count() {
        let t = tensor_f32(&[2, 3], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]).expect("six values");
        assert_eq!(t.shape(), &[2, 3]);
        let e = tensor_f32(&[2, 3], &[0.0; 5]).expect_err("five values").to_string();
        assert!(e.contains("[2, 3]") && e.contains("6 values") && e.contains("5 were given"), "{e}");
        let (shape, data) = read_f32("t", &t).expect("f32");
        assert_eq!((shape, data[4]), (vec![2, 3], 4.0));
        let ints = tensor_from_slice(&[2], &[1i64, 2]).expect("i64");
        let e = read_f32("ids", &ints).expect_err("not f32").to_string();
        assert!(e.contains("'ids'") && e.contains("I64"), "{e}");
    }

    #[test]
    fn ndarray_arrays_convert() {
        let a = ndarray::Array2::<f32>::from_shape_fn((2, 2), |(i, j)| (i * 2 + j) as f32);
        let t = tensor_from_ndarray(a);
        assert_eq!(t.shape(), &[2, 2]);
        assert_eq!(read_f32("a", &t).expect("f32").1, vec![0.0, 1.0, 2.0, 3.0]);
    }
}
