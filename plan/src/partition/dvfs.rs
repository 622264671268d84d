//! The cut chosen together with the wearable's cluster and frequency
//! (issue 17), with no I/O.
//!
//! Each setting of the wearable's profile, a cluster at one of its
//! operating points, scales the prefix's busy time by
//! `(f_inf / f) / relative_speed` against the profile's inference setting
//! (the one its layer times were measured or predicted at), and prices
//! compute at that cluster's power there: `C_eff·V(f)²·f` (analytical) or
//! `ε·f³` (approximate). The partition is decided at every setting, and
//! Algorithm 1 picks among the (cut, setting) pairs: the fastest at
//! PropT = 0, the least energy within PropT otherwise.

use serde::Serialize;

use super::{choose, decide_with, Decision, DecisionInput, Method, Side, Simplified};
use crate::device::{DeviceError, DeviceProfile, PowerModel};
use crate::energy::ClusterEnergy;
use crate::predict::Scaled;

/// Operating points tried per cluster: evenly spaced from f_min to f_max.
pub const OPERATING_POINTS: usize = 5;

/// One cluster at one frequency.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Setting {
    /// The cluster's name.
    pub cluster: String,
    /// Its frequency (Hz).
    pub f_hz: f64,
    /// Busy time here over busy time at the profile's inference setting.
    pub time_scale: f64,
}

/// Every setting of `profile`: [`OPERATING_POINTS`] frequencies of each
/// cluster (one when f_min = f_max), the inference setting among them.
pub fn settings(profile: &DeviceProfile) -> Result<Vec<Setting>, DeviceError> {
    profile.validate()?;
    let reference = profile.inference_cluster()?;
    let f_ref = profile.inference.f_hz;
    let mut out = vec![];
    for c in &profile.clusters {
        let n = if c.f_max_hz > c.f_min_hz { OPERATING_POINTS } else { 1 };
        let mut fs: Vec<f64> = (0..n)
            .map(|i| c.f_min_hz + (c.f_max_hz - c.f_min_hz) * i as f64 / (n - 1).max(1) as f64)
            .collect();
        if c.name == reference.name && !fs.iter().any(|f| (f - f_ref).abs() < 1.0) {
            fs.push(f_ref);
        }
        for f in fs {
            let time_scale = (f_ref / f) * (reference.relative_speed / c.relative_speed);
            out.push(Setting { cluster: c.name.clone(), f_hz: f, time_scale });
        }
    }
    Ok(out)
}

/// A partition decided with the settings.
#[derive(Clone, Debug, Serialize)]
pub struct DvfsDecision {
    /// The cluster and frequency the wearable's prefix runs at.
    pub setting: Setting,
    /// The handheld's for the suffix, when it was chosen too.
    pub handheld_setting: Option<Setting>,
    /// The partition at those settings.
    pub decision: Decision,
    /// Setting pairs compared.
    pub settings: usize,
}

/// The profiles whose settings are chosen, and the power model pricing them.
#[derive(Clone, Copy)]
pub struct Dvfs<'a> {
    /// The wearable's profile (its settings are always chosen).
    pub wearable: &'a DeviceProfile,
    /// The handheld's, when the suffix's setting is chosen too.
    pub handheld: Option<&'a DeviceProfile>,
    /// Analytical (`C_eff·V(f)²·f`) or approximate (`ε·f³`).
    pub power: PowerModel,
    /// The model's simplified DAG, computed once (`None`: when needed).
    pub simplified: Option<&'a Simplified>,
}

/// Why settings and a cut could not be decided together.
#[derive(Debug, thiserror::Error)]
pub enum DvfsError {
    /// A profile's operating points or energy cannot be priced.
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// A decision at one setting failed.
    #[error(transparent)]
    Decision(#[from] super::Error),
    /// The profiles offer no operating point.
    #[error("no setting to choose from")]
    NoSetting,
}

/// Decides the cut and the settings together. `input`'s sides hold the
/// layer times at each profile's inference setting; their energy models
/// are replaced by each setting's.
pub fn decide_dvfs(input: &DecisionInput, method: Method, dvfs: Dvfs) -> Result<DvfsDecision, DvfsError> {
    let wearable_settings = settings(dvfs.wearable)?;
    let handheld_settings: Vec<Option<Setting>> = match dvfs.handheld {
        Some(p) => settings(p)?.into_iter().map(Some).collect(),
        None => vec![None],
    };
    let mut decided: Vec<(Setting, Option<Setting>, Decision)> = vec![];
    for w in &wearable_settings {
        let w_latency = Scaled { inner: input.wearable.latency, slowdown: w.time_scale };
        let w_energy = ClusterEnergy::at(dvfs.wearable, &w.cluster, w.f_hz, dvfs.power)?;
        for h in &handheld_settings {
            let h_latency;
            let h_energy;
            let handheld = match (h, dvfs.handheld) {
                (Some(h), Some(p)) => {
                    h_latency = Scaled { inner: input.handheld.latency, slowdown: h.time_scale };
                    h_energy = ClusterEnergy::at(p, &h.cluster, h.f_hz, dvfs.power)?;
                    Side { latency: &h_latency, energy: &h_energy }
                }
                _ => input.handheld,
            };
            let at = DecisionInput {
                wearable: Side { latency: &w_latency, energy: &w_energy },
                handheld,
                ..*input
            };
            let d = decide_with(&at, method, dvfs.simplified)?;
            decided.push((w.clone(), h.clone(), d));
        }
    }
    let evaluations: Vec<_> = decided.iter().map(|(_, _, d)| d.evaluation.clone()).collect();
    let (i, why) = choose(&evaluations, input.hint, input.mode).ok_or(DvfsError::NoSetting)?;
    let n = decided.len();
    let (setting, handheld_setting, mut decision) = decided.swap_remove(i);
    let named = |s: &Setting| format!("{}@{:.0} MHz", s.cluster, s.f_hz / 1e6);
    decision.reason = format!(
        "{why} over {n} settings: wearable {}{}; {}",
        named(&setting),
        handheld_setting.as_ref().map_or(String::new(), |h| format!(", handheld {}", named(h))),
        decision.reason
    );
    Ok(DvfsDecision { setting, handheld_setting, decision, settings: n })
}
