//! `pair`: pairs this wearable with a handheld on the 6-digit code that
//! `tandem-handheld pair` shows (SPAKE2, then a Noise exchange of static keys).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use tandem::link::{TcpTransport, Transport};
use tandem::secure::Keystore;

/// `tandem-wearable pair`.
#[derive(Args, Debug)]
pub struct PairCmdArgs {
    /// The handheld's pairing address (`tandem-handheld pair --listen`).
    #[arg(long)]
    pub connect: String,
    /// The 6-digit code the handheld shows.
    #[arg(long)]
    pub code: String,
    /// Where this wearable's keys and paired handhelds are kept (created
    /// owner-only; default `~/.config/tandem/wearable`).
    #[arg(long, value_name = "DIR")]
    pub keys: Option<PathBuf>,
    /// The address later sessions use, if not the pairing one (the
    /// handheld's `serve --listen`); it names this pairing in the keystore.
    #[arg(long, value_name = "ADDR")]
    pub serve_addr: Option<String>,
    /// Start over with a new key when the old one is gone: the handhelds
    /// paired with the old key are set aside and must pair again.
    #[arg(long)]
    pub new_identity: bool,
}

/// Pairs, prints `paired with handheld FINGERPRINT`, and stores its key.
pub fn run(args: PairCmdArgs) -> Result<ExitCode> {
    tandem::secure::check_code(&args.code).map_err(anyhow::Error::msg).context("--code")?;
    let dir = args.keys.clone().unwrap_or_else(|| Keystore::default_dir("wearable"));
    let keystore =
        if args.new_identity { Keystore::start_over(&dir) } else { Keystore::open_or_create(&dir) }
            .with_context(|| format!("the keystore {}", dir.display()))?;
    let label = args.serve_addr.clone().unwrap_or_else(|| args.connect.clone());
    let transport: Box<dyn Transport> = Box::new(TcpTransport::new(args.connect.clone()));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let peer = runtime
        .block_on(tandem::secure::pair_wearable(transport.as_ref(), &keystore, &args.code, &label))
        .with_context(|| format!("pairing with {}", args.connect))?;
    println!(
        "paired with handheld {} (this wearable is {}; keys in {})",
        tandem::secure::fingerprint(&peer),
        keystore.fingerprint(),
        dir.display()
    );
    Ok(ExitCode::SUCCESS)
}
