//! A candidate's way through the search: its code asked for and received, evaluated on its
//! device, refined or resolved; and the run's end.

use crate::journal::{EvaluationOutcome, Event, ReplyOutcome, RunOutcome};
use std::sync::Arc;

use crate::model::{CandidateId, CompiledCode, DeviceId, KernelSource, Provenance, RankedKernel};
use crate::ports::AttemptOutcome;
use crate::search::{Beam, device_for};

use super::{Candidate, Core, Decision, Earlier, Out, Phase, Resolution, Sameness, Settled};

/// A proposal's (or a refinement's) reply, as its record says.
pub(super) struct ProposalReply {
    pub(super) attempt: u32,
    pub(super) device: DeviceId,
    pub(super) outcome: ReplyOutcome,
    pub(super) truncated: bool,
    pub(super) error: String,
    pub(super) code: Option<String>,
}

/// An evaluation attempt's end, as its record says.
pub(super) struct EvaluationResult {
    pub(super) attempt: u32,
    pub(super) outcome: EvaluationOutcome,
    pub(super) time_ms: Option<f64>,
    pub(super) provenance: Option<Provenance>,
    pub(super) reason: String,
    pub(super) launched_kernels: Vec<String>,
    pub(super) compiled: Option<CompiledCode>,
}

impl Core {
    pub(super) fn start(&mut self, initial_source: &str, out: &mut Out) {
        if let Some(generation) = self.config.generation {
            return self.generate(generation, out);
        }
        let id = CandidateId::INITIAL;
        let device = device_for(id, &self.live_devices());
        self.candidates
            .insert(id, Candidate::new(None, 0, 0, device, Phase::Asking));
        self.take_code(id, KernelSource::new(initial_source), out);
    }

    /// Whether the provider can take no more requests for code.
    pub(super) fn llm_closed(&self) -> bool {
        self.exhausted || self.budget_reached.is_some() || self.stopping.is_some()
    }

    /// What a reply that is not code (an analysis, a reflexion) means for the run.
    pub(super) fn note_reply(&mut self, outcome: ReplyOutcome, error: Option<&str>, out: &mut Out) {
        let error = error.unwrap_or_default().to_string();
        match outcome {
            ReplyOutcome::Exhausted => self.exhausted = true,
            ReplyOutcome::Budget => {
                self.budget_reached.get_or_insert(error);
            }
            ReplyOutcome::Refused => self.finish(
                RunOutcome::Failed,
                format!("the llm provider refused the credentials: {error}"),
                out,
            ),
            ReplyOutcome::Failed => self.llm_last_error = Some(error),
            _ => {}
        }
    }

    /// Why the run must end after its first round: no request for code got an answer, and a
    /// request failed in transport or with an error status (not exhaustion, not the budget).
    pub(super) fn nothing_answered(&self) -> Option<String> {
        if self.proposals_answered > 0 {
            return None;
        }
        let error = self.llm_last_error.as_ref()?;
        Some(format!("no LLM request succeeded: {error}"))
    }

    pub(super) fn proposal_received(
        &mut self,
        id: CandidateId,
        reply: ProposalReply,
        out: &mut Out,
    ) {
        let Some(candidate) = self.candidates.get_mut(&id) else {
            return;
        };
        if candidate.phase != Phase::Asking || candidate.attempt != reply.attempt {
            return;
        }
        // After the search's end nothing changes: what was asked stays asked, for a resume.
        if self.finished.is_some() {
            return;
        }
        candidate.device = reply.device;
        if reply.attempt == 0 {
            self.asking.remove(&id);
        }
        let refining = (reply.attempt > 0).then(|| {
            (
                candidate
                    .source()
                    .cloned()
                    .unwrap_or_else(|| KernelSource::new("")),
                candidate.failure.clone().unwrap_or_default(),
                candidate.failure_simulated,
            )
        });
        // A refinement that brings no new code ends the candidate with the failure it was asked
        // to fix; a first proposal without code fails (or is not proposed) on its own.
        let unrefined = |why: String| {
            refining
                .as_ref()
                .map(|(failed, error, simulated)| Resolution::Rejected {
                    source: failed.clone(),
                    reason: format!("{error} (refinement {} {why})", reply.attempt),
                    judged: false,
                    simulated: *simulated,
                })
        };
        let cut = if reply.truncated {
            " (the reply was cut at max_tokens)"
        } else {
            ""
        };
        let error = reply.error;
        let resolution = match reply.outcome {
            ReplyOutcome::Exhausted => {
                self.exhausted = true;
                unrefined("was not answered: the llm provider is exhausted".into())
                    .unwrap_or(Resolution::NotProposed)
            }
            ReplyOutcome::Budget => {
                let resolution =
                    unrefined(format!("was not sent: {error}")).unwrap_or(Resolution::NotProposed);
                self.budget_reached.get_or_insert(error);
                resolution
            }
            ReplyOutcome::Refused => {
                if let Some(c) = self.candidates.get_mut(&id) {
                    c.phase = Phase::Resolved;
                }
                return self.finish(
                    RunOutcome::Failed,
                    format!("the llm provider refused the credentials: {error}"),
                    out,
                );
            }
            // Requests are cancelled when the search stops taking proposals (a limit).
            ReplyOutcome::Cancelled => {
                unrefined("was cancelled".into()).unwrap_or(Resolution::NotProposed)
            }
            ReplyOutcome::Failed => {
                let resolution = unrefined(format!("failed: {error}"))
                    .unwrap_or_else(|| Resolution::Failed(format!("the proposal failed: {error}")));
                self.llm_last_error = Some(error);
                resolution
            }
            ReplyOutcome::NotRendered => unrefined(format!("could not be rendered: {error}"))
                .unwrap_or_else(|| {
                    Resolution::Failed(format!("the prompt could not be rendered: {error}"))
                }),
            ReplyOutcome::NoCode | ReplyOutcome::Answered => {
                self.proposals_answered += 1;
                if self.is_seed(id) && !self.seeding.done {
                    return self.seed_without_code(id, cut, out);
                }
                unrefined(format!(
                    "had no python code block defining kernel_function{cut}"
                ))
                .unwrap_or_else(|| {
                    Resolution::Failed(format!(
                        "the reply has no python code block defining kernel_function{cut}"
                    ))
                })
            }
            ReplyOutcome::Code => {
                self.proposals_answered += 1;
                let code = KernelSource::new(reply.code.unwrap_or_default());
                match self.evaluated_sources.get(code.same_code_key()).copied() {
                    Some(original) => {
                        let earlier = Resolution::Duplicate(Earlier {
                            of: original,
                            by: Sameness::Tokens,
                        });
                        if original == id {
                            unrefined("returned the code that failed".into()).unwrap_or(earlier)
                        } else {
                            earlier
                        }
                    }
                    None => return self.take_code(id, code, out),
                }
            }
        };
        self.resolve(id, resolution, out);
    }

    /// A candidate's new code goes to its device.
    pub(super) fn take_code(&mut self, id: CandidateId, code: KernelSource, out: &mut Out) {
        self.evaluated_sources
            .entry(*code.same_code_key())
            .or_insert(id);
        self.caches_held.insert(id);
        let Some(candidate) = self.candidates.get_mut(&id) else {
            return;
        };
        candidate.sources.push(code.clone());
        candidate.phase = Phase::Evaluating;
        *self.device_load.entry(candidate.device).or_insert(0) += 1;
        out.push(candidate.evaluation(id, code));
    }

    pub(super) fn evaluated(&mut self, id: CandidateId, result: EvaluationResult, out: &mut Out) {
        let Some(candidate) = self.candidates.get_mut(&id) else {
            return;
        };
        // After the search's end nothing changes: what was on a device stays there, for a
        // resume to evaluate again.
        if candidate.phase != Phase::Evaluating
            || candidate.attempt != result.attempt
            || self.finished.is_some()
        {
            return;
        }
        if let Some(load) = self.device_load.get_mut(&candidate.device) {
            *load = load.saturating_sub(1);
        }
        let source = candidate
            .source()
            .cloned()
            .unwrap_or_else(|| KernelSource::new(""));
        let simulated = result.provenance == Some(Provenance::Simulated);
        let rejected = |reason: String, judged: bool| Resolution::Rejected {
            source: source.clone(),
            reason,
            judged,
            simulated,
        };
        let resolution = match result.outcome {
            EvaluationOutcome::WorkerDied if !candidate.worker_died => {
                candidate.worker_died = true;
                *self.device_load.entry(candidate.device).or_insert(0) += 1;
                out.push(candidate.evaluation(id, source));
                return;
            }
            EvaluationOutcome::DeviceLost => {
                return self.evaluated_on_lost_device(id, result.reason, out);
            }
            EvaluationOutcome::WorkerDied => rejected(
                format!(
                    "the worker of device {} died twice on this candidate",
                    candidate.device
                ),
                false,
            ),
            EvaluationOutcome::Verified => {
                candidate.launched_kernels = result.launched_kernels;
                let earlier = result
                    .compiled
                    .as_ref()
                    .and_then(|code| self.timed_code.get(code))
                    .copied()
                    .filter(|earlier| *earlier != id);
                if let Some(of) = earlier {
                    let by = Sameness::CompiledCode;
                    self.anything_evaluated = true;
                    return self.resolve(id, Resolution::Duplicate(Earlier { of, by }), out);
                }
                if let (Some(code), Some(_)) = (result.compiled, result.time_ms) {
                    Arc::make_mut(&mut self.timed_code)
                        .entry(code)
                        .or_insert(id);
                }
                Resolution::Verified(
                    RankedKernel {
                        id,
                        source,
                        time_ms: result.time_ms.unwrap_or(f64::INFINITY),
                        launched_kernels: candidate.launched_kernels.clone(),
                    },
                    result.provenance.unwrap_or(Provenance::Measured),
                )
            }
            EvaluationOutcome::WrongOutput => rejected(result.reason, true),
            EvaluationOutcome::Failed => rejected(result.reason, false),
            // A device whose evaluator cannot start can evaluate nothing: before the initial
            // kernel, or before any seed of generation, nothing was (the run is refused, exit 2,
            // as documented), later the run cannot go on.
            EvaluationOutcome::Unstartable
                if candidate.parent.is_none() && (!candidate.seed || !self.anything_evaluated) =>
            {
                candidate.phase = Phase::Resolved;
                let reason = result.reason;
                let resolution = rejected(reason.clone(), false);
                let what = if candidate.seed {
                    format!("seed {id}")
                } else {
                    "the initial kernel".into()
                };
                let candidate = candidate.clone();
                self.record_finished(id, &candidate, &resolution, out);
                return self.finish(
                    RunOutcome::Refused,
                    format!("{what} could not be evaluated: {reason}"),
                    out,
                );
            }
            EvaluationOutcome::Unstartable => {
                let device = candidate.device;
                let reason = result.reason;
                self.resolve(id, rejected(reason.clone(), false), out);
                return self.finish(
                    RunOutcome::Failed,
                    format!("the evaluator of device {device} could not start: {reason}"),
                    out,
                );
            }
        };
        self.anything_evaluated = true;
        self.resolve(id, resolution, out);
    }

    /// A candidate's end: refined when the verifier judged it and attempts are left, else
    /// recorded, counted by the pacer and reflected on.
    pub(super) fn resolve(&mut self, id: CandidateId, resolution: Resolution, out: &mut Out) {
        if self.finished.is_some() {
            return;
        }
        let Some(candidate) = self.candidates.get(&id).cloned() else {
            return;
        };
        // A seed is refined whatever stopped it (it has nothing to fall back on), while
        // generation still decides the first beam; a proposal only when its output was judged.
        if let Resolution::Rejected {
            reason,
            judged,
            simulated,
            ..
        } = &resolution
            && (candidate.seed && !self.seeding.done || *judged && candidate.parent.is_some())
            && candidate.attempt < self.config.max_refinements
            && !self.llm_closed()
        {
            if let Some(c) = self.candidates.get_mut(&id) {
                c.failure_simulated = *simulated;
            }
            return self.refine(id, reason.clone(), out);
        }
        self.asking.remove(&id);
        let outcome = match &resolution {
            Resolution::Verified(kernel, _) => Some(AttemptOutcome::Verified {
                time_ms: kernel.time_ms,
            }),
            Resolution::Rejected { reason, .. } => Some(AttemptOutcome::Failed {
                reason: reason.clone(),
            }),
            _ => None,
        };
        if let Some(c) = self.candidates.get_mut(&id) {
            c.phase = Phase::Resolved;
            c.outcome = outcome;
        }
        self.record_finished(id, &candidate, &resolution, out);
        if let Resolution::Verified(kernel, _) = &resolution {
            self.verified_ms.insert(id, kernel.time_ms);
            if self
                .best
                .is_none_or(|(_, best_ms)| kernel.time_ms < best_ms)
            {
                self.best = Some((id, kernel.time_ms));
                out.push(Decision::BestChanged(kernel.clone()));
            }
        }
        match (candidate.parent, &resolution) {
            (None, _) if !candidate.seed => self.initial_resolved(&resolution, out),
            (Some(parent), Resolution::Verified(..)) => {
                self.previous_errors.remove(&parent);
            }
            (Some(parent), Resolution::Rejected { reason, .. } | Resolution::Failed(reason)) => {
                self.previous_errors.insert(parent, reason.clone());
            }
            _ => {}
        }
        self.settled.push_back(Settled {
            id,
            round: candidate.round,
            resolution,
        });
    }

    pub(super) fn record_finished(
        &self,
        id: CandidateId,
        candidate: &Candidate,
        resolution: &Resolution,
        out: &mut Out,
    ) {
        let (passed, time_ms, reason, duplicate_of, simulated) = match resolution {
            Resolution::Verified(kernel, provenance) => (
                true,
                Some(kernel.time_ms),
                None,
                None,
                *provenance == Provenance::Simulated,
            ),
            Resolution::Rejected {
                reason, simulated, ..
            } => (false, None, Some(reason.clone()), None, *simulated),
            Resolution::Failed(reason) => (false, None, Some(reason.clone()), None, false),
            Resolution::Duplicate(earlier) => {
                (false, None, Some(earlier.reason()), Some(earlier.of), false)
            }
            Resolution::NotProposed => return,
        };
        out.push(Decision::Record(Event::CandidateFinished {
            candidate: id,
            parent: candidate.parent,
            round: candidate.round,
            device: candidate.device,
            passed,
            time_ms,
            reason,
            simulated,
            duplicate_of,
        }));
    }

    pub(super) fn initial_resolved(&mut self, resolution: &Resolution, out: &mut Out) {
        match resolution {
            Resolution::Verified(kernel, _) => {
                self.initial = Some(kernel.clone());
                self.beam = Some(Beam::new(
                    kernel.clone(),
                    self.config.search.num_top_kernels,
                ));
                self.references_after_first_beam();
            }
            Resolution::Rejected { reason, .. } | Resolution::Failed(reason) => self.finish(
                RunOutcome::Failed,
                format!("the initial kernel failed verification: {reason}"),
                out,
            ),
            Resolution::Duplicate(_) | Resolution::NotProposed => {}
        }
    }

    /// PyTorch's references, once the first beam is made: timed after the first request that
    /// follows, never before it (issue 23). On one device they would otherwise hold back the
    /// first parent's profile, which that request waits for; its prompt goes without them, and
    /// later prompts carry them.
    pub(super) fn references_after_first_beam(&mut self) {
        if self.config.time_references {
            let device = device_for(
                CandidateId(self.config.first_search_id()),
                &self.live_devices(),
            );
            self.references_due = Some(device);
        }
    }

    /// The end of the search, once: a completed run's finale follows.
    pub(super) fn finish(&mut self, outcome: RunOutcome, reason: String, out: &mut Out) {
        if self.finished.is_some() {
            return;
        }
        self.finished = Some((outcome, reason.clone()));
        out.push(Decision::Finish {
            outcome,
            reason,
            best: self.best_verified(),
            initial: self.initial.clone(),
        });
    }

    /// The fastest verified kernel the search knows: the run's best at every ending. The beam
    /// takes a round's kernels only when the round ends, so an interrupt or a limit in the
    /// middle of one leaves faster kernels outside it.
    pub(super) fn best_verified(&self) -> Option<RankedKernel> {
        let (id, _) = self.best?;
        self.ranked(id)
    }
}
