//! Execution engines by name: which runtime runs a half of a split model
//! (tract, or onnxruntime), and how a user or a peer chooses one.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A runtime that can load, run and profile an ONNX model (or a half of one).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// tract: pure Rust, no native library, what a watch build needs.
    #[default]
    Tract,
    /// onnxruntime, loaded from its shared library at run time.
    #[serde(rename = "onnxruntime")]
    OnnxRuntime,
}

impl Engine {
    /// Every engine, tract first.
    pub const ALL: [Engine; 2] = [Engine::Tract, Engine::OnnxRuntime];

    /// The engine's name, as the CLI, the reports and the wire spell it.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Tract => "tract",
            Engine::OnnxRuntime => "onnxruntime",
        }
    }
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is not an engine's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown engine '{0}' (expected tract, onnxruntime or auto)")]
pub struct EngineParseError(pub String);

impl FromStr for Engine {
    type Err = EngineParseError;

    fn from_str(s: &str) -> Result<Engine, EngineParseError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "tract" => Ok(Engine::Tract),
            "onnxruntime" | "ort" => Ok(Engine::OnnxRuntime),
            _ => Err(EngineParseError(s.to_string())),
        }
    }
}

/// What a side asks for: one engine, or `auto`, the faster of the engines
/// it has for the model (each profiled). The default is tract alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EngineChoice {
    /// This engine (an error where the process cannot run it).
    One(Engine),
    /// The faster of the process's engines.
    Auto,
}

impl Default for EngineChoice {
    fn default() -> EngineChoice {
        EngineChoice::One(Engine::Tract)
    }
}

impl EngineChoice {
    /// Parses `tract`, `onnxruntime` or `auto`.
    pub fn parse(s: &str) -> Result<EngineChoice, EngineParseError> {
        s.parse()
    }
}

impl FromStr for EngineChoice {
    type Err = EngineParseError;

    fn from_str(s: &str) -> Result<EngineChoice, EngineParseError> {
        if s.trim().eq_ignore_ascii_case("auto") {
            return Ok(EngineChoice::Auto);
        }
        s.parse().map(EngineChoice::One)
    }
}

impl fmt::Display for EngineChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EngineChoice::One(e) => e.fmt(f),
            EngineChoice::Auto => f.write_str("auto"),
        }
    }
}

/// The engine of each half of a split: the wearable's prefix, the
/// handheld's suffix.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Engines {
    /// The wearable's half.
    pub prefix: Engine,
    /// The handheld's half.
    pub suffix: Engine,
}

impl Engines {
    /// tract on both sides (the default).
    pub const TRACT: Engines = Engines { prefix: Engine::Tract, suffix: Engine::Tract };

    /// `engine` on both sides.
    pub fn both(engine: Engine) -> Engines {
        Engines { prefix: engine, suffix: engine }
    }
}

impl fmt::Display for Engines {
    /// `tract` when both halves run on one engine, else `tract+onnxruntime`
    /// (prefix first).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.prefix == self.suffix {
            self.prefix.fmt(f)
        } else {
            write!(f, "{}+{}", self.prefix, self.suffix)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_unknown_ones_are_refused() {
        for e in Engine::ALL {
            assert_eq!(e.name().parse::<Engine>(), Ok(e));
            assert_eq!(e.name().parse::<EngineChoice>(), Ok(EngineChoice::One(e)));
        }
        assert_eq!("AUTO".parse::<EngineChoice>(), Ok(EngineChoice::Auto));
        assert_eq!(" ort ".parse::<Engine>(), Ok(Engine::OnnxRuntime));
        let err = "tflite".parse::<EngineChoice>().expect_err("not an engine");
        assert!(err.to_string().contains("'tflite'"), "{err}");
        assert!("auto".parse::<Engine>().is_err(), "auto is a choice, not an engine");
        assert_eq!(EngineChoice::default(), EngineChoice::One(Engine::Tract), "tract unless told otherwise");
    }

    #[test]
    fn a_split_names_its_engines_prefix_first() {
        assert_eq!(Engines::TRACT.to_string(), "tract");
        let mixed = Engines { prefix: Engine::OnnxRuntime, suffix: Engine::Tract };
        assert_eq!(mixed.to_string(), "onnxruntime+tract");
    }
}
