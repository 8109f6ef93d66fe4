//! max_time, as the Manager keeps it: a timer at each of `TimeLimit`'s three moments. At the
//! first proposals stop, at the second what is still being evaluated is cancelled and the
//! search ends, at the third a finale still running is cut short, so that the process has
//! exited by max_time.

use std::time::Duration;

use actix::prelude::*;

use crate::time_limit::FINALE_CUT_SHORT;

use super::Manager;

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
        let (record, reason) = limit.reached(evaluations_cancelled);
        self.stop(record, &reason, ctx);
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
                done.reason.push_str(FINALE_CUT_SHORT);
            }
        }
        self.hand_over_when_quiet();
    }

    /// Why the finale is skipped, if it is (`TimeLimit::finale_would_overrun`), by the run's
    /// clock.
    pub(super) fn finale_would_overrun(&self) -> Option<&'static str> {
        let left = self.hand_over_by?.duration_since(self.clock.now());
        let limit = self.settings.time_limit.as_ref()?;
        limit.finale_would_overrun(left.unwrap_or(Duration::ZERO))
    }
}
