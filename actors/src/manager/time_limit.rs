//! max_time, as the Manager keeps it. Three moments, counted from the process's start (less what
//! the run's earlier processes spent): proposals stop early enough for what is being evaluated
//! to end within its grace and for the finale to fit; at the grace's end what is still being
//! evaluated is cancelled and the search ends; at the exit margin before the limit a finale
//! still running is cut short, so that the process has exited by max_time.

use std::time::Duration;

use actix::prelude::*;

use crate::journal::Event;

use super::Manager;

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
    fn moments(&self) -> (Duration, Duration, Duration) {
        let hand_over = self.remaining.saturating_sub(self.exit_margin);
        let cancel = hand_over.saturating_sub(self.finale_reserve);
        let stop = cancel.saturating_sub(self.evaluation_grace);
        (stop, cancel, hand_over)
    }

    fn reason(&self) -> String {
        format!("max_time ({}) reached", self.label)
    }
}

impl Manager {
    /// Sets the limit's timers; called once, when the run starts or resumes.
    pub(super) fn arm_time_limit(&mut self, ctx: &mut Context<Self>) {
        let Some(limit) = self.settings.time_limit.clone() else {
            return;
        };
        let (stop, cancel, hand_over) = limit.moments();
        self.hand_over_by = Some(self.clock.now() + hand_over);
        ctx.run_later(stop, |manager, ctx| manager.time_limit_reached(false, ctx));
        ctx.run_later(cancel, |manager, ctx| manager.time_limit_reached(true, ctx));
        ctx.run_later(hand_over, |manager, ctx| manager.out_of_time(ctx));
    }

    /// Stops proposals (and cancels the requests in flight), or, once the grace is over, ends
    /// the search as planned with whatever is still being evaluated cancelled.
    fn time_limit_reached(&mut self, evaluations_cancelled: bool, ctx: &mut Context<Self>) {
        let Some(limit) = &self.settings.time_limit else {
            return;
        };
        if self.done.is_some() || self.handed_over() {
            return;
        }
        let reason = limit.reason();
        self.step(
            Event::LimitReached {
                limit: "max_time".into(),
                reason: reason.clone(),
                evaluations_cancelled,
            },
            ctx,
        );
        self.cancel_requests(&reason, ctx);
    }

    /// The run must be handed over now: a finale still running is cut short and said so.
    fn out_of_time(&mut self, ctx: &mut Context<Self>) {
        if self.handed_over() {
            return;
        }
        self.time_limit_reached(true, ctx);
        if self.finale_running {
            self.finale_running = false;
            if let Some(done) = &mut self.done {
                done.reason
                    .push_str("; the finale was cut short to end by max_time");
            }
        }
        self.hand_over_when_quiet();
    }

    /// Why the finale is skipped, if it is: it would not end by the time the run must be
    /// handed over. A search that ends when its evaluations are cancelled has the finale's
    /// reserve left, less the lateness of a timer: a tenth of the reserve is allowed for it.
    pub(super) fn finale_would_overrun(&self) -> Option<&'static str> {
        let limit = self.settings.time_limit.as_ref()?;
        let hand_over_by = self.hand_over_by?;
        let left = hand_over_by
            .duration_since(self.clock.now())
            .unwrap_or(Duration::ZERO);
        (left + limit.finale_reserve / 10 < limit.finale_reserve)
            .then_some("the finale was skipped: it would not end by max_time")
    }
}

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
}
