//! A run's figures in brief, for `kactors run --strategy all` to compare its runs by.

use std::time::Duration;

use super::RunSummary;
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
        }
    }
}
