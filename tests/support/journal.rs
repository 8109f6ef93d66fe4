//! A run's journal as the tests read it: every record as JSON, and the folds the issues'
//! promises are checked against (each candidate's fate, the fastest verified kernel).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use actors::journal::JournalRecord;
use serde_json::Value;

/// A run's journal: every process's records, whole lines only.
pub struct Journal(pub Vec<Value>);

impl Journal {
    pub fn read(run: &Path) -> Journal {
        Journal(super::runs::journal(run))
    }

    /// Whatever the journal holds now, a torn last line left out: for polling a live run or
    /// reading a killed one.
    pub fn peek(run: &Path) -> Journal {
        let records = super::runs::records_of(run).map_or_else(|_| Vec::new(), |read| read.0);
        Journal(records.iter().map(JournalRecord::to_json).collect())
    }

    pub fn of_type<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.0.iter().filter(move |record| record["type"] == kind)
    }

    pub fn last(&self) -> &Value {
        self.0.last().unwrap()
    }

    /// Each finished candidate's fate: passed, its time and why not.
    pub fn fates(&self) -> BTreeMap<u64, (bool, Option<f64>, Option<String>)> {
        self.of_type("candidate_finished")
            .map(|record| {
                (
                    candidate_of(record),
                    (
                        record["passed"].as_bool().unwrap(),
                        record["time_ms"].as_f64(),
                        record["reason"].as_str().map(str::to_string),
                    ),
                )
            })
            .collect()
    }

    /// The fastest verified candidate the journal holds, whichever round it was in and
    /// whether or not a round's end took it into the beam (a kernel that failed the finale's
    /// re-check left out), and its time.
    pub fn fastest_verified(&self) -> Option<(u64, f64)> {
        let rejected: BTreeSet<u64> = self
            .of_type("final_rechecked")
            .filter(|record| record["passed"] == false)
            .map(candidate_of)
            .collect();
        self.fates()
            .into_iter()
            .filter(|(id, (passed, _, _))| *passed && !rejected.contains(id))
            .map(|(id, (_, time, _))| (id, time.unwrap()))
            .min_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)))
    }

    /// The code a candidate was last evaluated with (the initial kernel's from `run_started`).
    pub fn source_of(&self, candidate: u64) -> String {
        let source = match candidate {
            0 => self.of_type("run_started").next().unwrap()["initial_source"].clone(),
            _ => self
                .of_type("proposal_received")
                .filter(|record| candidate_of(record) == candidate && record["outcome"] == "code")
                .last()
                .unwrap()["code"]
                .clone(),
        };
        source.as_str().unwrap().to_string()
    }

    /// The source of the fastest verified candidate the journal knows.
    pub fn best_source(&self) -> String {
        let (best, _) = self.fastest_verified().expect("a verified candidate");
        self.source_of(best)
    }

    pub fn finished(&self) -> &Value {
        let last = self.last();
        assert_eq!(last["type"], "run_finished", "the journal ends the run");
        last
    }
}

pub fn candidate_of(record: &Value) -> u64 {
    record["candidate"].as_u64().unwrap()
}

/// The `candidate_finished` record of `candidate`.
pub fn finished(records: &[Value], candidate: u64) -> &Value {
    records
        .iter()
        .find(|r| r["type"] == "candidate_finished" && r["candidate"] == candidate)
        .unwrap_or_else(|| panic!("candidate {candidate} never finished"))
}

/// A run's journal as the runtime reads it: every line a `JournalRecord`.
pub fn typed_records(run: &Path) -> Vec<JournalRecord> {
    let (records, torn) = super::runs::records_of(run).unwrap();
    assert!(torn.is_none(), "a torn line: {torn:?}");
    records
}

/// Whether a JSON number is `expected`, to a relative 1e-9.
pub fn close(value: &Value, expected: f64) -> bool {
    value
        .as_f64()
        .is_some_and(|value| (value - expected).abs() < 1e-9 * expected.abs().max(1.0))
}
