//! The stream objective (SPEC 5): a pipelined frame costs the slowest stage,
//! max(T_w, T_link, T_p), which no min-cut can minimize (it is not a sum).
//! It is NP-hard in general: on a DAG whose layers are all independent,
//! every subset is a cut, and balancing T_w against T_p is the partition
//! problem. So the search here is exact branch and bound over the DAG's
//! cuts, with a state budget:
//!
//! - layers are decided in topological order, each on the wearable (only if
//!   all its predecessors are) or on the handheld;
//! - a partial assignment is dropped when a lower bound on its best
//!   completion cannot beat the incumbent: each stage's time so far (the
//!   handheld's includes layers already forced onto it), the tensors already
//!   known to cross, and half the least possible T_w + T_p;
//! - the incumbent starts as the best of the cuts the caller already has
//!   (DeepWear's representative cuts, the min-cut candidates);
//! - the DAG is searched one window at a time ([`super::mincut::windows`],
//!   their tensor lists computed once per model: [`Windows`]):
//!   every cut holds all layers before some bottleneck and none after the
//!   next, so the layers outside the window are fixed.
//!
//! Within the budget the answer is proven optimal; past it, the search
//! returns the best cut it saw and says so.

use super::mincut::Windows;
use super::{NodePrices, Objective};
use tandem_core::graph::{LayerGraph, Producer};
use tandem_core::Cut;

/// What the search minimizes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum StreamGoal {
    /// The per-frame period max(T_w, T_link, T_p).
    Period,
    /// Weighted energy among cuts whose period is at most this many seconds.
    EnergyWithin(f64),
}

/// The search's answer.
#[derive(Clone, Debug)]
pub struct StreamSearch {
    /// The best cut found; `None` when no cut meets the goal's bound.
    pub cut: Option<Cut>,
    /// Whether the whole space was searched (the cut is optimal).
    pub proven: bool,
    /// Partial assignments visited.
    pub states: u64,
}

/// Default state budget: a few milliseconds of search.
pub const STREAM_BUDGET: u64 = 200_000;

struct Search<'a> {
    graph: &'a LayerGraph,
    /// The window searched: layers before it are on the wearable, layers
    /// from `end` on are on the handheld.
    end: usize,
    /// Handheld seconds of the layers from `end` on.
    tail_tp: f64,
    /// What the tail's model outputs cost down: (bytes, encode s, decode s).
    tail_down: (u64, f64, f64),
    /// Tensors made before `end` (or model inputs) read from `end` on.
    tail_tensors: Vec<usize>,
    prices: &'a NodePrices,
    goal: StreamGoal,
    budget: u64,
    states: u64,
    /// Σ over layers ≥ v of min(T_w, T_p).
    rest_time: Vec<f64>,
    /// Σ over layers ≥ v of min(E_w, E_p).
    rest_energy: Vec<f64>,
    mask: Vec<bool>,
    counted: Vec<bool>,
    out_preds: Vec<usize>,
    a: f64,
    b: f64,
    forced: f64,
    /// Bytes on the link up (encoded), and the encode and decode seconds of what crosses.
    up_bytes: u64,
    up_encode_s: f64,
    up_decode_s: f64,
    /// Bytes on the link down (encoded), and the encode (handheld) and decode (wearable) seconds.
    down_bytes: u64,
    down_encode_s: f64,
    down_decode_s: f64,
    n_in: usize,
    n_out: usize,
    best: f64,
    best_mask: Option<Vec<bool>>,
}

impl Search<'_> {
    fn stages(&self, a: f64, b: f64) -> (f64, f64) {
        let p = self.prices;
        (
            a + self.up_encode_s + self.down_decode_s + if self.n_in > 0 { p.overhead_s.0 } else { 0.0 },
            b + self.up_decode_s + self.down_encode_s + if self.n_out > 0 { p.overhead_s.1 } else { 0.0 },
        )
    }

    fn link_s(&self) -> f64 {
        self.prices.up(self.up_bytes, Objective::Latency)
            + self.prices.down(self.down_bytes, Objective::Latency)
    }

    fn energy(&self, tw: f64, tp: f64) -> f64 {
        let p = self.prices;
        p.weights.wearable * p.compute_w.0 * tw
            + p.weights.handheld * p.compute_w.1 * tp
            + p.up(self.up_bytes, Objective::Energy)
            + p.down(self.down_bytes, Objective::Energy)
    }

    /// A lower bound on the goal's value for any completion from layer `v`,
    /// or infinity when no completion can meet the goal's period bound.
    fn bound(&self, v: usize) -> f64 {
        // Layers forced onto the handheld are still undecided, so they are in
        // the rest sums too: use them in the per-stage bound only.
        let tail = self.b + self.tail_tp;
        let (tw, tp) = self.stages(self.a, tail);
        let tp_forced = self.stages(self.a, tail + self.forced).1;
        let link = self.link_s();
        let stages = tw.max(tp_forced).max(link);
        let rest_time = self.rest_time[v] - self.rest_time[self.end];
        let rest_energy = self.rest_energy[v] - self.rest_energy[self.end];
        match self.goal {
            StreamGoal::Period => stages.max((tw + tp + rest_time) / 2.0),
            StreamGoal::EnergyWithin(limit) if stages > limit => f64::INFINITY,
            StreamGoal::EnergyWithin(_) => self.energy(tw, tp) + rest_energy,
        }
    }

    /// Counts tensor `t` as crossing the link if it is made on the wearable
    /// (or is a model input) and not yet counted; records it in `newly`.
    fn send_up(&mut self, t: usize, newly: &mut Vec<usize>) {
        let tensor = self.graph.tensor(t);
        let made_in = match tensor.producer {
            Producer::Input(_) => true,
            Producer::Node(p) => self.mask[p],
            Producer::Const => false,
        };
        if made_in && !self.counted[t] {
            self.counted[t] = true;
            let (bytes, enc, dec) = self.prices.up_link(t, tensor.bytes);
            self.up_bytes += bytes;
            self.up_encode_s += enc;
            self.up_decode_s += dec;
            newly.push(t);
        }
    }

    /// Adds (`sign` 1) or removes (−1) tensors coming down: (bytes, encode s, decode s).
    fn add_down(&mut self, (bytes, enc, dec): (u64, f64, f64), sign: f64) {
        if sign > 0.0 {
            self.down_bytes += bytes;
        } else {
            self.down_bytes -= bytes;
        }
        self.down_encode_s += sign * enc;
        self.down_decode_s += sign * dec;
    }

    /// Uncounts what [`Search::send_up`] counted.
    fn unsend(&mut self, newly: Vec<usize>) {
        for t in newly {
            self.counted[t] = false;
            let (bytes, enc, dec) = self.prices.up_link(t, self.graph.tensor(t).bytes);
            self.up_bytes -= bytes;
            self.up_encode_s -= enc;
            self.up_decode_s -= dec;
        }
    }

    /// Values the completed assignment: the layers from `end` on join the handheld.
    fn leaf(&mut self) {
        let graph = self.graph;
        let n = graph.nodes().len();
        let mut newly = vec![];
        for i in 0..self.tail_tensors.len() {
            self.send_up(self.tail_tensors[i], &mut newly);
        }
        let tail_n = n - self.end;
        self.n_out += tail_n;
        self.add_down(self.tail_down, 1.0);
        let (tw, tp) = self.stages(self.a, self.b + self.tail_tp);
        let period = tw.max(tp).max(self.link_s());
        let value = match self.goal {
            StreamGoal::Period => period,
            StreamGoal::EnergyWithin(limit) if period <= limit => self.energy(tw, tp),
            StreamGoal::EnergyWithin(_) => f64::INFINITY,
        };
        if value < self.best {
            self.best = value;
            self.best_mask = Some(self.mask.clone());
        }
        self.add_down(self.tail_down, -1.0);
        self.n_out -= tail_n;
        self.unsend(newly);
    }

    fn walk(&mut self, v: usize) -> bool {
        self.states += 1;
        if self.states > self.budget {
            return false;
        }
        if v == self.end {
            self.leaf();
            return true;
        }
        if self.bound(v) >= self.best {
            return true;
        }
        let graph = self.graph;
        let (tw_v, tp_v) = (self.prices.t_wearable[v], self.prices.t_handheld[v]);
        let forced_here = self.out_preds[v] > 0;
        // On the wearable: only when every predecessor is.
        if !forced_here {
            self.mask[v] = true;
            self.a += tw_v;
            self.n_in += 1;
            let ok = self.walk(v + 1);
            self.n_in -= 1;
            self.a -= tw_v;
            self.mask[v] = false;
            if !ok {
                return false;
            }
        }
        // On the handheld: its inputs made on the wearable cross once, its
        // model outputs come back down, and its successors are forced out.
        let node = &graph.nodes()[v];
        let mut newly = vec![];
        for &t in &node.inputs {
            self.send_up(t, &mut newly);
        }
        let down = self
            .prices
            .down_total(graph, node.outputs.iter().copied().filter(|t| graph.outputs().contains(t)));
        self.add_down(down, 1.0);
        if forced_here {
            self.forced -= tp_v;
        }
        self.b += tp_v;
        self.n_out += 1;
        let end = self.end;
        for &s in graph.succs(v).iter().filter(|&&s| s < end) {
            self.out_preds[s] += 1;
            if self.out_preds[s] == 1 {
                self.forced += self.prices.t_handheld[s];
            }
        }
        let ok = self.walk(v + 1);
        for &s in graph.succs(v).iter().filter(|&&s| s < end) {
            if self.out_preds[s] == 1 {
                self.forced -= self.prices.t_handheld[s];
            }
            self.out_preds[s] -= 1;
        }
        self.n_out -= 1;
        self.b -= tp_v;
        if forced_here {
            self.forced += tp_v;
        }
        self.add_down(down, -1.0);
        self.unsend(newly);
        ok
    }
}

/// Branch and bound for `goal` over every cut of `graph`, starting from the
/// best of `incumbents`, visiting at most `budget` partial assignments.
pub fn search(
    graph: &LayerGraph,
    prices: &NodePrices,
    goal: StreamGoal,
    incumbents: &[Cut],
    budget: u64,
) -> StreamSearch {
    search_in(graph, prices, goal, incumbents, budget, &Windows::new(graph))
}

/// [`search`] with the graph's [`Windows`] (and their tail lists) computed
/// beforehand.
pub fn search_in(
    graph: &LayerGraph,
    prices: &NodePrices,
    goal: StreamGoal,
    incumbents: &[Cut],
    budget: u64,
    windows: &Windows,
) -> StreamSearch {
    let n = graph.nodes().len();
    let mut rest_time = vec![0.0; n + 1];
    let mut rest_energy = vec![0.0; n + 1];
    // Σ T_p from each layer on, Σ T_w before it.
    let (mut after_tp, mut before_tw) = (vec![0.0; n + 1], vec![0.0; n + 1]);
    for v in (0..n).rev() {
        let (tw, tp) = (prices.t_wearable[v], prices.t_handheld[v]);
        let (ew, ep) = prices.node(v, Objective::Energy);
        rest_time[v] = rest_time[v + 1] + tw.min(tp);
        rest_energy[v] = rest_energy[v + 1] + ew.min(ep);
        after_tp[v] = after_tp[v + 1] + tp;
    }
    for v in 0..n {
        before_tw[v + 1] = before_tw[v] + prices.t_wearable[v];
    }
    let mut s = Search {
        graph,
        end: n,
        tail_tp: 0.0,
        tail_down: (0, 0.0, 0.0),
        tail_tensors: vec![],
        prices,
        goal,
        budget,
        states: 0,
        rest_time,
        rest_energy,
        mask: vec![false; n],
        counted: vec![false; graph.tensors().len()],
        out_preds: vec![0; n],
        a: 0.0,
        b: 0.0,
        forced: 0.0,
        up_bytes: 0,
        up_encode_s: 0.0,
        up_decode_s: 0.0,
        down_bytes: 0,
        down_encode_s: 0.0,
        down_decode_s: 0.0,
        n_in: 0,
        n_out: 0,
        best: f64::INFINITY,
        best_mask: None,
    };
    // The incumbent: the best given cut, valued exactly as a leaf would be.
    for cut in incumbents {
        let e = super::evaluate(graph, prices, cut, std::time::Duration::ZERO);
        let value = match goal {
            StreamGoal::Period => e.stream_period_s,
            StreamGoal::EnergyWithin(limit) if e.stream_period_s <= limit => e.energy_j,
            StreamGoal::EnergyWithin(_) => f64::INFINITY,
        };
        if value < s.best {
            s.best = value;
            s.best_mask = Some(cut.prefix_mask().to_vec());
        }
    }
    // Every cut lies in one window (layers before it on the wearable, after
    // it on the handheld): search each window's layers on their own.
    let mut proven = true;
    for (i, window) in windows.ranges.iter().enumerate() {
        let (start, end) = (window.start, window.end);
        s.end = end;
        s.tail_tp = after_tp[end];
        s.tail_down = prices.down_total(graph, windows.tail_down[i].iter().copied());
        s.tail_tensors.clone_from(&windows.tail_up[i]);
        // The walk leaves the mask as it found it: the earlier windows' layers join the wearable.
        s.mask[..start].iter_mut().for_each(|m| *m = true);
        s.a = before_tw[start];
        s.n_in = start;
        if !s.walk(start) {
            proven = false;
            break;
        }
    }
    let cut = s.best_mask.take().and_then(|m| Cut::from_mask(graph, m).ok());
    StreamSearch { cut, proven, states: s.states }
}
