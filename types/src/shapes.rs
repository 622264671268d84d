//! Input-shape overrides: concrete shapes for a model's inputs
//! (`NAME=D1,D2,...`) and values for its named symbolic dimensions
//! (`SYMBOL=VALUE`), as the command line gives them and the handshake
//! carries them.

use thiserror::Error;

/// Concrete shapes for model inputs, overriding what the file declares.
///
/// Needed for models with symbolic (`N`) or unknown dimensions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct InputShapes {
    shapes: Vec<(String, Vec<usize>)>,
    /// Values of named symbolic dimensions (`batch=1`), for inputs without a
    /// shape of their own.
    dims: Vec<(String, usize)>,
}

/// Largest dimension an override may give.
pub const MAX_OVERRIDE_DIM: usize = 1 << 31;

/// An input-shape override or symbol binding that could not be parsed.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("bad input shape '{spec}': {reason} (expected NAME=D1,D2,...)")]
pub struct ShapeError {
    /// The text given.
    pub spec: String,
    /// What is wrong with it.
    pub reason: String,
}

/// One dimension of an override: a positive integer up to [`MAX_OVERRIDE_DIM`].
/// `spec` is the whole override, for the error.
fn parse_dim(d: &str, spec: &str) -> Result<usize, ShapeError> {
    let d = d.trim();
    let reason = match d.parse::<usize>() {
        Ok(0) => "dimensions must be positive".to_string(),
        Ok(v) if v > MAX_OVERRIDE_DIM => "dimension too large".to_string(),
        Ok(v) => return Ok(v),
        Err(_) => format!("'{d}' is not a positive integer"),
    };
    Err(ShapeError { spec: spec.to_string(), reason })
}

impl InputShapes {
    /// No overrides.
    pub fn none() -> Self {
        Self::default()
    }

    /// Parses one `NAME=D1,D2,...` override and adds it.
    pub fn push_spec(&mut self, spec: &str) -> Result<(), ShapeError> {
        let bad = |reason: &str| ShapeError { spec: spec.to_string(), reason: reason.to_string() };
        let (name, dims) = spec.split_once('=').ok_or_else(|| bad("missing '='"))?;
        let name = name.trim();
        if name.is_empty() {
            return Err(bad("empty input name"));
        }
        let dims = dims.split(',').map(|d| parse_dim(d, spec)).collect::<Result<Vec<_>, _>>()?;
        self.set(name, dims);
        Ok(())
    }

    /// Parses several `NAME=D1,D2,...` overrides.
    pub fn parse<S: AsRef<str>>(specs: &[S]) -> Result<Self, ShapeError> {
        let mut shapes = Self::default();
        for spec in specs {
            shapes.push_spec(spec.as_ref())?;
        }
        Ok(shapes)
    }

    /// Sets the shape of input `name`.
    pub fn set(&mut self, name: &str, dims: Vec<usize>) {
        self.shapes.retain(|(n, _)| n != name);
        self.shapes.push((name.to_string(), dims));
    }

    /// The override for `name`, if any.
    pub fn shape(&self, name: &str) -> Option<&[usize]> {
        self.shapes.iter().find(|(n, _)| n == name).map(|(_, d)| d.as_slice())
    }

    /// The inputs overridden, by name.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.shapes.iter().map(|(n, _)| n.as_str())
    }

    /// Parses one `SYMBOL=VALUE` binding of a symbolic dimension (as the
    /// file names it, e.g. `batch=1`) and adds it.
    pub fn push_dim(&mut self, spec: &str) -> Result<(), ShapeError> {
        let bad = |reason: &str| ShapeError { spec: spec.to_string(), reason: reason.to_string() };
        let (name, value) = spec.split_once('=').ok_or_else(|| bad("missing '=' (expected SYMBOL=VALUE)"))?;
        let name = name.trim();
        if name.is_empty() {
            return Err(bad("empty symbol name"));
        }
        let value = parse_dim(value, spec)?;
        self.dims.retain(|(n, _)| n != name);
        self.dims.push((name.to_string(), value));
        Ok(())
    }

    /// Parses shape overrides (`NAME=D1,D2,...`) and symbol bindings (`SYMBOL=VALUE`).
    pub fn parse_with_dims<S: AsRef<str>, D: AsRef<str>>(
        specs: &[S],
        dims: &[D],
    ) -> Result<Self, ShapeError> {
        let mut shapes = Self::parse(specs)?;
        for d in dims {
            shapes.push_dim(d.as_ref())?;
        }
        Ok(shapes)
    }

    /// The value bound to symbolic dimension `symbol`, if any.
    pub fn dim(&self, symbol: &str) -> Option<usize> {
        self.dims.iter().find(|(n, _)| n == symbol).map(|&(_, v)| v)
    }

    /// Whether there are no overrides.
    pub fn is_empty(&self) -> bool {
        self.shapes.is_empty() && self.dims.is_empty()
    }

    /// The overrides as `NAME=D1,D2,...` specs and `SYMBOL=VALUE` dims,
    /// which [`InputShapes::parse_with_dims`] reads back (what a wearable
    /// sends the handheld, so that both load the same concrete graph).
    pub fn to_specs(&self) -> (Vec<String>, Vec<String>) {
        let join = |dims: &[usize]| dims.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
        (
            self.shapes.iter().map(|(name, dims)| format!("{name}={}", join(dims))).collect(),
            self.dims.iter().map(|(name, v)| format!("{name}={v}")).collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_shape_specs_parse_and_reject() {
        let s = InputShapes::parse(&["x=1,3,48,192", "y = 2"]).expect("valid specs");
        assert_eq!(s.shape("x"), Some(&[1, 3, 48, 192][..]));
        assert_eq!(s.shape("y"), Some(&[2][..]));
        for bad in ["x", "=1,2", "x=1,,2", "x=1,-2", "x=0", "x=a", "x=2147483649"] {
            let err = InputShapes::parse(&[bad]).expect_err(bad);
            assert_eq!(err.spec, bad, "{err}");
        }
        let (specs, dims) = InputShapes::parse_with_dims(&["x=1,2"], &["batch=3"]).expect("valid").to_specs();
        assert_eq!((specs, dims), (vec!["x=1,2".to_string()], vec!["batch=3".to_string()]));
    }
}
