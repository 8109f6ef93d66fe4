//! One profiler invocation: a child in its own process group and its own fresh folder, watched
//! by the Watchdog for its deadline, and checked for processes left behind once it exits.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use actors::ports::GroupId;
use actors::watchdog::WatchdogClient;
use serde::Serialize;
use tokio::time::Instant;

use super::ProfileBudget;
use crate::process::{
    ChildEnv, ChildSpec, Leak, ProcessGroup, Protocol, SpawnError, leaked_after_exit, spawn,
};

/// The file in a pass's folder that gets the child's stdout and stderr.
pub const PASS_LOG: &str = "output.log";

/// How long what a pass's leader started may take to go once the leader has exited (nextest's
/// leak timeout).
const LEAK_SETTLE: Duration = Duration::from_millis(100);

/// How one profiler invocation ended, as a profile's `passes` record it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PassRecord {
    /// The `--pmc` group; empty for other invocations.
    pub counters: Vec<String>,
    /// `None` when a signal ended it.
    pub exit: Option<i32>,
    /// Killed by the watchdog past its deadline.
    pub killed: bool,
    pub seconds: f64,
}

/// Why an invocation's folder cannot be its own.
#[derive(Debug, thiserror::Error)]
pub enum FreshDirError {
    #[error(
        "output directory {} already holds {entry}: each profiler invocation needs an empty \
         directory of its own, so that no earlier file is read as its output",
        dir.display()
    )]
    NotFresh { dir: PathBuf, entry: String },
    #[error("output directory {} exists and is not a directory", dir.display())]
    NotADirectory { dir: PathBuf },
    #[error("cannot read {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// Creates `dir` (and its parents), or accepts it when it exists and is empty; refuses a
/// directory that holds anything.
pub fn ensure_fresh_dir(dir: &Path) -> Result<(), FreshDirError> {
    let io_error = |source| FreshDirError::Io {
        path: dir.to_owned(),
        source,
    };
    match fs::symlink_metadata(dir) {
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            fs::create_dir_all(dir).map_err(io_error)
        }
        Err(error) => Err(io_error(error)),
        Ok(metadata) if !metadata.is_dir() => Err(FreshDirError::NotADirectory {
            dir: dir.to_owned(),
        }),
        Ok(_) => match fs::read_dir(dir).map_err(io_error)?.next() {
            None => Ok(()),
            Some(entry) => {
                let entry = entry.map_err(io_error)?;
                Err(FreshDirError::NotFresh {
                    dir: dir.to_owned(),
                    entry: entry.file_name().to_string_lossy().into_owned(),
                })
            }
        },
    }
}

/// One invocation to run.
#[derive(Clone, Debug)]
pub struct PassSpec {
    /// Names the invocation in logs, errors and the Watchdog's journal lines.
    pub label: String,
    pub program: PathBuf,
    pub args: Vec<OsString>,
    /// The invocation's own folder: made here, and refused when it already holds anything. It
    /// is the child's working directory and holds its log.
    pub dir: PathBuf,
    pub env: ChildEnv,
    /// The `--pmc` group, for the record; empty for other invocations.
    pub counters: Vec<String>,
    /// The sandbox the invocation runs in, if any.
    pub confinement: Option<crate::sandbox::Confinement>,
}

#[derive(Debug, thiserror::Error)]
pub enum PassError {
    #[error("{label} not started: the profile's budget of {budget:?} is spent")]
    BudgetSpent { label: String, budget: Duration },
    #[error("{label} not started: its folder is not fresh")]
    Dir {
        label: String,
        #[source]
        source: FreshDirError,
    },
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    #[error("{label} not run: the Watchdog is gone (the run is shutting down)")]
    WatchdogGone { label: String },
    #[error("error waiting for {label}")]
    Wait {
        label: String,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    Leak(#[from] Leak),
    #[error("error looking for processes {label} left behind")]
    LeakCheck {
        label: String,
        #[source]
        source: io::Error,
    },
}

/// How an invocation went.
#[derive(Debug)]
pub struct PassOutcome {
    /// exit, killed (the Watchdog's deadline passed) and seconds (from the start to the leader's
    /// exit).
    pub record: PassRecord,
    pub log_path: PathBuf,
    /// The child's process group; `None` when it never started.
    pub group: Option<ProcessGroup>,
    /// Why the invocation says nothing, whatever its exit: it never started, could not be
    /// waited for, or left processes behind.
    pub error: Option<PassError>,
}

impl PassOutcome {
    /// Why the invocation's output is not to be read: its error, its deadline, its exit.
    pub fn failure(&self, program: &str) -> Option<String> {
        if let Some(error) = &self.error {
            return Some(super::error_chain(error));
        }
        let record = &self.record;
        if record.killed {
            return Some(format!(
                "{program} killed after {:.1} s, past its deadline",
                record.seconds
            ));
        }
        match record.exit {
            Some(0) => None,
            Some(code) => Some(format!("{program} exited with status {code}")),
            None => Some(format!("{program} ended by a signal")),
        }
    }
}

/// Runs one invocation to its end: a fresh folder, the child in its own process group with its
/// log there, registered with the Watchdog for `pass_deadline` (never beyond what is left of
/// `budget`), waited for, released, and checked for processes left behind.
///
/// `kill_grace` is the Watchdog's: a killed child is held (its leader unreaped, so its group id
/// cannot be reused) until the Watchdog's SIGKILL to the group has gone out.
pub async fn run_pass(
    spec: &PassSpec,
    watchdog: &WatchdogClient,
    budget: &ProfileBudget,
    pass_deadline: Duration,
    kill_grace: Duration,
) -> PassOutcome {
    let log_path = spec.dir.join(PASS_LOG);
    let mut outcome = PassOutcome {
        record: PassRecord {
            counters: spec.counters.clone(),
            exit: None,
            killed: false,
            seconds: 0.0,
        },
        log_path,
        group: None,
        error: None,
    };
    let label = || spec.label.clone();
    let Some(deadline) = budget.pass_deadline(pass_deadline) else {
        outcome.error = Some(PassError::BudgetSpent {
            label: label(),
            budget: budget.total(),
        });
        return outcome;
    };
    if let Err(source) = fresh_dir(&spec.dir).await {
        outcome.error = Some(PassError::Dir {
            label: label(),
            source,
        });
        return outcome;
    }
    let child_spec = ChildSpec {
        program: super::absolute(&spec.program),
        args: spec.args.clone(),
        cwd: spec.dir.clone(),
        env: spec.env.clone(),
        log_path: outcome.log_path.clone(),
        protocol: Protocol::None,
        label: label(),
    };
    let child_spec = match &spec.confinement {
        Some(confinement) => confinement.apply(child_spec),
        None => child_spec,
    };
    let started = Instant::now();
    let mut child = match spawn(&child_spec) {
        Ok(child) => child,
        Err(error) => {
            outcome.error = Some(error.into());
            return outcome;
        }
    };
    let group = child.group();
    outcome.group = Some(group);
    let Some(watch) = watchdog
        .watch(GroupId(group.id().as_raw()), deadline, label())
        .await
    else {
        // Dropping the child kills its group.
        outcome.error = Some(PassError::WatchdogGone { label: label() });
        return outcome;
    };
    let watched_at = Instant::now();
    let status = child.wait().await;
    outcome.record.seconds = started.elapsed().as_secs_f64();
    let killed = watchdog.release(watch).await;
    outcome.record.killed = killed;
    let status = match status {
        Ok(status) => status,
        Err(source) => {
            outcome.error = Some(PassError::Wait {
                label: label(),
                source,
            });
            return outcome;
        }
    };
    outcome.record.exit = status.code();
    // The Watchdog's SIGKILL follows its SIGTERM by the grace period, also after the leader has
    // exited; what it kills is not a leak.
    let sigkill_at = watched_at + deadline + kill_grace;
    let settle = if killed {
        sigkill_at.saturating_duration_since(Instant::now()) + LEAK_SETTLE
    } else {
        LEAK_SETTLE
    };
    match leaked_after_exit(&mut child, settle).await {
        Ok(None) => {}
        Ok(Some(leak)) => outcome.error = Some(leak.into()),
        Err(source) => {
            outcome.error = Some(PassError::LeakCheck {
                label: label(),
                source,
            })
        }
    }
    if killed {
        tokio::time::sleep_until(sigkill_at + LEAK_SETTLE).await;
    }
    outcome
}

async fn fresh_dir(dir: &Path) -> Result<(), FreshDirError> {
    let dir = dir.to_path_buf();
    tokio::task::spawn_blocking(move || ensure_fresh_dir(&dir))
        .await
        .unwrap_or_else(|join_error| std::panic::resume_unwind(join_error.into_panic()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_dir_is_created_or_accepted_empty_and_refused_otherwise() {
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path().join("profile/pass_1");
        ensure_fresh_dir(&dir).unwrap();
        assert!(dir.is_dir());
        ensure_fresh_dir(&dir).unwrap();

        fs::write(dir.join("old_counter_collection.csv"), "x\n").unwrap();
        let error = ensure_fresh_dir(&dir).unwrap_err();
        assert!(matches!(error, FreshDirError::NotFresh { .. }));
        assert!(error.to_string().contains("old_counter_collection.csv"));

        let file = temp.path().join("file");
        fs::write(&file, "").unwrap();
        assert!(matches!(
            ensure_fresh_dir(&file),
            Err(FreshDirError::NotADirectory { .. })
        ));
    }
}
