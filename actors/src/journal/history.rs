//! What a journal says of the processes that wrote it, for the one that resumes the run: the
//! search time they spent (each process's span, from its `run_started` or `run_resumed` to its
//! last record: the gaps between a death and a resume are not counted), how the last one ended,
//! what was being evaluated at its death and at the death before, the order the code requests
//! were sent in, and the dollars the replies cost.

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

use super::{Event, JournalRecord, RunOutcome, Step};
use crate::model::CandidateId;

#[derive(Clone, Debug, PartialEq)]
pub struct History {
    pub time_spent: Duration,
    /// The time of the journal's last record: the previous process was alive then.
    pub last_record_at: SystemTime,
    /// `killed` (no `run_finished`), or the outcome and reason it finished with.
    pub previous_end: String,
    /// How the last process finished, if it did.
    pub finished: Option<(RunOutcome, String)>,
    /// Whether the last process was stopped from outside the search (`stopped`: a record that
    /// could not be written, a full disk), so that a `failed` end is the disk's, not the search's.
    pub stopped: bool,
    /// The candidates whose evaluation was under way on a device (a verify or time step
    /// started, no result since) when the last process died and when the one before it died:
    /// a kernel that may take the node down. One only queued for its device at either death is
    /// not among them, nor one whose evaluation ended in between.
    pub in_flight_at_two_deaths: BTreeSet<CandidateId>,
    /// Every request for code (a proposal or a refinement), in the order it was journaled:
    /// the replay provider hands its files out in this order.
    pub code_requests: Vec<String>,
    pub spent_usd: f64,
}

impl History {
    /// Whether the run may be resumed: it was killed, interrupted, or stopped for a full disk;
    /// why not, and what to do instead, otherwise. A run whose search failed (the initial kernel
    /// failed verification, no request of the first round was answered) would fail again at
    /// once: a new run, with what made it fail fixed, is the way on.
    pub fn resumable(&self) -> Result<(), String> {
        match &self.finished {
            Some((RunOutcome::Completed, reason)) => Err(format!(
                "the run completed ({reason}); there is nothing left to do"
            )),
            Some((RunOutcome::Refused, reason)) => Err(format!(
                "the run was refused ({reason}); there is nothing left to do"
            )),
            Some((RunOutcome::Failed, reason)) if !self.stopped => Err(format!(
                "the run failed ({reason}), and a failed search fails again when resumed; \
                 start a new run (`kactors run`) once what made it fail is fixed"
            )),
            _ => Ok(()),
        }
    }
}

/// The history of the records of one journal, in order. None for a journal with no record.
pub fn history(records: &[JournalRecord]) -> Option<History> {
    let last_record_at = records.last()?.t;
    let mut time_spent = Duration::ZERO;
    let mut segment: Option<(SystemTime, SystemTime)> = None;
    let mut finished = None;
    let mut stopped = false;
    // The evaluations under way in the process the records are of, and those under way when
    // the process before it died.
    let mut on_device = BTreeSet::new();
    let mut on_device_at_previous_death = BTreeSet::new();
    let mut code_requests = Vec::new();
    let mut spent_usd = 0.0;
    let mut close = |segment: Option<(SystemTime, SystemTime)>| {
        if let Some((start, end)) = segment {
            time_spent += end.duration_since(start).unwrap_or_default();
        }
    };
    for record in records {
        match &record.event {
            Event::RunStarted { .. } => {
                close(segment.take());
                segment = Some((record.t, record.t));
                finished = None;
                stopped = false;
                on_device.clear();
                on_device_at_previous_death.clear();
            }
            Event::RunResumed { .. } => {
                close(segment.take());
                segment = Some((record.t, record.t));
                finished = None;
                stopped = false;
                on_device_at_previous_death = std::mem::take(&mut on_device);
            }
            Event::RunFinished {
                outcome, reason, ..
            } => {
                finished = Some((*outcome, reason.clone()));
                // A process that finished ended its evaluations itself: it did not die.
                on_device.clear();
            }
            Event::Stopped { .. } => stopped = true,
            Event::StepStarted {
                candidate,
                step: Step::Verify | Step::Time,
                ..
            } => {
                on_device.insert(*candidate);
            }
            Event::Evaluated { candidate, .. } => {
                on_device.remove(candidate);
                on_device_at_previous_death.remove(candidate);
            }
            Event::ProposalRequested { request_id, .. } => code_requests.push(request_id.clone()),
            Event::ProposalReceived { cost_usd, .. }
            | Event::AnalysisReceived { cost_usd, .. }
            | Event::ReflexionReceived { cost_usd, .. } => {
                spent_usd += cost_usd
                    .filter(|cost| cost.is_finite() && *cost > 0.0)
                    .unwrap_or(0.0);
            }
            _ => {}
        }
        if let Some((_, end)) = &mut segment {
            *end = (*end).max(record.t);
        }
    }
    close(segment);
    Some(History {
        time_spent,
        last_record_at,
        previous_end: finished.as_ref().map_or_else(
            || "killed".to_string(),
            |(outcome, reason)| format!("{}: {reason}", outcome.name()),
        ),
        finished,
        stopped,
        in_flight_at_two_deaths: on_device
            .intersection(&on_device_at_previous_death)
            .copied()
            .collect(),
        code_requests,
        spent_usd,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::ReplyOutcome;
    use crate::model::{DeviceId, RequestKind};

    fn at(seconds: u64, event: Event) -> JournalRecord {
        JournalRecord {
            t: SystemTime::UNIX_EPOCH + Duration::from_secs(seconds),
            event,
        }
    }

    fn started() -> Event {
        crate::journal::samples::run_started("")
    }

    fn finished(outcome: RunOutcome, reason: &str) -> Event {
        Event::RunFinished {
            outcome,
            reason: reason.into(),
            best_candidate: None,
            best_ms: None,
            initial_ms: None,
            resume: None,
        }
    }

    fn resumed(in_flight: &[u64]) -> Event {
        Event::RunResumed {
            previous_end: "killed".into(),
            gap_s: 0.0,
            in_flight: in_flight.iter().copied().map(CandidateId).collect(),
            pending_requests: Vec::new(),
            recovered: Vec::new(),
            orphans_ended: 0,
            torn_line: false,
            forced_changes: Vec::new(),
        }
    }

    fn requested(candidate: u64) -> Event {
        Event::ProposalRequested {
            candidate: CandidateId(candidate),
            parent: CandidateId::INITIAL,
            round: 1,
            device: DeviceId(0),
            request_id: format!("r1-c{candidate}"),
            kind: RequestKind::Optimize,
            model: None,
        }
    }

    fn received(candidate: u64, cost_usd: Option<f64>) -> Event {
        Event::ProposalReceived {
            candidate: CandidateId(candidate),
            parent: CandidateId::INITIAL,
            round: 1,
            device: DeviceId(0),
            request_id: format!("r1-c{candidate}"),
            attempt: 0,
            outcome: ReplyOutcome::NoCode,
            truncated: false,
            usage: None,
            cost_usd,
            error: None,
            code: None,
            reply: None,
            latency_s: None,
        }
    }

    #[test]
    fn search_time_is_each_process_span_and_the_gaps_are_not_counted() {
        let records = [
            at(100, started()),
            at(110, requested(1)),
            at(130, received(1, Some(0.5))),
            // killed at 130; resumed an hour later
            at(3730, resumed(&[4, 5])),
            at(3735, requested(2)),
            at(3740, received(2, Some(0.25))),
        ];
        let history = history(&records).unwrap();
        assert_eq!(history.time_spent, Duration::from_secs(30 + 10));
        assert_eq!(
            history.last_record_at,
            SystemTime::UNIX_EPOCH + Duration::from_secs(3740)
        );
        assert_eq!(history.previous_end, "killed");
        assert_eq!(history.finished, None);
        assert_eq!(history.code_requests, ["r1-c1", "r1-c2"]);
        assert!((history.spent_usd - 0.75).abs() < 1e-12);
    }

    fn step(candidate: u64, step: Step) -> Event {
        Event::StepStarted {
            candidate: CandidateId(candidate),
            parent: Some(CandidateId::INITIAL),
            round: 1,
            device: DeviceId(0),
            step,
        }
    }

    fn evaluated(candidate: u64) -> Event {
        Event::Evaluated {
            candidate: CandidateId(candidate),
            parent: Some(CandidateId::INITIAL),
            round: 1,
            device: DeviceId(0),
            attempt: 0,
            outcome: crate::journal::EvaluationOutcome::Verified,
            time_ms: Some(1.0),
            provenance: None,
            reason: None,
            launched_kernels: Vec::new(),
            seconds: None,
            floor_ms: None,
            speed_of_light_pct: None,
            compiled: None,
        }
    }

    #[test]
    fn only_an_evaluation_under_way_at_two_deaths_in_a_row_is_in_flight_twice() {
        let history = |records: &[Event]| {
            let records: Vec<JournalRecord> =
                records.iter().cloned().map(|event| at(0, event)).collect();
            super::history(&records).unwrap().in_flight_at_two_deaths
        };
        // 1 on the device at both deaths; 2 queued behind it both times; 3 on the device at
        // the first death, then verified and refined, and on the device again at the second.
        let twice = history(&[
            started(),
            step(1, Step::Verify),
            step(3, Step::Time),
            resumed(&[1, 2, 3]),
            step(1, Step::Verify),
            step(3, Step::Verify),
            evaluated(3),
            step(3, Step::Verify),
        ]);
        assert_eq!(twice, BTreeSet::from([CandidateId(1)]));
        // A profile that was running is no evaluation; a process that finished did not die.
        let none = history(&[
            started(),
            step(1, Step::Profile),
            step(2, Step::Verify),
            finished(RunOutcome::Interrupted, "interrupted by SIGINT"),
            resumed(&[2]),
            step(1, Step::Profile),
            step(2, Step::Verify),
        ]);
        assert!(none.is_empty(), "{none:?}");
    }

    #[test]
    fn a_process_that_finished_says_how_and_costs_from_outside_are_not_trusted() {
        let records = [
            at(0, started()),
            at(1, received(1, Some(f64::NAN))),
            at(2, received(2, Some(-3.0))),
            at(
                5,
                finished(RunOutcome::Interrupted, "interrupted by SIGTERM"),
            ),
        ];
        let history = history(&records).unwrap();
        assert_eq!(history.previous_end, "interrupted: interrupted by SIGTERM");
        assert_eq!(history.resumable(), Ok(()));
        assert_eq!(history.spent_usd, 0.0);
        assert_eq!(history.time_spent, Duration::from_secs(5));
        assert!(super::history(&[]).is_none());
    }

    #[test]
    fn a_failed_search_is_not_resumed_but_a_run_stopped_for_its_records_is() {
        let failed = [
            at(0, started()),
            at(
                1,
                finished(RunOutcome::Failed, "the initial kernel failed verification"),
            ),
        ];
        let why = history(&failed).unwrap().resumable().unwrap_err();
        assert!(
            why.contains("the initial kernel failed verification"),
            "{why}"
        );
        assert!(why.contains("start a new run"), "{why}");
        let full_disk = [
            at(0, started()),
            at(
                1,
                Event::Stopped {
                    reason: "failed to write the journal: no space left on device".into(),
                },
            ),
            at(2, finished(RunOutcome::Failed, "no space left on device")),
        ];
        assert_eq!(history(&full_disk).unwrap().resumable(), Ok(()));
        let failed_after_a_resume = [
            full_disk[0].clone(),
            full_disk[1].clone(),
            full_disk[2].clone(),
            at(3, resumed(&[])),
            at(4, finished(RunOutcome::Failed, "every device was lost")),
        ];
        assert!(
            history(&failed_after_a_resume)
                .unwrap()
                .resumable()
                .is_err()
        );
    }
}
