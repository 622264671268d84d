//! The paired runtime's benchmarks: link throughput, emulated-link
//! accuracy, and pipelined streams against the ideal and against sequential.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use serde_json::json;
use tandem::client::{FrameReport, ModelFile, Placement, Session, SessionConfig, StreamReport};
use tandem::emulate::{wrap, EmulatedTransport, LinkControl, LinkProfile, Role, Schedule};
use tandem::link::{memory_pair, Acceptor, Link, TcpAcceptor, TcpTransport, Transport};
use tandem::protocol::{encode, FrameDecoder, Header, Message};
use tandem::{InputShapes, Tensor};

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?)
}

/// The paths `loopback` measures.
#[derive(Clone, Copy, PartialEq)]
enum LoopPath {
    Raw,
    Protocol,
    Encrypted,
}

impl LoopPath {
    fn name(self) -> &'static str {
        match self {
            LoopPath::Raw => "raw TCP bytes",
            LoopPath::Protocol => "protocol (encode + TCP + decode + tensor)",
            LoopPath::Encrypted => "encrypted protocol (encode + seal + TCP + open + decode + tensor)",
        }
    }

    /// The goal, as a share of raw TCP's rate in the same run.
    fn goal(self) -> Option<f64> {
        match self {
            LoopPath::Raw => None,
            LoopPath::Protocol => Some(0.9),
            LoopPath::Encrypted => Some(0.6),
        }
    }
}

/// A connected pair of loopback TCP links; encrypted (a Noise session
/// between two fresh keystores in `keys`) when asked.
async fn loopback_pair(encrypted: bool, keys: &std::path::Path) -> anyhow::Result<(Link, Link)> {
    let mut acceptor = TcpAcceptor::bind("127.0.0.1:0").await?;
    let addr = acceptor.local_addr()?.to_string();
    let client = tokio::spawn(async move { TcpTransport::new(addr).connect().await });
    let server = acceptor.accept().await?;
    let client = client.await??;
    if !encrypted {
        return Ok((client, server));
    }
    use tandem::secure::{Accepted, Keystore, Policy};
    let handheld = Keystore::open_or_create(&keys.join("handheld"))?;
    let wearable = Keystore::open_or_create(&keys.join("wearable"))?;
    handheld.add_peer(&wearable.keys().public, "bench")?;
    let (own, theirs) = (wearable.keys().clone(), handheld.keys().public);
    let policy = Policy { keystore: Some(std::sync::Arc::new(handheld)), allow_plain: false };
    let client = tokio::spawn(async move { tandem::secure::connect(client, &own, &theirs).await });
    let server = match tandem::secure::accept(server, &policy).await? {
        Accepted::Secure(link, _) => link,
        Accepted::Plain(_) => anyhow::bail!("the bench's link was accepted plain"),
    };
    Ok((client.await??, server))
}

/// Loopback TCP throughput for 1 MB tensors, three ways side by side in
/// rounds: raw bytes, the protocol path (encode, send, decode, rebuild the
/// tensor) and the same encrypted; each path's median over the rounds and
/// its share of raw TCP's.
pub fn loopback(messages: usize) -> anyhow::Result<()> {
    let rt = runtime()?;
    let keys = std::env::temp_dir().join(format!("tandem-bench-loopback-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&keys);
    let paths = [LoopPath::Raw, LoopPath::Protocol, LoopPath::Encrypted];
    let rounds = 5;
    let mut rates: Vec<Vec<f64>> = vec![vec![]; paths.len()];
    let message_bytes = rt.block_on(async {
        // The sending halves (wearable) and receiving halves (handheld), plain and encrypted.
        let (plain_c, plain_s) = loopback_pair(false, &keys).await?;
        let (sec_c, sec_s) = loopback_pair(true, &keys).await?;
        let mut senders = [Some(plain_c.tx), Some(sec_c.tx)];
        let mut receivers = [plain_s.rx, sec_s.rx];
        let tensor = Tensor::from_shape(&[1, 256, 32, 32], &vec![0.5f32; 256 * 32 * 32])?;
        let message = std::sync::Arc::new(Message::with_tensors(
            |tensors| Header::RunSuffix {
                frame: 1,
                cut: "0".into(),
                tensors,
                answer: vec![],
                edge: None,
                engine: None,
            },
            &[("t".to_string(), tandem::wire::to_wire(&tensor)?)],
        )?);
        let frame = std::sync::Arc::new(encode(&message)?);
        for round in 0..=rounds {
            for (i, &path) in paths.iter().enumerate() {
                let link = usize::from(path == LoopPath::Encrypted);
                // Round 0 warms up (a tenth of the batch).
                let count = if round == 0 { messages / 10 + 1 } else { messages };
                let started = Instant::now();
                // The sender on a task of its own: it runs beside the receiver, as two processes would.
                let mut tx = senders[link].take().context("the sender")?;
                let (message, frame_bytes) = (message.clone(), frame.clone());
                let send = tokio::spawn(async move {
                    for _ in 0..count {
                        let bytes =
                            if path == LoopPath::Raw { frame_bytes.to_vec() } else { encode(&message)? };
                        tx.send(bytes).await?;
                    }
                    anyhow::Ok(tx)
                });
                let rx = &mut receivers[link];
                let mut decoder = FrameDecoder::new(64 << 20);
                let (mut got, mut bytes) = (0, 0usize);
                while got < count {
                    let chunk = rx.recv().await?.context("closed early")?;
                    bytes += chunk.len();
                    if path == LoopPath::Raw {
                        got = bytes / frame.len();
                    } else {
                        let (decoded, failed) = decoder.push_and_decode(&chunk);
                        if let Some(e) = failed {
                            return Err(e.into());
                        }
                        for m in decoded {
                            // As the runtime receives it: decoded, then a tract tensor.
                            let (_, t) = m.tensors()?.into_iter().next().context("no tensor")?;
                            let t = tandem::wire::from_wire(t)?;
                            anyhow::ensure!(t.len() == 256 * 32 * 32, "wrong tensor");
                            got += 1;
                        }
                    }
                }
                senders[link] = Some(send.await??);
                if round > 0 {
                    rates[i].push((count * frame.len()) as f64 / started.elapsed().as_secs_f64() / 1e9);
                }
            }
        }
        anyhow::Ok(frame.len())
    })?;
    let _ = std::fs::remove_dir_all(&keys);
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let raw = median(&rates[0]);
    for (i, path) in paths.iter().enumerate() {
        let gbps = median(&rates[i]);
        println!(
            "{}",
            json!({
                "bench": "loopback",
                "path": path.name(),
                "message_bytes": message_bytes,
                "messages": messages,
                "rounds": rounds,
                "gb_per_s": gbps,
                "gb_per_s_rounds": rates[i],
                "ratio_to_raw_tcp": gbps / raw,
                "goal_ratio": path.goal(),
            })
        );
    }
    Ok(())
}

async fn read_n(link: &mut Link, n: usize) -> anyhow::Result<Instant> {
    let mut got = 0;
    while got < n {
        got += link.rx.recv().await?.context("closed early")?.len();
    }
    Ok(Instant::now())
}

/// Each named profile's achieved rate (both ways) and one-way delay, against the configured ones.
pub fn emulation(seconds: f64) -> anyhow::Result<()> {
    let rt = runtime()?;
    rt.block_on(async {
        for name in LinkProfile::names() {
            let profile = LinkProfile::named(name)?;
            let control = LinkControl::new(&profile, Schedule::default());
            let (ours, mut theirs) = memory_pair(4096);
            let mut ours = wrap(ours, &profile, &control, Role::Wearable, 11)?;
            let lat = profile.latency.as_secs_f64();
            // Delay: small messages, one at a time (100: the jitter averages out).
            let mut delays = vec![];
            for _ in 0..100 {
                let sent = Instant::now();
                ours.tx.send(vec![0; 8]).await?;
                delays.push(read_n(&mut theirs, 8).await?.duration_since(sent).as_secs_f64());
            }
            let delay = delays.iter().sum::<f64>() / delays.len() as f64;
            // Rates: `seconds` worth of bytes each way.
            let mut rates = vec![];
            for (bps, up) in [(profile.up_bps, true), (profile.down_bps, false)] {
                let n = (bps / 8.0 * seconds) as usize;
                let started = Instant::now();
                let (sender, receiver) = if up { (&mut ours, &mut theirs) } else { (&mut theirs, &mut ours) };
                let send = async { sender.tx.send(vec![1; n]).await };
                let (s, r) = tokio::join!(send, read_n(receiver, n));
                s?;
                let secs = r?.duration_since(started).as_secs_f64() - lat;
                rates.push(n as f64 * 8.0 / secs);
            }
            println!(
                "{}",
                json!({
                    "bench": "emulation",
                    "profile": name,
                    "up_configured_bps": profile.up_bps,
                    "up_achieved_bps": rates[0],
                    "up_ratio": rates[0] / profile.up_bps,
                    "down_configured_bps": profile.down_bps,
                    "down_achieved_bps": rates[1],
                    "down_ratio": rates[1] / profile.down_bps,
                    "delay_configured_ms": lat * 1e3,
                    "delay_mean_ms": delay * 1e3,
                    "delay_ratio": delay / lat,
                    "goal": "within 5%",
                })
            );
        }
        anyhow::Ok(())
    })
}

fn mean(frames: &[FrameReport], f: impl Fn(&FrameReport) -> f64) -> f64 {
    frames.iter().map(f).sum::<f64>() / frames.len().max(1) as f64
}

/// Frames per second between the first and the last delivery: the steady
/// rate of a pipeline, without its fill (the first frame's whole latency,
/// which a 30-frame run would otherwise spread over every frame).
fn steady_fps(delivered: &[Instant]) -> f64 {
    match (delivered.first(), delivered.last()) {
        (Some(first), Some(last)) if delivered.len() > 1 => {
            (delivered.len() - 1) as f64 / last.duration_since(*first).as_secs_f64().max(1e-9)
        }
        _ => 0.0,
    }
}

/// How many frames ran on the watch for each reason, numbers in a reason
/// written `#` (so that a planner's predictions group).
fn local_reasons(frames: &[FrameReport]) -> BTreeMap<String, usize> {
    let mut by = BTreeMap::new();
    for why in frames.iter().filter_map(|f| f.local_reason.as_deref()) {
        let mut key = String::new();
        for c in why.chars() {
            let number = key.ends_with('#');
            match c {
                '0'..='9' if number => {}
                '0'..='9' => key.push('#'),
                '.' if number => {}
                c => key.push(c),
            }
        }
        *by.entry(key).or_insert(0) += 1;
    }
    by
}

/// One stream: its frames, their summary, its cut, the steady rate, and
/// how many cores' worth of CPU the process (both devices, in-process)
/// used while it ran.
struct StreamRun {
    frames: Vec<FrameReport>,
    summary: StreamReport,
    cut: Option<tandem::Cut>,
    steady_fps: f64,
    cores_busy: f64,
}

fn run_stream(
    model: &ModelFile,
    transport: Box<dyn Transport>,
    mut config: SessionConfig,
    pipeline: bool,
    frames: usize,
) -> anyhow::Result<StreamRun> {
    config.pipeline = pipeline;
    let mut s = Session::open(model.clone(), transport, config)?;
    anyhow::ensure!(s.is_ready(), "the in-process handheld did not become ready");
    let inputs: Vec<_> = (0..frames as u64)
        .map(|i| tandem::check::random_inputs(&model.model, i))
        .collect::<Result<_, _>>()?;
    // Two warm-up frames build the plans.
    s.stream(inputs[..2].to_vec())?;
    let mut reports = vec![];
    let mut delivered = vec![];
    let started = Instant::now();
    let cpu = tandem::device_clock::process_cpu_time();
    let mut failed = None;
    s.stream_with(inputs, None, |r| {
        delivered.push(Instant::now());
        match r {
            Ok(f) => reports.push(f.report),
            Err(e) => failed = Some(e),
        }
    })?;
    if let Some(e) = failed {
        return Err(e.into());
    }
    let cores_busy = tandem::device_clock::process_cpu_time().saturating_sub(cpu).as_secs_f64()
        / started.elapsed().as_secs_f64().max(1e-9);
    let summary = StreamReport::from_frames(&reports, started.elapsed());
    let cut = s.decision().map(|d| d.chosen.clone());
    Ok(StreamRun { frames: reports, summary, cut, steady_fps: steady_fps(&delivered), cores_busy })
}

/// One pipelined run and its stages as measured in it (ms): the watch,
/// up, the phone, down; and the crossing tensors alone on the air (up,
/// down).
struct Piped {
    run: StreamRun,
    stages: [f64; 4],
    tensors_air: [f64; 2],
}

impl Piped {
    fn of(run: StreamRun, link: &str, profile: &LinkProfile) -> Piped {
        let frames = &run.frames;
        // Time on the air each way: each frame's request and answer whole
        // (headers included), over the link's rates (none for the
        // unshaped in-memory link).
        let air = |bytes: f64, bps: f64| if link == "none" { 0.0 } else { bytes * 8.0 / bps * 1e3 };
        let stages = [
            mean(frames, |f| f.wearable_ms),
            air(mean(frames, |f| f.up_message_bytes as f64), profile.up_bps),
            mean(frames, |f| f.handheld_ms),
            air(mean(frames, |f| f.down_message_bytes as f64), profile.down_bps),
        ];
        let tensors_air = [
            air(mean(frames, |f| f.up_bytes as f64), profile.up_bps),
            air(mean(frames, |f| f.down_bytes as f64), profile.down_bps),
        ];
        Piped { run, stages, tensors_air }
    }

    /// The steady rate over the ideal, 1 / the slowest stage.
    fn steady_over_ideal(&self) -> f64 {
        let slowest = self.stages.iter().copied().fold(0.0, f64::max);
        self.run.steady_fps * slowest / 1e3
    }
}

/// How `pipeline` runs each model.
pub struct PipelineRuns {
    /// Frames per run.
    pub frames: usize,
    /// Most frames in flight.
    pub max_in_flight: usize,
    /// Pipelined runs per model (the row is the median run's).
    pub repeats: usize,
    /// The cut to run at (its key), instead of the planner's stream choice.
    pub cut: Option<String>,
}

/// Pipelined vs sequential vs the ideal 1 / max(stage), per model, with an
/// in-process handheld over an emulated link.
pub fn pipeline(models: Vec<PathBuf>, link: &str, dilation: f64, runs: PipelineRuns) -> anyhow::Result<()> {
    let PipelineRuns { frames, max_in_flight, repeats, cut: pinned } = runs;
    let models = if models.is_empty() {
        tandem_models::ensure_models()?.zoo.iter().map(|e| e.path.clone()).collect()
    } else {
        models
    };
    // `none`: the in-memory link unshaped (stages are compute only).
    let profile = match link {
        "none" => {
            LinkProfile::custom("none", 8e9, std::time::Duration::ZERO, std::time::Duration::ZERO, 1 << 20)
        }
        name => LinkProfile::named(name)?,
    };
    for path in models {
        let model = ModelFile::load(&path, &InputShapes::none())?;
        // The handheld has the model (a push over an emulated BLE link would take minutes).
        let server = tandem::server::spawn_memory(tandem::server::ServerConfig {
            models_dir: path.parent().map(|p| p.to_path_buf()),
            ..Default::default()
        })?;
        let transport = || -> Box<dyn Transport> {
            if link == "none" {
                return Box::new(server.clone());
            }
            let control = LinkControl::new(&profile, Schedule::default());
            Box::new(EmulatedTransport::new(server.clone(), profile.clone(), control, 3))
        };
        let mut config = SessionConfig::watch_and_phone()?;
        config.dilation = dilation;
        config.max_in_flight = max_in_flight.max(1);
        config.link_default = profile.nominal_estimate();
        // The planner's stream choice (or the cut asked for), then that
        // cut fixed for both runs.
        let cut = match &pinned {
            Some(key) => tandem::Cut::from_key(model.model.graph(), key)
                .with_context(|| format!("--cut {key} for {}", path.display()))?,
            None => run_stream(&model, transport(), config.clone(), true, 4)?.cut.context("no decision")?,
        };
        config.placement = Placement::Fixed(cut.clone());
        let seq = run_stream(&model, transport(), config.clone(), false, frames)?;
        // The pipelined runs, each with its stages and ideal; the median
        // run by steady / ideal is the row.
        let mut runs = (0..repeats.max(1))
            .map(|_| {
                Ok(Piped::of(run_stream(&model, transport(), config.clone(), true, frames)?, link, &profile))
            })
            .collect::<anyhow::Result<Vec<Piped>>>()?;
        let every_run: Vec<f64> = runs.iter().map(Piped::steady_over_ideal).collect();
        runs.sort_by(|a, b| a.steady_over_ideal().total_cmp(&b.steady_over_ideal()));
        let median = runs.len() / 2;
        let Piped { run: pipe, stages: [w, up, h, down], tensors_air: [tensors_up, tensors_down] } =
            runs.swap_remove(median);
        let pipe_frames = &pipe.frames;
        let ideal_fps = 1e3 / w.max(h).max(up).max(down);
        println!(
            "{}",
            json!({
                "bench": "pipeline",
                "model": model.model.name(),
                "link": link,
                "wearable_dilation": dilation,
                "cut_prefix_layers": cut.prefix_len(),
                "cut_key": cut.key().to_string(),
                "cut_pinned": pinned.is_some(),
                "layers": model.model.graph().nodes().len(),
                "stage_ms": {"wearable": w, "up": up, "handheld": h, "down": down},
                // The tensors alone on the air (what the stages were before
                // whole messages were counted).
                "tensors_air_ms": {"up": tensors_up, "down": tensors_down},
                "frames": frames,
                // Whole run: frames / (first start → last delivery), fill included.
                "sequential_fps": seq.summary.throughput_fps,
                "pipelined_fps": pipe.summary.throughput_fps,
                // Steady: between the first and the last delivery.
                "sequential_steady_fps": seq.steady_fps,
                "pipelined_steady_fps": pipe.steady_fps,
                "ideal_fps": ideal_fps,
                "pipelined_over_ideal": pipe.summary.throughput_fps / ideal_fps,
                "steady_over_ideal": pipe.steady_fps / ideal_fps,
                // Every pipelined run's, in the order run.
                "steady_over_ideal_runs": every_run,
                "pipelined_over_sequential": pipe.summary.throughput_fps / seq.summary.throughput_fps,
                "offloaded": pipe.summary.offloaded,
                // Why the others ran on the watch, and how many of them
                // were offloaded first (their prefix run twice).
                "local_reasons": local_reasons(pipe_frames),
                "fallbacks": pipe.summary.fallbacks,
                // Both devices share this host's cores: CPU time of the
                // whole process over the pipelined run's wall time.
                "pipelined_cores_busy": pipe.cores_busy,
                "host_cores": std::thread::available_parallelism().map_or(0, |n| n.get()),
                "max_in_flight": max_in_flight,
                "goal_over_ideal": 0.95,
            })
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reasons group with their numbers blanked; offloaded frames have none.
    #[test]
    fn local_reasons_group_by_text_with_numbers_blanked() {
        let frame =
            |why: Option<&str>| FrameReport { local_reason: why.map(String::from), ..Default::default() };
        let frames = [
            frame(Some("the planner: every layer here, predicted 1.52 ms (x)")),
            frame(Some("the planner: every layer here, predicted 13 ms (x)")),
            frame(Some("fallback: no answer within 40 ms.")),
            frame(None),
        ];
        let by = local_reasons(&frames);
        assert_eq!(by.get("the planner: every layer here, predicted # ms (x)"), Some(&2));
        assert_eq!(by.get("fallback: no answer within # ms."), Some(&1));
        assert_eq!(by.values().sum::<usize>(), 3);
    }
}
