//! Issue 2: past its deadline the Watchdog ends a child's whole process group (SIGTERM, the
//! grace period, SIGKILL), also a child and grandchild that ignore SIGTERM.

use std::process::Stdio;
use std::time::{Duration, Instant};

use actix::Actor;
use actors::ports::GroupId;
use actors::watchdog::{Watchdog, WatchdogClient};
use kactors::signals::ProcessGroupSignaller;
use tokio::io::{AsyncBufReadExt, BufReader};

/// Processes of the group that are still alive; a zombie (state Z) has ended and only waits for
/// its parent (often init, seconds later) to reap it.
fn live_members(group: i32) -> Vec<i32> {
    let mut alive = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // The command name is in parentheses and may hold spaces: fields count from the last ')'.
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
            continue;
        };
        let fields: Vec<&str> = after.split_whitespace().collect();
        if fields.len() > 2 && fields[2] == group.to_string() && fields[0] != "Z" {
            alive.push(pid);
        }
    }
    alive
}

#[test]
fn a_child_and_grandchild_that_ignore_sigterm_are_killed_within_deadline_plus_grace() {
    let deadline = Duration::from_millis(300);
    let grace = Duration::from_millis(500);
    actix::System::new().block_on(async move {
        let watchdog = WatchdogClient::new(
            Watchdog::new(Box::new(ProcessGroupSignaller), grace, None).start(),
        );
        let mut child = tokio::process::Command::new("sh")
            .arg("-c")
            .arg("trap '' TERM; sleep 1000 & echo $!; wait; wait")
            .process_group(0)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let group = child.id().unwrap() as i32;
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let grandchild: i32 = lines.next_line().await.unwrap().unwrap().parse().unwrap();
        assert!(
            live_members(group).contains(&grandchild),
            "the grandchild runs in the child's group"
        );

        let started = Instant::now();
        let watch = watchdog
            .watch(GroupId(group), deadline, "test child")
            .await
            .unwrap();
        let status = child.wait().await.unwrap();
        let elapsed = started.elapsed();
        assert!(
            watchdog.release(watch).await,
            "the watchdog says the deadline passed"
        );
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9),
            "SIGKILL ended the child"
        );
        assert!(
            elapsed >= deadline + grace,
            "SIGTERM was ignored, so only SIGKILL after the grace ends it ({elapsed:?})"
        );
        assert!(
            elapsed < deadline + grace + Duration::from_secs(2),
            "killed within deadline plus grace ({elapsed:?})"
        );

        let mut left = live_members(group);
        let give_up = Instant::now() + Duration::from_secs(5);
        while !left.is_empty() && Instant::now() < give_up {
            tokio::time::sleep(Duration::from_millis(20)).await;
            left = live_members(group);
        }
        assert!(
            left.is_empty(),
            "processes of the group still alive: {left:?}"
        );
    });
}

#[test]
fn a_released_child_is_never_signalled() {
    actix::System::new().block_on(async {
        let watchdog = WatchdogClient::new(
            Watchdog::new(
                Box::new(ProcessGroupSignaller),
                Duration::from_millis(50),
                None,
            )
            .start(),
        );
        let mut child = tokio::process::Command::new("sh")
            .arg("-c")
            .arg("exit 0")
            .process_group(0)
            .spawn()
            .unwrap();
        let watch = watchdog
            .watch(
                GroupId(child.id().unwrap() as i32),
                Duration::from_secs(60),
                "quick child",
            )
            .await
            .unwrap();
        assert!(child.wait().await.unwrap().success());
        assert!(
            !watchdog.release(watch).await,
            "released before its deadline"
        );
    });
}
