//! The Manager: the search. It is event-driven: a round's LLM requests all go out at once (the
//! broker caps them), each candidate is evaluated as soon as its proposal arrives, and the round
//! closes when its last candidate is resolved. It never touches a device itself: GpuWorkers do.
//!
//! In steady search there are no rounds to wait for: up to max_inflight proposals are always
//! being asked for, the next candidate is planned as soon as a proposal is answered or a
//! candidate resolved, each candidate goes to the first free device when its proposal arrives,
//! and the beam takes each verified result as it comes. Rounds remain as a numbering (N × M
//! candidates each) for the journal and the report.
//!
//! Around each proposal: a kernel that first becomes a parent is profiled (when profiling is on)
//! and analysed once, and its proposals each take a different bottleneck of that analysis; a
//! candidate that fails verification is refined as the same candidate, at most
//! `max_refinements` times; every evaluated candidate gets a reflexion, off the round's critical
//! path, whose lesson later optimization prompts carry.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::rc::Rc;
use std::time::Duration;

use actix::prelude::*;

use crate::analysis::{AnalyzedBottleneck, parse_bottlenecks, parse_lesson};
use crate::collector::{Collector, PrepareCandidate, PrepareFolder, Record, WriteCandidateFile};
use crate::gpu_worker::{
    Evaluate, Evaluated, Finale, GpuWorker, Profile, RunUserTest, TimeReferences,
};
use crate::journal::{BeamMember, Event, RunOutcome};
use crate::llm_broker::{LlmBroker, Propose};
use crate::model::{CandidateId, DeviceId, KernelSource, Provenance, RankedKernel, Verdict};
use crate::ports::{
    AnalysisContext, AttemptOutcome, EvalError, EvalJob, Lesson, LlmError, LlmReply, LlmRequest,
    ProfileError, ProfileJob, ProfileSummary, PromptBuilder, ProposalContext, ReferenceTimes,
    RefinementContext, ReflexionContext, RenderedPrompt, RequestKind,
};
use crate::search::{
    Beam, Pacing, PlannedCandidate, SearchKind, SearchSettings, SteadyPlan, first_free_device,
    plan_round, virtual_round,
};
use crate::supervisor::{RestartWorker, RunDone, Supervisor};

#[derive(Clone, Debug)]
pub struct ManagerSettings {
    pub search: SearchSettings,
    pub pacing: Pacing,
    pub devices: Vec<DeviceId>,
    /// The deadline of each verification or timing step (test_timeout_s).
    pub step_deadline: Duration,
    /// Profile each kernel once, when it first becomes a parent.
    pub profile_parents: bool,
    /// Time PyTorch eager and torch.compile once per run (a platform that measures nothing,
    /// noop, has no reference to give).
    pub time_references: bool,
    /// How many more attempts a candidate that failed verification gets (max_refinements).
    pub max_refinements: u32,
    /// End the run when the best kernel's profile puts it at the roofline (stop_at_roofline; off
    /// by default, and off on ROCm, where the review kept it off).
    pub stop_at_roofline: bool,
    /// The user's files staged beside the best kernel for the final check (problem.py, test.py).
    pub final_files: Vec<(String, String)>,
}

/// How many of the run's latest lessons an optimization prompt carries.
pub const RECENT_LESSONS: usize = 5;

/// Begin the run: evaluate the initial kernel, then search.
#[derive(Message)]
#[rtype(result = "()")]
pub struct StartRun {
    pub initial_source: KernelSource,
}

/// Stop starting new work and end the run as interrupted.
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopRun {
    pub signal: String,
}

#[derive(Clone, Copy, Debug)]
struct Slot {
    id: CandidateId,
    parent: Option<CandidateId>,
    round: u32,
    device: DeviceId,
    proposal_index: u32,
    /// Refinements asked for so far: 0 while the first proposal is evaluated.
    refinements: u32,
}

enum Resolution {
    Verified(RankedKernel, Provenance),
    /// Evaluated and failed. `verdict` says the verifier judged it (wrong output): only such a
    /// candidate is refined, never one that crashed or ran past its deadline.
    Rejected {
        source: KernelSource,
        reason: String,
        verdict: bool,
    },
    /// Never evaluated: the proposal failed, had no code or its prompt could not be rendered.
    Failed(String),
    Duplicate(CandidateId),
    /// The provider had nothing to propose (exhausted, or the budget stopped the request).
    NotProposed,
}

/// A refinement in flight: what failed and why, for when it brings no new code.
struct Refining {
    failed: KernelSource,
    error: String,
}

#[derive(Default)]
struct RoundState {
    /// Candidates of the round planned so far (steady search plans them one at a time).
    planned: u32,
    number: u32,
    outstanding: usize,
    results: Vec<RankedKernel>,
    proposed: u32,
    verified: u32,
    failed: u32,
    duplicates: u32,
    failures: Vec<String>,
}

impl RoundState {
    /// Counts a candidate that ended; the verified kernel itself goes to the beam elsewhere.
    fn count(&mut self, id: CandidateId, resolution: &Resolution) {
        self.outstanding -= 1;
        match resolution {
            Resolution::Verified(..) => {
                self.proposed += 1;
                self.verified += 1;
            }
            Resolution::Rejected { reason, .. } | Resolution::Failed(reason) => {
                self.proposed += 1;
                self.failed += 1;
                self.failures.push(format!("{id}: {reason}"));
            }
            Resolution::Duplicate(_) => {
                self.proposed += 1;
                self.duplicates += 1;
            }
            Resolution::NotProposed => {}
        }
    }
}

/// A steady search in progress.
struct Steady {
    max_inflight: usize,
    plan: SteadyPlan,
    /// Candidates planned whose first proposal is not answered yet.
    asking: HashSet<CandidateId>,
    /// Candidates planned and not resolved.
    unresolved: usize,
    /// The virtual rounds started and not finished, oldest first.
    rounds: BTreeMap<u32, RoundState>,
    /// The best time when the latest virtual round finished, to tell whether the next improved.
    best_at_round_end_ms: f64,
    /// Why no more candidates are planned though the plan has more (greedy's patience ran out).
    stopped: Option<String>,
}

pub struct Manager {
    settings: ManagerSettings,
    supervisor: Addr<Supervisor>,
    workers: BTreeMap<DeviceId, Addr<GpuWorker>>,
    broker: Addr<LlmBroker>,
    collector: Addr<Collector>,
    prompts: Rc<dyn PromptBuilder>,
    next_id: u64,
    beam: Option<Beam>,
    initial_ms: Option<f64>,
    initial: Option<RankedKernel>,
    /// Why the initial kernel's evaluator could not start, when it could not.
    initial_unevaluable: Option<String>,
    /// Why a device's evaluator could not start again: the run cannot go on, whatever else
    /// would have ended it.
    evaluator_lost: Option<String>,
    profiles: HashMap<CandidateId, Option<ProfileSummary>>,
    profiling: bool,
    /// Each parent's bottlenecks, asked for once; empty when the analysis named none.
    analyses: HashMap<CandidateId, Vec<AnalyzedBottleneck>>,
    /// The latest lessons of the run, oldest first, at most RECENT_LESSONS.
    lessons: VecDeque<Lesson>,
    /// Why the latest failed attempt made from each parent failed; cleared by a verified one.
    previous_errors: HashMap<CandidateId, String>,
    /// PyTorch eager's and torch.compile's times for the prompts. Unknown until the platform
    /// reports them to the Manager, which no evaluator does yet.
    reference: ReferenceTimes,
    evaluated_sources: HashMap<KernelSource, CandidateId>,
    /// Every verified kernel's time, for reflexions on a parent that has left the beam since.
    verified_ms: HashMap<CandidateId, f64>,
    /// Evaluations queued or running on each device, for steady search's first free device.
    device_load: BTreeMap<DeviceId, usize>,
    /// Candidates waiting for their parent's profile and analysis, each with its round; a parent
    /// here is being profiled or analysed and is not asked about again.
    preparing: HashMap<CandidateId, Vec<(PlannedCandidate, u32)>>,
    /// Parents whose profile or analysis is in flight: never asked about twice.
    pending_parents: HashSet<CandidateId>,
    round: RoundState,
    steady: Option<Steady>,
    exhausted: bool,
    budget_reached: Option<String>,
    finished: bool,
}

impl Manager {
    pub fn new(
        settings: ManagerSettings,
        supervisor: Addr<Supervisor>,
        workers: BTreeMap<DeviceId, Addr<GpuWorker>>,
        broker: Addr<LlmBroker>,
        collector: Addr<Collector>,
        prompts: Rc<dyn PromptBuilder>,
    ) -> Self {
        let profiling = settings.profile_parents;
        let device_load = settings.devices.iter().map(|device| (*device, 0)).collect();
        Manager {
            settings,
            supervisor,
            workers,
            broker,
            collector,
            prompts,
            next_id: 1,
            beam: None,
            initial_ms: None,
            initial: None,
            initial_unevaluable: None,
            evaluator_lost: None,
            profiles: HashMap::new(),
            profiling,
            analyses: HashMap::new(),
            lessons: VecDeque::new(),
            previous_errors: HashMap::new(),
            reference: ReferenceTimes::default(),
            evaluated_sources: HashMap::new(),
            verified_ms: HashMap::new(),
            device_load,
            preparing: HashMap::new(),
            pending_parents: HashSet::new(),
            round: RoundState::default(),
            steady: None,
            exhausted: false,
            budget_reached: None,
            finished: false,
        }
    }

    fn record(&self, event: Event) {
        self.collector.do_send(Record(event));
    }

    fn device_for(&self, id: CandidateId) -> DeviceId {
        self.settings.devices[(id.0 % self.settings.devices.len() as u64) as usize]
    }

    /// Writes the candidate's files, then hands it to its device. A worker that died (its mailbox
    /// closed) is restarted by the Supervisor and the candidate is tried once more there.
    fn evaluate(
        &mut self,
        slot: Slot,
        source: KernelSource,
        files: Vec<(String, String)>,
        attempt: u32,
        ctx: &mut Context<Self>,
    ) {
        if self.finished {
            return;
        }
        self.evaluated_sources.insert(source.clone(), slot.id);
        *self.device_load.entry(slot.device).or_insert(0) += 1;
        let collector = self.collector.clone();
        let worker = self.workers[&slot.device].clone();
        let deadline = self.settings.step_deadline;
        let job_source = source.clone();
        let work = async move {
            let folder = collector
                .send(PrepareCandidate {
                    candidate: slot.id,
                    files,
                })
                .await
                .map_err(|_| "the collector is gone".to_string())??;
            let job = EvalJob {
                candidate: slot.id,
                source: job_source,
                folder,
                deadline,
            };
            Ok::<_, String>(
                worker
                    .send(Evaluate {
                        job,
                        parent: slot.parent,
                        round: slot.round,
                    })
                    .await
                    .map_err(|_| worker),
            )
        };
        ctx.spawn(work.into_actor(self).map(move |result, manager, ctx| {
            if let Some(load) = manager.device_load.get_mut(&slot.device) {
                *load = load.saturating_sub(1);
            }
            manager.evaluated(slot, source, attempt, result, ctx)
        }));
    }

    fn evaluated(
        &mut self,
        slot: Slot,
        source: KernelSource,
        attempt: u32,
        result: Result<Result<Evaluated, Addr<GpuWorker>>, String>,
        ctx: &mut Context<Self>,
    ) {
        match result {
            Err(reason) => self.resolve(slot, Resolution::Failed(reason), ctx),
            Ok(Ok(evaluated)) => {
                // A device whose evaluator cannot start (the problem's inputs do not fit, say)
                // can evaluate nothing: before the initial kernel nothing was (exit 2), later
                // the run cannot go on (exit 1).
                let unstartable = match &evaluated.verify {
                    Err(EvalError::Start(reason)) => Some(reason.clone()),
                    _ => None,
                };
                let (initial, device) = (slot.id == CandidateId::INITIAL, slot.device);
                if let (Some(reason), true) = (&unstartable, initial) {
                    self.initial_unevaluable = Some(reason.clone());
                }
                if let (Some(reason), false) = (&unstartable, initial) {
                    self.evaluator_lost = Some(format!(
                        "the evaluator of device {device} could not start: {reason}"
                    ));
                }
                let resolution = resolution_of(slot.id, &source, evaluated);
                self.resolve(slot, resolution, ctx);
                if let Some(reason) = self.evaluator_lost.clone() {
                    self.finish(RunOutcome::Failed, reason);
                }
            }
            Ok(Err(dead_worker)) => self.worker_died(slot, source, attempt, dead_worker, ctx),
        }
    }

    fn worker_died(
        &mut self,
        slot: Slot,
        source: KernelSource,
        attempt: u32,
        dead: Addr<GpuWorker>,
        ctx: &mut Context<Self>,
    ) {
        self.record(Event::WorkerDied {
            device: slot.device,
            candidate: Some(slot.id),
            reason:
                "the worker stopped while evaluating (its handler panicked or its mailbox closed)"
                    .into(),
        });
        let restart = self.supervisor.send(RestartWorker {
            device: slot.device,
            dead,
        });
        ctx.spawn(
            restart
                .into_actor(self)
                .map(move |answer, manager, ctx| match answer {
                    Ok(Ok(worker)) => {
                        manager.workers.insert(slot.device, worker);
                        if attempt == 0 {
                            let files = vec![("kernel.py".to_string(), source.text().to_string())];
                            manager.evaluate(slot, source, files, attempt + 1, ctx);
                        } else {
                            let reason = format!(
                                "the worker of device {} died twice on this candidate",
                                slot.device
                            );
                            let rejected = Resolution::Rejected {
                                source,
                                reason,
                                verdict: false,
                            };
                            manager.resolve(slot, rejected, ctx);
                        }
                    }
                    Ok(Err(reason)) => manager.resolve(slot, Resolution::Failed(reason), ctx),
                    Err(_) => manager.resolve(
                        slot,
                        Resolution::Failed("the supervisor is gone".into()),
                        ctx,
                    ),
                }),
        );
    }

    fn resolve(&mut self, slot: Slot, resolution: Resolution, ctx: &mut Context<Self>) {
        if self.finished {
            return;
        }
        if let Resolution::Rejected {
            source,
            reason,
            verdict: true,
        } = &resolution
            && slot.parent.is_some()
            && slot.refinements < self.settings.max_refinements
            && !self.llm_closed()
        {
            return self.refine(slot, source.clone(), reason.clone(), ctx);
        }
        let (passed, time_ms, reason, duplicate_of, simulated) = match &resolution {
            Resolution::Verified(kernel, provenance) => (
                true,
                Some(kernel.time_ms),
                None,
                None,
                *provenance == Provenance::Simulated,
            ),
            Resolution::Rejected { reason, .. } | Resolution::Failed(reason) => {
                (false, None, Some(reason.clone()), None, false)
            }
            Resolution::Duplicate(of) => (
                false,
                None,
                Some(format!("identical to candidate {of}")),
                Some(*of),
                false,
            ),
            Resolution::NotProposed => (false, None, None, None, false),
        };
        if !matches!(resolution, Resolution::NotProposed) {
            self.record(Event::CandidateFinished {
                candidate: slot.id,
                parent: slot.parent,
                round: slot.round,
                device: slot.device,
                passed,
                time_ms,
                reason,
                simulated,
                duplicate_of,
            });
        }
        if let Resolution::Verified(kernel, _) = &resolution {
            self.verified_ms.insert(kernel.id, kernel.time_ms);
        }
        let Some(parent) = slot.parent else {
            return self.initial_resolved(resolution, ctx);
        };
        match &resolution {
            Resolution::Verified(kernel, _) => {
                self.previous_errors.remove(&parent);
                let outcome = AttemptOutcome::Verified {
                    time_ms: kernel.time_ms,
                };
                self.reflect(slot, kernel.source.clone(), outcome, ctx);
            }
            Resolution::Rejected { source, reason, .. } => {
                self.previous_errors.insert(parent, reason.clone());
                let outcome = AttemptOutcome::Failed {
                    reason: reason.clone(),
                };
                self.reflect(slot, source.clone(), outcome, ctx);
            }
            Resolution::Failed(reason) => {
                self.previous_errors.insert(parent, reason.clone());
            }
            Resolution::Duplicate(_) | Resolution::NotProposed => {}
        }
        if self.steady.is_some() {
            return self.steady_resolved(slot, resolution, ctx);
        }
        self.round.count(slot.id, &resolution);
        if let Resolution::Verified(kernel, _) = resolution {
            self.round.results.push(kernel);
        }
        if self.round.outstanding == 0 {
            self.finish_round(ctx);
        }
    }

    /// Steady search: the beam takes a verified kernel at once, the candidate's virtual round
    /// counts it, and the pipeline moves on.
    fn steady_resolved(&mut self, slot: Slot, resolution: Resolution, ctx: &mut Context<Self>) {
        let steady = self.steady.as_mut().expect("a steady search is running");
        steady.asking.remove(&slot.id);
        steady.unresolved -= 1;
        if let Some(round) = steady.rounds.get_mut(&slot.round) {
            round.count(slot.id, &resolution);
        }
        if let Resolution::Verified(kernel, _) = resolution {
            self.beam
                .as_mut()
                .expect("the search runs with a beam")
                .admit(kernel);
        }
        self.advance_steady(ctx);
    }

    /// Whether a steady search may plan another candidate at all: the plan has more, the
    /// provider can still propose, and nothing decided to stop.
    fn can_plan(&self) -> bool {
        let Some(steady) = &self.steady else {
            return false;
        };
        !self.finished && !self.llm_closed() && steady.stopped.is_none() && !steady.plan.complete()
    }

    /// Whether a steady search has room for another candidate now: fewer than max_inflight
    /// proposals are being asked for, and fewer than max_inflight plus one per device are
    /// unresolved, so that a fast LLM does not propose the whole run from the initial kernel
    /// while the devices work through a queue.
    fn has_room(&self) -> bool {
        self.steady.as_ref().is_some_and(|steady| {
            steady.asking.len() < steady.max_inflight
                && steady.unresolved < steady.max_inflight + self.settings.devices.len()
        })
    }

    /// Plans candidates while there is room, closes the virtual rounds that are done, and ends
    /// the search once nothing more will be planned and nothing is pending.
    fn advance_steady(&mut self, ctx: &mut Context<Self>) {
        self.close_steady_rounds();
        while self.can_plan() && self.has_room() {
            self.plan_steady_candidate(ctx);
        }
        if self.finished {
            return;
        }
        self.close_steady_rounds();
        let Some(steady) = &self.steady else {
            return;
        };
        if steady.unresolved > 0 || self.can_plan() {
            return;
        }
        let reason = if self.exhausted {
            "the llm provider has no more proposals".to_string()
        } else if let Some(reason) = self.budget_reached.clone() {
            reason
        } else if let Some(reason) = steady.stopped.clone() {
            reason
        } else {
            format!("max_rounds ({}) reached", self.settings.search.max_rounds)
        };
        self.finish(RunOutcome::Completed, reason);
    }

    fn plan_steady_candidate(&mut self, ctx: &mut Context<Self>) {
        let device = first_free_device(&self.device_load);
        let beam = self.beam.as_ref().expect("the search runs with a beam");
        let parents: Vec<CandidateId> = beam.members().iter().map(|k| k.id).collect();
        let steady = self.steady.as_mut().expect("a steady search is running");
        let Some(planned) = steady.plan.next(&parents, device) else {
            return;
        };
        let parent = beam
            .members()
            .iter()
            .find(|member| member.id == planned.parent)
            .cloned()
            .expect("the plan takes parents from the beam");
        let round = virtual_round(planned.id, &self.settings.search);
        steady.asking.insert(planned.id);
        steady.unresolved += 1;
        let started = !steady.rounds.contains_key(&round);
        let state = steady.rounds.entry(round).or_insert_with(|| RoundState {
            number: round,
            ..RoundState::default()
        });
        state.planned += 1;
        state.outstanding += 1;
        if started {
            self.record(Event::RoundStarted { round, parents });
        }
        self.preparing
            .entry(parent.id)
            .or_default()
            .push((planned, round));
        self.prepare_parent(parent, round, ctx);
    }

    /// Finishes the oldest virtual rounds whose candidates are all planned (or will not be) and
    /// resolved, in order, so that round_finished records come as in rounds mode.
    fn close_steady_rounds(&mut self) {
        let per_round = self.settings.search.candidates_per_round();
        loop {
            let can_plan = self.can_plan();
            let Some(steady) = self.steady.as_mut() else {
                return;
            };
            let Some(entry) = steady.rounds.first_entry() else {
                return;
            };
            let round = entry.get();
            if round.outstanding > 0 || (round.planned < per_round && can_plan) {
                return;
            }
            let round = entry.remove();
            let beam = self.beam.as_mut().expect("the search runs with a beam");
            beam.end_round(steady.best_at_round_end_ms);
            steady.best_at_round_end_ms = beam.best().time_ms;
            let stale_rounds = beam.rounds_without_improvement();
            let search = self.settings.search;
            if search.kind == SearchKind::Greedy
                && search
                    .max_no_improvement
                    .is_some_and(|limit| stale_rounds >= limit)
                && steady.stopped.is_none()
            {
                steady.stopped = Some(format!("no faster kernel in {stale_rounds} rounds"));
            }
            self.record_round_end(&round);
        }
    }

    /// Whether the provider can take no more requests for code: it ran dry or the budget is
    /// spent.
    fn llm_closed(&self) -> bool {
        self.exhausted || self.budget_reached.is_some()
    }

    /// What an error of a request that was not for code (an analysis, a reflexion) means for the
    /// run: the same as for a proposal, except that the candidate at hand is not at stake.
    fn note_llm_error(&mut self, error: &LlmError) {
        match error {
            LlmError::Exhausted => self.exhausted = true,
            LlmError::BudgetReached(reason) => self.budget_reached = Some(reason.clone()),
            LlmError::Auth(reason) => self.finish(
                RunOutcome::Failed,
                format!("the llm provider refused the credentials: {reason}"),
            ),
            LlmError::Failed(_) => {}
        }
    }

    /// The bottleneck the slot's proposal takes: the parent analysis' bottleneck of the same
    /// index, none past the end of the list.
    fn bottleneck_of(&self, slot: &Slot) -> Option<AnalyzedBottleneck> {
        let parent = slot.parent?;
        self.analyses
            .get(&parent)?
            .get(slot.proposal_index as usize)
            .cloned()
    }

    /// Asks for another attempt at a candidate that failed verification; the new code is
    /// evaluated as the same candidate on the same device.
    fn refine(&mut self, slot: Slot, failed: KernelSource, error: String, ctx: &mut Context<Self>) {
        let parent = slot.parent.expect("only proposals are refined");
        let attempt = slot.refinements + 1;
        let slot = Slot {
            refinements: attempt,
            ..slot
        };
        let context = RefinementContext {
            candidate: slot.id,
            round: slot.round,
            parent,
            attempt,
            max_refinements: self.settings.max_refinements,
            failed_source: failed.clone(),
            error: error.clone(),
            bottleneck: self.bottleneck_of(&slot),
        };
        let prompt = match self.prompts.refinement(&context) {
            Ok(prompt) => prompt,
            Err(render_error) => {
                let reason = format!(
                    "{error} (the refinement prompt could not be rendered: {render_error})"
                );
                let rejected = Resolution::Rejected {
                    source: failed,
                    reason,
                    verdict: false,
                };
                return self.resolve(slot, rejected, ctx);
            }
        };
        let request_id = format!("r{}-c{}-refine{attempt}", slot.round, slot.id);
        self.record(Event::RefinementRequested {
            candidate: slot.id,
            parent,
            round: slot.round,
            device: slot.device,
            request_id: request_id.clone(),
            attempt,
            max_refinements: self.settings.max_refinements,
            error: error.clone(),
        });
        let refining = Refining { failed, error };
        self.request_code(
            slot,
            RequestKind::Refine,
            request_id,
            prompt,
            Some(refining),
            ctx,
        );
    }

    /// Asks what an evaluated candidate taught. The round does not wait for the answer: the
    /// lesson reaches the optimization prompts rendered after it arrives.
    fn reflect(
        &mut self,
        slot: Slot,
        source: KernelSource,
        outcome: AttemptOutcome,
        ctx: &mut Context<Self>,
    ) {
        let parent = slot.parent.expect("only proposals get a reflexion");
        if self.llm_closed() {
            return;
        }
        let Some(parent_time_ms) = self.verified_ms.get(&parent).copied() else {
            return;
        };
        let bottleneck = self.bottleneck_of(&slot);
        let context = ReflexionContext {
            candidate: slot.id,
            round: slot.round,
            parent,
            parent_time_ms,
            source,
            outcome: outcome.clone(),
            bottleneck: bottleneck.clone(),
        };
        let request_id = format!("r{}-c{}-reflexion", slot.round, slot.id);
        let received =
            move |lesson: Option<String>, reply: Option<&LlmReply>, error: Option<String>| {
                Event::ReflexionReceived {
                    candidate: slot.id,
                    parent,
                    round: slot.round,
                    device: slot.device,
                    request_id: format!("r{}-c{}-reflexion", slot.round, slot.id),
                    lesson,
                    usage: reply.and_then(|r| r.usage),
                    cost_usd: reply.and_then(|r| r.cost_usd),
                    error,
                }
            };
        let prompt = match self.prompts.reflexion(&context) {
            Ok(prompt) => prompt,
            Err(error) => {
                let error = format!("the reflexion prompt could not be rendered: {error}");
                return self.record(received(None, None, Some(error)));
            }
        };
        self.record(Event::ReflexionRequested {
            candidate: slot.id,
            parent,
            round: slot.round,
            device: slot.device,
            request_id: request_id.clone(),
        });
        let user = prompt.user.clone();
        let answer = self.broker.send(Propose(LlmRequest {
            request_id,
            kind: RequestKind::Reflexion,
            candidate: slot.id,
            round: slot.round,
            system: prompt.system,
            prompt: prompt.user,
        }));
        ctx.spawn(answer.into_actor(self).map(move |answer, manager, _| {
            if manager.finished {
                return;
            }
            let answer =
                answer.unwrap_or_else(|_| Err(LlmError::Failed("the llm broker is gone".into())));
            match answer {
                Ok(reply) => {
                    manager.write_files(
                        slot.id,
                        [
                            ("reflexion.prompt.md", user),
                            ("reflexion.reply.md", reply.text.clone()),
                        ],
                    );
                    let lesson = parse_lesson(&reply.text);
                    if let Some(lesson) = &lesson {
                        if manager.lessons.len() == RECENT_LESSONS {
                            manager.lessons.pop_front();
                        }
                        manager.lessons.push_back(Lesson {
                            candidate: slot.id,
                            parent,
                            bottleneck: bottleneck.map(|b| b.title),
                            outcome,
                            lesson: lesson.clone(),
                        });
                    }
                    manager.record(received(lesson, Some(&reply), None));
                }
                Err(error) => {
                    manager.record(received(None, None, Some(error.to_string())));
                    manager.note_llm_error(&error);
                }
            }
        }));
    }

    fn write_files<const N: usize>(&self, candidate: CandidateId, files: [(&str, String); N]) {
        for (name, contents) in files {
            self.collector.do_send(WriteCandidateFile {
                candidate,
                name: name.to_string(),
                contents,
            });
        }
    }

    fn initial_resolved(&mut self, resolution: Resolution, ctx: &mut Context<Self>) {
        match resolution {
            Resolution::Verified(kernel, _) => {
                self.initial_ms = Some(kernel.time_ms);
                self.initial = Some(kernel.clone());
                let initial_ms = kernel.time_ms;
                self.beam = Some(Beam::new(kernel, self.settings.search.num_top_kernels));
                if self.settings.time_references {
                    self.time_references(ctx);
                }
                match self.settings.pacing {
                    Pacing::Rounds => self.start_round(1, ctx),
                    Pacing::Steady { max_inflight } => {
                        self.steady = Some(Steady {
                            max_inflight: max_inflight.max(1),
                            plan: SteadyPlan::new(self.settings.search),
                            asking: HashSet::new(),
                            unresolved: 0,
                            rounds: BTreeMap::new(),
                            best_at_round_end_ms: initial_ms,
                            stopped: None,
                        });
                        self.advance_steady(ctx);
                    }
                }
            }
            Resolution::Rejected { reason, .. } | Resolution::Failed(reason) => {
                match self.initial_unevaluable.take() {
                    Some(reason) => self.finish(
                        RunOutcome::Refused,
                        format!("the initial kernel could not be evaluated: {reason}"),
                    ),
                    None => self.finish(
                        RunOutcome::Failed,
                        format!("the initial kernel failed verification: {reason}"),
                    ),
                }
            }
            Resolution::Duplicate(_) | Resolution::NotProposed => {
                unreachable!("the initial kernel is always evaluated")
            }
        }
    }

    /// PyTorch eager and torch.compile, timed once per run on the device that round 1's first
    /// candidate will use (the initial kernel's device is busy with its profile), while round 1's
    /// proposals are requested. Prompts carry the times once they are known.
    fn time_references(&mut self, ctx: &mut Context<Self>) {
        let worker = self.workers[&self.device_for(CandidateId(1))].clone();
        // torch.compile's first call compiles: allow it several steps' time.
        let deadline = self.settings.step_deadline * 4;
        let times = worker.send(TimeReferences { deadline });
        ctx.spawn(times.into_actor(self).map(|times, manager, _| {
            if let Ok(times) = times {
                manager.reference = times;
            }
        }));
    }

    fn start_round(&mut self, number: u32, ctx: &mut Context<Self>) {
        let beam = self
            .beam
            .as_ref()
            .expect("a round starts after the initial kernel is in the beam");
        let parents: Vec<RankedKernel> = beam.members().to_vec();
        let parent_ids: Vec<CandidateId> = parents.iter().map(|p| p.id).collect();
        let planned = plan_round(
            self.next_id,
            &parent_ids,
            &self.settings.search,
            &self.settings.devices,
        );
        self.next_id += planned.len() as u64;
        self.round = RoundState {
            number,
            outstanding: planned.len(),
            ..RoundState::default()
        };
        self.record(Event::RoundStarted {
            round: number,
            parents: parent_ids,
        });
        for parent in parents {
            let own: Vec<(PlannedCandidate, u32)> = planned
                .iter()
                .filter(|p| p.parent == parent.id)
                .map(|p| (*p, number))
                .collect();
            self.preparing.insert(parent.id, own);
            self.prepare_parent(parent, number, ctx);
        }
    }

    /// Sends the proposals waiting in `preparing` for `parent` once it has its profile and
    /// analysis: at once when it has them, else after asking for them (once per kernel; a parent
    /// already being prepared is left to the work in flight, which takes every candidate waiting
    /// for it when it is done).
    fn prepare_parent(&mut self, parent: RankedKernel, round: u32, ctx: &mut Context<Self>) {
        let ready = self.analyses.contains_key(&parent.id) || self.llm_closed();
        let profiled = !self.profiling || self.profiles.contains_key(&parent.id);
        if ready && profiled {
            let proposals = self.proposals_per_parent(parent.id);
            return self.propose_prepared(&parent, proposals, ctx);
        }
        if !self.pending_parents.insert(parent.id) {
            return;
        }
        if profiled {
            self.analyze_then_propose(parent, round, ctx);
        } else {
            self.profile_then_propose(parent, round, ctx);
        }
    }

    /// How many proposals a parent gets: its share of the round, or in steady search one per
    /// bottleneck (its proposals cycle over them).
    fn proposals_per_parent(&self, parent: CandidateId) -> u32 {
        match self.settings.pacing {
            Pacing::Rounds => self.preparing.get(&parent).map_or(0, Vec::len) as u32,
            Pacing::Steady { .. } => self.settings.search.num_bottlenecks,
        }
    }

    fn propose_prepared(&mut self, parent: &RankedKernel, proposals: u32, ctx: &mut Context<Self>) {
        self.pending_parents.remove(&parent.id);
        for (candidate, round) in self.preparing.remove(&parent.id).unwrap_or_default() {
            self.propose(parent, candidate, proposals, round, ctx);
        }
    }

    /// A kernel is profiled once, when it first becomes a parent; every proposal made from it
    /// reuses that profile.
    fn profile_then_propose(&mut self, parent: RankedKernel, round: u32, ctx: &mut Context<Self>) {
        let device = self.device_for(parent.id);
        let worker = self.workers[&device].clone();
        let collector = self.collector.clone();
        let job_parent = parent.clone();
        let work = async move {
            let folder = collector
                .send(PrepareCandidate {
                    candidate: job_parent.id,
                    files: Vec::new(),
                })
                .await
                .map_err(|_| ProfileError::Failed("the collector is gone".into()))?
                .map_err(ProfileError::Failed)?;
            let job = ProfileJob {
                candidate: job_parent.id,
                kernel_names: job_parent.launched_kernels,
                source: job_parent.source,
                folder,
                device,
            };
            worker
                .send(Profile { job, round })
                .await
                .unwrap_or_else(|_| {
                    Err(ProfileError::Failed(
                        "the worker stopped while profiling".into(),
                    ))
                })
        };
        ctx.spawn(work.into_actor(self).map(move |result, manager, ctx| {
            let profile = match result {
                Ok(profile) => {
                    manager.record(Event::ProfileRecorded {
                        candidate: parent.id,
                        device,
                        bottleneck: profile.bottleneck.clone(),
                        duration_ms: profile.duration_ms,
                        details: profile.details.clone(),
                    });
                    let is_best = manager
                        .beam
                        .as_ref()
                        .is_some_and(|beam| beam.best().id == parent.id);
                    if manager.settings.stop_at_roofline && profile.at_roofline && is_best {
                        let reason = format!(
                            "the best kernel (candidate {}) is at the roofline",
                            parent.id
                        );
                        return manager.finish(RunOutcome::Completed, reason);
                    }
                    Some(profile)
                }
                Err(ProfileError::Unavailable(reason)) => {
                    manager.profiling = false;
                    manager.record(Event::ProfilingStopped { reason });
                    None
                }
                Err(ProfileError::Failed(_)) => None,
            };
            manager.profiles.insert(parent.id, profile);
            manager.analyze_then_propose(parent, round, ctx);
        }));
    }

    /// A kernel's bottlenecks are asked for once, when it first becomes a parent (after its
    /// profile); its proposals then go out, each taking a different bottleneck.
    fn analyze_then_propose(&mut self, parent: RankedKernel, round: u32, ctx: &mut Context<Self>) {
        if self.finished {
            return;
        }
        let requested = self.proposals_per_parent(parent.id);
        if self.analyses.contains_key(&parent.id) || self.llm_closed() {
            return self.propose_prepared(&parent, requested, ctx);
        }
        let request_id = format!("r{round}-c{}-analysis", parent.id);
        let parent_id = parent.id;
        let received_id = request_id.clone();
        let received =
            move |returned: &[AnalyzedBottleneck],
                  reply: Option<&LlmReply>,
                  error: Option<String>| Event::AnalysisReceived {
                candidate: parent_id,
                round,
                request_id: received_id.clone(),
                requested,
                returned: returned.len() as u32,
                bottlenecks: returned.iter().map(|b| b.title.clone()).collect(),
                usage: reply.and_then(|r| r.usage),
                cost_usd: reply.and_then(|r| r.cost_usd),
                error,
            };
        let context = AnalysisContext {
            candidate: parent.id,
            round,
            source: parent.source.clone(),
            time_ms: parent.time_ms,
            reference: self.reference,
            profile: self.profiles.get(&parent.id).cloned().flatten(),
            num_bottlenecks: requested,
        };
        let prompt = match self.prompts.analysis(&context) {
            Ok(prompt) => prompt,
            Err(error) => {
                let error = format!("the analysis prompt could not be rendered: {error}");
                self.record(received(&[], None, Some(error)));
                self.analyses.insert(parent.id, Vec::new());
                return self.propose_prepared(&parent, requested, ctx);
            }
        };
        self.record(Event::AnalysisRequested {
            candidate: parent.id,
            round,
            request_id: request_id.clone(),
            requested,
        });
        let user = prompt.user.clone();
        let answer = self.broker.send(Propose(LlmRequest {
            request_id: request_id.clone(),
            kind: RequestKind::Analysis,
            candidate: parent.id,
            round,
            system: prompt.system,
            prompt: prompt.user,
        }));
        ctx.spawn(answer.into_actor(self).map(move |answer, manager, ctx| {
            if manager.finished {
                return;
            }
            let answer =
                answer.unwrap_or_else(|_| Err(LlmError::Failed("the llm broker is gone".into())));
            let bottlenecks = match answer {
                Ok(reply) => {
                    manager.write_files(
                        parent.id,
                        [
                            ("analysis.prompt.md", user),
                            ("analysis.reply.md", reply.text.clone()),
                        ],
                    );
                    let mut bottlenecks = parse_bottlenecks(&reply.text);
                    bottlenecks.truncate(requested as usize);
                    manager.record(received(&bottlenecks, Some(&reply), None));
                    bottlenecks
                }
                Err(error) => {
                    manager.record(received(&[], None, Some(error.to_string())));
                    manager.note_llm_error(&error);
                    Vec::new()
                }
            };
            manager.analyses.insert(parent.id, bottlenecks);
            manager.propose_prepared(&parent, requested, ctx);
        }));
    }

    /// Asks for the code of one planned candidate; `proposals` is how many its parent gets this
    /// round.
    fn propose(
        &mut self,
        parent: &RankedKernel,
        planned: PlannedCandidate,
        proposals: u32,
        round: u32,
        ctx: &mut Context<Self>,
    ) {
        let slot = Slot {
            id: planned.id,
            parent: Some(planned.parent),
            round,
            device: planned.device,
            proposal_index: planned.proposal_index,
            refinements: 0,
        };
        if self.finished {
            return;
        }
        if self.llm_closed() {
            return self.resolve(slot, Resolution::NotProposed, ctx);
        }
        let best_ms = self
            .beam
            .as_ref()
            .map(|beam| beam.best().time_ms)
            .unwrap_or(parent.time_ms);
        let context = ProposalContext {
            candidate: slot.id,
            round,
            parent: parent.id,
            parent_source: parent.source.clone(),
            parent_time_ms: parent.time_ms,
            best_time_ms: best_ms,
            initial_time_ms: self.initial_ms.unwrap_or(parent.time_ms),
            reference: self.reference,
            proposal_index: slot.proposal_index,
            proposals,
            profile: self.profiles.get(&parent.id).cloned().flatten(),
            bottleneck: self.bottleneck_of(&slot),
            recent_lessons: self.lessons.iter().cloned().collect(),
            previous_error: self.previous_errors.get(&parent.id).cloned(),
        };
        let prompt = match self.prompts.optimization(&context) {
            Ok(prompt) => prompt,
            Err(error) => {
                return self.resolve(
                    slot,
                    Resolution::Failed(format!("the prompt could not be rendered: {error}")),
                    ctx,
                );
            }
        };
        let request_id = format!("r{round}-c{}", slot.id);
        self.request_code(slot, RequestKind::Optimize, request_id, prompt, None, ctx);
    }

    /// Sends a request for code (a proposal or a refinement of it) and handles the reply.
    fn request_code(
        &mut self,
        slot: Slot,
        kind: RequestKind,
        request_id: String,
        prompt: RenderedPrompt,
        refining: Option<Refining>,
        ctx: &mut Context<Self>,
    ) {
        self.record(Event::ProposalRequested {
            candidate: slot.id,
            parent: slot.parent.expect("proposals have parents"),
            round: slot.round,
            device: slot.device,
            request_id: request_id.clone(),
            kind,
        });
        let user = prompt.user.clone();
        let request = LlmRequest {
            request_id: request_id.clone(),
            kind,
            candidate: slot.id,
            round: slot.round,
            system: prompt.system,
            prompt: prompt.user,
        };
        let answer = self.broker.send(Propose(request));
        ctx.spawn(answer.into_actor(self).map(move |answer, manager, ctx| {
            let answer =
                answer.unwrap_or_else(|_| Err(LlmError::Failed("the llm broker is gone".into())));
            manager.proposal_answered(slot, request_id, user, refining, answer, ctx);
        }));
    }

    /// In steady search a first proposal's answer takes the first free device and makes room
    /// for the next candidate.
    fn proposal_answered(
        &mut self,
        slot: Slot,
        request_id: String,
        prompt: String,
        refining: Option<Refining>,
        answer: Result<LlmReply, LlmError>,
        ctx: &mut Context<Self>,
    ) {
        if self.finished {
            return;
        }
        let slot = match self.steady.as_mut() {
            Some(steady) if slot.refinements == 0 => {
                steady.asking.remove(&slot.id);
                Slot {
                    device: first_free_device(&self.device_load),
                    ..slot
                }
            }
            _ => slot,
        };
        self.answer_proposal(slot, request_id, prompt, refining, answer, ctx);
        if self.steady.is_some() {
            self.advance_steady(ctx);
        }
    }

    fn answer_proposal(
        &mut self,
        slot: Slot,
        request_id: String,
        prompt: String,
        refining: Option<Refining>,
        answer: Result<LlmReply, LlmError>,
        ctx: &mut Context<Self>,
    ) {
        let parent = slot.parent.expect("proposals have parents");
        let received = |outcome: &str, reply: Option<&LlmReply>, error: Option<String>| {
            Event::ProposalReceived {
                candidate: slot.id,
                parent,
                round: slot.round,
                device: slot.device,
                request_id: request_id.clone(),
                outcome: outcome.to_string(),
                truncated: reply.is_some_and(|r| r.truncated),
                usage: reply.and_then(|r| r.usage),
                cost_usd: reply.and_then(|r| r.cost_usd),
                error,
            }
        };
        // A refinement that brings no new code ends the candidate with the failure it was
        // asked to fix; a first proposal without code fails (or is not proposed) on its own.
        let unrefined = |why: String| {
            refining.as_ref().map(|refining| Resolution::Rejected {
                source: refining.failed.clone(),
                reason: format!("{} (refinement {} {why})", refining.error, slot.refinements),
                verdict: false,
            })
        };
        match answer {
            Err(LlmError::Exhausted) => {
                self.record(received("exhausted", None, None));
                self.exhausted = true;
                let resolution =
                    unrefined("was not answered: the llm provider is exhausted".into())
                        .unwrap_or(Resolution::NotProposed);
                self.resolve(slot, resolution, ctx);
            }
            Err(LlmError::BudgetReached(reason)) => {
                self.record(received("budget", None, Some(reason.clone())));
                let resolution =
                    unrefined(format!("was not sent: {reason}")).unwrap_or(Resolution::NotProposed);
                self.budget_reached = Some(reason);
                self.resolve(slot, resolution, ctx);
            }
            Err(LlmError::Auth(reason)) => {
                self.record(received("failed", None, Some(reason.clone())));
                self.finish(
                    RunOutcome::Failed,
                    format!("the llm provider refused the credentials: {reason}"),
                );
            }
            Err(LlmError::Failed(reason)) => {
                self.record(received("failed", None, Some(reason.clone())));
                let resolution = unrefined(format!("failed: {reason}")).unwrap_or_else(|| {
                    Resolution::Failed(format!("the proposal failed: {reason}"))
                });
                self.resolve(slot, resolution, ctx);
            }
            Ok(reply) => {
                let (prompt_name, reply_name) = match slot.refinements {
                    0 => ("prompt.md".to_string(), "reply.md".to_string()),
                    k => (
                        format!("prompt.refine{k}.md"),
                        format!("reply.refine{k}.md"),
                    ),
                };
                let files = vec![(prompt_name, prompt), (reply_name, reply.text.clone())];
                let cut = if reply.truncated {
                    " (the reply was cut at max_tokens)"
                } else {
                    ""
                };
                match reply.code.clone() {
                    None => {
                        self.record(received("no_code", Some(&reply), None));
                        self.collector.do_send(PrepareCandidate {
                            candidate: slot.id,
                            files,
                        });
                        let resolution = unrefined(format!(
                            "had no python code block defining kernel_function{cut}"
                        ))
                        .unwrap_or_else(|| {
                            Resolution::Failed(format!(
                                "the reply has no python code block defining kernel_function{cut}"
                            ))
                        });
                        self.resolve(slot, resolution, ctx);
                    }
                    Some(code) => {
                        self.record(received("code", Some(&reply), None));
                        match self.evaluated_sources.get(&code).copied() {
                            Some(original) if original == slot.id => {
                                self.collector.do_send(PrepareCandidate {
                                    candidate: slot.id,
                                    files,
                                });
                                let resolution = unrefined("returned the code that failed".into())
                                    .expect("only a refinement can repeat its own code");
                                return self.resolve(slot, resolution, ctx);
                            }
                            Some(original) => {
                                if slot.refinements > 0 {
                                    self.collector.do_send(PrepareCandidate {
                                        candidate: slot.id,
                                        files,
                                    });
                                }
                                return self.resolve(slot, Resolution::Duplicate(original), ctx);
                            }
                            None => {}
                        }
                        let mut files = files;
                        files.push(("kernel.py".to_string(), code.text().to_string()));
                        if slot.refinements > 0 {
                            files.push((
                                format!("kernel.refine{}.py", slot.refinements),
                                code.text().to_string(),
                            ));
                        }
                        self.evaluate(slot, code, files, 0, ctx);
                    }
                }
            }
        }
    }

    /// The beam as it stands and the round's tally, at the end of a round (or a virtual one).
    fn record_round_end(&self, round: &RoundState) {
        let beam = self.beam.as_ref().expect("rounds run with a beam");
        let best = beam.best();
        let members: Vec<BeamMember> = beam
            .members()
            .iter()
            .map(|k| BeamMember {
                candidate: k.id,
                time_ms: k.time_ms,
            })
            .collect();
        self.record(Event::BeamUpdated {
            round: round.number,
            beam: members,
        });
        self.record(Event::RoundFinished {
            round: round.number,
            proposed: round.proposed,
            verified: round.verified,
            failed: round.failed,
            duplicates: round.duplicates,
            failures: round.failures.clone(),
            best_candidate: best.id,
            best_ms: best.time_ms,
        });
    }

    fn finish_round(&mut self, ctx: &mut Context<Self>) {
        let mut round = std::mem::take(&mut self.round);
        let beam = self.beam.as_mut().expect("rounds run with a beam");
        beam.absorb(std::mem::take(&mut round.results));
        let stale_rounds = beam.rounds_without_improvement();
        self.record_round_end(&round);
        let search = self.settings.search;
        let stop_reason = if self.exhausted {
            Some("the llm provider has no more proposals".to_string())
        } else if let Some(reason) = self.budget_reached.clone() {
            Some(reason)
        } else if round.number >= search.max_rounds {
            Some(format!("max_rounds ({}) reached", search.max_rounds))
        } else if search.kind == SearchKind::Greedy
            && search
                .max_no_improvement
                .is_some_and(|limit| stale_rounds >= limit)
        {
            Some(format!("no faster kernel in {stale_rounds} rounds"))
        } else {
            None
        };
        match stop_reason {
            Some(reason) => self.finish(RunOutcome::Completed, reason),
            None => self.start_round(round.number + 1, ctx),
        }
    }

    fn finish(&mut self, outcome: RunOutcome, reason: String) {
        if self.finished {
            return;
        }
        let (outcome, reason) = match &self.evaluator_lost {
            Some(lost) if outcome == RunOutcome::Completed => (RunOutcome::Failed, lost.clone()),
            _ => (outcome, reason),
        };
        self.finished = true;
        let best = self.beam.as_ref().map(|beam| beam.best().clone());
        let done = RunDone {
            outcome,
            reason,
            best: best.clone(),
            initial_ms: self.initial_ms,
        };
        match (outcome, best, &self.initial) {
            (RunOutcome::Completed, Some(best), Some(initial)) => {
                self.finale(done, best, initial.clone())
            }
            _ => self.supervisor.do_send(done),
        }
    }

    /// The end of a run that ended as planned: the initial kernel, the final beam and PyTorch's
    /// references timed again in one fresh evaluator, interleaved; the best kernel profiled if
    /// it has no profile yet; the best kernel staged beside problem.py and test.py and the user's
    /// own test run there. Then the Supervisor hears that the run is done.
    fn finale(&mut self, done: RunDone, best: RankedKernel, initial: RankedKernel) {
        let mut kernels = vec![(initial.id, initial.source)];
        for member in self.beam.as_ref().map(Beam::members).unwrap_or_default() {
            if kernels.iter().all(|(id, _)| *id != member.id) {
                kernels.push((member.id, member.source.clone()));
            }
        }
        let profile_best = self.profiling && !matches!(self.profiles.get(&best.id), Some(Some(_)));
        let device = self.settings.devices[0];
        let worker = self.workers[&device].clone();
        let collector = self.collector.clone();
        let supervisor = self.supervisor.clone();
        let deadline = self.settings.step_deadline;
        let mut staged = self.settings.final_files.clone();
        staged.push(("kernel.py".to_string(), best.source.text().to_string()));
        actix::spawn(async move {
            let mut folders = Vec::new();
            for (candidate, source) in kernels {
                if let Ok(Ok(folder)) = collector
                    .send(PrepareCandidate {
                        candidate,
                        files: Vec::new(),
                    })
                    .await
                {
                    folders.push((candidate, source, folder));
                }
            }
            let _ = worker
                .send(Finale {
                    kernels: folders.clone(),
                    deadline,
                })
                .await;
            if profile_best
                && let Some((candidate, source, folder)) =
                    folders.iter().find(|(id, _, _)| *id == best.id)
            {
                let job = ProfileJob {
                    candidate: *candidate,
                    source: source.clone(),
                    folder: folder.clone(),
                    device,
                    kernel_names: best.launched_kernels.clone(),
                };
                if let Ok(Ok(profile)) = worker.send(Profile { job, round: 0 }).await {
                    collector.do_send(Record(Event::ProfileRecorded {
                        candidate: *candidate,
                        device,
                        bottleneck: profile.bottleneck,
                        duration_ms: profile.duration_ms,
                        details: profile.details,
                    }));
                }
            }
            let event = match collector
                .send(PrepareFolder {
                    name: "final".into(),
                    files: staged,
                })
                .await
            {
                Ok(Ok(folder)) => {
                    let outcome = worker
                        .send(RunUserTest {
                            folder: folder.clone(),
                            deadline,
                        })
                        .await;
                    let folder = folder.display().to_string();
                    match outcome {
                        Ok(Ok(Some(test))) => Event::UserTestRan {
                            folder,
                            passed: Some(test.passed),
                            exit_code: test.exit_code,
                            log: Some(test.log.display().to_string()),
                            error: None,
                        },
                        Ok(Ok(None)) => Event::UserTestRan {
                            folder,
                            passed: None,
                            exit_code: None,
                            log: None,
                            error: None,
                        },
                        Ok(Err(error)) => Event::UserTestRan {
                            folder,
                            passed: None,
                            exit_code: None,
                            log: None,
                            error: Some(error.to_string()),
                        },
                        Err(_) => Event::UserTestRan {
                            folder,
                            passed: None,
                            exit_code: None,
                            log: None,
                            error: Some("the worker stopped".into()),
                        },
                    }
                }
                Ok(Err(error)) => Event::UserTestRan {
                    folder: "final".into(),
                    passed: None,
                    exit_code: None,
                    log: None,
                    error: Some(error),
                },
                Err(_) => Event::UserTestRan {
                    folder: "final".into(),
                    passed: None,
                    exit_code: None,
                    log: None,
                    error: Some("the collector is gone".into()),
                },
            };
            collector.do_send(Record(event));
            supervisor.do_send(done);
        });
    }
}

fn resolution_of(id: CandidateId, source: &KernelSource, evaluated: Evaluated) -> Resolution {
    let rejected = |reason: String, verdict: bool| Resolution::Rejected {
        source: source.clone(),
        reason,
        verdict,
    };
    let verify = match evaluated.verify {
        Ok(outcome) => outcome,
        Err(error) => return rejected(error.to_string(), false),
    };
    if let Verdict::Failed { reason } = verify.verdict {
        return rejected(format!("verification failed: {reason}"), true);
    }
    match evaluated.time {
        Some(Ok(outcome)) => Resolution::Verified(
            RankedKernel {
                id,
                source: source.clone(),
                time_ms: outcome.timing.median_ms,
                launched_kernels: verify.launched_kernels,
            },
            outcome.provenance,
        ),
        Some(Err(error)) => rejected(format!("timing failed: {error}"), false),
        None => rejected("the candidate was verified but never timed".into(), false),
    }
}

impl Actor for Manager {
    type Context = Context<Self>;
}

impl Handler<StartRun> for Manager {
    type Result = ();

    fn handle(&mut self, message: StartRun, ctx: &mut Context<Self>) {
        let slot = Slot {
            id: CandidateId::INITIAL,
            parent: None,
            round: 0,
            device: self.device_for(CandidateId::INITIAL),
            proposal_index: 0,
            refinements: 0,
        };
        let files = vec![(
            "kernel.py".to_string(),
            message.initial_source.text().to_string(),
        )];
        self.evaluate(slot, message.initial_source, files, 0, ctx);
    }
}

impl Handler<StopRun> for Manager {
    type Result = ();

    fn handle(&mut self, message: StopRun, _: &mut Context<Self>) {
        self.record(Event::Interrupted {
            signal: message.signal.clone(),
        });
        self.finish(
            RunOutcome::Interrupted,
            format!("interrupted by {}", message.signal),
        );
    }
}
