//! The node agent's channel: one JSON object per line, the head's requests on the agent's stdin
//! and the agent's messages on its stdout, which `srun` carries between the nodes. These are the
//! edge's own types (docs/agent-protocol.md is the contract); the ports' types are converted at
//! each end. Every number that becomes a `Duration` is checked on the way in.

use std::path::PathBuf;
use std::time::Duration;

use actors::model::{
    CandidateId, CompiledCode, DeviceId, KernelSource, Provenance, Reference, TimeOutcome, Timing,
    Vendor, Verdict, VerifyOutcome,
};
use actors::ports::{
    EvalError, EvalJob, EvaluatorStart, ProfileError, ProfileJob, ProfileSummary, UserTestOutcome,
};
use actors::profile::KernelProfile;
use serde::{Deserialize, Serialize};

use crate::config::ranges::MAX_DURATION_S;

/// What the head asks of an agent. Every request carries an `id` of the head's choosing, and
/// the agent answers it with exactly one `reply` (or `pong`) of the same id.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum AgentRequest {
    /// The run starts: the run directory (shared by every node) and the devices of this node
    /// the run uses, each with the run's id for it. The agent frees the rest.
    Start {
        id: u64,
        run_dir: PathBuf,
        devices: Vec<Assignment>,
    },
    Verify {
        id: u64,
        device: DeviceId,
        job: WireJob,
    },
    Time {
        id: u64,
        device: DeviceId,
        job: WireJob,
    },
    TimeReference {
        id: u64,
        device: DeviceId,
        which: Reference,
        deadline_s: f64,
    },
    UserTest {
        id: u64,
        device: DeviceId,
        folder: PathBuf,
        deadline_s: f64,
    },
    Profile {
        id: u64,
        device: DeviceId,
        job: WireProfileJob,
    },
    /// Ends the device's evaluator, abandoning what it is doing; the next one draws `then`'s
    /// inputs.
    StopDevice {
        id: u64,
        device: DeviceId,
        #[serde(default)]
        then: NextDraws,
    },
    /// Answered at once, whatever the devices are doing: the head's sign of life.
    Ping { id: u64 },
}

/// Which inputs a device's next evaluator draws.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NextDraws {
    /// The search's draws, as every evaluator of the run.
    #[default]
    Search,
    /// Draws no search evaluator drew: the finale's re-check (issue 18).
    Recheck,
}

impl AgentRequest {
    pub fn id(&self) -> u64 {
        match self {
            AgentRequest::Start { id, .. }
            | AgentRequest::Verify { id, .. }
            | AgentRequest::Time { id, .. }
            | AgentRequest::TimeReference { id, .. }
            | AgentRequest::UserTest { id, .. }
            | AgentRequest::Profile { id, .. }
            | AgentRequest::StopDevice { id, .. }
            | AgentRequest::Ping { id } => *id,
        }
    }

    /// The device a request is for; `None` for the agent's own requests.
    pub fn device(&self) -> Option<DeviceId> {
        match self {
            AgentRequest::Verify { device, .. }
            | AgentRequest::Time { device, .. }
            | AgentRequest::TimeReference { device, .. }
            | AgentRequest::UserTest { device, .. }
            | AgentRequest::Profile { device, .. }
            | AgentRequest::StopDevice { device, .. } => Some(*device),
            AgentRequest::Start { .. } | AgentRequest::Ping { .. } => None,
        }
    }

    pub fn to_line(&self) -> String {
        serde_json::to_string(self).expect("agent requests serialise")
    }
}

/// One of the node's devices, by Slurm's index on the node, and the run's id for it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Assignment {
    pub index: u32,
    pub device: DeviceId,
}

/// An `EvalJob`: the candidate's folder is in the shared run directory, `kernel.py` in it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireJob {
    pub candidate: CandidateId,
    pub source: String,
    pub folder: PathBuf,
    pub deadline_s: f64,
}

impl From<&EvalJob> for WireJob {
    fn from(job: &EvalJob) -> Self {
        WireJob {
            candidate: job.candidate,
            source: job.source.text().to_string(),
            folder: job.folder.clone(),
            deadline_s: job.deadline.as_secs_f64(),
        }
    }
}

impl WireJob {
    pub fn into_job(self) -> Result<EvalJob, String> {
        Ok(EvalJob {
            candidate: self.candidate,
            source: KernelSource::new(self.source),
            folder: self.folder,
            deadline: duration("deadline_s", self.deadline_s)?,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireProfileJob {
    pub candidate: CandidateId,
    pub source: String,
    pub folder: PathBuf,
    pub kernel_names: Vec<String>,
}

impl From<&ProfileJob> for WireProfileJob {
    fn from(job: &ProfileJob) -> Self {
        WireProfileJob {
            candidate: job.candidate,
            source: job.source.text().to_string(),
            folder: job.folder.clone(),
            kernel_names: job.kernel_names.clone(),
        }
    }
}

impl WireProfileJob {
    pub fn into_job(self, device: DeviceId) -> ProfileJob {
        ProfileJob {
            candidate: self.candidate,
            source: KernelSource::new(self.source),
            folder: self.folder,
            device,
            kernel_names: self.kernel_names,
        }
    }
}

/// A number of seconds from the other end, as a `Duration`: within 0 to a week, like every
/// duration of a configuration, or refused naming the field.
pub fn duration(field: &str, seconds: f64) -> Result<Duration, String> {
    if !(0.0..=MAX_DURATION_S).contains(&seconds) {
        return Err(format!(
            "{field} is {seconds}: expected a number of seconds from 0 to {MAX_DURATION_S}"
        ));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// What an agent says. Its first line is `hello` (or `refused`, after which it exits); then a
/// `reply` or `pong` for each request, in any order across devices.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum AgentMessage {
    Hello(Hello),
    /// The agent cannot serve (its configuration does not load, no device is visible there):
    /// why, and it exits. `busy`: every GPU of the node is held by another kactors run, so
    /// the run may go on without this node.
    Refused {
        reason: String,
        #[serde(default)]
        busy: bool,
    },
    Reply {
        id: u64,
        /// What an evaluator that started during the request reported about itself (the
        /// `ready` message, with the node and host added).
        #[serde(default)]
        started: Option<Box<EvaluatorStart>>,
        outcome: WireOutcome,
    },
    Pong {
        id: u64,
    },
}

impl AgentMessage {
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).expect("agent messages serialise")
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hello {
    /// Slurm's name for the node (SLURMD_NODENAME).
    pub node: String,
    pub host: String,
    /// `JOB.STEP`: what scancel takes.
    pub step: String,
    pub pid: u32,
    /// The vendor of the node's GPUs.
    pub vendor: Vendor,
    /// The node's devices this agent holds (locked against other runs), in Slurm's order.
    pub devices: Vec<OfferedDevice>,
    /// What the person starting the run should know (GPUs another run holds, spec rows).
    pub notes: Vec<String>,
    /// The preflight's lines on this node, the shared run directory's check among them.
    pub preflight: Vec<WireCheckLine>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OfferedDevice {
    /// Slurm's index of the GPU on its node.
    pub index: u32,
    pub name: String,
    pub uuid: Option<String>,
    /// The spec row's name, when the device has one.
    pub spec: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireCheckLine {
    pub ok: bool,
    pub what: String,
    pub fix: Option<String>,
    pub stops_a_run: bool,
}

/// The answer to one request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum WireOutcome {
    Started,
    Verified {
        verdict: Verdict,
        provenance: Provenance,
        launched_kernels: Vec<String>,
        #[serde(default)]
        compiled: Option<CompiledCode>,
    },
    Timed {
        timing: Option<WireTiming>,
        provenance: Option<Provenance>,
    },
    UserTest {
        outcome: Option<WireUserTest>,
    },
    Profiled {
        bottleneck: String,
        analysis: String,
        duration_ms: Option<f64>,
        at_roofline: bool,
        details: Option<KernelProfile>,
    },
    Stopped,
    EvalFailed {
        error: WireEvalError,
    },
    ProfileFailed {
        unavailable: bool,
        error: String,
    },
    /// The request could not be carried out at all (an unknown device, a bad number).
    Refused {
        reason: String,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireTiming {
    pub median_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
    pub samples: u32,
    /// The floor the node's evaluator held the timing to (issue 18).
    #[serde(default)]
    pub floor_ms: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireUserTest {
    pub passed: bool,
    pub exit_code: Option<i32>,
    pub log: PathBuf,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "error", rename_all = "snake_case", deny_unknown_fields)]
pub enum WireEvalError {
    Crashed { reason: String },
    TimedOut { deadline_s: f64 },
    Start { reason: String },
    Rejected { reason: String },
    ImpossibleTiming { reason: String },
}

impl From<&EvalError> for WireEvalError {
    fn from(error: &EvalError) -> Self {
        match error {
            EvalError::Crashed { reason } => WireEvalError::Crashed {
                reason: reason.clone(),
            },
            EvalError::TimedOut(deadline) => WireEvalError::TimedOut {
                deadline_s: deadline.as_secs_f64(),
            },
            EvalError::Start(reason) => WireEvalError::Start {
                reason: reason.clone(),
            },
            EvalError::Rejected(reason) => WireEvalError::Rejected {
                reason: reason.clone(),
            },
            EvalError::ImpossibleTiming(reason) => WireEvalError::ImpossibleTiming {
                reason: reason.clone(),
            },
            // An agent's own devices are never lost to it; the head says so of a whole node.
            EvalError::DeviceLost { reason, .. } => WireEvalError::Crashed {
                reason: reason.clone(),
            },
        }
    }
}

impl From<WireEvalError> for EvalError {
    fn from(error: WireEvalError) -> Self {
        match error {
            WireEvalError::Crashed { reason } => EvalError::Crashed { reason },
            WireEvalError::TimedOut { deadline_s } => match duration("deadline_s", deadline_s) {
                Ok(deadline) => EvalError::TimedOut(deadline),
                Err(reason) => EvalError::Crashed { reason },
            },
            WireEvalError::Start { reason } => EvalError::Start(reason),
            WireEvalError::Rejected { reason } => EvalError::Rejected(reason),
            WireEvalError::ImpossibleTiming { reason } => EvalError::ImpossibleTiming(reason),
        }
    }
}

impl WireOutcome {
    pub fn verified(outcome: Result<VerifyOutcome, EvalError>) -> Self {
        match outcome {
            Ok(outcome) => WireOutcome::Verified {
                verdict: outcome.verdict,
                provenance: outcome.provenance,
                launched_kernels: outcome.launched_kernels,
                compiled: outcome.compiled,
            },
            Err(error) => WireOutcome::EvalFailed {
                error: (&error).into(),
            },
        }
    }

    /// A timing; `None` (a reference the platform does not measure) has neither field.
    pub fn timed(outcome: Result<Option<TimeOutcome>, EvalError>) -> Self {
        match outcome {
            Ok(timed) => WireOutcome::Timed {
                timing: timed.as_ref().map(|timed| WireTiming {
                    median_ms: timed.timing.median_ms,
                    min_ms: timed.timing.min_ms,
                    max_ms: timed.timing.max_ms,
                    samples: timed.timing.samples,
                    floor_ms: timed.floor_ms,
                }),
                provenance: timed.map(|timed| timed.provenance),
            },
            Err(error) => WireOutcome::EvalFailed {
                error: (&error).into(),
            },
        }
    }

    pub fn user_test(outcome: Result<Option<UserTestOutcome>, EvalError>) -> Self {
        match outcome {
            Ok(outcome) => WireOutcome::UserTest {
                outcome: outcome.map(|outcome| WireUserTest {
                    passed: outcome.passed,
                    exit_code: outcome.exit_code,
                    log: outcome.log,
                }),
            },
            Err(error) => WireOutcome::EvalFailed {
                error: (&error).into(),
            },
        }
    }

    pub fn profiled(outcome: Result<ProfileSummary, ProfileError>) -> Self {
        match outcome {
            Ok(summary) => WireOutcome::Profiled {
                bottleneck: summary.bottleneck,
                analysis: summary.analysis,
                duration_ms: summary.duration_ms,
                at_roofline: summary.at_roofline,
                details: summary.details,
            },
            Err(ProfileError::Failed(error)) => WireOutcome::ProfileFailed {
                unavailable: false,
                error,
            },
            Err(ProfileError::Unavailable(error)) => WireOutcome::ProfileFailed {
                unavailable: true,
                error,
            },
        }
    }

    /// What the head makes of an answer of the wrong kind, or a refusal.
    fn unexpected(self, wanted: &str) -> String {
        match self {
            WireOutcome::Refused { reason } => {
                format!("the node agent refused the request: {reason}")
            }
            other => format!("the node agent answered a request for {wanted} with {other:?}"),
        }
    }

    pub fn into_verified(self) -> Result<VerifyOutcome, EvalError> {
        match self {
            WireOutcome::Verified {
                verdict,
                provenance,
                launched_kernels,
                compiled,
            } => Ok(VerifyOutcome {
                verdict,
                provenance,
                launched_kernels,
                compiled,
            }),
            WireOutcome::EvalFailed { error } => Err(error.into()),
            other => Err(EvalError::Crashed {
                reason: other.unexpected("a verification"),
            }),
        }
    }

    pub fn into_timed(self) -> Result<Option<TimeOutcome>, EvalError> {
        match self {
            WireOutcome::Timed {
                timing: Some(timing),
                provenance: Some(provenance),
            } => Ok(Some(TimeOutcome {
                timing: Timing {
                    median_ms: timing.median_ms,
                    min_ms: timing.min_ms,
                    max_ms: timing.max_ms,
                    samples: timing.samples,
                },
                provenance,
                floor_ms: timing.floor_ms,
            })),
            WireOutcome::Timed {
                timing: None,
                provenance: None,
            } => Ok(None),
            WireOutcome::EvalFailed { error } => Err(error.into()),
            other => Err(EvalError::Crashed {
                reason: other.unexpected("a timing"),
            }),
        }
    }

    pub fn into_user_test(self) -> Result<Option<UserTestOutcome>, EvalError> {
        match self {
            WireOutcome::UserTest { outcome } => Ok(outcome.map(|outcome| UserTestOutcome {
                passed: outcome.passed,
                exit_code: outcome.exit_code,
                log: outcome.log,
            })),
            WireOutcome::EvalFailed { error } => Err(error.into()),
            other => Err(EvalError::Crashed {
                reason: other.unexpected("the user's test"),
            }),
        }
    }

    pub fn into_profiled(self) -> Result<ProfileSummary, ProfileError> {
        match self {
            WireOutcome::Profiled {
                bottleneck,
                analysis,
                duration_ms,
                at_roofline,
                details,
            } => Ok(ProfileSummary {
                bottleneck,
                analysis,
                duration_ms,
                at_roofline,
                details,
            }),
            WireOutcome::ProfileFailed {
                unavailable: true,
                error,
            } => Err(ProfileError::Unavailable(error)),
            WireOutcome::ProfileFailed { error, .. } => Err(ProfileError::Failed(error)),
            other => Err(ProfileError::Failed(other.unexpected("a profile"))),
        }
    }

    /// `Ok` for `started` and `stopped`, the refusal's reason otherwise.
    pub fn into_done(self) -> Result<(), String> {
        match self {
            WireOutcome::Started | WireOutcome::Stopped => Ok(()),
            other => Err(other.unexpected("a start or a stop")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_one_json_line_each_named_by_op() {
        let request = AgentRequest::Verify {
            id: 7,
            device: DeviceId(5),
            job: WireJob {
                candidate: CandidateId(3),
                source: "def kernel_function(x):\n    return x\n".into(),
                folder: "/runs/r/candidates/3".into(),
                deadline_s: 2.5,
            },
        };
        let line = request.to_line();
        assert!(!line.contains('\n'));
        assert_eq!(
            line,
            r#"{"op":"verify","id":7,"device":5,"job":{"candidate":3,"source":"def kernel_function(x):\n    return x\n","folder":"/runs/r/candidates/3","deadline_s":2.5}}"#
        );
        assert_eq!(
            serde_json::from_str::<AgentRequest>(&line).unwrap(),
            request
        );
        assert_eq!((request.id(), request.device()), (7, Some(DeviceId(5))));
    }

    #[test]
    fn a_deadline_from_the_other_end_is_bounded_before_it_becomes_a_duration() {
        let job = |deadline_s| WireJob {
            candidate: CandidateId(1),
            source: String::new(),
            folder: "/f".into(),
            deadline_s,
        };
        assert_eq!(
            job(2.0).into_job().unwrap().deadline,
            Duration::from_secs(2)
        );
        for bad in [-1.0, f64::NAN, f64::INFINITY, 1e300] {
            let error = job(bad).into_job().unwrap_err();
            assert!(error.starts_with("deadline_s is "), "{error}");
        }
        let timed_out = WireEvalError::TimedOut { deadline_s: -3.0 };
        assert!(matches!(
            EvalError::from(timed_out),
            EvalError::Crashed { .. }
        ));
    }

    #[test]
    fn every_outcome_travels_and_comes_back_as_the_ports_say() {
        let verify = Ok(VerifyOutcome {
            verdict: Verdict::Passed {
                max_abs_err: 0.01,
                max_rel_err: 0.02,
                rel_l2_err: Some(0.003),
                rule: Some("|a - e| <= 0.01 + 0.01 × |e|".into()),
            },
            provenance: Provenance::Measured,
            launched_kernels: vec!["k".into()],
            compiled: CompiledCode::parse(&"ab".repeat(32)),
        });
        let through = |outcome: WireOutcome| -> WireOutcome {
            let message = AgentMessage::Reply {
                id: 1,
                started: None,
                outcome,
            };
            match serde_json::from_str(&message.to_line()).unwrap() {
                AgentMessage::Reply { outcome, .. } => outcome,
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(
            through(WireOutcome::verified(verify.clone())).into_verified(),
            verify
        );
        let timed = Ok(Some(TimeOutcome {
            timing: Timing {
                median_ms: 1.5,
                min_ms: 1.4,
                max_ms: 1.9,
                samples: 100,
            },
            provenance: Provenance::Measured,
            floor_ms: Some(0.9),
        }));
        assert_eq!(
            through(WireOutcome::timed(timed.clone())).into_timed(),
            timed
        );
        assert_eq!(through(WireOutcome::timed(Ok(None))).into_timed(), Ok(None));
        for error in [
            EvalError::Crashed {
                reason: "died".into(),
            },
            EvalError::TimedOut(Duration::from_millis(2500)),
            EvalError::Start("no torch".into()),
            EvalError::Rejected("busy".into()),
            EvalError::ImpossibleTiming("timed 0.015 ms, but …".into()),
        ] {
            assert_eq!(
                through(WireOutcome::timed(Err(error.clone()))).into_timed(),
                Err(error)
            );
        }
        let profile = Err(ProfileError::Unavailable("no counters".into()));
        assert_eq!(
            through(WireOutcome::profiled(profile.clone())).into_profiled(),
            profile
        );
        let refused = WireOutcome::Refused {
            reason: "device 9 is not this node's".into(),
        };
        assert_eq!(
            through(refused).into_verified(),
            Err(EvalError::Crashed {
                reason: "the node agent refused the request: device 9 is not this node's".into()
            })
        );
    }

    #[test]
    fn a_message_with_a_field_this_build_does_not_know_is_refused() {
        let line = r#"{"type":"pong","id":3,"extra":true}"#;
        assert!(serde_json::from_str::<AgentMessage>(line).is_err());
        assert_eq!(
            serde_json::from_str::<AgentMessage>(r#"{"type":"pong","id":3}"#).unwrap(),
            AgentMessage::Pong { id: 3 }
        );
    }
}
