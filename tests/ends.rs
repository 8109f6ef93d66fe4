//! Issue 24, "Hangs and wrong ends", on the real binary: every way a run ends ends at once with
//! the right exit code and a journal whose last record is `run_finished`; what cannot be
//! resumed or run is refused (exit 2) saying why and what to do; a file that never ends is
//! refused before it is read. Each test guards against a hang with `support::runs::finish`.

mod support;

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use actors::model::{KernelSource, Verdict};
use nix::fcntl::{Flock, FlockArg};
use nix::sys::signal::Signal;
use serde_json::Value;
use support::runs::{
    Running, assert_exit, assert_says, finish, journal, only_run, stderr, wait_for,
};
use support::{kactors, kernel_with_candidates};

/// A dry run on one simulated device: rounds of two candidates, 20 ms evaluations, a short
/// grace for the shutdown.
const NOOP: &str = "platform: noop\nprovider: replay\nnoop_eval_s: 0.02\nnum_workers: 1\n\
                    kill_grace_s: 0.5\nstrategy_config:\n  num_top_kernels: 1\n  num_bottlenecks: 2\n";

/// A source the noop platform's simulated check rejects (`noop::simulate`), numbered `from` on.
fn failing_source(from: usize) -> String {
    (from..)
        .map(|k| format!("def kernel_function(A, B):\n    return (A @ B) * {k} / {k}\n"))
        .find(|text| {
            matches!(
                kactors::noop::simulate(&KernelSource::new(text.as_str())).0,
                Verdict::Failed { .. }
            )
        })
        .unwrap()
}

/// A folder with a kernel directory of `candidates` replay candidates and the strategy `ends`.
struct Workspace {
    dir: tempfile::TempDir,
}

impl Workspace {
    fn new(strategy: &str, candidates: usize) -> Workspace {
        let dir = tempfile::tempdir().unwrap();
        kernel_with_candidates(dir.path(), candidates);
        std::fs::write(dir.path().join("ends.yaml"), strategy).unwrap();
        Workspace { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn kernel(&self) -> PathBuf {
        self.path().join("kernel")
    }

    fn command(&self, subcommand: &str, args: &[&str]) -> Command {
        let mut command = kactors(self.path());
        command
            .args([subcommand, "--strategy", "ends", "--config-dir", "."])
            .args(["--kernel-dir", "kernel"])
            .args(args);
        command
    }

    fn run(&self, args: &[&str]) -> Output {
        finish(self.command("run", args))
    }

    fn resume(&self, run: &Path) -> Output {
        let mut command = kactors(self.path());
        command.arg("resume").arg(run);
        finish(command)
    }

    /// The folder of the workspace's one run.
    fn run_dir(&self) -> PathBuf {
        only_run(self.path())
    }

    fn has_runs(&self) -> bool {
        self.path().join("runs").exists()
    }
}

/// The invariant of every end: the journal's last record is its one `run_finished` (a resumed
/// run has one per process, each followed only by the next `run_resumed`), with `outcome`.
fn assert_ends_with_run_finished(run: &Path, outcome: &str) -> Vec<Value> {
    let records = journal(run);
    let last = records.last().unwrap();
    assert_eq!(last["type"], "run_finished", "the last record: {last}");
    assert_eq!(last["outcome"], outcome, "{last}");
    for (index, record) in records.iter().enumerate() {
        if record["type"] == "run_finished" && index + 1 < records.len() {
            assert_eq!(
                records[index + 1]["type"],
                "run_resumed",
                "a record after run_finished: {}",
                records[index + 1]
            );
        }
    }
    records
}

/// What a run the shutdown ended must not say: a worker it stopped did not die.
fn assert_no_worker_died(run: &Path, output: &Output) {
    let records = journal(run);
    assert!(
        records.iter().all(|record| record["type"] != "worker_died"),
        "a worker_died record"
    );
    assert!(
        !stderr(output).contains("worker died"),
        "{}",
        stderr(output)
    );
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(!report.contains("Worker restarts"), "{report}");
}

fn assert_resume_refused_as_failed(workspace: &Workspace, run: &Path, why: &str) {
    let before = std::fs::read(run.join("journal.jsonl")).unwrap();
    let resumed = workspace.resume(run);
    assert_exit(&resumed, 2);
    assert_says(&resumed, why);
    assert_says(&resumed, "start a new run");
    assert_eq!(
        std::fs::read(run.join("journal.jsonl")).unwrap(),
        before,
        "a refused resume journals nothing"
    );
}

#[test]
fn a_run_whose_initial_kernel_fails_verification_ends_failed_and_is_not_resumed() {
    let workspace = Workspace::new(&format!("{NOOP}max_rounds: 1\n"), 2);
    std::fs::write(workspace.kernel().join("input.py"), failing_source(0)).unwrap();
    let output = workspace.run(&[]);
    assert_exit(&output, 1);
    let run = workspace.run_dir();
    assert_ends_with_run_finished(&run, "failed");
    assert_resume_refused_as_failed(&workspace, &run, "the run failed (");
}

#[test]
fn a_run_whose_first_round_got_no_reply_ends_failed_and_is_not_resumed() {
    let server = support::llm_server::LlmServer::start(64, |_| {
        (
            400,
            r#"{"error": {"message": "no such model", "type": "invalid_request_error"}}"#.into(),
        )
    });
    let strategy = NOOP.replace("provider: replay\n", "")
        + &format!(
            "provider: openai_compatible\nmodel: local-kernel-model\nbase_url: {}\nmax_rounds: 1\n",
            server.base_url
        );
    let workspace = Workspace::new(&strategy, 0);
    let output = workspace.run(&[]);
    assert_exit(&output, 1);
    assert_says(&output, "no LLM request succeeded");
    let run = workspace.run_dir();
    assert_ends_with_run_finished(&run, "failed");
    assert_resume_refused_as_failed(&workspace, &run, "no LLM request succeeded");
}

#[test]
fn a_max_time_shorter_than_what_is_kept_free_is_refused_naming_the_smallest_that_works() {
    let workspace = Workspace::new(NOOP, 2);
    let output = workspace.run(&["--max-time", "3s"]);
    assert_exit(&output, 2);
    // 2 × 0.02 + 1 s for the evaluations, 4 × 0.02 + 1 s for the finale, 0.5 + 2 s to end.
    assert_says(&output, "max_time (3s) is shorter than the 4s 620ms");
    assert_says(&output, "give at least --max-time 5s");
    assert!(!workspace.has_runs(), "nothing was made");
}

#[test]
fn a_run_ended_by_max_time_or_by_ctrl_c_ends_with_run_finished_and_no_worker_died() {
    // Evaluations of 1 s: the limit and the signal find the device's worker busy.
    let slow = NOOP.replace("noop_eval_s: 0.02", "noop_eval_s: 1") + "max_rounds: 50\n";
    let workspace = Workspace::new(&slow, 40);
    let limited = workspace.run(&["--max-time", "14s"]);
    assert_exit(&limited, 0);
    assert_says(&limited, "max_time (14s) reached");
    let run = workspace.run_dir();
    assert_ends_with_run_finished(&run, "completed");
    assert_no_worker_died(&run, &limited);
    std::fs::remove_dir_all(run).unwrap();

    let mut command = workspace.command("run", &[]);
    command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let running = Running::start(&mut command);
    // Candidate 1 on the device, candidate 2 queued for it: the shutdown stops the worker
    // with work in its mailbox.
    let run = wait_for("the first proposal's verification", || {
        let run = std::fs::read_dir(workspace.path().join("runs"))
            .ok()?
            .next()?
            .ok()?
            .path();
        let text = std::fs::read_to_string(run.join("journal.jsonl")).ok()?;
        text.contains(r#""type":"step_started","candidate":1"#)
            .then_some(run)
    });
    running.signal(Signal::SIGINT);
    let interrupted = running.finish();
    assert_exit(&interrupted, 130);
    assert_ends_with_run_finished(&run, "interrupted");
    assert_no_worker_died(&run, &interrupted);
}

#[test]
fn a_run_that_completes_ends_with_run_finished_and_failed_noop_candidates_say_simulated() {
    let workspace = Workspace::new(&format!("{NOOP}max_rounds: 1\n"), 0);
    let candidates = workspace.kernel().join("candidates");
    std::fs::write(candidates.join("01.py"), failing_source(0)).unwrap();
    std::fs::write(candidates.join("02.py"), failing_source(1000)).unwrap();
    let output = workspace.run(&[]);
    assert_exit(&output, 0);
    let records = assert_ends_with_run_finished(&workspace.run_dir(), "completed");
    let rejected: Vec<&Value> = records
        .iter()
        .filter(|record| record["type"] == "candidate_finished" && record["passed"] == false)
        .collect();
    assert_eq!(rejected.len(), 2, "{records:?}");
    for record in rejected {
        assert!(
            record["reason"].as_str().unwrap().contains("(simulated)"),
            "{record}"
        );
        assert_eq!(record["simulated"], true, "{record}");
    }
}

/// A kernel directory whose `name` is a FIFO (no writer ever comes) or a link to /dev/zero.
fn kernel_file_that_never_ends(workspace: &Workspace, name: &str, fifo: bool) {
    let path = workspace.kernel().join(name);
    std::fs::remove_file(&path).unwrap();
    if fifo {
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRWXU).unwrap();
    } else {
        std::os::unix::fs::symlink("/dev/zero", &path).unwrap();
    }
}

#[test]
fn a_kernel_file_that_is_a_fifo_or_dev_zero_is_refused_by_run_and_check_without_a_hang() {
    for (name, fifo, kind) in [
        ("input.py", true, "a FIFO (named pipe)"),
        ("problem.py", false, "a character device"),
        ("test.py", true, "a FIFO (named pipe)"),
    ] {
        let workspace = Workspace::new(&format!("{NOOP}max_rounds: 1\n"), 1);
        kernel_file_that_never_ends(&workspace, name, fifo);
        let said = format!("kernel/{name} is {kind}, not a regular file");
        let run = workspace.run(&[]);
        assert_exit(&run, 2);
        assert_says(&run, &said);
        assert!(!workspace.has_runs());
        let check = finish(workspace.command("check", &[]));
        assert_ne!(check.status.code(), Some(0), "{}", stderr(&check));
        assert!(
            String::from_utf8_lossy(&check.stdout).contains(&said)
                || stderr(&check).contains(&said),
            "{}",
            stderr(&check)
        );
    }
}

#[test]
fn a_strategy_file_that_is_a_fifo_is_refused_without_a_hang() {
    let workspace = Workspace::new(NOOP, 1);
    let strategy = workspace.path().join("ends.yaml");
    std::fs::remove_file(&strategy).unwrap();
    nix::unistd::mkfifo(&strategy, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let output = workspace.run(&[]);
    assert_exit(&output, 2);
    assert_says(
        &output,
        "ends.yaml is a FIFO (named pipe), not a regular file",
    );
}

#[test]
fn a_journal_that_is_a_fifo_is_refused_by_resume_and_report_without_a_hang() {
    let workspace = Workspace::new(&format!("{NOOP}max_rounds: 3\n"), 8);
    let run = killed_run(&workspace, "evaluated:3");
    let journal = run.join("journal.jsonl");
    std::fs::remove_file(&journal).unwrap();
    nix::unistd::mkfifo(&journal, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let said = format!(
        "{} is a FIFO (named pipe), not a regular file",
        journal.display()
    );
    let resumed = workspace.resume(&run);
    assert_exit(&resumed, 2);
    assert_says(&resumed, "it has no journal.jsonl");
    let mut report = kactors(workspace.path());
    report.arg("report").arg(&run);
    let reported = finish(report);
    assert_exit(&reported, 2);
    assert_says(&reported, &said);
}

/// A run killed (SIGKILL, by the test hook) just before its `nth` record of `record_type`.
fn killed_run(workspace: &Workspace, abort_at: &str) -> PathBuf {
    let mut command = workspace.command("run", &[]);
    command.env(kactors::run_dir::ABORT_AT_VARIABLE, abort_at);
    let output = finish(command);
    assert_eq!(
        output.status.signal(),
        Some(Signal::SIGKILL as i32),
        "{}",
        stderr(&output)
    );
    workspace.run_dir()
}

#[test]
fn a_schema_v1_journal_is_not_resumed_and_still_reported() {
    let workspace = Workspace::new(&format!("{NOOP}max_rounds: 3\n"), 8);
    let run = killed_run(&workspace, "evaluated:3");
    // The journal as a version 1 kactors wrote it: no `initial_source` in `run_started`.
    let v1: String = journal(&run)
        .into_iter()
        .map(|mut record| {
            record["v"] = 1.into();
            record.as_object_mut().unwrap().remove("initial_source");
            format!("{record}\n")
        })
        .collect();
    std::fs::write(run.join("journal.jsonl"), &v1).unwrap();
    let resumed = workspace.resume(&run);
    assert_exit(&resumed, 2);
    assert_says(&resumed, "its journal is of schema version 1");
    assert_eq!(
        std::fs::read_to_string(run.join("journal.jsonl")).unwrap(),
        v1
    );
    let mut report = kactors(workspace.path());
    report.arg("report").arg(&run);
    assert_exit(&finish(report), 0);
}

#[test]
fn a_file_size_limit_stops_the_run_as_a_full_disk_does_with_no_torn_line() {
    let workspace = Workspace::new(&format!("{NOOP}max_rounds: 20\n"), 40);
    let mut command = workspace.command("run", &[]);
    // SAFETY: setrlimit only changes the child about to exec.
    unsafe {
        command.pre_exec(|| {
            nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_FSIZE, 16384, 16384)
                .map_err(std::io::Error::from)
        });
    }
    let output = finish(command);
    assert_eq!(
        output.status.signal(),
        None,
        "not killed by SIGXFSZ: {}",
        stderr(&output)
    );
    assert_exit(&output, 1);
    assert_says(&output, "File too large");
    let run = workspace.run_dir();
    let text = std::fs::read_to_string(run.join("journal.jsonl")).unwrap();
    assert!(text.ends_with('\n'), "the last record was cut back whole");
    for line in text.lines() {
        serde_json::from_str::<Value>(line).unwrap();
    }
}

#[test]
fn a_resume_that_meets_another_starting_says_so_and_never_pid_unknown() {
    let workspace = Workspace::new(&format!("{NOOP}max_rounds: 3\n"), 8);
    let run = killed_run(&workspace, "evaluated:3");
    // The other resume has taken the lock and not yet written its pid; the file still names
    // the dead process.
    let lock = std::fs::File::options()
        .read(true)
        .write(true)
        .open(run.join("kactors.lock"))
        .unwrap();
    let _held = Flock::lock(lock, FlockArg::LockExclusiveNonblock).unwrap();
    let resumed = workspace.resume(&run);
    assert_exit(&resumed, 2);
    assert_says(
        &resumed,
        "another kactors process is starting there just now",
    );
    assert!(
        !stderr(&resumed).contains("pid unknown"),
        "{}",
        stderr(&resumed)
    );
}

#[test]
fn a_run_dir_inside_the_kernel_directory_is_refused() {
    let workspace = Workspace::new(&format!("{NOOP}max_rounds: 1\n"), 1);
    for run_dir in [
        "kernel",
        "kernel/runs",
        "kernel/candidates",
        "./kernel/../kernel/x",
    ] {
        let output = workspace.run(&["--run-dir", run_dir]);
        assert_exit(&output, 2);
        assert_says(&output, "is inside the kernel directory");
    }
    let mut left: Vec<String> = std::fs::read_dir(workspace.kernel())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["candidates", "input.py", "problem.py", "test.py"]);
}
