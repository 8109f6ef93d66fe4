use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

use crate::vendor::Platform;

/// Why a GPU listing tool gave no usable answer. A vendor whose tool fails lists no GPU; the
/// failure is named in the error when no vendor can be chosen, and warned about otherwise.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ToolFailure {
    #[error("{command} could not be started: {source}")]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{command} could not be waited for: {source}")]
    Lost {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{command} did not finish within {timeout:?} and was killed")]
    TimedOut { command: String, timeout: Duration },
    #[error("{command} failed ({status}): {output}")]
    Failed {
        command: String,
        status: ExitStatus,
        output: String,
    },
    #[error("{command} printed output that is not {expected}: {detail}")]
    Unreadable {
        command: String,
        expected: &'static str,
        detail: String,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error("no GPU visible{}{NOOP_HINT}", account(.notes))]
    NoGpuVisible { notes: Vec<String> },
    #[error("ROCm platform was requested but no devices are visible{}{NOOP_HINT}", account(.notes))]
    RocmNoneVisible { notes: Vec<String> },
    #[error("NVIDIA platform was requested but no devices are visible{}{NOOP_HINT}", account(.notes))]
    NvidiaNoneVisible { notes: Vec<String> },
    #[error("NVIDIA platform was requested but ROCm devices were selected (by {masks})")]
    NvidiaRequestedRocmSelected { masks: String },
    #[error(
        "CUDA_VISIBLE_DEVICES={cuda:?} conflicts with {variable}={other:?}: set only one of them, \
         or both to the same list"
    )]
    ConflictingMasks {
        cuda: String,
        variable: &'static str,
        other: String,
    },
    #[error(
        "{variable}={value:?} has the entry {entry:?}, which is neither a device index nor a GPU \
         UUID (GPU-...)"
    )]
    InvalidMaskEntry {
        variable: &'static str,
        value: String,
        entry: String,
    },
    #[error("--gpus lists no GPU")]
    EmptyGpuList,
    #[error("--gpus lists GPU {id}, which is not among the visible {platform} devices ({visible})")]
    GpuNotVisible {
        id: u32,
        platform: Platform,
        visible: String,
    },
    #[error("cannot create the GPU lock directory {path}: {source}")]
    LockDirectory {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot use the GPU lock file {path}: {source}")]
    LockFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// What each vendor's tool and masks said, appended to a "nothing visible" error.
/// Where no GPU is visible, what still runs: the dry run.
pub const NOOP_HINT: &str = " (without a GPU, `--strategy noop` makes the dry run: simulated devices, no Python, no API key)";

fn account(notes: &[String]) -> String {
    if notes.is_empty() {
        String::new()
    } else {
        format!(": {}", notes.join("; "))
    }
}
