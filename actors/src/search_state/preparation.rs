//! Candidates planned from a parent wait for its profile (when profiling is on) and its
//! bottleneck analysis, each asked for once per kernel, the first time it becomes a parent; then
//! their proposals go out, proposal i taking bottleneck i.

use crate::analysis::AnalyzedBottleneck;
use crate::journal::{CandidateKind, Event};
use crate::model::CandidateId;
use crate::ports::ProfileSummary;
use crate::search::{Pacing, PlannedCandidate, device_for};

use super::{Candidate, Core, Decision, Out, Phase, Resolution};

impl Core {
    /// Numbers a candidate and sets it waiting for its parent.
    pub(super) fn plan(&mut self, planned: PlannedCandidate, round: u32, out: &mut Out) {
        self.candidates.insert(
            planned.id,
            Candidate::new(
                Some(planned.parent),
                round,
                planned.proposal_index,
                planned.device,
                Phase::Waiting,
            ),
        );
        self.asking.insert(planned.id);
        out.push(Decision::Record(Event::CandidatePlanned {
            candidate: planned.id,
            parent: planned.parent,
            round,
            proposal_index: planned.proposal_index,
            device: planned.device,
            kind: CandidateKind::Proposal,
            model: self.config.model_of(planned.id).map(str::to_string),
        }));
        let parent = self.parents.entry(planned.parent).or_default();
        if parent.waiting.is_empty() && parent.profile.is_none() && parent.analysis.is_none() {
            parent.round = round;
        }
        parent.waiting.push(planned.id);
    }

    /// Sends the proposals waiting for `parent` once it has its profile and analysis, at once
    /// when it has them, else after asking for them (once: a parent being prepared is left to
    /// the work in flight, which takes every candidate waiting for it when it is done).
    pub(super) fn prepare_parent(&mut self, id: CandidateId, out: &mut Out) {
        let llm_closed = self.llm_closed();
        let profiling = self.profiling;
        let parent = self.parents.entry(id).or_default();
        let analysed = parent.analysis.is_some() || llm_closed;
        let profiled = !profiling || parent.profile.is_some();
        if analysed && profiled {
            return self.propose_waiting(id, out);
        }
        if parent.profiling || parent.analysing {
            return;
        }
        if profiled {
            self.request_analysis(id, out);
        } else {
            parent.profiling = true;
            let round = parent.round;
            let device = device_for(id, &self.live_devices());
            if let Some(kernel) = self.ranked(id) {
                out.push(Decision::Profile {
                    parent: kernel,
                    device,
                    round,
                });
            }
        }
    }

    /// Starts a kernel's preparation before any candidate is planned from it (steady search, as
    /// soon as it joins the beam; rounds, once it is certain to be a parent of `round`), so that
    /// proposals from it need not wait.
    pub(super) fn prepare_ahead(&mut self, id: CandidateId, round: u32, out: &mut Out) {
        let parent = self.parents.entry(id).or_default();
        if parent.profile.is_none()
            && parent.analysis.is_none()
            && !parent.profiling
            && !parent.analysing
        {
            parent.round = round;
        }
        self.prepare_parent(id, out);
    }

    /// Whether proposals from a kernel can go out at once: its profile (when profiling is on)
    /// and its analysis are in, or the provider can answer no more.
    pub(super) fn parent_ready(&self, id: CandidateId) -> bool {
        let Some(parent) = self.parents.get(&id) else {
            return false;
        };
        (parent.analysis.is_some() || self.llm_closed())
            && (!self.profiling || parent.profile.is_some())
    }

    /// How many proposals a parent gets, each on a bottleneck of its own: those waiting for it
    /// in rounds (K × C candidates to a bottleneck), M for one prepared ahead of its round (the
    /// overlap prepares only parents of a full round, where every expanded parent gets M); in
    /// steady search one per bottleneck (its proposals cycle over them).
    fn proposals_per_parent(&self, id: CandidateId) -> u32 {
        match self.config.pacing {
            Pacing::Rounds => {
                let Some(parent) = self.parents.get(&id) else {
                    return 0;
                };
                if parent.round > self.beam_round + 1 {
                    return self.config.search.num_bottlenecks;
                }
                (parent.waiting.len() as u32).div_ceil(self.config.search.per_bottleneck())
            }
            Pacing::Steady { .. } => self.config.search.num_bottlenecks,
        }
    }

    /// A parent's profile came back (`None`: it failed, or profiling stopped).
    pub(super) fn profiled(
        &mut self,
        id: CandidateId,
        profile: Option<ProfileSummary>,
        out: &mut Out,
    ) {
        let at_roofline = profile.as_ref().is_some_and(|p| p.at_roofline);
        let parent = self.parents.entry(id).or_default();
        parent.profiling = false;
        parent.profile = Some(profile);
        if self.finished.is_some() {
            return;
        }
        let is_best = self.beam.as_ref().is_some_and(|beam| beam.best().id == id);
        if self.config.stop_at_roofline && at_roofline && is_best {
            let reason = format!("the best kernel (candidate {id}) is at the roofline");
            return self.finish(crate::journal::RunOutcome::Completed, reason, out);
        }
        self.request_analysis(id, out);
    }

    /// A parent's bottlenecks are asked for once, when it first becomes a parent (after its
    /// profile).
    fn request_analysis(&mut self, id: CandidateId, out: &mut Out) {
        if self.finished.is_some() {
            return;
        }
        let requested = self.proposals_per_parent(id);
        let llm_closed = self.llm_closed();
        let parent = self.parents.entry(id).or_default();
        if parent.analysis.is_some() || llm_closed {
            return self.propose_waiting(id, out);
        }
        parent.analysing = true;
        parent.requested = requested;
        if let Some((requested, request)) = self.analysis_request(id) {
            self.ask(requested, request, out);
        }
    }

    /// A parent's analysis came back (an empty list when it failed or named none).
    pub(super) fn analysed(
        &mut self,
        id: CandidateId,
        bottlenecks: Vec<AnalyzedBottleneck>,
        out: &mut Out,
    ) {
        let parent = self.parents.entry(id).or_default();
        parent.analysing = false;
        parent.analysis.get_or_insert(bottlenecks);
        if self.finished.is_none() {
            self.propose_waiting(id, out);
        }
    }

    fn propose_waiting(&mut self, id: CandidateId, out: &mut Out) {
        if self.held_back(id) {
            return;
        }
        let proposals = self.proposals_per_parent(id);
        let waiting = self
            .parents
            .get_mut(&id)
            .map(|parent| std::mem::take(&mut parent.waiting))
            .unwrap_or_default();
        for candidate in waiting {
            self.propose(candidate, proposals, out);
        }
        self.new_parents.retain(|parent| *parent != id);
        if let Some(next) = self.new_parents.front().copied()
            && self.parent_ready(next)
        {
            self.propose_waiting(next, out);
        }
    }

    /// Whether a new parent of the round waits for the new parents before it in the beam: the
    /// replay provider hands its files out in the order requests for code are sent, so new
    /// parents send their proposals fastest first, whichever analysis comes back first (or
    /// was asked for ahead of the round). Without this, a round's two new parents raced.
    fn held_back(&self, id: CandidateId) -> bool {
        self.new_parents.contains(&id) && self.new_parents.front() != Some(&id)
    }

    /// Asks for the code of one planned candidate; `proposals` is how many its parent gets.
    fn propose(&mut self, id: CandidateId, proposals: u32, out: &mut Out) {
        if self.finished.is_some() {
            return;
        }
        if self.llm_closed() {
            return self.resolve(id, Resolution::NotProposed, out);
        }
        let Some(candidate) = self.candidates.get_mut(&id) else {
            return;
        };
        candidate.phase = Phase::Asking;
        candidate.proposals = proposals;
        if let Some((requested, request)) = self.code_request(id) {
            self.ask(requested, request, out);
        }
    }
}
