use std::collections::BTreeMap;
use std::time::Duration;

use super::environment::HostEnvironment;
use super::error::ToolFailure;
use super::masks::{Mask, MaskEntry};
use super::tool::{Listing, find_executable, run_tool};

const NVIDIA_SMI: &str = "nvidia-smi";

/// The columns asked of nvidia-smi, in the order it prints them; the query argument is built
/// from this list and each line is read back through it, so a field is found by its name.
const QUERY_FIELDS: [&str; 4] = ["index", "name", "uuid", "pci.bus_id"];

/// nvidia-smi's answer (with a non-zero exit) when the driver works but there is no GPU.
const NO_DEVICES: &str = "No devices were found";

/// One GPU as nvidia-smi lists it. nvidia-smi ignores CUDA_VISIBLE_DEVICES, so this is every
/// NVIDIA GPU of the node, in nvidia-smi's (PCI bus) order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NvidiaGpu {
    pub(crate) index: u32,
    pub(crate) name: String,
    pub(crate) uuid: String,
    pub(crate) bus_id: String,
}

pub(crate) fn list_nvidia_gpus(host: &HostEnvironment, timeout: Duration) -> Listing<NvidiaGpu> {
    let Some(program) = find_executable(&host.path_dirs(), NVIDIA_SMI) else {
        return Listing::ToolNotFound {
            searched: "PATH".to_string(),
        };
    };
    let query = format!("--query-gpu={}", QUERY_FIELDS.join(","));
    let output = match run_tool(&program, &[&query, "--format=csv,noheader"], host, timeout) {
        Ok(output) => output,
        Err(failure) => return Listing::ToolFailed(failure),
    };
    if !output.status.success() {
        if output.stdout.contains(NO_DEVICES) || output.stderr.contains(NO_DEVICES) {
            return Listing::Gpus(Vec::new());
        }
        return Listing::ToolFailed(output.failure());
    }
    match parse_query_output(&output.stdout) {
        Ok(gpus) => Listing::Gpus(gpus),
        Err(detail) => Listing::ToolFailed(ToolFailure::Unreadable {
            command: output.command,
            expected: "one CSV line per GPU with index, name, uuid, pci.bus_id",
            detail,
        }),
    }
}

/// Reads `--format=csv,noheader` lines: fields separated by ", ", in QUERY_FIELDS order.
pub(crate) fn parse_query_output(text: &str) -> Result<Vec<NvidiaGpu>, String> {
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let values: Vec<&str> = line.split(',').map(str::trim).collect();
            if values.len() != QUERY_FIELDS.len() {
                return Err(format!(
                    "{} fields where {} were asked for ({}) in {line:?}",
                    values.len(),
                    QUERY_FIELDS.len(),
                    QUERY_FIELDS.join(", ")
                ));
            }
            let fields: BTreeMap<&str, &str> = QUERY_FIELDS.into_iter().zip(values).collect();
            let index = fields["index"];
            Ok(NvidiaGpu {
                index: index
                    .parse()
                    .map_err(|_| format!("index {index:?} is not a number in {line:?}"))?,
                name: fields["name"].to_string(),
                uuid: fields["uuid"].to_string(),
                bus_id: fields["pci.bus_id"].to_string(),
            })
        })
        .collect()
}

/// The GPUs CUDA_VISIBLE_DEVICES leaves, in the mask's order (CUDA's enumeration order).
/// Entries are nvidia-smi indices or UUIDs (a prefix naming one GPU is enough); the first entry
/// naming no GPU ends the list, as it does for CUDA; a GPU named twice is kept once.
pub(crate) fn apply_cuda_mask(gpus: &[NvidiaGpu], mask: &Mask) -> Vec<NvidiaGpu> {
    let mut kept: Vec<NvidiaGpu> = Vec::new();
    for entry in &mask.entries {
        let found = match entry {
            MaskEntry::Index(index) => gpus.iter().find(|gpu| gpu.index == *index),
            MaskEntry::Uuid(prefix) => {
                let mut matching = gpus.iter().filter(|gpu| uuid_has_prefix(&gpu.uuid, prefix));
                match (matching.next(), matching.next()) {
                    (Some(gpu), None) => Some(gpu),
                    _ => None,
                }
            }
            MaskEntry::Invalid => None,
        };
        let Some(gpu) = found else { break };
        if !kept.contains(gpu) {
            kept.push(gpu.clone());
        }
    }
    kept
}

fn uuid_has_prefix(uuid: &str, prefix: &str) -> bool {
    uuid.get(..prefix.len())
        .is_some_and(|start| start.eq_ignore_ascii_case(prefix))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::fake_tools::{FakeNode, fixture_text};
    use crate::devices::masks::CUDA_VISIBLE_DEVICES;
    use crate::devices::tool::TOOL_TIMEOUT;

    const H200_UUID: &str = "GPU-5beddb9d-b3cb-7e53-54c9-13c55d854a1f";

    fn h200() -> NvidiaGpu {
        NvidiaGpu {
            index: 0,
            name: "NVIDIA H200".into(),
            uuid: H200_UUID.into(),
            bus_id: "00000000:00:06.0".into(),
        }
    }

    fn four_gpus() -> Vec<NvidiaGpu> {
        parse_query_output(&fixture_text("nvidia-smi-h100x4.csv")).unwrap()
    }

    #[test]
    fn parses_the_real_h200_listing() {
        assert_eq!(
            parse_query_output(&fixture_text("nvidia-smi-h200.csv")).unwrap(),
            vec![h200()]
        );
    }

    #[test]
    fn a_listing_with_other_columns_is_unreadable() {
        assert_eq!(
            parse_query_output(&fixture_text("nvidia-smi-h200-memory-column.csv")).unwrap_err(),
            "5 fields where 4 were asked for (index, name, uuid, pci.bus_id) in \"0, NVIDIA H200, \
             GPU-5beddb9d-b3cb-7e53-54c9-13c55d854a1f, 00000000:00:06.0, 143771 MiB\""
        );
        assert_eq!(
            parse_query_output("x, NVIDIA H200, GPU-1, 00000000:00:06.0\n").unwrap_err(),
            "index \"x\" is not a number in \"x, NVIDIA H200, GPU-1, 00000000:00:06.0\""
        );
    }

    /// The real CUDA_VISIBLE_DEVICES probe on the one-GPU H200 (cvd_torch.txt), as a model:
    /// each value and the number of GPUs torch saw.
    #[test]
    fn cuda_mask_matches_the_probe_on_the_h200() {
        let probe = [
            ("0", 1),
            ("1", 0),
            (H200_UUID, 1),
            ("GPU-5beddb9d", 1),
            ("", 0),
            ("-1", 0),
            ("0,1", 1),
            ("1,0", 0),
            ("MIG-x", 0),
        ];
        for (value, count) in probe {
            let kept = apply_cuda_mask(&[h200()], &Mask::lenient(CUDA_VISIBLE_DEVICES, value));
            assert_eq!(kept.len(), count, "CUDA_VISIBLE_DEVICES={value:?}");
        }
    }

    #[test]
    fn cuda_mask_keeps_its_order_and_stops_at_an_invalid_entry() {
        let gpus = four_gpus();
        let kept = |value: &str| {
            apply_cuda_mask(&gpus, &Mask::lenient(CUDA_VISIBLE_DEVICES, value))
                .iter()
                .map(|gpu| gpu.index)
                .collect::<Vec<_>>()
        };
        assert_eq!(kept("0,2,-1,1"), vec![0, 2]);
        assert_eq!(kept("3,1"), vec![3, 1]);
        assert_eq!(kept("2,GPU-1d6a"), vec![2, 1]);
        assert_eq!(kept("GPU-1d6a7e61-0b4f-9d3c-2e8a-5f7c3b9a0e21"), vec![1]);
        assert_eq!(kept("1,1,0"), vec![1, 0]);
        // "GPU-" is a prefix of every UUID: it names no single GPU.
        assert_eq!(kept("0,GPU-,1"), vec![0]);
        assert_eq!(kept("0,7,1"), vec![0]);
        assert_eq!(kept("0,,1"), vec![0]);
    }

    #[test]
    fn lists_through_a_fake_nvidia_smi() {
        let node = FakeNode::new();
        node.nvidia_smi("nvidia-smi-h200.csv", 0);
        let Listing::Gpus(gpus) = list_nvidia_gpus(&node.host(&[]), TOOL_TIMEOUT) else {
            panic!("expected a listing");
        };
        assert_eq!(gpus, vec![h200()]);
        assert_eq!(
            node.calls(),
            vec!["nvidia-smi --query-gpu=index,name,uuid,pci.bus_id --format=csv,noheader"]
        );
    }

    #[test]
    fn no_devices_found_is_an_empty_listing() {
        let node = FakeNode::new();
        node.nvidia_smi("nvidia-smi-no-devices.txt", 6);
        assert!(matches!(
            list_nvidia_gpus(&node.host(&[]), TOOL_TIMEOUT),
            Listing::Gpus(gpus) if gpus.is_empty()
        ));
    }

    #[test]
    fn a_failing_nvidia_smi_is_named() {
        let node = FakeNode::new();
        node.nvidia_smi("nvidia-smi-driver-failure.txt", 9);
        let Listing::ToolFailed(failure) = list_nvidia_gpus(&node.host(&[]), TOOL_TIMEOUT) else {
            panic!("expected a failure");
        };
        assert_eq!(
            failure.to_string(),
            format!(
                "{}/nvidia-smi --query-gpu=index,name,uuid,pci.bus_id --format=csv,noheader \
                 failed (exit status: 9): NVIDIA-SMI has failed because it couldn't communicate \
                 with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and \
                 running.",
                node.bin().display()
            )
        );
    }

    #[test]
    fn a_missing_nvidia_smi_lists_nothing() {
        let node = FakeNode::new();
        assert!(matches!(
            list_nvidia_gpus(&node.host(&[]), TOOL_TIMEOUT),
            Listing::ToolNotFound { .. }
        ));
    }
}
