//! The model table, data/models.yaml: each model's provider, capabilities (temperature,
//! reasoning), maximum output, context window and price, each with the page it comes from, and
//! the spellings its API does not know. Read once, checked entry by entry.

use std::collections::HashMap;
use std::fmt;

use serde::Deserialize;

use super::window::{ContextWindow, MAX_CONTEXT_WINDOW_TOKENS, WindowSource};

/// The capability and price table shipped with kactors; a data file, edited without touching code.
const BUILTIN_MODEL_TABLE: &str = include_str!("../../data/models.yaml");

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Provider {
    #[serde(rename = "anthropic")]
    Anthropic,
    #[serde(rename = "openai")]
    OpenAi,
    #[serde(rename = "openai_compatible")]
    OpenAiCompatible,
    #[serde(rename = "replay")]
    Replay,
}

impl Provider {
    pub fn name(self) -> &'static str {
        match self {
            Provider::Anthropic => "anthropic",
            Provider::OpenAi => "openai",
            Provider::OpenAiCompatible => "openai_compatible",
            Provider::Replay => "replay",
        }
    }

    /// The environment variable the provider's key is read from.
    /// The variable that moves the provider's endpoint (a proxy, a gateway, a test's loopback
    /// server), as the providers' own SDKs read it; the configuration's `base_url` wins.
    pub fn base_url_env_var(self) -> Option<&'static str> {
        match self {
            Provider::Anthropic => Some("ANTHROPIC_BASE_URL"),
            Provider::OpenAi => Some("OPENAI_BASE_URL"),
            Provider::OpenAiCompatible | Provider::Replay => None,
        }
    }

    pub fn key_env_var(self) -> Option<&'static str> {
        match self {
            Provider::Anthropic => Some("ANTHROPIC_API_KEY"),
            Provider::OpenAi | Provider::OpenAiCompatible => Some("OPENAI_API_KEY"),
            Provider::Replay => None,
        }
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How a model is asked to reason harder, per the capability table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningKind {
    None,
    /// `thinking: {type: enabled, budget_tokens}` (Claude 4.5 and older 4.x models).
    AnthropicThinking,
    /// `thinking: {type: adaptive}` with `output_config: {effort}` (Claude 4.6 and later).
    AnthropicEffort,
    /// `reasoning_effort` on Chat Completions (o-series, GPT-5 family).
    OpenaiReasoningEffort,
}

/// USD per million tokens, with where the figures came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Price {
    pub input_usd_per_mtok: f64,
    pub output_usd_per_mtok: f64,
    pub source: String,
}

impl Price {
    pub fn cost_usd(&self, input_tokens: u64, output_tokens: u64) -> f64 {
        (input_tokens as f64 * self.input_usd_per_mtok
            + output_tokens as f64 * self.output_usd_per_mtok)
            / 1_000_000.0
    }
}

/// What kactors knows about the configured model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelCapability {
    /// The table entry's name, or the configured model when it is not in the table.
    pub model: String,
    pub known: bool,
    pub accepts_temperature: bool,
    pub reasoning: ReasoningKind,
    pub max_output_tokens: Option<u32>,
    /// From the table; None for an unknown model.
    pub context_window: Option<ContextWindow>,
    pub price: Option<Price>,
}

#[derive(Debug, thiserror::Error)]
pub enum ModelTableError {
    #[error("unreadable model table: {0}")]
    Yaml(#[from] serde_yaml::Error),
    #[error("model table names {name} twice: each model and alias may appear once")]
    Duplicate { name: String },
    #[error("model table entry {model}: {reason}")]
    Invalid { model: String, reason: String },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelTableFile {
    models: Vec<ModelEntryFile>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelEntryFile {
    model: String,
    #[serde(default)]
    aliases: Vec<String>,
    provider: Provider,
    accepts_temperature: bool,
    reasoning: ReasoningKind,
    max_output_tokens: u32,
    context_window: ContextWindowFile,
    price: PriceFile,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ContextWindowFile {
    tokens: u64,
    source: String,
    checked: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct PriceFile {
    input_usd_per_mtok: f64,
    output_usd_per_mtok: f64,
    source: String,
    checked: String,
}

/// The parsed capability table: models by name and alias.
#[derive(Debug, Clone)]
pub struct ModelTable {
    entries: Vec<ModelEntryFile>,
    index_by_name: HashMap<String, usize>,
}

impl ModelTable {
    pub fn builtin() -> Result<ModelTable, ModelTableError> {
        ModelTable::parse(BUILTIN_MODEL_TABLE)
    }

    pub fn parse(text: &str) -> Result<ModelTable, ModelTableError> {
        let file: ModelTableFile = serde_yaml::from_str(text)?;
        let mut index_by_name = HashMap::new();
        for (index, entry) in file.models.iter().enumerate() {
            validate_entry(entry)?;
            for name in std::iter::once(&entry.model).chain(&entry.aliases) {
                if index_by_name.insert(name.clone(), index).is_some() {
                    return Err(ModelTableError::Duplicate { name: name.clone() });
                }
            }
        }
        Ok(ModelTable {
            entries: file.models,
            index_by_name,
        })
    }

    /// Finds a model by its name or alias, also with a release-date suffix
    /// (`claude-sonnet-4-5-20250929`, `gpt-4.1-2025-04-14`). Nothing else is matched as a
    /// prefix, so a variant the table does not name (say `o3-pro`) is unknown rather than
    /// silently priced as its base model.
    fn lookup(&self, model: &str) -> Option<&ModelEntryFile> {
        let index = self
            .index_by_name
            .get(model)
            .or_else(|| self.index_by_name.get(strip_date_suffix(model)?))?;
        Some(&self.entries[*index])
    }

    /// The name the API knows for `name` when `name` is exactly one of an entry's aliases.
    /// A dated alias (`claude-opus-4-20250514`) is the API's own pinned name and has none.
    pub(super) fn api_name_of_alias(&self, name: &str) -> Option<&str> {
        let entry = &self.entries[*self.index_by_name.get(name)?];
        (entry.model != name).then_some(entry.model.as_str())
    }

    pub(super) fn capability(&self, model: &str) -> Option<(Provider, ModelCapability)> {
        let entry = self.lookup(model)?;
        let capability = ModelCapability {
            model: entry.model.clone(),
            known: true,
            accepts_temperature: entry.accepts_temperature,
            reasoning: entry.reasoning,
            max_output_tokens: Some(entry.max_output_tokens),
            context_window: Some(ContextWindow {
                tokens: entry.context_window.tokens,
                source: WindowSource::ModelTable {
                    page: entry.context_window.source.clone(),
                },
            }),
            price: Some(Price {
                input_usd_per_mtok: entry.price.input_usd_per_mtok,
                output_usd_per_mtok: entry.price.output_usd_per_mtok,
                source: format!(
                    "data/models.yaml: {} (checked {})",
                    entry.price.source, entry.price.checked
                ),
            }),
        };
        Some((entry.provider, capability))
    }
}

fn validate_entry(entry: &ModelEntryFile) -> Result<(), ModelTableError> {
    let invalid = |reason: &str| ModelTableError::Invalid {
        model: entry.model.clone(),
        reason: reason.to_string(),
    };
    if entry.model.trim().is_empty() || entry.aliases.iter().any(|a| a.trim().is_empty()) {
        return Err(invalid("empty model name or alias"));
    }
    if !matches!(entry.provider, Provider::Anthropic | Provider::OpenAi) {
        return Err(invalid("provider must be anthropic or openai"));
    }
    let reasoning_fits_provider = match entry.reasoning {
        ReasoningKind::None => true,
        ReasoningKind::AnthropicThinking | ReasoningKind::AnthropicEffort => {
            entry.provider == Provider::Anthropic
        }
        ReasoningKind::OpenaiReasoningEffort => entry.provider == Provider::OpenAi,
    };
    if !reasoning_fits_provider {
        return Err(invalid("reasoning kind belongs to another provider"));
    }
    if entry.max_output_tokens == 0 {
        return Err(invalid("max_output_tokens must be positive"));
    }
    let window = &entry.context_window;
    if window.tokens <= u64::from(entry.max_output_tokens)
        || window.tokens > MAX_CONTEXT_WINDOW_TOKENS
    {
        return Err(invalid(
            "context_window.tokens must exceed max_output_tokens and be at most 100000000",
        ));
    }
    if window.source.trim().is_empty() || !is_iso_date(&window.checked) {
        return Err(invalid(
            "the context window needs a source and a checked date (YYYY-MM-DD)",
        ));
    }
    let price = &entry.price;
    if !is_valid_price(price.input_usd_per_mtok) || !is_valid_price(price.output_usd_per_mtok) {
        return Err(invalid("prices must be finite and not negative"));
    }
    if price.source.trim().is_empty() || !is_iso_date(&price.checked) {
        return Err(invalid(
            "each price needs a source and a checked date (YYYY-MM-DD)",
        ));
    }
    Ok(())
}

pub(super) fn is_valid_price(usd_per_mtok: f64) -> bool {
    usd_per_mtok.is_finite() && usd_per_mtok >= 0.0
}

fn is_iso_date(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() == 10
        && bytes.iter().enumerate().all(|(i, b)| match i {
            4 | 7 => *b == b'-',
            _ => b.is_ascii_digit(),
        })
}

/// `name-20250929` (Anthropic) or `name-2025-04-14` (OpenAI) to `name`.
pub(super) fn strip_date_suffix(model: &str) -> Option<&str> {
    let (base, suffix) = model.rsplit_once('-')?;
    if suffix.len() == 8 && suffix.bytes().all(|b| b.is_ascii_digit()) {
        return Some(base);
    }
    // YYYY-MM-DD: three dash-separated groups at the end.
    let (rest, day) = model.rsplit_once('-')?;
    let (rest, month) = rest.rsplit_once('-')?;
    let (base, year) = rest.rsplit_once('-')?;
    let all_digits = |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_digit());
    (all_digits(year, 4) && all_digits(month, 2) && all_digits(day, 2)).then_some(base)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_table_parses_and_every_price_has_a_source() {
        let table = ModelTable::builtin().unwrap();
        assert!(table.entries.len() >= 20);
        for entry in &table.entries {
            assert!(
                entry.price.source.starts_with("https://"),
                "{}",
                entry.model
            );
            assert!(is_iso_date(&entry.price.checked), "{}", entry.model);
        }
    }

    #[test]
    fn builtin_table_covers_the_current_families() {
        let table = ModelTable::builtin().unwrap();
        let check = |model: &str, provider: Provider, reasoning: ReasoningKind, temp: bool| {
            let (found_provider, capability) = table
                .capability(model)
                .unwrap_or_else(|| panic!("{model} missing from the table"));
            assert_eq!(
                (
                    found_provider,
                    capability.reasoning,
                    capability.accepts_temperature
                ),
                (provider, reasoning, temp),
                "{model}"
            );
        };
        use Provider::{Anthropic, OpenAi};
        use ReasoningKind::*;
        check("claude-opus-4-7", Anthropic, AnthropicEffort, false);
        check("claude-opus-4-6", Anthropic, AnthropicEffort, true);
        check("claude-sonnet-4-6", Anthropic, AnthropicEffort, true);
        check(
            "claude-sonnet-4-5-20250929",
            Anthropic,
            AnthropicThinking,
            true,
        );
        check("claude-haiku-4-5", Anthropic, AnthropicThinking, true);
        check(
            "claude-opus-4-1-20250805",
            Anthropic,
            AnthropicThinking,
            true,
        );
        check("gpt-5", OpenAi, OpenaiReasoningEffort, false);
        check(
            "gpt-5-mini-2025-08-07",
            OpenAi,
            OpenaiReasoningEffort,
            false,
        );
        check("o3", OpenAi, OpenaiReasoningEffort, false);
        check("o4-mini", OpenAi, OpenaiReasoningEffort, false);
        check("gpt-4.1-2025-04-14", OpenAi, None, true);
        check("gpt-4o", OpenAi, None, true);
    }

    #[test]
    fn table_matches_names_aliases_and_date_suffixes_only() {
        let table = ModelTable::builtin().unwrap();
        let entry_of = |model: &str| table.lookup(model).map(|entry| entry.model.as_str());
        assert_eq!(entry_of("claude-opus-4-1"), Some("claude-opus-4-1"));
        assert_eq!(entry_of("claude-opus-4-20250514"), Some("claude-opus-4-0"));
        assert_eq!(entry_of("gpt-4o-2024-08-06"), Some("gpt-4o"));
        assert_eq!(entry_of("o3-pro"), None);
        assert_eq!(entry_of("gpt-5-turbo-preview"), None);
        assert_eq!(entry_of("claude-opus-4-7-experimental"), None);
    }

    #[test]
    fn table_rejects_broken_entries() {
        let entry = |extra: &str| {
            format!(
                "models:\n  - model: m\n    provider: openai\n    accepts_temperature: true\n    \
                 reasoning: none\n    max_output_tokens: 10\n    context_window: {{tokens: 100, \
                 source: https://w, checked: 2026-01-02}}\n{extra}"
            )
        };
        let price = "    price: {input_usd_per_mtok: 1, output_usd_per_mtok: 2, source: https://x, checked: 2026-01-02}\n";
        assert!(ModelTable::parse(&entry(price)).is_ok());
        let no_date = price.replace("2026-01-02", "yesterday");
        assert!(matches!(
            ModelTable::parse(&entry(&no_date)),
            Err(ModelTableError::Invalid { .. })
        ));
        let negative = price.replace("output_usd_per_mtok: 2", "output_usd_per_mtok: -2");
        assert!(matches!(
            ModelTable::parse(&entry(&negative)),
            Err(ModelTableError::Invalid { .. })
        ));
        let twice = format!("{}{}", entry(price), &entry(price)["models:\n".len()..]);
        assert!(matches!(
            ModelTable::parse(&twice),
            Err(ModelTableError::Duplicate { .. })
        ));
        for broken_window in [
            "tokens: 10, source: https://w,",
            "tokens: 100000001, source: https://w,",
            "tokens: 100, source: ' ',",
        ] {
            let broken = entry(price).replace("tokens: 100, source: https://w,", broken_window);
            assert!(
                matches!(
                    ModelTable::parse(&broken),
                    Err(ModelTableError::Invalid { .. })
                ),
                "{broken_window}"
            );
        }
        let misspelt = entry(price).replace("accepts_temperature", "accept_temperature");
        assert!(matches!(
            ModelTable::parse(&misspelt),
            Err(ModelTableError::Yaml(_))
        ));
    }

    #[test]
    fn date_suffixes() {
        assert_eq!(strip_date_suffix("claude-x-20250929"), Some("claude-x"));
        assert_eq!(strip_date_suffix("gpt-4o-2024-08-06"), Some("gpt-4o"));
        assert_eq!(strip_date_suffix("gpt-4o-mini"), None);
        assert_eq!(strip_date_suffix("claude-opus-4-1"), None);
        assert_eq!(strip_date_suffix("2024-08-06"), None);
    }
}
