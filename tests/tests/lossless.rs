//! The lossless link encodings on real crossing tensors: the split checks
//! of every zoo, light and real model send each crossing tensor through
//! both (shuffle + LZ4, sparse + LZ4) before the suffix runs, and the bytes
//! that come out must be the bytes that went in.

use tandem::encoding::{round_trip, Encoding};
use tandem::{ModelError, TValue};

/// A check's link: each crossing tensor through both lossless encodings;
/// a tensor whose bytes change is an error naming the encoding.
pub fn lossless_link(name: &str, t: &TValue) -> Result<TValue, ModelError> {
    let mut out = t.clone();
    for e in [Encoding::ShuffleLz4, Encoding::SparseLz4] {
        let bad = |why: String| ModelError::Link(format!("{e} on '{name}': {why}"));
        let (back, _) = round_trip(t, e).map_err(|err| bad(err.to_string()))?;
        if back.as_bytes() != t.as_bytes() {
            return Err(bad("the bytes changed".into()));
        }
        out = back.into();
    }
    Ok(out)
}
