//! A kernel directory in KernelAgent's layout: input.py with `kernel_function`, problem.py with
//! `Model`, `get_inputs` and `get_init_inputs`, and test.py. kactors reads it and never writes
//! into it.

use std::path::{Path, PathBuf};

use actors::model::KernelSource;

#[derive(Debug, thiserror::Error)]
pub enum KernelDirError {
    #[error("kernel directory {0} does not exist or is not a directory")]
    NotADirectory(PathBuf),
    #[error(
        "failed to read {path}: {source}; a kernel directory holds input.py, problem.py and test.py"
    )]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
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
    pub initial: KernelSource,
}

fn read(path: PathBuf) -> Result<String, KernelDirError> {
    std::fs::read_to_string(&path).map_err(|source| KernelDirError::Read { path, source })
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
    pub fn open(root: &Path) -> Result<Self, KernelDirError> {
        if !root.is_dir() {
            return Err(KernelDirError::NotADirectory(root.to_path_buf()));
        }
        let input_path = root.join("input.py");
        let input = read(input_path.clone())?;
        if !defines(&input, "kernel_function") {
            return Err(KernelDirError::Missing {
                path: input_path,
                name: "kernel_function",
                expected: "a top-level `def kernel_function(...)` that launches the Triton kernel",
            });
        }
        let problem_path = root.join("problem.py");
        let problem = read(problem_path.clone())?;
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
        Ok(KernelDir {
            root: root.to_path_buf(),
            initial: KernelSource::new(input),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            KernelDir::open(&root).unwrap_or_else(|e| panic!("{e}"));
        }
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
        let error = KernelDir::open(dir.path()).unwrap_err().to_string();
        assert!(error.ends_with("problem.py does not define `get_init_inputs`: expected `def get_init_inputs()` returning Model's constructor arguments"), "{error}");
    }
}
