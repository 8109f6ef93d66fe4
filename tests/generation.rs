//! Issue 20: a run from a bare problem.py starts with generation, the search's round 0, on the
//! real binary: seeds asked for, verified, refined with their earlier attempts, the first beam
//! made from them, journaled as candidates of kind `seed`, resumed mid-generation; and the
//! result staged as a KernelAgent kernel directory, with no test.py to run.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::journal::{Journal, candidate_of};
use support::runs::{assert_exit, assert_says, finish, only_run, stderr};
use support::standin_node::Node;
use support::{example, failing_on_noop as failing, kactors, passing_on_noop as passing};

const KILLED: i32 = 9;

/// A folder with `kernel/` holding problem.py alone (no input.py, no test.py) and the replay
/// files in `kernel/candidates/`, named in the order they are handed out, and the strategy
/// `gen` on noop.
struct Bare {
    dir: tempfile::TempDir,
}

impl Bare {
    fn new(strategy: &str, replies: &[String]) -> Bare {
        let dir = tempfile::tempdir().unwrap();
        let kernel = dir.path().join("kernel");
        std::fs::create_dir_all(kernel.join("candidates")).unwrap();
        std::fs::copy(
            example("optimize_01_matvec").join("problem.py"),
            kernel.join("problem.py"),
        )
        .unwrap();
        for (index, reply) in replies.iter().enumerate() {
            std::fs::write(
                kernel.join("candidates").join(format!("{index:02}.py")),
                reply,
            )
            .unwrap();
        }
        std::fs::write(
            dir.path().join("gen.yaml"),
            format!(
                "platform: noop\nprovider: replay\nnoop_eval_s: 0.02\nnum_workers: 1\n{strategy}"
            ),
        )
        .unwrap();
        Bare { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn run_command(&self) -> Command {
        let mut command = kactors(self.path());
        command.args([
            "run",
            "--strategy",
            "gen",
            "--config-dir",
            ".",
            "--kernel-dir",
            "kernel",
        ]);
        command
    }

    fn run_dir(&self) -> PathBuf {
        only_run(self.path())
    }
}

/// The attempts each candidate was evaluated with, and whether it passed in the end.
fn seeds(journal: &Journal) -> Vec<u64> {
    journal
        .of_type("candidate_planned")
        .filter(|record| record["kind"] == "seed")
        .map(|record| {
            assert_eq!(record["round"], 0, "a seed is of round 0: {record}");
            candidate_of(record)
        })
        .collect()
}

fn refinements_of(journal: &Journal, candidate: u64) -> usize {
    journal
        .of_type("refinement_requested")
        .filter(|record| candidate_of(record) == candidate)
        .count()
}

#[test]
fn a_bare_problem_gets_a_seed_refined_twice_then_the_search_and_a_kernel_directory_back() {
    let bare = Bare::new(
        "num_seeds: 1\nmax_refinements: 2\nmax_rounds: 1\nstrategy_config:\n  num_top_kernels: 1\n  num_bottlenecks: 2\n",
        &[
            failing("seed"),
            failing("refinement 1"),
            passing("refinement 2"),
            passing("optimization 1"),
            passing("optimization 2"),
        ],
    );
    let output = finish(bare.run_command());
    assert_exit(&output, 0);
    let run = bare.run_dir();
    let journal = Journal::read(&run);
    assert_eq!(seeds(&journal), vec![1]);
    assert_eq!(refinements_of(&journal, 1), 2);
    let requested: Vec<&str> = journal
        .of_type("proposal_requested")
        .filter(|record| candidate_of(record) == 1)
        .map(|record| record["kind"].as_str().unwrap())
        .collect();
    assert_eq!(requested, ["seed", "refine", "refine"]);
    let fates = journal.fates();
    assert!(
        fates[&1].0,
        "the seed passed at its second refinement: {fates:?}"
    );
    let first_beam = journal
        .of_type("beam_updated")
        .find(|record| record["round"] == 0)
        .expect("generation's beam");
    assert_eq!(first_beam["beam"][0]["candidate"], 1);
    let round = journal.of_type("round_started").next().unwrap();
    assert_eq!(round["parents"], serde_json::json!([1]));
    let optimized: Vec<u64> = journal
        .of_type("candidate_planned")
        .filter(|record| record["kind"].is_null())
        .map(candidate_of)
        .collect();
    assert_eq!(
        optimized,
        vec![2, 3],
        "the search numbers on after the seeds"
    );

    // The second refinement's prompt carries both failed attempts and why each failed.
    let prompt = std::fs::read_to_string(run.join("candidates/1/prompt.refine2.md")).unwrap();
    assert!(
        prompt.contains("\"seed\"") && prompt.contains("\"refinement 1\""),
        "{prompt}"
    );
    assert_eq!(
        prompt.matches("no kernel_function is defined").count(),
        2,
        "{prompt}"
    );
    let first = std::fs::read_to_string(run.join("candidates/1/prompt.md")).unwrap();
    assert!(first.contains("aten_allowlist.yaml"), "{first}");

    // The result is a kernel directory: input.py beside problem.py; no test.py to run.
    let best = std::fs::read_to_string(run.join("best_kernel.py")).unwrap();
    assert_eq!(
        std::fs::read_to_string(run.join("final/input.py")).unwrap(),
        best
    );
    assert!(run.join("final/problem.py").is_file());
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(
        report.contains("not run: the kernel directory has no test.py"),
        "{report}"
    );
    assert!(!report.contains("Some("), "no debug formatting: {report}");
    assert!(
        report
            .contains("Seeds asked for: 1; ended: 1; verified: 1. The search started from seed 1."),
        "{report}"
    );
    assert!(
        report.contains("(seed 1, the search's start "),
        "the seed stands where the initial kernel would: {report}"
    );
}

#[test]
fn every_seed_failing_ends_the_run_with_exit_1_saying_why_each_failed() {
    let bare = Bare::new(
        "num_seeds: 2\nmax_refinements: 1\nmax_rounds: 1\n",
        &[failing("a"), failing("b"), failing("c"), failing("d")],
    );
    let output = finish(bare.run_command());
    assert_exit(&output, 1);
    let journal = Journal::read(&bare.run_dir());
    assert_eq!(seeds(&journal), vec![1, 2]);
    assert_eq!(refinements_of(&journal, 1) + refinements_of(&journal, 2), 2);
    let reason = journal.finished()["reason"].as_str().unwrap().to_string();
    assert!(
        reason.starts_with("no seed kernel passed verification: seed ")
            && reason.contains("no kernel_function is defined"),
        "{reason}"
    );
    assert!(journal.of_type("round_started").next().is_none());
    assert_says(&output, "no seed kernel passed verification");
    let report = std::fs::read_to_string(bare.run_dir().join("report.md")).unwrap();
    assert!(
        report.contains("no seed kernel passed verification"),
        "{report}"
    );
    assert!(
        report.contains("Seeds asked for: 2; ended: 2; verified: 0. No first beam was made.")
            && report.contains("- seed 1 failed: ")
            && report.contains("- seed 2 failed: "),
        "{report}"
    );
}

#[test]
fn a_run_killed_mid_generation_resumes_its_seeds_and_searches_on() {
    let bare = Bare::new(
        "num_seeds: 2\nmax_refinements: 2\nmax_rounds: 1\ngeneration: all_seeds\nstrategy_config:\n  num_top_kernels: 2\n  num_bottlenecks: 1\n",
        &[
            failing("seed 1"),
            passing("seed 2"),
            failing("seed 1, refinement 1"),
            passing("seed 1, refinement 2"),
            passing("optimization 1"),
            passing("optimization 2"),
        ],
    );
    let mut command = bare.run_command();
    command.env("KACTORS_TEST_ABORT_AT", "refinement_requested:2");
    let killed = finish(command);
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&killed.status),
        Some(KILLED),
        "{}",
        stderr(&killed)
    );
    let run = bare.run_dir();
    let before = Journal::read(&run);
    assert!(
        before.of_type("round_started").next().is_none(),
        "killed in generation"
    );

    let resumed = finish({
        let mut command = kactors(bare.path());
        command.arg("resume").arg(&run);
        command
    });
    assert_exit(&resumed, 0);
    let journal = Journal::read(&run);
    assert_eq!(seeds(&journal), vec![1, 2]);
    assert_eq!(refinements_of(&journal, 1), 2, "each refinement asked once");
    let mut evaluated: Vec<(u64, u64)> = journal
        .of_type("evaluated")
        .map(|record| (candidate_of(record), record["attempt"].as_u64().unwrap()))
        .collect();
    evaluated.sort();
    evaluated.dedup();
    assert_eq!(
        evaluated.len(),
        journal.of_type("evaluated").count(),
        "nothing evaluated twice"
    );
    let first_beam = journal
        .of_type("beam_updated")
        .find(|record| record["round"] == 0)
        .expect("generation's beam");
    let members: Vec<u64> = first_beam["beam"]
        .as_array()
        .unwrap()
        .iter()
        .map(|member| member["candidate"].as_u64().unwrap())
        .collect();
    let mut sorted = members.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        vec![1, 2],
        "all_seeds: both verified seeds in the first beam"
    );
    assert_eq!(journal.finished()["outcome"], "completed");
}

/// The stand-in evaluator's real protocol: a seed that never passes (its refinements fail with
/// the verifier's reason) beside one that passes, keeping all seeds.
#[test]
fn a_seed_that_never_passes_fails_alone_on_the_stand_in_evaluator() {
    let node = Node::new(&[
        ("00.py", "# standin: fail reason=seed-one-wrong\ndef kernel_function(x):\n    return x\n"),
        ("01.py", "# standin: pass time_ms=1.5\ndef kernel_function(x):\n    return x + 0\n"),
        ("02.py", "# standin: fail reason=refinement-still-wrong\ndef kernel_function(x):\n    return x * 1\n"),
        ("03.py", "# standin: pass time_ms=1.2\ndef kernel_function(x):\n    return x - 0\n"),
    ])
    .on_one_device();
    let strategy = node.dir.path().join("standin.yaml");
    let yaml = std::fs::read_to_string(&strategy)
        .unwrap()
        .replace("max_refinements: 0\n", "max_refinements: 1\n");
    std::fs::write(
        &strategy,
        format!("{yaml}num_seeds: 2\ngeneration: all_seeds\n"),
    )
    .unwrap();
    std::fs::remove_file(node.dir.path().join("kernel/input.py")).unwrap();
    let (output, run) = node.run();
    assert_exit(&output, 0);
    let journal = Journal::read(&run);
    assert_eq!(seeds(&journal), vec![1, 2]);
    let fates = journal.fates();
    let (passed, _, reason) = &fates[&1];
    assert!(!passed, "{fates:?}");
    assert!(
        reason
            .as_deref()
            .unwrap_or_default()
            .contains("refinement-still-wrong"),
        "{fates:?}"
    );
    assert_eq!(refinements_of(&journal, 1), 1);
    assert_eq!(refinements_of(&journal, 2), 0);
    assert!(fates[&2].0);
    let round = journal.of_type("round_started").next().unwrap();
    assert_eq!(round["parents"], serde_json::json!([2]));
}

/// `--generate` on a kernel directory that has an input.py: the run starts from problem.py
/// alone all the same, and run.yaml keeps the flag for a resume.
#[test]
fn generate_ignores_an_input_py_and_run_yaml_keeps_the_flag() {
    let bare = Bare::new(
        "num_seeds: 1\nmax_rounds: 1\nstrategy_config:\n  num_top_kernels: 1\n  num_bottlenecks: 1\n",
        &[passing("seed"), passing("optimization")],
    );
    std::fs::copy(
        example("optimize_01_matvec").join("input.py"),
        bare.path().join("kernel/input.py"),
    )
    .unwrap();
    let output = finish({
        let mut command = bare.run_command();
        command.arg("--generate");
        command
    });
    assert_exit(&output, 0);
    let run = bare.run_dir();
    let journal = Journal::read(&run);
    assert_eq!(seeds(&journal), vec![1]);
    assert!(
        journal
            .of_type("evaluated")
            .all(|record| candidate_of(record) != 0),
        "input.py is not evaluated"
    );
    let run_yaml = std::fs::read_to_string(run.join("run.yaml")).unwrap();
    assert!(run_yaml.contains("generate: true"), "{run_yaml}");
}

/// Issue 20's review: an evaluator that cannot start before any seed was evaluated refuses the
/// run (exit 2), as it does for an initial kernel: nothing was evaluated.
#[test]
fn a_seeds_evaluator_that_cannot_start_refuses_the_run_with_exit_2() {
    let node = Node::new(&[(
        "00.py",
        "# standin: pass time_ms=1.5\ndef kernel_function(x):\n    return x\n",
    )])
    .on_one_device()
    .with_problem("# standin: no_fit\nclass Model:\n    pass\ndef get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n");
    std::fs::remove_file(node.dir.path().join("kernel/input.py")).unwrap();
    let (output, run) = node.run();
    assert_exit(&output, 2);
    assert_says(
        &output,
        "seed 1 could not be evaluated: the evaluator could not start: the problem's inputs do not fit",
    );
    let journal = Journal::read(&run);
    assert_eq!(journal.finished()["outcome"], "refused");
}
