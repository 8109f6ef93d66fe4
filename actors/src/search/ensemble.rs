//! Several models sharing a run's proposals by weight (KernelAgent's `models`, issue 22). Which
//! model a prompt goes to is a function of its position alone, so that a resumed run and the
//! replay provider give every candidate the model it had.

use serde::{Deserialize, Serialize};

/// One model of an ensemble and its weight: it gets `weight` of every `total weight` prompts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelShare {
    pub name: String,
    pub weight: u32,
}

/// The models of a run that has several, and the order their prompts come in; empty for a
/// run of one model, whose records name none.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ensemble {
    shares: Vec<ModelShare>,
    /// One period of the assignment: the index into `shares` of each position, the total
    /// weight long, each model `weight` times and spread out (smooth weighted round-robin).
    cycle: Vec<usize>,
}

impl Ensemble {
    /// The ensemble of `shares`; weights of 0 count as 1.
    pub fn new(shares: Vec<ModelShare>) -> Ensemble {
        let weights: Vec<i64> = shares.iter().map(|s| i64::from(s.weight.max(1))).collect();
        let total: i64 = weights.iter().sum();
        let mut current = vec![0i64; shares.len()];
        let mut cycle = Vec::with_capacity(total as usize);
        for _ in 0..total {
            for (credit, weight) in current.iter_mut().zip(&weights) {
                *credit += weight;
            }
            let chosen = (0..current.len())
                .max_by_key(|&i| (current[i], std::cmp::Reverse(i)))
                .expect("an ensemble with a weight has a model");
            current[chosen] -= total;
            cycle.push(chosen);
        }
        Ensemble { shares, cycle }
    }

    /// The models, as configured.
    pub fn shares(&self) -> &[ModelShare] {
        &self.shares
    }

    /// How many models share the proposals (1 for a run of one model).
    pub fn len(&self) -> u32 {
        self.shares.len().max(1) as u32
    }

    pub fn is_empty(&self) -> bool {
        self.shares.is_empty()
    }

    /// The model of the prompt at `position` (0-based, counted from the search's first
    /// candidate, or among the seeds); `None` for a run of one model.
    pub fn model_at(&self, position: u64) -> Option<&str> {
        if self.cycle.is_empty() {
            return None;
        }
        let index = self.cycle[(position % self.cycle.len() as u64) as usize];
        Some(&self.shares[index].name)
    }

    /// The model that analyses parents: the first listed.
    pub fn lead(&self) -> Option<&str> {
        self.shares.first().map(|share| share.name.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ensemble(shares: &[(&str, u32)]) -> Ensemble {
        Ensemble::new(
            shares
                .iter()
                .map(|(name, weight)| ModelShare {
                    name: name.to_string(),
                    weight: *weight,
                })
                .collect(),
        )
    }

    fn first(ensemble: &Ensemble, count: u64) -> Vec<&str> {
        (0..count).map(|p| ensemble.model_at(p).unwrap()).collect()
    }

    #[test]
    fn equal_weights_take_turns_in_the_listed_order_as_kernelagent_fans_out() {
        let three = ensemble(&[("a", 1), ("b", 1), ("c", 1)]);
        assert_eq!(first(&three, 6), ["a", "b", "c", "a", "b", "c"]);
    }

    #[test]
    fn weights_share_every_period_exactly_and_spread_each_model_out() {
        let uneven = ensemble(&[("a", 3), ("b", 1)]);
        assert_eq!(first(&uneven, 8), ["a", "a", "b", "a", "a", "a", "b", "a"]);
        let wide = ensemble(&[("a", 5), ("b", 2), ("c", 1)]);
        let period = first(&wide, 8);
        for (name, weight) in [("a", 5), ("b", 2), ("c", 1)] {
            assert_eq!(period.iter().filter(|m| **m == name).count(), weight);
        }
        assert_ne!(
            period[0..2],
            ["a", "a"],
            "the heaviest does not take a run of turns"
        );
    }

    #[test]
    fn a_position_always_gets_the_same_model() {
        let uneven = ensemble(&[("a", 2), ("b", 1)]);
        assert_eq!(uneven.model_at(1_000_001), uneven.model_at(1_000_001 % 3));
    }

    #[test]
    fn a_run_of_one_model_names_none() {
        let single = Ensemble::default();
        assert_eq!(single.model_at(0), None);
        assert_eq!(single.len(), 1);
    }
}
