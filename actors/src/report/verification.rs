//! What the report says of how kernels were judged (issue 18): the tolerance each output was
//! held to, each device's speed of light (or why it has none), every kernel's time as a
//! percentage of it, the finale's re-check on draws no candidate saw, and profiles whose
//! measured call read far less memory than the problem's inputs hold.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::journal::{EvaluationOutcome, Event, Step};
use crate::model::{CandidateId, DeviceId, Verdict};
use crate::profile::{KernelProfile, dram_read_bytes};
use crate::speed_of_light::{
    Floor, FloorBasis, SpeedOfLight, bandwidth_text, bytes_text, milliseconds,
};

use super::markdown::table_cell;

/// How many of the fastest kernels the table lists: enough to see what is left, short at any
/// run's size.
const KERNELS_LISTED: usize = 10;
/// A profiled call that read less than this share of what the floor counts is flagged.
const DRAM_SHARE_FLAGGED: f64 = 0.5;

/// One verified kernel's figures.
#[derive(Clone, Debug, PartialEq)]
struct JudgedKernel {
    time_ms: f64,
    floor_ms: Option<f64>,
    rel_l2_err: Option<f64>,
    rule: Option<String>,
}

#[derive(Clone, Debug, Default)]
pub(super) struct Verification {
    /// The tolerance the evaluators reported at start: atol, rtol, and the relative L2 bound.
    tolerance: Option<(f64, f64, Option<f64>)>,
    /// Each device's floor as its latest evaluator start gave it.
    floors: BTreeMap<DeviceId, Floor>,
    /// Each verification's figures, waiting for the evaluation's time.
    verdicts: BTreeMap<CandidateId, (Option<f64>, Option<String>)>,
    kernels: BTreeMap<CandidateId, JudgedKernel>,
    rechecks: Vec<(CandidateId, Result<(), String>)>,
    /// (candidate, device, bytes its measured call read from memory).
    profiled_reads: Vec<(CandidateId, DeviceId, f64)>,
}

impl Verification {
    pub(super) fn observe(&mut self, event: &Event) {
        match event {
            Event::EvaluatorStarted {
                device,
                ready,
                floor,
            } => {
                if let (Some(atol), Some(rtol)) = (ready["atol"].as_f64(), ready["rtol"].as_f64()) {
                    self.tolerance = Some((atol, rtol, ready["rel_l2"].as_f64()));
                }
                if let Some(floor) = floor {
                    self.floors.insert(*device, floor.clone());
                }
            }
            Event::StepFinished {
                candidate,
                step: Step::Verify,
                verdict:
                    Some(Verdict::Passed {
                        rel_l2_err, rule, ..
                    }),
                ..
            } => {
                self.verdicts
                    .insert(*candidate, (*rel_l2_err, rule.clone()));
            }
            Event::Evaluated {
                candidate,
                outcome: EvaluationOutcome::Verified,
                time_ms: Some(time_ms),
                floor_ms,
                ..
            } => {
                let (rel_l2_err, rule) = self.verdicts.remove(candidate).unwrap_or_default();
                self.kernels.insert(
                    *candidate,
                    JudgedKernel {
                        time_ms: *time_ms,
                        floor_ms: *floor_ms,
                        rel_l2_err,
                        rule,
                    },
                );
            }
            Event::FinalRechecked {
                candidate,
                passed,
                reason,
            } => {
                let result = if *passed {
                    Ok(())
                } else {
                    Err(reason.clone().unwrap_or_else(|| "no reason given".into()))
                };
                self.rechecks.push((*candidate, result));
            }
            Event::ProfileRecorded {
                candidate,
                device,
                details: Some(details),
                ..
            } => self.observe_profile(*candidate, *device, details),
            _ => {}
        }
    }

    fn observe_profile(
        &mut self,
        candidate: CandidateId,
        device: DeviceId,
        profile: &KernelProfile,
    ) {
        if let Some(read) = dram_read_bytes(profile) {
            self.profiled_reads.push((candidate, device, read));
        }
    }

    /// The floor the run's timings were held to: the first device's that has one.
    fn floor(&self) -> Option<&SpeedOfLight> {
        self.floors.values().find_map(Floor::known)
    }

    /// A kernel's time as a percentage of the speed of light.
    pub(super) fn percent(&self, candidate: CandidateId) -> Option<f64> {
        let kernel = self.kernels.get(&candidate)?;
        crate::speed_of_light::percent_of_light(kernel.floor_ms?, kernel.time_ms)
    }

    /// A kernel's time as a percentage of the speed of light, as text.
    pub(super) fn percent_text(&self, candidate: CandidateId) -> String {
        self.percent(candidate)
            .map_or_else(|| "–".into(), |percent| format!("{percent:.1}%"))
    }

    pub(super) fn render(&self, out: &mut String) {
        let _ = writeln!(out, "\n## Verification\n");
        if let Some((atol, rtol, rel_l2)) = self.tolerance {
            let l2 = rel_l2
                .map(|bound| format!(" and ||a - e|| / ||e|| <= {bound} over each output"))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "Outputs are judged element by element, |a - e| <= atol + {rtol} × |e| with atol {atol} where the reference's RMS is 1 or more and atol times that RMS below it{l2}. Every timed call runs on inputs changed from any earlier call's; the checked ones are compared with a reference computed for their content. A call's output must be complete on the caller's stream when kernel_function returns."
            );
        }
        self.render_floor(out);
        self.render_kernels(out);
        self.render_rechecks(out);
        self.render_reads(out);
    }

    fn render_floor(&self, out: &mut String) {
        let floors: Vec<&Floor> = self.floors.values().collect();
        match (self.floor(), floors.first()) {
            (Some(floor), _) => {
                let what = match &floor.basis {
                    FloorBasis::InputsAndOutputs {
                        inputs_bytes,
                        outputs_bytes,
                        ..
                    } => format!(
                        "its inputs ({}) read once and its outputs ({}) written once beyond the L2",
                        bytes_text(*inputs_bytes),
                        bytes_text(*outputs_bytes)
                    ),
                    FloorBasis::Declared { min_bytes } => format!(
                        "the {} problem.py declares as MIN_BYTES (a smaller floor than its inputs and outputs: the run uses it)",
                        bytes_text(*min_bytes)
                    ),
                };
                let _ = writeln!(
                    out,
                    "\nSpeed of light: {} on the {}, moving {} at {}. A median below it (less 5%) is rejected as impossible.",
                    milliseconds(floor.floor_ms),
                    floor.device,
                    what,
                    bandwidth_text(floor.bandwidth_gb_per_s)
                );
            }
            (None, Some(Floor::Unknown { reason })) => {
                let _ = writeln!(
                    out,
                    "\nNo speed of light: {reason}. No time was checked against a floor."
                );
            }
            _ => {
                let _ = writeln!(
                    out,
                    "\nNo speed of light: no evaluator reported the problem's sizes (the noop platform moves no data)."
                );
            }
        }
    }

    fn render_kernels(&self, out: &mut String) {
        let mut fastest: Vec<(&CandidateId, &JudgedKernel)> = self.kernels.iter().collect();
        fastest.sort_by(|a, b| a.1.time_ms.total_cmp(&b.1.time_ms).then(a.0.cmp(b.0)));
        if fastest.is_empty() {
            return;
        }
        let _ = writeln!(
            out,
            "\nThe {} fastest verified kernels, as the search timed them:\n",
            fastest.len().min(KERNELS_LISTED)
        );
        let _ = writeln!(
            out,
            "| candidate | time (ms) | % of speed of light | relative L2 error | judged by |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|");
        for (candidate, kernel) in fastest.into_iter().take(KERNELS_LISTED) {
            let l2 = kernel
                .rel_l2_err
                .map_or_else(|| "–".into(), |err| format!("{err:.2e}"));
            let rule = kernel
                .rule
                .as_deref()
                .map_or_else(|| "–".into(), table_cell);
            let _ = writeln!(
                out,
                "| {candidate} | {:.4} | {} | {l2} | {rule} |",
                kernel.time_ms,
                self.percent_text(*candidate)
            );
        }
    }

    fn render_rechecks(&self, out: &mut String) {
        if self.rechecks.is_empty() {
            return;
        }
        let failed: Vec<String> = self
            .rechecks
            .iter()
            .filter_map(|(candidate, result)| {
                result
                    .as_ref()
                    .err()
                    .map(|reason| format!("candidate {candidate}: {}", table_cell(reason)))
            })
            .collect();
        let _ = writeln!(
            out,
            "\nThe finale checked {} kernel(s) once more in a fresh evaluator on draws no candidate saw: {}.",
            self.rechecks.len(),
            if failed.is_empty() {
                "all passed".to_string()
            } else {
                format!(
                    "{} failed and left the final beam (the next fastest became the best)",
                    failed.len()
                )
            }
        );
        for line in failed {
            let _ = writeln!(out, "- {line}");
        }
    }

    fn render_reads(&self, out: &mut String) {
        for (candidate, device, read) in &self.profiled_reads {
            let Some(floor) = self.floors.get(device).and_then(Floor::known) else {
                continue;
            };
            let (must_read, what) = match floor.basis {
                FloorBasis::InputsAndOutputs { inputs_bytes, .. } => {
                    (inputs_bytes, "the problem's inputs hold")
                }
                FloorBasis::Declared { min_bytes } => (min_bytes, "problem.py's MIN_BYTES is"),
            };
            if must_read > 0 && *read < DRAM_SHARE_FLAGGED * must_read as f64 {
                let _ = writeln!(
                    out,
                    "\n**Flagged:** candidate {candidate}'s profiled call read {} from memory, but {what} {}: it did not do the work its time claims.",
                    bytes_text(*read as u64),
                    bytes_text(must_read)
                );
            }
        }
    }
}
