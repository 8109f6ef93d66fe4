//! A model's context window, and the refusal of a prompt that cannot fit in it beside the
//! reply. The check runs before anything is sent: a prompt the model must reject would still
//! take a reservation of the budget and the rate limit, and a round trip.

use std::fmt;

/// The largest context window kactors accepts, configured or from the table: a hundred times
/// the largest any model in data/models.yaml has. It also bounds the token counts a reply may
/// report (no request can use more tokens than its window), so no sum of them can overflow.
pub const MAX_CONTEXT_WINDOW_TOKENS: u64 = 100_000_000;

/// The window assumed for a model data/models.yaml does not list when `context_window` is not
/// configured: what most served open models (Llama 3.1, Qwen 2.5 and 3 with YaRN) offer.
pub const ASSUMED_CONTEXT_WINDOW_TOKENS: u64 = 128_000;

/// The most bytes of prompt one token is taken to cover, so that `bytes / 6` is a lower bound
/// on a prompt's tokens. No tokenizer can be downloaded at run time, and each provider's
/// differs, so the estimate is a bound that holds for all of them on the text kactors sends
/// (English instructions, Python and Triton source, profiler metrics, tracebacks): BPE
/// tokenizers average about 4 bytes a token on English (OpenAI's and Anthropic's own rules of
/// thumb: 4 and 3.5 characters) and fewer on code and numbers; Claude Opus 4.7's tokenizer
/// and later ones count about 30% more tokens for the same text; non-ASCII text takes 2 to 4
/// bytes a character and at least one token per character or two. Six bytes leaves half as
/// much again as the most efficient of them needs, so a prompt is refused only when it cannot
/// fit; one that might not fit is sent and, if it does not, rejected by the server. Only text
/// built for the purpose (a megabyte of one repeated character) tokenizes more densely.
pub const BYTES_PER_TOKEN_BOUND: u64 = 6;

/// The fewest tokens a prompt of `prompt_bytes` bytes of UTF-8 can be.
pub fn prompt_tokens_at_least(prompt_bytes: u64) -> u64 {
    prompt_bytes.div_ceil(BYTES_PER_TOKEN_BOUND)
}

/// Where the size of a model's window comes from; the refusal names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WindowSource {
    /// data/models.yaml, with the page its figure was read from.
    ModelTable {
        page: String,
    },
    Configured,
    /// The model is not in data/models.yaml and `context_window` is not set.
    Assumed,
}

impl fmt::Display for WindowSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WindowSource::ModelTable { page } => write!(f, "data/models.yaml, from {page}"),
            WindowSource::Configured => f.write_str("context_window in the configuration"),
            WindowSource::Assumed => write!(
                f,
                "assumed, as data/models.yaml does not list the model; set context_window to \
                 its real window"
            ),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextWindow {
    /// Prompt and reply together.
    pub tokens: u64,
    pub source: WindowSource,
}

impl ContextWindow {
    /// Whether a prompt of `prompt_bytes` can fit beside a reply of `max_tokens`.
    pub fn check(
        &self,
        model: &str,
        prompt_bytes: u64,
        max_tokens: u32,
    ) -> Result<(), PromptTooLarge> {
        let estimate = prompt_tokens_at_least(prompt_bytes);
        if estimate.saturating_add(u64::from(max_tokens)) <= self.tokens {
            return Ok(());
        }
        Err(PromptTooLarge {
            model: model.to_string(),
            window: self.clone(),
            prompt_bytes,
            estimate,
            max_tokens,
        })
    }
}

/// A prompt refused before sending: it and the reply cannot both fit in the model's window.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "prompt not sent: its {prompt_bytes} bytes are at least {estimate} tokens (at most \
     {BYTES_PER_TOKEN_BOUND} bytes a token), which with max_tokens {max_tokens} for the reply \
     exceed the {}-token context window of model {model} ({}); shorten what the prompt carries \
     (problem.py, the kernel, its error output), lower max_tokens, or choose a model with a \
     larger window",
    window.tokens,
    window.source
)]
pub struct PromptTooLarge {
    pub model: String,
    pub window: ContextWindow,
    pub prompt_bytes: u64,
    pub estimate: u64,
    pub max_tokens: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(tokens: u64) -> ContextWindow {
        ContextWindow {
            tokens,
            source: WindowSource::Configured,
        }
    }

    /// (window, prompt bytes, max_tokens) -> refused with this estimate, or sent.
    fn check(window_tokens: u64, prompt_bytes: u64, max_tokens: u32, refused: Option<u64>) {
        let outcome = window(window_tokens).check("m", prompt_bytes, max_tokens);
        assert_eq!(
            outcome.as_ref().err().map(|refusal| refusal.estimate),
            refused,
            "window {window_tokens}, {prompt_bytes} bytes, max_tokens {max_tokens}: {outcome:?}"
        );
    }

    #[test]
    fn the_prompt_and_the_reply_must_fit_together() {
        check(1_000, 0, 1_000, None);
        check(1_000, 6 * 500, 500, None);
        check(1_000, 6 * 500 + 1, 500, Some(501));
        check(1_000, 6, 1_000, Some(1));
        check(200_000, 1_000_000, 32_000, None);
        check(200_000, 1_200_000, 32_000, Some(200_000));
        check(200_000, u64::MAX, u32::MAX, Some(u64::MAX.div_ceil(6)));
    }

    #[test]
    fn the_refusal_names_the_model_its_window_the_estimate_and_what_to_do() {
        let window = ContextWindow {
            tokens: 200_000,
            source: WindowSource::ModelTable {
                page: "https://example/opus".to_string(),
            },
        };
        let refusal = window
            .check("claude-opus-4-5", 1_800_000, 32_000)
            .unwrap_err();
        assert_eq!(
            refusal.to_string(),
            "prompt not sent: its 1800000 bytes are at least 300000 tokens (at most 6 bytes a \
             token), which with max_tokens 32000 for the reply exceed the 200000-token context \
             window of model claude-opus-4-5 (data/models.yaml, from https://example/opus); \
             shorten what the prompt carries (problem.py, the kernel, its error output), lower \
             max_tokens, or choose a model with a larger window"
        );
    }
}
