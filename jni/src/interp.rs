//! One Java `Interpreter`'s state, without JNI: the shared session, the
//! model's tensors as Java sees them, the last frame's outputs and report,
//! and a stream's frames; and tensors to and from native-order bytes (what
//! Java's arrays and buffers are copied as).

use std::collections::VecDeque;
use std::time::Duration;

use tandem::client::{Frame, FrameReport};
use tandem::{Outputs, Tensor, Values};
use tandem_core::DatumType;
use tandem_ffi::app::{AppError, AppSession};

/// What went wrong, and so which Java exception it becomes.
#[derive(Debug, thiserror::Error)]
pub enum InterpError {
    /// A wrong shape, type, index or setting: `IllegalArgumentException`.
    #[error("{0}")]
    Argument(String),
    /// A closed or unknown interpreter: `IllegalStateException`.
    #[error("{0}")]
    State(String),
    /// What Tandem refuses or cannot do: `TandemException`.
    #[error("{0}")]
    Tandem(String),
}

impl From<AppError> for InterpError {
    fn from(e: AppError) -> InterpError {
        match e {
            AppError::BadDimension { .. }
            | AppError::BadHint { .. }
            | AppError::BadPlacement { .. }
            | AppError::BadEngine(_)
            | AppError::BadLink(_)
            | AppError::BadWait { .. } => InterpError::Argument(e.to_string()),
            AppError::Tandem(e) => e.into(),
            other => InterpError::Tandem(other.to_string()),
        }
    }
}

impl From<tandem::Error> for InterpError {
    fn from(e: tandem::Error) -> InterpError {
        match e {
            tandem::Error::Model(
                tandem::ModelError::TensorMismatch { .. } | tandem::ModelError::UnknownInput { .. },
            ) => InterpError::Argument(e.to_string()),
            other => InterpError::Tandem(other.to_string()),
        }
    }
}

/// Element types as Java's `dev.tandem.DataType` numbers them (its `code`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum DType {
    /// A type Java cannot feed or read (strings, f16, complex, ...).
    Unsupported = 0,
    /// `float`.
    Float32 = 1,
    /// `int`.
    Int32 = 2,
    /// `byte`, read as unsigned.
    UInt8 = 3,
    /// `long`.
    Int64 = 4,
    /// `boolean`.
    Bool = 5,
    /// `short`.
    Int16 = 6,
    /// `byte`.
    Int8 = 7,
    /// `double`.
    Float64 = 8,
}

impl DType {
    /// The Java type of tract's `dt`.
    pub fn of(dt: DatumType) -> DType {
        match dt {
            DatumType::F32 => DType::Float32,
            DatumType::I32 => DType::Int32,
            DatumType::U8 => DType::UInt8,
            DatumType::I64 => DType::Int64,
            DatumType::Bool => DType::Bool,
            DatumType::I16 => DType::Int16,
            DatumType::I8 => DType::Int8,
            DatumType::F64 => DType::Float64,
            _ => DType::Unsupported,
        }
    }

    /// Bytes per element (0 for unsupported types).
    pub fn size(self) -> usize {
        match self {
            DType::Unsupported => 0,
            DType::UInt8 | DType::Int8 | DType::Bool => 1,
            DType::Int16 => 2,
            DType::Float32 | DType::Int32 => 4,
            DType::Int64 | DType::Float64 => 8,
        }
    }
}

/// A tensor of `shape` from `bytes`, `dtype`'s elements in native order;
/// the byte count must be the shape's exactly.
pub fn tensor_from_bytes(dtype: DType, shape: &[usize], bytes: &[u8]) -> Result<Tensor, InterpError> {
    let n = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    let want = n.and_then(|n| n.checked_mul(dtype.size()));
    if dtype == DType::Unsupported || want != Some(bytes.len()) {
        return Err(InterpError::Argument(format!(
            "a {dtype:?} tensor of shape {shape:?} takes {} bytes, {} were given",
            want.map_or_else(|| "too many".to_string(), |w| w.to_string()),
            bytes.len()
        )));
    }
    fn typed<T: tract_onnx::prelude::Datum + Copy, const N: usize>(
        shape: &[usize],
        bytes: &[u8],
        from: impl Fn([u8; N]) -> T,
    ) -> Result<Tensor, InterpError> {
        let values: Vec<T> = bytes
            .chunks_exact(N)
            .map(|c| {
                let mut a = [0u8; N];
                a.copy_from_slice(c);
                from(a)
            })
            .collect();
        Ok(tandem::tensor_from_slice(shape, &values)?)
    }
    match dtype {
        DType::Float32 => typed(shape, bytes, f32::from_ne_bytes),
        DType::Int32 => typed(shape, bytes, i32::from_ne_bytes),
        DType::UInt8 => typed(shape, bytes, u8::from_ne_bytes),
        DType::Int64 => typed(shape, bytes, i64::from_ne_bytes),
        DType::Bool => typed(shape, bytes, |[b]: [u8; 1]| b != 0),
        DType::Int16 => typed(shape, bytes, i16::from_ne_bytes),
        DType::Int8 => typed(shape, bytes, i8::from_ne_bytes),
        DType::Float64 => typed(shape, bytes, f64::from_ne_bytes),
        DType::Unsupported => Err(InterpError::Argument("an unsupported element type".into())),
    }
}

/// A tensor's elements as native-order bytes (bools as 0 and 1).
pub fn tensor_to_bytes(name: &str, t: &Tensor) -> Result<Vec<u8>, InterpError> {
    fn bytes<T: tract_onnx::prelude::Datum + Copy, const N: usize>(
        name: &str,
        t: &Tensor,
        to: impl Fn(T) -> [u8; N],
    ) -> Result<Vec<u8>, InterpError> {
        let view = t
            .to_plain_array_view::<T>()
            .map_err(|e| InterpError::Tandem(format!("reading output '{name}': {e}")))?;
        Ok(view.iter().flat_map(|&v| to(v)).collect())
    }
    match DType::of(t.datum_type()) {
        DType::Float32 => bytes(name, t, f32::to_ne_bytes),
        DType::Int32 => bytes(name, t, i32::to_ne_bytes),
        DType::UInt8 => bytes(name, t, u8::to_ne_bytes),
        DType::Int64 => bytes(name, t, i64::to_ne_bytes),
        DType::Bool => bytes(name, t, |b: bool| [b as u8]),
        DType::Int16 => bytes(name, t, i16::to_ne_bytes),
        DType::Int8 => bytes(name, t, i8::to_ne_bytes),
        DType::Float64 => bytes(name, t, f64::to_ne_bytes),
        DType::Unsupported => Err(InterpError::Tandem(format!(
            "output '{name}' holds {:?} values, which Java cannot read",
            t.datum_type()
        ))),
    }
}

/// A model tensor as Java's `Tensor` shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorSpec {
    /// Its name in the model.
    pub name: String,
    /// Its element type.
    pub dtype: DType,
    /// Its shape (empty for a scalar).
    pub shape: Vec<usize>,
}

/// The settings Java's `Interpreter.Options` carry.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    /// The handheld's `host:port` (`None`: the watch alone).
    pub handheld: Option<String>,
    /// The wearable's keystore.
    pub keys: Option<String>,
    /// An emulated link profile.
    pub link: Option<String>,
    /// `auto`, `wearable` or `handheld`.
    pub placement: Option<String>,
    /// `tract`, `onnxruntime` or `auto`.
    pub engine: Option<String>,
    /// The latency hint, ms.
    pub hint_ms: Option<f64>,
    /// Fail unless a handheld is ready within this.
    pub require_handheld: Option<Duration>,
    /// How long to wait for the handheld when not required.
    pub ready_timeout: Option<Duration>,
    /// Shapes of symbolic inputs.
    pub shapes: Vec<(String, Vec<i64>)>,
}

/// One Java `Interpreter`.
pub struct Interp {
    app: AppSession,
    inputs: Vec<TensorSpec>,
    outputs: Vec<TensorSpec>,
    /// The outputs Java reads: the last run's, or the last frame taken from a stream.
    current: Option<Outputs>,
    report: Option<FrameReport>,
    /// A stream's frame being fed, then those submitted and not yet run,
    /// then each one run and not yet taken, in order: its frame or its own
    /// error.
    feeding: Values,
    submitted: Vec<Values>,
    done: VecDeque<Result<Frame, InterpError>>,
}

impl Interp {
    /// Opens a session for the model at `path` with `settings` (connecting
    /// to the handheld when one is named).
    pub fn open(path: &str, settings: &Settings) -> Result<Interp, InterpError> {
        let mut app = AppSession::new(path.into(), settings.handheld.clone())?;
        for (name, shape) in &settings.shapes {
            app.set_input_shape(name, shape)?;
        }
        if let Some(p) = &settings.placement {
            app.set_placement(p)?;
        }
        if let Some(e) = &settings.engine {
            app.set_engine(e)?;
        }
        if let Some(k) = &settings.keys {
            app.set_keys(k.into())?;
        }
        if let Some(l) = &settings.link {
            if settings.handheld.is_none() {
                return Err(InterpError::Argument(format!(
                    "link '{l}': an emulated link needs a handheld (setHandheld)"
                )));
            }
            app.set_link(l)?;
        }
        if let Some(ms) = settings.hint_ms {
            app.set_latency_hint_ms(ms)?;
        }
        app.set_require_handheld(settings.require_handheld)?;
        if let Some(t) = settings.ready_timeout {
            app.set_ready_timeout(t)?;
        }
        // What the session refuses at open (a model it cannot run) is Tandem's
        // refusal, not a wrong argument.
        let session = app.open().map_err(|e| match e {
            AppError::Tandem(e) => InterpError::Tandem(e.to_string()),
            other => other.into(),
        })?;
        let g = session.model().graph();
        let spec = |t: tandem::TensorId| {
            let info = g.tensor(t);
            TensorSpec { name: info.name.clone(), dtype: DType::of(info.dtype), shape: info.shape.clone() }
        };
        let inputs = g.inputs().iter().map(|&t| spec(t)).collect();
        let outputs = g.outputs().iter().map(|&t| spec(t)).collect();
        Ok(Interp {
            app,
            inputs,
            outputs,
            current: None,
            report: None,
            feeding: Values::new(),
            submitted: vec![],
            done: VecDeque::new(),
        })
    }

    /// The model's inputs, in its order.
    pub fn inputs(&self) -> &[TensorSpec] {
        &self.inputs
    }

    /// The model's outputs, in its order.
    pub fn outputs(&self) -> &[TensorSpec] {
        &self.outputs
    }

    /// Input or output `index`, or an argument error naming the count.
    pub fn spec(&self, output: bool, index: i32) -> Result<&TensorSpec, InterpError> {
        let (list, what) = if output { (&self.outputs, "output") } else { (&self.inputs, "input") };
        usize::try_from(index).ok().and_then(|i| list.get(i)).ok_or_else(|| {
            InterpError::Argument(format!("{what} index {index}: the model has {} {what}s", list.len()))
        })
    }

    /// A tensor for input `index` from native-order bytes (its shape the model's).
    fn input_tensor(&self, index: i32, bytes: &[u8]) -> Result<(String, Tensor), InterpError> {
        let spec = self.spec(false, index)?;
        if spec.dtype == DType::Unsupported {
            return Err(InterpError::Argument(format!(
                "input '{}' has an element type Java cannot feed",
                spec.name
            )));
        }
        let t = tensor_from_bytes(spec.dtype, &spec.shape, bytes)
            .map_err(|e| InterpError::Argument(format!("input '{}': {e}", spec.name)))?;
        Ok((spec.name.clone(), t))
    }

    /// Sets input `index` for the next [`Interp::run`].
    pub fn feed(&mut self, index: i32, bytes: &[u8]) -> Result<(), InterpError> {
        let (name, t) = self.input_tensor(index, bytes)?;
        Ok(self.session()?.feed(&name, t)?)
    }

    /// Runs one frame on the inputs fed; its outputs become the current ones.
    pub fn run(&mut self) -> Result<FrameReport, InterpError> {
        let session = self.session()?;
        let report = session.run()?;
        self.current = Some(session.outputs()?.clone());
        self.report = Some(report.clone());
        Ok(report)
    }

    /// The session (open since [`Interp::open`]).
    fn session(&mut self) -> Result<&mut tandem::Session, InterpError> {
        Ok(self.app.open()?)
    }

    /// Current output `index`: its shape and native-order bytes.
    pub fn output(&self, index: i32) -> Result<(Vec<usize>, Vec<u8>), InterpError> {
        let spec = self.spec(true, index)?;
        let outputs = self
            .current
            .as_ref()
            .ok_or_else(|| InterpError::State("nothing has run yet: outputs are read after a run".into()))?;
        let t = outputs.require(&spec.name)?;
        Ok((t.shape().to_vec(), tensor_to_bytes(&spec.name, t)?))
    }

    /// The last frame's report (run, or taken from a stream).
    pub fn last_report(&self) -> Option<&FrameReport> {
        self.report.as_ref()
    }

    /// Where the session stands with its handheld, in words.
    pub fn status(&self) -> String {
        self.app.opened().map_or_else(|| "not open".to_string(), |s| s.status().to_string())
    }

    /// Whether the handheld takes suffixes now.
    pub fn is_handheld_ready(&self) -> bool {
        self.app.opened().is_some_and(|s| s.is_ready())
    }

    /// Sets input `index` of the stream frame being built.
    pub fn stream_feed(&mut self, index: i32, bytes: &[u8]) -> Result<(), InterpError> {
        let (name, t) = self.input_tensor(index, bytes)?;
        self.feeding.insert(name, t.into());
        Ok(())
    }

    /// Submits the frame built: every input must have been fed.
    pub fn stream_submit(&mut self) -> Result<(), InterpError> {
        if let Some(missing) = self.inputs.iter().find(|s| !self.feeding.contains_key(&s.name)) {
            return Err(InterpError::Argument(format!(
                "input '{}' was not fed for this frame",
                missing.name
            )));
        }
        self.submitted.push(std::mem::take(&mut self.feeding));
        Ok(())
    }

    /// Frames submitted and not yet run, and frames run and not yet taken.
    pub fn stream_pending(&self) -> (usize, usize) {
        (self.submitted.len(), self.done.len())
    }

    /// Takes the oldest frame's result, running the frames submitted so
    /// far through the pipeline first when none is waiting; its outputs and
    /// report become the current ones. Each frame is taken once, in the
    /// order submitted: a frame that failed, or that a failing session did
    /// not run, is its own error at its own take.
    pub fn stream_take(&mut self) -> Result<FrameReport, InterpError> {
        if self.done.is_empty() {
            if self.submitted.is_empty() {
                return Err(InterpError::State("no frame was submitted: nothing to take".into()));
            }
            let frames = std::mem::take(&mut self.submitted);
            let count = frames.len();
            let mut delivered = Vec::with_capacity(count);
            let outcome = self.session().and_then(|s| {
                Ok(s.stream_with(frames, None, |r| delivered.push(r.map_err(InterpError::from)))?)
            });
            self.done.extend(settle(count, delivered, outcome));
        }
        let frame = self
            .done
            .pop_front()
            .ok_or_else(|| InterpError::Tandem("the stream delivered no frame".into()))?;
        let frame = frame?;
        self.current = Some(frame.outputs);
        self.report = Some(frame.report.clone());
        Ok(frame.report)
    }
}

/// The results of a stream of `count` frames, one per frame in order: those
/// `delivered` (in order), then, for each frame the stream did not deliver
/// because the session failed (`outcome`), an error of its own naming it.
fn settle<T>(
    count: usize,
    mut delivered: Vec<Result<T, InterpError>>,
    outcome: Result<(), InterpError>,
) -> Vec<Result<T, InterpError>> {
    delivered.truncate(count);
    let why = match outcome {
        Err(e) => e.to_string(),
        Ok(()) => "the stream ended before it".to_string(),
    };
    let first = delivered.len();
    delivered.extend((first..count).map(|k| {
        Err(InterpError::Tandem(format!("frame {} of {count} taken together did not run: {why}", k + 1)))
    }));
    delivered
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip_and_wrong_lengths_are_argument_errors() {
        let values = [1i64, -2, 3];
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_ne_bytes()).collect();
        let t = tensor_from_bytes(DType::Int64, &[3], &bytes).expect("i64");
        assert_eq!(t.to_plain_array_view::<i64>().expect("i64").iter().copied().collect::<Vec<_>>(), values);
        assert_eq!(tensor_to_bytes("t", &t).expect("bytes"), bytes);
        let e = tensor_from_bytes(DType::Int64, &[4], &bytes).expect_err("short");
        assert!(matches!(&e, InterpError::Argument(m) if m.contains("32 bytes, 24 were given")), "{e}");
        let e = tensor_from_bytes(DType::Float32, &[usize::MAX, 2], &[]).expect_err("overflow");
        assert!(matches!(e, InterpError::Argument(_)));
        let b = tensor_from_bytes(DType::Bool, &[2], &[0, 7]).expect("bool");
        assert_eq!(tensor_to_bytes("b", &b).expect("bytes"), vec![0, 1]);
    }

    #[test]
    fn a_failed_stream_gives_every_frame_not_run_its_own_error() {
        let delivered = vec![Ok(1), Err(InterpError::Argument("frame 2 is wrong".into()))];
        let failed = Err(InterpError::Tandem("the link broke".into()));
        let results = settle(4, delivered, failed);
        assert_eq!(results.len(), 4, "one result per frame");
        assert!(matches!(results[0], Ok(1)));
        assert!(matches!(&results[1], Err(InterpError::Argument(m)) if m == "frame 2 is wrong"));
        for (k, r) in results.iter().enumerate().skip(2) {
            let want = format!("frame {} of 4 taken together did not run: the link broke", k + 1);
            assert!(matches!(r, Err(InterpError::Tandem(m)) if *m == want), "{r:?}");
        }
        let all: Vec<Result<u8, _>> = settle(2, vec![Ok(1), Ok(2)], Ok(()));
        assert!(matches!(all[..], [Ok(1), Ok(2)]));
    }

    #[test]
    fn a_local_interpreter_runs_and_refuses_bad_indices() {
        let dir = std::env::temp_dir().join(format!("tandem-jni-interp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("tiny_mlp.onnx");
        std::fs::write(&path, tandem_models::tiny::tiny_mlp_onnx()).expect("write");
        let mut i = Interp::open(path.to_str().expect("utf-8"), &Settings::default()).expect("opens");
        assert_eq!(i.inputs()[0].dtype, DType::Float32);
        assert!(matches!(i.spec(false, 1), Err(InterpError::Argument(_))));
        assert!(matches!(i.output(0), Err(InterpError::State(_))));
        let n: usize = i.inputs()[0].shape.iter().product();
        let x: Vec<u8> = (0..n).flat_map(|k| (k as f32 / 10.0).to_ne_bytes()).collect();
        assert!(matches!(i.feed(0, &x[..x.len() - 1]), Err(InterpError::Argument(_))));
        i.feed(0, &x).expect("feeds");
        let report = i.run().expect("runs");
        assert!(!report.offloaded);
        let (shape, bytes) = i.output(0).expect("output");
        assert_eq!(bytes.len(), shape.iter().product::<usize>() * 4);
        // The same frame through a stream gives the same bytes.
        i.stream_feed(0, &x).expect("feeds");
        i.stream_submit().expect("submits");
        assert!(matches!(i.stream_submit(), Err(InterpError::Argument(_))), "a frame with no input");
        i.stream_take().expect("takes");
        assert_eq!(i.output(0).expect("output").1, bytes);
        assert!(matches!(i.stream_take(), Err(InterpError::State(_))));
        // Frames taken together come back once each, in order.
        for _ in 0..3 {
            i.stream_feed(0, &x).expect("feeds");
            i.stream_submit().expect("submits");
        }
        assert_eq!(i.stream_pending(), (3, 0));
        let frames: Vec<u64> = (0..3).map(|_| i.stream_take().expect("takes").frame).collect();
        assert!(frames.windows(2).all(|w| w[0] < w[1]), "{frames:?}");
        assert_eq!(i.output(0).expect("output").1, bytes);
        assert_eq!(i.stream_pending(), (0, 0));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
