use std::time::Duration;

use super::environment::HostEnvironment;
use super::error::ToolFailure;
use super::masks::{Mask, MaskEntry};
use super::tool::{Listing, find_executable, run_tool};

const NVIDIA_SMI: &str = "nvidia-smi";

/// The columns asked of nvidia-smi; the query argument is built from this list and each is
/// read back by the name nvidia-smi's header gives it.
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
    let output = match run_tool(&program, &[&query, CSV_WITH_HEADER], host, timeout) {
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
            expected: "a CSV header naming index, name, uuid and pci.bus_id, then one line per GPU",
            detail,
        }),
    }
}

/// The format argument of every nvidia-smi query: CSV with its header line, so that each
/// column is found by its name whatever order or extra columns a driver prints.
pub(crate) const CSV_WITH_HEADER: &str = "--format=csv";

/// nvidia-smi's `--format=csv` answer: a header line naming the columns (`name [unit]` where a
/// column has a unit), then one line per row, fields separated by ", ".
pub(crate) struct SmiCsv<'a> {
    /// The header line as printed.
    pub(crate) header: &'a str,
    columns: Vec<&'a str>,
    rows: Vec<Row<'a>>,
}

/// One line below the header: the line as printed and its fields.
pub(crate) struct Row<'a> {
    pub(crate) line: &'a str,
    fields: Vec<&'a str>,
}

impl<'a> SmiCsv<'a> {
    /// Reads the header and the rows; a row with more or fewer fields than the header is
    /// unreadable, since which field is which column could then not be told.
    pub(crate) fn parse(text: &'a str) -> Result<Self, String> {
        let mut lines = text.lines().filter(|line| !line.trim().is_empty());
        let header = lines
            .next()
            .ok_or_else(|| "no header line (the output is empty)".to_string())?;
        let columns: Vec<&str> = split_fields(header)
            .map(|column| column.split(" [").next().unwrap_or(column))
            .collect();
        let rows = lines
            .map(|line| {
                let fields: Vec<&str> = split_fields(line).collect();
                if fields.len() == columns.len() {
                    Ok(Row { line, fields })
                } else {
                    Err(format!(
                        "{} fields under a header of {} ({}) in {line:?}",
                        fields.len(),
                        columns.len(),
                        columns.join(", ")
                    ))
                }
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            header,
            columns,
            rows,
        })
    }

    /// Where the column `name` is, or which columns the header has instead.
    pub(crate) fn column(&self, name: &str) -> Result<usize, String> {
        self.columns
            .iter()
            .position(|column| *column == name)
            .ok_or_else(|| {
                format!(
                    "no column {name:?} in the header ({})",
                    self.columns.join(", ")
                )
            })
    }

    pub(crate) fn rows(&self) -> &[Row<'a>] {
        &self.rows
    }
}

impl<'a> Row<'a> {
    /// The field in column `column` (an index from [`SmiCsv::column`] of this row's table).
    pub(crate) fn field(&self, column: usize) -> &'a str {
        self.fields[column]
    }
}

fn split_fields(line: &str) -> impl Iterator<Item = &str> {
    line.split(',').map(str::trim)
}

/// Reads the `--format=csv` answer to the QUERY_FIELDS query, each field by its column's name.
pub(crate) fn parse_query_output(text: &str) -> Result<Vec<NvidiaGpu>, String> {
    let table = SmiCsv::parse(text)?;
    let [index, name, uuid, bus_id] = QUERY_FIELDS.map(|field| table.column(field));
    let (index, name, uuid, bus_id) = (index?, name?, uuid?, bus_id?);
    table
        .rows()
        .iter()
        .map(|row| {
            let value = row.field(index);
            Ok(NvidiaGpu {
                index: value
                    .parse()
                    .map_err(|_| format!("index {value:?} is not a number in {:?}", row.line))?,
                name: row.field(name).to_string(),
                uuid: row.field(uuid).to_string(),
                bus_id: row.field(bus_id).to_string(),
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

    /// Issue 21 (#14): columns are found by the header's names, so the real H200 answer with
    /// an extra column (memory.total, with its unit) and a reordered one read the same GPU.
    #[test]
    fn extra_and_reordered_columns_are_read_by_name() {
        for fixture in [
            "nvidia-smi-h200-memory-column.csv",
            "nvidia-smi-h200-reordered.csv",
        ] {
            assert_eq!(
                parse_query_output(&fixture_text(fixture)).unwrap(),
                vec![h200()],
                "{fixture}"
            );
        }
    }

    #[test]
    fn a_listing_without_an_asked_column_or_header_is_unreadable() {
        // Real: an H200's answer to a query without uuid and pci.bus_id.
        assert_eq!(
            parse_query_output(&fixture_text("nvidia-smi-h200-no-uuid.csv")).unwrap_err(),
            "no column \"uuid\" in the header (index, name, driver_version, compute_cap, serial, \
             pci.device_id, pci.domain, pci.bus)"
        );
        // Real: the `noheader` answer kactors asked for before, whose first GPU is no header.
        assert_eq!(
            parse_query_output(&fixture_text("nvidia-smi-h200-noheader.csv")).unwrap_err(),
            "no column \"index\" in the header (0, NVIDIA H200, \
             GPU-5beddb9d-b3cb-7e53-54c9-13c55d854a1f, 00000000:00:06.0, 143771 MiB)"
        );
        assert_eq!(
            parse_query_output("").unwrap_err(),
            "no header line (the output is empty)"
        );
        assert_eq!(
            parse_query_output("index, name, uuid, pci.bus_id\n0, NVIDIA H200, GPU-1\n")
                .unwrap_err(),
            "3 fields under a header of 4 (index, name, uuid, pci.bus_id) in \
             \"0, NVIDIA H200, GPU-1\""
        );
        assert_eq!(
            parse_query_output(
                "index, name, uuid, pci.bus_id\nx, NVIDIA H200, GPU-1, 00000000:00:06.0\n"
            )
            .unwrap_err(),
            "index \"x\" is not a number in \"x, NVIDIA H200, GPU-1, 00000000:00:06.0\""
        );
    }

    #[test]
    fn a_header_alone_lists_no_gpu() {
        assert_eq!(
            parse_query_output("index, name, uuid, pci.bus_id\n").unwrap(),
            vec![]
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
            vec!["nvidia-smi --query-gpu=index,name,uuid,pci.bus_id --format=csv"]
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
                "{}/nvidia-smi --query-gpu=index,name,uuid,pci.bus_id --format=csv \
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
