//! The exact partitioner for sum-of-costs objectives (the DADS
//! construction): the best prefix is an s–t minimum cut.
//!
//! Source side = wearable, sink side = handheld. For every layer v:
//! `s → v` costs v's handheld price (cut when v runs on the handheld),
//! `v → t` its wearable price (cut when v runs on the wearable), and
//! `v → u` is infinite for each predecessor u, so a prefix stays closed under
//! predecessors. A tensor is sent once however many layers read it: a
//! tensor read by several layers gets an auxiliary node x, `producer → x`
//! with the tensor's transfer price and `x → consumer` infinite, so x must
//! sit on the handheld side as soon as one consumer does, and the price is
//! paid once; a tensor read by one layer is just `producer → consumer` at
//! that price. Model inputs hang off s the same way; model outputs
//! computed on the handheld pay their way back on `s → producer`.

use super::{NodePrices, Objective};
use std::ops::Range;

use tandem_core::cut::Cut;
use tandem_core::graph::{LayerGraph, Producer};

/// Capacity of the edges that must never be cut.
const INF: u64 = u64::MAX / 4;
/// Finite prices are scaled so the largest becomes this: integer capacities
/// keep Dinic's algorithm free of float-rounding micro-augmentations, and 2^40
/// levels keep the rounding error below 1e-12 of the largest price.
const SCALE_TOP: f64 = (1u64 << 40) as f64;

/// What prices an edge of a window's network.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Price {
    /// Layer `v` on the handheld (`s → v`).
    Handheld(usize),
    /// Layer `v` on the wearable (`v → t`).
    Wearable(usize),
    /// Tensor `id` sent up.
    Up(usize),
    /// Tensor `id` (a model output) sent down.
    Down(usize),
    /// Never cut.
    Inf,
}

/// One window's max-flow network, built from the graph alone once per
/// model ([`Windows`]); each decision fills in its capacities and runs
/// Dinic's algorithm on flat arrays. Nodes: the window's layers (local
/// index `v − start`), s, t, then a node per tensor read by more than one
/// layer inside (a tensor read by one is an edge to its reader: crossing
/// to it is the one way it is paid).
#[derive(Clone, Debug, PartialEq, Eq)]
struct WindowNet {
    /// Layers in the window (the first nodes).
    layers: usize,
    /// Edges leaving node `v`: `adj[first[v]..first[v + 1]]`.
    first: Vec<usize>,
    adj: Vec<usize>,
    /// Per edge (edge `e ^ 1` is `e`'s reverse): the node it goes to.
    to: Vec<usize>,
    /// What each forward edge (`e / 2`) costs: the sum of these prices.
    prices: Vec<(usize, Price)>,
    /// Per layer: its forward edges from s and to t.
    terminals: Vec<(usize, usize)>,
}

impl WindowNet {
    /// The DADS construction for `window`, with the layers outside it
    /// fixed (before: wearable, after: handheld); `tensors` are those made
    /// or read inside it.
    fn new(graph: &LayerGraph, window: Range<usize>, tensors: &[usize]) -> WindowNet {
        let (a, b) = (window.start, window.end);
        let inside = |v: usize| (a..b).contains(&v);
        let m = b - a;
        let (s, t) = (m, m + 1);
        let mut nodes = m + 2;
        let mut edges: Vec<(usize, usize)> = vec![];
        let mut index = std::collections::HashMap::new();
        let mut prices = vec![];
        let mut add = |from: usize, to: usize, price: Price| {
            let e = *index.entry((from, to)).or_insert_with(|| {
                edges.push((from, to));
                edges.len() - 1
            });
            prices.push((e, price));
            e
        };
        let terminals: Vec<(usize, usize)> =
            (a..b).map(|v| (add(s, v - a, Price::Handheld(v)), add(v - a, t, Price::Wearable(v)))).collect();
        for v in a..b {
            for &u in graph.preds(v).iter().filter(|&&u| inside(u)) {
                add(v - a, u - a, Price::Inf);
            }
        }
        for &id in tensors {
            let tensor = graph.tensor(id);
            let read_after = tensor.consumers.iter().any(|&c| c >= b);
            let readers: Vec<usize> = tensor.consumers.iter().copied().filter(|&c| inside(c)).collect();
            // Where it is made, when it may cross to a reader inside.
            let from = match tensor.producer {
                // Made on the wearable for sure: paid when a reader inside is
                // on the handheld (a reader after the window makes it a constant).
                Producer::Input(_) => (!read_after).then_some(s),
                Producer::Node(u) if u < a => (!read_after).then_some(s),
                Producer::Node(u) if inside(u) => {
                    if graph.outputs().contains(&id) {
                        add(s, u - a, Price::Down(id));
                    }
                    if read_after {
                        // Paid exactly when its producer is on the wearable.
                        add(u - a, t, Price::Up(id));
                        None
                    } else {
                        Some(u - a)
                    }
                }
                _ => None,
            };
            match (from, &readers[..]) {
                (None, _) | (_, []) => {}
                (Some(from), &[c]) => {
                    add(from, c - a, Price::Up(id));
                }
                (Some(from), many) => {
                    // Paid once, when one reader or more is on the handheld.
                    let x = nodes;
                    nodes += 1;
                    add(from, x, Price::Up(id));
                    for &c in many {
                        add(x, c - a, Price::Inf);
                    }
                }
            }
        }
        debug_assert!(edges.iter().all(|&(from, to)| from != to));
        let mut first = vec![0; nodes + 1];
        for &(from, to) in &edges {
            first[from + 1] += 1;
            first[to + 1] += 1;
        }
        for v in 0..nodes {
            first[v + 1] += first[v];
        }
        let mut fill = first.clone();
        let mut adj = vec![0; 2 * edges.len()];
        let mut to = vec![0; 2 * edges.len()];
        for (i, &(from, dest)) in edges.iter().enumerate() {
            let (e, r) = (2 * i, 2 * i + 1);
            to[e] = dest;
            to[r] = from;
            adj[fill[from]] = e;
            fill[from] += 1;
            adj[fill[dest]] = r;
            fill[dest] += 1;
        }
        WindowNet { layers: m, first, adj, to, prices, terminals }
    }

    fn nodes(&self) -> usize {
        self.first.len() - 1
    }

    /// The layers on the source side (the wearable's) of a minimum cut
    /// under `objective`'s prices: the least such side.
    fn min_cut(&self, bytes: &[u64], prices: &NodePrices, objective: Objective) -> Vec<bool> {
        let value = |p: Price| match p {
            Price::Handheld(v) => prices.node(v, objective).1,
            Price::Wearable(v) => prices.node(v, objective).0,
            Price::Up(id) => prices.up_tensor(id, bytes[id], objective),
            Price::Down(id) => prices.down_tensor(id, bytes[id], objective),
            Price::Inf => f64::INFINITY,
        };
        let mut values = vec![0.0; self.to.len() / 2];
        for &(e, p) in &self.prices {
            values[e] += value(p);
        }
        let top = values.iter().copied().filter(|x| x.is_finite()).fold(0.0, f64::max);
        let scale = if top > 0.0 { SCALE_TOP / top } else { 1.0 };
        let mut cap = vec![0u64; self.to.len()];
        for (i, &x) in values.iter().enumerate() {
            cap[2 * i] = if x.is_finite() { (x.max(0.0) * scale).round() as u64 } else { INF };
        }
        // The paths s → v → t first, without a search: the flow each takes
        // leaves every layer one terminal edge (which side it takes is
        // what is left to decide). Their reverse edges lead back to s or
        // out of t, which no augmenting path uses.
        for &(from_s, to_t) in &self.terminals {
            let through = cap[2 * from_s].min(cap[2 * to_t]);
            cap[2 * from_s] -= through;
            cap[2 * to_t] -= through;
        }
        let (s, t) = (self.layers, self.layers + 1);
        let mut flow = Flow { net: self, cap, level: vec![-1; self.nodes()], next: vec![0; self.nodes()] };
        let mut queue = Vec::with_capacity(self.nodes());
        loop {
            flow.levels(s, &mut queue);
            if flow.level[t] < 0 {
                return flow.level[..self.layers].iter().map(|&l| l >= 0).collect();
            }
            flow.next.copy_from_slice(&self.first[..self.nodes()]);
            while flow.push(s, t, INF) > 0 {}
        }
    }
}

/// Dinic's algorithm's state on a [`WindowNet`]: integer capacities left.
struct Flow<'a> {
    net: &'a WindowNet,
    cap: Vec<u64>,
    level: Vec<i32>,
    /// Per node: the next position in `adj` to try this phase.
    next: Vec<usize>,
}

impl Flow<'_> {
    fn levels(&mut self, s: usize, queue: &mut Vec<usize>) {
        self.level.iter_mut().for_each(|l| *l = -1);
        self.level[s] = 0;
        queue.clear();
        queue.push(s);
        let mut head = 0;
        while let Some(&v) = queue.get(head) {
            head += 1;
            for &e in &self.net.adj[self.net.first[v]..self.net.first[v + 1]] {
                let to = self.net.to[e];
                if self.cap[e] > 0 && self.level[to] < 0 {
                    self.level[to] = self.level[v] + 1;
                    queue.push(to);
                }
            }
        }
    }

    fn push(&mut self, v: usize, t: usize, limit: u64) -> u64 {
        if v == t {
            return limit;
        }
        while self.next[v] < self.net.first[v + 1] {
            let e = self.net.adj[self.next[v]];
            let to = self.net.to[e];
            if self.cap[e] > 0 && self.level[to] == self.level[v] + 1 {
                let pushed = self.push(to, t, limit.min(self.cap[e]));
                if pushed > 0 {
                    self.cap[e] -= pushed;
                    self.cap[e ^ 1] += pushed;
                    return pushed;
                }
            }
            self.next[v] += 1;
        }
        0
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
    /// Per window: every tensor a prefix ending in it may send up (those
    /// made before its end, or model inputs, read inside it or after it),
    /// sorted.
    pub may_cross: Vec<Vec<usize>>,
    /// Per window: whether every prefix ending in it sends at least one of
    /// `may_cross` up. It does when some layer after the window depends on
    /// a model input: on the path from that input to that layer (on the
    /// handheld), some tensor goes from the wearable's side to the
    /// handheld's.
    pub one_must_cross: Vec<bool>,
    /// Per window of more than one layer: its min-cut network.
    nets: Vec<Option<WindowNet>>,
    /// The two trivial cuts: every layer on the wearable, every layer on the handheld.
    pub trivial: [Cut; 2],
    /// Every tensor's size in bytes, by id, in one array (read per decision).
    bytes: Vec<u64>,
    /// The graph's fingerprint ([`Windows::fits`]).
    graph: u64,
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
        let one_must_cross = ranges.iter().map(|r| fed_from[r.end]).collect();
        // Both lists hold only tensors made before the window's end or
        // model inputs (constants are in neither).
        let may_cross = (0..ranges.len())
            .map(|i| {
                let mut ts: Vec<usize> = touching[i].iter().chain(&tail_up[i]).copied().collect();
                ts.sort_unstable();
                ts.dedup();
                ts
            })
            .collect();
        let nets = ranges
            .iter()
            .zip(&touching)
            .map(|(r, ts)| (r.len() > 1).then(|| WindowNet::new(graph, r.clone(), ts)))
            .collect();
        Windows {
            ranges,
            touching,
            tail_up,
            tail_down,
            may_cross,
            one_must_cross,
            nets,
            trivial: [Cut::wearable_only(graph), Cut::handheld_only(graph)],
            bytes: graph.tensors().iter().map(|t| t.bytes).collect(),
            graph: graph.fingerprint(),
        }
    }

    /// Whether these were computed for `graph`, by its fingerprint (a
    /// planner's cached copy for another model, or for the same model at
    /// other input shapes, is not).
    pub fn fits(&self, graph: &LayerGraph) -> bool {
        self.graph == graph.fingerprint()
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
    min_cut_solve(graph, prices, objective, windows).0
}

/// [`min_cut_prefix_in`] as a [`Cut`], its crossing tensors taken from the
/// chosen window's list (no pass over the whole graph).
pub fn min_cut_in(graph: &LayerGraph, prices: &NodePrices, objective: Objective, windows: &Windows) -> Cut {
    let (mask, window) = min_cut_solve(graph, prices, objective, windows);
    match window {
        Some(i) => Cut::from_closed_mask(graph, mask, &windows.may_cross[i]),
        // No layers: the one cut.
        None => Cut::handheld_only(graph),
    }
}

/// The min-cut prefix and the window its boundary lies in (`None`: the
/// graph has no layers).
fn min_cut_solve(
    graph: &LayerGraph,
    prices: &NodePrices,
    objective: Objective,
    windows: &Windows,
) -> (Vec<bool>, Option<usize>) {
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
        .map(|ts| ts.iter().map(|&t| prices.down_tensor(t, windows.bytes[t], objective)).sum())
        .collect();
    // A lower bound on every prefix ending in a window: the layers outside
    // it, each layer inside at its cheaper side, the cheapest tensor of
    // which one must cross. The windows are tried from the lowest bound;
    // once a bound reaches the best found, no later window can beat it.
    let bound = |i: usize| {
        let r = &windows.ranges[i];
        let crossing = match windows.one_must_cross[i] {
            true => windows.may_cross[i]
                .iter()
                .map(|&t| prices.up_tensor(t, windows.bytes[t], objective))
                .fold(f64::INFINITY, f64::min),
            false => 0.0,
        };
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
        let (side, inside) = match &windows.nets[i] {
            Some(net) => {
                let side = net.min_cut(&windows.bytes, prices, objective);
                let cost = price(&side);
                (side, cost)
            }
            // One layer: both sides priced.
            None => {
                let (on, off) = (price(&[true]), price(&[false]));
                // Ties go to the handheld, as the min-cut's least source side does.
                if on < off {
                    (vec![true], on)
                } else {
                    (vec![false], off)
                }
            }
        };
        let cost = before_w[r.start] + after_p[r.end] + inside + down[i];
        if best.as_ref().is_none_or(|(b, _, _)| cost < *b) {
            best = Some((cost, i, side));
        }
    }
    let mut mask = vec![false; n];
    let window = best.as_ref().map(|b| b.1);
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
    (mask, window)
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
