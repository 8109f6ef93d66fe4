//! An OpenAI-compatible chat completions server on loopback, one connection at a time, that
//! answers each request as the test says and keeps every request body it was sent.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

pub struct LlmServer {
    /// `http://127.0.0.1:PORT/v1`, for a strategy's base_url.
    pub base_url: String,
    bodies: Arc<Mutex<Vec<String>>>,
    /// Each request's `Authorization` header, or "" for one without.
    authorizations: Arc<Mutex<Vec<String>>>,
}

impl LlmServer {
    /// Serves at most `limit` connections, answering each request body with `answer`'s status
    /// and JSON body.
    pub fn start(
        limit: usize,
        answer: impl Fn(&str) -> (u16, String) + Send + 'static,
    ) -> LlmServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let recorded = bodies.clone();
        let authorizations = Arc::new(Mutex::new(Vec::new()));
        let recorded_authorizations = authorizations.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().take(limit) {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut length = 0;
                let mut authorization = String::new();
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = value.trim().parse().unwrap_or(0);
                    }
                    if line.to_ascii_lowercase().starts_with("authorization:") {
                        authorization = line["authorization:".len()..].trim().to_string();
                    }
                }
                let mut request = vec![0; length];
                let _ = reader.read_exact(&mut request);
                let request = String::from_utf8_lossy(&request).into_owned();
                let (status, body) = answer(&request);
                recorded.lock().unwrap().push(request);
                recorded_authorizations.lock().unwrap().push(authorization);
                let reason = if status == 200 { "OK" } else { "Unauthorized" };
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        LlmServer {
            base_url,
            bodies,
            authorizations,
        }
    }

    /// Every request's `Authorization` header so far ("" where there was none), in order.
    pub fn authorizations(&self) -> Vec<String> {
        self.authorizations.lock().unwrap().clone()
    }

    /// Every request body received so far, in the order they came.
    pub fn bodies(&self) -> Vec<String> {
        self.bodies.lock().unwrap().clone()
    }
}

/// A chat completion whose message is `content`, with a usage.
pub fn chat_completion(content: &str) -> String {
    serde_json::json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 80, "total_tokens": 200}
    })
    .to_string()
}

/// The last message of a chat request's body: the user prompt it sends.
pub fn last_prompt(body: &serde_json::Value) -> String {
    body["messages"]
        .as_array()
        .and_then(|messages| messages.last())
        .and_then(|message| message["content"].as_str())
        .unwrap_or_default()
        .to_string()
}
