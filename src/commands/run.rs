//! `kactors run`: resolve the configuration, the kernel directory and the devices, make the run
//! directory, then start the actor system and wait for the Supervisor's verdict.
//! `--strategy all` runs every strategy that fits the host in turn (`all.rs`).

mod all;
mod execute;
mod invocation;
mod logging;

use std::path::Path;
use std::time::SystemTime;

use crate::cli::RunArgs;
use crate::run_dir::RunDirectory;

use super::CommandError;

pub(super) use all::read_run;
pub(super) use execute::{Launch, execute};
pub(super) use invocation::{Invocation, KernelFingerprint, RecordedRun, settings_changes};

pub(super) fn run(args: RunArgs) -> Result<i32, CommandError> {
    if args.strategy == all::ALL {
        return all::run_all(&args);
    }
    let launch = Launch::prepare(Invocation::of(&args)?, &args.run_dir, None)?;
    let run_dir = match create_run_dir(&launch, &args.run_dir) {
        Ok(run_dir) => run_dir,
        Err(error) => return Err(launch.abandon(error)),
    };
    execute(launch, run_dir, args.json, None)
}

/// `<parent>/<strategy>-<timestamp>/` with run.yaml: the settings, how the run was asked for,
/// the kernel's files by hash and the machine as the launch found it.
fn create_run_dir(launch: &Launch, parent: &Path) -> Result<RunDirectory, CommandError> {
    let run_yaml = invocation::run_yaml(
        &launch.settings,
        &launch.invocation,
        &KernelFingerprint::of(&launch.kernel.root),
        &launch.preflight,
        &launch.gpu_state(),
    );
    Ok(RunDirectory::create(
        parent,
        &launch.settings.strategy,
        SystemTime::now(),
        &run_yaml,
    )?)
}
