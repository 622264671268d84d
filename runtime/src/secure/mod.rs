//! Encrypted links and pairing over any [`Link`]: the I/O shell around
//! [`tandem_proto::secure`].
//!
//! - [`SecureTransport`]: the wearable's transport wrapped in a Noise IK
//!   session with the handheld it paired with; every byte is sealed.
//! - [`accept`]: the handheld's side, run on each new link: a paired
//!   wearable gets an encrypted link; an unpaired one, or a plain one
//!   where plain links are not allowed, gets a refusal naming the fix.
//! - [`pair_handheld`] / [`pair_wearable`]: pairing on a 6-digit code.
//! - [`keystore`]: the keys and paired peers on disk.
//!
//! It wraps links, not sockets: TCP, emulated links and BLE all get it
//! (on emulated links the records' overhead is on the air too).

pub mod keystore;

use std::io;
use std::sync::Arc;
use std::time::Duration;

use tandem_proto::protocol::{encode, ErrorCode};
use tandem_proto::secure::{
    answer_session, greeting, Answer, Greeting, Kind, Opener, PairHandheld, PairStep, PairWearable,
    PublicKey, Purpose, Records, Sealer, SecureError, SessionInitiator, StaticKeys, MAGIC,
};
use tandem_proto::session::error_message;
use tracing::{info, warn};

pub use tandem_proto::secure::{check_code, fingerprint};

use crate::link::{Acceptor, BoxFuture, Link, LinkRx, LinkTx, Transport};
pub use keystore::{Keystore, Peer};

/// How long a peer has to finish a handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Wrong codes before a pairing window closes.
pub const MAX_PAIRING_TRIES: usize = 3;

fn io_error(e: SecureError) -> io::Error {
    let kind = match e {
        SecureError::Refused(_) | SecureError::WrongCode => io::ErrorKind::PermissionDenied,
        _ => io::ErrorKind::InvalidData,
    };
    io::Error::new(kind, e.to_string())
}

struct SecureTx {
    inner: Box<dyn LinkTx>,
    sealer: Sealer,
}

impl LinkTx for SecureTx {
    fn send(&mut self, bytes: Vec<u8>) -> BoxFuture<'_, io::Result<()>> {
        Box::pin(async move {
            let sealed = self.sealer.seal(&bytes).map_err(io_error)?;
            self.inner.send(sealed).await
        })
    }

    fn close(&mut self) -> BoxFuture<'_, io::Result<()>> {
        self.inner.close()
    }
}

struct SecureRx {
    inner: Box<dyn LinkRx>,
    opener: Opener,
    failed: bool,
}

impl LinkRx for SecureRx {
    fn recv(&mut self) -> BoxFuture<'_, io::Result<Option<Vec<u8>>>> {
        Box::pin(async move {
            if self.failed {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "the encrypted link failed earlier"));
            }
            let mut out = vec![];
            if let Err(e) = self.opener.open_into(&mut out) {
                self.failed = true;
                return Err(io_error(e));
            }
            loop {
                if !out.is_empty() {
                    return Ok(Some(out));
                }
                match self.inner.recv().await? {
                    Some(bytes) => {
                        out.reserve(bytes.len());
                        if let Err(e) = self.opener.open_chunk(&bytes, &mut out) {
                            self.failed = true;
                            return Err(io_error(e));
                        }
                    }
                    None if self.opener.pending() > 0 => {
                        self.failed = true;
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            format!(
                                "the link closed inside a record ({} bytes of it)",
                                self.opener.pending()
                            ),
                        ));
                    }
                    None => return Ok(None),
                }
            }
        })
    }
}

/// Replays bytes read while telling plain from secure, then the link.
struct PrefixedRx {
    first: Option<Vec<u8>>,
    inner: Box<dyn LinkRx>,
}

impl LinkRx for PrefixedRx {
    fn recv(&mut self) -> BoxFuture<'_, io::Result<Option<Vec<u8>>>> {
        Box::pin(async move {
            match self.first.take() {
                Some(b) if !b.is_empty() => Ok(Some(b)),
                _ => self.inner.recv().await,
            }
        })
    }
}

fn secured(link: Link, sealer: Sealer, opener: Opener, peer: &PublicKey) -> Link {
    Link {
        tx: Box::new(SecureTx { inner: link.tx, sealer }),
        rx: Box::new(SecureRx { inner: link.rx, opener, failed: false }),
        name: format!("{} (encrypted, peer {})", link.name, fingerprint(peer)),
    }
}

/// Reads until `records` holds a whole record.
async fn next_record(rx: &mut Box<dyn LinkRx>, records: &mut Records) -> io::Result<(Kind, Vec<u8>)> {
    loop {
        if let Some(r) = records.next_owned().map_err(io_error)? {
            return Ok(r);
        }
        match rx.recv().await? {
            Some(bytes) => records.push(&bytes),
            None => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the peer closed the link during the secure handshake",
                ))
            }
        }
    }
}

async fn timed<T>(what: &str, f: impl std::future::Future<Output = io::Result<T>>) -> io::Result<T> {
    tokio::time::timeout(HANDSHAKE_TIMEOUT, f).await.map_err(|_| {
        io::Error::new(io::ErrorKind::TimedOut, format!("{what} took longer than {HANDSHAKE_TIMEOUT:?}"))
    })?
}

/// Opens an encrypted session on `link` with the handheld whose key is `handheld`.
pub async fn connect(mut link: Link, own: &StaticKeys, handheld: &PublicKey) -> io::Result<Link> {
    timed("the secure handshake", async {
        let (initiator, first) = SessionInitiator::start(own, handheld).map_err(io_error)?;
        link.tx.send(first).await?;
        let mut records = Records::new();
        let (kind, payload) = next_record(&mut link.rx, &mut records).await.map_err(|e| {
            if e.kind() == io::ErrorKind::InvalidData {
                io::Error::new(
                    e.kind(),
                    format!("{e}: the handheld does not speak the encrypted protocol (an older build?)"),
                )
            } else {
                e
            }
        })?;
        let channel = initiator.finish(kind, &payload).map_err(io_error)?;
        let (sealer, opener) = channel.split(records);
        Ok(secured(link, sealer, opener, handheld))
    })
    .await
}

/// A transport whose links are encrypted sessions with one paired handheld.
pub struct SecureTransport {
    inner: Box<dyn Transport>,
    keys: StaticKeys,
    handheld: PublicKey,
}

impl std::fmt::Debug for SecureTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecureTransport")
            .field("handheld", &fingerprint(&self.handheld))
            .finish_non_exhaustive()
    }
}

impl SecureTransport {
    /// Wraps `inner`: each link opens with a handshake as `keys` with the handheld `handheld`.
    pub fn new(inner: Box<dyn Transport>, keys: StaticKeys, handheld: PublicKey) -> SecureTransport {
        SecureTransport { inner, keys, handheld }
    }
}

/// The wearable's transport to `addr`: `inner` inside an encrypted
/// session with the handheld paired in the keystore at `dir`, or `inner`
/// unchanged (and `false`) when the keystore has paired no handheld.
pub fn for_wearable(
    inner: Box<dyn Transport>,
    dir: &std::path::Path,
    addr: &str,
) -> io::Result<(Box<dyn Transport>, bool)> {
    let keystore = match Keystore::open(dir)? {
        Some(k) => k,
        None => return Ok((inner, false)),
    };
    match keystore.handheld_for(addr)? {
        Some(peer) => {
            let key =
                peer.public_key().ok_or_else(|| io::Error::other("a paired key that is not 32 bytes"))?;
            Ok((Box::new(SecureTransport::new(inner, keystore.keys().clone(), key)), true))
        }
        None => Ok((inner, false)),
    }
}

impl Transport for SecureTransport {
    fn connect(&self) -> BoxFuture<'_, io::Result<Link>> {
        Box::pin(async move {
            let link = self.inner.connect().await?;
            connect(link, &self.keys, &self.handheld).await
        })
    }

    fn describe(&self) -> String {
        format!("{}, encrypted with handheld {}", self.inner.describe(), fingerprint(&self.handheld))
    }
}

/// Which links a handheld takes.
#[derive(Clone, Debug, Default)]
pub struct Policy {
    /// Its keys and paired wearables; `None`: no encrypted sessions.
    pub keystore: Option<Arc<Keystore>>,
    /// Whether plain (unencrypted, unauthenticated) links are served.
    pub allow_plain: bool,
}

impl Policy {
    /// Plain links only: in-process links and tests, where there is no peer to distrust.
    pub fn plain() -> Policy {
        Policy { keystore: None, allow_plain: true }
    }
}

/// How a link was accepted.
#[derive(Debug)]
pub enum Accepted {
    /// An encrypted session with this paired wearable.
    Secure(Link, PublicKey),
    /// A plain link (allowed by the policy).
    Plain(Link),
}

/// Reads the link's first bytes: which protocol it speaks, and those bytes.
async fn greet(link: &mut Link) -> io::Result<(Greeting, Vec<u8>)> {
    let mut first = vec![];
    loop {
        match greeting(&first) {
            Greeting::Undecided => {}
            g => return Ok((g, first)),
        }
        match link.rx.recv().await? {
            Some(b) => first.extend_from_slice(&b),
            None => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the peer closed before saying anything",
                ))
            }
        }
    }
}

async fn refuse(link: &mut Link, bytes: Vec<u8>, reason: String) -> io::Error {
    let _ = link.tx.send(bytes).await;
    let _ = link.tx.close().await;
    io::Error::new(io::ErrorKind::PermissionDenied, reason)
}

/// The handheld's side of a new link under `policy`: the link to serve,
/// or why it was refused (the peer was told, and the link closed).
pub async fn accept(link: Link, policy: &Policy) -> io::Result<Accepted> {
    // One deadline for the first bytes and the whole handshake: a peer that
    // never authenticates holds a connection slot for at most this long.
    timed("the secure handshake", accept_within(link, policy)).await
}

async fn accept_within(mut link: Link, policy: &Policy) -> io::Result<Accepted> {
    let (kind, first) = greet(&mut link).await?;
    if kind == Greeting::Plain {
        if policy.allow_plain {
            let Link { tx, rx, name } = link;
            return Ok(Accepted::Plain(Link {
                tx,
                rx: Box::new(PrefixedRx { first: Some(first), inner: rx }),
                name,
            }));
        }
        let reason = "this handheld serves paired wearables only, over encrypted links: pair once \
                      (`tandem-handheld pair` shows a code; `tandem-wearable pair --connect ADDR --code NNNNNN`), \
                      or start the handheld with --insecure"
            .to_string();
        // A plain wearable reads a protocol error; anything else just sees the close.
        let bytes = encode(&error_message(ErrorCode::Unpaired, reason.clone())).unwrap_or_default();
        return Err(refuse(&mut link, bytes, reason).await);
    }
    let mut records = Records::new();
    records.push(&first[MAGIC.len()..]);
    let keystore = policy.keystore.clone();
    let handshake = async move {
        let (kind, payload) = next_record(&mut link.rx, &mut records).await?;
        if kind != Kind::Hello {
            return Err(io_error(SecureError::Unexpected { expected: "a hello", got: kind as u8 }));
        }
        let purpose = Purpose::from_hello(&payload).map_err(io_error)?;
        let Some(keystore) = keystore.filter(|_| purpose == Purpose::Session) else {
            let reason = match purpose {
                Purpose::Pairing => {
                    "this handheld is serving, not pairing: run `tandem-handheld pair` for a code"
                }
                Purpose::Session => "this handheld has no keys (started with --insecure and no keystore)",
            };
            return Err(refuse(&mut link, tandem_proto::secure::refusal(reason), reason.into()).await);
        };
        let (kind, message) = next_record(&mut link.rx, &mut records).await?;
        if kind != Kind::Handshake {
            return Err(io_error(SecureError::Unexpected { expected: "a handshake", got: kind as u8 }));
        }
        let paired = |k: &PublicKey| match keystore.is_paired(k) {
            Ok(p) => p,
            Err(e) => {
                warn!("cannot read the paired wearables: {e}");
                false
            }
        };
        match answer_session(keystore.keys(), &message, paired) {
            Answer::Accepted { reply, channel, peer } => {
                link.tx.send(reply).await?;
                let (sealer, opener) = channel.split(records);
                Ok(Accepted::Secure(secured(link, sealer, opener, &peer), peer))
            }
            Answer::Refused { reply, reason, .. } => Err(refuse(&mut link, reply, reason).await),
        }
    };
    handshake.await
}

/// A fresh 6-digit pairing code from the OS's random numbers.
pub fn new_code() -> String {
    use rand::Rng;
    format!("{:06}", rand::rngs::OsRng.gen_range(0..1_000_000u32))
}

/// Most pairing attempts in progress at once; a newer one pushes the
/// oldest out, so idle sockets cannot hold the pairing window.
pub const MAX_PAIRING_ATTEMPTS: usize = 8;

/// Pairs one wearable with this handheld: takes links from `acceptor`
/// and serves their attempts side by side, each within its own deadline,
/// until one proves `code` (the others are refused, and after
/// [`MAX_PAIRING_TRIES`] wrong codes the window closes); then records the
/// wearable in `keystore` and returns its key.
pub async fn pair_handheld(
    acceptor: &mut dyn Acceptor,
    keystore: &Keystore,
    code: &str,
) -> io::Result<PublicKey> {
    let mut wrong = 0;
    let mut attempts = tokio::task::JoinSet::new();
    // Attempts side by side, within a budget that gives way first to
    // links that have said nothing (the handheld's own admission rule).
    let admission =
        crate::server::admission::Admission::with_budgets(0, MAX_PAIRING_ATTEMPTS, MAX_PAIRING_ATTEMPTS);
    let mut next_id = 0u64;
    loop {
        tokio::select! {
            accepted = acceptor.accept() => {
                let (link, heard) = crate::link::watch_first_bytes(accepted?);
                let name = link.name.clone();
                let state = PairHandheld::new(code, keystore.keys()).map_err(io_error)?;
                next_id += 1;
                let (id, admission) = (next_id, admission.clone());
                let evicted = admission.begin(id, "", heard, tokio::time::Instant::now().into_std());
                attempts.spawn(async move {
                    let attempt = tokio::select! {
                        r = timed("pairing", pair_attempt(link, state)) => r,
                        _ = evicted => Err(io::Error::new(io::ErrorKind::ConnectionAborted, "dropped: newer pairing attempts needed the room")),
                    };
                    admission.abandoned(id);
                    (name, attempt)
                });
            }
            Some(done) = attempts.join_next(), if !attempts.is_empty() => {
                let Ok((name, attempt)) = done else { continue };
                match attempt {
                    Ok(peer) => {
                        keystore.add_peer(&peer, &format!("wearable on {name}"))?;
                        info!(peer = %fingerprint(&peer), "paired");
                        return Ok(peer);
                    }
                    Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                        wrong += 1;
                        warn!("pairing attempt from {name} failed ({wrong} of {MAX_PAIRING_TRIES}): {e}");
                        if wrong >= MAX_PAIRING_TRIES {
                            return Err(io::Error::new(
                                io::ErrorKind::PermissionDenied,
                                format!("{MAX_PAIRING_TRIES} failed pairing attempts: this code is void; run pair again for a new one"),
                            ));
                        }
                    }
                    Err(e) => info!("pairing attempt from {name} failed: {e}"),
                }
            }
        }
    }
}

/// One pairing attempt on `link`: the wearable's key once it proves the code.
async fn pair_attempt(mut link: Link, mut state: PairHandheld) -> io::Result<PublicKey> {
    let (kind, first) = greet(&mut link).await?;
    if kind != Greeting::Secure {
        let reason = "this handheld is pairing: run `tandem-wearable pair --connect ADDR --code NNNNNN`";
        let bytes = encode(&error_message(ErrorCode::Unpaired, reason)).unwrap_or_default();
        let e = refuse(&mut link, bytes, reason.into()).await;
        return Err(io::Error::new(io::ErrorKind::InvalidInput, e.to_string()));
    }
    let mut records = Records::new();
    records.push(&first[MAGIC.len()..]);
    let (kind, payload) = next_record(&mut link.rx, &mut records).await?;
    if kind != Kind::Hello || Purpose::from_hello(&payload).ok() != Some(Purpose::Pairing) {
        let reason = "this handheld is pairing, not serving";
        let e = refuse(&mut link, tandem_proto::secure::refusal(reason), reason.into()).await;
        return Err(io::Error::new(io::ErrorKind::InvalidInput, e.to_string()));
    }
    loop {
        let (kind, payload) = next_record(&mut link.rx, &mut records).await?;
        match state.on_record(kind, &payload) {
            Ok(PairStep::Send(bytes)) => link.tx.send(bytes).await?,
            Ok(PairStep::Paired { send, peer }) => {
                link.tx.send(send).await?;
                let _ = link.tx.close().await;
                return Ok(peer);
            }
            Err(e) => {
                let reason = e.to_string();
                let _ = link.tx.send(tandem_proto::secure::refusal(&reason)).await;
                let _ = link.tx.close().await;
                // Only a wrong code counts against the code's tries.
                let kind = if e == SecureError::WrongCode {
                    io::ErrorKind::PermissionDenied
                } else {
                    io::ErrorKind::InvalidData
                };
                return Err(io::Error::new(kind, reason));
            }
        }
    }
}

/// Pairs this wearable with the handheld showing `code`, reached through
/// `transport`; records it in `keystore` under `label` (its address) and
/// returns its key.
pub async fn pair_wearable(
    transport: &dyn Transport,
    keystore: &Keystore,
    code: &str,
    label: &str,
) -> io::Result<PublicKey> {
    let (mut state, first) = PairWearable::start(code, keystore.keys()).map_err(io_error)?;
    let peer = timed("pairing", async {
        let mut link = transport.connect().await?;
        link.tx.send(first).await?;
        let mut records = Records::new();
        loop {
            let (kind, payload) = next_record(&mut link.rx, &mut records).await?;
            match state.on_record(kind, &payload).map_err(io_error)? {
                PairStep::Send(bytes) => link.tx.send(bytes).await?,
                PairStep::Paired { peer, .. } => {
                    let _ = link.tx.close().await;
                    return Ok(peer);
                }
            }
        }
    })
    .await?;
    keystore.add_peer(&peer, label)?;
    Ok(peer)
}
