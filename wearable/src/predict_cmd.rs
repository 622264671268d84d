//! `tandem-wearable predict`: latency predictors.

use std::process::ExitCode;

/// The `predict` subcommands.
#[derive(clap::Subcommand)]
pub enum PredictCommand {
    /// Placeholder until implemented.
    Todo,
}

/// Runs one `predict` subcommand.
pub fn run(cmd: PredictCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        PredictCommand::Todo => anyhow::bail!("not implemented yet"),
    }
}
