//! Slurm, used as it is (issue 14): the allocation a run is inside (its nodes and their GPUs),
//! the `srun` command line that starts a node agent as a step, the steps' names and ids, and
//! Slurm's client commands. Nothing here knows the agent's protocol (`crate::agent`).

mod allocation;
mod job_details;
mod launcher;
mod steps;
mod tools;

pub use allocation::{AllocatedNode, Allocation, AllocationError, is_plain_node_name, job_id};
pub use job_details::{JobDetails, JobDetailsError, NodeGpus, parse_job_details};
pub use launcher::uses_slurm;
pub use steps::{
    AgentStep, STEP_NAME_PREFIX, StepOwner, cancel_orphaned_steps, cancel_steps, orphaned,
    parse_steps, srun_args, srun_path,
};
pub use tools::{SlurmToolError, scancel, scontrol, signal_step, slurm_command, squeue};
