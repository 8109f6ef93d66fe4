//! `kactors run`: resolve the configuration, the kernel directory and the devices, make the run
//! directory, then start the actor system and wait for the Supervisor's verdict.

use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use actix::Actor;
use actors::journal::{DeviceDescription, Event};
use actors::manager::ManagerSettings;
use actors::model::DeviceId;
use actors::ports::{LlmProvider, ProgressSink};
use actors::supervisor::{RunIo, RunPlan, Supervisor, WorkPorts};
use tokio::sync::oneshot;

use crate::cli::RunArgs;
use crate::config::{CliOverrides, LlmChoice, RunSettings};
use crate::console;
use crate::devices::DeviceKind;
use crate::exit;
use crate::gpus::RunDevices;
use crate::kernel_dir::KernelDir;
use crate::llm::{self, LlmKeys};
use crate::progress::{JsonProgress, PlainProgress, SystemClock};
use crate::prompts::{PromptFacts, Prompts};
use crate::replay::ReplayProvider;
use crate::run_dir::RunDirectory;
use crate::signals::{ProcessGroupSignaller, forward_signals};
use crate::vendor::{Platform, Vendor};

use super::CommandError;
use super::launch::{AgentInputs, Launch};
use super::settings::load_strategy;

/// Restarts allowed per device: enough to survive the odd crash, few enough that a device that
/// keeps killing its worker does not spin for hours.
const RESTART_BUDGET: u32 = 3;

/// The journal's description of each device a run on one node uses.
pub(super) fn describe(devices: &RunDevices) -> Vec<DeviceDescription> {
    devices
        .selection
        .devices
        .iter()
        .map(|device| DeviceDescription {
            device: DeviceId(device.id),
            name: match device.kind {
                DeviceKind::Noop => format!("noop simulated device {}", device.id),
                _ => device.name.clone(),
            },
            uuid: device.uuid().map(str::to_string),
            node: None,
            index: None,
            step: None,
        })
        .collect()
}

/// The most requests for code steady search may keep in flight when max_inflight is not set:
/// an upper bound, since it asks for what Little's law says the devices need. A replay provider
/// costs nothing; a paid API's rate limits (requests_per_minute) bound it further.
const STEADY_MAX_INFLIGHT_REPLAY: usize = 256;
const STEADY_MAX_INFLIGHT_HTTP: usize = 64;

/// The LLM provider and how many requests it may have in flight.
fn llm_provider(
    settings: &RunSettings,
    kernel: &KernelDir,
) -> Result<(Rc<dyn LlmProvider>, usize), CommandError> {
    let all_at_once = settings.search().candidates_per_round() as usize;
    match &settings.llm {
        LlmChoice::Replay {
            dir,
            latency_s,
            max_inflight,
        } => {
            let dir = dir
                .clone()
                .unwrap_or_else(|| kernel.root.join("candidates"));
            let replay = ReplayProvider::from_dir(&dir, Duration::from_secs_f64(*latency_s))?;
            if let Some(warning) = replay.warning() {
                console::err(format_args!("kactors: warning: {warning}"));
            }
            let default = if settings.search.pacing == "steady" {
                STEADY_MAX_INFLIGHT_REPLAY
            } else {
                all_at_once
            };
            Ok((
                Rc::new(replay),
                max_inflight.map_or(default, |cap| cap as usize),
            ))
        }
        LlmChoice::Remote {
            provider,
            model,
            keys,
        } => {
            let raw = remote_llm_config(
                provider.as_deref(),
                model,
                keys,
                settings.high_reasoning_effort,
            )?;
            let resolved = llm::resolve(&raw, &|name| std::env::var(name).ok())?;
            for warning in &resolved.warnings {
                console::err(format_args!("kactors: warning: {warning}"));
            }
            let max_inflight = match keys.max_inflight {
                None if settings.search.pacing == "steady" => STEADY_MAX_INFLIGHT_HTTP,
                _ => resolved.max_inflight as usize,
            };
            let http = llm::HttpProvider::new(resolved).map_err(|error| {
                CommandError::Environment(format!("failed to set up the llm provider: {error}"))
            })?;
            Ok((
                Rc::new(llm::HttpLlm::new(http, llm::RetryPolicy::default())),
                max_inflight,
            ))
        }
    }
}

/// The llm module's configuration of an HTTP provider: the provider and model as the strategy
/// (or `--provider`) chose them, and the strategy's LLM keys as the configuration read them.
fn remote_llm_config(
    provider: Option<&str>,
    model: &Option<String>,
    keys: &LlmKeys,
    high_reasoning_effort: bool,
) -> Result<llm::RawLlmConfig, CommandError> {
    let provider = provider
        .map(|name| {
            serde_json::from_value::<llm::Provider>(serde_json::Value::String(name.to_string())).map_err(|_| {
                CommandError::Environment(format!(
                    "unknown llm provider `{name}`: expected anthropic, openai, openai_compatible or replay"
                ))
            })
        })
        .transpose()?;
    Ok(llm::RawLlmConfig {
        model: model.clone(),
        provider,
        high_reasoning_effort,
        keys: keys.clone(),
    })
}

/// run.yaml: the resolved configuration, and what the machine was when the run started (the
/// preflight's lines, with Python, torch, triton and the profiler's versions; the GPUs' clocks,
/// power and the other processes on them).
fn run_yaml(
    settings: &RunSettings,
    preflight: &crate::check::CheckReport,
    gpus: &crate::devices::GpuState,
) -> String {
    let mut document = serde_yaml::to_value(settings).expect("run settings serialise to YAML");
    let checks: Vec<String> = preflight.lines().iter().map(ToString::to_string).collect();
    let provenance = serde_yaml::to_value(serde_json::json!({ "preflight": checks, "gpus": gpus }))
        .expect("the provenance serialises to YAML");
    if let serde_yaml::Value::Mapping(mapping) = &mut document {
        mapping.insert("provenance".into(), provenance);
    }
    serde_yaml::to_string(&document).expect("run.yaml serialises")
}

/// The user's files staged beside the best kernel at the end of a run: problem.py and test.py,
/// as they are when the run starts (the kernel directory is never written to).
fn final_files(kernel_dir: &Path) -> Vec<(String, String)> {
    ["problem.py", "test.py"]
        .into_iter()
        .filter_map(|name| {
            std::fs::read_to_string(kernel_dir.join(name))
                .ok()
                .map(|text| (name.to_string(), text))
        })
        .collect()
}

fn init_logging(run_root: &Path) {
    use tracing_subscriber::prelude::*;
    use tracing_subscriber::{EnvFilter, filter::LevelFilter, fmt};
    let Ok(log) = std::fs::File::create(run_root.join("kactors.log")) else {
        return;
    };
    // A log line that cannot be written (a full disk, a closed stderr) is dropped: tracing's
    // own report of the failure would go to stderr and panic there.
    let to_file = fmt::layer()
        .log_internal_errors(false)
        .with_ansi(false)
        .with_writer(Arc::new(log))
        .with_filter(LevelFilter::INFO);
    let to_stderr = fmt::layer()
        .log_internal_errors(false)
        .with_writer(std::io::stderr)
        .with_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")));
    let _ = tracing_subscriber::registry()
        .with(to_file)
        .with(to_stderr)
        .try_init();
}

pub(super) fn run(args: RunArgs) -> Result<i32, CommandError> {
    let overrides = CliOverrides {
        workers: args.workers,
        max_rounds: args.max_rounds,
        provider: args.provider.clone(),
        python: args.python.clone(),
    };
    let settings = load_strategy(&args.config_dir, &args.strategy, &overrides)?.settings;
    for warning in &settings.warnings {
        console::err(format_args!("kactors: warning: {warning}"));
    }
    let kernel = KernelDir::open(&args.kernel_dir, settings.max_source_bytes)?;
    // Made first: a Slurm run's agents talk to the head over pipes that belong to its runtime.
    let system = actix::System::new();
    let inputs = AgentInputs {
        strategy: &args.strategy,
        config_dir: args.config_dir.config_dir.as_deref(),
        python: args.python.as_deref(),
    };
    let (launch, preflight) = Launch::start(
        &settings,
        args.gpus.clone(),
        &kernel.root,
        &args.run_dir,
        &inputs,
        &system,
    )?;
    let selected_platform = launch.platform();
    let simulated = selected_platform == Platform::Noop;
    let (llm, max_inflight) = llm_provider(&settings, &kernel)?;
    let problem_path = kernel.root.join("problem.py");
    let problem_source = std::fs::read_to_string(&problem_path).map_err(|error| {
        CommandError::Environment(format!(
            "failed to read {}: {error}",
            problem_path.display()
        ))
    })?;
    let facts = PromptFacts {
        platform: selected_platform,
        gpu: launch.first_spec(),
        dtype: "bfloat16",
        tolerance: "atol=rtol=1e-2 (bfloat16)",
        problem_source: &problem_source,
    };
    let prompts = Rc::new(Prompts::new(&settings.templates, &facts)?);

    let run_dir = RunDirectory::create(
        &args.run_dir,
        &settings.strategy,
        SystemTime::now(),
        &run_yaml(&settings, &preflight, &launch.gpu_state(&settings)),
    )?;
    let run_root = run_dir.root().to_path_buf();
    init_logging(&run_root);
    console::err(format_args!(
        "kactors: run directory {}",
        run_root.display()
    ));
    let described = launch.describe();
    let device_count = launch.device_count();
    // The GPUs of a run on one node stay locked until it returns.
    let (platform, _locks) = launch.prepare(&run_root, &settings, &kernel.root, &system)?;
    let agents = platform.agents();

    let search = settings.search();
    let started = Event::RunStarted {
        strategy: settings.strategy.clone(),
        platform: selected_platform.to_string(),
        simulated,
        search: search.kind.name().into(),
        num_top_kernels: search.num_top_kernels,
        num_bottlenecks: search.num_bottlenecks,
        max_rounds: search.max_rounds,
        devices: described,
        initial_source: kernel.initial.text().to_string(),
    };
    let plan = RunPlan {
        started,
        manager: ManagerSettings {
            search,
            pacing: settings.pacing(max_inflight),
            // The devices the platform pinned: each worker's evaluator is made for its pin.
            devices: platform.devices(),
            step_deadline: settings.test_timeout(selected_platform.vendor()),
            profile_parents: settings.profiler_enabled && !simulated,
            time_references: !simulated,
            stop_at_roofline: settings.stop_at_roofline,
            final_files: final_files(&kernel.root),
            max_refinements: settings.max_refinements,
            requests_per_minute: match &settings.llm {
                LlmChoice::Remote { keys, .. } => keys.requests_per_minute,
                LlmChoice::Replay { .. } => None,
            },
            reflexions_in_flight: actors::manager::reflexions_in_flight_for(device_count),
        },
        max_inflight,
        kill_grace: Duration::from_secs_f64(settings.kill_grace_s),
        restart_budget: RESTART_BUDGET,
        stop_evaluator_during_profile: settings
            .stop_evaluator_for_profile
            .unwrap_or(selected_platform == Platform::Vendor(Vendor::Rocm)),
    };
    let progress: Box<dyn ProgressSink> = if args.json {
        Box::new(JsonProgress::new())
    } else {
        Box::new(PlainProgress::new())
    };
    let io = RunIo {
        store: Box::new(run_dir),
        progress,
        clock: Arc::new(SystemClock),
        signaller: Box::new(ProcessGroupSignaller),
    };
    let ports = Box::new(move |watchdog| {
        let (evaluators, profiler) = platform.work_ports(watchdog);
        WorkPorts {
            evaluators,
            profiler,
            llm,
            prompts,
        }
    });

    let result = system.block_on(async move {
        let (sender, receiver) = oneshot::channel();
        let supervisor = Supervisor::new(io, ports, plan, sender).start();
        forward_signals(supervisor).map_err(|error| {
            CommandError::Environment(format!(
                "failed to install the SIGINT/SIGTERM/SIGHUP handlers: {error}"
            ))
        })?;
        let result = receiver.await;
        // The agents end their evaluators and exit; their steps end with them.
        if let Some(agents) = agents {
            agents.close().await;
        }
        Ok::<_, CommandError>(result)
    })?;
    // From here on the run has started: whatever goes wrong is exit 1, never 2.
    let Ok(result) = result else {
        console::err("kactors: error: the supervisor stopped without a verdict");
        return Ok(exit::RUN_FAILED);
    };
    if let Some(error) = result
        .record_error
        .as_ref()
        .filter(|error| **error != result.reason)
    {
        console::err(format_args!("kactors: error: {error}"));
    }
    let report = run_root.join("report.md");
    let report = if report.is_file() {
        format!("; report: {}", report.display())
    } else {
        String::new()
    };
    console::err(format_args!(
        "kactors: {} ({}){report}",
        outcome_word(&result.outcome),
        result.reason,
    ));
    Ok(exit::of_outcome(result.outcome))
}

fn outcome_word(outcome: &actors::journal::RunOutcome) -> &'static str {
    match outcome {
        actors::journal::RunOutcome::Completed => "run completed",
        actors::journal::RunOutcome::Failed => "run failed",
        actors::journal::RunOutcome::Interrupted => "run interrupted",
        actors::journal::RunOutcome::Refused => "run refused",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{StrategyFile, StrategySource, parse_config, resolve};

    fn remote(text: &str) -> (Option<String>, Option<String>, LlmKeys, bool) {
        let file = StrategyFile {
            name: "remote".into(),
            source: StrategySource::File("/cfg/remote.yaml".into()),
            text: text.into(),
        };
        let config = parse_config("remote.yaml", text).unwrap();
        let settings = resolve(&file, &config, &CliOverrides::default()).unwrap();
        match settings.llm {
            LlmChoice::Remote {
                provider,
                model,
                keys,
            } => (provider, model, keys, settings.high_reasoning_effort),
            other => panic!("not a remote provider: {other:?}"),
        }
    }

    #[test]
    fn the_strategys_llm_keys_reach_the_llm_settings_as_written() {
        let (provider, model, keys, high_reasoning_effort) = remote(
            "model: gpt-5\nprovider: openai\nhigh_reasoning_effort: true\n\
             base_url: http://relay.example/v1\nmax_tokens: 4096\ntemperature: 0.5\n\
             max_inflight: 3\nrequests_per_minute: 50\ntokens_per_minute: 90000\n\
             budget_usd: 12.5\nrequest_timeout_s: 120\ncontext_window: 200000\nprices:\n  \
             gpt-5:\n    input_usd_per_mtok: 1.25\n    output_usd_per_mtok: 10\n",
        );
        let raw =
            remote_llm_config(provider.as_deref(), &model, &keys, high_reasoning_effort).unwrap();
        let api_key = |name: &str| (name == "OPENAI_API_KEY").then(|| "sk-test".to_string());
        let settings = llm::resolve(&raw, &api_key).unwrap();
        assert_eq!(settings.provider, llm::Provider::OpenAi);
        assert_eq!(settings.model, "gpt-5");
        assert!(settings.high_reasoning_effort);
        assert_eq!(
            settings.base_url.as_deref(),
            Some("http://relay.example/v1")
        );
        assert_eq!(settings.max_tokens, 4096);
        assert_eq!(settings.temperature, Some(0.5));
        assert_eq!(settings.max_inflight, 3);
        assert_eq!(settings.requests_per_minute, Some(50));
        assert_eq!(settings.tokens_per_minute, Some(90_000));
        assert_eq!(settings.budget_usd, Some(12.5));
        assert_eq!(settings.request_timeout, Duration::from_secs(120));
        let price = settings.capability.price.unwrap();
        assert_eq!(price.source, "configuration (prices.gpt-5)");
        assert_eq!(
            (price.input_usd_per_mtok, price.output_usd_per_mtok),
            (1.25, 10.0)
        );
    }

    #[test]
    fn an_unknown_provider_is_refused_by_name() {
        let (provider, model, keys, _) = remote("model: gpt-5\nprovider: azure\n");
        let error = remote_llm_config(provider.as_deref(), &model, &keys, false)
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "unknown llm provider `azure`: expected anthropic, openai, openai_compatible or replay"
        );
    }
}
