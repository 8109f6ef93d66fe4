//! What comes back, made into the records the Manager journals: an LLM's answer to a pending
//! request (its `*_received`, from the record that would cancel it), a device's evaluation (its
//! `evaluated`), and the device the finale runs on. Plain functions of the state: the Manager
//! only carries their records.

use std::collections::BTreeSet;

use crate::analysis::{parse_bottlenecks, parse_lesson};
use crate::journal::{EvaluationOutcome, Event, ReplyFile, ReplyOutcome, RunOutcome};
use crate::model::{CandidateId, DeviceId, KernelSource, RankedKernel, Verdict};
use crate::ports::{
    EvalError, Evaluated, LlmError, LlmReply, LlmRequest, ProfileError, ProfileSummary,
    RenderedPrompt, RequestKind,
};
use crate::speed_of_light::percent_of_light;

use super::{Evaluation, Exchange, SearchState};

/// How a request ended, for its `*_received` record.
pub enum Answer<'a> {
    Reply(&'a LlmReply),
    Error(&'a LlmError),
    /// Its prompt could not be rendered (why): nothing was sent.
    NotRendered(String),
}

impl SearchState {
    /// The request to send for a pending request, its prompt rendered; `None` when it is not
    /// pending.
    pub fn llm_request(&self, request_id: &str, prompt: RenderedPrompt) -> Option<LlmRequest> {
        let request = self.core.requests.get(request_id)?;
        let kind = request.kind();
        let (candidate, round) = request.about();
        let model = match kind {
            RequestKind::Analysis => self.analysis_model(),
            _ => self.model_of(candidate),
        };
        Some(LlmRequest {
            request_id: request_id.to_string(),
            kind,
            candidate,
            round,
            system: prompt.system,
            prompt: prompt.user,
            model: model.map(str::to_string),
        })
    }

    /// Where a pending request's exchange is kept; `None` when it is not pending.
    pub fn exchange(&self, request_id: &str) -> Option<Exchange> {
        Some(self.core.requests.get(request_id)?.exchange())
    }

    /// The `*_received` record of a pending request: its reply (kept in `file`) or why there is
    /// none. `None` when the request is not pending (the run's end cancelled it meanwhile).
    pub fn received(
        &self,
        request_id: &str,
        answer: Answer<'_>,
        file: Option<ReplyFile>,
    ) -> Option<Event> {
        let (answered, why, reply) = match answer {
            Answer::Reply(reply) => (ReplyOutcome::Answered, None, Some(reply)),
            Answer::Error(error) => (outcome_of_error(error), Some(error_text(error)), None),
            Answer::NotRendered(why) => (ReplyOutcome::NotRendered, Some(why), None),
        };
        let mut event = self.core.requests.get(request_id)?.cancelled.clone();
        match &mut event {
            Event::ProposalReceived {
                candidate,
                attempt,
                device,
                outcome,
                truncated,
                code,
                ..
            } => {
                *code = reply
                    .and_then(|r| r.code.as_ref())
                    .map(|c| c.text().to_string());
                *outcome = match (answered, &code) {
                    (ReplyOutcome::Answered, Some(_)) => ReplyOutcome::Code,
                    (ReplyOutcome::Answered, None) => ReplyOutcome::NoCode,
                    (other, _) => other,
                };
                *device = if *attempt == 0 {
                    self.device_for_answer(*candidate)
                } else {
                    self.placement(*candidate)
                        .map_or(DeviceId(0), |(_, _, d)| d)
                };
                *truncated = reply.is_some_and(|r| r.truncated);
            }
            Event::AnalysisReceived {
                requested,
                returned,
                bottlenecks,
                outcome,
                ..
            } => {
                *bottlenecks = reply
                    .map(|r| parse_bottlenecks(&r.text))
                    .unwrap_or_default();
                bottlenecks.truncate(*requested as usize);
                *returned = bottlenecks.len() as u32;
                *outcome = answered;
            }
            Event::ReflexionReceived {
                lesson, outcome, ..
            } => {
                *lesson = reply.and_then(|r| parse_lesson(&r.text));
                *outcome = answered;
            }
            _ => return None,
        }
        if let Event::ProposalReceived {
            usage,
            cost_usd,
            error,
            reply: kept,
            ..
        }
        | Event::AnalysisReceived {
            usage,
            cost_usd,
            error,
            reply: kept,
            ..
        }
        | Event::ReflexionReceived {
            usage,
            cost_usd,
            error,
            reply: kept,
            ..
        } = &mut event
        {
            *usage = reply.and_then(|r| r.usage);
            *cost_usd = reply.and_then(|r| r.cost_usd);
            *error = why;
            *kept = file;
        }
        Some(event)
    }

    /// What the finale checks again, from the search's best kernel and the initial one.
    pub fn finale_kernels(&self, best: RankedKernel, initial: RankedKernel) -> FinaleKernels {
        // The best is the fastest verified kernel, which a round cut short by a limit has not
        // given to the beam: it is checked again with the beam's members.
        let mut beam = self.beam();
        if beam.iter().all(|member| member.id != best.id) {
            beam.insert(0, best);
        }
        let mut kernels = vec![(initial.id, initial.source)];
        for member in &beam {
            if kernels.iter().all(|(id, _)| *id != member.id) {
                kernels.push((member.id, member.source.clone()));
            }
        }
        let unprofiled = kernels
            .iter()
            .map(|(id, _)| *id)
            .filter(|id| self.profiling() && !self.has_profile(*id))
            .collect();
        FinaleKernels {
            kernels,
            beam,
            unprofiled,
        }
    }

    /// How the search's end is carried out. A completed run with a best kernel has its finale,
    /// on the finale's device and its worker (`worker_of`), unless `overrun` says max_time
    /// leaves no room for it, no device is free or no worker serves it: then the run's reason
    /// says why the finale was skipped.
    pub fn ending<W>(
        &self,
        outcome: RunOutcome,
        reason: String,
        best: Option<RankedKernel>,
        initial: Option<RankedKernel>,
        overrun: Option<&str>,
        worker_of: impl FnOnce(DeviceId) -> Option<W>,
    ) -> Ending<W> {
        let Some(best) = best.filter(|_| outcome == RunOutcome::Completed) else {
            return Ending {
                reason,
                finale: None,
            };
        };
        let place = match overrun {
            Some(why) => Err(why.to_string()),
            None => self.finale_device().map_err(str::to_string),
        };
        let place = place.and_then(|device| match worker_of(device) {
            Some(worker) => Ok((device, worker)),
            None => Err(format!("the finale was skipped: {}", unserved(device))),
        });
        match (place, initial) {
            (Err(skipped), _) => Ending {
                reason: format!("{reason}; {skipped}"),
                finale: None,
            },
            (Ok((device, worker)), Some(initial)) => Ending {
                reason,
                finale: Some(Finale {
                    device,
                    worker,
                    kernels: self.finale_kernels(best, initial),
                }),
            },
            (Ok(_), None) => Ending {
                reason,
                finale: None,
            },
        }
    }

    /// The device the finale runs on: the first in service with nothing in flight (a run that
    /// reached max_time may have evaluations still running). Or why there is none.
    pub fn finale_device(&self) -> Result<DeviceId, &'static str> {
        let busy: BTreeSet<DeviceId> = self
            .in_flight()
            .into_iter()
            .filter_map(|id| self.placement(id).map(|(_, _, device)| device))
            .collect();
        self.core
            .config
            .devices
            .iter()
            .copied()
            .find(|device| !busy.contains(device) && self.is_in_service(*device))
            .ok_or("the finale was skipped: every device was still evaluating")
    }
}

/// How a finished search ends: the reason the run ends with, and the finale to run, if any.
#[derive(Clone, Debug, PartialEq)]
pub struct Ending<W> {
    pub reason: String,
    pub finale: Option<Finale<W>>,
}

/// The finale's device, the worker that serves it, and what it checks again.
#[derive(Clone, Debug, PartialEq)]
pub struct Finale<W> {
    pub device: DeviceId,
    pub worker: W,
    pub kernels: FinaleKernels,
}

/// The kernels the finale checks again: the initial kernel first, then the final beam's
/// members (the best among them, fastest first), and those of them a profile is still wanted
/// for (none when profiling is off).
#[derive(Clone, Debug, PartialEq)]
pub struct FinaleKernels {
    pub kernels: Vec<(CandidateId, KernelSource)>,
    pub beam: Vec<RankedKernel>,
    pub unprofiled: BTreeSet<CandidateId>,
}

/// The record of a parent's profile on `device`: its summary, or why there is none.
pub fn profiled(
    candidate: CandidateId,
    device: DeviceId,
    profile: Result<ProfileSummary, ProfileError>,
) -> Event {
    match profile {
        Ok(profile) => Event::ProfileRecorded {
            candidate,
            device,
            bottleneck: profile.bottleneck,
            duration_ms: profile.duration_ms,
            analysis: profile.analysis,
            at_roofline: profile.at_roofline,
            details: profile.details,
        },
        Err(error) => Event::ProfileFailed {
            candidate,
            device,
            unavailable: matches!(error, ProfileError::Unavailable(_)),
            error: match error {
                ProfileError::Failed(e) | ProfileError::Unavailable(e) => e,
            },
        },
    }
}

/// How an LLM error reads in a `*_received` record.
fn outcome_of_error(error: &LlmError) -> ReplyOutcome {
    match error {
        LlmError::Exhausted => ReplyOutcome::Exhausted,
        LlmError::Auth(_) => ReplyOutcome::Refused,
        LlmError::BudgetReached(_) => ReplyOutcome::Budget,
        LlmError::Failed(_) => ReplyOutcome::Failed,
    }
}

/// The error a record says: what the provider said, without the variant's own prefix for the
/// kinds the outcome already names.
fn error_text(error: &LlmError) -> String {
    match error {
        LlmError::Failed(reason) | LlmError::Auth(reason) | LlmError::BudgetReached(reason) => {
            reason.clone()
        }
        LlmError::Exhausted => error.to_string(),
    }
}

/// The devices an evaluation found gone (its own and those lost with it), and why.
pub fn lost_devices(result: &Evaluated) -> Option<(Vec<DeviceId>, String)> {
    let error = match result {
        Evaluated {
            verify: Err(error), ..
        }
        | Evaluated {
            time: Some(Err(error)),
            ..
        } => error,
        _ => return None,
    };
    match error {
        EvalError::DeviceLost { reason, devices } => Some((devices.clone(), reason.clone())),
        _ => None,
    }
}

/// Why a step on a device failed at once: no worker serves the device (the run does not have
/// it), an input to answer, never a panic.
pub fn unserved(device: DeviceId) -> String {
    format!("no worker serves device {device}")
}

/// What an evaluation that ran comes to, in the order the Manager takes it: the devices it
/// found lost go out of service first, since the fold places the candidate again on live ones;
/// then its `evaluated` record, or, when the disk is full where the evaluations write, the
/// message that stops the run as a record that cannot be written does (the candidate stays in
/// flight, for a resume to evaluate again).
#[derive(Clone, Debug, PartialEq)]
pub struct Returned {
    pub lost: Option<(Vec<DeviceId>, String)>,
    pub record: Result<Event, String>,
}

impl Evaluation {
    /// What this attempt's result comes to; `fills_the_disk`: the evaluations write on the run
    /// directory's disk (not in a bounded scratch of their own, where a full disk is only the
    /// candidate's doing).
    pub fn returned(&self, result: Evaluated, fills_the_disk: bool) -> Returned {
        let lost = lost_devices(&result);
        let record = self.record(Ok(result));
        let record = match disk_full(&record).filter(|_| fills_the_disk) {
            Some(reason) => Err(format!(
                "the disk is full: the evaluation of candidate {} failed with {reason}",
                self.candidate
            )),
            None => Ok(record),
        };
        Returned { lost, record }
    }

    /// The `evaluated` record of an attempt that never reached its device's steps, and why.
    pub fn failed(&self, reason: String) -> Event {
        self.record(Err((EvaluationOutcome::Failed, reason)))
    }

    /// The record of the worker that stopped under this attempt.
    pub fn worker_died(&self) -> Event {
        Event::WorkerDied {
            device: self.device,
            candidate: Some(self.candidate),
            reason:
                "the worker stopped while evaluating (its handler panicked or its mailbox closed)"
                    .into(),
        }
    }

    /// This attempt's `evaluated` record once the Supervisor answered for its dead worker:
    /// restarted (the search decides whether the candidate is tried again), or why not.
    pub fn after_restart(&self, restart: Result<(), String>) -> Event {
        match restart {
            Ok(()) => self.record(Err((
                EvaluationOutcome::WorkerDied,
                "the worker died and was restarted".into(),
            ))),
            Err(reason) => self.failed(reason),
        }
    }

    /// The `evaluated` record of this attempt: the worker's steps, or why there were none.
    pub fn record(&self, result: Result<Evaluated, (EvaluationOutcome, String)>) -> Event {
        let lost = result
            .as_ref()
            .ok()
            .and_then(lost_devices)
            .map(|(_, reason)| format!("device lost: {reason}"));
        let floor_ms = result
            .as_ref()
            .ok()
            .and_then(|evaluated| evaluated.time.as_ref())
            .and_then(|time| time.as_ref().ok())
            .and_then(|timed| timed.floor_ms);
        let compiled = result
            .as_ref()
            .ok()
            .and_then(|evaluated| evaluated.verify.as_ref().ok())
            .and_then(|verify| verify.compiled.clone());
        let (outcome, time_ms, provenance, reason, launched_kernels) = match result {
            Err((outcome, reason)) => (outcome, None, None, Some(reason), Vec::new()),
            Ok(_) if lost.is_some() => {
                (EvaluationOutcome::DeviceLost, None, None, lost, Vec::new())
            }
            Ok(Evaluated {
                verify: Err(EvalError::Start(reason)),
                ..
            }) => (
                EvaluationOutcome::Unstartable,
                None,
                None,
                Some(reason),
                Vec::new(),
            ),
            Ok(Evaluated {
                verify: Err(error), ..
            }) => (
                EvaluationOutcome::Failed,
                None,
                None,
                Some(error.to_string()),
                Vec::new(),
            ),
            Ok(Evaluated {
                verify: Ok(verify),
                time,
                same_code_as,
            }) => match (verify.verdict, time) {
                (Verdict::Failed { reason }, _) => (
                    EvaluationOutcome::WrongOutput,
                    None,
                    Some(verify.provenance),
                    Some(format!("verification failed: {reason}")),
                    verify.launched_kernels,
                ),
                (Verdict::Passed { .. }, Some(Ok(timed))) => (
                    EvaluationOutcome::Verified,
                    Some(timed.timing.median_ms),
                    Some(timed.provenance),
                    None,
                    verify.launched_kernels,
                ),
                (Verdict::Passed { .. }, Some(Err(error))) => (
                    EvaluationOutcome::Failed,
                    None,
                    Some(verify.provenance),
                    Some(format!("timing failed: {error}")),
                    verify.launched_kernels,
                ),
                (Verdict::Passed { .. }, None) if let Some(earlier) = same_code_as => (
                    EvaluationOutcome::Verified,
                    None,
                    Some(verify.provenance),
                    Some(format!(
                        "not timed: the same compiled code as candidate {earlier}"
                    )),
                    verify.launched_kernels,
                ),
                (Verdict::Passed { .. }, None) => (
                    EvaluationOutcome::Failed,
                    None,
                    Some(verify.provenance),
                    Some("the candidate was verified but never timed".into()),
                    verify.launched_kernels,
                ),
            },
        };
        Event::Evaluated {
            candidate: self.candidate,
            parent: self.parent,
            round: self.round,
            device: self.device,
            attempt: self.attempt,
            outcome,
            time_ms,
            provenance,
            reason,
            launched_kernels,
            seconds: None,
            floor_ms,
            speed_of_light_pct: floor_ms
                .zip(time_ms)
                .and_then(|(floor, time)| percent_of_light(floor, time)),
            compiled,
        }
    }
}

/// Why an evaluation failed for want of disk space (Triton's cache lives in the candidate's
/// folder): not the candidate's failure, but the same stop as a record that cannot be written.
pub fn disk_full(record: &Event) -> Option<String> {
    let Event::Evaluated {
        reason: Some(reason),
        ..
    } = record
    else {
        return None;
    };
    ["No space left on device", "[Errno 28]", "ENOSPC"]
        .iter()
        .any(|sign| reason.contains(sign))
        .then(|| reason.lines().next().unwrap_or_default().to_string())
}
