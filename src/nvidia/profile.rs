//! From a parsed ncu report to the profile of the measured call: the kernels under test only,
//! combined over their launches, with the roofline verdict and the metrics for the prompt.

use std::collections::BTreeMap;

use actors::model::Vendor;
use actors::profile::KernelProfile;
use thiserror::Error;

use crate::nvidia::ncu::{Combine, NCU_METRICS, NcuNotFound};
use crate::nvidia::ncu_csv::{NcuKernelResult, NcuParseError, NcuReport};
use crate::profiling::{RooflineThresholds, RooflineVerdict, judge};

const DURATION: &str = "gpu__time_duration.sum";
const MEMORY_SOL: &str = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed";
const COMPUTE_SOL: &str = "sm__throughput.avg.pct_of_peak_sustained_elapsed";
const TENSOR_PIPE: &str = "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active";

#[derive(Debug, Clone, PartialEq)]
pub struct NvidiaProfile {
    /// Each profiled launch of a kernel under test, in launch order.
    pub launches: Vec<ProfiledLaunch>,
    /// Device time of all those launches together.
    pub duration_ms: f64,
    pub memory_sol_pct: f64,
    pub compute_sol_pct: Option<f64>,
    /// Tensor pipe busy share, duration-weighted over the launches; absent where not collected.
    pub tensor_pipe_active_pct: Option<f64>,
    /// Whether any launch kept the tensor pipe busy at all; absent where the metric was not
    /// collected.
    pub uses_tensor_cores: Option<bool>,
    pub verdict: RooflineVerdict,
    /// The `NCU_METRICS` values for the whole call by section ("sol", "memory", "occupancy",
    /// "stalls") and ncu name; a metric some launch lacks is left out rather than guessed.
    pub metrics: BTreeMap<&'static str, BTreeMap<String, f64>>,
    pub device: ProfiledDevice,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ProfiledLaunch {
    pub id: u32,
    pub kernel_name: String,
    pub duration_ns: f64,
}

/// The device ncu profiled on, as ncu saw it, so the caller can check it is the pinned one.
#[derive(Debug, Clone, PartialEq)]
pub struct ProfiledDevice {
    /// CUDA ordinal inside the profiled process (so 0 under a one-device CUDA_VISIBLE_DEVICES).
    pub ordinal: Option<u32>,
    /// `device__attribute_display_name`, e.g. "NVIDIA H200".
    pub display_name: Option<String>,
    /// From `device__attribute_pci_domain_id`, `_pci_bus_id` and `_pci_device_id`, written as
    /// nvidia-smi writes `pci.bus_id` ("00000000:00:06.0" on the capture machine; CUDA does not
    /// report the PCI function, which is 0 for GPUs).
    pub pci_bus_id: Option<String>,
}

#[derive(Debug, Error)]
pub enum SummaryError {
    #[error("no kernels under test were named: the wrapper recorded no Triton kernel launch")]
    NoKernelsUnderTest,
    #[error(
        "ncu profiled none of the kernels under test ({}); it profiled: {}",
        expected.join(", "), profiled.join(", ")
    )]
    KernelsNotProfiled {
        expected: Vec<String>,
        profiled: Vec<String>,
    },
    #[error("ncu result {id} ({kernel_name}) has no {metric} value")]
    MissingMetric {
        id: u32,
        kernel_name: String,
        metric: &'static str,
    },
}

/// Why a profile failed, for the run to decide whether to try the next kernel.
#[derive(Debug, Error)]
pub enum NcuFailure {
    #[error(transparent)]
    BinaryNotFound(#[from] NcuNotFound),
    #[error("reading the ncu output")]
    Parse(#[from] NcuParseError),
    #[error("summarizing the ncu output")]
    Summary(#[from] SummaryError),
}

/// A permanent failure (no ncu, no permission to read counters, a profiler that cannot start on
/// this machine) fails every later profile the same way, so profiling stops for the run with
/// its message; the others belong to one kernel (its program failed, its launches were not
/// matched, a metric was missing) and the next kernel is profiled as usual.
pub fn is_permanent(failure: &NcuFailure) -> bool {
    match failure {
        NcuFailure::BinaryNotFound(_) => true,
        NcuFailure::Parse(error) => matches!(
            error,
            NcuParseError::CounterPermission { .. } | NcuParseError::ProfilerUnavailable { .. }
        ),
        NcuFailure::Summary(_) => false,
    }
}

/// The profile of the kernels under test: their launches only (never PyTorch's or other
/// kernels), combined as each metric's `Combine` says. Memory SOL is
/// gpu__compute_memory_throughput, compute SOL sm__throughput; both are duration-weighted means
/// over the launches, which is the share of peak over the call's GPU time, so a short helper
/// launch weighs as little as it costs.
pub fn summarize(
    report: &NcuReport,
    kernels_under_test: &[String],
) -> Result<NvidiaProfile, SummaryError> {
    if kernels_under_test.is_empty() {
        return Err(SummaryError::NoKernelsUnderTest);
    }
    let launches: Vec<&NcuKernelResult> = report
        .kernels
        .iter()
        .filter(|result| kernels_under_test.contains(&result.kernel_name))
        .collect();
    let Some(first) = launches.first() else {
        return Err(SummaryError::KernelsNotProfiled {
            expected: kernels_under_test.to_vec(),
            profiled: report
                .kernels
                .iter()
                .map(|result| result.kernel_name.clone())
                .collect(),
        });
    };
    let durations: Vec<f64> = launches
        .iter()
        .map(|result| required(result, DURATION))
        .collect::<Result<_, _>>()?;
    let memory_sols: Vec<f64> = launches
        .iter()
        .map(|result| required(result, MEMORY_SOL))
        .collect::<Result<_, _>>()?;
    let memory_sol_pct = duration_weighted_mean(&memory_sols, &durations);
    let compute_sol_pct = combine(
        &launches,
        &durations,
        COMPUTE_SOL,
        Combine::DurationWeighted,
    );
    let tensor_pipe_active_pct = combine(
        &launches,
        &durations,
        TENSOR_PIPE,
        Combine::DurationWeighted,
    );
    let mut metrics: BTreeMap<&'static str, BTreeMap<String, f64>> = BTreeMap::new();
    for metric in NCU_METRICS {
        if let Some(value) = combine(&launches, &durations, metric.name, metric.combine) {
            metrics
                .entry(metric.section.name())
                .or_default()
                .insert(metric.name.to_string(), value);
        }
    }
    Ok(NvidiaProfile {
        launches: launches
            .iter()
            .zip(&durations)
            .map(|(result, &duration_ns)| ProfiledLaunch {
                id: result.id,
                kernel_name: result.kernel_name.clone(),
                duration_ns,
            })
            .collect(),
        duration_ms: durations.iter().sum::<f64>() / 1e6,
        memory_sol_pct,
        compute_sol_pct,
        tensor_pipe_active_pct,
        uses_tensor_cores: tensor_pipe_active_pct.map(|pct| pct > 0.0),
        verdict: judge(memory_sol_pct, compute_sol_pct, RooflineThresholds::NVIDIA),
        metrics,
        device: profiled_device(first),
    })
}

impl NvidiaProfile {
    /// The kernels under test, once each, in the order they first launched.
    pub fn launched_kernels(&self) -> Vec<String> {
        let mut kernels: Vec<String> = Vec::new();
        for launch in &self.launches {
            if !kernels.contains(&launch.kernel_name) {
                kernels.push(launch.kernel_name.clone());
            }
        }
        kernels
    }

    /// The profile as the prompts and the journal take it: every ncu metric under its ncu name
    /// (none is a raw counter), and no instruction mix, which ncu's collected metrics do not give.
    pub fn kernel_profile(&self) -> KernelProfile {
        KernelProfile {
            vendor: Vendor::Nvidia,
            kernels: self.launched_kernels(),
            duration_ms: self.duration_ms,
            roofline: self.verdict.roofline,
            counters: BTreeMap::new(),
            metrics: self
                .metrics
                .values()
                .flat_map(|section| section.iter().map(|(name, value)| (name.clone(), *value)))
                .collect(),
            instruction_mix: None,
        }
    }
}

fn required(result: &NcuKernelResult, metric: &'static str) -> Result<f64, SummaryError> {
    result
        .metrics
        .get(metric)
        .copied()
        .ok_or_else(|| SummaryError::MissingMetric {
            id: result.id,
            kernel_name: result.kernel_name.clone(),
            metric,
        })
}

/// One figure for the call from each launch's value; `None` when any launch lacks it.
fn combine(
    launches: &[&NcuKernelResult],
    durations: &[f64],
    metric: &str,
    how: Combine,
) -> Option<f64> {
    let values: Vec<f64> = launches
        .iter()
        .map(|result| result.metrics.get(metric).copied())
        .collect::<Option<_>>()?;
    Some(match how {
        Combine::Sum => values.iter().sum(),
        Combine::DurationWeighted => duration_weighted_mean(&values, durations),
        Combine::LongestLaunch => {
            let longest = durations
                .iter()
                .enumerate()
                .max_by(|(_, a), (_, b)| a.total_cmp(b))
                .map_or(0, |(index, _)| index);
            values[longest]
        }
    })
}

/// Falls back to the plain mean where ncu gave every launch a zero duration, so the figure stays
/// a percentage rather than NaN.
fn duration_weighted_mean(values: &[f64], durations: &[f64]) -> f64 {
    let total_duration: f64 = durations.iter().sum();
    if total_duration > 0.0 {
        values
            .iter()
            .zip(durations)
            .map(|(value, duration)| value * duration)
            .sum::<f64>()
            / total_duration
    } else {
        values.iter().sum::<f64>() / values.len() as f64
    }
}

fn profiled_device(result: &NcuKernelResult) -> ProfiledDevice {
    let attribute = |name: &str| result.metrics.get(name).map(|value| *value as u32);
    let pci_bus_id = match (
        attribute("device__attribute_pci_domain_id"),
        attribute("device__attribute_pci_bus_id"),
        attribute("device__attribute_pci_device_id"),
    ) {
        (Some(domain), Some(bus), Some(device)) => {
            Some(format!("{domain:08X}:{bus:02X}:{device:02X}.0"))
        }
        _ => None,
    };
    ProfiledDevice {
        ordinal: result.device,
        display_name: result
            .attributes
            .get("device__attribute_display_name")
            .cloned(),
        pci_bus_id,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nvidia::h200_captures;
    use crate::profiling::Bottleneck;

    fn kernels(names: &[&str]) -> Vec<String> {
        names.iter().map(|name| name.to_string()).collect()
    }

    fn summarize_fixture(name: &str, under_test: &[&str]) -> NvidiaProfile {
        summarize(&h200_captures::parsed(name), &kernels(under_test))
            .unwrap_or_else(|error| panic!("{name}: {error}"))
    }

    fn assert_close(got: f64, want: f64, what: &str) {
        assert!(
            (got - want).abs() < 1e-9 * want.abs().max(1.0),
            "{what}: got {got}, want {want}"
        );
    }

    #[test]
    fn one_memory_bound_kernel_from_the_raw_page() {
        let profile = summarize_fixture("raw_metrics.stdout.txt", &["add_kernel"]);
        assert_eq!(
            profile.launches,
            [ProfiledLaunch {
                id: 0,
                kernel_name: "add_kernel".into(),
                duration_ns: 44800.0
            }]
        );
        assert_close(profile.duration_ms, 0.0448, "duration");
        assert_eq!(
            (profile.memory_sol_pct, profile.compute_sol_pct),
            (84.21, Some(5.79))
        );
        assert_eq!(profile.verdict.roofline.bottleneck, Bottleneck::Memory);
        assert!(!profile.verdict.roofline.at_roofline);
        assert_eq!(
            profile.tensor_pipe_active_pct, None,
            "not collected in this capture"
        );
        assert_eq!(profile.uses_tensor_cores, None);
        assert_eq!(
            profile.device,
            ProfiledDevice {
                ordinal: Some(0),
                display_name: Some("NVIDIA H200".into()),
                pci_bus_id: Some("00000000:00:06.0".into()),
            }
        );
    }

    #[test]
    fn other_kernels_in_the_report_are_left_out() {
        let profile = summarize_fixture("raw_metrics.stdout.txt", &["scale_kernel"]);
        assert_eq!(profile.launches.len(), 1);
        assert_eq!(profile.launches[0].kernel_name, "scale_kernel");
        assert_eq!(profile.memory_sol_pct, 70.90);
        assert_eq!(
            profile.metrics["memory"]["dram__bytes_read.sum"],
            67114496.0
        );
    }

    #[test]
    fn the_vendor_neutral_profile_has_every_metric_once_under_its_ncu_name() {
        let profile = summarize_fixture(
            "measured_call_raw.log.csv",
            &["add_kernel", "matmul_kernel"],
        );
        let measured = profile.kernel_profile();
        assert_eq!(measured.vendor, Vendor::Nvidia);
        assert_eq!(measured.kernels, ["add_kernel", "matmul_kernel"]);
        assert_eq!(measured.duration_ms, profile.duration_ms);
        assert_eq!(measured.roofline, profile.verdict.roofline);
        assert!(
            measured.counters.is_empty(),
            "ncu gives metrics, not counters"
        );
        assert_eq!(measured.instruction_mix, None);
        let by_section: usize = profile.metrics.values().map(BTreeMap::len).sum();
        assert_eq!(measured.metrics.len(), by_section);
        assert_eq!(
            measured.metrics["launch__registers_per_thread"],
            profile.metrics["occupancy"]["launch__registers_per_thread"]
        );
    }

    #[test]
    fn several_kernels_combine_by_duration() {
        let profile = summarize_fixture(
            "measured_call_raw.log.csv",
            &["add_kernel", "matmul_kernel"],
        );
        let (add, matmul) = (45568.0, 213216.0);
        assert_close(profile.duration_ms, (add + matmul) / 1e6, "duration");
        assert_close(
            profile.memory_sol_pct,
            (82.58 * add + 79.40 * matmul) / (add + matmul),
            "memory SOL",
        );
        assert_close(
            profile.compute_sol_pct.expect("sm__throughput collected"),
            (5.68 * add + 75.71 * matmul) / (add + matmul),
            "compute SOL",
        );
        assert_close(
            profile
                .tensor_pipe_active_pct
                .expect("tensor metric collected"),
            (0.0 * add + 79.06 * matmul) / (add + matmul),
            "tensor pipe",
        );
        assert_eq!(profile.uses_tensor_cores, Some(true));
        assert_eq!(profile.verdict.roofline.bottleneck, Bottleneck::Memory);
        let sol = &profile.metrics["sol"];
        assert_eq!(sol["gpu__time_duration.sum"], add + matmul);
        let memory = &profile.metrics["memory"];
        assert_eq!(memory["dram__bytes_read.sum"], 134225920.0 + 170774528.0);
        let occupancy = &profile.metrics["occupancy"];
        assert_eq!(
            occupancy["launch__registers_per_thread"], 208.0,
            "the longest launch's configuration"
        );
        assert_eq!(occupancy["launch__occupancy_limit_registers"], 2.0);
        let stalls = &profile.metrics["stalls"];
        assert_close(
            stalls["smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct"],
            (74.12 * add + 14.49 * matmul) / (add + matmul),
            "long scoreboard",
        );
    }

    #[test]
    fn the_matmul_alone_uses_tensor_cores() {
        let profile = summarize_fixture("measured_call_raw.log.csv", &["matmul_kernel"]);
        assert_eq!(
            (profile.memory_sol_pct, profile.compute_sol_pct),
            (79.40, Some(75.71))
        );
        assert_eq!(profile.verdict.roofline.bottleneck, Bottleneck::Memory);
        assert_eq!(profile.tensor_pipe_active_pct, Some(79.06));
        assert_eq!(profile.uses_tensor_cores, Some(true));
        let add = summarize_fixture("measured_call_raw.log.csv", &["add_kernel"]);
        assert_eq!(add.uses_tensor_cores, Some(false));
    }

    #[test]
    fn every_collected_metric_reaches_its_section() {
        let profile = summarize_fixture(
            "measured_call_raw.log.csv",
            &["add_kernel", "matmul_kernel"],
        );
        for metric in NCU_METRICS {
            assert!(
                profile.metrics[metric.section.name()].contains_key(metric.name),
                "{}",
                metric.name
            );
        }
    }

    #[test]
    fn details_page_gives_the_same_verdict() {
        let profile = summarize_fixture("sol_details.stdout.txt", &["add_kernel"]);
        let (first, second) = (46272.0, 45856.0);
        assert_eq!(profile.launches.len(), 2, "one kernel launched twice");
        assert_close(profile.duration_ms, (first + second) / 1e6, "duration");
        assert_close(
            profile.memory_sol_pct,
            (81.52 * first + 82.34 * second) / (first + second),
            "memory SOL",
        );
        assert_eq!(profile.verdict.roofline.bottleneck, Bottleneck::Memory);
        assert_eq!(
            profile.device.pci_bus_id, None,
            "the details page has no device attributes"
        );
        assert_eq!(profile.device.ordinal, Some(0));
    }

    #[test]
    fn no_kernel_under_test_profiled() {
        match summarize(
            &h200_captures::parsed("raw_metrics.stdout.txt"),
            &kernels(&["matmul_kernel"]),
        ) {
            Err(SummaryError::KernelsNotProfiled { expected, profiled }) => {
                assert_eq!(expected, ["matmul_kernel"]);
                assert_eq!(profiled, ["add_kernel", "scale_kernel"]);
            }
            other => panic!("expected KernelsNotProfiled, got {other:?}"),
        }
        assert!(matches!(
            summarize(&h200_captures::parsed("raw_metrics.stdout.txt"), &[]),
            Err(SummaryError::NoKernelsUnderTest)
        ));
    }

    #[test]
    fn missing_memory_sol_is_an_error_not_zero() {
        match summarize(
            &h200_captures::parsed("badmetric.stdout.txt"),
            &kernels(&["add_kernel"]),
        ) {
            Err(SummaryError::MissingMetric { id: 0, metric, .. }) => assert_eq!(metric, DURATION),
            other => panic!("expected MissingMetric, got {other:?}"),
        }
        let mut report = h200_captures::parsed("raw_metrics.stdout.txt");
        report.kernels[0].metrics.remove(MEMORY_SOL);
        match summarize(&report, &kernels(&["add_kernel"])) {
            Err(SummaryError::MissingMetric { metric, .. }) => assert_eq!(metric, MEMORY_SOL),
            other => panic!("expected MissingMetric, got {other:?}"),
        }
    }

    #[test]
    fn a_metric_one_launch_lacks_is_left_out() {
        let mut report = h200_captures::parsed("measured_call_raw.log.csv");
        report.kernels[0].metrics.remove(COMPUTE_SOL);
        report.kernels[1]
            .metrics
            .remove("lts__t_sector_hit_rate.pct");
        let profile =
            summarize(&report, &kernels(&["add_kernel", "matmul_kernel"])).expect("a profile");
        assert_eq!(profile.compute_sol_pct, None);
        assert!(!profile.metrics["sol"].contains_key(COMPUTE_SOL));
        assert!(!profile.metrics["memory"].contains_key("lts__t_sector_hit_rate.pct"));
        assert!(
            profile.verdict.evidence.contains("no compute SOL"),
            "{}",
            profile.verdict.evidence
        );
    }

    #[test]
    fn permanent_failures_stop_profiling() {
        let check = |failure: NcuFailure, permanent: bool| {
            assert_eq!(is_permanent(&failure), permanent, "{failure:?}")
        };
        check(
            NcuNotFound {
                searched: vec!["/usr/local/cuda/bin/ncu".into()],
            }
            .into(),
            true,
        );
        check(
            NcuParseError::CounterPermission {
                line: "ERR_NVGPUCTRPERM".into(),
            }
            .into(),
            true,
        );
        check(
            NcuParseError::ProfilerUnavailable {
                line: "LibraryNotLoaded".into(),
            }
            .into(),
            true,
        );
        check(
            NcuParseError::NoKernelsProfiled { available: vec![] }.into(),
            false,
        );
        check(
            NcuParseError::Reported {
                lines: vec!["==ERROR== The application returned an error code (3).".into()],
            }
            .into(),
            false,
        );
        check(NcuParseError::MissingHeader.into(), false);
        check(SummaryError::NoKernelsUnderTest.into(), false);
    }

    #[test]
    fn binary_not_found_names_the_places_searched() {
        let failure = NcuFailure::from(NcuNotFound {
            searched: vec!["/a/ncu".into(), "/usr/local/cuda/bin/ncu".into()],
        });
        assert_eq!(
            failure.to_string(),
            "ncu not found (looked for /a/ncu, /usr/local/cuda/bin/ncu): install Nsight Compute or \
             set platform_kwargs.ncu_bin_path"
        );
    }
}
