//! Workspace hack: it holds no code, only dependencies with the features
//! every package selection needs (see its `Cargo.toml`).
