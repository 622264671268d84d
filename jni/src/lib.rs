//! The native side of Tandem's Java API (package `dev.tandem`,
//! `libtandem_jni.so`): the functions of `dev.tandem.Native`, over the
//! same [`tandem_ffi::app::AppSession`] the C ABI uses, so Java and C open,
//! connect and run sessions alike.
//!
//! **Nothing a Java caller passes crashes the JVM.** Every entry point
//! catches panics and turns every error into a Java exception:
//! `IllegalArgumentException` for a wrong shape, type, index or setting,
//! `IllegalStateException` for a closed or unknown handle, and
//! `dev.tandem.TandemException` for what Tandem refuses or cannot do.
//! Handles are numbers looked up in a table, not pointers, so a stale or
//! forged one is an exception too; and every array's length is checked
//! against the tensor's before anything is copied. There is no `unsafe`
//! block in this crate: the `jni` crate's safe calls do the copying.
//!
//! # Layout
//! - [`interp`]: one Java `Interpreter`'s state (the session, the last
//!   outputs, a stream's frames) and the byte conversions, without JNI.
//! - `exports`: the `Java_dev_tandem_Native_*` functions, the exceptions
//!   and the handle table.
//!
//! ```
//! use tandem_jni::interp::{tensor_from_bytes, tensor_to_bytes, DType};
//! // The conversions run without a JVM: a float as four native-order bytes.
//! let bytes = 1.5f32.to_ne_bytes();
//! let t = tensor_from_bytes(DType::Float32, &[1], &bytes).expect("four bytes for one f32");
//! assert_eq!(tensor_to_bytes("x", &t).expect("f32"), bytes);
//! assert!(tensor_from_bytes(DType::Float32, &[2], &bytes).is_err(), "two floats need eight bytes");
//! ```

pub mod interp;

// `#[no_mangle]` is all the JVM needs to find these functions by name; it
// counts as unsafe code for the lint, so it is allowed here and nowhere else.
#[allow(unsafe_code)]
mod exports;
