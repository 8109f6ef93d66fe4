use std::path::Path;

use super::device::{Device, DeviceKind};
use super::error::DeviceError;
use crate::process::pid_lock::{Locked, PidLock, try_lock};

/// An advisory lock on one GPU, held until dropped or until the process ends.
pub type GpuLock = PidLock;

#[derive(Debug)]
pub struct LockedDevice {
    pub device: Device,
    /// None for a noop device, which stands for no GPU and is never shared.
    pub lock: Option<GpuLock>,
}

#[derive(Debug)]
pub struct DeviceLocks {
    /// The devices this run may use, in the order given.
    pub locked: Vec<LockedDevice>,
    /// One per GPU left out because another run holds it.
    pub warnings: Vec<String>,
}

/// Takes each device's lock in `lock_dir` without waiting, so that two kactors runs on one node
/// never share a GPU. The lock file is keyed by the NVIDIA UUID or the AMD BDF (both stable
/// across masks and runs) and holds the holder's pid for the warning. A GPU another run holds is
/// left out with a warning; what to do when none is left is the caller's policy.
pub fn lock_devices(lock_dir: &Path, devices: Vec<Device>) -> Result<DeviceLocks, DeviceError> {
    std::fs::create_dir_all(lock_dir).map_err(|source| DeviceError::LockDirectory {
        path: lock_dir.to_path_buf(),
        source,
    })?;
    let mut locks = DeviceLocks {
        locked: Vec::new(),
        warnings: Vec::new(),
    };
    for device in devices {
        let key = match &device.kind {
            DeviceKind::Noop => {
                locks.locked.push(LockedDevice { device, lock: None });
                continue;
            }
            DeviceKind::Nvidia { uuid, .. } => uuid,
            DeviceKind::Rocm { bdf, .. } => bdf,
        };
        let path = lock_dir.join(lock_file_name(key));
        let lock_file_error = |source| DeviceError::LockFile {
            path: path.clone(),
            source,
        };
        match try_lock(&path).map_err(lock_file_error)? {
            Locked::Held(lock) => locks.locked.push(LockedDevice {
                device,
                lock: Some(lock),
            }),
            Locked::Busy { holder } => locks.warnings.push(format!(
                "GPU {} ({key}) is in use by another kactors run ({holder}, lock file {}); \
                 it is left out",
                device.id,
                path.display()
            )),
        }
    }
    Ok(locks)
}

/// `gpu-<key>.lock`, with anything but letters, digits, '.', '-' replaced.
fn lock_file_name(key: &str) -> String {
    let key: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("gpu-{key}.lock")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::fake_tools::FakeNode;
    use crate::devices::select::{DeviceRequest, select_devices};
    use crate::vendor::{PlatformRequest, Vendor};
    use std::num::NonZeroU32;

    fn select(node: &FakeNode, platform: PlatformRequest, gpus: Option<Vec<u32>>) -> Vec<Device> {
        let request = DeviceRequest {
            platform,
            gpus,
            noop_devices: NonZeroU32::new(2).unwrap(),
            gpu_name: None,
        };
        select_devices(&request, &node.host(&[])).unwrap().devices
    }

    fn ids(locks: &DeviceLocks) -> Vec<u32> {
        locks.locked.iter().map(|locked| locked.device.id).collect()
    }

    #[test]
    fn two_runs_take_different_gpus() {
        let node = FakeNode::new();
        node.nvidia_smi("nvidia-smi-h100x4.csv", 0);
        let lock_dir = tempfile::tempdir().unwrap();

        let first_run = lock_devices(
            lock_dir.path(),
            select(&node, PlatformRequest::Detect, Some(vec![0, 2])),
        )
        .unwrap();
        assert_eq!(ids(&first_run), vec![0, 2]);
        assert!(first_run.warnings.is_empty());

        let second_run = lock_devices(
            lock_dir.path(),
            select(&node, PlatformRequest::Detect, None),
        )
        .unwrap();
        assert_eq!(ids(&second_run), vec![1, 3]);
        let lock_path = lock_dir
            .path()
            .join("gpu-GPU-8b2f4c1a-7e3d-4a5b-9c6d-0e1f2a3b4c5d.lock");
        assert_eq!(
            second_run.warnings,
            vec![
                format!(
                    "GPU 0 (GPU-8b2f4c1a-7e3d-4a5b-9c6d-0e1f2a3b4c5d) is in use by another \
                     kactors run (pid {}, lock file {}); it is left out",
                    std::process::id(),
                    lock_path.display()
                ),
                format!(
                    "GPU 2 (GPU-3c9e5d7f-2a4b-4c6d-8e0f-1a2b3c4d5e6f) is in use by another \
                     kactors run (pid {}, lock file {}); it is left out",
                    std::process::id(),
                    lock_dir
                        .path()
                        .join("gpu-GPU-3c9e5d7f-2a4b-4c6d-8e0f-1a2b3c4d5e6f.lock")
                        .display()
                ),
            ]
        );
        assert_eq!(first_run.locked[0].lock.as_ref().unwrap().path(), lock_path);

        // When the first run ends its GPUs are free again; the second run still holds its own.
        drop(first_run);
        let third_run = lock_devices(
            lock_dir.path(),
            select(&node, PlatformRequest::Detect, None),
        )
        .unwrap();
        assert_eq!(ids(&third_run), vec![0, 2]);
        drop(second_run);
    }

    #[test]
    fn amd_gpus_are_keyed_by_bdf() {
        let node = FakeNode::new();
        node.amd_smi(
            &node.bin(),
            "amd-smi-list-e-4gpu.json",
            "amd-smi-static-asic-4gpu.json",
        );
        let lock_dir = tempfile::tempdir().unwrap();
        let locks = lock_devices(
            lock_dir.path(),
            select(&node, Vendor::Rocm.into(), Some(vec![1])),
        )
        .unwrap();
        let lock = locks.locked[0].lock.as_ref().unwrap();
        assert_eq!(lock.path(), lock_dir.path().join("gpu-0000_05_00.0.lock"));
        assert_eq!(
            std::fs::read_to_string(lock.path()).unwrap(),
            std::process::id().to_string()
        );
    }

    #[test]
    fn noop_devices_are_never_locked_or_left_out() {
        let node = FakeNode::new();
        let lock_dir = tempfile::tempdir().unwrap();
        let first =
            lock_devices(lock_dir.path(), select(&node, PlatformRequest::NOOP, None)).unwrap();
        let second =
            lock_devices(lock_dir.path(), select(&node, PlatformRequest::NOOP, None)).unwrap();
        assert_eq!((ids(&first), ids(&second)), (vec![0, 1], vec![0, 1]));
        assert!(second.locked.iter().all(|locked| locked.lock.is_none()));
        assert_eq!(std::fs::read_dir(lock_dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn an_unusable_lock_directory_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("not-a-directory");
        std::fs::write(&file, "").unwrap();
        let error = lock_devices(&file.join("locks"), vec![]).unwrap_err();
        assert!(
            error.to_string().starts_with(&format!(
                "cannot create the GPU lock directory {}: ",
                file.join("locks").display()
            )),
            "{error}"
        );
    }
}
