//! Tandem over Bluetooth Low Energy: a GATT service with two
//! characteristics, framing with credit-based flow control, and (cargo
//! feature `ble`) the radios' ends: [`central`] on `btleplug` for the
//! wearable, [`peripheral`] on `bluer` for the handheld.
//!
//! **The service.** [`SERVICE_UUID`] holds [`RX_UUID`] (the wearable writes
//! without response) and [`TX_UUID`] (the handheld notifies). Each write
//! or notification is one *chunk* of at most the ATT payload:
//!
//! ```text
//! 0x00 data...          a slice of the link's byte stream (at least 1 byte)
//! 0x01 u16 LE count     a credit grant: `count` more data chunks may be sent
//! ```
//!
//! **Credits.** Writes without response and notifications are not
//! acknowledged: a receiver that cannot keep up drops them. So each side
//! starts with [`INITIAL_CREDITS`] chunks it may send, spends one per data
//! chunk, and waits at zero; the receiver grants credits back once the
//! app has *taken* the data (not when it was merely received), so a reader
//! that stops reading stops its peer within one window. A sender that
//! overruns its credits, or a grant that would take the sender past its
//! window, is a protocol error.
//!
//! [`CreditFlow`] is that logic with no I/O, and [`gatt_link`] turns any
//! [`GattPipe`] (a chunk in, a chunk out) into a [`Link`]. The in-memory
//! [`memory_gatt`] double, which drops chunks beyond its buffer like a
//! radio, tests both here; the `btleplug` and `bluer` ends are untested
//! against radios on machines without Bluetooth.

#[cfg(feature = "ble")]
pub mod central;
#[cfg(all(feature = "ble", target_os = "linux"))]
pub mod peripheral;

use std::collections::VecDeque;
use std::io;

use thiserror::Error;
use tokio::sync::{mpsc, oneshot};

use crate::link::{BoxFuture, Link, LinkRx, LinkTx};

/// The wearable's BLE transport: the `btleplug` central, in a build with
/// the `ble` feature; otherwise an error that says how to get one.
pub fn central_transport() -> io::Result<Box<dyn crate::link::Transport>> {
    #[cfg(feature = "ble")]
    return Ok(Box::new(central::BleTransport::default()));
    #[cfg(not(feature = "ble"))]
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "--connect ble: this build has no BLE support (rebuild with `cargo build --features ble`)",
    ))
}

/// The handheld's BLE acceptor, advertising `local_name`: the `bluer` GATT
/// peripheral, in a Linux build with the `ble` feature; otherwise an error
/// that says how to get one.
pub async fn peripheral_acceptor(local_name: &str) -> io::Result<Box<dyn crate::link::Acceptor>> {
    #[cfg(all(feature = "ble", target_os = "linux"))]
    return Ok(Box::new(peripheral::BleAcceptor::start(local_name).await?));
    #[cfg(not(all(feature = "ble", target_os = "linux")))]
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        format!(
            "--ble ({local_name}): this build has no BLE support (rebuild with `cargo build --features ble` on Linux)"
        ),
    ))
}

/// Tandem's GATT service.
pub const SERVICE_UUID: u128 = 0x7a3d_0001_5b1e_4c8a_9f2e_6d1c_0b7a_4e21;
/// Wearable → handheld: write without response.
pub const RX_UUID: u128 = 0x7a3d_0002_5b1e_4c8a_9f2e_6d1c_0b7a_4e21;
/// Handheld → wearable: notify.
pub const TX_UUID: u128 = 0x7a3d_0003_5b1e_4c8a_9f2e_6d1c_0b7a_4e21;
/// Data chunks each side may send before its first grant.
pub const INITIAL_CREDITS: u16 = 32;

const DATA: u8 = 0;
const CREDIT: u8 = 1;

/// A chunk that breaks the framing.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum BleError {
    /// An empty chunk.
    #[error("empty BLE chunk")]
    Empty,
    /// A chunk whose type byte is unknown.
    #[error("BLE chunk of unknown type {0:#04x}")]
    UnknownType(u8),
    /// A data chunk with no data, or a grant of the wrong length.
    #[error("malformed BLE chunk: {0}")]
    Malformed(&'static str),
    /// The peer sent data without credit (it would have been dropped on a radio).
    #[error("the peer sent a data chunk without credit (flow control violated)")]
    Overrun,
    /// The peer granted credits beyond the window (more than was spent).
    #[error("the peer granted {granted} credits with {held} held: more than the window of {window}")]
    ExcessCredit {
        /// Credits in the grant.
        granted: u32,
        /// Credits already held.
        held: u32,
        /// The window.
        window: u32,
    },
    /// A chunk longer than the payload size.
    #[error("BLE chunk of {len} bytes exceeds the payload size {max}")]
    TooLong {
        /// Its length.
        len: usize,
        /// The payload size.
        max: usize,
    },
}

/// Framing and credits of one side, with no I/O.
#[derive(Debug)]
pub struct CreditFlow {
    payload: usize,
    send_credits: u32,
    /// Credits the peer holds for sending to us.
    peer_credits: u32,
    /// Chunks received, not yet taken by the app.
    received: u32,
    /// Chunks taken by the app since the last grant.
    consumed: u32,
    window: u32,
}

/// What a received chunk means.
#[derive(Debug, PartialEq, Eq)]
pub enum Incoming {
    /// Bytes of the stream.
    Data(Vec<u8>),
    /// The peer granted credits (now spendable).
    Credit,
}

impl CreditFlow {
    /// A side whose chunks carry at most `payload` bytes (the ATT payload:
    /// MTU − 3), with `window` credits each way.
    pub fn new(payload: usize, window: u16) -> CreditFlow {
        let window = u32::from(window.max(2));
        CreditFlow {
            payload: payload.max(2),
            send_credits: window,
            peer_credits: window,
            received: 0,
            consumed: 0,
            window,
        }
    }

    /// Data bytes per chunk.
    pub fn data_per_chunk(&self) -> usize {
        self.payload - 1
    }

    /// Credits left to send data.
    pub fn credits(&self) -> u32 {
        self.send_credits
    }

    /// Takes up to the next chunk's worth of `pending` as a data chunk,
    /// if a credit is left.
    pub fn next_data_chunk(&mut self, pending: &mut VecDeque<u8>) -> Option<Vec<u8>> {
        if self.send_credits == 0 || pending.is_empty() {
            return None;
        }
        self.send_credits -= 1;
        let n = pending.len().min(self.data_per_chunk());
        let mut chunk = Vec::with_capacity(n + 1);
        chunk.push(DATA);
        chunk.extend(pending.drain(..n));
        Some(chunk)
    }

    /// Handles a chunk from the peer.
    pub fn on_chunk(&mut self, chunk: &[u8]) -> Result<Incoming, BleError> {
        if chunk.len() > self.payload {
            return Err(BleError::TooLong { len: chunk.len(), max: self.payload });
        }
        match chunk.split_first() {
            None => Err(BleError::Empty),
            Some((&DATA, data)) => {
                if data.is_empty() {
                    return Err(BleError::Malformed("a data chunk without data"));
                }
                if self.peer_credits == 0 {
                    return Err(BleError::Overrun);
                }
                self.peer_credits -= 1;
                self.received += 1;
                Ok(Incoming::Data(data.to_vec()))
            }
            Some((&CREDIT, count)) => {
                let count: [u8; 2] =
                    count.try_into().map_err(|_| BleError::Malformed("a credit grant is 2 bytes"))?;
                let granted = u32::from(u16::from_le_bytes(count));
                // Never more than was spent: a peer cannot grow our queue
                // of unacknowledged chunks, nor overflow the counter.
                if granted > self.window - self.send_credits {
                    return Err(BleError::ExcessCredit {
                        granted,
                        held: self.send_credits,
                        window: self.window,
                    });
                }
                self.send_credits += granted;
                Ok(Incoming::Credit)
            }
            Some((&other, _)) => Err(BleError::UnknownType(other)),
        }
    }

    /// The app took `chunks` received data chunks (their room is free again).
    pub fn taken(&mut self, chunks: u32) {
        let n = chunks.min(self.received);
        self.received -= n;
        self.consumed += n;
    }

    /// A grant to send back, once the app has taken half the window's
    /// chunks (so the buffer has room again).
    pub fn grant(&mut self) -> Option<Vec<u8>> {
        if self.consumed < self.window / 2 {
            return None;
        }
        // The window is a u16, so a grant always fits one.
        let n = self.consumed.min(u32::from(u16::MAX));
        self.consumed -= n;
        self.peer_credits += n;
        let mut chunk = vec![CREDIT];
        chunk.extend_from_slice(&(n as u16).to_le_bytes());
        Some(chunk)
    }
}

/// One side's GATT transport: whole chunks out and in.
pub trait GattPipe: Send + 'static {
    /// Sends one chunk (a write without response, or a notification).
    fn send_chunk(&mut self, chunk: Vec<u8>) -> BoxFuture<'_, io::Result<()>>;
    /// The next chunk from the peer; `None` when disconnected.
    fn recv_chunk(&mut self) -> BoxFuture<'_, io::Result<Option<Vec<u8>>>>;
}

struct GattTx(mpsc::Sender<(Vec<u8>, oneshot::Sender<io::Result<()>>)>);

impl LinkTx for GattTx {
    fn send(&mut self, bytes: Vec<u8>) -> BoxFuture<'_, io::Result<()>> {
        Box::pin(async move {
            let gone = || io::Error::new(io::ErrorKind::BrokenPipe, "the BLE link is closed");
            let (done, wait) = oneshot::channel();
            self.0.send((bytes, done)).await.map_err(|_| gone())?;
            wait.await.map_err(|_| gone())?
        })
    }

    fn close(&mut self) -> BoxFuture<'_, io::Result<()>> {
        let (tx, _) = mpsc::channel(1);
        self.0 = tx;
        Box::pin(async { Ok(()) })
    }
}

/// The app's end: each chunk it takes is reported, and only then granted back.
struct GattRx {
    chunks: mpsc::UnboundedReceiver<io::Result<Vec<u8>>>,
    taken: std::sync::Arc<(std::sync::atomic::AtomicU32, tokio::sync::Notify)>,
}

impl LinkRx for GattRx {
    fn recv(&mut self) -> BoxFuture<'_, io::Result<Option<Vec<u8>>>> {
        Box::pin(async move {
            match self.chunks.recv().await {
                Some(Ok(b)) => {
                    self.taken.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    self.taken.1.notify_one();
                    Ok(Some(b))
                }
                Some(Err(e)) => Err(e),
                None => Ok(None),
            }
        })
    }
}

/// A [`Link`] over `pipe`: framing and credits run in a task (call inside
/// a tokio runtime). `payload` is the ATT payload size (MTU − 3).
pub fn gatt_link(mut pipe: impl GattPipe, payload: usize, name: String) -> Link {
    let (send_tx, mut send_rx) = mpsc::channel::<(Vec<u8>, oneshot::Sender<io::Result<()>>)>(16);
    // Unbounded in type only: credits keep at most a window of data chunks
    // (plus one error) in it, as a chunk beyond them ends the link.
    let (recv_tx, recv_rx) = mpsc::unbounded_channel::<io::Result<Vec<u8>>>();
    let taken = std::sync::Arc::new((std::sync::atomic::AtomicU32::new(0), tokio::sync::Notify::new()));
    let app_taken = taken.clone();
    tokio::spawn(async move {
        let mut flow = CreditFlow::new(payload, INITIAL_CREDITS);
        let mut pending: VecDeque<u8> = VecDeque::new();
        let mut waiting: VecDeque<(usize, oneshot::Sender<io::Result<()>>)> = VecDeque::new();
        let mut sent_total = 0usize;
        let mut queued_total = 0usize;
        let mut sending = true;
        let fail = |waiting: &mut VecDeque<(usize, oneshot::Sender<io::Result<()>>)>, e: &io::Error| {
            for (_, w) in waiting.drain(..) {
                let _ = w.send(Err(io::Error::new(e.kind(), e.to_string())));
            }
        };
        loop {
            // Send what the credits allow; acknowledge sends fully on the air.
            while let Some(chunk) = flow.next_data_chunk(&mut pending) {
                let n = chunk.len() - 1;
                if let Err(e) = pipe.send_chunk(chunk).await {
                    fail(&mut waiting, &e);
                    let _ = recv_tx.send(Err(e));
                    return;
                }
                sent_total += n;
                while waiting.front().is_some_and(|(end, _)| *end <= sent_total) {
                    if let Some((_, w)) = waiting.pop_front() {
                        let _ = w.send(Ok(()));
                    }
                }
            }
            tokio::select! {
                next = send_rx.recv(), if sending && pending.len() < 1 << 20 => match next {
                    Some((bytes, done)) => {
                        queued_total += bytes.len();
                        pending.extend(bytes);
                        waiting.push_back((queued_total, done));
                    }
                    None => sending = false,
                },
                chunk = pipe.recv_chunk() => match chunk {
                    Ok(Some(chunk)) => match flow.on_chunk(&chunk) {
                        Ok(Incoming::Data(data)) => {
                            if recv_tx.send(Ok(data)).is_err() {
                                return;
                            }
                        }
                        Ok(Incoming::Credit) => {}
                        Err(e) => {
                            let e = io::Error::new(io::ErrorKind::InvalidData, e.to_string());
                            fail(&mut waiting, &e);
                            let _ = recv_tx.send(Err(e));
                            return;
                        }
                    },
                    Ok(None) => {
                        let e = io::Error::new(io::ErrorKind::ConnectionAborted, "the BLE peer disconnected");
                        fail(&mut waiting, &e);
                        return;
                    }
                    Err(e) => {
                        fail(&mut waiting, &e);
                        let _ = recv_tx.send(Err(e));
                        return;
                    }
                },
                // The app took chunks: grant their room back.
                () = taken.1.notified() => {
                    flow.taken(taken.0.swap(0, std::sync::atomic::Ordering::Relaxed));
                    if let Some(grant) = flow.grant() {
                        if let Err(e) = pipe.send_chunk(grant).await {
                            fail(&mut waiting, &e);
                            let _ = recv_tx.send(Err(e));
                            return;
                        }
                    }
                }
            }
        }
    });
    Link { tx: Box::new(GattTx(send_tx)), rx: Box::new(GattRx { chunks: recv_rx, taken: app_taken }), name }
}

/// One end of the in-memory GATT double.
pub struct MemoryGatt {
    out: mpsc::Sender<Vec<u8>>,
    inbox: mpsc::Receiver<Vec<u8>>,
    payload: usize,
    dropped: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl MemoryGatt {
    /// Chunks this end sent that the peer's full buffer dropped.
    pub fn dropped(&self) -> std::sync::Arc<std::sync::atomic::AtomicU64> {
        self.dropped.clone()
    }
}

impl GattPipe for MemoryGatt {
    fn send_chunk(&mut self, chunk: Vec<u8>) -> BoxFuture<'_, io::Result<()>> {
        Box::pin(async move {
            if chunk.len() > self.payload {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("a {}-byte chunk exceeds the ATT payload of {}", chunk.len(), self.payload),
                ));
            }
            // Like a write without response: no waiting; a full buffer drops it.
            match self.out.try_send(chunk) {
                Ok(()) => Ok(()),
                Err(mpsc::error::TrySendError::Full(_)) => {
                    self.dropped.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    Ok(())
                }
                Err(mpsc::error::TrySendError::Closed(_)) => {
                    Err(io::Error::new(io::ErrorKind::NotConnected, "the GATT peer disconnected"))
                }
            }
        })
    }

    fn recv_chunk(&mut self) -> BoxFuture<'_, io::Result<Option<Vec<u8>>>> {
        Box::pin(async move { Ok(self.inbox.recv().await) })
    }
}

/// Two connected GATT ends, each able to buffer `buffer` chunks from the
/// other (beyond that, chunks are dropped, as a radio would), with chunks
/// of at most `payload` bytes. A [`gatt_link`] needs room for
/// [`INITIAL_CREDITS`] data chunks plus two credit grants.
pub fn memory_gatt(payload: usize, buffer: usize) -> (MemoryGatt, MemoryGatt) {
    let (a_out, b_in) = mpsc::channel(buffer.max(1));
    let (b_out, a_in) = mpsc::channel(buffer.max(1));
    let dropped = || std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    (
        MemoryGatt { out: a_out, inbox: a_in, payload, dropped: dropped() },
        MemoryGatt { out: b_out, inbox: b_in, payload, dropped: dropped() },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_respect_credits_and_grants_restore_them() {
        let mut a = CreditFlow::new(20, 4);
        let mut b = CreditFlow::new(20, 4);
        let mut pending: VecDeque<u8> = (0..200u8).collect();
        let mut chunks = vec![];
        while let Some(c) = a.next_data_chunk(&mut pending) {
            assert!(c.len() <= 20);
            chunks.push(c);
        }
        assert_eq!(chunks.len(), 4, "only the window's worth goes out");
        assert_eq!(a.credits(), 0);
        let mut got = vec![];
        for c in &chunks {
            match b.on_chunk(c).expect("valid") {
                Incoming::Data(d) => got.extend(d),
                Incoming::Credit => panic!("data expected"),
            }
        }
        assert_eq!(got, (0..76u8).collect::<Vec<_>>());
        assert!(b.grant().is_none(), "received is not taken: no credit back yet");
        b.taken(4);
        let grant = b.grant().expect("half the window taken");
        assert_eq!(a.on_chunk(&grant), Ok(Incoming::Credit));
        assert_eq!(a.credits(), 4);
        assert!(b.grant().is_none(), "nothing new consumed");
    }

    #[test]
    fn malformed_chunks_and_overruns_are_refused() {
        let mut b = CreditFlow::new(20, 2);
        assert_eq!(b.on_chunk(&[]), Err(BleError::Empty));
        assert_eq!(b.on_chunk(&[7, 1]), Err(BleError::UnknownType(7)));
        assert!(matches!(b.on_chunk(&[DATA]), Err(BleError::Malformed(_))));
        assert!(matches!(b.on_chunk(&[CREDIT, 1]), Err(BleError::Malformed(_))));
        assert!(matches!(b.on_chunk(&[DATA; 21]), Err(BleError::TooLong { len: 21, max: 20 })));
        assert!(b.on_chunk(&[DATA, 1]).is_ok());
        assert!(b.on_chunk(&[DATA, 2]).is_ok());
        assert_eq!(b.on_chunk(&[DATA, 3]), Err(BleError::Overrun), "a third chunk on a window of 2");
    }

    #[test]
    fn grants_beyond_the_window_are_refused_and_cannot_overflow() {
        let mut a = CreditFlow::new(20, 4);
        // Nothing spent: any grant is too much.
        assert_eq!(
            a.on_chunk(&[CREDIT, 1, 0]),
            Err(BleError::ExcessCredit { granted: 1, held: 4, window: 4 })
        );
        let mut pending: VecDeque<u8> = (0..40u8).collect();
        a.next_data_chunk(&mut pending).expect("a credit");
        a.next_data_chunk(&mut pending).expect("a credit");
        assert_eq!(a.on_chunk(&[CREDIT, 2, 0]), Ok(Incoming::Credit), "what was spent comes back");
        assert_eq!(a.credits(), 4);
        // A hostile peer granting u16::MAX again and again once counted to overflow.
        for _ in 0..3 {
            assert!(matches!(a.on_chunk(&[CREDIT, 0xff, 0xff]), Err(BleError::ExcessCredit { .. })));
        }
        assert_eq!(a.credits(), 4);
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime")
    }

    #[test]
    fn a_link_over_the_gatt_double_carries_a_megabyte_both_ways_without_drops() {
        runtime().block_on(async {
            // A 244-byte payload (MTU 247) and room for the window plus two grants.
            let (a, b) = memory_gatt(244, INITIAL_CREDITS as usize + 2);
            let (drops_a, drops_b) = (a.dropped(), b.dropped());
            let mut left = gatt_link(a, 244, "a".into());
            let mut right = gatt_link(b, 244, "b".into());
            let data: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
            for forward in [true, false] {
                let (from, to) = if forward { (&mut left, &mut right) } else { (&mut right, &mut left) };
                let send = async {
                    for part in data.chunks(70_000) {
                        from.tx.send(part.to_vec()).await.expect("send");
                    }
                };
                let receive = async {
                    let mut got = vec![];
                    while got.len() < data.len() {
                        got.extend(to.rx.recv().await.expect("recv").expect("open"));
                    }
                    got
                };
                let ((), got) = tokio::join!(send, receive);
                assert!(got == data, "bytes lost, changed or reordered");
            }
            let dropped = drops_a.load(std::sync::atomic::Ordering::Relaxed)
                + drops_b.load(std::sync::atomic::Ordering::Relaxed);
            assert_eq!(dropped, 0, "credits must keep every chunk within the peer's buffer");
        });
    }

    #[test]
    fn a_reader_that_stops_reading_stops_its_sender_within_a_window() {
        runtime().block_on(async {
            let (a, b) = memory_gatt(20, INITIAL_CREDITS as usize + 2);
            let drops = a.dropped();
            let mut sender = gatt_link(a, 20, "a".into());
            let mut reader = gatt_link(b, 20, "b".into());
            // 19 data bytes a chunk: 1,900 bytes need 100 chunks, three windows.
            let data: Vec<u8> = (0..1900u32).map(|i| i as u8).collect();
            let mut send = Box::pin(sender.tx.send(data.clone()));
            // Nobody reads: the send must not complete.
            let stalled = tokio::time::timeout(std::time::Duration::from_millis(300), &mut send).await;
            assert!(stalled.is_err(), "credits were granted for chunks nobody took");
            // Reading resumes: everything arrives, in order, none dropped.
            let mut got = vec![];
            let receive = async {
                while got.len() < data.len() {
                    got.extend(reader.rx.recv().await.expect("recv").expect("open"));
                }
            };
            let (sent, ()) = tokio::join!(send, receive);
            sent.expect("sent");
            assert!(got == data);
            assert_eq!(drops.load(std::sync::atomic::Ordering::Relaxed), 0);
        });
    }

    #[test]
    fn a_malformed_chunk_or_a_disconnect_ends_the_link_with_an_error() {
        runtime().block_on(async {
            let (mut raw, b) = memory_gatt(20, 64);
            let mut link = gatt_link(b, 20, "b".into());
            raw.send_chunk(vec![DATA, 1, 2]).await.expect("send");
            raw.send_chunk(vec![9, 9]).await.expect("send");
            assert_eq!(link.rx.recv().await.expect("data").expect("open"), vec![1, 2]);
            let e = link.rx.recv().await.expect_err("a malformed chunk");
            assert!(e.to_string().contains("unknown type 0x09"), "{e}");

            let (raw, b) = memory_gatt(20, 64);
            let mut link = gatt_link(b, 20, "b".into());
            drop(raw);
            assert!(link.rx.recv().await.expect("no error").is_none(), "a disconnect ends the stream");
            let e = link.tx.send(vec![1; 100]).await.expect_err("nobody to send to");
            assert!(
                matches!(e.kind(), std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionAborted),
                "{e}"
            );
        });
    }
}
