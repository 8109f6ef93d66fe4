//! kactors: the outside world of the actor runtime in the `actors` crate. The command line,
//! configuration, kernel directories, the run directory, child processes, platforms (noop,
//! NVIDIA, ROCm), LLM providers and prompts live here and implement the runtime's ports.

pub mod agent;
pub mod bench;
pub mod check;
pub mod cli;
pub mod commands;
pub mod config;
pub mod console;
pub mod devices;
pub mod dot_env;
pub mod evaluator;
pub mod exit;
pub mod gpus;
pub mod kernel_dir;
pub mod llm;
pub mod noop;
pub mod nvidia;
pub mod placement;
pub mod platform;
pub mod platform_profiler;
pub mod process;
pub mod profiling;
pub mod progress;
pub mod prompts;
pub mod replay;
pub mod rocm;
pub mod run_dir;
pub mod sandbox;
pub mod signals;
pub mod slurm;
pub mod user_file;
pub mod vendor;
