//! What every foreign binding shares, in safe Rust: an app's session that
//! takes its settings (input shapes, placement, engine, keystore, link,
//! latency hint) before the first feed and opens the wearable's
//! [`Session`] at the first feed or run, with the connection to the
//! handheld set up as `tandem-wearable run` sets it up. The C ABI (this
//! crate's root) and JNI (`tandem-jni`) are thin shells over
//! [`AppSession`]: pointers and Java objects in, its errors out.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tandem::client::{ModelFile, Placement, Session, SessionConfig};
use tandem::emulate::{EmulatedTransport, LinkControl, LinkProfile, Schedule};
use tandem::link::{memory_transport, TcpTransport, Transport};
use tandem::secure::Keystore;
use tandem::{Error, InputShapes, Model, ModelError};

/// Why a setting or a call was refused; the text is what C callers read in
/// `err` and what Java callers read in the exception.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AppError {
    /// A shape has a dimension below 1.
    #[error("shape {shape:?}: dimension {dimension} is not positive")]
    BadDimension {
        /// The shape given.
        shape: Vec<i64>,
        /// The dimension at fault.
        dimension: i64,
    },
    /// A setting that only applies before the first feed came after it.
    #[error("{what} must be set before the first feed")]
    AfterFirstFeed {
        /// The setting (`input shapes`, `the placement`, `the keystore`).
        what: &'static str,
    },
    /// The latency hint is NaN or infinite.
    #[error("latency hint {ms} ms is not a finite number")]
    BadHint {
        /// The hint given, ms.
        ms: f64,
    },
    /// The placement is none of those known.
    #[error("placement '{given}': expected auto, handheld or wearable")]
    BadPlacement {
        /// The placement given.
        given: String,
    },
    /// The engine is none of those known.
    #[error("{0}")]
    BadEngine(#[from] tandem::engine::EngineParseError),
    /// The emulated link profile is none of those shipped.
    #[error("{0}")]
    BadLink(#[from] tandem::emulate::LinkError),
    /// A wait that is not a positive, finite number of seconds.
    #[error("{what} {secs} s: must be a positive number of seconds, at most 10^7")]
    BadWait {
        /// The setting.
        what: &'static str,
        /// The value given, seconds.
        secs: f64,
    },
    /// The keystore cannot be read.
    #[error("the keystore {}: {source}", dir.display())]
    Keystore {
        /// Its directory.
        dir: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The keystore named by the app has no paired handheld.
    #[error("the keystore {} has no paired handheld (pair with `tandem-wearable pair --keys`)", dir.display())]
    Unpaired {
        /// Its directory.
        dir: PathBuf,
    },
    /// The session was opened, yet is not there.
    #[error("the session did not open")]
    NotOpened,
    /// A handheld was required and none was ready: the address and why.
    #[error("the handheld at {addr}: {reason}")]
    NoHandheld {
        /// The handheld's address as the app gave it.
        addr: String,
        /// The session's reason.
        reason: Box<Error>,
    },
    /// The session refused or failed.
    #[error(transparent)]
    Tandem(#[from] Error),
}

/// The placement named `name`: `auto`, `handheld` or `wearable`.
pub fn parse_placement(name: &str) -> Result<Placement, AppError> {
    match name {
        "auto" => Ok(Placement::Auto),
        "handheld" => Ok(Placement::HandheldOnly),
        "wearable" => Ok(Placement::WearableOnly),
        other => Err(AppError::BadPlacement { given: other.to_string() }),
    }
}

/// A latency hint in ms as the session takes it: < 0 energy first
/// (`None`), 0 the fastest, > 0 the least energy within that latency. NaN
/// and infinities are refused; a finite but huge hint is the longest
/// `Duration` (never a panic).
pub fn hint_from_ms(ms: f64) -> Result<Option<Duration>, AppError> {
    if ms.is_nan() || ms.is_infinite() {
        return Err(AppError::BadHint { ms });
    }
    Ok(if ms < 0.0 { None } else { Some(Duration::try_from_secs_f64(ms / 1e3).unwrap_or(Duration::MAX)) })
}

/// A shape's dimensions, each ≥ 1.
pub fn dims(raw: &[i64]) -> Result<Vec<usize>, AppError> {
    raw.iter()
        .map(|&d| {
            usize::try_from(d)
                .ok()
                .filter(|&d| d > 0)
                .ok_or_else(|| AppError::BadDimension { shape: raw.to_vec(), dimension: d })
        })
        .collect()
}

/// An app's session: settings first, the [`Session`] opened at the first
/// feed or run (or [`AppSession::open`]) with them.
pub struct AppSession {
    model_path: PathBuf,
    /// The model's ONNX bytes, read (a TFLite file translated) once, in
    /// [`AppSession::new`]: the open reuses them rather than translate again.
    onnx: Arc<Vec<u8>>,
    /// The model as loaded in [`AppSession::new`] without input shapes,
    /// taken by the open when none was set (`None`: it has symbolic inputs).
    loaded: Option<Model>,
    /// The handheld's `host:port`; `None`: the watch alone.
    connect: Option<String>,
    shapes: InputShapes,
    /// `None`: not set (the config's default); `Some(None)`: energy first.
    hint: Option<Option<Duration>>,
    placement: Placement,
    engine: tandem::engine::EngineChoice,
    keys: Option<PathBuf>,
    /// An emulated link profile over the TCP connection (tests, demos).
    link: Option<LinkProfile>,
    /// Fail the open unless a handheld is ready within this.
    require_handheld: Option<Duration>,
    /// How long the open waits for the handheld when not required.
    ready_timeout: Option<Duration>,
    session: Option<Session>,
}

impl AppSession {
    /// A session for the model at `model_path`, with the handheld at
    /// `connect` (`None`: everything runs on the wearable). Reads and checks
    /// the file now, translating a TFLite file (once: the open reuses the
    /// bytes); a symbolic input only needs its shape set before the first feed.
    pub fn new(model_path: PathBuf, connect: Option<String>) -> Result<AppSession, AppError> {
        let onnx = tandem::model::onnx_bytes_of(&model_path).map_err(Error::from)?;
        let loaded = match Model::from_path_bytes(&model_path, &onnx, &InputShapes::none()) {
            Ok(model) => Some(model),
            Err(ModelError::SymbolicInput { .. }) => None,
            Err(e) => return Err(Error::from(e).into()),
        };
        Ok(AppSession {
            model_path,
            onnx: Arc::new(onnx),
            loaded,
            connect,
            shapes: InputShapes::none(),
            hint: None,
            placement: Placement::Auto,
            engine: tandem::engine::EngineChoice::default(),
            keys: None,
            link: None,
            require_handheld: None,
            ready_timeout: None,
            session: None,
        })
    }

    /// Refuses a setting once the session is open.
    fn before_open(&self, what: &'static str) -> Result<(), AppError> {
        match self.session {
            Some(_) => Err(AppError::AfterFirstFeed { what }),
            None => Ok(()),
        }
    }

    /// Sets the shape of input `name` (for symbolic dimensions).
    pub fn set_input_shape(&mut self, name: &str, shape: &[i64]) -> Result<(), AppError> {
        let d = dims(shape)?;
        self.before_open("input shapes")?;
        self.shapes.set(name, d);
        Ok(())
    }

    /// The latency hint in ms (see [`hint_from_ms`]); also once open.
    pub fn set_latency_hint_ms(&mut self, ms: f64) -> Result<(), AppError> {
        let hint = hint_from_ms(ms)?;
        self.hint = Some(hint);
        if let Some(session) = self.session.as_mut() {
            session.set_latency_hint(hint);
        }
        Ok(())
    }

    /// Where frames run when connected: `auto`, `handheld` or `wearable`.
    pub fn set_placement(&mut self, placement: &str) -> Result<(), AppError> {
        let p = parse_placement(placement)?;
        self.before_open("the placement")?;
        self.placement = p;
        Ok(())
    }

    /// The engine the watch's layers run on (`tract`, `onnxruntime`, `auto`).
    pub fn set_engine(&mut self, engine: &str) -> Result<(), AppError> {
        let e = tandem::engine::EngineChoice::parse(engine)?;
        self.before_open("the engine")?;
        self.engine = e;
        Ok(())
    }

    /// The keystore directory (`tandem-wearable pair --keys DIR`): a
    /// keystore named here with no paired handheld fails the open (never a
    /// plain link by accident).
    pub fn set_keys(&mut self, dir: PathBuf) -> Result<(), AppError> {
        self.before_open("the keystore")?;
        self.keys = Some(dir);
        Ok(())
    }

    /// Emulates the shipped link profile `name` (`ble-1m`, `ble-2m`,
    /// `bt-classic`, `wifi-poor`, `wifi-good`) over the TCP connection,
    /// both ways, as `tandem-wearable run --link` does.
    pub fn set_link(&mut self, name: &str) -> Result<(), AppError> {
        let profile = LinkProfile::named(name)?;
        self.before_open("the link")?;
        self.link = Some(profile);
        Ok(())
    }

    /// `Some(t)`: the open fails unless a handheld is ready within `t`
    /// (connection errors retried meanwhile; a refusal fails at once).
    pub fn set_require_handheld(&mut self, within: Option<Duration>) -> Result<(), AppError> {
        if let Some(t) = within {
            check_wait("the handheld's wait", t.as_secs_f64())?;
        }
        self.before_open("require handheld")?;
        self.require_handheld = within;
        Ok(())
    }

    /// How long the open waits for the handheld to be ready when it is not
    /// required (the wait ends at the first connection error).
    pub fn set_ready_timeout(&mut self, timeout: Duration) -> Result<(), AppError> {
        check_wait("the ready timeout", timeout.as_secs_f64())?;
        self.before_open("the ready timeout")?;
        self.ready_timeout = Some(timeout);
        Ok(())
    }

    /// The handheld's address, when one was given.
    pub fn handheld(&self) -> Option<&str> {
        self.connect.as_deref()
    }

    /// The session when it is open.
    pub fn opened(&self) -> Option<&Session> {
        self.session.as_ref()
    }

    /// The session, opened on first use with the shapes and settings so far.
    pub fn open(&mut self) -> Result<&mut Session, AppError> {
        if self.session.is_none() {
            // The bytes read in `new`: a TFLite file is not translated again.
            let model = match self.loaded.take() {
                Some(model) if self.shapes.is_empty() => model,
                _ => {
                    Model::from_path_bytes(&self.model_path, &self.onnx, &self.shapes).map_err(Error::from)?
                }
            };
            let model = ModelFile { bytes: Arc::clone(&self.onnx), model };
            let mut config = SessionConfig::watch_and_phone()?;
            config.engine = self.engine;
            config.require_handheld = self.require_handheld;
            if let Some(t) = self.ready_timeout {
                config.ready_timeout = t;
            }
            let transport: Box<dyn Transport> = match &self.connect {
                Some(addr) => {
                    config.placement = self.placement.clone();
                    if let Some(link) = &self.link {
                        config.link_default = link.nominal_estimate();
                    }
                    self.handheld_transport(addr)?
                }
                None => {
                    config.placement = Placement::WearableOnly;
                    Box::new(memory_transport().0)
                }
            };
            let mut s = match Session::open(model, transport, config) {
                Ok(s) => s,
                Err(reason) => {
                    return Err(match (&self.connect, self.require_handheld) {
                        (Some(addr), Some(_)) => {
                            AppError::NoHandheld { addr: addr.clone(), reason: Box::new(reason) }
                        }
                        _ => reason.into(),
                    })
                }
            };
            if let Some(hint) = self.hint {
                s.set_latency_hint(hint);
            }
            self.session = Some(s);
        }
        self.session.as_mut().ok_or(AppError::NotOpened)
    }

    /// TCP to `addr`, emulating the link when one was set, encrypted with
    /// the handheld paired in the keystore (`tandem-wearable pair`).
    fn handheld_transport(&self, addr: &str) -> Result<Box<dyn Transport>, AppError> {
        let tcp = TcpTransport::new(addr.to_string());
        let inner: Box<dyn Transport> = match &self.link {
            Some(profile) => {
                let control = LinkControl::new(profile, Schedule::default());
                Box::new(EmulatedTransport::new(tcp, profile.clone(), control, 7))
            }
            None => Box::new(tcp),
        };
        let dir = self.keys.clone().unwrap_or_else(|| Keystore::default_dir("wearable"));
        let (transport, encrypted) = tandem::secure::for_wearable(inner, &dir, addr)
            .map_err(|source| AppError::Keystore { dir: dir.clone(), source })?;
        // Keys named by the app must give an encrypted link: never plain by accident.
        if self.keys.is_some() && !encrypted {
            return Err(AppError::Unpaired { dir });
        }
        Ok(transport)
    }
}

/// The longest wait taken, seconds (about 115 days): a deadline this far
/// ahead is still a valid `Instant`.
const LONGEST_WAIT_S: f64 = 1e7;

/// Refuses a wait that is not a positive number of seconds up to [`LONGEST_WAIT_S`].
fn check_wait(what: &'static str, secs: f64) -> Result<(), AppError> {
    if secs > 0.0 && secs <= LONGEST_WAIT_S {
        Ok(())
    } else {
        Err(AppError::BadWait { what, secs })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A TFLite file is translated once per session, in `new`: the open
    /// reuses the bytes. The translation cache is swapped between the two to
    /// tell: a second translation would read the other model. The cache's
    /// directory is the environment's (`TANDEM_CACHE_DIR`), so this runs in a
    /// child process of its own (this test again, with it set).
    #[test]
    fn a_tflite_file_is_translated_once_per_session() {
        const NAME: &str = "app::tests::a_tflite_file_is_translated_once_per_session";
        if let Some(dir) = std::env::var_os("TANDEM_TEST_TRANSLATE_ONCE") {
            translated_once_in(&PathBuf::from(dir));
            return;
        }
        let dir = std::env::temp_dir().join(format!("tandem-ffi-translate-once-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let out = std::process::Command::new(std::env::current_exe().expect("test exe"))
            .args([NAME, "--exact", "--nocapture"])
            .env("TANDEM_TEST_TRANSLATE_ONCE", &dir)
            .env("TANDEM_CACHE_DIR", &dir)
            .output()
            .expect("the test runs");
        let text =
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success() && text.contains("1 passed"), "{text}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The child's half of the test above: `dir` is the translation cache.
    fn translated_once_in(dir: &std::path::Path) {
        // Not a whole TFLite model: only its cached "translation" loads.
        let tflite = b"\x1c\0\0\0TFL3 not a whole model";
        let path = dir.join("model.tflite");
        std::fs::write(&path, tflite).expect("tflite");
        let entry = tandem_tflite::cache::entry_path(dir, tflite);
        let (mlp, diamond) = (tandem_models::tiny::tiny_mlp_onnx(), tandem_models::tiny::tiny_diamond_onnx());
        std::fs::write(&entry, &mlp).expect("cache entry");
        let mut app =
            AppSession::new(path, None).expect("the cached translation loads (is the entry's name current?)");
        std::fs::write(&entry, &diamond).expect("cache entry");
        let session = app.open().expect("opens");
        let g = session.model().graph();
        assert_eq!(g.tensor(g.inputs()[0]).shape, vec![1, 4], "the MLP, translated once; not the diamond");
    }

    #[test]
    fn settings_are_parsed_with_their_reasons() {
        assert_eq!(parse_placement("handheld").ok(), Some(Placement::HandheldOnly));
        let e = parse_placement("sideways").expect_err("unknown").to_string();
        assert_eq!(e, "placement 'sideways': expected auto, handheld or wearable");
        assert_eq!(hint_from_ms(-1.0).ok(), Some(None));
        assert_eq!(hint_from_ms(0.0).ok(), Some(Some(Duration::ZERO)));
        assert_eq!(hint_from_ms(1e300).ok(), Some(Some(Duration::MAX)));
        assert!(hint_from_ms(f64::NAN).expect_err("NaN").to_string().contains("not a finite number"));
        assert_eq!(dims(&[1, 3]).ok(), Some(vec![1, 3]));
        assert!(dims(&[1, 0]).expect_err("zero").to_string().contains("dimension 0 is not positive"));
        assert!(check_wait("w", f64::INFINITY).is_err() && check_wait("w", 0.5).is_ok());
        assert!(check_wait("w", 1e300).is_err() && check_wait("w", f64::NAN).is_err());
    }
}
