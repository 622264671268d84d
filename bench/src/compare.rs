//! `tandem-bench compare`: every offload strategy side by side on real
//! processes (one `tandem-handheld serve`, one `tandem-wearable stream
//! --strategy S` per run) over emulated links, the same frames for every
//! strategy, interleaved, each cell run twice: one JSON line per (cell,
//! strategy, run) in `DIR/results.jsonl`, the headline figures per
//! strategy in `DIR/report.md`, and plots ([`crate::plots`]).
//!
//! The grid varies one condition at a time around a base cell (watch-w5 +
//! pixel-8-pro, BLE 2M, an idle phone, default batteries, PropT 0, single
//! inference), for every model: a full factorial of models × pairs × links
//! × loads × weights × hints × modes would take weeks on this VM. Two
//! groups are added: DeepWear's era pair (watch-sd400 + nexus-6) over
//! Bluetooth classic and Wi-Fi as well, for its headline; and, for one
//! model ([`WALK_MODEL`]), a stream over each link trace
//! ([`crate::traces`]: the walk-away trace, and those `--trace` adds),
//! whose frames are kept to plot the cut, latency and throughput over time.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::traces::{frames_path, is_trace, Trace, TRACE_FPS, TRACE_LINK};
use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use tandem::client::Strategy;

/// The conditions of one cell.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Cell {
    /// The model's name.
    pub model: String,
    /// `watch+phone` profile names.
    pub pair: String,
    /// The emulated link profile.
    pub link: String,
    /// The phone's background CPU load, percent.
    pub load: u32,
    /// `default` (both at 80%), `low-watch` (the watch at 15%),
    /// `charging-phone`; `capacity`: both at 80%, each side's energy
    /// weighed by the share of its battery it spends, as DeepWear's paper
    /// counts it (`tandem-wearable --energy-weights capacity`).
    pub weights: String,
    /// PropT: `0`, `mid` (200 ms) or `inf`.
    pub hint: String,
    /// `single` (one frame at a time) or `stream` (pipelined).
    pub mode: String,
    /// The link to an edge server ([`crate::tiers::EDGE_LINKS`]): an edge
    /// cell, whose strategies are [`crate::tiers::EDGE_ARMS`]; empty: two
    /// tiers.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub edge: String,
    /// The accuracy budget lossy link encodings run under (`argmax`,
    /// `rel:X`: the model's card's, [`crate::workload`]): every strategy
    /// may use them within it, and each run's outputs are checked against
    /// the model run unsplit. Empty: a lossless cell.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub accuracy: String,
}

impl Cell {
    /// The base cell of `model`: watch-w5 + pixel-8-pro over BLE 2M, an
    /// idle phone, default batteries, PropT 0, single inference.
    pub fn base(model: &str) -> Cell {
        Cell {
            model: model.into(),
            pair: "watch-w5+pixel-8-pro".into(),
            link: "ble-2m".into(),
            load: 0,
            weights: "default".into(),
            hint: "0".into(),
            mode: "single".into(),
            edge: String::new(),
            accuracy: String::new(),
        }
    }

    /// Whether it is its model's base cell but for the link.
    pub fn is_base_but_link(&self) -> bool {
        *self == Cell { link: self.link.clone(), ..Cell::base(&self.model) }
    }
}

/// One measured run of one strategy in one cell.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// The strategy's name.
    pub strategy: String,
    /// Its cell.
    #[serde(flatten)]
    pub cell: Cell,
    /// 1 or 2.
    pub run: u32,
    /// Median latency per frame.
    pub latency_ms: f64,
    /// 95th percentile.
    pub p95_ms: f64,
    /// Frames per second over the run.
    pub throughput_fps: f64,
    /// Model-based energy per frame on the watch (compute and radio).
    pub wearable_j: f64,
    /// Model-based energy per frame on the phone.
    pub handheld_j: f64,
    /// Bytes sent up over the run.
    pub up_bytes: u64,
    /// Cut changes during the run.
    pub cut_switches: u64,
    /// The longest wait from a decision to the first frame at its cut (ms;
    /// Tandem's plans built ahead), 0 when no switch waited.
    #[serde(default)]
    pub switch_wait_max_ms: f64,
    /// Plan building inside frames on the watch over the run (ms): a
    /// switch's stall when plans are not built ahead.
    #[serde(default)]
    pub plan_build_ms: f64,
    /// Where every measured frame ran, when all ran alike: `watch`, or the
    /// cut's key and the bytes sent up (the same cut encoded differently is
    /// another placement); `None` when they ran at several, or any fell back.
    #[serde(default)]
    pub placement: Option<String>,
    /// The engines the run's halves were on, `prefix+suffix` (`None`:
    /// before engines were reported).
    #[serde(default)]
    pub engines: Option<String>,
    /// Measured frames in the run.
    #[serde(default)]
    pub frames: u64,
    /// Of those, frames with layers on the edge.
    #[serde(default)]
    pub edge_frames: u64,
    /// Frames whose edge part failed (run on the phone or the watch instead).
    #[serde(default)]
    pub edge_failures: u64,
    /// Frames arriving on a clock (a trace's stream): the share delivered
    /// after the next one arrived.
    #[serde(default)]
    pub deadline_miss_share: Option<f64>,
    /// In a lossy cell: the worst error of the run's delivered outputs
    /// against the model run unsplit on the same inputs, under the cell's
    /// budget (0: every frame crossed bit-exact).
    #[serde(default)]
    pub accuracy_cost: Option<f64>,
    /// In a lossy cell: the run's frames over the budget.
    #[serde(default)]
    pub accuracy_over: Option<u64>,
}

/// The DeepWear era's pair, with profiles assumed from the chips' specifications.
pub const DEEPWEAR_PAIR: &str = "watch-sd400+nexus-6";

/// DeepWear's six setups as the paper measured them (its averages are over
/// these): the LG Watch Urbane and the Galaxy S2 (standing in for a
/// head-mounted device), each with the Nexus 6 on its CPU (interactive),
/// its GPU and its CPU under powersave; profiles calibrated from the
/// paper's figures (`profiles/lg-urbane.toml` and the rest, sources beside
/// each value).
pub const MEASURED_PAIRS: [&str; 6] = [
    "lg-urbane+nexus-6-cpu",
    "lg-urbane+nexus-6-gpu",
    "lg-urbane+nexus-6-powersave",
    "galaxy-s2+nexus-6-cpu",
    "galaxy-s2+nexus-6-gpu",
    "galaxy-s2+nexus-6-powersave",
];

/// The link of the measured pairs' cells: DeepWear's Bluetooth, fitted to
/// the paper's transfer times (`wear-data-layer`).
pub const ERA_LINKS: [&str; 1] = ["wear-data-layer"];

/// Whether `cell` is on one of DeepWear's pairs, assumed or measured (the
/// traces, streamed on its assumed pair, are not DeepWear's cells).
pub fn is_era(cell: &Cell) -> bool {
    (cell.pair == DEEPWEAR_PAIR || MEASURED_PAIRS.contains(&cell.pair.as_str()))
        && !crate::traces::is_trace(&cell.link)
}

/// A model to run: its file, `stream` arguments (shapes, input, card), and
/// the directory a handheld serves it from.
struct Subject {
    name: String,
    file: PathBuf,
    args: Vec<String>,
    models_dir: PathBuf,
    /// Its input shapes (for the edge's suffixes).
    shapes: tandem::InputShapes,
}

/// The zoo's models in the comparison: six of DeepWear's eight (theirs:
/// also GoogLeNet and DeepSense), in our own, smaller versions.
const ZOO: [&str; 6] = ["text_rnn_lstm", "mnist", "deepear", "mobilenet_v1_1.0_128", "wavenet", "lstm_har"];

/// The model streamed over the traces when it is compared (else the
/// first model): PP-OCR's int8 classifier, whose best cut over BLE 2M on
/// [`WALK_PAIR`] offloads and over 30 kbit/s runs on the watch, so the
/// walk-away trace moves the cut.
pub const WALK_MODEL: &str = "ppocr_cls_int8";

/// The pair the traces are streamed on: DeepWear's era watch and phone,
/// where [`WALK_MODEL`]'s best cut over BLE 2M beats the watch alone by a
/// margin (77 ms against 112 in the grid of 2026-12-05). On the base pair
/// (the W5 watch) the two tie over BLE 2M (76 ms against 77), so whether
/// the cut moved over a trace was a coin's toss: a CI run under load kept
/// every frame on the watch.
pub const WALK_PAIR: &str = DEEPWEAR_PAIR;

/// The cell of `model` streaming over the trace named `trace`.
pub fn trace_cell(model: &str, trace: &str) -> Cell {
    Cell { pair: WALK_PAIR.into(), link: trace.into(), mode: "stream".into(), ..Cell::base(model) }
}

/// The cell mode of a stream at `hz` frames/s (`rate15`, `rate12.5`):
/// frames arrive on that clock, a camera's ([`crate::workload::CAMERA_RATES`])
/// or the model's own (a microphone's hop); a frame delivered after the
/// next one arrived missed its deadline.
pub fn rate_mode(hz: f64) -> String {
    format!("rate{hz}")
}

/// The source rate of a cell streamed at one (its mode `rateN`).
pub fn rate_of(cell: &Cell) -> Option<f64> {
    cell.mode.strip_prefix("rate").and_then(|n| n.parse().ok())
}

/// The walk-away cell of `model`.
#[cfg(test)]
pub fn walk_away_cell(model: &str) -> Cell {
    trace_cell(model, "walk-away")
}

/// Which cells of the edge grid ([`crate::tiers::edge_cells`]) run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EdgeGrid {
    /// None, but the quick grid's one edge cell.
    Off,
    /// Every model's, after the two-tier cells.
    With,
    /// Only the edge grid.
    Only,
}

/// The cells: for `quick`, two models over BLE 2M and Wi-Fi in the base
/// conditions (the last, with a budget, lossy too), and [`WALK_MODEL`]
/// (else the first) over each of `traces` (short) and one edge cell; else
/// every model, one condition varied at a time, DeepWear's era pair over
/// its links, its source rates and, with a budget, lossy cells, and the
/// traces likewise; then the edge grid as `edge` says. `work`: each
/// model's budget and rates (the default where missing).
pub fn grid(
    models: &[String],
    quick: bool,
    (edge, work): (EdgeGrid, &BTreeMap<String, crate::workload::Workload>),
    traces: &[&str],
) -> Vec<Cell> {
    let two = grid_two_tiers(models, quick, work, traces);
    let walker = models.iter().position(|m| m == WALK_MODEL).unwrap_or(0);
    let edges: Vec<Cell> = match (quick, edge) {
        (true, EdgeGrid::Off) => {
            models.get(walker).map(|m| crate::tiers::edge_cells(m, true)).unwrap_or_default()
        }
        (_, EdgeGrid::Off) => vec![],
        (q, _) => models.iter().flat_map(|m| crate::tiers::edge_cells(m, q)).collect(),
    };
    match edge {
        EdgeGrid::Only => edges,
        _ => two.into_iter().chain(edges).collect(),
    }
}

/// The two-tier cells of [`grid`].
fn grid_two_tiers(
    models: &[String],
    quick: bool,
    work: &BTreeMap<String, crate::workload::Workload>,
    traces: &[&str],
) -> Vec<Cell> {
    let mut cells = vec![];
    let walker = models.iter().position(|m| m == WALK_MODEL).unwrap_or(0);
    for (i, m) in models.iter().enumerate() {
        let b = Cell::base(m);
        let w = work.get(m).cloned().unwrap_or_default();
        let lossy = |c: Cell| w.budget.clone().map(|accuracy| Cell { accuracy, ..c });
        if quick {
            cells.push(b.clone());
            cells.push(Cell { link: "wifi-good".into(), ..b.clone() });
            if i + 1 == models.len() {
                cells.extend(lossy(b));
            }
            if i == walker {
                cells.extend(traces.iter().map(|t| trace_cell(m, t)));
            }
            continue;
        }
        cells.push(b.clone());
        for pair in ["watch-sd400+nexus-6", "watch-w5+samsung-a16"] {
            cells.push(Cell { pair: pair.into(), ..b.clone() });
        }
        for link in ["ble-1m", "bt-classic", "wifi-good"] {
            cells.push(Cell { link: link.into(), ..b.clone() });
        }
        for load in [50, 80] {
            cells.push(Cell { load, ..b.clone() });
        }
        for weights in ["low-watch", "charging-phone"] {
            cells.push(Cell { weights: weights.into(), ..b.clone() });
        }
        for hint in ["mid", "inf"] {
            cells.push(Cell { hint: hint.into(), ..b.clone() });
        }
        cells.push(Cell { mode: "stream".into(), ..b.clone() });
        for &hz in &w.rates {
            cells.push(Cell { mode: rate_mode(hz), ..b.clone() });
        }
        for link in ["bt-classic", "wifi-good"] {
            cells.push(Cell { pair: DEEPWEAR_PAIR.into(), link: link.into(), ..b.clone() });
        }
        // DeepWear's setups as measured: for latency (PropT 0) and for
        // energy (PropT ∞), as the paper tuned each of its averages; its
        // energy as it counts it, each device's joules over its battery's
        // capacity, so every strategy weighs energy that way there.
        for pair in MEASURED_PAIRS {
            for (hint, weights) in [("0", "default"), ("inf", "capacity")] {
                cells.extend(ERA_LINKS.map(|link| Cell {
                    pair: pair.into(),
                    link: link.into(),
                    hint: hint.into(),
                    weights: weights.into(),
                    ..b.clone()
                }));
            }
        }
        // Lossy beside lossless: the base cell, and DeepWear's pairs over
        // their slowest link, where bytes matter most.
        cells.extend(lossy(b.clone()));
        cells.extend(lossy(Cell { pair: DEEPWEAR_PAIR.into(), link: "bt-classic".into(), ..b.clone() }));
        cells.extend(lossy(Cell { pair: MEASURED_PAIRS[0].into(), link: ERA_LINKS[0].into(), ..b.clone() }));
        if i == walker {
            cells.extend(traces.iter().map(|t| trace_cell(m, t)));
        }
    }
    cells
}

/// Headline figures of one strategy over the cells every strategy ran in.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Headline {
    /// The strategy.
    pub strategy: String,
    /// Cells counted.
    pub cells: usize,
    /// Geometric mean of wearable-only's latency over this strategy's.
    pub speedup_vs_wearable: f64,
    /// Geometric mean of handheld-only's latency over this strategy's.
    pub speedup_vs_handheld: f64,
    /// 95% bootstrap intervals of the two speedups (cells and their runs
    /// resampled, [`crate::interval`]).
    pub speedup_intervals: Option<((f64, f64), (f64, f64))>,
    /// Geometric mean of wearable-only's objective over this strategy's
    /// ([`score`]: latency at PropT 0, both devices' weighted energy at
    /// PropT ∞; above 1: better) over the cells at PropT 0 and ∞, and its
    /// interval: the speedup, but with each cell judged as its hint asks
    /// (at PropT ∞ a strategy that honours the hint trades speed for
    /// energy, which the speedup counts against it). `None` without such cells.
    pub objective_vs_wearable: PairedFigure,
    /// Those cells.
    pub objective_cells: usize,
    /// Mean change of the watch's energy per frame against wearable-only (−0.3: 30% less).
    pub watch_energy_change: f64,
    /// The same against handheld-only.
    pub watch_energy_vs_handheld: f64,
    /// Share of cells where it is within 5% of the cell's best strategy
    /// under the cell's objective ([`score`]: latency at PropT 0, energy
    /// at PropT ∞, energy within the bound at 200 ms).
    pub within_5pct_of_best: f64,
    /// The geometric-mean speedup over wearable-only with runs at one
    /// placement pooled ([`pooled`]: differences come from choices, not
    /// noise), over the cells whose objective is latency (PropT 0; at
    /// PropT 200 ms and ∞ a strategy may trade speed for energy).
    /// `None` without such cells.
    pub pooled_speedup_vs_wearable: Option<f64>,
    /// The same over handheld-only.
    pub pooled_speedup_vs_handheld: Option<f64>,
    /// Share of cells within 5% of the measured best with runs at one
    /// placement pooled: the best is the best placement's pooled runs (a
    /// strategy's own runs, when they moved between placements, are judged
    /// but do not set the best: the mean of fewer runs is noisier, and the
    /// least of noisy means is biased low); a strategy that ran at the best
    /// placement is counted as the best, one elsewhere is judged by its
    /// placement's pooled runs or its own.
    pub within_5pct_pooled: f64,
    /// Geometric mean over the cells at PropT 0 and ∞ of the measured best
    /// objective over this strategy's (at most 1 in each cell; 1: the best
    /// everywhere), and its interval: the reference is each cell's best,
    /// so the interval holds the strategy's own shortfall, where against
    /// wearable-only it holds which cells pay to offload, a spread every
    /// adaptive strategy shares. The best is the least mean of any
    /// strategy's runs (the least of noisy means, so biased low: every
    /// strategy is judged against the same one). A cell whose best or own
    /// figure is not positive is left out. `None` without such cells.
    pub objective_vs_best: PairedFigure,
    /// The same with runs at one placement pooled ([`pooled`]): the best is
    /// the best placement's pooled runs, as [`Headline::within_5pct_pooled`]
    /// finds it (runs that moved between placements are judged but do not
    /// set it); strategies at one placement share its pool's draw in each
    /// resample, at the best in those where no other pool comes out ahead.
    pub objective_vs_best_pooled: PairedFigure,
    /// Largest relative spread between a cell's two runs.
    pub worst_run_spread: f64,
    /// Throughput pipelined over one frame at a time (geometric mean over
    /// the models with both a base cell and its stream cell), if any.
    pub pipelining_gain: Option<f64>,
}

/// The rows by cell, then by strategy (a strategy's runs).
pub fn by_cell(rows: &[Row]) -> BTreeMap<&Cell, BTreeMap<&str, Vec<&Row>>> {
    let mut by: BTreeMap<&Cell, BTreeMap<&str, Vec<&Row>>> = BTreeMap::new();
    for r in rows {
        by.entry(&r.cell).or_default().entry(r.strategy.as_str()).or_default().push(r);
    }
    by
}

/// A cell's runs by strategy, as [`by_cell`] gives them.
type CellRuns<'a> = BTreeMap<&'a str, Vec<&'a Row>>;

/// The cells of `by` where every strategy has a result: those the headline
/// and the head-to-head are figured over.
fn complete_cells<'a, 'b>(by: &'b BTreeMap<&'a Cell, CellRuns<'a>>) -> Vec<(&'b &'a Cell, &'b CellRuns<'a>)> {
    by.iter().filter(|(_, s)| Strategy::ALL.iter().all(|strategy| s.contains_key(strategy.name()))).collect()
}

/// The mean of `value` over `runs`.
pub fn mean(runs: &[&Row], value: fn(&Row) -> f64) -> f64 {
    runs.iter().map(|r| value(r)).sum::<f64>() / runs.len().max(1) as f64
}

/// The runs `name` is judged by with placements pooled: when every run of
/// it ran at one placement, every strategy's runs at that placement in the
/// cell (the same layers where, the same bytes, on the same engines:
/// samples of one thing, whose differences are this VM's noise); else its
/// own runs.
pub fn pooled<'a>(cell: &BTreeMap<&str, Vec<&'a Row>>, name: &str) -> Vec<&'a Row> {
    match placement_of(&cell[name]) {
        Some(p) => cell.values().flatten().filter(|r| placed(r) == Some(p)).copied().collect(),
        None => cell[name].clone(),
    }
}

/// Where a run ran, as pooling compares runs: its placement and the engines
/// its two sides ran on (with `--engine auto` strategies may differ there).
type Placed<'a> = (&'a String, &'a Option<String>);

/// [`Placed`] of `run`, if all its frames ran at one placement.
fn placed(run: &Row) -> Option<Placed<'_>> {
    run.placement.as_ref().map(|p| (p, &run.engines))
}

/// Where every one of `runs` ran, if they all ran at one placement.
fn placement_of<'a>(runs: &[&'a Row]) -> Option<Placed<'a>> {
    let p = placed(runs.first()?)?;
    runs.iter().all(|r| placed(r) == Some(p)).then_some(p)
}

/// PropT "mid": the latency bound, in ms.
pub const MID_HINT_MS: f64 = 200.0;

/// The measured value of a strategy's runs under the cell's objective,
/// lower is better: latency at PropT 0; the weighted energy of both sides
/// (the cell's battery weights, as the profiler sets them) at PropT ∞;
/// at PropT 200 ms that energy when the latency meets the bound, else
/// above every value that meets it, by latency.
pub fn score(cell: &Cell, runs: &[&Row]) -> f64 {
    let latency = mean(runs, |r| r.latency_ms);
    let (ww, wp) = match cell.weights.as_str() {
        "low-watch" => (0.8, 0.2),
        "charging-phone" => (1.0, 0.0),
        // Capacities Cw, Cp: Ww = Cp / (Cw + Cp), Wp = Cw / (Cw + Cp).
        "capacity" => match crate::deepwear::battery_ratio(&cell.pair) {
            Some(r) => (1.0 / (1.0 + r), r / (1.0 + r)),
            None => (0.5, 0.5),
        },
        _ => (0.5, 0.5),
    };
    let energy = mean(runs, |r| r.wearable_j) * ww + mean(runs, |r| r.handheld_j) * wp;
    match cell.hint.as_str() {
        "inf" => energy,
        "mid" if latency <= MID_HINT_MS => energy,
        "mid" => 1e9 + latency,
        _ => latency,
    }
}

/// Per model, `strategy`'s mean throughput streaming over its mean
/// throughput one frame at a time, where the model has both its base cell
/// and the base cell streamed.
pub fn pipelining_gains<'a>(rows: &'a [Row], strategy: &str) -> Vec<(&'a str, f64)> {
    let by = by_cell(rows);
    let fps = |c: &Cell| by.get(c).and_then(|s| s.get(strategy)).map(|runs| mean(runs, |r| r.throughput_fps));
    let models: std::collections::BTreeSet<&str> = rows.iter().map(|r| r.cell.model.as_str()).collect();
    models
        .into_iter()
        .filter_map(|m| {
            let single = fps(&Cell::base(m))?;
            let stream = fps(&Cell { mode: "stream".into(), ..Cell::base(m) })?;
            (single > 0.0).then_some((m, stream / single))
        })
        .collect()
}

/// Per cell and strategy, the mean latency and watch energy of its runs and
/// their spread; then the headline of each strategy over the cells where
/// every strategy has a result. The trace cells and the cells at a source
/// rate are left out: their figures (over a changing link, or latencies
/// counted from each frame's arrival) are reported apart ([`walk_report`],
/// [`rate_report`]).
pub fn summarize(rows: &[Row]) -> Vec<Headline> {
    let rows = headline_rows(rows);
    let rows = rows.as_slice();
    let by = by_cell(rows);
    let names: Vec<&str> = Strategy::ALL.iter().map(|s| s.name()).collect();
    let complete = complete_cells(&by);
    let one_figure = one_figure_cells(&complete);
    names
        .iter()
        .map(|&name| {
            let (mut log_w, mut log_h, mut energy, mut within, mut spread) = (0.0, 0.0, 0.0, 0usize, 0f64);
            let (mut energy_h, mut pooled_within, mut pooled_w, mut pooled_h) = (0.0, 0usize, 0.0, 0.0);
            let mut latency_cells = 0usize;
            for (c, cell) in &complete {
                let lat = |s: &str| mean(&cell[s], |r| r.latency_ms);
                let objective = |s: &str| score(c, &cell[s]);
                let own = lat(name);
                log_w += (lat("wearable-only") / own).ln();
                log_h += (lat("handheld-only") / own).ln();
                let watch = |s: &str| mean(&cell[s], |r| r.wearable_j);
                energy += watch(name) / watch("wearable-only") - 1.0;
                energy_h += watch(name) / watch("handheld-only") - 1.0;
                let best = names.iter().map(|s| objective(s)).fold(f64::INFINITY, f64::min);
                let close = objective(name) <= best * 1.05;
                within += usize::from(close);
                let pooled_objective = |s: &str| score(c, &pooled(cell, s));
                let best_of = |only_placed: bool| {
                    names
                        .iter()
                        .filter(|s| !only_placed || placement_of(&cell[*s]).is_some())
                        .map(|s| pooled_objective(s))
                        .fold(f64::INFINITY, f64::min)
                };
                let pooled_best = match best_of(true) {
                    b if b.is_finite() => b,
                    _ => best_of(false),
                };
                pooled_within += usize::from(pooled_objective(name) <= pooled_best * 1.05);
                if c.hint == "0" {
                    let pooled_lat = |s: &str| mean(&pooled(cell, s), |r| r.latency_ms);
                    pooled_w += (pooled_lat("wearable-only") / pooled_lat(name)).ln();
                    pooled_h += (pooled_lat("handheld-only") / pooled_lat(name)).ln();
                    latency_cells += 1;
                }
                let runs: Vec<f64> = cell[name].iter().map(|r| r.latency_ms).collect();
                let (lo, hi) = runs.iter().fold((f64::INFINITY, 0f64), |(lo, hi), &v| (lo.min(v), hi.max(v)));
                spread = spread.max(if lo > 0.0 { hi / lo - 1.0 } else { 0.0 });
            }
            let n = complete.len().max(1) as f64;
            let paired = |baseline: &str| -> Vec<crate::interval::Paired> {
                complete
                    .iter()
                    .map(|(_, cell)| {
                        crate::interval::Paired::new(
                            cell[baseline].iter().map(|r| r.latency_ms).collect(),
                            cell[name].iter().map(|r| r.latency_ms).collect(),
                        )
                    })
                    .collect()
            };
            let interval = |baseline: &str| crate::interval::geomean_ratio_interval(&paired(baseline), 31);
            let speedup_intervals = interval("wearable-only").zip(interval("handheld-only"));
            let gains = pipelining_gains(rows, name);
            let pipelining_gain = (!gains.is_empty())
                .then(|| (gains.iter().map(|g| g.1.ln()).sum::<f64>() / gains.len() as f64).exp());
            Headline {
                strategy: name.into(),
                cells: complete.len(),
                speedup_vs_wearable: (log_w / n).exp(),
                speedup_vs_handheld: (log_h / n).exp(),
                speedup_intervals,
                objective_vs_wearable: paired_figure(&one_figure, ("wearable-only", name), &|c, r| {
                    score(c, &[r])
                }),
                objective_cells: one_figure.len(),
                watch_energy_change: energy / n,
                watch_energy_vs_handheld: energy_h / n,
                within_5pct_of_best: within as f64 / n,
                pooled_speedup_vs_wearable: (latency_cells > 0)
                    .then(|| (pooled_w / latency_cells as f64).exp()),
                pooled_speedup_vs_handheld: (latency_cells > 0)
                    .then(|| (pooled_h / latency_cells as f64).exp()),
                within_5pct_pooled: pooled_within as f64 / n,
                objective_vs_best: of_best(&one_figure, name, false),
                objective_vs_best_pooled: of_best(&one_figure, name, true),
                worst_run_spread: spread,
                pipelining_gain,
            }
        })
        .collect()
}

/// The rows the headline is figured over: neither a trace's, an edge
/// cell's nor a source rate's.
fn headline_rows(rows: &[Row]) -> Vec<Row> {
    rows.iter()
        .filter(|r| !is_trace(&r.cell.link) && r.cell.edge.is_empty() && rate_of(&r.cell).is_none())
        .cloned()
        .collect()
}

/// A paired geometric mean and its 95% bootstrap interval; `None` without cells.
type PairedFigure = Option<(f64, Option<(f64, f64)>)>;

/// Tandem against one other strategy, cell by cell.
#[derive(Clone, Debug, PartialEq)]
pub struct HeadToHead {
    /// The other strategy.
    pub strategy: String,
    /// Cells both ran in (every strategy's, as the headline's).
    pub cells: usize,
    /// Geometric mean over the cells of its latency over Tandem's (above
    /// 1: Tandem faster), and the 95% bootstrap interval; `None` without cells.
    pub latency: PairedFigure,
    /// The same of each cell's objective ([`score`], per run) over the
    /// cells at PropT 0 and ∞, whose objectives are one figure each
    /// (latency, the weighted energy); at PropT 200 ms meeting the bound
    /// ranks first, which no ratio says.
    pub objective: PairedFigure,
    /// Those cells.
    pub objective_cells: usize,
    /// The objective with runs at one placement pooled ([`pooled`]), over
    /// the same cells: a cell where both ran every run at one and the same
    /// placement counts as even (what its runs measured apart is this VM's
    /// noise between runs of one thing), in the estimate and in every
    /// resample; elsewhere each side is judged by its placement's pooled
    /// runs (its own where they moved between placements).
    pub objective_pooled: PairedFigure,
    /// Of those cells, the ones where the two did not run at one shared
    /// placement: they held different ones, or either's runs moved
    /// between placements.
    pub apart_cells: usize,
}

/// Tandem against each other strategy, paired by cell over the headline's
/// cells: the ratio of the two in each cell, so that the noise the cells
/// share (a model's, a pair's) cancels, which separate intervals of each
/// strategy's speedup over wearable-only keep. An interval wholly above 1
/// is a win, one that holds 1 a tie.
pub fn head_to_head(rows: &[Row]) -> Vec<HeadToHead> {
    let rows = headline_rows(rows);
    let by = by_cell(&rows);
    let names: Vec<&str> = Strategy::ALL.iter().map(|s| s.name()).collect();
    let complete = complete_cells(&by);
    let one_figure = one_figure_cells(&complete);
    let tandem = Strategy::Tandem.name();
    names
        .iter()
        .filter(|&&n| n != tandem)
        .map(|&name| {
            let objective = |c: &Cell, r: &Row| score(c, &[r]);
            let (objective_pooled, apart_cells) = pooled_figure(&one_figure, (name, tandem), &objective);
            HeadToHead {
                strategy: name.into(),
                cells: complete.len(),
                latency: paired_figure(&complete, (name, tandem), &|_, r| r.latency_ms),
                objective: paired_figure(&one_figure, (name, tandem), &objective),
                objective_cells: one_figure.len(),
                objective_pooled,
                apart_cells,
            }
        })
        .collect()
}

/// Of `cells`, those whose objective is one figure (PropT 0 and ∞: latency,
/// the weighted energy); at PropT 200 ms meeting the bound ranks first,
/// which no ratio says.
fn one_figure_cells<'a, 'b>(
    cells: &[(&'b &'a Cell, &'b CellRuns<'a>)],
) -> Vec<(&'b &'a Cell, &'b CellRuns<'a>)> {
    cells.iter().copied().filter(|(c, _)| c.hint != "mid").collect()
}

/// The geometric mean over `cells` of `baseline`'s `figure` over
/// `strategy`'s (per run, each cell's runs averaged), and its 95%
/// bootstrap interval; `None` without cells.
fn paired_figure(
    cells: &[(&&Cell, &CellRuns)],
    (baseline, strategy): (&str, &str),
    figure: &dyn Fn(&Cell, &Row) -> f64,
) -> PairedFigure {
    let paired: Vec<_> = cells
        .iter()
        .map(|(c, cell)| {
            crate::interval::Paired::new(
                cell[baseline].iter().map(|r| figure(c, r)).collect(),
                cell[strategy].iter().map(|r| figure(c, r)).collect(),
            )
        })
        .collect();
    let point = crate::interval::geomean_ratio(&paired);
    point.map(|g| (g, crate::interval::geomean_ratio_interval(&paired, 31)))
}

/// `name`'s objective against each cell's measured best over `cells`
/// ([`crate::interval::geomean_of_best`]) and its 95% bootstrap interval;
/// with `pool`, runs at one placement pooled. `None` without cells.
fn of_best(cells: &[(&&Cell, &CellRuns)], name: &str, pool: bool) -> PairedFigure {
    let pools = best_pools(cells, name, pool);
    crate::interval::geomean_of_best(&pools)
        .map(|g| (g, crate::interval::geomean_of_best_interval(&pools, 31)))
}

/// Each of `cells` as [`crate::interval::Pools`] of its objective (per
/// run), `name` judged: without `pool`, each strategy's runs, every one
/// of which may set the best; with it, each placement's pooled runs
/// ([`pooled`]), and the own runs of a strategy whose runs moved between
/// placements, which may not set it.
fn best_pools(cells: &[(&&Cell, &CellRuns)], name: &str, pool: bool) -> Vec<crate::interval::Pools> {
    cells
        .iter()
        .filter_map(|(c, cell)| {
            let key = |s: &'static str| match placement_of(&cell[s]) {
                Some(p) if pool => (Some(p), ""),
                _ => (None, s),
            };
            let (mut keys, mut pools) = (Vec::new(), Vec::new());
            for s in Strategy::ALL.iter().map(|s| s.name()) {
                let k = key(s);
                if keys.contains(&k) {
                    continue;
                }
                let runs = if pool { pooled(cell, s) } else { cell[s].clone() };
                pools.push((runs.iter().map(|r| score(c, &[r])).collect(), !pool || k.0.is_some()));
                keys.push(k);
            }
            let judged = Strategy::ALL.iter().find(|s| s.name() == name).map(|s| key(s.name()))?;
            crate::interval::Pools::new(pools, keys.iter().position(|k| *k == judged)?)
        })
        .collect()
}

/// [`paired_figure`] with runs at one placement pooled ([`pooled`]): a
/// cell where both sides ran every run at one and the same placement is
/// one pool, even; elsewhere each side's pooled runs. Also how many cells
/// were not one pool.
fn pooled_figure(
    cells: &[(&&Cell, &CellRuns)],
    (baseline, strategy): (&str, &str),
    figure: &dyn Fn(&Cell, &Row) -> f64,
) -> (PairedFigure, usize) {
    let mut apart = 0;
    let paired: Vec<_> = cells
        .iter()
        .map(|(c, cell)| {
            let runs = |name: &str| -> Vec<f64> { pooled(cell, name).iter().map(|r| figure(c, r)).collect() };
            match (placement_of(&cell[baseline]), placement_of(&cell[strategy])) {
                (Some(a), Some(b)) if a == b => crate::interval::Paired::one_pool(runs(strategy)),
                _ => {
                    apart += 1;
                    crate::interval::Paired::new(runs(baseline), runs(strategy))
                }
            }
        })
        .collect();
    let point = crate::interval::geomean_ratio(&paired);
    (point.map(|g| (g, crate::interval::geomean_ratio_interval(&paired, 31))), apart)
}

/// The table of [`head_to_head`].
fn head_to_head_table(rows: &[Row]) -> String {
    let with = |figure: PairedFigure| match figure {
        Some((g, Some((lo, hi)))) => format!("{g:.2}× ({lo:.2}–{hi:.2})"),
        Some((g, None)) => format!("{g:.2}×"),
        None => "–".into(),
    };
    let mut out = String::from(
        "\nTandem against each strategy, paired by cell (geometric mean over the cells of the strategy's \
         figure over Tandem's, above 1: Tandem ahead; 95% bootstrap interval, cells and runs resampled). \
         The objective is each cell's: latency at PropT 0, both devices' weighted energy (model-based) \
         at PropT ∞; the PropT 200 ms cells are left out of it (meeting the bound ranks first there, \
         which no ratio says). With placements pooled, a cell where both ran every run at one and the \
         same placement (the same layers on each side, the same bytes, the same engines) is even: what their runs measured \
         apart there is this VM's noise between runs of one thing; elsewhere each is judged by every \
         strategy's runs at its placement (its own where its runs moved), so the figure is what the \
         choices are worth.\n\n\
         | Tandem against | cells | latency | cells at PropT 0 and ∞ | objective | \
         objective, placements pooled | of those cells, not at one shared placement |\n\
         |---|---:|---:|---:|---:|---:|---:|\n",
    );
    let all = head_to_head(rows);
    if all.iter().all(|h| h.cells == 0) {
        return String::new();
    }
    for h in all {
        out += &format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            h.strategy,
            h.cells,
            with(h.latency),
            h.objective_cells,
            with(h.objective),
            with(h.objective_pooled),
            h.apart_cells
        );
    }
    out
}

/// The headline table of `rows`; nothing where no cell has every
/// strategy's result (a run of the rate cells alone).
fn headline_table(rows: &[Row]) -> String {
    let headlines = summarize(rows);
    if headlines.iter().all(|h| h.cells == 0) {
        return String::new();
    }
    let mut out = String::from(
        "| strategy | cells | speedup vs wearable-only (geomean, 95% bootstrap interval) | speedup vs handheld-only (geomean, interval) | \
         each cell's objective vs wearable-only (PropT 0 and ∞ cells; geomean, interval) | \
         pooled, latency cells: vs wearable-only | vs handheld-only | \
         watch energy vs wearable-only (mean, model-based) | vs handheld-only | within 5% of the measured best | \
         pooled: within 5% of the best | \
         each cell's objective: the measured best ÷ its own (≤ 1 a cell; PropT 0 and ∞ cells; geomean, 95% interval) | pooled | \
         pipelining gain (geomean) | worst spread of two runs |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let with = |g: f64, i: Option<(f64, f64)>| match i {
        Some((lo, hi)) => format!("{g:.2}× ({lo:.2}–{hi:.2})"),
        None => format!("{g:.2}×"),
    };
    let share = |figure: PairedFigure| match figure {
        Some((g, Some((lo, hi)))) => format!("{g:.3} ({lo:.3}–{hi:.3})"),
        Some((g, None)) => format!("{g:.3}"),
        None => "–".into(),
    };
    for h in headlines {
        out += &format!(
            "| {} | {} | {} | {} | {} | {} | {} | {:+.0}% | {:+.0}% | {:.0}% | {:.0}% | {} | {} | {} | {:.0}% |\n",
            h.strategy,
            h.cells,
            with(h.speedup_vs_wearable, h.speedup_intervals.map(|i| i.0)),
            with(h.speedup_vs_handheld, h.speedup_intervals.map(|i| i.1)),
            h.objective_vs_wearable.map_or("–".into(), |(g, i)| format!(
                "{} ({} cells)",
                with(g, i),
                h.objective_cells
            )),
            h.pooled_speedup_vs_wearable.map_or("–".into(), |g| format!("{g:.2}×")),
            h.pooled_speedup_vs_handheld.map_or("–".into(), |g| format!("{g:.2}×")),
            h.watch_energy_change * 100.0,
            h.watch_energy_vs_handheld * 100.0,
            h.within_5pct_of_best * 100.0,
            h.within_5pct_pooled * 100.0,
            share(h.objective_vs_best),
            share(h.objective_vs_best_pooled),
            h.pipelining_gain.map_or("–".into(), |g| format!("{g:.2}×")),
            h.worst_run_spread * 100.0
        );
    }
    out
}

/// The cells at a source rate: per cell each strategy's share of late
/// frames and p95 latency (from each frame's arrival); then in how many
/// cells Tandem missed no more deadlines than the best other strategy.
pub fn rate_report(rows: &[Row]) -> String {
    let cells: Vec<_> = by_cell(rows).into_iter().filter(|(c, _)| rate_of(c).is_some()).collect();
    if cells.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "\nAt a source rate (frames arrive on the clock; late: delivered after the next one arrived; \
         late share / p95 ms from arrival, means of the runs):\n\n| model | rate |",
    );
    for s in Strategy::ALL {
        out += &format!(" {} |", s.name());
    }
    out += "\n|---|---:|";
    out += &"---:|".repeat(Strategy::ALL.len());
    out += "\n";
    let (mut held, mut judged, mut held_pooled) = (0usize, 0usize, 0usize);
    for (c, s) in &cells {
        out += &format!("| {} | {} Hz |", c.model, rate_of(c).unwrap_or(0.0));
        let late =
            |name: &str| s.get(name).and_then(|runs| Some((late_share(runs)?, mean(runs, |r| r.p95_ms))));
        for st in Strategy::ALL {
            match late(st.name()) {
                Some((share, p95)) => out += &format!(" {:.0}% / {p95:.0} |", share * 100.0),
                None => out += " – |",
            }
        }
        out += "\n";
        let others = Strategy::ALL.iter().filter(|s| **s != Strategy::Tandem).filter_map(|s| late(s.name()));
        if let (Some((own, _)), Some(best)) =
            (late("tandem"), others.map(|(share, _)| share).min_by(f64::total_cmp))
        {
            judged += 1;
            held += usize::from(own <= best + 1e-9);
            held_pooled += usize::from(holds_pooled(s));
        }
    }
    out += &format!(
        "\nTandem missed no more deadlines than the best other strategy in {held} of {judged} cells; \
         with the runs at one placement pooled (as the headline's pooled count: runs of every strategy \
         at Tandem's placement are samples of one thing), in {held_pooled} of {judged}.\n"
    );
    out
}

/// The mean share of late frames over `runs`, when every run reported one.
fn late_share(runs: &[&Row]) -> Option<f64> {
    let all = !runs.is_empty() && runs.iter().all(|r| r.deadline_miss_share.is_some());
    all.then(|| mean(runs, |r| r.deadline_miss_share.unwrap_or(0.0)))
}

/// Whether Tandem's late share in a rate cell, pooled by placement
/// ([`pooled`]), is no more than every other strategy's, pooled alike.
fn holds_pooled(cell: &BTreeMap<&str, Vec<&Row>>) -> bool {
    let late =
        |s: &Strategy| cell.contains_key(s.name()).then(|| late_share(&pooled(cell, s.name()))).flatten();
    let Some(own) = late(&Strategy::Tandem) else { return false };
    Strategy::ALL.iter().filter(|s| **s != Strategy::Tandem).filter_map(late).all(|other| own <= other + 1e-9)
}

/// The lossy cells: per cell, each strategy's p50 and the worst accuracy
/// cost its runs measured (against the model run unsplit, under the cell's
/// budget), beside Tandem's p50 in the lossless twin cell.
pub fn lossy_report(rows: &[Row]) -> String {
    let by = by_cell(rows);
    let cells: Vec<_> = by.iter().filter(|(c, _)| !c.accuracy.is_empty()).collect();
    if cells.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "\nLossy cells (every strategy is given lossy link encodings within the model card's budget; \
         Tandem and handheld-compressed use them, the others send raw tensors, as published; \
         p50 ms / the worst measured error of the delivered outputs against the model run unsplit, \
         under that budget; means of the runs, worst of the runs):\n\n| model | pair | link | budget |",
    );
    for s in Strategy::ALL {
        out += &format!(" {} |", s.name());
    }
    out += " Tandem lossless p50 |\n|---|---|---|---|";
    out += &"---:|".repeat(Strategy::ALL.len() + 1);
    out += "\n";
    for (c, s) in cells {
        out += &format!("| {} | {} | {} | {} |", c.model, c.pair, c.link, c.accuracy);
        for st in Strategy::ALL {
            match s.get(st.name()) {
                Some(runs) => {
                    let cost =
                        runs.iter().map(|r| r.accuracy_cost).try_fold(0f64, |w, c| c.map(|c| w.max(c)));
                    let over: u64 = runs.iter().filter_map(|r| r.accuracy_over).sum();
                    out += &format!(
                        " {:.1} / {} |",
                        mean(runs, |r| r.latency_ms),
                        match (cost, over) {
                            (None, _) => "–".to_string(),
                            (Some(c), 0) => format!("{c:.1e}"),
                            (Some(c), n) => format!("{c:.1e} ({n} over)"),
                        }
                    );
                }
                None => out += " – |",
            }
        }
        let twin = Cell { accuracy: String::new(), ..(*c).clone() };
        match by.get(&twin).and_then(|s| s.get("tandem")) {
            Some(runs) => out += &format!(" {:.1} |\n", mean(runs, |r| r.latency_ms)),
            None => out += " – |\n",
        }
    }
    out
}

/// The trace cells' figures per strategy: latency, throughput, cut
/// switches, the longest wait for a switch's plans, and plan building
/// inside frames (the stall a switch costs without building ahead).
pub fn walk_report(rows: &[Row]) -> String {
    let mut out = String::new();
    for (c, s) in by_cell(rows).into_iter().filter(|(c, _)| is_trace(&c.link)) {
        out += &format!(
            "\nThe {} trace, {} on {} (means of the runs):\n\n\
             | strategy | p50 ms | p95 ms | frames/s | late frames | cut switches | longest switch wait ms | plan building in frames ms |\n\
             |---|---:|---:|---:|---:|---:|---:|---:|\n",
            c.link, c.model, c.pair
        );
        for st in Strategy::ALL {
            if let Some(runs) = s.get(st.name()) {
                out += &format!(
                    "| {} | {:.1} | {:.1} | {:.2} | {} | {:.1} | {:.0} | {:.0} |\n",
                    st.name(),
                    mean(runs, |r| r.latency_ms),
                    mean(runs, |r| r.p95_ms),
                    mean(runs, |r| r.throughput_fps),
                    match runs.iter().all(|r| r.deadline_miss_share.is_some()) {
                        true =>
                            format!("{:.0}%", mean(runs, |r| r.deadline_miss_share.unwrap_or(0.0)) * 100.0),
                        false => "–".into(),
                    },
                    mean(runs, |r| r.cut_switches as f64),
                    mean(runs, |r| r.switch_wait_max_ms),
                    mean(runs, |r| r.plan_build_ms),
                );
            }
        }
    }
    out
}

/// The report: the headline table; on DeepWear's era pair alone, beside
/// DeepWear's published figures; the walk-away trace; then every cell's
/// latencies.
pub fn report(rows: &[Row]) -> String {
    let all = rows;
    let two: Vec<Row> = rows.iter().filter(|r| r.cell.edge.is_empty()).cloned().collect();
    let rows = two.as_slice();
    if rows.is_empty() {
        return crate::tiers::deepwear_cloud_report(all);
    }
    let mut out = headline_table(rows);
    out += &head_to_head_table(rows);
    for pair in std::iter::once(DEEPWEAR_PAIR).chain(MEASURED_PAIRS) {
        let era: Vec<Row> = rows.iter().filter(|r| r.cell.pair == pair).cloned().collect();
        let table = headline_table(&era);
        if table.is_empty() {
            continue;
        }
        let what = match pair {
            DEEPWEAR_PAIR => "DeepWear's era pair, profiles assumed from the chips' specifications",
            _ => "DeepWear's pair as the paper measured it, profiles calibrated from its figures",
        };
        out += &format!(
            "\nOn {pair} alone ({what}). DeepWear's published figures: \
             2.62× over wearable-only, 1.95× over handheld-only, 32.7% and 18.0% less energy.\n\n"
        );
        out += &table;
    }
    out += &walk_report(rows);
    out += &rate_report(rows);
    out += &lossy_report(rows);
    out += &crate::deepwear::report(rows);
    out += "\nPer cell: p50 ms (mean of the runs) per strategy.\n\n| model | pair | link | load | weights | hint | mode | encodings |";
    for s in Strategy::ALL {
        out += &format!(" {} |", s.name());
    }
    out += "\n|---|---|---|---:|---|---|---|---|";
    out += &"---:|".repeat(Strategy::ALL.len());
    out += "\n";
    for (c, s) in by_cell(rows) {
        out += &format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            c.model,
            c.pair,
            c.link,
            c.load,
            c.weights,
            c.hint,
            c.mode,
            match c.accuracy.as_str() {
                "" => "lossless".to_string(),
                budget => format!("lossy ({budget})"),
            }
        );
        for st in Strategy::ALL {
            match s.get(st.name()) {
                Some(runs) => out += &format!(" {:.1} |", mean(runs, |r| r.latency_ms)),
                None => out += " – |",
            }
        }
        out += "\n";
    }
    out += &crate::tiers::deepwear_cloud_report(all);
    out
}

/// The subjects for `names`: zoo models (generated), real models (with
/// their real input and, where it fits, their card), and ONNX files (random
/// inputs, `file_args`: their `--input-shape` / `--dim` flags).
fn subjects(
    names: &[String],
    (file_args, file_shapes): (&[String], &tandem::InputShapes),
    (root, bins): (&Path, &crate::bins::Bins),
) -> anyhow::Result<BTreeMap<String, Subject>> {
    let mut out = BTreeMap::new();
    for n in names.iter().filter(|n| n.ends_with(".onnx")) {
        let file = std::fs::canonicalize(n).with_context(|| format!("--model {n}"))?;
        let models_dir = file.parent().context("a model directory")?.to_path_buf();
        let (args, shapes) = (file_args.to_vec(), file_shapes.clone());
        out.insert(n.clone(), Subject { name: n.clone(), file, args, models_dir, shapes });
    }
    let names: Vec<String> = names.iter().filter(|n| !n.ends_with(".onnx")).cloned().collect();
    let names = names.as_slice();
    let zoo: Vec<&String> = names.iter().filter(|n| ZOO.contains(&n.as_str())).collect();
    let zoo_dir = root.join("models/cache/zoo");
    if !zoo.is_empty() {
        let status = Command::new(bins.path("tandem-models"))
            .arg("gen")
            .arg("--out")
            .arg(&zoo_dir)
            .args(&zoo)
            .stdout(Stdio::null())
            .status()
            .context("tandem-models gen")?;
        if !status.success() {
            bail!("tandem-models gen failed");
        }
        for n in zoo {
            let file = zoo_dir.join(format!("{n}.onnx"));
            out.insert(
                n.clone(),
                Subject {
                    name: n.clone(),
                    file,
                    args: vec![],
                    models_dir: zoo_dir.clone(),
                    shapes: tandem::InputShapes::none(),
                },
            );
        }
    }
    let tflite: Vec<&String> = names.iter().filter(|n| n.starts_with(crate::workload::TFLITE)).collect();
    if !tflite.is_empty() {
        let set = tandem_models::tflite::ensure_tflite_models()?;
        for n in tflite {
            let name = &n[crate::workload::TFLITE.len()..];
            let m = set.get(name).with_context(|| format!("no TFLite model named {name}"))?;
            if let Some(op) = &m.refuse {
                bail!("{n}: Tandem refuses it (custom op {op})");
            }
            let mut args = vec![];
            for (input, file) in m.input_names.iter().zip(&m.inputs) {
                args.extend(["--input".to_string(), format!("{input}={}", set.path(file).display())]);
            }
            let file = set.path(&m.file);
            let models_dir = file.parent().context("a model directory")?.to_path_buf();
            let shapes = tandem::InputShapes::none();
            out.insert(n.clone(), Subject { name: n.clone(), file, args, models_dir, shapes });
        }
    }
    let real: Vec<&String> = names
        .iter()
        .filter(|n| !ZOO.contains(&n.as_str()) && !n.starts_with(crate::workload::TFLITE))
        .collect();
    if !real.is_empty() {
        let set = tandem_models::real::ensure_real_models()?;
        for n in real {
            let e =
                set.get(n).with_context(|| format!("no model named {n} (zoo: {ZOO:?}, or a real model)"))?;
            let input =
                e.inputs.first().with_context(|| format!("{n} has no input to feed (refused by tract)"))?;
            let mut args = vec![];
            for spec in &e.input_shapes {
                args.extend(["--input-shape".to_string(), spec.clone()]);
            }
            args.extend(["--input".to_string(), set.path(input).display().to_string()]);
            if let Some(card) = tandem_models::real::card_path(n) {
                let fits = tandem::card::ModelCard::load(&card)?.input_shapes()
                    == tandem::InputShapes::parse(&e.input_shapes)?;
                if fits {
                    args.extend(["--card".to_string(), card.display().to_string()]);
                }
            }
            let file = set.path(&e.file);
            let models_dir = file.parent().context("a model directory")?.to_path_buf();
            let shapes = tandem::InputShapes::parse(&e.input_shapes)?;
            out.insert(n.clone(), Subject { name: n.clone(), file, args, models_dir, shapes });
        }
    }
    Ok(out)
}

/// A running `tandem-handheld serve`, stopped when dropped.
struct Handheld {
    child: Child,
    addr: String,
}

impl Handheld {
    fn start(
        runs: &Runs,
        profile: &str,
        load: u32,
        battery: Option<u32>,
        models: &Path,
        extra: &[String],
    ) -> anyhow::Result<Handheld> {
        let mut cmd = Command::new(runs.bins.path("tandem-handheld"));
        cmd.args(["serve", "--listen", "127.0.0.1:0", "--profile", profile, "--models"]).arg(models);
        cmd.arg("--keys").arg(&runs.keys.0);
        runs.engine_args(&mut cmd);
        if load > 0 {
            cmd.args(["--load", &load.to_string()]);
        }
        if let Some(b) = battery {
            cmd.args(["--battery", &b.to_string()]);
        }
        cmd.args(extra);
        let mut child =
            cmd.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().context("tandem-handheld serve")?;
        let mut stdout = BufReader::new(child.stdout.take().context("its stdout")?);
        let mut line = String::new();
        stdout.read_line(&mut line)?;
        // Keep reading what it prints, so that it never writes to a closed or full pipe.
        std::thread::spawn(move || stdout.lines().map_while(Result::ok).for_each(drop));
        let addr = line.trim().strip_prefix("listening on ").map(str::to_string);
        match addr {
            Some(addr) => Ok(Handheld { child, addr }),
            None => {
                let _ = child.kill();
                bail!("the handheld did not start: {line:?}")
            }
        }
    }
}

impl Drop for Handheld {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How each run goes.
struct Runs<'a> {
    /// The binaries started.
    bins: &'a crate::bins::Bins,
    /// The output directory (the traces' schedules, frames files).
    out: &'a Path,
    /// Measured frames per run (single inference and streams).
    frames: usize,
    /// The traces, by name.
    traces: &'a BTreeMap<String, Trace>,
    /// The paired keystores (handheld, wearable): every run is encrypted.
    keys: (PathBuf, PathBuf),
    /// Tandem's runs choose the watch's cluster and frequency too (`--dvfs`).
    dvfs: bool,
    /// Every process's `--engine`.
    engine: tandem::engine::EngineChoice,
    /// onnxruntime's library, passed to every process when an engine may use it.
    ort_lib: Option<PathBuf>,
}

impl Runs<'_> {
    /// `--engine` (and `--ort-lib`) for a process.
    fn engine_args(&self, cmd: &mut Command) {
        cmd.args(["--engine", &self.engine.to_string()]);
        if let Some(lib) = &self.ort_lib {
            cmd.arg("--ort-lib").arg(lib);
        }
    }
}

/// Runs `arm` in `cell` once (with `edge`'s arguments in an edge cell):
/// the stream's summary as a row.
fn run_one(
    runs: &Runs,
    subject: &Subject,
    cell: &Cell,
    (arm, edge): (&crate::tiers::Arm, Option<&crate::tiers::EdgeRun>),
    handheld: &Handheld,
    run: u32,
) -> anyhow::Result<Row> {
    let strategy = arm.strategy;
    let mut frames = runs.frames;
    let (watch, _) = cell.pair.split_once('+').context("pair")?;
    let hint = match cell.hint.as_str() {
        "mid" => "200",
        "inf" => "inf",
        _ => "0",
    };
    let mut cmd = Command::new(runs.bins.path("tandem-wearable"));
    cmd.args(["stream", "--model"]).arg(&subject.file);
    let link = if is_trace(&cell.link) {
        let trace = runs.traces.get(&cell.link).with_context(|| format!("no trace named {}", cell.link))?;
        frames = trace.frames();
        cmd.arg("--schedule").arg(trace.path_in(runs.out));
        cmd.args(["--fps", &TRACE_FPS.to_string()]);
        cmd.arg("--frames-out").arg(frames_path(runs.out, &trace.name, &subject.name, arm.name, run));
        TRACE_LINK
    } else {
        cell.link.as_str()
    };
    if !cell.accuracy.is_empty() {
        cmd.args(["--encodings", "lossy", "--accuracy", &cell.accuracy, "--check-accuracy"]);
    }
    if let Some(hz) = rate_of(cell) {
        // Enough frames for a share of late ones to mean something.
        frames = (runs.frames * 4).max(20);
        cmd.args(["--fps", &hz.to_string()]);
    }
    cmd.args(["--connect", &handheld.addr, "--link", link, "--profile", watch, "--slowdown", "profile"]);
    cmd.arg("--keys").arg(&runs.keys.1);
    runs.engine_args(&mut cmd);
    cmd.args(["--frames", &frames.to_string(), "--warmup", "1", "--latency-hint", hint]);
    cmd.args(["--strategy", strategy.name()]);
    if runs.dvfs && strategy == Strategy::Tandem {
        cmd.arg("--dvfs");
    }
    if let (Some(edge), Some(link)) = (edge, crate::tiers::EdgeLink::named(&cell.edge)) {
        cmd.args(crate::tiers::wearable_args(arm, &link, edge));
    }
    if cell.mode == "single" {
        cmd.arg("--no-pipeline");
    }
    cmd.args(["--battery", if cell.weights == "low-watch" { "15" } else { "80" }]);
    if cell.weights == "capacity" {
        cmd.args(["--energy-weights", "capacity"]);
    }
    cmd.args(&subject.args);
    let out = cmd.stderr(Stdio::piped()).output().context("tandem-wearable stream")?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().unwrap_or_default();
    if !out.status.success() || line.is_empty() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().rev().take(5).collect();
        bail!(
            "{} {} in {cell:?} failed ({}): {}",
            subject.name,
            arm.name,
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    let j: serde_json::Value = serde_json::from_str(line).with_context(|| format!("its summary: {line}"))?;
    let f = |k: &str| j[k].as_f64().with_context(|| format!("no {k} in {line}"));
    Ok(Row {
        strategy: arm.name.into(),
        cell: cell.clone(),
        run,
        latency_ms: f("p50_ms")?,
        p95_ms: f("p95_ms")?,
        throughput_fps: f("throughput_fps")?,
        wearable_j: f("wearable_j_per_frame")?,
        handheld_j: f("handheld_j_per_frame")?,
        up_bytes: j["up_bytes"].as_u64().unwrap_or(0),
        cut_switches: j["cut_switches"].as_u64().unwrap_or(0),
        switch_wait_max_ms: j["switch_wait_max_ms"].as_f64().unwrap_or(0.0),
        plan_build_ms: j["plan_build_ms"].as_f64().unwrap_or(0.0),
        placement: j["ran_at"].as_str().map(|p| match p {
            "watch" => p.to_string(),
            cut => format!("{cut} up {} B", j["up_bytes"].as_u64().unwrap_or(0)),
        }),
        engines: j["engines"]["prefix"]
            .as_str()
            .map(|p| format!("{p}+{}", j["engines"]["suffix"].as_str().unwrap_or("?"))),
        frames: j["frames"].as_u64().unwrap_or(0),
        edge_frames: j["edge_frames"].as_u64().unwrap_or(0),
        edge_failures: j["edge_failures"].as_u64().unwrap_or(0),
        deadline_miss_share: j["deadline_miss_share"].as_f64(),
        accuracy_cost: j["accuracy"]["worst"].as_f64(),
        accuracy_over: j["accuracy"]["over_budget"].as_u64(),
    })
}

/// `tandem-bench compare`.
/// How each run is made.
pub struct Settings {
    /// Measured frames per run.
    pub frames: usize,
    /// Runs of each strategy per cell (one with `quick`).
    pub runs: usize,
    /// Tandem's runs choose the watch's cluster and frequency too.
    pub dvfs: bool,
    /// The engine every process runs on.
    pub engine: tandem::engine::EngineChoice,
    /// Only the base cells.
    pub base_only: bool,
    /// Only the cells on DeepWear's pairs ([`is_era`]).
    pub era_only: bool,
    /// Only the cells at a source rate ([`rate_of`]).
    pub rate_only: bool,
    /// Which edge cells run.
    pub edge: EdgeGrid,
    /// The input shapes of models given as files (for the edge's suffixes).
    pub shapes: tandem::InputShapes,
    /// Link trace files streamed over beside the built-in walk-away trace (`--trace`).
    pub traces: Vec<PathBuf>,
}

pub fn compare(
    out: &Path,
    quick: bool,
    models: Vec<String>,
    file_args: &[String],
    Settings {
        frames,
        runs: runs_per_cell,
        dvfs,
        engine,
        base_only,
        era_only,
        rate_only,
        edge,
        shapes,
        traces,
    }: Settings,
    resume: bool,
) -> anyhow::Result<()> {
    let ort_lib = match engine {
        tandem::engine::EngineChoice::One(tandem::engine::Engine::Tract) => None,
        _ => Some(tandem_models::ensure_onnxruntime()?),
    };
    let root = tandem_models::workspace_root();
    let models = if models.is_empty() {
        if quick {
            vec![WALK_MODEL.to_string(), "mnist".to_string()]
        } else {
            let mut all: Vec<String> = ZOO.iter().map(|s| s.to_string()).collect();
            let real = tandem_models::real::ensure_real_models()?;
            all.extend(real.models.iter().filter(|e| !e.inputs.is_empty()).map(|e| e.name.clone()));
            let tflite = tandem_models::tflite::ensure_tflite_models()?;
            all.extend(
                tflite
                    .models
                    .iter()
                    .filter(|m| m.refuse.is_none() && !m.inputs.is_empty())
                    .map(|m| format!("{}{}", crate::workload::TFLITE, m.name)),
            );
            all
        }
    } else {
        models
    };
    let bins = crate::bins::Bins::beside_me()?;
    eprintln!("tandem-bench compare: {}", bins.describe());
    let subjects = subjects(&models, (file_args, &shapes), (&root, &bins))?;
    std::fs::create_dir_all(out.join("frames"))?;
    // The traces, each written where its runs read it (a tenth as long with --quick: the
    // walk-away trace's steps then last 0.5–1 s, 2–5 frames each).
    let mut all = vec![Trace::walk_away()];
    for path in &traces {
        all.push(Trace::from_file(path)?);
    }
    let mut traces = BTreeMap::new();
    for t in all {
        let t = if quick { t.scaled(0.1) } else { t };
        std::fs::write(t.path_in(out), &t.text)?;
        if traces.insert(t.name.clone(), t).is_some() {
            bail!("two traces have one name: name each file apart");
        }
    }
    let names: Vec<&str> = traces.keys().map(String::as_str).collect();
    // Paired once, as a user would: every strategy runs over encrypted links.
    let keys_dir = out.join("keys");
    let _ = std::fs::remove_dir_all(&keys_dir);
    let keys =
        tandem_tools::testing::pair(&bins.path("tandem-handheld"), &bins.path("tandem-wearable"), &keys_dir)
            .context("pairing")?;
    let runs = Runs { bins: &bins, out, frames, traces: &traces, keys, dvfs, engine, ort_lib };
    let results = out.join("results.jsonl");
    let mut rows: Vec<Row> = vec![];
    if resume && results.exists() {
        rows = read_rows(&results)?;
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(resume)
        .write(true)
        .truncate(!resume)
        .open(&results)?;
    let work = crate::workload::of(&models)?;
    let mut cells = grid(&models, quick, (edge, &work), &names);
    if base_only {
        cells.retain(|c| *c == Cell::base(&c.model));
    }
    if era_only {
        cells.retain(is_era);
    }
    if rate_only {
        cells.retain(|c| rate_of(c).is_some());
    }
    // Interleaved runs per strategy and cell (two unless told); one for the
    // quick grid (CI's smoke of the harness: its figures are not reported).
    let runs_per_cell = if quick { 1 } else { runs_per_cell };
    let arms = crate::tiers::arms;
    let done = |c: &Cell| rows.iter().filter(|r| &r.cell == c).count() >= arms(c).len() * runs_per_cell;
    let todo: Vec<Cell> = cells.iter().filter(|c| !done(c)).cloned().collect();
    let total: usize = todo.iter().map(|c| arms(c).len() * runs_per_cell).sum();
    let bar = indicatif::ProgressBar::new(total as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{bar:40} {pos}/{len} runs, {elapsed} elapsed, ~{eta} left: {msg}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar.enable_steady_tick(Duration::from_secs(1));
    // The edge server of the model whose edge cells run: its name, the
    // whole model's cut's key, the server.
    let mut edge_server: Option<(String, String, tandem_oip::testing::OipServer)> = None;
    for cell in &todo {
        // Half-done cells start over: their runs are interleaved.
        rows.retain(|r| &r.cell != cell);
        let subject = &subjects[&cell.model];
        let (_, phone) = cell.pair.split_once('+').context("pair")?;
        let battery = (cell.weights != "charging-phone").then_some(80);
        let link = crate::tiers::EdgeLink::named(&cell.edge);
        if link.is_some() && edge_server.as_ref().is_none_or(|(m, _, _)| *m != cell.model) {
            // The last model's server stops first.
            drop(edge_server.take());
            bar.set_message(format!("{}: starting the edge (KServe)", cell.model));
            let model = tandem::Model::from_path(&subject.file, &subject.shapes)
                .with_context(|| format!("{}", subject.file.display()))?;
            let repo = out.join("edge-repo").join(cell.model.replace(['/', '\\'], "_"));
            let _ = std::fs::remove_dir_all(&repo);
            let whole = crate::tiers::export_repo(&model, &repo)?;
            let server = tandem_oip::testing::OipServer::start(&repo)
                .context("the edge cells need an Open Inference Protocol server (KServe)")?;
            edge_server = Some((cell.model.clone(), whole, server));
        }
        let slowdown = tandem::device::DeviceProfile::load(phone)?.slowdown.max(1.0);
        let edge_run = match (&edge_server, link) {
            (Some((_, whole, server)), Some(_)) => {
                Some(crate::tiers::EdgeRun { url: server.url(), whole: whole.as_str(), slowdown })
            }
            _ => None,
        };
        // The phone computes at its profile's speed in every cell (until
        // the thirteenth session only the edge cells said so, and the
        // others ran every phone at this host's speed).
        let extra = match (&edge_run, link) {
            (Some(e), Some(l)) => crate::tiers::handheld_args(&l, e.url, slowdown),
            _ => vec!["--slowdown".to_string(), slowdown.to_string()],
        };
        let handheld = Handheld::start(&runs, phone, cell.load, battery, &subject.models_dir, &extra)?;
        let mut cell_rows = vec![];
        for run in 1..=runs_per_cell as u32 {
            for arm in arms(cell) {
                bar.set_message(format!("{} {} {} {} run {run}", cell.model, cell.link, cell.edge, arm.name));
                cell_rows.push(run_one(&runs, subject, cell, (&arm, edge_run.as_ref()), &handheld, run)?);
                bar.inc(1);
            }
        }
        for r in &cell_rows {
            writeln!(file, "{}", serde_json::to_string(r)?)?;
        }
        file.flush()?;
        rows.extend(cell_rows);
    }
    bar.finish_and_clear();
    drop(edge_server);
    write_report(out, &rows, &format!("Measured with the {}.", bins.describe()))
}

/// `DIR/report.md` and the plots from `rows`, after `header`; the report
/// also goes to stdout.
fn write_report(out: &Path, rows: &[Row], header: &str) -> anyhow::Result<()> {
    let mut text = format!("{header}\n\n");
    text += &report(rows);
    let two_tiers: Vec<Row> = rows.iter().filter(|r| r.cell.edge.is_empty()).cloned().collect();
    let plots = crate::plots::plots(out, &two_tiers)?;
    text += &format!("\nPlots: {}.\n", plots.join(", "));
    std::fs::write(out.join("report.md"), &text)?;
    println!("{text}");
    Ok(())
}

/// `tandem-bench compare --report-only`: the report and plots again from
/// `DIR/results.jsonl` (a run stopped early, or several runs' lines put
/// together), nothing run.
pub fn report_only(out: &Path) -> anyhow::Result<()> {
    let results = out.join("results.jsonl");
    let rows = read_rows(&results)?;
    write_report(out, &rows, &format!("From {} ({} runs; nothing run again).", results.display(), rows.len()))
}

/// The rows of a results.jsonl, each checked: a latency, throughput or
/// energy that is negative or not finite is refused, naming its line.
fn read_rows(results: &Path) -> anyhow::Result<Vec<Row>> {
    let text = std::fs::read_to_string(results).with_context(|| results.display().to_string())?;
    let mut rows: Vec<Row> = vec![];
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let row: Row =
            serde_json::from_str(line).with_context(|| format!("{}:{}", results.display(), i + 1))?;
        let figures = [row.latency_ms, row.p95_ms, row.throughput_fps, row.wearable_j, row.handheld_j];
        anyhow::ensure!(
            figures.iter().all(|f| f.is_finite() && *f >= 0.0),
            "{}:{}: a latency, throughput or energy that is negative or not finite",
            results.display(),
            i + 1
        );
        rows.push(row);
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saved_rows_with_a_negative_or_endless_figure_are_refused_by_line() -> anyhow::Result<()> {
        let dir = std::env::temp_dir().join(format!("tandem-read-rows-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let path = dir.join("results.jsonl");
        let good = serde_json::to_string(&row("tandem", "m", 1, 10.0, 0.5))?;
        std::fs::write(&path, format!("{good}\n\n{good}\n"))?;
        assert_eq!(read_rows(&path)?.len(), 2, "a blank line is skipped");
        let cases =
            [("latency_ms", "-1.0"), ("wearable_j", "-0.5"), ("p95_ms", "1e999"), ("handheld_j", "-1e999")];
        for (field, bad) in cases {
            // The figure as text. JSON has no infinity: 1e999 (what a
            // writer's overflow would leave) is refused by the parser,
            // still naming the line; the negative ones by the check.
            let mut v: serde_json::Value = serde_json::from_str(&good)?;
            v[field] = serde_json::json!(123_456.5);
            let line = serde_json::to_string(&v)?.replace("123456.5", bad);
            assert!(line.contains(bad), "{line}");
            std::fs::write(&path, format!("{good}\n{line}\n"))?;
            let err = format!("{:#}", read_rows(&path).expect_err(field));
            assert!(err.contains("results.jsonl:2"), "{field} = {bad}: {err}");
        }
        std::fs::remove_dir_all(&dir)?;
        Ok(())
    }

    fn row(strategy: &str, model: &str, run: u32, latency_ms: f64, wearable_j: f64) -> Row {
        Row {
            strategy: strategy.into(),
            cell: grid(&[model.to_string()], true, (EdgeGrid::Off, &BTreeMap::new()), &["walk-away"])
                .remove(0),
            run,
            latency_ms,
            p95_ms: latency_ms,
            throughput_fps: 1e3 / latency_ms,
            wearable_j,
            handheld_j: 0.0,
            // Everyone but wearable-only sends something, unless a test says otherwise.
            up_bytes: if strategy == "wearable-only" { 0 } else { 1000 },
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

    /// Two cells with hand-computed headlines: every figure can be checked.
    #[test]
    fn headlines_are_geometric_means_over_complete_cells() {
        let mut rows = vec![];
        for (model, wearable, handheld, others) in [("a", 100.0, 400.0, 50.0), ("b", 100.0, 25.0, 50.0)] {
            for run in 1..=2 {
                rows.push(row("wearable-only", model, run, wearable, 1.0));
                rows.push(row("handheld-only", model, run, handheld, 0.5));
                for s in Strategy::ALL.iter().skip(2) {
                    rows.push(row(
                        s.name(),
                        model,
                        run,
                        if run == 1 { others * 0.9 } else { others * 1.1 },
                        0.25,
                    ));
                }
            }
        }
        // A cell missing strategies is left out.
        rows.push(row("tandem", "c", 1, 1.0, 1.0));
        let h = summarize(&rows);
        let tandem = h.iter().find(|h| h.strategy == "tandem").expect("tandem");
        assert_eq!(tandem.cells, 2);
        // vs wearable-only: 2× and 2×; vs handheld-only: 8× and 0.5×: geomean 2×.
        assert!((tandem.speedup_vs_wearable - 2.0).abs() < 1e-9, "{tandem:?}");
        assert!((tandem.speedup_vs_handheld - 2.0).abs() < 1e-9, "{tandem:?}");
        assert!((tandem.watch_energy_change + 0.75).abs() < 1e-9, "{tandem:?}");
        // Best in a: 50 (everyone but the baselines); in b: handheld-only's 25.
        assert!((tandem.within_5pct_of_best - 0.5).abs() < 1e-9, "{tandem:?}");
        assert!((tandem.worst_run_spread - (55.0 / 45.0 - 1.0)).abs() < 1e-9, "{tandem:?}");
        let handheld = h.iter().find(|h| h.strategy == "handheld-only").expect("handheld-only");
        assert!((handheld.within_5pct_of_best - 0.5).abs() < 1e-9, "{handheld:?}");
        // Its intervals hold the estimates; against handheld-only the two
        // cells disagree (8× and 0.5×), so that interval is the wider.
        let ((wl, wh), (hl, hh)) = tandem.speedup_intervals.expect("intervals");
        assert!(wl <= 2.0 && 2.0 <= wh && hl < 2.0 && 2.0 < hh, "{tandem:?}");
        assert!(hh - hl > 4.0 * (wh - wl), "{tandem:?}");
        let text = report(&rows);
        let line = text.lines().find(|l| l.starts_with("| tandem | 2 |")).expect("tandem's row");
        assert!(
            line.starts_with(&format!("| tandem | 2 | 2.00× ({wl:.2}–{wh:.2}) | 2.00× ({hl:.2}–{hh:.2}) |")),
            "{line}"
        );
        assert!(line.contains("| 2.00× | 2.00× | -75% | -50% | 50% | 50% | 0.707 ("), "{line}");
        assert!(line.ends_with("| – | 22% |"), "{line}");
        // Against each cell's best: 1 in a (50 the best), 25 / 50 in b.
        let (g, interval) = tandem.objective_vs_best.expect("cells");
        assert!((g - 0.5f64.sqrt()).abs() < 1e-9, "{tandem:?}");
        let (lo, hi) = interval.expect("interval");
        // Resamples of a alone (a quarter) give at least 45 / 55 in each;
        // of b alone at most 25 / 45.
        assert!(lo < g && g < hi && hi <= 1.0, "{tandem:?}");
        // No run says where it ran: nothing pools, the same figure.
        assert_eq!(tandem.objective_vs_best_pooled.map(|f| f.0), Some(g));
        assert!(line.contains(&format!("| {g:.3} ({lo:.3}–{hi:.3}) | {g:.3} (")), "{line}");
        // Both cells at PropT 0: the objective is latency, as the speedup.
        assert!(line.contains(&format!("| 2.00× ({wl:.2}–{wh:.2}) (2 cells) |")), "{line}");
    }

    /// Tandem paired with each strategy by cell: a latency cell and an
    /// energy cell (PropT ∞), hand-computed ratios on both figures.
    #[test]
    fn head_to_head_pairs_by_cell_on_latency_and_on_the_objective() {
        let mut rows = vec![];
        // (model, hint, Tandem's latency and watch energy, DADS's); the
        // others as Tandem. In c (PropT 200 ms) DADS misses the bound.
        for (model, hint, tandem, dads) in [
            ("a", "0", (50.0, 1.0), (60.0, 1.0)),
            ("b", "inf", (80.0, 0.5), (40.0, 1.0)),
            ("c", "mid", (100.0, 1.0), (300.0, 1.0)),
        ] {
            for run in 1..=2 {
                for s in Strategy::ALL {
                    let (latency, joules) = if s == Strategy::Dads { dads } else { tandem };
                    let mut r = row(s.name(), model, run, latency, joules);
                    r.cell.hint = hint.into();
                    rows.push(r);
                }
            }
        }
        let h = head_to_head(&rows);
        assert_eq!(h.len(), Strategy::ALL.len() - 1);
        assert!(h.iter().all(|h| h.strategy != "tandem" && h.cells == 3 && h.objective_cells == 2), "{h:?}");
        let dads = h.iter().find(|h| h.strategy == "dads").expect("dads");
        let (latency, latency_interval) = dads.latency.expect("cells");
        let (objective, objective_interval) = dads.objective.expect("cells");
        // Latency: 60/50, 40/80 and 300/100; the objective, without c:
        // 60/50 and (1.0/2)/(0.5/2).
        assert!((latency - (1.2f64 * 0.5 * 3.0).cbrt()).abs() < 1e-9, "{dads:?}");
        assert!((objective - (1.2f64 * 2.0).sqrt()).abs() < 1e-9, "{dads:?}");
        // Runs agree, so the interval spans what drawing the two cells can give.
        let (lo, hi) = objective_interval.expect("interval");
        assert!(1.2 - 1e-9 <= lo && lo < objective && objective < hi && hi <= 2.0 + 1e-9, "{dads:?}");
        let same = h.iter().find(|h| h.strategy == "neurosurgeon").expect("neurosurgeon");
        let even = Some((1.0, Some((1.0, 1.0))));
        assert_eq!((same.latency, same.objective), (even, even));
        // Each strategy's headline on the objective against wearable-only
        // (as Tandem here): DADS 50/60 in a and, at PropT ∞, half of 0.5 J
        // over half of 1.0 J in b; c left out. Its speedup counts b's
        // latency (80/40) instead, and c's.
        let headlines = summarize(&rows);
        let of = |name: &str| headlines.iter().find(|h| h.strategy == name).expect("a headline");
        let (dads_objective, _) = of("dads").objective_vs_wearable.expect("cells");
        assert!((dads_objective - (50.0f64 / 60.0 * 0.5).sqrt()).abs() < 1e-9, "{:?}", of("dads"));
        assert!((of("dads").speedup_vs_wearable - (50.0f64 / 60.0 * 2.0 / 3.0).cbrt()).abs() < 1e-9);
        assert_eq!(of("dads").objective_cells, 2);
        assert_eq!(of("tandem").objective_vs_wearable, even);
        let text = report(&rows);
        let (lo, hi) = latency_interval.expect("interval");
        let line = format!("| dads | 3 | 1.22× ({lo:.2}–{hi:.2}) | 2 | 1.55× (");
        // No run says where it ran: no cell is one pool, and pooling changes nothing.
        assert_eq!((dads.objective_pooled, dads.apart_cells), (dads.objective, 2));
        assert!(text.contains(&line), "{text}");
    }

    /// With placements pooled, a cell where Tandem and another ran at one
    /// placement is even however its runs measured, and a cell where they
    /// chose apart compares every strategy's runs at each one's placement
    /// (hand-computed); the bootstrap keeps the even cell even.
    #[test]
    fn pooled_head_to_head_counts_one_placement_as_even() {
        let mut rows = vec![];
        for run in 1..=2 {
            let second = run == 2;
            // (cell, strategy, latency, placement)
            for (model, s, latency, placement) in [
                // a: every strategy on the watch; DeepWear's runs measured slower by noise.
                ("a", "tandem", if second { 14.0 } else { 10.0 }, "watch"),
                ("a", "deepwear", if second { 16.0 } else { 12.0 }, "watch"),
                ("a", "wearable-only", 11.0, "watch"),
                ("a", "neurosurgeon", 11.0, "watch"),
                ("a", "dads", 11.0, "watch"),
                ("a", "handheld-only", 11.0, "watch"),
                ("a", "handheld-compressed", 11.0, "watch"),
                // b: Tandem, Neurosurgeon and DADS cut; DeepWear and wearable-only on the watch.
                ("b", "tandem", 20.0, "0 up 10 B"),
                ("b", "neurosurgeon", 22.0, "0 up 10 B"),
                ("b", "dads", 22.0, "0 up 10 B"),
                ("b", "deepwear", if second { 34.0 } else { 30.0 }, "watch"),
                ("b", "wearable-only", if second { 30.0 } else { 26.0 }, "watch"),
                ("b", "handheld-only", 50.0, "00 up 99 B"),
                ("b", "handheld-compressed", 50.0, "00 up 88 B"),
            ] {
                rows.push(Row { placement: Some(placement.into()), ..row(s, model, run, latency, 1.0) });
            }
        }
        let h = head_to_head(&rows);
        let of = |name: &str| h.iter().find(|h| h.strategy == name).expect("a strategy").clone();
        let deepwear = of("deepwear");
        // Unpooled: 14/12 in a, 32/20 in b.
        let (unpooled, _) = deepwear.objective.expect("cells");
        assert!((unpooled - (14.0f64 / 12.0 * 32.0 / 20.0).sqrt()).abs() < 1e-9, "{deepwear:?}");
        // Pooled: a even; b the watch's four runs (30, 34, 26, 30) over the cut's six (20, 20, 22 × 4).
        let (g, interval) = deepwear.objective_pooled.expect("cells");
        let b: f64 = 30.0 / (128.0 / 6.0);
        assert!((g - b.sqrt()).abs() < 1e-9, "{deepwear:?}");
        assert_eq!(deepwear.apart_cells, 1);
        // Resamples draw a as it is (1) and b's pools: never below 1, never past 34/20.
        let (lo, hi) = interval.expect("interval");
        assert!((1.0 - 1e-9..=g).contains(&lo) && (g..=34.0 / 20.0).contains(&hi) && lo < hi, "{deepwear:?}");
        // Neurosurgeon ran where Tandem did in both cells: even, with no spread.
        let ns = of("neurosurgeon");
        assert_eq!((ns.objective_pooled, ns.apart_cells), (Some((1.0, Some((1.0, 1.0)))), 0));
        let text = report(&rows);
        assert!(text.contains(&format!("| {:.2}× ({lo:.2}–{hi:.2}) | 1 |\n", g)), "{text}");
        // Tandem's runs in a on another engine: the same layers, not one pool.
        for r in rows.iter_mut().filter(|r| r.cell.model == "a" && r.strategy == "tandem") {
            r.engines = Some("onnxruntime+tract".into());
        }
        let deepwear = head_to_head(&rows).into_iter().find(|h| h.strategy == "deepwear").expect("deepwear");
        assert_eq!(deepwear.apart_cells, 2, "{deepwear:?}");
    }

    /// Edge cells leave the headline and the per-cell table as they were,
    /// and add DeepWear's cloud comparison.
    #[test]
    fn edge_cells_are_reported_apart() {
        let mut rows = vec![];
        for run in 1..=2 {
            for (i, s) in Strategy::ALL.iter().enumerate() {
                rows.push(row(s.name(), "a", run, 10.0 + i as f64, 1.0));
            }
        }
        let before = report(&rows);
        let edge = Cell { edge: "fast-50m".into(), ..rows[0].cell.clone() };
        for arm in crate::tiers::EDGE_ARMS {
            rows.push(Row { cell: edge.clone(), ..row(arm.name, "a", 1, 5.0, 0.5) });
        }
        assert_eq!(summarize(&rows), summarize(&rows[..14]));
        let after = report(&rows);
        assert!(after.starts_with(&before), "{after}");
        assert!(after[before.len()..].contains("## DeepWear's cloud comparison, beside ours"), "{after}");
        assert!(!after[before.len()..].contains("| a | watch-w5+pixel-8-pro |"), "{after}");
    }

    /// With placements pooled, a strategy that ran at the best measured
    /// placement counts as the best even when its own runs were slower
    /// (noise); one that ran elsewhere is judged by its placement's pooled
    /// runs, and one whose runs moved between placements by its own.
    #[test]
    fn pooled_placements_judge_choices_not_noise() {
        let mut rows = vec![];
        for run in 1..=2 {
            let at = |s: &str, latency: f64, placement: Option<&str>| Row {
                placement: placement.map(str::to_string),
                ..row(s, "c", run, latency, 1.0)
            };
            // The watch alone: wearable-only unlucky (12), Tandem lucky (10).
            rows.push(at("wearable-only", 12.0, Some("watch")));
            rows.push(at("tandem", 10.0, Some("watch")));
            rows.push(at("handheld-only", 100.0, Some("all up 1000 B")));
            rows.push(at("handheld-compressed", 60.0, Some("all up 400 B")));
            // Neurosurgeon and DADS at one split: 13 and 11, pooled 12.
            rows.push(at("neurosurgeon", 13.0, Some("split up 500 B")));
            rows.push(at("dads", 11.0, Some("split up 500 B")));
            // DeepWear moved between placements: its own runs, 10.4 (judged,
            // but not the best: that is the best placement's, 11).
            rows.push(at("deepwear", 10.4, None));
        }
        let h = summarize(&rows);
        let get = |n: &str| h.iter().find(|h| h.strategy == n).cloned().expect("a strategy");
        // As measured, wearable-only (12) misses Tandem's 10 by more than 5%.
        assert_eq!(get("wearable-only").within_5pct_of_best, 0.0);
        assert_eq!(get("tandem").within_5pct_of_best, 1.0);
        // Pooled, the watch measures 11 for both: the best placement.
        assert_eq!(get("wearable-only").within_5pct_pooled, 1.0);
        assert_eq!(get("tandem").within_5pct_pooled, 1.0);
        assert_eq!(get("deepwear").within_5pct_pooled, 1.0);
        // The split pools to 12, over 11 × 1.05: a miss for both that ran it.
        assert_eq!(get("dads").within_5pct_pooled, 0.0);
        assert_eq!(get("neurosurgeon").within_5pct_pooled, 0.0);
        // Speedups pooled: wearable-only's 11 over the split's 12.
        let pooled = |n: &str| get(n).pooled_speedup_vs_wearable.expect("latency cells");
        assert!((pooled("dads") - 11.0 / 12.0).abs() < 1e-9);
        // Against the best: as measured, Tandem's 10; pooled, the watch's
        // 11 (DeepWear's own 10.4 is judged at the best, not setting it).
        let of_best = |n: &str, pooled: bool| {
            let h = get(n);
            let figure = if pooled { h.objective_vs_best_pooled } else { h.objective_vs_best };
            figure.expect("cells").0
        };
        for (n, unpooled, pooled) in [
            ("wearable-only", 10.0 / 12.0, 1.0),
            ("tandem", 1.0, 1.0),
            ("dads", 10.0 / 11.0, 11.0 / 12.0),
            ("neurosurgeon", 10.0 / 13.0, 11.0 / 12.0),
            ("deepwear", 10.0 / 10.4, 1.0),
            ("handheld-only", 0.1, 0.11),
        ] {
            assert!((of_best(n, false) - unpooled).abs() < 1e-9, "{n}: {:?}", get(n));
            assert!((of_best(n, true) - pooled).abs() < 1e-9, "{n}: {:?}", get(n));
        }
        // The watch's runs are one pool for both, and so one draw: the two
        // have one interval; it reaches below 1, as the split's runs (11,
        // 13) overlap the watch's (10, 12) and some resamples put it ahead.
        let watch = get("wearable-only").objective_vs_best_pooled;
        assert_eq!(get("tandem").objective_vs_best_pooled, watch);
        let (_, interval) = watch.expect("cells");
        let (lo, hi) = interval.expect("interval");
        assert!(lo < 1.0 && hi == 1.0, "{watch:?}");
        assert!((pooled("tandem") - 1.0).abs() < 1e-9);
        assert!((get("tandem").speedup_vs_wearable - 1.2).abs() < 1e-9);
        // A PropT ∞ cell where Tandem is 10× slower (for less energy) counts
        // in the speedup over every cell, not in the latency cells' pooled one.
        let slow: Vec<Row> = rows
            .iter()
            .map(|r| {
                let latency_ms = if r.strategy == "tandem" { 120.0 } else { 12.0 };
                Row { cell: Cell { hint: "inf".into(), ..r.cell.clone() }, latency_ms, ..r.clone() }
            })
            .collect();
        let h = summarize(&[rows, slow].concat());
        let tandem = h.iter().find(|h| h.strategy == "tandem").expect("tandem");
        assert_eq!(tandem.pooled_speedup_vs_wearable, Some(1.0), "{tandem:?}");
        assert!((tandem.speedup_vs_wearable - (1.2f64 * 0.1).sqrt()).abs() < 1e-9, "{tandem:?}");
    }

    /// PropT ∞ cells are judged by weighted energy, 200 ms cells by energy
    /// within the bound, PropT 0 cells by latency.
    #[test]
    fn hint_cells_are_judged_by_their_objective() {
        let inf = Cell { hint: "inf".into(), ..Cell::base("m") };
        let mid = Cell { hint: "mid".into(), ..Cell::base("m") };
        let r = |latency_ms, wearable_j, handheld_j| Row {
            latency_ms,
            wearable_j,
            handheld_j,
            ..row("tandem", "m", 1, latency_ms, wearable_j)
        };
        let (fast, frugal) = (r(50.0, 1.0, 1.0), r(300.0, 0.2, 0.2));
        assert!(score(&inf, &[&frugal]) < score(&inf, &[&fast]));
        assert!(score(&mid, &[&fast]) < score(&mid, &[&frugal]), "300 ms misses the bound");
        assert!(score(&Cell::base("m"), &[&fast]) < score(&Cell::base("m"), &[&frugal]));
        // Only the watch's energy counts while the phone charges.
        let charging = Cell { weights: "charging-phone".into(), ..inf.clone() };
        assert!(score(&charging, &[&r(10.0, 0.1, 5.0)]) < score(&charging, &[&r(10.0, 0.2, 0.0)]));
        // By capacity on the LG Urbane (410 mAh) and the Nexus 6 (3220): a
        // joule on the phone weighs 410/3220 of one on the watch, so 0.1 J
        // on the watch and 0.5 J on the phone (0.164 J of the watch's) beat
        // 0.2 J on the watch alone, which equal weights prefer.
        let (split, watch) = (r(10.0, 0.1, 0.5), r(10.0, 0.2, 0.0));
        let capacity = Cell { weights: "capacity".into(), pair: MEASURED_PAIRS[0].into(), ..inf.clone() };
        assert!(score(&capacity, &[&split]) < score(&capacity, &[&watch]));
        assert!(score(&inf, &[&split]) > score(&inf, &[&watch]));
        let (ww, wp) = (score(&capacity, &[&r(10.0, 1.0, 0.0)]), score(&capacity, &[&r(10.0, 0.0, 1.0)]));
        assert!((wp / ww - 410.0 / 3220.0).abs() < 1e-12 && (ww + wp - 1.0).abs() < 1e-12, "{ww} {wp}");
    }

    #[test]
    fn the_grid_varies_one_condition_at_a_time() {
        let models = ["m".to_string(), "n".to_string()];
        let none = BTreeMap::new();
        let cells = grid(&models, false, (EdgeGrid::Off, &none), &["walk-away"]);
        let of = |m: &str| cells.iter().filter(|c| c.model == m).cloned().collect::<Vec<_>>();
        // The base, 2 pairs, 3 links, 2 loads, 2 weights, 2 hints, 1 mode,
        // 2 source rates; then DeepWear's era pair over 2 more links, its
        // six setups as measured over its Bluetooth at PropT 0 and ∞; the walk-away trace (on
        // DeepWear's era pair) for the first model only.
        assert_eq!(of("m").len(), 30);
        assert_eq!(of("n").len(), 29);
        let rates: Vec<f64> = of("m").iter().filter_map(rate_of).collect();
        assert_eq!(rates, crate::workload::CAMERA_RATES);
        let base = Cell::base("m");
        assert_eq!(of("m")[0], base);
        for c in &of("m")[1..] {
            let differs = [
                c.pair != base.pair,
                c.link != base.link,
                c.load != base.load,
                c.weights != base.weights,
                c.hint != base.hint,
                c.mode != base.mode,
            ];
            let n = differs.iter().filter(|d| **d).count();
            let era = is_era(c) && c.link != base.link;
            // DeepWear's setups as measured, energy first: pair, link and
            // PropT, energy weighed as the paper counts it.
            if era && c.hint != base.hint {
                assert!(MEASURED_PAIRS.contains(&c.pair.as_str()) && c.hint == "inf", "{c:?}");
                assert_eq!((n, c.weights.as_str()), (4, "capacity"), "{c:?}");
            } else if *c == walk_away_cell("m") {
                // The trace, streamed on the pair where its model's cut moves.
                assert_eq!((n, c.pair.as_str(), is_era(c)), (3, WALK_PAIR, false), "{c:?}");
            } else if era {
                assert_eq!(n, 2, "{c:?}");
            } else {
                assert_eq!(n, 1, "{c:?}");
            }
        }
        assert_eq!(of("m").iter().filter(|c| c.pair == DEEPWEAR_PAIR && is_era(c)).count(), 3);
        for pair in MEASURED_PAIRS {
            let links: Vec<String> = of("m").into_iter().filter(|c| c.pair == pair).map(|c| c.link).collect();
            assert_eq!(links, [ERA_LINKS, ERA_LINKS].concat());
        }
        let quick = grid(&models, true, (EdgeGrid::Off, &none), &["walk-away"]);
        // Two models × 2 links, the walk-away trace and one edge cell for the first.
        assert_eq!(quick.len(), 6);
        assert_eq!(quick.iter().filter(|c| c.link == "walk-away").count(), 1);
        // More traces, more cells, for the first model only.
        let more = grid(&models, true, (EdgeGrid::Off, &none), &["walk-away", "commute"]);
        assert_eq!(
            more.iter().filter(|c| is_trace(&c.link)).map(|c| c.model.as_str()).collect::<Vec<_>>(),
            ["m", "m"]
        );
        assert_eq!(
            quick.iter().filter(|c| !c.edge.is_empty()).map(|c| c.model.as_str()).collect::<Vec<_>>(),
            ["m"]
        );
        // The edge grid: 9 cells a model, after the others or alone.
        assert_eq!(grid(&models, false, (EdgeGrid::With, &none), &["walk-away"]).len(), 59 + 18);
        let only = grid(&models, false, (EdgeGrid::Only, &none), &["walk-away"]);
        assert_eq!(only.len(), 18);
        assert!(only.iter().all(|c| !c.edge.is_empty() && c.link == "ble-2m"));
    }

    /// A model with a budget gets lossy twins of its base cell, of
    /// DeepWear's era pair over Bluetooth classic and of its Urbane with the
    /// Nexus 6's CPU over its Bluetooth (the quick grid: of its
    /// last model's base cell); a model whose inputs arrive at a rate of
    /// their own streams at it instead of a camera's.
    #[test]
    fn budgets_add_lossy_twins_and_sources_set_the_rates() {
        use crate::workload::Workload;
        let models = ["cam".to_string(), "mic".to_string()];
        let work = BTreeMap::from([
            ("cam".to_string(), Workload { budget: Some("argmax".into()), ..Workload::default() }),
            ("mic".to_string(), Workload { budget: None, rates: vec![12.5] }),
        ]);
        let cells = grid(&models, false, (EdgeGrid::Off, &work), &["walk-away"]);
        let lossy: Vec<&Cell> = cells.iter().filter(|c| !c.accuracy.is_empty()).collect();
        let era = |pair: &str, link: &str| Cell {
            accuracy: "argmax".into(),
            pair: pair.into(),
            link: link.into(),
            ..Cell::base("cam")
        };
        assert_eq!(
            lossy,
            [
                &Cell { accuracy: "argmax".into(), ..Cell::base("cam") },
                &era(DEEPWEAR_PAIR, "bt-classic"),
                &era(MEASURED_PAIRS[0], "wear-data-layer"),
            ]
        );
        // Each lossy cell's lossless twin is in the grid too.
        for c in &lossy {
            assert!(cells.contains(&Cell { accuracy: String::new(), ..(*c).clone() }), "{c:?}");
        }
        let rates = |m: &str| cells.iter().filter(|c| c.model == m).filter_map(rate_of).collect::<Vec<_>>();
        assert_eq!(rates("cam"), [15.0, 30.0]);
        assert_eq!(rates("mic"), [12.5]);
        assert_eq!(rate_mode(12.5), "rate12.5");
        let quick = grid(&models, true, (EdgeGrid::Off, &work), &["walk-away"]);
        assert!(quick.iter().all(|c| c.accuracy.is_empty()), "the last model has no budget");
        let quick = grid(&["mic".into(), "cam".into()], true, (EdgeGrid::Off, &work), &["walk-away"]);
        assert_eq!(quick.iter().filter(|c| !c.accuracy.is_empty()).count(), 1);
    }

    /// The lossy table gives each strategy's p50 and worst measured cost,
    /// counts frames over the budget, and sets Tandem's lossless twin beside.
    #[test]
    fn the_lossy_table_shows_speed_and_accuracy_cost() {
        let lossy = Cell { accuracy: "rel:0.02".into(), ..Cell::base("m") };
        let mut rows = vec![];
        for s in Strategy::ALL {
            let mut r = row(s.name(), "m", 1, 100.0, 0.01);
            rows.push(r.clone());
            r.cell = lossy.clone();
            r.latency_ms = if s == Strategy::Tandem { 40.0 } else { 100.0 };
            r.accuracy_cost = Some(if s == Strategy::HandheldCompressed { 0.03 } else { 0.0 });
            r.accuracy_over = Some(u64::from(s == Strategy::HandheldCompressed) * 2);
            rows.push(r);
        }
        let text = lossy_report(&rows);
        assert!(text.contains("| m | watch-w5+pixel-8-pro | ble-2m | rel:0.02 | 100.0 / 0.0e0 |"), "{text}");
        assert!(text.contains("| 100.0 / 3.0e-2 (2 over) |"), "{text}");
        assert!(
            text.trim_end().ends_with("| 40.0 / 0.0e0 | 100.0 |"),
            "Tandem, then its lossless twin: {text}"
        );
        assert!(report(&rows).contains("| lossy (rel:0.02) |"));
    }

    /// Cells at a source rate stay out of the headline; their section gives
    /// each strategy's late share and p95, and counts the cells where
    /// Tandem missed no more deadlines than the best other strategy.
    #[test]
    fn rate_cells_report_late_frames_and_whether_tandem_kept_up() {
        let mut rows = vec![];
        for (hz, tandem_late) in [(15.0, 0.0), (30.0, 0.5)] {
            for s in Strategy::ALL {
                let mut r = row(s.name(), "m", 1, 50.0, 0.01);
                r.cell = Cell { mode: rate_mode(hz), ..Cell::base("m") };
                r.deadline_miss_share = Some(if s == Strategy::Tandem { tandem_late } else { 0.2 });
                rows.push(r);
            }
        }
        // At 45 Hz Tandem ran on the watch like wearable-only, later on more
        // frames: pooled, their runs are one placement's samples, and the
        // others, offloaded, were later still.
        for s in Strategy::ALL {
            let mut r = row(s.name(), "m", 1, 50.0, 0.01);
            r.cell = Cell { mode: rate_mode(45.0), ..Cell::base("m") };
            let (placement, late) = match s {
                Strategy::Tandem => ("watch", 0.4),
                Strategy::WearableOnly => ("watch", 0.2),
                _ => ("a split", 0.5),
            };
            (r.placement, r.deadline_miss_share) = (Some(placement.into()), Some(late));
            rows.push(r);
        }
        let text = rate_report(&rows);
        assert!(text.contains("| m | 15 Hz | 20% / 50 |"), "{text}");
        assert!(
            text.contains("missed no more deadlines than the best other strategy in 1 of 3 cells; "),
            "{text}"
        );
        assert!(text.contains("at Tandem's placement are samples of one thing), in 2 of 3."), "{text}");
        assert!(summarize(&rows).iter().all(|h| h.cells == 0));
        assert_eq!(rate_of(&Cell::base("m")), None);
    }

    /// A trace's table has one row per strategy, with its late frames at
    /// the source's rate when every run reported them.
    #[test]
    fn trace_tables_give_each_strategys_late_frames() {
        let mut rows = vec![];
        for s in Strategy::ALL {
            let mut r = row(s.name(), "m", 1, 100.0, 0.01);
            r.cell = trace_cell("m", "commute");
            r.deadline_miss_share = (s != Strategy::Dads).then_some(0.25);
            rows.push(r);
        }
        let text = walk_report(&rows);
        assert!(text.contains("The commute trace, m on watch-sd400+nexus-6"), "{text}");
        assert!(text.contains("| tandem | 100.0 | 100.0 | 10.00 | 25% |"), "{text}");
        assert!(text.contains("| dads | 100.0 | 100.0 | 10.00 | – |"), "{text}");
        // Trace cells stay out of the headline.
        assert!(summarize(&rows).iter().all(|h| h.cells == 0));
    }

    /// The built-in trace's schedule parses as the link emulator reads it,
    /// falls to its floor in the middle and ends where it began.
    #[test]
    fn the_walk_away_trace_falls_and_recovers() {
        let s = tandem::emulate::Schedule::parse(&Trace::walk_away().text, "walk-away").expect("parses");
        let rates: Vec<f64> = s.steps.iter().map(|st| st.1).collect();
        assert_eq!(s.steps.last().map(|st| st.0), Some(Duration::from_secs(60)));
        let low = rates.iter().position(|&r| r == 30e3).expect("a 30 kbit/s floor");
        assert!(rates[..=low].windows(2).all(|w| w[1] < w[0]), "falls: {rates:?}");
        assert!(rates[low..rates.len() - 1].windows(2).all(|w| w[1] > w[0]), "recovers: {rates:?}");
        assert_eq!(rates[0], rates[rates.len() - 1]);
    }

    /// Pipelining gains: a strategy's streamed throughput over its one-at-a-time throughput, per model.
    #[test]
    fn pipelining_gain_is_stream_over_single_throughput() {
        let mut rows = vec![];
        for (mode, fps) in [("single", 10.0), ("stream", 15.0)] {
            for run in 1..=2 {
                let mut r = row("tandem", "a", run, 100.0, 1.0);
                r.cell = Cell { mode: mode.into(), ..Cell::base("a") };
                r.throughput_fps = fps;
                rows.push(r);
            }
        }
        assert_eq!(pipelining_gains(&rows, "tandem"), vec![("a", 1.5)]);
        assert!(pipelining_gains(&rows, "dads").is_empty());
    }
}
