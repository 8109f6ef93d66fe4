//! The sandbox of every process that runs candidate code (issue 19): the evaluator's zygote and
//! its children, the profiled wrapper under ncu or rocprofv3, and the finale's test.py.
//!
//! kactors sets it up itself, without root or a setuid helper: the child is spawned as
//! `kactors sandbox-exec <policy> -- <command>` ([`Confinement::apply`]), and that launcher
//! ([`launcher`]) makes user, mount, PID and network namespaces, a bounded tmpfs for the
//! child's scratch, /tmp and /dev/shm, limits on tasks and file sizes, and restricts the
//! command with Landlock and seccomp before it execs. [`probe`] runs the launcher once to learn
//! what this machine allows; `kactors check` prints it, and a run records it and refuses to
//! start with `sandbox: required` when a protection is missing. SECURITY.md says what each
//! protection covers and what it does not.

mod launcher;
mod policy;
mod protections;

use std::path::Path;
use std::process::Stdio;

pub use launcher::sandbox_exec;
pub use policy::{Access, Confinement, Level, Limits, Policy, Sandbox};
pub use protections::{
    Mechanism, Protection, ProtectionState, SandboxReport, SandboxSetting, Step, refusal, warning,
};

/// The launcher's exit code when the sandbox could not be set up (and `--level required`):
/// its reason is on the child's stderr, which is the child's log.
pub const SETUP_FAILED: i32 = 125;

/// The sandbox a run's children that run candidate code get under `setting`, launched by this
/// executable (which has the `sandbox-exec` command); None when it is off.
pub fn for_run(setting: SandboxSetting) -> std::io::Result<Option<Sandbox>> {
    let level = match setting {
        SandboxSetting::Off => return Ok(None),
        SandboxSetting::Required => Level::Required,
        SandboxSetting::BestEffort => Level::BestEffort,
    };
    Ok(Some(Sandbox {
        launcher: std::env::current_exe()?,
        level,
        limits: Limits::default(),
    }))
}

/// What the launcher `launcher` can set up on this machine: it is run once with `--probe` in a
/// fresh temporary folder.
pub fn probe(launcher: &Path) -> Result<SandboxReport, String> {
    let folder = std::env::temp_dir().join(format!("kactors-sandbox-probe-{}", std::process::id()));
    std::fs::create_dir_all(&folder).map_err(|error| {
        format!(
            "cannot make {} to probe the sandbox in: {error}",
            folder.display()
        )
    })?;
    let report = probe_in(launcher, &folder);
    let _ = std::fs::remove_dir_all(&folder);
    report
}

fn probe_in(launcher: &Path, folder: &Path) -> Result<SandboxReport, String> {
    let sandbox = Sandbox {
        launcher: launcher.to_path_buf(),
        level: Level::BestEffort,
        limits: Limits::default(),
    };
    let policy = sandbox.policy(&Access {
        run_root: folder,
        readable: &[],
        writable: &[folder],
        scratch: &folder.join("scratch"),
    });
    let mut args = policy.to_args();
    args.push("--probe".into());
    let output = std::process::Command::new(launcher)
        .args(&args)
        .stdin(Stdio::null())
        .output()
        .map_err(|error| {
            format!(
                "cannot run {} to probe the sandbox: {error}",
                launcher.display()
            )
        })?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).map_err(|_| {
        format!(
            "the sandbox probe ({} sandbox-exec --probe) said no report ({}): {}",
            launcher.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )
    })
}
