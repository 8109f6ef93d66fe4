//! The journal's schema: one JSON object per line, each with `v` (schema version), `t` (UTC time
//! with milliseconds) and `type`. docs/journal.md documents every record; resume, reports and
//! later tools read it, so a change of shape is a change of `SCHEMA_VERSION`.

use std::time::SystemTime;

use serde::Serialize;

use crate::model::{CandidateId, DeviceId, Provenance, Reference, Verdict};
use crate::ports::{RequestKind, TokenUsage};

pub const SCHEMA_VERSION: u32 = 1;

/// The steps that occupy a device; their start and end records give each device's busy time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    Verify,
    Time,
    Profile,
    /// Timing PyTorch eager or torch.compile.
    Reference,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeviceDescription {
    pub device: DeviceId,
    pub name: String,
    pub uuid: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BeamMember {
    pub candidate: CandidateId,
    pub time_ms: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunOutcome {
    /// Rounds done, converged, a limit reached, or the provider exhausted: exit 0.
    Completed,
    /// The run could not do what it was asked (the initial kernel failed, credentials refused).
    Failed,
    /// SIGINT or SIGTERM.
    Interrupted,
    /// Nothing could be evaluated: the initial kernel's evaluator could not start (the
    /// problem's inputs do not fit on the device, say). Exit 2, like a refusal before the run.
    Refused,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    RunStarted {
        strategy: String,
        platform: String,
        simulated: bool,
        search: String,
        num_top_kernels: u32,
        num_bottlenecks: u32,
        max_rounds: u32,
        devices: Vec<DeviceDescription>,
    },
    RoundStarted {
        round: u32,
        parents: Vec<CandidateId>,
    },
    ProposalRequested {
        candidate: CandidateId,
        parent: CandidateId,
        round: u32,
        device: DeviceId,
        request_id: String,
        kind: RequestKind,
    },
    ProposalReceived {
        candidate: CandidateId,
        parent: CandidateId,
        round: u32,
        device: DeviceId,
        request_id: String,
        /// `code`, `no_code`, `failed` or `exhausted`.
        outcome: String,
        truncated: bool,
        usage: Option<TokenUsage>,
        cost_usd: Option<f64>,
        error: Option<String>,
    },
    /// A parent's bottleneck analysis was requested (once per kernel, when it first becomes a
    /// parent).
    AnalysisRequested {
        candidate: CandidateId,
        round: u32,
        request_id: String,
        /// The distinct bottlenecks asked for: the parent's proposals per round.
        requested: u32,
    },
    /// The analysis came back. `returned` under `requested` means the proposals beyond
    /// `returned` go without a bottleneck rather than reuse one.
    AnalysisReceived {
        candidate: CandidateId,
        round: u32,
        request_id: String,
        requested: u32,
        returned: u32,
        /// The bottlenecks' titles, in the order the proposals take them.
        bottlenecks: Vec<String>,
        usage: Option<TokenUsage>,
        cost_usd: Option<f64>,
        error: Option<String>,
    },
    /// A candidate that failed verification gets another attempt; a `proposal_requested` of
    /// kind `refine` with the same `request_id` follows.
    RefinementRequested {
        candidate: CandidateId,
        parent: CandidateId,
        round: u32,
        device: DeviceId,
        request_id: String,
        /// 1 for the first refinement.
        attempt: u32,
        max_refinements: u32,
        /// The verification failure the attempt is to fix.
        error: String,
    },
    /// A reflexion on an evaluated candidate was requested; the round does not wait for it.
    ReflexionRequested {
        candidate: CandidateId,
        parent: CandidateId,
        round: u32,
        device: DeviceId,
        request_id: String,
    },
    ReflexionReceived {
        candidate: CandidateId,
        parent: CandidateId,
        round: u32,
        device: DeviceId,
        request_id: String,
        /// The lesson later optimization prompts carry; `None` when the reply taught nothing
        /// (the replay provider's empty reflexion) or the request failed.
        lesson: Option<String>,
        usage: Option<TokenUsage>,
        cost_usd: Option<f64>,
        error: Option<String>,
    },
    StepStarted {
        candidate: CandidateId,
        parent: Option<CandidateId>,
        round: u32,
        device: DeviceId,
        step: Step,
    },
    StepFinished {
        candidate: CandidateId,
        parent: Option<CandidateId>,
        round: u32,
        device: DeviceId,
        step: Step,
        provenance: Option<Provenance>,
        verdict: Option<Verdict>,
        time_ms: Option<f64>,
        error: Option<String>,
    },
    CandidateFinished {
        candidate: CandidateId,
        parent: Option<CandidateId>,
        round: u32,
        device: DeviceId,
        passed: bool,
        time_ms: Option<f64>,
        reason: Option<String>,
        simulated: bool,
        duplicate_of: Option<CandidateId>,
    },
    ProfileRecorded {
        candidate: CandidateId,
        device: DeviceId,
        bottleneck: String,
        duration_ms: Option<f64>,
        details: serde_json::Value,
    },
    /// An evaluator started on a device and described what it sees: the device under its pin
    /// (name, UUID, PCI bus id) and its software versions.
    EvaluatorStarted {
        device: DeviceId,
        ready: serde_json::Value,
    },
    /// The end of a run that ended as planned: a kernel of the final beam, the initial kernel or
    /// a PyTorch reference timed again in one fresh evaluator, interleaved, `pass` 1 and 2.
    FinalTimed {
        pass: u32,
        candidate: Option<CandidateId>,
        reference: Option<Reference>,
        time_ms: Option<f64>,
        provenance: Option<Provenance>,
        error: Option<String>,
    },
    /// The user's test.py, run on the best kernel staged with problem.py and test.py.
    UserTestRan {
        folder: String,
        passed: Option<bool>,
        exit_code: Option<i32>,
        log: Option<String>,
        error: Option<String>,
    },
    ReferenceTimed {
        device: DeviceId,
        which: Reference,
        time_ms: Option<f64>,
        provenance: Option<Provenance>,
        error: Option<String>,
    },
    ProfilingStopped {
        reason: String,
    },
    WorkerDied {
        device: DeviceId,
        candidate: Option<CandidateId>,
        reason: String,
    },
    WorkerRestarted {
        device: DeviceId,
        restarts: u32,
    },
    ChildDeadline {
        label: String,
        /// `terminate` (SIGTERM to the group) or `kill` (SIGKILL after the grace period).
        action: String,
    },
    BeamUpdated {
        round: u32,
        beam: Vec<BeamMember>,
    },
    RoundFinished {
        round: u32,
        proposed: u32,
        verified: u32,
        failed: u32,
        duplicates: u32,
        failures: Vec<String>,
        best_candidate: CandidateId,
        best_ms: f64,
    },
    Interrupted {
        signal: String,
    },
    RunFinished {
        outcome: RunOutcome,
        reason: String,
        best_candidate: Option<CandidateId>,
        best_ms: Option<f64>,
        initial_ms: Option<f64>,
    },
}

/// One line of the journal.
#[derive(Clone, Debug, PartialEq)]
pub struct JournalRecord {
    pub t: SystemTime,
    pub event: Event,
}

impl JournalRecord {
    /// The journal line: `v`, `t`, then the event's own fields with its `type`.
    pub fn to_json(&self) -> serde_json::Value {
        let mut object = serde_json::Map::new();
        object.insert("v".into(), SCHEMA_VERSION.into());
        object.insert("t".into(), format_utc_millis(self.t).into());
        if let serde_json::Value::Object(fields) =
            serde_json::to_value(&self.event).expect("journal events serialise to JSON objects")
        {
            object.extend(fields);
        }
        serde_json::Value::Object(object)
    }
}

/// `2026-12-02T10:35:44.123Z`. Written here rather than with a date crate: it is the one format
/// the journal uses, and civil-from-days is a few lines.
pub fn format_utc_millis(t: SystemTime) -> String {
    let since_epoch = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let millis = since_epoch.as_millis();
    let seconds_total = (millis / 1000) as i64;
    let days = seconds_total.div_euclid(86_400);
    let seconds_of_day = seconds_total.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        seconds_of_day / 3600,
        (seconds_of_day / 60) % 60,
        seconds_of_day % 60,
        millis % 1000
    )
}

/// Howard Hinnant's days-to-civil algorithm for the proleptic Gregorian calendar.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn check(seconds: u64, millis: u64, expected: &str) {
        let t =
            SystemTime::UNIX_EPOCH + Duration::from_secs(seconds) + Duration::from_millis(millis);
        assert_eq!(format_utc_millis(t), expected);
    }

    #[test]
    fn utc_timestamps_have_milliseconds() {
        check(0, 0, "1970-01-01T00:00:00.000Z");
        check(951_782_400, 5, "2000-02-29T00:00:00.005Z");
        check(1_796_204_144, 123, "2026-12-02T09:35:44.123Z");
        check(4_107_542_399, 999, "2100-02-28T23:59:59.999Z");
    }

    #[test]
    fn every_record_has_version_time_and_type() {
        let record = JournalRecord {
            t: SystemTime::UNIX_EPOCH,
            event: Event::Interrupted {
                signal: "SIGINT".into(),
            },
        };
        let json = record.to_json();
        assert_eq!(json["v"], SCHEMA_VERSION);
        assert_eq!(json["t"], "1970-01-01T00:00:00.000Z");
        assert_eq!(json["type"], "interrupted");
        assert_eq!(json["signal"], "SIGINT");
    }
}
