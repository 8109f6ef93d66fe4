//! bench.jsonl, the bench's own journal: what was asked (`bench_started`), each problem's run
//! started and ended, each resume, and the bench's end. One JSON object a line, fsynced, only
//! ever appended; a torn last line (a killed bench's unfinished write) is read as absent. What
//! a problem's run found is in its own run directory's journal, never copied here.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use actors::journal::{format_utc_millis, parse_utc_millis};
use serde::{Deserialize, Serialize};

use super::problems::Problem;

/// The journal's file name in a bench directory.
pub const BENCH_JOURNAL: &str = "bench.jsonl";
/// The most bytes of a bench journal read: far more than 10,000 problems' records.
const MAX_JOURNAL_BYTES: u64 = 64 << 20;
/// The schema of bench.jsonl.
pub const BENCH_SCHEMA: u32 = 1;

/// What a bench was asked to do, as its `bench_started` keeps it: a resume runs the same.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchPlan {
    pub schema: u32,
    pub strategy: String,
    pub config_dir: Option<PathBuf>,
    pub max_rounds: Option<u32>,
    /// `--max-time` of each problem's run, as written.
    pub max_time: Option<String>,
    /// `--budget`, the whole bench's time, as written.
    pub budget: Option<String>,
    pub parallel: u32,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub python: Option<PathBuf>,
    pub gpus: Option<Vec<u32>>,
    /// The working folder the runs start in (their `.env`, relative paths of the strategy).
    pub cwd: PathBuf,
    pub problems: Vec<Problem>,
}

/// Whether a problem's run was started anew or resumed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Start {
    Run,
    Resume,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BenchOutcome {
    /// Every problem ended, or the budget ran out: the batch ran (exit 0).
    Completed,
    /// SIGINT or SIGTERM (exit 130): `kactors bench --resume` goes on.
    Interrupted,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum BenchEvent {
    BenchStarted {
        plan: BenchPlan,
    },
    /// A later process goes on; `budget` is the one it was given, if it gave one.
    BenchResumed {
        budget: Option<String>,
    },
    ProblemStarted {
        problem: String,
        start: Start,
        /// The devices its run was given (`--gpus`); none: the strategy's own choice.
        devices: Option<Vec<u32>>,
    },
    ProblemFinished {
        problem: String,
        /// The run's exit code; none when a signal ended it (`signal`).
        exit_code: Option<i32>,
        signal: Option<i32>,
        run_dir: Option<PathBuf>,
        /// Why the bench ended the run before it was over: the budget, an interrupt.
        stopped: Option<String>,
        /// The run had ended before a bench died, and its ending was read from its journal.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        from_journal: bool,
    },
    BenchFinished {
        outcome: BenchOutcome,
        reason: String,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchRecord {
    /// UTC, to the millisecond.
    pub t: String,
    #[serde(flatten)]
    pub event: BenchEvent,
}

#[derive(Debug, thiserror::Error)]
pub enum BenchJournalError {
    #[error(transparent)]
    Read(#[from] crate::user_file::UserFileError),
    #[error("{}: line {line} is not a bench record: {error}", path.display())]
    Malformed {
        path: PathBuf,
        line: usize,
        error: String,
    },
    #[error("{}: its first record is not bench_started: not a bench's journal", path.display())]
    NotABench { path: PathBuf },
    #[error("{}: schema {schema}, and this kactors reads schema {BENCH_SCHEMA}", path.display())]
    Schema { path: PathBuf, schema: u32 },
}

/// The journal, open for appending.
pub struct BenchJournal {
    file: File,
}

impl BenchJournal {
    pub fn open(dir: &Path) -> std::io::Result<BenchJournal> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(BENCH_JOURNAL))?;
        Ok(BenchJournal { file })
    }

    /// Appends one record stamped `now`, whole and fsynced.
    pub fn append(&mut self, now: SystemTime, event: BenchEvent) -> std::io::Result<()> {
        let record = BenchRecord {
            t: format_utc_millis(now),
            event,
        };
        let mut line = serde_json::to_string(&record).expect("a bench record serialises");
        line.push('\n');
        self.file.write_all(line.as_bytes())?;
        self.file.sync_data()
    }
}

/// Every whole record of a bench directory's journal, in order; a last line that does not
/// parse (cut short by a kill) is left out.
pub fn read_bench_journal(dir: &Path) -> Result<Vec<BenchRecord>, BenchJournalError> {
    let path = dir.join(BENCH_JOURNAL);
    let text = crate::user_file::read_text(&path, MAX_JOURNAL_BYTES)?;
    let lines: Vec<&str> = text.lines().collect();
    let mut records = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        match serde_json::from_str::<BenchRecord>(line) {
            Ok(record) => records.push(record),
            Err(_) if index + 1 == lines.len() && !text.ends_with('\n') => break,
            Err(error) => {
                return Err(BenchJournalError::Malformed {
                    path,
                    line: index + 1,
                    error: error.to_string(),
                });
            }
        }
    }
    match records.first().map(|record| &record.event) {
        Some(BenchEvent::BenchStarted { plan }) if plan.schema != BENCH_SCHEMA => {
            Err(BenchJournalError::Schema {
                path,
                schema: plan.schema,
            })
        }
        Some(BenchEvent::BenchStarted { .. }) => Ok(records),
        _ => Err(BenchJournalError::NotABench { path }),
    }
}

/// How a problem's latest run ended, as the bench recorded it.
#[derive(Clone, Debug, PartialEq)]
pub struct Ending {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub run_dir: Option<PathBuf>,
    pub stopped: Option<String>,
}

impl Ending {
    /// Whether the run is over for good: it ended by itself (0, 1 or 2), not stopped by the
    /// bench, interrupted or killed.
    pub fn is_final(&self) -> bool {
        self.stopped.is_none() && matches!(self.exit_code, Some(0..=2))
    }
}

/// What a bench's journal says: the plan, the budget now, the time its processes spent, and
/// each problem's latest ending.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchHistory {
    pub plan: BenchPlan,
    pub budget: Option<String>,
    /// Each process's time from its first record to its last, added up: the time between a
    /// death and the resume left out.
    pub time_spent: Duration,
    pub endings: BTreeMap<String, Ending>,
    pub finished: Option<(BenchOutcome, String)>,
}

impl BenchHistory {
    /// The history of `records`, which start with `bench_started` (as `read_bench_journal`
    /// answers them).
    pub fn of(records: &[BenchRecord]) -> Option<BenchHistory> {
        let BenchEvent::BenchStarted { plan } = &records.first()?.event else {
            return None;
        };
        let mut history = BenchHistory {
            budget: plan.budget.clone(),
            plan: plan.clone(),
            time_spent: Duration::ZERO,
            endings: BTreeMap::new(),
            finished: None,
        };
        let mut process: Option<(SystemTime, SystemTime)> = None;
        for record in records {
            let t = parse_utc_millis(&record.t);
            if matches!(record.event, BenchEvent::BenchResumed { .. })
                && let Some((first, last)) = process.take()
            {
                history.time_spent += last.duration_since(first).unwrap_or_default();
            }
            if let Some(t) = t {
                process = Some(process.map_or((t, t), |(first, last)| (first, last.max(t))));
            }
            match &record.event {
                BenchEvent::BenchResumed { budget } => {
                    if budget.is_some() {
                        history.budget = budget.clone();
                    }
                    history.finished = None;
                }
                BenchEvent::ProblemFinished {
                    problem,
                    exit_code,
                    signal,
                    run_dir,
                    stopped,
                    ..
                } => {
                    history.endings.insert(
                        problem.clone(),
                        Ending {
                            exit_code: *exit_code,
                            signal: *signal,
                            run_dir: run_dir.clone(),
                            stopped: stopped.clone(),
                        },
                    );
                }
                BenchEvent::BenchFinished { outcome, reason } => {
                    history.finished = Some((*outcome, reason.clone()));
                }
                BenchEvent::BenchStarted { .. } | BenchEvent::ProblemStarted { .. } => {}
            }
        }
        if let Some((first, last)) = process {
            history.time_spent += last.duration_since(first).unwrap_or_default();
        }
        Some(history)
    }

    /// The problems whose runs are not over for good, in the plan's order.
    pub fn unfinished(&self) -> Vec<&Problem> {
        self.plan
            .problems
            .iter()
            .filter(|problem| {
                !self
                    .endings
                    .get(&problem.name)
                    .is_some_and(Ending::is_final)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::problems::ProblemKind;

    fn plan() -> BenchPlan {
        BenchPlan {
            schema: BENCH_SCHEMA,
            strategy: "noop".into(),
            config_dir: None,
            max_rounds: Some(1),
            max_time: None,
            budget: Some("1h".into()),
            parallel: 1,
            provider: None,
            model: None,
            python: None,
            gpus: None,
            cwd: "/".into(),
            problems: ["a", "b", "c"]
                .map(|name| Problem {
                    name: name.into(),
                    source: format!("/p/{name}.py").into(),
                    kind: ProblemKind::File,
                })
                .to_vec(),
        }
    }

    fn finished(problem: &str, exit_code: Option<i32>, stopped: Option<&str>) -> BenchEvent {
        BenchEvent::ProblemFinished {
            problem: problem.into(),
            exit_code,
            signal: None,
            run_dir: None,
            stopped: stopped.map(str::to_string),
            from_journal: false,
        }
    }

    #[test]
    fn the_journal_reads_back_its_records_leaving_a_torn_last_line_out() {
        let dir = tempfile::tempdir().unwrap();
        let mut journal = BenchJournal::open(dir.path()).unwrap();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        journal
            .append(t0, BenchEvent::BenchStarted { plan: plan() })
            .unwrap();
        journal
            .append(t0 + Duration::from_secs(5), finished("a", Some(1), None))
            .unwrap();
        let mut file = OpenOptions::new()
            .append(true)
            .open(dir.path().join(BENCH_JOURNAL))
            .unwrap();
        file.write_all(b"{\"t\": \"2026-").unwrap();
        let records = read_bench_journal(dir.path()).unwrap();
        assert_eq!(records.len(), 2);
        let history = BenchHistory::of(&records).unwrap();
        assert_eq!(history.time_spent, Duration::from_secs(5));
        let left: Vec<&str> = history
            .unfinished()
            .iter()
            .map(|p| p.name.as_str())
            .collect();
        assert_eq!(
            left,
            ["b", "c"],
            "a failed run is over; the others are left"
        );
    }

    #[test]
    fn a_run_stopped_interrupted_or_killed_is_unfinished_and_the_time_between_processes_is_left_out()
     {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let at = |s: u64, event| BenchRecord {
            t: format_utc_millis(t0 + Duration::from_secs(s)),
            event,
        };
        let records = vec![
            at(0, BenchEvent::BenchStarted { plan: plan() }),
            at(
                10,
                finished("a", Some(130), Some("the bench's budget (1h) ran out")),
            ),
            at(20, finished("b", None, None)),
            at(
                100,
                BenchEvent::BenchResumed {
                    budget: Some("2h".into()),
                },
            ),
            at(130, finished("c", Some(0), None)),
        ];
        let history = BenchHistory::of(&records).unwrap();
        assert_eq!(history.time_spent, Duration::from_secs(50));
        assert_eq!(history.budget.as_deref(), Some("2h"));
        let left: Vec<&str> = history
            .unfinished()
            .iter()
            .map(|p| p.name.as_str())
            .collect();
        assert_eq!(left, ["a", "b"]);
    }

    #[test]
    fn a_file_that_is_not_a_bench_journal_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(BENCH_JOURNAL),
            "{\"t\": \"x\", \"type\": \"bench_resumed\", \"budget\": null}\n",
        )
        .unwrap();
        let error = read_bench_journal(dir.path()).unwrap_err().to_string();
        assert!(error.contains("not a bench's journal"), "{error}");
    }
}
