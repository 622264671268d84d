//! What the command-line tools share: one line for an error and its
//! causes, and the input-shape and symbol options of every command that
//! loads a model.

/// `--input-shape NAME=D1,D2,...` and `--dim SYMBOL=VALUE`, for every
/// command that loads a model.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct ShapeArgs {
    /// Concrete shape for an input, e.g. `x=1,3,48,192`; repeatable.
    #[arg(long = "input-shape", value_name = "NAME=D1,D2,...")]
    pub input_shape: Vec<String>,
    /// A value for a symbolic dimension as the model names it, e.g.
    /// `batch=1`; binds it in every input that has it; repeatable.
    #[arg(long = "dim", value_name = "SYMBOL=VALUE")]
    pub dim: Vec<String>,
}

impl ShapeArgs {
    /// The overrides, parsed.
    pub fn shapes(&self) -> Result<tandem::InputShapes, tandem::ModelError> {
        Ok(tandem::InputShapes::parse_with_dims(&self.input_shape, &self.dim)?)
    }
}

/// `--engine` and `--ort-lib`, for every command that runs a model.
#[derive(clap::Args, Clone, Debug)]
pub struct EngineArgs {
    /// Which engine runs this side's half: tract, onnxruntime, or auto (the
    /// faster of the engines this machine has, from a profile of each).
    #[arg(long, default_value = "tract", value_parser = tandem::engine::EngineChoice::parse)]
    pub engine: tandem::engine::EngineChoice,
    /// onnxruntime's shared library (libonnxruntime.so, 1.20 or newer);
    /// default: $ORT_DYLIB_PATH.
    #[arg(long, value_name = "PATH")]
    pub ort_lib: Option<std::path::PathBuf>,
}

impl EngineArgs {
    /// Sets the library path, and checks that a named engine is available
    /// now (an error saying how to get it, before any work is done).
    pub fn apply(&self) -> Result<tandem::engine::EngineChoice, tandem::Error> {
        if let Some(path) = &self.ort_lib {
            tandem::engine::set_onnxruntime_library(path)?;
        }
        if let tandem::engine::EngineChoice::One(e) = self.engine {
            tandem::engine::backend(e)?;
        }
        Ok(self.engine)
    }
}

/// An error and its chain of causes on one line, `a: b: c`, leaving out a
/// cause whose text the message already holds (many errors print their
/// source in their own message).
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut message = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        cause = c.source();
    }
    message.replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot read {path}: {source}")]
    struct Inner {
        path: String,
        source: std::io::Error,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("loading the model")]
    struct Outer(#[source] Inner);

    #[test]
    fn causes_are_said_once() {
        let io = || std::io::Error::new(std::io::ErrorKind::NotFound, "No such file");
        let inner = Inner { path: "m.onnx".into(), source: io() };
        assert_eq!(error_chain(&inner), "cannot read m.onnx: No such file");
        let outer = Outer(Inner { path: "m.onnx".into(), source: io() });
        assert_eq!(error_chain(&outer), "loading the model: cannot read m.onnx: No such file");
    }
}
