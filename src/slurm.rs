//! Slurm, used as it is (issue 14): the allocation a run is inside (its nodes and their GPUs),
//! the `srun` command line that starts a node agent as a step, the steps' names and ids, and
//! Slurm's client commands. Nothing here knows the agent's protocol (`crate::agent`).

mod allocation;
mod job_details;
mod tools;

pub use allocation::{AllocatedNode, Allocation, AllocationError, is_plain_node_name, job_id};
pub use job_details::{JobDetails, JobDetailsError, NodeGpus, parse_job_details};
pub use tools::{SlurmToolError, scancel, scontrol, signal_step, slurm_command, squeue};
