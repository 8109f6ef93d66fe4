//! `kactors sandbox-exec`: sets the sandbox up around one command and runs it.
//!
//! Three processes, because a PID namespace takes effect only for the children of the process
//! that makes it:
//!
//! - the **launcher** (the process kactors spawned, leader of the child's process group) sets
//!   `no_new_privs`, makes the user, mount, PID and network namespaces, maps the user's own ids
//!   into them, mounts the bounded tmpfs on the scratch folder (the command's TMPDIR) and binds
//!   /dev/shm into it, then forks and waits; it ends as the command ended (the same exit code, or the same
//!   signal);
//! - **init** (PID 1 in the new namespace) mounts the namespace's own /proc, bounds its
//!   pid_max, forks the command and reaps whatever is orphaned to it; when it exits, the kernel
//!   kills everything left in the namespace, so no process of the sandbox outlives it;
//! - the **command** sets its limits, restricts itself with Landlock and seccomp and execs.
//!
//! Signals: kactors signals the whole process group, which the three share, so the command
//! gets SIGTERM itself; the launcher and init only pass a signal sent to them alone down, and
//! never die of it. Every step is recorded in a [`SandboxReport`]; at `--level required` a
//! protection that is missing ends the launcher with [`SETUP_FAILED`] before the command runs.
//! Nothing here runs with threads: the launcher is a fresh, single-threaded process, which
//! unshare(CLONE_NEWUSER) and fork both need.

use std::ffi::{CString, OsStr, OsString};
use std::fs;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};

use landlock::{
    ABI, Access, AccessFs, AccessNet, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
};
use nix::libc;
use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};
use nix::sys::resource::{Resource, setrlimit};
use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid, execvpe, fork, getgid, getuid};

use super::SETUP_FAILED;
use super::policy::{Level, Policy};
use super::protections::{Mechanism, SandboxReport, refusal};
use crate::process::raw_wait_status;

/// The Landlock ABI whose network rights and scopes kactors asks for (6.18 kernels report 7,
/// whose additions are audit flags only). Older kernels get what they have.
const LANDLOCK_ABI: ABI = ABI::V6;
/// The filesystem rights: ABI 9 adds the resolution of pathname sockets, which kernels that
/// have it then refuse outside the writable folders; the others ignore the right.
const LANDLOCK_FS_ABI: ABI = ABI::V9;
/// The smallest pid_max the kernel accepts in a namespace.
const PID_MAX_MIN: u32 = 301;

/// Runs `command` inside `policy`'s sandbox; returns only on failure, with the exit code.
/// `probe`: set everything up, then print the report as JSON instead of running a command.
pub fn sandbox_exec(policy: &Policy, command: &[OsString], probe: bool) -> i32 {
    let mut setup = Setup {
        policy,
        report: SandboxReport::default(),
        private_tmp: false,
    };
    setup.launch(command, probe).unwrap_or_else(|message| {
        let _ = writeln!(std::io::stderr(), "kactors sandbox-exec: {message}");
        SETUP_FAILED
    })
}

struct Setup<'a> {
    policy: &'a Policy,
    report: SandboxReport,
    /// Whether /tmp is the scratch's own (bound over the machine's), the command's TMPDIR.
    private_tmp: bool,
}

/// The process a signal sent to the launcher or to init alone goes on to.
static FORWARD_TO: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward_signal(signal: libc::c_int) {
    let target = FORWARD_TO.load(Ordering::Relaxed);
    if target > 0 {
        // SAFETY: kill is async-signal-safe.
        unsafe { libc::kill(target, signal) };
    }
}

const FORWARDED: [Signal; 4] = [
    Signal::SIGTERM,
    Signal::SIGINT,
    Signal::SIGHUP,
    Signal::SIGQUIT,
];

/// The launcher and init pass these on instead of dying of them (a handler, unlike SIG_IGN, is
/// reset by exec, so the command gets the default dispositions).
fn forward_signals_to(pid: Pid) {
    FORWARD_TO.store(pid.as_raw(), Ordering::Relaxed);
    let action = SigAction::new(
        SigHandler::Handler(forward_signal),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for signal in FORWARDED {
        // SAFETY: the handler only reads an atomic and calls kill.
        let _ = unsafe { sigaction(signal, &action) };
    }
}

fn errno_text(error: nix::Error) -> String {
    error.desc().to_string()
}

impl Setup<'_> {
    fn launch(&mut self, command: &[OsString], probe: bool) -> Result<i32, String> {
        if command.is_empty() && !probe {
            return Err("no command to run after `--`".into());
        }
        fs::create_dir_all(&self.policy.scratch).map_err(|error| {
            format!(
                "cannot make the scratch folder {}: {error}",
                self.policy.scratch.display()
            )
        })?;
        let no_new_privs = set_no_new_privs();
        self.report.record(Mechanism::NoNewPrivs, no_new_privs);
        let (uid, gid) = (getuid(), getgid());
        let namespaces = unshare(
            CloneFlags::CLONE_NEWUSER
                | CloneFlags::CLONE_NEWNS
                | CloneFlags::CLONE_NEWPID
                | CloneFlags::CLONE_NEWNET,
        )
        .map_err(|error| format!("unshare: {}", errno_text(error)))
        .and_then(|()| map_ids(uid.as_raw(), gid.as_raw()));
        match namespaces {
            Ok(()) => {
                self.report
                    .record(Mechanism::UserNamespace, Ok(format!("uid {uid} as itself")));
                self.report.record(
                    Mechanism::NetworkNamespace,
                    Ok("loopback only, down".into()),
                );
                let private = self.bounded_scratch(command, probe);
                self.report.record(Mechanism::Scratch, private);
                self.in_pid_namespace(command, probe)
            }
            Err(reason) => {
                for mechanism in [
                    Mechanism::UserNamespace,
                    Mechanism::PidNamespace,
                    Mechanism::NetworkNamespace,
                    Mechanism::Scratch,
                ] {
                    self.report.record(mechanism, Err(reason.clone()));
                }
                self.report.record(
                    Mechanism::TaskLimit,
                    rlimit_nproc(uid.as_raw(), self.policy.limits.max_tasks),
                );
                self.confine_and_exec(command, probe)
            }
        }
    }

    /// The bounded tmpfs on the scratch folder, /dev/shm bound into it, /run/user (where the
    /// user's sockets live) hidden. Mounts made here stay in this namespace. /tmp itself stays
    /// (read-only under Landlock): a run directory or a Python environment may lie beneath it.
    fn bounded_scratch(&mut self, command: &[OsString], probe: bool) -> Result<String, String> {
        let fail = |what: &str, error: nix::Error| format!("{what}: {}", errno_text(error));
        mount(
            None::<&str>,
            "/",
            None::<&str>,
            MsFlags::MS_REC | MsFlags::MS_PRIVATE,
            None::<&str>,
        )
        .map_err(|error| fail("making mounts private", error))?;
        let scratch = &self.policy.scratch;
        let size = format!("size={},mode=0700", self.policy.limits.scratch_bytes);
        mount(
            Some("tmpfs"),
            scratch,
            Some("tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            Some(size.as_str()),
        )
        .map_err(|error| fail("mounting the scratch tmpfs", error))?;
        // A probe asks what the machine allows: its own folder under /tmp is no reason to keep it.
        let kept_tmp = if probe { None } else { self.needs_tmp(command) };
        let private_tmp = kept_tmp.is_none().then_some(("tmp", "/tmp"));
        for (inside, target) in [("shm", "/dev/shm")].into_iter().chain(private_tmp) {
            let source = scratch.join(inside);
            fs::create_dir_all(&source)
                .map_err(|error| format!("{}: {error}", source.display()))?;
            if Path::new(target).is_dir() {
                mount(
                    Some(&source),
                    target,
                    None::<&str>,
                    MsFlags::MS_BIND,
                    None::<&str>,
                )
                .map_err(|error| fail(&format!("binding {target}"), error))?;
            }
        }
        if Path::new("/run/user").is_dir() {
            mount(
                Some("tmpfs"),
                "/run/user",
                Some("tmpfs"),
                MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
                Some("size=4k"),
            )
            .map_err(|error| fail("hiding /run/user", error))?;
        }
        self.private_tmp = kept_tmp.is_none();
        let tmp = match kept_tmp {
            None => "a private /tmp".to_string(),
            Some(path) => format!("/tmp read-only, since {} lies beneath it", path.display()),
        };
        Ok(format!(
            "{tmp}; TMPDIR and /dev/shm in a tmpfs of {} MiB",
            self.policy.limits.scratch_bytes >> 20
        ))
    }

    /// A path the command needs that lies under /tmp, which then stays (read-only): a private
    /// /tmp would hide it.
    fn needs_tmp(&self, command: &[OsString]) -> Option<PathBuf> {
        let policy = self.policy;
        let named = command
            .iter()
            .map(PathBuf::from)
            .filter(|path| path.is_absolute());
        policy
            .writable
            .iter()
            .chain(&policy.readable)
            .chain(&policy.hidden)
            .chain([&policy.scratch])
            .cloned()
            .chain(named)
            .chain(std::env::current_dir().ok())
            .find(|path| {
                fs::canonicalize(path)
                    .unwrap_or_else(|_| path.clone())
                    .starts_with("/tmp")
            })
    }

    fn in_pid_namespace(&mut self, command: &[OsString], probe: bool) -> Result<i32, String> {
        let (status_read, status_write) =
            nix::unistd::pipe().map_err(|error| format!("pipe: {}", errno_text(error)))?;
        // SAFETY: this process has one thread, so the child may do anything after fork.
        match unsafe { fork() }.map_err(|error| format!("fork: {}", errno_text(error)))? {
            ForkResult::Child => {
                drop(status_read);
                exit_forked(self.init(command, probe, status_write))
            }
            ForkResult::Parent { child } => {
                drop(status_write);
                forward_signals_to(child);
                let init_status = wait_for(child)?;
                let mut raw = [0u8; 4];
                let mut reader = fs::File::from(status_read);
                match reader.read_exact(&mut raw) {
                    Ok(()) => Ok(end_like(i32::from_ne_bytes(raw))),
                    // Init ended before the command did: its own status is the answer.
                    Err(_) => Ok(match init_status {
                        WaitStatus::Exited(_, code) => code,
                        _ => SETUP_FAILED,
                    }),
                }
            }
        }
    }

    /// PID 1 of the namespace.
    fn init(
        &mut self,
        command: &[OsString],
        probe: bool,
        status_write: OwnedFd,
    ) -> Result<i32, String> {
        // SAFETY: prctl with PR_SET_PDEATHSIG changes only this process.
        unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
        let own_proc = mount(
            Some("proc"),
            "/proc",
            Some("proc"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
            None::<&str>,
        )
        .map(|()| "its own /proc".to_string())
        .map_err(|error| format!("mounting /proc: {}", errno_text(error)));
        let has_own_proc = own_proc.is_ok();
        self.report.record(Mechanism::PidNamespace, own_proc);
        let tasks = if has_own_proc {
            namespace_pid_max(self.policy.limits.max_tasks)
        } else {
            Err("no /proc of its own to bound".into())
        };
        self.report.record(Mechanism::TaskLimit, tasks);
        // SAFETY: this process has one thread.
        match unsafe { fork() }.map_err(|error| format!("fork: {}", errno_text(error)))? {
            ForkResult::Child => {
                drop(status_write);
                exit_forked(self.confine_and_exec(command, probe))
            }
            ForkResult::Parent { child } => {
                forward_signals_to(child);
                loop {
                    match waitpid(None, None) {
                        Ok(status) if status.pid() == Some(child) => {
                            let raw = raw_wait_status(status).unwrap_or(SETUP_FAILED << 8);
                            let mut file = fs::File::from(status_write);
                            let _ = file.write_all(&raw.to_ne_bytes());
                            return Ok(0);
                        }
                        Ok(_) | Err(nix::Error::EINTR) => continue,
                        Err(error) => return Err(format!("waitpid: {}", errno_text(error))),
                    }
                }
            }
        }
    }

    /// The command's own restrictions, then the command (or, probing, the report).
    fn confine_and_exec(&mut self, command: &[OsString], probe: bool) -> Result<i32, String> {
        self.report.record(
            Mechanism::FileSizeLimit,
            limit_files(self.policy.limits.max_file_bytes),
        );
        let tmp = self.policy.scratch.join("tmp");
        fs::create_dir_all(&tmp).map_err(|error| format!("{}: {error}", tmp.display()))?;
        let tmp = if self.private_tmp {
            PathBuf::from("/tmp")
        } else {
            tmp
        };
        let landlock = restrict_filesystem(self.policy, &tmp);
        self.report.record(Mechanism::Landlock, landlock);
        self.report
            .record(Mechanism::Seccomp, refuse_inet_sockets());
        if probe {
            let json = serde_json::to_string(&self.report).expect("the report serialises");
            println!("{json}");
            return Ok(0);
        }
        if self.policy.level == Level::Required
            && let Some(refusal) = refusal(&self.report)
        {
            return Err(refusal);
        }
        // $HOME is read-only: Triton (which makes ~/.triton on import, seen on the H200) and
        // the XDG caches go to the scratch instead.
        let scratch = &self.policy.scratch;
        let own: [(&str, OsString); 4] = [
            ("TMPDIR", tmp.into_os_string()),
            ("KACTORS_SCRATCH", scratch.clone().into_os_string()),
            ("TRITON_HOME", scratch.join("home").into_os_string()),
            ("XDG_CACHE_HOME", scratch.join("cache").into_os_string()),
        ];
        let mut env: Vec<(OsString, OsString)> = std::env::vars_os()
            .filter(|(name, _)| !own.iter().any(|(own_name, _)| name == own_name))
            .collect();
        env.extend(own.into_iter().map(|(name, value)| (name.into(), value)));
        let program = c_string(&command[0])?;
        let args = command
            .iter()
            .map(|arg| c_string(arg))
            .collect::<Result<Vec<_>, _>>()?;
        let env = env
            .iter()
            .map(|(name, value)| {
                let mut pair = name.clone();
                pair.push("=");
                pair.push(value);
                c_string(&pair)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let error = execvpe(&program, &args, &env).unwrap_err();
        Err(format!(
            "cannot run {}: {}",
            command[0].to_string_lossy(),
            errno_text(error)
        ))
    }
}

/// How a forked stage ends: its code, or its setup's failure on stderr (the child's log).
fn exit_forked(outcome: Result<i32, String>) -> ! {
    let code = outcome.unwrap_or_else(|message| {
        let _ = writeln!(std::io::stderr(), "kactors sandbox-exec: {message}");
        SETUP_FAILED
    });
    // SAFETY: _exit skips the parent's atexit handlers and buffers, as a forked child must.
    unsafe { libc::_exit(code) }
}

fn c_string(text: &OsStr) -> Result<CString, String> {
    CString::new(text.as_bytes())
        .map_err(|_| format!("{} holds a NUL byte", text.to_string_lossy()))
}

fn set_no_new_privs() -> Result<String, String> {
    // SAFETY: prctl with PR_SET_NO_NEW_PRIVS changes only this process and its children.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } == 0 {
        Ok("set".into())
    } else {
        Err(std::io::Error::last_os_error().to_string())
    }
}

/// The user's own uid and gid, mapped to themselves: files the sandbox writes are the user's.
fn map_ids(uid: u32, gid: u32) -> Result<(), String> {
    let write = |file: &str, text: String| {
        fs::write(format!("/proc/self/{file}"), text)
            .map_err(|error| format!("writing /proc/self/{file}: {error}"))
    };
    write("setgroups", "deny".into())?;
    write("uid_map", format!("{uid} {uid} 1"))?;
    write("gid_map", format!("{gid} {gid} 1"))
}

/// pid_max of the namespace (Linux 6.14+): every task, threads included, takes a pid below it.
fn namespace_pid_max(max_tasks: u32) -> Result<String, String> {
    let pid_max = max_tasks.max(PID_MAX_MIN);
    fs::write("/proc/sys/kernel/pid_max", pid_max.to_string())
        .map(|()| format!("{pid_max} processes and threads"))
        .map_err(|error| format!("writing the namespace's pid_max (Linux 6.14+): {error}"))
}

/// RLIMIT_NPROC, where there is no namespace: it counts the user's processes everywhere, and
/// root is exempt from it.
fn rlimit_nproc(uid: u32, max_tasks: u32) -> Result<String, String> {
    if uid == 0 {
        return Err("root is exempt from RLIMIT_NPROC, and there is no pid namespace".into());
    }
    setrlimit(
        Resource::RLIMIT_NPROC,
        u64::from(max_tasks),
        u64::from(max_tasks),
    )
    .map(|()| format!("RLIMIT_NPROC {max_tasks} (all of the user's processes)"))
    .map_err(|error| format!("RLIMIT_NPROC: {}", errno_text(error)))
}

fn limit_files(max_file_bytes: u64) -> Result<String, String> {
    // SIG_IGN outlives exec: the command's oversized writes fail with EFBIG instead of
    // killing it.
    // SAFETY: ignoring a signal installs no handler.
    unsafe {
        sigaction(
            Signal::SIGXFSZ,
            &SigAction::new(SigHandler::SigIgn, SaFlags::empty(), SigSet::empty()),
        )
    }
    .map_err(|error| format!("ignoring SIGXFSZ: {}", errno_text(error)))?;
    setrlimit(Resource::RLIMIT_FSIZE, max_file_bytes, max_file_bytes)
        .and_then(|()| setrlimit(Resource::RLIMIT_CORE, 0, 0))
        .map(|()| format!("files up to {} MiB, no core dumps", max_file_bytes >> 20))
        .map_err(|error| format!("RLIMIT_FSIZE: {}", errno_text(error)))
}

/// Reads everywhere but in the policy's hidden folder (the run directory), where only what it
/// names readable may be read; writes in the policy's folders, the scratch, /dev (the GPU's device
/// files take ioctls and writes) and /proc (CUDA's start needs it: seen on the H200, 2026-12-03;
/// in the sandbox it holds only the sandbox's processes); no TCP bind or connect; no signal or
/// abstract socket outside; and where the kernel has it (Landlock ABI 9), no connection to a
/// pathname socket outside those folders.
fn restrict_filesystem(policy: &Policy, tmp: &Path) -> Result<String, String> {
    let all = AccessFs::from_all(LANDLOCK_FS_ABI);
    let read = AccessFs::from_read(LANDLOCK_FS_ABI);
    let fail = |error: landlock::RulesetError| error.to_string();
    let mut writable: Vec<&Path> = policy.writable.iter().map(PathBuf::as_path).collect();
    // The private /tmp is the scratch's tmp/ bound there: Landlock sees the path it was
    // reached by, so it needs a rule of its own.
    writable.extend([
        tmp,
        policy.scratch.as_path(),
        Path::new("/dev"),
        Path::new("/proc"),
    ]);
    let hidden = policy
        .hidden
        .as_ref()
        .map(|hidden| {
            fs::canonicalize(hidden).map_err(|error| format!("{}: {error}", hidden.display()))
        })
        .transpose()?;
    let mut ruleset = Ruleset::default()
        .handle_access(all)
        .map_err(fail)?
        .handle_access(AccessNet::from_all(LANDLOCK_ABI))
        .map_err(fail)?
        .scope(Scope::from_all(LANDLOCK_ABI))
        .map_err(fail)?
        .create()
        .map_err(fail)?;
    let (listable, readable) = match &hidden {
        Some(hidden) => around(hidden),
        None => (Vec::new(), vec![PathBuf::from("/")]),
    };
    ruleset = ruleset
        .add_rules(path_beneath_rules(&listable, AccessFs::ReadDir))
        .map_err(fail)?
        .add_rules(path_beneath_rules(&readable, read))
        .map_err(fail)?
        .add_rules(path_beneath_rules(&policy.readable, read))
        .map_err(fail)?;
    for path in writable {
        let fd =
            PathFd::new(path).map_err(|error| format!("opening {}: {error}", path.display()))?;
        ruleset = ruleset.add_rule(PathBeneath::new(fd, all)).map_err(fail)?;
    }
    let status = ruleset.restrict_self().map_err(fail)?;
    match status.ruleset {
        RulesetStatus::FullyEnforced => Ok("fully enforced".into()),
        RulesetStatus::PartiallyEnforced => Ok(
            "enforced, but for the rights this kernel's Landlock lacks (pathname sockets before \
             ABI 9)"
                .into(),
        ),
        RulesetStatus::NotEnforced => Err("not supported by this kernel (Linux 5.13+)".into()),
    }
}

/// What may be read when `hidden` may not: its ancestors may be listed (names only, as path
/// resolution and some libraries need), and everything beside the path down to it read.
fn around(hidden: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut listable = Vec::new();
    let mut readable = Vec::new();
    let mut ancestor = PathBuf::from("/");
    for component in hidden.components().skip(1) {
        let next = ancestor.join(component);
        if let Ok(entries) = fs::read_dir(&ancestor) {
            readable.extend(
                entries
                    .flatten()
                    .map(|entry| entry.path())
                    .filter(|path| *path != next),
            );
        }
        listable.push(ancestor);
        ancestor = next;
    }
    (listable, readable)
}

/// seccomp: socket(AF_INET) and socket(AF_INET6) fail with EACCES, and io_uring, whose
/// operations seccomp does not see, is not there.
fn refuse_inet_sockets() -> Result<String, String> {
    use seccompiler::{
        SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule, TargetArch,
    };
    fn fail(error: impl std::fmt::Display) -> String {
        error.to_string()
    }
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(fail)?;
    let domain = |family: i32| -> Result<SeccompRule, seccompiler::BackendError> {
        SeccompRule::new(vec![SeccompCondition::new(
            0,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Eq,
            family as u64,
        )?])
    };
    let rules = [
        (
            libc::SYS_socket,
            vec![
                domain(libc::AF_INET).map_err(fail)?,
                domain(libc::AF_INET6).map_err(fail)?,
            ],
        ),
        (libc::SYS_io_uring_setup, vec![]),
    ]
    .into_iter()
    .collect();
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EACCES as u32),
        arch,
    )
    .map_err(fail)?;
    let program: seccompiler::BpfProgram = filter.try_into().map_err(fail)?;
    seccompiler::apply_filter(&program).map_err(|error| error.to_string())?;
    Ok("no inet sockets, no io_uring".into())
}

fn wait_for(child: Pid) -> Result<WaitStatus, String> {
    loop {
        match waitpid(child, None) {
            Ok(status) => return Ok(status),
            Err(nix::Error::EINTR) => continue,
            Err(error) => return Err(format!("waitpid: {}", errno_text(error))),
        }
    }
}

/// Ends the launcher as the command ended: its exit code, or its signal (the launcher is not
/// PID 1 of any namespace, so the signal kills it).
fn end_like(raw: i32) -> i32 {
    if libc::WIFSIGNALED(raw) {
        let signal = libc::WTERMSIG(raw);
        // SAFETY: resetting a disposition and raising a signal affect only this process.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, signal);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::raise(signal);
        }
        128 + signal
    } else {
        libc::WEXITSTATUS(raw)
    }
}
