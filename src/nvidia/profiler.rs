//! The Nsight Compute profiler of a run: one ncu process per profile around the wrapper,
//! measuring exactly the measured call, read into the profile the prompts and the journal get.

use std::path::{Path, PathBuf};
use std::rc::Rc;

use actors::model::Vendor;
use actors::ports::{KernelProfiler, LocalFuture, ProfileError, ProfileJob, ProfileSummary};
use actors::profile::KernelProfile;

use super::ncu::{
    KernelNames, NCU_ENV, NcuInvocation, NcuNotFound, ncu_command_args, resolve_ncu_bin,
};
use super::ncu_csv::parse_ncu_csv;
use super::profile::{NcuFailure, NvidiaProfile, is_permanent, summarize};
use crate::profiling::{
    PassRecord, ProfileOutcome, ProfileReport, ProfileRun, ProfileTarget, ProfilerSetup,
    error_chain, is_executable_file, off_thread, read_kernels_out, roofline_analysis,
    with_log_tail,
};

/// ncu's report inside the ncu pass's folder (its `--log-file`).
const NCU_REPORT: &str = "ncu-report.csv";
const KERNELS_OUT: &str = "kernels.json";

pub struct NcuProfiler {
    setup: ProfilerSetup,
    /// `platform_kwargs.ncu_bin_path`.
    ncu_bin_path: Option<PathBuf>,
}

/// Why a profile failed, and whether profiling can go on in this run.
struct NcuProfileFailure {
    error: ProfileError,
    kernels: Vec<String>,
}

impl NcuProfileFailure {
    fn failed(reason: String) -> Self {
        NcuProfileFailure {
            error: ProfileError::Failed(reason),
            kernels: Vec::new(),
        }
    }
}

impl NcuProfiler {
    pub fn new(setup: ProfilerSetup, ncu_bin_path: Option<PathBuf>) -> Self {
        NcuProfiler {
            setup,
            ncu_bin_path,
        }
    }

    /// One profile of `target`: a plain run of the wrapper first when the kernels under test
    /// are not known (to learn them for ncu's kernel filter), then one ncu process.
    pub async fn profile_target(&self, target: &ProfileTarget) -> ProfileOutcome {
        let mut passes = Vec::new();
        match self.measure(target, &mut passes).await {
            Ok(profile) => {
                let measured = profile.kernel_profile();
                let analysis = analysis_of(&profile, &measured);
                ProfileOutcome::measured(target.device, measured, analysis, passes)
            }
            Err(failure) => {
                let reason = match &failure.error {
                    ProfileError::Failed(reason) | ProfileError::Unavailable(reason) => {
                        reason.clone()
                    }
                };
                tracing::warn!(
                    "Nsight Compute profile of {} on device {} failed: {reason}",
                    target.label,
                    target.device
                );
                let report = ProfileReport::failed(
                    Vendor::Nvidia,
                    target.device,
                    failure.kernels,
                    None,
                    passes,
                    reason,
                );
                ProfileOutcome::failed(report, failure.error)
            }
        }
    }

    async fn measure(
        &self,
        target: &ProfileTarget,
        passes: &mut Vec<PassRecord>,
    ) -> Result<NvidiaProfile, NcuProfileFailure> {
        let ncu = self
            .ncu_binary()
            .await
            .map_err(|failure| NcuProfileFailure {
                error: ProfileError::Unavailable(error_chain(&NcuFailure::from(failure))),
                kernels: Vec::new(),
            })?;
        let pin = self
            .setup
            .pin(target.device)
            .map_err(|reason| NcuProfileFailure {
                error: ProfileError::Unavailable(reason),
                kernels: Vec::new(),
            })?;
        let run = ProfileRun::start(&self.setup, target, pin)
            .await
            .map_err(NcuProfileFailure::failed)?;
        let filter = match target.kernel_names.as_slice() {
            [] => self.discover_kernels(&run, passes).await?,
            known => KernelNames::new(known.iter().cloned())
                .map_err(|error| NcuProfileFailure::failed(error.to_string()))?,
        };
        self.ncu_pass(&run, &ncu, &filter, passes).await
    }

    /// The ncu process around the wrapper, and its report read into the profile of the kernels
    /// the measured call launched.
    async fn ncu_pass(
        &self,
        run: &ProfileRun<'_>,
        ncu: &Path,
        filter: &KernelNames,
        passes: &mut Vec<PassRecord>,
    ) -> Result<NvidiaProfile, NcuProfileFailure> {
        let dir = run.profile_dir.join("ncu");
        let report_path = dir.join(NCU_REPORT);
        let kernels_out = dir.join(KERNELS_OUT);
        let invocation = NcuInvocation {
            kernel_names: filter.clone(),
            log_file: report_path.clone(),
            python: self.setup.python_for_child(),
            wrapper_args: run.wrapper_args(&kernels_out),
        };
        let args = ncu_command_args(&invocation);
        let outcome = run
            .run_pass("ncu", ncu, args, dir, NCU_ENV, Vec::new())
            .await;
        passes.push(outcome.record.clone());
        let with_kernels = |error: ProfileError| NcuProfileFailure {
            error,
            kernels: filter.as_slice().to_vec(),
        };
        // Nothing is read from a pass that could not run, was killed or left processes behind.
        if outcome.error.is_some() || outcome.record.killed {
            let reason = outcome
                .failure("ncu")
                .expect("an error or a kill is a failure");
            return Err(with_kernels(ProfileError::Failed(
                with_log_tail(&reason, &outcome.log_path).await,
            )));
        }
        let report = match parse_ncu_csv(&read_report(&report_path).await) {
            Ok(report) => report,
            Err(error) => {
                let failure = NcuFailure::Parse(error);
                let reason = error_chain(&failure);
                if is_permanent(&failure) {
                    return Err(with_kernels(ProfileError::Unavailable(reason)));
                }
                let reason = match outcome.failure("ncu") {
                    Some(exit) => format!("{exit}; {reason}"),
                    None => reason,
                };
                // ncu's own error lines are in the reason; the program's are in the pass log.
                return Err(with_kernels(ProfileError::Failed(
                    with_log_tail(&reason, &outcome.log_path).await,
                )));
            }
        };
        if let Some(exit) = outcome.failure("ncu") {
            return Err(with_kernels(ProfileError::Failed(
                with_log_tail(&exit, &outcome.log_path).await,
            )));
        }
        let launched = read_kernels_out(&kernels_out)
            .await
            .map_err(|reason| with_kernels(ProfileError::Failed(reason)))?;
        let unfiltered: Vec<&str> = launched
            .iter()
            .filter(|name| !filter.as_slice().contains(name))
            .map(String::as_str)
            .collect();
        if !unfiltered.is_empty() {
            return Err(with_kernels(ProfileError::Failed(format!(
                "the measured call launched {} which the ncu kernel filter ({}) left out: the \
                 profile would miss their time",
                unfiltered.join(", "),
                filter.as_slice().join(", ")
            ))));
        }
        summarize(&report, &launched).map_err(|error| NcuProfileFailure {
            error: ProfileError::Failed(error_chain(&NcuFailure::Summary(error))),
            kernels: launched.clone(),
        })
    }

    /// A plain run of the wrapper, without ncu, for the names of the Triton kernels the measured
    /// call launches: ncu's kernel filter needs them before it starts.
    async fn discover_kernels(
        &self,
        run: &ProfileRun<'_>,
        passes: &mut Vec<PassRecord>,
    ) -> Result<KernelNames, NcuProfileFailure> {
        let dir = run.profile_dir.join("discovery");
        let kernels_out = dir.join(KERNELS_OUT);
        let args = run.wrapper_args(&kernels_out);
        let python = self.setup.python_for_child();
        let outcome = run
            .run_pass("wrapper run", &python, args, dir, &[], Vec::new())
            .await;
        passes.push(outcome.record.clone());
        if let Some(reason) = outcome.failure("the wrapper") {
            return Err(NcuProfileFailure::failed(
                with_log_tail(&reason, &outcome.log_path).await,
            ));
        }
        let launched = read_kernels_out(&kernels_out)
            .await
            .map_err(NcuProfileFailure::failed)?;
        KernelNames::new(launched).map_err(|error| NcuProfileFailure::failed(error.to_string()))
    }

    async fn ncu_binary(&self) -> Result<PathBuf, NcuNotFound> {
        let configured = self.ncu_bin_path.clone();
        let path_var = self.setup.path_var().map(ToOwned::to_owned);
        off_thread(move || {
            resolve_ncu_bin(
                configured.as_deref(),
                path_var.as_deref(),
                is_executable_file,
            )
        })
        .await
    }
}

impl KernelProfiler for NcuProfiler {
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

/// ncu's `--log-file`; empty when ncu wrote none, which the parser reports as no output.
async fn read_report(path: &Path) -> String {
    match tokio::fs::read(path).await {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(_) => String::new(),
    }
}

/// The roofline sentences, then tensor-core use as the collected tensor metric shows it.
fn analysis_of(profile: &NvidiaProfile, measured: &KernelProfile) -> String {
    let roofline = roofline_analysis("Nsight Compute", measured, &profile.verdict.evidence);
    let tensor = match (profile.uses_tensor_cores, profile.tensor_pipe_active_pct) {
        (Some(true), Some(active)) => {
            format!(
                "Tensor cores are in use: the tensor pipe was busy {active:.1}% of the active cycles."
            )
        }
        (Some(false), _) => "Tensor cores are not used: the tensor pipe stayed idle.".to_string(),
        _ => "Tensor-core use was not measured.".to_string(),
    };
    format!("{roofline} {tensor}")
}
