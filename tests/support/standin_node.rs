//! A node with two NVIDIA GPUs and no GPU: a fake nvidia-smi lists two H200s and `--python`
//! is the stand-in Python, which runs the stand-in evaluator (tests/fixtures/standin_evaluator.py),
//! which speaks the real protocol and decides each candidate's fate by a `# standin:` marker in
//! its source. Its children are real processes, as on a GPU node.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::{standin_python, write_nvidia_smi};

/// The two GPUs' lines as the fake nvidia-smi prints them.
const TWO_H200: &str = "echo '0, NVIDIA H200, GPU-aaaaaaaa-0000-0000-0000-000000000000, 00000000:00:06.0'\necho '1, NVIDIA H200, GPU-bbbbbbbb-0000-0000-0000-000000000000, 00000000:00:07.0'\n";

/// `root`/kernel: an initial kernel that passes on the stand-in in 2 ms, a problem.py, an empty
/// test.py and the replay candidates (file name, source).
pub fn standin_kernel(root: &Path, candidates: &[(&str, &str)]) -> PathBuf {
    let kernel = root.join("kernel");
    std::fs::create_dir_all(kernel.join("candidates")).unwrap();
    std::fs::write(
        kernel.join("input.py"),
        "# standin: pass time_ms=2.0\ndef kernel_function(x):\n    return x\n",
    )
    .unwrap();
    std::fs::write(kernel.join("problem.py"), "class Model:\n    pass\ndef get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n").unwrap();
    std::fs::write(kernel.join("test.py"), "").unwrap();
    for (name, text) in candidates {
        std::fs::write(kernel.join("candidates").join(name), text).unwrap();
    }
    kernel
}

pub struct Node {
    pub dir: tempfile::TempDir,
}

impl Node {
    pub fn new(candidates: &[(&str, &str)]) -> Node {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let bin = root.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        standin_kernel(root, candidates);
        let node = Node { dir };
        node.with_gpus(TWO_H200).with_strategy(
            "platform: nvidia\nprovider: replay\nnum_workers: 2\ntest_timeout_s: 2\nkill_grace_s: 0.3\nmax_rounds: 1\nstrategy_config:\n  num_top_kernels: 2\n  num_bottlenecks: 2\n",
        )
    }

    /// One device and room for eight candidates in one round, none refined: the candidates run
    /// in name order on the same evaluator.
    pub fn on_one_device(self) -> Node {
        self.with_strategy(
            "platform: nvidia\nprovider: replay\nnum_workers: 1\ntest_timeout_s: 5\nkill_grace_s: 0.3\nmax_rounds: 1\nmax_refinements: 0\nmax_inflight: 1\nstrategy_config:\n  num_top_kernels: 2\n  num_bottlenecks: 4\n",
        )
    }

    /// The same strategy with the sandbox off, for a test that reads a pid or a file the
    /// stand-in writes outside its sandbox: a pid inside the sandbox's namespace names nothing
    /// outside it.
    pub fn without_sandbox(self) -> Node {
        let strategy = self.dir.path().join("standin.yaml");
        let yaml = std::fs::read_to_string(&strategy).unwrap();
        std::fs::write(strategy, format!("{yaml}sandbox: off\n")).unwrap();
        self
    }

    /// The strategy `standin` as `yaml` says.
    pub fn with_strategy(self, yaml: &str) -> Node {
        std::fs::write(self.dir.path().join("standin.yaml"), yaml).unwrap();
        self
    }

    /// The GPUs nvidia-smi lists: `lines` is the shell that prints them.
    pub fn with_gpus(self, lines: &str) -> Node {
        write_nvidia_smi(&self.dir.path().join("bin/nvidia-smi"), lines);
        self
    }

    pub fn with_problem(self, text: &str) -> Node {
        std::fs::write(self.dir.path().join("kernel/problem.py"), text).unwrap();
        self
    }

    /// kactors on this node: its PATH, its GPU locks, an API key no child may see.
    pub fn kactors(&self) -> Command {
        let root = self.dir.path();
        let mut command = super::kactors(root);
        command
            .env(
                "PATH",
                format!("{}:/usr/bin:/bin", root.join("bin").display()),
            )
            .env("KACTORS_LOCK_DIR", root.join("locks"))
            .env("ANTHROPIC_API_KEY", "sk-ant-never-in-a-child")
            .env_remove("CUDA_VISIBLE_DEVICES");
        command
    }

    /// `kactors run` with the strategy `standin` on the kernel directory.
    pub fn run_command(&self) -> Command {
        let mut command = self.kactors();
        command.args(Node::arguments("run"));
        command
    }

    /// `kactors <command>`'s arguments for the strategy `standin` on the kernel directory,
    /// with the stand-in Python.
    pub fn arguments(command: &str) -> Vec<std::ffi::OsString> {
        let mut arguments: Vec<std::ffi::OsString> = [
            command,
            "--strategy",
            "standin",
            "--config-dir",
            ".",
            "--kernel-dir",
            "kernel",
            "--python",
        ]
        .map(Into::into)
        .to_vec();
        arguments.push(standin_python().into());
        arguments
    }

    /// Runs to the end; answers the output and the run directory.
    pub fn run(&self) -> (Output, PathBuf) {
        let output = self.run_command().output().unwrap();
        (output, self.run_dir())
    }

    /// The run directory of the node's one run.
    pub fn run_dir(&self) -> PathBuf {
        let runs: Vec<PathBuf> = std::fs::read_dir(self.dir.path().join("runs"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        runs[0].clone()
    }
}
