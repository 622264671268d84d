//! What the profiler measures and the partitioner prices: the link's
//! rates and round trip, the handheld's load, and how much each battery
//! counts.

use std::time::Duration;

use serde::Serialize;

/// What the profiler knows of the link.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct LinkEstimate {
    /// Wearable → handheld rate, bytes per second.
    pub up_bytes_per_s: f64,
    /// Handheld → wearable rate, bytes per second.
    pub down_bytes_per_s: f64,
    /// Round-trip time, paid once by any partition that offloads.
    pub rtt: Duration,
}

/// The handheld's reported status.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct HandheldStatus {
    /// CPU load in [0, 1]: the suffix runs at (1 − load) of the CPU
    /// (processor sharing), capped at 95% load.
    pub load: f64,
}

impl HandheldStatus {
    /// How much longer the suffix takes under this load: 1 / (1 − load).
    pub fn dilation(&self) -> f64 {
        1.0 / (1.0 - self.load.clamp(0.0, 0.95))
    }
}

/// Weights of each side's energy (SPEC 2: Ww, Wp).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct EnergyWeights {
    /// Ww: the wearable's energy weight.
    pub wearable: f64,
    /// Wp: the handheld's energy weight.
    pub handheld: f64,
}

impl Default for EnergyWeights {
    /// Both batteries count the same.
    fn default() -> Self {
        EnergyWeights { wearable: 0.5, handheld: 0.5 }
    }
}
