//! The smallest app: run a model on the watch alone and read its output.
//!
//! cargo build -q --workspace --bins --examples
//! target/debug/tandem-models gen mnist
//! target/debug/examples/local models/cache/zoo/mnist.onnx

use tandem::{InputShapes, ModelFile, Session, SessionConfig};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).unwrap_or_else(|| "models/cache/zoo/mnist.onnx".into());
    let model = ModelFile::load(&path, &InputShapes::none())?;
    let mut s = Session::open_local(model, SessionConfig::watch_and_phone()?)?;

    // MNIST reads one 28x28 grey image, "input" [1, 1, 28, 28].
    let image: Vec<f32> = (0..28 * 28).map(|i| (i % 28) as f32 / 28.0).collect();
    s.feed_f32("input", &[1, 1, 28, 28], &image)?;
    let report = s.run()?;
    let (shape, scores) = s.fetch_f32("output")?;

    let best = scores.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map(|(i, _)| i);
    println!("output {shape:?}: class {best:?}");
    println!("ran here because: {}", report.local_reason.as_deref().unwrap_or("-"));
    println!("{:.2} ms on the watch", report.wearable_ms);
    Ok(())
}
