//! Helpers the integration tests share: fixture paths, fake executables, process checks.
// Each test binary compiles this module on its own and uses some of it; an `expect` would be
// unfulfilled in the binaries that use all of it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The kactors binary, run in `dir` with no configuration folder or log filter from outside.
pub fn kactors(dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_kactors"));
    command
        .current_dir(dir)
        .env_remove("KACTORS_CONFIG_DIR")
        .env_remove("RUST_LOG");
    command
}

/// One of the kernel directories under examples/.
pub fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(name)
}

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Writes an executable script: a fake tool or a shim on a test's PATH.
pub fn write_executable(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
}

/// Whether a process is alive: gone, a zombie waiting for its reaper (often init, seconds
/// later) or dead all count as ended.
pub fn is_running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let after_name = &stat[stat.rfind(')')? + 1..];
            after_name.split_whitespace().next().map(str::to_string)
        })
        .is_some_and(|state| !matches!(state.as_str(), "Z" | "X" | "x"))
}

/// Answers every request with `status` and `body`; records each request body. Serves at most
/// `limit` connections, then stops.
pub fn serve_http(
    status: u16,
    body: String,
    limit: usize,
) -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = format!("http://{}/v1", listener.local_addr().unwrap());
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let recorded = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(limit) {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
            let mut request = vec![0; length];
            let _ = reader.read_exact(&mut request);
            recorded
                .lock()
                .unwrap()
                .push(String::from_utf8_lossy(&request).into_owned());
            let reason = if status == 200 { "OK" } else { "Unauthorized" };
            let _ = write!(
                stream,
                "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (address, seen)
}

/// Sends `signal` to a child, as a user or a scheduler would.
pub fn send_signal(child: &std::process::Child, signal: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal).unwrap();
}

/// An OpenAI chat completion proposing `code`, with 120 input and 80 output tokens of usage.
pub fn openai_completion(code: &str) -> String {
    let content = format!("Here is a faster kernel.\n\n```python\n{code}\n```\n");
    serde_json::json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 80, "total_tokens": 200}
    })
    .to_string()
}
