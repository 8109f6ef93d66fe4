//! The process group a child leads, and what is left of it.

use std::fs;
use std::io;

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use super::proc_stat::ProcStat;

/// The process group of a spawned child: the child called setpgid(0, 0) before exec, so the
/// group id is the leader's pid. Only [`spawn`](super::spawn) makes one.
///
/// The id is safe to signal while the child's [`RunningChild`](super::RunningChild) lives:
/// until then the leader is at worst an unreaped zombie, and the kernel does not reuse a pid,
/// nor so a group id, that a zombie still holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ProcessGroup(Pid);

impl ProcessGroup {
    pub(super) fn led_by(leader: Pid) -> Self {
        ProcessGroup(leader)
    }

    pub fn id(self) -> Pid {
        self.0
    }

    /// SIGTERM to every process of the group.
    pub fn terminate(self) -> nix::Result<()> {
        killpg(self.0, Signal::SIGTERM)
    }

    /// SIGKILL to every process of the group.
    pub fn kill(self) -> nix::Result<()> {
        killpg(self.0, Signal::SIGKILL)
    }

    /// The processes of the group that are still running. A zombie counts as gone: it has
    /// closed its files and freed its memory, and an orphaned one is reaped by init, sometimes
    /// seconds later.
    ///
    /// Reads `/proc/<pid>/stat` of every process unless the group is already empty; these are
    /// in-memory files, but async callers with a loop should run it off the runtime's thread.
    pub fn live_members(self) -> io::Result<Vec<Pid>> {
        if killpg(self.0, None) == Err(Errno::ESRCH) {
            return Ok(Vec::new());
        }
        let mut members = Vec::new();
        for entry in fs::read_dir("/proc")? {
            let Some(pid) = entry?
                .file_name()
                .to_str()
                .and_then(|name| name.parse().ok())
            else {
                continue;
            };
            // A process that exits while we look has no stat file any more: it is gone.
            if let Some(stat) = ProcStat::of(pid)
                && stat.process_group == self.0.as_raw()
                && stat.is_running()
            {
                members.push(Pid::from_raw(pid));
            }
        }
        Ok(members)
    }
}

/// Runs a /proc scan on tokio's blocking pool, so that a loop of scans leaves the runtime's
/// thread, the only one under actix, free for the actors.
pub(super) async fn scan_off_thread<T: Send + 'static>(
    scan: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    tokio::task::spawn_blocking(scan)
        .await
        .unwrap_or_else(|join_error| std::panic::resume_unwind(join_error.into_panic()))
}
