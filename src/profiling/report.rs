//! What one profile produced, whichever the vendor: the typed profile for the Profiler actor
//! (and through it the prompts and the journal), and the report `kactors profile` prints.

use std::collections::BTreeMap;

use actors::model::{DeviceId, Vendor};
use actors::ports::{ProfileError, ProfileSummary};
use actors::profile::{InstructionMix, KernelProfile, Roofline};
use serde::Serialize;

use super::PassRecord;

/// One profile as `kactors profile --json` prints it (issue 5; README lists its keys): the
/// profile's figures flat, the profiler invocations run, and on failure why and what was
/// measured before it. A failed profile has `ok` false, no roofline and the reason in `error`.
///
/// On NVIDIA `counters` is empty: every ncu value is a metric already derived by ncu, and all of
/// them are in `metrics` under their ncu names; `instruction_mix` has no figures there.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProfileReport {
    pub ok: bool,
    /// The vendor, under the key the command has always printed.
    #[serde(rename = "platform")]
    pub vendor: Vendor,
    pub device: DeviceId,
    pub kernels: Vec<String>,
    pub duration_ms: Option<f64>,
    pub counters: BTreeMap<String, f64>,
    pub metrics: BTreeMap<String, f64>,
    pub roofline: Option<Roofline>,
    pub instruction_mix: InstructionMix,
    pub passes: Vec<PassRecord>,
    pub error: Option<String>,
}

impl ProfileReport {
    /// The report of a measured profile.
    pub fn measured(device: DeviceId, profile: &KernelProfile, passes: Vec<PassRecord>) -> Self {
        ProfileReport {
            ok: true,
            vendor: profile.vendor,
            device,
            kernels: profile.kernels.clone(),
            duration_ms: Some(profile.duration_ms),
            counters: profile.counters.clone(),
            metrics: profile.metrics.clone(),
            roofline: Some(profile.roofline),
            instruction_mix: profile
                .instruction_mix
                .unwrap_or(InstructionMix::UNAVAILABLE),
            passes,
            error: None,
        }
    }

    /// A profile that failed: the kernels and duration known so far, the passes run.
    pub fn failed(
        vendor: Vendor,
        device: DeviceId,
        kernels: Vec<String>,
        duration_ms: Option<f64>,
        passes: Vec<PassRecord>,
        error: String,
    ) -> Self {
        ProfileReport {
            ok: false,
            vendor,
            device,
            kernels,
            duration_ms,
            counters: BTreeMap::new(),
            metrics: BTreeMap::new(),
            roofline: None,
            instruction_mix: InstructionMix::UNAVAILABLE,
            passes,
            error: Some(error),
        }
    }
}

/// What one profile produced: its report always, and for the Profiler actor the summary or why
/// there is none.
#[derive(Clone, Debug, PartialEq)]
pub struct ProfileOutcome {
    pub report: ProfileReport,
    pub verdict: Result<ProfileSummary, ProfileError>,
}

impl ProfileOutcome {
    /// A measured profile on `device`, with the prompt's sentences on it.
    pub fn measured(
        device: DeviceId,
        profile: KernelProfile,
        analysis: String,
        passes: Vec<PassRecord>,
    ) -> Self {
        let report = ProfileReport::measured(device, &profile, passes);
        let summary = ProfileSummary {
            bottleneck: profile.roofline.bottleneck.name().to_string(),
            analysis,
            duration_ms: Some(profile.duration_ms),
            at_roofline: profile.roofline.at_roofline,
            details: Some(profile),
        };
        ProfileOutcome {
            report,
            verdict: Ok(summary),
        }
    }

    pub fn failed(report: ProfileReport, error: ProfileError) -> Self {
        ProfileOutcome {
            report,
            verdict: Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use actors::profile::Bottleneck;

    use super::*;

    fn nvidia_profile() -> KernelProfile {
        KernelProfile {
            vendor: Vendor::Nvidia,
            kernels: vec!["add_kernel".into(), "matmul_kernel".into()],
            duration_ms: 0.258784,
            roofline: Roofline {
                bottleneck: Bottleneck::Memory,
                memory_sol_pct: 79.96,
                compute_sol_pct: Some(63.3),
                efficiency_pct: 79.96,
                at_roofline: false,
            },
            counters: BTreeMap::new(),
            metrics: BTreeMap::from([("dram__bytes_read.sum".into(), 305000448.0)]),
            instruction_mix: None,
        }
    }

    fn ncu_pass() -> PassRecord {
        PassRecord {
            counters: Vec::new(),
            exit: Some(0),
            killed: false,
            seconds: 9.5,
        }
    }

    #[test]
    fn a_measured_profile_is_reported_flat_under_issue_5s_keys() {
        let outcome = ProfileOutcome::measured(
            DeviceId(2),
            nvidia_profile(),
            "Nsight Compute profile of the measured call".into(),
            vec![ncu_pass()],
        );
        assert_eq!(
            serde_json::to_value(&outcome.report).unwrap(),
            serde_json::json!({
                "ok": true,
                "platform": "nvidia",
                "device": 2,
                "kernels": ["add_kernel", "matmul_kernel"],
                "duration_ms": 0.258784,
                "counters": {},
                "metrics": {"dram__bytes_read.sum": 305000448.0},
                "roofline": {
                    "bottleneck": "memory",
                    "memory_sol_pct": 79.96,
                    "compute_sol_pct": 63.3,
                    "efficiency_pct": 79.96,
                    "at_roofline": false
                },
                "instruction_mix": {"valu_pct": null, "vmem_pct": null},
                "passes": [{"counters": [], "exit": 0, "killed": false, "seconds": 9.5}],
                "error": null
            })
        );
        let summary = outcome.verdict.unwrap();
        assert_eq!(summary.bottleneck, "memory");
        assert_eq!(summary.duration_ms, Some(0.258784));
        assert!(!summary.at_roofline);
        assert_eq!(summary.details, Some(nvidia_profile()));
    }

    #[test]
    fn a_failed_profile_keeps_what_it_measured_and_says_why() {
        let report = ProfileReport::failed(
            Vendor::Rocm,
            DeviceId(0),
            vec!["matvec_kernel".into()],
            Some(1.2),
            vec![PassRecord {
                counters: vec!["FETCH_SIZE".to_owned()],
                exit: None,
                killed: true,
                seconds: 30.0,
            }],
            "rocprofv3 pass killed after 30.0 s, past its deadline".into(),
        );
        assert_eq!(
            serde_json::to_value(&report).unwrap(),
            serde_json::json!({
                "ok": false,
                "platform": "rocm",
                "device": 0,
                "kernels": ["matvec_kernel"],
                "duration_ms": 1.2,
                "counters": {},
                "metrics": {},
                "roofline": null,
                "instruction_mix": {"valu_pct": null, "vmem_pct": null},
                "passes": [{"counters": ["FETCH_SIZE"], "exit": null, "killed": true, "seconds": 30.0}],
                "error": "rocprofv3 pass killed after 30.0 s, past its deadline"
            })
        );
    }
}
