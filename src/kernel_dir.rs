//! A kernel directory in KernelAgent's layout: input.py with `kernel_function`, problem.py with
//! `Model`, `get_inputs` and `get_init_inputs`, and test.py. Only problem.py is required: without
//! input.py the run starts with generation, and without test.py kactors's own verification is
//! the test. kactors reads it and never writes into it.

use std::path::{Path, PathBuf};

use actors::model::KernelSource;

use crate::config::ranges::MAX_SOURCE_BYTES;
use crate::user_file::{self, UserFileError};

#[derive(Debug, thiserror::Error)]
pub enum KernelDirError {
    #[error("kernel directory {0} does not exist or is not a directory")]
    NotADirectory(PathBuf),
    #[error(
        "{source}; a kernel directory holds problem.py, and input.py and test.py if it has them"
    )]
    Read {
        #[source]
        source: UserFileError,
    },
    #[error(
        "{path} is {size} bytes, more than max_source_bytes ({limit}): it would go into every \
         prompt; shrink it, or raise max_source_bytes in the strategy file (at most {most})",
        most = MAX_SOURCE_BYTES.end()
    )]
    TooLarge {
        path: PathBuf,
        size: u64,
        limit: u64,
    },
    #[error(
        "--run-dir {run_dir} is inside the kernel directory {kernel}: kactors never writes into \
         the kernel directory (nor its candidates/); give a --run-dir outside it"
    )]
    RunDirInside { run_dir: PathBuf, kernel: PathBuf },
    #[error("{path} does not define `{name}`: expected {expected}")]
    Missing {
        path: PathBuf,
        name: &'static str,
        expected: &'static str,
    },
}

#[derive(Clone, Debug)]
pub struct KernelDir {
    pub root: PathBuf,
    /// input.py; `None` when the directory has none (the run generates seed kernels).
    pub initial: Option<KernelSource>,
}

/// A file of the kernel directory, refused before it is read when it is not a regular file or
/// is larger than `limit`.
fn read(path: PathBuf, limit: u64) -> Result<String, KernelDirError> {
    user_file::read_text(&path, limit).map_err(|source| match source {
        UserFileError::TooLarge { path, size, limit } => {
            KernelDirError::TooLarge { path, size, limit }
        }
        source => KernelDirError::Read { source },
    })
}

/// The most kactors reads of a kernel directory's test.py, which no prompt carries.
pub const MAX_TEST_BYTES: u64 = *MAX_SOURCE_BYTES.end();

/// A file of a kernel directory as kactors reads it anywhere (a hash, the finale's copy): the
/// bounded reader's, with input.py and problem.py held to max_source_bytes by `open` first.
pub fn read_kernel_file(path: &Path) -> Result<Vec<u8>, UserFileError> {
    user_file::read_bytes(path, MAX_TEST_BYTES)
}

/// Whether Python source defines `name` at the top level, as a function or a class. A reading of
/// the text, not an import: kactors checks the layout before any Python runs.
fn defines(source: &str, name: &str) -> bool {
    source.lines().any(|line| {
        ["def ", "class ", "async def "].iter().any(|keyword| {
            line.strip_prefix(keyword)
                .and_then(|rest| rest.strip_prefix(name))
                .is_some_and(|rest| rest.starts_with('(') || rest.starts_with(':'))
        })
    })
}

impl KernelDir {
    /// Checks the layout; input.py and problem.py go into every prompt, so each is refused
    /// above `max_source_bytes` (the configuration key of that name).
    pub fn open(root: &Path, max_source_bytes: u64) -> Result<Self, KernelDirError> {
        if !root.is_dir() {
            return Err(KernelDirError::NotADirectory(root.to_path_buf()));
        }
        let input_path = root.join("input.py");
        let input = match read(input_path.clone(), max_source_bytes) {
            Err(KernelDirError::Read { source }) if source.is_missing() => None,
            Err(error) => return Err(error),
            Ok(input) => Some(input),
        };
        if let Some(input) = &input
            && !defines(input, "kernel_function")
        {
            return Err(KernelDirError::Missing {
                path: input_path,
                name: "kernel_function",
                expected: "a top-level `def kernel_function(...)` that launches the Triton kernel",
            });
        }
        let problem_path = root.join("problem.py");
        let problem = read(problem_path.clone(), max_source_bytes)?;
        for (name, expected) in [
            (
                "Model",
                "the PyTorch reference as `class Model(torch.nn.Module)`",
            ),
            (
                "get_inputs",
                "`def get_inputs()` returning the forward inputs",
            ),
            (
                "get_init_inputs",
                "`def get_init_inputs()` returning Model's constructor arguments",
            ),
        ] {
            if !defines(&problem, name) {
                return Err(KernelDirError::Missing {
                    path: problem_path,
                    name,
                    expected,
                });
            }
        }
        // test.py runs only at the end, but one that cannot be read must refuse the run now.
        let test_path = root.join("test.py");
        match read(test_path, MAX_TEST_BYTES) {
            Err(KernelDirError::Read { source }) if source.is_missing() => {}
            Err(error) => return Err(error),
            Ok(_) => {}
        }
        Ok(KernelDir {
            root: root.to_path_buf(),
            initial: input.map(KernelSource::new),
        })
    }
}

/// `path` with its symbolic links and `..` resolved as far as it exists, the rest appended: a
/// folder not made yet is placed where it would be made.
fn resolved(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(found) = existing.canonicalize() {
            return rest.iter().rev().fold(found, |path, part| path.join(part));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                existing = parent;
            }
            _ => return absolute,
        }
    }
}

impl KernelDir {
    /// Refuses a run directory (the folder runs are made in) inside the kernel directory:
    /// nothing is written there, and its candidates/ are the replay provider's.
    pub fn refuse_run_dir_inside(&self, run_parent: &Path) -> Result<(), KernelDirError> {
        let kernel = resolved(&self.root);
        if resolved(run_parent).starts_with(&kernel) {
            return Err(KernelDirError::RunDirInside {
                run_dir: run_parent.to_path_buf(),
                kernel: self.root.clone(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ranges::DEFAULT_MAX_SOURCE_BYTES;

    #[test]
    fn top_level_definitions_are_found_and_mentions_are_not() {
        assert!(defines(
            "import x\ndef kernel_function(a, b):\n",
            "kernel_function"
        ));
        assert!(defines("class Model(nn.Module):\n", "Model"));
        assert!(!defines("# def kernel_function(x)\n", "kernel_function"));
        assert!(!defines("def kernel_function_v2(x):\n", "kernel_function"));
        assert!(!defines("    def kernel_function(x):\n", "kernel_function"));
    }

    #[test]
    fn the_shipped_examples_are_kernel_directories() {
        for example in ["optimize_01_matvec", "optimize_02_rmsnorm"] {
            let root = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("examples")
                .join(example);
            KernelDir::open(&root, DEFAULT_MAX_SOURCE_BYTES).unwrap_or_else(|e| panic!("{e}"));
        }
    }

    /// Issue 20: each shipped KernelBench-style problem, alone as problem.py, is a kernel
    /// directory whose run starts with generation.
    #[test]
    fn the_shipped_kernelbench_problems_are_bare_kernel_directories() {
        let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/kernelbench");
        let mut problems = 0;
        for level in ["level1", "level2", "level3"] {
            for entry in std::fs::read_dir(shipped.join(level)).unwrap() {
                let problem = entry.unwrap().path();
                let dir = tempfile::tempdir().unwrap();
                std::fs::copy(&problem, dir.path().join("problem.py")).unwrap();
                let kernel = KernelDir::open(dir.path(), DEFAULT_MAX_SOURCE_BYTES)
                    .unwrap_or_else(|e| panic!("{}: {e}", problem.display()));
                assert!(kernel.initial.is_none());
                problems += 1;
            }
        }
        assert_eq!(problems, 10);
    }

    #[test]
    fn a_missing_definition_names_the_file_and_what_is_expected() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("input.py"),
            "def kernel_function(x):\n    pass\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("problem.py"),
            "class Model:\n    pass\ndef get_inputs():\n    pass\n",
        )
        .unwrap();
        let error = KernelDir::open(dir.path(), DEFAULT_MAX_SOURCE_BYTES)
            .unwrap_err()
            .to_string();
        assert!(error.ends_with("problem.py does not define `get_init_inputs`: expected `def get_init_inputs()` returning Model's constructor arguments"), "{error}");
    }

    #[test]
    fn input_and_problem_above_max_source_bytes_are_refused_unread() {
        let dir = tempfile::tempdir().unwrap();
        let input = "def kernel_function(x):\n    pass\n";
        let problem = "class Model:\n    pass\ndef get_inputs():\n    pass\ndef get_init_inputs():\n    pass\n";
        std::fs::write(dir.path().join("input.py"), input).unwrap();
        std::fs::write(dir.path().join("problem.py"), problem).unwrap();
        let check = |limit: u64| {
            KernelDir::open(dir.path(), limit)
                .err()
                .map(|error| error.to_string())
        };
        let at_most = input.len().max(problem.len()) as u64;
        assert_eq!(check(at_most), None);
        let input_message = check(input.len() as u64 - 1).unwrap();
        assert!(
            input_message.ends_with(&format!(
                "input.py is {} bytes, more than max_source_bytes ({}): it would go into every \
                 prompt; shrink it, or raise max_source_bytes in the strategy file (at most \
                 67108864)",
                input.len(),
                input.len() - 1
            )),
            "{input_message}"
        );
        let problem_message = check(problem.len() as u64 - 1).unwrap();
        assert!(
            problem_message.contains(&format!("problem.py is {} bytes", problem.len())),
            "{problem_message}"
        );
    }
}
