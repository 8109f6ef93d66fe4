//! `kactors profile` and `kactors check` as a person runs them: the real binary in a temp dir
//! standing for a node, with fake nvidia-smi or amd-smi (fixtures in tests/fixtures/devices),
//! fake profilers (tests/fixtures/nvidia/fake-ncu, tests/fixtures/rocm/fake-rocprofv3) named by
//! the strategy's platform_kwargs, and `--python` pointing at tests/fixtures/standin-python,
//! which plays the profiled wrapper and brings stand-ins for torch and triton.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::journal::close;
use support::runs::{stderr, stdout};
use support::{fixtures, is_running, write_executable, write_nvidia_smi};

const GRACE_S: f64 = 0.3;
/// How late past deadline plus grace a kill may still count as on time, on a loaded machine.
const MARGIN: Duration = Duration::from_secs(3);

#[derive(Clone, Copy)]
enum Vendor {
    Nvidia,
    Rocm,
}

/// A node: `bin/` with the vendor's listing tool, a kernel directory, a strategy file.
struct Node {
    dir: tempfile::TempDir,
}

impl Node {
    fn new(vendor: Vendor) -> Node {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let bin = root.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let platform = match vendor {
            Vendor::Nvidia => {
                write_nvidia_smi(
                    &bin.join("nvidia-smi"),
                    "echo '0, NVIDIA H200, GPU-aaaaaaaa-0000-0000-0000-000000000000, 00000000:00:06.0'\n\
                     echo '1, NVIDIA H200, GPU-bbbbbbbb-0000-0000-0000-000000000000, 00000000:00:07.0'\n",
                );
                format!(
                    "platform: nvidia\nplatform_kwargs:\n  ncu_bin_path: {}\n",
                    fixtures().join("nvidia/fake-ncu").display()
                )
            }
            Vendor::Rocm => {
                let devices = fixtures().join("devices");
                write_executable(
                    &bin.join("amd-smi"),
                    &format!(
                        "#!/bin/sh\ncase \"$*\" in\n  'list -e --json') cat '{}';;\n  'static --asic --json') cat '{}';;\n  *) echo \"unexpected: $*\" >&2; exit 64;;\nesac\n",
                        devices.join("amd-smi-list-e-4gpu.json").display(),
                        devices.join("amd-smi-static-asic-4gpu.json").display()
                    ),
                );
                format!(
                    "platform: rocm\nplatform_kwargs:\n  rocprof_bin_path: {}\n",
                    fixtures().join("rocm/fake-rocprofv3").display()
                )
            }
        };
        // The stand-in Python and the fake profilers record what they were given in the node's
        // folder, which no sandboxed child may write: the sandbox has tests of its own
        // (tests/sandbox.rs).
        std::fs::write(
            root.join("fake.yaml"),
            format!("{platform}kill_grace_s: {GRACE_S}\nsandbox: off\n"),
        )
        .unwrap();
        std::fs::write(root.join("dry.yaml"), "platform: noop\nprovider: replay\n").unwrap();
        let kernel = root.join("kernel");
        std::fs::create_dir_all(&kernel).unwrap();
        std::fs::write(
            kernel.join("input.py"),
            "def kernel_function(x):\n    return x\n",
        )
        .unwrap();
        std::fs::write(
            kernel.join("problem.py"),
            "import torch\n\nclass Model(torch.nn.Module):\n    pass\n\ndef get_inputs():\n    return []\n\ndef get_init_inputs():\n    return []\n",
        )
        .unwrap();
        std::fs::write(kernel.join("test.py"), "").unwrap();
        Node { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `kactors ARGS` in the node, with `env` on top of a PATH of the node's `bin/`, no device
    /// masks, and a credential that must reach no child.
    fn kactors(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        self.command(args, env).output().unwrap()
    }

    /// The command [`Node::kactors`] runs, for a test that sets its stdout.
    fn command(&self, args: &[&str], env: &[(&str, &str)]) -> Command {
        let root = self.dir.path();
        let mut command = Command::new(env!("CARGO_BIN_EXE_kactors"));
        command
            .current_dir(root)
            .args(args)
            .arg("--config-dir")
            .arg(root)
            .env(
                "PATH",
                format!("{}:/usr/bin:/bin", root.join("bin").display()),
            )
            .env("KACTORS_LOCK_DIR", root.join("locks"))
            .env("ANTHROPIC_API_KEY", "sk-ant-never-in-a-child")
            .env("STANDIN_RECORD", root.join("wrapper-runs.jsonl"));
        for name in [
            "CUDA_VISIBLE_DEVICES",
            "HIP_VISIBLE_DEVICES",
            "ROCR_VISIBLE_DEVICES",
            "KACTORS_CONFIG_DIR",
        ] {
            command.env_remove(name);
        }
        for (name, value) in env {
            command.env(name, value);
        }
        command
    }

    fn profile(&self, extra: &[&str], env: &[(&str, &str)]) -> Output {
        self.profile_command(&[&["--json"][..], extra].concat(), env)
            .output()
            .unwrap()
    }

    /// `kactors profile` of the node's kernel with the fake strategy and the stand-in Python.
    fn profile_command(&self, extra: &[&str], env: &[(&str, &str)]) -> Command {
        let python = fixtures().join("standin-python");
        let mut args = vec![
            "profile",
            "--strategy",
            "fake",
            "--kernel-dir",
            "kernel",
            "--python",
            python.to_str().unwrap(),
        ];
        args.extend(extra);
        self.command(&args, env)
    }

    fn check(&self, extra: &[&str], env: &[(&str, &str)]) -> Output {
        let python = fixtures().join("standin-python");
        let mut args = vec![
            "check",
            "--strategy",
            "fake",
            "--kernel-dir",
            "kernel",
            "--python",
            python.to_str().unwrap(),
        ];
        args.extend(extra);
        self.kactors(&args, env)
    }

    /// Each wrapper run the stand-in recorded: arguments, working directory, environment.
    fn wrapper_runs(&self) -> Vec<Value> {
        std::fs::read_to_string(self.path("wrapper-runs.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    /// The kernel directory's files, to show nothing was written there.
    fn kernel_files(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.path("kernel"))
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// The one folder `kactors profile` made under runs/.
    fn profile_folder(&self) -> PathBuf {
        let folders: Vec<PathBuf> = std::fs::read_dir(self.path("runs"))
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .collect();
        assert_eq!(folders.len(), 1, "{folders:?}");
        folders[0].clone()
    }
}

/// The one JSON object on stdout.
fn json(output: &Output) -> Value {
    serde_json::from_str(stdout(output).trim())
        .unwrap_or_else(|error| panic!("{error}: {}\n{}", stdout(output), stderr(output)))
}

const KERNEL_FILES: [&str; 3] = ["input.py", "problem.py", "test.py"];

#[test]
fn profile_json_on_nvidia_is_issue_5s_object_from_the_configured_ncu() {
    let node = Node::new(Vendor::Nvidia);
    let argv_file = node.path("ncu-argv.txt");
    let output = node.profile(&[], &[("FAKE_NCU_ARGV_FILE", argv_file.to_str().unwrap())]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let report = json(&output);
    assert_eq!(report["ok"], true);
    assert_eq!(report["platform"], "nvidia");
    assert_eq!(report["device"], 0, "the first device");
    assert_eq!(report["kernels"], serde_json::json!(["matvec_kernel"]));
    assert!(close(&report["duration_ms"], 0.045568), "{report}");
    assert_eq!(report["roofline"]["bottleneck"], "memory");
    assert!(close(&report["roofline"]["memory_sol_pct"], 82.58));
    assert_eq!(report["error"], Value::Null);
    let passes = report["passes"].as_array().unwrap();
    assert_eq!(
        passes.len(),
        2,
        "the wrapper run that names the kernels, then ncu"
    );
    assert!(
        passes
            .iter()
            .all(|pass| pass["exit"] == 0 && pass["killed"] == false)
    );

    let argv = std::fs::read_to_string(&argv_file).expect("platform_kwargs.ncu_bin_path ran");
    assert!(
        argv.contains("--kernel-name\nregex:^(matvec_kernel)$\n"),
        "{argv}"
    );
    let folder = node.profile_folder();
    assert!(
        folder
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("profile-")
    );
    assert_eq!(
        std::fs::read_to_string(folder.join("kernel.py")).unwrap(),
        "def kernel_function(x):\n    return x\n"
    );
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(folder.join("profile.json")).unwrap())
            .unwrap();
    assert_eq!(saved, report);
    let runs = node.wrapper_runs();
    assert_eq!(runs.len(), 2);
    for run in &runs {
        let candidate = run["argv"][3].as_str().unwrap();
        assert_eq!(Path::new(candidate), folder.join("kernel.py"));
        assert!(
            run["cwd"]
                .as_str()
                .unwrap()
                .starts_with(folder.to_str().unwrap())
        );
        assert_eq!(
            run["env"]["CUDA_VISIBLE_DEVICES"],
            "GPU-aaaaaaaa-0000-0000-0000-000000000000"
        );
        assert_eq!(run["env"].get("ANTHROPIC_API_KEY"), None);
    }
    assert_eq!(node.kernel_files(), KERNEL_FILES);
    assert!(
        std::fs::read_dir(node.path("locks")).unwrap().count() >= 1,
        "the device was locked"
    );
}

#[test]
fn profile_in_plain_text_names_the_kernel_and_the_verdict() {
    let node = Node::new(Vendor::Nvidia);
    let python = fixtures().join("standin-python");
    let output = node.kactors(
        &[
            "profile",
            "--strategy",
            "fake",
            "--kernel-dir",
            "kernel",
            "--python",
            python.to_str().unwrap(),
            "--gpus",
            "1",
        ],
        &[],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(
        text.starts_with(
            "profile of kernel/input.py on device 1 (NVIDIA H200) with Nsight Compute: ok\n"
        ),
        "{text}"
    );
    assert!(text.contains("kernels: matvec_kernel\n"), "{text}");
    assert!(text.contains("duration: 0.045568 ms\n"), "{text}");
    assert!(
        text.contains("roofline: memory-bound; memory SOL 82.6%, compute SOL 5.7%, efficiency 82.6%, not at the roofline\n"),
        "{text}"
    );
    assert!(
        text.contains("  dram__bytes_read.sum = 134225920\n"),
        "{text}"
    );
    assert_eq!(
        node.wrapper_runs()[0]["env"]["CUDA_VISIBLE_DEVICES"],
        "GPU-bbbbbbbb-0000-0000-0000-000000000000",
        "--gpus 1 pins device 1"
    );
}

#[test]
fn a_profile_that_finds_no_kernel_exits_1_with_the_reason() {
    let node = Node::new(Vendor::Nvidia);
    let output = node.profile(&[], &[("FAKE_NCU_MODE", "no_kernels_profiled")]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let report = json(&output);
    assert_eq!(report["ok"], false);
    assert_eq!(report["roofline"], Value::Null);
    let error = report["error"].as_str().unwrap();
    assert!(error.contains("ncu profiled no kernel"), "{error}");
}

#[test]
fn profile_json_on_rocm_comes_from_the_configured_rocprofv3() {
    let node = Node::new(Vendor::Rocm);
    let output = node.profile(&["--gpus", "2"], &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let report = json(&output);
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(report["platform"], "rocm");
    assert_eq!(report["device"], 2);
    assert_eq!(report["kernels"], serde_json::json!(["matvec_kernel"]));
    assert!(
        close(&report["duration_ms"], 1.2),
        "the measured call's dispatch: {report}"
    );
    assert!(close(&report["counters"]["FETCH_SIZE"], 4194304.0));
    assert!(
        report["counters"].get("TCC_EA0_RDREQ_sum").is_some(),
        "gfx942's EA spelling"
    );
    assert_eq!(report["roofline"]["bottleneck"], "memory");
    let passes = report["passes"].as_array().unwrap();
    assert_eq!(
        passes[0]["counters"],
        serde_json::json!([]),
        "the timing pass first"
    );
    assert!(
        passes.len() >= 7,
        "timing and six counter groups: {passes:?}"
    );
    assert_eq!(
        node.wrapper_runs()[0]["env"]["HIP_VISIBLE_DEVICES"],
        "2",
        "the HIP id"
    );
    assert_eq!(node.kernel_files(), KERNEL_FILES);
}

#[test]
fn a_hung_rocprofv3_pass_is_killed_within_its_deadline_and_reported() {
    let node = Node::new(Vendor::Rocm);
    let pids_file = node.path("rocprof-pids");
    let deadline = Duration::from_secs(2);
    let started = Instant::now();
    let output = node.profile(
        &["--gpus", "0", "--pass-timeout", "2"],
        &[
            ("FAKE_ROCPROF_MODE", "hang"),
            ("FAKE_ROCPROF_PIDS_FILE", pids_file.to_str().unwrap()),
        ],
    );
    let took = started.elapsed();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let report = json(&output);
    assert_eq!(report["ok"], false);
    let error = report["error"].as_str().unwrap();
    assert!(
        error.contains("rocprofv3 timing pass killed after"),
        "{error}"
    );
    let passes = report["passes"].as_array().unwrap();
    assert_eq!(passes.len(), 1, "{passes:?}");
    assert_eq!(passes[0]["killed"], true);
    let grace = Duration::from_secs_f64(GRACE_S);
    let seconds = passes[0]["seconds"].as_f64().unwrap();
    assert!(
        seconds >= deadline.as_secs_f64() && seconds < (deadline + grace + MARGIN).as_secs_f64(),
        "{seconds}"
    );
    assert!(
        took < deadline + grace + MARGIN + Duration::from_secs(10),
        "{took:?}"
    );
    let pids: Vec<i32> = std::fs::read_to_string(&pids_file)
        .unwrap()
        .lines()
        .map(|line| line.parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 2, "the fake and its grandchild");
    for pid in pids {
        assert!(!is_running(pid), "process {pid} survived");
    }
}

/// With `--json` stdout carries only the error's JSON object (issue 10).
fn assert_json_error(output: &Output, message: &str) {
    assert_eq!(output.status.code(), Some(2), "{}", stderr(output));
    let error = json(output);
    assert_eq!(
        (&error["type"], &error["exit_code"]),
        (&"error".into(), &2.into())
    );
    assert!(
        error["message"].as_str().unwrap().contains(message),
        "{error}"
    );
    assert!(stderr(output).contains(message), "{}", stderr(output));
}

#[test]
fn profile_usage_errors_exit_2_with_only_the_json_error_on_stdout() {
    let node = Node::new(Vendor::Nvidia);
    let cases: [(&[&str], &str); 5] = [
        (&["--gpus", "0,1"], "--gpus takes one id, not 0,1"),
        (
            &["--pass-timeout", "0"],
            "--pass-timeout 0: expected a positive number of seconds, at most 604800 s (7 days)",
        ),
        // Issue 10: these used to panic in Duration::from_secs_f64 (exit 101) with the profile
        // folder made.
        (
            &["--pass-timeout", "1e300"],
            "--pass-timeout 1e300: expected a positive number of seconds, at most 604800 s (7 days)",
        ),
        (
            &["--timeout", "1e300"],
            "--timeout 1e300: expected a positive number of seconds",
        ),
        (&["--kernel", "absent.py"], "failed to read absent.py"),
    ];
    for (extra, message) in cases {
        let output = node.profile(extra, &[]);
        assert_json_error(&output, message);
    }
    let noop = node.kactors(
        &[
            "profile",
            "--strategy",
            "dry",
            "--kernel-dir",
            "kernel",
            "--json",
        ],
        &[],
    );
    assert_json_error(&noop, "the noop platform has no profiler");
    assert!(
        !node.path("runs").exists(),
        "no folder for a profile that never ran"
    );
}

/// Issue 10: `kactors profile | head -0` ends quietly, with the profile's own exit code.
#[test]
fn profile_with_a_closed_stdout_is_not_a_panic() {
    let node = Node::new(Vendor::Nvidia);
    for extra in [&["--json"][..], &[]] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let output = node
            .profile_command(extra, &[])
            .stdout(writer)
            .output()
            .unwrap();
        assert!(!stderr(&output).contains("panicked"), "{}", stderr(&output));
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    }
}

/// Issue 22: without a GPU, check still asks Python, torch, triton, the profiler and the
/// sandbox, and says what it could not check; in JSON the devices line's fix is a fix.
#[test]
fn check_without_a_gpu_checks_what_needs_none_and_says_what_it_could_not() {
    let node = Node::new(Vendor::Nvidia);
    std::fs::remove_file(node.path("bin/nvidia-smi")).unwrap();
    let output = node.check(&[], &[]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(2), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[1]
            .starts_with("FAIL devices: NVIDIA platform was requested but no devices are visible")
            && lines[1]
                .contains("not checked without one: each device as torch sees it under its pin"),
        "{text}"
    );
    for start in [
        "ok python ",
        "ok torch 2.11.0+cu130 imports",
        "ok triton 3.6.0 imports",
        "ok profiler ncu ",
        "ok sandbox: off",
        "ok kernel directory kernel",
    ] {
        assert!(
            lines.iter().any(|line| line.starts_with(start)),
            "no {start:?} in:\n{text}"
        );
    }
    let json: Value = serde_json::from_str(&stdout(&node.check(&["--json"], &[]))).unwrap();
    let devices = &json["checks"][1];
    assert_eq!(devices["ok"], false);
    assert!(
        devices["fix"]
            .as_str()
            .unwrap()
            .starts_with("make a GPU visible"),
        "{devices}"
    );
}

#[test]
fn check_is_all_ok_against_a_working_node() {
    let node = Node::new(Vendor::Nvidia);
    let output = node.check(&[], &[]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{text}{}", stderr(&output));
    let lines: Vec<&str> = text.lines().collect();
    let expected_starts = [
        format!("ok configuration: strategy fake from {}", node.path("fake.yaml").display()),
        "ok python ".to_string(),
        "ok torch 2.11.0+cu130 imports (CUDA 13.0)".to_string(),
        "ok triton 3.6.0 imports".to_string(),
        "ok device 0 visible to torch under CUDA_VISIBLE_DEVICES=GPU-aaaaaaaa-0000-0000-0000-000000000000: NVIDIA H200 (GPU-aaaaaaaa-0000-0000-0000-000000000000)".to_string(),
        "ok device 1 visible to torch under CUDA_VISIBLE_DEVICES=GPU-bbbbbbbb".to_string(),
        format!(
            "ok profiler ncu {}: Nsight Compute 2025.3.1.0 (build 36398880) (public-release); ",
            fixtures().join("nvidia/fake-ncu").display()
        ),
        "ok sandbox: off: candidate code runs with your rights".to_string(),
        "ok kernel directory kernel: input.py defines kernel_function".to_string(),
        "ok kernel/problem.py imports: Model, get_inputs and get_init_inputs are callable"
            .to_string(),
    ];
    assert_eq!(lines.len(), expected_starts.len(), "{text}");
    for (line, start) in lines.iter().zip(&expected_starts) {
        assert!(
            line.starts_with(start.as_str()),
            "{line:?} should start with {start:?}"
        );
    }
    assert!(
        lines[1].starts_with(&format!(
            "ok python {}: Python 3.",
            fixtures().join("standin-python").display()
        )),
        "{}",
        lines[1]
    );
    assert_eq!(
        node.kernel_files(),
        KERNEL_FILES,
        "no __pycache__ in the kernel directory"
    );
}

#[test]
fn check_without_torch_fails_with_the_fix_and_exit_2() {
    let node = Node::new(Vendor::Nvidia);
    let output = node.check(&["--json"], &[("STANDIN_TORCH", "missing")]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let report = json(&output);
    assert_eq!(report["ok"], false);
    let checks = report["checks"].as_array().unwrap();
    let failed: Vec<&Value> = checks.iter().filter(|check| check["ok"] == false).collect();
    assert_eq!(failed.len(), 1, "{checks:?}");
    assert_eq!(failed[0]["what"], "torch imports");
    let fix = failed[0]["fix"].as_str().unwrap();
    assert!(
        fix.starts_with(
            "ModuleNotFoundError: No module named 'torch'; install a CUDA build of torch"
        ),
        "{fix}"
    );
    assert!(
        checks
            .iter()
            .all(|check| !check["what"].as_str().unwrap().starts_with("device ")),
        "no device line repeats the torch failure: {checks:?}"
    );
    for check in checks.iter().filter(|check| check["ok"] == true) {
        assert_eq!(check["fix"], Value::Null);
    }
}

#[test]
fn check_names_a_device_torch_does_not_see_under_its_pin() {
    let node = Node::new(Vendor::Nvidia);
    for (mode, reason) in [
        (
            "no_gpu",
            "torch sees 0 devices, where the pin leaves exactly one",
        ),
        (
            "other_gpu",
            "torch's device has UUID ffffffff-ffff-ffff-ffff-ffffffffffff",
        ),
    ] {
        let output = node.check(&["--gpus", "1"], &[("STANDIN_TORCH", mode)]);
        let text = stdout(&output);
        assert_eq!(output.status.code(), Some(2), "{text}");
        let failed: Vec<&str> = text
            .lines()
            .filter(|line| line.starts_with("FAIL"))
            .collect();
        assert_eq!(failed.len(), 1, "{text}");
        assert!(
            failed[0].starts_with(
                "FAIL device 1 visible to torch under CUDA_VISIBLE_DEVICES=GPU-bbbbbbbb-0000-0000-0000-000000000000: "
            ),
            "{}",
            failed[0]
        );
        assert!(failed[0].contains(reason), "{}", failed[0]);
    }
}

#[test]
fn check_on_rocm_reads_rocprofv3_and_its_counter_list() {
    let node = Node::new(Vendor::Rocm);
    let output = node.check(&["--gpus", "1"], &[("STANDIN_TORCH_BUILD", "rocm")]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{text}{}", stderr(&output));
    for expected in [
        "ok torch 2.11.0+rocm7.1 imports (HIP 7.1.25424)\n",
        "ok device 1 visible to torch under HIP_VISIBLE_DEVICES=1 -CUDA_VISIBLE_DEVICES -ROCR_VISIBLE_DEVICES: AMD Instinct MI300X",
        &format!(
            "ok profiler rocprofv3 {}: version 1.3.5\n",
            fixtures().join("rocm/fake-rocprofv3").display()
        ),
        "ok rocprofv3 lists device 1's counters: all 7 counter passes kactors makes are listed\n",
    ] {
        assert!(text.contains(expected), "{expected:?} in\n{text}");
    }

    let old = node.check(
        &["--gpus", "1"],
        &[
            ("STANDIN_TORCH_BUILD", "cuda"),
            ("FAKE_ROCPROF_HELP", "old"),
        ],
    );
    let text = stdout(&old);
    assert_eq!(old.status.code(), Some(2), "{text}");
    assert!(
        text.contains("FAIL torch 2.11.0+cu130 imports: it is not a ROCm build"),
        "{text}"
    );
    assert!(text.contains(": version unknown; warning: "), "{text}");
    assert!(
        text.contains("warning: rocprofv3 has no --pmc option"),
        "the help text's warnings: {text}"
    );
}

#[test]
fn check_on_noop_needs_no_python() {
    let node = Node::new(Vendor::Nvidia);
    let output = node.kactors(
        &[
            "check",
            "--strategy",
            "dry",
            "--kernel-dir",
            "kernel",
            "--python",
            "/nowhere/python",
        ],
        &[],
    );
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[0].starts_with("ok configuration: strategy dry"));
    assert!(lines[1].starts_with("ok kernel directory kernel: "));

    let unknown = node.kactors(&["check", "--strategy", "nope"], &[]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(
        stdout(&unknown).starts_with("FAIL configuration of strategy nope: "),
        "{}",
        stdout(&unknown)
    );

    std::fs::remove_file(node.path("kernel/problem.py")).unwrap();
    let output = node.kactors(
        &["check", "--strategy", "dry", "--kernel-dir", "kernel"],
        &[],
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stdout(&output).contains("FAIL kernel directory kernel: failed to read kernel/problem.py"),
        "{}",
        stdout(&output)
    );
}

#[test]
fn check_without_the_python_says_how_to_name_one() {
    let node = Node::new(Vendor::Nvidia);
    let output = node.kactors(
        &[
            "check",
            "--strategy",
            "fake",
            "--python",
            "/nowhere/python3",
        ],
        &[],
    );
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(2), "{text}");
    let python_line = text
        .lines()
        .find(|line| line.starts_with("FAIL python /nowhere/python3: "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(python_line.contains("--python"), "{python_line}");
    assert!(
        text.lines()
            .any(|line| line.starts_with("ok profiler ncu ")),
        "the profiler is checked all the same: {text}"
    );
}
