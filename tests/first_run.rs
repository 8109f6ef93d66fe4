//! Issue 22, "A first real run": from the dry run to a real one without guesswork. The binary as
//! a new user meets it: `--model` on the command line, KernelAgent's relay, a misspelt
//! strategy, a host without a GPU, the strategies' table, the version and shell completions.

mod support;

use std::path::Path;
use std::process::Output;

use serde_json::Value;
use support::llm_server::{LlmServer, chat_completion};
use support::runs::stderr;
use support::{example, fixtures, kactors};

/// What `kactors ARGS` prints on stdout; it must exit 0.
fn printed(args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let output = kactors(dir.path()).args(args).output().unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{args:?}: {}",
        stderr(&output)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// `kactors ARGS` in `dir` with no API key, no GPU tool on PATH and no device masks.
fn kactors_without_keys(dir: &Path, args: &[&str]) -> Output {
    kactors(dir)
        .args(args)
        .env("PATH", dir.join("bin"))
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .env_remove("LLM_RELAY_URL")
        .env_remove("CUDA_VISIBLE_DEVICES")
        .output()
        .unwrap()
}

/// `kactors run ARGS --kernel-dir <the matvec example>` as [`kactors_without_keys`] runs it,
/// which must be refused (exit 2): what it said on stderr.
fn refused_run(args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let kernel = example("optimize_01_matvec");
    let mut full = vec!["run"];
    full.extend_from_slice(args);
    full.extend(["--kernel-dir", kernel.to_str().unwrap()]);
    let output = kactors_without_keys(dir.path(), &full);
    assert_eq!(
        output.status.code(),
        Some(2),
        "{args:?}: {}",
        stderr(&output)
    );
    stderr(&output)
}

#[test]
fn the_version_names_the_commit_it_was_built_from() {
    let line = printed(&["--version"]);
    let commit = line
        .trim()
        .strip_prefix(&format!("kactors {} (commit ", env!("CARGO_PKG_VERSION")))
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{line}"));
    assert!(
        commit == "unknown"
            || (commit.len() == 12 && commit.chars().all(|c| c.is_ascii_hexdigit())),
        "{line}"
    );
}

#[test]
fn completions_for_bash_zsh_and_fish_know_every_command() {
    for shell in ["bash", "zsh", "fish"] {
        let script = printed(&["completions", shell]);
        for command in ["run", "resume", "report", "strategies", "max-time", "model"] {
            assert!(script.contains(command), "{shell}: no {command}");
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let unknown = kactors(dir.path())
        .args(["completions", "tcsh"])
        .output()
        .unwrap();
    assert_eq!(unknown.status.code(), Some(2));
}

#[test]
fn the_strategies_table_has_a_header_row() {
    let listing = printed(&["strategies"]);
    let lines: Vec<&str> = listing.lines().collect();
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(header, ["STRATEGY", "PLATFORM", "SEARCH", "(N×M)", "FILE"]);
    assert!(lines[1].starts_with("amd "), "{listing}");
}

#[test]
fn a_misspelt_strategy_is_answered_with_the_one_meant() {
    let said = refused_run(&["--strategy", "nvdia"]);
    assert!(
        said.contains("unknown strategy `nvdia`: did you mean `nvidia`?"),
        "{said}"
    );
}

#[test]
fn a_host_without_a_gpu_is_pointed_at_the_dry_run() {
    for strategy in ["nvidia", "beam_search"] {
        let said = refused_run(&["--strategy", strategy]);
        assert!(
            said.contains("without a GPU, `--strategy noop` makes the dry run"),
            "{strategy}: {said}"
        );
    }
}

/// `--model` is looked up in data/models.yaml as the `model` key is: KernelAgent's spelling
/// `claude-opus-4.5` is Anthropic's, whose key the error names.
#[test]
fn the_model_on_the_command_line_picks_its_provider_from_the_model_table() {
    let said = refused_run(&["--strategy", "noop", "--model", "claude-opus-4.5"]);
    assert!(said.contains("ANTHROPIC_API_KEY is not set"), "{said}");
}

/// The model named on the command line is the one the server is asked for.
#[test]
fn the_model_on_the_command_line_is_the_one_asked() {
    let server = LlmServer::start(64, |_| (200, chat_completion("no code in this reply")));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("relay.yaml"),
        format!(
            "platform: noop\nprovider: openai_compatible\nbase_url: {}\nmodel: qwen3-coder\n\
             max_rounds: 1\nmax_refinements: 0\nnoop_eval_s: 0.01\n\
             strategy_config:\n  num_top_kernels: 1\n  num_bottlenecks: 1\n",
            server.base_url
        ),
    )
    .unwrap();
    let kernel = example("optimize_01_matvec");
    let output = kactors_without_keys(
        dir.path(),
        &[
            "run",
            "--strategy",
            "relay",
            "--config-dir",
            ".",
            "--model",
            "my-local-model",
            "--kernel-dir",
            kernel.to_str().unwrap(),
        ],
    );
    assert!(output.status.code().is_some(), "{}", stderr(&output));
    let models: Vec<String> = server
        .bodies()
        .iter()
        .map(|body| {
            let request: Value = serde_json::from_str(body).unwrap();
            request["model"].as_str().unwrap().to_string()
        })
        .collect();
    assert!(!models.is_empty(), "{}", stderr(&output));
    assert!(
        models.iter().all(|model| model == "my-local-model"),
        "{models:?}"
    );
}

/// KernelAgent's Gemini configuration names a model only its relay serves: the error names the
/// relay and exactly the keys that would reach it. (On the noop platform, so that no GPU is
/// needed to get that far.)
#[test]
fn kernelagents_gemini_configuration_says_which_keys_to_add_for_its_relay() {
    let dir = tempfile::tempdir().unwrap();
    let gemini = std::fs::read_to_string(
        fixtures().join("kernelagent-configs/beam_search_gemini25pro.yaml"),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("gemini.yaml"),
        format!("{gemini}platform: noop\n"),
    )
    .unwrap();
    let kernel = example("optimize_01_matvec");
    let output = kactors(dir.path())
        .args(["run", "--strategy", "gemini", "--config-dir", "."])
        .args(["--workers", "1", "--kernel-dir", kernel.to_str().unwrap()])
        .env("PATH", dir.path().join("bin"))
        .env("LLM_RELAY_URL", "http://127.0.0.1:11434")
        .env_remove("CUDA_VISIBLE_DEVICES")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let said = stderr(&output);
    assert!(
        said.contains("cannot tell which provider serves model gemini-2-5-pro")
            && said.contains("LLM_RELAY_URL is set (http://127.0.0.1:11434)")
            && said.contains(
                "add `provider: openai_compatible` and `base_url: http://127.0.0.1:11434`"
            ),
        "{said}"
    );
}

/// README's first real run, as written: `kactors run --strategy nvidia --kernel-dir … --model
/// gpt-5 --max-time 8h` with the key in the environment, on a node whose nvidia-smi lists two
/// GPUs and whose `python3` is the stand-in's, the provider a loopback server reached through
/// the SDKs' OPENAI_BASE_URL (`--max-rounds 1` keeps the test short). The results lie where the
/// recipe says.
#[test]
fn the_readmes_first_real_run_works_against_a_loopback_provider() {
    let asked = std::sync::atomic::AtomicU32::new(0);
    let server = LlmServer::start(64, move |_| {
        let n = asked.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let code = format!(
            "```python\n# standin: pass time_ms={}\ndef kernel_function(x):\n    return x * {}\n```",
            1.9 - f64::from(n % 16) * 0.1,
            n + 1
        );
        (200, chat_completion(&code))
    });
    let node = support::standin_node::Node::new(&[]);
    let bin = node.dir.path().join("bin");
    // The stand-ins are Python scripts that find `python3` on PATH: each is run by the
    // machine's own interpreter, named in full.
    let interpreter = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    let interpreter = String::from_utf8(interpreter.stdout).unwrap();
    for (name, script) in [
        ("python3", support::standin_python()),
        ("ncu", fixtures().join("nvidia/fake-ncu")),
    ] {
        support::write_executable(
            &bin.join(name),
            &format!(
                "#!/bin/sh
exec {} {} \"$@\"\n",
                interpreter.trim(),
                script.display()
            ),
        );
    }
    let output = node
        .kactors()
        .args(["run", "--strategy", "nvidia", "--kernel-dir", "kernel"])
        .args(["--model", "gpt-5", "--max-time", "8h", "--max-rounds", "1"])
        .env("OPENAI_API_KEY", "sk-openai-first-run")
        .env("OPENAI_BASE_URL", &server.base_url)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let run = node.run_dir();
    assert!(
        run.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("nvidia-"),
        "{}",
        run.display()
    );
    for result in ["best_kernel.py", "report.html", "report.md"] {
        assert!(
            run.join(result).is_file(),
            "no {result} in {}",
            run.display()
        );
    }
    let best = std::fs::read_to_string(run.join("best_kernel.py")).unwrap();
    assert!(best.contains("# standin: pass"), "{best}");
    assert!(!server.bodies().is_empty());
    assert!(
        server
            .authorizations()
            .iter()
            .all(|header| header == "Bearer sk-openai-first-run"),
        "{:?}",
        server.authorizations()
    );
    let models: Vec<Value> = server
        .bodies()
        .iter()
        .map(|body| serde_json::from_str::<Value>(body).unwrap()["model"].clone())
        .collect();
    assert!(models.iter().all(|model| model == "gpt-5"), "{models:?}");
}
