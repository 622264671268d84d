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
use tandem::client::{ModelFile, Session, StreamReport};
use tandem::{frame, tensor_f32, InputShapes};

use crate::apps::{load_with_input_shape, AppPairArgs};

use buffer::{detections, head_windows, mel_inputs, resample, Feeding, MelBuffer, EMBEDDING};
use tandem::card::ModelCard;

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
    /// Score at or above which a keyword is detected (default: each head's
    /// card's threshold, else 0.5).
    #[arg(long)]
    pub threshold: Option<f32>,
    /// Where the models' cards are (`DIR/<model file stem>.toml`); a card
    /// beside a model (`X.toml` for `X.onnx`) comes first. Without cards,
    /// openWakeWord's own feeding (16 kHz, 80 ms chunks, 76-frame windows).
    #[arg(long)]
    pub cards: Option<PathBuf>,
    /// Where the speech embedding runs.
    #[command(flatten)]
    pub pair: AppPairArgs,
}

/// A model's card: beside it, else in `--cards`, else none.
fn card_of(model: &Path, cards: Option<&Path>) -> Result<Option<ModelCard>> {
    let beside = model.with_extension("toml");
    let in_dir = cards.zip(model.file_stem()).map(|(d, stem)| d.join(stem).with_extension("toml"));
    match [Some(beside), in_dir].into_iter().flatten().find(|p| p.exists()) {
        Some(path) => Ok(Some(ModelCard::load(path)?)),
        None => Ok(None),
    }
}

/// The feeding the mel and embedding cards say (openWakeWord's where silent).
fn feeding(mel: Option<&ModelCard>, embedding: Option<&ModelCard>) -> Result<Feeding> {
    let mut f = Feeding::default();
    if let Some(input) = mel.and_then(|c| c.inputs.first()) {
        if let Some(rate) = input.rate_hz {
            if !((1.0..=384_000.0).contains(&rate) && rate.fract() == 0.0) {
                bail!("the mel card's rate_hz {rate}: a whole number of hertz up to 384000");
            }
            f.rate = rate as u32;
        }
        f.chunk = input.hop.unwrap_or(f.chunk);
        f.mel_input = input.window.unwrap_or(f.mel_input);
    }
    if let Some(out) = mel.map(|c| &c.output) {
        f.mel_scale = out.scale.unwrap_or(f.mel_scale);
        f.mel_offset = out.offset.unwrap_or(f.mel_offset);
    }
    if let Some(input) = embedding.and_then(|c| c.inputs.first()) {
        f.window = input.window.unwrap_or(f.window);
        // Frames run down (H), mel bins across (W).
        if let Some(shape) = input.shape.as_deref() {
            if let Some(frames) = input.axis(shape, 'H').filter(|&h| h != f.window) {
                bail!("the embedding card's window {} differs from its shape's {frames} frames", f.window);
            }
            f.bins = input.axis(shape, 'W').unwrap_or(f.bins);
        }
    }
    if f.chunk > f.mel_input || f.window > 10_000 || f.bins == 0 {
        bail!("the cards' feeding does not fit together: {f:?}");
    }
    Ok(f)
}

/// Reads a WAV file as int16-range floats (what openWakeWord feeds) at `rate`.
fn read_wav(path: &Path, to: u32) -> Result<(Vec<f32>, u32)> {
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
    Ok((resample(&samples, spec.sample_rate, to), spec.sample_rate))
}

/// A keyword head, its input's name and its window length (its input is
/// [1, k, 96]), its keyword and its threshold (`--threshold`, else its card's).
fn head_window(path: &Path, args: &WakewordArgs) -> Result<(ModelFile, String, usize, String, f32)> {
    let m = ModelFile::load(path, &InputShapes::none()).with_context(|| path.display().to_string())?;
    let card = card_of(path, args.cards.as_deref())?;
    if let Some(card) = &card {
        card.check(&m.model)?;
    }
    let keyword =
        card.as_ref().and_then(|c| c.output.labels.first().cloned()).unwrap_or_else(|| keyword_name(path));
    let threshold = args.threshold.or(card.as_ref().and_then(|c| c.output.threshold)).unwrap_or(0.5);
    if !(threshold > 0.0 && threshold <= 1.0) {
        bail!("threshold {threshold} for {keyword}: must be in (0, 1]");
    }
    let g = m.model.graph();
    let input = g.tensor(g.inputs()[0]);
    let (name, shape) = (input.name.clone(), input.shape.clone());
    match shape.as_slice() {
        &[1, k, EMBEDDING] => Ok((m, name, k, keyword, threshold)),
        other => bail!("{}: a keyword head reads [1, k, 96], not {other:?}", path.display()),
    }
}

fn keyword_name(path: &Path) -> String {
    path.file_stem().map(|s| s.to_string_lossy().trim_start_matches("oww_").to_string()).unwrap_or_default()
}

/// Runs every frame of `inputs` through `session` (fed as `name` of
/// `shape`), in order: each frame's first output, and the stream's report.
fn run_all(
    session: &mut Session,
    name: &str,
    shape: &[usize],
    inputs: Vec<Vec<f32>>,
) -> Result<(Vec<Vec<f32>>, StreamReport)> {
    let frames = inputs
        .into_iter()
        .map(|x| Ok(frame([(name, tensor_f32(shape, &x)?)])))
        .collect::<Result<Vec<_>, tandem::Error>>()?;
    let (mut out, mut reports) = (vec![], vec![]);
    let started = std::time::Instant::now();
    for r in session.stream(frames)? {
        let f = r?;
        let first = f.outputs.names().first().map(|n| n.to_string()).context("a model without outputs")?;
        out.push(f.outputs.f32(&first)?.1);
        reports.push(f.report);
    }
    Ok((out, StreamReport::from_frames(&reports, started.elapsed())))
}

/// `tandem-wearable wakeword`.
pub fn wakeword(args: WakewordArgs) -> Result<ExitCode> {
    if let Some(t) = args.threshold.filter(|t| !(*t > 0.0 && *t <= 1.0)) {
        bail!("--threshold {t}: must be in (0, 1]");
    }
    args.pair.check()?;
    let mel_card = card_of(&args.mel, args.cards.as_deref())?;
    let emb_card = card_of(&args.embedding, args.cards.as_deref())?;
    let f = feeding(mel_card.as_ref(), emb_card.as_ref())?;
    let rate = f.rate;
    let (speech, wav_rate) = read_wav(&args.wav, rate)?;
    let seconds = speech.len() as f64 / rate as f64;
    // Silence before the clip fills the windows (as a live stream's past
    // would), so that the first word is scored; silence after flushes the last.
    let (lead, tail) = (2 * rate as usize, rate as usize);
    let mut audio = vec![0.0; lead];
    audio.extend_from_slice(&speech);
    audio.resize(audio.len() + tail, 0.0);
    let (mel_model, mel_input) = load_with_input_shape(&args.mel, &format!("1,{}", f.mel_input))?;
    let emb_shape = [1, f.window, f.bins, 1];
    let (emb_model, emb_input) =
        load_with_input_shape(&args.embedding, &format!("1,{},{},1", f.window, f.bins))?;
    for (card, model) in [(&mel_card, &mel_model), (&emb_card, &emb_model)] {
        if let Some(card) = card {
            card.check(&model.model)?;
        }
    }
    let heads = args.keyword.iter().map(|p| head_window(p, &args)).collect::<Result<Vec<_>>>()?;
    let config = args.pair.config()?;
    // 1. Mel frames, on the watch.
    let mut mel = Session::open_local(mel_model, config.clone())?;
    let (mel_out, _) = run_all(&mut mel, &mel_input, &[1, f.mel_input], mel_inputs(&audio, &f))?;
    // The embedding's hop is one chunk's mel frames.
    let per_chunk = mel_out.first().map_or(0, |m| m.len() / f.bins);
    if let Some(hop) = emb_card.as_ref().and_then(|c| c.inputs.first()).and_then(|i| i.hop) {
        if !mel_out.is_empty() && hop != per_chunk {
            bail!("the mel model gives {per_chunk} frames per chunk; the embedding card's hop is {hop}");
        }
    }
    let mut buffer = MelBuffer::new(&f);
    let mut windows = vec![];
    let mut window_chunk = vec![];
    for (chunk, m) in mel_out.iter().enumerate() {
        if let Some(w) = buffer.push(m) {
            windows.push(w);
            window_chunk.push(chunk);
        }
    }
    // 2. Embeddings: split with the handheld when there is one (the planner decides).
    let mut emb = args.pair.open(emb_model, 11, emb_card.as_ref())?;
    let status = emb.status().to_string();
    let n_windows = windows.len();
    let (embeddings, emb_report) = run_all(&mut emb, &emb_input, &emb_shape, windows)?;
    // 3. Keyword heads, on the watch.
    let mut found = 0;
    let mut best = serde_json::Map::new();
    for (head_model, input, k, name, threshold) in heads {
        let mut head = Session::open_local(head_model, config.clone())?;
        let hw = head_windows(&embeddings, k);
        let at: Vec<f64> = hw
            .iter()
            .map(|(last, _)| {
                ((window_chunk[*last] + 1) * f.chunk) as f64 / rate as f64 - lead as f64 / rate as f64
            })
            .collect();
        let (scores, _) =
            run_all(&mut head, &input, &[1, k, EMBEDDING], hw.into_iter().map(|(_, w)| w).collect())?;
        let timed: Vec<(f64, f32)> = at.into_iter().zip(scores.iter().map(|s| s[0])).collect();
        best.insert(name.clone(), timed.iter().map(|t| t.1).fold(0.0f32, f32::max).into());
        for (t, score) in detections(&timed, threshold, 1.0) {
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
            "wav": args.wav.display().to_string(), "sample_rate": wav_rate, "seconds": seconds,
            "chunks": mel_out.len(), "embeddings": n_windows, "detections": found,
            "max_score": best, "embedding_status": status, "embeddings_offloaded": emb_report.offloaded,
            "embedding_fps": emb_report.throughput_fps, "embedding_up_bytes": emb_report.up_bytes,
            "embedding_up_raw_bytes": emb_report.up_raw_bytes,
        })
    );
    Ok(ExitCode::SUCCESS)
}
