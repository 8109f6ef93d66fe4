//! Several models behind the broker's one port (`models`, issue 22): each request goes to the
//! provider of the model the search named for it. A model whose provider refuses its key, or
//! whose share of budget_usd is spent, is out of the run: its later requests fail at once and
//! its candidates fail with them, while the other models go on; only when every model is out
//! does the run hear the refusal or the budget, and end as a run of one model would.

use std::cell::RefCell;
use std::rc::Rc;

use actors::ports::{LlmError, LlmProvider, LlmReply, LlmRequest, LocalFuture};

/// One model of the ensemble and the provider that asks it.
pub struct Member {
    pub model: String,
    pub provider: Rc<dyn LlmProvider>,
}

pub struct EnsembleLlm {
    members: Vec<Member>,
    /// Why each member is out of the run, by index into `members`.
    out: RefCell<Vec<Option<LlmError>>>,
}

impl EnsembleLlm {
    /// The ensemble of `members`, the first taking requests that name no model.
    pub fn new(members: Vec<Member>) -> EnsembleLlm {
        let out = RefCell::new(vec![None; members.len()]);
        EnsembleLlm { members, out }
    }

    fn member_of(&self, model: Option<&str>) -> usize {
        model
            .and_then(|model| self.members.iter().position(|m| m.model == model))
            .unwrap_or(0)
    }

    /// A member's error as the broker hears it: a refusal or a spent budget ends only that
    /// model's part, unless it was the last model in the run.
    fn answer(&self, index: usize, error: LlmError) -> LlmError {
        if !matches!(error, LlmError::Auth(_) | LlmError::BudgetReached(_)) {
            return error;
        }
        let mut out = self.out.borrow_mut();
        out[index].get_or_insert_with(|| error.clone());
        if out.iter().all(Option::is_some) {
            return error;
        }
        LlmError::Failed(format!(
            "model {} is out of the run ({error}); the other models go on",
            self.members[index].model
        ))
    }
}

impl LlmProvider for EnsembleLlm {
    fn kept_reply(&self, text: String) -> LlmReply {
        super::kept_reply(text)
    }

    fn complete(
        self: Rc<Self>,
        request: LlmRequest,
    ) -> LocalFuture<'static, Result<LlmReply, LlmError>> {
        Box::pin(async move {
            let index = self.member_of(request.model.as_deref());
            let out = self.out.borrow()[index].clone();
            if let Some(error) = out {
                return Err(self.answer(index, error));
            }
            let provider = self.members[index].provider.clone();
            provider
                .complete(request)
                .await
                .map_err(|error| self.answer(index, error))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actors::model::CandidateId;
    use actors::ports::RequestKind;

    /// Answers with its model's name, or refuses every key.
    struct Fixed {
        model: &'static str,
        refuses: bool,
    }

    impl LlmProvider for Fixed {
        fn kept_reply(&self, text: String) -> LlmReply {
            crate::llm::kept_reply(text)
        }

        fn complete(
            self: Rc<Self>,
            _: LlmRequest,
        ) -> LocalFuture<'static, Result<LlmReply, LlmError>> {
            Box::pin(async move {
                if self.refuses {
                    return Err(LlmError::Auth("401 from the server".into()));
                }
                Ok(LlmReply {
                    text: self.model.to_string(),
                    code: None,
                    truncated: false,
                    usage: None,
                    cost_usd: None,
                })
            })
        }
    }

    fn ensemble(refusing: &[bool]) -> Rc<EnsembleLlm> {
        let names = ["a", "b", "c"];
        Rc::new(EnsembleLlm::new(
            refusing
                .iter()
                .zip(names)
                .map(|(refuses, model)| Member {
                    model: model.to_string(),
                    provider: Rc::new(Fixed {
                        model,
                        refuses: *refuses,
                    }),
                })
                .collect(),
        ))
    }

    async fn ask(ensemble: &Rc<EnsembleLlm>, model: Option<&str>) -> Result<String, LlmError> {
        let request = LlmRequest {
            request_id: "r1-c1".into(),
            kind: RequestKind::Optimize,
            candidate: CandidateId(1),
            round: 1,
            system: String::new(),
            prompt: String::new(),
            model: model.map(str::to_string),
        };
        ensemble
            .clone()
            .complete(request)
            .await
            .map(|reply| reply.text)
    }

    #[tokio::test]
    async fn each_request_goes_to_its_models_provider_and_one_without_to_the_first() {
        let both = ensemble(&[false, false]);
        assert_eq!(ask(&both, Some("b")).await.unwrap(), "b");
        assert_eq!(ask(&both, Some("a")).await.unwrap(), "a");
        assert_eq!(ask(&both, None).await.unwrap(), "a");
    }

    #[tokio::test]
    async fn a_refused_model_is_out_and_the_others_go_on_until_none_is_left() {
        let two = ensemble(&[true, false]);
        let refused = ask(&two, Some("a")).await.unwrap_err();
        assert!(
            matches!(&refused, LlmError::Failed(why) if why.contains("model a is out of the run")),
            "{refused:?}"
        );
        assert_eq!(ask(&two, Some("b")).await.unwrap(), "b");
        assert!(matches!(
            ask(&two, Some("a")).await,
            Err(LlmError::Failed(_))
        ));
        let alone = ensemble(&[true]);
        assert!(matches!(
            ask(&alone, Some("a")).await,
            Err(LlmError::Auth(_))
        ));
    }
}
