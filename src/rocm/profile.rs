//! One ROCm profile: reading each finished rocprofv3 pass, deciding whether the EA pass may be
//! retried with the other counter spelling, and what kactors makes of the measurements.

use std::collections::BTreeMap;
use std::path::Path;

use actors::model::{DeviceId, Vendor};
use actors::profile::{InstructionMix, KernelProfile};

use super::csv_tables::{
    KernelStatsRow, RocprofCsvError, read_counter_collection, read_kernel_stats, read_kernel_trace,
};
use super::output_files::{OutputKind, RocprofOutputError, find_outputs};
use super::rocm_roofline::{
    RocmPeaks, RooflineInputError, instruction_mix, rocm_metrics, rocm_roofline,
};
use super::rocprof_cli::RocprofCliError;
use super::selection::{
    KernelsUnderTest, MeasuredDispatch, SelectionError, measured_counters, measured_dispatches,
    measured_duration_ms,
};
use crate::profiling::{PassRecord, ProfileReport, RooflineThresholds, RooflineVerdict};

#[derive(Debug, thiserror::Error)]
pub enum RocmProfileError {
    #[error("rocprofv3 pass killed after {seconds:.1} s, past its deadline")]
    Killed { seconds: f64 },
    #[error("rocprofv3 pass exited with status {code}")]
    Exited { code: i32 },
    #[error("rocprofv3 pass ended by a signal")]
    Signalled,
    #[error(transparent)]
    Output(#[from] RocprofOutputError),
    #[error(transparent)]
    Csv(#[from] RocprofCsvError),
    #[error(transparent)]
    Selection(#[from] SelectionError),
    #[error(transparent)]
    Cli(#[from] RocprofCliError),
}

impl RocmProfileError {
    /// Whether an EA pass that failed this way is worth running again with the other counter
    /// spelling: yes after a non-zero exit, a crash, or an exit 0 without (usable) counter rows,
    /// which is how a counter name the device does not have shows up. A killed pass is not
    /// retried (the profile fails with that reason), nor are outputs that a spelling cannot
    /// change (several processes, a broken file layout).
    pub fn allows_ea_retry(&self) -> bool {
        match self {
            Self::Exited { .. } | Self::Signalled => true,
            Self::Output(error) => matches!(
                error,
                RocprofOutputError::NoneWritten { .. }
                    | RocprofOutputError::Empty { .. }
                    | RocprofOutputError::HeaderOnly { .. }
            ),
            Self::Selection(error) => matches!(error, SelectionError::NoCounterRows { .. }),
            Self::Killed { .. } | Self::Csv(_) | Self::Cli(_) => false,
        }
    }
}

/// What the timing pass measured.
#[derive(Debug, Clone, PartialEq)]
pub struct TimingPass {
    /// The last dispatch of each kernel under test.
    pub measured: Vec<MeasuredDispatch>,
    pub duration_ms: f64,
    /// Read to prove the file is a profile; its AverageNs spans warm-up and autotune launches
    /// and is never the duration.
    pub stats: Vec<KernelStatsRow>,
}

/// Reads the timing pass from its own directory: the kernel trace gives the duration, the
/// stats file must hold durations (else it is not a profile).
pub fn read_timing_pass(
    record: &PassRecord,
    out_dir: &Path,
    kernels: &KernelsUnderTest,
) -> Result<TimingPass, RocmProfileError> {
    check_exit(record)?;
    let trace = read_kernel_trace(&find_outputs(out_dir, OutputKind::KernelTrace)?)?;
    let stats = read_kernel_stats(&find_outputs(out_dir, OutputKind::KernelStats)?)?;
    let measured = measured_dispatches(&trace, kernels)?;
    Ok(TimingPass {
        duration_ms: measured_duration_ms(&measured),
        measured,
        stats,
    })
}

/// Reads one counter pass from its own directory: the measured dispatches' counters.
pub fn read_counter_pass(
    record: &PassRecord,
    out_dir: &Path,
    kernels: &KernelsUnderTest,
) -> Result<BTreeMap<String, f64>, RocmProfileError> {
    check_exit(record)?;
    let path = find_outputs(out_dir, OutputKind::CounterCollection)?;
    let samples = read_counter_collection(&path)?;
    Ok(measured_counters(&samples, kernels, &path)?)
}

fn check_exit(record: &PassRecord) -> Result<(), RocmProfileError> {
    if record.killed {
        return Err(RocmProfileError::Killed {
            seconds: record.seconds,
        });
    }
    match record.exit {
        Some(0) => Ok(()),
        Some(code) => Err(RocmProfileError::Exited { code }),
        None => Err(RocmProfileError::Signalled),
    }
}

/// What kactors makes of a ROCm profile whose passes all succeeded: every figure, and the
/// roofline verdict or why none can be judged.
#[derive(Debug, Clone, PartialEq)]
pub struct RocmProfile {
    pub kernels: Vec<String>,
    pub duration_ms: f64,
    pub counters: BTreeMap<String, f64>,
    /// Derived from the counters (`rocm_metrics`).
    pub metrics: BTreeMap<String, f64>,
    pub instruction_mix: Option<InstructionMix>,
    /// No roofline when FETCH_SIZE or WRITE_SIZE is absent from the files, which fails the
    /// profile with that reason.
    pub verdict: Result<RooflineVerdict, RooflineInputError>,
}

impl RocmProfile {
    pub fn from_measurements(
        kernels: &KernelsUnderTest,
        duration_ms: f64,
        counters: BTreeMap<String, f64>,
        spec: &RocmPeaks,
        dtype: &str,
        thresholds: RooflineThresholds,
    ) -> Self {
        Self {
            kernels: kernels.names().to_vec(),
            duration_ms,
            metrics: rocm_metrics(&counters, duration_ms, dtype),
            instruction_mix: instruction_mix(&counters),
            verdict: rocm_roofline(&counters, duration_ms, spec, dtype, thresholds)
                .map(|roofline| roofline.verdict),
            counters,
        }
    }

    /// The profile the prompts and the journal take, and its verdict's evidence; or why no
    /// roofline could be judged.
    pub fn judged(&self) -> Result<(KernelProfile, &str), &RooflineInputError> {
        let verdict = self.verdict.as_ref()?;
        let profile = KernelProfile {
            vendor: Vendor::Rocm,
            kernels: self.kernels.clone(),
            duration_ms: self.duration_ms,
            roofline: verdict.roofline,
            counters: self.counters.clone(),
            metrics: self.metrics.clone(),
            instruction_mix: self.instruction_mix,
        };
        Ok((profile, &verdict.evidence))
    }

    /// `kactors profile`'s report of a profile that judged no roofline: failed, with every
    /// figure it measured.
    pub fn unjudged_report(
        &self,
        device: DeviceId,
        passes: Vec<PassRecord>,
        reason: &RooflineInputError,
    ) -> ProfileReport {
        ProfileReport {
            counters: self.counters.clone(),
            metrics: self.metrics.clone(),
            instruction_mix: self.instruction_mix.unwrap_or(InstructionMix::UNAVAILABLE),
            ..ProfileReport::failed(
                Vendor::Rocm,
                device,
                self.kernels.clone(),
                Some(self.duration_ms),
                passes,
                reason.to_string(),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    //! Each pass is run against tests/fixtures/rocm/fake-rocprofv3, with the command line the
    //! builders make, and read back the way the Profiler reads a real one.

    use std::collections::BTreeSet;
    use std::ffi::OsString;
    use std::path::PathBuf;
    use std::process::Command;

    use super::*;
    use crate::profiling::{FreshDirError, ensure_fresh_dir};
    use crate::rocm::counter_groups::{CounterGroup, counter_pass_plan, parse_available_counters};
    use crate::rocm::rocprof_cli::{RocprofCapabilities, counter_pass_args, timing_pass_args};

    fn fake() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/rocm/fake-rocprofv3")
    }

    /// Runs the fake with `env`; stdout, and the pass record of its exit.
    fn run_fake(args: &[OsString], env: &[(&str, &str)]) -> (String, PassRecord) {
        let mut command = Command::new(fake());
        command.args(args);
        for (key, _) in std::env::vars().filter(|(key, _)| key.starts_with("FAKE_ROCPROF_")) {
            command.env_remove(key);
        }
        command.envs(env.iter().copied());
        let output = command
            .output()
            .expect("fake-rocprofv3 runs (python3 needed)");
        let counters = args
            .iter()
            .skip_while(|arg| *arg != "--pmc")
            .skip(1)
            .take_while(|arg| !arg.to_string_lossy().starts_with('-'))
            .map(|arg| arg.to_string_lossy().into_owned())
            .collect();
        (
            String::from_utf8_lossy(&output.stdout).into_owned(),
            PassRecord {
                counters,
                exit: output.status.code(),
                killed: false,
                seconds: 0.1,
            },
        )
    }

    /// The fake under one environment, with the capabilities it reports read once.
    struct Fake<'a> {
        env: &'a [(&'a str, &'a str)],
        capabilities: RocprofCapabilities,
    }

    impl<'a> Fake<'a> {
        fn new(env: &'a [(&'a str, &'a str)]) -> Self {
            let (help, _) = run_fake(&["--help".into()], env);
            let (version, record) = run_fake(&["--version".into()], env);
            let version = (record.exit == Some(0)).then_some(version);
            Self {
                env,
                capabilities: RocprofCapabilities::from_help(&help, version.as_deref()),
            }
        }

        fn timing(
            &self,
            dir: &Path,
            kernels: &KernelsUnderTest,
        ) -> Result<TimingPass, RocmProfileError> {
            ensure_fresh_dir(dir).unwrap();
            let (python, wrapper) = application();
            let args = timing_pass_args(&self.capabilities, dir, "timing_%pid%", &python, &wrapper)
                .unwrap();
            let (_, record) = run_fake(&args, self.env);
            read_timing_pass(&record, dir, kernels)
        }

        fn counter_pass(
            &self,
            dir: &Path,
            group: &CounterGroup,
            kernels: &KernelsUnderTest,
        ) -> (PassRecord, Result<BTreeMap<String, f64>, RocmProfileError>) {
            ensure_fresh_dir(dir).unwrap();
            let (python, wrapper) = application();
            let regex = kernels.include_regex();
            let args = counter_pass_args(
                &self.capabilities,
                group,
                Some(&regex),
                dir,
                "pmc_%pid%",
                &python,
                &wrapper,
            )
            .unwrap();
            let (_, record) = run_fake(&args, self.env);
            let result = read_counter_pass(&record, dir, kernels);
            (record, result)
        }
    }

    fn single() -> KernelsUnderTest {
        KernelsUnderTest::new(["matvec_kernel"]).unwrap()
    }

    fn split() -> KernelsUnderTest {
        KernelsUnderTest::new(["matvec_main_kernel", "matvec_reduce_kernel"]).unwrap()
    }

    /// `true` stands in for python: the fake runs the application like rocprofv3 does.
    fn application() -> (PathBuf, Vec<OsString>) {
        (PathBuf::from("true"), vec!["wrapper.py".into()])
    }

    fn measured(counters: &[(&str, f64)]) -> BTreeMap<String, f64> {
        counters
            .iter()
            .map(|(name, value)| ((*name).to_owned(), *value))
            .collect()
    }

    #[test]
    fn duration_of_the_measured_call_among_warmup_autotune_and_at_kernels() {
        for format in ["7", "6.4", "6.2", "rocpd"] {
            for layout in ["flat", "hostname"] {
                let temp = tempfile::tempdir().unwrap();
                let env = [
                    ("FAKE_ROCPROF_FORMAT", format),
                    ("FAKE_ROCPROF_LAYOUT", layout),
                ];
                let timing = Fake::new(&env)
                    .timing(&temp.path().join("timing"), &single())
                    .unwrap();
                assert_eq!(timing.duration_ms, 1.2, "format {format}, layout {layout}");
                let stats = timing
                    .stats
                    .iter()
                    .find(|row| row.name == "matvec_kernel")
                    .unwrap();
                assert_eq!(stats.calls, Some(7));
                assert_ne!(
                    stats.average_ns,
                    Some(1.2e6),
                    "the average is not the measured call"
                );
            }
        }
    }

    #[test]
    fn split_kernel_timed_as_the_sum_of_main_and_reduce() {
        let temp = tempfile::tempdir().unwrap();
        let env = [("FAKE_ROCPROF_SCENARIO", "split")];
        let timing = Fake::new(&env)
            .timing(&temp.path().join("timing"), &split())
            .unwrap();
        assert_eq!(timing.measured.len(), 2);
        assert!(
            (timing.duration_ms - 1.05).abs() < 1e-12,
            "{}",
            timing.duration_ms
        );
    }

    #[test]
    fn timing_pass_failures_are_failures_not_zeros() {
        type IsExpected = fn(&RocmProfileError) -> bool;
        let cases: [(&str, IsExpected); 4] = [
            ("no_csv", |error| {
                matches!(
                    error,
                    RocmProfileError::Output(RocprofOutputError::NoneWritten { .. })
                )
            }),
            ("empty_csv", |error| {
                matches!(
                    error,
                    RocmProfileError::Output(RocprofOutputError::Empty { .. })
                )
            }),
            ("header_only", |error| {
                matches!(
                    error,
                    RocmProfileError::Output(RocprofOutputError::HeaderOnly { .. })
                )
            }),
            ("no_avg_stats", |error| {
                matches!(
                    error,
                    RocmProfileError::Csv(RocprofCsvError::MissingColumn { .. })
                )
            }),
        ];
        for (mode, expected) in cases {
            let temp = tempfile::tempdir().unwrap();
            let error = Fake::new(&[("FAKE_ROCPROF_MODE", mode)])
                .timing(&temp.path().join("timing"), &single())
                .unwrap_err();
            assert!(expected(&error), "{mode}: {error}");
        }
    }

    #[test]
    fn trace_without_the_kernel_under_test_is_not_a_profile() {
        let temp = tempfile::tempdir().unwrap();
        let error = Fake::new(&[])
            .timing(
                &temp.path().join("timing"),
                &KernelsUnderTest::new(["softmax_kernel"]).unwrap(),
            )
            .unwrap_err();
        assert!(
            error
                .to_string()
                .contains("no dispatch of kernel under test softmax_kernel"),
            "{error}"
        );
    }

    #[test]
    fn several_profiled_processes_are_refused() {
        let temp = tempfile::tempdir().unwrap();
        let error = Fake::new(&[("FAKE_ROCPROF_MODE", "several_processes")])
            .timing(&temp.path().join("timing"), &single())
            .unwrap_err();
        assert!(error.to_string().contains("several processes"), "{error}");
        assert!(!error.allows_ea_retry());
    }

    #[test]
    fn counters_from_the_measured_dispatch_only() {
        let temp = tempfile::tempdir().unwrap();
        let group = CounterGroup::new(["FETCH_SIZE", "SQ_WAVES", "SQ_INSTS_VALU"]);
        for (index, format) in ["7", "6.4", "6.2", "rocpd"].into_iter().enumerate() {
            let env = [
                ("FAKE_ROCPROF_FORMAT", format),
                ("FAKE_ROCPROF_LAYOUT", "pass_dir"),
            ];
            let dir = temp.path().join(format!("pass_{index}"));
            let (record, counters) = Fake::new(&env).counter_pass(&dir, &group, &single());
            assert_eq!(record.counters, ["FETCH_SIZE", "SQ_WAVES", "SQ_INSTS_VALU"]);
            assert_eq!(
                counters.unwrap(),
                measured(&[
                    ("FETCH_SIZE", 4194304.0),
                    ("SQ_INSTS_VALU", 600000.0),
                    ("SQ_WAVES", 4096.0)
                ]),
                "format {format}"
            );
        }
    }

    #[test]
    fn split_kernel_counters_summed_across_its_kernels() {
        let temp = tempfile::tempdir().unwrap();
        let (_, counters) = Fake::new(&[("FAKE_ROCPROF_SCENARIO", "split")]).counter_pass(
            &temp.path().join("fetch"),
            &CounterGroup::new(["FETCH_SIZE"]),
            &split(),
        );
        assert_eq!(
            counters.unwrap(),
            measured(&[("FETCH_SIZE", 4194304.0 + 64.0)])
        );
    }

    #[test]
    fn counter_pass_failures_are_failures_not_zeros() {
        let group = CounterGroup::new(["FETCH_SIZE"]);
        for mode in ["no_csv", "empty_csv", "header_only", "no_kernel_column"] {
            let temp = tempfile::tempdir().unwrap();
            let (record, result) = Fake::new(&[("FAKE_ROCPROF_MODE", mode)]).counter_pass(
                &temp.path().join("fetch"),
                &group,
                &single(),
            );
            assert_eq!(record.exit, Some(0), "{mode}: the fake exits 0");
            let error = result.unwrap_err();
            let message = error.to_string();
            match mode {
                "no_kernel_column" => {
                    assert!(message.contains("no \"Kernel_Name\" column"), "{message}");
                    assert!(!error.allows_ea_retry());
                }
                _ => assert!(error.allows_ea_retry(), "{mode}: {message}"),
            }
        }
    }

    #[test]
    fn a_counter_missing_from_the_file_is_absent_not_zero() {
        let temp = tempfile::tempdir().unwrap();
        let (_, counters) = Fake::new(&[]).counter_pass(
            &temp.path().join("fetch"),
            &CounterGroup::new(["FETCH_SIZE"]),
            &single(),
        );
        let counters = counters.unwrap();
        assert!(!counters.contains_key("WRITE_SIZE"));
        let profile = on_mi300x(&single(), 1.2, counters);
        assert_eq!(
            profile.judged().err().map(ToString::to_string).as_deref(),
            Some("no roofline: counter WRITE_SIZE was not collected")
        );
    }

    /// The EA retry as the Profiler drives it: the attempts of the plan in order, the next one
    /// only after a failure that allows it.
    fn run_ea_pass(
        dir: &Path,
        gfx_target: Option<&str>,
        env: &[(&str, &str)],
    ) -> (
        Vec<PassRecord>,
        Result<BTreeMap<String, f64>, RocmProfileError>,
    ) {
        let fake = Fake::new(env);
        let plan = counter_pass_plan(gfx_target, &BTreeSet::new());
        let ea_reads = &plan[2];
        let mut records = Vec::new();
        let mut last = None;
        for (attempt, group) in ea_reads.attempts().iter().enumerate() {
            let (record, result) =
                fake.counter_pass(&dir.join(format!("ea_{attempt}")), group, &single());
            records.push(record);
            match result {
                Ok(counters) => return (records, Ok(counters)),
                Err(error) if error.allows_ea_retry() => last = Some(error),
                Err(error) => return (records, Err(error)),
            }
        }
        (records, Err(last.expect("a pass has an attempt")))
    }

    #[test]
    fn ea_name_chosen_by_architecture() {
        let temp = tempfile::tempdir().unwrap();
        let (records, counters) = run_ea_pass(
            temp.path(),
            Some("gfx90a"),
            &[("FAKE_ROCPROF_GFX", "gfx90a")],
        );
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].counters, ["TCC_EA_RDREQ_sum"]);
        assert_eq!(
            counters.unwrap(),
            measured(&[("TCC_EA_RDREQ_sum", 4194304.0 * 16.0)])
        );
    }

    #[test]
    fn ea_name_retried_after_a_nonzero_exit() {
        let temp = tempfile::tempdir().unwrap();
        let (records, counters) = run_ea_pass(
            temp.path(),
            Some("gfx942"),
            &[("FAKE_ROCPROF_MODE", "exit1_for_ea0")],
        );
        assert_eq!(records.len(), 2);
        assert_eq!(records[0].counters, ["TCC_EA0_RDREQ_sum"]);
        assert_eq!(records[0].exit, Some(1));
        assert_eq!(records[1].counters, ["TCC_EA_RDREQ_sum"]);
        assert_eq!(records[1].exit, Some(0));
        assert_eq!(
            counters.unwrap(),
            measured(&[("TCC_EA_RDREQ_sum", 4194304.0 * 16.0)])
        );
    }

    #[test]
    fn only_the_last_ea_name_failing_fails_the_pass() {
        let temp = tempfile::tempdir().unwrap();
        let (records, counters) = run_ea_pass(
            temp.path(),
            Some("gfx942"),
            &[
                ("FAKE_ROCPROF_GFX", "gfx90a"),
                ("FAKE_ROCPROF_MODE", "header_only"),
            ],
        );
        assert_eq!(records.len(), 2);
        assert_eq!(
            records[0].exit,
            Some(1),
            "TCC_EA0_RDREQ_sum is unknown on gfx90a"
        );
        let error = counters.unwrap_err();
        assert!(error.to_string().contains("header and no rows"), "{error}");
    }

    #[test]
    fn unknown_target_tries_both_names() {
        let temp = tempfile::tempdir().unwrap();
        let (records, counters) = run_ea_pass(temp.path(), None, &[("FAKE_ROCPROF_GFX", "gfx90a")]);
        assert_eq!(records.len(), 2);
        assert_eq!(records[1].counters, ["TCC_EA_RDREQ_sum"]);
        assert!(counters.is_ok());
    }

    #[test]
    fn a_stale_csv_from_an_earlier_invocation_is_never_read() {
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path().join("fetch");
        let group = CounterGroup::new(["FETCH_SIZE"]);
        let (_, first) = Fake::new(&[]).counter_pass(&dir, &group, &single());
        first.unwrap();
        assert!(matches!(
            ensure_fresh_dir(&dir),
            Err(FreshDirError::NotFresh { .. })
        ));
        let (_, second) = Fake::new(&[("FAKE_ROCPROF_MODE", "no_csv")]).counter_pass(
            &temp.path().join("fetch_round2"),
            &group,
            &single(),
        );
        assert!(matches!(
            second,
            Err(RocmProfileError::Output(
                RocprofOutputError::NoneWritten { .. }
            ))
        ));
    }

    #[test]
    fn killed_and_failed_passes() {
        let dir = Path::new("/nonexistent");
        let record = |exit, killed| PassRecord {
            counters: Vec::new(),
            exit,
            killed,
            seconds: 30.0,
        };
        let killed = read_counter_pass(&record(None, true), dir, &single()).unwrap_err();
        assert_eq!(
            killed.to_string(),
            "rocprofv3 pass killed after 30.0 s, past its deadline"
        );
        assert!(!killed.allows_ea_retry());
        let exited = read_timing_pass(&record(Some(1), false), dir, &single()).unwrap_err();
        assert_eq!(exited.to_string(), "rocprofv3 pass exited with status 1");
        assert!(exited.allows_ea_retry());
        assert!(matches!(
            read_counter_pass(&record(None, false), dir, &single()),
            Err(RocmProfileError::Signalled)
        ));
    }

    #[test]
    fn old_rocprofv3_gets_no_counter_pass_and_a_warning() {
        let env = [("FAKE_ROCPROF_HELP", "old")];
        let fake = Fake::new(&env);
        assert_eq!(fake.capabilities.version, None);
        assert!(!fake.capabilities.pmc);
        assert!(!fake.capabilities.warnings().is_empty());
        let temp = tempfile::tempdir().unwrap();
        let timing = fake.timing(&temp.path().join("timing"), &single()).unwrap();
        assert_eq!(timing.duration_ms, 1.2);
    }

    #[test]
    fn counter_list_of_the_fake_device() {
        for help in ["new", "old"] {
            let env = [("FAKE_ROCPROF_HELP", help)];
            let list_args = Fake::new(&env).capabilities.list_counters_args().unwrap();
            let (listing, record) = run_fake(&list_args, &env);
            assert_eq!(record.exit, Some(0));
            let available = parse_available_counters(&listing);
            assert!(
                available.contains("SQ_INSTS_VALU_MFMA_MOPS_BF16"),
                "{help}: {available:?}"
            );
            assert!(available.contains("TCC_EA0_RDREQ_sum"));
        }
        let (listing, _) = run_fake(&["-L".into()], &[("FAKE_ROCPROF_NO_MFMA", "1")]);
        let plan = counter_pass_plan(Some("gfx942"), &parse_available_counters(&listing));
        assert_eq!(plan.len(), 6, "no compute-work pass without MFMA counters");
    }

    #[test]
    fn fake_requires_the_double_hyphen_and_csv_output() {
        let (_, record) = run_fake(&["--kernel-trace".into(), "true".into()], &[]);
        assert_eq!(record.exit, Some(1), "no `--`, no application");

        // Without `--output-format csv` a 7.0+ rocprofv3 writes only a rocpd database.
        let temp = tempfile::tempdir().unwrap();
        let args: Vec<OsString> = vec![
            "--kernel-trace".into(),
            "-d".into(),
            temp.path().into(),
            "-o".into(),
            "run".into(),
            "--".into(),
            "true".into(),
        ];
        let (_, record) = run_fake(&args, &[]);
        assert_eq!(record.exit, Some(0));
        assert!(temp.path().join("run_results.db").is_file());
        assert!(matches!(
            find_outputs(temp.path(), OutputKind::KernelTrace),
            Err(RocprofOutputError::NoneWritten { .. })
        ));
    }

    /// The hang mode the watchdog tests rely on: the fake and a grandchild both sleep forever
    /// holding the output pipes, until their process group is killed.
    #[cfg(unix)]
    #[test]
    fn hang_mode_hangs_with_a_grandchild_until_the_group_is_killed() {
        use std::io::{BufRead, BufReader, Read};
        use std::os::unix::process::CommandExt;
        use std::process::Stdio;
        use std::sync::mpsc;
        use std::time::Duration;

        let mut child = Command::new(fake())
            .args(["--kernel-trace", "--", "true"])
            .env("FAKE_ROCPROF_MODE", "hang")
            .process_group(0)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        stderr.read_line(&mut line).unwrap();
        assert!(line.contains("grandchild"), "{line}");
        assert!(child.try_wait().unwrap().is_none(), "still hanging");

        let group = format!("-{}", child.id());
        let killed = Command::new("kill")
            .args(["-KILL", "--", &group])
            .status()
            .unwrap();
        assert!(killed.success());
        child.wait().unwrap();
        let (done, until_eof) = mpsc::channel();
        std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = stderr.read_to_string(&mut rest);
            let _ = done.send(());
        });
        until_eof
            .recv_timeout(Duration::from_secs(20))
            .expect("the grandchild died with its group, closing the pipe");
    }

    fn mi300x() -> RocmPeaks {
        RocmPeaks {
            peak_bandwidth_gbps: 5300.0,
            peak_tflops_by_dtype: BTreeMap::from([("bf16".to_owned(), 1307.4)]),
        }
    }

    /// What kactors makes of a bf16 call's measurements on an MI300X.
    fn on_mi300x(
        kernels: &KernelsUnderTest,
        duration_ms: f64,
        counters: BTreeMap<String, f64>,
    ) -> RocmProfile {
        RocmProfile::from_measurements(
            kernels,
            duration_ms,
            counters,
            &mi300x(),
            "bf16",
            RooflineThresholds::ROCM,
        )
    }

    /// Every pass of the plan against the fake, then the profile as `kactors profile --json`
    /// would print it.
    #[test]
    fn whole_profile_against_the_fake() {
        let temp = tempfile::tempdir().unwrap();
        let env = [];
        let kernels = single();
        let fake = Fake::new(&env);
        let timing = fake.timing(&temp.path().join("timing"), &kernels).unwrap();
        let (listing, _) = run_fake(&fake.capabilities.list_counters_args().unwrap(), &env);
        let plan = counter_pass_plan(Some("gfx942"), &parse_available_counters(&listing));
        let mut passes = vec![PassRecord {
            counters: Vec::new(),
            exit: Some(0),
            killed: false,
            seconds: 0.1,
        }];
        let mut counters = BTreeMap::new();
        for (index, pass) in plan.iter().enumerate() {
            let (record, result) = fake.counter_pass(
                &temp.path().join(format!("pass_{index}")),
                &pass.attempts()[0],
                &kernels,
            );
            passes.push(record);
            counters.extend(result.unwrap());
        }
        assert_eq!(counters.len(), 19, "{counters:?}");
        let profile = on_mi300x(&kernels, timing.duration_ms, counters);
        let (measured, _) = profile.judged().expect("a roofline");
        let report = ProfileReport::measured(DeviceId(0), &measured, passes);
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["ok"], true);
        assert_eq!(json["platform"], "rocm");
        assert_eq!(json["kernels"], serde_json::json!(["matvec_kernel"]));
        assert_eq!(json["duration_ms"], 1.2);
        assert_eq!(json["counters"]["FETCH_SIZE"], 4194304.0);
        let memory = json["roofline"]["memory_sol_pct"].as_f64().unwrap();
        assert!((memory - 67.5).abs() < 0.05, "{memory}");
        assert_eq!(
            json["roofline"]["compute_sol_pct"], 0.0,
            "MOPS collected, none issued"
        );
        assert_eq!(json["roofline"]["bottleneck"], "memory");
        assert_eq!(json["roofline"]["at_roofline"], false);
        assert_eq!(json["instruction_mix"]["valu_pct"], 60.0);
        assert_eq!(json["instruction_mix"]["vmem_pct"], 25.0);
        assert_eq!(json["metrics"]["l2_hit_pct"], 75.0);
        assert_eq!(json["passes"].as_array().unwrap().len(), 8);
        assert_eq!(json["passes"][0]["counters"], serde_json::json!([]));
        assert_eq!(json["error"], serde_json::Value::Null);
    }

    #[test]
    fn a_profile_without_a_roofline_fails_and_keeps_every_figure() {
        let counters = BTreeMap::from([
            ("FETCH_SIZE".to_owned(), 1024.0),
            ("TCC_HIT_sum".to_owned(), 75.0),
            ("TCC_MISS_sum".to_owned(), 25.0),
        ]);
        let profile = on_mi300x(&single(), 1.2, counters);
        let reason = profile.judged().expect_err("no WRITE_SIZE, no roofline");
        let report = profile.unjudged_report(DeviceId(1), Vec::new(), reason);
        assert_eq!(
            serde_json::to_value(&report).unwrap(),
            serde_json::json!({
                "ok": false,
                "platform": "rocm",
                "device": 1,
                "kernels": ["matvec_kernel"],
                "duration_ms": 1.2,
                "counters": {"FETCH_SIZE": 1024.0, "TCC_HIT_sum": 75.0, "TCC_MISS_sum": 25.0},
                "metrics": {"l2_hit_pct": 75.0},
                "roofline": null,
                "instruction_mix": {"valu_pct": null, "vmem_pct": null},
                "passes": [],
                "error": "no roofline: counter WRITE_SIZE was not collected"
            })
        );
    }
}
