//! Signals, both ways: SIGINT and SIGTERM reaching kactors become `Interrupt` messages to the
//! Supervisor (SIGHUP is ignored), and the Watchdog's `GroupSignaller` port ends child process groups.

use std::sync::{Mutex, OnceLock};

use actix::Addr;
use actors::ports::{GroupId, GroupSignaller};
use actors::supervisor::{Interrupt, Supervisor};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::signal::unix::{SignalKind, signal};

/// Where SIGINT and SIGTERM go: the Supervisor of the run going on, and the first one's name,
/// kept for `kactors run --strategy all`, which starts no further run after it. Between two
/// runs there is no Supervisor: the signal is only kept.
struct Route {
    supervisor: Option<Addr<Supervisor>>,
    first: Option<&'static str>,
}

static ROUTE: Mutex<Route> = Mutex::new(Route {
    supervisor: None,
    first: None,
});

/// The thread that listens for the process's signals, started by the first run: its own
/// runtime outlives each run's actor system, so that a signal between two runs is not lost.
static LISTENER: OnceLock<Result<(), String>> = OnceLock::new();

/// Ignores SIGXFSZ for the rest of the process: a write past RLIMIT_FSIZE then fails with EFBIG
/// and takes the path of a full disk (the record cut back, the run stopped, exit 1) instead of
/// killing kactors halfway through a journal line. Called once, before anything is written.
pub fn ignore_file_size_limit() {
    // SAFETY: SIG_IGN installs no handler; nothing else of kactors handles SIGXFSZ.
    let _ =
        unsafe { nix::sys::signal::signal(Signal::SIGXFSZ, nix::sys::signal::SigHandler::SigIgn) };
}

/// Forwards every SIGINT and SIGTERM to `supervisor` from now on, which decides what each one
/// means. SIGHUP (a dropped ssh session, a closed terminal) is noted in kactors.log and
/// otherwise ignored: the run goes on unattended, its progress dropped once the terminal is gone.
pub fn forward_signals(supervisor: Addr<Supervisor>) -> std::io::Result<()> {
    LISTENER
        .get_or_init(start_listener)
        .clone()
        .map_err(std::io::Error::other)?;
    route().supervisor = Some(supervisor);
    Ok(())
}

/// The first SIGINT or SIGTERM since the first run started, if one came.
pub fn first_interrupt() -> Option<&'static str> {
    route().first
}

fn route() -> std::sync::MutexGuard<'static, Route> {
    // A panic while the lock was held left nothing half-done: the route is two plain fields.
    ROUTE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn start_listener() -> Result<(), String> {
    let (ready, started) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("kactors-signals".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(error) => {
                    let _ = ready.send(Err(error.to_string()));
                    return;
                }
            };
            runtime.block_on(async move {
                let streams = signal(SignalKind::interrupt()).and_then(|interrupts| {
                    Ok((
                        interrupts,
                        signal(SignalKind::terminate())?,
                        signal(SignalKind::hangup())?,
                    ))
                });
                let (mut interrupts, mut terminations, mut hangups) = match streams {
                    Ok(streams) => streams,
                    Err(error) => {
                        let _ = ready.send(Err(error.to_string()));
                        return;
                    }
                };
                let _ = ready.send(Ok(()));
                loop {
                    let name = tokio::select! {
                        Some(()) = interrupts.recv() => "SIGINT",
                        Some(()) = terminations.recv() => "SIGTERM",
                        Some(()) = hangups.recv() => {
                            tracing::warn!("SIGHUP: the terminal went away; the run goes on unattended");
                            continue;
                        }
                        else => break,
                    };
                    let mut route = route();
                    route.first.get_or_insert(name);
                    if let Some(supervisor) = &route.supervisor {
                        supervisor.do_send(Interrupt {
                            signal: name.to_string(),
                        });
                    }
                }
            });
        });
    spawned.map_err(|error| format!("failed to start the signal thread: {error}"))?;
    started
        .recv()
        .unwrap_or_else(|_| Err("the signal thread ended before it listened".into()))
}

/// Signals whole process groups: profilers and Python start grandchildren, and all of them go.
pub struct ProcessGroupSignaller;

impl ProcessGroupSignaller {
    fn send(group: GroupId, signal: Signal) {
        match killpg(Pid::from_raw(group.0), signal) {
            // The group is already gone: nothing left to end.
            Ok(()) | Err(nix::errno::Errno::ESRCH) => {}
            Err(error) => tracing::warn!(
                "failed to send {signal} to process group {}: {error}",
                group.0
            ),
        }
    }
}

impl GroupSignaller for ProcessGroupSignaller {
    fn terminate(&self, group: GroupId) {
        Self::send(group, Signal::SIGTERM);
    }

    fn kill(&self, group: GroupId) {
        Self::send(group, Signal::SIGKILL);
    }
}
