//! The Rust side of the per-device evaluator (docs/evaluator-protocol.md): one long-lived
//! Python child per GpuWorker, started lazily with the device pin, spoken to through JSON lines
//! on its own pipes, each request under a Watchdog deadline. A crash, a fatal device error or a
//! hang costs the candidate at hand and the child; the next request starts a fresh one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use actors::model::{
    CompiledCode, DeviceId, Provenance, Reference, TAMPERED, TimeOutcome, Timing, Verdict,
    VerifyOutcome,
};
use actors::ports::{
    DeviceEvaluator, EvalError, EvalFuture, EvalJob, EvaluatorFactory, EvaluatorStart, GroupId,
    LocalFuture, ReferenceTiming, UserTestOutcome, UserTestRun,
};
use actors::speed_of_light::{Floor, ProblemBytes, floor_of, impossible_timing};
use actors::watchdog::WatchdogClient;

use super::protocol::{
    EvaluatorConfig, Incoming, Ready, ReferenceKind, Reply, ReplyOutcome, Request, StartIntegrity,
    Startup, TimeOutcome as TimedReply, parse_incoming, parse_startup,
};
use crate::devices::Pin;
use crate::process::{ChildSpec, Protocol, ProtocolPipes, RunningChild, log_tail, spawn};
use crate::sandbox::{Access, Sandbox};

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
    /// The sandbox of the evaluator and of test.py, which both run candidate code; None when
    /// the run's `sandbox` is off.
    pub sandbox: Option<Sandbox>,
    /// The run directory, which a sandboxed child may not read but for its tools/.
    pub run_root: PathBuf,
}

/// Where one device's evaluator lives: its folder (cwd and log) and the device's pin, which
/// names the device.
#[derive(Clone, Debug)]
pub struct DeviceSlot {
    pub folder: PathBuf,
    pub pin: Pin,
    /// Where each candidate's Triton cache goes: `None` beside the candidate, in its folder
    /// (one node: the run directory is local); on a node agent a node-local folder, one
    /// subfolder per candidate, since the run directory is shared between nodes and Triton's
    /// cache must not be.
    pub triton_cache: Option<PathBuf>,
    /// The device's row in data/gpu_specs.yaml and its peak memory bandwidth: the floor of
    /// every timing on it (issue 18). None: no row, so no floor.
    pub bandwidth: Option<PeakBandwidth>,
}

/// A spec row's name and its `memory_bandwidth_gb_per_s`.
#[derive(Clone, Debug, PartialEq)]
pub struct PeakBandwidth {
    pub device: String,
    pub gb_per_s: f64,
}

impl DeviceSlot {
    /// The sandboxed evaluator's scratch in the device's folder `folder`: the one place it
    /// writes.
    pub fn scratch_of(folder: &Path) -> PathBuf {
        folder.join("scratch")
    }

    /// The Triton cache of the candidate whose folder is `candidate_folder`.
    pub fn triton_cache_of(&self, candidate_folder: &Path) -> PathBuf {
        match (&self.triton_cache, candidate_folder.file_name()) {
            (Some(root), Some(candidate)) => root.join(candidate),
            _ => candidate_folder.join("triton-cache"),
        }
    }
}

pub struct PythonEvaluatorFactory {
    setup: Rc<EvaluatorSetup>,
    /// The same, drawing the seeds after the search's: the finale's re-check.
    recheck_setup: Rc<EvaluatorSetup>,
    slots: BTreeMap<DeviceId, DeviceSlot>,
    watchdog: WatchdogClient,
}

impl PythonEvaluatorFactory {
    pub fn new(setup: EvaluatorSetup, slots: &[DeviceSlot], watchdog: WatchdogClient) -> Self {
        let mut recheck_setup = setup.clone();
        recheck_setup.config.first_seed = setup.config.first_seed + setup.config.seeds;
        PythonEvaluatorFactory {
            setup: Rc::new(setup),
            recheck_setup: Rc::new(recheck_setup),
            slots: slots
                .iter()
                .map(|slot| (slot.pin.device(), slot.clone()))
                .collect(),
            watchdog,
        }
    }
}

impl PythonEvaluatorFactory {
    fn evaluator(&self, setup: &Rc<EvaluatorSetup>, device: DeviceId) -> Box<dyn DeviceEvaluator> {
        match self.slots.get(&device) {
            Some(slot) => Box::new(PythonEvaluator::new(
                setup.clone(),
                slot.clone(),
                self.watchdog.clone(),
            )),
            None => Box::new(Unpinned(device)),
        }
    }
}

impl EvaluatorFactory for PythonEvaluatorFactory {
    fn start(&self, device: DeviceId) -> Box<dyn DeviceEvaluator> {
        self.evaluator(&self.setup, device)
    }

    fn start_recheck(&self, device: DeviceId) -> Box<dyn DeviceEvaluator> {
        self.evaluator(&self.recheck_setup, device)
    }
}

/// The evaluator of a device the run pinned nothing to: every step fails to start, saying so.
/// (The workers' devices are the platform's pins, so no run asks for one.)
struct Unpinned(DeviceId);

impl Unpinned {
    fn refusal<T>(&self) -> Result<T, EvalError> {
        Err(EvalError::Start(format!(
            "no device pin for device {}: the run pins no worker to it",
            self.0
        )))
    }
}

impl DeviceEvaluator for Unpinned {
    fn verify<'a>(&'a mut self, _: &'a EvalJob) -> EvalFuture<'a, VerifyOutcome> {
        Box::pin(async move { self.refusal() })
    }

    fn time<'a>(&'a mut self, _: &'a EvalJob) -> EvalFuture<'a, TimeOutcome> {
        Box::pin(async move { self.refusal() })
    }

    fn time_reference(&mut self, _: Reference, _: Duration) -> ReferenceTiming<'_> {
        Box::pin(async move { self.refusal() })
    }

    fn run_user_test<'a>(&'a mut self, _: &'a Path, _: Duration) -> UserTestRun<'a> {
        Box::pin(async move { self.refusal() })
    }

    fn take_started(&mut self) -> Option<EvaluatorStart> {
        None
    }

    fn shutdown(&mut self) -> LocalFuture<'_, ()> {
        Box::pin(async {})
    }
}

struct Session {
    child: RunningChild,
    pipes: ProtocolPipes,
    ready: Ready,
    /// Under it no timing of this child is real.
    floor: Floor,
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
    /// The start not yet reported to the worker.
    unreported_start: Option<EvaluatorStart>,
}

impl PythonEvaluator {
    pub fn new(setup: Rc<EvaluatorSetup>, slot: DeviceSlot, watchdog: WatchdogClient) -> Self {
        PythonEvaluator {
            device: slot.pin.device(),
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

    /// Where the evaluator loads `job`'s kernel from, and its code when it must write it there
    /// first: a sandboxed evaluator may not read the run directory's candidates/ (their prompts
    /// and replies lie beside the kernels), so its copy lives in its own scratch.
    fn candidate_of(&self, job: &EvalJob) -> (PathBuf, Option<String>) {
        match (&self.setup.sandbox, job.folder.file_name()) {
            (Some(_), Some(name)) => (
                DeviceSlot::scratch_of(&self.slot.folder)
                    .join("candidates")
                    .join(name)
                    .join("kernel.py"),
                Some(job.source.text().to_string()),
            ),
            _ => (job.folder.join("kernel.py"), None),
        }
    }

    fn log_path(&self) -> PathBuf {
        self.slot.folder.join("evaluator.log")
    }

    /// A fresh evaluator, ready; when it is not, why, with the end of its log.
    async fn start(&mut self) -> Result<Session, EvalError> {
        match self.start_session().await {
            Ok(session) => Ok(session),
            Err(reason) => {
                let log = self.log_path();
                let tail = log_tail(&log).await.unwrap_or_default();
                Err(EvalError::Start(format!(
                    "{reason}; the end of {}:\n{}",
                    log.display(),
                    tail.join("\n")
                )))
            }
        }
    }

    async fn start_session(&mut self) -> Result<Session, String> {
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
            env: self.slot.pin.child_environment(std::env::vars_os(), &[]),
            log_path: self.log_path(),
            protocol: Protocol::Pipes,
            label: self.label(),
        };
        let spec = match &setup.sandbox {
            Some(sandbox) => {
                let tools = setup.script.parent().unwrap_or(&setup.run_root);
                let confinement = sandbox.confinement(&Access {
                    run_root: &setup.run_root,
                    readable: &[tools],
                    writable: &[],
                    scratch: &DeviceSlot::scratch_of(&self.slot.folder),
                });
                confinement.apply(spec)
            }
            None => spec,
        };
        let mut child = spawn(&spec).map_err(|error| error.to_string())?;
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
        let Some(line) = line else {
            return Err(if expired {
                format!(
                    "the evaluator did not become ready within {:?}",
                    setup.startup_deadline
                )
            } else {
                "the evaluator exited before it was ready".into()
            });
        };
        let startup = parse_startup(&line).map_err(|error| {
            format!("the evaluator's first line is not its ready message: {error}")
        })?;
        match startup {
            Startup::Ready(ready) => {
                tracing::info!(device = %self.device, "evaluator ready: {line}");
                let floor = self.started(&ready);
                Ok(Session {
                    child,
                    pipes,
                    ready: *ready,
                    floor,
                })
            }
            Startup::Failed(failed) => {
                self.startup_failure = Some(failed.error.clone());
                Err(format!("the evaluator could not start: {}", failed.error))
            }
        }
    }

    /// Sends the request `make` builds (given its id) and waits for the reply under `deadline`.
    /// A fresh child's `ready` may come first (the zygote replaced the child after the previous
    /// reply): it replaces the session's, checksums included.
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
        let session = self.session.as_mut().expect("started above");
        let group = GroupId(session.child.group().id().as_raw());
        let watch = self.watchdog.watch(group, deadline, label).await;
        let request_line = request.to_line();
        tracing::info!(device = %self.device, "evaluator request: {}", request_line.trim_end());
        let sent = session
            .pipes
            .requests
            .send_line(request_line.trim_end())
            .await
            .is_ok();
        let received = if sent {
            self.receive_reply(&request).await
        } else {
            Received::Gone
        };
        let expired = match watch {
            Some(watch) => self.watchdog.release(watch).await,
            None => false,
        };
        let reply = match received {
            Received::Reply(reply) => *reply,
            Received::Gone => return Err(self.lost_child(expired, deadline).await),
            Received::Broken(error) => {
                self.session = None;
                return Err(EvalError::Crashed {
                    reason: format!("the evaluator broke the protocol: {error}"),
                });
            }
            Received::StartFailed(error) => {
                self.session = None;
                self.startup_failure = Some(error.clone());
                return Err(EvalError::Start(format!(
                    "the evaluator's fresh child could not start: {error}"
                )));
            }
        };
        let expected = self
            .session
            .as_ref()
            .and_then(|s| s.ready.integrity.as_ref());
        if let Some(breach) = integrity_breach(expected, &request, &reply) {
            // The child's own audit missed it: it cannot be trusted to go on.
            tracing::warn!(device = %self.device, "{TAMPERED}: {breach}");
            self.session = None;
            return Ok(tampered_outcome(
                reply.outcome,
                format!("{TAMPERED}: {breach}"),
            ));
        }
        if let ReplyOutcome::Failed(failure) = &reply.outcome
            && failure.fatal
        {
            if !reply.restarting {
                self.session = None;
            }
            return Err(EvalError::Crashed {
                reason: format!(
                    "{} (the device context is unusable; the evaluator restarts)",
                    failure.error
                ),
            });
        }
        Ok(reply.outcome)
    }

    /// Lines until the reply to `request`; a fresh child's `ready` on the way is taken in.
    async fn receive_reply(&mut self, request: &Request) -> Received {
        loop {
            let session = self.session.as_mut().expect("a request is pending");
            let line = tokio::select! {
                line = session.pipes.replies.recv_line() => line.ok().flatten(),
                _ = session.child.wait() => None,
            };
            let Some(line) = line else {
                return Received::Gone;
            };
            tracing::info!(device = %self.device, "evaluator reply: {line}");
            match parse_incoming(&line, request) {
                Ok(Incoming::Reply(reply)) => return Received::Reply(reply),
                Ok(Incoming::Started(Startup::Ready(ready))) => {
                    let floor = self.started(&ready);
                    let session = self.session.as_mut().expect("a request is pending");
                    session.ready = *ready;
                    session.floor = floor;
                }
                Ok(Incoming::Started(Startup::Failed(failed))) => {
                    return Received::StartFailed(failed.error);
                }
                Err(error) => return Received::Broken(error.to_string()),
            }
        }
    }

    /// The child died or stopped answering: what the pending request failed with.
    async fn lost_child(&mut self, expired: bool, deadline: Duration) -> EvalError {
        // Dropping the session kills what is left of the child's group.
        let mut session = self.session.take().expect("a request was pending");
        let status = tokio::time::timeout(Duration::from_millis(200), session.child.wait())
            .await
            .ok()
            .and_then(Result::ok);
        drop(session);
        if expired {
            return EvalError::TimedOut(deadline);
        }
        let tail = log_tail(&self.log_path()).await.unwrap_or_default();
        tracing::warn!(device = %self.device, "the evaluator died; the end of its log:\n{}", tail.join("\n"));
        let status = status.map(|s| format!(" ({s})")).unwrap_or_default();
        EvalError::Crashed {
            reason: format!(
                "the evaluator died without answering{status}; see {}",
                self.log_path().display()
            ),
        }
    }

    /// The evaluator's ready message, once it has started: the device it sees under its pin.
    pub fn ready(&self) -> Option<&Ready> {
        self.session.as_ref().map(|s| &s.ready)
    }

    /// A child's start, kept for the worker to journal; its floor.
    fn started(&mut self, ready: &Ready) -> Floor {
        let floor = floor_of_ready(ready, self.slot.bandwidth.as_ref());
        self.unreported_start = Some(EvaluatorStart {
            ready: serde_json::to_value(ready).unwrap_or_default(),
            floor: Some(floor.clone()),
        });
        floor
    }

    /// The floor of the running child, when it has one.
    fn floor(&self) -> Option<&actors::speed_of_light::SpeedOfLight> {
        self.session.as_ref().and_then(|s| s.floor.known())
    }
}

impl DeviceEvaluator for PythonEvaluator {
    fn verify<'a>(&'a mut self, job: &'a EvalJob) -> EvalFuture<'a, VerifyOutcome> {
        Box::pin(async move {
            let (candidate, source) = self.candidate_of(job);
            let cache_dir = self.slot.triton_cache_of(&job.folder);
            let outcome = self
                .call(
                    |id| Request::Verify {
                        id,
                        candidate,
                        cache_dir,
                        source,
                    },
                    job.deadline,
                )
                .await?;
            // A candidate that does not import or raises is a failed verification: its error is
            // what a refinement needs to see.
            let (verdict, launched_kernels, compiled) = match outcome {
                ReplyOutcome::Verified(verdict) if verdict.passed => (
                    Verdict::Passed {
                        max_abs_err: verdict.max_abs_err.unwrap_or(0.0),
                        max_rel_err: verdict.max_rel_err.unwrap_or(0.0),
                        rel_l2_err: verdict.rel_l2_err,
                        rule: verdict.rule,
                    },
                    verdict.launched,
                    // A fingerprint of another shape is none: the candidate is timed.
                    verdict.compiled.as_deref().and_then(CompiledCode::parse),
                ),
                ReplyOutcome::Verified(verdict) => {
                    let reason = verdict
                        .reason
                        .unwrap_or_else(|| "verification failed".into());
                    (Verdict::Failed { reason }, verdict.launched, None)
                }
                ReplyOutcome::Failed(failure) => (
                    Verdict::Failed {
                        reason: failure.error,
                    },
                    Vec::new(),
                    None,
                ),
                ReplyOutcome::Timed(_) | ReplyOutcome::ShutDown => {
                    unreachable!("parse_reply reads the reply to a verify request as a verdict")
                }
            };
            Ok(VerifyOutcome {
                verdict,
                provenance: Provenance::Measured,
                launched_kernels,
                compiled,
            })
        })
    }

    fn time<'a>(&'a mut self, job: &'a EvalJob) -> EvalFuture<'a, TimeOutcome> {
        Box::pin(async move {
            let (candidate, source) = self.candidate_of(job);
            let cache_dir = Some(self.slot.triton_cache_of(&job.folder));
            let request = |id| Request::Time {
                id,
                candidate,
                source,
                cache_dir,
                warmup: None,
                repeat: None,
            };
            let outcome = self.call(request, job.deadline).await?;
            let seen_content_ms = match &outcome {
                ReplyOutcome::Timed(TimedReply::Timed(stats)) => stats.seen_content_ms,
                _ => None,
            };
            let timing = timing_of(outcome)?;
            let floor = self.floor();
            if let Some(refusal) = impossible_timing(floor, timing.median_ms, seen_content_ms) {
                return Err(EvalError::ImpossibleTiming(refusal));
            }
            Ok(TimeOutcome {
                timing,
                provenance: Provenance::Measured,
                floor_ms: floor.map(|floor| floor.floor_ms),
            })
        })
    }

    fn time_reference(&mut self, which: Reference, deadline: Duration) -> ReferenceTiming<'_> {
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
            // PyTorch's own times are held to nothing, only measured against the floor.
            Ok(Some(TimeOutcome {
                timing,
                provenance: Provenance::Measured,
                floor_ms: self.floor().map(|floor| floor.floor_ms),
            }))
        })
    }

    fn run_user_test<'a>(&'a mut self, folder: &'a Path, deadline: Duration) -> UserTestRun<'a> {
        Box::pin(async move {
            let log = folder.join("test.log");
            let spec = ChildSpec {
                program: self.setup.python.clone(),
                args: vec!["test.py".into()],
                cwd: folder.to_path_buf(),
                env: self.slot.pin.child_environment(std::env::vars_os(), &[]),
                log_path: log.clone(),
                protocol: Protocol::None,
                label: format!("test.py on device {}", self.device),
            };
            let spec = match &self.setup.sandbox {
                Some(sandbox) => {
                    let confinement = sandbox.confinement(&Access {
                        run_root: &self.setup.run_root,
                        readable: &[],
                        writable: &[folder],
                        scratch: &folder.join("scratch"),
                    });
                    confinement.apply(spec)
                }
                None => spec,
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

    fn take_started(&mut self) -> Option<EvaluatorStart> {
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
            // An evaluator that does not exit within the grace is ended by the Watchdog, like
            // every child of a run; with the Watchdog already gone, dropping the session kills
            // its group.
            let group = GroupId(session.child.group().id().as_raw());
            let label = format!("the evaluator of device {} at shutdown", self.device);
            let Some(watch) = self
                .watchdog
                .watch(group, self.setup.kill_grace, label)
                .await
            else {
                return;
            };
            let _ = session.child.wait().await;
            self.watchdog.release(watch).await;
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

/// The floor of timings on a child that reported `ready`, on a device of `bandwidth`.
fn floor_of_ready(ready: &Ready, bandwidth: Option<&PeakBandwidth>) -> Floor {
    let Some(memory) = &ready.memory else {
        return Floor::Unknown {
            reason: "the evaluator reported no sizes of the problem's inputs and outputs".into(),
        };
    };
    let bytes = ProblemBytes {
        inputs_bytes: memory.inputs_bytes,
        outputs_bytes: memory.outputs_bytes,
        l2_bytes: memory.l2_bytes.unwrap_or(0),
        declared_min_bytes: memory.declared_min_bytes,
    };
    floor_of(
        &bytes,
        bandwidth.map(|row| (row.device.as_str(), row.gb_per_s)),
    )
}

/// How waiting for a reply ended.
enum Received {
    Reply(Box<Reply>),
    /// The evaluator exited or closed its reply pipe (or the deadline killed it).
    Gone,
    /// A line that is not what the protocol allows.
    Broken(String),
    /// The zygote's fresh child could not start; the zygote exits.
    StartFailed(String),
}

/// What kactors' own comparison finds changed: the checksums a reply to a candidate's verify or
/// time carries against those of the child's `ready`, which no candidate can reach. None when
/// they agree, when the child does not keep checksums (the audit is off) or when the reply says
/// the child restarts anyway (its state is thrown away).
fn integrity_breach(
    expected: Option<&StartIntegrity>,
    request: &Request,
    reply: &Reply,
) -> Option<String> {
    let expected = expected?;
    let candidate_ran = matches!(request, Request::Verify { .. } | Request::Time { .. });
    let answered = matches!(
        reply.outcome,
        ReplyOutcome::Verified(_) | ReplyOutcome::Timed(_)
    );
    if !candidate_ran || !answered || reply.restarting {
        return None;
    }
    let Some(got) = &reply.integrity else {
        return Some("its reply carries no checksums of the evaluator's tensors".into());
    };
    if got.checksums.len() != expected.checksums.len() {
        return Some(format!(
            "its reply carries {} checksums for the evaluator's {} tensors",
            got.checksums.len(),
            expected.checksums.len()
        ));
    }
    let changed: Vec<&str> = expected
        .tensors
        .iter()
        .zip(expected.checksums.iter().zip(&got.checksums))
        .filter(|(_, (then, now))| then != now)
        .map(|(name, _)| name.as_str())
        .collect();
    (!changed.is_empty()).then(|| {
        format!(
            "{} changed (kactors compared the checksums the evaluator reported at start; its own \
             audit did not say so)",
            changed.join(", ")
        )
    })
}

/// The reply's outcome turned into a rejection for tampering.
fn tampered_outcome(outcome: ReplyOutcome, reason: String) -> ReplyOutcome {
    match outcome {
        ReplyOutcome::Verified(mut verdict) => {
            verdict.passed = false;
            verdict.reason = Some(reason);
            ReplyOutcome::Verified(verdict)
        }
        _ => ReplyOutcome::Timed(TimedReply::Rejected { reason }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evaluator::protocol::{ReplyIntegrity, VerifyVerdict};

    fn start() -> StartIntegrity {
        StartIntegrity {
            tensors: vec!["draw 0 input 0".into(), "draw 0 reference 0".into()],
            checksums: vec!["00000000000000a1".into(), "00000000000000b2".into()],
        }
    }

    fn verify() -> Request {
        Request::Verify {
            id: 1,
            candidate: "k.py".into(),
            source: None,
            cache_dir: "tc".into(),
        }
    }

    fn passed(checksums: Option<&[&str]>, restarting: bool) -> Reply {
        Reply {
            id: Some(1),
            seconds: 0.1,
            outcome: ReplyOutcome::Verified(VerifyVerdict {
                passed: true,
                max_abs_err: Some(0.0),
                max_rel_err: Some(0.0),
                rel_l2_err: Some(0.0),
                rule: None,
                reason: None,
                launched: vec!["k".into()],
                aten_ops: vec![],
                compile_s: Some(0.1),
                run_s: Some(0.01),
                compiled: None,
            }),
            integrity: checksums.map(|sums| ReplyIntegrity {
                checksums: sums.iter().map(|s| s.to_string()).collect(),
                audit_s: Some(0.01),
            }),
            tampered: None,
            restarting,
        }
    }

    fn check(reply: &Reply, expected: Option<&str>) {
        let breach = integrity_breach(Some(&start()), &verify(), reply);
        match expected {
            None => assert_eq!(breach, None),
            Some(words) => assert!(
                breach.as_deref().is_some_and(|b| b.starts_with(words)),
                "{breach:?}"
            ),
        }
    }

    #[test]
    fn kactors_compares_each_replys_checksums_with_those_of_the_start() {
        check(
            &passed(Some(&["00000000000000a1", "00000000000000b2"]), false),
            None,
        );
        check(
            &passed(Some(&["00000000000000a1", "0000000000000000"]), false),
            Some("draw 0 reference 0 changed (kactors compared"),
        );
        check(&passed(None, false), Some("its reply carries no checksums"));
        check(
            &passed(Some(&["00000000000000a1"]), false),
            Some("its reply carries 1 checksums for the evaluator's 2 tensors"),
        );
        // A child that restarts is thrown away with whatever it holds.
        check(&passed(Some(&["0", "0"]), true), None);
        // Without checksums at start (the audit switched off) there is nothing to compare.
        let reply = passed(None, false);
        assert_eq!(integrity_breach(None, &verify(), &reply), None);
        // PyTorch's own references run no candidate code.
        let reference = Request::TimeReference {
            id: 1,
            which: ReferenceKind::Eager,
            warmup: None,
            repeat: None,
        };
        assert_eq!(integrity_breach(Some(&start()), &reference, &reply), None);
    }

    #[test]
    fn a_breach_turns_the_verdict_into_a_rejection_for_tampering() {
        let reason = format!("{TAMPERED}: draw 0 reference 0 changed");
        let ReplyOutcome::Verified(verdict) =
            tampered_outcome(passed(None, false).outcome, reason.clone())
        else {
            panic!("a verify reply stays a verdict")
        };
        assert!(!verdict.passed);
        assert_eq!(verdict.reason.as_deref(), Some(reason.as_str()));
        assert!(actors::model::is_tampering(&reason));
    }

    /// The evaluator's log is read from its end, asynchronously, and whatever bytes a kernel
    /// printed into it: a start failure still quotes its last lines.
    #[test]
    fn a_start_failure_quotes_the_end_of_the_log_whatever_was_printed_before() {
        let temp = tempfile::tempdir().unwrap();
        let script = temp.path().join("evaluator.sh");
        std::fs::write(
            &script,
            "printf 'noise \\377\\376\\n'\necho 'ModuleNotFoundError: No module named torch'\nexit 2\n",
        )
        .unwrap();
        let folder = temp.path().join("devices/0");
        std::fs::create_dir_all(&folder).unwrap();
        let setup = EvaluatorSetup {
            python: PathBuf::from("/bin/sh"),
            script,
            kernel_dir: temp.path().to_path_buf(),
            config: EvaluatorConfig {
                allowlist: temp.path().join("allowlist.yaml"),
                dtype: None,
                atol: None,
                rtol: None,
                seeds: 3,
                benchmark_warmup: 1,
                benchmark_repeat: 1,
                l2_flush_bytes: None,
                first_seed: 0,
                rel_l2: None,
            },
            startup_deadline: Duration::from_secs(30),
            kill_grace: Duration::from_millis(200),
            run_root: temp.path().to_path_buf(),
            sandbox: None,
        };
        let pin = crate::devices::Device {
            id: 0,
            name: "noop".into(),
            kind: crate::devices::DeviceKind::Noop,
            spec: None,
        }
        .pin();
        let job = EvalJob {
            candidate: actors::model::CandidateId(1),
            source: actors::model::KernelSource::new("def kernel_function(x):\n    return x\n"),
            folder: temp.path().join("candidates/1"),
            deadline: Duration::from_secs(30),
        };
        actix::System::new().block_on(async {
            let watchdog = crate::profiling::standalone_watchdog(Duration::from_millis(200));
            let mut evaluator = PythonEvaluator::new(
                Rc::new(setup),
                DeviceSlot {
                    folder,
                    pin,
                    triton_cache: None,
                    bandwidth: None,
                },
                watchdog,
            );
            let Err(EvalError::Start(message)) = evaluator.verify(&job).await else {
                panic!("a script that exits at once cannot start")
            };
            assert!(
                message.starts_with("the evaluator exited before it was ready; the end of "),
                "{message}"
            );
            assert!(
                message.ends_with(
                    ":\nnoise \u{FFFD}\u{FFFD}\nModuleNotFoundError: No module named torch"
                ),
                "{message}"
            );
        });
    }
}
