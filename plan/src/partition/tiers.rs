//! The exact three-tier partitioner (SPEC 9, "Nested cuts"): the watch runs a
//! prefix of the layer DAG, the phone a middle part, an edge server the rest.
//! Pure: prices in, a placement out, no I/O and no clocks.
//!
//! # Placements
//! A [`Placement`] is a pair of nested cuts S1 ⊆ S2 ⊆ V, each closed under
//! predecessors: S1 on the watch, S2 \ S1 on the phone, V \ S2 on the edge.
//! Any part may be empty, so one type covers watch-only, watch → phone (the
//! two-tier cut, S2 = V), watch → phone → edge, the phone relaying the raw
//! input to the edge (S1 = S2 = ∅), and, with [`Route::Direct`], the watch
//! talking to the edge over its own Wi-Fi or LTE, the phone out of the loop
//! (then S1 = S2, and the direct link is priced by [`EdgePrices::direct`]).
//!
//! # Prices
//! [`TierPrices`] holds the two-tier [`NodePrices`] of the watch and the
//! phone (their per-layer costs, the watch–phone link, weights and link
//! encodings) and [`EdgePrices`]: per-layer edge seconds, the phone–edge
//! link, and the watch's own link to the edge if it has one. On
//! [`Route::Relay`], the tensors crossing the watch–phone link are those a
//! two-tier cut at S1 sends (priced exactly as the two-tier code prices
//! them), and those crossing the phone–edge link are those a cut at S2
//! sends: a tensor made on the watch and read on the edge crosses both, the
//! phone forwarding it; a model output made on the edge comes back down
//! both links. Objectives:
//! - latency: the stages in sequence for one frame, or for a stream the
//!   slowest of three compute stages and two links ([`TierEvaluation`]);
//! - energy: the watch's and the phone's compute, weighted as the two-tier
//!   code weights them, and the radios of the user's devices on each link.
//!   **The edge server's energy is not counted**: it is not the user's
//!   battery. A layer the edge cannot run (infinite seconds) is priced
//!   infinite under every objective, so an absent edge
//!   ([`EdgePrices::absent`]) leaves exactly the two-tier problem.
//!
//! # Search
//! For the sum objectives (latency of one frame, energy, and energy + λ ·
//! latency) the best nested pair is one s–t minimum cut of a layered graph
//! (Ishikawa's construction for monotone labelings, [`min_cut_placement`]):
//! each layer v gets two graph nodes v₁, v₂, on the source side when v ∈ S1
//! (resp. S2), chained `s → v₂ → v₁ → t` with the edge, phone and watch
//! prices of v (exactly one of the three is cut), `v₁ → v₂` infinite (the
//! nesting), `v_k → u_k` infinite for each predecessor u (the closure), and
//! for each level k the DADS tensor edges of a two-tier cut at S_k with
//! that link's prices. The fixed terms (a run's overhead per busy tier, each
//! used link's RTT) only grow with the set of busy tiers, so one min-cut per
//! set of allowed tiers, each priced in full, finds the exact optimum
//! ([`candidates`]). The latency hint (PropT) is handled as the two-tier
//! code does: a Lagrangian bisection on λ over the same min-cuts, every
//! visited placement a candidate, then Algorithm 1 ([`super::choose`]). A
//! stream's period is not a sum: small DAGs are searched exhaustively
//! ([`enumerate_placements`]), larger ones choose among the min-cut
//! candidates and the two-tier stream search's cuts, and say so
//! ([`TierDecision::optimal`]).

use std::collections::HashSet;
use std::time::Duration;

use serde::Serialize;

use super::{
    choose, evaluate_stages, stream, LatencyHint, LinkEstimate, Mode, NodePrices, Objective, Priced,
};
use crate::predict::LatencyModel;
use tandem_core::cut::enumerate_ideals;
use tandem_core::graph::{LayerGraph, NodeId, Producer};
use tandem_core::{Cut, Error, Result};

/// Where a layer runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    /// The watch (S1).
    Wearable,
    /// The phone (S2 \ S1).
    Handheld,
    /// The edge server (V \ S2).
    Edge,
}

impl Tier {
    /// The three tiers, nearest the sensor first.
    pub const ALL: [Tier; 3] = [Tier::Wearable, Tier::Handheld, Tier::Edge];
}

/// How tensors reach the edge.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Route {
    /// Through the phone, which forwards what it does not compute.
    Relay,
    /// Over the watch's own link to the edge ([`EdgePrices::direct`]); the
    /// phone runs and carries nothing (S1 = S2).
    Direct,
}

/// A three-tier placement: nested predecessor-closed cuts S1 ⊆ S2.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Placement {
    /// S1 as a two-tier cut: its up tensors cross the watch–phone link.
    watch: Cut,
    /// S2 as a two-tier cut: its up tensors cross to the edge.
    near: Cut,
    route: Route,
}

impl Placement {
    /// The placement with `watch[v]` for S1 and `near[v]` for S2 (masks by
    /// layer id); fails unless both are closed under predecessors, S1 ⊆
    /// S2, and a [`Route::Direct`] placement leaves the phone no layer.
    pub fn new(graph: &LayerGraph, watch: Vec<bool>, near: Vec<bool>, route: Route) -> Result<Placement> {
        if let Some(v) = (0..watch.len().min(near.len())).find(|&v| watch[v] && !near[v]) {
            return Err(Error::InvalidCut(format!(
                "'{}' is on the watch but S2 (the watch's and the phone's layers) lacks it: the cuts must nest",
                graph.nodes()[v].name
            )));
        }
        if route == Route::Direct && watch != near {
            return Err(Error::InvalidCut(
                "a direct route to the edge leaves the phone no layer (S1 = S2)".into(),
            ));
        }
        let watch = Cut::from_mask(graph, watch)?;
        let near = Cut::from_mask(graph, near)?;
        Ok(Placement::of(watch, near, route))
    }

    /// The two-tier `cut` (watch prefix, phone suffix) as a placement with
    /// nothing on the edge.
    pub fn two_tier(graph: &LayerGraph, cut: Cut) -> Placement {
        Placement { watch: cut, near: Cut::wearable_only(graph), route: Route::Relay }
    }

    /// Every layer on `tier` (for the edge, reached by `route`).
    pub fn all_on(graph: &LayerGraph, tier: Tier, route: Route) -> Placement {
        let (all, none) = (Cut::wearable_only(graph), Cut::handheld_only(graph));
        match tier {
            Tier::Wearable => Placement::of(all.clone(), all, Route::Relay),
            Tier::Handheld => Placement::of(none, all, Route::Relay),
            Tier::Edge => Placement::of(none.clone(), none, route),
        }
    }

    /// One placement per physical meaning: with nothing on the edge, the
    /// route does not matter (it is called a relay).
    fn of(watch: Cut, near: Cut, route: Route) -> Placement {
        let route = if near.is_wearable_only() { Route::Relay } else { route };
        Placement { watch, near, route }
    }

    /// The tier layer `v` runs on.
    pub fn tier(&self, v: NodeId) -> Tier {
        match (self.watch.on_wearable(v), self.near.on_wearable(v)) {
            (true, _) => Tier::Wearable,
            (false, true) => Tier::Handheld,
            (false, false) => Tier::Edge,
        }
    }

    /// The layers on `tier`, in node order.
    pub fn layers(&self, tier: Tier) -> Vec<NodeId> {
        (0..self.watch.prefix_mask().len()).filter(|&v| self.tier(v) == tier).collect()
    }

    /// S1: the watch's layers, as a two-tier cut.
    pub fn watch(&self) -> &Cut {
        &self.watch
    }

    /// S2: the watch's and the phone's layers, as a two-tier cut.
    pub fn near(&self) -> &Cut {
        &self.near
    }

    /// How tensors reach the edge.
    pub fn route(&self) -> Route {
        self.route
    }

    /// Whether the edge runs any layer.
    pub fn uses_edge(&self) -> bool {
        !self.near.is_wearable_only()
    }

    /// The two-tier cut this is, when the edge runs nothing.
    pub fn as_two_tier(&self) -> Option<&Cut> {
        (!self.uses_edge()).then_some(&self.watch)
    }
}

impl Serialize for Placement {
    /// The layers (by id) on each tier, and the route: what a report shows.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Tiers {
            wearable: Vec<NodeId>,
            handheld: Vec<NodeId>,
            edge: Vec<NodeId>,
            route: Route,
        }
        Tiers {
            wearable: self.layers(Tier::Wearable),
            handheld: self.layers(Tier::Handheld),
            edge: self.layers(Tier::Edge),
            route: self.route,
        }
        .serialize(serializer)
    }
}

/// One link to the edge, priced per byte.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct EdgeLink {
    /// Seconds per byte toward the edge and back (infinite: no link).
    pub s_per_byte: (f64, f64),
    /// P_T and P_R (W) of the user's device at the near end: the phone's
    /// Wi-Fi on the relay link, the watch's own radio on the direct one.
    /// The edge's radio is not counted.
    pub radio_w: (f64, f64),
    /// Round trip, paid once by a placement that uses the link.
    pub rtt: Duration,
}

impl EdgeLink {
    /// The link of estimate `link` (its `up` is toward the edge), with the
    /// near device's radio powers `radio_w` (P_T, P_R in W).
    pub fn new(link: &LinkEstimate, radio_w: (f64, f64)) -> EdgeLink {
        let rate = |r: f64| if r > 0.0 { 1.0 / r } else { f64::INFINITY };
        EdgeLink {
            s_per_byte: (rate(link.up_bytes_per_s), rate(link.down_bytes_per_s)),
            radio_w,
            rtt: link.rtt,
        }
    }

    /// No link: every byte costs infinitely much.
    pub fn absent() -> EdgeLink {
        EdgeLink { s_per_byte: (f64::INFINITY, f64::INFINITY), radio_w: (0.0, 0.0), rtt: Duration::ZERO }
    }

    /// Price of `bytes` toward the edge, the near device's energy weighted by `weight`.
    pub fn up(&self, bytes: u64, weight: f64, objective: Objective) -> f64 {
        radio_price(bytes, self.s_per_byte.0, weight * self.radio_w.0, objective)
    }

    /// Price of `bytes` back from the edge, likewise.
    pub fn down(&self, bytes: u64, weight: f64, objective: Objective) -> f64 {
        radio_price(bytes, self.s_per_byte.1, weight * self.radio_w.1, objective)
    }
}

/// Price of `bytes` at `s_per_byte`, the radio drawing `watts` (weighted).
/// Nothing sent costs nothing, even on an absent link; something sent on an
/// absent link costs infinitely much under every objective.
fn radio_price(bytes: u64, s_per_byte: f64, watts: f64, objective: Objective) -> f64 {
    if bytes == 0 {
        return 0.0;
    }
    let t = bytes as f64 * s_per_byte;
    if !t.is_finite() {
        return f64::INFINITY;
    }
    match objective {
        Objective::Latency => t,
        Objective::Energy => watts * t,
        Objective::Lagrangian(l) => watts * t + l * t,
    }
}

/// The edge tier's prices.
#[derive(Clone, Debug, PartialEq)]
pub struct EdgePrices {
    /// Edge busy seconds per layer (infinite: the edge cannot run it).
    pub t_edge: Vec<f64>,
    /// Fixed seconds of one run on the edge, paid when it runs a layer.
    pub overhead_s: f64,
    /// The phone–edge link ([`Route::Relay`]); its radio is the phone's,
    /// weighted by the phone's energy weight.
    pub relay: EdgeLink,
    /// The watch's own link to the edge, when it has one ([`Route::Direct`]);
    /// its radio is the watch's, weighted by the watch's energy weight.
    pub direct: Option<EdgeLink>,
}

impl EdgePrices {
    /// Prices the graph's layers with the edge's latency predictor.
    pub fn new(
        graph: &LayerGraph,
        edge: &dyn LatencyModel,
        relay: EdgeLink,
        direct: Option<EdgeLink>,
    ) -> EdgePrices {
        let costs = edge.node_costs(graph);
        EdgePrices {
            t_edge: costs.per_node_s.iter().map(|s| s.max(0.0)).collect(),
            overhead_s: costs.overhead_s.max(0.0),
            relay,
            direct,
        }
    }

    /// No edge: every layer infinite, no link. The three-tier search then
    /// solves the two-tier problem.
    pub fn absent(graph: &LayerGraph) -> EdgePrices {
        EdgePrices {
            t_edge: vec![f64::INFINITY; graph.nodes().len()],
            overhead_s: 0.0,
            relay: EdgeLink::absent(),
            direct: None,
        }
    }

    /// Price of layer `v` on the edge: its seconds under latency, nothing
    /// under energy (not the user's battery), infinite if it cannot run there.
    pub fn node(&self, v: NodeId, objective: Objective) -> f64 {
        let t = self.t_edge[v];
        if !t.is_finite() {
            return f64::INFINITY;
        }
        match objective {
            Objective::Latency => t,
            Objective::Energy => 0.0,
            Objective::Lagrangian(l) => l * t,
        }
    }
}

/// Everything a three-tier decision prices, computed once per decision.
#[derive(Clone, Debug)]
pub struct TierPrices {
    /// The watch, the phone and their link, as the two-tier partitioner
    /// prices them (weights and link encodings included).
    pub pair: NodePrices,
    /// Round trip of the watch–phone link, paid once by a placement that uses it.
    pub pair_rtt: Duration,
    /// The edge and its links.
    pub edge: EdgePrices,
}

impl TierPrices {
    /// Price of layer `v` on each tier, in [`Tier::ALL`]'s order.
    pub fn node(&self, v: NodeId, objective: Objective) -> [f64; 3] {
        let (w, p) = self.pair.node(v, objective);
        [w, p, self.edge.node(v, objective)]
    }

    /// Price of tensor `id` crossing at level `level` of `route`'s nested
    /// cuts (0: out of S1, 1: out of S2), `up` (away from the watch) or down.
    fn crossing(
        &self,
        route: Route,
        level: usize,
        id: usize,
        bytes: u64,
        up: bool,
        objective: Objective,
    ) -> f64 {
        let weights = self.pair.weights;
        match (route, level, up) {
            (Route::Relay, 0, true) => self.pair.up_tensor(id, bytes, objective),
            (Route::Relay, 0, false) => self.pair.down_tensor(id, bytes, objective),
            (Route::Relay, _, true) => self.edge.relay.up(bytes, weights.handheld, objective),
            (Route::Relay, _, false) => self.edge.relay.down(bytes, weights.handheld, objective),
            // S1 = S2: the one crossing is priced at level 1.
            (Route::Direct, 0, _) => 0.0,
            (Route::Direct, _, up) => match &self.edge.direct {
                Some(link) if up => link.up(bytes, weights.wearable, objective),
                Some(link) => link.down(bytes, weights.wearable, objective),
                None => f64::INFINITY,
            },
        }
    }
}

/// What one link carries for a placement.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct LinkUse {
    /// Bytes away from the watch (encoded, where encodings are priced).
    pub up_bytes: u64,
    /// Bytes back toward the watch.
    pub down_bytes: u64,
    /// Transfer away from the watch (s).
    pub t_up: f64,
    /// Transfer back (s).
    pub t_down: f64,
    /// RTT paid (s): 0 when the link is unused.
    pub t_rtt: f64,
}

/// The predicted cost of one placement.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TierEvaluation {
    /// Watch compute, link encodings included (s).
    pub t_wearable: f64,
    /// Phone compute, load and link encodings included (s).
    pub t_handheld: f64,
    /// Edge compute (s).
    pub t_edge: f64,
    /// The watch–phone link (unused on [`Route::Direct`]).
    pub phone_link: LinkUse,
    /// The link to the edge: phone–edge, or watch–edge on [`Route::Direct`].
    pub edge_link: LinkUse,
    /// Single-inference latency: the stages in sequence (s).
    pub latency_s: f64,
    /// Per-frame time of a pipelined stream: the slowest of the three
    /// compute stages and the two links (s).
    pub stream_period_s: f64,
    /// Weighted joules of the watch and the phone (compute and radios); the
    /// edge's energy is not counted. Infinite when the placement puts a
    /// layer or a byte where the edge cannot take it.
    pub energy_j: f64,
}

impl Priced for TierEvaluation {
    fn time(&self, mode: Mode) -> f64 {
        match mode {
            Mode::Single => self.latency_s,
            Mode::Stream => self.stream_period_s,
        }
    }

    fn energy_j(&self) -> f64 {
        self.energy_j
    }
}

/// Prices a placement under the full formulas (per-run overheads and RTTs
/// included). The watch–phone part is the two-tier [`evaluate_stages`] of
/// the cut at S1; the edge's link and stage are added to it.
pub fn evaluate_placement(graph: &LayerGraph, prices: &TierPrices, placement: &Placement) -> TierEvaluation {
    let (mut t, mut busy) = ([0.0f64; 3], [false; 3]);
    for v in 0..graph.nodes().len() {
        let i = placement.tier(v) as usize;
        t[i] += [prices.pair.t_wearable[v], prices.pair.t_handheld[v], prices.edge.t_edge[v]][i];
        busy[i] = true;
    }
    let overheads = [prices.pair.overhead_s.0, prices.pair.overhead_s.1, prices.edge.overhead_s];
    for i in 0..3 {
        if busy[i] {
            t[i] += overheads[i];
        }
    }
    let [tw, tp, te] = t;
    let near = placement.near();
    let (up, down) = (near.up_bytes(), near.down_bytes());
    let link_use = |link: &EdgeLink| LinkUse {
        up_bytes: up,
        down_bytes: down,
        t_up: link.up(up, 1.0, Objective::Latency),
        t_down: link.down(down, 1.0, Objective::Latency),
        t_rtt: if placement.uses_edge() { link.rtt.as_secs_f64() } else { 0.0 },
    };
    let weights = prices.pair.weights;
    let (wearable, handheld, phone_link, edge_link, energy_j) = match placement.route() {
        Route::Relay => {
            let pair = evaluate_stages(&prices.pair, placement.watch(), tw, tp, prices.pair_rtt);
            let link = &prices.edge.relay;
            let energy = pair.energy_j
                + link.up(up, weights.handheld, Objective::Energy)
                + link.down(down, weights.handheld, Objective::Energy);
            let phone_link = LinkUse {
                up_bytes: pair.up_bytes,
                down_bytes: pair.down_bytes,
                t_up: pair.t_up,
                t_down: pair.t_down,
                t_rtt: pair.t_rtt,
            };
            (pair.t_wearable, pair.t_handheld, phone_link, link_use(link), energy)
        }
        Route::Direct => {
            let link = prices.edge.direct.unwrap_or_else(EdgeLink::absent);
            let energy = weights.wearable * prices.pair.compute_w.0 * tw
                + link.up(up, weights.wearable, Objective::Energy)
                + link.down(down, weights.wearable, Objective::Energy);
            (tw, tp, LinkUse::default(), link_use(&link), energy)
        }
    };
    let stages = |l: &LinkUse| l.t_up + l.t_rtt + l.t_down;
    let latency_s = wearable + stages(&phone_link) + handheld + stages(&edge_link) + te;
    // Pipelined, a link's stage is its transfer time; RTT adds latency, not period.
    let link_s = |l: &LinkUse| l.t_up + l.t_down;
    let stream_period_s =
        [wearable, link_s(&phone_link), handheld, link_s(&edge_link), te].into_iter().fold(0.0, f64::max);
    // The edge's energy is not counted, but a placement it cannot run is no bargain.
    let feasible = te.is_finite() && link_s(&edge_link).is_finite();
    TierEvaluation {
        t_wearable: wearable,
        t_handheld: handheld,
        t_edge: te,
        phone_link,
        edge_link,
        latency_s,
        stream_period_s,
        energy_j: if feasible { energy_j } else { f64::INFINITY },
    }
}

/// The sum objective of a placement, as the layered min-cut prices it:
/// each layer on its tier, each tensor crossing out of S1 and out of S2 at
/// that link's price, model outputs coming back down the same way. The
/// fixed terms (per-run overheads, RTTs) are left out.
pub fn sum_cost(graph: &LayerGraph, prices: &TierPrices, placement: &Placement, objective: Objective) -> f64 {
    let mut total: f64 =
        (0..graph.nodes().len()).map(|v| prices.node(v, objective)[placement.tier(v) as usize]).sum();
    for (level, cut) in [placement.watch(), placement.near()].into_iter().enumerate() {
        let route = placement.route();
        for (ids, up) in [(cut.up_tensors(), true), (cut.down_tensors(), false)] {
            for &id in ids {
                total += prices.crossing(route, level, id, graph.tensor(id).bytes, up, objective);
            }
        }
    }
    total
}

/// Capacity of the edges that must never be cut.
const INF: u64 = u64::MAX / 4;
/// Finite prices are scaled so the largest becomes this (as in
/// [`super::mincut`]): integer capacities keep Dinic's algorithm free of
/// float-rounding micro-augmentations.
const SCALE_TOP: f64 = (1u64 << 40) as f64;

/// A max-flow network with priced edges, solved by Dinic's algorithm.
struct Network {
    /// Per node: its edges (edge `e ^ 1` is `e`'s reverse).
    adj: Vec<Vec<usize>>,
    /// Per edge: the node it goes to.
    to: Vec<usize>,
    /// Per forward edge (`e / 2`): its price, possibly infinite.
    price: Vec<f64>,
}

impl Network {
    fn new(nodes: usize) -> Network {
        Network { adj: vec![vec![]; nodes], to: vec![], price: vec![] }
    }

    /// A new node; returns its index.
    fn node(&mut self) -> usize {
        self.adj.push(vec![]);
        self.adj.len() - 1
    }

    /// An edge cut (paid) when `from` is on the source side and `to` is not.
    fn add(&mut self, from: usize, to: usize, price: f64) {
        if price <= 0.0 || from == to {
            return;
        }
        self.adj[from].push(self.to.len());
        self.to.push(to);
        self.adj[to].push(self.to.len());
        self.to.push(from);
        self.price.push(price);
    }

    /// The least source side of a minimum s–t cut, or `None` when every
    /// cut is infinite.
    fn min_cut(&self, s: usize, t: usize) -> Option<Vec<bool>> {
        let top = self.price.iter().copied().filter(|x| x.is_finite()).fold(0.0, f64::max);
        let scale = if top > 0.0 { SCALE_TOP / top } else { 1.0 };
        let mut cap = vec![0u64; self.to.len()];
        for (i, &x) in self.price.iter().enumerate() {
            cap[2 * i] = if x.is_finite() { (x * scale).round() as u64 } else { INF };
        }
        let nodes = self.adj.len();
        let mut level = vec![-1i32; nodes];
        let mut next = vec![0usize; nodes];
        let mut total: u64 = 0;
        loop {
            level.iter_mut().for_each(|l| *l = -1);
            level[s] = 0;
            let mut queue = vec![s];
            let mut head = 0;
            while let Some(&v) = queue.get(head) {
                head += 1;
                for &e in &self.adj[v] {
                    if cap[e] > 0 && level[self.to[e]] < 0 {
                        level[self.to[e]] = level[v] + 1;
                        queue.push(self.to[e]);
                    }
                }
            }
            if level[t] < 0 {
                return (total < INF).then(|| level.iter().map(|&l| l >= 0).collect());
            }
            next.iter_mut().for_each(|n| *n = 0);
            loop {
                let pushed = self.push(s, t, INF, &mut cap, &level, &mut next);
                if pushed == 0 {
                    break;
                }
                total = total.saturating_add(pushed);
                if total >= INF {
                    return None;
                }
            }
        }
    }

    fn push(
        &self,
        v: usize,
        t: usize,
        limit: u64,
        cap: &mut [u64],
        level: &[i32],
        next: &mut [usize],
    ) -> u64 {
        if v == t {
            return limit;
        }
        while next[v] < self.adj[v].len() {
            let e = self.adj[v][next[v]];
            let to = self.to[e];
            if cap[e] > 0 && level[to] == level[v] + 1 {
                let pushed = self.push(to, t, limit.min(cap[e]), cap, level, next);
                if pushed > 0 {
                    cap[e] -= pushed;
                    cap[e ^ 1] = cap[e ^ 1].saturating_add(pushed);
                    return pushed;
                }
            }
            next[v] += 1;
        }
        0
    }
}

/// The placement minimizing `objective`'s sum ([`sum_cost`]) among those of
/// `route` using only `tiers`, by one minimum cut of the layered graph (see
/// the module docs); the least S1 and S2 among the optima. `None` when every
/// such placement costs infinitely much (a [`Route::Direct`] without a
/// direct link, or a tier set that cannot run the model).
pub fn min_cut_placement(
    graph: &LayerGraph,
    prices: &TierPrices,
    objective: Objective,
    route: Route,
    tiers: &[Tier],
) -> Option<Placement> {
    min_cut_within(graph, prices, objective, route, tiers, None)
}

/// [`min_cut_placement`], with S2 fixed to `near` when given: the layers
/// of `near` may not run on the edge, the others only there.
fn min_cut_within(
    graph: &LayerGraph,
    prices: &TierPrices,
    objective: Objective,
    route: Route,
    tiers: &[Tier],
    near: Option<&Cut>,
) -> Option<Placement> {
    let n = graph.nodes().len();
    let (s, t) = (2 * n, 2 * n + 1);
    // Graph node of layer v at level k: on the source side when v ∈ S_{k+1}.
    let at = |v: usize, k: usize| 2 * v + k;
    let mut net = Network::new(2 * n + 2);
    for v in 0..n {
        let mut price = prices.node(v, objective);
        for (i, tier) in Tier::ALL.into_iter().enumerate() {
            if !tiers.contains(&tier) || (route == Route::Direct && tier == Tier::Handheld) {
                price[i] = f64::INFINITY;
            }
            if near.is_some_and(|c| c.on_wearable(v) == (tier == Tier::Edge)) {
                price[i] = f64::INFINITY;
            }
        }
        let [w, p, e] = price;
        net.add(s, at(v, 1), e);
        net.add(at(v, 1), at(v, 0), p);
        net.add(at(v, 0), t, w);
        net.add(at(v, 0), at(v, 1), f64::INFINITY);
        for &u in graph.preds(v) {
            net.add(at(v, 0), at(u, 0), f64::INFINITY);
            net.add(at(v, 1), at(u, 1), f64::INFINITY);
        }
    }
    for (id, tensor) in graph.tensors().iter().enumerate() {
        let mut readers = tensor.consumers.clone();
        readers.sort_unstable();
        readers.dedup();
        let is_output = graph.outputs().contains(&id);
        for k in 0..2 {
            let from = match tensor.producer {
                Producer::Input(_) => s,
                Producer::Node(u) => at(u, k),
                Producer::Const => continue,
            };
            let up = prices.crossing(route, k, id, tensor.bytes, true, objective);
            // Paid once, when a reader or more is outside S_k and the producer is in it.
            match readers[..] {
                [] => {}
                [c] => net.add(from, at(c, k), up),
                _ if up > 0.0 => {
                    let x = net.node();
                    net.add(from, x, up);
                    for &c in &readers {
                        net.add(x, at(c, k), f64::INFINITY);
                    }
                }
                _ => {}
            }
            if let (true, Producer::Node(u)) = (is_output, tensor.producer) {
                net.add(s, at(u, k), prices.crossing(route, k, id, tensor.bytes, false, objective));
            }
        }
    }
    let side = net.min_cut(s, t)?;
    let watch: Vec<bool> = (0..n).map(|v| side[at(v, 0)]).collect();
    let near: Vec<bool> = (0..n).map(|v| side[at(v, 1)]).collect();
    // Closed and nested by the infinite edges: the reachable set respects them.
    Placement::new(graph, watch, near, route).ok()
}

/// The placements with one tier busy: the watch alone, the phone alone
/// (the raw input relayed), the edge alone through the phone, and the edge
/// alone over the watch's own link where it has one.
pub fn single_tier_placements(graph: &LayerGraph, prices: &TierPrices) -> Vec<Placement> {
    let mut out: Vec<Placement> =
        Tier::ALL.into_iter().map(|tier| Placement::all_on(graph, tier, Route::Relay)).collect();
    if prices.edge.direct.is_some() {
        out.push(Placement::all_on(graph, Tier::Edge, Route::Direct));
    }
    out
}

/// The min-cuts of `objective` restricted to each set of two or more tiers
/// (relayed), and to the watch and the edge over the direct link: with the
/// single-tier placements, the best of them under the full formula is the
/// exact optimum for a sum objective (the fixed terms only grow with the
/// busy tiers).
fn min_cuts(
    graph: &LayerGraph,
    prices: &TierPrices,
    objective: Objective,
    near: Option<&Cut>,
) -> Vec<Placement> {
    use Tier::{Edge, Handheld, Wearable};
    let relayed: [&[Tier]; 4] =
        [&[Wearable, Handheld, Edge], &[Wearable, Handheld], &[Wearable, Edge], &[Handheld, Edge]];
    let mut out: Vec<Placement> = relayed
        .into_iter()
        .filter_map(|tiers| min_cut_within(graph, prices, objective, Route::Relay, tiers, near))
        .collect();
    if prices.edge.direct.is_some() {
        out.extend(min_cut_within(graph, prices, objective, Route::Direct, &[Wearable, Edge], near));
    }
    out
}

/// Candidate placements for `hint`, as [`super::min_cut_candidates`] finds
/// two-tier cuts: the single-tier placements, the exact optima of latency
/// and energy, and for a latency bound a Lagrangian bisection on λ over
/// energy + λ · latency (each step's exact optimum decides the step; every
/// placement visited is a candidate). Repeats are dropped.
pub fn candidates(graph: &LayerGraph, prices: &TierPrices, hint: LatencyHint) -> Vec<Placement> {
    candidates_within(graph, prices, hint, None)
}

/// [`candidates`], with S2 fixed to `near` when given.
fn candidates_within(
    graph: &LayerGraph,
    prices: &TierPrices,
    hint: LatencyHint,
    near: Option<&Cut>,
) -> Vec<Placement> {
    let mut singles = single_tier_placements(graph, prices);
    singles.retain(|p| near.is_none_or(|c| p.near() == c));
    let mut out = singles.clone();
    let evaluate = |p: &Placement| evaluate_placement(graph, prices, p);
    let best = |objective: Objective, out: &mut Vec<Placement>| -> Option<TierEvaluation> {
        let mut found = min_cuts(graph, prices, objective, near);
        found.extend(singles.iter().cloned());
        let value = |e: &TierEvaluation| match objective {
            Objective::Latency => e.latency_s,
            Objective::Energy => e.energy_j,
            Objective::Lagrangian(l) => e.energy_j + l * e.latency_s,
        };
        let best = found.iter().map(evaluate).min_by(|a, b| value(a).total_cmp(&value(b)));
        out.extend(found);
        best
    };
    let fastest = best(Objective::Latency, &mut out);
    let thriftiest = best(Objective::Energy, &mut out);
    if let (LatencyHint::Within(d), Some(fastest), Some(thriftiest)) = (hint, fastest, thriftiest) {
        let d = d.as_secs_f64();
        // Needed only when the least energy is too slow and the fastest is fast enough.
        if thriftiest.latency_s > d && fastest.latency_s <= d {
            let (mut lo, mut hi) = (1e-9f64, 1e9f64);
            for _ in 0..40 {
                let mid = (lo * hi).sqrt();
                match best(Objective::Lagrangian(mid), &mut out) {
                    Some(e) if e.latency_s <= d => hi = mid,
                    _ => lo = mid,
                }
                if hi / lo < 1.01 {
                    break;
                }
            }
        }
    }
    let mut seen = HashSet::new();
    out.retain(|p| seen.insert(p.clone()));
    out
}

/// Every placement of `graph` (nested pairs of predecessor-closed sets,
/// relayed, and with `direct` the watch–edge ones), if there are at most
/// `limit`; `None` otherwise.
pub fn enumerate_placements(graph: &LayerGraph, direct: bool, limit: usize) -> Option<Vec<Placement>> {
    let ideals = enumerate_ideals(graph.nodes().len(), |i| graph.preds(i), limit)?;
    // Every mask here is predecessor-closed by construction.
    let cuts: Vec<Cut> = ideals.into_iter().map(|m| Cut::from_mask(graph, m).ok()).collect::<Option<_>>()?;
    let within = |a: &Cut, b: &Cut| a.prefix_mask().iter().zip(b.prefix_mask()).all(|(&x, &y)| !x || y);
    let mut out = vec![];
    for near in &cuts {
        for watch in cuts.iter().filter(|w| within(w, near)) {
            out.push(Placement::of(watch.clone(), near.clone(), Route::Relay));
            if direct && watch == near && !near.is_wearable_only() {
                out.push(Placement::of(watch.clone(), near.clone(), Route::Direct));
            }
            if out.len() > limit {
                return None;
            }
        }
    }
    Some(out)
}

/// Most placements a stream decision searches exhaustively.
pub const TIER_EXHAUSTIVE_LIMIT: usize = 20_000;

/// The chosen placement and why.
#[derive(Clone, Debug, Serialize)]
pub struct TierDecision {
    /// The placement.
    pub placement: Placement,
    /// Its predicted cost.
    pub evaluation: TierEvaluation,
    /// Candidates compared.
    pub candidates: usize,
    /// Whether it is proven optimal over every placement (under the
    /// predicted costs): the sum objectives always are; a latency bound is
    /// when the least-energy placement meets it or the fastest does not; a
    /// stream's period when every placement was searched.
    pub optimal: bool,
    /// Why this one.
    pub reason: String,
}

/// Decides the three-tier placement: [`candidates`], then Algorithm 1
/// ([`super::choose`]). For a stream (its period is not a sum) a small DAG's
/// placements are all searched; a larger one's candidates also hold the
/// two-tier stream search's cuts ([`super::stream`]), so three tiers never
/// pipeline worse than two.
pub fn decide_tiers(
    graph: &LayerGraph,
    prices: &TierPrices,
    hint: LatencyHint,
    mode: Mode,
) -> Result<TierDecision> {
    decide_within(graph, prices, hint, mode, TIER_EXHAUSTIVE_LIMIT)
}

/// [`decide_tiers`] when the edge serves only the suffixes of `served`
/// (as an engine serves only the models deployed on it): every placement
/// either leaves the edge idle or has its S2 among `served`. Exact as
/// [`decide_tiers`] is: the min-cuts run once with no edge and once with
/// S2 fixed to each served cut.
pub fn decide_tiers_served(
    graph: &LayerGraph,
    prices: &TierPrices,
    hint: LatencyHint,
    mode: Mode,
    served: &[Cut],
) -> Result<TierDecision> {
    decide_among(graph, prices, hint, mode, TIER_EXHAUSTIVE_LIMIT, Some(served))
}

/// [`decide_tiers`], searching every placement of a stream when there are at most `limit`.
fn decide_within(
    graph: &LayerGraph,
    prices: &TierPrices,
    hint: LatencyHint,
    mode: Mode,
    limit: usize,
) -> Result<TierDecision> {
    decide_among(graph, prices, hint, mode, limit, None)
}

/// [`decide_within`], the edge's S2 among `served` when given.
fn decide_among(
    graph: &LayerGraph,
    prices: &TierPrices,
    hint: LatencyHint,
    mode: Mode,
    limit: usize,
    served: Option<&[Cut]>,
) -> Result<TierDecision> {
    let allowed = |p: &Placement| !p.uses_edge() || served.is_none_or(|s| s.contains(p.near()));
    let mut placements = match served {
        None => candidates(graph, prices, hint),
        Some(served) => {
            let no_edge = TierPrices { edge: EdgePrices::absent(graph), ..prices.clone() };
            let mut out = candidates(graph, &no_edge, hint);
            for near in served {
                out.extend(candidates_within(graph, prices, hint, Some(near)));
            }
            out.retain(allowed);
            let mut seen = HashSet::new();
            out.retain(|p| seen.insert(p.clone()));
            out
        }
    };
    let mut searched_all = false;
    if mode == Mode::Stream && hint != LatencyHint::EnergyFirst {
        match enumerate_placements(graph, prices.edge.direct.is_some(), limit) {
            Some(mut all) => {
                all.retain(allowed);
                placements = all;
                searched_all = true;
            }
            None => {
                let cuts: Vec<Cut> = placements.iter().filter_map(|p| p.as_two_tier().cloned()).collect();
                let mut goals = vec![stream::StreamGoal::Period];
                if let LatencyHint::Within(d) = hint {
                    goals.push(stream::StreamGoal::EnergyWithin(d.as_secs_f64()));
                }
                for goal in goals {
                    let found = stream::search(graph, &prices.pair, goal, &cuts, stream::STREAM_BUDGET);
                    placements.extend(found.cut.map(|c| Placement::two_tier(graph, c)));
                }
            }
        }
    }
    let evaluations: Vec<TierEvaluation> =
        placements.iter().map(|p| evaluate_placement(graph, prices, p)).collect();
    let (i, reason) = choose(&evaluations, hint, mode)
        .ok_or_else(|| Error::InvalidCut("the model has no candidate placement".into()))?;
    let least = |f: &dyn Fn(&TierEvaluation) -> f64| {
        evaluations.iter().min_by(|a, b| f(a).total_cmp(&f(b))).map(f).unwrap_or(f64::INFINITY)
    };
    let optimal = searched_all
        || match (mode, hint) {
            (_, LatencyHint::EnergyFirst) | (Mode::Single, LatencyHint::Fastest) => true,
            (Mode::Single, LatencyHint::Within(d)) => {
                // Both exact optima are among the candidates.
                let d = d.as_secs_f64();
                let thriftiest = evaluations.iter().min_by(|a, b| {
                    a.energy_j.total_cmp(&b.energy_j).then(a.latency_s.total_cmp(&b.latency_s))
                });
                thriftiest.is_some_and(|e| e.latency_s <= d) || least(&|e| e.latency_s) > d
            }
            (Mode::Stream, _) => false,
        };
    let note = match (searched_all, optimal) {
        (true, _) => format!("; every one of {} placements searched", placements.len()),
        (false, true) => String::new(),
        (false, false) => "; among the min-cut candidates, not proven optimal".into(),
    };
    Ok(TierDecision {
        placement: placements.swap_remove(i),
        evaluation: evaluations[i].clone(),
        candidates: evaluations.len(),
        optimal,
        reason: reason + &note,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::partition::{
        evaluate, min_cut_candidates, CodecOption, EnergyWeights, HandheldStatus, LinkCodecs,
    };
    use proptest::prelude::*;
    use tandem_core::{enumerate_cuts, InputShapes, Model};
    use tandem_models::tiny::GraphBuilder;

    /// A random DAG: each layer reads earlier tensors and is a MatMul (a
    /// new width), a Relu or a Concat (a join), so tensor sizes vary;
    /// every tensor no layer reads is a model output.
    fn random_dag(ops: &[(u8, usize, usize, u8)]) -> Model {
        let mut g = GraphBuilder::new();
        g.input("t0", &[1, 4]);
        let mut widths = vec![4i64];
        let mut used = vec![false; ops.len() + 1];
        for (i, &(op, a, b, w)) in ops.iter().enumerate() {
            let (a, b) = (a % (i + 1), b % (i + 1));
            let (ta, tb) = (format!("t{a}"), format!("t{b}"));
            let (out, name, weight) = (format!("t{}", i + 1), format!("n{}", i + 1), format!("w{}", i + 1));
            used[a] = true;
            let width = match op % 3 {
                0 => {
                    let width = 1 + i64::from(w % 48);
                    g.weight(&weight, &[widths[a], width]).node("MatMul", &name, &[&ta, &weight], &[&out]);
                    width
                }
                1 => {
                    g.node("Relu", &name, &[&ta], &[&out]);
                    widths[a]
                }
                _ => {
                    used[b] = true;
                    g.node("Concat", &name, &[&ta, &tb], &[&out]).int_attr("axis", 1);
                    widths[a] + widths[b]
                }
            };
            widths.push(width);
        }
        for (i, &u) in used.iter().enumerate() {
            if !u || i == ops.len() {
                g.output(&format!("t{i}"), &[1, widths[i]]);
            }
        }
        Model::from_bytes(&g.build(), &InputShapes::none()).expect("random DAG loads")
    }

    /// A chain of three layers, 32-byte tensors throughout.
    fn chain3() -> Model {
        let mut g = GraphBuilder::new();
        g.input("x", &[1, 8])
            .node("Relu", "a", &["x"], &["t1"])
            .node("Sigmoid", "b", &["t1"], &["t2"])
            .node("Relu", "c", &["t2"], &["y"])
            .output("y", &[1, 8]);
        Model::from_bytes(&g.build(), &InputShapes::none()).expect("chain loads")
    }

    /// The two-tier prices of the watch and the phone, raw tensors.
    fn pair(
        t_wearable: Vec<f64>,
        t_handheld: Vec<f64>,
        s_per_byte: (f64, f64),
        weights: (f64, f64),
    ) -> NodePrices {
        NodePrices {
            t_wearable,
            t_handheld,
            overhead_s: (2e-5, 3e-5),
            compute_w: (0.4, 3.0),
            radio_wearable_w: (0.03, 0.025),
            radio_handheld_w: (0.08, 0.06),
            s_per_byte,
            weights: EnergyWeights { wearable: weights.0, handheld: weights.1 },
            up_links: vec![],
            down_links: vec![],
        }
    }

    /// Seeded conditions of a random case.
    #[derive(Clone, Debug)]
    struct Case {
        seeds: Vec<u32>,
        /// Watch–phone and phone–edge rates (bytes/s), the direct link's if any.
        rates: (f64, f64, Option<f64>),
        rtt_ms: (u64, u64),
        weights: (f64, f64),
        /// Whether the watch–phone link may also carry tensors encoded.
        codecs: bool,
    }

    fn case() -> impl Strategy<Value = Case> {
        (
            proptest::collection::vec(any::<u32>(), 4..16),
            (1e3f64..1e7, 1e3f64..1e7, proptest::option::of(1e3f64..1e7)),
            (0u64..20, 0u64..60),
            (0.0f64..1.0, 0.0f64..1.0),
            any::<bool>(),
        )
            .prop_map(|(seeds, rates, rtt_ms, weights, codecs)| Case {
                seeds,
                rates,
                rtt_ms,
                weights,
                codecs,
            })
    }

    fn dag() -> impl Strategy<Value = Vec<(u8, usize, usize, u8)>> {
        proptest::collection::vec((0u8..3, 0usize..64, 0usize..64, any::<u8>()), 1..10)
    }

    /// Per-layer times in 0.01–10 ms (the watch slowest, the edge fastest
    /// on average), powers, links and RTTs from `case`.
    fn prices(graph: &LayerGraph, case: &Case) -> TierPrices {
        let n = graph.nodes().len();
        let at = |i: usize| f64::from(case.seeds[i % case.seeds.len()] % 1000 + 1) * 1e-5;
        let (r1, r2, direct) = case.rates;
        let ms = Duration::from_millis;
        let mut pair = pair(
            (0..n).map(|i| 3.0 * at(i)).collect(),
            (0..n).map(|i| at(i + 7)).collect(),
            (1.0 / r1, 0.5 / r1),
            case.weights,
        );
        if case.codecs {
            pair = pair.with_codecs(graph, &codecs(graph, &case.seeds), &HandheldStatus { load: 0.0 });
        }
        TierPrices {
            pair,
            pair_rtt: ms(case.rtt_ms.0),
            edge: EdgePrices {
                t_edge: (0..n).map(|i| 0.3 * at(i + 13)).collect(),
                overhead_s: 5e-5,
                relay: EdgeLink {
                    s_per_byte: (1.0 / r2, 0.5 / r2),
                    radio_w: (0.9, 0.5),
                    rtt: ms(case.rtt_ms.1),
                },
                direct: direct.map(|r| EdgeLink {
                    s_per_byte: (1.0 / r, 1.0 / r),
                    radio_w: (0.6, 0.4),
                    rtt: ms(case.rtt_ms.1 + 10),
                }),
            },
        }
    }

    /// Seeded encodings for two tensors in three (ratio 1–8×, 1 kB/s to
    /// 100 MB/s each way), half of them lossless, as the two-tier tests do.
    fn codecs(graph: &LayerGraph, seeds: &[u32]) -> LinkCodecs {
        let at = |i: usize| f64::from(seeds[i % seeds.len()] % 1000) / 1000.0;
        let per_tensor = (0..graph.tensors().len())
            .map(|t| {
                (0..t % 3)
                    .map(|k| CodecOption {
                        label: format!("codec{k}"),
                        ratio: 1.0 + 7.0 * at(t + 3 * k),
                        encode_bytes_per_s: 10f64.powf(3.0 + 5.0 * at(t + 5 * k + 1)),
                        decode_bytes_per_s: 10f64.powf(3.0 + 5.0 * at(t + 7 * k + 2)),
                        lossless: k == 0,
                    })
                    .collect()
            })
            .collect();
        LinkCodecs { per_tensor, slowdown: (2.0, 1.0) }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 + 1e-9 * a.abs().max(b.abs())
    }

    /// The fixed terms of a placement under `objective` (Latency or
    /// Energy): overheads of the busy tiers, RTTs of the used links.
    fn fixed(p: &Placement, prices: &TierPrices, objective: Objective) -> f64 {
        let n = p.watch().prefix_mask().len();
        let busy = |tier| (0..n).any(|v| p.tier(v) == tier);
        let (ow, op) = prices.pair.overhead_s;
        let (cw, cp) = prices.pair.compute_w;
        let w = prices.pair.weights;
        let at = |yes: bool, x: f64| if yes { x } else { 0.0 };
        let edge_rtt = match p.route() {
            Route::Relay => prices.edge.relay.rtt,
            Route::Direct => prices.edge.direct.map_or(Duration::ZERO, |l| l.rtt),
        };
        match objective {
            Objective::Latency => {
                at(busy(Tier::Wearable), ow)
                    + at(busy(Tier::Handheld), op)
                    + at(busy(Tier::Edge), prices.edge.overhead_s)
                    + at(
                        p.route() == Route::Relay && !p.watch().is_wearable_only(),
                        prices.pair_rtt.as_secs_f64(),
                    )
                    + at(p.uses_edge(), edge_rtt.as_secs_f64())
            }
            _ => {
                at(busy(Tier::Wearable), w.wearable * cw * ow)
                    + at(busy(Tier::Handheld), w.handheld * cp * op)
            }
        }
    }

    fn least(evals: &[TierEvaluation], f: impl Fn(&TierEvaluation) -> f64) -> f64 {
        evals.iter().map(f).fold(f64::INFINITY, f64::min)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// Ishikawa's layered min-cut against every nested pair, for each
        /// sum objective and both routes.
        #[test]
        fn layered_min_cut_equals_brute_force(ops in dag(), case in case(), lambda in 1e-3f64..1e3) {
            let model = random_dag(&ops);
            let g = model.graph();
            let p = prices(g, &case);
            let all = enumerate_placements(g, true, 100_000).expect("small DAG");
            for objective in [Objective::Latency, Objective::Energy, Objective::Lagrangian(lambda)] {
                for route in [Route::Relay, Route::Direct] {
                    let got = min_cut_placement(g, &p, objective, route, &Tier::ALL);
                    // Direct: the phone runs nothing, and watch-only is the one relay among them.
                    let pool: Vec<f64> = all
                        .iter()
                        .filter(|q| q.route() == route || (route == Route::Direct && q.watch() == q.near() && !q.uses_edge()))
                        .map(|q| sum_cost(g, &p, q, objective))
                        .collect();
                    let best = pool.iter().copied().fold(f64::INFINITY, f64::min);
                    let worst = pool.iter().copied().filter(|x| x.is_finite()).fold(0.0, f64::max);
                    let Some(got) = got else {
                        prop_assert!(route == Route::Direct && p.edge.direct.is_none());
                        continue;
                    };
                    prop_assert!(route == Route::Direct || got.route() == Route::Relay);
                    let cost = sum_cost(g, &p, &got, objective);
                    // Capacities are integers at 2^-40 of the largest price: allow that rounding.
                    prop_assert!(cost <= best + 1e-9 * worst, "{objective:?} {route:?}: min-cut {cost} vs brute force {best}");
                }
            }
        }

        /// Decisions against brute force over every placement: exact for
        /// the fastest and the least energy, PropT's semantics for a bound,
        /// and the full formulas equal to the sums plus the fixed terms.
        #[test]
        fn decisions_equal_brute_force(ops in dag(), case in case(), hint_ms in 1u64..150) {
            let model = random_dag(&ops);
            let g = model.graph();
            let p = prices(g, &case);
            let all = enumerate_placements(g, p.edge.direct.is_some(), 100_000).expect("small DAG");
            let evals: Vec<TierEvaluation> = all.iter().map(|q| evaluate_placement(g, &p, q)).collect();
            for (q, e) in all.iter().zip(&evals) {
                let latency = sum_cost(g, &p, q, Objective::Latency) + fixed(q, &p, Objective::Latency);
                let energy = sum_cost(g, &p, q, Objective::Energy) + fixed(q, &p, Objective::Energy);
                prop_assert!(close(e.latency_s, latency), "{q:?}: {} vs {latency}", e.latency_s);
                prop_assert!(close(e.energy_j, energy), "{q:?}: {} vs {energy}", e.energy_j);
            }
            let fastest = least(&evals, |e| e.latency_s);
            let thriftiest = least(&evals, |e| e.energy_j);
            let d = LatencyHint::Within(Duration::from_millis(hint_ms));
            for hint in [LatencyHint::Fastest, LatencyHint::EnergyFirst, d] {
                let got = decide_tiers(g, &p, hint, Mode::Single).expect("a decision");
                let e = &got.evaluation;
                prop_assert_eq!(e, &evaluate_placement(g, &p, &got.placement));
                match hint {
                    LatencyHint::Fastest => prop_assert!(close(e.latency_s, fastest), "{} vs {fastest}", e.latency_s),
                    LatencyHint::EnergyFirst => prop_assert!(close(e.energy_j, thriftiest), "{} vs {thriftiest}", e.energy_j),
                    LatencyHint::Within(d) => {
                        let d = d.as_secs_f64();
                        let meeting = least(&evals.iter().filter(|e| e.latency_s <= d).cloned().collect::<Vec<_>>(), |e| e.energy_j);
                        if meeting.is_finite() {
                            prop_assert!(e.latency_s <= d, "PropT {d}: got {} while a placement meets it", e.latency_s);
                            prop_assert!(e.energy_j >= meeting * (1.0 - 1e-9));
                            if got.optimal {
                                prop_assert!(close(e.energy_j, meeting), "claimed optimal: {} vs {meeting}", e.energy_j);
                            }
                        } else {
                            prop_assert!(close(e.latency_s, fastest));
                            prop_assert!(got.optimal);
                        }
                    }
                }
            }
            let stream = decide_tiers(g, &p, LatencyHint::Fastest, Mode::Stream).expect("a decision");
            let period = least(&evals, |e| e.stream_period_s);
            if stream.optimal {
                prop_assert!(close(stream.evaluation.stream_period_s, period));
            }
            prop_assert!(stream.evaluation.stream_period_s >= period * (1.0 - 1e-12));
        }

        /// With only some suffixes served on the edge, decisions against
        /// brute force over the placements that leave the edge idle or
        /// end at a served cut.
        #[test]
        fn served_cuts_bound_the_search_exactly(ops in dag(), case in case(), pick in proptest::collection::vec(any::<bool>(), 1..40)) {
            let model = random_dag(&ops);
            let g = model.graph();
            let p = TierPrices { edge: EdgePrices { direct: None, ..prices(g, &case).edge }, ..prices(g, &case) };
            let all = enumerate_placements(g, false, 100_000).expect("small DAG");
            let mut nears: Vec<Cut> = vec![];
            for q in all.iter().filter(|q| q.uses_edge()) {
                if !nears.contains(q.near()) {
                    nears.push(q.near().clone());
                }
            }
            let served: Vec<Cut> = nears.into_iter().zip(pick.iter().cycle()).filter(|(_, &k)| k).map(|(c, _)| c).collect();
            let allowed: Vec<TierEvaluation> = all
                .iter()
                .filter(|q| !q.uses_edge() || served.contains(q.near()))
                .map(|q| evaluate_placement(g, &p, q))
                .collect();
            for (hint, f) in [(LatencyHint::Fastest, (|e: &TierEvaluation| e.latency_s) as fn(&TierEvaluation) -> f64), (LatencyHint::EnergyFirst, |e: &TierEvaluation| e.energy_j)] {
                let got = decide_tiers_served(g, &p, hint, Mode::Single, &served).expect("a decision");
                prop_assert!(!got.placement.uses_edge() || served.contains(got.placement.near()), "an unserved S2");
                let best = least(&allowed, f);
                prop_assert!(close(f(&got.evaluation), best), "{hint:?}: {} vs brute force {best}", f(&got.evaluation));
            }
            let stream = decide_tiers_served(g, &p, LatencyHint::Fastest, Mode::Stream, &served).expect("a decision");
            prop_assert!(close(stream.evaluation.stream_period_s, least(&allowed, |e| e.stream_period_s)));
        }

        /// With the edge priced out, the three-tier search is today's
        /// two-tier partitioner: same optimum, no layer on the edge, and
        /// each two-tier placement priced exactly as the two-tier cut.
        #[test]
        fn without_an_edge_it_is_the_two_tier_cut(ops in dag(), case in case(), hint_ms in 1u64..150) {
            let model = random_dag(&ops);
            let g = model.graph();
            let p = TierPrices { edge: EdgePrices::absent(g), ..prices(g, &case) };
            let rtt = p.pair_rtt;
            for cut in enumerate_cuts(g, 100_000).expect("small DAG") {
                let two = evaluate(g, &p.pair, &cut, rtt);
                let three = evaluate_placement(g, &p, &Placement::two_tier(g, cut));
                prop_assert!(close(two.latency_s, three.latency_s), "{} vs {}", two.latency_s, three.latency_s);
                prop_assert!(close(two.stream_period_s, three.stream_period_s));
                prop_assert!(close(two.energy_j, three.energy_j), "{} vs {}", two.energy_j, three.energy_j);
            }
            let d = LatencyHint::Within(Duration::from_millis(hint_ms));
            for hint in [LatencyHint::Fastest, LatencyHint::EnergyFirst, d] {
                let cuts = min_cut_candidates(g, &p.pair, hint, rtt);
                let evals: Vec<_> = cuts.iter().map(|c| evaluate(g, &p.pair, c, rtt)).collect();
                let (i, _) = choose(&evals, hint, Mode::Single).expect("a choice");
                let two = &evals[i];
                let got = decide_tiers(g, &p, hint, Mode::Single).expect("a decision");
                prop_assert!(got.placement.as_two_tier().is_some(), "the edge runs {:?}", got.placement.layers(Tier::Edge));
                let three = &got.evaluation;
                match hint {
                    LatencyHint::Fastest => prop_assert!(close(three.latency_s, two.latency_s)),
                    LatencyHint::EnergyFirst => prop_assert!(close(three.energy_j, two.energy_j)),
                    LatencyHint::Within(d) => {
                        let d = d.as_secs_f64();
                        prop_assert_eq!(three.latency_s <= d, two.latency_s <= d);
                        if two.latency_s > d {
                            prop_assert!(close(three.latency_s, two.latency_s));
                        }
                    }
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

        /// Past the exhaustive limit, a stream's placement is chosen among
        /// candidates: never slower than the two-tier stream search's cut,
        /// never claimed optimal, and meeting PropT when that cut does.
        #[test]
        fn streams_never_pipeline_worse_than_two_tiers(ops in dag(), case in case(), hint_ms in 1u64..150) {
            let model = random_dag(&ops);
            let g = model.graph();
            let p = prices(g, &case);
            let all = enumerate_placements(g, p.edge.direct.is_some(), 100_000).expect("small DAG");
            let period = least(&all.iter().map(|q| evaluate_placement(g, &p, q)).collect::<Vec<_>>(), |e| e.stream_period_s);
            let two = stream::search(g, &p.pair, stream::StreamGoal::Period, &[], stream::STREAM_BUDGET);
            let two = evaluate(g, &p.pair, &two.cut.expect("a cut"), p.pair_rtt).stream_period_s;
            let d = Duration::from_millis(hint_ms);
            for hint in [LatencyHint::Fastest, LatencyHint::Within(d)] {
                let got = decide_within(g, &p, hint, Mode::Stream, 0).expect("a decision");
                let e = &got.evaluation;
                prop_assert!(!got.optimal || hint == LatencyHint::Fastest && close(e.stream_period_s, period));
                prop_assert!(e.stream_period_s >= period * (1.0 - 1e-12));
                match hint {
                    LatencyHint::Fastest => prop_assert!(e.stream_period_s <= two * (1.0 + 1e-9), "{} vs two tiers' {two}", e.stream_period_s),
                    _ => if two <= d.as_secs_f64() {
                        prop_assert!(e.stream_period_s <= d.as_secs_f64());
                    }
                }
                let json = serde_json::to_value(&got).expect("serializes");
                let layers = ["wearable", "handheld", "edge"].iter().map(|k| json["placement"][k].as_array().map_or(0, Vec::len)).sum::<usize>();
                prop_assert_eq!(layers, g.nodes().len());
            }
        }
    }

    /// Prices for the 3-chain where the watch is fast at layer 0, the
    /// phone at 1 and the edge at 2 (1 ms against 50 ms), links at 1 µs
    /// per byte, no RTT, no overheads.
    fn chain_prices() -> TierPrices {
        let ms = |xs: [f64; 3]| xs.iter().map(|x| x * 1e-3).collect::<Vec<f64>>();
        let mut pair = pair(ms([1.0, 50.0, 50.0]), ms([50.0, 1.0, 50.0]), (1e-6, 1e-6), (0.5, 0.5));
        pair.overhead_s = (0.0, 0.0);
        let link = EdgeLink { s_per_byte: (1e-6, 1e-6), radio_w: (0.9, 0.5), rtt: Duration::ZERO };
        TierPrices {
            pair,
            pair_rtt: Duration::ZERO,
            edge: EdgePrices { t_edge: ms([50.0, 50.0, 1.0]), overhead_s: 0.0, relay: link, direct: None },
        }
    }

    #[test]
    fn each_tier_wins_the_layer_it_is_fastest_at() {
        let model = chain3();
        let g = model.graph();
        let p = chain_prices();
        let got = decide_tiers(g, &p, LatencyHint::Fastest, Mode::Single).expect("a decision");
        assert_eq!((0..3).map(|v| got.placement.tier(v)).collect::<Vec<_>>(), Tier::ALL);
        assert!(got.optimal);
        // 3 ms of compute; t1 up the phone's link, t2 up the edge's, y down both: 4 × 32 B at 1 µs/B.
        let e = &got.evaluation;
        assert!(close(e.latency_s, 3e-3 + 4.0 * 32e-6), "{}", e.latency_s);
        assert_eq!((e.phone_link.up_bytes, e.phone_link.down_bytes), (32, 32));
        assert_eq!((e.edge_link.up_bytes, e.edge_link.down_bytes), (32, 32));
        assert!(close(e.stream_period_s, 1e-3));
        // Energy: watch 0.5·0.4·1 ms, phone 0.5·3·1 ms, the watch–phone radios
        // (0.5·(0.03 + 0.06) up, 0.5·(0.025 + 0.08) down), the phone's on the edge link.
        let radio = 32e-6 * (0.5 * (0.03 + 0.06) + 0.5 * (0.025 + 0.08) + 0.5 * 0.9 + 0.5 * 0.5);
        assert!(close(e.energy_j, 0.5 * 0.4 * 1e-3 + 0.5 * 3.0 * 1e-3 + radio), "{}", e.energy_j);
    }

    #[test]
    fn the_edge_costs_the_battery_only_its_radio() {
        let model = chain3();
        let g = model.graph();
        let p = chain_prices();
        let got = decide_tiers(g, &p, LatencyHint::EnergyFirst, Mode::Single).expect("a decision");
        // The raw input up both links, the output down both: cheaper than any compute here.
        assert_eq!(got.placement.layers(Tier::Edge), vec![0, 1, 2]);
        let radio = 32e-6 * (0.5 * (0.03 + 0.06) + 0.5 * (0.025 + 0.08) + 0.5 * 0.9 + 0.5 * 0.5);
        assert!(close(got.evaluation.energy_j, radio), "{}", got.evaluation.energy_j);
        // With the edge priced out, the phone's layer stays on the phone and the rest comes back.
        let none = TierPrices { edge: EdgePrices::absent(g), ..p };
        let got = decide_tiers(g, &none, LatencyHint::EnergyFirst, Mode::Single).expect("a decision");
        assert!(got.placement.as_two_tier().is_some());
    }

    #[test]
    fn a_fast_direct_link_skips_a_slow_phone_link() {
        let model = chain3();
        let g = model.graph();
        let mut p = chain_prices();
        // A 1 kB/s Bluetooth link against the watch's own Wi-Fi at 1 MB/s.
        p.pair.s_per_byte = (1e-3, 1e-3);
        p.edge.direct = Some(EdgeLink { s_per_byte: (1e-6, 1e-6), radio_w: (0.5, 0.3), rtt: Duration::ZERO });
        // The edge takes 20 ms (not 50) at layer 1: it runs layers 1 and 2 after the watch's layer 0.
        p.edge.t_edge[1] = 20e-3;
        let got = decide_tiers(g, &p, LatencyHint::Fastest, Mode::Single).expect("a decision");
        assert_eq!(got.placement.route(), Route::Direct);
        assert_eq!(got.placement.layers(Tier::Handheld), Vec::<usize>::new());
        assert_eq!(got.placement.layers(Tier::Edge), vec![1, 2]);
        assert_eq!(got.evaluation.phone_link, LinkUse::default());
        assert!(
            close(got.evaluation.latency_s, 1e-3 + 20e-3 + 1e-3 + 2.0 * 32e-6),
            "{}",
            got.evaluation.latency_s
        );
    }

    #[test]
    fn a_tensor_read_by_two_edge_layers_crosses_each_link_once() {
        // x → a → (b, c) → concat: a's output is read by two layers.
        let mut g = GraphBuilder::new();
        g.input("x", &[1, 8])
            .node("Relu", "a", &["x"], &["ta"])
            .node("Sigmoid", "b", &["ta"], &["tb"])
            .node("Relu", "c", &["ta"], &["tc"])
            .node("Concat", "d", &["tb", "tc"], &["y"])
            .int_attr("axis", 1)
            .output("y", &[1, 16]);
        let model = Model::from_bytes(&g.build(), &InputShapes::none()).expect("fork loads");
        let g = model.graph();
        let ms = |xs: [f64; 4]| xs.iter().map(|x| x * 1e-3).collect::<Vec<f64>>();
        let mut pair = pair(ms([1.0, 50.0, 50.0, 50.0]), ms([50.0; 4]), (1e-4, 1e-4), (0.5, 0.5));
        pair.overhead_s = (0.0, 0.0);
        let link = EdgeLink { s_per_byte: (1e-4, 1e-4), radio_w: (0.9, 0.5), rtt: Duration::ZERO };
        let edge =
            EdgePrices { t_edge: ms([5.0, 1.0, 1.0, 1.0]), overhead_s: 0.0, relay: link, direct: None };
        let p = TierPrices { pair, pair_rtt: Duration::ZERO, edge };
        let got = decide_tiers(g, &p, LatencyHint::Fastest, Mode::Single).expect("a decision");
        assert_eq!(
            (0..4).map(|v| got.placement.tier(v)).collect::<Vec<_>>(),
            [Tier::Wearable, Tier::Edge, Tier::Edge, Tier::Edge]
        );
        // ta (32 B) up both links once, y (64 B) down both, at 0.1 ms/B: 1 + 3 ms
        // of compute and 19.2 ms of links, against 27.2 ms for the edge alone
        // (which would win if ta were paid once per reader).
        let e = &got.evaluation;
        assert_eq!((e.phone_link.up_bytes, e.edge_link.up_bytes), (32, 32));
        assert_eq!((e.phone_link.down_bytes, e.edge_link.down_bytes), (64, 64));
        assert!(close(e.latency_s, 4e-3 + 19.2e-3), "{}", e.latency_s);
    }

    #[test]
    fn placements_must_nest_and_be_closed() {
        let model = chain3();
        let g = model.graph();
        let not_nested = Placement::new(g, vec![true, false, false], vec![false, false, false], Route::Relay);
        assert!(not_nested.is_err());
        let not_closed = Placement::new(g, vec![false, true, false], vec![true, true, false], Route::Relay);
        assert!(not_closed.is_err());
        let phone_busy = Placement::new(g, vec![true, false, false], vec![true, true, false], Route::Direct);
        assert!(phone_busy.is_err());
        let ok = Placement::new(g, vec![true, false, false], vec![true, true, false], Route::Relay)
            .expect("valid");
        assert_eq!(ok.layers(Tier::Handheld), vec![1]);
        // A chain of 3 has 10 monotone labelings (4 relayed with nothing on
        // the phone, of which 3 also direct when the edge is busy).
        assert_eq!(enumerate_placements(g, false, 100).map(|v| v.len()), Some(10));
        assert_eq!(enumerate_placements(g, true, 100).map(|v| v.len()), Some(13));
        assert_eq!(enumerate_placements(g, true, 12), None);
    }
}
