//! A kactors run on the Slurm test cluster with the stand-in evaluator: a fake nvidia-smi
//! that lists four GPUs whose UUIDs name the node it runs on (two runs in one allocation lock
//! GPUs by UUID, and both test nodes share this machine's /tmp), the stand-in Python, a kernel
//! directory whose replay candidates say how each behaves, and a strategy with launcher slurm.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::standin_node::standin_kernel;
use super::{standin_python, write_nvidia_smi};

pub struct SlurmRun {
    pub dir: tempfile::TempDir,
}

/// A fake nvidia-smi in `bin` that lists four H200s on whichever node runs it, each UUID
/// naming the node (Slurm's SLURMD_NODENAME in a step): `GPU-n2-0000-0000-0000-000000000001`.
pub fn write_node_nvidia_smi(bin: &Path) {
    write_nvidia_smi(
        &bin.join("nvidia-smi"),
        "node=${SLURMD_NODENAME:-head}\nfor i in 0 1 2 3; do\n  echo \"$i, NVIDIA H200, GPU-$node-0000-0000-0000-00000000000$i, 00000000:00:0$i.0\"\ndone\n",
    );
}

impl SlurmRun {
    /// A kernel directory with `candidates` (name, source) and a strategy of `extra` keys.
    pub fn new(candidates: &[(String, String)], extra: &str) -> SlurmRun {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let bin = root.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        write_node_nvidia_smi(&bin);
        let candidates: Vec<(&str, &str)> = candidates
            .iter()
            .map(|(name, text)| (name.as_str(), text.as_str()))
            .collect();
        standin_kernel(root, &candidates);
        std::fs::write(
            root.join("standin.yaml"),
            format!(
                "platform: nvidia\nprovider: replay\nlauncher: slurm\nkill_grace_s: 0.5\nmax_refinements: 0\n{extra}"
            ),
        )
        .unwrap();
        SlurmRun { dir }
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// `kactors SUBCOMMAND --strategy standin` in allocation `job` (`run` with the kernel
    /// directory, JSON progress and the stand-in Python), with the fake tools first on PATH.
    pub fn command(&self, job: &str, subcommand: &str) -> Command {
        let mut command = self.kactors(job);
        command
            .arg(subcommand)
            .args(["--strategy", "standin", "--config-dir", "."]);
        if subcommand == "run" {
            command
                .args(["--kernel-dir", "kernel", "--json"])
                .arg("--python")
                .arg(standin_python());
        }
        command
    }

    /// kactors in this test's folder and allocation `job`, with the fake tools first on PATH.
    pub fn kactors(&self, job: &str) -> Command {
        let root = self.root();
        let mut command = super::kactors(root);
        command
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
            .env_remove("CUDA_VISIBLE_DEVICES");
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

impl SlurmRun {
    /// `kactors run` started in the background, its stdout and stderr in files of the test's
    /// folder (`stdout`, `stderr`).
    pub fn spawn(&self, job: &str) -> Child {
        let out = std::fs::File::create(self.root().join("stdout")).unwrap();
        let err = std::fs::File::create(self.root().join("stderr")).unwrap();
        self.command(job, "run")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap()
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.root().join("stderr")).unwrap_or_default()
    }

    /// Waits up to `limit` for the (only) run's journal to hold a record `wanted` accepts.
    pub fn wait_for_record(&self, limit: Duration, wanted: impl Fn(&Value) -> bool) -> Value {
        let give_up = Instant::now() + limit;
        loop {
            if let Some(run) = self.runs().first() {
                let text = std::fs::read_to_string(run.join("journal.jsonl")).unwrap_or_default();
                // The last line may be half written.
                if let Some(found) = text
                    .lines()
                    .filter_map(|line| serde_json::from_str::<Value>(line).ok())
                    .find(|record| wanted(record))
                {
                    return found;
                }
            }
            assert!(
                Instant::now() < give_up,
                "no such record within {limit:?}; stderr:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Waits for `child` up to `limit`, killing it if it takes longer.
pub fn wait_with_limit(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let give_up = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() >= give_up {
            let _ = child.kill();
            panic!("kactors did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A live process: its pid, command line (NULs as spaces) and parent.
#[derive(Clone, Debug)]
pub struct Process {
    pub pid: i32,
    pub parent: i32,
    pub cmdline: String,
}

/// Every live (not zombie) process of this machine; both test nodes are on it.
pub fn processes() -> Vec<Process> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| super::is_running(*pid))
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let parent = stat[stat.rfind(')')? + 1..]
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            Some(Process {
                pid,
                parent,
                cmdline,
            })
        })
        .collect()
}

/// The processes whose command line names `dir` (srun, the agents and the evaluators all carry
/// the kernel directory or the run directory in theirs).
pub fn processes_mentioning(dir: &Path) -> Vec<Process> {
    let dir = dir.display().to_string();
    processes()
        .into_iter()
        .filter(|process| process.cmdline.contains(&dir))
        .collect()
}

/// Waits up to `limit` for no process to name `dir`; answers those left.
pub fn none_left_within(dir: &Path, limit: Duration) -> Vec<Process> {
    let give_up = Instant::now() + limit;
    loop {
        let left = processes_mentioning(dir);
        if left.is_empty() || Instant::now() >= give_up {
            return left;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The node agent of `node` that serves the run in `dir` (its environment names the node).
pub fn agent_of(dir: &Path, node: &str) -> Process {
    processes_mentioning(dir)
        .into_iter()
        .find(|process| {
            process.cmdline.contains(" agent ")
                && !process.cmdline.starts_with("srun")
                && std::fs::read(format!("/proc/{}/environ", process.pid))
                    .map(|environ| {
                        environ
                            .split(|byte| *byte == 0)
                            .any(|var| var == format!("SLURMD_NODENAME={node}").as_bytes())
                    })
                    .unwrap_or(false)
        })
        .unwrap_or_else(|| panic!("no agent of node {node} runs for {}", dir.display()))
}

/// `pid` and every process descended from it.
pub fn tree_of(pid: i32) -> Vec<i32> {
    let all = processes();
    let mut tree = vec![pid];
    let mut at = 0;
    while at < tree.len() {
        let parent = tree[at];
        tree.extend(all.iter().filter(|p| p.parent == parent).map(|p| p.pid));
        at += 1;
    }
    tree
}

/// A node dies as far as a step can tell: its slurmstepd for `step` and every process of the
/// step, SIGKILLed at once.
pub fn kill_step_on_its_node(step: &str) {
    let title = format!("slurmstepd: [{step}]");
    let stepd = processes()
        .into_iter()
        .find(|process| process.cmdline.starts_with(&title))
        .unwrap_or_else(|| panic!("no {title}"));
    for pid in tree_of(stepd.pid) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}
