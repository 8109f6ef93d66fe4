//! One attempt at a provider: the traits the retry loop, the HTTP provider and the wire formats
//! meet at (`ChatProvider`, `WireFormat`), and how an attempt fails (`ProviderError`). Below
//! all three: it imports none of them.

use std::fmt;
use std::future::Future;
use std::time::{Duration, SystemTime};

use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::request::{ChatReply, ChatRequest};
use super::retry_after::{delay_from_seconds, parse_retry_after};
use super::settings::{LlmSettings, Provider};

/// Server text kept in an error message; enough to diagnose, short enough for a journal line.
const MAX_ERROR_BODY_CHARS: usize = 500;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryCause {
    Status(u16),
    Connection,
    Timeout,
}

impl fmt::Display for RetryCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RetryCause::Status(status) => write!(f, "status {status}"),
            RetryCause::Connection => f.write_str("connection error"),
            RetryCause::Timeout => f.write_str("timed out"),
        }
    }
}

/// Why one attempt failed, classified by what should happen next.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProviderError {
    /// Worth another attempt after a wait: 429, 500, 502, 503, 504, 529, connection errors
    /// and timeouts.
    #[error("{provider} request failed ({cause}): {message}")]
    Retryable {
        provider: Provider,
        cause: RetryCause,
        retry_after: Option<Duration>,
        message: String,
    },
    /// The request itself is wrong (400 and the other 4xx, an unreadable answer): sending it
    /// again would fail again.
    #[error("{provider} rejected the request (status {}): {message}", display_status(*.status))]
    Fatal {
        provider: Provider,
        status: Option<u16>,
        message: String,
    },
    /// 401 or 403: every later request would fail the same way, so the run stops.
    #[error("{provider} rejected the API key (status {status}): {message}; check {env_var}")]
    Auth {
        provider: Provider,
        status: u16,
        message: String,
        env_var: &'static str,
    },
}

fn display_status(status: Option<u16>) -> String {
    status.map_or_else(|| "none".to_string(), |status| status.to_string())
}

impl ProviderError {
    pub(super) fn with_provider(self, actual: Provider) -> ProviderError {
        match self {
            ProviderError::Retryable {
                cause,
                retry_after,
                message,
                ..
            } => ProviderError::Retryable {
                provider: actual,
                cause,
                retry_after,
                message,
            },
            ProviderError::Fatal {
                status, message, ..
            } => ProviderError::Fatal {
                provider: actual,
                status,
                message,
            },
            ProviderError::Auth {
                status,
                message,
                env_var,
                ..
            } => ProviderError::Auth {
                provider: actual,
                status,
                message,
                env_var,
            },
        }
    }

    pub(super) fn map_message(self, scrub: impl Fn(&str) -> String) -> ProviderError {
        match self {
            ProviderError::Retryable {
                provider,
                cause,
                retry_after,
                message,
            } => ProviderError::Retryable {
                provider,
                cause,
                retry_after,
                message: scrub(&message),
            },
            ProviderError::Fatal {
                provider,
                status,
                message,
            } => ProviderError::Fatal {
                provider,
                status,
                message: scrub(&message),
            },
            ProviderError::Auth {
                provider,
                status,
                message,
                env_var,
            } => ProviderError::Auth {
                provider,
                status,
                message: scrub(&message),
                env_var,
            },
        }
    }
}

/// Both Anthropic (`{"type":"error","error":{...}}`) and OpenAI (`{"error":{...}}`) put the
/// error's type and message under `error`.
#[derive(Debug, Deserialize)]
struct ErrorEnvelope {
    error: ErrorDetail,
}

#[derive(Debug, Deserialize)]
struct ErrorDetail {
    #[serde(rename = "type")]
    kind: Option<String>,
    message: Option<String>,
}

fn error_message(body: &str) -> String {
    let detail = serde_json::from_str::<ErrorEnvelope>(body)
        .ok()
        .and_then(
            |envelope| match (envelope.error.kind, envelope.error.message) {
                (Some(kind), Some(message)) => Some(format!("{kind}: {message}")),
                (None, Some(message)) => Some(message),
                (Some(kind), None) => Some(kind),
                (None, None) => None,
            },
        );
    detail.unwrap_or_else(|| body_excerpt(body))
}

fn body_excerpt(body: &str) -> String {
    let trimmed = body.trim();
    if trimmed.is_empty() {
        return "empty body".to_string();
    }
    let mut excerpt: String = trimmed.chars().take(MAX_ERROR_BODY_CHARS).collect();
    if trimmed.chars().count() > MAX_ERROR_BODY_CHARS {
        excerpt.push('…');
    }
    excerpt
}

/// `retry-after-ms` (sent by OpenAI) wins over `retry-after` (seconds or an HTTP date).
fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let header = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    if let Some(delay) = header("retry-after-ms")
        .and_then(|value| value.trim().parse::<f64>().ok())
        .and_then(|milliseconds| delay_from_seconds(milliseconds / 1000.0))
    {
        return Some(delay);
    }
    parse_retry_after(header("retry-after")?, now)
}

/// Classifies a non-success answer.
fn error_from_status(
    provider: Provider,
    status: StatusCode,
    headers: &HeaderMap,
    body: &str,
) -> ProviderError {
    let code = status.as_u16();
    let message = error_message(body);
    match code {
        429 | 500 | 502 | 503 | 504 | 529 => ProviderError::Retryable {
            provider,
            cause: RetryCause::Status(code),
            retry_after: retry_after(headers, SystemTime::now()),
            message,
        },
        401 | 403 => ProviderError::Auth {
            provider,
            status: code,
            message,
            env_var: provider.key_env_var().unwrap_or("the provider's API key"),
        },
        _ => ProviderError::Fatal {
            provider,
            status: Some(code),
            message,
        },
    }
}

/// A success answer's body read as `T`; any other status classified by [`error_from_status`].
/// A success whose body does not read is fatal: asking again would bring the same body.
pub(super) fn read_success<T: DeserializeOwned>(
    provider: Provider,
    status: StatusCode,
    headers: &HeaderMap,
    body: &str,
) -> Result<T, ProviderError> {
    if !status.is_success() {
        return Err(error_from_status(provider, status, headers, body));
    }
    serde_json::from_str(body).map_err(|error| unreadable_reply(provider, status, &error, body))
}

fn unreadable_reply(
    provider: Provider,
    status: StatusCode,
    error: &serde_json::Error,
    body: &str,
) -> ProviderError {
    ProviderError::Fatal {
        provider,
        status: Some(status.as_u16()),
        message: format!("unreadable reply ({error}): {}", body_excerpt(body)),
    }
}

/// One attempt at answering a request; the retry loop and the broker work against this.
pub trait ChatProvider {
    fn send_once(
        &self,
        request: &ChatRequest,
    ) -> impl Future<Output = Result<ChatReply, ProviderError>> + Send;
}

/// A provider's wire format: where a request goes, how its key travels, how its body is
/// written and how its answer is read. The HTTP provider picks one by the configured provider
/// and never looks inside; the formats import nothing of it.
pub trait WireFormat: fmt::Debug + Send + Sync {
    /// The path after the base URL.
    fn path(&self) -> &'static str;
    /// The header that carries the API key, and its value for `key`.
    fn auth_header(&self, key: &str) -> (&'static str, String);
    /// Headers every request carries besides the key's.
    fn fixed_headers(&self) -> &'static [(&'static str, &'static str)];
    /// The request body as it will be sent (and journaled).
    fn build_body(&self, settings: &LlmSettings, request: &ChatRequest) -> Value;
    /// Reads an answer, or classifies why there is none.
    fn parse_reply(
        &self,
        status: StatusCode,
        headers: &HeaderMap,
        body: &str,
    ) -> Result<ChatReply, ProviderError>;
}

/// `format`'s reading of an answer with `status`, no headers and `body`.
#[cfg(test)]
pub(super) fn parse_answer(
    format: &dyn WireFormat,
    status: u16,
    body: &str,
) -> Result<ChatReply, ProviderError> {
    let status = StatusCode::from_u16(status).expect("a test status is a valid HTTP status");
    format.parse_reply(status, &HeaderMap::new(), body)
}

/// Checks that `format` reads the success answer `body` as the reply `text`, cut at the token
/// limit when `truncated`, reporting `usage` as (input, output) tokens.
#[cfg(test)]
pub(super) fn check_answer(
    format: &dyn WireFormat,
    body: &str,
    text: &str,
    truncated: bool,
    usage: Option<(u64, u64)>,
) {
    let expected = ChatReply {
        text: text.to_string(),
        truncated,
        usage: usage.map(|(input_tokens, output_tokens)| super::request::Usage {
            input_tokens,
            output_tokens,
        }),
    };
    assert_eq!(parse_answer(format, 200, body), Ok(expected), "{body}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_headers() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480);
        let mut headers = HeaderMap::new();
        assert_eq!(retry_after(&headers, now), None);
        headers.insert(
            "retry-after",
            "Wed, 21 Oct 2015 07:28:30 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&headers, now), Some(Duration::from_secs(30)));
        headers.insert("retry-after-ms", "1500".parse().unwrap());
        assert_eq!(
            retry_after(&headers, now),
            Some(Duration::from_millis(1500))
        );
        headers.insert("retry-after-ms", "1e300".parse().unwrap());
        assert_eq!(retry_after(&headers, now), Some(Duration::MAX));
        headers.insert("retry-after-ms", "NaN".parse().unwrap());
        assert_eq!(retry_after(&headers, now), Some(Duration::from_secs(30)));
    }

    #[test]
    fn error_messages_fall_back_to_the_body() {
        assert_eq!(error_message(""), "empty body");
        assert_eq!(error_message("bad gateway"), "bad gateway");
        assert_eq!(error_message(r#"{"error":{"message":"m"}}"#), "m");
        let long = "x".repeat(2 * MAX_ERROR_BODY_CHARS);
        assert_eq!(
            error_message(&long).chars().count(),
            MAX_ERROR_BODY_CHARS + 1
        );
    }
}
