//! The comparison's plots (SVG and PNG, drawn with plotters): latency and
//! the watch's model-based energy per strategy per model in the base
//! conditions, and each strategy's speedup over wearable-only against the
//! link's bandwidth.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{anyhow, Context};
use plotters::coord::Shift;
use plotters::prelude::*;
use tandem::client::Strategy;

use crate::compare::{by_cell, mean, Cell, Row};

const SIZE: (u32, u32) = (1100, 520);

fn colour(i: usize) -> RGBColor {
    let (r, g, b) = Palette99::pick(i).to_rgba().rgb();
    RGBColor(r, g, b)
}

/// Registers DejaVu Sans (Debian's fonts-dejavu-core) as plotters' font.
fn fonts() -> anyhow::Result<()> {
    let path = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
    let bytes =
        std::fs::read(path).with_context(|| format!("{path} (Debian: apt-get install fonts-dejavu-core)"))?;
    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
        .map_err(|_| anyhow!("{path}: not a font"))
}

/// One bar per strategy per model, on a log axis, in each model's base
/// cell ([`Cell::base`]), else its first cell.
fn bars<B: DrawingBackend>(
    root: DrawingArea<B, Shift>,
    rows: &[Row],
    title: &str,
    unit: &str,
    value: fn(&Row) -> f64,
) -> anyhow::Result<()>
where
    B::ErrorType: 'static,
{
    let by = by_cell(rows);
    let models: Vec<&str> =
        by.keys().map(|c| c.model.as_str()).collect::<std::collections::BTreeSet<_>>().into_iter().collect();
    let values: Vec<(usize, usize, f64)> = models
        .iter()
        .enumerate()
        .flat_map(|(i, &model)| {
            let base = Cell::base(model);
            let cell = by.get(&base).or_else(|| by.iter().find(|(c, _)| c.model == model).map(|(_, s)| s));
            Strategy::ALL
                .iter()
                .enumerate()
                .filter_map(move |(k, s)| cell?.get(s.name()).map(|runs| (i, k, mean(runs, value))))
        })
        .filter(|&(_, _, v)| v > 0.0)
        .collect();
    let (lo, hi) = values.iter().fold((f64::INFINITY, 0f64), |(lo, hi), &(_, _, v)| (lo.min(v), hi.max(v)));
    if values.is_empty() {
        return Ok(());
    }
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..models.len() as f64, (lo / 2.0..hi * 2.0).log_scale())
        .map_err(|e| anyhow!("{e}"))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(models.len() * 2 + 1)
        .x_label_formatter(&|x| {
            let i = x.floor() as usize;
            if (x - i as f64 - 0.5).abs() < 0.26 {
                models.get(i).map(|m| m.to_string()).unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_desc(unit)
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    let width = 0.8 / Strategy::ALL.len() as f64;
    for (k, s) in Strategy::ALL.iter().enumerate() {
        let c = colour(k);
        chart
            .draw_series(values.iter().filter(|v| v.1 == k).map(|&(i, _, v)| {
                let x0 = i as f64 + 0.1 + k as f64 * width;
                Rectangle::new([(x0, lo / 2.0), (x0 + width * 0.9, v)], c.filled())
            }))
            .map_err(|e| anyhow!("{e}"))?
            .label(s.name())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    root.present().map_err(|e| anyhow!("{e}"))
}

/// Each strategy's speedup over wearable-only (geometric mean over the
/// models) against the link's rate, in the cells that differ only in link.
fn speedup<B: DrawingBackend>(root: DrawingArea<B, Shift>, rows: &[Row]) -> anyhow::Result<()>
where
    B::ErrorType: 'static,
{
    let rate = |link: &str| tandem::emulate::LinkProfile::named(link).ok().map(|p| p.up_bps / 1e6);
    // Per (strategy, link): speedups over the models whose other conditions are the base's.
    let mut per: BTreeMap<(usize, String), Vec<f64>> = BTreeMap::new();
    for (cell, strategies) in by_cell(rows).into_iter().filter(|(c, _)| c.is_base_but_link()) {
        let Some(local) = strategies.get("wearable-only").map(|runs| mean(runs, |r| r.latency_ms)) else {
            continue;
        };
        for (k, s) in Strategy::ALL.iter().enumerate() {
            if let Some(v) =
                strategies.get(s.name()).map(|runs| mean(runs, |r| r.latency_ms)).filter(|&v| v > 0.0)
            {
                per.entry((k, cell.link.clone())).or_default().push(local / v);
            }
        }
    }
    let points: Vec<(usize, f64, f64)> = per
        .iter()
        .filter_map(|((k, link), s)| {
            let geo = (s.iter().map(|x| x.ln()).sum::<f64>() / s.len() as f64).exp();
            rate(link).map(|r| (*k, r, geo))
        })
        .collect();
    if points.is_empty() {
        return Ok(());
    }
    let (lo, hi) = points.iter().fold((f64::INFINITY, 0f64), |(lo, hi), &(_, _, v)| (lo.min(v), hi.max(v)));
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Speedup over wearable-only (geometric mean over models) against bandwidth",
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d((0.05f64..10.0).log_scale(), (lo / 2.0..hi * 2.0).log_scale())
        .map_err(|e| anyhow!("{e}"))?;
    chart
        .configure_mesh()
        .x_desc("link rate, Mbit/s (emulated)")
        .y_desc("speedup (x)")
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    for (k, s) in Strategy::ALL.iter().enumerate() {
        let mut line: Vec<(f64, f64)> = points.iter().filter(|p| p.0 == k).map(|&(_, r, v)| (r, v)).collect();
        line.sort_by(|a, b| a.0.total_cmp(&b.0));
        let c = colour(k);
        chart
            .draw_series(LineSeries::new(line.clone(), c.stroke_width(2)))
            .map_err(|e| anyhow!("{e}"))?
            .label(s.name())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], c.stroke_width(2)));
        chart.draw_series(line.iter().map(|&p| Circle::new(p, 4, c.filled()))).map_err(|e| anyhow!("{e}"))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    root.present().map_err(|e| anyhow!("{e}"))
}

/// Writes the plots of `rows` into `dir`; the files written.
pub fn plots(dir: &Path, rows: &[Row]) -> anyhow::Result<Vec<String>> {
    fonts()?;
    let latency = |r: &Row| r.latency_ms;
    let energy = |r: &Row| r.wearable_j * 1e3;
    let mut written = vec![];
    for (name, title, unit, value) in [
        ("latency", "p50 latency per strategy (base conditions)", "ms", latency as fn(&Row) -> f64),
        ("energy", "Watch energy per frame per strategy (model-based)", "mJ", energy as fn(&Row) -> f64),
    ] {
        written.extend(both(
            dir,
            name,
            |a| bars(a, rows, title, unit, value),
            |a| bars(a, rows, title, unit, value),
        )?);
    }
    written.extend(both(dir, "speedup_vs_bandwidth", |a| speedup(a, rows), |a| speedup(a, rows))?);
    Ok(written)
}

/// One plot drawn twice: `svg` into `DIR/NAME.svg`, `png` into a pixel
/// buffer saved as `DIR/NAME.png`; the two file names.
fn both(
    dir: &Path,
    name: &str,
    svg: impl FnOnce(DrawingArea<SVGBackend, Shift>) -> anyhow::Result<()>,
    png: impl FnOnce(DrawingArea<BitMapBackend, Shift>) -> anyhow::Result<()>,
) -> anyhow::Result<[String; 2]> {
    let (svg_name, png_name) = (format!("{name}.svg"), format!("{name}.png"));
    svg(SVGBackend::new(&dir.join(&svg_name), SIZE).into_drawing_area())?;
    let mut pixels = vec![0u8; (SIZE.0 * SIZE.1 * 3) as usize];
    png(BitMapBackend::with_buffer(&mut pixels, SIZE).into_drawing_area())?;
    let path = dir.join(&png_name);
    image::save_buffer(&path, &pixels, SIZE.0, SIZE.1, image::ExtendedColorType::Rgb8)
        .with_context(|| path.display().to_string())?;
    Ok([svg_name, png_name])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plots of two cells: each file is written, the PNGs decode at
    /// the plot's size and are not blank, and the SVGs name every strategy.
    #[test]
    fn plots_are_written_and_name_every_strategy() {
        let mut rows = vec![];
        for (link, scale) in [("ble-2m", 1.0), ("wifi-good", 0.5)] {
            for (k, s) in Strategy::ALL.iter().enumerate() {
                let cell = Cell { link: link.into(), ..Cell::base("m") };
                rows.push(Row {
                    strategy: s.name().into(),
                    cell,
                    run: 1,
                    latency_ms: (k as f64 + 1.0) * 10.0 * scale,
                    p95_ms: 0.0,
                    throughput_fps: 0.0,
                    wearable_j: 0.01,
                    handheld_j: 0.0,
                    up_bytes: 0,
                    cut_switches: 0,
                });
            }
        }
        let dir = std::env::temp_dir().join(format!("tandem-plots-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let files = plots(&dir, &rows).expect("plots");
        assert_eq!(files.len(), 6);
        for f in &files {
            let path = dir.join(f);
            if f.ends_with(".png") {
                let img = image::open(&path).expect("a PNG").to_rgb8();
                assert_eq!(img.dimensions(), SIZE);
                assert!(img.pixels().any(|p| p.0 != [255, 255, 255]), "{f} is blank");
            } else {
                let svg = std::fs::read_to_string(&path).expect("an SVG");
                for s in Strategy::ALL {
                    assert!(svg.contains(s.name()), "{f} does not name {}", s.name());
                }
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
