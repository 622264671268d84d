//! No build step: the build-dependencies only unify host features (see Cargo.toml).

fn main() {}
