//! Reads Nsight Compute's `--csv` output, raw page (one row per profiled launch, one column per
//! metric) or details page (one row per metric), into one report per launch with every value in
//! base units. Columns are found by header name, never by position.

use std::collections::BTreeMap;

use csv::StringRecord;
use thiserror::Error;

#[derive(Debug, Clone, PartialEq)]
pub struct NcuReport {
    pub kernels: Vec<NcuKernelResult>,
}

/// One profiled launch ("result" in ncu's words).
#[derive(Debug, Clone, PartialEq)]
pub struct NcuKernelResult {
    /// ncu's result index, counted over the whole session.
    pub id: u32,
    pub kernel_name: String,
    /// The CUDA ordinal inside the profiled process (after CUDA_VISIBLE_DEVICES).
    pub device: Option<u32>,
    /// Threads per block, x y z.
    pub block_size: Option<[u32; 3]>,
    /// Blocks, x y z.
    pub grid_size: Option<[u32; 3]>,
    /// Numeric values by ncu metric name, in base units (ns, byte, hz, %, byte/second). A value
    /// ncu printed as `n/a` or left empty is absent, never 0. Speed-of-light rows of the details
    /// page are stored under the metric the row shows ("Duration" as `gpu__time_duration.sum`).
    pub metrics: BTreeMap<String, f64>,
    /// Values that are not numbers, such as `device__attribute_display_name` = "NVIDIA H200".
    pub attributes: BTreeMap<String, String>,
}

#[derive(Debug, Error)]
pub enum NcuParseError {
    #[error(
        "ncu may not read the GPU performance counters ({line:?}): run kactors as root, or let \
         every user profile by loading the nvidia kernel module with \
         NVreg_RestrictProfilingToAdminUsers=0 (`options nvidia NVreg_RestrictProfilingToAdminUsers=0` \
         in a file under /etc/modprobe.d/, then reload the module or reboot); see \
         https://developer.nvidia.com/ERR_NVGPUCTRPERM"
    )]
    CounterPermission { line: String },
    #[error(
        "ncu could not start its profiler on this machine ({line:?}): the GPU's counters are not \
         reachable here (seen in gVisor sandboxes); profile on a host or VM that exposes them"
    )]
    ProfilerUnavailable { line: String },
    #[error("ncu reported an error: {}", lines.join(" | "))]
    Reported { lines: Vec<String> },
    #[error(
        "ncu profiled no kernel: its kernel filter matched none of the kernels launched in the \
         profiled range (launched: {})", available.join(", ")
    )]
    NoKernelsProfiled { available: Vec<String> },
    #[error(
        "ncu output is a --print-summary table, which has no per-launch rows: run ncu without \
         --print-summary"
    )]
    SummaryTable,
    #[error(
        "no ncu csv header in the output: expected a line starting with \"ID\", as printed by \
         ncu --csv with --page raw or --page details"
    )]
    MissingHeader,
    #[error("ncu csv header has no {column:?} column")]
    MissingColumn { column: &'static str },
    #[error(
        "ncu raw-page csv has no units row (a row with an empty \"ID\") right after the header"
    )]
    MissingUnitsRow,
    #[error("ncu csv has a header but no result rows")]
    NoResults,
    #[error("malformed ncu csv")]
    Csv(#[source] csv::Error),
    #[error(
        "value {value:?} of {column:?} in result {id} is not a number as ncu prints it in the C \
         locale (a decimal comma, or dots between thousands?): run ncu with LC_ALL=C"
    )]
    LocaleNumber {
        id: u32,
        column: String,
        value: String,
    },
    #[error("{column:?} value {value:?} in the ncu csv is not {expected}")]
    BadField {
        column: &'static str,
        value: String,
        expected: &'static str,
    },
}

/// Parses what ncu wrote (its `--log-file`, or its stdout with the program's lines among ncu's).
/// ncu's own failure messages are errors even where ncu exited 0.
pub fn parse_ncu_csv(text: &str) -> Result<NcuReport, NcuParseError> {
    let lines: Vec<&str> = text.lines().collect();
    check_reported_failures(&lines)?;
    let Some(header_at) = lines.iter().position(|line| line.starts_with("\"ID\",")) else {
        return Err(
            if lines.iter().any(|line| line.starts_with("\"Process ID\",")) {
                NcuParseError::SummaryTable
            } else {
                NcuParseError::MissingHeader
            },
        );
    };
    // ncu quotes every field and writes one record per line; anything else after the header is
    // the program's output or a ==PROF== line that came late.
    let table: Vec<&str> = lines[header_at..]
        .iter()
        .copied()
        .filter(|line| line.starts_with('"'))
        .collect();
    let table = table.join("\n");
    // Flexible: on the details page metric rows have 16 fields and rule rows 20.
    let mut reader = csv::ReaderBuilder::new()
        .flexible(true)
        .from_reader(table.as_bytes());
    let header = reader.headers().map_err(NcuParseError::Csv)?.clone();
    let records = reader
        .records()
        .collect::<Result<Vec<StringRecord>, csv::Error>>()
        .map_err(NcuParseError::Csv)?;
    let identity = IdentityColumns::find(&header)?;
    let long_layout = match (
        column_index(&header, "Metric Name"),
        column_index(&header, "Metric Unit"),
        column_index(&header, "Metric Value"),
    ) {
        (Some(name), Some(unit), Some(value)) => Some([name, unit, value]),
        _ => None,
    };
    let kernels = match long_layout {
        Some(columns) => parse_details(&identity, columns, &header, &records)?,
        None => parse_raw(&identity, &header, &records)?,
    };
    if kernels.is_empty() {
        return Err(NcuParseError::NoResults);
    }
    Ok(NcuReport { kernels })
}

fn check_reported_failures(lines: &[&str]) -> Result<(), NcuParseError> {
    if let Some(line) = lines.iter().find(|line| line.contains("ERR_NVGPUCTRPERM")) {
        return Err(NcuParseError::CounterPermission {
            line: line.trim().to_string(),
        });
    }
    let errors: Vec<String> = lines
        .iter()
        .filter(|line| line.starts_with("==ERROR=="))
        .map(|line| line.trim_end().to_string())
        .collect();
    if let Some(line) = errors
        .iter()
        .find(|line| line.contains("Failed to initialize the profiler"))
    {
        return Err(NcuParseError::ProfilerUnavailable { line: line.clone() });
    }
    if !errors.is_empty() {
        return Err(NcuParseError::Reported { lines: errors });
    }
    if let Some(warning_at) = lines.iter().position(|line| {
        line.starts_with("==WARNING==") && line.contains("No kernels were profiled")
    }) {
        let available = lines[warning_at..]
            .iter()
            .skip_while(|line| line.trim() != "Available Kernels:")
            .skip(1)
            .map_while(|line| numbered_item(line))
            .map(str::to_string)
            .collect();
        return Err(NcuParseError::NoKernelsProfiled { available });
    }
    Ok(())
}

/// `"2. distribution_elementwise_grid_stride_kernel"` -> the name.
fn numbered_item(line: &str) -> Option<&str> {
    let (number, name) = line.trim().split_once(". ")?;
    (!number.is_empty() && number.bytes().all(|byte| byte.is_ascii_digit())).then_some(name.trim())
}

fn column_index(header: &StringRecord, name: &str) -> Option<usize> {
    header.iter().position(|column| column == name)
}

/// A field of a row that may be shorter than the header.
fn field(record: &StringRecord, index: usize) -> &str {
    record.get(index).unwrap_or("")
}

/// The columns that describe a launch rather than measure it.
const IDENTITY_COLUMNS: &[&str] = &[
    "ID",
    "Process ID",
    "Process Name",
    "Host Name",
    "Kernel Name",
    "Kernel Time",
    "Context",
    "Stream",
    "Block Size",
    "Grid Size",
    "Device",
    "CC",
];

struct IdentityColumns {
    id: usize,
    kernel_name: usize,
    device: Option<usize>,
    block_size: Option<usize>,
    grid_size: Option<usize>,
}

impl IdentityColumns {
    fn find(header: &StringRecord) -> Result<Self, NcuParseError> {
        let required = |column: &'static str| {
            column_index(header, column).ok_or(NcuParseError::MissingColumn { column })
        };
        Ok(Self {
            id: required("ID")?,
            kernel_name: required("Kernel Name")?,
            device: column_index(header, "Device"),
            block_size: column_index(header, "Block Size"),
            grid_size: column_index(header, "Grid Size"),
        })
    }

    fn result(&self, record: &StringRecord) -> Result<NcuKernelResult, NcuParseError> {
        let kernel_name = field(record, self.kernel_name);
        if kernel_name.is_empty() {
            return Err(NcuParseError::BadField {
                column: "Kernel Name",
                value: String::new(),
                expected: "a kernel name",
            });
        }
        let optional = |index: Option<usize>| {
            index
                .map(|index| field(record, index))
                .filter(|value| !value.is_empty())
        };
        Ok(NcuKernelResult {
            id: parse_count("ID", field(record, self.id))?,
            kernel_name: kernel_name.to_string(),
            device: optional(self.device)
                .map(|value| parse_count("Device", value))
                .transpose()?,
            block_size: optional(self.block_size)
                .map(|value| parse_dim3("Block Size", value))
                .transpose()?,
            grid_size: optional(self.grid_size)
                .map(|value| parse_dim3("Grid Size", value))
                .transpose()?,
            metrics: BTreeMap::new(),
            attributes: BTreeMap::new(),
        })
    }
}

fn parse_count(column: &'static str, value: &str) -> Result<u32, NcuParseError> {
    c_locale_number(value)
        .filter(|number| number.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(number))
        .map(|number| number as u32)
        .ok_or_else(|| NcuParseError::BadField {
            column,
            value: value.to_string(),
            expected: "a whole number",
        })
}

/// `"(128, 1, 1)"` -> `[128, 1, 1]`.
fn parse_dim3(column: &'static str, value: &str) -> Result<[u32; 3], NcuParseError> {
    let bad = || NcuParseError::BadField {
        column,
        value: value.to_string(),
        expected: "a triple like \"(128, 1, 1)\"",
    };
    let inner = value
        .trim()
        .strip_prefix('(')
        .and_then(|rest| rest.strip_suffix(')'))
        .ok_or_else(bad)?;
    let parts: Vec<u32> = inner
        .split(',')
        .map(|part| part.trim().parse::<u32>())
        .collect::<Result<_, _>>()
        .map_err(|_| bad())?;
    <[u32; 3]>::try_from(parts).map_err(|_| bad())
}

fn parse_raw(
    identity: &IdentityColumns,
    header: &StringRecord,
    records: &[StringRecord],
) -> Result<Vec<NcuKernelResult>, NcuParseError> {
    let Some((units, rows)) = records.split_first() else {
        return Err(NcuParseError::NoResults);
    };
    if !field(units, identity.id).is_empty() {
        return Err(NcuParseError::MissingUnitsRow);
    }
    let metric_columns: Vec<(usize, &str)> = header
        .iter()
        .enumerate()
        .filter(|(_, name)| !IDENTITY_COLUMNS.contains(name))
        .collect();
    rows.iter()
        .map(|row| {
            let mut result = identity.result(row)?;
            for &(index, name) in &metric_columns {
                store(
                    &mut result,
                    name,
                    field(row, index),
                    field(units, index),
                    Precedence::Measured,
                )?;
            }
            Ok(result)
        })
        .collect()
}

fn parse_details(
    identity: &IdentityColumns,
    [name_column, unit_column, value_column]: [usize; 3],
    header: &StringRecord,
    records: &[StringRecord],
) -> Result<Vec<NcuKernelResult>, NcuParseError> {
    let section_column = column_index(header, "Section Name");
    let mut results: BTreeMap<u32, NcuKernelResult> = BTreeMap::new();
    for row in records {
        let display_name = field(row, name_column);
        // Rule rows (SOLBottleneck and the like) carry advice text, no metric.
        if display_name.is_empty() {
            continue;
        }
        let fresh = identity.result(row)?;
        let result = results.entry(fresh.id).or_insert(fresh);
        let section = section_column.map_or("", |index| field(row, index));
        let (name, precedence) = match speed_of_light_metric(section, display_name) {
            Some(metric) => (metric, Precedence::Derived),
            None => (display_name, Precedence::Measured),
        };
        store(
            result,
            name,
            field(row, value_column),
            field(row, unit_column),
            precedence,
        )?;
    }
    Ok(results.into_values().collect())
}

/// The metric behind each row of the details page's speed-of-light section, so that both pages
/// give the same names (profilers.md 2.3, confirmed by matching values of one report's raw and
/// details pages; see the `import_*` test).
fn speed_of_light_metric(section: &str, display_name: &str) -> Option<&'static str> {
    if !section.starts_with("GPU Speed Of Light") {
        return None;
    }
    Some(match display_name {
        "Duration" => "gpu__time_duration.sum",
        "Compute (SM) Throughput" => "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "Memory Throughput" => "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
        "DRAM Throughput" => "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
        "L1/TEX Cache Throughput" => "l1tex__throughput.avg.pct_of_peak_sustained_active",
        "L2 Cache Throughput" => "lts__throughput.avg.pct_of_peak_sustained_elapsed",
        "Elapsed Cycles" => "gpc__cycles_elapsed.max",
        "SM Active Cycles" => "sm__cycles_active.avg",
        "SM Frequency" => "gpc__cycles_elapsed.avg.per_second",
        "DRAM Frequency" => "dram__cycles_elapsed.avg.per_second",
        _ => return None,
    })
}

/// A metric asked for by name beats the same metric read off a section's display row: the
/// details page can print both (`--section SpeedOfLight --metrics gpu__time_duration.sum`).
#[derive(Clone, Copy, PartialEq)]
enum Precedence {
    Measured,
    Derived,
}

fn store(
    result: &mut NcuKernelResult,
    name: &str,
    raw_value: &str,
    unit: &str,
    precedence: Precedence,
) -> Result<(), NcuParseError> {
    let value = raw_value.trim();
    if value.is_empty() || value.eq_ignore_ascii_case("n/a") {
        return Ok(());
    }
    match c_locale_number(value) {
        Some(number) => {
            let number = number * unit_to_base_factor(unit);
            match precedence {
                Precedence::Measured => {
                    result.metrics.insert(name.to_string(), number);
                }
                Precedence::Derived => {
                    result.metrics.entry(name.to_string()).or_insert(number);
                }
            }
        }
        // Only a value with a unit is a measurement whose digits must read as a C-locale number;
        // unit-less columns hold lists too (numa__cpu_affinity "0-47,96-143", ports "0,1").
        None if !unit.trim().is_empty()
            && value.bytes().all(|byte| b"0123456789.,+-".contains(&byte)) =>
        {
            return Err(NcuParseError::LocaleNumber {
                id: result.id,
                column: name.to_string(),
                value: value.to_string(),
            });
        }
        None => {
            result
                .attributes
                .insert(name.to_string(), value.to_string());
        }
    }
    Ok(())
}

/// A number as ncu prints it under the C locale: optional sign, digits with or without `,`
/// between groups of three, an optional `.` fraction and exponent. `"3,196,519,133.24"` and
/// `"45024"` parse; `"84,69"` (decimal comma) and `"3.196.519.133,24"` do not, and neither do
/// `nan` or `inf`, which f64's own parser would accept.
fn c_locale_number(text: &str) -> Option<f64> {
    let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
    let (mantissa, exponent) = match unsigned.split_once(['e', 'E']) {
        Some((mantissa, exponent)) => (mantissa, Some(exponent)),
        None => (unsigned, None),
    };
    let (integer, fraction) = match mantissa.split_once('.') {
        Some((integer, fraction)) => (integer, Some(fraction)),
        None => (mantissa, None),
    };
    let digits = |part: &str| !part.is_empty() && part.bytes().all(|byte| byte.is_ascii_digit());
    let mut groups = integer.split(',');
    let first = groups.next().unwrap_or("");
    let grouped = integer.contains(',');
    let integer_ok = digits(first)
        && (!grouped || first.len() <= 3)
        && groups.all(|group| group.len() == 3 && digits(group));
    let fraction_ok = fraction.is_none_or(digits);
    let exponent_ok = exponent
        .is_none_or(|exponent| digits(exponent.strip_prefix(['-', '+']).unwrap_or(exponent)));
    if !(integer_ok && fraction_ok && exponent_ok) {
        return None;
    }
    text.replace(',', "").parse().ok()
}

/// The factor from a unit ncu printed to its base unit (ns, byte, hz, byte/second). ncu's
/// `--print-units base` prints base units already; `--import` without it and older releases print
/// scaled or spelled-out ones (us, Mbyte, Ghz, nsecond, cycle/usecond). Other units (%, cycle,
/// register/thread, block, inst) have no scaled forms in this use and stay as they are.
fn unit_to_base_factor(unit: &str) -> f64 {
    match unit.trim().to_ascii_lowercase().as_str() {
        "ns" | "nsecond" | "hz" | "cycle/second" | "byte" | "byte/second" => 1.0,
        "us" | "usecond" => 1e3,
        "ms" | "msecond" => 1e6,
        "s" | "second" => 1e9,
        "khz" | "cycle/msecond" | "kbyte" | "kbyte/second" => 1e3,
        "mhz" | "cycle/usecond" | "mbyte" | "mbyte/second" => 1e6,
        "ghz" | "cycle/nsecond" | "gbyte" | "gbyte/second" => 1e9,
        "tbyte" | "tbyte/second" => 1e12,
        _ => 1.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nvidia::h200_captures;

    fn metric(result: &NcuKernelResult, name: &str) -> f64 {
        *result
            .metrics
            .get(name)
            .unwrap_or_else(|| panic!("result {} ({}) lacks {name}", result.id, result.kernel_name))
    }

    /// (id, kernel, [(metric, value in base units)]) for each result, in order.
    type Expected<'a> = &'a [(u32, &'a str, &'a [(&'a str, f64)])];

    fn check(name: &str, expected: Expected) {
        let report = h200_captures::parsed(name);
        let got: Vec<(u32, &str)> = report
            .kernels
            .iter()
            .map(|k| (k.id, k.kernel_name.as_str()))
            .collect();
        let want: Vec<(u32, &str)> = expected
            .iter()
            .map(|(id, kernel, _)| (*id, *kernel))
            .collect();
        assert_eq!(got, want, "{name}: results");
        for (result, (_, _, metrics)) in report.kernels.iter().zip(expected) {
            for (metric_name, value) in *metrics {
                assert_eq!(
                    metric(result, metric_name),
                    *value,
                    "{name}: result {} {metric_name}",
                    result.id
                );
            }
        }
    }

    #[test]
    fn raw_page_with_thousands_separators() {
        check(
            "raw_metrics.stdout.txt",
            &[
                (
                    0,
                    "add_kernel",
                    &[
                        ("gpu__time_duration.sum", 44800.0),
                        ("dram__bytes_read.sum", 134225920.0),
                        ("dram__bytes_write.sum", 47091968.0),
                        ("dram__bytes_read.avg", 2796373.33),
                        (
                            "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
                            84.21,
                        ),
                        ("sm__throughput.avg.pct_of_peak_sustained_elapsed", 5.79),
                        ("launch__registers_per_thread", 26.0),
                        ("launch__grid_size", 16384.0),
                        ("device__attribute_pci_device_id", 6.0),
                        ("device__attribute_total_memory", 150109880320.0),
                    ],
                ),
                (
                    1,
                    "scale_kernel",
                    &[
                        ("gpu__time_duration.sum", 31872.0),
                        ("dram__bytes_read.sum", 67114496.0),
                        ("sm__throughput.avg.pct_of_peak_sustained_elapsed", 6.74),
                        ("launch__registers_per_thread", 18.0),
                    ],
                ),
            ],
        );
    }

    #[test]
    fn raw_page_with_base_units() {
        check(
            "raw_metrics_base.stdout.txt",
            &[
                (
                    0,
                    "add_kernel",
                    &[
                        ("gpu__time_duration.sum", 44480.0),
                        ("dram__bytes_write.sum", 46882304.0),
                        (
                            "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
                            84.69,
                        ),
                    ],
                ),
                (
                    1,
                    "scale_kernel",
                    &[
                        ("gpu__time_duration.sum", 32000.0),
                        ("dram__bytes_write.avg", 862304.0),
                    ],
                ),
            ],
        );
    }

    #[test]
    fn raw_page_from_the_log_file_holds_only_ncu_output() {
        assert_eq!(
            h200_captures::text("logfile.stdout.txt").trim(),
            "APP-STDOUT: done 2.11.0+cu130 3.6.0 NVIDIA H200"
        );
        check(
            "logfile.ncu_log.csv",
            &[(
                0,
                "add_kernel",
                &[
                    ("gpu__time_duration.sum", 44448.0),
                    ("dram__bytes_read.sum", 134225408.0),
                    ("sm__throughput.avg.pct_of_peak_sustained_elapsed", 5.82),
                ],
            )],
        );
    }

    #[test]
    fn raw_page_identity_columns_and_attributes() {
        let report = h200_captures::parsed("raw_metrics.stdout.txt");
        let add = &report.kernels[0];
        assert_eq!(add.device, Some(0));
        assert_eq!(add.block_size, Some([128, 1, 1]));
        assert_eq!(add.grid_size, Some([16384, 1, 1]));
        assert_eq!(
            add.attributes["device__attribute_display_name"],
            "NVIDIA H200"
        );
        assert_eq!(
            add.attributes["launch__func_cache_config"],
            "CachePreferNone"
        );
        assert!(
            !add.metrics.contains_key("CC"),
            "identity columns are not metrics"
        );
        assert!(!add.metrics.contains_key("Process ID"));
    }

    #[test]
    fn raw_page_of_the_measured_call_under_the_c_locale() {
        check(
            "measured_call_raw.log.csv",
            &[
                (
                    0,
                    "add_kernel",
                    &[
                        ("gpu__time_duration.sum", 45568.0),
                        ("dram__bytes_read.sum", 134225920.0),
                        (
                            "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
                            0.0,
                        ),
                        (
                            "smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct",
                            74.12,
                        ),
                        ("launch__shared_mem_per_block", 1024.0),
                    ],
                ),
                (
                    1,
                    "matmul_kernel",
                    &[
                        ("gpu__time_duration.sum", 213216.0),
                        ("sm__throughput.avg.pct_of_peak_sustained_elapsed", 75.71),
                        (
                            "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
                            79.06,
                        ),
                        ("smsp__warp_issue_stalled_gmma_per_warp_active.pct", 0.41),
                        ("launch__registers_per_thread", 208.0),
                        ("launch__occupancy_limit_registers", 2.0),
                        ("lts__t_sector_hit_rate.pct", 82.91),
                    ],
                ),
            ],
        );
        let report = h200_captures::parsed("measured_call_raw.log.csv");
        assert_eq!(report.kernels[1].grid_size, Some([32, 32, 1]));
        assert_eq!(
            h200_captures::text("measured_call_raw.stdout.txt"),
            "APP-STDOUT: warm\nAPP-STDOUT: done 2.11.0+cu130 3.6.0 NVIDIA H200\n",
            "with --log-file, ncu's stdout carries the program's lines alone"
        );
    }

    #[test]
    fn details_page_with_rules_and_ragged_rows() {
        check(
            "sol_details.stdout.txt",
            &[
                (
                    0,
                    "add_kernel",
                    &[
                        ("gpu__time_duration.sum", 46272.0),
                        ("dram__cycles_elapsed.avg.per_second", 3196519133.24),
                        ("gpc__cycles_elapsed.max", 91473.0),
                        (
                            "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
                            81.52,
                        ),
                        ("sm__throughput.avg.pct_of_peak_sustained_elapsed", 5.59),
                        ("sm__cycles_active.avg", 83424.20),
                    ],
                ),
                (
                    1,
                    "add_kernel",
                    &[
                        ("gpu__time_duration.sum", 45856.0),
                        ("sm__throughput.avg.pct_of_peak_sustained_elapsed", 5.66),
                    ],
                ),
            ],
        );
    }

    #[test]
    fn details_page_with_base_units() {
        check(
            "sol_details_base.stdout.txt",
            &[(
                0,
                "add_kernel",
                &[
                    ("gpu__time_duration.sum", 44480.0),
                    ("lts__throughput.avg.pct_of_peak_sustained_elapsed", 91.93),
                ],
            )],
        );
    }

    #[test]
    fn details_page_of_named_metrics() {
        check(
            "details_metrics.stdout.txt",
            &[(
                0,
                "add_kernel",
                &[
                    ("dram__bytes_read.sum", 134224896.0),
                    ("dram__bytes_write.sum", 47025152.0),
                    ("gpu__time_duration.sum", 45152.0),
                    ("launch__grid_size", 16384.0),
                    ("launch__registers_per_thread", 26.0),
                    ("sm__throughput.avg.pct_of_peak_sustained_elapsed", 5.72),
                ],
            )],
        );
    }

    #[test]
    fn details_page_of_the_measured_call_prefers_named_metrics_over_section_rows() {
        let report = h200_captures::parsed("measured_call_details.log.csv");
        let names: Vec<&str> = report
            .kernels
            .iter()
            .map(|k| k.kernel_name.as_str())
            .collect();
        assert_eq!(names, ["add_kernel", "matmul_kernel"]);
        let raw = h200_captures::parsed("measured_call_raw.log.csv");
        for (details, raw) in report.kernels.iter().zip(&raw.kernels) {
            assert!(metric(details, "gpu__time_duration.sum") > 0.0);
            assert!(
                !details.metrics.contains_key("Duration"),
                "SOL rows are stored under metric names"
            );
            assert_eq!(details.block_size, raw.block_size);
        }
    }

    #[test]
    fn imported_details_page_normalises_scaled_units() {
        check(
            "import_details.stdout.txt",
            &[
                (
                    0,
                    "add_kernel",
                    &[
                        ("dram__bytes_read.sum", 134.22e6),
                        ("gpu__time_duration.sum", 44.61e3),
                        ("dram__cycles_elapsed.avg.per_second", 3.20e9),
                        ("gpc__cycles_elapsed.avg.per_second", 1.97e9),
                    ],
                ),
                (
                    1,
                    "add_kernel",
                    &[
                        ("dram__bytes_write.sum", 47.18e6),
                        ("gpu__time_duration.sum", 46.30e3),
                    ],
                ),
            ],
        );
    }

    /// One report printed as both pages: every value of the details page, display rows included,
    /// is found on the raw page under the same name, equal up to the details page's rounding.
    #[test]
    fn imported_raw_and_details_pages_agree() {
        let raw = h200_captures::parsed("import_raw.stdout.txt");
        let details = h200_captures::parsed("import_details.stdout.txt");
        assert_eq!(raw.kernels.len(), 2);
        assert_eq!(details.kernels.len(), 2);
        for (raw, details) in raw.kernels.iter().zip(&details.kernels) {
            assert_eq!(
                (raw.id, &raw.kernel_name),
                (details.id, &details.kernel_name)
            );
            // 8 named metrics and 10 SOL rows, 3 of which show named metrics again.
            assert_eq!(details.metrics.len(), 15);
            for (name, value) in &details.metrics {
                let raw_value = metric(raw, name);
                assert!(
                    (raw_value - value).abs() <= 0.005 * raw_value.abs(),
                    "result {} {name}: raw {raw_value} details {value}",
                    raw.id
                );
            }
        }
    }

    #[test]
    fn imported_raw_page_keeps_base_units() {
        check(
            "import_raw.stdout.txt",
            &[
                (
                    0,
                    "add_kernel",
                    &[
                        ("gpu__time_duration.sum", 44608.0),
                        ("dram__cycles_elapsed.avg.per_second", 3197991391.68),
                    ],
                ),
                (
                    1,
                    "add_kernel",
                    &[
                        ("gpu__time_duration.sum", 46304.0),
                        ("dram__bytes_write.sum", 47175936.0),
                    ],
                ),
            ],
        );
    }

    #[test]
    fn unknown_metric_is_absent_not_zero() {
        let report = h200_captures::parsed("badmetric.stdout.txt");
        assert_eq!(report.kernels.len(), 1);
        assert!(
            !report.kernels[0]
                .metrics
                .keys()
                .any(|name| name.starts_with("not__"))
        );
        assert!(
            !report.kernels[0]
                .metrics
                .contains_key("gpu__time_duration.sum")
        );
    }

    #[test]
    fn no_kernels_profiled_lists_the_available_ones() {
        match parse_ncu_csv(&h200_captures::text("nomatch.stdout.txt")) {
            Err(NcuParseError::NoKernelsProfiled { available }) => assert_eq!(
                available,
                [
                    "add_kernel",
                    "distribution_elementwise_grid_stride_kernel",
                    "scale_kernel"
                ]
            ),
            other => panic!("expected NoKernelsProfiled, got {other:?}"),
        }
    }

    #[test]
    fn application_failure_is_carried() {
        match parse_ncu_csv(&h200_captures::text("appfail.stdout.txt")) {
            Err(NcuParseError::Reported { lines }) => {
                assert_eq!(
                    lines,
                    ["==ERROR== The application returned an error code (3)."]
                )
            }
            other => panic!("expected Reported, got {other:?}"),
        }
    }

    #[test]
    fn summary_table_is_refused_by_name() {
        assert!(matches!(
            parse_ncu_csv(&h200_captures::text("summary.stdout.txt")),
            Err(NcuParseError::SummaryTable)
        ));
    }

    #[test]
    fn plain_text_details_output_has_no_header() {
        assert!(matches!(
            parse_ncu_csv(&h200_captures::text("nocsv_details.stdout.txt")),
            Err(NcuParseError::MissingHeader)
        ));
    }

    const DETAILS_HEADER: &str = "\"ID\",\"Process ID\",\"Process Name\",\"Host Name\",\"Kernel Name\",\
        \"Context\",\"Stream\",\"Block Size\",\"Grid Size\",\"Device\",\"CC\",\"Section Name\",\
        \"Metric Name\",\"Metric Unit\",\"Metric Value\",\"Rule Name\",\"Rule Type\",\
        \"Rule Description\",\"Estimated Speedup Type\",\"Estimated Speedup\"";

    fn details_row(id: u32, metric_name: &str, unit: &str, value: &str) -> String {
        format!(
            "\"{id}\",\"7\",\"python3.12\",\"127.0.0.1\",\"k\",\"1\",\"7\",\"(128, 1, 1)\",\
             \"(64, 1, 1)\",\"0\",\"9.0\",\"Command line profiler metrics\",\"{metric_name}\",\
             \"{unit}\",\"{value}\","
        )
    }

    fn details(rows: &[String]) -> String {
        format!(
            "==PROF== Connected to process 7 (/usr/bin/python3.12)\n{DETAILS_HEADER}\n{}\n",
            rows.join("\n")
        )
    }

    #[test]
    fn not_available_and_empty_values_are_absent() {
        let text = details(&[
            details_row(
                0,
                "dram__throughput.avg.pct_of_peak_sustained_elapsed",
                "%",
                "n/a",
            ),
            details_row(0, "lts__t_sector_hit_rate.pct", "%", "N/A"),
            details_row(0, "l1tex__t_sector_hit_rate.pct", "%", ""),
            details_row(0, "gpu__time_duration.sum", "ns", "1,024"),
        ]);
        let report = parse_ncu_csv(&text).expect("n/a values are not errors");
        assert_eq!(
            report.kernels[0].metrics,
            BTreeMap::from([("gpu__time_duration.sum".to_string(), 1024.0)])
        );
        assert!(report.kernels[0].attributes.is_empty());
    }

    #[test]
    fn short_and_long_rows_are_read_by_name() {
        let short_row = "\"0\",\"7\",\"python3.12\",\"127.0.0.1\",\"k\",\"1\",\"7\",\"(128, 1, 1)\",\
                         \"(64, 1, 1)\",\"0\",\"9.0\",\"Command line profiler metrics\",\
                         \"dram__bytes_read.sum\",\"Kbyte\",\"2.5\"";
        let rule_row = "\"0\",\"7\",\"python3.12\",\"127.0.0.1\",\"k\",\"1\",\"7\",\"(128, 1, 1)\",\
                        \"(64, 1, 1)\",\"0\",\"9.0\",\"SpeedOfLight\",\"\",\"\",\"\",\"SOLBottleneck\",\
                        \"INF\",\"advice, with a comma\",\"\",\"\",\"extra\"";
        let text = details(&[
            short_row.to_string(),
            rule_row.to_string(),
            details_row(0, "gpu__time_duration.sum", "usecond", "1.5"),
        ]);
        let report = parse_ncu_csv(&text).expect("ragged rows parse");
        assert_eq!(report.kernels.len(), 1);
        assert_eq!(report.kernels[0].metrics["dram__bytes_read.sum"], 2500.0);
        assert_eq!(report.kernels[0].metrics["gpu__time_duration.sum"], 1500.0);
    }

    #[test]
    fn program_output_between_csv_rows_is_skipped() {
        let text = format!(
            "{DETAILS_HEADER}\nAPP-STDOUT: step 1, done\n{}\n==PROF== Disconnected from process 7\n{}\n",
            details_row(0, "gpu__time_duration.sum", "ns", "10"),
            details_row(1, "gpu__time_duration.sum", "ns", "20"),
        );
        let report = parse_ncu_csv(&text).expect("foreign lines are skipped");
        let durations: Vec<f64> = report
            .kernels
            .iter()
            .map(|k| k.metrics["gpu__time_duration.sum"])
            .collect();
        assert_eq!(durations, [10.0, 20.0]);
    }

    #[test]
    fn missing_header_is_an_error() {
        let text = "==PROF== Connected to process 7\nAPP-STDOUT: hi\n==PROF== Disconnected from process 7\n";
        assert!(matches!(
            parse_ncu_csv(text),
            Err(NcuParseError::MissingHeader)
        ));
        assert!(matches!(
            parse_ncu_csv(""),
            Err(NcuParseError::MissingHeader)
        ));
    }

    #[test]
    fn header_without_rows_is_an_error() {
        assert!(matches!(
            parse_ncu_csv(&details(&[])),
            Err(NcuParseError::NoResults)
        ));
    }

    #[test]
    fn header_without_kernel_name_is_an_error() {
        let text =
            "\"ID\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n\"0\",\"x\",\"\",\"1\"\n";
        assert!(matches!(
            parse_ncu_csv(text),
            Err(NcuParseError::MissingColumn {
                column: "Kernel Name"
            })
        ));
    }

    #[test]
    fn raw_page_without_units_row_is_an_error() {
        let text = "\"ID\",\"Kernel Name\",\"gpu__time_duration.sum\"\n\"0\",\"k\",\"10\"\n";
        assert!(matches!(
            parse_ncu_csv(text),
            Err(NcuParseError::MissingUnitsRow)
        ));
    }

    #[test]
    fn raw_page_units_are_applied_per_column() {
        let text = "\"ID\",\"Kernel Name\",\"gpu__time_duration.sum\",\"dram__bytes_read.sum\",\"sm__throughput.avg.pct_of_peak_sustained_elapsed\"\n\
                    \"\",\"\",\"msecond\",\"Gbyte\",\"%\"\n\
                    \"0\",\"k\",\"1.25\",\"2\",\"50\"\n";
        let result = &parse_ncu_csv(text).expect("a raw page").kernels[0];
        assert_eq!(result.metrics["gpu__time_duration.sum"], 1.25e6);
        assert_eq!(result.metrics["dram__bytes_read.sum"], 2e9);
        assert_eq!(
            result.metrics["sm__throughput.avg.pct_of_peak_sustained_elapsed"],
            50.0
        );
        assert_eq!((result.device, result.block_size), (None, None));
    }

    #[test]
    fn locale_trap_is_an_error_not_a_wrong_number() {
        for value in ["84,69", "3.196.519.133,24", "1.234.567"] {
            let text = details(&[details_row(
                0,
                "dram__throughput.avg.pct_of_peak_sustained_elapsed",
                "%",
                value,
            )]);
            match parse_ncu_csv(&text) {
                Err(NcuParseError::LocaleNumber {
                    id: 0,
                    column,
                    value: reported,
                }) => {
                    assert_eq!(column, "dram__throughput.avg.pct_of_peak_sustained_elapsed");
                    assert_eq!(reported, value);
                }
                other => panic!("{value}: expected LocaleNumber, got {other:?}"),
            }
        }
    }

    #[test]
    fn unitless_lists_are_attributes_not_locale_errors() {
        let text = details(&[
            details_row(0, "numa__cpu_affinity", "", "0-47,96-143"),
            details_row(0, "nvlink__destination_ports", "", "0,1"),
        ]);
        let report = parse_ncu_csv(&text).expect("lists parse");
        assert_eq!(
            report.kernels[0].attributes["numa__cpu_affinity"],
            "0-47,96-143"
        );
        assert_eq!(
            report.kernels[0].attributes["nvlink__destination_ports"],
            "0,1"
        );
        assert!(report.kernels[0].metrics.is_empty());
    }

    #[test]
    fn numbers_as_ncu_prints_them() {
        let check = |text: &str, expected: Option<f64>| {
            assert_eq!(c_locale_number(text), expected, "{text:?}")
        };
        check("45024", Some(45024.0));
        check("44,800", Some(44800.0));
        check("3,196,519,133.24", Some(3196519133.24));
        check("-1,000.5", Some(-1000.5));
        check("0", Some(0.0));
        check("1.5e+06", Some(1.5e6));
        check("84,69", None);
        check("1,2345", None);
        check("1234,567", None);
        check(",123", None);
        check("1.", None);
        check("nan", None);
        check("inf", None);
        check("", None);
        check("(128, 1, 1)", None);
    }

    #[test]
    fn units_scale_to_base() {
        let check =
            |unit: &str, factor: f64| assert_eq!(unit_to_base_factor(unit), factor, "{unit}");
        for (unit, factor) in [
            ("ns", 1.0),
            ("nsecond", 1.0),
            ("us", 1e3),
            ("usecond", 1e3),
            ("ms", 1e6),
            ("msecond", 1e6),
            ("hz", 1.0),
            ("Khz", 1e3),
            ("Mhz", 1e6),
            ("Ghz", 1e9),
            ("cycle/second", 1.0),
            ("cycle/usecond", 1e6),
            ("cycle/nsecond", 1e9),
            ("byte", 1.0),
            ("Kbyte", 1e3),
            ("Mbyte", 1e6),
            ("Gbyte", 1e9),
            ("Gbyte/second", 1e9),
            ("%", 1.0),
            ("cycle", 1.0),
            ("register/thread", 1.0),
            ("", 1.0),
        ] {
            check(unit, factor);
        }
    }

    #[test]
    fn counter_permission_says_how_to_fix_it() {
        // The message as NVIDIA's documentation and other projects' logs quote it; ncu also
        // prints "No kernels were profiled." after it, which must not hide it.
        let text = "==PROF== Connected to process 87374 (/usr/bin/python3.12)\n\
                    ==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU \
                    Performance Counters on the target device 0. For instructions on enabling permissions \
                    and to get more information see https://developer.nvidia.com/ERR_NVGPUCTRPERM\n\
                    ==PROF== Disconnected from process 87374\n==WARNING== No kernels were profiled.\n";
        let error = parse_ncu_csv(text).expect_err("no permission");
        assert!(matches!(error, NcuParseError::CounterPermission { .. }));
        let message = error.to_string();
        assert!(message.contains("run kactors as root"), "{message}");
        assert!(
            message.contains("NVreg_RestrictProfilingToAdminUsers=0"),
            "{message}"
        );
    }

    #[test]
    fn profiler_that_cannot_start_is_its_own_error() {
        let text = "==ERROR== Failed to initialize the profiler: LibraryNotLoaded\n";
        assert!(matches!(
            parse_ncu_csv(text),
            Err(NcuParseError::ProfilerUnavailable { .. })
        ));
    }

    #[test]
    fn malformed_identity_fields_are_named() {
        let mut row = details_row(0, "gpu__time_duration.sum", "ns", "1");
        row = row.replace("\"(128, 1, 1)\"", "\"128x1x1\"");
        match parse_ncu_csv(&details(&[row])) {
            Err(NcuParseError::BadField {
                column: "Block Size",
                value,
                ..
            }) => assert_eq!(value, "128x1x1"),
            other => panic!("expected BadField, got {other:?}"),
        }
    }
}
