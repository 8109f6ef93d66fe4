//! Issue 5 end to end without an AMD GPU: a fake amd-smi lists four MI300X, a fake rocprofv3
//! (tests/fixtures/rocm/fake-rocprofv3) writes CSVs as the documented formats have them, and
//! `--python` is the stand-in (tests/fixtures/standin-python) for the evaluator and the wrapper.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::runs::journal;
use support::standin_node::standin_kernel;
use support::{fixtures, is_running, write_executable};

fn fixture(path: &str) -> PathBuf {
    fixtures().join(path)
}

/// A node with four AMD GPUs and a kernel directory whose candidates pass on the stand-in.
fn amd_node() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("bin")).unwrap();
    let list = fixture("devices/amd-smi-list-e-4gpu.json");
    let asic = fixture("devices/amd-smi-static-asic-4gpu.json");
    write_executable(
        &root.join("bin/amd-smi"),
        &format!(
            "#!/bin/sh\ncase \"$*\" in\n  'list -e --json') exec /bin/cat '{}';;\n  'static --asic --json') exec /bin/cat '{}';;\n  *) echo \"unexpected: $*\" >&2; exit 2;;\nesac\n",
            list.display(),
            asic.display()
        ),
    );
    let candidates: Vec<(&str, String)> = [("01.py", "1.5"), ("02.py", "1.25")]
        .into_iter()
        .map(|(name, ms)| {
            let text = format!(
                "# standin: pass time_ms={ms}\ndef kernel_function(x):\n    return x + {ms}\n"
            );
            (name, text)
        })
        .collect();
    let candidates: Vec<(&str, &str)> = candidates
        .iter()
        .map(|(name, text)| (*name, text.as_str()))
        .collect();
    standin_kernel(root, &candidates);
    std::fs::write(
        root.join("amd.yaml"),
        format!(
            "platform: rocm\nprovider: replay\nnum_workers: 2\nmax_rounds: 1\ntest_timeout_s: 20\nkill_grace_s: 0.3\nprofile_pass_timeout_s: 2\nmax_refinements: 0\nstrategy_config:\n  num_top_kernels: 1\n  num_bottlenecks: 2\nplatform_kwargs:\n  rocprof_bin_path: {}\n",
            fixture("rocm/fake-rocprofv3").display()
        ),
    )
    .unwrap();
    dir
}

fn run(node: &Path, mode: &str) -> (std::process::Output, Vec<Value>, PathBuf) {
    let output = Command::new(env!("CARGO_BIN_EXE_kactors"))
        .current_dir(node)
        .args([
            "run",
            "--strategy",
            "amd",
            "--config-dir",
            ".",
            "--kernel-dir",
            "kernel",
        ])
        .arg("--python")
        .arg(fixture("standin-python"))
        .env(
            "PATH",
            format!("{}:/usr/bin:/bin", node.join("bin").display()),
        )
        .env("KACTORS_LOCK_DIR", node.join("locks"))
        .env("FAKE_ROCPROF_MODE", mode)
        .env("STANDIN_TORCH_BUILD", "rocm")
        .env("FAKE_ROCPROF_PIDS_FILE", node.join("hung-pids"))
        .env_remove("CUDA_VISIBLE_DEVICES")
        .env_remove("HIP_VISIBLE_DEVICES")
        .env_remove("ROCR_VISIBLE_DEVICES")
        .output()
        .unwrap();
    let run = std::fs::read_dir(node.join("runs"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let journal = journal(&run);
    (output, journal, run)
}

#[test]
fn a_rocm_run_profiles_its_parent_with_rocprofv3_and_pins_by_hip_id() {
    let node = amd_node();
    let (output, records, _) = run(node.path(), "ok");
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let profile = records
        .iter()
        .find(|r| r["type"] == "profile_recorded")
        .expect("the initial kernel was profiled");
    assert_eq!(profile["details"]["vendor"], "rocm");
    assert_eq!(
        profile["details"]["kernels"],
        serde_json::json!(["matvec_kernel"])
    );
    assert!(profile["duration_ms"].as_f64().unwrap() > 0.0);
    let seen: Vec<String> = records
        .iter()
        .filter(|r| r["type"] == "evaluator_started")
        .map(|r| r["ready"]["device"]["uuid"].as_str().unwrap().to_string())
        .collect();
    assert!(!seen.is_empty());
    assert!(
        seen.iter().all(|pin| pin == "0" || pin == "1"),
        "children see HIP_VISIBLE_DEVICES=<HIP id>: {seen:?}"
    );
}

#[test]
fn a_hung_rocprofv3_pass_is_killed_and_the_run_goes_on_timing_alone() {
    let node = amd_node();
    // The fake writes its hung processes' pids into the node's folder, which no sandboxed
    // child may write.
    let strategy = node.path().join("amd.yaml");
    let yaml = std::fs::read_to_string(&strategy).unwrap();
    std::fs::write(&strategy, format!("{yaml}sandbox: off\n")).unwrap();
    let started = Instant::now();
    let (output, records, _) = run(node.path(), "hang");
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the hung pass was not waited out"
    );
    assert!(
        records
            .iter()
            .any(|r| r["type"] == "child_deadline" && r["action"] == "kill"),
        "SIGKILL after the grace"
    );
    let stopped = records
        .iter()
        .find(|r| r["type"] == "profiling_stopped")
        .expect("synthetic mode");
    assert!(
        stopped["reason"].as_str().unwrap().contains("timing alone"),
        "{stopped}"
    );
    let profiles = records
        .iter()
        .filter(|r| r["type"] == "step_started" && r["step"] == "profile")
        .count();
    assert_eq!(profiles, 1, "no further profile is started in the run");
    let verified = records
        .iter()
        .filter(|r| r["type"] == "candidate_finished" && r["passed"] == true)
        .count();
    assert_eq!(
        verified, 3,
        "the initial kernel and both candidates, on timing alone"
    );
    let pids = std::fs::read_to_string(node.path().join("hung-pids")).unwrap();
    for pid in pids.split_whitespace() {
        assert!(
            !is_running(pid.parse().unwrap()),
            "process {pid} of the hung pass survived"
        );
    }
}
