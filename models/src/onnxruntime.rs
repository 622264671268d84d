//! onnxruntime's shared library, for the second engine's tests and tools:
//! taken from the pinned `onnxruntime` wheel (`models/fetch_onnxruntime.py`)
//! into `models/cache/onnxruntime/`, unless `ORT_DYLIB_PATH` names one.

use std::path::{Path, PathBuf};

use anyhow::Result;

/// The onnxruntime release whose wheel the library comes from.
pub const ONNXRUNTIME_VERSION: &str = "1.20.1";

/// Where the fetched library lies in `cache`.
pub fn library_in(cache: &Path) -> PathBuf {
    cache.join("onnxruntime").join(format!("libonnxruntime.so.{ONNXRUNTIME_VERSION}"))
}

/// The library to load: `ORT_DYLIB_PATH` when set, else the pinned wheel's,
/// fetched into the cache on first use.
pub fn ensure_onnxruntime() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("ORT_DYLIB_PATH").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let cache = crate::cache_dir();
    let lib = library_in(&cache);
    if !lib.is_file() {
        let _lock = crate::CacheLock::acquire(&cache)?;
        if !lib.is_file() {
            crate::light::run_fetch_script(
                "fetch_onnxruntime.py",
                &cache,
                &format!("network access to PyPI (`pip download onnxruntime=={ONNXRUNTIME_VERSION}`)"),
            )?;
        }
    }
    Ok(lib)
}
