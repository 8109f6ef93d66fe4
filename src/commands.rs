//! The commands: dispatch to each one's entry point (one file each under `commands/`), and the
//! one place where errors become messages and exit codes, as JSON too with `--json`.
//!
//! The top layer: a command may use every module of the crate, and no module imports from here.
//! `settings.rs` is how every command reads its strategy.

mod agent;
mod bench;
mod check;
mod completions;
mod devices;
mod profile;
mod report;
mod resume;
mod run;
mod settings;
mod strategies;

use crate::cli::{Cli, Command};
use crate::config::ConfigError;
use crate::console;
use crate::exit;
use crate::kernel_dir::KernelDirError;
use crate::prompts::PromptError;
use crate::replay::ReplayError;
use crate::run_dir::RunDirError;

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
    #[error(transparent)]
    Report(#[from] report::ReportError),
    #[error(transparent)]
    Placement(#[from] crate::placement::PlacementError),
    #[error("{0}")]
    Environment(String),
    /// One model of `strategy_config.models` cannot be asked: the entry is named.
    #[error("strategy_config.models[{index}] ({model}): {source}")]
    Model {
        index: usize,
        model: String,
        source: Box<CommandError>,
    },
    /// A command line that cannot be carried out as asked (`kactors profile` on noop).
    #[error("{0}")]
    Usage(String),
}

/// Runs a command and returns the process's exit code.
pub fn execute(cli: Cli) -> i32 {
    let json = cli.command.json();
    let result = match cli.command {
        Command::Run(args) => run::run(args),
        Command::Resume(args) => resume::resume(args),
        Command::Strategies(args) => strategies::strategies(args).map(|()| exit::SUCCESS),
        Command::Devices(args) => devices::devices(args).map(|()| exit::SUCCESS),
        Command::Profile(args) => profile::profile(args),
        Command::Check(args) => Ok(check::check(args)),
        Command::Report(args) => report::report(args),
        Command::Bench(args) => bench::bench(args),
        Command::Agent(args) => Ok(agent::agent(args)),
        Command::Completions(args) => {
            completions::completions(args);
            Ok(exit::SUCCESS)
        }
        Command::SandboxExec(args) => Ok(crate::sandbox::sandbox_exec(
            &args.policy(),
            &args.command,
            args.probe,
        )),
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
