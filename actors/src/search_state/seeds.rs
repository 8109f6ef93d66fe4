//! Generation, the search's round 0: seed kernels written from problem.py alone, each verified
//! like any candidate and refined with its earlier attempts until it passes or runs out of
//! refinements. The first verified seed (or, keeping all seeds, the fastest verified ones once
//! every seed has ended) makes the first beam, as the initial kernel does without generation.

use crate::journal::{CandidateKind, Event, RunOutcome};
use crate::model::{CandidateId, KernelSource, RankedKernel, RequestKind};
use crate::ports::{SEED_HISTORY, SeedAttempt, SeedContext};
use crate::search::{Beam, device_for};

use super::pacing::beam_updated;
use super::{Candidate, Core, Decision, Out, Phase, Resolution, Settled};

/// Which verified seeds make the first beam.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeedsKept {
    /// The first seed that passes starts the search; seeds still under way are not refined.
    First,
    /// Every seed ends first; the fastest N verified ones are the first beam.
    All,
}

/// The strategy's generation settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Generation {
    pub num_seeds: u32,
    pub kept: SeedsKept,
}

/// The seeds while they decide the first beam.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Seeding {
    outstanding: u32,
    verified: Vec<RankedKernel>,
    failures: Vec<String>,
    /// The first beam is made (or every seed failed): a seed that ends later changes nothing.
    pub(super) done: bool,
}

impl Core {
    /// Plans and asks for every seed, each pinned as candidate i is (i mod devices).
    pub(super) fn generate(&mut self, generation: Generation, out: &mut Out) {
        self.seeding.outstanding = generation.num_seeds;
        for index in 0..generation.num_seeds {
            let id = CandidateId(u64::from(index) + 1);
            let device = device_for(id, &self.live_devices());
            let mut seed = Candidate::new(None, 0, index, device, Phase::Asking);
            seed.seed = true;
            self.candidates.insert(id, seed);
            out.push(Decision::Record(Event::CandidatePlanned {
                candidate: id,
                parent: CandidateId::INITIAL,
                round: 0,
                proposal_index: index,
                device,
                kind: CandidateKind::Seed,
                model: self.config.model_of(id).map(str::to_string),
            }));
            if let Some((requested, request)) = self.seed_request(id) {
                self.ask(requested, request, out);
            }
        }
    }

    /// A seed's reply without code fails like any attempt of a seed, and is refined: its
    /// attempt is an empty source, which the refinement prompt shows as no code in the reply.
    pub(super) fn seed_without_code(&mut self, id: CandidateId, cut: &str, out: &mut Out) {
        let source = KernelSource::new("");
        if let Some(seed) = self.candidates.get_mut(&id) {
            seed.sources.push(source.clone());
        }
        let resolution = Resolution::Rejected {
            source,
            reason: format!(
                "no code in the reply: it has no python code block defining kernel_function{cut}"
            ),
            judged: false,
            simulated: false,
        };
        self.resolve(id, resolution, out);
    }

    pub(super) fn is_seed(&self, id: CandidateId) -> bool {
        self.candidates.get(&id).is_some_and(|c| c.seed)
    }

    /// The request for a seed's current attempt: its first code, or refinement N with the
    /// latest failed attempts.
    pub(super) fn seed_request(&self, id: CandidateId) -> Option<(Event, Decision)> {
        let candidate = self.candidates.get(&id)?;
        let attempt = candidate.attempt;
        let (request_id, kind) = if attempt == 0 {
            (format!("r0-c{id}"), RequestKind::Seed)
        } else {
            (format!("r0-c{id}-refine{attempt}"), RequestKind::Refine)
        };
        let attempts: Vec<SeedAttempt> = candidate
            .sources
            .iter()
            .zip(&candidate.failures)
            .map(|(source, error)| SeedAttempt {
                source: source.clone(),
                error: error.clone(),
            })
            .collect();
        let skip = attempts.len().saturating_sub(SEED_HISTORY);
        let context = SeedContext {
            candidate: id,
            seed_index: candidate.proposal_index,
            num_seeds: self.config.generation.map_or(1, |g| g.num_seeds),
            attempt,
            max_refinements: self.config.max_refinements,
            attempts: attempts.into_iter().skip(skip).collect(),
        };
        let requested = Event::ProposalRequested {
            candidate: id,
            parent: CandidateId::INITIAL,
            round: 0,
            device: candidate.device,
            request_id: request_id.clone(),
            kind,
            model: self.config.model_of(id).map(str::to_string),
        };
        let request = Decision::RequestSeed {
            request_id,
            context,
        };
        Some((requested, request))
    }

    /// A seed ended. Answers whether the first beam is made now: by this seed, the first to
    /// pass, or by the last seed to end when all are kept. When every seed failed the run ends,
    /// saying why each did.
    pub(super) fn seed_settled(&mut self, settled: Settled, out: &mut Out) -> bool {
        if self.seeding.done || self.finished.is_some() {
            return false;
        }
        let seeding = &mut self.seeding;
        seeding.outstanding = seeding.outstanding.saturating_sub(1);
        match settled.resolution {
            Resolution::Verified(kernel, _) => seeding.verified.push(kernel),
            Resolution::Rejected { reason, .. } | Resolution::Failed(reason) => {
                seeding
                    .failures
                    .push(format!("seed {}: {reason}", settled.id));
            }
            Resolution::Duplicate(earlier) => {
                seeding
                    .failures
                    .push(format!("seed {}: {}", settled.id, earlier.reason()));
            }
            Resolution::NotProposed => seeding.failures.push(format!(
                "seed {}: no code came (the llm provider ran dry, its budget was spent or \
                     the request was cancelled)",
                settled.id
            )),
        }
        let kept = self.config.generation.map_or(SeedsKept::First, |g| g.kept);
        let ready = match kept {
            SeedsKept::First => !seeding.verified.is_empty() || seeding.outstanding == 0,
            SeedsKept::All => seeding.outstanding == 0,
        };
        if !ready {
            return false;
        }
        seeding.done = true;
        let mut verified = std::mem::take(&mut seeding.verified);
        if verified.is_empty() {
            let why = seeding.failures.join("; ");
            self.finish(
                RunOutcome::Failed,
                format!("no seed kernel passed verification: {why}"),
                out,
            );
            return false;
        }
        verified.sort_by(|a, b| a.time_ms.total_cmp(&b.time_ms).then(a.id.cmp(&b.id)));
        let mut kernels = verified.into_iter();
        let Some(fastest) = kernels.next() else {
            return false;
        };
        self.initial = Some(fastest.clone());
        let mut beam = Beam::new(fastest, self.config.search.num_top_kernels);
        for kernel in kernels {
            beam.admit(kernel);
        }
        out.push(Decision::Record(beam_updated(0, &beam)));
        self.beam = Some(beam);
        self.references_after_first_beam();
        true
    }
}
