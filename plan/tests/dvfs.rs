//! The cut and the wearable's cluster and frequency chosen together, checked
//! against brute force over every (cut, setting) pair, and the settings'
//! busy-time and power scaling.

use std::time::Duration;

use tandem_core::{enumerate_cuts, InputShapes, Model};
use tandem_plan::device::{DeviceProfile, PowerModel};
use tandem_plan::energy::ClusterEnergy;
use tandem_plan::partition::dvfs::{decide_dvfs, settings, Dvfs};
use tandem_plan::partition::{
    evaluate, DecisionInput, EnergyWeights, HandheldStatus, LatencyHint, LinkEstimate, Method, Mode,
    NodePrices, Side,
};
use tandem_plan::predict::{ProfiledLatency, Scaled};

#[test]
fn settings_scale_busy_time_by_frequency_and_core_speed() {
    let p = DeviceProfile::shipped("pixel-8-pro").expect("shipped");
    let all = settings(&p).expect("settings");
    let find =
        |c: &str, f: f64| all.iter().find(|s| s.cluster == c && (s.f_hz - f).abs() < 1.0).expect("setting");
    // The inference setting (big at 2.37 GHz) is the reference.
    assert!((find("big", 2.37e9).time_scale - 1.0).abs() < 1e-12);
    // Half the frequency: twice the time.
    let big_min = find("big", 4.02e8);
    assert!((big_min.time_scale - 2.37e9 / 4.02e8).abs() < 1e-9);
    // A little core at 1.7 GHz: (2.37 / 1.7) / 0.35.
    assert!((find("LITTLE", 1.7e9).time_scale - (2.37 / 1.7) / 0.35).abs() < 1e-9);
    assert_eq!(all.len(), 15, "5 operating points on each of 3 clusters");
}

#[test]
fn the_joint_choice_matches_brute_force_over_cuts_and_settings() {
    let model =
        Model::from_bytes(&tandem_models::tiny::tiny_mlp_onnx(), &InputShapes::none()).expect("model");
    let g = model.graph();
    let wearable_profile = DeviceProfile::shipped("pixel-8-pro").expect("shipped");
    let handheld_profile = DeviceProfile::shipped("samsung-a16").expect("shipped");
    // Layer times at the wearable's inference setting, and the handheld's.
    let watch = ProfiledLatency { per_node_s: vec![8e-3, 1e-3, 6e-3], overhead_s: 2e-4 };
    let phone = ProfiledLatency { per_node_s: vec![2e-3, 0.3e-3, 1.5e-3], overhead_s: 1e-4 };
    let phone_energy = ClusterEnergy::new(&handheld_profile, PowerModel::Analytical).expect("energy");
    let default_energy = ClusterEnergy::new(&wearable_profile, PowerModel::Analytical).expect("energy");
    let link = LinkEstimate { up_bytes_per_s: 2e4, down_bytes_per_s: 4e4, rtt: Duration::from_millis(3) };
    let cuts = enumerate_cuts(g, 100).expect("few cuts");
    let base = DecisionInput {
        graph: g,
        wearable: Side { latency: &watch, energy: &default_energy },
        handheld: Side { latency: &phone, energy: &phone_energy },
        link,
        status: HandheldStatus { load: 0.2 },
        weights: EnergyWeights { wearable: 1.0, handheld: 0.5 },
        hint: LatencyHint::Fastest,
        mode: Mode::Single,
        codecs: None,
    };
    // Brute force: every cut at every setting.
    let mut all = vec![];
    for s in settings(&wearable_profile).expect("settings") {
        let latency = Scaled { inner: &watch, slowdown: s.time_scale };
        let energy =
            ClusterEnergy::at(&wearable_profile, &s.cluster, s.f_hz, PowerModel::Analytical).expect("e");
        let prices = NodePrices::new(
            g,
            Side { latency: &latency, energy: &energy },
            base.handheld,
            &link,
            &base.status,
            base.weights,
        );
        for c in &cuts {
            let e = evaluate(g, &prices, c, link.rtt);
            all.push((e.latency_s, e.energy_j));
        }
    }
    let fastest = all.iter().map(|a| a.0).fold(f64::INFINITY, f64::min);
    let dvfs =
        Dvfs { wearable: &wearable_profile, handheld: None, power: PowerModel::Analytical, simplified: None };
    let d = decide_dvfs(&base, Method::Exhaustive, dvfs).expect("decides");
    assert!((d.decision.evaluation.latency_s - fastest).abs() < 1e-12, "{d:?} vs {fastest}");
    for slack in [1.2, 2.0, 5.0] {
        let limit = fastest * slack;
        let hint = LatencyHint::Within(Duration::from_secs_f64(limit));
        let least = all.iter().filter(|a| a.0 <= limit).map(|a| a.1).fold(f64::INFINITY, f64::min);
        let d = decide_dvfs(&DecisionInput { hint, ..base }, Method::Exhaustive, dvfs).expect("decides");
        let got = &d.decision.evaluation;
        assert!(got.latency_s <= limit * (1.0 + 1e-12), "{got:?} misses {limit}");
        assert!(
            (got.energy_j - least).abs() <= 1e-12 * least.max(1e-12),
            "x{slack}: {} vs brute force {least}",
            got.energy_j
        );
    }
    // With time to spare, a slower setting than the default saves energy.
    let relaxed = DecisionInput { hint: LatencyHint::Within(Duration::from_secs_f64(fastest * 5.0)), ..base };
    let d = decide_dvfs(&relaxed, Method::Exhaustive, dvfs).expect("decides");
    assert!(d.setting.time_scale > 1.0, "{:?}", d.setting);
    // Both sides' settings chosen: never worse than the wearable's alone
    // (its candidates include the handheld's default setting) and checked
    // against its own brute force.
    let both = Dvfs { handheld: Some(&handheld_profile), ..dvfs };
    let d2 = decide_dvfs(&relaxed, Method::Exhaustive, both).expect("decides");
    let h = d2.handheld_setting.clone().expect("a handheld setting");
    assert!(d2.decision.evaluation.energy_j <= d.decision.evaluation.energy_j * (1.0 + 1e-12));
    assert_eq!(d2.settings, 15 * settings(&handheld_profile).expect("settings").len());
    let mut least = f64::INFINITY;
    for w in settings(&wearable_profile).expect("settings") {
        for hs in settings(&handheld_profile).expect("settings") {
            let wl = Scaled { inner: &watch, slowdown: w.time_scale };
            let we =
                ClusterEnergy::at(&wearable_profile, &w.cluster, w.f_hz, PowerModel::Analytical).expect("e");
            let hl = Scaled { inner: &phone, slowdown: hs.time_scale };
            let he = ClusterEnergy::at(&handheld_profile, &hs.cluster, hs.f_hz, PowerModel::Analytical)
                .expect("e");
            let prices = NodePrices::new(
                g,
                Side { latency: &wl, energy: &we },
                Side { latency: &hl, energy: &he },
                &link,
                &base.status,
                base.weights,
            );
            for c in &cuts {
                let e = evaluate(g, &prices, c, link.rtt);
                if e.latency_s <= fastest * 5.0 {
                    least = least.min(e.energy_j);
                }
            }
        }
    }
    let got = d2.decision.evaluation.energy_j;
    assert!((got - least).abs() <= 1e-12 * least, "both sides: {got} vs brute force {least} ({h:?})");
}
