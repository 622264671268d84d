//! `tandem-wearable device`: device profiles.

use std::process::ExitCode;

/// The `device` subcommands.
#[derive(clap::Subcommand)]
pub enum DeviceCommand {
    /// Placeholder until implemented.
    Todo,
}

/// Runs one `device` subcommand.
pub fn run(cmd: DeviceCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        DeviceCommand::Todo => anyhow::bail!("not implemented yet"),
    }
}
