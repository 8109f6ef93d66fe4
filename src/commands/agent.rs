//! `kactors agent`: a node agent (issue 14), started by the head through srun on each node of a
//! Slurm allocation. It reads its strategy as `kactors run` does, picks and locks its node's
//! GPUs, makes the preflight's checks there, says hello on stdout and serves the head's
//! requests (`crate::agent::node`). Its first line is `hello`, or `refused` and exit 2.

use std::path::PathBuf;

use crate::agent::node::{
    Ended, HeldDevice, NodeAgent, NodeIdentity, Outbox, hello, serve, shared_folder_line,
    slurm_indices,
};
use crate::agent::wire::{AgentMessage, Hello};
use crate::check::{CheckLine, preflight};
use crate::cli::AgentArgs;
use crate::config::CliOverrides;
use crate::devices::{DeviceSelection, HostEnvironment, select_devices};
use crate::exit;
use crate::gpus::{RunDevicesError, device_request, lock_or_wait};
use crate::vendor::Platform;

use super::settings::load_strategy;

pub(super) fn agent(args: AgentArgs) -> i32 {
    init_logging();
    let (outbox, writer) = Outbox::start();
    let code = match prepare(&args) {
        Err(Refusal { reason, busy }) => {
            tracing::error!("refused: {reason}");
            outbox.send(&AgentMessage::Refused { reason, busy });
            exit::USAGE
        }
        Ok((agent, hello)) => {
            outbox.send(&AgentMessage::Hello(hello));
            match agent {
                None => exit::SUCCESS,
                Some(agent) => match serve(agent, outbox.clone()) {
                    Ended::Closed => exit::SUCCESS,
                    Ended::Terminated => exit::INTERRUPTED,
                },
            }
        }
    };
    drop(outbox);
    writer.finish();
    code
}

/// The agent's log goes to stderr, which srun carries to the head's log of this node.
fn init_logging() {
    use tracing_subscriber::{EnvFilter, fmt};
    let _ = fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .try_init();
}

/// Why the agent cannot serve; `busy` when another run holds every GPU of the node.
struct Refusal {
    reason: String,
    busy: bool,
}

impl From<String> for Refusal {
    fn from(reason: String) -> Self {
        Refusal {
            reason,
            busy: false,
        }
    }
}

/// The agent ready to serve (none with `--list`) and its hello.
fn prepare(args: &AgentArgs) -> Result<(Option<NodeAgent>, Hello), Refusal> {
    let overrides = CliOverrides {
        python: args.python.clone(),
        ..CliOverrides::default()
    };
    let settings = load_strategy(&args.config_dir, &args.strategy, &overrides)
        .map_err(|error| error.to_string())?
        .settings;
    let host = HostEnvironment::from_process(settings.python.clone());
    let identity = NodeIdentity::of_step(&host)?;
    let selection = select_devices(&device_request(&settings, None), &host)
        .map_err(|error| format!("node {}: {error}", identity.node))?;
    let Platform::Vendor(vendor) = selection.platform else {
        return Err(Refusal::from(
            "the noop platform runs nothing on a node: use launcher: local".to_string(),
        ));
    };
    let mut notes = selection.warnings.clone();
    let indices = slurm_indices(&selection.devices, host.var("SLURM_STEP_GPUS"));
    let index_of = |id: u32| indices.get(&id).copied().unwrap_or(id);
    if args.list {
        let devices: Vec<HeldDevice> = selection
            .devices
            .iter()
            .map(|device| HeldDevice {
                index: index_of(device.id),
                device: device.clone(),
                lock: None,
            })
            .collect();
        return Ok((None, hello(&identity, vendor, &devices, notes, &[])));
    }
    let locked =
        lock_or_wait(&settings, &selection.devices, &mut notes).map_err(|error| Refusal {
            busy: matches!(error, RunDevicesError::AllLocked { .. }),
            reason: format!("node {}: {error}", identity.node),
        })?;
    let devices: Vec<HeldDevice> = locked
        .into_iter()
        .map(|locked| HeldDevice {
            index: index_of(locked.device.id),
            device: locked.device,
            lock: locked.lock,
        })
        .collect();
    let held = DeviceSelection {
        platform: selection.platform,
        devices: devices.iter().map(|held| held.device.clone()).collect(),
        warnings: Vec::new(),
    };
    let kernel_dir = args
        .kernel_dir
        .as_deref()
        .map(|dir| std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf()))
        .ok_or_else(|| Refusal::from("--kernel-dir is required to serve a run".to_string()))?;
    let mut lines: Vec<CheckLine> = Vec::new();
    if let (Some(file), Some(token)) = (&args.check_file, &args.check_token) {
        lines.push(shared_folder_line(&identity.node, file, token));
    }
    lines.extend(preflight(&settings, &held, Some(&kernel_dir)));
    let hello = hello(&identity, vendor, &devices, notes, &lines);
    let agent = NodeAgent {
        settings,
        kernel_dir: PathBuf::from(&kernel_dir),
        identity,
        platform: selection.platform,
        devices,
    };
    Ok((Some(agent), hello))
}
