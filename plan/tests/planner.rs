//! The Planner driven through scripted condition changes (SPEC 6): a
//! bandwidth sweep, a handheld-load sweep and a battery-weight sweep, with
//! their switch points, and no flapping when an estimate jitters.

use std::time::Duration;

use tandem_core::{InputShapes, LayerGraph, Model};
use tandem_models::ZooSpec;
use tandem_plan::device::DeviceProfile;
use tandem_plan::energy::{ClusterEnergy, PowerModel};
use tandem_plan::partition::{
    Conditions, EnergyWeights, HandheldStatus, LatencyHint, LinkEstimate, Mode, Planner, PlannerConfig, Side,
};
use tandem_plan::predict::FlopsModel;

struct Pair {
    model: Model,
    watch: FlopsModel,
    phone: FlopsModel,
    watch_energy: ClusterEnergy,
    phone_energy: ClusterEnergy,
}

impl Pair {
    /// MNIST on a watch 10x slower per FLOP than the phone.
    fn mnist() -> Pair {
        let bytes = ZooSpec::Mnist.build(1).expect("builds");
        let model = Model::from_bytes(&bytes, &InputShapes::none()).expect("loads");
        let watch_p = DeviceProfile::shipped("watch-w5").expect("shipped");
        let phone_p = DeviceProfile::shipped("pixel-8-pro").expect("shipped");
        Pair {
            model,
            watch: FlopsModel { us_per_mac: 2e-3, overhead_us: 50.0 },
            phone: FlopsModel { us_per_mac: 2e-4, overhead_us: 50.0 },
            watch_energy: ClusterEnergy::new(&watch_p, PowerModel::Analytical).expect("energy"),
            phone_energy: ClusterEnergy::new(&phone_p, PowerModel::Analytical).expect("energy"),
        }
    }

    fn graph(&self) -> &LayerGraph {
        self.model.graph()
    }

    fn sides(&self) -> (Side<'_>, Side<'_>) {
        (
            Side { latency: &self.watch, energy: &self.watch_energy },
            Side { latency: &self.phone, energy: &self.phone_energy },
        )
    }
}

fn kbps(k: f64) -> LinkEstimate {
    LinkEstimate {
        up_bytes_per_s: k * 1e3 / 8.0,
        down_bytes_per_s: k * 1e3 / 8.0,
        rtt: Duration::from_millis(5),
    }
}

fn conditions(link: LinkEstimate, hint: LatencyHint) -> Conditions {
    Conditions {
        link,
        status: HandheldStatus::default(),
        weights: EnergyWeights::default(),
        hint,
        mode: Mode::Single,
    }
}

/// Prefix sizes chosen along a sweep (the planner's decision after each step).
fn sweep<T: Copy>(
    pair: &Pair,
    planner: &mut Planner,
    steps: &[T],
    apply: impl Fn(&mut Planner, T),
) -> Vec<usize> {
    let (w, h) = pair.sides();
    steps
        .iter()
        .map(|&x| {
            apply(planner, x);
            planner.poll_decision(pair.graph(), w, h).expect("decides");
            planner.current().expect("a decision").prefix_nodes
        })
        .collect()
}

#[test]
fn bandwidth_sweep_moves_work_to_the_phone_as_the_link_gets_faster() {
    let pair = Pair::mnist();
    let n = pair.graph().nodes().len();
    let mut planner = Planner::new(PlannerConfig::default(), conditions(kbps(10.0), LatencyHint::Fastest));
    let rates = [10.0, 30.0, 100.0, 300.0, 1_000.0, 3_000.0, 10_000.0, 100_000.0];
    let prefixes = sweep(&pair, &mut planner, &rates, |p, k| p.handle_link(kbps(k)));
    assert_eq!(prefixes[0], n, "at 10 kbit/s everything stays on the watch: {prefixes:?}");
    assert!(prefixes[prefixes.len() - 1] < n, "at 100 Mbit/s something is offloaded: {prefixes:?}");
    assert!(prefixes.windows(2).all(|w| w[1] <= w[0]), "faster links never pull work back: {prefixes:?}");
}

#[test]
fn load_sweep_pulls_work_back_to_the_watch() {
    let pair = Pair::mnist();
    let n = pair.graph().nodes().len();
    let mut planner =
        Planner::new(PlannerConfig::default(), conditions(kbps(50_000.0), LatencyHint::Fastest));
    let loads = [0.0, 0.5, 0.8, 0.9, 0.95];
    let prefixes = sweep(&pair, &mut planner, &loads, |p, l| p.handle_status(HandheldStatus { load: l }));
    assert!(prefixes[0] < n, "an idle phone gets work: {prefixes:?}");
    assert!(prefixes.windows(2).all(|w| w[1] >= w[0]), "more load never pushes work out: {prefixes:?}");
    assert!(prefixes[prefixes.len() - 1] > prefixes[0], "a 95%-loaded phone gets less: {prefixes:?}");
}

#[test]
fn battery_weight_sweep_goes_from_local_to_offload() {
    let pair = Pair::mnist();
    let n = pair.graph().nodes().len();
    let mut planner =
        Planner::new(PlannerConfig::default(), conditions(kbps(1_000.0), LatencyHint::EnergyFirst));
    let ww = [0.0, 0.25, 0.5, 0.75, 1.0];
    let prefixes = sweep(&pair, &mut planner, &ww, |p, w| {
        p.handle_weights(EnergyWeights { wearable: w, handheld: 1.0 - w })
    });
    // Ww = 0: the watch's energy is free, so the phone's is saved by running locally.
    assert_eq!(prefixes[0], n, "{prefixes:?}");
    // Ww = 1: only the watch's energy counts, so it offloads.
    assert!(prefixes[ww.len() - 1] < n, "{prefixes:?}");
    assert!(prefixes.windows(2).all(|w| w[1] <= w[0]), "{prefixes:?}");
}

#[test]
fn jitter_around_a_switch_point_does_not_flap() {
    let pair = Pair::mnist();
    let (w, h) = pair.sides();
    let mut planner = Planner::new(PlannerConfig::default(), conditions(kbps(10.0), LatencyHint::Fastest));
    planner.poll_decision(pair.graph(), w, h).expect("decides");
    // Find the first rate (1% steps) where a margin-free planner would switch.
    let mut eager = Planner::new(PlannerConfig { margin: 0.0, ..Default::default() }, *planner.conditions());
    eager.poll_decision(pair.graph(), w, h).expect("decides");
    let mut k = 10.0;
    let switch_at = loop {
        k *= 1.01;
        eager.handle_link(kbps(k));
        if eager.poll_decision(pair.graph(), w, h).expect("decides").is_some() {
            break k;
        }
        assert!(k < 1e6, "no switch point found");
    };
    // Oscillate ±3% around it: a 10% margin switches at most once.
    let mut switches = 0;
    for i in 0..40 {
        let jitter = if i % 2 == 0 { 1.03 } else { 0.97 };
        planner.handle_link(kbps(switch_at * jitter));
        if planner.poll_decision(pair.graph(), w, h).expect("decides").is_some() {
            switches += 1;
        }
    }
    assert!(switches <= 1, "{switches} switches around {switch_at:.0} kbit/s");
    // The margin-free planner does flap there, so the test can fail.
    let mut eager_switches = 0;
    for i in 0..40 {
        let jitter = if i % 2 == 0 { 1.03 } else { 0.97 };
        eager.handle_link(kbps(switch_at * jitter));
        if eager.poll_decision(pair.graph(), w, h).expect("decides").is_some() {
            eager_switches += 1;
        }
    }
    assert!(eager_switches > 10, "the margin-free planner switched only {eager_switches} times");
}

#[test]
fn polling_without_changes_decides_nothing() {
    let pair = Pair::mnist();
    let (w, h) = pair.sides();
    let mut planner = Planner::new(PlannerConfig::default(), conditions(kbps(100.0), LatencyHint::Fastest));
    assert!(planner.poll_decision(pair.graph(), w, h).expect("decides").is_some(), "first decision");
    assert!(planner.poll_decision(pair.graph(), w, h).expect("decides").is_none());
    planner.handle_link(kbps(100.0));
    assert!(planner.poll_decision(pair.graph(), w, h).expect("decides").is_none(), "same estimate");
}

/// The runners-up at ×k are the cuts a fresh planner picks once the link
/// really is k times the estimate: building them ahead prepares the next
/// switch. Checked along the bandwidth sweep, where the cut moves.
#[test]
fn runners_up_are_the_decisions_after_a_rate_change() {
    let pair = Pair::mnist();
    let (w, h) = pair.sides();
    let factors = [0.25, 0.5, 2.0, 4.0];
    let mut moved = 0;
    for k in [300.0, 1_000.0, 3_000.0, 10_000.0, 30_000.0] {
        let mut planner = Planner::new(PlannerConfig::default(), conditions(kbps(k), LatencyHint::Fastest));
        planner.poll_decision(pair.graph(), w, h).expect("decides");
        let current = planner.current().expect("a decision").chosen.clone();
        let ahead = planner.runners_up(pair.graph(), w, h, &factors);
        assert!(!ahead.contains(&current), "the current cut is not a runner-up");
        for f in factors {
            let mut later =
                Planner::new(PlannerConfig::default(), conditions(kbps(k * f), LatencyHint::Fastest));
            later.poll_decision(pair.graph(), w, h).expect("decides");
            let next = later.current().expect("a decision").chosen.clone();
            if next != current && !next.is_wearable_only() {
                moved += 1;
                assert!(ahead.contains(&next), "at {k} kbit/s ×{f}: the next cut was not built ahead");
            }
        }
    }
    assert!(moved >= 2, "the sweep must move the cut for the check to mean anything ({moved})");
}

/// At a source rate a stream is planned for each frame's latency when the
/// fastest cut delivers a frame within the period, and for the period
/// (throughput) only when no cut does: found on a link where the two
/// objectives pick different cuts.
#[test]
fn at_a_source_rate_a_stream_is_planned_for_its_deadline() {
    let pair = Pair::mnist();
    let (w, h) = pair.sides();
    let decide = |link: LinkEstimate, mode: Mode, rate: Option<Duration>| {
        let mut p = Planner::new(
            PlannerConfig::default(),
            Conditions { mode, ..conditions(link, LatencyHint::Fastest) },
        );
        p.handle_rate(rate);
        p.poll_decision(pair.graph(), w, h).expect("decides");
        p.current().expect("a decision").clone()
    };
    // A link where the fastest single frame and the best period differ.
    let link = [5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0]
        .into_iter()
        .map(kbps)
        .find(|&l| decide(l, Mode::Single, None).chosen != decide(l, Mode::Stream, None).chosen)
        .expect("a link where latency and period pick different cuts");
    let single = decide(link, Mode::Single, None);
    let stream = decide(link, Mode::Stream, None);
    let latency = Duration::from_secs_f64(single.evaluation.latency_s);
    // Slow enough a source: each frame on time at the fastest cut.
    let paced = decide(link, Mode::Stream, Some(latency * 2));
    assert_eq!(paced.chosen, single.chosen, "{}", paced.reason);
    assert!(paced.reason.contains("frames arrive every"), "{}", paced.reason);
    // Too fast a source for any frame to be on time: the best period.
    let flooded = decide(link, Mode::Stream, Some(latency / 4));
    assert_eq!(flooded.chosen, stream.chosen, "{}", flooded.reason);
    // Without a rate a stream is planned for its period, as before.
    assert_eq!(decide(link, Mode::Stream, None).chosen, stream.chosen);
}
