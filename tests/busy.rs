//! Issue 13: every GPU busy while the LLM thinks. Eight simulated devices, an evaluation of
//! 200 ms, an LLM that takes 2 s, 400 candidates and otherwise default settings: steady search
//! keeps every device at least 90% busy over the search (see `busy_fractions`); rounds mode with
//! the same settings is far below.

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::SystemTime;

use actors::journal::{Event, Step};
use actors::model::DeviceId;
use support::journal::typed_records;
use support::{kactors, kernel_with_candidates};

/// Each device's busy fraction over the search: from its first dispatch (the first step of a
/// candidate other than the initial kernel) to the last result of a proposal's first attempt.
/// What comes after is the refinement of the last failures: a chain of LLM requests one after
/// another, 2 s each, which no number of proposals in flight can fill.
fn busy_fractions(run: &Path) -> BTreeMap<DeviceId, f64> {
    let records = typed_records(run);
    let mut open = BTreeMap::new();
    let mut spans: Vec<(DeviceId, SystemTime, SystemTime)> = Vec::new();
    let mut last_first_attempt = SystemTime::UNIX_EPOCH;
    for record in &records {
        match &record.event {
            Event::StepStarted {
                candidate,
                device,
                step: Step::Verify | Step::Time,
                ..
            } if candidate.0 > 0 => {
                open.insert(*device, record.t);
            }
            Event::StepFinished {
                candidate,
                device,
                step: Step::Verify | Step::Time,
                ..
            } if candidate.0 > 0 => {
                if let Some(started) = open.remove(device) {
                    spans.push((*device, started, record.t));
                }
            }
            Event::Evaluated {
                candidate,
                attempt: 0,
                ..
            } if candidate.0 > 0 => last_first_attempt = last_first_attempt.max(record.t),
            _ => {}
        }
    }
    let first = spans.iter().map(|s| s.1).min().unwrap();
    let window = last_first_attempt
        .duration_since(first)
        .unwrap()
        .as_secs_f64();
    let mut busy: BTreeMap<DeviceId, f64> = BTreeMap::new();
    for (device, started, finished) in spans {
        let (started, finished) = (started.max(first), finished.min(last_first_attempt));
        if let Ok(span) = finished.duration_since(started) {
            *busy.entry(device).or_default() += span.as_secs_f64();
        }
    }
    busy.into_iter().map(|(d, b)| (d, b / window)).collect()
}

fn run_on_eight_devices(search: &str, rounds: u32) -> BTreeMap<DeviceId, f64> {
    let dir = tempfile::tempdir().unwrap();
    let kernel = kernel_with_candidates(dir.path(), 600);
    std::fs::write(
        dir.path().join("busy.yaml"),
        format!(
            "platform: noop\nprovider: replay\nsearch: {search}\nnum_workers: 8\n\
             noop_eval_s: 0.2\nreplay_latency_s: 2\nmax_rounds: {rounds}\n"
        ),
    )
    .unwrap();
    let output = kactors(dir.path())
        .args(["run", "--strategy", "busy", "--config-dir", "."])
        .arg("--kernel-dir")
        .arg(&kernel)
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let run = std::fs::read_dir(dir.path().join("runs"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let fractions = busy_fractions(&run);
    assert_eq!(
        fractions.len(),
        8,
        "every device got candidates: {fractions:?}"
    );
    fractions
}

#[test]
fn steady_search_keeps_eight_devices_busy_while_the_llm_takes_ten_evaluations() {
    // 2 × 2 candidates a round (the default beam), 100 rounds: 400 candidates.
    let fractions = run_on_eight_devices("steady", 100);
    for (device, fraction) in &fractions {
        assert!(
            *fraction >= 0.9,
            "device {device} was busy {:.0}% of the search: {fractions:?}",
            fraction * 100.0
        );
    }
}

#[test]
fn rounds_mode_with_the_same_settings_leaves_them_mostly_idle() {
    let fractions = run_on_eight_devices("rounds", 3);
    for (device, fraction) in &fractions {
        assert!(
            *fraction < 0.5,
            "device {device} was busy {:.0}% in rounds mode: {fractions:?}",
            fraction * 100.0
        );
    }
}
