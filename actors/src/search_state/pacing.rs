//! How the search is paced: in rounds (a round's N × M proposals go out together and the next
//! round starts when the last of them is resolved) or steadily (up to max_inflight proposals are
//! always being asked for, each candidate goes to the first free device when its code comes, and
//! the beam takes each result as it arrives; rounds remain a numbering of N × M candidates).
//! Two variants of one enum with the same four answers: what a settled candidate changes, what
//! to plan next, which device takes an answer, and whether a lesson can still be used.

use std::collections::BTreeMap;

use crate::journal::{BeamMember, Event, RoundSummary, RunOutcome};
use crate::model::{CandidateId, DeviceId, RankedKernel};
use crate::search::{Beam, Pacing, SearchKind, SteadyPlan, device_for, plan_round, virtual_round};

use super::{Core, Decision, Out, Phase, Resolution, SearchConfig, Settled};

#[derive(Clone, Debug, PartialEq)]
pub(super) enum Pacer {
    Rounds(Rounds),
    Steady(Steady),
}

#[derive(Clone, Debug, PartialEq)]
pub(super) struct Rounds {
    next_id: u64,
    /// The last candidate the rounds plan: numbers before the first round's are the seeds.
    last_id: u64,
    round: Tally,
}

#[derive(Clone, Debug, PartialEq)]
pub(super) struct Steady {
    max_inflight: usize,
    plan: SteadyPlan,
    /// Candidates planned and not resolved.
    unresolved: usize,
    /// The virtual rounds started and not finished, oldest first.
    rounds: BTreeMap<u32, Tally>,
    /// The best time when the latest virtual round finished, to tell whether the next improved.
    best_at_round_end_ms: f64,
    /// Why no more candidates are planned though the plan has more (greedy's patience ran out).
    stopped: Option<String>,
    started: bool,
}

/// One round's candidates and what became of them.
#[derive(Clone, Debug, Default, PartialEq)]
struct Tally {
    number: u32,
    /// Candidates of the round planned so far (steady search plans them one at a time).
    planned: u32,
    outstanding: usize,
    results: Vec<RankedKernel>,
    proposed: u32,
    verified: u32,
    failed: u32,
    duplicates: u32,
    failures: Vec<String>,
}

impl Tally {
    /// Counts a candidate that ended; the verified kernel itself goes to the beam elsewhere.
    fn count(&mut self, id: CandidateId, resolution: &Resolution) {
        self.outstanding = self.outstanding.saturating_sub(1);
        match resolution {
            Resolution::Verified(..) => {
                self.proposed += 1;
                self.verified += 1;
            }
            Resolution::Rejected { reason, .. } | Resolution::Failed(reason) => {
                self.proposed += 1;
                self.failed += 1;
                self.failures.push(format!("{id}: {reason}"));
            }
            Resolution::Duplicate(_) => {
                self.proposed += 1;
                self.duplicates += 1;
            }
            Resolution::NotProposed => {}
        }
    }
}

impl Pacer {
    pub(super) fn new(config: &SearchConfig) -> Self {
        match config.pacing {
            Pacing::Rounds => Pacer::Rounds(Rounds {
                next_id: config.first_search_id(),
                last_id: config.first_search_id() - 1 + config.search.total_candidates(),
                round: Tally::default(),
            }),
            Pacing::Steady { max_inflight } => Pacer::Steady(Steady {
                max_inflight: max_inflight.max(1),
                plan: SteadyPlan::new(config.search, config.first_search_id()),
                unresolved: 0,
                rounds: BTreeMap::new(),
                best_at_round_end_ms: f64::INFINITY,
                stopped: None,
                started: false,
            }),
        }
    }

    /// A candidate reached its end: reflect on it if a later prompt can use the lesson, count
    /// it, and move the search on. The initial kernel's end starts the search.
    pub(super) fn resolved(&mut self, core: &mut Core, settled: Settled, out: &mut Out) {
        if settled.id == CandidateId::INITIAL {
            if matches!(settled.resolution, Resolution::Verified(..)) {
                self.begin(core, out);
            }
            return;
        }
        if core.is_seed(settled.id) {
            if !core.seeding.done {
                if core.seed_settled(settled, out) {
                    self.begin(core, out);
                }
            } else if let Resolution::Verified(kernel, _) = settled.resolution {
                self.late_seed(core, kernel);
            }
            return;
        }
        let lessons_used = self.lessons_still_used(core, settled.round);
        core.reflect(settled.id, lessons_used, out);
        match self {
            Pacer::Rounds(rounds) => rounds.resolved(core, settled, out),
            Pacer::Steady(steady) => steady.resolved(core, settled),
        }
    }

    /// The search's first round, from the beam the initial kernel or the seeds made.
    fn begin(&mut self, core: &mut Core, out: &mut Out) {
        let Some(best_ms) = core.beam.as_ref().map(|beam| beam.best().time_ms) else {
            return;
        };
        if core.finished.is_some() {
            return;
        }
        match self {
            Pacer::Rounds(rounds) => rounds.start_round(core, 1, out),
            Pacer::Steady(steady) => {
                steady.started = true;
                steady.best_at_round_end_ms = best_ms;
            }
        }
    }

    /// A seed that passed after the first beam was made competes like any kernel: with the
    /// round under way in rounds, at once in steady search.
    fn late_seed(&mut self, core: &mut Core, kernel: RankedKernel) {
        if core.finished.is_some() {
            return;
        }
        match self {
            Pacer::Rounds(rounds) => {
                // It is decided with that round: its caches stay until the round's beam is.
                if let Some(seed) = core.candidates.get_mut(&kernel.id) {
                    seed.round = rounds.round.number;
                }
                rounds.round.results.push(kernel);
            }
            Pacer::Steady(_) => {
                if let Some(beam) = core.beam.as_mut() {
                    beam.admit(kernel);
                }
            }
        }
    }

    /// Plans what there is room for and ends the search when nothing is left (steady search;
    /// rounds move on as their candidates settle, and prepare the next round's certain parents).
    pub(super) fn advance(&mut self, core: &mut Core, out: &mut Out) {
        match self {
            Pacer::Rounds(rounds) => rounds.prepare_certain_parents(core, out),
            Pacer::Steady(steady) => steady.advance(core, out),
        }
    }

    /// The device a candidate's code goes to when its proposal is answered.
    /// In rounds the planned one, unless it was lost (or its node's agent is restarting)
    /// since: then candidate i goes to live device i mod (live devices).
    pub(super) fn device_for_answer(
        &self,
        core: &Core,
        candidate: CandidateId,
        planned: DeviceId,
    ) -> DeviceId {
        match self {
            Pacer::Rounds(_) if !core.is_in_service(planned) => {
                device_for(candidate, &core.live_devices())
            }
            Pacer::Rounds(_) => planned,
            Pacer::Steady(_) => core.first_free_device(),
        }
    }

    /// Whether a lesson drawn now could still reach a prompt: not after the last round's
    /// proposals are all rendered (refinement prompts carry no lessons).
    fn lessons_still_used(&self, core: &Core, round: u32) -> bool {
        match self {
            Pacer::Rounds(_) => round < core.config.search.max_rounds,
            Pacer::Steady(steady) => {
                !steady.plan.complete() || core.parents.values().any(|p| !p.waiting.is_empty())
            }
        }
    }
}

/// The beam as it stands and a round's tally, at the end of a round (or a virtual one).
fn record_round_end(core: &mut Core, round: &Tally, out: &mut Out) {
    core.beam_round = core.beam_round.max(round.number);
    let Some(beam) = core.beam.as_ref() else {
        return;
    };
    let best = beam.best();
    out.push(Decision::Record(beam_updated(round.number, beam)));
    out.push(Decision::Record(Event::RoundFinished(RoundSummary {
        round: round.number,
        proposed: round.proposed,
        verified: round.verified,
        failed: round.failed,
        duplicates: round.duplicates,
        failures: round.failures.clone(),
        best_candidate: best.id,
        best_ms: best.time_ms,
    })));
}

/// The `beam_updated` record of the beam as it stands at the end of `round`.
pub(super) fn beam_updated(round: u32, beam: &Beam) -> Event {
    Event::BeamUpdated {
        round,
        beam: beam
            .members()
            .iter()
            .map(|k| BeamMember {
                candidate: k.id,
                time_ms: k.time_ms,
            })
            .collect(),
    }
}

/// Why the search stops now, if it does: the provider ran dry, the budget is spent, or greedy's
/// patience ran out after `stale_rounds` rounds without a faster kernel.
fn stop_reason(core: &Core, stale_rounds: u32) -> Option<String> {
    let search = core.config.search;
    if let Some(reason) = &core.stopping {
        Some(reason.clone())
    } else if core.exhausted {
        Some("the llm provider has no more proposals".to_string())
    } else if let Some(reason) = core.budget_reached.clone() {
        Some(reason)
    } else if search.kind == SearchKind::Greedy
        && search
            .max_no_improvement
            .is_some_and(|limit| stale_rounds >= limit)
    {
        Some(format!("no faster kernel in {stale_rounds} rounds"))
    } else {
        None
    }
}

/// Whether the references an analysis prompt carries are final: both timed (or failed to), or
/// not timed in this run.
fn references_settled(core: &Core) -> bool {
    !core.config.time_references || core.references_recorded.len() == 2
}

/// Generation's seeds still being written or evaluated: a seed that passes after the first beam
/// competes in the round under way.
fn seeds_unresolved(core: &Core) -> usize {
    if core.config.generation.is_none() {
        return 0;
    }
    core.candidates
        .values()
        .filter(|candidate| candidate.seed && candidate.phase != Phase::Resolved)
        .count()
}

impl Rounds {
    fn start_round(&mut self, core: &mut Core, number: u32, out: &mut Out) {
        let parents: Vec<CandidateId> = core
            .beam
            .as_ref()
            .map(|beam| beam.members().iter().map(|k| k.id).collect())
            .unwrap_or_default();
        let mut planned = plan_round(
            self.next_id,
            &parents,
            &core.config.search,
            &core.live_devices(),
        );
        planned.retain(|candidate| candidate.id.0 <= self.last_id);
        self.next_id += planned.len() as u64;
        self.round = Tally {
            number,
            planned: planned.len() as u32,
            outstanding: planned.len(),
            ..Tally::default()
        };
        out.push(Decision::Record(Event::RoundStarted {
            round: number,
            parents: parents.clone(),
        }));
        for candidate in planned {
            core.plan(candidate, number, out);
        }
        // The parents of earlier rounds propose at once, and only then the new ones, whose
        // preparation starts now (or started ahead, `prepare_certain_parents`), fastest first:
        // their requests for code come in the order they would without the overlap, which the
        // replay provider answers by.
        let (earlier, new): (Vec<CandidateId>, Vec<CandidateId>) = parents
            .into_iter()
            .partition(|parent| core.parents.get(parent).is_some_and(|p| p.round < number));
        core.new_parents = new.iter().copied().collect();
        for parent in earlier.into_iter().chain(new) {
            core.prepare_parent(parent, out);
        }
    }

    /// Overlap of rounds (issue 23): profiles and analyses, ahead of the next round, every
    /// verified kernel certain to be one of its expanded parents, so that their proposals can go
    /// out as soon as the round ends instead of an analysis (and a profile) later.
    ///
    /// A kernel is certain to be among the next round's first P parents (P = the beam's width,
    /// or num_expanding_parents) once the kernels known to rank before it in the beam the round
    /// would end with now, plus the candidates still unresolved (the round's, and seeds that may
    /// still pass), are fewer than P: each unresolved one can push it down one place at most,
    /// and nothing pushes it out otherwise. Its analysis is the one the round's end would ask
    /// for, word for word: the same round and request id, its profile, the references (both
    /// timed before, or not timed in this run), and M bottlenecks, since the beam it would end
    /// with now already holds P kernels, so every expanded parent of the next round gets M
    /// proposals (a round that max_candidates cuts short gives its last parents fewer: no
    /// overlap before one). Proposals are never asked ahead: their prompt carries the best time
    /// so far, which the round's last result can still change, and their requests for code
    /// must follow the round's last refinements, which the replay provider answers by order.
    /// Candidates are numbered, placed and assigned their model at the round's end as without
    /// the overlap, so ids, rounds, bottlenecks and models are unchanged; and their requests go
    /// out in the order they would without it (the earlier rounds' parents' first, then the new
    /// ones', fastest first: `start_round`, `Core::held_back`), so each gets the same replay
    /// file. An analysis carries no lessons, so reflexions answered meanwhile change nothing.
    ///
    /// No overlap where preparing ahead could change what a round's end decides: when the
    /// search stops taking proposals, after the last round, and under stop_at_roofline (the
    /// roofline stop is decided when the beam's best's profile comes back, after the round's
    /// end). Runs with a dollar budget have it off (`overlap_rounds`): an analysis asked ahead
    /// spends before the round's last refinements are asked for.
    fn prepare_certain_parents(&self, core: &mut Core, out: &mut Out) {
        let search = core.config.search;
        let next = self.round.number + 1;
        let next_full = self.next_id + u64::from(search.candidates_per_round()) <= self.last_id + 1;
        if !core.config.overlap_rounds
            || core.config.stop_at_roofline
            || self.round.number == 0
            || self.round.outstanding == 0
            || next > search.max_rounds
            || !next_full
            || core.finished.is_some()
            || core.llm_closed()
            || !references_settled(core)
        {
            return;
        }
        let expanded = search.expanding_parents() as usize;
        let unresolved = self.round.outstanding + seeds_unresolved(core);
        if unresolved >= expanded {
            return;
        }
        let Some(mut beam) = core.beam.clone() else {
            return;
        };
        beam.absorb(self.round.results.clone());
        if beam.members().len() < expanded {
            return;
        }
        let certain: Vec<CandidateId> = beam.members()[..expanded - unresolved]
            .iter()
            .map(|kernel| kernel.id)
            .filter(|id| !core.parents.contains_key(id))
            .collect();
        for id in certain {
            core.prepare_ahead(id, next, out);
        }
    }

    fn resolved(&mut self, core: &mut Core, settled: Settled, out: &mut Out) {
        if settled.round != self.round.number {
            return;
        }
        self.round.count(settled.id, &settled.resolution);
        if let Resolution::Verified(kernel, _) = settled.resolution {
            self.round.results.push(kernel);
        }
        if self.round.outstanding == 0 && core.finished.is_none() {
            self.finish_round(core, out);
        }
    }

    fn finish_round(&mut self, core: &mut Core, out: &mut Out) {
        let mut round = std::mem::take(&mut self.round);
        let Some(beam) = core.beam.as_mut() else {
            return;
        };
        beam.absorb(std::mem::take(&mut round.results));
        let stale_rounds = beam.rounds_without_improvement();
        record_round_end(core, &round, out);
        if round.number == 1
            && let Some(reason) = core.nothing_answered()
        {
            return core.finish(RunOutcome::Failed, reason, out);
        }
        let search = core.config.search;
        let reason = stop_reason(core, stale_rounds).or_else(|| {
            (round.number >= search.max_rounds || self.next_id > self.last_id)
                .then(|| search.total_reason())
        });
        match reason {
            Some(reason) => core.finish(RunOutcome::Completed, reason, out),
            None => self.start_round(core, round.number + 1, out),
        }
    }
}

impl Steady {
    fn resolved(&mut self, core: &mut Core, settled: Settled) {
        self.unresolved = self.unresolved.saturating_sub(1);
        if let Some(round) = self.rounds.get_mut(&settled.round) {
            round.count(settled.id, &settled.resolution);
        }
        if let (Resolution::Verified(kernel, _), Some(beam)) =
            (settled.resolution, core.beam.as_mut())
        {
            beam.admit(kernel);
        }
    }

    /// Whether another candidate may be planned at all: the plan has more, the provider can
    /// still propose, and nothing decided to stop.
    fn can_plan(&self, core: &Core) -> bool {
        self.started
            && core.finished.is_none()
            && !core.llm_closed()
            && self.stopped.is_none()
            && !self.plan.complete()
    }

    /// Whether there is room for another candidate now: fewer proposals are being asked for than
    /// the pace wants (Little's law, at most max_inflight), and fewer than twice that plus one
    /// per device are unresolved (room for the answers that arrive together to queue on the
    /// devices), so that a fast LLM does not propose the whole run from the initial kernel
    /// while the devices work through a queue.
    fn has_room(&self, core: &Core) -> bool {
        let wanted = core.pace.proposals_in_flight(
            core.config.devices.len(),
            self.max_inflight,
            core.config.requests_per_minute,
        );
        core.asking.len() < wanted && self.unresolved < 2 * wanted + core.config.devices.len()
    }

    fn advance(&mut self, core: &mut Core, out: &mut Out) {
        if !self.started || core.finished.is_some() {
            return;
        }
        self.close_rounds(core, out);
        let round = self.rounds.keys().next_back().copied().unwrap_or(1);
        let members: Vec<CandidateId> = core
            .beam
            .as_ref()
            .map(|beam| beam.members().iter().map(|k| k.id).collect())
            .unwrap_or_default();
        if self.can_plan(core) {
            for member in members {
                core.prepare_ahead(member, round, out);
            }
        }
        while self.can_plan(core) && self.has_room(core) {
            self.plan_one(core, out);
        }
        if core.finished.is_some() {
            return;
        }
        self.close_rounds(core, out);
        if core.finished.is_some() || self.unresolved > 0 || self.can_plan(core) {
            return;
        }
        let reason = stop_reason(core, 0)
            .or_else(|| self.stopped.clone())
            .unwrap_or_else(|| core.config.search.total_reason());
        core.finish(RunOutcome::Completed, reason, out);
    }

    /// The kernels the next candidate is taken from: the beam's members that are ready, fastest
    /// first. While none is (its new members are still being profiled or analysed), the fastest
    /// ready kernels verified so far, as many as the beam holds, so that proposals never wait on
    /// an analysis while devices idle; before any is ready, the beam, to wait for it.
    fn parents_now(core: &Core) -> Vec<CandidateId> {
        let beam: Vec<CandidateId> = core
            .beam
            .as_ref()
            .map(|beam| beam.members().iter().map(|k| k.id).collect())
            .unwrap_or_default();
        let ready: Vec<CandidateId> = beam
            .iter()
            .copied()
            .filter(|id| core.parent_ready(*id))
            .collect();
        if !ready.is_empty() {
            return ready;
        }
        let mut verified: Vec<(CandidateId, f64)> =
            core.verified_ms.iter().map(|(id, ms)| (*id, *ms)).collect();
        verified.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
        let fallback: Vec<CandidateId> = verified
            .into_iter()
            .map(|(id, _)| id)
            .filter(|id| core.parent_ready(*id))
            .take(beam.len().max(1))
            .collect();
        if fallback.is_empty() { beam } else { fallback }
    }

    fn plan_one(&mut self, core: &mut Core, out: &mut Out) {
        let device = core.first_free_device();
        let parents = Self::parents_now(core);
        let Some(planned) = self.plan.next(&parents, device) else {
            return;
        };
        let numbered = CandidateId(planned.id.0 + 1 - core.config.first_search_id());
        let round = virtual_round(numbered, &core.config.search);
        self.unresolved += 1;
        let started = !self.rounds.contains_key(&round);
        let tally = self.rounds.entry(round).or_insert_with(|| Tally {
            number: round,
            ..Tally::default()
        });
        tally.planned += 1;
        tally.outstanding += 1;
        if started {
            out.push(Decision::Record(Event::RoundStarted { round, parents }));
        }
        core.plan(planned, round, out);
        core.prepare_parent(planned.parent, out);
    }

    /// Finishes the oldest virtual rounds whose candidates are all planned (or will not be) and
    /// resolved, in order, so that round_finished records come as in rounds mode.
    fn close_rounds(&mut self, core: &mut Core, out: &mut Out) {
        let per_round = core.config.search.candidates_per_round();
        loop {
            let can_plan = self.can_plan(core);
            let Some(entry) = self.rounds.first_entry() else {
                return;
            };
            let round = entry.get();
            if round.outstanding > 0 || (round.planned < per_round && can_plan) {
                return;
            }
            let round = entry.remove();
            let Some(beam) = core.beam.as_mut() else {
                return;
            };
            beam.end_round(self.best_at_round_end_ms);
            self.best_at_round_end_ms = beam.best().time_ms;
            let stale_rounds = beam.rounds_without_improvement();
            let search = core.config.search;
            if search.kind == SearchKind::Greedy
                && search
                    .max_no_improvement
                    .is_some_and(|limit| stale_rounds >= limit)
                && self.stopped.is_none()
            {
                self.stopped = Some(format!("no faster kernel in {stale_rounds} rounds"));
            }
            record_round_end(core, &round, out);
            if round.number == 1
                && let Some(reason) = core.nothing_answered()
            {
                return core.finish(RunOutcome::Failed, reason, out);
            }
        }
    }
}
