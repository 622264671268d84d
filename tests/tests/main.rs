//! The integration tests of this crate, in one binary (linking tract into
//! one test binary per file cost build time).
//!
//! The split checks build plans holding hundreds of MB of weights over and
//! over; glibc's allocator with transparent huge pages and large blocks kept
//! on the heap (`GLIBC_TUNABLES`, set by `scripts/test.sh`) is as fast for
//! them as jemalloc was (2026-12-05: VGG-19, ZFNet, DenseNet and ResNet-50's
//! randomized checks in 53.5 s against 55.5 s, one after the other), without
//! jemalloc's 82 s build script in every cold build.

mod engines;
mod lossless;
mod oracle;
mod partition_zoo;
mod quantized;
mod readme;
mod real_models;
mod split_zoo;
mod tflite;
