//! What the app commands (`wakeword`, `detect`) share: a model's input
//! name, and the Session that runs their offloadable model, paired with a
//! handheld (optionally through an emulated link) or on the watch alone.

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use tandem::client::{ModelFile, Placement, Session, SessionConfig};
use tandem::emulate::{EmulatedTransport, LinkControl, LinkProfile, Schedule};
use tandem::link::{TcpTransport, Transport};
use tandem::{Cut, InputShapes};

use crate::paired_cmd::PlacementArg;

/// Where an app's offloadable model runs.
#[derive(clap::Args, Debug)]
pub struct AppPairArgs {
    /// The handheld (`tandem-handheld serve`); none: all on the watch.
    #[arg(long)]
    pub connect: Option<String>,
    /// Emulate this link profile on the connection (e.g. ble-2m).
    #[arg(long)]
    pub link: Option<String>,
    /// Where frames run when connected.
    #[arg(long, value_enum, default_value = "auto")]
    pub placement: PlacementArg,
    /// A fixed cut instead: this fraction of the model's FLOPs on the watch
    /// (0 to 1), the rest on the handheld.
    #[arg(long, value_name = "FRACTION", conflicts_with = "placement")]
    pub cut_flops: Option<f64>,
    /// The watch's compute dilation on this host (1: a real watch).
    #[arg(long, default_value_t = 8.0)]
    pub dilation: f64,
    /// Link encodings and their accuracy budget.
    #[command(flatten)]
    pub coding: crate::paired_cmd::EncodingArgs,
    /// The keystore (`tandem-wearable pair --keys`); a paired handheld means encrypted links.
    #[arg(long, value_name = "DIR")]
    pub keys: Option<std::path::PathBuf>,
}

impl AppPairArgs {
    /// Refuses combinations that cannot work, before any model is read.
    pub fn check(&self) -> Result<()> {
        if self.link.is_some() && self.connect.is_none() {
            bail!("--link emulates the connection to a handheld: it needs --connect");
        }
        if let Some(f) = self.cut_flops {
            if self.connect.is_none() || !(0.0..=1.0).contains(&f) {
                bail!("--cut-flops {f}: a fraction from 0 to 1 of the model on the watch, with --connect");
            }
        }
        Ok(())
    }

    /// The config for the app's sessions (the emulated watch, this dilation).
    pub fn config(&self) -> Result<SessionConfig> {
        let mut config = SessionConfig::emulated_watch_and_phone()?;
        config.dilation = self.dilation.max(1.0);
        self.coding.apply(&mut config)?;
        Ok(config)
    }

    /// A Session for `model`: paired with `--connect` (through `--link`,
    /// placed by `--placement`), else on the watch alone. Inputs that
    /// `card` gives a sensor type may cross the link in it.
    pub fn open(
        &self,
        model: ModelFile,
        seed: u64,
        card: Option<&tandem::card::ModelCard>,
    ) -> Result<Session> {
        let mut config = self.config()?;
        if let Some(card) = card {
            config.use_card(card);
        }
        let Some(addr) = &self.connect else {
            return Ok(Session::open_local(model, config)?);
        };
        let tcp = TcpTransport::new(addr.clone());
        let transport: Box<dyn Transport> = match &self.link {
            Some(name) => {
                let profile = LinkProfile::named(name)?;
                let control = LinkControl::new(&profile, Schedule::default());
                Box::new(EmulatedTransport::new(tcp, profile, control, seed))
            }
            None => Box::new(tcp),
        };
        let transport = crate::paired_cmd::secure_transport(transport, self.keys.as_deref(), addr)?;
        config.ready_timeout = Duration::from_secs(30);
        config.placement = match (self.cut_flops, &self.placement) {
            (Some(fraction), _) => Placement::Fixed(Cut::at_flops_fraction(model.model.graph(), fraction)),
            (None, PlacementArg::Auto) => Placement::Auto,
            (None, PlacementArg::Wearable) => Placement::WearableOnly,
            (None, PlacementArg::Handheld) => Placement::HandheldOnly,
            (None, PlacementArg::Edge) => anyhow::bail!("--placement edge needs an edge server: not in apps"),
        };
        Ok(Session::open(model, transport, config)?)
    }
}

/// The name of a model's first input, symbolic or not.
pub fn first_input_name(path: &Path) -> Result<String> {
    match tandem::Model::from_path(path, &InputShapes::none()) {
        Ok(m) => Ok(m.graph().tensor(m.graph().inputs()[0]).name.clone()),
        Err(tandem::ModelError::SymbolicInput { input, .. }) => Ok(input),
        Err(e) => Err(e).with_context(|| path.display().to_string()),
    }
}

/// The model with its first input declared at `shape` (`D1,D2,...`), and
/// that input's name.
pub fn load_with_input_shape(path: &Path, shape: &str) -> Result<(ModelFile, String)> {
    let name = first_input_name(path)?;
    let shapes = InputShapes::parse(&[format!("{name}={shape}")])?;
    let model = ModelFile::load(path, &shapes).with_context(|| path.display().to_string())?;
    Ok((model, name))
}
