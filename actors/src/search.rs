//! Search strategies as plain data: which parents a round expands, how its candidates are
//! numbered and pinned, and which kernels survive. The Manager drives them; tests call them
//! directly.

use crate::model::{CandidateId, DeviceId, RankedKernel};

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
}

impl SearchSettings {
    pub fn candidates_per_round(&self) -> u32 {
        self.num_top_kernels * self.num_bottlenecks
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

/// Numbers a round's candidates from `next_id`, parent by parent then proposal by proposal, and
/// pins candidate i to `devices[i mod devices.len()]`. A round always has N × M candidates: when
/// the beam holds fewer than N parents (round 1 holds only the initial kernel), the missing
/// parents' proposals go to the parents there are, in turn, as KernelAgent expands its first round.
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
    let total = settings.candidates_per_round() as usize;
    let mut counts = vec![0u32; parents.len()];
    for slot in 0..total {
        let parent_slot = if slot < parents.len() * settings.num_bottlenecks as usize {
            slot / settings.num_bottlenecks as usize
        } else {
            slot % parents.len()
        };
        counts[parent_slot] += 1;
    }
    let mut planned = Vec::with_capacity(total);
    let mut id = next_id;
    for (parent, count) in parents.iter().zip(counts) {
        for proposal_index in 0..count {
            planned.push(PlannedCandidate {
                id: CandidateId(id),
                parent: *parent,
                proposal_index,
                device: devices[(id % devices.len() as u64) as usize],
            });
            id += 1;
        }
    }
    planned
}

/// The kernels kept as parents, fastest first.
#[derive(Clone, Debug)]
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
            if self
                .members
                .iter()
                .all(|member| member.source != result.source)
            {
                self.members.push(result);
            }
        }
        self.members
            .sort_by(|a, b| a.time_ms.total_cmp(&b.time_ms).then(a.id.cmp(&b.id)));
        self.members.truncate(self.width);
        let improved = self.best().time_ms < previous_best;
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

    /// (candidate, parent, proposal, device) of each planned candidate.
    fn check(
        next_id: u64,
        parents: &[u64],
        n: u32,
        m: u32,
        gpus: u32,
        expected: &[(u64, u64, u32, u32)],
    ) {
        let parents: Vec<CandidateId> = parents.iter().copied().map(CandidateId).collect();
        let planned = plan_round(next_id, &parents, &settings(n, m), &devices(gpus));
        let actual: Vec<(u64, u64, u32, u32)> = planned
            .iter()
            .map(|p| (p.id.0, p.parent.0, p.proposal_index, p.device.0))
            .collect();
        assert_eq!(actual, expected);
    }

    #[test]
    fn round_one_expands_the_initial_kernel_n_times_m() {
        check(
            1,
            &[0],
            2,
            2,
            4,
            &[(1, 0, 0, 1), (2, 0, 1, 2), (3, 0, 2, 3), (4, 0, 3, 0)],
        );
    }

    #[test]
    fn later_rounds_give_each_parent_m_proposals_parent_by_parent() {
        check(
            5,
            &[3, 1],
            2,
            2,
            4,
            &[(5, 3, 0, 1), (6, 3, 1, 2), (7, 1, 0, 3), (8, 1, 1, 0)],
        );
    }

    #[test]
    fn candidates_fan_out_round_robin_whatever_the_worker_count() {
        check(
            1,
            &[0],
            2,
            3,
            2,
            &[
                (1, 0, 0, 1),
                (2, 0, 1, 0),
                (3, 0, 2, 1),
                (4, 0, 3, 0),
                (5, 0, 4, 1),
                (6, 0, 5, 0),
            ],
        );
        check(1, &[0], 1, 2, 1, &[(1, 0, 0, 0), (2, 0, 1, 0)]);
    }

    #[test]
    fn a_short_beam_still_makes_n_times_m_candidates() {
        check(
            9,
            &[7, 8],
            3,
            2,
            3,
            &[
                (9, 7, 0, 0),
                (10, 7, 1, 1),
                (11, 7, 2, 2),
                (12, 8, 0, 0),
                (13, 8, 1, 1),
                (14, 8, 2, 2),
            ],
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
}
