//! Issue 22, "Wrong after an interrupt, a kill or a resume": whatever ends a run (its end as
//! planned, a limit, SIGINT, SIGKILL then `kactors report`, a resume), best_kernel.py, report.md,
//! report.html and `run_finished` name the fastest verified candidate the journal holds, in
//! rounds and in steady search; an interrupted or killed run says how to go on. Runs go through
//! the binary on the noop platform; the test signals a run when the record it waits for reaches
//! the JSON events on stdout, or the run kills itself just before a chosen record
//! (`KACTORS_TEST_ABORT_AT`).

mod support;

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use nix::sys::signal::Signal;
use serde_json::Value;
use support::journal::Journal;
use support::{kactors, send_signal, workspace_with_candidates};

/// Long enough for any run here on a loaded machine; a run still going then is a hang.
const HANG: Duration = Duration::from_secs(90);

/// Beam 2 × 4 on four simulated devices, three rounds: a round's eight candidates take two
/// waves of evaluations, so that a signal can land inside a round.
const ROUNDS: &str = "platform: noop\nprovider: replay\nnoop_eval_s: 0.05\nnum_workers: 4\n\
                      max_rounds: 3\nstrategy_config:\n  num_top_kernels: 2\n  num_bottlenecks: 4\n";

fn steady() -> String {
    format!("{ROUNDS}search: steady\n")
}

/// How the test ends a run.
#[derive(Clone, Copy, Debug)]
enum Ending {
    /// Left alone: it ends as planned, or at a limit its flags set.
    Alone,
    /// SIGINT once the n-th record of a type is on stdout.
    SigintAt(&'static str, usize),
    /// SIGINT once a candidate faster than the initial kernel is verified.
    SigintOnceFaster,
    /// The run kills itself (SIGKILL) just before it journals the n-th record of a type.
    KilledAt(&'static str, usize),
}

/// A folder with a kernel directory of 40 distinct replay candidates and the strategy `ending`.
struct Workspace {
    dir: tempfile::TempDir,
}

impl Workspace {
    fn new(strategy: &str) -> Workspace {
        Workspace {
            dir: workspace_with_candidates("ending", strategy),
        }
    }

    /// The folder of the workspace's one run.
    fn run_dir(&self) -> PathBuf {
        let runs: Vec<PathBuf> = std::fs::read_dir(self.dir.path().join("runs"))
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .collect();
        assert_eq!(runs.len(), 1, "one run: {runs:?}");
        runs[0].clone()
    }

    fn run(&self, args: &[&str], ending: Ending) -> Ended {
        let mut command = kactors(self.dir.path());
        command
            .args(["run", "--strategy", "ending", "--config-dir", "."])
            .args(["--kernel-dir", "kernel", "--json"])
            .args(args);
        let (status, stderr, events) = match ending {
            Ending::Alone => watch(command, |_| false),
            Ending::SigintAt(kind, nth) => watch(command, |events| {
                events.last().unwrap()["type"] == kind
                    && events.iter().filter(|event| event["type"] == kind).count() == nth
            }),
            Ending::SigintOnceFaster => watch(command, |events| {
                let time = |event: &Value| {
                    (event["type"] == "candidate_finished" && event["passed"] == true)
                        .then(|| event["time_ms"].as_f64().unwrap())
                };
                let initial = events.iter().find_map(time);
                let last = time(events.last().unwrap());
                matches!((initial, last), (Some(initial), Some(last)) if last < initial)
            }),
            Ending::KilledAt(kind, nth) => {
                command.env("KACTORS_TEST_ABORT_AT", format!("{kind}:{nth}"));
                watch(command, |_| false)
            }
        };
        if let Ending::KilledAt(..) = ending {
            assert_eq!(status.signal(), Some(Signal::SIGKILL as i32), "{stderr}");
        }
        Ended {
            run: self.run_dir(),
            status,
            stderr,
            events,
        }
    }

    fn resume(&self, run: &Path) -> Ended {
        let mut command = kactors(self.dir.path());
        command.arg("resume").arg(run).arg("--json");
        let (status, stderr, events) = watch(command, |_| false);
        Ended {
            run: run.to_path_buf(),
            status,
            stderr,
            events,
        }
    }
}

/// Runs `command` to its end, its JSON events read as they come; SIGINT goes to it once, when
/// `interrupt_after` first says so of the events so far. A run still going after `HANG` is
/// killed and fails the test.
fn watch(
    mut command: std::process::Command,
    mut interrupt_after: impl FnMut(&[Value]) -> bool,
) -> (ExitStatus, String, Vec<Value>) {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr_pipe = child.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr_pipe.read_to_string(&mut text);
        text
    });
    let (lines, received) = mpsc::channel();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let mut events: Vec<Value> = Vec::new();
    let mut interrupted = false;
    loop {
        match received.recv_timeout(HANG) {
            Ok(line) => {
                events.push(serde_json::from_str(&line).unwrap());
                if !interrupted && interrupt_after(&events) {
                    interrupted = true;
                    send_signal(&child, Signal::SIGINT);
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let _ = child.kill();
                panic!("kactors still ran after {HANG:?}");
            }
        }
    }
    let status = child.wait().unwrap();
    (status, stderr.join().unwrap(), events)
}

/// A run's end as the user finds it.
struct Ended {
    run: PathBuf,
    status: ExitStatus,
    stderr: String,
    /// The JSON events of the process, in order.
    events: Vec<Value>,
}

impl Ended {
    fn journal(&self) -> Journal {
        Journal::peek(&self.run)
    }

    /// report.md and report.html: the run's own, or for a run with no `run_finished` those
    /// `kactors report` makes (report.live.*), with what it said on stderr.
    fn reports(&self) -> (String, String, String) {
        let read = |name: &str| {
            std::fs::read_to_string(self.run.join(name))
                .unwrap_or_else(|error| panic!("{name} of {}: {error}", self.run.display()))
        };
        if self.journal().of_type("run_finished").next().is_some() {
            return (read("report.md"), read("report.html"), String::new());
        }
        let output = kactors(&self.run)
            .arg("report")
            .arg(&self.run)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0));
        (
            read("report.live.md"),
            read("report.live.html"),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }

    /// The JSON event `run_finished` of this process.
    fn run_finished_event(&self) -> &Value {
        self.events
            .iter()
            .find(|event| event["type"] == "run_finished")
            .expect("a run_finished event on stdout")
    }

    /// The resume command of this run, as kactors prints it.
    fn resume_command(&self) -> String {
        format!("kactors resume {}", self.run.display())
    }

    /// Everything a user reads names the fastest verified candidate the journal holds: its
    /// source in best_kernel.py, its time in report.md and report.html, and `run_finished` (the
    /// journal's and the JSON event's) where the run has one.
    fn assert_names_the_fastest_verified(&self, what: &str) {
        let journal = self.journal();
        let (best, ms) = journal.fastest_verified().expect("a verified candidate");
        assert_eq!(
            std::fs::read_to_string(self.run.join("best_kernel.py")).unwrap(),
            journal.source_of(best),
            "{what}: best_kernel.py is candidate {best}'s"
        );
        let (markdown, html, _) = self.reports();
        let line = format!("Candidate {best}: {ms:.4} ms");
        assert!(markdown.contains(&line), "{what}: {line} in {markdown}");
        assert!(html.contains(&line), "{what}: {line} in report.html");
        if let Some(finished) = journal.of_type("run_finished").last() {
            assert_eq!(
                (
                    finished["best_candidate"].as_u64(),
                    finished["best_ms"].as_f64()
                ),
                (Some(best), Some(ms)),
                "{what}: {finished}"
            );
            let event = self.run_finished_event();
            assert_eq!(event["best_candidate"].as_u64(), Some(best), "{what}");
        }
    }

    /// An interrupted run exits 130 and says how to go on, on stderr, in report.md and in
    /// `run_finished`.
    fn assert_says_how_to_resume(&self) {
        let command = self.resume_command();
        assert_eq!(self.status.code(), Some(130), "{}", self.stderr);
        assert!(self.stderr.contains(&command), "{}", self.stderr);
        let (markdown, _, _) = self.reports();
        assert!(
            markdown.contains(&format!("To go on from here: `{command}`")),
            "{markdown}"
        );
        let journal = self.journal();
        let finished = journal.of_type("run_finished").last().unwrap();
        assert_eq!(finished["outcome"], "interrupted");
        assert_eq!(finished["resume"], command.as_str());
        assert_eq!(self.run_finished_event()["resume"], command.as_str());
    }
}

/// Each ending of a run of `strategy` with its flags, in a workspace of its own.
fn check_endings(strategy: &str, endings: &[(&[&str], Ending)]) {
    for (args, ending) in endings {
        let workspace = Workspace::new(strategy);
        let ended = workspace.run(args, *ending);
        let what = format!("{args:?} {ending:?}");
        ended.assert_names_the_fastest_verified(&what);
        match ending {
            Ending::Alone => assert_eq!(ended.status.code(), Some(0), "{}", ended.stderr),
            Ending::SigintAt(..) | Ending::SigintOnceFaster => ended.assert_says_how_to_resume(),
            Ending::KilledAt(..) => {
                let (_, _, said) = ended.reports();
                assert!(said.contains(&ended.resume_command()), "{what}: {said}");
            }
        }
    }
}

#[test]
fn every_ending_of_a_search_in_rounds_names_the_fastest_verified_kernel() {
    check_endings(
        ROUNDS,
        &[
            (&[], Ending::Alone),
            (&["--max-candidates", "6"], Ending::Alone),
            (&[], Ending::SigintAt("candidate_finished", 3)),
            (&[], Ending::SigintAt("round_finished", 1)),
            (&[], Ending::SigintAt("candidate_finished", 12)),
            (&[], Ending::KilledAt("candidate_finished", 4)),
            (&[], Ending::KilledAt("round_finished", 2)),
        ],
    );
}

#[test]
fn every_ending_of_a_steady_search_names_the_fastest_verified_kernel() {
    check_endings(
        &steady(),
        &[
            (&[], Ending::Alone),
            (&["--max-candidates", "6"], Ending::Alone),
            (&[], Ending::SigintAt("candidate_finished", 3)),
            (&[], Ending::SigintAt("candidate_finished", 14)),
            (&[], Ending::KilledAt("candidate_finished", 4)),
            (&[], Ending::KilledAt("evaluated", 15)),
        ],
    );
}

/// The first case: Ctrl-C in round 1, after a candidate faster than the initial kernel
/// verified and before the round's end gave it to the beam.
#[test]
fn ctrl_c_in_round_1_keeps_the_kernel_verified_before_it() {
    let workspace = Workspace::new(ROUNDS);
    let ended = workspace.run(&[], Ending::SigintOnceFaster);
    let journal = ended.journal();
    assert_eq!(journal.of_type("round_finished").count(), 0);
    let (best, _) = journal.fastest_verified().unwrap();
    assert_ne!(best, 0, "a round-1 candidate beat the initial kernel");
    ended.assert_names_the_fastest_verified("SIGINT in round 1");
    ended.assert_says_how_to_resume();
}

#[test]
fn kactors_report_on_a_run_killed_in_round_1_lists_its_verified_kernels() {
    let workspace = Workspace::new(ROUNDS);
    let ended = workspace.run(&[], Ending::KilledAt("candidate_finished", 6));
    let (markdown, _, said) = ended.reports();
    assert!(!markdown.contains("No kernel was verified"), "{markdown}");
    assert!(
        markdown.contains(&format!(
            "If it was killed, `{}` goes on from here.",
            ended.resume_command()
        )),
        "{markdown}"
    );
    assert!(said.contains(&ended.resume_command()), "{said}");
    ended.assert_names_the_fastest_verified("killed in round 1");
}

/// README: the report is rewritten every N × M candidates (8 here), in steady search too,
/// whose virtual rounds stay open while a late candidate of theirs is still going.
#[test]
fn a_steady_search_killed_after_25_candidates_left_a_report_at_most_8_candidates_old() {
    let workspace = Workspace::new(&steady());
    // The initial kernel's record, then 25 candidates'.
    let ended = workspace.run(
        &["--max-rounds", "5"],
        Ending::KilledAt("candidate_finished", 27),
    );
    let report = std::fs::read_to_string(ended.run.join("report.md"))
        .expect("the collector wrote report.md before the kill");
    assert!(ended.run.join("report.html").is_file());
    let journal = ended.journal();
    let finished: Vec<&Value> = journal.of_type("candidate_finished").collect();
    assert_eq!(finished.len(), 26);
    // The best the report names is the fold of the journal when at least 17 candidates had
    // finished.
    let named_at: Vec<usize> = (17..=25)
        .filter(|&done| {
            let prefix = Journal(finished[..=done].iter().map(|r| (*r).clone()).collect());
            let (best, ms) = prefix.fastest_verified().unwrap();
            report.contains(&format!("Candidate {best}: {ms:.4} ms"))
        })
        .collect();
    assert!(!named_at.is_empty(), "{report}");
}

/// After a resume the run goes on from the fold: the resumed process's `run_finished`, its JSON
/// events and its report name the fastest kernel of both processes.
#[test]
fn a_resumed_run_ends_naming_the_fastest_kernel_of_both_processes() {
    for strategy in [ROUNDS.to_string(), steady()] {
        let workspace = Workspace::new(&strategy);
        let interrupted = workspace.run(&[], Ending::SigintAt("candidate_finished", 5));
        interrupted.assert_says_how_to_resume();
        let resumed = workspace.resume(&interrupted.run);
        assert_eq!(resumed.status.code(), Some(0), "{}", resumed.stderr);
        resumed.assert_names_the_fastest_verified("resumed");
        assert_eq!(resumed.journal().finished()["outcome"], "completed");
    }
}
