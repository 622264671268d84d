//! The cluster-aware energy model (SPEC.md 3.4-3.5): the [`EnergyModel`]
//! trait the partitioner prices compute and radio time with, its
//! device-profile implementation [`ClusterEnergy`], and [`price_cut`], which
//! prices any [`Cut`] in time and energy on both devices.
//!
//! Compute energy is predicted busy time × the inference cluster's dynamic
//! power at its frequency (plus idle power if the profile asks); radio energy
//! is P_T × transmit time and P_R × receive time. Nothing here reads a clock
//! or a file.

use std::time::Duration;

use crate::device::{Cluster, DeviceError, DeviceProfile};
use crate::predict::LatencyModel;
use tandem_core::{Cut, LayerGraph};

pub use crate::device::PowerModel;

/// Prices a device's busy time and radio time in joules.
pub trait EnergyModel {
    /// A short name for reports.
    fn name(&self) -> String;

    /// Power while computing, in watts (dynamic, plus idle if configured).
    fn compute_power_w(&self) -> f64;

    /// Radio power while transmitting (P_T), in watts.
    fn transmit_power_w(&self) -> f64;

    /// Radio power while receiving (P_R), in watts.
    fn receive_power_w(&self) -> f64;

    /// Energy of `busy` time of inference compute, in joules.
    fn compute_energy_j(&self, busy: Duration) -> f64 {
        self.compute_power_w() * busy.as_secs_f64()
    }

    /// Energy of transmitting for `t`, in joules: P_T · t.
    fn transmit_energy_j(&self, t: Duration) -> f64 {
        self.transmit_power_w() * t.as_secs_f64()
    }

    /// Energy of receiving for `t`, in joules: P_R · t.
    fn receive_energy_j(&self, t: Duration) -> f64 {
        self.receive_power_w() * t.as_secs_f64()
    }
}

/// A device profile's energy model: one cluster at one frequency under
/// the analytical (`C_eff · V(f)² · f`) or approximate (`ε · f³`) power model.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterEnergy {
    device: String,
    cluster: String,
    f_hz: f64,
    model: PowerModel,
    /// Dynamic power of the cluster at `f_hz` under `model`, in watts.
    dynamic_w: f64,
    /// Idle power added while computing, in watts (0 unless the profile asks).
    idle_w: f64,
    tx_w: f64,
    rx_w: f64,
}

impl ClusterEnergy {
    /// The profile's default inference cluster and frequency under `model`.
    pub fn new(profile: &DeviceProfile, model: PowerModel) -> Result<ClusterEnergy, DeviceError> {
        Self::at(profile, &profile.inference.cluster, profile.inference.f_hz, model)
    }

    /// Cluster `cluster` of `profile` at `f_hz` (in Hz) under `model`.
    pub fn at(
        profile: &DeviceProfile,
        cluster: &str,
        f_hz: f64,
        model: PowerModel,
    ) -> Result<ClusterEnergy, DeviceError> {
        profile.validate()?;
        let c = profile.cluster(cluster)?;
        if !(f_hz.is_finite() && f_hz > 0.0) {
            return Err(DeviceError::Invalid {
                profile: profile.name.clone(),
                field: format!("clusters[{cluster}] frequency"),
                reason: format!("must be a positive finite number of Hz, got {f_hz}"),
            });
        }
        Ok(ClusterEnergy {
            device: profile.name.clone(),
            cluster: c.name.clone(),
            f_hz,
            model,
            dynamic_w: c.power_w(f_hz, model),
            idle_w: if profile.energy_includes_idle { profile.idle_power_w } else { 0.0 },
            tx_w: profile.radio.tx_w,
            rx_w: profile.radio.rx_w,
        })
    }

    /// The cluster that computes.
    pub fn cluster(&self) -> &str {
        &self.cluster
    }

    /// Its frequency, in Hz.
    pub fn f_hz(&self) -> f64 {
        self.f_hz
    }

    /// The power model in use.
    pub fn power_model(&self) -> PowerModel {
        self.model
    }

    /// Dynamic power of the cluster at its frequency, in watts (no idle).
    pub fn dynamic_power_w(&self) -> f64 {
        self.dynamic_w
    }
}

impl EnergyModel for ClusterEnergy {
    fn name(&self) -> String {
        format!("{}/{}@{}MHz/{}", self.device, self.cluster, self.f_hz / 1e6, self.model)
    }

    fn compute_power_w(&self) -> f64 {
        self.dynamic_w + self.idle_w
    }

    fn transmit_power_w(&self) -> f64 {
        self.tx_w
    }

    fn receive_power_w(&self) -> f64 {
        self.rx_w
    }
}

/// Energy of a workload of `cycles` CPU cycles on `cluster` at `f_hz`, in
/// joules: `C_eff · V(f)² · W` (analytical) or `ε · f² · W` (approximate).
pub fn energy_for_cycles(cluster: &Cluster, f_hz: f64, cycles: f64, model: PowerModel) -> f64 {
    cluster.energy_for_cycles_j(f_hz, cycles, model)
}

/// Application-level link throughput in each direction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkRates {
    /// Wearable → handheld, in bytes per second.
    pub up_bytes_per_s: f64,
    /// Handheld → wearable, in bytes per second.
    pub down_bytes_per_s: f64,
}

/// What one cut costs: the time of each stage and each device's energy.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CutPrice {
    /// The wearable's compute time (the prefix).
    pub t_wearable: Duration,
    /// Sending the crossing tensors up.
    pub t_up: Duration,
    /// The handheld's compute time (the suffix).
    pub t_handheld: Duration,
    /// Sending the outputs back down.
    pub t_down: Duration,
    /// Wearable compute energy, in joules.
    pub wearable_compute_j: f64,
    /// Wearable radio energy, in joules: P_T · t_up + P_R · t_down.
    pub wearable_radio_j: f64,
    /// Handheld compute energy, in joules.
    pub handheld_compute_j: f64,
    /// Handheld radio energy, in joules: P_R · t_up + P_T · t_down.
    pub handheld_radio_j: f64,
}

impl CutPrice {
    /// The price of stages whose times are known, predicted or measured:
    /// each side's compute energy over its busy time, and its radio's over
    /// the link time each way (the wearable sends up and receives down,
    /// the handheld the reverse). A frame's report prices its measured
    /// stages with this, the partitioner its predicted ones.
    pub fn of_stages(
        (t_wearable, t_up, t_handheld, t_down): (Duration, Duration, Duration, Duration),
        wearable: &dyn EnergyModel,
        handheld: &dyn EnergyModel,
    ) -> CutPrice {
        CutPrice {
            t_wearable,
            t_up,
            t_handheld,
            t_down,
            wearable_compute_j: wearable.compute_energy_j(t_wearable),
            wearable_radio_j: wearable.transmit_energy_j(t_up) + wearable.receive_energy_j(t_down),
            handheld_compute_j: handheld.compute_energy_j(t_handheld),
            handheld_radio_j: handheld.receive_energy_j(t_up) + handheld.transmit_energy_j(t_down),
        }
    }

    /// End-to-end latency of one inference: the four stages in sequence.
    pub fn total_latency(&self) -> Duration {
        self.t_wearable.saturating_add(self.t_up).saturating_add(self.t_handheld).saturating_add(self.t_down)
    }

    /// The wearable's energy, compute plus radio, in joules.
    pub fn wearable_j(&self) -> f64 {
        self.wearable_compute_j + self.wearable_radio_j
    }

    /// The handheld's energy, compute plus radio, in joules.
    pub fn handheld_j(&self) -> f64 {
        self.handheld_compute_j + self.handheld_radio_j
    }

    /// `ww · wearable energy + wp · handheld energy`, in joules (SPEC.md 4's
    /// battery weights).
    pub fn weighted_energy(&self, ww: f64, wp: f64) -> f64 {
        ww * self.wearable_j() + wp * self.handheld_j()
    }
}

/// Time to move `bytes` at `bytes_per_s`; saturates at [`Duration::MAX`]
/// when the rate is zero, negative or not finite and there is something to
/// send.
fn transfer_time(bytes: u64, bytes_per_s: f64) -> Duration {
    if bytes == 0 {
        return Duration::ZERO;
    }
    Duration::try_from_secs_f64(bytes as f64 / bytes_per_s).unwrap_or(Duration::MAX)
}

/// Prices `cut` of `graph`: each side's predicted compute time and energy,
/// and the link time and radio energy of the tensors that cross it.
pub fn price_cut(
    graph: &LayerGraph,
    cut: &Cut,
    wearable: (&dyn LatencyModel, &dyn EnergyModel),
    handheld: (&dyn LatencyModel, &dyn EnergyModel),
    link: LinkRates,
) -> CutPrice {
    let (w_lat, w_energy) = wearable;
    let (h_lat, h_energy) = handheld;
    let t_wearable = if cut.is_handheld_only() { Duration::ZERO } else { w_lat.predict_prefix(graph, cut) };
    let t_handheld = if cut.is_wearable_only() { Duration::ZERO } else { h_lat.predict_suffix(graph, cut) };
    let t_up = transfer_time(cut.up_bytes(), link.up_bytes_per_s);
    let t_down = transfer_time(cut.down_bytes(), link.down_bytes_per_s);
    CutPrice::of_stages((t_wearable, t_up, t_handheld, t_down), w_energy, h_energy)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{DeviceKind, InferenceSetting, Radio, Voltage};
    use crate::predict::NodeCosts;
    use tandem_core::{InputShapes, Model};

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-12)
    }

    /// One cluster: C_eff 1e-9 F, V 0.8-1.2 V over 0.5-1.5 GHz, ε 1e-27 W/Hz³;
    /// inference at 1 GHz (V = 1.0 V); idle 0.5 W; P_T 0.2 W, P_R 0.1 W.
    fn toy(include_idle: bool) -> DeviceProfile {
        DeviceProfile {
            name: "toy".into(),
            kind: DeviceKind::Wearable,
            description: String::new(),
            slowdown: 1.0,
            idle_power_w: 0.5,
            energy_includes_idle: include_idle,
            inference: InferenceSetting { cluster: "cpu".into(), f_hz: 1.0e9 },
            radio: Radio { tx_w: 0.2, rx_w: 0.1 },
            battery: None,
            clusters: vec![Cluster {
                name: "cpu".into(),
                cores: 1,
                cpus: vec![],
                f_min_hz: 5.0e8,
                f_max_hz: 1.5e9,
                voltage: Voltage::Range { v_min: 0.8, v_max: 1.2 },
                c_eff_farads: 1.0e-9,
                epsilon: 1.0e-27,
                relative_speed: 1.0,
            }],
        }
    }

    #[test]
    fn compute_energy_is_power_times_busy_time() {
        let e = ClusterEnergy::new(&toy(false), PowerModel::Analytical).expect("should succeed");
        // 1e-9 F · (1.0 V)² · 1e9 Hz = 1 W; 10 ms busy = 10 mJ.
        assert!(close(e.compute_power_w(), 1.0));
        assert!(close(e.compute_energy_j(Duration::from_millis(10)), 0.010));
        // With idle power: (1 + 0.5) W · 10 ms = 15 mJ.
        let e = ClusterEnergy::new(&toy(true), PowerModel::Analytical).expect("should succeed");
        assert!(close(e.compute_energy_j(Duration::from_millis(10)), 0.015));
        // Radio: 0.2 W · 50 ms = 10 mJ; 0.1 W · 50 ms = 5 mJ.
        assert!(close(e.transmit_energy_j(Duration::from_millis(50)), 0.010));
        assert!(close(e.receive_energy_j(Duration::from_millis(50)), 0.005));
    }

    #[test]
    fn the_two_power_models_differ_off_the_calibration_point() {
        let p = toy(false);
        // At 1.5 GHz (V = 1.2 V): analytical 1e-9 · 1.44 · 1.5e9 = 2.16 W;
        // approximate 1e-27 · 1.5e9³ = 3.375 W.
        let an = ClusterEnergy::at(&p, "cpu", 1.5e9, PowerModel::Analytical).expect("should succeed");
        let ap = ClusterEnergy::at(&p, "cpu", 1.5e9, PowerModel::Approximate).expect("should succeed");
        assert!(close(an.compute_power_w(), 2.16));
        assert!(close(ap.compute_power_w(), 3.375));
        assert!(ap.name().contains("approximate"), "{}", ap.name());
        // A quarter of the way from 0.5 to 1.5 GHz: V = 0.8 + 0.4 / 4 = 0.9 V.
        let c = &p.clusters[0];
        assert!(close(c.voltage_at(7.5e8), 0.9));
        // 2e9 cycles at 1 GHz: C·V²·W = 2 J; ε·f²·W = 2 J.
        assert!(close(energy_for_cycles(c, 1.0e9, 2.0e9, PowerModel::Analytical), 2.0));
        assert!(close(energy_for_cycles(c, 1.0e9, 2.0e9, PowerModel::Approximate), 2.0));
        // At 0.5 GHz (V = 0.8 V): 1e-9 · 0.64 · 1e9 = 0.64 J vs 1e-27 · 2.5e17 · 1e9 = 0.25 J.
        assert!(close(energy_for_cycles(c, 5.0e8, 1.0e9, PowerModel::Analytical), 0.64));
        assert!(close(energy_for_cycles(c, 5.0e8, 1.0e9, PowerModel::Approximate), 0.25));
        assert!(ClusterEnergy::at(&p, "gpu", 1.0e9, PowerModel::Analytical).is_err());
    }

    /// Every layer takes `per_node` on this device.
    struct PerNode(Duration);

    impl LatencyModel for PerNode {
        fn name(&self) -> String {
            "per-node".into()
        }

        fn node_costs(&self, graph: &LayerGraph) -> NodeCosts {
            NodeCosts { per_node_s: vec![self.0.as_secs_f64(); graph.nodes().len()], overhead_s: 0.0 }
        }

        // Exact durations, not sums of f64 seconds.
        fn predict_nodes(&self, _graph: &LayerGraph, nodes: &[bool]) -> Duration {
            self.0 * nodes.iter().filter(|&&b| b).count() as u32
        }
    }

    #[test]
    fn a_cut_is_priced_stage_by_stage() {
        let bytes = tandem_models::tiny::tiny_mlp_onnx();
        let model = Model::from_bytes(&bytes, &InputShapes::none()).expect("should succeed");
        let g = model.graph();
        // fc1 on the wearable: h[1,8] f32 = 32 bytes up, y[1,3] = 12 bytes down.
        let cut = Cut::new(g, [0]).expect("should succeed");
        assert_eq!((cut.up_bytes(), cut.down_bytes()), (32, 12));
        let w = ClusterEnergy::new(&toy(false), PowerModel::Analytical).expect("should succeed"); // 1 W, P_T 0.2, P_R 0.1
        let mut hp = toy(false);
        hp.clusters[0].c_eff_farads = 2.0e-9; // 2 W
        hp.radio = Radio { tx_w: 0.4, rx_w: 0.3 };
        let h = ClusterEnergy::new(&hp, PowerModel::Analytical).expect("should succeed");
        let (wl, hl) = (PerNode(Duration::from_millis(10)), PerNode(Duration::from_millis(5)));
        let link = LinkRates { up_bytes_per_s: 3200.0, down_bytes_per_s: 600.0 };
        let p = price_cut(g, &cut, (&wl, &w), (&hl, &h), link);
        assert_eq!(p.t_wearable, Duration::from_millis(10)); // 1 layer
        assert_eq!(p.t_handheld, Duration::from_millis(10)); // 2 layers at 5 ms
        assert_eq!(p.t_up, Duration::from_millis(10)); // 32 B at 3200 B/s
        assert_eq!(p.t_down, Duration::from_millis(20)); // 12 B at 600 B/s
        assert_eq!(p.total_latency(), Duration::from_millis(50));
        assert!(close(p.wearable_compute_j, 0.010)); // 1 W · 10 ms
        assert!(close(p.wearable_radio_j, 0.2 * 0.010 + 0.1 * 0.020)); // 4 mJ
        assert!(close(p.handheld_compute_j, 0.020)); // 2 W · 10 ms
        assert!(close(p.handheld_radio_j, 0.3 * 0.010 + 0.4 * 0.020)); // 11 mJ
        assert!(close(p.weighted_energy(1.0, 0.0), 0.014));
        assert!(close(p.weighted_energy(0.5, 0.5), (0.014 + 0.031) / 2.0));

        // Wearable-only: no link, no handheld.
        let all = price_cut(g, &Cut::wearable_only(g), (&wl, &w), (&hl, &h), link);
        assert_eq!(
            (all.t_wearable, all.t_up, all.t_handheld),
            (Duration::from_millis(30), Duration::ZERO, Duration::ZERO)
        );
        assert!(close(all.handheld_j(), 0.0) && close(all.wearable_j(), 0.030));
        // Handheld-only: the raw input x[1,4] (16 B) goes up.
        let none = price_cut(g, &Cut::handheld_only(g), (&wl, &w), (&hl, &h), link);
        assert_eq!((none.t_wearable, none.t_up), (Duration::ZERO, Duration::from_millis(5)));
        // A dead link makes crossing infinitely slow, not a panic.
        let dead = LinkRates { up_bytes_per_s: 0.0, down_bytes_per_s: 0.0 };
        assert_eq!(price_cut(g, &cut, (&wl, &w), (&hl, &h), dead).total_latency(), Duration::MAX);
    }
}
