use std::collections::BTreeMap;

use actors::model::DeviceId;
use serde::Serialize;

use super::masks::{CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES};
use super::pin::Pin;
use super::specs::GpuSpec;
use crate::vendor::{Platform, Vendor};

/// What identifies a device to its vendor's runtime and to other kactors runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceKind {
    /// Stands for no GPU: the noop platform needs none.
    Noop,
    Nvidia {
        uuid: String,
        bus_id: String,
    },
    Rocm {
        hip_uuid: Option<String>,
        bdf: String,
        gfx_target: Option<String>,
    },
}

/// One device a run may pin a worker to.
#[derive(Debug, Clone, PartialEq)]
pub struct Device {
    /// The nvidia-smi index on NVIDIA, the HIP id on AMD (both before any mask), 0..n for noop.
    pub id: u32,
    pub name: String,
    pub kind: DeviceKind,
    pub spec: Option<&'static GpuSpec>,
}

impl Device {
    pub fn platform(&self) -> Platform {
        match self.kind {
            DeviceKind::Noop => Platform::Noop,
            DeviceKind::Nvidia { .. } => Platform::Vendor(Vendor::Nvidia),
            DeviceKind::Rocm { .. } => Platform::Vendor(Vendor::Rocm),
        }
    }

    /// The GPU's UUID as its runtime knows it (NVIDIA's `GPU-...`, HIP's hip_uuid).
    pub fn uuid(&self) -> Option<&str> {
        match &self.kind {
            DeviceKind::Noop => None,
            DeviceKind::Nvidia { uuid, .. } => Some(uuid),
            DeviceKind::Rocm { hip_uuid, .. } => hip_uuid.as_deref(),
        }
    }

    /// This device with the environment changes that confine a worker's children to it.
    ///
    /// ROCm: HIP_VISIBLE_DEVICES is the HIP id, which is numbered before any mask, so the other
    /// masks are removed. NVIDIA: the UUID, which does not depend on CUDA's device order.
    pub fn pin(&self) -> Pin {
        self.pin_as(DeviceId(self.id))
    }

    /// The same pin under the id the run gives the device: a node agent's devices are numbered
    /// over the whole allocation, not by their index on the node.
    pub fn pin_as(&self, device: DeviceId) -> Pin {
        let (set, unset) = match &self.kind {
            DeviceKind::Noop => (BTreeMap::new(), Vec::new()),
            DeviceKind::Nvidia { uuid, .. } => (
                BTreeMap::from([(CUDA_VISIBLE_DEVICES.to_string(), uuid.clone())]),
                Vec::new(),
            ),
            DeviceKind::Rocm { .. } => (
                BTreeMap::from([(HIP_VISIBLE_DEVICES.to_string(), self.id.to_string())]),
                vec![
                    CUDA_VISIBLE_DEVICES.to_string(),
                    ROCR_VISIBLE_DEVICES.to_string(),
                ],
            ),
        };
        Pin::new(device, set, unset)
    }
}

/// What a run would use: one platform's devices, and what the selection had to say.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceSelection {
    pub platform: Platform,
    pub devices: Vec<Device>,
    pub warnings: Vec<String>,
}

impl DeviceSelection {
    pub fn pins(&self) -> Vec<Pin> {
        self.devices.iter().map(Device::pin).collect()
    }

    /// The `kactors devices --json` object.
    pub fn report(&self) -> DevicesReport {
        DevicesReport {
            vendor: self.platform,
            devices: self
                .devices
                .iter()
                .map(|device| DeviceReport {
                    id: device.id,
                    name: device.name.clone(),
                    uuid: device.uuid().map(str::to_string),
                    spec: device.spec.map(|spec| spec.name.clone()),
                    node: None,
                })
                .collect(),
            pins: self.pins(),
        }
    }
}

/// `{"vendor", "devices": [{"id", "name", "uuid", "spec"}], "pins": [{"device", "set", "unset"}]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DevicesReport {
    /// The platform, under the key `kactors devices --json` has always used.
    pub vendor: Platform,
    pub devices: Vec<DeviceReport>,
    pub pins: Vec<Pin>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceReport {
    pub id: u32,
    pub name: String,
    pub uuid: Option<String>,
    /// The spec row's name.
    pub spec: Option<String>,
    /// Under the Slurm launcher, where the device is: `node:index`, Slurm's node name and its
    /// index of the GPU there (the `id` is then the run's number for it). Absent on one node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::specs::spec_by_name;

    fn nvidia_h200() -> Device {
        Device {
            id: 0,
            name: "NVIDIA H200".into(),
            kind: DeviceKind::Nvidia {
                uuid: "GPU-5beddb9d-b3cb-7e53-54c9-13c55d854a1f".into(),
                bus_id: "00000000:00:06.0".into(),
            },
            spec: spec_by_name("NVIDIA H200"),
        }
    }

    fn rocm_gpu(id: u32, hip_uuid: Option<&str>) -> Device {
        Device {
            id,
            name: "AMD Radeon Graphics".into(),
            kind: DeviceKind::Rocm {
                hip_uuid: hip_uuid.map(str::to_string),
                bdf: "0000:05:00.0".into(),
                gfx_target: Some("gfx1101".into()),
            },
            spec: None,
        }
    }

    #[test]
    fn nvidia_report_is_the_issue_json() {
        let selection = DeviceSelection {
            platform: Vendor::Nvidia.into(),
            devices: vec![nvidia_h200()],
            warnings: vec![],
        };
        assert_eq!(
            serde_json::to_string(&selection.report()).unwrap(),
            r#"{"vendor":"nvidia","devices":[{"id":0,"name":"NVIDIA H200","uuid":"GPU-5beddb9d-b3cb-7e53-54c9-13c55d854a1f","spec":"NVIDIA H200"}],"pins":[{"device":0,"set":{"CUDA_VISIBLE_DEVICES":"GPU-5beddb9d-b3cb-7e53-54c9-13c55d854a1f"},"unset":[]}]}"#
        );
    }

    #[test]
    fn rocm_report_pins_by_hip_id_and_removes_the_other_masks() {
        let selection = DeviceSelection {
            platform: Vendor::Rocm.into(),
            devices: vec![rocm_gpu(3, None), rocm_gpu(1, Some("GPU-0f1e2d3c4b5a6978"))],
            warnings: vec![],
        };
        assert_eq!(
            serde_json::to_string(&selection.report()).unwrap(),
            r#"{"vendor":"rocm","devices":[{"id":3,"name":"AMD Radeon Graphics","uuid":null,"spec":null},{"id":1,"name":"AMD Radeon Graphics","uuid":"GPU-0f1e2d3c4b5a6978","spec":null}],"pins":[{"device":3,"set":{"HIP_VISIBLE_DEVICES":"3"},"unset":["CUDA_VISIBLE_DEVICES","ROCR_VISIBLE_DEVICES"]},{"device":1,"set":{"HIP_VISIBLE_DEVICES":"1"},"unset":["CUDA_VISIBLE_DEVICES","ROCR_VISIBLE_DEVICES"]}]}"#
        );
    }

    #[test]
    fn noop_pins_change_nothing() {
        let device = Device {
            id: 1,
            name: "noop".into(),
            kind: DeviceKind::Noop,
            spec: None,
        };
        assert_eq!(device.pin(), Pin::new(DeviceId(1), BTreeMap::new(), vec![]));
        assert_eq!(device.uuid(), None);
        assert_eq!(device.platform(), Platform::Noop);
    }
}
