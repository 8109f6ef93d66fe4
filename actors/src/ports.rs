//! The ports: the only ways the actors reach GPUs, profilers, the network, the disk and signals.
//! `src/` implements them (adapters); tests implement them with fakes. Every future here is
//! local: an actix System runs on one thread, so nothing needs to be `Send`.

use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::rc::Rc;
use std::time::{Duration, SystemTime};

use crate::analysis::AnalyzedBottleneck;
use crate::journal::JournalRecord;
use crate::model::{CandidateId, DeviceId, KernelSource, Reference, TimeOutcome, VerifyOutcome};
use crate::profile::KernelProfile;
use crate::speed_of_light::Floor;
// The journal records both, and the journal is below the ports: they live in `model`.
pub use crate::model::{RequestKind, TokenUsage};

pub type LocalFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// What a `DeviceEvaluator`'s step answers: its outcome or why there is none.
pub type EvalFuture<'a, T> = LocalFuture<'a, Result<T, EvalError>>;
/// What `DeviceEvaluator::time_reference` answers: `None` where the platform measures nothing.
pub type ReferenceTiming<'a> = EvalFuture<'a, Option<TimeOutcome>>;
/// What `DeviceEvaluator::run_user_test` answers: `None` where the platform runs nothing.
pub type UserTestRun<'a> = EvalFuture<'a, Option<UserTestOutcome>>;

/// A candidate handed to a device: its source is already in `folder/kernel.py`, written by the
/// Collector, and every file the evaluation produces goes under `folder`.
#[derive(Clone, Debug)]
pub struct EvalJob {
    pub candidate: CandidateId,
    pub source: KernelSource,
    pub folder: PathBuf,
    pub deadline: Duration,
}

/// What a device's evaluation of a candidate gave: its verification, and its timing when it
/// passed.
#[derive(Clone, Debug)]
pub struct Evaluated {
    pub verify: Result<VerifyOutcome, EvalError>,
    pub time: Option<Result<TimeOutcome, EvalError>>,
    /// It verified with the compiled code of this earlier candidate, and was not timed.
    pub same_code_as: Option<CandidateId>,
}

/// Why an evaluation step did not produce a verdict or a time. Every variant costs only the
/// candidate at hand: the adapter restarts whatever it needs before the next call.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum EvalError {
    #[error("evaluator crashed: {reason}")]
    Crashed { reason: String },
    #[error("evaluation exceeded its deadline of {0:?} and was killed")]
    TimedOut(Duration),
    #[error("evaluator could not start: {0}")]
    Start(String),
    #[error("evaluator rejected the request: {0}")]
    Rejected(String),
    /// The evaluator timed the candidate, but kactors cannot believe the time: it is below the
    /// device's speed of light, or fast only on content the kernel had seen (issue 18).
    #[error("its time cannot be real: {0}")]
    ImpossibleTiming(String),
    /// The device is gone for the rest of the run: the node that holds it failed (its node
    /// agent's step ended, or the agent stopped answering and was cancelled). Nothing sent to
    /// this device, or to the `devices` lost with it (its node's, itself included), can
    /// succeed any more; the candidate at hand deserves a retry elsewhere.
    #[error("device lost: {reason}")]
    DeviceLost {
        reason: String,
        devices: Vec<DeviceId>,
    },
}

/// One device's evaluator. The GpuWorker owns it and calls it one step at a time.
pub trait DeviceEvaluator {
    fn verify<'a>(&'a mut self, job: &'a EvalJob) -> EvalFuture<'a, VerifyOutcome>;
    fn time<'a>(&'a mut self, job: &'a EvalJob) -> EvalFuture<'a, TimeOutcome>;
    /// Times PyTorch's own implementation by the candidates' method. `None` where the platform
    /// measures nothing (noop): a reference time is never made up.
    fn time_reference(&mut self, which: Reference, deadline: Duration) -> ReferenceTiming<'_>;
    /// Runs the user's own test.py in `folder` (the best kernel staged there as kernel.py, beside
    /// problem.py and test.py). `None` where the platform runs nothing (noop).
    fn run_user_test<'a>(&'a mut self, folder: &'a Path, deadline: Duration) -> UserTestRun<'a>;
    /// What a newly started evaluator reported about itself (the device it sees under its pin,
    /// its versions) and the floor its timings are held to, once per start; None when nothing
    /// started since the last call.
    fn take_started(&mut self) -> Option<EvaluatorStart>;
    /// Ends the device's child processes; called once, before the worker acknowledges shutdown.
    fn shutdown(&mut self) -> LocalFuture<'_, ()>;
}

/// An evaluator's start: its `ready` message as it sent it, and the floor under which no
/// timing of it can be real (issue 18), or why there is none.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EvaluatorStart {
    pub ready: serde_json::Value,
    pub floor: Option<Floor>,
}

/// How the user's own test.py judged the staged best kernel.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct UserTestOutcome {
    pub passed: bool,
    pub exit_code: Option<i32>,
    pub log: PathBuf,
}

/// Makes a fresh evaluator for a device: at start and after a worker restart.
pub trait EvaluatorFactory {
    fn start(&self, device: DeviceId) -> Box<dyn DeviceEvaluator>;
    /// A fresh evaluator that verifies on draws no evaluator of `start` drew (new seeds): the
    /// finale's re-check of the final beam (issue 18). A platform whose verdicts depend on no
    /// draw (noop, the tests' fakes) keeps this default.
    fn start_recheck(&self, device: DeviceId) -> Box<dyn DeviceEvaluator> {
        self.start(device)
    }

    /// `devices` (one node's, as `EvalError::DeviceLost` named them) were found lost, for
    /// `reason`: what becomes of them. Where no node agent serves them (one machine), or the
    /// platform starts none again, they are retired.
    fn agent_lost(&self, devices: &[DeviceId], reason: &str) -> AgentLoss {
        let _ = devices;
        AgentLoss::Retired {
            reason: reason.to_string(),
        }
    }
}

/// What becomes of a node whose agent was found lost (issue 14).
pub enum AgentLoss {
    /// Its agent serves again: an earlier loss already had it started again (or is having it).
    Serving,
    /// Its agent is being started again, the `restarts`th time in this process: `restarted`
    /// answers the new agent's Slurm step, or why it could not start.
    Restarting {
        node: String,
        restarts: u32,
        restarted: LocalFuture<'static, Result<String, String>>,
    },
    /// It is not started again (its restart budget is spent): the devices are retired.
    Retired { reason: String },
}

/// A kernel to profile on a device, while its GpuWorker holds the device.
#[derive(Clone, Debug)]
pub struct ProfileJob {
    pub candidate: CandidateId,
    pub source: KernelSource,
    /// The candidate's folder: `kernel.py` is there, and the profile's files go under it.
    pub folder: PathBuf,
    pub device: DeviceId,
    /// The Triton kernels its verification saw launch: the profiler's kernel filter.
    pub kernel_names: Vec<String>,
}

/// What a profile taught: a bottleneck verdict for the prompts and the figures for the journal.
#[derive(Clone, Debug, PartialEq)]
pub struct ProfileSummary {
    pub bottleneck: String,
    /// Sentences for the optimization prompt: the roofline verdict and its evidence.
    pub analysis: String,
    pub duration_ms: Option<f64>,
    /// The roofline verdict says the kernel is at its roofline (efficiency at or above the
    /// platform's threshold): proposals from it can hardly win.
    pub at_roofline: bool,
    /// The profile itself. Absent only in a summary rebuilt from a journal whose record holds
    /// details of a shape this build does not read.
    pub details: Option<KernelProfile>,
}

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ProfileError {
    /// This kernel's profile failed; the next one may work.
    #[error("profile failed: {0}")]
    Failed(String),
    /// No profile can work in this run (no counter permission, profiler missing): stop profiling.
    #[error("profiling is unavailable for this run: {0}")]
    Unavailable(String),
}

pub trait KernelProfiler {
    fn profile(
        self: Rc<Self>,
        job: ProfileJob,
    ) -> LocalFuture<'static, Result<ProfileSummary, ProfileError>>;
}

#[derive(Clone, Debug)]
pub struct LlmRequest {
    pub request_id: String,
    pub kind: RequestKind,
    pub candidate: CandidateId,
    /// Accounting is kept per round as well as per request and per run.
    pub round: u32,
    pub system: String,
    pub prompt: String,
    /// The model to ask, in a run of several models (`models`); `None`: the run's one model.
    pub model: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct LlmReply {
    pub text: String,
    /// The Python code block that defines `kernel_function`, when the reply has one.
    pub code: Option<KernelSource>,
    pub truncated: bool,
    pub usage: Option<TokenUsage>,
    pub cost_usd: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum LlmError {
    /// The provider has nothing more to say (the replay provider after its last file).
    #[error("llm provider is exhausted")]
    Exhausted,
    /// The provider refused the credentials: the run cannot go on.
    #[error("llm provider refused the credentials: {0}")]
    Auth(String),
    /// The next request could take the run past its budget: no request is sent.
    #[error("llm budget reached: {0}")]
    BudgetReached(String),
    #[error("llm request failed: {0}")]
    Failed(String),
}

pub trait LlmProvider {
    fn complete(
        self: Rc<Self>,
        request: LlmRequest,
    ) -> LocalFuture<'static, Result<LlmReply, LlmError>>;
    /// The reply a kept reply's text stands for, its code found as in a fresh reply's: a
    /// resumed run takes it instead of asking again (the process that died had paid for it).
    fn kept_reply(&self, text: String) -> LlmReply;
}

/// PyTorch's own times for the problem, measured the same way as the candidates' when the
/// platform measures them (absent on the noop platform and until they are measured).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ReferenceTimes {
    pub eager_ms: Option<f64>,
    pub compile_ms: Option<f64>,
}

/// How an evaluated attempt ended.
#[derive(Clone, Debug, PartialEq)]
pub enum AttemptOutcome {
    Verified {
        time_ms: f64,
    },
    /// A verdict against the reference, a crash or a timeout: the reason says which.
    Failed {
        reason: String,
    },
}

/// An evaluated candidate and the lesson its reflexion drew from it.
#[derive(Clone, Debug, PartialEq)]
pub struct Lesson {
    pub candidate: CandidateId,
    pub parent: CandidateId,
    /// The bottleneck the candidate attacked, when its proposal had one.
    pub bottleneck: Option<String>,
    pub outcome: AttemptOutcome,
    /// One line, `avoid: ...` or `try: ...` when the model kept to the format.
    pub lesson: String,
}

/// What an optimization prompt is built from.
#[derive(Clone, Debug, PartialEq)]
pub struct ProposalContext {
    pub candidate: CandidateId,
    pub round: u32,
    pub parent: CandidateId,
    pub parent_source: KernelSource,
    pub parent_time_ms: f64,
    pub best_time_ms: f64,
    pub initial_time_ms: f64,
    pub reference: ReferenceTimes,
    /// Which of the parent's proposals this is (0-based): each takes a different bottleneck.
    pub proposal_index: u32,
    /// How many proposals the parent gets this round (more than num_bottlenecks while the beam
    /// holds fewer parents than its width).
    pub proposals: u32,
    pub profile: Option<ProfileSummary>,
    /// The bottleneck of the parent's analysis that this proposal attacks; `None` when the
    /// analysis named fewer bottlenecks than the parent has proposals.
    pub bottleneck: Option<AnalyzedBottleneck>,
    /// The most recent lessons of the run, oldest first.
    pub recent_lessons: Vec<Lesson>,
    /// Why the latest attempt made from this parent failed, when it did.
    pub previous_error: Option<String>,
}

/// What a parent's bottleneck analysis prompt is built from.
#[derive(Clone, Debug, PartialEq)]
pub struct AnalysisContext {
    /// The kernel under analysis: the parent whose proposals the bottlenecks are for.
    pub candidate: CandidateId,
    pub round: u32,
    pub source: KernelSource,
    pub time_ms: f64,
    pub reference: ReferenceTimes,
    pub profile: Option<ProfileSummary>,
    /// How many distinct bottlenecks to ask for: the parent's proposals per round.
    pub num_bottlenecks: u32,
}

/// What the prompt for another attempt at a candidate that failed verification is built from.
#[derive(Clone, Debug, PartialEq)]
pub struct RefinementContext {
    pub candidate: CandidateId,
    pub round: u32,
    pub parent: CandidateId,
    /// 1 for the first refinement.
    pub attempt: u32,
    pub max_refinements: u32,
    pub failed_source: KernelSource,
    /// The verifier's reason.
    pub error: String,
    pub bottleneck: Option<AnalyzedBottleneck>,
}

/// The most earlier attempts a seed's refinement prompt carries (KernelAgent keeps the last 8).
pub const SEED_HISTORY: usize = 8;

/// One earlier attempt at a seed kernel: its code and why verification refused it.
#[derive(Clone, Debug, PartialEq)]
pub struct SeedAttempt {
    pub source: KernelSource,
    pub error: String,
}

/// What the prompt for a seed kernel, written from problem.py alone, is built from: the first
/// request (no attempts yet) or a refinement with the latest failed attempts, oldest first.
#[derive(Clone, Debug, PartialEq)]
pub struct SeedContext {
    pub candidate: CandidateId,
    /// 0-based among the run's seeds.
    pub seed_index: u32,
    pub num_seeds: u32,
    /// 0 for the seed's first code, N for refinement N.
    pub attempt: u32,
    pub max_refinements: u32,
    /// At most `SEED_HISTORY` of them.
    pub attempts: Vec<SeedAttempt>,
}

/// What a reflexion prompt, asked after a candidate was evaluated, is built from.
#[derive(Clone, Debug, PartialEq)]
pub struct ReflexionContext {
    pub candidate: CandidateId,
    pub round: u32,
    pub parent: CandidateId,
    pub parent_time_ms: f64,
    pub source: KernelSource,
    pub outcome: AttemptOutcome,
    pub bottleneck: Option<AnalyzedBottleneck>,
}

/// A rendered prompt: the system prompt and the user message.
#[derive(Clone, Debug, PartialEq)]
pub struct RenderedPrompt {
    pub system: String,
    pub user: String,
}

/// Renders every prompt the Manager sends. An `Err` is the reason, for the journal.
pub trait PromptBuilder {
    fn optimization(&self, context: &ProposalContext) -> Result<RenderedPrompt, String>;
    fn analysis(&self, context: &AnalysisContext) -> Result<RenderedPrompt, String>;
    fn refinement(&self, context: &RefinementContext) -> Result<RenderedPrompt, String>;
    fn seed(&self, context: &SeedContext) -> Result<RenderedPrompt, String>;
    fn reflexion(&self, context: &ReflexionContext) -> Result<RenderedPrompt, String>;
}

/// The run directory. Only the Collector calls it, from a thread of its own, so its methods may
/// block on the disk.
pub trait RunStore: Send {
    /// Appends one record to the journal, whole or not at all, handed to the OS (a process that
    /// dies keeps it); `sync_journal` makes it survive the machine.
    fn append(&mut self, record: &JournalRecord) -> io::Result<()>;
    /// Syncs the journal's appended records to disk. The Collector calls it after each batch of
    /// records it had queued (group commit): one sync for many records.
    fn sync_journal(&mut self) -> io::Result<()>;
    fn create_candidate_folder(&mut self, id: CandidateId) -> io::Result<PathBuf>;
    fn write_candidate_file(
        &mut self,
        id: CandidateId,
        name: &str,
        contents: &str,
    ) -> io::Result<()>;
    fn write_best_kernel(&mut self, source: &str) -> io::Result<()>;
    /// Makes `<run>/<name>/` with these files and returns its path (the final check's folder).
    fn prepare_folder(&mut self, name: &str, files: &[(String, String)]) -> io::Result<PathBuf>;
    /// Writes report.md and report.html, each replaced whole (a reader never sees half of one).
    fn write_report(&mut self, markdown: &str, html: &str) -> io::Result<()>;
    /// Removes what a candidate's folder holds only as a cache (Triton's cache with the
    /// compiled binaries, Python's bytecode, the profilers' reports); its code, prompts,
    /// replies, logs and anything the journal names stay. Answers what was removed.
    fn remove_candidate_caches(&mut self, id: CandidateId) -> io::Result<RemovedCaches>;
    /// The bytes the run directory holds, every file counted.
    fn measure(&mut self) -> io::Result<u64>;
    /// The text of the reply kept in a candidate's folder under `name` (as `exchange_files`
    /// names it), `None` where none was kept: a reply file is written whole or not at all.
    fn read_kept_reply(&mut self, id: CandidateId, name: &str) -> io::Result<Option<String>>;
}

/// What `RunStore::remove_candidate_caches` removed: paths relative to the run directory, and
/// their bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RemovedCaches {
    pub paths: Vec<String>,
    pub bytes: u64,
}

/// Where progress goes for the person watching: plain lines or JSON events.
pub trait ProgressSink: Send {
    fn record(&mut self, record: &JournalRecord);
    /// A resumed run's records so far, before its first new one: figures shown from then on
    /// count the whole run, not only the resuming process's work. Nothing is shown for them.
    fn seed(&mut self, _records: &[JournalRecord]) {}
}

/// The one clock every timestamp of a run comes from; tests replace it.
pub trait Clock: Send + Sync {
    fn now(&self) -> SystemTime;
}

/// A process group that the Watchdog may signal, as plain data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GroupId(pub i32);

/// Sends signals to process groups: the only way the actors end a child.
pub trait GroupSignaller {
    fn terminate(&self, group: GroupId);
    fn kill(&self, group: GroupId);
}
