//! The roofline of one ROCm profile: memory and compute speed of light from the measured
//! call's counters and device time, judged by the shared [`crate::profiling::judge`].

use std::collections::BTreeMap;

use actors::profile::InstructionMix;

use super::counter_groups::{
    FETCH_SIZE, MFMA_MOPS_BF16, MFMA_MOPS_F16, MFMA_MOPS_F32, MFMA_MOPS_F64, SQ_INSTS_LDS,
    SQ_INSTS_SALU, SQ_INSTS_VALU, SQ_INSTS_VMEM_RD, SQ_INSTS_VMEM_WR, TCC_HIT_SUM, TCC_MISS_SUM,
    WRITE_SIZE,
};
use crate::profiling::{RooflineThresholds, RooflineVerdict, judge};

/// FETCH_SIZE and WRITE_SIZE are in KB of 1024 bytes (counter_defs.yaml divides by 1024).
const BYTES_PER_SIZE_UNIT: f64 = 1024.0;
/// SQ_INSTS_VALU_MFMA_MOPS_* count matrix operations "in the unit of 512" FLOPs (AMD's
/// MI300/MI200 counter reference; rocprof-compute multiplies them by 512 for FLOPs).
const FLOPS_PER_MOPS: f64 = 512.0;

/// The spec row's peaks for the profiled device.
#[derive(Debug, Clone, PartialEq)]
pub struct RocmPeaks {
    pub peak_bandwidth_gbps: f64,
    /// Matrix (MFMA) peak per dtype, keyed by the configuration's dtype names (`bf16`,
    /// `fp16`, `fp32`, `fp64` or their torch spellings).
    pub peak_tflops_by_dtype: BTreeMap<String, f64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RocmRoofline {
    pub verdict: RooflineVerdict,
    pub instruction_mix: Option<InstructionMix>,
}

#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum RooflineInputError {
    #[error("no roofline: counter {counter} was not collected")]
    MissingCounter { counter: &'static str },
    #[error("no roofline: measured duration {duration_ms} ms is not positive")]
    NonPositiveDuration { duration_ms: f64 },
    #[error("no roofline: peak bandwidth {peak_bandwidth_gbps} GB/s is not positive")]
    NonPositiveBandwidth { peak_bandwidth_gbps: f64 },
}

/// memory_sol_pct = (FETCH_SIZE + WRITE_SIZE) bytes / duration / peak bandwidth.
/// compute_sol_pct = the dtype's MFMA FLOPs / duration / the spec's peak for that dtype, only
/// when that MOPS counter was collected and the spec has the peak; otherwise `None`, never
/// invented. The instruction mix is reported beside the verdict and never feeds it.
pub fn rocm_roofline(
    counters: &BTreeMap<String, f64>,
    duration_ms: f64,
    spec: &RocmPeaks,
    dtype: &str,
    thresholds: RooflineThresholds,
) -> Result<RocmRoofline, RooflineInputError> {
    // Written so that NaN is refused too.
    if duration_ms.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
        return Err(RooflineInputError::NonPositiveDuration { duration_ms });
    }
    if spec.peak_bandwidth_gbps.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
        return Err(RooflineInputError::NonPositiveBandwidth {
            peak_bandwidth_gbps: spec.peak_bandwidth_gbps,
        });
    }
    let bytes = memory_bytes(counters)?;
    let seconds = duration_ms / 1e3;
    let memory_sol_pct = bytes / seconds / (spec.peak_bandwidth_gbps * 1e9) * 100.0;
    let compute_sol_pct = mfma_flops(counters, dtype).and_then(|flops| {
        let peak_tflops = peak_tflops(spec, dtype).filter(|peak| *peak > 0.0)?;
        Some(flops / seconds / (peak_tflops * 1e12) * 100.0)
    });
    Ok(RocmRoofline {
        verdict: judge(memory_sol_pct, compute_sol_pct, thresholds),
        instruction_mix: instruction_mix(counters),
    })
}

/// VALU and VMEM (read + write) shares of the instructions kactors counts (VALU, SALU, VMEM read
/// and write, LDS; SMEM and branches are not collected), in percent; `None` unless every counted
/// kind is present and some instruction was issued. A mix, not a speed of light: it stays out
/// of efficiency, at_roofline and best-kernel bookkeeping.
pub fn instruction_mix(counters: &BTreeMap<String, f64>) -> Option<InstructionMix> {
    let counted = [
        SQ_INSTS_VALU,
        SQ_INSTS_SALU,
        SQ_INSTS_VMEM_RD,
        SQ_INSTS_VMEM_WR,
        SQ_INSTS_LDS,
    ];
    let total: Option<f64> = counted.iter().map(|name| counters.get(*name)).sum();
    let total = total.filter(|total| *total > 0.0)?;
    let share = |value: f64| Some(value / total * 100.0);
    Some(InstructionMix {
        valu_pct: share(counters[SQ_INSTS_VALU]),
        vmem_pct: share(counters[SQ_INSTS_VMEM_RD] + counters[SQ_INSTS_VMEM_WR]),
    })
}

/// Derived figures for the profile's `metrics`, each only where its counters were collected:
/// `memory_bytes`, `achieved_bandwidth_gbps`, `l2_hit_pct`, `mfma_tflops` (of the dtype).
pub fn rocm_metrics(
    counters: &BTreeMap<String, f64>,
    duration_ms: f64,
    dtype: &str,
) -> BTreeMap<String, f64> {
    let mut metrics = BTreeMap::new();
    let seconds = (duration_ms > 0.0).then_some(duration_ms / 1e3);
    if let Ok(bytes) = memory_bytes(counters) {
        metrics.insert("memory_bytes".to_owned(), bytes);
        if let Some(seconds) = seconds {
            metrics.insert("achieved_bandwidth_gbps".to_owned(), bytes / seconds / 1e9);
        }
    }
    if let (Some(hits), Some(misses)) = (counters.get(TCC_HIT_SUM), counters.get(TCC_MISS_SUM))
        && hits + misses > 0.0
    {
        metrics.insert("l2_hit_pct".to_owned(), hits / (hits + misses) * 100.0);
    }
    if let (Some(flops), Some(seconds)) = (mfma_flops(counters, dtype), seconds) {
        metrics.insert("mfma_tflops".to_owned(), flops / seconds / 1e12);
    }
    metrics
}

fn memory_bytes(counters: &BTreeMap<String, f64>) -> Result<f64, RooflineInputError> {
    let size = |counter: &'static str| {
        counters
            .get(counter)
            .copied()
            .ok_or(RooflineInputError::MissingCounter { counter })
    };
    Ok((size(FETCH_SIZE)? + size(WRITE_SIZE)?) * BYTES_PER_SIZE_UNIT)
}

fn mfma_flops(counters: &BTreeMap<String, f64>, dtype: &str) -> Option<f64> {
    let mops = counters.get(mfma_mops_counter(dtype)?)?;
    Some(mops * FLOPS_PER_MOPS)
}

/// The spec's peak for `dtype`: the entry of that exact name, else one spelling the same dtype
/// (`bf16` and `bfloat16`).
fn peak_tflops(spec: &RocmPeaks, dtype: &str) -> Option<f64> {
    spec.peak_tflops_by_dtype.get(dtype).copied().or_else(|| {
        let counter = mfma_mops_counter(dtype)?;
        spec.peak_tflops_by_dtype
            .iter()
            .find(|(name, _)| mfma_mops_counter(name) == Some(counter))
            .map(|(_, peak)| *peak)
    })
}

/// The MOPS counter of a dtype; `None` for dtypes kactors collects no MOPS counter for.
fn mfma_mops_counter(dtype: &str) -> Option<&'static str> {
    let dtype = dtype.trim().to_ascii_lowercase();
    match dtype.strip_prefix("torch.").unwrap_or(&dtype) {
        "fp16" | "float16" | "f16" | "half" => Some(MFMA_MOPS_F16),
        "bf16" | "bfloat16" => Some(MFMA_MOPS_BF16),
        "fp32" | "float32" | "f32" | "float" => Some(MFMA_MOPS_F32),
        "fp64" | "float64" | "f64" | "double" => Some(MFMA_MOPS_F64),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profiling::Bottleneck;

    const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

    fn counters(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
        pairs
            .iter()
            .map(|(name, value)| ((*name).to_owned(), *value))
            .collect()
    }

    fn mi300x() -> RocmPeaks {
        RocmPeaks {
            peak_bandwidth_gbps: 5300.0,
            peak_tflops_by_dtype: BTreeMap::from([
                ("bf16".to_owned(), 1307.4),
                ("fp16".to_owned(), 1307.4),
            ]),
        }
    }

    /// Issue 5's worked check: two matvec kernels reading the same 4 GiB on MI300X.
    #[test]
    fn worked_example_matvec_on_mi300x() {
        let four_gib_in_kb = 4.0 * GIB / 1024.0;
        let read_4_gib = counters(&[(FETCH_SIZE, four_gib_in_kb), (WRITE_SIZE, 4.0)]);
        let slow = rocm_roofline(
            &read_4_gib,
            2.4,
            &mi300x(),
            "bf16",
            RooflineThresholds::ROCM,
        )
        .unwrap();
        let fast = rocm_roofline(
            &read_4_gib,
            1.2,
            &mi300x(),
            "bf16",
            RooflineThresholds::ROCM,
        )
        .unwrap();
        assert!((slow.verdict.roofline.memory_sol_pct - 33.8).abs() < 0.05);
        assert!((fast.verdict.roofline.memory_sol_pct - 67.5).abs() < 0.05);
        assert!(fast.verdict.roofline.memory_sol_pct > slow.verdict.roofline.memory_sol_pct);
        assert_eq!(
            slow.verdict.roofline.compute_sol_pct, None,
            "no MOPS counter collected"
        );
        assert!(matches!(
            slow.verdict.roofline.bottleneck,
            Bottleneck::Underutilized
        ));
        assert!(matches!(
            fast.verdict.roofline.bottleneck,
            Bottleneck::Memory
        ));
        assert!(!fast.verdict.roofline.at_roofline);
    }

    #[test]
    fn compute_sol_from_the_dtype_mops_counter() {
        // 1e12 MFMA FLOPs of bf16 in 1 ms = 1000 TFLOP/s against a 1307.4 peak.
        let measured = counters(&[
            (FETCH_SIZE, 1024.0),
            (WRITE_SIZE, 0.0),
            (MFMA_MOPS_BF16, 1e12 / 512.0),
            (MFMA_MOPS_F16, 5.0),
        ]);
        let roofline = rocm_roofline(
            &measured,
            1.0,
            &mi300x(),
            "bfloat16",
            RooflineThresholds::ROCM,
        )
        .unwrap();
        let compute = roofline.verdict.roofline.compute_sol_pct.unwrap();
        assert!((compute - 1000.0 / 1307.4 * 100.0).abs() < 1e-9);
        assert!(matches!(
            roofline.verdict.roofline.bottleneck,
            Bottleneck::Compute
        ));
        assert_eq!(roofline.verdict.roofline.efficiency_pct, compute);

        let no_peak =
            rocm_roofline(&measured, 1.0, &mi300x(), "fp32", RooflineThresholds::ROCM).unwrap();
        assert_eq!(no_peak.verdict.roofline.compute_sol_pct, None);
        let unknown_dtype =
            rocm_roofline(&measured, 1.0, &mi300x(), "int4", RooflineThresholds::ROCM).unwrap();
        assert_eq!(unknown_dtype.verdict.roofline.compute_sol_pct, None);
    }

    #[test]
    fn missing_sizes_or_bad_inputs_give_no_roofline() {
        let only_fetch = counters(&[(FETCH_SIZE, 1.0)]);
        assert_eq!(
            rocm_roofline(
                &only_fetch,
                1.0,
                &mi300x(),
                "bf16",
                RooflineThresholds::ROCM
            )
            .err(),
            Some(RooflineInputError::MissingCounter {
                counter: "WRITE_SIZE"
            })
        );
        let both = counters(&[(FETCH_SIZE, 1.0), (WRITE_SIZE, 1.0)]);
        assert!(matches!(
            rocm_roofline(&both, 0.0, &mi300x(), "bf16", RooflineThresholds::ROCM),
            Err(RooflineInputError::NonPositiveDuration { .. })
        ));
        let mut no_bandwidth = mi300x();
        no_bandwidth.peak_bandwidth_gbps = 0.0;
        assert!(matches!(
            rocm_roofline(&both, 1.0, &no_bandwidth, "bf16", RooflineThresholds::ROCM),
            Err(RooflineInputError::NonPositiveBandwidth { .. })
        ));
    }

    #[test]
    fn instruction_mix_is_separate_and_needs_every_kind() {
        let measured = counters(&[
            (SQ_INSTS_VALU, 600.0),
            (SQ_INSTS_SALU, 100.0),
            (SQ_INSTS_VMEM_RD, 200.0),
            (SQ_INSTS_VMEM_WR, 50.0),
            (SQ_INSTS_LDS, 50.0),
            (FETCH_SIZE, 1.0),
            (WRITE_SIZE, 0.0),
        ]);
        let roofline =
            rocm_roofline(&measured, 1.0, &mi300x(), "bf16", RooflineThresholds::ROCM).unwrap();
        assert_eq!(
            roofline.instruction_mix,
            Some(InstructionMix {
                valu_pct: Some(60.0),
                vmem_pct: Some(25.0)
            })
        );
        assert!(
            roofline.verdict.roofline.efficiency_pct < 1.0,
            "the mix is not a SOL"
        );

        let mut partial = measured.clone();
        partial.remove(SQ_INSTS_LDS);
        assert_eq!(instruction_mix(&partial), None);
    }

    #[test]
    fn metrics_only_where_counters_exist() {
        let measured = counters(&[
            (FETCH_SIZE, 1024.0),
            (WRITE_SIZE, 1024.0),
            (TCC_HIT_SUM, 75.0),
            (TCC_MISS_SUM, 25.0),
        ]);
        let metrics = rocm_metrics(&measured, 1.0, "bf16");
        assert_eq!(
            metrics,
            BTreeMap::from([
                (
                    "achieved_bandwidth_gbps".to_owned(),
                    2.0 * 1024.0 * 1024.0 / 1e-3 / 1e9
                ),
                ("l2_hit_pct".to_owned(), 75.0),
                ("memory_bytes".to_owned(), 2.0 * 1024.0 * 1024.0),
            ])
        );
        assert!(rocm_metrics(&BTreeMap::new(), 1.0, "bf16").is_empty());
    }
}
