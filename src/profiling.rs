//! What the NVIDIA (Nsight Compute) and ROCm (rocprofv3) profilers share: the setup a run gives
//! them, one profiler invocation as a watched child process ([`run_pass`]), the time budget of a
//! profile, and the profile's report, which is both `kactors profile --json`'s object and the
//! details the Profiler actor journals.
//!
//! Every invocation is a child of its own process group, in a fresh folder of its own inside
//! the profile's folder (so no file of an earlier invocation can be read as its output), with
//! the device pin in its environment and no credentials, registered with the Watchdog for its
//! deadline.

mod command;
mod pass;

use std::collections::BTreeMap;
use std::error::Error;
use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use actix::Actor;
use actors::model::DeviceId;
use actors::ports::{ProfileError, ProfileJob, ProfileSummary};
use actors::watchdog::{Watchdog, WatchdogClient};
use serde::Serialize;
use tokio::time::Instant;

use crate::devices::Pin;
use crate::process::{ChildEnv, log_tail};
use crate::rocm::{InstructionMix, PassRecord};
use crate::roofline::{Bottleneck, RooflineVerdict};
use crate::signals::ProcessGroupSignaller;

pub use command::{PlatformProfiler, profile_once};
pub use pass::{PASS_LOG, PassError, PassOutcome, PassSpec, run_pass};

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

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProfiledPlatform {
    Nvidia,
    Rocm,
}

/// The roofline as the report shows it: the verdict without its prose.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReportRoofline {
    pub bottleneck: Bottleneck,
    pub memory_sol_pct: f64,
    pub compute_sol_pct: Option<f64>,
    pub efficiency_pct: f64,
    pub at_roofline: bool,
}

impl From<&RooflineVerdict> for ReportRoofline {
    fn from(verdict: &RooflineVerdict) -> Self {
        ReportRoofline {
            bottleneck: verdict.bottleneck,
            memory_sol_pct: verdict.memory_sol_pct,
            compute_sol_pct: verdict.compute_sol_pct,
            efficiency_pct: verdict.efficiency_pct,
            at_roofline: verdict.at_roofline,
        }
    }
}

/// One profile, as `kactors profile --json` prints it (issue 5) and the journal keeps it. A
/// failed profile has `ok` false, the reason in `error`, and what was measured before it.
///
/// On NVIDIA `counters` is empty: every ncu value is a metric already derived by ncu, and all of
/// them are in `metrics` under their ncu names; `instruction_mix` has no figures there.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProfileReport {
    pub ok: bool,
    pub platform: ProfiledPlatform,
    pub device: DeviceId,
    pub kernels: Vec<String>,
    pub duration_ms: Option<f64>,
    pub counters: BTreeMap<String, f64>,
    pub metrics: BTreeMap<String, f64>,
    pub roofline: Option<ReportRoofline>,
    pub instruction_mix: InstructionMix,
    pub passes: Vec<PassRecord>,
    pub error: Option<String>,
}

impl ProfileReport {
    /// A profile that failed: the kernels and duration known so far, the passes run.
    pub fn failed(
        platform: ProfiledPlatform,
        device: DeviceId,
        kernels: Vec<String>,
        duration_ms: Option<f64>,
        passes: Vec<PassRecord>,
        error: String,
    ) -> Self {
        ProfileReport {
            ok: false,
            platform,
            device,
            kernels,
            duration_ms,
            counters: BTreeMap::new(),
            metrics: BTreeMap::new(),
            roofline: None,
            instruction_mix: InstructionMix::UNAVAILABLE,
            passes,
            error: Some(error),
        }
    }
}

/// What one profile produced: its report always, and for the Profiler actor the summary or why
/// there is none.
#[derive(Clone, Debug, PartialEq)]
pub struct ProfileOutcome {
    pub report: ProfileReport,
    pub verdict: Result<ProfileSummary, ProfileError>,
}

impl ProfileOutcome {
    pub fn measured(report: ProfileReport, bottleneck: Bottleneck, analysis: String) -> Self {
        let summary = ProfileSummary {
            bottleneck: bottleneck_word(bottleneck).to_string(),
            analysis,
            duration_ms: report.duration_ms,
            at_roofline: report
                .roofline
                .as_ref()
                .is_some_and(|roofline| roofline.at_roofline),
            details: serde_json::to_value(&report)
                .expect("a profile report is plain data and always serializes"),
        };
        ProfileOutcome {
            report,
            verdict: Ok(summary),
        }
    }

    pub fn failed(report: ProfileReport, error: ProfileError) -> Self {
        ProfileOutcome {
            report,
            verdict: Err(error),
        }
    }
}

pub fn bottleneck_word(bottleneck: Bottleneck) -> &'static str {
    match bottleneck {
        Bottleneck::Memory => "memory",
        Bottleneck::Compute => "compute",
        Bottleneck::Underutilized => "underutilized",
    }
}

/// The prompt's sentences on the roofline, from measured figures only.
pub fn roofline_analysis(
    profiler: &str,
    kernels: &[String],
    duration_ms: f64,
    verdict: &RooflineVerdict,
) -> String {
    let compute = match verdict.compute_sol_pct {
        Some(compute) => format!("compute SOL {compute:.1}%"),
        None => "compute SOL not measured".to_string(),
    };
    let roof = if verdict.at_roofline {
        "at the roofline"
    } else {
        "not at the roofline"
    };
    format!(
        "{profiler} profile of the measured call (kernels {}; {duration_ms:.4} ms of device \
         time): memory SOL {:.1}%, {compute}, efficiency {:.1}% of peak, {roof}. {}",
        kernels.join(", "),
        verdict.memory_sol_pct,
        verdict.efficiency_pct,
        verdict.evidence
    )
}

/// An error and its sources, joined by ": ".
pub fn error_chain(error: &dyn Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

/// `reason`, then the last lines of the log at `path`, if it has any.
pub async fn with_log_tail(reason: &str, path: &Path) -> String {
    match log_tail(path).await {
        Ok(tail) if !tail.is_empty() => {
            format!("{reason}; {} ends: {}", path.display(), tail.join(" | "))
        }
        _ => reason.to_string(),
    }
}

/// The names of the Triton kernels the wrapper's measured call launched (its `--kernels-out`).
pub async fn read_kernels_out(path: &Path) -> Result<Vec<String>, String> {
    let text = tokio::fs::read_to_string(path).await.map_err(|error| {
        format!(
            "the wrapper wrote no list of launched kernels at {}: {error}",
            path.display()
        )
    })?;
    serde_json::from_str(&text).map_err(|error| {
        format!(
            "list of launched kernels {} is not a JSON list of names: {error}",
            path.display()
        )
    })
}

/// Makes a fresh folder for one profile under `folder`: `profile`, else `profile-2`, ... A
/// kernel profiled again (the best kernel at the end of a run) gets a new one, so that no file
/// of the earlier profile is ever read as this one's.
pub async fn create_profile_dir(folder: &Path) -> io::Result<PathBuf> {
    let folder = absolute(folder);
    tokio::fs::create_dir_all(&folder).await?;
    for attempt in 1..=1000 {
        let name = match attempt {
            1 => "profile".to_string(),
            n => format!("profile-{n}"),
        };
        let dir = folder.join(name);
        match tokio::fs::create_dir(&dir).await {
            Ok(()) => return Ok(dir),
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(error) => return Err(error),
        }
    }
    Err(io::Error::other(format!(
        "{} holds 1000 profile folders already",
        folder.display()
    )))
}

/// Whether `path` is a file this user may execute. Blocking: call it off the runtime's thread.
pub fn is_executable_file(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .is_ok_and(|metadata| metadata.is_file() && metadata.permissions().mode() & 0o111 != 0)
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
    fn analysis_quotes_the_measured_figures_and_the_evidence() {
        let verdict = crate::roofline::judge(
            82.58,
            Some(5.68),
            crate::roofline::RooflineThresholds::NVIDIA,
        );
        let text = roofline_analysis("Nsight Compute", &["add_kernel".into()], 0.045568, &verdict);
        assert_eq!(
            text,
            "Nsight Compute profile of the measured call (kernels add_kernel; 0.0456 ms of device \
             time): memory SOL 82.6%, compute SOL 5.7%, efficiency 82.6% of peak, not at the \
             roofline. memory SOL 82.6% and compute SOL 5.7%: memory is the busier side, so the \
             kernel is memory-bound; 82.6% of peak, under the 95% roofline mark."
        );
        let no_compute =
            crate::roofline::judge(90.0, None, crate::roofline::RooflineThresholds::ROCM);
        let text = roofline_analysis("rocprofv3", &["a".into(), "b".into()], 1.2, &no_compute);
        assert!(text.contains("kernels a, b; 1.2000 ms"), "{text}");
        assert!(
            text.contains("compute SOL not measured, efficiency 90.0% of peak, at the roofline."),
            "{text}"
        );
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

    #[tokio::test]
    async fn each_profile_of_a_folder_gets_a_new_profile_dir() {
        let temp = tempfile::tempdir().unwrap();
        let folder = temp.path().join("candidate_3");
        let first = create_profile_dir(&folder).await.unwrap();
        let second = create_profile_dir(&folder).await.unwrap();
        assert_eq!(first, folder.join("profile"));
        assert_eq!(second, folder.join("profile-2"));
    }

    #[tokio::test]
    async fn a_failure_quotes_the_end_of_the_log() {
        let temp = tempfile::tempdir().unwrap();
        let log = temp.path().join("output.log");
        let mut text = String::new();
        for line in 1..=40 {
            text.push_str(&format!("line {line}\n\n"));
        }
        tokio::fs::write(&log, text).await.unwrap();
        let message = with_log_tail("ncu exited with status 1", &log).await;
        let expected_tail = (29..=40)
            .map(|line| format!("line {line}"))
            .collect::<Vec<_>>()
            .join(" | ");
        assert_eq!(
            message,
            format!(
                "ncu exited with status 1; {} ends: {expected_tail}",
                log.display()
            )
        );
        assert_eq!(
            with_log_tail("no log", &temp.path().join("absent.log")).await,
            "no log"
        );
    }

    #[tokio::test]
    async fn kernels_out_must_be_a_list_of_names() {
        let temp = tempfile::tempdir().unwrap();
        let path = temp.path().join("kernels.json");
        let missing = read_kernels_out(&path).await.unwrap_err();
        assert!(missing.starts_with("the wrapper wrote no list of launched kernels at"));
        tokio::fs::write(&path, "{\"a\": 1}").await.unwrap();
        let wrong = read_kernels_out(&path).await.unwrap_err();
        assert!(wrong.contains("is not a JSON list of names"), "{wrong}");
        tokio::fs::write(&path, "[\"main_kernel\", \"reduce_kernel\"]\n")
            .await
            .unwrap();
        assert_eq!(
            read_kernels_out(&path).await.unwrap(),
            ["main_kernel", "reduce_kernel"]
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
