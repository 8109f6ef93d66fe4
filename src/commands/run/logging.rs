//! Where tracing's lines go while a run is going: its run directory's kactors.log, and stderr
//! through the live view's bars when they are up. tracing takes one subscriber per process,
//! so it is installed once, writing to whatever the latest run pointed it at: the runs of
//! `kactors run --strategy all` each get their own kactors.log.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::sync::{Mutex, MutexGuard, Once, PoisonError};

use crate::progress::LogWriter;

/// The run's kactors.log, and the writer to stderr of its view.
struct Targets {
    file: Option<File>,
    stderr: Option<LogWriter>,
}

static TARGETS: Mutex<Targets> = Mutex::new(Targets {
    file: None,
    stderr: None,
});

static INSTALL: Once = Once::new();

fn targets() -> MutexGuard<'static, Targets> {
    // A write that panicked left nothing half-done: the targets are two plain fields.
    TARGETS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Points tracing at `run_root`'s kactors.log (appended to: a resumed run goes on writing the
/// same log) and at `to_stderr` (the live view's bars, when they are up).
pub(super) fn log_to(run_root: &Path, to_stderr: LogWriter) {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(run_root.join("kactors.log"))
        .ok();
    *targets() = Targets {
        file,
        stderr: Some(to_stderr),
    };
    INSTALL.call_once(install);
}

fn install() {
    use tracing_subscriber::prelude::*;
    use tracing_subscriber::{EnvFilter, filter::LevelFilter, fmt};
    // A log line that cannot be written (a full disk, a closed stderr) is dropped: tracing's
    // own report of the failure would go to stderr and panic there.
    let to_file = fmt::layer()
        .log_internal_errors(false)
        .with_ansi(false)
        .with_writer(|| Routed::File)
        .with_filter(LevelFilter::INFO);
    let to_stderr = fmt::layer()
        .log_internal_errors(false)
        .with_writer(|| Routed::Stderr)
        .with_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")));
    let _ = tracing_subscriber::registry()
        .with(to_file)
        .with(to_stderr)
        .try_init();
}

/// One log line's way to the current run's target.
enum Routed {
    File,
    Stderr,
}

impl Write for Routed {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut targets = targets();
        match self {
            Routed::File => match &mut targets.file {
                Some(file) => file.write(buf),
                None => Ok(buf.len()),
            },
            Routed::Stderr => match &mut targets.stderr {
                Some(stderr) => stderr.write(buf),
                None => io::stderr().write(buf),
            },
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        let mut targets = targets();
        match self {
            Routed::File => targets.file.as_mut().map_or(Ok(()), Write::flush),
            Routed::Stderr => targets.stderr.as_mut().map_or(Ok(()), Write::flush),
        }
    }
}
