//! Translates a `.tflite` file to ONNX: `cargo run -p tandem-tflite --example tflite2onnx IN.tflite OUT.onnx`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(input), Some(output)) = (args.get(1), args.get(2)) else {
        return Err("usage: tflite2onnx IN.tflite OUT.onnx".into());
    };
    let onnx = tandem_tflite::translate_to_bytes(&std::fs::read(input)?)?;
    std::fs::write(output, onnx)?;
    Ok(())
}
