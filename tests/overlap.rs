//! Issue 23 part 5: rounds that overlap where no result can change. A kernel certain to be a
//! parent of the next round is analysed before its round ends; the run must still make the same
//! candidates from the same parents, in the same rounds, with the same replayed code, and end
//! every round with the same beam as the run without the overlap.
//!
//! The replay provider hands its files out in the order the requests for code are sent, so a
//! run is only comparable with itself where that order is fixed: nothing is refined here (a
//! refinement is asked for when its candidate's evaluation ends, which races with the
//! proposals of the next parent to be analysed).

mod support;

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use support::journal::{Journal, candidate_of};
use support::runs::{assert_exit, finish, only_run, stderr};
use support::{example, kactors};

/// A source noop passes, timed within `[low, high)` ms by its simulated model (`tag` makes each
/// one distinct, in code rather than a comment, which duplicates ignore).
fn kernel_timed(tag: &str, low: f64, high: f64) -> String {
    (0..)
        .map(|salt| {
            format!("def kernel_function(A, B):\n    tag = \"{tag} {salt}\"\n    return A @ B\n")
        })
        .find(|text| {
            let (verdict, ms) =
                kactors::noop::simulate(&actors::model::KernelSource::new(text.as_str()));
            matches!(verdict, actors::model::Verdict::Passed { .. }) && (low..high).contains(&ms)
        })
        .unwrap()
}

/// The replay files in the order the run asks for them, and the candidate each goes to: round 1
/// from the initial kernel (1.6 ms), 1 to 4; round 2 asks for the initial kernel's 7 and 8 at
/// once and for the new parent 1's 5 and 6 after its analysis; round 3 likewise for 1's 11 and
/// 12, then 5's 9 and 10. One kernel of each round beats the beam's best, the others are slower
/// than every parent, but for round 3, whose 9 and 10 both do: round 4's two new parents, 9
/// (whose analysis was asked for ahead) and 10, which send their proposals in that order with
/// or without the overlap.
const PLAN: [(f64, f64); 16] = [
    (1.40, 1.45), // 1
    (1.80, 1.95), // 2
    (1.80, 1.95), // 3
    (1.80, 1.95), // 4
    (1.80, 1.95), // 7
    (1.80, 1.95), // 8
    (1.20, 1.25), // 5
    (1.80, 1.95), // 6
    (1.80, 1.95), // 11
    (1.80, 1.95), // 12
    (1.00, 1.05), // 9
    (1.10, 1.15), // 10
    (1.80, 1.95), // 17
    (1.80, 1.95), // 18
    (1.80, 1.95), // 19
    (1.80, 1.95), // 20
];

/// A workspace for a run of four rounds of beam 2 × 2 on one simulated device, evaluations
/// (0.2 s) slower than the replayed LLM (0.1 s), one request for code at a time (so that
/// candidates are evaluated in the order they are asked for), with or without the overlap.
fn workspace(dir: &Path, overlap: bool) {
    let kernel = dir.join("kernel");
    std::fs::create_dir_all(kernel.join("candidates")).unwrap();
    for file in ["problem.py", "test.py"] {
        std::fs::copy(example("optimize_01_matvec").join(file), kernel.join(file)).unwrap();
    }
    std::fs::write(kernel.join("input.py"), kernel_timed("initial", 1.60, 1.65)).unwrap();
    for (index, (low, high)) in PLAN.iter().enumerate() {
        std::fs::write(
            kernel.join("candidates").join(format!("{index:02}.py")),
            kernel_timed(&format!("file {index}"), *low, *high),
        )
        .unwrap();
    }
    std::fs::write(
        dir.join("overlap.yaml"),
        format!(
            "platform: noop\nprovider: replay\nnum_workers: 1\nnoop_eval_s: 0.2\n\
             replay_latency_s: 0.1\nmax_inflight: 1\nmax_rounds: 4\nmax_refinements: 0\n\
             strategy_config:\n  num_top_kernels: 2\n  num_bottlenecks: 2\n\
             overlap_rounds: {overlap}\n"
        ),
    )
    .unwrap();
}

fn run_command(dir: &Path) -> Command {
    let mut command = kactors(dir);
    command
        .args(["run", "--strategy", "overlap", "--config-dir", "."])
        .args(["--kernel-dir", "kernel"]);
    command
}

/// The workspace's run to its end; its run directory.
fn run(dir: &Path, overlap: bool) -> PathBuf {
    workspace(dir, overlap);
    assert_exit(&finish(run_command(dir)), 0);
    only_run(dir)
}

/// Every round's beam, in order: (round, [(candidate, time)]).
fn beams(journal: &Journal) -> Vec<(u64, Vec<(u64, f64)>)> {
    journal
        .of_type("beam_updated")
        .map(|record| {
            let members = record["beam"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| {
                    (
                        m["candidate"].as_u64().unwrap(),
                        m["time_ms"].as_f64().unwrap(),
                    )
                })
                .collect();
            (record["round"].as_u64().unwrap(), members)
        })
        .collect()
}

/// Every candidate planned: (candidate, round, parent, proposal index), and the code it got.
fn candidates(journal: &Journal) -> Vec<(u64, u64, u64, u64, String)> {
    journal
        .of_type("candidate_planned")
        .map(|record| {
            let id = candidate_of(record);
            (
                id,
                record["round"].as_u64().unwrap(),
                record["parent"].as_u64().unwrap(),
                record["proposal_index"].as_u64().unwrap(),
                journal.source_of(id),
            )
        })
        .collect()
}

/// The analyses requested before the round whose parent they prepare started.
fn analysed_ahead(journal: &Journal) -> Vec<u64> {
    let mut started = 0;
    let mut ahead = Vec::new();
    for record in &journal.0 {
        match record["type"].as_str() {
            Some("round_started") => started = record["round"].as_u64().unwrap(),
            Some("analysis_requested") if record["round"].as_u64().unwrap() > started => {
                ahead.push(candidate_of(record));
            }
            _ => {}
        }
    }
    ahead
}

fn round_of(record: &Value) -> u64 {
    record["round"].as_u64().unwrap()
}

#[test]
fn an_overlapping_run_makes_the_same_candidates_and_beams_as_one_without_the_overlap() {
    let (without, with) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let without = Journal::read(&run(without.path(), false));
    let with = Journal::read(&run(with.path(), true));

    assert_eq!(analysed_ahead(&without), Vec::<u64>::new());
    assert_eq!(
        analysed_ahead(&with),
        vec![1, 5, 9],
        "the new parent that comes first in each round's beam is analysed before its round starts"
    );
    let expected_beams = beams(&without);
    assert_eq!(
        expected_beams
            .iter()
            .map(|(round, _)| *round)
            .collect::<Vec<_>>(),
        vec![1, 2, 3, 4]
    );
    assert_eq!(expected_beams[2].1[0].0, 9, "{expected_beams:?}");
    assert_eq!(expected_beams[2].1[1].0, 10, "{expected_beams:?}");
    assert_eq!(beams(&with), expected_beams);
    assert_eq!(candidates(&with), candidates(&without));
    assert_eq!(with.fates(), without.fates());
    assert_eq!(
        with.of_type("round_started")
            .map(round_of)
            .collect::<Vec<_>>(),
        vec![1, 2, 3, 4]
    );
    for field in ["outcome", "reason", "best_candidate", "best_ms"] {
        assert_eq!(with.finished()[field], without.finished()[field], "{field}");
    }
}

/// Killed as it would journal the analysis it asks for ahead (the record its input, round 1's
/// third result, leads to), the run resumes to the end the same run left alone reaches: the
/// resume journals the analysis and asks for it, before round 2 as the run would have.
#[test]
fn an_overlapping_run_killed_as_it_asks_for_an_analysis_ahead_resumes_to_the_same_end() {
    let alone = tempfile::tempdir().unwrap();
    let alone = Journal::read(&run(alone.path(), true));

    let killed = tempfile::tempdir().unwrap();
    workspace(killed.path(), true);
    let mut command = run_command(killed.path());
    command.env("KACTORS_TEST_ABORT_AT", "analysis_requested:2");
    let output = finish(command);
    assert_eq!(output.status.signal(), Some(9), "{}", stderr(&output));
    let run = only_run(killed.path());
    assert_eq!(
        Journal::read(&run).of_type("round_started").count(),
        1,
        "killed in round 1"
    );
    let mut resume = kactors(killed.path());
    resume.arg("resume").arg(&run);
    assert_exit(&finish(resume), 0);

    let journal = Journal::read(&run);
    assert_eq!(analysed_ahead(&journal), analysed_ahead(&alone));
    assert_eq!(beams(&journal), beams(&alone));
    assert_eq!(candidates(&journal), candidates(&alone));
    assert_eq!(journal.fates(), alone.fates());
}
