//! Links: bytes arrive whole and in order over TCP and in memory, and the
//! emulated link reaches its configured rate and delay (generous bounds
//! here; the exact figures are in `tandem-bench link`).

use std::time::{Duration, Instant};

use tandem::emulate::{wrap, EmulatedTransport, LinkControl, LinkProfile, Role, Schedule};
use tandem::link::{memory_pair, Acceptor, Link, TcpAcceptor, TcpTransport, Transport};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime")
}

/// Reads until `n` bytes arrived; returns them and when the first and last came.
/// The last chunk may hold more than `n`: for one message per link only.
async fn read_n(link: &mut Link, n: usize) -> (Vec<u8>, Instant, Instant) {
    let mut got = Vec::with_capacity(n);
    let mut first = None;
    while got.len() < n {
        let chunk = link.rx.recv().await.expect("recv").expect("not closed early");
        first.get_or_insert_with(Instant::now);
        got.extend_from_slice(&chunk);
    }
    (got, first.unwrap_or_else(Instant::now), Instant::now())
}

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
}

#[test]
fn tcp_and_memory_links_carry_bytes_in_order_and_report_the_close() {
    runtime().block_on(async {
        let mut acceptor = TcpAcceptor::bind("127.0.0.1:0").await.expect("bind");
        let addr = acceptor.local_addr().expect("addr").to_string();
        let client = tokio::spawn(async move { TcpTransport::new(addr).connect().await.expect("connect") });
        let mut server = acceptor.accept().await.expect("accept");
        let mut client = client.await.expect("joined");
        let (mut a, mut b) = memory_pair(4);
        for (what, tx, rx) in [("tcp", &mut client, &mut server), ("memory", &mut a, &mut b)] {
            let data = pattern(3 << 20);
            let sender = {
                let data = data.clone();
                async move {
                    for chunk in data.chunks(100_000) {
                        tx.tx.send(chunk.to_vec()).await.expect("send");
                    }
                    tx.tx.close().await.expect("close");
                }
            };
            let receiver = async {
                let (got, _, _) = read_n(rx, data.len()).await;
                let end = rx.rx.recv().await.expect("recv");
                (got, end)
            };
            let ((), (got, end)) = tokio::join!(sender, receiver);
            assert!(got == data, "{what}: bytes changed or reordered");
            assert_eq!(end, None, "{what}: the close was not seen");
        }
        let e = TcpTransport::new("127.0.0.1:1").connect().await.expect_err("nothing listens on port 1");
        assert!(e.to_string().contains("127.0.0.1:1"), "{e}");
    });
}

#[test]
fn emulated_link_reaches_its_rate_and_delay() {
    let rt = runtime();
    rt.block_on(async {
        // 4 Mbit/s both ways, 20 ms ± 5 ms one way.
        let profile =
            LinkProfile::custom("test", 4e6, Duration::from_millis(20), Duration::from_millis(5), 1000);
        let control = LinkControl::new(&profile, Schedule::default());
        let (ours, mut theirs) = memory_pair(1024);
        let mut ours = wrap(ours, &profile, &control, Role::Wearable, 3).expect("wrap");

        // Delay: small messages one at a time.
        let mut delays = vec![];
        for _ in 0..20 {
            let sent = Instant::now();
            ours.tx.send(vec![1; 10]).await.expect("send");
            let (_, first, _) = read_n(&mut theirs, 10).await;
            delays.push(first.duration_since(sent).as_secs_f64());
        }
        let mean = delays.iter().sum::<f64>() / delays.len() as f64;
        assert!((0.015..0.030).contains(&mean), "mean one-way delay {mean:.4} s, configured 0.020");
        assert!(delays.iter().all(|&d| d >= 0.0149), "a packet beat latency - jitter: {delays:?}");

        // Uplink rate: 400 kB at 4 Mbit/s = 0.8 s on the air.
        let n = 400_000;
        let start = Instant::now();
        let send = async {
            ours.tx.send(pattern(n)).await.expect("send");
        };
        let ((), (got, _, last)) = tokio::join!(send, read_n(&mut theirs, n));
        assert!(got == pattern(n), "bytes changed");
        let rate = n as f64 * 8.0 / (last.duration_since(start).as_secs_f64() - 0.020);
        assert!((0.85 * 4e6..1.15 * 4e6).contains(&rate), "uplink {rate:.0} bit/s, configured 4e6");

        // Downlink: shaped on the way in.
        let start = Instant::now();
        let send = async {
            theirs.tx.send(pattern(n)).await.expect("send");
        };
        let ((), (_, _, last)) = tokio::join!(send, read_n(&mut ours, n));
        let rate = n as f64 * 8.0 / (last.duration_since(start).as_secs_f64() - 0.020);
        assert!((0.85 * 4e6..1.15 * 4e6).contains(&rate), "downlink {rate:.0} bit/s, configured 4e6");
    });
}

#[test]
fn a_schedule_changes_the_rate_during_a_run_and_the_transport_emulates_every_link() {
    let rt = runtime();
    rt.block_on(async {
        let mut acceptor = TcpAcceptor::bind("127.0.0.1:0").await.expect("bind");
        let addr = acceptor.local_addr().expect("addr").to_string();
        let profile = LinkProfile::custom("test", 8e6, Duration::from_millis(5), Duration::ZERO, 1000);
        // After 0.3 s the rate drops to 2 Mbit/s.
        let control = LinkControl::new(&profile, Schedule::parse("0.3 2", "test").expect("schedule"));
        let transport = EmulatedTransport::new(TcpTransport::new(addr), profile, control, 5);
        assert!(transport.describe().contains("emulating test"));
        let client = tokio::spawn(async move { transport.connect().await.expect("connect") });
        let mut server = acceptor.accept().await.expect("accept");
        let mut client = client.await.expect("joined");
        // 300 kB at 8 Mbit/s takes 0.3 s; the next 300 kB at 2 Mbit/s take 1.2 s.
        let n = 300_000;
        let start = Instant::now();
        let send = async {
            client.tx.send(pattern(n)).await.expect("send");
            client.tx.send(pattern(n)).await.expect("send");
        };
        // One chunk may hold the first message's end and the second's
        // start (the delay line merges what is due, TCP coalesces): read
        // both as one stream and note when each was whole. Reading them
        // apart (`read_n` twice) dropped the second's start into the first
        // and waited forever for it (a hung CI run, 2026-12-06).
        let receive = async {
            let (mut got, mut first_done) = (0, None);
            while got < 2 * n {
                let chunk = server.rx.recv().await.expect("recv").expect("not closed early");
                got += chunk.len();
                if got >= n {
                    first_done.get_or_insert_with(Instant::now);
                }
            }
            assert_eq!(got, 2 * n, "more bytes than were sent");
            (first_done.unwrap_or_else(Instant::now), Instant::now())
        };
        let ((), (a, b)) = tokio::join!(send, receive);
        let first = a.duration_since(start).as_secs_f64();
        let second = b.duration_since(a).as_secs_f64();
        assert!((0.2..0.45).contains(&first), "first 300 kB took {first:.3} s, expected ~0.3");
        assert!(
            (0.9..1.6).contains(&second),
            "second 300 kB took {second:.3} s, expected ~1.2 after the step"
        );
    });
}
