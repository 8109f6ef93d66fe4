//! What the broker asks a provider and what comes back, independent of any wire format.

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
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    pub kind: RequestKind,
    pub system: String,
    pub messages: Vec<ChatMessage>,
    /// Unique within a run; ties the journal's request and reply records together.
    pub request_id: String,
}

impl ChatRequest {
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

#[derive(Debug, Clone, PartialEq)]
pub struct ChatReply {
    pub text: String,
    /// The answer stopped at max_tokens; any code in it is likely incomplete.
    pub truncated: bool,
    /// None when the server reported no usage (some OpenAI-compatible servers omit it).
    pub usage: Option<Usage>,
}
