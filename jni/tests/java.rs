//! The Java tests that need neither a handheld nor the CLI, run under
//! `cargo test` when a JDK is installed: javac compiles `java/src/main` and
//! `java/src/test`, and a JVM with `-Xcheck:jni` loads this build's
//! `libtandem_jni.so` (a warning of its checks fails the test). Without a
//! JDK the test is skipped, saying so, unless the `CI` or
//! `TANDEM_REQUIRE_JDK` environment variable is set (to anything but
//! empty): then it fails, so that CI never passes without running them.
//! `scripts/java.sh` runs them all, against a real handheld and the CLI.

use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The directory holding `libtandem_jni.so` (cargo builds the cdylib with the tests).
fn library_dir() -> PathBuf {
    tandem_tools::testing::library_dir("libtandem_jni.so").expect("libtandem_jni.so")
}

fn has(tool: &str) -> bool {
    Command::new(tool).arg("-version").output().is_ok_and(|o| o.status.success())
}

fn java_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("java sources")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "java"))
        .collect();
    files.sort();
    files
}

#[test]
fn the_java_tests_without_a_handheld_pass_on_this_build() {
    if !has("javac") || !has("java") {
        let required = ["CI", "TANDEM_REQUIRE_JDK"]
            .into_iter()
            .find(|v| std::env::var_os(v).is_some_and(|s| !s.is_empty()));
        if let Some(var) = required {
            panic!("no JDK (javac, java), and {var} is set: the Java tests must run");
        }
        eprintln!("skipped: no JDK (javac, java); set CI or TANDEM_REQUIRE_JDK to fail instead");
        return;
    }
    let ws = workspace();
    let out = std::env::temp_dir().join(format!("tandem-jni-java-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).expect("out dir");
    let mut sources = java_files(&ws.join("java/src/main/java/dev/tandem"));
    sources.extend(java_files(&ws.join("java/src/test/java/dev/tandem")));
    let status = Command::new("javac")
        .args(["--release", "11", "-Xlint:all", "-Werror", "-d"])
        .arg(&out)
        .args(&sources)
        .status()
        .expect("javac runs");
    assert!(status.success(), "javac failed");

    let paths = tandem_models::ensure_models().expect("zoo");
    let mnist = paths.zoo_path("mnist").expect("mnist");
    let only = [
        "buffers",
        "integer tensors",
        "tensors, indices",
        "a wrong shape",
        "use after close",
        "forged handles",
        "thousands of input shapes",
    ];
    let run = Command::new("java")
        .arg("-Xcheck:jni")
        .arg(format!("-Djava.library.path={}", library_dir().display()))
        .arg(format!("-Dtandem.mnist={}", mnist.display()))
        .arg(format!("-Dtandem.work={}", out.join("work").display()))
        .arg(format!("-Dtandem.only={}", only.join(",")))
        .arg("-cp")
        .arg(&out)
        .arg("dev.tandem.InterpreterTest")
        .output()
        .expect("java runs");
    let text = String::from_utf8_lossy(&run.stdout);
    let errors = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "the Java tests failed:\n{text}\n{errors}");
    assert!(text.contains(&format!("{} passed, 0 failed", only.len())), "{text}");
    // -Xcheck:jni only warns of a misused JNI call, such as local references
    // past the frame's capacity (which ART aborts on): a warning fails here.
    for output in [&text, &errors] {
        assert!(
            !output.contains("WARNING: JNI") && !output.contains("WARNING in native method"),
            "-Xcheck:jni warned:\n{text}\n{errors}"
        );
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// Runs this file's Java test in a child process that finds no JDK (an
/// empty `PATH`), with `var` set to `1` or, for `None`, with neither `CI`
/// nor `TANDEM_REQUIRE_JDK` set: whether it passed, and what it printed.
fn without_a_jdk(var: Option<&str>) -> (bool, String) {
    let mut cmd = Command::new(std::env::current_exe().expect("test exe"));
    cmd.args(["the_java_tests_without_a_handheld_pass_on_this_build", "--exact", "--nocapture"])
        .env("PATH", "")
        .env_remove("CI")
        .env_remove("TANDEM_REQUIRE_JDK");
    if let Some(var) = var {
        cmd.env(var, "1");
    }
    let out = cmd.output().expect("the test runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

#[test]
fn without_a_jdk_the_java_test_is_skipped_but_fails_on_ci() {
    let (passed, text) = without_a_jdk(None);
    assert!(passed && text.contains("skipped: no JDK"), "{text}");
    for var in ["CI", "TANDEM_REQUIRE_JDK"] {
        let (passed, text) = without_a_jdk(Some(var));
        assert!(!passed && text.contains(&format!("{var} is set")), "{var}: {text}");
    }
}
