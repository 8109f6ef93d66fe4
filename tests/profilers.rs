//! Issues 4 and 5: the profilers as the Profiler actor and `kactors profile` run them, against
//! fake profilers (tests/fixtures/nvidia/fake-ncu, tests/fixtures/rocm/fake-rocprofv3) and a
//! stand-in Python (tests/fixtures/standin-python) that plays the profiled wrapper. Every pass
//! runs under a real Watchdog in an actix System, signalling real process groups.

mod support;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

use actors::model::{CandidateId, DeviceId, KernelSource};
use actors::ports::{KernelProfiler, ProfileError, ProfileJob, ProfileSummary};
use kactors::devices::{Device, DeviceKind};
use kactors::nvidia::NcuProfiler;
use kactors::platform_profiler::{PlatformProfiler, profile_once};
use kactors::profiling::{
    PassSpec, ProfileBudget, ProfileReport, ProfileTarget, ProfilerSetup, RooflineThresholds,
    run_pass, standalone_watchdog,
};
use kactors::rocm::{RocmDeviceFacts, RocmPeaks, RocprofProfiler, RocprofSettings};
use serde_json::{Value, json};
use support::journal::close;
use support::{fixtures, is_running};

const DEVICE: DeviceId = DeviceId(0);
/// The UUID the NVIDIA device 0 is pinned by.
const NVIDIA_UUID: &str = "GPU-aaaaaaaa-0000-0000-0000-000000000000";
/// Generous for a loaded 2-core machine: a pass is two or three Python start-ups.
const PASS_DEADLINE: Duration = Duration::from_secs(60);
const GRACE: Duration = Duration::from_millis(500);
/// How late past deadline plus grace a kill may still count as on time, on a loaded machine.
const MARGIN: Duration = Duration::from_secs(3);

fn standin_python() -> PathBuf {
    fixtures().join("standin-python")
}

fn fake_ncu() -> PathBuf {
    fixtures().join("nvidia/fake-ncu")
}

fn fake_rocprofv3() -> PathBuf {
    fixtures().join("rocm/fake-rocprofv3")
}

/// A kernel directory, a candidate folder with its kernel.py, and the stand-in's record.
struct Bench {
    temp: tempfile::TempDir,
}

impl Bench {
    fn new() -> Bench {
        let temp = tempfile::tempdir().unwrap();
        let kernel_dir = temp.path().join("kernels");
        std::fs::create_dir(&kernel_dir).unwrap();
        std::fs::write(kernel_dir.join("problem.py"), "# the problem\n").unwrap();
        let candidate = temp.path().join("run/candidates/3");
        std::fs::create_dir_all(&candidate).unwrap();
        std::fs::write(
            candidate.join("kernel.py"),
            "def kernel_function(x):\n    return x\n",
        )
        .unwrap();
        Bench { temp }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.temp.path().join(name)
    }

    fn folder(&self) -> PathBuf {
        self.path("run/candidates/3")
    }

    fn record(&self) -> PathBuf {
        self.path("wrapper-runs.jsonl")
    }

    /// Each wrapper run the stand-in recorded: arguments, working directory, environment.
    fn wrapper_runs(&self) -> Vec<Value> {
        std::fs::read_to_string(self.record())
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    fn job(&self, kernel_names: &[&str]) -> ProfileJob {
        ProfileJob {
            candidate: CandidateId(3),
            source: KernelSource::new("def kernel_function(x):\n    return x\n"),
            folder: self.folder(),
            device: DEVICE,
            kernel_names: kernel_names.iter().map(|name| name.to_string()).collect(),
        }
    }

    fn target(&self, kernel_names: &[&str]) -> ProfileTarget {
        ProfileTarget::of_job(&self.job(kernel_names))
    }

    /// The setup a run would give: kactors' environment (with a credential that must not reach
    /// any child) plus `env`, `device` (device 0) pinned.
    fn setup(&self, env: &[(&str, &str)], device: DeviceKind) -> ProfilerSetup {
        let mut parent_env: Vec<(OsString, OsString)> = std::env::vars_os()
            .filter(|(name, _)| {
                let name = name.to_string_lossy();
                !name.starts_with("FAKE_") && !name.starts_with("STANDIN_")
            })
            .collect();
        parent_env.push(("ANTHROPIC_API_KEY".into(), "sk-ant-must-not-leak".into()));
        parent_env.push(("STANDIN_RECORD".into(), self.record().into()));
        for (name, value) in env {
            parent_env.retain(|(existing, _)| existing != name);
            parent_env.push((name.into(), value.into()));
        }
        let serde_json::Value::Object(wrapper_config) = json!({"dtype": "bf16", "warmup_calls": 3})
        else {
            unreachable!("a JSON object literal")
        };
        ProfilerSetup {
            python: standin_python(),
            wrapper: Path::new(env!("CARGO_MANIFEST_DIR")).join("templates/profile_wrapper.py"),
            kernel_dir: self.path("kernels"),
            wrapper_config,
            parent_env,
            pins: BTreeMap::from([(
                DEVICE,
                Device {
                    id: DEVICE.0,
                    name: "a GPU".to_string(),
                    kind: device,
                    spec: None,
                }
                .pin(),
            )]),
            watchdog: standalone_watchdog(GRACE),
            kill_grace: GRACE,
            sandbox: None,
            pass_deadline: PASS_DEADLINE,
            total_budget: PASS_DEADLINE * 4,
        }
    }

    fn nvidia_setup(&self, env: &[(&str, &str)]) -> ProfilerSetup {
        let device = DeviceKind::Nvidia {
            uuid: NVIDIA_UUID.to_string(),
            bus_id: "00000000:00:06.0".to_string(),
        };
        self.setup(env, device)
    }

    fn rocm_setup(&self, env: &[(&str, &str)]) -> ProfilerSetup {
        let device = DeviceKind::Rocm {
            hip_uuid: None,
            bdf: "0000:05:00.0".to_string(),
            gfx_target: Some("gfx942".to_string()),
        };
        self.setup(env, device)
    }
}

fn ncu(setup: ProfilerSetup) -> Rc<NcuProfiler> {
    Rc::new(NcuProfiler::new(setup, Some(fake_ncu())))
}

fn mi300x() -> RocmPeaks {
    RocmPeaks {
        peak_bandwidth_gbps: 5300.0,
        peak_tflops_by_dtype: BTreeMap::from([("bf16".to_owned(), 1307.4)]),
    }
}

fn rocm_settings(rocprof_bin_path: Option<PathBuf>) -> RocprofSettings {
    RocprofSettings {
        rocprof_bin_path,
        targets: BTreeMap::from([(
            DEVICE,
            RocmDeviceFacts {
                gfx_target: Some("gfx942".to_string()),
                peaks: Some(mi300x()),
            },
        )]),
        dtype: "bf16".to_string(),
        thresholds: RooflineThresholds::ROCM,
    }
}

fn rocprof(setup: ProfilerSetup) -> Rc<RocprofProfiler> {
    Rc::new(RocprofProfiler::new(
        setup,
        rocm_settings(Some(fake_rocprofv3())),
    ))
}

async fn profile(
    profiler: Rc<impl KernelProfiler + 'static>,
    job: ProfileJob,
) -> Result<ProfileSummary, ProfileError> {
    profiler.profile(job).await
}

fn unavailable(result: Result<ProfileSummary, ProfileError>) -> String {
    match result {
        Err(ProfileError::Unavailable(reason)) => reason,
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

fn failed(result: Result<ProfileSummary, ProfileError>) -> String {
    match result {
        Err(ProfileError::Failed(reason)) => reason,
        other => panic!("expected Failed, got {other:?}"),
    }
}

fn pids_in(file: &Path) -> Vec<i32> {
    std::fs::read_to_string(file)
        .unwrap_or_else(|error| panic!("{}: {error}", file.display()))
        .lines()
        .map(|line| line.parse().unwrap())
        .collect()
}

#[test]
fn an_ncu_profile_becomes_the_summary_for_the_prompt_and_the_journal() {
    let bench = Bench::new();
    let argv_file = bench.path("ncu-argv.txt");
    actix::System::new().block_on(async {
        let setup = bench.nvidia_setup(&[("FAKE_NCU_ARGV_FILE", argv_file.to_str().unwrap())]);
        let outcome = ncu(setup)
            .profile_target(&ProfileTarget::of_job(&bench.job(&["matvec_kernel"])))
            .await;
        assert!(outcome.report.ok, "{:?}", outcome.report.error);
        let summary = outcome.verdict.unwrap();

        assert_eq!(summary.bottleneck, "memory");
        assert!(
            (summary.duration_ms.unwrap() - 0.045568).abs() < 1e-12,
            "the capture's add_kernel row: {:?}",
            summary.duration_ms
        );
        for figure in [
            "kernels matvec_kernel; 0.0456 ms of device time",
            "memory SOL 82.6%, compute SOL 5.7%, efficiency 82.6% of peak, not at the roofline.",
            "so the kernel is memory-bound",
            "Tensor cores are not used",
        ] {
            assert!(
                summary.analysis.contains(figure),
                "{figure:?} in {}",
                summary.analysis
            );
        }
        let details = serde_json::to_value(&summary.details).unwrap();
        assert_eq!(details["vendor"], "nvidia");
        assert_eq!(details["kernels"], json!(["matvec_kernel"]));
        assert_eq!(details["counters"], json!({}));
        assert_eq!(
            details["metrics"]["dram__bytes_read.sum"], 134225920.0,
            "every ncu metric under its ncu name"
        );
        assert_eq!(details["roofline"]["memory_sol_pct"], 82.58);
        assert_eq!(details["instruction_mix"], Value::Null, "ncu gives none");
        let passes = serde_json::to_value(&outcome.report.passes).unwrap();
        assert_eq!(passes.as_array().unwrap().len(), 1, "one ncu process");
        assert_eq!(passes[0]["exit"], 0);
        assert_eq!(passes[0]["killed"], false);

        let argv = std::fs::read_to_string(&argv_file).unwrap();
        assert!(
            argv.contains("--kernel-name\nregex:^(matvec_kernel)$\n"),
            "the job's kernels are the filter: {argv}"
        );
        let runs = bench.wrapper_runs();
        assert_eq!(runs.len(), 1);
        let profile_dir = bench.folder().join("profile");
        assert_eq!(runs[0]["cwd"], profile_dir.join("ncu").to_str().unwrap());
        let env = &runs[0]["env"];
        assert_eq!(env["CUDA_VISIBLE_DEVICES"], NVIDIA_UUID, "the device pin");
        assert_eq!(env["LC_ALL"], "C");
        assert_eq!(env.get("ANTHROPIC_API_KEY"), None, "no credentials");
        assert_eq!(
            env["TRITON_CACHE_DIR"],
            profile_dir.join("triton-cache").to_str().unwrap()
        );
    });
}

#[test]
fn ncu_that_profiled_no_kernel_is_a_failed_profile() {
    let bench = Bench::new();
    actix::System::new().block_on(async {
        let setup = bench.nvidia_setup(&[("FAKE_NCU_MODE", "no_kernels_profiled")]);
        let reason = failed(profile(ncu(setup), bench.job(&["matvec_kernel"])).await);
        assert!(
            reason.contains("ncu profiled no kernel")
                && reason
                    .contains("launched: add_kernel, distribution_elementwise_grid_stride_kernel"),
            "{reason}"
        );
    });
}

#[test]
fn no_permission_for_the_counters_stops_profiling_with_the_fix() {
    let bench = Bench::new();
    actix::System::new().block_on(async {
        let setup = bench.nvidia_setup(&[("FAKE_NCU_MODE", "permission")]);
        let reason = unavailable(profile(ncu(setup), bench.job(&["matvec_kernel"])).await);
        assert!(reason.contains("ERR_NVGPUCTRPERM"), "{reason}");
        assert!(reason.contains("run kactors as root"), "{reason}");
        assert!(
            reason.contains("NVreg_RestrictProfilingToAdminUsers=0"),
            "{reason}"
        );
    });
}

#[test]
fn a_missing_ncu_stops_profiling_and_says_where_it_looked() {
    let bench = Bench::new();
    actix::System::new().block_on(async {
        let missing = bench.path("nsight/ncu");
        let profiler = Rc::new(NcuProfiler::new(
            bench.nvidia_setup(&[]),
            Some(missing.clone()),
        ));
        let reason = unavailable(profile(profiler, bench.job(&["matvec_kernel"])).await);
        assert_eq!(
            reason,
            format!(
                "ncu not found (looked for {}): install Nsight Compute or set \
                 platform_kwargs.ncu_bin_path",
                missing.display()
            )
        );
    });
}

#[test]
fn a_failing_wrapper_under_ncu_fails_with_the_end_of_its_log() {
    let bench = Bench::new();
    actix::System::new().block_on(async {
        let setup = bench.nvidia_setup(&[("STANDIN_WRAPPER", "fail")]);
        let reason = failed(profile(ncu(setup), bench.job(&["matvec_kernel"])).await);
        assert!(
            reason.contains("The application returned an error code (1)"),
            "{reason}"
        );
        assert!(reason.contains("ncu exited with status 1"), "{reason}");
        assert!(
            reason.contains("profile_wrapper: RuntimeError: the candidate raised"),
            "the wrapper's own words, from the pass log: {reason}"
        );
    });
}

#[test]
fn a_kernel_the_ncu_filter_left_out_fails_the_profile() {
    let bench = Bench::new();
    actix::System::new().block_on(async {
        let setup =
            bench.nvidia_setup(&[("STANDIN_KERNELS", r#"["matvec_kernel", "reduce_kernel"]"#)]);
        let reason = failed(profile(ncu(setup), bench.job(&["matvec_kernel"])).await);
        assert_eq!(
            reason,
            "the measured call launched reduce_kernel which the ncu kernel filter \
             (matvec_kernel) left out: the profile would miss their time"
        );
    });
}

#[test]
fn a_hung_ncu_is_killed_and_only_its_profile_fails() {
    let bench = Bench::new();
    let pids_file = bench.path("ncu-pids");
    actix::System::new().block_on(async {
        let mut setup = bench.nvidia_setup(&[
            ("FAKE_NCU_MODE", "hang"),
            ("FAKE_NCU_PIDS_FILE", pids_file.to_str().unwrap()),
        ]);
        let deadline = Duration::from_secs(3);
        setup.pass_deadline = deadline;
        let started = Instant::now();
        let reason = failed(profile(ncu(setup), bench.job(&["matvec_kernel"])).await);
        assert!(reason.contains("ncu killed after"), "{reason}");
        assert!(started.elapsed() < deadline + GRACE + MARGIN);
        for pid in pids_in(&pids_file) {
            assert!(!is_running(pid), "process {pid} survived");
        }
    });
}

#[test]
fn kactors_profile_on_nvidia_finds_the_measured_kernels_before_ncu_runs() {
    let bench = Bench::new();
    actix::System::new().block_on(async {
        let setup =
            bench.nvidia_setup(&[("STANDIN_KERNELS", r#"["add_kernel", "matmul_kernel"]"#)]);
        let profiler = PlatformProfiler::Nvidia(ncu(setup));
        let report = profile_once(&profiler, bench.target(&[])).await;

        assert!(report.ok, "{:?}", report.error);
        assert_eq!(report.kernels, ["add_kernel", "matmul_kernel"]);
        assert_eq!(report.passes.len(), 2, "the plain wrapper run, then ncu");
        assert!(report.passes.iter().all(|pass| pass.exit == Some(0)));
        let (add, matmul) = (45568.0, 213216.0);
        assert!((report.duration_ms.unwrap() - (add + matmul) / 1e6).abs() < 1e-12);
        let roofline = report.roofline.as_ref().unwrap();
        assert!(
            (roofline.memory_sol_pct - (82.58 * add + 79.40 * matmul) / (add + matmul)).abs()
                < 1e-9
        );
        let runs = bench.wrapper_runs();
        assert_eq!(runs.len(), 2);
        assert_eq!(
            runs[0]["env"]["TRITON_CACHE_DIR"], runs[1]["env"]["TRITON_CACHE_DIR"],
            "the ncu pass finds what the first run compiled"
        );
    });
}

#[test]
fn a_rocm_profile_against_the_fake_rocprofv3() {
    let bench = Bench::new();
    actix::System::new().block_on(async {
        let outcome = rocprof(bench.rocm_setup(&[]))
            .profile_target(&ProfileTarget::of_job(&bench.job(&["matvec_kernel"])))
            .await;
        let summary = outcome.verdict.unwrap();

        assert_eq!(
            summary.duration_ms,
            Some(1.2),
            "the measured call's last dispatch"
        );
        assert_eq!(summary.bottleneck, "memory");
        let details = serde_json::to_value(&summary.details).unwrap();
        assert_eq!(details["vendor"], "rocm");
        assert_eq!(details["kernels"], json!(["matvec_kernel"]));
        assert_eq!(details["counters"]["FETCH_SIZE"], 4194304.0);
        assert_eq!(details["counters"]["TCC_EA0_RDREQ_sum"], 4194304.0 * 16.0);
        assert_eq!(details["counters"].as_object().unwrap().len(), 19);
        let memory = details["roofline"]["memory_sol_pct"].as_f64().unwrap();
        assert!((memory - 67.5).abs() < 0.05, "{memory}");
        assert_eq!(
            details["instruction_mix"],
            json!({"valu_pct": 60.0, "vmem_pct": 25.0})
        );
        let passes = serde_json::to_value(&outcome.report.passes).unwrap();
        let passes = passes.as_array().unwrap();
        assert_eq!(passes.len(), 8, "timing, then seven counter groups");
        assert_eq!(passes[0]["counters"], json!([]));
        assert_eq!(
            passes[2]["counters"],
            json!(["TCC_HIT_sum", "TCC_MISS_sum"])
        );
        assert!(
            passes
                .iter()
                .all(|pass| pass["exit"] == 0 && pass["killed"] == false)
        );
        assert!(
            summary.analysis.contains("memory SOL 67.5%")
                && summary.analysis.contains("compute SOL 0.0%")
                && summary.analysis.contains(
                    "Instruction mix (a share of issued instructions, not a speed of light): \
                     VALU 60.0%, VMEM 25.0%."
                ),
            "{}",
            summary.analysis
        );

        let runs = bench.wrapper_runs();
        assert_eq!(runs.len(), 8, "the wrapper ran once per pass");
        let cache = bench.folder().join("profile/triton-cache");
        let mut folders = Vec::new();
        for run in &runs {
            assert_eq!(run["env"]["TRITON_CACHE_DIR"], cache.to_str().unwrap());
            assert_eq!(run["env"]["HIP_VISIBLE_DEVICES"], "0");
            assert_eq!(run["env"].get("ANTHROPIC_API_KEY"), None);
            folders.push(run["cwd"].as_str().unwrap().to_string());
        }
        folders.sort();
        folders.dedup();
        assert_eq!(folders.len(), 8, "every pass in a folder of its own");
    });
}

#[test]
fn the_ea_pass_is_retried_with_the_other_counter_names() {
    let bench = Bench::new();
    actix::System::new().block_on(async {
        let setup = bench.rocm_setup(&[("FAKE_ROCPROF_MODE", "exit1_for_ea0")]);
        let report = profile_once(&PlatformProfiler::Rocm(rocprof(setup)), bench.target(&[])).await;

        assert!(report.ok, "{:?}", report.error);
        let groups: Vec<(Vec<String>, Option<i32>)> = report
            .passes
            .iter()
            .map(|pass| (pass.counters.clone(), pass.exit))
            .collect();
        let group = |names: &[&str], exit| {
            (
                names.iter().map(|name| name.to_string()).collect(),
                Some(exit),
            )
        };
        assert_eq!(
            groups[3..7],
            [
                group(&["TCC_EA0_RDREQ_sum"], 1),
                group(&["TCC_EA_RDREQ_sum"], 0),
                group(&["TCC_EA0_WRREQ_sum"], 1),
                group(&["TCC_EA_WRREQ_sum"], 0),
            ]
        );
        assert_eq!(report.passes.len(), 10);
        assert_eq!(report.counters["TCC_EA_RDREQ_sum"], 4194304.0 * 16.0);
        assert!(!report.counters.contains_key("TCC_EA0_RDREQ_sum"));
    });
}

#[test]
fn a_hung_rocprofv3_pass_is_killed_and_the_run_goes_on_without_counters() {
    let bench = Bench::new();
    let pids_file = bench.path("rocprof-pids");
    actix::System::new().block_on(async {
        let mut setup = bench.rocm_setup(&[
            ("FAKE_ROCPROF_MODE", "hang"),
            ("FAKE_ROCPROF_PIDS_FILE", pids_file.to_str().unwrap()),
        ]);
        let deadline = Duration::from_secs(3);
        setup.pass_deadline = deadline;
        let profiler = rocprof(setup);
        let started = Instant::now();
        let outcome = profiler.profile_target(&bench.target(&["matvec_kernel"])).await;
        let took = started.elapsed();

        let reason = unavailable(outcome.verdict);
        assert!(
            reason.starts_with("rocprofv3 profile of candidate 3 on device 0 failed: rocprofv3 timing pass killed after"),
            "{reason}"
        );
        assert!(reason.ends_with("; continuing on timing alone"), "{reason}");
        let report = outcome.report;
        assert!(!report.ok);
        assert_eq!(report.passes.len(), 1);
        let timing = &report.passes[0];
        assert!(timing.killed);
        assert!(
            timing.seconds >= deadline.as_secs_f64()
                && timing.seconds < (deadline + GRACE + MARGIN).as_secs_f64(),
            "{timing:?}"
        );
        assert!(took < deadline + GRACE + MARGIN + Duration::from_secs(5), "{took:?}");
        let pids = pids_in(&pids_file);
        assert_eq!(pids.len(), 2, "the fake and its grandchild");
        for pid in pids {
            assert!(!is_running(pid), "process {pid} survived");
        }
    });
}

#[test]
fn a_hung_pass_and_its_grandchild_leave_nothing_of_their_group() {
    let bench = Bench::new();
    let pids_file = bench.path("pids");
    actix::System::new().block_on(async {
        let setup = bench.rocm_setup(&[
            ("FAKE_ROCPROF_MODE", "hang"),
            ("FAKE_ROCPROF_PIDS_FILE", pids_file.to_str().unwrap()),
        ]);
        let pin = setup.pin(DEVICE).unwrap().clone();
        let spec = PassSpec {
            label: "hung rocprofv3".to_string(),
            program: fake_rocprofv3(),
            args: vec!["--kernel-trace".into(), "--".into(), "true".into()],
            dir: bench.path("pass"),
            env: setup.child_env(&pin, &[]),
            counters: Vec::new(),
            confinement: None,
        };
        let deadline = Duration::from_secs(2);
        let started = Instant::now();
        let outcome = run_pass(
            &spec,
            &setup.watchdog,
            &ProfileBudget::start(Duration::from_secs(600)),
            deadline,
            GRACE,
        )
        .await;

        assert!(outcome.record.killed);
        assert!(outcome.error.is_none(), "{:?}", outcome.error);
        assert!(started.elapsed() < deadline + GRACE + MARGIN);
        let group = outcome.group.expect("the pass started");
        assert_eq!(group.live_members().unwrap(), []);
        for pid in pids_in(&pids_file) {
            assert!(!is_running(pid), "process {pid} survived");
        }
        assert!(
            std::fs::read_to_string(&outcome.log_path)
                .unwrap()
                .contains("fake-rocprofv3: hanging"),
            "the pass logs into its own folder"
        );
    });
}

#[test]
fn a_pass_is_never_started_past_the_profiles_budget() {
    let bench = Bench::new();
    actix::System::new().block_on(async {
        let mut setup = bench.rocm_setup(&[]);
        setup.total_budget = Duration::ZERO;
        let reason = unavailable(profile(rocprof(setup), bench.job(&["matvec_kernel"])).await);
        assert!(
            reason.contains("the profile's budget of 0ns is spent"),
            "{reason}"
        );
        assert_eq!(bench.wrapper_runs(), Vec::<Value>::new());
    });
}

#[test]
fn a_device_without_peak_figures_gets_no_rocm_profile() {
    let bench = Bench::new();
    actix::System::new().block_on(async {
        let mut settings = rocm_settings(Some(fake_rocprofv3()));
        settings.targets.clear();
        let profiler = Rc::new(RocprofProfiler::new(bench.rocm_setup(&[]), settings));
        let reason = unavailable(profile(profiler, bench.job(&["matvec_kernel"])).await);
        assert_eq!(
            reason,
            "rocprofv3 profile of candidate 3 on device 0 failed: no peak figures for device 0: \
             no row of the GPU spec table matched it, so no roofline can be computed; continuing \
             on timing alone"
        );
        assert_eq!(
            bench.wrapper_runs(),
            Vec::<Value>::new(),
            "no pass was started"
        );
    });
}

#[test]
fn the_configured_rocprofv3_is_used_before_any_on_path() {
    let bench = Bench::new();
    let decoys = bench.path("decoys");
    std::fs::create_dir(&decoys).unwrap();
    let decoy = decoys.join("rocprofv3");
    std::fs::write(&decoy, "#!/bin/sh\necho decoy rocprofv3 >&2\nexit 7\n").unwrap();
    make_executable(&decoy);
    let configured = bench.path("tools/my-rocprofv3");
    std::fs::create_dir_all(configured.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(fake_rocprofv3(), &configured).unwrap();
    let path = format!("{}:{}", decoys.display(), std::env::var("PATH").unwrap());
    actix::System::new().block_on(async {
        let setup = bench.rocm_setup(&[("PATH", &path)]);
        let profiler = Rc::new(RocprofProfiler::new(setup, rocm_settings(Some(configured))));
        let summary = profile(profiler, bench.job(&["matvec_kernel"]))
            .await
            .unwrap();
        assert_eq!(summary.duration_ms, Some(1.2));

        let missing = bench.path("nowhere/rocprofv3");
        let setup = bench.rocm_setup(&[("PATH", &path)]);
        let profiler = Rc::new(RocprofProfiler::new(
            setup,
            rocm_settings(Some(missing.clone())),
        ));
        let reason = unavailable(profile(profiler, bench.job(&["matvec_kernel"])).await);
        assert!(
            reason.contains(&format!(
                "rocprofv3 not found (looked for {}): install ROCm's rocprofiler-sdk, or set \
                 platform_kwargs.rocprof_bin_path",
                missing.display()
            )),
            "{reason}"
        );
    });
}

#[test]
fn rocprofv3_is_found_beside_a_venv_python_that_links_elsewhere() {
    let bench = Bench::new();
    let venv_bin = bench.path("venv/bin");
    std::fs::create_dir_all(&venv_bin).unwrap();
    // The interpreter the venv's python links to has no rocprofv3 beside it: the stand-in's
    // folder holds none, so only the link's own folder can provide it.
    assert!(!fixtures().join("rocprofv3").exists());
    std::os::unix::fs::symlink(standin_python(), venv_bin.join("python")).unwrap();
    std::os::unix::fs::symlink(fake_rocprofv3(), venv_bin.join("rocprofv3")).unwrap();
    // PATH holds python3 (for the scripts' `#!/usr/bin/env python3`) and no rocprofv3.
    let path_dir = bench.path("path");
    std::fs::create_dir(&path_dir).unwrap();
    std::os::unix::fs::symlink(real_python(), path_dir.join("python3")).unwrap();
    let argv_file = bench.path("rocprof-argv.txt");
    actix::System::new().block_on(async {
        let mut setup = bench.rocm_setup(&[
            ("PATH", path_dir.to_str().unwrap()),
            ("FAKE_ROCPROF_ARGV_FILE", argv_file.to_str().unwrap()),
        ]);
        setup.python = venv_bin.join("python");
        let profiler = Rc::new(RocprofProfiler::new(setup, rocm_settings(None)));
        let summary = profile(profiler, bench.job(&["matvec_kernel"]))
            .await
            .unwrap();
        assert_eq!(summary.duration_ms, Some(1.2));
        let argv = std::fs::read_to_string(&argv_file).unwrap();
        assert!(
            argv.contains(&format!("--\n{}\n", venv_bin.join("python").display())),
            "the venv's python, as configured, runs the wrapper: {argv}"
        );
    });
}

#[test]
fn a_stale_csv_from_an_earlier_profile_is_never_read() {
    let bench = Bench::new();
    actix::System::new().block_on(async {
        let first = profile(
            rocprof(bench.rocm_setup(&[])),
            bench.job(&["matvec_kernel"]),
        )
        .await;
        assert!(first.is_ok(), "{first:?}");
        let earlier_trace = std::fs::read_dir(bench.folder().join("profile/timing"))
            .unwrap()
            .flatten()
            .any(|entry| {
                entry
                    .file_name()
                    .to_string_lossy()
                    .ends_with("_kernel_trace.csv")
            });
        assert!(earlier_trace, "the first profile's trace is still there");

        let setup = bench.rocm_setup(&[("FAKE_ROCPROF_MODE", "no_csv")]);
        let reason = unavailable(profile(rocprof(setup), bench.job(&["matvec_kernel"])).await);
        let second_timing = bench.folder().join("profile-2/timing");
        assert!(
            reason.contains(&format!(
                "rocprofv3 wrote no kernel trace (kernel_trace.csv) in {}",
                second_timing.display()
            )),
            "{reason}"
        );
    });
}

#[test]
fn kactors_profile_prints_issue_5s_object() {
    let bench = Bench::new();
    let report: ProfileReport = actix::System::new().block_on(async {
        let profiler = PlatformProfiler::Rocm(rocprof(bench.rocm_setup(&[])));
        profile_once(&profiler, bench.target(&[])).await
    });
    let json = serde_json::to_value(&report).unwrap();
    let keys: Vec<&str> = json
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "ok",
            "platform",
            "device",
            "kernels",
            "duration_ms",
            "counters",
            "metrics",
            "roofline",
            "instruction_mix",
            "passes",
            "error"
        ]
    );
    assert_eq!(json["ok"], true);
    assert_eq!(json["platform"], "rocm");
    assert_eq!(json["device"], 0);
    assert_eq!(json["error"], Value::Null);
    assert!(close(&json["duration_ms"], 1.2));
    let roofline = json["roofline"].as_object().unwrap();
    let roofline_keys: Vec<&str> = roofline.keys().map(String::as_str).collect();
    assert_eq!(
        roofline_keys,
        [
            "bottleneck",
            "memory_sol_pct",
            "compute_sol_pct",
            "efficiency_pct",
            "at_roofline"
        ]
    );
    assert_eq!(roofline["bottleneck"], "memory");
    assert_eq!(roofline["at_roofline"], false);
    assert!(close(&json["metrics"]["l2_hit_pct"], 75.0));
    let pass_keys: Vec<&str> = json["passes"][0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(pass_keys, ["counters", "exit", "killed", "seconds"]);
}

#[test]
fn a_failed_profile_keeps_what_it_measured_and_says_why() {
    let bench = Bench::new();
    let report = actix::System::new().block_on(async {
        let setup = bench.rocm_setup(&[("FAKE_ROCPROF_MODE", "no_kernel_column")]);
        profile_once(&PlatformProfiler::Rocm(rocprof(setup)), bench.target(&[])).await
    });
    assert!(!report.ok);
    assert_eq!(report.kernels, ["matvec_kernel"]);
    assert_eq!(
        report.duration_ms,
        Some(1.2),
        "the timing pass had measured it"
    );
    assert_eq!(
        report.passes.len(),
        2,
        "the timing pass and the failed counter pass"
    );
    assert!(report.roofline.is_none());
    let error = report.error.unwrap();
    assert!(error.contains("no \"Kernel_Name\" column"), "{error}");
}

#[test]
fn the_standin_python_runs_the_standin_evaluator_for_evaluator_py() {
    let output = std::process::Command::new(standin_python())
        .args(["/somewhere/templates/evaluator.py", "--help"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let help = String::from_utf8_lossy(&output.stdout);
    assert!(help.contains("usage:"), "{help}");
    let output = std::process::Command::new(standin_python())
        .args(["-c", "print(6 * 7)"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&output.stdout), "42\n");
}

fn make_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The interpreter python3 runs, not a launcher script such as pyenv's shim.
fn real_python() -> PathBuf {
    let output = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    PathBuf::from(String::from_utf8(output.stdout).unwrap().trim())
}
