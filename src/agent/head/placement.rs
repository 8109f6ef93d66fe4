//! The head's Slurm placement: a run's devices on the allocation's nodes, one node agent per
//! node started with srun, each locking and checking its node's GPUs (issue 14), then the run's
//! device table. `crate::placement` picks it or this machine's devices; it runs before the
//! actors, on the System that will drive them (the agents' channels belong to it).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, SystemTime};

use actix::SystemRunner;

use crate::agent::wire::Hello;
use crate::config::RunSettings;
use crate::console;
use crate::devices::{GpuState, HostEnvironment};
use crate::platform::Tools;
use crate::process::child_environment;
use crate::slurm::{Allocation, StepOwner, cancel_orphaned_steps, slurm_command};
use crate::vendor::{Platform, PlatformRequest};

use super::launch::{AgentPlatform, Agents, AgentsPlan, DeviceTable, launch_agents};

/// Why the allocation's devices could not be placed: its message names the node, the job or
/// the tool at fault.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SlurmPlacementError(pub(crate) String);

/// How long an agent may take to say hello: its step may wait for the allocation's resources
/// and its preflight imports torch.
const AGENT_START_LIMIT: Duration = Duration::from_secs(600);

/// What the head passes on to each agent: the inputs `kactors run` was given.
pub(crate) struct AgentInputs<'a> {
    pub strategy: &'a str,
    pub config_dir: Option<&'a Path>,
    pub python: Option<&'a Path>,
}

pub(crate) struct SlurmPlacement {
    pub(crate) agents: Rc<Agents>,
    pub(crate) table: DeviceTable,
    pub(crate) platform: Platform,
    /// The agents' logs and the shared-folder check, beside the runs until the run directory
    /// exists; then moved into it as `agents/`.
    scratch: ScratchFolder,
}

/// A folder removed when dropped, unless it was moved away or kept: a run that is refused
/// leaves nothing behind.
struct ScratchFolder {
    path: PathBuf,
    keep: bool,
}

impl Drop for ScratchFolder {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// Where this process's agents keep their logs in the run directory: `agents/`, or on a resume
/// the first of `agents.2/`, `agents.3/`, … that is free (the earlier processes' logs stay).
fn agents_folder(run_root: &Path) -> PathBuf {
    std::iter::once(run_root.join("agents"))
        .chain((2..).map(|n| run_root.join(format!("agents.{n}"))))
        .find(|folder| !folder.exists())
        .expect("an endless sequence of names has a free one")
}

impl SlurmPlacement {
    /// The allocation's agents started, each node's devices locked and checked there, and the
    /// run's device table; refused when a node's agent cannot start or the nodes disagree.
    pub(crate) fn start(
        settings: &RunSettings,
        kernel_root: &Path,
        run_parent: &Path,
        inputs: &AgentInputs<'_>,
        host: &HostEnvironment,
        system: &SystemRunner,
    ) -> Result<SlurmPlacement, SlurmPlacementError> {
        let environment = |error: &dyn std::fmt::Display| SlurmPlacementError(error.to_string());
        let allocation = Allocation::discover(host).map_err(|error| environment(&error))?;
        let hostname = this_host();
        match cancel_orphaned_steps(host, &allocation.job_id, &hostname) {
            Ok(cancelled) if !cancelled.is_empty() => console::err(format_args!(
                "kactors: cancelled the node agents' steps {} that a kactors run which is gone left in job {}",
                cancelled.join(", "),
                allocation.job_id
            )),
            Ok(_) => {}
            Err(error) => console::err(format_args!(
                "kactors: warning: could not look for steps a dead run left: {error}"
            )),
        }
        let scratch = ScratchFolder {
            path: scratch_folder(run_parent).map_err(|error| {
                SlurmPlacementError(format!(
                    "failed to create a folder for the node agents under {}: {error}",
                    run_parent.display()
                ))
            })?,
            keep: false,
        };
        let token = format!(
            "{}-{}",
            std::process::id(),
            SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos()
        );
        let check_file = scratch.path.join("shared-folder-check");
        std::fs::write(&check_file, &token).map_err(|error| environment(&error))?;
        let mut agent_args = inputs.agent_args();
        agent_args.extend([
            "--kernel-dir".into(),
            kernel_root.as_os_str().to_os_string(),
            "--check-file".into(),
            check_file.as_os_str().to_os_string(),
            "--check-token".into(),
            token.into(),
        ]);
        let plan = agents_plan(settings, host, allocation, agent_args, scratch.path.clone())?;
        let (agents, failures) = system.block_on(launch_agents(&plan));
        let agents = Rc::new(agents);
        let refuse = |message: String| {
            system.block_on(agents.close());
            Err(SlurmPlacementError(message))
        };
        let (busy, failed): (Vec<_>, Vec<_>) =
            failures.into_iter().partition(|failure| failure.busy);
        if !failed.is_empty() {
            let reasons: Vec<String> = failed.into_iter().map(|failure| failure.reason).collect();
            return refuse(format!(
                "the node agents could not start on every node of job {}: {}",
                plan.allocation.job_id,
                reasons.join("; ")
            ));
        }
        // A node whose GPUs another run holds is left out, as a busy GPU is on one node.
        for failure in &busy {
            console::err(format_args!(
                "kactors: {}; the run goes on without it",
                failure.reason
            ));
        }
        if agents.nodes.is_empty() {
            return refuse(format!(
                "every GPU of job {} is in use by other kactors runs",
                plan.allocation.job_id
            ));
        }
        let hellos: Vec<&Hello> = agents.nodes.iter().map(|node| &node.hello).collect();
        let vendors: std::collections::BTreeSet<_> =
            hellos.iter().map(|hello| hello.vendor).collect();
        let platform = match (vendors.len(), vendors.first()) {
            (1, Some(vendor)) => Platform::Vendor(*vendor),
            _ => {
                return refuse(format!(
                    "the allocation's nodes have GPUs of different vendors ({}): one run uses one vendor",
                    vendors
                        .iter()
                        .map(|vendor| vendor.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        };
        if let PlatformRequest::Exactly(wanted) = settings.platform
            && wanted != platform
        {
            return refuse(format!(
                "the strategy's platform is {wanted} but the allocation's GPUs are {platform}"
            ));
        }
        for note in agents.notes() {
            console::err(format_args!("kactors: {note}"));
        }
        let (table, notes) = DeviceTable::assign(&hellos, settings.num_workers);
        for note in notes {
            console::err(format_args!("kactors: {note}"));
        }
        if table.rows.is_empty() {
            return refuse(format!(
                "no node of job {} offers a GPU this run may use",
                plan.allocation.job_id
            ));
        }
        Ok(SlurmPlacement {
            agents,
            table,
            platform,
            scratch,
        })
    }

    /// Once the run directory exists: the agents' logs moved into it, the platform's files
    /// written there and the agents told to start.
    pub(crate) fn prepare(
        mut self,
        run_root: &Path,
        settings: &RunSettings,
        system: &SystemRunner,
    ) -> Result<AgentPlatform, SlurmPlacementError> {
        let agents_folder = agents_folder(run_root);
        match std::fs::rename(&self.scratch.path, &agents_folder) {
            Ok(()) => {
                for node in &self.agents.nodes {
                    node.moved_to(&agents_folder);
                }
            }
            Err(error) => {
                self.scratch.keep = true;
                tracing::warn!(
                    "the agents' logs stay in {} ({error})",
                    self.scratch.path.display()
                );
            }
        }
        let prepared = Tools::write(run_root).and_then(|_| {
            self.table.rows.iter().try_for_each(|row| {
                std::fs::create_dir_all(run_root.join("devices").join(row.device.to_string()))
            })
        });
        if let Err(error) = prepared {
            system.block_on(self.agents.close());
            return Err(SlurmPlacementError(format!(
                "failed to prepare the run directory {}: {error}",
                run_root.display()
            )));
        }
        if let Err(reason) = system.block_on(self.agents.start(run_root, &self.table)) {
            system.block_on(self.agents.close());
            return Err(SlurmPlacementError(format!(
                "a node agent could not start the run: {reason}"
            )));
        }
        Ok(AgentPlatform {
            agents: self.agents.clone(),
            table: self.table.clone(),
            profiler_enabled: settings.profiler_enabled,
        })
    }

    /// run.yaml's record of the GPUs' state: each agent checked its node's devices, and the
    /// record says so.
    pub(crate) fn gpu_state(&self) -> GpuState {
        GpuState {
            vendor: self.platform,
            devices: self
                .table
                .describe()
                .iter()
                .map(|row| {
                    format!(
                        "{} {} {} (step {})",
                        row.location(),
                        row.name,
                        row.uuid.as_deref().unwrap_or("no uuid"),
                        row.step.as_deref().unwrap_or("?")
                    )
                })
                .collect(),
            processes: Vec::new(),
            notes: vec![
                "the devices are on the allocation's nodes: clocks and processes are not read from the head".into(),
            ],
        }
    }
}

impl AgentInputs<'_> {
    /// `agent --strategy NAME [--config-dir DIR] [--python PATH]`.
    fn agent_args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> =
            vec!["agent".into(), "--strategy".into(), self.strategy.into()];
        if let Some(dir) = self.config_dir {
            args.extend([
                "--config-dir".into(),
                std::path::absolute(dir)
                    .unwrap_or_else(|_| dir.to_path_buf())
                    .into(),
            ]);
        }
        if let Some(python) = self.python {
            args.extend(["--python".into(), python.as_os_str().to_os_string()]);
        }
        args
    }
}

/// The host's own name, for the steps' names.
fn this_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

/// How the agents with `agent_args` are started on `allocation`'s nodes and watched.
fn agents_plan(
    settings: &RunSettings,
    host: &HostEnvironment,
    allocation: Allocation,
    agent_args: Vec<OsString>,
    log_dir: PathBuf,
) -> Result<AgentsPlan, SlurmPlacementError> {
    let environment = |error: &dyn std::fmt::Display| SlurmPlacementError(error.to_string());
    let tool = |name| slurm_command(host, name).map_err(|error| environment(&error));
    Ok(AgentsPlan {
        allocation,
        srun: tool("srun")?,
        scancel: tool("scancel")?,
        program: std::env::current_exe().map_err(|error| {
            SlurmPlacementError(format!("cannot find this kactors binary: {error}"))
        })?,
        agent_args,
        step_name: StepOwner::this_process(&this_host()).step_name(),
        env: child_environment(std::env::vars_os(), &Default::default(), &[]),
        cwd: std::env::current_dir().map_err(|error| environment(&error))?,
        log_dir,
        timeout: Duration::from_secs_f64(settings.agent_timeout_s),
        grace: Duration::from_secs_f64(settings.kill_grace_s),
        start_limit: AGENT_START_LIMIT,
    })
}

/// `kactors devices` on an allocation: every node's agent lists its devices (no lock, no
/// check) and exits. Answers their hellos in node order.
pub(crate) fn list_on_allocation(
    settings: &RunSettings,
    inputs: &AgentInputs<'_>,
    host: &HostEnvironment,
) -> Result<Vec<Hello>, SlurmPlacementError> {
    let environment = |error: &dyn std::fmt::Display| SlurmPlacementError(error.to_string());
    let allocation = Allocation::discover(host).map_err(|error| environment(&error))?;
    let logs = ScratchFolder {
        path: std::env::temp_dir().join(format!("kactors-devices-{}", std::process::id())),
        keep: false,
    };
    std::fs::create_dir_all(&logs.path).map_err(|error| environment(&error))?;
    let mut agent_args = inputs.agent_args();
    agent_args.push("--list".into());
    let plan = agents_plan(settings, host, allocation, agent_args, logs.path.clone())?;
    let system = actix::System::new();
    let (agents, failures) = system.block_on(launch_agents(&plan));
    system.block_on(agents.close());
    if !failures.is_empty() {
        let reasons: Vec<String> = failures.into_iter().map(|failure| failure.reason).collect();
        return Err(SlurmPlacementError(format!(
            "the node agents could not list the devices of job {}: {}",
            plan.allocation.job_id,
            reasons.join("; ")
        )));
    }
    Ok(agents.nodes.iter().map(|node| node.hello.clone()).collect())
}

/// `<run-dir parent>/.kactors-agents-<pid>-<nanos>/`: on the filesystem the run directory will
/// be on, which every node must see.
fn scratch_folder(run_parent: &Path) -> std::io::Result<PathBuf> {
    let parent = std::path::absolute(run_parent)?;
    std::fs::create_dir_all(&parent)?;
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let folder = parent.join(format!(".kactors-agents-{}-{nanos}", std::process::id()));
    std::fs::create_dir(&folder)?;
    Ok(folder)
}
