//! What the tests of this module share: a scratch run folder with one child's folder and log,
//! children written as shell or Python scripts, and bounded waits on /proc.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs;
use std::path::PathBuf;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tempfile::TempDir;
use tokio::time::Instant;

use super::proc_stat::ProcStat;
use super::{ChildEnv, ChildSpec, ProcessGroup, Protocol, child_environment};

/// How long a test waits for orphans to die: init reaps them when it gets to it.
const GONE_LIMIT: Duration = Duration::from_secs(10);

pub(super) struct Scratch {
    run_folder: TempDir,
    pub(super) child_folder: PathBuf,
    pub(super) log_path: PathBuf,
}

impl Scratch {
    pub(super) fn new() -> Scratch {
        let run_folder = tempfile::tempdir().unwrap();
        let child_folder = run_folder.path().join("candidate");
        fs::create_dir(&child_folder).unwrap();
        let log_path = child_folder.join("child.log");
        Scratch {
            run_folder,
            child_folder,
            log_path,
        }
    }

    pub(super) fn path(&self, name: &str) -> PathBuf {
        self.run_folder.path().join(name)
    }

    pub(super) fn spec(
        &self,
        label: &str,
        program: &str,
        args: &[&str],
        env: ChildEnv,
        protocol: bool,
    ) -> ChildSpec {
        ChildSpec {
            program: PathBuf::from(program),
            args: args.iter().map(OsString::from).collect(),
            cwd: self.child_folder.clone(),
            env,
            log_path: self.log_path.clone(),
            protocol: if protocol {
                Protocol::Pipes
            } else {
                Protocol::None
            },
            label: label.to_string(),
        }
    }

    pub(super) fn sh(&self, script: &str, protocol: bool) -> ChildSpec {
        self.spec(
            "sh child",
            "sh",
            &["-c", script],
            inherited_environment(),
            protocol,
        )
    }

    pub(super) fn python(&self, script: &str, protocol: bool) -> ChildSpec {
        self.spec(
            "python child",
            "python3",
            &["-c", script],
            inherited_environment(),
            protocol,
        )
    }

    pub(super) fn log(&self) -> String {
        fs::read_to_string(&self.log_path).unwrap()
    }
}

fn inherited_environment() -> ChildEnv {
    child_environment(std::env::vars_os(), &BTreeMap::new(), &[])
}

/// Whether `pid` is a process that has not exited; a zombie has.
pub(crate) fn is_running(pid: Pid) -> bool {
    ProcStat::of(pid).is_some_and(|stat| stat.is_running())
}

/// Polls /proc until nothing of `group` runs and none of `pids` does, and fails the test if
/// that takes longer than `GONE_LIMIT`.
pub(super) async fn eventually_gone(group: ProcessGroup, pids: &[Pid]) {
    let started = Instant::now();
    loop {
        let members = group.live_members().unwrap();
        let running: Vec<Pid> = pids
            .iter()
            .copied()
            .filter(|pid| is_running(*pid))
            .collect();
        if members.is_empty() && running.is_empty() {
            return;
        }
        assert!(
            started.elapsed() < GONE_LIMIT,
            "still running after {GONE_LIMIT:?}: group members {members:?}, processes {running:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Kills a process that escaped every group, whether or not the test gets to the end.
pub(super) struct KillOnDrop(pub(super) Pid);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = kill(self.0, Signal::SIGKILL);
    }
}
