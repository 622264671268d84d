//! Frames of a YUV4MPEG2 (`.y4m`) file, 4:2:0 only, as RGB: the raw video
//! format ffmpeg and test suites write, read without a codec.

use anyhow::{bail, Context, Result};

/// An RGB frame: width, height, 3 bytes per pixel, row-major.
pub type Rgb = (usize, usize, Vec<u8>);

/// Every frame of a Y4M stream (BT.601 limited range to RGB).
pub fn frames(bytes: &[u8]) -> Result<Vec<Rgb>> {
    let header_end = bytes.iter().position(|&b| b == b'\n').context("not a Y4M file (no header line)")?;
    let header = std::str::from_utf8(&bytes[..header_end]).context("the Y4M header is not text")?;
    let mut fields = header.split(' ');
    if fields.next() != Some("YUV4MPEG2") {
        bail!("not a Y4M file (no YUV4MPEG2 signature)");
    }
    let (mut w, mut h) = (0usize, 0usize);
    for f in fields {
        match f.split_at(1) {
            ("W", v) => w = v.parse().context("bad Y4M width")?,
            ("H", v) => h = v.parse().context("bad Y4M height")?,
            ("C", v) if !v.starts_with("420") => bail!("Y4M colour space C{v}: only 4:2:0 is read"),
            _ => {}
        }
    }
    if w == 0 || h == 0 || w > 1 << 14 || h > 1 << 14 {
        bail!("Y4M size {w}x{h} is out of range");
    }
    let (cw, ch) = (w.div_ceil(2), h.div_ceil(2));
    let size = w * h + 2 * cw * ch;
    let mut out = vec![];
    let mut at = header_end + 1;
    while at < bytes.len() {
        let line_end = bytes[at..]
            .iter()
            .position(|&b| b == b'\n')
            .map(|p| at + p)
            .context("a truncated frame header")?;
        if !bytes[at..line_end].starts_with(b"FRAME") {
            bail!("frame {}: expected a FRAME header", out.len());
        }
        let data = bytes
            .get(line_end + 1..line_end + 1 + size)
            .with_context(|| format!("frame {} is truncated", out.len()))?;
        let (y, rest) = data.split_at(w * h);
        let (u, v) = rest.split_at(cw * ch);
        let mut rgb = vec![0u8; w * h * 3];
        for row in 0..h {
            for col in 0..w {
                let yy = (y[row * w + col] as f32 - 16.0) * 1.164;
                let c = (row / 2) * cw + col / 2;
                let (uu, vv) = (u[c] as f32 - 128.0, v[c] as f32 - 128.0);
                let px = &mut rgb[(row * w + col) * 3..][..3];
                px[0] = (yy + 1.596 * vv).round().clamp(0.0, 255.0) as u8;
                px[1] = (yy - 0.392 * uu - 0.813 * vv).round().clamp(0.0, 255.0) as u8;
                px[2] = (yy + 2.017 * uu).round().clamp(0.0, 255.0) as u8;
            }
        }
        out.push((w, h, rgb));
        at = line_end + 1 + size;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_decode_and_bad_files_are_named() {
        // Two 2x2 frames: grey, then white.
        let mut y4m = b"YUV4MPEG2 W2 H2 F30:1 Ip A1:1 C420jpeg\n".to_vec();
        for luma in [126u8, 235] {
            y4m.extend_from_slice(b"FRAME\n");
            y4m.extend_from_slice(&[luma; 4]);
            y4m.extend_from_slice(&[128, 128]);
        }
        let f = frames(&y4m).expect("two frames");
        assert_eq!(f.len(), 2);
        assert_eq!((f[0].0, f[0].1), (2, 2));
        assert_eq!(&f[0].2[..3], &[128, 128, 128]);
        assert_eq!(&f[1].2[..3], &[255, 255, 255]);
        for (bad, want) in [
            (&b"P6 2 2\n"[..], "not a Y4M"),
            (&b"YUV4MPEG2 W2 H2 C444\nFRAME\n"[..], "4:2:0"),
            (&y4m[..y4m.len() - 1], "truncated"),
        ] {
            let e = frames(bad).expect_err(want).to_string();
            assert!(e.contains(want), "{e}");
        }
    }
}
