//! `tandem-wearable calibrate`: power-model calibration.

use std::process::ExitCode;

/// The `calibrate` subcommands.
#[derive(clap::Subcommand)]
pub enum CalibrateCommand {
    /// Placeholder until implemented.
    Todo,
}

/// Runs one `calibrate` subcommand.
pub fn run(cmd: CalibrateCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        CalibrateCommand::Todo => anyhow::bail!("not implemented yet"),
    }
}
