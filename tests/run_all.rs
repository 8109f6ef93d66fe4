//! Issue 13: `kactors run --strategy all` runs, one after another, each strategy whose platform
//! fits the host by the vendor `kactors devices` decides (noop only where no GPU platform
//! fits, a strategy that resolves to the same settings as one run before it only once), says
//! which it skipped and why, shares one budget and one max_time, names the strategy in every
//! JSON event, ends with a comparison on stderr and in `<run-dir>/all-<timestamp>.md`/`.json`,
//! and exits with the worst of its runs' codes.

mod support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;
use support::llm_server::{LlmServer, chat_completion};
use support::runs::{journal, stderr};
use support::{example, kactors, send_signal, write_nvidia_smi};

/// A host: a folder with `configs/` (strategy files), `bin/` (the only tools on PATH besides
/// the system's) and the runs under `runs/`.
struct Host {
    dir: tempfile::TempDir,
}

/// A small dry run: one simulated device, one round of two candidates, instant evaluations.
const DRY: &str = "platform: noop\nprovider: replay\nnum_workers: 1\nmax_rounds: 1\nnoop_eval_s: 0\n\
                   replay_latency_s: 0\nstrategy_config:\n  num_top_kernels: 1\n  num_bottlenecks: 2\n";

impl Host {
    fn new(strategies: &[(&str, &str)]) -> Host {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("configs")).unwrap();
        std::fs::create_dir_all(dir.path().join("bin")).unwrap();
        for (name, text) in strategies {
            std::fs::write(dir.path().join("configs").join(name), text).unwrap();
        }
        Host { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn command(&self, kernel_dir: &Path, extra: &[&str]) -> Command {
        let mut command = kactors(self.path());
        command
            .args(["run", "--strategy", "all", "--config-dir", "configs"])
            .arg("--kernel-dir")
            .arg(kernel_dir)
            .args(extra)
            .env(
                "PATH",
                format!("{}:/usr/bin:/bin", self.path().join("bin").display()),
            )
            .env("KACTORS_LOCK_DIR", self.path().join("locks"))
            .env_remove("CUDA_VISIBLE_DEVICES")
            .env_remove("HIP_VISIBLE_DEVICES")
            .env_remove("ROCR_VISIBLE_DEVICES");
        command
    }

    fn run(&self, kernel_dir: &Path, extra: &[&str]) -> Output {
        self.command(kernel_dir, extra).output().unwrap()
    }

    /// The folders and files under runs/, by name.
    fn runs(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.path().join("runs"))
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// The run folder of `strategy` (there is one).
    fn run_of(&self, strategy: &str) -> PathBuf {
        let prefix = format!("{strategy}-");
        let found: Vec<String> = self
            .runs()
            .into_iter()
            .filter(|name| name.starts_with(&prefix) && !name.ends_with(".md"))
            .collect();
        assert_eq!(found.len(), 1, "one run of {strategy}: {found:?}");
        self.path().join("runs").join(&found[0])
    }

    /// The summary `all-<timestamp>.json`, read.
    fn summary(&self) -> Value {
        let name = self
            .runs()
            .into_iter()
            .find(|name| name.starts_with("all-") && name.ends_with(".json"))
            .expect("a summary all-<timestamp>.json under runs/");
        serde_json::from_str(&std::fs::read_to_string(self.path().join("runs").join(name)).unwrap())
            .unwrap()
    }
}

fn count(records: &[Value], kind: &str) -> usize {
    records.iter().filter(|r| r["type"] == kind).count()
}

/// The summary's skipped strategies with their reasons, by name.
fn skipped(summary: &Value) -> Vec<(String, String)> {
    summary["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["strategy"].as_str().unwrap().to_string(),
                s["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn ran(summary: &Value) -> Vec<&str> {
    summary["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|run| run["strategy"].as_str().unwrap())
        .collect()
}

#[test]
fn without_a_gpu_the_noop_strategies_run_in_turn_and_every_other_one_is_skipped_saying_why() {
    let host = Host::new(&[
        ("noop.yaml", DRY),
        ("twin.yaml", &format!("# the same dry run again\n{DRY}")),
        (
            "longer.yaml",
            &DRY.replace("max_rounds: 1", "max_rounds: 2"),
        ),
        ("techniques_default.yaml", "techniques:\n  - tiling\n"),
    ]);
    let output = host.run(&example("optimize_01_matvec"), &["--json"]);
    let stderr = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{stderr}");

    // Every line on stdout is one JSON event naming its strategy; both runs' records are there.
    let events: Vec<Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert!(
        events.iter().all(|e| e["strategy"].is_string()),
        "an event without its strategy"
    );
    let started: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "run_started")
        .map(|e| e["strategy"].as_str().unwrap())
        .collect();
    assert_eq!(started, ["longer", "noop"], "in name order, one at a time");
    let first_noop_record = events
        .iter()
        .position(|e| e["strategy"] == "noop" && e["type"] != "strategy_skipped")
        .unwrap();
    let last_longer_record = events
        .iter()
        .rposition(|e| e["strategy"] == "longer")
        .unwrap();
    assert!(
        last_longer_record < first_noop_record,
        "the second run starts after the first"
    );
    let skipped_events: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "strategy_skipped")
        .map(|e| e["strategy"].as_str().unwrap())
        .collect();
    assert_eq!(
        skipped_events,
        [
            "amd",
            "beam_search",
            "greedy",
            "nvidia",
            "techniques_default",
            "twin"
        ]
    );

    let summary = events.last().unwrap();
    assert_eq!(summary["type"], "comparison");
    assert_eq!(*summary, {
        let mut file = host.summary();
        file["summary"] = summary["summary"].clone();
        file
    });
    assert_eq!(ran(summary), ["longer", "noop"]);
    for run in summary["runs"].as_array().unwrap() {
        assert_eq!(run["exit_code"], 0);
        assert_eq!(run["outcome"], "completed");
        assert_eq!(run["provenance"], "simulated");
        assert!(run["best_ms"].as_f64().unwrap() > 0.0, "{run}");
        assert!(run["speedup_vs_initial"].as_f64().unwrap() > 0.0, "{run}");
        assert!(run["candidates"].as_u64().unwrap() >= 2, "{run}");
        assert!(run["wall_s"].as_f64().unwrap() > 0.0, "{run}");
        let strategy = run["strategy"].as_str().unwrap();
        assert_eq!(
            PathBuf::from(run["run_dir"].as_str().unwrap()),
            std::path::absolute(host.run_of(strategy)).unwrap()
        );
    }
    let no_gpu = "no GPU visible: nvidia-smi was not found on PATH";
    let reasons = skipped(summary);
    let reason_of = |name: &str| {
        reasons
            .iter()
            .find(|(strategy, _)| strategy == name)
            .map(|(_, reason)| reason.as_str())
            .unwrap()
    };
    assert!(reason_of("amd").starts_with(&format!("its platform is rocm: {no_gpu}")));
    assert!(reason_of("nvidia").starts_with(&format!("its platform is nvidia: {no_gpu}")));
    assert!(
        reason_of("beam_search").starts_with(&format!("it runs on the GPUs detected: {no_gpu}"))
    );
    assert!(reason_of("techniques_default").contains("technique taxonomy"));
    assert_eq!(
        reason_of("twin"),
        "it resolves to the same settings as `noop`, run before it"
    );
    for (name, reason) in &reasons {
        assert!(
            stderr.contains(&format!(
                "kactors: --strategy all: skipped {name}: {reason}"
            )),
            "{stderr}"
        );
    }

    // The comparison on stderr is the summary's Markdown; each run kept its own folder.
    let markdown_path = PathBuf::from(summary["summary"]["markdown"].as_str().unwrap());
    let markdown = std::fs::read_to_string(host.path().join(markdown_path)).unwrap();
    assert!(markdown.contains("| strategy | exit | outcome | best (ms) | vs initial | candidates | wall time | provenance | run directory |"));
    for line in markdown
        .lines()
        .filter(|line| line.starts_with("| longer") || line.starts_with("| noop"))
    {
        assert!(
            stderr.contains(line),
            "{line} missing from stderr:\n{stderr}"
        );
    }
    for strategy in ["longer", "noop"] {
        let run = host.run_of(strategy);
        let records = journal(&run);
        assert_eq!(records[0]["strategy"], strategy);
        assert!(run.join("kactors.log").is_file());
        assert_eq!(count(&records, "run_finished"), 1);
    }
    assert_eq!(count(&journal(&host.run_of("longer")), "round_finished"), 2);
}

#[test]
fn a_refused_strategy_does_not_stop_the_others_and_the_exit_code_is_the_worst_of_the_runs() {
    let host = Host::new(&[
        ("noop.yaml", DRY),
        ("cramped.yaml", &format!("{DRY}max_source_bytes: 1\n")),
    ]);
    let output = host.run(&example("optimize_01_matvec"), &[]);
    let stderr = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("kactors: error: cramped: ") && stderr.contains("max_source_bytes"),
        "{stderr}"
    );
    let summary = host.summary();
    assert_eq!(summary["exit_code"], 2);
    assert_eq!(ran(&summary), ["cramped", "noop"]);
    let cramped = &summary["runs"][0];
    assert_eq!(cramped["outcome"], "refused");
    assert_eq!(cramped["exit_code"], 2);
    assert!(
        cramped["reason"]
            .as_str()
            .unwrap()
            .contains("max_source_bytes")
    );
    assert!(cramped["run_dir"].is_null() && cramped["best_ms"].is_null());
    assert_eq!(summary["runs"][1]["outcome"], "completed");
    assert!(
        !host.runs().iter().any(|name| name.starts_with("cramped-")),
        "a refused strategy leaves no run directory"
    );
    assert_eq!(count(&journal(&host.run_of("noop")), "run_finished"), 1);
}

/// Issue 24: a file that means to be a strategy (it sets `platform:` or `strategy:`) but has a
/// YAML error or a mistyped key is a refused run (exit 2), not "not a strategy".
#[test]
fn a_strategy_file_with_a_mistake_is_refused_not_skipped_and_the_exit_code_is_2() {
    let host = Host::new(&[
        ("noop.yaml", DRY),
        ("mistyped.yaml", &format!("{DRY}max_roundz: 3\n")),
        ("broken.yaml", "strategy: greedy\nplatform: [noop\n"),
        ("techniques_default.yaml", "techniques:\n  - tiling\n"),
    ]);
    let output = host.run(&example("optimize_01_matvec"), &[]);
    let stderr = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("kactors: error: mistyped: ") && stderr.contains("max_roundz"),
        "{stderr}"
    );
    assert!(stderr.contains("kactors: error: broken: "), "{stderr}");
    let summary = host.summary();
    assert_eq!(summary["exit_code"], 2);
    assert_eq!(ran(&summary), ["broken", "mistyped", "noop"]);
    for refused in &summary["runs"].as_array().unwrap()[..2] {
        assert_eq!(refused["outcome"], "refused", "{refused}");
        assert_eq!(refused["exit_code"], 2, "{refused}");
    }
    assert_eq!(summary["runs"][2]["outcome"], "completed");
    let skipped = skipped(&summary);
    let taxonomy = skipped
        .iter()
        .find(|(name, _)| name == "techniques_default")
        .unwrap();
    assert!(taxonomy.1.starts_with("not a strategy: "), "{skipped:?}");
}

#[test]
fn on_an_nvidia_host_the_amd_configuration_and_noop_are_skipped_and_the_same_run_is_made_once() {
    let host = Host::new(&[
        // Refused at once (input.py is larger), so that no evaluator is needed: what is run
        // and what is skipped is the point here.
        (
            "beam_search.yaml",
            "provider: replay\nmax_source_bytes: 1\n",
        ),
        (
            "nvidia.yaml",
            "platform: nvidia\nprovider: replay\nmax_source_bytes: 1\n",
        ),
        (
            "greedy.yaml",
            "platform: nvidia\nprovider: replay\nmax_source_bytes: 1\n",
        ),
    ]);
    write_nvidia_smi(
        &host.path().join("bin/nvidia-smi"),
        "echo '0, NVIDIA H200, GPU-aaaaaaaa-0000-0000-0000-000000000000, 00000000:00:06.0'\n",
    );
    let output = host.run(&example("optimize_01_matvec"), &[]);
    let stderr = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    let summary = host.summary();
    assert_eq!(ran(&summary), ["beam_search"]);
    assert_eq!(
        skipped(&summary),
        [
            (
                "amd".to_string(),
                "its platform is rocm, and this host's GPUs are nvidia (as `kactors devices` decides)"
                    .to_string()
            ),
            (
                "greedy".to_string(),
                "it resolves to the same settings as `beam_search`, run before it".to_string()
            ),
            (
                "noop".to_string(),
                "the noop platform only simulates devices, and this host's nvidia GPUs fit"
                    .to_string()
            ),
            (
                "nvidia".to_string(),
                "it resolves to the same settings as `beam_search`, run before it".to_string()
            ),
        ]
    );
}

#[test]
fn the_runs_share_one_max_time_so_a_later_run_gets_only_what_is_left() {
    // Each evaluation takes 0.3 s; with kill_grace_s 0.1 the spans kept free before the limit
    // come to 1.4 + 1.6 + 2.1 = 5.1 s, so a 7 s limit leaves the first run about 2 s of
    // proposals, and the second, started with less than 5.1 s left, none.
    let slow = "platform: noop\nprovider: replay\nnum_workers: 1\nmax_rounds: 50\nnoop_eval_s: 0.3\n\
                replay_latency_s: 0\nkill_grace_s: 0.1\nstrategy_config:\n  num_top_kernels: 1\n  num_bottlenecks: 1\n";
    let host = Host::new(&[
        ("noop.yaml", slow),
        (
            "second.yaml",
            &slow.replace("max_rounds: 50", "max_rounds: 40"),
        ),
    ]);
    let kernel = host.path().join("kernel");
    std::fs::create_dir_all(kernel.join("candidates")).unwrap();
    for name in ["input.py", "problem.py", "test.py"] {
        std::fs::copy(example("optimize_01_matvec").join(name), kernel.join(name)).unwrap();
    }
    for n in 0..40 {
        std::fs::write(
            kernel.join(format!("candidates/{n:03}.py")),
            format!("def kernel_function(a, b):\n    variant = {n}\n    return a\n"),
        )
        .unwrap();
    }
    let output = host.run(&kernel, &["--max-time", "7s"]);
    let stderr = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let first = journal(&host.run_of("noop"));
    assert!(
        count(&first, "proposal_requested") > 0,
        "the first run proposes"
    );
    assert!(count(&first, "limit_reached") > 0);
    let summary = host.summary();
    if ran(&summary) == ["noop", "second"] {
        let second = journal(&host.run_of("second"));
        assert_eq!(
            count(&second, "proposal_requested"),
            0,
            "the second run had less time left than it keeps free"
        );
        assert!(count(&second, "limit_reached") > 0);
    } else {
        assert_eq!(ran(&summary), ["noop"]);
        assert_eq!(
            skipped(&summary).last().unwrap(),
            &(
                "second".to_string(),
                "the runs before it spent the whole max_time (7s)".to_string()
            )
        );
    }
}

#[test]
fn the_runs_share_one_budget_so_a_later_run_counts_what_the_earlier_ones_spent() {
    let reply = chat_completion(
        "Here is a faster kernel.\n\n```python\ndef kernel_function(a, b):\n    return a\n```\n",
    );
    let server = LlmServer::start(64, move |_| (200, reply.clone()));
    let base_url = &server.base_url;
    // Each reply costs $0.80 (80 output tokens at $10000 a million); a request may cost $1.00
    // (max_tokens 100). The first run has no budget and spends at least $2.40 (an analysis and
    // two proposals); the second's $1.50 would allow its first request on its own.
    let llm = format!(
        "platform: noop\nprovider: openai_compatible\nmodel: local-kernel-model\nbase_url: {base_url}\n\
         max_tokens: 100\nprices:\n  local-kernel-model:\n    input_usd_per_mtok: 0\n    output_usd_per_mtok: 10000\n\
         num_workers: 1\nmax_rounds: 1\nnoop_eval_s: 0\nstrategy_config:\n  num_top_kernels: 1\n  num_bottlenecks: 2\n"
    );
    let host = Host::new(&[
        ("noop.yaml", llm.as_str()),
        ("second.yaml", &format!("{llm}budget_usd: 1.5\n")),
    ]);
    let output = host
        .command(&example("optimize_01_matvec"), &[])
        .env("OPENAI_API_KEY", "sk-kactors-test")
        .output()
        .unwrap();
    let stderr = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let spent =
        |records: &[Value]| -> f64 { records.iter().filter_map(|r| r["cost_usd"].as_f64()).sum() };
    let first = journal(&host.run_of("noop"));
    assert!(spent(&first) >= 2.4 - 1e-9, "spent {}", spent(&first));
    let second = journal(&host.run_of("second"));
    assert_eq!(spent(&second), 0.0, "nothing was left of the budget");
    let refused: Vec<&Value> = second.iter().filter(|r| r["outcome"] == "budget").collect();
    assert!(
        !refused.is_empty(),
        "the second run's requests were stopped by the budget"
    );
    assert!(
        refused[0]["error"]
            .as_str()
            .unwrap()
            .contains("budget_usd 1.50 reached"),
        "{}",
        refused[0]
    );
}

#[test]
fn an_interrupt_during_one_run_starts_no_other_and_exits_130() {
    let slow = "platform: noop\nprovider: replay\nnum_workers: 1\nmax_rounds: 5\nnoop_eval_s: 2\n\
                kill_grace_s: 0.2\nstrategy_config:\n  num_top_kernels: 1\n  num_bottlenecks: 2\n";
    let host = Host::new(&[
        ("noop.yaml", slow),
        (
            "second.yaml",
            &slow.replace("max_rounds: 5", "max_rounds: 4"),
        ),
    ]);
    let mut child = host
        .command(&example("optimize_01_matvec"), &["--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // The first run's first evaluation has begun: interrupt there.
    for line in lines.by_ref() {
        let event: Value = serde_json::from_str(&line.unwrap()).unwrap();
        if event["type"] == "step_started" {
            assert_eq!(event["strategy"], "noop");
            break;
        }
    }
    send_signal(&child, nix::sys::signal::Signal::SIGINT);
    let rest: Vec<Value> = lines
        .map(|line| serde_json::from_str(&line.unwrap()).unwrap())
        .collect();
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(130), "{}", stderr(&output));
    assert!(
        rest.iter().all(|e| e["strategy"] != "second"
            || e["type"] == "strategy_skipped"
            || e["type"] == "comparison"),
        "the second run never started"
    );
    let summary = rest.last().unwrap();
    assert_eq!(summary["type"], "comparison");
    assert_eq!(summary["exit_code"], 130);
    assert_eq!(summary["runs"][0]["outcome"], "interrupted");
    assert!(
        skipped(summary).contains(&(
            "second".to_string(),
            "interrupted by SIGINT before it started".to_string()
        )),
        "{summary}"
    );
    assert!(!host.runs().iter().any(|name| name.starts_with("second-")));
}

#[test]
fn each_run_logs_to_its_own_kactors_log() {
    let host = Host::new(&[
        ("noop.yaml", DRY),
        (
            "longer.yaml",
            &DRY.replace("max_rounds: 1", "max_rounds: 2"),
        ),
    ]);
    // A stdout nobody reads: each run's JSON progress is dropped at its first line, which
    // tracing notes in that run's log.
    let mut child = host
        .command(&example("optimize_01_matvec"), &["--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    assert_eq!(child.wait().unwrap().code(), Some(0));
    for strategy in ["longer", "noop"] {
        let log = std::fs::read_to_string(host.run_of(strategy).join("kactors.log")).unwrap();
        assert_eq!(
            log.matches("progress on stdout can no longer be written")
                .count(),
            1,
            "{strategy}'s kactors.log: {log}"
        );
    }
}
