//! Issue 14: one search across the GPUs of several nodes, on a real Slurm cluster. These tests
//! need the two-node test cluster of scripts/slurm/cluster.sh (Debian's slurmd, slurmctld,
//! slurm-client and munge, root): `.ci/run` starts it, runs them and stops it. By hand:
//!
//!     scripts/slurm/cluster.sh start && export SLURM_CONF=/tmp/kactors-slurm/etc/slurm.conf
//!     cargo nextest run --test slurm --run-ignored ignored-only --test-threads 1
//!     scripts/slurm/cluster.sh stop

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::Value;
use support::runs::journal;
use support::slurm::Allocation;
use support::slurm_run::{
    SlurmRun, agent_of, kill_step_on_its_node, none_left_within, passing, wait_with_limit,
};
use support::{gone_within, is_running};

const ONE_ROUND_OF_EIGHT: &str =
    "max_rounds: 1\nstrategy_config:\n  num_top_kernels: 2\n  num_bottlenecks: 4\n";

/// In one round of eight on eight devices, candidate i runs on device i mod 8: these on node 2.
const ON_NODE_2: [u64; 4] = [4, 5, 6, 7];

/// The device table of `run_started`: each device id's `node:index`.
fn device_table(records: &[Value]) -> BTreeMap<u64, String> {
    records[0]["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            (
                row["device"].as_u64().unwrap(),
                format!("{}:{}", row["node"].as_str().unwrap(), row["index"]),
            )
        })
        .collect()
}

/// The step each node's agent ran as, from the device table.
fn steps_by_node(records: &[Value]) -> BTreeMap<String, String> {
    records[0]["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            (
                row["node"].as_str().unwrap().to_string(),
                row["step"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn evaluated(records: &[Value], candidate: u64) -> Vec<&Value> {
    records
        .iter()
        .filter(|r| r["type"] == "evaluated" && r["candidate"] == candidate)
        .collect()
}

/// A candidate's source from its `# standin:` line, unique by its multiplier.
fn candidate(name: &str, marker: &str, multiplier: usize) -> (String, String) {
    (
        name.to_string(),
        format!("# standin: {marker}\ndef kernel_function(x):\n    return x * {multiplier}\n"),
    )
}

#[test]
#[ignore = "needs the Slurm test cluster (scripts/slurm/cluster.sh); .ci/run starts it and runs these"]
fn a_step_runs_on_each_node_of_a_two_node_allocation() {
    let allocation = Allocation::new(2, 4);
    let output = allocation
        .srun(&[
            "--nodes=2",
            "--ntasks-per-node=1",
            "printenv",
            "SLURMD_NODENAME",
        ])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let nodes: BTreeSet<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(nodes, BTreeSet::from(["n1".to_string(), "n2".to_string()]));
}

/// Issue 14: one search uses the GPUs of both nodes; the journal's device table names each
/// device's node and Slurm's index there, and every candidate's device is one of them.
#[test]
#[ignore = "needs the Slurm test cluster (scripts/slurm/cluster.sh); .ci/run starts it and runs these"]
fn every_device_of_both_nodes_gets_candidates_and_the_journal_names_their_nodes() {
    let allocation = Allocation::new(2, 4);
    let run = SlurmRun::new(
        &passing(16),
        "test_timeout_s: 5\nmax_rounds: 2\nstrategy_config:\n  num_top_kernels: 2\n  num_bottlenecks: 4\n",
    );
    let output = run.command(&allocation.job, "run").output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let runs = run.runs();
    let records = journal(&runs[0]);
    assert_eq!(records[0]["type"], "run_started");
    let table = device_table(&records);
    let expected: BTreeMap<u64, String> = (0..8)
        .map(|device| (device, format!("n{}:{}", device / 4 + 1, device % 4)))
        .collect();
    assert_eq!(table, expected);
    let used: BTreeSet<String> = records
        .iter()
        .filter(|record| record["type"] == "evaluated")
        .map(|record| table[&record["device"].as_u64().unwrap()].clone())
        .collect();
    assert_eq!(used, expected.values().cloned().collect(), "{stderr}");
    // Each evaluator reported the GPU it sees under its pin, on its own node.
    for record in records.iter().filter(|r| r["type"] == "evaluator_started") {
        let location = &table[&record["device"].as_u64().unwrap()];
        let node = location.split(':').next().unwrap();
        assert_eq!(record["ready"]["node"], node);
        assert!(
            record["ready"]["device"]["uuid"]
                .as_str()
                .unwrap()
                .starts_with(&format!("GPU-{node}-")),
            "{record}"
        );
    }
    assert!(
        allocation.no_steps_within(Duration::from_secs(10)),
        "{:?}",
        allocation.steps()
    );
    assert!(runs[0].join("agents/n1.log").is_file() && runs[0].join("agents/n2.log").is_file());
}

/// Issue 14: a hung evaluator on node 2 is ended by that node's agent within its deadline plus
/// the grace, and nothing of it is left; the other candidates are not touched.
#[test]
#[ignore = "needs the Slurm test cluster (scripts/slurm/cluster.sh); .ci/run starts it and runs these"]
fn a_hung_evaluator_on_node_2_is_ended_within_its_deadline_plus_grace() {
    let allocation = Allocation::new(2, 4);
    let pidfile = tempfile::NamedTempFile::new().unwrap();
    // Candidate i runs on device i mod 8: candidate 5 on device 5, node 2's second GPU.
    let mut candidates = passing(8);
    candidates[4] = candidate(
        "05.py",
        &format!("hang pidfile={}", pidfile.path().display()),
        5,
    );
    // The sandbox off: the test reads the hung child's pid, which the stand-in writes outside
    // any sandbox's folders, and a pid inside a sandbox's namespace names nothing out here.
    let run = SlurmRun::new(
        &candidates,
        &format!("test_timeout_s: 2\nsandbox: off\n{ONE_ROUND_OF_EIGHT}"),
    );
    let output = run.command(&allocation.job, "run").output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let records = journal(&run.runs()[0]);
    assert_eq!(device_table(&records)[&5], "n2:1");
    let hung = evaluated(&records, 5);
    assert_eq!(hung.len(), 1);
    assert_eq!(hung[0]["device"], 5);
    let reason = hung[0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("exceeded its deadline of 2s and was killed"),
        "{reason}"
    );
    let at = |kind: &str| {
        let record = records
            .iter()
            .find(|r| r["type"] == kind && r["candidate"] == 5 && r["step"] == "verify")
            .unwrap();
        let t = record["t"].as_str().unwrap();
        // 2026-12-02T10:35:44.123Z: seconds within the day are enough for a short run.
        let clock: Vec<f64> = t[11..23]
            .split(':')
            .map(|part| part.parse().unwrap())
            .collect();
        clock[0] * 3600.0 + clock[1] * 60.0 + clock[2]
    };
    let took = at("step_finished") - at("step_started");
    // The head's clock also sees the request's way to node 2 and the reply's way back over
    // srun, and a 2-core CI machine running the cluster besides: 3 s of slack for those.
    assert!(
        (2.0..2.0 + 0.5 + 3.0).contains(&took),
        "the hung verification took {took} s: its deadline is 2 s and the grace 0.5 s"
    );
    let pid: i32 = std::fs::read_to_string(pidfile.path())
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        !is_running(pid),
        "the hung evaluator child {pid} is still there"
    );
    for other in (1..=8).filter(|c| *c != 5) {
        assert_eq!(
            evaluated(&records, other)[0]["outcome"],
            "verified",
            "candidate {other}"
        );
    }
    assert_eq!(
        none_left_within(run.root(), Duration::from_secs(5)).len(),
        0
    );
    assert!(allocation.no_steps_within(Duration::from_secs(10)));
}

/// Issue 14: an agent that stops answering (SIGSTOP: alive, deaf) is cancelled through
/// scancel, TERM then KILL; its node's devices fail what they had as lost (it runs again on
/// node 1), and its node's agent is started again.
#[test]
#[ignore = "needs the Slurm test cluster (scripts/slurm/cluster.sh); .ci/run starts it and runs these"]
fn an_agent_that_stops_answering_is_cancelled_through_scancel() {
    let allocation = Allocation::new(2, 4);
    let mut candidates = passing(16);
    // Candidate i runs on device i mod 8: node 2's in the first round are 4 to 7, and they
    // take long enough to be caught in the act.
    for (index, multiplier) in [(3, 4), (4, 5), (5, 6), (6, 7)] {
        candidates[index] = candidate(&format!("{multiplier:02}.py"), "pass sleep_s=2", multiplier);
    }
    let run = SlurmRun::new(
        &candidates,
        "test_timeout_s: 30\nagent_timeout_s: 2\nmax_rounds: 2\nstrategy_config:\n  num_top_kernels: 2\n  num_bottlenecks: 4\n",
    );
    let mut kactors = run.spawn(&allocation.job);
    run.wait_for_record(Duration::from_secs(60), |r| {
        r["type"] == "step_started" && r["candidate"] == 5
    });
    let agent = agent_of(run.root(), "n2");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(agent.pid),
        nix::sys::signal::Signal::SIGSTOP,
    )
    .unwrap();
    let status = wait_with_limit(&mut kactors, Duration::from_secs(120));
    assert_eq!(status.code(), Some(0), "{}", run.stderr());
    let run_dir = &run.runs()[0];
    let records = journal(run_dir);
    let step = &steps_by_node(&records)["n2"];
    let log = std::fs::read_to_string(run_dir.join("kactors.log")).unwrap();
    for signal in ["TERM", "KILL"] {
        assert!(
            log.contains(&format!("scancel --signal={signal} {step}")),
            "{signal} not sent to {step}:\n{log}"
        );
    }
    assert!(
        gone_within(agent.pid, Duration::from_secs(5)),
        "the stopped agent {} is still there: {:?}",
        agent.pid,
        std::fs::read_to_string(format!("/proc/{}/status", agent.pid))
    );
    let lost = evaluated(&records, 5)[0]["reason"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        lost.contains("device lost: the agent of node n2 stopped answering")
            && lost.contains(&format!("its step {step} was cancelled with scancel")),
        "{lost}"
    );
    assert!(
        records
            .iter()
            .any(|r| r["type"] == "agent_restarted" && r["node"] == "n2" && r["step"] != *step),
        "node 2's agent was not started again: {}",
        run.stderr()
    );
    for on_node_1 in [1, 2, 3, 8] {
        assert_eq!(
            evaluated(&records, on_node_1)[0]["outcome"],
            "verified",
            "candidate {on_node_1} ran on node 1"
        );
    }
    assert!(
        !allocation.steps().iter().any(|(id, _)| id == step),
        "{:?}",
        allocation.steps()
    );
    assert_eq!(
        none_left_within(run.root(), Duration::from_secs(10)).len(),
        0
    );
}

/// Issue 14: SIGKILL of kactors leaves no step in the allocation and no process of the run on
/// either node: srun dies with kactors (its parent-death signal), Slurm then cancels the step,
/// and the agents' children die with the agents.
#[test]
#[ignore = "needs the Slurm test cluster (scripts/slurm/cluster.sh); .ci/run starts it and runs these"]
fn sigkill_of_kactors_leaves_no_step_and_no_process_on_either_node() {
    let allocation = Allocation::new(2, 4);
    let candidates: Vec<(String, String)> = (1..=16)
        .map(|i| candidate(&format!("{i:02}.py"), "pass sleep_s=1", i))
        .collect();
    let run = SlurmRun::new(
        &candidates,
        "test_timeout_s: 30\nmax_rounds: 2\nstrategy_config:\n  num_top_kernels: 2\n  num_bottlenecks: 4\n",
    );
    let mut kactors = run.spawn(&allocation.job);
    for device in [1, 5] {
        run.wait_for_record(Duration::from_secs(60), |r| {
            r["type"] == "evaluator_started" && r["device"] == device
        });
    }
    assert_eq!(allocation.steps().len(), 2, "one agent step per node");
    assert!(!processes_of_both_nodes(run.root()).is_empty());
    kactors.kill().unwrap();
    kactors.wait().unwrap();
    assert!(
        allocation.no_steps_within(Duration::from_secs(5)),
        "steps left: {:?}",
        allocation.steps()
    );
    let left = none_left_within(run.root(), Duration::from_secs(5));
    assert!(left.is_empty(), "{left:?}");
}

fn processes_of_both_nodes(dir: &std::path::Path) -> Vec<support::slurm_run::Process> {
    let _ = (agent_of(dir, "n1"), agent_of(dir, "n2"));
    support::slurm_run::processes_mentioning(dir)
}

/// `srun` as the tests' PATH finds it, wrapped so that only the first step on node 2 starts: a
/// later one fails as srun does for a node that is down.
fn srun_starting_node_2_once(bin: &std::path::Path) {
    support::write_executable(
        &bin.join("srun"),
        &format!(
            r#"#!/bin/sh
for arg in "$@"; do
  if [ "$arg" = --nodelist=n2 ]; then
    if [ -e "{started}" ]; then
      echo "srun: error: Unable to create step for job: Required node not available (down, drained or reserved)" >&2
      exit 1
    fi
    touch "{started}"
  fi
done
exec '{real}' "$@"
"#,
            started = bin.join("n2-started").display(),
            real = real_srun().display()
        ),
    );
}

/// The srun on the tests' PATH.
fn real_srun() -> std::path::PathBuf {
    std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join("srun"))
                .find(|srun| srun.is_file())
        })
        .expect("srun is on PATH")
}

/// One round of eight on both nodes: candidates 4 to 7 run on node 2 and take `sleep_s` each,
/// the others pass at once on node 1. Node 2 dies (its agent step's slurmstepd and every process
/// of the step killed) once its four are in flight, and stays down (srun can start no step on
/// it again); answers the run, ended as planned.
fn kill_node_2_mid_run(allocation: &Allocation, sleep_s: u32) -> SlurmRun {
    let candidates: Vec<(String, String)> = (1..=8)
        .map(|i| {
            let marker = if ON_NODE_2.contains(&i) {
                format!("pass sleep_s={sleep_s}")
            } else {
                "pass".to_string()
            };
            candidate(
                &format!("{i:02}.py"),
                &format!("{marker} time_ms=1.{i}"),
                i as usize,
            )
        })
        .collect();
    let run = SlurmRun::new(
        &candidates,
        &format!("test_timeout_s: 60\nagent_timeout_s: 2\n{ONE_ROUND_OF_EIGHT}"),
    );
    srun_starting_node_2_once(&run.root().join("bin"));
    let mut kactors = run.spawn(&allocation.job);
    for candidate in ON_NODE_2 {
        run.wait_for_record(Duration::from_secs(60), |r| {
            r["type"] == "step_started" && r["candidate"] == candidate
        });
    }
    let records = journal(&run.runs()[0]);
    kill_step_on_its_node(&steps_by_node(&records)["n2"]);
    let status = wait_with_limit(&mut kactors, Duration::from_secs(180));
    assert_eq!(status.code(), Some(0), "{}", run.stderr());
    run
}

/// Issue 14: a node that dies mid-run (its slurmstepd and every process of its step killed)
/// costs only the candidates it had in flight; the other node's go on, and the run ends.
#[test]
#[ignore = "needs the Slurm test cluster (scripts/slurm/cluster.sh); .ci/run starts it and runs these"]
fn a_node_killed_mid_run_costs_only_its_in_flight_candidates() {
    let allocation = Allocation::new(2, 4);
    let run = kill_node_2_mid_run(&allocation, 8);
    let records = journal(&run.runs()[0]);
    for lost in ON_NODE_2 {
        let first = evaluated(&records, lost)[0];
        let reason = first["reason"]
            .as_str()
            .unwrap_or_else(|| panic!("{first}"));
        assert!(
            reason.contains("device lost: the agent of node n2"),
            "candidate {lost}: {reason}"
        );
    }
    for kept in [1, 2, 3, 8] {
        let attempts = evaluated(&records, kept);
        assert_eq!(attempts.len(), 1, "candidate {kept} ran once");
        assert_eq!(attempts[0]["outcome"], "verified", "candidate {kept}");
    }
    assert_eq!(
        none_left_within(run.root(), Duration::from_secs(10)).len(),
        0
    );
}

/// Issue 14: the candidates a dead node had in flight run again on a live device, in rounds
/// candidate i on live device i mod (live devices); node 2's agent cannot be started again, so
/// its devices are journaled as lost once, after the failed restart, and the report says which
/// and when.
#[test]
#[ignore = "needs the Slurm test cluster (scripts/slurm/cluster.sh); .ci/run starts it and runs these"]
fn the_candidates_a_dead_node_had_in_flight_run_again_on_the_live_node() {
    let allocation = Allocation::new(2, 4);
    let run = kill_node_2_mid_run(&allocation, 5);
    let run_dir = &run.runs()[0];
    let records = journal(run_dir);
    let table = device_table(&records);
    for lost in ON_NODE_2 {
        let attempts = evaluated(&records, lost);
        assert_eq!(attempts.len(), 2, "candidate {lost}: {attempts:?}");
        assert_eq!(attempts[0]["outcome"], "device_lost", "{attempts:?}");
        let last = attempts[1];
        assert_eq!(
            last["outcome"], "verified",
            "candidate {lost}: {attempts:?}"
        );
        // Four live devices left, node 1's: candidate i goes to device i mod 4.
        assert_eq!(
            last["device"].as_u64().unwrap(),
            lost % 4,
            "candidate {lost} ran again on {}",
            table[&last["device"].as_u64().unwrap()]
        );
    }
    let lost: Vec<&Value> = records
        .iter()
        .filter(|r| r["type"] == "devices_lost")
        .collect();
    assert_eq!(lost.len(), 1, "{lost:?}");
    assert_eq!(lost[0]["devices"], serde_json::json!([4, 5, 6, 7]));
    let reason = lost[0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("node n2's agent could not be started again")
            && reason.contains("Required node not available"),
        "{reason}"
    );
    let restarting: Vec<&Value> = records
        .iter()
        .filter(|r| r["type"] == "agent_restarting")
        .collect();
    assert_eq!(restarting.len(), 1, "{restarting:?}");
    assert_eq!(restarting[0]["node"], "n2");
    assert!(!records.iter().any(|r| r["type"] == "agent_restarted"));
    let report = std::fs::read_to_string(run_dir.join("report.md")).unwrap();
    assert!(
        report.contains("## Devices lost") && report.contains("4 (NVIDIA H200 on n2:0)"),
        "{report}"
    );
}

/// Issue 14: a node whose agent step dies (its slurmstepd and every process of the step
/// killed) comes back: kactors starts a new agent step there, journals `agent_restarted`, and
/// node 2's devices evaluate the next round's candidates; only the candidates it had in flight
/// ran again elsewhere, and nothing is retired.
#[test]
#[ignore = "needs the Slurm test cluster (scripts/slurm/cluster.sh); .ci/run starts it and runs these"]
fn a_node_whose_agent_step_is_killed_comes_back_and_takes_work_again() {
    let allocation = Allocation::new(2, 4);
    let candidates: Vec<(String, String)> = (1..=16)
        .map(|i| {
            // Long enough that their second attempts, on node 1, outlast node 2's restart
            // (some seconds: the lost step's end, srun, the agent's hello): the next round is
            // planned on every device.
            let marker = if ON_NODE_2.contains(&i) {
                "pass sleep_s=15"
            } else {
                "pass"
            };
            candidate(
                &format!("{i:02}.py"),
                &format!("{marker} time_ms=1.{i:02}"),
                i as usize,
            )
        })
        .collect();
    let run = SlurmRun::new(
        &candidates,
        "test_timeout_s: 60\nagent_timeout_s: 2\nmax_rounds: 2\nstrategy_config:\n  num_top_kernels: 2\n  num_bottlenecks: 4\n",
    );
    let mut kactors = run.spawn(&allocation.job);
    for candidate in ON_NODE_2 {
        run.wait_for_record(Duration::from_secs(60), |r| {
            r["type"] == "step_started" && r["candidate"] == candidate
        });
    }
    let first_step = steps_by_node(&journal(&run.runs()[0]))["n2"].clone();
    kill_step_on_its_node(&first_step);
    let status = wait_with_limit(&mut kactors, Duration::from_secs(180));
    assert_eq!(status.code(), Some(0), "{}", run.stderr());
    let run_dir = &run.runs()[0];
    let records = journal(run_dir);
    assert!(
        !records.iter().any(|r| r["type"] == "devices_lost"),
        "nothing retired"
    );
    let restarted = records
        .iter()
        .position(|r| r["type"] == "agent_restarted")
        .unwrap_or_else(|| panic!("no agent_restarted: {}", run.stderr()));
    let record = &records[restarted];
    assert_eq!(record["node"], "n2");
    assert_eq!(record["devices"], serde_json::json!([4, 5, 6, 7]));
    assert_eq!(record["restarts"], 1);
    let new_step = record["step"].as_str().unwrap();
    assert_ne!(new_step, first_step, "a new step");
    for lost in ON_NODE_2 {
        let attempts = evaluated(&records, lost);
        assert_eq!(attempts[0]["outcome"], "device_lost", "{attempts:?}");
        assert_eq!(attempts.last().unwrap()["outcome"], "verified");
    }
    let on_node_2_later: Vec<u64> = records[restarted..]
        .iter()
        .filter(|r| {
            r["type"] == "evaluated"
                && r["outcome"] == "verified"
                && (4..8).contains(&r["device"].as_u64().unwrap())
        })
        .map(|r| r["candidate"].as_u64().unwrap())
        .collect();
    assert!(
        !on_node_2_later.is_empty(),
        "node 2's devices evaluated nothing after their agent came back: {:?}",
        records
            .iter()
            .filter(|r| r["type"] != "step_started" && r["type"] != "step_finished")
            .map(|r| format!(
                "{} {} {} {} {}",
                r["t"], r["type"], r["candidate"], r["device"], r["outcome"]
            ))
            .collect::<Vec<_>>()
    );
    let report = std::fs::read_to_string(run_dir.join("report.md")).unwrap();
    assert!(
        report.contains("## Agent restarts")
            && report.contains("node n2 (4 (NVIDIA H200 on n2:0)")
            && report.contains(&format!("restart 1, step {new_step}")),
        "{report}"
    );
    assert!(run_dir.join("agents/n2.restart1.log").is_file());
    // The new agent's step ends with the run. (Slurm may list the first one a while longer:
    // the test killed its slurmstepd, which is what would tell slurmctld it ended.)
    assert!(
        allocation.step_gone_within(new_step, Duration::from_secs(10)),
        "step {new_step} is still there: {:?}",
        allocation.steps()
    );
    assert_eq!(
        none_left_within(run.root(), Duration::from_secs(10)).len(),
        0
    );
}

/// Issue 14: a run killed outright is resumed in the same allocation (`kactors resume`, issue
/// 13): the dead run's steps are cancelled and the search continues on both nodes.
#[test]
#[ignore = "needs the Slurm test cluster (scripts/slurm/cluster.sh); .ci/run starts it and runs these"]
fn a_resume_in_the_same_allocation_continues_on_both_nodes() {
    let allocation = Allocation::new(2, 4);
    let candidates: Vec<(String, String)> = (1..=24)
        .map(|i| {
            candidate(
                &format!("{i:02}.py"),
                &format!("pass sleep_s=1 time_ms=1.{i:02}"),
                i,
            )
        })
        .collect();
    let run = SlurmRun::new(
        &candidates,
        "test_timeout_s: 30\nmax_rounds: 3\nstrategy_config:\n  num_top_kernels: 2\n  num_bottlenecks: 4\n",
    );
    let mut kactors = run.spawn(&allocation.job);
    run.wait_for_record(Duration::from_secs(60), |r| {
        r["type"] == "evaluated" && r["candidate"] == 3
    });
    kactors.kill().unwrap();
    kactors.wait().unwrap();
    let run_dir = run.runs()[0].clone();
    let before = journal(&run_dir).len();
    let resumed = run
        .kactors(&allocation.job)
        .arg("resume")
        .arg(&run_dir)
        .output();
    let resumed = resumed.unwrap();
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    assert_eq!(resumed.status.code(), Some(0), "{stderr}");
    let records = journal(&run_dir);
    let table = device_table(&records);
    let nodes_after: BTreeSet<String> = records[before..]
        .iter()
        .filter(|r| r["type"] == "evaluated")
        .map(|r| {
            table[&r["device"].as_u64().unwrap()]
                .split(':')
                .next()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        nodes_after,
        BTreeSet::from(["n1".to_string(), "n2".to_string()])
    );
    assert!(allocation.no_steps_within(Duration::from_secs(10)));
}

/// Issue 14: two runs in one allocation never share a GPU: the agents take the per-GPU locks
/// of their node, and the second run gets the GPUs the first does not use.
#[test]
#[ignore = "needs the Slurm test cluster (scripts/slurm/cluster.sh); .ci/run starts it and runs these"]
fn two_runs_in_one_allocation_never_share_a_gpu() {
    let allocation = Allocation::new(2, 4);
    let slow: Vec<(String, String)> = (1..=8)
        .map(|i| candidate(&format!("{i:02}.py"), "pass sleep_s=3", i))
        .collect();
    // The first run uses four workers: node 1's GPUs; node 2's are freed when it starts.
    let first = SlurmRun::new(
        &slow,
        &format!("test_timeout_s: 30\nnum_workers: 4\n{ONE_ROUND_OF_EIGHT}"),
    );
    let mut first_run = first.spawn(&allocation.job);
    first.wait_for_record(Duration::from_secs(60), |r| {
        r["type"] == "evaluator_started"
    });
    let second = SlurmRun::new(
        &passing(8),
        &format!("test_timeout_s: 30\n{ONE_ROUND_OF_EIGHT}"),
    );
    // Both runs' nodes share this machine's lock folder, as runs on one node do.
    let locks = first.root().join("locks");
    let output = second
        .command(&allocation.job, "run")
        .env("KACTORS_LOCK_DIR", &locks)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("node n1:"), "{stderr}");
    let status = wait_with_limit(&mut first_run, Duration::from_secs(120));
    assert_eq!(status.code(), Some(0), "{}", first.stderr());
    let uuids = |run: &SlurmRun| -> BTreeSet<String> {
        journal(&run.runs()[0])[0]["devices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|row| row["uuid"].as_str().unwrap().to_string())
            .collect()
    };
    let (first_gpus, second_gpus) = (uuids(&first), uuids(&second));
    assert_eq!(first_gpus.len(), 4);
    assert_eq!(second_gpus.len(), 4);
    assert!(
        first_gpus.is_disjoint(&second_gpus),
        "{first_gpus:?} {second_gpus:?}"
    );
    assert!(
        second_gpus.iter().all(|uuid| uuid.starts_with("GPU-n2-")),
        "{second_gpus:?}"
    );
}

/// Issue 14: `kactors devices --json` under launcher slurm lists each device of the
/// allocation with its node, as a run would number them; nothing is left running.
#[test]
#[ignore = "needs the Slurm test cluster (scripts/slurm/cluster.sh); .ci/run starts it and runs these"]
fn kactors_devices_lists_each_device_of_the_allocation_with_its_node() {
    let allocation = Allocation::new(2, 2);
    let run = SlurmRun::new(&[], "test_timeout_s: 5\n");
    let output = run
        .command(&allocation.job, "devices")
        .arg("--json")
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["vendor"], "nvidia");
    let devices: Vec<(u64, String, String)> = report["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|device| {
            (
                device["id"].as_u64().unwrap(),
                device["node"].as_str().unwrap().to_string(),
                device["uuid"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        devices,
        [
            (
                0,
                "n1:0".into(),
                "GPU-n1-0000-0000-0000-000000000000".into()
            ),
            (
                1,
                "n1:1".into(),
                "GPU-n1-0000-0000-0000-000000000001".into()
            ),
            (
                2,
                "n2:0".into(),
                "GPU-n2-0000-0000-0000-000000000000".into()
            ),
            (
                3,
                "n2:1".into(),
                "GPU-n2-0000-0000-0000-000000000001".into()
            ),
        ]
    );
    assert!(allocation.no_steps_within(Duration::from_secs(10)));
}

/// `srun` as the tests' PATH finds it, wrapped so that node 2's agent runs in a mount namespace
/// of its own with an empty folder over `hidden`: a node that does not share that folder.
fn srun_hiding_from_node_2(bin: &std::path::Path, hidden: &std::path::Path) {
    let real = real_srun();
    support::write_executable(
        &bin.join("srun"),
        &format!(
            r#"#!/bin/sh
n2=no
for arg in "$@"; do [ "$arg" = --nodelist=n2 ] && n2=yes; done
count=$#
i=0
while [ $i -lt $count ]; do
  arg=$1; shift; set -- "$@" "$arg"
  if [ "$arg" = --input=all ] && [ $n2 = yes ]; then
    set -- "$@" unshare --mount sh -c 'mount -t tmpfs hidden "{hidden}" && exec "$@"' sh
  fi
  i=$((i + 1))
done
exec '{real}' "$@"
"#,
            hidden = hidden.display(),
            real = real.display()
        ),
    );
}

/// Issue 14: the run directory must be visible from every node: each agent reads back a file
/// the head wrote there, and a node that cannot refuses the run before anything is evaluated,
/// naming the node and what to do; nothing is left behind.
#[test]
#[ignore = "needs the Slurm test cluster (scripts/slurm/cluster.sh); .ci/run starts it and runs these"]
fn a_run_directory_node_2_cannot_see_refuses_the_run() {
    let allocation = Allocation::new(2, 4);
    let run = SlurmRun::new(
        &passing(8),
        &format!("test_timeout_s: 5\n{ONE_ROUND_OF_EIGHT}"),
    );
    let runs = run.root().join("runs");
    std::fs::create_dir_all(&runs).unwrap();
    srun_hiding_from_node_2(&run.root().join("bin"), &runs);
    let output = run.command(&allocation.job, "run").output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("node n2 cannot read")
            && stderr.contains("put --run-dir on a filesystem every node of the allocation mounts"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("node n1 cannot read"),
        "node 1 sees the folder: {stderr}"
    );
    assert_eq!(
        std::fs::read_dir(&runs).unwrap().count(),
        0,
        "a refused run leaves nothing in {}",
        runs.display()
    );
    assert!(
        allocation.no_steps_within(Duration::from_secs(10)),
        "{:?}",
        allocation.steps()
    );
}
