//! The Rust side of the per-device evaluator (docs/evaluator-protocol.md): one long-lived
//! Python child per GpuWorker, started lazily with the device pin, spoken to through JSON lines
//! on its own pipes, each request under a Watchdog deadline. A crash, a fatal device error or a
//! hang costs the candidate at hand and the child; the next request starts a fresh one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use actors::model::{DeviceId, Provenance, Reference, TimeOutcome, Timing, Verdict, VerifyOutcome};
use actors::ports::{
    DeviceEvaluator, EvalError, EvalJob, EvaluatorFactory, GroupId, LocalFuture, UserTestOutcome,
};
use actors::watchdog::WatchdogClient;

use super::protocol::{
    EvaluatorConfig, Ready, ReferenceKind, Reply, ReplyOutcome, Request, Startup,
    TimeOutcome as TimedReply, parse_reply, parse_startup,
};
use crate::process::{
    ChildSpec, ProtocolPipes, RunningChild, child_environment, spawn, terminate_with_grace,
};

/// What every evaluator child of a run shares.
#[derive(Clone, Debug)]
pub struct EvaluatorSetup {
    pub python: PathBuf,
    /// The evaluator script, written into the run directory.
    pub script: PathBuf,
    pub kernel_dir: PathBuf,
    /// `--config`: dtype, tolerances, seeds, warm-up and repeats, the allowlist.
    pub config: EvaluatorConfig,
    /// Start-up imports torch and builds the inputs: it gets its own deadline.
    pub startup_deadline: Duration,
    pub kill_grace: Duration,
}

/// Where one device's evaluator lives: its folder (cwd and log) and its pin.
#[derive(Clone, Debug)]
pub struct DeviceSlot {
    pub folder: PathBuf,
    pub set: BTreeMap<String, String>,
    pub unset: Vec<String>,
}

pub struct PythonEvaluatorFactory {
    setup: Rc<EvaluatorSetup>,
    slots: BTreeMap<DeviceId, DeviceSlot>,
    watchdog: WatchdogClient,
}

impl PythonEvaluatorFactory {
    pub fn new(
        setup: EvaluatorSetup,
        slots: BTreeMap<DeviceId, DeviceSlot>,
        watchdog: WatchdogClient,
    ) -> Self {
        PythonEvaluatorFactory {
            setup: Rc::new(setup),
            slots,
            watchdog,
        }
    }
}

impl EvaluatorFactory for PythonEvaluatorFactory {
    fn start(&self, device: DeviceId) -> Box<dyn DeviceEvaluator> {
        let slot = self
            .slots
            .get(&device)
            .cloned()
            .expect("every worker's device has a slot");
        Box::new(PythonEvaluator::new(
            device,
            self.setup.clone(),
            slot,
            self.watchdog.clone(),
        ))
    }
}

struct Session {
    child: RunningChild,
    pipes: ProtocolPipes,
    ready: Ready,
}

pub struct PythonEvaluator {
    device: DeviceId,
    setup: Rc<EvaluatorSetup>,
    slot: DeviceSlot,
    watchdog: WatchdogClient,
    session: Option<Session>,
    next_id: u64,
    /// A child that could not start (torch missing, problem.py broken) is not retried in a loop.
    startup_failure: Option<String>,
    /// The ready message of a start not yet reported to the worker.
    unreported_start: Option<serde_json::Value>,
}

fn log_tail(path: &std::path::Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(12)..].join("\n")
}

impl PythonEvaluator {
    pub fn new(
        device: DeviceId,
        setup: Rc<EvaluatorSetup>,
        slot: DeviceSlot,
        watchdog: WatchdogClient,
    ) -> Self {
        PythonEvaluator {
            device,
            setup,
            slot,
            watchdog,
            session: None,
            next_id: 0,
            startup_failure: None,
            unreported_start: None,
        }
    }

    fn label(&self) -> String {
        format!("evaluator of device {}", self.device)
    }

    fn log_path(&self) -> PathBuf {
        self.slot.folder.join("evaluator.log")
    }

    async fn start(&mut self) -> Result<Session, EvalError> {
        let setup = &self.setup;
        let config = serde_json::to_string(&setup.config).expect("the evaluator config serialises");
        let spec = ChildSpec {
            program: setup.python.clone(),
            args: vec![
                setup.script.clone().into(),
                "--kernel-dir".into(),
                setup.kernel_dir.clone().into(),
                "--config".into(),
                config.into(),
            ],
            cwd: self.slot.folder.clone(),
            env: child_environment(std::env::vars_os(), &self.slot.set, &self.slot.unset),
            log_path: self.log_path(),
            protocol: true,
            label: self.label(),
        };
        let mut child = spawn(&spec).map_err(|error| EvalError::Start(error.to_string()))?;
        let mut pipes = child
            .protocol
            .take()
            .expect("the evaluator is spawned with protocol pipes");
        let group = GroupId(child.group().id().as_raw());
        let watch = self
            .watchdog
            .watch(group, setup.startup_deadline, self.label())
            .await;
        let line = tokio::select! {
            line = pipes.replies.recv_line() => line.ok().flatten(),
            _ = child.wait() => None,
        };
        let expired = match watch {
            Some(watch) => self.watchdog.release(watch).await,
            None => false,
        };
        let log = self.log_path();
        let failure = |reason: String| {
            EvalError::Start(format!(
                "{reason}; the end of {}:\n{}",
                log.display(),
                log_tail(&log)
            ))
        };
        let Some(line) = line else {
            return Err(if expired {
                failure(format!(
                    "the evaluator did not become ready within {:?}",
                    setup.startup_deadline
                ))
            } else {
                failure("the evaluator exited before it was ready".into())
            });
        };
        let startup = parse_startup(&line).map_err(|error| {
            failure(format!(
                "the evaluator's first line is not its ready message: {error}"
            ))
        })?;
        match startup {
            Startup::Ready(ready) => {
                tracing::info!(device = %self.device, "evaluator ready: {line}");
                self.unreported_start = serde_json::to_value(&*ready).ok();
                Ok(Session {
                    child,
                    pipes,
                    ready: *ready,
                })
            }
            Startup::Failed(failed) => {
                self.startup_failure = Some(failed.error.clone());
                Err(failure(format!(
                    "the evaluator could not start: {}",
                    failed.error
                )))
            }
        }
    }

    /// Sends the request `make` builds (given its id) and waits for the reply under `deadline`.
    async fn call(
        &mut self,
        make: impl FnOnce(u64) -> Request,
        deadline: Duration,
    ) -> Result<ReplyOutcome, EvalError> {
        if let Some(failure) = &self.startup_failure {
            return Err(EvalError::Start(failure.clone()));
        }
        if self.session.is_none() {
            self.session = Some(self.start().await?);
        }
        let label = self.label();
        let request = make(self.next_id);
        self.next_id += 1;
        let Session { child, pipes, .. } = self.session.as_mut().expect("started above");
        let group = GroupId(child.group().id().as_raw());
        let watch = self.watchdog.watch(group, deadline, label).await;
        let request_line = request.to_line();
        tracing::info!(device = %self.device, "evaluator request: {}", request_line.trim_end());
        let line = match pipes.requests.send_line(request_line.trim_end()).await {
            Ok(()) => tokio::select! {
                line = pipes.replies.recv_line() => line.ok().flatten(),
                _ = child.wait() => None,
            },
            Err(_) => None,
        };
        let expired = match watch {
            Some(watch) => self.watchdog.release(watch).await,
            None => false,
        };
        let Some(line) = line else {
            // Dropping the session kills what is left of the child's group.
            let mut session = self.session.take().expect("started above");
            let status = tokio::time::timeout(Duration::from_millis(200), session.child.wait())
                .await
                .ok()
                .and_then(Result::ok);
            drop(session);
            if expired {
                return Err(EvalError::TimedOut(deadline));
            }
            tracing::warn!(device = %self.device, "the evaluator died; the end of its log:\n{}", log_tail(&self.log_path()));
            let status = status.map(|s| format!(" ({s})")).unwrap_or_default();
            return Err(EvalError::Crashed {
                reason: format!(
                    "the evaluator died without answering{status}; see {}",
                    self.log_path().display()
                ),
            });
        };
        tracing::info!(device = %self.device, "evaluator reply: {line}");
        let reply: Reply = parse_reply(&line, &request).map_err(|error| {
            self.session = None;
            EvalError::Crashed {
                reason: format!("the evaluator broke the protocol: {error}"),
            }
        })?;
        if let ReplyOutcome::Failed(failure) = &reply.outcome
            && failure.fatal
        {
            self.session = None;
            return Err(EvalError::Crashed {
                reason: format!(
                    "{} (the device context is unusable; the evaluator restarts)",
                    failure.error
                ),
            });
        }
        Ok(reply.outcome)
    }

    /// The evaluator's ready message, once it has started: the device it sees under its pin.
    pub fn ready(&self) -> Option<&Ready> {
        self.session.as_ref().map(|s| &s.ready)
    }
}

impl DeviceEvaluator for PythonEvaluator {
    fn verify<'a>(
        &'a mut self,
        job: &'a EvalJob,
    ) -> LocalFuture<'a, Result<VerifyOutcome, EvalError>> {
        Box::pin(async move {
            let candidate = job.folder.join("kernel.py");
            let cache_dir = job.folder.join("triton-cache");
            let outcome = self
                .call(
                    |id| Request::Verify {
                        id,
                        candidate,
                        cache_dir,
                    },
                    job.deadline,
                )
                .await?;
            // A candidate that does not import or raises is a failed verification: its error is
            // what a refinement needs to see.
            let (verdict, launched_kernels) = match outcome {
                ReplyOutcome::Verified(verdict) if verdict.passed => (
                    Verdict::Passed {
                        max_abs_err: verdict.max_abs_err.unwrap_or(0.0),
                        max_rel_err: verdict.max_rel_err.unwrap_or(0.0),
                    },
                    verdict.launched,
                ),
                ReplyOutcome::Verified(verdict) => {
                    let reason = verdict
                        .reason
                        .unwrap_or_else(|| "verification failed".into());
                    (Verdict::Failed { reason }, verdict.launched)
                }
                ReplyOutcome::Failed(failure) => (
                    Verdict::Failed {
                        reason: failure.error,
                    },
                    Vec::new(),
                ),
                ReplyOutcome::Timed(_) | ReplyOutcome::ShutDown => {
                    unreachable!("parse_reply reads the reply to a verify request as a verdict")
                }
            };
            Ok(VerifyOutcome {
                verdict,
                provenance: Provenance::Measured,
                launched_kernels,
            })
        })
    }

    fn time<'a>(&'a mut self, job: &'a EvalJob) -> LocalFuture<'a, Result<TimeOutcome, EvalError>> {
        Box::pin(async move {
            let candidate = job.folder.join("kernel.py");
            let cache_dir = Some(job.folder.join("triton-cache"));
            let request = |id| Request::Time {
                id,
                candidate,
                cache_dir,
                warmup: None,
                repeat: None,
            };
            let outcome = self.call(request, job.deadline).await?;
            timing_of(outcome).map(|timing| TimeOutcome {
                timing,
                provenance: Provenance::Measured,
            })
        })
    }

    fn time_reference(
        &mut self,
        which: Reference,
        deadline: Duration,
    ) -> LocalFuture<'_, Result<Option<TimeOutcome>, EvalError>> {
        Box::pin(async move {
            let which = match which {
                Reference::Eager => ReferenceKind::Eager,
                Reference::Compile => ReferenceKind::Compile,
            };
            let request = |id| Request::TimeReference {
                id,
                which,
                warmup: None,
                repeat: None,
            };
            let timing = timing_of(self.call(request, deadline).await?)?;
            Ok(Some(TimeOutcome {
                timing,
                provenance: Provenance::Measured,
            }))
        })
    }

    fn run_user_test<'a>(
        &'a mut self,
        folder: &'a Path,
        deadline: Duration,
    ) -> LocalFuture<'a, Result<Option<UserTestOutcome>, EvalError>> {
        Box::pin(async move {
            let log = folder.join("test.log");
            let spec = ChildSpec {
                program: self.setup.python.clone(),
                args: vec!["test.py".into()],
                cwd: folder.to_path_buf(),
                env: child_environment(std::env::vars_os(), &self.slot.set, &self.slot.unset),
                log_path: log.clone(),
                protocol: false,
                label: format!("test.py on device {}", self.device),
            };
            let mut child = spawn(&spec).map_err(|error| EvalError::Start(error.to_string()))?;
            let group = GroupId(child.group().id().as_raw());
            let watch = self
                .watchdog
                .watch(group, deadline, spec.label.clone())
                .await;
            let status = child.wait().await;
            let expired = match watch {
                Some(watch) => self.watchdog.release(watch).await,
                None => false,
            };
            if expired {
                return Err(EvalError::TimedOut(deadline));
            }
            let status = status.map_err(|error| EvalError::Crashed {
                reason: format!("failed to wait for test.py: {error}"),
            })?;
            Ok(Some(UserTestOutcome {
                passed: status.success(),
                exit_code: status.code(),
                log,
            }))
        })
    }

    fn take_started(&mut self) -> Option<serde_json::Value> {
        self.unreported_start.take()
    }

    fn shutdown(&mut self) -> LocalFuture<'_, ()> {
        Box::pin(async move {
            let Some(mut session) = self.session.take() else {
                return;
            };
            let _ = session
                .pipes
                .requests
                .send_line(Request::Shutdown { id: self.next_id }.to_line().trim_end())
                .await;
            let grace = self.setup.kill_grace;
            if tokio::time::timeout(grace, session.child.wait())
                .await
                .is_err()
            {
                let _ = terminate_with_grace(&mut session.child, grace).await;
            }
        })
    }
}

fn timing_of(outcome: ReplyOutcome) -> Result<Timing, EvalError> {
    match outcome {
        ReplyOutcome::Timed(TimedReply::Timed(stats)) => Ok(Timing {
            median_ms: stats.median_ms,
            min_ms: stats.min_ms,
            max_ms: stats.max_ms,
            samples: stats.samples,
        }),
        ReplyOutcome::Timed(TimedReply::Rejected { reason }) => Err(EvalError::Rejected(reason)),
        ReplyOutcome::Failed(failure) => Err(EvalError::Rejected(failure.error)),
        ReplyOutcome::Verified(_) | ReplyOutcome::ShutDown => {
            unreachable!("parse_reply reads the reply to a time request as a timing")
        }
    }
}
