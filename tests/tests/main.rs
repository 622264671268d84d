//! The integration tests of this crate, in one binary (linking tract into
//! one test binary per file cost build time).

mod engines;
mod lossless;
mod oracle;
mod partition_zoo;
mod quantized;
mod readme;
mod real_models;
mod split_zoo;
mod tflite;

/// jemalloc with transparent huge pages (see `.cargo/config.toml`): the
/// split checks build plans holding hundreds of MB of weights, and glibc's
/// allocator spends half their time in page faults and unmapping.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
