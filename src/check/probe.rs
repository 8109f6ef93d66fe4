//! One question to a child process (the configured Python running templates/check_probe.py, or
//! a profiler's own command line): spawned through `crate::process` in a folder of its own
//! under a scratch folder, ended with its whole group past its deadline, and its output read
//! back.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::devices::Pin;
use crate::process::{
    ChildEnv, Protocol, WaitOutcome, child_environment, spawn, wait_or_terminate,
};
use crate::profiling::error_chain;

use super::report::CheckLine;

/// Importing torch from a cold disk and initialising a GPU's context can take tens of seconds.
const PYTHON_TIMEOUT: Duration = Duration::from_secs(120);
/// `ncu --version`, `rocprofv3 --help`, `--version` and `-L` answer in seconds.
const PROFILER_TIMEOUT: Duration = Duration::from_secs(60);
/// The line of a check script's output that carries its answer, as JSON.
const ANSWER_PREFIX: &str = "KACTORS_CHECK ";
/// The questions kactors asks the configured Python, one per mode (`python -c SCRIPT MODE`).
/// Each prints one `KACTORS_CHECK {json}` line; a failure inside is part of the answer.
const CHECK_SCRIPT: &str = include_str!("../../templates/check_probe.py");

/// A field of an answer as a line shows it: a string as it is, nothing as `unknown`.
pub(super) fn text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => "unknown".to_string(),
        other => other.to_string(),
    }
}

/// One question to a child process.
pub(super) struct Probe {
    label: String,
    program: PathBuf,
    args: Vec<OsString>,
    /// Set in the child's environment, under the pin.
    extra: Vec<(&'static str, &'static str)>,
    pin: Option<Pin>,
    timeout: Duration,
}

impl Probe {
    /// The check script in `mode` (with its arguments), under `pin` when it asks about a device.
    pub(super) fn python(python: &Path, mode: &[&str], pin: Option<&Pin>, label: &str) -> Probe {
        let mut args: Vec<OsString> = vec!["-c".into(), CHECK_SCRIPT.into()];
        args.extend(mode.iter().map(OsString::from));
        let mut probe = Probe::tool(python, &[], pin, label);
        probe.args = args;
        probe.extra.push(("PYTHONDONTWRITEBYTECODE", "1"));
        probe.timeout = PYTHON_TIMEOUT;
        probe
    }

    pub(super) fn tool(program: &Path, args: &[&str], pin: Option<&Pin>, label: &str) -> Probe {
        Probe {
            label: label.to_string(),
            program: program.to_path_buf(),
            args: args.iter().map(OsString::from).collect(),
            extra: Vec::new(),
            pin: pin.cloned(),
            timeout: PROFILER_TIMEOUT,
        }
    }

    /// The probe's environment: `parent` without credentials, its extra variables, its pin.
    fn environment(&self, parent: &[(OsString, OsString)]) -> ChildEnv {
        let parent = parent.iter().cloned();
        match &self.pin {
            Some(pin) => pin.child_environment(parent, &self.extra),
            None => {
                let set: BTreeMap<String, String> = self
                    .extra
                    .iter()
                    .map(|(name, value)| (name.to_string(), value.to_string()))
                    .collect();
                child_environment(parent, &set, &[])
            }
        }
    }
}

/// How a probe ended: its exit code (`None` after a signal) and its stdout and stderr together.
pub(super) struct ProbeRun {
    label: String,
    exit: Option<i32>,
    output: String,
}

impl ProbeRun {
    /// The output of a run that exited 0.
    pub(super) fn succeeded(self, command: &str) -> Result<String, String> {
        match self.exit {
            Some(0) => Ok(self.output),
            Some(code) => Err(format!(
                "`{command}` exited with status {code}{}",
                tail_of(&self.output)
            )),
            None => Err(format!(
                "`{command}` was ended by a signal{}",
                tail_of(&self.output)
            )),
        }
    }

    /// The check script's answer: its last `KACTORS_CHECK` line.
    pub(super) fn answer(self) -> Result<Value, String> {
        let line = self
            .output
            .lines()
            .rev()
            .find_map(|line| line.strip_prefix(ANSWER_PREFIX));
        match line {
            Some(json) => serde_json::from_str(json)
                .map_err(|error| format!("{} answered with malformed JSON: {error}", self.label)),
            None => Err(format!(
                "the {} ended ({}) without an answer{}",
                self.label,
                match self.exit {
                    Some(code) => format!("exit status {code}"),
                    None => "by a signal".to_string(),
                },
                tail_of(&self.output)
            )),
        }
    }
}

/// `; its output ends: a | b | c`, from the last non-empty lines; empty without output.
fn tail_of(output: &str) -> String {
    const LINES: usize = 4;
    let lines: Vec<&str> = output
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect();
    if lines.is_empty() {
        return String::new();
    }
    format!(
        "; its output ends: {}",
        lines[lines.len().saturating_sub(LINES)..].join(" | ")
    )
}

/// Runs probes as children, each in a folder of its own in the scratch folder.
pub(super) struct ProbeRunner<'a> {
    scratch: &'a Path,
    parent_env: Vec<(OsString, OsString)>,
    /// Between SIGTERM and SIGKILL to a probe past its deadline.
    grace: Duration,
    next: Cell<u32>,
}

impl<'a> ProbeRunner<'a> {
    /// Probes in folders under `scratch`, their environments made from `parent_env`, each
    /// given `grace` between SIGTERM and SIGKILL past its deadline.
    pub(super) fn new(
        scratch: &'a Path,
        parent_env: Vec<(OsString, OsString)>,
        grace: Duration,
    ) -> ProbeRunner<'a> {
        ProbeRunner {
            scratch,
            parent_env,
            grace,
            next: Cell::new(0),
        }
    }

    pub(super) async fn run(&self, probe: Probe) -> Result<ProbeRun, String> {
        let number = self.next.get();
        self.next.set(number + 1);
        let dir = self.scratch.join(format!("{number:02}"));
        std::fs::create_dir(&dir)
            .map_err(|error| format!("error creating {}: {error}", dir.display()))?;
        let spec = crate::process::ChildSpec {
            program: probe.program.clone(),
            env: probe.environment(&self.parent_env),
            args: probe.args,
            cwd: dir.clone(),
            log_path: dir.join("output.log"),
            protocol: Protocol::None,
            label: probe.label.clone(),
        };
        let mut child = spawn(&spec).map_err(|error| error_chain(&error))?;
        let outcome = wait_or_terminate(&mut child, probe.timeout, self.grace)
            .await
            .map_err(|error| format!("error waiting for the {}: {error}", probe.label))?;
        let exit = match outcome {
            WaitOutcome::Exited(status) => status.code(),
            WaitOutcome::PastDeadline(_termination) => {
                return Err(format!(
                    "the {} ({}) did not finish within {:.1} s and was stopped",
                    probe.label,
                    probe.program.display(),
                    probe.timeout.as_secs_f64()
                ));
            }
        };
        // Dropping the child ends whatever of its group is left.
        drop(child);
        let output = tokio::fs::read(&spec.log_path)
            .await
            .map_err(|error| format!("error reading {}: {error}", spec.log_path.display()))?;
        Ok(ProbeRun {
            label: probe.label,
            exit,
            output: String::from_utf8_lossy(&output).into_owned(),
        })
    }

    /// The answer of a check script about one thing, `what`; or its failed line when the script
    /// gave no answer, or answered with an `error`, which `error_fix` words.
    pub(super) async fn answer_about(
        &self,
        probe: Probe,
        what: &str,
        error_fix: impl FnOnce(&str) -> String,
    ) -> Result<Value, CheckLine> {
        let answer = self
            .run(probe)
            .await
            .and_then(ProbeRun::answer)
            .map_err(|reason| CheckLine::fail(what, reason))?;
        match answer["error"].as_str() {
            Some(error) => Err(CheckLine::fail(what, error_fix(error))),
            None => Ok(answer),
        }
    }
}

/// A folder of the checks' own under the system's temporary folder, removed when dropped.
pub(super) struct Scratch {
    path: PathBuf,
}

impl Scratch {
    pub(super) fn create() -> std::io::Result<Scratch> {
        let base = std::env::temp_dir();
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.subsec_nanos());
        for attempt in 0..100u32 {
            let path = base.join(format!(
                "kactors-check-{}-{stamp}-{attempt}",
                std::process::id()
            ));
            match std::fs::create_dir(&path) {
                Ok(()) => return Ok(Scratch { path }),
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(error) => return Err(error),
            }
        }
        Err(std::io::Error::other(format!(
            "100 folders named kactors-check-{}-{stamp}-* exist in {}",
            std::process::id(),
            base.display()
        )))
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use nix::unistd::Pid;

    use super::*;
    use crate::process::test_support::is_running;

    #[test]
    fn a_check_script_answers_on_its_last_marked_line() {
        let run = |exit, output: &str| ProbeRun {
            label: "device 0 check".to_string(),
            exit,
            output: output.to_string(),
        };
        let answer = run(
            Some(0),
            "a warning from torch\nKACTORS_CHECK {\"count\": 2}\nKACTORS_CHECK {\"count\": 1}\n",
        )
        .answer()
        .unwrap();
        assert_eq!(answer["count"], 1);
        let error = run(Some(1), "Traceback\n  File x\nSyntaxError: bad\n")
            .answer()
            .unwrap_err();
        assert_eq!(
            error,
            "the device 0 check ended (exit status 1) without an answer; its output ends: \
             Traceback | File x | SyntaxError: bad"
        );
        let malformed = run(Some(0), "KACTORS_CHECK {\n").answer().unwrap_err();
        assert!(malformed.starts_with("device 0 check answered with malformed JSON"));
        assert_eq!(
            run(Some(0), "Version 1\n")
                .succeeded("ncu --version")
                .unwrap(),
            "Version 1\n"
        );
        assert_eq!(
            run(Some(2), "").succeeded("ncu --version").unwrap_err(),
            "`ncu --version` exited with status 2"
        );
        assert_eq!(
            run(None, "killed\n").succeeded("rocprofv3 -L").unwrap_err(),
            "`rocprofv3 -L` was ended by a signal; its output ends: killed"
        );
    }

    #[test]
    fn the_shipped_probe_answers_each_mode_without_writing_into_the_kernel_directory() {
        let scratch = Scratch::create().unwrap();
        let kernel_dir = tempfile::tempdir().unwrap();
        std::fs::write(
            kernel_dir.path().join("problem.py"),
            "Model = 1\n\ndef get_inputs():\n    return []\n",
        )
        .unwrap();
        let runner = ProbeRunner::new(
            scratch.path(),
            std::env::vars_os().collect(),
            Duration::from_millis(200),
        );
        let python = Path::new("python3");
        let ask = |mode: &[&str]| {
            let probe = Probe::python(python, mode, None, "probe test");
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime
                .block_on(runner.run(probe))
                .and_then(ProbeRun::answer)
                .unwrap()
        };

        let environment = ask(&["environment"]);
        assert!(
            text(&environment["python"]).starts_with("3."),
            "{environment}"
        );
        for module in ["torch", "triton"] {
            let answer = &environment[module];
            assert!(
                answer["version"].is_string() || answer["error"].is_string(),
                "{module}: {environment}"
            );
        }
        let dir = kernel_dir.path().to_string_lossy();
        let problem = ask(&["problem", &dir]);
        assert_eq!(
            problem,
            serde_json::json!({"missing": ["Model", "get_init_inputs"]})
        );
        let left: Vec<_> = std::fs::read_dir(kernel_dir.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(left, ["problem.py"], "no __pycache__");
    }

    #[test]
    fn a_probe_past_its_deadline_is_stopped_with_what_it_started() {
        let scratch = Scratch::create().unwrap();
        let pids = scratch.path().join("pids");
        let runner = ProbeRunner::new(
            scratch.path(),
            vec![("PATH".into(), "/usr/bin:/bin".into())],
            Duration::from_millis(200),
        );
        let script = format!(
            "sleep 600 & echo $$ > {0}.tmp; echo $! >> {0}.tmp; mv {0}.tmp {0}; wait",
            pids.display()
        );
        let mut probe = Probe::tool(Path::new("/bin/sh"), &["-c", &script], None, "hung tool");
        probe.timeout = Duration::from_millis(500);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let error = match runtime.block_on(runner.run(probe)) {
            Ok(_) => panic!("a hung probe cannot finish"),
            Err(error) => error,
        };
        assert_eq!(
            error,
            "the hung tool (/bin/sh) did not finish within 0.5 s and was stopped"
        );
        let pids: Vec<Pid> = std::fs::read_to_string(&pids)
            .unwrap()
            .lines()
            .map(|line| Pid::from_raw(line.parse().unwrap()))
            .collect();
        assert_eq!(pids.len(), 2, "the shell and its sleep");
        for pid in pids {
            assert!(!is_running(pid), "process {pid} survived");
        }
    }

    #[test]
    fn the_scratch_folder_goes_when_dropped() {
        let scratch = Scratch::create().unwrap();
        let path = scratch.path().to_path_buf();
        std::fs::write(path.join("output.log"), "x").unwrap();
        drop(scratch);
        assert!(!path.exists());
    }
}
