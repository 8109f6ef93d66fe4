//! Issue 14: the node agent (`kactors agent`) on its own, without Slurm: started as srun would
//! start it (Slurm's step variables in its environment), spoken to over stdin and stdout, its
//! evaluators the stand-in Python evaluator behind a fake nvidia-smi.

mod support;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::slurm_run::write_node_nvidia_smi;
use support::standin_node::standin_kernel;
use support::{gone_within, kactors, standin_python};

struct Node {
    dir: tempfile::TempDir,
}

struct Agent {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Node {
    fn new() -> Node {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let bin = root.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        write_node_nvidia_smi(&bin);
        standin_kernel(root, &[]);
        std::fs::write(
            root.join("standin.yaml"),
            // The tests read the pids the stand-in writes into the node's folder: the sandbox
            // would keep it from writing there, and its pids would name nothing out here.
            "platform: nvidia\nprovider: replay\nkill_grace_s: 0.3\nsandbox: off\n",
        )
        .unwrap();
        // The run directory as the head prepares it: its tools (the stand-in needs only their
        // names) and a candidate.
        let tools = root.join("run/tools");
        std::fs::create_dir_all(&tools).unwrap();
        for tool in ["evaluator.py", "kernel_call.py", "aten_allowlist.yaml"] {
            std::fs::write(tools.join(tool), "").unwrap();
        }
        std::fs::write(root.join("run/check"), "token-7\n").unwrap();
        Node { dir }
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn candidate(&self, id: u64, source: &str) -> PathBuf {
        let folder = self.root().join(format!("run/candidates/{id}"));
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join("kernel.py"), source).unwrap();
        folder
    }

    /// The agent of node n7, step 5.3, holding Slurm's GPUs 1 and 2.
    fn agent(&self) -> Agent {
        let root = self.root();
        let mut child = kactors(root)
            .args(["agent", "--strategy", "standin", "--config-dir", "."])
            .arg("--kernel-dir")
            .arg(root.join("kernel"))
            .arg("--python")
            .arg(standin_python())
            .arg("--check-file")
            .arg(root.join("run/check"))
            .args(["--check-token", "token-7"])
            .env(
                "PATH",
                format!("{}:/usr/bin:/bin", root.join("bin").display()),
            )
            .env("SLURMD_NODENAME", "n7")
            .env("SLURM_JOB_ID", "5")
            .env("SLURM_STEP_ID", "3")
            .env("SLURM_STEP_GPUS", "1,2")
            .env("CUDA_VISIBLE_DEVICES", "1,2")
            .env("KACTORS_LOCK_DIR", root.join("locks"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(root.join("agent.log")).unwrap())
            .spawn()
            .unwrap();
        Agent {
            stdin: child.stdin.take(),
            stdout: BufReader::new(child.stdout.take().unwrap()),
            child,
        }
    }
}

impl Agent {
    fn send(&mut self, request: Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{request}").unwrap();
        stdin.flush().unwrap();
    }

    fn receive(&mut self) -> Value {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|_| panic!("not a message: {line:?}"))
    }

    /// Sends a request and reads its reply (nothing else runs meanwhile).
    fn ask(&mut self, request: Value) -> Value {
        self.send(request);
        self.receive()
    }

    fn start(&mut self, node: &Node) {
        let started = self.ask(json!({
            "op": "start", "id": 1, "run_dir": node.root().join("run"),
            "devices": [{"index": 1, "device": 4}, {"index": 2, "device": 5}],
        }));
        assert_eq!(started["outcome"]["kind"], "started", "{started}");
    }

    fn wait(&mut self, limit: Duration) -> std::process::ExitStatus {
        let give_up = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < give_up,
                "the agent did not end within {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Node {
    /// A started agent whose device 4 is verifying a candidate that hangs, and the pid of the
    /// evaluator child that hangs.
    fn agent_with_a_hung_request(&self) -> (Agent, i32) {
        let mut agent = self.agent();
        agent.receive();
        agent.start(self);
        let pidfile = self.root().join("hung.pid");
        let folder = self.candidate(
            1,
            &format!(
                "# standin: hang pidfile={}\ndef kernel_function(x):\n    return x\n",
                pidfile.display()
            ),
        );
        agent.send(json!({"op": "verify", "id": 2, "device": 4, "job": job(&folder, 600.0)}));
        let hung = wait_for_file(&pidfile).trim().parse().unwrap();
        (agent, hung)
    }
}

fn job(folder: &Path, deadline_s: f64) -> Value {
    json!({"candidate": 1, "source": "", "folder": folder, "deadline_s": deadline_s})
}

fn wait_for_file(path: &Path) -> String {
    let give_up = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && !text.is_empty()
        {
            return text;
        }
        assert!(Instant::now() < give_up, "{} never came", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn an_agent_says_hello_with_its_nodes_gpus_and_checks_then_serves_its_devices() {
    let node = Node::new();
    let mut agent = node.agent();
    let hello = agent.receive();
    assert_eq!(hello["type"], "hello", "{hello}");
    assert_eq!(
        (hello["node"].as_str(), hello["step"].as_str()),
        (Some("n7"), Some("5.3"))
    );
    let devices: Vec<(u64, &str)> = hello["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|device| {
            (
                device["index"].as_u64().unwrap(),
                device["uuid"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        devices,
        [
            (1, "GPU-n7-0000-0000-0000-000000000001"),
            (2, "GPU-n7-0000-0000-0000-000000000002")
        ]
    );
    let checks: Vec<&str> = hello["preflight"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|line| line["ok"] == true)
        .map(|line| line["what"].as_str().unwrap())
        .collect();
    assert!(
        checks
            .iter()
            .any(|what| what.starts_with("run directory")
                && what.ends_with("is shared with node n7")),
        "{checks:?}"
    );
    assert!(
        checks.iter().any(|what| what.contains(
            "visible to torch under CUDA_VISIBLE_DEVICES=GPU-n7-0000-0000-0000-000000000002"
        )),
        "{checks:?}"
    );
    agent.start(&node);
    assert_eq!(
        agent.ask(json!({"op": "ping", "id": 2})),
        json!({"type": "pong", "id": 2})
    );
    let folder = node.candidate(
        1,
        "# standin: pass time_ms=1.5\ndef kernel_function(x):\n    return x\n",
    );
    let verified =
        agent.ask(json!({"op": "verify", "id": 3, "device": 5, "job": job(&folder, 10.0)}));
    assert_eq!(verified["outcome"]["kind"], "verified", "{verified}");
    assert_eq!(verified["outcome"]["verdict"]["verdict"], "passed");
    // The evaluator of run device 5 is pinned to the node's GPU 2, and says where it runs; the
    // node's H200 gives the floor its timings are held to (issue 18): the stand-in's 4 GiB of
    // inputs at 4.8 TB/s.
    assert_eq!(
        verified["started"]["ready"]["device"]["uuid"],
        "GPU-n7-0000-0000-0000-000000000002"
    );
    assert_eq!(verified["started"]["ready"]["node"], "n7");
    let floor = &verified["started"]["floor"]["known"];
    assert_eq!(floor["device"], "NVIDIA H200", "{verified}");
    assert!((floor["floor_ms"].as_f64().unwrap() - 0.8948).abs() < 1e-3);
    assert!(node.root().join("run/devices/5/evaluator.log").is_file());
    let timed = agent.ask(json!({"op": "time", "id": 4, "device": 5, "job": job(&folder, 10.0)}));
    assert_eq!(timed["outcome"]["timing"]["median_ms"], 1.5, "{timed}");
    let refused =
        agent.ask(json!({"op": "verify", "id": 5, "device": 9, "job": job(&folder, 10.0)}));
    assert_eq!(refused["outcome"]["kind"], "refused");
    let unreadable = agent.ask(json!({"op": "verify", "id": 6, "device": 5}));
    assert_eq!(unreadable["id"], 6);
    assert_eq!(unreadable["outcome"]["kind"], "refused");
    drop(agent.stdin.take());
    assert!(agent.wait(Duration::from_secs(10)).success());
}

/// Issue 14: the agent ends its children when its stdin closes (the head ended, or died and its
/// srun with it), even an evaluator in the middle of a request.
#[test]
fn closing_the_agents_stdin_ends_its_evaluators_even_mid_request() {
    let node = Node::new();
    let (mut agent, hung) = node.agent_with_a_hung_request();
    drop(agent.stdin.take());
    assert!(agent.wait(Duration::from_secs(10)).success());
    assert!(
        gone_within(hung, Duration::from_secs(5)),
        "the hung evaluator {hung} outlived its agent"
    );
}

/// Issue 14: an agent killed outright (scancel --signal=KILL, the OOM killer) takes its
/// evaluators with it: they die with their parent (PR_SET_PDEATHSIG).
#[test]
fn a_killed_agents_evaluators_die_with_it() {
    let node = Node::new();
    let (mut agent, hung) = node.agent_with_a_hung_request();
    agent.child.kill().unwrap();
    agent.child.wait().unwrap();
    assert!(
        gone_within(hung, Duration::from_secs(5)),
        "the hung evaluator {hung} outlived its agent"
    );
}

/// Issue 14: outside a Slurm step the agent refuses, saying how it is meant to start.
#[test]
fn an_agent_outside_a_slurm_step_refuses_saying_why() {
    let node = Node::new();
    let output = kactors(node.root())
        .args(["agent", "--strategy", "standin", "--config-dir", "."])
        .args(["--kernel-dir", "kernel"])
        .env_remove("SLURMD_NODENAME")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let refused: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(refused["type"], "refused");
    assert!(
        refused["reason"]
            .as_str()
            .unwrap()
            .starts_with("SLURMD_NODENAME is not set: `kactors agent` runs as a Slurm step"),
        "{refused}"
    );
}
