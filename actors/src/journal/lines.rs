//! The journal's lines as written since schema version 4 (issue 24: bytes per candidate), and
//! the same records read back. A line leaves out what the lines before it give:
//!
//! - a field whose value is null (every such field reads as absent);
//! - in a record about a candidate, its `parent` and `round` (and since version 5 its
//!   `device`) when the candidate's previous line that said them said the same (a candidate's
//!   placement seldom changes, so mostly only its first line in a process carries it);
//! - in `proposal_received`, the code a kept reply proposed: it is in the candidate's folder
//!   (`code_file`), written and synced with the reply before the record, and the line holds its
//!   SHA-256 (`code_sha256`). A reply that could not be kept (no `reply`) keeps its code inline.
//!
//! `JournalRecord::to_json` is still the whole record (the JSON progress lines, the tests).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::{JournalRecord, RecordError, sha256_hex};
use crate::model::CandidateId;

/// The records whose every line has `candidate`, `parent` and `round`.
const PLACED: [&str; 11] = [
    "candidate_planned",
    "proposal_requested",
    "proposal_received",
    "refinement_requested",
    "reflexion_requested",
    "reflexion_received",
    "reflexion_dropped",
    "step_started",
    "step_finished",
    "evaluated",
    "candidate_finished",
];
const PLACEMENT: [&str; 3] = ["parent", "round", "device"];

/// The file in a candidate's folder that holds the code of its attempt (0: the proposal, N:
/// refinement N).
pub fn code_file_name(attempt: u32) -> String {
    match attempt {
        0 => "kernel.proposal.py".into(),
        n => format!("kernel.refine{n}.py"),
    }
}

/// The same file relative to the run directory.
pub fn code_file(candidate: CandidateId, attempt: u32) -> String {
    format!("candidates/{candidate}/{}", code_file_name(attempt))
}

/// Where a journal's code kept by hash is read from: the run directory.
pub trait KeptCode {
    /// The text of `file` (relative to the run directory), or why it cannot be read.
    fn read(&mut self, file: &str) -> Result<String, String>;
}

/// For a journal whose code is all inline (a test's, an older version's): any code kept by hash
/// is unreadable.
pub struct NoKeptCode;

impl KeptCode for NoKeptCode {
    fn read(&mut self, file: &str) -> Result<String, String> {
        Err(format!("{file} cannot be read here"))
    }
}

/// A candidate's placement as its lines said it last, by key.
type Placements = BTreeMap<u64, [Option<Value>; 3]>;
/// The most candidates whose placement the writer remembers: the newest, since a search works on
/// its latest candidates. An older one's next line says its placement again, which a reader
/// takes as it takes any line that says it, so the memory stays bounded on a run of 100,000
/// candidates (issue 24) at the cost of a few bytes on the rare late line.
const PLACEMENTS_REMEMBERED: usize = 4096;

fn placed_candidate(object: &Map<String, Value>) -> Option<u64> {
    let kind = object.get("type")?.as_str()?;
    PLACED
        .contains(&kind)
        .then(|| object.get("candidate")?.as_u64())?
}

/// Makes the journal's lines; one per process, since what a line leaves out is what this
/// writer wrote before.
#[derive(Debug, Default)]
pub struct LineWriter {
    placements: Placements,
}

impl LineWriter {
    pub fn line(&mut self, record: &JournalRecord) -> Value {
        let Value::Object(mut object) = record.to_json() else {
            unreachable!("a journal record is a JSON object")
        };
        if object.get("type").and_then(Value::as_str) == Some("proposal_received")
            && object.get("reply").is_some_and(|reply| !reply.is_null())
            && let Some(Value::String(code)) = object.remove("code")
        {
            object.insert("code_sha256".into(), sha256_hex(&code).into());
        }
        let placed = placed_candidate(&object);
        if let Some(candidate) = placed {
            if self.placements.len() >= PLACEMENTS_REMEMBERED
                && !self.placements.contains_key(&candidate)
            {
                self.placements.pop_first();
            }
            let said = self.placements.entry(candidate).or_default();
            for (key, last) in PLACEMENT.iter().zip(said.iter_mut()) {
                let Some(value) = object.get(*key) else {
                    continue;
                };
                if last.as_ref() == Some(value) {
                    object.remove(*key);
                } else {
                    *last = Some(value.clone());
                }
            }
        }
        // A placement said again is said even when it is null: left out, it would read as the
        // one before.
        object.retain(|key, value| {
            !value.is_null() || (placed.is_some() && PLACEMENT.contains(&key.as_str()))
        });
        for value in object.values_mut() {
            drop_nulls(value);
        }
        Value::Object(object)
    }
}

/// Leaves the null fields out of the objects inside a record's fields.
fn drop_nulls(value: &mut Value) {
    match value {
        Value::Object(object) => {
            object.retain(|_, field| !field.is_null());
            object.values_mut().for_each(drop_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

/// Why a line's code kept by hash could not be had back.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum KeptCodeError {
    #[error("the code of candidate {candidate} ({file}) cannot be read: {why}")]
    Unreadable {
        candidate: u64,
        file: String,
        why: String,
    },
    #[error(
        "the code of candidate {candidate} ({file}) is not what the journal's code_sha256 says: it changed after the run wrote it"
    )]
    Changed { candidate: u64, file: String },
}

/// Reads a journal's lines back into whole records, in order: what a line left out is put back
/// from the lines before it and from the candidates' folders. Lines of versions 1 to 3 are whole
/// and read as they are.
#[derive(Debug, Default)]
pub struct LineReader {
    placements: Placements,
}

/// A line that is not a record, or whose kept code is not there as written.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum LineError {
    #[error(transparent)]
    Record(#[from] RecordError),
    #[error(transparent)]
    Code(#[from] KeptCodeError),
}

impl LineReader {
    pub fn record(
        &mut self,
        line: &str,
        code: &mut dyn KeptCode,
    ) -> Result<JournalRecord, LineError> {
        let value: Value =
            serde_json::from_str(line).map_err(|error| RecordError::NotJson(error.to_string()))?;
        let Value::Object(mut object) = value else {
            return Err(RecordError::NotJson("a JSON value that is not an object".into()).into());
        };
        if let Some(candidate) = placed_candidate(&object) {
            // Never bounded, unlike the writer's: a journal's processes each wrote with a
            // memory of their own, and a line may rely on any line before it in its process.
            let said = self.placements.entry(candidate).or_default();
            for (key, last) in PLACEMENT.iter().zip(said.iter_mut()) {
                match object.get(*key) {
                    Some(value) => *last = Some(value.clone()),
                    None => {
                        if let Some(value) = last {
                            object.insert((*key).into(), value.clone());
                        }
                    }
                }
            }
            if let Some(Value::String(sha256)) = object.remove("code_sha256") {
                let attempt = object.get("attempt").and_then(Value::as_u64).unwrap_or(0);
                let text = kept_code(candidate, attempt, &sha256, code)?;
                object.insert("code".into(), text.into());
            }
        }
        Ok(JournalRecord::from_object(object)?)
    }
}

fn kept_code(
    candidate: u64,
    attempt: u64,
    sha256: &str,
    code: &mut dyn KeptCode,
) -> Result<String, KeptCodeError> {
    let file = code_file(
        CandidateId(candidate),
        u32::try_from(attempt).unwrap_or(u32::MAX),
    );
    let text = code.read(&file).map_err(|why| KeptCodeError::Unreadable {
        candidate,
        file: file.clone(),
        why,
    })?;
    if sha256_hex(&text) != sha256 {
        return Err(KeptCodeError::Changed { candidate, file });
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::time::SystemTime;

    use super::*;
    use crate::journal::{Event, ReplyFile, ReplyOutcome, Step};
    use crate::model::DeviceId;

    /// The files of one candidate folder, by path.
    struct Files(HashMap<String, String>);

    impl KeptCode for Files {
        fn read(&mut self, file: &str) -> Result<String, String> {
            self.0
                .get(file)
                .cloned()
                .ok_or_else(|| "no such file".into())
        }
    }

    fn record(event: Event) -> JournalRecord {
        JournalRecord {
            t: SystemTime::UNIX_EPOCH,
            event,
        }
    }

    fn proposal(reply: Option<ReplyFile>) -> JournalRecord {
        record(Event::ProposalReceived {
            candidate: CandidateId(3),
            parent: CandidateId(1),
            round: 2,
            device: DeviceId(1),
            request_id: "r2-c3".into(),
            attempt: 0,
            outcome: ReplyOutcome::Code,
            truncated: false,
            usage: None,
            cost_usd: None,
            error: None,
            code: Some("def kernel_function(x):\n    return x\n".into()),
            reply,
            latency_s: Some(0.5),
        })
    }

    fn step(step: Step) -> JournalRecord {
        record(Event::StepStarted {
            candidate: CandidateId(3),
            parent: Some(CandidateId(1)),
            round: 2,
            device: DeviceId(1),
            step,
        })
    }

    fn kept_reply() -> Option<ReplyFile> {
        Some(ReplyFile {
            file: "candidates/3/reply.md".into(),
            sha256: sha256_hex("the reply"),
        })
    }

    fn code_folder() -> Files {
        Files(HashMap::from([(
            "candidates/3/kernel.proposal.py".to_string(),
            "def kernel_function(x):\n    return x\n".to_string(),
        )]))
    }

    #[test]
    fn a_line_leaves_out_nulls_a_known_placement_and_kept_code_and_reads_back_whole() {
        let records = [proposal(kept_reply()), step(Step::Verify), step(Step::Time)];
        let mut writer = LineWriter::default();
        let lines: Vec<Value> = records.iter().map(|r| writer.line(r)).collect();
        assert_eq!(lines[0]["parent"], 1);
        assert!(lines[0].get("usage").is_none(), "{}", lines[0]);
        assert!(lines[0].get("code").is_none(), "{}", lines[0]);
        assert_eq!(
            lines[0]["code_sha256"],
            sha256_hex("def kernel_function(x):\n    return x\n")
        );
        for line in &lines[1..] {
            assert!(
                line.get("parent").is_none() && line.get("round").is_none(),
                "{line}"
            );
        }
        let mut reader = LineReader::default();
        let read: Vec<JournalRecord> = lines
            .iter()
            .map(|line| {
                reader
                    .record(&line.to_string(), &mut code_folder())
                    .unwrap()
            })
            .collect();
        assert_eq!(read, records);
    }

    #[test]
    fn a_reply_that_was_not_kept_keeps_its_code_inline() {
        let line = LineWriter::default().line(&proposal(None));
        assert!(line["code"].is_string(), "{line}");
        let read = LineReader::default()
            .record(&line.to_string(), &mut NoKeptCode)
            .unwrap();
        assert_eq!(read, proposal(None));
    }

    #[test]
    fn a_placement_that_changes_is_said_again_even_when_null() {
        let finished = |parent: Option<CandidateId>| {
            record(Event::CandidateFinished {
                candidate: CandidateId(3),
                parent,
                round: 2,
                device: DeviceId(1),
                passed: true,
                time_ms: Some(1.0),
                reason: None,
                simulated: true,
                duplicate_of: None,
            })
        };
        let records = [
            finished(Some(CandidateId(1))),
            finished(None),
            finished(None),
        ];
        let mut writer = LineWriter::default();
        let lines: Vec<Value> = records.iter().map(|r| writer.line(r)).collect();
        assert!(lines[1]["parent"].is_null() && lines[1].get("parent").is_some());
        assert!(lines[2].get("parent").is_none());
        let mut reader = LineReader::default();
        for (line, written) in lines.iter().zip(&records) {
            assert_eq!(
                &reader.record(&line.to_string(), &mut NoKeptCode).unwrap(),
                written
            );
        }
    }

    #[test]
    fn kept_code_that_is_gone_or_changed_is_named() {
        let line = LineWriter::default()
            .line(&proposal(kept_reply()))
            .to_string();
        let gone = LineReader::default()
            .record(&line, &mut Files(HashMap::new()))
            .unwrap_err();
        assert!(
            gone.to_string().starts_with(
                "the code of candidate 3 (candidates/3/kernel.proposal.py) cannot be read"
            ),
            "{gone}"
        );
        let mut changed = code_folder();
        changed
            .0
            .insert("candidates/3/kernel.proposal.py".into(), "x = 1\n".into());
        let changed = LineReader::default()
            .record(&line, &mut changed)
            .unwrap_err();
        assert!(
            changed
                .to_string()
                .contains("changed after the run wrote it"),
            "{changed}"
        );
    }

    /// Issue 24: the writer remembers the placements of its newest candidates only, so that a
    /// run of 100,000 holds no map of them all; a line of one it forgot says its placement
    /// again, which a reader takes as it is.
    #[test]
    fn a_line_of_a_candidate_long_forgotten_says_its_placement_again() {
        let started = |candidate: u64| {
            record(Event::StepStarted {
                candidate: CandidateId(candidate),
                parent: Some(CandidateId(1)),
                round: 2,
                device: DeviceId(1),
                step: Step::Verify,
            })
        };
        let mut writer = LineWriter::default();
        assert!(writer.line(&started(3)).get("parent").is_some());
        assert!(
            writer.line(&started(3)).get("parent").is_none(),
            "said before"
        );
        for candidate in 4..4 + PLACEMENTS_REMEMBERED as u64 {
            writer.line(&started(candidate));
        }
        assert!(writer.placements.len() <= PLACEMENTS_REMEMBERED);
        let again = writer.line(&started(3));
        assert_eq!(again["parent"], 1);
        assert_eq!(again["round"], 2);
    }
}
