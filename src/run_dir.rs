//! The run directory: `<run-dir>/<strategy>-<timestamp>/` with run.yaml, journal.jsonl,
//! candidates/<id>/, best_kernel.py, report.md and report.html. The run's root is made before
//! any actor starts; from then on the Collector is its only writer, through `RunStore`
//! (`kactors report` adds report.live.md and report.live.html, names the Collector never writes).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use actors::journal::{JournalRecord, format_utc_millis};
use actors::model::CandidateId;
use actors::ports::RunStore;

#[derive(Debug, thiserror::Error)]
pub enum RunDirError {
    #[error("failed to create the run directory under {parent}: {source}")]
    Create {
        parent: PathBuf,
        #[source]
        source: io::Error,
    },
}

pub struct RunDirectory {
    root: PathBuf,
    journal: File,
    /// The journal's length after its last complete record: a failed append is cut back to it,
    /// so that a full disk never leaves a torn line.
    journal_len: u64,
}

/// `2026-12-02T10:35:44.123Z` as `20261202T103544Z`: sortable and safe in a file name.
pub(crate) fn folder_stamp(now: SystemTime) -> String {
    let full = format_utc_millis(now);
    let digits: String = full[..19]
        .chars()
        .filter(|c| c.is_ascii_digit() || *c == 'T')
        .collect();
    format!("{digits}Z")
}

impl RunDirectory {
    /// Makes a new run folder under `parent` with run.yaml, an empty journal and candidates/.
    pub fn create(
        parent: &Path,
        strategy: &str,
        now: SystemTime,
        run_yaml: &str,
    ) -> Result<Self, RunDirError> {
        let wrap = |source| RunDirError::Create {
            parent: parent.to_path_buf(),
            source,
        };
        // Children run in folders of their own: every path handed to them must be absolute.
        let parent = &std::path::absolute(parent).map_err(wrap)?;
        fs::create_dir_all(parent).map_err(wrap)?;
        let stem = format!("{strategy}-{}", folder_stamp(now));
        let mut root = parent.join(&stem);
        let mut suffix = 1;
        loop {
            match fs::create_dir(&root) {
                Ok(()) => break,
                Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {
                    suffix += 1;
                    root = parent.join(format!("{stem}-{suffix}"));
                }
                Err(error) => return Err(wrap(error)),
            }
        }
        fs::write(root.join("run.yaml"), run_yaml).map_err(wrap)?;
        fs::create_dir(root.join("candidates")).map_err(wrap)?;
        let journal = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(root.join("journal.jsonl"))
            .map_err(wrap)?;
        Ok(RunDirectory {
            root,
            journal,
            journal_len: 0,
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn candidate_folder(&self, id: CandidateId) -> PathBuf {
        self.root.join("candidates").join(id.to_string())
    }
}

/// An error of the run directory names the file it was about.
fn at(path: &Path, error: io::Error) -> io::Error {
    io::Error::new(error.kind(), format!("{}: {error}", path.display()))
}

/// The report's two files, by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReportNames {
    pub markdown: &'static str,
    pub html: &'static str,
}

/// The Collector's report, rewritten after every round and at the end.
pub const REPORT: ReportNames = ReportNames {
    markdown: "report.md",
    html: "report.html",
};

/// `kactors report`'s names for a run that has not finished: never the Collector's.
pub const LIVE_REPORT: ReportNames = ReportNames {
    markdown: "report.live.md",
    html: "report.live.html",
};

/// Writes a report's markdown and html into `folder`, each atomically; answers their paths.
pub fn write_report_files(
    folder: &Path,
    names: ReportNames,
    markdown: &str,
    html: &str,
) -> io::Result<(PathBuf, PathBuf)> {
    let (markdown_path, html_path) = (folder.join(names.markdown), folder.join(names.html));
    write_atomically(&markdown_path, markdown)?;
    write_atomically(&html_path, html)?;
    Ok((markdown_path, html_path))
}

/// Writes through a temporary file (the name with `.partial` added), synced, and a rename, so
/// that a reader never sees half a file and a crash leaves the old one or the new one; a failed
/// write leaves no temporary file.
fn write_atomically(path: &Path, contents: &str) -> io::Result<()> {
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(".partial");
    let temporary = PathBuf::from(temporary);
    let written = File::create(&temporary)
        .and_then(|mut file| {
            file.write_all(contents.as_bytes())?;
            file.sync_all()
        })
        .and_then(|()| fs::rename(&temporary, path));
    if let Err(error) = written {
        let _ = fs::remove_file(&temporary);
        return Err(at(path, error));
    }
    Ok(())
}

impl RunStore for RunDirectory {
    fn append(&mut self, record: &JournalRecord) -> io::Result<()> {
        let mut line = serde_json::to_vec(&record.to_json())?;
        line.push(b'\n');
        let written = self
            .journal
            .write_all(&line)
            .and_then(|()| self.journal.flush());
        if let Err(error) = written {
            let _ = self.journal.set_len(self.journal_len);
            return Err(at(&self.root.join("journal.jsonl"), error));
        }
        self.journal_len += line.len() as u64;
        Ok(())
    }

    fn sync_journal(&mut self) -> io::Result<()> {
        self.journal
            .sync_data()
            .map_err(|error| at(&self.root.join("journal.jsonl"), error))
    }

    fn create_candidate_folder(&mut self, id: CandidateId) -> io::Result<PathBuf> {
        let folder = self.candidate_folder(id);
        fs::create_dir_all(&folder).map_err(|error| at(&folder, error))?;
        Ok(folder)
    }

    fn write_candidate_file(
        &mut self,
        id: CandidateId,
        name: &str,
        contents: &str,
    ) -> io::Result<()> {
        if name.contains('/') || name.starts_with('.') {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("`{name}` is not a plain file name"),
            ));
        }
        // Synced: a record that names this file (a reply, the code evaluated) follows it.
        let path = self.candidate_folder(id).join(name);
        File::create(&path)
            .and_then(|mut file| {
                file.write_all(contents.as_bytes())?;
                file.sync_all()
            })
            .map_err(|error| at(&path, error))
    }

    fn write_best_kernel(&mut self, source: &str) -> io::Result<()> {
        write_atomically(&self.root.join("best_kernel.py"), source)
    }

    fn prepare_folder(&mut self, name: &str, files: &[(String, String)]) -> io::Result<PathBuf> {
        let folder = self.root.join(name);
        fs::create_dir_all(&folder).map_err(|error| at(&folder, error))?;
        for (file, contents) in files {
            let path = folder.join(file);
            fs::write(&path, contents).map_err(|error| at(&path, error))?;
        }
        Ok(folder)
    }

    fn write_report(&mut self, markdown: &str, html: &str) -> io::Result<()> {
        write_report_files(&self.root, REPORT, markdown, html).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use actors::journal::Event;

    use super::*;

    #[test]
    fn a_run_folder_is_named_after_the_strategy_and_the_time_and_never_reused() {
        let parent = tempfile::tempdir().unwrap();
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_204_144);
        let first = RunDirectory::create(parent.path(), "noop", now, "a: 1\n").unwrap();
        let second = RunDirectory::create(parent.path(), "noop", now, "a: 1\n").unwrap();
        assert_eq!(first.root().file_name().unwrap(), "noop-20261202T093544Z");
        assert_eq!(
            second.root().file_name().unwrap(),
            "noop-20261202T093544Z-2"
        );
        assert!(first.root().join("candidates").is_dir());
        assert_eq!(
            fs::read_to_string(first.root().join("run.yaml")).unwrap(),
            "a: 1\n"
        );
    }

    #[test]
    fn the_journal_gets_one_json_object_per_line() {
        let parent = tempfile::tempdir().unwrap();
        let mut run = RunDirectory::create(parent.path(), "noop", SystemTime::now(), "").unwrap();
        for signal in ["SIGINT", "SIGTERM"] {
            let record = JournalRecord {
                t: SystemTime::UNIX_EPOCH,
                event: Event::Interrupted {
                    signal: signal.into(),
                },
            };
            run.append(&record).unwrap();
        }
        let text = fs::read_to_string(run.root().join("journal.jsonl")).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[1]["signal"], "SIGTERM");
    }

    #[test]
    fn candidate_files_stay_inside_the_candidate_folder() {
        let parent = tempfile::tempdir().unwrap();
        let mut run = RunDirectory::create(parent.path(), "noop", SystemTime::now(), "").unwrap();
        run.create_candidate_folder(CandidateId(3)).unwrap();
        run.write_candidate_file(CandidateId(3), "kernel.py", "x")
            .unwrap();
        assert!(run.root().join("candidates/3/kernel.py").is_file());
        assert!(
            run.write_candidate_file(CandidateId(3), "../escape.py", "x")
                .is_err()
        );
    }
}
