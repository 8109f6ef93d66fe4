//! Issue 10: a run that nothing outside can knock over. Closed output streams, a dropped
//! terminal and a full disk, each on the real binary in a temporary directory.

mod support;

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::Value;
use support::kactors;
use support::runs::{journal, only_run_in};

fn matvec() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/optimize_01_matvec")
}

fn files_named_partial(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut folders = vec![root.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "partial") {
                found.push(path);
            }
        }
    }
    found
}

/// A run whose output pipe is read for `lines` lines and then closed, as `… 2>&1 | head -2`
/// does: the run goes on to its end, and its records are whole.
fn run_with_output_closed_after(json: bool, lines: usize) -> (Option<i32>, PathBuf) {
    let dir = tempfile::tempdir().unwrap().keep();
    let (reader, writer) = std::io::pipe().unwrap();
    let mut command = kactors(&dir);
    command.args([
        "run",
        "--strategy",
        "noop",
        "--workers",
        "2",
        "--kernel-dir",
    ]);
    command.arg(matvec());
    if json {
        command.arg("--json");
    }
    let mut child = command
        .stdout(writer.try_clone().unwrap())
        .stderr(writer)
        .spawn()
        .unwrap();
    drop(command);
    let mut reader = BufReader::new(reader);
    for _ in 0..lines {
        let mut line = String::new();
        assert!(reader.read_line(&mut line).unwrap() > 0);
    }
    drop(reader);
    let status = child.wait().unwrap();
    (status.code(), only_run_in(&dir.join("runs")))
}

fn assert_finished_and_recorded(run: &Path) {
    let records = journal(run);
    let last = records.last().unwrap();
    assert_eq!(
        (last["type"].as_str(), last["outcome"].as_str()),
        (Some("run_finished"), Some("completed"))
    );
    assert!(run.join("report.md").is_file());
    assert!(run.join("best_kernel.py").is_file());
    let log = std::fs::read_to_string(run.join("kactors.log")).unwrap();
    assert_eq!(
        log.matches("it is dropped from now on").count(),
        1,
        "the dropped progress is noted once: {log}"
    );
}

#[test]
fn a_closed_stderr_drops_progress_and_the_run_ends_as_planned() {
    let (code, run) = run_with_output_closed_after(false, 2);
    assert_eq!(code, Some(0));
    assert_finished_and_recorded(&run);
}

#[test]
fn a_closed_stdout_under_json_drops_events_and_the_run_ends_as_planned() {
    let (code, run) = run_with_output_closed_after(true, 3);
    assert_eq!(code, Some(0));
    assert_finished_and_recorded(&run);
}

#[test]
fn sighup_is_ignored_and_the_run_goes_on_unattended() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("slow.yaml"),
        "platform: noop\nprovider: replay\nreplay_latency_s: 0.2\nmax_rounds: 2\n",
    )
    .unwrap();
    let mut child = kactors(dir.path())
        .args(["run", "--json", "--strategy", "slow", "--config-dir", "."])
        .arg("--kernel-dir")
        .arg(matvec())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut events = BufReader::new(child.stdout.take().unwrap()).lines();
    loop {
        let event: Value = serde_json::from_str(&events.next().unwrap().unwrap()).unwrap();
        if event["type"] == "proposal_requested" {
            break;
        }
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGHUP,
    )
    .unwrap();
    let rest: Vec<Value> = events
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect();
    assert_eq!(child.wait().unwrap().code(), Some(0));
    let last = rest.last().unwrap();
    assert_eq!(
        (last["type"].as_str(), last["outcome"].as_str()),
        (Some("run_finished"), Some("completed"))
    );
    let run = only_run_in(&dir.path().join("runs"));
    let log = std::fs::read_to_string(run.join("kactors.log")).unwrap();
    assert!(log.contains("SIGHUP"), "{log}");
}

/// The run with every file it writes capped at `bytes` (RLIMIT_FSIZE, SIGXFSZ ignored so that a
/// write past the cap fails with EFBIG instead of killing the process): a disk that fills up.
fn run_on_a_disk_that_fills_at(bytes: u64) -> (Option<i32>, String, PathBuf) {
    let dir = tempfile::tempdir().unwrap().keep();
    let mut command = kactors(&dir);
    command
        .args([
            "run",
            "--strategy",
            "noop",
            "--workers",
            "2",
            "--kernel-dir",
        ])
        .arg(matvec());
    unsafe {
        command.pre_exec(move || {
            nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_FSIZE, bytes, bytes)
                .map_err(std::io::Error::from)?;
            nix::sys::signal::signal(
                nix::sys::signal::Signal::SIGXFSZ,
                nix::sys::signal::SigHandler::SigIgn,
            )
            .map_err(std::io::Error::from)?;
            Ok(())
        });
    }
    let mut child = command
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    (status.code(), stderr, only_run_in(&dir.join("runs")))
}

#[test]
fn a_full_disk_stops_the_run_with_exit_1_one_line_and_whole_records() {
    let (code, stderr, run) = run_on_a_disk_that_fills_at(6 * 1024);
    assert_eq!(code, Some(1), "{stderr}");
    let journal_path = run.join("journal.jsonl");
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("failed to write"))
        .collect();
    assert_eq!(errors.len(), 1, "one line names the failure: {stderr}");
    assert!(
        errors[0].contains(&format!(
            "{}: File too large (os error 27)",
            journal_path.display()
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("completed"), "{stderr}");
    assert!(!journal(&run).is_empty(), "the journal's lines are whole");
    assert_eq!(files_named_partial(&run), Vec::<PathBuf>::new());
}
