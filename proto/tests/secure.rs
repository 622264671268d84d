//! Pairing and sealed records, both sides driven in memory: what a paired
//! wearable gets through, and what an unpaired one, a wrong code, and an
//! altered, replayed, reordered or lost record get instead.

use proptest::prelude::*;
use tandem_proto::secure::{
    answer_session, greeting, Answer, Greeting, Kind, Opener, PairHandheld, PairStep, PairWearable, Purpose,
    Records, Sealer, SecureError, SessionInitiator, StaticKeys, MAGIC, MAX_RECORD, RECORD_HEADER,
};

fn keys() -> StaticKeys {
    StaticKeys::generate().expect("keys")
}

/// Strips the magic and the Hello from a wearable's first bytes: the purpose and the records after.
fn open_hello(first: &[u8]) -> (Purpose, Records) {
    assert_eq!(greeting(first), Greeting::Secure);
    let mut records = Records::new();
    records.push(&first[MAGIC.len()..]);
    let (kind, payload) = records.next_owned().expect("record").expect("a hello");
    assert_eq!(kind, Kind::Hello);
    (Purpose::from_hello(&payload).expect("purpose"), records)
}

/// One side's two directions.
type Ends = (Sealer, Opener);

/// Each side's pairing result.
type Paired = Result<[u8; 32], SecureError>;

/// A session between `wearable` (pinning `pinned` as the handheld's key)
/// and `handheld`, which has paired `paired`: both directions, or the error
/// the wearable sees and the reason the handheld gave.
fn session(
    wearable: &StaticKeys,
    pinned: &StaticKeys,
    handheld: &StaticKeys,
    paired: &[&StaticKeys],
) -> Result<(Ends, Ends), (SecureError, String)> {
    let (initiator, first) = SessionInitiator::start(wearable, &pinned.public).expect("start");
    let (purpose, mut records) = open_hello(&first);
    assert_eq!(purpose, Purpose::Session);
    let (kind, message) = records.next_owned().expect("record").expect("a handshake");
    assert_eq!(kind, Kind::Handshake);
    let answer = answer_session(handheld, &message, |k| paired.iter().any(|p| p.public == *k));
    let (reply, handheld_side, reason) = match answer {
        Answer::Accepted { reply, channel, peer } => {
            assert_eq!(peer, wearable.public, "the handheld learns the wearable's key");
            (reply, Some(channel.split(Records::new())), String::new())
        }
        Answer::Refused { reply, reason, .. } => (reply, None, reason),
    };
    let mut back = Records::new();
    back.push(&reply);
    let (kind, payload) = back.next_owned().expect("record").expect("an answer");
    match initiator.finish(kind, &payload) {
        Ok(channel) => {
            assert_eq!(channel.peer(), Some(handheld.public));
            Ok((channel.split(back), handheld_side.expect("the handheld accepted")))
        }
        Err(e) => {
            assert!(handheld_side.is_none(), "the wearable failed where the handheld accepted: {e}");
            Err((e, reason))
        }
    }
}

fn open_all(opener: &mut Opener, bytes: &[u8]) -> Result<Vec<u8>, SecureError> {
    opener.push(bytes);
    let mut out = vec![];
    opener.open_into(&mut out)?;
    Ok(out)
}

#[test]
fn a_paired_session_carries_bytes_both_ways_in_records_of_bounded_size() {
    let (w, h) = (keys(), keys());
    let ((mut w_tx, mut w_rx), (mut h_tx, mut h_rx)) = session(&w, &h, &h, &[&w]).expect("paired");
    let big: Vec<u8> = (0..1_000_003u32).map(|i| (i * 7 + i / 251) as u8).collect();
    let sealed = w_tx.seal(&big).expect("seal");
    assert_ne!(&sealed[RECORD_HEADER..RECORD_HEADER + 64], &big[..64], "the bytes cross encrypted");
    // Every record fits one Noise message.
    let mut records = Records::new();
    records.push(&sealed);
    let mut n = 0;
    while let Some((kind, payload)) = records.next_record().expect("record") {
        assert_eq!(kind, Kind::Data);
        assert!(payload.len() <= MAX_RECORD);
        n += 1;
    }
    assert_eq!(n, 16, "1 MB in 65,519-byte records");
    assert_eq!(open_all(&mut h_rx, &sealed).expect("open"), big);
    let answer = h_tx.seal(b"result").expect("seal");
    assert_eq!(open_all(&mut w_rx, &answer).expect("open"), b"result");
    // An empty send still crosses as one record, and the stream goes on after it.
    let empty = w_tx.seal(&[]).expect("seal");
    assert_eq!(open_all(&mut h_rx, &empty).expect("open"), b"");
    assert_eq!(open_all(&mut h_rx, &w_tx.seal(b"more").expect("seal")).expect("open"), b"more");
}

#[test]
fn an_unpaired_wearable_is_refused_with_a_reason_naming_pairing() {
    let (w, h, other) = (keys(), keys(), keys());
    let Err((e, reason)) = session(&w, &h, &h, &[&other]) else { panic!("an unpaired wearable got in") };
    assert!(reason.contains("not paired"), "{reason}");
    match e {
        SecureError::Refused(r) => assert!(r.contains("tandem-handheld pair"), "{r}"),
        e => panic!("expected a refusal, got {e}"),
    }
}

#[test]
fn a_wearable_pinning_another_handhelds_key_is_refused() {
    let (w, h, impostor) = (keys(), keys(), keys());
    // The wearable paired with `h`; `impostor` answers at its address.
    let Err((e, reason)) = session(&w, &h, &impostor, &[&w]) else { panic!("the impostor was accepted") };
    assert!(reason.contains("handshake failed"), "{reason}");
    assert!(matches!(e, SecureError::Refused(_)), "{e}");
}

#[test]
fn altered_replayed_reordered_and_lost_records_do_not_open() {
    let (w, h) = (keys(), keys());
    let fresh = || session(&w, &h, &h, &[&w]).expect("paired");
    // Altered: one bit of the ciphertext.
    let ((mut tx, _), (_, mut rx)) = fresh();
    let mut a = tx.seal(b"frame 1").expect("seal");
    a[RECORD_HEADER + 2] ^= 1;
    assert_eq!(open_all(&mut rx, &a), Err(SecureError::Open { nonce: 0 }));
    // Replayed.
    let ((mut tx, _), (_, mut rx)) = fresh();
    let a = tx.seal(b"frame 1").expect("seal");
    assert_eq!(open_all(&mut rx, &a).expect("open"), b"frame 1");
    assert_eq!(open_all(&mut rx, &a), Err(SecureError::Open { nonce: 1 }));
    // Reordered.
    let ((mut tx, _), (_, mut rx)) = fresh();
    let (a, b) = (tx.seal(b"frame 1").expect("seal"), tx.seal(b"frame 2").expect("seal"));
    assert_eq!(open_all(&mut rx, &b), Err(SecureError::Open { nonce: 0 }));
    drop(a);
    // Lost.
    let ((mut tx, _), (_, mut rx)) = fresh();
    let _lost = tx.seal(b"frame 1").expect("seal");
    let c = tx.seal(b"frame 2").expect("seal");
    assert!(open_all(&mut rx, &c).is_err());
    // A record sealed for the other direction does not open here either.
    let ((mut w_tx, mut w_rx), _) = fresh();
    let own = w_tx.seal(b"echo").expect("seal");
    assert!(open_all(&mut w_rx, &own).is_err(), "a reflected record opened");
    // A refusal after the handshake ends the link with its reason.
    let (_, (_, mut rx)) = fresh();
    let refusal = tandem_proto::secure::refusal("going away");
    assert_eq!(open_all(&mut rx, &refusal), Err(SecureError::Refused("going away".into())));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// However the link cuts the bytes, and whichever way they are
    /// opened, the receiver gets the sent bytes, in order.
    #[test]
    fn any_chunking_of_the_records_opens_to_the_same_bytes(
        sizes in proptest::collection::vec(0usize..150_000, 1..5),
        cuts in proptest::collection::vec(1usize..70_000, 1..40),
    ) {
        let (w, h) = (keys(), keys());
        let ((mut tx, _), (_, mut rx)) = session(&w, &h, &h, &[&w]).expect("paired");
        let mut sent = vec![];
        let mut wire = vec![];
        for (i, n) in sizes.iter().enumerate() {
            let bytes: Vec<u8> = (0..*n).map(|j| (i * 31 + j) as u8).collect();
            wire.extend(tx.seal(&bytes).expect("seal"));
            sent.extend(bytes);
        }
        let mut got = vec![];
        let mut at = 0;
        for (i, c) in cuts.iter().cycle().enumerate() {
            if at >= wire.len() {
                break;
            }
            let end = (at + c).min(wire.len());
            // Both ways in: buffered, and opened where the records lie.
            if i % 2 == 0 {
                rx.push(&wire[at..end]);
                rx.open_into(&mut got).expect("open");
            } else {
                rx.open_chunk(&wire[at..end], &mut got).expect("open");
            }
            at = end;
        }
        prop_assert_eq!(rx.pending(), 0);
        prop_assert_eq!(got, sent);
    }
}

/// Runs pairing to the end: both sides' results.
fn pair(wearable_code: &str, handheld_code: &str) -> (Paired, Paired, StaticKeys, StaticKeys) {
    let (w, h) = (keys(), keys());
    let (mut wearable, first) = PairWearable::start(wearable_code, &w).expect("start");
    let (purpose, mut to_handheld) = open_hello(&first);
    assert_eq!(purpose, Purpose::Pairing);
    let mut handheld = PairHandheld::new(handheld_code, &h).expect("code");
    let mut to_wearable = Records::new();
    let (mut w_done, mut h_done) = (None, None);
    for _ in 0..8 {
        if h_done.is_none() {
            if let Some((kind, payload)) = to_handheld.next_owned().expect("record") {
                match handheld.on_record(kind, &payload) {
                    Ok(PairStep::Send(b)) => to_wearable.push(&b),
                    Ok(PairStep::Paired { send, peer }) => {
                        to_wearable.push(&send);
                        h_done = Some(Ok(peer));
                    }
                    Err(e) => {
                        to_wearable.push(&tandem_proto::secure::refusal(&e.to_string()));
                        h_done = Some(Err(e));
                    }
                }
            }
        }
        if w_done.is_none() {
            if let Some((kind, payload)) = to_wearable.next_owned().expect("record") {
                match wearable.on_record(kind, &payload) {
                    Ok(PairStep::Send(b)) => to_handheld.push(&b),
                    Ok(PairStep::Paired { peer, .. }) => w_done = Some(Ok(peer)),
                    Err(e) => w_done = Some(Err(e)),
                }
            }
        }
    }
    (w_done.expect("the wearable ended"), h_done.expect("the handheld ended"), w, h)
}

#[test]
fn pairing_with_the_shown_code_exchanges_the_static_keys() {
    let (wearable, handheld, w, h) = pair("042917", "042917");
    assert_eq!(wearable.expect("the wearable paired"), h.public);
    assert_eq!(handheld.expect("the handheld paired"), w.public);
}

#[test]
fn pairing_with_a_wrong_code_stores_nothing_and_says_so_on_both_sides() {
    let (wearable, handheld, _, _) = pair("042918", "042917");
    assert_eq!(handheld, Err(SecureError::WrongCode));
    match wearable {
        Err(SecureError::Refused(r)) => assert!(r.contains("pairing codes differ"), "{r}"),
        other => panic!("the wearable should be refused, got {other:?}"),
    }
}

#[test]
fn codes_and_first_bytes_are_checked() {
    let w = keys();
    for bad in ["12345", "1234567", "12a456", "", "１２３４５６"] {
        assert!(matches!(PairWearable::start(bad, &w), Err(SecureError::BadCode(_))), "{bad:?}");
        assert!(PairHandheld::new(bad, &w).is_err(), "{bad:?}");
    }
    // A plain protocol frame starts with its length; a prefix of the magic cannot be told yet.
    assert_eq!(greeting(&[40, 0, 0, 0, 12, 0, 0, 0]), Greeting::Plain);
    assert_eq!(greeting(&MAGIC[..3]), Greeting::Undecided);
    assert_eq!(greeting(b"GET / HTTP/1.1"), Greeting::Plain);
    let mut records = Records::new();
    records.push(&[9, 1, 0, 0]);
    assert!(matches!(records.next_record(), Err(SecureError::Unexpected { got: 9, .. })));
    assert!(Purpose::from_hello(&[7]).is_err());
    // Garbage as the first handshake message is refused, never a panic.
    for junk in [&[][..], &[0u8; 10][..], &[0xffu8; 200][..]] {
        assert!(matches!(answer_session(&w, junk, |_| true), Answer::Refused { .. }));
    }
}
