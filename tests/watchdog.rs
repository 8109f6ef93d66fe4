//! Issue 2: past its deadline the Watchdog ends a child's whole process group (SIGTERM, the
//! grace period, SIGKILL), also a child and grandchild that ignore SIGTERM.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use actix::Actor;
use actors::ports::GroupId;
use actors::watchdog::{Watchdog, WatchdogClient};
use kactors::process::{ChildSpec, child_environment, spawn};
use kactors::signals::ProcessGroupSignaller;

#[test]
fn a_child_and_grandchild_that_ignore_sigterm_are_killed_within_deadline_plus_grace() {
    let deadline = Duration::from_millis(300);
    let grace = Duration::from_millis(500);
    let folder = tempfile::tempdir().unwrap();
    actix::System::new().block_on(async move {
        let watchdog = WatchdogClient::new(
            Watchdog::new(Box::new(ProcessGroupSignaller), grace, None).start(),
        );
        let spec = ChildSpec {
            program: "sh".into(),
            args: vec![
                "-c".into(),
                "trap '' TERM; sleep 1000 & echo $! >&4; wait; wait".into(),
            ],
            cwd: folder.path().to_path_buf(),
            env: child_environment(std::env::vars_os(), &BTreeMap::new(), &[]),
            log_path: folder.path().join("child.log"),
            protocol: kactors::process::Protocol::Pipes,
            label: "stubborn child".into(),
        };
        let mut child = spawn(&spec).unwrap();
        let mut pipes = child.protocol.take().unwrap();
        let grandchild: i32 = pipes
            .replies
            .recv_line()
            .await
            .unwrap()
            .unwrap()
            .parse()
            .unwrap();
        let group = child.group();
        assert!(
            group
                .live_members()
                .unwrap()
                .iter()
                .any(|pid| pid.as_raw() == grandchild),
            "the grandchild runs in the child's group"
        );

        let started = Instant::now();
        let watch = watchdog
            .watch(GroupId(group.id().as_raw()), deadline, "stubborn child")
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

        // Zombies count as gone; a killed grandchild is only reaped by init, sometimes later.
        let give_up = Instant::now() + Duration::from_secs(5);
        let mut left = group.live_members().unwrap();
        while !left.is_empty() && Instant::now() < give_up {
            tokio::time::sleep(Duration::from_millis(20)).await;
            left = group.live_members().unwrap();
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
