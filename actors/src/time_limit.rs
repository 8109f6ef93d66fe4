//! A run's max_time as the search keeps it: three moments, counted from the process's start
//! (less what the run's earlier processes spent). Proposals stop early enough for what is being
//! evaluated to end within its grace and for the finale to fit; at the grace's end what is
//! still being evaluated is cancelled; at the exit margin before the limit the run is handed
//! over. The configuration builds it; the Manager's timers (manager/time_limit.rs) keep it.

use std::time::Duration;

use crate::journal::Event;

/// A run's max_time and the spans kept free before it.
#[derive(Clone, Debug, PartialEq)]
pub struct TimeLimit {
    /// As written (`8h`): the limit's name in `run_finished`'s reason.
    pub label: String,
    /// max_time less the search time the run's earlier processes spent.
    pub remaining: Duration,
    /// How long an evaluation in flight may go on once proposals stop.
    pub evaluation_grace: Duration,
    /// How long the finale may take.
    pub finale_reserve: Duration,
    /// Kept free at the end for the shutdown: children ended, reports written.
    pub exit_margin: Duration,
}

impl TimeLimit {
    /// From the start: when proposals stop, when evaluations are cancelled, when the run must
    /// be handed over. A limit too short for all of it stops proposals at once.
    pub(crate) fn moments(&self) -> (Duration, Duration, Duration) {
        let hand_over = self.remaining.saturating_sub(self.exit_margin);
        let cancel = hand_over.saturating_sub(self.finale_reserve);
        let stop = cancel.saturating_sub(self.evaluation_grace);
        (stop, cancel, hand_over)
    }

    pub(crate) fn reason(&self) -> String {
        format!("max_time ({}) reached", self.label)
    }

    /// The record of a moment reached: proposals stop, or (`evaluations_cancelled`) the search
    /// ends; and the reason the requests in flight are cancelled for.
    pub(crate) fn reached(&self, evaluations_cancelled: bool) -> (Event, String) {
        let reason = self.reason();
        let record = Event::LimitReached {
            limit: "max_time".into(),
            reason: reason.clone(),
            evaluations_cancelled,
        };
        (record, reason)
    }

    /// Why the finale is skipped, if it is, with `left` until the run must be handed over: it
    /// would not end by then. A search that ends when its evaluations are cancelled has the
    /// finale's reserve left, less the lateness of a timer: a tenth of the reserve is allowed
    /// for it.
    pub(crate) fn finale_would_overrun(&self, left: Duration) -> Option<&'static str> {
        (left + self.finale_reserve / 10 < self.finale_reserve)
            .then_some("the finale was skipped: it would not end by max_time")
    }
}

/// What the run's reason adds when the finale still running at the hand-over was cut short.
pub(crate) const FINALE_CUT_SHORT: &str = "; the finale was cut short to end by max_time";

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(remaining_s: u64) -> TimeLimit {
        TimeLimit {
            label: "1h".into(),
            remaining: Duration::from_secs(remaining_s),
            evaluation_grace: Duration::from_secs(60),
            finale_reserve: Duration::from_secs(90),
            exit_margin: Duration::from_secs(10),
        }
    }

    #[test]
    fn proposals_stop_early_enough_for_the_grace_the_finale_and_the_exit() {
        let (stop, cancel, hand_over) = limit(3600).moments();
        assert_eq!(hand_over, Duration::from_secs(3590));
        assert_eq!(cancel, Duration::from_secs(3500));
        assert_eq!(stop, Duration::from_secs(3440));
    }

    #[test]
    fn a_limit_too_short_for_everything_stops_proposals_at_once() {
        let (stop, cancel, hand_over) = limit(100).moments();
        assert_eq!(stop, Duration::ZERO);
        assert_eq!(cancel, Duration::ZERO);
        assert_eq!(hand_over, Duration::from_secs(90));
        let (stop, cancel, hand_over) = limit(0).moments();
        assert_eq!(
            (stop, cancel, hand_over),
            (Duration::ZERO, Duration::ZERO, Duration::ZERO)
        );
    }

    #[test]
    fn the_reason_names_the_limit_as_written() {
        assert_eq!(limit(1).reason(), "max_time (1h) reached");
    }

    #[test]
    fn a_moment_reached_is_journaled_with_the_reason_its_requests_are_cancelled_for() {
        let (record, reason) = limit(1).reached(true);
        assert_eq!(
            record,
            Event::LimitReached {
                limit: "max_time".into(),
                reason: "max_time (1h) reached".into(),
                evaluations_cancelled: true,
            }
        );
        assert_eq!(reason, "max_time (1h) reached");
    }

    /// Issue 13: the finale runs only if it ends by the hand-over, a timer's lateness (a tenth
    /// of its reserve) allowed.
    #[test]
    fn the_finale_is_skipped_when_less_than_its_reserve_less_a_tenth_is_left() {
        let limit = limit(3600);
        assert_eq!(limit.finale_would_overrun(Duration::from_secs(90)), None);
        assert_eq!(limit.finale_would_overrun(Duration::from_secs(81)), None);
        assert_eq!(
            limit.finale_would_overrun(Duration::from_secs(80)),
            Some("the finale was skipped: it would not end by max_time")
        );
        assert!(limit.finale_would_overrun(Duration::ZERO).is_some());
    }
}
