//! The integration tests of this crate, in one binary (linking tract into
//! one test binary per file cost build time).

mod common;
mod export_suffix;
mod import;
mod light;
mod zoo;
