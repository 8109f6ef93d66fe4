//! The rocprofv3 profiler of a run: the timing pass, then one counter pass per `--pmc` group
//! (with the other EA spelling as a retry), each invocation watched, in a folder of its own.
//!
//! On ROCm any failed profile stops profiling for the run: the error is
//! `ProfileError::Unavailable`, and the run goes on on timing alone.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use actors::model::{DeviceId, Vendor};
use actors::ports::{KernelProfiler, LocalFuture, ProfileError, ProfileJob, ProfileSummary};
use actors::profile::{InstructionMix, KernelProfile};
use tokio::sync::OnceCell;

use super::counter_groups::{CounterGroup, counter_pass_plan, parse_available_counters};
use super::profile::{RocmProfile, RocmProfileError, read_counter_pass, read_timing_pass};
use super::rocm_roofline::RocmPeaks;
use super::rocprof_cli::{RocprofCapabilities, counter_pass_args, timing_pass_args};
use super::selection::KernelsUnderTest;
use crate::profiling::{
    PassOutcome, PassRecord, ProfileOutcome, ProfileReport, ProfileRun, ProfileTarget,
    ProfilerSetup, RooflineThresholds, error_chain, is_executable_file, off_thread,
    read_kernels_out, roofline_analysis, with_log_tail,
};

const KERNELS_OUT: &str = "kernels.json";
/// Where rocprofv3 is when ROCm is installed system-wide.
const SYSTEM_ROCPROF: &str = "/opt/rocm/bin/rocprofv3";

/// What device discovery and the spec table say about one device.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RocmDeviceFacts {
    /// TARGET_GRAPHICS_VERSION (`gfx942`): which EA counter spelling to try first.
    pub gfx_target: Option<String>,
    /// The spec row's peaks; without them no roofline can be computed.
    pub peaks: Option<RocmPeaks>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct RocprofSettings {
    /// `platform_kwargs.rocprof_bin_path`.
    pub rocprof_bin_path: Option<PathBuf>,
    pub targets: BTreeMap<DeviceId, RocmDeviceFacts>,
    /// The dtype the kernels compute in, as the evaluator resolves it: it picks the MFMA
    /// counter and the peak of the compute roofline.
    pub dtype: String,
    pub thresholds: RooflineThresholds,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "rocprofv3 not found (looked for {}): install ROCm's rocprofiler-sdk, or set \
     platform_kwargs.rocprof_bin_path",
    searched.iter().map(|path| path.display().to_string()).collect::<Vec<_>>().join(", ")
)]
pub struct RocprofNotFound {
    pub searched: Vec<PathBuf>,
}

/// Finds rocprofv3: the configured `platform_kwargs.rocprof_bin_path` alone when given, else
/// `rocprofv3` on PATH, else beside the configured Python (where the torch ROCm wheels put it;
/// the Python's own path, never resolved through symlinks, since a venv's python links to an
/// interpreter elsewhere), else /opt/rocm/bin. `is_executable` is the filesystem check.
pub fn resolve_rocprof_bin(
    configured: Option<&Path>,
    path_var: Option<&OsStr>,
    python: &Path,
    is_executable: impl Fn(&Path) -> bool,
) -> Result<PathBuf, RocprofNotFound> {
    let candidates: Vec<PathBuf> = match configured {
        Some(path) => vec![path.to_path_buf()],
        None => path_var
            .into_iter()
            .flat_map(std::env::split_paths)
            .map(|dir| dir.join("rocprofv3"))
            .chain(
                python
                    .parent()
                    .filter(|dir| !dir.as_os_str().is_empty())
                    .map(|dir| dir.join("rocprofv3")),
            )
            .chain([PathBuf::from(SYSTEM_ROCPROF)])
            .collect(),
    };
    match candidates.iter().find(|candidate| is_executable(candidate)) {
        Some(found) => Ok(found.clone()),
        None => Err(RocprofNotFound {
            searched: candidates,
        }),
    }
}

/// The installed rocprofv3, as read once per run.
#[derive(Debug)]
struct RocprofTool {
    binary: PathBuf,
    capabilities: RocprofCapabilities,
    /// What `rocprofv3 -L` listed; empty when it could not be listed.
    available: BTreeSet<String>,
}

pub struct RocprofProfiler {
    setup: ProfilerSetup,
    settings: RocprofSettings,
    /// Read by the run's first profile; a failure is kept, since it would fail every profile.
    tool: OnceCell<Result<Rc<RocprofTool>, String>>,
}

/// What a profile measured before it stopped, for the report of a failed one.
#[derive(Default)]
struct Progress {
    kernels: Option<KernelsUnderTest>,
    duration_ms: Option<f64>,
    passes: Vec<PassRecord>,
}

impl RocprofProfiler {
    pub fn new(setup: ProfilerSetup, settings: RocprofSettings) -> Self {
        RocprofProfiler {
            setup,
            settings,
            tool: OnceCell::new(),
        }
    }

    pub async fn profile_target(&self, target: &ProfileTarget) -> ProfileOutcome {
        let mut progress = Progress::default();
        let (report, reason) = match self.measure(target, &mut progress).await {
            Ok(profile) => match profile.judged() {
                Ok((measured, evidence)) => {
                    let analysis = analysis_of(&measured, evidence, self.peaks_of(target));
                    return ProfileOutcome::measured(
                        target.device,
                        measured,
                        analysis,
                        progress.passes,
                    );
                }
                Err(error) => (
                    profile.unjudged_report(target.device, progress.passes, error),
                    error.to_string(),
                ),
            },
            Err(reason) => (
                ProfileReport::failed(
                    Vendor::Rocm,
                    target.device,
                    progress
                        .kernels
                        .map_or_else(Vec::new, |kernels| kernels.names().to_vec()),
                    progress.duration_ms,
                    progress.passes,
                    reason.clone(),
                ),
                reason,
            ),
        };
        tracing::warn!(
            "rocprofv3 profile of {} on device {} failed: {reason}; profiling stops for this run",
            target.label,
            target.device
        );
        let error = ProfileError::Unavailable(format!(
            "rocprofv3 profile of {} on device {} failed: {reason}; continuing on timing alone",
            target.label, target.device
        ));
        ProfileOutcome::failed(report, error)
    }

    fn peaks_of(&self, target: &ProfileTarget) -> Option<&RocmPeaks> {
        self.settings
            .targets
            .get(&target.device)
            .and_then(|facts| facts.peaks.as_ref())
    }

    async fn measure(
        &self,
        target: &ProfileTarget,
        progress: &mut Progress,
    ) -> Result<RocmProfile, String> {
        let facts = self.settings.targets.get(&target.device);
        let Some(peaks) = facts.and_then(|facts| facts.peaks.clone()) else {
            return Err(format!(
                "no peak figures for device {}: no row of the GPU spec table matched it, so no \
                 roofline can be computed",
                target.device
            ));
        };
        let gfx_target = facts.and_then(|facts| facts.gfx_target.clone());
        let pin = self.setup.pin(target.device)?;
        let run = ProfileRun::start(&self.setup, target, pin).await?;
        let tool = self.tool(&run).await?;

        let (kernels, duration_ms) = self.timing_pass(&run, &tool, progress).await?;
        let mut counters = BTreeMap::new();
        let plan = counter_pass_plan(gfx_target.as_deref(), &tool.available);
        for (index, pass) in plan.iter().enumerate() {
            let measured = self
                .counter_pass(&run, &tool, index + 1, pass.attempts(), &kernels, progress)
                .await?;
            counters.extend(measured);
        }
        Ok(RocmProfile::from_measurements(
            &kernels,
            duration_ms,
            counters,
            &peaks,
            &self.settings.dtype,
            self.settings.thresholds,
        ))
    }

    /// The kernels under test (written by the wrapper) and the measured call's duration.
    async fn timing_pass(
        &self,
        run: &ProfileRun<'_>,
        tool: &RocprofTool,
        progress: &mut Progress,
    ) -> Result<(KernelsUnderTest, f64), String> {
        let dir = run.profile_dir.join("timing");
        let kernels_out = dir.join(KERNELS_OUT);
        let args = timing_pass_args(
            &tool.capabilities,
            &dir,
            "timing_%pid%",
            &self.setup.python_for_child(),
            &run.wrapper_args(&kernels_out),
        )
        .map_err(|error| error.to_string())?;
        let outcome = run
            .run_pass(
                "rocprofv3 timing pass",
                &tool.binary,
                args,
                dir.clone(),
                &[],
                Vec::new(),
            )
            .await;
        progress.passes.push(outcome.record.clone());
        if let Some(reason) = outcome.failure("rocprofv3 timing pass") {
            return Err(with_log_tail(&reason, &outcome.log_path).await);
        }
        let recorded = read_kernels_out(&kernels_out).await?;
        let kernels = KernelsUnderTest::new(recorded).map_err(|error| error.to_string())?;
        progress.kernels = Some(kernels.clone());
        let record = outcome.record.clone();
        let read_kernels = kernels.clone();
        let timing = off_thread(move || read_timing_pass(&record, &dir, &read_kernels))
            .await
            .map_err(|error| error_chain(&error))?;
        progress.duration_ms = Some(timing.duration_ms);
        Ok((kernels, timing.duration_ms))
    }

    /// One counter pass: its attempts in order until one gives the measured call's counters;
    /// only the last attempt's failure fails the pass.
    async fn counter_pass(
        &self,
        run: &ProfileRun<'_>,
        tool: &RocprofTool,
        number: usize,
        attempts: &[CounterGroup],
        kernels: &KernelsUnderTest,
        progress: &mut Progress,
    ) -> Result<BTreeMap<String, f64>, String> {
        let regex = kernels.include_regex();
        let mut attempts = attempts.iter().peekable();
        while let Some(group) = attempts.next() {
            let dir = run
                .profile_dir
                .join(format!("pass_{number}_{}", group.counters()[0]));
            let kernels_out = dir.join(KERNELS_OUT);
            let args = counter_pass_args(
                &tool.capabilities,
                group,
                Some(&regex),
                &dir,
                "pmc_%pid%",
                &self.setup.python_for_child(),
                &run.wrapper_args(&kernels_out),
            )
            .map_err(|error| error.to_string())?;
            let what = format!("counter pass {number} ({})", group.counters().join(" "));
            let outcome = run
                .run_pass(
                    &format!("rocprofv3 {what}"),
                    &tool.binary,
                    args,
                    dir.clone(),
                    &[],
                    group.counters().to_vec(),
                )
                .await;
            progress.passes.push(outcome.record.clone());
            if let Some(error) = &outcome.error {
                return Err(error_chain(error));
            }
            let record = outcome.record.clone();
            let read_kernels = kernels.clone();
            let result = off_thread(move || read_counter_pass(&record, &dir, &read_kernels)).await;
            match result {
                Ok(counters) => return Ok(counters),
                Err(error) if error.allows_ea_retry() && attempts.peek().is_some() => {
                    tracing::warn!(
                        "rocprofv3 {what} for {} failed ({}); retrying with the other EA \
                         counter names",
                        run.target.label,
                        error_chain(&error)
                    );
                }
                Err(error) => return Err(pass_failure(&error, &outcome).await),
            }
        }
        Err(format!("counter pass {number} has no counter group"))
    }

    /// The installed rocprofv3, read once per run: its binary, its options from `--help` and
    /// `--version` (their warnings logged once), its counters from `-L`.
    async fn tool(&self, run: &ProfileRun<'_>) -> Result<Rc<RocprofTool>, String> {
        self.tool
            .get_or_init(|| async { self.read_tool(run).await.map(Rc::new) })
            .await
            .clone()
    }

    async fn read_tool(&self, run: &ProfileRun<'_>) -> Result<RocprofTool, String> {
        let configured = self.settings.rocprof_bin_path.clone();
        let path_var = self.setup.path_var().map(ToOwned::to_owned);
        let python = self.setup.python.clone();
        let binary = off_thread(move || {
            resolve_rocprof_bin(
                configured.as_deref(),
                path_var.as_deref(),
                &python,
                is_executable_file,
            )
        })
        .await
        .map_err(|error| error.to_string())?;
        let probes = run.profile_dir.join("rocprofv3-probe");
        let help = self
            .probe(run, &binary, vec!["--help".into()], &probes.join("help"))
            .await?
            .ok_or_else(|| format!("`{} --help` failed", binary.display()))?;
        let version = self
            .probe(
                run,
                &binary,
                vec!["--version".into()],
                &probes.join("version"),
            )
            .await?;
        let capabilities = RocprofCapabilities::from_help(&help, version.as_deref());
        for warning in capabilities.warnings() {
            tracing::warn!("{warning}");
        }
        let available = match capabilities.list_counters_args() {
            Ok(args) => match self.probe(run, &binary, args, &probes.join("list")).await? {
                Some(listing) => parse_available_counters(&listing),
                None => {
                    tracing::warn!(
                        "rocprofv3 could not list the device's counters: no compute-work \
                         counters are collected"
                    );
                    BTreeSet::new()
                }
            },
            Err(error) => {
                tracing::warn!("{error}: no compute-work counters are collected");
                BTreeSet::new()
            }
        };
        Ok(RocprofTool {
            binary,
            capabilities,
            available,
        })
    }

    /// What a short rocprofv3 invocation printed, `None` when it exited non-zero; an error when
    /// it could not be run, was killed or left processes behind.
    async fn probe(
        &self,
        run: &ProfileRun<'_>,
        binary: &Path,
        args: Vec<OsString>,
        dir: &Path,
    ) -> Result<Option<String>, String> {
        let what = args
            .iter()
            .map(|arg| arg.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ");
        let outcome = run
            .run_pass(
                &format!("rocprofv3 {what}"),
                binary,
                args,
                dir.to_path_buf(),
                &[],
                Vec::new(),
            )
            .await;
        if outcome.error.is_some() || outcome.record.killed {
            let reason = outcome
                .failure(&format!("rocprofv3 {what}"))
                .unwrap_or_default();
            return Err(with_log_tail(&reason, &outcome.log_path).await);
        }
        if outcome.record.exit != Some(0) {
            return Ok(None);
        }
        let output = tokio::fs::read(&outcome.log_path)
            .await
            .map_err(|error| format!("error reading {}: {error}", outcome.log_path.display()))?;
        Ok(Some(String::from_utf8_lossy(&output).into_owned()))
    }
}

impl KernelProfiler for RocprofProfiler {
    fn profile(
        self: Rc<Self>,
        job: ProfileJob,
    ) -> LocalFuture<'static, Result<ProfileSummary, ProfileError>> {
        Box::pin(async move {
            self.profile_target(&ProfileTarget::of_job(&job))
                .await
                .verdict
        })
    }
}

/// A failed read of a pass, with the end of rocprofv3's log where the pass itself failed.
async fn pass_failure(error: &RocmProfileError, outcome: &PassOutcome) -> String {
    let reason = error_chain(error);
    match error {
        RocmProfileError::Killed { .. }
        | RocmProfileError::Exited { .. }
        | RocmProfileError::Signalled => with_log_tail(&reason, &outcome.log_path).await,
        _ => reason,
    }
}

/// The roofline sentences, then the measured bandwidth, the L2 hit rate and the instruction
/// mix, each only where measured; the mix is named as what it is, never as a speed of light.
fn analysis_of(profile: &KernelProfile, evidence: &str, peaks: Option<&RocmPeaks>) -> String {
    let mut sentences = vec![roofline_analysis("rocprofv3", profile, evidence)];
    if let (Some(achieved), Some(peaks)) = (profile.metrics.get("achieved_bandwidth_gbps"), peaks) {
        sentences.push(format!(
            "It moved data at {achieved:.0} GB/s against the device's {:.0} GB/s peak.",
            peaks.peak_bandwidth_gbps
        ));
    }
    if let Some(hit) = profile.metrics.get("l2_hit_pct") {
        sentences.push(format!("L2 hit rate {hit:.1}%."));
    }
    if let Some(InstructionMix {
        valu_pct: Some(valu),
        vmem_pct: Some(vmem),
    }) = profile.instruction_mix
    {
        sentences.push(format!(
            "Instruction mix (a share of issued instructions, not a speed of light): VALU \
             {valu:.1}%, VMEM {vmem:.1}%."
        ));
    }
    sentences.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(
        configured: Option<&str>,
        path_var: &str,
        python: &str,
        present: &[&str],
    ) -> Result<PathBuf, RocprofNotFound> {
        resolve_rocprof_bin(
            configured.map(Path::new),
            Some(OsStr::new(path_var)),
            Path::new(python),
            |path| present.iter().any(|present| path == Path::new(present)),
        )
    }

    #[test]
    fn the_configured_binary_is_the_only_choice() {
        assert_eq!(
            resolve(
                Some("/x/rocprofv3"),
                "/a",
                "/venv/bin/python",
                &["/x/rocprofv3", "/a/rocprofv3"]
            ),
            Ok(PathBuf::from("/x/rocprofv3"))
        );
        assert_eq!(
            resolve(
                Some("/x/rocprofv3"),
                "/a",
                "/venv/bin/python",
                &["/a/rocprofv3"]
            ),
            Err(RocprofNotFound {
                searched: vec![PathBuf::from("/x/rocprofv3")]
            })
        );
    }

    #[test]
    fn path_then_beside_python_then_opt_rocm() {
        let everywhere = ["/b/rocprofv3", "/venv/bin/rocprofv3", SYSTEM_ROCPROF];
        assert_eq!(
            resolve(None, "/a:/b", "/venv/bin/python", &everywhere),
            Ok(PathBuf::from("/b/rocprofv3"))
        );
        assert_eq!(
            resolve(None, "/a:/b", "/venv/bin/python", &everywhere[1..]),
            Ok(PathBuf::from("/venv/bin/rocprofv3"))
        );
        assert_eq!(
            resolve(None, "/a:/b", "/venv/bin/python", &everywhere[2..]),
            Ok(PathBuf::from(SYSTEM_ROCPROF))
        );
        let missing = resolve(None, "/a", "python3", &[]).unwrap_err();
        assert_eq!(
            missing.searched,
            [PathBuf::from("/a/rocprofv3"), PathBuf::from(SYSTEM_ROCPROF)],
            "a bare python has no folder to look in"
        );
        assert_eq!(
            missing.to_string(),
            "rocprofv3 not found (looked for /a/rocprofv3, /opt/rocm/bin/rocprofv3): install \
             ROCm's rocprofiler-sdk, or set platform_kwargs.rocprof_bin_path"
        );
    }
}
