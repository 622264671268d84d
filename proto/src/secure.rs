//! Pairing and encrypted links without I/O: the record format, the Noise
//! handshakes (snow) and the SPAKE2 pairing, as state machines fed bytes.
//!
//! - **Records.** After an 8-byte [`MAGIC`], both directions are records:
//!   a kind byte, a little-endian `u16` length, then the payload (at most
//!   [`MAX_RECORD`] bytes, one Noise message).
//! - **Sessions** use [`SESSION_NOISE`] (Noise IK): the wearable knows the
//!   handheld's static key from pairing; the handheld learns the wearable's
//!   from the first message and refuses it unless it is paired. After two
//!   messages, every byte is sealed in [`Kind::Data`] records (AES-256-GCM
//!   with a counter nonce per direction: a replayed, reordered, dropped or
//!   altered record fails to open, and the link is closed).
//! - **Pairing** runs SPAKE2 (Ed25519 group) on the 6-digit code, then
//!   [`PAIRING_NOISE`] (Noise XXpsk0) keyed by SPAKE2's shared secret: the
//!   static keys cross only inside a handshake that a wrong code fails, and
//!   an eavesdropper cannot test codes offline. The handheld confirms with a
//!   sealed record, so both sides store the other's key only when both
//!   proved the code.

use std::sync::Arc;

use snow::{HandshakeState, StatelessTransportState};
use spake2::{Ed25519Group, Identity, Password, Spake2};
use thiserror::Error;

/// The first bytes a wearable sends on a secure link (a plain protocol
/// frame starts with its length instead).
pub const MAGIC: [u8; 8] = *b"TNDMSEC1";
/// The session handshake: Noise IK, X25519, AES-256-GCM, BLAKE2s.
pub const SESSION_NOISE: &str = "Noise_IK_25519_AESGCM_BLAKE2s";
/// The pairing handshake: Noise XXpsk0 keyed by the SPAKE2 secret.
pub const PAIRING_NOISE: &str = "Noise_XXpsk0_25519_AESGCM_BLAKE2s";
/// Largest record payload (one Noise message).
pub const MAX_RECORD: usize = 65535;
/// AES-GCM's tag on every sealed record.
const TAG_LEN: usize = 16;
/// Most plaintext bytes in one data record.
pub const MAX_PLAINTEXT: usize = MAX_RECORD - TAG_LEN;
/// A record's header: kind and length.
pub const RECORD_HEADER: usize = 3;
/// Digits in a pairing code.
pub const CODE_DIGITS: usize = 6;
/// Longest refusal reason sent or shown.
const MAX_REASON: usize = 512;

const SESSION_PROLOGUE: &[u8] = b"tandem session v1";
const PAIRING_PROLOGUE: &[u8] = b"tandem pairing v1";
const PAKE_WEARABLE: &[u8] = b"tandem wearable";
const PAKE_HANDHELD: &[u8] = b"tandem handheld";
const CONFIRM: &[u8] = b"paired";

/// A static (long-term) X25519 public key.
pub type PublicKey = [u8; 32];

/// What went wrong on a secure link or in pairing.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum SecureError {
    /// The peer's first bytes are not Tandem's secure protocol.
    #[error("the peer does not speak Tandem's encrypted protocol (its first bytes: {0})")]
    NotSecure(String),
    /// A record of a kind this side does not know, or not expected now.
    #[error("unexpected record {got:?} while waiting for {expected}")]
    Unexpected {
        /// What was awaited.
        expected: &'static str,
        /// The kind byte received.
        got: u8,
    },
    /// The peer refused, with its reason (sent in clear: unauthenticated).
    #[error("the peer refused: {0}")]
    Refused(String),
    /// A handshake message that does not verify.
    #[error("handshake failed: {0}")]
    Handshake(String),
    /// The pairing code was wrong on one of the two sides.
    #[error("the pairing codes differ (typed wrong, or another device answered)")]
    WrongCode,
    /// A code that is not six digits.
    #[error("a pairing code is {CODE_DIGITS} digits, not {0:?}")]
    BadCode(String),
    /// A sealed record that does not open: altered, replayed, reordered or dropped.
    #[error("record {nonce} does not authenticate (altered, replayed, reordered or a record was lost)")]
    Open {
        /// The record's position in its direction.
        nonce: u64,
    },
    /// Something this side cannot do (a key of the wrong length, nonce exhaustion).
    #[error("{0}")]
    Internal(String),
}

/// A side's static key pair.
#[derive(Clone)]
pub struct StaticKeys {
    /// The private key (never logged: `Debug` shows only the public key).
    pub private: [u8; 32],
    /// The public key.
    pub public: PublicKey,
}

impl std::fmt::Debug for StaticKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticKeys").field("public", &fingerprint(&self.public)).finish_non_exhaustive()
    }
}

impl StaticKeys {
    /// A new random key pair.
    pub fn generate() -> Result<StaticKeys, SecureError> {
        let params = params(SESSION_NOISE)?;
        let kp = snow::Builder::new(params).generate_keypair().map_err(internal)?;
        Ok(StaticKeys { private: to_key(&kp.private)?, public: to_key(&kp.public)? })
    }
}

/// A key's short form for people: the first 8 bytes in hex, in pairs.
pub fn fingerprint(key: &PublicKey) -> String {
    key[..8].chunks(2).map(|c| format!("{:02x}{:02x}", c[0], c[1])).collect::<Vec<_>>().join(":")
}

fn internal(e: snow::Error) -> SecureError {
    SecureError::Internal(e.to_string())
}

fn handshake(e: snow::Error) -> SecureError {
    SecureError::Handshake(e.to_string())
}

fn params(name: &str) -> Result<snow::params::NoiseParams, SecureError> {
    name.parse().map_err(internal)
}

fn to_key(bytes: &[u8]) -> Result<PublicKey, SecureError> {
    bytes.try_into().map_err(|_| SecureError::Internal(format!("a key of {} bytes, not 32", bytes.len())))
}

/// Record kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// The wearable's first record: what it wants ([`Purpose`]).
    Hello = 1,
    /// A Noise handshake message.
    Handshake = 2,
    /// Sealed application bytes.
    Data = 3,
    /// A refusal with a reason, in clear, after which the link closes.
    Refuse = 4,
    /// A SPAKE2 message.
    Pake = 5,
}

impl Kind {
    fn from_byte(b: u8) -> Option<Kind> {
        Some(match b {
            1 => Kind::Hello,
            2 => Kind::Handshake,
            3 => Kind::Data,
            4 => Kind::Refuse,
            5 => Kind::Pake,
            _ => return None,
        })
    }
}

/// What a wearable's [`Kind::Hello`] asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// An encrypted session with a paired handheld.
    Session,
    /// Pairing with a code.
    Pairing,
}

impl Purpose {
    fn byte(self) -> u8 {
        match self {
            Purpose::Session => 1,
            Purpose::Pairing => 2,
        }
    }

    /// Reads a Hello's payload.
    pub fn from_hello(payload: &[u8]) -> Result<Purpose, SecureError> {
        match payload {
            [1] => Ok(Purpose::Session),
            [2] => Ok(Purpose::Pairing),
            other => Err(SecureError::Handshake(format!("a hello asking for {other:?}"))),
        }
    }
}

/// One record's bytes (kind, length, payload).
pub fn record(kind: Kind, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(RECORD_HEADER + payload.len());
    push_record(&mut out, kind, payload);
    out
}

fn push_record(out: &mut Vec<u8>, kind: Kind, payload: &[u8]) {
    debug_assert!(payload.len() <= MAX_RECORD);
    out.push(kind as u8);
    out.extend_from_slice(&(payload.len() as u16).to_le_bytes());
    out.extend_from_slice(payload);
}

/// A refusal record: `reason`, cut to a bounded length.
pub fn refusal(reason: &str) -> Vec<u8> {
    let mut end = reason.len().min(MAX_REASON);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    record(Kind::Refuse, &reason.as_bytes()[..end])
}

/// The bytes opening a link, before any record: how a handheld tells a
/// secure wearable from a plain one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Greeting {
    /// The [`MAGIC`]: records follow.
    Secure,
    /// Something else: a plain protocol frame, or garbage.
    Plain,
    /// Too few bytes yet to tell.
    Undecided,
}

/// Tells, from the first bytes received, whether the peer speaks the
/// secure protocol.
pub fn greeting(first: &[u8]) -> Greeting {
    let n = first.len().min(MAGIC.len());
    if first[..n] != MAGIC[..n] {
        Greeting::Plain
    } else if n == MAGIC.len() {
        Greeting::Secure
    } else {
        Greeting::Undecided
    }
}

/// The kind and payload length of the whole record at the start of
/// `bytes`; `None` while it is incomplete.
fn record_at(bytes: &[u8]) -> Result<Option<(Kind, usize)>, SecureError> {
    if bytes.len() < RECORD_HEADER {
        return Ok(None);
    }
    let kind =
        Kind::from_byte(bytes[0]).ok_or(SecureError::Unexpected { expected: "a record", got: bytes[0] })?;
    let len = u16::from_le_bytes([bytes[1], bytes[2]]) as usize;
    Ok((bytes.len() >= RECORD_HEADER + len).then_some((kind, len)))
}

/// Received bytes, cut into records as they complete.
#[derive(Debug, Default)]
pub struct Records {
    buf: Vec<u8>,
    start: usize,
}

impl Records {
    /// An empty buffer.
    pub fn new() -> Records {
        Records::default()
    }

    /// Appends received bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.start > 0 && self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes received and not yet taken as records.
    pub fn pending(&self) -> usize {
        self.buf.len() - self.start
    }

    /// The next whole record's kind and payload, if one is buffered.
    pub fn next_record(&mut self) -> Result<Option<(Kind, &[u8])>, SecureError> {
        let Some((kind, len)) = record_at(&self.buf[self.start..])? else {
            self.compact();
            return Ok(None);
        };
        let at = self.start + RECORD_HEADER;
        self.start = at + len;
        Ok(Some((kind, &self.buf[at..at + len])))
    }

    /// Takes the next record, copied out (for handshakes).
    pub fn next_owned(&mut self) -> Result<Option<(Kind, Vec<u8>)>, SecureError> {
        Ok(self.next_record()?.map(|(k, p)| (k, p.to_vec())))
    }

    /// Moves the partial record to the front (once per push at most).
    fn compact(&mut self) {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
    }
}

/// Decodes a refusal's reason for display.
fn reason(payload: &[u8]) -> String {
    String::from_utf8_lossy(&payload[..payload.len().min(MAX_REASON)]).into_owned()
}

fn expect(kind: Kind, payload: &[u8], want: Kind, what: &'static str) -> Result<(), SecureError> {
    match kind {
        k if k == want => Ok(()),
        Kind::Refuse => Err(SecureError::Refused(reason(payload))),
        k => Err(SecureError::Unexpected { expected: what, got: k as u8 }),
    }
}

fn write_handshake(hs: &mut HandshakeState, out: &mut Vec<u8>) -> Result<(), SecureError> {
    let mut buf = vec![0u8; MAX_RECORD];
    let n = hs.write_message(&[], &mut buf).map_err(handshake)?;
    push_record(out, Kind::Handshake, &buf[..n]);
    Ok(())
}

fn read_handshake(hs: &mut HandshakeState, message: &[u8]) -> Result<(), SecureError> {
    let mut buf = vec![0u8; MAX_RECORD];
    hs.read_message(message, &mut buf).map_err(handshake)?;
    Ok(())
}

fn remote_static(hs: &HandshakeState) -> Result<PublicKey, SecureError> {
    to_key(hs.get_remote_static().ok_or_else(|| SecureError::Handshake("no static key received".into()))?)
}

/// The wearable's side of a session handshake.
pub struct SessionInitiator {
    hs: HandshakeState,
}

impl std::fmt::Debug for SessionInitiator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionInitiator").finish_non_exhaustive()
    }
}

impl SessionInitiator {
    /// Starts a session with the handheld whose static key is `handheld`:
    /// the bytes to send first ([`MAGIC`], Hello, the first handshake message).
    pub fn start(own: &StaticKeys, handheld: &PublicKey) -> Result<(SessionInitiator, Vec<u8>), SecureError> {
        let mut hs = snow::Builder::new(params(SESSION_NOISE)?)
            .local_private_key(&own.private)
            .and_then(|b| b.remote_public_key(handheld))
            .and_then(|b| b.prologue(SESSION_PROLOGUE))
            .and_then(|b| b.build_initiator())
            .map_err(internal)?;
        let mut out = MAGIC.to_vec();
        push_record(&mut out, Kind::Hello, &[Purpose::Session.byte()]);
        write_handshake(&mut hs, &mut out)?;
        Ok((SessionInitiator { hs }, out))
    }

    /// Reads the handheld's answer: the channel, or its refusal.
    pub fn finish(mut self, kind: Kind, payload: &[u8]) -> Result<Channel, SecureError> {
        expect(kind, payload, Kind::Handshake, "the handheld's handshake")?;
        read_handshake(&mut self.hs, payload)?;
        Channel::new(self.hs)
    }
}

/// What the handheld answers a session's first handshake message.
#[derive(Debug)]
pub enum Answer {
    /// A paired wearable: send `reply`, then use the channel.
    Accepted {
        /// The handheld's handshake message.
        reply: Vec<u8>,
        /// The encrypted channel.
        channel: Channel,
        /// The wearable's static key.
        peer: PublicKey,
    },
    /// Send `reply` (a refusal) and close.
    Refused {
        /// The refusal record.
        reply: Vec<u8>,
        /// Why (also in the refusal).
        reason: String,
        /// The wearable's static key, if the handshake got that far.
        peer: Option<PublicKey>,
    },
}

/// The handheld's side of a session handshake: answers the wearable's
/// first message; `paired` says whether a static key is paired.
pub fn answer_session(own: &StaticKeys, message: &[u8], paired: impl Fn(&PublicKey) -> bool) -> Answer {
    let refused = |reason: String, peer| Answer::Refused { reply: refusal(&reason), reason, peer };
    let built = snow::Builder::new(match params(SESSION_NOISE) {
        Ok(p) => p,
        Err(e) => return refused(e.to_string(), None),
    })
    .local_private_key(&own.private)
    .and_then(|b| b.prologue(SESSION_PROLOGUE))
    .and_then(|b| b.build_responder());
    let mut hs = match built {
        Ok(hs) => hs,
        Err(e) => return refused(format!("cannot start a handshake: {e}"), None),
    };
    if let Err(e) = read_handshake(&mut hs, message) {
        return refused(format!("{e} (is the handheld's key the one this wearable paired with?)"), None);
    }
    let peer = match remote_static(&hs) {
        Ok(p) => p,
        Err(e) => return refused(e.to_string(), None),
    };
    if !paired(&peer) {
        return refused(
            format!(
                "wearable {} is not paired with this handheld: run `tandem-handheld pair` here and \
                 `tandem-wearable pair --connect ADDR --code NNNNNN` on the wearable",
                fingerprint(&peer)
            ),
            Some(peer),
        );
    }
    let mut reply = vec![];
    if let Err(e) = write_handshake(&mut hs, &mut reply) {
        return refused(e.to_string(), Some(peer));
    }
    match Channel::new(hs) {
        Ok(channel) => Answer::Accepted { reply, channel, peer },
        Err(e) => refused(e.to_string(), Some(peer)),
    }
}

/// An established channel, to be split into its two directions.
pub struct Channel {
    state: Arc<StatelessTransportState>,
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel").finish_non_exhaustive()
    }
}

impl Channel {
    fn new(hs: HandshakeState) -> Result<Channel, SecureError> {
        Ok(Channel { state: Arc::new(hs.into_stateless_transport_mode().map_err(internal)?) })
    }

    /// The peer's static key.
    pub fn peer(&self) -> Option<PublicKey> {
        self.state.get_remote_static().and_then(|k| k.try_into().ok())
    }

    /// The sending and the receiving direction; `records` holds bytes
    /// already received after the handshake.
    pub fn split(self, records: Records) -> (Sealer, Opener) {
        (Sealer { state: self.state.clone(), nonce: 0 }, Opener { state: self.state, nonce: 0, records })
    }
}

/// Seals bytes into data records, in order.
pub struct Sealer {
    state: Arc<StatelessTransportState>,
    nonce: u64,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sealer").field("nonce", &self.nonce).finish_non_exhaustive()
    }
}

impl Sealer {
    /// The records carrying `plaintext` (split at [`MAX_PLAINTEXT`]).
    pub fn seal(&mut self, plaintext: &[u8]) -> Result<Vec<u8>, SecureError> {
        let records = plaintext.len().div_ceil(MAX_PLAINTEXT).max(1);
        let mut out = vec![0u8; plaintext.len() + records * (RECORD_HEADER + TAG_LEN)];
        let mut at = 0;
        for chunk in plaintext.chunks(MAX_PLAINTEXT) {
            at += self.seal_one(chunk, &mut out[at..])?;
        }
        if plaintext.is_empty() {
            at += self.seal_one(&[], &mut out[at..])?;
        }
        out.truncate(at);
        Ok(out)
    }

    fn seal_one(&mut self, chunk: &[u8], out: &mut [u8]) -> Result<usize, SecureError> {
        if self.nonce == u64::MAX {
            return Err(SecureError::Internal("this link sealed 2^64 records: reconnect".into()));
        }
        let n = self
            .state
            .write_message(self.nonce, chunk, &mut out[RECORD_HEADER..RECORD_HEADER + chunk.len() + TAG_LEN])
            .map_err(internal)?;
        self.nonce += 1;
        out[0] = Kind::Data as u8;
        out[1..3].copy_from_slice(&(n as u16).to_le_bytes());
        Ok(RECORD_HEADER + n)
    }

    /// Records sealed so far.
    pub fn sealed(&self) -> u64 {
        self.nonce
    }
}

/// Opens data records, in order.
pub struct Opener {
    state: Arc<StatelessTransportState>,
    nonce: u64,
    records: Records,
}

impl std::fmt::Debug for Opener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Opener").field("nonce", &self.nonce).finish_non_exhaustive()
    }
}

impl Opener {
    /// Appends received bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        self.records.push(bytes);
    }

    /// Bytes received but not yet opened (a partial record).
    pub fn pending(&self) -> usize {
        self.records.pending()
    }

    /// Opens every whole record buffered, appending the plaintext to `out`.
    /// A refusal or any other kind of record is an error, as is a record
    /// that does not authenticate; after an error the link must close.
    pub fn open_into(&mut self, out: &mut Vec<u8>) -> Result<(), SecureError> {
        loop {
            let nonce = self.nonce;
            let Some((kind, payload)) = self.records.next_record()? else { return Ok(()) };
            open_record(&self.state, nonce, kind, payload, out)?;
            self.nonce += 1;
        }
    }

    /// [`Self::push`] then [`Self::open_into`], opening whole records in
    /// `bytes` where they lie (only a partial record is copied aside).
    pub fn open_chunk(&mut self, mut bytes: &[u8], out: &mut Vec<u8>) -> Result<(), SecureError> {
        if self.records.pending() > 0 {
            self.records.push(bytes);
            return self.open_into(out);
        }
        while let Some((kind, len)) = record_at(bytes)? {
            open_record(&self.state, self.nonce, kind, &bytes[RECORD_HEADER..RECORD_HEADER + len], out)?;
            self.nonce += 1;
            bytes = &bytes[RECORD_HEADER + len..];
        }
        self.records.push(bytes);
        Ok(())
    }
}

/// Opens one record into `out`.
fn open_record(
    state: &StatelessTransportState,
    nonce: u64,
    kind: Kind,
    payload: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), SecureError> {
    expect(kind, payload, Kind::Data, "sealed data")?;
    if payload.len() < TAG_LEN {
        return Err(SecureError::Open { nonce });
    }
    let at = out.len();
    out.resize(at + payload.len() - TAG_LEN, 0);
    match state.read_message(nonce, payload, &mut out[at..]) {
        Ok(n) => {
            out.truncate(at + n);
            Ok(())
        }
        Err(_) => {
            out.truncate(at);
            Err(SecureError::Open { nonce })
        }
    }
}

/// Checks a pairing code: exactly six ASCII digits.
pub fn check_code(code: &str) -> Result<(), SecureError> {
    if code.len() == CODE_DIGITS && code.bytes().all(|b| b.is_ascii_digit()) {
        Ok(())
    } else {
        Err(SecureError::BadCode(code.chars().take(16).collect()))
    }
}

fn pairing_noise(own: &StaticKeys, psk: &[u8], initiator: bool) -> Result<HandshakeState, SecureError> {
    let psk: &[u8; 32] =
        psk.try_into().map_err(|_| SecureError::Internal(format!("a SPAKE2 key of {} bytes", psk.len())))?;
    let b = snow::Builder::new(params(PAIRING_NOISE)?)
        .local_private_key(&own.private)
        .and_then(|b| b.prologue(PAIRING_PROLOGUE))
        .and_then(|b| b.psk(0, psk))
        .map_err(internal)?;
    if initiator { b.build_initiator() } else { b.build_responder() }.map_err(internal)
}

/// What a pairing side does next.
#[derive(Debug)]
pub enum PairStep {
    /// Send these bytes and wait for the next record.
    Send(Vec<u8>),
    /// Paired: send these bytes (possibly none), store `peer`, and close.
    Paired {
        /// Last bytes to send.
        send: Vec<u8>,
        /// The other side's static key.
        peer: PublicKey,
    },
}

enum WearableStage {
    Pake(Spake2<Ed25519Group>),
    Noise(Box<HandshakeState>),
    Confirm(Channel, PublicKey),
    Done,
}

/// The wearable's side of pairing.
pub struct PairWearable {
    own: StaticKeys,
    stage: WearableStage,
}

impl std::fmt::Debug for PairWearable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PairWearable").finish_non_exhaustive()
    }
}

impl PairWearable {
    /// Starts pairing with the code the handheld shows: the bytes to send first.
    pub fn start(code: &str, own: &StaticKeys) -> Result<(PairWearable, Vec<u8>), SecureError> {
        check_code(code)?;
        let (pake, message) = Spake2::<Ed25519Group>::start_a(
            &Password::new(code.as_bytes()),
            &Identity::new(PAKE_WEARABLE),
            &Identity::new(PAKE_HANDHELD),
        );
        let mut out = MAGIC.to_vec();
        push_record(&mut out, Kind::Hello, &[Purpose::Pairing.byte()]);
        push_record(&mut out, Kind::Pake, &message);
        Ok((PairWearable { own: own.clone(), stage: WearableStage::Pake(pake) }, out))
    }

    /// Takes the handheld's next record.
    pub fn on_record(&mut self, kind: Kind, payload: &[u8]) -> Result<PairStep, SecureError> {
        match std::mem::replace(&mut self.stage, WearableStage::Done) {
            WearableStage::Pake(pake) => {
                expect(kind, payload, Kind::Pake, "the handheld's SPAKE2 message")?;
                let key =
                    pake.finish(payload).map_err(|e| SecureError::Handshake(format!("SPAKE2: {e:?}")))?;
                let mut hs = Box::new(pairing_noise(&self.own, &key, true)?);
                let mut out = vec![];
                write_handshake(&mut hs, &mut out)?;
                self.stage = WearableStage::Noise(hs);
                Ok(PairStep::Send(out))
            }
            WearableStage::Noise(mut hs) => {
                expect(kind, payload, Kind::Handshake, "the handheld's handshake")?;
                read_handshake(&mut hs, payload).map_err(|_| SecureError::WrongCode)?;
                let peer = remote_static(&hs)?;
                let mut out = vec![];
                write_handshake(&mut hs, &mut out)?;
                self.stage = WearableStage::Confirm(Channel::new(*hs)?, peer);
                Ok(PairStep::Send(out))
            }
            WearableStage::Confirm(channel, peer) => {
                expect(kind, payload, Kind::Data, "the handheld's confirmation")?;
                let (_, mut opener) = channel.split(Records::new());
                opener.push(&record(kind, payload));
                let mut plain = vec![];
                opener.open_into(&mut plain)?;
                if plain != CONFIRM {
                    return Err(SecureError::Handshake("the handheld's confirmation is not 'paired'".into()));
                }
                Ok(PairStep::Paired { send: vec![], peer })
            }
            WearableStage::Done => Err(SecureError::Handshake("pairing already ended".into())),
        }
    }
}

enum HandheldStage {
    Pake,
    Noise1(Box<HandshakeState>),
    Noise3(Box<HandshakeState>),
    Done,
}

/// The handheld's side of pairing (after the wearable's Hello).
pub struct PairHandheld {
    own: StaticKeys,
    code: String,
    stage: HandheldStage,
}

impl std::fmt::Debug for PairHandheld {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PairHandheld").finish_non_exhaustive()
    }
}

impl PairHandheld {
    /// Waits for a wearable to pair with `code`.
    pub fn new(code: &str, own: &StaticKeys) -> Result<PairHandheld, SecureError> {
        check_code(code)?;
        Ok(PairHandheld { own: own.clone(), code: code.into(), stage: HandheldStage::Pake })
    }

    /// Takes the wearable's next record. [`SecureError::WrongCode`] means
    /// the wearable typed another code: send [`refusal`] and count the try.
    pub fn on_record(&mut self, kind: Kind, payload: &[u8]) -> Result<PairStep, SecureError> {
        match std::mem::replace(&mut self.stage, HandheldStage::Done) {
            HandheldStage::Pake => {
                expect(kind, payload, Kind::Pake, "the wearable's SPAKE2 message")?;
                let (pake, message) = Spake2::<Ed25519Group>::start_b(
                    &Password::new(self.code.as_bytes()),
                    &Identity::new(PAKE_WEARABLE),
                    &Identity::new(PAKE_HANDHELD),
                );
                let key =
                    pake.finish(payload).map_err(|e| SecureError::Handshake(format!("SPAKE2: {e:?}")))?;
                self.stage = HandheldStage::Noise1(Box::new(pairing_noise(&self.own, &key, false)?));
                Ok(PairStep::Send(record(Kind::Pake, &message)))
            }
            HandheldStage::Noise1(mut hs) => {
                expect(kind, payload, Kind::Handshake, "the wearable's handshake")?;
                read_handshake(&mut hs, payload).map_err(|_| SecureError::WrongCode)?;
                let mut out = vec![];
                write_handshake(&mut hs, &mut out)?;
                self.stage = HandheldStage::Noise3(hs);
                Ok(PairStep::Send(out))
            }
            HandheldStage::Noise3(mut hs) => {
                expect(kind, payload, Kind::Handshake, "the wearable's last handshake message")?;
                read_handshake(&mut hs, payload)?;
                let peer = remote_static(&hs)?;
                let (mut sealer, _) = Channel::new(*hs)?.split(Records::new());
                Ok(PairStep::Paired { send: sealer.seal(CONFIRM)?, peer })
            }
            HandheldStage::Done => Err(SecureError::Handshake("pairing already ended".into())),
        }
    }
}
