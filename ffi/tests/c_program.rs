//! A C program (`tests/c/run_model.c`) built with `cc` against
//! `include/tandem.h` and `libtandem_ffi.so` runs a zoo model locally and
//! against a real `tandem-handheld serve` process; its outputs must match
//! the Rust API's on the same input.

use std::path::{Path, PathBuf};
use std::process::Command;

use tandem::client::{ModelFile, Placement, Session, SessionConfig};
use tandem::link::memory_transport;
use tandem::InputShapes;
use tandem_tools::testing::HandheldProcess;

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The directory holding `libtandem_ffi.so` (cargo builds the cdylib with the tests).
fn library_dir() -> PathBuf {
    tandem_tools::testing::library_dir("libtandem_ffi.so").expect("libtandem_ffi.so")
}

/// The `tandem-handheld` binary of this build (built here when a narrower
/// `cargo test -p tandem-ffi` did not build it).
fn handheld_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("test exe");
    let bin = exe.parent().and_then(Path::parent).expect("profile dir").join("tandem-handheld");
    if !bin.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "--locked", "-p", "tandem-handheld"])
            .current_dir(workspace())
            .status()
            .expect("cargo runs");
        assert!(status.success() && bin.exists(), "cannot build {}", bin.display());
    }
    bin
}

/// Compiles the C program with warnings as errors.
fn build_c_program(out: &Path) -> PathBuf {
    let lib = library_dir();
    let exe = out.join("run_model");
    let ws = workspace();
    let status = Command::new("cc")
        .args(["-std=c99", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(ws.join("include"))
        .arg(ws.join("ffi/tests/c/run_model.c"))
        .arg("-L")
        .arg(&lib)
        .args(["-ltandem_ffi", &format!("-Wl,-rpath,{}", lib.display()), "-o"])
        .arg(&exe)
        .status()
        .expect("cc runs (install gcc)");
    assert!(status.success(), "cc failed on run_model.c");
    exe
}

struct COutput {
    report: serde_json::Value,
    shape: Vec<usize>,
    values: Vec<f32>,
}

fn run_c(exe: &Path, args: &[&str]) -> Result<COutput, String> {
    let out = Command::new(exe).args(args).output().expect("run_model runs");
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    let mut lines = text.lines();
    let report = serde_json::from_str(lines.next().expect("report line")).expect("report JSON");
    let shape = lines.next().expect("shape line").split(',').map(|d| d.parse().expect("dim")).collect();
    let values = lines.map(|v| v.parse().expect("float")).collect();
    Ok(COutput { report, shape, values })
}

#[test]
fn a_c_program_runs_a_zoo_model_locally_and_on_a_handheld_like_the_rust_api() {
    let tmp = std::env::temp_dir().join(format!("tandem-ffi-c-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).expect("tmp");
    let exe = build_c_program(&tmp);

    let paths = tandem_models::ensure_models().expect("zoo");
    let model_path = paths.zoo_path("mnist").expect("mnist").to_path_buf();
    let model = ModelFile::load(&model_path, &InputShapes::none()).expect("model");
    let g = model.model.graph();
    let input = g.tensor(g.inputs()[0]);
    let output = g.tensor(g.outputs()[0]);
    let inputs = tandem::check::random_inputs(&model.model, 3).expect("inputs");
    let x = tandem::check::as_f32(&inputs[&input.name]).expect("f32 input");
    let input_file = tmp.join("input.f32");
    std::fs::write(&input_file, x.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>()).expect("write");

    // The Rust API, locally.
    let mut config = SessionConfig::watch_and_phone().expect("profiles");
    config.placement = Placement::WearableOnly;
    let mut s = Session::open(model.clone(), Box::new(memory_transport().0), config).expect("session");
    s.feed_f32(&input.name, &input.shape, &x).expect("feed");
    s.run().expect("run");
    let (want_shape, want) = s.fetch_f32(&output.name).expect("fetch");

    let dims = input.shape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(",");
    let (m, i, f, o) = (
        model_path.to_str().expect("path"),
        input.name.as_str(),
        input_file.to_str().expect("path"),
        output.name.as_str(),
    );
    let local = run_c(&exe, &[m, "-", "auto", i, &dims, f, o]).expect("runs locally");
    assert_eq!(local.report["offloaded"], false);
    assert_eq!(local.report["local_reason"], "placement: wearable only");
    assert_eq!(local.shape, want_shape);
    assert_eq!(local.values, want, "the same local plan gives the same floats through C");

    // A real handheld process that has the model.
    let models = tmp.join("models");
    std::fs::create_dir_all(&models).expect("models dir");
    std::fs::copy(&model_path, models.join("mnist.onnx")).expect("copy");
    let server = HandheldProcess::start(&handheld_bin(), &["--models", models.to_str().expect("path")])
        .expect("handheld");
    let remote = run_c(&exe, &[m, &server.addr, "handheld", i, &dims, f, o]).expect("runs on the handheld");
    assert_eq!(remote.report["offloaded"], true, "{}", remote.report);
    assert!(remote.report["up_bytes"].as_u64().unwrap_or(0) > 0, "{}", remote.report);
    assert_eq!(remote.shape, want_shape);
    let got = tandem::tensor_f32(&remote.shape, &remote.values).expect("tensor");
    let reference = tandem::tensor_f32(&want_shape, &want).expect("tensor");
    let d = tandem::check::diff(&reference, &got).expect("comparable");
    assert!(d.ok(), "the handheld's answer through C differs from the Rust API's: {d:?}");

    // A handheld serving paired wearables only: the C program with the
    // paired keystore gets the same answer over an encrypted link; a
    // keystore it names with no paired handheld is an error, never a
    // plain link; without one (the default, empty here) it is refused by
    // the handheld and runs here.
    let keys = tmp.join("keys");
    let (h_keys, w_keys) = (keys.join("handheld"), keys.join("wearable"));
    let handheld_ks = tandem::secure::Keystore::open_or_create(&h_keys).expect("keystore");
    let wearable_ks = tandem::secure::Keystore::open_or_create(&w_keys).expect("keystore");
    handheld_ks.add_peer(&wearable_ks.keys().public, "the C program").expect("peer");
    wearable_ks.add_peer(&handheld_ks.keys().public, "the handheld").expect("peer");
    let secure = HandheldProcess::start(
        &handheld_bin(),
        &["--models", models.to_str().expect("path"), "--keys", h_keys.to_str().expect("path")],
    )
    .expect("handheld");
    let w = w_keys.to_str().expect("path");
    let paired = run_c(&exe, &[m, &secure.addr, "handheld", i, &dims, f, o, w]).expect("runs encrypted");
    assert_eq!(paired.report["offloaded"], true, "{}", paired.report);
    assert_eq!(paired.values, remote.values, "the encrypted link changes no float");
    let empty = keys.join("empty");
    let e = run_c(&exe, &[m, &secure.addr, "handheld", i, &dims, f, o, empty.to_str().expect("path")])
        .err()
        .expect("a named keystore without a paired handheld fails");
    assert!(e.starts_with("feed: ") && e.contains("has no paired handheld"), "{e}");
    let plain = std::process::Command::new(&exe)
        .args([m, &secure.addr, "handheld", i, &dims, f, o])
        .env("HOME", &empty)
        .env_remove("XDG_CONFIG_HOME")
        .output()
        .expect("runs");
    assert!(plain.status.success(), "{}", String::from_utf8_lossy(&plain.stderr));
    let report: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&plain.stdout).lines().next().expect("report"))
            .expect("JSON");
    assert_eq!(report["offloaded"], false, "an unpaired C program was served: {report}");

    // Errors come back as messages, not crashes.
    let e = run_c(&exe, &["/no/such/model.onnx", "-", "auto", i, &dims, f, o]).err().expect("fails");
    assert!(e.starts_with("open: ") && e.contains("/no/such/model.onnx"), "{e}");
    let e = run_c(&exe, &[m, "-", "sideways", i, &dims, f, o]).err().expect("fails");
    assert!(e.contains("placement 'sideways'"), "{e}");
    let e = run_c(&exe, &[m, "-", "auto", "nope", &dims, f, o]).err().expect("fails");
    assert!(e.starts_with("feed: ") && e.contains("'nope'"), "{e}");
    let _ = std::fs::remove_dir_all(&tmp);
}
