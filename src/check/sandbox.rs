//! The sandbox's lines (issue 19): one per protection, available or missing and why. A missing
//! protection stops a run only with `sandbox: required`.

use crate::sandbox::{SandboxReport, SandboxSetting, probe};

use super::report::CheckLine;

const FIX: &str = "set `sandbox: best_effort` in the strategy to run without it, or `sandbox: \
                   off` to run candidates with your own rights (SECURITY.md says what each \
                   protection covers)";

const BEST_EFFORT: &str = "candidates run without it (`sandbox: best_effort`)";

/// The lines, and what the probe found (None when the sandbox is off or the probe failed).
pub fn sandbox_check(setting: SandboxSetting) -> (Vec<CheckLine>, Option<SandboxReport>) {
    if setting == SandboxSetting::Off {
        return (
            vec![CheckLine::ok(
                "sandbox: off: candidate code runs with your rights, network and files",
            )],
            None,
        );
    }
    let probed = std::env::current_exe()
        .map_err(|error| format!("cannot find the kactors executable to launch it: {error}"))
        .and_then(|launcher| probe(&launcher));
    match probed {
        Ok(report) => (lines(setting, &report), Some(report)),
        Err(error) => {
            let line = CheckLine::fail("sandbox", format!("{error}; {FIX}"));
            let line = if setting == SandboxSetting::Required {
                line
            } else {
                line.without_stopping_a_run()
            };
            (vec![line], None)
        }
    }
}

/// One line per protection of `report`, under `setting`.
pub fn lines(setting: SandboxSetting, report: &SandboxReport) -> Vec<CheckLine> {
    report
        .protections()
        .into_iter()
        .map(|state| {
            let what = format!("sandbox {}", state.protection.name());
            if state.available {
                CheckLine::ok(format!("{what}: {}", state.detail))
            } else {
                let what = format!("{what}: missing: {}", state.detail);
                if setting == SandboxSetting::Required {
                    CheckLine::fail(what, FIX)
                } else {
                    CheckLine::fail(what, BEST_EFFORT).without_stopping_a_run()
                }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::Mechanism;

    fn report_without(missing: &[Mechanism]) -> SandboxReport {
        let mut report = SandboxReport::default();
        for mechanism in Mechanism::ALL {
            report.record(
                mechanism,
                if missing.contains(&mechanism) {
                    Err("unshare: Operation not permitted".into())
                } else {
                    Ok("on".into())
                },
            );
        }
        report
    }

    #[test]
    fn check_prints_one_line_per_protection_and_a_missing_one_says_why_and_what_allows_a_run() {
        let report = report_without(&[Mechanism::UserNamespace, Mechanism::PidNamespace]);
        let printed: Vec<String> = lines(SandboxSetting::Required, &report)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(printed.len(), 4, "{printed:#?}");
        assert_eq!(
            printed[0],
            format!(
                "FAIL sandbox credentials: missing: user namespace: unshare: Operation not \
                 permitted; pid namespace: unshare: Operation not permitted: {FIX}"
            )
        );
        assert!(
            printed[1].starts_with("ok sandbox network: "),
            "{printed:#?}"
        );
        assert!(
            printed[2].starts_with("ok sandbox filesystem: landlock"),
            "{printed:#?}"
        );
    }

    #[test]
    fn a_missing_protection_stops_a_run_only_when_the_sandbox_is_required() {
        let report = report_without(&[Mechanism::Landlock]);
        let stops = |setting| lines(setting, &report).iter().any(CheckLine::stops_a_run);
        assert!(stops(SandboxSetting::Required));
        assert!(!stops(SandboxSetting::BestEffort));
        let (off, probed) = sandbox_check(SandboxSetting::Off);
        assert_eq!(probed, None);
        assert!(off.iter().all(CheckLine::passed));
    }
}
