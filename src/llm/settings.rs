//! The LLM configuration keys, resolved against the model table (`models`) and the environment
//! into settings the providers can use without further checks.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use super::keys::ApiKey;
pub use super::models::{
    ModelCapability, ModelTable, ModelTableError, Price, Provider, ReasoningKind,
};
use super::models::{is_valid_price, strip_date_suffix};
use super::request::ChatRequest;
use super::window::{
    ASSUMED_CONTEXT_WINDOW_TOKENS, ContextWindow, MAX_CONTEXT_WINDOW_TOKENS, PromptTooLarge,
    WindowSource,
};

const ANTHROPIC_DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
const OPENAI_DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// Used when max_tokens is not configured (limited to the model's maximum output when known,
/// and to half its context window).
const DEFAULT_MAX_TOKENS: u32 = 32_000;
const DEFAULT_MAX_INFLIGHT: u32 = 4;
/// Long answers (tens of thousands of tokens, with thinking) take minutes to generate.
const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(600);
/// A day: no answer is worth waiting longer for, and the bound keeps a huge configured number
/// from overflowing a Duration.
const MAX_REQUEST_TIMEOUT: Duration = Duration::from_secs(86_400);
/// Anthropic rejects a thinking budget below 1024 tokens.
const MIN_THINKING_BUDGET_TOKENS: u32 = 1024;

/// What a request carries to make the model reason harder; decided once from the settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReasoningRequest {
    AnthropicThinking { budget_tokens: u32 },
    AnthropicEffort { effort: &'static str },
    OpenAiEffort { effort: &'static str },
}

/// What [`resolve`] starts from: the model and provider as the configuration and the command
/// line chose them, and the configuration's LLM keys.
#[derive(Debug, Clone, Default)]
pub struct RawLlmConfig {
    pub model: Option<String>,
    pub provider: Option<Provider>,
    pub high_reasoning_effort: bool,
    pub keys: LlmKeys,
}

/// Test configurations written as a model and the keys that matter to the test.
#[cfg(test)]
impl RawLlmConfig {
    /// A configuration that names only `model`.
    pub(crate) fn for_model(model: &str) -> RawLlmConfig {
        RawLlmConfig {
            model: Some(model.to_string()),
            ..RawLlmConfig::default()
        }
    }

    /// Resolved with a key in every provider's variable of the environment, and nothing else
    /// set there.
    pub(crate) fn resolved(&self) -> LlmSettings {
        let keys = [Provider::Anthropic, Provider::OpenAi].map(Provider::key_env_var);
        resolve(self, &|name: &str| {
            keys.contains(&Some(name))
                .then(|| format!("sk-test-{name}"))
        })
        .expect("a test configuration resolves")
    }

    pub(crate) fn with_provider(self, provider: Provider) -> RawLlmConfig {
        RawLlmConfig {
            provider: Some(provider),
            ..self
        }
    }

    pub(crate) fn with_high_reasoning_effort(self) -> RawLlmConfig {
        RawLlmConfig {
            high_reasoning_effort: true,
            ..self
        }
    }

    pub(crate) fn with_base_url(mut self, base_url: impl Into<String>) -> RawLlmConfig {
        self.keys.base_url = Some(base_url.into());
        self
    }

    pub(crate) fn with_max_tokens(mut self, max_tokens: u32) -> RawLlmConfig {
        self.keys.max_tokens = Some(max_tokens);
        self
    }

    pub(crate) fn with_temperature(mut self, temperature: f64) -> RawLlmConfig {
        self.keys.temperature = Some(temperature);
        self
    }

    pub(crate) fn with_request_timeout_s(mut self, seconds: f64) -> RawLlmConfig {
        self.keys.request_timeout_s = Some(seconds);
        self
    }
}

/// The LLM keys of a strategy file: `config/schema.rs` reads each from the YAML (type and
/// range), run.yaml records them as read, and [`resolve`] checks them against the model table
/// once the provider is known.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LlmKeys {
    pub base_url: Option<String>,
    pub max_tokens: Option<u32>,
    pub temperature: Option<f64>,
    pub max_inflight: Option<u32>,
    pub requests_per_minute: Option<u32>,
    pub tokens_per_minute: Option<u64>,
    pub budget_usd: Option<f64>,
    pub request_timeout_s: Option<f64>,
    /// Tokens of prompt and reply together; overrides data/models.yaml, and replaces the
    /// assumed window for a model the table does not list.
    pub context_window: Option<u64>,
    /// Per model name: (input, output) USD per million tokens, overriding data/models.yaml.
    pub prices: BTreeMap<String, RawPrice>,
}

/// One model's price as the `prices` key writes it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPrice {
    pub input_usd_per_mtok: f64,
    pub output_usd_per_mtok: f64,
}

/// Where KernelAgent's `relay` provider finds its server.
pub const RELAY_URL_VARIABLE: &str = "LLM_RELAY_URL";

/// The keys that would let a model no table lists be reached. KernelAgent's relay (its
/// `LLM_RELAY_URL`) posts to a plugboard server and reads its `output` field, a format no
/// provider here speaks, so the relay is named but never used on its own.
fn unknown_provider_fix(relay: Option<&str>) -> String {
    let others = "or set provider to anthropic or openai with a model of theirs, or to replay";
    match relay {
        Some(url) => format!(
            "{RELAY_URL_VARIABLE} is set ({url}), but KernelAgent's relay answers in its plugboard \
             server's format, not OpenAI's; if that server also speaks OpenAI's API, add \
             `provider: openai_compatible` and `base_url: {url}` (its OpenAI-compatible URL, often \
             ending in /v1) to the strategy file; {others}"
        ),
        None => format!(
            "to reach it through an OpenAI-compatible server (vLLM, SGLang, Ollama, a relay), add \
             `provider: openai_compatible` and `base_url: <the server's URL, e.g. \
             http://localhost:8000/v1>` to the strategy file; {others}"
        ),
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlmConfigError {
    #[error(
        "no model configured: set model (for example claude-sonnet-4-6 or gpt-5), or provider: replay"
    )]
    MissingModel,
    #[error(
        "cannot tell which provider serves model {model}: data/models.yaml does not list it; {}",
        unknown_provider_fix(relay.as_deref())
    )]
    UnknownProvider {
        model: String,
        /// KernelAgent's relay, `LLM_RELAY_URL`, when the environment names one.
        relay: Option<String>,
    },
    #[error("{env_var} is not set: the {provider} provider needs its API key in that variable")]
    MissingApiKey {
        provider: Provider,
        env_var: &'static str,
    },
    #[error("provider openai_compatible needs base_url (for example http://localhost:8000/v1)")]
    MissingBaseUrl,
    #[error("base_url {url} is not an http:// or https:// URL")]
    InvalidBaseUrl { url: String },
    #[error(
        "budget_usd is set but model {model} has no price: add prices.{model} with \
         input_usd_per_mtok and output_usd_per_mtok, or remove budget_usd"
    )]
    BudgetWithoutPrice { model: String },
    #[error("max_tokens {max_tokens} exceeds the {limit} output tokens model {model} can produce")]
    MaxTokensAboveModelLimit {
        model: String,
        max_tokens: u32,
        limit: u32,
    },
    #[error(
        "max_tokens {max_tokens} leaves no room for a prompt in the {window}-token context window \
         of model {model} ({window_source}): lower max_tokens"
    )]
    NoRoomForPrompt {
        model: String,
        max_tokens: u32,
        window: u64,
        window_source: WindowSource,
    },
    #[error("invalid {key} {value}: expected {expected}")]
    InvalidValue {
        key: &'static str,
        value: String,
        expected: &'static str,
    },
    #[error("invalid prices.{model}: prices must be finite and not negative")]
    InvalidPrice { model: String },
    #[error("built-in model table is broken: {0}")]
    ModelTable(String),
}

/// Something the configuration asks for that will not be sent, or cannot be checked.
/// The broker logs these and records them in the journal at start-up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LlmConfigWarning {
    #[error(
        "model {model} is not in data/models.yaml: no reasoning effort is requested, temperature \
         is sent only to an openai_compatible server, and it has no price unless prices.{model} is set"
    )]
    UnknownModel { model: String },
    #[error(
        "model {configured} is sent to {provider} as {sent}, the name its API knows \
         (data/models.yaml lists {configured} as an alias)"
    )]
    AliasSentAsModel {
        configured: String,
        sent: String,
        provider: Provider,
    },
    #[error(
        "model {model} has no context window in data/models.yaml: prompts that cannot fit in \
         {tokens} tokens beside max_tokens are refused; set context_window to its real window"
    )]
    ContextWindowAssumed { model: String, tokens: u64 },
    #[error("temperature is not sent: model {model} does not accept it")]
    TemperatureNotAccepted { model: String },
    #[error("temperature is not sent: model {model} rejects it while reasoning harder")]
    TemperatureDroppedForReasoning { model: String },
    #[error(
        "high_reasoning_effort is ignored: model {model} has no reasoning control over {provider}"
    )]
    ReasoningNotSupported { model: String, provider: Provider },
    #[error(
        "high_reasoning_effort is ignored: extended thinking on {model} needs max_tokens of at least \
         {needed} (thinking takes half), got {max_tokens}"
    )]
    MaxTokensTooSmallForThinking {
        model: String,
        max_tokens: u32,
        needed: u32,
    },
}

/// Everything a provider needs, checked.
#[derive(Debug, Clone)]
pub struct LlmSettings {
    pub provider: Provider,
    /// The name sent in each request: as configured, or the API's name for a configured alias.
    pub model: String,
    /// None only for the replay provider. Anthropic's base has no /v1 (the path adds it);
    /// OpenAI-style bases end in /v1, as in the official SDKs.
    pub base_url: Option<String>,
    pub api_key: Option<ApiKey>,
    pub max_tokens: u32,
    pub temperature: Option<f64>,
    pub high_reasoning_effort: bool,
    pub max_inflight: u32,
    pub requests_per_minute: Option<u32>,
    pub tokens_per_minute: Option<u64>,
    pub budget_usd: Option<f64>,
    pub request_timeout: Duration,
    /// None only for the replay provider, which sends nothing.
    pub context_window: Option<ContextWindow>,
    pub capability: ModelCapability,
    pub warnings: Vec<LlmConfigWarning>,
}

impl LlmSettings {
    /// The reasoning control each request carries: only when asked for, only when the table
    /// says the model has one, and only over the protocol that control belongs to.
    pub fn reasoning_to_send(&self) -> Option<ReasoningRequest> {
        if !self.high_reasoning_effort {
            return None;
        }
        match (self.capability.reasoning, self.provider) {
            (ReasoningKind::AnthropicThinking, Provider::Anthropic) => {
                // Thinking counts against max_tokens: half for thinking leaves half for the answer.
                let budget_tokens = self.max_tokens / 2;
                (budget_tokens >= MIN_THINKING_BUDGET_TOKENS)
                    .then_some(ReasoningRequest::AnthropicThinking { budget_tokens })
            }
            (ReasoningKind::AnthropicEffort, Provider::Anthropic) => {
                Some(ReasoningRequest::AnthropicEffort { effort: "high" })
            }
            (
                ReasoningKind::OpenaiReasoningEffort,
                Provider::OpenAi | Provider::OpenAiCompatible,
            ) => Some(ReasoningRequest::OpenAiEffort { effort: "high" }),
            _ => None,
        }
    }

    /// Refuses a request whose prompt cannot fit in the model's window beside max_tokens; it
    /// must not be sent.
    pub fn check_prompt_fits(&self, request: &ChatRequest) -> Result<(), PromptTooLarge> {
        match &self.context_window {
            Some(window) => window.check(&self.model, request.prompt_bytes(), self.max_tokens),
            None => Ok(()),
        }
    }

    /// The temperature each request carries: only when configured and accepted, and never next
    /// to a reasoning control (Anthropic rejects temperature with thinking; OpenAI's reasoning
    /// models reject it altogether).
    pub fn temperature_to_send(&self) -> Option<f64> {
        self.temperature
            .filter(|_| self.capability.accepts_temperature && self.reasoning_to_send().is_none())
    }
}

/// Resolves the configuration against the built-in model table; `env` reads the environment.
pub fn resolve(
    raw: &RawLlmConfig,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<LlmSettings, LlmConfigError> {
    let table =
        ModelTable::builtin().map_err(|error| LlmConfigError::ModelTable(error.to_string()))?;
    resolve_with_table(raw, env, &table)
}

pub fn resolve_with_table(
    raw: &RawLlmConfig,
    env: &dyn Fn(&str) -> Option<String>,
    table: &ModelTable,
) -> Result<LlmSettings, LlmConfigError> {
    let configured_model = raw
        .model
        .as_deref()
        .map(str::trim)
        .filter(|model| !model.is_empty());
    let base_url = raw
        .keys
        .base_url
        .as_deref()
        .map(|url| url.trim().trim_end_matches('/'))
        .filter(|url| !url.is_empty());

    let limits = resolve_limits(raw)?;
    if raw.provider == Some(Provider::Replay) {
        return Ok(replay_settings(raw, configured_model, limits));
    }
    let model = configured_model
        .ok_or(LlmConfigError::MissingModel)?
        .to_string();
    let table_entry = table.capability(&model);
    let provider = match raw.provider {
        Some(provider) => provider,
        None => table_entry
            .as_ref()
            .map(|(provider, _)| *provider)
            .or_else(|| provider_from_model_name(&model))
            .or(base_url.map(|_| Provider::OpenAiCompatible))
            .ok_or_else(|| LlmConfigError::UnknownProvider {
                model: model.clone(),
                relay: env(RELAY_URL_VARIABLE).filter(|url| !url.trim().is_empty()),
            })?,
    };

    let mut warnings = Vec::new();
    // KernelAgent's spellings reach Anthropic and OpenAI as the names their APIs know; a relay
    // behind openai_compatible was set up with KernelAgent's spelling and gets it unchanged.
    let configured_model = model.clone();
    let model = match table.api_name_of_alias(&model) {
        Some(api_name) if matches!(provider, Provider::Anthropic | Provider::OpenAi) => {
            warnings.push(LlmConfigWarning::AliasSentAsModel {
                configured: model.clone(),
                sent: api_name.to_string(),
                provider,
            });
            api_name.to_string()
        }
        _ => model,
    };
    let mut capability = match table_entry {
        Some((_, capability)) => capability,
        None => {
            warnings.push(LlmConfigWarning::UnknownModel {
                model: model.clone(),
            });
            ModelCapability {
                model: model.clone(),
                known: false,
                // Any OpenAI-compatible server takes a temperature; an unknown hosted model may
                // reject it (Claude Opus 4.7 answers 400), which would fail every request.
                accepts_temperature: provider == Provider::OpenAiCompatible,
                reasoning: ReasoningKind::None,
                max_output_tokens: None,
                context_window: None,
                price: None,
            }
        }
    };
    let context_window = match (raw.keys.context_window, &capability.context_window) {
        (Some(tokens), _) => ContextWindow {
            tokens,
            source: WindowSource::Configured,
        },
        (None, Some(window)) => window.clone(),
        (None, None) => {
            warnings.push(LlmConfigWarning::ContextWindowAssumed {
                model: model.clone(),
                tokens: ASSUMED_CONTEXT_WINDOW_TOKENS,
            });
            ContextWindow {
                tokens: ASSUMED_CONTEXT_WINDOW_TOKENS,
                source: WindowSource::Assumed,
            }
        }
    };
    if let Some(price) = configured_price(raw, &configured_model, &capability.model)? {
        capability.price = Some(price);
    }

    let from_env = provider
        .base_url_env_var()
        .and_then(env)
        .filter(|url| !url.trim().is_empty());
    let base_url = match (base_url.or(from_env.as_deref()), provider) {
        (Some(url), _) => {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(LlmConfigError::InvalidBaseUrl {
                    url: url.to_string(),
                });
            }
            url.to_string()
        }
        (None, Provider::Anthropic) => ANTHROPIC_DEFAULT_BASE_URL.to_string(),
        (None, Provider::OpenAi) => OPENAI_DEFAULT_BASE_URL.to_string(),
        (None, _) => return Err(LlmConfigError::MissingBaseUrl),
    };

    let env_var = provider.key_env_var();
    let api_key = env_var
        .and_then(env)
        .filter(|key| !key.trim().is_empty())
        .map(|key| ApiKey::new(key.trim().to_string()));
    if api_key.is_none()
        && let (Provider::Anthropic | Provider::OpenAi, Some(env_var)) = (provider, env_var)
    {
        return Err(LlmConfigError::MissingApiKey { provider, env_var });
    }

    let max_tokens = match raw.keys.max_tokens {
        Some(0) => {
            return Err(invalid("max_tokens", 0, "a positive number of tokens"));
        }
        Some(max_tokens) => {
            if let Some(limit) = capability.max_output_tokens
                && max_tokens > limit
            {
                return Err(LlmConfigError::MaxTokensAboveModelLimit {
                    model: model.clone(),
                    max_tokens,
                    limit,
                });
            }
            max_tokens
        }
        None => {
            let half_window = u32::try_from(context_window.tokens / 2).unwrap_or(u32::MAX);
            capability
                .max_output_tokens
                .map_or(DEFAULT_MAX_TOKENS, |limit| limit.min(DEFAULT_MAX_TOKENS))
                .min(half_window)
        }
    };
    if u64::from(max_tokens) >= context_window.tokens {
        return Err(LlmConfigError::NoRoomForPrompt {
            model: model.clone(),
            max_tokens,
            window: context_window.tokens,
            window_source: context_window.source,
        });
    }

    if let Some(temperature) = raw.keys.temperature {
        let (range_end, expected) = if provider == Provider::Anthropic {
            (1.0, "a number from 0 to 1")
        } else {
            (2.0, "a number from 0 to 2")
        };
        if !(temperature.is_finite() && (0.0..=range_end).contains(&temperature)) {
            return Err(invalid("temperature", temperature, expected));
        }
    }
    if limits.budget_usd.is_some() && capability.price.is_none() {
        return Err(LlmConfigError::BudgetWithoutPrice {
            model: model.clone(),
        });
    }

    let mut settings = LlmSettings {
        provider,
        model,
        base_url: Some(base_url),
        api_key,
        max_tokens,
        temperature: raw.keys.temperature,
        high_reasoning_effort: raw.high_reasoning_effort,
        max_inflight: limits.max_inflight,
        requests_per_minute: limits.requests_per_minute,
        tokens_per_minute: limits.tokens_per_minute,
        budget_usd: limits.budget_usd,
        request_timeout: limits.request_timeout,
        context_window: Some(context_window),
        capability,
        warnings,
    };
    let dropped = dropped_setting_warnings(&settings);
    settings.warnings.extend(dropped);
    Ok(settings)
}

/// The keys every provider shares, replay included.
struct Limits {
    max_inflight: u32,
    requests_per_minute: Option<u32>,
    tokens_per_minute: Option<u64>,
    budget_usd: Option<f64>,
    request_timeout: Duration,
}

fn resolve_limits(raw: &RawLlmConfig) -> Result<Limits, LlmConfigError> {
    let max_inflight = match raw.keys.max_inflight {
        Some(0) => return Err(invalid("max_inflight", 0, "at least 1")),
        Some(max_inflight) => max_inflight,
        None => DEFAULT_MAX_INFLIGHT,
    };
    if raw.keys.requests_per_minute == Some(0) {
        return Err(invalid("requests_per_minute", 0, "at least 1, or no limit"));
    }
    if raw.keys.tokens_per_minute == Some(0) {
        return Err(invalid("tokens_per_minute", 0, "at least 1, or no limit"));
    }
    let request_timeout = match raw.keys.request_timeout_s {
        Some(seconds) if seconds > 0.0 && seconds <= MAX_REQUEST_TIMEOUT.as_secs_f64() => {
            Duration::from_secs_f64(seconds)
        }
        Some(seconds) => {
            return Err(invalid(
                "request_timeout_s",
                seconds,
                "a positive number of seconds, at most 86400",
            ));
        }
        None => DEFAULT_REQUEST_TIMEOUT,
    };
    if let Some(tokens) = raw.keys.context_window
        && !(1..=MAX_CONTEXT_WINDOW_TOKENS).contains(&tokens)
    {
        return Err(invalid(
            "context_window",
            tokens,
            "a positive number of tokens, at most 100000000",
        ));
    }
    if let Some(budget_usd) = raw.keys.budget_usd
        && !(budget_usd.is_finite() && budget_usd > 0.0)
    {
        return Err(invalid(
            "budget_usd",
            budget_usd,
            "a positive amount of USD",
        ));
    }
    Ok(Limits {
        max_inflight,
        requests_per_minute: raw.keys.requests_per_minute,
        tokens_per_minute: raw.keys.tokens_per_minute,
        budget_usd: raw.keys.budget_usd,
        request_timeout,
    })
}

/// Replay answers from files: no model, key, URL or price needed.
fn replay_settings(
    raw: &RawLlmConfig,
    configured_model: Option<&str>,
    limits: Limits,
) -> LlmSettings {
    let model = configured_model.unwrap_or("replay").to_string();
    LlmSettings {
        provider: Provider::Replay,
        model: model.clone(),
        base_url: None,
        api_key: None,
        max_tokens: raw.keys.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        temperature: None,
        high_reasoning_effort: false,
        max_inflight: limits.max_inflight,
        requests_per_minute: limits.requests_per_minute,
        tokens_per_minute: limits.tokens_per_minute,
        budget_usd: limits.budget_usd,
        request_timeout: limits.request_timeout,
        context_window: None,
        capability: ModelCapability {
            model,
            known: false,
            accepts_temperature: false,
            reasoning: ReasoningKind::None,
            max_output_tokens: None,
            context_window: None,
            price: Some(Price {
                input_usd_per_mtok: 0.0,
                output_usd_per_mtok: 0.0,
                source: "replay answers from files and costs nothing".to_string(),
            }),
        },
        warnings: Vec::new(),
    }
}

fn invalid(key: &'static str, value: impl fmt::Display, expected: &'static str) -> LlmConfigError {
    LlmConfigError::InvalidValue {
        key,
        value: value.to_string(),
        expected,
    }
}

/// claude-* is Anthropic's; gpt-*, o1, o3 and o4 (alone or with a suffix) are OpenAI's.
fn provider_from_model_name(model: &str) -> Option<Provider> {
    if model.starts_with("claude-") {
        return Some(Provider::Anthropic);
    }
    let is_o_series = ["o1", "o3", "o4"].iter().any(|series| {
        model
            .strip_prefix(series)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('-'))
    });
    (model.starts_with("gpt-") || is_o_series).then_some(Provider::OpenAi)
}

/// A configured price for the model, under its own name or the table entry it resolved to.
fn configured_price(
    raw: &RawLlmConfig,
    model: &str,
    table_model: &str,
) -> Result<Option<Price>, LlmConfigError> {
    let found = raw
        .keys
        .prices
        .get(model)
        .map(|price| (model, price))
        .or_else(|| {
            let base = strip_date_suffix(model)?;
            raw.keys.prices.get(base).map(|price| (base, price))
        })
        .or_else(|| {
            raw.keys
                .prices
                .get(table_model)
                .map(|price| (table_model, price))
        });
    let Some((key, price)) = found else {
        return Ok(None);
    };
    if !is_valid_price(price.input_usd_per_mtok) || !is_valid_price(price.output_usd_per_mtok) {
        return Err(LlmConfigError::InvalidPrice {
            model: key.to_string(),
        });
    }
    Ok(Some(Price {
        input_usd_per_mtok: price.input_usd_per_mtok,
        output_usd_per_mtok: price.output_usd_per_mtok,
        source: format!("configuration (prices.{key})"),
    }))
}

fn dropped_setting_warnings(settings: &LlmSettings) -> Vec<LlmConfigWarning> {
    let model = settings.model.clone();
    let mut warnings = Vec::new();
    let reasoning = settings.reasoning_to_send();
    if settings.high_reasoning_effort && reasoning.is_none() && settings.capability.known {
        let thinking_needs = 2 * MIN_THINKING_BUDGET_TOKENS;
        if settings.capability.reasoning == ReasoningKind::AnthropicThinking
            && settings.provider == Provider::Anthropic
        {
            warnings.push(LlmConfigWarning::MaxTokensTooSmallForThinking {
                model: model.clone(),
                max_tokens: settings.max_tokens,
                needed: thinking_needs,
            });
        } else {
            warnings.push(LlmConfigWarning::ReasoningNotSupported {
                model: model.clone(),
                provider: settings.provider,
            });
        }
    }
    if settings.temperature.is_some() && settings.temperature_to_send().is_none() {
        if !settings.capability.accepts_temperature {
            warnings.push(LlmConfigWarning::TemperatureNotAccepted { model });
        } else if reasoning.is_some() {
            warnings.push(LlmConfigWarning::TemperatureDroppedForReasoning { model });
        }
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_with<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| value.to_string())
        }
    }

    const KEYS: &[(&str, &str)] = &[
        ("ANTHROPIC_API_KEY", "sk-ant-test-key"),
        ("OPENAI_API_KEY", "sk-openai-test-key"),
    ];

    fn raw(model: &str) -> RawLlmConfig {
        RawLlmConfig {
            model: Some(model.to_string()),
            ..RawLlmConfig::default()
        }
    }

    fn resolve_ok(raw: &RawLlmConfig) -> LlmSettings {
        resolve(raw, &env_with(KEYS)).expect("configuration should resolve")
    }

    /// (configured model, provider configured) -> (model sent, alias warned).
    fn check_sent_name(configured: &str, provider: Option<Provider>, sent: &str, warned: bool) {
        let settings = resolve_ok(&RawLlmConfig {
            provider,
            keys: LlmKeys {
                base_url: (provider == Some(Provider::OpenAiCompatible))
                    .then(|| "http://relay.example/v1".to_string()),
                ..LlmKeys::default()
            },
            ..raw(configured)
        });
        assert_eq!(settings.model, sent, "{configured} over {provider:?}");
        let alias_warnings: Vec<String> = settings
            .warnings
            .iter()
            .filter(|warning| matches!(warning, LlmConfigWarning::AliasSentAsModel { .. }))
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            alias_warnings.len(),
            usize::from(warned),
            "{configured}: {alias_warnings:?}"
        );
        assert!(settings.capability.known, "{configured}");
    }

    /// Issue 10: KernelAgent's configurations spell models as no API knows them.
    #[test]
    fn kernelagent_spellings_are_sent_as_the_api_names_them() {
        use Provider::*;
        check_sent_name("claude-opus-4.5", None, "claude-opus-4-5", true);
        check_sent_name("claude-opus-4.6", None, "claude-opus-4-6", true);
        check_sent_name("claude-opus-4.7", Some(Anthropic), "claude-opus-4-7", true);
        check_sent_name("gpt-5-4", None, "gpt-5.4", true);
        check_sent_name("gpt-5-4", Some(OpenAi), "gpt-5.4", true);
        check_sent_name("claude-opus-4", None, "claude-opus-4-0", true);
        // A relay expects KernelAgent's spelling.
        check_sent_name(
            "claude-opus-4.5",
            Some(OpenAiCompatible),
            "claude-opus-4.5",
            false,
        );
        check_sent_name("gpt-5-4", Some(OpenAiCompatible), "gpt-5-4", false);
        // The API's own names, dated ones included, go as written.
        check_sent_name("claude-opus-4-5", None, "claude-opus-4-5", false);
        check_sent_name(
            "claude-opus-4-20250514",
            None,
            "claude-opus-4-20250514",
            false,
        );
        check_sent_name("gpt-5.4", None, "gpt-5.4", false);
        let settings = resolve_ok(&raw("claude-opus-4.5"));
        assert_eq!(
            settings.warnings[0].to_string(),
            "model claude-opus-4.5 is sent to anthropic as claude-opus-4-5, the name its API \
             knows (data/models.yaml lists claude-opus-4.5 as an alias)"
        );
    }

    /// (model, context_window configured, max_tokens configured) -> (window, where from,
    /// max_tokens).
    fn check_window(
        model: &str,
        configured: Option<u64>,
        max_tokens: Option<u32>,
        expected: (u64, &str, u32),
    ) {
        let settings = resolve_ok(&RawLlmConfig {
            keys: LlmKeys {
                context_window: configured,
                max_tokens,
                base_url: Some("http://127.0.0.1:8000/v1".to_string()),
                ..LlmKeys::default()
            },
            ..raw(model)
        });
        let window = settings.context_window.unwrap();
        let source = match &window.source {
            WindowSource::ModelTable { .. } => "table",
            WindowSource::Configured => "configured",
            WindowSource::Assumed => "assumed",
        };
        assert_eq!(
            (window.tokens, source, settings.max_tokens),
            expected,
            "{model} {configured:?} {max_tokens:?}"
        );
    }

    #[test]
    fn the_context_window_comes_from_the_table_the_configuration_or_is_assumed() {
        check_window("claude-opus-4-5", None, None, (200_000, "table", 32_000));
        check_window("claude-opus-4.5", None, None, (200_000, "table", 32_000));
        check_window("gpt-4o-2024-08-06", None, None, (128_000, "table", 16_384));
        check_window("gpt-5.4", None, None, (1_050_000, "table", 32_000));
        check_window(
            "claude-opus-4-5",
            Some(100_000),
            None,
            (100_000, "configured", 32_000),
        );
        check_window("qwen3-coder", None, None, (128_000, "assumed", 32_000));
        check_window(
            "qwen3-coder",
            Some(32_768),
            None,
            (32_768, "configured", 16_384),
        );
        check_window(
            "qwen3-coder",
            Some(32_768),
            Some(30_000),
            (32_768, "configured", 30_000),
        );
        let assumed = resolve_ok(&RawLlmConfig {
            keys: LlmKeys {
                base_url: Some("http://127.0.0.1:8000/v1".to_string()),
                ..LlmKeys::default()
            },
            ..raw("qwen3-coder")
        });
        let warned: Vec<String> = assumed
            .warnings
            .iter()
            .filter(|w| matches!(w, LlmConfigWarning::ContextWindowAssumed { .. }))
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            warned,
            vec![
                "model qwen3-coder has no context window in data/models.yaml: prompts that \
                 cannot fit in 128000 tokens beside max_tokens are refused; set context_window \
                 to its real window"
            ]
        );
        let configured = resolve_ok(&RawLlmConfig {
            keys: LlmKeys {
                base_url: Some("http://127.0.0.1:8000/v1".to_string()),
                context_window: Some(32_768),
                ..LlmKeys::default()
            },
            ..raw("qwen3-coder")
        });
        assert!(
            !configured
                .warnings
                .iter()
                .any(|w| matches!(w, LlmConfigWarning::ContextWindowAssumed { .. }))
        );
    }

    #[test]
    fn max_tokens_must_leave_room_for_a_prompt() {
        let error = resolve(
            &RawLlmConfig {
                keys: LlmKeys {
                    base_url: Some("http://127.0.0.1:8000/v1".to_string()),
                    context_window: Some(8_192),
                    max_tokens: Some(8_192),
                    ..LlmKeys::default()
                },
                ..raw("llama")
            },
            &env_with(KEYS),
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "max_tokens 8192 leaves no room for a prompt in the 8192-token context window of \
             model llama (context_window in the configuration): lower max_tokens"
        );
        for tokens in [0, 100_000_001] {
            let error = resolve(
                &RawLlmConfig {
                    keys: LlmKeys {
                        context_window: Some(tokens),
                        ..LlmKeys::default()
                    },
                    ..raw("gpt-5")
                },
                &env_with(KEYS),
            )
            .unwrap_err();
            assert_eq!(
                error.to_string(),
                format!(
                    "invalid context_window {tokens}: expected a positive number of tokens, at \
                     most 100000000"
                )
            );
        }
    }

    #[test]
    fn provider_is_inferred_from_the_model_name() {
        let provider_of = |model: &str| resolve_ok(&raw(model)).provider;
        assert_eq!(provider_of("claude-sonnet-4-6"), Provider::Anthropic);
        assert_eq!(provider_of("claude-future-9"), Provider::Anthropic);
        assert_eq!(provider_of("gpt-5"), Provider::OpenAi);
        assert_eq!(provider_of("gpt-7-preview"), Provider::OpenAi);
        assert_eq!(provider_of("o3"), Provider::OpenAi);
        assert_eq!(provider_of("o4-mini"), Provider::OpenAi);
        assert_eq!(provider_of("o1-preview"), Provider::OpenAi);
    }

    #[test]
    fn unknown_model_without_provider_or_base_url_says_how_to_choose() {
        let error = resolve(&raw("qwen3-coder"), &env_with(KEYS)).unwrap_err();
        assert_eq!(
            error,
            LlmConfigError::UnknownProvider {
                model: "qwen3-coder".to_string(),
                relay: None,
            }
        );
        let message = error.to_string();
        assert!(
            message.contains("add `provider: openai_compatible` and `base_url: <the server's URL"),
            "{message}"
        );
        // "o3x" is not an o-series name.
        assert!(resolve(&raw("o3x"), &env_with(KEYS)).is_err());
    }

    /// Issue 22: KernelAgent's Gemini configurations name a model only its relay serves. With
    /// LLM_RELAY_URL set the error names the relay and the two keys that would reach it.
    #[test]
    fn a_model_only_kernelagents_relay_serves_names_the_keys_to_add() {
        let relay = [("LLM_RELAY_URL", "http://127.0.0.1:11434")];
        let message = resolve(&raw("gemini-2-5-pro"), &env_with(&relay))
            .unwrap_err()
            .to_string();
        assert_eq!(
            message,
            "cannot tell which provider serves model gemini-2-5-pro: data/models.yaml does not \
             list it; LLM_RELAY_URL is set (http://127.0.0.1:11434), but KernelAgent's relay \
             answers in its plugboard server's format, not OpenAI's; if that server also speaks \
             OpenAI's API, add `provider: openai_compatible` and `base_url: \
             http://127.0.0.1:11434` (its OpenAI-compatible URL, often ending in /v1) to the \
             strategy file; or set provider to anthropic or openai with a model of theirs, or to \
             replay"
        );
    }

    #[test]
    fn unknown_model_with_base_url_is_openai_compatible_and_warned() {
        let settings = resolve_ok(&RawLlmConfig {
            high_reasoning_effort: true,
            keys: LlmKeys {
                base_url: Some("http://127.0.0.1:8000/v1/".to_string()),
                temperature: Some(0.7),
                ..LlmKeys::default()
            },
            ..raw("qwen3-coder")
        });
        assert_eq!(settings.provider, Provider::OpenAiCompatible);
        assert_eq!(
            settings.base_url.as_deref(),
            Some("http://127.0.0.1:8000/v1")
        );
        assert_eq!(settings.reasoning_to_send(), None);
        assert_eq!(settings.temperature_to_send(), Some(0.7));
        assert_eq!(
            settings.warnings,
            vec![
                LlmConfigWarning::UnknownModel {
                    model: "qwen3-coder".to_string()
                },
                LlmConfigWarning::ContextWindowAssumed {
                    model: "qwen3-coder".to_string(),
                    tokens: 128_000
                }
            ]
        );
    }

    #[test]
    fn unknown_hosted_model_gets_neither_temperature_nor_effort() {
        let settings = resolve_ok(&RawLlmConfig {
            high_reasoning_effort: true,
            keys: LlmKeys {
                temperature: Some(0.5),
                ..LlmKeys::default()
            },
            ..raw("claude-future-9")
        });
        assert_eq!(settings.temperature_to_send(), None);
        assert_eq!(settings.reasoning_to_send(), None);
        assert!(matches!(
            settings.warnings[0],
            LlmConfigWarning::UnknownModel { .. }
        ));
    }

    #[test]
    fn keys_come_from_the_environment_and_are_required_for_hosted_providers() {
        let no_keys = env_with(&[]);
        assert_eq!(
            resolve(&raw("claude-sonnet-4-6"), &no_keys).unwrap_err(),
            LlmConfigError::MissingApiKey {
                provider: Provider::Anthropic,
                env_var: "ANTHROPIC_API_KEY"
            }
        );
        let blank = env_with(&[("OPENAI_API_KEY", "  ")]);
        let error = resolve(&raw("gpt-5"), &blank).unwrap_err();
        assert_eq!(
            error.to_string(),
            "OPENAI_API_KEY is not set: the openai provider needs its API key in that variable"
        );
        let compatible = resolve(
            &RawLlmConfig {
                provider: Some(Provider::OpenAiCompatible),
                keys: LlmKeys {
                    base_url: Some("http://localhost:8000/v1".to_string()),
                    ..LlmKeys::default()
                },
                ..raw("llama")
            },
            &no_keys,
        )
        .unwrap();
        assert_eq!(compatible.api_key, None);
        let anthropic = resolve_ok(&raw("claude-sonnet-4-6"));
        assert_eq!(
            anthropic.api_key.as_ref().map(ApiKey::expose),
            Some("sk-ant-test-key")
        );
    }

    #[test]
    fn openai_compatible_needs_a_base_url_and_urls_must_be_http() {
        let error = resolve(
            &RawLlmConfig {
                provider: Some(Provider::OpenAiCompatible),
                ..raw("llama")
            },
            &env_with(KEYS),
        )
        .unwrap_err();
        assert_eq!(error, LlmConfigError::MissingBaseUrl);
        let error = resolve(
            &RawLlmConfig {
                keys: LlmKeys {
                    base_url: Some("localhost:8000".to_string()),
                    ..LlmKeys::default()
                },
                ..raw("llama")
            },
            &env_with(KEYS),
        )
        .unwrap_err();
        assert!(matches!(error, LlmConfigError::InvalidBaseUrl { .. }));
    }

    /// As the providers' SDKs do, ANTHROPIC_BASE_URL and OPENAI_BASE_URL move the default
    /// endpoint (a proxy, a gateway, a loopback server); a configured `base_url` wins, and a
    /// URL from the environment is checked like one from the file.
    #[test]
    fn the_sdks_base_url_variables_move_the_default_endpoints() {
        let env = [
            ("ANTHROPIC_API_KEY", "sk-ant-test-key"),
            ("OPENAI_API_KEY", "sk-openai-test-key"),
            ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/anthropic"),
            ("OPENAI_BASE_URL", "http://127.0.0.1:9/v1"),
        ];
        let resolved = |raw: &RawLlmConfig, env: &[(&str, &str)]| resolve(raw, &env_with(env));
        assert_eq!(
            resolved(&raw("claude-haiku-4-5"), &env)
                .unwrap()
                .base_url
                .as_deref(),
            Some("http://127.0.0.1:9/anthropic")
        );
        assert_eq!(
            resolved(&raw("gpt-4.1"), &env).unwrap().base_url.as_deref(),
            Some("http://127.0.0.1:9/v1")
        );
        let configured = RawLlmConfig {
            keys: LlmKeys {
                base_url: Some("https://relay.example/anthropic".to_string()),
                ..LlmKeys::default()
            },
            ..raw("claude-haiku-4-5")
        };
        assert_eq!(
            resolved(&configured, &env).unwrap().base_url.as_deref(),
            Some("https://relay.example/anthropic")
        );
        let wrong = [KEYS[0], ("ANTHROPIC_BASE_URL", "127.0.0.1:9")];
        assert!(matches!(
            resolved(&raw("claude-haiku-4-5"), &wrong),
            Err(LlmConfigError::InvalidBaseUrl { .. })
        ));
    }

    #[test]
    fn default_base_urls_and_overrides() {
        assert_eq!(
            resolve_ok(&raw("claude-haiku-4-5")).base_url.as_deref(),
            Some("https://api.anthropic.com")
        );
        assert_eq!(
            resolve_ok(&raw("gpt-4.1")).base_url.as_deref(),
            Some("https://api.openai.com/v1")
        );
        let relay = resolve_ok(&RawLlmConfig {
            keys: LlmKeys {
                base_url: Some("https://relay.example/anthropic".to_string()),
                ..LlmKeys::default()
            },
            ..raw("claude-haiku-4-5")
        });
        assert_eq!(relay.provider, Provider::Anthropic);
        assert_eq!(
            relay.base_url.as_deref(),
            Some("https://relay.example/anthropic")
        );
    }

    #[test]
    fn providers_are_named_as_the_configuration_names_them() {
        for (name, provider) in [
            ("anthropic", Provider::Anthropic),
            ("openai", Provider::OpenAi),
            ("openai_compatible", Provider::OpenAiCompatible),
            ("replay", Provider::Replay),
        ] {
            let read: Provider = serde_json::from_value(serde_json::json!(name)).unwrap();
            assert_eq!(read, provider);
        }
        let bad_provider = serde_json::from_value::<Provider>(serde_json::json!("azure"));
        assert!(bad_provider.is_err());
    }

    #[test]
    fn max_tokens_is_taken_as_configured_and_checked_against_the_model() {
        let settings = resolve_ok(&RawLlmConfig {
            keys: LlmKeys {
                max_tokens: Some(100_000),
                ..LlmKeys::default()
            },
            ..raw("claude-opus-4-7")
        });
        assert_eq!(settings.max_tokens, 100_000);
        assert_eq!(
            resolve(
                &RawLlmConfig {
                    keys: LlmKeys {
                        max_tokens: Some(64_000),
                        ..LlmKeys::default()
                    },
                    ..raw("claude-opus-4-1")
                },
                &env_with(KEYS)
            )
            .unwrap_err(),
            LlmConfigError::MaxTokensAboveModelLimit {
                model: "claude-opus-4-1".to_string(),
                max_tokens: 64_000,
                limit: 32_000
            }
        );
        assert_eq!(resolve_ok(&raw("claude-opus-4-7")).max_tokens, 32_000);
        assert_eq!(resolve_ok(&raw("gpt-4o")).max_tokens, 16_384);
    }

    #[test]
    fn invalid_values_name_the_key_and_what_is_accepted() {
        let check = |raw: RawLlmConfig, expected: &str| {
            let error = resolve(&raw, &env_with(KEYS)).unwrap_err();
            assert_eq!(error.to_string(), expected);
        };
        check(
            RawLlmConfig {
                keys: LlmKeys {
                    temperature: Some(1.5),
                    ..LlmKeys::default()
                },
                ..raw("claude-sonnet-4-6")
            },
            "invalid temperature 1.5: expected a number from 0 to 1",
        );
        check(
            RawLlmConfig {
                keys: LlmKeys {
                    max_tokens: Some(0),
                    ..LlmKeys::default()
                },
                ..raw("gpt-5")
            },
            "invalid max_tokens 0: expected a positive number of tokens",
        );
        check(
            RawLlmConfig {
                keys: LlmKeys {
                    budget_usd: Some(-1.0),
                    ..LlmKeys::default()
                },
                ..raw("gpt-5")
            },
            "invalid budget_usd -1: expected a positive amount of USD",
        );
        check(
            RawLlmConfig {
                keys: LlmKeys {
                    request_timeout_s: Some(0.0),
                    ..LlmKeys::default()
                },
                ..raw("gpt-5")
            },
            "invalid request_timeout_s 0: expected a positive number of seconds, at most 86400",
        );
        check(
            RawLlmConfig {
                keys: LlmKeys {
                    request_timeout_s: Some(1e30),
                    ..LlmKeys::default()
                },
                ..raw("gpt-5")
            },
            "invalid request_timeout_s 1000000000000000000000000000000: expected a positive \
             number of seconds, at most 86400",
        );
        check(
            RawLlmConfig {
                keys: LlmKeys {
                    max_inflight: Some(0),
                    ..LlmKeys::default()
                },
                ..raw("gpt-5")
            },
            "invalid max_inflight 0: expected at least 1",
        );
        check(
            RawLlmConfig::default(),
            &LlmConfigError::MissingModel.to_string(),
        );
    }

    #[test]
    fn budget_needs_a_price() {
        let error = resolve(
            &RawLlmConfig {
                keys: LlmKeys {
                    budget_usd: Some(10.0),
                    base_url: Some("http://localhost:8000/v1".to_string()),
                    ..LlmKeys::default()
                },
                ..raw("llama")
            },
            &env_with(KEYS),
        )
        .unwrap_err();
        assert_eq!(
            error,
            LlmConfigError::BudgetWithoutPrice {
                model: "llama".to_string()
            }
        );
        assert!(error.to_string().contains("prices.llama"));
        let priced = resolve_ok(&RawLlmConfig {
            keys: LlmKeys {
                budget_usd: Some(10.0),
                base_url: Some("http://localhost:8000/v1".to_string()),
                prices: BTreeMap::from([(
                    "llama".to_string(),
                    RawPrice {
                        input_usd_per_mtok: 0.1,
                        output_usd_per_mtok: 0.2,
                    },
                )]),
                ..LlmKeys::default()
            },
            ..raw("llama")
        });
        assert_eq!(priced.capability.price.unwrap().output_usd_per_mtok, 0.2);
    }

    #[test]
    fn configured_prices_override_the_table() {
        let settings = resolve_ok(&raw("claude-sonnet-4-5-20250929"));
        let price = settings.capability.price.unwrap();
        assert_eq!(
            (price.input_usd_per_mtok, price.output_usd_per_mtok),
            (3.0, 15.0)
        );
        assert!(price.source.starts_with("data/models.yaml: https://"));
        let settings = resolve_ok(&RawLlmConfig {
            keys: LlmKeys {
                prices: BTreeMap::from([(
                    "claude-sonnet-4-5".to_string(),
                    RawPrice {
                        input_usd_per_mtok: 2.0,
                        output_usd_per_mtok: 10.0,
                    },
                )]),
                ..LlmKeys::default()
            },
            ..raw("claude-sonnet-4-5-20250929")
        });
        let price = settings.capability.price.unwrap();
        assert_eq!(
            (price.input_usd_per_mtok, price.output_usd_per_mtok),
            (2.0, 10.0)
        );
        assert_eq!(price.source, "configuration (prices.claude-sonnet-4-5)");
        let under_an_alias = resolve_ok(&RawLlmConfig {
            keys: LlmKeys {
                prices: BTreeMap::from([(
                    "claude-opus-4.5".to_string(),
                    RawPrice {
                        input_usd_per_mtok: 4.0,
                        output_usd_per_mtok: 20.0,
                    },
                )]),
                ..LlmKeys::default()
            },
            ..raw("claude-opus-4.5")
        });
        assert_eq!(
            under_an_alias.capability.price.unwrap().source,
            "configuration (prices.claude-opus-4.5)"
        );
        let error = resolve(
            &RawLlmConfig {
                keys: LlmKeys {
                    prices: BTreeMap::from([(
                        "gpt-5".to_string(),
                        RawPrice {
                            input_usd_per_mtok: f64::NAN,
                            output_usd_per_mtok: 1.0,
                        },
                    )]),
                    ..LlmKeys::default()
                },
                ..raw("gpt-5")
            },
            &env_with(KEYS),
        )
        .unwrap_err();
        assert_eq!(
            error,
            LlmConfigError::InvalidPrice {
                model: "gpt-5".to_string()
            }
        );
    }

    /// (model, max_tokens, temperature, high effort) -> (temperature sent, reasoning sent).
    fn check_controls(
        model: &str,
        max_tokens: Option<u32>,
        temperature: Option<f64>,
        high_reasoning_effort: bool,
        expected: (Option<f64>, Option<ReasoningRequest>),
    ) {
        let settings = resolve_ok(&RawLlmConfig {
            high_reasoning_effort,
            keys: LlmKeys {
                max_tokens,
                temperature,
                ..LlmKeys::default()
            },
            ..raw(model)
        });
        assert_eq!(
            (settings.temperature_to_send(), settings.reasoning_to_send()),
            expected,
            "{model} max_tokens={max_tokens:?} temperature={temperature:?} high={high_reasoning_effort}"
        );
    }

    #[test]
    fn temperature_and_reasoning_follow_the_table() {
        use ReasoningRequest::*;
        check_controls(
            "claude-sonnet-4-6",
            None,
            Some(0.3),
            false,
            (Some(0.3), None),
        );
        check_controls("claude-sonnet-4-6", None, None, false, (None, None));
        check_controls(
            "claude-sonnet-4-6",
            None,
            Some(0.3),
            true,
            (None, Some(AnthropicEffort { effort: "high" })),
        );
        check_controls("claude-opus-4-7", None, Some(0.3), false, (None, None));
        check_controls(
            "claude-sonnet-4-5",
            Some(20_000),
            None,
            true,
            (
                None,
                Some(AnthropicThinking {
                    budget_tokens: 10_000,
                }),
            ),
        );
        check_controls(
            "claude-haiku-4-5",
            Some(2_000),
            Some(0.2),
            true,
            (Some(0.2), None),
        );
        check_controls("gpt-5", None, Some(0.3), false, (None, None));
        check_controls(
            "gpt-5-mini",
            None,
            None,
            true,
            (None, Some(OpenAiEffort { effort: "high" })),
        );
        check_controls("gpt-4.1", None, Some(0.3), true, (Some(0.3), None));
    }

    #[test]
    fn dropped_settings_are_warned() {
        let warnings = |raw: RawLlmConfig| resolve_ok(&raw).warnings;
        assert_eq!(
            warnings(RawLlmConfig {
                keys: LlmKeys {
                    temperature: Some(0.3),
                    ..LlmKeys::default()
                },
                ..raw("claude-opus-4-7")
            }),
            vec![LlmConfigWarning::TemperatureNotAccepted {
                model: "claude-opus-4-7".to_string()
            }]
        );
        assert_eq!(
            warnings(RawLlmConfig {
                high_reasoning_effort: true,
                keys: LlmKeys {
                    temperature: Some(0.3),
                    ..LlmKeys::default()
                },
                ..raw("claude-sonnet-4-6")
            }),
            vec![LlmConfigWarning::TemperatureDroppedForReasoning {
                model: "claude-sonnet-4-6".to_string()
            }]
        );
        assert_eq!(
            warnings(RawLlmConfig {
                high_reasoning_effort: true,
                ..raw("gpt-4o")
            }),
            vec![LlmConfigWarning::ReasoningNotSupported {
                model: "gpt-4o".to_string(),
                provider: Provider::OpenAi
            }]
        );
        assert_eq!(
            warnings(RawLlmConfig {
                high_reasoning_effort: true,
                keys: LlmKeys {
                    max_tokens: Some(1_500),
                    ..LlmKeys::default()
                },
                ..raw("claude-haiku-4-5")
            }),
            vec![LlmConfigWarning::MaxTokensTooSmallForThinking {
                model: "claude-haiku-4-5".to_string(),
                max_tokens: 1_500,
                needed: 2_048
            }]
        );
        assert_eq!(warnings(raw("claude-sonnet-4-6")), vec![]);
    }

    #[test]
    fn replay_needs_no_model_key_or_url() {
        let settings = resolve(
            &RawLlmConfig {
                provider: Some(Provider::Replay),
                keys: LlmKeys {
                    budget_usd: Some(1.0),
                    ..LlmKeys::default()
                },
                ..RawLlmConfig::default()
            },
            &env_with(&[]),
        )
        .unwrap();
        assert_eq!(settings.provider, Provider::Replay);
        assert_eq!(settings.api_key, None);
        assert_eq!(settings.base_url, None);
        assert_eq!(
            settings.capability.price.unwrap().cost_usd(1_000, 1_000),
            0.0
        );
    }

    #[test]
    fn the_settings_never_print_the_key() {
        let settings = resolve_ok(&raw("claude-sonnet-4-6"));
        let printed = format!("{settings:?}");
        assert!(!printed.contains("sk-ant-test-key"));
        assert!(printed.contains("[redacted]"));
    }
}
