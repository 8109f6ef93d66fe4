//! One profile's invariants, whichever the vendor: where it runs, its fresh folder, the Triton
//! cache its invocations share and its time budget; and how each of its invocations is run.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::outputs::create_profile_dir;
use super::pass::{PassOutcome, PassSpec, run_pass};
use super::{ProfileBudget, ProfileTarget, ProfilerSetup};
use crate::devices::Pin;
use crate::sandbox::Access;

/// One profile of one target; its budget starts with it.
pub struct ProfileRun<'a> {
    setup: &'a ProfilerSetup,
    pub target: &'a ProfileTarget,
    pin: &'a Pin,
    /// A fresh folder of this profile's own; each invocation gets a folder inside it.
    pub profile_dir: PathBuf,
    /// Shared by the profile's invocations, so that only the first compiles.
    triton_cache: PathBuf,
    budget: ProfileBudget,
}

impl<'a> ProfileRun<'a> {
    /// Starts a profile of `target` on the device `pin` pins: its budget, and a fresh folder
    /// under the target's folder.
    pub async fn start(
        setup: &'a ProfilerSetup,
        target: &'a ProfileTarget,
        pin: &'a Pin,
    ) -> Result<ProfileRun<'a>, String> {
        let profile_dir = create_profile_dir(&target.folder).await.map_err(|error| {
            format!(
                "error making a profile folder in {}: {error}",
                target.folder.display()
            )
        })?;
        Ok(ProfileRun {
            setup,
            target,
            pin,
            triton_cache: profile_dir.join("triton-cache"),
            profile_dir,
            budget: ProfileBudget::start(setup.total_budget),
        })
    }

    /// The wrapper script and its arguments, for an invocation that writes the names of the
    /// kernels it launched to `kernels_out`.
    pub fn wrapper_args(&self, kernels_out: &Path) -> Vec<OsString> {
        self.setup
            .wrapper_args(&self.target.candidate, kernels_out, &self.triton_cache)
    }

    /// Runs one invocation in `dir`, labelled `what` in its messages, with the profile's Triton
    /// cache and `extra_env` in its environment and `counters` (its `--pmc` group, if any) in
    /// its record.
    pub async fn run_pass(
        &self,
        what: &str,
        program: &Path,
        args: Vec<OsString>,
        dir: PathBuf,
        extra_env: &[(&str, &str)],
        counters: Vec<String>,
    ) -> PassOutcome {
        let cache = self.triton_cache.to_string_lossy();
        let mut env = extra_env.to_vec();
        env.push(("TRITON_CACHE_DIR", &cache));
        let spec = PassSpec {
            label: format!(
                "{what} for {} on device {}",
                self.target.label, self.target.device
            ),
            program: program.to_path_buf(),
            args,
            env: self.setup.child_env(self.pin, &env),
            counters,
            // It writes its pass's folder and the profile's Triton cache, nothing else.
            confinement: self.setup.sandbox.as_ref().map(|sandbox| {
                let tools = self.setup.wrapper.parent().unwrap_or(Path::new("/"));
                sandbox.confinement(&Access {
                    // tools/ lies in the run directory (a profile's own, for `kactors profile`).
                    run_root: tools.parent().unwrap_or(tools),
                    readable: &[tools, &self.target.candidate],
                    writable: &[&self.profile_dir],
                    scratch: &dir.join("scratch"),
                })
            }),
            dir,
        };
        run_pass(
            &spec,
            &self.setup.watchdog,
            &self.budget,
            self.setup.pass_deadline,
            self.setup.kill_grace,
        )
        .await
    }
}

/// Runs blocking work (a filesystem search, a read of large output files) on the blocking pool;
/// a panic in it is the caller's.
pub async fn off_thread<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|join_error| std::panic::resume_unwind(join_error.into_panic()))
}
