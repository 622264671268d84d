//! `tandem-bench dvfs`: what choosing the cluster and frequency together
//! with the cut saves, model-based (issue 17).
//!
//! For each model (the zoo, the light models and the real models), a watch
//! (`watch-w5`, one cluster, 5 operating points) paired with each phone
//! (`pixel-8-pro`, `samsung-a16`: 3 and 2 clusters, 5 operating points
//! each) over a link: the fastest cut at both profiles' default settings
//! gives the latency L0 and weighted energy E0. Then the cut and both
//! sides' settings are chosen together for the least energy within PropT =
//! L0 (the same latency), 1.5 L0 and 2 L0: the energy saved is 1 − E/E0. Both are priced with the
//! analytical power model (C_eff·V(f)²·f). The same choice made with ε·f³
//! is then priced analytically: how often it picks worse settings, and by
//! how much. Layer times are this host's profile times each profile's
//! slowdown; every energy here is model-based.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use serde_json::json;
use tandem::check::random_inputs;
use tandem::device::{DeviceProfile, PowerModel};
use tandem::emulate::LinkProfile;
use tandem::energy::ClusterEnergy;
use tandem::partition::dvfs::{decide_dvfs, Dvfs, Setting};
use tandem::partition::{
    decide, evaluate, DecisionInput, EnergyWeights, HandheldStatus, LatencyHint, Method, Mode, NodePrices,
    Side,
};
use tandem::predict::{ProfiledLatency, Scaled};
use tandem::{InputShapes, Model};

/// The models: `paths`, or the zoo, the light models and the real models.
pub(crate) fn models(paths: Vec<PathBuf>) -> anyhow::Result<Vec<(String, PathBuf, InputShapes)>> {
    if !paths.is_empty() {
        return Ok(paths
            .into_iter()
            .map(|p| {
                (
                    p.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default(),
                    p,
                    InputShapes::none(),
                )
            })
            .collect());
    }
    let paths = tandem_models::ensure_models()?;
    let mut out: Vec<(String, PathBuf, InputShapes)> =
        paths.zoo.iter().map(|e| (e.name.clone(), e.path.clone(), InputShapes::none())).collect();
    out.extend(paths.light.iter().map(|e| (e.name.to_string(), e.model.clone(), InputShapes::none())));
    let real = tandem_models::real::ensure_real_models()?;
    for m in &real.models {
        if m.refused_node_op.is_some() {
            continue;
        }
        let shapes = InputShapes::parse(&m.input_shapes).map_err(|e| anyhow::anyhow!("{}: {e}", m.name))?;
        out.push((m.name.clone(), real.path(&m.file), shapes));
    }
    Ok(out)
}

/// Energy of `cut` at the settings, priced analytically.
fn analytical_energy(
    input: &DecisionInput,
    wearable: (&DeviceProfile, &Setting),
    handheld: (&DeviceProfile, &Setting),
    cut: &tandem::Cut,
) -> anyhow::Result<f64> {
    let wl = Scaled { inner: input.wearable.latency, slowdown: wearable.1.time_scale };
    let we = ClusterEnergy::at(wearable.0, &wearable.1.cluster, wearable.1.f_hz, PowerModel::Analytical)?;
    let hl = Scaled { inner: input.handheld.latency, slowdown: handheld.1.time_scale };
    let he = ClusterEnergy::at(handheld.0, &handheld.1.cluster, handheld.1.f_hz, PowerModel::Analytical)?;
    let prices = NodePrices::new(
        input.graph,
        Side { latency: &wl, energy: &we },
        Side { latency: &hl, energy: &he },
        &input.link,
        &input.status,
        input.weights,
    );
    Ok(evaluate(input.graph, &prices, cut, input.link.rtt).energy_j)
}

/// The latency budgets: PropT = L0 times these.
const SLACKS: [f64; 3] = [1.0, 1.5, 2.0];

pub fn dvfs(paths: Vec<PathBuf>, link: &str) -> anyhow::Result<()> {
    let watch = DeviceProfile::shipped("watch-w5")?;
    let phones = [DeviceProfile::shipped("pixel-8-pro")?, DeviceProfile::shipped("samsung-a16")?];
    let link = LinkProfile::named(link)?;
    let estimate = link.nominal_estimate();
    let mut rows = vec![];
    println!(
        "{:<24} {:<12} {:>5} {:>9} {:>9} {:>8} {:>22} {:>9}",
        "model", "phone", "PropT", "L0 ms", "E0 mJ", "saved", "settings (watch, phone)", "ε·f³ worse"
    );
    for (name, path, shapes) in models(paths)? {
        let model = Model::from_path(&path, &shapes).with_context(|| path.display().to_string())?;
        let g = model.graph();
        let host = ProfiledLatency::measure(&model, &random_inputs(&model, 0)?)?;
        for phone in &phones {
            let wl = Scaled { inner: &host, slowdown: watch.slowdown };
            let hl = Scaled { inner: &host, slowdown: phone.slowdown };
            let we = ClusterEnergy::new(&watch, PowerModel::Analytical)?;
            let he = ClusterEnergy::new(phone, PowerModel::Analytical)?;
            let base = DecisionInput {
                graph: g,
                wearable: Side { latency: &wl, energy: &we },
                handheld: Side { latency: &hl, energy: &he },
                link: estimate,
                status: HandheldStatus::default(),
                weights: EnergyWeights::default(),
                hint: LatencyHint::Fastest,
                mode: Mode::Single,
                codecs: None,
            };
            let fixed = decide(&base, Method::MinCut)?;
            let (l0, e0) = (fixed.evaluation.latency_s, fixed.evaluation.energy_j);
            for slack in SLACKS {
                let same =
                    DecisionInput { hint: LatencyHint::Within(Duration::from_secs_f64(l0 * slack)), ..base };
                let both = |power| Dvfs { wearable: &watch, handheld: Some(phone), power, simplified: None };
                let best = decide_dvfs(&same, Method::MinCut, both(PowerModel::Analytical))
                    .map_err(anyhow::Error::msg)?;
                let approx = decide_dvfs(&same, Method::MinCut, both(PowerModel::Approximate))
                    .map_err(anyhow::Error::msg)?;
                let e1 = best.decision.evaluation.energy_j;
                let (hs, ahs) = (
                    best.handheld_setting.clone().context("a phone setting")?,
                    approx.handheld_setting.clone().context("a phone setting")?,
                );
                let e_approx = analytical_energy(
                    &same,
                    (&watch, &approx.setting),
                    (phone, &ahs),
                    &approx.decision.chosen,
                )?;
                let worse = e_approx > e1 * (1.0 + 1e-9);
                let saved = if e0 > 0.0 { 1.0 - e1 / e0 } else { 0.0 };
                let named = |s: &Setting| format!("{}@{:.0}", s.cluster, s.f_hz / 1e6);
                println!(
                    "{:<24} {:<12} {:>5.1} {:>9.2} {:>9.3} {:>7.1}% {:>22} {:>9}",
                    name,
                    phone.name,
                    slack,
                    l0 * 1e3,
                    e0 * 1e3,
                    saved * 100.0,
                    format!("{}, {}", named(&best.setting), named(&hs)),
                    if worse { format!("+{:.1}%", (e_approx / e1 - 1.0) * 100.0) } else { "no".into() }
                );
                rows.push(json!({
                    "model": name, "phone": phone.name, "link": link.name, "slack": slack,
                    "l0_ms": l0 * 1e3, "e0_mj": e0 * 1e3, "e_mj": e1 * 1e3, "saved": saved,
                    "latency_ms": best.decision.evaluation.latency_s * 1e3,
                    "watch": best.setting, "phone_setting": hs,
                    "prefix_layers": best.decision.prefix_nodes, "fixed_prefix_layers": fixed.prefix_nodes,
                    "approx_watch": approx.setting, "approx_phone": ahs, "approx_e_mj": e_approx * 1e3,
                    "approx_worse": worse,
                }));
            }
        }
    }
    let summary: Vec<_> = SLACKS
        .iter()
        .map(|&slack| {
            let at: Vec<&serde_json::Value> =
                rows.iter().filter(|r| r["slack"].as_f64() == Some(slack)).collect();
            let mut saved: Vec<f64> = at.iter().filter_map(|r| r["saved"].as_f64()).collect();
            saved.sort_by(f64::total_cmp);
            let n = saved.len();
            json!({
                "slack": slack, "cases": n,
                "mean_saved": saved.iter().sum::<f64>() / n.max(1) as f64,
                "median_saved": saved.get(n / 2),
                "max_saved": saved.last(),
                "approx_worse": at.iter().filter(|r| r["approx_worse"].as_bool() == Some(true)).count(),
            })
        })
        .collect();
    println!(
        "{}",
        json!({
            "link": link.name,
            "by_slack": summary,
            "energy": "model-based (analytical C_eff*V(f)^2*f); busy time = host profile x slowdown x (f_inf/f)/relative_speed",
            "rows": rows,
        })
    );
    Ok(())
}
