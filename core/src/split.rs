//! Split execution: for a [`Cut`], two optimized halves, the prefix
//! (model inputs → crossing tensors) and the suffix (crossing tensors →
//! model outputs), each on its engine ([`crate::engine`]), cached per cut.
//!
//! Each half is cut out of the ONNX graph itself, at ONNX-node granularity,
//! and then parsed and optimized by its engine on its own. The engine is
//! free to fuse inside a half; nothing it fuses can straddle the cut, and
//! the tensors that cross are plain ONNX tensors, never an engine's packed
//! layouts (so either engine can run either half). Const
//! subgraphs (weights, `ConstantOfShape`, ...) are copied into every half
//! that needs them, so they never cross the link.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tract_onnx::pb;
use tract_onnx::prelude::*;

use crate::cut::Cut;
use crate::engine::{self, Engine, Engines, Runner};
use crate::error::{Error, Result, TractContext};
use crate::graph::{node_inputs, LayerGraph, NodeId, Producer, TensorId};
use crate::lru::ByteLru;
use crate::model::Model;

/// Named tensor values.
pub type Values = HashMap<String, TValue>;

/// Which halves of a split a process builds: the wearable runs only the
/// prefix, the handheld only the suffix, so each optimizes only its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Sides {
    /// The wearable's half.
    Prefix,
    /// The handheld's half.
    Suffix,
    /// Both (one process running the whole split, as tests and tools do).
    Both,
}

impl Sides {
    fn prefix(self) -> bool {
        self != Sides::Suffix
    }

    fn suffix(self) -> bool {
        self != Sides::Prefix
    }
}

/// One half of a split model, loaded on an engine and ready to run.
#[derive(Debug, Clone)]
pub struct Half {
    runner: Arc<dyn Runner>,
    inputs: Vec<TensorId>,
    outputs: Vec<TensorId>,
}

impl Half {
    /// Builds the half computing `outputs` from `inputs` with layers
    /// `nodes`, on `engine`.
    pub(crate) fn build(
        model: &Model,
        nodes: &[NodeId],
        inputs: &[TensorId],
        outputs: &[TensorId],
        what: &str,
        engine: Engine,
    ) -> Result<Half> {
        let proto = half_proto(model, nodes, inputs, outputs);
        let runner = engine::load(engine, model, &proto, what)?;
        Ok(Half { runner, inputs: inputs.to_vec(), outputs: outputs.to_vec() })
    }

    /// Runs the half, reading its inputs from `values` by name.
    pub fn run(&self, graph: &LayerGraph, values: &Values) -> Result<Values> {
        self.run_dilated(graph, values, 1.0)
    }

    /// Runs the half as a device `factor` times slower than this host
    /// would ([`Runner::run`]): the wall clock is the emulated device's.
    pub fn run_dilated(&self, graph: &LayerGraph, values: &Values, factor: f64) -> Result<Values> {
        let feed = self.feed(graph, values)?;
        let out = crate::guard::caught_on(
            self.engine(),
            || "running a plan".into(),
            || self.runner.run(feed, factor),
        )?;
        let mut result = Values::with_capacity(self.outputs.len());
        for (&t, v) in self.outputs.iter().zip(out) {
            result.insert(graph.tensor(t).name.clone(), normalize_value(v)?);
        }
        Ok(result)
    }

    /// The half's inputs from `values`, in its order, each checked against the graph.
    pub(crate) fn feed(&self, graph: &LayerGraph, values: &Values) -> Result<TVec<TValue>> {
        let mut feed = TVec::new();
        for &t in &self.inputs {
            let info = graph.tensor(t);
            let v = values.get(&info.name).ok_or_else(|| Error::MissingTensor(info.name.clone()))?;
            check_tensor(graph, t, v)?;
            feed.push(v.clone());
        }
        Ok(feed)
    }

    /// The loaded half.
    pub fn runner(&self) -> &Arc<dyn Runner> {
        &self.runner
    }

    /// The engine it runs on.
    pub fn engine(&self) -> Engine {
        self.runner.engine()
    }

    /// Tensors the half reads.
    pub fn inputs(&self) -> &[TensorId] {
        &self.inputs
    }

    /// Tensors the half computes.
    pub fn outputs(&self) -> &[TensorId] {
        &self.outputs
    }
}

/// Checks that a fed value has the type and shape the graph says.
pub fn check_tensor(graph: &LayerGraph, t: TensorId, v: &Tensor) -> Result<()> {
    let info = graph.tensor(t);
    if v.datum_type() != info.dtype || v.shape() != info.shape.as_slice() {
        return Err(Error::TensorMismatch {
            name: info.name.clone(),
            expected: format!("{:?} {:?}", info.dtype, info.shape),
            got: format!("{:?} {:?}", v.datum_type(), v.shape()),
        });
    }
    Ok(())
}

/// tract computes shapes as TDim; outside a plan they are i64, as in ONNX.
fn normalize_value(v: TValue) -> Result<TValue> {
    if v.datum_type() == DatumType::TDim {
        Ok(v.cast_to::<i64>().tract(|| "casting a shape tensor to i64".into())?.into_owned().into_tvalue())
    } else {
        Ok(v)
    }
}

/// The two plans of one cut.
#[derive(Debug, Clone)]
pub struct SplitPlan {
    cut: Cut,
    /// `None` when the wearable runs no layer.
    prefix: Option<Half>,
    /// `None` when the handheld runs no layer.
    suffix: Option<Half>,
    /// Model outputs the wearable computes itself.
    local_outputs: Vec<TensorId>,
    /// The halves built.
    sides: Sides,
    /// The engine of each half.
    engines: Engines,
    build_time: Duration,
}

impl SplitPlan {
    /// Builds and optimizes both halves of `cut`.
    pub fn build(model: &Model, cut: &Cut) -> Result<SplitPlan> {
        SplitPlan::build_sides(model, cut, Sides::Both)
    }

    /// Builds and optimizes the halves of `cut` that `sides` names, on tract.
    pub fn build_sides(model: &Model, cut: &Cut, sides: Sides) -> Result<SplitPlan> {
        SplitPlan::build_on(model, cut, sides, Engines::TRACT)
    }

    /// Builds the halves of `cut` that `sides` names, the prefix on
    /// `engines.prefix` and the suffix on `engines.suffix`.
    pub fn build_on(model: &Model, cut: &Cut, sides: Sides, engines: Engines) -> Result<SplitPlan> {
        let started = Instant::now();
        let g = model.graph();
        let produced_by_prefix =
            |t: TensorId| matches!(g.tensor(t).producer, Producer::Node(p) if cut.on_wearable(p));
        let local_outputs: Vec<TensorId> =
            g.outputs().iter().copied().filter(|&t| !cut.down_tensors().contains(&t)).collect();
        let mut prefix_outputs: Vec<TensorId> =
            cut.up_tensors().iter().copied().filter(|&t| produced_by_prefix(t)).collect();
        for &t in &local_outputs {
            if !prefix_outputs.contains(&t) && !matches!(g.tensor(t).producer, Producer::Input(_)) {
                prefix_outputs.push(t);
            }
        }
        let prefix_nodes = cut.prefix_nodes();
        let prefix = if !sides.prefix() || prefix_nodes.is_empty() || prefix_outputs.is_empty() {
            None
        } else {
            let inputs: Vec<TensorId> = g
                .inputs()
                .iter()
                .copied()
                .filter(|&t| g.tensor(t).consumers.iter().any(|&c| cut.on_wearable(c)))
                .collect();
            Some(Half::build(model, &prefix_nodes, &inputs, &prefix_outputs, "the prefix", engines.prefix)?)
        };
        let suffix_nodes = cut.suffix_nodes();
        let suffix = if !sides.suffix() || suffix_nodes.is_empty() || cut.down_tensors().is_empty() {
            None
        } else {
            Some(Half::build(
                model,
                &suffix_nodes,
                cut.up_tensors(),
                cut.down_tensors(),
                "the suffix",
                engines.suffix,
            )?)
        };
        Ok(SplitPlan {
            cut: cut.clone(),
            prefix,
            suffix,
            local_outputs,
            sides,
            engines,
            build_time: started.elapsed(),
        })
    }

    /// The cut.
    pub fn cut(&self) -> &Cut {
        &self.cut
    }

    /// The wearable's half.
    pub fn prefix(&self) -> Option<&Half> {
        self.prefix.as_ref()
    }

    /// The handheld's half.
    pub fn suffix(&self) -> Option<&Half> {
        self.suffix.as_ref()
    }

    /// The engine of each half.
    pub fn engines(&self) -> Engines {
        self.engines
    }

    /// How long building both halves took.
    pub fn build_time(&self) -> Duration {
        self.build_time
    }

    /// Runs the wearable's half: returns the tensors to send up plus the
    /// model outputs the wearable computes itself.
    pub fn run_prefix(&self, graph: &LayerGraph, inputs: &Values) -> Result<Values> {
        self.run_prefix_dilated(graph, inputs, 1.0)
    }

    /// [`SplitPlan::run_prefix`] on a device `factor` times slower ([`Half::run_dilated`]).
    pub fn run_prefix_dilated(&self, graph: &LayerGraph, inputs: &Values, factor: f64) -> Result<Values> {
        if !self.sides.prefix() {
            return Err(Error::InvalidCut(format!("{}: this process built only its suffix", self.cut.key())));
        }
        let mut out = match &self.prefix {
            Some(h) => h.run_dilated(graph, inputs, factor)?,
            None => Values::new(),
        };
        // Raw model inputs that the handheld reads cross unchanged.
        for &t in self.cut.up_tensors().iter().chain(&self.local_outputs) {
            if let Producer::Input(_) = graph.tensor(t).producer {
                let name = &graph.tensor(t).name;
                let v = inputs.get(name).ok_or_else(|| Error::MissingTensor(name.clone()))?;
                check_tensor(graph, t, v)?;
                out.insert(name.clone(), v.clone());
            }
        }
        Ok(out)
    }

    /// Runs the handheld's half on the received tensors: returns the model
    /// outputs to send back.
    pub fn run_suffix(&self, graph: &LayerGraph, received: &Values) -> Result<Values> {
        self.run_suffix_dilated(graph, received, 1.0)
    }

    /// [`SplitPlan::run_suffix`] on a device `factor` times slower ([`Half::run_dilated`]).
    pub fn run_suffix_dilated(&self, graph: &LayerGraph, received: &Values, factor: f64) -> Result<Values> {
        if !self.sides.suffix() {
            return Err(Error::InvalidCut(format!("{}: this process built only its prefix", self.cut.key())));
        }
        match &self.suffix {
            Some(h) => h.run_dilated(graph, received, factor),
            None => Ok(Values::new()),
        }
    }

    /// Prefix then suffix in this process: all model outputs.
    pub fn run(&self, graph: &LayerGraph, inputs: &Values) -> Result<Values> {
        let up = self.run_prefix(graph, inputs)?;
        let down = self.run_suffix(graph, &up)?;
        let mut outputs = Values::new();
        for &t in graph.outputs() {
            let name = &graph.tensor(t).name;
            let v =
                down.get(name).or_else(|| up.get(name)).ok_or_else(|| Error::MissingTensor(name.clone()))?;
            outputs.insert(name.clone(), v.clone());
        }
        Ok(outputs)
    }
}

/// Builds split plans on demand and keeps them, so that switching back to a
/// cut costs a hash lookup. Each plan holds its own copy of the weights its
/// halves use, so the cache is bounded in those bytes (least recently used
/// plans go first; one in use elsewhere lives on until dropped there).
///
/// A plan being built on one thread is waited for on another, not built
/// twice: a frame that needs the plan a background builder has begun
/// waits for the rest of that build, and two builds do not share the CPU.
#[derive(Debug)]
pub struct SplitExecutor {
    model: Model,
    /// The engines [`SplitExecutor::plan`] and [`SplitExecutor::plan_sides`] use.
    engines: Engines,
    cache: Mutex<ByteLru<PlanKey, Arc<SplitPlan>>>,
    /// The plans being built now; `built` wakes their waiters.
    building: Mutex<HashSet<PlanKey>>,
    built: Condvar,
    /// How many plans it has built ([`SplitExecutor::plans_built`]).
    builds: AtomicU64,
}

/// What a plan is cached by: its cut, the halves, their engines.
type PlanKey = (Cut, Sides, Engines);

/// Marks a plan as being built until dropped (built, failed or unwound),
/// then wakes the threads waiting for it.
struct Building<'a> {
    executor: &'a SplitExecutor,
    key: &'a PlanKey,
}

impl Drop for Building<'_> {
    fn drop(&mut self) {
        self.executor.building().remove(self.key);
        self.executor.built.notify_all();
    }
}

/// The weight bytes the halves of `cut` that `sides` names hold: the
/// initializers their layers (and the const nodes those read) use, as each
/// half's ONNX model carries them.
pub fn plan_weight_bytes(model: &Model, cut: &Cut, sides: Sides) -> u64 {
    let Some(graph) = model.proto().graph.as_ref() else { return 0 };
    let mut halves = vec![];
    if sides.prefix() {
        halves.push(cut.prefix_nodes());
    }
    if sides.suffix() {
        halves.push(cut.suffix_nodes());
    }
    // Every half carries the sparse initializers whole.
    let sparse: u64 = graph
        .sparse_initializer
        .iter()
        .map(|s| {
            s.values.as_ref().map_or(0, initializer_bytes) + s.indices.as_ref().map_or(0, initializer_bytes)
        })
        .sum();
    halves
        .iter()
        .map(|nodes| {
            let (included, inits) = reached(model, nodes, &[]);
            let initializers: u64 = inits.iter().map(|&i| initializer_bytes(&graph.initializer[i])).sum();
            // Weights exported as Constant nodes are their attributes' tensors.
            let constants: u64 = included
                .iter()
                .flat_map(|&pi| &graph.node[pi].attribute)
                .map(|a| {
                    a.t.as_ref().map_or(0, initializer_bytes)
                        + a.sparse_tensor.as_ref().map_or(0, |s| {
                            s.values.as_ref().map_or(0, initializer_bytes)
                                + s.indices.as_ref().map_or(0, initializer_bytes)
                        })
                })
                .sum();
            initializers + constants + sparse
        })
        .sum()
}

/// An initializer's size in bytes, from its shape and type (or its data).
fn initializer_bytes(t: &pb::TensorProto) -> u64 {
    let elements = t.dims.iter().try_fold(1u64, |n, &d| n.checked_mul(u64::try_from(d).ok()?)).unwrap_or(0);
    let width = match t.data_type {
        2 | 3 | 9 => 1,        // uint8, int8, bool
        4 | 5 | 10 | 16 => 2,  // uint16, int16, float16, bfloat16
        1 | 6 | 12 => 4,       // float, int32, uint32
        7 | 11 | 13 | 14 => 8, // int64, double, uint64, complex64
        15 => 16,              // complex128
        _ => return t.raw_data.len() as u64 + t.string_data.iter().map(|s| s.len() as u64).sum::<u64>(),
    };
    elements.saturating_mul(width)
}

impl SplitExecutor {
    /// An executor with an empty cache, unbounded.
    pub fn new(model: Model) -> Self {
        SplitExecutor::with_cache_limit(model, u64::MAX)
    }

    /// An executor whose cached plans hold at most `bytes` of weights
    /// ([`plan_weight_bytes`]); a plan larger than that alone is still
    /// built and kept until the next.
    pub fn with_cache_limit(model: Model, bytes: u64) -> Self {
        SplitExecutor {
            model,
            engines: Engines::TRACT,
            cache: Mutex::new(ByteLru::new(bytes)),
            building: Mutex::new(HashSet::new()),
            built: Condvar::new(),
            builds: AtomicU64::new(0),
        }
    }

    /// The same executor, building its halves on `engines` unless told otherwise.
    pub fn with_engines(mut self, engines: Engines) -> Self {
        self.engines = engines;
        self
    }

    /// The engines it builds on unless told otherwise.
    pub fn engines(&self) -> Engines {
        self.engines
    }

    /// The model.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// Both halves of `cut`, built on first use.
    pub fn plan(&self, cut: &Cut) -> Result<Arc<SplitPlan>> {
        self.plan_sides(cut, Sides::Both)
    }

    /// The halves of `cut` that `sides` names, built on first use.
    pub fn plan_sides(&self, cut: &Cut, sides: Sides) -> Result<Arc<SplitPlan>> {
        self.plan_on(cut, sides, self.engines)
    }

    /// The halves of `cut` that `sides` names on `engines`, built on first
    /// use; while another thread builds them, this one waits for that
    /// build (and builds them itself only if it failed).
    pub fn plan_on(&self, cut: &Cut, sides: Sides, engines: Engines) -> Result<Arc<SplitPlan>> {
        let key = (cut.clone(), sides, engines);
        if let Some(p) = self.lock().get(&key) {
            return Ok(p.clone());
        }
        {
            let mut building = self.building();
            loop {
                // Looked up again under the builders' lock: a build ends
                // by caching its plan, then leaving `building`.
                if let Some(p) = self.lock().get(&key) {
                    return Ok(p.clone());
                }
                if !building.contains(&key) {
                    break;
                }
                building = self.built.wait(building).unwrap_or_else(|e| e.into_inner());
            }
            building.insert(key.clone());
        }
        let _building = Building { executor: self, key: &key };
        let plan = Arc::new(SplitPlan::build_on(&self.model, cut, sides, engines)?);
        self.builds.fetch_add(1, Ordering::Relaxed);
        let bytes = plan_weight_bytes(&self.model, cut, sides);
        self.lock().insert(key.clone(), plan.clone(), bytes);
        Ok(plan)
    }

    /// How many plans it has built: neither a cached one, nor one another
    /// thread was building (and this one waited for), nor a failed build counts.
    pub fn plans_built(&self) -> u64 {
        self.builds.load(Ordering::Relaxed)
    }

    /// Whether both halves of `cut` are cached.
    pub fn is_cached(&self, cut: &Cut) -> bool {
        self.is_cached_sides(cut, Sides::Both)
    }

    /// Whether the halves of `cut` that `sides` names are cached.
    pub fn is_cached_sides(&self, cut: &Cut, sides: Sides) -> bool {
        self.is_cached_on(cut, sides, self.engines)
    }

    /// Whether the halves of `cut` that `sides` names are cached on `engines`.
    pub fn is_cached_on(&self, cut: &Cut, sides: Sides, engines: Engines) -> bool {
        self.lock().contains(&(cut.clone(), sides, engines))
    }

    /// Number of cached cuts.
    pub fn cached(&self) -> usize {
        self.lock().len()
    }

    /// Weight bytes the cached plans hold ([`plan_weight_bytes`]).
    pub fn cached_bytes(&self) -> u64 {
        self.lock().bytes()
    }

    fn lock(&self) -> MutexGuard<'_, ByteLru<PlanKey, Arc<SplitPlan>>> {
        // A poisoned cache only means a builder panicked; the map is still sound.
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn building(&self) -> MutexGuard<'_, HashSet<PlanKey>> {
        // As the cache: a set of keys stays sound.
        self.building.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The model's outputs among `values` (a run's tensors), by name;
/// missing ones are an error.
pub fn model_outputs(graph: &LayerGraph, values: &Values) -> Result<Values> {
    graph
        .outputs()
        .iter()
        .map(|&t| {
            let name = &graph.tensor(t).name;
            values
                .get(name)
                .map(|v| (name.clone(), v.clone()))
                .ok_or_else(|| Error::MissingTensor(name.clone()))
        })
        .collect()
}

/// The whole model as one optimized tract plan (the unsplit baseline).
pub fn full_plan(model: &Model) -> Result<Half> {
    full_plan_on(model, Engine::Tract)
}

/// The whole model loaded on `engine`.
pub fn full_plan_on(model: &Model, engine: Engine) -> Result<Half> {
    let g = model.graph();
    let nodes: Vec<NodeId> = (0..g.nodes().len()).collect();
    Half::build(model, &nodes, g.inputs(), g.outputs(), "the whole model", engine)
}

/// The whole model as one plan whose outputs also include `taps`, to read
/// intermediate tensors of an unsplit run.
pub fn tapped_plan(model: &Model, taps: &[TensorId]) -> Result<Half> {
    tapped_plan_on(model, taps, Engine::Tract)
}

/// [`tapped_plan`] on `engine`.
pub fn tapped_plan_on(model: &Model, taps: &[TensorId], engine: Engine) -> Result<Half> {
    let g = model.graph();
    let nodes: Vec<NodeId> = (0..g.nodes().len()).collect();
    let mut outputs = g.outputs().to_vec();
    for &t in taps {
        if !outputs.contains(&t) && !matches!(g.tensor(t).producer, Producer::Input(_)) {
            outputs.push(t);
        }
    }
    Half::build(model, &nodes, g.inputs(), &outputs, "the tapped model", engine)
}

/// An ONNX model holding layers `nodes` (plus the const nodes and
/// initializers they need), reading `inputs` and producing `outputs`.
/// The ONNX nodes (by proto index) and initializers a half with layers
/// `nodes` and `outputs` holds: its layers, the const nodes they read
/// (transitively), and the initializers all of those read.
fn reached(model: &Model, nodes: &[NodeId], outputs: &[TensorId]) -> (HashSet<usize>, HashSet<usize>) {
    let g = model.graph();
    let Some(graph) = model.proto().graph.as_ref() else { return Default::default() };
    let initializer_ix: HashMap<&str, usize> =
        graph.initializer.iter().enumerate().map(|(i, t)| (t.name.as_str(), i)).collect();
    let mut included: HashSet<usize> = nodes.iter().map(|&n| g.nodes()[n].proto_index).collect();
    let mut inits: HashSet<usize> = HashSet::new();
    // Const model outputs are computed wherever they are asked for.
    for &t in outputs {
        let name = g.tensor(t).name.as_str();
        if let Some(c) = g.const_producer(name) {
            included.insert(c);
        } else if let Some(&i) = initializer_ix.get(name) {
            inits.insert(i);
        }
    }
    let mut stack: Vec<usize> = included.iter().copied().collect();
    while let Some(pi) = stack.pop() {
        for name in node_inputs(&graph.node[pi]) {
            if let Some(&i) = initializer_ix.get(name.as_str()) {
                inits.insert(i);
            } else if let Some(c) = g.const_producer(&name).or_else(|| g.dequantizer(&name)) {
                // Const nodes, and dequantizers of the integers that crossed
                // (or that this half computes), are recomputed here.
                if included.insert(c) {
                    stack.push(c);
                }
            }
        }
    }
    (included, inits)
}

pub(crate) fn half_proto(
    model: &Model,
    nodes: &[NodeId],
    inputs: &[TensorId],
    outputs: &[TensorId],
) -> pb::ModelProto {
    let g = model.graph();
    let proto = model.proto();
    let Some(graph) = proto.graph.as_ref() else {
        return proto.clone();
    };
    let (included, inits) = reached(model, nodes, outputs);
    let mut inits: Vec<usize> = inits.into_iter().collect();
    inits.sort_unstable();
    let init_names: HashSet<&str> = inits.iter().map(|&i| graph.initializer[i].name.as_str()).collect();
    let mut input = Vec::with_capacity(inputs.len());
    for &t in inputs {
        input.push(value_info(g, t));
    }
    // Models with IR < 4 also list initializers as graph inputs.
    input.extend(graph.input.iter().filter(|i| init_names.contains(i.name.as_str())).cloned());
    let half = pb::GraphProto {
        name: graph.name.clone(),
        node: g
            .proto_order()
            .iter()
            .filter(|pi| included.contains(pi))
            .map(|&pi| graph.node[pi].clone())
            .collect(),
        initializer: inits.iter().map(|&i| graph.initializer[i].clone()).collect(),
        sparse_initializer: graph.sparse_initializer.clone(),
        input,
        output: outputs.iter().map(|&t| value_info(g, t)).collect(),
        ..Default::default()
    };
    pb::ModelProto {
        ir_version: proto.ir_version,
        opset_import: proto.opset_import.clone(),
        producer_name: "tandem".into(),
        domain: proto.domain.clone(),
        model_version: proto.model_version,
        functions: proto.functions.clone(),
        graph: Some(half),
        ..Default::default()
    }
}

/// An ONNX value-info with the tensor's concrete type and shape.
fn value_info(g: &LayerGraph, t: TensorId) -> pb::ValueInfoProto {
    use pb::tensor_shape_proto::{dimension::Value as Dim, Dimension};
    let info = g.tensor(t);
    let dims =
        info.shape.iter().map(|&d| Dimension { value: Some(Dim::DimValue(d as i64)), ..Default::default() });
    pb::ValueInfoProto {
        name: info.name.clone(),
        r#type: Some(pb::TypeProto {
            value: Some(pb::type_proto::Value::TensorType(pb::type_proto::Tensor {
                elem_type: onnx_elem_type(info.dtype),
                shape: Some(pb::TensorShapeProto { dim: dims.collect() }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The ONNX `TensorProto.DataType` code of a tract datum type.
fn onnx_elem_type(dt: DatumType) -> i32 {
    use pb::tensor_proto::DataType as D;
    let d = match dt {
        DatumType::F32 => D::Float,
        DatumType::U8 => D::Uint8,
        DatumType::I8 => D::Int8,
        DatumType::U16 => D::Uint16,
        DatumType::I16 => D::Int16,
        DatumType::I32 => D::Int32,
        DatumType::I64 | DatumType::TDim => D::Int64,
        DatumType::Bool => D::Bool,
        DatumType::F16 => D::Float16,
        DatumType::F64 => D::Double,
        DatumType::U32 => D::Uint32,
        DatumType::U64 => D::Uint64,
        DatumType::String => D::String,
        _ => D::Undefined,
    };
    d as i32
}
