//! The process group a child leads, and what is left of it.

use std::fs;
use std::io;

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

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
            let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            if let Some(stat) = ProcStat::parse(&stat)
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

/// The fields of `/proc/<pid>/stat` that tell group membership. The file has no field names:
/// proc(5) documents it as `pid (comm) state ppid pgrp session ...`, where comm is the
/// executable's name and may itself contain spaces and parentheses, so the fields are counted
/// from the last `)`.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct ProcStat {
    state: char,
    pub(super) process_group: i32,
}

impl ProcStat {
    pub(super) fn parse(text: &str) -> Option<ProcStat> {
        let after_comm = &text[text.rfind(')')? + 1..];
        let mut fields = after_comm.split_whitespace();
        let state = fields.next()?.chars().next()?;
        let _parent_pid = fields.next()?;
        let process_group = fields.next()?.parse().ok()?;
        Some(ProcStat {
            state,
            process_group,
        })
    }

    /// Z is a zombie; X (x on old kernels) is a process being torn down.
    pub(super) fn is_running(&self) -> bool {
        !matches!(self.state, 'Z' | 'X' | 'x')
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, expected: Option<(char, i32)>) {
        let parsed = ProcStat::parse(text).map(|stat| (stat.state, stat.process_group));
        assert_eq!(parsed, expected, "{text:?}");
    }

    #[test]
    fn stat_lines_are_read_from_after_the_command_name() {
        check(
            "4242 (python3) S 4240 4240 4240 0 -1 4194560 1939 0 0 0\n",
            Some(('S', 4240)),
        );
        check(
            "7 (sleep) Z 1 4240 4240 0 -1 4227084 0 0 0 0\n",
            Some(('Z', 4240)),
        );
        check("9 (a) b) (c) R 1 77 77 0 -1 0\n", Some(('R', 77)));
        check("10 (tmux: server) S 1 10 10 0 -1 0\n", Some(('S', 10)));
    }

    #[test]
    fn broken_stat_lines_are_not_read() {
        check("", None);
        check("4242 python3 S 4240 4240", None);
        check("4242 (python3) S 4240", None);
        check("4242 (python3) S 4240 group 4240", None);
    }

    #[test]
    fn zombies_and_dying_processes_are_not_running() {
        let running: Vec<bool> = ['R', 'S', 'D', 'T', 'Z', 'X']
            .into_iter()
            .map(|state| {
                ProcStat {
                    state,
                    process_group: 1,
                }
                .is_running()
            })
            .collect();
        assert_eq!(running, [true, true, true, true, false, false]);
    }
}
