//! The command line as typed: clap parses it here, and each command validates it into rich
//! settings before anything runs.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// The version and the commit it was built from ("unknown" without git at build time).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("KACTORS_COMMIT"),
    ")"
);

#[derive(Debug, Parser)]
#[command(
    name = "kactors",
    version = VERSION,
    about = "Optimizes Triton GPU kernels unattended, on every GPU of a node",
    after_help = "Exit codes: 0 the run ended as planned; 1 a run that started could not go on (e.g. the initial \
                  kernel fails verification, the LLM provider refuses the credentials, the disk is full); 2 refused \
                  before the run started (usage, configuration, input or environment); 130 interrupted by SIGINT or \
                  SIGTERM."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Optimize a kernel directory with a strategy
    Run(RunArgs),
    /// Go on with a run that was killed, interrupted or stopped for a full disk, from its journal
    Resume(ResumeArgs),
    /// List the strategies that can be used, each with its platform
    Strategies(StrategiesArgs),
    /// Show the GPUs a run with a strategy would use and the environment each worker's children get
    Devices(DevicesArgs),
    /// Profile one kernel on one GPU with the strategy's profiler and print its roofline verdict
    Profile(ProfileArgs),
    /// Check that a run with the strategy can start: Python, torch, triton, GPUs, profiler, kernel directory
    Check(CheckArgs),
    /// Render report.md and report.html from a run directory's journal: finished, killed or still going
    Report(ReportArgs),
    /// Run a batch of KernelBench-style problems, each a run of its own (generation, then a
    /// bounded search), and report KernelBench's fast_p figures
    Bench(BenchArgs),
    /// Print the completion script of a shell: `kactors completions bash > /etc/bash_completion.d/kactors`
    Completions(CompletionsArgs),
    /// A node agent: started by `kactors run` on each node of a Slurm allocation (launcher slurm)
    #[command(hide = true)]
    Agent(AgentArgs),
    /// Runs a command in the sandbox for candidate code: how kactors starts every child that
    /// runs code an LLM wrote (issue 19)
    #[command(hide = true, name = "sandbox-exec")]
    SandboxExec(SandboxExecArgs),
}

impl Command {
    /// Whether `--json` was given: then stdout carries JSON only, errors included.
    pub fn json(&self) -> bool {
        match self {
            Command::Run(args) => args.json,
            Command::Resume(args) => args.json,
            Command::Strategies(args) => args.json,
            Command::Devices(args) => args.json,
            Command::Profile(args) => args.json,
            Command::Check(args) => args.json,
            Command::Report(args) => args.json,
            Command::Bench(_) => false,
            // The agent's stdout is its channel to the head, JSON by construction.
            Command::Agent(_) | Command::Completions(_) => false,
            // The sandboxed command's streams are its own.
            Command::SandboxExec(_) => false,
        }
    }
}

#[derive(Debug, Args)]
pub struct ConfigDirArg {
    /// A folder of strategy files (NAME.yaml) that add to or override the built-in ones
    #[arg(long, value_name = "DIR", env = "KACTORS_CONFIG_DIR")]
    pub config_dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The strategy: configs/NAME.yaml, built in or in --config-dir; `all`: every strategy that
    /// fits this host, one after another, then a comparison
    #[arg(long, value_name = "NAME")]
    pub strategy: String,
    /// The kernel directory: problem.py (Model, get_inputs, get_init_inputs), input.py (kernel_function; without it the run generates seed kernels), test.py if any
    #[arg(long, value_name = "DIR")]
    pub kernel_dir: PathBuf,
    /// Start with generation (seed kernels written from problem.py) even where input.py exists
    #[arg(long)]
    pub generate: bool,
    /// GPU workers, one per device (configuration key num_workers); at most the devices visible
    #[arg(long, value_name = "N")]
    pub workers: Option<u32>,
    /// Stop after this many rounds (configuration key max_rounds)
    #[arg(long, value_name = "R")]
    pub max_rounds: Option<u32>,
    /// End the run by then, the finale included, e.g. 8h or 1h 30m (configuration key max_time)
    #[arg(long, value_name = "DURATION")]
    pub max_time: Option<String>,
    /// Make at most this many candidates (configuration key max_candidates)
    #[arg(long, value_name = "N")]
    pub max_candidates: Option<u64>,
    /// The parent folder of runs; each run gets <strategy>-<timestamp>/ inside it
    #[arg(long, value_name = "DIR", default_value = "runs")]
    pub run_dir: PathBuf,
    /// The LLM provider (configuration key provider): anthropic, openai, openai_compatible, replay
    #[arg(long, value_name = "NAME")]
    pub provider: Option<String>,
    /// The LLM (configuration key model), as data/models.yaml names it, e.g. claude-opus-4-5;
    /// its provider follows from it unless --provider says
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// The Python interpreter for every Python child (configuration key python; default python3 on PATH)
    #[arg(long, value_name = "PATH")]
    pub python: Option<PathBuf>,
    /// Restrict the chosen devices to these ids (nvidia-smi indices on NVIDIA, HIP ids on AMD), e.g. 0,2
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub gpus: Option<Vec<u32>>,
    #[command(flatten)]
    pub config_dir: ConfigDirArg,
    /// Print JSON Lines on stdout, one event per line, each with a `type` field
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// The run's folder, as `kactors run` made it (runs/<strategy>-<time>)
    #[arg(value_name = "RUN_DIR")]
    pub run_dir: PathBuf,
    /// Go on although the strategy's settings or the kernel directory's files changed since the
    /// run started (the changes are journaled)
    #[arg(long)]
    pub force: bool,
    /// Print JSON Lines on stdout, one event per line, each with a `type` field
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// The strategy every problem's run uses
    #[arg(
        long,
        value_name = "NAME",
        required_unless_present = "resume",
        conflicts_with = "resume"
    )]
    pub strategy: Option<String>,
    /// A folder of problems (KernelBench-style *.py files, and folders holding problem.py), or a
    /// list file naming them one a line
    #[arg(
        long,
        value_name = "DIR|FILE",
        required_unless_present = "resume",
        conflicts_with = "resume"
    )]
    pub problems: Option<PathBuf>,
    /// Go on with the bench in this folder: problems whose run was not over are resumed or started
    #[arg(long, value_name = "BENCH_DIR")]
    pub resume: Option<PathBuf>,
    /// Each problem's run stops after this many rounds (configuration key max_rounds)
    #[arg(long, value_name = "R", conflicts_with = "resume")]
    pub max_rounds: Option<u32>,
    /// Each problem's run ends by then, e.g. 20m (configuration key max_time)
    #[arg(long, value_name = "DURATION", conflicts_with = "resume")]
    pub max_time: Option<String>,
    /// The whole bench's time, e.g. 8h: past it no problem starts and those running are ended
    /// cleanly, recorded as not finished; with --resume, a new budget for the whole bench
    #[arg(long, value_name = "DURATION")]
    pub budget: Option<String>,
    /// Problems run at once, each on its own share of the devices (never sharing one)
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256), conflicts_with = "resume")]
    pub parallel: u32,
    /// The parent folder of the bench's folder, bench-<timestamp>/
    #[arg(
        long,
        value_name = "DIR",
        default_value = "runs",
        conflicts_with = "resume"
    )]
    pub run_dir: PathBuf,
    /// The LLM provider of every run (configuration key provider)
    #[arg(long, value_name = "NAME", conflicts_with = "resume")]
    pub provider: Option<String>,
    /// The LLM of every run (configuration key model)
    #[arg(long, value_name = "NAME", conflicts_with = "resume")]
    pub model: Option<String>,
    /// The Python interpreter for every Python child (configuration key python)
    #[arg(long, value_name = "PATH", conflicts_with = "resume")]
    pub python: Option<PathBuf>,
    /// The devices the bench may use (nvidia-smi indices on NVIDIA, HIP ids on AMD), e.g. 0,2
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        conflicts_with = "resume"
    )]
    pub gpus: Option<Vec<u32>>,
    #[command(flatten)]
    pub config_dir: ConfigDirArg,
}

#[derive(Debug, Args)]
pub struct StrategiesArgs {
    #[command(flatten)]
    pub config_dir: ConfigDirArg,
    /// Print one JSON object
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DevicesArgs {
    /// The strategy whose platform decides; without one, the vendor is detected
    #[arg(long, value_name = "NAME")]
    pub strategy: Option<String>,
    #[command(flatten)]
    pub config_dir: ConfigDirArg,
    /// Restrict the chosen devices to these ids (nvidia-smi indices on NVIDIA, HIP ids on AMD), e.g. 0,2
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub gpus: Option<Vec<u32>>,
    /// Print one JSON object: {"vendor", "devices", "pins"}
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ProfileArgs {
    /// The strategy whose platform and profiler settings (platform_kwargs) are used
    #[arg(long, value_name = "NAME")]
    pub strategy: String,
    /// The kernel directory: problem.py builds the inputs the kernel is profiled on
    #[arg(long, value_name = "DIR")]
    pub kernel_dir: PathBuf,
    /// The kernel to profile (default: the kernel directory's input.py)
    #[arg(long, value_name = "FILE")]
    pub kernel: Option<PathBuf>,
    /// The device to profile on (nvidia-smi index on NVIDIA, HIP id on AMD); default: the first free one
    #[arg(long, value_name = "ID", value_delimiter = ',')]
    pub gpus: Option<Vec<u32>>,
    /// The parent folder of the profile's own folder, profile-<timestamp>/
    #[arg(long, value_name = "DIR", default_value = "runs")]
    pub run_dir: PathBuf,
    /// The Python interpreter that runs the profiled kernel (configuration key python)
    #[arg(long, value_name = "PATH")]
    pub python: Option<PathBuf>,
    /// The most one profiler invocation may take, in seconds (configuration key
    /// profile_pass_timeout_s, default 300)
    #[arg(long, value_name = "SECONDS")]
    pub pass_timeout: Option<f64>,
    /// The most the whole profile may take, every invocation counted, in seconds (configuration
    /// key profile_budget_s, default 900)
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<f64>,
    #[command(flatten)]
    pub config_dir: ConfigDirArg,
    /// Print one JSON object: {"ok", "platform", "device", "kernels", "duration_ms", "counters",
    /// "metrics", "roofline", "instruction_mix", "passes", "error"}
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The strategy whose platform, Python and profiler are checked
    #[arg(long, value_name = "NAME")]
    pub strategy: String,
    /// Also check that this kernel directory is complete and its problem.py imports
    #[arg(long, value_name = "DIR")]
    pub kernel_dir: Option<PathBuf>,
    /// Restrict the checked devices to these ids, as `kactors run --gpus` does, e.g. 0,2
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub gpus: Option<Vec<u32>>,
    /// The Python interpreter to check (configuration key python; default python3 on PATH)
    #[arg(long, value_name = "PATH")]
    pub python: Option<PathBuf>,
    #[command(flatten)]
    pub config_dir: ConfigDirArg,
    /// Print one JSON object: {"ok", "checks": [{"ok", "what", "fix"}]}
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish (also elvish, powershell)
    #[arg(value_enum, value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The run directory (<run-dir>/<strategy>-<timestamp>/, the folder that holds journal.jsonl)
    #[arg(value_name = "RUN_DIR")]
    pub run_dir: PathBuf,
    /// Write the report into this folder (made if missing) instead of the run directory
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print one JSON object: {"type": "report", "finished", "markdown", "html", "records",
    /// "torn_line"}
    #[arg(long)]
    pub json: bool,
}

/// The node agent's command line, as the head writes it: the strategy and the kernel
/// directory the head was given (on the filesystem the allocation shares), and the file whose
/// token shows that the run directory is shared.
#[derive(Debug, Args)]
pub struct AgentArgs {
    #[arg(long, value_name = "NAME")]
    pub strategy: String,
    #[arg(long, value_name = "DIR", required_unless_present = "list")]
    pub kernel_dir: Option<PathBuf>,
    #[arg(long, value_name = "PATH")]
    pub python: Option<PathBuf>,
    #[command(flatten)]
    pub config_dir: ConfigDirArg,
    /// A file in the run directory's folder, written by the head: this node must read `check_token` in it
    #[arg(long, value_name = "PATH", requires = "check_token")]
    pub check_file: Option<PathBuf>,
    #[arg(long, value_name = "TOKEN")]
    pub check_token: Option<String>,
    /// Only say which devices the node has (`kactors devices`): no lock, no check, then exit
    #[arg(long)]
    pub list: bool,
}

#[derive(Debug, Args)]
pub struct SandboxExecArgs {
    /// required: refuse to run the command without every protection
    #[arg(long, value_enum)]
    pub level: crate::sandbox::Level,
    /// The child's own folder, bounded by --scratch-bytes: its Triton cache, /tmp and /dev/shm
    #[arg(long, value_name = "DIR")]
    pub scratch: PathBuf,
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1 << 20..))]
    pub scratch_bytes: u64,
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_tasks: u32,
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_file_bytes: u64,
    /// A folder the command may write in, with everything beneath (repeatable)
    #[arg(long, value_name = "DIR")]
    pub writable: Vec<PathBuf>,
    /// A folder the command may not read (the run directory), but for --readable and
    /// --writable paths inside it
    #[arg(long, value_name = "DIR")]
    pub hide: Option<PathBuf>,
    /// A file or folder inside --hide the command may read (repeatable)
    #[arg(long, value_name = "PATH")]
    pub readable: Vec<PathBuf>,
    /// Set the sandbox up, print what it got as JSON, and run nothing
    #[arg(long)]
    pub probe: bool,
    /// The command and its arguments
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<std::ffi::OsString>,
}

impl SandboxExecArgs {
    pub fn policy(&self) -> crate::sandbox::Policy {
        crate::sandbox::Policy {
            level: self.level,
            limits: crate::sandbox::Limits {
                scratch_bytes: self.scratch_bytes,
                max_tasks: self.max_tasks,
                max_file_bytes: self.max_file_bytes,
            },
            writable: self.writable.clone(),
            scratch: self.scratch.clone(),
            hidden: self.hide.clone(),
            readable: self.readable.clone(),
        }
    }
}
