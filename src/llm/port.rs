//! The HTTP providers behind the LlmBroker's port: a budget reservation, the client-side rate
//! limit, retries, then the reply's code and accounting.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Instant;

use actors::model::KernelSource;
use actors::ports::{LlmError, LlmProvider, LlmReply, LlmRequest, LocalFuture};

use super::{
    Budget, ChatMessage, ChatRequest, HttpProvider, ProviderError, RateLimiter, RetryPolicy,
    TokenEstimator, extract_kernel_code, random_unit, send_with_retries,
};

struct Accounting {
    limiter: RateLimiter,
    budget: Budget,
    estimator: TokenEstimator,
}

pub struct HttpLlm {
    provider: HttpProvider,
    policy: RetryPolicy,
    accounting: RefCell<Accounting>,
}

impl HttpLlm {
    /// A resumed run's provider: the dollars its earlier processes spent count against
    /// budget_usd.
    pub fn counting_earlier_spend(self, cost_usd: f64) -> Self {
        self.accounting
            .borrow_mut()
            .budget
            .count_earlier_spend(cost_usd);
        self
    }

    pub fn new(provider: HttpProvider, policy: RetryPolicy) -> Self {
        let accounting = Accounting {
            limiter: RateLimiter::for_settings(provider.settings()),
            budget: Budget::for_settings(provider.settings()),
            estimator: TokenEstimator::default(),
        };
        HttpLlm {
            provider,
            policy,
            accounting: RefCell::new(accounting),
        }
    }
}

impl LlmProvider for HttpLlm {
    fn kept_reply(&self, text: String) -> LlmReply {
        super::kept_reply(text)
    }

    fn complete(
        self: Rc<Self>,
        request: LlmRequest,
    ) -> LocalFuture<'static, Result<LlmReply, LlmError>> {
        Box::pin(async move {
            let chat = ChatRequest {
                kind: request.kind,
                system: request.system,
                messages: vec![ChatMessage::user(request.prompt)],
                request_id: request.request_id.clone(),
            };
            // Before the budget and the rate limit: a prompt the model must reject costs
            // nothing, and the server never sees it.
            self.provider
                .settings()
                .check_prompt_fits(&chat)
                .map_err(|refusal| {
                    tracing::warn!(request_id = %chat.request_id, "{refusal}");
                    LlmError::Failed(refusal.to_string())
                })?;
            let max_tokens = self.provider.settings().max_tokens;
            let prompt_chars = chat.prompt_chars();
            let (reservation, wait, reserved_tokens) = {
                let mut accounting = self.accounting.borrow_mut();
                let estimate = accounting.estimator.estimate(prompt_chars);
                let reservation = accounting
                    .budget
                    .try_reserve(&chat.request_id, request.round, estimate, max_tokens)
                    .map_err(|refusal| {
                        LlmError::BudgetReached(format!(
                            "budget_usd {:.2} reached: {:.4} spent, {:.4} in flight, the next request could cost {:.4}",
                            refusal.limit_usd, refusal.spent_usd, refusal.in_flight_usd, refusal.next_request_usd
                        ))
                    })?;
                let reserved_tokens = estimate + u64::from(max_tokens);
                (
                    reservation,
                    accounting
                        .limiter
                        .wait_before(Instant::now(), reserved_tokens),
                    reserved_tokens,
                )
            };
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            self.accounting.borrow_mut().limiter.record(
                Instant::now(),
                &chat.request_id,
                reserved_tokens,
            );
            let mut jitter = random_unit;
            let outcome = send_with_retries(
                &self.provider,
                &chat,
                &self.policy,
                &mut jitter,
                tokio::time::sleep,
            )
            .await;
            let mut accounting = self.accounting.borrow_mut();
            match outcome {
                Ok(answered) => {
                    let reply = answered.reply;
                    if let Some(usage) = reply.usage {
                        accounting
                            .estimator
                            .observe(prompt_chars, usage.input_tokens);
                    }
                    let (usage, source) = accounting.estimator.usage_or_estimate(
                        reply.usage,
                        prompt_chars,
                        reply.text.len(),
                    );
                    let cost = accounting.budget.settle(reservation, usage, source);
                    accounting
                        .limiter
                        .correct(&chat.request_id, usage.input_tokens + usage.output_tokens);
                    Ok(LlmReply {
                        code: extract_kernel_code(&reply.text).map(KernelSource::new),
                        text: reply.text,
                        truncated: reply.truncated,
                        usage: Some(usage),
                        cost_usd: cost.cost_usd,
                    })
                }
                Err(exhausted) => {
                    accounting.budget.release(reservation);
                    match exhausted.error {
                        ProviderError::Auth { .. } => {
                            Err(LlmError::Auth(exhausted.error.to_string()))
                        }
                        // The server's address goes with the error: a run that could reach
                        // no server says which one it tried.
                        _ => Err(LlmError::Failed(format!(
                            "{exhausted} ({})",
                            self.provider.endpoint()
                        ))),
                    }
                }
            }
        })
    }
}
