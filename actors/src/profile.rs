//! A kernel's profile, whichever vendor's profiler measured it: what the prompts state and what
//! the journal keeps (`profile_recorded`'s `details`, docs/journal.md). Plain data: the
//! vendors' profilers in the `kactors` package fill it in, the prompts read it field by field.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

use crate::model::Vendor;

/// What limits a kernel, as its roofline verdict says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bottleneck {
    Memory,
    Compute,
    /// Neither memory nor compute: latency, too little parallelism or launch overhead.
    Underutilized,
}

impl Bottleneck {
    /// The word the journal, the prompts and `kactors profile` use.
    pub fn name(self) -> &'static str {
        match self {
            Bottleneck::Memory => "memory",
            Bottleneck::Compute => "compute",
            Bottleneck::Underutilized => "underutilized",
        }
    }
}

/// The roofline verdict's figures, in percent of the device's peak.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Roofline {
    pub bottleneck: Bottleneck,
    pub memory_sol_pct: f64,
    /// Absent where the profiler gave no compute figure (some rocprofv3 counter sets).
    pub compute_sol_pct: Option<f64>,
    /// The larger of the speed-of-light figures present: how close the kernel is to the roof.
    pub efficiency_pct: f64,
    /// The efficiency is at or above the vendor's roofline mark.
    pub at_roofline: bool,
}

/// Shares of the issued instructions, each absent where its counters were not collected. A
/// mix, not a speed of light: it never feeds the roofline verdict.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct InstructionMix {
    pub valu_pct: Option<f64>,
    pub vmem_pct: Option<f64>,
}

impl InstructionMix {
    pub const UNAVAILABLE: Self = Self {
        valu_pct: None,
        vmem_pct: None,
    };

    pub fn is_available(&self) -> bool {
        self.valu_pct.is_some() || self.vmem_pct.is_some()
    }
}

/// One measured profile of a kernel: the Triton kernels its measured call launched, their
/// device time, the roofline verdict and every figure by the name its profiler gives it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelProfile {
    /// Whose profiler measured it. Journals written before this type called it `platform`.
    #[serde(alias = "platform")]
    pub vendor: Vendor,
    /// The kernels under test, in launch order.
    pub kernels: Vec<String>,
    /// Device time of the measured call: all its launches of the kernels under test.
    pub duration_ms: f64,
    pub roofline: Roofline,
    /// Hardware counters under the profiler's names (rocprofv3's); empty where the profiler
    /// gives derived metrics only (Nsight Compute).
    pub counters: BTreeMap<String, f64>,
    /// Metrics by name: Nsight Compute's under their ncu names; on ROCm those kactors derives
    /// from the counters.
    pub metrics: BTreeMap<String, f64>,
    /// Where the vendor's counters give one (ROCm).
    #[serde(default, deserialize_with = "mix_with_a_share")]
    pub instruction_mix: Option<InstructionMix>,
}

/// The bytes the measured call read from the device's memory: Nsight Compute's
/// `dram__bytes_read.sum`, or rocprofv3's FETCH_SIZE (in KiB); None when the profile has
/// neither.
pub fn dram_read_bytes(profile: &KernelProfile) -> Option<f64> {
    match profile.vendor {
        Vendor::Nvidia => profile.metrics.get("dram__bytes_read.sum").copied(),
        Vendor::Rocm => profile.counters.get("FETCH_SIZE").map(|kib| kib * 1024.0),
    }
}

/// A mix without any share, which is how version 1 journals wrote "none", reads as none.
fn mix_with_a_share<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<InstructionMix>, D::Error> {
    Ok(Option::<InstructionMix>::deserialize(deserializer)?.filter(InstructionMix::is_available))
}

#[cfg(test)]
mod tests {
    //! The profile as the journal keeps it (`profile_recorded`'s `details`): written and read
    //! back whole, and read from older journals, whose details may have any shape.

    use std::time::SystemTime;

    use super::*;
    use crate::journal::{Event, JournalRecord};
    use crate::model::{CandidateId, DeviceId};

    fn rocm_profile() -> KernelProfile {
        KernelProfile {
            vendor: Vendor::Rocm,
            kernels: vec!["matmul_kernel".into()],
            duration_ms: 0.42,
            roofline: Roofline {
                bottleneck: Bottleneck::Memory,
                memory_sol_pct: 67.5,
                compute_sol_pct: None,
                efficiency_pct: 67.5,
                at_roofline: false,
            },
            counters: BTreeMap::from([("FETCH_SIZE".into(), 917504.0)]),
            metrics: BTreeMap::from([("l2_hit_pct".into(), 79.7)]),
            instruction_mix: Some(InstructionMix {
                valu_pct: Some(60.0),
                vmem_pct: None,
            }),
        }
    }

    fn recorded(details: Option<KernelProfile>) -> Event {
        Event::ProfileRecorded {
            candidate: CandidateId(3),
            device: DeviceId(1),
            bottleneck: "memory".into(),
            duration_ms: Some(0.42),
            analysis: "rocprofv3 profile of the measured call".into(),
            at_roofline: false,
            details,
        }
    }

    /// The `details` of a `profile_recorded` line read back.
    fn details_of(line: &str) -> Option<KernelProfile> {
        match JournalRecord::from_line(line).map(|record| record.event) {
            Ok(Event::ProfileRecorded { details, .. }) => details,
            other => panic!("not a profile_recorded record: {other:?}"),
        }
    }

    #[test]
    fn a_bottleneck_is_written_as_its_word() {
        for bottleneck in [
            Bottleneck::Memory,
            Bottleneck::Compute,
            Bottleneck::Underutilized,
        ] {
            assert_eq!(
                serde_json::to_value(bottleneck).unwrap(),
                serde_json::json!(bottleneck.name())
            );
        }
        assert_eq!(Bottleneck::Underutilized.name(), "underutilized");
    }

    #[test]
    fn a_profile_is_journaled_as_a_documented_object_and_read_back_whole() {
        let record = JournalRecord {
            t: SystemTime::UNIX_EPOCH,
            event: recorded(Some(rocm_profile())),
        };
        let json = record.to_json();
        assert_eq!(
            json["details"],
            serde_json::json!({
                "vendor": "rocm",
                "kernels": ["matmul_kernel"],
                "duration_ms": 0.42,
                "roofline": {
                    "bottleneck": "memory",
                    "memory_sol_pct": 67.5,
                    "compute_sol_pct": null,
                    "efficiency_pct": 67.5,
                    "at_roofline": false
                },
                "counters": {"FETCH_SIZE": 917504.0},
                "metrics": {"l2_hit_pct": 79.7},
                "instruction_mix": {"valu_pct": 60.0, "vmem_pct": null}
            })
        );
        let read = JournalRecord::from_line(&json.to_string()).unwrap();
        assert_eq!(read, record);
    }

    /// The profiles of a real version 1 journal (an H200 run of the matvec example), whose
    /// details are `kactors profile --json`'s report.
    #[test]
    fn a_version_1_journals_reports_read_as_profiles() {
        let journal = include_str!("../../tests/fixtures/journal-v1/h200-matvec.jsonl");
        let mut read = 0;
        for line in journal
            .lines()
            .filter(|line| line.contains("\"profile_recorded\""))
        {
            let Ok(Event::ProfileRecorded {
                bottleneck,
                duration_ms,
                details,
                ..
            }) = JournalRecord::from_line(line).map(|record| record.event)
            else {
                panic!("not a profile_recorded record: {line}")
            };
            let profile = details.expect("a version 1 report is a profile");
            assert_eq!(profile.vendor, Vendor::Nvidia);
            assert_eq!(profile.kernels.len(), 1);
            assert_eq!(Some(profile.duration_ms), duration_ms);
            assert_eq!(profile.roofline.bottleneck.name(), bottleneck);
            assert!(profile.counters.is_empty());
            let nanoseconds = profile.metrics["gpu__time_duration.sum"];
            assert!((nanoseconds - profile.duration_ms * 1e6).abs() < 1e-3);
            assert_eq!(profile.instruction_mix, None, "written as a mix of nulls");
            read += 1;
        }
        assert_eq!(read, 3);
    }

    #[test]
    fn details_of_another_shape_read_as_absent_and_the_record_stays() {
        for details in [
            "null",
            "[1, 2]",
            r#""a profile""#,
            r#"{"metrics": [1, 2], "counters": "none"}"#,
            r#"{"vendor": "intel", "kernels": [], "duration_ms": 1.0}"#,
        ] {
            let line = format!(
                r#"{{"v":1,"t":"2026-01-05T10:00:00.000Z","type":"profile_recorded","candidate":3,"device":1,"bottleneck":"memory","duration_ms":0.42,"details":{details}}}"#
            );
            let record = JournalRecord::from_line(&line)
                .unwrap_or_else(|error| panic!("details {details}: {error}"));
            assert_eq!(
                record.event,
                Event::ProfileRecorded {
                    candidate: CandidateId(3),
                    device: DeviceId(1),
                    bottleneck: "memory".into(),
                    duration_ms: Some(0.42),
                    analysis: String::new(),
                    at_roofline: false,
                    details: None,
                },
                "details {details}"
            );
        }
        let without = r#"{"v":1,"t":"2026-01-05T10:00:00.000Z","type":"profile_recorded","candidate":3,"device":1,"bottleneck":"memory","duration_ms":0.42}"#;
        assert_eq!(details_of(without), None, "no details at all");
    }
}
