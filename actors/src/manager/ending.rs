//! How the Manager ends a run: the search's end carried out (the finale first, for a run that
//! ended as planned, on a device with nothing in flight, unless max_time leaves no room for it),
//! the requests in flight cancelled on a stop, and the run handed to the Supervisor once the
//! finale is over and no reply is outstanding.

use actix::prelude::*;

use crate::finale::{self, FinaleJob};
use crate::journal::{Event, RunOutcome};
use crate::model::RankedKernel;
use crate::search_state::{Finale, FinaleKernels, SearchState};
use crate::supervision::RunDone;

use super::{Input, Manager, StopRun};

impl Manager {
    /// The search is over. A run that ended otherwise than as planned cancels its requests in
    /// flight; one that completed with a best kernel runs the finale first.
    pub(super) fn finish(
        &mut self,
        outcome: RunOutcome,
        reason: String,
        best: Option<RankedKernel>,
        initial: Option<RankedKernel>,
        ctx: &mut Context<Self>,
    ) {
        if outcome != RunOutcome::Completed {
            self.cancel_requests(&reason, ctx);
        }
        let initial_ms = initial.as_ref().map(|k| k.time_ms);
        let overrun = self.finale_would_overrun();
        let worker_of = |device| self.worker(device);
        let ending = self
            .state
            .ending(outcome, reason, best.clone(), initial, overrun, worker_of);
        self.done = Some(RunDone {
            outcome,
            reason: ending.reason,
            best,
            initial_ms,
            search: None,
        });
        let Some(Finale {
            device,
            worker,
            kernels: finale,
        }) = ending.finale
        else {
            return;
        };
        let FinaleKernels {
            kernels,
            beam,
            unprofiled,
        } = finale;
        let job = FinaleJob {
            kernels,
            beam,
            needs_profile: Box::new(move |id| unprofiled.contains(&id)),
            device,
            worker,
            collector: self.peers.collector.clone(),
            deadline: self.settings.step_deadline,
            final_files: self.settings.final_files.clone(),
        };
        self.finale_running = true;
        let me = ctx.address();
        ctx.spawn(
            async move {
                me.do_send(Input::FinaleDone(finale::run(job).await));
            }
            .into_actor(self),
        );
    }

    /// Journals every request in flight as cancelled, saying why.
    pub(super) fn cancel_requests(&mut self, reason: &str, ctx: &mut Context<Self>) {
        for cancelled in self.state.cancelled_by_the_end(reason) {
            self.step(cancelled, ctx);
        }
    }

    /// Journals and applies a record that stops the search from outside (a signal, a failure,
    /// max_time), then cancels the requests in flight for its reason.
    pub(super) fn stop(&mut self, record: Event, reason: &str, ctx: &mut Context<Self>) {
        self.step(record, ctx);
        self.cancel_requests(reason, ctx);
    }

    /// Whether the run's end went to the Supervisor: the Manager's guard is disarmed then.
    pub(super) fn handed_over(&self) -> bool {
        !self.death_notice.armed()
    }

    /// Hands the run's end to the Supervisor once the finale is over and every reply is in.
    pub(super) fn hand_over_when_quiet(&mut self) {
        if self.finale_running || !self.state.pending_requests().is_empty() {
            return;
        }
        if let Some(mut done) = self.done.take() {
            // Moved, not copied: a long run's state is the largest thing the process holds,
            // and a handed-over Manager steps no more input.
            let emptied = SearchState::new(self.settings.search.clone());
            done.search = Some(std::mem::replace(&mut self.state, emptied));
            self.death_notice.disarm();
            self.supervisor.done.do_send(done);
        }
    }
}

impl Handler<StopRun> for Manager {
    type Result = ();

    /// A run already in its finale waits for no reply: the finale's own steps end with the
    /// children the Supervisor is ending.
    fn handle(&mut self, message: StopRun, ctx: &mut Context<Self>) {
        let (record, reason) = message.why.record();
        self.stop(record, &reason, ctx);
        self.hand_over_when_quiet();
    }
}
