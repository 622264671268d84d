//! An emulated Bluetooth or Wi-Fi link around any [`Link`]: this kernel has
//! no netem, so rate, delay and jitter come from code.
//!
//! Each direction is its own [`Shaper`]: bytes are cut into MTU-sized
//! packets; a packet occupies the air for `len × 8 / rate` after the one
//! before it (a token bucket with no burst), then arrives after the one-way
//! delay `latency ± jitter` (uniform), never before the packet ahead of it.
//! A delay line (a thread keeping time, a task delivering) hands each
//! packet to the inner link at its arrival time. A sender waits until its
//! last packet is within 2 ms of being on the air, so a slow link pushes
//! back as a radio would.
//!
//! The side that wraps its link shapes both directions: its own sends at
//! its send rate, and what it receives at the other rate, as if the bytes
//! had crossed the air on their way in. Wrap one side only.
//!
//! Rates can change during a run: [`LinkControl::set_rates`] (the API) or a
//! [`Schedule`] (a file of `seconds up_mbit [down_mbit]` lines).

use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::time::Instant;
use thiserror::Error;
use tokio::sync::mpsc;

use crate::link::{BoxFuture, Link, LinkRx, LinkTx, Transport};

/// A bad link profile or schedule.
#[derive(Debug, Error)]
pub enum LinkError {
    /// No shipped profile has this name.
    #[error("unknown link profile '{0}' (known: {1})")]
    UnknownProfile(String, String),
    /// A schedule line does not parse.
    #[error("schedule {origin} line {line}: {reason}")]
    BadSchedule {
        /// The file or source.
        origin: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// Reading the schedule failed.
    #[error("reading schedule {0}: {1}")]
    Io(String, io::Error),
}

/// A link's nominal characteristics.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LinkProfile {
    /// The profile's name.
    pub name: String,
    /// Wearable → handheld payload rate, bits per second.
    pub up_bps: f64,
    /// Handheld → wearable payload rate, bits per second.
    pub down_bps: f64,
    /// Mean one-way delay.
    pub latency: Duration,
    /// Half-width of the uniform jitter around the latency (at most the latency).
    pub jitter: Duration,
    /// Largest packet payload (bytes).
    pub mtu: usize,
}

/// Profiles shipped by name: `(name, up Mbit/s, down Mbit/s, one-way ms, jitter ms, MTU)`.
/// BLE rates are application throughput (LE 1M ≈ 0.7, LE 2M ≈ 1.3 Mbit/s)
/// with the 244-byte payload of a 251-byte data-length extension PDU.
const PROFILES: &[(&str, f64, f64, f64, f64, usize)] = &[
    ("ble-1m", 0.7, 0.7, 15.0, 5.0, 244),
    ("ble-2m", 1.3, 1.3, 10.0, 4.0, 244),
    ("bt-classic", 2.0, 2.0, 10.0, 3.0, 1021),
    ("wifi-poor", 0.1, 0.1, 40.0, 15.0, 1460),
    ("wifi-good", 5.0, 5.0, 3.0, 1.0, 1460),
    // DeepWear's Bluetooth (Android Wear's Data Layer), fitted to its Fig.
    // 1: a float32 224x224x3 input (602,112 B) crossed in 3.63 s, MNIST's
    // 28x28 (3,136 B) in 71 ms: 1.35 Mbit/s and 52 ms fixed (26 ms each way).
    ("wear-data-layer", 1.35, 1.35, 26.0, 5.0, 1021),
];

impl LinkProfile {
    /// A shipped profile by name.
    pub fn named(name: &str) -> Result<LinkProfile, LinkError> {
        PROFILES
            .iter()
            .find(|p| p.0 == name)
            .map(|&(n, up, down, lat, jit, mtu)| LinkProfile {
                name: n.into(),
                up_bps: up * 1e6,
                down_bps: down * 1e6,
                latency: Duration::from_secs_f64(lat / 1e3),
                jitter: Duration::from_secs_f64(jit / 1e3),
                mtu,
            })
            .ok_or_else(|| LinkError::UnknownProfile(name.into(), Self::names().join(", ")))
    }

    /// What the planner should assume of this link before measuring it:
    /// its nominal rates (bytes per second) and an RTT of twice the latency.
    pub fn nominal_estimate(&self) -> tandem_plan::partition::LinkEstimate {
        tandem_plan::partition::LinkEstimate {
            up_bytes_per_s: self.up_bps / 8.0,
            down_bytes_per_s: self.down_bps / 8.0,
            rtt: self.latency * 2,
        }
    }

    /// The shipped profiles' names.
    pub fn names() -> Vec<&'static str> {
        PROFILES.iter().map(|p| p.0).collect()
    }

    /// A custom profile (same rate both ways).
    pub fn custom(name: &str, bps: f64, latency: Duration, jitter: Duration, mtu: usize) -> LinkProfile {
        LinkProfile { name: name.into(), up_bps: bps, down_bps: bps, latency, jitter, mtu }
    }
}

/// Rate changes over a run: at each offset from the link's start, new up
/// and down rates (bits per second).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Schedule {
    /// `(offset, up_bps, down_bps)`, sorted by offset.
    pub steps: Vec<(Duration, f64, f64)>,
}

/// Fastest rate a schedule may set (Mbit/s): 1 Tbit/s.
pub const MAX_SCHEDULE_MBIT: f64 = 1e6;

impl Schedule {
    /// Parses `seconds up_mbit [down_mbit]` lines (`#` starts a comment).
    pub fn parse(text: &str, origin: &str) -> Result<Schedule, LinkError> {
        let mut steps = vec![];
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let bad = |reason: String| LinkError::BadSchedule { origin: origin.into(), line: i + 1, reason };
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() < 2 || fields.len() > 3 {
                return Err(bad(format!("expected 'seconds up_mbit [down_mbit]', got '{line}'")));
            }
            let num = |s: &str, what: &str| -> Result<f64, LinkError> {
                match s.parse::<f64>() {
                    Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
                    _ => Err(bad(format!("{what} '{s}' is not a non-negative number"))),
                }
            };
            let at = num(fields[0], "time")?;
            let up = num(fields[1], "rate")?;
            let down = if fields.len() == 3 { num(fields[2], "rate")? } else { up };
            if up == 0.0 || down == 0.0 {
                return Err(bad("a rate of 0 would stall the link forever".into()));
            }
            if up > MAX_SCHEDULE_MBIT || down > MAX_SCHEDULE_MBIT {
                return Err(bad(format!("a rate above {MAX_SCHEDULE_MBIT} Mbit/s")));
            }
            // Found by fuzzing: a time too large for a Duration panicked here.
            let at = Duration::try_from_secs_f64(at)
                .map_err(|_| bad(format!("time '{}' is too large", fields[0])))?;
            steps.push((at, up * 1e6, down * 1e6));
        }
        steps.sort_by_key(|s| s.0);
        Ok(Schedule { steps })
    }

    /// Reads a schedule file.
    pub fn from_path(path: &std::path::Path) -> Result<Schedule, LinkError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| LinkError::Io(origin.clone(), e))?;
        Self::parse(&text, &origin)
    }
}

#[derive(Debug)]
struct ControlState {
    up_bps: f64,
    down_bps: f64,
    schedule: Schedule,
    next_step: usize,
    start: Option<Instant>,
}

/// The live rates of an emulated link, shared by its shapers; change them
/// during a run with [`LinkControl::set_rates`] or a [`Schedule`].
#[derive(Clone, Debug)]
pub struct LinkControl(Arc<Mutex<ControlState>>);

impl LinkControl {
    /// Rates from `profile`, then the schedule's steps as their time comes
    /// (counted from the first packet).
    pub fn new(profile: &LinkProfile, schedule: Schedule) -> LinkControl {
        LinkControl(Arc::new(Mutex::new(ControlState {
            up_bps: profile.up_bps,
            down_bps: profile.down_bps,
            schedule,
            next_step: 0,
            start: None,
        })))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ControlState> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sets both rates now (bits per second).
    pub fn set_rates(&self, up_bps: f64, down_bps: f64) {
        let mut s = self.lock();
        s.up_bps = up_bps.max(1.0);
        s.down_bps = down_bps.max(1.0);
    }

    /// Starts the schedule again at `now`: its steps apply as their time
    /// comes, counted from `now` (until the first, the rates in force stay).
    pub fn restart_schedule(&self, now: Instant) {
        let mut s = self.lock();
        s.start = Some(now);
        s.next_step = 0;
    }

    /// The rates in force at `now` (bits per second), applying due schedule steps.
    pub fn rates_at(&self, now: Instant) -> (f64, f64) {
        let mut s = self.lock();
        let start = *s.start.get_or_insert(now);
        while let Some(&(at, up, down)) = s.schedule.steps.get(s.next_step) {
            if now < start + at {
                break;
            }
            s.up_bps = up;
            s.down_bps = down;
            s.next_step += 1;
        }
        (s.up_bps, s.down_bps)
    }
}

/// Which way a shaper carries bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Wearable → handheld.
    Up,
    /// Handheld → wearable.
    Down,
}

/// One direction's timing: when the air is free and when the last packet arrives.
#[derive(Debug)]
pub struct Shaper {
    direction: Direction,
    control: LinkControl,
    latency: f64,
    jitter: f64,
    mtu: usize,
    free_at: Option<Instant>,
    last_arrival: Option<Instant>,
    rng: ChaCha8Rng,
}

impl Shaper {
    /// A shaper for one direction of `profile`.
    pub fn new(profile: &LinkProfile, direction: Direction, control: LinkControl, seed: u64) -> Shaper {
        let latency = profile.latency.as_secs_f64();
        Shaper {
            direction,
            control,
            latency,
            jitter: profile.jitter.as_secs_f64().min(latency),
            mtu: profile.mtu.max(1),
            free_at: None,
            last_arrival: None,
            rng: ChaCha8Rng::seed_from_u64(seed),
        }
    }

    /// Schedules `bytes` entering the link at `now`: the packets with their
    /// arrival times, and when the last one has left (the air is free).
    pub fn schedule(&mut self, bytes: &[u8], now: Instant) -> (Vec<(Instant, Vec<u8>)>, Instant) {
        let mut out = Vec::with_capacity(bytes.len() / self.mtu + 1);
        let mut free = self.free_at.map_or(now, |f| f.max(now));
        for packet in bytes.chunks(self.mtu) {
            let (up, down) = self.control.rates_at(free);
            let bps = if self.direction == Direction::Up { up } else { down };
            free += Duration::from_secs_f64(packet.len() as f64 * 8.0 / bps);
            let delay = if self.jitter > 0.0 {
                self.latency + self.rng.gen_range(-self.jitter..=self.jitter)
            } else {
                self.latency
            };
            let mut arrival = free + Duration::from_secs_f64(delay.max(0.0));
            if let Some(last) = self.last_arrival {
                arrival = arrival.max(last);
            }
            self.last_arrival = Some(arrival);
            out.push((arrival, packet.to_vec()));
        }
        self.free_at = Some(free);
        (out, free)
    }
}

/// Starts a delay line: packets put in the returned channel are handed to
/// `deliver` at their arrival times (those already due are merged). A
/// thread keeps the time, since tokio's timer only has millisecond
/// resolution and the delays are a few milliseconds; a task delivers.
fn spawn_delay_line(
    mut deliver: impl Deliver + 'static,
) -> io::Result<std::sync::mpsc::Sender<(Instant, Vec<u8>)>> {
    let (tx, rx) = std::sync::mpsc::channel::<(Instant, Vec<u8>)>();
    let (due_tx, mut due_rx) = mpsc::unbounded_channel::<Vec<u8>>();
    std::thread::Builder::new().name("tandem-delay-line".into()).spawn(move || {
        let mut next: Option<(Instant, Vec<u8>)> = None;
        loop {
            let (at, mut bytes) = match next.take() {
                Some(p) => p,
                None => match rx.recv() {
                    Ok(p) => p,
                    Err(_) => break,
                },
            };
            let now = Instant::now();
            if at > now {
                std::thread::sleep(at - now);
            }
            while bytes.len() < 256 << 10 {
                match rx.try_recv() {
                    Ok((due, more)) if due <= Instant::now() => bytes.extend_from_slice(&more),
                    Ok(later) => {
                        next = Some(later);
                        break;
                    }
                    Err(_) => break,
                }
            }
            if due_tx.send(bytes).is_err() {
                break;
            }
        }
    })?;
    tokio::spawn(async move {
        while let Some(bytes) = due_rx.recv().await {
            if !deliver.deliver(bytes).await {
                return;
            }
        }
        deliver.finish().await;
    });
    Ok(tx)
}

trait Deliver: Send {
    fn deliver(&mut self, bytes: Vec<u8>) -> BoxFuture<'_, bool>;
    fn finish(&mut self) -> BoxFuture<'_, ()>;
}

struct ToInner {
    tx: Box<dyn LinkTx>,
    failed: Arc<Mutex<Option<String>>>,
}

impl Deliver for ToInner {
    fn deliver(&mut self, bytes: Vec<u8>) -> BoxFuture<'_, bool> {
        Box::pin(async move {
            match self.tx.send(bytes).await {
                Ok(()) => true,
                Err(e) => {
                    *self.failed.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
                    false
                }
            }
        })
    }

    fn finish(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let _ = self.tx.close().await;
        })
    }
}

struct ToReader(mpsc::UnboundedSender<io::Result<Option<Vec<u8>>>>);

impl Deliver for ToReader {
    fn deliver(&mut self, bytes: Vec<u8>) -> BoxFuture<'_, bool> {
        let ok = self.0.send(Ok(Some(bytes))).is_ok();
        Box::pin(async move { ok })
    }

    fn finish(&mut self) -> BoxFuture<'_, ()> {
        let _ = self.0.send(Ok(None));
        Box::pin(async {})
    }
}

struct EmulatedTx {
    shaper: Shaper,
    packets: Option<std::sync::mpsc::Sender<(Instant, Vec<u8>)>>,
    failed: Arc<Mutex<Option<String>>>,
}

impl LinkTx for EmulatedTx {
    fn send(&mut self, bytes: Vec<u8>) -> BoxFuture<'_, io::Result<()>> {
        Box::pin(async move {
            if let Some(e) = self.failed.lock().unwrap_or_else(|p| p.into_inner()).clone() {
                return Err(io::Error::new(io::ErrorKind::BrokenPipe, e));
            }
            let closed = || io::Error::new(io::ErrorKind::BrokenPipe, "the emulated link is closed");
            let packets = self.packets.as_ref().ok_or_else(closed)?;
            let (scheduled, free) = self.shaper.schedule(&bytes, Instant::now());
            for p in scheduled {
                packets.send(p).map_err(|_| closed())?;
            }
            // Push back once the air is booked beyond 2 ms: tokio's timer
            // has millisecond resolution, and waiting out every small send
            // would cap a link at a frame per timer tick.
            let slack = Duration::from_millis(2);
            if free > Instant::now() + slack {
                tokio::time::sleep_until(tokio::time::Instant::from_std(free - slack)).await;
            }
            Ok(())
        })
    }

    fn close(&mut self) -> BoxFuture<'_, io::Result<()>> {
        // The delay line drains what is queued, then closes the inner link.
        self.packets = None;
        Box::pin(async { Ok(()) })
    }
}

/// Most bytes an emulated link's receiving side holds that the app has not
/// taken (on the air or arrived); beyond them it stops reading the inner
/// link, so the inner link's own flow control (TCP's window) holds the sender.
pub const RX_BUFFER_BYTES: usize = 4 << 20;

struct EmulatedRx {
    arrived: mpsc::UnboundedReceiver<io::Result<Option<Vec<u8>>>>,
    /// Room in [`RX_BUFFER_BYTES`], given back as the app takes bytes.
    room: Arc<tokio::sync::Semaphore>,
}

impl LinkRx for EmulatedRx {
    fn recv(&mut self) -> BoxFuture<'_, io::Result<Option<Vec<u8>>>> {
        Box::pin(async move {
            let r = self.arrived.recv().await.unwrap_or(Ok(None));
            if let Ok(Some(bytes)) = &r {
                self.room.add_permits(bytes.len());
            }
            r
        })
    }
}

/// Which side wraps the link: it sends in its own direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Sends up, receives down.
    Wearable,
    /// Sends down, receives up.
    Handheld,
}

/// Wraps `link` in the emulated `profile` (both directions); must be called
/// inside a tokio runtime (it spawns the delay lines' tasks and threads).
pub fn wrap(
    link: Link,
    profile: &LinkProfile,
    control: &LinkControl,
    role: Role,
    seed: u64,
) -> io::Result<Link> {
    let (send_dir, recv_dir) = match role {
        Role::Wearable => (Direction::Up, Direction::Down),
        Role::Handheld => (Direction::Down, Direction::Up),
    };
    let failed = Arc::new(Mutex::new(None));
    let packets = spawn_delay_line(ToInner { tx: link.tx, failed: failed.clone() })?;
    let tx = EmulatedTx {
        shaper: Shaper::new(profile, send_dir, control.clone(), seed),
        packets: Some(packets),
        failed,
    };

    let (out_tx, out_rx) = mpsc::unbounded_channel();
    let in_packets = spawn_delay_line(ToReader(out_tx.clone()))?;
    let mut shaper = Shaper::new(profile, recv_dir, control.clone(), seed ^ 0x9e37_79b9_7f4a_7c15);
    let mut inner_rx = link.rx;
    let room = Arc::new(tokio::sync::Semaphore::new(RX_BUFFER_BYTES));
    let reader_room = room.clone();
    tokio::spawn(async move {
        loop {
            match inner_rx.recv().await {
                Ok(Some(bytes)) => {
                    // Bytes enter the air only with room for them: a reader
                    // that stops taking bytes stops this task reading.
                    for piece in bytes.chunks(RX_BUFFER_BYTES) {
                        match room.acquire_many(piece.len() as u32).await {
                            Ok(permit) => permit.forget(),
                            Err(_) => return,
                        }
                        let (scheduled, _) = shaper.schedule(piece, Instant::now());
                        for p in scheduled {
                            if in_packets.send(p).is_err() {
                                return;
                            }
                        }
                    }
                }
                // End of stream: the delay line closes the reader once drained.
                Ok(None) => return,
                Err(e) => {
                    // Errors skip the delay line: the link is gone.
                    let _ = out_tx.send(Err(e));
                    return;
                }
            }
        }
    });
    Ok(Link {
        tx: Box::new(tx),
        rx: Box::new(EmulatedRx { arrived: out_rx, room: reader_room }),
        name: format!("{} emulating {}", link.name, profile.name),
    })
}

/// Any transport, emulating a link profile on every link it opens (as the wearable).
pub struct EmulatedTransport<T> {
    inner: T,
    profile: LinkProfile,
    control: LinkControl,
    seed: u64,
}

impl<T: Transport> EmulatedTransport<T> {
    /// `inner`'s links, shaped to `profile` with rates from `control`.
    pub fn new(inner: T, profile: LinkProfile, control: LinkControl, seed: u64) -> EmulatedTransport<T> {
        EmulatedTransport { inner, profile, control, seed }
    }

    /// The live rates.
    pub fn control(&self) -> &LinkControl {
        &self.control
    }
}

impl<T: Transport> Transport for EmulatedTransport<T> {
    fn connect(&self) -> BoxFuture<'_, io::Result<Link>> {
        Box::pin(async move {
            let link = self.inner.connect().await?;
            wrap(link, &self.profile, &self.control, Role::Wearable, self.seed)
        })
    }

    fn describe(&self) -> String {
        format!("{} emulating {}", self.inner.describe(), self.profile.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shaper_spaces_packets_by_rate_and_keeps_order() {
        let profile =
            LinkProfile::custom("t", 8e6, Duration::from_millis(10), Duration::from_millis(10), 1000);
        let control = LinkControl::new(&profile, Schedule::default());
        let mut s = Shaper::new(&profile, Direction::Up, control, 1);
        let t0 = Instant::now();
        let (packets, free) = s.schedule(&[0u8; 10_000], t0);
        assert_eq!(packets.len(), 10);
        // 10 kB at 1 MB/s: 10 ms on the air.
        let air = free.duration_since(t0).as_secs_f64();
        assert!((air - 0.010).abs() < 1e-6, "{air}");
        for w in packets.windows(2) {
            assert!(w[0].0 <= w[1].0, "packets reordered");
        }
        let first = packets[0].0.duration_since(t0).as_secs_f64();
        assert!((0.001..=0.021).contains(&first), "{first}");
    }

    #[test]
    fn schedule_parses_and_refuses_bad_lines() {
        let s = Schedule::parse("# t up down\n0 1\n2.5 0.1 0.2\n", "x").expect("parses");
        assert_eq!(s.steps.len(), 2);
        assert_eq!(s.steps[1], (Duration::from_millis(2500), 0.1e6, 0.2e6));
        // The last two were found by fuzzing (a Duration overflow panicked).
        for bad in ["1", "a 1", "1 -2", "1 0", "1 2 3 4", "333333333333333333333333333333 1", "0 1e300"] {
            let e = Schedule::parse(bad, "f").expect_err(bad).to_string();
            assert!(e.contains("f line 1"), "{e}");
        }
        let e = LinkProfile::named("ble-9m").expect_err("unknown").to_string();
        assert!(e.contains("ble-1m"), "{e}");
    }

    #[test]
    fn a_reader_that_stops_reading_holds_the_sender_through_tcp() {
        let rt =
            tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("rt");
        rt.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let addr = listener.local_addr().expect("addr");
            let (client, server) = tokio::join!(tokio::net::TcpStream::connect(addr), listener.accept());
            let mut sender = crate::link::tcp_link(client.expect("connect"));
            let profile = LinkProfile::custom("fast", 8e9, Duration::ZERO, Duration::ZERO, 64 << 10);
            let control = LinkControl::new(&profile, Schedule::default());
            let server = crate::link::tcp_link(server.expect("accept").0);
            let mut reader = wrap(server, &profile, &control, Role::Handheld, 1).expect("wrap");
            // 64 MiB offered; the reader takes nothing for a second.
            let offered = 64usize;
            let sent = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let counter = sent.clone();
            let sending = tokio::spawn(async move {
                for _ in 0..offered {
                    sender.tx.send(vec![7u8; 1 << 20]).await.expect("send");
                    counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            });
            tokio::time::sleep(Duration::from_secs(1)).await;
            // The emulated side's buffer plus the kernel's socket buffers.
            let taken = sent.load(std::sync::atomic::Ordering::Relaxed);
            assert!(taken < 32, "{taken} MiB taken by a reader that reads nothing");
            let mut got = 0usize;
            while got < offered << 20 {
                got += reader.rx.recv().await.expect("recv").expect("open").len();
            }
            sending.await.expect("sender");
            assert_eq!(got, offered << 20);
        });
    }

    #[test]
    fn schedule_steps_apply_in_time() {
        let profile = LinkProfile::named("ble-1m").expect("shipped");
        let control = LinkControl::new(&profile, Schedule::parse("1 0.1\n2 5 4", "t").expect("parses"));
        let t0 = Instant::now();
        assert_eq!(control.rates_at(t0), (0.7e6, 0.7e6));
        assert_eq!(control.rates_at(t0 + Duration::from_millis(1500)), (0.1e6, 0.1e6));
        assert_eq!(control.rates_at(t0 + Duration::from_secs(3)), (5e6, 4e6));
        control.set_rates(1e6, 2e6);
        assert_eq!(control.rates_at(t0 + Duration::from_secs(4)), (1e6, 2e6));
        // Started again later: the steps count from then, the rates before stay until the first.
        let t1 = t0 + Duration::from_secs(10);
        control.restart_schedule(t1);
        assert_eq!(control.rates_at(t1 + Duration::from_millis(500)), (1e6, 2e6));
        assert_eq!(control.rates_at(t1 + Duration::from_millis(1500)), (0.1e6, 0.1e6));
        assert_eq!(control.rates_at(t1 + Duration::from_secs(3)), (5e6, 4e6));
    }
}
