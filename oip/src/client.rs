//! [`OipClient`]: the Open Inference Protocol's REST calls (health, model
//! metadata, the repository extension's load and unload, inference) over
//! HTTP/1.1, each answer read within [`ClientOptions::max_response_bytes`]
//! and checked ([`crate::codec`]) before use, with an optional emulated
//! slow link ([`EmulatedLink`]) for benchmarks.

use std::error::Error as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use reqwest::header::{HeaderMap, CONTENT_TYPE};
use reqwest::{Method, StatusCode};
use serde::Deserialize;

use crate::codec::{self, AnswerError};
use crate::error::OipError;
use crate::tensor::OipTensor;

/// The header giving the JSON header's length in a binary-extension body.
const HEADER_LENGTH: &str = "inference-header-content-length";

/// How a client talks to its server. `Default` is tuned for an edge
/// server on loopback or the LAN: a 10 s timeout, answers up to 256 MiB,
/// tensors in the binary extension, no emulation.
#[derive(Clone, Debug, PartialEq)]
pub struct ClientOptions {
    /// The longest one HTTP exchange may take, from connecting to the
    /// last byte of the answer (the emulated link's waits not included):
    /// past it the call fails as [`OipError::Unreachable`] (timed out).
    pub timeout: Duration,
    /// The largest answer body read, in bytes: a longer one (announced or
    /// arriving) is refused as malformed before it is held.
    pub max_response_bytes: u64,
    /// Tensors in the binary tensor extension both ways (raw bytes after a
    /// JSON header); `false`: JSON `data` arrays (about 5× the bytes for
    /// FP32, and no NaN or infinity).
    pub binary: bool,
    /// An emulated slow link in front of the real one, for benchmarks.
    pub emulate: Option<EmulatedLink>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            timeout: Duration::from_secs(10),
            max_response_bytes: 256 << 20,
            binary: true,
            emulate: None,
        }
    }
}

/// An **emulated** link to the server, for benchmarks (a watch's or a
/// phone's Wi-Fi to an edge: 100 kbit/s, 5 Mbit/s, 50 Mbit/s): before
/// sending, the client waits half the round trip plus the request's
/// transmission time at `up_bits_per_s`; after the answer has arrived,
/// half the round trip plus its transmission time at `down_bits_per_s`.
/// Nothing on the real connection is slowed; the waits are
/// `tokio::time::sleep`s, so they also follow a paused tokio clock.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EmulatedLink {
    /// Client to server, in bits per second.
    pub up_bits_per_s: f64,
    /// Server to client, in bits per second.
    pub down_bits_per_s: f64,
    /// The round-trip time (half of it each way).
    pub rtt: Duration,
}

/// An emulated link that cannot be used.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum LinkSpecError {
    /// `UP_MBIT,DOWN_MBIT,RTT_MS` given wrong.
    #[error("{spec}: {why} (expected UP_MBIT,DOWN_MBIT,RTT_MS)")]
    Spec {
        /// The text given.
        spec: String,
        /// What is wrong with it.
        why: String,
    },
    /// A rate below 1 bit/s (a large tensor's wait would overflow).
    #[error("the emulated link's {what} is {value}: it must be at least 1")]
    Rate {
        /// Which rate.
        what: &'static str,
        /// Its value.
        value: f64,
    },
}

impl EmulatedLink {
    /// The wait before sending `bytes`: half the RTT plus their time on the link.
    pub fn up_delay(&self, bytes: u64) -> Duration {
        self.rtt / 2 + Duration::from_secs_f64(bytes as f64 * 8.0 / self.up_bits_per_s)
    }

    /// The wait after receiving `bytes`: half the RTT plus their time on the link.
    pub fn down_delay(&self, bytes: u64) -> Duration {
        self.rtt / 2 + Duration::from_secs_f64(bytes as f64 * 8.0 / self.down_bits_per_s)
    }

    /// Parses `UP_MBIT,DOWN_MBIT,RTT_MS` (`0.1,0.1,40`: DeepWear's poor
    /// Wi-Fi), the command lines' form: rates above 0, the RTT from 0 to
    /// 10000 ms.
    pub fn parse_mbit(spec: &str) -> Result<EmulatedLink, LinkSpecError> {
        let bad = |why: String| LinkSpecError::Spec { spec: spec.to_string(), why };
        let parts: Vec<f64> = spec
            .split(',')
            .map(|p| p.trim().parse::<f64>())
            .collect::<Result<_, _>>()
            .map_err(|e| bad(e.to_string()))?;
        let [up, down, rtt] = parts[..] else {
            return Err(bad("not three numbers".into()));
        };
        if !(up > 0.0 && down > 0.0 && up.is_finite() && down.is_finite() && (0.0..=10_000.0).contains(&rtt))
        {
            return Err(bad("rates must be positive, the RTT from 0 to 10000 ms".into()));
        }
        let link = EmulatedLink {
            up_bits_per_s: up * 1e6,
            down_bits_per_s: down * 1e6,
            rtt: Duration::from_secs_f64(rtt / 1e3),
        };
        link.check()?;
        Ok(link)
    }

    fn check(&self) -> Result<(), LinkSpecError> {
        for (what, value) in
            [("up_bits_per_s", self.up_bits_per_s), ("down_bits_per_s", self.down_bits_per_s)]
        {
            // Below 1 bit/s a large tensor's wait overflows a Duration.
            if !(value.is_finite() && value >= 1.0) {
                return Err(LinkSpecError::Rate { what, value });
            }
        }
        Ok(())
    }
}

/// A tensor of a model's metadata, as the server declares it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorSpec {
    /// The tensor's name.
    pub name: String,
    /// The protocol's datatype name (`FP32`, `INT64`, ...; possibly one
    /// Tandem does not carry, such as `FP16`).
    pub datatype: String,
    /// The dimensions; -1 where any size is accepted.
    pub shape: Vec<i64>,
}

/// A model's metadata (`GET /v2/models/{name}`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelMetadata {
    /// The model's name.
    pub name: String,
    /// Its inputs.
    pub inputs: Vec<TensorSpec>,
    /// Its outputs.
    pub outputs: Vec<TensorSpec>,
}

/// The answer to an inference request.
#[derive(Clone, Debug, PartialEq)]
pub struct InferReply {
    /// The outputs, in the order asked (every output the server sent, in
    /// its order, when none were named).
    pub outputs: Vec<OipTensor>,
    /// Bytes sent: the body and the HTTP/1.1 request head (as reconstructed:
    /// reqwest does not show its bytes), for the link's estimate.
    pub bytes_up: u64,
    /// Bytes received: the body and the response head (as reconstructed
    /// from the parsed headers; chunked framing not counted).
    pub bytes_down: u64,
    /// The whole call's time, the emulated link's waits included.
    pub elapsed: Duration,
}

/// A client of one Open Inference Protocol server (`http://host:port`,
/// optionally with a path prefix). Cheap to share: calls may run
/// concurrently.
#[derive(Debug)]
pub struct OipClient {
    http: reqwest::Client,
    /// The base URL without a trailing `/`.
    base: String,
    opts: ClientOptions,
    /// Request ids: the server echoes them, and an answer to another id is refused.
    next_id: AtomicU64,
}

/// A request body with its Content-Type and, for the binary extension,
/// its JSON header's length.
struct Body {
    bytes: Vec<u8>,
    content_type: &'static str,
    header_len: Option<usize>,
}

/// An answer as read: status, headers, the body (within the cap).
struct Answer {
    url: String,
    status: StatusCode,
    headers: HeaderMap,
    body: Vec<u8>,
    bytes_up: u64,
    bytes_down: u64,
}

impl OipClient {
    /// A client of the server at `base_url` (`http://host:port[/prefix]`).
    /// Refuses `https://` (TLS is not built in: the edge is on loopback or
    /// the LAN), other schemes, URLs with a query or a fragment, and an
    /// emulated link slower than 1 bit/s. Connects to nothing yet.
    pub fn new(base_url: &str, opts: ClientOptions) -> Result<OipClient, OipError> {
        let bad = |reason: &str| OipError::BadUrl { url: base_url.to_string(), reason: reason.to_string() };
        let url = reqwest::Url::parse(base_url).map_err(|e| bad(&format!("not a URL ({e})")))?;
        match url.scheme() {
            "http" => {}
            "https" => {
                return Err(bad(
                    "https:// is not supported: TLS is not built in (the edge is on loopback or the LAN; use http://)",
                ))
            }
            s => return Err(bad(&format!("scheme '{s}' is not http://"))),
        }
        if url.host().is_none() {
            return Err(bad("no host"));
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(bad("a query or a fragment has no place in a server's base URL"));
        }
        if let Some(link) = &opts.emulate {
            link.check().map_err(|e| bad(&e.to_string()))?;
        }
        let http = reqwest::Client::builder()
            .timeout(opts.timeout)
            .connect_timeout(opts.timeout)
            // A LAN or loopback edge: no proxy from the environment, and a
            // redirect is the server's answer, not somewhere to go.
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| bad(&format!("building the HTTP client: {e}")))?;
        let base = url.as_str().trim_end_matches('/').to_string();
        Ok(OipClient { http, base, opts, next_id: AtomicU64::new(1) })
    }

    /// The server's base URL, without a trailing `/`.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// The options it was made with.
    pub fn options(&self) -> &ClientOptions {
        &self.opts
    }

    /// Whether the server is live (`GET /v2/health/live`).
    pub async fn server_live(&self) -> Result<bool, OipError> {
        #[derive(Deserialize)]
        struct Live {
            live: bool,
        }
        let a = self.call(Method::GET, "/v2/health/live".into(), None).await?;
        let a = ok_or_refused(a, None)?;
        let live: Live = parse_json(&a, "a live answer")?;
        Ok(live.live)
    }

    /// Whether the server is ready (`GET /v2/health/ready`; HTTP 503, a
    /// server saying it is not ready, is `false`).
    pub async fn server_ready(&self) -> Result<bool, OipError> {
        #[derive(Deserialize)]
        struct Ready {
            ready: bool,
        }
        let a = self.call(Method::GET, "/v2/health/ready".into(), None).await?;
        if a.status == StatusCode::SERVICE_UNAVAILABLE {
            return Ok(false);
        }
        let a = ok_or_refused(a, None)?;
        let ready: Ready = parse_json(&a, "a ready answer")?;
        Ok(ready.ready)
    }

    /// Whether the server has model `name` loaded and ready
    /// (`GET /v2/models/{name}/ready`): an unknown model (404) or one not
    /// ready (503) is `false`.
    pub async fn model_ready(&self, name: &str) -> Result<bool, OipError> {
        #[derive(Deserialize)]
        struct Ready {
            #[serde(default)]
            name: Option<String>,
            ready: bool,
        }
        let path = format!("/v2/models/{}/ready", self.segment(name)?);
        let a = self.call(Method::GET, path, None).await?;
        if matches!(a.status, StatusCode::NOT_FOUND | StatusCode::SERVICE_UNAVAILABLE) {
            return Ok(false);
        }
        let a = ok_or_refused(a, Some(name))?;
        let ready: Ready = parse_json(&a, "a model's ready answer")?;
        if let Some(other) = ready.name.filter(|n| n != name) {
            return Err(OipError::Malformed {
                url: a.url,
                reason: format!("the answer is for model '{other}'"),
            });
        }
        Ok(ready.ready)
    }

    /// Model `name`'s metadata (`GET /v2/models/{name}`), checked: its own
    /// name, each tensor named once, the protocol's datatypes.
    pub async fn model_metadata(&self, name: &str) -> Result<ModelMetadata, OipError> {
        let path = format!("/v2/models/{}", self.segment(name)?);
        let a = self.call(Method::GET, path, None).await?;
        let a = ok_or_refused(a, Some(name))?;
        check_json_type(&a)?;
        codec::decode_metadata(name, &a.body).map_err(|e| answer_error(e, &a.url))
    }

    /// Loads (or reloads) model `name` from the server's model repository
    /// (`POST /v2/repository/models/{name}/load`, the repository extension).
    pub async fn load(&self, name: &str) -> Result<(), OipError> {
        self.repository(name, "load").await
    }

    /// Unloads model `name` (`POST /v2/repository/models/{name}/unload`).
    pub async fn unload(&self, name: &str) -> Result<(), OipError> {
        self.repository(name, "unload").await
    }

    async fn repository(&self, name: &str, action: &str) -> Result<(), OipError> {
        let path = format!("/v2/repository/models/{}/{action}", self.segment(name)?);
        let body = Body { bytes: Vec::new(), content_type: "application/json", header_len: None };
        let a = self.call(Method::POST, path, Some(body)).await?;
        ok_or_refused(a, Some(name)).map(|_| ())
    }

    /// Runs model `model` on `inputs` and returns the `outputs` named (all
    /// of them, in the server's order, when `outputs` is empty), each
    /// checked against what was asked: `POST /v2/models/{model}/infer`,
    /// tensors in the binary extension or JSON as
    /// [`ClientOptions::binary`] says.
    pub async fn infer(
        &self,
        model: &str,
        inputs: &[OipTensor],
        outputs: &[String],
    ) -> Result<InferReply, OipError> {
        let start = Instant::now();
        let path = format!("/v2/models/{}/infer", self.segment(model)?);
        let id = format!("tandem-{}", self.next_id.fetch_add(1, Ordering::Relaxed));
        let request = codec::encode_infer(&id, inputs, outputs, self.opts.binary)
            .map_err(|e| OipError::BadRequest { url: self.url(&path), reason: e.to_string() })?;
        let content_type = request.content_type();
        let body = Body { bytes: request.body, content_type, header_len: request.header_len };
        let a = self.call(Method::POST, path, Some(body)).await?;
        let a = ok_or_refused(a, Some(model))?;
        let header_len = match a.headers.get(HEADER_LENGTH) {
            None => None,
            Some(v) => {
                Some(v.to_str().ok().and_then(|s| s.trim().parse::<usize>().ok()).ok_or_else(|| {
                    OipError::Malformed {
                        url: a.url.clone(),
                        reason: format!("Inference-Header-Content-Length is {v:?}"),
                    }
                })?)
            }
        };
        // A binary answer's Content-Type: KServe sends none; Triton
        // application/octet-stream. An all-JSON answer is JSON.
        let content_type = content_type_of(&a.headers);
        let type_ok = matches!(
            (header_len, content_type.as_deref()),
            (Some(_), None | Some("application/octet-stream") | Some("application/json"))
                | (None, Some("application/json"))
        );
        if !type_ok {
            return Err(OipError::Malformed {
                url: a.url,
                reason: format!(
                    "Content-Type {} for {} answer",
                    content_type.as_deref().unwrap_or("(none)"),
                    if header_len.is_some() { "a binary" } else { "a JSON" }
                ),
            });
        }
        let outputs = codec::decode_infer(model, &id, header_len, &a.body, outputs)
            .map_err(|e| answer_error(e, &a.url))?;
        Ok(InferReply { outputs, bytes_up: a.bytes_up, bytes_down: a.bytes_down, elapsed: start.elapsed() })
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `name` as a path segment: letters, digits, `.`, `_` and `-` only
    /// (what serving engines accept as model names), not starting with `.`.
    fn segment<'a>(&self, name: &'a str) -> Result<&'a str, OipError> {
        let ok = !name.is_empty()
            && name.len() <= 255
            && !name.starts_with('.')
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
        if ok {
            Ok(name)
        } else {
            Err(OipError::BadRequest {
                url: self.base.clone(),
                reason: format!(
                    "model name {name:?}: only letters, digits, '.', '_' and '-', not starting with '.'"
                ),
            })
        }
    }

    /// One HTTP exchange: the emulated link's wait, the request, the
    /// answer read within the cap, the emulated link's wait.
    async fn call(&self, method: Method, path: String, body: Option<Body>) -> Result<Answer, OipError> {
        let url = self.url(&path);
        let host = reqwest::Url::parse(&url).ok().and_then(|u| {
            u.host_str().map(|h| match u.port() {
                Some(p) => format!("{h}:{p}"),
                None => h.to_string(),
            })
        });
        let mut head =
            format!("{method} {path} HTTP/1.1\r\nhost: {}\r\naccept: */*\r\n\r\n", host.unwrap_or_default())
                .len() as u64;
        let mut request = self.http.request(method, &url);
        let mut body_len = 0u64;
        if let Some(b) = body {
            body_len = b.bytes.len() as u64;
            head +=
                format!("content-type: {}\r\ncontent-length: {body_len}\r\n", b.content_type).len() as u64;
            request = request.header(CONTENT_TYPE, b.content_type);
            if let Some(n) = b.header_len {
                head += format!("{HEADER_LENGTH}: {n}\r\n").len() as u64;
                request = request.header(HEADER_LENGTH, n.to_string());
            }
            request = request.body(b.bytes);
        }
        let bytes_up = head + body_len;
        if let Some(link) = &self.opts.emulate {
            tokio::time::sleep(link.up_delay(bytes_up)).await;
        }
        let unreachable = |e: reqwest::Error| OipError::Unreachable {
            url: url.clone(),
            timed_out: e.is_timeout(),
            reason: error_chain(&e),
        };
        let mut response = request.send().await.map_err(unreachable)?;
        let status = response.status();
        let headers = response.headers().clone();
        let max = self.opts.max_response_bytes;
        if let Some(n) = response.content_length().filter(|&n| n > max) {
            return Err(OipError::Malformed {
                url,
                reason: format!(
                    "its answer announces {n} bytes, over the {max}-byte limit (max_response_bytes)"
                ),
            });
        }
        // Grown as bytes arrive, never sized from a header.
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(unreachable)? {
            if bytes.len() as u64 + chunk.len() as u64 > max {
                return Err(OipError::Malformed {
                    url,
                    reason: format!("its answer runs over the {max}-byte limit (max_response_bytes)"),
                });
            }
            bytes.extend_from_slice(&chunk);
        }
        let head_down = format!("HTTP/1.1 {status}\r\n\r\n").len()
            + headers.iter().map(|(k, v)| k.as_str().len() + 2 + v.len() + 2).sum::<usize>();
        let bytes_down = head_down as u64 + bytes.len() as u64;
        if let Some(link) = &self.opts.emulate {
            tokio::time::sleep(link.down_delay(bytes_down)).await;
        }
        Ok(Answer { url, status, headers, body: bytes, bytes_up, bytes_down })
    }
}

/// The answer when its status is a success; else the error it says: 404
/// on a model's endpoint is [`OipError::ModelNotFound`], any other status
/// [`OipError::Refused`], each with the server's message.
fn ok_or_refused(a: Answer, model: Option<&str>) -> Result<Answer, OipError> {
    if a.status.is_success() {
        return Ok(a);
    }
    let message = codec::error_message(&a.body);
    match model {
        Some(model) if a.status == StatusCode::NOT_FOUND => {
            Err(OipError::ModelNotFound { url: a.url, model: model.to_string(), message })
        }
        _ => Err(OipError::Refused { url: a.url, status: a.status.as_u16(), message }),
    }
}

/// The answer's media type, lower case, without parameters.
fn content_type_of(headers: &HeaderMap) -> Option<String> {
    headers.get(CONTENT_TYPE).map(|v| {
        String::from_utf8_lossy(v.as_bytes())
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase()
    })
}

fn check_json_type(a: &Answer) -> Result<(), OipError> {
    match content_type_of(&a.headers).as_deref() {
        Some("application/json") => Ok(()),
        other => Err(OipError::Malformed {
            url: a.url.clone(),
            reason: format!("Content-Type {} where JSON was due", other.unwrap_or("(none)")),
        }),
    }
}

fn parse_json<T: serde::de::DeserializeOwned>(a: &Answer, what: &str) -> Result<T, OipError> {
    check_json_type(a)?;
    serde_json::from_slice(&a.body)
        .map_err(|e| OipError::Malformed { url: a.url.clone(), reason: format!("not {what}: {e}") })
}

/// An error and its causes, on one line.
fn error_chain(e: &reqwest::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        s.push_str(": ");
        s.push_str(&cause.to_string());
        source = cause.source();
    }
    s
}

/// An answer's error, named by the endpoint that gave it.
fn answer_error(e: AnswerError, url: &str) -> OipError {
    match e {
        AnswerError::Malformed(reason) => OipError::Malformed { url: url.into(), reason },
        AnswerError::Unsupported { tensor, datatype } => {
            OipError::UnsupportedDatatype { url: url.into(), tensor, datatype }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_http_only_and_names_path_segments() {
        let ok = OipClient::new("http://127.0.0.1:9/prefix/", ClientOptions::default()).expect("http");
        assert_eq!(ok.base_url(), "http://127.0.0.1:9/prefix");
        for (url, want) in [
            ("https://127.0.0.1:9", "TLS is not built in"),
            ("ftp://x", "not http"),
            ("127.0.0.1:9", "not a URL"),
            ("http://x:9/?a=1", "query"),
        ] {
            let e = OipClient::new(url, ClientOptions::default()).expect_err(url);
            assert!(e.to_string().contains(want) && e.to_string().contains(url), "{url}: {e}");
        }
        for bad in ["", "../x", "a/b", ".hidden", "a b", "a%2f"] {
            assert!(ok.segment(bad).is_err(), "{bad:?}");
        }
        assert!(ok.segment("tandem-0123abcd.v2_x").is_ok());
        let slow = EmulatedLink { up_bits_per_s: 0.0, down_bits_per_s: 1e6, rtt: Duration::ZERO };
        let opts = ClientOptions { emulate: Some(slow), ..ClientOptions::default() };
        assert!(OipClient::new("http://127.0.0.1:9", opts)
            .expect_err("0 bit/s")
            .to_string()
            .contains("up_bits_per_s"));
    }

    #[test]
    fn the_emulated_link_waits_half_the_rtt_and_the_bits() {
        let link =
            EmulatedLink { up_bits_per_s: 100e3, down_bits_per_s: 5e6, rtt: Duration::from_millis(40) };
        assert_eq!(link.up_delay(12_500), Duration::from_millis(20 + 1000));
        assert_eq!(link.down_delay(625_000), Duration::from_millis(20 + 1000));
    }
}
