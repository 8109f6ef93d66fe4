//! The Supervisor: starts every actor, restarts dead GpuWorkers within a budget, owns the
//! response to SIGINT and SIGTERM, and shuts the run down in order: workers (and so their
//! children), the Profiler and the LlmBroker, then the Watchdog, then the Collector, each
//! acknowledging before the next.
//!
//! actix gives no supervision we can use here: a panic inside a handler kills that actor
//! silently, and `Supervised` restarts only on `ctx.stop()`. A dead worker shows as a closed
//! mailbox to whoever sends to it next; the Manager reports it with `RestartWorker`.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use tokio::sync::{oneshot, watch};

use crate::collector::{Collector, FinishRun, Record, RecordsFailed, ReportSettings, Seed};
use crate::gpu_worker::{DeviceProfiling, GpuWorker, ShutdownWorker};
use crate::journal::{Event, RunOutcome};
use crate::llm_broker::{CloseBroker, LlmBroker};
use crate::manager::{Manager, ManagerPeers, ManagerSettings, ResumeRun, StartRun, StopRun};
use crate::model::{DeviceId, RankedKernel};
use crate::ports::{
    Clock, EvaluatorFactory, GroupSignaller, KernelProfiler, LlmProvider, ProgressSink,
    PromptBuilder, RunStore,
};
use crate::profiler::{CloseProfiler, Profiler};
use crate::search::Pacing;
use crate::search_state::{Resume, SearchState, Stop};
use crate::supervision::{ManagerDied, RestartWorker, RunDone, SupervisorLink};
use crate::watchdog::{KillAll, TerminateAll, Watchdog, WatchdogClient};

/// The record-keeping and signalling ports, needed before any other actor starts.
pub struct RunIo {
    pub store: Box<dyn RunStore>,
    pub progress: Box<dyn ProgressSink>,
    pub clock: Arc<dyn Clock>,
    pub signaller: Box<dyn GroupSignaller>,
}

/// The ports that do the work. They are built once the Watchdog exists, because adapters that
/// start child processes register them with it.
pub struct WorkPorts {
    pub evaluators: Rc<dyn EvaluatorFactory>,
    pub profiler: Option<Rc<dyn KernelProfiler>>,
    pub llm: Rc<dyn LlmProvider>,
    pub prompts: Rc<dyn PromptBuilder>,
}

pub type WorkPortsBuilder = Box<dyn FnOnce(WatchdogClient) -> WorkPorts>;

pub struct RunPlan {
    /// `run_started`, with the initial kernel's source: journaled first, then the Manager's
    /// first input. A resumed run journaled it long ago: `resume` says how to go on instead.
    pub started: Event,
    /// A new run's `startup_step` records, journaled right after `run_started`.
    pub startup: Vec<Event>,
    pub resume: Option<Resume>,
    pub manager: ManagerSettings,
    pub max_inflight: usize,
    pub kill_grace: Duration,
    /// Restarts allowed per device over the whole run.
    pub restart_budget: u32,
    /// Stop a device's evaluator while its profiler runs (ROCm's default).
    pub stop_evaluator_during_profile: bool,
    /// What goes on from an interrupt: `kactors resume <dir>`, which `run_finished` names.
    pub resume_command: String,
}

/// How the run ended, for the binary's exit code.
#[derive(Clone, Debug, PartialEq)]
pub struct RunResult {
    pub outcome: RunOutcome,
    pub reason: String,
    pub best: Option<RankedKernel>,
    pub initial_ms: Option<f64>,
    /// The first failure to write the run directory, if any.
    pub record_error: Option<String>,
    /// The search's state at its end, as the Manager held it (none after a Manager that died).
    pub search: Option<SearchState>,
}

/// SIGINT or SIGTERM reached kactors. The first stops the run; a second kills every child group
/// at once.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Interrupt {
    pub signal: String,
}

pub struct Supervisor {
    plan: RunPlan,
    stage: Stage,
    stop: watch::Sender<bool>,
    interrupts: u32,
    shutting_down: bool,
}

/// What the Supervisor holds: the ports it starts the run with until `started`, then the
/// actors it started. No handler runs before `started`, so every handler sees `Running`.
enum Stage {
    Starting {
        io: RunIo,
        ports: WorkPortsBuilder,
        result: oneshot::Sender<RunResult>,
    },
    /// Only while `started` moves from one stage to the other.
    Moving,
    Running(Box<Running>),
}

/// The actors of a started run.
struct Running {
    crew: Crew,
    /// Each device's worker (a restarted one replaces its predecessor), and its restarts.
    workers: BTreeMap<DeviceId, Addr<GpuWorker>>,
    restarts: BTreeMap<DeviceId, u32>,
    manager: Addr<Manager>,
    broker: Addr<LlmBroker>,
    /// `run`'s caller, answered once by the shutdown.
    result: Option<oneshot::Sender<RunResult>>,
}

/// What a GpuWorker is started with, first at the start and again at each restart.
struct Crew {
    collector: Addr<Collector>,
    watchdog: Addr<Watchdog>,
    factory: Rc<dyn EvaluatorFactory>,
    profiler: Option<Addr<Profiler>>,
}

impl Crew {
    fn start_worker(
        &self,
        device: DeviceId,
        plan: &RunPlan,
        stop: &watch::Sender<bool>,
    ) -> Addr<GpuWorker> {
        GpuWorker::new(
            device,
            self.factory.clone(),
            self.profiler.clone().map(|profiler| DeviceProfiling {
                profiler,
                stop_evaluator: plan.stop_evaluator_during_profile,
            }),
            self.collector.clone(),
            stop.subscribe(),
        )
        .start()
    }
}

impl Supervisor {
    pub fn new(
        io: RunIo,
        ports: WorkPortsBuilder,
        plan: RunPlan,
        result: oneshot::Sender<RunResult>,
    ) -> Self {
        let (stop, _) = watch::channel(false);
        Supervisor {
            plan,
            stage: Stage::Starting { io, ports, result },
            stop,
            interrupts: 0,
            shutting_down: false,
        }
    }

    fn running(&self) -> Option<&Running> {
        match &self.stage {
            Stage::Running(running) => Some(running),
            Stage::Starting { .. } | Stage::Moving => None,
        }
    }
}

impl Actor for Supervisor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        crate::panic_note::install();
        let Stage::Starting { io, ports, result } =
            std::mem::replace(&mut self.stage, Stage::Moving)
        else {
            return;
        };
        let clock = io.clock.clone();
        let reports = ReportSettings {
            every: match self.plan.manager.search.pacing {
                Pacing::Rounds => None,
                Pacing::Steady { .. } => {
                    Some(self.plan.manager.search.search.candidates_per_round())
                }
            },
            resume_command: Some(self.plan.resume_command.clone()),
        };
        let collector = Collector::new(
            io.store,
            io.progress,
            io.clock,
            reports,
            ctx.address().recipient(),
        )
        .start();
        let watchdog =
            Watchdog::new(io.signaller, self.plan.kill_grace, Some(collector.clone())).start();
        let ports = ports(WatchdogClient::new(watchdog.clone()));
        match &self.plan.resume {
            None => {
                collector.do_send(Record(self.plan.started.clone()));
                for step in &self.plan.startup {
                    collector.do_send(Record(step.clone()));
                }
            }
            Some(resume) => collector.do_send(Seed(resume.records.clone())),
        }
        let crew = Crew {
            collector: collector.clone(),
            watchdog,
            factory: ports.evaluators,
            profiler: ports.profiler.map(|backend| Profiler::new(backend).start()),
        };
        let workers: BTreeMap<DeviceId, Addr<GpuWorker>> = self
            .plan
            .manager
            .search
            .devices
            .iter()
            .map(|device| {
                let worker = crew.start_worker(*device, &self.plan, &self.stop);
                (*device, worker)
            })
            .collect();
        let broker = LlmBroker::new(
            ports.llm,
            self.plan.max_inflight,
            self.plan.manager.search.reflexions_in_flight,
        )
        .start();
        let me = ctx.address();
        let supervisor = SupervisorLink {
            done: me.clone().recipient(),
            restart: me.clone().recipient(),
            died: me.clone().recipient(),
            records_failed: me.recipient(),
            evaluators: crew.factory.clone(),
        };
        let peers = ManagerPeers {
            workers: workers.clone(),
            broker: broker.clone(),
            collector,
        };
        let manager = Manager::new(
            self.plan.manager.clone(),
            supervisor,
            peers,
            ports.prompts,
            clock,
        )
        .start();
        match self.plan.resume.take() {
            None => manager.do_send(StartRun {
                started: self.plan.started.clone(),
            }),
            Some(resume) => manager.do_send(ResumeRun(resume)),
        }
        self.stage = Stage::Running(Box::new(Running {
            crew,
            workers,
            restarts: BTreeMap::new(),
            manager,
            broker,
            result: Some(result),
        }));
    }
}

impl Handler<RestartWorker> for Supervisor {
    type Result = Result<Addr<GpuWorker>, String>;

    fn handle(&mut self, message: RestartWorker, _: &mut Context<Self>) -> Self::Result {
        let Stage::Running(running) = &mut self.stage else {
            return Err("the run has not started".into());
        };
        let current = running
            .workers
            .get(&message.device)
            .cloned()
            .ok_or_else(|| format!("no worker for device {}", message.device))?;
        if current != message.dead {
            return Ok(current);
        }
        if self.shutting_down {
            return Err("the run is shutting down".into());
        }
        let restarts = running.restarts.entry(message.device).or_insert(0);
        if *restarts >= self.plan.restart_budget {
            return Err(format!(
                "the worker of device {} died and its restart budget ({}) is spent",
                message.device, self.plan.restart_budget
            ));
        }
        *restarts += 1;
        let restarts = *restarts;
        let worker = running
            .crew
            .start_worker(message.device, &self.plan, &self.stop);
        running
            .crew
            .collector
            .do_send(Record(Event::WorkerRestarted {
                device: message.device,
                restarts,
            }));
        running.workers.insert(message.device, worker.clone());
        Ok(worker)
    }
}

impl Supervisor {
    /// Stops new work and asks the Manager to end the run: its children are ended and, once the
    /// Manager reports the run done, everything shuts down in order.
    fn stop_run(&mut self, why: Stop, ctx: &mut Context<Self>) {
        let _ = self.stop.send(true);
        let Some(running) = self.running() else {
            return;
        };
        running.crew.watchdog.do_send(TerminateAll);
        if let Err(SendError::Closed(_)) = running.manager.try_send(StopRun { why: why.clone() }) {
            // A Manager that died tells us so as it is dropped; should that notice be lost, the
            // stop it could not take still ends the run.
            let message = "the manager's mailbox is closed".to_string();
            ctx.notify(ManagerDied { message });
        }
    }

    /// Ends every actor in order (workers and so their children, the Profiler, the LlmBroker,
    /// the Watchdog), journals `run_finished`, writes best_kernel.py and report.md, answers
    /// `run`'s caller and stops the system. A run whose records could not all be written ends
    /// as failed, whatever it was before.
    fn shut_down(&mut self, done: RunDone) -> ResponseActFuture<Self, ()> {
        self.shutting_down = true;
        let _ = self.stop.send(true);
        let Stage::Running(running) = &mut self.stage else {
            return Box::pin(actix::fut::ready(()).map(|(), _, _| System::current().stop()));
        };
        let workers: Vec<Addr<GpuWorker>> = running.workers.values().cloned().collect();
        let watchdog = running.crew.watchdog.clone();
        let collector = running.crew.collector.clone();
        let result = running.result.take();
        let profiler = running.crew.profiler.clone();
        let broker = running.broker.clone();
        let resume_command = self.plan.resume_command.clone();
        let shutdown = async move {
            for worker in workers {
                // A worker that died has no children left to end: its evaluator was dropped.
                let _ = worker.send(ShutdownWorker).await;
            }
            if let Some(profiler) = profiler {
                let _ = profiler.send(CloseProfiler).await;
            }
            let _ = broker.send(CloseBroker).await;
            let _ = watchdog.send(KillAll).await;
            let event = Event::RunFinished {
                outcome: done.outcome,
                reason: done.reason.clone(),
                best_candidate: done.best.as_ref().map(|best| best.id),
                best_ms: done.best.as_ref().map(|best| best.time_ms),
                initial_ms: done.initial_ms,
                resume: (done.outcome == RunOutcome::Interrupted).then_some(resume_command),
            };
            let best_source = done
                .best
                .as_ref()
                .map(|best| best.source.text().to_string());
            let record_error = collector
                .send(FinishRun { event, best_source })
                .await
                .unwrap_or_else(|_| Err("the collector is gone".into()))
                .err();
            if let Some(result) = result {
                let (outcome, reason) = match &record_error {
                    Some(error) if done.outcome != RunOutcome::Failed => {
                        (RunOutcome::Failed, error.clone())
                    }
                    _ => (done.outcome, done.reason),
                };
                let _ = result.send(RunResult {
                    outcome,
                    reason,
                    best: done.best,
                    initial_ms: done.initial_ms,
                    record_error,
                    search: done.search,
                });
            }
        };
        Box::pin(
            shutdown
                .into_actor(self)
                .map(|(), _, _| System::current().stop()),
        )
    }
}

impl Handler<Interrupt> for Supervisor {
    type Result = ();

    fn handle(&mut self, message: Interrupt, ctx: &mut Context<Self>) {
        self.interrupts += 1;
        let Some(running) = self.running() else {
            return;
        };
        let watchdog = running.crew.watchdog.clone();
        match (self.interrupts, self.shutting_down) {
            (1, false) => self.stop_run(Stop::Signal(message.signal), ctx),
            // The run is already ending in order: only its children are hurried.
            (1, true) => watchdog.do_send(TerminateAll),
            _ => watchdog.do_send(KillAll),
        }
    }
}

impl Handler<RecordsFailed> for Supervisor {
    type Result = ();

    /// The run's records cannot be kept: it stops as failed. During the shutdown the failure
    /// comes back with `FinishRun`'s answer instead.
    fn handle(&mut self, message: RecordsFailed, ctx: &mut Context<Self>) {
        if !self.shutting_down {
            self.stop_run(Stop::Failed(message.message), ctx);
        }
    }
}

impl Handler<ManagerDied> for Supervisor {
    type Result = ResponseActFuture<Self, ()>;

    fn handle(&mut self, message: ManagerDied, _: &mut Context<Self>) -> Self::Result {
        if self.shutting_down {
            return Box::pin(actix::fut::ready(()));
        }
        self.shut_down(RunDone {
            outcome: RunOutcome::Failed,
            reason: format!("the manager died: {}", message.message),
            best: None,
            initial_ms: None,
            search: None,
        })
    }
}

impl Handler<RunDone> for Supervisor {
    type Result = ResponseActFuture<Self, ()>;

    fn handle(&mut self, message: RunDone, _: &mut Context<Self>) -> Self::Result {
        if self.shutting_down {
            return Box::pin(actix::fut::ready(()));
        }
        self.shut_down(message)
    }
}
