//! How many proposals steady search keeps asked for, by Little's law: to keep every device busy,
//! proposals must arrive as fast as the devices evaluate them (devices / evaluation seconds), and
//! each is in flight for the LLM's latency, so about devices × latency / evaluation proposals
//! must be out at once. Both figures are the medians of the latest ones the journal holds
//! (`latency_s` of `proposal_received`, `seconds` of `evaluated`), so the fold computes the same
//! number the live run did.

use std::collections::VecDeque;

/// How many of the latest figures the medians are taken over.
const WINDOW: usize = 32;

/// Asked for beyond the law's figure, for the variance of both medians.
const HEADROOM: f64 = 1.25;

/// Before any figure is known: an LLM is commonly about ten times slower than an evaluation.
const ASSUMED_LATENCY_OVER_EVALUATION: usize = 10;

#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Pace {
    latencies_s: VecDeque<f64>,
    evaluations_s: VecDeque<f64>,
}

fn push(figures: &mut VecDeque<f64>, figure: Option<f64>) {
    let Some(figure) = figure.filter(|f| f.is_finite() && *f >= 0.0) else {
        return;
    };
    if figures.len() == WINDOW {
        figures.pop_front();
    }
    figures.push_back(figure);
}

fn median(figures: &VecDeque<f64>) -> Option<f64> {
    let mut sorted: Vec<f64> = figures.iter().copied().collect();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied()
}

impl Pace {
    pub(super) fn latency(&mut self, seconds: Option<f64>) {
        push(&mut self.latencies_s, seconds);
    }

    pub(super) fn evaluation(&mut self, seconds: Option<f64>) {
        push(&mut self.evaluations_s, seconds);
    }

    /// The proposals to keep asked for with `devices` devices: at least one per device, at most
    /// `cap` (max_inflight), and no more than `requests_per_minute` lets through in one latency.
    pub(super) fn proposals_in_flight(
        &self,
        devices: usize,
        cap: usize,
        requests_per_minute: Option<u32>,
    ) -> usize {
        let devices = devices.max(1);
        let latency = median(&self.latencies_s);
        let wanted = match (latency, median(&self.evaluations_s)) {
            (Some(latency), Some(evaluation)) if evaluation > 0.0 => {
                let law = devices as f64 * latency / evaluation * HEADROOM;
                devices + law.min(cap as f64).ceil() as usize
            }
            _ => devices * ASSUMED_LATENCY_OVER_EVALUATION,
        };
        let by_rate = match (requests_per_minute, latency) {
            (Some(rpm), Some(latency)) => {
                (f64::from(rpm) * latency / 60.0).min(cap as f64).ceil() as usize
            }
            _ => usize::MAX,
        };
        wanted.min(by_rate).clamp(1, cap.max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pace(latency: f64, evaluation: f64) -> Pace {
        let mut pace = Pace::default();
        pace.latency(Some(latency));
        pace.evaluation(Some(evaluation));
        pace
    }

    #[test]
    fn enough_proposals_are_out_to_cover_the_latency_at_the_devices_rate() {
        // 8 devices, 0.2 s an evaluation, 2 s a reply: 80 by the law, with headroom and one per
        // device on top.
        assert_eq!(pace(2.0, 0.2).proposals_in_flight(8, 1024, None), 108);
        assert_eq!(pace(0.2, 2.0).proposals_in_flight(8, 1024, None), 9);
    }

    #[test]
    fn max_inflight_and_the_request_rate_bound_it() {
        assert_eq!(pace(2.0, 0.2).proposals_in_flight(8, 32, None), 32);
        assert_eq!(pace(2.0, 0.2).proposals_in_flight(8, 1024, Some(600)), 20);
    }

    #[test]
    fn before_any_figure_ten_per_device_are_asked_for() {
        assert_eq!(Pace::default().proposals_in_flight(4, 1024, None), 40);
        assert_eq!(Pace::default().proposals_in_flight(4, 16, None), 16);
    }

    #[test]
    fn figures_from_outside_that_are_not_durations_are_ignored() {
        let mut pace = Pace::default();
        for bad in [f64::NAN, f64::INFINITY, -1.0] {
            pace.latency(Some(bad));
            pace.evaluation(Some(bad));
        }
        assert_eq!(pace, Pace::default());
    }
}
