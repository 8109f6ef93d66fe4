use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where ROCm installs its tools; the last place amd-smi is looked for.
const DEFAULT_ROCM_BIN_DIR: &str = "/opt/rocm/bin";

/// The environment a device selection is judged against: a snapshot of the variables and the
/// Python interpreter the run is configured with.
///
/// Selection only reads it; kactors never changes its own process environment (a pin exists only
/// in the environment given to children), and tests pass a made-up one instead of mutating theirs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostEnvironment {
    vars: BTreeMap<String, String>,
    python: PathBuf,
    rocm_bin_dir: PathBuf,
}

impl HostEnvironment {
    /// Snapshots this process's variables. A variable whose name or value is not UTF-8 is left
    /// out: none that selection reads can be one, and the GPU tools do not need one.
    pub fn from_process(python: PathBuf) -> Self {
        let vars = std::env::vars_os()
            .filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?)))
            .collect();
        Self::new(vars, python)
    }

    /// Made-up variables and `python3`: the environment of a test.
    #[cfg(test)]
    pub(crate) fn of_vars(vars: &[(&str, &str)]) -> Self {
        let vars = vars
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect();
        Self::new(vars, PathBuf::from("python3"))
    }

    pub fn new(vars: BTreeMap<String, String>, python: PathBuf) -> Self {
        Self {
            vars,
            python,
            rocm_bin_dir: PathBuf::from(DEFAULT_ROCM_BIN_DIR),
        }
    }

    /// Replaces `/opt/rocm/bin` as the last directory searched for amd-smi (tests point it at
    /// an empty directory so that a ROCm install on the test machine cannot answer).
    pub fn with_rocm_bin_dir(mut self, dir: PathBuf) -> Self {
        self.rocm_bin_dir = dir;
        self
    }

    pub fn var(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str)
    }

    pub fn vars(&self) -> &BTreeMap<String, String> {
        &self.vars
    }

    pub fn python(&self) -> &Path {
        &self.python
    }

    pub fn rocm_bin_dir(&self) -> &Path {
        &self.rocm_bin_dir
    }

    /// The directories of PATH in order. Empty entries (which POSIX reads as the current
    /// directory) are skipped so that a GPU tool is never picked up from wherever kactors runs.
    pub(crate) fn path_dirs(&self) -> Vec<PathBuf> {
        self.var("PATH")
            .map(|path| {
                std::env::split_paths(path)
                    .filter(|dir| !dir.as_os_str().is_empty())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The directory holding the configured Python, taken as written: a virtual environment's
    /// python is often a symlink whose target directory has none of the environment's tools.
    pub(crate) fn python_dir(&self) -> Option<&Path> {
        self.python
            .parent()
            .filter(|dir| !dir.as_os_str().is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(path: Option<&str>, python: &str) -> HostEnvironment {
        let vars = path
            .map(|path| BTreeMap::from([("PATH".to_string(), path.to_string())]))
            .unwrap_or_default();
        HostEnvironment::new(vars, PathBuf::from(python))
    }

    #[test]
    fn path_dirs_keep_order_and_skip_empty_entries() {
        let host = host(Some("/a/bin::/b/bin:"), "python3");
        assert_eq!(
            host.path_dirs(),
            vec![PathBuf::from("/a/bin"), PathBuf::from("/b/bin")]
        );
    }

    #[test]
    fn no_path_variable_means_no_directories() {
        assert!(host(None, "python3").path_dirs().is_empty());
    }

    #[test]
    fn python_dir_is_the_written_parent_and_absent_for_a_bare_name() {
        assert_eq!(
            host(None, "/venv/bin/python").python_dir(),
            Some(Path::new("/venv/bin"))
        );
        assert_eq!(host(None, "python3").python_dir(), None);
    }

    #[test]
    fn from_process_reads_the_variables_without_changing_them() {
        let before: BTreeMap<String, String> = std::env::vars().collect();
        let host = HostEnvironment::from_process(PathBuf::from("python3"));
        assert_eq!(host.vars(), &before);
        assert_eq!(host.rocm_bin_dir(), Path::new("/opt/rocm/bin"));
    }
}
