//! NVIDIA's profiler check: ncu runs, and the driver's parameters in /proc let this user read
//! the GPU's performance counters.

use std::ffi::OsStr;
use std::path::Path;

use crate::config::RunSettings;
use crate::profiling::is_executable_file;

use super::probe::{Probe, ProbeRunner};
use super::report::CheckLine;

/// Where the NVIDIA driver says who may read performance counters.
const NVIDIA_DRIVER_PARAMS: &str = "/proc/driver/nvidia/params";
const ERR_NVGPUCTRPERM_FIX: &str = "run kactors as root, or let every user read the counters: \
     `options nvidia NVreg_RestrictProfilingToAdminUsers=0` in a file in /etc/modprobe.d, then \
     reload the nvidia module or reboot (in a container: --cap-add SYS_ADMIN); \
     https://developer.nvidia.com/ERR_NVGPUCTRPERM";

/// The strategy's ncu (platform_kwargs.ncu_bin_path, else found on `parent_path`) runs
/// (`--version`), and the driver lets this user read the GPU's counters.
pub(super) async fn ncu_check(
    runner: &ProbeRunner<'_>,
    settings: &RunSettings,
    parent_path: Option<&OsStr>,
) -> CheckLine {
    let found = crate::nvidia::resolve_ncu_bin(
        settings.ncu_bin_path.as_deref(),
        parent_path,
        is_executable_file,
    );
    match found {
        Ok(ncu) => ncu_version_and_counters(runner, &ncu).await,
        Err(error) => CheckLine::profiler_fail("profiler ncu", error.to_string()),
    }
}

async fn ncu_version_and_counters(runner: &ProbeRunner<'_>, ncu: &Path) -> CheckLine {
    let what = format!("profiler ncu {}", ncu.display());
    let probe = Probe::tool(ncu, &["--version"], None, "ncu --version");
    let version = match runner
        .run(probe)
        .await
        .and_then(|run| run.succeeded("ncu --version"))
    {
        Ok(output) => output
            .lines()
            .find_map(|line| line.trim().strip_prefix("Version "))
            .map(str::to_string)
            .unwrap_or_else(|| "of unknown version".to_string()),
        Err(reason) => {
            return CheckLine::profiler_fail(
                what,
                format!(
                    "{reason}; reinstall Nsight Compute or point platform_kwargs.ncu_bin_path at \
                     a working ncu"
                ),
            );
        }
    };
    let what = format!("{what}: Nsight Compute {version}");
    let params = std::fs::read_to_string(NVIDIA_DRIVER_PARAMS).ok();
    match counter_access(params.as_deref(), is_root()) {
        CounterAccess::Everyone => CheckLine::ok(format!(
            "{what}; every user may read the GPU counters (RmProfilingAdminOnly: 0)"
        )),
        CounterAccess::Root => CheckLine::ok(format!(
            "{what}; the GPU counters are for administrators only, and kactors runs as root"
        )),
        CounterAccess::AdminOnly => CheckLine::profiler_fail(
            what,
            format!(
                "the GPU counters are for administrators only (RmProfilingAdminOnly: 1 in \
                 {NVIDIA_DRIVER_PARAMS}), so every profile would fail with ERR_NVGPUCTRPERM; \
                 {ERR_NVGPUCTRPERM_FIX}"
            ),
        ),
        CounterAccess::Unknown => CheckLine::ok(format!(
            "{what}; whether this user may read the GPU counters is not known here (no \
             RmProfilingAdminOnly in {NVIDIA_DRIVER_PARAMS}); if profiles fail with \
             ERR_NVGPUCTRPERM: {ERR_NVGPUCTRPERM_FIX}"
        )),
    }
}

/// Who may read the GPU's performance counters, as the NVIDIA driver's parameters say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CounterAccess {
    Everyone,
    /// Administrators only, and kactors is one.
    Root,
    /// Administrators only, and kactors is not one: ncu fails with ERR_NVGPUCTRPERM.
    AdminOnly,
    Unknown,
}

/// Reads `RmProfilingAdminOnly: N` from the text of /proc/driver/nvidia/params.
fn counter_access(params: Option<&str>, root: bool) -> CounterAccess {
    let admin_only = params.and_then(|text| {
        text.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            (key.trim() == "RmProfilingAdminOnly").then(|| value.trim().to_string())
        })
    });
    match admin_only.as_deref() {
        Some("0") => CounterAccess::Everyone,
        Some("1") if root => CounterAccess::Root,
        Some("1") => CounterAccess::AdminOnly,
        _ => CounterAccess::Unknown,
    }
}

/// Whether kactors runs with effective user id 0, from /proc/self/status's `Uid:` line (real,
/// effective, saved, filesystem).
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .is_some_and(|status| effective_uid(&status) == Some(0))
}

fn effective_uid(status: &str) -> Option<u32> {
    status.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        if key != "Uid" {
            return None;
        }
        value.split_whitespace().nth(1)?.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_driver_says_who_may_read_the_counters() {
        let params = "ResmanDebugLevel: 4294967295\nRmProfilingAdminOnly: 1\nNvLinkDisable: 0\n";
        assert_eq!(
            counter_access(Some(params), false),
            CounterAccess::AdminOnly
        );
        assert_eq!(counter_access(Some(params), true), CounterAccess::Root);
        let open = params.replace("RmProfilingAdminOnly: 1", "RmProfilingAdminOnly: 0");
        assert_eq!(counter_access(Some(&open), false), CounterAccess::Everyone);
        assert_eq!(
            counter_access(Some("NvLinkDisable: 0\n"), false),
            CounterAccess::Unknown
        );
        assert_eq!(counter_access(None, false), CounterAccess::Unknown);
    }

    #[test]
    fn the_effective_uid_is_the_second_of_the_uid_line() {
        let status =
            "Name:\tkactors\nUmask:\t0022\nUid:\t1000\t0\t0\t0\nGid:\t1000\t1000\t1000\t1000\n";
        assert_eq!(effective_uid(status), Some(0));
        assert_eq!(effective_uid("Name:\tkactors\n"), None);
    }
}
