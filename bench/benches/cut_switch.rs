//! Criterion: the cost of switching to a cut whose plans are cached, against
//! building the plans of a new cut, on the zoo's MNIST CNN.

// criterion_group! generates an undocumented public function.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, Criterion};
use tandem::{Cut, InputShapes, Model, SplitExecutor, SplitPlan};

fn cut_switch(c: &mut Criterion) {
    let paths = tandem_models::ensure_models().expect("models");
    let path = paths.zoo_path("mnist").expect("mnist");
    let model = Model::from_path(path, &InputShapes::none()).expect("model");
    let cut = Cut::at_flops_fraction(model.graph(), 0.5);
    let exec = SplitExecutor::new(model.clone());
    exec.plan(&cut).expect("plan");
    let mut group = c.benchmark_group("cut_switch");
    group.sample_size(20);
    group.bench_function("cached", |b| b.iter(|| exec.plan(&cut).expect("cached plan")));
    group.bench_function("build_new", |b| b.iter(|| SplitPlan::build(&model, &cut).expect("plan")));
    group.finish();
}

criterion_group!(benches, cut_switch);
criterion_main!(benches);
