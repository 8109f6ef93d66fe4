//! Search strategies as plain data: which parents a round expands, how its candidates are
//! numbered and pinned, and which kernels survive. The Manager drives them; tests call them
//! directly.

use std::collections::{BTreeMap, HashMap};

use crate::model::{CandidateId, DeviceId, RankedKernel};

mod ensemble;
pub use ensemble::{Ensemble, ModelShare};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SearchKind {
    /// Keep the `num_top_kernels` fastest verified kernels as parents.
    Beam,
    /// One parent; stop after `max_no_improvement` rounds without a faster kernel.
    Greedy,
}

impl SearchKind {
    pub fn name(self) -> &'static str {
        match self {
            SearchKind::Beam => "beam_search",
            SearchKind::Greedy => "greedy",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SearchSettings {
    pub kind: SearchKind,
    /// N: the beam's width (1 for greedy).
    pub num_top_kernels: u32,
    /// M: proposals per parent, each aimed at a different bottleneck.
    pub num_bottlenecks: u32,
    pub max_rounds: u32,
    pub max_no_improvement: Option<u32>,
    /// The most candidates the run makes (max_candidates), the initial kernel not counted.
    pub max_candidates: Option<u64>,
    /// How each of a parent's bottlenecks fans out: over models, and samples of one prompt.
    pub fan_out: FanOut,
}

/// KernelAgent's expansion keys (its PR #139): P of the N parents expanded, each of their M
/// bottlenecks asked of K models, C samples of each prompt: P × M × K × C proposals a round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FanOut {
    /// P (num_expanding_parents): the beam's fastest P are expanded; `None`: all N.
    pub expanding_parents: Option<u32>,
    /// K: the models sharing the proposals (1 without `models`).
    pub models: u32,
    /// C (samples_per_prompt): proposals drawn from one prompt.
    pub samples_per_prompt: u32,
}

impl Default for FanOut {
    fn default() -> Self {
        FanOut {
            expanding_parents: None,
            models: 1,
            samples_per_prompt: 1,
        }
    }
}

impl SearchSettings {
    pub fn candidates_per_round(&self) -> u32 {
        self.expanding_parents() * self.num_bottlenecks * self.per_bottleneck()
    }

    /// P: how many of the beam's parents a round expands.
    pub fn expanding_parents(&self) -> u32 {
        self.fan_out
            .expanding_parents
            .map_or(self.num_top_kernels, |p| p.min(self.num_top_kernels))
    }

    /// K × C: the proposals one bottleneck of a parent gets, from K prompts of C samples.
    pub fn per_bottleneck(&self) -> u32 {
        self.fan_out.models.max(1) * self.fan_out.samples_per_prompt.max(1)
    }

    /// The candidates a whole run makes: max_rounds rounds of N × M, or max_candidates if fewer.
    pub fn total_candidates(&self) -> u64 {
        let by_rounds = u64::from(self.max_rounds) * u64::from(self.candidates_per_round());
        self.max_candidates
            .map_or(by_rounds, |cap| cap.min(by_rounds))
    }

    /// Why the run's candidates are all made: the limit that bounds the total.
    pub fn total_reason(&self) -> String {
        let by_rounds = u64::from(self.max_rounds) * u64::from(self.candidates_per_round());
        match self.max_candidates {
            Some(cap) if cap < by_rounds => format!("max_candidates ({cap}) reached"),
            _ => format!("max_rounds ({}) reached", self.max_rounds),
        }
    }
}

/// How the Manager paces the search.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pacing {
    /// A round's N × M proposals go out together; the next round starts when the last of them
    /// is resolved.
    Rounds,
    /// Up to `max_inflight` proposals are always being asked for: each answer or resolved
    /// candidate lets the next one be planned, and a candidate goes to the first free device.
    Steady { max_inflight: usize },
}

impl Pacing {
    pub fn name(self) -> &'static str {
        match self {
            Pacing::Rounds => "rounds",
            Pacing::Steady { .. } => "steady",
        }
    }
}

/// The round a candidate of a steady search is reported in: candidates 1 to N × M make round 1,
/// and so on, so that the journal and the report read as in rounds mode.
pub fn virtual_round(id: CandidateId, settings: &SearchSettings) -> u32 {
    assert!(id.0 >= 1, "the initial kernel belongs to no round");
    let per_round = u64::from(settings.candidates_per_round().max(1));
    1 + ((id.0 - 1) / per_round) as u32
}

/// The device candidate i is pinned to in rounds, and where a parent is profiled: device
/// i mod n, round-robin.
pub fn device_for(id: CandidateId, devices: &[DeviceId]) -> DeviceId {
    assert!(!devices.is_empty(), "a run has at least one device");
    devices[(id.0 % devices.len() as u64) as usize]
}

/// The device with the fewest evaluations queued or running; ties go to the lowest id.
pub fn first_free_device(load: &BTreeMap<DeviceId, usize>) -> DeviceId {
    let (device, _) = load
        .iter()
        .min_by_key(|(device, queued)| (**queued, **device))
        .expect("a run has at least one device");
    *device
}

/// A steady search's candidates, one at a time: numbered on from 1 (or after the seeds), parents taken in turn over
/// the beam as it stands (fastest first, its first P), each parent's proposals cycling over its M
/// bottlenecks, K × C in a row on each (one per model and sample); max_rounds × P × M × K × C in
/// all.
#[derive(Clone, Debug, PartialEq)]
pub struct SteadyPlan {
    settings: SearchSettings,
    next_id: u64,
    /// The last candidate it plans: numbers before `next_id`'s start are generation's seeds.
    last_id: u64,
    turn: usize,
    proposals_per_parent: HashMap<CandidateId, u32>,
    /// The parent and bottleneck the last candidate took, and how many of its K × C it had.
    group: Option<(CandidateId, u32, u32)>,
}

impl SteadyPlan {
    /// A plan numbering its candidates on from `first_id` (1, or the first after the seeds).
    pub fn new(settings: SearchSettings, first_id: u64) -> Self {
        SteadyPlan {
            settings,
            next_id: first_id,
            last_id: first_id - 1 + settings.total_candidates(),
            turn: 0,
            proposals_per_parent: HashMap::new(),
            group: None,
        }
    }

    /// Whether every candidate of the run has been planned.
    pub fn complete(&self) -> bool {
        self.next_id > self.last_id
    }

    /// The next candidate from `parents` (the beam, fastest first), pinned provisionally to
    /// `device`; `None` once the run's candidates are all planned or there is no parent.
    pub fn next(&mut self, parents: &[CandidateId], device: DeviceId) -> Option<PlannedCandidate> {
        if self.complete() || parents.is_empty() {
            return None;
        }
        let (parent, proposal_index) = match self.group {
            Some((parent, index, taken)) if taken < self.settings.per_bottleneck() => {
                self.group = Some((parent, index, taken + 1));
                (parent, index)
            }
            _ => {
                let expanded = &parents[..parents
                    .len()
                    .min(self.settings.expanding_parents() as usize)];
                let parent = expanded[self.turn % expanded.len()];
                self.turn += 1;
                let count = self.proposals_per_parent.entry(parent).or_insert(0);
                let index = *count % self.settings.num_bottlenecks.max(1);
                *count += 1;
                self.group = Some((parent, index, 1));
                (parent, index)
            }
        };
        let id = CandidateId(self.next_id);
        self.next_id += 1;
        Some(PlannedCandidate {
            id,
            parent,
            proposal_index,
            device,
        })
    }
}

/// One candidate of a round, before its proposal exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlannedCandidate {
    pub id: CandidateId,
    pub parent: CandidateId,
    /// 0-based among the parent's proposals; proposals of one parent take different bottlenecks.
    pub proposal_index: u32,
    pub device: DeviceId,
}

/// Numbers a round's candidates from `next_id`, parent by parent then bottleneck by bottleneck
/// (K × C candidates in a row on each, one per model and sample), and pins candidate i to
/// `devices[i mod devices.len()]`. Only the beam's first P parents are expanded. A round always
/// has P × M × K × C candidates: when the beam holds fewer than P parents (round 1 holds only the
/// initial kernel), the missing parents' proposals go to the parents there are, in turn, as
/// KernelAgent expands its first round.
pub fn plan_round(
    next_id: u64,
    parents: &[CandidateId],
    settings: &SearchSettings,
    devices: &[DeviceId],
) -> Vec<PlannedCandidate> {
    assert!(!devices.is_empty(), "a run has at least one device");
    if parents.is_empty() {
        return Vec::new();
    }
    let parents = &parents[..parents.len().min(settings.expanding_parents() as usize)];
    let per_bottleneck = settings.per_bottleneck();
    let total = (settings.candidates_per_round() / per_bottleneck) as usize;
    let mut counts = vec![0u32; parents.len()];
    for slot in 0..total {
        let parent_slot = if slot < parents.len() * settings.num_bottlenecks as usize {
            slot / settings.num_bottlenecks as usize
        } else {
            slot % parents.len()
        };
        counts[parent_slot] += 1;
    }
    let mut planned = Vec::with_capacity(total * per_bottleneck as usize);
    let mut id = next_id;
    for (parent, count) in parents.iter().zip(counts) {
        for proposal_index in 0..count {
            for _ in 0..per_bottleneck {
                planned.push(PlannedCandidate {
                    id: CandidateId(id),
                    parent: *parent,
                    proposal_index,
                    device: device_for(CandidateId(id), devices),
                });
                id += 1;
            }
        }
    }
    planned
}

/// The kernels kept as parents, fastest first.
#[derive(Clone, Debug, PartialEq)]
pub struct Beam {
    width: usize,
    members: Vec<RankedKernel>,
    rounds_without_improvement: u32,
}

impl Beam {
    pub fn new(initial: RankedKernel, width: u32) -> Self {
        Beam {
            width: width.max(1) as usize,
            members: vec![initial],
            rounds_without_improvement: 0,
        }
    }

    pub fn members(&self) -> &[RankedKernel] {
        &self.members
    }

    pub fn best(&self) -> &RankedKernel {
        &self.members[0]
    }

    pub fn rounds_without_improvement(&self) -> u32 {
        self.rounds_without_improvement
    }

    /// Keeps the `width` fastest of the old beam and the round's verified results; a source
    /// already in the beam is not taken twice. Returns whether the best time improved.
    pub fn absorb(&mut self, results: Vec<RankedKernel>) -> bool {
        let previous_best = self.best().time_ms;
        for result in results {
            self.admit(result);
        }
        self.end_round(previous_best)
    }

    /// Takes one verified result as it arrives (steady search): kept if it is among the
    /// `width` fastest and the same kernel (comments and spacing aside) is not in the beam yet.
    /// Rounds are not counted.
    pub fn admit(&mut self, result: RankedKernel) {
        let key = result.source.same_code_key();
        if self
            .members
            .iter()
            .all(|member| member.source.same_code_key() != key)
        {
            self.members.push(result);
        }
        self.members
            .sort_by(|a, b| a.time_ms.total_cmp(&b.time_ms).then(a.id.cmp(&b.id)));
        self.members.truncate(self.width);
    }

    /// Counts a round that ended: whether the best time now beats `previous_best_ms`, the best
    /// when the round before it ended. Returns whether it improved.
    pub fn end_round(&mut self, previous_best_ms: f64) -> bool {
        let improved = self.best().time_ms < previous_best_ms;
        if improved {
            self.rounds_without_improvement = 0;
        } else {
            self.rounds_without_improvement += 1;
        }
        improved
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::KernelSource;

    fn settings(n: u32, m: u32) -> SearchSettings {
        SearchSettings {
            kind: SearchKind::Beam,
            num_top_kernels: n,
            num_bottlenecks: m,
            max_rounds: 3,
            max_no_improvement: None,
            max_candidates: None,
            fan_out: FanOut::default(),
        }
    }

    fn fanned(n: u32, m: u32, fan_out: FanOut) -> SearchSettings {
        SearchSettings {
            fan_out,
            ..settings(n, m)
        }
    }

    fn devices(n: u32) -> Vec<DeviceId> {
        (0..n).map(DeviceId).collect()
    }

    fn kernel(id: u64, time_ms: f64) -> RankedKernel {
        RankedKernel {
            id: CandidateId(id),
            source: KernelSource::new(format!("k{id}")),
            time_ms,
            launched_kernels: Vec::new(),
        }
    }

    /// Plans a round and compares each planned candidate, written `candidate←parent#proposal@device`.
    fn check(next_id: u64, parents: &[u64], (n, m): (u32, u32), gpus: u32, expected: &str) {
        check_with(next_id, parents, &settings(n, m), gpus, expected)
    }

    fn check_with(
        next_id: u64,
        parents: &[u64],
        settings: &SearchSettings,
        gpus: u32,
        expected: &str,
    ) {
        let parents: Vec<CandidateId> = parents.iter().copied().map(CandidateId).collect();
        let planned = plan_round(next_id, &parents, settings, &devices(gpus));
        let actual: Vec<String> = planned
            .iter()
            .map(|p| {
                format!(
                    "{}←{}#{}@{}",
                    p.id.0, p.parent.0, p.proposal_index, p.device.0
                )
            })
            .collect();
        assert_eq!(actual.join(" "), expected);
    }

    #[test]
    fn round_one_expands_the_initial_kernel_n_times_m() {
        check(1, &[0], (2, 2), 4, "1←0#0@1 2←0#1@2 3←0#2@3 4←0#3@0");
    }

    #[test]
    fn later_rounds_give_each_parent_m_proposals_parent_by_parent() {
        check(5, &[3, 1], (2, 2), 4, "5←3#0@1 6←3#1@2 7←1#0@3 8←1#1@0");
    }

    #[test]
    fn candidates_fan_out_round_robin_whatever_the_worker_count() {
        check(
            1,
            &[0],
            (2, 3),
            2,
            "1←0#0@1 2←0#1@0 3←0#2@1 4←0#3@0 5←0#4@1 6←0#5@0",
        );
        check(1, &[0], (1, 2), 1, "1←0#0@0 2←0#1@0");
    }

    #[test]
    fn a_short_beam_still_makes_n_times_m_candidates() {
        check(
            9,
            &[7, 8],
            (3, 2),
            3,
            "9←7#0@0 10←7#1@1 11←7#2@2 12←8#0@0 13←8#1@1 14←8#2@2",
        );
    }

    /// Issue 22: KernelAgent's P × M × K × C, each bottleneck's K × C proposals in a row.
    #[test]
    fn each_bottleneck_fans_out_over_models_and_samples_in_a_row() {
        let fan_out = FanOut {
            expanding_parents: None,
            models: 2,
            samples_per_prompt: 2,
        };
        check_with(
            3,
            &[1, 2],
            &fanned(2, 1, fan_out),
            1,
            "3←1#0@0 4←1#0@0 5←1#0@0 6←1#0@0 7←2#0@0 8←2#0@0 9←2#0@0 10←2#0@0",
        );
    }

    #[test]
    fn only_the_first_p_parents_are_expanded() {
        let fan_out = FanOut {
            expanding_parents: Some(1),
            ..FanOut::default()
        };
        let settings = fanned(3, 2, fan_out);
        assert_eq!(settings.candidates_per_round(), 2);
        check_with(5, &[4, 2, 3], &settings, 1, "5←4#0@0 6←4#1@0");
    }

    #[test]
    fn a_steady_plan_keeps_a_bottleneck_for_its_models_and_samples() {
        let fan_out = FanOut {
            expanding_parents: Some(1),
            models: 2,
            samples_per_prompt: 1,
        };
        let mut plan = SteadyPlan::new(fanned(2, 2, fan_out), 1);
        assert_eq!(
            steady(&mut plan, &[7, 8], 5),
            vec![(1, 7, 0), (2, 7, 0), (3, 7, 1), (4, 7, 1), (5, 7, 0)]
        );
    }

    #[test]
    fn beam_keeps_the_n_fastest_of_old_and_new() {
        let mut beam = Beam::new(kernel(0, 10.0), 2);
        assert!(beam.absorb(vec![kernel(1, 12.0), kernel(2, 8.0), kernel(3, 9.0)]));
        let ids: Vec<u64> = beam.members().iter().map(|k| k.id.0).collect();
        assert_eq!(ids, vec![2, 3]);
        assert!(!beam.absorb(vec![kernel(4, 9.5)]));
        assert_eq!(beam.rounds_without_improvement(), 1);
        let ids: Vec<u64> = beam.members().iter().map(|k| k.id.0).collect();
        assert_eq!(ids, vec![2, 3]);
    }

    #[test]
    fn the_initial_kernel_stays_when_nothing_beats_it() {
        let mut beam = Beam::new(kernel(0, 1.0), 2);
        assert!(!beam.absorb(vec![kernel(1, 3.0)]));
        assert_eq!(beam.best().id, CandidateId::INITIAL);
        assert_eq!(beam.members().len(), 2);
    }

    #[test]
    fn an_identical_source_is_not_kept_twice() {
        let mut beam = Beam::new(kernel(0, 10.0), 3);
        let twin = RankedKernel {
            id: CandidateId(5),
            source: KernelSource::new("k0"),
            time_ms: 9.0,
            launched_kernels: Vec::new(),
        };
        beam.absorb(vec![twin]);
        assert_eq!(beam.members().len(), 1);
    }

    #[test]
    fn a_kernel_is_tokenized_once_however_many_kernels_it_is_compared_with() {
        // A resume meets every result of the run again: comparing each with the whole beam by
        // tokenizing both sides made the fold of 50,000 candidates take 12 s.
        let tokenized = || crate::tokens::TOKENIZED.with(std::cell::Cell::get);
        let before = tokenized();
        let mut beam = Beam::new(kernel(0, 1000.0), 4);
        for id in 1..=200 {
            beam.admit(kernel(id, 1000.0 - id as f64));
        }
        assert_eq!(beam.members().len(), 4);
        assert_eq!(tokenized() - before, 201);
    }

    #[test]
    fn virtual_rounds_hold_n_times_m_candidates_each() {
        let rounds: Vec<u32> = (1..=9)
            .map(|id| virtual_round(CandidateId(id), &settings(2, 2)))
            .collect();
        assert_eq!(rounds, vec![1, 1, 1, 1, 2, 2, 2, 2, 3]);
    }

    #[test]
    fn the_first_free_device_has_the_fewest_queued_and_the_lowest_id_on_ties() {
        let load: BTreeMap<DeviceId, usize> =
            [(DeviceId(0), 2), (DeviceId(1), 1), (DeviceId(2), 1)].into();
        assert_eq!(first_free_device(&load), DeviceId(1));
        let idle: BTreeMap<DeviceId, usize> = [(DeviceId(3), 0), (DeviceId(1), 0)].into();
        assert_eq!(first_free_device(&idle), DeviceId(1));
    }

    /// (candidate, parent, proposal) of each candidate planned from `parents` in turn.
    fn steady(plan: &mut SteadyPlan, parents: &[u64], count: usize) -> Vec<(u64, u64, u32)> {
        let parents: Vec<CandidateId> = parents.iter().copied().map(CandidateId).collect();
        (0..count)
            .map_while(|_| plan.next(&parents, DeviceId(0)))
            .map(|p| (p.id.0, p.parent.0, p.proposal_index))
            .collect()
    }

    #[test]
    fn a_steady_plan_cycles_parents_and_each_parents_bottlenecks() {
        let mut plan = SteadyPlan::new(settings(2, 2), 1);
        assert_eq!(
            steady(&mut plan, &[0], 3),
            vec![(1, 0, 0), (2, 0, 1), (3, 0, 0)]
        );
        assert_eq!(
            steady(&mut plan, &[4, 0], 4),
            vec![(4, 0, 1), (5, 4, 0), (6, 0, 0), (7, 4, 1)]
        );
    }

    #[test]
    fn a_steady_plan_ends_after_max_rounds_times_n_times_m() {
        let mut plan = SteadyPlan::new(settings(2, 2), 1);
        assert_eq!(steady(&mut plan, &[0], 20).len(), 12);
        assert!(plan.complete());
        assert_eq!(plan.next(&[CandidateId(0)], DeviceId(0)), None);
    }

    #[test]
    fn a_beam_admits_results_one_by_one_and_counts_rounds_apart() {
        let mut beam = Beam::new(kernel(0, 10.0), 2);
        beam.admit(kernel(1, 12.0));
        beam.admit(kernel(2, 8.0));
        let ids: Vec<u64> = beam.members().iter().map(|k| k.id.0).collect();
        assert_eq!(ids, vec![2, 0]);
        assert_eq!(beam.rounds_without_improvement(), 0);
        assert!(!beam.end_round(8.0));
        assert_eq!(beam.rounds_without_improvement(), 1);
        assert!(beam.end_round(9.0));
        assert_eq!(beam.rounds_without_improvement(), 0);
    }
}
