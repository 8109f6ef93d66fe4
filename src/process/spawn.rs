//! Starting a child, waiting for it, and ending it when its owner goes away.

use std::ffi::OsString;
use std::fs::OpenOptions;
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};

use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
use nix::unistd::Pid;
use tokio::signal::unix::{SignalKind, signal};

use super::child_files::ChildFiles;
use super::environment::ChildEnv;
use super::group::ProcessGroup;
use super::protocol::{ChildEnds, ProtocolPipes, place_child_ends, protocol_pipes};

/// What to run, where, and with what.
#[derive(Clone, Debug)]
pub struct ChildSpec {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    /// The child's own folder in the run directory, made by the Collector.
    pub cwd: PathBuf,
    pub env: ChildEnv,
    /// stdout and stderr are both appended to this file.
    pub log_path: PathBuf,
    /// Which descriptors, if any, carry a line protocol with kactors.
    pub protocol: Protocol,
    /// Names the child in errors and reports, e.g. "evaluator device 2".
    pub label: String,
}

/// Where a child's line protocol with kactors runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// None: stdin is /dev/null, stdout and stderr go to the log.
    None,
    /// Two dedicated pipes, fd 3 requests and fd 4 replies (the evaluator): nothing the child
    /// prints can corrupt them.
    Pipes,
    /// stdin requests and stdout replies, stderr to the log: for `srun`, which carries only a
    /// task's standard streams across nodes (the node agent's channel). The agent keeps its
    /// own children's protocols on their pipes, so nothing a kernel prints reaches this one.
    Stdio,
}

#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error("working directory {} of {label} is not a directory", cwd.display())]
    Cwd { label: String, cwd: PathBuf },
    #[error("error opening log {} of {label}: {source}", path.display())]
    Log {
        label: String,
        path: PathBuf,
        source: io::Error,
    },
    #[error("error creating the protocol pipes of {label}: {source}")]
    Pipes { label: String, source: io::Error },
    #[error("error identifying the log and pipes of {label} in /proc: {source}")]
    Files { label: String, source: io::Error },
    #[error("error spawning {label} ({}): {source}", program.display())]
    Spawn {
        label: String,
        program: PathBuf,
        source: io::Error,
    },
}

/// A child started by [`spawn`], leader of its own process group.
///
/// Its leader is never reaped while this value lives: [`wait`](Self::wait) only observes the
/// exit, so the group id cannot be reused and every signal to the group reaches this child's
/// processes. Dropping it sends SIGKILL to the group, whatever state it is in (an actor that
/// panics drops its child, and no group may outlive its owner), and hands the leader to
/// tokio, which reaps it.
#[derive(Debug)]
pub struct RunningChild {
    /// kactors' ends of the protocol pipes, when the spec asked for them.
    pub protocol: Option<ProtocolPipes>,
    /// Held only to be dropped: tokio then reaps the leader, at once or when it dies.
    _tokio_child: tokio::process::Child,
    pid: Pid,
    group: ProcessGroup,
    label: String,
    files: ChildFiles,
    exit_status: Option<ExitStatus>,
}

/// Starts the child in a new process group with stdin from /dev/null, stdout and stderr
/// appended to `spec.log_path`, and the protocol's pipes where `spec.protocol` puts them.
/// Needs a tokio runtime with IO enabled.
///
/// The child gets SIGKILL when its parent dies (PR_SET_PDEATHSIG), so that a kactors killed
/// outright (SIGKILL, the OOM killer) leaves no evaluator, profiler or `srun` behind; a node
/// agent's children likewise die with the agent. Linux sends that signal when the *thread* that
/// forked the child exits, not the process: every child must be spawned from a thread that
/// lives as long as the process. kactors spawns from the actix System's thread, which is the
/// main thread (`kactors run`, `kactors agent`, `kactors profile`), and from the preflight's
/// runtime, which `block_on` drives on the main thread too; nothing spawns from tokio's
/// blocking pool. (A test's children die with its test thread, which outlives them anyway.)
pub fn spawn(spec: &ChildSpec) -> Result<RunningChild, SpawnError> {
    let label = || spec.label.clone();
    if !spec.cwd.is_dir() {
        return Err(SpawnError::Cwd {
            label: label(),
            cwd: spec.cwd.clone(),
        });
    }
    let log_error = |source| SpawnError::Log {
        label: label(),
        path: spec.log_path.clone(),
        source,
    };
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&spec.log_path)
        .map_err(log_error)?;
    let log_for_stderr = log.try_clone().map_err(log_error)?;

    let mut command = tokio::process::Command::new(&spec.program);
    command
        .args(&spec.args)
        .current_dir(&spec.cwd)
        .env_clear()
        .envs(spec.env.vars())
        .stdin(Stdio::null())
        .process_group(0);
    let parent = nix::unistd::getpid().as_raw();
    // SAFETY: the closure runs between fork and exec and only calls prctl and getppid.
    unsafe {
        command.pre_exec(move || die_with_parent(parent));
    }

    let (protocol, child_ends) = match spec.protocol {
        Protocol::None => (None, None),
        Protocol::Pipes | Protocol::Stdio => {
            let (parent_ends, child_ends) =
                protocol_pipes().map_err(|source| SpawnError::Pipes {
                    label: label(),
                    source,
                })?;
            (Some(parent_ends), Some(child_ends))
        }
    };
    let mut given_files = vec![log.as_fd()];
    given_files.extend(child_ends.iter().flat_map(ChildEnds::fds));
    let files = ChildFiles::of(&given_files).map_err(|source| SpawnError::Files {
        label: label(),
        source,
    })?;
    let child_ends = match (spec.protocol, child_ends) {
        (Protocol::Pipes, Some(ends)) => {
            let (requests_fd, replies_fd) = (ends.requests.as_raw_fd(), ends.replies.as_raw_fd());
            // SAFETY: the closure runs between fork and exec and only calls dup2.
            unsafe {
                command.pre_exec(move || place_child_ends(requests_fd, replies_fd));
            }
            command.stdout(log);
            Some(ends)
        }
        (Protocol::Stdio, Some(ends)) => {
            command
                .stdin(Stdio::from(ends.requests))
                .stdout(Stdio::from(ends.replies));
            None
        }
        _ => {
            command.stdout(log);
            None
        }
    };
    command.stderr(log_for_stderr);
    let child = command.spawn().map_err(|source| SpawnError::Spawn {
        label: label(),
        program: spec.program.clone(),
        source,
    })?;
    // The child has its copies now; kactors keeping the log or the child's pipe ends open would
    // hide the child's exit from the reply pipe and from the leak check.
    drop(command);
    drop(child_ends);

    let raw_pid = child
        .id()
        .expect("a child that was never waited for has a pid");
    let pid = Pid::from_raw(raw_pid as i32);
    Ok(RunningChild {
        protocol,
        _tokio_child: child,
        pid,
        group: ProcessGroup::led_by(pid),
        label: spec.label.clone(),
        files,
        exit_status: None,
    })
}

impl RunningChild {
    pub fn pid(&self) -> Pid {
        self.pid
    }

    pub fn group(&self) -> ProcessGroup {
        self.group
    }

    pub fn label(&self) -> &str {
        &self.label
    }

    pub(super) fn files(&self) -> &ChildFiles {
        &self.files
    }

    /// Waits for the leader to exit and returns its status, without reaping it (see the type's
    /// documentation); at once if the exit has already been seen. Cancel safe.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        if let Some(status) = self.exit_status {
            return Ok(status);
        }
        // Listening before looking means an exit between the look and the wait still wakes us.
        let mut child_exits = signal(SignalKind::child())?;
        loop {
            if let Some(status) = exit_status_without_reaping(self.pid)? {
                self.exit_status = Some(status);
                return Ok(status);
            }
            if child_exits.recv().await.is_none() {
                return Err(io::Error::other("the runtime stopped delivering SIGCHLD"));
            }
        }
    }
}

/// Runs in the child between fork and exec: SIGKILL when the forking thread ends, and an exit
/// at once when the parent died before that was in place (the child was already re-parented).
/// SIGXFSZ, which kactors ignores for itself (`signals::ignore_file_size_limit`), is given back
/// its default, as the child would have had it without kactors.
pub(crate) fn die_with_parent(parent: i32) -> io::Result<()> {
    // SAFETY: signal() is async-signal-safe and changes only this process's disposition.
    if unsafe { nix::libc::signal(nix::libc::SIGXFSZ, nix::libc::SIG_DFL) } == nix::libc::SIG_ERR {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: prctl with PR_SET_PDEATHSIG and a signal number changes only this process.
    if unsafe { nix::libc::prctl(nix::libc::PR_SET_PDEATHSIG, nix::libc::SIGKILL) } == -1 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: getppid cannot fail.
    if unsafe { nix::libc::getppid() } != parent {
        return Err(io::Error::other("kactors died while starting this child"));
    }
    Ok(())
}

/// waitid with WNOWAIT reads the exit status and leaves it for tokio to collect.
fn exit_status_without_reaping(pid: Pid) -> io::Result<Option<ExitStatus>> {
    let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
    // Only WEXITED was asked for, so no raw status means it is still running.
    Ok(raw_wait_status(waitid(Id::Pid(pid), flags)?).map(ExitStatus::from_raw))
}

/// A status as waitpid encodes it: the code in the second byte, or the signal in the low seven
/// bits and 0x80 for a core dump; None for a process that has not ended.
pub(crate) fn raw_wait_status(status: WaitStatus) -> Option<i32> {
    match status {
        WaitStatus::Exited(_, code) => Some((code & 0xff) << 8),
        WaitStatus::Signaled(_, signal, core_dumped) => {
            Some(signal as i32 | if core_dumped { 0x80 } else { 0 })
        }
        _ => None,
    }
}

impl Drop for RunningChild {
    fn drop(&mut self) {
        // The leader is unreaped until `_tokio_child` drops below, so the group id is still this
        // child's. ESRCH only says that nothing is left to kill.
        let _ = self.group.kill();
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::process::test_support::{Scratch, eventually_gone};
    use crate::process::{ProtocolPipes, child_environment};

    #[tokio::test]
    async fn the_child_sees_the_filtered_environment_and_the_device_pin() {
        let scratch = Scratch::new();
        let parent = [
            ("PATH", "/usr/bin:/bin"),
            ("HOME", "/home/kactors"),
            ("LD_LIBRARY_PATH", "/opt/cuda/lib64"),
            ("ANTHROPIC_API_KEY", "sk-ant-secret"),
            ("OPENAI_API_KEY", "sk-secret"),
            ("GITHUB_TOKEN", "ghp_secret"),
            ("HF_TOKEN", "hf_secret"),
            ("AWS_SECRET_ACCESS_KEY", "aws-secret"),
            ("CUDA_VISIBLE_DEVICES", "0,1,2,3"),
            ("ROCR_VISIBLE_DEVICES", "0"),
        ]
        .map(|(name, value)| (OsString::from(name), OsString::from(value)));
        let pin = BTreeMap::from([("CUDA_VISIBLE_DEVICES".to_string(), "2".to_string())]);
        let env = child_environment(parent, &pin, &["ROCR_VISIBLE_DEVICES".to_string()]);
        let spec = scratch.spec("env", "/usr/bin/env", &[], env, false);

        let mut child = spawn(&spec).unwrap();
        assert!(child.wait().await.unwrap().success());

        let mut seen: Vec<String> = scratch.log().lines().map(str::to_string).collect();
        seen.sort();
        assert_eq!(
            seen,
            [
                "CUDA_VISIBLE_DEVICES=2",
                "HOME=/home/kactors",
                "LD_LIBRARY_PATH=/opt/cuda/lib64",
                "PATH=/usr/bin:/bin"
            ]
        );
    }

    #[tokio::test]
    async fn stdout_and_stderr_are_appended_to_the_log_and_the_exit_code_is_kept() {
        let scratch = Scratch::new();
        std::fs::write(&scratch.log_path, "from an earlier start\n").unwrap();
        let spec = scratch.sh("echo out; echo err >&2; exit 3", false);

        let mut child = spawn(&spec).unwrap();
        let status = child.wait().await.unwrap();

        assert_eq!(status.code(), Some(3));
        assert_eq!(
            child.wait().await.unwrap().code(),
            Some(3),
            "a second wait answers the same"
        );
        assert_eq!(scratch.log(), "from an earlier start\nout\nerr\n");
    }

    #[tokio::test]
    async fn a_child_killed_by_a_signal_reports_it() {
        let scratch = Scratch::new();
        let mut child = spawn(&scratch.sh("kill -KILL $$", false)).unwrap();
        assert_eq!(
            child.wait().await.unwrap().signal(),
            Some(nix::libc::SIGKILL)
        );
    }

    #[tokio::test]
    async fn the_child_runs_in_its_folder_and_leads_its_own_group() {
        let scratch = Scratch::new();
        let spec = scratch.sh("pwd; cut -d ' ' -f 5 /proc/$$/stat", false);
        let mut child = spawn(&spec).unwrap();
        let group = child.group().id().as_raw();
        child.wait().await.unwrap();

        let log = scratch.log();
        let lines: Vec<&str> = log.lines().map(str::trim).collect();
        let cwd = spec.cwd.canonicalize().unwrap();
        assert_eq!(lines, [cwd.to_str().unwrap(), group.to_string().as_str()]);
        assert_eq!(group, child.pid().as_raw());
    }

    #[tokio::test]
    async fn dropping_a_child_that_was_not_waited_for_kills_its_group() {
        let scratch = Scratch::new();
        let spec = scratch.sh("sleep 60 & echo $! >&4; wait", true);
        let mut child = spawn(&spec).unwrap();
        let replies = &mut child.protocol.as_mut().unwrap().replies;
        let grandchild: i32 = replies.recv_line().await.unwrap().unwrap().parse().unwrap();
        let group = child.group();
        assert_eq!(group.live_members().unwrap().len(), 2);

        drop(child);

        eventually_gone(group, &[Pid::from_raw(grandchild)]).await;
    }

    /// Issue 14: a child dies with the thread that started it (PR_SET_PDEATHSIG), so a kactors
    /// killed outright leaves no child behind, even one whose `RunningChild` was never dropped.
    #[test]
    fn a_child_dies_when_the_thread_that_spawned_it_ends() {
        let scratch = Scratch::new();
        let spec = scratch.sh("echo $$ >&4; exec sleep 60", true);
        let pid = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                let mut child = spawn(&spec).unwrap();
                let replies = &mut child.protocol.as_mut().unwrap().replies;
                let pid: i32 = replies.recv_line().await.unwrap().unwrap().parse().unwrap();
                // As if kactors were killed: nothing ends the child on the way out.
                std::mem::forget(child);
                pid
            })
        })
        .join()
        .unwrap();
        let started = std::time::Instant::now();
        while crate::process::test_support::is_running(Pid::from_raw(pid)) {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(10),
                "child {pid} outlived the thread that spawned it"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// Issue 14: `srun` carries only a task's standard streams between nodes, so the node
    /// agent's channel is stdin and stdout; stderr still goes to the log.
    #[tokio::test]
    async fn a_stdio_protocol_child_reads_requests_on_stdin_and_replies_on_stdout() {
        let scratch = Scratch::new();
        let mut spec = scratch.sh(
            "while read line; do echo \"reply to $line\"; echo \"note $line\" >&2; done",
            false,
        );
        spec.protocol = Protocol::Stdio;
        let mut child = spawn(&spec).unwrap();
        let ProtocolPipes {
            mut requests,
            mut replies,
        } = child.protocol.take().unwrap();
        for line in ["one", "two"] {
            requests.send_line(line).await.unwrap();
            assert_eq!(
                replies.recv_line().await.unwrap(),
                Some(format!("reply to {line}"))
            );
        }
        drop(requests);
        assert!(child.wait().await.unwrap().success());
        assert_eq!(replies.recv_line().await.unwrap(), None);
        assert_eq!(scratch.log(), "note one\nnote two\n");
    }

    #[tokio::test]
    async fn spawn_errors_name_the_child_and_what_is_wrong() {
        let scratch = Scratch::new();
        let env = child_environment(std::env::vars_os(), &BTreeMap::new(), &[]);

        let missing_program = scratch.spec(
            "evaluator device 2",
            "/nonexistent/python3",
            &[],
            env.clone(),
            true,
        );
        let error = spawn(&missing_program).unwrap_err().to_string();
        assert!(
            error.starts_with("error spawning evaluator device 2 (/nonexistent/python3): "),
            "{error}"
        );

        let mut missing_cwd = scratch.spec("profiler", "/usr/bin/env", &[], env.clone(), false);
        missing_cwd.cwd = scratch.path("absent");
        let error = spawn(&missing_cwd).unwrap_err().to_string();
        assert_eq!(
            error,
            format!(
                "working directory {} of profiler is not a directory",
                missing_cwd.cwd.display()
            )
        );

        let mut missing_log_folder = scratch.spec("test", "/usr/bin/env", &[], env, false);
        missing_log_folder.log_path = scratch.path("absent/log");
        let error = spawn(&missing_log_folder).unwrap_err().to_string();
        assert!(
            error.starts_with(&format!(
                "error opening log {} of test: ",
                missing_log_folder.log_path.display()
            )),
            "{error}"
        );
    }
}
