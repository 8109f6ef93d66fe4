//! The leak check, after nextest's: a child that exited but left processes behind. nextest waits
//! a moment for the test's stdout and stderr pipes to close, since a grandchild that still holds
//! them is still running. A kactors child writes to a log file, not a pipe, so the check looks
//! the holders up in /proc instead: any process other than kactors that still holds the child's
//! log file or protocol pipes, even one that escaped the group with setsid, plus any process
//! still running in the child's group.

use std::io;
use std::time::Duration;

use nix::unistd::Pid;
use tokio::time::Instant;

use super::child_files::ChildFiles;
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
