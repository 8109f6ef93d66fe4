//! The environment a child starts with.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::sync::{PoisonError, RwLock};

/// The variable every child of a run carries, set to the run's folder: a resumed run finds by
/// it the children a killed process left, grandchildren included (they inherit it).
pub const RUN_MARKER: &str = "KACTORS_RUN_DIR";

static RUN_DIRECTORY: RwLock<Option<OsString>> = RwLock::new(None);

/// Marks every child this process starts from now on as a child of the run in `root`. `run`
/// and `resume` call it before any child of the run starts; `run --strategy all` once per run,
/// each run's children marked with its own folder.
pub fn mark_children_of_run(root: &Path) {
    *RUN_DIRECTORY
        .write()
        .unwrap_or_else(PoisonError::into_inner) = Some(root.as_os_str().to_owned());
}

/// Words that mark a variable as a credential wherever they appear in its name, compared without
/// regard to case: `OPENAI_API_KEY`, `GITHUB_TOKEN`, `AWS_SECRET_ACCESS_KEY`, `PGPASSWORD`,
/// `GOOGLE_APPLICATION_CREDENTIALS`, `SSH_AUTH_SOCK`, `XAUTHORITY`, `CI_JOB_JWT`.
const CREDENTIAL_WORDS: [&str; 8] = [
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "AUTH",
    "JWT",
];

/// Families of variables that configure access to a cloud account; some members carry secrets
/// under names the words above miss.
const CREDENTIAL_PREFIXES: [&str; 2] = ["AWS_", "AZURE_"];

/// Variables that hold a credential inside a URL or point at a file of passwords.
const CREDENTIAL_NAMES: [&str; 3] = ["DATABASE_URL", "SENTRY_DSN", "NETRC"];

/// The whole environment of a child, already stripped of credentials: only
/// [`child_environment`] makes one, so no child can be started with kactors' own environment,
/// but kactors itself ([`ChildEnv::of_kactors_itself`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildEnv(Vec<(OsString, OsString)>);

impl ChildEnv {
    pub fn vars(&self) -> impl Iterator<Item = (&OsStr, &OsStr)> {
        self.0
            .iter()
            .map(|(name, value)| (name.as_os_str(), value.as_os_str()))
    }

    pub fn get(&self, name: &str) -> Option<&OsStr> {
        self.vars()
            .find(|(candidate, _)| *candidate == name)
            .map(|(_, value)| value)
    }
}

impl ChildEnv {
    /// kactors' own environment, whole, for the one child that may have it: kactors itself (a
    /// `kactors bench`'s runs), which asks the LLM provider with its keys and strips them from
    /// every child of its own by [`child_environment`].
    pub fn of_kactors_itself() -> ChildEnv {
        ChildEnv(std::env::vars_os().collect())
    }
}

/// The environment for a child, made from `parent` (usually `std::env::vars_os()`).
///
/// Children run generated code, which is untrusted: it could read an API key from its
/// environment and send it anywhere. So every variable whose name contains one of the
/// [`CREDENTIAL_WORDS`] (case-insensitive), starts with one of the [`CREDENTIAL_PREFIXES`] or is
/// one of the [`CREDENTIAL_NAMES`] is dropped. The rule errs towards dropping: a variable a
/// child needs and that matches by accident (none of PATH, HOME, LD_LIBRARY_PATH, PYTHONPATH,
/// CUDA_*, HIP_*, ROCR_*, TRITON_* does) can be given back through `set`.
///
/// Then the names in `unset` are removed and `set` is applied, replacing a variable of the same
/// name; this is how a worker pins its device (`CUDA_VISIBLE_DEVICES=2`, and the other vendor's
/// variable unset). What `set` names is kactors' own decision and is never filtered.
pub fn child_environment(
    parent: impl IntoIterator<Item = (OsString, OsString)>,
    set: &BTreeMap<String, String>,
    unset: &[String],
) -> ChildEnv {
    let mut vars: Vec<(OsString, OsString)> = parent
        .into_iter()
        .filter(|(name, _)| !may_carry_credential(name))
        .filter(|(name, _)| !unset.iter().any(|unset_name| name == unset_name.as_str()))
        .collect();
    if let Some(run) = RUN_DIRECTORY
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .as_ref()
    {
        vars.retain(|(name, _)| name != RUN_MARKER);
        vars.push((OsString::from(RUN_MARKER), run.clone()));
    }
    for (name, value) in set {
        match vars
            .iter_mut()
            .find(|(existing, _)| existing == name.as_str())
        {
            Some((_, existing_value)) => *existing_value = OsString::from(value),
            None => vars.push((OsString::from(name), OsString::from(value))),
        }
    }
    ChildEnv(vars)
}

/// Whether a variable of this name may carry a credential, by the rule [`child_environment`]
/// applies: the one definition kactors and its tests share.
pub fn may_carry_credential(name: &OsStr) -> bool {
    let name = name.to_string_lossy().to_ascii_uppercase();
    CREDENTIAL_WORDS.iter().any(|word| name.contains(word))
        || CREDENTIAL_PREFIXES
            .iter()
            .any(|prefix| name.starts_with(prefix))
        || CREDENTIAL_NAMES.contains(&name.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parent(vars: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        vars.iter()
            .map(|(name, value)| (OsString::from(name), OsString::from(value)))
            .collect()
    }

    fn check_kept(name: &str, expected_kept: bool) {
        let environment = child_environment(parent(&[(name, "value")]), &BTreeMap::new(), &[]);
        assert_eq!(environment.get(name).is_some(), expected_kept, "{name}");
    }

    #[test]
    fn credentials_are_dropped_whatever_their_case() {
        for name in [
            "ANTHROPIC_API_KEY",
            "OPENAI_API_KEY",
            "GITHUB_TOKEN",
            "HF_TOKEN",
            "HUGGING_FACE_HUB_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_PROFILE",
            "AZURE_CLIENT_ID",
            "PGPASSWORD",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "SSH_AUTH_SOCK",
            "XAUTHORITY",
            "CI_JOB_JWT",
            "DATABASE_URL",
            "SENTRY_DSN",
            "NETRC",
            "my_secret",
            "openai_api_key",
        ] {
            check_kept(name, false);
        }
    }

    #[test]
    fn what_a_gpu_child_needs_is_kept() {
        for name in [
            "PATH",
            "HOME",
            "LD_LIBRARY_PATH",
            "PYTHONPATH",
            "CUDA_HOME",
            "CUDA_VISIBLE_DEVICES",
            "HIP_VISIBLE_DEVICES",
            "ROCR_VISIBLE_DEVICES",
            "TRITON_CACHE_DIR",
            "TMPDIR",
            "LANG",
        ] {
            check_kept(name, true);
        }
    }

    #[test]
    fn the_device_pin_replaces_and_removes_variables_and_keeps_the_parents_order() {
        let set = BTreeMap::from([
            ("CUDA_VISIBLE_DEVICES".to_string(), "2".to_string()),
            ("KACTORS_DEVICE".to_string(), "2".to_string()),
        ]);
        let unset = ["ROCR_VISIBLE_DEVICES".to_string()];
        let environment = child_environment(
            parent(&[
                ("PATH", "/bin"),
                ("CUDA_VISIBLE_DEVICES", "0,1,2,3"),
                ("ROCR_VISIBLE_DEVICES", "0"),
                ("HOME", "/h"),
            ]),
            &set,
            &unset,
        );
        let expected = parent(&[
            ("PATH", "/bin"),
            ("CUDA_VISIBLE_DEVICES", "2"),
            ("HOME", "/h"),
            ("KACTORS_DEVICE", "2"),
        ]);
        assert_eq!(environment, ChildEnv(expected));
    }
}
