//! Issue 24, "A flat cost per candidate": a 2,000-candidate noop soak (scripts/soak.py's run,
//! smaller) costs as much per candidate at its end as at its start, and a soak of candidates the
//! size of a real Triton kernel journals at most 2 kB a candidate without losing what a resume
//! needs.
//! The cost is the kactors process's user CPU time, read from /proc while the run goes: the wall
//! clock and the kernel's share (its filesystem work, which other processes' deletions on the
//! same disk slow down) move with whatever else the machine runs, the process's own work does
//! not.

mod support;

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use support::journal::Journal;
use support::runs::{Running, assert_exit, only_run, wait_for};
use support::{example, kactors, kernel_with_candidates};

const CANDIDATES: usize = 2000;
/// The soak whose journal is measured: its bytes per candidate do not grow with the run.
const REAL_CANDIDATES: usize = 200;
/// The candidates of each end of the run that are compared.
const BLOCK: usize = 500;

/// A kernel directory of `count` distinct candidates, each the matvec example's first Triton
/// kernel (2.3 kB) told apart by a constant.
fn kernel_with_real_candidates(dir: &Path, count: usize) {
    let kernel = dir.join("kernel");
    std::fs::create_dir_all(kernel.join("candidates")).unwrap();
    let matvec = example("optimize_01_matvec");
    for file in ["input.py", "problem.py", "test.py"] {
        std::fs::copy(matvec.join(file), kernel.join(file)).unwrap();
    }
    let tiles = std::fs::read_to_string(matvec.join("candidates/01_row_tiles.py")).unwrap();
    for k in 0..count {
        std::fs::write(
            kernel.join("candidates").join(format!("{k:05}.py")),
            format!(
                "{tiles}
VARIANT = {k}
"
            ),
        )
        .unwrap();
    }
}

/// The soak's search: 4 simulated devices, beam 4 × 5, 2 ms evaluations, the replay provider
/// answering at once, no refinements.
fn soak_yaml(candidates: usize) -> String {
    format!(
        "platform: noop\nprovider: replay\nstrategy: beam_search\nmax_rounds: {}\n\
         max_candidates: {candidates}\nmax_refinements: 0\nnoop_eval_s: 0.002\n\
         replay_latency_s: 0\nnum_workers: 4\nstrategy_config:\n  num_top_kernels: 4\n  \
         num_bottlenecks: 5\n",
        candidates.div_ceil(20)
    )
}

/// The user CPU seconds a process has spent (all its threads): `utime`, field 14 of
/// /proc/<pid>/stat, counted after the command name's last `)` as proc(5) orders them.
fn user_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    let ticks: f64 = after_name.split_whitespace().nth(11)?.parse().ok()?;
    let per_second = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()? as f64;
    Some(ticks / per_second)
}

/// The soak in `dir` (a kernel directory there), started.
fn start_soak(dir: &Path, candidates: usize) -> Running {
    std::fs::write(dir.join("soak.yaml"), soak_yaml(candidates)).unwrap();
    let mut command = kactors(dir);
    command.args([
        "run",
        "--strategy",
        "soak",
        "--config-dir",
        ".",
        "--kernel-dir",
        "kernel",
        "--run-dir",
        "runs",
    ]);
    Running::background(command)
}

/// Follows a live journal: how many search candidates (not the initial kernel) have finished.
struct Follower {
    lines: BufReader<File>,
    partial: String,
    finished: usize,
}

impl Follower {
    fn open(journal: &Path) -> Option<Follower> {
        Some(Follower {
            lines: BufReader::new(File::open(journal).ok()?),
            partial: String::new(),
            finished: 0,
        })
    }

    fn catch_up(&mut self) -> usize {
        while self.lines.read_line(&mut self.partial).unwrap_or(0) > 0 {
            if !self.partial.ends_with('\n') {
                break;
            }
            if self.partial.contains("\"type\":\"candidate_finished\"")
                && !self.partial.contains("\"candidate\":0,")
            {
                self.finished += 1;
            }
            self.partial.clear();
        }
        self.finished
    }
}

#[test]
fn a_soak_costs_as_much_user_cpu_per_candidate_at_its_end_as_at_its_start() {
    let dir = tempfile::tempdir().unwrap();
    kernel_with_candidates(dir.path(), CANDIDATES + 1);
    let run = start_soak(dir.path(), CANDIDATES);
    let pid = run.pid();
    let mut journal = wait_for("the run's journal", || {
        let folder = std::fs::read_dir(dir.path().join("runs"))
            .ok()?
            .next()?
            .ok()?;
        Follower::open(&folder.path().join("journal.jsonl"))
    });
    // The CPU spent when the journal first showed this many candidates finished.
    let mut spent_at = |count: usize| {
        wait_for(&format!("{count} candidates finished"), || {
            (journal.catch_up() >= count).then(|| user_seconds(pid))?
        })
    };
    let early = (spent_at(1), spent_at(1 + BLOCK));
    let late = (spent_at(CANDIDATES - BLOCK), spent_at(CANDIDATES));
    let output = run.finish();
    assert_exit(&output, 0);

    let per_candidate = |(from, to): (f64, f64)| 1000.0 * (to - from) / BLOCK as f64;
    let (early_ms, late_ms) = (per_candidate(early), per_candidate(late));
    let ratio = late_ms / early_ms;
    eprintln!(
        "user CPU per candidate: the first {BLOCK} {early_ms:.3} ms, the last {BLOCK} {late_ms:.3} ms (ratio {ratio:.2})"
    );
    assert!(
        ratio <= 1.3,
        "the last {BLOCK} candidates cost {late_ms:.3} ms of user CPU each, the first {BLOCK} {early_ms:.3} ms: {ratio:.2}x, more than 1.3x"
    );
}

#[test]
fn a_soak_of_real_sized_kernels_journals_at_most_2_kb_a_candidate_and_keeps_their_code() {
    let dir = tempfile::tempdir().unwrap();
    kernel_with_real_candidates(dir.path(), REAL_CANDIDATES + 1);
    assert_exit(&start_soak(dir.path(), REAL_CANDIDATES).finish(), 0);
    let run = only_run(dir.path());
    let bytes = std::fs::metadata(run.join("journal.jsonl")).unwrap().len();
    // Read as a resume reads it: the code each proposal's line names by hash, from its file.
    let journal = Journal::read(&run);
    let made = journal.of_type("candidate_finished").count();
    assert_eq!(
        made,
        REAL_CANDIDATES + 1,
        "the initial kernel and every candidate"
    );
    let per_candidate = bytes as f64 / made as f64;
    eprintln!("journal: {bytes} bytes, {per_candidate:.0} a candidate");
    assert!(
        per_candidate <= 2000.0,
        "{per_candidate:.0} bytes of journal a candidate, more than 2 kB"
    );
    let proposals: Vec<_> = journal.of_type("proposal_received").collect();
    assert_eq!(proposals.len(), REAL_CANDIDATES);
    for proposal in proposals {
        assert!(
            proposal["code"]
                .as_str()
                .is_some_and(|code| code.contains("VARIANT = ")),
            "the code read back: {proposal}"
        );
    }
}
