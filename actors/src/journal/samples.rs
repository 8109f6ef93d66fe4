//! Records the unit tests of the journal and the search state build on.

use super::Event;

/// A `run_started` of the noop platform with `initial_source` as candidate 0.
pub(crate) fn run_started(initial_source: &str) -> Event {
    Event::RunStarted {
        strategy: "test".into(),
        platform: "noop".into(),
        simulated: true,
        search: "beam_search".into(),
        num_top_kernels: 1,
        num_bottlenecks: 1,
        max_rounds: 1,
        devices: Vec::new(),
        initial_source: initial_source.into(),
        sandbox: None,
    }
}
