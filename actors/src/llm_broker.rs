//! The LlmBroker: all LLM traffic goes through it. It caps the requests in flight: requests for
//! code, analyses and reflexions each under a cap of their own, so that a parent's analysis never
//! waits behind a hundred proposals and lessons never hold either up; the provider behind the
//! `LlmProvider` port does the protocol, retries and accounting.

use std::rc::Rc;

use actix::prelude::*;
use tokio::sync::Semaphore;

use crate::ports::{LlmError, LlmProvider, LlmReply, LlmRequest, RequestKind};

#[derive(Message)]
#[rtype(result = "Result<LlmReply, LlmError>")]
pub struct Propose(pub LlmRequest);

/// The replies kept replies' texts stand for, in order (`LlmProvider::kept_reply`): a resumed
/// run's answers to requests the process that died had sent.
#[derive(Message)]
#[rtype(result = "Vec<LlmReply>")]
pub struct KeptReplies(pub Vec<String>);

/// Refuse new requests and stop; answered once the broker is closed. Requests in flight are
/// dropped with it: the run is over.
#[derive(Message)]
#[rtype(result = "()")]
pub struct CloseBroker;

pub struct LlmBroker {
    provider: Rc<dyn LlmProvider>,
    in_flight: Rc<Semaphore>,
    analyses_in_flight: Rc<Semaphore>,
    reflexions_in_flight: Rc<Semaphore>,
}

impl LlmBroker {
    pub fn new(
        provider: Rc<dyn LlmProvider>,
        max_inflight: usize,
        reflexions_in_flight: usize,
    ) -> Self {
        LlmBroker {
            provider,
            in_flight: Rc::new(Semaphore::new(max_inflight.max(1))),
            analyses_in_flight: Rc::new(Semaphore::new(reflexions_in_flight.max(1))),
            reflexions_in_flight: Rc::new(Semaphore::new(reflexions_in_flight.max(1))),
        }
    }
}

impl Actor for LlmBroker {
    type Context = Context<Self>;
}

impl Handler<Propose> for LlmBroker {
    type Result = ResponseFuture<Result<LlmReply, LlmError>>;

    fn handle(&mut self, message: Propose, _: &mut Context<Self>) -> Self::Result {
        let provider = self.provider.clone();
        let in_flight = match message.0.kind {
            RequestKind::Reflexion => self.reflexions_in_flight.clone(),
            RequestKind::Analysis => self.analyses_in_flight.clone(),
            RequestKind::Optimize | RequestKind::Seed | RequestKind::Refine => {
                self.in_flight.clone()
            }
        };
        Box::pin(async move {
            let _permit = in_flight
                .acquire()
                .await
                .map_err(|_| LlmError::Failed("the broker is closed".into()))?;
            provider.complete(message.0).await
        })
    }
}

impl Handler<KeptReplies> for LlmBroker {
    type Result = MessageResult<KeptReplies>;

    fn handle(&mut self, message: KeptReplies, _: &mut Context<Self>) -> Self::Result {
        MessageResult(
            message
                .0
                .into_iter()
                .map(|text| self.provider.kept_reply(text))
                .collect(),
        )
    }
}

impl Handler<CloseBroker> for LlmBroker {
    type Result = ();

    fn handle(&mut self, _: CloseBroker, ctx: &mut Context<Self>) {
        self.in_flight.close();
        self.analyses_in_flight.close();
        self.reflexions_in_flight.close();
        ctx.stop();
    }
}
