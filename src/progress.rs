//! What the person watching sees: with --json, every journal record as a JSON line on stdout;
//! otherwise a few plain lines on stderr (per device what it is doing, rounds, the best time).

use std::io::Write;
use std::time::SystemTime;

use actors::journal::{Event, JournalRecord, Step};
use actors::ports::{Clock, ProgressSink};

pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

pub struct JsonProgress;

impl ProgressSink for JsonProgress {
    fn record(&mut self, record: &JournalRecord) {
        let mut stdout = std::io::stdout().lock();
        // A closed stdout (`| head`) must not stop the run: the journal is the record.
        let _ = writeln!(stdout, "{}", record.to_json());
        let _ = stdout.flush();
    }
}

pub struct PlainProgress;

/// The plain progress line for a record, if it deserves one.
pub fn plain_line(event: &Event) -> Option<String> {
    let step_name = |step: &Step| match step {
        Step::Reference => "timing PyTorch eager and torch.compile, the references of",
        Step::Verify => "verifying",
        Step::Time => "timing",
        Step::Profile => "profiling",
    };
    Some(match event {
        Event::RunStarted {
            strategy,
            platform,
            devices,
            simulated,
            ..
        } => {
            let simulated = if *simulated { " (simulated)" } else { "" };
            format!(
                "run started: strategy {strategy}, platform {platform}{simulated}, {} device(s)",
                devices.len()
            )
        }
        Event::RoundStarted { round, parents } => {
            format!("round {round}: expanding {} parent(s)", parents.len())
        }
        Event::StepStarted {
            candidate,
            device,
            step,
            round,
            ..
        } => {
            format!(
                "[device {device}] {} candidate {candidate} (round {round})",
                step_name(step)
            )
        }
        Event::CandidateFinished {
            candidate,
            device,
            passed: true,
            time_ms: Some(ms),
            simulated,
            ..
        } => {
            let simulated = if *simulated { " (simulated)" } else { "" };
            format!("[device {device}] candidate {candidate}: {ms:.4} ms{simulated}")
        }
        Event::CandidateFinished {
            candidate,
            device,
            reason: Some(reason),
            ..
        } => {
            format!("[device {device}] candidate {candidate} failed: {reason}")
        }
        Event::WorkerDied { device, reason, .. } => {
            format!("[device {device}] worker died: {reason}")
        }
        Event::WorkerRestarted { device, restarts } => {
            format!("[device {device}] worker restarted ({restarts} so far)")
        }
        Event::RoundFinished {
            round,
            verified,
            proposed,
            best_candidate,
            best_ms,
            ..
        } => {
            format!(
                "round {round} done: {verified}/{proposed} verified; best so far {best_ms:.4} ms (candidate {best_candidate})"
            )
        }
        Event::Interrupted { signal } => format!("interrupted by {signal}: stopping"),
        Event::RunFinished { reason, .. } => format!("run finished: {reason}"),
        _ => return None,
    })
}

impl ProgressSink for PlainProgress {
    fn record(&mut self, record: &JournalRecord) {
        if let Some(line) = plain_line(&record.event) {
            eprintln!("{line}");
        }
    }
}
