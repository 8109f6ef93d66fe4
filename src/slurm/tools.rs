//! Slurm's client commands as kactors runs them: before actors start, blocking under a timeout
//! like the GPU tools (`scontrol`, `squeue`, `scancel` for the allocation and the steps a dead
//! run left); during a run, `scancel` on an agent's step through the process layer, so that it
//! never blocks an actor and dies with kactors.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::devices::{HostEnvironment, TOOL_TIMEOUT, ToolFailure, find_executable, run_tool};
use crate::process::{
    ChildSpec, Protocol, WaitOutcome, child_environment, spawn, wait_or_terminate,
};

#[derive(Debug, thiserror::Error)]
pub enum SlurmToolError {
    #[error(
        "{tool} is not on PATH: launcher slurm needs Slurm's client commands (Debian: slurm-client)"
    )]
    NotFound { tool: &'static str },
    #[error("{0}")]
    Failed(String),
}

impl From<ToolFailure> for SlurmToolError {
    fn from(failure: ToolFailure) -> Self {
        SlurmToolError::Failed(failure.to_string())
    }
}

/// The path of one of Slurm's commands on `host`'s PATH.
pub fn slurm_command(
    host: &HostEnvironment,
    tool: &'static str,
) -> Result<PathBuf, SlurmToolError> {
    find_executable(&host.path_dirs(), tool).ok_or(SlurmToolError::NotFound { tool })
}

/// Runs a Slurm command to completion and returns its stdout; a non-zero exit is an error that
/// carries what it printed.
fn run(
    host: &HostEnvironment,
    tool: &'static str,
    args: &[&str],
) -> Result<String, SlurmToolError> {
    let output = run_tool(&slurm_command(host, tool)?, args, host, TOOL_TIMEOUT)?;
    if !output.status.success() {
        return Err(output.failure().into());
    }
    Ok(output.stdout)
}

pub fn scontrol(host: &HostEnvironment, args: &[&str]) -> Result<String, SlurmToolError> {
    run(host, "scontrol", args)
}

pub fn squeue(host: &HostEnvironment, args: &[&str]) -> Result<String, SlurmToolError> {
    run(host, "squeue", args)
}

pub fn scancel(host: &HostEnvironment, args: &[&str]) -> Result<String, SlurmToolError> {
    run(host, "scancel", args)
}

/// `scancel --signal=SIGNAL STEP` from inside a run: a child of kactors in its own group, its
/// output appended to `log`, ended if it takes longer than `limit`. Answers why it failed.
pub async fn signal_step(
    scancel: &Path,
    step: &str,
    signal: &str,
    log: &Path,
    limit: Duration,
) -> Result<(), String> {
    let cwd = log
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("/"));
    let spec = ChildSpec {
        program: scancel.to_path_buf(),
        args: vec![format!("--signal={signal}").into(), step.into()],
        cwd,
        env: child_environment(std::env::vars_os(), &Default::default(), &[]),
        log_path: log.to_path_buf(),
        protocol: Protocol::None,
        label: format!("scancel --signal={signal} {step}"),
    };
    let mut child = spawn(&spec).map_err(|error| error.to_string())?;
    match wait_or_terminate(&mut child, limit, Duration::from_secs(1)).await {
        Ok(WaitOutcome::Exited(status)) if status.success() => Ok(()),
        Ok(WaitOutcome::Exited(status)) => Err(format!(
            "{} failed ({status}); see {}",
            spec.label,
            log.display()
        )),
        Ok(WaitOutcome::PastDeadline(_)) => Err(format!(
            "{} did not finish within {limit:?} and was killed",
            spec.label
        )),
        Err(error) => Err(format!("failed to wait for {}: {error}", spec.label)),
    }
}
