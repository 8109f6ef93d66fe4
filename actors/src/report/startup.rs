//! report.md's start-up (issue 23): a new run's steps from the command's start to its first LLM
//! request and PyTorch's references, each as seconds after the launch. The steps before the
//! actors ran come from `startup_step` records; the rest from the records that time them anyway
//! (the initial kernel's device steps, the evaluator's start, the first `*_requested`). A
//! resumed process's start-up is not drawn: the section is the run's first.

use std::fmt::Write as _;
use std::time::SystemTime;

use crate::journal::{Event, JournalRecord, StartupStepName, Step};
use crate::model::CandidateId;

/// One step: when it began and, once it has, when it ended.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Span {
    start: SystemTime,
    end: Option<SystemTime>,
}

/// The start-up's moments, folded record by record until the first resume.
#[derive(Clone, Debug, Default)]
pub(super) struct Startup {
    launch: Option<Span>,
    preflight: Option<Span>,
    run_started: Option<SystemTime>,
    verification: Option<Span>,
    evaluator_ready: Option<SystemTime>,
    timing: Option<Span>,
    profile: Option<Span>,
    first_request: Option<SystemTime>,
    references: Option<Span>,
    resumed: bool,
}

/// Opens a step's span at its first start only (a second attempt is not the start-up's).
fn open(span: &mut Option<Span>, t: SystemTime) {
    span.get_or_insert(Span {
        start: t,
        end: None,
    });
}

fn close(span: &mut Option<Span>, t: SystemTime) {
    if let Some(span) = span.as_mut() {
        span.end.get_or_insert(t);
    }
}

fn slot(startup: &mut Startup, step: Step) -> &mut Option<Span> {
    match step {
        Step::Verify => &mut startup.verification,
        Step::Time => &mut startup.timing,
        Step::Profile => &mut startup.profile,
        Step::Reference => &mut startup.references,
    }
}

impl Startup {
    pub(super) fn observe(&mut self, record: &JournalRecord) {
        if self.resumed {
            return;
        }
        let t = record.t;
        match &record.event {
            Event::RunStarted { .. } => self.run_started = Some(t),
            Event::RunResumed { .. } => self.resumed = true,
            Event::StartupStep {
                step,
                started,
                ended,
            } => {
                let span = Some(Span {
                    start: *started,
                    end: Some(*ended),
                });
                match step {
                    StartupStepName::Launch => self.launch = span,
                    StartupStepName::Preflight => self.preflight = span,
                }
            }
            Event::StepStarted {
                candidate, step, ..
            } if *candidate == CandidateId::INITIAL => open(slot(self, *step), t),
            // The references end with the second's step; the initial kernel's other steps with
            // their first.
            Event::StepFinished {
                candidate,
                step: Step::Reference,
                ..
            } if *candidate == CandidateId::INITIAL => {
                if let Some(span) = self.references.as_mut() {
                    span.end = Some(t);
                }
            }
            Event::StepFinished {
                candidate, step, ..
            } if *candidate == CandidateId::INITIAL => close(slot(self, *step), t),
            Event::EvaluatorStarted { .. } => {
                self.evaluator_ready.get_or_insert(t);
            }
            Event::ProposalRequested { .. } | Event::AnalysisRequested { .. } => {
                self.first_request.get_or_insert(t);
            }
            _ => {}
        }
    }

    /// Where the start-up's seconds count from: the command's start, else (a journal without
    /// `startup_step`) `run_started`.
    fn origin(&self) -> Option<SystemTime> {
        self.launch.map(|span| span.start).or(self.run_started)
    }

    /// Seconds from the origin to the first request, when there was one.
    pub(super) fn first_request_s(&self) -> Option<f64> {
        Some(seconds(self.origin()?, self.first_request?))
    }

    pub(super) fn render(&self, out: &mut String) {
        let Some(origin) = self.origin() else {
            return;
        };
        let rows = [
            (
                "launch: settings, devices, preflight, run directory",
                self.launch,
            ),
            ("preflight (`kactors check`'s checks)", self.preflight),
            (
                "evaluator start and the initial kernel's verification",
                self.verification,
            ),
            ("the initial kernel's timing", self.timing),
            ("the initial kernel's profile", self.profile),
            (
                "PyTorch's references (eager, torch.compile)",
                self.references,
            ),
        ];
        if rows.iter().all(|(_, span)| span.is_none()) && self.first_request.is_none() {
            return;
        }
        let _ = writeln!(out, "\n## Start-up\n");
        let counted_from = if self.launch.is_some() {
            "the command's start"
        } else {
            "run_started (the journal has no startup_step records)"
        };
        let first = match self.first_request_s() {
            Some(s) => format!("The first LLM request went out {s:.1} s after {counted_from}"),
            None => format!("No LLM request went out yet; seconds after {counted_from}"),
        };
        let ready = self
            .evaluator_ready
            .map(|t| {
                format!(
                    "; the first evaluator was ready at {:.1} s",
                    seconds(origin, t)
                )
            })
            .unwrap_or_default();
        let _ = writeln!(out, "{first}{ready}.\n");
        let _ = writeln!(out, "| step | from (s) | to (s) | seconds |");
        let _ = writeln!(out, "|---|---:|---:|---:|");
        for (name, span) in rows {
            let Some(span) = span else {
                continue;
            };
            let from = seconds(origin, span.start);
            let (to, took) = match span.end {
                Some(end) => (
                    format!("{:.1}", seconds(origin, end)),
                    format!("{:.1}", seconds(span.start, end)),
                ),
                None => ("–".into(), "unfinished".into()),
            };
            let _ = writeln!(out, "| {name} | {from:.1} | {to} | {took} |");
        }
    }
}

/// Seconds from `from` to `to`, negative when `to` came first.
fn seconds(from: SystemTime, to: SystemTime) -> f64 {
    match to.duration_since(from) {
        Ok(after) => after.as_secs_f64(),
        Err(before) => -before.duration().as_secs_f64(),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::journal::samples::run_started;
    use crate::model::DeviceId;
    use crate::report::tests::step_event;

    fn at(seconds: f64) -> SystemTime {
        SystemTime::UNIX_EPOCH
            + Duration::from_secs(1_800_000_000)
            + Duration::from_secs_f64(seconds)
    }

    fn step(seconds: f64, step: Step, finished: bool) -> JournalRecord {
        let event = step_event(CandidateId::INITIAL, None, 0, DeviceId(0), step, finished);
        JournalRecord {
            t: at(seconds),
            event,
        }
    }

    fn record(seconds: f64, event: Event) -> JournalRecord {
        JournalRecord {
            t: at(seconds),
            event,
        }
    }

    fn startup_step(step: StartupStepName, from: f64, to: f64) -> JournalRecord {
        record(
            2.1,
            Event::StartupStep {
                step,
                started: at(from),
                ended: at(to),
            },
        )
    }

    /// Issue 23's start-up: the profile right after the initial kernel's evaluation, the first
    /// request once it is in, the references after that request.
    fn a_start_up() -> Vec<JournalRecord> {
        vec![
            record(2.1, run_started("k0")),
            startup_step(StartupStepName::Launch, 0.0, 2.0),
            startup_step(StartupStepName::Preflight, 0.5, 1.5),
            step(2.2, Step::Verify, false),
            record(
                9.0,
                Event::EvaluatorStarted {
                    device: DeviceId(0),
                    ready: serde_json::json!({}),
                    floor: None,
                },
            ),
            step(10.0, Step::Verify, true),
            step(10.0, Step::Time, false),
            step(10.4, Step::Time, true),
            step(10.5, Step::Profile, false),
            step(18.5, Step::Profile, true),
            record(
                18.5,
                Event::AnalysisRequested {
                    candidate: CandidateId::INITIAL,
                    round: 1,
                    request_id: "r1-c0-analysis".into(),
                    requested: 2,
                    model: None,
                },
            ),
            step(18.6, Step::Reference, false),
            step(21.0, Step::Reference, true),
            step(21.0, Step::Reference, false),
            step(24.0, Step::Reference, true),
        ]
    }

    fn rendered(records: &[JournalRecord]) -> String {
        let mut startup = Startup::default();
        for record in records {
            startup.observe(record);
        }
        let mut out = String::new();
        startup.render(&mut out);
        out
    }

    #[test]
    fn the_start_up_is_drawn_in_seconds_after_the_commands_start() {
        let text = rendered(&a_start_up());
        assert!(
            text.contains(
                "The first LLM request went out 18.5 s after the command's start; the first \
                 evaluator was ready at 9.0 s."
            ),
            "{text}"
        );
        for row in [
            "| launch: settings, devices, preflight, run directory | 0.0 | 2.0 | 2.0 |",
            "| preflight (`kactors check`'s checks) | 0.5 | 1.5 | 1.0 |",
            "| evaluator start and the initial kernel's verification | 2.2 | 10.0 | 7.8 |",
            "| the initial kernel's timing | 10.0 | 10.4 | 0.4 |",
            "| the initial kernel's profile | 10.5 | 18.5 | 8.0 |",
            "| PyTorch's references (eager, torch.compile) | 18.6 | 24.0 | 5.4 |",
        ] {
            assert!(text.contains(row), "{row} missing from:\n{text}");
        }
    }

    #[test]
    fn a_journal_without_startup_steps_counts_from_run_started_and_a_resume_adds_nothing() {
        let mut records: Vec<JournalRecord> = a_start_up()
            .into_iter()
            .filter(|r| !matches!(r.event, Event::StartupStep { .. }))
            .collect();
        records.insert(
            2,
            record(
                9.5,
                Event::RunResumed {
                    previous_end: "killed".into(),
                    gap_s: 1.0,
                    in_flight: Vec::new(),
                    pending_requests: Vec::new(),
                    recovered: Vec::new(),
                    orphans_ended: 0,
                    torn_line: false,
                    forced_changes: Vec::new(),
                },
            ),
        );
        let text = rendered(&records);
        assert!(
            text.contains("No LLM request went out yet; seconds after run_started"),
            "{text}"
        );
        assert!(
            text.contains(
                "| evaluator start and the initial kernel's verification | 0.1 | – | unfinished |"
            ),
            "{text}"
        );
        assert!(
            !text.contains("profile") && !text.contains("ready"),
            "{text}"
        );
    }
}
