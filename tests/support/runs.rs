//! Running kactors to its end from a test: a run that outlives `HANG` is a hang, killed and
//! failed rather than left to block the suite; its output and exit code, asserted on.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use std::io::BufReader;

use actors::journal::{JournalReadError, JournalRecord, TornLine, read_journal};
use kactors::run_dir::RunFiles;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// Long enough for any run here on a loaded machine; a run still going then is a hang.
pub const HANG: Duration = Duration::from_secs(90);

/// Runs `command` to its end; a process still running after `HANG` is killed and fails the test.
pub fn finish(mut command: Command) -> Output {
    Running::start(command.stdout(Stdio::piped()).stderr(Stdio::piped())).finish()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn assert_exit(output: &Output, code: i32) {
    assert_eq!(output.status.code(), Some(code), "{}", stderr(output));
}

/// `output`'s stderr holds `text`.
pub fn assert_says(output: &Output, text: &str) {
    assert!(stderr(output).contains(text), "{}", stderr(output));
}

/// A kactors started in the background, killed (SIGKILL) if the test ends first.
pub struct Running(Option<Child>);

impl Running {
    pub fn start(command: &mut Command) -> Running {
        Running(Some(command.spawn().unwrap()))
    }

    /// A process the test ends or signals itself; what it prints is not kept (a pipe no one
    /// reads would fill and stop it).
    pub fn background(mut command: Command) -> Running {
        Running::start(command.stdout(Stdio::null()).stderr(Stdio::null()))
    }

    pub fn pid(&self) -> u32 {
        self.0
            .as_ref()
            .expect("the process is not waited for yet")
            .id()
    }

    pub fn signal(&self, signal: Signal) {
        kill(Pid::from_raw(self.pid() as i32), signal).unwrap();
    }

    /// Waits for the end; the process is killed and the test fails after `HANG`.
    pub fn finish(mut self) -> Output {
        let child = self.0.take().unwrap();
        let pid = Pid::from_raw(child.id() as i32);
        let (sender, receiver) = mpsc::channel();
        std::thread::spawn(move || sender.send(child.wait_with_output()));
        match receiver.recv_timeout(HANG) {
            Ok(output) => output.unwrap(),
            Err(_) => {
                let _ = kill(pid, Signal::SIGKILL);
                let output = receiver.recv().unwrap().unwrap();
                panic!(
                    "kactors still ran after {HANG:?}: {}",
                    String::from_utf8_lossy(&output.stderr)
                );
            }
        }
    }

    pub fn kill_and_wait(self) {
        drop(self);
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Polls `until` every 10 ms (the journal is the only event a separate process offers) and
/// fails the test after `HANG`.
pub fn wait_for<T>(what: &str, mut until: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + HANG;
    loop {
        if let Some(found) = until() {
            return found;
        }
        assert!(Instant::now() < deadline, "waited {HANG:?} for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The one run folder under `folder/runs`.
pub fn only_run(folder: &Path) -> PathBuf {
    only_run_in(&folder.join("runs"))
}

/// The one run folder in `runs`.
pub fn only_run_in(runs: &Path) -> PathBuf {
    let folders: Vec<PathBuf> = std::fs::read_dir(runs)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    assert_eq!(folders.len(), 1, "one run: {folders:?}");
    folders[0].clone()
}

/// A run's journal, every record whole as JSON (what a line left out put back: the lines before
/// it, the code kept in the candidates' folders); a torn line fails the test.
pub fn journal(run: &Path) -> Vec<serde_json::Value> {
    let records = records_of(run).unwrap_or_else(|error| panic!("{error}"));
    assert!(records.1.is_none(), "a torn line: {:?}", records.1);
    records.0.iter().map(|record| record.to_json()).collect()
}

/// A run's journal as the runtime reads it, and its torn last line.
pub fn records_of(run: &Path) -> Result<(Vec<JournalRecord>, Option<TornLine>), JournalReadError> {
    let file = std::fs::File::open(run.join("journal.jsonl"))?;
    let mut records = Vec::new();
    let torn = read_journal(BufReader::new(file), &mut RunFiles(run), |record| {
        records.push(record)
    })?;
    Ok((records, torn))
}

/// The running processes whose environment names `run` as their run directory: kactors'
/// children and everything they started, sandboxed or not, as seen from outside.
pub fn children_of_run(run: &Path) -> Vec<i32> {
    let marker = format!("KACTORS_RUN_DIR={}", run.display()).into_bytes();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|environ| environ.split(|b| *b == 0).any(|var| var == marker))
        })
        .filter(|pid| super::is_running(*pid))
        .collect()
}
