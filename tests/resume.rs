//! Issue 13: `kactors resume` and the run limits, on the real binary. Runs are killed for real
//! (SIGKILL) at a chosen record with `KACTORS_TEST_ABORT_AT=<record type>:<n>`, or by the test
//! once the journal shows the moment it wants; then resumed, and the whole journal (both
//! processes') is checked against what the issue promises.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant, SystemTime};

use actors::journal::JournalRecord;
use actors::search_state::TWICE_IN_FLIGHT;
use nix::sys::signal::Signal;
use serde_json::Value;
use support::journal::{Journal, candidate_of};
use support::llm_server::{LlmServer, chat_completion, last_prompt};
use support::runs::{
    Running, assert_exit, assert_says, children_of_run, finish, only_run, stderr, wait_for,
};
use support::standin_node::Node;
use support::{is_running, kactors, workspace_with_candidates};

const ABORT_AT: &str = "KACTORS_TEST_ABORT_AT";

/// The noop platform with the replay provider, evaluations of 20 ms.
const NOOP: &str = "platform: noop\nprovider: replay\nnoop_eval_s: 0.02\n";

fn assert_killed(output: &Output) {
    assert_eq!(
        output.status.signal(),
        Some(Signal::SIGKILL as i32),
        "the abort hook kills the process: {}",
        stderr(output)
    );
}

/// Waits for the run directory of a run started in the background in `folder`.
fn wait_for_run_dir(folder: &Path) -> PathBuf {
    wait_for("the run directory", || {
        let run = std::fs::read_dir(folder.join("runs"))
            .ok()?
            .next()?
            .ok()?
            .path();
        run.join("journal.jsonl").is_file().then_some(run)
    })
}

/// A folder with a kernel directory of 40 distinct replay candidates and the strategy `resume`.
struct Workspace {
    dir: tempfile::TempDir,
}

impl Workspace {
    fn new(strategy: &str) -> Workspace {
        Workspace {
            dir: workspace_with_candidates("resume", strategy),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn set_strategy(&self, strategy: &str) {
        std::fs::write(self.path().join("resume.yaml"), strategy).unwrap();
    }

    fn run_command(&self, args: &[&str]) -> Command {
        let mut command = kactors(self.path());
        command
            .args(["run", "--strategy", "resume", "--config-dir", "."])
            .args(["--kernel-dir", "kernel"])
            .args(args);
        command
    }

    fn run(&self, args: &[&str]) -> Output {
        finish(self.run_command(args))
    }

    /// A run killed just before the n-th record of a type (`evaluated:7`); its run directory.
    fn run_killed_at(&self, abort_at: &str, args: &[&str]) -> PathBuf {
        let mut command = self.run_command(args);
        command.env(ABORT_AT, abort_at);
        assert_killed(&finish(command));
        self.run_dir()
    }

    /// The folder of the workspace's one run.
    fn run_dir(&self) -> PathBuf {
        only_run(self.path())
    }

    fn wait_for_run_dir(&self) -> PathBuf {
        wait_for_run_dir(self.path())
    }

    fn resume_command(&self, run: &Path) -> Command {
        let mut command = kactors(self.path());
        command.arg("resume").arg(run);
        command
    }

    fn resume(&self, run: &Path) -> Output {
        finish(self.resume_command(run))
    }

    fn resume_killed_at(&self, run: &Path, abort_at: &str) {
        let mut command = self.resume_command(run);
        command.env(ABORT_AT, abort_at);
        assert_killed(&finish(command));
    }
}

/// What resumes ask of a journal besides what every test does.
impl Journal {
    fn resumes(&self) -> Vec<&Value> {
        self.of_type("run_resumed").collect()
    }

    /// The records of each process: split at every `run_resumed` (which opens its process).
    fn processes(&self) -> Vec<&[Value]> {
        let mut starts: Vec<usize> = self
            .0
            .iter()
            .enumerate()
            .filter(|(_, record)| record["type"] == "run_resumed")
            .map(|(index, _)| index)
            .collect();
        starts.insert(0, 0);
        starts.push(self.0.len());
        starts
            .windows(2)
            .map(|span| &self.0[span[0]..span[1]])
            .collect()
    }

    /// The last `beam_updated`: (candidate, time) fastest first.
    fn final_beam(&self) -> Vec<(u64, f64)> {
        self.of_type("beam_updated")
            .last()
            .unwrap()
            .get("beam")
            .unwrap()
            .as_array()
            .unwrap()
            .iter()
            .map(|member| {
                (
                    member["candidate"].as_u64().unwrap(),
                    member["time_ms"].as_f64().unwrap(),
                )
            })
            .collect()
    }
}

fn is_evaluation_step(record: &Value) -> bool {
    record["type"] == "step_started" && (record["step"] == "verify" || record["step"] == "time")
}

/// Nothing with a result in the journal was done again by a later process: no candidate that
/// finished was evaluated again, no evaluation attempt has two results, no answered request
/// was sent again.
fn assert_nothing_done_twice(journal: &Journal) {
    let mut results = BTreeMap::new();
    for record in journal.of_type("evaluated") {
        let key = (candidate_of(record), record["attempt"].as_u64().unwrap());
        *results.entry(key).or_insert(0) += 1;
    }
    let twice: Vec<_> = results.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "evaluated twice: {twice:?}");

    let processes = journal.processes();
    let mut finished_before = BTreeSet::new();
    let mut answered_before = BTreeSet::new();
    for (index, process) in processes.iter().enumerate() {
        for record in process.iter() {
            if is_evaluation_step(record) {
                assert!(
                    !finished_before.contains(&candidate_of(record)),
                    "process {index} evaluated candidate {} again: {record}",
                    candidate_of(record)
                );
            }
            let kind = record["type"].as_str().unwrap();
            if kind.ends_with("_requested") && kind != "refinement_requested" {
                let id = record["request_id"].as_str().unwrap();
                assert!(
                    !answered_before.contains(id),
                    "process {index} asked again for {id}, answered before"
                );
            }
        }
        for record in process.iter() {
            let kind = record["type"].as_str().unwrap();
            if kind == "candidate_finished" {
                finished_before.insert(candidate_of(record));
            }
            if kind.ends_with("_received") && record["outcome"] != "cancelled" {
                answered_before.insert(record["request_id"].as_str().unwrap().to_string());
            }
        }
    }
    let mut answers = BTreeMap::new();
    for record in &journal.0 {
        let kind = record["type"].as_str().unwrap();
        if kind.ends_with("_received") && record["outcome"] != "cancelled" {
            *answers
                .entry(record["request_id"].as_str().unwrap().to_string())
                .or_insert(0) += 1;
        }
    }
    let twice: Vec<_> = answers.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "answered twice: {twice:?}");
}

/// Rounds of one parent and four proposals on two devices; requests for code go out one at a
/// time and a failed candidate is not refined, so that the replay provider hands its files out
/// in an order the run fixes. (A round's new parents send their proposals fastest first,
/// whichever analysis comes back first: tests/overlap.rs has runs of two parents.)
const ROUNDS: &str = "num_workers: 2\nmax_rounds: 3\nmax_refinements: 0\nmax_inflight: 1\n\
                      strategy_config:\n  num_top_kernels: 1\n  num_bottlenecks: 4\n";

#[test]
fn a_run_killed_during_an_evaluation_resumes_to_the_end_the_same_run_left_alone_reaches() {
    let strategy = format!("{NOOP}{ROUNDS}");
    let alone = Workspace::new(&strategy);
    assert_exit(&alone.run(&[]), 0);
    let alone_run = alone.run_dir();
    let expected = Journal::read(&alone_run);

    let killed = Workspace::new(&strategy);
    // The 7th result is round 2's second: the process dies with that evaluation done and not
    // journaled, and the round's other candidates in flight.
    let run = killed.run_killed_at("evaluated:7", &[]);
    assert_eq!(
        std::fs::read_to_string(run.join("best_kernel.py")).unwrap(),
        Journal::read(&run).best_source(),
        "a killed run leaves its best kernel"
    );
    let output = killed.resume(&run);
    assert_exit(&output, 0);
    let journal = Journal::read(&run);
    let resumed = journal.resumes();
    assert_eq!(resumed.len(), 1);
    assert_eq!(resumed[0]["previous_end"], "killed");
    let in_flight: Vec<u64> = resumed[0]["in_flight"]
        .as_array()
        .unwrap()
        .iter()
        .map(|id| id.as_u64().unwrap())
        .collect();
    assert!(!in_flight.is_empty(), "killed during an evaluation");
    let evaluated_again: BTreeSet<u64> = journal.processes()[1]
        .iter()
        .filter(|record| is_evaluation_step(record))
        .map(candidate_of)
        .collect();
    for candidate in &in_flight {
        assert!(
            evaluated_again.contains(candidate),
            "candidate {candidate}, in flight at the kill, is evaluated again"
        );
    }
    assert_nothing_done_twice(&journal);

    assert_eq!(journal.fates(), expected.fates());
    assert_eq!(journal.final_beam(), expected.final_beam());
    assert_eq!(
        std::fs::read_to_string(run.join("best_kernel.py")).unwrap(),
        std::fs::read_to_string(alone_run.join("best_kernel.py")).unwrap()
    );
    let (finished, expected_finish) = (journal.finished(), expected.finished());
    assert_eq!(finished["outcome"], "completed");
    for field in ["reason", "best_candidate", "best_ms", "initial_ms"] {
        assert_eq!(finished[field], expected_finish[field], "{field}");
    }
}

/// Issue 24: a journal of version 3, whose lines are whole (every proposal's code inline, nulls
/// and each candidate's placement said), resumes as it always did: its code comes from the
/// journal, not the candidates' folders, and the run goes on in the current version's lines to the end the
/// same run left alone reaches.
#[test]
fn a_version_3_journal_with_its_code_inline_resumes_to_the_end_the_same_run_left_alone_reaches() {
    let strategy = format!("{NOOP}{ROUNDS}");
    let alone = Workspace::new(&strategy);
    assert_exit(&alone.run(&[]), 0);
    let expected = Journal::read(&alone.run_dir());

    let killed = Workspace::new(&strategy);
    let run = killed.run_killed_at("evaluated:7", &[]);
    let (records, _) = support::runs::records_of(&run).unwrap();
    let mut version_3 = String::new();
    for record in &records {
        let mut line = record.to_json();
        line["v"] = 3.into();
        version_3.push_str(&format!("{line}\n"));
    }
    std::fs::write(run.join("journal.jsonl"), &version_3).unwrap();
    // Before version 4 a proposal's code file was written only when it was dispatched.
    for candidate in std::fs::read_dir(run.join("candidates")).unwrap() {
        let _ = std::fs::remove_file(candidate.unwrap().path().join("kernel.proposal.py"));
    }

    assert_exit(&killed.resume(&run), 0);
    let text = std::fs::read_to_string(run.join("journal.jsonl")).unwrap();
    assert!(
        text.starts_with(&version_3),
        "the old lines stay as they were"
    );
    let later: Vec<Value> = text[version_3.len()..]
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert!(
        later
            .iter()
            .all(|line| line["v"] == actors::journal::SCHEMA_VERSION),
        "the resume writes the current version"
    );
    let journal = Journal::read(&run);
    assert_nothing_done_twice(&journal);
    assert_eq!(journal.fates(), expected.fates());
    assert_eq!(journal.final_beam(), expected.final_beam());
    assert_eq!(journal.finished()["outcome"], "completed");
    let report = finish({
        let mut command = kactors(killed.path());
        command.arg("report").arg(&run);
        command
    });
    assert_exit(&report, 0);
}

/// The loopback server's answer: code that depends on the prompt alone (so that a request
/// gets the same reply whenever it is sent), no lesson from a reflexion.
fn answer_by_prompt(body: &str) -> (u16, String) {
    let prompt = last_prompt(&serde_json::from_str(body).unwrap());
    let content = if prompt.starts_with("# Optimize") || prompt.starts_with("# Fix") {
        let salt: u64 = prompt.bytes().map(u64::from).sum();
        format!(
            "A faster one.\n\n```python\ndef kernel_function(A, B):\n    return (A @ B) * {salt} / {salt}\n```\n"
        )
    } else if prompt.starts_with("# What did candidate") {
        String::new()
    } else {
        "no bottlenecks to report".to_string()
    };
    (200, chat_completion(&content))
}

/// The user prompts a server was sent, by how often each came.
fn prompts_sent(server: &LlmServer) -> BTreeMap<String, usize> {
    let mut sent = BTreeMap::new();
    for body in server.bodies() {
        *sent
            .entry(last_prompt(&serde_json::from_str(&body).unwrap()))
            .or_insert(0) += 1;
    }
    sent
}

/// One device, one proposal a round and one request at a time, against `server`.
fn workspace_against(server: &LlmServer) -> Workspace {
    Workspace::new(&format!(
        "platform: noop\nprovider: openai_compatible\nmodel: local-kernel-model\nbase_url: {}\n\
         noop_eval_s: 0.02\nnum_workers: 1\nmax_inflight: 1\nmax_rounds: 3\n\
         strategy_config:\n  num_top_kernels: 1\n  num_bottlenecks: 1\n",
        server.base_url
    ))
}

fn with_key(mut command: Command) -> Command {
    command.env("OPENAI_API_KEY", "sk-kactors-resume-test");
    command
}

#[test]
fn a_reply_kept_on_disk_before_the_kill_is_not_asked_for_again() {
    let alone_server = LlmServer::start(usize::MAX, answer_by_prompt);
    let alone = workspace_against(&alone_server);
    assert_exit(&finish(with_key(alone.run_command(&[]))), 0);
    let expected = prompts_sent(&alone_server);

    let server = LlmServer::start(usize::MAX, answer_by_prompt);
    let killed = workspace_against(&server);
    // The first proposal, the only request in flight then: its reply is kept in the
    // candidate's folder, then the process dies before the record that names it.
    let mut command = with_key(killed.run_command(&[]));
    command.env(ABORT_AT, "proposal_received:1");
    assert_killed(&finish(command));
    let run = killed.run_dir();
    let sent_before_resume = server.bodies().len();
    let output = finish(with_key(killed.resume_command(&run)));
    assert_exit(&output, 0);

    let journal = Journal::read(&run);
    let resumed = journal.resumes();
    assert_eq!(resumed[0]["pending_requests"], serde_json::json!(["r1-c1"]));
    assert_eq!(resumed[0]["recovered"], serde_json::json!(["r1-c1"]));
    let received: Vec<&Value> = journal
        .of_type("proposal_received")
        .filter(|record| record["request_id"] == "r1-c1")
        .collect();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0]["outcome"], "code");
    let reply = received[0]["reply"]["file"].as_str().unwrap();
    assert!(run.join(reply).is_file(), "{reply}");
    assert_nothing_done_twice(&journal);

    let sent = prompts_sent(&server);
    let again: Vec<&String> = sent
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(p, _)| p)
        .collect();
    assert!(again.is_empty(), "sent twice: {again:?}");
    assert_eq!(
        sent, expected,
        "the killed and resumed run sent what the run left alone sent"
    );
    assert!(
        server.bodies().len() > sent_before_resume,
        "the resumed run went on asking"
    );
}

#[test]
fn a_run_killed_in_its_finale_resumes_and_runs_the_finale() {
    let workspace = Workspace::new(&format!("{NOOP}{ROUNDS}"));
    // The finale's first record: the initial kernel timed again.
    let run = workspace.run_killed_at("final_timed:1", &[]);
    let output = workspace.resume(&run);
    assert_exit(&output, 0);
    let journal = Journal::read(&run);
    let after = journal.processes()[1];
    let types: BTreeSet<&str> = after
        .iter()
        .map(|record| record["type"].as_str().unwrap())
        .collect();
    for kind in ["final_timed", "user_test_ran", "run_finished"] {
        assert!(types.contains(kind), "{kind} after the resume: {types:?}");
    }
    for kind in ["evaluated", "proposal_requested", "round_started"] {
        assert!(!types.contains(kind), "the search was over: {kind}");
    }
    let passes: BTreeSet<u64> = after
        .iter()
        .filter(|record| record["type"] == "final_timed")
        .map(|record| record["pass"].as_u64().unwrap())
        .collect();
    assert_eq!(passes, BTreeSet::from([1, 2]));
    let finished = journal.finished();
    assert_eq!(finished["outcome"], "completed");
    assert_eq!(finished["reason"], "max_rounds (3) reached");
    assert!(run.join("final/kernel.py").is_file());
}

#[test]
fn steady_search_killed_midway_keeps_its_invariants_across_the_resume() {
    let workspace = Workspace::new(&format!(
        "{NOOP}search: steady\nnum_workers: 2\nmax_rounds: 3\n"
    ));
    let run = workspace.run_killed_at("evaluated:8", &[]);
    let output = workspace.resume(&run);
    assert_exit(&output, 0);
    let journal = Journal::read(&run);
    assert_eq!(journal.resumes().len(), 1);
    assert_nothing_done_twice(&journal);

    // The candidate total: 3 virtual rounds of N × M = 4.
    let candidates: BTreeSet<u64> = journal
        .of_type("candidate_planned")
        .map(candidate_of)
        .collect();
    assert_eq!(candidates, (1..=12).collect());
    let fates = journal.fates();
    assert_eq!(
        fates.keys().copied().collect::<BTreeSet<_>>(),
        (0..=12).collect()
    );

    // The beam: the two fastest verified kernels of all evaluated before and after the kill.
    let duplicates: BTreeSet<u64> = journal
        .of_type("candidate_finished")
        .filter(|record| !record["duplicate_of"].is_null())
        .map(candidate_of)
        .collect();
    let mut verified: Vec<(u64, f64)> = fates
        .iter()
        .filter(|(id, (passed, _, _))| *passed && !duplicates.contains(id))
        .map(|(id, (_, time, _))| (*id, time.unwrap()))
        .collect();
    verified.sort_by(|a, b| a.1.total_cmp(&b.1));
    verified.truncate(2);
    assert_eq!(journal.final_beam(), verified);

    // The replay provider went on where it was: the k-th request for code got the k-th file.
    let order: Vec<&str> = journal
        .of_type("proposal_requested")
        .map(|record| record["request_id"].as_str().unwrap())
        .collect();
    for record in journal.of_type("proposal_received") {
        if record["outcome"] != "code" {
            continue;
        }
        let id = record["request_id"].as_str().unwrap();
        let k = order.iter().position(|sent| *sent == id).unwrap();
        assert_eq!(
            record["code"].as_str().unwrap(),
            std::fs::read_to_string(
                workspace
                    .path()
                    .join(format!("kernel/candidates/{k:04}.py"))
            )
            .unwrap(),
            "request {id}, the {k}-th sent"
        );
    }
    assert_eq!(journal.finished()["outcome"], "completed");
}

/// The evaluators die with kactors (parent-death signal, issue 14); what a candidate started in
/// a session of its own does not, and the resume ends it.
#[test]
fn the_children_a_killed_run_left_are_ended_before_it_resumes() {
    let pidfile = tempfile::NamedTempFile::new().unwrap();
    let candidate = format!(
        "# standin: orphan pidfile={} then=hang\ndef kernel_function(x):\n    return x + 1\n",
        pidfile.path().display()
    );
    // The sandbox off: the test reads the orphan's pid, and one inside the sandbox's namespace
    // would name nothing out here (a sandboxed orphan dies with its namespace anyway).
    let node = Node::new(&[("01_orphan.py", candidate.as_str())]).with_strategy(
        "platform: nvidia\nprovider: replay\nnum_workers: 1\ntest_timeout_s: 2\nkill_grace_s: 0.3\n\
         max_rounds: 1\nstrategy_config:\n  num_top_kernels: 1\n  num_bottlenecks: 1\n\
         sandbox: off\n",
    );
    let running = Running::background(node.run_command());
    let run = wait_for_run_dir(node.dir.path());
    // The stand-in's child says so on stderr, into the device's evaluator log, before it hangs.
    let log = run.join("devices/0/evaluator.log");
    wait_for("the candidate to hang in the evaluator", || {
        std::fs::read_to_string(&log)
            .ok()?
            .contains("before hanging")
            .then_some(())
    });
    running.kill_and_wait();
    let orphan: i32 = std::fs::read_to_string(pidfile.path())
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let left = children_of_run(&run);
    assert!(
        left.contains(&orphan),
        "the candidate's process {orphan} in a session of its own outlived kactors: {left:?}"
    );

    let output = finish({
        let mut command = node.kactors();
        command.arg("resume").arg(&run);
        command
    });
    assert_exit(&output, 0);
    for pid in &left {
        assert!(
            !is_running(*pid),
            "process {pid} the dead run left is ended"
        );
    }
    let journal = Journal::read(&run);
    let resumed = journal.resumes();
    assert!(
        resumed[0]["orphans_ended"].as_u64().unwrap() >= 1,
        "{}",
        resumed[0]
    );
    assert_says(
        &output,
        "process group(s) the previous process left running",
    );
}

#[test]
fn a_candidate_in_flight_at_two_deaths_in_a_row_fails_and_one_only_queued_is_evaluated() {
    // One device, two proposals a round, asked one at a time: candidate 1 reaches the device
    // first, candidate 2 waits behind it.
    let workspace = Workspace::new(&format!(
        "{NOOP}num_workers: 1\nmax_rounds: 1\nmax_refinements: 0\nmax_inflight: 1\n\
         strategy_config:\n  num_top_kernels: 1\n  num_bottlenecks: 2\n"
    ));
    // The initial kernel's verify and time, then candidate 1's verify: the process dies with
    // candidate 1 on the device.
    let run = workspace.run_killed_at("step_finished:3", &[]);
    // The resumed process takes candidate 1 up first and dies on it again.
    workspace.resume_killed_at(&run, "step_finished:1");
    let output = workspace.resume(&run);
    assert_exit(&output, 0);

    let journal = Journal::read(&run);
    let resumed = journal.resumes();
    assert_eq!(resumed.len(), 2);
    for resume in &resumed {
        assert_eq!(resume["in_flight"], serde_json::json!([1, 2]), "{resume}");
    }
    let processes = journal.processes();
    let on_device_at_death = |process: &[Value]| {
        process
            .iter()
            .filter(|record| is_evaluation_step(record))
            .map(candidate_of)
            .next_back()
    };
    assert_eq!(on_device_at_death(processes[0]), Some(1));
    assert_eq!(on_device_at_death(processes[1]), Some(1));

    let third = processes[2];
    let fates = journal.fates();
    assert_eq!(fates[&1].2.as_deref(), Some(TWICE_IN_FLIGHT));
    assert!(
        !third
            .iter()
            .any(|record| is_evaluation_step(record) && candidate_of(record) == 1),
        "candidate 1 is not evaluated a third time"
    );
    assert!(
        third
            .iter()
            .any(|record| is_evaluation_step(record) && candidate_of(record) == 2),
        "candidate 2 never reached the device: it is evaluated"
    );
    assert_ne!(fates[&2].2.as_deref(), Some(TWICE_IN_FLIGHT));
    assert_eq!(journal.finished()["outcome"], "completed");
}

/// Noop evaluations of 20 ms and an LLM that takes a minute: a run that waits.
const WAITING: &str =
    "platform: noop\nprovider: replay\nnoop_eval_s: 0.02\nreplay_latency_s: 60\nmax_rounds: 1\n";

/// A resume of `run` while process `holder` holds it exits 2 and names the holder.
fn assert_resume_refused_while_held(workspace: &Workspace, run: &Path, holder: u32) {
    let refused = workspace.resume(run);
    assert_exit(&refused, 2);
    assert_says(
        &refused,
        &format!("is in use by another kactors process (pid {holder})"),
    );
}

#[test]
fn a_run_directory_held_by_a_live_process_is_not_resumed() {
    let workspace = Workspace::new(WAITING);
    let running = Running::background(workspace.run_command(&[]));
    let run = workspace.wait_for_run_dir();
    wait_for("the first request to the llm", || {
        Journal::peek(&run)
            .of_type("analysis_requested")
            .next()
            .map(|_| ())
    });
    assert_resume_refused_while_held(&workspace, &run, running.pid());
    running.kill_and_wait();

    let resuming = Running::background(workspace.resume_command(&run));
    wait_for("the resume", || {
        (!Journal::peek(&run).resumes().is_empty()).then_some(())
    });
    assert_resume_refused_while_held(&workspace, &run, resuming.pid());
    assert_eq!(
        Journal::peek(&run).resumes().len(),
        1,
        "the refused resume journals nothing"
    );
}

#[test]
fn changed_settings_refuse_the_resume_naming_them_unless_forced() {
    let workspace = Workspace::new(&format!("{NOOP}num_workers: 2\nmax_rounds: 2\n"));
    let run = workspace.run_killed_at("evaluated:3", &[]);
    let journal_before = std::fs::read_to_string(run.join("journal.jsonl")).unwrap();
    workspace.set_strategy(&format!("{NOOP}num_workers: 2\nmax_rounds: 3\n"));

    let refused = workspace.resume(&run);
    assert_exit(&refused, 2);
    assert_says(
        &refused,
        "changed since the run started: search.max_rounds: 2, now 3;",
    );
    assert_says(&refused, "--force");
    assert_eq!(
        std::fs::read_to_string(run.join("journal.jsonl")).unwrap(),
        journal_before,
        "a refused resume leaves the journal as it was"
    );

    let mut forced = workspace.resume_command(&run);
    forced.arg("--force");
    let output = finish(forced);
    assert_exit(&output, 0);
    let journal = Journal::read(&run);
    assert_eq!(
        journal.resumes()[0]["forced_changes"],
        serde_json::json!(["search.max_rounds: 2, now 3"])
    );
    assert_eq!(journal.finished()["reason"], "max_rounds (3) reached");
}

#[test]
fn a_changed_kernel_file_refuses_the_resume_naming_it() {
    let workspace = Workspace::new(&format!("{NOOP}max_rounds: 2\n"));
    let run = workspace.run_killed_at("evaluated:3", &[]);
    let mut test = std::fs::OpenOptions::new()
        .append(true)
        .open(workspace.path().join("kernel/test.py"))
        .unwrap();
    writeln!(test, "# changed after the run started").unwrap();
    let refused = workspace.resume(&run);
    assert_exit(&refused, 2);
    assert_says(&refused, "changed since the run started: test.py changed");
}

#[test]
fn other_devices_refuse_the_resume() {
    let node = Node::new(&[(
        "01.py",
        "# standin: pass time_ms=1.5\ndef kernel_function(x):\n    return x * 1\n",
    )]);
    let mut command = node.run_command();
    command.env(ABORT_AT, "evaluated:1");
    assert_killed(&finish(command));
    let run = node.run_dir();
    // The node's second GPU was swapped.
    let node = node.with_gpus(
        "echo '0, NVIDIA H200, GPU-aaaaaaaa-0000-0000-0000-000000000000, 00000000:00:06.0'\necho '1, NVIDIA H200, GPU-cccccccc-0000-0000-0000-000000000000, 00000000:00:07.0'\n",
    );
    let output = finish({
        let mut command = node.kactors();
        command.arg("resume").arg(&run);
        command
    });
    assert_exit(&output, 2);
    assert_says(&output, "a resume needs the same devices");
    // The device it would run on now is named.
    assert_says(&output, "GPU-cccccccc");
}

#[test]
fn a_completed_run_is_not_resumed() {
    let workspace = Workspace::new(&format!("{NOOP}max_rounds: 1\n"));
    assert_exit(&workspace.run(&[]), 0);
    let run = workspace.run_dir();
    let before = std::fs::read_to_string(run.join("journal.jsonl")).unwrap();
    let refused = workspace.resume(&run);
    assert_exit(&refused, 2);
    assert_says(&refused, "the run completed (max_rounds (1) reached)");
    assert_eq!(
        std::fs::read_to_string(run.join("journal.jsonl")).unwrap(),
        before
    );
}

/// The candidates a run made, the initial kernel aside.
fn candidates_made(journal: &Journal) -> BTreeSet<u64> {
    journal
        .of_type("candidate_planned")
        .map(candidate_of)
        .collect()
}

fn assert_ended_by(run: &Path, reason: &str) {
    let journal = Journal::read(run);
    let finished = journal.finished();
    assert_eq!(finished["outcome"], "completed");
    assert!(
        finished["reason"].as_str().unwrap().starts_with(reason),
        "{finished}"
    );
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(
        report.contains(reason),
        "the report names the limit: {report}"
    );
}

#[test]
fn max_candidates_ends_the_run_as_planned_also_across_a_resume() {
    // Three rounds of four would make 12.
    let strategy = format!("{NOOP}num_workers: 2\nmax_rounds: 3\n");
    let alone = Workspace::new(&strategy);
    assert_exit(&alone.run(&["--max-candidates", "6"]), 0);
    assert_ended_by(&alone.run_dir(), "max_candidates (6) reached");
    assert_eq!(
        candidates_made(&Journal::read(&alone.run_dir())),
        (1..=6).collect()
    );

    let killed = Workspace::new(&strategy);
    let run = killed.run_killed_at("evaluated:4", &["--max-candidates", "6"]);
    assert!(candidates_made(&Journal::read(&run)).len() < 6);
    let output = killed.resume(&run);
    assert_exit(&output, 0);
    assert_ended_by(&run, "max_candidates (6) reached");
    let journal = Journal::read(&run);
    assert_eq!(candidates_made(&journal), (1..=6).collect());
    assert_nothing_done_twice(&journal);
}

/// A search that would go on for long: replies take 0.3 s, a thousand rounds. With
/// noop_eval_s 0.05 and kill_grace_s 0.1, max_time keeps 4.4 s free before its end (README:
/// 1.1 s for the evaluations in flight, 1.2 s for the finale, 2.1 s for the shutdown).
const LONG: &str = "platform: noop\nprovider: replay\nnoop_eval_s: 0.05\nkill_grace_s: 0.1\n\
                    replay_latency_s: 0.3\nmax_rounds: 1000\nnum_workers: 2\n";
const KEPT_FREE: Duration = Duration::from_millis(4400);

fn limit_reached_at(process: &[Value]) -> SystemTime {
    let record = process
        .iter()
        .find(|record| record["type"] == "limit_reached")
        .expect("limit_reached");
    JournalRecord::from_line(&record.to_string()).unwrap().t
}

fn time_of(record: &Value) -> SystemTime {
    JournalRecord::from_line(&record.to_string()).unwrap().t
}

#[test]
fn max_time_ends_the_run_as_planned_before_the_limit() {
    let workspace = Workspace::new(LONG);
    let started = Instant::now();
    let output = workspace.run(&["--max-time", "6s"]);
    let took = started.elapsed();
    assert_exit(&output, 0);
    assert!(
        took < Duration::from_secs(6),
        "the process exits by max_time: {took:?}"
    );
    let run = workspace.run_dir();
    assert_ended_by(&run, "max_time (6s) reached");
    let journal = Journal::read(&run);
    let stop = limit_reached_at(&journal.0)
        .duration_since(time_of(&journal.0[0]))
        .unwrap();
    assert!(
        stop >= Duration::from_secs(6) - KEPT_FREE,
        "proposals stop when what is kept free is left: {stop:?}"
    );
}

/// Moves every record of a journal `by` into the past: as if the run had been resumed that
/// much later.
fn age_journal(run: &Path, by: Duration) {
    let path = run.join("journal.jsonl");
    let (records, _) = support::runs::records_of(run).unwrap();
    let mut aged = String::new();
    for mut record in records {
        record.t -= by;
        aged.push_str(&record.to_json().to_string());
        aged.push('\n');
    }
    std::fs::write(&path, aged).unwrap();
}

#[test]
fn max_time_counts_the_search_time_of_the_killed_process_and_not_the_gap() {
    let workspace = Workspace::new(LONG);
    let running = Running::background(workspace.run_command(&["--max-time", "8s"]));
    let run = workspace.wait_for_run_dir();
    // Kill the first process after 1.5 s of search, before its limit stops proposals (3.6 s).
    wait_for("1.5 s of search", || {
        let journal = Journal::peek(&run);
        let first = journal.0.first()?;
        let last = journal.0.last()?;
        let span = time_of(last).duration_since(time_of(first)).ok()?;
        (span >= Duration::from_millis(1500)).then_some(())
    });
    running.kill_and_wait();
    let journal = Journal::read(&run);
    assert_eq!(journal.of_type("limit_reached").count(), 0);
    let spent = time_of(journal.last())
        .duration_since(time_of(&journal.0[0]))
        .unwrap();
    // Resumed an hour after the death, as far as the journal tells.
    age_journal(&run, Duration::from_secs(3600));

    let started = Instant::now();
    let output = workspace.resume(&run);
    let took = started.elapsed();
    assert_exit(&output, 0);
    assert!(
        took < Duration::from_secs(8) - spent,
        "the resumed process exits by what is left of max_time: {took:?}, {spent:?} spent before"
    );
    assert_ended_by(&run, "max_time (8s) reached");
    let journal = Journal::read(&run);
    let resumed = journal.resumes()[0];
    assert!(resumed["gap_s"].as_f64().unwrap() >= 3600.0, "{resumed}");
    let second = journal.processes()[1];
    assert!(
        second
            .iter()
            .any(|record| record["type"] == "proposal_requested"),
        "the hour between the death and the resume is not counted: the search went on"
    );
    let stop = limit_reached_at(second)
        .duration_since(time_of(&second[0]))
        .unwrap();
    let expected = Duration::from_secs(8) - spent - KEPT_FREE;
    assert!(
        stop + Duration::from_millis(100) >= expected && stop < expected + spent / 2,
        "proposals stop {stop:?} into the resumed process: what the first process spent \
         ({spent:?}) counts, expected {expected:?}"
    );
}

#[test]
fn a_torn_last_line_is_cut_off_and_reported_and_the_run_completes() {
    let workspace = Workspace::new(&format!("{NOOP}num_workers: 2\nmax_rounds: 2\n"));
    let run = workspace.run_killed_at("evaluated:4", &[]);
    // Half a record, as a process killed while writing it leaves it.
    let torn = r#"{"v":2,"t":"2026-12-02T10:35:44.123Z","type":"evaluated","candidate":"#;
    let mut journal = std::fs::OpenOptions::new()
        .append(true)
        .open(run.join("journal.jsonl"))
        .unwrap();
    journal.write_all(torn.as_bytes()).unwrap();
    drop(journal);
    let whole_lines = Journal::peek(&run).0.len();

    let output = workspace.resume(&run);
    assert_exit(&output, 0);
    assert_says(
        &output,
        &format!(
            "the journal's last line (line {}, {} bytes) was cut short by the previous process's death and is left out",
            whole_lines + 1,
            torn.len()
        ),
    );
    let journal = Journal::read(&run);
    assert_eq!(journal.resumes()[0]["torn_line"], true);
    assert_eq!(journal.finished()["outcome"], "completed");
    assert_nothing_done_twice(&journal);
}

#[test]
fn an_interrupted_run_resumes_and_completes() {
    let workspace = Workspace::new(
        "platform: noop\nprovider: replay\nnoop_eval_s: 0.02\nreplay_latency_s: 0.2\n\
         num_workers: 2\nmax_rounds: 3\n",
    );
    let running = Running::background(workspace.run_command(&[]));
    let run = workspace.wait_for_run_dir();
    wait_for("a proposal evaluated", || {
        Journal::peek(&run)
            .of_type("evaluated")
            .any(|record| candidate_of(record) > 0)
            .then_some(())
    });
    running.signal(Signal::SIGINT);
    let output = running.finish();
    assert_exit(&output, 130);
    assert_eq!(Journal::read(&run).finished()["outcome"], "interrupted");

    let output = workspace.resume(&run);
    assert_exit(&output, 0);
    let journal = Journal::read(&run);
    assert_eq!(
        journal.resumes()[0]["previous_end"],
        "interrupted: interrupted by SIGINT"
    );
    let finished = journal.finished();
    assert_eq!(finished["outcome"], "completed");
    assert_eq!(finished["reason"], "max_rounds (3) reached");
    assert_eq!(candidates_made(&journal), (1..=12).collect());
}
