//! Finding the CSV that one rocprofv3 invocation wrote, and only that one.
//!
//! Where rocprofv3 puts a file depends on the release and the mode (profilers.md 1.4):
//! `DIR/PREFIX_kernel_trace.csv`, `DIR/pass_N/...` or `DIR/pmc_N/...` for passes, a
//! `<hostname>/` level when no `-o` prefix is given, `%pid%` expanded in the prefix. So the file
//! is searched for by the end of its name anywhere inside the invocation's own directory,
//! which [`crate::profiling::ensure_fresh_dir`] guarantees was empty before the invocation: a file found there was
//! written by this invocation, never left by an earlier kernel or round.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Deep enough for `pass_N/<hostname>/PREFIX_...`; rocprofv3 nests no further.
const MAX_SEARCH_DEPTH: usize = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputKind {
    KernelTrace,
    KernelStats,
    CounterCollection,
}

impl OutputKind {
    /// The domain part of the file name, after the `-o` prefix and its `_`.
    fn domain_file_name(self) -> &'static str {
        match self {
            Self::KernelTrace => "kernel_trace.csv",
            Self::KernelStats => "kernel_stats.csv",
            Self::CounterCollection => "counter_collection.csv",
        }
    }

    fn description(self) -> &'static str {
        match self {
            Self::KernelTrace => "kernel trace (kernel_trace.csv)",
            Self::KernelStats => "kernel statistics (kernel_stats.csv)",
            Self::CounterCollection => "counter collection (counter_collection.csv)",
        }
    }

    fn is_output_name(self, file_name: &str) -> bool {
        let domain = self.domain_file_name();
        file_name == domain
            || file_name
                .strip_suffix(domain)
                .is_some_and(|prefix| prefix.ends_with('_'))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RocprofOutputError {
    #[error(
        "rocprofv3 wrote no {} in {}: no file named *_{} there",
        kind.description(),
        dir.display(),
        kind.domain_file_name()
    )]
    NoneWritten { kind: OutputKind, dir: PathBuf },
    #[error(
        "rocprofv3 wrote {} {} files in {} ({}): several processes were profiled, one file \
         each, so the measured call's file cannot be chosen",
        paths.len(),
        kind.description(),
        dir.display(),
        paths.iter().map(|path| path.display().to_string()).collect::<Vec<_>>().join(", ")
    )]
    Several {
        kind: OutputKind,
        dir: PathBuf,
        paths: Vec<PathBuf>,
    },
    #[error("rocprofv3 wrote an empty {}: {}", kind.description(), path.display())]
    Empty { kind: OutputKind, path: PathBuf },
    #[error(
        "rocprofv3 wrote a {} with a header and no rows: {}",
        kind.description(),
        path.display()
    )]
    HeaderOnly { kind: OutputKind, path: PathBuf },
    #[error("cannot read {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// The one `kind` file inside `dir`, the invocation's own fresh directory.
///
/// Every process that loads HIP is profiled and writes its own files. Files with no rows
/// (empty, or a header only) are set aside when choosing: a process that dispatched nothing has
/// nothing to say about the measured call. Then exactly one file with rows is accepted; none
/// written, none with rows, or several with rows (several processes ran kernels, and which one
/// ran the measured call cannot be told from the files) are errors.
pub fn find_outputs(dir: &Path, kind: OutputKind) -> Result<PathBuf, RocprofOutputError> {
    let mut found = Vec::new();
    collect_named_files(dir, kind, MAX_SEARCH_DEPTH, &mut found)?;
    found.sort();
    let mut with_rows = Vec::new();
    let mut first_without_rows = None;
    for path in found {
        match rows_in(&path)? {
            Rows::Some => with_rows.push(path),
            Rows::NoLines if first_without_rows.is_none() => {
                first_without_rows = Some(RocprofOutputError::Empty { kind, path });
            }
            Rows::HeaderOnly if first_without_rows.is_none() => {
                first_without_rows = Some(RocprofOutputError::HeaderOnly { kind, path });
            }
            Rows::NoLines | Rows::HeaderOnly => {}
        }
    }
    match with_rows.len() {
        0 => Err(
            first_without_rows.unwrap_or_else(|| RocprofOutputError::NoneWritten {
                kind,
                dir: dir.to_owned(),
            }),
        ),
        1 => Ok(with_rows.remove(0)),
        _ => Err(RocprofOutputError::Several {
            kind,
            dir: dir.to_owned(),
            paths: with_rows,
        }),
    }
}

enum Rows {
    NoLines,
    HeaderOnly,
    Some,
}

fn rows_in(path: &Path) -> Result<Rows, RocprofOutputError> {
    let text = fs::read_to_string(path).map_err(|source| RocprofOutputError::Io {
        path: path.to_owned(),
        source,
    })?;
    let mut lines = text.lines().filter(|line| !line.trim().is_empty());
    Ok(match (lines.next(), lines.next()) {
        (None, _) => Rows::NoLines,
        (Some(_), None) => Rows::HeaderOnly,
        (Some(_), Some(_)) => Rows::Some,
    })
}

fn collect_named_files(
    dir: &Path,
    kind: OutputKind,
    depth_left: usize,
    found: &mut Vec<PathBuf>,
) -> Result<(), RocprofOutputError> {
    let io_error = |source| RocprofOutputError::Io {
        path: dir.to_owned(),
        source,
    };
    for entry in fs::read_dir(dir).map_err(io_error)? {
        let entry = entry.map_err(io_error)?;
        // file_type() does not follow symbolic links: a link could point at an old file.
        let file_type = entry.file_type().map_err(io_error)?;
        if file_type.is_dir() && depth_left > 0 {
            collect_named_files(&entry.path(), kind, depth_left - 1, found)?;
        } else if file_type.is_file()
            && entry
                .file_name()
                .to_str()
                .is_some_and(|name| kind.is_output_name(name))
        {
            found.push(entry.path());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profiling::ensure_fresh_dir;

    const TRACE_HEADER: &str =
        "\"Kind\",\"Agent_Id\",\"Kernel_Name\",\"Start_Timestamp\",\"End_Timestamp\"\n";
    const TRACE_ROW: &str = "\"KERNEL_DISPATCH\",1,\"k\",1,2\n";

    fn write(path: &Path, text: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    #[test]
    fn finds_the_file_in_every_documented_layout() {
        let layouts = [
            "run_kernel_trace.csv",
            "run_4242_kernel_trace.csv",
            "pass_1/run_kernel_trace.csv",
            "pmc_1/run_kernel_trace.csv",
            "node7/4242_kernel_trace.csv",
            "pass_1/node7/4242_kernel_trace.csv",
            "kernel_trace.csv",
        ];
        for layout in layouts {
            let temp = tempfile::tempdir().unwrap();
            let path = temp.path().join(layout);
            write(&path, &format!("{TRACE_HEADER}{TRACE_ROW}"));
            write(&temp.path().join("run_agent_info.csv"), "a\nb\n");
            assert_eq!(
                find_outputs(temp.path(), OutputKind::KernelTrace).unwrap(),
                path,
                "{layout}"
            );
        }
    }

    #[test]
    fn names_of_other_domains_do_not_match() {
        assert!(!OutputKind::CounterCollection.is_output_name("run_counter_collection_stats.csv"));
        assert!(!OutputKind::KernelTrace.is_output_name("runkernel_trace.csv"));
        assert!(!OutputKind::KernelTrace.is_output_name("run_kernel_trace.csv.bak"));
        assert!(!OutputKind::KernelStats.is_output_name("run_domain_stats.csv"));
        assert!(OutputKind::KernelStats.is_output_name("run_kernel_stats.csv"));
    }

    #[test]
    fn none_written_is_an_error() {
        let temp = tempfile::tempdir().unwrap();
        write(&temp.path().join("run_results.db"), "SQLite");
        let error = find_outputs(temp.path(), OutputKind::CounterCollection).unwrap_err();
        assert!(matches!(error, RocprofOutputError::NoneWritten { .. }));
        assert!(
            error
                .to_string()
                .starts_with("rocprofv3 wrote no counter collection")
        );
    }

    #[test]
    fn several_processes_are_an_error_naming_the_files() {
        let temp = tempfile::tempdir().unwrap();
        let with_rows = format!("{TRACE_HEADER}{TRACE_ROW}");
        write(&temp.path().join("run_100_kernel_trace.csv"), &with_rows);
        write(
            &temp.path().join("pass_1/run_101_kernel_trace.csv"),
            &with_rows,
        );
        let error = find_outputs(temp.path(), OutputKind::KernelTrace).unwrap_err();
        let message = error.to_string();
        assert!(matches!(error, RocprofOutputError::Several { .. }));
        assert!(message.contains("run_100_kernel_trace.csv"), "{message}");
        assert!(message.contains("run_101_kernel_trace.csv"), "{message}");
        assert!(message.contains("several processes"), "{message}");
    }

    #[test]
    fn a_process_that_dispatched_nothing_is_set_aside() {
        let temp = tempfile::tempdir().unwrap();
        let measured = temp.path().join("run_100_kernel_trace.csv");
        write(&measured, &format!("{TRACE_HEADER}{TRACE_ROW}"));
        write(&temp.path().join("run_101_kernel_trace.csv"), TRACE_HEADER);
        write(&temp.path().join("run_102_kernel_trace.csv"), "");
        assert_eq!(
            find_outputs(temp.path(), OutputKind::KernelTrace).unwrap(),
            measured
        );
    }

    #[test]
    fn empty_and_header_only_files_are_errors() {
        let temp = tempfile::tempdir().unwrap();
        let path = temp.path().join("run_kernel_trace.csv");
        write(&path, "");
        assert!(matches!(
            find_outputs(temp.path(), OutputKind::KernelTrace),
            Err(RocprofOutputError::Empty { .. })
        ));
        write(&path, TRACE_HEADER);
        assert!(matches!(
            find_outputs(temp.path(), OutputKind::KernelTrace),
            Err(RocprofOutputError::HeaderOnly { .. })
        ));
        write(&path, &format!("{TRACE_HEADER}\n\n"));
        assert!(matches!(
            find_outputs(temp.path(), OutputKind::KernelTrace),
            Err(RocprofOutputError::HeaderOnly { .. })
        ));
    }

    #[test]
    fn a_stale_file_outside_the_invocation_directory_is_never_read() {
        let temp = tempfile::tempdir().unwrap();
        write(
            &temp.path().join("round1/run_kernel_trace.csv"),
            &format!("{TRACE_HEADER}{TRACE_ROW}"),
        );
        let round2 = temp.path().join("round2");
        ensure_fresh_dir(&round2).unwrap();
        assert!(matches!(
            find_outputs(&round2, OutputKind::KernelTrace),
            Err(RocprofOutputError::NoneWritten { .. })
        ));
    }

    #[cfg(unix)]
    #[test]
    fn symbolic_links_are_not_followed() {
        let temp = tempfile::tempdir().unwrap();
        let old = temp.path().join("old/run_kernel_trace.csv");
        write(&old, &format!("{TRACE_HEADER}{TRACE_ROW}"));
        let dir = temp.path().join("new");
        ensure_fresh_dir(&dir).unwrap();
        std::os::unix::fs::symlink(&old, dir.join("run_kernel_trace.csv")).unwrap();
        std::os::unix::fs::symlink(temp.path().join("old"), dir.join("pass_1")).unwrap();
        assert!(matches!(
            find_outputs(&dir, OutputKind::KernelTrace),
            Err(RocprofOutputError::NoneWritten { .. })
        ));
    }
}
