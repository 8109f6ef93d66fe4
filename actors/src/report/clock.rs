//! The run's time as the report counts it: from `run_started` to the journal's end, less the
//! stretches between a process's death and its resume, when no kactors ran and no device could
//! be busy. Busy fractions are over that time, so a run killed at night and resumed in the
//! morning is not shown idle for the night.

use std::time::{Duration, SystemTime};

use crate::journal::{Event, JournalRecord};

use super::{DeviceTime, RunSummary};

/// One resume of the run: when the dead process's last record was written, when the resume
/// started, and what it found (`run_resumed`).
#[derive(Clone, Debug)]
pub(super) struct Resume {
    pub(super) down_since: SystemTime,
    pub(super) resumed_at: SystemTime,
    pub(super) previous_end: String,
    pub(super) evaluated_again: usize,
    pub(super) requests_pending: usize,
    pub(super) replies_recovered: usize,
    pub(super) orphans_ended: u32,
    pub(super) torn_line: bool,
    pub(super) forced_changes: Vec<String>,
}

/// A limit the run reached (`limit_reached`): when, which, why, and whether the evaluations in
/// flight were cancelled after their grace.
#[derive(Clone, Debug)]
pub(super) struct LimitReached {
    pub(super) at: SystemTime,
    pub(super) limit: String,
    pub(super) reason: String,
    pub(super) evaluations_cancelled: bool,
}

impl RunSummary {
    /// Resumes and limits. `before` is the latest record's time before this one: at a resume,
    /// the dead process's last record, where its open steps are closed (whatever they were doing
    /// ended with it).
    pub(super) fn observe_downtime(&mut self, record: &JournalRecord, before: Option<SystemTime>) {
        match &record.event {
            Event::RunResumed {
                previous_end,
                in_flight,
                pending_requests,
                recovered,
                orphans_ended,
                torn_line,
                forced_changes,
                ..
            } => {
                let down_since = before.unwrap_or(record.t).min(record.t);
                for device in self.devices.values_mut() {
                    for (_, index) in std::mem::take(&mut device.open) {
                        device.spans[index].end = Some(down_since);
                    }
                }
                self.resumes.push(Resume {
                    down_since,
                    resumed_at: record.t,
                    previous_end: previous_end.clone(),
                    evaluated_again: in_flight.len(),
                    requests_pending: pending_requests.len(),
                    replies_recovered: recovered.len(),
                    orphans_ended: *orphans_ended,
                    torn_line: *torn_line,
                    forced_changes: forced_changes.clone(),
                });
            }
            Event::LimitReached {
                limit,
                reason,
                evaluations_cancelled,
            } => {
                // A limit is journaled when it is reached, and again if the evaluations in
                // flight had to be cancelled after their grace: one line says both.
                match self.limits.iter_mut().find(|seen| seen.limit == *limit) {
                    Some(seen) => seen.evaluations_cancelled |= *evaluations_cancelled,
                    None => self.limits.push(LimitReached {
                        at: record.t,
                        limit: limit.clone(),
                        reason: reason.clone(),
                        evaluations_cancelled: *evaluations_cancelled,
                    }),
                }
            }
            _ => {}
        }
    }

    /// Where the journal ends: `run_finished`, or the latest record of a run still going.
    pub(super) fn end(&self) -> Option<SystemTime> {
        self.finished.or(self.last_record)
    }

    /// From the start to the journal's end, the stretches with no process included.
    pub(super) fn elapsed(&self) -> Duration {
        match (self.started, self.end()) {
            (Some(start), Some(end)) => end.duration_since(start).unwrap_or_default(),
            _ => Duration::ZERO,
        }
    }

    /// The stretches between a death and its resume, in seconds since the start.
    pub(super) fn down_intervals(&self) -> Vec<(f64, f64)> {
        self.resumes
            .iter()
            .map(|resume| {
                (
                    self.seconds_since_start(resume.down_since),
                    self.seconds_since_start(resume.resumed_at),
                )
            })
            .collect()
    }

    /// Seconds no process of the run ran, between a death and its resume.
    pub(super) fn down_seconds(&self) -> f64 {
        self.down_intervals()
            .iter()
            .map(|(start, stop)| (stop - start).max(0.0))
            .sum()
    }

    /// The time the run's processes ran: what busy fractions are over.
    pub(super) fn wall_time(&self) -> Duration {
        let down = Duration::try_from_secs_f64(self.down_seconds()).unwrap_or_default();
        self.elapsed().saturating_sub(down)
    }

    /// The journal's end in seconds since the start.
    pub(super) fn end_seconds(&self) -> f64 {
        self.end().map_or(0.0, |end| self.seconds_since_start(end))
    }

    /// Seconds from the run's start to `t`, the plots' time axis.
    pub(super) fn seconds_since_start(&self, t: SystemTime) -> f64 {
        self.started
            .and_then(|start| t.duration_since(start).ok())
            .map_or(0.0, |since| since.as_secs_f64())
    }

    /// When a device was busy, in seconds since the start: its steps' spans with overlaps
    /// merged, a step still open at the journal's end counted up to it.
    pub(super) fn busy_intervals(&self, device: &DeviceTime) -> Vec<(f64, f64)> {
        let end = self.end_seconds();
        let spans = device.spans.iter().map(|span| {
            let start = self.seconds_since_start(span.start);
            let stop = span.end.map_or(end, |t| self.seconds_since_start(t));
            (start, stop.max(start))
        });
        merged(spans.collect())
    }

    /// Each device's busy fraction: time verifying, timing or profiling over the time the run's
    /// processes ran (up to the journal's last record for a run still going).
    pub fn busy_fractions(&self) -> std::collections::BTreeMap<crate::model::DeviceId, f64> {
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
}

/// Intervals sorted, overlapping ones joined.
pub(super) fn merged(mut spans: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
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
