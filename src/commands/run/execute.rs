//! Starting the actor system on a run directory and waiting for the Supervisor's verdict: the
//! part `kactors run` and `kactors resume` share. `Launch` is everything resolved before the
//! run directory is touched (settings, kernel, devices, preflight); `execute` is the rest.

use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use actix::Actor;
use actors::journal::{Event, History, StartupStepName};
use actors::manager::ManagerSettings;
use actors::ports::LlmProvider;
use actors::search_state::{Generation, Resume, SearchConfig, SeedsKept};
use actors::supervisor::{RunIo, RunPlan, Supervisor, WorkPorts};
use tokio::sync::oneshot;

use crate::check::CheckReport;
use crate::config::{LlmChoice, RunSettings};
use crate::console;
use crate::dot_env::DotEnv;
use crate::exit;
use crate::kernel_dir::KernelDir;
use crate::llm::{self, LlmKeys};
use crate::progress::{ProgressView, SystemClock, TerminalFacts};
use crate::prompts::{PromptFacts, Prompts};
use crate::replay::ReplayProvider;
use crate::run_dir::RunDirectory;
use crate::signals::{ProcessGroupSignaller, forward_signals};
use crate::vendor::{Platform, Vendor};

use super::super::CommandError;
use super::super::settings::load_strategy;
use super::invocation::Invocation;
use crate::agent::head::placement::AgentInputs;
use crate::placement::Placement;

/// Restarts allowed per device's worker, and per node's agent under Slurm: enough to survive
/// the odd crash, few enough that a device that keeps killing its worker, or a node that keeps
/// losing its agent, does not spin for hours.
const RESTART_BUDGET: u32 = 3;

/// A run resolved and checked, its run directory not yet touched: whatever can refuse it
/// (exit 2, no run directory left) has been done.
pub(crate) struct Launch {
    pub invocation: Invocation,
    pub settings: RunSettings,
    pub kernel: KernelDir,
    pub placement: Placement,
    pub preflight: CheckReport,
    /// When the command began resolving the run: the start-up's first moment.
    pub began: SystemTime,
    /// What earlier processes already spent of max_time: a resumed run's, or the runs of
    /// `--strategy all` before this one.
    pub time_spent: Duration,
    /// Made before the devices: a Slurm run's agents talk to the head over pipes that belong
    /// to the runtime the actors will run on.
    system: actix::SystemRunner,
    llm: Rc<dyn LlmProvider>,
    max_inflight: usize,
    prompts: Rc<Prompts>,
}

impl Launch {
    /// Resolves an invocation: its strategy with the command line's overrides, the kernel
    /// directory, the devices (their locks taken; under Slurm, the node agents started in
    /// `run_parent`, the folder the run directory is or will be in), the preflight, whose
    /// failures refuse the run, the LLM provider (going on from a resumed run's `history`) and
    /// the prompts.
    pub fn prepare(
        invocation: Invocation,
        run_parent: &Path,
        history: Option<&History>,
    ) -> Result<Launch, CommandError> {
        let spent = Spent {
            replayed: history.map_or(&[][..], |h| &h.code_requests),
            usd: history.map_or(0.0, |h| h.spent_usd),
            time: history.map_or(Duration::ZERO, |h| h.time_spent),
        };
        Launch::prepare_after(invocation, run_parent, &spent)
    }

    /// Resolves an invocation as `prepare` does, for a run that counts what others `spent`
    /// before it against its limits.
    pub fn prepare_after(
        invocation: Invocation,
        run_parent: &Path,
        spent: &Spent,
    ) -> Result<Launch, CommandError> {
        let began = SystemTime::now();
        let settings = load_strategy(
            &invocation.config_dir(),
            &invocation.strategy,
            &invocation.overrides,
        )?
        .settings;
        for warning in &settings.warnings {
            console::err(format_args!("kactors: warning: {warning}"));
        }
        let mut kernel = KernelDir::open(&invocation.kernel_dir, settings.max_source_bytes)?;
        // --generate: the run starts from problem.py alone, as if input.py were not there.
        if invocation.overrides.generate {
            kernel.initial = None;
        }
        kernel.refuse_run_dir_inside(run_parent)?;
        let system = actix::System::new();
        let inputs = AgentInputs {
            strategy: &invocation.strategy,
            config_dir: invocation.config_dir.as_deref(),
            python: invocation.overrides.python.as_deref(),
        };
        let (placement, preflight) = Placement::start(
            &settings,
            invocation.gpus.clone(),
            &kernel.root,
            run_parent,
            &inputs,
            &system,
        )?;
        let llm_and_prompts = settings
            .check_max_time(placement.platform())
            .map_err(CommandError::from)
            .and_then(|()| llm_provider(&settings, &kernel, spent))
            .and_then(|llm| Ok((llm, Rc::new(prompts(&settings, &kernel, &placement)?))));
        let ((llm, max_inflight), prompts) = match llm_and_prompts {
            Ok(made) => made,
            Err(error) => {
                placement.abandon(&system);
                return Err(error);
            }
        };
        Ok(Launch {
            invocation,
            settings,
            kernel,
            placement,
            preflight,
            began,
            time_spent: spent.time,
            system,
            llm,
            max_inflight,
            prompts,
        })
    }

    /// The GPUs as they are now, for run.yaml's provenance.
    pub fn gpu_state(&self) -> crate::devices::GpuState {
        self.placement.gpu_state(&self.settings)
    }

    /// A launch refused before it ran (a resume that finds the run changed): the node agents
    /// are told to end.
    pub fn abandon(self, error: CommandError) -> CommandError {
        self.placement.abandon(&self.system);
        error
    }
}

/// What earlier processes spent that a run counts against its limits: a resumed run's own, or
/// the runs of `--strategy all` before it.
pub(crate) struct Spent<'a> {
    /// The requests for code the replay provider already answered (a resumed run's): it goes
    /// on with the files after theirs.
    pub replayed: &'a [String],
    /// Dollars an HTTP provider's budget_usd already counts.
    pub usd: f64,
    /// Time max_time already counts.
    pub time: Duration,
}

/// The most requests for code steady search may keep in flight when max_inflight is not set:
/// an upper bound, since it asks for what Little's law says the devices need. A replay provider
/// costs nothing; a paid API's rate limits (requests_per_minute) bound it further.
const STEADY_MAX_INFLIGHT_REPLAY: usize = 256;
const STEADY_MAX_INFLIGHT_HTTP: usize = 64;

/// The LLM provider and how many requests it may have in flight.
/// It goes on from what was `spent` before: the replay provider hands out its files after the
/// ones a resumed run's requests had, an HTTP provider's budget counts the dollars already
/// spent.
fn llm_provider(
    settings: &RunSettings,
    kernel: &KernelDir,
    spent: &Spent,
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
            let replay = ReplayProvider::from_dir(&dir, Duration::from_secs_f64(*latency_s))?
                .reading_at_most(settings.max_source_bytes)
                .continuing_after(spent.replayed);
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
            let dot_env = DotEnv::load(Path::new("."))
                .map_err(|error| CommandError::Environment(error.to_string()))?;
            let max_inflight = |resolved: u32| match keys.max_inflight {
                None if settings.search.pacing == "steady" => STEADY_MAX_INFLIGHT_HTTP,
                _ => resolved as usize,
            };
            if settings.models.is_empty() {
                let (llm, inflight) = http_llm(
                    provider.as_deref(),
                    model,
                    keys,
                    settings.high_reasoning_effort,
                    &dot_env,
                    spent.usd,
                )?;
                return Ok((Rc::new(llm), max_inflight(inflight)));
            }
            ensemble_llm(settings, provider.as_deref(), keys, &dot_env, spent.usd)
                .map(|(llm, inflight)| (llm, max_inflight(inflight)))
        }
    }
}

/// The providers of a run of several models, each resolved as `model` is (its entry's provider
/// and base_url where it names them, the file's otherwise). budget_usd, and what a resumed
/// run's earlier processes spent, are shared out by weight like the proposals, so that no
/// model's spending can take the others' share and together they stay within the budget.
fn ensemble_llm(
    settings: &RunSettings,
    provider: Option<&str>,
    keys: &LlmKeys,
    dot_env: &DotEnv,
    spent_usd: f64,
) -> Result<(Rc<dyn LlmProvider>, u32), CommandError> {
    let total: u32 = settings.models.iter().map(|entry| entry.weight).sum();
    let mut members = Vec::with_capacity(settings.models.len());
    let mut max_inflight = 0;
    for (index, entry) in settings.models.iter().enumerate() {
        let share = f64::from(entry.weight) / f64::from(total.max(1));
        let keys = LlmKeys {
            base_url: entry.base_url.clone().or_else(|| keys.base_url.clone()),
            budget_usd: keys.budget_usd.map(|usd| usd * share),
            ..keys.clone()
        };
        let (llm, inflight) = http_llm(
            entry.provider.as_deref().or(provider),
            &Some(entry.name.clone()),
            &keys,
            settings.high_reasoning_effort,
            dot_env,
            spent_usd * share,
        )
        .map_err(|source| CommandError::Model {
            index,
            model: entry.name.clone(),
            source: Box::new(source),
        })?;
        max_inflight = max_inflight.max(inflight);
        members.push(llm::Member {
            model: entry.name.clone(),
            provider: Rc::new(llm),
        });
    }
    Ok((Rc::new(llm::EnsembleLlm::new(members)), max_inflight))
}

/// One model's HTTP provider, its warnings printed, and its max_inflight; it counts
/// `spent_usd` against its budget.
fn http_llm(
    provider: Option<&str>,
    model: &Option<String>,
    keys: &LlmKeys,
    high_reasoning_effort: bool,
    dot_env: &DotEnv,
    spent_usd: f64,
) -> Result<(llm::HttpLlm, u32), CommandError> {
    let raw = remote_llm_config(provider, model, keys, high_reasoning_effort)?;
    let resolved = llm::resolve(&raw, &|name| dot_env.get(name)).map_err(|error| match error {
        // The environment and .env were both looked in: the message names both.
        llm::LlmConfigError::MissingApiKey { provider, env_var } => {
            CommandError::Environment(format!(
                "{env_var} is not set: the {provider} provider takes its API key from \
                 the environment or from {} (a line {env_var}=…), and neither has it",
                dot_env.path().display()
            ))
        }
        other => other.into(),
    })?;
    for warning in &resolved.warnings {
        console::err(format_args!("kactors: warning: {warning}"));
    }
    let max_inflight = resolved.max_inflight;
    let http = llm::HttpProvider::new(resolved).map_err(|error| {
        CommandError::Environment(format!("failed to set up the llm provider: {error}"))
    })?;
    let llm =
        llm::HttpLlm::new(http, llm::RetryPolicy::default()).counting_earlier_spend(spent_usd);
    Ok((llm, max_inflight))
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

/// The prompts, with what they say of the platform, the GPU and the problem.
fn prompts(
    settings: &RunSettings,
    kernel: &KernelDir,
    placement: &Placement,
) -> Result<Prompts, CommandError> {
    let problem_path = kernel.root.join("problem.py");
    let problem_source = crate::user_file::read_text(&problem_path, settings.max_source_bytes)
        .map_err(|error| CommandError::Environment(error.to_string()))?;
    let facts = PromptFacts {
        platform: placement.platform(),
        gpu: placement.first_spec(),
        dtype: "bfloat16",
        tolerance: "atol=rtol=1e-2 (bfloat16)",
        problem_source: &problem_source,
    };
    Ok(Prompts::new(&settings.templates, &facts)?)
}

/// The user's files staged beside the best kernel at the end of a run: problem.py and test.py,
/// as they are when the run starts (the kernel directory is never written to).
fn final_files(kernel_dir: &Path) -> Vec<(String, String)> {
    ["problem.py", "test.py"]
        .into_iter()
        .filter_map(|name| {
            crate::kernel_dir::read_kernel_file(&kernel_dir.join(name))
                .ok()
                .and_then(|bytes| String::from_utf8(bytes).ok())
                .map(|text| (name.to_string(), text))
        })
        .collect()
}

/// Runs the search in `run_dir` (new, or reopened by a resume that says how to go on) and
/// answers the process's exit code.
pub(crate) fn execute(
    launch: Launch,
    run_dir: RunDirectory,
    json: bool,
    resume: Option<Resume>,
) -> Result<i32, CommandError> {
    let Launch {
        settings,
        kernel,
        placement,
        time_spent,
        system,
        llm,
        max_inflight,
        prompts,
        preflight,
        began,
        ..
    } = launch;
    let run_root = run_dir.root().to_path_buf();
    crate::process::mark_children_of_run(&run_root);
    let view = ProgressView::for_terminal(&TerminalFacts::of_process());
    super::logging::log_to(&run_root, view.log_writer());
    console::err(format_args!(
        "kactors: run directory {}",
        run_root.display()
    ));
    let selected_platform = placement.platform();
    let simulated = selected_platform == Platform::Noop;
    let time_limit = settings.time_limit(selected_platform, time_spent);
    let described = placement.describe();
    let device_count = placement.device_count();
    // The GPUs of a run on one node stay locked until it returns.
    let (platform, _locks) = placement.prepare(&run_root, &settings, &kernel.root, &system)?;
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
        initial_source: kernel
            .initial
            .as_ref()
            .map_or_else(String::new, |initial| initial.text().to_string()),
        sandbox: (!simulated).then(|| sandbox_record(&settings, &preflight)),
    };
    let manager = ManagerSettings {
        search: SearchConfig {
            search,
            pacing: settings.pacing(max_inflight),
            // The devices the platform pinned: each worker's evaluator is made for its pin.
            devices: platform.devices(),
            profile_parents: settings.profiler_enabled && !simulated,
            time_references: !simulated,
            stop_at_roofline: settings.stop_at_roofline,
            max_refinements: settings.max_refinements,
            requests_per_minute: match &settings.llm {
                LlmChoice::Remote { keys, .. } => keys.requests_per_minute,
                LlmChoice::Replay { .. } => None,
            },
            reflexions_in_flight: actors::search_state::reflexions_in_flight_for(device_count),
            generation: kernel.initial.is_none().then_some(Generation {
                num_seeds: settings.num_seeds,
                kept: if settings.all_seeds {
                    SeedsKept::All
                } else {
                    SeedsKept::First
                },
            }),
            ensemble: settings.ensemble(),
            overlap_rounds: settings.overlaps_rounds(),
        },
        step_deadline: settings.test_timeout(selected_platform.vendor()),
        final_files: final_files(&kernel.root),
        time_limit: time_limit.clone(),
        evaluations_fill_the_disk: !scratch_is_bounded(&preflight),
    };
    // A resumed run's start-up is not the run's: only a new run journals its own.
    let startup = if resume.is_none() {
        startup_steps(began, &preflight)
    } else {
        Vec::new()
    };
    let plan = RunPlan {
        started,
        startup,
        resume,
        manager,
        max_inflight,
        kill_grace: Duration::from_secs_f64(settings.kill_grace_s),
        restart_budget: RESTART_BUDGET,
        stop_evaluator_during_profile: settings
            .stop_evaluator_for_profile
            .unwrap_or(selected_platform == Platform::Vendor(Vendor::Rocm)),
        resume_command: crate::run_dir::resume_command(&run_root),
    };
    let deadline = time_limit
        .as_ref()
        .map(|limit| std::time::SystemTime::now() + limit.remaining);
    let io = RunIo {
        store: Box::new(run_dir),
        progress: view.sink(
            json,
            deadline,
            search.total_candidates(),
            &settings.strategy,
        ),
        clock: Arc::new(SystemClock),
        signaller: Box::new(ProcessGroupSignaller),
    };
    let ports = Box::new(move |watchdog| {
        let (evaluators, profiler) = platform.work_ports(watchdog, RESTART_BUDGET);
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
    });
    view.close();
    let result = result?;
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
    let resume = if result.outcome == actors::journal::RunOutcome::Interrupted {
        format!("; to go on: {}", crate::run_dir::resume_command(&run_root))
    } else {
        String::new()
    };
    console::err(format_args!(
        "kactors: {} ({}){report}{resume}",
        outcome_word(&result.outcome),
        result.reason,
    ));
    Ok(exit::of_outcome(result.outcome))
}

/// Whether every evaluator writes only in a bounded scratch of its own: the sandbox's limits
/// are there on this machine (on each node, under Slurm).
/// The `startup_step` records of what ran before the actors: the launch until now, and the
/// preflight within it.
fn startup_steps(began: SystemTime, preflight: &CheckReport) -> Vec<Event> {
    let mut steps = vec![Event::StartupStep {
        step: StartupStepName::Launch,
        started: began,
        ended: SystemTime::now(),
    }];
    if let Some((started, ended)) = preflight.ran {
        steps.push(Event::StartupStep {
            step: StartupStepName::Preflight,
            started,
            ended,
        });
    }
    steps
}

fn scratch_is_bounded(preflight: &CheckReport) -> bool {
    let mut limits = preflight
        .lines()
        .iter()
        .filter(|line| line.what().contains("sandbox limits:"))
        .peekable();
    limits.peek().is_some() && limits.all(|line| line.passed())
}

/// The sandbox as the preflight found it, for the journal and the report: the setting and the
/// sandbox's check lines (a node agent's named by its node).
fn sandbox_record(
    settings: &RunSettings,
    preflight: &CheckReport,
) -> actors::journal::SandboxRecord {
    actors::journal::SandboxRecord {
        setting: settings.sandbox.name().to_string(),
        protections: preflight
            .lines()
            .iter()
            .map(|line| line.what())
            .filter(|what| what.contains("sandbox"))
            .map(str::to_string)
            .collect(),
    }
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
    use crate::config::{CliOverrides, StrategyFile, StrategySource, parse_config, resolve};

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

    /// Issue 22: `--model` is looked up in data/models.yaml as the `model` key is (an alias
    /// sent under the API's name, the provider it implies), also over the dry run's
    /// `provider: replay`; `--provider` still decides where both are given.
    #[test]
    fn the_model_on_the_command_line_resolves_through_the_model_table() {
        let resolved = |text: &str, model: &str, provider: Option<&str>| {
            let file = StrategyFile {
                name: "t".into(),
                source: StrategySource::File("/cfg/t.yaml".into()),
                text: text.into(),
            };
            let cli = CliOverrides {
                model: Some(model.into()),
                provider: provider.map(str::to_string),
                ..CliOverrides::default()
            };
            let settings = resolve(&file, &parse_config("t.yaml", text).unwrap(), &cli).unwrap();
            let LlmChoice::Remote {
                provider,
                model,
                keys,
            } = settings.llm
            else {
                panic!("--model asks an llm: {:?}", settings.llm);
            };
            let raw = remote_llm_config(provider.as_deref(), &model, &keys, false).unwrap();
            let api_key = |name: &str| name.ends_with("_API_KEY").then(|| "sk-test".to_string());
            llm::resolve(&raw, &api_key).unwrap()
        };
        let opus = resolved(
            "provider: replay
model: gpt-5
",
            "claude-opus-4.5",
            None,
        );
        assert_eq!(
            (opus.provider, opus.model.as_str()),
            (llm::Provider::Anthropic, "claude-opus-4-5")
        );
        let gpt = resolved("", "gpt-5", Some("openai"));
        assert_eq!(
            (gpt.provider, gpt.model.as_str()),
            (llm::Provider::OpenAi, "gpt-5")
        );
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
