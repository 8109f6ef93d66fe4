//! What the person watching sees: with --json, every journal record as a JSON line on stdout;
//! on a terminal, the live view's bars on stderr (`live.rs`, drawing what `board.rs` folds from
//! the records); otherwise a few plain lines on stderr (per device what it is doing, rounds, the
//! best time). Either stream may close while the run goes on: progress is then dropped, noted
//! once in kactors.log, and the journal and report are written as ever.

mod board;
mod live;
#[cfg(test)]
mod test_records;

pub use live::{LogWriter, ProgressView, Styling, TerminalFacts};

use std::io::Write;
use std::time::SystemTime;

use actors::journal::{Event, JournalRecord, Step};
use actors::model::DeviceId;
use actors::ports::{Clock, ProgressSink};

pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// A stream someone may be reading. The first failed write turns it off for the rest of the
/// run: after a closed pipe or a dropped terminal, every later write would fail too.
struct Watched<W> {
    writer: W,
    name: &'static str,
    dropped: bool,
}

impl<W: Write> Watched<W> {
    fn new(writer: W, name: &'static str) -> Self {
        Watched {
            writer,
            name,
            dropped: false,
        }
    }

    fn line(&mut self, line: &str) {
        if self.dropped {
            return;
        }
        if let Err(error) = writeln!(self.writer, "{line}").and_then(|()| self.writer.flush()) {
            self.dropped = true;
            note_dropped(self.name, &error);
        }
    }
}

/// Says once in the log that progress on a stream is gone: the run itself goes on.
fn note_dropped(stream: &str, error: &dyn std::fmt::Display) {
    tracing::warn!(
        "progress on {stream} can no longer be written ({error}): it is dropped from now on; the journal and report are unaffected"
    );
}

/// Every record as a JSON line, with the `strategy` of the run it belongs to (the runs of
/// `kactors run --strategy all` share one stdout).
pub struct JsonProgress<W: Write + Send = std::io::Stdout> {
    stdout: Watched<W>,
    strategy: String,
}

impl JsonProgress {
    pub fn new(strategy: &str) -> Self {
        JsonProgress::to(std::io::stdout(), strategy)
    }
}

impl<W: Write + Send> JsonProgress<W> {
    pub fn to(writer: W, strategy: &str) -> Self {
        JsonProgress {
            stdout: Watched::new(writer, "stdout"),
            strategy: strategy.to_string(),
        }
    }
}

impl<W: Write + Send> ProgressSink for JsonProgress<W> {
    fn record(&mut self, record: &JournalRecord) {
        let mut line = record.to_json();
        if let Some(fields) = line.as_object_mut() {
            fields
                .entry("strategy")
                .or_insert_with(|| self.strategy.clone().into());
        }
        self.stdout.line(&line.to_string());
    }
}

pub struct PlainProgress<W: Write + Send = std::io::Stderr> {
    stderr: Watched<W>,
}

impl PlainProgress {
    pub fn new() -> Self {
        PlainProgress::to(std::io::stderr())
    }
}

impl Default for PlainProgress {
    fn default() -> Self {
        PlainProgress::new()
    }
}

impl<W: Write + Send> PlainProgress<W> {
    pub fn to(writer: W) -> Self {
        PlainProgress {
            stderr: Watched::new(writer, "stderr"),
        }
    }
}

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
            // Under the Slurm launcher, which device is where: `0 n1:0, 1 n1:1, …`.
            let located: Vec<String> = devices
                .iter()
                .filter(|device| device.node.is_some())
                .map(|device| format!("{} {}", device.device, device.location()))
                .collect();
            let located = if located.is_empty() {
                String::new()
            } else {
                format!(": {}", located.join(", "))
            };
            format!(
                "run started: strategy {strategy}, platform {platform}{simulated}, {} device(s){located}",
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
        Event::DevicesLost { devices, reason } => {
            format!(
                "[device {}] lost, retired from the run: {reason}",
                device_list(devices)
            )
        }
        Event::AgentRestarting {
            node,
            devices,
            reason,
        } => format!(
            "[device {}] node {node}'s agent lost, starting it again: {reason}",
            device_list(devices)
        ),
        Event::AgentRestarted {
            node,
            devices,
            restarts,
            step,
        } => format!(
            "[device {}] node {node}'s agent serves again as step {step} (restart {restarts})",
            device_list(devices)
        ),
        Event::WorkerDied { device, reason, .. } => {
            format!("[device {device}] worker died: {reason}")
        }
        Event::WorkerRestarted { device, restarts } => {
            format!("[device {device}] worker restarted ({restarts} so far)")
        }
        Event::RoundFinished(summary) => format!(
            "round {} done: {}/{} verified; best so far {:.4} ms (candidate {})",
            summary.round,
            summary.verified,
            summary.proposed,
            summary.best_ms,
            summary.best_candidate
        ),
        Event::Interrupted { signal } => format!("interrupted by {signal}: stopping"),
        // `run` itself ends with a line that says how the run ended and why.
        _ => return None,
    })
}

impl<W: Write + Send> ProgressSink for PlainProgress<W> {
    fn record(&mut self, record: &JournalRecord) {
        if let Some(line) = plain_line(&record.event) {
            self.stderr.line(&line);
        }
    }
}

fn device_list(devices: &[DeviceId]) -> String {
    let devices: Vec<String> = devices.iter().map(ToString::to_string).collect();
    devices.join(", ")
}

#[cfg(test)]
mod tests {
    use std::io;

    use super::test_records::record;
    use super::*;

    /// A stream whose reader went away: every write fails, as after `| head` or a hang-up.
    struct Closed {
        attempts: usize,
    }

    impl Write for Closed {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            self.attempts += 1;
            Err(io::Error::from(io::ErrorKind::BrokenPipe))
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_closed_stream_drops_progress_after_one_failed_write_and_never_panics() {
        let mut plain = PlainProgress::to(Closed { attempts: 0 });
        let mut json = JsonProgress::to(Closed { attempts: 0 }, "noop");
        for signal in ["SIGINT", "SIGTERM", "SIGHUP"] {
            let event = Event::Interrupted {
                signal: signal.into(),
            };
            plain.record(&record(event.clone()));
            json.record(&record(event));
        }
        assert_eq!(plain.stderr.writer.attempts, 1);
        assert_eq!(json.stdout.writer.attempts, 1);
        assert!(plain.stderr.dropped && json.stdout.dropped);
    }

    /// Issue 14: on several nodes the first line says where each device is.
    #[test]
    fn the_start_line_names_each_devices_node_under_slurm() {
        let device =
            |id: u32, node: Option<&str>, index: Option<u32>| actors::journal::DeviceDescription {
                device: actors::model::DeviceId(id),
                name: "NVIDIA H200".into(),
                uuid: None,
                node: node.map(str::to_string),
                index,
                step: node.map(|_| "7.0".to_string()),
            };
        let started = |devices| Event::RunStarted {
            strategy: "nvidia".into(),
            platform: "nvidia".into(),
            simulated: false,
            search: "beam_search".into(),
            num_top_kernels: 2,
            num_bottlenecks: 2,
            max_rounds: 1,
            devices,
            initial_source: String::new(),
            sandbox: None,
        };
        assert_eq!(
            plain_line(&started(vec![
                device(0, Some("n1"), Some(0)),
                device(1, Some("n2"), Some(3))
            ])),
            Some(
                "run started: strategy nvidia, platform nvidia, 2 device(s): 0 n1:0, 1 n2:3".into()
            )
        );
        assert_eq!(
            plain_line(&started(vec![device(0, None, None)])),
            Some("run started: strategy nvidia, platform nvidia, 1 device(s)".into())
        );
    }

    #[test]
    fn json_progress_writes_one_object_per_line_naming_its_strategy() {
        let mut json = JsonProgress::to(Vec::new(), "greedy");
        json.record(&record(Event::Interrupted {
            signal: "SIGINT".into(),
        }));
        json.record(&record(Event::ProfilingStopped {
            reason: "no profiler".into(),
        }));
        let text = String::from_utf8(json.stdout.writer).unwrap();
        let values: Vec<serde_json::Value> = text
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        assert_eq!(values.len(), 2);
        assert_eq!(values[0]["type"], "interrupted");
        assert_eq!(values[1]["type"], "profiling_stopped");
        assert!(values.iter().all(|value| value["strategy"] == "greedy"));
    }
}
