//! Suffix models for an edge server's model repository (`tandem-models
//! export-suffix`): for each cut, the layers past it as a standalone ONNX
//! model ([`tandem_core::tier::suffix_onnx`]) written as `DIR/NAME.onnx`,
//! `NAME` derived from its bytes ([`tandem_core::tier::edge_model_name`]),
//! the layout `scripts/oip_server.py` serves (every `NAME.onnx` as model
//! `NAME`), and an index, `DIR/tandem-suffixes.json`, of what each file is.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use tandem_core::tier::{edge_cuts, edge_model_name, suffix_onnx};
use tandem_core::{Cut, InputShapes, LayerGraph, Model, TensorId};

use crate::write_atomic;

/// The index's file name inside the repository.
pub const INDEX_FILE: &str = "tandem-suffixes.json";

/// A tensor of a suffix model.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SuffixTensor {
    /// The tensor's name (the full model's name for it).
    pub name: String,
    /// The Open Inference Protocol datatype (`FP32`, `INT64`, ...; tract's
    /// name for a type the protocol client cannot carry).
    pub datatype: String,
    /// The dimensions.
    pub shape: Vec<usize>,
}

/// One exported suffix, as the index records it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SuffixEntry {
    /// The full model's path, as given to the export (made absolute).
    pub model: PathBuf,
    /// The cut's key ([`Cut::key`]): the layers before it run elsewhere.
    pub cut: String,
    /// The model name the server knows it by (`tandem-` and 16 hex digits).
    pub name: String,
    /// Its inputs: the tensors crossing the cut toward the edge.
    pub inputs: Vec<SuffixTensor>,
    /// Its outputs: the model outputs it computes.
    pub outputs: Vec<SuffixTensor>,
}

/// The repository's index (`tandem-suffixes.json`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SuffixIndex {
    /// The exported suffixes, in the order they were first written.
    pub suffixes: Vec<SuffixEntry>,
}

impl SuffixIndex {
    /// The index in `repo`, empty when there is none yet.
    pub fn read(repo: &Path) -> Result<SuffixIndex> {
        let path = repo.join(INDEX_FILE);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).with_context(|| {
                format!("{} is not a suffix index (remove it to start over)", path.display())
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(SuffixIndex::default()),
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }

    /// Adds `entry`, replacing an entry of the same name or of the same
    /// model and cut (a model changed since: its old suffix's file stays,
    /// unlisted).
    pub fn merge(&mut self, entry: SuffixEntry) {
        let same = |e: &SuffixEntry| e.name == entry.name || (e.model == entry.model && e.cut == entry.cut);
        match self.suffixes.iter().position(same) {
            Some(i) => {
                self.suffixes[i] = entry;
                // A second match (another name for the same cut) goes.
                let name = self.suffixes[i].name.clone();
                let (model, cut) = (self.suffixes[i].model.clone(), self.suffixes[i].cut.clone());
                let mut k = 0;
                self.suffixes.retain(|e| {
                    k += 1;
                    k - 1 == i || !(e.name == name || (e.model == model && e.cut == cut))
                });
            }
            None => self.suffixes.push(entry),
        }
    }

    /// Writes the index into `repo` (atomically).
    pub fn write(&self, repo: &Path) -> Result<()> {
        let mut text = serde_json::to_vec_pretty(self).context("encoding the suffix index")?;
        text.push(b'\n');
        write_atomic(&repo.join(INDEX_FILE), &text)
    }
}

/// The protocol's datatype name of a tensor of `graph`.
fn datatype(graph: &LayerGraph, t: TensorId) -> String {
    let dt = graph.tensor(t).dtype;
    match tandem_core::wire::wire_type(dt) {
        Some(w) => tandem_oip::tensor::datatype_name(w).to_string(),
        None => format!("{dt:?}"),
    }
}

fn tensors(graph: &LayerGraph, ids: &[TensorId]) -> Vec<SuffixTensor> {
    ids.iter()
        .map(|&t| SuffixTensor {
            name: graph.tensor(t).name.clone(),
            datatype: datatype(graph, t),
            shape: graph.tensor(t).shape.clone(),
        })
        .collect()
}

/// Exports the suffixes of `model_path` (`.onnx` or `.tflite`) into
/// `repo`: at the cuts `cut_keys` ([`Cut::key`]s), or, when there are
/// none, at each `i / fractions` of its FLOPs ([`edge_cuts`]: repeats and
/// cuts whose suffix computes no model output left out). Writes
/// `repo/NAME.onnx` for each and merges them into the index. Returns the
/// entries written, in cut order.
pub fn export_suffixes(
    model_path: &Path,
    shapes: &InputShapes,
    repo: &Path,
    cut_keys: &[String],
    fractions: usize,
) -> Result<Vec<SuffixEntry>> {
    if fractions == 0 {
        bail!("--fractions must be at least 1");
    }
    let model =
        Model::from_path(model_path, shapes).with_context(|| format!("loading {}", model_path.display()))?;
    let graph = model.graph();
    let cuts: Vec<Cut> = if cut_keys.is_empty() {
        edge_cuts(graph, fractions)
    } else {
        let mut cuts: Vec<Cut> = Vec::new();
        for key in cut_keys {
            let cut = Cut::from_key(graph, key)
                .with_context(|| format!("cut '{key}' of {}", model_path.display()))?;
            if !cuts.contains(&cut) {
                cuts.push(cut);
            }
        }
        cuts
    };
    if cuts.is_empty() {
        bail!("{}: no cut leaves the edge a layer that computes a model output", model_path.display());
    }
    std::fs::create_dir_all(repo).with_context(|| format!("creating {}", repo.display()))?;
    let model_abs = std::path::absolute(model_path).unwrap_or_else(|_| model_path.to_path_buf());
    let mut index = SuffixIndex::read(repo)?;
    let mut written = Vec::with_capacity(cuts.len());
    for cut in &cuts {
        let bytes = suffix_onnx(&model, cut)
            .with_context(|| format!("the suffix of {} at cut {}", model_path.display(), cut.key()))?;
        let name = edge_model_name(&bytes);
        write_atomic(&repo.join(format!("{name}.onnx")), &bytes)?;
        let entry = SuffixEntry {
            model: model_abs.clone(),
            cut: cut.key().to_string(),
            name,
            inputs: tensors(graph, cut.up_tensors()),
            outputs: tensors(graph, cut.down_tensors()),
        };
        index.merge(entry.clone());
        written.push(entry);
    }
    index.write(repo)?;
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, cut: &str) -> SuffixEntry {
        SuffixEntry {
            model: PathBuf::from("/m.onnx"),
            cut: cut.into(),
            name: name.into(),
            inputs: vec![],
            outputs: vec![],
        }
    }

    #[test]
    fn merging_replaces_by_name_or_by_cut_and_keeps_order() {
        let mut index = SuffixIndex::default();
        index.merge(entry("tandem-a", "0"));
        index.merge(entry("tandem-b", "1"));
        index.merge(entry("tandem-a", "0"));
        assert_eq!(index.suffixes.len(), 2);
        // The model changed: cut 1's suffix has a new name.
        index.merge(entry("tandem-c", "1"));
        let names: Vec<&str> = index.suffixes.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["tandem-a", "tandem-c"]);
        // An entry matching two (one by name, one by cut) leaves one.
        index.merge(entry("tandem-a", "1"));
        let names: Vec<&str> = index.suffixes.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["tandem-a"]);
    }
}
