//! The Planner driven through scripted condition changes (SPEC 6): a
//! bandwidth sweep, a handheld-load sweep and a battery-weight sweep, with
//! their switch points, and no flapping when an estimate jitters.

use std::time::Duration;

use tandem_core::{enumerate_cuts, Engine, Engines, InputShapes, LayerGraph, Model};
use tandem_models::ZooSpec;
use tandem_plan::device::DeviceProfile;
use tandem_plan::energy::{ClusterEnergy, PowerModel};
use tandem_plan::partition::{
    beats, evaluate, Conditions, EnergyWeights, EngineSide, HandheldStatus, LatencyHint, LinkEstimate, Mode,
    NodePrices, Planner, PlannerConfig, Side,
};
use tandem_plan::predict::{FlopsModel, LatencyModel, ProfiledLatency};

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
        Pair::of(ZooSpec::Mnist)
    }

    /// `spec` on a watch 10x slower per FLOP than the phone.
    fn of(spec: ZooSpec) -> Pair {
        let bytes = spec.build(1).expect("builds");
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

/// At a source rate the cut chosen for meeting the period keeps that
/// standing while its prediction is within the planner's margin past the
/// period and no cut meets it (a few slow frames at a busy start move a
/// prediction that far), and loses it past the margin; a cut that meets
/// the period replaces one that misses it outright.
#[test]
fn at_a_source_rate_the_cut_that_met_the_period_stays_within_the_margin() {
    let pair = Pair::mnist();
    let (w, h) = pair.sides();
    let margin = PlannerConfig::default().margin;
    let stream =
        |link: LinkEstimate| Conditions { mode: Mode::Stream, ..conditions(link, LatencyHint::Fastest) };
    let decide = |link: LinkEstimate, mode: Mode, rate: Option<Duration>| {
        let mut p = Planner::new(PlannerConfig::default(), Conditions { mode, ..stream(link) });
        p.handle_rate(rate);
        p.poll_decision(pair.graph(), w, h).expect("decides");
        p.current().expect("a decision").clone()
    };
    // A link where the fastest single frame runs every layer here and the best period offloads.
    let link = (10..=30)
        .map(|k| kbps(f64::from(k) * 100.0))
        .find(|&l| {
            let (single, stream) = (decide(l, Mode::Single, None), decide(l, Mode::Stream, None));
            let latency = single.evaluation.latency_s;
            single.chosen.is_wearable_only()
                && stream.evaluation.stream_period_s < latency * (1.0 - margin)
                // The split's own frames are slower, by less than the margin:
                // only meeting the period, not speed, brings the stream back.
                && stream.evaluation.latency_s > latency * 1.02
                && latency > stream.evaluation.latency_s * (1.0 - margin)
        })
        .expect("a link where the watch alone is fastest, by less than the margin, and a split keeps a period shorter by it");
    let here = decide(link, Mode::Single, None);
    let for_period = decide(link, Mode::Stream, None);
    let latency = here.evaluation.latency_s;
    let at = |k: f64| Some(Duration::from_secs_f64(latency * k));
    let mut p = Planner::new(PlannerConfig::default(), stream(link));
    p.handle_rate(at(1.02));
    p.poll_decision(pair.graph(), w, h).expect("decides");
    assert!(p.current().expect("a decision").chosen.is_wearable_only(), "it meets the period");
    // The period just under its latency, within the margin: it stays, where a
    // planner without the standing chooses for the period.
    let within = 1.0 / (1.0 + margin / 2.0);
    p.handle_rate(at(within));
    assert!(p.poll_decision(pair.graph(), w, h).expect("decides").is_none(), "kept within the margin");
    assert!(p.current().expect("a decision").chosen.is_wearable_only());
    assert_eq!(decide(link, Mode::Stream, at(within)).chosen, for_period.chosen);
    // Past the margin it leaves for the period's cut.
    p.handle_rate(at(1.0 / (1.0 + 2.0 * margin)));
    let left = p.poll_decision(pair.graph(), w, h).expect("decides").expect("a switch past the margin");
    assert_eq!(left.chosen, for_period.chosen);
    // A period it meets again: back to every layer here, though not faster by the margin.
    p.handle_rate(at(1.02));
    let back = p.poll_decision(pair.graph(), w, h).expect("decides").expect("a switch to meet the period");
    assert!(back.chosen.is_wearable_only(), "{}", back.reason);
}

/// A second engine on each side whose layer times are `tract`'s scaled by
/// `early` on the layers (in the DAG's order) that hold the first half of
/// the work, and by `late` on the rest.
fn skewed(tract: &dyn LatencyModel, graph: &LayerGraph, early: f64, late: f64) -> ProfiledLatency {
    let costs = tract.node_costs(graph);
    let total: f64 = costs.per_node_s.iter().sum();
    let mut before = 0.0;
    let per_node_s = costs
        .per_node_s
        .iter()
        .map(|s| {
            let scale = if before < total / 2.0 { early } else { late };
            before += s;
            s * scale
        })
        .collect();
    ProfiledLatency { per_node_s, overhead_s: costs.overhead_s }
}

/// With two engines a side, each faster on a different half of the model,
/// the planner chooses the cut and both halves' engines together: the
/// latency of its choice is the minimum over every cut of the DAG and
/// every pair of engines (the oracle, by enumeration), with that pair's
/// engines, and beats the best cut on the engines that are faster for the
/// whole model (what `auto` chose per side before).
#[test]
fn the_engines_of_both_halves_are_chosen_with_the_cut() {
    // MobileNet: its work spread over a chain of layers (MNIST's sits in one).
    let pair = Pair::of(ZooSpec::MobileNetV1 { alpha_percent: 25, resolution: 128 });
    let graph = pair.graph();
    let (w, h) = pair.sides();
    // Each side's second engine is fast on the early layers, slow on the late ones.
    let w_ort = skewed(&pair.watch, graph, 0.2, 2.5);
    let h_ort = skewed(&pair.phone, graph, 0.2, 2.5);
    let wearable = [
        EngineSide { engine: Engine::Tract, side: w },
        EngineSide { engine: Engine::OnnxRuntime, side: Side { latency: &w_ort, ..w } },
    ];
    let handheld = [
        EngineSide { engine: Engine::Tract, side: h },
        EngineSide { engine: Engine::OnnxRuntime, side: Side { latency: &h_ort, ..h } },
    ];
    let all = enumerate_cuts(graph, 100_000).expect("MNIST's cuts");
    let mut mixed = 0;
    for k in [300.0, 1_000.0, 3_000.0, 10_000.0, 30_000.0, 100_000.0] {
        let c = conditions(kbps(k), LatencyHint::Fastest);
        let mut planner = Planner::new(PlannerConfig::default(), c);
        planner.poll_engines(graph, &wearable, &handheld).expect("decides");
        let d = planner.current().expect("a decision").clone();
        // The oracle: every cut on every pair of engines.
        let mut oracle = (f64::INFINITY, None);
        let mut whole = f64::INFINITY;
        let faster = |sides: &[EngineSide]| {
            sides
                .iter()
                .min_by(|a, b| {
                    let t = |e: &EngineSide| e.side.latency.node_costs(graph).per_node_s.iter().sum::<f64>();
                    t(a).total_cmp(&t(b))
                })
                .map(|e| e.engine)
        };
        let (w_whole, h_whole) = (faster(&wearable), faster(&handheld));
        for we in &wearable {
            for he in &handheld {
                let prices = NodePrices::new(graph, we.side, he.side, &c.link, &c.status, c.weights);
                for cut in &all {
                    let t = evaluate(graph, &prices, cut, c.link.rtt).latency_s;
                    if t < oracle.0 {
                        oracle = (t, Some(Engines { prefix: we.engine, suffix: he.engine }));
                    }
                    if Some(we.engine) == w_whole && Some(he.engine) == h_whole {
                        whole = whole.min(t);
                    }
                }
            }
        }
        let engines = d.engines.expect("the decision names its engines");
        assert!(
            (d.evaluation.latency_s - oracle.0).abs() <= 1e-9 * oracle.0,
            "at {k} kbit/s: chose {} ms on {engines}, the oracle {} ms on {:?}",
            d.evaluation.latency_s * 1e3,
            oracle.0 * 1e3,
            oracle.1
        );
        assert!(d.evaluation.latency_s <= whole * (1.0 + 1e-9));
        // Only the engines that run a layer matter.
        if !d.chosen.is_wearable_only() && d.chosen.prefix_len() > 0 {
            assert_eq!(Some(engines), oracle.1, "at {k} kbit/s");
        }
        eprintln!(
            "{k} kbit/s: {} layers here on {engines}, {:.3} ms; whole-model engines {w_whole:?}+{h_whole:?} {:.3} ms",
            d.chosen.prefix_len(),
            d.evaluation.latency_s * 1e3,
            whole * 1e3
        );
        if engines.prefix != engines.suffix && d.evaluation.latency_s < whole * 0.99 {
            mixed += 1;
        }
    }
    assert!(mixed >= 1, "some link must split the model over two engines, faster than the whole-model pick");
}

/// A switch of engines alone must beat the hysteresis margin, as a switch
/// of cuts does: the decision in force is priced on its own engines.
#[test]
fn a_switch_of_engines_must_beat_the_margin() {
    let pair = Pair::mnist();
    let graph = pair.graph();
    let (w, h) = pair.sides();
    let all_here = |planner: &mut Planner, w_alt: &ProfiledLatency| {
        let wearable = [
            EngineSide { engine: Engine::Tract, side: w },
            EngineSide { engine: Engine::OnnxRuntime, side: Side { latency: w_alt, ..w } },
        ];
        let handheld = [EngineSide { engine: Engine::Tract, side: h }];
        planner.handle_predictor_update();
        planner.poll_engines(graph, &wearable, &handheld).expect("decides");
        planner.current().expect("a decision").engines.expect("engines").prefix
    };
    // A link so slow that every layer stays on the watch.
    let mut planner = Planner::new(PlannerConfig::default(), conditions(kbps(1.0), LatencyHint::Fastest));
    assert_eq!(all_here(&mut planner, &skewed(&pair.watch, graph, 1.5, 1.5)), Engine::Tract);
    // 5% faster: within the 10% margin, kept.
    assert_eq!(all_here(&mut planner, &skewed(&pair.watch, graph, 0.95, 0.95)), Engine::Tract);
    // 30% faster: switched.
    assert_eq!(all_here(&mut planner, &skewed(&pair.watch, graph, 0.7, 0.7)), Engine::OnnxRuntime);
}

/// A link of 1 Mbit/s each way with round trip `rtt`.
fn with_rtt(rtt: Duration) -> LinkEstimate {
    LinkEstimate { rtt, ..kbps(1_000.0) }
}

/// The planner for `link` and the fastest single frame, its first
/// decision made with `w` and `h`.
fn decided(pair: &Pair, link: LinkEstimate, w: Side, h: Side) -> Planner {
    let mut planner = Planner::new(PlannerConfig::default(), conditions(link, LatencyHint::Fastest));
    planner.poll_decision(pair.graph(), w, h).expect("decides").expect("a first decision");
    planner
}

/// A decision to run every layer here for the fastest single frame stands
/// without a search while it is faster than the round trip, which every
/// cut that offloads pays: the predictions move (here 1.5x slower) and
/// the decision is repriced, not searched again. In a stream, or once the
/// round trip is shorter, the planner searches as before.
#[test]
fn every_layer_here_faster_than_the_round_trip_stands_without_a_search() {
    let pair = Pair::mnist();
    let (w, h) = pair.sides();
    let link = with_rtt(Duration::from_secs(1));
    let mut planner = decided(&pair, link, w, h);
    let first = planner.current().expect("a decision").clone();
    assert!(first.chosen.is_wearable_only(), "{}", first.reason);
    assert_eq!(planner.searches(), 1);
    let slower = FlopsModel { us_per_mac: pair.watch.us_per_mac * 1.5, ..pair.watch.clone() };
    let w_slower = Side { latency: &slower, energy: &pair.watch_energy };
    planner.handle_predictor_update();
    assert!(planner.poll_decision(pair.graph(), w_slower, h).expect("decides").is_none());
    assert_eq!(planner.searches(), 1, "no search");
    // Repriced with the new predictions, as a search keeping the cut would.
    let prices = NodePrices::new(
        pair.graph(),
        w_slower,
        h,
        &link,
        &HandheldStatus::default(),
        EnergyWeights::default(),
    );
    let here = evaluate(pair.graph(), &prices, &first.chosen, link.rtt);
    let now = planner.current().expect("a decision").evaluation.clone();
    assert_eq!(now.latency_s, here.latency_s);
    assert!(
        now.latency_s > first.evaluation.latency_s * 1.3,
        "{} vs {}",
        now.latency_s,
        first.evaluation.latency_s
    );
    // A stream's period pays no round trip: searched.
    planner.handle_mode(Mode::Stream);
    planner.poll_decision(pair.graph(), w_slower, h).expect("decides");
    assert_eq!(planner.searches(), 2, "a stream searches");
    planner.handle_mode(Mode::Single);
    planner.poll_decision(pair.graph(), w_slower, h).expect("decides");
    assert_eq!(
        planner.searches(),
        3,
        "back to single frames: the decision in force came from the stream's search"
    );
    // A round trip shorter than every layer here: searched.
    planner.handle_predictor_update();
    planner.poll_decision(pair.graph(), w_slower, h).expect("decides");
    assert_eq!(planner.searches(), 3, "every layer here again, still under the round trip");
    planner.handle_link(with_rtt(Duration::from_secs_f64(now.latency_s * 0.5)));
    planner.poll_decision(pair.graph(), w_slower, h).expect("decides");
    assert_eq!(planner.searches(), 4, "a round trip shorter than the frame: searched");
}

/// The round-trip rule never keeps a decision a search would replace:
/// over links (round trips and rates) and watch predictions (faster and
/// slower), whenever the planner kept every layer here without a search,
/// a planner deciding afresh under the same conditions finds no cut that
/// beats it past the margin. Both outcomes occur along the sweep.
#[test]
fn the_round_trip_rule_keeps_only_what_no_cut_beats() {
    let pair = Pair::mnist();
    let (w, h) = pair.sides();
    let (mut kept, mut searched) = (0, 0);
    for rtt_ms in [1.0, 5.0, 20.0, 50.0, 200.0] {
        for kbit in [100.0, 2_000.0, 100_000.0] {
            for scale in [0.1, 0.5, 2.0, 8.0, 40.0] {
                let mut planner = decided(&pair, with_rtt(Duration::from_secs(1)), w, h);
                assert!(planner.current().expect("a decision").chosen.is_wearable_only());
                let link = LinkEstimate { rtt: Duration::from_secs_f64(rtt_ms / 1e3), ..kbps(kbit) };
                let model = FlopsModel { us_per_mac: pair.watch.us_per_mac * scale, ..pair.watch.clone() };
                let w_now = Side { latency: &model, energy: &pair.watch_energy };
                planner.handle_link(link);
                planner.handle_predictor_update();
                let before = planner.searches();
                let switched = planner.poll_decision(pair.graph(), w_now, h).expect("decides");
                if planner.searches() > before {
                    searched += 1;
                    continue;
                }
                kept += 1;
                assert!(switched.is_none());
                let current = planner.current().expect("a decision");
                assert!(current.chosen.is_wearable_only());
                let fresh = decided(&pair, link, w_now, h);
                let best = fresh.current().expect("a decision");
                assert!(
                    !beats(&best.evaluation, &current.evaluation, LatencyHint::Fastest, Mode::Single, 0.1),
                    "kept every layer here at {rtt_ms} ms, {kbit} kbit/s, watch x{scale}, but {} beats it",
                    best.reason
                );
            }
        }
    }
    assert!(kept >= 10 && searched >= 10, "kept {kept}, searched {searched}: the sweep must do both");
}

/// The round-trip rule keeps only a decision a search chose or kept for
/// the fastest single frame: with the watch's cluster and frequency
/// chosen with the cut, every layer here at PropT ∞ runs at a setting
/// that saves energy, and once the hint asks for the fastest frame the
/// planner searches again and takes the fastest setting, as a planner
/// deciding afresh does.
#[test]
fn a_hint_that_changes_searches_again_for_the_setting() {
    let pair = Pair::mnist();
    let (w, h) = pair.sides();
    let profile = DeviceProfile::shipped("watch-w5").expect("shipped");
    // A link so slow that every layer stays here under either hint.
    let link = LinkEstimate { rtt: Duration::from_secs(1), ..kbps(1.0) };
    let planner_for =
        |hint| Planner::new(PlannerConfig::default(), conditions(link, hint)).with_dvfs(profile.clone());
    let mut planner = planner_for(LatencyHint::EnergyFirst);
    let saving = planner.poll_decision(pair.graph(), w, h).expect("decides").expect("a first decision");
    let mut fresh = planner_for(LatencyHint::Fastest);
    let fastest = fresh.poll_decision(pair.graph(), w, h).expect("decides").expect("a first decision");
    assert!(saving.chosen.is_wearable_only() && fastest.chosen.is_wearable_only());
    assert_ne!(saving.setting, fastest.setting, "the check needs the hints to choose different settings");
    planner.handle_hint(LatencyHint::Fastest);
    let now = planner.poll_decision(pair.graph(), w, h).expect("decides").expect("a new setting");
    assert_eq!(planner.searches(), 2);
    assert_eq!((now.chosen, now.setting), (fastest.chosen, fastest.setting));
}
