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

use support::slurm::Allocation;
use support::slurm_run::{SlurmRun, journal, passing};

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
        "max_rounds: 2\nstrategy_config:\n  num_top_kernels: 2\n  num_bottlenecks: 4\n",
    );
    let output = run.command(&allocation.job, "run").output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let runs = run.runs();
    let records = journal(&runs[0]);
    let started = &records[0];
    assert_eq!(started["type"], "run_started");
    let table: BTreeMap<u64, String> = started["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            (
                row["device"].as_u64().unwrap(),
                format!("{}:{}", row["node"].as_str().unwrap(), row["index"]),
            )
        })
        .collect();
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
    assert!(allocation.no_steps_within(Duration::from_secs(10)), "{:?}", allocation.steps());
    assert!(runs[0].join("agents/n1.log").is_file() && runs[0].join("agents/n2.log").is_file());
}
