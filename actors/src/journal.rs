//! The journal's schema: one JSON object per line, each with `v` (schema version), `t` (UTC time
//! with milliseconds) and `type`. docs/journal.md documents every record; resume, reports and
//! later tools read it, so a change of shape is a change of `SCHEMA_VERSION`.
//!
//! Records are read back too (a whole journal with `read_journal`, a whole line alone with
//! `JournalRecord::from_line`): version 2 to 4 journals rebuild the search's state, and version 1
//! journals still give a report (the fields version 2 added read as absent). Version 3 added the
//! device table's `node`, `index` and `step` (the Slurm launcher), which read as absent from
//! older journals. Version 4 lines leave out what the lines before them give (`lines`: nulls, a
//! candidate's placement said before, a kept reply's code, which is in the candidate's folder).

use std::time::{Duration, SystemTime};

use serde::{Deserialize, Deserializer, Serialize};

use crate::analysis::AnalyzedBottleneck;
use crate::civil_date::{civil_from_days, days_from_civil};
use crate::model::{
    CandidateId, CompiledCode, DeviceId, Provenance, Reference, RequestKind, TokenUsage, Verdict,
};
use crate::profile::KernelProfile;
use crate::speed_of_light::Floor;

mod history;
mod lines;
mod reading;
#[cfg(test)]
pub(crate) mod samples;
pub use history::{History, history};
pub use lines::{
    KeptCode, KeptCodeError, LineError, LineReader, LineWriter, NoKeptCode, code_file,
    code_file_name,
};
pub use reading::{JournalReadError, MAX_LINE_BYTES, TornLine, read_journal};

pub const SCHEMA_VERSION: u32 = 5;

/// The oldest journal this build reads.
pub const OLDEST_READABLE_VERSION: u32 = 1;

/// The oldest journal a resume rebuilds the search from: version 1 has no `initial_source`,
/// no `evaluated` and no proposed code in its records, so its fold is not the search it wrote.
pub const OLDEST_RESUMABLE_VERSION: u32 = 2;

/// How an LLM request ended, for every `*_received` record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplyOutcome {
    /// A request for code answered with a Python block defining `kernel_function`.
    Code,
    /// A request for code answered without one.
    NoCode,
    /// An analysis or a reflexion answered.
    Answered,
    /// Transport errors, error statuses, a prompt that cannot fit the model's window.
    Failed,
    /// The provider had nothing more (the replay provider after its last file).
    Exhausted,
    /// Not sent: the budget could be passed.
    Budget,
    /// The provider refused the credentials.
    Refused,
    /// The prompt could not be rendered: nothing was sent.
    NotRendered,
    /// The run ended before the reply came.
    Cancelled,
}

/// The start-up's steps before the actors run, which `startup_step` records time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StartupStepName {
    /// From the command's start to the actors' start: settings, kernel directory, devices, the
    /// preflight, the run directory, the platform's ports.
    Launch,
    /// `kactors check`'s checks, within the launch.
    Preflight,
}

/// A time field written as the journal's `t` is (`format_utc_millis`).
mod utc_stamp {
    use std::time::SystemTime;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(t: &SystemTime, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&super::format_utc_millis(*t))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<SystemTime, D::Error> {
        let text = String::deserialize(deserializer)?;
        super::parse_utc_millis(&text).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "{text:?} is not a UTC time such as 2026-12-02T10:35:44.123Z"
            ))
        })
    }
}

/// How an evaluation attempt of a candidate ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvaluationOutcome {
    /// Verified and timed.
    Verified,
    /// The verifier judged its output wrong: the only failure a refinement may fix.
    WrongOutput,
    /// It crashed, ran past its deadline, tampered, or its timing failed.
    Failed,
    /// The device's worker died while evaluating it; the Supervisor restarted it (or could not).
    WorkerDied,
    /// The device's evaluator could not start (the problem's inputs do not fit, say): it can
    /// evaluate nothing.
    Unstartable,
    /// The device is gone (its node failed): the candidate is not to blame and is evaluated
    /// again on a live device.
    DeviceLost,
}

/// The steps that occupy a device; their start and end records give each device's busy time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    Verify,
    Time,
    Profile,
    /// Timing PyTorch eager or torch.compile.
    Reference,
}

/// One row of the run's device table: `run_started` maps each device id the other records
/// name to the GPU it is. Under the Slurm launcher (version 3) a device also has its node,
/// Slurm's index of it there, and the node agent's step that serves it; on one node these are
/// null.
/// The sandbox a run's candidate code ran in: the `sandbox` setting and one line per
/// protection, as `kactors check` prints them ("credentials: available: ...").
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxRecord {
    pub setting: String,
    pub protections: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceDescription {
    pub device: DeviceId,
    pub name: String,
    pub uuid: Option<String>,
    #[serde(default)]
    pub node: Option<String>,
    #[serde(default)]
    pub index: Option<u32>,
    /// The step (`JOB.STEP`) of the agent that serves the device: a resume, or a new run in the
    /// same allocation, cancels a dead run's steps by these ids.
    #[serde(default)]
    pub step: Option<String>,
}

impl DeviceDescription {
    /// A device of a run on one node: no node, Slurm index or agent step.
    pub fn on_one_node(device: DeviceId, name: String, uuid: Option<String>) -> DeviceDescription {
        DeviceDescription {
            device,
            name,
            uuid,
            node: None,
            index: None,
            step: None,
        }
    }

    /// `n2:1` under the Slurm launcher (its node and Slurm's index there), else the device id.
    pub fn location(&self) -> String {
        match (&self.node, self.index) {
            (Some(node), Some(index)) => format!("{node}:{index}"),
            _ => self.device.to_string(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BeamMember {
    pub candidate: CandidateId,
    pub time_ms: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
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

impl RunOutcome {
    /// Its word in the journal: `completed`, `failed`, `interrupted`, `refused`.
    pub fn name(self) -> &'static str {
        match self {
            RunOutcome::Completed => "completed",
            RunOutcome::Failed => "failed",
            RunOutcome::Interrupted => "interrupted",
            RunOutcome::Refused => "refused",
        }
    }
}

/// A reply kept beside the candidate: its file (relative to the run directory) and the SHA-256
/// of its bytes, journaled only once the file is synced to disk.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplyFile {
    pub file: String,
    pub sha256: String,
}

/// A round's end: its counts, its failures in brief and the best kernel so far
/// (`round_finished`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RoundSummary {
    pub round: u32,
    pub proposed: u32,
    pub verified: u32,
    pub failed: u32,
    pub duplicates: u32,
    pub failures: Vec<String>,
    pub best_candidate: CandidateId,
    pub best_ms: f64,
}

/// What a candidate is: a proposal made from a parent, or a seed kernel of generation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CandidateKind {
    #[default]
    Proposal,
    Seed,
}

impl CandidateKind {
    pub fn is_proposal(&self) -> bool {
        *self == CandidateKind::Proposal
    }
}

/// The journal's records. Those the Manager writes are the search's inputs and decisions: the
/// search's state is the fold of the journal (`SearchState::apply`), the same code the live run
/// uses. Fields added by version 2 default to absent when a version 1 journal is read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
        /// input.py as the run read it: candidate 0.
        #[serde(default)]
        initial_source: String,
        /// What the sandbox of candidate code had (issue 19); absent on noop, which runs none,
        /// and in journals before it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sandbox: Option<SandboxRecord>,
    },
    RoundStarted {
        round: u32,
        parents: Vec<CandidateId>,
    },
    /// A candidate was numbered and given its parent, before anything was asked for it (it may
    /// wait for its parent's profile and analysis).
    CandidatePlanned {
        candidate: CandidateId,
        parent: CandidateId,
        round: u32,
        /// Which of the parent's proposals it is (0-based): proposal i takes bottleneck i.
        proposal_index: u32,
        /// The device it is pinned to for now (steady search picks again when its code comes).
        device: DeviceId,
        /// `seed` for a seed kernel of generation (round 0, parent 0: the problem alone);
        /// absent for a proposal made from a parent.
        #[serde(default, skip_serializing_if = "CandidateKind::is_proposal")]
        kind: CandidateKind,
        /// The model its proposal and refinements are asked of, in a run of several models
        /// (`models`, issue 22); absent in a run of one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
    },
    ProposalRequested {
        candidate: CandidateId,
        parent: CandidateId,
        round: u32,
        device: DeviceId,
        request_id: String,
        kind: RequestKind,
        /// The model asked, in a run of several models; absent in a run of one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
    },
    ProposalReceived {
        candidate: CandidateId,
        parent: CandidateId,
        round: u32,
        device: DeviceId,
        request_id: String,
        /// 0 for the proposal, N for refinement N.
        #[serde(default)]
        attempt: u32,
        outcome: ReplyOutcome,
        truncated: bool,
        usage: Option<TokenUsage>,
        cost_usd: Option<f64>,
        error: Option<String>,
        /// The code the reply proposes (outcome `code`): what is evaluated.
        #[serde(default)]
        code: Option<String>,
        #[serde(default)]
        reply: Option<ReplyFile>,
        /// Seconds from the request to its reply, as the run's clock saw them: steady search
        /// sizes the proposals it keeps asked for from these.
        #[serde(default)]
        latency_s: Option<f64>,
    },
    /// A parent's bottleneck analysis was requested (once per kernel, when it first becomes a
    /// parent).
    AnalysisRequested {
        candidate: CandidateId,
        round: u32,
        request_id: String,
        /// The distinct bottlenecks asked for: the parent's proposals per round.
        requested: u32,
        /// The model asked, in a run of several models (the first listed); absent in a run of one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
    },
    /// The analysis came back. `returned` under `requested` means the proposals beyond
    /// `returned` go without a bottleneck rather than reuse one.
    AnalysisReceived {
        candidate: CandidateId,
        round: u32,
        request_id: String,
        requested: u32,
        returned: u32,
        /// The bottlenecks in the order the proposals take them (version 1 kept their titles).
        #[serde(deserialize_with = "bottlenecks_or_titles")]
        bottlenecks: Vec<AnalyzedBottleneck>,
        #[serde(default = "answered")]
        outcome: ReplyOutcome,
        usage: Option<TokenUsage>,
        cost_usd: Option<f64>,
        error: Option<String>,
        #[serde(default)]
        reply: Option<ReplyFile>,
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
        #[serde(default = "answered")]
        outcome: ReplyOutcome,
        usage: Option<TokenUsage>,
        cost_usd: Option<f64>,
        error: Option<String>,
        #[serde(default)]
        reply: Option<ReplyFile>,
    },
    /// A reflexion that was not asked for: as many as the run allows are in flight already.
    ReflexionDropped {
        candidate: CandidateId,
        parent: CandidateId,
        round: u32,
        reason: String,
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
    /// One evaluation attempt of a candidate ended (its steps are in `step_*` records).
    Evaluated {
        candidate: CandidateId,
        parent: Option<CandidateId>,
        round: u32,
        device: DeviceId,
        /// 0 for the proposal's code, N for refinement N's; a retry after a dead worker keeps it.
        attempt: u32,
        outcome: EvaluationOutcome,
        time_ms: Option<f64>,
        provenance: Option<Provenance>,
        reason: Option<String>,
        /// The Triton kernels its verification saw launch: a profile of it measures them.
        launched_kernels: Vec<String>,
        /// Seconds the device spent on it (from the later of its dispatch and the device's
        /// previous result, to its result).
        #[serde(default)]
        seconds: Option<f64>,
        /// The device's speed of light for the problem, and `time_ms` as a percentage of it
        /// (issue 18): 100 would be at the floor.
        #[serde(default)]
        floor_ms: Option<f64>,
        #[serde(default)]
        speed_of_light_pct: Option<f64>,
        /// What its verified call ran, compiled (issue 23): a candidate verified with the
        /// fingerprint of an earlier timed one is its duplicate, and is not timed (`time_ms`
        /// null). Absent when the evaluator took none, and in older journals.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        compiled: Option<CompiledCode>,
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
        /// The roofline verdict and its evidence, as the prompts carry it.
        #[serde(default)]
        analysis: String,
        #[serde(default)]
        at_roofline: bool,
        /// The profile (docs/journal.md gives its shape); read back as absent when it has
        /// another shape, as an older journal's may.
        #[serde(default, deserialize_with = "profile_or_absent")]
        details: Option<KernelProfile>,
    },
    /// A parent's profile failed; `unavailable` means no profile can work in this run.
    ProfileFailed {
        candidate: CandidateId,
        device: DeviceId,
        error: String,
        unavailable: bool,
    },
    /// An evaluator started on a device and described what it sees: the device under its pin
    /// (name, UUID, PCI bus id) and its software versions.
    EvaluatorStarted {
        device: DeviceId,
        ready: serde_json::Value,
        /// The floor its timings are held to (issue 18): the problem's bytes over the device's
        /// peak bandwidth, or why there is none. Absent on noop and in older journals.
        #[serde(default)]
        floor: Option<Floor>,
    },
    /// A step of a new run's start-up that no other record times (issue 23), stamped with its
    /// own times, which come before the record's `t`: journaled right after `run_started`.
    StartupStep {
        step: StartupStepName,
        #[serde(with = "utc_stamp")]
        started: SystemTime,
        #[serde(with = "utc_stamp")]
        ended: SystemTime,
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
        #[serde(default)]
        floor_ms: Option<f64>,
        #[serde(default)]
        speed_of_light_pct: Option<f64>,
    },
    /// The finale's re-check (issue 18): a kernel of the final beam, or the initial kernel,
    /// verified once more in a fresh evaluator on draws no candidate saw. One that fails is not
    /// timed and leaves the final beam; the next fastest becomes the best.
    FinalRechecked {
        candidate: CandidateId,
        passed: bool,
        reason: Option<String>,
    },
    /// The user's test.py, run on the best kernel staged with problem.py and test.py.
    UserTestRan {
        folder: String,
        passed: Option<bool>,
        exit_code: Option<i32>,
        log: Option<String>,
        error: Option<String>,
        /// Why it was not run though the platform runs Python (the kernel directory has no
        /// test.py).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        not_run: Option<String>,
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
    /// A candidate can no longer become a parent: the caches its folder held (Triton's cache and
    /// the compiled binaries in it, the profilers' reports) were removed. Written by the
    /// Collector, which removed them; its code, prompts, replies and logs stay.
    CachesRemoved {
        candidate: CandidateId,
        /// What was removed, relative to the run directory.
        paths: Vec<String>,
        /// Their size, every file counted.
        bytes: u64,
    },
    /// What the run directory holds, every file counted: measured by the Collector before a
    /// report (paced by its size: 2 ms a candidate, at most a minute) and before `run_finished`.
    RunDirMeasured {
        bytes: u64,
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
    /// Devices that can serve nothing more in this run (their node failed), retired from it:
    /// nothing is placed on them again. An input.
    DevicesLost {
        devices: Vec<DeviceId>,
        reason: String,
    },
    /// A node's agent was lost and is being started again: its devices take no new work until
    /// `agent_restarted` (they serve again) or `devices_lost` (they are retired). An input.
    AgentRestarting {
        node: String,
        devices: Vec<DeviceId>,
        reason: String,
    },
    /// A node's agent, lost, was started again (`restarts` times in this process so far), as
    /// Slurm step `step`: its devices take work again. An input.
    AgentRestarted {
        node: String,
        devices: Vec<DeviceId>,
        restarts: u32,
        step: String,
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
    RoundFinished(RoundSummary),
    Interrupted {
        signal: String,
    },
    /// This process takes up a run an earlier one left (killed, interrupted, stopped): the
    /// search is the fold of the records before this one.
    RunResumed {
        /// What the previous process's journal says of its end: `killed` (no `run_finished`),
        /// or the outcome and reason it finished with.
        previous_end: String,
        /// Seconds from the journal's last record to this resume: not counted in max_time.
        gap_s: f64,
        /// The candidates being evaluated or queued for their device when the previous process
        /// ended: evaluated again, except one whose evaluation was under way on its device (a
        /// verify or time step started) at that death and at the death before.
        in_flight: Vec<CandidateId>,
        /// The LLM requests without a reply when it ended: sent again, or answered from a reply
        /// kept on disk (`recovered`).
        pending_requests: Vec<String>,
        recovered: Vec<String>,
        /// Process groups of the dead process's children found still running, and ended.
        orphans_ended: u32,
        /// The journal's last line was torn (the process died writing it) and was cut off.
        torn_line: bool,
        /// What `--force` let change since the run started: settings, kernel files.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        forced_changes: Vec<String>,
    },
    /// A limit of the run (max_time) was reached: no more proposals are taken and those in
    /// flight are cancelled; the evaluations in flight may end (`evaluations_cancelled` false)
    /// until the grace is over (true), then the run ends, as planned.
    LimitReached {
        limit: String,
        reason: String,
        evaluations_cancelled: bool,
    },
    /// The run cannot go on (a record could not be written, the disk is full, a device's
    /// evaluator cannot start): new work stops and the run ends as failed. On a full disk this
    /// record itself may not reach the journal.
    Stopped {
        reason: String,
    },
    RunFinished {
        outcome: RunOutcome,
        reason: String,
        best_candidate: Option<CandidateId>,
        best_ms: Option<f64>,
        initial_ms: Option<f64>,
        /// An interrupted run: the command that goes on from here (`kactors resume <dir>`).
        #[serde(default)]
        resume: Option<String>,
    },
}

/// Version 1 journals named an analysis' bottlenecks by title only.
fn bottlenecks_or_titles<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<AnalyzedBottleneck>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        Bottleneck(AnalyzedBottleneck),
        Title(String),
    }
    let items: Vec<Either> = Vec::deserialize(deserializer)?;
    Ok(items
        .into_iter()
        .map(|item| match item {
            Either::Bottleneck(bottleneck) => bottleneck,
            Either::Title(title) => AnalyzedBottleneck {
                title,
                causes: Vec::new(),
                fixes: Vec::new(),
            },
        })
        .collect())
}

/// The SHA-256 of a text's UTF-8 bytes, in lowercase hex, as `sha256sum` prints it.
pub fn sha256_hex(text: &str) -> String {
    use sha2::Digest;
    hex(&sha2::Sha256::digest(text.as_bytes()))
}

/// Bytes as lowercase hex. A resume hashes every proposal's code: a formatted string per byte
/// was most of what hashing cost it.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(2 * bytes.len());
    for byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0xf)]));
    }
    out
}

/// `profile_recorded`'s `details`: a profile, or absent when the JSON is not one. Version 1
/// journals kept the report `kactors profile --json` prints, which reads as a profile; any
/// other shape must not make the whole journal unreadable.
fn profile_or_absent<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<KernelProfile>, D::Error> {
    let value = serde_json::Value::deserialize(deserializer)?;
    Ok(serde_json::from_value(value).ok())
}

fn answered() -> ReplyOutcome {
    ReplyOutcome::Answered
}

/// One line of the journal.
#[derive(Clone, Debug, PartialEq)]
pub struct JournalRecord {
    pub t: SystemTime,
    pub event: Event,
}

/// Why a journal line could not be read back.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RecordError {
    #[error("not a JSON object: {0}")]
    NotJson(String),
    #[error(
        "schema version {found} is not one this build reads ({OLDEST_READABLE_VERSION} to {SCHEMA_VERSION})"
    )]
    Version { found: String },
    #[error("`t` is not a UTC time such as 2026-12-02T10:35:44.123Z: {0}")]
    Time(String),
    #[error("not a record of a known type: {0}")]
    Event(String),
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

    /// Reads one whole journal line of any readable version: a line of version 4 or later that left out
    /// what the lines before it give reads only through `LineReader` (`read_journal`).
    pub fn from_line(line: &str) -> Result<JournalRecord, RecordError> {
        let value: serde_json::Value =
            serde_json::from_str(line).map_err(|error| RecordError::NotJson(error.to_string()))?;
        let serde_json::Value::Object(object) = value else {
            return Err(RecordError::NotJson(
                "a JSON value that is not an object".into(),
            ));
        };
        JournalRecord::from_object(object)
    }

    /// A record from a line's JSON object.
    pub fn from_object(
        mut object: serde_json::Map<String, serde_json::Value>,
    ) -> Result<JournalRecord, RecordError> {
        let version = object.remove("v").unwrap_or(serde_json::Value::Null);
        if !version.as_u64().is_some_and(|v| {
            (u64::from(OLDEST_READABLE_VERSION)..=u64::from(SCHEMA_VERSION)).contains(&v)
        }) {
            return Err(RecordError::Version {
                found: version.to_string(),
            });
        }
        let t = match object.remove("t") {
            Some(serde_json::Value::String(text)) => {
                parse_utc_millis(&text).ok_or(RecordError::Time(text))?
            }
            other => return Err(RecordError::Time(format!("{other:?}"))),
        };
        let event = serde_json::from_value(serde_json::Value::Object(object))
            .map_err(|error| RecordError::Event(error.to_string()))?;
        Ok(JournalRecord { t, event })
    }
}

/// A time to the whole millisecond, as the journal keeps it.
pub fn whole_millis(t: SystemTime) -> SystemTime {
    let since_epoch = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    SystemTime::UNIX_EPOCH + Duration::from_millis(since_epoch.as_millis() as u64)
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

/// Reads `2026-12-02T10:35:44.123Z` back (the one form `format_utc_millis` writes).
pub fn parse_utc_millis(text: &str) -> Option<SystemTime> {
    let bytes = text.as_bytes();
    if bytes.len() != 24
        || [4, 7].iter().any(|&i| bytes[i] != b'-')
        || bytes[10] != b'T'
        || [13, 16].iter().any(|&i| bytes[i] != b':')
        || bytes[19] != b'.'
        || bytes[23] != b'Z'
    {
        return None;
    }
    let number = |range: std::ops::Range<usize>| -> Option<i64> {
        let field = text.get(range)?;
        field
            .bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| field.parse().ok())?
    };
    let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
    let (hour, minute, second, millis) = (
        number(11..13)?,
        number(14..16)?,
        number(17..19)?,
        number(20..23)?,
    );
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let days = days_from_civil(year, month as u32, day as u32);
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second;
    let since_epoch =
        Duration::from_secs(u64::try_from(seconds).ok()?) + Duration::from_millis(millis as u64);
    SystemTime::UNIX_EPOCH.checked_add(since_epoch)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(seconds: u64, millis: u64, expected: &str) {
        let t =
            SystemTime::UNIX_EPOCH + Duration::from_secs(seconds) + Duration::from_millis(millis);
        assert_eq!(format_utc_millis(t), expected);
    }

    #[test]
    fn utc_timestamps_read_back() {
        for seconds in [0, 951_782_400, 1_796_204_144, 4_107_542_399] {
            let t =
                SystemTime::UNIX_EPOCH + Duration::from_secs(seconds) + Duration::from_millis(7);
            assert_eq!(parse_utc_millis(&format_utc_millis(t)), Some(t));
        }
        for bad in [
            "2026-13-02T10:35:44.123Z",
            "2026-12-02 10:35:44.123Z",
            "2026-12-02T10:35:44Z",
            "+026-12-02T10:35:44.123Z",
        ] {
            assert_eq!(parse_utc_millis(bad), None, "{bad}");
        }
    }

    #[test]
    fn utc_timestamps_have_milliseconds() {
        check(0, 0, "1970-01-01T00:00:00.000Z");
        check(951_782_400, 5, "2000-02-29T00:00:00.005Z");
        check(1_796_204_144, 123, "2026-12-02T09:35:44.123Z");
        check(4_107_542_399, 999, "2100-02-28T23:59:59.999Z");
    }

    #[test]
    fn a_version_1_journal_from_the_h200_reads_whole_and_reports() {
        let text = include_str!("../../tests/fixtures/journal-v1/h200-matvec.jsonl");
        let mut summary = crate::report::RunSummary::default();
        for line in text.lines() {
            let record = JournalRecord::from_line(line).unwrap_or_else(|e| panic!("{e}: {line}"));
            summary.observe(&record);
        }
        let report = summary.render_markdown();
        assert!(report.contains("Outcome: **completed**"), "{report}");
    }

    #[test]
    fn a_version_1_analysis_names_its_bottlenecks_by_title() {
        let line = r#"{"v":1,"t":"2026-12-02T11:33:20.001Z","type":"analysis_received","candidate":0,"round":1,"request_id":"r1-c0-analysis","requested":2,"returned":1,"bottlenecks":["memory bound"],"usage":null,"cost_usd":null,"error":null}"#;
        match JournalRecord::from_line(line).map(|record| record.event) {
            Ok(Event::AnalysisReceived {
                bottlenecks,
                outcome: ReplyOutcome::Answered,
                reply: None,
                ..
            }) => assert_eq!(
                bottlenecks,
                [AnalyzedBottleneck {
                    title: "memory bound".into(),
                    causes: Vec::new(),
                    fixes: Vec::new(),
                }]
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn records_read_back_as_they_were_written() {
        let record = JournalRecord {
            t: SystemTime::UNIX_EPOCH + Duration::from_millis(1_796_204_144_123),
            event: Event::ProposalReceived {
                candidate: CandidateId(3),
                parent: CandidateId(0),
                round: 1,
                device: DeviceId(1),
                request_id: "r1-c3".into(),
                attempt: 0,
                outcome: ReplyOutcome::Code,
                truncated: false,
                usage: Some(TokenUsage {
                    input_tokens: 120,
                    output_tokens: 80,
                }),
                cost_usd: Some(0.25),
                error: None,
                code: Some("def kernel_function(x):\n    return x\n".into()),
                reply: Some(ReplyFile {
                    file: "candidates/3/reply.md".into(),
                    sha256: sha256_hex("reply"),
                }),
                latency_s: Some(2.25),
            },
        };
        let line = record.to_json().to_string();
        assert_eq!(JournalRecord::from_line(&line), Ok(record));
    }

    #[test]
    fn lines_that_are_not_records_say_why() {
        let check = |line: &str, expected: &str| {
            let error = JournalRecord::from_line(line).unwrap_err().to_string();
            assert!(error.starts_with(expected), "{line}: {error}");
        };
        check("{\"v\":2,\"t\":\"2026-12-02T10:3", "not a JSON object");
        check("[1]", "not a JSON object");
        let newer = SCHEMA_VERSION + 1;
        check(
            &format!(
                "{{\"v\":{newer},\"t\":\"2026-12-02T10:35:44.123Z\",\"type\":\"interrupted\",\"signal\":\"SIGINT\"}}"
            ),
            &format!("schema version {newer}"),
        );
        check(
            "{\"v\":2,\"t\":\"yesterday\",\"type\":\"interrupted\",\"signal\":\"SIGINT\"}",
            "`t` is not a UTC time",
        );
        check(
            "{\"v\":2,\"t\":\"2026-12-02T10:35:44.123Z\",\"type\":\"launched\"}",
            "not a record of a known type",
        );
    }

    /// Issue 14: version 3's device table names each device's node, Slurm's index there and
    /// its agent's step; a version 2 table reads with them absent.
    #[test]
    fn the_device_table_says_where_each_device_is_and_older_tables_still_read() {
        let started = |version: u32, device: &str| {
            format!(
                "{{\"v\":{version},\"t\":\"2026-12-02T10:35:44.123Z\",\"type\":\"run_started\",\"strategy\":\"s\",\"platform\":\"nvidia\",\"simulated\":false,\"search\":\"beam_search\",\"num_top_kernels\":1,\"num_bottlenecks\":1,\"max_rounds\":1,\"devices\":[{device}],\"initial_source\":\"\"}}"
            )
        };
        let devices = |line: String| match JournalRecord::from_line(&line).unwrap().event {
            Event::RunStarted { devices, .. } => devices,
            other => panic!("{other:?}"),
        };
        let remote = devices(started(
            3,
            r#"{"device":5,"name":"NVIDIA H200","uuid":"GPU-1","node":"n2","index":1,"step":"7.3"}"#,
        ));
        assert_eq!(remote[0].location(), "n2:1");
        assert_eq!(remote[0].step.as_deref(), Some("7.3"));
        let local = devices(started(
            2,
            r#"{"device":5,"name":"NVIDIA H200","uuid":"GPU-1"}"#,
        ));
        assert_eq!((local[0].node.as_deref(), local[0].index), (None, None));
        assert_eq!(local[0].location(), "5");
        let written = JournalRecord {
            t: SystemTime::UNIX_EPOCH,
            event: Event::RunStarted {
                strategy: "s".into(),
                platform: "nvidia".into(),
                simulated: false,
                search: "beam_search".into(),
                num_top_kernels: 1,
                num_bottlenecks: 1,
                max_rounds: 1,
                devices: remote.clone(),
                initial_source: String::new(),
                sandbox: None,
            },
        }
        .to_json();
        assert_eq!(written["devices"][0]["node"], "n2");
        assert_eq!(devices(written.to_string()), remote);
    }

    #[test]
    fn sha256_is_as_sha256sum_prints_it() {
        assert_eq!(
            sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
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
