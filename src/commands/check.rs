//! `kactors check`: the strategy's configuration, its devices, then the preflight's lines
//! (`crate::check`), which `kactors run` makes too before it starts.

use crate::check::{CheckLine, CheckReport, layout_line, preflight};
use crate::cli::CheckArgs;
use crate::config::CliOverrides;
use crate::console;
use crate::devices::{DeviceSelection, HostEnvironment, select_devices};
use crate::exit;
use crate::vendor::{Platform, PlatformRequest};

use super::settings::{LoadedStrategy, load_strategy, platform_name};

const NO_DEVICE_FIX: &str =
    "make a GPU visible: its driver's nvidia-smi or amd-smi on PATH, no visibility mask hiding it";

/// Prints every line (or one JSON object with `--json`). Exit 0 when every line is ok, 2
/// (environment) otherwise.
pub(super) fn check(args: CheckArgs) -> i32 {
    let report = check_report(&args);
    if args.json {
        console::out(report.to_json());
    } else {
        for line in report.lines() {
            console::out(line);
        }
    }
    if report.passed() {
        exit::SUCCESS
    } else {
        exit::USAGE
    }
}

fn check_report(args: &CheckArgs) -> CheckReport {
    let mut report = CheckReport::default();
    let overrides = CliOverrides {
        python: args.python.clone(),
        ..CliOverrides::default()
    };
    let LoadedStrategy { file, settings } =
        match load_strategy(&args.config_dir, &args.strategy, &overrides) {
            Ok(loaded) => loaded,
            Err(error) => {
                report.push(CheckLine::fail(
                    format!("configuration of strategy {}", args.strategy),
                    error.to_string(),
                ));
                return report;
            }
        };
    for warning in &settings.warnings {
        console::err(format_args!("kactors: warning: {warning}"));
    }
    report.push(CheckLine::ok(format!(
        "configuration: strategy {} from {}, platform {}",
        settings.strategy,
        file.display_name(),
        platform_name(settings.platform)
    )));
    let request = crate::gpus::device_request(&settings, args.gpus.clone());
    let host = HostEnvironment::from_process(settings.python.clone());
    match select_devices(&request, &host) {
        Ok(selection) => {
            for warning in &selection.warnings {
                console::err(format_args!("kactors: warning: {warning}"));
            }
            report.extend(preflight(&settings, &selection, args.kernel_dir.as_deref()));
        }
        Err(error) => {
            report.push(CheckLine::fail(
                format!(
                    "devices: {error}; not checked without one: each device as torch sees it \
                     under its pin, and problem.py imported on a device"
                ),
                NO_DEVICE_FIX,
            ));
            match request.platform {
                // What needs no device is still checked: Python, torch, triton, the profiler,
                // the sandbox and the kernel directory.
                PlatformRequest::Exactly(platform @ Platform::Vendor(_)) => {
                    let selection = DeviceSelection {
                        platform,
                        devices: Vec::new(),
                        warnings: Vec::new(),
                    };
                    report.extend(preflight(&settings, &selection, args.kernel_dir.as_deref()));
                }
                _ => {
                    if let Some(dir) = &args.kernel_dir {
                        report.push(layout_line(dir, settings.max_source_bytes));
                    }
                }
            }
        }
    }
    report
}
