//! The GpuWorker: one per pinned device. It owns the device's evaluator, and everything that runs
//! on that GPU (verification, timing, profiling) goes through it one message at a time: its
//! handlers are atomic, so a profile never overlaps a timing on the same device.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

use actix::prelude::*;
use tokio::sync::watch;

use crate::collector::{Collector, Record};
use crate::journal::{Event, Step};
use crate::model::{
    CandidateId, CompiledCode, DeviceId, KernelSource, Reference, TimeOutcome, Verdict,
    VerifyOutcome,
};
pub use crate::ports::Evaluated;
use crate::ports::{
    DeviceEvaluator, EvalError, EvalJob, EvaluatorFactory, EvaluatorStart, ProfileError,
    ProfileJob, ProfileSummary, UserTestOutcome,
};
use crate::profiler::{Profiler, RunProfile};
use crate::speed_of_light::percent_of_light;

/// Verify a candidate and, when it passes, time it, unless its compiled code is that of a
/// candidate already timed (issue 23).
#[derive(Message)]
#[rtype(result = "Evaluated")]
pub struct Evaluate {
    pub job: EvalJob,
    pub parent: Option<CandidateId>,
    pub round: u32,
    /// The compiled code of the candidates timed so far, and which candidate each was first,
    /// as the search has it when the verification ends (the search decides the duplicate again
    /// from the journal).
    pub timed_code: watch::Receiver<Arc<BTreeMap<CompiledCode, CandidateId>>>,
}

/// Profile a kernel on this worker's device, holding the device for the whole profile.
#[derive(Message)]
#[rtype(result = "Result<ProfileSummary, ProfileError>")]
pub struct Profile {
    pub job: ProfileJob,
    pub round: u32,
}

/// Time PyTorch eager and torch.compile on this device, by the candidates' method. Answered
/// with a `reference_timed` record for each, for the Manager to journal and apply.
#[derive(Message)]
#[rtype(result = "Vec<Event>")]
pub struct TimeReferences {
    pub deadline: std::time::Duration,
}

/// Check the given kernels once more and time them and PyTorch's references again, in one fresh
/// evaluator on draws no search evaluator drew (issue 18), interleaved, twice: the figures a
/// finished run's headline uses. Answered with the kernels that failed the re-check and why:
/// they are not timed, and the finale drops them from the final beam.
#[derive(Message)]
#[rtype(result = "Vec<(CandidateId, String)>")]
pub struct Finale {
    /// (candidate, source, folder) of each kernel to time: the initial kernel and the final beam.
    pub kernels: Vec<(CandidateId, KernelSource, std::path::PathBuf)>,
    pub deadline: std::time::Duration,
}

/// Run the user's test.py in a folder where the best kernel is staged.
#[derive(Message)]
#[rtype(result = "Result<Option<UserTestOutcome>, EvalError>")]
pub struct RunUserTest {
    pub folder: std::path::PathBuf,
    pub deadline: std::time::Duration,
}

/// End the device's children; answered once they are gone.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ShutdownWorker;

/// How a worker profiles: through the run's Profiler, and whether the device's evaluator must
/// be stopped first (on ROCm another process on the GPU can make rocprofv3 fail).
#[derive(Clone)]
pub struct DeviceProfiling {
    pub profiler: Addr<Profiler>,
    pub stop_evaluator: bool,
}

pub struct GpuWorker {
    device: DeviceId,
    factory: Rc<dyn EvaluatorFactory>,
    evaluator: Option<Box<dyn DeviceEvaluator>>,
    profiling: Option<DeviceProfiling>,
    collector: Addr<Collector>,
    stop: watch::Receiver<bool>,
}

impl GpuWorker {
    pub fn new(
        device: DeviceId,
        factory: Rc<dyn EvaluatorFactory>,
        profiling: Option<DeviceProfiling>,
        collector: Addr<Collector>,
        stop: watch::Receiver<bool>,
    ) -> Self {
        GpuWorker {
            device,
            factory,
            evaluator: None,
            profiling,
            collector,
            stop,
        }
    }

    /// Runs `work`, which holds the evaluator for one atomic step, and takes the evaluator back
    /// with the step's result.
    fn give_back<R: 'static>(
        &mut self,
        work: impl std::future::Future<Output = (Box<dyn DeviceEvaluator>, R)> + 'static,
    ) -> AtomicResponse<Self, R> {
        AtomicResponse::new(Box::pin(work.into_actor(self).map(
            |(evaluator, result), worker, _| {
                worker.evaluator = Some(evaluator);
                result
            },
        )))
    }

    /// The evaluator leaves the actor for the duration of a step and comes back with its result;
    /// the atomic handler guarantees no other step wants it meanwhile.
    fn take_evaluator(&mut self) -> Box<dyn DeviceEvaluator> {
        self.evaluator
            .take()
            .unwrap_or_else(|| self.factory.start(self.device))
    }
}

impl Actor for GpuWorker {
    type Context = Context<Self>;
}

struct StepLog {
    collector: Addr<Collector>,
    candidate: CandidateId,
    parent: Option<CandidateId>,
    round: u32,
    device: DeviceId,
}

impl StepLog {
    fn started(&self, step: Step) {
        self.collector.do_send(Record(Event::StepStarted {
            candidate: self.candidate,
            parent: self.parent,
            round: self.round,
            device: self.device,
            step,
        }));
    }

    fn evaluator_started(&self, start: Option<EvaluatorStart>) {
        if let Some(EvaluatorStart { ready, floor }) = start {
            self.collector.do_send(Record(Event::EvaluatorStarted {
                device: self.device,
                ready,
                floor,
            }));
        }
    }

    fn verified(&self, outcome: &Result<VerifyOutcome, EvalError>) {
        let (provenance, verdict, error) = match outcome {
            Ok(outcome) => (
                Some(outcome.provenance),
                Some(outcome.verdict.clone()),
                None,
            ),
            Err(error) => (None, None, Some(error.to_string())),
        };
        self.finished(Step::Verify, provenance, verdict, None, error);
    }

    fn timed(&self, outcome: &Result<TimeOutcome, EvalError>) {
        match outcome {
            Ok(outcome) => self.finished(
                Step::Time,
                Some(outcome.provenance),
                None,
                Some(outcome.timing.median_ms),
                None,
            ),
            Err(error) => self.finished(Step::Time, None, None, None, Some(error.to_string())),
        }
    }

    fn finished(
        &self,
        step: Step,
        provenance: Option<crate::model::Provenance>,
        verdict: Option<crate::model::Verdict>,
        time_ms: Option<f64>,
        error: Option<String>,
    ) {
        self.collector.do_send(Record(Event::StepFinished {
            candidate: self.candidate,
            parent: self.parent,
            round: self.round,
            device: self.device,
            step,
            provenance,
            verdict,
            time_ms,
            error,
        }));
    }
}

/// Resolves when the run is told to stop.
async fn stopped(mut stop: watch::Receiver<bool>) {
    let _ = stop.wait_for(|stopping| *stopping).await;
}

impl Handler<Evaluate> for GpuWorker {
    type Result = AtomicResponse<Self, Evaluated>;

    fn handle(&mut self, message: Evaluate, _: &mut Context<Self>) -> Self::Result {
        let mut evaluator = self.take_evaluator();
        let log = StepLog {
            collector: self.collector.clone(),
            candidate: message.job.candidate,
            parent: message.parent,
            round: message.round,
            device: self.device,
        };
        let stop = self.stop.clone();
        let job = message.job;
        let timed_code = message.timed_code;
        let work = async move {
            let outcome = {
                let steps = async {
                    log.started(Step::Verify);
                    let verify = evaluator.verify(&job).await;
                    log.evaluator_started(evaluator.take_started());
                    log.verified(&verify);
                    let passed = matches!(&verify, Ok(outcome) if outcome.verdict.passed());
                    if !passed {
                        return Evaluated {
                            verify,
                            time: None,
                            same_code_as: None,
                        };
                    }
                    let same_code_as = verify
                        .as_ref()
                        .ok()
                        .and_then(|outcome| outcome.compiled.as_ref())
                        .and_then(|code| timed_code.borrow().get(code).copied())
                        .filter(|earlier| *earlier != job.candidate);
                    if same_code_as.is_some() {
                        return Evaluated {
                            verify,
                            time: None,
                            same_code_as,
                        };
                    }
                    log.started(Step::Time);
                    let time = evaluator.time(&job).await;
                    log.timed(&time);
                    Evaluated {
                        verify,
                        time: Some(time),
                        same_code_as: None,
                    }
                };
                tokio::select! {
                    evaluated = steps => evaluated,
                    () = stopped(stop) => Evaluated {
                        verify: Err(EvalError::Rejected("the run is stopping".into())),
                        time: None,
                        same_code_as: None,
                    },
                }
            };
            (evaluator, outcome)
        };
        self.give_back(work)
    }
}

impl Handler<Profile> for GpuWorker {
    type Result = AtomicResponse<Self, Result<ProfileSummary, ProfileError>>;

    fn handle(&mut self, message: Profile, _: &mut Context<Self>) -> Self::Result {
        let log = StepLog {
            collector: self.collector.clone(),
            candidate: message.job.candidate,
            parent: None,
            round: message.round,
            device: self.device,
        };
        let profiling = self.profiling.clone();
        let evaluator = self.evaluator.take();
        let work = async move {
            let Some(profiling) = profiling else {
                return (
                    evaluator,
                    Err(ProfileError::Unavailable(
                        "profiling is switched off for this run".into(),
                    )),
                );
            };
            let mut evaluator = evaluator;
            if profiling.stop_evaluator
                && let Some(evaluator) = evaluator.as_mut()
            {
                // It starts again with the next verification.
                evaluator.shutdown().await;
            }
            let profiler = profiling.profiler;
            log.started(Step::Profile);
            let result = profiler
                .send(RunProfile(message.job))
                .await
                .unwrap_or_else(|_| Err(ProfileError::Failed("the profiler actor is gone".into())));
            let error = result.as_ref().err().map(ToString::to_string);
            log.finished(
                Step::Profile,
                None,
                None,
                result.as_ref().ok().and_then(|p| p.duration_ms),
                error,
            );
            (evaluator, result)
        };
        AtomicResponse::new(Box::pin(work.into_actor(self).map(
            |(evaluator, result), worker, _| {
                worker.evaluator = evaluator;
                result
            },
        )))
    }
}

impl Handler<TimeReferences> for GpuWorker {
    type Result = AtomicResponse<Self, Vec<Event>>;

    fn handle(&mut self, message: TimeReferences, _: &mut Context<Self>) -> Self::Result {
        let mut evaluator = self.take_evaluator();
        let log = StepLog {
            collector: self.collector.clone(),
            candidate: CandidateId::INITIAL,
            parent: None,
            round: 0,
            device: self.device,
        };
        let stop = self.stop.clone();
        let work = async move {
            let mut times = Vec::new();
            let measure = async {
                for which in [Reference::Eager, Reference::Compile] {
                    log.started(Step::Reference);
                    let outcome = evaluator.time_reference(which, message.deadline).await;
                    let (time_ms, provenance, error) = figures(&outcome);
                    log.finished(Step::Reference, provenance, None, time_ms, error.clone());
                    times.push(Event::ReferenceTimed {
                        device: log.device,
                        which,
                        time_ms,
                        provenance,
                        error,
                    });
                }
            };
            tokio::select! {
                () = measure => {}
                () = stopped(stop) => {}
            }
            (evaluator, times)
        };
        self.give_back(work)
    }
}

impl Handler<Finale> for GpuWorker {
    type Result = AtomicResponse<Self, Vec<(CandidateId, String)>>;

    fn handle(&mut self, message: Finale, _: &mut Context<Self>) -> Self::Result {
        let previous = shut_down(self.evaluator.take());
        let mut fresh = self.factory.start_recheck(self.device);
        let collector = self.collector.clone();
        let work = async move {
            previous.await;
            let record =
                |pass, candidate, reference, outcome: Result<Option<TimeOutcome>, EvalError>| {
                    let (time_ms, provenance, error) = figures(&outcome);
                    let floor_ms = outcome
                        .as_ref()
                        .ok()
                        .and_then(Option::as_ref)
                        .and_then(|timed| timed.floor_ms);
                    collector.do_send(Record(Event::FinalTimed {
                        pass,
                        candidate,
                        reference,
                        time_ms,
                        provenance,
                        error,
                        floor_ms,
                        speed_of_light_pct: floor_ms
                            .zip(time_ms)
                            .and_then(|(floor, time)| percent_of_light(floor, time)),
                    }));
                };
            let mut dropped: Vec<(CandidateId, String)> = Vec::new();
            for pass in 1..=2 {
                for (candidate, source, folder) in &message.kernels {
                    if dropped.iter().any(|(id, _)| id == candidate) {
                        continue;
                    }
                    let job = EvalJob {
                        candidate: *candidate,
                        source: source.clone(),
                        folder: folder.clone(),
                        deadline: message.deadline,
                    };
                    // `time` uses the module its verification loaded, so each kernel is verified
                    // again before it is timed; the first verification is the re-check.
                    let failure = match fresh.verify(&job).await {
                        Ok(verified) => match verified.verdict {
                            Verdict::Passed { .. } => None,
                            Verdict::Failed { reason } => Some(reason),
                        },
                        Err(error) => Some(error.to_string()),
                    };
                    if pass == 1 {
                        collector.do_send(Record(Event::FinalRechecked {
                            candidate: *candidate,
                            passed: failure.is_none(),
                            reason: failure.clone(),
                        }));
                    }
                    match failure {
                        None => record(
                            pass,
                            Some(*candidate),
                            None,
                            fresh.time(&job).await.map(Some),
                        ),
                        Some(reason) if pass == 1 => dropped.push((*candidate, reason)),
                        Some(reason) => record(
                            pass,
                            Some(*candidate),
                            None,
                            Err(EvalError::Rejected(format!("no longer passes: {reason}"))),
                        ),
                    }
                }
                for which in [Reference::Eager, Reference::Compile] {
                    let outcome = fresh.time_reference(which, message.deadline * 4).await;
                    record(pass, None, Some(which), outcome);
                }
            }
            (fresh, dropped)
        };
        AtomicResponse::new(Box::pin(work.into_actor(self).map(
            |(fresh, dropped), worker, _| {
                worker.evaluator = Some(fresh);
                dropped
            },
        )))
    }
}

impl Handler<RunUserTest> for GpuWorker {
    type Result = AtomicResponse<Self, Result<Option<UserTestOutcome>, EvalError>>;

    fn handle(&mut self, message: RunUserTest, _: &mut Context<Self>) -> Self::Result {
        let mut evaluator = self.take_evaluator();
        let work = async move {
            let outcome = evaluator
                .run_user_test(&message.folder, message.deadline)
                .await;
            (evaluator, outcome)
        };
        self.give_back(work)
    }
}

impl Handler<ShutdownWorker> for GpuWorker {
    type Result = AtomicResponse<Self, ()>;

    fn handle(&mut self, _: ShutdownWorker, _: &mut Context<Self>) -> Self::Result {
        let work = shut_down(self.evaluator.take());
        AtomicResponse::new(Box::pin(work.into_actor(self).map(|(), _, ctx| ctx.stop())))
    }
}

/// Ends the worker's evaluator, if it has one.
async fn shut_down(evaluator: Option<Box<dyn DeviceEvaluator>>) {
    if let Some(mut evaluator) = evaluator {
        evaluator.shutdown().await;
    }
}

/// A timing's figures as a record holds them: the median and its provenance, or the error.
fn figures(
    outcome: &Result<Option<TimeOutcome>, EvalError>,
) -> (
    Option<f64>,
    Option<crate::model::Provenance>,
    Option<String>,
) {
    match outcome {
        Ok(Some(outcome)) => (
            Some(outcome.timing.median_ms),
            Some(outcome.provenance),
            None,
        ),
        Ok(None) => (None, None, None),
        Err(error) => (None, None, Some(error.to_string())),
    }
}
