//! One HTTP attempt at a provider, in the provider's wire format.

use std::future::Future;
use std::time::Duration;

use reqwest::header::{HeaderName, HeaderValue};

use super::anthropic::Anthropic;
use super::attempt::{ChatProvider, ProviderError, RetryCause, WireFormat};
use super::openai::OpenAi;
use super::request::{ChatReply, ChatRequest};
use super::settings::{LlmSettings, Provider};

/// The most of a reply's body that is read. The largest answer a model can give (128k output
/// tokens, thinking included, at a few bytes a token, JSON-escaped) stays far below it; a server
/// that sends more is broken, and reading it whole could exhaust memory.
pub const MAX_REPLY_BYTES: usize = 32 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum HttpProviderError {
    #[error("the {0} provider does not speak HTTP")]
    NotHttp(Provider),
    #[error("{env_var} holds characters that cannot go into an HTTP header")]
    InvalidKey { env_var: &'static str },
    #[error("failed to build the HTTP client")]
    Client(#[source] reqwest::Error),
}

/// Anthropic, OpenAI or an OpenAI-compatible server over HTTPS (or HTTP for local servers).
#[derive(Debug, Clone)]
pub struct HttpProvider {
    client: reqwest::Client,
    settings: LlmSettings,
    wire: &'static dyn WireFormat,
    endpoint: String,
    /// Built once, marked sensitive so reqwest's Debug output never shows it.
    auth_header: Option<(HeaderName, HeaderValue)>,
}

impl HttpProvider {
    pub fn new(settings: LlmSettings) -> Result<HttpProvider, HttpProviderError> {
        let wire: &'static dyn WireFormat = match settings.provider {
            Provider::Anthropic => &Anthropic,
            Provider::OpenAi | Provider::OpenAiCompatible => &OpenAi,
            Provider::Replay => return Err(HttpProviderError::NotHttp(Provider::Replay)),
        };
        let base_url = settings
            .base_url
            .as_deref()
            .ok_or(HttpProviderError::NotHttp(settings.provider))?;
        let endpoint = format!("{base_url}{}", wire.path());
        let auth_header = match &settings.api_key {
            Some(key) => {
                let (auth_name, value) = wire.auth_header(key.expose());
                let mut value =
                    HeaderValue::from_str(&value).map_err(|_| HttpProviderError::InvalidKey {
                        env_var: settings.provider.key_env_var().unwrap_or("the API key"),
                    })?;
                value.set_sensitive(true);
                Some((HeaderName::from_static(auth_name), value))
            }
            None => None,
        };
        let client = reqwest::Client::builder()
            .timeout(settings.request_timeout)
            .connect_timeout(settings.request_timeout.min(Duration::from_secs(30)))
            .user_agent(concat!("kactors/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(HttpProviderError::Client)?;
        Ok(HttpProvider {
            client,
            settings,
            wire,
            endpoint,
            auth_header,
        })
    }

    pub fn settings(&self) -> &LlmSettings {
        &self.settings
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The request body as it will be sent, for the journal.
    pub fn body(&self, request: &ChatRequest) -> serde_json::Value {
        self.wire.build_body(&self.settings, request)
    }

    /// One attempt, bounded by request_timeout_s from connecting to the last byte.
    pub async fn send_once(&self, request: &ChatRequest) -> Result<ChatReply, ProviderError> {
        let provider = self.settings.provider;
        let mut builder = self.client.post(&self.endpoint).json(&self.body(request));
        for (name, value) in self.wire.fixed_headers() {
            builder = builder.header(*name, *value);
        }
        if let Some((name, value)) = &self.auth_header {
            builder = builder.header(name.clone(), value.clone());
        }
        let outcome = async {
            let response = builder
                .send()
                .await
                .map_err(|error| transport_error(provider, &error))?;
            let status = response.status();
            let headers = response.headers().clone();
            let body = read_body(provider, response, MAX_REPLY_BYTES).await?;
            self.wire.parse_reply(status, &headers, &body)
        }
        .await;
        outcome.map_err(|error| {
            let error = error.with_provider(provider);
            match &self.settings.api_key {
                Some(key) => error.map_message(|message| key.scrub(message)),
                None => error,
            }
        })
    }
}

impl ChatProvider for HttpProvider {
    fn send_once(
        &self,
        request: &ChatRequest,
    ) -> impl Future<Output = Result<ChatReply, ProviderError>> + Send {
        HttpProvider::send_once(self, request)
    }
}

/// The body as text, read chunk by chunk and refused once it passes `limit` bytes (at once when
/// its content-length says it will). Sending the request again would bring the same flood, so
/// the refusal is not retried.
async fn read_body(
    provider: Provider,
    mut response: reqwest::Response,
    limit: usize,
) -> Result<String, ProviderError> {
    let status = response.status().as_u16();
    let too_large = |detail: String| ProviderError::Fatal {
        provider,
        status: Some(status),
        message: format!("reply body larger than the {limit} bytes kactors reads{detail}"),
    };
    if let Some(length) = response.content_length()
        && length > limit as u64
    {
        return Err(too_large(format!(" (content-length {length})")));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|error| transport_error(provider, &error))?
    {
        if body.len() + chunk.len() > limit {
            return Err(too_large(String::new()));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(String::from_utf8_lossy(&body).into_owned())
}

fn transport_error(provider: Provider, error: &reqwest::Error) -> ProviderError {
    let mut message = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    if error.is_builder() {
        return ProviderError::Fatal {
            provider,
            status: None,
            message,
        };
    }
    let cause = if error.is_timeout() {
        RetryCause::Timeout
    } else {
        RetryCause::Connection
    };
    ProviderError::Retryable {
        provider,
        cause,
        retry_after: None,
        message,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::{Arc, Mutex};

    use serde_json::{Value, json};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::*;
    use crate::llm::request::{ChatMessage, RequestKind, Usage};
    use crate::llm::retry::{Answered, Exhausted, RetryPolicy, send_with_retries};
    use crate::llm::settings::{RawLlmConfig, resolve};

    const ANTHROPIC_KEY: &str = "sk-ant-api03-loopback-secret";
    const OPENAI_KEY: &str = "sk-proj-loopback-secret";

    #[derive(Debug, Clone)]
    enum Scripted {
        Answer {
            status: u16,
            headers: Vec<(&'static str, String)>,
            body: String,
        },
        /// Reads the request and never answers, as a stuck server does.
        Hang,
        /// Answers 200 with a body that never ends, announced with this content-length or
        /// with none, and writes until the client goes away.
        Flood { content_length: Option<u64> },
    }

    fn answer(status: u16, body: impl Into<String>) -> Scripted {
        Scripted::Answer {
            status,
            headers: Vec::new(),
            body: body.into(),
        }
    }

    #[derive(Debug, Clone)]
    struct Recorded {
        request_line: String,
        headers: Vec<(String, String)>,
        body: String,
    }

    impl Recorded {
        fn header(&self, name: &str) -> Option<&str> {
            self.headers
                .iter()
                .find(|(key, _)| key.eq_ignore_ascii_case(name))
                .map(|(_, value)| value.as_str())
        }

        fn json(&self) -> Value {
            serde_json::from_str(&self.body).unwrap()
        }
    }

    /// A minimal HTTP/1.1 server on 127.0.0.1: reads each request's head and its body by
    /// Content-Length, records it, and answers with the next scripted response.
    struct LoopbackServer {
        base_url: String,
        recorded: Arc<Mutex<Vec<Recorded>>>,
    }

    impl LoopbackServer {
        async fn start(script: Vec<Scripted>) -> LoopbackServer {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let address = listener.local_addr().unwrap();
            let recorded = Arc::new(Mutex::new(Vec::new()));
            let script = Arc::new(Mutex::new(VecDeque::from(script)));
            let server_recorded = Arc::clone(&recorded);
            tokio::spawn(async move {
                loop {
                    let Ok((stream, _)) = listener.accept().await else {
                        return;
                    };
                    let recorded = Arc::clone(&server_recorded);
                    let script = Arc::clone(&script);
                    tokio::spawn(serve_connection(stream, recorded, script));
                }
            });
            LoopbackServer {
                base_url: format!("http://{address}"),
                recorded,
            }
        }

        fn recorded(&self) -> Vec<Recorded> {
            self.recorded.lock().unwrap().clone()
        }
    }

    async fn serve_connection(
        mut stream: TcpStream,
        recorded: Arc<Mutex<Vec<Recorded>>>,
        script: Arc<Mutex<VecDeque<Scripted>>>,
    ) {
        let mut buffer = Vec::new();
        let mut chunk = [0u8; 4096];
        let head_end = loop {
            if let Some(position) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
                break position;
            }
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(read) => buffer.extend_from_slice(&chunk[..read]),
            }
        };
        let head = String::from_utf8_lossy(&buffer[..head_end]).to_string();
        let mut lines = head.split("\r\n");
        let request_line = lines.next().unwrap_or_default().to_string();
        let headers: Vec<(String, String)> = lines
            .filter_map(|line| line.split_once(':'))
            .map(|(name, value)| (name.trim().to_string(), value.trim().to_string()))
            .collect();
        let content_length: usize = headers
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
            .and_then(|(_, value)| value.parse().ok())
            .unwrap_or(0);
        let mut body = buffer[head_end + 4..].to_vec();
        while body.len() < content_length {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(read) => body.extend_from_slice(&chunk[..read]),
            }
        }
        recorded.lock().unwrap().push(Recorded {
            request_line,
            headers,
            body: String::from_utf8_lossy(&body).to_string(),
        });
        let next = script.lock().unwrap().pop_front();
        match next {
            Some(Scripted::Answer {
                status,
                headers,
                body,
            }) => {
                let mut response = format!(
                    "HTTP/1.1 {status} Scripted\r\ncontent-type: application/json\r\n\
                     content-length: {}\r\nconnection: close\r\n",
                    body.len()
                );
                for (name, value) in headers {
                    response.push_str(&format!("{name}: {value}\r\n"));
                }
                response.push_str("\r\n");
                response.push_str(&body);
                let _ = stream.write_all(response.as_bytes()).await;
                let _ = stream.shutdown().await;
            }
            Some(Scripted::Flood { content_length }) => {
                let mut head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n".to_string();
                if let Some(length) = content_length {
                    head.push_str(&format!("content-length: {length}\r\n"));
                }
                head.push_str("connection: close\r\n\r\n");
                if stream.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                let block = vec![b'x'; 64 * 1024];
                while stream.write_all(&block).await.is_ok() {}
            }
            Some(Scripted::Hang) => {
                // Keep the connection open until the client gives up and closes it.
                let _ = stream.read(&mut chunk).await;
            }
            None => {
                let _ = stream
                    .write_all(b"HTTP/1.1 500 Script Exhausted\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                    .await;
            }
        }
    }

    fn env(name: &str) -> Option<String> {
        match name {
            "ANTHROPIC_API_KEY" => Some(ANTHROPIC_KEY.to_string()),
            "OPENAI_API_KEY" => Some(OPENAI_KEY.to_string()),
            _ => None,
        }
    }

    /// Anthropic's base URL has no /v1 (the path adds it); OpenAI-style bases end in /v1.
    fn provider(server: &LoopbackServer, raw: RawLlmConfig) -> HttpProvider {
        let is_claude = raw
            .model
            .as_deref()
            .is_some_and(|m| m.starts_with("claude-"));
        let base_url = if is_claude {
            server.base_url.clone()
        } else {
            format!("{}/v1", server.base_url)
        };
        let settings = resolve(&raw.with_base_url(base_url), &env).unwrap();
        HttpProvider::new(settings).unwrap()
    }

    fn model(model: &str) -> RawLlmConfig {
        RawLlmConfig::for_model(model)
    }

    fn request(id: &str) -> ChatRequest {
        ChatRequest {
            kind: RequestKind::Optimize,
            system: "system rules".to_string(),
            messages: vec![ChatMessage::user("optimize this kernel")],
            request_id: id.to_string(),
        }
    }

    const ANTHROPIC_OK: &str = r#"{"id":"msg_1","type":"message","role":"assistant",
        "content":[{"type":"text","text":"```python\ndef kernel_function(x):\n    return x\n```"}],
        "stop_reason":"end_turn","usage":{"input_tokens":12,"output_tokens":30}}"#;
    const OPENAI_OK: &str = r#"{"choices":[{"index":0,"message":{"role":"assistant",
        "content":"no code here"},"finish_reason":"stop"}],
        "usage":{"prompt_tokens":11,"completion_tokens":3}}"#;

    /// The retry loop with recorded, not real, sleeps.
    async fn send_recording_sleeps(
        provider: &HttpProvider,
        request: &ChatRequest,
        policy: &RetryPolicy,
    ) -> (Result<Answered, Exhausted>, Vec<Duration>) {
        let sleeps = Arc::new(Mutex::new(Vec::new()));
        let recorder = Arc::clone(&sleeps);
        let mut jitter = || 0.5;
        let outcome = send_with_retries(provider, request, policy, &mut jitter, move |delay| {
            recorder.lock().unwrap().push(delay);
            std::future::ready(())
        })
        .await;
        let sleeps = sleeps.lock().unwrap().clone();
        (outcome, sleeps)
    }

    fn policy() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 4,
            base: Duration::from_secs(2),
            max_delay: Duration::from_secs(60),
        }
    }

    #[tokio::test]
    async fn anthropic_wire_format() {
        let server = LoopbackServer::start(vec![answer(200, ANTHROPIC_OK)]).await;
        let provider = provider(
            &server,
            model("claude-sonnet-4-6")
                .with_max_tokens(20_000)
                .with_temperature(0.25),
        );
        let reply = provider.send_once(&request("a1")).await.unwrap();
        assert_eq!(
            reply.usage,
            Some(Usage {
                input_tokens: 12,
                output_tokens: 30
            })
        );
        assert!(!reply.truncated);
        let recorded = server.recorded();
        assert_eq!(recorded.len(), 1);
        let sent = &recorded[0];
        assert_eq!(sent.request_line, "POST /v1/messages HTTP/1.1");
        assert_eq!(sent.header("x-api-key"), Some(ANTHROPIC_KEY));
        assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
        assert_eq!(sent.header("content-type"), Some("application/json"));
        assert_eq!(sent.header("authorization"), None);
        assert_eq!(
            sent.json(),
            json!({
                "model": "claude-sonnet-4-6",
                "max_tokens": 20_000,
                "system": "system rules",
                "messages": [{"role": "user", "content": "optimize this kernel"}],
                "temperature": 0.25,
            })
        );
        assert_eq!(sent.body.matches("\"temperature\"").count(), 1);
    }

    #[tokio::test]
    async fn anthropic_effort_only_when_asked_and_supported() {
        let server = LoopbackServer::start(vec![
            answer(200, ANTHROPIC_OK),
            answer(200, ANTHROPIC_OK),
            answer(200, ANTHROPIC_OK),
        ])
        .await;
        let effort = provider(
            &server,
            model("claude-opus-4-7")
                .with_high_reasoning_effort()
                .with_temperature(0.5),
        );
        let plain = provider(&server, model("claude-opus-4-7"));
        let thinking = provider(
            &server,
            model("claude-haiku-4-5")
                .with_high_reasoning_effort()
                .with_max_tokens(10_000),
        );
        effort.send_once(&request("e1")).await.unwrap();
        plain.send_once(&request("e2")).await.unwrap();
        thinking.send_once(&request("e3")).await.unwrap();
        let bodies: Vec<Value> = server.recorded().iter().map(Recorded::json).collect();
        assert_eq!(bodies[0]["thinking"], json!({"type": "adaptive"}));
        assert_eq!(bodies[0]["output_config"], json!({"effort": "high"}));
        assert!(bodies[0].get("temperature").is_none());
        assert!(bodies[1].get("thinking").is_none());
        assert!(bodies[1].get("output_config").is_none());
        assert_eq!(
            bodies[2]["thinking"],
            json!({"type": "enabled", "budget_tokens": 5_000})
        );
    }

    #[tokio::test]
    async fn openai_wire_format() {
        let server = LoopbackServer::start(vec![answer(200, OPENAI_OK)]).await;
        let provider = provider(
            &server,
            model("o3")
                .with_provider(Provider::OpenAi)
                .with_high_reasoning_effort()
                .with_temperature(1.0)
                .with_max_tokens(64_000),
        );
        let reply = provider.send_once(&request("o1")).await.unwrap();
        assert_eq!(reply.text, "no code here");
        let sent = &server.recorded()[0];
        assert_eq!(sent.request_line, "POST /v1/chat/completions HTTP/1.1");
        assert_eq!(
            sent.header("authorization"),
            Some(format!("Bearer {OPENAI_KEY}").as_str())
        );
        assert_eq!(sent.header("x-api-key"), None);
        // What reaches the server is the wire format's body, whose fields openai.rs tests.
        assert_eq!(sent.json(), provider.body(&request("o1")));
        assert_eq!(sent.json()["max_completion_tokens"], json!(64_000));
    }

    /// Issue 10: KernelAgent's `claude-opus-4.5` reaches Anthropic as `claude-opus-4-5`, and a
    /// relay behind openai_compatible gets the spelling it was configured with.
    #[tokio::test]
    async fn an_alias_is_sent_as_the_api_name_except_to_a_relay() {
        let server =
            LoopbackServer::start(vec![answer(200, ANTHROPIC_OK), answer(200, OPENAI_OK)]).await;
        let anthropic = provider(&server, model("claude-opus-4.5"));
        anthropic.send_once(&request("a1")).await.unwrap();
        let relay = provider(
            &server,
            model("claude-opus-4.5").with_provider(Provider::OpenAiCompatible),
        );
        relay.send_once(&request("a2")).await.unwrap();
        let sent: Vec<(String, Value)> = server
            .recorded()
            .iter()
            .map(|recorded| {
                (
                    recorded.request_line.clone(),
                    recorded.json()["model"].clone(),
                )
            })
            .collect();
        assert_eq!(
            sent,
            vec![
                (
                    "POST /v1/messages HTTP/1.1".to_string(),
                    json!("claude-opus-4-5")
                ),
                // The helper gives claude-* models a base URL without /v1.
                (
                    "POST /chat/completions HTTP/1.1".to_string(),
                    json!("claude-opus-4.5")
                ),
            ]
        );
    }

    #[tokio::test]
    async fn openai_compatible_server_without_key() {
        let server = LoopbackServer::start(vec![answer(200, OPENAI_OK)]).await;
        let settings = resolve(
            &model("qwen3-coder")
                .with_provider(Provider::OpenAiCompatible)
                .with_base_url(format!("{}/v1", server.base_url))
                .with_temperature(0.6),
            &|_| None,
        )
        .unwrap();
        let provider = HttpProvider::new(settings).unwrap();
        provider.send_once(&request("c1")).await.unwrap();
        let sent = &server.recorded()[0];
        assert_eq!(sent.header("authorization"), None);
        let body = sent.json();
        assert_eq!(body["max_tokens"], json!(32_000));
        assert_eq!(body["temperature"], json!(0.6));
    }

    #[tokio::test]
    async fn rate_limited_then_answered_after_the_requested_wait() {
        let server = LoopbackServer::start(vec![
            Scripted::Answer {
                status: 429,
                headers: vec![("retry-after", "7".to_string())],
                body:
                    r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#
                        .to_string(),
            },
            answer(200, ANTHROPIC_OK),
        ])
        .await;
        let provider = provider(&server, model("claude-sonnet-4-6"));
        let (outcome, sleeps) = send_recording_sleeps(&provider, &request("r1"), &policy()).await;
        let answered = outcome.unwrap();
        assert_eq!(answered.attempts, 2);
        assert_eq!(sleeps, vec![Duration::from_secs(7)]);
        assert_eq!(server.recorded().len(), 2);
    }

    /// Issue 10: `retry-after: 1e30` panicked the request task (Duration::from_secs_f64), which
    /// the run then journaled as "the llm broker is gone". It is a wait as long as the policy
    /// allows.
    #[tokio::test]
    async fn an_absurd_retry_after_waits_the_longest_the_policy_allows() {
        let rate_limited = |name: &'static str, value: &str| Scripted::Answer {
            status: 429,
            headers: vec![(name, value.to_string())],
            body: r#"{"error":{"type":"rate_limit_error","message":"slow down"}}"#.to_string(),
        };
        let server = LoopbackServer::start(vec![
            rate_limited("retry-after", "1e30"),
            rate_limited("retry-after-ms", "1e300"),
            rate_limited("retry-after", "inf"),
            answer(200, OPENAI_OK),
        ])
        .await;
        let provider = provider(&server, model("gpt-5"));
        let (outcome, sleeps) = send_recording_sleeps(&provider, &request("r9"), &policy()).await;
        assert_eq!(outcome.unwrap().attempts, 4);
        assert_eq!(sleeps, vec![policy().max_delay; 3]);
    }

    #[tokio::test]
    async fn overloaded_and_unavailable_are_retried() {
        let server = LoopbackServer::start(vec![
            answer(
                529,
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            ),
            answer(503, "upstream unavailable"),
            answer(200, ANTHROPIC_OK),
        ])
        .await;
        let provider = provider(&server, model("claude-sonnet-4-6"));
        let (outcome, sleeps) = send_recording_sleeps(&provider, &request("r2"), &policy()).await;
        assert_eq!(outcome.unwrap().attempts, 3);
        // Full jitter at 0.5: half of 2 s, then half of 4 s.
        assert_eq!(sleeps, vec![Duration::from_secs(1), Duration::from_secs(2)]);
    }

    #[tokio::test]
    async fn retries_stop_at_the_attempt_limit_with_the_last_error() {
        let server = LoopbackServer::start(vec![
            answer(500, "boom 1"),
            answer(502, "boom 2"),
            answer(504, "boom 3"),
            answer(503, "boom 4"),
            answer(200, OPENAI_OK),
        ])
        .await;
        let provider = provider(&server, model("gpt-5"));
        let (outcome, sleeps) = send_recording_sleeps(&provider, &request("r3"), &policy()).await;
        let exhausted = outcome.unwrap_err();
        assert_eq!(exhausted.attempts, 4);
        assert_eq!(sleeps.len(), 3);
        assert!(matches!(
            exhausted.error,
            ProviderError::Retryable {
                cause: RetryCause::Status(503),
                ..
            }
        ));
        assert_eq!(
            exhausted.to_string(),
            "gave up after 4 attempts: openai request failed (status 503): boom 4"
        );
    }

    #[tokio::test]
    async fn bad_request_is_not_retried() {
        let server = LoopbackServer::start(vec![
            answer(
                400,
                r#"{"error":{"message":"bad","type":"invalid_request_error"}}"#,
            ),
            answer(200, OPENAI_OK),
        ])
        .await;
        let provider = provider(&server, model("gpt-4.1"));
        let (outcome, sleeps) = send_recording_sleeps(&provider, &request("r4"), &policy()).await;
        let exhausted = outcome.unwrap_err();
        assert_eq!(exhausted.attempts, 1);
        assert!(sleeps.is_empty());
        assert!(matches!(
            exhausted.error,
            ProviderError::Fatal {
                status: Some(400),
                ..
            }
        ));
        assert_eq!(server.recorded().len(), 1);
    }

    #[tokio::test]
    async fn unauthorized_is_an_auth_error_naming_the_variable_without_the_key() {
        let server = LoopbackServer::start(vec![answer(
            401,
            format!(
                r#"{{"error":{{"message":"Incorrect API key provided: {OPENAI_KEY}.","type":"invalid_request_error","code":"invalid_api_key"}}}}"#
            ),
        )])
        .await;
        let provider = provider(&server, model("gpt-5"));
        let (outcome, sleeps) = send_recording_sleeps(&provider, &request("r5"), &policy()).await;
        let exhausted = outcome.unwrap_err();
        assert!(sleeps.is_empty());
        assert!(matches!(
            exhausted.error,
            ProviderError::Auth {
                status: 401,
                env_var: "OPENAI_API_KEY",
                ..
            }
        ));
        let display = exhausted.to_string();
        assert_eq!(
            display,
            "gave up after 1 attempt: openai rejected the API key (status 401): \
             invalid_request_error: Incorrect API key provided: [redacted].; check OPENAI_API_KEY"
        );
        assert!(!format!("{exhausted:?}").contains(OPENAI_KEY));
    }

    #[tokio::test]
    async fn forbidden_is_an_auth_error_for_anthropic() {
        let server = LoopbackServer::start(vec![answer(
            403,
            r#"{"type":"error","error":{"type":"permission_error","message":"no access"}}"#,
        )])
        .await;
        let provider = provider(&server, model("claude-haiku-4-5"));
        let error = provider.send_once(&request("r6")).await.unwrap_err();
        assert_eq!(
            error.to_string(),
            "anthropic rejected the API key (status 403): permission_error: no access; \
             check ANTHROPIC_API_KEY"
        );
    }

    /// Issue 10: a body of gigabytes is not read into memory; the request fails at the cap
    /// (before reading, when the content-length announces it) and is not sent again.
    #[tokio::test]
    async fn an_endless_reply_is_cut_at_the_cap() {
        for content_length in [None, Some(1u64 << 40)] {
            let server = LoopbackServer::start(vec![
                Scripted::Flood { content_length },
                answer(200, OPENAI_OK),
            ])
            .await;
            let provider = provider(&server, model("gpt-5").with_request_timeout_s(60.0));
            let (outcome, sleeps) =
                send_recording_sleeps(&provider, &request("f1"), &policy()).await;
            let exhausted = outcome.unwrap_err();
            assert_eq!(
                (exhausted.attempts, sleeps.len()),
                (1, 0),
                "{content_length:?}"
            );
            let expected = match content_length {
                Some(length) => format!(
                    "reply body larger than the {MAX_REPLY_BYTES} bytes kactors reads \
                     (content-length {length})"
                ),
                None => format!("reply body larger than the {MAX_REPLY_BYTES} bytes kactors reads"),
            };
            assert_eq!(
                exhausted.error,
                ProviderError::Fatal {
                    provider: Provider::OpenAi,
                    status: Some(200),
                    message: expected
                }
            );
        }
    }

    fn port_request(id: &str, prompt: String) -> actors::ports::LlmRequest {
        actors::ports::LlmRequest {
            request_id: id.to_string(),
            kind: RequestKind::Optimize,
            candidate: actors::model::CandidateId(1),
            round: 1,
            system: "system rules".to_string(),
            prompt,
            model: None,
        }
    }

    /// Issue 10: a prompt that cannot fit in the model's window beside max_tokens is refused
    /// with an error naming the model, the window, the estimate and what to do, and the server
    /// never sees it; the next prompt that fits goes out as usual.
    #[tokio::test]
    async fn a_prompt_beyond_the_window_is_refused_before_it_is_sent() {
        use actors::ports::{LlmError, LlmProvider};
        let server = LoopbackServer::start(vec![answer(200, ANTHROPIC_OK)]).await;
        let llm = std::rc::Rc::new(crate::llm::HttpLlm::new(
            provider(&server, model("claude-opus-4-5")),
            policy(),
        ));
        // 1.2 MB is at least 200000 tokens; with max_tokens 32000 more than the 200k window.
        let huge = "x".repeat(1_200_000);
        let refused = llm
            .clone()
            .complete(port_request("w1", huge))
            .await
            .unwrap_err();
        let LlmError::Failed(message) = refused else {
            panic!("expected a failed request, got {refused:?}");
        };
        for part in [
            "prompt not sent",
            "its 1200012 bytes are at least 200002 tokens",
            "max_tokens 32000",
            "200000-token context window of model claude-opus-4-5",
            "https://platform.claude.com/docs/en/models/opus-4-5/overview",
            "lower max_tokens",
        ] {
            assert!(message.contains(part), "{part:?} in {message}");
        }
        assert!(server.recorded().is_empty(), "nothing reached the server");
        let reply = llm
            .complete(port_request("w2", "x".repeat(600_000)))
            .await
            .unwrap();
        assert!(reply.code.is_some());
        assert_eq!(server.recorded().len(), 1);
    }

    #[tokio::test]
    async fn a_stuck_server_times_out() {
        let server = LoopbackServer::start(vec![Scripted::Hang]).await;
        let provider = provider(
            &server,
            model("claude-sonnet-4-6").with_request_timeout_s(0.3),
        );
        let error = provider.send_once(&request("t1")).await.unwrap_err();
        assert!(matches!(
            error,
            ProviderError::Retryable {
                cause: RetryCause::Timeout,
                ..
            }
        ));
    }

    #[tokio::test]
    async fn a_timeout_is_retried() {
        let server = LoopbackServer::start(vec![Scripted::Hang, answer(200, ANTHROPIC_OK)]).await;
        let provider = provider(
            &server,
            model("claude-sonnet-4-6").with_request_timeout_s(0.3),
        );
        let (outcome, sleeps) = send_recording_sleeps(&provider, &request("t2"), &policy()).await;
        assert_eq!(outcome.unwrap().attempts, 2);
        assert_eq!(sleeps, vec![Duration::from_secs(1)]);
        assert_eq!(server.recorded().len(), 2);
    }

    #[tokio::test]
    async fn connection_refused_is_retryable() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        drop(listener);
        let settings = resolve(
            &model("claude-sonnet-4-6").with_base_url(format!("http://{address}")),
            &env,
        )
        .unwrap();
        let provider = HttpProvider::new(settings).unwrap();
        let error = provider.send_once(&request("c1")).await.unwrap_err();
        assert!(matches!(
            error,
            ProviderError::Retryable {
                cause: RetryCause::Connection,
                ..
            }
        ));
        assert!(!error.to_string().contains(ANTHROPIC_KEY));
    }

    #[test]
    fn provider_debug_output_hides_the_key() {
        let settings = resolve(&model("claude-sonnet-4-6"), &env).unwrap();
        let provider = HttpProvider::new(settings).unwrap();
        let printed = format!("{provider:?}");
        assert!(!printed.contains(ANTHROPIC_KEY), "{printed}");
        let settings = resolve(&model("gpt-5"), &env).unwrap();
        let printed = format!("{:?}", HttpProvider::new(settings).unwrap());
        assert!(!printed.contains(OPENAI_KEY), "{printed}");
    }

    #[test]
    fn replay_is_not_an_http_provider() {
        let settings = resolve(
            &RawLlmConfig::default().with_provider(Provider::Replay),
            &env,
        )
        .unwrap();
        assert!(matches!(
            HttpProvider::new(settings),
            Err(HttpProviderError::NotHttp(Provider::Replay))
        ));
    }
}
