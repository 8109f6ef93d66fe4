//! A run's figures in brief, for `kactors run --strategy all` to compare its runs by and for
//! `kactors bench`'s table: the best kernel's time beside PyTorch's and the speed of light.

use std::time::Duration;

use super::{FinalSubject, RunSummary};
use crate::journal::RunOutcome;
use crate::model::CandidateId;

#[derive(Clone, Debug, PartialEq)]
pub struct Headline {
    pub strategy: String,
    pub simulated: bool,
    /// How the run finished; none for a journal without `run_finished`.
    pub outcome: Option<(RunOutcome, String)>,
    /// The fastest verified kernel and its time.
    pub best: Option<(CandidateId, f64)>,
    pub initial_ms: Option<f64>,
    /// Candidates whose fate the journal records, the initial kernel left out.
    pub candidates: usize,
    /// From `run_started` to `run_finished` (or the journal's last record), the time between a
    /// death and its resume left out.
    pub wall: Duration,
    /// The best kernel's figures; none when no kernel was verified.
    pub figures: Option<BestFigures>,
}

/// The best kernel's time and what it is compared with, all from one source: the finale's
/// re-timing where the run had one (the kernel and PyTorch's references timed again in one
/// fresh evaluator), the search's timings otherwise.
#[derive(Clone, Debug, PartialEq)]
pub struct BestFigures {
    pub candidate: CandidateId,
    pub time_ms: f64,
    /// The kernel the search started from: the initial kernel, or generation's first seed.
    pub start_ms: Option<f64>,
    pub eager_ms: Option<f64>,
    pub compile_ms: Option<f64>,
    /// Whether the figures are the finale's.
    pub retimed: bool,
    /// The search's time of the kernel as a percentage of the device's speed of light; none
    /// where the device has no floor.
    pub speed_of_light_pct: Option<f64>,
}

impl BestFigures {
    /// PyTorch eager's time over the kernel's: above 1 the kernel is faster.
    pub fn speedup_over_eager(&self) -> Option<f64> {
        speedup(self.eager_ms, self.time_ms)
    }

    pub fn speedup_over_compile(&self) -> Option<f64> {
        speedup(self.compile_ms, self.time_ms)
    }
}

fn speedup(baseline_ms: Option<f64>, time_ms: f64) -> Option<f64> {
    baseline_ms
        .filter(|_| time_ms > 0.0)
        .map(|baseline| baseline / time_ms)
        .filter(|ratio| ratio.is_finite())
}

impl RunSummary {
    pub fn headline(&self) -> Headline {
        Headline {
            strategy: self.strategy.clone(),
            simulated: self.simulated,
            outcome: self.outcome.clone(),
            best: self.best(),
            initial_ms: self.initial_ms,
            candidates: self
                .candidates
                .keys()
                .filter(|id| **id != CandidateId::INITIAL)
                .count(),
            wall: self.wall_time(),
            figures: self.best_figures(),
        }
    }

    pub fn best_figures(&self) -> Option<BestFigures> {
        let (best, search_ms) = self.best()?;
        let speed_of_light_pct = self.verification.percent(best);
        Some(match self.final_mean(FinalSubject::Kernel(best)) {
            Some(time_ms) => BestFigures {
                candidate: best,
                time_ms,
                start_ms: self.final_mean(FinalSubject::Kernel(self.start())),
                eager_ms: self.final_mean(FinalSubject::Eager),
                compile_ms: self.final_mean(FinalSubject::Compile),
                retimed: true,
                speed_of_light_pct,
            },
            None => BestFigures {
                candidate: best,
                time_ms: search_ms,
                start_ms: self.initial_ms,
                eager_ms: self.eager_ms,
                compile_ms: self.compile_ms,
                retimed: false,
                speed_of_light_pct,
            },
        })
    }
}
