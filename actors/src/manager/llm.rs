//! The Manager's LLM requests: a decision's context rendered into a prompt and sent to the
//! broker; the reply kept beside its candidate (synced) before its `*_received` record is
//! journaled and applied.

use actix::prelude::*;

use crate::analysis::{parse_bottlenecks, parse_lesson};
use crate::collector::KeepReply;
use crate::journal::{Event, ReplyFile, ReplyOutcome, code_file_name};
use crate::llm_broker::Propose;
use crate::model::{CandidateId, DeviceId};
use crate::ports::{LlmError, LlmReply, LlmRequest, RenderedPrompt, RequestKind};
use crate::search_state::{SearchState, exchange_files};

use super::{Input, Manager};

/// An LLM request in flight: what its `*_received` record is made of.
#[derive(Clone, Debug)]
pub(super) enum Asked {
    Code {
        candidate: CandidateId,
        parent: CandidateId,
        round: u32,
        attempt: u32,
        request_id: String,
        prompt: String,
    },
    Analysis {
        parent: CandidateId,
        round: u32,
        requested: u32,
        request_id: String,
        prompt: String,
    },
    Reflexion {
        candidate: CandidateId,
        parent: CandidateId,
        round: u32,
        device: DeviceId,
        request_id: String,
        prompt: String,
    },
}

impl Manager {
    /// Sends a rendered request to the broker; a prompt that cannot be rendered is answered at
    /// once, as not rendered.
    pub(super) fn ask(
        &mut self,
        prompt: Result<RenderedPrompt, String>,
        asked: impl FnOnce(String) -> Asked,
        ctx: &mut Context<Self>,
    ) -> Option<Event> {
        let (prompt, asked) = match prompt {
            Ok(prompt) => {
                let asked = asked(prompt.user.clone());
                (prompt, asked)
            }
            Err(error) => {
                let asked = asked(String::new());
                return Some(received(
                    &self.state,
                    &asked,
                    Answer::NotRendered(error),
                    None,
                ));
            }
        };
        let model = match &asked {
            Asked::Analysis { .. } => self.state.analysis_model(),
            Asked::Code { candidate, .. } | Asked::Reflexion { candidate, .. } => {
                self.state.model_of(*candidate)
            }
        }
        .map(str::to_string);
        let (request_id, kind, candidate, round) = match &asked {
            Asked::Code {
                request_id,
                candidate,
                round,
                attempt,
                ..
            } => {
                // Round 0's requests for code are generation's seeds.
                let kind = match (*round, *attempt) {
                    (_, 1..) => RequestKind::Refine,
                    (0, 0) => RequestKind::Seed,
                    _ => RequestKind::Optimize,
                };
                (request_id.clone(), kind, *candidate, *round)
            }
            Asked::Analysis {
                request_id,
                parent,
                round,
                ..
            } => (request_id.clone(), RequestKind::Analysis, *parent, *round),
            Asked::Reflexion {
                request_id,
                candidate,
                round,
                ..
            } => (
                request_id.clone(),
                RequestKind::Reflexion,
                *candidate,
                *round,
            ),
        };
        self.asked_at
            .insert(asked.request_id().to_string(), self.clock.now());
        // A resumed run answers a request whose reply is on disk from there: asked and paid
        // for by the process that died.
        if let Some(reply) = self.recovered.remove(&request_id) {
            ctx.address().do_send(Input::Replied(asked, Ok(reply)));
            return None;
        }
        let answer = self.peers.broker.send(Propose(LlmRequest {
            request_id,
            kind,
            candidate,
            round,
            system: prompt.system,
            prompt: prompt.user,
            model,
        }));
        let me = ctx.address();
        ctx.spawn(
            async move {
                let answer = answer
                    .await
                    .unwrap_or_else(|_| Err(LlmError::Failed("the llm broker is gone".into())));
                me.do_send(Input::Replied(asked, answer));
            }
            .into_actor(self),
        );
        None
    }

    /// Keeps a reply's prompt and text beside the candidate, then journals and applies it.
    pub(super) fn replied(
        &mut self,
        asked: Asked,
        answer: Result<LlmReply, LlmError>,
        ctx: &mut Context<Self>,
    ) {
        if !self.state.is_pending(asked.request_id()) {
            return;
        }
        let reply = match answer {
            Ok(reply) => reply,
            Err(error) => {
                let event = received(&self.state, &asked, Answer::Error(&error), None);
                return self.step(event, ctx);
            }
        };
        let latency_s = self.seconds_since_asked(asked.request_id());
        let (folder, prompt_name, reply_name) = asked.files();
        let code = match (&asked, &reply.code) {
            (Asked::Code { attempt, .. }, Some(code)) => {
                Some((code_file_name(*attempt), code.text().to_string()))
            }
            _ => None,
        };
        let keep = self.peers.collector.send(KeepReply {
            candidate: folder,
            prompt: (prompt_name, asked.prompt().to_string()),
            reply: (reply_name, reply.text.clone()),
            code,
        });
        ctx.spawn(keep.into_actor(self).map(move |kept, manager, ctx| {
            let file = kept.ok().and_then(Result::ok);
            if manager.state.is_pending(asked.request_id()) {
                let mut event = received(&manager.state, &asked, Answer::Reply(&reply), file);
                if let Event::ProposalReceived { latency_s: at, .. } = &mut event {
                    *at = latency_s;
                }
                manager.step(event, ctx);
            }
        }));
    }
}

impl Asked {
    /// A request for code once its prompt is rendered: the proposal (attempt 0) or refinement
    /// `attempt` of `candidate`.
    pub(super) fn code(
        request_id: String,
        candidate: CandidateId,
        parent: CandidateId,
        round: u32,
        attempt: u32,
    ) -> impl FnOnce(String) -> Asked {
        move |prompt| Asked::Code {
            candidate,
            parent,
            round,
            attempt,
            request_id,
            prompt,
        }
    }

    fn request_id(&self) -> &str {
        match self {
            Asked::Code { request_id, .. }
            | Asked::Analysis { request_id, .. }
            | Asked::Reflexion { request_id, .. } => request_id,
        }
    }

    fn prompt(&self) -> &str {
        match self {
            Asked::Code { prompt, .. }
            | Asked::Analysis { prompt, .. }
            | Asked::Reflexion { prompt, .. } => prompt,
        }
    }

    /// The candidate folder its exchange is kept in, and the prompt's and the reply's names.
    fn files(&self) -> (CandidateId, String, String) {
        let (candidate, kind, attempt) = match self {
            Asked::Code {
                candidate, attempt, ..
            } => (*candidate, RequestKind::Refine, *attempt),
            Asked::Analysis { parent, .. } => (*parent, RequestKind::Analysis, 0),
            Asked::Reflexion { candidate, .. } => (*candidate, RequestKind::Reflexion, 0),
        };
        let (prompt, reply) = exchange_files(kind, attempt);
        (candidate, prompt, reply)
    }
}

/// How an LLM error reads in a `*_received` record.
fn outcome_of_error(error: &LlmError) -> ReplyOutcome {
    match error {
        LlmError::Exhausted => ReplyOutcome::Exhausted,
        LlmError::Auth(_) => ReplyOutcome::Refused,
        LlmError::BudgetReached(_) => ReplyOutcome::Budget,
        LlmError::Failed(_) => ReplyOutcome::Failed,
    }
}

/// How a request ended, for its `*_received` record.
pub(super) enum Answer<'a> {
    Reply(&'a LlmReply),
    Error(&'a LlmError),
    /// Its prompt could not be rendered (why): nothing was sent.
    NotRendered(String),
}

/// The `*_received` record of a request: its reply (kept in `file`) or why there is none.
pub(super) fn received(
    state: &SearchState,
    asked: &Asked,
    answer: Answer<'_>,
    file: Option<ReplyFile>,
) -> Event {
    let (outcome, error, reply) = match answer {
        Answer::Reply(reply) => (ReplyOutcome::Answered, None, Some(reply)),
        Answer::Error(error) => (outcome_of_error(error), Some(error_text(error)), None),
        Answer::NotRendered(why) => (ReplyOutcome::NotRendered, Some(why), None),
    };
    let usage = reply.and_then(|r| r.usage);
    let cost_usd = reply.and_then(|r| r.cost_usd);
    match asked {
        Asked::Code {
            candidate,
            parent,
            round,
            attempt,
            request_id,
            ..
        } => {
            let code = reply
                .and_then(|r| r.code.as_ref())
                .map(|c| c.text().to_string());
            let outcome = match (outcome, &code) {
                (ReplyOutcome::Answered, Some(_)) => ReplyOutcome::Code,
                (ReplyOutcome::Answered, None) => ReplyOutcome::NoCode,
                (other, _) => other,
            };
            let device = if *attempt == 0 {
                state.device_for_answer(*candidate)
            } else {
                state
                    .placement(*candidate)
                    .map_or(DeviceId(0), |(_, _, d)| d)
            };
            Event::ProposalReceived {
                candidate: *candidate,
                parent: *parent,
                round: *round,
                device,
                request_id: request_id.clone(),
                attempt: *attempt,
                outcome,
                truncated: reply.is_some_and(|r| r.truncated),
                usage,
                cost_usd,
                error,
                code,
                reply: file,
                latency_s: None,
            }
        }
        Asked::Analysis {
            parent,
            round,
            requested,
            request_id,
            ..
        } => {
            let mut bottlenecks = reply
                .map(|r| parse_bottlenecks(&r.text))
                .unwrap_or_default();
            bottlenecks.truncate(*requested as usize);
            Event::AnalysisReceived {
                candidate: *parent,
                round: *round,
                request_id: request_id.clone(),
                requested: *requested,
                returned: bottlenecks.len() as u32,
                bottlenecks,
                outcome,
                usage,
                cost_usd,
                error,
                reply: file,
            }
        }
        Asked::Reflexion {
            candidate,
            parent,
            round,
            device,
            request_id,
            ..
        } => Event::ReflexionReceived {
            candidate: *candidate,
            parent: *parent,
            round: *round,
            device: *device,
            request_id: request_id.clone(),
            lesson: reply.and_then(|r| parse_lesson(&r.text)),
            outcome,
            usage,
            cost_usd,
            error,
            reply: file,
        },
    }
}

/// The error a record says: what the provider said, without the variant's own prefix for the
/// kinds the outcome already names.
fn error_text(error: &LlmError) -> String {
    match error {
        LlmError::Failed(reason) | LlmError::Auth(reason) | LlmError::BudgetReached(reason) => {
            reason.clone()
        }
        LlmError::Exhausted => error.to_string(),
    }
}
