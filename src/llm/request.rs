//! What the broker asks a provider and what comes back, independent of any wire format.

use super::window::MAX_CONTEXT_WINDOW_TOKENS as MAX_REPORTED_TOKENS;

/// Why a request is made; the broker journals it and the replay provider answers by it.
pub use actors::ports::RequestKind;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
}

impl Role {
    /// The role's name on both wire formats (Anthropic and OpenAI spell these two alike).
    pub fn wire_name(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChatMessage {
    pub role: Role,
    pub content: String,
}

impl ChatMessage {
    pub fn user(content: impl Into<String>) -> ChatMessage {
        ChatMessage {
            role: Role::User,
            content: content.into(),
        }
    }

    pub fn assistant(content: impl Into<String>) -> ChatMessage {
        ChatMessage {
            role: Role::Assistant,
            content: content.into(),
        }
    }

    /// The message as both wire formats write it in their `messages` array.
    pub fn wire_json(&self) -> serde_json::Value {
        serde_json::json!({"role": self.role.wire_name(), "content": self.content})
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    pub kind: RequestKind,
    pub system: String,
    pub messages: Vec<ChatMessage>,
    /// Unique within a run; ties the journal's request and reply records together.
    pub request_id: String,
}

#[cfg(test)]
impl ChatRequest {
    /// A refinement's conversation: the system prompt, the request, the model's answer and
    /// what went wrong with it.
    pub(crate) fn refinement_conversation() -> ChatRequest {
        ChatRequest {
            kind: RequestKind::Refine,
            system: "You write Triton kernels.".to_string(),
            messages: vec![
                ChatMessage::user("make it faster"),
                ChatMessage::assistant("```python\ndef kernel_function(): pass\n```"),
                ChatMessage::user("it failed: wrong result"),
            ],
            request_id: "r1".to_string(),
        }
    }
}

impl ChatRequest {
    /// Bytes of prompt text (UTF-8), the basis of the bound checked against the model's window.
    pub fn prompt_bytes(&self) -> u64 {
        let bytes = self.system.len()
            + self
                .messages
                .iter()
                .map(|message| message.content.len())
                .sum::<usize>();
        bytes as u64
    }

    /// Characters of prompt text, the basis of the token estimate made before sending.
    pub fn prompt_chars(&self) -> usize {
        self.system.chars().count()
            + self
                .messages
                .iter()
                .map(|message| message.content.chars().count())
                .sum::<usize>()
    }
}

/// Token counts as the provider reported them.
pub use actors::ports::TokenUsage as Usage;

/// A reply's token counts, read from its `usage` object under the provider's key names. Both
/// must be whole numbers from 0 to [`MAX_REPORTED_TOKENS`] (no request uses more tokens than
/// the largest window kactors accepts); otherwise the reply counts as reporting no usage and
/// is estimated instead, so that a count that is negative, fractional or absurd never reaches
/// the budget's and the rate limit's arithmetic, and never costs the reply it came with.
pub(super) fn reported_usage(
    usage: Option<&serde_json::Value>,
    input_key: &str,
    output_key: &str,
) -> Option<Usage> {
    let usage = usage?;
    let count = |key: &str| {
        usage
            .get(key)
            .and_then(serde_json::Value::as_u64)
            .filter(|tokens| *tokens <= MAX_REPORTED_TOKENS)
    };
    match (count(input_key), count(output_key)) {
        (Some(input_tokens), Some(output_tokens)) => Some(Usage {
            input_tokens,
            output_tokens,
        }),
        _ => {
            tracing::warn!(
                "the reply's usage is not two token counts from 0 to {MAX_REPORTED_TOKENS} \
                 under {input_key} and {output_key}; estimating instead"
            );
            None
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChatReply {
    pub text: String,
    /// The answer stopped at max_tokens; any code in it is likely incomplete.
    pub truncated: bool,
    /// None when the server reported no usage (some OpenAI-compatible servers omit it).
    pub usage: Option<Usage>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn check(usage: serde_json::Value, expected: Option<(u64, u64)>) {
        let expected = expected.map(|(input_tokens, output_tokens)| Usage {
            input_tokens,
            output_tokens,
        });
        assert_eq!(
            reported_usage(Some(&usage), "in", "out"),
            expected,
            "{usage}"
        );
    }

    /// Issue 10: no count a server reports may overflow the budget's sums or pass for a bill.
    #[test]
    fn only_whole_counts_in_range_are_taken() {
        check(json!({"in": 12, "out": 30, "other": -1}), Some((12, 30)));
        check(
            json!({"in": 0, "out": MAX_REPORTED_TOKENS}),
            Some((0, MAX_REPORTED_TOKENS)),
        );
        check(json!({"in": MAX_REPORTED_TOKENS + 1, "out": 1}), None);
        check(json!({"in": u64::MAX, "out": u64::MAX}), None);
        check(json!({"in": -5, "out": 1}), None);
        check(json!({"in": 1.5, "out": 1}), None);
        check(json!({"in": 1e300, "out": 1}), None);
        check(json!({"in": "12", "out": 1}), None);
        check(json!({"in": 12}), None);
        check(json!(null), None);
        assert_eq!(reported_usage(None, "in", "out"), None);
    }
}
