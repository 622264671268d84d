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

use crate::compare::{Cell, Row};

const SIZE: (u32, u32) = (1100, 520);

/// Nominal rate of each link the grid uses, Mbit/s (as the emulated profiles).
const LINK_MBIT: [(&str, f64); 5] =
    [("ble-1m", 0.65), ("ble-2m", 1.3), ("bt-classic", 2.0), ("wifi-poor", 0.1), ("wifi-good", 5.0)];

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

/// Mean of each strategy's runs per cell: `value` of the rows.
fn means(rows: &[Row], value: fn(&Row) -> f64) -> BTreeMap<(Cell, String), f64> {
    let mut sums: BTreeMap<(Cell, String), (f64, usize)> = BTreeMap::new();
    for r in rows {
        let e = sums.entry((r.cell.clone(), r.strategy.clone())).or_default();
        e.0 += value(r);
        e.1 += 1;
    }
    sums.into_iter().map(|(k, (s, n))| (k, s / n as f64)).collect()
}

/// One bar per strategy per model, on a log axis, in the base cells (BLE 2M
/// unless only other links ran: the first link of each model's cells).
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
    let m = &means(rows, value);
    let mut models: Vec<String> = rows.iter().map(|r| r.cell.model.clone()).collect();
    models.dedup();
    models.sort();
    models.dedup();
    let base = |model: &str| rows.iter().find(|r| r.cell.model == model).map(|r| r.cell.clone());
    let values: Vec<(usize, usize, f64)> = models
        .iter()
        .enumerate()
        .flat_map(|(i, model)| {
            let cell = base(model);
            Strategy::ALL.iter().enumerate().filter_map(move |(k, s)| {
                let c = cell.clone()?;
                m.get(&(c, s.name().to_string())).map(|&v| (i, k, v))
            })
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
                models.get(i).cloned().unwrap_or_default()
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
    let m = means(rows, |r| r.latency_ms);
    let rate = |link: &str| LINK_MBIT.iter().find(|(l, _)| *l == link).map(|&(_, r)| r);
    // Per (strategy, link): speedups over the models whose other conditions are the base's.
    let mut per: BTreeMap<(usize, String), Vec<f64>> = BTreeMap::new();
    for ((cell, strategy), &v) in &m {
        let base_like =
            cell.load == 0 && cell.weights == "default" && cell.hint == "0" && cell.mode == "single";
        let Some(k) = Strategy::ALL.iter().position(|s| s.name() == strategy) else { continue };
        let Some(w) = m.get(&(cell.clone(), "wearable-only".to_string())) else { continue };
        if base_like && cell.pair == "watch-w5+pixel-8-pro" && v > 0.0 {
            per.entry((k, cell.link.clone())).or_default().push(w / v);
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
        let svg = dir.join(format!("{name}.svg"));
        bars(SVGBackend::new(&svg, SIZE).into_drawing_area(), rows, title, unit, value)?;
        let mut pixels = vec![0u8; (SIZE.0 * SIZE.1 * 3) as usize];
        bars(BitMapBackend::with_buffer(&mut pixels, SIZE).into_drawing_area(), rows, title, unit, value)?;
        save_png(dir, name, &pixels)?;
        written.extend([format!("{name}.svg"), format!("{name}.png")]);
    }
    let svg = dir.join("speedup_vs_bandwidth.svg");
    speedup(SVGBackend::new(&svg, SIZE).into_drawing_area(), rows)?;
    let mut pixels = vec![0u8; (SIZE.0 * SIZE.1 * 3) as usize];
    speedup(BitMapBackend::with_buffer(&mut pixels, SIZE).into_drawing_area(), rows)?;
    save_png(dir, "speedup_vs_bandwidth", &pixels)?;
    written.extend(["speedup_vs_bandwidth.svg".into(), "speedup_vs_bandwidth.png".into()]);
    Ok(written)
}

fn save_png(dir: &Path, name: &str, pixels: &[u8]) -> anyhow::Result<()> {
    let png = dir.join(format!("{name}.png"));
    image::save_buffer(&png, pixels, SIZE.0, SIZE.1, image::ExtendedColorType::Rgb8)
        .with_context(|| png.display().to_string())
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
                let cell =
                    Cell { link: link.into(), ..crate::compare::grid(&["m".to_string()], true).remove(0) };
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
