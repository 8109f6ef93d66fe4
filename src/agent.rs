//! The node agent (issue 14): how one kactors run uses the GPUs of several nodes of a Slurm
//! allocation. The head (`kactors run` with launcher slurm) starts one agent per node as a
//! Slurm step (`srun … kactors agent …`) that holds every GPU the allocation has there; the
//! agent runs that node's evaluators and profiler passes with kactors's own local platform and
//! answers the head over the step's stdin and stdout, JSON lines (`wire.rs`,
//! docs/agent-protocol.md). The evaluator protocol (fds 3 and 4, the zygote) stays between an
//! agent and its evaluators; only the agent's channel crosses nodes.
//!
//! Two programs, a room each, and the channel between them: `node.rs` is the agent's side
//! (`kactors agent`), `head/` the head's (placing a run on the allocation, starting the agents,
//! their links, restarts and the ports over them), and `wire.rs` the messages both speak.

pub mod head;
pub mod node;
pub mod wire;
