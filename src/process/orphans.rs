//! The children a dead kactors process left: every child of a run carries the run's folder in
//! its environment (`RUN_MARKER`, inherited by whatever it starts), so that the process that
//! resumes the run finds them, and their process groups, and ends them before it starts its own.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use nix::unistd::{Pid, getpgrp};

use super::environment::RUN_MARKER;
use super::group::ProcessGroup;
use super::proc_stat::ProcStat;

/// How often the end of the groups is looked for while the grace runs.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// The process groups of the running processes whose environment names `root` as their run,
/// this process's own group aside.
pub fn orphan_groups(root: &Path) -> BTreeSet<i32> {
    let marker = format!("{RUN_MARKER}={}", root.display()).into_bytes();
    let own = getpgrp().as_raw();
    let Ok(entries) = fs::read_dir("/proc") else {
        return BTreeSet::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            // A process that exits while we look, or is not ours to read, is passed over.
            fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|environ| environ.split(|b| *b == 0).any(|var| var == marker))
        })
        .filter_map(|pid| {
            let stat = ProcStat::of(pid)?;
            stat.is_running().then_some(stat.process_group)
        })
        .filter(|group| *group != own && *group > 1)
        .collect()
}

/// Ends the groups `orphan_groups` finds: SIGTERM to each, then SIGKILL to what is left after
/// `grace`. Answers how many groups there were. Blocking: call it before the run's runtime
/// starts.
pub fn end_orphans_of_run(root: &Path, grace: Duration) -> u32 {
    let groups: Vec<ProcessGroup> = orphan_groups(root)
        .into_iter()
        .map(|id| ProcessGroup::led_by(Pid::from_raw(id)))
        .collect();
    for group in &groups {
        let _ = group.terminate();
    }
    let deadline = Instant::now() + grace;
    let alive = |group: &ProcessGroup| group.live_members().is_ok_and(|m| !m.is_empty());
    while Instant::now() < deadline && groups.iter().any(alive) {
        std::thread::sleep(POLL_INTERVAL);
    }
    for group in groups.iter().filter(|group| alive(group)) {
        let _ = group.kill();
    }
    groups.len() as u32
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::CommandExt;
    use std::process::Command;

    use super::*;
    use crate::process::test_support::is_running;

    /// A shell that ignores SIGTERM, in a group of its own, marked as a child of `run`.
    fn stubborn_child_of(run: &Path) -> std::process::Child {
        Command::new("sh")
            .args(["-c", "trap '' TERM; sleep 60 & wait"])
            .env(RUN_MARKER, run)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap()
    }

    #[test]
    fn the_children_a_dead_run_left_are_ended_and_no_others() {
        let runs = tempfile::tempdir().unwrap();
        let (ours, theirs) = (runs.path().join("a"), runs.path().join("b"));
        let mut orphan = stubborn_child_of(&ours);
        let mut other = stubborn_child_of(&theirs);
        let orphan_pid = Pid::from_raw(orphan.id() as i32);
        while orphan_groups(&ours).is_empty() {
            std::thread::sleep(POLL_INTERVAL);
        }
        assert_eq!(end_orphans_of_run(&ours, Duration::from_millis(200)), 1);
        let _ = orphan.wait();
        assert!(!is_running(orphan_pid));
        assert!(
            is_running(Pid::from_raw(other.id() as i32)),
            "another run's child is left alone"
        );
        // The whole group: its `sleep` outlives the shell.
        let _ = nix::sys::signal::killpg(
            Pid::from_raw(other.id() as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
        let _ = other.wait();
    }
}
