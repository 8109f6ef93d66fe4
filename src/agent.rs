//! The node agent (issue 14): how one kactors run uses the GPUs of several nodes of a Slurm
//! allocation. The head (`kactors run` with launcher slurm) starts one agent per node as a
//! Slurm step (`srun … kactors agent …`) that holds every GPU the allocation has there; the
//! agent runs that node's evaluators and profiler passes with kactors's own local platform and
//! answers the head over the step's stdin and stdout, JSON lines (`wire.rs`,
//! docs/agent-protocol.md). The evaluator protocol (fds 3 and 4, the zygote) stays between an
//! agent and its evaluators; only the agent's channel crosses nodes.
//!
//! `node.rs` is the agent's side; the head's side is `link.rs` (one channel per node, its
//! heartbeat, scancel when an agent stops answering), `remote.rs` (the ports over the links)
//! and `launch.rs` (the steps started on the allocation and the run's device table).

pub mod launch;
pub mod link;
pub mod node;
pub mod remote;
pub mod restart;
pub mod wire;
