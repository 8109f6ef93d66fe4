//! The head's side of a run on a Slurm allocation: `placement.rs` starts one node agent per
//! node and builds the run's device table, `launch.rs` starts the agents' steps, `link.rs` is
//! one channel per node (its heartbeat, scancel when an agent stops answering), `restart.rs`
//! starts a lost node's agent again, and `remote.rs` serves the ports over the links.

pub mod launch;
pub mod link;
pub mod placement;
pub mod remote;
pub mod restart;
