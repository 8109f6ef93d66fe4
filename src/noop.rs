//! The noop platform: no GPU, no Python, no profiler. It never runs a kernel; its verdicts and
//! times come from a deterministic model of the candidate's source and say so (Simulated), so
//! that a dry run exercises the whole runtime and no simulated number passes for a measured one.

use std::time::Duration;

use actors::model::{
    DeviceId, KernelSource, Provenance, Reference, TimeOutcome, Timing, Verdict, VerifyOutcome,
};
use std::path::Path;

use actors::ports::{
    DeviceEvaluator, EvalFuture, EvalJob, EvaluatorFactory, EvaluatorStart, LocalFuture,
    ReferenceTiming, UserTestRun,
};

/// The simulated verdict and time of a source: a pure function of its text.
pub fn simulate(source: &KernelSource) -> (Verdict, f64) {
    let digest = source.digest();
    let time_ms = 1.0 + ((digest >> 16) % 10_000) as f64 / 10_000.0;
    if !source.text().contains("def kernel_function") {
        return (
            Verdict::Failed {
                reason: "no kernel_function is defined (simulated)".into(),
            },
            time_ms,
        );
    }
    if digest % 7 == 3 {
        return (
            Verdict::Failed {
                reason: "output differs from the reference (simulated)".into(),
            },
            time_ms,
        );
    }
    (
        Verdict::Passed {
            max_abs_err: 0.0,
            max_rel_err: 0.0,
            rel_l2_err: None,
            rule: None,
        },
        time_ms,
    )
}

pub struct NoopEvaluatorFactory {
    /// The simulated duration of one evaluation, split between verification and timing.
    pub eval_time: Duration,
}

impl EvaluatorFactory for NoopEvaluatorFactory {
    fn start(&self, _device: DeviceId) -> Box<dyn DeviceEvaluator> {
        Box::new(NoopEvaluator {
            step_time: self.eval_time / 2,
        })
    }
}

struct NoopEvaluator {
    step_time: Duration,
}

impl DeviceEvaluator for NoopEvaluator {
    fn verify<'a>(&'a mut self, job: &'a EvalJob) -> EvalFuture<'a, VerifyOutcome> {
        Box::pin(async move {
            tokio::time::sleep(self.step_time).await;
            let (verdict, _) = simulate(&job.source);
            Ok(VerifyOutcome {
                verdict,
                provenance: Provenance::Simulated,
                launched_kernels: Vec::new(),
                compiled: None,
            })
        })
    }

    fn time<'a>(&'a mut self, job: &'a EvalJob) -> EvalFuture<'a, TimeOutcome> {
        Box::pin(async move {
            tokio::time::sleep(self.step_time).await;
            let (_, median_ms) = simulate(&job.source);
            let timing = Timing {
                median_ms,
                min_ms: median_ms,
                max_ms: median_ms,
                samples: 1,
            };
            // The noop platform moves no data: it has no floor.
            Ok(TimeOutcome {
                timing,
                provenance: Provenance::Simulated,
                floor_ms: None,
            })
        })
    }

    fn time_reference(&mut self, _: Reference, _: Duration) -> ReferenceTiming<'_> {
        Box::pin(async { Ok(None) })
    }

    fn run_user_test<'a>(&'a mut self, _: &'a Path, _: Duration) -> UserTestRun<'a> {
        Box::pin(async { Ok(None) })
    }

    fn take_started(&mut self) -> Option<EvaluatorStart> {
        None
    }

    fn shutdown(&mut self) -> LocalFuture<'_, ()> {
        Box::pin(async {})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_is_deterministic_and_depends_on_the_source() {
        let a = KernelSource::new("def kernel_function(x):\n    return x\n");
        let b = KernelSource::new("def kernel_function(x):\n    return x  # faster\n");
        assert_eq!(simulate(&a), simulate(&a));
        assert_ne!(simulate(&a).1, simulate(&b).1);
        assert!((1.0..2.0).contains(&simulate(&a).1));
    }

    #[test]
    fn a_source_without_kernel_function_fails() {
        let (verdict, _) = simulate(&KernelSource::new("print('hello')\n"));
        assert_eq!(
            verdict,
            Verdict::Failed {
                reason: "no kernel_function is defined (simulated)".into()
            }
        );
    }
}
