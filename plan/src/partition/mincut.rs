//! The exact partitioner for sum-of-costs objectives (the DADS
//! construction): the best prefix is an s–t minimum cut.
//!
//! Source side = wearable, sink side = handheld. For every layer v:
//! `s → v` costs v's handheld price (cut when v runs on the handheld),
//! `v → t` its wearable price (cut when v runs on the wearable), and
//! `v → u` is infinite for each predecessor u, so a prefix stays closed under
//! predecessors. A tensor is sent once however many layers read it: an
//! auxiliary node x per tensor gets `producer → x` with the tensor's
//! transfer price and `x → consumer` infinite, so x must sit on the handheld
//! side as soon as one consumer does, and the price is paid once. Model
//! inputs hang off s the same way; model outputs computed on the handheld pay
//! their way back on `s → producer`.

use super::{NodePrices, Objective};
use std::ops::Range;

use tandem_core::graph::{LayerGraph, Producer};

/// Capacity of the edges that must never be cut.
const INF: u64 = u64::MAX / 4;
/// Finite prices are scaled so the largest becomes this: integer capacities
/// keep Dinic's algorithm free of float-rounding micro-augmentations, and 2^40
/// levels keep the rounding error below 1e-12 of the largest price.
const SCALE_TOP: f64 = (1u64 << 40) as f64;

/// A max-flow network with integer capacities (Dinic's algorithm).
struct Network {
    /// Per edge: (to, capacity left); edge `e ^ 1` is its reverse.
    edges: Vec<(usize, u64)>,
    adjacency: Vec<Vec<usize>>,
}

impl Network {
    fn new(nodes: usize) -> Network {
        Network { edges: vec![], adjacency: vec![vec![]; nodes] }
    }

    fn add(&mut self, from: usize, to: usize, capacity: u64) {
        if capacity == 0 || from == to {
            return;
        }
        self.adjacency[from].push(self.edges.len());
        self.edges.push((to, capacity));
        self.adjacency[to].push(self.edges.len());
        self.edges.push((from, 0));
    }

    fn levels(&self, s: usize, level: &mut [i64]) {
        level.iter_mut().for_each(|l| *l = -1);
        level[s] = 0;
        let mut queue = std::collections::VecDeque::from([s]);
        while let Some(v) = queue.pop_front() {
            for &e in &self.adjacency[v] {
                let (to, cap) = self.edges[e];
                if cap > 0 && level[to] < 0 {
                    level[to] = level[v] + 1;
                    queue.push_back(to);
                }
            }
        }
    }

    fn push(&mut self, v: usize, t: usize, limit: u64, level: &[i64], next: &mut [usize]) -> u64 {
        if v == t {
            return limit;
        }
        while next[v] < self.adjacency[v].len() {
            let e = self.adjacency[v][next[v]];
            let (to, cap) = self.edges[e];
            if cap > 0 && level[to] == level[v] + 1 {
                let pushed = self.push(to, t, limit.min(cap), level, next);
                if pushed > 0 {
                    self.edges[e].1 -= pushed;
                    self.edges[e ^ 1].1 += pushed;
                    return pushed;
                }
            }
            next[v] += 1;
        }
        0
    }

    /// Runs max flow; returns the nodes on the source side of a minimum cut.
    fn source_side(&mut self, s: usize, t: usize) -> Vec<bool> {
        let mut level = vec![-1; self.adjacency.len()];
        let mut next = vec![0; self.adjacency.len()];
        loop {
            self.levels(s, &mut level);
            if level[t] < 0 {
                return level.iter().map(|&l| l >= 0).collect();
            }
            next.iter_mut().for_each(|n| *n = 0);
            while self.push(s, t, INF, &level, &mut next) > 0 {}
        }
    }
}

/// What the exact searches need of a graph alone, computed once per model
/// (the [`super::Planner`] keeps it beside the simplified DAG): its
/// windows ([`windows`]) and, per window, the tensors each search prices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Windows {
    /// Ranges of the node order between bottlenecks.
    pub ranges: Vec<Range<usize>>,
    /// Per window: the tensors made or read inside it (its min-cut network's).
    pub touching: Vec<Vec<usize>>,
    /// Per window: tensors made before its end (or model inputs) and read
    /// from its end on (the stream search's tail).
    pub tail_up: Vec<Vec<usize>>,
    /// Per window: model outputs made from its end on (they come down).
    pub tail_down: Vec<Vec<usize>>,
    /// Per window: tensors of which every prefix ending in it sends at
    /// least one up (empty when that is not certain): those made before
    /// its end, or model inputs, and read inside it or after it. It holds
    /// when some layer after the window depends on a model input: on the
    /// path from that input to that layer (on the handheld), some tensor
    /// goes from the wearable's side to the handheld's.
    pub one_crosses: Vec<Vec<usize>>,
    /// The graph's layer and tensor counts ([`Windows::fits`]).
    shape: (usize, usize),
}

impl Windows {
    /// The graph's windows and their tensor lists.
    pub fn new(graph: &LayerGraph) -> Windows {
        let n = graph.nodes().len();
        let ranges = windows(graph);
        let mut window_of = vec![0; n];
        for (i, w) in ranges.iter().enumerate() {
            window_of[w.clone()].iter_mut().for_each(|x| *x = i);
        }
        let k = ranges.len();
        let (mut touching, mut tail_up, mut tail_down) = (vec![vec![]; k], vec![vec![]; k], vec![vec![]; k]);
        for (id, tensor) in graph.tensors().iter().enumerate() {
            // Where it is made: a layer's window, before every window (a
            // model input), or nowhere (a constant: never crosses).
            let made = match tensor.producer {
                Producer::Input(_) => None,
                Producer::Node(u) => Some(u),
                Producer::Const => continue,
            };
            let last_read = tensor.consumers.iter().copied().max();
            let mut ws: Vec<usize> = tensor.consumers.iter().map(|&c| window_of[c]).collect();
            ws.extend(made.map(|u| window_of[u]));
            ws.sort_unstable();
            ws.dedup();
            for (i, r) in ranges.iter().enumerate() {
                let made_before = |end: usize| made.is_none_or(|u| u < end);
                let read_from = |end: usize| last_read.is_some_and(|c| c >= end);
                if ws.binary_search(&i).is_ok() {
                    touching[i].push(id);
                } else {
                    // A tensor that skips a window would cross whatever the
                    // window's layers do; bottlenecks leave none: only the
                    // window's last layer is read after its end.
                    debug_assert!(
                        !(made_before(r.start) && read_from(r.end)),
                        "tensor {id} skips window {r:?}"
                    );
                }
                if made_before(r.end) && read_from(r.end) {
                    tail_up[i].push(id);
                }
                if made.is_some_and(|u| u >= r.end) && graph.outputs().contains(&id) {
                    tail_down[i].push(id);
                }
            }
        }
        // Which layers depend on a model input; whether one does from each layer on.
        let mut fed = vec![false; n];
        for v in 0..n {
            fed[v] = graph.nodes()[v]
                .inputs
                .iter()
                .any(|&t| matches!(graph.tensor(t).producer, Producer::Input(_)))
                || graph.preds(v).iter().any(|&u| fed[u]);
        }
        let mut fed_from = vec![false; n + 1];
        for v in (0..n).rev() {
            fed_from[v] = fed_from[v + 1] || fed[v];
        }
        let one_crosses = ranges
            .iter()
            .enumerate()
            .map(|(i, r)| {
                if !fed_from[r.end] {
                    return vec![];
                }
                // Both lists hold only tensors made before the window's end
                // or model inputs (constants are in neither).
                let mut ts: Vec<usize> = touching[i].iter().chain(&tail_up[i]).copied().collect();
                ts.sort_unstable();
                ts.dedup();
                ts
            })
            .collect();
        Windows { ranges, touching, tail_up, tail_down, one_crosses, shape: (n, graph.tensors().len()) }
    }

    /// Whether these were computed for a graph of `graph`'s layer and
    /// tensor counts (a planner's cached copy for another model is not).
    pub fn fits(&self, graph: &LayerGraph) -> bool {
        self.shape == (graph.nodes().len(), graph.tensors().len())
    }
}

/// The prefix minimizing `objective`'s sum of per-layer and per-tensor
/// prices (fixed per-run and RTT terms excluded: the caller compares the
/// result with the trivial cuts under the full formula).
///
/// The DAG is first split at its bottlenecks ([`windows`]): every prefix
/// holds all layers before some bottleneck and none after the next, so one
/// small min-cut per window, each with the layers outside it fixed, finds
/// the same optimum as one min-cut of the whole DAG, in a fraction of the time.
pub fn min_cut_prefix(graph: &LayerGraph, prices: &NodePrices, objective: Objective) -> Vec<bool> {
    min_cut_prefix_in(graph, prices, objective, &Windows::new(graph))
}

/// [`min_cut_prefix`] with the graph's [`Windows`] computed beforehand.
/// Each window is priced from its own layers and tensor lists, with the
/// layers outside it summed from prefix sums: a decision costs the windows'
/// small min-cuts, not a pass over the graph per window. A window of one
/// layer needs no network: both sides are priced.
pub fn min_cut_prefix_in(
    graph: &LayerGraph,
    prices: &NodePrices,
    objective: Objective,
    windows: &Windows,
) -> Vec<bool> {
    let n = graph.nodes().len();
    // Σ wearable prices before each layer, Σ handheld prices from it on,
    // and Σ of the lesser of the two before it.
    let (mut before_w, mut after_p, mut least) = (vec![0.0; n + 1], vec![0.0; n + 1], vec![0.0; n + 1]);
    for v in 0..n {
        let (w, p) = prices.node(v, objective);
        before_w[v + 1] = before_w[v] + w;
        least[v + 1] = least[v] + w.min(p);
    }
    for v in (0..n).rev() {
        after_p[v] = after_p[v + 1] + prices.node(v, objective).1;
    }
    let down: Vec<f64> = windows
        .tail_down
        .iter()
        .map(|ts| ts.iter().map(|&t| prices.down_tensor(t, graph.tensor(t).bytes, objective)).sum())
        .collect();
    // A lower bound on every prefix ending in a window: the layers outside
    // it, each layer inside at its cheaper side, the cheapest tensor of
    // which one must cross. The windows are tried from the lowest bound;
    // once a bound reaches the best found, no later window can beat it.
    let bound = |i: usize| {
        let r = &windows.ranges[i];
        let crossing = windows.one_crosses[i]
            .iter()
            .map(|&t| prices.up_tensor(t, graph.tensor(t).bytes, objective))
            .fold(f64::INFINITY, f64::min);
        let crossing = if crossing.is_finite() { crossing } else { 0.0 };
        before_w[r.start] + after_p[r.end] + (least[r.end] - least[r.start]) + down[i] + crossing
    };
    let mut order: Vec<(f64, usize)> = (0..windows.ranges.len()).map(|i| (bound(i), i)).collect();
    order.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut best: Option<(f64, usize, Vec<bool>)> = None;
    for (lb, i) in order {
        // Rounding: the bound's sums are taken in another order than the cost's.
        if best.as_ref().is_some_and(|(b, _, _)| lb * (1.0 - 1e-12) >= *b) {
            break;
        }
        let r = &windows.ranges[i];
        let touching = &windows.touching[i];
        let price =
            |side: &[bool]| window_cost(graph, prices, objective, r.clone(), side, touching.iter().copied());
        let (side, inside) = if r.len() == 1 {
            let (on, off) = (price(&[true]), price(&[false]));
            // Ties go to the handheld, as the min-cut's least source side does.
            if on < off {
                (vec![true], on)
            } else {
                (vec![false], off)
            }
        } else {
            let side = min_cut_window(graph, prices, objective, r.clone(), touching);
            let cost = price(&side);
            (side, cost)
        };
        let cost = before_w[r.start] + after_p[r.end] + inside + down[i];
        if best.as_ref().is_none_or(|(b, _, _)| cost < *b) {
            best = Some((cost, i, side));
        }
    }
    let mut mask = vec![false; n];
    if let Some((cost, i, side)) = best {
        let r = &windows.ranges[i];
        mask[..r.start].iter_mut().for_each(|x| *x = true);
        mask[r.clone()].copy_from_slice(&side);
        // The window's pricing is the whole prefix's sum objective.
        debug_assert!({
            let whole = sum_cost(graph, prices, &mask, objective);
            !whole.is_finite() || (cost - whole).abs() <= 1e-9 * whole.abs().max(1e-12)
        });
    }
    mask
}

/// The part of a prefix's sum objective that depends on the layers of
/// `window` (`side`: which of them are on the wearable; those before it
/// are, those after it are not): their prices, and those of the tensors
/// made or read inside it (`touching`), each once.
fn window_cost(
    graph: &LayerGraph,
    prices: &NodePrices,
    objective: Objective,
    window: Range<usize>,
    side: &[bool],
    touching: impl IntoIterator<Item = usize>,
) -> f64 {
    let (a, b) = (window.start, window.end);
    let on_wearable = |v: usize| v < a || (v < b && side[v - a]);
    let mut total = 0.0;
    for (v, &inside) in window.zip(side) {
        let (w, p) = prices.node(v, objective);
        total += if inside { w } else { p };
    }
    for id in touching {
        let tensor = graph.tensor(id);
        let made_in = match tensor.producer {
            Producer::Input(_) => true,
            Producer::Node(u) => on_wearable(u),
            Producer::Const => false,
        };
        if made_in && tensor.consumers.iter().any(|&c| !on_wearable(c)) {
            total += prices.up_tensor(id, tensor.bytes, objective);
        }
        if let Producer::Node(u) = tensor.producer {
            if !on_wearable(u) && graph.outputs().contains(&id) {
                total += prices.down_tensor(id, tensor.bytes, objective);
            }
        }
    }
    total
}

/// The sum objective of a prefix: per-layer prices plus each crossing
/// tensor once (up) and each model output computed on the handheld (down).
pub fn sum_cost(graph: &LayerGraph, prices: &NodePrices, mask: &[bool], objective: Objective) -> f64 {
    // The whole DAG as one window, every tensor touching it.
    window_cost(graph, prices, objective, 0..mask.len(), mask, 0..graph.tensors().len())
}

/// The DAG's windows: ranges of the node order (a topological order)
/// between bottlenecks. A boundary is a bottleneck when exactly one layer
/// before it feeds anything after it (a layer whose result is a model
/// output, or unused, counts as feeding the end) and no model input is read
/// after it. Every layer before a bottleneck is then an ancestor of that
/// layer, so a prefix reaching past the bottleneck holds everything before it.
pub fn windows(graph: &LayerGraph) -> Vec<Range<usize>> {
    let n = graph.nodes().len();
    if n == 0 {
        return vec![];
    }
    // last[v]: the last layer reading v's results (n for the model's end).
    let last: Vec<usize> = graph
        .nodes()
        .iter()
        .map(|node| {
            let mut last = 0;
            for &t in &node.outputs {
                let tensor = graph.tensor(t);
                if graph.outputs().contains(&t) {
                    last = n;
                }
                last = last.max(tensor.consumers.iter().copied().max().unwrap_or(0));
            }
            last
        })
        .enumerate()
        .map(|(v, l)| if l <= v { n } else { l })
        .collect();
    let input_last =
        graph.inputs().iter().flat_map(|&t| graph.tensor(t).consumers.iter().copied()).max().unwrap_or(0);
    // crossing[b]: layers before boundary b read at or after it.
    let mut diff = vec![0i64; n + 2];
    for (v, &l) in last.iter().enumerate() {
        diff[v + 1] += 1;
        diff[l.min(n) + 1] -= 1;
    }
    let mut bounds = vec![0];
    let mut acc = 0;
    for (b, d) in diff.iter().enumerate().take(n).skip(1) {
        acc += d;
        if acc == 1 && input_last < b {
            bounds.push(b);
        }
    }
    bounds.push(n);
    bounds.windows(2).map(|w| w[0]..w[1]).collect()
}

/// The best prefix whose boundary lies in `window`: layers before it are
/// on the wearable, layers after it on the handheld, and a min-cut decides
/// the layers inside (returned: on the wearable or not, in order).
fn min_cut_window(
    graph: &LayerGraph,
    prices: &NodePrices,
    objective: Objective,
    window: Range<usize>,
    tensors: &[usize],
) -> Vec<bool> {
    let (a, b) = (window.start, window.end);
    let inside = |v: usize| (a..b).contains(&v);
    let m = b - a;
    let (s, t) = (m + tensors.len(), m + tensors.len() + 1);
    let mut net = Network::new(m + tensors.len() + 2);
    let mut top: f64 = 0.0;
    for v in a..b {
        let (w, p) = prices.node(v, objective);
        top = top.max(w).max(p);
    }
    for &id in tensors {
        let bytes = graph.tensor(id).bytes;
        top = top.max(prices.up_tensor(id, bytes, objective)).max(prices.down_tensor(id, bytes, objective));
    }
    let scale = if top > 0.0 && top.is_finite() { SCALE_TOP / top } else { 1.0 };
    let cap = |price: f64| -> u64 {
        if !price.is_finite() {
            INF
        } else {
            (price.max(0.0) * scale).round() as u64
        }
    };
    for v in a..b {
        let (w, p) = prices.node(v, objective);
        net.add(s, v - a, cap(p));
        net.add(v - a, t, cap(w));
        for &u in graph.preds(v) {
            if inside(u) {
                net.add(v - a, u - a, INF);
            }
        }
    }
    for (local, &id) in tensors.iter().enumerate() {
        let tensor = graph.tensor(id);
        let x = m + local;
        let up = cap(prices.up_tensor(id, tensor.bytes, objective));
        let read_inside: Vec<usize> = tensor.consumers.iter().copied().filter(|&c| inside(c)).collect();
        let read_after = tensor.consumers.iter().any(|&c| c >= b);
        match tensor.producer {
            // Made on the wearable for sure: paid when a reader inside is on
            // the handheld (a reader after the window makes it a constant).
            Producer::Input(_) => {
                if !read_after {
                    net.add(s, x, up);
                }
            }
            Producer::Node(u) if u < a => {
                if !read_after {
                    net.add(s, x, up);
                }
            }
            Producer::Node(u) if inside(u) => {
                if read_after {
                    // Paid exactly when its producer is on the wearable.
                    net.add(u - a, t, up);
                } else {
                    net.add(u - a, x, up);
                }
                if graph.outputs().contains(&id) {
                    net.add(s, u - a, cap(prices.down_tensor(id, tensor.bytes, objective)));
                }
            }
            _ => continue,
        }
        for c in read_inside {
            net.add(x, c - a, INF);
        }
    }
    let mut side = net.source_side(s, t);
    side.truncate(m);
    side
}
