//! Link traces for `tandem-bench compare`: a schedule of rates
//! (`seconds up_mbit [down_mbit]` lines, the last line's time the trace's
//! length) replayed over BLE 2M while one model streams at a fixed rate.
//! The walk-away trace is built in (`traces/walk-away.txt`); `--trace FILE`
//! adds any other (`traces/commute.txt`, `traces/crowded-room.txt`, or a
//! user's own). A trace cell's link is the trace's name; its frames are
//! kept to plot the cut, latency and throughput over time.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use tandem::emulate::{LinkProfile, Schedule};

/// The link a trace's rates are set on (its latency, jitter and MTU).
pub const TRACE_LINK: &str = "ble-2m";

/// Frames per second a stream sends over a trace.
pub const TRACE_FPS: f64 = 5.0;

/// The walk-away trace, built in.
const WALK_AWAY: &str = include_str!("../../traces/walk-away.txt");

/// A named schedule of link rates and its length.
#[derive(Clone, Debug, PartialEq)]
pub struct Trace {
    /// Its name: the cell's link (a file's stem; not a link profile's name).
    pub name: String,
    /// The schedule's text (`tandem-wearable --schedule`).
    pub text: String,
    /// Its length: the last line's time (s).
    pub seconds: f64,
}

impl Trace {
    /// The trace named `name` with schedule `text`: checked as a schedule,
    /// at least one step and a length above 0; a link profile's name is refused.
    pub fn parse(name: &str, text: &str) -> anyhow::Result<Trace> {
        if name.is_empty() || LinkProfile::named(name).is_ok() {
            bail!("a trace may not be named '{name}': that is a link profile's name");
        }
        let schedule = Schedule::parse(text, name).with_context(|| format!("trace {name}"))?;
        let seconds = schedule.steps.last().map_or(0.0, |s| s.0.as_secs_f64());
        if seconds <= 0.0 {
            bail!("trace {name}: its last line's time (its length) must be above 0 s");
        }
        Ok(Trace { name: name.to_string(), text: text.to_string(), seconds })
    }

    /// The trace in `path`, named by the file's stem.
    pub fn from_file(path: &Path) -> anyhow::Result<Trace> {
        let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        let text = std::fs::read_to_string(path).with_context(|| format!("--trace {}", path.display()))?;
        Self::parse(&name, &text)
    }

    /// The built-in walk-away trace (60 s).
    pub fn walk_away() -> Trace {
        Self::parse("walk-away", WALK_AWAY).unwrap_or_else(|e| unreachable!("the built-in trace: {e}"))
    }

    /// The same trace with every time scaled by `factor` (`--quick` plays
    /// each at a fifth of its length); comments are kept.
    pub fn scaled(&self, factor: f64) -> Trace {
        let text: String = self
            .text
            .lines()
            .map(|line| {
                let (body, comment) = line.split_once('#').map_or((line, None), |(b, c)| (b, Some(c)));
                let mut fields = body.split_whitespace();
                let rescaled =
                    match (fields.next().and_then(|t| t.parse::<f64>().ok()), body.trim().is_empty()) {
                        (Some(t), false) => {
                            let rest: Vec<&str> = fields.collect();
                            format!("{:.3} {}", t * factor, rest.join(" "))
                        }
                        _ => body.to_string(),
                    };
                match comment {
                    Some(c) => format!("{rescaled}#{c}\n"),
                    None => format!("{rescaled}\n"),
                }
            })
            .collect();
        Trace { name: self.name.clone(), text, seconds: self.seconds * factor }
    }

    /// Frames a stream over it sends ([`TRACE_FPS`]).
    pub fn frames(&self) -> usize {
        (self.seconds * TRACE_FPS).round().max(1.0) as usize
    }

    /// Where the schedule is written for the runs in `out`.
    pub fn path_in(&self, out: &Path) -> PathBuf {
        out.join(format!("{}.txt", self.name))
    }
}

/// Whether a cell's link is a trace (not a link profile).
pub fn is_trace(link: &str) -> bool {
    LinkProfile::named(link).is_err()
}

/// Where the frames of `strategy`'s run `run` of `model` over `trace` go.
pub fn frames_path(out: &Path, trace: &str, model: &str, strategy: &str, run: u32) -> PathBuf {
    // A model given as a file is named by its path: one file name of it.
    let model = model.replace(['/', '\\'], "_");
    out.join("frames").join(format!("{trace}-{model}-{strategy}-run{run}.jsonl"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_walk_away_trace_falls_and_recovers_and_scales() {
        let t = Trace::walk_away();
        assert_eq!((t.name.as_str(), t.seconds), ("walk-away", 60.0));
        let s = Schedule::parse(&t.text, "walk-away").expect("parses");
        let rates: Vec<f64> = s.steps.iter().map(|x| x.1 / 1e6).collect();
        assert_eq!(rates.first(), Some(&1.3));
        assert!(rates.iter().any(|&r| r <= 0.03), "{rates:?}");
        let min = rates.iter().position(|&r| r <= 0.03).expect("a low");
        assert!(rates[min..].iter().any(|&r| r >= 1.3), "it recovers: {rates:?}");
        let q = t.scaled(0.2);
        assert_eq!(q.seconds, 12.0);
        assert_eq!(q.frames(), 60);
        let qs = Schedule::parse(&q.text, "quick").expect("the scaled text parses");
        assert_eq!(qs.steps.len(), s.steps.len());
        assert!((qs.steps[1].0.as_secs_f64() - 2.0).abs() < 1e-9, "{:?}", qs.steps[1]);
        assert_eq!(qs.steps[1].1, s.steps[1].1);
    }

    #[test]
    fn the_shipped_traces_load_and_bad_ones_are_refused_by_name() {
        let dir = tandem_models::workspace_root().join("traces");
        for (file, secs) in [("commute.txt", 60.0), ("crowded-room.txt", 30.0), ("walk-away.txt", 60.0)] {
            let t = Trace::from_file(&dir.join(file)).expect(file);
            assert_eq!(t.seconds, secs, "{file}");
            assert!(is_trace(&t.name), "{file}");
            // Each moves the rate several times.
            let steps = Schedule::parse(&t.text, file).expect("parses").steps;
            assert!(steps.len() >= 9, "{file}: {} steps", steps.len());
        }
        assert!(!is_trace("ble-2m") && !is_trace("wifi-good"));
        assert!(Trace::parse("ble-2m", "0 1\n10 1\n").is_err());
        assert!(Trace::parse("x", "0 1\n").is_err(), "a length of 0 s");
        let e = Trace::parse("x", "0 1\n5 0\n").expect_err("a rate of 0");
        assert!(format!("{e:#}").contains("stall"), "{e:#}");
        assert_eq!(
            frames_path(Path::new("o"), "commute", "a/b.onnx", "tandem", 2),
            Path::new("o/frames/commute-a_b.onnx-tandem-run2.jsonl")
        );
    }
}
