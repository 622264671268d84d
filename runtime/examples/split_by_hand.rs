//! Split execution by hand, then a partition decision: the layer DAG, a
//! cut, the wearable's prefix and the handheld's suffix checked against the
//! unsplit model, and the planner choosing a cut for a link and a latency hint.
//!
//! cargo build -q --workspace --bins --examples
//! target/debug/tandem-models gen mnist
//! target/debug/examples/split_by_hand models/cache/zoo/mnist.onnx

use std::time::Duration;

use tandem::device::DeviceProfile;
use tandem::energy::{ClusterEnergy, PowerModel};
use tandem::partition::{
    Conditions, EnergyWeights, HandheldStatus, LatencyHint, LinkEstimate, Mode, Planner, PlannerConfig, Side,
};
use tandem::predict::{ProfiledLatency, Scaled};
use tandem::{Cut, InputShapes, Model, SplitExecutor};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).unwrap_or_else(|| "models/cache/zoo/mnist.onnx".into());
    let model = Model::from_path(&path, &InputShapes::none())?;
    let graph = model.graph(); // layer DAG: nodes, tensors, edges, FLOPs
    let cut = Cut::at_flops_fraction(graph, 0.5); // or Cut::new(graph, prefix_nodes)?
    println!("{}", cut.describe(graph)); // crossing tensors and bytes

    let exec = SplitExecutor::new(model.clone());
    let plan = exec.plan(&cut)?; // built once, then cached
    let inputs = tandem::check::random_inputs(&model, 0)?;
    let up = plan.run_prefix(graph, &inputs)?; // wearable: the tensors to send
    let outputs = plan.run_suffix(graph, &up)?; // handheld: the model outputs
    let unsplit = tandem::split::full_plan(&model)?.run(graph, &inputs)?;
    for (name, want) in &unsplit {
        let d = tandem::check::diff(want, &outputs[name])?;
        println!(
            "'{name}': split vs unsplit max |diff| {:.2e} ({})",
            d.max_abs,
            if d.ok() { "ok" } else { "MISMATCH" }
        );
    }

    // Layer times measured on this host, scaled to each device's speed.
    let host = ProfiledLatency::measure(&model, &inputs)?;
    let (watch, phone) = (DeviceProfile::shipped("watch-w5")?, DeviceProfile::shipped("pixel-8-pro")?);
    let w_lat = Scaled { inner: host.clone(), slowdown: watch.slowdown };
    let h_lat = Scaled { inner: host, slowdown: phone.slowdown };
    let w_energy = ClusterEnergy::new(&watch, PowerModel::Analytical)?;
    let h_energy = ClusterEnergy::new(&phone, PowerModel::Analytical)?;
    let conditions = Conditions {
        link: LinkEstimate {
            up_bytes_per_s: 162_500.0,
            down_bytes_per_s: 162_500.0,
            rtt: Duration::from_millis(20),
        },
        status: HandheldStatus { load: 0.2 },
        weights: EnergyWeights { wearable: 0.7, handheld: 0.3 },
        hint: LatencyHint::Within(Duration::from_millis(50)),
        mode: Mode::Single,
    };
    let mut planner = Planner::new(PlannerConfig::default(), conditions);
    let wearable = Side { latency: &w_lat, energy: &w_energy };
    let handheld = Side { latency: &h_lat, energy: &h_energy };
    if let Some(d) = planner.poll_decision(graph, wearable, handheld)? {
        println!("decision: {}", serde_json::to_string(&d)?); // cut, T, E, stages, method, optimal, reason
    }
    Ok(())
}
