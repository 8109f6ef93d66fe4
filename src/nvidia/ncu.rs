//! The Nsight Compute command line for one profile: which kernels, which metrics, which output.
//! Parsing the output is `ncu_csv`, turning it into a profile is `profile`.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use thiserror::Error;

/// Where a metric goes in the profile's metrics map (`NvidiaProfile::metrics`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum MetricSection {
    Sol,
    Memory,
    Occupancy,
    Stalls,
}

impl MetricSection {
    pub const fn name(self) -> &'static str {
        match self {
            MetricSection::Sol => "sol",
            MetricSection::Memory => "memory",
            MetricSection::Occupancy => "occupancy",
            MetricSection::Stalls => "stalls",
        }
    }
}

/// How the values of several profiled launches (several kernels under test, or one kernel
/// launched more than once by the measured call) become one figure for the whole call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Combine {
    /// Amounts (time, bytes): the call's amount is the sum.
    Sum,
    /// Rates and percentages of peak: the mean weighted by each launch's duration, which is the
    /// rate over the call's GPU time; a short helper launch must not count as much as the main one.
    DurationWeighted,
    /// Launch configuration (registers, shared memory, occupancy limits) cannot be averaged: the
    /// value of the launch that took the most time, the one worth changing.
    LongestLaunch,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NcuMetric {
    pub name: &'static str,
    pub section: MetricSection,
    pub combine: Combine,
    pub why: &'static str,
}

const fn metric(
    name: &'static str,
    section: MetricSection,
    combine: Combine,
    why: &'static str,
) -> NcuMetric {
    NcuMetric {
        name,
        section,
        combine,
        why,
    }
}

use Combine::{DurationWeighted, LongestLaunch, Sum};
use MetricSection::{Memory, Occupancy, Sol, Stalls};

const STALL_WHY: &str = "share of active warps stalled for this reason per cycle; the largest \
                         stalls tell the prompt what the warps wait on";

/// The metrics collected with `--metrics` besides the SpeedOfLight section, and why. Every name
/// was checked on an H200 with ncu 2025.3.1 (tests/fixtures/ncu-2025.3.1-h200/measured_call_*):
/// ncu drops a name it does not know without a word, so a misspelt one would simply be missing.
pub const NCU_METRICS: &[NcuMetric] = &[
    metric(
        "gpu__time_duration.sum",
        Sol,
        Sum,
        "device time of each profiled launch: the profile's duration and the weight for combining launches",
    ),
    metric(
        "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        Sol,
        DurationWeighted,
        "compute speed of light (SOL row \"Compute (SM) Throughput\"): the roofline's compute figure",
    ),
    metric(
        "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
        Sol,
        DurationWeighted,
        "memory speed of light (SOL row \"Memory Throughput\"): the roofline's memory figure",
    ),
    metric(
        "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
        Sol,
        DurationWeighted,
        "tensor pipe busy share over all MMA kinds, Hopper's wgmma included (Triton's tl.dot read 79% \
         on the H200; gh100 has no sm__pipe_tensor_op_gmma_* metric): whether tensor cores are used",
    ),
    metric(
        "dram__throughput.avg.pct_of_peak_sustained_elapsed",
        Memory,
        DurationWeighted,
        "HBM share of peak: tells DRAM-bound from cache-bound when memory SOL is high",
    ),
    metric(
        "dram__bytes_read.sum",
        Memory,
        Sum,
        "bytes read from HBM: against the minimum the problem needs, shows redundant loads",
    ),
    metric("dram__bytes_write.sum", Memory, Sum, "bytes written to HBM"),
    metric(
        "l1tex__throughput.avg.pct_of_peak_sustained_active",
        Memory,
        DurationWeighted,
        "L1/shared memory busy share (SOL row \"L1/TEX Cache Throughput\")",
    ),
    metric(
        "lts__throughput.avg.pct_of_peak_sustained_elapsed",
        Memory,
        DurationWeighted,
        "L2 busy share (SOL row \"L2 Cache Throughput\")",
    ),
    metric(
        "l1tex__t_sector_hit_rate.pct",
        Memory,
        DurationWeighted,
        "L1 hit rate: reuse captured in L1",
    ),
    metric(
        "lts__t_sector_hit_rate.pct",
        Memory,
        DurationWeighted,
        "L2 hit rate: reuse captured in L2 (tiling and launch order)",
    ),
    metric(
        "sm__warps_active.avg.pct_of_peak_sustained_active",
        Occupancy,
        DurationWeighted,
        "achieved occupancy",
    ),
    metric(
        "sm__maximum_warps_per_active_cycle_pct",
        Occupancy,
        DurationWeighted,
        "theoretical occupancy: the ceiling the launch configuration allows",
    ),
    metric(
        "launch__registers_per_thread",
        Occupancy,
        LongestLaunch,
        "register pressure, the usual occupancy limiter of Triton kernels",
    ),
    metric(
        "launch__shared_mem_per_block",
        Occupancy,
        LongestLaunch,
        "shared memory per block (Triton's pipelining stages live here)",
    ),
    metric(
        "launch__waves_per_multiprocessor",
        Occupancy,
        LongestLaunch,
        "grid size in waves over the SMs: under 1 leaves SMs idle, a fraction costs a tail",
    ),
    metric(
        "launch__occupancy_limit_registers",
        Occupancy,
        LongestLaunch,
        "blocks per SM allowed by registers",
    ),
    metric(
        "launch__occupancy_limit_shared_mem",
        Occupancy,
        LongestLaunch,
        "blocks per SM allowed by shared memory",
    ),
    metric(
        "launch__occupancy_limit_warps",
        Occupancy,
        LongestLaunch,
        "blocks per SM allowed by the warp slots",
    ),
    metric(
        "launch__occupancy_limit_blocks",
        Occupancy,
        LongestLaunch,
        "blocks per SM allowed by the block slots",
    ),
    metric(
        "launch__occupancy_limit_barriers",
        Occupancy,
        LongestLaunch,
        "blocks per SM allowed by the barriers",
    ),
    metric(
        "smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct",
        Stalls,
        DurationWeighted,
        STALL_WHY,
    ),
    metric(
        "smsp__warp_issue_stalled_short_scoreboard_per_warp_active.pct",
        Stalls,
        DurationWeighted,
        STALL_WHY,
    ),
    metric(
        "smsp__warp_issue_stalled_barrier_per_warp_active.pct",
        Stalls,
        DurationWeighted,
        STALL_WHY,
    ),
    metric(
        "smsp__warp_issue_stalled_membar_per_warp_active.pct",
        Stalls,
        DurationWeighted,
        STALL_WHY,
    ),
    metric(
        "smsp__warp_issue_stalled_mio_throttle_per_warp_active.pct",
        Stalls,
        DurationWeighted,
        STALL_WHY,
    ),
    metric(
        "smsp__warp_issue_stalled_lg_throttle_per_warp_active.pct",
        Stalls,
        DurationWeighted,
        STALL_WHY,
    ),
    metric(
        "smsp__warp_issue_stalled_math_pipe_throttle_per_warp_active.pct",
        Stalls,
        DurationWeighted,
        STALL_WHY,
    ),
    metric(
        "smsp__warp_issue_stalled_wait_per_warp_active.pct",
        Stalls,
        DurationWeighted,
        STALL_WHY,
    ),
    metric(
        "smsp__warp_issue_stalled_not_selected_per_warp_active.pct",
        Stalls,
        DurationWeighted,
        STALL_WHY,
    ),
    metric(
        "smsp__warp_issue_stalled_selected_per_warp_active.pct",
        Stalls,
        DurationWeighted,
        STALL_WHY,
    ),
    metric(
        "smsp__warp_issue_stalled_no_instruction_per_warp_active.pct",
        Stalls,
        DurationWeighted,
        STALL_WHY,
    ),
    metric(
        "smsp__warp_issue_stalled_dispatch_stall_per_warp_active.pct",
        Stalls,
        DurationWeighted,
        STALL_WHY,
    ),
    metric(
        "smsp__warp_issue_stalled_branch_resolving_per_warp_active.pct",
        Stalls,
        DurationWeighted,
        STALL_WHY,
    ),
    metric(
        "smsp__warp_issue_stalled_drain_per_warp_active.pct",
        Stalls,
        DurationWeighted,
        STALL_WHY,
    ),
    metric(
        "smsp__warp_issue_stalled_gmma_per_warp_active.pct",
        Stalls,
        DurationWeighted,
        "warps waiting on Hopper's warpgroup MMA (wgmma); a name other chips lack, which ncu then drops",
    ),
];

/// Environment for the ncu process. Under the C locale ncu prints plain numbers ("45024"); under
/// others it adds thousands separators ("45,024", seen with the default locale on the H200) or,
/// in European locales, swaps the decimal separator, which no parser can undo for every value.
pub const NCU_ENV: &[(&str, &str)] = &[("LC_ALL", "C")];

/// The Triton kernels whose launches the profile measures, as the wrapper's launch hook recorded
/// them: never empty, no duplicates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelNames(Vec<String>);

#[derive(Debug, Error, PartialEq, Eq)]
pub enum KernelNamesError {
    #[error(
        "no kernel names for the ncu kernel filter: the measured call launched no Triton kernel"
    )]
    Empty,
    #[error("empty kernel name in the list for the ncu kernel filter")]
    EmptyName,
}

impl KernelNames {
    pub fn new(names: impl IntoIterator<Item = String>) -> Result<Self, KernelNamesError> {
        let mut unique: Vec<String> = Vec::new();
        for name in names {
            if name.is_empty() {
                return Err(KernelNamesError::EmptyName);
            }
            if !unique.contains(&name) {
                unique.push(name);
            }
        }
        if unique.is_empty() {
            return Err(KernelNamesError::Empty);
        }
        Ok(Self(unique))
    }

    pub fn as_slice(&self) -> &[String] {
        &self.0
    }

    /// ncu's `--kernel-name regex:` value matching exactly these names (with
    /// `--kernel-name-base function`, the plain function name Triton gives the kernel).
    pub fn ncu_filter(&self) -> String {
        let alternatives: Vec<String> = self.0.iter().map(|name| regex_escape(name)).collect();
        format!("regex:^({})$", alternatives.join("|"))
    }
}

fn regex_escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for character in text.chars() {
        if "\\.^$|?*+()[]{}".contains(character) {
            escaped.push('\\');
        }
        escaped.push(character);
    }
    escaped
}

/// One ncu process around the profiling wrapper.
#[derive(Debug, Clone, PartialEq)]
pub struct NcuInvocation {
    pub kernel_names: KernelNames,
    /// Where ncu writes its own output (the CSV and the ==PROF== lines); the program's stdout
    /// stays on ncu's stdout, so the two never interleave.
    pub log_file: PathBuf,
    pub python: PathBuf,
    /// The wrapper script and its arguments.
    pub wrapper_args: Vec<OsString>,
}

/// The arguments (after the ncu binary) for one profile of exactly the measured call.
///
/// - `--profile-from-start off`: the wrapper brackets the measured call with
///   `torch.cuda.profiler.start()`/`stop()`, so warm-up, compilation and autotuning launches are
///   never profiled.
/// - the kernel filter leaves out PyTorch's kernels launched in the same region (seen:
///   `torch.mul` between the two Triton kernels of measured_call_raw.log.csv is absent).
/// - `--clock-control none`: the clocks stay as the timing saw them.
/// - `--cache-control all` (ncu's default, stated): caches are flushed between replay passes, so
///   every pass sees the cold L2 the timing also gives each call.
/// - `--page raw` rather than `details`: raw has one row per launch and one column per metric
///   under its ncu name with its unit in a row of its own; details has a row per metric with
///   section metrics under display names ("Duration"), rows of differing length (16 fields for
///   metrics, 20 for rules) and rule text between them. The parser reads both.
/// - `--print-units base`: ns, byte, hz instead of auto-scaled us, Mbyte, Ghz (live `--csv` runs
///   already do this, `--import` does not; stated so it never depends on that).
/// - `--log-file`: seen in the captures: stdout keeps only the program's own lines.
pub fn ncu_command_args(spec: &NcuInvocation) -> Vec<OsString> {
    let metrics: Vec<&str> = NCU_METRICS.iter().map(|metric| metric.name).collect();
    let mut args: Vec<OsString> = [
        "--target-processes",
        "all",
        "--profile-from-start",
        "off",
        "--clock-control",
        "none",
        "--cache-control",
        "all",
        "--kernel-name-base",
        "function",
    ]
    .into_iter()
    .map(OsString::from)
    .collect();
    args.push("--kernel-name".into());
    args.push(spec.kernel_names.ncu_filter().into());
    args.push("--section".into());
    args.push("SpeedOfLight".into());
    args.push("--metrics".into());
    args.push(metrics.join(",").into());
    for arg in [
        "--csv",
        "--page",
        "raw",
        "--print-units",
        "base",
        "--log-file",
    ] {
        args.push(arg.into());
    }
    args.push(spec.log_file.clone().into_os_string());
    args.push(spec.python.clone().into_os_string());
    args.extend(spec.wrapper_args.iter().cloned());
    args
}

/// No ncu where it was looked for.
#[derive(Debug, Error, PartialEq, Eq)]
#[error(
    "ncu not found (looked for {}): install Nsight Compute or set platform_kwargs.ncu_bin_path",
    searched.iter().map(|path| path.display().to_string()).collect::<Vec<_>>().join(", ")
)]
pub struct NcuNotFound {
    pub searched: Vec<PathBuf>,
}

/// Finds the ncu binary: the configured `platform_kwargs.ncu_bin_path` alone when given (a wrong
/// explicit choice is reported, not silently replaced), else `ncu` on PATH, else
/// /usr/local/cuda/bin/ncu. `is_executable` is the filesystem check, passed in so this stays pure.
pub fn resolve_ncu_bin(
    configured: Option<&Path>,
    path_var: Option<&OsStr>,
    is_executable: impl Fn(&Path) -> bool,
) -> Result<PathBuf, NcuNotFound> {
    let candidates: Vec<PathBuf> = match configured {
        Some(path) => vec![path.to_path_buf()],
        None => path_var
            .into_iter()
            .flat_map(std::env::split_paths)
            .map(|dir| dir.join("ncu"))
            .chain([PathBuf::from("/usr/local/cuda/bin/ncu")])
            .collect(),
    };
    match candidates.iter().find(|candidate| is_executable(candidate)) {
        Some(found) => Ok(found.clone()),
        None => Err(NcuNotFound {
            searched: candidates,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nvidia::h200_captures;

    fn names(list: &[&str]) -> KernelNames {
        KernelNames::new(list.iter().map(|name| name.to_string())).expect("a non-empty name list")
    }

    fn invocation(list: &[&str]) -> NcuInvocation {
        NcuInvocation {
            kernel_names: names(list),
            log_file: PathBuf::from("measured_call_raw.log.csv"),
            python: PathBuf::from("python3"),
            wrapper_args: vec!["measured.py".into()],
        }
    }

    fn text_args(spec: &NcuInvocation) -> Vec<String> {
        ncu_command_args(spec)
            .into_iter()
            .map(|arg| arg.into_string().expect("test arguments are UTF-8"))
            .collect()
    }

    #[test]
    fn args_match_the_command_that_made_the_h200_capture() {
        let cmds = h200_captures::text("measured_call.cmds.txt");
        let recorded = cmds
            .lines()
            .find_map(|line| line.strip_prefix("### raw: ncu "))
            .expect("measured_call.cmds.txt records the raw-page command");
        let spec = invocation(&["add_kernel", "matmul_kernel", "scale_kernel"]);
        assert_eq!(recorded.split(' ').collect::<Vec<_>>(), text_args(&spec));
    }

    #[test]
    fn every_metric_is_known_to_ncu_on_the_h200() {
        let capture = h200_captures::text("measured_call_raw.log.csv");
        let header = capture
            .lines()
            .find(|line| line.starts_with("\"ID\","))
            .expect("the capture has a raw-page header");
        for metric in NCU_METRICS {
            assert!(
                header.contains(&format!("\"{}\"", metric.name)),
                "{} not collected",
                metric.name
            );
        }
    }

    #[test]
    fn metric_names_are_unique() {
        for (index, metric) in NCU_METRICS.iter().enumerate() {
            assert!(
                NCU_METRICS[index + 1..]
                    .iter()
                    .all(|other| other.name != metric.name),
                "{} listed twice",
                metric.name
            );
        }
    }

    #[test]
    fn kernel_filter_is_an_anchored_alternation() {
        let check = |list: &[&str], expected: &str| assert_eq!(names(list).ncu_filter(), expected);
        check(&["add_kernel"], "regex:^(add_kernel)$");
        check(
            &["add_kernel", "scale_kernel"],
            "regex:^(add_kernel|scale_kernel)$",
        );
        check(
            &["a.b", "k$1", "x(y)|z"],
            "regex:^(a\\.b|k\\$1|x\\(y\\)\\|z)$",
        );
        check(&["add_kernel", "add_kernel"], "regex:^(add_kernel)$");
    }

    #[test]
    fn kernel_names_must_not_be_empty() {
        assert_eq!(KernelNames::new(Vec::new()), Err(KernelNamesError::Empty));
        assert_eq!(
            KernelNames::new(["add_kernel".to_string(), String::new()]),
            Err(KernelNamesError::EmptyName)
        );
    }

    #[test]
    fn program_and_its_arguments_come_last() {
        let mut spec = invocation(&["k"]);
        spec.python = PathBuf::from("/opt/venv/bin/python3");
        spec.wrapper_args = vec![
            "wrapper.py".into(),
            "--candidate".into(),
            "c 1/kernel.py".into(),
        ];
        spec.log_file = PathBuf::from("/runs/r/candidates/c1/ncu.csv");
        let args = text_args(&spec);
        let log = args
            .iter()
            .position(|arg| arg == "--log-file")
            .expect("--log-file is passed");
        assert_eq!(
            args[log..],
            [
                "--log-file",
                "/runs/r/candidates/c1/ncu.csv",
                "/opt/venv/bin/python3",
                "wrapper.py",
                "--candidate",
                "c 1/kernel.py"
            ]
        );
    }

    #[test]
    fn resolve_prefers_the_configured_binary_alone() {
        let configured = Path::new("/opt/nsight/ncu");
        let found = resolve_ncu_bin(Some(configured), Some(OsStr::new("/usr/bin")), |_| true);
        assert_eq!(found.expect("configured path exists"), configured);
        match resolve_ncu_bin(Some(configured), Some(OsStr::new("/usr/bin")), |path| {
            path != configured
        }) {
            Err(NcuNotFound { searched }) => assert_eq!(searched, [configured]),
            other => panic!("expected BinaryNotFound, got {other:?}"),
        }
    }

    #[test]
    fn resolve_searches_path_then_cuda_bin() {
        let path_var = OsStr::new("/a:/b");
        let check = |present: &str, expected: Option<&str>| {
            let found = resolve_ncu_bin(None, Some(path_var), |path| path == Path::new(present));
            match (found, expected) {
                (Ok(path), Some(expected)) => assert_eq!(path, Path::new(expected)),
                (Err(NcuNotFound { searched }), None) => assert_eq!(
                    searched,
                    [
                        Path::new("/a/ncu"),
                        Path::new("/b/ncu"),
                        Path::new("/usr/local/cuda/bin/ncu")
                    ]
                ),
                (other, _) => panic!("{present}: unexpected {other:?}"),
            }
        };
        check("/b/ncu", Some("/b/ncu"));
        check("/usr/local/cuda/bin/ncu", Some("/usr/local/cuda/bin/ncu"));
        check("/elsewhere/ncu", None);
    }
}
