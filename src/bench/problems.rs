//! Which problems a bench runs: every KernelBench-style problem file (`*.py`) and every kernel
//! directory (a folder holding problem.py) under a folder, in name order; or the paths a list
//! file names, one a line. Each is named by its path under the folder (`level1/01_relu`), which
//! names its folders in the bench directory too.

use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The most problems one bench takes: a bound on what a folder or a list can make it do.
pub const MAX_PROBLEMS: usize = 10_000;
/// The most bytes of a list file read.
const MAX_LIST_BYTES: u64 = 1 << 20;

/// One problem of a bench.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    /// Its path under the folder, without `.py`: `level1/01_relu`.
    pub name: String,
    /// Where its problem.py comes from, as an absolute path.
    pub source: PathBuf,
    /// A kernel directory (used as it is: its replay candidates, its test.py), or a problem
    /// file (copied into the bench directory as a kernel directory's problem.py).
    pub kind: ProblemKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemKind {
    File,
    KernelDir,
}

#[derive(Debug, thiserror::Error)]
pub enum ProblemsError {
    #[error("--problems {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    List(#[from] crate::user_file::UserFileError),
    #[error(
        "--problems {}: no problems found: expected KernelBench-style files (*.py defining Model, get_inputs and get_init_inputs), folders holding problem.py, or a list file naming them one a line",
        path.display()
    )]
    Empty { path: PathBuf },
    #[error("--problems {}: line {line} names {}, which is neither a .py file nor a folder holding problem.py", list.display(), entry.display())]
    NotAProblem {
        list: PathBuf,
        line: usize,
        entry: PathBuf,
    },
    #[error("--problems: two problems are named `{name}` ({} and {}); rename one", first.display(), second.display())]
    SameName {
        name: String,
        first: PathBuf,
        second: PathBuf,
    },
    #[error("--problems {}: more than {MAX_PROBLEMS} problems; split the bench", path.display())]
    TooMany { path: PathBuf },
}

/// The problems `path` names: a folder's, or a list file's.
pub fn find_problems(path: &Path) -> Result<Vec<Problem>, ProblemsError> {
    let read_error = |source| ProblemsError::Read {
        path: path.to_path_buf(),
        source,
    };
    let root = std::path::absolute(path).map_err(read_error)?;
    let metadata = std::fs::metadata(&root).map_err(read_error)?;
    let mut problems = Vec::new();
    if metadata.is_dir() {
        walk(&root, &root, &mut problems).map_err(read_error)?;
    } else {
        from_list(&root, path, &mut problems)?;
    }
    if problems.is_empty() {
        return Err(ProblemsError::Empty {
            path: path.to_path_buf(),
        });
    }
    if problems.len() > MAX_PROBLEMS {
        return Err(ProblemsError::TooMany {
            path: path.to_path_buf(),
        });
    }
    let mut names: Vec<&Problem> = problems.iter().collect();
    names.sort_by(|a, b| a.name.cmp(&b.name));
    if let Some(pair) = names.windows(2).find(|pair| pair[0].name == pair[1].name) {
        return Err(ProblemsError::SameName {
            name: pair[0].name.clone(),
            first: pair[0].source.clone(),
            second: pair[1].source.clone(),
        });
    }
    Ok(problems)
}

/// What a path is as a problem, named `name`; none for anything else.
fn problem_at(path: &Path, name: String) -> Option<Problem> {
    if path.join("problem.py").is_file() {
        return Some(Problem {
            name,
            source: path.to_path_buf(),
            kind: ProblemKind::KernelDir,
        });
    }
    (path.is_file() && path.extension().is_some_and(|ext| ext == "py")).then(|| Problem {
        name,
        source: path.to_path_buf(),
        kind: ProblemKind::File,
    })
}

/// A path under `root` as a problem's name: its components joined by `/`, `.py` cut.
fn name_of(root: &Path, path: &Path) -> String {
    let relative = path.strip_prefix(root).unwrap_or(path);
    let parts: Vec<String> = relative
        .components()
        .filter_map(|part| match part {
            Component::Normal(part) => Some(part.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect();
    let name = parts.join("/");
    name.strip_suffix(".py")
        .map_or(name.clone(), str::to_string)
}

/// A folder's problems in name order; a kernel directory is one problem, not looked into.
/// Hidden entries are skipped.
fn walk(root: &Path, dir: &Path, problems: &mut Vec<Problem>) -> std::io::Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
        .map(|entry| entry.map(|entry| entry.path()))
        .collect::<Result<_, _>>()?;
    entries.sort();
    for entry in entries {
        if entry
            .file_name()
            .is_some_and(|name| name.to_string_lossy().starts_with('.'))
        {
            continue;
        }
        if let Some(problem) = problem_at(&entry, name_of(root, &entry)) {
            problems.push(problem);
        } else if entry.is_dir() && !entry.is_symlink() {
            walk(root, &entry, problems)?;
        }
        if problems.len() > MAX_PROBLEMS {
            break;
        }
    }
    Ok(())
}

/// A list file's problems: one path a line (relative to the list's folder), blank lines and
/// `#` comments ignored; each named by its file's stem or its folder's name.
fn from_list(list: &Path, given: &Path, problems: &mut Vec<Problem>) -> Result<(), ProblemsError> {
    let text = crate::user_file::read_text(list, MAX_LIST_BYTES)?;
    let base = list.parent().unwrap_or(Path::new("/"));
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let entry = base.join(line);
        let name = entry
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        let name = name
            .strip_suffix(".py")
            .map_or(name.clone(), str::to_string);
        let problem = problem_at(&entry, name).ok_or_else(|| ProblemsError::NotAProblem {
            list: given.to_path_buf(),
            line: index + 1,
            entry: PathBuf::from(line),
        })?;
        problems.push(problem);
        if problems.len() > MAX_PROBLEMS {
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(problems: &[Problem]) -> Vec<(String, ProblemKind)> {
        problems.iter().map(|p| (p.name.clone(), p.kind)).collect()
    }

    #[test]
    fn a_folder_gives_its_files_and_kernel_directories_in_name_order_by_their_path() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("level1")).unwrap();
        std::fs::create_dir_all(root.join("level2/kernel/candidates")).unwrap();
        std::fs::create_dir_all(root.join(".hidden")).unwrap();
        std::fs::write(root.join("level1/02_sum.py"), "").unwrap();
        std::fs::write(root.join("level1/01_relu.py"), "").unwrap();
        std::fs::write(root.join("level1/README.md"), "").unwrap();
        std::fs::write(root.join("level2/kernel/problem.py"), "").unwrap();
        std::fs::write(root.join("level2/kernel/candidates/00.py"), "").unwrap();
        std::fs::write(root.join(".hidden/x.py"), "").unwrap();
        let problems = find_problems(root).unwrap();
        assert_eq!(
            names(&problems),
            vec![
                ("level1/01_relu".to_string(), ProblemKind::File),
                ("level1/02_sum".to_string(), ProblemKind::File),
                ("level2/kernel".to_string(), ProblemKind::KernelDir),
            ]
        );
        assert!(problems.iter().all(|p| p.source.is_absolute()));
    }

    #[test]
    fn a_list_file_names_problems_relative_to_itself_and_refuses_what_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("relu")).unwrap();
        std::fs::write(root.join("relu/problem.py"), "").unwrap();
        std::fs::write(root.join("sum.py"), "").unwrap();
        std::fs::write(root.join("list.txt"), "# two problems\nrelu\n\nsum.py\n").unwrap();
        let problems = find_problems(&root.join("list.txt")).unwrap();
        assert_eq!(
            names(&problems),
            vec![
                ("relu".to_string(), ProblemKind::KernelDir),
                ("sum".to_string(), ProblemKind::File),
            ]
        );
        std::fs::write(root.join("bad.txt"), "sum.py\nmissing.py\n").unwrap();
        let error = find_problems(&root.join("bad.txt"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("line 2 names missing.py"), "{error}");
        std::fs::write(root.join("twice.txt"), "sum.py\nrelu/../sum.py\n").unwrap();
        let error = find_problems(&root.join("twice.txt"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("two problems are named `sum`"), "{error}");
    }

    #[test]
    fn a_folder_without_problems_is_refused_saying_what_would_do() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.md"), "").unwrap();
        let error = find_problems(dir.path()).unwrap_err().to_string();
        assert!(error.contains("no problems found: expected"), "{error}");
    }
}
