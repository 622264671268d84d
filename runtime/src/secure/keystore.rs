//! The keystore: a directory holding this side's static key and the peers
//! it paired with, readable by its owner only.
//!
//! - `static.key`: the private and the public key, in hex, one per line.
//! - `peers.json`: `[{"key": hex, "label": text, "paired_at_unix": secs}]`.
//!
//! The directory is created with mode 0700 and the files with 0600; a
//! keystore that others can read or write is refused, as ssh refuses such
//! keys. Files are replaced by writing a temporary file and renaming it.

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tandem_proto::secure::{fingerprint, PublicKey, StaticKeys};

const KEY_FILE: &str = "static.key";
const PEERS_FILE: &str = "peers.json";
/// Most peers one keystore holds (a bound on what a file can make us read).
pub const MAX_PEERS: usize = 256;
const MAX_PEERS_FILE: u64 = 256 << 10;

/// A paired peer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Peer {
    /// Its static public key, hex.
    pub key: String,
    /// What it was paired as: the handheld's address on a wearable, the
    /// wearable's link on a handheld.
    pub label: String,
    /// When, in seconds since the Unix epoch.
    pub paired_at_unix: u64,
}

impl Peer {
    /// The key as bytes (`None` if the file holds something else).
    pub fn public_key(&self) -> Option<PublicKey> {
        hex::decode(&self.key).ok()?.try_into().ok()
    }
}

/// One side's keys and paired peers.
#[derive(Debug)]
pub struct Keystore {
    dir: PathBuf,
    keys: StaticKeys,
}

fn invalid(path: &Path, what: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("{}: {what}", path.display()))
}

fn with_path(path: &Path) -> impl Fn(io::Error) -> io::Error + '_ {
    move |e| io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// Refuses a file or directory that others may read or write.
#[cfg(unix)]
fn check_private(path: &Path, dir: bool) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path).map_err(with_path(path))?.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        let fix = if dir { 700 } else { 600 };
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{}: mode {mode:03o} lets other users read or change the keys (run `chmod {fix} {}`)",
                path.display(),
                path.display()
            ),
        ));
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_private(_: &Path, _: bool) -> io::Result<()> {
    Ok(())
}

/// Writes `bytes` to `path` through a temporary file, owner-only.
fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut f = options.open(&tmp).map_err(with_path(&tmp))?;
    f.write_all(bytes).and_then(|()| f.sync_all()).map_err(with_path(&tmp))?;
    std::fs::rename(&tmp, path).map_err(with_path(path))
}

fn now_unix() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl Keystore {
    /// The default directory for `role` (`wearable` or `handheld`):
    /// `$XDG_CONFIG_HOME/tandem/ROLE`, else `$HOME/.config/tandem/ROLE`.
    pub fn default_dir(role: &str) -> PathBuf {
        let base = std::env::var_os("XDG_CONFIG_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
            .unwrap_or_else(|| PathBuf::from("."));
        base.join("tandem").join(role)
    }

    /// Opens the keystore in `dir`, creating it and a new key if missing
    /// (an existing directory without a key is made owner-only first). A
    /// missing key beside a peers file is refused: see [`Keystore::start_over`].
    pub fn open_or_create(dir: &Path) -> io::Result<Keystore> {
        if !dir.exists() {
            let mut builder = std::fs::DirBuilder::new();
            builder.recursive(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::DirBuilderExt;
                builder.mode(0o700);
            }
            builder.create(dir).map_err(with_path(dir))?;
        }
        let path = dir.join(KEY_FILE);
        let peers = dir.join(PEERS_FILE);
        if !path.exists() && peers.exists() {
            // A key that vanished is not a new identity: the peers recorded
            // here paired with the old one, and would all be refused.
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "{} is missing, but {} records peers paired with the key it held: restore the key, \
                     or start over with a new identity (--new-identity: the old peers file is kept as {PEERS_FILE}.old \
                     and every peer must pair again)",
                    path.display(),
                    peers.display()
                ),
            ));
        }
        if !path.exists() {
            // A new keystore: the directory becomes the owner's alone.
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                    .map_err(with_path(dir))?;
            }
            let keys = StaticKeys::generate().map_err(|e| io::Error::other(e.to_string()))?;
            let text = format!("{}\n{}\n", hex::encode(keys.private), hex::encode(keys.public));
            write_private(&path, text.as_bytes())?;
        }
        Keystore::open(dir)?.ok_or_else(|| invalid(&path, "vanished while being created"))
    }

    /// A new identity in `dir` when its key is gone: the peers recorded
    /// for the old key are set aside (`peers.json.old`, or `.old.N` beside
    /// an earlier one) and a new key made; every peer must pair again. A
    /// key that is still there is kept (this opens it as usual).
    pub fn start_over(dir: &Path) -> io::Result<Keystore> {
        let peers = dir.join(PEERS_FILE);
        if !dir.join(KEY_FILE).exists() && peers.exists() {
            let aside = (0..)
                .map(|n| {
                    dir.join(if n == 0 {
                        format!("{PEERS_FILE}.old")
                    } else {
                        format!("{PEERS_FILE}.old.{n}")
                    })
                })
                .find(|p| !p.exists())
                .unwrap_or_else(|| dir.join(format!("{PEERS_FILE}.old")));
            std::fs::rename(&peers, &aside).map_err(with_path(&peers))?;
        }
        Self::open_or_create(dir)
    }

    /// Opens the keystore in `dir`; `None` if it has no key yet.
    pub fn open(dir: &Path) -> io::Result<Option<Keystore>> {
        let path = dir.join(KEY_FILE);
        if !path.exists() {
            return Ok(None);
        }
        check_private(dir, true)?;
        check_private(&path, false)?;
        let text = std::fs::read_to_string(&path).map_err(with_path(&path))?;
        let mut lines = text.lines();
        let mut key = |what: &str| -> io::Result<[u8; 32]> {
            let line = lines.next().ok_or_else(|| invalid(&path, format!("no {what} key line")))?;
            hex::decode(line.trim())
                .ok()
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| invalid(&path, format!("the {what} key is not 64 hex digits")))
        };
        let (private, public) = (key("private")?, key("public")?);
        Ok(Some(Keystore { dir: dir.to_path_buf(), keys: StaticKeys { private, public } }))
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// This side's keys.
    pub fn keys(&self) -> &StaticKeys {
        &self.keys
    }

    /// This side's public key's fingerprint.
    pub fn fingerprint(&self) -> String {
        fingerprint(&self.keys.public)
    }

    /// The paired peers, read from disk now (a pairing done while serving counts at once).
    pub fn peers(&self) -> io::Result<Vec<Peer>> {
        let path = self.dir.join(PEERS_FILE);
        if !path.exists() {
            return Ok(vec![]);
        }
        check_private(&path, false)?;
        let len = std::fs::metadata(&path).map_err(with_path(&path))?.len();
        if len > MAX_PEERS_FILE {
            return Err(invalid(&path, format!("{len} bytes: larger than a keystore of {MAX_PEERS} peers")));
        }
        let text = std::fs::read_to_string(&path).map_err(with_path(&path))?;
        let peers: Vec<Peer> = serde_json::from_str(&text).map_err(|e| invalid(&path, e))?;
        if let Some(bad) = peers.iter().find(|p| p.public_key().is_none()) {
            return Err(invalid(&path, format!("peer '{}' has a key that is not 64 hex digits", bad.label)));
        }
        Ok(peers)
    }

    /// Whether `key` is a paired peer (an unreadable peers file pairs nobody).
    pub fn is_paired(&self, key: &PublicKey) -> io::Result<bool> {
        Ok(self.peers()?.iter().any(|p| p.public_key().as_ref() == Some(key)))
    }

    /// Records a paired peer, replacing any entry with the same key or label.
    pub fn add_peer(&self, key: &PublicKey, label: &str) -> io::Result<()> {
        let mut peers = self.peers()?;
        let hex_key = hex::encode(key);
        peers.retain(|p| p.key != hex_key && p.label != label);
        if peers.len() >= MAX_PEERS {
            return Err(invalid(
                &self.dir.join(PEERS_FILE),
                format!("already {MAX_PEERS} peers: remove some before pairing more"),
            ));
        }
        peers.push(Peer { key: hex_key, label: label.into(), paired_at_unix: now_unix() });
        let text = serde_json::to_string_pretty(&peers).map_err(io::Error::other)?;
        write_private(&self.dir.join(PEERS_FILE), text.as_bytes())
    }

    /// The handheld a wearable talks to at `addr`: the one paired at that
    /// address, else the only one paired; `None` when none is paired.
    pub fn handheld_for(&self, addr: &str) -> io::Result<Option<Peer>> {
        let peers = self.peers()?;
        if let Some(p) = peers.iter().find(|p| p.label == addr) {
            return Ok(Some(p.clone()));
        }
        match peers.as_slice() {
            [] => Ok(None),
            [only] => Ok(Some(only.clone())),
            many => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{} handhelds are paired in {} and none at {addr} ({}): pair again with this address",
                    many.len(),
                    self.dir.display(),
                    many.iter().map(|p| p.label.as_str()).collect::<Vec<_>>().join(", ")
                ),
            )),
        }
    }
}
