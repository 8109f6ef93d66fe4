//! The vendor-neutral profiling core: what the NVIDIA (Nsight Compute) and ROCm (rocprofv3)
//! profilers share. The setup a run gives them, one profiler invocation as a watched child
//! process ([`run_pass`]), the time budget of a profile, the roofline verdict and the prompt's
//! sentences on it, and a profile's outcome: the typed profile (`actors::profile::KernelProfile`)
//! the prompts read and the journal keeps, and the report `kactors profile --json` prints.
//!
//! Every invocation is a child of its own process group, in a fresh folder of its own inside
//! the profile's folder (so no file of an earlier invocation can be read as its output), with
//! the device pin in its environment and no credentials, registered with the Watchdog for its
//! deadline.
//!
//! Nothing here knows a vendor's tool: `nvidia` and `rocm` import this module, never the other
//! way, and never each other.

mod outputs;
mod pass;
mod profile_run;
mod report;
mod roofline;

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::time::Duration;

use actix::Actor;
use actors::model::DeviceId;
use actors::ports::ProfileJob;
use actors::watchdog::{Watchdog, WatchdogClient};
use tokio::time::Instant;

use crate::devices::Pin;
use crate::process::ChildEnv;
use crate::signals::ProcessGroupSignaller;

pub use outputs::{
    create_profile_dir, error_chain, is_executable_file, read_kernels_out, with_log_tail,
};
pub use pass::{
    FreshDirError, PASS_LOG, PassError, PassOutcome, PassRecord, PassSpec, ensure_fresh_dir,
    run_pass,
};
pub use profile_run::{ProfileRun, off_thread};
pub use report::{ProfileOutcome, ProfileReport};
pub use roofline::{
    Bottleneck, Roofline, RooflineThresholds, RooflineVerdict, judge, roofline_analysis,
};

/// What a run gives its profiler, whichever the vendor.
#[derive(Clone)]
pub struct ProfilerSetup {
    /// The configured Python, as configured: never resolved through symlinks, because a venv's
    /// python is a symlink and rocprofv3 is looked for beside it.
    pub python: PathBuf,
    /// The profiled process's script (templates/profile_wrapper.py, rendered).
    pub wrapper: PathBuf,
    pub kernel_dir: PathBuf,
    /// The wrapper's `--config` object (dtype, seed, warmup_calls); each profile adds its
    /// `triton_cache_dir`.
    pub wrapper_config: serde_json::Map<String, serde_json::Value>,
    /// kactors' own environment, read once (`std::env::vars_os()`): children get it stripped of
    /// credentials, and PATH is where the profilers are looked up.
    pub parent_env: Vec<(OsString, OsString)>,
    pub pins: BTreeMap<DeviceId, Pin>,
    pub watchdog: WatchdogClient,
    /// The Watchdog's grace between SIGTERM and SIGKILL: a killed pass's process group is kept
    /// (its leader unreaped) until the SIGKILL has gone out.
    pub kill_grace: Duration,
    /// The most one profiler invocation may take.
    pub pass_deadline: Duration,
    /// The most one whole profile may take, every pass and retry counted.
    pub total_budget: Duration,
    /// The sandbox of every invocation (the profiler and the wrapper it runs, which imports
    /// the candidate); None when the run's `sandbox` is off.
    pub sandbox: Option<crate::sandbox::Sandbox>,
}

impl ProfilerSetup {
    /// PATH as kactors itself sees it.
    pub fn path_var(&self) -> Option<&OsStr> {
        self.parent_env
            .iter()
            .find(|(name, _)| name == "PATH")
            .map(|(_, value)| value.as_os_str())
    }

    pub fn pin(&self, device: DeviceId) -> Result<&Pin, String> {
        self.pins.get(&device).ok_or_else(|| {
            format!("no device pin for device {device}: the run pins no worker to it")
        })
    }

    /// A child's environment: kactors' own without credentials, then `extra`, then the device
    /// pin, which has the last word.
    pub fn child_env(&self, pin: &Pin, extra: &[(&str, &str)]) -> ChildEnv {
        pin.child_environment(self.parent_env.iter().cloned(), extra)
    }

    /// The Python that runs the wrapper, as the children's command lines name it.
    pub fn python_for_child(&self) -> PathBuf {
        absolute(&self.python)
    }

    /// The wrapper script and its arguments, for one invocation.
    pub fn wrapper_args(
        &self,
        candidate: &Path,
        kernels_out: &Path,
        triton_cache: &Path,
    ) -> Vec<OsString> {
        let mut config = self.wrapper_config.clone();
        config.insert(
            "triton_cache_dir".to_string(),
            serde_json::Value::String(absolute(triton_cache).to_string_lossy().into_owned()),
        );
        vec![
            absolute(&self.wrapper).into_os_string(),
            "--kernel-dir".into(),
            absolute(&self.kernel_dir).into_os_string(),
            "--candidate".into(),
            absolute(candidate).into_os_string(),
            "--kernels-out".into(),
            absolute(kernels_out).into_os_string(),
            "--config".into(),
            serde_json::Value::Object(config).to_string().into(),
        ]
    }
}

/// `path` made absolute against kactors' working directory, without resolving symlinks: every
/// child runs in a folder of its own, where a relative path would name another file. A bare
/// program name (`python3`) stays as it is, for the lookup on the child's PATH.
pub fn absolute(path: &Path) -> PathBuf {
    if path.parent() == Some(Path::new("")) {
        return path.to_path_buf();
    }
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// A Watchdog for `kactors profile`, which runs without the Supervisor: it journals nothing.
/// Call it inside an actix System.
pub fn standalone_watchdog(kill_grace: Duration) -> WatchdogClient {
    WatchdogClient::new(Watchdog::new(Box::new(ProcessGroupSignaller), kill_grace, None).start())
}

/// One kernel to profile on one device.
#[derive(Clone, Debug, PartialEq)]
pub struct ProfileTarget {
    pub device: DeviceId,
    /// The kernel file the wrapper imports.
    pub candidate: PathBuf,
    /// The profile's files go in a fresh folder under it (`profile`, `profile-2`, ...).
    pub folder: PathBuf,
    /// The Triton kernels its verification saw launch; empty when not known, and the profiler
    /// finds them out itself.
    pub kernel_names: Vec<String>,
    /// Names the kernel in messages, e.g. "candidate 3".
    pub label: String,
}

impl ProfileTarget {
    /// The Profiler actor's job: `kernel.py` in the candidate's folder.
    pub fn of_job(job: &ProfileJob) -> Self {
        ProfileTarget {
            device: job.device,
            candidate: job.folder.join("kernel.py"),
            folder: job.folder.clone(),
            kernel_names: job.kernel_names.clone(),
            label: format!("candidate {}", job.candidate),
        }
    }
}

/// The time left to one profile: every pass and retry is counted against it.
#[derive(Clone, Copy, Debug)]
pub struct ProfileBudget {
    started: Instant,
    total: Duration,
}

impl ProfileBudget {
    pub fn start(total: Duration) -> Self {
        ProfileBudget {
            started: Instant::now(),
            total,
        }
    }

    pub fn total(&self) -> Duration {
        self.total
    }

    pub fn remaining(&self) -> Duration {
        self.total.saturating_sub(self.started.elapsed())
    }

    /// The deadline of the next pass: its own, never beyond what is left; `None` when nothing
    /// is left.
    pub fn pass_deadline(&self, per_pass: Duration) -> Option<Duration> {
        Some(per_pass.min(self.remaining())).filter(|deadline| !deadline.is_zero())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pass_deadline_never_goes_beyond_the_budget() {
        let budget = ProfileBudget::start(Duration::from_secs(60));
        assert_eq!(
            budget.pass_deadline(Duration::from_secs(10)),
            Some(Duration::from_secs(10))
        );
        let nearly_spent = budget
            .pass_deadline(Duration::from_secs(600))
            .expect("time is left");
        assert!(nearly_spent <= Duration::from_secs(60));
        assert!(nearly_spent > Duration::from_secs(50));
        let spent = ProfileBudget::start(Duration::ZERO);
        assert_eq!(spent.pass_deadline(Duration::from_secs(10)), None);
    }

    #[test]
    fn relative_paths_are_made_absolute_and_bare_program_names_kept() {
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(absolute(Path::new("python3")), Path::new("python3"));
        assert_eq!(
            absolute(Path::new("venv/bin/python")),
            cwd.join("venv/bin/python")
        );
        assert_eq!(absolute(Path::new("./python3")), cwd.join("python3"));
        assert_eq!(
            absolute(Path::new("/usr/bin/python3")),
            Path::new("/usr/bin/python3")
        );
    }

    #[test]
    fn the_wrapper_gets_its_arguments_and_the_shared_triton_cache() {
        let config = serde_json::json!({"dtype": "bf16", "warmup_calls": 3});
        let serde_json::Value::Object(wrapper_config) = config else {
            unreachable!("a JSON object literal")
        };
        let setup = Setup::with_config(wrapper_config);
        let args = setup.wrapper_args(
            Path::new("/run/c3/kernel.py"),
            Path::new("/run/c3/profile/timing/kernels.json"),
            Path::new("/run/c3/profile/triton-cache"),
        );
        let args: Vec<String> = args
            .into_iter()
            .map(|arg| arg.into_string().unwrap())
            .collect();
        assert_eq!(
            args[..8],
            [
                "/k/templates/profile_wrapper.py",
                "--kernel-dir",
                "/k/examples/matvec",
                "--candidate",
                "/run/c3/kernel.py",
                "--kernels-out",
                "/run/c3/profile/timing/kernels.json",
                "--config",
            ]
        );
        let config: serde_json::Value = serde_json::from_str(&args[8]).unwrap();
        assert_eq!(
            config,
            serde_json::json!({
                "dtype": "bf16",
                "warmup_calls": 3,
                "triton_cache_dir": "/run/c3/profile/triton-cache"
            })
        );
    }

    /// The parts of a setup that need no Watchdog, for the pure helpers.
    struct Setup;

    impl Setup {
        fn with_config(
            wrapper_config: serde_json::Map<String, serde_json::Value>,
        ) -> ProfilerSetup {
            // A Watchdog address needs an actix System; the helpers tested here never use it.
            let system = actix::System::new();
            let watchdog = system.block_on(async { standalone_watchdog(Duration::from_secs(1)) });
            ProfilerSetup {
                python: PathBuf::from("/venv/bin/python"),
                wrapper: PathBuf::from("/k/templates/profile_wrapper.py"),
                kernel_dir: PathBuf::from("/k/examples/matvec"),
                wrapper_config,
                parent_env: vec![
                    ("PATH".into(), "/usr/bin:/bin".into()),
                    ("OPENAI_API_KEY".into(), "sk-secret".into()),
                    ("CUDA_VISIBLE_DEVICES".into(), "0,1".into()),
                ],
                pins: BTreeMap::new(),
                watchdog,
                kill_grace: Duration::from_secs(1),
                pass_deadline: Duration::from_secs(10),
                total_budget: Duration::from_secs(60),
                sandbox: None,
            }
        }
    }

    #[test]
    fn a_child_gets_the_pin_over_everything_and_no_credentials() {
        let setup = Setup::with_config(serde_json::Map::new());
        assert_eq!(setup.path_var(), Some(OsStr::new("/usr/bin:/bin")));
        let pin = crate::devices::Device {
            id: 1,
            name: "NVIDIA H200".into(),
            kind: crate::devices::DeviceKind::Nvidia {
                uuid: "GPU-1".into(),
                bus_id: "00000000:00:07.0".into(),
            },
            spec: None,
        }
        .pin();
        let env = setup.child_env(&pin, &[("LC_ALL", "C"), ("CUDA_VISIBLE_DEVICES", "7")]);
        assert_eq!(env.get("CUDA_VISIBLE_DEVICES"), Some(OsStr::new("GPU-1")));
        assert_eq!(env.get("LC_ALL"), Some(OsStr::new("C")));
        assert_eq!(env.get("OPENAI_API_KEY"), None);
        assert_eq!(env.get("PATH"), Some(OsStr::new("/usr/bin:/bin")));
    }
}
