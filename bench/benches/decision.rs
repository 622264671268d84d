//! Criterion: the partition decision for each zoo and light model
//! (GoogLeNet = inception_v1, DenseNet-121 included), by method, and its
//! parts: pricing the layers, one s–t min-cut (its windows computed
//! beforehand, as a planner does), simplifying the DAG (with the windows).
//! `tandem-bench decision-time` puts the same decisions side by side with
//! each model's inference time.

// criterion_group! generates an undocumented public function.
#![allow(missing_docs)]

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use tandem::device::DeviceProfile;
use tandem::energy::{ClusterEnergy, PowerModel};
use tandem::partition::mincut::min_cut_prefix_in;
use tandem::partition::{
    decide_with, DecisionInput, EnergyWeights, HandheldStatus, LatencyHint, LinkEstimate, Method, Mode,
    NodePrices, Objective, Side, Simplified,
};
use tandem::predict::{FlopsModel, Scaled};
use tandem::{InputShapes, Model};

fn decision(c: &mut Criterion) {
    let paths = tandem_models::ensure_models().expect("models");
    let files = paths.zoo.iter().map(|e| e.path.clone()).chain(paths.light.iter().map(|e| e.model.clone()));
    let watch = DeviceProfile::shipped("watch-w5").expect("profile");
    let phone = DeviceProfile::shipped("pixel-8-pro").expect("profile");
    let we = ClusterEnergy::new(&watch, PowerModel::Analytical).expect("energy");
    let pe = ClusterEnergy::new(&phone, PowerModel::Analytical).expect("energy");
    // The decision's cost barely depends on which predictor priced the layers.
    let host = FlopsModel { us_per_mac: 1e-4, overhead_us: 20.0 };
    let wl = Scaled { inner: &host, slowdown: watch.slowdown };
    let pl = Scaled { inner: &host, slowdown: phone.slowdown };
    for path in files {
        let model = Model::from_path(&path, &InputShapes::none()).expect("model");
        let g = model.graph();
        let input = DecisionInput {
            graph: g,
            wearable: Side { latency: &wl, energy: &we },
            handheld: Side { latency: &pl, energy: &pe },
            link: LinkEstimate {
                up_bytes_per_s: 125e3,
                down_bytes_per_s: 125e3,
                rtt: Duration::from_millis(30),
            },
            status: HandheldStatus { load: 0.5 },
            weights: EnergyWeights::default(),
            hint: LatencyHint::Fastest,
            mode: Mode::Single,
            codecs: None,
        };
        let simplified = Simplified::new(g);
        let mut group = c.benchmark_group(format!("decision/{}", model.name()));
        group
            .sample_size(20)
            .warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_secs(1));
        group.bench_function("heuristic", |b| {
            b.iter(|| decide_with(&input, Method::Heuristic, Some(&simplified)).expect("decides"))
        });
        group.bench_function("mincut", |b| {
            b.iter(|| decide_with(&input, Method::MinCut, Some(&simplified)).expect("decides"))
        });
        let stream = DecisionInput { mode: Mode::Stream, ..input };
        group.bench_function("mincut_stream", |b| {
            b.iter(|| decide_with(&stream, Method::MinCut, Some(&simplified)).expect("decides"))
        });
        let prices =
            NodePrices::new(g, input.wearable, input.handheld, &input.link, &input.status, input.weights);
        group.bench_function("part_prices", |b| {
            b.iter(|| {
                NodePrices::new(g, input.wearable, input.handheld, &input.link, &input.status, input.weights)
            })
        });
        group.bench_function("part_one_min_cut", |b| {
            b.iter(|| min_cut_prefix_in(g, &prices, Objective::Latency, simplified.windows()))
        });
        group.bench_function("part_simplify", |b| b.iter(|| Simplified::new(g)));
        group.finish();
    }
}

criterion_group!(benches, decision);
criterion_main!(benches);
