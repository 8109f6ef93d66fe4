//! The speed of light (issue 18): the least time any correct kernel can take for a problem on a
//! device. A kernel must read its inputs once and write its outputs once through the device's
//! memory (the evaluator flushes the L2 before every sample), so no median below
//! `bytes / peak bandwidth` is physically possible; such a time comes from a cheat (a memo of
//! earlier answers, work left running after the call) and is rejected. Every kernel's time is
//! reported as a fraction of that floor, as SOL-ExecBench scores. Pure: no clock, no I/O.

use serde::{Deserialize, Serialize};

/// How far under the floor a median may fall before it is rejected: the datasheet's peak is
/// already above what a device reaches (an H200 copies at about 4.3 of its 4.8 TB/s), so a
/// small margin only absorbs rounding in the figures, never an honest kernel.
pub const FLOOR_MARGIN: f64 = 0.05;

/// The sizes the evaluator reports for one draw of the problem (its `ready` message).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProblemBytes {
    pub inputs_bytes: u64,
    pub outputs_bytes: u64,
    /// The device's L2: outputs that fit in it may still be there, unwritten to memory, when
    /// the kernel ends, so only the part beyond it counts.
    pub l2_bytes: u64,
    /// problem.py's `MIN_BYTES`, for a problem whose output does not depend on all of its
    /// inputs: it replaces the inputs and outputs.
    pub declared_min_bytes: Option<u64>,
}

/// Where a floor's bytes come from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "basis", rename_all = "snake_case")]
pub enum FloorBasis {
    /// The inputs read once, the outputs beyond the L2 written once.
    InputsAndOutputs {
        inputs_bytes: u64,
        outputs_bytes: u64,
        l2_bytes: u64,
    },
    /// problem.py declared `MIN_BYTES`.
    Declared { min_bytes: u64 },
}

/// A device's floor for the run's problem.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpeedOfLight {
    /// The device's row in data/gpu_specs.yaml.
    pub device: String,
    pub bandwidth_gb_per_s: f64,
    pub bytes: u64,
    #[serde(flatten)]
    pub basis: FloorBasis,
    pub floor_ms: f64,
}

/// A device's floor, or why it has none.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Floor {
    Known(SpeedOfLight),
    Unknown { reason: String },
}

impl Floor {
    pub fn known(&self) -> Option<&SpeedOfLight> {
        match self {
            Floor::Known(floor) => Some(floor),
            Floor::Unknown { .. } => None,
        }
    }
}

/// The floor of a problem of these sizes on a device of this spec row (`(name, GB/s)`), or why
/// there is none.
pub fn floor_of(bytes: &ProblemBytes, spec: Option<(&str, f64)>) -> Floor {
    let Some((device, bandwidth_gb_per_s)) = spec else {
        return Floor::Unknown {
            reason: "the device has no row in data/gpu_specs.yaml, so its peak memory \
                     bandwidth is unknown"
                .into(),
        };
    };
    if !(bandwidth_gb_per_s.is_finite() && bandwidth_gb_per_s > 0.0) {
        return Floor::Unknown {
            reason: format!(
                "data/gpu_specs.yaml gives {device} a memory bandwidth of {bandwidth_gb_per_s} \
                 GB/s, which is not a positive number"
            ),
        };
    }
    let (counted, basis) = match bytes.declared_min_bytes {
        Some(min_bytes) => (min_bytes, FloorBasis::Declared { min_bytes }),
        None => (
            bytes
                .inputs_bytes
                .saturating_add(bytes.outputs_bytes.saturating_sub(bytes.l2_bytes)),
            FloorBasis::InputsAndOutputs {
                inputs_bytes: bytes.inputs_bytes,
                outputs_bytes: bytes.outputs_bytes,
                l2_bytes: bytes.l2_bytes,
            },
        ),
    };
    Floor::Known(SpeedOfLight {
        device: device.to_string(),
        bandwidth_gb_per_s,
        bytes: counted,
        basis,
        floor_ms: counted as f64 / (bandwidth_gb_per_s * 1e9) * 1e3,
    })
}

impl SpeedOfLight {
    /// Why a median of `median_ms` cannot be real, or None when it can.
    pub fn refusal(&self, median_ms: f64) -> Option<String> {
        if self.floor_ms <= 0.0 || median_ms >= self.floor_ms * (1.0 - FLOOR_MARGIN) {
            return None;
        }
        let what = match self.basis {
            FloorBasis::InputsAndOutputs { .. } => "of inputs and outputs",
            FloorBasis::Declared { .. } => "(problem.py's MIN_BYTES)",
        };
        Some(format!(
            "timed {}, but moving its {} {what} takes at least {} at the {}'s {}: faster than the \
             device's memory allows",
            milliseconds(median_ms),
            bytes_text(self.bytes),
            milliseconds(self.floor_ms),
            self.device,
            bandwidth_text(self.bandwidth_gb_per_s),
        ))
    }

    /// A time as a percentage of the speed of light: 100 at the floor.
    pub fn percent(&self, time_ms: f64) -> Option<f64> {
        percent_of_light(self.floor_ms, time_ms)
    }
}

/// Under this share of its timed median, a kernel's time on content it had seen before marks a
/// memo: an honest kernel takes as long on any content of the same shape, the L2 flushed.
pub const MEMO_SHARE: f64 = 0.5;

/// Why a timing cannot be the kernel's real cost, or None. `median_ms` is the median of calls on
/// content no call had before; `seen_content_ms` that of calls on content it had been shown
/// (issue 18): a kernel that answers from a memo of earlier calls is fast only there.
pub fn impossible_timing(
    floor: Option<&SpeedOfLight>,
    median_ms: f64,
    seen_content_ms: Option<f64>,
) -> Option<String> {
    if let Some(refusal) = floor.and_then(|floor| floor.refusal(median_ms)) {
        return Some(refusal);
    }
    let seen = seen_content_ms.filter(|seen| seen.is_finite() && *seen >= 0.0)?;
    if let Some(refusal) = floor.and_then(|floor| floor.refusal(seen)) {
        return Some(format!(
            "on content it had seen before it {refusal}; on new content it took {}: it answers \
             from a memo of earlier calls",
            milliseconds(median_ms)
        ));
    }
    (seen < MEMO_SHARE * median_ms).then(|| {
        format!(
            "timed {} on content no call had before, but {} on content it had seen: it answers \
             from a memo of earlier calls, not by computing",
            milliseconds(median_ms),
            milliseconds(seen)
        )
    })
}

/// `floor_ms / time_ms` as a percentage, when both are positive.
pub fn percent_of_light(floor_ms: f64, time_ms: f64) -> Option<f64> {
    (floor_ms > 0.0 && time_ms > 0.0 && time_ms.is_finite()).then(|| floor_ms / time_ms * 100.0)
}

/// `0.015 ms`, `0.895 ms`, `1.6 ms`, `12.3 ms`, `250 ms`: three significant figures at most.
pub fn milliseconds(ms: f64) -> String {
    let digits = if ms > 0.0 && ms.is_finite() {
        (2 - ms.log10().floor() as i32).clamp(0, 9) as usize
    } else {
        0
    };
    let text = format!("{ms:.digits$}");
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        &text
    };
    format!("{text} ms")
}

/// `4.0 GiB`, `12.0 MiB`, `512 B`.
pub fn bytes_text(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// `4.8 TB/s`, `900 GB/s`: decimal units, as datasheets print bandwidth.
pub fn bandwidth_text(gb_per_s: f64) -> String {
    if gb_per_s >= 1000.0 {
        format!("{:.1} TB/s", gb_per_s / 1000.0)
    } else {
        format!("{gb_per_s:.0} GB/s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    fn h200() -> Option<(&'static str, f64)> {
        Some(("NVIDIA H200", 4800.0))
    }

    /// The matvec example: A is 2048 x 1048576 bf16 (4 GiB), x 2 MiB, y 4 KiB.
    fn matvec() -> ProblemBytes {
        ProblemBytes {
            inputs_bytes: 4 * GIB + 2 * (1 << 20),
            outputs_bytes: 4096,
            l2_bytes: 60 << 20,
            declared_min_bytes: None,
        }
    }

    /// Issue 18's memo kernel: 0.015 ms for 4 GiB is 286 TB/s, 60 times the H200's peak.
    #[test]
    fn a_memo_kernel_timed_below_the_floor_is_refused_naming_both_figures() {
        let Floor::Known(floor) = floor_of(&matvec(), h200()) else {
            panic!("the H200 has a bandwidth row");
        };
        assert!((floor.floor_ms - 0.8952).abs() < 1e-3, "{}", floor.floor_ms);
        assert_eq!(
            floor.refusal(0.015).unwrap(),
            "timed 0.015 ms, but moving its 4.0 GiB of inputs and outputs takes at least 0.895 \
             ms at the NVIDIA H200's 4.8 TB/s: faster than the device's memory allows"
        );
        // The honest kernel, 1.55 ms, is 58% of the speed of light.
        assert_eq!(floor.refusal(1.55), None);
        assert!((floor.percent(1.55).unwrap() - 57.75).abs() < 0.1);
    }

    #[test]
    fn a_time_within_the_margin_under_the_floor_passes_and_one_beyond_it_does_not() {
        let floor = floor_of(&matvec(), h200()).known().cloned().unwrap();
        assert_eq!(floor.refusal(floor.floor_ms * (1.0 - FLOOR_MARGIN)), None);
        assert!(
            floor
                .refusal(floor.floor_ms * (1.0 - FLOOR_MARGIN) * 0.999)
                .is_some()
        );
    }

    /// Outputs that fit in the L2 need not reach memory before the kernel ends.
    #[test]
    fn outputs_count_only_beyond_the_l2() {
        let bytes = ProblemBytes {
            inputs_bytes: 20 << 20,
            outputs_bytes: 80 << 20,
            l2_bytes: 60 << 20,
            declared_min_bytes: None,
        };
        let floor = floor_of(&bytes, h200()).known().cloned().unwrap();
        assert_eq!(floor.bytes, 40 << 20);
        let small = ProblemBytes {
            outputs_bytes: 1 << 20,
            ..bytes
        };
        assert_eq!(floor_of(&small, h200()).known().unwrap().bytes, 20 << 20);
    }

    #[test]
    fn a_declared_smaller_floor_replaces_the_inputs_and_outputs_and_says_so() {
        let bytes = ProblemBytes {
            declared_min_bytes: Some(GIB),
            ..matvec()
        };
        let floor = floor_of(&bytes, h200()).known().cloned().unwrap();
        assert_eq!(floor.bytes, GIB);
        assert_eq!(floor.basis, FloorBasis::Declared { min_bytes: GIB });
        assert!((floor.floor_ms - 0.2237).abs() < 1e-3);
        let refusal = floor.refusal(0.1).unwrap();
        assert!(
            refusal.contains("its 1.0 GiB (problem.py's MIN_BYTES) takes at least 0.224 ms"),
            "{refusal}"
        );
        // A declared floor of nothing refuses nothing.
        let nothing = ProblemBytes {
            declared_min_bytes: Some(0),
            ..matvec()
        };
        assert_eq!(
            floor_of(&nothing, h200()).known().unwrap().refusal(1e-6),
            None
        );
    }

    #[test]
    fn a_device_without_a_bandwidth_row_has_no_floor_and_says_why() {
        let floor = floor_of(&matvec(), None);
        assert_eq!(floor.known(), None);
        let Floor::Unknown { reason } = floor else {
            unreachable!()
        };
        assert!(reason.contains("no row in data/gpu_specs.yaml"), "{reason}");
        let broken = floor_of(&matvec(), Some(("Odd GPU", 0.0)));
        assert!(matches!(broken, Floor::Unknown { reason } if reason.contains("Odd GPU")));
    }

    /// MI300X: 5.3 TB/s, the same arithmetic.
    #[test]
    fn amd_rows_give_their_floor_the_same_way() {
        let floor = floor_of(&matvec(), Some(("AMD Instinct MI300X", 5300.0)))
            .known()
            .cloned()
            .unwrap();
        assert!((floor.floor_ms - 0.8107).abs() < 1e-3, "{}", floor.floor_ms);
        assert!(floor.refusal(0.5).unwrap().contains("5.3 TB/s"));
    }

    #[test]
    fn the_floor_reads_back_from_its_journal_form() {
        let floor = floor_of(&matvec(), h200());
        let json = serde_json::to_value(&floor).unwrap();
        assert_eq!(json["known"]["basis"], "inputs_and_outputs");
        assert_eq!(json["known"]["inputs_bytes"], 4 * GIB + 2 * (1 << 20));
        assert_eq!(serde_json::from_value::<Floor>(json).unwrap(), floor);
    }

    /// A memo is fast only on content it has seen: the floor names it where it applies, the
    /// ratio of the two medians where the problem is too small for a floor.
    #[test]
    fn a_kernel_fast_only_on_content_it_had_seen_is_a_memo() {
        let floor = floor_of(&matvec(), h200()).known().cloned().unwrap();
        let big = impossible_timing(Some(&floor), 1.56, Some(0.015)).unwrap();
        assert_eq!(
            big,
            "on content it had seen before it timed 0.015 ms, but moving its 4.0 GiB of inputs \
             and outputs takes at least 0.895 ms at the NVIDIA H200's 4.8 TB/s: faster than the \
             device's memory allows; on new content it took 1.56 ms: it answers from a memo of \
             earlier calls"
        );
        let small = impossible_timing(None, 0.012, Some(0.004)).unwrap();
        assert_eq!(
            small,
            "timed 0.012 ms on content no call had before, but 0.004 ms on content it had seen: \
             it answers from a memo of earlier calls, not by computing"
        );
        assert_eq!(impossible_timing(Some(&floor), 1.56, Some(1.55)), None);
        assert_eq!(impossible_timing(None, 0.012, Some(0.0061)), None);
        assert_eq!(impossible_timing(None, 0.012, None), None);
        assert!(impossible_timing(Some(&floor), 0.5, None).is_some());
    }

    #[test]
    fn figures_read_as_people_write_them() {
        assert_eq!(milliseconds(0.015), "0.015 ms");
        assert_eq!(milliseconds(0.8952), "0.895 ms");
        assert_eq!(milliseconds(1.554), "1.55 ms");
        assert_eq!(milliseconds(12.34), "12.3 ms");
        assert_eq!(milliseconds(1.6), "1.6 ms");
        assert_eq!(milliseconds(250.4), "250 ms");
        assert_eq!(milliseconds(0.0), "0 ms");
        assert_eq!(bytes_text(512), "512 B");
        assert_eq!(bytes_text(4 * GIB), "4.0 GiB");
        assert_eq!(bandwidth_text(900.0), "900 GB/s");
        assert!(percent_of_light(0.0, 1.0).is_none());
        assert!(percent_of_light(1.0, f64::NAN).is_none());
    }
}
