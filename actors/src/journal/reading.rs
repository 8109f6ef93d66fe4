//! Reading a journal back, line by line: every whole record in order, and a torn last line (a
//! write the process did not finish: SIGKILL, an OOM kill, a power cut) noted and left out
//! rather than refused. Any other line that is not a record makes the journal unreadable.

use std::io::{self, BufRead, Read};

use super::lines::{KeptCode, KeptCodeError, LineError, LineReader};
use super::{Event, JournalRecord, RecordError};

/// The longest line read. The largest record carries one candidate's code (at most
/// `max_source_bytes`, 64 MiB) JSON-escaped; a longer line is no kactors record, and reading it
/// whole could exhaust the memory.
pub const MAX_LINE_BYTES: u64 = 512 << 20;

#[derive(Debug, thiserror::Error)]
pub enum JournalReadError {
    #[error("failed to read the journal: {0}")]
    Io(#[from] io::Error),
    #[error("line {line} of the journal is not a kactors record: {source}")]
    Record { line: usize, source: RecordError },
    #[error("line {line} of the journal: {source}")]
    Code { line: usize, source: KeptCodeError },
    #[error(
        "line {line} of the journal is longer than {MAX_LINE_BYTES} bytes, which no kactors record is"
    )]
    TooLong { line: usize },
    #[error(
        "the journal's first record is `{found}`, not `run_started`: not the journal of a kactors run"
    )]
    NotStarted { found: String },
}

/// The journal's last line, cut short by a write that did not finish; it was left out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TornLine {
    /// Its line number, from 1.
    pub line: usize,
    pub bytes: usize,
}

/// Hands every whole record of a journal to `each`, in order, the code its lines keep by hash
/// read back through `code` (the run directory). A last line without its newline that is not a
/// record is the torn end of a killed run: it is answered, not an error.
pub fn read_journal(
    mut reader: impl BufRead,
    code: &mut dyn KeptCode,
    mut each: impl FnMut(JournalRecord),
) -> Result<Option<TornLine>, JournalReadError> {
    let mut buffer = Vec::new();
    let mut line = 0;
    let mut lines = LineReader::default();
    loop {
        buffer.clear();
        let read = reader
            .by_ref()
            .take(MAX_LINE_BYTES + 1)
            .read_until(b'\n', &mut buffer)?;
        if read == 0 {
            return Ok(None);
        }
        line += 1;
        let whole = buffer.last() == Some(&b'\n');
        if !whole && read as u64 > MAX_LINE_BYTES {
            return Err(JournalReadError::TooLong { line });
        }
        let parsed = std::str::from_utf8(&buffer)
            .map_err(|error| LineError::Record(RecordError::NotJson(error.to_string())))
            .and_then(|text| lines.record(text.trim_end_matches('\n'), code));
        match parsed {
            Ok(record) => {
                if line == 1 && !matches!(record.event, Event::RunStarted { .. }) {
                    let found = record.to_json()["type"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string();
                    return Err(JournalReadError::NotStarted { found });
                }
                each(record);
            }
            Err(LineError::Record(_)) if !whole => {
                return Ok(Some(TornLine { line, bytes: read }));
            }
            Err(LineError::Record(source)) => {
                return Err(JournalReadError::Record { line, source });
            }
            Err(LineError::Code(source)) => return Err(JournalReadError::Code { line, source }),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::*;
    use crate::journal::NoKeptCode;

    fn line(event: Event) -> String {
        let record = JournalRecord {
            t: SystemTime::UNIX_EPOCH,
            event,
        };
        format!("{}\n", record.to_json())
    }

    fn started() -> String {
        line(crate::journal::samples::run_started(""))
    }

    fn interrupted() -> String {
        line(Event::Interrupted {
            signal: "SIGKILL".into(),
        })
    }

    fn read(text: &str) -> (Result<Option<TornLine>, JournalReadError>, usize) {
        let mut records = 0;
        let result = read_journal(text.as_bytes(), &mut NoKeptCode, |_| records += 1);
        (result, records)
    }

    #[test]
    fn a_record_reads_back_as_it_was_written_to_the_last_bit() {
        let written = JournalRecord {
            t: SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(1_796_204_144_123),
            event: Event::CandidateFinished {
                candidate: crate::model::CandidateId(1),
                parent: Some(crate::model::CandidateId(0)),
                round: 1,
                device: crate::model::DeviceId(0),
                passed: true,
                time_ms: Some(1.5413000000000001),
                reason: None,
                simulated: true,
                duplicate_of: None,
            },
        };
        let mut read_back = Vec::new();
        let text = format!("{}{}", started(), written.to_json());
        read_journal(text.as_bytes(), &mut NoKeptCode, |record| {
            read_back.push(record)
        })
        .unwrap();
        assert_eq!(read_back.last(), Some(&written));
    }

    #[test]
    fn a_torn_last_line_is_left_out_and_named() {
        let whole = format!("{}{}", started(), interrupted());
        let torn = format!("{whole}{}", &interrupted()[..20]);
        let (result, records) = read(&torn);
        assert_eq!(result.unwrap(), Some(TornLine { line: 3, bytes: 20 }));
        assert_eq!(records, 2);
        let (result, records) = read(&whole);
        assert_eq!(result.unwrap(), None);
        assert_eq!(records, 2);
    }

    #[test]
    fn a_last_record_without_its_newline_is_whole() {
        let text = format!("{}{}", started(), interrupted().trim_end());
        let (result, records) = read(&text);
        assert_eq!(result.unwrap(), None);
        assert_eq!(records, 2);
    }

    #[test]
    fn a_broken_line_before_the_last_is_an_error_naming_it() {
        let text = format!("{}{{\"v\": 2\n{}", started(), interrupted());
        let error = read(&text).0.unwrap_err().to_string();
        assert!(
            error.starts_with("line 2 of the journal is not a kactors record"),
            "{error}"
        );
    }

    #[test]
    fn a_journal_that_does_not_start_with_run_started_is_not_a_kactors_journal() {
        let error = read(&interrupted()).0.unwrap_err().to_string();
        assert!(error.contains("first record is `interrupted`"), "{error}");
        let error = read("{\"name\": \"a json lines file\"}\n")
            .0
            .unwrap_err()
            .to_string();
        assert!(error.contains("schema version null"), "{error}");
    }
}
