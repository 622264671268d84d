//! `tandem-wearable wakeword`: openWakeWord on the Session API. The mel
//! spectrogram and the keyword heads run on the watch; the speech
//! embedding, the model worth splitting or offloading, streams through a
//! paired, pipelined Session. Prints one JSON line per detection, then a
//! summary line. The clip is heard after 2 s of silence (the windows'
//! past) and before 1 s more; times are from the clip's start.

mod buffer;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use tandem::client::{ModelFile, Session};
use tandem::{frame, tensor_f32, InputShapes};

use crate::apps::{load_with_input_shape, AppPairArgs};

use buffer::{
    detections, head_windows, mel_inputs, resample, MelBuffer, CHUNK, EMBEDDING, MEL_BINS, MEL_INPUT, RATE,
    WINDOW,
};

/// `wakeword`'s arguments.
#[derive(clap::Args, Debug)]
pub struct WakewordArgs {
    /// The speech: a WAV file, mono (or the first channel), any rate (resampled to 16 kHz).
    #[arg(long)]
    pub wav: PathBuf,
    /// openWakeWord's mel spectrogram model (melspectrogram.onnx).
    #[arg(long)]
    pub mel: PathBuf,
    /// openWakeWord's speech embedding model (embedding_model.onnx).
    #[arg(long)]
    pub embedding: PathBuf,
    /// A keyword head (e.g. alexa_v0.1.onnx); repeatable.
    #[arg(long, required = true)]
    pub keyword: Vec<PathBuf>,
    /// Score at or above which a keyword is detected.
    #[arg(long, default_value_t = 0.5)]
    pub threshold: f32,
    /// Where the speech embedding runs.
    #[command(flatten)]
    pub pair: AppPairArgs,
}

/// Reads a WAV file as int16-range floats (what openWakeWord feeds) at 16 kHz.
fn read_wav(path: &Path) -> Result<(Vec<f32>, u32)> {
    let mut r = hound::WavReader::open(path).with_context(|| format!("--wav {}", path.display()))?;
    let spec = r.spec();
    let channels = spec.channels.max(1) as usize;
    let samples: Vec<f32> = match spec.sample_format {
        hound::SampleFormat::Int => {
            let shift = spec.bits_per_sample as i32 - 16;
            r.samples::<i32>()
                .step_by(channels)
                .map(|s| s.map(|v| if shift >= 0 { (v >> shift) as f32 } else { (v << -shift) as f32 }))
                .collect::<Result<_, _>>()
        }
        hound::SampleFormat::Float => {
            r.samples::<f32>().step_by(channels).map(|s| s.map(|v| v * 32767.0)).collect::<Result<_, _>>()
        }
    }
    .with_context(|| format!("--wav {}: bad sample data", path.display()))?;
    Ok((resample(&samples, spec.sample_rate), spec.sample_rate))
}

/// A keyword head, its input's name and its window length (its input is [1, k, 96]).
fn head_window(path: &Path) -> Result<(ModelFile, String, usize)> {
    let m = ModelFile::load(path, &InputShapes::none()).with_context(|| path.display().to_string())?;
    let g = m.model.graph();
    let input = g.tensor(g.inputs()[0]);
    let (name, shape) = (input.name.clone(), input.shape.clone());
    match shape.as_slice() {
        &[1, k, EMBEDDING] => Ok((m, name, k)),
        other => bail!("{}: a keyword head reads [1, k, 96], not {other:?}", path.display()),
    }
}

fn keyword_name(path: &Path) -> String {
    path.file_stem().map(|s| s.to_string_lossy().trim_start_matches("oww_").to_string()).unwrap_or_default()
}

/// Runs every frame of `inputs` through `session` (fed as `name` of
/// `shape`), in order: each frame's first output, and how many frames the
/// handheld answered.
fn run_all(
    session: &mut Session,
    name: &str,
    shape: &[usize],
    inputs: Vec<Vec<f32>>,
) -> Result<(Vec<Vec<f32>>, usize)> {
    let frames = inputs
        .into_iter()
        .map(|x| Ok(frame([(name, tensor_f32(shape, &x)?)])))
        .collect::<Result<Vec<_>, tandem::Error>>()?;
    let (mut out, mut offloaded) = (vec![], 0);
    for r in session.stream(frames)? {
        let f = r?;
        let first = f.outputs.names().first().map(|n| n.to_string()).context("a model without outputs")?;
        out.push(f.outputs.f32(&first)?.1);
        offloaded += usize::from(f.report.offloaded);
    }
    Ok((out, offloaded))
}

/// `tandem-wearable wakeword`.
pub fn wakeword(args: WakewordArgs) -> Result<ExitCode> {
    if !(args.threshold > 0.0 && args.threshold <= 1.0) {
        bail!("--threshold {}: must be in (0, 1]", args.threshold);
    }
    args.pair.check()?;
    let (speech, rate) = read_wav(&args.wav)?;
    let seconds = speech.len() as f64 / RATE as f64;
    // Silence before the clip fills the windows (as a live stream's past
    // would), so that the first word is scored; silence after flushes the last.
    let (lead, tail) = (2 * RATE as usize, RATE as usize);
    let mut audio = vec![0.0; lead];
    audio.extend_from_slice(&speech);
    audio.resize(audio.len() + tail, 0.0);
    let (mel_model, mel_input) = load_with_input_shape(&args.mel, &format!("1,{MEL_INPUT}"))?;
    let (emb_model, emb_input) = load_with_input_shape(&args.embedding, &format!("1,{WINDOW},{MEL_BINS},1"))?;
    let heads = args.keyword.iter().map(|p| head_window(p)).collect::<Result<Vec<_>>>()?;
    let config = args.pair.config()?;
    // 1. Mel frames, on the watch.
    let mut mel = Session::open_local(mel_model, config.clone())?;
    let (mel_out, _) = run_all(&mut mel, &mel_input, &[1, MEL_INPUT], mel_inputs(&audio))?;
    let mut buffer = MelBuffer::default();
    let mut windows = vec![];
    let mut window_chunk = vec![];
    for (chunk, m) in mel_out.iter().enumerate() {
        if let Some(w) = buffer.push(m) {
            windows.push(w);
            window_chunk.push(chunk);
        }
    }
    // 2. Embeddings: split with the handheld when there is one (the planner decides).
    let mut emb = args.pair.open(emb_model, 11)?;
    let status = emb.status().to_string();
    let n_windows = windows.len();
    let (embeddings, offloaded) = run_all(&mut emb, &emb_input, &[1, WINDOW, MEL_BINS, 1], windows)?;
    // 3. Keyword heads, on the watch.
    let mut found = 0;
    let mut best = serde_json::Map::new();
    for ((head_model, input, k), path) in heads.into_iter().zip(&args.keyword) {
        let name = keyword_name(path);
        let mut head = Session::open_local(head_model, config.clone())?;
        let hw = head_windows(&embeddings, k);
        let at: Vec<f64> = hw
            .iter()
            .map(|(last, _)| {
                ((window_chunk[*last] + 1) * CHUNK) as f64 / RATE as f64 - lead as f64 / RATE as f64
            })
            .collect();
        let (scores, _) =
            run_all(&mut head, &input, &[1, k, EMBEDDING], hw.into_iter().map(|(_, w)| w).collect())?;
        let timed: Vec<(f64, f32)> = at.into_iter().zip(scores.iter().map(|s| s[0])).collect();
        best.insert(name.clone(), timed.iter().map(|t| t.1).fold(0.0f32, f32::max).into());
        for (t, score) in detections(&timed, args.threshold, 1.0) {
            found += 1;
            println!(
                "{}",
                serde_json::json!({"t_s": (t * 1000.0).round() / 1000.0, "keyword": name, "score": score})
            );
        }
    }
    println!(
        "{}",
        serde_json::json!({
            "wav": args.wav.display().to_string(), "sample_rate": rate, "seconds": seconds,
            "chunks": mel_out.len(), "embeddings": n_windows, "detections": found,
            "max_score": best, "embedding_status": status, "embeddings_offloaded": offloaded,
        })
    );
    Ok(ExitCode::SUCCESS)
}
