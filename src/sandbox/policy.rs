//! What one sandboxed child may write and how much it may use, and how a spawner asks for it:
//! its command line becomes `kactors sandbox-exec <policy> -- <command line>`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::process::ChildSpec;

/// Whether the launcher may start a child whose sandbox lacks a protection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Level {
    /// It may not: the launcher exits with [`SETUP_FAILED`](super::SETUP_FAILED) instead.
    Required,
    /// It may, with what it got.
    BestEffort,
}

/// The bounds of one sandbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The tmpfs that holds the scratch folder, /tmp and /dev/shm.
    pub scratch_bytes: u64,
    /// Processes and threads together: torch.compile's workers and Triton's threads fit.
    pub max_tasks: u32,
    /// The largest file the child may write (an ncu report is the largest kactors expects).
    pub max_file_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            scratch_bytes: 2 << 30,
            max_tasks: 4096,
            max_file_bytes: 8 << 30,
        }
    }
}

/// How a run confines the children that run candidate code: the launcher (this binary, which
/// has the `sandbox-exec` command), the level and the bounds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sandbox {
    pub launcher: PathBuf,
    pub level: Level,
    pub limits: Limits,
}

/// The sandbox of one child: the folders it may write besides its scratch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    pub level: Level,
    pub limits: Limits,
    /// Writable, with everything beneath. Nothing else is, but the scratch folder, /dev and
    /// the sandbox's own /proc.
    pub writable: Vec<PathBuf>,
    /// A folder of the child's own, bounded by `limits.scratch_bytes`: its Triton cache, /tmp
    /// and /dev/shm live there.
    pub scratch: PathBuf,
    /// A folder the child may not read (the run directory: its journal, prompts, replies and
    /// other candidates), but for what `readable` names inside it and what it may write.
    pub hidden: Option<PathBuf>,
    /// Readable inside `hidden`: the run's tools/, the kernel file of the candidate profiled.
    pub readable: Vec<PathBuf>,
}

impl Policy {
    /// The launcher's arguments before `--`.
    pub fn to_args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec![
            "sandbox-exec".into(),
            "--level".into(),
            match self.level {
                Level::Required => "required",
                Level::BestEffort => "best-effort",
            }
            .into(),
            "--scratch".into(),
            self.scratch.clone().into(),
            "--scratch-bytes".into(),
            self.limits.scratch_bytes.to_string().into(),
            "--max-tasks".into(),
            self.limits.max_tasks.to_string().into(),
            "--max-file-bytes".into(),
            self.limits.max_file_bytes.to_string().into(),
        ];
        for path in &self.writable {
            args.push("--writable".into());
            args.push(path.clone().into());
        }
        if let Some(hidden) = &self.hidden {
            args.push("--hide".into());
            args.push(hidden.clone().into());
        }
        for path in &self.readable {
            args.push("--readable".into());
            args.push(path.clone().into());
        }
        args
    }
}

impl Sandbox {
    /// The policy of a child that may write in `writable` and in `scratch`, and read
    /// everything but the run directory `run_root`, of which only `readable` and what it writes.
    pub fn policy(&self, access: &Access<'_>) -> Policy {
        let paths = |paths: &[&Path]| paths.iter().map(|path| path.to_path_buf()).collect();
        Policy {
            level: self.level,
            limits: self.limits,
            writable: paths(access.writable),
            scratch: access.scratch.to_path_buf(),
            hidden: Some(access.run_root.to_path_buf()),
            readable: paths(access.readable),
        }
    }

    pub fn confinement(&self, access: &Access<'_>) -> Confinement {
        Confinement {
            launcher: self.launcher.clone(),
            policy: self.policy(access),
        }
    }
}

/// What one child may reach of a run directory.
#[derive(Clone, Copy, Debug)]
pub struct Access<'a> {
    pub run_root: &'a Path,
    pub readable: &'a [&'a Path],
    pub writable: &'a [&'a Path],
    pub scratch: &'a Path,
}

/// One child's sandbox: the run's launcher, with the child's own policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Confinement {
    pub launcher: PathBuf,
    pub policy: Policy,
}

impl Confinement {
    /// `spec` as the launcher runs it inside the policy's sandbox: the same child, its program
    /// and arguments after the launcher's.
    pub fn apply(&self, mut spec: ChildSpec) -> ChildSpec {
        let mut args = self.policy.to_args();
        args.push("--".into());
        args.push(spec.program.clone().into());
        args.append(&mut spec.args);
        spec.program = self.launcher.clone();
        spec.args = args;
        spec
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::{Protocol, child_environment};

    #[test]
    fn a_confined_child_runs_through_the_launcher_with_its_own_command_after_the_policy() {
        let sandbox = Sandbox {
            launcher: "/opt/kactors".into(),
            level: Level::Required,
            limits: Limits::default(),
        };
        let spec = ChildSpec {
            program: "/usr/bin/python3".into(),
            args: vec!["evaluator.py".into(), "--config".into(), "{}".into()],
            cwd: "/run/devices/0".into(),
            env: child_environment(Vec::new(), &Default::default(), &[]),
            log_path: "/run/devices/0/evaluator.log".into(),
            protocol: Protocol::Pipes,
            label: "evaluator of device 0".into(),
        };
        let confinement = sandbox.confinement(&Access {
            run_root: Path::new("/run"),
            readable: &[Path::new("/run/tools")],
            writable: &[Path::new("/run/candidates/3")],
            scratch: Path::new("/run/devices/0/scratch"),
        });
        let confined = confinement.apply(spec.clone());
        assert_eq!(confined.program, PathBuf::from("/opt/kactors"));
        let args: Vec<String> = confined
            .args
            .iter()
            .map(|arg| arg.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            args,
            [
                "sandbox-exec",
                "--level",
                "required",
                "--scratch",
                "/run/devices/0/scratch",
                "--scratch-bytes",
                "2147483648",
                "--max-tasks",
                "4096",
                "--max-file-bytes",
                "8589934592",
                "--writable",
                "/run/candidates/3",
                "--hide",
                "/run",
                "--readable",
                "/run/tools",
                "--",
                "/usr/bin/python3",
                "evaluator.py",
                "--config",
                "{}",
            ]
        );
        assert_eq!(
            (confined.cwd, confined.log_path, confined.protocol),
            (spec.cwd, spec.log_path, spec.protocol)
        );
    }
}
