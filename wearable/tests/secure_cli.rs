//! Pairing and encrypted sessions with the real binaries: `tandem-handheld
//! pair` and `tandem-wearable pair` on the shown code, then `serve` takes
//! the paired wearable and refuses, by name, a wearable that never paired;
//! a wearable meeting another handheld at its address refuses to go on;
//! wrong codes void the code; a keystore others can read is refused.

use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::common::{stderr, stdout, wearable};
use tandem_models::ensure_models;
use tandem_tools::testing::{pair, temp_dir, HandheldProcess};

fn handheld_bin() -> PathBuf {
    let me = PathBuf::from(env!("CARGO_BIN_EXE_tandem-wearable"));
    me.with_file_name("tandem-handheld")
}

fn wearable_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tandem-wearable"))
}

fn mnist() -> String {
    let p = ensure_models().expect("models").zoo_path("mnist").expect("mnist").to_path_buf();
    p.to_str().expect("utf-8").to_string()
}

fn path(p: &std::path::Path) -> &str {
    p.to_str().expect("utf-8")
}

#[test]
fn a_paired_wearable_runs_encrypted_and_the_others_are_refused_by_name() {
    let dir = temp_dir("secure-cli").expect("dir");
    let (h_keys, w_keys) = pair(&handheld_bin(), &wearable_bin(), &dir).expect("pairing");
    for (keys, file) in [(&h_keys, "static.key"), (&h_keys, "peers.json"), (&w_keys, "peers.json")] {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(keys.join(file)).expect("written").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}/{file}", keys.display());
    }
    let server = HandheldProcess::start(&handheld_bin(), &["--keys", path(&h_keys)]).expect("server");
    let m = mnist();
    let run = |keys: &str| {
        wearable(&[
            "run",
            "--model",
            &m,
            "--connect",
            &server.addr,
            "--placement",
            "handheld",
            "--require-handheld",
            "20",
            "--keys",
            keys,
        ])
    };

    // The paired wearable: encrypted, offloaded, the outputs printed.
    let o = run(path(&w_keys));
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let j: serde_json::Value = serde_json::from_str(out.lines().last().expect("a line")).expect("JSON");
    assert_eq!(j["offloaded"], true, "{j}");
    assert!(!stderr(&o).contains("NOT encrypted"), "{}", stderr(&o));

    // A wearable that never paired: refused, told how to pair.
    let never = temp_dir("never-paired").expect("dir");
    let o = run(path(&never));
    assert!(!o.status.success(), "an unpaired wearable was served: {}", stdout(&o));
    let err = stderr(&o);
    assert!(err.contains("NOT encrypted"), "the wearable should say its link is plain: {err}");
    assert!(err.contains("paired wearables only"), "no reason naming pairing: {err}");

    // The paired wearable meets another handheld at that address (its key
    // differs): the handshake fails, and nothing crosses in clear.
    let impostor_keys = temp_dir("impostor").expect("dir");
    let impostor =
        HandheldProcess::start(&handheld_bin(), &["--keys", path(&impostor_keys)]).expect("impostor");
    let o = wearable(&[
        "run",
        "--model",
        &m,
        "--connect",
        &impostor.addr,
        "--placement",
        "handheld",
        "--require-handheld",
        "5",
        "--keys",
        path(&w_keys),
    ]);
    assert!(!o.status.success(), "the wearable talked to a handheld it never paired with");
    assert!(stderr(&o).contains("handshake failed"), "{}", stderr(&o));
    for d in [dir, never, impostor_keys] {
        let _ = std::fs::remove_dir_all(d);
    }
}

#[test]
fn wrong_codes_fail_on_both_sides_void_the_code_and_pair_nothing() {
    let dir = temp_dir("wrong-code").expect("dir");
    let (h_keys, w_keys) = (dir.join("handheld"), dir.join("wearable"));
    let mut handheld = Command::new(handheld_bin())
        .args(["pair", "--listen", "127.0.0.1:0", "--keys", path(&h_keys)])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("pair");
    let mut lines = std::io::BufReader::new(handheld.stdout.take().expect("stdout")).lines();
    let addr = lines.next().expect("a line").expect("text");
    let addr = addr.strip_prefix("listening on ").expect("the address first").to_string();
    let code = lines.next().expect("a line").expect("text");
    let code: u32 = code.strip_prefix("pairing code: ").expect("the code").parse().expect("digits");
    assert!(code < 1_000_000);
    let wrong = format!("{:06}", (code + 1) % 1_000_000);
    for _ in 0..3 {
        let o = wearable(&["pair", "--connect", &addr, "--code", &wrong, "--keys", path(&w_keys)]);
        assert!(!o.status.success());
        assert!(stderr(&o).contains("pairing codes differ"), "{}", stderr(&o));
    }
    let status = handheld.wait().expect("exits");
    assert!(!status.success(), "three wrong codes must end the pairing");
    let mut err = String::new();
    std::io::Read::read_to_string(&mut handheld.stderr.take().expect("stderr"), &mut err).expect("stderr");
    assert!(err.contains("code is void"), "{err}");
    assert!(!h_keys.join("peers.json").exists(), "the handheld stored a peer");
    assert!(!w_keys.join("peers.json").exists(), "the wearable stored a peer");

    // Malformed codes are refused before any connection.
    let o = wearable(&["pair", "--connect", &addr, "--code", "12345", "--keys", path(&w_keys)]);
    assert!(!o.status.success() && stderr(&o).contains("6 digits"), "{}", stderr(&o));

    // A keystore that others can read is refused, with the fix.
    {
        use std::os::unix::fs::PermissionsExt;
        let key = h_keys.join("static.key");
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let o = Command::new(handheld_bin())
            .args(["serve", "--listen", "127.0.0.1:0", "--keys", path(&h_keys)])
            .output()
            .expect("runs");
        assert!(!o.status.success());
        assert!(stderr(&o).contains("chmod 600"), "{}", stderr(&o));
    }
    let _ = std::fs::remove_dir_all(dir);
}
