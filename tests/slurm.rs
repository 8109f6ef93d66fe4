//! Issue 14: one search across the GPUs of several nodes, on a real Slurm cluster. These tests
//! need the two-node test cluster of scripts/slurm/cluster.sh (Debian's slurmd, slurmctld,
//! slurm-client and munge, root): `.ci/run` starts it, runs them and stops it. By hand:
//!
//!     scripts/slurm/cluster.sh start && export SLURM_CONF=/tmp/kactors-slurm/etc/slurm.conf
//!     cargo nextest run --test slurm --run-ignored ignored-only --test-threads 1
//!     scripts/slurm/cluster.sh stop

mod support;

use std::collections::BTreeSet;

use support::slurm::Allocation;

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
