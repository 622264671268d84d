//! DeepWear's representative cuts (SPEC 4): simplify the layer DAG until it
//! is nearly linear, then enumerate the cuts of what is left.
//!
//! 1. **Prune light layers.** Every layer that is not a convolution, a fully
//!    connected or a recurrent layer (activations, normalization, pooling,
//!    Add, Concat, reshapes…) joins the virtual node of its latest
//!    predecessor, so it always runs on the same side as the layer that feeds
//!    it; its inputs are thereby reconnected to its outputs. A merge that
//!    would close a cycle between virtual nodes is skipped.
//! 2. **Bundle repeated blocks.** Lay the virtual nodes out in topological
//!    order and measure, at every boundary, how many nodes before it still
//!    feed nodes after it (the boundary's *width*). A *block* is a stretch
//!    whose inner boundaries are all wider than its two ends: an Inception
//!    module, a ResNet bottleneck, a Fire module's expand pair, a DenseNet
//!    layer with its concatenation skip, a WaveNet layer beside its skip
//!    accumulator. Each block gets a structural signature (the op of each
//!    node, the edges between them as offsets, which nodes read from or feed
//!    outside the block); names play no part. Blocks whose signature occurs
//!    at least twice are bundled into one virtual node each, choosing the
//!    non-overlapping set that removes the most nodes. A contiguous stretch
//!    of a topological order is convex, so bundling never closes a cycle.
//! 3. **Enumerate** the order ideals of the simplified DAG and map each back
//!    to a cut of the layer DAG.
//!
//! The paper mined repeated subgraphs with GRAMI; the width rule finds the
//! same blocks in these models in linear time (see docs/results.md for the node
//! counts before and after, per model).

use std::collections::HashMap;

use serde::Serialize;

use tandem_core::cut::enumerate_ideals;
use tandem_core::graph::{LayerGraph, LayerKind, NodeId};
use tandem_core::{Cut, Result};

use super::mincut::Windows;

/// The simplified DAG: virtual nodes, each a set of layers; and, beside
/// it, the other work that depends on the graph alone ([`Windows`]), so
/// that a planner does it once per model, not per decision.
#[derive(Clone, Debug)]
pub struct Simplified {
    /// Layers of each virtual node, virtual nodes in topological order.
    members: Vec<Vec<NodeId>>,
    /// Predecessor virtual nodes of each virtual node.
    preds: Vec<Vec<usize>>,
    stats: SimplifyStats,
    /// The exact searches' windows and their tensor lists.
    windows: Windows,
}

/// Node counts before and after each step.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SimplifyStats {
    /// Layers of the model's DAG.
    pub layers: usize,
    /// Virtual nodes after light layers are pruned.
    pub after_pruning: usize,
    /// Virtual nodes after repeated blocks are bundled.
    pub after_bundling: usize,
    /// Blocks bundled.
    pub bundled_blocks: usize,
    /// Distinct block structures among them.
    pub block_kinds: usize,
}

/// Whether a layer is light enough to be pruned into its producer.
fn is_light(kind: LayerKind) -> bool {
    !matches!(kind, LayerKind::Conv | LayerKind::Fc | LayerKind::Recurrent)
}

/// Union-find over layers, keeping each set's members.
struct Groups {
    of: Vec<usize>,
    members: Vec<Vec<NodeId>>,
}

impl Groups {
    fn new(n: usize) -> Groups {
        Groups { of: (0..n).collect(), members: (0..n).map(|v| vec![v]).collect() }
    }

    /// Moves every member of group `from` into group `into`.
    fn merge(&mut self, from: usize, into: usize) {
        if from == into {
            return;
        }
        let moved = std::mem::take(&mut self.members[from]);
        for &v in &moved {
            self.of[v] = into;
        }
        self.members[into].extend(moved);
    }

    /// Whether group `to` is reachable from group `from` through some other group.
    fn reaches_via_other(&self, graph: &LayerGraph, from: usize, to: usize) -> bool {
        let mut seen = vec![false; self.members.len()];
        let mut stack: Vec<usize> = vec![];
        for &v in &self.members[from] {
            for &s in graph.succs(v) {
                let g = self.of[s];
                if g != from && g != to && !seen[g] {
                    seen[g] = true;
                    stack.push(g);
                }
            }
        }
        while let Some(g) = stack.pop() {
            for &v in &self.members[g] {
                for &s in graph.succs(v) {
                    let h = self.of[s];
                    if h == to {
                        return true;
                    }
                    if h != from && !seen[h] {
                        seen[h] = true;
                        stack.push(h);
                    }
                }
            }
        }
        false
    }
}

impl Simplified {
    /// Simplifies `graph` (prune, then bundle).
    pub fn new(graph: &LayerGraph) -> Simplified {
        let n = graph.nodes().len();
        let mut groups = Groups::new(n);
        // 1. Light layers join their latest predecessor's virtual node.
        for v in 0..n {
            if !is_light(graph.nodes()[v].kind) {
                continue;
            }
            let mut preds: Vec<NodeId> = graph.preds(v).to_vec();
            preds.sort_unstable_by(|a, b| b.cmp(a));
            for p in preds {
                let target = groups.of[p];
                let own = groups.of[v];
                // Merging closes a cycle iff one group reaches the other through a third.
                if !groups.reaches_via_other(graph, target, own)
                    && !groups.reaches_via_other(graph, own, target)
                {
                    groups.merge(own, target);
                    break;
                }
            }
        }
        let pruned: Vec<Vec<NodeId>> = groups.members.into_iter().filter(|m| !m.is_empty()).collect();
        let order = topological(graph, pruned);
        let after_pruning = order.len();
        // 2. Bundle repeated blocks.
        let (bundled, bundled_blocks, block_kinds) = bundle(graph, order);
        let preds = quotient_preds(graph, &bundled);
        let stats = SimplifyStats {
            layers: n,
            after_pruning,
            after_bundling: bundled.len(),
            bundled_blocks,
            block_kinds,
        };
        Simplified { members: bundled, preds, stats, windows: Windows::new(graph) }
    }

    /// The graph's windows and their tensor lists, for the min-cut and
    /// stream searches.
    pub fn windows(&self) -> &Windows {
        &self.windows
    }

    /// Node counts before and after.
    pub fn stats(&self) -> &SimplifyStats {
        &self.stats
    }

    /// The virtual nodes (each a set of layers), in topological order.
    pub fn members(&self) -> &[Vec<NodeId>] {
        &self.members
    }

    /// Every cut of the simplified DAG as a cut of `graph`, if there are at
    /// most `limit`; `None` otherwise.
    pub fn cuts(&self, graph: &LayerGraph, limit: usize) -> Option<Result<Vec<Cut>>> {
        let ideals = enumerate_ideals(self.members.len(), |i| &self.preds[i], limit)?;
        let n = graph.nodes().len();
        Some(
            ideals
                .into_iter()
                .map(|ideal| {
                    let mut mask = vec![false; n];
                    for (g, _) in ideal.iter().enumerate().filter(|(_, &x)| x) {
                        for &v in &self.members[g] {
                            mask[v] = true;
                        }
                    }
                    Cut::from_mask(graph, mask)
                })
                .collect(),
        )
    }
}

/// Sorts groups topologically (Kahn's algorithm, earliest first layer first).
fn topological(graph: &LayerGraph, groups: Vec<Vec<NodeId>>) -> Vec<Vec<NodeId>> {
    let preds = quotient_preds(graph, &groups);
    let m = groups.len();
    let mut indegree: Vec<usize> = preds.iter().map(Vec::len).collect();
    let mut succs = vec![vec![]; m];
    for (g, ps) in preds.iter().enumerate() {
        for &p in ps {
            succs[p].push(g);
        }
    }
    let first: Vec<NodeId> = groups.iter().map(|m| m.iter().copied().min().unwrap_or(0)).collect();
    let mut ready: std::collections::BinaryHeap<std::cmp::Reverse<(NodeId, usize)>> =
        (0..m).filter(|&g| indegree[g] == 0).map(|g| std::cmp::Reverse((first[g], g))).collect();
    let mut order = vec![];
    while let Some(std::cmp::Reverse((_, g))) = ready.pop() {
        order.push(g);
        for &s in &succs[g] {
            indegree[s] -= 1;
            if indegree[s] == 0 {
                ready.push(std::cmp::Reverse((first[s], s)));
            }
        }
    }
    debug_assert_eq!(order.len(), m, "merges never close a cycle");
    let mut groups: Vec<Option<Vec<NodeId>>> = groups.into_iter().map(Some).collect();
    order
        .into_iter()
        .map(|g| {
            let mut members = groups[g].take().unwrap_or_default();
            members.sort_unstable();
            members
        })
        .collect()
}

/// Predecessor groups of each group (deduplicated).
fn quotient_preds(graph: &LayerGraph, groups: &[Vec<NodeId>]) -> Vec<Vec<usize>> {
    let mut of = vec![0; graph.nodes().len()];
    for (g, members) in groups.iter().enumerate() {
        for &v in members {
            of[v] = g;
        }
    }
    groups
        .iter()
        .enumerate()
        .map(|(g, members)| {
            let mut ps: Vec<usize> =
                members.iter().flat_map(|&v| graph.preds(v)).map(|&p| of[p]).filter(|&p| p != g).collect();
            ps.sort_unstable();
            ps.dedup();
            ps
        })
        .collect()
}

/// Bundles repeated blocks of the topologically ordered `groups`; returns
/// the new groups, the number of blocks bundled and of distinct structures.
fn bundle(graph: &LayerGraph, groups: Vec<Vec<NodeId>>) -> (Vec<Vec<NodeId>>, usize, usize) {
    let m = groups.len();
    if m < 3 {
        return (groups, 0, 0);
    }
    let preds = quotient_preds(graph, &groups);
    let mut succs = vec![vec![]; m];
    for (g, ps) in preds.iter().enumerate() {
        for &p in ps {
            succs[p].push(g);
        }
    }
    // Position m stands for the model's outputs (the sink); the source feeds
    // every group that reads a model input.
    let mut of = vec![0; graph.nodes().len()];
    for (g, members) in groups.iter().enumerate() {
        for &v in members {
            of[v] = g;
        }
    }
    let outputs: Vec<bool> = (0..m)
        .map(|g| {
            groups[g].iter().any(|&v| graph.nodes()[v].outputs.iter().any(|t| graph.outputs().contains(t)))
        })
        .collect();
    let last_use: Vec<usize> = (0..m)
        .map(|g| {
            let s = succs[g].iter().copied().max().unwrap_or(g);
            if outputs[g] || succs[g].is_empty() {
                m
            } else {
                s
            }
        })
        .collect();
    let source_last = graph
        .inputs()
        .iter()
        .flat_map(|&t| graph.tensor(t).consumers.iter().map(|&c| of[c]))
        .max()
        .unwrap_or(0);
    // width[i]: sources before boundary i (between groups i-1 and i) used at or after i.
    let mut diff = vec![0i64; m + 2];
    for (g, &last) in last_use.iter().enumerate() {
        // Group g counts at boundaries g+1 ..= last.
        if last > g {
            diff[g + 1] += 1;
            diff[last + 1] -= 1;
        }
    }
    // The source is "before" boundary 0: it counts at boundaries 0..=source_last.
    diff[0] += 1;
    diff[source_last + 1] -= 1;
    let mut width = vec![0i64; m + 1];
    let mut acc = 0;
    for (i, w) in width.iter_mut().enumerate() {
        acc += diff[i];
        *w = acc;
    }

    // Candidate blocks [a, b): inner boundaries all wider than both ends.
    const MAX_BLOCK: usize = 256;
    let label = |g: usize| {
        let head = groups[g][0];
        graph.nodes()[head].op.clone()
    };
    let mut blocks: Vec<(usize, usize, String)> = vec![];
    for a in 0..m {
        let mut inner_min = i64::MAX;
        for b in a + 1..=m.min(a + MAX_BLOCK) {
            if b > a + 1 {
                inner_min = inner_min.min(width[b - 1]);
                if inner_min <= width[a] {
                    break;
                }
                if inner_min > width[b] {
                    blocks.push((a, b, signature(&preds, &succs, a, b, &label)));
                }
            }
        }
    }
    let mut count: HashMap<&str, usize> = HashMap::new();
    for (_, _, s) in &blocks {
        *count.entry(s.as_str()).or_default() += 1;
    }
    let mut repeated: Vec<&(usize, usize, String)> =
        blocks.iter().filter(|(_, _, s)| count[s.as_str()] >= 2).collect();
    // Weighted interval scheduling: the non-overlapping set removing the most nodes.
    repeated.sort_by_key(|(a, b, _)| (*b, *a));
    let ends: Vec<usize> = repeated.iter().map(|(_, b, _)| *b).collect();
    let mut best = vec![0usize; repeated.len() + 1];
    let mut take = vec![false; repeated.len()];
    for (i, (a, b, _)) in repeated.iter().enumerate() {
        let before = ends[..i].partition_point(|&e| e <= *a);
        let with = best[before] + (b - a - 1);
        take[i] = with > best[i];
        best[i + 1] = best[i].max(with);
    }
    let mut chosen = vec![];
    let mut i = repeated.len();
    while i > 0 {
        if take[i - 1] {
            let (a, b, _) = repeated[i - 1];
            chosen.push((*a, *b, repeated[i - 1].2.as_str()));
            i = ends[..i - 1].partition_point(|&e| e <= *a);
        } else {
            i -= 1;
        }
    }
    chosen.sort_unstable();
    let kinds = {
        let mut k: Vec<&str> = chosen.iter().map(|c| c.2).collect();
        k.sort_unstable();
        k.dedup();
        k.len()
    };
    let bundled_blocks = chosen.len();
    let mut out = vec![];
    let mut groups: Vec<Option<Vec<NodeId>>> = groups.into_iter().map(Some).collect();
    let mut g = 0;
    let mut next = chosen.iter().peekable();
    while g < m {
        match next.peek() {
            Some(&&(a, b, _)) if a == g => {
                let mut members: Vec<NodeId> =
                    (a..b).flat_map(|h| groups[h].take().unwrap_or_default()).collect();
                members.sort_unstable();
                out.push(members);
                g = b;
                next.next();
            }
            _ => {
                out.push(groups[g].take().unwrap_or_default());
                g += 1;
            }
        }
    }
    (out, bundled_blocks, kinds)
}

/// A block's structure: each node's op, its edges as offsets, and which
/// nodes read from or feed outside the block.
fn signature(
    preds: &[Vec<usize>],
    succs: &[Vec<usize>],
    a: usize,
    b: usize,
    label: &dyn Fn(usize) -> String,
) -> String {
    let mut s = String::new();
    for g in a..b {
        let inner: Vec<usize> = preds[g].iter().filter(|&&p| p >= a).map(|&p| p - a).collect();
        let outside_in = preds[g].iter().any(|&p| p < a);
        let outside_out = succs[g].iter().any(|&x| x >= b);
        s.push_str(&format!("{}:{}{}<{:?};", label(g), u8::from(outside_in), u8::from(outside_out), inner));
    }
    s
}
