//! report.md and report.html, built from the journal's records alone: whatever the report says,
//! the journal shows how it was reached. `RunSummary` is the one summary of a run; report.md
//! renders it as text, report.html as the same text beside plots of it (`html`, `plots`).

mod clock;
mod headline;
mod html;
mod lineage;
mod markdown;
mod models;
mod plots;
mod source;
mod startup;
mod svg;
#[cfg(test)]
mod tests;
mod timeline;
mod verification;

use std::collections::{BTreeMap, BTreeSet};
use std::time::SystemTime;

pub use headline::{BestFigures, Headline};
use markdown::table_cell;

use crate::journal::{EvaluationOutcome, Event, JournalRecord, RoundSummary, RunOutcome, Step};
use crate::model::{CandidateId, DeviceId, Reference, SAME_COMPILED_CODE, is_tampering};

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
    /// Its place among the journal's `candidate_finished` records: two stamped in the same
    /// millisecond keep the journal's order.
    order: usize,
    fate: Fate,
}

/// How many of the fastest candidates' code the report keeps (`RunSummary::sources`): far more
/// than a beam is wide.
const CODE_KEPT: usize = 64;

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
    /// What the sandbox of candidate code had: the setting and one line per protection.
    sandbox: Option<crate::journal::SandboxRecord>,
    initial_ms: Option<f64>,
    /// The seed the search started from, in a run that began with generation (the best of
    /// round 0's beam): it stands where the initial kernel stands otherwise.
    start_seed: Option<CandidateId>,
    /// Generation's seeds (round 0) as planned, and those that ended: passed or why not.
    seeds: BTreeSet<CandidateId>,
    seeds_ended: BTreeMap<CandidateId, Option<String>>,
    eager_ms: Option<f64>,
    compile_ms: Option<f64>,
    /// The finale's figures by what was timed, one per pass; errors kept as text.
    final_times: BTreeMap<FinalSubject, Vec<Result<f64, String>>>,
    user_test: Option<String>,
    /// Each verified candidate's event-timed median, and the device time its profile measured.
    event_times: BTreeMap<CandidateId, f64>,
    profile_times: BTreeMap<CandidateId, f64>,
    rounds: BTreeMap<u32, RoundSummary>,
    devices: BTreeMap<DeviceId, DeviceTime>,
    /// Every candidate with a `candidate_finished` record, and the outcome of each candidate's
    /// latest evaluation attempt (what its failure is marked by).
    candidates: BTreeMap<CandidateId, FinishedCandidate>,
    /// The `candidate_finished` records seen so far: the next one's `order`.
    finished_seen: usize,
    last_evaluations: BTreeMap<CandidateId, EvaluationOutcome>,
    /// The beam as the latest `beam_updated` left it.
    beam: Vec<CandidateId>,
    outcome: Option<(RunOutcome, String)>,
    /// The best kernel `run_finished` names: after a finale, the fastest that passed its
    /// re-check.
    finished_best: Option<(CandidateId, f64)>,
    /// `kactors resume <dir>`: named by an interrupted run's `run_finished`, or given by whoever
    /// renders the report of a run that may have been killed.
    resume_command: Option<String>,
    /// The latest code of the initial kernel (from `run_started`), of each candidate not yet
    /// finished, and of the `CODE_KEPT` fastest that passed: the best's is shown at the top of
    /// report.html, and the best is among them (only the finale's re-check can pass over the
    /// fastest, and it re-checks the beam).
    sources: BTreeMap<CandidateId, String>,
    /// The candidates whose code is kept for being fast, by time (a time's bits order as the
    /// times do: they are not negative).
    fastest: BTreeSet<(u64, CandidateId)>,
    /// Each candidate's parent and which of the parent's proposals it is, and each parent's
    /// analysed bottlenecks in the order the proposals take them: the lineage's labels.
    planned: BTreeMap<CandidateId, (CandidateId, u32)>,
    analyses: BTreeMap<CandidateId, Vec<String>>,
    /// Kernels that failed the finale's re-check: never the best.
    recheck_failed: BTreeSet<CandidateId>,
    /// Candidates rejected for tampering with the evaluator's state, in journal order.
    tampering: Vec<CandidateId>,
    worker_deaths: Vec<String>,
    /// The devices lost for good (their node failed), when, and why.
    devices_lost: Vec<String>,
    /// Why each node's agent is being started again, until it is.
    agents_restarting: BTreeMap<String, String>,
    /// Each node agent started again: which node and devices, when, and after what.
    agent_restarts: Vec<String>,
    profiling_note: Option<String>,
    /// Each resume after a death, and each limit reached, in journal order.
    resumes: Vec<clock::Resume>,
    limits: Vec<clock::LimitReached>,
    /// The run directory's latest measurement: when, and its bytes.
    run_dir_bytes: Option<(SystemTime, u64)>,
    /// Candidates whose caches were removed, and the bytes they held.
    caches_removed: (usize, u64),
    /// How kernels were judged: tolerances, the speed of light, the finale's re-check.
    verification: verification::Verification,
    /// What each model did, in a run of several.
    models: models::Models,
    /// The run's start-up, up to its first request and PyTorch's references.
    startup: startup::Startup,
    /// Duplicates of an earlier candidate: by their code's tokens (not evaluated), and by their
    /// compiled code (verified, not timed).
    token_duplicates: u32,
    compiled_duplicates: u32,
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

impl RunSummary {
    /// The kernel the search started from: the initial kernel, or generation's best seed.
    fn start(&self) -> CandidateId {
        self.start_seed.unwrap_or(CandidateId::INITIAL)
    }

    /// What the report calls the kernel the search started from.
    fn start_name(&self) -> String {
        match self.start_seed {
            Some(seed) => format!("seed {seed}, the search's start"),
            None => "initial kernel".into(),
        }
    }

    /// Devices by id and, where the device table names them, by name and place.
    fn device_names(&self, devices: &[DeviceId]) -> String {
        let names: Vec<String> = devices
            .iter()
            .map(|device| match self.devices.get(device) {
                Some(time) if !time.name.is_empty() => format!("{device} ({})", time.name),
                _ => device.to_string(),
            })
            .collect();
        names.join(", ")
    }

    /// A record's time, and how far into the run it is.
    fn moment(&self, t: SystemTime) -> String {
        format!(
            "{} ({:.1} s into the run)",
            crate::journal::format_utc_millis(t),
            self.seconds_since_start(t)
        )
    }

    pub fn observe(&mut self, record: &JournalRecord) {
        let before = self.last_record;
        self.last_record = Some(before.map_or(record.t, |last| last.max(record.t)));
        self.observe_for_plots(record);
        self.observe_downtime(record, before);
        self.verification.observe(&record.event);
        self.models.observe(&record.event);
        self.startup.observe(record);
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
        if let Event::CandidateFinished { candidate, .. } = &record.event {
            self.forget_code_unless_among_the_fastest(*candidate);
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
                initial_source,
                sandbox,
            } => {
                self.started = Some(record.t);
                self.sources
                    .insert(CandidateId::INITIAL, initial_source.clone());
                self.strategy = strategy.clone();
                self.simulated = *simulated;
                self.sandbox = sandbox.clone();
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
            Event::CandidatePlanned {
                candidate,
                kind: crate::journal::CandidateKind::Seed,
                ..
            } => {
                self.seeds.insert(*candidate);
            }
            Event::CandidateFinished {
                candidate,
                passed,
                reason,
                ..
            } if self.seeds.contains(candidate) => {
                let why = (!passed).then(|| reason.clone().unwrap_or_default());
                self.seeds_ended.insert(*candidate, why);
            }
            Event::BeamUpdated { round: 0, beam } => {
                self.start_seed = beam.first().map(|member| member.candidate);
            }
            Event::CandidateFinished {
                candidate,
                passed: false,
                reason: Some(reason),
                ..
            } if is_tampering(reason) => {
                self.tampering.push(*candidate);
            }
            Event::CandidateFinished {
                duplicate_of: Some(_),
                reason,
                ..
            } => {
                if reason
                    .as_deref()
                    .is_some_and(|reason| reason.starts_with(SAME_COMPILED_CODE))
                {
                    self.compiled_duplicates += 1;
                } else {
                    self.token_duplicates += 1;
                }
            }
            Event::RoundFinished(summary) => {
                self.rounds.insert(summary.round, summary.clone());
            }
            Event::FinalRechecked {
                candidate,
                passed: false,
                ..
            } => {
                self.recheck_failed.insert(*candidate);
            }
            Event::DevicesLost { devices, reason } => {
                self.devices_lost.push(format!(
                    "{} at {}: {reason}",
                    self.device_names(devices),
                    self.moment(record.t)
                ));
            }
            Event::AgentRestarting { node, reason, .. } => {
                self.agents_restarting.insert(node.clone(), reason.clone());
            }
            Event::AgentRestarted {
                node,
                devices,
                restarts,
                step,
            } => {
                let after = self
                    .agents_restarting
                    .remove(node)
                    .map(|reason| format!(", after: {reason}"))
                    .unwrap_or_default();
                self.agent_restarts.push(format!(
                    "node {node} ({}) serving again at {}, restart {restarts}, step {step}{after}",
                    self.device_names(devices),
                    self.moment(record.t)
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
                not_run,
                ..
            } => {
                self.user_test = Some(match (passed, error, not_run) {
                    (Some(true), _, _) => format!("passed ({folder}/test.log)"),
                    (Some(false), _, _) => {
                        let ending = exit_code.map_or_else(
                            || "ended by a signal".to_string(),
                            |code| format!("with exit code {code}"),
                        );
                        format!("FAILED {ending} ({folder}/test.log)")
                    }
                    (None, Some(error), _) => format!("could not run: {error}"),
                    (None, None, Some(why)) => format!("not run: {why}"),
                    (None, None, None) => "not run: the platform runs no Python".into(),
                });
            }
            Event::EvaluatorStarted { device, ready, .. } => {
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
            Event::ProposalReceived {
                candidate,
                code: Some(code),
                ..
            } => {
                self.sources.insert(*candidate, code.clone());
            }
            Event::CandidatePlanned {
                candidate,
                parent,
                proposal_index,
                ..
            } => {
                self.planned.insert(*candidate, (*parent, *proposal_index));
            }
            Event::AnalysisReceived {
                candidate,
                bottlenecks,
                ..
            } if !bottlenecks.is_empty() => {
                self.analyses.insert(
                    *candidate,
                    bottlenecks.iter().map(|b| b.title.clone()).collect(),
                );
            }
            Event::ProfilingStopped { reason } => self.profiling_note = Some(reason.clone()),
            Event::RunDirMeasured { bytes } => self.run_dir_bytes = Some((record.t, *bytes)),
            Event::CachesRemoved { bytes, .. } => {
                self.caches_removed.0 += 1;
                self.caches_removed.1 += bytes;
            }
            Event::RunFinished {
                outcome,
                reason,
                best_candidate,
                best_ms,
                initial_ms,
                resume,
            } => {
                self.finished = Some(record.t);
                if resume.is_some() {
                    self.resume_command = resume.clone();
                }
                self.outcome = Some((*outcome, reason.clone()));
                if let (Some(candidate), Some(ms)) = (best_candidate, best_ms) {
                    self.finished_best = Some((*candidate, *ms));
                }
                if initial_ms.is_some() {
                    self.initial_ms = *initial_ms;
                }
            }
            _ => {}
        }
    }

    /// The run's best kernel: the one `run_finished` names, else (a run still going, or killed)
    /// the fastest verified candidate the journal holds, whichever round it was in.
    pub(crate) fn best(&self) -> Option<(CandidateId, f64)> {
        self.finished_best.or_else(|| {
            self.event_times
                .iter()
                .filter(|(id, _)| !self.recheck_failed.contains(id))
                .min_by(|a, b| a.1.total_cmp(b.1).then(a.0.cmp(b.0)))
                .map(|(id, ms)| (*id, *ms))
        })
    }

    /// Keeps a finished candidate's code only while it is among the `CODE_KEPT` fastest that
    /// passed: a run of 100,000 candidates would otherwise hold every kernel it made.
    fn forget_code_unless_among_the_fastest(&mut self, candidate: CandidateId) {
        if candidate == CandidateId::INITIAL {
            return;
        }
        let Some(ms) = self.event_times.get(&candidate).filter(|ms| **ms >= 0.0) else {
            self.sources.remove(&candidate);
            return;
        };
        self.fastest.insert((ms.to_bits(), candidate));
        if self.fastest.len() > CODE_KEPT
            && let Some((_, slowest)) = self.fastest.pop_last()
        {
            self.sources.remove(&slowest);
        }
    }

    /// How a reader of this run's report, should it end without `run_finished`, goes on with it.
    pub fn resume_with(&mut self, command: Option<String>) {
        self.resume_command = command;
    }

    /// Whether the journal has its `run_finished` record. Without one the run is still going,
    /// or was killed.
    pub fn is_finished(&self) -> bool {
        self.outcome.is_some()
    }

    /// report.md and report.html: the same tables, the page with the plots beside them.
    pub fn render(&self) -> RenderedReport {
        let markdown = self.render_markdown();
        let html = html::page(self, &markdown);
        RenderedReport { markdown, html }
    }
}
