//! What the GPUs were doing when a run started, for run.yaml: clocks, power and temperature of
//! each device the run uses, and the other processes on them. Read with nvidia-smi on NVIDIA;
//! on ROCm nothing is read yet (amd-smi's process and metric listings are not in the formats
//! kactors follows), and the record says so rather than guessing.

use serde::Serialize;

use super::device::{DeviceKind, DeviceSelection};
use super::environment::HostEnvironment;
use super::tool::{TOOL_TIMEOUT, find_executable, run_tool};
use crate::vendor::{Platform, Vendor};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuState {
    /// The platform, under the key run.yaml has always used.
    pub vendor: Platform,
    /// One line per device the run uses, as the vendor's tool printed it (CSV, with its header).
    pub devices: Vec<String>,
    /// The compute processes on those devices when the run started, as the tool printed them.
    pub processes: Vec<String>,
    /// Why something could not be read, when it could not.
    pub notes: Vec<String>,
}

const QUERY_GPU: &str = "--query-gpu=index,uuid,name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,power.draw,temperature.gpu";
const QUERY_APPS: &str = "--query-compute-apps=gpu_uuid,pid,process_name,used_memory";

/// Reads the state of the selected GPUs; never fails a run (what cannot be read is noted).
pub fn gpu_state(selection: &DeviceSelection, host: &HostEnvironment) -> GpuState {
    let mut state = GpuState {
        vendor: selection.platform,
        devices: Vec::new(),
        processes: Vec::new(),
        notes: Vec::new(),
    };
    match selection.platform {
        Platform::Noop => state.notes.push("the noop platform uses no GPU".into()),
        Platform::Vendor(Vendor::Rocm) => state
            .notes
            .push("clocks and GPU processes are not read on ROCm yet".into()),
        Platform::Vendor(Vendor::Nvidia) => {
            let uuids: Vec<&str> = selection
                .devices
                .iter()
                .filter_map(|device| match &device.kind {
                    DeviceKind::Nvidia { uuid, .. } => Some(uuid.as_str()),
                    _ => None,
                })
                .collect();
            let Some(program) = find_executable(&host.path_dirs(), "nvidia-smi") else {
                state.notes.push("nvidia-smi was not found on PATH".into());
                return state;
            };
            for (query, into_processes) in [(QUERY_GPU, false), (QUERY_APPS, true)] {
                match run_tool(&program, &[query, "--format=csv"], host, TOOL_TIMEOUT) {
                    Ok(output) if output.status.success() => {
                        let mut lines = output.stdout.lines();
                        let header = lines.next().unwrap_or_default().to_string();
                        let rows: Vec<String> = lines
                            .filter(|line| uuids.iter().any(|uuid| line.contains(uuid)))
                            .map(str::to_string)
                            .collect();
                        let target = if into_processes {
                            &mut state.processes
                        } else {
                            &mut state.devices
                        };
                        target.push(header);
                        target.extend(rows);
                    }
                    Ok(output) => state.notes.push(output.diagnostic()),
                    Err(failure) => state.notes.push(failure.to_string()),
                }
            }
        }
    }
    state
}

#[cfg(test)]
mod tests {
    use super::super::fake_tools::{FakeNode, write_script};
    use super::super::select::{DeviceRequest, select_devices};
    use super::*;

    /// nvidia-smi with two H200s, of which the run uses GPU 1, and a process on each.
    const FAKE: &str = r#"case "$1" in
  --query-gpu=index,name,uuid,pci.bus_id) echo "0, NVIDIA H200, GPU-aaaa, 00000000:00:06.0"; echo "1, NVIDIA H200, GPU-bbbb, 00000000:00:07.0";;
  --query-gpu=index,uuid,*) echo "index, uuid, name, driver_version, clocks.current.sm [MHz]"; echo "0, GPU-aaaa, NVIDIA H200, 580.159.04, 345 MHz"; echo "1, GPU-bbbb, NVIDIA H200, 580.159.04, 1980 MHz";;
  --query-compute-apps=*) echo "gpu_uuid, pid, process_name, used_gpu_memory [MiB]"; echo "GPU-aaaa, 11, python3, 100 MiB"; echo "GPU-bbbb, 22, other-job, 900 MiB";;
  *) exit 2;;
esac
"#;

    #[test]
    fn the_state_of_the_gpus_a_run_uses_is_recorded_and_no_other() {
        let node = FakeNode::new();
        write_script(&node.bin(), "nvidia-smi", FAKE);
        let host = node.host(&[]);
        let request = DeviceRequest {
            platform: Vendor::Nvidia.into(),
            gpus: Some(vec![1]),
            noop_devices: std::num::NonZeroU32::MIN,
            gpu_name: None,
        };
        let selection = select_devices(&request, &host).unwrap();
        let state = gpu_state(&selection, &host);
        assert_eq!(state.notes, Vec::<String>::new());
        assert_eq!(
            state.devices[1],
            "1, GPU-bbbb, NVIDIA H200, 580.159.04, 1980 MHz"
        );
        assert_eq!(state.devices.len(), 2, "the header and GPU 1");
        assert_eq!(
            state.processes,
            vec![
                "gpu_uuid, pid, process_name, used_gpu_memory [MiB]",
                "GPU-bbbb, 22, other-job, 900 MiB"
            ]
        );
    }
}
