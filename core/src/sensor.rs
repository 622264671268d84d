//! A sensor's own values (u8 pixels, i16 PCM) and the floats a model is fed:
//! the widening a model card describes, shared with the link's narrow
//! encodings (defined in `tandem-types`, which the protocol uses too).

pub use tandem_types::sensor::*;
