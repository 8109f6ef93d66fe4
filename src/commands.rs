//! Each command's entry point, and the one place where errors become messages and exit codes.

use crate::cli::{Cli, Command, DevicesArgs, StrategiesArgs};
use crate::config::{CliOverrides, ConfigError, Platform, Strategies, parse_config, resolve};
use crate::console;
use crate::exit;
use crate::kernel_dir::KernelDirError;
use crate::prompts::PromptError;
use crate::replay::ReplayError;
use crate::run_dir::RunDirError;

mod profile;
mod run;

/// Everything a user can get wrong before a run starts: all exit 2.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    KernelDir(#[from] KernelDirError),
    #[error(transparent)]
    RunDir(#[from] RunDirError),
    #[error(transparent)]
    Replay(#[from] ReplayError),
    #[error(transparent)]
    Prompt(#[from] PromptError),
    #[error(transparent)]
    Llm(#[from] crate::llm::LlmConfigError),
    #[error(transparent)]
    Devices(#[from] crate::gpus::RunDevicesError),
    #[error(transparent)]
    DeviceSelection(#[from] crate::devices::DeviceError),
    #[error("{0}")]
    Environment(String),
    /// A command line that cannot be carried out as asked (`kactors profile` on noop).
    #[error("{0}")]
    Usage(String),
}

/// Runs a command and returns the process's exit code.
pub fn execute(cli: Cli) -> i32 {
    let json = cli.command.json();
    let result = match cli.command {
        Command::Run(args) => run::run(args),
        Command::Strategies(args) => strategies(args).map(|()| exit::SUCCESS),
        Command::Devices(args) => devices(args).map(|()| exit::SUCCESS),
        Command::Profile(args) => profile::profile(args),
        Command::Check(args) => Ok(crate::check::check(args)),
    };
    match result {
        Ok(code) => code,
        Err(error) => refuse(&error.to_string(), exit::USAGE, json),
    }
}

/// A command line that clap rejects: its message and exit code, as JSON too with `--json`.
/// Help and version requests are printed as clap prints them.
pub fn refuse_command_line(error: clap::Error) -> i32 {
    if !error.use_stderr() {
        let _ = error.print();
        return error.exit_code();
    }
    let json = std::env::args_os().any(|arg| arg == "--json");
    let rendered = error.render().to_string();
    let message = rendered
        .lines()
        .next()
        .unwrap_or_default()
        .trim_start_matches("error: ");
    let _ = error.print();
    if json {
        print_error_json(message, error.exit_code());
    }
    error.exit_code()
}

/// An error before the run started: on stderr, and with `--json` also as one JSON object on
/// stdout, so that a program reading stdout learns why nothing came.
fn refuse(message: &str, exit_code: i32, json: bool) -> i32 {
    console::err(format_args!("kactors: error: {message}"));
    if json {
        print_error_json(message, exit_code);
    }
    exit_code
}

fn print_error_json(message: &str, exit_code: i32) {
    console::out(serde_json::json!({
        "type": "error",
        "exit_code": exit_code,
        "message": message,
    }));
}

pub(crate) fn platform_name(platform: Platform) -> &'static str {
    match platform {
        Platform::Noop => "noop",
        Platform::Nvidia => "nvidia",
        Platform::Rocm => "rocm",
        Platform::Detect => "detected",
    }
}

/// `kactors strategies`: every strategy that loads. A file of the config dir that is not one
/// (KernelAgent keeps a technique taxonomy beside its configurations) is skipped and named with
/// the reason, on stderr, or under `skipped` with `--json`.
fn strategies(args: StrategiesArgs) -> Result<(), CommandError> {
    let mut rows = Vec::new();
    let mut skipped = Vec::new();
    for file in Strategies::new(args.config_dir.config_dir).all()? {
        let settings = parse_config(&file.display_name(), &file.text)
            .and_then(|config| resolve(&file, &config, &CliOverrides::default()));
        let settings = match settings {
            Ok(settings) => settings,
            Err(error) => {
                skipped.push(serde_json::json!({
                    "file": file.display_name(),
                    "reason": error.to_string(),
                }));
                continue;
            }
        };
        let search = settings.search;
        rows.push(serde_json::json!({
            "name": file.name,
            "platform": platform_name(settings.platform),
            "search": format!("{} {}×{}", search.strategy, search.num_top_kernels, search.num_bottlenecks),
            "file": file.display_name(),
        }));
    }
    if args.json {
        console::out(serde_json::json!({ "strategies": rows, "skipped": skipped }));
        return Ok(());
    }
    let name_width = rows
        .iter()
        .map(|row| row["name"].as_str().unwrap_or_default().chars().count())
        .max()
        .unwrap_or(0);
    for row in &rows {
        console::out(format_args!(
            "{:<name_width$} {:<9} {:<20} {}",
            row["name"].as_str().unwrap_or_default(),
            row["platform"].as_str().unwrap_or_default(),
            row["search"].as_str().unwrap_or_default(),
            row["file"].as_str().unwrap_or_default()
        ));
    }
    for file in &skipped {
        console::err(format_args!(
            "kactors: warning: skipped {}",
            file["reason"].as_str().unwrap_or_default()
        ));
    }
    Ok(())
}

/// `kactors devices`: what a run with the strategy would use. Only the selection: no GPU is
/// locked, so it answers while a run holds the GPUs.
fn devices(args: DevicesArgs) -> Result<(), CommandError> {
    let strategies = Strategies::new(args.config_dir.config_dir);
    let (request, python) = match &args.strategy {
        Some(name) => {
            let file = strategies.find(name)?;
            let config = parse_config(&file.display_name(), &file.text)?;
            let settings = resolve(&file, &config, &CliOverrides::default())?;
            (
                crate::gpus::device_request(&settings, args.gpus),
                settings.python,
            )
        }
        None => {
            let request = crate::devices::DeviceRequest {
                platform: crate::devices::PlatformRequest::Detect,
                gpus: args.gpus,
                noop_devices: std::num::NonZeroU32::MIN,
                gpu_name: None,
            };
            (request, std::path::PathBuf::from("python3"))
        }
    };
    let selection = crate::devices::select_devices(
        &request,
        &crate::devices::HostEnvironment::from_process(python),
    )?;
    for warning in &selection.warnings {
        console::err(format_args!("kactors: warning: {warning}"));
    }
    if args.json {
        console::out(
            serde_json::to_string(&selection.report()).expect("the device report serialises"),
        );
        return Ok(());
    }
    console::out(format_args!("vendor: {}", selection.vendor));
    for (device, pin) in selection.devices.iter().zip(selection.pins()) {
        let spec = device.spec.map_or("no spec row".to_string(), |spec| {
            format!("spec {}", spec.name)
        });
        let set: Vec<String> = pin.set.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let unset: Vec<String> = pin.unset.iter().map(|k| format!("-{k}")).collect();
        console::out(format_args!(
            "device {}: {} ({spec}); children get {}",
            device.id,
            device.name,
            [set, unset].concat().join(" ")
        ));
    }
    Ok(())
}
