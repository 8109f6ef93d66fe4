//! What of a candidate's folder is only a cache, removed once the candidate can no longer
//! become a parent, and how much a folder holds. Its code, prompts, replies, logs and the
//! profilers' lists of launched kernels are never removed: a resume reads the replies (the
//! journal holds their hashes), and the logs say what happened.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use actors::ports::RemovedCaches;

/// Folders that are caches wherever they are in a candidate's folder: Triton's cache (the
/// evaluator's `triton-cache/` and each profile's) with the binaries it compiled, and Python's
/// bytecode.
const CACHE_FOLDERS: [&str; 2] = ["triton-cache", "__pycache__"];

/// A candidate's profiles are `profile/`, `profile-2/`, … in its folder.
const PROFILE_FOLDER: &str = "profile";

/// The profilers' reports in a profile's folders, read into the journal's `profile_recorded`:
/// Nsight Compute's CSV (`ncu-report.csv`) or report, rocprofv3's CSVs and databases.
const REPORT_EXTENSIONS: [&str; 3] = ["csv", "db", "ncu-rep"];

/// Removes the caches in `folder` (a candidate's), naming each relative to `run_root`.
pub(super) fn remove_caches(run_root: &Path, folder: &Path) -> io::Result<RemovedCaches> {
    let mut removed = RemovedCaches::default();
    let mut folders: Vec<(PathBuf, bool)> = vec![(folder.to_path_buf(), false)];
    while let Some((current, in_profile)) = folders.pop() {
        for entry in read_dir_if_there(&current)? {
            let entry = entry?;
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let kind = entry.file_type()?;
            let cache = if kind.is_dir() && CACHE_FOLDERS.contains(&name.as_ref()) {
                let bytes = bytes_under(&path)?;
                fs::remove_dir_all(&path)?;
                Some(bytes)
            } else if kind.is_dir() {
                let profile = in_profile || (current == folder && name.starts_with(PROFILE_FOLDER));
                folders.push((path.clone(), profile));
                None
            } else if kind.is_file() && in_profile && is_report(&path) {
                let bytes = entry.metadata()?.len();
                fs::remove_file(&path)?;
                Some(bytes)
            } else {
                None
            };
            if let Some(bytes) = cache {
                removed.bytes += bytes;
                let relative = path.strip_prefix(run_root).unwrap_or(&path);
                removed.paths.push(relative.display().to_string());
            }
        }
    }
    removed.paths.sort();
    Ok(removed)
}

fn is_report(path: &Path) -> bool {
    path.extension()
        .and_then(|extension| extension.to_str())
        .is_some_and(|extension| REPORT_EXTENSIONS.contains(&extension))
}

/// The bytes the files under `path` hold, links not followed. Files that go while they are
/// counted (a child cleaning up) count as nothing.
pub(super) fn bytes_under(path: &Path) -> io::Result<u64> {
    let mut bytes = 0;
    let mut folders = vec![path.to_path_buf()];
    while let Some(current) = folders.pop() {
        for entry in read_dir_if_there(&current)? {
            let entry = entry?;
            let metadata = match entry.metadata() {
                Ok(metadata) => metadata,
                Err(error) if error.kind() == io::ErrorKind::NotFound => continue,
                Err(error) => return Err(error),
            };
            if metadata.is_dir() {
                folders.push(entry.path());
            } else {
                bytes += metadata.len();
            }
        }
    }
    Ok(bytes)
}

/// A folder's entries; none for a folder that is not (or no longer) there.
fn read_dir_if_there(folder: &Path) -> io::Result<Vec<io::Result<fs::DirEntry>>> {
    match fs::read_dir(folder) {
        Ok(entries) => Ok(entries.collect()),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, path: &str, bytes: usize) {
        let path = root.join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, vec![b'x'; bytes]).unwrap();
    }

    #[test]
    fn caches_go_and_code_prompts_replies_and_logs_stay() {
        let run = tempfile::tempdir().unwrap();
        let root = run.path();
        let kept = [
            "candidates/4/kernel.py",
            "candidates/4/kernel.proposal.py",
            "candidates/4/prompt.md",
            "candidates/4/reply.md",
            "candidates/4/reflexion.reply.md",
            "candidates/4/analysis.reply.md",
            "candidates/4/profile/ncu/output.log",
            "candidates/4/profile/ncu/kernels.json",
            "candidates/4/profile/discovery/output.log",
            "candidates/4/notes.csv",
        ];
        for path in kept {
            write(root, path, 10);
        }
        write(root, "candidates/4/triton-cache/ABC/matvec.cubin", 3000);
        write(root, "candidates/4/triton-cache/ABC/matvec.json", 200);
        write(root, "candidates/4/__pycache__/kernel.cpython-312.pyc", 500);
        write(
            root,
            "candidates/4/profile/triton-cache/DEF/matvec.cubin",
            3000,
        );
        write(root, "candidates/4/profile/ncu/ncu-report.csv", 33000);
        write(
            root,
            "candidates/4/profile-2/pass_1/host/run_counter_collection.csv",
            700,
        );
        write(root, "candidates/4/profile-2/timing/results.db", 900);
        write(root, "candidates/5/triton-cache/GHI/other.cubin", 3000);

        let removed = remove_caches(root, &root.join("candidates/4")).unwrap();
        assert_eq!(
            removed.paths,
            [
                "candidates/4/__pycache__",
                "candidates/4/profile-2/pass_1/host/run_counter_collection.csv",
                "candidates/4/profile-2/timing/results.db",
                "candidates/4/profile/ncu/ncu-report.csv",
                "candidates/4/profile/triton-cache",
                "candidates/4/triton-cache",
            ]
        );
        assert_eq!(removed.bytes, 3000 + 200 + 500 + 3000 + 33000 + 700 + 900);
        for path in kept {
            assert!(root.join(path).is_file(), "{path} was removed");
        }
        assert!(
            root.join("candidates/5/triton-cache/GHI/other.cubin")
                .is_file(),
            "another candidate's cache stays"
        );
        assert_eq!(
            remove_caches(root, &root.join("candidates/4")).unwrap(),
            RemovedCaches::default(),
            "nothing is left to remove"
        );
        assert_eq!(
            remove_caches(root, &root.join("candidates/9")).unwrap(),
            RemovedCaches::default(),
            "a candidate without a folder has nothing to remove"
        );
    }

    #[test]
    fn a_folder_holds_the_bytes_of_every_file_under_it() {
        let run = tempfile::tempdir().unwrap();
        write(run.path(), "journal.jsonl", 120);
        write(run.path(), "candidates/1/kernel.py", 30);
        write(run.path(), "candidates/1/triton-cache/a/b/c.cubin", 4000);
        std::os::unix::fs::symlink("/usr", run.path().join("candidates/1/link")).unwrap();
        assert_eq!(bytes_under(run.path()).unwrap(), 120 + 30 + 4000 + 4);
        assert_eq!(bytes_under(&run.path().join("absent")).unwrap(), 0);
    }
}
