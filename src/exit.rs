//! Exit codes, documented in the README and in `kactors --help`.

use actors::journal::RunOutcome;

/// The run ended as planned: rounds done, converged, a limit reached, also when nothing beat
/// the initial kernel.
pub const SUCCESS: i32 = 0;
/// A run that started and could not go on: the initial kernel fails verification, the LLM
/// provider refuses the credentials, no LLM request succeeded, the run directory cannot be
/// written, an actor died.
pub const RUN_FAILED: i32 = 1;
/// Refused before the run started, nothing evaluated: bad usage, configuration, input or
/// environment (no GPU visible, a required tool missing).
pub const USAGE: i32 = 2;
/// Interrupted by SIGINT or SIGTERM.
pub const INTERRUPTED: i32 = 130;

pub fn of_outcome(outcome: RunOutcome) -> i32 {
    match outcome {
        RunOutcome::Completed => SUCCESS,
        RunOutcome::Failed => RUN_FAILED,
        RunOutcome::Interrupted => INTERRUPTED,
        RunOutcome::Refused => USAGE,
    }
}
