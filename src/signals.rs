//! Signals, both ways: SIGINT and SIGTERM reaching kactors become `Interrupt` messages to the
//! Supervisor (SIGHUP is ignored), and the Watchdog's `GroupSignaller` port ends child process groups.

use actix::Addr;
use actors::ports::{GroupId, GroupSignaller};
use actors::supervisor::{Interrupt, Supervisor};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::signal::unix::{SignalKind, signal};

/// Forwards every SIGINT and SIGTERM to the Supervisor, which decides what each one means.
/// SIGHUP (a dropped ssh session, a closed terminal) is noted in kactors.log and otherwise
/// ignored: the run goes on unattended, its progress dropped once the terminal is gone.
pub fn forward_signals(supervisor: Addr<Supervisor>) -> std::io::Result<()> {
    let mut interrupts = signal(SignalKind::interrupt())?;
    let mut terminations = signal(SignalKind::terminate())?;
    let mut hangups = signal(SignalKind::hangup())?;
    actix_rt::spawn(async move {
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
            supervisor.do_send(Interrupt {
                signal: name.to_string(),
            });
        }
    });
    Ok(())
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
