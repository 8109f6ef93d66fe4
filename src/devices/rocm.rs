use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use super::environment::HostEnvironment;
use super::error::ToolFailure;
use super::masks::{Mask, MaskEntry};
use super::tool::{Listing, ToolOutput, find_executable, run_tool};

const AMD_SMI: &str = "amd-smi";
/// `-e` adds the HIP ids (AMD SMI 25.3 / ROCm 6.4); amd-smi's own gpu index can differ from them.
const LIST_ARGS: [&str; 3] = ["list", "-e", "--json"];
const STATIC_ARGS: [&str; 3] = ["static", "--asic", "--json"];
/// amd-smi's value for a field it could not read.
const NOT_AVAILABLE: &str = "N/A";

/// One GPU as amd-smi lists it, keyed by its HIP id. amd-smi ignores HIP_VISIBLE_DEVICES and
/// ROCR_VISIBLE_DEVICES, so this is every AMD GPU of the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AmdGpu {
    pub(crate) hip_id: u32,
    pub(crate) hip_uuid: Option<String>,
    pub(crate) bdf: String,
    pub(crate) market_name: Option<String>,
    /// The PCI device id (`DEVICE_ID`, e.g. 0x74a1).
    pub(crate) chip_id: Option<u32>,
    pub(crate) compute_units: Option<u32>,
    /// e.g. `gfx942`.
    pub(crate) gfx_target: Option<String>,
}

#[derive(Debug)]
pub(crate) struct AmdListing {
    pub(crate) listing: Listing<AmdGpu>,
    /// What was listed but could not be described (a GPU without a HIP id, a failed
    /// `static --asic`): the GPUs are still listed, or left out, and the run says so.
    pub(crate) warnings: Vec<String>,
}

/// Where amd-smi is looked for: PATH, then beside the configured Python as written (a venv's
/// `bin/python` is often a symlink whose target has no amd-smi beside it), then ROCm's bin.
pub(crate) fn amd_smi_search_dirs(host: &HostEnvironment) -> Vec<PathBuf> {
    let mut dirs = host.path_dirs();
    dirs.extend(host.python_dir().map(PathBuf::from));
    dirs.push(host.rocm_bin_dir().to_path_buf());
    dirs
}

fn searched_places(host: &HostEnvironment) -> String {
    match host.python_dir() {
        Some(python_dir) => format!(
            "PATH, {} (beside the configured python) or {}",
            python_dir.display(),
            host.rocm_bin_dir().display()
        ),
        None => format!("PATH or {}", host.rocm_bin_dir().display()),
    }
}

pub(crate) fn list_amd_gpus(host: &HostEnvironment, timeout: Duration) -> AmdListing {
    let mut warnings = Vec::new();
    let Some(program) = find_executable(&amd_smi_search_dirs(host), AMD_SMI) else {
        let listing = Listing::ToolNotFound {
            searched: searched_places(host),
        };
        return AmdListing { listing, warnings };
    };
    let run = |args: &[&str]| -> Result<ToolOutput, ToolFailure> {
        let output = run_tool(&program, args, host, timeout)?;
        if output.status.success() {
            Ok(output)
        } else {
            Err(output.failure())
        }
    };
    let unreadable = |output: &ToolOutput, detail: String| ToolFailure::Unreadable {
        command: output.command.clone(),
        expected: "amd-smi's JSON list or its \"GPU: n\" text blocks",
        detail,
    };

    let listed = run(&LIST_ARGS).and_then(|output| {
        parse_smi_records(&output.stdout)
            .and_then(|records| enumerated_gpus(&records, &mut warnings))
            .map_err(|detail| unreadable(&output, detail))
    });
    let mut gpus = match listed {
        Ok(gpus) => gpus,
        Err(failure) => {
            let listing = Listing::ToolFailed(failure);
            return AmdListing { listing, warnings };
        }
    };
    if !gpus.is_empty() {
        let described = run(&STATIC_ARGS).and_then(|output| {
            parse_smi_records(&output.stdout).map_err(|detail| unreadable(&output, detail))
        });
        match described {
            Ok(records) => describe(&mut gpus, &records, &mut warnings),
            Err(failure) => warnings.push(format!(
                "the AMD GPUs' names, chip ids and spec rows are unknown: {failure}"
            )),
        }
    }
    gpus.sort_by_key(|(_, gpu)| gpu.hip_id);
    let listing = Listing::Gpus(gpus.into_iter().map(|(_, gpu)| gpu).collect());
    AmdListing { listing, warnings }
}

/// The GPUs HIP sees, after ROCR_VISIBLE_DEVICES then HIP_VISIBLE_DEVICES, in mask order.
///
/// ROCR entries select HIP ids (or GPU UUIDs matching hip_uuid); HIP entries then index the list
/// ROCR left. As in the runtimes, the first entry naming no GPU ends that mask's list, and a GPU
/// named twice is kept once.
pub(crate) fn apply_amd_masks(
    gpus: &[AmdGpu],
    rocr: Option<&Mask>,
    hip: Option<&Mask>,
) -> Vec<AmdGpu> {
    let after_rocr: Vec<&AmdGpu> = match rocr {
        Some(mask) => select_in_mask_order(mask, |entry| match entry {
            MaskEntry::Index(hip_id) => gpus.iter().find(|gpu| gpu.hip_id == *hip_id),
            MaskEntry::Uuid(uuid) => find_by_hip_uuid(gpus.iter(), uuid),
            MaskEntry::Invalid => None,
        }),
        None => gpus.iter().collect(),
    };
    let after_hip = match hip {
        Some(mask) => select_in_mask_order(mask, |entry| match entry {
            MaskEntry::Index(position) => usize::try_from(*position)
                .ok()
                .and_then(|position| after_rocr.get(position).copied()),
            MaskEntry::Uuid(uuid) => find_by_hip_uuid(after_rocr.iter().copied(), uuid),
            MaskEntry::Invalid => None,
        }),
        None => after_rocr,
    };
    after_hip.into_iter().cloned().collect()
}

fn select_in_mask_order<'g>(
    mask: &Mask,
    mut find: impl FnMut(&MaskEntry) -> Option<&'g AmdGpu>,
) -> Vec<&'g AmdGpu> {
    let mut kept: Vec<&AmdGpu> = Vec::new();
    for entry in &mask.entries {
        let Some(gpu) = find(entry) else { break };
        if !kept.iter().any(|kept| kept.hip_id == gpu.hip_id) {
            kept.push(gpu);
        }
    }
    kept
}

fn find_by_hip_uuid<'g>(
    mut gpus: impl Iterator<Item = &'g AmdGpu>,
    uuid: &str,
) -> Option<&'g AmdGpu> {
    gpus.find(|gpu| {
        gpu.hip_uuid
            .as_deref()
            .is_some_and(|hip_uuid| hip_uuid.eq_ignore_ascii_case(uuid))
    })
}

/// One GPU's record in amd-smi's output: its amd-smi index and its fields, keys lower-cased,
/// nested sections (`asic`) flattened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SmiRecord {
    gpu: u32,
    fields: BTreeMap<String, String>,
}

impl SmiRecord {
    /// A field's value, absent when amd-smi could not read it.
    fn known(&self, key: &str) -> Option<&str> {
        self.fields
            .get(key)
            .map(|value| value.trim())
            .filter(|value| !value.is_empty() && *value != NOT_AVAILABLE)
    }
}

/// Reads amd-smi output in any of its forms: `--json` as a bare list of GPU objects or as
/// `{"gpu_data": [...]}` (newer releases wrap `static` that way), or the human text of
/// `GPU: n` blocks with `KEY: value` lines.
pub(crate) fn parse_smi_records(text: &str) -> Result<Vec<SmiRecord>, String> {
    let trimmed = text.trim_start();
    if trimmed.starts_with('[') || trimmed.starts_with('{') {
        parse_json_records(trimmed)
    } else {
        parse_text_records(text)
    }
}

fn parse_json_records(text: &str) -> Result<Vec<SmiRecord>, String> {
    use serde_json::Value;
    let document: Value =
        serde_json::from_str(text).map_err(|error| format!("invalid JSON: {error}"))?;
    let items = match &document {
        Value::Array(items) => items,
        Value::Object(object) => match object.get("gpu_data") {
            Some(Value::Array(items)) => items,
            _ => return Err("a JSON object without a \"gpu_data\" list".to_string()),
        },
        _ => return Err("JSON that is neither a list nor an object".to_string()),
    };
    items
        .iter()
        .map(|item| {
            let Value::Object(object) = item else {
                return Err(format!("a GPU entry that is not an object: {item}"));
            };
            let gpu = object
                .get("gpu")
                .and_then(Value::as_u64)
                .and_then(|gpu| u32::try_from(gpu).ok())
                .ok_or_else(|| format!("a GPU entry without an integer \"gpu\": {item}"))?;
            let mut fields = BTreeMap::new();
            let scalar = |value: &Value| match value {
                Value::String(text) => Some(text.clone()),
                Value::Number(number) => Some(number.to_string()),
                Value::Bool(flag) => Some(flag.to_string()),
                Value::Null | Value::Array(_) | Value::Object(_) => None,
            };
            for (key, value) in object {
                match value {
                    Value::Object(section) => {
                        for (key, value) in section {
                            if let Some(value) = scalar(value) {
                                fields.entry(key.to_lowercase()).or_insert(value);
                            }
                        }
                    }
                    value => {
                        if let Some(value) = scalar(value) {
                            fields.insert(key.to_lowercase(), value);
                        }
                    }
                }
            }
            Ok(SmiRecord { gpu, fields })
        })
        .collect()
}

fn parse_text_records(text: &str) -> Result<Vec<SmiRecord>, String> {
    let mut records: Vec<SmiRecord> = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let key_value = line
            .split_once(':')
            .filter(|(key, _)| !key.trim().contains(char::is_whitespace));
        let Some((key, value)) = key_value else {
            if records.is_empty() {
                continue;
            }
            return Err(format!(
                "line {} is not \"KEY: value\": {line:?}",
                number + 1
            ));
        };
        let (key, value) = (key.trim().to_lowercase(), value.trim());
        if key == "gpu" {
            let gpu = value
                .parse()
                .map_err(|_| format!("line {} has GPU {value:?}, not a number", number + 1))?;
            records.push(SmiRecord {
                gpu,
                fields: BTreeMap::new(),
            });
        } else if let Some(record) = records.last_mut()
            && !value.is_empty()
        {
            record.fields.insert(key, value.to_string());
        }
    }
    if records.is_empty() && !text.trim().is_empty() {
        return Err("no \"GPU: n\" block".to_string());
    }
    Ok(records)
}

/// The GPUs of `list -e`, each with its amd-smi index (to join `static` on).
fn enumerated_gpus(
    records: &[SmiRecord],
    warnings: &mut Vec<String>,
) -> Result<Vec<(u32, AmdGpu)>, String> {
    let mut gpus = Vec::new();
    for record in records {
        let gpu = record.gpu;
        let bdf = record
            .known("bdf")
            .ok_or_else(|| format!("GPU {gpu} has no bdf"))?;
        if !record.fields.contains_key("hip_id") {
            return Err(format!(
                "GPU {gpu} has no hip_id (amd-smi older than 25.3 / ROCm 6.4 cannot enumerate HIP ids)"
            ));
        }
        let Some(hip_id) = record.known("hip_id") else {
            warnings.push(format!(
                "amd-smi gives GPU {gpu} ({bdf}) no HIP id, so HIP cannot use it; it is left out"
            ));
            continue;
        };
        let hip_id = hip_id
            .parse()
            .map_err(|_| format!("GPU {gpu} has hip_id {hip_id:?}, not a number"))?;
        gpus.push((
            gpu,
            AmdGpu {
                hip_id,
                hip_uuid: record.known("hip_uuid").map(str::to_string),
                bdf: bdf.to_string(),
                market_name: None,
                chip_id: None,
                compute_units: None,
                gfx_target: None,
            },
        ));
    }
    Ok(gpus)
}

/// Fills in what `static --asic` says about each listed GPU, matched by amd-smi index.
fn describe(gpus: &mut [(u32, AmdGpu)], records: &[SmiRecord], warnings: &mut Vec<String>) {
    for (gpu_index, gpu) in gpus {
        let Some(record) = records.iter().find(|record| record.gpu == *gpu_index) else {
            warnings.push(format!(
                "amd-smi static --asic says nothing about GPU {gpu_index} (HIP id {}); its name \
                 and spec row are unknown",
                gpu.hip_id
            ));
            continue;
        };
        gpu.market_name = record.known("market_name").map(str::to_string);
        gpu.chip_id = record.known("device_id").and_then(parse_chip_id);
        gpu.compute_units = record
            .known("num_compute_units")
            .and_then(|count| count.parse().ok());
        gpu.gfx_target = record
            .known("target_graphics_version")
            .map(normalize_gfx_target);
    }
}

/// `0x74a1` (amd-smi's form) or a decimal number.
pub(crate) fn parse_chip_id(text: &str) -> Option<u32> {
    let text = text.trim();
    match text.get(..2) {
        Some(prefix) if prefix.eq_ignore_ascii_case("0x") => {
            u32::from_str_radix(&text[2..], 16).ok()
        }
        _ => text.parse().ok(),
    }
}

/// `gfx942`, also from a full target such as `amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-`.
pub(crate) fn normalize_gfx_target(text: &str) -> String {
    let text = text.trim();
    let target = text.rsplit("--").next().unwrap_or(text);
    target
        .split(':')
        .next()
        .unwrap_or(target)
        .to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::fake_tools::{FakeNode, fixture_text};
    use crate::devices::masks::{HIP_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES};
    use crate::devices::tool::TOOL_TIMEOUT;

    /// The four MI300X of the amd-smi fixtures, by HIP id: amd-smi's gpu 0 is HIP id 1 and its
    /// gpu 1 is HIP id 0.
    fn mi300x(hip_id: u32) -> AmdGpu {
        let (bdf, hip_uuid) = match hip_id {
            0 => ("0000:26:00.0", "GPU-a1b2c3d4e5f60718"),
            1 => ("0000:05:00.0", "GPU-0f1e2d3c4b5a6978"),
            2 => ("0000:46:00.0", "GPU-5566778899aabbcc"),
            _ => ("0000:65:00.0", "GPU-d00dfeedcafe1234"),
        };
        AmdGpu {
            hip_id,
            hip_uuid: Some(hip_uuid.to_string()),
            bdf: bdf.to_string(),
            market_name: Some("AMD Instinct MI300X".to_string()),
            chip_id: Some(0x74a1),
            compute_units: Some(304),
            gfx_target: Some("gfx942".to_string()),
        }
    }

    fn listed(node: &FakeNode) -> (Vec<AmdGpu>, Vec<String>) {
        let listing = list_amd_gpus(&node.host(&[]), TOOL_TIMEOUT);
        match listing.listing {
            Listing::Gpus(gpus) => (gpus, listing.warnings),
            other => panic!("expected GPUs, got {other:?}"),
        }
    }

    fn four_mi300x() -> Vec<AmdGpu> {
        (0..4).map(mi300x).collect()
    }

    #[test]
    fn json_in_both_shapes_and_text_give_the_same_gpus() {
        let forms = [
            ("amd-smi-list-e-4gpu.json", "amd-smi-static-asic-4gpu.json"),
            (
                "amd-smi-list-e-4gpu.json",
                "amd-smi-static-asic-4gpu-bare.json",
            ),
            ("amd-smi-list-e-4gpu.txt", "amd-smi-static-asic-4gpu.txt"),
        ];
        for (list, static_asic) in forms {
            let node = FakeNode::new();
            node.amd_smi(&node.bin(), list, static_asic);
            assert_eq!(
                listed(&node),
                (four_mi300x(), vec![]),
                "{list} + {static_asic}"
            );
            assert_eq!(
                node.calls(),
                vec!["amd-smi list -e --json", "amd-smi static --asic --json"]
            );
        }
    }

    #[test]
    fn reads_the_documented_mi300a_text_samples() {
        let node = FakeNode::new();
        node.amd_smi(
            &node.bin(),
            "amd-smi-list-e-mi300a.txt",
            "amd-smi-static-asic-mi300a.txt",
        );
        let (gpus, warnings) = listed(&node);
        assert_eq!(warnings, Vec::<String>::new());
        assert_eq!(
            gpus,
            vec![AmdGpu {
                hip_id: 0,
                hip_uuid: Some("GPU-XXXXXXXXXXXXXXXX".into()),
                bdf: "0000:23:00.0".into(),
                market_name: Some("AMD Instinct MI300A".into()),
                chip_id: Some(0x74a0),
                compute_units: Some(228),
                gfx_target: Some("gfx942".into()),
            }]
        );
    }

    #[test]
    fn an_old_list_without_hip_ids_is_unreadable() {
        let node = FakeNode::new();
        node.amd_smi(
            &node.bin(),
            "amd-smi-list-no-hip-id.json",
            "amd-smi-static-asic-4gpu.json",
        );
        let listing = list_amd_gpus(&node.host(&[]), TOOL_TIMEOUT);
        let Listing::ToolFailed(failure) = listing.listing else {
            panic!("expected a failure, got {:?}", listing.listing);
        };
        assert_eq!(
            failure.to_string(),
            format!(
                "{}/amd-smi list -e --json printed output that is not amd-smi's JSON list or its \
                 \"GPU: n\" text blocks: GPU 0 has no hip_id (amd-smi older than 25.3 / ROCm 6.4 \
                 cannot enumerate HIP ids)",
                node.bin().display()
            )
        );
    }

    #[test]
    fn broken_outputs_are_unreadable() {
        let cases = [
            ("not json at all", "no \"GPU: n\" block"),
            (
                "[{\"gpu\": 0,",
                "invalid JSON: EOF while parsing a value at line 1 column 11",
            ),
            (
                "{\"cpu_data\": []}",
                "a JSON object without a \"gpu_data\" list",
            ),
            (
                "[{\"bdf\": \"0000:05:00.0\"}]",
                "a GPU entry without an integer \"gpu\": {\"bdf\":\"0000:05:00.0\"}",
            ),
            ("GPU: zero\n", "line 1 has GPU \"zero\", not a number"),
            (
                "GPU: 0\n    BDF 0000:05:00.0\n",
                "line 2 is not \"KEY: value\": \"BDF 0000:05:00.0\"",
            ),
        ];
        for (output, detail) in cases {
            assert_eq!(parse_smi_records(output).unwrap_err(), detail, "{output:?}");
        }
    }

    #[test]
    fn no_output_is_no_gpu() {
        assert_eq!(parse_smi_records("").unwrap(), vec![]);
        assert_eq!(parse_smi_records("[]").unwrap(), vec![]);
    }

    #[test]
    fn a_gpu_without_hip_id_is_left_out_with_a_warning() {
        let mut warnings = Vec::new();
        let records = parse_smi_records(
            "[{\"gpu\": 0, \"bdf\": \"0000:05:00.0\", \"hip_id\": \"N/A\"},\
              {\"gpu\": 1, \"bdf\": \"0000:26:00.0\", \"hip_id\": 0, \"hip_uuid\": \"N/A\"}]",
        )
        .unwrap();
        let gpus = enumerated_gpus(&records, &mut warnings).unwrap();
        assert_eq!(gpus.len(), 1);
        assert_eq!(gpus[0].1.hip_id, 0);
        assert_eq!(gpus[0].1.hip_uuid, None);
        assert_eq!(
            warnings,
            vec![
                "amd-smi gives GPU 0 (0000:05:00.0) no HIP id, so HIP cannot use it; it is left out"
            ]
        );
    }

    #[test]
    fn a_gpu_missing_from_static_keeps_its_hip_id_but_has_no_name() {
        let mut warnings = Vec::new();
        let listed = parse_smi_records(&fixture_text("amd-smi-list-e-4gpu.json")).unwrap();
        let mut gpus = enumerated_gpus(&listed, &mut warnings).unwrap();
        let described =
            parse_smi_records(&fixture_text("amd-smi-static-asic-mi250x.json")).unwrap();
        describe(&mut gpus, &described, &mut warnings);
        let names: Vec<Option<&str>> = gpus
            .iter()
            .map(|(_, gpu)| gpu.market_name.as_deref())
            .collect();
        let generic = Some("AMD Instinct MI250X / MI250");
        assert_eq!(names, vec![generic, generic, None, None]);
        assert_eq!(
            warnings,
            vec![
                "amd-smi static --asic says nothing about GPU 2 (HIP id 2); its name and spec \
                 row are unknown",
                "amd-smi static --asic says nothing about GPU 3 (HIP id 3); its name and spec \
                 row are unknown",
            ]
        );
    }

    #[test]
    fn a_failing_static_leaves_the_gpus_listed_but_undescribed() {
        let node = FakeNode::new();
        node.amd_smi(&node.bin(), "amd-smi-list-e-4gpu.json", "");
        let (gpus, warnings) = listed(&node);
        assert_eq!(
            gpus.iter().map(|gpu| gpu.hip_id).collect::<Vec<_>>(),
            vec![0, 1, 2, 3]
        );
        assert!(
            gpus.iter()
                .all(|gpu| gpu.market_name.is_none() && gpu.chip_id.is_none())
        );
        assert_eq!(
            warnings,
            vec![format!(
                "the AMD GPUs' names, chip ids and spec rows are unknown: {}/amd-smi static \
                 --asic --json failed (exit status: 64): unexpected arguments: static --asic --json",
                node.bin().display()
            )]
        );
    }

    #[test]
    fn amd_smi_is_found_beside_an_unresolved_venv_python() {
        let node = FakeNode::new();
        let venv_bin = node.venv_with_symlinked_python();
        node.four_mi300x_amd_smi(&venv_bin);
        assert_eq!(listed(&node).0, four_mi300x());
    }

    #[test]
    fn amd_smi_beside_the_symlink_target_is_not_used() {
        let node = FakeNode::new();
        node.venv_with_symlinked_python();
        node.four_mi300x_amd_smi(&node.python_target_dir());
        let listing = list_amd_gpus(&node.host(&[]), TOOL_TIMEOUT);
        let Listing::ToolNotFound { searched } = listing.listing else {
            panic!("expected no amd-smi, got {:?}", listing.listing);
        };
        assert_eq!(
            searched,
            format!(
                "PATH, {} (beside the configured python) or {}",
                node.venv_bin().display(),
                node.rocm_bin().display()
            )
        );
    }

    #[test]
    fn amd_smi_is_found_in_rocm_bin_last() {
        let node = FakeNode::new();
        node.four_mi300x_amd_smi(&node.rocm_bin());
        assert_eq!(listed(&node).0, four_mi300x());
    }

    #[test]
    fn amd_smi_on_path_comes_first() {
        let node = FakeNode::new();
        node.four_mi300x_amd_smi(&node.bin());
        let venv_bin = node.venv_with_symlinked_python();
        node.amd_smi(&venv_bin, "amd-smi-list-no-hip-id.json", "");
        node.amd_smi(&node.rocm_bin(), "amd-smi-list-no-hip-id.json", "");
        assert_eq!(listed(&node).0, four_mi300x());
    }

    fn masked(rocr: Option<&str>, hip: Option<&str>) -> Vec<u32> {
        let rocr = rocr.map(|value| Mask::lenient(ROCR_VISIBLE_DEVICES, value));
        let hip = hip.map(|value| Mask::lenient(HIP_VISIBLE_DEVICES, value));
        apply_amd_masks(&four_mi300x(), rocr.as_ref(), hip.as_ref())
            .iter()
            .map(|gpu| gpu.hip_id)
            .collect()
    }

    #[test]
    fn rocr_then_hip_as_in_the_issue() {
        assert_eq!(masked(Some("1,2,3"), Some("2")), vec![3]);
        assert_eq!(masked(Some("0"), Some("0")), vec![0]);
        assert_eq!(masked(Some("0"), Some("1")), Vec::<u32>::new());
    }

    #[test]
    fn masks_keep_their_order_and_stop_at_a_missing_gpu() {
        assert_eq!(masked(None, None), vec![0, 1, 2, 3]);
        assert_eq!(masked(Some("3,1"), None), vec![3, 1]);
        assert_eq!(masked(None, Some("2,0")), vec![2, 0]);
        assert_eq!(masked(Some("0,9,1"), None), vec![0]);
        assert_eq!(masked(None, Some("1,4,0")), vec![1]);
        assert_eq!(masked(Some("2,2,3"), None), vec![2, 3]);
        assert_eq!(masked(Some("3,2"), Some("1,0")), vec![2, 3]);
    }

    #[test]
    fn uuid_entries_match_hip_uuid() {
        assert_eq!(masked(Some("GPU-5566778899AABBCC,0"), None), vec![2, 0]);
        assert_eq!(masked(Some("1,2"), Some("GPU-5566778899aabbcc")), vec![2]);
        // A UUID of a GPU that ROCR hid is not visible to HIP.
        assert_eq!(
            masked(Some("1"), Some("GPU-5566778899aabbcc")),
            Vec::<u32>::new()
        );
        // Only whole HIP UUIDs select.
        assert_eq!(masked(Some("GPU-5566"), None), Vec::<u32>::new());
    }

    #[test]
    fn chip_ids_and_gfx_targets_are_normalized() {
        assert_eq!(parse_chip_id("0x74A1"), Some(0x74a1));
        assert_eq!(parse_chip_id("29857"), Some(0x74a1));
        assert_eq!(parse_chip_id("0xZZ"), None);
        assert_eq!(normalize_gfx_target("gfx942"), "gfx942");
        assert_eq!(normalize_gfx_target("GFX90A"), "gfx90a");
        assert_eq!(
            normalize_gfx_target("amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-"),
            "gfx942"
        );
    }
}
