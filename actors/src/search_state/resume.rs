//! Taking up a search a process left: the journal folded to the state the dead process had, the
//! search is reopened, and what was in flight when it ended is taken again. Nothing that has
//! its result in the journal is done twice: evaluations with an `evaluated` record, requests
//! with a `*_received` record, profiles and analyses recorded.

use std::collections::BTreeSet;

use crate::journal::{EvaluationOutcome, Event, JournalRecord, RunOutcome};
use crate::model::CandidateId;

use super::{Decision, Phase, SearchState};

/// How a resumed run goes on from the journal its earlier process left, with what the resuming
/// command found out about that process (for `run_resumed`).
#[derive(Clone, Debug)]
pub struct Resume {
    /// The journal's records, a torn last line left out.
    pub records: Vec<JournalRecord>,
    /// The candidates being evaluated on a device when the last process died and when the one
    /// before it died (`History::in_flight_at_two_deaths`): they are not tried a third time.
    pub in_flight_at_two_deaths: BTreeSet<CandidateId>,
    /// How the previous process ended (`History::previous_end`).
    pub previous_end: String,
    /// Seconds from the journal's last record to this resume.
    pub gap_s: f64,
    /// Process groups the dead process left running, ended before this one started.
    pub orphans_ended: u32,
    /// Whether the journal's torn last line was cut off.
    pub torn_line: bool,
    /// What `--force` let change since the run started.
    pub forced_changes: Vec<String>,
}

/// Why a candidate is not evaluated a third time.
pub const TWICE_IN_FLIGHT: &str = "it was being evaluated when kactors died twice in a row: \
     a kernel that takes the node down is not tried again";

impl SearchState {
    /// The `run_resumed` record of a resume of this fold: what the resuming command found out,
    /// what was in flight and pending, and the pending requests whose replies were `recovered`
    /// from their files.
    pub fn run_resumed<'a>(
        &self,
        resume: &Resume,
        recovered: impl IntoIterator<Item = &'a String>,
    ) -> Event {
        let mut recovered: Vec<String> = recovered.into_iter().cloned().collect();
        recovered.sort();
        Event::RunResumed {
            previous_end: resume.previous_end.clone(),
            gap_s: resume.gap_s,
            in_flight: self.in_flight(),
            pending_requests: self
                .pending_requests()
                .iter()
                .map(|request| request.request_id.clone())
                .collect(),
            recovered,
            orphans_ended: resume.orphans_ended,
            torn_line: resume.torn_line,
            forced_changes: resume.forced_changes.clone(),
        }
    }

    /// The candidates on a device when the journal ends: a resume evaluates them again.
    pub fn in_flight(&self) -> Vec<CandidateId> {
        self.core
            .candidates
            .iter()
            .filter(|(_, candidate)| candidate.phase == Phase::Evaluating)
            .map(|(id, _)| *id)
            .collect()
    }

    /// The `evaluated` records that fail the candidates being evaluated at this death and the
    /// one before (`in_flight_at_two_deaths`, from the journal's steps).
    fn failures_in_flight_twice(
        &self,
        in_flight_at_two_deaths: &BTreeSet<CandidateId>,
    ) -> Vec<Event> {
        self.in_flight()
            .into_iter()
            .filter(|id| in_flight_at_two_deaths.contains(id))
            .filter_map(|id| {
                let candidate = self.core.candidates.get(&id)?;
                Some(Event::Evaluated {
                    candidate: id,
                    parent: candidate.parent,
                    round: candidate.round,
                    device: candidate.device,
                    attempt: candidate.attempt,
                    outcome: EvaluationOutcome::Failed,
                    time_ms: None,
                    provenance: None,
                    reason: Some(TWICE_IN_FLIGHT.into()),
                    launched_kernels: Vec::new(),
                    seconds: None,
                    floor_ms: None,
                    speed_of_light_pct: None,
                    compiled: None,
                })
            })
            .collect()
    }

    /// Reopens the search and says what to take again: each evaluation in flight goes to its
    /// device again, but one whose evaluation was under way at this death and the one before
    /// (`in_flight_at_two_deaths`) fails instead, by the `evaluated` records returned first, for the
    /// Manager to journal and apply; each request in flight is sent again under its own id (the
    /// Manager uses a reply already on disk instead); a request the end cancelled is asked again;
    /// a profile in flight is run again; the caches of candidates that can no longer become
    /// parents are removed again. Then the search goes on as it would have. A search that was
    /// over when the process died (in the finale, or waiting for its last replies) takes
    /// nothing up again but those replies, and finishes again.
    pub fn resume(
        &mut self,
        in_flight_at_two_deaths: &BTreeSet<CandidateId>,
    ) -> (Vec<Event>, Vec<Decision>) {
        // A search that was over (the process died in the finale, or waiting for the last
        // replies) is not searched further: it finishes again, so that the finale runs.
        let search_over = matches!(self.core.finished, Some((RunOutcome::Completed, _)));
        let failures = if search_over {
            Vec::new()
        } else {
            self.failures_in_flight_twice(in_flight_at_two_deaths)
        };
        let core = &mut self.core;
        if !search_over {
            core.finished = None;
        }
        // This process starts every node's agent anew, as `run_resumed` says to the fold.
        core.restarting.clear();
        let mut out = Vec::new();
        let pending: BTreeSet<String> = core
            .requests
            .pending()
            .iter()
            .map(|request| request.request_id.clone())
            .collect();
        let resend = |core: &mut super::Core,
                      request: Option<(Event, Decision)>,
                      out: &mut Vec<Decision>| {
            let Some((requested, decision)) = request else {
                return;
            };
            let id = match &requested {
                Event::ProposalRequested { request_id, .. }
                | Event::AnalysisRequested { request_id, .. }
                | Event::ReflexionRequested { request_id, .. } => request_id.clone(),
                _ => return,
            };
            if pending.contains(&id) {
                out.push(decision);
            } else {
                core.ask(requested, decision, out);
            }
        };
        let candidates: Vec<(CandidateId, Phase)> = core
            .candidates
            .iter()
            .map(|(id, candidate)| (*id, candidate.phase.clone()))
            .collect();
        for (id, phase) in candidates {
            match phase {
                Phase::Evaluating if search_over || in_flight_at_two_deaths.contains(&id) => {}
                Phase::Evaluating => {
                    if let Some(candidate) = core.candidates.get(&id)
                        && let Some(source) = candidate.source()
                    {
                        out.push(candidate.evaluation(id, source.clone()));
                    }
                }
                Phase::Asking => {
                    let request = core.code_request(id);
                    resend(core, request, &mut out);
                }
                Phase::Waiting | Phase::Resolved => {}
            }
        }
        let parents: Vec<CandidateId> = core.parents.keys().copied().collect();
        for id in parents {
            let Some(parent) = core.parents.get(&id) else {
                continue;
            };
            if parent.analysing {
                let request = core.analysis_request(id);
                resend(core, request, &mut out);
            } else if parent.profiling
                && let Some(kernel) = core.ranked(id)
            {
                out.push(Decision::Profile {
                    device: crate::search::device_for(id, &core.live_devices()),
                    round: parent.round,
                    parent: kernel,
                });
            }
        }
        let reflexions: Vec<CandidateId> = core
            .requests
            .pending()
            .iter()
            .filter_map(|request| match request.cancelled {
                Event::ReflexionReceived { candidate, .. } => Some(candidate),
                _ => None,
            })
            .collect();
        for id in reflexions {
            if let Some((_, decision)) = core.reflexion_request(id) {
                out.push(decision);
            }
        }
        out.extend(core.released_caches());
        // References still due go out with the first request, as they would have.
        if core.config.time_references
            && core.initial.is_some()
            && core.references_due.is_none()
            && core.references_recorded.len() < 2
        {
            out.push(Decision::TimeReferences {
                device: crate::search::device_for(
                    CandidateId(core.config.first_search_id()),
                    &core.live_devices(),
                ),
            });
        }
        // The search was over and its end not journaled: it ends again (the finale too).
        if let Some((outcome, reason)) = core.finished.clone() {
            out.push(Decision::Finish {
                outcome,
                reason,
                best: core.best_verified(),
                initial: core.initial.clone(),
            });
            return (failures, out);
        }
        self.pacer.advance(&mut self.core, &mut out);
        (failures, out)
    }

    /// The fastest verified kernel: what best_kernel.py holds.
    pub fn best_verified(&self) -> Option<crate::model::RankedKernel> {
        self.core.best_verified()
    }
}
