//! The search state driven by records alone: each case applies inputs one at a time and checks
//! the decisions each one leads to, written one per line.

use super::*;
use crate::journal::{EvaluationOutcome, ReplyOutcome};
use crate::ports::{ProfileError, RenderedPrompt, RequestKind};
use crate::search::{FanOut, SearchKind};

fn config(n: u32, m: u32, rounds: u32, devices: u32, pacing: Pacing) -> SearchConfig {
    SearchConfig {
        search: SearchSettings {
            kind: SearchKind::Beam,
            num_top_kernels: n,
            num_bottlenecks: m,
            max_rounds: rounds,
            max_no_improvement: None,
            max_candidates: None,
            fan_out: FanOut::default(),
        },
        pacing,
        devices: (0..devices).map(DeviceId).collect(),
        profile_parents: false,
        time_references: false,
        max_refinements: 0,
        stop_at_roofline: false,
        requests_per_minute: None,
        reflexions_in_flight: 8,
        generation: None,
        ensemble: Ensemble::default(),
        overlap_rounds: true,
    }
}

use crate::journal::samples::run_started as started;

fn evaluated(
    candidate: u64,
    device: u32,
    attempt: u32,
    outcome: EvaluationOutcome,
    ms: Option<f64>,
) -> Event {
    Event::Evaluated {
        candidate: CandidateId(candidate),
        parent: None,
        round: 0,
        device: DeviceId(device),
        attempt,
        outcome,
        time_ms: ms,
        provenance: ms.map(|_| Provenance::Simulated),
        reason: match outcome {
            EvaluationOutcome::Verified => None,
            EvaluationOutcome::WrongOutput => Some("verification failed: wrong output".into()),
            _ => Some("an illegal memory access".into()),
        },
        launched_kernels: vec!["k".into()],
        seconds: None,
        floor_ms: None,
        speed_of_light_pct: None,
        compiled: None,
    }
}

fn verified(candidate: u64, device: u32, ms: f64) -> Event {
    evaluated(candidate, device, 0, EvaluationOutcome::Verified, Some(ms))
}

fn answered(
    candidate: u64,
    device: u32,
    attempt: u32,
    outcome: ReplyOutcome,
    code: Option<&str>,
) -> Event {
    Event::ProposalReceived {
        candidate: CandidateId(candidate),
        parent: CandidateId::INITIAL,
        round: 1,
        device: DeviceId(device),
        request_id: format!("r1-c{candidate}"),
        attempt,
        outcome,
        truncated: false,
        usage: None,
        cost_usd: None,
        error: (outcome != ReplyOutcome::Code).then(|| "the server said no".to_string()),
        code: code.map(str::to_string),
        reply: None,
        latency_s: None,
    }
}

fn code(candidate: u64, device: u32, text: &str) -> Event {
    answered(candidate, device, 0, ReplyOutcome::Code, Some(text))
}

fn analysed(parent: u64, round: u32, titles: &[&str]) -> Event {
    Event::AnalysisReceived {
        candidate: CandidateId(parent),
        round,
        request_id: format!("r{round}-c{parent}-analysis"),
        requested: titles.len() as u32,
        returned: titles.len() as u32,
        bottlenecks: titles
            .iter()
            .map(|title| AnalyzedBottleneck {
                title: title.to_string(),
                causes: Vec::new(),
                fixes: Vec::new(),
            })
            .collect(),
        outcome: ReplyOutcome::Answered,
        usage: None,
        cost_usd: None,
        error: None,
        reply: None,
    }
}

/// One line per decision: what a reader of the journal or of the Manager would want to see.
fn describe(decision: &Decision) -> String {
    match decision {
        Decision::Record(event) => match event {
            Event::CandidatePlanned {
                candidate,
                parent,
                round,
                proposal_index,
                device,
                ..
            } => format!(
                "planned {candidate} in round {round} from {parent} (proposal {proposal_index}) on {device}"
            ),
            Event::RoundStarted { round, parents } => {
                format!("round {round} starts from {parents:?}")
            }
            Event::CandidateFinished {
                candidate,
                passed,
                time_ms,
                reason,
                ..
            } => match (passed, time_ms, reason) {
                (true, Some(ms), _) => format!("{candidate} finished at {ms} ms"),
                (_, _, Some(reason)) => format!("{candidate} failed: {reason}"),
                _ => format!("{candidate} finished"),
            },
            Event::BeamUpdated { round, beam } => format!(
                "beam after round {round}: {:?}",
                beam.iter().map(|m| m.candidate.0).collect::<Vec<_>>()
            ),
            Event::RoundFinished(summary) => format!(
                "round {} done: {} proposed, {} verified, {} failed, {} duplicates",
                summary.round,
                summary.proposed,
                summary.verified,
                summary.failed,
                summary.duplicates
            ),
            Event::ProposalRequested { request_id, .. } => format!("journal request {request_id}"),
            Event::AnalysisRequested { request_id, .. } => format!("journal request {request_id}"),
            Event::ReflexionRequested { request_id, .. } => format!("journal request {request_id}"),
            Event::RefinementRequested {
                candidate,
                attempt,
                error,
                ..
            } => format!("refine {candidate}, attempt {attempt}: {error}"),
            other => format!("record {other:?}"),
        },
        Decision::Evaluate(Evaluation {
            candidate,
            device,
            attempt,
            source,
            ..
        }) => format!(
            "evaluate {candidate} on {device}, attempt {attempt}: {}",
            source.text()
        ),
        Decision::Profile { parent, device, .. } => format!("profile {} on {device}", parent.id),
        Decision::RequestAnalysis { context, .. } => format!(
            "ask for {} bottlenecks of {}",
            context.num_bottlenecks, context.candidate
        ),
        Decision::RequestProposal { context, .. } => format!(
            "ask for {} from {} (proposal {} of {}, bottleneck {:?})",
            context.candidate,
            context.parent,
            context.proposal_index,
            context.proposals,
            context.bottleneck.as_ref().map(|b| b.title.as_str())
        ),
        Decision::RequestRefinement { context, .. } => format!(
            "ask to fix {} (attempt {} of {})",
            context.candidate, context.attempt, context.max_refinements
        ),
        Decision::RequestSeed { context, .. } => format!(
            "ask for seed {} (attempt {}, {} earlier)",
            context.candidate,
            context.attempt,
            context.attempts.len()
        ),
        Decision::RequestReflexion { context, .. } => {
            format!("ask what {} taught", context.candidate)
        }
        Decision::TimeReferences { device } => format!("time references on {device}"),
        Decision::BestChanged(kernel) => {
            format!("best is now {} ({} ms)", kernel.id, kernel.time_ms)
        }
        Decision::Finish {
            outcome, reason, ..
        } => format!("finish {outcome:?}: {reason}"),
        Decision::RemoveCaches { candidate } => format!("remove the caches of {candidate}"),
    }
}

/// Applies each input in turn and compares its decisions, one line each, with the expected
/// text; the state must hold its invariants after every input.
fn check(config: SearchConfig, steps: &[(Event, &str)]) -> SearchState {
    let mut state = SearchState::new(config);
    for (index, (input, expected)) in steps.iter().enumerate() {
        let decisions: Vec<String> = state.apply(input).iter().map(describe).collect();
        let expected: Vec<&str> = expected
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty())
            .collect();
        assert_eq!(decisions, expected, "after input {index}: {input:?}");
        if let Err(broken) = state.check_invariants() {
            panic!("after input {index}: {broken}");
        }
    }
    state
}

#[test]
fn round_one_plans_n_times_m_candidates_round_robin_and_asks_for_the_parent_analysis_first() {
    let mut steps = round_one_asked_on_three_devices();
    steps.push((code(1, 1, "k1"), "evaluate 1 on 1, attempt 0: k1"));
    check(config(2, 2, 1, 3, Pacing::Rounds), &steps);
}

/// Beam 2 × 2 on three devices: round 1's four candidates from the initial kernel (8 ms), its
/// analysis in and their proposals asked for.
fn round_one_asked_on_three_devices() -> Vec<(Event, &'static str)> {
    vec![
        (started("k0"), "evaluate 0 on 0, attempt 0: k0"),
        (
            verified(0, 0, 8.0),
            "0 finished at 8 ms
             best is now 0 (8 ms)
             round 1 starts from [CandidateId(0)]
             planned 1 in round 1 from 0 (proposal 0) on 1
             planned 2 in round 1 from 0 (proposal 1) on 2
             planned 3 in round 1 from 0 (proposal 2) on 0
             planned 4 in round 1 from 0 (proposal 3) on 1
             journal request r1-c0-analysis
             ask for 4 bottlenecks of 0",
        ),
        (
            analysed(0, 1, &["memory", "launch"]),
            "journal request r1-c1
             ask for 1 from 0 (proposal 0 of 4, bottleneck Some(\"memory\"))
             journal request r1-c2
             ask for 2 from 0 (proposal 1 of 4, bottleneck Some(\"launch\"))
             journal request r1-c3
             ask for 3 from 0 (proposal 2 of 4, bottleneck None)
             journal request r1-c4
             ask for 4 from 0 (proposal 3 of 4, bottleneck None)",
        ),
    ]
}

fn one_proposal(max_refinements: u32) -> SearchConfig {
    SearchConfig {
        max_refinements,
        ..config(1, 1, 1, 1, Pacing::Rounds)
    }
}

/// The inputs that take a run with one proposal per round to its first proposal's code.
fn up_to_the_first_proposal() -> Vec<(Event, &'static str)> {
    vec![
        (started("k0"), "evaluate 0 on 0, attempt 0: k0"),
        (
            verified(0, 0, 8.0),
            "0 finished at 8 ms
             best is now 0 (8 ms)
             round 1 starts from [CandidateId(0)]
             planned 1 in round 1 from 0 (proposal 0) on 0
             journal request r1-c0-analysis
             ask for 1 bottlenecks of 0",
        ),
        (
            analysed(0, 1, &["memory"]),
            "journal request r1-c1
             ask for 1 from 0 (proposal 0 of 1, bottleneck Some(\"memory\"))",
        ),
        (code(1, 0, "k1"), "evaluate 1 on 0, attempt 0: k1"),
    ]
}

#[test]
fn a_failed_verification_is_refined_as_the_same_candidate_on_the_same_device() {
    let mut steps = up_to_the_first_proposal();
    steps.extend([
        (
            evaluated(1, 0, 0, EvaluationOutcome::WrongOutput, None),
            "refine 1, attempt 1: verification failed: wrong output
             journal request r1-c1-refine1
             ask to fix 1 (attempt 1 of 2)",
        ),
        (
            answered(1, 0, 1, ReplyOutcome::Code, Some("k1 fixed")),
            "evaluate 1 on 0, attempt 1: k1 fixed",
        ),
        (
            evaluated(1, 0, 1, EvaluationOutcome::Verified, Some(5.0)),
            "1 finished at 5 ms
             best is now 1 (5 ms)
             beam after round 1: [1]
             round 1 done: 1 proposed, 1 verified, 0 failed, 0 duplicates
             finish Completed: max_rounds (1) reached",
        ),
    ]);
    check(one_proposal(2), &steps);
}

#[test]
fn a_crash_is_not_refined() {
    let mut steps = up_to_the_first_proposal();
    steps.push((
        evaluated(1, 0, 0, EvaluationOutcome::Failed, None),
        "1 failed: an illegal memory access
         beam after round 1: [0]
         round 1 done: 1 proposed, 0 verified, 1 failed, 0 duplicates
         finish Completed: max_rounds (1) reached
         remove the caches of 1",
    ));
    check(one_proposal(3), &steps);
}

#[test]
fn a_proposal_identical_to_an_evaluated_source_is_a_duplicate_and_not_evaluated() {
    let mut steps = up_to_the_first_proposal();
    steps.pop();
    steps.push((
        code(1, 0, "k0"),
        "1 failed: identical to candidate 0
         beam after round 1: [0]
         round 1 done: 1 proposed, 0 verified, 0 failed, 1 duplicates
         finish Completed: max_rounds (1) reached",
    ));
    check(one_proposal(0), &steps);
}

#[test]
fn a_dead_workers_candidate_is_tried_once_more_then_failed() {
    let mut steps = up_to_the_first_proposal();
    steps.extend([
        (
            evaluated(1, 0, 0, EvaluationOutcome::WorkerDied, None),
            "evaluate 1 on 0, attempt 0: k1",
        ),
        (
            evaluated(1, 0, 0, EvaluationOutcome::WorkerDied, None),
            "1 failed: the worker of device 0 died twice on this candidate
             beam after round 1: [0]
             round 1 done: 1 proposed, 0 verified, 1 failed, 0 duplicates
             finish Completed: max_rounds (1) reached
             remove the caches of 1",
        ),
    ]);
    check(one_proposal(0), &steps);
}

#[test]
fn in_steady_search_a_proposal_takes_the_first_free_device_when_it_is_answered() {
    let steady = config(1, 2, 2, 2, Pacing::Steady { max_inflight: 2 });
    let state = check(
        steady,
        &[
            (started("k0"), "evaluate 0 on 0, attempt 0: k0"),
            (
                verified(0, 0, 8.0),
                "0 finished at 8 ms
                 best is now 0 (8 ms)
                 journal request r1-c0-analysis
                 ask for 2 bottlenecks of 0
                 round 1 starts from [CandidateId(0)]
                 planned 1 in round 1 from 0 (proposal 0) on 0
                 planned 2 in round 1 from 0 (proposal 1) on 0",
            ),
            (
                analysed(0, 1, &["memory", "launch"]),
                "journal request r1-c1
                 ask for 1 from 0 (proposal 0 of 2, bottleneck Some(\"memory\"))
                 journal request r1-c2
                 ask for 2 from 0 (proposal 1 of 2, bottleneck Some(\"launch\"))",
            ),
            (
                code(2, 0, "k2"),
                "evaluate 2 on 0, attempt 0: k2
                 round 2 starts from [CandidateId(0)]
                 planned 3 in round 2 from 0 (proposal 0) on 1
                 journal request r2-c3
                 ask for 3 from 0 (proposal 0 of 2, bottleneck Some(\"memory\"))",
            ),
        ],
    );
    assert_eq!(
        state.device_for_answer(CandidateId(1)),
        DeviceId(1),
        "device 0 holds candidate 2: candidate 1's code goes to device 1"
    );
}

#[test]
fn a_provider_that_runs_dry_ends_the_search_once_nothing_is_pending() {
    let mut steps = up_to_the_first_proposal();
    steps.pop();
    steps.push((
        answered(1, 0, 0, ReplyOutcome::Exhausted, None),
        "beam after round 1: [0]
         round 1 done: 0 proposed, 0 verified, 0 failed, 0 duplicates
         finish Completed: the llm provider has no more proposals",
    ));
    check(
        SearchConfig {
            search: SearchSettings {
                max_rounds: 5,
                ..one_proposal(0).search
            },
            ..one_proposal(0)
        },
        &steps,
    );
}

#[test]
fn an_interrupt_ends_the_search_and_leaves_the_requests_in_flight_to_cancel() {
    let mut steps = up_to_the_first_proposal();
    steps.pop();
    steps.push((
        Event::Interrupted {
            signal: "SIGINT".into(),
        },
        "finish Interrupted: interrupted by SIGINT",
    ));
    let state = check(one_proposal(0), &steps);
    let cancelled = state.cancellations("the run was interrupted");
    match cancelled.as_slice() {
        [
            Event::ProposalReceived {
                candidate: CandidateId(1),
                outcome: ReplyOutcome::Cancelled,
                error: Some(error),
                ..
            },
        ] => assert_eq!(error, "cancelled: the run was interrupted"),
        other => panic!("one proposal to cancel: {other:?}"),
    }
    let mut after = state.clone();
    assert!(
        after.apply(&cancelled[0]).is_empty(),
        "a finished search decides nothing more"
    );
    assert!(after.pending_requests().is_empty());
}

#[test]
fn no_answer_in_the_first_round_fails_the_run() {
    let mut steps = up_to_the_first_proposal();
    steps.pop();
    steps.push((
        answered(1, 0, 0, ReplyOutcome::Failed, None),
        "1 failed: the proposal failed: the server said no
         beam after round 1: [0]
         round 1 done: 1 proposed, 0 verified, 1 failed, 0 duplicates
         finish Failed: no LLM request succeeded: the server said no",
    ));
    check(one_proposal(0), &steps);
}

#[test]
fn a_rebuild_folds_the_records_to_the_same_state() {
    let mut live = SearchState::new(one_proposal(1));
    let mut journal = Vec::new();
    for (input, _) in up_to_the_first_proposal() {
        let decisions = live.apply(&input);
        journal.push(input);
        for decision in decisions {
            if let Decision::Record(record) = decision {
                journal.push(record);
            }
        }
    }
    let rebuilt = SearchState::rebuild(one_proposal(1), &journal);
    assert_eq!(rebuilt, live);
}

fn profiled(candidate: u64) -> Event {
    Event::ProfileRecorded {
        candidate: CandidateId(candidate),
        device: DeviceId(0),
        bottleneck: "memory".into(),
        duration_ms: Some(1.0),
        analysis: String::new(),
        at_roofline: false,
        details: None,
    }
}

/// Applies each input in turn and compares the candidates whose caches it releases with the
/// expected ones; the state must hold its invariants (no beam member released) throughout.
/// Answers the state and its journal: the inputs, the records they led to, and a
/// `caches_removed` after each release, as the Collector writes it.
fn check_released(config: SearchConfig, steps: &[(Event, &[u64])]) -> (SearchState, Vec<Event>) {
    let mut state = SearchState::new(config);
    let mut journal = Vec::new();
    for (index, (input, expected)) in steps.iter().enumerate() {
        journal.push(input.clone());
        let mut released = Vec::new();
        for decision in state.apply(input) {
            match decision {
                Decision::Record(record) => journal.push(record),
                Decision::RemoveCaches { candidate } => released.push(candidate),
                _ => {}
            }
        }
        journal.extend(released.iter().map(|candidate| Event::CachesRemoved {
            candidate: *candidate,
            paths: vec![format!("candidates/{candidate}/triton-cache")],
            bytes: 4096,
        }));
        let released: Vec<u64> = released.iter().map(|candidate| candidate.0).collect();
        assert_eq!(released, *expected, "after input {index}: {input:?}");
        if let Err(broken) = state.check_invariants() {
            panic!("after input {index}: {broken}");
        }
    }
    (state, journal)
}

/// Two proposals from the initial kernel in round 1 of 2, one beam slot.
fn a_round_with_two_proposals() -> (SearchState, Vec<Event>) {
    check_released(
        config(1, 2, 2, 1, Pacing::Rounds),
        &[
            (started("k0"), &[]),
            (verified(0, 0, 8.0), &[]),
            (analysed(0, 1, &["memory", "launch"]), &[]),
            (code(1, 0, "k1"), &[]),
            (code(2, 0, "k2"), &[]),
            // 2 would enter the beam if 1 failed: it waits for its round's end.
            (verified(2, 0, 6.0), &[]),
            // The beam is [1]; the initial kernel keeps its caches for the finale.
            (verified(1, 0, 5.0), &[2]),
        ],
    )
}

#[test]
fn in_rounds_the_caches_of_a_candidate_go_once_its_round_ends_without_it_in_the_beam() {
    let (state, _) = a_round_with_two_proposals();
    let beam: Vec<u64> = state.beam().iter().map(|k| k.id.0).collect();
    assert_eq!(beam, [1]);
}

/// Steady search over four virtual rounds of one proposal each, parents profiled.
fn a_steady_search_that_profiles_its_parents() -> (SearchState, Vec<Event>) {
    let steady = SearchConfig {
        profile_parents: true,
        ..config(1, 1, 4, 1, Pacing::Steady { max_inflight: 1 })
    };
    check_released(
        steady,
        &[
            (started("k0"), &[]),
            (verified(0, 0, 8.0), &[]),
            (profiled(0), &[]),
            (analysed(0, 1, &["memory"]), &[]),
            (code(1, 0, "k1"), &[]),
            // 1 takes the beam and is profiled as a parent.
            (verified(1, 0, 5.0), &[]),
            (code(2, 0, "k2"), &[]),
            // Not taken by the beam, which only gets faster: never a parent.
            (verified(2, 0, 9.0), &[2]),
            (code(3, 0, "k3"), &[]),
            // 3 pushes 1 out of the beam while 1's profile runs in its folder.
            (verified(3, 0, 4.0), &[]),
            (profiled(1), &[1]),
        ],
    )
}

#[test]
fn in_steady_search_a_kernel_out_of_the_beam_loses_its_caches_once_its_profile_is_done() {
    let (state, _) = a_steady_search_that_profiles_its_parents();
    let beam: Vec<u64> = state.beam().iter().map(|k| k.id.0).collect();
    assert_eq!(beam, [3]);
}

#[test]
fn a_beam_member_whose_caches_were_released_is_a_broken_state() {
    let (mut state, _) = a_round_with_two_proposals();
    state.core.caches_released.insert(CandidateId(1));
    assert_eq!(
        state.check_invariants(),
        Err("beam member 1 had its caches released".to_string())
    );
}

#[test]
fn a_rebuild_releases_the_same_caches_with_or_without_their_caches_removed_records() {
    for (live, journal) in [
        a_round_with_two_proposals(),
        a_steady_search_that_profiles_its_parents(),
    ] {
        let config = live.core.config.clone();
        let (rebuilt, unjournaled) = SearchState::fold(config.clone(), &journal);
        assert_eq!(rebuilt, live);
        assert!(unjournaled.is_empty(), "{unjournaled:?}");
        // A death between a release and the Collector's removal: no caches_removed.
        let cut: Vec<Event> = journal
            .iter()
            .filter(|event| !matches!(event, Event::CachesRemoved { .. }))
            .cloned()
            .collect();
        assert_eq!(SearchState::rebuild(config, &cut), live);
    }
}

#[test]
fn a_resume_removes_again_the_caches_released_before_the_death_and_no_beam_members() {
    let (live, journal) = a_steady_search_that_profiles_its_parents();
    let mut resumed = SearchState::rebuild(live.core.config.clone(), &journal);
    let (_, decisions) = resumed.resume(&BTreeSet::new());
    let removed: Vec<u64> = decisions
        .iter()
        .filter_map(|decision| match decision {
            Decision::RemoveCaches { candidate } => Some(candidate.0),
            _ => None,
        })
        .collect();
    assert_eq!(removed, [1, 2]);
}

/// Issue 13: the process journals an input, then the records it leads to; a death in between
/// leaves the journal without them, and the fold says which they are, for a resume to journal.
#[test]
fn the_fold_answers_the_records_an_input_led_to_that_the_journal_lacks() {
    let config = config(2, 2, 1, 3, Pacing::Rounds);
    let records = |decisions: Vec<Decision>| -> Vec<Event> {
        decisions
            .into_iter()
            .filter_map(|decision| match decision {
                Decision::Record(event) => Some(event),
                _ => None,
            })
            .collect()
    };
    let mut live = SearchState::new(config.clone());
    let mut journal = vec![started("k0")];
    journal.extend(records(live.apply(&journal[0])));
    let initial = verified(0, 0, 8.0);
    let led_to = records(live.apply(&initial));
    assert!(led_to.len() > 3, "{led_to:?}");
    journal.push(initial);
    journal.extend(led_to[..2].iter().cloned());
    let (folded, unjournaled) = SearchState::fold(config.clone(), &journal);
    assert_eq!(unjournaled, led_to[2..]);
    assert!(folded == live);
    journal.extend(led_to[2..].iter().cloned());
    assert!(SearchState::fold(config, &journal).1.is_empty());
}

#[test]
fn a_search_that_was_over_when_the_process_died_finishes_again_on_resume() {
    let mut live = SearchState::new(one_proposal(0));
    let mut journal = Vec::new();
    let mut steps = up_to_the_first_proposal();
    steps.push((verified(1, 0, 5.0), ""));
    for (input, _) in steps {
        let decisions = live.apply(&input);
        journal.push(input);
        for decision in decisions {
            if let Decision::Record(record) = decision {
                journal.push(record);
            }
        }
    }
    assert!(live.finished().is_some(), "the one round is done");
    // The process died in the finale: no run_finished.
    let mut resumed = SearchState::rebuild(one_proposal(0), &journal);
    let (failures, decisions) = resumed.resume(&BTreeSet::new());
    assert!(failures.is_empty());
    let decisions: Vec<String> = decisions.iter().map(describe).collect();
    assert_eq!(decisions, ["finish Completed: max_rounds (1) reached"]);
}

fn devices_lost(devices: &[u32]) -> Event {
    Event::DevicesLost {
        devices: devices.iter().copied().map(DeviceId).collect(),
        reason: "the agent of node n2 is gone".into(),
    }
}

/// Issue 14: a node that dies costs its in-flight candidates only a move: in rounds candidate
/// i goes to live device i mod (live devices), then and in the rounds after.
#[test]
fn in_rounds_a_lost_devices_candidates_move_to_live_device_i_mod_live_devices() {
    // One parent, four proposals on four devices: candidates 1, 2, 3 on devices 1, 2, 3.
    let mut state = SearchState::new(config(1, 4, 2, 4, Pacing::Rounds));
    for input in [
        started("k0"),
        verified(0, 0, 8.0),
        analysed(0, 1, &["a", "b", "c", "d"]),
        code(1, 1, "k1"),
        code(2, 2, "k2"),
        code(3, 3, "k3"),
    ] {
        state.apply(&input);
    }
    let mut after = |input: Event| -> Vec<String> {
        let decisions = state.apply(&input).iter().map(describe).collect();
        state.check_invariants().unwrap();
        decisions
    };
    assert!(after(devices_lost(&[2, 3])).is_empty());
    // Two live devices, 0 and 1: candidate 2 to 2 mod 2, candidate 3 to 3 mod 2.
    assert_eq!(
        after(evaluated(2, 2, 0, EvaluationOutcome::DeviceLost, None)),
        ["evaluate 2 on 0, attempt 0: k2"]
    );
    assert_eq!(
        after(evaluated(3, 3, 0, EvaluationOutcome::DeviceLost, None)),
        ["evaluate 3 on 1, attempt 0: k3"]
    );
    assert_eq!(
        state.device_for_answer(CandidateId(4)),
        DeviceId(0),
        "candidate 4 was planned on device 0, which lives"
    );
    assert!(state.is_retired(DeviceId(2)) && state.is_retired(DeviceId(3)));
    assert!(!state.is_retired(DeviceId(0)) && !state.is_retired(DeviceId(1)));
}

/// A round started after a device was lost is planned on the live devices, candidate i on live
/// device i mod (live devices); a candidate planned on a device that is lost before its code
/// comes goes by the same rule when it comes.
#[test]
fn in_rounds_the_next_round_and_candidates_planned_on_a_lost_device_go_to_live_devices() {
    let mut state = check(
        config(1, 4, 2, 4, Pacing::Rounds),
        &[
            (started("k0"), "evaluate 0 on 0, attempt 0: k0"),
            (devices_lost(&[1]), ""),
        ],
    );
    let planned: Vec<String> = state
        .apply(&verified(0, 0, 8.0))
        .iter()
        .map(describe)
        .filter(|line| line.starts_with("planned"))
        .collect();
    assert_eq!(
        planned,
        [
            "planned 1 in round 1 from 0 (proposal 0) on 2",
            "planned 2 in round 1 from 0 (proposal 1) on 3",
            "planned 3 in round 1 from 0 (proposal 2) on 0",
            "planned 4 in round 1 from 0 (proposal 3) on 2",
        ]
    );
    state.apply(&devices_lost(&[2]));
    // Live now: 0 and 3.
    assert_eq!(state.device_for_answer(CandidateId(1)), DeviceId(3));
    assert_eq!(state.device_for_answer(CandidateId(2)), DeviceId(3));
    assert_eq!(state.device_for_answer(CandidateId(3)), DeviceId(0));
    assert_eq!(state.device_for_answer(CandidateId(4)), DeviceId(0));
    state.check_invariants().unwrap();
}

/// In steady search a lost device's candidate goes to the first free live device.
#[test]
fn in_steady_search_a_lost_devices_candidate_moves_to_the_first_free_live_device() {
    let steady = config(1, 2, 2, 3, Pacing::Steady { max_inflight: 2 });
    let mut state = SearchState::new(steady);
    for input in [
        started("k0"),
        verified(0, 0, 8.0),
        analysed(0, 1, &["memory", "launch"]),
        code(1, 0, "k1"),
        code(2, 1, "k2"),
        devices_lost(&[1]),
    ] {
        state.apply(&input);
    }
    let moved: Vec<String> = state
        .apply(&evaluated(2, 1, 0, EvaluationOutcome::DeviceLost, None))
        .iter()
        .map(describe)
        .collect();
    assert_eq!(moved, ["evaluate 2 on 2, attempt 0: k2"]);
    state.check_invariants().unwrap();
}

/// With every device lost the run fails, and the candidate whose evaluation found the loss
/// with it.
#[test]
fn when_every_device_is_lost_the_candidate_and_the_run_fail() {
    let mut steps = up_to_the_first_proposal();
    // The Manager journals the loss before the evaluation that found it.
    steps.push((
        devices_lost(&[0]),
        "finish Failed: every device of the run was lost: the agent of node n2 is gone",
    ));
    steps.push((evaluated(1, 0, 0, EvaluationOutcome::DeviceLost, None), ""));
    check(one_proposal(0), &steps);
}

/// The fold rebuilds the retirements and the moves from the journal alone.
#[test]
fn a_rebuilt_state_knows_the_lost_devices_and_where_their_candidates_went() {
    let inputs = [
        started("k0"),
        verified(0, 0, 8.0),
        analysed(0, 1, &["a", "b", "c", "d"]),
        code(2, 2, "k2"),
        devices_lost(&[2, 3]),
        evaluated(2, 2, 0, EvaluationOutcome::DeviceLost, None),
    ];
    let mut live = SearchState::new(config(1, 4, 2, 4, Pacing::Rounds));
    for input in &inputs {
        live.apply(input);
    }
    let rebuilt = SearchState::rebuild(config(1, 4, 2, 4, Pacing::Rounds), &inputs);
    assert_eq!(rebuilt, live);
    assert_eq!(
        rebuilt.placement(CandidateId(2)).map(|p| p.2),
        Some(DeviceId(0))
    );
}

fn agent_restarting(devices: &[u32]) -> Event {
    Event::AgentRestarting {
        node: "n2".into(),
        devices: devices.iter().copied().map(DeviceId).collect(),
        reason: "the agent of node n2 ended".into(),
    }
}

fn agent_restarted(devices: &[u32]) -> Event {
    Event::AgentRestarted {
        node: "n2".into(),
        devices: devices.iter().copied().map(DeviceId).collect(),
        restarts: 1,
        step: "7.4".into(),
    }
}

/// Issue 14: a node whose agent is lost and started again costs its in-flight candidates a
/// move to a live device; its devices take no new work while the agent starts, and take work
/// again once it serves: they are not retired.
#[test]
fn a_restarting_nodes_devices_take_no_work_until_its_agent_serves_again() {
    let mut state = SearchState::new(config(1, 4, 2, 4, Pacing::Rounds));
    for input in [
        started("k0"),
        verified(0, 0, 8.0),
        analysed(0, 1, &["a", "b", "c", "d"]),
        code(2, 2, "k2"),
    ] {
        state.apply(&input);
    }
    let after = |state: &mut SearchState, input: Event| -> Vec<String> {
        let decisions = state.apply(&input).iter().map(describe).collect();
        state.check_invariants().unwrap();
        decisions
    };
    assert!(after(&mut state, agent_restarting(&[2, 3])).is_empty());
    // In service: 0 and 1. Candidate 2 goes to 2 mod 2; candidate 3, planned on 3, to 3 mod 2.
    assert_eq!(
        after(
            &mut state,
            evaluated(2, 2, 0, EvaluationOutcome::DeviceLost, None)
        ),
        ["evaluate 2 on 0, attempt 0: k2"]
    );
    assert_eq!(state.device_for_answer(CandidateId(3)), DeviceId(1));
    assert!(!state.is_in_service(DeviceId(2)) && !state.is_retired(DeviceId(2)));
    assert!(after(&mut state, agent_restarted(&[2, 3])).is_empty());
    assert!(state.is_in_service(DeviceId(2)) && state.is_in_service(DeviceId(3)));
    assert!(!state.is_retired(DeviceId(2)) && !state.is_retired(DeviceId(3)));
    assert_eq!(
        state.device_for_answer(CandidateId(3)),
        DeviceId(3),
        "candidate 3 goes to the device it was planned on, whose agent serves again"
    );
}

/// An agent that cannot be started again (or whose budget is spent) retires its node's devices.
#[test]
fn a_restart_that_fails_retires_the_nodes_devices() {
    let mut state = check(
        config(1, 4, 2, 4, Pacing::Rounds),
        &[
            (started("k0"), "evaluate 0 on 0, attempt 0: k0"),
            (agent_restarting(&[2, 3]), ""),
            (devices_lost(&[2, 3]), ""),
        ],
    );
    assert!(state.is_retired(DeviceId(2)) && !state.is_in_service(DeviceId(3)));
    state.check_invariants().unwrap();
    // A resume starts the agents anew, but a retired device stays retired.
    state.resume(&BTreeSet::new());
    assert!(state.is_retired(DeviceId(2)) && !state.is_in_service(DeviceId(2)));
}

/// The fold rebuilds restarts from the journal alone; a resume (whose process starts every
/// agent anew) puts a node that was restarting when the process died back in service.
#[test]
fn a_rebuilt_state_knows_the_restarting_and_restarted_nodes() {
    let inputs = [
        started("k0"),
        verified(0, 0, 8.0),
        analysed(0, 1, &["a", "b", "c", "d"]),
        code(2, 2, "k2"),
        agent_restarting(&[2, 3]),
        evaluated(2, 2, 0, EvaluationOutcome::DeviceLost, None),
        agent_restarted(&[2, 3]),
        agent_restarting(&[0, 1]),
    ];
    let mut live = SearchState::new(config(1, 4, 2, 4, Pacing::Rounds));
    for input in &inputs {
        live.apply(input);
    }
    let mut rebuilt = SearchState::rebuild(config(1, 4, 2, 4, Pacing::Rounds), &inputs);
    assert_eq!(rebuilt, live);
    assert_eq!(
        rebuilt.placement(CandidateId(2)).map(|p| p.2),
        Some(DeviceId(0))
    );
    assert!(rebuilt.is_in_service(DeviceId(2)) && !rebuilt.is_in_service(DeviceId(0)));
    rebuilt.resume(&BTreeSet::new());
    assert!((0..4).all(|device| rebuilt.is_in_service(DeviceId(device))));
}

/// Issue 20: a seed's refinement prompt carries its latest attempts, at most `SEED_HISTORY`
/// (KernelAgent keeps the last 8), oldest first, each with why it failed.
#[test]
fn a_seed_refined_many_times_carries_its_last_eight_attempts() {
    use crate::ports::SEED_HISTORY;
    let config = SearchConfig {
        max_refinements: 10,
        generation: Some(Generation {
            num_seeds: 1,
            kept: SeedsKept::First,
        }),
        ..config(1, 1, 1, 1, Pacing::Rounds)
    };
    let mut state = SearchState::new(config);
    let asked = |decisions: Vec<Decision>| {
        decisions.into_iter().find_map(|decision| match decision {
            Decision::RequestSeed { context, .. } => Some(context),
            _ => None,
        })
    };
    let mut context = asked(state.apply(&started(""))).expect("the seed is asked for");
    for attempt in 0..10 {
        assert_eq!(context.attempt, attempt);
        let history: Vec<String> = context
            .attempts
            .iter()
            .map(|a| a.source.text().to_string())
            .collect();
        let first = attempt.saturating_sub(SEED_HISTORY as u32);
        let expected: Vec<String> = (first..attempt).map(|k| format!("seed try {k}")).collect();
        assert_eq!(history, expected, "attempt {attempt}");
        let mut reply = answered(1, 0, attempt, ReplyOutcome::Code, None);
        if let Event::ProposalReceived {
            round,
            request_id,
            code,
            ..
        } = &mut reply
        {
            *round = 0;
            *request_id = if attempt == 0 {
                "r0-c1".into()
            } else {
                format!("r0-c1-refine{attempt}")
            };
            *code = Some(format!("seed try {attempt}"));
        }
        state.apply(&reply);
        let failed = evaluated(1, 0, attempt, EvaluationOutcome::Failed, None);
        context = asked(state.apply(&failed)).expect("refined after any failure");
        state.check_invariants().unwrap();
    }
    assert_eq!(context.attempts.len(), SEED_HISTORY);
    assert!(
        context
            .attempts
            .iter()
            .all(|a| a.error == "an illegal memory access")
    );
}

/// A seed's first code, as its reply's record says.
fn seed_code(candidate: u64, text: &str) -> Event {
    let mut reply = code(candidate, 0, text);
    if let Event::ProposalReceived {
        round, request_id, ..
    } = &mut reply
    {
        *round = 0;
        *request_id = format!("r0-c{candidate}");
    }
    reply
}

fn generating(num_seeds: u32, kept: SeedsKept, n: u32) -> SearchConfig {
    SearchConfig {
        generation: Some(Generation { num_seeds, kept }),
        ..config(n, 1, 1, 1, Pacing::Rounds)
    }
}

/// Issue 20: keeping all seeds, the first verified seed waits for the others, keeps its caches
/// (it may join the first beam), and the fastest N make the first beam.
#[test]
fn keeping_all_seeds_the_fastest_make_the_first_beam_once_every_seed_ended() {
    let mut state = SearchState::new(generating(3, SeedsKept::All, 2));
    let mut inputs = vec![started("")];
    for seed in 1..=3 {
        inputs.push(seed_code(seed, &format!("seed {seed}")));
    }
    inputs.extend([
        verified(1, 0, 5.0),
        verified(2, 0, 3.0),
        evaluated(3, 0, 0, EvaluationOutcome::Failed, None),
    ]);
    let mut decisions = Vec::new();
    for input in &inputs {
        decisions = state.apply(input);
        state.check_invariants().unwrap();
        assert!(
            state.beam().is_empty() || std::ptr::eq(input, inputs.last().unwrap()),
            "no beam before every seed ended"
        );
    }
    let beam: Vec<u64> = state.beam().iter().map(|k| k.id.0).collect();
    assert_eq!(beam, vec![2, 1]);
    assert!(decisions.iter().any(|decision| matches!(
        decision,
        Decision::Record(Event::RoundStarted { round: 1, parents }) if *parents == [CandidateId(2), CandidateId(1)]
    )));
    assert!(decisions.iter().any(|decision| matches!(
        decision,
        Decision::Record(Event::CandidatePlanned {
            candidate: CandidateId(4),
            ..
        })
    )));
}

/// Issue 20: the first verified seed starts round 1; a seed that passes later competes for the
/// beam with that round's candidates, keeping its caches until the round decides.
#[test]
fn a_seed_that_passes_after_the_search_started_joins_the_round_under_way() {
    let mut state = SearchState::new(generating(2, SeedsKept::First, 2));
    let inputs = [
        started(""),
        seed_code(1, "seed 1"),
        seed_code(2, "seed 2"),
        verified(1, 0, 5.0),
        analysed(1, 1, &["memory"]),
        verified(2, 0, 3.0),
        code(3, 0, "k3"),
        code(4, 0, "k4"),
        verified(3, 0, 4.0),
        verified(4, 0, 6.0),
    ];
    for input in &inputs {
        state.apply(input);
        state.check_invariants().unwrap();
    }
    let beam: Vec<u64> = state.beam().iter().map(|k| k.id.0).collect();
    assert_eq!(beam, vec![2, 3]);
    assert!(state.finished().is_some());
}

/// Issue 22: two models share a round by weight (2:1) and each prompt gives two samples: the
/// candidates of one prompt share its model and bottleneck, the analysis asks for the one
/// bottleneck they take, of the first model, and every request for code names its model.
#[test]
fn models_share_a_round_by_weight_and_a_prompts_samples_share_its_model() {
    let mut config = config(1, 1, 2, 1, Pacing::Rounds);
    config.search.fan_out = FanOut {
        expanding_parents: None,
        models: 2,
        samples_per_prompt: 2,
    };
    let share = |name: &str, weight| crate::search::ModelShare {
        name: name.into(),
        weight,
    };
    config.ensemble = Ensemble::new(vec![share("a", 2), share("b", 1)]);
    let mut state = SearchState::new(config);
    let mut decisions = state.apply(&started("k0"));
    decisions.extend(state.apply(&verified(0, 0, 8.0)));
    decisions.extend(state.apply(&analysed(0, 1, &["memory"])));
    let planned: Vec<(u64, u32, Option<String>)> = decisions
        .iter()
        .filter_map(|decision| match decision {
            Decision::Record(Event::CandidatePlanned {
                candidate,
                proposal_index,
                model,
                ..
            }) => Some((candidate.0, *proposal_index, model.clone())),
            _ => None,
        })
        .collect();
    let named = |name: &str| Some(name.to_string());
    assert_eq!(
        planned,
        [
            (1, 0, named("a")),
            (2, 0, named("a")),
            (3, 0, named("b")),
            (4, 0, named("b"))
        ]
    );
    let analysis: Vec<(u32, Option<String>)> = decisions
        .iter()
        .filter_map(|decision| match decision {
            Decision::Record(Event::AnalysisRequested {
                requested, model, ..
            }) => Some((*requested, model.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(analysis, [(1, named("a"))]);
    let asked: Vec<(u64, Option<String>)> = decisions
        .iter()
        .filter_map(|decision| match decision {
            Decision::Record(Event::ProposalRequested {
                candidate, model, ..
            }) => Some((candidate.0, model.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        asked,
        [
            (1, named("a")),
            (2, named("a")),
            (3, named("b")),
            (4, named("b"))
        ]
    );
    assert_eq!(
        state.model_of(CandidateId(7)),
        Some("a"),
        "round 2's second prompt"
    );
}

/// Issue 20's review: a seed whose reply has no code is refined like any failed seed, the
/// refinement's attempt saying that the reply had no code.
#[test]
fn a_seed_reply_without_code_is_refined_with_no_code_as_its_failure() {
    let config = SearchConfig {
        max_refinements: 1,
        ..generating(1, SeedsKept::First, 1)
    };
    let mut state = SearchState::new(config);
    state.apply(&started(""));
    let mut reply = answered(1, 0, 0, ReplyOutcome::NoCode, None);
    if let Event::ProposalReceived {
        round, request_id, ..
    } = &mut reply
    {
        *round = 0;
        *request_id = "r0-c1".into();
    }
    let context = state
        .apply(&reply)
        .into_iter()
        .find_map(|decision| match decision {
            Decision::RequestSeed { context, .. } => Some(context),
            _ => None,
        })
        .expect("the seed is refined");
    state.check_invariants().unwrap();
    assert_eq!(context.attempt, 1);
    assert_eq!(context.attempts.len(), 1);
    assert_eq!(context.attempts[0].source.text(), "");
    assert!(
        context.attempts[0]
            .error
            .starts_with("no code in the reply"),
        "{}",
        context.attempts[0].error
    );
}

/// Issue 20's review: an evaluator that cannot start refuses the run (exit 2) while nothing
/// was evaluated, for a seed as for the initial kernel; once something was, the run fails.
#[test]
fn a_seeds_evaluator_that_cannot_start_refuses_the_run_only_before_anything_was_evaluated() {
    let unstartable = |seed| evaluated(seed, 0, 0, EvaluationOutcome::Unstartable, None);
    let mut first = SearchState::new(generating(2, SeedsKept::First, 1));
    for input in [
        started(""),
        seed_code(1, "seed 1"),
        seed_code(2, "seed 2"),
        unstartable(1),
    ] {
        first.apply(&input);
    }
    let (outcome, reason) = first.finished().expect("the run ends");
    assert_eq!(*outcome, RunOutcome::Refused);
    assert!(
        reason.starts_with("seed 1 could not be evaluated: "),
        "{reason}"
    );

    let mut later = SearchState::new(generating(2, SeedsKept::First, 1));
    for input in [
        started(""),
        seed_code(1, "seed 1"),
        seed_code(2, "seed 2"),
        evaluated(1, 0, 0, EvaluationOutcome::WrongOutput, None),
        unstartable(2),
    ] {
        later.apply(&input);
    }
    let (outcome, reason) = later.finished().expect("the run ends");
    assert_eq!(*outcome, RunOutcome::Failed);
    assert!(
        reason.starts_with("the evaluator of device 0 could not start"),
        "{reason}"
    );
}

fn reply(text: &str, code: Option<&str>) -> crate::ports::LlmReply {
    crate::ports::LlmReply {
        text: text.to_string(),
        code: code.map(KernelSource::new),
        truncated: false,
        usage: None,
        cost_usd: Some(0.25),
    }
}

/// Issue 21: a reply becomes its request's `*_received` record from the pending registry,
/// which the fold then takes like any record; once answered it is no longer pending.
#[test]
fn a_reply_to_a_pending_request_is_its_received_record_and_then_nothing_more() {
    let mut steps = up_to_the_first_proposal();
    steps.pop();
    let mut state = check(one_proposal(0), &steps);
    let request = state
        .llm_request(
            "r1-c1",
            RenderedPrompt {
                system: "be fast".into(),
                user: "make it faster".into(),
            },
        )
        .expect("r1-c1 is pending");
    assert_eq!(
        (
            request.kind,
            request.candidate,
            request.round,
            request.prompt.as_str()
        ),
        (RequestKind::Optimize, CandidateId(1), 1, "make it faster")
    );
    assert_eq!(
        state.exchange("r1-c1"),
        Some(Exchange {
            candidate: CandidateId(1),
            prompt: "prompt.md".into(),
            reply: "reply.md".into(),
            code: Some("kernel.proposal.py".into()),
        })
    );
    let received = state
        .received("r1-c1", Answer::Reply(&reply("```k1```", Some("k1"))), None)
        .expect("r1-c1 is pending");
    match &received {
        Event::ProposalReceived {
            candidate: CandidateId(1),
            device: DeviceId(0),
            outcome: ReplyOutcome::Code,
            code: Some(code),
            cost_usd: Some(cost),
            error: None,
            ..
        } => assert_eq!((code.as_str(), *cost), ("k1", 0.25)),
        other => panic!("a proposal with code: {other:?}"),
    }
    let decisions: Vec<String> = state.apply(&received).iter().map(describe).collect();
    assert_eq!(decisions, ["evaluate 1 on 0, attempt 0: k1"]);
    assert_eq!(
        state.received("r1-c1", Answer::Reply(&reply("again", None)), None),
        None
    );
    assert_eq!(state.exchange("r1-c1"), None);
}

#[test]
fn a_reply_without_code_an_unrendered_prompt_and_a_provider_error_say_so_in_their_record() {
    let mut steps = up_to_the_first_proposal();
    steps.pop();
    let state = check(one_proposal(0), &steps);
    let outcome_and_error = |answer: Answer<'_>| match state.received("r1-c1", answer, None) {
        Some(Event::ProposalReceived { outcome, error, .. }) => (outcome, error),
        other => panic!("a proposal_received: {other:?}"),
    };
    let without_code = reply("no code here", None);
    assert_eq!(
        outcome_and_error(Answer::Reply(&without_code)),
        (ReplyOutcome::NoCode, None)
    );
    assert_eq!(
        outcome_and_error(Answer::NotRendered("no template".into())),
        (ReplyOutcome::NotRendered, Some("no template".into()))
    );
    assert_eq!(
        outcome_and_error(Answer::Error(&crate::ports::LlmError::Exhausted)),
        (
            ReplyOutcome::Exhausted,
            Some("llm provider is exhausted".into())
        )
    );
    assert_eq!(
        outcome_and_error(Answer::Error(&crate::ports::LlmError::BudgetReached(
            "budget_usd 1.00 reached".into()
        ))),
        (ReplyOutcome::Budget, Some("budget_usd 1.00 reached".into()))
    );
}

#[test]
fn an_analysis_keeps_no_more_bottlenecks_than_it_asked_for() {
    let mut state = SearchState::new(one_proposal(0));
    state.apply(&started("k0"));
    state.apply(&verified(0, 0, 8.0));
    let request = state
        .llm_request(
            "r1-c0-analysis",
            RenderedPrompt {
                system: String::new(),
                user: String::new(),
            },
        )
        .expect("the analysis is pending");
    assert_eq!(
        (request.kind, request.candidate),
        (RequestKind::Analysis, CandidateId(0))
    );
    let text = r#"{"bottlenecks": [{"title": "memory"}, {"title": "launch"}]}"#;
    match state.received("r1-c0-analysis", Answer::Reply(&reply(text, None)), None) {
        Some(Event::AnalysisReceived {
            requested: 1,
            returned: 1,
            bottlenecks,
            outcome: ReplyOutcome::Answered,
            ..
        }) => assert_eq!(bottlenecks[0].title, "memory"),
        other => panic!("an analysis with one bottleneck: {other:?}"),
    }
}

fn evaluation(device: u32) -> Evaluation {
    Evaluation {
        candidate: CandidateId(3),
        parent: Some(CandidateId::INITIAL),
        round: 1,
        device: DeviceId(device),
        attempt: 0,
        source: KernelSource::new("k3"),
    }
}

fn outcome_and_reason(record: &Event) -> (EvaluationOutcome, Option<&str>) {
    match record {
        Event::Evaluated {
            outcome, reason, ..
        } => (*outcome, reason.as_deref()),
        other => panic!("an evaluated record: {other:?}"),
    }
}

/// Issue 21: an evaluation's result becomes its `evaluated` record without a runtime.
#[test]
fn an_evaluation_is_recorded_verified_wrong_lost_or_failed_by_what_its_steps_said() {
    use crate::model::{TimeOutcome, Timing, Verdict, VerifyOutcome};
    use crate::ports::{EvalError, Evaluated};
    let passed = VerifyOutcome {
        verdict: Verdict::Passed {
            max_abs_err: 0.0,
            max_rel_err: 0.0,
            rel_l2_err: None,
            rule: None,
        },
        provenance: Provenance::Measured,
        launched_kernels: vec!["k".into()],
        compiled: None,
    };
    let timed = TimeOutcome {
        timing: Timing {
            median_ms: 2.0,
            min_ms: 1.5,
            max_ms: 3.0,
            samples: 10,
        },
        provenance: Provenance::Measured,
        floor_ms: Some(1.0),
    };
    let record = evaluation(1).record(Ok(Evaluated {
        verify: Ok(passed.clone()),
        time: Some(Ok(timed)),
        same_code_as: None,
    }));
    match &record {
        Event::Evaluated {
            outcome: EvaluationOutcome::Verified,
            time_ms: Some(time),
            speed_of_light_pct: Some(percent),
            device: DeviceId(1),
            ..
        } => assert_eq!((*time, *percent), (2.0, 50.0)),
        other => panic!("a verified record at half the speed of light: {other:?}"),
    }
    let wrong = evaluation(1).record(Ok(Evaluated {
        verify: Ok(VerifyOutcome {
            verdict: Verdict::Failed {
                reason: "max error 3".into(),
            },
            ..passed.clone()
        }),
        time: None,
        same_code_as: None,
    }));
    assert_eq!(
        outcome_and_reason(&wrong),
        (
            EvaluationOutcome::WrongOutput,
            Some("verification failed: max error 3")
        )
    );
    let lost = Evaluated {
        verify: Ok(passed),
        time: Some(Err(EvalError::DeviceLost {
            reason: "the agent of n2 is gone".into(),
            devices: vec![DeviceId(1), DeviceId(2)],
        })),
        same_code_as: None,
    };
    assert_eq!(
        lost_devices(&lost),
        Some((
            vec![DeviceId(1), DeviceId(2)],
            "the agent of n2 is gone".into()
        ))
    );
    assert_eq!(
        outcome_and_reason(&evaluation(1).record(Ok(lost))),
        (
            EvaluationOutcome::DeviceLost,
            Some("device lost: the agent of n2 is gone")
        )
    );
    let unstartable = evaluation(1).record(Ok(Evaluated {
        verify: Err(EvalError::Start("no python3".into())),
        time: None,
        same_code_as: None,
    }));
    assert_eq!(
        outcome_and_reason(&unstartable),
        (EvaluationOutcome::Unstartable, Some("no python3"))
    );
}

#[test]
fn a_full_disk_is_told_from_an_evaluations_reason_by_its_first_line() {
    let full = evaluation(0).record(Err((
        EvaluationOutcome::Failed,
        "OSError: [Errno 28] No space left on device\nTraceback ...".into(),
    )));
    assert_eq!(
        disk_full(&full).as_deref(),
        Some("OSError: [Errno 28] No space left on device")
    );
    let crash = evaluation(0).record(Err((
        EvaluationOutcome::Failed,
        "an illegal memory access".into(),
    )));
    assert_eq!(disk_full(&crash), None);
}

/// Issue 21: the finale's device is the state's to choose: the first in service with nothing
/// in flight.
#[test]
fn the_finale_runs_on_the_first_device_in_service_with_nothing_in_flight() {
    let mut two = SearchState::new(config(1, 1, 1, 2, Pacing::Rounds));
    two.apply(&started("k0"));
    assert_eq!(
        two.finale_device(),
        Ok(DeviceId(1)),
        "0 evaluates the initial kernel"
    );
    two.apply(&devices_lost(&[1]));
    assert_eq!(
        two.finale_device(),
        Err("the finale was skipped: every device was still evaluating")
    );
    two.apply(&verified(0, 0, 8.0));
    assert_eq!(two.finale_device(), Ok(DeviceId(0)));
}

#[test]
fn the_finale_checks_the_initial_kernel_then_a_best_the_beam_lacks_then_the_beam() {
    let mut state = SearchState::new(SearchConfig {
        profile_parents: true,
        ..one_proposal(0)
    });
    state.apply(&started("k0"));
    state.apply(&verified(0, 0, 8.0));
    let initial = state.best().expect("the initial kernel is the first beam");
    let best = RankedKernel {
        id: CandidateId(5),
        source: KernelSource::new("k5"),
        time_ms: 2.0,
        launched_kernels: Vec::new(),
    };
    let finale = state.finale_kernels(best, initial.clone());
    let ids = |kernels: &[(CandidateId, KernelSource)]| {
        kernels.iter().map(|(id, _)| id.0).collect::<Vec<_>>()
    };
    assert_eq!(ids(&finale.kernels), [0, 5]);
    assert_eq!(
        finale.beam.iter().map(|k| k.id.0).collect::<Vec<_>>(),
        [5, 0]
    );
    assert_eq!(
        finale.unprofiled,
        BTreeSet::from([CandidateId(0), CandidateId(5)])
    );
    let without_profiles =
        SearchState::new(one_proposal(0)).finale_kernels(initial.clone(), initial);
    assert_eq!(ids(&without_profiles.kernels), [0]);
    assert!(without_profiles.unprofiled.is_empty(), "profiling is off");
}

#[test]
fn a_run_keeps_two_reflexions_in_flight_per_device_and_at_least_eight() {
    assert_eq!(reflexions_in_flight_for(1), 8);
    assert_eq!(reflexions_in_flight_for(4), 8);
    assert_eq!(reflexions_in_flight_for(6), 12);
}

/// Issue 21: what an evaluation that ran comes to is the state's to say: the devices it found
/// lost first, then its record, or the full disk that stops the run where evaluations fill it.
#[test]
fn a_full_disk_stops_the_run_only_where_the_evaluations_write_on_its_disk() {
    use crate::ports::{EvalError, Evaluated};
    let full = || Evaluated {
        verify: Err(EvalError::Crashed {
            reason: "OSError: [Errno 28] No space left on device\nTraceback ...".into(),
        }),
        time: None,
        same_code_as: None,
    };
    let stopped = evaluation(0).returned(full(), true);
    assert_eq!(
        stopped.record,
        Err(
            "the disk is full: the evaluation of candidate 3 failed with \
             evaluator crashed: OSError: [Errno 28] No space left on device"
                .into()
        )
    );
    assert_eq!(stopped.lost, None);
    let sandboxed = evaluation(0).returned(full(), false).record;
    assert_eq!(
        sandboxed
            .as_ref()
            .map(outcome_and_reason)
            .ok()
            .map(|(outcome, _)| outcome),
        Some(EvaluationOutcome::Failed),
        "in the sandbox's own scratch a full disk is the candidate's failure"
    );
    let lost = evaluation(1).returned(
        Evaluated {
            verify: Err(EvalError::DeviceLost {
                reason: "the agent of n2 is gone".into(),
                devices: vec![DeviceId(1), DeviceId(2)],
            }),
            time: None,
            same_code_as: None,
        },
        true,
    );
    assert_eq!(
        lost.lost,
        Some((
            vec![DeviceId(1), DeviceId(2)],
            "the agent of n2 is gone".into()
        ))
    );
    assert_eq!(
        lost.record.as_ref().map(outcome_and_reason).ok(),
        Some((
            EvaluationOutcome::DeviceLost,
            Some("device lost: the agent of n2 is gone")
        ))
    );
}

/// Issue 21: a worker that died under an attempt, its restart, and a device no worker serves
/// are records the state makes, the fold's inputs like any other.
#[test]
fn a_dead_worker_its_restart_and_a_device_without_a_worker_become_records() {
    assert_eq!(
        evaluation(2).worker_died(),
        Event::WorkerDied {
            device: DeviceId(2),
            candidate: Some(CandidateId(3)),
            reason: "the worker stopped while evaluating (its handler panicked or its mailbox \
                     closed)"
                .into(),
        }
    );
    assert_eq!(
        outcome_and_reason(&evaluation(2).after_restart(Ok(()))),
        (
            EvaluationOutcome::WorkerDied,
            Some("the worker died and was restarted")
        )
    );
    assert_eq!(
        outcome_and_reason(&evaluation(2).after_restart(Err("the restart budget is spent".into()))),
        (
            EvaluationOutcome::Failed,
            Some("the restart budget is spent")
        )
    );
    assert_eq!(
        outcome_and_reason(&evaluation(2).failed(unserved(DeviceId(2)))),
        (EvaluationOutcome::Failed, Some("no worker serves device 2"))
    );
    assert_eq!(
        results::profiled(
            CandidateId(0),
            DeviceId(7),
            Err(ProfileError::Failed(unserved(DeviceId(7))))
        ),
        Event::ProfileFailed {
            candidate: CandidateId(0),
            device: DeviceId(7),
            unavailable: false,
            error: "no worker serves device 7".into(),
        }
    );
}

/// Issue 21: a stop from outside is a record and the reason its requests in flight are
/// cancelled for, the same reason the search ends with.
#[test]
fn a_signal_ends_the_search_for_the_reason_its_cancelled_requests_give() {
    let (record, reason) = Stop::Signal("SIGTERM".into()).record();
    assert_eq!(
        (&record, reason.as_str()),
        (
            &Event::Interrupted {
                signal: "SIGTERM".into()
            },
            "interrupted by SIGTERM"
        )
    );
    let mut steps = up_to_the_first_proposal();
    steps.pop();
    steps.push((record, "finish Interrupted: interrupted by SIGTERM"));
    let state = check(one_proposal(0), &steps);
    match state.cancelled_by_the_end(&reason).as_slice() {
        [
            Event::ProposalReceived {
                error: Some(error), ..
            },
        ] => assert_eq!(
            error,
            "cancelled: the run ended before the reply came (interrupted by SIGTERM)"
        ),
        other => panic!("one proposal to cancel: {other:?}"),
    }
    assert_eq!(
        Stop::Failed("journal.jsonl cannot be written".into()).record(),
        (
            Event::Stopped {
                reason: "journal.jsonl cannot be written".into()
            },
            "journal.jsonl cannot be written".into()
        )
    );
}

/// Issue 21: how the search's end is carried out is the state's to say: a completed run with a
/// best kernel has its finale on a free device that a worker serves, or its reason says why
/// the finale was skipped; a run that ended otherwise has none and says nothing of it.
#[test]
fn a_completed_run_has_its_finale_or_says_why_it_was_skipped() {
    let mut two = SearchState::new(config(1, 1, 1, 2, Pacing::Rounds));
    two.apply(&started("k0"));
    let initial = RankedKernel {
        id: CandidateId::INITIAL,
        source: KernelSource::new("k0"),
        time_ms: 8.0,
        launched_kernels: Vec::new(),
    };
    let end = |state: &SearchState, outcome: RunOutcome, overrun: Option<&str>, workers: &[u32]| {
        state.ending(
            outcome,
            "max_rounds (1) reached".into(),
            Some(initial.clone()),
            Some(initial.clone()),
            overrun,
            |device| {
                workers
                    .contains(&device.0)
                    .then_some(format!("worker {device}"))
            },
        )
    };
    let finale = end(&two, RunOutcome::Completed, None, &[0, 1]);
    assert_eq!(finale.reason, "max_rounds (1) reached");
    let finale = finale.finale.expect("a finale on the free device");
    assert_eq!(
        (
            finale.device,
            finale.worker.as_str(),
            finale.kernels.kernels.len()
        ),
        (DeviceId(1), "worker 1", 1),
        "0 evaluates the initial kernel"
    );
    let skipped = |ending: Ending<String>| {
        assert_eq!(ending.finale, None);
        ending.reason
    };
    assert_eq!(
        skipped(end(&two, RunOutcome::Completed, None, &[0])),
        "max_rounds (1) reached; the finale was skipped: no worker serves device 1"
    );
    assert_eq!(
        skipped(end(
            &two,
            RunOutcome::Completed,
            Some("the finale was skipped: it would not end by max_time"),
            &[0, 1]
        )),
        "max_rounds (1) reached; the finale was skipped: it would not end by max_time"
    );
    assert_eq!(
        skipped(end(&two, RunOutcome::Interrupted, None, &[0, 1])),
        "max_rounds (1) reached"
    );
    two.apply(&devices_lost(&[1]));
    assert_eq!(
        skipped(end(&two, RunOutcome::Completed, None, &[0, 1])),
        "max_rounds (1) reached; the finale was skipped: every device was still evaluating"
    );
    let without_best = two.ending(
        RunOutcome::Completed,
        "no candidate was verified".into(),
        None,
        Some(initial.clone()),
        None,
        |_| Some(()),
    );
    assert_eq!(
        (without_best.reason.as_str(), without_best.finale),
        ("no candidate was verified", None)
    );
}

/// Issue 21: the fold builds `run_resumed` whole: the resuming command's facts, what the
/// journal left in flight and pending, and the replies recovered from their files, in order.
#[test]
fn run_resumed_says_what_was_in_flight_pending_and_recovered() {
    let resume = Resume {
        records: Vec::new(),
        in_flight_at_two_deaths: BTreeSet::new(),
        previous_end: "killed".into(),
        gap_s: 12.5,
        orphans_ended: 2,
        torn_line: true,
        forced_changes: vec!["max_rounds".into()],
    };
    let mut steps = up_to_the_first_proposal();
    let evaluating = check(one_proposal(0), &steps);
    steps.pop();
    let asking = check(one_proposal(0), &steps);
    let recovered = ["r1-c1".to_string(), "r0-c9".to_string()];
    assert_eq!(
        asking.run_resumed(&resume, &recovered),
        Event::RunResumed {
            previous_end: "killed".into(),
            gap_s: 12.5,
            in_flight: Vec::new(),
            pending_requests: vec!["r1-c1".into()],
            recovered: vec!["r0-c9".into(), "r1-c1".into()],
            orphans_ended: 2,
            torn_line: true,
            forced_changes: vec!["max_rounds".into()],
        }
    );
    match evaluating.run_resumed(&resume, &[]) {
        Event::RunResumed {
            in_flight,
            pending_requests,
            recovered,
            ..
        } => assert_eq!(
            (in_flight, pending_requests.len(), recovered.len()),
            (vec![CandidateId(1)], 0, 0)
        ),
        other => panic!("a run_resumed: {other:?}"),
    }
}

/// The templates as their kind's name, and the candidate the context is about.
struct NamedTemplates;

impl PromptBuilder for NamedTemplates {
    fn optimization(&self, context: &ProposalContext) -> Result<RenderedPrompt, String> {
        rendered("optimization", context.candidate)
    }
    fn analysis(&self, context: &AnalysisContext) -> Result<RenderedPrompt, String> {
        rendered("analysis", context.candidate)
    }
    fn refinement(&self, context: &RefinementContext) -> Result<RenderedPrompt, String> {
        rendered("refinement", context.candidate)
    }
    fn seed(&self, context: &SeedContext) -> Result<RenderedPrompt, String> {
        rendered("seed", context.candidate)
    }
    fn reflexion(&self, context: &ReflexionContext) -> Result<RenderedPrompt, String> {
        rendered("reflexion", context.candidate)
    }
}

fn rendered(template: &str, candidate: CandidateId) -> Result<RenderedPrompt, String> {
    Ok(RenderedPrompt {
        system: template.into(),
        user: format!("about {candidate}"),
    })
}

/// Issue 21: a request's prompt is rendered from the context it was decided with, by the
/// template of its kind; a decision that asks nothing has no prompt.
#[test]
fn each_request_is_rendered_by_the_template_of_its_kind() {
    let prompts = |decisions: Vec<Decision>| -> Vec<String> {
        decisions
            .iter()
            .map(|decision| match decision.prompt(&NamedTemplates) {
                Some((id, Ok(prompt))) => format!("{id}: {} {}", prompt.system, prompt.user),
                Some((id, Err(why))) => format!("{id}: {why}"),
                None => format!("no prompt for {}", describe(decision)),
            })
            .collect()
    };
    let mut state = SearchState::new(one_proposal(1));
    assert_eq!(
        prompts(state.apply(&started("k0"))),
        ["no prompt for evaluate 0 on 0, attempt 0: k0"]
    );
    let asked: Vec<String> = prompts(state.apply(&verified(0, 0, 8.0)));
    assert_eq!(asked.last().unwrap(), "r1-c0-analysis: analysis about 0");
    let asked = prompts(state.apply(&analysed(0, 1, &["memory"])));
    assert_eq!(asked.last().unwrap(), "r1-c1: optimization about 1");
    state.apply(&code(1, 0, "k1"));
    let failed = evaluated(1, 0, 0, EvaluationOutcome::WrongOutput, None);
    let asked = prompts(state.apply(&failed));
    assert!(
        asked.contains(&"r1-c1-refine1: refinement about 1".to_string()),
        "{asked:?}"
    );
}

/// Issue 21: a lost agent is news while one of its devices is in service; its restart serves
/// them again, or its failure retires them, by the records the state makes.
#[test]
fn a_lost_agent_is_news_once_and_its_restart_serves_again_or_retires_its_devices() {
    let mut state = SearchState::new(config(1, 1, 1, 3, Pacing::Rounds));
    state.apply(&started("k0"));
    let node = [DeviceId(1), DeviceId(2)];
    assert!(state.any_in_service(&node));
    state.apply(&Event::AgentRestarting {
        node: "n2".into(),
        devices: node.to_vec(),
        reason: "the agent of n2 is gone".into(),
    });
    assert!(!state.any_in_service(&node), "reported once, by the first");
    let mut served = state.clone();
    let back = devices::agent_restarted("n2".into(), node.to_vec(), 1, Ok("4242.1".into()));
    served.apply(&back);
    assert!(served.any_in_service(&node));
    let failed = devices::agent_restarted("n2".into(), node.to_vec(), 1, Err("srun failed".into()));
    assert_eq!(
        failed,
        Event::DevicesLost {
            devices: node.to_vec(),
            reason: "srun failed".into()
        }
    );
    state.apply(&failed);
    assert!(state.is_retired(DeviceId(1)) && state.is_retired(DeviceId(2)));
}

/// Beam 2 × 2 on three devices: round 1's four candidates from the initial kernel (8 ms), each
/// on its device with its code, the first two verified (5 and 9 ms).
fn round_one_with_two_of_four_results() -> Vec<(Event, &'static str)> {
    let mut steps = round_one_asked_on_three_devices();
    steps.extend([
        (code(1, 1, "k1"), "evaluate 1 on 1, attempt 0: k1"),
        (code(2, 2, "k2"), "evaluate 2 on 2, attempt 0: k2"),
        (code(3, 0, "k3"), "evaluate 3 on 0, attempt 0: k3"),
        (code(4, 1, "k4"), "evaluate 4 on 1, attempt 0: k4"),
        (
            verified(1, 1, 5.0),
            "1 finished at 5 ms
             best is now 1 (5 ms)
             journal request r1-c1-reflexion
             ask what 1 taught",
        ),
        (
            verified(2, 2, 9.0),
            "2 finished at 9 ms
             journal request r1-c2-reflexion
             ask what 2 taught",
        ),
    ]);
    steps
}

/// Issue 23: once the kernels known to rank before a verified kernel, plus the round's
/// candidates still out, are fewer than the beam's width, it is a parent of the next round
/// whatever they do: its analysis goes out before the round ends, as the round's end would ask
/// for it, and its proposals as soon as the round ends, after those of the parents prepared in
/// earlier rounds, as they would without the overlap. A kernel the last candidate can still push
/// out waits for the round's end.
#[test]
fn in_rounds_a_kernel_certain_to_be_a_parent_of_the_next_round_is_analysed_before_the_round_ends() {
    let mut steps = round_one_with_two_of_four_results();
    steps.extend([
        // 0 kernels before 1, and one candidate out: 1 is a parent of round 2. 3 is not
        // (4 may still come before both).
        (
            verified(3, 0, 7.0),
            "3 finished at 7 ms
             journal request r1-c3-reflexion
             ask what 3 taught
             journal request r2-c1-analysis
             ask for 2 bottlenecks of 1",
        ),
        (analysed(1, 2, &["memory", "launch"]), ""),
        (
            verified(4, 1, 6.0),
            "4 finished at 6 ms
             journal request r1-c4-reflexion
             ask what 4 taught
             beam after round 1: [1, 4]
             round 1 done: 4 proposed, 4 verified, 0 failed, 0 duplicates
             round 2 starts from [CandidateId(1), CandidateId(4)]
             planned 5 in round 2 from 1 (proposal 0) on 2
             planned 6 in round 2 from 1 (proposal 1) on 0
             planned 7 in round 2 from 4 (proposal 0) on 1
             planned 8 in round 2 from 4 (proposal 1) on 2
             journal request r2-c5
             ask for 5 from 1 (proposal 0 of 2, bottleneck Some(\"memory\"))
             journal request r2-c6
             ask for 6 from 1 (proposal 1 of 2, bottleneck Some(\"launch\"))
             journal request r2-c4-analysis
             ask for 2 bottlenecks of 4
             remove the caches of 2
             remove the caches of 3",
        ),
    ]);
    check(config(2, 2, 2, 3, Pacing::Rounds), &steps);
}

/// Issue 23: a parent analysed ahead of its round proposes after the round's faster new parents,
/// as their analyses, asked for together at the round's start, would have it without the
/// overlap (the replay provider hands its files out in the order requests for code are sent).
#[test]
fn in_rounds_a_parent_analysed_ahead_proposes_after_the_faster_new_parents_of_its_round() {
    let mut steps = round_one_with_two_of_four_results();
    steps.extend([
        (
            verified(3, 0, 9.5),
            "3 finished at 9.5 ms
             journal request r1-c3-reflexion
             ask what 3 taught
             journal request r2-c1-analysis
             ask for 2 bottlenecks of 1",
        ),
        (analysed(1, 2, &["memory", "launch"]), ""),
        // 4 comes before 1: 1, ready, waits for 4's analysis.
        (
            verified(4, 1, 4.0),
            "4 finished at 4 ms
             best is now 4 (4 ms)
             journal request r1-c4-reflexion
             ask what 4 taught
             beam after round 1: [4, 1]
             round 1 done: 4 proposed, 4 verified, 0 failed, 0 duplicates
             round 2 starts from [CandidateId(4), CandidateId(1)]
             planned 5 in round 2 from 4 (proposal 0) on 2
             planned 6 in round 2 from 4 (proposal 1) on 0
             planned 7 in round 2 from 1 (proposal 0) on 1
             planned 8 in round 2 from 1 (proposal 1) on 2
             journal request r2-c4-analysis
             ask for 2 bottlenecks of 4
             remove the caches of 2
             remove the caches of 3",
        ),
        (
            analysed(4, 2, &["memory", "launch"]),
            "journal request r2-c5
             ask for 5 from 4 (proposal 0 of 2, bottleneck Some(\"memory\"))
             journal request r2-c6
             ask for 6 from 4 (proposal 1 of 2, bottleneck Some(\"launch\"))
             journal request r2-c7
             ask for 7 from 1 (proposal 0 of 2, bottleneck Some(\"memory\"))
             journal request r2-c8
             ask for 8 from 1 (proposal 1 of 2, bottleneck Some(\"launch\"))",
        ),
    ]);
    check(config(2, 2, 2, 3, Pacing::Rounds), &steps);
}

/// Issue 23: one device, parents profiled, references timed.
fn starting_up(pacing: Pacing) -> SearchConfig {
    SearchConfig {
        profile_parents: true,
        time_references: true,
        ..config(1, 2, 2, 1, pacing)
    }
}

#[test]
fn in_rounds_the_initial_kernel_is_profiled_before_the_references_which_follow_the_first_request() {
    check(
        starting_up(Pacing::Rounds),
        &[
            (started("k0"), "evaluate 0 on 0, attempt 0: k0"),
            (
                verified(0, 0, 8.0),
                "0 finished at 8 ms
                 best is now 0 (8 ms)
                 round 1 starts from [CandidateId(0)]
                 planned 1 in round 1 from 0 (proposal 0) on 0
                 planned 2 in round 1 from 0 (proposal 1) on 0
                 profile 0 on 0",
            ),
            (
                profiled(0),
                "journal request r1-c0-analysis
                 ask for 2 bottlenecks of 0
                 time references on 0",
            ),
            (
                analysed(0, 1, &["memory", "launch"]),
                "journal request r1-c1
                 ask for 1 from 0 (proposal 0 of 2, bottleneck Some(\"memory\"))
                 journal request r1-c2
                 ask for 2 from 0 (proposal 1 of 2, bottleneck Some(\"launch\"))",
            ),
        ],
    );
}

#[test]
fn in_steady_search_the_initial_kernel_is_profiled_before_the_references_which_follow_the_first_request()
 {
    check(
        starting_up(Pacing::Steady { max_inflight: 1 }),
        &[
            (started("k0"), "evaluate 0 on 0, attempt 0: k0"),
            (
                verified(0, 0, 8.0),
                "0 finished at 8 ms
                 best is now 0 (8 ms)
                 profile 0 on 0
                 round 1 starts from [CandidateId(0)]
                 planned 1 in round 1 from 0 (proposal 0) on 0",
            ),
            (
                profiled(0),
                "journal request r1-c0-analysis
                 ask for 2 bottlenecks of 0
                 time references on 0",
            ),
        ],
    );
}

#[test]
fn without_profiling_the_references_follow_the_first_analysis_request() {
    let unprofiled = SearchConfig {
        profile_parents: false,
        ..starting_up(Pacing::Rounds)
    };
    check(
        unprofiled,
        &[
            (started("k0"), "evaluate 0 on 0, attempt 0: k0"),
            (
                verified(0, 0, 8.0),
                "0 finished at 8 ms
                 best is now 0 (8 ms)
                 round 1 starts from [CandidateId(0)]
                 planned 1 in round 1 from 0 (proposal 0) on 0
                 planned 2 in round 1 from 0 (proposal 1) on 0
                 journal request r1-c0-analysis
                 ask for 2 bottlenecks of 0
                 time references on 0",
            ),
        ],
    );
}

/// What a resume of a journal cut after `inputs` decides to time: the references it lacks, once.
fn references_on_resume(inputs: &[Event], timed: &[Reference]) -> Vec<String> {
    let config = starting_up(Pacing::Rounds);
    let mut live = SearchState::new(config.clone());
    let mut journal = Vec::new();
    for input in inputs {
        let decisions = live.apply(input);
        journal.push(input.clone());
        journal.extend(decisions.into_iter().filter_map(|decision| match decision {
            Decision::Record(record) => Some(record),
            _ => None,
        }));
    }
    for which in timed {
        journal.push(Event::ReferenceTimed {
            device: DeviceId(0),
            which: *which,
            time_ms: Some(3.0),
            provenance: Some(Provenance::Measured),
            error: None,
        });
    }
    let mut resumed = SearchState::rebuild(config, &journal);
    let (_, decisions) = resumed.resume(&BTreeSet::new());
    decisions
        .iter()
        .map(describe)
        .filter(|line| line.starts_with("time references") || line.starts_with("profile"))
        .collect()
}

#[test]
fn a_resume_times_the_references_it_lacks_and_leaves_them_after_the_first_request_if_none_was_out()
{
    let to_profile = [started("k0"), verified(0, 0, 8.0)];
    // The death came during the initial kernel's profile: it runs again, the references wait.
    assert_eq!(references_on_resume(&to_profile, &[]), ["profile 0 on 0"]);
    let asked = [started("k0"), verified(0, 0, 8.0), profiled(0)];
    // The first request was out and the references were not timed, or only one of them.
    assert_eq!(references_on_resume(&asked, &[]), ["time references on 0"]);
    assert_eq!(
        references_on_resume(&asked, &[Reference::Eager]),
        ["time references on 0"]
    );
    assert!(references_on_resume(&asked, &[Reference::Eager, Reference::Compile]).is_empty());
    // After the resume's profile, the first request takes the references with it.
    let config = starting_up(Pacing::Rounds);
    let mut resumed = SearchState::rebuild(config, &to_profile);
    let _ = resumed.resume(&BTreeSet::new());
    let after: Vec<String> = resumed.apply(&profiled(0)).iter().map(describe).collect();
    assert_eq!(
        after.last().map(String::as_str),
        Some("time references on 0")
    );
}

/// An `evaluated` record of a verified candidate whose call ran `code` (a fingerprint's text),
/// timed at `ms` or not timed.
fn verified_with_code(candidate: u64, ms: Option<f64>, code: &str) -> Event {
    let mut event = evaluated(candidate, 0, 0, EvaluationOutcome::Verified, ms);
    if let Event::Evaluated { compiled, .. } = &mut event {
        *compiled = CompiledCode::parse(&code.repeat(64 / code.len()));
    }
    event
}

/// Issue 23: a candidate verified with the compiled code of a candidate timed before it is a
/// duplicate of that one, "same compiled code", whether its worker skipped its timing or (the
/// earlier one timed meanwhile on another device) timed it; the first to have the code keeps it.
#[test]
fn a_candidate_with_the_compiled_code_of_a_timed_one_is_its_duplicate() {
    let steps = [
        (started("k0"), "evaluate 0 on 0, attempt 0: k0"),
        (
            verified_with_code(0, Some(8.0), "a0"),
            "0 finished at 8 ms
             best is now 0 (8 ms)
             round 1 starts from [CandidateId(0)]
             planned 1 in round 1 from 0 (proposal 0) on 0
             planned 2 in round 1 from 0 (proposal 1) on 0
             planned 3 in round 1 from 0 (proposal 2) on 0
             journal request r1-c0-analysis
             ask for 3 bottlenecks of 0",
        ),
        (
            analysed(0, 1, &["memory"]),
            "journal request r1-c1
             ask for 1 from 0 (proposal 0 of 3, bottleneck Some(\"memory\"))
             journal request r1-c2
             ask for 2 from 0 (proposal 1 of 3, bottleneck None)
             journal request r1-c3
             ask for 3 from 0 (proposal 2 of 3, bottleneck None)",
        ),
        (code(1, 0, "k1"), "evaluate 1 on 0, attempt 0: k1"),
        (
            code(2, 0, "k2 = renamed(k1)"),
            "evaluate 2 on 0, attempt 0: k2 = renamed(k1)",
        ),
        (code(3, 0, "k3"), "evaluate 3 on 0, attempt 0: k3"),
        (
            verified_with_code(1, Some(5.0), "b1"),
            "1 finished at 5 ms
             best is now 1 (5 ms)",
        ),
        // Its worker had the code of 1 by then: not timed.
        (
            verified_with_code(2, None, "b1"),
            "2 failed: same compiled code as candidate 1",
        ),
        // Timed before the worker knew of 1's code: a duplicate all the same, never the best.
        (
            verified_with_code(3, Some(4.0), "b1"),
            "3 failed: same compiled code as candidate 1
             beam after round 1: [1]
             round 1 done: 3 proposed, 1 verified, 0 failed, 2 duplicates
             finish Completed: max_rounds (1) reached
             remove the caches of 2
             remove the caches of 3",
        ),
    ];
    let config = config(1, 3, 1, 1, Pacing::Rounds);
    let live = check(config.clone(), &steps);
    let owners: Vec<(String, u64)> = live
        .timed_code()
        .iter()
        .map(|(code, id)| (code.as_str()[..2].to_string(), id.0))
        .collect();
    assert_eq!(owners, [("a0".to_string(), 0), ("b1".to_string(), 1)]);
    let journal: Vec<Event> = steps.iter().map(|(input, _)| input.clone()).collect();
    assert_eq!(SearchState::rebuild(config, &journal), live);
}
