//! Reading and writing device profiles: TOML and JSON, the shipped profiles, error positions.

use std::path::Path;

use super::{DeviceError, DeviceProfile};

/// The profiles shipped in `profiles/`, embedded at build time.
const SHIPPED: &[(&str, &str)] = &[
    ("pixel-8-pro", include_str!("../../../profiles/pixel-8-pro.toml")),
    ("samsung-a16", include_str!("../../../profiles/samsung-a16.toml")),
    ("nexus-6", include_str!("../../../profiles/nexus-6.toml")),
    ("watch-sd400", include_str!("../../../profiles/watch-sd400.toml")),
    ("watch-w5", include_str!("../../../profiles/watch-w5.toml")),
    ("cloud-k80", include_str!("../../../profiles/cloud-k80.toml")),
    // DeepWear's pair as the paper measured it (calibrated from its figures).
    ("lg-urbane", include_str!("../../../profiles/lg-urbane.toml")),
    ("galaxy-s2", include_str!("../../../profiles/galaxy-s2.toml")),
    ("nexus-6-cpu", include_str!("../../../profiles/nexus-6-cpu.toml")),
    ("nexus-6-gpu", include_str!("../../../profiles/nexus-6-gpu.toml")),
    ("nexus-6-powersave", include_str!("../../../profiles/nexus-6-powersave.toml")),
];

impl DeviceProfile {
    /// Parses and validates a TOML profile.
    pub fn from_toml_str(text: &str) -> Result<DeviceProfile, DeviceError> {
        Self::parse_toml(text, "<string>")
    }

    /// Parses and validates a JSON profile.
    pub fn from_json_str(text: &str) -> Result<DeviceProfile, DeviceError> {
        Self::parse_json(text, "<string>")
    }

    /// Reads, parses and validates a profile file, TOML or JSON by extension.
    pub fn from_path(path: &Path) -> Result<DeviceProfile, DeviceError> {
        let ext = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
        let parse: fn(&str, &str) -> Result<DeviceProfile, DeviceError> = match ext.as_deref() {
            Some("toml") => Self::parse_toml,
            Some("json") => Self::parse_json,
            _ => return Err(DeviceError::UnknownFormat(path.to_path_buf())),
        };
        let text = std::fs::read_to_string(path)
            .map_err(|error| DeviceError::Io { path: path.to_path_buf(), error })?;
        parse(&text, &path.display().to_string())
    }

    /// A shipped profile by name (see [`DeviceProfile::shipped_names`]).
    pub fn shipped(name: &str) -> Result<DeviceProfile, DeviceError> {
        let (_, text) =
            SHIPPED.iter().find(|(n, _)| *n == name).ok_or_else(|| DeviceError::UnknownProfile {
                name: name.to_string(),
                known: Self::shipped_names().iter().map(|s| s.to_string()).collect(),
            })?;
        Self::parse_toml(text, &format!("profiles/{name}.toml"))
    }

    /// The names of the shipped profiles.
    pub fn shipped_names() -> Vec<&'static str> {
        SHIPPED.iter().map(|(n, _)| *n).collect()
    }

    /// A shipped profile if `name_or_path` names one, else the profile file at
    /// that path.
    pub fn load(name_or_path: &str) -> Result<DeviceProfile, DeviceError> {
        if SHIPPED.iter().any(|(n, _)| *n == name_or_path) {
            return Self::shipped(name_or_path);
        }
        let path = Path::new(name_or_path);
        if path.extension().is_some() || path.exists() {
            return Self::from_path(path);
        }
        Self::shipped(name_or_path)
    }

    /// The profile as TOML, with very small and very large floats written in
    /// exponent form (`1.19e-9`, not `0.00000000119`).
    pub fn to_toml_string(&self) -> Result<String, DeviceError> {
        let text = toml::to_string(self)
            .map_err(|e| DeviceError::Serialize { profile: self.name.clone(), message: e.to_string() })?;
        Ok(text.lines().map(|l| exponent_floats(l) + "\n").collect())
    }

    fn parse_toml(text: &str, origin: &str) -> Result<DeviceProfile, DeviceError> {
        let profile: DeviceProfile = toml::from_str(text).map_err(|e| {
            let at = e.span().map(|s| line_col(text, s.start)).unwrap_or_default();
            DeviceError::Parse { origin: format!("{origin}{at}"), message: e.message().trim().to_string() }
        })?;
        profile.validate()?;
        Ok(profile)
    }

    fn parse_json(text: &str, origin: &str) -> Result<DeviceProfile, DeviceError> {
        let profile: DeviceProfile = serde_json::from_str(text).map_err(|e| DeviceError::Parse {
            origin: format!("{origin}:{}:{}", e.line(), e.column()),
            message: e.to_string(),
        })?;
        profile.validate()?;
        Ok(profile)
    }
}

/// least 1e6; other lines (strings, tables) are returned unchanged.
pub(super) fn exponent_floats(line: &str) -> String {
    let Some((key, value)) = line.split_once(" = ") else { return line.to_string() };
    if !value.starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '[') {
        return line.to_string();
    }
    let mut out = String::with_capacity(line.len());
    let mut token = String::new();
    let flush = |token: &mut String, out: &mut String| {
        match token.parse::<f64>() {
            Ok(v) if token.contains('.') && v != 0.0 && !(1e-3..1e6).contains(&v.abs()) => {
                out.push_str(&format!("{v:e}"))
            }
            _ => out.push_str(token),
        }
        token.clear();
    };
    for c in value.chars() {
        if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+') {
            token.push(c);
        } else {
            flush(&mut token, &mut out);
            out.push(c);
        }
    }
    flush(&mut token, &mut out);
    format!("{key} = {out}")
}

/// `:line:col` (1-based) of byte `offset` in `text`.
fn line_col(text: &str, offset: usize) -> String {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    format!(":{line}:{col}")
}

// ---------------------------------------------------------------------------
// Host detection.
