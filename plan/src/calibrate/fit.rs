//! Fitting C_eff and ε per cluster from measured dynamic power (SPEC.md 3.4).
//!
//! At each measured point, `C_eff(f) = P/(f·V²)` and `ε(f) = P/f³`; a cluster's
//! C_eff and ε are the means over its points. Every point is then predicted
//! back by the analytical model `P̂ = C_eff·V²·f` and the approximate model
//! `P̂ = ε·f³`, with the relative error `(P̂ − P)/P × 100%`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use super::{parse_frequency, CalibrateError};
use crate::device::DeviceProfile;

/// The header `calibrate fit` reads; columns may come in any order and extra
/// columns are ignored.
pub const MEASUREMENTS_HEADER: &str = "device,cluster,f_hz,v_volts,p_dyn_w";

/// One measured operating point of one cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct PowerPoint {
    /// The device, e.g. `pixel-8-pro`.
    pub device: String,
    /// The cluster, e.g. `big`.
    pub cluster: String,
    /// Cluster frequency, in Hz.
    pub f_hz: f64,
    /// Cluster supply voltage at `f_hz`, in volts.
    pub v_volts: f64,
    /// Measured dynamic power, in watts.
    pub p_dyn_w: f64,
    /// The 1-based line it came from (the header is line 1).
    pub line: u64,
}

impl PowerPoint {
    /// `C_eff(f) = P/(f·V²)`, in farads.
    pub fn c_eff(&self) -> f64 {
        self.p_dyn_w / (self.f_hz * self.v_volts * self.v_volts)
    }

    /// `ε(f) = P/f³`, in W/Hz³.
    pub fn epsilon(&self) -> f64 {
        self.p_dyn_w / (self.f_hz * self.f_hz * self.f_hz)
    }
}

/// A cluster's fitted constants and how well each model predicts its points.
/// Serializes to the JSON line `calibrate fit` prints.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClusterFit {
    /// The device.
    pub device: String,
    /// The cluster.
    pub cluster: String,
    /// Mean effective switched capacitance, in farads.
    pub c_eff: f64,
    /// Mean ε of the approximate model, in W/Hz³.
    pub epsilon: f64,
    /// Every measured point of the cluster, in input order.
    pub rows: Vec<FitRow>,
}

/// One measured point predicted back by both models.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FitRow {
    /// Frequency, in Hz.
    pub f_hz: f64,
    /// Voltage, in volts (in the table, not in the JSON line).
    #[serde(skip)]
    pub v_volts: f64,
    /// Measured dynamic power, in watts.
    pub p_w: f64,
    /// C_eff at this point alone, in farads (in the table, not in the JSON line).
    #[serde(skip)]
    pub c_eff_here: f64,
    /// ε at this point alone, in W/Hz³ (in the table, not in the JSON line).
    #[serde(skip)]
    pub epsilon_here: f64,
    /// `C_eff·V²·f` with the cluster's mean C_eff, in watts.
    pub p_analytical: f64,
    /// `(p_analytical − p_w)/p_w × 100`; `None` (JSON null) when `p_w` is 0.
    pub err_analytical_pct: Option<f64>,
    /// `ε·f³` with the cluster's mean ε, in watts.
    pub p_approx: f64,
    /// `(p_approx − p_w)/p_w × 100`; `None` (JSON null) when `p_w` is 0.
    pub err_approx_pct: Option<f64>,
}

/// Parses a measurements CSV with the columns of [`MEASUREMENTS_HEADER`].
/// Lines starting with `#` are comments. Frequencies may carry a unit
/// (`1.8GHz`). A bad row is refused with its line number: a missing field, a
/// non-number, `f_hz <= 0`, `v_volts <= 0`, `p_dyn_w < 0` or an empty name.
pub fn parse_measurements(text: &str) -> Result<Vec<PowerPoint>, CalibrateError> {
    let table = Table::parse(text, MEASUREMENTS_HEADER)?;
    let mut points = Vec::new();
    for row in &table.rows {
        let device = row.text("device")?;
        let cluster = row.text("cluster")?;
        let f_hz = parse_frequency(row.field("f_hz")?).map_err(|e| row.bad(format!("f_hz: {e}")))?;
        let v_volts = row.number("v_volts")?;
        if v_volts <= 0.0 {
            return Err(row.bad(format!("v_volts must be above 0, got {v_volts}")));
        }
        let p_dyn_w = row.number("p_dyn_w")?;
        if p_dyn_w < 0.0 {
            return Err(row.bad(format!("p_dyn_w must not be negative, got {p_dyn_w}")));
        }
        points.push(PowerPoint { device, cluster, f_hz, v_volts, p_dyn_w, line: row.line });
    }
    Ok(points)
}

/// Fits every (device, cluster) in `points`, in order of first appearance.
pub fn fit(points: &[PowerPoint]) -> Vec<ClusterFit> {
    let mut keys: Vec<(&str, &str)> = Vec::new();
    for p in points {
        if !keys.contains(&(p.device.as_str(), p.cluster.as_str())) {
            keys.push((&p.device, &p.cluster));
        }
    }
    keys.into_iter()
        .map(|(device, cluster)| {
            let mine: Vec<&PowerPoint> =
                points.iter().filter(|p| p.device == device && p.cluster == cluster).collect();
            fit_cluster(device, cluster, &mine)
        })
        .collect()
}

fn fit_cluster(device: &str, cluster: &str, points: &[&PowerPoint]) -> ClusterFit {
    let n = points.len() as f64;
    let c_eff = points.iter().map(|p| p.c_eff()).sum::<f64>() / n;
    let epsilon = points.iter().map(|p| p.epsilon()).sum::<f64>() / n;
    let rows = points
        .iter()
        .map(|p| {
            let p_analytical = c_eff * p.v_volts * p.v_volts * p.f_hz;
            let p_approx = epsilon * p.f_hz * p.f_hz * p.f_hz;
            FitRow {
                f_hz: p.f_hz,
                v_volts: p.v_volts,
                p_w: p.p_dyn_w,
                c_eff_here: p.c_eff(),
                epsilon_here: p.epsilon(),
                p_analytical,
                err_analytical_pct: relative_error_pct(p_analytical, p.p_dyn_w),
                p_approx,
                err_approx_pct: relative_error_pct(p_approx, p.p_dyn_w),
            }
        })
        .collect();
    ClusterFit { device: device.into(), cluster: cluster.into(), c_eff, epsilon, rows }
}

/// `(predicted − measured)/measured × 100`, or `None` when nothing was measured.
pub fn relative_error_pct(predicted: f64, measured: f64) -> Option<f64> {
    (measured != 0.0).then(|| (predicted - measured) / measured * 100.0)
}

/// The human table: one line per point, then each cluster's means.
pub fn fit_table(fits: &[ClusterFit]) -> String {
    let pct = |e: Option<f64>| e.map_or_else(|| "-".to_string(), |e| format!("{e:+.2}%"));
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<14} {:<8} {:>11} {:>6} {:>9} {:>11} {:>11} {:>9} {:>9} {:>9} {:>9}",
        "device", "cluster", "f_hz", "V", "P_W", "C_eff(f)", "eps(f)", "P_an_W", "err_an", "P_ap_W", "err_ap"
    );
    for fit in fits {
        for r in &fit.rows {
            let _ = writeln!(
                out,
                "{:<14} {:<8} {:>11.4e} {:>6.3} {:>9.4} {:>11.4e} {:>11.4e} {:>9.4} {:>9} {:>9.4} {:>9}",
                fit.device,
                fit.cluster,
                r.f_hz,
                r.v_volts,
                r.p_w,
                r.c_eff_here,
                r.epsilon_here,
                r.p_analytical,
                pct(r.err_analytical_pct),
                r.p_approx,
                pct(r.err_approx_pct),
            );
        }
        let _ = writeln!(
            out,
            "{:<14} {:<8} mean C_eff = {:.4e} F, mean eps = {:.4e} W/Hz^3 over {} points",
            fit.device,
            fit.cluster,
            fit.c_eff,
            fit.epsilon,
            fit.rows.len()
        );
    }
    out
}

/// How a device profile file is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProfileFormat {
    /// TOML (`.toml`): edited in place, keeping its comments.
    Toml,
    /// JSON (`.json`): rewritten whole, pretty-printed.
    Json,
}

impl ProfileFormat {
    /// The format a path's extension names, if any.
    pub fn of_path(path: &Path) -> Option<ProfileFormat> {
        match path.extension()?.to_str()?.to_ascii_lowercase().as_str() {
            "toml" => Some(ProfileFormat::Toml),
            "json" => Some(ProfileFormat::Json),
            _ => None,
        }
    }
}

/// A device profile with fitted constants stored in it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProfileUpdate {
    /// The new file content.
    pub text: String,
    /// The updated profile, validated.
    pub profile: DeviceProfile,
    /// The profile's clusters that got a fitted C_eff and ε.
    pub updated: Vec<String>,
    /// Fitted clusters the profile does not have.
    pub missing: Vec<String>,
    /// The profile's clusters that the measurements do not cover (left as they were).
    pub not_fitted: Vec<String>,
    /// Whether the file's comments survived: false when a TOML file had a shape
    /// the in-place edit does not handle and was rewritten whole.
    pub comments_kept: bool,
}

/// Stores fitted `c_eff_farads` and `epsilon` in the profile `text`, matching
/// clusters by name (ASCII case ignored, so `little` fits `LITTLE`). When the
/// measurements hold one device, its fits apply whatever the profile's name;
/// when they hold several, only the device named like the profile applies.
/// A TOML profile is edited in place (`toml_edit`): each updated value is
/// replaced, the comment block right above it becomes `# calibrated: ...`
/// naming `source`, and everything else stays as written.
pub fn update_profile(
    text: &str,
    format: ProfileFormat,
    fits: &[ClusterFit],
    source: &str,
) -> Result<ProfileUpdate, CalibrateError> {
    let mut profile = match format {
        ProfileFormat::Toml => DeviceProfile::from_toml_str(text)?,
        ProfileFormat::Json => DeviceProfile::from_json_str(text)?,
    };
    let devices: BTreeSet<&str> = fits.iter().map(|f| f.device.as_str()).collect();
    let fits: Vec<&ClusterFit> = if devices.len() <= 1 {
        fits.iter().collect()
    } else {
        let mine: Vec<&ClusterFit> = fits.iter().filter(|f| f.device == profile.name).collect();
        if mine.is_empty() {
            return Err(CalibrateError::OtherDevice {
                profile: profile.name.clone(),
                devices: devices.into_iter().collect::<Vec<_>>().join(", "),
            });
        }
        mine
    };
    let mut updated = Vec::new();
    let mut missing = Vec::new();
    let mut values = BTreeMap::new();
    for fit in fits {
        match profile.clusters.iter_mut().find(|c| c.name.eq_ignore_ascii_case(&fit.cluster)) {
            Some(c) => {
                c.c_eff_farads = fit.c_eff;
                c.epsilon = fit.epsilon;
                updated.push(c.name.clone());
                values.insert(c.name.clone(), (fit.c_eff, fit.epsilon, fit.rows.len()));
            }
            None => missing.push(fit.cluster.clone()),
        }
    }
    profile.validate()?;
    let not_fitted =
        profile.clusters.iter().map(|c| c.name.clone()).filter(|n| !values.contains_key(n)).collect();
    let (text, comments_kept) = match format {
        ProfileFormat::Json => {
            let json = serde_json::to_string_pretty(&profile)
                .map_err(|e| CalibrateError::BadConfig(e.to_string()))?;
            (json + "\n", true)
        }
        ProfileFormat::Toml => {
            let edited = edit_toml(text, &values, source)
                .filter(|t| DeviceProfile::from_toml_str(t).is_ok_and(|p| p == profile));
            match edited {
                Some(t) => (t, true),
                None => (profile.to_toml_string()?, false),
            }
        }
    };
    Ok(ProfileUpdate { text, profile, updated, missing, not_fitted, comments_kept })
}

/// Replaces `c_eff_farads` and `epsilon` in the `[[clusters]]` tables named in
/// `values` (name → C_eff, ε, points), with `toml_edit` so that everything
/// else (comments, layout, number spellings) stays as written; each replaced
/// key's comment block becomes `# calibrated: ...`. `None` when the text is
/// not TOML or a named cluster is missing.
fn edit_toml(text: &str, values: &BTreeMap<String, (f64, f64, usize)>, source: &str) -> Option<String> {
    let mut doc: toml_edit::DocumentMut = text.parse().ok()?;
    let clusters = doc.get_mut("clusters")?.as_array_of_tables_mut()?;
    let mut done = 0;
    for table in clusters.iter_mut() {
        let Some(name) = table.get("name").and_then(|v| v.as_str()) else { continue };
        let Some(&(c_eff, epsilon, points)) = values.get(name) else { continue };
        let plural = if points == 1 { "" } else { "s" };
        for (key, what, v) in [("c_eff_farads", "C_eff", c_eff), ("epsilon", "epsilon", epsilon)] {
            let value: toml_edit::Value = format!("{v:e}").parse().ok()?;
            table.insert(key, toml_edit::Item::Value(value));
            let mut k = table.key_mut(key)?;
            k.leaf_decor_mut()
                .set_prefix(format!("# calibrated: mean {what} over {points} point{plural} of {source}\n"));
        }
        done += 1;
    }
    (done == values.len()).then(|| doc.to_string())
}

/// A CSV read with named columns: the small shared reader behind
/// [`parse_measurements`] and the trace parser.
pub(crate) struct Table {
    pub(crate) rows: Vec<Row>,
}

/// One data row with its line number and the header's column positions.
pub(crate) struct Row {
    pub(crate) line: u64,
    fields: Vec<String>,
    columns: std::rc::Rc<Vec<(String, usize)>>,
}

impl Table {
    /// Reads `text` (header first, `#` comments, fields trimmed) and checks that
    /// every column of `expected` (comma-separated) is in the header.
    pub(crate) fn parse(text: &str, expected: &'static str) -> Result<Table, CalibrateError> {
        if text.trim().is_empty() {
            return Err(CalibrateError::Empty {
                what: format!("the file is empty; expected the header {expected}"),
            });
        }
        let mut reader = csv::ReaderBuilder::new()
            .trim(csv::Trim::All)
            .flexible(true)
            .comment(Some(b'#'))
            .from_reader(text.as_bytes());
        let header = reader.headers().map_err(|e| csv_error(text, &e, 1))?.clone();
        let mut columns = Vec::new();
        for column in expected.split(',') {
            let Some(index) = header.iter().position(|h| h == column) else {
                return Err(CalibrateError::MissingColumn {
                    column: column.into(),
                    header: header.iter().collect::<Vec<_>>().join(","),
                    expected,
                });
            };
            columns.push((column.to_string(), index));
        }
        let columns = std::rc::Rc::new(columns);
        let mut rows = Vec::new();
        for record in reader.records() {
            let record = record.map_err(|e| csv_error(text, &e, 0))?;
            // csv's own line count skips comment lines; count newlines instead.
            let line = record.position().map_or(0, |p| line_at(text, p.byte()));
            if record.iter().all(str::is_empty) {
                continue;
            }
            rows.push(Row {
                line,
                fields: record.iter().map(String::from).collect(),
                columns: columns.clone(),
            });
        }
        if rows.is_empty() {
            return Err(CalibrateError::Empty { what: "no data rows after the header".into() });
        }
        Ok(Table { rows })
    }
}

/// The 1-based line of the record that starts at or after a byte offset: csv
/// reports the offset before the blank and comment lines it skipped.
fn line_at(text: &str, byte: u64) -> u64 {
    let start = usize::try_from(byte).unwrap_or(usize::MAX).min(text.len());
    let mut line = 1 + text.as_bytes()[..start].iter().filter(|&&b| b == b'\n').count() as u64;
    for l in text.get(start..).unwrap_or("").lines() {
        if !(l.trim().is_empty() || l.starts_with('#')) {
            break;
        }
        line += 1;
    }
    line
}

fn csv_error(text: &str, e: &csv::Error, fallback_line: u64) -> CalibrateError {
    let line = e.position().map_or(fallback_line, |p| line_at(text, p.byte()));
    CalibrateError::BadRow { line, reason: format!("unreadable CSV: {e}") }
}

impl Row {
    /// The trimmed field of `column` (which must be one of the expected ones).
    pub(crate) fn field(&self, column: &str) -> Result<&str, CalibrateError> {
        let index = self.columns.iter().find(|(c, _)| c == column).map(|(_, i)| *i);
        index
            .and_then(|i| self.fields.get(i))
            .map(String::as_str)
            .ok_or_else(|| self.bad(format!("missing field '{column}'")))
    }

    /// A field that must not be empty.
    pub(crate) fn text(&self, column: &str) -> Result<String, CalibrateError> {
        let value = self.field(column)?;
        if value.is_empty() {
            return Err(self.bad(format!("'{column}' is empty")));
        }
        Ok(value.to_string())
    }

    /// A field that must be a finite number.
    pub(crate) fn number(&self, column: &str) -> Result<f64, CalibrateError> {
        let value = self.field(column)?;
        let x: f64 = value.parse().map_err(|_| self.bad(format!("{column} '{value}' is not a number")))?;
        if !x.is_finite() {
            return Err(self.bad(format!("{column} '{value}' is not finite")));
        }
        Ok(x)
    }

    /// A [`CalibrateError::BadRow`] at this row's line.
    pub(crate) fn bad(&self, reason: String) -> CalibrateError {
        CalibrateError::BadRow { line: self.line, reason }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 * a.abs().max(b.abs())
    }

    fn fit_text(text: &str) -> Vec<ClusterFit> {
        fit(&parse_measurements(text).expect("test value"))
    }

    #[test]
    fn one_point_gives_exact_constants_and_zero_error() {
        let fits = fit_text("device,cluster,f_hz,v_volts,p_dyn_w\nd,c,1e9,1.0,1.0\n");
        assert_eq!(fits.len(), 1);
        let f = &fits[0];
        assert!(close(f.c_eff, 1e-9), "{}", f.c_eff);
        assert!(close(f.epsilon, 1e-27), "{}", f.epsilon);
        let r = &f.rows[0];
        assert!(close(r.p_analytical, 1.0) && close(r.p_approx, 1.0));
        assert!(r.err_analytical_pct.expect("test value").abs() < 1e-10);
        assert!(r.err_approx_pct.expect("test value").abs() < 1e-10);
    }

    #[test]
    fn two_points_average_and_err_as_computed_by_hand() {
        // C_eff: 1e-9 and 3/(2e9) = 1.5e-9, mean 1.25e-9 → P̂ 1.25 (+25%) and 2.5 (−16.67%).
        // ε: 1e-27 and 3/8e27 = 0.375e-27, mean 0.6875e-27 → P̂ 0.6875 (−31.25%) and 5.5 (+83.33%).
        let fits = fit_text("device,cluster,f_hz,v_volts,p_dyn_w\nd,c,1GHz,1,1\nd,c,2e9,1,3\n");
        let f = &fits[0];
        assert!(close(f.c_eff, 1.25e-9));
        assert!(close(f.epsilon, 0.6875e-27));
        let [a, b] = &f.rows[..] else { panic!("two rows") };
        assert!(close(a.p_analytical, 1.25) && close(b.p_analytical, 2.5));
        assert!(close(a.err_analytical_pct.expect("test value"), 25.0));
        assert!(close(b.err_analytical_pct.expect("test value"), -50.0 / 3.0));
        assert!(close(a.p_approx, 0.6875) && close(b.p_approx, 5.5));
        assert!(close(a.err_approx_pct.expect("test value"), -31.25));
        assert!(close(b.err_approx_pct.expect("test value"), 250.0 / 3.0));
    }

    #[test]
    fn pixel_8_pro_big_cluster_breaks_the_cubic_model() {
        // Tensor G3 big cluster (SPEC.md 3.4): 402 MHz at 0.55 V, 2.37 GHz at 1.13 V,
        // with a true C_eff of 1 nF. The analytical model is exact; ε·f³ is not,
        // because V does not scale with f.
        let text = include_str!("../../tests/fixtures/calibrate/pixel-8-pro-big.csv");
        let fits = fit_text(text);
        let f = &fits[0];
        assert_eq!((f.device.as_str(), f.cluster.as_str()), ("pixel-8-pro", "big"));
        assert!(close(f.c_eff, 1e-9), "{}", f.c_eff);
        for r in &f.rows {
            assert!(r.err_analytical_pct.expect("test value").abs() < 1e-9, "{r:?}");
        }
        // With k = ε(f_min)/ε(f_max) = (V_min·f_max / (V_max·f_min))², the mean ε
        // errs by (k − 1)/2 at f_max and (1/k − 1)/2 at f_min.
        let k = ((0.55_f64 * 2.37e9) / (1.13 * 4.02e8)).powi(2);
        let (lo, hi) = (&f.rows[0], &f.rows[1]);
        assert!(close(hi.err_approx_pct.expect("test value"), (k - 1.0) / 2.0 * 100.0));
        assert!(close(lo.err_approx_pct.expect("test value"), (1.0 / k - 1.0) / 2.0 * 100.0));
        assert!(hi.err_approx_pct.expect("test value") > 350.0, "several hundred percent: {hi:?}");
        assert!(close(f.epsilon, (lo.epsilon_here + hi.epsilon_here) / 2.0));
    }

    #[test]
    fn clusters_are_grouped_in_order_and_json_has_the_documented_shape() {
        let text = "device,cluster,f_hz,v_volts,p_dyn_w\n\
                    d,big,1e9,1,1\nd,little,1e9,1,0.5\nd,big,2e9,1,3\ne,big,1e9,1,1\n";
        let fits = fit_text(text);
        let names: Vec<_> = fits.iter().map(|f| format!("{}/{}", f.device, f.cluster)).collect();
        assert_eq!(names, ["d/big", "d/little", "e/big"]);
        assert_eq!(fits[0].rows.len(), 2);
        let j = serde_json::to_value(&fits[1]).expect("test value");
        let keys: Vec<_> = j.as_object().expect("test value").keys().cloned().collect();
        assert_eq!(keys.len(), 5, "{j}");
        for key in ["device", "cluster", "c_eff", "epsilon", "rows"] {
            assert!(j.get(key).is_some(), "{key} in {j}");
        }
        let row = j["rows"][0].as_object().expect("test value");
        let mut row_keys: Vec<_> = row.keys().cloned().collect();
        row_keys.sort();
        assert_eq!(
            row_keys,
            ["err_analytical_pct", "err_approx_pct", "f_hz", "p_analytical", "p_approx", "p_w"]
        );
        assert!(fit_table(&fits).contains("mean C_eff"));
    }

    #[test]
    fn zero_power_has_no_relative_error() {
        let fits = fit_text("device,cluster,f_hz,v_volts,p_dyn_w\nd,c,1e9,1,0\n");
        assert_eq!(fits[0].rows[0].err_approx_pct, None);
        assert_eq!(
            serde_json::to_value(&fits[0]).expect("test value")["rows"][0]["err_approx_pct"],
            serde_json::Value::Null
        );
    }

    #[test]
    fn bad_measurements_name_the_line() {
        let h = "device,cluster,f_hz,v_volts,p_dyn_w\n";
        for (text, needle) in [
            (String::new(), "empty"),
            (h.to_string(), "no data rows"),
            ("device,cluster,f_hz,p_dyn_w\nd,c,1,1\n".into(), "missing column 'v_volts'"),
            (format!("{h}d,c,1e9,1,1\nd,c,abc,1,1\n"), "line 3: f_hz: bad frequency 'abc'"),
            (format!("{h}d,c,0,1,1\n"), "line 2: f_hz: bad frequency '0'"),
            (format!("{h}d,c,1e9,0,1\n"), "line 2: v_volts must be above 0"),
            (format!("{h}d,c,1e9,-1,1\n"), "line 2: v_volts must be above 0"),
            (format!("{h}d,c,1e9,1,-0.5\n"), "line 2: p_dyn_w must not be negative"),
            (format!("{h}d,c,1e9,1,x\n"), "line 2: p_dyn_w 'x' is not a number"),
            (format!("{h}d,c,1e9,1,NaN\n"), "line 2: p_dyn_w 'NaN' is not finite"),
            (format!("{h}d,c,1e9,1\n"), "line 2: missing field 'p_dyn_w'"),
            (format!("{h},c,1e9,1,1\n"), "line 2: 'device' is empty"),
        ] {
            let e = parse_measurements(&text).expect_err("an error").to_string();
            assert!(e.contains(needle), "{text:?}: {e}");
        }
    }

    #[test]
    fn comments_blank_lines_and_extra_columns_are_fine() {
        let text = "# Pixel run 3\nnote,device,cluster,f_hz,v_volts,p_dyn_w\n\nx,d,c,1e9,1,1\n# end\n";
        let points = parse_measurements(text).expect("test value");
        assert_eq!(points.len(), 1);
        assert_eq!(points[0].line, 4);
    }
    const PHONE: &str = include_str!("../../tests/fixtures/calibrate/phone.toml");

    #[test]
    fn fits_go_into_a_toml_profile_keeping_its_comments() {
        let fits = fit_text(include_str!("../../tests/fixtures/calibrate/pixel-8-pro-big.csv"));
        let extra = fit_text("device,cluster,f_hz,v_volts,p_dyn_w\npixel-8-pro,prime,1e9,1,1\n");
        let all: Vec<ClusterFit> = fits.iter().chain(&extra).cloned().collect();
        let u = update_profile(PHONE, ProfileFormat::Toml, &all, "m.csv").expect("test value");
        assert_eq!(u.updated, ["big"]);
        assert_eq!(u.missing, ["prime"]);
        assert_eq!(u.not_fitted, ["LITTLE"]);
        assert!(u.comments_kept);
        let big = u.profile.cluster("big").expect("test value");
        assert_eq!((big.c_eff_farads, big.epsilon), (fits[0].c_eff, fits[0].epsilon));
        // Untouched lines stay; the replaced values carry a new comment.
        assert!(u.text.starts_with("# A two-cluster test phone"), "{}", u.text);
        assert!(u.text.contains("# assumed: a placeholder\n# over two lines.\nc_eff_farads = 5.0e-10"));
        assert!(!u.text.contains("# assumed: a placeholder.\n"), "{}", u.text);
        assert!(
            u.text.contains("# calibrated: mean C_eff over 2 points of m.csv\nc_eff_farads = 1e-9\n"),
            "{}",
            u.text
        );
        assert!(
            u.text.contains("# calibrated: mean epsilon over 2 points of m.csv\nepsilon = "),
            "{}",
            u.text
        );
        let reread = DeviceProfile::from_toml_str(&u.text).expect("test value");
        assert_eq!(reread, u.profile);

        // Case-insensitive names, and a cluster with both keys present.
        let little = fit_text("device,cluster,f_hz,v_volts,p_dyn_w\nd,little,1e9,1,1\n");
        let u = update_profile(PHONE, ProfileFormat::Toml, &little, "l.csv").expect("test value");
        assert_eq!(u.updated, ["LITTLE"]);
        assert!(u
            .text
            .contains("# calibrated: mean C_eff over 1 point of l.csv\nc_eff_farads = 1e-9\n# calibrated"));
        assert!(!u.text.contains("over two lines") && !u.text.contains("derived from C_eff"), "{}", u.text);
        assert!(u.text.contains("# assumed: a placeholder.\nc_eff_farads = 2.0e-9"), "big untouched");
    }

    #[test]
    fn fits_go_into_a_json_profile_and_refuse_other_devices() {
        let phone = DeviceProfile::from_toml_str(PHONE).expect("test value");
        let json = serde_json::to_string(&phone).expect("test value");
        let fits =
            fit_text("device,cluster,f_hz,v_volts,p_dyn_w\ntest-phone,big,1e9,1,1\nother,big,1e9,1,2\n");
        let u = update_profile(&json, ProfileFormat::Json, &fits, "m.csv").expect("test value");
        assert_eq!(u.updated, ["big"]);
        assert!(close(
            DeviceProfile::from_json_str(&u.text)
                .expect("test value")
                .cluster("big")
                .expect("test value")
                .c_eff_farads,
            1e-9
        ));

        let others = fit_text("device,cluster,f_hz,v_volts,p_dyn_w\na,big,1e9,1,1\nb,big,1e9,1,2\n");
        let e =
            update_profile(PHONE, ProfileFormat::Toml, &others, "m.csv").expect_err("an error").to_string();
        assert!(e.contains("devices a, b") && e.contains("'test-phone'"), "{e}");
        // A zero power would fit C_eff = 0, which a profile refuses.
        let zero = fit_text("device,cluster,f_hz,v_volts,p_dyn_w\nd,big,1e9,1,0\n");
        let e = update_profile(PHONE, ProfileFormat::Toml, &zero, "m.csv").expect_err("an error").to_string();
        assert!(e.contains("c_eff_farads"), "{e}");
        assert_eq!(ProfileFormat::of_path(Path::new("a/B.TOML")), Some(ProfileFormat::Toml));
        assert_eq!(ProfileFormat::of_path(Path::new("a.yaml")), None);
    }
}
