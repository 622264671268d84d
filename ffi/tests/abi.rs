//! The ABI called as C would, from Rust: NULLs, bad shapes, fetch before
//! run, a report buffer too small and truncated messages are errors with
//! messages, and a whole local run works.

use std::ffi::{c_char, CStr, CString};
use std::ptr::{null, null_mut};

use tandem_ffi::*;

fn msg(buf: &[c_char]) -> String {
    // SAFETY: the ABI NUL-terminates what it writes; the buffers start zeroed.
    unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned()
}

fn tiny_mlp_file() -> CString {
    let dir = std::env::temp_dir().join(format!("tandem-ffi-abi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("tiny_mlp.onnx");
    std::fs::write(&path, tandem_models::tiny::tiny_mlp_onnx()).expect("write");
    CString::new(path.to_str().expect("utf-8")).expect("no NUL")
}

#[test]
fn errors_come_back_as_messages_and_a_local_run_works() {
    let mut err = [0 as c_char; 256];
    // SAFETY: every pointer below is NULL, a live CString, or a local buffer of the length given.
    unsafe {
        assert!(tandem_open(null(), null(), err.as_mut_ptr(), err.len()).is_null());
        assert_eq!(msg(&err), "model_path is NULL");
        let missing = CString::new("/no/such.onnx").expect("c string");
        assert!(tandem_open(missing.as_ptr(), null(), err.as_mut_ptr(), err.len()).is_null());
        assert!(msg(&err).contains("/no/such.onnx"), "{}", msg(&err));
        // A message cut to the buffer, still NUL-terminated.
        let mut small = [0 as c_char; 8];
        assert!(tandem_open(missing.as_ptr(), null(), small.as_mut_ptr(), small.len()).is_null());
        assert_eq!(msg(&small).len(), 7);

        let path = tiny_mlp_file();
        let s = tandem_open(path.as_ptr(), null(), err.as_mut_ptr(), err.len());
        assert!(!s.is_null(), "{}", msg(&err));
        let x = CString::new("x").expect("c string");
        let y = CString::new("y").expect("c string");
        let (mut out, mut shape, mut rank) = ([0f32; 8], [0i64; 4], 4usize);
        let n = tandem_fetch_f32(
            s,
            y.as_ptr(),
            out.as_mut_ptr(),
            8,
            shape.as_mut_ptr(),
            &mut rank,
            err.as_mut_ptr(),
            err.len(),
        );
        assert_eq!(n, -1);
        assert!(msg(&err).contains("nothing has run yet"), "{}", msg(&err));

        assert_eq!(tandem_set_input_shape(s, x.as_ptr(), [1i64, 0].as_ptr(), 2), -1);
        let mut last = [0 as c_char; 256];
        tandem_last_error(s, last.as_mut_ptr(), last.len());
        assert!(msg(&last).contains("not positive"), "{}", msg(&last));
        assert_eq!(tandem_set_latency_hint_ms(s, f64::NAN), -1);
        assert_eq!(tandem_set_latency_hint_ms(s, 20.0), 0);
        let bad = CString::new("tflite").expect("c string");
        assert_eq!(tandem_set_engine(s, bad.as_ptr()), -1);
        tandem_last_error(s, last.as_mut_ptr(), last.len());
        assert!(msg(&last).contains("unknown engine 'tflite'"), "{}", msg(&last));
        let tract = CString::new("tract").expect("c string");
        assert_eq!(tandem_set_engine(s, tract.as_ptr()), 0);

        let data = [0.1f32, 0.2, 0.3, 0.4];
        let dims = [1i64, 4];
        assert_eq!(
            tandem_feed_f32(s, x.as_ptr(), dims.as_ptr(), 2, data.as_ptr(), 3, err.as_mut_ptr(), err.len()),
            -1
        );
        assert!(msg(&err).contains("3 were given"), "{}", msg(&err));
        assert_eq!(
            tandem_feed_f32(s, x.as_ptr(), dims.as_ptr(), 2, null(), 4, err.as_mut_ptr(), err.len()),
            -1
        );
        assert_eq!(msg(&err), "data is NULL");
        assert_eq!(
            tandem_feed_f32(s, x.as_ptr(), dims.as_ptr(), 2, data.as_ptr(), 4, err.as_mut_ptr(), err.len()),
            0
        );
        assert_eq!(
            tandem_set_input_shape(s, x.as_ptr(), dims.as_ptr(), 2),
            -1,
            "too late: the session is open"
        );

        let mut tiny_report = [0 as c_char; 16];
        assert_eq!(
            tandem_run(s, tiny_report.as_mut_ptr(), tiny_report.len(), err.as_mut_ptr(), err.len()),
            -1
        );
        assert!(msg(&err).contains("the report needs"), "{}", msg(&err));
        let mut report = [0 as c_char; 2048];
        assert_eq!(
            tandem_run(s, report.as_mut_ptr(), report.len(), err.as_mut_ptr(), err.len()),
            0,
            "{}",
            msg(&err)
        );
        let json: serde_json::Value = serde_json::from_str(&msg(&report)).expect("report JSON");
        assert_eq!(json["offloaded"], false);

        rank = 1;
        let n = tandem_fetch_f32(
            s,
            y.as_ptr(),
            out.as_mut_ptr(),
            8,
            shape.as_mut_ptr(),
            &mut rank,
            err.as_mut_ptr(),
            err.len(),
        );
        assert_eq!(n, -1, "rank 2 does not fit a shape of 1");
        assert!(msg(&err).contains("rank 2"), "{}", msg(&err));
        rank = 4;
        let n = tandem_fetch_f32(
            s,
            y.as_ptr(),
            out.as_mut_ptr(),
            2,
            shape.as_mut_ptr(),
            &mut rank,
            err.as_mut_ptr(),
            err.len(),
        );
        assert_eq!((n, rank, shape[0], shape[1]), (3, 2, 1, 3), "the count, even when out holds fewer");
        let nope = CString::new("nope").expect("c string");
        assert_eq!(
            tandem_fetch_f32(
                s,
                nope.as_ptr(),
                out.as_mut_ptr(),
                8,
                shape.as_mut_ptr(),
                &mut rank,
                err.as_mut_ptr(),
                err.len()
            ),
            -1
        );
        assert!(msg(&err).contains("no output 'nope'"), "{}", msg(&err));
        tandem_close(s);
        tandem_close(null_mut());
    }
}
