//! DeepWear's six setups as the paper measured them, beside its published
//! averages. The paper averages over its models on {LG Urbane, Galaxy S2}
//! × {Nexus 6 CPU-interactive, GPU, CPU-powersave} over Bluetooth: speed
//! tuned for latency, energy tuned for energy with both devices weighted
//! equally and the phone's energy scaled by the two batteries' capacities
//! (410/3220 for the Urbane and the Nexus 6). The same here, from the
//! [`MEASURED_PAIRS`] cells: speedups from the PropT 0 cells (geometric
//! means over models), energy savings from the PropT ∞ cells (means over
//! models, model-based energy), for Tandem and for our implementation of
//! DeepWear's rule. Those cells weigh energy that way for every strategy
//! (their weights `capacity`: each device's joules over its battery's
//! capacity), so what a strategy optimizes there is what is counted.

use crate::compare::{by_cell, mean, Cell, Row, ERA_LINKS, MEASURED_PAIRS};

/// DeepWear's published averages: speedup over wearable-only and over
/// handheld-only; energy saved against wearable-only and handheld-only.
pub const PUBLISHED: (f64, f64, f64, f64) = (2.62, 1.95, 0.327, 0.180);

/// A watch's battery over its phone's (mAh / mAh), from the profiles of `pair`.
pub fn battery_ratio(pair: &str) -> Option<f64> {
    let (watch, phone) = pair.split_once('+')?;
    let mah = |name: &str| tandem::device::DeviceProfile::shipped(name).ok()?.battery?.capacity_mah;
    Some(mah(watch)? / mah(phone)?)
}

/// One setup's (or all six's) figures for one strategy.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Figures {
    /// Models with a latency cell / an energy cell.
    pub models: (usize, usize),
    /// Geometric-mean speedup over wearable-only, over handheld-only.
    pub speedup: Option<(f64, f64)>,
    /// Its 95% bootstrap interval over wearable-only.
    pub interval: Option<(f64, f64)>,
    /// Mean energy saved against wearable-only, against handheld-only (0.3: 30% less).
    pub saved: Option<(f64, f64)>,
}

/// The figures of `strategy` over the measured cells whose pair is in `pairs`.
pub fn figures(rows: &[Row], pairs: &[&str], strategy: &str) -> Figures {
    let by = by_cell(rows);
    let lossless_era = |c: &Cell| {
        pairs.contains(&c.pair.as_str()) && ERA_LINKS.contains(&c.link.as_str()) && c.accuracy.is_empty()
    };
    let mut out = Figures::default();
    let (mut log_w, mut log_h, mut paired) = (0.0, 0.0, vec![]);
    let (mut save_w, mut save_h) = (0.0, 0.0);
    for (c, s) in &by {
        let (Some(own), Some(w), Some(h)) = (s.get(strategy), s.get("wearable-only"), s.get("handheld-only"))
        else {
            continue;
        };
        if !lossless_era(c) || c.mode != "single" {
            continue;
        }
        match c.hint.as_str() {
            "0" => {
                let lat = |runs: &[&Row]| mean(runs, |r| r.latency_ms);
                log_w += (lat(w) / lat(own)).ln();
                log_h += (lat(h) / lat(own)).ln();
                paired.push(crate::interval::Paired::new(
                    w.iter().map(|r| r.latency_ms).collect(),
                    own.iter().map(|r| r.latency_ms).collect(),
                ));
                out.models.0 += 1;
            }
            "inf" => {
                let Some(scale) = battery_ratio(&c.pair) else { continue };
                let energy =
                    |runs: &[&Row]| mean(runs, |r| r.wearable_j) + mean(runs, |r| r.handheld_j) * scale;
                save_w += 1.0 - energy(own) / energy(w);
                save_h += 1.0 - energy(own) / energy(h);
                out.models.1 += 1;
            }
            _ => {}
        }
    }
    if out.models.0 > 0 {
        let n = out.models.0 as f64;
        out.speedup = Some(((log_w / n).exp(), (log_h / n).exp()));
        out.interval = crate::interval::geomean_ratio_interval(&paired, 32);
    }
    if out.models.1 > 0 {
        let n = out.models.1 as f64;
        out.saved = Some((save_w / n, save_h / n));
    }
    out
}

/// The report's section: per setup and over all six, Tandem and our
/// DeepWear beside the paper's averages.
pub fn report(rows: &[Row]) -> String {
    if !rows.iter().any(|r| MEASURED_PAIRS.contains(&r.cell.pair.as_str())) {
        return String::new();
    }
    let (w, h, ew, eh) = PUBLISHED;
    let mut out = format!(
        "\nDeepWear's setups as the paper measured them (profiles calibrated from its figures; \
         its Bluetooth as `{}`). Speedups: geometric means over the models of the PropT 0 cells; \
         energy saved: means over the models of the PropT ∞ cells, both devices, the phone's \
         energy scaled by the batteries (as the paper does), model-based; in cells whose weights \
         are `capacity`, every strategy weighs energy that way too. DeepWear published \
         {w}× over wearable-only, {h}× over handheld-only, {:.1}% and {:.1}% less energy, \
         averaged over its six setups.\n\n\
         | setup | models (latency, energy) | Tandem vs wearable-only (95% interval) | vs handheld-only | \
         energy saved vs wearable-only | vs handheld-only | our DeepWear vs wearable-only | vs handheld-only | \
         energy saved vs wearable-only | vs handheld-only |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        ERA_LINKS[0],
        ew * 100.0,
        eh * 100.0
    );
    let mut setups: Vec<(String, Vec<&str>)> =
        MEASURED_PAIRS.iter().map(|p| (p.to_string(), vec![*p])).collect();
    setups.push(("all six".into(), MEASURED_PAIRS.to_vec()));
    let cols = |f: &Figures, with_interval: bool| {
        let speed = match (f.speedup, f.interval.filter(|_| with_interval)) {
            (Some((sw, sh)), Some((lo, hi))) => format!("{sw:.2}× ({lo:.2}–{hi:.2}) | {sh:.2}×"),
            (Some((sw, sh)), None) => format!("{sw:.2}× | {sh:.2}×"),
            (None, _) => "– | –".into(),
        };
        let saved =
            f.saved.map_or("– | –".into(), |(a, b)| format!("{:.1}% | {:.1}%", a * 100.0, b * 100.0));
        format!("{speed} | {saved}")
    };
    for (name, pairs) in &setups {
        let tandem = figures(rows, pairs, "tandem");
        let deepwear = figures(rows, pairs, "deepwear");
        out += &format!(
            "| {name} | {}, {} | {} | {} |\n",
            tandem.models.0,
            tandem.models.1,
            cols(&tandem, true),
            cols(&deepwear, false)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(strategy: &str, pair: &str, hint: &str, latency_ms: f64, energy: (f64, f64)) -> Row {
        let mut r: Row = serde_json::from_value(serde_json::json!({
            "strategy": strategy, "model": "m", "pair": pair, "link": ERA_LINKS[0], "load": 0,
            "weights": "default", "hint": hint, "mode": "single", "run": 1, "latency_ms": latency_ms,
            "p95_ms": latency_ms, "throughput_fps": 1.0, "wearable_j": energy.0, "handheld_j": energy.1,
            "up_bytes": 0, "cut_switches": 0,
        }))
        .expect("a row");
        r.frames = 1;
        r
    }

    /// Hand-computed: Tandem 2x faster than wearable-only and 4x than
    /// handheld-only; energy with the Nexus 6's scaled by 410/3220.
    #[test]
    fn figures_follow_the_papers_accounting() {
        let pair = MEASURED_PAIRS[0];
        let scale = battery_ratio(pair).expect("both batteries");
        assert!((scale - 410.0 / 3220.0).abs() < 1e-12, "{scale}");
        let rows = vec![
            row("wearable-only", pair, "0", 200.0, (1.0, 0.0)),
            row("handheld-only", pair, "0", 400.0, (0.1, 1.0)),
            row("tandem", pair, "0", 100.0, (0.5, 0.5)),
            row("wearable-only", pair, "inf", 200.0, (1.0, 0.0)),
            row("handheld-only", pair, "inf", 400.0, (0.1, 3220.0 / 410.0)),
            row("tandem", pair, "inf", 100.0, (0.4, 0.0)),
        ];
        let f = figures(&rows, &[pair], "tandem");
        assert_eq!(f.models, (1, 1));
        let (w, h) = f.speedup.expect("speedups");
        assert!((w - 2.0).abs() < 1e-9 && (h - 4.0).abs() < 1e-9, "{f:?}");
        let (ew, eh) = f.saved.expect("savings");
        assert!((ew - 0.6).abs() < 1e-9, "{f:?}");
        assert!((eh - (1.0 - 0.4 / 1.1)).abs() < 1e-9, "{f:?}");
        // Other pairs' cells, and lossy ones, are not counted.
        assert_eq!(figures(&rows, &[MEASURED_PAIRS[1]], "tandem"), Figures::default());
        let text = report(&rows);
        assert!(text.contains(&format!("| {pair} | 1, 1 | 2.00×")), "{text}");
        assert!(text.contains("| all six | 1, 1 |"), "{text}");
    }
}
