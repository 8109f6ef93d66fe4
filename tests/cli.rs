//! The binary as a user runs it, each test in a fresh temporary directory.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn kactors(dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_kactors"));
    command
        .current_dir(dir)
        .env_remove("KACTORS_CONFIG_DIR")
        .env_remove("RUST_LOG");
    command
}

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(name)
}

fn only_run_folder(runs: &Path) -> PathBuf {
    let folders: Vec<PathBuf> = std::fs::read_dir(runs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(folders.len(), 1, "{folders:?}");
    folders.into_iter().next().unwrap()
}

fn journal(run: &Path) -> Vec<Value> {
    std::fs::read_to_string(run.join("journal.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
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
    let run = only_run_folder(&dir.path().join("runs"));
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
        assert_eq!(record["v"], 1);
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
    let output = kactors(dir.path())
        .args(["run", "--strategy", "noop", "--kernel-dir"])
        .arg(&kernel)
        .output()
        .unwrap();
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
    let records = journal(&only_run_folder(&dir.path().join("runs")));
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
    let ka = "strategy: beam_search\nplatform: noop\nprovider: replay\nnum_workers: 2\nmax_rounds: 1\ndivergence_threshold: 50.0\ntarget_platform: cuda\nstrategy_config:\n  num_top_kernels: 1\n  num_bottlenecks: 2\n  samples_per_prompt: 5\n";
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
            .contains("divergence_threshold, target_platform, strategy_config.samples_per_prompt")
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
    let run = only_run_folder(&dir.path().join("runs"));
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
fn a_device_error_exits_2_with_nothing_on_stdout() {
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
    assert!(output.stdout.is_empty());
    assert!(
        stderr(&output).contains("ROCm platform was requested but no devices are visible"),
        "{}",
        stderr(&output)
    );
}
