//! Issue 12: the journal a whole run of the binary wrote reads back, record by record, and
//! folds to a search state that holds its invariants at every prefix and ends where the run
//! said it ended: the same best kernel, the same beam.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use actors::journal::Event;
use actors::model::{CandidateId, DeviceId};
use actors::search::{Ensemble, FanOut, Pacing, SearchKind, SearchSettings};
use actors::search_state::{Generation, SearchConfig, SearchState, SeedsKept};
use support::journal::typed_records;

fn dry_run(config: &str) -> PathBuf {
    dry_run_with(config, &[])
}

fn dry_run_with(config: &str, args: &[&str]) -> PathBuf {
    let dir = tempfile::tempdir().unwrap().keep();
    std::fs::write(dir.join("fold.yaml"), config).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_kactors"))
        .current_dir(&dir)
        .env_remove("KACTORS_CONFIG_DIR")
        .args(["run", "--strategy", "fold", "--config-dir", "."])
        .arg("--kernel-dir")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/optimize_01_matvec"))
        .args(args)
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let runs: Vec<PathBuf> = std::fs::read_dir(dir.join("runs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    runs.into_iter().next().unwrap()
}

fn search_config(pacing: Pacing, devices: u32, max_refinements: u32) -> SearchConfig {
    SearchConfig {
        search: SearchSettings {
            kind: SearchKind::Beam,
            num_top_kernels: 2,
            num_bottlenecks: 2,
            max_rounds: 3,
            max_no_improvement: None,
            max_candidates: None,
            fan_out: FanOut::default(),
        },
        pacing,
        devices: (0..devices).map(DeviceId).collect(),
        profile_parents: false,
        time_references: false,
        max_refinements,
        stop_at_roofline: false,
        requests_per_minute: None,
        reflexions_in_flight: 8,
        generation: None,
        ensemble: Ensemble::default(),
        overlap_rounds: true,
    }
}

fn assert_folds(run: &Path, config: SearchConfig) {
    let events: Vec<Event> = typed_records(run)
        .into_iter()
        .map(|record| record.event)
        .collect();
    for end in 0..=events.len() {
        let state = SearchState::rebuild(config.clone(), &events[..end]);
        if let Err(broken) = state.check_invariants() {
            panic!("the first {end} records fold to a broken state: {broken}");
        }
    }
    let state = SearchState::rebuild(config, &events);
    let Some(Event::RunFinished { best_candidate, .. }) = events.last() else {
        panic!("the journal ends with run_finished");
    };
    assert_eq!(state.best().map(|k| k.id), *best_candidate);
    let last_beam: Vec<CandidateId> = events
        .iter()
        .rev()
        .find_map(|e| match e {
            Event::BeamUpdated { beam, .. } => Some(beam.iter().map(|m| m.candidate).collect()),
            _ => None,
        })
        .unwrap();
    let beam: Vec<CandidateId> = state.beam().iter().map(|k| k.id).collect();
    assert_eq!(beam, last_beam);
    assert!(state.pending_requests().is_empty());
    assert!(state.finished().is_some());
}

#[test]
fn a_dry_run_in_rounds_folds_to_where_it_ended() {
    let run = dry_run(
        "platform: noop\nprovider: replay\nnum_workers: 3\nmax_rounds: 3\nnoop_eval_s: 0\n\
         strategy_config:\n  num_top_kernels: 2\n  num_bottlenecks: 2\n",
    );
    assert_folds(&run, search_config(Pacing::Rounds, 3, 3));
}

#[test]
fn a_dry_run_in_steady_search_folds_to_where_it_ended() {
    let run = dry_run(
        "platform: noop\nprovider: replay\nsearch: steady\nmax_inflight: 3\nnum_workers: 2\n\
         max_rounds: 3\nnoop_eval_s: 0\nmax_refinements: 1\n\
         strategy_config:\n  num_top_kernels: 2\n  num_bottlenecks: 2\n",
    );
    assert_folds(
        &run,
        search_config(Pacing::Steady { max_inflight: 3 }, 2, 1),
    );
}

/// Issue 20: generation is the same fold: a run that began with seeds folds to where it ended,
/// its invariants held at every prefix, in rounds and in steady search.
#[test]
fn a_dry_run_that_began_with_generation_folds_to_where_it_ended() {
    let generation = |kept| Some(Generation { num_seeds: 3, kept });
    let run = dry_run_with(
        "platform: noop\nprovider: replay\nnum_workers: 3\nmax_rounds: 2\nnoop_eval_s: 0\n\
         num_seeds: 3\ngeneration: all_seeds\n\
         strategy_config:\n  num_top_kernels: 2\n  num_bottlenecks: 2\n",
        &["--generate"],
    );
    assert_folds(
        &run,
        SearchConfig {
            generation: generation(SeedsKept::All),
            ..search_config(Pacing::Rounds, 3, 3)
        },
    );
    let run = dry_run_with(
        "platform: noop\nprovider: replay\nsearch: steady\nmax_inflight: 3\nnum_workers: 2\n\
         max_rounds: 2\nnoop_eval_s: 0\nmax_refinements: 1\nnum_seeds: 3\n\
         strategy_config:\n  num_top_kernels: 2\n  num_bottlenecks: 2\n",
        &["--generate"],
    );
    assert_folds(
        &run,
        SearchConfig {
            generation: generation(SeedsKept::First),
            ..search_config(Pacing::Steady { max_inflight: 3 }, 2, 1)
        },
    );
}
