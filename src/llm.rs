//! The LLM provider layer: configuration, wire formats, retries, limits and reply parsing.
//! The LlmBroker actor drives it; nothing here holds actor state.

pub mod anthropic;
mod attempt;
mod code;
mod ensemble;
mod http;
mod keys;
mod limits;
mod models;
pub mod openai;
mod port;
mod request;
mod retry;
mod retry_after;
mod settings;
mod window;

pub use attempt::{ChatProvider, ProviderError, RetryCause, WireFormat};
pub use code::{extract_kernel_code, kept_reply};
pub use ensemble::{EnsembleLlm, Member};
pub use http::{HttpProvider, HttpProviderError, MAX_REPLY_BYTES};
pub use limits::{
    Budget, BudgetRefusal, RateLimiter, RequestCost, Reservation, SpendTotals, TokenEstimator,
    UsageSource,
};
pub use port::HttpLlm;
pub use request::{ChatMessage, ChatReply, ChatRequest, RequestKind, Role, Usage};
pub use retry::{Answered, Exhausted, RetryPolicy, random_unit, send_with_retries};
pub use retry_after::parse_retry_after;
pub use settings::{
    ApiKey, LlmConfigError, LlmConfigWarning, LlmKeys, LlmSettings, ModelCapability, ModelTable,
    ModelTableError, Price, Provider, RawLlmConfig, RawPrice, ReasoningKind, ReasoningRequest,
    resolve, resolve_with_table,
};
pub use window::{
    ASSUMED_CONTEXT_WINDOW_TOKENS, BYTES_PER_TOKEN_BOUND, ContextWindow, PromptTooLarge,
    WindowSource,
};
