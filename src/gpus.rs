//! From a run's settings to the devices it pins workers to: the device module's selection
//! (vendor, masks, `--gpus`), clamped to the workers asked for, each GPU locked against other
//! kactors runs on the node. `kactors run` and `kactors devices` share it, and it runs before
//! any actor starts.

use std::num::NonZeroU32;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use actors::journal::DeviceDescription;
use actors::model::DeviceId;

use crate::config::RunSettings;
use crate::devices::{
    DeviceError, DeviceKind, DeviceRequest, DeviceSelection, GpuLock, HostEnvironment,
    LockedDevice, lock_devices, select_devices, workers_note,
};
use crate::vendor::Platform;

pub fn device_request(settings: &RunSettings, gpus: Option<Vec<u32>>) -> DeviceRequest {
    DeviceRequest {
        platform: settings.platform,
        gpus,
        noop_devices: NonZeroU32::new(settings.num_workers.unwrap_or(1)).unwrap_or(NonZeroU32::MIN),
        gpu_name: settings.gpu_name.clone(),
    }
}

/// No strategy: the vendor is detected, as `kactors devices` without `--strategy` decides it.
pub fn detect_request(gpus: Option<Vec<u32>>) -> DeviceRequest {
    DeviceRequest {
        platform: crate::vendor::PlatformRequest::Detect,
        gpus,
        noop_devices: NonZeroU32::MIN,
        gpu_name: None,
    }
}

/// Where GPU locks live: shared by every user of the node, so that two runs never share a GPU.
pub fn lock_dir() -> PathBuf {
    std::env::var_os("KACTORS_LOCK_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp/kactors-gpu-locks"))
}

/// The devices a run uses and the locks that keep them its own while it runs.
pub struct RunDevices {
    pub selection: DeviceSelection,
    /// Held for the whole run; dropping them frees the GPUs.
    pub locks: Vec<GpuLock>,
    /// What the person starting the run should know (clamping, locked GPUs, spec rows).
    pub notes: Vec<String>,
}

impl RunDevices {
    /// The journal's description of each device a run on one node uses.
    pub fn describe(&self) -> Vec<DeviceDescription> {
        self.selection
            .devices
            .iter()
            .map(|device| {
                DeviceDescription::on_one_node(
                    DeviceId(device.id),
                    match device.kind {
                        DeviceKind::Noop => format!("noop simulated device {}", device.id),
                        _ => device.name.clone(),
                    },
                    device.uuid().map(str::to_string),
                )
            })
            .collect()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RunDevicesError {
    #[error(transparent)]
    Select(#[from] DeviceError),
    #[error(
        "every selected GPU is in use by another kactors run (locks in {dir}){waited}; set gpu_wait_s to wait longer, or choose other GPUs with --gpus"
    )]
    AllLocked { dir: String, waited: String },
}

/// Selects, clamps to min(workers asked, visible) and locks. A GPU locked by another run is
/// left out with a note; when none is left the run waits up to gpu_wait_s, then fails.
pub fn choose_run_devices(
    settings: &RunSettings,
    gpus: Option<Vec<u32>>,
    host: &HostEnvironment,
) -> Result<RunDevices, RunDevicesError> {
    let mut selection = select_devices(&device_request(settings, gpus), host)?;
    let mut notes = std::mem::take(&mut selection.warnings);
    if selection.platform == Platform::Noop {
        return Ok(RunDevices {
            selection,
            locks: Vec::new(),
            notes,
        });
    }
    let locked = lock_or_wait(settings, &selection.devices, &mut notes)?;
    let visible = locked.len();
    let wanted = settings.num_workers.map_or(visible, |n| n as usize);
    notes.extend(workers_note(settings.num_workers, visible, "available"));
    let mut locks = Vec::new();
    selection.devices.clear();
    for entry in locked.into_iter().take(wanted) {
        selection.devices.push(entry.device);
        locks.extend(entry.lock);
    }
    Ok(RunDevices {
        selection,
        locks,
        notes,
    })
}

/// Locks what it can of `devices` in the node's lock folder; when another run holds all of
/// them, waits up to gpu_wait_s for one, then fails. A GPU left out gets a note. A node agent
/// locks its node's devices this way too, so that two runs in one allocation never share one.
pub fn lock_or_wait(
    settings: &RunSettings,
    devices: &[crate::devices::Device],
    notes: &mut Vec<String>,
) -> Result<Vec<LockedDevice>, RunDevicesError> {
    let dir = lock_dir();
    let give_up = Instant::now() + Duration::from_secs_f64(settings.gpu_wait_s);
    let locked = loop {
        let attempt = lock_devices(&dir, devices.to_vec())?;
        if !attempt.locked.is_empty() || Instant::now() >= give_up {
            notes.extend(attempt.warnings);
            break attempt.locked;
        }
        std::thread::sleep(
            Duration::from_secs(1).min(give_up.saturating_duration_since(Instant::now())),
        );
    };
    if locked.is_empty() {
        let waited = if settings.gpu_wait_s > 0.0 {
            format!(" after waiting {} s", settings.gpu_wait_s)
        } else {
            String::new()
        };
        return Err(RunDevicesError::AllLocked {
            dir: dir.display().to_string(),
            waited,
        });
    }
    Ok(locked)
}
