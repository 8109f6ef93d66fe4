//! The roofline verdict shared by the NVIDIA (Nsight Compute) and ROCm (rocprofv3) profiles:
//! from the memory and compute speed-of-light percentages to a bottleneck and the sentence of
//! evidence that goes into the optimization prompt, and the prompt's sentences on a profile.

use actors::profile::KernelProfile;
pub use actors::profile::{Bottleneck, Roofline};

/// Where a kernel counts as done (at the roofline) and where as starved (underutilized), in
/// percent of peak. Each vendor has its own marks because the two profilers compute their
/// percentages differently: ncu measures speed of light against each unit's sustained peak, the
/// ROCm figures are derived from rocprofv3 counters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RooflineThresholds {
    pub at_roofline_pct: f64,
    pub underutilized_pct: f64,
}

impl RooflineThresholds {
    pub const NVIDIA: Self = Self {
        at_roofline_pct: 95.0,
        underutilized_pct: 60.0,
    };
    pub const ROCM: Self = Self {
        at_roofline_pct: 85.0,
        underutilized_pct: 40.0,
    };
}

/// The roofline's figures and why they mean what they mean.
#[derive(Debug, Clone, PartialEq)]
pub struct RooflineVerdict {
    pub roofline: Roofline,
    /// One sentence for the prompt naming the figures and thresholds that decided the verdict.
    pub evidence: String,
}

/// Judges a kernel from its speed-of-light percentages.
///
/// The bottleneck is `Underutilized` when every figure present is under
/// `thresholds.underutilized_pct` (neither memory nor compute is the limit: latency, too little
/// parallelism or launch overhead is), otherwise `Memory` when the memory figure is at least the
/// compute figure (or there is no compute figure), otherwise `Compute`.
pub fn judge(
    memory_sol_pct: f64,
    compute_sol_pct: Option<f64>,
    thresholds: RooflineThresholds,
) -> RooflineVerdict {
    let efficiency_pct =
        compute_sol_pct.map_or(memory_sol_pct, |compute| compute.max(memory_sol_pct));
    let at_roofline = efficiency_pct >= thresholds.at_roofline_pct;
    let underutilized = efficiency_pct < thresholds.underutilized_pct;
    let bottleneck = if underutilized {
        Bottleneck::Underutilized
    } else if compute_sol_pct.is_none_or(|compute| memory_sol_pct >= compute) {
        Bottleneck::Memory
    } else {
        Bottleneck::Compute
    };
    let figures = match compute_sol_pct {
        Some(compute) => format!("memory SOL {memory_sol_pct:.1}% and compute SOL {compute:.1}%"),
        None => format!("memory SOL {memory_sol_pct:.1}% (no compute SOL measured)"),
    };
    let reason = match bottleneck {
        Bottleneck::Underutilized => format!(
            "{figures}: every figure is under {:.0}%, so neither memory nor compute limits the kernel",
            thresholds.underutilized_pct
        ),
        Bottleneck::Memory => {
            format!("{figures}: memory is the busier side, so the kernel is memory-bound")
        }
        Bottleneck::Compute => {
            format!("{figures}: compute is the busier side, so the kernel is compute-bound")
        }
    };
    let roof = if at_roofline {
        format!(
            "at the roofline ({efficiency_pct:.1}% >= {:.0}%)",
            thresholds.at_roofline_pct
        )
    } else {
        format!(
            "{efficiency_pct:.1}% of peak, under the {:.0}% roofline mark",
            thresholds.at_roofline_pct
        )
    };
    RooflineVerdict {
        roofline: Roofline {
            bottleneck,
            memory_sol_pct,
            compute_sol_pct,
            efficiency_pct,
            at_roofline,
        },
        evidence: format!("{reason}; {roof}."),
    }
}

/// The prompt's sentences on a profile's roofline, from its measured figures only: `profiler`
/// names who measured it, `evidence` is its verdict's.
pub fn roofline_analysis(profiler: &str, profile: &KernelProfile, evidence: &str) -> String {
    let roofline = &profile.roofline;
    let compute = match roofline.compute_sol_pct {
        Some(compute) => format!("compute SOL {compute:.1}%"),
        None => "compute SOL not measured".to_string(),
    };
    let roof = if roofline.at_roofline {
        "at the roofline"
    } else {
        "not at the roofline"
    };
    format!(
        "{profiler} profile of the measured call (kernels {}; {:.4} ms of device time): memory \
         SOL {:.1}%, {compute}, efficiency {:.1}% of peak, {roof}. {evidence}",
        profile.kernels.join(", "),
        profile.duration_ms,
        roofline.memory_sol_pct,
        roofline.efficiency_pct,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const N: RooflineThresholds = RooflineThresholds::NVIDIA;
    const R: RooflineThresholds = RooflineThresholds::ROCM;

    fn check(
        memory: f64,
        compute: Option<f64>,
        thresholds: RooflineThresholds,
        expected: (Bottleneck, f64, bool),
    ) {
        let verdict = judge(memory, compute, thresholds).roofline;
        assert_eq!(
            (
                verdict.bottleneck,
                verdict.efficiency_pct,
                verdict.at_roofline
            ),
            expected,
            "judge({memory}, {compute:?}, {thresholds:?})"
        );
        assert_eq!(verdict.memory_sol_pct, memory);
        assert_eq!(verdict.compute_sol_pct, compute);
    }

    #[test]
    fn memory_bound() {
        check(84.21, Some(5.79), N, (Bottleneck::Memory, 84.21, false));
        check(70.0, None, N, (Bottleneck::Memory, 70.0, false));
        check(50.0, None, R, (Bottleneck::Memory, 50.0, false));
    }

    #[test]
    fn compute_bound() {
        check(30.0, Some(75.85), N, (Bottleneck::Compute, 75.85, false));
        check(10.0, Some(45.0), R, (Bottleneck::Compute, 45.0, false));
    }

    #[test]
    fn equal_figures_count_as_memory() {
        check(70.0, Some(70.0), N, (Bottleneck::Memory, 70.0, false));
    }

    #[test]
    fn underutilized_when_every_present_figure_is_low() {
        check(
            59.9,
            Some(59.9),
            N,
            (Bottleneck::Underutilized, 59.9, false),
        );
        check(
            20.0,
            Some(40.0),
            N,
            (Bottleneck::Underutilized, 40.0, false),
        );
        check(59.0, None, N, (Bottleneck::Underutilized, 59.0, false));
        check(
            39.9,
            Some(10.0),
            R,
            (Bottleneck::Underutilized, 39.9, false),
        );
    }

    #[test]
    fn underutilized_boundary_is_exclusive() {
        check(60.0, Some(1.0), N, (Bottleneck::Memory, 60.0, false));
        check(1.0, Some(60.0), N, (Bottleneck::Compute, 60.0, false));
        check(40.0, None, R, (Bottleneck::Memory, 40.0, false));
        check(39.0, Some(40.0), R, (Bottleneck::Compute, 40.0, false));
    }

    #[test]
    fn at_roofline_boundary_is_inclusive() {
        check(95.0, Some(3.0), N, (Bottleneck::Memory, 95.0, true));
        check(94.99, Some(3.0), N, (Bottleneck::Memory, 94.99, false));
        check(12.0, Some(95.0), N, (Bottleneck::Compute, 95.0, true));
        check(85.0, None, R, (Bottleneck::Memory, 85.0, true));
        check(84.9, Some(80.0), R, (Bottleneck::Memory, 84.9, false));
        check(30.0, Some(99.5), R, (Bottleneck::Compute, 99.5, true));
    }

    #[test]
    fn same_figures_judged_differently_per_vendor() {
        check(
            50.0,
            Some(10.0),
            N,
            (Bottleneck::Underutilized, 50.0, false),
        );
        check(50.0, Some(10.0), R, (Bottleneck::Memory, 50.0, false));
        check(90.0, Some(10.0), N, (Bottleneck::Memory, 90.0, false));
        check(90.0, Some(10.0), R, (Bottleneck::Memory, 90.0, true));
    }

    #[test]
    fn evidence_names_the_deciding_figures() {
        assert_eq!(
            judge(84.21, Some(5.79), N).evidence,
            "memory SOL 84.2% and compute SOL 5.8%: memory is the busier side, so the kernel is \
             memory-bound; 84.2% of peak, under the 95% roofline mark."
        );
        assert_eq!(
            judge(20.0, None, R).evidence,
            "memory SOL 20.0% (no compute SOL measured): every figure is under 40%, so neither \
             memory nor compute limits the kernel; 20.0% of peak, under the 85% roofline mark."
        );
        assert_eq!(
            judge(10.0, Some(96.0), N).evidence,
            "memory SOL 10.0% and compute SOL 96.0%: compute is the busier side, so the kernel is \
             compute-bound; at the roofline (96.0% >= 95%)."
        );
    }

    #[test]
    fn analysis_quotes_the_measured_figures_and_the_evidence() {
        let profile = |kernels: &[&str], duration_ms, roofline| KernelProfile {
            vendor: actors::model::Vendor::Nvidia,
            kernels: kernels.iter().map(|name| name.to_string()).collect(),
            duration_ms,
            roofline,
            counters: Default::default(),
            metrics: Default::default(),
            instruction_mix: None,
        };
        let verdict = judge(82.58, Some(5.68), N);
        let text = roofline_analysis(
            "Nsight Compute",
            &profile(&["add_kernel"], 0.045568, verdict.roofline),
            &verdict.evidence,
        );
        assert_eq!(
            text,
            "Nsight Compute profile of the measured call (kernels add_kernel; 0.0456 ms of device \
             time): memory SOL 82.6%, compute SOL 5.7%, efficiency 82.6% of peak, not at the \
             roofline. memory SOL 82.6% and compute SOL 5.7%: memory is the busier side, so the \
             kernel is memory-bound; 82.6% of peak, under the 95% roofline mark."
        );
        let no_compute = judge(90.0, None, R);
        let text = roofline_analysis(
            "rocprofv3",
            &profile(&["a", "b"], 1.2, no_compute.roofline),
            &no_compute.evidence,
        );
        assert!(text.contains("kernels a, b; 1.2000 ms"), "{text}");
        assert!(
            text.contains("compute SOL not measured, efficiency 90.0% of peak, at the roofline."),
            "{text}"
        );
    }
}
