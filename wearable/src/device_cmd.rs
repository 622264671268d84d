//! `tandem-wearable device`: list the shipped device profiles, show one, or
//! detect this host's.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use tandem::device::DeviceProfile;
use tandem_tools::host::detect_host;

/// The `device` subcommands.
#[derive(clap::Subcommand)]
pub enum DeviceCommand {
    /// List the shipped profiles.
    List,
    /// Show a profile: clusters, power under both models, radio, slowdown.
    Show {
        /// A shipped profile's name, or a .toml/.json profile file.
        #[arg(value_name = "NAME_OR_FILE")]
        profile: String,
        /// Print the profile as one JSON object instead.
        #[arg(long)]
        json: bool,
    },
    /// Detect this host's profile from sysfs and print it as TOML, with notes
    /// on what was read and what was assumed.
    Detect {
        /// Root of the file system to read `sys/...` from (a fixture tree in tests).
        #[arg(long, default_value = "/")]
        sysfs_root: PathBuf,
        /// Also write the profile (with the notes as comments) to this TOML file.
        #[arg(long, value_name = "FILE")]
        write: Option<PathBuf>,
    },
}

/// Runs one `device` subcommand.
pub fn run(cmd: DeviceCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        DeviceCommand::List => {
            println!("{:<14} {:<9} {:>8}  clusters", "name", "kind", "slowdown");
            for name in DeviceProfile::shipped_names() {
                let p = DeviceProfile::shipped(name)?;
                let clusters: Vec<String> = p
                    .clusters
                    .iter()
                    .map(|c| {
                        format!("{} {}x {:.2}-{:.2} GHz", c.name, c.cores, c.f_min_hz / 1e9, c.f_max_hz / 1e9)
                    })
                    .collect();
                println!(
                    "{:<14} {:<9} {:>7}x  {}",
                    p.name,
                    p.kind.to_string(),
                    p.slowdown,
                    clusters.join(", ")
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        DeviceCommand::Show { profile, json } => {
            let p = DeviceProfile::load(&profile)?;
            if json {
                println!("{}", serde_json::to_string(&p)?);
            } else {
                print!("{}", p.summary());
            }
            Ok(ExitCode::SUCCESS)
        }
        DeviceCommand::Detect { sysfs_root, write } => {
            let d = detect_host(&sysfs_root)?;
            let mut text = String::new();
            for note in &d.notes {
                text.push_str(&format!("# note: {note}\n"));
            }
            if let Some(b) = &d.battery {
                text.push_str(&format!("# battery now: {}\n", serde_json::to_string(b)?));
            }
            text.push_str(&d.profile.to_toml_string()?);
            print!("{text}");
            if let Some(path) = write {
                std::fs::write(&path, &text)
                    .with_context(|| format!("cannot write profile to {}", path.display()))?;
                eprintln!("wrote {}", path.display());
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
