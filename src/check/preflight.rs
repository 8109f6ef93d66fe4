//! Which checks a run needs and in what order their lines come: the kernel directory's layout
//! everywhere; on a GPU platform also Python, torch and triton, each device under its pin, the
//! profiler and problem.py, asked concurrently on a runtime of the preflight's own.

use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::config::RunSettings;
use crate::devices::{Device, DeviceSelection};
use crate::kernel_dir::KernelDir;
use crate::profiling::absolute;
use crate::vendor::{Platform, Vendor};

use super::nvidia::ncu_check;
use super::probe::{ProbeRunner, Scratch};
use super::python::{environment_check, problem_check};
use super::report::{CheckLine, CheckReport};
use super::rocm::rocprof_check;
use super::sandbox::sandbox_check;
use super::torch_device::device_check;

/// The checks `kactors run` makes once its settings, devices and kernel directory are known:
/// on a GPU platform the Python interpreter, torch and triton, each device visible to torch
/// under its pin, the profiler (unless the strategy turns it off), and the kernel directory with
/// its problem.py imported; on the noop platform, which runs no Python, the kernel directory's
/// layout only.
///
/// Blocking: it runs its children on a runtime of its own, so call it before the actor system
/// starts (never from inside a tokio runtime). The report says when it ran, for the run's
/// start-up record.
pub fn preflight(
    settings: &RunSettings,
    selection: &DeviceSelection,
    kernel_dir: Option<&Path>,
) -> CheckReport {
    let began = SystemTime::now();
    let mut report = checks(settings, selection, kernel_dir);
    report.ran = Some((began, SystemTime::now()));
    report
}

fn checks(
    settings: &RunSettings,
    selection: &DeviceSelection,
    kernel_dir: Option<&Path>,
) -> CheckReport {
    let mut report = CheckReport::default();
    let layout = kernel_dir.map(|dir| (dir, layout_line(dir, settings.max_source_bytes)));
    let Platform::Vendor(vendor) = selection.platform else {
        report.extend(layout.map(|(_, line)| line));
        return report;
    };
    let scratch = match Scratch::create() {
        Ok(scratch) => scratch,
        Err(error) => {
            report.push(CheckLine::fail(
                "scratch folder for the checks' output",
                format!(
                    "cannot create one in {}: {error}; set TMPDIR to a writable folder",
                    std::env::temp_dir().display()
                ),
            ));
            return report;
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            report.push(CheckLine::fail(
                "runtime for the checks' child processes",
                format!("cannot start one: {error}"),
            ));
            return report;
        }
    };
    let problem_dir = layout
        .as_ref()
        .filter(|(_, line)| line.passed())
        .map(|(dir, _)| *dir);
    let runner = ProbeRunner::new(
        scratch.path(),
        std::env::vars_os().collect(),
        Duration::from_secs_f64(settings.kill_grace_s),
    );
    let gpu_lines = runtime.block_on(gpu_checks(
        &runner,
        settings,
        vendor,
        selection,
        problem_dir,
    ));
    report.extend(gpu_lines.before_kernel_dir);
    let (sandbox_lines, sandbox) = sandbox_check(settings.sandbox);
    report.extend(sandbox_lines);
    report.sandbox = sandbox;
    report.extend(layout.map(|(_, line)| line));
    report.extend(gpu_lines.problem);
    report
}

/// The kernel directory's layout: the files a run needs, each defining what it must.
pub fn layout_line(dir: &Path, max_source_bytes: u64) -> CheckLine {
    let what = format!("kernel directory {}", dir.display());
    match KernelDir::open(dir, max_source_bytes) {
        Ok(kernel) => {
            let input = if kernel.initial.is_some() {
                "input.py defines kernel_function"
            } else {
                "no input.py (the run generates seed kernels from problem.py)"
            };
            CheckLine::ok(format!(
                "{what}: {input}; problem.py defines Model, get_inputs and get_init_inputs"
            ))
        }
        Err(error) => CheckLine::fail(what, error.to_string()),
    }
}

/// The lines of the checks that need Python or a profiler.
struct GpuLines {
    /// Python, torch, triton, each device, the profiler.
    before_kernel_dir: Vec<CheckLine>,
    /// problem.py imported, after the kernel directory's layout line.
    problem: Option<CheckLine>,
}

async fn gpu_checks(
    runner: &ProbeRunner<'_>,
    settings: &RunSettings,
    vendor: Vendor,
    selection: &DeviceSelection,
    problem_dir: Option<&Path>,
) -> GpuLines {
    let python = absolute(&settings.python);
    let first_pin = selection.devices.first().map(Device::pin);
    let devices = futures_util::future::join_all(
        selection
            .devices
            .iter()
            .map(|device| device_check(runner, &python, vendor, device)),
    );
    let problem = async {
        match (problem_dir, &first_pin) {
            (Some(dir), Some(pin)) => Some(problem_check(runner, &python, dir, pin).await),
            _ => None,
        }
    };
    let (environment, devices, profiler, problem) = tokio::join!(
        environment_check(runner, &python, vendor),
        devices,
        profiler_check(runner, settings, vendor, selection),
        problem,
    );
    let mut lines = environment.lines;
    if environment.torch_works {
        lines.extend(devices);
    }
    lines.extend(profiler);
    GpuLines {
        before_kernel_dir: lines,
        problem: problem.filter(|_| environment.torch_works),
    }
}

async fn profiler_check(
    runner: &ProbeRunner<'_>,
    settings: &RunSettings,
    vendor: Vendor,
    selection: &DeviceSelection,
) -> Vec<CheckLine> {
    if !settings.profiler_enabled {
        return vec![CheckLine::ok(
            "profiler: off (the strategy's platform.profiler is noop)",
        )];
    }
    let parent_path = std::env::var_os("PATH");
    match vendor {
        Vendor::Nvidia => vec![ncu_check(runner, settings, parent_path.as_deref()).await],
        Vendor::Rocm => rocprof_check(runner, settings, selection, parent_path.as_deref()).await,
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::config::{CliOverrides, parse_config, resolve};

    #[test]
    fn on_noop_only_the_kernel_directory_is_checked() {
        let temp = tempfile::tempdir().unwrap();
        let file = crate::config::StrategyFile {
            name: "dry".into(),
            source: crate::config::StrategySource::File(temp.path().join("dry.yaml")),
            text: "platform: noop\n".into(),
        };
        let config = parse_config("dry.yaml", &file.text).unwrap();
        let mut settings = resolve(&file, &config, &CliOverrides::default()).unwrap();
        settings.python = PathBuf::from("/nowhere/python");
        let selection = DeviceSelection {
            platform: Platform::Noop,
            devices: Vec::new(),
            warnings: Vec::new(),
        };
        let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
        let report = preflight(
            &settings,
            &selection,
            Some(&examples.join("optimize_01_matvec")),
        );
        assert_eq!(report.lines().len(), 1);
        assert!(report.passed());
        let report = preflight(&settings, &selection, Some(&examples));
        assert!(!report.passed());
        assert!(
            report.lines()[0].to_string().starts_with(&format!(
                "FAIL kernel directory {}: failed to read",
                examples.display()
            )),
            "{}",
            report.lines()[0]
        );
        assert!(preflight(&settings, &selection, None).passed());
    }
}
