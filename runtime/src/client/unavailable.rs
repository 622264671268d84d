//! Why a session measures no energy with the fuel gauge, or applies no
//! DVFS setting for real (it emulates it).

use crate::battery::GaugeError;
use crate::cpufreq::CpuFreqError;

/// Why the fuel gauge or cpufreq is not used; cloned into each frame's
/// report line.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Unavailable {
    /// `dvfs` is off: no setting is chosen, none applied.
    #[error("no setting is chosen without dvfs")]
    NoDvfs,
    /// The configuration names no cpufreq folder.
    #[error("no cpufreq folder configured")]
    NoCpuFreqDir,
    /// The watch is emulated on this host (dilation above 1): this host's
    /// clock is not the watch's.
    #[error("the watch is emulated (dilation {dilation}): so is its clock")]
    EmulatedWatch {
        /// The configured time dilation.
        dilation: f64,
    },
    /// This machine's cpufreq cannot be used, or the setting not applied.
    #[error(transparent)]
    CpuFreq(#[from] CpuFreqError),
    /// The configuration names no fuel gauge.
    #[error("no fuel gauge configured: energy is model-based only")]
    NoFuelGauge,
    /// The configured fuel gauge cannot be read.
    #[error("{0}; energy is model-based only")]
    Gauge(#[source] GaugeError),
}
