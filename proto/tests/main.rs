//! The integration tests of this crate, in one binary (linking tract into
//! one test binary per file cost build time).

mod encoding;
mod pair;
mod pipeline;
mod protocol;
mod secure;
mod sensor_encoding;
mod session;
mod tract;
