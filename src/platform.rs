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
use crate::devices::{DeviceKind, DeviceSelection};
use crate::evaluator::protocol::EvaluatorConfig;
use crate::evaluator::{
    ATEN_ALLOWLIST, DeviceSlot, EVALUATOR_SCRIPT, EvaluatorSetup, PROFILE_WRAPPER,
    PythonEvaluatorFactory,
};
use crate::noop::NoopEvaluatorFactory;
use crate::nvidia::NcuProfiler;
use crate::platform_profiler::PlatformProfiler;
use crate::profiling::{DeviceEnv, ProfilerSetup, RooflineThresholds};
use crate::rocm::{RocmDeviceFacts, RocmPeaks, RocprofProfiler, RocprofSettings};
use crate::vendor::{Platform, Vendor};

/// Importing torch and building a problem's inputs on the device takes seconds, a first Triton
/// compile more: start-up gets a deadline of its own, well above a step's.
const EVALUATOR_STARTUP_DEADLINE: Duration = Duration::from_secs(300);

pub enum PreparedPlatform {
    Noop { eval_time: Duration },
    Gpu(Box<GpuPlatform>),
}

pub struct GpuPlatform {
    evaluator: EvaluatorSetup,
    slots: BTreeMap<DeviceId, DeviceSlot>,
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

pub fn prepare(
    run_root: &Path,
    settings: &RunSettings,
    selection: &DeviceSelection,
    kernel_dir: &Path,
) -> std::io::Result<PreparedPlatform> {
    let Platform::Vendor(vendor) = selection.platform else {
        return Ok(PreparedPlatform::Noop {
            eval_time: Duration::from_secs_f64(settings.noop_eval_s),
        });
    };
    let tools = run_root.join("tools");
    std::fs::create_dir_all(&tools)?;
    let script = write(&tools.join("evaluator.py"), EVALUATOR_SCRIPT)?;
    let wrapper = write(&tools.join("profile_wrapper.py"), PROFILE_WRAPPER)?;
    let allowlist = write(&tools.join("aten_allowlist.yaml"), ATEN_ALLOWLIST)?;
    let mut slots = BTreeMap::new();
    for device in &selection.devices {
        let folder = run_root.join("devices").join(device.id.to_string());
        std::fs::create_dir_all(&folder)?;
        let pin = device.pin();
        slots.insert(
            DeviceId(device.id),
            DeviceSlot {
                folder,
                set: pin.set,
                unset: pin.unset,
            },
        );
    }
    let kernel_dir = std::path::absolute(kernel_dir)?;
    let setup = EvaluatorSetup {
        python: settings.python.clone(),
        script,
        kernel_dir,
        config: EvaluatorConfig {
            allowlist,
            dtype: None,
            atol: None,
            rtol: None,
            seeds: 3,
            benchmark_warmup: settings.benchmark_warmup,
            benchmark_repeat: settings.benchmark_repeat,
            l2_flush_bytes: None,
        },
        startup_deadline: EVALUATOR_STARTUP_DEADLINE,
        kill_grace: Duration::from_secs_f64(settings.kill_grace_s),
    };
    let targets = selection
        .devices
        .iter()
        .map(|device| {
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
            (DeviceId(device.id), RocmDeviceFacts { gfx_target, peaks })
        })
        .collect();
    let profiler = settings.profiler_enabled.then(|| ProfilerPlan {
        vendor,
        wrapper,
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
    Ok(PreparedPlatform::Gpu(Box::new(GpuPlatform {
        evaluator: setup,
        slots,
        profiler,
    })))
}

impl PreparedPlatform {
    pub fn is_simulated(&self) -> bool {
        matches!(self, PreparedPlatform::Noop { .. })
    }

    /// The evaluators and the profiler, once the Watchdog exists.
    pub fn work_ports(
        self,
        watchdog: WatchdogClient,
    ) -> (Rc<dyn EvaluatorFactory>, Option<Rc<dyn KernelProfiler>>) {
        match self {
            PreparedPlatform::Noop { eval_time } => {
                (Rc::new(NoopEvaluatorFactory { eval_time }), None)
            }
            PreparedPlatform::Gpu(gpu) => {
                let GpuPlatform {
                    evaluator,
                    slots,
                    profiler,
                } = *gpu;
                let profiler = profiler.map(|plan| {
                    let profiler: Rc<dyn KernelProfiler> =
                        match plan.build(&evaluator, &slots, watchdog.clone()) {
                            PlatformProfiler::Nvidia(ncu) => ncu,
                            PlatformProfiler::Rocm(rocprof) => rocprof,
                        };
                    profiler
                });
                (
                    Rc::new(PythonEvaluatorFactory::new(evaluator, slots, watchdog)),
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
            PreparedPlatform::Gpu(gpu) => {
                let GpuPlatform {
                    evaluator,
                    slots,
                    profiler,
                } = *gpu;
                profiler.map(|plan| plan.build(&evaluator, &slots, watchdog))
            }
        }
    }
}

impl ProfilerPlan {
    fn build(
        self,
        evaluator: &EvaluatorSetup,
        slots: &BTreeMap<DeviceId, DeviceSlot>,
        watchdog: WatchdogClient,
    ) -> PlatformProfiler {
        let pins = slots
            .iter()
            .map(|(device, slot)| {
                (
                    *device,
                    DeviceEnv {
                        set: slot.set.clone(),
                        unset: slot.unset.clone(),
                    },
                )
            })
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
