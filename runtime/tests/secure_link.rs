//! Encrypted sessions over real TCP through a proxy that records, and can
//! alter, what crosses: no input byte crosses in clear (the same check on
//! a plain session finds them), the answers equal the unsplit model's, and
//! an altered byte closes that link while the frame runs here and the
//! handheld goes on serving others.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tandem::check::{diff, random_inputs};
use tandem::client::{Backoff, ModelFile, Placement, Session, SessionConfig};
use tandem::link::{TcpAcceptor, TcpTransport, Transport};
use tandem::secure::{Keystore, Policy, SecureTransport};
use tandem::server::ServerConfig;
use tandem::InputShapes;

fn temp(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tandem-secure-link-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// A handheld server on a loopback port, on a thread of its own.
fn serve(models_dir: PathBuf, security: Policy) -> String {
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("rt");
    let acceptor = runtime.block_on(TcpAcceptor::bind("127.0.0.1:0")).expect("bind");
    let addr = acceptor.local_addr().expect("addr").to_string();
    let config = ServerConfig { models_dir: Some(models_dir), security, ..Default::default() };
    std::thread::spawn(move || {
        let _ = runtime.block_on(tandem::server::serve(config, acceptor, std::future::pending::<()>()));
    });
    addr
}

/// A TCP proxy to `target`: records the wearable-to-handheld bytes of
/// every connection, and flips a bit of byte `flip_at` of each.
fn proxy(target: String, flip_at: Option<usize>) -> (String, Arc<Mutex<Vec<u8>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let seen = Arc::new(Mutex::new(vec![]));
    let record = seen.clone();
    std::thread::spawn(move || {
        for client in listener.incoming().map_while(Result::ok) {
            let Ok(server) = TcpStream::connect(&target) else { continue };
            let (mut c_read, mut s_write) =
                (client.try_clone().expect("clone"), server.try_clone().expect("clone"));
            let (mut s_read, mut c_write) = (server, client);
            let record = record.clone();
            std::thread::spawn(move || {
                let (mut buf, mut at) = (vec![0u8; 64 << 10], 0usize);
                while let Ok(n) = c_read.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    if let Some(i) = flip_at.filter(|i| (at..at + n).contains(i)) {
                        buf[i - at] ^= 0x10;
                    }
                    at += n;
                    record.lock().expect("lock").extend_from_slice(&buf[..n]);
                    if s_write.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                let _ = s_write.shutdown(std::net::Shutdown::Write);
            });
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut s_read, &mut c_write);
                let _ = c_write.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    (addr, seen)
}

struct Setup {
    model: ModelFile,
    models_dir: PathBuf,
    handheld: Keystore,
    wearable: Keystore,
}

fn setup(tag: &str) -> Setup {
    let path = tandem_models::ensure_models().expect("zoo").zoo_path("mnist").expect("mnist").to_path_buf();
    let model = ModelFile::load(&path, &InputShapes::none()).expect("model");
    let dir = temp(tag);
    let handheld = Keystore::open_or_create(&dir.join("handheld")).expect("keystore");
    let wearable = Keystore::open_or_create(&dir.join("wearable")).expect("keystore");
    handheld.add_peer(&wearable.keys().public, "the wearable").expect("peer");
    wearable.add_peer(&handheld.keys().public, "the handheld").expect("peer");
    let models_dir = path.parent().expect("dir").to_path_buf();
    Setup { model, models_dir, handheld, wearable }
}

fn config() -> SessionConfig {
    let mut c = SessionConfig::watch_and_phone().expect("profiles");
    c.placement = Placement::HandheldOnly;
    // Raw tensors: the input's own bytes would cross, were it not sealed.
    c.encodings = tandem::encoding::Allowed::Raw;
    c.ready_timeout = Duration::from_secs(20);
    c.backoff = Backoff { initial: Duration::from_millis(50), max: Duration::from_millis(200) };
    c
}

/// Runs one frame through `transport`: whether it was offloaded, and
/// whether its outputs equal the unsplit model's.
fn run_once(s: &Setup, transport: Box<dyn Transport>, seed: u64) -> (bool, Vec<u8>) {
    let inputs = random_inputs(&s.model.model, seed).expect("inputs");
    let mut session = Session::open(s.model.clone(), transport, config()).expect("session");
    for (name, t) in &inputs {
        session.feed(name, (**t).clone()).expect("feed");
    }
    let report = session.run().expect("a frame always runs");
    let g = s.model.model.graph();
    let want = tandem::split::full_plan(&s.model.model).expect("plan").run(g, &inputs).expect("runs");
    for (name, v) in &want {
        let got = session.fetch(name).expect("fetch");
        assert!(diff(v, &got).expect("comparable").ok(), "'{name}' differs from the unsplit model");
    }
    let input = inputs.values().next().expect("an input");
    (report.offloaded, input.as_bytes()[..64].to_vec())
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn an_encrypted_link_carries_no_input_byte_in_clear_and_answers_like_the_unsplit_model() {
    let s = setup("clear");
    let secure = serve(
        s.models_dir.clone(),
        Policy {
            keystore: Some(Arc::new(Keystore::open(s.handheld.dir()).expect("k").expect("k"))),
            allow_plain: false,
        },
    );
    let (addr, seen) = proxy(secure, None);
    let transport = SecureTransport::new(
        Box::new(TcpTransport::new(addr)),
        s.wearable.keys().clone(),
        s.handheld.keys().public,
    );
    let (offloaded, input) = run_once(&s, Box::new(transport), 3);
    assert!(offloaded, "the paired wearable was not served");
    let wire = seen.lock().expect("lock").clone();
    assert!(wire.len() > 3136, "the input did not cross: {} bytes", wire.len());
    assert!(!contains(&wire, &input), "the input's bytes crossed in clear");

    // The same check finds them on a plain link (it can fail).
    let plain = serve(s.models_dir.clone(), Policy::plain());
    let (addr, seen) = proxy(plain, None);
    let (offloaded, input) = run_once(&s, Box::new(TcpTransport::new(addr)), 3);
    assert!(offloaded);
    assert!(contains(&seen.lock().expect("lock"), &input), "a plain link should carry the input as is");
    let _ = std::fs::remove_dir_all(temp("clear"));
}

#[test]
fn an_altered_byte_closes_the_link_the_frame_runs_here_and_others_are_still_served() {
    let s = setup("altered");
    let policy = Policy {
        keystore: Some(Arc::new(Keystore::open(s.handheld.dir()).expect("k").expect("k"))),
        allow_plain: false,
    };
    let handheld = serve(s.models_dir.clone(), policy);
    // Byte 200 is in the first sealed record (the protocol's Hello), past the
    // handshake's ~111 bytes; every reconnection is altered the same way.
    let (altered, _) = proxy(handheld.clone(), Some(200));
    let transport = || {
        SecureTransport::new(
            Box::new(TcpTransport::new(altered.clone())),
            s.wearable.keys().clone(),
            s.handheld.keys().public,
        )
    };
    let mut c = config();
    c.ready_timeout = Duration::from_secs(2);
    let inputs = random_inputs(&s.model.model, 5).expect("inputs");
    let mut session = Session::open(s.model.clone(), Box::new(transport()), c).expect("session");
    for (name, t) in &inputs {
        session.feed(name, (**t).clone()).expect("feed");
    }
    let report = session.run().expect("the frame runs here");
    assert!(!report.offloaded, "an altered link served a frame");
    drop(session);

    // The handheld still serves a wearable whose bytes arrive intact.
    let (clean, _) = proxy(handheld, None);
    let transport = SecureTransport::new(
        Box::new(TcpTransport::new(clean)),
        s.wearable.keys().clone(),
        s.handheld.keys().public,
    );
    assert!(run_once(&s, Box::new(transport), 6).0, "the handheld stopped serving after an altered link");
    let _ = std::fs::remove_dir_all(temp("altered"));
}
