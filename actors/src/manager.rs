//! The Manager: the search. It is event-driven: a round's LLM requests all go out at once (the
//! broker caps them), each candidate is evaluated as soon as its proposal arrives, and the round
//! closes when its last candidate is resolved. It never touches a device itself: GpuWorkers do.

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::time::Duration;

use actix::prelude::*;

use crate::collector::{Collector, PrepareCandidate, Record};
use crate::gpu_worker::{Evaluate, Evaluated, GpuWorker, Profile};
use crate::journal::{BeamMember, Event, RunOutcome};
use crate::llm_broker::{LlmBroker, Propose};
use crate::model::{CandidateId, DeviceId, KernelSource, Provenance, RankedKernel, Verdict};
use crate::ports::{
    EvalJob, LlmError, LlmReply, LlmRequest, ProfileError, ProfileJob, ProfileSummary,
    PromptBuilder, ProposalContext, RequestKind,
};
use crate::search::{Beam, PlannedCandidate, SearchKind, SearchSettings, plan_round};
use crate::supervisor::{RestartWorker, RunDone, Supervisor};

#[derive(Clone, Debug)]
pub struct ManagerSettings {
    pub search: SearchSettings,
    pub devices: Vec<DeviceId>,
    /// The deadline of each verification or timing step (test_timeout_s).
    pub step_deadline: Duration,
    /// Profile each kernel once, when it first becomes a parent.
    pub profile_parents: bool,
}

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
}

enum Resolution {
    Verified(RankedKernel, Provenance),
    Failed(String),
    Duplicate(CandidateId),
    /// The provider had nothing to propose (exhausted, or the budget stopped the request).
    NotProposed,
}

#[derive(Default)]
struct RoundState {
    number: u32,
    outstanding: usize,
    results: Vec<RankedKernel>,
    proposed: u32,
    verified: u32,
    failed: u32,
    duplicates: u32,
    failures: Vec<String>,
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
    profiles: HashMap<CandidateId, Option<ProfileSummary>>,
    profiling: bool,
    evaluated_sources: HashMap<KernelSource, CandidateId>,
    round: RoundState,
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
            profiles: HashMap::new(),
            profiling,
            evaluated_sources: HashMap::new(),
            round: RoundState::default(),
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
        ctx.spawn(
            work.into_actor(self)
                .map(move |result, manager, ctx| match result {
                    Err(reason) => manager.resolve(slot, Resolution::Failed(reason), ctx),
                    Ok(Ok(evaluated)) => {
                        let resolution = resolution_of(slot.id, &source, evaluated);
                        manager.resolve(slot, resolution, ctx);
                    }
                    Ok(Err(dead_worker)) => {
                        manager.worker_died(slot, source, attempt, dead_worker, ctx)
                    }
                }),
        );
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
                            manager.resolve(slot, Resolution::Failed(reason), ctx);
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
        let (passed, time_ms, reason, duplicate_of, simulated) = match &resolution {
            Resolution::Verified(kernel, provenance) => (
                true,
                Some(kernel.time_ms),
                None,
                None,
                *provenance == Provenance::Simulated,
            ),
            Resolution::Failed(reason) => (false, None, Some(reason.clone()), None, false),
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
        if slot.id == CandidateId::INITIAL {
            return self.initial_resolved(resolution, ctx);
        }
        let round = &mut self.round;
        round.outstanding -= 1;
        match resolution {
            Resolution::Verified(kernel, _) => {
                round.proposed += 1;
                round.verified += 1;
                round.results.push(kernel);
            }
            Resolution::Failed(reason) => {
                round.proposed += 1;
                round.failed += 1;
                round.failures.push(format!("{}: {reason}", slot.id));
            }
            Resolution::Duplicate(_) => {
                round.proposed += 1;
                round.duplicates += 1;
            }
            Resolution::NotProposed => {}
        }
        if round.outstanding == 0 {
            self.finish_round(ctx);
        }
    }

    fn initial_resolved(&mut self, resolution: Resolution, ctx: &mut Context<Self>) {
        match resolution {
            Resolution::Verified(kernel, _) => {
                self.initial_ms = Some(kernel.time_ms);
                self.beam = Some(Beam::new(kernel, self.settings.search.num_top_kernels));
                self.start_round(1, ctx);
            }
            Resolution::Failed(reason) => {
                self.finish(
                    RunOutcome::Failed,
                    format!("the initial kernel failed verification: {reason}"),
                );
            }
            Resolution::Duplicate(_) | Resolution::NotProposed => {
                unreachable!("the initial kernel is always evaluated")
            }
        }
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
            let own: Vec<PlannedCandidate> = planned
                .iter()
                .filter(|p| p.parent == parent.id)
                .copied()
                .collect();
            if self.profiling && !self.profiles.contains_key(&parent.id) {
                self.profile_then_propose(parent, own, number, ctx);
            } else {
                for candidate in own {
                    self.propose(&parent, candidate, number, ctx);
                }
            }
        }
    }

    /// A kernel is profiled once, when it first becomes a parent; every proposal made from it
    /// reuses that profile.
    fn profile_then_propose(
        &mut self,
        parent: RankedKernel,
        planned: Vec<PlannedCandidate>,
        round: u32,
        ctx: &mut Context<Self>,
    ) {
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
            for candidate in planned {
                manager.propose(&parent, candidate, round, ctx);
            }
        }));
    }

    fn propose(
        &mut self,
        parent: &RankedKernel,
        planned: PlannedCandidate,
        round: u32,
        ctx: &mut Context<Self>,
    ) {
        let slot = Slot {
            id: planned.id,
            parent: Some(planned.parent),
            round,
            device: planned.device,
            proposal_index: planned.proposal_index,
        };
        if self.finished {
            return;
        }
        if self.exhausted || self.budget_reached.is_some() {
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
            proposal_index: slot.proposal_index,
            profile: self.profiles.get(&parent.id).cloned().flatten(),
        };
        let (system, prompt) = match self.prompts.optimization(&context) {
            Ok(rendered) => rendered,
            Err(error) => {
                return self.resolve(
                    slot,
                    Resolution::Failed(format!("the prompt could not be rendered: {error}")),
                    ctx,
                );
            }
        };
        let request_id = format!("r{round}-c{}", slot.id);
        self.record(Event::ProposalRequested {
            candidate: slot.id,
            parent: planned.parent,
            round,
            device: slot.device,
            request_id: request_id.clone(),
            kind: RequestKind::Optimize,
        });
        let request = LlmRequest {
            request_id: request_id.clone(),
            kind: RequestKind::Optimize,
            candidate: slot.id,
            round,
            system,
            prompt: prompt.clone(),
        };
        let answer = self.broker.send(Propose(request));
        ctx.spawn(answer.into_actor(self).map(move |answer, manager, ctx| {
            let answer =
                answer.unwrap_or_else(|_| Err(LlmError::Failed("the llm broker is gone".into())));
            manager.proposal_answered(slot, request_id, prompt, answer, ctx);
        }));
    }

    fn proposal_answered(
        &mut self,
        slot: Slot,
        request_id: String,
        prompt: String,
        answer: Result<LlmReply, LlmError>,
        ctx: &mut Context<Self>,
    ) {
        if self.finished {
            return;
        }
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
        match answer {
            Err(LlmError::Exhausted) => {
                self.record(received("exhausted", None, None));
                self.exhausted = true;
                self.resolve(slot, Resolution::NotProposed, ctx);
            }
            Err(LlmError::BudgetReached(reason)) => {
                self.record(received("budget", None, Some(reason.clone())));
                self.budget_reached = Some(reason);
                self.resolve(slot, Resolution::NotProposed, ctx);
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
                self.resolve(
                    slot,
                    Resolution::Failed(format!("the proposal failed: {reason}")),
                    ctx,
                );
            }
            Ok(reply) => {
                let files = vec![
                    ("prompt.md".to_string(), prompt),
                    ("reply.md".to_string(), reply.text.clone()),
                ];
                match reply.code.clone() {
                    None => {
                        self.record(received("no_code", Some(&reply), None));
                        let collector = self.collector.clone();
                        collector.do_send(PrepareCandidate {
                            candidate: slot.id,
                            files,
                        });
                        let cut = if reply.truncated {
                            " (the reply was cut at max_tokens)"
                        } else {
                            ""
                        };
                        let reason = format!(
                            "the reply has no python code block defining kernel_function{cut}"
                        );
                        self.resolve(slot, Resolution::Failed(reason), ctx);
                    }
                    Some(code) => {
                        self.record(received("code", Some(&reply), None));
                        if let Some(original) = self.evaluated_sources.get(&code).copied() {
                            return self.resolve(slot, Resolution::Duplicate(original), ctx);
                        }
                        let mut files = files;
                        files.push(("kernel.py".to_string(), code.text().to_string()));
                        self.evaluate(slot, code, files, 0, ctx);
                    }
                }
            }
        }
    }

    fn finish_round(&mut self, ctx: &mut Context<Self>) {
        let round = std::mem::take(&mut self.round);
        let beam = self.beam.as_mut().expect("rounds run with a beam");
        beam.absorb(round.results);
        let best = beam.best().clone();
        let members: Vec<BeamMember> = beam
            .members()
            .iter()
            .map(|k| BeamMember {
                candidate: k.id,
                time_ms: k.time_ms,
            })
            .collect();
        let stale_rounds = beam.rounds_without_improvement();
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
            failures: round.failures,
            best_candidate: best.id,
            best_ms: best.time_ms,
        });
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
        self.finished = true;
        let best = self.beam.as_ref().map(|beam| beam.best().clone());
        self.supervisor.do_send(RunDone {
            outcome,
            reason,
            best,
            initial_ms: self.initial_ms,
        });
    }
}

fn resolution_of(id: CandidateId, source: &KernelSource, evaluated: Evaluated) -> Resolution {
    let verify = match evaluated.verify {
        Ok(outcome) => outcome,
        Err(error) => return Resolution::Failed(error.to_string()),
    };
    if let Verdict::Failed { reason } = verify.verdict {
        return Resolution::Failed(format!("verification failed: {reason}"));
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
        Some(Err(error)) => Resolution::Failed(format!("timing failed: {error}")),
        None => Resolution::Failed("the candidate was verified but never timed".into()),
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
