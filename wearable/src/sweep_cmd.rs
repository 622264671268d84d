//! `tandem-wearable sweep`: the layer sweep.

use std::process::ExitCode;

/// Arguments of `sweep`.
#[derive(clap::Args)]
pub struct SweepArgs {}

/// Runs the sweep.
pub fn run(_args: SweepArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not implemented yet")
}
