//! The battery as the kernel's fuel gauge reports it (sysfs `power_supply`).

use std::path::{Path, PathBuf};

use serde::Serialize;
use tandem_plan::device::BatteryInfo;

/// A battery's state as the kernel's fuel gauge reports it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BatteryStatus {
    /// The power-supply directory's name (`battery`, `BAT0`).
    pub supply: String,
    /// State of charge, in percent.
    pub capacity_pct: Option<f64>,
    /// `Charging`, `Discharging`, `Full`, ...
    pub status: Option<String>,
    /// Battery voltage, in volts (`voltage_now` is in µV).
    pub voltage_v: Option<f64>,
    /// Battery current, in amperes (`current_now` is in µA; its sign
    /// convention differs between drivers).
    pub current_a: Option<f64>,
}

impl BatteryStatus {
    /// Battery power `V · |I|`, in watts, when both are known.
    pub fn power_w(&self) -> Option<f64> {
        Some(self.voltage_v? * self.current_a?.abs())
    }
}

/// The first battery under `root/sys/class/power_supply`, if any (`root`
/// is `/` on a real device).
pub fn battery_status(root: &Path) -> Option<BatteryStatus> {
    read_battery(&root.join("sys/class/power_supply"), &mut vec![]).0
}

/// The first `Battery` supply: its live status and, from design values, the
/// profile's battery info.
pub fn read_battery(dir: &Path, notes: &mut Vec<String>) -> (Option<BatteryStatus>, Option<BatteryInfo>) {
    if !dir.is_dir() {
        notes.push(format!("no {}: no battery", dir.display()));
        return (None, None);
    }
    if let Some(s) = first_battery(dir) {
        let number = |file: &str, notes: &mut Vec<String>| -> Option<f64> {
            let path = s.join(file);
            let text = std::fs::read_to_string(&path).ok()?;
            match text.trim().parse::<f64>() {
                Ok(v) if v.is_finite() => Some(v),
                _ => {
                    notes.push(format!("ignored malformed {}: '{}'", path.display(), text.trim()));
                    None
                }
            }
        };
        let status = BatteryStatus {
            supply: s.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
            capacity_pct: number("capacity", notes),
            status: std::fs::read_to_string(s.join("status")).ok().map(|t| t.trim().to_string()),
            voltage_v: number("voltage_now", notes).map(|uv| uv / 1e6),
            current_a: number("current_now", notes).map(|ua| ua / 1e6),
        };
        notes.push(format!(
            "battery {}: {}% {}, {} V, {} A",
            s.display(),
            status.capacity_pct.map_or("?".into(), |v| v.to_string()),
            status.status.as_deref().unwrap_or("?"),
            status.voltage_v.map_or("?".into(), |v| format!("{v:.3}")),
            status.current_a.map_or("?".into(), |v| format!("{v:.3}")),
        ));
        // sysfs has no nominal voltage (only min/max design values).
        let capacity_mah = number("charge_full_design", notes).filter(|v| *v > 0.0).map(|uah| uah / 1e3);
        let info = capacity_mah.map(|c| BatteryInfo { capacity_mah: Some(c), nominal_voltage_v: None });
        return (Some(status), info);
    }
    notes.push(format!("no Battery supply in {}", dir.display()));
    (None, None)
}

/// The first supply (by name) in `dir` (a `power_supply` folder) whose
/// `type` is `Battery`.
pub fn first_battery(dir: &Path) -> Option<PathBuf> {
    let mut supplies: Vec<PathBuf> =
        std::fs::read_dir(dir).ok()?.filter_map(|e| e.ok()).map(|e| e.path()).collect();
    supplies.sort();
    supplies
        .into_iter()
        .find(|s| std::fs::read_to_string(s.join("type")).is_ok_and(|t| t.trim() == "Battery"))
}

/// Why the battery's fuel gauge cannot be read.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum GaugeError {
    /// No supply in the folder is of type `Battery`.
    #[error("no fuel gauge: no supply of type Battery in {}", dir.display())]
    NoBattery {
        /// The `power_supply` folder searched.
        dir: PathBuf,
    },
    /// The battery reports nothing a gauge reading can be made of.
    #[error(
        "no fuel gauge: {} has none of energy_now, charge_now + voltage_now, current_now + voltage_now",
        battery.display()
    )]
    NoReading {
        /// The battery's folder.
        battery: PathBuf,
    },
}

/// The battery's fuel gauge: found once, then read once per frame.
#[derive(Clone, Debug)]
pub struct FuelGauge {
    battery: PathBuf,
}

impl FuelGauge {
    /// The gauge of the first `Battery` supply in `dir` (a `power_supply`
    /// folder), if it can be read now; or why there is none.
    pub fn find(dir: &Path) -> Result<FuelGauge, GaugeError> {
        let battery = first_battery(dir).ok_or_else(|| GaugeError::NoBattery { dir: dir.to_path_buf() })?;
        let gauge = FuelGauge { battery };
        gauge.read()?;
        Ok(gauge)
    }

    /// One reading: `energy_now`, else `charge_now` with `voltage_now`,
    /// else `current_now` with `voltage_now`; or why there is none.
    pub fn read(&self) -> Result<tandem_plan::fuel::GaugeReading, GaugeError> {
        use tandem_plan::fuel::GaugeReading;
        let read = |file: &str| -> Option<f64> {
            let v: f64 = std::fs::read_to_string(self.battery.join(file)).ok()?.trim().parse().ok()?;
            v.is_finite().then_some(v)
        };
        if let Some(uwh) = read("energy_now") {
            return Ok(GaugeReading::Energy { uwh });
        }
        let uv = read("voltage_now");
        if let (Some(uah), Some(uv)) = (read("charge_now"), uv) {
            return Ok(GaugeReading::Charge { uah, uv });
        }
        if let (Some(ua), Some(uv)) = (read("current_now"), uv) {
            return Ok(GaugeReading::Power { ua, uv });
        }
        Err(GaugeError::NoReading { battery: self.battery.clone() })
    }

    /// Whether the supply says it is charging (then the gauge measures the
    /// charger, not the device).
    pub fn charging(&self) -> bool {
        std::fs::read_to_string(self.battery.join("status")).is_ok_and(|t| t.trim() == "Charging")
    }
}
