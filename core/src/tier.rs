//! Three-part execution (SPEC 9): the watch runs the prefix of a cut S1, the
//! phone the middle S2 \ S1, an edge server the suffix of S2, and the phone
//! relays. Pure and synchronous; the edge's own call is the caller's.
//!
//! The watch's half is the two-tier prefix of S1 ([`crate::SplitPlan`]). The
//! edge serves the two-tier suffix of S2 as a standalone ONNX model
//! ([`suffix_onnx`]), deployed on a serving engine under a name derived
//! from its bytes ([`edge_model_name`]), so a name can only ever mean one
//! model. [`RelayPlan`] is the phone's part: it runs the middle on what
//! crossed S1, says which tensors to send to the edge (the up tensors of
//! S2, some of them forwarded unchanged from the watch), and assembles the
//! answer the watch expects for S1 from the middle's and the edge's outputs.

use std::collections::HashSet;

use prost::Message;
use sha2::{Digest, Sha256};

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::graph::{NodeId, Producer, TensorId};
use crate::model::Model;
use crate::split::{check_tensor, half_proto, Half, Values};
use crate::Cut;

/// The suffix of `cut` (the layers off the watch's side of it) as an ONNX
/// model: its inputs are the cut's up tensors, its outputs its down
/// tensors, with their concrete types and shapes. What an edge server
/// serves; fails when the suffix computes no model output.
pub fn suffix_onnx(model: &Model, cut: &Cut) -> Result<Vec<u8>> {
    let nodes = cut.suffix_nodes();
    if nodes.is_empty() || cut.down_tensors().is_empty() {
        return Err(Error::InvalidCut(format!(
            "cut {}: its suffix computes no model output, so there is nothing to serve",
            cut.key()
        )));
    }
    Ok(half_proto(model, &nodes, cut.up_tensors(), cut.down_tensors()).encode_to_vec())
}

/// The name a serving engine knows a suffix model by: `tandem-` and the
/// first 16 hex digits of the SHA-256 of its ONNX bytes ([`suffix_onnx`]).
/// Whoever holds the model computes it alike, and a stale deployment of
/// another model or cut cannot answer to it.
pub fn edge_model_name(suffix_onnx: &[u8]) -> String {
    let digest = Sha256::digest(suffix_onnx);
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("tandem-{hex}")
}

/// The cuts an edge serves the suffixes of by default: the cuts at each
/// `i / fractions` of the model's FLOPs (`i` in `0..fractions`,
/// [`Cut::at_flops_fraction`]), repeats dropped, those whose suffix
/// computes no model output left out. `tandem-models export-suffix` exports
/// these and the wearable asks the phone which of them the edge serves, so
/// both sides agree without a list.
pub fn edge_cuts(graph: &crate::LayerGraph, fractions: usize) -> Vec<Cut> {
    let mut out: Vec<Cut> = vec![];
    for i in 0..fractions.max(1) {
        let cut = Cut::at_flops_fraction(graph, i as f64 / fractions.max(1) as f64);
        if !cut.down_tensors().is_empty() && !cut.suffix_nodes().is_empty() && !out.contains(&cut) {
            out.push(cut);
        }
    }
    out
}

/// How many FLOPs fractions [`edge_cuts`] takes by default.
pub const EDGE_FRACTIONS: usize = 16;

/// The phone's part of a relayed three-tier frame: the middle layers of
/// S2 \ S1 on the tensors that crossed S1, then the tensors S2 sends to the
/// edge, then the answer for S1 from both.
#[derive(Debug, Clone)]
pub struct RelayPlan {
    watch: Cut,
    near: Cut,
    /// `None` when the phone runs no layer (it only forwards).
    middle: Option<Half>,
}

impl RelayPlan {
    /// The phone's part between the watch's cut `watch` (S1) and `near`
    /// (S2, the layers of the watch and the phone), its layers on `engine`.
    /// Fails unless S1 ⊆ S2 and S2 leaves the edge a layer that computes a
    /// model output.
    pub fn build(model: &Model, watch: &Cut, near: &Cut, engine: Engine) -> Result<RelayPlan> {
        let g = model.graph();
        if let Some(v) = (0..g.nodes().len()).find(|&v| watch.on_wearable(v) && !near.on_wearable(v)) {
            return Err(Error::InvalidCut(format!(
                "'{}' is on the watch (cut {}) but not before the edge's cut {}: the cuts must nest",
                g.nodes()[v].name,
                watch.key(),
                near.key()
            )));
        }
        if near.down_tensors().is_empty() {
            return Err(Error::InvalidCut(format!(
                "cut {}: the edge's part computes no model output",
                near.key()
            )));
        }
        let nodes: Vec<NodeId> =
            (0..g.nodes().len()).filter(|&v| near.on_wearable(v) && !watch.on_wearable(v)).collect();
        let in_middle = |t: TensorId| matches!(g.tensor(t).producer, Producer::Node(p) if nodes.contains(&p));
        // What the middle computes for others: S2's up tensors it makes, and
        // the model outputs it makes that the watch awaits.
        let mut outputs: Vec<TensorId> = Vec::new();
        for &t in near.up_tensors().iter().chain(watch.down_tensors()) {
            if in_middle(t) && !outputs.contains(&t) {
                outputs.push(t);
            }
        }
        let middle = if nodes.is_empty() || outputs.is_empty() {
            None
        } else {
            let consumed: HashSet<NodeId> = nodes.iter().copied().collect();
            let inputs: Vec<TensorId> = watch
                .up_tensors()
                .iter()
                .copied()
                .filter(|&t| g.tensor(t).consumers.iter().any(|c| consumed.contains(c)))
                .collect();
            Some(Half::build(model, &nodes, &inputs, &outputs, "the phone's middle part", engine)?)
        };
        Ok(RelayPlan { watch: watch.clone(), near: near.clone(), middle })
    }

    /// S1, the watch's cut.
    pub fn watch(&self) -> &Cut {
        &self.watch
    }

    /// S2, the cut whose suffix the edge runs.
    pub fn near(&self) -> &Cut {
        &self.near
    }

    /// The loaded middle part, if the phone runs any layer.
    pub fn middle(&self) -> Option<&Half> {
        self.middle.as_ref()
    }

    /// Runs the middle on `received` (the tensors that crossed S1) as a
    /// device `factor` times slower than this host: returns `received`
    /// with the middle's outputs added.
    pub fn run_middle(&self, model: &Model, received: &Values, factor: f64) -> Result<Values> {
        let g = model.graph();
        for &t in self.watch.up_tensors() {
            let name = &g.tensor(t).name;
            let v = received.get(name).ok_or_else(|| Error::MissingTensor(name.clone()))?;
            check_tensor(g, t, v)?;
        }
        let mut values = received.clone();
        if let Some(h) = &self.middle {
            values.extend(h.run_dilated(g, received, factor)?);
        }
        Ok(values)
    }

    /// The edge's inputs (S2's up tensors, in its order) from the middle's
    /// values.
    pub fn edge_request(&self, model: &Model, values: &Values) -> Result<Values> {
        let g = model.graph();
        self.near
            .up_tensors()
            .iter()
            .map(|&t| {
                let name = &g.tensor(t).name;
                values
                    .get(name)
                    .map(|v| (name.clone(), v.clone()))
                    .ok_or_else(|| Error::MissingTensor(name.clone()))
            })
            .collect()
    }

    /// Checks the edge's answer against S2's down tensors: each present,
    /// of the graph's type and shape. An edge server is not trusted to
    /// answer what was asked.
    pub fn check_edge_answer(&self, model: &Model, answer: &Values) -> Result<()> {
        let g = model.graph();
        for &t in self.near.down_tensors() {
            let name = &g.tensor(t).name;
            let v = answer.get(name).ok_or_else(|| Error::MissingTensor(name.clone()))?;
            check_tensor(g, t, v)?;
        }
        Ok(())
    }

    /// The answer the watch awaits for S1 (its down tensors), from the
    /// middle's values and the edge's checked answer.
    pub fn answer(&self, model: &Model, values: &Values, edge: &Values) -> Result<Values> {
        self.check_edge_answer(model, edge)?;
        let g = model.graph();
        self.watch
            .down_tensors()
            .iter()
            .map(|&t| {
                let name = &g.tensor(t).name;
                edge.get(name)
                    .or_else(|| values.get(name))
                    .map(|v| (name.clone(), v.clone()))
                    .ok_or_else(|| Error::MissingTensor(name.clone()))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::{diff, random_inputs};
    use crate::split::full_plan;
    use crate::{InputShapes, SplitExecutor};

    fn model() -> Model {
        Model::from_bytes(&tandem_models::tiny::tiny_mlp_onnx(), &InputShapes::none()).expect("tiny mlp")
    }

    #[test]
    fn every_nested_pair_of_the_tiny_mlp_runs_as_the_unsplit_model() {
        let model = model();
        let g = model.graph();
        let inputs = random_inputs(&model, 3).expect("inputs");
        let unsplit = full_plan(&model).expect("full").run(g, &inputs).expect("run");
        let cuts = crate::enumerate_cuts(g, 1000).expect("few cuts");
        let exec = SplitExecutor::new(model.clone());
        let mut pairs = 0;
        for s1 in &cuts {
            for s2 in &cuts {
                let nested = (0..g.nodes().len()).all(|v| !s1.on_wearable(v) || s2.on_wearable(v));
                if !nested || s2.down_tensors().is_empty() {
                    continue;
                }
                let relay = RelayPlan::build(&model, s1, s2, Engine::Tract).expect("relay plan");
                let up = exec.plan(s1).expect("plan").run_prefix(g, &inputs).expect("prefix");
                let values = relay.run_middle(&model, &up, 1.0).expect("middle");
                let request = relay.edge_request(&model, &values).expect("request");
                // The edge's model, loaded from its exported bytes alone.
                let bytes = suffix_onnx(&model, s2).expect("suffix");
                let edge_model = Model::from_bytes(&bytes, &InputShapes::none()).expect("suffix loads");
                let edge = full_plan(&edge_model)
                    .expect("edge plan")
                    .run(edge_model.graph(), &request)
                    .expect("edge");
                let answer = relay.answer(&model, &values, &edge).expect("answer");
                for (name, v) in &answer {
                    assert!(
                        diff(&unsplit[name], v).expect("diff").ok(),
                        "{name} at {} / {}",
                        s1.key(),
                        s2.key()
                    );
                }
                assert_eq!(answer.len(), s1.down_tensors().len());
                pairs += 1;
            }
        }
        assert!(pairs >= 3, "only {pairs} nested pairs");
    }

    #[test]
    fn cuts_that_do_not_nest_and_a_lying_edge_are_refused() {
        let model = model();
        let g = model.graph();
        let all = Cut::wearable_only(g);
        let none = Cut::handheld_only(g);
        let first = Cut::new(g, [0]).expect("cut");
        let e = RelayPlan::build(&model, &first, &none, Engine::Tract).expect_err("S1 ⊄ S2");
        assert!(e.to_string().contains("must nest"), "{e}");
        let e = RelayPlan::build(&model, &none, &all, Engine::Tract).expect_err("no edge part");
        assert!(e.to_string().contains("no model output"), "{e}");
        assert!(suffix_onnx(&model, &all).is_err());
        let relay = RelayPlan::build(&model, &none, &first, Engine::Tract).expect("relay");
        let inputs = random_inputs(&model, 1).expect("inputs");
        let values = relay.run_middle(&model, &inputs, 1.0).expect("middle");
        // An edge answering the wrong shape, or nothing.
        let e = relay.answer(&model, &values, &Values::new()).expect_err("missing");
        assert!(matches!(e, Error::MissingTensor(_)), "{e}");
        let out = &g.tensor(first.down_tensors()[0]).name;
        let wrong = Values::from([(out.clone(), crate::Tensor::from(1.0f32).into())]);
        let e = relay.answer(&model, &values, &wrong).expect_err("wrong shape");
        assert!(matches!(e, Error::TensorMismatch { .. }), "{e}");
    }

    #[test]
    fn default_edge_cuts_start_at_the_whole_model_and_never_repeat() {
        let model = model();
        let g = model.graph();
        let cuts = edge_cuts(g, EDGE_FRACTIONS);
        assert_eq!(cuts.first(), Some(&Cut::handheld_only(g)), "fraction 0: the edge runs everything");
        for (i, c) in cuts.iter().enumerate() {
            assert!(!cuts[..i].contains(c));
            assert!(suffix_onnx(&model, c).is_ok());
        }
        assert!(!cuts.contains(&Cut::wearable_only(g)));
    }

    #[test]
    fn edge_names_follow_the_bytes() {
        let model = model();
        let g = model.graph();
        let a = suffix_onnx(&model, &Cut::handheld_only(g)).expect("a");
        let b = suffix_onnx(&model, &Cut::new(g, [0]).expect("cut")).expect("b");
        assert_eq!(edge_model_name(&a), edge_model_name(&a.clone()));
        assert_ne!(edge_model_name(&a), edge_model_name(&b));
        assert_eq!(edge_model_name(&a).len(), "tandem-".len() + 16);
    }
}
