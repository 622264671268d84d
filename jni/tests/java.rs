//! The Java tests that need neither a handheld nor the CLI, run under
//! `cargo test` when a JDK is installed (skipped, saying so, when not):
//! javac compiles `java/src/main` and `java/src/test`, and a JVM with
//! `-Xcheck:jni` loads this build's `libtandem_jni.so`. `scripts/java.sh`
//! runs them all, against a real handheld and the CLI.

use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The directory holding `libtandem_jni.so` (cargo builds the cdylib with the tests).
fn library_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test exe");
    let deps = exe.parent().expect("deps dir");
    for dir in [deps.parent().expect("profile dir"), deps] {
        if dir.join("libtandem_jni.so").exists() {
            return dir.to_path_buf();
        }
    }
    panic!("libtandem_jni.so is not next to {}", exe.display());
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
        eprintln!("skipped: no JDK (javac, java); scripts/java.sh needs one too");
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
    assert!(run.status.success(), "the Java tests failed:\n{text}\n{}", String::from_utf8_lossy(&run.stderr));
    assert!(text.contains(&format!("{} passed, 0 failed", only.len())), "{text}");
    let _ = std::fs::remove_dir_all(&out);
}
