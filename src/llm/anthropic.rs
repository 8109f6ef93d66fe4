//! The Anthropic Messages API (POST {base_url}/v1/messages, anthropic-version 2023-06-01).

use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde::Deserialize;
use serde_json::{Value, json};

use super::attempt::{ProviderError, WireFormat, error_from_status, unreadable_reply};
use super::request::{ChatReply, ChatRequest, reported_usage};
use super::settings::{LlmSettings, Provider, ReasoningRequest};

pub const API_VERSION: &str = "2023-06-01";
pub const MESSAGES_PATH: &str = "/v1/messages";

/// The Messages API's wire format.
#[derive(Debug)]
pub struct Anthropic;

impl WireFormat for Anthropic {
    fn path(&self) -> &'static str {
        MESSAGES_PATH
    }

    fn auth_header(&self, key: &str) -> (&'static str, String) {
        ("x-api-key", key.to_string())
    }

    fn fixed_headers(&self) -> &'static [(&'static str, &'static str)] {
        &[("anthropic-version", API_VERSION)]
    }

    /// The request body: max_tokens exactly as configured, temperature only when the settings
    /// send it, thinking or effort only when asked for and supported.
    fn build_body(&self, settings: &LlmSettings, request: &ChatRequest) -> Value {
        let messages: Vec<Value> = request
            .messages
            .iter()
            .map(|message| json!({"role": message.role.wire_name(), "content": message.content}))
            .collect();
        let mut body = json!({
            "model": settings.model,
            "max_tokens": settings.max_tokens,
            "messages": messages,
        });
        if !request.system.is_empty() {
            body["system"] = json!(request.system);
        }
        if let Some(temperature) = settings.temperature_to_send() {
            body["temperature"] = json!(temperature);
        }
        match settings.reasoning_to_send() {
            Some(ReasoningRequest::AnthropicThinking { budget_tokens }) => {
                body["thinking"] = json!({"type": "enabled", "budget_tokens": budget_tokens});
            }
            Some(ReasoningRequest::AnthropicEffort { effort }) => {
                body["thinking"] = json!({"type": "adaptive"});
                body["output_config"] = json!({"effort": effort});
            }
            Some(ReasoningRequest::OpenAiEffort { .. }) | None => {}
        }
        body
    }

    /// Reads an answer: the text blocks in order (thinking blocks, which may come first, are
    /// skipped by type), truncated when the model stopped at max_tokens.
    fn parse_reply(
        &self,
        status: StatusCode,
        headers: &HeaderMap,
        body: &str,
    ) -> Result<ChatReply, ProviderError> {
        if !status.is_success() {
            return Err(error_from_status(
                Provider::Anthropic,
                status,
                headers,
                body,
            ));
        }
        let response: MessageResponse = serde_json::from_str(body)
            .map_err(|error| unreadable_reply(Provider::Anthropic, status, &error, body))?;
        let text = response
            .content
            .iter()
            .filter(|block| block.kind == "text")
            .filter_map(|block| block.text.as_deref())
            .collect::<Vec<_>>()
            .concat();
        let truncated = matches!(
            response.stop_reason.as_deref(),
            Some("max_tokens" | "model_context_window_exceeded")
        );
        Ok(ChatReply {
            text,
            truncated,
            usage: reported_usage(response.usage.as_ref(), "input_tokens", "output_tokens"),
        })
    }
}

#[derive(Debug, Deserialize)]
struct MessageResponse {
    content: Vec<ContentBlock>,
    stop_reason: Option<String>,
    /// Read by [`reported_usage`], which range-checks the counts.
    usage: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct ContentBlock {
    #[serde(rename = "type")]
    kind: String,
    text: Option<String>,
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::llm::attempt::RetryCause;
    use crate::llm::request::{ChatMessage, RequestKind, Usage};
    use crate::llm::settings::{LlmKeys, RawLlmConfig};

    fn settings(raw: RawLlmConfig) -> LlmSettings {
        raw.resolve_with("ANTHROPIC_API_KEY", "sk-ant-test")
    }

    fn model(model: &str) -> RawLlmConfig {
        RawLlmConfig::for_model(model)
    }

    fn request() -> ChatRequest {
        ChatRequest {
            kind: RequestKind::Optimize,
            system: "You write Triton kernels.".to_string(),
            messages: vec![
                ChatMessage::user("make it faster"),
                ChatMessage::assistant("```python\ndef kernel_function(): pass\n```"),
                ChatMessage::user("it failed: wrong result"),
            ],
            request_id: "r1".to_string(),
        }
    }

    #[test]
    fn body_carries_model_system_messages_and_max_tokens() {
        let body = Anthropic.build_body(
            &settings(RawLlmConfig {
                keys: LlmKeys {
                    max_tokens: Some(50_000),
                    ..LlmKeys::default()
                },
                ..model("claude-sonnet-4-6")
            }),
            &request(),
        );
        assert_eq!(
            body,
            json!({
                "model": "claude-sonnet-4-6",
                "max_tokens": 50_000,
                "system": "You write Triton kernels.",
                "messages": [
                    {"role": "user", "content": "make it faster"},
                    {"role": "assistant", "content": "```python\ndef kernel_function(): pass\n```"},
                    {"role": "user", "content": "it failed: wrong result"},
                ],
            })
        );
    }

    /// (model, temperature, high effort) -> the optional fields of the body.
    fn check_controls(
        model_name: &str,
        temperature: Option<f64>,
        high_reasoning_effort: bool,
        expected: Value,
    ) {
        let body = Anthropic.build_body(
            &settings(RawLlmConfig {
                high_reasoning_effort,
                keys: LlmKeys {
                    temperature,
                    max_tokens: Some(16_000),
                    ..LlmKeys::default()
                },
                ..model(model_name)
            }),
            &request(),
        );
        let optional: serde_json::Map<String, Value> = ["temperature", "thinking", "output_config"]
            .iter()
            .filter_map(|key| Some((key.to_string(), body.get(*key)?.clone())))
            .collect();
        assert_eq!(
            Value::Object(optional),
            expected,
            "{model_name} {temperature:?} {high_reasoning_effort}"
        );
        let text = body.to_string();
        assert!(text.matches("\"temperature\"").count() <= 1);
    }

    #[test]
    fn temperature_and_reasoning_controls() {
        check_controls("claude-sonnet-4-6", None, false, json!({}));
        check_controls(
            "claude-sonnet-4-6",
            Some(0.4),
            false,
            json!({"temperature": 0.4}),
        );
        check_controls(
            "claude-sonnet-4-6",
            Some(0.4),
            true,
            json!({"thinking": {"type": "adaptive"}, "output_config": {"effort": "high"}}),
        );
        check_controls("claude-opus-4-7", Some(0.4), false, json!({}));
        check_controls(
            "claude-opus-4-7",
            None,
            true,
            json!({"thinking": {"type": "adaptive"}, "output_config": {"effort": "high"}}),
        );
        check_controls(
            "claude-sonnet-4-5",
            Some(0.4),
            true,
            json!({"thinking": {"type": "enabled", "budget_tokens": 8_000}}),
        );
        check_controls("claude-future-9", Some(0.4), true, json!({}));
    }

    #[test]
    fn empty_system_prompt_is_left_out() {
        let body = Anthropic.build_body(
            &settings(model("claude-haiku-4-5")),
            &ChatRequest {
                system: String::new(),
                ..request()
            },
        );
        assert!(body.get("system").is_none());
    }

    fn parse(status: u16, body: &str) -> Result<ChatReply, ProviderError> {
        Anthropic.parse_reply(
            StatusCode::from_u16(status).unwrap(),
            &HeaderMap::new(),
            body,
        )
    }

    #[test]
    fn reply_text_skips_thinking_blocks_and_reports_usage() {
        let reply = parse(
            200,
            r#"{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-6",
                "content":[{"type":"thinking","thinking":"","signature":"abc"},
                           {"type":"text","text":"Here:\n"},
                           {"type":"text","text":"```python\nx = 1\n```"}],
                "stop_reason":"end_turn","stop_sequence":null,
                "usage":{"input_tokens":1200,"output_tokens":340,"cache_read_input_tokens":0}}"#,
        )
        .unwrap();
        assert_eq!(
            reply,
            ChatReply {
                text: "Here:\n```python\nx = 1\n```".to_string(),
                truncated: false,
                usage: Some(Usage {
                    input_tokens: 1200,
                    output_tokens: 340
                }),
            }
        );
    }

    #[test]
    fn an_absurd_usage_is_dropped_and_the_reply_kept() {
        let reply = parse(
            200,
            r#"{"content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn",
                "usage":{"input_tokens":18446744073709551615,"output_tokens":-1}}"#,
        )
        .unwrap();
        assert_eq!((reply.text.as_str(), reply.usage), ("ok", None));
    }

    #[test]
    fn reply_cut_at_max_tokens_is_truncated() {
        let reply = parse(
            200,
            r#"{"content":[{"type":"text","text":"```python\ndef kernel_"}],
                "stop_reason":"max_tokens","usage":{"input_tokens":5,"output_tokens":16000}}"#,
        )
        .unwrap();
        assert!(reply.truncated);
    }

    #[test]
    fn error_replies_are_classified() {
        let overloaded = parse(
            529,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        )
        .unwrap_err();
        assert_eq!(
            overloaded,
            ProviderError::Retryable {
                provider: Provider::Anthropic,
                cause: RetryCause::Status(529),
                retry_after: None,
                message: "overloaded_error: Overloaded".to_string(),
            }
        );
        let bad_request = parse(
            400,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: too large"}}"#,
        )
        .unwrap_err();
        assert!(matches!(
            bad_request,
            ProviderError::Fatal {
                status: Some(400),
                ..
            }
        ));
        let auth = parse(
            401,
            r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
        )
        .unwrap_err();
        assert_eq!(
            auth.to_string(),
            "anthropic rejected the API key (status 401): authentication_error: invalid x-api-key; \
             check ANTHROPIC_API_KEY"
        );
    }

    #[test]
    fn rate_limit_reply_carries_retry_after() {
        let mut headers = HeaderMap::new();
        headers.insert("retry-after", "17".parse().unwrap());
        let error = Anthropic
            .parse_reply(
                StatusCode::TOO_MANY_REQUESTS,
                &headers,
                r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#,
            )
            .unwrap_err();
        assert!(matches!(
            error,
            ProviderError::Retryable {
                retry_after: Some(delay),
                ..
            } if delay == Duration::from_secs(17)
        ));
    }

    #[test]
    fn unreadable_success_body_is_fatal() {
        let error = parse(200, "<html>gateway</html>").unwrap_err();
        assert!(matches!(
            error,
            ProviderError::Fatal {
                status: Some(200),
                ..
            }
        ));
        assert!(error.to_string().contains("<html>gateway</html>"));
    }
}
