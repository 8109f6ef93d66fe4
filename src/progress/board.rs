//! What the live view shows, folded from the journal's records alone: what each device is doing,
//! and the run's figures (candidates done and failed, the best time and its speedups, the LLM
//! requests in flight and what they cost, why the run is winding down). Text only: `live.rs`
//! draws it, with the clock that says for how long.

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, SystemTime};

use actors::journal::{Event, Step};
use actors::model::{CandidateId, DeviceId, Reference};

/// What one device is busy with, as its step records say.
#[derive(Clone, Debug, PartialEq)]
pub enum Activity {
    Idle,
    Step {
        step: Step,
        candidate: CandidateId,
        round: u32,
    },
    /// Its worker died; the Supervisor restarts it (or cannot).
    WorkerDied,
}

impl Activity {
    fn describe(&self) -> String {
        match self {
            Activity::Idle => "idle".into(),
            Activity::Step {
                step,
                candidate,
                round,
            } => {
                let doing = match step {
                    Step::Reference => return "timing PyTorch eager and torch.compile".into(),
                    Step::Verify => "verifying",
                    Step::Time => "timing",
                    Step::Profile => "profiling",
                };
                format!("{doing} candidate {candidate} (round {round})")
            }
            Activity::WorkerDied => "worker died: restarting".into(),
        }
    }
}

/// What a record changed: the device lines to make afresh, one device's line, or the figures.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Changed {
    Devices,
    Device(DeviceId),
    Figures,
}

#[derive(Debug, Default)]
pub struct Board {
    devices: BTreeMap<DeviceId, Activity>,
    /// Candidates done and failed, the initial kernel not counted: it is no candidate made.
    done: u64,
    failed: u64,
    /// The most candidates the run makes (max_rounds × N × M, or max_candidates).
    total: Option<u64>,
    initial_ms: Option<f64>,
    best: Option<(CandidateId, f64)>,
    eager_ms: Option<f64>,
    compile_ms: Option<f64>,
    in_flight: HashSet<String>,
    dollars: f64,
    /// The search is over and the finale times the best kernels again.
    finale: bool,
    /// Why the run is ending early: a limit, a signal, a failure.
    ending: Option<String>,
}

impl Board {
    /// A board for a run that makes at most `total` candidates, when that is known.
    pub fn of_at_most(total: Option<u64>) -> Board {
        Board {
            total,
            ..Board::default()
        }
    }

    pub fn observe(&mut self, event: &Event) -> Changed {
        match event {
            Event::RunStarted { devices, .. } => {
                self.devices = devices
                    .iter()
                    .map(|device| (device.device, Activity::Idle))
                    .collect();
                return Changed::Devices;
            }
            Event::StepStarted {
                candidate,
                round,
                device,
                step,
                ..
            } => {
                return self.set(
                    *device,
                    Activity::Step {
                        step: *step,
                        candidate: *candidate,
                        round: *round,
                    },
                );
            }
            Event::StepFinished { device, .. } | Event::WorkerRestarted { device, .. } => {
                return self.set(*device, Activity::Idle);
            }
            Event::WorkerDied { device, .. } => return self.set(*device, Activity::WorkerDied),
            Event::CandidateFinished {
                candidate,
                passed,
                time_ms,
                ..
            } => {
                let made = *candidate != CandidateId::INITIAL;
                self.done += u64::from(made);
                match time_ms.filter(|_| *passed) {
                    Some(ms) => {
                        if !made {
                            self.initial_ms = Some(ms);
                        }
                        if self.best.is_none_or(|(_, best)| ms < best) {
                            self.best = Some((*candidate, ms));
                        }
                    }
                    None => self.failed += u64::from(made),
                }
            }
            Event::ReferenceTimed { which, time_ms, .. } => match which {
                Reference::Eager => self.eager_ms = *time_ms,
                Reference::Compile => self.compile_ms = *time_ms,
            },
            Event::ProposalRequested { request_id, .. }
            | Event::AnalysisRequested { request_id, .. }
            | Event::ReflexionRequested { request_id, .. } => {
                self.in_flight.insert(request_id.clone());
            }
            Event::ProposalReceived {
                request_id,
                cost_usd,
                ..
            }
            | Event::AnalysisReceived {
                request_id,
                cost_usd,
                ..
            }
            | Event::ReflexionReceived {
                request_id,
                cost_usd,
                ..
            } => {
                self.in_flight.remove(request_id);
                self.dollars += cost_usd.filter(|cost| cost.is_finite()).unwrap_or(0.0);
            }
            Event::LimitReached {
                limit,
                evaluations_cancelled,
                ..
            } => {
                self.ending = Some(if *evaluations_cancelled {
                    format!("{limit} reached: evaluations in flight cancelled, the run ends")
                } else {
                    format!("{limit} reached: winding down, no new proposals")
                });
            }
            Event::Interrupted { signal } => {
                self.ending = Some(format!("interrupted by {signal}: stopping"));
            }
            Event::Stopped { reason } => self.ending = Some(format!("stopping: {reason}")),
            Event::FinalTimed { .. } => self.finale = true,
            _ => {}
        }
        Changed::Figures
    }

    /// A resumed run's records so far: their figures count, but what was going on when the
    /// process before ended (its steps, its requests, its ending) is over.
    pub fn seed<'a>(&mut self, events: impl IntoIterator<Item = &'a Event>) {
        for event in events {
            self.observe(event);
        }
        for activity in self.devices.values_mut() {
            *activity = Activity::Idle;
        }
        self.in_flight.clear();
        self.finale = false;
        self.ending = None;
    }

    /// Whether `event` is a candidate verified faster than the best so far (the initial kernel
    /// is where the search starts, not a new best): the live view marks its line.
    pub fn is_new_best(&self, event: &Event) -> bool {
        match event {
            Event::CandidateFinished {
                candidate,
                passed: true,
                time_ms: Some(ms),
                ..
            } => *candidate != CandidateId::INITIAL && self.best.is_none_or(|(_, best)| *ms < best),
            _ => false,
        }
    }

    fn set(&mut self, device: DeviceId, activity: Activity) -> Changed {
        self.devices.insert(device, activity);
        Changed::Device(device)
    }

    /// The devices the run uses, in order.
    pub fn devices(&self) -> impl Iterator<Item = DeviceId> + '_ {
        self.devices.keys().copied()
    }

    /// A device's line, without how long it has been at it.
    pub fn device_line(&self, device: DeviceId) -> String {
        let activity = self.devices.get(&device).unwrap_or(&Activity::Idle);
        format!("[device {device}] {}", activity.describe())
    }

    /// The devices after the first `shown`, in one line: a terminal has only so many rows.
    pub fn other_devices_line(&self, shown: usize) -> Option<String> {
        let others: Vec<&Activity> = self.devices.values().skip(shown).collect();
        if others.is_empty() {
            return None;
        }
        let busy = others
            .iter()
            .filter(|activity| matches!(activity, Activity::Step { .. }))
            .count();
        Some(format!(
            "[{} more device(s)] {busy} busy, {} idle",
            others.len(),
            others.len() - busy
        ))
    }

    /// Candidates done and failed, the best verified time and its speedups.
    pub fn figures_line(&self) -> String {
        let mut line = match self.total {
            Some(total) => format!(
                "{} of {total} candidate(s) done, {} failed",
                self.done, self.failed
            ),
            None => format!("{} candidate(s) done, {} failed", self.done, self.failed),
        };
        match self.best {
            None => line.push_str(" · no verified kernel yet"),
            Some((candidate, best_ms)) => {
                line.push_str(&format!(" · best {best_ms:.4} ms (candidate {candidate})"));
                let speedups: Vec<String> = [
                    (self.initial_ms, "the initial kernel"),
                    (self.eager_ms, "PyTorch eager"),
                    (self.compile_ms, "torch.compile"),
                ]
                .into_iter()
                .filter_map(|(reference, name)| {
                    let ratio = reference? / best_ms;
                    ratio.is_finite().then(|| format!("{ratio:.2}× {name}"))
                })
                .collect();
                if !speedups.is_empty() {
                    line.push_str(&format!(": {}", speedups.join(", ")));
                }
            }
        }
        line
    }

    /// The LLM requests in flight and the dollars spent, then why the run is ending if it is.
    pub fn llm_line(&self) -> String {
        let mut line = format!(
            "LLM: {} request(s) in flight, ${:.2} spent",
            self.in_flight.len(),
            self.dollars
        );
        match (&self.ending, self.finale) {
            (Some(ending), _) => line.push_str(&format!(" · {ending}")),
            (None, true) => line.push_str(" · the search is over: timing the best kernels again"),
            (None, false) => {}
        }
        line
    }

    /// What stays on the terminal when the run is over: its figures and what the LLM cost.
    pub fn final_line(&self) -> String {
        format!(
            "{} · ${:.2} spent on LLM requests",
            self.figures_line(),
            self.dollars
        )
    }

    /// Whether the time left to a deadline still means something: not once a limit, a signal or
    /// a failure ends the run (the finale still has to fit before the deadline).
    pub fn counts_down(&self) -> bool {
        self.ending.is_none()
    }
}

/// " · 3h 12m left" to a deadline, or that it has passed.
pub fn time_left(deadline: SystemTime, now: SystemTime) -> String {
    match deadline.duration_since(now) {
        Ok(left) => format!(" · {} left", short_duration(left)),
        Err(_) => " · past the time limit".into(),
    }
}

/// A duration as a person reads it at a glance: "4.2s", "3m 05s", "2h 03m".
pub fn short_duration(duration: Duration) -> String {
    let seconds = duration.as_secs();
    match seconds {
        0..10 => format!("{:.1}s", duration.as_secs_f64()),
        10..60 => format!("{seconds}s"),
        60..3600 => format!("{}m {:02}s", seconds / 60, seconds % 60),
        _ => format!("{}h {:02}m", seconds / 3600, seconds % 3600 / 60),
    }
}

#[cfg(test)]
mod tests {
    use actors::model::TokenUsage;

    use super::super::test_records::{run_started, step_started};
    use super::*;

    fn step_finished(candidate: u64, device: u32, step: Step) -> Event {
        Event::StepFinished {
            candidate: CandidateId(candidate),
            parent: None,
            round: 1,
            device: DeviceId(device),
            step,
            provenance: None,
            verdict: None,
            time_ms: None,
            error: None,
        }
    }

    fn finished(candidate: u64, time_ms: Option<f64>) -> Event {
        Event::CandidateFinished {
            candidate: CandidateId(candidate),
            parent: None,
            round: 1,
            device: DeviceId(0),
            passed: time_ms.is_some(),
            time_ms,
            reason: time_ms.is_none().then(|| "wrong output".into()),
            simulated: true,
            duplicate_of: None,
        }
    }

    fn proposal_requested(request_id: &str) -> Event {
        Event::ProposalRequested {
            candidate: CandidateId(1),
            parent: CandidateId(0),
            round: 1,
            device: DeviceId(0),
            request_id: request_id.into(),
            kind: actors::model::RequestKind::Optimize,
            model: None,
        }
    }

    fn proposal_received(request_id: &str, cost_usd: Option<f64>) -> Event {
        Event::ProposalReceived {
            candidate: CandidateId(1),
            parent: CandidateId(0),
            round: 1,
            device: DeviceId(0),
            request_id: request_id.into(),
            attempt: 0,
            outcome: actors::journal::ReplyOutcome::Code,
            truncated: false,
            usage: Some(TokenUsage {
                input_tokens: 1000,
                output_tokens: 500,
            }),
            cost_usd,
            error: None,
            code: None,
            reply: None,
            latency_s: None,
        }
    }

    fn reference(which: Reference, time_ms: f64) -> Event {
        Event::ReferenceTimed {
            device: DeviceId(0),
            which,
            time_ms: Some(time_ms),
            provenance: None,
            error: None,
        }
    }

    fn board(events: &[Event]) -> Board {
        let mut board = Board::default();
        for event in events {
            board.observe(event);
        }
        board
    }

    #[test]
    fn each_device_line_says_which_step_of_which_candidate_it_runs() {
        let board = board(&[
            run_started(3),
            step_started(4, 0, Step::Verify),
            step_started(5, 1, Step::Time),
            step_started(6, 2, Step::Profile),
            step_finished(6, 2, Step::Profile),
        ]);
        let lines: Vec<String> = board
            .devices()
            .map(|device| board.device_line(device))
            .collect();
        assert_eq!(
            lines,
            [
                "[device 0] verifying candidate 4 (round 1)",
                "[device 1] timing candidate 5 (round 1)",
                "[device 2] idle",
            ]
        );
        let mut profiling = Board::default();
        profiling.observe(&run_started(1));
        assert_eq!(
            profiling.observe(&step_started(6, 0, Step::Profile)),
            Changed::Device(DeviceId(0))
        );
        assert_eq!(
            profiling.device_line(DeviceId(0)),
            "[device 0] profiling candidate 6 (round 1)"
        );
    }

    #[test]
    fn devices_beyond_those_shown_are_counted_in_one_line() {
        let board = board(&[
            run_started(5),
            step_started(1, 3, Step::Verify),
            step_started(2, 0, Step::Verify),
        ]);
        assert_eq!(
            board.other_devices_line(2).as_deref(),
            Some("[3 more device(s)] 1 busy, 2 idle")
        );
        assert_eq!(board.other_devices_line(5), None);
    }

    #[test]
    fn the_figures_count_candidates_and_give_the_best_time_against_the_initial_kernel_and_pytorch()
    {
        let board = board(&[
            run_started(1),
            reference(Reference::Eager, 0.3),
            reference(Reference::Compile, 0.12),
            finished(0, Some(0.4)),
            finished(1, None),
            finished(2, Some(0.2)),
            finished(3, Some(0.25)),
        ]);
        assert_eq!(
            board.figures_line(),
            "3 candidate(s) done, 1 failed · best 0.2000 ms (candidate 2): \
             2.00× the initial kernel, 1.50× PyTorch eager, 0.60× torch.compile"
        );
        assert_eq!(
            Board::default().figures_line(),
            "0 candidate(s) done, 0 failed · no verified kernel yet"
        );
    }

    #[test]
    fn a_candidate_faster_than_every_one_before_is_a_new_best_and_the_initial_kernel_is_not() {
        let mut board = board(&[run_started(1)]);
        assert!(!board.is_new_best(&finished(0, Some(2.0))));
        board.observe(&finished(0, Some(2.0)));
        assert!(board.is_new_best(&finished(1, Some(1.5))));
        assert!(!board.is_new_best(&finished(1, Some(2.5))));
        assert!(!board.is_new_best(&finished(1, None)));
    }

    /// Issue 22: "n of N" where a limit gives N, the initial kernel not counted, so that a run
    /// of `--max-candidates 6` never shows more than 6.
    #[test]
    fn the_figures_count_the_candidates_made_of_those_the_run_makes_at_most() {
        let mut board = Board::of_at_most(Some(6));
        board.observe(&run_started(1));
        for candidate in 0..=6 {
            board.observe(&finished(candidate, Some(1.0 + candidate as f64)));
        }
        assert!(
            board
                .figures_line()
                .starts_with("6 of 6 candidate(s) done, 0 failed · "),
            "{}",
            board.figures_line()
        );
    }

    #[test]
    fn requests_in_flight_are_those_asked_and_not_yet_answered_and_their_cost_adds_up() {
        let board = board(&[
            proposal_requested("p1"),
            proposal_requested("p2"),
            proposal_requested("p3"),
            proposal_received("p1", Some(0.25)),
            proposal_received("p2", None),
        ]);
        assert_eq!(board.llm_line(), "LLM: 1 request(s) in flight, $0.25 spent");
        assert_eq!(
            board.final_line(),
            "0 candidate(s) done, 0 failed · no verified kernel yet · $0.25 spent on LLM requests"
        );
    }

    #[test]
    fn a_limit_reached_shows_the_run_winding_down_and_stops_the_countdown() {
        let mut board = board(&[run_started(1)]);
        assert!(board.counts_down());
        board.observe(&Event::LimitReached {
            limit: "max_time".into(),
            reason: "max_time 8h reached".into(),
            evaluations_cancelled: false,
        });
        assert!(!board.counts_down());
        assert_eq!(
            board.llm_line(),
            "LLM: 0 request(s) in flight, $0.00 spent · max_time reached: winding down, no new proposals"
        );
    }

    #[test]
    fn the_finale_is_shown_and_the_countdown_goes_on_through_it() {
        let board = board(&[
            run_started(1),
            Event::FinalTimed {
                pass: 1,
                candidate: Some(CandidateId(0)),
                reference: None,
                time_ms: Some(0.4),
                provenance: None,
                error: None,
                floor_ms: None,
                speed_of_light_pct: None,
            },
        ]);
        assert!(board.counts_down());
        assert_eq!(
            board.llm_line(),
            "LLM: 0 request(s) in flight, $0.00 spent · the search is over: timing the best kernels again"
        );
    }

    /// Issue 22: after `kactors resume` the figures count the whole run, and nothing the dead
    /// process was doing is shown as still going.
    #[test]
    fn a_resumed_run_counts_the_records_before_it_and_shows_none_of_their_steps_as_running() {
        let mut board = Board::default();
        board.seed(&[
            run_started(2),
            finished(0, Some(0.4)),
            finished(27, Some(0.1)),
            finished(28, None),
            step_started(29, 1, Step::Verify),
            proposal_requested("p30"),
            Event::Interrupted {
                signal: "SIGINT".into(),
            },
        ]);
        board.observe(&finished(31, Some(0.2)));
        assert_eq!(
            board.figures_line(),
            "3 candidate(s) done, 1 failed · best 0.1000 ms (candidate 27): 4.00× the initial kernel"
        );
        assert_eq!(board.device_line(DeviceId(1)), "[device 1] idle");
        assert_eq!(board.llm_line(), "LLM: 0 request(s) in flight, $0.00 spent");
        assert!(board.counts_down());
    }

    #[test]
    fn time_left_reads_at_a_glance() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let check = |left_s: u64, expected: &str| {
            assert_eq!(time_left(now + Duration::from_secs(left_s), now), expected);
        };
        check(42, " · 42s left");
        check(185, " · 3m 05s left");
        check(3 * 3600 + 12 * 60 + 7, " · 3h 12m left");
        assert_eq!(short_duration(Duration::from_millis(4_249)), "4.2s");
        assert_eq!(
            time_left(now - Duration::from_secs(1), now),
            " · past the time limit"
        );
    }
}
