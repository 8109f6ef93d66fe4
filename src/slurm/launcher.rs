//! `launcher: local | slurm | auto`: whether a run's devices are this machine's or the Slurm
//! allocation's it runs in.

use crate::config::LauncherRequest;
use crate::devices::HostEnvironment;

/// Whether the run uses the allocation's nodes: always with `slurm`; with `auto` inside an
/// allocation of more than one node (Slurm's environment says so: SLURM_JOB_ID, and
/// SLURM_JOB_NUM_NODES or its older name SLURM_NNODES); never with `local`.
pub fn uses_slurm(request: LauncherRequest, host: &HostEnvironment) -> bool {
    match request {
        LauncherRequest::Local => false,
        LauncherRequest::Slurm => true,
        LauncherRequest::Auto => {
            let nodes = host
                .var("SLURM_JOB_NUM_NODES")
                .or_else(|| host.var("SLURM_NNODES"))
                .and_then(|nodes| nodes.trim().parse::<u32>().ok());
            host.var("SLURM_JOB_ID").is_some() && nodes.is_some_and(|nodes| nodes > 1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_means_slurm_inside_an_allocation_of_several_nodes() {
        let check = |request, vars: &[(&str, &str)], expected| {
            assert_eq!(
                uses_slurm(request, &HostEnvironment::of_vars(vars)),
                expected,
                "{request:?} {vars:?}"
            );
        };
        let two_nodes = [("SLURM_JOB_ID", "7"), ("SLURM_JOB_NUM_NODES", "2")];
        check(LauncherRequest::Auto, &two_nodes, true);
        check(
            LauncherRequest::Auto,
            &[("SLURM_JOB_ID", "7"), ("SLURM_NNODES", "4")],
            true,
        );
        check(
            LauncherRequest::Auto,
            &[("SLURM_JOB_ID", "7"), ("SLURM_JOB_NUM_NODES", "1")],
            false,
        );
        check(
            LauncherRequest::Auto,
            &[("SLURM_JOB_NUM_NODES", "2")],
            false,
        );
        check(LauncherRequest::Auto, &[], false);
        check(LauncherRequest::Local, &two_nodes, false);
        check(LauncherRequest::Slurm, &[], true);
    }
}
