//! The platform's side of a run: on the noop platform simulated evaluators; on NVIDIA and ROCm
//! the Python evaluator per device (and, with the profiler adapters, the profilers). What needs
//! the disk happens in `prepare`, before any actor starts: the scripts are written into the run
//! directory and each device gets its folder.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use actors::model::DeviceId;
use actors::ports::{EvaluatorFactory, KernelProfiler};
use actors::watchdog::WatchdogClient;

use crate::config::RunSettings;
use crate::devices::{Device, DeviceKind, DeviceSelection};
use crate::evaluator::protocol::EvaluatorConfig;
use crate::evaluator::{
    ATEN_ALLOWLIST, DeviceSlot, EVALUATOR_PACKAGE, EVALUATOR_SCRIPT, EvaluatorSetup, KERNEL_CALL,
    PROFILE_WRAPPER, PeakBandwidth, PythonEvaluatorFactory,
};
use crate::noop::NoopEvaluatorFactory;
use crate::nvidia::NcuProfiler;
use crate::platform_profiler::PlatformProfiler;
use crate::profiling::{ProfilerSetup, RooflineThresholds};
use crate::rocm::{RocmDeviceFacts, RocmPeaks, RocprofProfiler, RocprofSettings};
use crate::vendor::{Platform, Vendor};

/// Importing torch and building a problem's inputs on the device takes seconds, a first Triton
/// compile more: start-up gets a deadline of its own, well above a step's.
const EVALUATOR_STARTUP_DEADLINE: Duration = Duration::from_secs(300);

pub enum PreparedPlatform {
    Noop {
        eval_time: Duration,
        devices: Vec<DeviceId>,
    },
    Gpu(Box<GpuPlatform>),
}

pub struct GpuPlatform {
    evaluator: EvaluatorSetup,
    /// One per device, in the selection's order: the devices a run's workers are pinned to.
    slots: Vec<DeviceSlot>,
    profiler: Option<ProfilerPlan>,
}

/// What the vendor's profiler needs besides the Watchdog.
struct ProfilerPlan {
    vendor: Vendor,
    wrapper: PathBuf,
    ncu_bin_path: Option<PathBuf>,
    rocprof: RocprofSettings,
    kill_grace: Duration,
    pass_deadline: Duration,
    total_budget: Duration,
}

fn write(path: &Path, contents: &str) -> std::io::Result<PathBuf> {
    std::fs::write(path, contents)?;
    Ok(path.to_path_buf())
}

/// The scripts a GPU run's children run, in the run directory's `tools/`: the evaluator and the
/// profiled wrapper beside `kernel_call.py`, which both import, and the aten allowlist.
pub struct Tools {
    evaluator: PathBuf,
    wrapper: PathBuf,
    allowlist: PathBuf,
}

impl Tools {
    /// Writes them into `<run_root>/tools/`.
    pub fn write(run_root: &Path) -> std::io::Result<Tools> {
        let tools = run_root.join("tools");
        std::fs::create_dir_all(&tools)?;
        // Both import kernel_call.py from their own folder: it must lie beside them.
        write(&tools.join("kernel_call.py"), KERNEL_CALL)?;
        write(&tools.join("evaluator.py"), EVALUATOR_SCRIPT)?;
        let package = tools.join("kactors_evaluator");
        std::fs::create_dir_all(&package)?;
        for (module, source) in EVALUATOR_PACKAGE {
            write(&package.join(module), source)?;
        }
        write(&tools.join("profile_wrapper.py"), PROFILE_WRAPPER)?;
        write(&tools.join("aten_allowlist.yaml"), ATEN_ALLOWLIST)?;
        Ok(Tools::of_run(run_root))
    }

    /// Where `write` put them: a node agent's view of the run directory the head shares.
    pub fn of_run(run_root: &Path) -> Tools {
        let tools = run_root.join("tools");
        Tools {
            evaluator: tools.join("evaluator.py"),
            wrapper: tools.join("profile_wrapper.py"),
            allowlist: tools.join("aten_allowlist.yaml"),
        }
    }
}

pub fn prepare(
    run_root: &Path,
    settings: &RunSettings,
    selection: &DeviceSelection,
    kernel_dir: &Path,
) -> std::io::Result<PreparedPlatform> {
    let Platform::Vendor(vendor) = selection.platform else {
        return Ok(PreparedPlatform::Noop {
            eval_time: Duration::from_secs_f64(settings.noop_eval_s),
            devices: selection
                .devices
                .iter()
                .map(|device| device.pin().device())
                .collect(),
        });
    };
    let tools = Tools::write(run_root)?;
    let devices: Vec<(DeviceId, &Device)> = selection
        .devices
        .iter()
        .map(|device| (DeviceId(device.id), device))
        .collect();
    let gpu = GpuPlatform::new(
        vendor, run_root, settings, &tools, &devices, kernel_dir, None,
    )?;
    Ok(PreparedPlatform::Gpu(Box::new(gpu)))
}

impl GpuPlatform {
    /// The evaluators and the profiler of `devices`, each under the id the run gives it (its
    /// own index on one node; on a node agent, the run's index over the allocation): a folder
    /// per device in the run directory, Triton's caches beside each candidate or under
    /// `triton_cache` (a node agent's node-local folder).
    pub fn new(
        vendor: Vendor,
        run_root: &Path,
        settings: &RunSettings,
        tools: &Tools,
        devices: &[(DeviceId, &Device)],
        kernel_dir: &Path,
        triton_cache: Option<&Path>,
    ) -> std::io::Result<GpuPlatform> {
        let sandbox = crate::sandbox::for_run(settings.sandbox)?;
        let mut slots = Vec::new();
        for (id, device) in devices {
            let folder = run_root.join("devices").join(id.to_string());
            std::fs::create_dir_all(&folder)?;
            // A sandboxed evaluator writes nowhere but its scratch (a tmpfs of its own, so
            // node-local on an agent too): its candidates' Triton caches go there.
            let triton_cache = match &sandbox {
                Some(_) => Some(DeviceSlot::scratch_of(&folder).join("triton-cache")),
                None => triton_cache.map(|root| root.join(format!("device-{id}"))),
            };
            slots.push(DeviceSlot {
                folder,
                pin: device.pin_as(*id),
                triton_cache,
                bandwidth: device.spec.map(|spec| PeakBandwidth {
                    device: spec.name.clone(),
                    gb_per_s: spec.memory_bandwidth_gb_per_s,
                }),
            });
        }
        let kernel_dir = std::path::absolute(kernel_dir)?;
        let setup = EvaluatorSetup {
            python: settings.python.clone(),
            script: tools.evaluator.clone(),
            kernel_dir,
            config: EvaluatorConfig {
                allowlist: tools.allowlist.clone(),
                dtype: None,
                atol: None,
                rtol: None,
                seeds: 3,
                benchmark_warmup: settings.benchmark_warmup,
                benchmark_repeat: settings.benchmark_repeat,
                l2_flush_bytes: None,
                first_seed: 0,
                rel_l2: None,
            },
            startup_deadline: EVALUATOR_STARTUP_DEADLINE,
            kill_grace: Duration::from_secs_f64(settings.kill_grace_s),
            sandbox,
            run_root: std::path::absolute(run_root)?,
        };
        let targets = devices
            .iter()
            .map(|(id, device)| {
                let gfx_target = match &device.kind {
                    DeviceKind::Rocm { gfx_target, .. } => gfx_target.clone(),
                    _ => None,
                };
                let peaks = device.spec.map(|spec| RocmPeaks {
                    peak_bandwidth_gbps: spec.memory_bandwidth_gb_per_s,
                    peak_tflops_by_dtype: BTreeMap::from([
                        ("bf16".to_string(), spec.bf16_tflops),
                        ("fp16".to_string(), spec.fp16_tflops),
                        ("fp32".to_string(), spec.fp32_matrix_tflops),
                    ]),
                });
                (*id, RocmDeviceFacts { gfx_target, peaks })
            })
            .collect();
        let profiler = settings.profiler_enabled.then(|| ProfilerPlan {
            vendor,
            wrapper: tools.wrapper.clone(),
            ncu_bin_path: settings.ncu_bin_path.clone(),
            rocprof: RocprofSettings {
                rocprof_bin_path: settings.rocprof_bin_path.clone(),
                targets,
                dtype: "bf16".into(),
                thresholds: RooflineThresholds::ROCM,
            },
            kill_grace: setup.kill_grace,
            pass_deadline: Duration::from_secs_f64(settings.profile_pass_timeout_s),
            total_budget: Duration::from_secs_f64(settings.profile_budget_s),
        });
        Ok(GpuPlatform {
            evaluator: setup,
            slots,
            profiler,
        })
    }
}

impl PreparedPlatform {
    pub fn is_simulated(&self) -> bool {
        matches!(self, PreparedPlatform::Noop { .. })
    }

    /// The devices the run's workers are pinned to, in the selection's order: the evaluators
    /// and the profiler are made for exactly these.
    pub fn devices(&self) -> Vec<DeviceId> {
        match self {
            PreparedPlatform::Noop { devices, .. } => devices.clone(),
            PreparedPlatform::Gpu(gpu) => gpu.slots.iter().map(|slot| slot.pin.device()).collect(),
        }
    }

    /// The evaluators and the profiler, once the Watchdog exists.
    pub fn work_ports(
        self,
        watchdog: WatchdogClient,
    ) -> (Rc<dyn EvaluatorFactory>, Option<Rc<dyn KernelProfiler>>) {
        match self {
            PreparedPlatform::Noop { eval_time, .. } => {
                (Rc::new(NoopEvaluatorFactory { eval_time }), None)
            }
            PreparedPlatform::Gpu(gpu) => {
                let (profiler, evaluator, slots) = gpu.split(&watchdog);
                let profiler = profiler.map(|profiler| -> Rc<dyn KernelProfiler> {
                    match profiler {
                        PlatformProfiler::Nvidia(ncu) => ncu,
                        PlatformProfiler::Rocm(rocprof) => rocprof,
                    }
                });
                (
                    Rc::new(PythonEvaluatorFactory::new(evaluator, &slots, watchdog)),
                    profiler,
                )
            }
        }
    }
}

impl PreparedPlatform {
    /// The vendor's profiler alone, for `kactors profile`; None on noop or with `profiler: noop`.
    pub fn profiler(self, watchdog: WatchdogClient) -> Option<PlatformProfiler> {
        match self {
            PreparedPlatform::Noop { .. } => None,
            PreparedPlatform::Gpu(gpu) => gpu.split(&watchdog).0,
        }
    }
}

impl GpuPlatform {
    /// The vendor's profiler (when the strategy profiles), and what the evaluators need.
    fn split(
        self,
        watchdog: &WatchdogClient,
    ) -> (Option<PlatformProfiler>, EvaluatorSetup, Vec<DeviceSlot>) {
        let GpuPlatform {
            evaluator,
            slots,
            profiler,
        } = self;
        let profiler = profiler.map(|plan| plan.build(&evaluator, &slots, watchdog.clone()));
        (profiler, evaluator, slots)
    }
}

impl ProfilerPlan {
    fn build(
        self,
        evaluator: &EvaluatorSetup,
        slots: &[DeviceSlot],
        watchdog: WatchdogClient,
    ) -> PlatformProfiler {
        let pins = slots
            .iter()
            .map(|slot| (slot.pin.device(), slot.pin.clone()))
            .collect();
        let mut wrapper_config = serde_json::Map::new();
        wrapper_config.insert("warmup_calls".into(), 3.into());
        wrapper_config.insert("seed".into(), 0.into());
        let setup = ProfilerSetup {
            python: evaluator.python.clone(),
            wrapper: self.wrapper,
            kernel_dir: evaluator.kernel_dir.clone(),
            wrapper_config,
            parent_env: std::env::vars_os().collect(),
            pins,
            watchdog,
            kill_grace: self.kill_grace,
            pass_deadline: self.pass_deadline,
            total_budget: self.total_budget,
            sandbox: evaluator.sandbox.clone(),
        };
        match self.vendor {
            Vendor::Rocm => {
                PlatformProfiler::Rocm(Rc::new(RocprofProfiler::new(setup, self.rocprof)))
            }
            Vendor::Nvidia => {
                PlatformProfiler::Nvidia(Rc::new(NcuProfiler::new(setup, self.ncu_bin_path)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use actors::model::{CandidateId, KernelSource};
    use actors::ports::{EvalError, EvalJob};

    use super::*;
    use crate::config::{CliOverrides, StrategyFile, StrategySource, parse_config, resolve};
    use crate::devices::{Device, fake_h200};
    use crate::profiling::standalone_watchdog;

    fn nvidia_settings() -> RunSettings {
        let text = "platform: nvidia\n";
        let file = StrategyFile {
            name: "t".into(),
            source: StrategySource::File("/cfg/t.yaml".into()),
            text: text.into(),
        };
        resolve(
            &file,
            &parse_config("t.yaml", text).unwrap(),
            &CliOverrides::default(),
        )
        .unwrap()
    }

    /// The platform a run in `root` prepares for `devices` of `platform`.
    fn prepared(root: &Path, platform: Platform, devices: Vec<Device>) -> PreparedPlatform {
        let selection = DeviceSelection {
            platform,
            devices,
            warnings: vec![],
        };
        prepare(root, &nvidia_settings(), &selection, root).unwrap()
    }

    /// Issue 12: a device and its pin travel together from the selection to the workers. The
    /// run's devices are those the platform pinned, and a device it pinned nothing to gets an
    /// evaluator that says so instead of a panic.
    #[test]
    fn the_workers_devices_are_the_devices_the_platform_pinned() {
        let temp = tempfile::tempdir().unwrap();
        let prepared = prepared(
            temp.path(),
            Platform::Vendor(Vendor::Nvidia),
            vec![fake_h200(3), fake_h200(1)],
        );
        assert_eq!(prepared.devices(), [DeviceId(3), DeviceId(1)]);
        assert!(temp.path().join("devices/3").is_dir());
        assert!(temp.path().join("devices/1").is_dir());
        actix::System::new().block_on(async {
            let (evaluators, _) = prepared.work_ports(standalone_watchdog(Duration::from_secs(1)));
            let job = EvalJob {
                candidate: CandidateId(1),
                source: KernelSource::new("def kernel_function(x):\n    return x\n"),
                folder: temp.path().join("candidates/1"),
                deadline: Duration::from_secs(1),
            };
            let error = evaluators
                .start(DeviceId(0))
                .verify(&job)
                .await
                .unwrap_err();
            assert_eq!(
                error,
                EvalError::Start(
                    "no device pin for device 0: the run pins no worker to it".to_string()
                )
            );
        });
    }

    #[test]
    fn the_noop_platforms_devices_are_the_selections() {
        let temp = tempfile::tempdir().unwrap();
        let noop = |id| Device {
            id,
            name: "noop".into(),
            kind: DeviceKind::Noop,
            spec: None,
        };
        let prepared = prepared(temp.path(), Platform::Noop, vec![noop(0), noop(1)]);
        assert_eq!(prepared.devices(), [DeviceId(0), DeviceId(1)]);
    }

    /// Issue 12: the evaluator and the profiled wrapper import one module, kernel_call.py, from
    /// their own folder; a run ships it beside them, and both start from there.
    #[test]
    fn the_evaluator_and_the_wrapper_find_kernel_call_beside_them() {
        let temp = tempfile::tempdir().unwrap();
        prepared(
            temp.path(),
            Platform::Vendor(Vendor::Nvidia),
            vec![fake_h200(0)],
        );
        let tools = temp.path().join("tools");
        assert_eq!(
            std::fs::read_to_string(tools.join("kernel_call.py")).unwrap(),
            KERNEL_CALL
        );
        let python = |args: &[&str]| {
            std::process::Command::new("python3")
                .current_dir(temp.path())
                .args(args)
                .output()
                .unwrap()
        };
        let classified = python(&[
            "tools/evaluator.py",
            "--classify-ops",
            "--allowlist",
            "tools/aten_allowlist.yaml",
            "aten.view.default",
        ]);
        assert!(classified.status.success(), "{classified:?}");
        let help = python(&["tools/profile_wrapper.py", "--help"]);
        assert!(help.status.success(), "{help:?}");
        for folder in [tools.clone(), tools.join("kactors_evaluator")] {
            assert!(
                !folder.join("__pycache__").exists(),
                "neither writes bytecode beside itself"
            );
        }
    }
}
