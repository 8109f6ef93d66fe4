use std::collections::BTreeSet;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use super::rocm::parse_chip_id;
use crate::vendor::Vendor;

/// The spec table, data rather than code: one row per GPU model.
const SPEC_TABLE_YAML: &str =
    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/data/gpu_specs.yaml"));

/// One GPU model's peak figures, from its vendor's datasheet. Rates are dense (no sparsity)
/// TFLOPS; figures are for the whole package (see `gpus_per_package`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuSpec {
    pub name: String,
    pub vendor: Vendor,
    pub architecture: String,
    pub fp32_vector_tflops: f64,
    /// The FP32 matrix headline: TF32 tensor cores on NVIDIA, FP32 matrix cores on AMD.
    pub fp32_matrix_tflops: f64,
    pub fp16_tflops: f64,
    pub bf16_tflops: f64,
    pub fp8_tflops: Option<f64>,
    pub memory_bandwidth_gb_per_s: f64,
    /// SMs on NVIDIA, CUs on AMD.
    pub compute_units: u32,
    /// The package total.
    pub l2_cache_mb: f64,
    pub memory_gb: f64,
    pub memory_type: String,
    /// Warp (NVIDIA) or wavefront (AMD) size.
    pub warp_size: u32,
    /// How many GPUs software sees per package (MI250 and MI250X: one per die, 2); a device
    /// gets 1/n of the package figures.
    pub gpus_per_package: u32,
    #[serde(rename = "match")]
    pub matching: SpecMatch,
    pub source: String,
    pub notes: Option<String>,
}

/// How a detected GPU finds its row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpecMatch {
    /// nvidia-smi names, or AMD market names; a generic market name may be in several rows.
    pub names: Vec<String>,
    /// AMD PCI device ids, `0x....`.
    #[serde(default)]
    pub chip_ids: Vec<String>,
    #[serde(default)]
    pub gfx_target: Option<String>,
    /// AMD CU counts as amd-smi may report them: the package's, and one die's where software
    /// sees each die as a GPU.
    #[serde(default)]
    pub compute_units: Vec<u32>,
    /// The row for a GPU of this gfx target whose chip id cannot be read and that nothing
    /// else singles out.
    #[serde(default)]
    pub default_for_gfx_target: bool,
}

/// The embedded spec table, parsed once.
pub fn spec_table() -> &'static [GpuSpec] {
    static TABLE: OnceLock<Vec<GpuSpec>> = OnceLock::new();
    TABLE.get_or_init(|| {
        parse_spec_table(SPEC_TABLE_YAML)
            .unwrap_or_else(|error| panic!("the embedded data/gpu_specs.yaml is invalid: {error}"))
    })
}

/// A row by its name or one of its match names, for a configured `gpu_name`.
pub fn spec_by_name(name: &str) -> Option<&'static GpuSpec> {
    let wanted = normalize_name(name);
    spec_table().iter().find(|row| {
        normalize_name(&row.name) == wanted
            || row
                .matching
                .names
                .iter()
                .any(|candidate| normalize_name(candidate) == wanted)
    })
}

pub(crate) fn parse_spec_table(yaml: &str) -> Result<Vec<GpuSpec>, String> {
    let rows: Vec<GpuSpec> = serde_yaml::from_str(yaml).map_err(|error| error.to_string())?;
    let mut names = BTreeSet::new();
    let mut defaults = BTreeSet::new();
    for row in &rows {
        let name = &row.name;
        if !names.insert(normalize_name(name)) {
            return Err(format!("row {name:?} appears twice"));
        }
        if row.matching.names.is_empty() {
            return Err(format!("row {name:?} has no match names"));
        }
        if let Some(chip_id) = row
            .matching
            .chip_ids
            .iter()
            .find(|chip_id| !chip_id.starts_with("0x") || parse_chip_id(chip_id).is_none())
        {
            return Err(format!(
                "row {name:?} has chip id {chip_id:?}, not 0x followed by hex"
            ));
        }
        if row.vendor == Vendor::Rocm
            && (row.matching.gfx_target.is_none() || row.matching.chip_ids.is_empty())
        {
            return Err(format!(
                "AMD row {name:?} needs a gfx_target and chip_ids to match"
            ));
        }
        if row.matching.default_for_gfx_target {
            let gfx_target = row.matching.gfx_target.clone().unwrap_or_default();
            if !defaults.insert(gfx_target.clone()) {
                return Err(format!("two rows are the default for {gfx_target:?}"));
            }
        }
    }
    Ok(rows)
}

/// Names compare case-insensitively with runs of white space as one space.
fn normalize_name(name: &str) -> String {
    name.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// The row whose nvidia-smi names include `name`.
pub(crate) fn nvidia_row<'t>(table: &'t [GpuSpec], name: &str) -> Option<&'t GpuSpec> {
    let wanted = normalize_name(name);
    table.iter().find(|row| {
        row.vendor == Vendor::Nvidia
            && row
                .matching
                .names
                .iter()
                .any(|candidate| normalize_name(candidate) == wanted)
    })
}

/// What amd-smi says about one AMD GPU.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct AmdIdentity<'a> {
    pub(crate) market_name: Option<&'a str>,
    pub(crate) chip_id: Option<u32>,
    pub(crate) gfx_target: Option<&'a str>,
    pub(crate) compute_units: Option<u32>,
}

/// The AMD row: the market name when it names one row; when it is generic or unknown, the chip
/// id (or, when that cannot be read, the gfx target), then the CU count, then the gfx target's
/// default row. Anything still ambiguous or unknown gets no row rather than a wrong one.
pub(crate) fn amd_row<'t>(table: &'t [GpuSpec], gpu: AmdIdentity<'_>) -> Option<&'t GpuSpec> {
    let amd_rows: Vec<&GpuSpec> = table
        .iter()
        .filter(|row| row.vendor == Vendor::Rocm)
        .collect();
    let named: Vec<&GpuSpec> = gpu
        .market_name
        .map(|market_name| {
            let wanted = normalize_name(market_name);
            amd_rows
                .iter()
                .copied()
                .filter(|row| {
                    row.matching
                        .names
                        .iter()
                        .any(|candidate| normalize_name(candidate) == wanted)
                })
                .collect()
        })
        .unwrap_or_default();
    if let [row] = named.as_slice() {
        return Some(row);
    }
    let candidates = if named.is_empty() { amd_rows } else { named };
    let by_chip: Vec<&GpuSpec> = match (gpu.chip_id, gpu.gfx_target) {
        (Some(chip_id), _) => candidates
            .into_iter()
            .filter(|row| {
                row.matching
                    .chip_ids
                    .iter()
                    .any(|candidate| parse_chip_id(candidate) == Some(chip_id))
            })
            .collect(),
        (None, Some(gfx_target)) => candidates
            .into_iter()
            .filter(|row| row.matching.gfx_target.as_deref() == Some(gfx_target))
            .collect(),
        (None, None) => return None,
    };
    if let [row] = by_chip.as_slice() {
        return Some(row);
    }
    let default_row = |rows: &[&'t GpuSpec]| {
        rows.iter()
            .copied()
            .find(|row| row.matching.default_for_gfx_target)
    };
    match gpu.compute_units {
        Some(count) => {
            let by_count: Vec<&GpuSpec> = by_chip
                .into_iter()
                .filter(|row| row.matching.compute_units.contains(&count))
                .collect();
            match by_count.as_slice() {
                [row] => Some(row),
                [] => None,
                several => default_row(several),
            }
        }
        None => default_row(&by_chip),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn amd(
        market_name: Option<&str>,
        chip_id: Option<u32>,
        gfx_target: Option<&str>,
        compute_units: Option<u32>,
    ) -> Option<&'static str> {
        let identity = AmdIdentity {
            market_name,
            chip_id,
            gfx_target,
            compute_units,
        };
        amd_row(spec_table(), identity).map(|row| row.name.as_str())
    }

    #[test]
    fn the_embedded_table_parses_and_has_the_required_rows() {
        let names: Vec<&str> = spec_table().iter().map(|row| row.name.as_str()).collect();
        let required = [
            "NVIDIA A100 SXM4 40GB",
            "NVIDIA A100 SXM4 80GB",
            "NVIDIA A100 PCIe 40GB",
            "NVIDIA A100 PCIe 80GB",
            "NVIDIA H100 SXM",
            "NVIDIA H100 PCIe",
            "NVIDIA H100 NVL",
            "NVIDIA H200",
            "NVIDIA B200",
            "NVIDIA L40S",
            "NVIDIA GeForce RTX 4090",
            "AMD Instinct MI100",
            "AMD Instinct MI210",
            "AMD Instinct MI250",
            "AMD Instinct MI250X",
            "AMD Instinct MI300A",
            "AMD Instinct MI300X",
            "AMD Instinct MI325X",
            "AMD Instinct MI350X",
            "AMD Instinct MI355X",
        ];
        for name in required {
            assert!(names.contains(&name), "no row {name:?} in {names:?}");
        }
    }

    #[test]
    fn every_row_is_plausible() {
        for row in spec_table() {
            let name = &row.name;
            assert!(row.fp32_vector_tflops > 0.0, "{name}");
            assert!(row.fp32_matrix_tflops >= row.fp32_vector_tflops, "{name}");
            assert!(row.fp16_tflops > row.fp32_vector_tflops, "{name}");
            assert!(row.bf16_tflops > 0.0, "{name}");
            if let Some(fp8) = row.fp8_tflops {
                assert!(fp8 >= row.fp16_tflops, "{name}");
            }
            assert!(row.memory_bandwidth_gb_per_s > 100.0, "{name}");
            assert!(
                row.compute_units > 0 && row.l2_cache_mb > 0.0 && row.memory_gb > 0.0,
                "{name}"
            );
            assert!(
                !row.source.is_empty() && !row.architecture.is_empty(),
                "{name}"
            );
            assert!(row.gpus_per_package >= 1, "{name}");
            let expected_warp = match row.vendor {
                Vendor::Nvidia => 32,
                Vendor::Rocm => 64,
            };
            assert_eq!(row.warp_size, expected_warp, "{name}");
        }
    }

    #[test]
    fn broken_tables_are_rejected() {
        let row = |name: &str, extra: &str| {
            format!(
                "- name: {name}\n  vendor: rocm\n  architecture: CDNA 3\n  fp32_vector_tflops: 1\n  \
                 fp32_matrix_tflops: 1\n  fp16_tflops: 2\n  bf16_tflops: 2\n  fp8_tflops: null\n  \
                 memory_bandwidth_gb_per_s: 1000\n  compute_units: 1\n  l2_cache_mb: 1\n  \
                 memory_gb: 1\n  memory_type: HBM3\n  warp_size: 64\n  gpus_per_package: 1\n  \
                 source: test\n  notes: null\n  match:\n    names: [{name}]\n{extra}"
            )
        };
        let cases = [
            (
                format!(
                    "{}{}",
                    row("A", "    chip_ids: ['0x1']\n    gfx_target: gfx1\n"),
                    row("a", "    chip_ids: ['0x2']\n    gfx_target: gfx1\n")
                ),
                "row \"a\" appears twice",
            ),
            (
                row("A", "    chip_ids: ['74a1']\n    gfx_target: gfx1\n"),
                "row \"A\" has chip id \"74a1\", not 0x followed by hex",
            ),
            (
                row("A", "    gfx_target: gfx1\n"),
                "AMD row \"A\" needs a gfx_target and chip_ids to match",
            ),
            (
                format!(
                    "{}{}",
                    row(
                        "A",
                        "    chip_ids: ['0x1']\n    gfx_target: gfx1\n    default_for_gfx_target: true\n"
                    ),
                    row(
                        "B",
                        "    chip_ids: ['0x2']\n    gfx_target: gfx1\n    default_for_gfx_target: true\n"
                    )
                ),
                "two rows are the default for \"gfx1\"",
            ),
        ];
        for (yaml, error) in cases {
            assert_eq!(parse_spec_table(&yaml).unwrap_err(), error);
        }
        let unknown_column = row("A", "    chip_ids: ['0x1']\n    gfx_target: gfx1\n")
            .replace("notes: null", "note: typo");
        assert!(
            parse_spec_table(&unknown_column)
                .unwrap_err()
                .contains("unknown field `note`")
        );
    }

    #[test]
    fn nvidia_rows_are_chosen_by_nvidia_smi_name() {
        let row = |name: &str| nvidia_row(spec_table(), name).map(|row| row.name.as_str());
        assert_eq!(row("NVIDIA H200"), Some("NVIDIA H200"));
        assert_eq!(row("NVIDIA H100 80GB HBM3"), Some("NVIDIA H100 SXM"));
        assert_eq!(row("NVIDIA H100 PCIe"), Some("NVIDIA H100 PCIe"));
        assert_eq!(row("NVIDIA H100 NVL"), Some("NVIDIA H100 NVL"));
        assert_eq!(row("NVIDIA A100-SXM4-40GB"), Some("NVIDIA A100 SXM4 40GB"));
        assert_eq!(row("NVIDIA A100-SXM4-80GB"), Some("NVIDIA A100 SXM4 80GB"));
        assert_eq!(row("NVIDIA A100-PCIE-40GB"), Some("NVIDIA A100 PCIe 40GB"));
        assert_eq!(row("NVIDIA A100 80GB PCIe"), Some("NVIDIA A100 PCIe 80GB"));
        assert_eq!(row("NVIDIA B200"), Some("NVIDIA B200"));
        assert_eq!(row("NVIDIA L40S"), Some("NVIDIA L40S"));
        assert_eq!(
            row("NVIDIA GeForce RTX 4090"),
            Some("NVIDIA GeForce RTX 4090")
        );
        assert_eq!(row("nvidia  h200"), Some("NVIDIA H200"));
        assert_eq!(row("Tesla M40 24GB"), None);
        // An AMD name never selects through the NVIDIA rule.
        assert_eq!(row("AMD Instinct MI300X"), None);
    }

    #[test]
    fn amd_rows_are_chosen_by_market_name() {
        for name in [
            "MI100", "MI210", "MI250", "MI250X", "MI300A", "MI300X", "MI325X", "MI350X", "MI355X",
        ] {
            let market_name = format!("AMD Instinct {name}");
            assert_eq!(
                amd(Some(&market_name), None, None, None),
                Some(market_name.as_str())
            );
        }
    }

    /// Each Instinct chip id behind a generic or unreadable market name.
    #[test]
    fn amd_rows_are_chosen_by_chip_id() {
        let cases = [
            (0x738c, "gfx908", 120, "AMD Instinct MI100"),
            (0x740f, "gfx90a", 104, "AMD Instinct MI210"),
            (0x740c, "gfx90a", 220, "AMD Instinct MI250X"),
            (0x740c, "gfx90a", 208, "AMD Instinct MI250"),
            (0x74a0, "gfx942", 228, "AMD Instinct MI300A"),
            (0x74a1, "gfx942", 304, "AMD Instinct MI300X"),
            (0x74a5, "gfx942", 304, "AMD Instinct MI325X"),
            (0x75a0, "gfx950", 256, "AMD Instinct MI350X"),
            (0x75a3, "gfx950", 256, "AMD Instinct MI355X"),
        ];
        for market_name in [None, Some("AMD Radeon Graphics"), Some("N/A")] {
            for (chip_id, gfx_target, compute_units, row) in cases {
                assert_eq!(
                    amd(
                        market_name,
                        Some(chip_id),
                        Some(gfx_target),
                        Some(compute_units)
                    ),
                    Some(row),
                    "{market_name:?} {chip_id:#x}"
                );
            }
        }
    }

    #[test]
    fn mi250x_and_mi250_share_a_chip_id_and_a_generic_name() {
        let generic = Some("AMD Instinct MI250X / MI250");
        assert_eq!(
            amd(generic, Some(0x740c), Some("gfx90a"), Some(220)),
            Some("AMD Instinct MI250X")
        );
        assert_eq!(
            amd(generic, Some(0x740c), Some("gfx90a"), Some(208)),
            Some("AMD Instinct MI250")
        );
        // amd-smi counts the CUs of one die, which software sees as one GPU.
        assert_eq!(
            amd(generic, Some(0x740c), Some("gfx90a"), Some(110)),
            Some("AMD Instinct MI250X")
        );
        assert_eq!(
            amd(generic, Some(0x740c), Some("gfx90a"), Some(104)),
            Some("AMD Instinct MI250")
        );
        assert_eq!(
            amd(generic, Some(0x740c), Some("gfx90a"), None),
            Some("AMD Instinct MI250X")
        );
        assert_eq!(amd(None, Some(0x740c), None, Some(300)), None);
    }

    #[test]
    fn a_gfx_target_without_chip_id_uses_cu_count_then_the_default() {
        assert_eq!(
            amd(None, None, Some("gfx90a"), None),
            Some("AMD Instinct MI250X")
        );
        assert_eq!(
            amd(None, None, Some("gfx90a"), Some(220)),
            Some("AMD Instinct MI250X")
        );
        assert_eq!(
            amd(None, None, Some("gfx90a"), Some(208)),
            Some("AMD Instinct MI250")
        );
        // 104 CUs: an MI210 or one die of an MI250; neither is the gfx90a default.
        assert_eq!(amd(None, None, Some("gfx90a"), Some(104)), None);
        assert_eq!(
            amd(None, None, Some("gfx942"), Some(228)),
            Some("AMD Instinct MI300A")
        );
        // 304 CUs: MI300X or MI325X.
        assert_eq!(amd(None, None, Some("gfx942"), Some(304)), None);
        assert_eq!(amd(None, None, Some("gfx942"), None), None);
        assert_eq!(
            amd(None, None, Some("gfx908"), None),
            Some("AMD Instinct MI100")
        );
    }

    #[test]
    fn unknown_amd_gpus_get_no_row() {
        // MI308X: a gfx942 chip the table has no row for.
        assert_eq!(
            amd(
                Some("AMD Instinct MI308X"),
                Some(0x74a2),
                Some("gfx942"),
                Some(80)
            ),
            None
        );
        assert_eq!(
            amd(
                Some("AMD Radeon RX 7800 XT"),
                Some(0x747e),
                Some("gfx1101"),
                Some(60)
            ),
            None
        );
        assert_eq!(amd(None, None, None, Some(304)), None);
    }

    #[test]
    fn spec_by_name_takes_row_names_and_match_names() {
        assert_eq!(
            spec_by_name("NVIDIA H100 SXM").unwrap().name,
            "NVIDIA H100 SXM"
        );
        assert_eq!(
            spec_by_name("nvidia h100 80gb hbm3").unwrap().name,
            "NVIDIA H100 SXM"
        );
        assert_eq!(
            spec_by_name("AMD Instinct MI300X").unwrap().name,
            "AMD Instinct MI300X"
        );
        assert!(spec_by_name("H100").is_none());
    }

    #[test]
    fn a_row_serializes_with_its_name_and_columns() {
        let row = serde_json::to_value(spec_by_name("NVIDIA H200").unwrap()).unwrap();
        assert_eq!(row["name"], "NVIDIA H200");
        assert_eq!(row["vendor"], "nvidia");
        assert_eq!(row["memory_bandwidth_gb_per_s"], 4800.0);
        assert_eq!(row["match"]["names"][0], "NVIDIA H200");
    }
}
