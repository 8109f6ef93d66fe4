//! The Manager's LLM requests: a decision's context rendered into a prompt and sent to the
//! broker; the reply kept beside its candidate (synced) before its `*_received` record, which
//! the state makes from its pending request, is journaled and applied.

use actix::prelude::*;

use crate::collector::KeepReply;
use crate::journal::Event;
use crate::llm_broker::Propose;
use crate::ports::{LlmError, LlmReply, RenderedPrompt};
use crate::search_state::Answer;

use super::{Input, Manager};

impl Manager {
    /// Sends a pending request's rendered prompt to the broker; a prompt that cannot be
    /// rendered is answered at once, as not rendered.
    pub(super) fn ask(
        &mut self,
        request_id: String,
        prompt: Result<RenderedPrompt, String>,
        ctx: &mut Context<Self>,
    ) -> Option<Event> {
        let prompt = match prompt {
            Ok(prompt) => prompt,
            Err(error) => {
                return self
                    .state
                    .received(&request_id, Answer::NotRendered(error), None);
            }
        };
        let user = prompt.user.clone();
        let request = self.state.llm_request(&request_id, prompt)?;
        self.stopwatch.asked(&request_id, self.clock.now());
        // A resumed run answers a request whose reply is on disk from there: asked and paid
        // for by the process that died.
        if let Some(reply) = self.recovered.remove(&request_id) {
            ctx.address().do_send(Input::Replied {
                request_id,
                prompt: user,
                answer: Ok(reply),
            });
            return None;
        }
        let answer = self.peers.broker.send(Propose(request));
        let me = ctx.address();
        ctx.spawn(
            async move {
                let answer = answer
                    .await
                    .unwrap_or_else(|_| Err(LlmError::Failed("the llm broker is gone".into())));
                me.do_send(Input::Replied {
                    request_id,
                    prompt: user,
                    answer,
                });
            }
            .into_actor(self),
        );
        None
    }

    /// Keeps a reply's prompt and text beside the candidate, then journals and applies it.
    pub(super) fn replied(
        &mut self,
        request_id: String,
        prompt: String,
        answer: Result<LlmReply, LlmError>,
        ctx: &mut Context<Self>,
    ) {
        let reply = match answer {
            Ok(reply) => reply,
            Err(error) => {
                if let Some(event) = self
                    .state
                    .received(&request_id, Answer::Error(&error), None)
                {
                    self.step(event, ctx);
                }
                return;
            }
        };
        let Some(exchange) = self.state.exchange(&request_id) else {
            return;
        };
        let latency_s = self.stopwatch.answered(&request_id, self.clock.now());
        let keep = self
            .peers
            .collector
            .send(KeepReply::of(exchange, prompt, &reply));
        ctx.spawn(keep.into_actor(self).map(move |kept, manager, ctx| {
            let file = kept.ok().and_then(Result::ok);
            let received = manager
                .state
                .received(&request_id, Answer::Reply(&reply), file);
            if let Some(mut event) = received {
                if let Event::ProposalReceived { latency_s: at, .. } = &mut event {
                    *at = latency_s;
                }
                manager.step(event, ctx);
            }
        }));
    }
}
