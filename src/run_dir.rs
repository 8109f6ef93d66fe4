//! The run directory: `<run-dir>/<strategy>-<timestamp>/` with run.yaml, journal.jsonl,
//! candidates/<id>/, best_kernel.py, report.md and report.html. The run's root is made before
//! any actor starts; from then on the Collector is its only writer, through `RunStore`
//! (`kactors report` adds report.live.md and report.live.html, names the Collector never writes).

mod abort_at;
mod caches;

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use actors::journal::{JournalRecord, KeptCode, LineWriter, format_utc_millis};
use actors::model::CandidateId;
use actors::ports::{RemovedCaches, RunStore};

use crate::config::ranges::MAX_SOURCE_BYTES;
use crate::process::pid_lock::{Locked, PidLock, try_lock};
use crate::user_file;

#[cfg(feature = "test-hooks")]
pub use abort_at::ABORT_AT_VARIABLE;
use abort_at::AbortAt;

#[derive(Debug, thiserror::Error)]
pub enum RunDirError {
    #[error("failed to create the run directory under {parent}: {source}")]
    Create {
        parent: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("failed to open the run directory {root}: {source}")]
    Open {
        root: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "{root} is not a kactors run directory: it has no {missing} (give the folder `kactors run` made, runs/<strategy>-<time>)"
    )]
    NotARun {
        root: PathBuf,
        missing: &'static str,
    },
    #[error(
        "the run directory {root} is in use by another kactors process ({holder}); wait for it to end, or end it"
    )]
    InUse { root: PathBuf, holder: String },
}

pub struct RunDirectory {
    root: PathBuf,
    journal: File,
    /// The journal's length after its last complete record: a failed append is cut back to it,
    /// so that a full disk never leaves a torn line.
    journal_len: u64,
    /// What the journal's lines leave out is what this process wrote before.
    lines: LineWriter,
    /// Held as long as this process works in the folder: a second run or resume is refused.
    _lock: PidLock,
    abort_at: Option<AbortAt>,
}

/// The file that holds a run directory for the one process working in it.
pub const LOCK_FILE: &str = "kactors.lock";

fn lock_folder(root: &Path) -> Result<PidLock, RunDirError> {
    let open = |source| RunDirError::Open {
        root: root.to_path_buf(),
        source,
    };
    match try_lock(&root.join(LOCK_FILE)).map_err(open)? {
        Locked::Held(lock) => Ok(lock),
        Locked::Busy { holder } => Err(RunDirError::InUse {
            root: root.to_path_buf(),
            holder,
        }),
    }
}

/// The command that goes on with the run in `root` after an interrupt or a kill, as a user
/// types it: the folder quoted for the shell when it needs to be.
pub fn resume_command(root: &Path) -> String {
    let folder = root.display().to_string();
    let plain = folder
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+:=@,".contains(c));
    if plain {
        format!("kactors resume {folder}")
    } else {
        format!("kactors resume '{}'", folder.replace('\'', "'\\''"))
    }
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

/// `parent/stem/`, made new: `stem-2/`, `stem-3/`, … where a folder of that name exists (two
/// runs or benches started in one second), at most 999 of them.
pub(crate) fn create_stamped_folder(parent: &Path, stem: &str) -> io::Result<PathBuf> {
    for suffix in 1..1000 {
        let folder = if suffix == 1 {
            parent.join(stem)
        } else {
            parent.join(format!("{stem}-{suffix}"))
        };
        match fs::create_dir(&folder) {
            Ok(()) => return Ok(folder),
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(error) => return Err(error),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!("no free name for a folder {stem}-N in {}", parent.display()),
    ))
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
        let root = create_stamped_folder(parent, &format!("{strategy}-{}", folder_stamp(now)))
            .map_err(wrap)?;
        let lock = lock_folder(&root)?;
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
            lines: LineWriter::default(),
            _lock: lock,
            abort_at: AbortAt::from_environment(),
        })
    }

    /// Opens the run directory a resumed run goes on in, with the lock `hold` took: the
    /// journal keeps its first `whole_bytes` (a torn last line is cut off) and grows from there.
    pub fn reopen(root: &Path, whole_bytes: u64, lock: PidLock) -> Result<Self, RunDirError> {
        let open = |source| RunDirError::Open {
            root: root.to_path_buf(),
            source,
        };
        let root = root.to_path_buf();
        let journal = OpenOptions::new()
            .append(true)
            .open(root.join("journal.jsonl"))
            .map_err(open)?;
        journal.set_len(whole_bytes).map_err(open)?;
        let mut journal_len = whole_bytes;
        // A last record whole but without its newline (a kill between the two writes) gets
        // one, or the next record would continue its line.
        if whole_bytes > 0 && !ends_with_newline(&root.join("journal.jsonl")).map_err(open)? {
            (&journal).write_all(b"\n").map_err(open)?;
            journal_len += 1;
        }
        Ok(RunDirectory {
            root,
            journal,
            journal_len,
            lines: LineWriter::default(),
            _lock: lock,
            abort_at: AbortAt::from_environment(),
        })
    }

    /// Holds a run directory's lock without opening it for writing (`kactors resume` checks
    /// everything before it opens the journal); answers its absolute path with the lock.
    pub fn hold(root: &Path) -> Result<(PathBuf, PidLock), RunDirError> {
        let root = std::path::absolute(root).map_err(|source| RunDirError::Open {
            root: root.to_path_buf(),
            source,
        })?;
        for missing in ["run.yaml", "journal.jsonl"] {
            if !root.join(missing).is_file() {
                return Err(RunDirError::NotARun { root, missing });
            }
        }
        let lock = lock_folder(&root)?;
        Ok((root, lock))
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn candidate_folder(&self, id: CandidateId) -> PathBuf {
        self.root.join("candidates").join(id.to_string())
    }
}

fn ends_with_newline(path: &Path) -> io::Result<bool> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = File::open(path)?;
    file.seek(SeekFrom::End(-1))?;
    let mut last = [0u8];
    file.read_exact(&mut last)?;
    Ok(last[0] == b'\n')
}

/// An error of the run directory names the file it was about.
fn at(path: &Path, error: io::Error) -> io::Error {
    io::Error::new(error.kind(), format!("{}: {error}", path.display()))
}

/// A run directory's files as its journal's readers take them: the code its lines keep by
/// hash (no longer than the largest source a run takes).
pub struct RunFiles<'a>(pub &'a Path);

impl KeptCode for RunFiles<'_> {
    fn read(&mut self, file: &str) -> Result<String, String> {
        user_file::read_text(&self.0.join(file), *MAX_SOURCE_BYTES.end())
            .map_err(|error| error.to_string())
    }
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
        let json = self.lines.line(record);
        if let Some(abort_at) = &mut self.abort_at {
            abort_at.before(&json);
        }
        let mut line = serde_json::to_vec(&json)?;
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
        // Whole and synced: a record that names this file (a reply, the code evaluated)
        // follows it, and a resumed run takes a reply it finds there as complete.
        write_atomically(&self.candidate_folder(id).join(name), contents)
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

    fn remove_candidate_caches(&mut self, id: CandidateId) -> io::Result<RemovedCaches> {
        let folder = self.candidate_folder(id);
        caches::remove_caches(&self.root, &folder).map_err(|error| at(&folder, error))
    }

    fn measure(&mut self) -> io::Result<u64> {
        caches::bytes_under(&self.root).map_err(|error| at(&self.root, error))
    }

    fn read_kept_reply(&mut self, id: CandidateId, name: &str) -> io::Result<Option<String>> {
        let path = self.candidate_folder(id).join(name);
        match user_file::read_text(&path, crate::llm::MAX_REPLY_BYTES as u64) {
            Ok(text) => Ok(Some(text)),
            Err(error) if error.is_missing() => Ok(None),
            Err(error) => Err(io::Error::other(error.to_string())),
        }
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
