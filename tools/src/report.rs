//! Human-readable tables for the CLIs: the layer table and the per-layer
//! profile.

use std::fmt::Write;

use tandem::graph::LayerGraph;
use tandem::profile::Profile;

fn human(n: u64) -> String {
    match n {
        n if n >= 1_000_000_000 => format!("{:.2}G", n as f64 / 1e9),
        n if n >= 1_000_000 => format!("{:.2}M", n as f64 / 1e6),
        n if n >= 1_000 => format!("{:.1}k", n as f64 / 1e3),
        n => n.to_string(),
    }
}

/// One line per layer: id, name, kind, op, params, FLOPs, output shape and bytes.
pub fn layer_table(graph: &LayerGraph) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:>4}  {:<32} {:<10} {:<20} {:<34} {:>9} {:>10}  output",
        "id", "node", "kind", "op", "params", "flops", "out bytes"
    );
    for (i, n) in graph.nodes().iter().enumerate() {
        let shapes: Vec<String> = n.output_shapes.iter().map(|s| format!("{s:?}")).collect();
        let _ = writeln!(
            s,
            "{:>4}  {:<32} {:<10} {:<20} {:<34} {:>9} {:>10}  {}",
            i,
            truncate(&n.name, 32),
            n.kind.to_string(),
            truncate(&n.op, 20),
            truncate(&n.params.to_string(), 34),
            human(n.flops),
            human(n.output_bytes),
            shapes.join(" ")
        );
    }
    s
}

/// The DAG's size in one line.
pub fn graph_summary(graph: &LayerGraph) -> String {
    let inputs: Vec<String> = graph
        .inputs()
        .iter()
        .map(|&t| format!("{} {:?} {:?}", graph.tensor(t).name, graph.tensor(t).dtype, graph.tensor(t).shape))
        .collect();
    format!(
        "{} layers, {} edges, {} const nodes folded, {} FLOPs, {} chain; inputs: {}",
        graph.nodes().len(),
        graph.edge_count(),
        graph.const_node_count(),
        human(graph.total_flops()),
        if graph.is_chain() { "a" } else { "not a" },
        inputs.join(", ")
    )
}

/// Per-layer median times with FLOPs, then the additivity check.
pub fn profile_table(graph: &LayerGraph, profile: &Profile) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:>4}  {:<32} {:<10} {:<20} {:>9} {:>11} {:>7}",
        "id", "layer", "kind", "op", "flops", "median us", "share"
    );
    let total = profile.sum_of_nodes.as_secs_f64().max(1e-12);
    for (i, n) in graph.nodes().iter().enumerate() {
        let t = profile.per_layer[i];
        let cell = if t.is_zero() { "fused".to_string() } else { format!("{:.1}", t.as_secs_f64() * 1e6) };
        let _ = writeln!(
            s,
            "{:>4}  {:<32} {:<10} {:<20} {:>9} {:>11} {:>6.1}%",
            i,
            truncate(&n.name, 32),
            n.kind.to_string(),
            truncate(&n.op, 20),
            human(n.flops),
            cell,
            100.0 * t.as_secs_f64() / total
        );
    }
    let _ = writeln!(
        s,
        "unattributed (sources, consts, glue): {:.1} us",
        profile.unattributed.as_secs_f64() * 1e6
    );
    let _ = writeln!(
        s,
        "additivity: sum of per-node medians {:.3} ms vs whole-run median {:.3} ms: ratio {:.3} ({} runs)",
        profile.sum_of_nodes.as_secs_f64() * 1e3,
        profile.whole_run.as_secs_f64() * 1e3,
        profile.additivity_ratio(),
        profile.runs
    );
    s
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let head: String = s.chars().take(n - 1).collect();
        format!("{head}~")
    }
}
