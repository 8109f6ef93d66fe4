//! Issue 6: the dry run with an OpenAI-compatible server on loopback in place of the replay
//! provider, and what the run does with the key and with a refusal.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::llm_server::{LlmServer, chat_completion};

const KEY: &str = "sk-kactors-test-secret-0123456789";

/// Answers every request with `status` and `body`. Serves at most `limit` connections.
fn serve(status: u16, body: String, limit: usize) -> LlmServer {
    LlmServer::start(limit, move |_| (status, body.clone()))
}

fn completion(code: &str) -> String {
    chat_completion(&format!(
        "Here is a faster kernel.\n\n```python\n{code}\n```\n"
    ))
}

fn run_against(dir: &Path, base_url: &str) -> std::process::Output {
    run_with(
        dir,
        base_url,
        "provider: openai_compatible\nmodel: local-kernel-model\n",
    )
}

/// A noop dry run against the loopback server, with `llm` naming the provider and the model.
fn run_with(dir: &Path, base_url: &str, llm: &str) -> std::process::Output {
    let mut command = command_with(dir, base_url, llm);
    command.env("OPENAI_API_KEY", KEY);
    support::runs::finish(command)
}

/// That dry run's command, with no provider's key in its environment.
fn command_with(dir: &Path, base_url: &str, llm: &str) -> Command {
    let config = format!(
        "platform: noop\n{llm}base_url: {base_url}\nnum_workers: 2\nmax_rounds: 1\nstrategy_config:\n  num_top_kernels: 1\n  num_bottlenecks: 2\n"
    );
    std::fs::write(dir.join("local.yaml"), config).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_kactors"));
    command
        .current_dir(dir)
        .args(["run", "--strategy", "local", "--config-dir", "."])
        .arg("--kernel-dir")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/optimize_01_matvec"))
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY");
    command
}

const OPENAI: &str = "provider: openai\nmodel: gpt-5-4\n";

/// Issue 22: a key in `.env` (with `export` and quotes) is used when the environment has none;
/// the environment's wins over it. The file is never written, and its key is in no file of
/// the run and on no output.
#[test]
fn an_api_key_in_dot_env_is_used_never_written_nor_logged_and_the_environment_wins() {
    const DOT_ENV_KEY: &str = "sk-dotenv-canary-5f3a0c";
    let dir = tempfile::tempdir().unwrap();
    let dot_env = dir.path().join(".env");
    let text = format!("# kactors\n\nexport OPENAI_API_KEY=\"{DOT_ENV_KEY}\"\n");
    std::fs::write(&dot_env, &text).unwrap();
    let modified = std::fs::metadata(&dot_env).unwrap().modified().unwrap();
    let server = serve(
        200,
        completion("def kernel_function(a, b):\n    return a"),
        64,
    );
    let output = support::runs::finish(command_with(dir.path(), &server.base_url, OPENAI));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let from_file = server.authorizations();
    assert_every_request_carried(&from_file, DOT_ENV_KEY);
    assert!(
        !stderr.contains(DOT_ENV_KEY)
            && !String::from_utf8_lossy(&output.stdout).contains(DOT_ENV_KEY)
    );
    for file in files_under(&dir.path().join("runs")) {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        assert!(
            !text.contains(DOT_ENV_KEY),
            "the key leaked into {}",
            file.display()
        );
    }
    assert_eq!(std::fs::read_to_string(&dot_env).unwrap(), text);
    assert_eq!(
        std::fs::metadata(&dot_env).unwrap().modified().unwrap(),
        modified
    );

    let output = run_with(dir.path(), &server.base_url, OPENAI);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_every_request_carried(&server.authorizations()[from_file.len()..], KEY);
}

/// Some requests came, and each carried `key` as its bearer token.
fn assert_every_request_carried(authorizations: &[String], key: &str) {
    assert!(!authorizations.is_empty());
    assert!(
        authorizations
            .iter()
            .all(|header| *header == format!("Bearer {key}")),
        "{authorizations:?}"
    );
}

#[test]
fn a_missing_key_names_the_variable_and_the_dot_env_looked_in() {
    let dir = tempfile::tempdir().unwrap();
    let output = support::runs::finish(command_with(dir.path(), "http://127.0.0.1:9/v1", OPENAI));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    let dot_env = dir.path().join(".env");
    assert!(
        stderr.contains(&format!(
            "OPENAI_API_KEY is not set: the openai provider takes its API key from the \
             environment or from {} (a line OPENAI_API_KEY=…), and neither has it",
            dot_env.display()
        )),
        "{stderr}"
    );
}

#[test]
fn a_dot_env_that_is_a_fifo_is_refused_without_a_hang() {
    let dir = tempfile::tempdir().unwrap();
    let dot_env = dir.path().join(".env");
    nix::unistd::mkfifo(&dot_env, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let output = support::runs::finish(command_with(dir.path(), "http://127.0.0.1:9/v1", OPENAI));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{} is a FIFO (named pipe), not a regular file",
            dot_env.display()
        )),
        "{stderr}"
    );
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(files_under(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[test]
fn a_noop_dry_run_completes_against_an_openai_compatible_server() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(
        200,
        completion("def kernel_function(a, b):\n    return a"),
        8,
    );
    let output = run_against(dir.path(), &server.base_url);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let bodies: Vec<serde_json::Value> = server
        .bodies()
        .iter()
        .map(|request| serde_json::from_str(request).unwrap())
        .collect();
    assert!(bodies.iter().all(|b| b["model"] == "local-kernel-model"));
    let asking = |heading: &str| -> Vec<&str> {
        bodies
            .iter()
            .map(|b| b["messages"][1]["content"].as_str().unwrap())
            .filter(|content| content.starts_with(heading))
            .collect()
    };
    let optimizations = asking("# Optimize this Triton kernel");
    assert_eq!(
        optimizations.len(),
        2,
        "one request for code per candidate of the round"
    );
    assert!(optimizations[0].contains("def kernel_function"));
    assert_eq!(
        asking("# Find the bottlenecks").len(),
        1,
        "one bottleneck analysis of the parent"
    );
    assert_eq!(
        bodies.len(),
        3 + asking("# What did candidate").len(),
        "besides those, only reflexions"
    );

    let runs = dir.path().join("runs");
    let journal: Vec<serde_json::Value> = files_under(&runs)
        .into_iter()
        .find(|p| p.ends_with("journal.jsonl"))
        .map(|p| {
            std::fs::read_to_string(p)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect()
        })
        .unwrap();
    let received: Vec<&serde_json::Value> = journal
        .iter()
        .filter(|r| r["type"] == "proposal_received")
        .collect();
    assert_eq!(received.len(), 2);
    assert!(
        received
            .iter()
            .all(|r| r["outcome"] == "code" && r["usage"]["input_tokens"] == 120)
    );
    assert!(
        journal
            .iter()
            .any(|r| r["type"] == "candidate_finished" && r["duplicate_of"] == 1),
        "the twin reply was not evaluated again"
    );
    for file in files_under(&runs) {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        assert!(
            !text.contains(KEY),
            "the API key leaked into {}",
            file.display()
        );
    }
}

#[test]
fn refused_credentials_end_the_run_with_exit_1_and_say_why() {
    let dir = tempfile::tempdir().unwrap();
    let refusal =
        r#"{"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}"#
            .to_string();
    let server = serve(401, refusal, 8);
    let output = run_against(dir.path(), &server.base_url);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("refused the credentials"), "{stderr}");
    assert!(stderr.contains("check OPENAI_API_KEY"), "{stderr}");
    assert!(!stderr.contains(KEY));
    assert!(server.bodies().len() <= 2, "no retries on 401");
}

/// Issue 10: KernelAgent's `gpt-5-4` reaches OpenAI as `gpt-5.4`, and the run says so once.
#[test]
fn a_kernelagent_model_spelling_is_sent_as_openai_names_it_with_one_warning() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(
        200,
        completion("def kernel_function(a, b):\n    return a"),
        8,
    );
    let output = run_with(
        dir.path(),
        &server.base_url,
        "provider: openai\nmodel: gpt-5-4\n",
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let requests = server.bodies();
    assert!(!requests.is_empty());
    for request in &requests {
        let body: serde_json::Value = serde_json::from_str(request).unwrap();
        assert_eq!(body["model"], "gpt-5.4");
    }
    assert_eq!(
        stderr
            .matches("model gpt-5-4 is sent to openai as gpt-5.4")
            .count(),
        1,
        "{stderr}"
    );
}

#[test]
fn a_server_that_never_answers_well_fails_the_run_after_its_first_round() {
    let dir = tempfile::tempdir().unwrap();
    let body = r#"{"error": {"message": "no such model", "type": "invalid_request_error"}}"#;
    let server = serve(400, body.to_string(), 64);
    let base_url = &server.base_url;
    let output = run_with(
        dir.path(),
        base_url,
        "provider: openai_compatible\nmodel: local-kernel-model\n",
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("kactors: run failed (no LLM request succeeded: "),
        "{stderr}"
    );
    assert!(
        last.contains(&format!("({base_url}/chat/completions)")),
        "the error names the server: {last}"
    );
    let run = std::fs::read_dir(dir.path().join("runs"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    assert!(
        run.join("best_kernel.py").is_file(),
        "the initial kernel is kept"
    );
    assert_eq!(
        server.bodies().len(),
        3,
        "the analysis and the round's two proposals, each refused once (400 is not retried)"
    );
}
