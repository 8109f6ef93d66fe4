use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use super::environment::HostEnvironment;
use super::error::ToolFailure;
use crate::process::child_environment;

/// How long a GPU listing tool may take. amd-smi initialises every GPU of the node and has been
/// slow on large nodes; a hung tool must still not hang kactors.
pub(crate) const TOOL_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a tool that closed its output has to exit before it counts as hung.
const EXIT_POLL_INTERVAL: Duration = Duration::from_millis(5);

/// How many times a tool that is "busy" (ETXTBSY) is started again.
const BUSY_RETRIES: u32 = 5;

/// What a vendor's listing tool said.
#[derive(Debug)]
pub(crate) enum Listing<T> {
    /// The tool is not installed: that vendor lists no GPU.
    ToolNotFound {
        searched: String,
    },
    ToolFailed(ToolFailure),
    Gpus(Vec<T>),
}

/// A finished tool run, successful or not: callers decide what a non-zero exit means.
#[derive(Debug)]
pub(crate) struct ToolOutput {
    pub(crate) command: String,
    pub(crate) status: ExitStatus,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl ToolOutput {
    /// The part of the output that explains a failure, kept short enough for one error line.
    pub(crate) fn diagnostic(&self) -> String {
        const LIMIT: usize = 400;
        let text = if self.stderr.trim().is_empty() {
            self.stdout.trim()
        } else {
            self.stderr.trim()
        };
        let text = text.lines().collect::<Vec<_>>().join(" / ");
        if text.is_empty() {
            return "no output".to_string();
        }
        actors::text::cut(&text, LIMIT)
    }

    pub(crate) fn failure(&self) -> ToolFailure {
        ToolFailure::Failed {
            command: self.command.clone(),
            status: self.status,
            output: self.diagnostic(),
        }
    }
}

/// The first executable file called `name` in `dirs`.
pub(crate) fn find_executable(dirs: &[PathBuf], name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    dirs.iter().map(|dir| dir.join(name)).find(|candidate| {
        std::fs::metadata(candidate)
            .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
    })
}

/// Runs a tool to completion with stdin closed and its output captured, killing it when it
/// takes longer than `timeout`. This runs before any actor starts, so it blocks.
///
/// The tool gets `host`'s environment stripped of credentials, as every child of kactors does
/// (the visibility masks, which the selection is judged against and the tool must see, are
/// kept), and leads a process group of its own, which is killed whole when the tool is
/// abandoned, so nothing it started outlives it.
pub(crate) fn run_tool(
    program: &Path,
    args: &[&str],
    host: &HostEnvironment,
    timeout: Duration,
) -> Result<ToolOutput, ToolFailure> {
    let command = std::iter::once(program.display().to_string())
        .chain(args.iter().map(|arg| arg.to_string()))
        .collect::<Vec<_>>()
        .join(" ");
    let mut child = spawn(program, args, host).map_err(|source| ToolFailure::Spawn {
        command: command.clone(),
        source,
    })?;
    let deadline = Instant::now() + timeout;
    let timed_out = |child: &mut Child| {
        abandon(child);
        ToolFailure::TimedOut {
            command: command.clone(),
            timeout,
        }
    };

    // Both pipes are drained on their own threads so that a tool printing more than a pipe
    // holds cannot block; each thread reports once, when its pipe closes.
    let (sender, receiver) = mpsc::channel();
    let pipes: [(bool, Option<Box<dyn Read + Send>>); 2] = [
        (true, child.stdout.take().map(|pipe| Box::new(pipe) as _)),
        (false, child.stderr.take().map(|pipe| Box::new(pipe) as _)),
    ];
    for (is_stdout, pipe) in pipes {
        let sender = sender.clone();
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let read = pipe.map_or(Ok(0), |mut pipe| pipe.read_to_end(&mut bytes));
            // The receiver is gone only when the run already timed out.
            let _ = sender.send((is_stdout, read.map(|_| bytes)));
        });
    }
    drop(sender);

    let mut stdout = None;
    let mut stderr = None;
    while stdout.is_none() || stderr.is_none() {
        let remaining = deadline.saturating_duration_since(Instant::now());
        let Ok((is_stdout, read)) = receiver.recv_timeout(remaining) else {
            return Err(timed_out(&mut child));
        };
        let bytes = match read {
            Ok(bytes) => bytes,
            Err(error) => {
                abandon(&mut child);
                return Err(ToolFailure::Unreadable {
                    command: command.clone(),
                    expected: "readable",
                    detail: error.to_string(),
                });
            }
        };
        let text = String::from_utf8_lossy(&bytes).into_owned();
        if is_stdout {
            stdout = Some(text);
        } else {
            stderr = Some(text);
        }
    }

    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => return Err(timed_out(&mut child)),
            Ok(None) => std::thread::sleep(EXIT_POLL_INTERVAL),
            Err(source) => {
                return Err(ToolFailure::Lost {
                    command: command.clone(),
                    source,
                });
            }
        }
    };
    Ok(ToolOutput {
        command,
        status,
        stdout: stdout.unwrap_or_default(),
        stderr: stderr.unwrap_or_default(),
    })
}

/// Kills the tool's whole process group, then reaps the tool. The leader is not reaped before,
/// so the group id cannot have been reused; a failed kill means the group is already gone.
fn abandon(child: &mut Child) {
    if let Ok(leader) = i32::try_from(child.id()) {
        let _ = killpg(Pid::from_raw(leader), Signal::SIGKILL);
    }
    let _ = child.kill();
    let _ = child.wait();
}

fn spawn(program: &Path, args: &[&str], host: &HostEnvironment) -> std::io::Result<Child> {
    let parent = host
        .vars()
        .iter()
        .map(|(name, value)| (OsString::from(name), OsString::from(value)));
    let environment = child_environment(parent, &BTreeMap::new(), &[]);
    let kactors = nix::unistd::getpid().as_raw();
    let mut attempt = 0;
    loop {
        let mut command = Command::new(program);
        command
            .args(args)
            .env_clear()
            .envs(environment.vars())
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // Like every child of kactors, a tool dies with it; the thread that forks it waits for
        // it, so it outlives the child.
        // SAFETY: the closure runs between fork and exec and only calls prctl and getppid.
        unsafe {
            command.pre_exec(move || crate::process::die_with_parent(kactors));
        }
        let spawned = command.spawn();
        match spawned {
            // A tool that was just written (an upgrade in progress, or a test's fake) can be
            // briefly busy while another thread's fork still holds its write descriptor.
            Err(error)
                if error.kind() == std::io::ErrorKind::ExecutableFileBusy
                    && attempt < BUSY_RETRIES =>
            {
                attempt += 1;
                std::thread::sleep(EXIT_POLL_INTERVAL);
            }
            result => return result,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::fake_tools::write_script;

    #[test]
    fn captures_output_and_status_in_the_given_environment() {
        let dir = tempfile::tempdir().unwrap();
        let tool = write_script(
            dir.path(),
            "tool",
            "printf 'out %s %s\\n' \"$1\" \"$KACTORS_PROBE\"\nprintf 'err\\n' >&2\nexit 3\n",
        );
        let output = run_tool(
            &tool,
            &["arg"],
            &HostEnvironment::of_vars(&[("KACTORS_PROBE", "seen")]),
            TOOL_TIMEOUT,
        )
        .unwrap();
        assert_eq!(output.stdout, "out arg seen\n");
        assert_eq!(output.stderr, "err\n");
        assert_eq!(output.status.code(), Some(3));
        assert_eq!(output.command, format!("{} arg", tool.display()));
        assert_eq!(output.diagnostic(), "err");
    }

    /// Issue 21: nvidia-smi, amd-smi and the Slurm tools die with kactors like every child
    /// (ARCHITECTURE.md's invariant): the tool reads its own parent-death signal.
    #[test]
    fn a_tool_gets_the_parent_death_signal() {
        let dir = tempfile::tempdir().unwrap();
        let tool = write_script(
            dir.path(),
            "tool",
            "exec python3 -c 'import ctypes; s = ctypes.c_int(); \
             ctypes.CDLL(None).prctl(2, ctypes.byref(s), 0, 0, 0); print(s.value)'\n",
        );
        let host = HostEnvironment::of_vars(&[("PATH", "/usr/bin:/bin:/usr/local/bin")]);
        let output = run_tool(&tool, &[], &host, TOOL_TIMEOUT).unwrap();
        assert_eq!(
            output.stdout.trim(),
            nix::libc::SIGKILL.to_string(),
            "{output:?}"
        );
    }

    #[test]
    fn output_larger_than_a_pipe_buffer_does_not_block() {
        let dir = tempfile::tempdir().unwrap();
        let tool = write_script(
            dir.path(),
            "tool",
            "i=0\nwhile [ $i -lt 20000 ]; do printf '0123456789\\n'; printf 'x\\n' >&2; i=$((i+1)); done\n",
        );
        let output = run_tool(&tool, &[], &HostEnvironment::of_vars(&[]), TOOL_TIMEOUT).unwrap();
        assert_eq!(output.stdout.len(), 220_000);
        assert_eq!(output.stderr.len(), 40_000);
    }

    #[test]
    fn a_hung_tool_is_killed_at_the_deadline() {
        let dir = tempfile::tempdir().unwrap();
        let tool = write_script(dir.path(), "tool", "exec sleep 60\n");
        let host = HostEnvironment::of_vars(&[("PATH", "/usr/bin:/bin")]);
        let started = Instant::now();
        let failure = run_tool(&tool, &[], &host, Duration::from_millis(300)).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(30));
        assert_eq!(
            failure.to_string(),
            format!(
                "{} did not finish within 300ms and was killed",
                tool.display()
            )
        );
    }

    /// Issue 10: nvidia-smi and amd-smi got the whole host environment, API keys included.
    #[test]
    fn a_tool_sees_the_visibility_masks_but_no_credential() {
        let host = HostEnvironment::of_vars(&[
            ("PATH", "/usr/bin:/bin"),
            ("CUDA_VISIBLE_DEVICES", "1,0"),
            ("HIP_VISIBLE_DEVICES", "2"),
            ("ROCR_VISIBLE_DEVICES", "3"),
            ("OPENAI_API_KEY", "sk-proj-tool-secret"),
            ("ANTHROPIC_API_KEY", "sk-ant-tool-secret"),
            ("HF_TOKEN", "hf_tool_secret"),
            ("MY_SERVICE_SECRET", "service-tool-secret"),
        ]);
        let output = run_tool(Path::new("/usr/bin/env"), &[], &host, TOOL_TIMEOUT).unwrap();
        let mut seen: Vec<&str> = output.stdout.lines().collect();
        seen.sort_unstable();
        assert_eq!(
            seen,
            vec![
                "CUDA_VISIBLE_DEVICES=1,0",
                "HIP_VISIBLE_DEVICES=2",
                "PATH=/usr/bin:/bin",
                "ROCR_VISIBLE_DEVICES=3",
            ]
        );
    }

    /// Whether `pid` still runs, polling /proc for up to ten seconds for it to end: a killed
    /// orphan is reaped by init when init gets to it.
    fn still_running_after_a_while(pid: &str) -> bool {
        let running = || crate::process::ProcStat::of(pid).is_some_and(|stat| stat.is_running());
        let started = Instant::now();
        while running() {
            if started.elapsed() > Duration::from_secs(10) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    #[test]
    fn a_hung_tool_is_killed_with_everything_it_started() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("grandchild.pid");
        let tool = write_script(
            dir.path(),
            "tool",
            &format!(
                "sleep 60 &\necho $! > '{}.tmp'\nmv '{0}.tmp' '{0}'\nexec sleep 60\n",
                pid_file.display()
            ),
        );
        let host = HostEnvironment::of_vars(&[("PATH", "/usr/bin:/bin")]);
        let failure = run_tool(&tool, &[], &host, Duration::from_millis(500)).unwrap_err();
        assert!(matches!(failure, ToolFailure::TimedOut { .. }), "{failure}");
        let grandchild = std::fs::read_to_string(&pid_file).unwrap();
        assert!(
            !still_running_after_a_while(grandchild.trim()),
            "the tool's background sleep {grandchild} outlived it"
        );
    }

    #[test]
    fn a_tool_that_cannot_start_is_named() {
        let failure = run_tool(
            Path::new("/nonexistent/amd-smi"),
            &["list"],
            &HostEnvironment::of_vars(&[]),
            TOOL_TIMEOUT,
        )
        .unwrap_err();
        assert!(
            failure
                .to_string()
                .starts_with("/nonexistent/amd-smi list could not be started: "),
            "{failure}"
        );
    }

    #[test]
    fn diagnostic_falls_back_to_stdout_and_joins_lines() {
        let dir = tempfile::tempdir().unwrap();
        let tool = write_script(
            dir.path(),
            "tool",
            "printf 'line one\\nline two\\n'\nexit 9\n",
        );
        let output = run_tool(&tool, &[], &HostEnvironment::of_vars(&[]), TOOL_TIMEOUT).unwrap();
        assert_eq!(output.diagnostic(), "line one / line two");
    }

    #[test]
    fn find_executable_takes_the_first_executable_file() {
        let dir = tempfile::tempdir().unwrap();
        let first = dir.path().join("first");
        let second = dir.path().join("second");
        std::fs::create_dir_all(&first).unwrap();
        std::fs::create_dir_all(second.join("tool")).unwrap();
        std::fs::write(first.join("tool"), "not executable").unwrap();
        let third = dir.path().join("third");
        std::fs::create_dir_all(&third).unwrap();
        let executable = write_script(&third, "tool", "exit 0\n");
        assert_eq!(
            find_executable(&[first, second, third], "tool"),
            Some(executable)
        );
    }
}
