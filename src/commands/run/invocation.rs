//! What `kactors run` was asked and what it found, as run.yaml keeps them for `kactors resume`:
//! the invocation (strategy, folders, devices, the command line's overrides), the settings it
//! resolved to, and the kernel directory's files by hash. A resume resolves the same
//! invocation again and goes on only if the settings and the kernel are as they were.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::cli::{ConfigDirArg, RunArgs};
use crate::config::{CliOverrides, RunSettings};

use super::super::CommandError;

/// The keys run.yaml adds to the settings: what is not compared when a run is resumed.
const PROVENANCE: &str = "provenance";
const INVOCATION: &str = "invocation";
const KERNEL: &str = "kernel";

/// The files of a kernel directory a run depends on.
const KERNEL_FILES: [&str; 3] = ["input.py", "problem.py", "test.py"];

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Invocation {
    /// The folder `kactors run` was started in: the paths below, and those of the strategy,
    /// are as the user wrote them, relative to it.
    pub working_dir: PathBuf,
    pub strategy: String,
    /// As `--config-dir` or KACTORS_CONFIG_DIR named it.
    pub config_dir: Option<PathBuf>,
    pub kernel_dir: PathBuf,
    pub gpus: Option<Vec<u32>>,
    pub overrides: CliOverrides,
}

impl Invocation {
    pub fn of(args: &RunArgs) -> Result<Invocation, CommandError> {
        let working_dir = std::env::current_dir().map_err(|error| {
            CommandError::Environment(format!("failed to read the working directory: {error}"))
        })?;
        Ok(Invocation {
            working_dir,
            strategy: args.strategy.clone(),
            config_dir: args.config_dir.config_dir.clone(),
            kernel_dir: args.kernel_dir.clone(),
            gpus: args.gpus.clone(),
            overrides: CliOverrides {
                workers: args.workers,
                max_rounds: args.max_rounds,
                max_time: args.max_time.clone(),
                max_candidates: args.max_candidates,
                provider: args.provider.clone(),
                model: args.model.clone(),
                python: args.python.clone(),
                generate: args.generate,
            },
        })
    }

    /// Goes back to the folder the run was started in, so that every path resolves as it did.
    pub fn enter_working_dir(&self) -> Result<(), CommandError> {
        std::env::set_current_dir(&self.working_dir).map_err(|error| {
            CommandError::Environment(format!(
                "cannot resume in {}, the folder the run was started in: {error}",
                self.working_dir.display()
            ))
        })
    }

    pub fn config_dir(&self) -> ConfigDirArg {
        ConfigDirArg {
            config_dir: self.config_dir.clone(),
        }
    }
}

/// The kernel directory's files by SHA-256, `None` for one that is not there.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub(crate) struct KernelFingerprint(BTreeMap<String, Option<String>>);

impl KernelFingerprint {
    pub fn of(kernel_dir: &Path) -> KernelFingerprint {
        KernelFingerprint(
            KERNEL_FILES
                .into_iter()
                .map(|name| {
                    let hash = crate::kernel_dir::read_kernel_file(&kernel_dir.join(name))
                        .ok()
                        .map(|bytes| actors::journal::sha256_hex(&String::from_utf8_lossy(&bytes)));
                    (name.to_string(), hash)
                })
                .collect(),
        )
    }

    /// What changed since `recorded`, one phrase per file: `problem.py changed`.
    pub fn changes_since(&self, recorded: &KernelFingerprint) -> Vec<String> {
        let names: std::collections::BTreeSet<&String> =
            recorded.0.keys().chain(self.0.keys()).collect();
        names
            .into_iter()
            .filter_map(|name| {
                let (was, now) = (
                    recorded.0.get(name).cloned().flatten(),
                    self.0.get(name).cloned().flatten(),
                );
                match (was, now) {
                    (Some(was), Some(now)) if was != now => Some(format!("{name} changed")),
                    (Some(_), None) => Some(format!("{name} is gone")),
                    (None, Some(_)) => Some(format!("{name} appeared")),
                    _ => None,
                }
            })
            .collect()
    }
}

/// run.yaml: the resolved settings, then how the run was asked for, the kernel's files by hash,
/// and what the machine was when the run started (the preflight's lines, with Python, torch,
/// triton and the profiler's versions; the GPUs' clocks, power and the other processes on them).
pub(crate) fn run_yaml(
    settings: &RunSettings,
    invocation: &Invocation,
    kernel: &KernelFingerprint,
    preflight: &crate::check::CheckReport,
    gpus: &crate::devices::GpuState,
) -> String {
    let mut document = serde_yaml::to_value(settings).expect("run settings serialise to YAML");
    let checks: Vec<String> = preflight.lines().iter().map(ToString::to_string).collect();
    let provenance = serde_yaml::to_value(serde_json::json!({ "preflight": checks, "gpus": gpus }))
        .expect("the provenance serialises to YAML");
    if let serde_yaml::Value::Mapping(mapping) = &mut document {
        for (key, value) in [
            (INVOCATION, serde_yaml::to_value(invocation)),
            (KERNEL, serde_yaml::to_value(kernel)),
            (PROVENANCE, Ok(provenance)),
        ] {
            mapping.insert(
                key.into(),
                value.expect("run.yaml's parts serialise to YAML"),
            );
        }
    }
    serde_yaml::to_string(&document).expect("run.yaml serialises")
}

/// A run's run.yaml read back.
#[derive(Debug)]
pub(crate) struct RecordedRun {
    pub invocation: Invocation,
    pub kernel: KernelFingerprint,
    /// The settings as resolved when the run started, provenance and the rest left out.
    pub settings: serde_yaml::Value,
}

impl RecordedRun {
    pub fn read(root: &Path) -> Result<RecordedRun, CommandError> {
        let path = root.join("run.yaml");
        let unreadable = |why: String| {
            CommandError::Environment(format!("cannot resume from {}: {why}", path.display()))
        };
        let text = crate::user_file::read_text(&path, crate::user_file::MAX_SETTINGS_BYTES)
            .map_err(|error| unreadable(error.to_string()))?;
        let mut document: serde_yaml::Value =
            serde_yaml::from_str(&text).map_err(|error| unreadable(error.to_string()))?;
        let serde_yaml::Value::Mapping(mapping) = &mut document else {
            return Err(unreadable("it is not a mapping of settings".into()));
        };
        mapping.remove(PROVENANCE);
        let mut take = |key: &str| {
            mapping.remove(key).ok_or_else(|| {
                unreadable(format!(
                    "it has no `{key}` (the run was made by a kactors without resume)"
                ))
            })
        };
        let (invocation, kernel) = (take(INVOCATION)?, take(KERNEL)?);
        Ok(RecordedRun {
            invocation: serde_yaml::from_value(invocation)
                .map_err(|error| unreadable(format!("its `invocation` is not one: {error}")))?,
            kernel: serde_yaml::from_value(kernel)
                .map_err(|error| unreadable(format!("its `kernel` is not one: {error}")))?,
            settings: document,
        })
    }
}

/// Where `now` differs from `recorded`, one line per setting: `max_rounds: 3, now 5`. run.yaml
/// holds every setting resolved, so a top-level setting it lacks is one the kactors that
/// started the run did not have (`overlap_rounds`, say): the run goes on with its value now,
/// and that is no change. Inside a setting (strategy_config, platform_kwargs) an absent key is
/// the user's doing, and named.
pub(crate) fn settings_changes(
    recorded: &serde_yaml::Value,
    now: &serde_yaml::Value,
) -> Vec<String> {
    let mut changes = Vec::new();
    match (recorded, now) {
        (serde_yaml::Value::Mapping(was), serde_yaml::Value::Mapping(now)) => {
            let recorded_too = |key: &&serde_yaml::Value| was.contains_key(*key);
            let kept: serde_yaml::Mapping = now
                .iter()
                .filter(|(key, _)| recorded_too(key))
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect();
            compare(
                "",
                recorded,
                &serde_yaml::Value::Mapping(kept),
                &mut changes,
            );
        }
        _ => compare("", recorded, now, &mut changes),
    }
    changes
}

fn compare(path: &str, was: &serde_yaml::Value, now: &serde_yaml::Value, out: &mut Vec<String>) {
    use serde_yaml::Value;
    if let (Value::Mapping(was), Value::Mapping(now)) = (was, now) {
        let mut keys: Vec<&Value> = was.keys().collect();
        keys.extend(now.keys().filter(|key| !was.contains_key(*key)));
        for key in keys {
            let name = match key {
                Value::String(name) => name.clone(),
                other => one_line(other),
            };
            let path = if path.is_empty() {
                name
            } else {
                format!("{path}.{name}")
            };
            let (was, now) = (
                was.get(key).unwrap_or(&Value::Null),
                now.get(key).unwrap_or(&Value::Null),
            );
            compare(&path, was, now, out);
        }
    } else if was != now {
        out.push(format!("{path}: {}, now {}", one_line(was), one_line(now)));
    }
}

fn one_line(value: &serde_yaml::Value) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "?".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yaml(text: &str) -> serde_yaml::Value {
        serde_yaml::from_str(text).unwrap()
    }

    #[test]
    fn a_changed_setting_is_named_with_both_values() {
        let recorded = yaml("max_rounds: 3\nsearch:\n  kind: beam\n  n: 2\nllm:\n  model: a\n");
        let now =
            yaml("max_rounds: 5\nsearch:\n  kind: beam\n  n: 4\n  extra: 2\nllm:\n  model: a\n");
        assert_eq!(
            settings_changes(&recorded, &now),
            [
                "max_rounds: 3, now 5",
                "search.n: 2, now 4",
                "search.extra: null, now 2"
            ]
        );
        assert!(settings_changes(&recorded, &recorded).is_empty());
    }

    /// A run started by a kactors without a setting (overlap_rounds came later) resumes with
    /// the setting's value now: its run.yaml, every setting resolved, lacks only such ones.
    #[test]
    fn a_setting_newer_than_the_run_is_no_change() {
        let recorded = yaml("max_rounds: 3\n");
        let now = yaml("max_rounds: 3\noverlap_rounds: true\n");
        assert!(settings_changes(&recorded, &now).is_empty());
    }

    #[test]
    fn a_kernel_file_that_changed_appeared_or_went_is_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("input.py"), "a").unwrap();
        std::fs::write(dir.path().join("problem.py"), "b").unwrap();
        let recorded = KernelFingerprint::of(dir.path());
        assert!(
            KernelFingerprint::of(dir.path())
                .changes_since(&recorded)
                .is_empty()
        );
        std::fs::write(dir.path().join("input.py"), "a2").unwrap();
        std::fs::remove_file(dir.path().join("problem.py")).unwrap();
        std::fs::write(dir.path().join("test.py"), "c").unwrap();
        assert_eq!(
            KernelFingerprint::of(dir.path()).changes_since(&recorded),
            ["input.py changed", "problem.py is gone", "test.py appeared"]
        );
    }
}
