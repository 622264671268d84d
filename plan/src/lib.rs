//! Tandem's planning: what each side costs and where to cut. No I/O beyond
//! reading profile and dataset files, no clocks.
//!
//! # Layout
//! - [`device`]: device profiles (clusters, V(f), radio power, slowdown) and their file formats.
//! - [`predict`]: latency predictors (DeepWear-style DT+LR, EvoLP-style MLP + evolution).
//! - [`energy`]: the cluster-aware energy model and pricing a cut.
//! - [`fuel`]: energy measured by a fuel gauge, over windows of frames.
//! - [`partition`]: pricing layers, min-cut, the stream search, Algorithm 1 and the `Planner`.
//! - [`calibrate`]: fitting the power model from measurements and battery traces.

pub mod calibrate;
pub mod device;
pub mod energy;
pub mod fuel;
pub mod partition;
pub mod predict;
