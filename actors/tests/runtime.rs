//! The runtime end to end with fake ports: no process, no disk, no network.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use actix::Actor;
use actors::journal::{EvaluationOutcome, Event, JournalRecord, RunOutcome, Step, history};
use actors::manager::ManagerSettings;
use actors::model::{
    CandidateId, DeviceId, KernelSource, Provenance, TimeOutcome, Timing, Verdict, VerifyOutcome,
};
use actors::ports::*;
use actors::search::{Ensemble, FanOut, Pacing, SearchKind, SearchSettings};
use actors::search_state::{Resume, SearchConfig, SearchState};
use actors::supervisor::{Interrupt, RunIo, RunPlan, RunResult, Supervisor, WorkPorts};
use actors::time_limit::TimeLimit;
use tokio::sync::{oneshot, watch};

type Journal = Arc<Mutex<Vec<JournalRecord>>>;

/// What the journal has seen so far, for fakes that must wait for a point of the run rather than
/// sleep: the lessons recorded, the rounds finished, the verifications started and the
/// candidates finished (the initial kernel counted).
#[derive(Clone)]
struct Milestones {
    lessons: Arc<watch::Sender<usize>>,
    rounds: Arc<watch::Sender<u32>>,
    verifications: Arc<watch::Sender<usize>>,
    finished: Arc<watch::Sender<usize>>,
}

impl Milestones {
    fn new() -> Self {
        Milestones {
            lessons: Arc::new(watch::channel(0).0),
            rounds: Arc::new(watch::channel(0).0),
            verifications: Arc::new(watch::channel(0).0),
            finished: Arc::new(watch::channel(0).0),
        }
    }
}

/// How the fake run directory fails, to show what a full disk or a broken writer does.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
enum StoreFault {
    #[default]
    None,
    /// Every append after this many records fails, as on a disk that filled up.
    FullAfter(usize),
    /// The append after this many records panics on the writer thread.
    PanicAfter(usize),
}

struct MemoryStore {
    journal: Journal,
    milestones: Milestones,
    fault: StoreFault,
    best: Arc<Mutex<Vec<String>>>,
    /// Every report.md and report.html written, in order.
    reports: Arc<Mutex<Vec<(String, String)>>>,
}

impl RunStore for MemoryStore {
    fn append(&mut self, record: &JournalRecord) -> std::io::Result<()> {
        let written = self.journal.lock().unwrap().len();
        match self.fault {
            StoreFault::FullAfter(n) if written >= n => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::StorageFull,
                    "/run/journal.jsonl: No space left on device (os error 28)",
                ));
            }
            StoreFault::PanicAfter(n) if written >= n => {
                panic!("a deliberate panic on the writer thread")
            }
            _ => {}
        }
        self.journal.lock().unwrap().push(record.clone());
        match &record.event {
            Event::ReflexionReceived {
                lesson: Some(_), ..
            } => self.milestones.lessons.send_modify(|n| *n += 1),
            Event::RoundFinished { .. } => self.milestones.rounds.send_modify(|n| *n += 1),
            Event::StepStarted {
                step: Step::Verify, ..
            } => self.milestones.verifications.send_modify(|n| *n += 1),
            Event::CandidateFinished { .. } => self.milestones.finished.send_modify(|n| *n += 1),
            _ => {}
        }
        Ok(())
    }
    fn sync_journal(&mut self) -> std::io::Result<()> {
        Ok(())
    }
    fn create_candidate_folder(&mut self, id: CandidateId) -> std::io::Result<PathBuf> {
        Ok(PathBuf::from(format!("/run/candidates/{id}")))
    }
    fn write_candidate_file(&mut self, _: CandidateId, _: &str, _: &str) -> std::io::Result<()> {
        Ok(())
    }
    fn write_best_kernel(&mut self, source: &str) -> std::io::Result<()> {
        self.best.lock().unwrap().push(source.to_string());
        Ok(())
    }
    fn prepare_folder(&mut self, name: &str, _: &[(String, String)]) -> std::io::Result<PathBuf> {
        Ok(PathBuf::from(format!("/run/{name}")))
    }
    fn write_report(&mut self, markdown: &str, html: &str) -> std::io::Result<()> {
        self.reports
            .lock()
            .unwrap()
            .push((markdown.to_string(), html.to_string()));
        Ok(())
    }
    fn remove_candidate_caches(&mut self, id: CandidateId) -> std::io::Result<RemovedCaches> {
        Ok(RemovedCaches {
            paths: vec![format!("candidates/{id}/triton-cache")],
            bytes: 1000,
        })
    }
    fn measure(&mut self) -> std::io::Result<u64> {
        Ok(1000 * self.journal.lock().unwrap().len() as u64)
    }
    fn read_kept_reply(&mut self, _: CandidateId, _: &str) -> std::io::Result<Option<String>> {
        Ok(None)
    }
}

struct Silent;
impl ProgressSink for Silent {
    fn record(&mut self, _: &JournalRecord) {}
}

struct WallClock;
impl Clock for WallClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

struct NoSignals;
impl GroupSignaller for NoSignals {
    fn terminate(&self, _: GroupId) {}
    fn kill(&self, _: GroupId) {}
}

/// Times come from the source: `# ms=1.5`; `# fail` fails verification; `# crash` crashes the
/// evaluator; `# slow` holds its device until SLOW_UNTIL candidates have finished.
fn judge(source: &KernelSource) -> (Verdict, f64) {
    let text = source.text();
    if text.contains("# fail") {
        return (
            Verdict::Failed {
                reason: "wrong output".into(),
            },
            0.0,
        );
    }
    let ms = text
        .split("ms=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .map(|number| number.trim_end_matches(['\'', ')']))
        .and_then(|n| n.parse().ok())
        .unwrap_or(10.0);
    (
        Verdict::Passed {
            max_abs_err: 0.0,
            max_rel_err: 0.0,
            rel_l2_err: None,
            rule: None,
        },
        ms,
    )
}

/// How many candidates (the initial kernel counted) finish before a `# slow` one is verified.
const SLOW_UNTIL: usize = 4;

struct FakeEvaluator {
    panic_on_verify: bool,
    /// Set when the device's node can fail: while it is down every verification fails as
    /// `DeviceLost`, naming these devices as lost with it.
    lost_with: Option<Vec<DeviceId>>,
    node_down: Rc<std::cell::Cell<bool>>,
    milestones: Milestones,
}

impl DeviceEvaluator for FakeEvaluator {
    fn verify<'a>(&'a mut self, job: &'a EvalJob) -> EvalFuture<'a, VerifyOutcome> {
        let mut finished = self.milestones.finished.subscribe();
        Box::pin(async move {
            tokio::task::yield_now().await;
            if job.source.text().contains("# slow") {
                let _ = finished.wait_for(|n| *n >= SLOW_UNTIL).await;
            }
            if self.panic_on_verify {
                panic!("a deliberate panic inside the worker's handler");
            }
            if let Some(devices) = &self.lost_with
                && self.node_down.get()
            {
                return Err(EvalError::DeviceLost {
                    reason: "the agent of node n2 is gone".into(),
                    devices: devices.clone(),
                });
            }
            if job.source.text().contains("# crash") {
                return Err(EvalError::Crashed {
                    reason: "an illegal memory access was encountered".into(),
                });
            }
            if job.source.text().contains("# enospc") {
                return Err(EvalError::Crashed {
                    reason: "OSError: [Errno 28] No space left on device: '/run/candidates/1/triton-cache/x.cubin'"
                        .into(),
                });
            }
            if job.source.text().contains("# no_room") {
                return Err(EvalError::Start(
                    "the problem's inputs do not fit on Fake GPU: 30.0 GiB needed, 20.0 GiB free"
                        .into(),
                ));
            }
            Ok(VerifyOutcome {
                verdict: judge(&job.source).0,
                provenance: Provenance::Measured,
                launched_kernels: vec!["fake_kernel".into()],
                compiled: None,
            })
        })
    }
    fn time<'a>(&'a mut self, job: &'a EvalJob) -> EvalFuture<'a, TimeOutcome> {
        Box::pin(async move {
            let ms = judge(&job.source).1;
            Ok(TimeOutcome {
                timing: Timing {
                    median_ms: ms,
                    min_ms: ms,
                    max_ms: ms,
                    samples: 1,
                },
                provenance: Provenance::Measured,
                floor_ms: None,
            })
        })
    }
    fn time_reference(
        &mut self,
        which: actors::model::Reference,
        _: Duration,
    ) -> ReferenceTiming<'_> {
        let ms = match which {
            actors::model::Reference::Eager => 9.0,
            actors::model::Reference::Compile => 7.0,
        };
        Box::pin(async move {
            Ok(Some(TimeOutcome {
                timing: Timing {
                    median_ms: ms,
                    min_ms: ms,
                    max_ms: ms,
                    samples: 1,
                },
                provenance: Provenance::Measured,
                floor_ms: None,
            }))
        })
    }

    fn run_user_test<'a>(&'a mut self, _: &'a std::path::Path, _: Duration) -> UserTestRun<'a> {
        Box::pin(async { Ok(None) })
    }
    fn take_started(&mut self) -> Option<actors::ports::EvaluatorStart> {
        None
    }
    fn shutdown(&mut self) -> LocalFuture<'_, ()> {
        Box::pin(async {})
    }
}

/// The first evaluator started for `panicking_device` panics on its first verification; the
/// `lost_devices` lose every verification.
struct FakeFactory {
    panicking_device: Option<DeviceId>,
    lost_devices: Vec<DeviceId>,
    /// Whether the lost devices' node is down: from the start, until its agent is restarted.
    node_down: Rc<std::cell::Cell<bool>>,
    /// Whether its agent can be started again (once), or its devices are retired.
    restartable: bool,
    started: RefCell<HashMap<DeviceId, u32>>,
    milestones: Milestones,
}

impl EvaluatorFactory for FakeFactory {
    fn start(&self, device: DeviceId) -> Box<dyn DeviceEvaluator> {
        let mut started = self.started.borrow_mut();
        let count = started.entry(device).or_insert(0);
        *count += 1;
        Box::new(FakeEvaluator {
            panic_on_verify: Some(device) == self.panicking_device && *count == 1,
            lost_with: self
                .lost_devices
                .contains(&device)
                .then(|| self.lost_devices.clone()),
            node_down: self.node_down.clone(),
            milestones: self.milestones.clone(),
        })
    }

    /// The node's agent starts again at once and serves from then on, when it is restartable.
    fn agent_lost(&self, _: &[DeviceId], reason: &str) -> AgentLoss {
        if !self.restartable {
            return AgentLoss::Retired {
                reason: reason.to_string(),
            };
        }
        if !self.node_down.get() {
            return AgentLoss::Serving;
        }
        let node_down = self.node_down.clone();
        AgentLoss::Restarting {
            node: "n2".into(),
            restarts: 1,
            restarted: Box::pin(async move {
                node_down.set(false);
                Ok("7.9".to_string())
            }),
        }
    }
}

/// When a scripted answer comes.
#[derive(Clone, Copy, Debug)]
enum When {
    Now,
    After(Duration),
    /// Once the journal holds a lesson.
    AfterALesson,
    /// Once this many requests for code have reached the provider.
    OnceRequested(usize),
    /// Once this many verifications have started (the initial kernel's counted).
    OnceVerifying(usize),
    /// Once this many candidates have finished (the initial kernel counted).
    OnceFinished(usize),
}

/// How the fake provider answers reflexions.
#[derive(Clone, Copy, Debug)]
enum Reflexions {
    /// An empty reflexion, as the replay provider gives.
    Empty,
    /// `try: lesson of candidate <id>`, at once.
    Lessons,
    /// `try: lesson of candidate <id>`, once the journal holds a finished round.
    LessonsAfterARound,
}

/// Answers requests for code with scripted sources, each when its `When` says, then
/// "exhausted"; an analysis with `analysis`, a reflexion as `reflexions` says. Neither of the
/// last two consumes a scripted answer, as with the replay provider.
struct ScriptedLlm {
    answers: RefCell<VecDeque<(When, Result<&'static str, LlmError>)>>,
    /// Answers every request for code at once with the code of its request id, whatever the
    /// order requests come in: a run and its resume get the same answers.
    by_request: Option<fn(&str) -> String>,
    analysis: &'static str,
    reflexions: Reflexions,
    milestones: Milestones,
    requests: Rc<RefCell<Vec<LlmRequest>>>,
    /// Requests for code that reached the provider so far.
    code_requests: watch::Sender<usize>,
    /// Requests for code now unanswered, and the most there ever were.
    code_in_flight: Rc<RefCell<(usize, usize)>>,
}

/// Counts a request for code out of flight when its answer (or its drop) ends it.
struct InFlight(Rc<RefCell<(usize, usize)>>);

impl InFlight {
    fn start(counter: &Rc<RefCell<(usize, usize)>>) -> Self {
        let mut counts = counter.borrow_mut();
        counts.0 += 1;
        counts.1 = counts.1.max(counts.0);
        InFlight(counter.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.borrow_mut().0 -= 1;
    }
}

fn text_reply(text: String) -> LlmReply {
    LlmReply {
        text,
        code: None,
        truncated: false,
        usage: None,
        cost_usd: None,
    }
}

impl LlmProvider for ScriptedLlm {
    fn kept_reply(&self, text: String) -> LlmReply {
        text_reply(text)
    }

    fn complete(
        self: Rc<Self>,
        request: LlmRequest,
    ) -> LocalFuture<'static, Result<LlmReply, LlmError>> {
        self.requests.borrow_mut().push(request.clone());
        let mut lessons = self.milestones.lessons.subscribe();
        let mut rounds = self.milestones.rounds.subscribe();
        match request.kind {
            RequestKind::Analysis => {
                let text = self.analysis.to_string();
                return Box::pin(async move { Ok(text_reply(text)) });
            }
            RequestKind::Reflexion => {
                let reflexions = self.reflexions;
                let lesson = format!("try: lesson of candidate {}", request.candidate);
                return Box::pin(async move {
                    match reflexions {
                        Reflexions::Empty => return Ok(text_reply(String::new())),
                        Reflexions::Lessons => {}
                        Reflexions::LessonsAfterARound => {
                            let _ = rounds.wait_for(|n| *n >= 1).await;
                        }
                    }
                    Ok(text_reply(lesson))
                });
            }
            RequestKind::Optimize | RequestKind::Seed | RequestKind::Refine => {}
        }
        if let Some(by_request) = self.by_request {
            let code = by_request(&request.request_id);
            return Box::pin(async move { Ok(code_reply(code)) });
        }
        let next = self.answers.borrow_mut().pop_front();
        self.code_requests.send_modify(|n| *n += 1);
        let mut code_requests = self.code_requests.subscribe();
        let mut verifications = self.milestones.verifications.subscribe();
        let mut finished = self.milestones.finished.subscribe();
        let in_flight = InFlight::start(&self.code_in_flight);
        Box::pin(async move {
            let _in_flight = in_flight;
            let Some((when, answer)) = next else {
                return Err(LlmError::Exhausted);
            };
            match when {
                When::Now => {}
                When::After(delay) => tokio::time::sleep(delay).await,
                When::AfterALesson => {
                    let _ = lessons.wait_for(|n| *n >= 1).await;
                }
                When::OnceRequested(count) => {
                    let _ = code_requests.wait_for(|n| *n >= count).await;
                }
                When::OnceVerifying(count) => {
                    let _ = verifications.wait_for(|n| *n >= count).await;
                }
                When::OnceFinished(count) => {
                    let _ = finished.wait_for(|n| *n >= count).await;
                }
            }
            Ok(code_reply(answer?.to_string()))
        })
    }
}

fn code_reply(code: String) -> LlmReply {
    LlmReply {
        text: code.clone(),
        code: Some(KernelSource::new(code)),
        truncated: false,
        usage: None,
        cost_usd: None,
    }
}

/// Renders plain prompts and keeps every context it was given; with `panic_on_optimization`, the
/// first optimization prompt panics inside the Manager's handler.
#[derive(Default)]
struct RecordingPrompts {
    panic_on_optimization: bool,
    optimizations: RefCell<Vec<ProposalContext>>,
    analyses: RefCell<Vec<AnalysisContext>>,
    refinements: RefCell<Vec<RefinementContext>>,
    reflexions: RefCell<Vec<ReflexionContext>>,
}

fn plain(user: String) -> Result<RenderedPrompt, String> {
    Ok(RenderedPrompt {
        system: "system".into(),
        user,
    })
}

impl PromptBuilder for RecordingPrompts {
    fn optimization(&self, context: &ProposalContext) -> Result<RenderedPrompt, String> {
        if self.panic_on_optimization {
            panic!("a deliberate panic inside the manager");
        }
        self.optimizations.borrow_mut().push(context.clone());
        plain(format!("improve candidate {}", context.parent))
    }
    fn analysis(&self, context: &AnalysisContext) -> Result<RenderedPrompt, String> {
        self.analyses.borrow_mut().push(context.clone());
        plain(format!("analyse candidate {}", context.candidate))
    }
    fn refinement(&self, context: &RefinementContext) -> Result<RenderedPrompt, String> {
        self.refinements.borrow_mut().push(context.clone());
        plain(format!("fix candidate {}", context.candidate))
    }
    fn reflexion(&self, context: &ReflexionContext) -> Result<RenderedPrompt, String> {
        self.reflexions.borrow_mut().push(context.clone());
        plain(format!("reflect on candidate {}", context.candidate))
    }
    fn seed(&self, context: &actors::ports::SeedContext) -> Result<RenderedPrompt, String> {
        plain(format!("write seed {}", context.candidate))
    }
}

struct Scenario {
    devices: u32,
    search: SearchSettings,
    pacing: Pacing,
    max_inflight: usize,
    initial: &'static str,
    answers: Vec<(When, Result<&'static str, LlmError>)>,
    panicking_device: Option<DeviceId>,
    /// Devices whose node is gone from the start: see `FakeFactory`.
    lost_devices: Vec<DeviceId>,
    /// Whether that node's agent can be started again.
    restartable: bool,
    analysis: &'static str,
    reflexions: Reflexions,
    max_refinements: u32,
    store: StoreFault,
    panicking_manager: bool,
    /// Sent to the Supervisor once this many candidates have finished (the initial kernel
    /// counted).
    interrupt_after: Option<usize>,
    /// See `ScriptedLlm::by_request`.
    answer_by_request: Option<fn(&str) -> String>,
    /// Go on from these records, as `kactors resume` does from a dead process's journal.
    resume_from: Option<Vec<JournalRecord>>,
    time_limit: Option<TimeLimit>,
}

impl Default for Scenario {
    fn default() -> Self {
        Scenario {
            devices: 1,
            search: beam(1, 1, 1),
            pacing: Pacing::Rounds,
            max_inflight: 16,
            initial: "# ms=8",
            answers: Vec::new(),
            panicking_device: None,
            lost_devices: Vec::new(),
            restartable: false,
            analysis: "no analysis available",
            reflexions: Reflexions::Empty,
            max_refinements: 0,
            store: StoreFault::None,
            panicking_manager: false,
            interrupt_after: None,
            answer_by_request: None,
            resume_from: None,
            time_limit: None,
        }
    }
}

fn beam(n: u32, m: u32, rounds: u32) -> SearchSettings {
    SearchSettings {
        kind: SearchKind::Beam,
        num_top_kernels: n,
        num_bottlenecks: m,
        max_rounds: rounds,
        max_no_improvement: None,
        max_candidates: None,
        fan_out: FanOut::default(),
    }
}

fn now() -> When {
    When::Now
}

/// A run, with what its fakes saw.
struct Ran {
    result: RunResult,
    records: Vec<JournalRecord>,
    events: Vec<Event>,
    prompts: Rc<RecordingPrompts>,
    requests: Vec<LlmRequest>,
    /// The most requests for code the provider had unanswered at once.
    peak_code_requests: usize,
    /// Every best_kernel.py written, in order.
    best_written: Vec<String>,
    /// Every report.md and report.html written, in order.
    reports: Vec<(String, String)>,
}

fn run(scenario: Scenario) -> (RunResult, Vec<Event>) {
    let ran = run_recorded(scenario);
    (ran.result, ran.events)
}

fn run_recorded(scenario: Scenario) -> Ran {
    let journal: Journal = Arc::new(Mutex::new(scenario.resume_from.clone().unwrap_or_default()));
    let resume = scenario.resume_from.map(|records| {
        let history = history(&records).expect("a resume starts from some records");
        Resume {
            records,
            in_flight_at_two_deaths: history.in_flight_at_two_deaths,
            previous_end: history.previous_end,
            gap_s: 0.0,
            orphans_ended: 0,
            torn_line: false,
            forced_changes: Vec::new(),
        }
    });
    let milestones = Milestones::new();
    let best_written = Arc::new(Mutex::new(Vec::new()));
    let reports = Arc::new(Mutex::new(Vec::new()));
    let io = RunIo {
        store: Box::new(MemoryStore {
            journal: journal.clone(),
            milestones: milestones.clone(),
            fault: scenario.store,
            best: best_written.clone(),
            reports: reports.clone(),
        }),
        progress: Box::new(Silent),
        clock: Arc::new(WallClock),
        signaller: Box::new(NoSignals),
    };
    let devices: Vec<DeviceId> = (0..scenario.devices).map(DeviceId).collect();
    let plan = RunPlan {
        started: Event::RunStarted {
            strategy: "test".into(),
            platform: "fake".into(),
            simulated: false,
            search: scenario.search.kind.name().into(),
            num_top_kernels: scenario.search.num_top_kernels,
            num_bottlenecks: scenario.search.num_bottlenecks,
            max_rounds: scenario.search.max_rounds,
            devices: Vec::new(),
            initial_source: scenario.initial.into(),
            sandbox: None,
        },
        startup: Vec::new(),
        manager: ManagerSettings {
            search: SearchConfig {
                search: scenario.search,
                pacing: scenario.pacing,
                devices,
                profile_parents: false,
                time_references: true,
                max_refinements: scenario.max_refinements,
                stop_at_roofline: false,
                requests_per_minute: None,
                reflexions_in_flight: 8,
                generation: None,
                ensemble: Ensemble::default(),
                overlap_rounds: true,
            },
            step_deadline: Duration::from_secs(5),
            final_files: Vec::new(),
            time_limit: scenario.time_limit,
            evaluations_fill_the_disk: true,
        },
        resume,
        max_inflight: scenario.max_inflight,
        kill_grace: Duration::from_millis(10),
        restart_budget: 2,
        stop_evaluator_during_profile: false,
        resume_command: "kactors resume runs/test".into(),
    };
    let factory = FakeFactory {
        panicking_device: scenario.panicking_device,
        lost_devices: scenario.lost_devices,
        node_down: Rc::new(std::cell::Cell::new(true)),
        restartable: scenario.restartable,
        started: RefCell::default(),
        milestones: milestones.clone(),
    };
    let requests = Rc::new(RefCell::new(Vec::new()));
    let code_in_flight = Rc::new(RefCell::new((0, 0)));
    let mut finished = milestones.finished.subscribe();
    let llm = ScriptedLlm {
        answers: RefCell::new(scenario.answers.into()),
        by_request: scenario.answer_by_request,
        analysis: scenario.analysis,
        reflexions: scenario.reflexions,
        milestones,
        requests: requests.clone(),
        code_requests: watch::channel(0).0,
        code_in_flight: code_in_flight.clone(),
    };
    let prompts = Rc::new(RecordingPrompts {
        panic_on_optimization: scenario.panicking_manager,
        ..RecordingPrompts::default()
    });
    let port_prompts = prompts.clone();
    let ports = Box::new(move |_| WorkPorts {
        evaluators: Rc::new(factory),
        profiler: None,
        llm: Rc::new(llm),
        prompts: port_prompts,
    });
    let interrupt_after = scenario.interrupt_after;
    let store_fault = scenario.store;
    let search_config = plan.manager.search.clone();
    let result = actix::System::new().block_on(async move {
        let (sender, receiver) = oneshot::channel();
        let supervisor = Supervisor::new(io, ports, plan, sender).start();
        if let Some(count) = interrupt_after {
            actix::spawn(async move {
                let _ = finished.wait_for(|n| *n >= count).await;
                supervisor.do_send(Interrupt {
                    signal: "SIGINT".into(),
                });
            });
        }
        tokio::time::timeout(Duration::from_secs(20), receiver)
            .await
            .expect("the run ends within 20 s: nothing waits for an answer that never comes")
            .expect("the supervisor answers")
    });
    let records: Vec<JournalRecord> = journal.lock().unwrap().clone();
    let events: Vec<Event> = records.iter().map(|r| r.event.clone()).collect();
    if store_fault == StoreFault::None {
        assert_the_journal_folds_to_the_live_state(search_config, &events, &result);
    }
    let requests = requests.borrow().clone();
    let peak_code_requests = code_in_flight.borrow().1;
    let best_written = best_written.lock().unwrap().clone();
    let reports = reports.lock().unwrap().clone();
    Ran {
        result,
        records,
        events,
        prompts,
        requests,
        peak_code_requests,
        best_written,
        reports,
    }
}

/// Issue 12: the journal a run wrote rebuilds the search's state the run ended with, and every
/// prefix of it folds to a state that holds the state's invariants.
fn assert_the_journal_folds_to_the_live_state(
    config: SearchConfig,
    events: &[Event],
    result: &RunResult,
) {
    for end in 0..=events.len() {
        let state = SearchState::rebuild(config.clone(), &events[..end]);
        if let Err(broken) = state.check_invariants() {
            panic!("the journal's first {end} records fold to a broken state: {broken}");
        }
    }
    if let Some(live) = &result.search {
        let rebuilt = SearchState::rebuild(config, events);
        assert!(
            rebuilt == *live,
            "the journal folds to another state than the live one:\n{rebuilt:#?}\n{live:#?}"
        );
    }
}

fn finished_candidates(events: &[Event]) -> Vec<(u64, u32, bool)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::CandidateFinished {
                candidate,
                device,
                passed,
                ..
            } => Some((candidate.0, device.0, *passed)),
            _ => None,
        })
        .collect()
}

#[test]
fn candidates_fan_out_round_robin_and_the_beam_keeps_the_fastest() {
    let answers = vec![
        (now(), Ok("def kernel_function(): return 'ms=5'")),
        (now(), Ok("def kernel_function(): return 'ms=4'")),
        (now(), Ok("def kernel_function(): return 'ms=6'")),
        (now(), Ok("def kernel_function(): pass # fail")),
    ];
    let (result, events) = run(Scenario {
        devices: 4,
        search: beam(2, 2, 1),
        initial: "# ms=8",
        answers,
        panicking_device: None,
        ..Scenario::default()
    });
    assert_eq!(result.outcome, RunOutcome::Completed);
    assert_eq!(result.reason, "max_rounds (1) reached");
    assert_eq!(result.best.unwrap().id, CandidateId(2));
    let mut finished = finished_candidates(&events);
    finished.sort();
    assert_eq!(
        finished,
        vec![
            (0, 0, true),
            (1, 1, true),
            (2, 2, true),
            (3, 3, true),
            (4, 0, false)
        ]
    );
    let beam = events.iter().find_map(|e| match e {
        Event::BeamUpdated { beam, .. } => {
            Some(beam.iter().map(|m| m.candidate.0).collect::<Vec<_>>())
        }
        _ => None,
    });
    assert_eq!(beam, Some(vec![2, 1]));
}

#[test]
fn the_caches_of_candidates_that_can_no_longer_become_parents_are_removed_and_the_run_directory_measured()
 {
    let ran = run_recorded(Scenario {
        devices: 2,
        search: beam(2, 2, 1),
        initial: "# ms=8",
        answers: vec![
            (now(), Ok("def kernel_function(): return 'ms=5'")),
            (now(), Ok("def kernel_function(): return 'ms=4'")),
            (now(), Ok("def kernel_function(): return 'ms=6'")),
            (now(), Ok("def kernel_function(): pass # fail")),
        ],
        ..Scenario::default()
    });
    assert_eq!(ran.result.outcome, RunOutcome::Completed);
    // The beam keeps 2 and 1; 3 is slower and 4 failed. The initial kernel is left to the
    // finale, which times it again.
    let mut removed: Vec<u64> = ran
        .events
        .iter()
        .filter_map(|e| match e {
            Event::CachesRemoved {
                candidate, paths, ..
            } => {
                assert_eq!(paths, &[format!("candidates/{candidate}/triton-cache")]);
                Some(candidate.0)
            }
            _ => None,
        })
        .collect();
    removed.sort();
    assert_eq!(removed, [3, 4]);
    let n = ran.events.len();
    let Event::RunDirMeasured { bytes } = ran.events[n - 2] else {
        panic!("the run directory is measured just before run_finished");
    };
    assert!(matches!(ran.events[n - 1], Event::RunFinished { .. }));
    let (markdown, _) = ran.reports.last().unwrap();
    assert!(
        markdown.contains("## Disk\n\nThe run directory holds ")
            && markdown.contains(&format!(" ({bytes} bytes, measured ")),
        "{markdown}"
    );
    assert!(
        markdown.contains("The caches of 2 candidate(s) that could no longer become parents were removed as the run went: 2.00 kB (2000 bytes)."),
        "{markdown}"
    );
}

#[test]
fn a_panicking_worker_is_restarted_and_the_run_completes() {
    let answers = vec![
        (now(), Ok("def kernel_function(): return 'ms=5'")),
        (now(), Ok("def kernel_function(): return 'ms=4'")),
    ];
    let (result, events) = run(Scenario {
        devices: 2,
        search: beam(1, 2, 1),
        initial: "# ms=8",
        answers,
        panicking_device: Some(DeviceId(1)),
        ..Scenario::default()
    });
    assert_eq!(result.outcome, RunOutcome::Completed, "{}", result.reason);
    assert!(events.iter().any(|e| matches!(
        e,
        Event::WorkerDied {
            device: DeviceId(1),
            candidate: Some(CandidateId(1)),
            ..
        }
    )));
    assert!(events.iter().any(|e| matches!(
        e,
        Event::WorkerRestarted {
            device: DeviceId(1),
            restarts: 1
        }
    )));
    let mut finished = finished_candidates(&events);
    finished.sort();
    assert_eq!(
        finished,
        vec![(0, 0, true), (1, 1, true), (2, 0, true)],
        "the in-flight candidate was retried on the new worker"
    );
}

/// Issue 14: a node that is gone costs its candidates only a move: each runs again on live
/// device i mod (live devices), its devices are journaled as lost once, and the run completes.
#[test]
fn the_candidates_of_lost_devices_run_again_on_live_devices() {
    let answers = [5, 4, 6, 7].map(|ms| (now(), code(ms))).to_vec();
    let (result, events) = run(Scenario {
        devices: 4,
        search: beam(1, 4, 1),
        answers,
        lost_devices: vec![DeviceId(2), DeviceId(3)],
        ..Scenario::default()
    });
    assert_eq!(result.outcome, RunOutcome::Completed, "{}", result.reason);
    // Candidates 2 and 3 moved to live devices 2 mod 2 and 3 mod 2; every one passed.
    let placed: std::collections::BTreeMap<u64, u32> = finished_candidates(&events)
        .into_iter()
        .filter(|(_, _, passed)| *passed)
        .map(|(candidate, device, _)| (candidate, device))
        .collect();
    assert_eq!(
        placed,
        std::collections::BTreeMap::from([(0, 0), (1, 1), (2, 0), (3, 1), (4, 0)])
    );
    let lost: Vec<&Event> = events
        .iter()
        .filter(|e| matches!(e, Event::DevicesLost { .. }))
        .collect();
    assert_eq!(
        lost,
        [&Event::DevicesLost {
            devices: vec![DeviceId(2), DeviceId(3)],
            reason: "the agent of node n2 is gone".into(),
        }]
    );
    let mut moves: Vec<(u64, u32)> = events
        .iter()
        .filter_map(|e| match e {
            Event::Evaluated {
                candidate,
                device,
                outcome: EvaluationOutcome::DeviceLost,
                ..
            } => Some((candidate.0, device.0)),
            _ => None,
        })
        .collect();
    moves.sort();
    assert_eq!(moves, [(2, 2), (3, 3)]);
}

/// Issue 14: a node whose agent is started again costs its in-flight candidates a move to a
/// live device; its devices are not retired, and later candidates run on them.
#[test]
fn a_restarted_nodes_devices_take_work_again() {
    let answers = [5, 4, 6, 7, 3, 8, 9, 2]
        .map(|ms| (now(), code(ms)))
        .to_vec();
    let (result, events) = run(Scenario {
        devices: 4,
        search: beam(1, 4, 2),
        answers,
        lost_devices: vec![DeviceId(2), DeviceId(3)],
        restartable: true,
        ..Scenario::default()
    });
    assert_eq!(result.outcome, RunOutcome::Completed, "{}", result.reason);
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Event::DevicesLost { .. })),
        "nothing retired"
    );
    let restarts: Vec<&Event> = events
        .iter()
        .filter(|e| {
            matches!(
                e,
                Event::AgentRestarting { .. } | Event::AgentRestarted { .. }
            )
        })
        .collect();
    assert_eq!(
        restarts,
        [
            &Event::AgentRestarting {
                node: "n2".into(),
                devices: vec![DeviceId(2), DeviceId(3)],
                reason: "the agent of node n2 is gone".into(),
            },
            &Event::AgentRestarted {
                node: "n2".into(),
                devices: vec![DeviceId(2), DeviceId(3)],
                restarts: 1,
                step: "7.9".into(),
            }
        ]
    );
    let finished = finished_candidates(&events);
    let lost: Vec<u64> = events
        .iter()
        .filter_map(|e| match e {
            Event::Evaluated {
                candidate,
                outcome: EvaluationOutcome::DeviceLost,
                ..
            } => Some(candidate.0),
            _ => None,
        })
        .collect();
    assert!(!lost.is_empty());
    for candidate in &lost {
        let passed_on: Vec<u32> = finished
            .iter()
            .filter(|(id, _, passed)| id == candidate && *passed)
            .map(|(_, device, _)| *device)
            .collect();
        assert!(
            matches!(passed_on[..], [0 | 1]),
            "candidate {candidate} ran again on a device in service: {passed_on:?}"
        );
    }
    assert!(
        finished
            .iter()
            .any(|(_, device, passed)| [2, 3].contains(device) && *passed),
        "the restarted node's devices evaluated later candidates: {finished:?}"
    );
}

/// With every device gone the run fails and says so.
#[test]
fn a_run_whose_every_device_is_lost_fails() {
    let (result, _) = run(Scenario {
        devices: 2,
        search: beam(1, 2, 1),
        answers: vec![(now(), code(5))],
        lost_devices: vec![DeviceId(0), DeviceId(1)],
        ..Scenario::default()
    });
    assert_eq!(result.outcome, RunOutcome::Failed);
    assert!(
        result.reason.contains("every device of the run was lost"),
        "{}",
        result.reason
    );
}

#[test]
fn an_initial_kernel_that_fails_verification_fails_the_run() {
    let (result, _) = run(Scenario {
        devices: 1,
        search: beam(1, 1, 1),
        initial: "# fail",
        answers: vec![],
        panicking_device: None,
        ..Scenario::default()
    });
    assert_eq!(result.outcome, RunOutcome::Failed);
    assert_eq!(
        result.reason,
        "the initial kernel failed verification: verification failed: wrong output"
    );
}

#[test]
fn an_initial_kernel_whose_evaluator_cannot_start_refuses_the_run() {
    let (result, _) = run(Scenario {
        devices: 1,
        search: beam(1, 1, 1),
        initial: "# no_room",
        answers: vec![],
        panicking_device: None,
        ..Scenario::default()
    });
    assert_eq!(result.outcome, RunOutcome::Refused);
    assert_eq!(
        result.reason,
        "the initial kernel could not be evaluated: the problem's inputs do not fit on Fake GPU: 30.0 GiB needed, 20.0 GiB free"
    );
}

#[test]
fn a_device_whose_evaluator_cannot_start_again_stops_the_run() {
    let answers = vec![(now(), Ok("def kernel_function(): pass # no_room"))];
    let (result, _) = run(Scenario {
        devices: 1,
        search: beam(1, 1, 1),
        initial: "# ms=8",
        answers,
        panicking_device: None,
        ..Scenario::default()
    });
    assert_eq!(result.outcome, RunOutcome::Failed);
    assert_eq!(
        result.reason,
        "the evaluator of device 0 could not start: the problem's inputs do not fit on Fake GPU: 30.0 GiB needed, 20.0 GiB free"
    );
}

#[test]
fn identical_sources_are_evaluated_once() {
    let answers = vec![
        (now(), Ok("def kernel_function(): return 'ms=5'")),
        (now(), Ok("def kernel_function(): return 'ms=5'")),
    ];
    let (_, events) = run(Scenario {
        devices: 2,
        search: beam(1, 2, 1),
        initial: "# ms=8",
        answers,
        panicking_device: None,
        ..Scenario::default()
    });
    let verifications = events
        .iter()
        .filter(|e| {
            matches!(
                e,
                Event::StepStarted {
                    step: Step::Verify,
                    ..
                }
            )
        })
        .count();
    assert_eq!(verifications, 2, "the initial kernel and one of the twins");
    assert!(events.iter().any(|e| matches!(
        e,
        Event::CandidateFinished {
            duplicate_of: Some(CandidateId(1)),
            ..
        }
    )));
}

#[test]
fn a_candidate_is_evaluated_as_soon_as_its_proposal_arrives() {
    let answers = vec![
        (now(), Ok("def kernel_function(): return 'ms=5'")),
        (
            When::After(Duration::from_millis(300)),
            Ok("def kernel_function(): return 'ms=4'"),
        ),
    ];
    let (_, events) = run(Scenario {
        devices: 2,
        search: beam(1, 2, 1),
        initial: "# ms=8",
        answers,
        panicking_device: None,
        ..Scenario::default()
    });
    let position = |wanted: &dyn Fn(&Event) -> bool| events.iter().position(wanted).unwrap();
    let first_evaluated = position(&|e| {
        matches!(
            e,
            Event::CandidateFinished {
                candidate: CandidateId(1),
                ..
            }
        )
    });
    let slow_answered = position(&|e| {
        matches!(
            e,
            Event::ProposalReceived {
                candidate: CandidateId(2),
                ..
            }
        )
    });
    assert!(
        first_evaluated < slow_answered,
        "candidate 1 was evaluated while candidate 2's proposal was pending"
    );
}

#[test]
fn the_replay_running_dry_ends_the_search_when_nothing_is_pending() {
    let answers = vec![(now(), Ok("def kernel_function(): return 'ms=5'"))];
    let (result, events) = run(Scenario {
        devices: 1,
        search: beam(2, 2, 5),
        initial: "# ms=8",
        answers,
        panicking_device: None,
        ..Scenario::default()
    });
    assert_eq!(result.outcome, RunOutcome::Completed);
    assert_eq!(result.reason, "the llm provider has no more proposals");
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, Event::RoundStarted { .. }))
            .count(),
        1
    );
}

#[test]
fn refused_credentials_stop_the_run() {
    let answers = vec![(
        now(),
        Err(LlmError::Auth(
            "401 from the provider: check ANTHROPIC_API_KEY".into(),
        )),
    )];
    let (result, _) = run(Scenario {
        devices: 1,
        search: beam(1, 1, 3),
        initial: "# ms=8",
        answers,
        panicking_device: None,
        ..Scenario::default()
    });
    assert_eq!(result.outcome, RunOutcome::Failed);
    assert!(
        result.reason.contains("refused the credentials"),
        "{}",
        result.reason
    );
}

#[test]
fn greedy_stops_after_rounds_without_improvement() {
    let search = SearchSettings {
        kind: SearchKind::Greedy,
        num_top_kernels: 1,
        num_bottlenecks: 1,
        max_rounds: 10,
        max_no_improvement: Some(2),
        max_candidates: None,
        fan_out: FanOut::default(),
    };
    let answers = vec![
        (now(), Ok("def kernel_function(): return 'ms=5'")),
        (now(), Ok("def kernel_function(): return 'ms=6'")),
        (now(), Ok("def kernel_function(): return 'ms=7'")),
        (now(), Ok("def kernel_function(): return 'ms=1'")),
    ];
    let (result, _) = run(Scenario {
        devices: 1,
        search,
        initial: "# ms=8",
        answers,
        panicking_device: None,
        ..Scenario::default()
    });
    assert_eq!(result.reason, "no faster kernel in 2 rounds");
    assert_eq!(result.best.unwrap().time_ms, 5.0);
}

fn analysis_reply(titles: &[&str]) -> &'static str {
    let bottlenecks: Vec<serde_json::Value> = titles
        .iter()
        .map(|title| {
            serde_json::json!({
                "title": title,
                "causes": [format!("cause of {title}")],
                "fixes": [format!("fix for {title}")],
            })
        })
        .collect();
    let json = serde_json::json!({ "bottlenecks": bottlenecks });
    String::leak(format!(
        "The kernel has these bottlenecks.\n\n```json\n{json:#}\n```\n"
    ))
}

/// (proposal index, bottleneck title) of each optimization prompt made from `parent`.
fn bottlenecks_taken(prompts: &RecordingPrompts, parent: u64) -> Vec<(u32, Option<String>)> {
    let mut taken: Vec<(u32, Option<String>)> = prompts
        .optimizations
        .borrow()
        .iter()
        .filter(|c| c.parent == CandidateId(parent))
        .map(|c| {
            (
                c.proposal_index,
                c.bottleneck.as_ref().map(|b| b.title.clone()),
            )
        })
        .collect();
    taken.sort();
    taken
}

fn analyses_received(events: &[Event]) -> Vec<(u64, u32, u32, Vec<String>)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::AnalysisReceived {
                candidate,
                requested,
                returned,
                bottlenecks,
                ..
            } => Some((
                candidate.0,
                *requested,
                *returned,
                bottlenecks.iter().map(|b| b.title.clone()).collect(),
            )),
            _ => None,
        })
        .collect()
}

fn code(ms: u32) -> Result<&'static str, LlmError> {
    Ok(String::leak(format!(
        "def kernel_function(): return 'ms={ms}'"
    )))
}

#[test]
fn each_proposal_of_a_parent_takes_a_different_bottleneck() {
    let ran = run_recorded(Scenario {
        devices: 2,
        search: beam(1, 3, 2),
        answers: vec![
            (now(), code(9)),
            (now(), code(10)),
            (now(), code(11)),
            (now(), code(12)),
            (now(), code(13)),
            (now(), code(14)),
        ],
        analysis: analysis_reply(&["Too few programs", "Uncoalesced loads", "Low occupancy"]),
        ..Scenario::default()
    });
    assert_eq!(
        ran.result.outcome,
        RunOutcome::Completed,
        "{}",
        ran.result.reason
    );
    let expected: Vec<(u32, Option<String>)> =
        ["Too few programs", "Uncoalesced loads", "Low occupancy"]
            .iter()
            .enumerate()
            .map(|(i, title)| (i as u32, Some(title.to_string())))
            .collect();
    let taken = bottlenecks_taken(&ran.prompts, 0);
    assert_eq!(
        taken.len(),
        6,
        "two rounds of three proposals from the initial kernel"
    );
    assert_eq!(
        taken.iter().step_by(2).cloned().collect::<Vec<_>>(),
        expected
    );
    let first = ran.prompts.optimizations.borrow()[0]
        .bottleneck
        .clone()
        .unwrap();
    assert_eq!(first.causes, vec!["cause of Too few programs"]);
    assert_eq!(first.fixes, vec!["fix for Too few programs"]);
    assert_eq!(
        analyses_received(&ran.events),
        vec![(
            0,
            3,
            3,
            vec![
                "Too few programs".to_string(),
                "Uncoalesced loads".to_string(),
                "Low occupancy".to_string()
            ]
        )],
        "one analysis for the parent, reused in its second round"
    );
    let analysis_requests = ran
        .requests
        .iter()
        .filter(|r| r.kind == RequestKind::Analysis)
        .count();
    assert_eq!(analysis_requests, 1);
    assert_eq!(ran.prompts.analyses.borrow()[0].num_bottlenecks, 3);
}

#[test]
fn fewer_bottlenecks_than_proposals_are_journaled_and_never_reused() {
    let ran = run_recorded(Scenario {
        devices: 1,
        search: beam(1, 3, 1),
        answers: vec![(now(), code(5)), (now(), code(6)), (now(), code(7))],
        analysis: analysis_reply(&["Too few programs"]),
        ..Scenario::default()
    });
    assert_eq!(
        analyses_received(&ran.events),
        vec![(0, 3, 1, vec!["Too few programs".to_string()])]
    );
    assert_eq!(
        bottlenecks_taken(&ran.prompts, 0),
        vec![(0, Some("Too few programs".into())), (1, None), (2, None)]
    );
}

#[test]
fn an_analysis_without_bottlenecks_lets_every_proposal_go_ahead_without_one() {
    let ran = run_recorded(Scenario {
        devices: 1,
        search: beam(1, 2, 1),
        answers: vec![(now(), code(5)), (now(), code(6))],
        ..Scenario::default()
    });
    assert_eq!(ran.result.outcome, RunOutcome::Completed);
    assert_eq!(analyses_received(&ran.events), vec![(0, 2, 0, vec![])]);
    assert_eq!(
        bottlenecks_taken(&ran.prompts, 0),
        vec![(0, None), (1, None)]
    );
    assert_eq!(finished_candidates(&ran.events).len(), 3);
}

fn verifications_of(events: &[Event], candidate: u64) -> Vec<u32> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::StepStarted {
                candidate: c,
                device,
                step: Step::Verify,
                ..
            } if c.0 == candidate => Some(device.0),
            _ => None,
        })
        .collect()
}

#[test]
fn a_failed_verification_is_refined_as_the_same_candidate_at_most_max_refinements_times() {
    let ran = run_recorded(Scenario {
        devices: 2,
        search: beam(1, 1, 1),
        answers: vec![
            (
                now(),
                Ok("def kernel_function(): pass # fail\nATTEMPT = 'first'"),
            ),
            (
                now(),
                Ok("def kernel_function(): pass # fail\nATTEMPT = 'second'"),
            ),
            (
                now(),
                Ok("def kernel_function(): pass # fail\nATTEMPT = 'third'"),
            ),
            (now(), code(1)),
        ],
        max_refinements: 2,
        ..Scenario::default()
    });
    assert_eq!(ran.result.reason, "max_rounds (1) reached");
    assert_eq!(
        verifications_of(&ran.events, 1),
        vec![1, 1, 1],
        "the proposal and two refinements, all on candidate 1's device"
    );
    let attempts: Vec<u32> = ran
        .events
        .iter()
        .filter_map(|e| match e {
            Event::RefinementRequested {
                candidate: CandidateId(1),
                attempt,
                max_refinements: 2,
                error,
                ..
            } => {
                assert_eq!(error, "verification failed: wrong output");
                Some(*attempt)
            }
            _ => None,
        })
        .collect();
    assert_eq!(attempts, vec![1, 2]);
    let kinds: Vec<RequestKind> = ran
        .events
        .iter()
        .filter_map(|e| match e {
            Event::ProposalRequested { kind, .. } => Some(*kind),
            _ => None,
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            RequestKind::Optimize,
            RequestKind::Refine,
            RequestKind::Refine
        ]
    );
    let refined_sources: Vec<(u32, String)> = ran
        .prompts
        .refinements
        .borrow()
        .iter()
        .map(|c| (c.attempt, c.failed_source.text().to_string()))
        .collect();
    assert_eq!(
        refined_sources,
        vec![
            (
                1,
                "def kernel_function(): pass # fail\nATTEMPT = 'first'".to_string()
            ),
            (
                2,
                "def kernel_function(): pass # fail\nATTEMPT = 'second'".to_string()
            ),
        ]
    );
    assert_eq!(
        finished_candidates(&ran.events),
        vec![(0, 0, true), (1, 1, false)],
        "one candidate, finished once; the last code file was never asked for"
    );
}

#[test]
fn a_refinement_that_passes_makes_the_candidate_verified() {
    let (result, events) = run(Scenario {
        search: beam(1, 1, 1),
        answers: vec![
            (now(), Ok("def kernel_function(): pass # fail")),
            (now(), code(2)),
        ],
        max_refinements: 3,
        ..Scenario::default()
    });
    assert_eq!(result.best.unwrap().id, CandidateId(1));
    assert_eq!(verifications_of(&events, 1).len(), 2);
    assert_eq!(
        finished_candidates(&events),
        vec![(0, 0, true), (1, 0, true)]
    );
}

#[test]
fn a_crash_is_not_refined() {
    let (_, events) = run(Scenario {
        search: beam(1, 1, 1),
        answers: vec![(now(), Ok("def kernel_function(): pass # crash"))],
        max_refinements: 3,
        ..Scenario::default()
    });
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Event::RefinementRequested { .. }))
    );
    assert_eq!(
        finished_candidates(&events),
        vec![(0, 0, true), (1, 0, false)]
    );
}

#[test]
fn a_refinement_when_the_provider_runs_dry_ends_the_candidate_with_its_failure() {
    let (result, events) = run(Scenario {
        search: beam(1, 1, 3),
        answers: vec![(now(), Ok("def kernel_function(): pass # fail"))],
        max_refinements: 3,
        ..Scenario::default()
    });
    assert_eq!(result.reason, "the llm provider has no more proposals");
    let reason = events.iter().find_map(|e| match e {
        Event::CandidateFinished {
            candidate: CandidateId(1),
            reason,
            ..
        } => reason.clone(),
        _ => None,
    });
    assert_eq!(
        reason.as_deref(),
        Some(
            "verification failed: wrong output (refinement 1 was not answered: the llm provider is exhausted)"
        )
    );
}

#[test]
fn reflexions_reach_later_prompts() {
    let ran = run_recorded(Scenario {
        search: beam(1, 2, 2),
        answers: vec![
            (now(), code(5)),
            // Candidate 2 arrives once candidate 1's lesson is in: the round's end, and so
            // round 2's prompts, come after it.
            (When::AfterALesson, Ok("def kernel_function(): pass # fail")),
            (now(), code(4)),
            (now(), code(3)),
        ],
        reflexions: Reflexions::Lessons,
        ..Scenario::default()
    });
    assert_eq!(
        ran.result.outcome,
        RunOutcome::Completed,
        "{}",
        ran.result.reason
    );
    let optimizations = ran.prompts.optimizations.borrow();
    let (round_1, round_2): (Vec<&ProposalContext>, Vec<&ProposalContext>) =
        optimizations.iter().partition(|c| c.round == 1);
    assert!(round_1.iter().all(|c| c.recent_lessons.is_empty()));
    assert_eq!(round_2.len(), 2);
    for context in round_2 {
        let lesson = context
            .recent_lessons
            .iter()
            .find(|l| l.candidate == CandidateId(1))
            .expect("candidate 1's lesson");
        assert_eq!(lesson.lesson, "try: lesson of candidate 1");
        assert_eq!(lesson.outcome, AttemptOutcome::Verified { time_ms: 5.0 });
    }
    let reflected: Vec<(u64, AttemptOutcome)> = ran
        .prompts
        .reflexions
        .borrow()
        .iter()
        .map(|c| (c.candidate.0, c.outcome.clone()))
        .collect();
    assert!(reflected.contains(&(
        2,
        AttemptOutcome::Failed {
            reason: "verification failed: wrong output".into()
        }
    )));
}

#[test]
fn empty_reflexions_add_no_lesson() {
    let ran = run_recorded(Scenario {
        search: beam(1, 1, 3),
        answers: vec![(now(), code(5)), (now(), code(4)), (now(), code(3))],
        ..Scenario::default()
    });
    assert_eq!(ran.result.outcome, RunOutcome::Completed);
    assert!(
        ran.events
            .iter()
            .any(|e| matches!(e, Event::ReflexionReceived { lesson: None, .. }))
    );
    assert!(
        ran.prompts
            .optimizations
            .borrow()
            .iter()
            .all(|c| c.recent_lessons.is_empty())
    );
}

#[test]
fn the_round_does_not_wait_for_reflexions() {
    let (result, events) = run(Scenario {
        search: beam(1, 1, 2),
        answers: vec![(now(), code(5)), (now(), code(4))],
        reflexions: Reflexions::LessonsAfterARound,
        ..Scenario::default()
    });
    assert_eq!(result.outcome, RunOutcome::Completed, "{}", result.reason);
    let position = |wanted: &dyn Fn(&Event) -> bool| events.iter().position(wanted);
    let first_round_finished =
        position(&|e| matches!(e, Event::RoundFinished(summary) if summary.round == 1)).unwrap();
    let first_reflexion_requested = position(&|e| {
        matches!(
            e,
            Event::ReflexionRequested {
                candidate: CandidateId(1),
                ..
            }
        )
    })
    .unwrap();
    assert!(first_reflexion_requested < first_round_finished);
    if let Some(answered) = position(&|e| {
        matches!(
            e,
            Event::ReflexionReceived {
                candidate: CandidateId(1),
                ..
            }
        )
    }) {
        assert!(first_round_finished < answered);
    }
}

fn steady(search: SearchSettings, max_inflight: usize) -> Scenario {
    Scenario {
        devices: 2,
        search,
        pacing: Pacing::Steady { max_inflight },
        max_inflight,
        ..Scenario::default()
    }
}

/// (candidate, round) of each finished proposal, in candidate order.
fn rounds_of_candidates(events: &[Event]) -> Vec<(u64, u32)> {
    let mut rounds: Vec<(u64, u32)> = events
        .iter()
        .filter_map(|e| match e {
            Event::CandidateFinished {
                candidate, round, ..
            } if *candidate != CandidateId::INITIAL => Some((candidate.0, *round)),
            _ => None,
        })
        .collect();
    rounds.sort();
    rounds
}

#[test]
fn a_steady_search_keeps_max_inflight_proposals_asked_for() {
    // Each answer waits until two more requests for code have reached the provider (the last
    // ones until the sixth has): only a search that asks for the next candidate as soon as an
    // answer comes gets through, and then always with three requests out.
    let answers = (1..=6)
        .map(|k| (When::OnceRequested((k + 2).min(6)), code(10 + k as u32)))
        .collect();
    let ran = run_recorded(Scenario {
        answers,
        ..steady(beam(1, 2, 3), 3)
    });
    assert_eq!(
        ran.result.outcome,
        RunOutcome::Completed,
        "{}",
        ran.result.reason
    );
    assert_eq!(ran.result.reason, "max_rounds (3) reached");
    assert_eq!(ran.peak_code_requests, 3);
    let code_requests = ran
        .requests
        .iter()
        .filter(|r| r.kind == RequestKind::Optimize)
        .count();
    assert_eq!(code_requests, 6, "max_rounds × N × M candidates");
    assert_eq!(
        rounds_of_candidates(&ran.events),
        vec![(1, 1), (2, 1), (3, 2), (4, 2), (5, 3), (6, 3)]
    );
    let finished_rounds: Vec<u32> = ran
        .events
        .iter()
        .filter_map(|e| match e {
            Event::RoundFinished(summary) => Some(summary.round),
            _ => None,
        })
        .collect();
    assert_eq!(finished_rounds, vec![1, 2, 3]);
    assert_eq!(
        analyses_received(&ran.events).len(),
        1,
        "the initial kernel is analysed once though three proposals waited for it"
    );
}

#[test]
fn in_a_steady_search_a_free_device_takes_the_next_candidate() {
    // The slow candidate holds its device until three others have finished; they can only
    // finish on the other device, each proposal arriving once the one before it is done.
    let answers = vec![
        (now(), Ok("def kernel_function(): pass # slow # ms=11")),
        (When::OnceVerifying(2), code(12)),
        (When::OnceFinished(2), code(13)),
        (When::OnceFinished(3), code(14)),
    ];
    let (result, events) = run(Scenario {
        answers,
        ..steady(beam(1, 2, 2), 16)
    });
    assert_eq!(result.outcome, RunOutcome::Completed, "{}", result.reason);
    let finished: Vec<(u64, u32, Option<f64>)> = events
        .iter()
        .filter_map(|e| match e {
            Event::CandidateFinished {
                candidate,
                device,
                time_ms,
                ..
            } if *candidate != CandidateId::INITIAL => Some((candidate.0, device.0, *time_ms)),
            _ => None,
        })
        .collect();
    assert_eq!(finished.len(), 4, "{finished:?}");
    let (_, slow_device, slow_ms) = finished[3];
    assert_eq!(slow_ms, Some(11.0), "the slow candidate finished last");
    assert!(
        finished[..3]
            .iter()
            .all(|(_, device, _)| *device != slow_device),
        "{finished:?}"
    );
}

#[test]
fn a_steady_search_ends_when_the_provider_runs_dry() {
    let answers = vec![(now(), code(5)), (now(), code(6)), (now(), code(7))];
    let (result, events) = run(Scenario {
        answers,
        ..steady(beam(2, 2, 5), 4)
    });
    assert_eq!(result.outcome, RunOutcome::Completed);
    assert_eq!(result.reason, "the llm provider has no more proposals");
    assert_eq!(rounds_of_candidates(&events).len(), 3);
    let count = |wanted: &dyn Fn(&Event) -> bool| events.iter().filter(|e| wanted(e)).count();
    assert_eq!(
        count(&|e| matches!(e, Event::RoundStarted { .. })),
        count(&|e| matches!(e, Event::RoundFinished { .. })),
        "every round started is finished"
    );
    assert_eq!(result.best.unwrap().time_ms, 5.0);
}

/// Every `*_requested` record of the journal, each paired with whether a `*_received` for the
/// same request id follows it before `run_finished`.
fn unanswered_requests(events: &[Event]) -> Vec<String> {
    let finished = events
        .iter()
        .position(|e| matches!(e, Event::RunFinished { .. }))
        .unwrap_or(events.len());
    let mut open: Vec<String> = Vec::new();
    for event in &events[..finished] {
        match event {
            Event::ProposalRequested { request_id, .. }
            | Event::AnalysisRequested { request_id, .. }
            | Event::ReflexionRequested { request_id, .. } => open.push(request_id.clone()),
            Event::ProposalReceived { request_id, .. }
            | Event::AnalysisReceived { request_id, .. }
            | Event::ReflexionReceived { request_id, .. } => open.retain(|id| id != request_id),
            _ => {}
        }
    }
    open
}

#[test]
fn a_full_disk_stops_the_run_as_failed_naming_the_file_and_starts_nothing_new() {
    let answers = (0..8).map(|k| (now(), code(10 + k))).collect();
    let ran = run_recorded(Scenario {
        search: beam(1, 2, 4),
        answers,
        store: StoreFault::FullAfter(6),
        ..Scenario::default()
    });
    assert_eq!(ran.result.outcome, RunOutcome::Failed);
    assert_eq!(
        ran.result.reason,
        "failed to write the journal: /run/journal.jsonl: No space left on device (os error 28)"
    );
    assert_eq!(ran.events.len(), 6, "nothing is journaled past the failure");
    assert!(
        ran.requests.len() < 8,
        "new work stops at the first failed write: {} requests",
        ran.requests.len()
    );
}

#[test]
fn a_writer_thread_that_dies_stops_the_run_and_says_why() {
    let ran = run_recorded(Scenario {
        search: beam(1, 2, 4),
        answers: (0..8).map(|k| (now(), code(10 + k))).collect(),
        store: StoreFault::PanicAfter(4),
        ..Scenario::default()
    });
    assert_eq!(ran.result.outcome, RunOutcome::Failed);
    assert_eq!(
        ran.result.reason,
        "the collector's writer thread died: a deliberate panic on the writer thread"
    );
}

#[test]
fn a_manager_that_dies_ends_the_run_as_failed_with_the_best_kernel_kept() {
    let ran = run_recorded(Scenario {
        answers: vec![(now(), code(5))],
        panicking_manager: true,
        ..Scenario::default()
    });
    assert_eq!(ran.result.outcome, RunOutcome::Failed);
    assert!(
        ran.result
            .reason
            .starts_with("the manager died: a deliberate panic inside the manager (at "),
        "{}",
        ran.result.reason
    );
    match ran.events.last() {
        Some(Event::RunFinished {
            outcome: RunOutcome::Failed,
            best_candidate: Some(CandidateId::INITIAL),
            best_ms: Some(8.0),
            ..
        }) => {}
        other => panic!("the journal ends with run_finished, failed, naming the best: {other:?}"),
    }
    assert_eq!(ran.best_written, vec!["# ms=8".to_string()]);
}

#[test]
fn best_kernel_py_is_rewritten_whenever_the_best_changes() {
    // Candidates 1 to 3 answer at once and evaluate one after another on one device, in an
    // order the run does not promise; best_kernel.py follows each improvement as it comes.
    let ran = run_recorded(Scenario {
        search: beam(1, 3, 1),
        answers: vec![(now(), code(5)), (now(), code(6)), (now(), code(4))],
        ..Scenario::default()
    });
    assert_eq!(
        ran.result.outcome,
        RunOutcome::Completed,
        "{}",
        ran.result.reason
    );
    let times: Vec<f64> = ran
        .best_written
        .iter()
        .map(|source| judge(&KernelSource::new(source.as_str())).1)
        .collect();
    let (last, improvements) = times.split_last().unwrap();
    assert_eq!(improvements.first(), Some(&8.0), "the initial kernel first");
    assert!(
        improvements.windows(2).all(|pair| pair[1] < pair[0]),
        "each rewrite is an improvement: {times:?}"
    );
    assert_eq!(improvements.last(), Some(&4.0));
    assert_eq!(*last, 4.0, "and the best once more at the end: {times:?}");
}

#[test]
fn a_first_round_in_which_no_llm_request_succeeded_fails_the_run() {
    let failed = || {
        (
            now(),
            Err(LlmError::Failed(
                "gave up after 6 attempts: connection refused (http://127.0.0.1:9/v1)".into(),
            )),
        )
    };
    let (result, events) = run(Scenario {
        search: beam(1, 2, 5),
        answers: vec![failed(), failed()],
        ..Scenario::default()
    });
    assert_eq!(result.outcome, RunOutcome::Failed);
    assert_eq!(
        result.reason,
        "no LLM request succeeded: gave up after 6 attempts: connection refused (http://127.0.0.1:9/v1)"
    );
    assert_eq!(result.best.unwrap().id, CandidateId::INITIAL);
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Event::RoundStarted { round: 2, .. })),
        "the run stops after its first round"
    );
}

#[test]
fn a_run_that_got_answers_and_then_lost_the_server_completes() {
    let failed = || (now(), Err(LlmError::Failed("connection refused".into())));
    let (result, _) = run(Scenario {
        search: beam(1, 2, 2),
        answers: vec![(now(), code(5)), failed(), failed(), failed()],
        ..Scenario::default()
    });
    assert_eq!(result.outcome, RunOutcome::Completed, "{}", result.reason);
}

#[test]
fn a_finished_journal_answers_every_request_and_asks_no_reflexion_of_the_last_round() {
    let ran = run_recorded(Scenario {
        search: beam(1, 2, 2),
        answers: (0..4).map(|k| (now(), code(5 + k))).collect(),
        reflexions: Reflexions::LessonsAfterARound,
        ..Scenario::default()
    });
    assert_eq!(
        ran.result.outcome,
        RunOutcome::Completed,
        "{}",
        ran.result.reason
    );
    assert_eq!(unanswered_requests(&ran.events), Vec::<String>::new());
    let reflected: Vec<u32> = ran
        .events
        .iter()
        .filter_map(|e| match e {
            Event::ReflexionRequested { round, .. } => Some(*round),
            _ => None,
        })
        .collect();
    assert_eq!(
        reflected,
        [1, 1],
        "round 2 is the last: its lessons reach no prompt"
    );
}

#[test]
fn an_interrupt_journals_every_outstanding_request_as_cancelled() {
    let ran = run_recorded(Scenario {
        devices: 2,
        search: beam(1, 3, 2),
        answers: vec![
            (now(), code(5)),
            (When::After(Duration::from_secs(30)), code(6)),
            (When::After(Duration::from_secs(30)), code(7)),
        ],
        interrupt_after: Some(2),
        ..Scenario::default()
    });
    assert_eq!(ran.result.outcome, RunOutcome::Interrupted);
    assert_eq!(unanswered_requests(&ran.events), Vec::<String>::new());
    let cancelled: Vec<u64> = ran
        .events
        .iter()
        .filter_map(|e| match e {
            Event::ProposalReceived {
                candidate,
                outcome,
                error: Some(error),
                ..
            } if *outcome == actors::journal::ReplyOutcome::Cancelled => {
                assert!(
                    error.starts_with(
                        "cancelled: the run ended before the reply came (interrupted by SIGINT)"
                    ),
                    "{error}"
                );
                Some(candidate.0)
            }
            _ => None,
        })
        .collect();
    assert_eq!(cancelled, [2, 3]);
}

#[test]
fn a_child_that_fails_for_a_full_disk_stops_the_run_and_fails_no_candidate() {
    let (result, events) = run(Scenario {
        search: beam(1, 2, 3),
        answers: vec![
            (now(), Ok("def kernel_function(): pass # enospc")),
            (now(), code(5)),
        ],
        ..Scenario::default()
    });
    assert_eq!(result.outcome, RunOutcome::Failed);
    assert!(
        result.reason.starts_with(
            "the disk is full: the evaluation of candidate 1 failed with evaluator crashed: OSError: [Errno 28] No space left on device"
        ),
        "{}",
        result.reason
    );
    assert!(
        !events.iter().any(|e| matches!(
            e,
            Event::CandidateFinished {
                candidate: CandidateId(1),
                ..
            } | Event::Evaluated {
                candidate: CandidateId(1),
                ..
            }
        )),
        "candidate 1 is left in flight, not failed"
    );
}

#[test]
fn a_proposal_that_differs_only_in_comments_and_spacing_is_a_duplicate() {
    let (_, events) = run(Scenario {
        search: beam(1, 2, 1),
        answers: vec![
            (now(), Ok("def kernel_function():\n    return 'ms=5'\n")),
            (
                now(),
                Ok(
                    "# the same kernel, tidied\n\ndef kernel_function():  # fast\n    return 'ms=5'   \n\n",
                ),
            ),
        ],
        ..Scenario::default()
    });
    let mut duplicates: Vec<(u64, Option<u64>)> = events
        .iter()
        .filter_map(|e| match e {
            Event::CandidateFinished {
                candidate,
                duplicate_of,
                ..
            } if *candidate != CandidateId::INITIAL => {
                Some((candidate.0, duplicate_of.map(|d| d.0)))
            }
            _ => None,
        })
        .collect();
    duplicates.sort();
    assert_eq!(duplicates, [(1, None), (2, Some(1))]);
}

/// The rounds a report.md's Rounds table has a row for.
fn rounds_in_report(markdown: &str) -> Vec<u32> {
    let rounds = markdown
        .split("## Rounds")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .unwrap_or_default();
    rounds
        .lines()
        .filter_map(|line| line.strip_prefix("| ")?.split(" |").next()?.parse().ok())
        .collect()
}

/// Each report written: the rounds its table shows, whether it is the finished run's, and
/// whether its page has the plots.
fn reports_written(ran: &Ran) -> Vec<(Vec<u32>, bool, bool)> {
    ran.reports
        .iter()
        .map(|(markdown, html)| {
            (
                rounds_in_report(markdown),
                markdown.contains("Outcome: **completed**"),
                html.matches("<svg").count() == 4,
            )
        })
        .collect()
}

/// Issue 24: a report costs what the run holds so far, so three rounds within a minute rewrite
/// it after the first (a live report at once) and at the end only.
/// The first rewrite comes after the first round and the last at the end; between them the
/// report's pace (its size, and how much time passed) decides, so a loaded machine may see more.
fn assert_rewritten_after_the_first_round_and_at_the_end(ran: &Ran) {
    let written = assert_rewritten_at_the_end(ran);
    assert_eq!(
        written.first(),
        Some(&(vec![1], false, true)),
        "{written:?}"
    );
}

/// The run completed, its report's last rewrite came at the end, and no rewrite showed fewer
/// rounds than the one before: every rewrite, in order.
fn assert_rewritten_at_the_end(ran: &Ran) -> Vec<(Vec<u32>, bool, bool)> {
    assert_eq!(ran.result.outcome, RunOutcome::Completed);
    let written = reports_written(ran);
    assert!(written.len() >= 2, "{written:?}");
    assert_eq!(
        written.last(),
        Some(&(vec![1, 2, 3], true, true)),
        "{written:?}"
    );
    assert!(
        written
            .windows(2)
            .all(|pair| pair[0].0.len() <= pair[1].0.len()),
        "{written:?}"
    );
    written
}

#[test]
fn the_report_is_rewritten_after_the_first_round_paced_by_its_size_then_and_at_the_end() {
    let ran = run_recorded(Scenario {
        search: beam(1, 1, 3),
        answers: vec![(now(), code(5)), (now(), code(4)), (now(), code(3))],
        ..Scenario::default()
    });
    assert_rewritten_after_the_first_round_and_at_the_end(&ran);
    assert!(
        ran.reports[0].0.contains("Still going, or killed"),
        "{}",
        ran.reports[0].0
    );
}

/// Steady search rewrites it at its first virtual round's end, or sooner once more than N × M
/// candidates finished (a round may stay open behind a late candidate, as README says), then
/// as its size paces it, and at the end.
#[test]
fn a_steady_search_rewrites_the_report_at_virtual_round_ends_like_rounds() {
    let answers = (1..=6).map(|k| (now(), code(10 + k as u32))).collect();
    let ran = run_recorded(Scenario {
        answers,
        ..steady(beam(1, 2, 3), 3)
    });
    assert_rewritten_at_the_end(&ran);
}

/// The code a request for code gets, from its id alone: a time between 1 and 9 ms, and one
/// request in five fails verification (so refinements are asked for).
fn code_of_request(request_id: &str) -> String {
    let hash = request_id.bytes().fold(7u32, |hash, byte| {
        hash.wrapping_mul(31).wrapping_add(u32::from(byte))
    });
    if hash % 5 == 0 {
        format!("def kernel_function(): pass # fail {request_id}")
    } else {
        format!(
            "def kernel_function(): return 'ms={}' # {request_id}",
            1 + hash % 9
        )
    }
}

/// Two devices, refinements and lessons, answers by request: a run a resume can repeat.
fn resumable(search: SearchSettings, pacing: Pacing) -> Scenario {
    Scenario {
        devices: 2,
        search,
        pacing,
        max_refinements: 1,
        reflexions: Reflexions::Lessons,
        answer_by_request: Some(code_of_request),
        ..Scenario::default()
    }
}

/// What a run found: each candidate's end (passed, time), the best, the final beam.
#[derive(Debug, PartialEq)]
struct Findings {
    ends: Vec<(u64, bool, Option<String>)>,
    best: Option<u64>,
    beam: Vec<u64>,
}

fn findings(ran: &Ran) -> Findings {
    let mut ends: Vec<(u64, bool, Option<String>)> = ran
        .events
        .iter()
        .filter_map(|event| match event {
            Event::CandidateFinished {
                candidate,
                passed,
                time_ms,
                ..
            } => Some((candidate.0, *passed, time_ms.map(|ms| format!("{ms:.4}")))),
            _ => None,
        })
        .collect();
    ends.sort_by_key(|end| end.0);
    let best = ran.result.best.as_ref().map(|kernel| kernel.id.0);
    let beam = ran
        .result
        .search
        .as_ref()
        .map(|state| state.beam().iter().map(|kernel| kernel.id.0).collect())
        .unwrap_or_default();
    Findings { ends, best, beam }
}

fn assert_no_answered_request_is_sent_again(at: &str, before: &[JournalRecord], resumed: &Ran) {
    let answered: Vec<&str> = before
        .iter()
        .filter_map(|record| match &record.event {
            Event::ProposalReceived { request_id, .. }
            | Event::AnalysisReceived { request_id, .. }
            | Event::ReflexionReceived { request_id, .. } => Some(request_id.as_str()),
            _ => None,
        })
        .collect();
    for request in &resumed.requests {
        assert!(
            !answered.contains(&request.request_id.as_str()),
            "{at}: request {} was answered before and sent again",
            request.request_id
        );
    }
}

/// Issue 13: a process that dies at any record, resumed from the records it journaled, ends as
/// the run left alone: the same candidates with the same results, the same best kernel and
/// beam; nothing with a result in the journal is evaluated again, and no answered request is
/// sent again.
#[test]
fn a_run_resumed_after_a_death_at_any_record_ends_as_the_run_left_alone() {
    let scenario = || resumable(beam(2, 2, 2), Pacing::Rounds);
    let alone = run_recorded(scenario());
    assert_eq!(alone.result.outcome, RunOutcome::Completed);
    let expected = findings(&alone);
    assert!(
        expected.ends.iter().any(|end| !end.1) && expected.ends.len() > 5,
        "the scenario has failures and several candidates: {expected:?}"
    );
    for death in 1..alone.records.len() {
        let before = &alone.records[..death];
        let resumed = run_recorded(Scenario {
            resume_from: Some(before.to_vec()),
            ..scenario()
        });
        let at = format!(
            "died before record {death} ({:?})",
            alone.records[death].event
        );
        assert_eq!(resumed.result.outcome, RunOutcome::Completed, "{at}");
        assert_eq!(findings(&resumed), expected, "{at}");
        let after = &resumed.events[death..];
        let evaluated = |events: &[Event]| -> Vec<(u64, u32)> {
            events
                .iter()
                .filter_map(|event| match event {
                    Event::Evaluated {
                        candidate, attempt, ..
                    } => Some((candidate.0, *attempt)),
                    _ => None,
                })
                .collect()
        };
        for again in evaluated(after) {
            assert!(
                !evaluated(&resumed.events[..death]).contains(&again),
                "{at}: candidate {} attempt {} was evaluated again",
                again.0,
                again.1
            );
        }
        assert_no_answered_request_is_sent_again(&at, before, &resumed);
    }
}

/// Issue 13: steady search depends on the order answers and results arrive in, so a resumed
/// one is held to invariants instead of equality: whatever record the process died at, nothing
/// with a result is evaluated again, no answered request is sent again, the beam holds the
/// fastest verified kernels of every candidate evaluated before and after the death, and the
/// run makes no more candidates than it may.
#[test]
fn a_steady_search_resumed_after_a_death_at_any_record_keeps_its_invariants() {
    let scenario = || resumable(beam(2, 2, 3), Pacing::Steady { max_inflight: 3 });
    let alone = run_recorded(scenario());
    assert_eq!(alone.result.outcome, RunOutcome::Completed);
    let most = 2 * 2 * 3;
    for death in (1..alone.records.len()).step_by(3) {
        let before = &alone.records[..death];
        let resumed = run_recorded(Scenario {
            resume_from: Some(before.to_vec()),
            ..scenario()
        });
        let at = format!("died before record {death}");
        assert_eq!(resumed.result.outcome, RunOutcome::Completed, "{at}");
        let mut evaluated = std::collections::BTreeSet::new();
        let mut times = Vec::new();
        let mut planned = 0;
        for event in &resumed.events {
            match event {
                Event::Evaluated {
                    candidate, attempt, ..
                } => assert!(
                    evaluated.insert((candidate.0, *attempt)),
                    "{at}: candidate {candidate} attempt {attempt} evaluated twice"
                ),
                Event::CandidateFinished {
                    passed: true,
                    time_ms: Some(ms),
                    duplicate_of: None,
                    ..
                } => times.push(*ms),
                Event::CandidatePlanned { .. } => planned += 1,
                _ => {}
            }
        }
        assert!(planned <= most, "{at}: {planned} candidates planned");
        times.sort_by(f64::total_cmp);
        let mut beam: Vec<f64> = resumed
            .result
            .search
            .as_ref()
            .map(|state| state.beam().iter().map(|kernel| kernel.time_ms).collect())
            .unwrap_or_default();
        beam.sort_by(f64::total_cmp);
        assert_eq!(
            beam,
            times[..beam.len()],
            "{at}: the beam is not the fastest"
        );
        assert_eq!(beam.len(), 2.min(times.len()), "{at}");
        assert_no_answered_request_is_sent_again(&at, before, &resumed);
    }
}

fn time_limit(remaining_ms: u64, finale_reserve_ms: u64) -> TimeLimit {
    TimeLimit {
        label: format!("{remaining_ms}ms"),
        remaining: Duration::from_millis(remaining_ms),
        evaluation_grace: Duration::from_millis(300),
        finale_reserve: Duration::from_millis(finale_reserve_ms),
        exit_margin: Duration::from_millis(200),
    }
}

/// Issue 13: with max_time, proposals stop early enough for the evaluations' grace, the finale
/// and the exit; the run ends as planned, by the limit, with the limit as its reason.
#[test]
fn max_time_stops_the_search_in_time_for_the_finale_and_ends_it_as_planned() {
    let started = std::time::Instant::now();
    let ran = run_recorded(Scenario {
        search: beam(1, 2, 5),
        answers: vec![(When::After(Duration::from_secs(60)), Ok("# ms=1")); 2],
        time_limit: Some(time_limit(1500, 300)),
        ..Scenario::default()
    });
    let took = started.elapsed();
    assert_eq!(ran.result.outcome, RunOutcome::Completed);
    assert_eq!(ran.result.reason, "max_time (1500ms) reached");
    assert!(took < Duration::from_millis(1500), "the run took {took:?}");
    let limits: Vec<bool> = ran
        .events
        .iter()
        .filter_map(|event| match event {
            Event::LimitReached {
                limit,
                evaluations_cancelled,
                ..
            } if limit == "max_time" => Some(*evaluations_cancelled),
            _ => None,
        })
        .collect();
    assert_eq!(limits, [false]);
    let cancelled = ran.events.iter().filter(|event| {
        matches!(event, Event::ProposalReceived { error: Some(error), .. } if error.contains("max_time (1500ms) reached"))
    });
    assert_eq!(
        cancelled.count(),
        2,
        "both proposals in flight were cancelled"
    );
    assert!(
        ran.events
            .iter()
            .any(|event| matches!(event, Event::FinalTimed { .. })),
        "the finale ran"
    );
}

/// Issue 24: a run that ends while its initial kernel is on the device (a limit already
/// reached at the start) stops that worker itself: no `worker_died`, and `run_finished` is
/// the journal's last record.
#[test]
fn a_worker_the_run_stops_at_its_end_did_not_die_and_nothing_follows_run_finished() {
    let ran = run_recorded(Scenario {
        search: beam(1, 2, 5),
        time_limit: Some(time_limit(0, 300)),
        ..Scenario::default()
    });
    assert_eq!(ran.result.outcome, RunOutcome::Completed);
    assert!(
        !ran.events
            .iter()
            .any(|event| matches!(event, Event::WorkerDied { .. })),
        "{:?}",
        ran.events
    );
    assert!(
        matches!(
            ran.records.last().map(|record| &record.event),
            Some(Event::RunFinished { .. })
        ),
        "{:?}",
        ran.records.last()
    );
}

/// Whoever the Collector reports a failed write to, in a test that expects none.
struct NoOneListens;

impl Actor for NoOneListens {
    type Context = actix::Context<Self>;
}

impl actix::Handler<actors::collector::RecordsFailed> for NoOneListens {
    type Result = ();

    fn handle(&mut self, failed: actors::collector::RecordsFailed, _: &mut Self::Context) {
        panic!("no write fails here: {}", failed.message);
    }
}

/// Issue 24: `run_finished` is the journal's last record: the Collector refuses whatever comes
/// after it (here a late `worker_died` and a second end).
#[test]
fn the_collector_journals_nothing_after_run_finished() {
    use actors::collector::{Collector, FinishRun, Record, ReportSettings};
    let journal: Journal = Arc::default();
    let store = MemoryStore {
        journal: journal.clone(),
        milestones: Milestones::new(),
        fault: StoreFault::None,
        best: Arc::default(),
        reports: Arc::default(),
    };
    let finished = || Event::RunFinished {
        outcome: RunOutcome::Completed,
        reason: "max_rounds (1) reached".into(),
        best_candidate: None,
        best_ms: None,
        initial_ms: None,
        resume: None,
    };
    actix::System::new().block_on(async move {
        let collector = Collector::new(
            Box::new(store),
            Box::new(Silent),
            Arc::new(WallClock),
            ReportSettings {
                every: None,
                resume_command: None,
            },
            NoOneListens.start().recipient(),
        )
        .start();
        let finish = |event| FinishRun {
            event,
            best_source: None,
        };
        collector.send(finish(finished())).await.unwrap().unwrap();
        collector.do_send(Record(Event::WorkerDied {
            device: DeviceId(0),
            candidate: Some(CandidateId(1)),
            reason: "late".into(),
        }));
        // Answered once everything sent before it was handled.
        collector.send(finish(finished())).await.unwrap().unwrap();
    });
    let events: Vec<Event> = journal
        .lock()
        .unwrap()
        .iter()
        .map(|record| record.event.clone())
        .collect();
    assert_eq!(
        events,
        [Event::RunDirMeasured { bytes: 0 }, finished()],
        "the end measures the run directory, then journals run_finished, once"
    );
}

/// Issue 13: a finale that would not end by max_time is skipped, and the reason says so: a
/// resumed run whose earlier processes spent nearly all of max_time.
#[test]
fn a_finale_that_would_not_fit_in_max_time_is_skipped_and_said_so() {
    let scenario = || Scenario {
        search: beam(1, 1, 3),
        answer_by_request: Some(code_of_request),
        ..Scenario::default()
    };
    let alone = run_recorded(scenario());
    let first_round = alone
        .records
        .iter()
        .position(|record| matches!(record.event, Event::RoundFinished { .. }))
        .expect("a round finished");
    let started = std::time::Instant::now();
    let ran = run_recorded(Scenario {
        resume_from: Some(alone.records[..=first_round].to_vec()),
        time_limit: Some(time_limit(1000, 1500)),
        ..scenario()
    });
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(ran.result.outcome, RunOutcome::Completed);
    assert_eq!(
        ran.result.reason,
        "max_time (1000ms) reached; the finale was skipped: it would not end by max_time"
    );
    assert!(
        !ran.events
            .iter()
            .any(|event| matches!(event, Event::FinalTimed { .. })),
        "no finale"
    );
}
