//! The layer sweep's single-layer models load in tract as exactly one
//! predictor unit of the class they were drawn for.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use tandem_core::{InputShapes, Model};
use tandem_models::layers::{sample_generic, LayerSpec};
use tandem_plan::predict::features::graph_features;

fn class_of(spec: &LayerSpec) -> &'static str {
    match spec {
        LayerSpec::Conv { .. } => "conv",
        LayerSpec::Fc { .. } => "fc",
        LayerSpec::Pool { .. } | LayerSpec::GlobalPool { .. } => "pool",
        LayerSpec::Activation { .. } => "activation",
        LayerSpec::Recurrent { .. } => "recurrent",
        LayerSpec::Binary { .. } | LayerSpec::Other { .. } => "other",
    }
}

#[test]
fn generic_layers_load_as_one_unit_of_their_class() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    for _ in 0..120 {
        let spec = sample_generic(&mut rng);
        let bytes = spec.build(0).expect("builds");
        let model = Model::from_bytes(&bytes, &InputShapes::none())
            .unwrap_or_else(|e| panic!("{spec:?} does not load: {e}"));
        let units = graph_features(model.graph());
        assert_eq!(units.len(), 1, "{spec:?} gives units {units:?}");
        assert_eq!(units[0].1.kind, class_of(&spec), "{spec:?}");
        if let LayerSpec::Conv { bn: true, activation: Some(_), .. } = spec {
            assert_eq!(units[0].1.fused, "BatchNormalization+Relu");
        }
    }
}

#[test]
fn mobilenet_units_absorb_batch_norm_and_relu() {
    let spec = tandem_models::ZooSpec::MobileNetV1 { alpha_percent: 25, resolution: 128 };
    let bytes = spec.build(1).expect("builds");
    let model = Model::from_bytes(&bytes, &InputShapes::none()).expect("loads");
    let units = graph_features(model.graph());
    let convs: Vec<_> = units.iter().filter(|(_, f)| f.kind == "conv").collect();
    assert_eq!(convs.len(), 27);
    for (unit, f) in &convs {
        assert_eq!(f.fused, "BatchNormalization+Relu", "{unit:?}");
        assert_eq!(unit.fused.len(), 2);
    }
    let depthwise = convs.iter().filter(|(_, f)| f.grouping == "depthwise").count();
    assert_eq!(depthwise, 13);
    // conv units + GlobalAveragePool + Flatten + Gemm + Softmax; every node in exactly one unit.
    assert_eq!(units.len(), 27 + 4);
    let mut covered: Vec<usize> = units.iter().flat_map(|(u, _)| u.nodes().collect::<Vec<_>>()).collect();
    covered.sort();
    assert_eq!(covered, (0..model.graph().nodes().len()).collect::<Vec<_>>());
}

#[test]
fn predictors_price_prefix_plus_suffix_as_the_whole_plus_one_overhead() {
    use tandem_plan::predict::{LatencyModel, LayerSample, PredictorSet};
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    // A synthetic dataset: time = 1 µs + macs / 1000.
    let samples: Vec<LayerSample> = (0..300)
        .filter_map(|_| {
            let spec = sample_generic(&mut rng);
            let model = Model::from_bytes(&spec.build(0).ok()?, &InputShapes::none()).ok()?;
            let (_, features) = graph_features(model.graph()).pop()?;
            let latency_us = 2.0 + features.macs / 1000.0;
            Some(LayerSample {
                features,
                latency_us,
                overhead_us: 1.0,
                source: "generic".into(),
                engine: Default::default(),
            })
        })
        .collect();
    let config = tandem_plan::predict::mlp::MlpConfig { steps: 2_000, ..Default::default() };
    let set = PredictorSet::fit(&samples, &config);
    let bytes = tandem_models::ZooSpec::Mnist.build(1).expect("builds");
    let model = Model::from_bytes(&bytes, &InputShapes::none()).expect("loads");
    let g = model.graph();
    let cut = tandem_core::Cut::at_flops_fraction(g, 0.5);
    for p in [&set.dt_lr as &dyn LatencyModel, &set.evolp, &set.flops] {
        let whole = p.predict_model(g).as_secs_f64();
        let parts = (p.predict_prefix(g, &cut) + p.predict_suffix(g, &cut)).as_secs_f64();
        assert!(whole > 0.0, "{}", p.name());
        let overhead = 1e-6;
        assert!((parts - whole - overhead).abs() < 5e-9, "{}: {parts} vs {whole}", p.name());
    }
    // DT+LR recovers the synthetic law on mnist's conv layers within 10%.
    let costs = set.dt_lr.node_costs(g);
    for (unit, f) in graph_features(g) {
        if f.kind == "conv" {
            let want = (1.0 + f.macs / 1000.0) * 1e-6;
            let got = costs.per_node_s[unit.head];
            assert!((got - want).abs() / want < 0.1, "{}: {got} vs {want}", g.nodes()[unit.head].name);
        }
    }
}
