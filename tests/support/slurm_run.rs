//! A kactors run on the Slurm test cluster with the stand-in evaluator: a fake nvidia-smi
//! that lists four GPUs whose UUIDs name the node it runs on (two runs in one allocation lock
//! GPUs by UUID, and both test nodes share this machine's /tmp), the stand-in Python, a kernel
//! directory whose replay candidates say how each behaves, and a strategy with launcher slurm.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use super::write_executable;

pub struct SlurmRun {
    pub dir: tempfile::TempDir,
}

impl SlurmRun {
    /// A kernel directory with `candidates` (name, source) and a strategy of `extra` keys.
    pub fn new(candidates: &[(String, String)], extra: &str) -> SlurmRun {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let bin = root.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        write_executable(
            &bin.join("nvidia-smi"),
            "#!/bin/sh\nnode=${SLURMD_NODENAME:-head}\nfor i in 0 1 2 3; do\n  echo \"$i, NVIDIA H200, GPU-$node-0000-0000-0000-00000000000$i, 00000000:00:0$i.0\"\ndone\n",
        );
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        write_executable(
            &bin.join("python-shim"),
            &format!(
                "#!/bin/sh\ncase \"$1\" in\n  *evaluator.py) shift; exec python3 '{}' \"$@\";;\n  *) exec '{}' \"$@\";;\nesac\n",
                fixtures.join("standin_evaluator.py").display(),
                fixtures.join("standin-python").display()
            ),
        );
        let kernel = root.join("kernel");
        std::fs::create_dir_all(kernel.join("candidates")).unwrap();
        std::fs::write(
            kernel.join("input.py"),
            "# standin: pass time_ms=2.0\ndef kernel_function(x):\n    return x\n",
        )
        .unwrap();
        std::fs::write(
            kernel.join("problem.py"),
            "class Model:\n    pass\ndef get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n",
        )
        .unwrap();
        std::fs::write(kernel.join("test.py"), "").unwrap();
        for (name, text) in candidates {
            std::fs::write(kernel.join("candidates").join(name), text).unwrap();
        }
        std::fs::write(
            root.join("standin.yaml"),
            format!(
                "platform: nvidia\nprovider: replay\nlauncher: slurm\ntest_timeout_s: 5\nkill_grace_s: 0.5\nagent_timeout_s: 3\nmax_refinements: 0\n{extra}"
            ),
        )
        .unwrap();
        SlurmRun { dir }
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// `kactors run` in allocation `job`, with the fake tools first on PATH.
    pub fn command(&self, job: &str, subcommand: &str) -> Command {
        let root = self.root();
        let mut command = Command::new(env!("CARGO_BIN_EXE_kactors"));
        command
            .current_dir(root)
            .arg(subcommand)
            .args(["--strategy", "standin", "--config-dir", "."])
            .env(
                "PATH",
                format!(
                    "{}:{}",
                    root.join("bin").display(),
                    std::env::var("PATH").unwrap_or_default()
                ),
            )
            .env("SLURM_JOB_ID", job)
            .env("KACTORS_LOCK_DIR", root.join("locks"))
            .env("ANTHROPIC_API_KEY", "sk-ant-never-in-a-child")
            .env_remove("CUDA_VISIBLE_DEVICES")
            .env_remove("KACTORS_CONFIG_DIR")
            .env_remove("RUST_LOG");
        if subcommand == "run" {
            command
                .args(["--kernel-dir", "kernel", "--json"])
                .arg("--python")
                .arg(root.join("bin/python-shim"));
        }
        command
    }

    /// The run directories, oldest first.
    pub fn runs(&self) -> Vec<PathBuf> {
        let mut runs: Vec<PathBuf> = std::fs::read_dir(self.root().join("runs"))
            .map(|entries| entries.map(|entry| entry.unwrap().path()).collect())
            .unwrap_or_default();
        runs.retain(|path| path.join("journal.jsonl").is_file());
        runs.sort();
        runs
    }
}

pub fn journal(run: &Path) -> Vec<Value> {
    std::fs::read_to_string(run.join("journal.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// `count` candidates that pass, each with its own code and time.
pub fn passing(count: usize) -> Vec<(String, String)> {
    (1..=count)
        .map(|i| {
            (
                format!("{i:02}.py"),
                format!(
                    "# standin: pass time_ms={}\ndef kernel_function(x):\n    return x * {i}\n",
                    1.0 + i as f64 / 100.0
                ),
            )
        })
        .collect()
}
