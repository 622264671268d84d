//! The client against a hostile server: each crafted answer is a clear
//! error naming the URL, never a panic, never an allocation of what a
//! header claims.

use std::time::{Duration, Instant};

use tandem_oip::{ClientOptions, EmulatedLink, OipClient, OipError, OipTensor};
use tandem_types::WireType;

use crate::common::{binary_answer, fake_server, http, Reply};

fn input() -> OipTensor {
    OipTensor::from_f32("x", vec![1, 2], &[1.0, 2.0]).expect("x")
}

fn asked() -> Vec<String> {
    vec!["y".to_string()]
}

fn options() -> ClientOptions {
    ClientOptions {
        timeout: Duration::from_millis(800),
        max_response_bytes: 64 << 10,
        ..ClientOptions::default()
    }
}

/// The outcome of one inference call against a server answering `reply`.
async fn infer_against(
    reply: Reply,
    opts: ClientOptions,
) -> (String, Result<tandem_oip::InferReply, OipError>) {
    let server = fake_server(vec![reply]);
    let client = OipClient::new(&server.url, opts).expect("client");
    let got = client.infer("m", &[input()], &asked()).await;
    (server.url, got)
}

const Y_HEADER: &str = r#"{"model_name":"m","outputs":[{"name":"y","datatype":"FP32","shape":[1,2],"parameters":{"binary_data_size":8}}]}"#;

fn y_bytes() -> Vec<u8> {
    [0.5f32, -0.25].iter().flat_map(|v| v.to_le_bytes()).collect()
}

#[tokio::test]
async fn a_correct_binary_answer_is_read_and_the_request_is_the_extension() {
    let server = fake_server(vec![Reply::Bytes(binary_answer(Y_HEADER, &y_bytes(), None))]);
    let client = OipClient::new(&server.url, options()).expect("client");
    let reply = client.infer("m", &[input()], &asked()).await.expect("a valid answer");
    assert_eq!(reply.outputs[0].f32s(), Some(vec![0.5, -0.25]));
    assert_eq!(reply.outputs[0].shape, vec![1, 2]);
    let request = server.requests.lock().expect("requests")[0].clone();
    let text = String::from_utf8_lossy(&request).to_ascii_lowercase();
    assert!(text.starts_with("post /v2/models/m/infer http/1.1"), "{text}");
    assert!(text.contains("inference-header-content-length:"), "{text}");
    assert!(text.contains("content-type: application/octet-stream"), "{text}");
    let body_start = request.windows(4).position(|w| w == b"\r\n\r\n").expect("head") + 4;
    assert!(request.ends_with(&input().data), "the input's raw bytes close the body");
    assert!(reply.bytes_up >= request.len() as u64 - 40, "{} vs {}", reply.bytes_up, request.len());
    assert!(reply.bytes_up > (request.len() - body_start) as u64);
    assert!(reply.bytes_down > (Y_HEADER.len() + 8) as u64);
}

#[tokio::test]
async fn each_hostile_answer_is_a_clear_error() {
    let long_header = binary_answer(Y_HEADER, &y_bytes(), Some(10_000));
    let too_big_size = binary_answer(&Y_HEADER.replace(":8}", ":4096}"), &y_bytes(), None);
    let shape_mismatch = binary_answer(&Y_HEADER.replace("[1,2]", "[2,2]"), &y_bytes(), None);
    let trailing = binary_answer(Y_HEADER, &[y_bytes(), vec![0; 3]].concat(), None);
    let fp16 = binary_answer(&Y_HEADER.replace("FP32", "FP16"), &y_bytes(), None);
    let unasked = binary_answer(&Y_HEADER.replace(r#""name":"y""#, r#""name":"z""#), &y_bytes(), None);
    let other_model = binary_answer(&Y_HEADER.replace(r#""m""#, r#""n""#), &y_bytes(), None);
    let huge = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 10000000000\r\n\r\n{\"outputs\":".to_vec();
    let chunked_flood = {
        let mut b =
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
                .to_vec();
        for _ in 0..40 {
            b.extend_from_slice(format!("{:x}\r\n", 4096).as_bytes());
            b.extend_from_slice(&[b' '; 4096]);
            b.extend_from_slice(b"\r\n");
        }
        b.extend_from_slice(b"0\r\n\r\n");
        b
    };
    let json = |body: &str| http("200 OK", &[("content-type", "application/json")], body.as_bytes());
    let cases: Vec<(&str, Reply, &str)> = vec![
        ("a lying Inference-Header-Content-Length", Reply::Bytes(long_header), "Inference-Header-Content-Length is 10000"),
        ("a binary_data_size past the body", Reply::Bytes(too_big_size), "binary_data_size 4096"),
        ("a shape that is not its bytes", Reply::Bytes(shape_mismatch), "needs 16 bytes"),
        ("bytes after the outputs", Reply::Bytes(trailing), "add up to 8"),
        ("an FP16 output", Reply::Bytes(fp16), "FP16"),
        ("an output not asked for", Reply::Bytes(unasked), "'z' was not asked"),
        ("an answer for another model", Reply::Bytes(other_model), "for model 'n'"),
        ("a 10 GB Content-Length", Reply::BytesThenStall(huge, Duration::from_secs(3)), "10000000000 bytes"),
        ("a chunked body past max_response_bytes", Reply::Bytes(chunked_flood), "runs over"),
        ("garbage JSON", Reply::Bytes(json("{\"outputs\": [1, 2")), "not an inference response"),
        ("JSON data of the wrong length", Reply::Bytes(json(
            r#"{"outputs":[{"name":"y","datatype":"FP32","shape":[1,2],"data":[1.0]}]}"#)), "1 data elements"),
        ("JSON data of the wrong type", Reply::Bytes(json(
            r#"{"outputs":[{"name":"y","datatype":"INT32","shape":[1,2],"data":[1.5, 2]}]}"#)), "not an integer"),
        ("a missing output", Reply::Bytes(json(r#"{"outputs":[]}"#)), "missing"),
        ("HTML", Reply::Bytes(http("200 OK", &[("content-type", "text/html")], b"<html>")), "Content-Type text/html"),
        ("an unknown model", Reply::Bytes(http("404 Not Found", &[("content-type", "application/json")],
            br#"{"error":"Model with name m does not exist."}"#)), "not found: Model with name m does not exist."),
        ("a refusal", Reply::Bytes(http("400 Bad Request", &[("content-type", "application/json")],
            br#"{"error":"wrong shape"}"#)), "HTTP 400: wrong shape"),
        ("a redirect", Reply::Bytes(http("302 Found", &[("location", "http://example.com/")], b"")), "HTTP 302"),
        ("a stall past the timeout", Reply::BytesThenStall(Vec::new(), Duration::from_secs(3)), "timed out"),
        ("a stall mid-body", Reply::BytesThenStall(
            b"HTTP/1.1 200 OK\r\ninference-header-content-length: 10\r\ncontent-length: 100\r\n\r\n{\"outputs\"".to_vec(),
            Duration::from_secs(3)), "timed out"),
        ("a connection closed at once", Reply::Bytes(Vec::new()), "unreachable"),
        ("not HTTP at all", Reply::Bytes(b"SSH-2.0-OpenSSH_9.2\r\n\r\n".to_vec()), "unreachable"),
    ];
    for (what, reply, want) in cases {
        let start = Instant::now();
        let (url, got) = infer_against(reply, options()).await;
        let e = got.expect_err(what);
        let text = e.to_string();
        assert!(text.contains(want), "{what}: {text}");
        assert!(text.contains(&url), "{what}: the message names the URL: {text}");
        assert!(start.elapsed() < Duration::from_secs(3), "{what}: took {:?}", start.elapsed());
        match what {
            "an unknown model" => assert!(e.is_not_found(), "{e:?}"),
            "a stall past the timeout" | "a stall mid-body" => {
                assert!(matches!(e, OipError::Unreachable { timed_out: true, .. }), "{what}: {e:?}")
            }
            "a connection closed at once" | "not HTTP at all" => assert!(e.is_unreachable(), "{what}: {e:?}"),
            "an FP16 output" => assert!(matches!(e, OipError::UnsupportedDatatype { .. }), "{e:?}"),
            "a refusal" | "a redirect" => assert!(matches!(e, OipError::Refused { .. }), "{e:?}"),
            _ => assert!(matches!(e, OipError::Malformed { .. }), "{what}: {e:?}"),
        }
    }
}

#[tokio::test]
async fn a_closed_port_is_unreachable_and_not_a_timeout() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let client = OipClient::new(&format!("http://127.0.0.1:{port}"), options()).expect("client");
    let e = client.server_live().await.expect_err("nothing listens");
    assert!(matches!(e, OipError::Unreachable { timed_out: false, .. }), "{e:?}");
    let e = client.model_ready("m").await.expect_err("nothing listens");
    assert!(e.is_unreachable() && e.to_string().contains("/v2/models/m/ready"), "{e}");
}

#[tokio::test]
async fn health_and_metadata_answers_are_checked() {
    let json =
        |body: &str| Reply::Bytes(http("200 OK", &[("content-type", "application/json")], body.as_bytes()));
    let server = fake_server(vec![
        json(r#"{"live":true}"#),
        json(r#"{"live":"yes"}"#),
        Reply::Bytes(http("503 Service Unavailable", &[], b"")),
        json(r#"{"name":"m","ready":true}"#),
        json(r#"{"name":"other","ready":true}"#),
        Reply::Bytes(http("404 Not Found", &[], b"")),
        json(r#"{"name":"m","inputs":[{"name":"x","datatype":"FP32","shape":[-1,2]}],"outputs":[]}"#),
        json(r#"{"name":"m","inputs":[{"name":"x","datatype":"FP32","shape":[-2]}],"outputs":[]}"#),
        Reply::Bytes(http(
            "503 Service Unavailable",
            &[("content-type", "application/json")],
            br#"{"error":"no file"}"#,
        )),
    ]);
    let client = OipClient::new(&server.url, options()).expect("client");
    assert!(client.server_live().await.expect("live"));
    assert!(client.server_live().await.expect_err("a string").to_string().contains("not a live answer"));
    assert!(!client.server_ready().await.expect("503 is not ready"));
    assert!(client.model_ready("m").await.expect("ready"));
    assert!(client.model_ready("m").await.expect_err("another model's").to_string().contains("'other'"));
    assert!(!client.model_ready("m").await.expect("404 is not ready"));
    let meta = client.model_metadata("m").await.expect("metadata");
    assert_eq!((meta.inputs[0].shape.clone(), meta.outputs.len()), (vec![-1, 2], 0));
    assert!(client.model_metadata("m").await.expect_err("shape -2").to_string().contains("[-2]"));
    let e = client.load("m").await.expect_err("503");
    assert!(matches!(&e, OipError::Refused { status: 503, message, .. } if message == "no file"), "{e:?}");
}

#[tokio::test]
async fn the_emulated_link_waits_for_the_bytes_both_ways() {
    let link = EmulatedLink { up_bits_per_s: 100e3, down_bits_per_s: 50e3, rtt: Duration::from_millis(30) };
    let opts = ClientOptions { emulate: Some(link), ..options() };
    let (_, got) = infer_against(Reply::Bytes(binary_answer(Y_HEADER, &y_bytes(), None)), opts).await;
    let reply = got.expect("a valid answer");
    let floor = link.up_delay(reply.bytes_up) + link.down_delay(reply.bytes_down);
    assert!(floor > Duration::from_millis(60), "{floor:?}");
    assert!(reply.elapsed >= floor, "{:?} < {floor:?}", reply.elapsed);
    let (_, plain) = infer_against(Reply::Bytes(binary_answer(Y_HEADER, &y_bytes(), None)), options()).await;
    assert!(plain.expect("valid").elapsed < reply.elapsed);
}

#[tokio::test]
async fn bad_requests_are_refused_before_anything_is_sent() {
    let server = fake_server(vec![]);
    let client = OipClient::new(&server.url, options()).expect("client");
    let short = OipTensor { name: "x".into(), datatype: WireType::F32, shape: vec![3], data: vec![0; 4] };
    let e = client.infer("m", &[short], &asked()).await.expect_err("short");
    assert!(matches!(e, OipError::BadRequest { .. }) && e.to_string().contains("'x'"), "{e}");
    let e = client.infer("../admin", &[input()], &asked()).await.expect_err("not a name");
    assert!(matches!(e, OipError::BadRequest { .. }), "{e}");
    let json = OipClient::new(&server.url, ClientOptions { binary: false, ..options() }).expect("client");
    let nan = OipTensor::from_f32("x", vec![1], &[f32::NAN]).expect("nan");
    let e = json.infer("m", &[nan], &asked()).await.expect_err("NaN in JSON");
    assert!(e.to_string().contains("NaN"), "{e}");
    assert!(server.requests.lock().expect("requests").is_empty());
}
