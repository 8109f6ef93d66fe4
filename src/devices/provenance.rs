//! What the GPUs were doing when a run started, for run.yaml: clocks, power and temperature of
//! each device the run uses, and the other processes on them. Read with nvidia-smi on NVIDIA;
//! on ROCm nothing is read yet (amd-smi's process and metric listings are not in the formats
//! kactors follows), and the record says so rather than guessing.

use serde::Serialize;

use super::device::{DeviceKind, DeviceSelection};
use super::environment::HostEnvironment;
use super::nvidia::{CSV_WITH_HEADER, SmiCsv};
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
            for (query, uuid_column, into_processes) in
                [(QUERY_GPU, "uuid", false), (QUERY_APPS, "gpu_uuid", true)]
            {
                match run_tool(&program, &[query, CSV_WITH_HEADER], host, TOOL_TIMEOUT) {
                    Ok(output) if output.status.success() => {
                        let target = if into_processes {
                            &mut state.processes
                        } else {
                            &mut state.devices
                        };
                        match rows_of(&output.stdout, uuid_column, &uuids) {
                            Ok(lines) => target.extend(lines),
                            Err(detail) => state
                                .notes
                                .push(format!("{} is unreadable: {detail}", output.command)),
                        }
                    }
                    Ok(output) => state.notes.push(output.diagnostic()),
                    Err(failure) => state.notes.push(failure.to_string()),
                }
            }
        }
    }
    state
}

/// The header line and the lines whose `uuid_column` names one of `uuids`, as printed.
fn rows_of(text: &str, uuid_column: &str, uuids: &[&str]) -> Result<Vec<String>, String> {
    let table = SmiCsv::parse(text)?;
    let column = table.column(uuid_column)?;
    let rows = table
        .rows()
        .iter()
        .filter(|row| uuids.contains(&row.field(column)))
        .map(|row| row.line);
    Ok(std::iter::once(table.header)
        .chain(rows)
        .map(str::to_string)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::super::fake_tools::{FakeNode, write_script};
    use super::super::select::{DeviceRequest, select_devices};
    use super::*;

    /// nvidia-smi with two H200s, of which the run uses GPU 1, and a process on each; the
    /// processes' GPU is in the third column, not the first.
    const FAKE: &str = r#"case "$1" in
  --query-gpu=index,name,uuid,pci.bus_id) echo "index, name, uuid, pci.bus_id"; echo "0, NVIDIA H200, GPU-aaaa, 00000000:00:06.0"; echo "1, NVIDIA H200, GPU-bbbb, 00000000:00:07.0";;
  --query-gpu=index,uuid,*) echo "index, uuid, name, driver_version, clocks.current.sm [MHz]"; echo "0, GPU-aaaa, NVIDIA H200, 580.159.04, 345 MHz"; echo "1, GPU-bbbb, NVIDIA H200, 580.159.04, 1980 MHz";;
  --query-compute-apps=*) echo "pid, process_name, gpu_uuid, used_gpu_memory [MiB]"; echo "11, python3, GPU-aaaa, 100 MiB"; echo "22, other-job, GPU-bbbb, 900 MiB";;
  *) exit 2;;
esac
"#;

    /// The state nvidia-smi `fake` gives of GPU 1.
    fn state_of_gpu_1(fake: &str) -> GpuState {
        let node = FakeNode::new();
        write_script(&node.bin(), "nvidia-smi", fake);
        let host = node.host(&[]);
        let request = DeviceRequest {
            platform: Vendor::Nvidia.into(),
            gpus: Some(vec![1]),
            noop_devices: std::num::NonZeroU32::MIN,
            gpu_name: None,
        };
        let selection = select_devices(&request, &host).unwrap();
        gpu_state(&selection, &host)
    }

    #[test]
    fn the_state_of_the_gpus_a_run_uses_is_recorded_and_no_other() {
        let state = state_of_gpu_1(FAKE);
        assert_eq!(state.notes, Vec::<String>::new());
        assert_eq!(
            state.devices[1],
            "1, GPU-bbbb, NVIDIA H200, 580.159.04, 1980 MHz"
        );
        assert_eq!(state.devices.len(), 2, "the header and GPU 1");
        assert_eq!(
            state.processes,
            vec![
                "pid, process_name, gpu_uuid, used_gpu_memory [MiB]",
                "22, other-job, GPU-bbbb, 900 MiB"
            ]
        );
    }

    /// Issue 21 (#14): a GPU is found by the uuid column's name; an answer without that column
    /// is noted, not searched for the UUID anywhere in its lines.
    #[test]
    fn an_answer_without_its_uuid_column_is_noted() {
        let fake = FAKE.replace(
            "echo \"pid, process_name, gpu_uuid,",
            "echo \"pid, process_name, gpu_serial,",
        );
        let state = state_of_gpu_1(&fake);
        assert_eq!(state.devices.len(), 2, "the header and GPU 1");
        assert_eq!(state.processes, Vec::<String>::new());
        assert_eq!(state.notes.len(), 1, "{:?}", state.notes);
        assert!(
            state.notes[0].ends_with(
                "--query-compute-apps=gpu_uuid,pid,process_name,used_memory --format=csv is \
                 unreadable: no column \"gpu_uuid\" in the header (pid, process_name, \
                 gpu_serial, used_gpu_memory)"
            ),
            "{}",
            state.notes[0]
        );
    }
}
