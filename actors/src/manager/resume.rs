//! A run taken up from its journal: the state folded from the records, `run_resumed` journaled
//! with what the fold says was in flight, the best kernel written again, then what was in
//! flight taken again (`SearchState::resume`).

use std::collections::{BTreeSet, HashMap};

use actix::prelude::*;

use crate::collector::BestChanged;
use crate::journal::{Event, JournalRecord};
use crate::model::CandidateId;
use crate::ports::LlmReply;
use crate::search_state::SearchState;

use super::Manager;

/// How a resumed run goes on from the journal its earlier process left.
#[derive(Clone, Debug)]
pub struct Resume {
    /// The journal's records, a torn last line left out.
    pub records: Vec<JournalRecord>,
    /// The candidates being evaluated on a device when the last process died and when the one
    /// before it died (`History::in_flight_at_two_deaths`): they are not tried a third time.
    pub in_flight_at_two_deaths: BTreeSet<CandidateId>,
    /// `run_resumed`, as the resuming command knows it; the Manager adds what the fold says.
    pub resumed: Event,
    /// Replies kept on disk for requests the journal has no `*_received` for (the process died
    /// between the two): used instead of asking again, by request id.
    pub recovered: HashMap<String, LlmReply>,
}

/// Go on with a run from its journal.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ResumeRun(pub Resume);

impl Handler<ResumeRun> for Manager {
    type Result = ();

    /// The state is the fold of the journal; `run_resumed` says what was in flight; what was
    /// in flight twice fails, the rest is taken again.
    fn handle(&mut self, message: ResumeRun, ctx: &mut Context<Self>) {
        let resume = message.0;
        self.arm_time_limit(ctx);
        self.recovered = resume.recovered;
        let (state, unjournaled) = SearchState::fold(
            self.settings.search_config(),
            resume.records.iter().map(|record| &record.event),
        );
        self.state = state;
        for record in unjournaled {
            self.record(record);
        }
        let mut resumed = resume.resumed;
        if let Event::RunResumed {
            in_flight,
            pending_requests,
            ..
        } = &mut resumed
        {
            *in_flight = self.state.in_flight();
            *pending_requests = self
                .state
                .pending_requests()
                .iter()
                .map(|request| request.request_id.clone())
                .collect();
        }
        self.record(resumed);
        if let Some(best) = self.state.best_verified() {
            self.peers.collector.do_send(BestChanged {
                candidate: best.id,
                time_ms: best.time_ms,
                source: best.source.text().to_string(),
            });
        }
        let (failures, decisions) = self.state.resume(&resume.in_flight_at_two_deaths);
        let mut inputs = Vec::new();
        for decision in decisions {
            inputs.extend(self.carry_out(decision, ctx));
        }
        for input in failures.into_iter().chain(inputs) {
            self.step(input, ctx);
        }
        self.hand_over_when_quiet();
    }
}
