//! Helpers: temporary model directories and a fake HTTP server that
//! answers each connection with crafted bytes.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A fresh, empty directory under the system's temporary one.
pub fn temp_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tandem-oip-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("creating a temporary directory");
    dir
}

/// What the fake server does with one connection.
#[derive(Clone, Debug)]
pub enum Reply {
    /// Reads the request, writes these bytes, closes.
    Bytes(Vec<u8>),
    /// Reads the request, writes these bytes, then holds the connection
    /// open this long without writing more.
    BytesThenStall(Vec<u8>, Duration),
}

/// A fake server on 127.0.0.1: each connection, in turn, gets the next
/// reply; the requests it read are kept.
pub struct FakeServer {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// Each request's bytes (head and body), in order.
    pub requests: Arc<Mutex<Vec<Vec<u8>>>>,
}

/// Starts a fake server answering `replies`, one connection each.
pub fn fake_server(replies: Vec<Reply>) -> FakeServer {
    let listener = TcpListener::bind("127.0.0.1:0").expect("binding a loopback port");
    let url = format!("http://{}", listener.local_addr().expect("its address"));
    let requests = Arc::new(Mutex::new(Vec::new()));
    let seen = requests.clone();
    std::thread::spawn(move || {
        for reply in replies {
            let Ok((mut sock, _)) = listener.accept() else { return };
            let request = read_request(&mut sock);
            seen.lock().expect("requests").push(request);
            let (bytes, stall) = match reply {
                Reply::Bytes(b) => (b, Duration::ZERO),
                Reply::BytesThenStall(b, d) => (b, d),
            };
            let _ = sock.write_all(&bytes);
            let _ = sock.flush();
            std::thread::sleep(stall);
        }
    });
    FakeServer { url, requests }
}

/// Reads one HTTP/1.1 request: its head, then Content-Length bytes.
fn read_request(sock: &mut std::net::TcpStream) -> Vec<u8> {
    let _ = sock.set_read_timeout(Some(Duration::from_secs(10)));
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                return buf;
            }
        }
        match sock.read(&mut chunk) {
            Ok(0) | Err(_) => return buf,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// An HTTP/1.1 answer: the status line, `headers`, a Content-Length
/// unless `headers` has one, and `body`.
pub fn http(status: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut out = format!("HTTP/1.1 {status}\r\nconnection: close\r\n");
    for (k, v) in headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("content-length")) {
        out.push_str(&format!("content-length: {}\r\n", body.len()));
    }
    out.push_str("\r\n");
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

/// A binary-extension answer: `header` (JSON) then `rest`, with an
/// `Inference-Header-Content-Length` of `header_len` (its true length
/// when `None`).
pub fn binary_answer(header: &str, rest: &[u8], header_len: Option<usize>) -> Vec<u8> {
    let len = header_len.unwrap_or(header.len()).to_string();
    let mut body = header.as_bytes().to_vec();
    body.extend_from_slice(rest);
    http("200 OK", &[("inference-header-content-length", &len)], &body)
}
