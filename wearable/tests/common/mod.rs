//! Helpers shared by the process tests: run the binary, read its output.
// Each test file uses a different subset.
#![allow(dead_code)]

use std::process::{Command, Output};

/// Runs `tandem-wearable` with `args` and waits for it.
pub fn wearable(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tandem-wearable")).args(args).output().expect("the binary runs")
}

/// Its stdout as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Its stderr as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}
