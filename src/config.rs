//! Strategy configuration: the YAML files, read key by key so that every error names the file
//! and the key at fault, KernelAgent's own files load, and nothing is passed on silently.
//! `schema.rs` holds the keys; `strategies.rs` finds a strategy's file; `resolve.rs` turns a
//! file plus the command line into the settings a run uses.

pub mod ranges;
mod resolve;
mod schema;
mod strategies;

pub use resolve::{
    CliOverrides, DEFAULT_AGENT_TIMEOUT_S, LauncherRequest, LlmChoice, RunSettings, resolve,
};
pub use schema::{
    ConfigError, ConfigFile, PlatformKwargs, PlatformSpec, StrategyConfig, parse_config,
};
pub use strategies::{Strategies, StrategyFile, StrategySource};
