//! kactors' child processes: the evaluators, the profilers and the user's tests.
//!
//! Every child is the leader of a process group of its own, so the whole tree it starts can be
//! signalled at once; its stdout and stderr are appended to one log file; a child that speaks a
//! protocol with kactors gets two dedicated pipes (fd 3 requests, fd 4 replies), so nothing a
//! kernel prints can corrupt the protocol. Its environment is stripped of credentials, because
//! the code it runs was generated and is untrusted.
//!
//! Exit statuses belong to tokio::process: nothing here reaps with waitpid(-1). A leader is
//! observed without being reaped (waitid with WNOWAIT) and stays a zombie until its
//! `RunningChild` is dropped, which keeps the group id from being reused while kactors can
//! still signal it.

mod child_files;
mod environment;
mod group;
mod leak;
mod log_tail;
mod orphans;
pub mod pid_lock;
mod proc_stat;
mod protocol;
mod spawn;
mod terminate;

#[cfg(test)]
pub(crate) mod test_support;

pub use environment::{
    ChildEnv, RUN_MARKER, child_environment, mark_children_of_run, may_carry_credential,
};
pub use group::ProcessGroup;
pub use leak::{Leak, leaked_after_exit};
pub use log_tail::log_tail;
pub use orphans::{end_orphans_of_run, orphan_groups};
pub use proc_stat::ProcStat;
pub use protocol::{ProtocolPipes, ReplyReader, RequestWriter};
pub(crate) use spawn::die_with_parent;
pub(crate) use spawn::raw_wait_status;
pub use spawn::{ChildSpec, Protocol, RunningChild, SpawnError, spawn};
pub use terminate::{
    KILL_EXIT_LIMIT, Termination, WaitOutcome, terminate_with_grace, wait_or_terminate,
};
