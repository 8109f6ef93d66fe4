//! Each problem's result, read from its run's journal, and the suite's figures as KernelBench
//! defines them. KernelBench's `fastp` (src/score.py of ScalingIntelligence/KernelBench) is the
//! number of problems whose kernel is correct and whose speedup (the baseline's time over the
//! kernel's) is above p, strictly, over the number of all problems; fast_0 is then the share
//! of problems that are correct. A problem that did not run, or ran out of time with no
//! verified kernel, counts in the denominator as incorrect.

use std::path::PathBuf;

use actors::journal::RunOutcome;
use actors::report::{BestFigures, Headline};

/// The thresholds the bench reports fast_p at, beside fast_0.
pub const FAST_P: [f64; 3] = [1.0, 1.5, 2.0];

/// How a problem's run ended, as far as the bench knows.
#[derive(Clone, Debug, PartialEq)]
pub enum Status {
    /// The run ended by itself with this exit code (0 ran as planned, 1 failed, 2 refused).
    Ended { exit_code: i32 },
    /// The bench ended it, or it was interrupted or killed: `kactors bench --resume` goes on.
    NotFinished { why: String },
    /// Never started: why.
    NotStarted { why: String },
}

/// One problem of the bench with what its run's journal says.
#[derive(Clone, Debug, PartialEq)]
pub struct ProblemResult {
    pub name: String,
    pub status: Status,
    pub run_dir: Option<PathBuf>,
    /// The run's figures; none without a readable journal (a run refused before it started).
    pub headline: Option<Headline>,
    /// The run's last error line (`kactors: error: …`) from its output: why a run refused
    /// before it made a run directory was refused.
    pub error: Option<String>,
}

impl ProblemResult {
    /// The best verified kernel's figures: a correct problem has them.
    pub fn figures(&self) -> Option<&BestFigures> {
        self.headline.as_ref()?.figures.as_ref()
    }

    pub fn correct(&self) -> bool {
        self.figures().is_some()
    }

    /// How the run ended, in words: the run's own outcome and reason where its journal has
    /// them, else the bench's.
    pub fn ending(&self) -> String {
        let recorded = self
            .headline
            .as_ref()
            .and_then(|headline| headline.outcome.as_ref());
        match (&self.status, recorded) {
            (Status::NotFinished { why }, _) => format!("not finished: {why}"),
            (Status::NotStarted { why }, _) => format!("not started: {why}"),
            (Status::Ended { .. }, Some((outcome, reason))) => {
                format!("{}: {reason}", outcome_name(*outcome))
            }
            (Status::Ended { exit_code }, None) => match &self.error {
                Some(error) => format!("exit {exit_code}, refused before it started: {error}"),
                None => format!("exit {exit_code}, without a run directory"),
            },
        }
    }

    pub fn simulated(&self) -> bool {
        self.headline.as_ref().is_some_and(|h| h.simulated)
    }
}

fn outcome_name(outcome: RunOutcome) -> &'static str {
    match outcome {
        RunOutcome::Completed => "completed",
        RunOutcome::Failed => "failed",
        RunOutcome::Interrupted => "interrupted",
        RunOutcome::Refused => "refused",
    }
}

/// What a kernel is compared with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Baseline {
    Eager,
    Compile,
}

impl Baseline {
    pub const BOTH: [Baseline; 2] = [Baseline::Eager, Baseline::Compile];

    pub fn key(self) -> &'static str {
        match self {
            Baseline::Eager => "eager",
            Baseline::Compile => "compile",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Baseline::Eager => "PyTorch eager",
            Baseline::Compile => "torch.compile",
        }
    }

    pub fn speedup(self, figures: &BestFigures) -> Option<f64> {
        match self {
            Baseline::Eager => figures.speedup_over_eager(),
            Baseline::Compile => figures.speedup_over_compile(),
        }
    }
}

/// The suite's figures.
#[derive(Clone, Debug, PartialEq)]
pub struct SuiteFigures {
    pub problems: usize,
    pub correct: usize,
    pub fast_0: f64,
    /// fast_p at each of `FAST_P`, against eager and against torch.compile.
    pub fast_p: Vec<(Baseline, Vec<(f64, f64)>)>,
}

/// KernelBench's fastp: correct and more than `p` times faster than `baseline`, over all.
pub fn fast_p(results: &[ProblemResult], baseline: Baseline, p: f64) -> f64 {
    if results.is_empty() {
        return 0.0;
    }
    let fast = results
        .iter()
        .filter_map(ProblemResult::figures)
        .filter(|figures| baseline.speedup(figures).is_some_and(|speedup| speedup > p))
        .count();
    fast as f64 / results.len() as f64
}

pub fn suite_figures(results: &[ProblemResult]) -> SuiteFigures {
    let correct = results.iter().filter(|r| r.correct()).count();
    SuiteFigures {
        problems: results.len(),
        correct,
        fast_0: if results.is_empty() {
            0.0
        } else {
            correct as f64 / results.len() as f64
        },
        fast_p: Baseline::BOTH
            .into_iter()
            .map(|baseline| {
                let at = FAST_P
                    .iter()
                    .map(|&p| (p, fast_p(results, baseline, p)))
                    .collect();
                (baseline, at)
            })
            .collect(),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use actors::model::CandidateId;

    /// A problem whose best kernel took `time_ms`, eager 2 ms and torch.compile 1 ms; none: no
    /// kernel was verified.
    pub(crate) fn result(name: &str, time_ms: Option<f64>) -> ProblemResult {
        ProblemResult {
            name: name.into(),
            status: Status::Ended { exit_code: 0 },
            run_dir: None,
            headline: Some(Headline {
                strategy: "s".into(),
                simulated: false,
                outcome: Some((RunOutcome::Completed, "max_rounds (1) reached".into())),
                best: time_ms.map(|ms| (CandidateId(1), ms)),
                initial_ms: None,
                candidates: 1,
                wall: std::time::Duration::ZERO,
                figures: time_ms.map(|time_ms| BestFigures {
                    candidate: CandidateId(1),
                    time_ms,
                    start_ms: None,
                    eager_ms: Some(2.0),
                    compile_ms: Some(1.0),
                    retimed: true,
                    speed_of_light_pct: Some(50.0),
                }),
            }),
            error: None,
        }
    }

    #[test]
    fn fast_p_counts_correct_kernels_strictly_faster_than_p_over_every_problem() {
        let results = [
            result("a", Some(0.5)), // 4× eager, 2× compile
            result("b", Some(1.0)), // 2× eager, 1× compile
            result("c", Some(4.0)), // 0.5× eager
            result("d", None),      // no kernel
        ];
        let figures = suite_figures(&results);
        assert_eq!((figures.problems, figures.correct), (4, 3));
        assert_eq!(figures.fast_0, 0.75);
        assert_eq!(
            figures.fast_p,
            vec![
                (Baseline::Eager, vec![(1.0, 0.5), (1.5, 0.5), (2.0, 0.25)]),
                (
                    Baseline::Compile,
                    vec![(1.0, 0.25), (1.5, 0.25), (2.0, 0.0)]
                ),
            ]
        );
    }

    #[test]
    fn a_problem_without_a_reference_time_is_correct_but_never_fast() {
        let mut simulated = result("a", Some(0.5));
        if let Some(headline) = &mut simulated.headline
            && let Some(figures) = &mut headline.figures
        {
            figures.eager_ms = None;
        }
        let figures = suite_figures(&[simulated]);
        assert_eq!(figures.fast_0, 1.0);
        assert_eq!(
            figures.fast_p[0],
            (Baseline::Eager, vec![(1.0, 0.0), (1.5, 0.0), (2.0, 0.0)])
        );
        assert_eq!(suite_figures(&[]).fast_0, 0.0);
    }
}
