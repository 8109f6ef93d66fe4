//! The runtime end to end with fake ports: no process, no disk, no network.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use actix::Actor;
use actors::journal::{Event, JournalRecord, RunOutcome, Step};
use actors::manager::ManagerSettings;
use actors::model::{
    CandidateId, DeviceId, KernelSource, Provenance, TimeOutcome, Timing, Verdict, VerifyOutcome,
};
use actors::ports::*;
use actors::search::{SearchKind, SearchSettings};
use actors::supervisor::{RunIo, RunPlan, RunResult, Supervisor, WorkPorts};
use tokio::sync::oneshot;

type Journal = Arc<Mutex<Vec<JournalRecord>>>;

struct MemoryStore(Journal);

impl RunStore for MemoryStore {
    fn append(&mut self, record: &JournalRecord) -> std::io::Result<()> {
        self.0.lock().unwrap().push(record.clone());
        Ok(())
    }
    fn create_candidate_folder(&mut self, id: CandidateId) -> std::io::Result<PathBuf> {
        Ok(PathBuf::from(format!("/run/candidates/{id}")))
    }
    fn write_candidate_file(&mut self, _: CandidateId, _: &str, _: &str) -> std::io::Result<()> {
        Ok(())
    }
    fn write_best_kernel(&mut self, _: &str) -> std::io::Result<()> {
        Ok(())
    }
    fn write_report(&mut self, _: &str) -> std::io::Result<()> {
        Ok(())
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

/// Times come from the source: `# ms=1.5`; `# fail` fails verification.
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
        .split("# ms=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(10.0);
    (
        Verdict::Passed {
            max_abs_err: 0.0,
            max_rel_err: 0.0,
        },
        ms,
    )
}

struct FakeEvaluator {
    panic_on_verify: bool,
}

impl DeviceEvaluator for FakeEvaluator {
    fn verify<'a>(
        &'a mut self,
        job: &'a EvalJob,
    ) -> LocalFuture<'a, Result<VerifyOutcome, EvalError>> {
        Box::pin(async move {
            tokio::task::yield_now().await;
            if self.panic_on_verify {
                panic!("a deliberate panic inside the worker's handler");
            }
            Ok(VerifyOutcome {
                verdict: judge(&job.source).0,
                provenance: Provenance::Measured,
                launched_kernels: vec!["fake_kernel".into()],
            })
        })
    }
    fn time<'a>(&'a mut self, job: &'a EvalJob) -> LocalFuture<'a, Result<TimeOutcome, EvalError>> {
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
            })
        })
    }
    fn shutdown(&mut self) -> LocalFuture<'_, ()> {
        Box::pin(async {})
    }
}

/// The first evaluator started for `panicking_device` panics on its first verification.
struct FakeFactory {
    panicking_device: Option<DeviceId>,
    started: RefCell<HashMap<DeviceId, u32>>,
}

impl EvaluatorFactory for FakeFactory {
    fn start(&self, device: DeviceId) -> Box<dyn DeviceEvaluator> {
        let mut started = self.started.borrow_mut();
        let count = started.entry(device).or_insert(0);
        *count += 1;
        Box::new(FakeEvaluator {
            panic_on_verify: Some(device) == self.panicking_device && *count == 1,
        })
    }
}

/// Answers with scripted sources, each after its own delay, then "exhausted".
struct ScriptedLlm {
    answers: RefCell<VecDeque<(Duration, Result<&'static str, LlmError>)>>,
    requests: Cell<u32>,
}

impl LlmProvider for ScriptedLlm {
    fn complete(self: Rc<Self>, _: LlmRequest) -> LocalFuture<'static, Result<LlmReply, LlmError>> {
        self.requests.set(self.requests.get() + 1);
        let next = self.answers.borrow_mut().pop_front();
        Box::pin(async move {
            let Some((delay, answer)) = next else {
                return Err(LlmError::Exhausted);
            };
            tokio::time::sleep(delay).await;
            let code = answer?;
            Ok(LlmReply {
                text: code.into(),
                code: Some(KernelSource::new(code)),
                truncated: false,
                usage: None,
                cost_usd: None,
            })
        })
    }
}

struct PlainPrompts;
impl PromptBuilder for PlainPrompts {
    fn optimization(&self, context: &ProposalContext) -> Result<(String, String), String> {
        Ok((
            "system".into(),
            format!("improve candidate {}", context.parent),
        ))
    }
}

struct Scenario {
    devices: u32,
    search: SearchSettings,
    initial: &'static str,
    answers: Vec<(Duration, Result<&'static str, LlmError>)>,
    panicking_device: Option<DeviceId>,
}

fn beam(n: u32, m: u32, rounds: u32) -> SearchSettings {
    SearchSettings {
        kind: SearchKind::Beam,
        num_top_kernels: n,
        num_bottlenecks: m,
        max_rounds: rounds,
        max_no_improvement: None,
    }
}

fn now() -> Duration {
    Duration::ZERO
}

fn run(scenario: Scenario) -> (RunResult, Vec<Event>) {
    let journal: Journal = Arc::default();
    let io = RunIo {
        store: Box::new(MemoryStore(journal.clone())),
        progress: Box::new(Silent),
        clock: Arc::new(WallClock),
        signaller: Box::new(NoSignals),
    };
    let devices: Vec<DeviceId> = (0..scenario.devices).map(DeviceId).collect();
    let plan = RunPlan {
        started: Event::Interrupted {
            signal: "placeholder for run_started".into(),
        },
        manager: ManagerSettings {
            search: scenario.search,
            devices,
            step_deadline: Duration::from_secs(5),
            profile_parents: false,
        },
        initial_source: KernelSource::new(scenario.initial),
        max_inflight: 16,
        kill_grace: Duration::from_millis(10),
        restart_budget: 2,
    };
    let factory = FakeFactory {
        panicking_device: scenario.panicking_device,
        started: RefCell::default(),
    };
    let llm = ScriptedLlm {
        answers: RefCell::new(scenario.answers.into()),
        requests: Cell::new(0),
    };
    let ports = Box::new(move |_| WorkPorts {
        evaluators: Rc::new(factory),
        profiler: None,
        llm: Rc::new(llm),
        prompts: Rc::new(PlainPrompts),
    });
    let result = actix::System::new().block_on(async move {
        let (sender, receiver) = oneshot::channel();
        Supervisor::new(io, ports, plan, sender).start();
        receiver.await.expect("the supervisor answers")
    });
    let events = journal
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.event.clone())
        .collect();
    (result, events)
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
        (now(), Ok("def kernel_function(): pass # ms=5")),
        (now(), Ok("def kernel_function(): pass # ms=4")),
        (now(), Ok("def kernel_function(): pass # ms=6")),
        (now(), Ok("def kernel_function(): pass # fail")),
    ];
    let (result, events) = run(Scenario {
        devices: 4,
        search: beam(2, 2, 1),
        initial: "# ms=8",
        answers,
        panicking_device: None,
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
fn a_panicking_worker_is_restarted_and_the_run_completes() {
    let answers = vec![
        (now(), Ok("def kernel_function(): pass # ms=5")),
        (now(), Ok("def kernel_function(): pass # ms=4")),
    ];
    let (result, events) = run(Scenario {
        devices: 2,
        search: beam(1, 2, 1),
        initial: "# ms=8",
        answers,
        panicking_device: Some(DeviceId(1)),
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

#[test]
fn an_initial_kernel_that_fails_verification_fails_the_run() {
    let (result, _) = run(Scenario {
        devices: 1,
        search: beam(1, 1, 1),
        initial: "# fail",
        answers: vec![],
        panicking_device: None,
    });
    assert_eq!(result.outcome, RunOutcome::Failed);
    assert_eq!(
        result.reason,
        "the initial kernel failed verification: verification failed: wrong output"
    );
}

#[test]
fn identical_sources_are_evaluated_once() {
    let answers = vec![
        (now(), Ok("def kernel_function(): pass # ms=5")),
        (now(), Ok("def kernel_function(): pass # ms=5")),
    ];
    let (_, events) = run(Scenario {
        devices: 2,
        search: beam(1, 2, 1),
        initial: "# ms=8",
        answers,
        panicking_device: None,
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
        (now(), Ok("def kernel_function(): pass # ms=5")),
        (
            Duration::from_millis(300),
            Ok("def kernel_function(): pass # ms=4"),
        ),
    ];
    let (_, events) = run(Scenario {
        devices: 2,
        search: beam(1, 2, 1),
        initial: "# ms=8",
        answers,
        panicking_device: None,
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
    let answers = vec![(now(), Ok("def kernel_function(): pass # ms=5"))];
    let (result, events) = run(Scenario {
        devices: 1,
        search: beam(2, 2, 5),
        initial: "# ms=8",
        answers,
        panicking_device: None,
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
    };
    let answers = vec![
        (now(), Ok("def kernel_function(): pass # ms=5")),
        (now(), Ok("def kernel_function(): pass # ms=6")),
        (now(), Ok("def kernel_function(): pass # ms=7")),
        (now(), Ok("def kernel_function(): pass # ms=1")),
    ];
    let (result, _) = run(Scenario {
        devices: 1,
        search,
        initial: "# ms=8",
        answers,
        panicking_device: None,
    });
    assert_eq!(result.reason, "no faster kernel in 2 rounds");
    assert_eq!(result.best.unwrap().time_ms, 5.0);
}
