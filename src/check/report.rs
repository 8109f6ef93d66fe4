//! A check's findings: one line each, `ok <what>` or `FAIL <what>: <how to fix>`, printed in
//! order, and as one JSON object with `--json`.

use std::fmt;

use serde::Serialize;
use serde_json::Value;

/// One finding: `ok <what>` or `FAIL <what>: <how to fix>`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CheckLine {
    ok: bool,
    what: String,
    fix: Option<String>,
    /// Whether a failure of this check keeps `kactors run` from starting.
    #[serde(skip)]
    stops_a_run: bool,
}

impl CheckLine {
    pub(crate) fn ok(what: impl Into<String>) -> Self {
        CheckLine {
            ok: true,
            what: what.into(),
            fix: None,
            stops_a_run: false,
        }
    }

    pub(crate) fn fail(what: impl Into<String>, fix: impl Into<String>) -> Self {
        CheckLine {
            ok: false,
            what: what.into(),
            fix: Some(fix.into()),
            stops_a_run: true,
        }
    }

    /// A failed profiler check: a run without a working profiler still verifies and times
    /// candidates, and says why it stopped profiling (issue 4), so it does not stop a run.
    pub(super) fn profiler_fail(what: impl Into<String>, fix: impl Into<String>) -> Self {
        CheckLine::fail(what, fix).without_stopping_a_run()
    }

    /// The same failure, which a run can do without (a profiler, a protection of a sandbox
    /// that is not required).
    pub(super) fn without_stopping_a_run(self) -> Self {
        CheckLine {
            stops_a_run: false,
            ..self
        }
    }

    /// A line another machine made (a node agent's preflight), with the node named first.
    pub(crate) fn on_node(
        node: &str,
        ok: bool,
        what: &str,
        fix: Option<String>,
        stops_a_run: bool,
    ) -> Self {
        CheckLine {
            ok,
            what: format!("node {node}: {what}"),
            fix: if ok {
                None
            } else {
                fix.or_else(|| Some(String::new()))
            },
            stops_a_run,
        }
    }

    pub fn passed(&self) -> bool {
        self.ok
    }

    pub fn what(&self) -> &str {
        &self.what
    }

    pub fn fix(&self) -> Option<&str> {
        self.fix.as_deref()
    }

    /// Failed, and a run cannot go on without it: everything but the profiler.
    pub fn stops_a_run(&self) -> bool {
        !self.ok && self.stops_a_run
    }
}

impl fmt::Display for CheckLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.fix {
            None => write!(f, "ok {}", self.what),
            Some(fix) => write!(f, "FAIL {}: {fix}", self.what),
        }
    }
}

/// Every line of one check, in the order they are printed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckReport {
    lines: Vec<CheckLine>,
    /// What the sandbox probe found, on a GPU platform whose sandbox is not off.
    pub sandbox: Option<crate::sandbox::SandboxReport>,
    /// When the checks began and ended, where this process ran them (not a Slurm agent's).
    pub ran: Option<(std::time::SystemTime, std::time::SystemTime)>,
}

impl CheckReport {
    pub fn lines(&self) -> &[CheckLine] {
        &self.lines
    }

    pub fn passed(&self) -> bool {
        self.lines.iter().all(CheckLine::passed)
    }

    pub fn failures(&self) -> impl Iterator<Item = &CheckLine> {
        self.lines.iter().filter(|line| !line.passed())
    }

    /// `kactors check --json`: `{"ok", "checks": [{"ok", "what", "fix"}]}`.
    pub fn to_json(&self) -> Value {
        serde_json::json!({ "ok": self.passed(), "checks": self.lines })
    }

    pub(crate) fn push(&mut self, line: CheckLine) {
        self.lines.push(line);
    }
}

impl Extend<CheckLine> for CheckReport {
    fn extend<T: IntoIterator<Item = CheckLine>>(&mut self, lines: T) {
        self.lines.extend(lines);
    }
}

impl IntoIterator for CheckReport {
    type Item = CheckLine;
    type IntoIter = std::vec::IntoIter<CheckLine>;

    fn into_iter(self) -> Self::IntoIter {
        self.lines.into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_reads_ok_or_fail_with_its_fix() {
        let ok = CheckLine::ok("triton 3.6.0 imports");
        assert_eq!(ok.to_string(), "ok triton 3.6.0 imports");
        assert!(ok.passed() && !ok.stops_a_run());
        let fail = CheckLine::fail("torch imports", "install torch");
        assert_eq!(fail.to_string(), "FAIL torch imports: install torch");
        assert!(!fail.passed() && fail.stops_a_run());
        let profiler = CheckLine::profiler_fail("profiler ncu", "install Nsight Compute");
        assert!(!profiler.passed());
        assert!(!profiler.stops_a_run(), "a run goes on without profiles");
        let report = CheckReport {
            lines: vec![ok, fail.clone(), profiler],
            ..CheckReport::default()
        };
        assert!(!report.passed());
        assert_eq!(report.failures().count(), 2);
        assert_eq!(
            report.to_json()["checks"][1],
            serde_json::json!({"ok": false, "what": "torch imports", "fix": "install torch"})
        );
        assert_eq!(report.to_json()["ok"], false);
    }
}
