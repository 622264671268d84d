//! The integration tests of this crate, in one binary (linking tract into
//! one test binary per file cost build time).

mod common;
mod calibrate_cli;
mod cli;
mod device_cli;
mod paired_cli;
mod plan_cli;
mod predict;
