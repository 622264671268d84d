//! The integration tests of this crate, in one binary (linking tract into
//! one test binary per file cost build time).

mod calibrate_cli;
mod cli;
mod cloud;
mod common;
mod detect;
mod device_cli;
mod edge;
mod face;
mod hostile_cli;
mod paired_cli;
mod plan_cli;
mod predict;
mod secure_cli;
mod wakeword;
