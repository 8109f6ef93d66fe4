//! The end of a run that ended as planned: the initial kernel and the final beam checked once
//! more on draws no candidate saw, then timed again with PyTorch's references in one fresh
//! evaluator, interleaved (the report's headline); a kernel that fails the re-check leaves the
//! final beam and the next fastest becomes the best (issue 18); the best kernel profiled if it
//! has no profile yet; the best kernel staged beside problem.py and test.py in `final/`, and the
//! user's own test.py run there.

use std::path::PathBuf;
use std::time::Duration;

use actix::Addr;

use crate::collector::{Collector, PrepareCandidate, PrepareFolder, Record};
use crate::gpu_worker::{Finale, GpuWorker, Profile, RunUserTest};
use crate::journal::Event;
use crate::model::{CandidateId, DeviceId, KernelSource, RankedKernel};
use crate::ports::{ProfileError, ProfileJob, UserTestOutcome};

/// What the finale needs; it runs on one device's worker.
pub struct FinaleJob {
    /// The initial kernel first, then the beam's members.
    pub kernels: Vec<(CandidateId, KernelSource)>,
    /// The final beam, fastest first: the best is the first that passes the re-check.
    pub beam: Vec<RankedKernel>,
    /// Whether a kernel has a profile already: profiling is off, or it was profiled.
    pub needs_profile: Box<dyn Fn(CandidateId) -> bool>,
    pub device: DeviceId,
    pub worker: Addr<GpuWorker>,
    pub collector: Addr<Collector>,
    pub deadline: Duration,
    /// problem.py and test.py, as they were when the run started.
    pub final_files: Vec<(String, String)>,
}

/// What the finale found.
pub struct FinaleOutcome {
    /// The best kernel after the re-check: None when no member of the final beam passed it.
    pub best: Option<RankedKernel>,
    /// The best kernel's profile record (`profile_recorded` or `profile_failed`) when it was
    /// profiled, for the Manager to journal and apply.
    pub profile: Option<Event>,
}

/// Runs the finale.
pub async fn run(mut job: FinaleJob) -> FinaleOutcome {
    let mut folders = Vec::new();
    for (candidate, source) in std::mem::take(&mut job.kernels) {
        let prepared = job.collector.send(PrepareCandidate {
            candidate,
            files: Vec::new(),
        });
        if let Ok(Ok(folder)) = prepared.await {
            folders.push((candidate, source, folder));
        }
    }
    let dropped = job
        .worker
        .send(Finale {
            kernels: folders.clone(),
            deadline: job.deadline,
        })
        .await
        .unwrap_or_default();
    let Some(best) = job
        .beam
        .iter()
        .find(|member| dropped.iter().all(|(id, _)| *id != member.id))
        .cloned()
    else {
        return FinaleOutcome {
            best: None,
            profile: None,
        };
    };
    let profile = match folders.iter().find(|(id, _, _)| *id == best.id) {
        Some((candidate, source, folder)) if (job.needs_profile)(best.id) => {
            Some(profile_best(&job, &best, *candidate, source, folder.clone()).await)
        }
        _ => None,
    };
    let mut staged = std::mem::take(&mut job.final_files);
    // kernel.py for the user's test.py; input.py so that final/ is a kernel directory a later
    // `kactors run` takes as it is.
    for name in ["kernel.py", "input.py"] {
        staged.push((name.into(), best.source.text().to_string()));
    }
    let event = user_test(&job.worker, &job.collector, staged, job.deadline).await;
    job.collector.do_send(Record(event));
    FinaleOutcome {
        best: Some(best),
        profile,
    }
}

async fn profile_best(
    job: &FinaleJob,
    best: &RankedKernel,
    candidate: CandidateId,
    source: &KernelSource,
    folder: PathBuf,
) -> Event {
    let profile = ProfileJob {
        candidate,
        source: source.clone(),
        folder,
        device: job.device,
        kernel_names: best.launched_kernels.clone(),
    };
    let answer = job.worker.send(Profile {
        job: profile,
        round: 0,
    });
    match answer.await {
        Ok(Ok(profile)) => Event::ProfileRecorded {
            candidate,
            device: job.device,
            bottleneck: profile.bottleneck,
            duration_ms: profile.duration_ms,
            analysis: profile.analysis,
            at_roofline: profile.at_roofline,
            details: profile.details,
        },
        Ok(Err(error)) => Event::ProfileFailed {
            candidate,
            device: job.device,
            unavailable: matches!(error, ProfileError::Unavailable(_)),
            error: error.to_string(),
        },
        Err(_) => Event::ProfileFailed {
            candidate,
            device: job.device,
            error: "the worker stopped while profiling".into(),
            unavailable: false,
        },
    }
}

/// Stages the best kernel in `final/` and runs the user's test.py there, when the kernel
/// directory has one: without it kactors's own verification was the test.
async fn user_test(
    worker: &Addr<GpuWorker>,
    collector: &Addr<Collector>,
    staged: Vec<(String, String)>,
    deadline: Duration,
) -> Event {
    let ran = |folder: String, outcome: Result<Option<UserTestOutcome>, String>| match outcome {
        Ok(Some(test)) => Event::UserTestRan {
            folder,
            passed: Some(test.passed),
            exit_code: test.exit_code,
            log: Some(test.log.display().to_string()),
            error: None,
            not_run: None,
        },
        Ok(None) => Event::UserTestRan {
            folder,
            passed: None,
            exit_code: None,
            log: None,
            error: None,
            not_run: None,
        },
        Err(error) => Event::UserTestRan {
            folder,
            passed: None,
            exit_code: None,
            log: None,
            error: Some(error),
            not_run: None,
        },
    };
    let has_test = staged.iter().any(|(name, _)| name == "test.py");
    let prepared = collector.send(PrepareFolder {
        name: "final".into(),
        files: staged,
    });
    let folder = match prepared.await {
        Ok(Ok(folder)) => folder,
        Ok(Err(error)) => return ran("final".into(), Err(error)),
        Err(_) => return ran("final".into(), Err("the collector is gone".into())),
    };
    if !has_test {
        return Event::UserTestRan {
            folder: folder.display().to_string(),
            passed: None,
            exit_code: None,
            log: None,
            error: None,
            not_run: Some("the kernel directory has no test.py".into()),
        };
    }
    let outcome = worker
        .send(RunUserTest {
            folder: folder.clone(),
            deadline,
        })
        .await;
    let outcome = match outcome {
        Ok(result) => result.map_err(|error| error.to_string()),
        Err(_) => Err("the worker stopped".into()),
    };
    ran(folder.display().to_string(), outcome)
}
