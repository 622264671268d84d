//! Tandem's tools: what the CLIs, benches and tests use and an app never
//! links.
//!
//! # Layout
//! - [`cli`]: one line for an error and its causes.
//! - [`oracle`]: the oracle check on an emulated pair (decisions vs every candidate measured).
//! - [`report`]: the CLI tables.
//! - [`measure`]: the rooted-device driver that records battery traces for calibration.
//! - [`quota`]: device emulation by CPU quota (cgroup v1 cpu controller).
//! - [`host`]: a device profile for this machine from sysfs.
//! - [`testing`]: a handheld child process for end-to-end tests.

pub mod cli;
pub mod host;
pub mod measure;
pub mod oracle;
pub mod quota;
pub mod report;
pub mod testing;
