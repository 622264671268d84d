//! The integration tests of this crate, in one binary (linking tract into
//! one test binary per file cost build time).

mod fuzz_found;
mod hostile;
mod split_tiny;
