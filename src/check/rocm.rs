//! ROCm's profiler check: rocprofv3 runs, and the first device lists the counters kactors'
//! passes collect.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::path::Path;

use crate::config::RunSettings;
use crate::devices::{Device, DeviceKind, DeviceSelection};
use crate::profiling::is_executable_file;

use super::probe::{Probe, ProbeRunner};
use super::report::CheckLine;

/// The strategy's rocprofv3 (platform_kwargs.rocprof_bin_path, else found as
/// `rocm::resolve_rocprof_bin` looks, `parent_path` first) runs, and lists the counters
/// kactors' passes need.
pub(super) async fn rocprof_check(
    runner: &ProbeRunner<'_>,
    settings: &RunSettings,
    selection: &DeviceSelection,
    parent_path: Option<&OsStr>,
) -> Vec<CheckLine> {
    let found = crate::rocm::resolve_rocprof_bin(
        settings.rocprof_bin_path.as_deref(),
        parent_path,
        &settings.python,
        is_executable_file,
    );
    match found {
        Ok(rocprof) => rocprof_runs_and_lists_counters(runner, &rocprof, selection).await,
        Err(error) => vec![CheckLine::profiler_fail(
            "profiler rocprofv3",
            error.to_string(),
        )],
    }
}

/// rocprofv3 runs (`--help`, `--version`: the options kactors uses and its warnings), and lists
/// the counters kactors' passes need on the first device, under that device's pin.
async fn rocprof_runs_and_lists_counters(
    runner: &ProbeRunner<'_>,
    rocprof: &Path,
    selection: &DeviceSelection,
) -> Vec<CheckLine> {
    let what = format!("profiler rocprofv3 {}", rocprof.display());
    let help = runner
        .run(Probe::tool(rocprof, &["--help"], None, "rocprofv3 --help"))
        .await
        .and_then(|run| run.succeeded("rocprofv3 --help"));
    let help = match help {
        Ok(help) => help,
        Err(reason) => {
            return vec![CheckLine::profiler_fail(
                what,
                format!(
                    "{reason}; reinstall ROCm's rocprofiler-sdk or point \
                     platform_kwargs.rocprof_bin_path at a working rocprofv3"
                ),
            )];
        }
    };
    let version = runner
        .run(Probe::tool(
            rocprof,
            &["--version"],
            None,
            "rocprofv3 --version",
        ))
        .await
        .and_then(|run| run.succeeded("rocprofv3 --version"))
        .ok();
    let capabilities = crate::rocm::RocprofCapabilities::from_help(&help, version.as_deref());
    let version = capabilities
        .version
        .map_or("unknown".to_string(), |version| version.to_string());
    let mut tool_line = format!("{what}: version {version}");
    for warning in capabilities.warnings() {
        tool_line.push_str("; warning: ");
        tool_line.push_str(&warning);
    }
    let mut lines = vec![CheckLine::ok(tool_line)];
    let Some(device) = selection.devices.first() else {
        return lines;
    };
    let list_args = match capabilities.list_counters_args() {
        Ok(args) => args,
        Err(error) => {
            lines.push(CheckLine::profiler_fail(
                format!("rocprofv3 lists device {}'s counters", device.id),
                format!("{error}; install ROCm 10.1's rocprofiler-sdk"),
            ));
            return lines;
        }
    };
    let list_args: Vec<String> = list_args
        .iter()
        .map(|arg| arg.to_string_lossy().into_owned())
        .collect();
    let list_args: Vec<&str> = list_args.iter().map(String::as_str).collect();
    let listing = runner
        .run(Probe::tool(
            rocprof,
            &list_args,
            Some(&device.pin()),
            "rocprofv3 counter list",
        ))
        .await
        .and_then(|run| run.succeeded(&format!("rocprofv3 {}", list_args.join(" "))));
    lines.push(counter_list_line(device, listing));
    lines
}

fn counter_list_line(device: &Device, listing: Result<String, String>) -> CheckLine {
    let what = format!("rocprofv3 lists device {}'s counters", device.id);
    let listing = match listing {
        Ok(listing) => listing,
        Err(reason) => {
            return CheckLine::profiler_fail(
                what,
                format!(
                    "{reason}; rocprofv3 needs read and write access to /dev/kfd and \
                     /dev/dri/renderD* (add the user to the render and video groups)"
                ),
            );
        }
    };
    let available = crate::rocm::parse_available_counters(&listing);
    if available.is_empty() {
        return CheckLine::ok(format!(
            "{what}: none could be read from its list, so no compute-work counters will be \
             collected"
        ));
    }
    let gfx_target = match &device.kind {
        DeviceKind::Rocm { gfx_target, .. } => gfx_target.as_deref(),
        _ => None,
    };
    let unlisted = unlisted_counters(gfx_target, &available);
    if unlisted.is_empty() {
        CheckLine::ok(format!(
            "{what}: all {} counter passes kactors makes are listed",
            crate::rocm::counter_pass_plan(gfx_target, &available).len()
        ))
    } else {
        CheckLine::profiler_fail(
            what,
            format!(
                "it does not list {}, which kactors' counter passes collect; profiles on this \
                 device would fail (is this an AMD Instinct GPU?)",
                unlisted.join(", ")
            ),
        )
    }
}

/// The counters of every pass none of whose attempts the device lists entirely.
fn unlisted_counters(gfx_target: Option<&str>, available: &BTreeSet<String>) -> Vec<String> {
    crate::rocm::counter_pass_plan(gfx_target, available)
        .iter()
        .filter(|pass| {
            !pass.attempts().iter().any(|group| {
                group
                    .counters()
                    .iter()
                    .all(|counter| available.contains(counter))
            })
        })
        .flat_map(|pass| pass.attempts()[0].counters().to_vec())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_that_lists_too_few_counters_names_them() {
        // An MI200 that lists every counter its plan asks for first (the TCC_EA_* spelling);
        // counter_groups.rs's tests say which counters that plan holds.
        let all: BTreeSet<String> =
            crate::rocm::counter_pass_plan(Some("gfx90a"), &BTreeSet::new())
                .iter()
                .flat_map(|pass| pass.attempts()[0].counters().to_vec())
                .collect();
        assert!(all.contains("TCC_EA_RDREQ_sum") && all.contains("WRITE_SIZE"));
        assert_eq!(
            unlisted_counters(Some("gfx942"), &all),
            Vec::<String>::new(),
            "the other EA spelling is the retry"
        );
        let mut without = all.clone();
        without.remove("WRITE_SIZE");
        without.remove("TCC_EA_RDREQ_sum");
        assert_eq!(
            unlisted_counters(Some("gfx90a"), &without),
            ["TCC_EA_RDREQ_sum", "WRITE_SIZE"]
        );
    }
}
