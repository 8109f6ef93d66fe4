//! The leak check, after nextest's: a child that exited but left processes behind. nextest waits
//! a moment for the test's stdout and stderr pipes to close, since a grandchild that still holds
//! them is still running. A kactors child writes to a log file, not a pipe, so the check looks
//! the holders up in /proc instead: any process other than kactors that still holds the child's
//! log file or protocol pipes, even one that escaped the group with setsid, plus any process
//! still running in the child's group.

use std::fs;
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::Duration;

use nix::sys::stat::fstat;
use nix::unistd::Pid;
use tokio::time::Instant;

use super::group::{ProcessGroup, scan_off_thread};
use super::spawn::RunningChild;

/// How often the leak check looks again while it waits for leftovers to go.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Processes that outlived a child's leader.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "{label} left processes {} behind after it exited, in its process group or holding its log or protocol pipes",
    pid_list(pids)
)]
pub struct Leak {
    pub label: String,
    pub pids: Vec<Pid>,
}

fn pid_list(pids: &[Pid]) -> String {
    pids.iter()
        .map(Pid::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Waits for the child's leader to exit (at once if it has), then gives what it left behind up
/// to `settle` to go; nextest's default for this is 100 ms. Returns the processes still there
/// then: running members of the group and processes holding the child's log or protocol pipes.
pub async fn leaked_after_exit(
    child: &mut RunningChild,
    settle: Duration,
) -> io::Result<Option<Leak>> {
    child.wait().await?;
    let deadline = Instant::now() + settle;
    loop {
        let (group, files) = (child.group(), child.files().clone());
        let pids = scan_off_thread(move || leftover_processes(group, &files)).await?;
        if pids.is_empty() {
            return Ok(None);
        }
        let now = Instant::now();
        if now >= deadline {
            return Ok(Some(Leak {
                label: child.label().to_string(),
                pids,
            }));
        }
        tokio::time::sleep(POLL_INTERVAL.min(deadline - now)).await;
    }
}

fn leftover_processes(group: ProcessGroup, files: &ChildFiles) -> io::Result<Vec<Pid>> {
    let mut pids = group.live_members()?;
    pids.extend(files.holders()?);
    pids.sort();
    pids.dedup();
    Ok(pids)
}

/// The files a child was given that someone else might keep open: its log and its protocol
/// pipes.
#[derive(Clone, Debug)]
pub(super) struct ChildFiles(Vec<FileIdentity>);

/// A file as /proc shows it: the text of a `/proc/<pid>/fd/<n>` link (a path, or `pipe:[1234]`
/// for a pipe), then its device and inode to be sure. Comparing the link text first means
/// the scan never stats a file it does not care about, which on a hung network file system
/// could block.
#[derive(Clone, Debug, PartialEq, Eq)]
struct FileIdentity {
    link: PathBuf,
    device: u64,
    inode: u64,
}

impl ChildFiles {
    pub(super) fn of(files: &[impl AsFd]) -> io::Result<ChildFiles> {
        files
            .iter()
            .map(|file| {
                let fd = file.as_fd();
                let link = fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))?;
                let stat = fstat(fd)?;
                Ok(FileIdentity {
                    link,
                    device: stat.st_dev,
                    inode: stat.st_ino,
                })
            })
            .collect::<io::Result<Vec<_>>>()
            .map(ChildFiles)
    }

    /// The processes, other than this one, that hold one of the files. Processes of other
    /// users cannot be looked into and are skipped: a child becomes one only through a setuid
    /// program.
    fn holders(&self) -> io::Result<Vec<Pid>> {
        let own_pid = std::process::id().to_string();
        let mut holders = Vec::new();
        for entry in fs::read_dir("/proc")? {
            let name = entry?.file_name();
            let Some(pid) = name
                .to_str()
                .filter(|name| *name != own_pid)
                .and_then(|name| name.parse().ok())
            else {
                continue;
            };
            if self.held_by(pid) {
                holders.push(Pid::from_raw(pid));
            }
        }
        Ok(holders)
    }

    fn held_by(&self, pid: i32) -> bool {
        // A process that exited meanwhile, or that we may not look into, holds nothing we see.
        let Ok(descriptors) = fs::read_dir(format!("/proc/{pid}/fd")) else {
            return false;
        };
        descriptors.flatten().any(|descriptor| {
            let Ok(link) = fs::read_link(descriptor.path()) else {
                return false;
            };
            self.0.iter().any(|file| {
                file.link == link
                    && fs::metadata(descriptor.path()).is_ok_and(|metadata| {
                        metadata.dev() == file.device && metadata.ino() == file.inode
                    })
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::spawn;
    use crate::process::test_support::{KillOnDrop, Scratch, eventually_gone};

    const SETTLE: Duration = Duration::from_millis(100);

    fn leak_of(pid: Pid, label: &str) -> Option<Leak> {
        Some(Leak {
            label: label.to_string(),
            pids: vec![pid],
        })
    }

    #[tokio::test]
    async fn a_grandchild_that_escaped_the_group_holding_the_reply_pipe_is_a_leak() {
        let scratch = Scratch::new();
        let script = r#"
import os, time
if os.fork() == 0:
    os.setsid()
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.write(4, b"%d\n" % os.getpid())
    time.sleep(60)
"#;
        let mut child = spawn(&scratch.python(script, true)).unwrap();
        let replies = &mut child.protocol.as_mut().unwrap().replies;
        let escaped = Pid::from_raw(replies.recv_line().await.unwrap().unwrap().parse().unwrap());
        let _cleanup = KillOnDrop(escaped);

        let leak = leaked_after_exit(&mut child, SETTLE).await.unwrap();

        assert_eq!(leak, leak_of(escaped, "python child"));
        assert!(
            child.group().live_members().unwrap().is_empty(),
            "it is not in the group"
        );
    }

    #[tokio::test]
    async fn a_grandchild_that_escaped_the_group_holding_the_log_is_a_leak() {
        let scratch = Scratch::new();
        let script = r#"
import os, time
ready_read, ready_write = os.pipe()
if os.fork() == 0:
    os.setsid()
    print(os.getpid(), flush=True)
    os.write(ready_write, b"x")
    time.sleep(60)
    os._exit(0)
os.read(ready_read, 1)
"#;
        let mut child = spawn(&scratch.python(script, false)).unwrap();

        let leak = leaked_after_exit(&mut child, SETTLE).await.unwrap();

        let escaped = Pid::from_raw(scratch.log().trim().parse().unwrap());
        let _cleanup = KillOnDrop(escaped);
        assert_eq!(leak, leak_of(escaped, "python child"));
    }

    #[tokio::test]
    async fn a_member_of_the_group_still_running_is_a_leak_and_dies_with_its_child() {
        let scratch = Scratch::new();
        let mut child =
            spawn(&scratch.sh("sleep 60 </dev/null >/dev/null 2>&1 & echo $!", false)).unwrap();

        let leak = leaked_after_exit(&mut child, SETTLE).await.unwrap();

        let straggler = Pid::from_raw(scratch.log().trim().parse().unwrap());
        assert_eq!(leak, leak_of(straggler, "sh child"));
        assert_eq!(
            leak.unwrap().to_string(),
            format!(
                "sh child left processes {straggler} behind after it exited, in its process group or holding its log or protocol pipes"
            )
        );
        let group = child.group();
        drop(child);
        eventually_gone(group, &[straggler]).await;
    }

    #[tokio::test]
    async fn a_child_whose_processes_all_exited_leaked_nothing() {
        let scratch = Scratch::new();
        let mut child =
            spawn(&scratch.sh("sh -c 'echo grandchild >&4'; echo child", true)).unwrap();

        assert_eq!(leaked_after_exit(&mut child, SETTLE).await.unwrap(), None);
        assert_eq!(scratch.log(), "child\n");
    }
}
