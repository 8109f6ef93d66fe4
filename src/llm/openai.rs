//! OpenAI Chat Completions (POST {base_url}/chat/completions), also spoken by vLLM, SGLang,
//! Ollama, llama.cpp's server and relays.

use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde::Deserialize;
use serde_json::{Value, json};

use super::attempt::{ProviderError, WireFormat, error_from_status, unreadable_reply};
use super::request::{ChatReply, ChatRequest, reported_usage};
use super::settings::{LlmSettings, Provider, ReasoningKind, ReasoningRequest};

pub const CHAT_COMPLETIONS_PATH: &str = "/chat/completions";

/// Chat Completions' wire format, OpenAI's and every compatible server's.
#[derive(Debug)]
pub struct OpenAi;

impl WireFormat for OpenAi {
    fn path(&self) -> &'static str {
        CHAT_COMPLETIONS_PATH
    }

    fn auth_header(&self, key: &str) -> (&'static str, String) {
        ("authorization", format!("Bearer {key}"))
    }

    fn fixed_headers(&self) -> &'static [(&'static str, &'static str)] {
        &[]
    }

    fn build_body(&self, settings: &LlmSettings, request: &ChatRequest) -> Value {
        let system = (!request.system.is_empty())
            .then(|| json!({"role": "system", "content": request.system}));
        let messages: Vec<Value> = system
            .into_iter()
            .chain(request.messages.iter().map(
                |message| json!({"role": message.role.wire_name(), "content": message.content}),
            ))
            .collect();
        let mut body = json!({
            "model": settings.model,
            "messages": messages,
        });
        body[max_tokens_field(settings)] = json!(settings.max_tokens);
        if let Some(temperature) = settings.temperature_to_send() {
            body["temperature"] = json!(temperature);
        }
        if let Some(ReasoningRequest::OpenAiEffort { effort }) = settings.reasoning_to_send() {
            body["reasoning_effort"] = json!(effort);
        }
        body
    }

    /// Reads the first choice; `finish_reason: "length"` means the answer hit the token limit.
    fn parse_reply(
        &self,
        status: StatusCode,
        headers: &HeaderMap,
        body: &str,
    ) -> Result<ChatReply, ProviderError> {
        if !status.is_success() {
            return Err(error_from_status(Provider::OpenAi, status, headers, body));
        }
        let response: CompletionResponse = serde_json::from_str(body)
            .map_err(|error| unreadable_reply(Provider::OpenAi, status, &error, body))?;
        let Some(choice) = response.choices.into_iter().next() else {
            return Err(ProviderError::Fatal {
                provider: Provider::OpenAi,
                status: Some(status.as_u16()),
                message: "reply has no choices".to_string(),
            });
        };
        Ok(ChatReply {
            text: choice.message.content.unwrap_or_default(),
            truncated: choice.finish_reason.as_deref() == Some("length"),
            usage: reported_usage(
                response.usage.as_ref(),
                "prompt_tokens",
                "completion_tokens",
            ),
        })
    }
}

/// OpenAI's reasoning models reject `max_tokens` and OpenAI deprecates it everywhere in
/// favour of `max_completion_tokens`; OpenAI-compatible servers all know `max_tokens`.
fn max_tokens_field(settings: &LlmSettings) -> &'static str {
    if settings.provider == Provider::OpenAi
        || settings.capability.reasoning == ReasoningKind::OpenaiReasoningEffort
    {
        "max_completion_tokens"
    } else {
        "max_tokens"
    }
}

#[derive(Debug, Deserialize)]
struct CompletionResponse {
    choices: Vec<Choice>,
    /// Read by [`reported_usage`], which range-checks the counts.
    usage: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct Choice {
    message: ChoiceMessage,
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ChoiceMessage {
    content: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::attempt::RetryCause;
    use crate::llm::request::{ChatMessage, RequestKind, Usage};
    use crate::llm::settings::{LlmKeys, RawLlmConfig};

    fn settings(raw: RawLlmConfig) -> LlmSettings {
        raw.resolve_with("OPENAI_API_KEY", "sk-openai-test")
    }

    fn model(model: &str) -> RawLlmConfig {
        RawLlmConfig::for_model(model)
    }

    fn request() -> ChatRequest {
        ChatRequest {
            kind: RequestKind::Analysis,
            system: "You analyse profiles.".to_string(),
            messages: vec![ChatMessage::user("what limits this kernel?")],
            request_id: "r7".to_string(),
        }
    }

    #[test]
    fn reasoning_model_body() {
        let body = OpenAi.build_body(
            &settings(RawLlmConfig {
                high_reasoning_effort: true,
                keys: LlmKeys {
                    max_tokens: Some(40_000),
                    temperature: Some(0.7),
                    ..LlmKeys::default()
                },
                ..model("gpt-5")
            }),
            &request(),
        );
        assert_eq!(
            body,
            json!({
                "model": "gpt-5",
                "messages": [
                    {"role": "system", "content": "You analyse profiles."},
                    {"role": "user", "content": "what limits this kernel?"},
                ],
                "max_completion_tokens": 40_000,
                "reasoning_effort": "high",
            })
        );
    }

    #[test]
    fn reasoning_effort_only_when_asked() {
        let body = OpenAi.build_body(&settings(model("o4-mini")), &request());
        assert!(body.get("reasoning_effort").is_none());
        assert!(body.get("temperature").is_none());
    }

    #[test]
    fn classic_model_body_sends_temperature_once() {
        let body = OpenAi.build_body(
            &settings(RawLlmConfig {
                high_reasoning_effort: true,
                keys: LlmKeys {
                    temperature: Some(0.2),
                    ..LlmKeys::default()
                },
                ..model("gpt-4.1")
            }),
            &request(),
        );
        assert_eq!(body["temperature"], json!(0.2));
        assert_eq!(body["max_completion_tokens"], json!(32_000));
        assert!(body.get("max_tokens").is_none());
        assert!(body.get("reasoning_effort").is_none());
        assert_eq!(body.to_string().matches("\"temperature\"").count(), 1);
    }

    #[test]
    fn compatible_server_body_uses_max_tokens() {
        let body = OpenAi.build_body(
            &settings(RawLlmConfig {
                keys: LlmKeys {
                    base_url: Some("http://127.0.0.1:8000/v1".to_string()),
                    temperature: Some(0.9),
                    max_tokens: Some(8_192),
                    ..LlmKeys::default()
                },
                ..model("Qwen/Qwen3-Coder-30B")
            }),
            &request(),
        );
        assert_eq!(body["max_tokens"], json!(8_192));
        assert_eq!(body["temperature"], json!(0.9));
        assert!(body.get("max_completion_tokens").is_none());
    }

    fn parse(status: u16, body: &str) -> Result<ChatReply, ProviderError> {
        OpenAi.parse_reply(
            StatusCode::from_u16(status).unwrap(),
            &HeaderMap::new(),
            body,
        )
    }

    #[test]
    fn reply_and_usage() {
        let reply = parse(
            200,
            r#"{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-5",
                "choices":[{"index":0,"message":{"role":"assistant","content":"done","refusal":null},
                            "finish_reason":"stop"}],
                "usage":{"prompt_tokens":900,"completion_tokens":4000,"total_tokens":4900,
                         "completion_tokens_details":{"reasoning_tokens":3500}}}"#,
        )
        .unwrap();
        assert_eq!(
            reply,
            ChatReply {
                text: "done".to_string(),
                truncated: false,
                usage: Some(Usage {
                    input_tokens: 900,
                    output_tokens: 4000
                })
            }
        );
    }

    #[test]
    fn length_finish_is_truncated_and_missing_usage_is_none() {
        let reply = parse(
            200,
            r#"{"choices":[{"message":{"content":"```python\ndef"},"finish_reason":"length"}]}"#,
        )
        .unwrap();
        assert!(reply.truncated);
        assert_eq!(reply.usage, None);
        let empty = parse(
            200,
            r#"{"choices":[{"message":{"content":null},"finish_reason":"length"}]}"#,
        )
        .unwrap();
        assert_eq!(empty.text, "");
    }

    #[test]
    fn a_fractional_usage_is_dropped_and_the_reply_kept() {
        let reply = parse(
            200,
            r#"{"choices":[{"message":{"content":"done"},"finish_reason":"stop"}],
                "usage":{"prompt_tokens":1e30,"completion_tokens":2.5}}"#,
        )
        .unwrap();
        assert_eq!((reply.text.as_str(), reply.usage), ("done", None));
    }

    #[test]
    fn no_choices_is_fatal() {
        assert!(matches!(
            parse(200, r#"{"choices":[]}"#),
            Err(ProviderError::Fatal { .. })
        ));
    }

    #[test]
    fn errors_are_classified() {
        let check = |status: u16, expected_kind: &str| {
            let error = parse(
                status,
                r#"{"error":{"message":"something","type":"server_error","code":null}}"#,
            )
            .unwrap_err();
            let kind = match error {
                ProviderError::Retryable {
                    cause: RetryCause::Status(code),
                    ..
                } => {
                    assert_eq!(code, status);
                    "retryable"
                }
                ProviderError::Retryable { .. } => "retryable without status",
                ProviderError::Fatal { .. } => "fatal",
                ProviderError::Auth { .. } => "auth",
            };
            assert_eq!(kind, expected_kind, "status {status}");
        };
        for status in [429, 500, 502, 503, 504, 529] {
            check(status, "retryable");
        }
        for status in [400, 404, 413, 422, 501] {
            check(status, "fatal");
        }
        for status in [401, 403] {
            check(status, "auth");
        }
    }

    #[test]
    fn error_message_prefers_the_api_message() {
        let error = parse(
            400,
            r#"{"error":{"message":"Unsupported parameter: 'max_tokens'","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}"#,
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "openai rejected the request (status 400): invalid_request_error: Unsupported parameter: 'max_tokens'"
        );
    }
}
