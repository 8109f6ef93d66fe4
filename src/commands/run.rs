//! `kactors run`: resolve the configuration, the kernel directory and the devices, make the run
//! directory, then start the actor system and wait for the Supervisor's verdict.

mod execute;
mod invocation;

use std::time::SystemTime;

use crate::cli::RunArgs;
use crate::run_dir::RunDirectory;

use super::CommandError;

pub(super) use execute::{Continuation, Launch, describe, execute};
pub(super) use invocation::{Invocation, KernelFingerprint, RecordedRun, settings_changes};

pub(super) fn run(args: RunArgs) -> Result<i32, CommandError> {
    let launch = Launch::prepare(Invocation::of(&args)?, &args.run_dir, None)?;
    let run_yaml = invocation::run_yaml(
        &launch.settings,
        &launch.invocation,
        &KernelFingerprint::of(&launch.kernel.root),
        &launch.preflight,
        &launch.gpu_state(),
    );
    let run_dir = match RunDirectory::create(
        &args.run_dir,
        &launch.settings.strategy,
        SystemTime::now(),
        &run_yaml,
    ) {
        Ok(run_dir) => run_dir,
        Err(error) => return Err(launch.abandon(error.into())),
    };
    execute(launch, run_dir, args.json, None)
}
