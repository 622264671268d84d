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
use crate::graph::{LayerGraph, Producer};

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

/// The prefix minimizing `objective`'s sum of per-layer and per-tensor
/// prices (fixed per-run and RTT terms excluded: the caller compares the
/// result with the trivial cuts under the full formula).
pub fn min_cut_prefix(graph: &LayerGraph, prices: &NodePrices, objective: Objective) -> Vec<bool> {
    let n = graph.nodes().len();
    let tensors = graph.tensors().len();
    let (s, t) = (n + tensors, n + tensors + 1);
    let mut net = Network::new(n + tensors + 2);
    // One scale for every finite price of this objective.
    let mut top: f64 = 0.0;
    for v in 0..n {
        let (w, p) = prices.node(v, objective);
        top = top.max(w).max(p);
    }
    for tensor in graph.tensors() {
        top = top.max(prices.up(tensor.bytes, objective)).max(prices.down(tensor.bytes, objective));
    }
    let scale = if top > 0.0 && top.is_finite() { SCALE_TOP / top } else { 1.0 };
    let cap = |price: f64| -> u64 {
        if !price.is_finite() {
            INF
        } else {
            (price.max(0.0) * scale).round() as u64
        }
    };
    for v in 0..n {
        let (w, p) = prices.node(v, objective);
        net.add(s, v, cap(p));
        net.add(v, t, cap(w));
        for &u in graph.preds(v) {
            net.add(v, u, INF);
        }
    }
    for (id, tensor) in graph.tensors().iter().enumerate() {
        let x = n + id;
        let up = cap(prices.up(tensor.bytes, objective));
        match tensor.producer {
            Producer::Node(u) => net.add(u, x, up),
            Producer::Input(_) => net.add(s, x, up),
            Producer::Const => {}
        }
        for &c in &tensor.consumers {
            net.add(x, c, INF);
        }
        if graph.outputs().contains(&id) {
            if let Producer::Node(u) = tensor.producer {
                net.add(s, u, cap(prices.down(tensor.bytes, objective)));
            }
        }
    }
    let side = net.source_side(s, t);
    side[..n].to_vec()
}
