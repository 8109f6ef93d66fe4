//! report.md and report.html, built from the journal's records alone: whatever the report says,
//! the journal shows how it was reached. `RunSummary` is the one summary of a run; report.md
//! renders it as text, report.html as the same text beside plots of it (`html`, `plots`).

mod html;
mod plots;
mod svg;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use crate::journal::{EvaluationOutcome, Event, JournalRecord, RunOutcome, Step};
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

/// A step that occupied a device, from its `step_started` to its `step_finished` (none yet: it
/// was still running at the journal's last record).
#[derive(Clone, Debug)]
struct StepSpan {
    candidate: CandidateId,
    step: Step,
    start: SystemTime,
    end: Option<SystemTime>,
}

#[derive(Clone, Debug, Default)]
struct DeviceTime {
    name: String,
    /// What the device's evaluator last said it sees: name, UUID, PCI bus id, versions.
    seen: Option<String>,
    spans: Vec<StepSpan>,
    /// The spans still open, by candidate and step: indices into `spans`.
    open: BTreeMap<(CandidateId, &'static str), usize>,
}

/// Why a candidate failed, as the plots mark it: from its last `evaluated` record's outcome,
/// its `candidate_finished` reason (tampering) and `duplicate_of`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum FailureKind {
    WrongOutput,
    Tampered,
    Crashed,
    WorkerDied,
    Unstartable,
    /// Its device was lost with no live device left to run it on.
    DeviceLost,
    Duplicate,
    /// No evaluation attempt was journaled: no code came, a request failed, or the journal is
    /// of version 1 (which had no `evaluated` records).
    NotEvaluated,
}

impl FailureKind {
    fn of(
        reason: &str,
        duplicate_of: Option<CandidateId>,
        last_evaluation: Option<EvaluationOutcome>,
    ) -> FailureKind {
        if duplicate_of.is_some() {
            return FailureKind::Duplicate;
        }
        if is_tampering(reason) {
            return FailureKind::Tampered;
        }
        match last_evaluation {
            Some(EvaluationOutcome::WrongOutput) => FailureKind::WrongOutput,
            Some(EvaluationOutcome::Failed) => FailureKind::Crashed,
            Some(EvaluationOutcome::WorkerDied) => FailureKind::WorkerDied,
            Some(EvaluationOutcome::Unstartable) => FailureKind::Unstartable,
            Some(EvaluationOutcome::DeviceLost) => FailureKind::DeviceLost,
            Some(EvaluationOutcome::Verified) | None => FailureKind::NotEvaluated,
        }
    }

    /// The name the report's SVG gives it (`data-reason`).
    fn name(self) -> &'static str {
        match self {
            FailureKind::WrongOutput => "wrong_output",
            FailureKind::Tampered => "tampered",
            FailureKind::Crashed => "crashed",
            FailureKind::WorkerDied => "worker_died",
            FailureKind::Unstartable => "unstartable",
            FailureKind::DeviceLost => "device_lost",
            FailureKind::Duplicate => "duplicate",
            FailureKind::NotEvaluated => "not_evaluated",
        }
    }

    fn label(self) -> &'static str {
        match self {
            FailureKind::WrongOutput => "wrong output",
            FailureKind::Tampered => "tampered with the evaluator",
            FailureKind::Crashed => "crashed, timed out or could not be timed",
            FailureKind::WorkerDied => "its worker died",
            FailureKind::Unstartable => "its evaluator could not start",
            FailureKind::DeviceLost => "its device was lost, and every other",
            FailureKind::Duplicate => "a duplicate of an earlier candidate",
            FailureKind::NotEvaluated => "not evaluated (no code, a failed request)",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Fate {
    Verified { time_ms: f64 },
    Failed { kind: FailureKind, reason: String },
}

/// A candidate whose fate the journal records.
#[derive(Clone, Debug)]
struct FinishedCandidate {
    parent: Option<CandidateId>,
    round: u32,
    device: DeviceId,
    finished: SystemTime,
    fate: Fate,
}

/// Everything the report needs, accumulated record by record.
#[derive(Clone, Debug, Default)]
pub struct RunSummary {
    started: Option<SystemTime>,
    finished: Option<SystemTime>,
    /// The latest record's time: where a run still going (or killed) has got to.
    last_record: Option<SystemTime>,
    configuration: Vec<(String, String)>,
    strategy: String,
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
    /// Every candidate with a `candidate_finished` record, and the outcome of each candidate's
    /// latest evaluation attempt (what its failure is marked by).
    candidates: BTreeMap<CandidateId, FinishedCandidate>,
    last_evaluations: BTreeMap<CandidateId, EvaluationOutcome>,
    /// The beam as the latest `beam_updated` left it.
    beam: Vec<CandidateId>,
    outcome: Option<(RunOutcome, String)>,
    best: Option<(CandidateId, f64)>,
    /// Candidates rejected for tampering with the evaluator's state, in journal order.
    tampering: Vec<CandidateId>,
    worker_deaths: Vec<String>,
    /// The devices lost for good (their node failed), when, and why.
    devices_lost: Vec<String>,
    profiling_note: Option<String>,
}

/// report.md and report.html of one moment of a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenderedReport {
    pub markdown: String,
    pub html: String,
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
        self.last_record = Some(self.last_record.map_or(record.t, |last| last.max(record.t)));
        self.observe_for_plots(record);
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
                self.strategy = strategy.clone();
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
                    self.devices.entry(device.device).or_default().name = match &device.node {
                        Some(_) => format!("{} on {}", device.name, device.location()),
                        None => device.name.clone(),
                    };
                }
            }
            Event::StepStarted {
                candidate,
                device,
                step,
                ..
            } => {
                let device_time = self.devices.entry(*device).or_default();
                device_time
                    .open
                    .insert((*candidate, step_key(*step)), device_time.spans.len());
                device_time.spans.push(StepSpan {
                    candidate: *candidate,
                    step: *step,
                    start: record.t,
                    end: None,
                });
            }
            Event::StepFinished {
                candidate,
                device,
                step,
                ..
            } => {
                let device_time = self.devices.entry(*device).or_default();
                if let Some(index) = device_time.open.remove(&(*candidate, step_key(*step))) {
                    device_time.spans[index].end = Some(record.t);
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
            Event::DevicesLost { devices, reason } => {
                let after = self
                    .started
                    .and_then(|started| record.t.duration_since(started).ok())
                    .unwrap_or_default();
                let names: Vec<String> = devices
                    .iter()
                    .map(|device| match self.devices.get(device) {
                        Some(time) if !time.name.is_empty() => format!("{device} ({})", time.name),
                        _ => device.to_string(),
                    })
                    .collect();
                self.devices_lost.push(format!(
                    "{} at {} ({:.1} s into the run): {reason}",
                    names.join(", "),
                    crate::journal::format_utc_millis(record.t),
                    after.as_secs_f64()
                ));
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

    /// What only the plots need: each candidate's fate, each evaluation's outcome, the beam.
    fn observe_for_plots(&mut self, record: &JournalRecord) {
        match &record.event {
            Event::Evaluated {
                candidate, outcome, ..
            } => {
                self.last_evaluations.insert(*candidate, *outcome);
            }
            Event::CandidateFinished {
                candidate,
                parent,
                round,
                device,
                passed,
                time_ms,
                reason,
                duplicate_of,
                ..
            } => {
                let fate = match (passed, time_ms) {
                    (true, Some(time_ms)) => Fate::Verified { time_ms: *time_ms },
                    _ => {
                        let reason = reason
                            .clone()
                            .unwrap_or_else(|| "passed, but no time was recorded".into());
                        let last_evaluation = self.last_evaluations.get(candidate).copied();
                        Fate::Failed {
                            kind: FailureKind::of(&reason, *duplicate_of, last_evaluation),
                            reason,
                        }
                    }
                };
                self.candidates.insert(
                    *candidate,
                    FinishedCandidate {
                        parent: *parent,
                        round: *round,
                        device: *device,
                        finished: record.t,
                        fate,
                    },
                );
            }
            Event::BeamUpdated { beam, .. } => {
                self.beam = beam.iter().map(|member| member.candidate).collect();
            }
            _ => {}
        }
    }

    /// Whether the journal has its `run_finished` record. Without one the run is still going,
    /// or was killed.
    pub fn is_finished(&self) -> bool {
        self.outcome.is_some()
    }

    /// Where the journal ends: `run_finished`, or the latest record of a run still going.
    fn end(&self) -> Option<SystemTime> {
        self.finished.or(self.last_record)
    }

    fn wall_time(&self) -> Duration {
        match (self.started, self.end()) {
            (Some(start), Some(end)) => end.duration_since(start).unwrap_or_default(),
            _ => Duration::ZERO,
        }
    }

    /// The journal's end in seconds since the start.
    fn end_seconds(&self) -> f64 {
        self.end().map_or(0.0, |end| self.seconds_since_start(end))
    }

    /// Seconds from the run's start to `t`, the plots' time axis.
    fn seconds_since_start(&self, t: SystemTime) -> f64 {
        self.started
            .and_then(|start| t.duration_since(start).ok())
            .map_or(0.0, |since| since.as_secs_f64())
    }

    /// When a device was busy, in seconds since the start: its steps' spans with overlaps
    /// merged, a step still open at the journal's end counted up to it.
    fn busy_intervals(&self, device: &DeviceTime) -> Vec<(f64, f64)> {
        let end = self.end_seconds();
        let mut spans: Vec<(f64, f64)> = device
            .spans
            .iter()
            .map(|span| {
                let start = self.seconds_since_start(span.start);
                let stop = span.end.map_or(end, |t| self.seconds_since_start(t));
                (start, stop.max(start))
            })
            .collect();
        spans.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut merged: Vec<(f64, f64)> = Vec::new();
        for (start, stop) in spans {
            match merged.last_mut() {
                Some(last) if start <= last.1 => last.1 = last.1.max(stop),
                _ => merged.push((start, stop)),
            }
        }
        merged
    }

    /// Each device's busy fraction: time verifying, timing or profiling over the run's wall time
    /// (up to the journal's last record for a run still going).
    pub fn busy_fractions(&self) -> BTreeMap<DeviceId, f64> {
        let wall = self.wall_time().as_secs_f64();
        self.devices
            .iter()
            .map(|(device, time)| {
                let busy: f64 = self
                    .busy_intervals(time)
                    .iter()
                    .map(|(start, stop)| stop - start)
                    .sum();
                let fraction = if wall > 0.0 { busy / wall } else { 0.0 };
                (*device, fraction)
            })
            .collect()
    }

    /// report.md and report.html: the same tables, the page with the plots beside them.
    pub fn render(&self) -> RenderedReport {
        let markdown = self.render_markdown();
        let html = html::page(self, &markdown);
        RenderedReport { markdown, html }
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
        } else if let Some(last) = self.last_record {
            let _ = writeln!(
                out,
                "Still going, or killed: no run_finished record yet; the journal's last record is from {} ({:.1} s after the start).\n",
                crate::journal::format_utc_millis(last),
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
        if !self.devices_lost.is_empty() {
            let _ = writeln!(
                out,
                "\n## Devices lost\n\nRetired from the run; what they had in flight ran again on a live device.\n"
            );
            for lost in &self.devices_lost {
                let _ = writeln!(out, "- {lost}");
            }
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

    /// Issue 14: the report says which devices were lost, when and why.
    #[test]
    fn the_report_names_the_devices_lost_with_their_nodes_and_when() {
        let device = |id: u32, index: u32| crate::journal::DeviceDescription {
            device: DeviceId(id),
            name: "NVIDIA H200".into(),
            uuid: None,
            node: Some("n2".into()),
            index: Some(index),
            step: Some("7.1".into()),
        };
        let started = Event::RunStarted {
            strategy: "nvidia".into(),
            platform: "nvidia".into(),
            simulated: false,
            search: "beam_search".into(),
            num_top_kernels: 1,
            num_bottlenecks: 2,
            max_rounds: 1,
            devices: vec![device(0, 0), device(1, 1)],
            initial_source: String::new(),
        };
        let lost = JournalRecord {
            t: SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(12_500),
            event: Event::DevicesLost {
                devices: vec![DeviceId(0), DeviceId(1)],
                reason: "the agent of node n2 stopped answering".into(),
            },
        };
        let mut summary = RunSummary::default();
        summary.observe(&record(started));
        summary.observe(&lost);
        let report = summary.render_markdown();
        assert!(
            report.contains(
                "- 0 (NVIDIA H200 on n2:0), 1 (NVIDIA H200 on n2:1) at 1970-01-01T00:00:12.500Z (12.5 s into the run): the agent of node n2 stopped answering"
            ),
            "{report}"
        );
    }
}
