//! Executing a plan: the steps, the fuel-gauge and regulator recording, and restoring sysfs.

use super::*;

/// What a run recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeasureSummary {
    /// Phases run.
    pub phases: usize,
    /// Fuel-gauge samples written to the trace.
    pub samples: usize,
    /// Rows written to the regulator log.
    pub regulator_rows: usize,
}

/// Runs `plan`: writes the trace to `trace_out` (the format of
/// [`tandem::calibrate::trace`]) and the regulator log to `regulators_out`, calling
/// `progress` before each step, then restores every file it wrote, also when
/// a step fails or panics. Refuses the real `/sys` when not root
/// ([`require_root`]).
pub fn run(
    plan: &Plan,
    clock: &mut dyn Clock,
    stress: &mut dyn Stress,
    trace_out: &Path,
    regulators_out: &Path,
    progress: &mut dyn FnMut(&Step),
) -> Result<MeasureSummary, CalibrateError> {
    require_root(&plan.sysfs_root, current_uid())?;
    let mut trace = csv_writer(trace_out, TRACE_HEADER)?;
    let mut regs = csv_writer(regulators_out, REGULATOR_HEADER)?;
    let mut restorer = Restorer { restore: &plan.restore, done: false };
    let mut recorder = Recorder {
        plan,
        trace: &mut trace,
        trace_path: trace_out,
        regs: &mut regs,
        regs_path: regulators_out,
        summary: MeasureSummary { phases: 0, samples: 0, regulator_rows: 0 },
    };
    let result = plan.steps.iter().try_for_each(|step| {
        progress(step);
        recorder.step(step, clock, stress)
    });
    stress.stop();
    let summary = recorder.summary;
    let restored = restorer.restore();
    match (result, restored) {
        (Err(e), Err(r)) => {
            tracing::error!("restoring sysfs after a failed run also failed: {r}");
            Err(e)
        }
        (Err(e), Ok(())) | (Ok(()), Err(e)) => Err(e),
        (Ok(()), Ok(())) => Ok(summary),
    }
}

pub(super) fn csv_writer(path: &Path, header: &str) -> Result<csv::Writer<fs::File>, CalibrateError> {
    let file = fs::File::create(path).map_err(|source| CalibrateError::Io {
        action: "create",
        path: path.into(),
        source,
    })?;
    let mut w = csv::Writer::from_writer(file);
    w.write_record(header.split(',')).map_err(|e| csv_io(path, e))?;
    Ok(w)
}

pub(super) fn csv_io(path: &Path, e: csv::Error) -> CalibrateError {
    CalibrateError::Io { action: "write", path: path.into(), source: std::io::Error::other(e) }
}

pub(super) struct Recorder<'a> {
    plan: &'a Plan,
    trace: &'a mut csv::Writer<fs::File>,
    trace_path: &'a Path,
    regs: &'a mut csv::Writer<fs::File>,
    regs_path: &'a Path,
    summary: MeasureSummary,
}

impl Recorder<'_> {
    fn step(
        &mut self,
        step: &Step,
        clock: &mut dyn Clock,
        stress: &mut dyn Stress,
    ) -> Result<(), CalibrateError> {
        match step {
            Step::Write { path, value } => write(path, value),
            Step::Pin { policy, khz } => set_range(policy, *khz, *khz),
            Step::Phase { phase, load_cpus, duration } => {
                if !load_cpus.is_empty() {
                    stress.start(load_cpus)?;
                }
                let sampled = self.phase(phase, *duration, clock);
                stress.stop();
                sampled?;
                self.summary.phases += 1;
                self.trace.flush().map_err(|source| CalibrateError::Io {
                    action: "write",
                    path: self.trace_path.into(),
                    source,
                })?;
                self.regs.flush().map_err(|source| CalibrateError::Io {
                    action: "write",
                    path: self.regs_path.into(),
                    source,
                })
            }
        }
    }

    /// Samples every period from the phase's start, then waits out its end.
    fn phase(
        &mut self,
        phase: &Phase,
        duration: Duration,
        clock: &mut dyn Clock,
    ) -> Result<(), CalibrateError> {
        let period = self.plan.sample_period;
        let start = clock.now();
        let samples = (duration.as_nanos() / period.as_nanos()).max(1);
        let label = phase.to_string();
        for i in 0..samples {
            let due = start + period.saturating_mul(i as u32);
            clock.sleep(due.saturating_sub(clock.now()));
            self.sample(clock.now(), &label)?;
        }
        clock.sleep((start + duration).saturating_sub(clock.now()));
        Ok(())
    }

    fn sample(&mut self, t: Duration, label: &str) -> Result<(), CalibrateError> {
        let t_s = format!("{:.3}", t.as_secs_f64());
        let microvolts = read_i64(&self.plan.battery.join("voltage_now"))?;
        let microamps = read_i64(&self.plan.battery.join("current_now"))?;
        let row = [
            t_s.clone(),
            (microvolts as f64 / 1e6).to_string(),
            (microamps as f64 / 1e6).to_string(),
            label.into(),
        ];
        self.trace.write_record(&row).map_err(|e| csv_io(self.trace_path, e))?;
        self.summary.samples += 1;
        for (dir, name) in &self.plan.regulators {
            // A regulator that is switched off may refuse the read; skip it then.
            let Ok(uv) = read_trimmed(&dir.join("microvolts")) else { continue };
            let id = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            self.regs.write_record([t_s.as_str(), &id, name, &uv]).map_err(|e| csv_io(self.regs_path, e))?;
            self.summary.regulator_rows += 1;
        }
        Ok(())
    }
}

/// Sets a policy's range, writing in the order the kernel accepts
/// ([`tandem::cpufreq::range_writes`]; a bound that cannot be read counts
/// as the widest).
pub(super) fn set_range(policy: &Path, min_khz: u64, max_khz: u64) -> Result<(), CalibrateError> {
    use tandem::cpufreq::{range_writes, Bound};
    let read = |bound: Bound| read_u64(&policy.join(bound.file()));
    let now = (read(Bound::Min).unwrap_or(0), read(Bound::Max).unwrap_or(u64::MAX));
    for (bound, khz) in range_writes(now, (min_khz, max_khz)) {
        write(&policy.join(bound.file()), &khz.to_string())?;
    }
    Ok(())
}

/// Puts every written file back; on drop too (a panic), if not done yet.
pub(super) struct Restorer<'a> {
    restore: &'a [Restore],
    done: bool,
}

impl Restorer<'_> {
    /// Tries every item, and returns the first failure.
    fn restore(&mut self) -> Result<(), CalibrateError> {
        self.done = true;
        let mut first_error = None;
        for item in ordered(self.restore) {
            let result = match item {
                Restore::Online { path, value } => write(path, value),
                Restore::Range { policy, min_khz, max_khz } => set_range(policy, *min_khz, *max_khz),
            };
            if let Err(e) = result {
                tracing::error!("cannot restore: {e}");
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

impl Drop for Restorer<'_> {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.restore();
        }
    }
}
