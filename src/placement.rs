//! Where a run's devices are (`launcher`): this machine's, selected, locked and checked here;
//! or the Slurm allocation's, placed by the head's side of the node agents
//! (`crate::agent::head::placement`). `kactors run`, `kactors resume` and `kactors devices`
//! share it; it runs before the actors, on the System that will drive them.

use std::path::Path;
use std::rc::Rc;

use actix::SystemRunner;
use actors::journal::DeviceDescription;
use actors::model::DeviceId;
use actors::ports::{EvaluatorFactory, KernelProfiler};
use actors::watchdog::WatchdogClient;

use crate::agent::head::launch::{AgentPlatform, Agents};
use crate::agent::head::placement::{AgentInputs, SlurmPlacement, SlurmPlacementError};
use crate::check::{CheckReport, preflight};
use crate::config::RunSettings;
use crate::console;
use crate::devices::{GpuLock, GpuSpec, GpuState, HostEnvironment, gpu_state};
use crate::gpus::{RunDevices, RunDevicesError, choose_run_devices};
use crate::platform::PreparedPlatform;
use crate::slurm::uses_slurm;
use crate::vendor::{Platform, PlatformRequest};

/// Why a run's devices could not be placed; every one refuses the run (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum PlacementError {
    #[error(transparent)]
    Devices(#[from] RunDevicesError),
    #[error(transparent)]
    Slurm(#[from] SlurmPlacementError),
    /// Settings that contradict each other (`--gpus` under launcher slurm).
    #[error("{0}")]
    Usage(String),
    /// A check that a run needs failed, or the run directory could not be prepared.
    #[error("{0}")]
    Environment(String),
}

/// The devices a run uses, chosen and checked.
pub(crate) enum Placement {
    Local(RunDevices),
    Slurm(Box<SlurmPlacement>),
}

/// Whether the strategy's run uses the allocation's nodes; the noop platform never does.
pub(crate) fn launches_on_slurm(
    settings: &RunSettings,
    host: &HostEnvironment,
) -> Result<bool, PlacementError> {
    let slurm = uses_slurm(settings.launcher, host);
    if slurm && settings.platform == PlatformRequest::NOOP {
        if settings.launcher == crate::config::LauncherRequest::Auto {
            return Ok(false);
        }
        return Err(PlacementError::Usage(
            "launcher slurm runs evaluators on the allocation's nodes, and the noop platform runs none: use launcher: local".into(),
        ));
    }
    Ok(slurm)
}

impl Placement {
    /// The devices and the preflight's lines (printed when they fail). Exit 2 when a check
    /// that a run needs failed, or no agent could start.
    pub(crate) fn start(
        settings: &RunSettings,
        gpus: Option<Vec<u32>>,
        kernel_root: &Path,
        run_parent: &Path,
        inputs: &AgentInputs<'_>,
        system: &SystemRunner,
    ) -> Result<(Placement, CheckReport), PlacementError> {
        let host = HostEnvironment::from_process(settings.python.clone());
        let (launch, preflight) = if launches_on_slurm(settings, &host)? {
            if gpus.is_some() {
                return Err(PlacementError::Usage(
                    "--gpus names this machine's devices; under launcher slurm the devices are the allocation's (use --workers to use fewer)".into(),
                ));
            }
            let slurm =
                SlurmPlacement::start(settings, kernel_root, run_parent, inputs, &host, system)?;
            let preflight = slurm.agents.preflight().into_iter().collect::<Vec<_>>();
            let mut report = CheckReport::default();
            report.extend(preflight);
            (Placement::Slurm(Box::new(slurm)), report)
        } else {
            let devices = choose_run_devices(settings, gpus, &host)?;
            for note in &devices.notes {
                console::err(format_args!("kactors: {note}"));
            }
            let report = preflight(settings, &devices.selection, Some(kernel_root));
            (Placement::Local(devices), report)
        };
        for line in preflight.failures() {
            console::err(format_args!("kactors: {line}"));
        }
        if launch.platform() != Platform::Noop
            && settings.sandbox == crate::sandbox::SandboxSetting::Off
            && let Some(warning) = crate::sandbox::warning(settings.sandbox, None)
        {
            console::err(format_args!("kactors: {warning}"));
        }
        let stopping = preflight
            .lines()
            .iter()
            .filter(|line| line.stops_a_run())
            .count();
        if stopping > 0 {
            launch.abandon(system);
            return Err(PlacementError::Environment(format!(
                "{stopping} preflight check(s) failed (the FAIL lines above); `kactors check --strategy {}` repeats them",
                settings.strategy
            )));
        }
        Ok((launch, preflight))
    }

    /// A run refused after its devices were placed: the agents (under Slurm) end their
    /// evaluators and exit, and their steps end with them.
    pub(crate) fn abandon(&self, system: &SystemRunner) {
        if let Placement::Slurm(slurm) = self {
            system.block_on(slurm.agents.close());
        }
    }

    pub(crate) fn platform(&self) -> Platform {
        match self {
            Placement::Local(devices) => devices.selection.platform,
            Placement::Slurm(slurm) => slurm.platform,
        }
    }

    /// The spec row the prompts describe: the first device's.
    pub(crate) fn first_spec(&self) -> Option<&'static GpuSpec> {
        match self {
            Placement::Local(devices) => devices
                .selection
                .devices
                .first()
                .and_then(|device| device.spec),
            Placement::Slurm(slurm) => slurm.table.rows.first().and_then(|row| row.spec),
        }
    }

    pub(crate) fn device_count(&self) -> usize {
        match self {
            Placement::Local(devices) => devices.selection.devices.len(),
            Placement::Slurm(slurm) => slurm.table.rows.len(),
        }
    }

    /// `run_started`'s device table.
    pub(crate) fn describe(&self) -> Vec<DeviceDescription> {
        match self {
            Placement::Local(devices) => devices.describe(),
            Placement::Slurm(slurm) => slurm.table.describe(),
        }
    }

    /// run.yaml's record of the GPUs' state: read here on one node, or as the agents checked
    /// their nodes'.
    pub(crate) fn gpu_state(&self, settings: &RunSettings) -> GpuState {
        match self {
            Placement::Local(devices) => gpu_state(
                &devices.selection,
                &HostEnvironment::from_process(settings.python.clone()),
            ),
            Placement::Slurm(slurm) => slurm.gpu_state(),
        }
    }

    /// Once the run directory exists: the platform's files written there, and under Slurm the
    /// agents told to start. The GPU locks of one node come back to be held for the run.
    pub(crate) fn prepare(
        self,
        run_root: &Path,
        settings: &RunSettings,
        kernel_root: &Path,
        system: &SystemRunner,
    ) -> Result<(RunPlatform, Vec<GpuLock>), PlacementError> {
        let failed = |error: std::io::Error| {
            PlacementError::Environment(format!(
                "failed to prepare the run directory {}: {error}",
                run_root.display()
            ))
        };
        match self {
            Placement::Local(devices) => {
                let platform =
                    crate::platform::prepare(run_root, settings, &devices.selection, kernel_root)
                        .map_err(failed)?;
                Ok((RunPlatform::Local(platform), devices.locks))
            }
            Placement::Slurm(slurm) => Ok((
                RunPlatform::Agents(slurm.prepare(run_root, settings, system)?),
                Vec::new(),
            )),
        }
    }
}

/// A run's platform, its files in place.
pub(crate) enum RunPlatform {
    Local(PreparedPlatform),
    Agents(AgentPlatform),
}

impl RunPlatform {
    /// The devices the run's workers are pinned to.
    pub(crate) fn devices(&self) -> Vec<DeviceId> {
        match self {
            RunPlatform::Local(platform) => platform.devices(),
            RunPlatform::Agents(agents) => agents.table.ids(),
        }
    }

    /// The agents to close once the run is over.
    pub(crate) fn agents(&self) -> Option<Rc<Agents>> {
        match self {
            RunPlatform::Local(_) => None,
            RunPlatform::Agents(agents) => Some(agents.agents.clone()),
        }
    }

    /// The evaluators and the profiler, once the Watchdog exists; a lost node agent is
    /// started again at most `restart_budget` times.
    pub(crate) fn work_ports(
        self,
        watchdog: WatchdogClient,
        restart_budget: u32,
    ) -> (Rc<dyn EvaluatorFactory>, Option<Rc<dyn KernelProfiler>>) {
        match self {
            RunPlatform::Local(platform) => platform.work_ports(watchdog),
            RunPlatform::Agents(agents) => agents.work_ports(restart_budget),
        }
    }
}
