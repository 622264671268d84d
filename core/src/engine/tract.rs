//! The tract backend: a half parsed, typed and optimized by tract, run as
//! one plan, dilated and profiled node by node through tract's evaluation
//! hook.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tract_onnx::pb;
use tract_onnx::prelude::*;
use tract_onnx::tract_core::plan::{eval, SimpleState};

use super::{median, Backend, Engine, EngineNode, EngineProfile, Runner};
use crate::device_clock::DeviceClock;
use crate::error::{Result, TractContext};
use crate::model::Model;

/// tract, the default engine.
pub(crate) struct TractBackend;

impl Backend for TractBackend {
    fn engine(&self) -> Engine {
        Engine::Tract
    }

    fn load(&self, model: &Model, proto: &pb::ModelProto, what: &str) -> Result<Arc<dyn Runner>> {
        let plan = crate::guard::caught(
            || format!("planning {what}"),
            || model.optimize(proto, what)?.into_runnable().tract(|| format!("planning {what}")),
        )?;
        Ok(Arc::new(TractRunner { plan }))
    }
}

/// An optimized tract plan.
#[derive(Debug)]
struct TractRunner {
    plan: Arc<TypedRunnableModel>,
}

impl Runner for TractRunner {
    fn engine(&self) -> Engine {
        Engine::Tract
    }

    /// With `factor` > 1, each node takes `factor` times its thread's CPU
    /// time ([`DeviceClock`]), slept between nodes once 1 ms is owed.
    fn run(&self, feed: TVec<TValue>, factor: f64) -> Result<TVec<TValue>> {
        if factor <= 1.0 {
            return self.plan.run(feed).tract(|| "running a plan".into());
        }
        let mut state = SimpleState::new(&self.plan).tract(|| "creating a plan state".into())?;
        let mut clock = DeviceClock::start(factor);
        let out = state
            .run_plan_with_eval(feed, |ctx, op_state, node, input| {
                clock.time(|| eval(ctx, op_state, node, input))
            })
            .tract(|| "running a plan".into())?;
        clock.finish();
        Ok(out)
    }

    fn profile(&self, feed: &TVec<TValue>, warmup: usize, runs: usize) -> Result<EngineProfile> {
        let plan = &self.plan;
        let tract_nodes = plan.model().nodes().len();
        let mut state = SimpleState::new(plan).tract(|| "creating a plan state".into())?;
        let runs = runs.max(1);
        let mut node_samples: Vec<Vec<Duration>> = vec![Vec::with_capacity(runs); tract_nodes];
        let mut whole_samples = Vec::with_capacity(runs);
        for i in 0..warmup + runs {
            let mut elapsed = vec![Duration::ZERO; tract_nodes];
            state
                .run_plan_with_eval(feed.clone(), |ctx, op_state, node, input| {
                    let started = Instant::now();
                    let r = eval(ctx, op_state, node, input);
                    elapsed[node.id] += started.elapsed();
                    r
                })
                .tract(|| "profiling a run".into())?;
            let started = Instant::now();
            plan.run(feed.clone()).tract(|| "timing a run".into())?;
            let whole = started.elapsed();
            if i >= warmup {
                for (samples, e) in node_samples.iter_mut().zip(elapsed) {
                    samples.push(e);
                }
                whole_samples.push(whole);
            }
        }
        let nodes = plan
            .model()
            .nodes()
            .iter()
            .zip(node_samples.iter_mut())
            .map(|(node, samples)| EngineNode {
                name: node.name.clone(),
                op: node.op().name().to_string(),
                median: median(samples),
            })
            .collect();
        Ok(EngineProfile { nodes, whole_run: median(&mut whole_samples), runs, name_separators: &['.', '#'] })
    }
}
