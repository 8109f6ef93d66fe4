//! Ending a child's whole group: SIGTERM, a grace period, then SIGKILL, as nextest does. Python
//! and the profilers start grandchildren, so the signals go to the group, never to the leader
//! alone.

use std::io;
use std::process::ExitStatus;
use std::time::Duration;

use tokio::time::{Instant, timeout, timeout_at};

use super::group::{ProcessGroup, scan_off_thread};
use super::spawn::RunningChild;

/// How long the leader may take to exit after SIGKILL. SIGKILL cannot be caught or ignored, but
/// a process in uninterruptible sleep, typically inside a GPU driver call, only dies when the
/// call returns.
pub const KILL_EXIT_LIMIT: Duration = Duration::from_secs(10);

/// How often the group is looked at while its leader has exited and other members have not.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Termination {
    /// Nothing of the group outlived the grace period; the leader's status.
    AfterTerm(ExitStatus),
    /// The leader or another member was still running when the grace period ended, and the
    /// group got SIGKILL; the leader's status.
    AfterKill(ExitStatus),
    /// The leader was still there [`KILL_EXIT_LIMIT`] after SIGKILL. Dropping its
    /// `RunningChild` leaves it to tokio, which reaps it once it dies.
    Unkillable,
}

impl Termination {
    pub fn sigkill_needed(self) -> bool {
        !matches!(self, Termination::AfterTerm(_))
    }

    pub fn leader_status(self) -> Option<ExitStatus> {
        match self {
            Termination::AfterTerm(status) | Termination::AfterKill(status) => Some(status),
            Termination::Unkillable => None,
        }
    }
}

/// Sends SIGTERM to the child's group, waits up to `grace` for the leader and then for the rest
/// of the group to exit, and sends SIGKILL to the group if anything is left. Also right for a
/// child whose leader has already exited: its leftovers get the same treatment.
pub async fn terminate_with_grace(
    child: &mut RunningChild,
    grace: Duration,
) -> io::Result<Termination> {
    let deadline = Instant::now() + grace;
    // The unreaped leader keeps the group signallable; a member that became another user's
    // (EPERM) is left to the SIGKILL and the bounded wait below.
    let _ = child.group().terminate();
    let leader_exit = match timeout_at(deadline, child.wait()).await {
        Ok(status) => Some(status?),
        Err(_grace_over) => None,
    };
    if let Some(status) = leader_exit
        && group_gone_by(child.group(), deadline).await?
    {
        return Ok(Termination::AfterTerm(status));
    }
    let _ = child.group().kill();
    match timeout(KILL_EXIT_LIMIT, child.wait()).await {
        Ok(status) => Ok(Termination::AfterKill(status?)),
        Err(_limit_over) => Ok(Termination::Unkillable),
    }
}

/// How a child waited for under a deadline ended.
#[derive(Debug)]
pub enum WaitOutcome {
    /// The leader exited within the deadline: its status.
    Exited(ExitStatus),
    /// The leader was still running at the deadline, and the group was ended with
    /// [`terminate_with_grace`]: how that went.
    PastDeadline(io::Result<Termination>),
}

/// Waits up to `deadline` for the child's leader to exit; past it, ends the whole group with
/// [`terminate_with_grace`]. For the children kactors runs before its actor system, and with it
/// the Watchdog, exists (`kactors check`'s and the preflight's probes); once actors run, the
/// Watchdog keeps every child's deadline.
pub async fn wait_or_terminate(
    child: &mut RunningChild,
    deadline: Duration,
    grace: Duration,
) -> io::Result<WaitOutcome> {
    match timeout(deadline, child.wait()).await {
        Ok(status) => status.map(WaitOutcome::Exited),
        Err(_deadline_passed) => Ok(WaitOutcome::PastDeadline(
            terminate_with_grace(child, grace).await,
        )),
    }
}

/// Whether the group has no running member left by `deadline`.
async fn group_gone_by(group: ProcessGroup, deadline: Instant) -> io::Result<bool> {
    loop {
        if scan_off_thread(move || group.live_members())
            .await?
            .is_empty()
        {
            return Ok(true);
        }
        let now = Instant::now();
        if now >= deadline {
            return Ok(false);
        }
        tokio::time::sleep(POLL_INTERVAL.min(deadline - now)).await;
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;

    use nix::libc::{SIGKILL, SIGTERM};
    use nix::unistd::Pid;

    use super::*;
    use crate::process::spawn;
    use crate::process::test_support::{Scratch, eventually_gone};

    const GRACE: Duration = Duration::from_millis(300);
    /// Generous, for a loaded 2-core machine; the SIGKILL itself is immediate.
    const MARGIN: Duration = Duration::from_secs(3);

    /// Starts the script, reads one pid from its reply pipe (sent once the script is ready to
    /// be signalled), and terminates the child.
    async fn terminate(script: &str) -> (Termination, Duration, ProcessGroup, Pid) {
        let scratch = Scratch::new();
        let mut child = spawn(&scratch.sh(script, true)).unwrap();
        let replies = &mut child.protocol.as_mut().unwrap().replies;
        let pid = Pid::from_raw(replies.recv_line().await.unwrap().unwrap().parse().unwrap());
        let started = Instant::now();
        let termination = terminate_with_grace(&mut child, GRACE).await.unwrap();
        (termination, started.elapsed(), child.group(), pid)
    }

    /// Terminates the group `script` starts (it writes a grandchild's pid to fd 4), and checks
    /// that SIGKILL was needed, after the grace period, that `leader_signal` ended the leader
    /// and that the grandchild is gone.
    async fn check_killed_after_grace(script: &str, leader_signal: i32) {
        let (termination, took, group, grandchild) = terminate(script).await;

        assert!(termination.sigkill_needed(), "{termination:?}");
        assert_eq!(
            termination
                .leader_status()
                .and_then(|status| status.signal()),
            Some(leader_signal)
        );
        assert!(took >= GRACE && took < GRACE + MARGIN, "took {took:?}");
        eventually_gone(group, &[grandchild]).await;
    }

    #[tokio::test]
    async fn a_child_and_grandchild_that_ignore_sigterm_are_killed_after_the_grace_period() {
        check_killed_after_grace("trap '' TERM; sleep 60 & echo $! >&4; wait", SIGKILL).await;
    }

    #[tokio::test]
    async fn a_grandchild_that_outlives_its_cooperative_leader_is_killed() {
        check_killed_after_grace(
            "sh -c 'trap \"\" TERM; echo $$ >&4; exec sleep 60' & wait",
            SIGTERM,
        )
        .await;
    }

    #[tokio::test]
    async fn a_child_that_ends_within_its_deadline_is_only_waited_for() {
        let scratch = Scratch::new();
        let mut child = spawn(&scratch.sh("exit 3", false)).unwrap();

        let outcome = wait_or_terminate(&mut child, MARGIN, GRACE).await.unwrap();

        match outcome {
            WaitOutcome::Exited(status) => assert_eq!(status.code(), Some(3)),
            WaitOutcome::PastDeadline(termination) => panic!("ended: {termination:?}"),
        }
    }

    #[tokio::test]
    async fn a_child_past_its_deadline_is_ended_with_its_group() {
        let scratch = Scratch::new();
        let mut child = spawn(&scratch.sh("sleep 60 & echo $! >&4; wait", true)).unwrap();
        let replies = &mut child.protocol.as_mut().unwrap().replies;
        let grandchild =
            Pid::from_raw(replies.recv_line().await.unwrap().unwrap().parse().unwrap());
        let deadline = Duration::from_millis(200);
        let started = Instant::now();

        let outcome = wait_or_terminate(&mut child, deadline, GRACE)
            .await
            .unwrap();

        let took = started.elapsed();
        match outcome {
            WaitOutcome::PastDeadline(Ok(termination)) => assert_eq!(
                termination
                    .leader_status()
                    .and_then(|status| status.signal()),
                Some(SIGTERM),
                "{termination:?}"
            ),
            other => panic!("not ended at the deadline: {other:?}"),
        }
        assert!(
            took >= deadline && took < deadline + GRACE + MARGIN,
            "took {took:?}"
        );
        eventually_gone(child.group(), &[grandchild]).await;
    }

    #[tokio::test]
    async fn a_cooperative_child_needs_no_sigkill() {
        // The grandchild says it is ready itself: `$!` would be known before the forked shell
        // has dropped the leader's trap, and a SIGTERM caught in that moment is lost.
        let script = "trap 'exit 0' TERM; sh -c 'echo $$ >&4; exec sleep 60' & wait";

        let (termination, took, group, grandchild) = terminate(script).await;

        assert_eq!(
            termination.leader_status().and_then(|status| status.code()),
            Some(0)
        );
        assert!(!termination.sigkill_needed(), "{termination:?}");
        assert!(took < GRACE, "took {took:?}");
        eventually_gone(group, &[grandchild]).await;
    }
}
