//! `tandem-wearable calibrate` as a real process: `fit`, `trace` and
//! `measure` (on a fake sysfs tree), their JSON lines, and the one-line
//! errors bad input gets.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use crate::common;
use common::{stderr, stdout, wearable};

/// Every stdout line that is a JSON object.
fn json_lines(o: &Output) -> Vec<serde_json::Value> {
    stdout(o)
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect()
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../plan/tests/fixtures/calibrate").join(name)
}

/// A fresh temp folder for one test.
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tandem-calibrate-cli-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn put(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().expect("a parent")).expect("fixture dir");
    fs::write(path, text).expect("fixture file");
}

fn get(root: &Path, rel: &str) -> String {
    fs::read_to_string(root.join(rel)).expect("fixture file").trim().to_string()
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn assert_fails_with(o: &Output, needle: &str) {
    assert_eq!(o.status.code(), Some(2), "stdout: {} stderr: {}", stdout(o), stderr(o));
    let err = stderr(o);
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(err.contains(needle), "wanted '{needle}' in: {err}");
}

#[test]
fn fit_prints_a_table_and_one_json_line_per_cluster() {
    let o = wearable(&["calibrate", "fit", "--measurements", s(&fixture("pixel-8-pro-big.csv"))]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).lines().next().unwrap_or_default().contains("err_an"), "{}", stdout(&o));
    let lines = json_lines(&o);
    assert_eq!(lines.len(), 1, "{}", stdout(&o));
    let j = &lines[0];
    assert_eq!((j["device"].as_str(), j["cluster"].as_str()), (Some("pixel-8-pro"), Some("big")));
    let c_eff = j["c_eff"].as_f64().expect("c_eff");
    assert!((c_eff - 1e-9).abs() < 1e-21, "{j}");
    let rows = j["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1]["f_hz"].as_f64(), Some(2.37e9));
    assert!(rows[1]["err_analytical_pct"].as_f64().expect("err").abs() < 1e-9, "{j}");
    let err_approx = rows[1]["err_approx_pct"].as_f64().expect("err");
    assert!((err_approx - 361.7).abs() < 0.1, "ε·f³ errs by hundreds of percent at f_max: {j}");
}

#[test]
fn fit_writes_the_fitted_constants_into_a_profile() {
    let dir = temp_dir("profile");
    let profile = dir.join("phone.toml");
    fs::copy(fixture("phone.toml"), &profile).expect("copy profile");
    let csv = dir.join("m.csv");
    fs::write(
        &csv,
        "device,cluster,f_hz,v_volts,p_dyn_w\ntest-phone,big,1e9,1,1\ntest-phone,prime,1e9,1,1\n",
    )
    .expect("csv");
    let o = wearable(&["calibrate", "fit", "--measurements", s(&csv), "--write-profile", s(&profile)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("updated clusters: big"), "{err}");
    assert!(err.contains("no such cluster, not written: prime"), "{err}");
    assert!(err.contains("left as they were: LITTLE"), "{err}");
    let text = fs::read_to_string(&profile).expect("profile");
    assert!(text.contains("c_eff_farads = 1e-9\n") && text.contains("epsilon = 1e-27\n"), "{text}");
    assert!(text.starts_with("# A two-cluster test phone"), "comments kept: {text}");

    // Nothing matches: refused, file unchanged.
    fs::write(&csv, "device,cluster,f_hz,v_volts,p_dyn_w\nd,prime,1e9,1,1\n").expect("csv");
    let o = wearable(&["calibrate", "fit", "--measurements", s(&csv), "--write-profile", s(&profile)]);
    assert_fails_with(&o, "none of the fitted clusters (prime) is in the profile");
    assert_eq!(fs::read_to_string(&profile).expect("profile"), text);
}

#[test]
fn fit_refuses_bad_measurements_naming_the_line() {
    let dir = temp_dir("fit-bad");
    let h = "device,cluster,f_hz,v_volts,p_dyn_w\n";
    for (name, text, needle) in [
        ("nan.csv", format!("{h}d,c,1e9,1,1\nd,c,1e9,one,1\n"), "line 3: v_volts 'one' is not a number"),
        ("zero.csv", format!("{h}d,c,0,1,1\n"), "line 2: f_hz: bad frequency '0'"),
        ("neg.csv", format!("{h}d,c,1e9,1,-1\n"), "line 2: p_dyn_w must not be negative"),
        ("cols.csv", "device,cluster,f_hz,p_dyn_w\nd,c,1,1\n".to_string(), "missing column 'v_volts'"),
        ("empty.csv", String::new(), "empty"),
    ] {
        let path = dir.join(name);
        fs::write(&path, text).expect("csv");
        let o = wearable(&["calibrate", "fit", "--measurements", s(&path)]);
        assert_fails_with(&o, needle);
        assert!(stderr(&o).contains(name), "names the file: {}", stderr(&o));
    }
    let o = wearable(&["calibrate", "fit", "--measurements", s(&dir.join("absent.csv"))]);
    assert_fails_with(&o, "cannot read");
}

#[test]
fn trace_derives_single_activation_power_per_cluster() {
    let log = fixture("single-activation.csv");
    let o = wearable(&["calibrate", "trace", "--log", s(&log), "--cores", "big=4-5"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("P_dyn[big]@1700000000"), "{}", stdout(&o));
    let lines = json_lines(&o);
    assert_eq!(lines.iter().filter(|j| j["kind"] == "phase").count(), 5);
    let big = lines.iter().find(|j| j["kind"] == "cluster").expect("a cluster line");
    assert_eq!(big["cluster"], "big");
    assert_eq!(big["cores"], serde_json::json!([4, 5]));
    assert_eq!(big["repeats"], 2);
    assert!((big["mean_w"].as_f64().expect("mean") - 4.6).abs() < 1e-9, "{big}");
    assert!((big["std_w"].as_f64().expect("std") - 0.18f64.sqrt()).abs() < 1e-9, "{big}");
    let core5 = lines.iter().find(|j| j["label"] == "P_core5@1700000000").expect("core 5");
    assert!((core5["mean_w"].as_f64().expect("mean") - 2.4).abs() < 1e-9, "{core5}");
}

#[test]
fn trace_refuses_bad_logs() {
    let dir = temp_dir("trace-bad");
    let h = "t_s,v_batt,i_batt,phase\n";
    for (text, cores, needle) in [
        (format!("{h}0,4,1,load@1GHz\n"), None, "phase load@1000000000 needs phase idle@1000000000"),
        (format!("{h}0,4,1,nap@1GHz\n"), None, "line 2: bad phase label 'nap@1GHz'"),
        (format!("{h}0,4,1,idle@1GHz\n1,4,x,idle@1GHz\n"), None, "line 3: i_batt 'x' is not a number"),
        (format!("{h}0,4,1,idle@1GHz\n"), Some("big=0-3"), "--cores"),
    ] {
        let path = dir.join("log.csv");
        fs::write(&path, text).expect("log");
        let mut args = vec!["calibrate", "trace", "--log", s(&path)];
        if let Some(c) = cores {
            args.extend(["--cores", c]);
        }
        assert_fails_with(&wearable(&args), needle);
    }
}

/// A tri-cluster phone: little 0-3, big 4-6, prime 7 (offline); a 4 V battery
/// at 0.5 A; one regulator.
fn fake_phone(root: &Path) {
    let cpu = "sys/devices/system/cpu";
    for n in 1..8 {
        put(root, &format!("{cpu}/cpu{n}/online"), if n == 7 { "0\n" } else { "1\n" });
    }
    put(root, &format!("{cpu}/cpu0/topology/core_id"), "0\n");
    for (policy, related, lo, hi) in
        [(0, "0-3", 300000, 1700000), (4, "4-6", 400000, 2370000), (7, "7", 500000, 2910000)]
    {
        let p = format!("{cpu}/cpufreq/policy{policy}");
        put(root, &format!("{p}/related_cpus"), related);
        put(root, &format!("{p}/cpuinfo_min_freq"), &lo.to_string());
        put(root, &format!("{p}/cpuinfo_max_freq"), &hi.to_string());
        put(root, &format!("{p}/scaling_min_freq"), &lo.to_string());
        put(root, &format!("{p}/scaling_max_freq"), &hi.to_string());
    }
    put(root, &format!("{cpu}/cpufreq/policy4/scaling_available_frequencies"), "400000 1200000 2370000\n");
    put(root, "sys/class/power_supply/battery/type", "Battery\n");
    put(root, "sys/class/power_supply/battery/voltage_now", "4000000\n");
    put(root, "sys/class/power_supply/battery/current_now", "-500000\n");
    put(root, "sys/class/regulator/regulator.7/name", "vdd_cpu_big\n");
    put(root, "sys/class/regulator/regulator.7/microvolts", "550000\n");
}

fn measure_args<'a>(root: &'a Path, out: &'a Path) -> Vec<&'a str> {
    vec![
        "calibrate",
        "measure",
        "--out",
        s(out),
        "--sysfs-root",
        s(root),
        "--cluster-cpus",
        "4-6",
        "--freqs",
        "min,2.37GHz",
        "--phase-secs",
        "0.04",
        "--repeats",
        "2",
        "--sample-ms",
        "10",
    ]
}

#[test]
fn measure_drives_a_fake_phone_and_restores_it() {
    let dir = temp_dir("measure");
    let root = dir.join("root");
    fake_phone(&root);
    let out = dir.join("run.csv");
    let o = wearable(&measure_args(&root, &out));
    assert!(o.status.success(), "{}", stderr(&o));
    let summary = json_lines(&o).pop().expect("summary line");
    assert_eq!(summary["phases"], 8, "{summary}");
    assert_eq!(summary["restored"], true);
    assert!(summary["next"].as_str().unwrap_or_default().contains("calibrate trace --log"), "{summary}");

    let trace = fs::read_to_string(&out).expect("trace");
    let mut lines = trace.lines();
    assert_eq!(lines.next(), Some("t_s,v_batt,i_batt,phase"));
    let labels: Vec<&str> = lines.map(|l| l.rsplit(',').next().unwrap_or_default()).collect();
    assert_eq!(labels.len(), 32, "4 samples per phase: {trace}");
    assert_eq!(labels.first(), Some(&"idle@400000000"));
    assert_eq!(labels.last(), Some(&"load@2370000000"));
    assert!(trace.contains(",4,-0.5,idle@400000000"), "{trace}");
    let regs = fs::read_to_string(dir.join("run.regulators.csv")).expect("regulator log");
    assert!(regs.starts_with("t_s,regulator,name,microvolts\n"), "{regs}");
    assert!(regs.contains(",regulator.7,vdd_cpu_big,550000"), "{regs}");

    // Everything it wrote is back as it was.
    let cpu = "sys/devices/system/cpu";
    assert_eq!(get(&root, &format!("{cpu}/cpufreq/policy4/scaling_min_freq")), "400000");
    assert_eq!(get(&root, &format!("{cpu}/cpufreq/policy4/scaling_max_freq")), "2370000");
    for n in 1..8 {
        assert_eq!(get(&root, &format!("{cpu}/cpu{n}/online")), if n == 7 { "0" } else { "1" }, "cpu{n}");
    }

    // `calibrate trace` reads what `measure` wrote (a constant fake gauge: 0 W dynamic).
    let o = wearable(&["calibrate", "trace", "--log", s(&out)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let derived: Vec<_> = json_lines(&o).into_iter().filter(|j| j["kind"] == "cluster_activation").collect();
    assert_eq!(derived.len(), 2);
    assert!(derived.iter().all(|j| j["mean_w"] == 0.0 && j["repeats"] == 2), "{derived:?}");
}

#[test]
fn measure_dry_run_prints_the_plan_and_changes_nothing() {
    let dir = temp_dir("dry-run");
    let root = dir.join("root");
    fake_phone(&root);
    let out = dir.join("run.csv");
    let mut args = measure_args(&root, &out);
    args.extend(["--mode", "single", "--dry-run"]);
    let o = wearable(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("phase idle0@400000000"), "{text}");
    assert!(text.contains("phase load5@2370000000 for 0.040 s, stress on cpu 5"), "{text}");
    assert!(text.contains("cpu7/online") && text.contains("# restore afterwards:"), "{text}");
    let summary = json_lines(&o).pop().expect("summary");
    assert_eq!(summary["dry_run"], true);
    assert_eq!(summary["phases"], 2 * 2 * 7, "{summary}");
    assert!(!out.exists(), "no trace written");
    assert_eq!(get(&root, "sys/devices/system/cpu/cpu1/online"), "1");
    assert_eq!(get(&root, "sys/devices/system/cpu/cpufreq/policy4/scaling_max_freq"), "2370000");
}

#[test]
fn measure_refuses_missing_sysfs_and_bad_arguments() {
    let dir = temp_dir("measure-bad");
    let root = dir.join("root");
    fake_phone(&root);
    let out = dir.join("run.csv");
    fs::remove_file(root.join("sys/class/power_supply/battery/current_now")).expect("remove");
    let o = wearable(&measure_args(&root, &out));
    assert_fails_with(&o, "missing fuel-gauge file");
    assert!(stderr(&o).contains("battery/current_now"), "{}", stderr(&o));
    assert!(!out.exists());

    fake_phone(&root);
    let mut args = measure_args(&root, &out);
    let freqs = args.iter().position(|a| *a == "--freqs").expect("--freqs") + 1;
    args[freqs] = "1GHz";
    assert_fails_with(&wearable(&args), "does not offer 1000000 kHz");
    args[freqs] = "fast";
    assert_fails_with(&wearable(&args), "--freqs: bad frequency 'fast'");
    let cpus = args.iter().position(|a| *a == "--cluster-cpus").expect("--cluster-cpus") + 1;
    args[freqs] = "max";
    args[cpus] = "3-4";
    assert_fails_with(&wearable(&args), "several cpufreq policies");
    let empty = dir.join("empty");
    fs::create_dir_all(&empty).expect("dir");
    let o = wearable(&measure_args(&empty, &out));
    assert_fails_with(&o, "missing CPU folder");
}
