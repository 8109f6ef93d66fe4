//! The node agents' steps: their name, which says which kactors started them (host, pid and the
//! pid's start time, so that a reused pid is not mistaken for it), the `srun` command line that
//! starts one, and the sweep that cancels the steps a dead run left in the allocation.
//!
//! A step outlives its run only if its `srun` does: srun dies with kactors (PR_SET_PDEATHSIG)
//! and Slurm then cancels the step, so the sweep is for what that cannot cover (a head on a
//! machine that went down with its srun's connection half-open, a kill in the instant before
//! the parent-death signal was set).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::tools::{SlurmToolError, scancel, squeue};
use crate::devices::HostEnvironment;

/// Every agent step's name starts with this.
pub const STEP_NAME_PREFIX: &str = "kactors-agent";

/// Who started a step: the head's host, pid and the pid's start time (clock ticks since boot,
/// /proc/PID/stat's 22nd field).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepOwner {
    pub host: String,
    pub pid: u32,
    pub started: u64,
}

impl StepOwner {
    /// This process, on this host.
    pub fn this_process(host: &str) -> StepOwner {
        let pid = std::process::id();
        StepOwner {
            host: host.to_string(),
            pid,
            started: process_start(pid).unwrap_or(0),
        }
    }

    /// `kactors-agent:HOST:PID:START`.
    pub fn step_name(&self) -> String {
        format!(
            "{STEP_NAME_PREFIX}:{}:{}:{}",
            self.host, self.pid, self.started
        )
    }

    /// The owner a step's name names, if it is an agent's.
    pub fn of_step_name(name: &str) -> Option<StepOwner> {
        let rest = name.strip_prefix(STEP_NAME_PREFIX)?.strip_prefix(':')?;
        let mut parts = rest.rsplitn(3, ':');
        let started = parts.next()?.parse().ok()?;
        let pid = parts.next()?.parse().ok()?;
        let host = parts.next()?.to_string();
        Some(StepOwner { host, pid, started })
    }

    /// Whether this owner is a process that is still running on `host` (never for another
    /// host: that cannot be known from here).
    fn is_alive_here(&self, host: &str) -> Option<bool> {
        if self.host != host {
            return None;
        }
        Some(process_start(self.pid) == Some(self.started))
    }
}

/// /proc/PID/stat's start time.
fn process_start(pid: u32) -> Option<u64> {
    crate::process::ProcStat::of(pid)?.start_time
}

/// One line of `squeue --steps --noheader --format=%i|%j`: the step id and its name.
pub fn parse_steps(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|line| {
            let (id, name) = line.trim().split_once('|')?;
            Some((id.trim().to_string(), name.trim().to_string()))
        })
        .collect()
}

/// The agent steps of `steps` whose head was on `host` and is no longer running.
pub fn orphaned(steps: &[(String, String)], host: &str) -> Vec<String> {
    steps
        .iter()
        .filter(|(_, name)| {
            StepOwner::of_step_name(name)
                .is_some_and(|owner| owner.is_alive_here(host) == Some(false))
        })
        .map(|(id, _)| id.clone())
        .collect()
}

/// Cancels (KILL) the agent steps of `job` that a dead kactors on this host left; answers their
/// ids. Run before a new run starts its own agents in the same allocation.
pub fn cancel_orphaned_steps(
    env: &HostEnvironment,
    job: &str,
    host: &str,
) -> Result<Vec<String>, SlurmToolError> {
    let listing = squeue(
        env,
        &["--steps", "--noheader", "--format=%i|%j", "--jobs", job],
    )?;
    let orphans = orphaned(&parse_steps(&listing), host);
    cancel_steps(env, &orphans)?;
    Ok(orphans)
}

/// `scancel --signal=KILL` on each of `steps` (`JOB.STEP`): a resume cancels the steps its
/// dead run journaled this way.
pub fn cancel_steps(env: &HostEnvironment, steps: &[String]) -> Result<(), SlurmToolError> {
    if steps.is_empty() {
        return Ok(());
    }
    let mut args = vec!["--signal=KILL"];
    args.extend(steps.iter().map(String::as_str));
    scancel(env, &args).map(|_| ())
}

/// What one agent's step is: the node, how many of its GPUs, and the agent's command.
pub struct AgentStep<'a> {
    pub job: &'a str,
    pub node: &'a str,
    pub gpus: usize,
    pub name: &'a str,
    /// The kactors binary, on the filesystem the allocation shares.
    pub program: &'a Path,
    pub agent_args: &'a [OsString],
}

/// `srun`'s arguments for an agent's step: one task on its node, every GPU the allocation has
/// there (Slurm renumbers a step's GPUs, so the agent takes them all and pins each itself),
/// overlapping the other steps, so that a second run in the same allocation can start its own
/// agents and the per-GPU locks decide who gets which GPU. stdin goes to the task.
pub fn srun_args(step: &AgentStep<'_>) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec![
        format!("--jobid={}", step.job).into(),
        "--nodes=1".into(),
        "--ntasks=1".into(),
        format!("--nodelist={}", step.node).into(),
        "--overlap".into(),
        format!("--gres=gpu:{}", step.gpus).into(),
        format!("--job-name={}", step.name).into(),
        "--kill-on-bad-exit=1".into(),
        "--quiet".into(),
        "--input=all".into(),
        step.program.as_os_str().to_os_string(),
    ];
    args.extend(step.agent_args.iter().cloned());
    args
}

/// Where Slurm's commands are: PATH, as the head sees it.
pub fn srun_path(env: &HostEnvironment) -> Result<PathBuf, SlurmToolError> {
    super::tools::slurm_command(env, "srun")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_name_says_which_kactors_started_it() {
        let owner = StepOwner {
            host: "login-1.cluster".into(),
            pid: 4242,
            started: 987654,
        };
        let name = owner.step_name();
        assert_eq!(name, "kactors-agent:login-1.cluster:4242:987654");
        assert_eq!(StepOwner::of_step_name(&name), Some(owner));
        for other in [
            "bash",
            "kactors-agent",
            "kactors-agentx:h:1:2",
            "kactors-agent:h:x:2",
        ] {
            assert_eq!(StepOwner::of_step_name(other), None, "{other}");
        }
    }

    #[test]
    fn only_steps_of_a_dead_kactors_on_this_host_are_orphans() {
        let me = StepOwner::this_process("head");
        assert!(me.started > 0, "this process's start time is readable");
        let dead = StepOwner {
            started: me.started + 1,
            ..me.clone()
        };
        let elsewhere = StepOwner {
            host: "other".into(),
            started: 1,
            ..me.clone()
        };
        let listing = format!(
            "7.0|{}\n7.1|{}\n7.2|{}\n7.3|bash\n7.extern|extern\n",
            me.step_name(),
            dead.step_name(),
            elsewhere.step_name()
        );
        let steps = parse_steps(&listing);
        assert_eq!(steps.len(), 5);
        assert_eq!(orphaned(&steps, "head"), ["7.1"]);
    }

    #[test]
    fn an_agent_step_holds_its_nodes_gpus_and_overlaps_other_steps() {
        let args = srun_args(&AgentStep {
            job: "12",
            node: "n2",
            gpus: 4,
            name: "kactors-agent:h:1:2",
            program: Path::new("/shared/bin/kactors"),
            agent_args: &["agent".into(), "--strategy".into(), "nvidia".into()],
        });
        let args: Vec<&str> = args.iter().map(|arg| arg.to_str().unwrap()).collect();
        assert_eq!(
            args,
            [
                "--jobid=12",
                "--nodes=1",
                "--ntasks=1",
                "--nodelist=n2",
                "--overlap",
                "--gres=gpu:4",
                "--job-name=kactors-agent:h:1:2",
                "--kill-on-bad-exit=1",
                "--quiet",
                "--input=all",
                "/shared/bin/kactors",
                "agent",
                "--strategy",
                "nvidia"
            ]
        );
    }
}
