//! What a sandbox was given, mechanism by mechanism, and what that means for the four
//! protections the user is promised: credentials, network, filesystem and limits.

use std::fmt;

use serde::{Deserialize, Serialize};

/// `sandbox:` in a strategy: how much of the sandbox a run insists on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxSetting {
    /// Every protection, or the run is refused (exit 2).
    #[default]
    Required,
    /// What the machine offers; the run says once what is missing.
    BestEffort,
    /// No sandbox: candidates run with the user's rights; the run says so once.
    Off,
}

impl SandboxSetting {
    pub const ACCEPTED: &'static str = "required, best_effort or off";

    pub fn parse(text: &str) -> Option<SandboxSetting> {
        match text {
            "required" => Some(SandboxSetting::Required),
            "best_effort" => Some(SandboxSetting::BestEffort),
            "off" => Some(SandboxSetting::Off),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SandboxSetting::Required => "required",
            SandboxSetting::BestEffort => "best_effort",
            SandboxSetting::Off => "off",
        }
    }
}

/// One thing the launcher sets up. Each is tried in the order listed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mechanism {
    /// `PR_SET_NO_NEW_PRIVS`: no setuid binary gives the candidate more rights.
    NoNewPrivs,
    /// A user namespace: what the other namespaces need without root.
    UserNamespace,
    /// A PID namespace with its own /proc: the processes outside are not there to read.
    PidNamespace,
    /// A network namespace: loopback only, and down.
    NetworkNamespace,
    /// A mount namespace: the scratch folder (TMPDIR) and /dev/shm in a bounded tmpfs, and
    /// /run/user, where the user's sockets live, hidden.
    Scratch,
    /// Landlock: reads everywhere, writes only in the sandbox's folders, no TCP.
    Landlock,
    /// seccomp: no AF_INET or AF_INET6 socket, no io_uring (which would bypass the filter).
    Seccomp,
    /// A bound on the processes and threads (the namespace's pid_max, else RLIMIT_NPROC).
    TaskLimit,
    /// RLIMIT_FSIZE (SIGXFSZ ignored, so an oversized write fails with EFBIG) and no cores.
    FileSizeLimit,
}

impl Mechanism {
    pub const ALL: [Mechanism; 9] = [
        Mechanism::NoNewPrivs,
        Mechanism::UserNamespace,
        Mechanism::PidNamespace,
        Mechanism::NetworkNamespace,
        Mechanism::Scratch,
        Mechanism::Landlock,
        Mechanism::Seccomp,
        Mechanism::TaskLimit,
        Mechanism::FileSizeLimit,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Mechanism::NoNewPrivs => "no_new_privs",
            Mechanism::UserNamespace => "user namespace",
            Mechanism::PidNamespace => "pid namespace",
            Mechanism::NetworkNamespace => "network namespace",
            Mechanism::Scratch => "bounded scratch",
            Mechanism::Landlock => "landlock",
            Mechanism::Seccomp => "seccomp",
            Mechanism::TaskLimit => "task limit",
            Mechanism::FileSizeLimit => "file size limit",
        }
    }
}

/// How one mechanism went: what it gave (`detail`), or why it could not be had.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Step {
    pub mechanism: Mechanism,
    pub ok: bool,
    pub detail: String,
}

/// The four promises of issue 19.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Protection {
    /// No other process's /proc/<pid>/environ or cmdline is readable.
    Credentials,
    /// No TCP or UDP socket reaches anything.
    Network,
    /// Writes only in the sandbox's own folders.
    Filesystem,
    /// Bounded processes, file sizes and scratch bytes; no new privileges.
    Limits,
}

impl Protection {
    pub const ALL: [Protection; 4] = [
        Protection::Credentials,
        Protection::Network,
        Protection::Filesystem,
        Protection::Limits,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Protection::Credentials => "credentials",
            Protection::Network => "network",
            Protection::Filesystem => "filesystem",
            Protection::Limits => "limits",
        }
    }

    /// Which mechanisms this protection takes: every one of `all`, and one of `any` when that
    /// is not empty.
    fn needs(self) -> (&'static [Mechanism], &'static [Mechanism]) {
        match self {
            Protection::Credentials => (&[Mechanism::UserNamespace, Mechanism::PidNamespace], &[]),
            Protection::Network => (&[], &[Mechanism::NetworkNamespace, Mechanism::Seccomp]),
            Protection::Filesystem => (&[Mechanism::Landlock], &[]),
            Protection::Limits => (
                &[
                    Mechanism::NoNewPrivs,
                    Mechanism::Scratch,
                    Mechanism::TaskLimit,
                    Mechanism::FileSizeLimit,
                ],
                &[],
            ),
        }
    }
}

/// One protection as a sandbox had it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProtectionState {
    pub protection: Protection,
    pub available: bool,
    /// The mechanisms that give it, or why it is missing.
    pub detail: String,
}

/// What a sandbox set up: every mechanism's step, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxReport {
    pub steps: Vec<Step>,
}

impl SandboxReport {
    pub fn record(&mut self, mechanism: Mechanism, outcome: Result<String, String>) {
        let (ok, detail) = match outcome {
            Ok(detail) => (true, detail),
            Err(reason) => (false, reason),
        };
        self.steps.retain(|step| step.mechanism != mechanism);
        self.steps.push(Step {
            mechanism,
            ok,
            detail,
        });
    }

    pub fn step(&self, mechanism: Mechanism) -> Option<&Step> {
        self.steps.iter().find(|step| step.mechanism == mechanism)
    }

    fn has(&self, mechanism: Mechanism) -> bool {
        self.step(mechanism).is_some_and(|step| step.ok)
    }

    fn why_not(&self, mechanism: Mechanism) -> String {
        match self.step(mechanism) {
            Some(step) if !step.ok => format!("{}: {}", mechanism.name(), step.detail),
            _ => format!("{}: not tried", mechanism.name()),
        }
    }

    pub fn protection(&self, protection: Protection) -> ProtectionState {
        let (all, any) = protection.needs();
        let mut missing: Vec<String> = all
            .iter()
            .filter(|mechanism| !self.has(**mechanism))
            .map(|mechanism| self.why_not(*mechanism))
            .collect();
        if !any.is_empty() && !any.iter().any(|mechanism| self.has(*mechanism)) {
            missing.push(
                any.iter()
                    .map(|mechanism| self.why_not(*mechanism))
                    .collect::<Vec<_>>()
                    .join(", and "),
            );
        }
        let detail = if missing.is_empty() {
            all.iter()
                .chain(any.iter())
                .filter(|mechanism| self.has(**mechanism))
                .map(|mechanism| {
                    let step = self.step(*mechanism).expect("has() found the step");
                    format!("{} ({})", mechanism.name(), step.detail)
                })
                .collect::<Vec<_>>()
                .join(", ")
        } else {
            missing.join("; ")
        };
        ProtectionState {
            protection,
            available: missing.is_empty(),
            detail,
        }
    }

    pub fn protections(&self) -> Vec<ProtectionState> {
        Protection::ALL
            .iter()
            .map(|protection| self.protection(*protection))
            .collect()
    }

    pub fn missing(&self) -> Vec<ProtectionState> {
        self.protections()
            .into_iter()
            .filter(|state| !state.available)
            .collect()
    }

    pub fn is_complete(&self) -> bool {
        self.missing().is_empty()
    }
}

impl fmt::Display for ProtectionState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = if self.available {
            "available"
        } else {
            "missing"
        };
        write!(f, "{}: {state}: {}", self.protection.name(), self.detail)
    }
}

/// Why a run with `sandbox: required` does not start, naming what is missing and the settings
/// that would let it.
pub fn refusal(report: &SandboxReport) -> Option<String> {
    let missing = report.missing();
    if missing.is_empty() {
        return None;
    }
    let listed: Vec<String> = missing.iter().map(ToString::to_string).collect();
    Some(format!(
        "the sandbox for candidate code is incomplete on this machine ({}); set `sandbox: \
         best_effort` in the strategy to run with the protections it has, or `sandbox: off` to \
         run candidates with your own rights (SECURITY.md says what each protects)",
        listed.join("; ")
    ))
}

/// The one line a run with an incomplete or no sandbox prints at start.
pub fn warning(setting: SandboxSetting, report: Option<&SandboxReport>) -> Option<String> {
    match (setting, report) {
        (SandboxSetting::Off, _) => Some(
            "warning: sandbox: off: candidate code runs with your rights, your network and your \
             files"
                .into(),
        ),
        (SandboxSetting::BestEffort, Some(report)) if !report.is_complete() => {
            let missing: Vec<String> = report.missing().iter().map(ToString::to_string).collect();
            Some(format!(
                "warning: sandbox: best_effort: candidates run without {}",
                missing.join("; ")
            ))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(failing: &[Mechanism]) -> SandboxReport {
        let mut report = SandboxReport::default();
        for mechanism in Mechanism::ALL {
            let outcome = if failing.contains(&mechanism) {
                Err("Operation not permitted".to_string())
            } else {
                Ok("on".to_string())
            };
            report.record(mechanism, outcome);
        }
        report
    }

    #[test]
    fn every_mechanism_gives_every_protection() {
        let report = report(&[]);
        assert!(report.is_complete());
        assert_eq!(refusal(&report), None);
        assert_eq!(warning(SandboxSetting::Required, Some(&report)), None);
        assert_eq!(warning(SandboxSetting::BestEffort, Some(&report)), None);
    }

    #[test]
    fn without_user_namespaces_credentials_and_limits_are_missing_and_network_falls_back_to_seccomp()
     {
        let report = report(&[
            Mechanism::UserNamespace,
            Mechanism::PidNamespace,
            Mechanism::NetworkNamespace,
            Mechanism::Scratch,
        ]);
        let states = report.protections();
        let line = |protection: Protection| {
            states
                .iter()
                .find(|state| state.protection == protection)
                .unwrap()
                .to_string()
        };
        assert_eq!(
            line(Protection::Credentials),
            "credentials: missing: user namespace: Operation not permitted; pid namespace: \
             Operation not permitted"
        );
        assert_eq!(
            line(Protection::Network),
            "network: available: seccomp (on)"
        );
        assert_eq!(
            line(Protection::Filesystem),
            "filesystem: available: landlock (on)"
        );
        assert!(line(Protection::Limits).starts_with("limits: missing: bounded scratch"));
    }

    #[test]
    fn network_is_missing_only_when_both_of_its_mechanisms_are() {
        let report = report(&[Mechanism::NetworkNamespace, Mechanism::Seccomp]);
        let network = report.protection(Protection::Network);
        assert!(!network.available);
        assert_eq!(
            network.detail,
            "network namespace: Operation not permitted, and seccomp: Operation not permitted"
        );
    }

    #[test]
    fn the_refusal_names_what_is_missing_and_the_settings_that_allow_it() {
        let refusal = refusal(&report(&[Mechanism::Landlock])).unwrap();
        assert!(
            refusal.contains("filesystem: missing: landlock: Operation not permitted"),
            "{refusal}"
        );
        assert!(refusal.contains("`sandbox: best_effort`"), "{refusal}");
        assert!(refusal.contains("`sandbox: off`"), "{refusal}");
    }

    #[test]
    fn best_effort_and_off_each_warn_once_with_what_candidates_run_without() {
        let partial = report(&[Mechanism::Seccomp, Mechanism::NetworkNamespace]);
        let warned = warning(SandboxSetting::BestEffort, Some(&partial)).unwrap();
        assert!(warned.contains("network: missing"), "{warned}");
        assert!(
            warning(SandboxSetting::Off, None)
                .unwrap()
                .contains("sandbox: off")
        );
    }

    #[test]
    fn the_setting_parses_its_three_names_only() {
        for setting in [
            SandboxSetting::Required,
            SandboxSetting::BestEffort,
            SandboxSetting::Off,
        ] {
            assert_eq!(SandboxSetting::parse(setting.name()), Some(setting));
        }
        assert_eq!(SandboxSetting::parse("yes"), None);
    }
}
