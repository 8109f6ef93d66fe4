//! A run taken up from its journal: the state folded from the records once, the replies the
//! dead process kept but never journaled read back through the Collector, `run_resumed`
//! journaled whole, the best kernel written again, then what was in flight taken again
//! (`SearchState::resume`).

use std::collections::{BTreeSet, HashMap};

use actix::prelude::*;

use crate::collector::{BestChanged, KeptReplyWanted, ReadKeptReplies};
use crate::journal::{Event, JournalRecord};
use crate::llm_broker::KeptReplies;
use crate::model::CandidateId;
use crate::ports::LlmReply;
use crate::search_state::SearchState;

use super::Manager;

/// How a resumed run goes on from the journal its earlier process left, with what the resuming
/// command found out about that process (for `run_resumed`).
#[derive(Clone, Debug)]
pub struct Resume {
    /// The journal's records, a torn last line left out.
    pub records: Vec<JournalRecord>,
    /// The candidates being evaluated on a device when the last process died and when the one
    /// before it died (`History::in_flight_at_two_deaths`): they are not tried a third time.
    pub in_flight_at_two_deaths: BTreeSet<CandidateId>,
    /// How the previous process ended (`History::previous_end`).
    pub previous_end: String,
    /// Seconds from the journal's last record to this resume.
    pub gap_s: f64,
    /// Process groups the dead process left running, ended before this one started.
    pub orphans_ended: u32,
    /// Whether the journal's torn last line was cut off.
    pub torn_line: bool,
    /// What `--force` let change since the run started.
    pub forced_changes: Vec<String>,
}

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
        let wanted = self
            .state
            .pending_requests()
            .iter()
            .map(|request| {
                let exchange = request.exchange();
                KeptReplyWanted {
                    request_id: request.request_id.clone(),
                    candidate: exchange.candidate,
                    name: exchange.reply,
                }
            })
            .collect();
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
        let mut recovered_ids: Vec<String> = recovered.keys().cloned().collect();
        recovered_ids.sort();
        self.recovered = recovered;
        self.record(Event::RunResumed {
            previous_end: resume.previous_end,
            gap_s: resume.gap_s,
            in_flight: self.state.in_flight(),
            pending_requests: self
                .state
                .pending_requests()
                .iter()
                .map(|request| request.request_id.clone())
                .collect(),
            recovered: recovered_ids,
            orphans_ended: resume.orphans_ended,
            torn_line: resume.torn_line,
            forced_changes: resume.forced_changes,
        });
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
