//! A whole NVIDIA run without a GPU: a fake nvidia-smi lists two GPUs and `--python` points at
//! a shim that runs the stand-in evaluator (tests/fixtures/standin_evaluator.py), which speaks the
//! real protocol and decides each candidate's fate by a `# standin:` marker in its source.

mod support;

use std::path::{Path, PathBuf};

use serde_json::Value;
use support::journal::finished;
use support::runs::journal;
use support::standin_node::Node;
use support::{gone_within, is_running};

/// Runs the node's one run, which must end as planned (its stderr shown otherwise): its run
/// directory and journal.
fn completed(node: &Node) -> (PathBuf, Vec<Value>) {
    let (output, run) = node.run();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let records = journal(&run);
    (run, records)
}

/// report.md holds each of `parts`.
fn assert_report_says(run: &Path, parts: &[&str]) {
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    for part in parts {
        assert!(report.contains(part), "{part:?} missing from {report}");
    }
}

#[test]
fn a_crashing_candidate_and_a_hanging_one_cost_only_themselves() {
    let node = Node::new(&[
        (
            "01_crash.py",
            "# standin: crash\ndef kernel_function(x):\n    return x + 9\n",
        ),
        (
            "02_hang.py",
            "# standin: hang\ndef kernel_function(x):\n    return x + 0\n",
        ),
        (
            "03_after_crash.py",
            "# standin: pass time_ms=1.5\ndef kernel_function(x):\n    return x * 1\n",
        ),
        (
            "04_after_hang.py",
            "# standin: pass time_ms=1.25\ndef kernel_function(x):\n    return x - 0\n",
        ),
    ]);
    let (run, records) = completed(&node);
    // Candidates 1 and 3 run on device 1, 2 and 4 on device 0.
    assert!(
        finished(&records, 1)["reason"]
            .as_str()
            .unwrap()
            .contains("died without answering")
    );
    assert!(
        finished(&records, 2)["reason"]
            .as_str()
            .unwrap()
            .contains("deadline of 2s")
    );
    assert_eq!(
        finished(&records, 3)["passed"],
        true,
        "the device's next candidate is unaffected by the crash"
    );
    assert_eq!(
        finished(&records, 4)["passed"],
        true,
        "the device's next candidate is unaffected by the hang"
    );
    assert!(
        records
            .iter()
            .any(|r| r["type"] == "child_deadline" && r["action"] == "terminate")
    );
    assert_eq!(
        std::fs::read_to_string(run.join("best_kernel.py")).unwrap(),
        "# standin: pass time_ms=1.25\ndef kernel_function(x):\n    return x - 0\n"
    );
    let references: Vec<(String, f64)> = records
        .iter()
        .filter(|r| r["type"] == "reference_timed")
        .map(|r| {
            (
                r["which"].as_str().unwrap().to_string(),
                r["time_ms"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        references,
        vec![("eager".to_string(), 3.0), ("compile".to_string(), 2.0)],
        "timed once per run, by the evaluator"
    );
    // The best, 1.25 ms, against compile's 2.0 and eager's 3.0.
    assert_report_says(
        &run,
        &[
            "PyTorch eager: 3.0000 ms; torch.compile: 2.0000 ms",
            "| 1.60× | 2.40× |",
        ],
    );
    let passes: Vec<u64> = records
        .iter()
        .filter(|r| r["type"] == "final_timed" && r["candidate"] == 4)
        .map(|r| r["pass"].as_u64().unwrap())
        .collect();
    assert_eq!(
        passes,
        vec![1, 2],
        "the best kernel re-timed twice in the finale"
    );
    let user_test = records
        .iter()
        .find(|r| r["type"] == "user_test_ran")
        .expect("the user's test.py ran");
    assert_eq!(user_test["passed"], true);
    assert_eq!(
        std::fs::read_to_string(run.join("final/kernel.py")).unwrap(),
        std::fs::read_to_string(run.join("best_kernel.py")).unwrap()
    );
    assert!(run.join("final/problem.py").is_file() && run.join("final/test.py").is_file());
    let verdicts: Vec<&Value> = records
        .iter()
        .filter(|r| r["type"] == "step_finished" && r["provenance"] == "measured")
        .collect();
    assert!(
        !verdicts.is_empty(),
        "figures from an evaluator are measured, not simulated"
    );
}

#[test]
fn each_worker_pins_its_evaluator_to_its_own_gpu() {
    let node = Node::new(&[
        (
            "01.py",
            "# standin: pass time_ms=1.5\ndef kernel_function(x):\n    return x * 1\n",
        ),
        (
            "02.py",
            "# standin: pass time_ms=1.4\ndef kernel_function(x):\n    return x * 2\n",
        ),
    ]);
    let (run, records) = completed(&node);
    let seen: Vec<(u64, String)> = records
        .iter()
        .filter(|r| r["type"] == "evaluator_started")
        .map(|r| {
            (
                r["device"].as_u64().unwrap(),
                r["ready"]["device"]["uuid"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(
        seen.contains(&(0, "GPU-aaaaaaaa-0000-0000-0000-000000000000".to_string())),
        "{seen:?}"
    );
    assert!(
        seen.contains(&(1, "GPU-bbbbbbbb-0000-0000-0000-000000000000".to_string())),
        "{seen:?}"
    );
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(
        report.contains(
            "| 1 | NVIDIA H200 | Stand-in GPU GPU-bbbbbbbb-0000-0000-0000-000000000000 at unknown;"
        ),
        "{report}"
    );
    for device in ["0", "1"] {
        assert!(
            run.join("devices")
                .join(device)
                .join("evaluator.log")
                .is_file()
        );
    }
}

#[test]
fn a_candidate_that_tampers_is_rejected_as_such_and_costs_no_other_candidate_anything() {
    let pidfile = tempfile::NamedTempFile::new().unwrap();
    let orphan = format!(
        "# standin: orphan pidfile={}\ndef kernel_function(x):\n    return x + 5\n",
        pidfile.path().display()
    );
    let node = Node::new(&[
        (
            "01_tamper.py",
            "# standin: tamper what=draw 0 reference 0 changed (its GPU checksum differs)\ndef kernel_function(x):\n    return x + 1\n",
        ),
        (
            "02_honest.py",
            "# standin: pass time_ms=1.5\ndef kernel_function(x):\n    return x * 1\n",
        ),
        (
            "03_forges_the_audit.py",
            "# standin: forge_checksums\ndef kernel_function(x):\n    return x + 2\n",
        ),
        (
            "04_writes_the_channel.py",
            "# standin: write_channel\ndef kernel_function(x):\n    return x + 3\n",
        ),
        ("05_orphan.py", orphan.as_str()),
        (
            "06_honest_again.py",
            "# standin: pass time_ms=1.5\ndef kernel_function(x):\n    same = x * 1\n    return same\n",
        ),
    ])
    .on_one_device()
    .without_sandbox();
    let (run, records) = completed(&node);
    let reason = |candidate: u64| {
        finished(&records, candidate)["reason"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    assert!(
        reason(1).contains(
            "tampered with the evaluator's state: draw 0 reference 0 changed (its GPU checksum differs)"
        ),
        "{}",
        reason(1)
    );
    assert!(
        reason(3).contains(
            "tampered with the evaluator's state: draw 0 reference 0 changed (kactors compared"
        ),
        "{}",
        reason(3)
    );
    assert!(
        reason(4).contains(
            "tampered with the evaluator's state: it wrote into the evaluator's reply channel"
        ),
        "{}",
        reason(4)
    );
    assert!(reason(5).contains("left a process"), "{}", reason(5));
    let orphan_pid: i32 = std::fs::read_to_string(pidfile.path())
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        !is_running(orphan_pid),
        "the zygote ended the process the candidate left behind"
    );
    for honest in [2, 6] {
        assert_eq!(
            finished(&records, honest)["passed"],
            true,
            "candidate {honest}: {}",
            reason(honest)
        );
        assert_eq!(finished(&records, honest)["time_ms"], 1.5);
    }
    // A fresh child after candidates 1, 4 and 5 (generations 1, 2, 3 of the zygote); after 3,
    // whose child's own audit was not to be trusted, a whole new evaluator (generation 0).
    let generations: Vec<u64> = records
        .iter()
        .filter(|r| r["type"] == "evaluator_started")
        .map(|r| r["ready"]["generation"].as_u64().unwrap())
        .collect();
    assert!(generations.len() >= 4, "{generations:?}");
    assert!(generations.contains(&1), "{generations:?}");
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(
        report.contains(
            "Tampered with the evaluator's state (rejected; the evaluator restarted): candidates 1, 3, 4."
        ),
        "{report}"
    );
}

#[test]
fn inputs_that_fit_only_twice_keep_two_draws_and_the_journal_says_so() {
    let node = Node::new(&[(
        "01.py",
        "# standin: pass time_ms=1.5\ndef kernel_function(x):\n    return x * 1\n",
    )])
    .with_problem("# standin: draws=2\nclass Model:\n    pass\ndef get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n");
    let (_, records) = completed(&node);
    let started = records
        .into_iter()
        .find(|r| r["type"] == "evaluator_started")
        .unwrap();
    assert_eq!(started["ready"]["draws"], 2);
    assert_eq!(started["ready"]["seeds"], 3);
    assert!(started["ready"]["memory"]["needed_bytes"].is_array());
}

#[test]
fn inputs_that_do_not_fit_twice_refuse_the_run_with_exit_2() {
    let node = Node::new(&[(
        "01.py",
        "# standin: pass time_ms=1.5\ndef kernel_function(x):\n    return x * 1\n",
    )])
    .with_problem("# standin: no_fit\nclass Model:\n    pass\ndef get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n");
    let (output, run) = node.run();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "the problem's inputs do not fit on Stand-in GPU: 30.0 GiB needed, 20.0 GiB free"
        ),
        "{stderr}"
    );
    let records = journal(&run);
    let last = records.last().unwrap();
    assert_eq!(last["type"], "run_finished");
    assert_eq!(last["outcome"], "refused");
}

/// Issue 10: a KernelAgent kernel directory has no candidates/ folder; with the replay provider
/// the run evaluates the initial kernel, says the folder is missing, and ends as planned.
#[test]
fn a_kernel_directory_without_candidates_ends_after_the_initial_kernel() {
    let node = Node::new(&[]);
    std::fs::remove_dir(node.dir.path().join("kernel/candidates")).unwrap();
    let (output, run) = node.run();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(
            "warning: the replay folder kernel/candidates does not exist: the replay provider has \
             no candidates"
        ),
        "{stderr}"
    );
    let records = journal(&run);
    assert_eq!(finished(&records, 0)["passed"], true);
    let last = records.last().unwrap();
    assert_eq!(
        (last["type"].as_str(), last["outcome"].as_str()),
        (Some("run_finished"), Some("completed"))
    );
    assert_eq!(last["best_candidate"], 0);
}

#[test]
fn the_caches_of_candidates_that_can_no_longer_become_parents_are_removed_and_their_logs_kept() {
    let node = Node::new(&[
        (
            "01.py",
            "# standin: pass time_ms=1.5\ndef kernel_function(x):\n    return x * 1\n",
        ),
        (
            "02.py",
            "# standin: pass time_ms=1.2\ndef kernel_function(x):\n    return x + 0\n",
        ),
        (
            "03.py",
            "# standin: pass time_ms=3.0\ndef kernel_function(x):\n    return x - 0\n",
        ),
        (
            "04.py",
            "# standin: fail reason=wrong\ndef kernel_function(x):\n    return x + 1\n",
        ),
    ])
    .on_one_device()
    // A sandboxed evaluator keeps its caches in its scratch, a tmpfs that goes with it: the
    // caches removed here are those of an evaluator without one.
    .without_sandbox();
    let (run, records) = completed(&node);
    // The beam keeps 2 and 1; 3 is slower and 4 failed. The initial kernel stays for the
    // finale, which times it again.
    let mut removed: Vec<(u64, Vec<String>, u64)> = records
        .iter()
        .filter(|r| r["type"] == "caches_removed")
        .map(|r| {
            let paths = r["paths"].as_array().unwrap();
            (
                r["candidate"].as_u64().unwrap(),
                paths
                    .iter()
                    .map(|p| p.as_str().unwrap().to_string())
                    .collect(),
                r["bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    removed.sort();
    assert_eq!(
        removed,
        [
            (3, vec!["candidates/3/triton-cache".to_string()], 4096),
            (4, vec!["candidates/4/triton-cache".to_string()], 4096),
        ]
    );
    for candidate in [0, 1, 2] {
        assert!(
            run.join(format!("candidates/{candidate}/triton-cache/standin.cubin"))
                .is_file(),
            "candidate {candidate} keeps its cache"
        );
    }
    for candidate in [3, 4] {
        let folder = run.join(format!("candidates/{candidate}"));
        assert!(!folder.join("triton-cache").exists());
        for kept in ["kernel.py", "prompt.md", "reply.md"] {
            assert!(
                folder.join(kept).is_file(),
                "candidate {candidate}'s {kept}"
            );
        }
    }
    let measured = records
        .iter()
        .rev()
        .find(|r| r["type"] == "run_dir_measured")
        .expect("the run directory is measured");
    assert!(measured["bytes"].as_u64().unwrap() > 3 * 4096);
    assert_report_says(
        &run,
        &[
            "## Disk\n\nThe run directory holds ",
            "The caches of 2 candidate(s) that could no longer become parents were removed as the run went: 8.19 kB (8192 bytes).",
        ],
    );
}

/// Issue 14: kactors killed outright (SIGKILL: no handler runs, no group is ended) leaves no
/// evaluator behind: every child dies with its parent (PR_SET_PDEATHSIG).
#[test]
fn sigkill_of_kactors_leaves_no_evaluator_behind() {
    let pidfile = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(pidfile.path(), "").unwrap();
    let node = Node::new(&[(
        "01_hang.py",
        &format!(
            "# standin: hang pidfile={}\ndef kernel_function(x):\n    return x + 1\n",
            pidfile.path().display()
        ),
    )])
    .on_one_device()
    .without_sandbox();
    let mut kactors = node
        .run_command()
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let hung: i32 = loop {
        if let Ok(pid) = std::fs::read_to_string(pidfile.path())
            .unwrap()
            .trim()
            .parse()
        {
            break pid;
        }
        assert!(
            std::time::Instant::now() < give_up,
            "the candidate never ran"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    kactors.kill().unwrap();
    kactors.wait().unwrap();
    assert!(
        gone_within(hung, std::time::Duration::from_secs(5)),
        "the evaluator child {hung} outlived kactors"
    );
}

/// Issue 18: no kernel moves its 4 GiB of inputs faster than the device's memory allows. A
/// time below the H200's speed of light (a memo of earlier answers, say) is rejected naming
/// both figures, and every time is reported as a percentage of that floor.
#[test]
fn a_time_below_the_devices_speed_of_light_is_rejected_naming_both_figures() {
    let node = Node::new(&[
        (
            "01_memo.py",
            "# standin: pass time_ms=0.015\ndef kernel_function(x):\n    return x + 1\n",
        ),
        (
            "02_honest.py",
            "# standin: pass time_ms=1.5\ndef kernel_function(x):\n    return x + 2\n",
        ),
        (
            "03_memo_of_seen_content.py",
            "# standin: pass time_ms=1.6 seen_ms=0.02\ndef kernel_function(x):\n    return x + 3\n",
        ),
    ]);
    let (run, records) = completed(&node);
    let memo = finished(&records, 3)["reason"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        memo.contains("on content it had seen before it timed 0.02 ms, but moving its 4.0 GiB")
            && memo.ends_with(
                "on new content it took 1.6 ms: it answers from a memo of earlier calls"
            ),
        "{memo}"
    );
    let reason = finished(&records, 1)["reason"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        reason.contains(
            "timed 0.015 ms, but moving its 4.0 GiB of inputs and outputs takes at least 0.895 \
             ms at the NVIDIA H200's 4.8 TB/s"
        ),
        "{reason}"
    );
    let honest = records
        .iter()
        .find(|r| r["type"] == "evaluated" && r["candidate"] == 2)
        .unwrap();
    assert!(
        (honest["floor_ms"].as_f64().unwrap() - 0.8948).abs() < 1e-3,
        "{honest}"
    );
    assert!((honest["speed_of_light_pct"].as_f64().unwrap() - 59.65).abs() < 0.1);
    let started = records
        .iter()
        .find(|r| r["type"] == "evaluator_started")
        .unwrap();
    assert_eq!(started["floor"]["known"]["basis"], "inputs_and_outputs");
    assert_eq!(
        std::fs::read_to_string(run.join("best_kernel.py")).unwrap(),
        "# standin: pass time_ms=1.5\ndef kernel_function(x):\n    return x + 2\n"
    );
    assert_report_says(
        &run,
        &[
            "Speed of light: 0.895 ms on the NVIDIA H200, moving its inputs (4.0 GiB) read once",
            "| 2 | 1.5000 | 59.7% |",
            "59.7% of the speed of light). Source: best_kernel.py.",
        ],
    );
}

/// Issue 18: the finale checks the final beam once more in a fresh evaluator, on draws no
/// candidate saw. The fastest kernel, right only on the search's draws, fails there: it leaves
/// the final beam, the report names it, and the next fastest is the run's best.
#[test]
fn a_kernel_wrong_on_draws_no_candidate_saw_leaves_the_final_beam_and_the_next_is_best() {
    let node = Node::new(&[
        (
            "01_memoized.py",
            "# standin: pass time_ms=1.0 fresh_draws=fail\ndef kernel_function(x):\n    return x + 1\n",
        ),
        (
            "02_honest.py",
            "# standin: pass time_ms=1.2\ndef kernel_function(x):\n    return x + 2\n",
        ),
    ]);
    let (run, records) = completed(&node);
    let rechecks: Vec<(u64, bool)> = records
        .iter()
        .filter(|r| r["type"] == "final_rechecked")
        .map(|r| {
            (
                r["candidate"].as_u64().unwrap(),
                r["passed"].as_bool().unwrap(),
            )
        })
        .collect();
    assert!(rechecks.contains(&(1, false)), "{rechecks:?}");
    assert!(rechecks.contains(&(2, true)), "{rechecks:?}");
    assert!(
        records
            .iter()
            .all(|r| !(r["type"] == "final_timed" && r["candidate"] == 1)),
        "a kernel that fails the re-check is not timed"
    );
    let end = records.last().unwrap();
    assert_eq!(end["type"], "run_finished");
    assert_eq!(end["best_candidate"], 2);
    assert_eq!(
        std::fs::read_to_string(run.join("best_kernel.py")).unwrap(),
        "# standin: pass time_ms=1.2\ndef kernel_function(x):\n    return x + 2\n"
    );
    assert_report_says(
        &run,
        &[
            "1 failed and left the final beam",
            "- candidate 1: wrong on the draws of seeds 3 and on (stand-in)",
            "Candidate 2: 1.2000 ms",
        ],
    );
}

/// Four H200s as the fake nvidia-smi lists them.
const FOUR_H200: &str = "for i in 0 1 2 3; do echo \"$i, NVIDIA H200, GPU-aaaaaaaa-0000-0000-0000-00000000000$i, 00000000:00:0$i.0\"; done\n";

const NO_WORKER_COUNT: &str = "platform: nvidia\nprovider: replay\ntest_timeout_s: 2\nkill_grace_s: 0.3\nmax_rounds: 1\nstrategy_config:\n  num_top_kernels: 1\n  num_bottlenecks: 1\n";

/// Issue 22: a strategy that sets no worker count uses every visible device; one that sets
/// num_workers (as KernelAgent's files do) keeps it, and one line says how many were left
/// unused.
#[test]
fn every_visible_gpu_is_used_unless_num_workers_says_otherwise() {
    let devices_of = |records: &[Value]| records[0]["devices"].as_array().unwrap().len();
    let every = Node::new(&[])
        .with_gpus(FOUR_H200)
        .with_strategy(NO_WORKER_COUNT);
    let (output, run) = every.run();
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(devices_of(&journal(&run)), 4);
    assert!(!String::from_utf8_lossy(&output.stderr).contains("left unused"));

    let kernel_agent = Node::new(&[])
        .with_gpus(FOUR_H200)
        .with_strategy(&format!("{NO_WORKER_COUNT}num_workers: 3\n"));
    let (output, run) = kernel_agent.run();
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(devices_of(&journal(&run)), 3);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let said: Vec<&str> = stderr
        .lines()
        .filter(|line| line.contains("left unused"))
        .collect();
    assert_eq!(
        said,
        [
            "kactors: using 3 of the 4 devices available (num_workers or --workers): 1 left unused; without either, a run uses every one"
        ],
        "{stderr}"
    );
}

/// Issue 23: on one device the start-up goes evaluation, profile, first request, references,
/// in rounds and in steady search; the steps before the actors are journaled, and report.md
/// draws the start-up.
#[test]
fn the_initial_kernel_is_profiled_then_asked_about_and_the_references_are_timed_after() {
    for pacing in ["", "search: steady\n"] {
        let node = Node::new(&[(
            "01.py",
            "# standin: pass time_ms=1.5\ndef kernel_function(x):\n    return x * 1\n",
        )])
        .with_strategy(&format!(
            "platform: nvidia\nprovider: replay\nnum_workers: 1\ntest_timeout_s: 5\nkill_grace_s: 0.3\nmax_rounds: 1\nmax_refinements: 0\n{pacing}platform_kwargs:\n  ncu_bin_path: {}\nstrategy_config:\n  num_top_kernels: 1\n  num_bottlenecks: 1\n",
            support::fixtures().join("nvidia/fake-ncu").display()
        ));
        // The profiled wrapper's measured call launches what the stand-in's verification did.
        let output = node
            .run_command()
            .env("STANDIN_KERNELS", r#"["standin_kernel"]"#)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{output:?}");
        let run = node.run_dir();
        let records = journal(&run);
        let position = |what: &str, test: &dyn Fn(&Value) -> bool| {
            records
                .iter()
                .position(test)
                .unwrap_or_else(|| panic!("{pacing:?}: no {what} in {records:#?}"))
        };
        let step_started = |step: &'static str| {
            move |r: &Value| r["type"] == "step_started" && r["step"] == step && r["candidate"] == 0
        };
        let evaluated = position("initial evaluation", &|r: &Value| {
            r["type"] == "evaluated" && r["candidate"] == 0
        });
        let profile = position("initial profile", &step_started("profile"));
        let profiled = position("initial profile's record", &|r: &Value| {
            r["type"] == "profile_recorded" && r["candidate"] == 0
        });
        let first_request = position("first request", &|r: &Value| {
            r["type"] == "analysis_requested" || r["type"] == "proposal_requested"
        });
        let references = position("references", &step_started("reference"));
        assert!(
            evaluated < profile && profiled < first_request && first_request < references,
            "{pacing:?}: evaluated {evaluated}, profile {profile}, profiled {profiled}, first \
             request {first_request}, references {references}"
        );
        assert_eq!(records[first_request]["type"], "analysis_requested");
        let steps: Vec<&str> = records
            .iter()
            .filter(|r| r["type"] == "startup_step")
            .map(|r| r["step"].as_str().unwrap())
            .collect();
        assert_eq!(steps, ["launch", "preflight"], "{pacing:?}");
        assert_eq!(
            records[1]["type"], "startup_step",
            "right after run_started"
        );
        assert_report_says(
            &run,
            &[
                "## Start-up",
                "The first LLM request went out ",
                "| the initial kernel's profile | ",
                "| PyTorch's references (eager, torch.compile) | ",
            ],
        );
    }
}

/// Issue 23: a candidate whose verified call ran the compiled code of one timed before it is
/// its duplicate, "same compiled code", and is not timed; report.md counts both kinds of
/// duplicates.
#[test]
fn a_candidate_with_an_earlier_ones_compiled_code_is_a_duplicate_and_not_timed() {
    let node = Node::new(&[
        (
            "01.py",
            "# standin: pass time_ms=1.5 compiled=one\ndef kernel_function(x):\n    return x * 1\n",
        ),
        (
            "02_renamed.py",
            "# standin: pass time_ms=1.2 compiled=one\ndef kernel_function(y):\n    return y * 1\n",
        ),
        (
            "03_same_tokens.py",
            "# standin: pass time_ms=1.0\ndef kernel_function(x):\n    return x * 1\n",
        ),
    ])
    .on_one_device();
    let (run, records) = completed(&node);
    assert_eq!(finished(&records, 1)["passed"], true);
    let compiled = finished(&records, 2);
    assert_eq!(compiled["passed"], false);
    assert_eq!(compiled["duplicate_of"], 1);
    assert_eq!(compiled["reason"], "same compiled code as candidate 1");
    let tokens = finished(&records, 3);
    assert_eq!(tokens["duplicate_of"], 1);
    assert_eq!(tokens["reason"], "identical to candidate 1");
    let timed: Vec<u64> = records
        .iter()
        .filter(|r| r["type"] == "step_started" && r["step"] == "time")
        .map(|r| r["candidate"].as_u64().unwrap())
        .collect();
    assert_eq!(timed, [0, 1], "2 verified with 1's code and was not timed");
    let evaluated = records
        .iter()
        .find(|r| r["type"] == "evaluated" && r["candidate"] == 2)
        .unwrap();
    assert_eq!(
        evaluated["compiled"],
        records
            .iter()
            .find(|r| r["type"] == "evaluated" && r["candidate"] == 1)
            .unwrap()["compiled"]
    );
    assert!(evaluated["time_ms"].is_null(), "{evaluated}");
    assert_report_says(
        &run,
        &[
            "Duplicates of an earlier candidate: 1 with the same code (its tokens, comments and spacing aside; not evaluated), 1 with the same compiled code (verified, not timed).",
        ],
    );
}
