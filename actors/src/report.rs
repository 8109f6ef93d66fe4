//! report.md, built from the journal's records alone: whatever the report says, the journal
//! shows how it was reached.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use crate::journal::{Event, JournalRecord, RunOutcome, Step};
use crate::model::{CandidateId, DeviceId, Reference, is_tampering};

#[derive(Clone, Debug, Default)]
struct RoundRow {
    proposed: u32,
    verified: u32,
    failed: u32,
    duplicates: u32,
    failures: Vec<String>,
    best_candidate: Option<CandidateId>,
    best_ms: Option<f64>,
}

/// What the finale timed: a kernel or one of PyTorch's references.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum FinalSubject {
    Kernel(CandidateId),
    Eager,
    Compile,
}

#[derive(Clone, Debug, Default)]
struct DeviceTime {
    name: String,
    /// What the device's evaluator last said it sees: name, UUID, PCI bus id, versions.
    seen: Option<String>,
    busy: Duration,
    open: BTreeMap<(CandidateId, &'static str), SystemTime>,
}

/// Everything the report needs, accumulated record by record.
#[derive(Clone, Debug, Default)]
pub struct RunSummary {
    started: Option<SystemTime>,
    finished: Option<SystemTime>,
    configuration: Vec<(String, String)>,
    simulated: bool,
    initial_ms: Option<f64>,
    eager_ms: Option<f64>,
    compile_ms: Option<f64>,
    /// The finale's figures by what was timed, one per pass; errors kept as text.
    final_times: BTreeMap<FinalSubject, Vec<Result<f64, String>>>,
    user_test: Option<String>,
    /// Each verified candidate's event-timed median, and the device time its profile measured.
    event_times: BTreeMap<CandidateId, f64>,
    profile_times: BTreeMap<CandidateId, f64>,
    rounds: BTreeMap<u32, RoundRow>,
    devices: BTreeMap<DeviceId, DeviceTime>,
    outcome: Option<(RunOutcome, String)>,
    best: Option<(CandidateId, f64)>,
    /// Candidates rejected for tampering with the evaluator's state, in journal order.
    tampering: Vec<CandidateId>,
    worker_deaths: Vec<String>,
    profiling_note: Option<String>,
}

fn step_key(step: Step) -> &'static str {
    match step {
        Step::Verify => "verify",
        Step::Time => "time",
        Step::Profile => "profile",
        Step::Reference => "reference",
    }
}

/// `baseline / best` as a speedup, or a dash when either was not measured.
fn ratio(baseline_ms: Option<f64>, best_ms: Option<f64>) -> String {
    match (baseline_ms, best_ms) {
        (Some(baseline), Some(best)) if best > 0.0 => format!("{:.2}×", baseline / best),
        _ => "–".into(),
    }
}

/// A reason as one table cell: its first line, with the table's separator escaped.
fn table_cell(text: &str) -> String {
    text.lines().next().unwrap_or_default().replace('|', "\\|")
}

impl RunSummary {
    pub fn observe(&mut self, record: &JournalRecord) {
        match &record.event {
            Event::CandidateFinished {
                candidate,
                passed: true,
                time_ms: Some(ms),
                ..
            } => {
                self.event_times.insert(*candidate, *ms);
            }
            Event::ProfileRecorded {
                candidate,
                duration_ms: Some(ms),
                ..
            } => {
                self.profile_times.insert(*candidate, *ms);
            }
            _ => {}
        }
        match &record.event {
            Event::RunStarted {
                strategy,
                platform,
                simulated,
                search,
                num_top_kernels,
                num_bottlenecks,
                max_rounds,
                devices,
                ..
            } => {
                self.started = Some(record.t);
                self.simulated = *simulated;
                self.configuration = vec![
                    ("strategy".into(), strategy.clone()),
                    ("platform".into(), platform.clone()),
                    ("search".into(), search.clone()),
                    (
                        "beam".into(),
                        format!("{num_top_kernels} × {num_bottlenecks}"),
                    ),
                    ("max rounds".into(), max_rounds.to_string()),
                    ("devices".into(), devices.len().to_string()),
                ];
                for device in devices {
                    self.devices.entry(device.device).or_default().name = device.name.clone();
                }
            }
            Event::StepStarted {
                candidate,
                device,
                step,
                ..
            } => {
                self.devices
                    .entry(*device)
                    .or_default()
                    .open
                    .insert((*candidate, step_key(*step)), record.t);
            }
            Event::StepFinished {
                candidate,
                device,
                step,
                ..
            } => {
                let device_time = self.devices.entry(*device).or_default();
                if let Some(start) = device_time.open.remove(&(*candidate, step_key(*step))) {
                    device_time.busy += record.t.duration_since(start).unwrap_or_default();
                }
            }
            Event::CandidateFinished {
                candidate,
                passed: true,
                time_ms: Some(ms),
                ..
            } if *candidate == CandidateId::INITIAL => {
                self.initial_ms = Some(*ms);
            }
            Event::CandidateFinished {
                candidate,
                passed: false,
                reason: Some(reason),
                ..
            } if is_tampering(reason) => {
                self.tampering.push(*candidate);
            }
            Event::RoundFinished {
                round,
                proposed,
                verified,
                failed,
                duplicates,
                failures,
                best_candidate,
                best_ms,
            } => {
                self.rounds.insert(
                    *round,
                    RoundRow {
                        proposed: *proposed,
                        verified: *verified,
                        failed: *failed,
                        duplicates: *duplicates,
                        failures: failures.clone(),
                        best_candidate: Some(*best_candidate),
                        best_ms: Some(*best_ms),
                    },
                );
                self.best = Some((*best_candidate, *best_ms));
            }
            Event::WorkerDied {
                device,
                candidate,
                reason,
            } => {
                let during = candidate
                    .map(|c| format!(" during candidate {c}"))
                    .unwrap_or_default();
                self.worker_deaths
                    .push(format!("device {device}{during}: {reason}"));
            }
            Event::ReferenceTimed {
                which,
                time_ms: Some(ms),
                ..
            } => match which {
                Reference::Eager => self.eager_ms = Some(*ms),
                Reference::Compile => self.compile_ms = Some(*ms),
            },
            Event::FinalTimed {
                candidate,
                reference,
                time_ms,
                error,
                ..
            } => {
                let subject = match (candidate, reference) {
                    (Some(candidate), _) => FinalSubject::Kernel(*candidate),
                    (None, Some(Reference::Eager)) => FinalSubject::Eager,
                    (None, Some(Reference::Compile)) => FinalSubject::Compile,
                    (None, None) => return,
                };
                let figure = match (time_ms, error) {
                    (Some(ms), _) => Ok(*ms),
                    (None, Some(error)) => Err(table_cell(error)),
                    (None, None) => Err("not measured".into()),
                };
                self.final_times.entry(subject).or_default().push(figure);
            }
            Event::UserTestRan {
                folder,
                passed,
                exit_code,
                error,
                ..
            } => {
                self.user_test = Some(match (passed, error) {
                    (Some(true), _) => format!("passed ({folder}/test.log)"),
                    (Some(false), _) => {
                        format!("FAILED with exit code {exit_code:?} ({folder}/test.log)")
                    }
                    (None, Some(error)) => format!("could not run: {error}"),
                    (None, None) => "not run: the platform runs no Python".into(),
                });
            }
            Event::EvaluatorStarted { device, ready } => {
                let text =
                    |value: &serde_json::Value| value.as_str().unwrap_or("unknown").to_string();
                let seen = &ready["device"];
                let versions = &ready["versions"];
                self.devices.entry(*device).or_default().seen = Some(format!(
                    "{} {} at {}; torch {}, triton {}, CUDA {}, HIP {}, driver {}",
                    text(&seen["name"]),
                    text(&seen["uuid"]),
                    text(&seen["pci_bus_id"]),
                    text(&versions["torch"]),
                    text(&versions["triton"]),
                    text(&versions["cuda"]),
                    text(&versions["hip"]),
                    text(&versions["driver"]),
                ));
            }
            Event::ProfilingStopped { reason } => self.profiling_note = Some(reason.clone()),
            Event::RunFinished {
                outcome,
                reason,
                best_candidate,
                best_ms,
                initial_ms,
            } => {
                self.finished = Some(record.t);
                self.outcome = Some((*outcome, reason.clone()));
                if let (Some(candidate), Some(ms)) = (best_candidate, best_ms) {
                    self.best = Some((*candidate, *ms));
                }
                if initial_ms.is_some() {
                    self.initial_ms = *initial_ms;
                }
            }
            _ => {}
        }
    }

    fn wall_time(&self) -> Duration {
        match (self.started, self.finished) {
            (Some(start), Some(end)) => end.duration_since(start).unwrap_or_default(),
            _ => Duration::ZERO,
        }
    }

    /// Each device's busy fraction: time verifying, timing or profiling over the run's wall time.
    pub fn busy_fractions(&self) -> BTreeMap<DeviceId, f64> {
        let wall = self.wall_time().as_secs_f64();
        self.devices
            .iter()
            .map(|(device, time)| {
                let fraction = if wall > 0.0 {
                    time.busy.as_secs_f64() / wall
                } else {
                    0.0
                };
                (*device, fraction)
            })
            .collect()
    }

    pub fn render_markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "# kactors run report\n");
        if self.simulated {
            let _ = writeln!(
                out,
                "**Simulated run:** the noop platform ran no kernel; every verdict and time below comes from a deterministic model of the candidate's source.\n"
            );
        }
        if let Some((outcome, reason)) = &self.outcome {
            let outcome = match outcome {
                RunOutcome::Completed => "completed",
                RunOutcome::Failed => "failed",
                RunOutcome::Interrupted => "interrupted",
                RunOutcome::Refused => "refused",
            };
            let _ = writeln!(
                out,
                "Outcome: **{outcome}** ({reason}); wall time {:.1} s.\n",
                self.wall_time().as_secs_f64()
            );
        }
        self.render_final(&mut out);
        let _ = writeln!(out, "## Configuration\n");
        for (key, value) in &self.configuration {
            let _ = writeln!(out, "- {key}: {value}");
        }
        let _ = writeln!(out, "\n## Rounds\n");
        let _ = writeln!(
            out,
            "| round | proposed | verified | failed | duplicates | best (ms) | speedup vs initial | vs PyTorch eager | vs torch.compile | failures |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|");
        for (round, row) in &self.rounds {
            let best = match (row.best_ms, row.best_candidate) {
                (Some(ms), Some(candidate)) => format!("{ms:.4} (candidate {candidate})"),
                _ => "–".into(),
            };
            let speedup = self.speedup(row.best_ms);
            let vs_eager = ratio(self.eager_ms, row.best_ms);
            let vs_compile = ratio(self.compile_ms, row.best_ms);
            let failures = if row.failures.is_empty() {
                "–".to_string()
            } else {
                row.failures
                    .iter()
                    .map(|failure| table_cell(failure))
                    .collect::<Vec<_>>()
                    .join("; ")
            };
            let _ = writeln!(
                out,
                "| {round} | {} | {} | {} | {} | {best} | {speedup} | {vs_eager} | {vs_compile} | {failures} |",
                row.proposed, row.verified, row.failed, row.duplicates
            );
        }
        if !self.tampering.is_empty() {
            let ids: Vec<String> = self.tampering.iter().map(ToString::to_string).collect();
            let _ = writeln!(
                out,
                "\nTampered with the evaluator's state (rejected; the evaluator restarted): candidates {}.",
                ids.join(", ")
            );
        }
        let _ = writeln!(out, "\n## Best kernel\n");
        match (self.best, self.initial_ms) {
            (Some((candidate, ms)), initial) => {
                let _ = writeln!(
                    out,
                    "Candidate {candidate}: {ms:.4} ms (initial kernel {}; speedup {}). Source: best_kernel.py.",
                    initial
                        .map(|i| format!("{i:.4} ms"))
                        .unwrap_or_else(|| "not measured".into()),
                    self.speedup(Some(ms))
                );
            }
            (None, _) => {
                let _ = writeln!(out, "No kernel was verified.");
            }
        }
        let reference = |ms: Option<f64>| {
            ms.map_or_else(|| "not measured".to_string(), |ms| format!("{ms:.4} ms"))
        };
        let _ = writeln!(
            out,
            "\nPyTorch eager: {}; torch.compile: {} (timed by the candidates' method on one device).",
            reference(self.eager_ms),
            reference(self.compile_ms)
        );
        let _ = writeln!(out, "\n## Devices\n");
        let _ = writeln!(
            out,
            "| device | name | seen by its evaluator | busy fraction |"
        );
        let _ = writeln!(out, "|---|---|---|---|");
        for (device, fraction) in self.busy_fractions() {
            let time = &self.devices[&device];
            let seen = time.seen.as_deref().unwrap_or("–");
            let _ = writeln!(
                out,
                "| {device} | {} | {seen} | {:.1}% |",
                time.name,
                fraction * 100.0
            );
        }
        if !self.worker_deaths.is_empty() {
            let _ = writeln!(out, "\n## Worker restarts\n");
            for death in &self.worker_deaths {
                let _ = writeln!(out, "- {death}");
            }
        }
        if let Some(note) = &self.profiling_note {
            let _ = writeln!(out, "\n## Profiling\n\nProfiling stopped: {note}");
        }
        self.render_cross_check(&mut out);
        out
    }

    /// Each profiled kernel's event time against the device time its profiler measured for the
    /// same call: more than 10% apart means one of the two did not measure the kernel's own work.
    fn render_cross_check(&self, out: &mut String) {
        let pairs: Vec<(CandidateId, f64, f64)> = self
            .profile_times
            .iter()
            .filter_map(|(candidate, profiled)| {
                Some((*candidate, *self.event_times.get(candidate)?, *profiled))
            })
            .collect();
        if pairs.is_empty() {
            return;
        }
        let _ = writeln!(out, "\n## Event time against the profiler's device time\n");
        let _ = writeln!(
            out,
            "| candidate | event time (ms) | profiler (ms) | difference | |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|");
        for (candidate, event, profiled) in pairs {
            let difference = (event - profiled).abs() / profiled.max(f64::MIN_POSITIVE);
            let flag = if difference > 0.10 {
                "**flagged: more than 10% apart**"
            } else {
                "ok"
            };
            let _ = writeln!(
                out,
                "| {candidate} | {event:.4} | {profiled:.4} | {:.1}% | {flag} |",
                difference * 100.0
            );
        }
    }

    /// The headline: the finale's figures, re-timed in one fresh process, interleaved.
    fn render_final(&self, out: &mut String) {
        if self.final_times.is_empty() {
            return;
        }
        let _ = writeln!(
            out,
            "## Headline: re-timed in one fresh evaluator, interleaved, two passes\n"
        );
        let _ = writeln!(out, "| timed | pass 1 (ms) | pass 2 (ms) |");
        let _ = writeln!(out, "|---|---|---|");
        for (subject, figures) in &self.final_times {
            let name = match subject {
                FinalSubject::Kernel(candidate) if *candidate == CandidateId::INITIAL => {
                    "initial kernel".to_string()
                }
                FinalSubject::Kernel(candidate) => format!("candidate {candidate}"),
                FinalSubject::Eager => "PyTorch eager".into(),
                FinalSubject::Compile => "torch.compile".into(),
            };
            let cells: Vec<String> = figures
                .iter()
                .map(|figure| match figure {
                    Ok(ms) => format!("{ms:.4}"),
                    Err(error) => error.clone(),
                })
                .collect();
            let _ = writeln!(out, "| {name} | {} |", cells.join(" | "));
        }
        let mean = |subject: FinalSubject| {
            let figures: Vec<f64> = self
                .final_times
                .get(&subject)?
                .iter()
                .filter_map(|f| f.as_ref().ok().copied())
                .collect();
            (!figures.is_empty()).then(|| figures.iter().sum::<f64>() / figures.len() as f64)
        };
        if let Some((best, _)) = self.best {
            let best_ms = mean(FinalSubject::Kernel(best));
            let _ = writeln!(
                out,
                "\nBest kernel (candidate {best}): {} vs the initial kernel, {} vs PyTorch eager, {} vs torch.compile (means of the two passes).",
                ratio(mean(FinalSubject::Kernel(CandidateId::INITIAL)), best_ms),
                ratio(mean(FinalSubject::Eager), best_ms),
                ratio(mean(FinalSubject::Compile), best_ms)
            );
        }
        if let Some(user_test) = &self.user_test {
            let _ = writeln!(
                out,
                "\nThe user's test.py on the best kernel, staged in final/: {user_test}."
            );
        }
        let _ = writeln!(out);
    }

    fn speedup(&self, best_ms: Option<f64>) -> String {
        ratio(self.initial_ms, best_ms)
    }
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::*;

    fn record(event: Event) -> JournalRecord {
        JournalRecord {
            t: SystemTime::UNIX_EPOCH,
            event,
        }
    }

    fn finished(candidate: u64, ms: f64) -> Event {
        Event::CandidateFinished {
            candidate: CandidateId(candidate),
            parent: None,
            round: 1,
            device: DeviceId(0),
            passed: true,
            time_ms: Some(ms),
            reason: None,
            simulated: false,
            duplicate_of: None,
        }
    }

    fn profiled(candidate: u64, ms: f64) -> Event {
        Event::ProfileRecorded {
            candidate: CandidateId(candidate),
            device: DeviceId(0),
            bottleneck: "memory".into(),
            duration_ms: Some(ms),
            analysis: String::new(),
            at_roofline: false,
            details: None,
        }
    }

    #[test]
    fn an_event_time_more_than_ten_percent_from_the_profilers_is_flagged() {
        let mut summary = RunSummary::default();
        for event in [
            finished(1, 1.05),
            profiled(1, 1.00),
            finished(2, 1.25),
            profiled(2, 1.00),
        ] {
            summary.observe(&record(event));
        }
        let report = summary.render_markdown();
        assert!(
            report.contains("| 1 | 1.0500 | 1.0000 | 5.0% | ok |"),
            "{report}"
        );
        assert!(
            report.contains("| 2 | 1.2500 | 1.0000 | 25.0% | **flagged: more than 10% apart** |"),
            "{report}"
        );
    }

    #[test]
    fn the_report_names_the_candidates_that_tampered_not_those_that_were_wrong() {
        let failed = |candidate: u64, reason: &str| Event::CandidateFinished {
            candidate: CandidateId(candidate),
            parent: Some(CandidateId::INITIAL),
            round: 1,
            device: DeviceId(0),
            passed: false,
            time_ms: None,
            reason: Some(reason.into()),
            simulated: false,
            duplicate_of: None,
        };
        let mut summary = RunSummary::default();
        for event in [
            failed(
                2,
                "verification failed: 2048 of 2048 output elements exceed atol=0.01",
            ),
            failed(
                3,
                "verification failed: tampered with the evaluator's state: torch.allclose was replaced",
            ),
            failed(
                5,
                "timing failed: evaluator rejected the request: tampered with the evaluator's state: it left Python threads running: Thread-1",
            ),
        ] {
            summary.observe(&record(event));
        }
        let report = summary.render_markdown();
        assert!(
            report.contains(
                "Tampered with the evaluator's state (rejected; the evaluator restarted): candidates 3, 5."
            ),
            "{report}"
        );
    }
}
