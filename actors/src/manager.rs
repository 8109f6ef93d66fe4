//! The Manager: carries the search out. What it reacts to is one closed set of inputs (`Input`):
//! the run's start, an LLM reply, an evaluation's end, a profile, PyTorch's reference times, a
//! stop, the finale's end. Each becomes a journal record that it journals and applies to the
//! `SearchState`, whose decisions (ask the LLM, evaluate on a device, profile, finish) it carries
//! out; their continuations only send inputs back. It never touches a device itself: GpuWorkers
//! do.

mod devices;
mod ending;
mod llm;
mod resume;
mod time_limit;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;
use std::time::SystemTime;

use actix::prelude::*;
use tokio::sync::watch;

use crate::collector::{BestChanged, Collector, Record, RecordsFailed, RemoveCaches};
use crate::gpu_worker::GpuWorker;
use crate::journal::Event;
use crate::llm_broker::LlmBroker;
use crate::model::{CandidateId, CompiledCode, DeviceId};
use crate::ports::{Clock, LlmError, LlmReply, PromptBuilder};
use crate::search_state::{Decision, Evaluation, SearchConfig, SearchState, Stop, Stopwatch};
use crate::supervision::{DeathNotice, RunDone, SupervisorLink};
use crate::time_limit::TimeLimit;

pub use resume::ResumeRun;

/// What the Manager is started with: the search's own settings, and what only carrying it out
/// needs.
#[derive(Clone, Debug)]
pub struct ManagerSettings {
    pub search: SearchConfig,
    /// The deadline of each verification or timing step (test_timeout_s).
    pub step_deadline: Duration,
    /// The user's files staged beside the best kernel for the final check (problem.py, test.py).
    pub final_files: Vec<(String, String)>,
    /// max_time, when the run has one.
    pub time_limit: Option<TimeLimit>,
    /// Whether an evaluation's "no space left on device" means the run directory's disk is
    /// full (its evaluators write there), and stops the run as a record that cannot be
    /// written does. False when they write only in a bounded scratch of their own (the
    /// sandbox, issue 19): there it is the candidate's own doing, and fails only it.
    pub evaluations_fill_the_disk: bool,
}

/// Begin the run with its `run_started` record (the Supervisor journaled it).
#[derive(Message)]
#[rtype(result = "()")]
pub struct StartRun {
    pub started: Event,
}

/// Stop starting new work, cancel the LLM requests in flight and end the run.
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopRun {
    pub why: Stop,
}

/// Everything the Manager reacts to besides `StartRun` and `StopRun`, sent by the continuations
/// of its own requests.
#[derive(Message)]
#[rtype(result = "()")]
enum Input {
    /// A record to journal and apply: a reply, an evaluation's end, a profile, a reference time.
    Record(Event),
    /// An LLM request was answered (`prompt`: the user message it was sent); its files are
    /// kept before its record is written.
    Replied {
        request_id: String,
        prompt: String,
        answer: Result<LlmReply, LlmError>,
    },
    /// A worker's mailbox closed during an evaluation: restart it, then try again.
    WorkerDied {
        evaluation: Evaluation,
        dead: Addr<GpuWorker>,
    },
    /// An evaluation found its device's node agent lost (with `devices`, its node's): the
    /// agent is started again within its budget, else the devices are retired.
    AgentLost {
        devices: Vec<DeviceId>,
        reason: String,
    },
    /// The finale is over: the best kernel after its re-check, and that kernel's profile record
    /// if it was profiled.
    FinaleDone(crate::finale::FinaleOutcome),
    /// An evaluation failed because the disk is full (why, for the Supervisor): the run stops
    /// as it does when a record cannot be written (`Returned`).
    DiskFull(String),
}

/// The actors the Manager hands work to: the device workers (a restarted one replaces its
/// predecessor here), the LLM broker and the Collector.
pub struct ManagerPeers {
    pub workers: BTreeMap<DeviceId, Addr<GpuWorker>>,
    pub broker: Addr<LlmBroker>,
    pub collector: Addr<Collector>,
}

pub struct Manager {
    settings: ManagerSettings,
    state: SearchState,
    supervisor: SupervisorLink,
    peers: ManagerPeers,
    prompts: Rc<dyn PromptBuilder>,
    /// The run's end, held until the finale is over and no reply is outstanding.
    done: Option<RunDone>,
    finale_running: bool,
    death_notice: DeathNotice,
    /// The run's clock: it times each request and each evaluation, for steady search's pace.
    clock: Arc<dyn Clock>,
    stopwatch: Stopwatch,
    /// Replies a resumed run found on disk, by request id, not yet used.
    recovered: HashMap<String, LlmReply>,
    /// When a run with max_time must be handed over, by the run's clock.
    hand_over_by: Option<SystemTime>,
    /// The search's compiled code of timed candidates, for the workers to skip a duplicate's
    /// timing (issue 23).
    timed_code: watch::Sender<Arc<BTreeMap<CompiledCode, CandidateId>>>,
}

impl Manager {
    pub fn new(
        settings: ManagerSettings,
        supervisor: SupervisorLink,
        peers: ManagerPeers,
        prompts: Rc<dyn PromptBuilder>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let state = SearchState::new(settings.search.clone());
        let death_notice = DeathNotice::new(supervisor.died.clone());
        Manager {
            settings,
            state,
            supervisor,
            peers,
            prompts,
            done: None,
            finale_running: false,
            death_notice,
            clock,
            stopwatch: Stopwatch::default(),
            recovered: HashMap::new(),
            hand_over_by: None,
            timed_code: watch::channel(Arc::default()).0,
        }
    }

    fn record(&self, event: Event) {
        self.peers.collector.do_send(Record(event));
    }

    /// Journals an input, applies it, and carries out what the search decides; an input a
    /// decision gives at once (a prompt that cannot be rendered) follows in turn. Once the run is
    /// handed over nothing more is journaled: work that ends while the run shuts down (an
    /// evaluation its worker abandoned) stays in flight in the journal, for a resume to redo.
    fn step(&mut self, input: Event, ctx: &mut Context<Self>) {
        if self.handed_over() {
            return;
        }
        let mut inputs = VecDeque::from([input]);
        while let Some(input) = inputs.pop_front() {
            let decisions = self.state.apply(&input);
            self.share_timed_code();
            self.record(input);
            inputs.extend(self.carry_out_all(decisions, ctx));
        }
        self.hand_over_when_quiet();
    }

    /// Carries out decisions in order; the inputs they give at once come back, to step next.
    fn carry_out_all(&mut self, decisions: Vec<Decision>, ctx: &mut Context<Self>) -> Vec<Event> {
        decisions
            .into_iter()
            .filter_map(|decision| self.carry_out(decision, ctx))
            .collect()
    }

    fn carry_out(&mut self, decision: Decision, ctx: &mut Context<Self>) -> Option<Event> {
        if let Some((request_id, prompt)) = decision.prompt(&*self.prompts) {
            return self.ask(request_id.to_string(), prompt, ctx);
        }
        match decision {
            Decision::Record(event) => self.record(event),
            Decision::Evaluate(evaluation) => return self.evaluate(evaluation, ctx),
            Decision::Profile {
                parent,
                device,
                round,
            } => return self.profile(parent, device, round, ctx),
            Decision::TimeReferences { device } => self.time_references(device, ctx),
            Decision::BestChanged(kernel) => self.peers.collector.do_send(BestChanged::of(&kernel)),
            Decision::RemoveCaches { candidate } => {
                self.peers.collector.do_send(RemoveCaches { candidate })
            }
            Decision::Finish {
                outcome,
                reason,
                best,
                initial,
            } => self.finish(outcome, reason, best, initial, ctx),
            // Asked for above, by their prompts.
            Decision::RequestAnalysis { .. }
            | Decision::RequestProposal { .. }
            | Decision::RequestRefinement { .. }
            | Decision::RequestSeed { .. }
            | Decision::RequestReflexion { .. } => {}
        }
        None
    }
}

impl Actor for Manager {
    type Context = Context<Self>;
}

impl Handler<StartRun> for Manager {
    type Result = ();

    fn handle(&mut self, message: StartRun, ctx: &mut Context<Self>) {
        self.arm_time_limit(ctx);
        // The Supervisor journaled run_started: it is applied, not written again.
        let decisions = self.state.apply(&message.started);
        for input in self.carry_out_all(decisions, ctx) {
            self.step(input, ctx);
        }
    }
}

impl Handler<Input> for Manager {
    type Result = ();

    fn handle(&mut self, input: Input, ctx: &mut Context<Self>) {
        match input {
            Input::AgentLost { devices, reason } => self.agent_lost(devices, reason, ctx),
            Input::Record(event) => {
                let event = self.stopwatch.evaluated(event, self.clock.now());
                self.step(event, ctx)
            }
            Input::Replied {
                request_id,
                prompt,
                answer,
            } => self.replied(request_id, prompt, answer, ctx),
            Input::WorkerDied { evaluation, dead } => self.worker_died(evaluation, dead, ctx),
            Input::DiskFull(message) => {
                self.supervisor
                    .records_failed
                    .do_send(RecordsFailed { message });
            }
            Input::FinaleDone(outcome) => {
                self.finale_running = false;
                if let Some(done) = self.done.as_mut() {
                    done.best = outcome.best;
                }
                match outcome.profile {
                    Some(profile) => self.step(profile, ctx),
                    None => self.hand_over_when_quiet(),
                }
            }
        }
    }
}
