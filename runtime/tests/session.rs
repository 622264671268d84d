//! The handheld's session state machine, driven message by message: the
//! handshake with and without a model push, digest and version refusals,
//! messages out of order, frame ordering, probes, and close.

use tandem::protocol::{
    model_digest, ErrorCode, Header, LatencySummary, Message, ProtocolError, StatusReport, PROTOCOL_VERSION,
};
use tandem::session::{Action, HandheldSession};
use tandem::Tensor;

fn status() -> StatusReport {
    StatusReport { load: 0.1, queue: 0, battery: 0.9, charging: true }
}

fn hello(digest: [u8; 32], size: u64) -> Message {
    Message::new(Header::Hello {
        version: PROTOCOL_VERSION,
        model_digest: digest,
        model_bytes: size,
        device: "watch-w5".into(),
    })
}

fn summary() -> LatencySummary {
    LatencySummary { per_layer_s: vec![1e-3; 3], overhead_s: 1e-4 }
}

fn error_code(actions: &[Action]) -> Option<ErrorCode> {
    actions.iter().find_map(|a| match a {
        Action::Send(Message { header: Header::Error { code, .. }, .. }) => Some(*code),
        _ => None,
    })
}

fn run(frame: u64) -> Message {
    let x = Tensor::from_shape(&[2], &[1.0f32, 2.0]).expect("tensor");
    Message::with_tensors(
        |tensors| Header::RunSuffix { frame, cut: vec!["x".into()], tensors },
        &[("x".into(), &x)],
    )
    .expect("message")
}

#[test]
fn a_pushed_model_is_verified_loaded_and_then_suffixes_run_in_order() {
    let model = b"pretend these are ONNX bytes".repeat(10);
    let digest = model_digest(&model);
    let mut s = HandheldSession::new("pixel-8-pro", status());
    let a = s.on_message(hello(digest, model.len() as u64), |_| false);
    assert!(
        matches!(&a[..], [Action::Send(Message { header: Header::Welcome { has_model: false, .. }, .. })]),
        "{a:?}"
    );
    // Two chunks; nothing happens until the last byte.
    let (first, second) = model.split_at(100);
    assert_eq!(
        s.on_message(Message { header: Header::ModelChunk { offset: 0 }, body: first.to_vec() }, |_| false),
        vec![]
    );
    let a = s
        .on_message(Message { header: Header::ModelChunk { offset: 100 }, body: second.to_vec() }, |_| false);
    assert_eq!(a, vec![Action::LoadPushed { digest, bytes: model.clone() }]);
    assert!(!s.is_ready());
    let a = s.model_loaded(summary());
    assert!(matches!(&a[..], [Action::Send(Message { header: Header::ModelReady { .. }, .. })]));
    assert!(s.is_ready());
    for frame in [1, 2, 5] {
        let a = s.on_message(run(frame), |_| false);
        match &a[..] {
            [Action::Run { frame: f, cut, message }] => {
                assert_eq!((*f, cut.as_slice()), (frame, &["x".to_string()][..]));
                assert_eq!(message.tensors().expect("tensors")[0].0, "x");
            }
            other => panic!("{other:?}"),
        }
    }
    // A repeated or older frame is refused: no frame runs twice.
    let a = s.on_message(run(5), |_| false);
    assert_eq!(error_code(&a), Some(ErrorCode::Unexpected));
    assert_eq!(a.last(), Some(&Action::Close));
    assert!(s.is_closed());
}

#[test]
fn a_known_model_is_loaded_without_a_push() {
    let digest = [9; 32];
    let mut s = HandheldSession::new("pixel-8-pro", status());
    let a = s.on_message(hello(digest, 1234), |d| *d == digest);
    assert!(
        matches!(&a[..], [Action::Send(Message { header: Header::Welcome { has_model: true, .. }, .. }), Action::LoadKnown(d)] if *d == digest),
        "{a:?}"
    );
    assert_eq!(s.digest(), Some(digest));
    s.model_loaded(summary());
    assert!(s.is_ready());
}

#[test]
fn refusals_name_what_went_wrong_and_close() {
    // Another protocol version.
    let mut s = HandheldSession::new("p", status());
    let mut m = hello([0; 32], 10);
    if let Header::Hello { version, .. } = &mut m.header {
        *version = PROTOCOL_VERSION + 1;
    }
    let a = s.on_message(m, |_| false);
    assert_eq!(error_code(&a), Some(ErrorCode::Version));
    assert!(s.is_closed());
    // A pushed model whose bytes do not match the digest.
    let mut s = HandheldSession::new("p", status());
    s.on_message(hello(model_digest(b"right"), 5), |_| false);
    let a = s
        .on_message(Message { header: Header::ModelChunk { offset: 0 }, body: b"wrong".to_vec() }, |_| false);
    assert_eq!(error_code(&a), Some(ErrorCode::Digest));
    // A chunk out of order, and a push longer than announced.
    let mut s = HandheldSession::new("p", status());
    s.on_message(hello([1; 32], 5), |_| false);
    let a = s.on_message(Message { header: Header::ModelChunk { offset: 3 }, body: vec![0; 2] }, |_| false);
    assert_eq!(error_code(&a), Some(ErrorCode::Unexpected));
    let mut s = HandheldSession::new("p", status());
    s.on_message(hello([1; 32], 5), |_| false);
    let a = s.on_message(Message { header: Header::ModelChunk { offset: 0 }, body: vec![0; 6] }, |_| false);
    assert_eq!(error_code(&a), Some(ErrorCode::Model));
    // A run before the handshake.
    let mut s = HandheldSession::new("p", status());
    let a = s.on_message(run(1), |_| false);
    assert_eq!(error_code(&a), Some(ErrorCode::Unexpected));
    // Bytes that did not decode.
    let mut s = HandheldSession::new("p", status());
    let a = s.on_decode_error(&ProtocolError::BadHeader("garbage".into()));
    assert_eq!(error_code(&a), Some(ErrorCode::Malformed));
    assert!(s.is_closed());
    // A model that fails to load.
    let mut s = HandheldSession::new("p", status());
    s.on_message(hello([2; 32], 5), |_| true);
    assert_eq!(error_code(&s.model_failed("unsupported op Foo")), Some(ErrorCode::Model));
}

#[test]
fn probes_echo_in_any_state_and_bye_closes() {
    let mut s = HandheldSession::new("p", status());
    let a = s.on_message(
        Message { header: Header::Probe { id: 4, echo_payload: true }, body: vec![3; 50] },
        |_| false,
    );
    assert_eq!(
        a,
        vec![Action::Send(Message { header: Header::Echo { id: 4, received: 50 }, body: vec![3; 50] })]
    );
    let a = s.on_message(
        Message { header: Header::Probe { id: 5, echo_payload: false }, body: vec![3; 50] },
        |_| false,
    );
    assert_eq!(a, vec![Action::Send(Message::new(Header::Echo { id: 5, received: 50 }))]);
    assert!(s.status_message().is_some());
    assert_eq!(s.on_message(Message::new(Header::Bye), |_| false), vec![Action::Close]);
    assert!(s.is_closed() && s.status_message().is_none());
}

#[test]
fn results_carry_the_outputs() {
    let y = Tensor::from_shape(&[1, 3], &[0.2f32, 0.3, 0.5]).expect("tensor");
    let m = HandheldSession::result(9, 1500, &[("y".into(), &y)]).expect("result");
    assert!(matches!(m.header, Header::Result { frame: 9, handheld_compute_us: 1500, .. }));
    assert_eq!(m.tensors().expect("tensors"), vec![("y".to_string(), y)]);
}
