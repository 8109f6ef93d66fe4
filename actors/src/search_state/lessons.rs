//! What the LLM is asked after a candidate's evaluation and what a proposal prompt is built from:
//! refinements of a candidate the verifier rejected, reflexions and their lessons.

use crate::analysis::AnalyzedBottleneck;
use crate::journal::Event;
use crate::model::{CandidateId, RankedKernel};
use crate::ports::{Lesson, ProposalContext};

use super::{Candidate, Core, Decision, Out, Phase, RECENT_LESSONS};

impl Core {
    /// The bottleneck a candidate's proposal takes: its parent analysis' bottleneck of the same
    /// index, none past the end of the list.
    pub(super) fn bottleneck_of(&self, candidate: &Candidate) -> Option<AnalyzedBottleneck> {
        let parent = self.parents.get(&candidate.parent?)?;
        parent
            .analysis
            .as_ref()?
            .get(candidate.proposal_index as usize)
            .cloned()
    }

    /// Asks for another attempt at a candidate that failed verification; the new code is
    /// evaluated as the same candidate on the same device.
    pub(super) fn refine(&mut self, id: CandidateId, error: String, out: &mut Out) {
        let Some(candidate) = self.candidates.get_mut(&id) else {
            return;
        };
        candidate.attempt += 1;
        candidate.phase = Phase::Asking;
        candidate.failure = Some(error.clone());
        candidate.failures.push(error.clone());
        let (parent, round, device, attempt) = (
            candidate.parent.unwrap_or(CandidateId::INITIAL),
            candidate.round,
            candidate.device,
            candidate.attempt,
        );
        let Some((requested, request)) = self.code_request(id) else {
            return;
        };
        out.push(Decision::Record(Event::RefinementRequested {
            candidate: id,
            parent,
            round,
            device,
            request_id: format!("r{round}-c{id}-refine{attempt}"),
            attempt,
            max_refinements: self.config.max_refinements,
            error,
        }));
        self.ask(requested, request, out);
    }

    /// Asks what an evaluated candidate taught, when a later prompt can still use the lesson
    /// (`lessons_used`, the pacer's judgement) and fewer reflexions than the run allows are in
    /// flight (one more is dropped and journaled, not queued).
    pub(super) fn reflect(&mut self, id: CandidateId, lessons_used: bool, out: &mut Out) {
        if self.finished.is_some() || self.llm_closed() || !lessons_used {
            return;
        }
        let Some((requested, request)) = self.reflexion_request(id) else {
            return;
        };
        let in_flight = self
            .requests
            .pending()
            .iter()
            .filter(|request| matches!(request.cancelled, Event::ReflexionReceived { .. }))
            .count();
        if in_flight >= self.config.reflexions_in_flight {
            if let Event::ReflexionRequested { parent, round, .. } = requested {
                out.push(Decision::Record(Event::ReflexionDropped {
                    candidate: id,
                    parent,
                    round,
                    reason: format!(
                        "{in_flight} reflexions are in flight already, the most the run allows"
                    ),
                }));
            }
            return;
        }
        self.ask(requested, request, out);
    }

    /// A reflexion's lesson joins the latest few that optimization prompts carry.
    pub(super) fn reflected(&mut self, id: CandidateId, lesson: Option<&str>) {
        let (Some(lesson), Some(candidate)) = (lesson, self.candidates.get(&id)) else {
            return;
        };
        let Some(outcome) = candidate.outcome.clone() else {
            return;
        };
        if self.lessons.len() == RECENT_LESSONS {
            self.lessons.pop_front();
        }
        self.lessons.push_back(Lesson {
            candidate: id,
            parent: candidate.parent.unwrap_or(CandidateId::INITIAL),
            bottleneck: self.bottleneck_of(candidate).map(|b| b.title),
            outcome,
            lesson: lesson.to_string(),
        });
    }

    pub(super) fn ranked(&self, id: CandidateId) -> Option<RankedKernel> {
        let candidate = self.candidates.get(&id)?;
        Some(RankedKernel {
            id,
            source: candidate.source()?.clone(),
            time_ms: *self.verified_ms.get(&id)?,
            launched_kernels: candidate.launched_kernels.clone(),
        })
    }

    pub(super) fn proposal_context(
        &self,
        id: CandidateId,
        proposals: u32,
    ) -> Option<ProposalContext> {
        let candidate = self.candidates.get(&id)?;
        let parent = self.ranked(candidate.parent?)?;
        Some(ProposalContext {
            candidate: id,
            round: candidate.round,
            parent: parent.id,
            parent_time_ms: parent.time_ms,
            best_time_ms: self
                .beam
                .as_ref()
                .map_or(parent.time_ms, |beam| beam.best().time_ms),
            initial_time_ms: self.initial.as_ref().map_or(parent.time_ms, |k| k.time_ms),
            reference: self.reference,
            proposal_index: candidate.proposal_index,
            proposals,
            profile: self
                .parents
                .get(&parent.id)
                .and_then(|p| p.profile.clone().flatten()),
            bottleneck: self.bottleneck_of(candidate),
            recent_lessons: self.lessons.iter().cloned().collect(),
            previous_error: self.previous_errors.get(&parent.id).cloned(),
            parent_source: parent.source,
        })
    }
}
