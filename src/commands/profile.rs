//! `kactors profile`: one kernel profiled once on one device, by the profiler a run of the
//! strategy would use (the Profiler actor's code: `platform_profiler::profile_once`), with the
//! strategy's `platform_kwargs` (ncu_bin_path, rocprof_bin_path).
//!
//! The device is locked against kactors runs for the profile's length, and every file goes in
//! a fresh folder of the profile's own, `<run-dir>/profile-<timestamp>/`: the kernel copied as
//! kernel.py, the rendered wrapper in tools/, each profiler invocation's folder and log under
//! profile/, and the report as profile.json. Nothing is written into the kernel directory.

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use actors::model::DeviceId;
use tokio::signal::unix::{SignalKind, signal};

use crate::cli::ProfileArgs;
use crate::config::CliOverrides;
use crate::config::ranges::{MAX_DURATION_S, max_duration_words, number_words};
use crate::console;
use crate::devices::{Device, GpuLock, HostEnvironment, lock_devices, select_devices};
use crate::exit;
use crate::gpus::{device_request, lock_dir};
use crate::kernel_dir::KernelDir;
use crate::platform_profiler::profile_once;
use crate::profiling::{ProfileReport, ProfileTarget, standalone_watchdog};
use crate::vendor::{PlatformRequest, Vendor};

use super::CommandError;
use super::settings::load_strategy;

/// What ended the profile command's actor system.
enum Finished {
    Profiled(Box<ProfileReport>),
    Interrupted,
}

pub(super) fn profile(args: ProfileArgs) -> Result<i32, CommandError> {
    let overrides = CliOverrides {
        python: args.python.clone(),
        ..CliOverrides::default()
    };
    let mut settings = load_strategy(&args.config_dir, &args.strategy, &overrides)?.settings;
    for warning in &settings.warnings {
        console::err(format_args!("kactors: warning: {warning}"));
    }
    if settings.platform == PlatformRequest::NOOP {
        return Err(CommandError::Usage(format!(
            "strategy {} runs on the noop platform, and the noop platform has no profiler: \
             choose a strategy whose platform is nvidia or rocm",
            settings.strategy
        )));
    }
    if !settings.profiler_enabled {
        return Err(CommandError::Usage(format!(
            "strategy {} turns the profiler off (platform.profiler: noop): choose one that \
             profiles",
            settings.strategy
        )));
    }
    let device_id = one_device(args.gpus.as_deref())?;
    if let Some(seconds) = positive_seconds("--pass-timeout", args.pass_timeout)? {
        settings.profile_pass_timeout_s = seconds;
    }
    if let Some(seconds) = positive_seconds("--timeout", args.timeout)? {
        settings.profile_budget_s = seconds;
    }
    let kernel_dir = KernelDir::open(&args.kernel_dir, settings.max_source_bytes)?;
    let kernel_file = args
        .kernel
        .clone()
        .unwrap_or_else(|| kernel_dir.root.join("input.py"));
    let source =
        crate::user_file::read_text(&kernel_file, settings.max_source_bytes).map_err(|error| {
            CommandError::Usage(format!(
                "{error}; --kernel names a Python file with kernel_function"
            ))
        })?;

    let host = HostEnvironment::from_process(settings.python.clone());
    let mut selection = select_devices(
        &device_request(&settings, device_id.map(|id| vec![id])),
        &host,
    )?;
    for warning in &selection.warnings {
        console::err(format_args!("kactors: warning: {warning}"));
    }
    let (device, _lock) = lock_first_free(&lock_dir(), &selection.devices)?;
    selection.devices = vec![device.clone()];

    let folder = create_profile_folder(&args.run_dir, SystemTime::now()).map_err(|error| {
        CommandError::Environment(format!(
            "failed to create a profile folder under {}: {error}",
            args.run_dir.display()
        ))
    })?;
    console::err(format_args!("kactors: profile folder {}", folder.display()));
    let candidate = folder.join("kernel.py");
    std::fs::write(&candidate, source).map_err(|error| {
        CommandError::Environment(format!("failed to write {}: {error}", candidate.display()))
    })?;
    let platform = crate::platform::prepare(&folder, &settings, &selection, &kernel_dir.root)
        .map_err(|error| {
            CommandError::Environment(format!(
                "failed to prepare the profile folder {}: {error}",
                folder.display()
            ))
        })?;
    let target = ProfileTarget {
        device: DeviceId(device.id),
        candidate,
        folder: folder.clone(),
        kernel_names: Vec::new(),
        label: format!("kernel {}", kernel_file.display()),
    };
    let kill_grace = Duration::from_secs_f64(settings.kill_grace_s);

    let finished = actix::System::new().block_on(async move {
        let profiler = platform
            .profiler(standalone_watchdog(kill_grace))
            .ok_or_else(|| {
                CommandError::Usage("the strategy's platform has no profiler".to_string())
            })?;
        let (mut interrupt, mut terminate) = signal(SignalKind::interrupt())
            .and_then(|interrupt| Ok((interrupt, signal(SignalKind::terminate())?)))
            .map_err(|error| {
                CommandError::Environment(format!(
                    "failed to install the SIGINT/SIGTERM handlers: {error}"
                ))
            })?;
        // An interrupt drops the profile, and with it the running profiler's process group.
        tokio::select! {
            report = profile_once(&profiler, target) => {
                Ok::<_, CommandError>(Finished::Profiled(Box::new(report)))
            }
            _ = interrupt.recv() => Ok(Finished::Interrupted),
            _ = terminate.recv() => Ok(Finished::Interrupted),
        }
    })?;
    let report = match finished {
        Finished::Profiled(report) => report,
        Finished::Interrupted => {
            console::err(format_args!("kactors: profile interrupted"));
            return Ok(exit::INTERRUPTED);
        }
    };
    let json = serde_json::to_string(&report).expect("a profile report is plain data");
    let saved = folder.join("profile.json");
    if let Err(error) = std::fs::write(&saved, format!("{json}\n")) {
        console::err(format_args!(
            "kactors: warning: failed to write {}: {error}",
            saved.display()
        ));
    }
    if args.json {
        console::out(json);
    } else {
        console::out(describe(&report, &kernel_file, &device).trim_end());
    }
    Ok(if report.ok {
        exit::SUCCESS
    } else {
        exit::RUN_FAILED
    })
}

/// `--gpus` of `kactors profile`: at most one id.
fn one_device(gpus: Option<&[u32]>) -> Result<Option<u32>, CommandError> {
    match gpus {
        None => Ok(None),
        Some([id]) => Ok(Some(*id)),
        Some(ids) => Err(CommandError::Usage(format!(
            "kactors profile profiles on one device: --gpus takes one id, not {}",
            ids.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
        ))),
    }
}

/// `--pass-timeout` and `--timeout`, which override profile_pass_timeout_s and profile_budget_s:
/// more than 0 and at most [`MAX_DURATION_S`], as the keys are.
fn positive_seconds(flag: &str, seconds: Option<f64>) -> Result<Option<f64>, CommandError> {
    match seconds {
        None => Ok(None),
        Some(seconds) if seconds > 0.0 && seconds <= MAX_DURATION_S => Ok(Some(seconds)),
        Some(seconds) => Err(CommandError::Usage(format!(
            "{flag} {}: expected a positive number of seconds, at most {}",
            number_words(seconds),
            max_duration_words()
        ))),
    }
}

/// The first of `devices` that no other kactors run holds, with its lock.
fn lock_first_free(
    lock_dir: &Path,
    devices: &[Device],
) -> Result<(Device, Option<GpuLock>), CommandError> {
    let mut held = Vec::new();
    for device in devices {
        let mut attempt = lock_devices(lock_dir, vec![device.clone()])?;
        match attempt.locked.pop() {
            Some(locked) => return Ok((locked.device, locked.lock)),
            None => held.extend(attempt.warnings),
        }
    }
    Err(CommandError::Environment(format!(
        "no GPU to profile on: {}; wait for that run, or choose another GPU with --gpus",
        held.join("; ")
    )))
}

/// Makes `<parent>/profile-<timestamp>/` (`-2`, `-3`, ... when taken), absolute: the profiler's
/// children run in folders of their own and get absolute paths.
fn create_profile_folder(parent: &Path, now: SystemTime) -> io::Result<PathBuf> {
    let parent = std::path::absolute(parent)?;
    std::fs::create_dir_all(&parent)?;
    let stem = format!("profile-{}", crate::run_dir::folder_stamp(now));
    for attempt in 1..=1000 {
        let name = match attempt {
            1 => stem.clone(),
            n => format!("{stem}-{n}"),
        };
        let folder = parent.join(name);
        match std::fs::create_dir(&folder) {
            Ok(()) => return Ok(folder),
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(error) => return Err(error),
        }
    }
    Err(io::Error::other(format!(
        "{} holds 1000 folders named {stem}*",
        parent.display()
    )))
}

/// The profile for a person: the verdict first, then every figure.
fn describe(report: &ProfileReport, kernel: &Path, device: &Device) -> String {
    let mut out = format!(
        "profile of {} on device {} ({}) with {}: {}\n",
        kernel.display(),
        device.id,
        device.name,
        match report.vendor {
            Vendor::Nvidia => "Nsight Compute",
            Vendor::Rocm => "rocprofv3",
        },
        if report.ok { "ok" } else { "failed" }
    );
    if let Some(error) = &report.error {
        out.push_str(&format!("error: {error}\n"));
    }
    if !report.kernels.is_empty() {
        out.push_str(&format!("kernels: {}\n", report.kernels.join(", ")));
    }
    if let Some(duration_ms) = report.duration_ms {
        out.push_str(&format!("duration: {duration_ms} ms\n"));
    }
    if let Some(roofline) = &report.roofline {
        let compute = roofline
            .compute_sol_pct
            .map_or("not measured".to_string(), |pct| format!("{pct:.1}%"));
        out.push_str(&format!(
            "roofline: {}-bound; memory SOL {:.1}%, compute SOL {compute}, efficiency {:.1}%, {}\n",
            roofline.bottleneck.name(),
            roofline.memory_sol_pct,
            roofline.efficiency_pct,
            if roofline.at_roofline {
                "at the roofline"
            } else {
                "not at the roofline"
            }
        ));
    }
    let mix = report.instruction_mix;
    if mix.is_available() {
        let share = |pct: Option<f64>| pct.map_or("unknown".to_string(), |p| format!("{p:.1}%"));
        out.push_str(&format!(
            "instruction mix: VALU {}, VMEM {} of issued instructions\n",
            share(mix.valu_pct),
            share(mix.vmem_pct)
        ));
    }
    for (title, values) in [("metrics", &report.metrics), ("counters", &report.counters)] {
        if values.is_empty() {
            continue;
        }
        out.push_str(&format!("{title}:\n"));
        for (name, value) in values {
            out.push_str(&format!("  {name} = {value}\n"));
        }
    }
    out.push_str("passes:\n");
    for (number, pass) in report.passes.iter().enumerate() {
        let end = match (pass.killed, pass.exit) {
            (true, _) => "killed past its deadline".to_string(),
            (false, Some(code)) => format!("exit {code}"),
            (false, None) => "ended by a signal".to_string(),
        };
        let counters = if pass.counters.is_empty() {
            String::new()
        } else {
            format!(" [{}]", pass.counters.join(" "))
        };
        out.push_str(&format!(
            "  {}: {end}, {:.2} s{counters}\n",
            number + 1,
            pass.seconds
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_device_at_most() {
        assert_eq!(one_device(None).unwrap(), None);
        assert_eq!(one_device(Some(&[3])).unwrap(), Some(3));
        let error = one_device(Some(&[0, 1])).unwrap_err().to_string();
        assert_eq!(
            error,
            "kactors profile profiles on one device: --gpus takes one id, not 0,1"
        );
    }

    #[test]
    fn timeouts_are_positive_seconds_at_most_a_week() {
        assert_eq!(positive_seconds("--timeout", Some(2.5)).unwrap(), Some(2.5));
        assert_eq!(
            positive_seconds("--timeout", Some(MAX_DURATION_S)).unwrap(),
            Some(MAX_DURATION_S)
        );
        assert_eq!(positive_seconds("--timeout", None).unwrap(), None);
        for (wrong, written) in [
            (0.0, "0"),
            (-1.0, "-1"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "inf"),
            (1e300, "1e300"),
            (MAX_DURATION_S + 1.0, "604801"),
        ] {
            let error = positive_seconds("--pass-timeout", Some(wrong))
                .unwrap_err()
                .to_string();
            assert_eq!(
                error,
                format!(
                    "--pass-timeout {written}: expected a positive number of seconds, at most \
                     604800 s (7 days)"
                )
            );
        }
    }

    #[test]
    fn each_profile_gets_a_fresh_timestamped_folder() {
        let temp = tempfile::tempdir().unwrap();
        let now = SystemTime::UNIX_EPOCH + Duration::from_millis(1_796_207_744_123);
        let first = create_profile_folder(&temp.path().join("runs"), now).unwrap();
        let second = create_profile_folder(&temp.path().join("runs"), now).unwrap();
        let runs = temp.path().join("runs");
        assert_eq!(first, runs.join("profile-20261202T103544Z"));
        assert_eq!(second, runs.join("profile-20261202T103544Z-2"));
    }

    fn nvidia_gpu(id: u32, uuid: &str) -> Device {
        Device {
            id,
            name: "NVIDIA H200".to_string(),
            kind: crate::devices::DeviceKind::Nvidia {
                uuid: uuid.to_string(),
                bus_id: format!("00000000:00:0{id}.0"),
            },
            spec: None,
        }
    }

    #[test]
    fn a_gpu_another_run_holds_is_passed_over() {
        let temp = tempfile::tempdir().unwrap();
        let first = nvidia_gpu(0, "GPU-aaaaaaaa");
        let second = nvidia_gpu(1, "GPU-bbbbbbbb");
        let other_run = lock_devices(temp.path(), vec![first.clone()]).unwrap();
        assert_eq!(other_run.locked.len(), 1);

        let (device, lock) = lock_first_free(temp.path(), &[first.clone(), second]).unwrap();
        assert_eq!(device.id, 1);
        assert!(lock.is_some(), "the profile holds its GPU");

        let error = lock_first_free(temp.path(), &[first])
            .unwrap_err()
            .to_string();
        assert!(error.starts_with("no GPU to profile on: "), "{error}");
        assert!(error.ends_with("choose another GPU with --gpus"), "{error}");
    }
}
