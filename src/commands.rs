//! Each command's entry point, and the one place where errors become messages and exit codes.

use crate::cli::{Cli, Command, StrategiesArgs};
use crate::config::{CliOverrides, ConfigError, Platform, Strategies, parse_config, resolve};
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
    #[error("{0}")]
    Environment(String),
}

/// Runs a command and returns the process's exit code.
pub fn execute(cli: Cli) -> i32 {
    let result = match cli.command {
        Command::Run(args) => crate::run::run(args),
        Command::Strategies(args) => strategies(args).map(|()| exit::SUCCESS),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("kactors: error: {error}");
            exit::USAGE
        }
    }
}

fn platform_name(platform: Platform) -> &'static str {
    match platform {
        Platform::Noop => "noop",
        Platform::Nvidia => "nvidia",
        Platform::Rocm => "rocm",
        Platform::Detect => "detected",
    }
}

fn strategies(args: StrategiesArgs) -> Result<(), CommandError> {
    let mut rows = Vec::new();
    for file in Strategies::new(args.config_dir.config_dir).all()? {
        let config = parse_config(&file.display_name(), &file.text)?;
        let settings = resolve(&file, &config, &CliOverrides::default())?;
        let search = settings.search;
        rows.push(serde_json::json!({
            "name": file.name,
            "platform": platform_name(settings.platform),
            "search": format!("{} {}×{}", search.strategy, search.num_top_kernels, search.num_bottlenecks),
            "file": file.display_name(),
        }));
    }
    if args.json {
        println!("{}", serde_json::json!({ "strategies": rows }));
    } else {
        for row in &rows {
            println!(
                "{:<14} {:<9} {:<20} {}",
                row["name"].as_str().unwrap_or_default(),
                row["platform"].as_str().unwrap_or_default(),
                row["search"].as_str().unwrap_or_default(),
                row["file"].as_str().unwrap_or_default()
            );
        }
    }
    Ok(())
}
