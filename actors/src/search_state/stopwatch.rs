//! The figures steady search's pace is measured in (`pace.rs`), as the Manager takes them: a
//! proposal's latency from its request's sending to its reply, and the seconds a device spent
//! on an evaluation. The Manager reads the run's clock and passes each moment in; nothing here
//! reads a clock.

use std::collections::{BTreeMap, HashMap};
use std::time::SystemTime;

use crate::journal::Event;
use crate::model::{CandidateId, DeviceId};

use super::Evaluation;

#[derive(Clone, Debug, Default)]
pub struct Stopwatch {
    asked_at: HashMap<String, SystemTime>,
    dispatched_at: HashMap<(CandidateId, u32), SystemTime>,
    /// When each device gave its latest result: an evaluation queued behind another starts then.
    device_free_at: BTreeMap<DeviceId, SystemTime>,
}

fn seconds(from: SystemTime, to: SystemTime) -> Option<f64> {
    to.duration_since(from).ok().map(|d| d.as_secs_f64())
}

impl Stopwatch {
    pub fn asked(&mut self, request_id: &str, at: SystemTime) {
        self.asked_at.insert(request_id.to_string(), at);
    }

    /// Seconds from a request's sending to its reply `at`.
    pub fn answered(&mut self, request_id: &str, at: SystemTime) -> Option<f64> {
        seconds(self.asked_at.remove(request_id)?, at)
    }

    pub fn dispatched(&mut self, evaluation: &Evaluation, at: SystemTime) {
        let attempt = (evaluation.candidate, evaluation.attempt);
        self.dispatched_at.insert(attempt, at);
    }

    /// An evaluation's record, ended `at`, with the seconds its device spent on it: from the
    /// later of its dispatch and the device's previous result. Other records pass unchanged.
    pub fn evaluated(&mut self, mut record: Event, at: SystemTime) -> Event {
        if let Event::Evaluated {
            candidate,
            attempt,
            device,
            seconds: spent,
            ..
        } = &mut record
            && let Some(dispatched) = self.dispatched_at.remove(&(*candidate, *attempt))
        {
            let started = self
                .device_free_at
                .get(device)
                .map_or(dispatched, |free| dispatched.max(*free));
            *spent = seconds(started, at);
            self.device_free_at.insert(*device, at);
        }
        record
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::journal::EvaluationOutcome;
    use crate::model::KernelSource;

    fn at(seconds: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(seconds)
    }

    fn evaluation(candidate: u64) -> Evaluation {
        Evaluation {
            candidate: CandidateId(candidate),
            parent: Some(CandidateId::INITIAL),
            round: 1,
            device: DeviceId(0),
            attempt: 0,
            source: KernelSource::new("k"),
        }
    }

    fn spent(stopwatch: &mut Stopwatch, candidate: u64, ended: u64) -> Option<f64> {
        let record = evaluation(candidate).record(Err((EvaluationOutcome::Failed, "x".into())));
        match stopwatch.evaluated(record, at(ended)) {
            Event::Evaluated { seconds, .. } => seconds,
            other => panic!("an evaluated record: {other:?}"),
        }
    }

    #[test]
    fn a_proposals_latency_runs_from_its_sending_to_its_reply_once() {
        let mut stopwatch = Stopwatch::default();
        stopwatch.asked("r1-c1", at(10));
        assert_eq!(stopwatch.answered("r1-c1", at(13)), Some(3.0));
        assert_eq!(stopwatch.answered("r1-c1", at(14)), None);
        assert_eq!(stopwatch.answered("r1-c2", at(14)), None, "never asked");
    }

    /// Two evaluations dispatched at once to one device: the second waits for the first, so
    /// its device time starts at the first's result.
    #[test]
    fn an_evaluation_queued_behind_another_is_timed_from_the_devices_previous_result() {
        let mut stopwatch = Stopwatch::default();
        stopwatch.dispatched(&evaluation(1), at(100));
        stopwatch.dispatched(&evaluation(2), at(100));
        assert_eq!(spent(&mut stopwatch, 1, 104), Some(4.0));
        assert_eq!(spent(&mut stopwatch, 2, 110), Some(6.0));
        stopwatch.dispatched(&evaluation(3), at(120));
        assert_eq!(
            spent(&mut stopwatch, 3, 121),
            Some(1.0),
            "the device was idle"
        );
        assert_eq!(spent(&mut stopwatch, 4, 130), None, "never dispatched");
    }
}
