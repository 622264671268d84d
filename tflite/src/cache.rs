//! The translation cache: a `.tflite` is translated once, and its ONNX bytes
//! kept under the SHA-256 of the TFLite bytes (and the translator's
//! version), written atomically; an entry that fails to decode is rebuilt.

use std::io::Write;
use std::path::{Path, PathBuf};

use prost::Message;
use sha2::{Digest, Sha256};
use tract_onnx::pb::ModelProto;

use crate::error::{Error, Result};

/// Bumped whenever a translation changes, so that old entries are not reused.
pub const TRANSLATOR_VERSION: u32 = 3;

/// Where translations are cached: `TANDEM_CACHE_DIR`, else
/// `$XDG_CACHE_HOME/tandem`, else `~/.cache/tandem`.
pub fn default_dir() -> Option<PathBuf> {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    env("TANDEM_CACHE_DIR")
        .or_else(|| env("XDG_CACHE_HOME").map(|d| d.join("tandem")))
        .or_else(|| env("HOME").map(|d| d.join(".cache").join("tandem")))
}

/// The cache file of TFLite bytes `tflite` in `dir`.
pub fn entry_path(dir: &Path, tflite: &[u8]) -> PathBuf {
    let digest = hex::encode(Sha256::digest(tflite));
    dir.join(format!("tflite-{digest}-v{TRANSLATOR_VERSION}.onnx"))
}

/// The ONNX bytes of `tflite`, from the cache in [`default_dir`] or
/// translated (and then cached). A cache that cannot be written is logged
/// and skipped: the translation is still returned.
pub fn onnx_bytes(tflite: &[u8]) -> Result<Vec<u8>> {
    match default_dir() {
        Some(dir) => onnx_bytes_in(&dir, tflite),
        None => crate::translate_to_bytes(tflite),
    }
}

/// [`onnx_bytes`] with the cache in `dir`.
pub fn onnx_bytes_in(dir: &Path, tflite: &[u8]) -> Result<Vec<u8>> {
    let path = entry_path(dir, tflite);
    if let Ok(bytes) = std::fs::read(&path) {
        match ModelProto::decode(bytes.as_slice()) {
            Ok(m) if m.graph.is_some() => return Ok(bytes),
            _ => tracing::warn!(path = %path.display(), "cached translation does not decode; rebuilding it"),
        }
    }
    let bytes = crate::translate_to_bytes(tflite)?;
    if let Err(e) = write_atomically(&path, &bytes) {
        tracing::warn!(error = %e, "cannot cache the TFLite translation");
    }
    Ok(bytes)
}

/// Writes `bytes` to a temporary file beside `path`, then renames it over.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let io = |source| Error::Cache { path: path.to_path_buf(), source };
    std::fs::create_dir_all(dir).map_err(io)?;
    let tmp = dir.join(format!(
        ".{}.{}.{:?}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("entry"),
        std::process::id(),
        std::thread::current().id()
    ));
    let result = std::fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(bytes).and_then(|()| f.sync_all()))
        .and_then(|()| std::fs::rename(&tmp, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(io)
}
