//! The `Java_dev_tandem_Native_*` functions `dev.tandem.Native` declares,
//! the handle table, and errors turned into Java exceptions.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use jni::objects::{JByteArray, JClass, JIntArray, JObject, JObjectArray, JString, JValue};
use jni::sys::{
    jboolean, jbyteArray, jdouble, jint, jintArray, jlong, jobject, jstring, JNI_FALSE, JNI_TRUE,
};
use jni::JNIEnv;
use tandem::client::FrameReport;

use crate::interp::{Interp, InterpError, Settings};

/// Why an entry point failed.
enum Failure {
    /// Ours: becomes the exception its kind says.
    Interp(InterpError),
    /// A JNI call failed (a Java exception may already be pending).
    Jni(jni::errors::Error),
}

impl From<InterpError> for Failure {
    fn from(e: InterpError) -> Failure {
        Failure::Interp(e)
    }
}

impl From<jni::errors::Error> for Failure {
    fn from(e: jni::errors::Error) -> Failure {
        Failure::Jni(e)
    }
}

impl From<tandem::Error> for Failure {
    fn from(e: tandem::Error) -> Failure {
        Failure::Interp(e.into())
    }
}

const ARGUMENT: &str = "java/lang/IllegalArgumentException";
const STATE: &str = "java/lang/IllegalStateException";
const TANDEM: &str = "dev/tandem/TandemException";

/// Runs `f`, turning its error or a panic into a Java exception and
/// returning `fail` then. Nothing unwinds into the JVM.
fn guard<'local, T>(
    env: &mut JNIEnv<'local>,
    fail: T,
    f: impl FnOnce(&mut JNIEnv<'local>) -> Result<T, Failure>,
) -> T {
    let (class, message) = match catch_unwind(AssertUnwindSafe(|| f(env))) {
        Ok(Ok(v)) => return v,
        Ok(Err(Failure::Interp(InterpError::Argument(m)))) => (ARGUMENT, m),
        Ok(Err(Failure::Interp(InterpError::State(m)))) => (STATE, m),
        Ok(Err(Failure::Interp(InterpError::Tandem(m)))) => (TANDEM, m),
        Ok(Err(Failure::Jni(e))) => (TANDEM, format!("JNI: {e}")),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            (TANDEM, format!("internal error in tandem (please report): {what}"))
        }
    };
    // A Java exception already pending (from a failed JNI call) is the one the caller sees.
    if !env.exception_check().unwrap_or(true) {
        let _ = env.throw_new(class, message);
    }
    fail
}

/// The open interpreters by handle. Handles are numbers, never pointers:
/// a closed, stale or forged one is an `IllegalStateException`.
#[derive(Default)]
struct Table {
    next: jlong,
    open: HashMap<jlong, Arc<Mutex<Interp>>>,
}

fn table() -> MutexGuard<'static, Table> {
    static TABLE: OnceLock<Mutex<Table>> = OnceLock::new();
    // A panic while holding the lock leaves the map itself consistent.
    TABLE.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs `f` on the interpreter behind `handle`.
fn with<T>(handle: jlong, f: impl FnOnce(&mut Interp) -> Result<T, Failure>) -> Result<T, Failure> {
    let interp = table()
        .open
        .get(&handle)
        .cloned()
        .ok_or_else(|| InterpError::State("the interpreter is closed".into()))?;
    let mut guard = interp.lock().unwrap_or_else(|p| p.into_inner());
    f(&mut guard)
}

/// A Java string, or `None` for null.
fn optional(env: &mut JNIEnv, s: &JString) -> Result<Option<String>, Failure> {
    if s.is_null() {
        return Ok(None);
    }
    Ok(Some(env.get_string(s)?.into()))
}

/// A positive number of seconds as a wait; `None` for 0, NaN or below (the
/// session's default). One too long to be a deadline is refused by the session.
fn wait(secs: f64) -> Option<Duration> {
    (secs > 0.0).then(|| Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX))
}

/// The shapes Java set for symbolic inputs: names and `int[]` shapes, pairwise.
fn shapes(
    env: &mut JNIEnv,
    names: &JObjectArray,
    dims: &JObjectArray,
) -> Result<Vec<(String, Vec<i64>)>, Failure> {
    if names.is_null() || dims.is_null() {
        return Ok(vec![]);
    }
    let n = env.get_array_length(names)?;
    if env.get_array_length(dims)? != n {
        return Err(InterpError::Argument("input shapes: as many names as shapes".into()).into());
    }
    let mut out = vec![];
    for i in 0..n {
        // Each element read is a local reference, freed only when the call
        // returns to Java unless its frame is popped here: thousands of
        // shapes would overflow the JVM's local reference table (ART aborts).
        let entry = env.with_local_frame(2, |env| -> Result<_, Failure> {
            let name = JString::from(env.get_object_array_element(names, i)?);
            let name = optional(env, &name)?
                .ok_or_else(|| InterpError::Argument("input shapes: a null name".into()))?;
            let shape = JIntArray::from(env.get_object_array_element(dims, i)?);
            if shape.is_null() {
                return Err(InterpError::Argument(format!("input shape of '{name}' is null")).into());
            }
            let len = env.get_array_length(&shape)?;
            let mut buf = vec![0; usize::try_from(len).unwrap_or(0)];
            env.get_int_array_region(&shape, 0, &mut buf)?;
            Ok((name, buf.into_iter().map(i64::from).collect()))
        })?;
        out.push(entry);
    }
    Ok(out)
}

/// A Java `int[]` of `values`; a dimension beyond `int` is an error.
fn int_array<'local>(env: &mut JNIEnv<'local>, values: &[usize]) -> Result<JIntArray<'local>, Failure> {
    let ints = values
        .iter()
        .map(|&v| jint::try_from(v))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| InterpError::Tandem(format!("shape {values:?} does not fit Java's int")))?;
    let len = i32::try_from(ints.len()).map_err(|_| InterpError::Tandem("rank too large".into()))?;
    let array = env.new_int_array(len)?;
    env.set_int_array_region(&array, 0, &ints)?;
    Ok(array)
}

/// A Java `dev.tandem.FrameReport` of `r`.
fn report<'local>(env: &mut JNIEnv<'local>, r: &FrameReport) -> Result<JObject<'local>, Failure> {
    let json = serde_json::to_string(r).map_err(|e| InterpError::Tandem(format!("the report: {e}")))?;
    let reason = match &r.local_reason {
        Some(s) => JObject::from(env.new_string(s)?),
        None => JObject::null(),
    };
    let fallback = match &r.fallback {
        Some(s) => JObject::from(env.new_string(s)?),
        None => JObject::null(),
    };
    let cut = JObject::from(env.new_string(r.cut.to_string())?);
    let json = JObject::from(env.new_string(json)?);
    let clamp = |v: u64| jlong::try_from(v).unwrap_or(jlong::MAX);
    Ok(env.new_object(
        "dev/tandem/FrameReport",
        "(JZLjava/lang/String;Ljava/lang/String;Ljava/lang/String;DDDDJJLjava/lang/String;)V",
        &[
            JValue::Long(clamp(r.frame)),
            JValue::Bool(if r.offloaded { JNI_TRUE } else { JNI_FALSE }),
            JValue::Object(&reason),
            JValue::Object(&fallback),
            JValue::Object(&cut),
            JValue::Double(r.latency_ms),
            JValue::Double(r.wearable_ms),
            JValue::Double(r.link_ms),
            JValue::Double(r.handheld_ms),
            JValue::Long(clamp(r.up_bytes)),
            JValue::Long(clamp(r.down_bytes)),
            JValue::Object(&json),
        ],
    )?)
}

/// `static native long open(String model, String handheld, String keys,
/// String link, String placement, String engine, double hintMs,
/// double requireSeconds, double readySeconds, String[] shapeNames,
/// int[][] shapes)`: opens an interpreter and returns its handle.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_dev_tandem_Native_open<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    model: JString<'local>,
    handheld: JString<'local>,
    keys: JString<'local>,
    link: JString<'local>,
    placement: JString<'local>,
    engine: JString<'local>,
    hint_ms: jdouble,
    require_seconds: jdouble,
    ready_seconds: jdouble,
    shape_names: JObjectArray<'local>,
    shape_dims: JObjectArray<'local>,
) -> jlong {
    guard(&mut env, 0, |env| {
        let path = optional(env, &model)?.ok_or_else(|| InterpError::Argument("the model is null".into()))?;
        let settings = Settings {
            handheld: optional(env, &handheld)?,
            keys: optional(env, &keys)?,
            link: optional(env, &link)?,
            placement: optional(env, &placement)?,
            engine: optional(env, &engine)?,
            hint_ms: (!hint_ms.is_nan()).then_some(hint_ms),
            require_handheld: wait(require_seconds),
            ready_timeout: wait(ready_seconds),
            shapes: shapes(env, &shape_names, &shape_dims)?,
        };
        let interp = Interp::open(&path, &settings)?;
        let mut t = table();
        t.next += 1;
        let handle = t.next;
        t.open.insert(handle, Arc::new(Mutex::new(interp)));
        Ok(handle)
    })
}

/// `static native void close(long handle)`: closes it (again: nothing).
#[no_mangle]
pub extern "system" fn Java_dev_tandem_Native_close<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    handle: jlong,
) {
    guard(&mut env, (), |_| {
        // Dropped outside the table's lock: closing a session joins its threads.
        let interp = table().open.remove(&handle);
        drop(interp);
        Ok(())
    })
}

/// `static native int tensorCount(long handle, boolean output)`.
#[no_mangle]
pub extern "system" fn Java_dev_tandem_Native_tensorCount<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    handle: jlong,
    output: jboolean,
) -> jint {
    guard(&mut env, -1, |_| {
        with(handle, |i| {
            let n = if output == JNI_TRUE { i.outputs().len() } else { i.inputs().len() };
            Ok(jint::try_from(n).unwrap_or(jint::MAX))
        })
    })
}

/// `static native String tensorName(long handle, boolean output, int index)`.
#[no_mangle]
pub extern "system" fn Java_dev_tandem_Native_tensorName<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    handle: jlong,
    output: jboolean,
    index: jint,
) -> jstring {
    guard(&mut env, std::ptr::null_mut(), |env| {
        let name = with(handle, |i| Ok(i.spec(output == JNI_TRUE, index)?.name.clone()))?;
        Ok(env.new_string(name)?.into_raw())
    })
}

/// `static native int tensorType(long handle, boolean output, int index)`:
/// the `dev.tandem.DataType` code.
#[no_mangle]
pub extern "system" fn Java_dev_tandem_Native_tensorType<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    handle: jlong,
    output: jboolean,
    index: jint,
) -> jint {
    guard(&mut env, -1, |_| with(handle, |i| Ok(i.spec(output == JNI_TRUE, index)?.dtype as jint)))
}

/// `static native int[] tensorShape(long handle, boolean output, int index)`.
#[no_mangle]
pub extern "system" fn Java_dev_tandem_Native_tensorShape<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    handle: jlong,
    output: jboolean,
    index: jint,
) -> jintArray {
    guard(&mut env, std::ptr::null_mut(), |env| {
        let shape = with(handle, |i| Ok(i.spec(output == JNI_TRUE, index)?.shape.clone()))?;
        Ok(int_array(env, &shape)?.into_raw())
    })
}

/// The bytes of a Java `byte[]` (null is an argument error).
fn bytes(env: &mut JNIEnv, data: &JByteArray) -> Result<Vec<u8>, Failure> {
    if data.is_null() {
        return Err(InterpError::Argument("the input's data is null".into()).into());
    }
    Ok(env.convert_byte_array(data)?)
}

/// `static native void feed(long handle, int index, byte[] data)`: input
/// `index` for the next run, its elements in native order.
#[no_mangle]
pub extern "system" fn Java_dev_tandem_Native_feed<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    handle: jlong,
    index: jint,
    data: JByteArray<'local>,
) {
    guard(&mut env, (), |env| {
        let data = bytes(env, &data)?;
        with(handle, |i| Ok(i.feed(index, &data)?))
    })
}

/// `static native FrameReport run(long handle)`: one frame on the inputs fed.
#[no_mangle]
pub extern "system" fn Java_dev_tandem_Native_run<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    handle: jlong,
) -> jobject {
    guard(&mut env, std::ptr::null_mut(), |env| {
        let r = with(handle, |i| Ok(i.run()?))?;
        Ok(report(env, &r)?.into_raw())
    })
}

/// `static native int[] outputShape(long handle, int index)`: the current
/// output's shape.
#[no_mangle]
pub extern "system" fn Java_dev_tandem_Native_outputShape<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    handle: jlong,
    index: jint,
) -> jintArray {
    guard(&mut env, std::ptr::null_mut(), |env| {
        let (shape, _) = with(handle, |i| Ok(i.output(index)?))?;
        Ok(int_array(env, &shape)?.into_raw())
    })
}

/// `static native byte[] output(long handle, int index)`: the current
/// output's elements in native order.
#[no_mangle]
pub extern "system" fn Java_dev_tandem_Native_output<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    handle: jlong,
    index: jint,
) -> jbyteArray {
    guard(&mut env, std::ptr::null_mut(), |env| {
        let (_, data) = with(handle, |i| Ok(i.output(index)?))?;
        Ok(env.byte_array_from_slice(&data)?.into_raw())
    })
}

/// `static native FrameReport lastReport(long handle)`: null before any frame.
#[no_mangle]
pub extern "system" fn Java_dev_tandem_Native_lastReport<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    handle: jlong,
) -> jobject {
    guard(&mut env, std::ptr::null_mut(), |env| {
        let r = with(handle, |i| Ok(i.last_report().cloned()))?;
        match r {
            Some(r) => Ok(report(env, &r)?.into_raw()),
            None => Ok(std::ptr::null_mut()),
        }
    })
}

/// `static native String status(long handle)`: the session's status in words.
#[no_mangle]
pub extern "system" fn Java_dev_tandem_Native_status<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    handle: jlong,
) -> jstring {
    guard(&mut env, std::ptr::null_mut(), |env| {
        let s = with(handle, |i| Ok(i.status()))?;
        Ok(env.new_string(s)?.into_raw())
    })
}

/// `static native boolean handheldReady(long handle)`.
#[no_mangle]
pub extern "system" fn Java_dev_tandem_Native_handheldReady<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    handle: jlong,
) -> jboolean {
    guard(&mut env, JNI_FALSE, |_| {
        with(handle, |i| Ok(if i.is_handheld_ready() { JNI_TRUE } else { JNI_FALSE }))
    })
}

/// `static native void streamFeed(long handle, int index, byte[] data)`:
/// input `index` of the stream frame being built.
#[no_mangle]
pub extern "system" fn Java_dev_tandem_Native_streamFeed<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    handle: jlong,
    index: jint,
    data: JByteArray<'local>,
) {
    guard(&mut env, (), |env| {
        let data = bytes(env, &data)?;
        with(handle, |i| Ok(i.stream_feed(index, &data)?))
    })
}

/// `static native void streamSubmit(long handle)`: submits the frame built.
#[no_mangle]
pub extern "system" fn Java_dev_tandem_Native_streamSubmit<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    handle: jlong,
) {
    guard(&mut env, (), |_| with(handle, |i| Ok(i.stream_submit()?)))
}

/// `static native FrameReport streamTake(long handle)`: the oldest frame's
/// report (its outputs become the current ones).
#[no_mangle]
pub extern "system" fn Java_dev_tandem_Native_streamTake<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    handle: jlong,
) -> jobject {
    guard(&mut env, std::ptr::null_mut(), |env| {
        let r = with(handle, |i| Ok(i.stream_take()?))?;
        Ok(report(env, &r)?.into_raw())
    })
}

/// `static native int streamPending(long handle)`: frames submitted and
/// not yet taken.
#[no_mangle]
pub extern "system" fn Java_dev_tandem_Native_streamPending<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    handle: jlong,
) -> jint {
    guard(&mut env, -1, |_| {
        with(handle, |i| {
            let (submitted, done) = i.stream_pending();
            Ok(jint::try_from(submitted + done).unwrap_or(jint::MAX))
        })
    })
}
