//! Cuts: which layers run on the wearable (a predecessor-closed prefix) and
//! which tensors must then cross the link.
//!
//! Cuts of a chain are its n+1 prefixes; cuts of a branchy DAG are its
//! order ideals, whose number explodes, so besides exact enumeration (with a
//! limit) there is a sampler of random valid cuts for any DAG.

use std::fmt;

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::error::{Error, Result};
use crate::graph::{LayerGraph, NodeId, Producer, TensorId};
pub use tandem_types::CutKey;

/// A partition: the wearable's prefix (closed under predecessors); the
/// handheld runs every other layer.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Cut {
    prefix: Vec<bool>,
    /// Tensors produced on the wearable (or model inputs) read on the handheld.
    up: Vec<TensorId>,
    /// Model outputs computed on the handheld, sent back.
    down: Vec<TensorId>,
    up_bytes: u64,
    down_bytes: u64,
}

impl Cut {
    /// The cut whose prefix is exactly `prefix`; fails unless it is closed
    /// under predecessors.
    pub fn new(graph: &LayerGraph, prefix: impl IntoIterator<Item = NodeId>) -> Result<Cut> {
        let n = graph.nodes().len();
        let mut set = vec![false; n];
        for id in prefix {
            if id >= n {
                return Err(Error::InvalidCut(format!(
                    "node {id} does not exist (the model has {n} layers)"
                )));
            }
            set[id] = true;
        }
        Self::from_mask(graph, set)
    }

    /// The cut from a membership mask indexed by node id.
    pub fn from_mask(graph: &LayerGraph, prefix: Vec<bool>) -> Result<Cut> {
        if prefix.len() != graph.nodes().len() {
            return Err(Error::InvalidCut(format!(
                "mask has {} entries for {} layers",
                prefix.len(),
                graph.nodes().len()
            )));
        }
        for (id, &inside) in prefix.iter().enumerate() {
            if inside {
                if let Some(&p) = graph.preds(id).iter().find(|&&p| !prefix[p]) {
                    return Err(Error::InvalidCut(format!(
                        "'{}' is on the wearable but its predecessor '{}' is not",
                        graph.nodes()[id].name,
                        graph.nodes()[p].name
                    )));
                }
            }
        }
        Ok(Self::with_up_among(graph, prefix, 0..graph.tensors().len()))
    }

    /// [`Cut::from_mask`] for a search that knows more: `prefix` is closed
    /// under predecessors and every tensor it sends up is among `may_cross`
    /// (sorted), so no pass over the whole graph is needed. Debug builds
    /// check both against [`Cut::from_mask`].
    pub fn from_closed_mask(graph: &LayerGraph, prefix: Vec<bool>, may_cross: &[TensorId]) -> Cut {
        let cut = Self::with_up_among(graph, prefix, may_cross.iter().copied());
        debug_assert!(
            Self::from_mask(graph, cut.prefix.clone()).is_ok_and(|c| c == cut),
            "not closed, or a crossing tensor is not in may_cross"
        );
        cut
    }

    /// The cut of a valid `prefix`, the tensors sent up taken from `candidates` (ascending).
    fn with_up_among(
        graph: &LayerGraph,
        prefix: Vec<bool>,
        candidates: impl Iterator<Item = TensorId>,
    ) -> Cut {
        let on_wearable = |t: TensorId| match graph.tensor(t).producer {
            Producer::Input(_) => true,
            Producer::Node(p) => prefix[p],
            Producer::Const => false,
        };
        let up: Vec<TensorId> = candidates
            .filter(|&t| on_wearable(t) && graph.tensor(t).consumers.iter().any(|&c| !prefix[c]))
            .collect();
        let down: Vec<TensorId> = graph
            .outputs()
            .iter()
            .copied()
            .filter(|&t| matches!(graph.tensor(t).producer, Producer::Node(p) if !prefix[p]))
            .collect();
        let bytes = |ts: &[TensorId]| ts.iter().map(|&t| graph.tensor(t).bytes).sum();
        Cut { up_bytes: bytes(&up), down_bytes: bytes(&down), prefix, up, down }
    }

    /// Everything on the wearable.
    pub fn wearable_only(graph: &LayerGraph) -> Cut {
        Self::prefix_of_order(graph, &(0..graph.nodes().len()).collect::<Vec<_>>(), graph.nodes().len())
    }

    /// Everything on the handheld: the raw inputs cross the link.
    pub fn handheld_only(graph: &LayerGraph) -> Cut {
        Self::prefix_of_order(graph, &[], 0)
    }

    /// The first `k` nodes of a topological `order`.
    fn prefix_of_order(graph: &LayerGraph, order: &[NodeId], k: usize) -> Cut {
        let mut mask = vec![false; graph.nodes().len()];
        for &n in &order[..k.min(order.len())] {
            mask[n] = true;
        }
        // A prefix of a topological order is always predecessor-closed.
        Self::from_mask(graph, mask).expect("a topological prefix is a valid cut")
    }

    /// The smallest prefix of the node order (a topological order) holding at
    /// least `fraction` of the model's FLOPs.
    pub fn at_flops_fraction(graph: &LayerGraph, fraction: f64) -> Cut {
        let total = graph.total_flops() as f64;
        let order: Vec<NodeId> = (0..graph.nodes().len()).collect();
        let mut acc = 0.0;
        let mut k = 0;
        while k < order.len() && acc < fraction * total {
            acc += graph.nodes()[k].flops as f64;
            k += 1;
        }
        Self::prefix_of_order(graph, &order, k)
    }

    /// Whether `node` runs on the wearable.
    pub fn on_wearable(&self, node: NodeId) -> bool {
        self.prefix[node]
    }

    /// `mask[node]` is true for the wearable's layers.
    pub fn prefix_mask(&self) -> &[bool] {
        &self.prefix
    }

    /// Wearable layers, in node order.
    pub fn prefix_nodes(&self) -> Vec<NodeId> {
        (0..self.prefix.len()).filter(|&n| self.prefix[n]).collect()
    }

    /// Handheld layers, in node order.
    pub fn suffix_nodes(&self) -> Vec<NodeId> {
        (0..self.prefix.len()).filter(|&n| !self.prefix[n]).collect()
    }

    /// Number of wearable layers.
    pub fn prefix_len(&self) -> usize {
        self.prefix.iter().filter(|&&b| b).count()
    }

    /// Tensors sent wearable → handheld.
    pub fn up_tensors(&self) -> &[TensorId] {
        &self.up
    }

    /// Model outputs sent handheld → wearable.
    pub fn down_tensors(&self) -> &[TensorId] {
        &self.down
    }

    /// Bytes sent wearable → handheld per inference.
    pub fn up_bytes(&self) -> u64 {
        self.up_bytes
    }

    /// What the cut would send wearable → handheld if each dequantized
    /// tensor crossed as its dequantizer's float output ([`LayerGraph::is_dequantized`]:
    /// four bytes an element, not one), the price of the float crossing
    /// that [`Cut::up_bytes`] replaces.
    pub fn float_version_up_bytes(&self, graph: &LayerGraph) -> u64 {
        self.up
            .iter()
            .map(|&t| {
                let info = graph.tensor(t);
                if graph.is_dequantized(t) {
                    4 * info.shape.iter().map(|&d| d as u64).product::<u64>()
                } else {
                    info.bytes
                }
            })
            .sum()
    }

    /// Bytes sent handheld → wearable per inference.
    pub fn down_bytes(&self) -> u64 {
        self.down_bytes
    }

    /// Whether the handheld has nothing to do.
    pub fn is_wearable_only(&self) -> bool {
        self.prefix.iter().all(|&b| b)
    }

    /// Whether the wearable runs no layer.
    pub fn is_handheld_only(&self) -> bool {
        self.prefix.iter().all(|&b| !b)
    }

    /// FLOPs of the wearable's layers.
    pub fn prefix_flops(&self, graph: &LayerGraph) -> u64 {
        self.prefix_nodes().iter().map(|&n| graph.nodes()[n].flops).sum()
    }

    /// A compact, stable identifier of the prefix set (hex of the mask).
    pub fn key(&self) -> CutKey {
        CutKey::of_mask(&self.prefix)
    }

    /// The cut whose [`Cut::key`] is `key` (both peers hold the same graph).
    pub fn from_key(graph: &LayerGraph, key: &str) -> Result<Cut> {
        let n = graph.nodes().len();
        if key.len() != n.div_ceil(4) {
            return Err(Error::InvalidCut(format!(
                "cut key of {} digits for a model of {n} layers (expected {})",
                key.len(),
                n.div_ceil(4)
            )));
        }
        let mut mask = Vec::with_capacity(key.len() * 4);
        for c in key.chars() {
            let v = c
                .to_digit(16)
                .ok_or_else(|| Error::InvalidCut(format!("cut key has a non-hex digit '{c}'")))?;
            mask.extend((0..4).map(|i| v & (1 << i) != 0));
        }
        if mask[n..].iter().any(|&b| b) {
            return Err(Error::InvalidCut("cut key names layers past the model's last".into()));
        }
        mask.truncate(n);
        Self::from_mask(graph, mask)
    }

    /// A one-line description naming the crossing tensors.
    pub fn describe(&self, graph: &LayerGraph) -> String {
        let names: Vec<&str> = self.up.iter().map(|&t| graph.tensor(t).name.as_str()).collect();
        format!(
            "{}/{} layers on wearable, {} up bytes via [{}], {} down bytes",
            self.prefix_len(),
            self.prefix.len(),
            self.up_bytes,
            names.join(", "),
            self.down_bytes
        )
    }
}

impl fmt::Debug for Cut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Cut({} of {}, up {:?}, key {})", self.prefix_len(), self.prefix.len(), self.up, self.key())
    }
}

/// Every cut of the graph, if there are at most `limit`; `None` otherwise.
///
/// A chain of n layers has n+1 cuts; a branchy DAG can have exponentially many.
pub fn enumerate_cuts(graph: &LayerGraph, limit: usize) -> Option<Vec<Cut>> {
    let masks = enumerate_ideals(graph.nodes().len(), |i| graph.preds(i), limit)?;
    // Every mask here is predecessor-closed by construction.
    masks.into_iter().map(|m| Cut::from_mask(graph, m).ok()).collect()
}

/// Every order ideal (predecessor-closed subset) of a DAG of `n` nodes
/// numbered in a topological order, as membership masks, if there are at
/// most `limit`; `None` otherwise.
pub fn enumerate_ideals<'a>(
    n: usize,
    preds: impl Fn(usize) -> &'a [usize],
    limit: usize,
) -> Option<Vec<Vec<bool>>> {
    fn walk<'a>(
        preds: &dyn Fn(usize) -> &'a [usize],
        i: usize,
        mask: &mut Vec<bool>,
        out: &mut Vec<Vec<bool>>,
        limit: usize,
    ) -> bool {
        if out.len() > limit {
            return false;
        }
        if i == mask.len() {
            out.push(mask.clone());
            return out.len() <= limit;
        }
        // Nodes are in a topological order, so predecessors are decided.
        if preds(i).iter().all(|&p| mask[p]) {
            mask[i] = true;
            if !walk(preds, i + 1, mask, out, limit) {
                return false;
            }
            mask[i] = false;
        }
        walk(preds, i + 1, mask, out, limit)
    }
    let mut out = vec![];
    walk(&preds, 0, &mut vec![false; n], &mut out, limit).then_some(out)
}

/// Up to `count` distinct random valid cuts, trivial cuts excluded.
///
/// Each is a random-length prefix of a random topological order, so on a
/// branchy DAG most of them cut through branches (several crossing tensors).
pub fn sample_cuts(graph: &LayerGraph, count: usize, seed: u64) -> Vec<Cut> {
    let n = graph.nodes().len();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut seen = std::collections::HashSet::new();
    let mut cuts = vec![];
    if n < 2 {
        return cuts;
    }
    let mut attempts = 0;
    while cuts.len() < count && attempts < count * 50 + 100 {
        attempts += 1;
        let order = random_topological_order(graph, &mut rng);
        let k = rng.gen_range(1..n);
        let cut = Cut::prefix_of_order(graph, &order, k);
        if seen.insert(cut.key()) {
            cuts.push(cut);
        }
    }
    cuts
}

fn random_topological_order(graph: &LayerGraph, rng: &mut ChaCha8Rng) -> Vec<NodeId> {
    let n = graph.nodes().len();
    let mut indegree: Vec<usize> = (0..n).map(|i| graph.preds(i).len()).collect();
    let mut ready: Vec<NodeId> = (0..n).filter(|&i| indegree[i] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while !ready.is_empty() {
        ready.shuffle(rng);
        let next = ready.pop().unwrap_or_default();
        order.push(next);
        for &s in graph.succs(next) {
            indegree[s] -= 1;
            if indegree[s] == 0 {
                ready.push(s);
            }
        }
    }
    order
}

/// The cuts a split check should cover: every cut of a chain, else as
/// [`sampled_cuts_to_check`].
pub fn cuts_to_check(graph: &LayerGraph, count: usize, seed: u64) -> Vec<Cut> {
    let count = if graph.is_chain() { graph.nodes().len() + 1 } else { count };
    sampled_cuts_to_check(graph, count, seed)
}

/// Every cut when there are at most `count` of them, else `count` sampled
/// cuts plus the two trivial ones, chain or not (for big models, where each
/// cut costs two tract optimizations).
pub fn sampled_cuts_to_check(graph: &LayerGraph, count: usize, seed: u64) -> Vec<Cut> {
    if let Some(all) = enumerate_cuts(graph, count.max(2)) {
        return all;
    }
    let mut cuts = vec![Cut::handheld_only(graph), Cut::wearable_only(graph)];
    cuts.extend(sample_cuts(graph, count, seed));
    cuts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{InputShapes, Model};
    use tandem_models::tiny as testing;

    #[test]
    fn sampler_yields_distinct_valid_cuts() {
        let model = Model::from_bytes(&testing::tiny_diamond_onnx(), &InputShapes::none()).expect("model");
        let g = model.graph();
        let cuts = sample_cuts(g, 100, 9);
        // 8 ideals, minus the two trivial ones the sampler never draws.
        assert_eq!(cuts.len(), 6);
        let keys: std::collections::HashSet<CutKey> = cuts.iter().map(Cut::key).collect();
        assert_eq!(keys.len(), cuts.len());
    }

    #[test]
    fn flops_fraction_cuts_are_monotone() {
        let model = Model::from_bytes(&testing::tiny_mlp_onnx(), &InputShapes::none()).expect("model");
        let g = model.graph();
        let a = Cut::at_flops_fraction(g, 0.25).prefix_len();
        let b = Cut::at_flops_fraction(g, 0.75).prefix_len();
        assert!(a <= b);
        assert!(Cut::at_flops_fraction(g, 0.0).is_handheld_only());
        assert!(Cut::at_flops_fraction(g, 1.0).is_wearable_only());
    }
}
