//! Links between the wearable and the handheld: ordered, reliable byte
//! streams, each split into a sending and a receiving half.
//!
//! - [`Transport`]: how the wearable opens a link (again, after a drop);
//!   [`Acceptor`]: how the handheld takes them.
//! - [`TcpTransport`] / [`TcpAcceptor`]: TCP with tokio.
//! - [`memory_pair`], [`MemoryTransport`] / [`MemoryAcceptor`]: in-memory,
//!   for tests and doc examples.
//! - [`crate::emulate`]: an emulated Bluetooth or Wi-Fi link wrapping any of
//!   these (rate, delay, jitter, MTU packets).
//!
//! Framing is not the link's business: the receiver feeds whatever bytes
//! arrive to a [`tandem_proto::protocol::FrameDecoder`].

use std::future::Future;
use std::io;
use std::pin::Pin;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// A boxed, sendable future (the link traits are object-safe).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The sending half of a link.
pub trait LinkTx: Send {
    /// Sends these bytes, in order after everything sent before; returns
    /// once the link has taken them (an emulated link: once they are on the air).
    fn send(&mut self, bytes: Vec<u8>) -> BoxFuture<'_, io::Result<()>>;
    /// Closes the sending direction after everything sent so far.
    fn close(&mut self) -> BoxFuture<'_, io::Result<()>>;
}

/// The receiving half of a link.
pub trait LinkRx: Send {
    /// The next bytes that arrived (any amount), or `None` at end of stream.
    fn recv(&mut self) -> BoxFuture<'_, io::Result<Option<Vec<u8>>>>;
}

/// One open link.
pub struct Link {
    /// Sending half.
    pub tx: Box<dyn LinkTx>,
    /// Receiving half.
    pub rx: Box<dyn LinkRx>,
    /// A description for logs (`tcp 127.0.0.1:7000`, `memory`, ...).
    pub name: String,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link").field("name", &self.name).finish()
    }
}

/// How the wearable opens a link to its handheld; called again to reconnect.
pub trait Transport: Send + Sync {
    /// Opens a new link.
    fn connect(&self) -> BoxFuture<'_, io::Result<Link>>;
    /// A description for logs and reports.
    fn describe(&self) -> String;
}

/// `link`, and a flag set once its first bytes arrive: a handheld gives
/// way first to handshakes whose peer has said nothing yet.
pub fn watch_first_bytes(link: Link) -> (Link, std::sync::Arc<std::sync::atomic::AtomicBool>) {
    let heard = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let rx = Box::new(HeardRx { inner: link.rx, heard: heard.clone() });
    (Link { tx: link.tx, rx, name: link.name }, heard)
}

struct HeardRx {
    inner: Box<dyn LinkRx>,
    heard: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl LinkRx for HeardRx {
    fn recv(&mut self) -> BoxFuture<'_, io::Result<Option<Vec<u8>>>> {
        Box::pin(async move {
            let r = self.inner.recv().await;
            if matches!(&r, Ok(Some(b)) if !b.is_empty()) {
                self.heard.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            r
        })
    }
}

/// How the handheld takes links from wearables.
pub trait Acceptor: Send {
    /// The next link.
    fn accept(&mut self) -> BoxFuture<'_, io::Result<Link>>;
    /// A description (the address listened on).
    fn describe(&self) -> String;
}

struct TcpTx(OwnedWriteHalf);

impl LinkTx for TcpTx {
    fn send(&mut self, bytes: Vec<u8>) -> BoxFuture<'_, io::Result<()>> {
        Box::pin(async move { self.0.write_all(&bytes).await })
    }

    fn close(&mut self) -> BoxFuture<'_, io::Result<()>> {
        Box::pin(async move { self.0.shutdown().await })
    }
}

struct TcpRx {
    half: OwnedReadHalf,
}

/// Most bytes one `recv` reads from a socket.
const TCP_READ: usize = 256 << 10;

impl LinkRx for TcpRx {
    fn recv(&mut self) -> BoxFuture<'_, io::Result<Option<Vec<u8>>>> {
        Box::pin(async move {
            // Read into the buffer handed out: no copy.
            let mut buf = Vec::with_capacity(TCP_READ);
            let n = self.half.read_buf(&mut buf).await?;
            Ok((n > 0).then_some(buf))
        })
    }
}

/// A link over a connected TCP stream (Nagle off: frames go out at once).
pub fn tcp_link(stream: TcpStream) -> Link {
    let _ = stream.set_nodelay(true);
    let name = match stream.peer_addr() {
        Ok(a) => format!("tcp {a}"),
        Err(_) => "tcp".into(),
    };
    let (r, w) = stream.into_split();
    Link { tx: Box::new(TcpTx(w)), rx: Box::new(TcpRx { half: r }), name }
}

/// TCP to a handheld at `addr` (`host:port`).
#[derive(Clone, Debug)]
pub struct TcpTransport {
    addr: String,
}

impl TcpTransport {
    /// A transport connecting to `addr`.
    pub fn new(addr: impl Into<String>) -> TcpTransport {
        TcpTransport { addr: addr.into() }
    }
}

impl Transport for TcpTransport {
    fn connect(&self) -> BoxFuture<'_, io::Result<Link>> {
        Box::pin(async move {
            let stream = TcpStream::connect(&self.addr)
                .await
                .map_err(|e| io::Error::new(e.kind(), format!("connecting to {}: {e}", self.addr)))?;
            Ok(tcp_link(stream))
        })
    }

    fn describe(&self) -> String {
        format!("tcp {}", self.addr)
    }
}

/// A TCP listener.
#[derive(Debug)]
pub struct TcpAcceptor {
    listener: TcpListener,
}

impl TcpAcceptor {
    /// Listens on `addr` (`127.0.0.1:0` picks a free port).
    pub async fn bind(addr: &str) -> io::Result<TcpAcceptor> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|e| io::Error::new(e.kind(), format!("listening on {addr}: {e}")))?;
        Ok(TcpAcceptor { listener })
    }

    /// The address bound.
    pub fn local_addr(&self) -> io::Result<std::net::SocketAddr> {
        self.listener.local_addr()
    }
}

impl Acceptor for TcpAcceptor {
    fn accept(&mut self) -> BoxFuture<'_, io::Result<Link>> {
        Box::pin(async move {
            let (stream, _) = self.listener.accept().await?;
            Ok(tcp_link(stream))
        })
    }

    fn describe(&self) -> String {
        match self.listener.local_addr() {
            Ok(a) => format!("tcp {a}"),
            Err(_) => "tcp".into(),
        }
    }
}

struct MemoryTx(Option<mpsc::Sender<Vec<u8>>>);

impl LinkTx for MemoryTx {
    fn send(&mut self, bytes: Vec<u8>) -> BoxFuture<'_, io::Result<()>> {
        Box::pin(async move {
            let closed = || io::Error::new(io::ErrorKind::BrokenPipe, "the in-memory link is closed");
            let tx = self.0.as_ref().ok_or_else(closed)?;
            tx.send(bytes).await.map_err(|_| closed())
        })
    }

    fn close(&mut self) -> BoxFuture<'_, io::Result<()>> {
        self.0 = None;
        Box::pin(async { Ok(()) })
    }
}

struct MemoryRx(mpsc::Receiver<Vec<u8>>);

impl LinkRx for MemoryRx {
    fn recv(&mut self) -> BoxFuture<'_, io::Result<Option<Vec<u8>>>> {
        Box::pin(async move { Ok(self.0.recv().await) })
    }
}

/// Two connected in-memory link ends; each direction holds up to
/// `capacity` sends before a sender waits.
pub fn memory_pair(capacity: usize) -> (Link, Link) {
    let (a_tx, a_rx) = mpsc::channel(capacity.max(1));
    let (b_tx, b_rx) = mpsc::channel(capacity.max(1));
    (
        Link { tx: Box::new(MemoryTx(Some(a_tx))), rx: Box::new(MemoryRx(b_rx)), name: "memory".into() },
        Link { tx: Box::new(MemoryTx(Some(b_tx))), rx: Box::new(MemoryRx(a_rx)), name: "memory".into() },
    )
}

/// The wearable's end of in-memory links: each `connect` makes a new pair
/// and hands the other end to the paired [`MemoryAcceptor`].
#[derive(Clone, Debug)]
pub struct MemoryTransport {
    server: mpsc::UnboundedSender<Link>,
}

/// The handheld's end of in-memory links.
#[derive(Debug)]
pub struct MemoryAcceptor {
    links: mpsc::UnboundedReceiver<Link>,
}

/// A connected in-memory transport and acceptor.
pub fn memory_transport() -> (MemoryTransport, MemoryAcceptor) {
    let (server, links) = mpsc::unbounded_channel();
    (MemoryTransport { server }, MemoryAcceptor { links })
}

impl Transport for MemoryTransport {
    fn connect(&self) -> BoxFuture<'_, io::Result<Link>> {
        Box::pin(async move {
            let (ours, theirs) = memory_pair(64);
            self.server.send(theirs).map_err(|_| {
                io::Error::new(io::ErrorKind::ConnectionRefused, "the in-memory handheld is gone")
            })?;
            Ok(ours)
        })
    }

    fn describe(&self) -> String {
        "memory".into()
    }
}

impl Acceptor for MemoryAcceptor {
    fn accept(&mut self) -> BoxFuture<'_, io::Result<Link>> {
        Box::pin(async move {
            self.links.recv().await.ok_or_else(|| {
                io::Error::new(io::ErrorKind::NotConnected, "every in-memory transport was dropped")
            })
        })
    }

    fn describe(&self) -> String {
        "memory".into()
    }
}

impl Acceptor for Box<dyn Acceptor> {
    fn accept(&mut self) -> BoxFuture<'_, io::Result<Link>> {
        (**self).accept()
    }

    fn describe(&self) -> String {
        (**self).describe()
    }
}
