//! What the LLM is asked after a candidate's evaluation and what a proposal prompt is built from:
//! refinements of a candidate the verifier rejected, reflexions and their lessons.

use crate::analysis::AnalyzedBottleneck;
use crate::journal::Event;
use crate::model::{CandidateId, KernelSource, RankedKernel};
use crate::ports::{Lesson, ProposalContext, RefinementContext, ReflexionContext, RequestKind};

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
    pub(super) fn refine(
        &mut self,
        id: CandidateId,
        failed: KernelSource,
        error: String,
        out: &mut Out,
    ) {
        let Some(candidate) = self.candidates.get(&id).cloned() else {
            return;
        };
        let parent = candidate.parent.unwrap_or(CandidateId::INITIAL);
        let attempt = candidate.attempt + 1;
        if let Some(c) = self.candidates.get_mut(&id) {
            c.attempt = attempt;
            c.phase = Phase::Asking;
            c.failure = Some(error.clone());
        }
        let request_id = format!("r{}-c{id}-refine{attempt}", candidate.round);
        out.push(Decision::Record(Event::RefinementRequested {
            candidate: id,
            parent,
            round: candidate.round,
            device: candidate.device,
            request_id: request_id.clone(),
            attempt,
            max_refinements: self.config.max_refinements,
            error: error.clone(),
        }));
        let context = RefinementContext {
            candidate: id,
            round: candidate.round,
            parent,
            attempt,
            max_refinements: self.config.max_refinements,
            failed_source: failed,
            error,
            bottleneck: self.bottleneck_of(&candidate),
        };
        self.request_code(id, &candidate, attempt, request_id.clone(), out);
        out.push(Decision::RequestRefinement {
            request_id,
            context,
        });
    }

    /// Journals a request for code (a proposal or a refinement) and remembers it as pending.
    pub(super) fn request_code(
        &mut self,
        id: CandidateId,
        candidate: &Candidate,
        attempt: u32,
        request_id: String,
        out: &mut Out,
    ) {
        let kind = if attempt == 0 {
            RequestKind::Optimize
        } else {
            RequestKind::Refine
        };
        let requested = Event::ProposalRequested {
            candidate: id,
            parent: candidate.parent.unwrap_or(CandidateId::INITIAL),
            round: candidate.round,
            device: candidate.device,
            request_id: request_id.clone(),
            kind,
        };
        self.requests.asked(&requested, attempt);
        out.push(Decision::Record(requested));
    }

    /// Asks what an evaluated candidate taught, when a later prompt can still use the lesson
    /// (`lessons_used`, the pacer's judgement).
    pub(super) fn reflect(&mut self, id: CandidateId, lessons_used: bool, out: &mut Out) {
        let Some(candidate) = self.candidates.get(&id).cloned() else {
            return;
        };
        let (Some(parent), Some(outcome), Some(source)) = (
            candidate.parent,
            candidate.outcome.clone(),
            candidate.source().cloned(),
        ) else {
            return;
        };
        if self.finished.is_some() || self.llm_closed() || !lessons_used {
            return;
        }
        let Some(parent_time_ms) = self.verified_ms.get(&parent).copied() else {
            return;
        };
        let in_flight = self
            .requests
            .pending()
            .iter()
            .filter(|request| matches!(request.cancelled, Event::ReflexionReceived { .. }))
            .count();
        if in_flight >= self.config.reflexions_in_flight {
            out.push(Decision::Record(Event::ReflexionDropped {
                candidate: id,
                parent,
                round: candidate.round,
                reason: format!(
                    "{in_flight} reflexions are in flight already, the most the run allows"
                ),
            }));
            return;
        }
        let request_id = format!("r{}-c{id}-reflexion", candidate.round);
        let requested = Event::ReflexionRequested {
            candidate: id,
            parent,
            round: candidate.round,
            device: candidate.device,
            request_id: request_id.clone(),
        };
        self.requests.asked(&requested, 0);
        out.push(Decision::Record(requested));
        out.push(Decision::RequestReflexion {
            request_id,
            context: ReflexionContext {
                candidate: id,
                round: candidate.round,
                parent,
                parent_time_ms,
                source,
                outcome,
                bottleneck: self.bottleneck_of(&candidate),
            },
        });
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
