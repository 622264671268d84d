//! A watch app paired with a phone over Bluetooth LE 2M, emulated: the
//! handheld is served in this process over an in-memory link shaped like
//! BLE 2M (1.3 Mbit/s, 10 ms), and the host's compute is slowed down to a
//! watch's. The app sets a latency hint, runs one frame, then a stream.
//!
//! cargo build -q --workspace --bins --examples
//! target/debug/tandem-models gen mnist
//! target/debug/examples/paired_ble models/cache/zoo/mnist.onnx

use std::time::Duration;

use tandem::emulate::{EmulatedTransport, LinkControl, LinkProfile, Schedule};
use tandem::server::{spawn_memory, ServerConfig};
use tandem::{frame, tensor_f32, InputShapes, ModelFile, Session, SessionConfig};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).unwrap_or_else(|| "models/cache/zoo/mnist.onnx".into());
    let model = ModelFile::load(&path, &InputShapes::none())?;

    // The phone: a handheld server in this process that already has the
    // model, as the phone's app would ship it (pushing MNIST's 13 MB over
    // BLE takes 80 s; the session pushes a model the phone lacks).
    let models_dir = std::path::Path::new(&path).parent().map(|d| d.to_path_buf());
    let phone = spawn_memory(ServerConfig { models_dir, ..Default::default() })?;
    let ble = LinkProfile::named("ble-2m")?;
    let control = LinkControl::new(&ble, Schedule::default());
    let link = EmulatedTransport::new(phone, ble, control, 1);

    // On a real watch: SessionConfig::watch_and_phone(). On a host, the
    // emulated watch runs 8x slower than the host (the watch-w5 profile).
    let config = SessionConfig::emulated_watch_and_phone()?.require_handheld(Duration::from_secs(30));
    let mut s = Session::open(model, Box::new(link), config)?;
    println!("status: {}", s.status());
    s.set_latency_hint(Some(Duration::from_millis(100)));

    let image: Vec<f32> = (0..28 * 28).map(|i| (i % 28) as f32 / 28.0).collect();
    s.feed_f32("input", &[1, 1, 28, 28], &image)?;
    let report = s.run()?;
    match &report.local_reason {
        None => println!(
            "offloaded after {} of {} layers: {:.1} ms ({} B up, {} B down)",
            report.prefix_layers, report.layers, report.latency_ms, report.up_bytes, report.down_bytes
        ),
        Some(why) => println!("ran on the watch: {why}"),
    }
    let (_, scores) = s.fetch_f32("output")?;
    println!("scores {:?}", &scores[..3]);

    // A stream: pipelined, in order, one result per frame (a bad frame
    // would get its own error and the others would still run).
    let frames: Vec<_> = (0..10)
        .map(|k| {
            let pixels: Vec<f32> = image.iter().map(|p| (p + k as f32 * 0.1) % 1.0).collect();
            Ok::<_, tandem::Error>(frame([("input", tensor_f32(&[1, 1, 28, 28], &pixels)?)]))
        })
        .collect::<Result<_, _>>()?;
    for result in s.stream(frames)? {
        let f = result?;
        let (_, scores) = f.outputs.f32("output")?;
        let where_ = if f.report.offloaded { "split" } else { "watch" };
        println!(
            "frame {:>2}: {where_}, {:.1} ms, first score {:.4}",
            f.report.frame, f.report.latency_ms, scores[0]
        );
    }
    Ok(())
}
