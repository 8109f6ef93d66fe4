//! The search as a plain value: `SearchState::apply` takes one journal record and returns the
//! decisions it leads to (ask the LLM, evaluate a candidate on a device, profile a parent, journal
//! a derived record, finish). The Manager carries the decisions out and journals every input it
//! applies; a rebuild applies the journal's records to a fresh state. Both are this one fold, so
//! that the journal alone can rebuild the search.
//!
//! Inputs are the records the Manager journals as things happen: `run_started`, the
//! `*_received` replies, `evaluated`, `profile_recorded`/`profile_failed`, `reference_timed`,
//! `interrupted` and `run_finished`. Every other record (`candidate_planned`, the
//! `*_requested`, `candidate_finished`, `round_finished`, …) is one of the state's own decisions,
//! recorded for readers: applying it changes nothing, since the inputs before it decide it again.
//!
//! Nothing here does I/O or reads a clock; decisions are data, and the same inputs always give
//! the same state.

mod asking;
mod caches;
mod candidates;
mod devices;
mod lessons;
mod pace;
mod pacing;
mod preparation;
mod requests;
mod results;
mod resume;
mod seeds;
mod stopwatch;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use crate::analysis::AnalyzedBottleneck;
use crate::journal::{EvaluationOutcome, Event, ReplyOutcome, RunOutcome};
use crate::model::{
    CandidateId, CompiledCode, DeviceId, KernelSource, Provenance, RankedKernel, Reference,
    SAME_COMPILED_CODE,
};
use crate::ports::{
    AnalysisContext, AttemptOutcome, Lesson, ProfileSummary, PromptBuilder, ProposalContext,
    ReferenceTimes, RefinementContext, ReflexionContext, RenderedPrompt, SeedContext,
};
use crate::search::{Beam, Ensemble, Pacing, SearchSettings};

use candidates::{EvaluationResult, ProposalReply};
pub use devices::agent_restarted;
use pace::Pace;
use pacing::Pacer;
use requests::Requests;
pub use requests::{Exchange, PendingRequest, exchange_files};
pub use results::{
    Answer, Ending, Finale, FinaleKernels, Returned, disk_full, lost_devices, profiled, unserved,
};
pub use resume::{Resume, TWICE_IN_FLIGHT};
use seeds::Seeding;
pub use seeds::{Generation, SeedsKept};
pub use stopwatch::Stopwatch;

/// How many of the run's latest lessons an optimization prompt carries.
pub const RECENT_LESSONS: usize = 5;

/// The reflexions a run keeps in flight at most (`SearchConfig::reflexions_in_flight`): two per
/// device, at least eight. Lessons are worth less than proposals; past this they are dropped,
/// not queued.
pub fn reflexions_in_flight_for(devices: usize) -> usize {
    (2 * devices).max(8)
}

/// What the search needs to know of the run's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchConfig {
    pub search: SearchSettings,
    pub pacing: Pacing,
    pub devices: Vec<DeviceId>,
    /// Profile each kernel once, when it first becomes a parent.
    pub profile_parents: bool,
    /// Time PyTorch eager and torch.compile once per run (a platform that measures nothing,
    /// noop, has no reference to give).
    pub time_references: bool,
    /// How many more attempts a candidate that failed verification gets.
    pub max_refinements: u32,
    /// End the run when the best kernel's profile puts it at its roofline (stop_at_roofline;
    /// off by default, and off on ROCm, where the review kept it off).
    pub stop_at_roofline: bool,
    /// The provider's request rate, which bounds the proposals steady search keeps asked for.
    pub requests_per_minute: Option<u32>,
    /// The most reflexions in flight at once; one more is dropped (and journaled), not queued.
    pub reflexions_in_flight: usize,
    /// Seed kernels written from problem.py before the search (round 0); `None`: the search
    /// starts from input.py.
    pub generation: Option<Generation>,
    /// The models sharing the proposals, when the run has several (`models`).
    pub ensemble: Ensemble,
    /// Rounds mode: a kernel certain to be a parent of the next round is profiled and analysed
    /// before its round ends (`overlap_rounds`; see `pacing.rs` for why no result changes).
    pub overlap_rounds: bool,
}

impl SearchConfig {
    /// The search's first candidate: 1, or the first after the seeds.
    pub fn first_search_id(&self) -> u64 {
        1 + self.generation.map_or(0, |g| u64::from(g.num_seeds))
    }

    /// The model a candidate's proposal, refinements and reflexion are asked of, in a run of
    /// several models: by the position of its prompt, the seeds counted apart from the search's
    /// candidates, whose C samples of one prompt share it. `None` in a run of one model.
    pub fn model_of(&self, id: CandidateId) -> Option<&str> {
        let first = self.first_search_id();
        let position = if id.0 < first {
            id.0.checked_sub(1)?
        } else {
            (id.0 - first) / u64::from(self.search.fan_out.samples_per_prompt.max(1))
        };
        self.ensemble.model_at(position)
    }
}

/// Why a run is stopped from outside the search.
#[derive(Clone, Debug, PartialEq)]
pub enum Stop {
    /// SIGINT or SIGTERM: the run ends as interrupted.
    Signal(String),
    /// The run cannot go on (its records cannot be written): it ends as failed, with this reason.
    Failed(String),
}

impl Stop {
    /// The record the stop is journaled and applied as, and the reason the run ends with, which
    /// its requests in flight are cancelled for.
    pub fn record(self) -> (Event, String) {
        match self {
            Stop::Signal(signal) => {
                let reason = interrupted_by(&signal);
                (Event::Interrupted { signal }, reason)
            }
            Stop::Failed(reason) => (
                Event::Stopped {
                    reason: reason.clone(),
                },
                reason,
            ),
        }
    }
}

fn interrupted_by(signal: &str) -> String {
    format!("interrupted by {signal}")
}

/// An attempt of a candidate to verify and time on its device.
#[derive(Clone, Debug, PartialEq)]
pub struct Evaluation {
    pub candidate: CandidateId,
    pub parent: Option<CandidateId>,
    pub round: u32,
    pub device: DeviceId,
    pub attempt: u32,
    pub source: KernelSource,
}

/// What the Manager is to do. Requests carry the context their prompt is rendered from, as the
/// state was when it decided.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// Journal a record the state derived (it changes nothing when applied).
    Record(Event),
    Evaluate(Evaluation),
    Profile {
        parent: RankedKernel,
        device: DeviceId,
        round: u32,
    },
    RequestAnalysis {
        request_id: String,
        context: AnalysisContext,
    },
    RequestProposal {
        request_id: String,
        context: ProposalContext,
    },
    RequestRefinement {
        request_id: String,
        context: RefinementContext,
    },
    /// A seed kernel's code, or a refinement of it, from problem.py and its failed attempts.
    RequestSeed {
        request_id: String,
        context: SeedContext,
    },
    RequestReflexion {
        request_id: String,
        context: ReflexionContext,
    },
    TimeReferences {
        device: DeviceId,
    },
    /// best_kernel.py is to hold this kernel.
    BestChanged(RankedKernel),
    /// The candidate can no longer become a parent: the caches in its folder are to go.
    RemoveCaches {
        candidate: CandidateId,
    },
    /// The search is over: the finale (a completed run with a best kernel) and the run's end.
    Finish {
        outcome: RunOutcome,
        reason: String,
        best: Option<RankedKernel>,
        initial: Option<RankedKernel>,
    },
}

impl Decision {
    /// A request's id and its prompt, rendered from its context by the run's templates (the
    /// template of its kind); `None` for a decision that asks the LLM nothing.
    pub fn prompt(
        &self,
        prompts: &dyn PromptBuilder,
    ) -> Option<(&str, Result<RenderedPrompt, String>)> {
        let (request_id, prompt) = match self {
            Decision::RequestAnalysis {
                request_id,
                context,
            } => (request_id, prompts.analysis(context)),
            Decision::RequestProposal {
                request_id,
                context,
            } => (request_id, prompts.optimization(context)),
            Decision::RequestRefinement {
                request_id,
                context,
            } => (request_id, prompts.refinement(context)),
            Decision::RequestSeed {
                request_id,
                context,
            } => (request_id, prompts.seed(context)),
            Decision::RequestReflexion {
                request_id,
                context,
            } => (request_id, prompts.reflexion(context)),
            _ => return None,
        };
        Some((request_id, prompt))
    }
}

/// Where a candidate stands.
#[derive(Clone, Debug, PartialEq)]
enum Phase {
    /// Planned; its parent's profile or analysis is not there yet.
    Waiting,
    /// Its code (attempt 0) or a refinement of it is asked for.
    Asking,
    /// Its latest code is on a device.
    Evaluating,
    Resolved,
}

#[derive(Clone, Debug, PartialEq)]
struct Candidate {
    parent: Option<CandidateId>,
    round: u32,
    proposal_index: u32,
    device: DeviceId,
    /// 0 for the proposal's code, N for refinement N.
    attempt: u32,
    phase: Phase,
    /// The code of each attempt, in order.
    sources: Vec<KernelSource>,
    /// The last verification failure, which a refinement is asked to fix, and whether its
    /// verdict was simulated.
    failure: Option<String>,
    failure_simulated: bool,
    /// Whether its device's worker already died once on it.
    worker_died: bool,
    launched_kernels: Vec<String>,
    /// How its last evaluated attempt ended, for its reflexion's lesson.
    outcome: Option<AttemptOutcome>,
    /// How many proposals its parent got when it was asked for: its prompt says so.
    proposals: u32,
    /// A seed kernel of generation (no parent, round 0).
    seed: bool,
    /// Why each attempt before the current one failed, in order (a seed's prompt carries them).
    failures: Vec<String>,
}

impl Candidate {
    /// A candidate numbered and placed, with no code yet.
    fn new(
        parent: Option<CandidateId>,
        round: u32,
        proposal_index: u32,
        device: DeviceId,
        phase: Phase,
    ) -> Candidate {
        Candidate {
            parent,
            round,
            proposal_index,
            device,
            attempt: 0,
            phase,
            sources: Vec::new(),
            failure: None,
            failure_simulated: false,
            worker_died: false,
            launched_kernels: Vec::new(),
            outcome: None,
            proposals: 0,
            seed: false,
            failures: Vec::new(),
        }
    }

    fn source(&self) -> Option<&KernelSource> {
        self.sources.last()
    }

    /// The decision to evaluate its current attempt's `source`.
    fn evaluation(&self, id: CandidateId, source: KernelSource) -> Decision {
        Decision::Evaluate(Evaluation {
            candidate: id,
            parent: self.parent,
            round: self.round,
            device: self.device,
            attempt: self.attempt,
            source,
        })
    }
}

/// A parent's preparation: its profile and its analysis are asked for once per kernel, and the
/// candidates planned from it wait for both.
#[derive(Clone, Debug, Default, PartialEq)]
struct Parent {
    /// `Some(None)`: profiled without a result (failed or profiling off).
    profile: Option<Option<ProfileSummary>>,
    profiling: bool,
    analysis: Option<Vec<AnalyzedBottleneck>>,
    analysing: bool,
    /// The distinct bottlenecks its analysis asks for.
    requested: u32,
    waiting: Vec<CandidateId>,
    /// The round it first became a parent in: its profile and analysis are that round's.
    round: u32,
}

/// A candidate that reached its end, for the pacer to count (and, for the initial kernel, to
/// start the search from).
#[derive(Clone, Debug, PartialEq)]
struct Settled {
    id: CandidateId,
    round: u32,
    resolution: Resolution,
}

/// How a candidate ended.
#[derive(Clone, Debug, PartialEq)]
enum Resolution {
    Verified(RankedKernel, Provenance),
    /// Evaluated and failed; `judged`: the verifier judged its output (only then refined).
    Rejected {
        source: KernelSource,
        reason: String,
        judged: bool,
        /// The verdict came from a simulated check (the noop platform).
        simulated: bool,
    },
    /// Never evaluated: the proposal failed, had no code or its prompt could not be rendered.
    Failed(String),
    Duplicate(Earlier),
    /// The provider had nothing to propose (exhausted, or the budget stopped the request).
    NotProposed,
}

/// The earlier candidate a duplicate repeats, and how it was found to.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Earlier {
    of: CandidateId,
    by: Sameness,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Sameness {
    /// Its code's token stream (comments and spacing aside): it was not evaluated.
    Tokens,
    /// Its verified call's compiled kernels and launches (issue 23): it was not timed.
    CompiledCode,
}

impl Earlier {
    /// Why the duplicate ended, as its `candidate_finished` says.
    fn reason(self) -> String {
        match self.by {
            Sameness::Tokens => format!("identical to candidate {}", self.of),
            Sameness::CompiledCode => format!("{SAME_COMPILED_CODE} {}", self.of),
        }
    }
}

/// Everything but the pacing: the pacer (rounds or steady) drives this.
#[derive(Clone, Debug, PartialEq)]
struct Core {
    config: SearchConfig,
    candidates: BTreeMap<CandidateId, Candidate>,
    parents: BTreeMap<CandidateId, Parent>,
    beam: Option<Beam>,
    initial: Option<RankedKernel>,
    profiling: bool,
    lessons: VecDeque<Lesson>,
    /// Why the latest failed attempt made from each parent failed; cleared by a verified one.
    previous_errors: BTreeMap<CandidateId, String>,
    reference: ReferenceTimes,
    /// Which references have their record: a resume times the others again.
    references_recorded: BTreeSet<Reference>,
    /// PyTorch's references are to be timed on this device once the first request after the
    /// first beam is out: there they would hold back that beam's first profile, which the first
    /// request waits for (issue 23).
    references_due: Option<DeviceId>,
    /// Each kernel evaluated (its token stream's key: comments and spacing aside), and the
    /// candidate that brought it first.
    evaluated_sources: HashMap<crate::tokens::SameCodeKey, CandidateId>,
    /// The compiled code of each candidate verified and timed, and the first to have it: a
    /// worker holds a copy while it evaluates, to skip the timing of a duplicate.
    timed_code: Arc<BTreeMap<CompiledCode, CandidateId>>,
    /// Every verified kernel's time, for reflexions on a parent that has left the beam since.
    verified_ms: BTreeMap<CandidateId, f64>,
    /// Evaluations queued or running on each device.
    device_load: BTreeMap<DeviceId, usize>,
    /// Devices lost for good (their node failed): nothing is placed on them again.
    retired: BTreeSet<DeviceId>,
    /// Devices whose node's agent is being started again: nothing new is placed on them until
    /// it serves again (or they are retired).
    restarting: BTreeSet<DeviceId>,
    /// Candidates planned whose first proposal is not answered yet.
    asking: BTreeSet<CandidateId>,
    /// Rounds mode: the round's new parents, fastest first, that have not proposed yet; each
    /// proposes only after those before it (`Rounds::start_round`).
    new_parents: VecDeque<CandidateId>,
    /// Candidates that reached their end since the pacer last looked.
    settled: VecDeque<Settled>,
    requests: Requests,
    /// The latest LLM latencies and evaluation times, for steady search's pace.
    pace: Pace,
    exhausted: bool,
    budget_reached: Option<String>,
    /// Why the search takes no more proposals though it could (a limit such as max_time): what
    /// is in flight ends, then the run does.
    stopping: Option<String>,
    /// Answers to requests for code, and the latest transport or server error of any request: a
    /// first round in which no request for code was answered ends the run.
    proposals_answered: u64,
    llm_last_error: Option<String>,
    best: Option<(CandidateId, f64)>,
    finished: Option<(RunOutcome, String)>,
    /// Candidates evaluated whose folders still hold their caches, and those whose caches were
    /// released (they can no longer become parents).
    caches_held: BTreeSet<CandidateId>,
    caches_released: BTreeSet<CandidateId>,
    /// Released candidates whose code is kept while they are the best or their reflexion is
    /// pending (caches.rs).
    code_kept_for_now: BTreeSet<CandidateId>,
    /// The latest round whose end updated the beam (0 before the first).
    beam_round: u32,
    /// Generation's seeds while they decide the first beam.
    seeding: Seeding,
    /// Whether any evaluation has ended other than for an evaluator that could not start:
    /// before one has, such an evaluator refuses the run, as nothing was evaluated.
    anything_evaluated: bool,
}

/// The search's state: the fold of the journal's records.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchState {
    core: Core,
    pacer: Pacer,
}

/// Decisions in the order they are made.
type Out = Vec<Decision>;

impl SearchState {
    pub fn new(config: SearchConfig) -> Self {
        let device_load = config.devices.iter().map(|device| (*device, 0)).collect();
        let pacer = Pacer::new(&config);
        SearchState {
            core: Core {
                profiling: config.profile_parents,
                config,
                candidates: BTreeMap::new(),
                parents: BTreeMap::new(),
                beam: None,
                initial: None,
                lessons: VecDeque::new(),
                previous_errors: BTreeMap::new(),
                reference: ReferenceTimes::default(),
                references_recorded: BTreeSet::new(),
                references_due: None,
                evaluated_sources: HashMap::new(),
                timed_code: Arc::default(),
                verified_ms: BTreeMap::new(),
                device_load,
                retired: BTreeSet::new(),
                restarting: BTreeSet::new(),
                asking: BTreeSet::new(),
                new_parents: VecDeque::new(),
                settled: VecDeque::new(),
                requests: Requests::default(),
                pace: Pace::default(),
                exhausted: false,
                budget_reached: None,
                stopping: None,
                proposals_answered: 0,
                llm_last_error: None,
                best: None,
                finished: None,
                caches_held: BTreeSet::new(),
                caches_released: BTreeSet::new(),
                code_kept_for_now: BTreeSet::new(),
                beam_round: 0,
                seeding: Seeding::default(),
                anything_evaluated: false,
            },
            pacer,
        }
    }

    /// Folds a journal: each record applied in order, the decisions dropped (they were carried
    /// out, or are to be taken again by whoever resumes).
    pub fn rebuild<'a>(config: SearchConfig, events: impl IntoIterator<Item = &'a Event>) -> Self {
        Self::fold(config, events).0
    }

    /// Folds a journal, and answers too the records the last input led to that the journal
    /// does not have: the process journals an input, then the records it leads to, and may
    /// have died in between. A resume journals them before it goes on.
    pub fn fold<'a>(
        config: SearchConfig,
        events: impl IntoIterator<Item = &'a Event>,
    ) -> (Self, Vec<Event>) {
        let mut state = SearchState::new(config);
        let mut expected: VecDeque<Event> = VecDeque::new();
        for event in events {
            if expected.front() == Some(event) {
                expected.pop_front();
                continue;
            }
            expected = state
                .apply(event)
                .into_iter()
                .filter_map(|decision| match decision {
                    Decision::Record(record) => Some(record),
                    _ => None,
                })
                .collect();
        }
        (state, expected.into())
    }

    /// Applies one record; what the search decides to do next comes back.
    pub fn apply(&mut self, event: &Event) -> Vec<Decision> {
        let mut out = Out::new();
        let core = &mut self.core;
        let pacer = &mut self.pacer;
        match event {
            Event::RunStarted { initial_source, .. } => core.start(initial_source, &mut out),
            Event::ProposalReceived {
                candidate,
                request_id,
                attempt,
                device,
                outcome,
                truncated,
                error,
                code,
                latency_s,
                ..
            } => {
                core.requests.answered(request_id);
                if *attempt == 0 && matches!(outcome, ReplyOutcome::Code | ReplyOutcome::NoCode) {
                    core.pace.latency(*latency_s);
                }
                let reply = ProposalReply {
                    attempt: *attempt,
                    device: *device,
                    outcome: *outcome,
                    truncated: *truncated,
                    error: error.clone().unwrap_or_default(),
                    code: code.clone(),
                };
                core.proposal_received(*candidate, reply, &mut out);
            }
            Event::AnalysisReceived {
                candidate,
                request_id,
                bottlenecks,
                outcome,
                error,
                ..
            } => {
                core.requests.answered(request_id);
                core.note_reply(*outcome, error.as_deref(), &mut out);
                core.analysed(*candidate, bottlenecks.clone(), &mut out);
            }
            Event::ReflexionReceived {
                candidate,
                request_id,
                lesson,
                outcome,
                error,
                ..
            } => {
                core.requests.answered(request_id);
                core.note_reply(*outcome, error.as_deref(), &mut out);
                core.reflected(*candidate, lesson.as_deref());
            }
            Event::Evaluated {
                candidate,
                attempt,
                outcome,
                time_ms,
                provenance,
                reason,
                launched_kernels,
                seconds,
                compiled,
                ..
            } => {
                if !matches!(
                    outcome,
                    EvaluationOutcome::WorkerDied | EvaluationOutcome::DeviceLost
                ) {
                    core.pace.evaluation(*seconds);
                }
                let result = EvaluationResult {
                    attempt: *attempt,
                    outcome: *outcome,
                    time_ms: *time_ms,
                    provenance: *provenance,
                    reason: reason.clone().unwrap_or_default(),
                    launched_kernels: launched_kernels.clone(),
                    compiled: compiled.clone(),
                };
                core.evaluated(*candidate, result, &mut out);
            }
            Event::ProfileRecorded {
                candidate,
                bottleneck,
                duration_ms,
                analysis,
                at_roofline,
                details,
                ..
            } => {
                let summary = ProfileSummary {
                    bottleneck: bottleneck.clone(),
                    analysis: analysis.clone(),
                    duration_ms: *duration_ms,
                    at_roofline: *at_roofline,
                    details: details.clone(),
                };
                core.profiled(*candidate, Some(summary), &mut out);
            }
            Event::ProfileFailed {
                candidate,
                error,
                unavailable,
                ..
            } => {
                if *unavailable && core.profiling {
                    core.profiling = false;
                    out.push(Decision::Record(Event::ProfilingStopped {
                        reason: error.clone(),
                    }));
                }
                core.profiled(*candidate, None, &mut out);
            }
            Event::DevicesLost { devices, reason } => core.retire(devices, reason, &mut out),
            Event::AgentRestarting { devices, .. } => core.restarting.extend(devices),
            Event::AgentRestarted { devices, .. } => {
                core.restarting.retain(|device| !devices.contains(device))
            }
            // The resuming process starts every node's agent anew.
            Event::RunResumed { .. } => core.restarting.clear(),
            Event::ReferenceTimed { which, time_ms, .. } => {
                core.references_recorded.insert(*which);
                match which {
                    Reference::Eager => core.reference.eager_ms = *time_ms,
                    Reference::Compile => core.reference.compile_ms = *time_ms,
                }
            }
            Event::Interrupted { signal } => {
                core.finish(RunOutcome::Interrupted, interrupted_by(signal), &mut out)
            }
            Event::Stopped { reason } => core.finish(RunOutcome::Failed, reason.clone(), &mut out),
            Event::LimitReached {
                reason,
                evaluations_cancelled,
                ..
            } => {
                core.stopping.get_or_insert_with(|| reason.clone());
                if *evaluations_cancelled {
                    core.finish(RunOutcome::Completed, reason.clone(), &mut out);
                }
            }
            Event::RunFinished {
                outcome, reason, ..
            } => {
                core.finished
                    .get_or_insert_with(|| (*outcome, reason.clone()));
            }
            _ => return out,
        }
        // What settled may plan more, and planning may settle more (a provider that ran dry):
        // the pacer looks until nothing is left to look at.
        loop {
            while let Some(settled) = core.settled.pop_front() {
                pacer.resolved(core, settled, &mut out);
            }
            pacer.advance(core, &mut out);
            if core.settled.is_empty() {
                break;
            }
        }
        core.release_caches(&mut out);
        out
    }

    /// Whether the search is over (the Manager may still be waiting for replies and the finale).
    pub fn finished(&self) -> Option<&(RunOutcome, String)> {
        self.core.finished.as_ref()
    }

    /// The LLM requests sent and not answered, oldest first.
    pub fn pending_requests(&self) -> Vec<&PendingRequest> {
        self.core.requests.pending()
    }

    pub fn is_pending(&self, request_id: &str) -> bool {
        self.core.requests.is_pending(request_id)
    }

    /// The `*_received` records that cancel every pending request, saying why.
    pub fn cancellations(&self, why: &str) -> Vec<Event> {
        self.core.requests.cancellations(why)
    }

    /// The `*_received` records that cancel every pending request when the run ends for
    /// `reason`.
    pub fn cancelled_by_the_end(&self, reason: &str) -> Vec<Event> {
        self.cancellations(&format!("the run ended before the reply came ({reason})"))
    }

    /// The model a candidate's requests go to, in a run of several models.
    pub fn model_of(&self, candidate: CandidateId) -> Option<&str> {
        self.core.config.model_of(candidate)
    }

    /// The model parents' analyses go to, in a run of several models.
    pub fn analysis_model(&self) -> Option<&str> {
        self.core.config.ensemble.lead()
    }

    /// The device a candidate's code is evaluated on once its proposal is answered: the
    /// planned one in rounds, the first free one in steady search.
    pub fn device_for_answer(&self, candidate: CandidateId) -> DeviceId {
        let planned = self
            .core
            .candidates
            .get(&candidate)
            .map_or(DeviceId(0), |c| c.device);
        self.pacer.device_for_answer(&self.core, candidate, planned)
    }

    /// Whether a device was lost for good (its node failed).
    pub fn is_retired(&self, device: DeviceId) -> bool {
        self.core.is_retired(device)
    }

    /// Whether new work may go to a device: neither retired nor waiting for its node's agent
    /// to start again.
    pub fn is_in_service(&self, device: DeviceId) -> bool {
        self.core.is_in_service(device)
    }

    /// The parent and round of a candidate, for the records the Manager writes about it.
    pub fn placement(
        &self,
        candidate: CandidateId,
    ) -> Option<(Option<CandidateId>, u32, DeviceId)> {
        let c = self.core.candidates.get(&candidate)?;
        Some((c.parent, c.round, c.device))
    }

    pub fn best(&self) -> Option<RankedKernel> {
        self.core.beam.as_ref().map(|beam| beam.best().clone())
    }

    pub fn beam(&self) -> Vec<RankedKernel> {
        self.core
            .beam
            .as_ref()
            .map(|beam| beam.members().to_vec())
            .unwrap_or_default()
    }

    /// The compiled code of the candidates timed so far, and the first to have each.
    pub fn timed_code(&self) -> Arc<BTreeMap<CompiledCode, CandidateId>> {
        self.core.timed_code.clone()
    }

    /// Whether a parent has a profile (the finale profiles a best kernel that has none).
    pub fn has_profile(&self, candidate: CandidateId) -> bool {
        self.core
            .parents
            .get(&candidate)
            .is_some_and(|parent| matches!(parent.profile, Some(Some(_))))
    }

    pub fn profiling(&self) -> bool {
        self.core.profiling
    }

    /// What every state the fold reaches must hold, at every prefix of a journal: each device's
    /// load counts its candidates on it, the candidates still asking are those planned and not
    /// answered, every pending request is about a known candidate, the beam is verified and
    /// sorted, and best_kernel.py's kernel is the fastest verified one.
    pub fn check_invariants(&self) -> Result<(), String> {
        let core = &self.core;
        let mut load: BTreeMap<DeviceId, usize> =
            core.config.devices.iter().map(|d| (*d, 0)).collect();
        for candidate in core.candidates.values() {
            if candidate.phase == Phase::Evaluating {
                *load.entry(candidate.device).or_insert(0) += 1;
            }
        }
        if load != core.device_load {
            return Err(format!(
                "device load {:?}, candidates on devices {load:?}",
                core.device_load
            ));
        }
        let asking: BTreeSet<CandidateId> = core
            .candidates
            .iter()
            .filter(|(_, c)| {
                c.parent.is_some()
                    && c.attempt == 0
                    && matches!(c.phase, Phase::Waiting | Phase::Asking)
            })
            .map(|(id, _)| *id)
            .collect();
        if asking != core.asking {
            return Err(format!(
                "asking {:?}, candidates not answered {asking:?}",
                core.asking
            ));
        }
        for request in core.requests.pending() {
            let about = match &request.cancelled {
                Event::ProposalReceived { candidate, .. }
                | Event::AnalysisReceived { candidate, .. }
                | Event::ReflexionReceived { candidate, .. } => *candidate,
                _ => {
                    return Err(format!(
                        "request {} has no reply record",
                        request.request_id
                    ));
                }
            };
            if !core.candidates.contains_key(&about) {
                return Err(format!(
                    "request {} is about unknown candidate {about}",
                    request.request_id
                ));
            }
        }
        if let Some(beam) = &core.beam {
            let members = beam.members();
            if members
                .windows(2)
                .any(|pair| pair[0].time_ms > pair[1].time_ms)
            {
                return Err("the beam is not sorted fastest first".into());
            }
            if let Some(stray) = members
                .iter()
                .find(|m| !core.verified_ms.contains_key(&m.id))
            {
                return Err(format!("beam member {} was never verified", stray.id));
            }
            if let Some(released) = members
                .iter()
                .find(|m| core.caches_released.contains(&m.id))
            {
                return Err(format!(
                    "beam member {} had its caches released",
                    released.id
                ));
            }
        }
        let fastest = core
            .verified_ms
            .iter()
            .min_by(|a, b| a.1.total_cmp(b.1).then(a.0.cmp(b.0)))
            .map(|(id, ms)| (*id, *ms));
        if fastest.map(|(_, ms)| ms) != core.best.map(|(_, ms)| ms) {
            return Err(format!(
                "best {:?}, fastest verified {fastest:?}",
                core.best
            ));
        }
        Ok(())
    }
}
