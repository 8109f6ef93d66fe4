//! The LLM requests sent and not answered yet. A run that ends before their replies journals
//! each as cancelled, so that in a finished journal every `*_requested` has its `*_received`; a
//! resumed run knows which requests were in flight.

use std::collections::BTreeMap;

use crate::journal::{Event, ReplyOutcome, code_file_name};
use crate::model::{CandidateId, RequestKind};

/// The files an LLM exchange is kept in, in the folder of the candidate it is about: the
/// prompt's and the reply's names. `kind` is the request's, `attempt` a refinement's number.
pub fn exchange_files(kind: RequestKind, attempt: u32) -> (String, String) {
    match (kind, attempt) {
        (RequestKind::Optimize | RequestKind::Seed, _) | (RequestKind::Refine, 0) => {
            ("prompt.md".into(), "reply.md".into())
        }
        (RequestKind::Refine, attempt) => (
            format!("prompt.refine{attempt}.md"),
            format!("reply.refine{attempt}.md"),
        ),
        (RequestKind::Analysis, _) => ("analysis.prompt.md".into(), "analysis.reply.md".into()),
        (RequestKind::Reflexion, _) => ("reflexion.prompt.md".into(), "reflexion.reply.md".into()),
    }
}

/// A request in flight, with the record that says it was cancelled should the run end first.
#[derive(Clone, Debug, PartialEq)]
pub struct PendingRequest {
    pub request_id: String,
    pub cancelled: Event,
    /// The order requests were sent in.
    sent: u64,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Requests {
    pending: BTreeMap<String, PendingRequest>,
    sent: u64,
}

/// Where an LLM exchange is kept, in the folder of the candidate it is about: the prompt's and
/// the reply's names, and for a request for code the name its code is kept under.
#[derive(Clone, Debug, PartialEq)]
pub struct Exchange {
    pub candidate: CandidateId,
    pub prompt: String,
    pub reply: String,
    pub code: Option<String>,
}

impl PendingRequest {
    /// What was asked for: round 0's first requests for code are generation's seeds.
    pub fn kind(&self) -> RequestKind {
        match &self.cancelled {
            Event::ProposalReceived { attempt: 1.., .. } => RequestKind::Refine,
            Event::ProposalReceived { round: 0, .. } => RequestKind::Seed,
            Event::AnalysisReceived { .. } => RequestKind::Analysis,
            Event::ReflexionReceived { .. } => RequestKind::Reflexion,
            _ => RequestKind::Optimize,
        }
    }

    /// The candidate the request is about (an analysis's: the parent analysed), and its round.
    pub fn about(&self) -> (CandidateId, u32) {
        match &self.cancelled {
            Event::ProposalReceived {
                candidate, round, ..
            }
            | Event::AnalysisReceived {
                candidate, round, ..
            }
            | Event::ReflexionReceived {
                candidate, round, ..
            } => (*candidate, *round),
            _ => (CandidateId::INITIAL, 0),
        }
    }

    /// Where the exchange is kept once the reply comes. A resumed run looks for the reply
    /// there before it asks again.
    pub fn exchange(&self) -> Exchange {
        let attempt = match &self.cancelled {
            Event::ProposalReceived { attempt, .. } => Some(*attempt),
            _ => None,
        };
        let (prompt, reply) = exchange_files(self.kind(), attempt.unwrap_or(0));
        Exchange {
            candidate: self.about().0,
            prompt,
            reply,
            code: attempt.map(code_file_name),
        }
    }
}

impl Requests {
    /// Remembers the request a `*_requested` record announces (`attempt`: of a request for code).
    pub(super) fn asked(&mut self, requested: &Event, attempt: u32) {
        let Some(cancelled) = cancelled_reply(requested, attempt) else {
            return;
        };
        let request_id = request_id_of(requested).to_string();
        self.sent += 1;
        self.pending.insert(
            request_id.clone(),
            PendingRequest {
                request_id,
                cancelled,
                sent: self.sent,
            },
        );
    }

    pub(super) fn answered(&mut self, request_id: &str) {
        self.pending.remove(request_id);
    }

    pub(super) fn is_pending(&self, request_id: &str) -> bool {
        self.pending.contains_key(request_id)
    }

    pub(super) fn get(&self, request_id: &str) -> Option<&PendingRequest> {
        self.pending.get(request_id)
    }

    pub(super) fn pending(&self) -> Vec<&PendingRequest> {
        let mut pending: Vec<&PendingRequest> = self.pending.values().collect();
        pending.sort_by_key(|request| request.sent);
        pending
    }

    /// The `*_received` records cancelling every pending request, oldest first.
    pub(super) fn cancellations(&self, why: &str) -> Vec<Event> {
        let text = format!("cancelled: {why}");
        self.pending()
            .into_iter()
            .map(|request| {
                let mut cancelled = request.cancelled.clone();
                if let Event::ProposalReceived { error, .. }
                | Event::AnalysisReceived { error, .. }
                | Event::ReflexionReceived { error, .. } = &mut cancelled
                {
                    *error = Some(text.clone());
                }
                cancelled
            })
            .collect()
    }
}

fn request_id_of(requested: &Event) -> &str {
    match requested {
        Event::ProposalRequested { request_id, .. }
        | Event::AnalysisRequested { request_id, .. }
        | Event::ReflexionRequested { request_id, .. } => request_id,
        _ => "",
    }
}

/// The reply a request gets when the run ends without it.
fn cancelled_reply(requested: &Event, attempt: u32) -> Option<Event> {
    Some(match requested.clone() {
        Event::ProposalRequested {
            candidate,
            parent,
            round,
            device,
            request_id,
            ..
        } => Event::ProposalReceived {
            candidate,
            parent,
            round,
            device,
            request_id,
            attempt,
            outcome: ReplyOutcome::Cancelled,
            truncated: false,
            usage: None,
            cost_usd: None,
            error: None,
            code: None,
            reply: None,
            latency_s: None,
        },
        Event::AnalysisRequested {
            candidate,
            round,
            request_id,
            requested,
            ..
        } => Event::AnalysisReceived {
            candidate,
            round,
            request_id,
            requested,
            returned: 0,
            bottlenecks: Vec::new(),
            outcome: ReplyOutcome::Cancelled,
            usage: None,
            cost_usd: None,
            error: None,
            reply: None,
        },
        Event::ReflexionRequested {
            candidate,
            parent,
            round,
            device,
            request_id,
        } => Event::ReflexionReceived {
            candidate,
            parent,
            round,
            device,
            request_id,
            lesson: None,
            outcome: ReplyOutcome::Cancelled,
            usage: None,
            cost_usd: None,
            error: None,
            reply: None,
        },
        _ => return None,
    })
}
