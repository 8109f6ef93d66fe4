//! A run taken up from its journal: the state folded from the records once, the replies the
//! dead process kept but never journaled read back through the Collector, `run_resumed`
//! journaled whole, the best kernel written again, then what was in flight taken again
//! (`SearchState::resume`).

use std::collections::HashMap;

use actix::prelude::*;

use crate::collector::{BestChanged, KeptReplyWanted, ReadKeptReplies};
use crate::llm_broker::KeptReplies;
use crate::ports::LlmReply;
use crate::search_state::{Resume, SearchState};

use super::Manager;

/// Go on with a run from its journal.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ResumeRun(pub Resume);

impl Handler<ResumeRun> for Manager {
    type Result = ();

    /// The state is the fold of the journal. The replies kept for its pending requests are read
    /// back before anything else is taken: `run_resumed` names them, and they answer their
    /// requests instead of the provider.
    fn handle(&mut self, message: ResumeRun, ctx: &mut Context<Self>) {
        let resume = message.0;
        self.arm_time_limit(ctx);
        let (state, unjournaled) = SearchState::fold(
            self.settings.search.clone(),
            resume.records.iter().map(|record| &record.event),
        );
        self.state = state;
        for record in unjournaled {
            self.record(record);
        }
        let pending = self.state.pending_requests();
        let wanted = pending.into_iter().map(KeptReplyWanted::of).collect();
        let read = self.peers.collector.send(ReadKeptReplies(wanted));
        let broker = self.peers.broker.clone();
        let recovering = async move {
            let (ids, texts): (Vec<String>, Vec<String>) =
                read.await.unwrap_or_default().into_iter().unzip();
            let replies = broker.send(KeptReplies(texts)).await.unwrap_or_default();
            ids.into_iter().zip(replies).collect()
        };
        ctx.wait(
            recovering
                .into_actor(self)
                .map(move |recovered, manager, ctx| manager.go_on(resume, recovered, ctx)),
        );
    }
}

impl Manager {
    /// `run_resumed` journaled with what the fold says was in flight and what was recovered;
    /// what was in flight twice fails, the rest is taken again.
    fn go_on(
        &mut self,
        resume: Resume,
        recovered: HashMap<String, LlmReply>,
        ctx: &mut Context<Self>,
    ) {
        self.record(self.state.run_resumed(&resume, recovered.keys()));
        self.recovered = recovered;
        if let Some(best) = self.state.best_verified() {
            self.peers.collector.do_send(BestChanged::of(&best));
        }
        let (failures, decisions) = self.state.resume(&resume.in_flight_at_two_deaths);
        let inputs = self.carry_out_all(decisions, ctx);
        for input in failures.into_iter().chain(inputs) {
            self.step(input, ctx);
        }
        self.hand_over_when_quiet();
    }
}
