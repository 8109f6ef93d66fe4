//! The binary as a user runs it, each test in a fresh temporary directory.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

mod support;

use support::runs::{journal, only_run_in, stderr};
use support::{example, kactors};

/// `kactors run ARGS --kernel-dir KERNEL` in `dir`.
fn run(dir: &Path, args: &[&str], kernel: &Path) -> Output {
    kactors(dir)
        .arg("run")
        .args(args)
        .arg("--kernel-dir")
        .arg(kernel)
        .output()
        .unwrap()
}

#[test]
fn the_dry_run_with_four_workers_fans_candidates_out_round_robin() {
    let dir = tempfile::tempdir().unwrap();
    let output = kactors(dir.path())
        .args([
            "run",
            "--strategy",
            "noop",
            "--workers",
            "4",
            "--kernel-dir",
        ])
        .arg(example("optimize_01_matvec"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let run = only_run_in(&dir.path().join("runs"));
    for file in [
        "run.yaml",
        "journal.jsonl",
        "best_kernel.py",
        "report.md",
        "candidates/0/kernel.py",
    ] {
        assert!(run.join(file).exists(), "{file} is missing");
    }
    let records = journal(&run);
    for record in &records {
        assert_eq!(record["v"], actors::journal::SCHEMA_VERSION);
        assert!(record["t"].as_str().unwrap().ends_with('Z'));
        assert!(record["type"].is_string());
    }
    let mut devices_of_candidates: Vec<(u64, u64)> = records
        .iter()
        .filter(|r| r["type"] == "step_started" && r["step"] == "verify")
        .map(|r| {
            (
                r["candidate"].as_u64().unwrap(),
                r["device"].as_u64().unwrap(),
            )
        })
        .collect();
    devices_of_candidates.sort();
    assert!(
        devices_of_candidates.len() >= 5,
        "{devices_of_candidates:?}"
    );
    for (candidate, device) in &devices_of_candidates {
        assert_eq!(
            *device,
            candidate % 4,
            "candidate {candidate} is pinned round-robin"
        );
    }
    let used: std::collections::BTreeSet<u64> =
        devices_of_candidates.iter().map(|(_, d)| *d).collect();
    assert_eq!(used.len(), 4);
    assert!(
        records
            .iter()
            .filter(|r| r["type"] == "step_finished")
            .all(|r| r["provenance"] == "simulated")
    );
    let last = records.last().unwrap();
    assert_eq!(last["type"], "run_finished");
    assert_eq!(last["outcome"], "completed");
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(report.contains("Simulated run"));
    assert!(report.contains("| 3 | noop simulated device 3 |"));
}

/// A copy of an example kernel directory, as KernelAgent ships them: no candidates/ folder.
fn example_without_candidates(dir: &Path, name: &str) -> PathBuf {
    let copy = dir.join(name);
    std::fs::create_dir_all(&copy).unwrap();
    for entry in std::fs::read_dir(example(name)).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            std::fs::copy(&path, copy.join(path.file_name().unwrap())).unwrap();
        }
    }
    copy
}

/// Issue 10: `kactors check` says ok for a kernel directory without candidates/, and the dry
/// run on it evaluates the initial kernel, names the missing folder and ends as exhausted.
#[test]
fn the_dry_run_on_a_kernel_directory_without_candidates_ends_exhausted() {
    let dir = tempfile::tempdir().unwrap();
    let kernel = example_without_candidates(dir.path(), "optimize_01_matvec");
    let check = kactors(dir.path())
        .args(["check", "--strategy", "noop", "--kernel-dir"])
        .arg(&kernel)
        .output()
        .unwrap();
    assert_eq!(check.status.code(), Some(0), "{}", stderr(&check));
    let output = run(dir.path(), &["--strategy", "noop"], &kernel);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let warnings: Vec<String> = stderr(&output)
        .lines()
        .filter(|line| line.contains("replay folder"))
        .map(str::to_string)
        .collect();
    assert_eq!(
        warnings,
        [format!(
            "kactors: warning: the replay folder {0} does not exist: the replay provider has no \
             candidates, so the run evaluates the initial kernel and ends; put .py files defining \
             kernel_function in {0}, or set replay_dir",
            kernel.join("candidates").display()
        )]
    );
    let records = journal(&only_run_in(&dir.path().join("runs")));
    let evaluated: Vec<u64> = records
        .iter()
        .filter(|r| r["type"] == "candidate_finished")
        .map(|r| r["candidate"].as_u64().unwrap())
        .collect();
    assert_eq!(evaluated, [0]);
    assert!(
        records
            .iter()
            .filter(|r| r["type"] == "proposal_received")
            .all(|r| r["outcome"] == "exhausted")
    );
    let last = records.last().unwrap();
    assert_eq!(
        (
            last["type"].as_str(),
            last["outcome"].as_str(),
            last["reason"].as_str()
        ),
        (
            Some("run_finished"),
            Some("completed"),
            Some("the llm provider has no more proposals")
        )
    );
}

#[test]
fn an_unknown_yaml_key_fails_with_exit_2_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("typo.yaml"),
        "platform: noop\nmax_round: 3\n",
    )
    .unwrap();
    let output = kactors(dir.path())
        .args([
            "run",
            "--strategy",
            "typo",
            "--config-dir",
            ".",
            "--kernel-dir",
        ])
        .arg(example("optimize_01_matvec"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("unknown key `max_round`; did you mean `max_rounds`?"),
        "{}",
        stderr(&output)
    );
    assert!(!dir.path().join("runs").exists(), "nothing ran");
}

#[test]
fn kernelagent_config_keys_are_accepted_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let ka = "strategy: beam_search\nplatform: noop\nprovider: replay\nnum_workers: 2\nmax_rounds: 1\ndivergence_threshold: 50.0\ntarget_platform: cuda\nstrategy_config:\n  num_top_kernels: 1\n  num_bottlenecks: 2\n  workers_per_gpu: 4\n";
    std::fs::write(dir.path().join("ka.yaml"), ka).unwrap();
    let output = kactors(dir.path())
        .args(["run", "--strategy", "ka", "--kernel-dir"])
        .arg(example("optimize_02_rmsnorm"))
        .env("KACTORS_CONFIG_DIR", dir.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let warnings: Vec<&str> = std::str::from_utf8(&output.stderr)
        .unwrap()
        .lines()
        .filter(|l| l.contains("warning"))
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0]
            .contains("divergence_threshold, target_platform, strategy_config.workers_per_gpu")
    );
}

#[test]
fn sigint_ends_a_run_with_exit_130_and_a_finished_journal_and_report() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("slow.yaml"),
        "platform: noop\nprovider: replay\nnoop_eval_s: 60\nnum_workers: 2\n",
    )
    .unwrap();
    let mut child = kactors(dir.path())
        .args([
            "run",
            "--json",
            "--strategy",
            "slow",
            "--config-dir",
            ".",
            "--kernel-dir",
        ])
        .arg(example("optimize_01_matvec"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut events = BufReader::new(child.stdout.take().unwrap()).lines();
    loop {
        let line = events.next().expect("a step starts").unwrap();
        let event: Value = serde_json::from_str(&line).unwrap();
        if event["type"] == "step_started" {
            break;
        }
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let rest: Vec<Value> = events
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert_eq!(rest.last().unwrap()["type"], "run_finished");
    let run = only_run_in(&dir.path().join("runs"));
    let records = journal(&run);
    assert!(
        records
            .iter()
            .any(|r| r["type"] == "interrupted" && r["signal"] == "SIGINT")
    );
    let last = records.last().unwrap();
    assert_eq!(
        (last["type"].as_str(), last["outcome"].as_str()),
        (Some("run_finished"), Some("interrupted"))
    );
    assert!(
        std::fs::read_to_string(run.join("report.md"))
            .unwrap()
            .contains("Outcome: **interrupted**")
    );
}

#[test]
fn strategies_lists_each_with_its_platform() {
    let dir = tempfile::tempdir().unwrap();
    let output = kactors(dir.path())
        .args(["strategies", "--json"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let listed: Value = serde_json::from_slice(&output.stdout).unwrap();
    let platforms: Vec<(String, String)> = listed["strategies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_string(),
                s["platform"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for expected in [
        ("amd", "rocm"),
        ("beam_search", "detected"),
        ("greedy", "detected"),
        ("noop", "noop"),
        ("nvidia", "nvidia"),
    ] {
        assert!(
            platforms.contains(&(expected.0.to_string(), expected.1.to_string())),
            "{platforms:?}"
        );
    }
}

#[test]
fn every_command_has_help() {
    let dir = tempfile::tempdir().unwrap();
    for command in [
        vec!["--help"],
        vec!["run", "--help"],
        vec!["strategies", "--help"],
    ] {
        let output = kactors(dir.path()).args(&command).output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{command:?}");
        assert!(
            String::from_utf8_lossy(&output.stdout).contains("Usage: kactors"),
            "{command:?}"
        );
    }
}

#[test]
fn a_missing_kernel_directory_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let output = kactors(dir.path())
        .args(["run", "--strategy", "noop", "--kernel-dir", "nowhere"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("kernel directory nowhere does not exist"),
        "{}",
        stderr(&output)
    );
}

/// A folder holding a fake nvidia-smi that prints the real H200 capture, for use as PATH.
fn fake_nvidia_smi(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let capture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/devices/nvidia-smi-h200.csv");
    let script = format!("#!/bin/sh\nexec /bin/cat '{}'\n", capture.display());
    let path = bin.join("nvidia-smi");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    bin
}

#[test]
fn devices_shows_the_gpu_and_the_pin_its_workers_children_get() {
    let dir = tempfile::tempdir().unwrap();
    let bin = fake_nvidia_smi(dir.path());
    let output = kactors(dir.path())
        .args(["devices", "--json"])
        .env("PATH", &bin)
        .env_remove("CUDA_VISIBLE_DEVICES")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["vendor"], "nvidia");
    assert_eq!(report["devices"][0]["name"], "NVIDIA H200");
    assert_eq!(report["devices"][0]["spec"], "NVIDIA H200");
    assert_eq!(
        report["pins"][0]["set"]["CUDA_VISIBLE_DEVICES"],
        "GPU-5beddb9d-b3cb-7e53-54c9-13c55d854a1f"
    );
}

#[test]
fn a_device_error_exits_2_with_only_the_json_error_on_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let bin = fake_nvidia_smi(dir.path());
    let output = kactors(dir.path())
        .args(["devices", "--strategy", "amd", "--json"])
        .env("PATH", &bin)
        .env_remove("HIP_VISIBLE_DEVICES")
        .env_remove("ROCR_VISIBLE_DEVICES")
        .env_remove("CUDA_VISIBLE_DEVICES")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let error: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        (&error["type"], &error["exit_code"]),
        (&"error".into(), &2.into())
    );
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .starts_with("ROCm platform was requested but no devices are visible"),
        "{error}"
    );
    assert!(
        stderr(&output).contains("ROCm platform was requested but no devices are visible"),
        "{}",
        stderr(&output)
    );
}

fn kernelagent_configs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kernelagent-configs")
}

/// `kactors run --strategy NAME` with NAME.yaml holding `yaml`, on a copy of the matvec example.
fn run_with(dir: &Path, yaml: &str, extra: &[&str]) -> Output {
    std::fs::write(dir.join("s.yaml"), yaml).unwrap();
    let args = [&["--strategy", "s", "--config-dir", "."][..], extra].concat();
    run(dir, &args, &example("optimize_01_matvec"))
}

/// Issue 10: numbers out of range from a file or a flag: exit 2 naming the key or the flag, and
/// no run directory (1e300 seconds used to panic in `Duration::from_secs_f64` after the run
/// directory was made; 65536 × 65536 candidates a round wrapped; 4294967295 noop workers
/// aborted on a 481 GB allocation).
#[test]
fn numbers_out_of_range_exit_2_naming_the_key_and_leave_no_run_directory() {
    let noop = "platform: noop\nprovider: replay\n";
    let cases: &[(String, &[&str], &str)] = &[
        (
            format!("{noop}noop_eval_s: 1e300\n"),
            &[],
            "invalid value for `noop_eval_s`: expected a number of seconds from 0 to 604800 s (7 days), found `1e300`",
        ),
        (
            format!("{noop}kill_grace_s: 1e300\n"),
            &[],
            "invalid value for `kill_grace_s`",
        ),
        (
            format!("{noop}replay_latency_s: 1e300\n"),
            &[],
            "invalid value for `replay_latency_s`",
        ),
        (
            format!("{noop}strategy_config:\n  num_top_kernels: 65536\n  num_bottlenecks: 65536\n"),
            &[],
            "invalid value for `strategy_config.num_top_kernels`: expected a whole number from 1 to 4096, found `65536`",
        ),
        (
            format!("{noop}strategy_config:\n  num_top_kernels: 2048\n  num_bottlenecks: 4\n"),
            &[],
            "invalid value for `strategy_config`: num_top_kernels × num_bottlenecks is 2048 × 4 = 8192 candidates a round; at most 4096",
        ),
        (
            noop.to_string(),
            &["--workers", "4294967295"],
            "invalid value for --workers: the noop platform simulates 1 to 256 devices, found 4294967295",
        ),
        (
            noop.to_string(),
            &["--max-rounds", "0"],
            "invalid value for --max-rounds: expected a whole number of at least 1, found 0",
        ),
    ];
    for (yaml, extra, message) in cases {
        let dir = tempfile::tempdir().unwrap();
        let output = run_with(dir.path(), yaml, extra);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{yaml} {extra:?}: {}",
            stderr(&output)
        );
        assert!(
            stderr(&output).contains(message),
            "{yaml} {extra:?}: {}",
            stderr(&output)
        );
        assert!(
            !dir.path().join("runs").exists(),
            "{yaml} {extra:?}: a run directory was left"
        );
    }
}

/// Issue 10: `--max-rounds 0` and `--workers 4294967295` with the shipped noop strategy.
#[test]
fn the_flags_of_the_dry_run_are_range_checked() {
    for (flag, value) in [("--workers", "4294967295"), ("--max-rounds", "0")] {
        let dir = tempfile::tempdir().unwrap();
        let output = run(
            dir.path(),
            &["--strategy", "noop", flag, value],
            &example("optimize_01_matvec"),
        );
        assert_eq!(output.status.code(), Some(2), "{flag}: {}", stderr(&output));
        assert!(
            stderr(&output).contains(&format!("invalid value for {flag}: ")),
            "{}",
            stderr(&output)
        );
        assert!(!dir.path().join("runs").exists());
    }
}

/// Issue 10: KernelAgent's own noop.yaml, `gpu_name: "NVIDIA H100 NVL 94GB"` and all, runs the
/// dry run unchanged.
#[test]
fn kernelagents_noop_configuration_runs_the_dry_run_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let configs = kernelagent_configs();
    let output = run(
        dir.path(),
        &[
            "--strategy",
            "noop",
            "--provider",
            "replay",
            "--config-dir",
            configs.to_str().unwrap(),
        ],
        &example("optimize_01_matvec"),
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let config = std::fs::read_to_string(kernelagent_configs().join("noop.yaml")).unwrap();
    assert!(config.contains("gpu_name: \"NVIDIA H100 NVL 94GB\""));
}

/// Issue 10: a KernelAgent file on a GPU platform names the GPU its own way; the detected
/// GPU's row is used and the disagreement is a warning, never an error.
#[test]
fn kernelagents_gpu_name_is_a_known_row_and_never_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let bin = fake_nvidia_smi(dir.path());
    let output = kactors(dir.path())
        .args([
            "devices",
            "--strategy",
            "beam_search_claude46",
            "--json",
            "--config-dir",
        ])
        .arg(kernelagent_configs())
        .env("PATH", &bin)
        .env_remove("CUDA_VISIBLE_DEVICES")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["devices"][0]["spec"], "NVIDIA H200");
    assert!(
        stderr(&output).contains(
            "warning: configured gpu_name \"NVIDIA H100 NVL\" disagrees with GPU 0, detected as \
             \"NVIDIA H200\"; using the detected row"
        ),
        "{}",
        stderr(&output)
    );
}

/// Issue 10: KernelAgent's config folder holds a technique taxonomy beside its strategies.
#[test]
fn strategies_lists_kernelagents_folder_and_names_the_file_it_skips() {
    let dir = tempfile::tempdir().unwrap();
    let output = kactors(dir.path())
        .args(["strategies", "--json", "--config-dir"])
        .arg(kernelagent_configs())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let listed: Value = serde_json::from_slice(&output.stdout).unwrap();
    let names: Vec<&str> = listed["strategies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 17, "{names:?}");
    assert!(
        names.contains(&"beam_search_diverse_clustered_xl"),
        "{names:?}"
    );
    let skipped = listed["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    let file = kernelagent_configs().join("techniques_default.yaml");
    assert_eq!(skipped[0]["file"], file.display().to_string());
    assert!(
        skipped[0]["reason"]
            .as_str()
            .unwrap()
            .contains("not a strategy configuration but a technique taxonomy"),
        "{skipped:?}"
    );

    let plain = kactors(dir.path())
        .args(["strategies", "--config-dir"])
        .arg(kernelagent_configs())
        .output()
        .unwrap();
    assert_eq!(plain.status.code(), Some(0));
    // The header row, then one row per strategy.
    assert_eq!(
        String::from_utf8_lossy(&plain.stdout).lines().count(),
        1 + 17
    );
    assert!(
        stderr(&plain).contains(&format!(
            "kactors: warning: skipped {}: not a strategy configuration",
            file.display()
        )),
        "{}",
        stderr(&plain)
    );
}

/// Issue 10: with `--json`, an error before the run starts is also one JSON object on stdout,
/// a command line clap refuses included.
#[test]
fn with_json_an_error_before_the_run_is_one_json_object_on_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&[&str], &str); 3] = [
        (
            &[
                "run",
                "--json",
                "--strategy",
                "noop",
                "--kernel-dir",
                "nowhere",
            ],
            "kernel directory nowhere does not exist or is not a directory",
        ),
        (
            &[
                "run",
                "--json",
                "--strategy",
                "nope",
                "--kernel-dir",
                "nowhere",
            ],
            "unknown strategy `nope`",
        ),
        (
            &[
                "run",
                "--json",
                "--strategy",
                "noop",
                "--kernel-dir",
                "k",
                "--workers",
                "-1",
            ],
            "unexpected argument '-1'",
        ),
    ];
    for (args, message) in cases {
        let output = kactors(dir.path()).args(args).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(stdout.lines().count(), 1, "{stdout}");
        let error: Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(error["type"], "error");
        assert_eq!(error["exit_code"], 2);
        assert!(
            error["message"].as_str().unwrap().contains(message),
            "{args:?}: {error}"
        );
    }
    let plain = kactors(dir.path())
        .args(["run", "--strategy", "noop", "--kernel-dir", "nowhere"])
        .output()
        .unwrap();
    assert!(plain.stdout.is_empty(), "without --json stdout stays empty");
}

/// Issue 10: a 50 MB input.py used to go into every prompt and a 500 MB run directory.
#[test]
fn input_and_problem_above_max_source_bytes_exit_2_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let kernel = example_without_candidates(dir.path(), "optimize_01_matvec");
    let mut input = std::fs::read_to_string(kernel.join("input.py")).unwrap();
    input.push_str(&"#".repeat(2 * 1024 * 1024));
    std::fs::write(kernel.join("input.py"), &input).unwrap();
    let output = run(dir.path(), &["--strategy", "noop"], &kernel);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains(&format!(
            "{} is {} bytes, more than max_source_bytes (1048576)",
            kernel.join("input.py").display(),
            input.len()
        )),
        "{}",
        stderr(&output)
    );
    assert!(!dir.path().join("runs").exists());

    // The key raises the limit; `kactors check` applies it as the run does.
    std::fs::write(
        dir.path().join("roomy.yaml"),
        "platform: noop\nprovider: replay\nmax_source_bytes: 4194304\n",
    )
    .unwrap();
    let check = |strategy: &str| {
        kactors(dir.path())
            .args([
                "check",
                "--config-dir",
                ".",
                "--strategy",
                strategy,
                "--kernel-dir",
            ])
            .arg(&kernel)
            .output()
            .unwrap()
    };
    assert_eq!(check("roomy").status.code(), Some(0));
    let refused = check("noop");
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&refused.stdout).contains("more than max_source_bytes"),
        "{}",
        String::from_utf8_lossy(&refused.stdout)
    );
}

/// The command with a stdout whose read end is closed before it starts.
fn with_closed_stdout(command: &mut Command) -> Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    command.stdout(writer).output().unwrap()
}

/// Issue 10: `kactors strategies | head -0` and the like: a closed stdout is a quiet end, as in
/// ripgrep, not a panic (exit 101).
#[test]
fn a_closed_stdout_is_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let bin = fake_nvidia_smi(dir.path());
    let matvec = example("optimize_01_matvec");
    let matvec = matvec.to_str().unwrap();
    let cases: [(&[&str], i32); 6] = [
        (&["strategies"], 0),
        (&["strategies", "--json"], 0),
        (&["devices"], 0),
        (&["devices", "--json"], 0),
        (&["check", "--strategy", "noop", "--kernel-dir", matvec], 0),
        (
            &[
                "check",
                "--json",
                "--strategy",
                "noop",
                "--kernel-dir",
                matvec,
            ],
            0,
        ),
    ];
    for (args, code) in cases {
        let output = with_closed_stdout(
            kactors(dir.path())
                .args(args)
                .env("PATH", &bin)
                .env_remove("CUDA_VISIBLE_DEVICES"),
        );
        assert!(
            !stderr(&output).contains("panicked"),
            "{args:?}: {}",
            stderr(&output)
        );
        assert_eq!(
            output.status.code(),
            Some(code),
            "{args:?}: {}",
            stderr(&output)
        );
    }
}
