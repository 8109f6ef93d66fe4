//! A candidate's folder holds caches while the candidate may still be worked on: Triton's cache
//! with its compiled binaries, a parent's profile. Once it can no longer become a parent they
//! serve nothing (its time, verdict and profile are in the journal), and on a long GPU run they
//! would fill the disk: the search releases them, and the Collector removes them. The search
//! forgets their code then too, which would fill the memory.
//!
//! A candidate can no longer become a parent once it is resolved, not in the beam, and no
//! profile of it is running. The initial kernel keeps its caches: the finale times it again in
//! its folder. In rounds, the beam takes a round's kernels only at the round's
//! end: a candidate waits for the end of its round, after which one not in the beam never
//! enters it, since the beam only gets faster. In steady search the beam takes each kernel as
//! it is resolved, so one not taken, or pushed out later, is released at once. (Steady
//! search's fallback, while no beam member is ready, may still propose from a kernel out of
//! the beam; its profile and analysis are done, so it needs no cache either.)

use std::collections::BTreeSet;

use crate::journal::Event;
use crate::model::CandidateId;
use crate::search::Pacing;

use super::{Core, Decision, Out, Phase};

impl Core {
    /// Releases the caches of every evaluated candidate that can no longer become a parent,
    /// once: after each record the search applies.
    pub(super) fn release_caches(&mut self, out: &mut Out) {
        let beam: BTreeSet<CandidateId> = self
            .beam
            .as_ref()
            .map(|beam| beam.members().iter().map(|k| k.id).collect())
            .unwrap_or_default();
        let released: Vec<CandidateId> = self
            .caches_held
            .iter()
            .copied()
            .filter(|id| *id != CandidateId::INITIAL)
            .filter(|id| !beam.contains(id) && self.can_no_longer_be_a_parent(*id))
            .collect();
        for candidate in &released {
            self.caches_held.remove(candidate);
            self.caches_released.insert(*candidate);
            out.push(Decision::RemoveCaches {
                candidate: *candidate,
            });
        }
        let waiting = std::mem::take(&mut self.code_kept_for_now);
        for candidate in waiting.into_iter().chain(released) {
            self.forget_code(candidate);
        }
    }

    /// Forgets the code of a candidate that can no longer become a parent: a long run holds
    /// 100,000 of them, a kernel kilobytes each, and the code stays in the journal and the
    /// candidate's folder. A parent's is kept (steady search's fallback may still propose from
    /// it), and the best's and one's whose reflexion is pending until they are not (the finale
    /// times the best; a resume asks the reflexion again with the code).
    fn forget_code(&mut self, id: CandidateId) {
        if self.parents.contains_key(&id) {
            return;
        }
        let reflexion_pending = self.requests.pending().iter().any(|request| {
            matches!(request.cancelled, Event::ReflexionReceived { candidate, .. } if candidate == id)
        });
        if reflexion_pending || self.best.is_some_and(|(best, _)| best == id) {
            self.code_kept_for_now.insert(id);
        } else if let Some(candidate) = self.candidates.get_mut(&id) {
            candidate.sources = Vec::new();
        }
    }

    /// Every candidate whose caches were released, to remove again at a resume: the process
    /// may have died before the Collector removed them (or a full disk kept it from it). A
    /// folder already without caches costs a look and journals nothing.
    pub(super) fn released_caches(&self) -> impl Iterator<Item = Decision> + '_ {
        self.caches_released
            .iter()
            .map(|candidate| Decision::RemoveCaches {
                candidate: *candidate,
            })
    }

    /// Whether a candidate outside the beam is past every way back into it.
    fn can_no_longer_be_a_parent(&self, id: CandidateId) -> bool {
        let Some(candidate) = self.candidates.get(&id) else {
            return false;
        };
        // A seed may still join the first beam until generation has made it.
        if candidate.seed && !self.seeding.done {
            return false;
        }
        let profiling = self.parents.get(&id).is_some_and(|parent| parent.profiling);
        let round_decided = match self.config.pacing {
            Pacing::Rounds => candidate.round <= self.beam_round,
            Pacing::Steady { .. } => true,
        };
        candidate.phase == Phase::Resolved && !profiling && round_decided
    }
}
