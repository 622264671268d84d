//! openWakeWord's buffering, without I/O: 80 ms audio chunks with the mel
//! model's left context, mel frames collected into the embedding model's
//! 76-frame window, embeddings collected into each keyword head's window,
//! and detections with a refractory period. The numbers come from the
//! models' cards ([`Feeding`]); the constants are openWakeWord's own.

/// Samples per second the models expect.
pub const RATE: u32 = 16_000;
/// Samples per chunk (80 ms): each yields 8 mel frames.
pub const CHUNK: usize = 1280;
/// Samples the mel model reads per chunk: the chunk plus 480 of context.
pub const MEL_INPUT: usize = CHUNK + 480;
/// Mel frames per embedding window.
pub const WINDOW: usize = 76;
/// Mel bins per frame.
pub const MEL_BINS: usize = 32;
/// Values per embedding.
pub const EMBEDDING: usize = 96;

/// How the audio and the mel frames are cut: from the mel and embedding
/// models' cards, or openWakeWord's defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct Feeding {
    /// Samples per second the mel model expects.
    pub rate: u32,
    /// Samples between chunks (the mel model's hop).
    pub chunk: usize,
    /// Samples the mel model reads per chunk (its window: the chunk plus context).
    pub mel_input: usize,
    /// Mel frames per embedding window.
    pub window: usize,
    /// Mel bins per frame.
    pub bins: usize,
    /// Each mel value is fed to the embedding as `value * scale + offset`.
    pub mel_scale: f32,
    /// See `mel_scale`.
    pub mel_offset: f32,
}

impl Default for Feeding {
    fn default() -> Self {
        Feeding {
            rate: RATE,
            chunk: CHUNK,
            mel_input: MEL_INPUT,
            window: WINDOW,
            bins: MEL_BINS,
            mel_scale: 0.1,
            mel_offset: 2.0,
        }
    }
}

/// Linear interpolation from `rate` to `to`.
pub fn resample(samples: &[f32], rate: u32, to: u32) -> Vec<f32> {
    if rate == to || samples.is_empty() {
        return samples.to_vec();
    }
    let n = (samples.len() as u64 * to as u64 / rate as u64) as usize;
    (0..n)
        .map(|i| {
            let x = i as f64 * rate as f64 / to as f64;
            let (j, f) = (x.floor() as usize, (x - x.floor()) as f32);
            let a = samples[j.min(samples.len() - 1)];
            let b = samples[(j + 1).min(samples.len() - 1)];
            a + (b - a) * f
        })
        .collect()
}

/// The mel model's input for each whole chunk: the last `mel_input`
/// samples up to the chunk's end, zero-padded at the start.
pub fn mel_inputs(audio: &[f32], feeding: &Feeding) -> Vec<Vec<f32>> {
    let (chunk, n) = (feeding.chunk.max(1), feeding.mel_input);
    (0..audio.len() / chunk)
        .map(|c| {
            let end = (c + 1) * chunk;
            let mut input = vec![0.0; n];
            let start = end.saturating_sub(n);
            input[n - (end - start)..].copy_from_slice(&audio[start..end]);
            input
        })
        .collect()
}

/// Collects mel frames (scaled as the mel card says: openWakeWord's
/// `mel / 10 + 2`) and yields an embedding window (`window` × `bins`,
/// row-major) after each chunk once there are enough frames.
pub struct MelBuffer {
    frames: Vec<Vec<f32>>,
    feeding: Feeding,
}

impl MelBuffer {
    /// An empty buffer.
    pub fn new(feeding: &Feeding) -> Self {
        MelBuffer { frames: vec![], feeding: feeding.clone() }
    }

    /// Adds one chunk's mel output (frames × bins raw values); the window
    /// ending with it, when there are enough frames.
    pub fn push(&mut self, mel: &[f32]) -> Option<Vec<f32>> {
        let f = &self.feeding;
        for frame in mel.chunks_exact(f.bins.max(1)) {
            self.frames.push(frame.iter().map(|&v| v * f.mel_scale + f.mel_offset).collect());
        }
        let w = f.window;
        (self.frames.len() >= w).then(|| self.frames[self.frames.len() - w..].concat())
    }
}

/// A keyword head's windows over the embeddings: `k` consecutive ones.
pub fn head_windows(embeddings: &[Vec<f32>], k: usize) -> Vec<(usize, Vec<f32>)> {
    if k == 0 || embeddings.len() < k {
        return vec![];
    }
    (k - 1..embeddings.len()).map(|last| (last, embeddings[last + 1 - k..=last].concat())).collect()
}

/// Scores above `threshold`, at most one per `refractory_s` seconds: (time, score).
pub fn detections(scores: &[(f64, f32)], threshold: f32, refractory_s: f64) -> Vec<(f64, f32)> {
    let mut out: Vec<(f64, f32)> = vec![];
    for &(t, s) in scores {
        if s < threshold {
            continue;
        }
        match out.last_mut() {
            Some(last) if t - last.0 < refractory_s => {
                if s > last.1 {
                    last.1 = s;
                }
            }
            _ => out.push((t, s)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_carry_their_context_and_windows_slide_by_one_chunk() {
        let audio: Vec<f32> = (0..CHUNK * 3 + 5).map(|i| i as f32).collect();
        let inputs = mel_inputs(&audio, &Feeding::default());
        assert_eq!(inputs.len(), 3, "whole chunks only");
        assert!(inputs[0][..480].iter().all(|&v| v == 0.0), "the first chunk is zero-padded");
        assert_eq!(inputs[0][480], 0.0);
        assert_eq!(inputs[1][MEL_INPUT - 1], (2 * CHUNK - 1) as f32);
        assert_eq!(inputs[1][0], (2 * CHUNK - MEL_INPUT) as f32);

        let mut b = MelBuffer::new(&Feeding::default());
        let chunk_mel = |c: usize| vec![c as f32 * 10.0; 8 * MEL_BINS];
        let windows: Vec<_> = (0..11).map(|c| b.push(&chunk_mel(c))).collect();
        assert!(windows[..9].iter().all(Option::is_none), "76 frames need 10 chunks");
        let w = windows[9].as_ref().expect("a window after the 10th chunk");
        assert_eq!(w.len(), WINDOW * MEL_BINS);
        assert_eq!(w[0], 2.0, "frames 4..80: frame 4 is chunk 0's (0 / 10 + 2)");
        assert_eq!(w[w.len() - 1], 11.0, "chunk 9's: 90 / 10 + 2");
        assert_eq!(windows[10].as_ref().expect("window")[0], 3.0, "frames 12..88: frame 12 is chunk 1's");
    }

    #[test]
    fn heads_see_k_consecutive_embeddings_and_detections_are_debounced() {
        let e: Vec<Vec<f32>> = (0..5).map(|i| vec![i as f32; EMBEDDING]).collect();
        let w = head_windows(&e, 3);
        assert_eq!(w.len(), 3);
        assert_eq!((w[0].0, w[0].1[0], w[0].1[2 * EMBEDDING]), (2, 0.0, 2.0));
        assert!(head_windows(&e, 6).is_empty());
        let scores = [(1.0, 0.2), (1.08, 0.7), (1.16, 0.9), (1.5, 0.6), (3.0, 0.8)];
        assert_eq!(detections(&scores, 0.5, 1.0), vec![(1.08, 0.9), (3.0, 0.8)]);
        assert_eq!(resample(&[0.0, 1.0, 2.0, 3.0], 32_000, RATE), vec![0.0, 2.0]);
    }
}
