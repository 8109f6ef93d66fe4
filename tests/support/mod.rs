//! Helpers the integration tests share: fixture paths, fake executables, process checks.
// Each test binary compiles this module on its own and uses some of it; an `expect` would be
// unfulfilled in the binaries that use all of it.
#![allow(dead_code)]

pub mod journal;
pub mod llm_server;
pub mod runs;
pub mod slurm;
pub mod slurm_run;
pub mod standin_node;

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

/// A kernel directory like the matvec example's, with `count` distinct replay candidates.
pub fn kernel_with_candidates(dir: &Path, count: usize) -> PathBuf {
    let kernel = dir.join("kernel");
    std::fs::create_dir_all(kernel.join("candidates")).unwrap();
    for file in ["input.py", "problem.py", "test.py"] {
        std::fs::copy(example("optimize_01_matvec").join(file), kernel.join(file)).unwrap();
    }
    for k in 0..count {
        let source = format!("def kernel_function(A, B):\n    return (A @ B) * {k} / {k}\n");
        std::fs::write(kernel.join("candidates").join(format!("{k:04}.py")), source).unwrap();
    }
    kernel
}

/// A temporary folder with a kernel directory of 40 distinct replay candidates
/// (`kernel/`) and the strategy `NAME.yaml` holding `yaml`, for runs with `--config-dir .`.
pub fn workspace_with_candidates(name: &str, yaml: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    kernel_with_candidates(dir.path(), 40);
    std::fs::write(dir.path().join(format!("{name}.yaml")), yaml).unwrap();
    dir
}

/// A kernel that verifies on noop: the simulated verdict, a function of the text, passes it
/// (`tag` makes each distinct, in code rather than a comment, which duplicates ignore).
pub fn passing_on_noop(tag: &str) -> String {
    (0..)
        .map(|salt| {
            format!("def kernel_function(A, B):\n    tag = \"{tag} {salt}\"\n    return A @ B\n")
        })
        .find(|text| {
            matches!(
                kactors::noop::simulate(&actors::model::KernelSource::new(text.as_str())).0,
                actors::model::Verdict::Passed { .. }
            )
        })
        .unwrap()
}

/// A kernel noop refuses: it defines no `kernel_function`.
pub fn failing_on_noop(tag: &str) -> String {
    format!("def not_the_kernel(A, B):\n    tag = \"{tag}\"\n    return A\n")
}

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Writes an executable script: a fake tool or a shim on a test's PATH.
pub fn write_executable(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
}

/// A fake nvidia-smi at `path`: the CSV header kactors' listing query names, then what the
/// shell `gpu_lines` prints, one line per GPU (`index, name, uuid, pci.bus_id`).
pub fn write_nvidia_smi(path: &Path, gpu_lines: &str) {
    write_executable(
        path,
        &format!("#!/bin/sh\necho 'index, name, uuid, pci.bus_id'\n{gpu_lines}"),
    );
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

/// Sends `signal` to a child, as a user or a scheduler would.
pub fn send_signal(child: &std::process::Child, signal: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal).unwrap();
}

/// The `--python` of the stand-in tests: it plays the evaluator (tests/fixtures/
/// standin_evaluator.py), the profiled wrapper and Python itself, without torch or a GPU.
pub fn standin_python() -> PathBuf {
    fixtures().join("standin-python")
}

/// Waits up to `limit` for `pid` to end: a process killed on another node, or by its own
/// parent-death signal, ends a moment after whoever killed it says so.
pub fn gone_within(pid: i32, limit: std::time::Duration) -> bool {
    let give_up = std::time::Instant::now() + limit;
    while is_running(pid) {
        if std::time::Instant::now() >= give_up {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    true
}
