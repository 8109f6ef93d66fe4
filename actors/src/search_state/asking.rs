//! The requests the search sends, each built from the state as it stands: its `*_requested`
//! record and the decision carrying the prompt's context. One builder per kind serves both the
//! first request and its resending when a resumed run takes up what was in flight.

use crate::journal::Event;
use crate::model::CandidateId;
use crate::ports::{AnalysisContext, RefinementContext, ReflexionContext, RequestKind};

use super::{Core, Decision, Out};

impl Core {
    /// Journals a request and remembers it as pending, then asks for it.
    pub(super) fn ask(&mut self, requested: Event, request: Decision, out: &mut Out) {
        let attempt = match &request {
            Decision::RequestRefinement { context, .. } => context.attempt,
            Decision::RequestSeed { context, .. } => context.attempt,
            _ => 0,
        };
        self.requests.asked(&requested, attempt);
        out.push(Decision::Record(requested));
        out.push(request);
        if let Some(device) = self.references_due.take() {
            out.push(Decision::TimeReferences { device });
        }
    }

    /// The request for a candidate's current attempt: its proposal, or the refinement it is on.
    pub(super) fn code_request(&self, id: CandidateId) -> Option<(Event, Decision)> {
        let candidate = self.candidates.get(&id)?;
        if candidate.seed {
            return self.seed_request(id);
        }
        let parent = candidate.parent?;
        let (request_id, kind, request) = if candidate.attempt == 0 {
            let request_id = format!("r{}-c{id}", candidate.round);
            let context = self.proposal_context(id, candidate.proposals)?;
            let request = Decision::RequestProposal {
                request_id: request_id.clone(),
                context,
            };
            (request_id, RequestKind::Optimize, request)
        } else {
            let attempt = candidate.attempt;
            let request_id = format!("r{}-c{id}-refine{attempt}", candidate.round);
            let context = RefinementContext {
                candidate: id,
                round: candidate.round,
                parent,
                attempt,
                max_refinements: self.config.max_refinements,
                failed_source: candidate.source()?.clone(),
                error: candidate.failure.clone().unwrap_or_default(),
                bottleneck: self.bottleneck_of(candidate),
            };
            let request = Decision::RequestRefinement {
                request_id: request_id.clone(),
                context,
            };
            (request_id, RequestKind::Refine, request)
        };
        let requested = Event::ProposalRequested {
            candidate: id,
            parent,
            round: candidate.round,
            device: candidate.device,
            request_id,
            kind,
            model: self.config.model_of(id).map(str::to_string),
        };
        Some((requested, request))
    }

    /// The request for a parent's bottleneck analysis.
    pub(super) fn analysis_request(&self, id: CandidateId) -> Option<(Event, Decision)> {
        let kernel = self.ranked(id)?;
        let parent = self.parents.get(&id)?;
        let request_id = format!("r{}-c{id}-analysis", parent.round);
        let requested = Event::AnalysisRequested {
            candidate: id,
            round: parent.round,
            request_id: request_id.clone(),
            requested: parent.requested,
            model: self.config.ensemble.lead().map(str::to_string),
        };
        let context = AnalysisContext {
            candidate: id,
            round: parent.round,
            source: kernel.source,
            time_ms: kernel.time_ms,
            reference: self.reference,
            profile: parent.profile.clone().flatten(),
            num_bottlenecks: parent.requested,
        };
        let request = Decision::RequestAnalysis {
            request_id,
            context,
        };
        Some((requested, request))
    }

    /// The request for what an evaluated candidate taught.
    pub(super) fn reflexion_request(&self, id: CandidateId) -> Option<(Event, Decision)> {
        let candidate = self.candidates.get(&id)?;
        let parent = candidate.parent?;
        let request_id = format!("r{}-c{id}-reflexion", candidate.round);
        let requested = Event::ReflexionRequested {
            candidate: id,
            parent,
            round: candidate.round,
            device: candidate.device,
            request_id: request_id.clone(),
        };
        let context = ReflexionContext {
            candidate: id,
            round: candidate.round,
            parent,
            parent_time_ms: *self.verified_ms.get(&parent)?,
            source: candidate.source()?.clone(),
            outcome: candidate.outcome.clone()?,
            bottleneck: self.bottleneck_of(candidate),
        };
        let request = Decision::RequestReflexion {
            request_id,
            context,
        };
        Some((requested, request))
    }
}
