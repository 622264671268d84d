//! The comparison's plots (SVG and PNG, drawn with plotters): latency and
//! the watch's model-based energy per strategy per model in the base
//! conditions, the pipelining gain per strategy per model, each strategy's
//! speedup over wearable-only against the link's bandwidth, and the
//! walk-away trace over time (the link's rate, then each adaptive
//! strategy's cut, latency and throughput); and, apart from the
//! comparison, a stream's predicted and measured latency per frame.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{anyhow, Context};
use plotters::coord::Shift;
use plotters::prelude::*;
use tandem::client::Strategy;

use crate::compare::{by_cell, mean, pipelining_gains, Cell, Row};
use crate::traces::{frames_path, is_trace};
use tandem::emulate::Schedule;

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

/// The models of `rows`, sorted.
fn models(rows: &[Row]) -> Vec<&str> {
    rows.iter()
        .map(|r| r.cell.model.as_str())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// `(model index, strategy index, mean of value)` in each model's base
/// cell ([`Cell::base`]), else its first cell.
fn base_values(rows: &[Row], value: fn(&Row) -> f64) -> Vec<(usize, usize, f64)> {
    let by = by_cell(rows);
    models(rows)
        .iter()
        .enumerate()
        .flat_map(|(i, &model)| {
            let base = Cell::base(model);
            let cell = by.get(&base).or_else(|| by.iter().find(|(c, _)| c.model == model).map(|(_, s)| s));
            Strategy::ALL
                .iter()
                .enumerate()
                .filter_map(move |(k, s)| cell?.get(s.name()).map(|runs| (i, k, mean(runs, value))))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Each strategy's pipelining gain per model (see [`pipelining_gains`]).
fn gain_values(rows: &[Row]) -> Vec<(usize, usize, f64)> {
    let models = models(rows);
    Strategy::ALL
        .iter()
        .enumerate()
        .flat_map(|(k, s)| {
            pipelining_gains(rows, s.name())
                .into_iter()
                .filter_map(|(m, g)| models.iter().position(|&x| x == m).map(|i| (i, k, g)))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// One bar per strategy per model, on a log axis: `values` as
/// `(model index, strategy index, value)`.
fn bars<B: DrawingBackend>(
    root: DrawingArea<B, Shift>,
    models: &[&str],
    values: &[(usize, usize, f64)],
    title: &str,
    unit: &str,
) -> anyhow::Result<()>
where
    B::ErrorType: 'static,
{
    let values: Vec<(usize, usize, f64)> = values.iter().copied().filter(|&(_, _, v)| v > 0.0).collect();
    let (lo, hi) = values.iter().fold((f64::INFINITY, 0f64), |(lo, hi), &(_, _, v)| (lo.min(v), hi.max(v)));
    if values.is_empty() {
        return Ok(());
    }
    axis_fits(title, lo, hi)?;
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
    axis_fits("speedup against bandwidth", lo, hi)?;
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

/// The log axis `lo / 2 .. hi * 2` of a plot can be drawn: a figure of
/// 1e308 (a hand-edited results.jsonl) left the axis infinite and its
/// ticks never ending.
fn axis_fits(plot: &str, lo: f64, hi: f64) -> anyhow::Result<()> {
    anyhow::ensure!(
        lo > 0.0 && lo.is_finite() && (hi * 2.0).is_finite(),
        "{plot}: values from {lo:e} to {hi:e} do not fit a plot's axis (is results.jsonl measured?)"
    );
    Ok(())
}

/// Writes the plots of `rows` into `dir`; the files written.
pub fn plots(dir: &Path, rows: &[Row]) -> anyhow::Result<Vec<String>> {
    fonts()?;
    let latency = |r: &Row| r.latency_ms;
    let energy = |r: &Row| r.wearable_j * 1e3;
    let mut written = vec![];
    let names = models(rows);
    for (name, title, unit, values) in [
        ("latency", "p50 latency per strategy (base conditions)", "ms", base_values(rows, latency)),
        ("energy", "Watch energy per frame per strategy (model-based)", "mJ", base_values(rows, energy)),
        (
            "pipelining",
            "Pipelining gain: streamed over one-at-a-time throughput (base conditions)",
            "x",
            gain_values(rows),
        ),
    ] {
        if values.is_empty() {
            continue;
        }
        written.extend(both(
            dir,
            name,
            |a| bars(a, &names, &values, title, unit),
            |a| bars(a, &names, &values, title, unit),
        )?);
    }
    written.extend(both(dir, "speedup_vs_bandwidth", |a| speedup(a, rows), |a| speedup(a, rows))?);
    for cell in by_cell(rows).keys().filter(|c| is_trace(&c.link)) {
        let traces = walk_traces(dir, rows, cell)?;
        let Ok(schedule) = Schedule::from_path(&dir.join(format!("{}.txt", cell.link))) else { continue };
        if traces.is_empty() {
            continue;
        }
        let name = format!("{}_{}", cell.link.replace('-', "_"), cell.model.replace(['/', '\\'], "_"));
        written.extend(both_sized(
            dir,
            &name,
            WALK_SIZE,
            |a| walk(a, &cell.model, &schedule, &traces),
            |a| walk(a, &cell.model, &schedule, &traces),
        )?);
    }
    Ok(written)
}

const WALK_SIZE: (u32, u32) = (1100, 1000);

/// Strategies whose cut can move over the walk-away trace.
const ADAPTIVE: [Strategy; 4] =
    [Strategy::Neurosurgeon, Strategy::Dads, Strategy::DeepWear, Strategy::Tandem];

/// One frame over the walk-away trace: (schedule time s, wearable share of
/// the layers, latency ms).
type Point = (f64, f64, f64);

/// The first run's frames of each adaptive strategy over `cell`'s trace,
/// on the schedule's clock.
fn walk_traces(dir: &Path, rows: &[Row], cell: &Cell) -> anyhow::Result<Vec<(usize, Vec<Point>)>> {
    let mut out = vec![];
    for (k, s) in Strategy::ALL.iter().enumerate().filter(|(_, s)| ADAPTIVE.contains(s)) {
        if !rows.iter().any(|r| &r.cell == cell && r.strategy == s.name() && r.run == 1) {
            continue;
        }
        let path = frames_path(dir, &cell.link, &cell.model, s.name(), 1);
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        let mut points = vec![];
        for line in text.lines() {
            let j: serde_json::Value =
                serde_json::from_str(line).with_context(|| format!("{}: {line}", path.display()))?;
            let f = |k: &str| j[k].as_f64().unwrap_or(0.0);
            let share = if f("layers") > 0.0 { f("prefix_layers") / f("layers") } else { 1.0 };
            points.push((f("t_s"), share, f("latency_ms")));
        }
        out.push((k, points));
    }
    Ok(out)
}

/// The walk-away figure: the link's rate; each adaptive strategy's share
/// of the layers on the watch (1: every layer there), frame latency, and
/// throughput over windows of a twentieth of the trace, all against the schedule's time.
fn walk<B: DrawingBackend>(
    root: DrawingArea<B, Shift>,
    model: &str,
    schedule: &Schedule,
    traces: &[(usize, Vec<Point>)],
) -> anyhow::Result<()>
where
    B::ErrorType: 'static,
{
    let end = traces.iter().flat_map(|(_, p)| p.iter().map(|q| q.0)).fold(1.0f64, f64::max);
    let length = end.max(schedule.steps.last().map_or(0.0, |s| s.0.as_secs_f64()));
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let root =
        root.titled(&format!("Walk-away trace: {model}"), ("sans-serif", 22)).map_err(|e| anyhow!("{e}"))?;
    let panels = root.split_evenly((4, 1));
    let err = |e: DrawingAreaErrorKind<B::ErrorType>| anyhow!("{e}");
    // The link: a step line through the schedule's rates.
    let mut steps: Vec<(f64, f64)> = vec![];
    for (i, &(at, up, _)) in schedule.steps.iter().enumerate() {
        let next = schedule.steps.get(i + 1).map_or(length, |n| n.0.as_secs_f64());
        steps.push((at.as_secs_f64(), up / 1e6));
        steps.push((next, up / 1e6));
    }
    let mut c = ChartBuilder::on(&panels[0])
        .margin(8)
        .x_label_area_size(24)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..length, (0.01f64..2.0).log_scale())
        .map_err(err)?;
    c.configure_mesh().y_desc("link, Mbit/s").draw().map_err(err)?;
    c.draw_series(LineSeries::new(steps, BLACK.stroke_width(2))).map_err(err)?;
    // Per strategy: the share of layers on the watch, latency, throughput.
    let mut share = ChartBuilder::on(&panels[1])
        .margin(8)
        .x_label_area_size(24)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..length, -0.05f64..1.05)
        .map_err(err)?;
    share.configure_mesh().y_desc("layers on the watch").draw().map_err(err)?;
    let (lo, hi) = traces
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q.2))
        .filter(|&v| v > 0.0)
        .fold((f64::INFINITY, 0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (lo, hi) = if lo.is_finite() { (lo / 2.0, hi * 2.0) } else { (0.1, 10.0) };
    let mut latency = ChartBuilder::on(&panels[2])
        .margin(8)
        .x_label_area_size(24)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..length, (lo..hi).log_scale())
        .map_err(err)?;
    latency.configure_mesh().y_desc("latency, ms").draw().map_err(err)?;
    // Frames delivered per window of a twentieth of the trace, whole windows only.
    let window = (length / 20.0).max(0.5);
    let rate = |p: &[Point]| -> Vec<(f64, f64)> {
        let bins = (length / window).floor() as usize;
        let mut counts = vec![0usize; bins];
        for q in p {
            if let Some(c) = counts.get_mut((q.0 / window) as usize) {
                *c += 1;
            }
        }
        counts.iter().enumerate().map(|(i, &n)| ((i as f64 + 0.5) * window, n as f64 / window)).collect()
    };
    let top = traces.iter().flat_map(|(_, p)| rate(p)).map(|r| r.1).fold(1.0f64, f64::max);
    let mut fps = ChartBuilder::on(&panels[3])
        .margin(8)
        .x_label_area_size(36)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..length, 0f64..top * 1.2)
        .map_err(err)?;
    fps.configure_mesh().x_desc("time on the link's schedule, s").y_desc("frames/s").draw().map_err(err)?;
    for (k, points) in traces {
        let col = colour(*k);
        let name = Strategy::ALL[*k].name();
        share
            .draw_series(LineSeries::new(points.iter().map(|q| (q.0, q.1)), col.stroke_width(2)))
            .map_err(err)?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], col.stroke_width(2)));
        latency
            .draw_series(
                points.iter().filter(|q| q.2 > 0.0).map(|q| Circle::new((q.0, q.2), 2, col.filled())),
            )
            .map_err(err)?;
        fps.draw_series(LineSeries::new(rate(points), col.stroke_width(2))).map_err(err)?;
    }
    share
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

/// Predictions that learn: each frame's predicted and measured latency
/// (`points`: frame, predicted ms, measured ms), and the error between them.
pub fn learning(dir: &Path, name: &str, points: &[(u64, f64, f64)]) -> anyhow::Result<[String; 2]> {
    fonts()?;
    both(dir, name, |root| learning_chart(root, points), |root| learning_chart(root, points))
}

fn learning_chart<B: DrawingBackend>(
    root: DrawingArea<B, Shift>,
    points: &[(u64, f64, f64)],
) -> anyhow::Result<()>
where
    B::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<B::ErrorType>| anyhow!("{e}");
    root.fill(&WHITE).map_err(err)?;
    let root = root
        .titled(
            "Predicted and measured latency per frame (a handheld whose profile lies)",
            ("sans-serif", 20),
        )
        .map_err(err)?;
    let panels = root.split_evenly((2, 1));
    let frames = points.iter().map(|p| p.0).max().unwrap_or(0) as f64 + 1.0;
    let positive = points.iter().flat_map(|p| [p.1, p.2]).filter(|&v| v > 0.0);
    let (lo, hi) = positive.fold((f64::INFINITY, 0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (lo, hi) = if lo.is_finite() { (lo / 1.5, hi * 1.5) } else { (0.1, 10.0) };
    let mut ms = ChartBuilder::on(&panels[0])
        .margin(8)
        .x_label_area_size(24)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.5f64..frames, (lo..hi).log_scale())
        .map_err(err)?;
    ms.configure_mesh()
        .light_line_style(WHITE)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .y_desc("latency, ms")
        .draw()
        .map_err(err)?;
    for (k, label, pick) in [(0, "predicted", 1), (1, "measured", 2)] {
        let col = colour(k);
        let value = |p: &(u64, f64, f64)| if pick == 1 { p.1 } else { p.2 };
        ms.draw_series(LineSeries::new(
            points.iter().filter(|p| value(p) > 0.0).map(|p| (p.0 as f64, value(p))),
            col.stroke_width(2),
        ))
        .map_err(err)?
        .label(label)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], col.stroke_width(2)));
    }
    ms.configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    let errors: Vec<(f64, f64)> =
        points.iter().map(|p| (p.0 as f64, ((p.1 - p.2).abs() / p.2.max(1e-9) * 100.0).max(0.01))).collect();
    let top = errors.iter().map(|e| e.1).fold(1.0f64, f64::max) * 1.5;
    let mut pct = ChartBuilder::on(&panels[1])
        .margin(8)
        .x_label_area_size(36)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.5f64..frames, (0.01f64..top).log_scale())
        .map_err(err)?;
    pct.configure_mesh()
        .light_line_style(WHITE)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y}"))
        .x_desc("frame")
        .y_desc("|predicted - measured| / measured, %")
        .draw()
        .map_err(err)?;
    pct.draw_series(LineSeries::new(errors.iter().copied(), BLACK.stroke_width(2))).map_err(err)?;
    pct.draw_series(errors.iter().map(|&e| Circle::new(e, 3, BLACK.filled()))).map_err(err)?;
    root.present().map_err(err)
}

/// One plot drawn twice: `svg` into `DIR/NAME.svg`, `png` into a pixel
/// buffer saved as `DIR/NAME.png`; the two file names.
fn both(
    dir: &Path,
    name: &str,
    svg: impl FnOnce(DrawingArea<SVGBackend, Shift>) -> anyhow::Result<()>,
    png: impl FnOnce(DrawingArea<BitMapBackend, Shift>) -> anyhow::Result<()>,
) -> anyhow::Result<[String; 2]> {
    both_sized(dir, name, SIZE, svg, png)
}

/// [`both`] at `size`.
fn both_sized(
    dir: &Path,
    name: &str,
    size: (u32, u32),
    svg: impl FnOnce(DrawingArea<SVGBackend, Shift>) -> anyhow::Result<()>,
    png: impl FnOnce(DrawingArea<BitMapBackend, Shift>) -> anyhow::Result<()>,
) -> anyhow::Result<[String; 2]> {
    let (svg_name, png_name) = (format!("{name}.svg"), format!("{name}.png"));
    svg(SVGBackend::new(&dir.join(&svg_name), size).into_drawing_area())?;
    let mut pixels = vec![0u8; (size.0 * size.1 * 3) as usize];
    png(BitMapBackend::with_buffer(&mut pixels, size).into_drawing_area())?;
    let path = dir.join(&png_name);
    image::save_buffer(&path, &pixels, size.0, size.1, image::ExtendedColorType::Rgb8)
        .with_context(|| path.display().to_string())?;
    Ok([svg_name, png_name])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(s: Strategy, cell: Cell, latency_ms: f64) -> Row {
        Row {
            strategy: s.name().into(),
            cell,
            run: 1,
            latency_ms,
            p95_ms: 0.0,
            throughput_fps: 1e3 / latency_ms,
            wearable_j: 0.01,
            handheld_j: 0.0,
            up_bytes: 0,
            cut_switches: 0,
            switch_wait_max_ms: 0.0,
            plan_build_ms: 0.0,
            placement: None,
            engines: None,
            frames: 1,
            edge_frames: 0,
            edge_failures: 0,
            deadline_miss_share: None,
            accuracy_cost: None,
            accuracy_over: None,
        }
    }

    /// A figure too large for an axis is refused by name, where it hung
    /// drawing the axis's ticks.
    #[test]
    fn figures_past_an_axis_are_refused() {
        let dir = std::env::temp_dir().join(format!("tandem-plots-huge-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let mut rows: Vec<Row> = Strategy::ALL.iter().map(|s| row(*s, Cell::base("m"), 10.0)).collect();
        rows[0].wearable_j = 1e308;
        let e = plots(&dir, &rows).expect_err("refused");
        assert!(e.to_string().contains("do not fit a plot's axis"), "{e:#}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The learning figure: both files written, the PNG not blank, the SVG
    /// naming both series.
    #[test]
    fn the_learning_figure_is_written() {
        let dir = std::env::temp_dir().join(format!("tandem-learning-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let points = [(1, 1444.0, 223.0), (2, 117.0, 112.0), (3, 109.0, 121.0)];
        let [svg, png] = learning(&dir, "learning", &points).expect("figure");
        let img = image::open(dir.join(&png)).expect("a PNG").to_rgb8();
        assert_eq!(img.dimensions(), SIZE);
        assert!(img.pixels().any(|p| p.0 != [255, 255, 255]), "blank");
        let text = std::fs::read_to_string(dir.join(&svg)).expect("an SVG");
        // The legend's two labels, each a text of its own (the title and
        // the axis name both within longer texts).
        let label = |name: &str| text.lines().any(|l| l.trim() == name);
        assert!(label("predicted") && label("measured"), "{svg}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The plots of two cells, a stream cell and a walk-away trace: each
    /// file is written, the PNGs decode at the plot's size and are not
    /// blank, and the SVGs name every strategy they plot.
    #[test]
    fn plots_are_written_and_name_every_strategy() {
        let dir = std::env::temp_dir().join(format!("tandem-plots-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("frames")).expect("dir");
        std::fs::write(dir.join("walk-away.txt"), crate::traces::Trace::walk_away().scaled(0.2).text)
            .expect("schedule");
        let mut rows = vec![];
        for (k, s) in Strategy::ALL.iter().enumerate() {
            let latency = (k as f64 + 1.0) * 10.0;
            rows.push(row(*s, Cell::base("m"), latency));
            rows.push(row(*s, Cell { link: "wifi-good".into(), ..Cell::base("m") }, latency * 0.5));
            rows.push(row(*s, Cell { mode: "stream".into(), ..Cell::base("m") }, latency * 0.7));
            let walk = crate::compare::walk_away_cell("m");
            rows.push(row(*s, walk, latency));
            // Frames over the trace: every layer here while the link is down.
            let frames: String = (0..50)
                .map(|i| {
                    let t = i as f64 * 0.2;
                    let here = if (4.0..8.0).contains(&t) { 5 } else { k % 5 };
                    format!(
                        "{{\"t_s\":{t},\"prefix_layers\":{here},\"layers\":5,\"latency_ms\":{latency}}}\n"
                    )
                })
                .collect();
            std::fs::write(frames_path(&dir, "walk-away", "m", s.name(), 1), frames).expect("frames");
        }
        let files = plots(&dir, &rows).expect("plots");
        assert_eq!(files.len(), 10, "{files:?}");
        for f in &files {
            let path = dir.join(f);
            let walk = f.starts_with("walk_away_m");
            if f.ends_with(".png") {
                let img = image::open(&path).expect("a PNG").to_rgb8();
                assert_eq!(img.dimensions(), if walk { WALK_SIZE } else { SIZE });
                assert!(img.pixels().any(|p| p.0 != [255, 255, 255]), "{f} is blank");
            } else {
                let svg = std::fs::read_to_string(&path).expect("an SVG");
                let plotted: &[Strategy] = if walk { &ADAPTIVE } else { &Strategy::ALL };
                for s in plotted {
                    assert!(svg.contains(s.name()), "{f} does not name {}", s.name());
                }
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
