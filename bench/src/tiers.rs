//! The third tier in `tandem-bench compare` (issue 31): the edge grid,
//! its strategies, the suffix repository the edge serves, and the report
//! section that sets DeepWear's cloud comparison beside ours.
//!
//! **The edge** is a real KServe server (onnxruntime) on loopback
//! ([`tandem_oip::testing::OipServer`]) serving the suffixes of the
//! default edge cuts, at this host's full speed. **The phone** in an edge
//! cell runs with `serve --slowdown` = its profile's `slowdown` (the
//! Pixel 8 Pro 1.3×, the Galaxy A16 2.0× this host), so that it is slower
//! than the edge, as real phones are; the planner prices the edge at the
//! speed the phone measures (a served suffix timed; `--edge-speedup` =
//! that same ratio only if the measurement fails). **The links** to the
//! edge are emulated by the OIP client ([`tandem_oip::EmulatedLink`]): the
//! phone's (`serve --edge-link`) for the relay and three tiers, the
//! watch's own (`--edge-direct-link`) for cloud-only and for three tiers,
//! whose planner may send a frame's input there itself; the watch–phone
//! link stays the base cell's BLE 2M.

use std::path::Path;

use anyhow::Context;
use tandem::client::Strategy;

use crate::compare::{by_cell, mean, score, Cell, Row};

/// A link to the edge server, emulated at `mbit` both ways.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EdgeLink {
    /// Its name in cells and reports.
    pub name: &'static str,
    /// Its rate, both ways, in Mbit/s.
    pub mbit: f64,
    /// Its round trip, in ms.
    pub rtt_ms: f64,
}

impl EdgeLink {
    /// `UP_MBIT,DOWN_MBIT,RTT_MS`, as `serve --edge-link` and the
    /// wearable's `--edge-link` / `--edge-direct-link` take it.
    pub fn spec(&self) -> String {
        format!("{},{},{}", self.mbit, self.mbit, self.rtt_ms)
    }

    /// The link named `name`.
    pub fn named(name: &str) -> Option<EdgeLink> {
        EDGE_LINKS.into_iter().find(|l| l.name == name)
    }
}

/// The edge grid's links: DeepWear's poor (about 100 kbit/s) and good
/// (about 5 Mbit/s) Wi-Fi, whose RTTs it does not give (40 and 20 ms
/// assumed), and a fast link (50 Mbit/s, 20 ms).
pub const EDGE_LINKS: [EdgeLink; 3] = [
    EdgeLink { name: "wifi-100k", mbit: 0.1, rtt_ms: 40.0 },
    EdgeLink { name: "wifi-5m", mbit: 5.0, rtt_ms: 20.0 },
    EdgeLink { name: "fast-50m", mbit: 50.0, rtt_ms: 20.0 },
];

/// The edge grid's phone conditions: (pair, the phone's load in percent,
/// their name in the report).
pub const EDGE_PHONES: [(&str, u32, &str); 3] = [
    ("watch-w5+pixel-8-pro", 0, "idle"),
    ("watch-w5+pixel-8-pro", 80, "loaded 80%"),
    ("watch-w5+samsung-a16", 0, "slow phone (a16)"),
];

/// The edge cells of `model`: every edge link × phone condition around the
/// base cell; `quick`: the fast link with the phone idle alone (CI's smoke).
pub fn edge_cells(model: &str, quick: bool) -> Vec<Cell> {
    let mut cells = vec![];
    for link in EDGE_LINKS {
        for (pair, load, _) in EDGE_PHONES {
            if quick && (link.name != "fast-50m" || load > 0 || pair != EDGE_PHONES[0].0) {
                continue;
            }
            cells.push(Cell { pair: pair.into(), load, edge: link.name.into(), ..Cell::base(model) });
        }
    }
    cells
}

/// How a strategy of an edge cell uses the edge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EdgeUse {
    /// Not at all: two tiers, as in the other cells.
    None,
    /// Cloud-only: the watch sends its input straight to the edge.
    Direct,
    /// Phone relay: the watch sends its input to the phone, which forwards
    /// it raw to the edge (the whole model's suffix, `--edge-cut`).
    Relay,
    /// Tandem's planner over three tiers.
    ThreeTier,
}

/// A strategy as an edge cell runs it: its name in rows, the wearable's
/// `--strategy`, and its use of the edge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arm {
    /// Its name in rows and reports.
    pub name: &'static str,
    /// The wearable's `--strategy`.
    pub strategy: Strategy,
    /// How it uses the edge.
    pub edge: EdgeUse,
}

/// The strategies of an edge cell: the two-tier references, then the three
/// that use the edge.
pub const EDGE_ARMS: [Arm; 6] = [
    Arm { name: "wearable-only", strategy: Strategy::WearableOnly, edge: EdgeUse::None },
    Arm { name: "handheld-only", strategy: Strategy::HandheldOnly, edge: EdgeUse::None },
    Arm { name: "tandem", strategy: Strategy::Tandem, edge: EdgeUse::None },
    Arm { name: "cloud-only", strategy: Strategy::CloudOnly, edge: EdgeUse::Direct },
    Arm { name: "phone-relay", strategy: Strategy::HandheldOnly, edge: EdgeUse::Relay },
    Arm { name: "tandem-3tier", strategy: Strategy::Tandem, edge: EdgeUse::ThreeTier },
];

/// The strategies of a cell: [`EDGE_ARMS`] in an edge cell, else every
/// two-tier strategy.
pub fn arms(cell: &Cell) -> Vec<Arm> {
    match cell.edge.is_empty() {
        true => {
            Strategy::ALL.iter().map(|&s| Arm { name: s.name(), strategy: s, edge: EdgeUse::None }).collect()
        }
        false => EDGE_ARMS.to_vec(),
    }
}

/// The edge a cell's runs use: its server's URL, the key of the whole
/// model's cut (phone relay's `--edge-cut`), and the phone's slowdown.
pub struct EdgeRun<'a> {
    /// The OIP server's base URL.
    pub url: &'a str,
    /// [`tandem::Cut::handheld_only`]'s key.
    pub whole: &'a str,
    /// The phone profile's slowdown over this host (the edge's speedup).
    pub slowdown: f64,
}

/// The wearable's edge arguments for `arm` in a cell over `link`.
pub fn wearable_args(arm: &Arm, link: &EdgeLink, edge: &EdgeRun) -> Vec<String> {
    let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let spec = link.spec();
    match arm.edge {
        EdgeUse::None => vec![],
        EdgeUse::Direct => v(&["--edge-oip", edge.url, "--edge-direct-link", &spec]),
        EdgeUse::Relay => v(&["--edge-oip", edge.url, "--edge-cut", edge.whole, "--edge-link", &spec]),
        // The watch has the same link to the edge as cloud-only's: its
        // planner may send a frame's input there itself. The edge's speed is
        // the phone's measurement; `--edge-speedup` prices it only if that fails.
        EdgeUse::ThreeTier => {
            let speedup = edge.slowdown.to_string();
            let mut a = v(&["--edge-oip", edge.url, "--edge-speedup", &speedup, "--edge-link", &spec]);
            a.extend(v(&["--edge-direct-link", &spec]));
            a
        }
    }
}

/// The handheld's arguments in an edge cell over `link`: relays to the
/// edge at `url`, over the emulated link, `slowdown` times slower than
/// this host.
pub fn handheld_args(link: &EdgeLink, url: &str, slowdown: f64) -> Vec<String> {
    ["--slowdown", &slowdown.to_string(), "--edge-allow", url, "--edge-link", &link.spec()]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// Writes the suffixes of `model`'s default edge cuts into `dir` as
/// `NAME.onnx` (what `tandem-models export-suffix` writes); returns the
/// whole model's cut's key, which is among them.
pub fn export_repo(model: &tandem::Model, dir: &Path) -> anyhow::Result<String> {
    std::fs::create_dir_all(dir).with_context(|| format!("{}", dir.display()))?;
    let g = model.graph();
    let whole = tandem::Cut::handheld_only(g);
    let mut cuts = tandem::tier::edge_cuts(g, tandem::tier::EDGE_FRACTIONS);
    if !cuts.contains(&whole) {
        cuts.push(whole.clone());
    }
    for c in &cuts {
        let bytes =
            tandem::tier::suffix_onnx(model, c).with_context(|| format!("the suffix of cut {}", c.key()))?;
        let file = dir.join(format!("{}.onnx", tandem::tier::edge_model_name(&bytes)));
        std::fs::write(&file, bytes).with_context(|| format!("{}", file.display()))?;
    }
    Ok(whole.key().to_string())
}

/// The strategies the report sets side by side, with their headings.
const SHOWN: [(&str, &str); 6] = [
    ("wearable-only", "watch alone"),
    ("handheld-only", "phone (handheld-only)"),
    ("cloud-only", "cloud-only"),
    ("phone-relay", "phone relay"),
    ("tandem", "Tandem, 2 tiers"),
    ("tandem-3tier", "Tandem, 3 tiers"),
];

/// Where three tiers pay in a cell: Tandem's three-tier objective
/// ([`score`]) and the best two-tier strategy's (of those the cell ran:
/// wearable-only, handheld-only, Tandem on two tiers) with its name, when
/// both ran.
pub fn third_tier_gain(
    cell: &Cell,
    by: &std::collections::BTreeMap<&str, Vec<&Row>>,
) -> Option<(f64, f64, String)> {
    let three = score(cell, by.get("tandem-3tier")?);
    let (best, name) = ["wearable-only", "handheld-only", "tandem"]
        .iter()
        .filter_map(|s| Some((score(cell, by.get(s)?), s.to_string())))
        .min_by(|a, b| a.0.total_cmp(&b.0))?;
    Some((three, best, name))
}

/// Within this share of each other, two objectives tie (this VM's noise
/// between runs of one placement is of that order).
pub const TIE: f64 = 0.05;

/// The report's section: DeepWear's published cloud comparison (SPEC 9),
/// then per edge cell the median latency and the watch's model-based
/// energy of each strategy, and whether three tiers beat the best
/// two-tier strategy under the cell's objective.
pub fn deepwear_cloud_report(rows: &[Row]) -> String {
    let by = by_cell(rows);
    let cells: Vec<_> = by.iter().filter(|(c, _)| !c.edge.is_empty()).collect();
    if cells.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "\n## DeepWear's cloud comparison, beside ours\n\n\
         DeepWear (published): a remote server (a Tesla K80 GPU, a 2.3 GHz Xeon, 60 GB) reached over the \
         wearable's own Wi-Fi, poor (about 100 kbit/s) and good (about 5 Mbit/s); results normalized to \
         wearable-only; the cloud's energy not counted. Its finding: the nearby phone is the better partner \
         in most cases.\n\n\
         Ours (measured): the edge is this host's CPU through KServe and onnxruntime on loopback, not a GPU \
         server; the links to it are emulated (the RTTs of DeepWear's Wi-Fi assumed: 40 and 20 ms); the \
         phone runs `--slowdown` its profile's slowdown (so slower than the edge), and the planner prices \
         the edge at the speed the phone measured; Tandem on three tiers has the watch's own link to the \
         edge too (cloud-only's), as a placement its planner may choose. Each cell: p50 ms / the watch's energy per frame in mJ (model-based, \
         its radio priced at each link's rates), the means of the runs.\n\n\
         | edge link | phone |",
    );
    for (_, heading) in SHOWN {
        out += &format!(" {heading} |");
    }
    out += " edge frames, 3 tiers | 3 tiers beat the best 2-tier? |\n|---|---|";
    out += &"---:|".repeat(SHOWN.len() + 1);
    out += "---|\n";
    let (mut pays, mut used, mut near_best, mut phone_beats_cloud, mut split_beats_cloud, mut compared) =
        (0usize, 0usize, 0usize, 0usize, 0usize, 0usize);
    for (cell, s) in &cells {
        let phone = EDGE_PHONES
            .iter()
            .find(|(pair, load, _)| *pair == cell.pair && *load == cell.load)
            .map_or_else(|| format!("{} load {}", cell.pair, cell.load), |p| p.2.to_string());
        out += &format!("| {} | {phone} |", cell.edge);
        for (name, _) in SHOWN {
            match s.get(name) {
                Some(runs) => {
                    out += &format!(
                        " {:.0} / {:.2} |",
                        mean(runs, |r| r.latency_ms),
                        mean(runs, |r| r.wearable_j) * 1e3
                    )
                }
                None => out += " – |",
            }
        }
        let on_edge = match s.get("tandem-3tier") {
            Some(runs) => {
                let (on, all) = runs.iter().fold((0, 0), |(a, b), r| (a + r.edge_frames, b + r.frames));
                out += &format!(" {on}/{all} |");
                on
            }
            None => {
                out += " – |";
                0
            }
        };
        match third_tier_gain(cell, s) {
            // No frame on the edge: the same two-tier placements, apart by noise.
            Some((three, best, name)) if on_edge == 0 => {
                out += &format!(" no frame on the edge: {:+.0}% vs {name} |\n", (three / best - 1.0) * 100.0);
            }
            Some((three, best, name)) => {
                used += 1;
                let change = (three / best - 1.0) * 100.0;
                let verdict = match three {
                    t if t < best * (1.0 - TIE) => {
                        pays += 1;
                        "yes"
                    }
                    t if t <= best * (1.0 + TIE) => "tie",
                    _ => "no",
                };
                out += &format!(" {verdict}: {change:+.0}% vs {name} |\n");
            }
            None => out += " – |\n",
        }
        let best_of_all = s
            .iter()
            .filter(|(name, _)| **name != "tandem-3tier")
            .map(|(_, runs)| score(cell, runs))
            .min_by(f64::total_cmp);
        if let (Some(best), Some(three)) = (best_of_all, s.get("tandem-3tier")) {
            near_best += usize::from(score(cell, three) <= best * (1.0 + TIE));
        }
        if let (Some(phone), Some(cloud)) = (s.get("handheld-only"), s.get("cloud-only")) {
            compared += 1;
            phone_beats_cloud += usize::from(score(cell, phone) < score(cell, cloud));
            split_beats_cloud +=
                usize::from(s.get("tandem").is_some_and(|t| score(cell, t) < score(cell, cloud)));
        }
    }
    out += &format!(
        "\nThe phone (handheld-only) beat cloud-only in {phone_beats_cloud} of {compared} cells, \
         Tandem on two tiers (the watch and the phone) in {split_beats_cloud}; \
         Tandem on three tiers put frames on the edge in {used} of {} cells and beat the best two-tier \
         strategy there by more than 5% in {pays} (by the cell's objective, latency at PropT 0; within 5%: \
         a tie); it was within 5% of the best of every other strategy, cloud-only included, in {near_best} \
         of {} cells.\n",
        cells.len(),
        cells.len()
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(strategy: &str, cell: &Cell, latency_ms: f64, wearable_j: f64) -> Row {
        Row {
            strategy: strategy.into(),
            cell: cell.clone(),
            run: 1,
            latency_ms,
            p95_ms: latency_ms,
            throughput_fps: 1e3 / latency_ms,
            wearable_j,
            handheld_j: 0.0,
            up_bytes: 0,
            cut_switches: 0,
            switch_wait_max_ms: 0.0,
            plan_build_ms: 0.0,
            placement: None,
            engines: None,
            frames: 5,
            edge_frames: if strategy == "tandem-3tier" { 5 } else { 0 },
            edge_failures: 0,
            deadline_miss_share: None,
            accuracy_cost: None,
            accuracy_over: None,
        }
    }

    #[test]
    fn the_edge_grid_is_links_by_phone_conditions_and_quick_is_one_cell() {
        let cells = edge_cells("m", false);
        assert_eq!(cells.len(), 9);
        for c in &cells {
            // Only the pair, the load and the edge differ from the base cell.
            let base = Cell::base("m");
            assert_eq!(Cell { pair: base.pair.clone(), load: 0, edge: String::new(), ..c.clone() }, base);
            assert!(EdgeLink::named(&c.edge).is_some(), "{c:?}");
        }
        assert_eq!(cells.iter().filter(|c| c.pair.ends_with("samsung-a16")).count(), 3);
        assert_eq!(cells.iter().filter(|c| c.load == 80).count(), 3);
        let quick = edge_cells("m", true);
        assert_eq!(quick.len(), 1);
        assert_eq!((quick[0].edge.as_str(), quick[0].load), ("fast-50m", 0));
        assert_eq!(arms(&quick[0]).len(), EDGE_ARMS.len());
        assert_eq!(arms(&Cell::base("m")).len(), Strategy::ALL.len());
        assert!(arms(&Cell::base("m")).iter().all(|a| a.edge == EdgeUse::None));
    }

    #[test]
    fn each_strategy_gets_its_edge_arguments() {
        let link = EdgeLink::named("wifi-100k").expect("a link");
        assert_eq!(link.spec(), "0.1,0.1,40");
        let edge = EdgeRun { url: "http://127.0.0.1:1", whole: "all", slowdown: 2.0 };
        let of = |name: &str| {
            let arm = EDGE_ARMS.iter().find(|a| a.name == name).expect("an arm");
            (arm.strategy, wearable_args(arm, &link, &edge).join(" "))
        };
        assert_eq!(of("tandem"), (Strategy::Tandem, String::new()));
        assert_eq!(
            of("cloud-only"),
            (Strategy::CloudOnly, "--edge-oip http://127.0.0.1:1 --edge-direct-link 0.1,0.1,40".into())
        );
        assert_eq!(
            of("phone-relay"),
            (
                Strategy::HandheldOnly,
                "--edge-oip http://127.0.0.1:1 --edge-cut all --edge-link 0.1,0.1,40".into()
            )
        );
        assert_eq!(
            of("tandem-3tier"),
            (
                Strategy::Tandem,
                "--edge-oip http://127.0.0.1:1 --edge-speedup 2 --edge-link 0.1,0.1,40 --edge-direct-link 0.1,0.1,40"
                    .into()
            )
        );
        assert_eq!(
            handheld_args(&link, edge.url, 1.3).join(" "),
            "--slowdown 1.3 --edge-allow http://127.0.0.1:1 --edge-link 0.1,0.1,40"
        );
    }

    /// Three tiers pay where they beat the best two-tier strategy by the
    /// cell's objective; the report says where, beside DeepWear's finding.
    #[test]
    fn the_report_shows_where_three_tiers_pay() {
        let cells = edge_cells("m", false);
        let (slow, fast) = (&cells[0], &cells[6]);
        assert_eq!((slow.edge.as_str(), fast.edge.as_str()), ("wifi-100k", "fast-50m"));
        let mut rows = vec![];
        for (cell, three) in [(slow, 90.0), (fast, 40.0)] {
            rows.push(row("wearable-only", cell, 200.0, 0.02));
            rows.push(row("handheld-only", cell, 80.0, 0.004));
            rows.push(row("tandem", cell, 60.0, 0.003));
            rows.push(row("cloud-only", cell, if cell == slow { 9000.0 } else { 70.0 }, 0.01));
            rows.push(row("phone-relay", cell, 100.0, 0.004));
            rows.push(row("tandem-3tier", cell, three, 0.003));
        }
        let by = by_cell(&rows);
        let gain = |c: &Cell| third_tier_gain(c, &by[c]).expect("both ran");
        assert_eq!(gain(slow), (90.0, 60.0, "tandem".to_string()));
        assert_eq!(gain(fast), (40.0, 60.0, "tandem".to_string()));
        let text = deepwear_cloud_report(&rows);
        assert!(text.contains("the nearby phone is the better partner in most cases"), "{text}");
        assert!(text.contains("| fast-50m | idle | 200 / 20.00 | 80 / 4.00 | 70 / 10.00 | 100 / 4.00 | 60 / 3.00 | 40 / 3.00 | 5/5 | yes: -33% vs tandem |"), "{text}");
        assert!(text.contains("| wifi-100k | idle |"), "{text}");
        assert!(text.contains("no: +50% vs tandem"), "{text}");
        assert!(text.contains("The phone (handheld-only) beat cloud-only in 1 of 2 cells, Tandem on two tiers (the watch and the phone) in 2; Tandem on three tiers put frames on the edge in 2 of 2 cells and beat the best two-tier strategy there by more than 5% in 1 (by the cell's objective, latency at PropT 0; within 5%: a tie); it was within 5% of the best of every other strategy, cloud-only included, in 1 of 2 cells"), "{text}");
        // Three tiers with no frame on the edge are two tiers: not credited, whatever the noise.
        let mut idle = rows.clone();
        for r in idle.iter_mut().filter(|r| r.strategy == "tandem-3tier" && r.cell == *fast) {
            r.edge_frames = 0;
        }
        let text = deepwear_cloud_report(&idle);
        assert!(text.contains("| 0/5 | no frame on the edge: -33% vs tandem |"), "{text}");
        assert!(text.contains("put frames on the edge in 1 of 2 cells and beat the best two-tier strategy there by more than 5% in 0"), "{text}");
        // No edge cells, no section.
        assert!(deepwear_cloud_report(
            &rows.iter().filter(|r| r.cell.edge.is_empty()).cloned().collect::<Vec<_>>()
        )
        .is_empty());
    }
}
