//! `kactors check`, and the same checks before `kactors run` starts ([`preflight`]): the Python
//! interpreter, torch and triton, each pinned device as torch sees it under its pin, the
//! profiler, and the kernel directory. Each finding is one line, `ok <what>` or
//! `FAIL <what>: <how to fix>`.
//!
//! Every question to Python or a profiler is a child process through `crate::process`: its own
//! process group, an environment without credentials (plus the device pin where a device is
//! asked about), its output in a scratch folder that is removed afterwards, and a deadline
//! after which its whole group is ended. Nothing is written into the kernel directory: Python
//! runs with PYTHONDONTWRITEBYTECODE=1 and its working directory in the scratch folder.

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::cli::CheckArgs;
use crate::config::{CliOverrides, RunSettings, Strategies, parse_config, resolve};
use crate::console;
use crate::devices::{
    Device, DeviceKind, DeviceSelection, HostEnvironment, Pin, SelectedVendor, select_devices,
};
use crate::exit;
use crate::kernel_dir::KernelDir;
use crate::process::{child_environment, spawn, terminate_with_grace};
use crate::profiling::{absolute, error_chain, is_executable_file};

/// Importing torch from a cold disk and initialising a GPU's context can take tens of seconds.
const PYTHON_TIMEOUT: Duration = Duration::from_secs(120);
/// `ncu --version`, `rocprofv3 --help`, `--version` and `-L` answer in seconds.
const PROFILER_TIMEOUT: Duration = Duration::from_secs(60);
/// The line of a check script's output that carries its answer, as JSON.
const ANSWER_PREFIX: &str = "KACTORS_CHECK ";
/// Where the NVIDIA driver says who may read performance counters.
const NVIDIA_DRIVER_PARAMS: &str = "/proc/driver/nvidia/params";
const ERR_NVGPUCTRPERM_FIX: &str = "run kactors as root, or let every user read the counters: \
     `options nvidia NVreg_RestrictProfilingToAdminUsers=0` in a file in /etc/modprobe.d, then \
     reload the nvidia module or reboot (in a container: --cap-add SYS_ADMIN); \
     https://developer.nvidia.com/ERR_NVGPUCTRPERM";

/// The questions kactors asks the configured Python, one per mode (`python -c SCRIPT MODE`).
/// Each prints one `KACTORS_CHECK {json}` line; a failure inside is part of the answer.
const CHECK_SCRIPT: &str = r#"
import json
import sys
import traceback

sys.dont_write_bytecode = True


def failure(error):
    return "".join(traceback.format_exception_only(type(error), error)).strip()


def imported(name):
    try:
        module = __import__(name)
    except BaseException as error:
        return None, {"error": failure(error)}
    return module, {"version": str(getattr(module, "__version__", "unknown"))}


def environment():
    answer = {"python": sys.version.split()[0], "executable": sys.executable}
    torch, answer["torch"] = imported("torch")
    if torch is not None:
        answer["torch"]["cuda"] = getattr(torch.version, "cuda", None)
        answer["torch"]["hip"] = getattr(torch.version, "hip", None)
    answer["triton"] = imported("triton")[1]
    return answer


def device():
    try:
        import torch
        count = torch.cuda.device_count()
        answer = {"count": count}
        if count:
            properties = torch.cuda.get_device_properties(0)
            answer["name"] = properties.name
            answer["uuid"] = str(getattr(properties, "uuid", "") or "")
        return answer
    except BaseException as error:
        return {"error": failure(error)}


def problem(kernel_dir):
    sys.path.insert(0, kernel_dir)
    try:
        import problem
    except BaseException as error:
        return {"error": failure(error)}
    wanted = ("Model", "get_inputs", "get_init_inputs")
    return {"missing": [name for name in wanted if not callable(getattr(problem, name, None))]}


mode = sys.argv[1]
if mode == "environment":
    answer = environment()
elif mode == "device":
    answer = device()
else:
    answer = problem(sys.argv[2])
print("KACTORS_CHECK " + json.dumps(answer), flush=True)
"#;

/// One finding: `ok <what>` or `FAIL <what>: <how to fix>`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CheckLine {
    ok: bool,
    what: String,
    fix: Option<String>,
    /// Whether a failure of this check keeps `kactors run` from starting.
    #[serde(skip)]
    stops_a_run: bool,
}

impl CheckLine {
    fn ok(what: impl Into<String>) -> Self {
        CheckLine {
            ok: true,
            what: what.into(),
            fix: None,
            stops_a_run: false,
        }
    }

    fn fail(what: impl Into<String>, fix: impl Into<String>) -> Self {
        CheckLine {
            ok: false,
            what: what.into(),
            fix: Some(fix.into()),
            stops_a_run: true,
        }
    }

    /// A failed profiler check: a run without a working profiler still verifies and times
    /// candidates, and says why it stopped profiling (issue 4), so it does not stop a run.
    fn profiler_fail(what: impl Into<String>, fix: impl Into<String>) -> Self {
        CheckLine {
            stops_a_run: false,
            ..CheckLine::fail(what, fix)
        }
    }

    pub fn passed(&self) -> bool {
        self.ok
    }

    pub fn what(&self) -> &str {
        &self.what
    }

    pub fn fix(&self) -> Option<&str> {
        self.fix.as_deref()
    }

    /// Failed, and a run cannot go on without it: everything but the profiler.
    pub fn stops_a_run(&self) -> bool {
        !self.ok && self.stops_a_run
    }
}

impl fmt::Display for CheckLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.fix {
            None => write!(f, "ok {}", self.what),
            Some(fix) => write!(f, "FAIL {}: {fix}", self.what),
        }
    }
}

/// Every line of one check, in the order they are printed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckReport {
    lines: Vec<CheckLine>,
}

impl CheckReport {
    pub fn lines(&self) -> &[CheckLine] {
        &self.lines
    }

    pub fn passed(&self) -> bool {
        self.lines.iter().all(CheckLine::passed)
    }

    pub fn failures(&self) -> impl Iterator<Item = &CheckLine> {
        self.lines.iter().filter(|line| !line.passed())
    }

    /// `kactors check --json`: `{"ok", "checks": [{"ok", "what", "fix"}]}`.
    pub fn to_json(&self) -> Value {
        serde_json::json!({ "ok": self.passed(), "checks": self.lines })
    }

    fn push(&mut self, line: CheckLine) {
        self.lines.push(line);
    }
}

/// The checks `kactors run` makes once its settings, devices and kernel directory are known:
/// on a GPU platform the Python interpreter, torch and triton, each device visible to torch
/// under its pin, the profiler (unless the strategy turns it off), and the kernel directory with
/// its problem.py imported; on the noop platform, which runs no Python, the kernel directory's
/// layout only.
///
/// Blocking: it runs its children on a runtime of its own, so call it before the actor system
/// starts (never from inside a tokio runtime).
pub fn preflight(
    settings: &RunSettings,
    selection: &DeviceSelection,
    kernel_dir: Option<&Path>,
) -> CheckReport {
    let mut report = CheckReport::default();
    let layout = kernel_dir.map(|dir| (dir, layout_line(dir, settings.max_source_bytes)));
    if selection.vendor == SelectedVendor::Noop {
        report.lines.extend(layout.map(|(_, line)| line));
        return report;
    }
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
    let runner = ProbeRunner {
        scratch: scratch.path(),
        parent_env: std::env::vars_os().collect(),
        grace: Duration::from_secs_f64(settings.kill_grace_s),
        next: Cell::new(0),
    };
    let gpu_lines = runtime.block_on(gpu_checks(&runner, settings, selection, problem_dir));
    report.lines.extend(gpu_lines.before_kernel_dir);
    report.lines.extend(layout.map(|(_, line)| line));
    report.lines.extend(gpu_lines.problem);
    report
}

/// `kactors check`: the configuration, then [`preflight`]'s lines. Exit 0 when every line is
/// ok, 2 (environment) otherwise.
pub fn check(args: CheckArgs) -> i32 {
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
    let strategies = Strategies::new(args.config_dir.config_dir.clone());
    let overrides = CliOverrides {
        python: args.python.clone(),
        ..CliOverrides::default()
    };
    let settings = strategies.find(&args.strategy).and_then(|file| {
        let config = parse_config(&file.display_name(), &file.text)?;
        resolve(&file, &config, &overrides).map(|settings| (file, settings))
    });
    let (file, settings) = match settings {
        Ok(found) => found,
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
        crate::commands::platform_name(settings.platform)
    )));
    let request = crate::gpus::device_request(&settings, args.gpus.clone());
    let host = HostEnvironment::from_process(settings.python.clone());
    match select_devices(&request, &host) {
        Ok(selection) => {
            for warning in &selection.warnings {
                console::err(format_args!("kactors: warning: {warning}"));
            }
            let preflight = preflight(&settings, &selection, args.kernel_dir.as_deref());
            report.lines.extend(preflight.lines);
        }
        Err(error) => {
            report.push(CheckLine::fail("devices", error.to_string()));
            if let Some(dir) = &args.kernel_dir {
                report.push(layout_line(dir, settings.max_source_bytes));
            }
        }
    }
    report
}

fn layout_line(dir: &Path, max_source_bytes: u64) -> CheckLine {
    let what = format!("kernel directory {}", dir.display());
    match KernelDir::open(dir, max_source_bytes) {
        Ok(_) => CheckLine::ok(format!(
            "{what}: input.py defines kernel_function; problem.py defines Model, get_inputs and \
             get_init_inputs"
        )),
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
    selection: &DeviceSelection,
    problem_dir: Option<&Path>,
) -> GpuLines {
    let python = absolute(&settings.python);
    let first_pin = selection.devices.first().map(Device::pin);
    let devices = futures_util::future::join_all(
        selection
            .devices
            .iter()
            .map(|device| device_check(runner, &python, selection.vendor, device)),
    );
    let problem = async {
        match (problem_dir, &first_pin) {
            (Some(dir), Some(pin)) => Some(problem_check(runner, &python, dir, pin).await),
            _ => None,
        }
    };
    let (environment, devices, profiler, problem) = tokio::join!(
        environment_check(runner, &python, selection.vendor),
        devices,
        profiler_check(runner, settings, selection),
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

/// The Python, torch and triton lines, and whether torch works for the platform: without it,
/// the device and problem.py checks would only repeat the torch failure.
struct EnvironmentLines {
    lines: Vec<CheckLine>,
    torch_works: bool,
}

async fn environment_check(
    runner: &ProbeRunner<'_>,
    python: &Path,
    vendor: SelectedVendor,
) -> EnvironmentLines {
    let probe = Probe::python(python, &["environment"], None, "python environment check");
    let answer = match runner.run(probe).await.and_then(|run| run.answer()) {
        Ok(answer) => answer,
        Err(reason) => {
            return EnvironmentLines {
                lines: vec![CheckLine::fail(
                    format!("python {}", python.display()),
                    format!(
                        "{reason}; install Python 3, or name the interpreter with --python or \
                         the configuration key python"
                    ),
                )],
                torch_works: false,
            };
        }
    };
    let mut lines = vec![CheckLine::ok(format!(
        "python {}: Python {} ({})",
        python.display(),
        text(&answer["python"]),
        text(&answer["executable"])
    ))];
    let torch = torch_line(&answer["torch"], vendor, python);
    let torch_works = torch.passed();
    lines.push(torch);
    let triton = &answer["triton"];
    lines.push(match triton["version"].as_str() {
        Some(version) => CheckLine::ok(format!("triton {version} imports")),
        None => CheckLine::fail(
            "triton imports",
            format!(
                "{}; install triton into {}",
                text(&triton["error"]),
                python.display()
            ),
        ),
    });
    EnvironmentLines { lines, torch_works }
}

fn torch_line(torch: &Value, vendor: SelectedVendor, python: &Path) -> CheckLine {
    let Some(version) = torch["version"].as_str() else {
        return CheckLine::fail(
            "torch imports",
            format!(
                "{}; install a {} build of torch into {}",
                text(&torch["error"]),
                build_name(vendor),
                python.display()
            ),
        );
    };
    let (build, label) = match vendor {
        SelectedVendor::Rocm => (torch["hip"].as_str(), "HIP"),
        SelectedVendor::Nvidia | SelectedVendor::Noop => (torch["cuda"].as_str(), "CUDA"),
    };
    match build {
        Some(build) => CheckLine::ok(format!("torch {version} imports ({label} {build})")),
        None => CheckLine::fail(
            format!("torch {version} imports"),
            format!(
                "it is not a {} build, so it cannot use the {vendor} GPUs; install a {} build of \
                 torch into {}",
                build_name(vendor),
                build_name(vendor),
                python.display()
            ),
        ),
    }
}

fn build_name(vendor: SelectedVendor) -> &'static str {
    match vendor {
        SelectedVendor::Rocm => "ROCm",
        SelectedVendor::Nvidia | SelectedVendor::Noop => "CUDA",
    }
}

/// Device `device` as torch sees it under the device's pin: exactly one device, and on NVIDIA
/// the one with the UUID nvidia-smi gave. (On ROCm torch's UUID is reported but not compared:
/// its form next to amd-smi's hip_uuid is not documented.)
async fn device_check(
    runner: &ProbeRunner<'_>,
    python: &Path,
    vendor: SelectedVendor,
    device: &Device,
) -> CheckLine {
    let pin = device.pin();
    let pin_text = pin_words(&pin);
    let what = format!("device {} visible to torch under {pin_text}", device.id);
    let probe = Probe::python(
        python,
        &["device"],
        Some(&pin),
        &format!("device {} check", device.id),
    );
    let answer = match runner.run(probe).await.and_then(|run| run.answer()) {
        Ok(answer) => answer,
        Err(reason) => return CheckLine::fail(what, reason),
    };
    if let Some(error) = answer["error"].as_str() {
        return CheckLine::fail(
            what,
            format!(
                "torch failed to query it: {error}; check the driver with nvidia-smi or amd-smi"
            ),
        );
    }
    let count = answer["count"].as_u64().unwrap_or(0);
    if count != 1 {
        return CheckLine::fail(
            what,
            format!(
                "torch sees {count} devices, where the pin leaves exactly one ({}); check that \
                 the driver and torch's {} runtime work for this user",
                device.name,
                build_name(vendor)
            ),
        );
    }
    let name = text(&answer["name"]);
    let torch_uuid = text(&answer["uuid"]);
    let expected = device.uuid();
    let same = expected.is_some_and(|uuid| same_uuid(uuid, &torch_uuid));
    let comparable = matches!(device.kind, DeviceKind::Nvidia { .. });
    if comparable && !same {
        return CheckLine::fail(
            what,
            format!(
                "torch's device has UUID {torch_uuid} ({name}), nvidia-smi's {} has {}; the pin \
                 selects another GPU than the one kactors listed",
                device.name,
                expected.unwrap_or("none")
            ),
        );
    }
    CheckLine::ok(format!(
        "{what}: {name} ({})",
        expected.unwrap_or(&torch_uuid)
    ))
}

/// `GPU-5beddb9d-b3cb-...` (nvidia-smi) and `5beddb9d-b3cb-...` (torch) name one GPU: compared
/// by their hexadecimal digits.
fn same_uuid(listed: &str, torch: &str) -> bool {
    let digits = |uuid: &str| -> String {
        let bare = ["GPU-", "MIG-"]
            .iter()
            .find_map(|prefix| uuid.strip_prefix(prefix))
            .unwrap_or(uuid);
        bare.chars()
            .filter(char::is_ascii_hexdigit)
            .map(|c| c.to_ascii_lowercase())
            .collect()
    };
    let listed = digits(listed);
    !listed.is_empty() && listed == digits(torch)
}

fn pin_words(pin: &Pin) -> String {
    let set = pin
        .set
        .iter()
        .map(|(name, value)| format!("{name}={value}"));
    let unset = pin.unset.iter().map(|name| format!("-{name}"));
    set.chain(unset).collect::<Vec<_>>().join(" ")
}

async fn problem_check(
    runner: &ProbeRunner<'_>,
    python: &Path,
    dir: &Path,
    pin: &Pin,
) -> CheckLine {
    let what = format!("{} imports", dir.join("problem.py").display());
    // The child runs in the scratch folder: a relative kernel directory would name another.
    let dir_arg = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    let dir_arg = dir_arg.to_string_lossy();
    let probe = Probe::python(
        python,
        &["problem", &dir_arg],
        Some(pin),
        "problem.py check",
    );
    let answer = match runner.run(probe).await.and_then(|run| run.answer()) {
        Ok(answer) => answer,
        Err(reason) => return CheckLine::fail(what, reason),
    };
    if let Some(error) = answer["error"].as_str() {
        return CheckLine::fail(
            what,
            format!(
                "importing it failed with `{error}`; fix problem.py, or install what it imports \
                 into {}",
                python.display()
            ),
        );
    }
    let missing: Vec<&str> = answer["missing"]
        .as_array()
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if missing.is_empty() {
        CheckLine::ok(format!(
            "{what}: Model, get_inputs and get_init_inputs are callable"
        ))
    } else {
        CheckLine::fail(
            what,
            format!(
                "after the import, {} {} not callable; define {} at the top level of problem.py",
                missing.join(", "),
                if missing.len() == 1 { "is" } else { "are" },
                if missing.len() == 1 { "it" } else { "them" }
            ),
        )
    }
}

async fn profiler_check(
    runner: &ProbeRunner<'_>,
    settings: &RunSettings,
    selection: &DeviceSelection,
) -> Vec<CheckLine> {
    if !settings.profiler_enabled {
        return vec![CheckLine::ok(
            "profiler: off (the strategy's platform.profiler is noop)",
        )];
    }
    let parent_path = std::env::var_os("PATH");
    match selection.vendor {
        SelectedVendor::Nvidia => {
            let found = crate::nvidia::resolve_ncu_bin(
                settings.ncu_bin_path.as_deref(),
                parent_path.as_deref(),
                is_executable_file,
            );
            match found {
                Ok(ncu) => vec![ncu_check(runner, &ncu).await],
                Err(error) => vec![CheckLine::profiler_fail("profiler ncu", error.to_string())],
            }
        }
        SelectedVendor::Rocm => {
            let found = crate::rocm::resolve_rocprof_bin(
                settings.rocprof_bin_path.as_deref(),
                parent_path.as_deref(),
                &settings.python,
                is_executable_file,
            );
            match found {
                Ok(rocprof) => rocprof_check(runner, &rocprof, selection).await,
                Err(error) => vec![CheckLine::profiler_fail(
                    "profiler rocprofv3",
                    error.to_string(),
                )],
            }
        }
        SelectedVendor::Noop => Vec::new(),
    }
}

/// ncu runs (`--version`), and the driver lets this user read the GPU's counters.
async fn ncu_check(runner: &ProbeRunner<'_>, ncu: &Path) -> CheckLine {
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

/// rocprofv3 runs (`--help`, `--version`: the options kactors uses and its warnings), and lists
/// the counters kactors' passes need on the first device, under that device's pin.
async fn rocprof_check(
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

fn text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => "unknown".to_string(),
        other => other.to_string(),
    }
}

/// One question to a child process.
struct Probe {
    label: String,
    program: PathBuf,
    args: Vec<OsString>,
    set: BTreeMap<String, String>,
    unset: Vec<String>,
    timeout: Duration,
}

impl Probe {
    /// The check script in `mode` (with its arguments), under `pin` when it asks about a device.
    fn python(python: &Path, mode: &[&str], pin: Option<&Pin>, label: &str) -> Probe {
        let mut args: Vec<OsString> = vec!["-c".into(), CHECK_SCRIPT.into()];
        args.extend(mode.iter().map(OsString::from));
        let mut probe = Probe::tool(python, &[], pin, label);
        probe.args = args;
        probe
            .set
            .insert("PYTHONDONTWRITEBYTECODE".to_string(), "1".to_string());
        probe.timeout = PYTHON_TIMEOUT;
        probe
    }

    fn tool(program: &Path, args: &[&str], pin: Option<&Pin>, label: &str) -> Probe {
        Probe {
            label: label.to_string(),
            program: program.to_path_buf(),
            args: args.iter().map(OsString::from).collect(),
            set: pin.map(|pin| pin.set.clone()).unwrap_or_default(),
            unset: pin.map(|pin| pin.unset.clone()).unwrap_or_default(),
            timeout: PROFILER_TIMEOUT,
        }
    }
}

/// How a probe ended: its exit code (`None` after a signal) and its stdout and stderr together.
struct ProbeRun {
    label: String,
    exit: Option<i32>,
    output: String,
}

impl ProbeRun {
    /// The output of a run that exited 0.
    fn succeeded(self, command: &str) -> Result<String, String> {
        match self.exit {
            Some(0) => Ok(self.output),
            Some(code) => Err(format!(
                "`{command}` exited with status {code}{}",
                tail_of(&self.output)
            )),
            None => Err(format!(
                "`{command}` was ended by a signal{}",
                tail_of(&self.output)
            )),
        }
    }

    /// The check script's answer: its last `KACTORS_CHECK` line.
    fn answer(self) -> Result<Value, String> {
        let line = self
            .output
            .lines()
            .rev()
            .find_map(|line| line.strip_prefix(ANSWER_PREFIX));
        match line {
            Some(json) => serde_json::from_str(json)
                .map_err(|error| format!("{} answered with malformed JSON: {error}", self.label)),
            None => Err(format!(
                "the {} ended ({}) without an answer{}",
                self.label,
                match self.exit {
                    Some(code) => format!("exit status {code}"),
                    None => "by a signal".to_string(),
                },
                tail_of(&self.output)
            )),
        }
    }
}

/// `; its output ends: a | b | c`, from the last non-empty lines; empty without output.
fn tail_of(output: &str) -> String {
    const LINES: usize = 4;
    let lines: Vec<&str> = output
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect();
    if lines.is_empty() {
        return String::new();
    }
    format!(
        "; its output ends: {}",
        lines[lines.len().saturating_sub(LINES)..].join(" | ")
    )
}

/// Runs probes as children, each in a folder of its own in the scratch folder.
struct ProbeRunner<'a> {
    scratch: &'a Path,
    parent_env: Vec<(OsString, OsString)>,
    /// Between SIGTERM and SIGKILL to a probe past its deadline.
    grace: Duration,
    next: Cell<u32>,
}

impl ProbeRunner<'_> {
    async fn run(&self, probe: Probe) -> Result<ProbeRun, String> {
        let number = self.next.get();
        self.next.set(number + 1);
        let dir = self.scratch.join(format!("{number:02}"));
        std::fs::create_dir(&dir)
            .map_err(|error| format!("error creating {}: {error}", dir.display()))?;
        let spec = crate::process::ChildSpec {
            program: probe.program.clone(),
            args: probe.args,
            cwd: dir.clone(),
            env: child_environment(self.parent_env.iter().cloned(), &probe.set, &probe.unset),
            log_path: dir.join("output.log"),
            protocol: false,
            label: probe.label.clone(),
        };
        let mut child = spawn(&spec).map_err(|error| error_chain(&error))?;
        let exit = match tokio::time::timeout(probe.timeout, child.wait()).await {
            Ok(status) => status
                .map_err(|error| format!("error waiting for the {}: {error}", probe.label))?
                .code(),
            Err(_deadline) => {
                let _ = terminate_with_grace(&mut child, self.grace).await;
                return Err(format!(
                    "the {} ({}) did not finish within {:.1} s and was stopped",
                    probe.label,
                    probe.program.display(),
                    probe.timeout.as_secs_f64()
                ));
            }
        };
        // Dropping the child ends whatever of its group is left.
        drop(child);
        let output = tokio::fs::read(&spec.log_path)
            .await
            .map_err(|error| format!("error reading {}: {error}", spec.log_path.display()))?;
        Ok(ProbeRun {
            label: probe.label,
            exit,
            output: String::from_utf8_lossy(&output).into_owned(),
        })
    }
}

/// A folder of the checks' own under the system's temporary folder, removed when dropped.
struct Scratch {
    path: PathBuf,
}

impl Scratch {
    fn create() -> std::io::Result<Scratch> {
        let base = std::env::temp_dir();
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.subsec_nanos());
        for attempt in 0..100u32 {
            let path = base.join(format!(
                "kactors-check-{}-{stamp}-{attempt}",
                std::process::id()
            ));
            match std::fs::create_dir(&path) {
                Ok(()) => return Ok(Scratch { path }),
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(error) => return Err(error),
            }
        }
        Err(std::io::Error::other(format!(
            "100 folders named kactors-check-{}-{stamp}-* exist in {}",
            std::process::id(),
            base.display()
        )))
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_reads_ok_or_fail_with_its_fix() {
        let ok = CheckLine::ok("triton 3.6.0 imports");
        assert_eq!(ok.to_string(), "ok triton 3.6.0 imports");
        assert!(ok.passed() && !ok.stops_a_run());
        let fail = CheckLine::fail("torch imports", "install torch");
        assert_eq!(fail.to_string(), "FAIL torch imports: install torch");
        assert!(!fail.passed() && fail.stops_a_run());
        let profiler = CheckLine::profiler_fail("profiler ncu", "install Nsight Compute");
        assert!(!profiler.passed());
        assert!(!profiler.stops_a_run(), "a run goes on without profiles");
        let report = CheckReport {
            lines: vec![ok, fail.clone(), profiler],
        };
        assert!(!report.passed());
        assert_eq!(report.failures().count(), 2);
        assert_eq!(
            report.to_json()["checks"][1],
            serde_json::json!({"ok": false, "what": "torch imports", "fix": "install torch"})
        );
        assert_eq!(report.to_json()["ok"], false);
    }

    #[test]
    fn nvidia_smi_and_torch_uuids_are_compared_by_their_digits() {
        let listed = "GPU-5beddb9d-b3cb-7e53-54c9-13c55d854a1f";
        assert!(same_uuid(listed, "5beddb9d-b3cb-7e53-54c9-13c55d854a1f"));
        assert!(same_uuid(listed, "5BEDDB9D-B3CB-7E53-54C9-13C55D854A1F"));
        assert!(!same_uuid(listed, "5beddb9d-b3cb-7e53-54c9-13c55d854a1e"));
        assert!(!same_uuid(listed, ""));
        assert!(!same_uuid("GPU-", ""), "nothing to compare is no match");
    }

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

    #[test]
    fn a_device_that_lists_too_few_counters_names_them() {
        let all: BTreeSet<String> = [
            "SQ_WAVES",
            "SQ_INSTS_VALU",
            "SQ_INSTS_SALU",
            "SQ_INSTS_VMEM_RD",
            "SQ_INSTS_VMEM_WR",
            "SQ_INSTS_LDS",
            "SQ_WAIT_INST_ANY",
            "TCC_HIT_sum",
            "TCC_MISS_sum",
            "TCC_EA_RDREQ_sum",
            "TCC_EA_WRREQ_sum",
            "FETCH_SIZE",
            "WRITE_SIZE",
        ]
        .into_iter()
        .map(str::to_string)
        .collect();
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

    #[test]
    fn a_check_script_answers_on_its_last_marked_line() {
        let run = |exit, output: &str| ProbeRun {
            label: "device 0 check".to_string(),
            exit,
            output: output.to_string(),
        };
        let answer = run(
            Some(0),
            "a warning from torch\nKACTORS_CHECK {\"count\": 2}\nKACTORS_CHECK {\"count\": 1}\n",
        )
        .answer()
        .unwrap();
        assert_eq!(answer["count"], 1);
        let error = run(Some(1), "Traceback\n  File x\nSyntaxError: bad\n")
            .answer()
            .unwrap_err();
        assert_eq!(
            error,
            "the device 0 check ended (exit status 1) without an answer; its output ends: \
             Traceback | File x | SyntaxError: bad"
        );
        let malformed = run(Some(0), "KACTORS_CHECK {\n").answer().unwrap_err();
        assert!(malformed.starts_with("device 0 check answered with malformed JSON"));
        assert_eq!(
            run(Some(0), "Version 1\n")
                .succeeded("ncu --version")
                .unwrap(),
            "Version 1\n"
        );
        assert_eq!(
            run(Some(2), "").succeeded("ncu --version").unwrap_err(),
            "`ncu --version` exited with status 2"
        );
        assert_eq!(
            run(None, "killed\n").succeeded("rocprofv3 -L").unwrap_err(),
            "`rocprofv3 -L` was ended by a signal; its output ends: killed"
        );
    }

    fn is_running(pid: i32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| {
                let after_name = &stat[stat.rfind(')')? + 1..];
                after_name.split_whitespace().next().map(str::to_string)
            })
            .is_some_and(|state| !matches!(state.as_str(), "Z" | "X" | "x"))
    }

    #[test]
    fn a_probe_past_its_deadline_is_stopped_with_what_it_started() {
        let scratch = Scratch::create().unwrap();
        let pids = scratch.path().join("pids");
        let runner = ProbeRunner {
            scratch: scratch.path(),
            parent_env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            grace: Duration::from_millis(200),
            next: Cell::new(0),
        };
        let script = format!(
            "sleep 600 & echo $$ > {0}.tmp; echo $! >> {0}.tmp; mv {0}.tmp {0}; wait",
            pids.display()
        );
        let mut probe = Probe::tool(Path::new("/bin/sh"), &["-c", &script], None, "hung tool");
        probe.timeout = Duration::from_millis(500);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let error = match runtime.block_on(runner.run(probe)) {
            Ok(_) => panic!("a hung probe cannot finish"),
            Err(error) => error,
        };
        assert_eq!(
            error,
            "the hung tool (/bin/sh) did not finish within 0.5 s and was stopped"
        );
        let pids: Vec<i32> = std::fs::read_to_string(&pids)
            .unwrap()
            .lines()
            .map(|line| line.parse().unwrap())
            .collect();
        assert_eq!(pids.len(), 2, "the shell and its sleep");
        for pid in pids {
            assert!(!is_running(pid), "process {pid} survived");
        }
    }

    #[test]
    fn the_scratch_folder_goes_when_dropped() {
        let scratch = Scratch::create().unwrap();
        let path = scratch.path().to_path_buf();
        std::fs::write(path.join("output.log"), "x").unwrap();
        drop(scratch);
        assert!(!path.exists());
    }

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
            vendor: SelectedVendor::Noop,
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
