//! `tandem-handheld`: the handheld (phone) side of Tandem.
//!
//! The paired server (`serve`) arrives with the paired-runtime work; for now
//! the handheld can profile a model on its own CPU, which is what it will
//! report to the wearable as its latency profile.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tandem::check::random_inputs;
use tandem::{InputShapes, Model};

#[derive(Parser)]
#[command(name = "tandem-handheld", version, about = "Tandem's handheld side")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Time every node of the optimized plan on this machine and check additivity.
    Profile {
        /// The ONNX model file.
        #[arg(long)]
        model: PathBuf,
        /// Concrete shape for an input, e.g. `x=1,3,48,192`; repeatable.
        #[arg(long = "input-shape", value_name = "NAME=D1,D2,...")]
        input_shape: Vec<String>,
        /// Measured runs (after warm-up).
        #[arg(long, default_value_t = 20)]
        runs: usize,
    },
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", format!("{e:#}").replace('\n', " "));
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Profile { model, input_shape, runs } => {
            let model = Model::from_path(&model, &InputShapes::parse(&input_shape)?)?;
            let profile = tandem::profile::profile(&model, &random_inputs(&model, 0)?, 3, runs)?;
            print!("{}", tandem::report::profile_table(model.graph(), &profile));
            println!(
                "{}",
                serde_json::json!({"model": model.name(), "additivity_ratio": profile.additivity_ratio()})
            );
            Ok(())
        }
    }
}
