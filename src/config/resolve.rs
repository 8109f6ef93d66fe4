//! From a configuration file and the command line to the settings a run uses: defaults filled,
//! values checked, paths resolved. The rest of the program never sees a raw key.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use actors::search::{Ensemble, FanOut, ModelShare, Pacing, SearchKind, SearchSettings};
use actors::time_limit::TimeLimit;
use serde::Serialize;

use super::ranges::{
    DEFAULT_MAX_SOURCE_BYTES, MAX_CANDIDATES, MAX_CANDIDATES_PER_ROUND, NOOP_WORKERS,
    parse_max_time,
};
use super::schema::{ConfigError, ConfigFile, ModelEntry, PlatformSpec};
use super::strategies::StrategyFile;
use crate::llm::LlmKeys;
use crate::vendor::{Platform, PlatformRequest, Vendor};

/// What the command line overrides. run.yaml keeps it (`invocation`), for `kactors resume`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CliOverrides {
    pub workers: Option<u32>,
    pub max_rounds: Option<u32>,
    /// `--max-time`, as written.
    pub max_time: Option<String>,
    pub max_candidates: Option<u64>,
    pub provider: Option<String>,
    /// `--model`: looked up in data/models.yaml as the `model` key is.
    pub model: Option<String>,
    pub python: Option<PathBuf>,
    /// `--generate`: start with generation even where input.py exists.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub generate: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LlmChoice {
    /// Offline: the files of `dir` (default: the kernel directory's candidates/) in name order.
    Replay {
        dir: Option<PathBuf>,
        latency_s: f64,
        /// Requests in flight at once (max_inflight); default: a round's N × M.
        max_inflight: Option<u32>,
    },
    /// An HTTP provider: named, or inferred from the model by `llm::resolve`.
    Remote {
        provider: Option<String>,
        model: Option<String>,
        keys: LlmKeys,
    },
}

/// Where the devices' processes run (`launcher`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LauncherRequest {
    /// On this machine, as always.
    Local,
    /// On the nodes of the Slurm allocation kactors runs in: one node agent per node, each a
    /// step started with srun.
    Slurm,
    /// Slurm inside an allocation of more than one node, local otherwise.
    Auto,
}

/// How long a node agent may leave a ping unanswered before its step is cancelled, by default.
pub const DEFAULT_AGENT_TIMEOUT_S: f64 = 30.0;

#[derive(Clone, Debug, Serialize)]
pub struct RunSettings {
    pub strategy: String,
    /// How long the run may take, as written (`8h`): `max_time()` is the duration.
    pub max_time: Option<String>,
    pub config_file: String,
    pub platform: PlatformRequest,
    pub profiler_enabled: bool,
    pub search: SearchSettingsRecord,
    /// Requested workers; the run uses min(this, visible devices). `None`: every visible device.
    pub num_workers: Option<u32>,
    pub python: PathBuf,
    pub llm: LlmChoice,
    pub model: Option<String>,
    /// The models sharing the proposals by weight (`strategy_config.models`); empty: `model`
    /// alone. The first takes the parents' analyses.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<ModelEntry>,
    pub high_reasoning_effort: bool,
    pub gpu_name: Option<String>,
    pub benchmark_warmup: u32,
    pub benchmark_repeat: u32,
    pub bottleneck_override: Option<String>,
    /// As configured; `None` takes the platform's default (see `test_timeout`).
    pub test_timeout_s: Option<f64>,
    /// Further attempts at a candidate that failed verification (default 3; 0: none).
    pub max_refinements: u32,
    /// Seed kernels generation asks for (default 4).
    pub num_seeds: u32,
    /// `generation: all_seeds`: every seed ends first and the fastest N make the first beam;
    /// otherwise the first verified seed starts the search.
    pub all_seeds: bool,
    pub templates: BTreeMap<String, PathBuf>,
    pub ncu_bin_path: Option<PathBuf>,
    pub rocprof_bin_path: Option<PathBuf>,
    pub noop_eval_s: f64,
    pub kill_grace_s: f64,
    pub gpu_wait_s: f64,
    /// As configured; `None` takes the platform's default (true on ROCm).
    pub stop_evaluator_for_profile: Option<bool>,
    /// The largest input.py and problem.py accepted, in bytes.
    pub max_source_bytes: u64,
    pub profile_pass_timeout_s: f64,
    pub profile_budget_s: f64,
    /// Early stop at the roofline: off by default on every platform (the ROCm review kept it off
    /// there); recorded in run.yaml either way.
    pub stop_at_roofline: bool,
    /// Rounds mode: the next round's certain parents profiled and analysed before the round
    /// ends (default true; a run with budget_usd never overlaps, whatever this says).
    pub overlap_rounds: bool,
    pub launcher: LauncherRequest,
    /// The sandbox of candidate code: `required` unless the strategy says otherwise.
    pub sandbox: crate::sandbox::SandboxSetting,
    pub agent_timeout_s: f64,
    #[serde(skip)]
    pub warnings: Vec<String>,
}

/// The search as run.yaml records it.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct SearchSettingsRecord {
    pub strategy: &'static str,
    /// `rounds` or `steady` (the `search` key).
    pub pacing: &'static str,
    pub num_top_kernels: u32,
    pub num_bottlenecks: u32,
    /// P: the parents a round expands; `None`: every one of the N.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num_expanding_parents: Option<u32>,
    /// C: proposals drawn from one prompt.
    pub samples_per_prompt: u32,
    pub max_rounds: u32,
    pub max_no_improvement: Option<u32>,
    pub max_candidates: Option<u64>,
}

impl RunSettings {
    pub fn search(&self) -> SearchSettings {
        SearchSettings {
            kind: if self.search.strategy == "greedy" {
                SearchKind::Greedy
            } else {
                SearchKind::Beam
            },
            num_top_kernels: self.search.num_top_kernels,
            num_bottlenecks: self.search.num_bottlenecks,
            max_rounds: self.search.max_rounds,
            max_no_improvement: self.search.max_no_improvement,
            max_candidates: self.search.max_candidates,
            fan_out: FanOut {
                expanding_parents: self.search.num_expanding_parents,
                models: self.models.len().max(1) as u32,
                samples_per_prompt: self.search.samples_per_prompt,
            },
        }
    }

    /// The models sharing the proposals, with their weights; empty for a run of one model.
    pub fn ensemble(&self) -> Ensemble {
        Ensemble::new(
            self.models
                .iter()
                .map(|entry| ModelShare {
                    name: entry.name.clone(),
                    weight: entry.weight,
                })
                .collect(),
        )
    }

    /// Whether rounds overlap: as `overlap_rounds` says, except under a dollar budget, where an
    /// analysis asked ahead spends before the round's last refinements are asked for and could
    /// leave one of them refused that the run without the overlap sends.
    pub fn overlaps_rounds(&self) -> bool {
        self.overlap_rounds
            && match &self.llm {
                LlmChoice::Remote { keys, .. } => keys.budget_usd.is_none(),
                LlmChoice::Replay { .. } => true,
            }
    }

    /// How the Manager paces the search; a steady search keeps `max_inflight` proposals (the
    /// broker's cap) asked for.
    pub fn pacing(&self, max_inflight: usize) -> Pacing {
        match self.search.pacing {
            "steady" => Pacing::Steady { max_inflight },
            _ => Pacing::Rounds,
        }
    }

    /// A verification or timing step's deadline: the configured test_timeout_s, else 30 s on
    /// NVIDIA and 300 s on ROCm (KernelAgent's ROCm review found compiles there need it).
    pub fn test_timeout(&self, vendor: Option<Vendor>) -> Duration {
        let default = match vendor {
            Some(Vendor::Rocm) => 300.0,
            Some(Vendor::Nvidia) | None => 30.0,
        };
        Duration::from_secs_f64(self.test_timeout_s.unwrap_or(default))
    }

    /// How long the run may take (max_time), when it is limited.
    pub fn max_time(&self) -> Option<Duration> {
        self.max_time
            .as_deref()
            .and_then(|text| parse_max_time(text).ok())
    }

    /// max_time as the Manager keeps it, for a run whose earlier processes spent `spent` of it.
    /// Before the limit it keeps free: for an evaluation in flight to end, two steps (verify
    /// and time: 2 × test_timeout on a GPU, 2 × noop_eval_s + 1 s on noop); for the finale,
    /// three (timing the beam, the profile, the user's test: 3 × test_timeout, or
    /// 4 × noop_eval_s + 1 s); for the shutdown, kill_grace_s + 2 s.
    pub fn time_limit(&self, platform: Platform, spent: Duration) -> Option<TimeLimit> {
        let limit = self.max_time()?;
        let (evaluation_grace, finale_reserve) = match platform {
            Platform::Noop => {
                let step = Duration::from_secs_f64(self.noop_eval_s);
                (
                    2 * step + Duration::from_secs(1),
                    4 * step + Duration::from_secs(1),
                )
            }
            Platform::Vendor(vendor) => {
                let step = self.test_timeout(Some(vendor));
                (2 * step, 3 * step)
            }
        };
        Some(TimeLimit {
            label: self.max_time.clone().unwrap_or_default(),
            remaining: limit.saturating_sub(spent),
            evaluation_grace,
            finale_reserve,
            exit_margin: Duration::from_secs_f64(self.kill_grace_s) + Duration::from_secs(2),
        })
    }

    /// Refuses a max_time shorter than the spans `time_limit` keeps free before it: such a run
    /// would stop proposals, cancel its evaluations and end before the initial kernel is
    /// evaluated. The whole max_time is held to it, so that a run and its resumes agree.
    pub fn check_max_time(&self, platform: Platform) -> Result<(), ConfigError> {
        let Some(limit) = self.time_limit(platform, Duration::ZERO) else {
            return Ok(());
        };
        let reserved = limit.evaluation_grace + limit.finale_reserve + limit.exit_margin;
        if limit.remaining >= reserved {
            return Ok(());
        }
        Err(ConfigError::MaxTimeTooShort {
            max_time: limit.label,
            reserved,
            grace: limit.evaluation_grace,
            finale: limit.finale_reserve,
            shutdown: limit.exit_margin,
            smallest: reserved.as_secs() + u64::from(reserved.subsec_nanos() > 0),
            step_key: match platform {
                Platform::Noop => "noop_eval_s",
                Platform::Vendor(_) => "test_timeout_s",
            },
        })
    }

    pub fn to_yaml(&self) -> String {
        serde_yaml::to_string(self).expect("run settings serialise to YAML")
    }
}

fn platform_of(
    file: &str,
    spec: Option<&PlatformSpec>,
) -> Result<(PlatformRequest, bool), ConfigError> {
    let Some(spec) = spec else {
        return Ok((PlatformRequest::Detect, true));
    };
    match spec {
        PlatformSpec::One(Platform::Noop) => Ok((PlatformRequest::NOOP, false)),
        PlatformSpec::One(platform) => Ok((PlatformRequest::Exactly(*platform), true)),
        PlatformSpec::Components(components) => {
            let mut vendors: Vec<Vendor> = components
                .values()
                .filter_map(|platform| platform.vendor())
                .collect();
            vendors.dedup();
            let profiler_enabled = components.get("profiler") != Some(&Platform::Noop);
            match vendors.as_slice() {
                [] => Ok((PlatformRequest::NOOP, false)),
                [vendor] => Ok(((*vendor).into(), profiler_enabled)),
                _ => Err(ConfigError::InvalidValue {
                    file: file.to_string(),
                    key: "platform".into(),
                    message:
                        "the components name both nvidia and rocm: a run uses one vendor's GPUs"
                            .into(),
                }),
            }
        }
    }
}

pub fn resolve(
    file: &StrategyFile,
    config: &ConfigFile,
    cli: &CliOverrides,
) -> Result<RunSettings, ConfigError> {
    let name = file.display_name();
    let invalid = |key: &str, message: String| ConfigError::InvalidValue {
        file: name.clone(),
        key: key.into(),
        message,
    };
    let (platform, profiler_enabled) = platform_of(&name, config.platform.as_ref())?;
    let greedy = config.strategy.as_deref() == Some("greedy");
    let strategy = &config.strategy_config;
    let num_top_kernels = if greedy {
        if strategy.num_top_kernels.is_some_and(|n| n != 1) {
            return Err(invalid(
                "strategy_config.num_top_kernels",
                "greedy search keeps one parent: use 1 or beam_search".into(),
            ));
        }
        1
    } else {
        strategy.num_top_kernels.unwrap_or(2)
    };
    let num_bottlenecks = strategy.num_bottlenecks.unwrap_or(2);
    if let Some(parents) = strategy
        .num_expanding_parents
        .filter(|p| *p > num_top_kernels)
    {
        return Err(invalid(
            "strategy_config.num_expanding_parents",
            format!(
                "{parents} parents expanded a round, but the beam keeps {num_top_kernels} \
                 (num_top_kernels{}): expand at most {num_top_kernels}, or keep more",
                if greedy { ", 1 for greedy" } else { "" }
            ),
        ));
    }
    // A model on the command line is the run's one model, as the issue's `--model` promises.
    let models = if cli.model.is_some() {
        Vec::new()
    } else {
        strategy.models.clone()
    };
    let samples_per_prompt = strategy.samples_per_prompt.unwrap_or(1);
    let mut factors = vec![
        match strategy.num_expanding_parents {
            Some(parents) => ("num_expanding_parents", parents),
            None => ("num_top_kernels", num_top_kernels),
        },
        ("num_bottlenecks", num_bottlenecks),
    ];
    if !models.is_empty() {
        factors.push(("models", models.len() as u32));
    }
    if strategy.samples_per_prompt.is_some() {
        factors.push(("samples_per_prompt", samples_per_prompt));
    }
    let per_round: u64 = factors.iter().map(|(_, n)| u64::from(*n)).product();
    if per_round > u64::from(MAX_CANDIDATES_PER_ROUND) {
        let names: Vec<&str> = factors.iter().map(|(name, _)| *name).collect();
        let values: Vec<String> = factors.iter().map(|(_, n)| n.to_string()).collect();
        return Err(invalid(
            "strategy_config",
            format!(
                "{} is {} = {per_round} candidates a round; at most {MAX_CANDIDATES_PER_ROUND} \
                 are accepted: lower one of them",
                names.join(" × "),
                values.join(" × ")
            ),
        ));
    }
    let mut warnings = config.warnings.clone();
    if let Some(cli_model) = cli.model.as_deref().filter(|_| !strategy.models.is_empty()) {
        warnings.push(format!(
            "{name}: --model {cli_model} is the run's one model: strategy_config.models is not used"
        ));
    }
    if let (Some(model), Some(first)) = (config.model.as_deref(), models.first())
        && model != first.name
    {
        warnings.push(format!(
            "{name}: model {model} is not used: strategy_config.models asks its models, and the \
             first, {}, analyses the parents",
            first.name
        ));
    }
    if cli.max_rounds == Some(0) {
        return Err(ConfigError::InvalidFlag {
            flag: "--max-rounds",
            message: "expected a whole number of at least 1, found 0".into(),
        });
    }
    let search = SearchSettingsRecord {
        strategy: if greedy { "greedy" } else { "beam_search" },
        pacing: if config.search.as_deref() == Some("steady") {
            "steady"
        } else {
            "rounds"
        },
        num_top_kernels,
        num_bottlenecks,
        num_expanding_parents: strategy.num_expanding_parents,
        samples_per_prompt,
        max_rounds: cli.max_rounds.or(config.max_rounds).unwrap_or(5),
        max_no_improvement: if greedy {
            Some(strategy.max_no_improvement.unwrap_or(3))
        } else {
            strategy.max_no_improvement
        },
        max_candidates: cli.max_candidates.or(config.max_candidates),
    };
    if let Some(text) = &cli.max_time {
        parse_max_time(text).map_err(|message| ConfigError::InvalidFlag {
            flag: "--max-time",
            message,
        })?;
    }
    if let Some(count) = cli.max_candidates.filter(|n| !MAX_CANDIDATES.contains(n)) {
        return Err(ConfigError::InvalidFlag {
            flag: "--max-candidates",
            message: format!(
                "expected a whole number from {} to {}, found {count}",
                MAX_CANDIDATES.start(),
                MAX_CANDIDATES.end()
            ),
        });
    }
    // A model asked for on the command line is an LLM to ask: a file's `provider: replay` (the
    // dry run's) gives way to the provider the model implies, unless `--provider` names one.
    let provider = match (&cli.provider, &cli.model, config.provider.as_deref()) {
        (Some(provider), _, _) => Some(provider.clone()),
        (None, Some(_), Some("replay")) => None,
        (None, _, file) => file.map(str::to_string),
    };
    let llm = match provider.as_deref() {
        Some("replay") => LlmChoice::Replay {
            dir: config.replay_dir.clone(),
            latency_s: config.replay_latency_s.unwrap_or(0.0),
            max_inflight: config.llm.max_inflight,
        },
        other => LlmChoice::Remote {
            provider: other.map(str::to_string),
            model: cli.model.clone().or_else(|| config.model.clone()),
            keys: config.llm.clone(),
        },
    };
    let relative_to = |path: &Path| match file.directory() {
        Some(dir) if path.is_relative() => dir.join(path),
        _ => path.to_path_buf(),
    };
    let num_workers = cli.workers.or(config.num_workers);
    if cli.workers == Some(0) {
        return Err(ConfigError::InvalidFlag {
            flag: "--workers",
            message: "expected a whole number of at least 1, found 0".into(),
        });
    }
    if let Some(workers) =
        num_workers.filter(|n| platform == PlatformRequest::NOOP && !NOOP_WORKERS.contains(n))
    {
        let message = format!(
            "the noop platform simulates {} to {} devices, found {workers}",
            NOOP_WORKERS.start(),
            NOOP_WORKERS.end()
        );
        return Err(match cli.workers {
            Some(_) => ConfigError::InvalidFlag {
                flag: "--workers",
                message,
            },
            None => invalid("num_workers", message),
        });
    }
    Ok(RunSettings {
        strategy: file.name.clone(),
        max_time: cli.max_time.clone().or_else(|| config.max_time.clone()),
        config_file: name.clone(),
        platform,
        profiler_enabled,
        search,
        num_workers,
        python: cli
            .python
            .clone()
            .or_else(|| config.python.clone())
            .unwrap_or_else(|| PathBuf::from("python3")),
        llm,
        model: config.model.clone(),
        models,
        high_reasoning_effort: config.high_reasoning_effort.unwrap_or(false),
        gpu_name: config.gpu_name.clone(),
        benchmark_warmup: config.benchmark_warmup.unwrap_or(25),
        benchmark_repeat: config.benchmark_repeat.unwrap_or(100),
        bottleneck_override: config.bottleneck_override.clone(),
        test_timeout_s: config.test_timeout_s,
        max_refinements: config.max_refinements.unwrap_or(3),
        num_seeds: config.num_seeds.unwrap_or(4),
        all_seeds: config.generation.as_deref() == Some("all_seeds"),
        templates: config
            .templates
            .iter()
            .map(|(k, v)| (k.clone(), relative_to(v)))
            .collect(),
        ncu_bin_path: config.platform_kwargs.ncu_bin_path.clone(),
        rocprof_bin_path: config.platform_kwargs.rocprof_bin_path.clone(),
        noop_eval_s: config.noop_eval_s.unwrap_or(0.05),
        kill_grace_s: config.kill_grace_s.unwrap_or(5.0),
        gpu_wait_s: config.gpu_wait_s.unwrap_or(0.0),
        stop_evaluator_for_profile: config.stop_evaluator_for_profile,
        max_source_bytes: config.max_source_bytes.unwrap_or(DEFAULT_MAX_SOURCE_BYTES),
        // ncu replays each kernel once per metric pass, and rocprofv3 starts Python once per
        // counter group: minutes, not seconds, for a large kernel.
        profile_pass_timeout_s: config.profile_pass_timeout_s.unwrap_or(300.0),
        profile_budget_s: config.profile_budget_s.unwrap_or(900.0),
        stop_at_roofline: config.stop_at_roofline.unwrap_or(false),
        overlap_rounds: config.overlap_rounds.unwrap_or(true),
        launcher: match config.launcher.as_deref() {
            Some("slurm") => LauncherRequest::Slurm,
            Some("auto") => LauncherRequest::Auto,
            _ => LauncherRequest::Local,
        },
        sandbox: config.sandbox.unwrap_or_default(),
        agent_timeout_s: config.agent_timeout_s.unwrap_or(DEFAULT_AGENT_TIMEOUT_S),
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{StrategySource, parse_config};

    fn settings(text: &str, cli: CliOverrides) -> Result<RunSettings, ConfigError> {
        let file = StrategyFile {
            name: "t".into(),
            source: StrategySource::File("/cfg/t.yaml".into()),
            text: text.into(),
        };
        resolve(&file, &parse_config("t.yaml", text)?, &cli)
    }

    #[test]
    fn test_timeout_defaults_by_platform_and_an_explicit_value_wins() {
        let defaults = settings("platform: rocm\n", CliOverrides::default()).unwrap();
        assert_eq!(
            defaults.test_timeout(Some(Vendor::Rocm)),
            Duration::from_secs(300)
        );
        assert_eq!(
            defaults.test_timeout(Some(Vendor::Nvidia)),
            Duration::from_secs(30)
        );
        let explicit = settings("test_timeout_s: 12\n", CliOverrides::default()).unwrap();
        assert_eq!(
            explicit.test_timeout(Some(Vendor::Rocm)),
            Duration::from_secs(12)
        );
    }

    #[test]
    fn max_time_keeps_room_for_the_evaluations_the_finale_and_the_exit() {
        let nvidia = settings(
            "max_time: 1h\ntest_timeout_s: 20\nkill_grace_s: 3\n",
            CliOverrides::default(),
        )
        .unwrap();
        let limit = nvidia
            .time_limit(Platform::Vendor(Vendor::Nvidia), Duration::from_secs(600))
            .unwrap();
        assert_eq!(limit.label, "1h");
        assert_eq!(limit.remaining, Duration::from_secs(3000));
        assert_eq!(limit.evaluation_grace, Duration::from_secs(40));
        assert_eq!(limit.finale_reserve, Duration::from_secs(60));
        assert_eq!(limit.exit_margin, Duration::from_secs(5));
        let spent_it_all = nvidia
            .time_limit(Platform::Vendor(Vendor::Nvidia), Duration::from_secs(7200))
            .unwrap();
        assert_eq!(spent_it_all.remaining, Duration::ZERO);

        let noop = settings("max_time: 30s\nnoop_eval_s: 0.5\n", CliOverrides::default()).unwrap();
        let limit = noop.time_limit(Platform::Noop, Duration::ZERO).unwrap();
        assert_eq!(limit.evaluation_grace, Duration::from_secs(2));
        assert_eq!(limit.finale_reserve, Duration::from_secs(3));
        assert_eq!(limit.exit_margin, Duration::from_secs(7));
        let unlimited = settings("", CliOverrides::default()).unwrap();
        assert_eq!(unlimited.time_limit(Platform::Noop, Duration::ZERO), None);
    }

    #[test]
    fn a_max_time_shorter_than_what_is_kept_free_is_refused_naming_the_smallest_that_works() {
        let short = settings("max_time: 11s\nnoop_eval_s: 0.5\n", CliOverrides::default()).unwrap();
        let refused = short
            .check_max_time(Platform::Noop)
            .unwrap_err()
            .to_string();
        assert_eq!(
            refused,
            "max_time (11s) is shorter than the 12s kactors keeps free before it (2s for the \
             evaluations in flight, 3s for the finale, 7s for the shutdown): not even the initial \
             kernel could be evaluated; give at least --max-time 12s (or lower noop_eval_s or \
             kill_grace_s)"
        );
        let enough =
            settings("max_time: 12s\nnoop_eval_s: 0.5\n", CliOverrides::default()).unwrap();
        assert!(enough.check_max_time(Platform::Noop).is_ok());
        let unlimited = settings("", CliOverrides::default()).unwrap();
        assert!(unlimited.check_max_time(Platform::Noop).is_ok());
    }

    #[test]
    fn the_command_line_overrides_the_file() {
        let cli = CliOverrides {
            workers: Some(2),
            max_rounds: Some(1),
            provider: Some("replay".into()),
            python: Some("/venv/bin/python".into()),
            ..CliOverrides::default()
        };
        let run = settings("num_workers: 8\nmax_rounds: 9\nprovider: openai\n", cli).unwrap();
        assert_eq!(run.num_workers, Some(2));
        assert_eq!(run.search.max_rounds, 1);
        assert_eq!(
            run.llm,
            LlmChoice::Replay {
                dir: None,
                latency_s: 0.0,
                max_inflight: None
            }
        );
        assert_eq!(run.python, PathBuf::from("/venv/bin/python"));
    }

    #[test]
    fn a_component_map_names_the_vendor_and_noop_switches_a_component_off() {
        let run = settings(
            "platform:\n  verifier: nvidia\n  profiler: noop\n",
            CliOverrides::default(),
        )
        .unwrap();
        assert_eq!(run.platform, PlatformRequest::from(Vendor::Nvidia));
        assert!(!run.profiler_enabled);
        let error = settings(
            "platform:\n  verifier: nvidia\n  profiler: rocm\n",
            CliOverrides::default(),
        )
        .unwrap_err();
        assert!(
            error.to_string().contains("name both nvidia and rocm"),
            "{error}"
        );
    }

    #[test]
    fn greedy_keeps_one_parent_and_stops_without_improvement() {
        let run = settings("strategy: greedy\n", CliOverrides::default()).unwrap();
        let search = run.search();
        assert_eq!(
            (
                search.kind,
                search.num_top_kernels,
                search.max_no_improvement
            ),
            (SearchKind::Greedy, 1, Some(3))
        );
    }

    fn error_of(text: &str, cli: CliOverrides) -> String {
        settings(text, cli).unwrap_err().to_string()
    }

    #[test]
    fn candidates_per_round_are_at_most_4096() {
        let square = "strategy_config:\n  num_top_kernels: 64\n  num_bottlenecks: 64\n";
        assert_eq!(
            settings(square, CliOverrides::default())
                .unwrap()
                .search()
                .candidates_per_round(),
            4096
        );
        assert_eq!(
            error_of(
                "strategy_config:\n  num_top_kernels: 4096\n  num_bottlenecks: 4096\n",
                CliOverrides::default()
            ),
            "/cfg/t.yaml: invalid value for `strategy_config`: num_top_kernels × num_bottlenecks \
             is 4096 × 4096 = 16777216 candidates a round; at most 4096 are accepted: lower one \
             of them"
        );
        // The default M (2) counts too.
        assert!(
            error_of(
                "strategy_config:\n  num_top_kernels: 4096\n",
                CliOverrides::default()
            )
            .contains("4096 × 2 = 8192")
        );
    }

    /// Issue 22: KernelAgent's P × M × K × C, and the combinations that contradict each other.
    #[test]
    fn the_ensemble_keys_make_kernelagents_round_and_refuse_contradictions() {
        let text = "strategy_config:\n  num_top_kernels: 10\n  num_expanding_parents: 5\n  num_bottlenecks: 3\n  samples_per_prompt: 2\n  models: [claude-opus-4.6, gpt-5-4, gemini-2-5-pro]\n";
        let run = settings(text, CliOverrides::default()).unwrap();
        assert_eq!(run.search().candidates_per_round(), 90);
        assert_eq!(run.ensemble().len(), 3);
        assert_eq!(
            error_of(
                "strategy_config:\n  num_top_kernels: 2\n  num_expanding_parents: 3\n",
                CliOverrides::default()
            ),
            "/cfg/t.yaml: invalid value for `strategy_config.num_expanding_parents`: 3 parents \
             expanded a round, but the beam keeps 2 (num_top_kernels): expand at most 2, or keep \
             more"
        );
        assert!(
            error_of(
                "strategy: greedy\nstrategy_config:\n  num_expanding_parents: 2\n",
                CliOverrides::default()
            )
            .contains("the beam keeps 1 (num_top_kernels, 1 for greedy)")
        );
        assert_eq!(
            error_of(
                "strategy_config:\n  num_top_kernels: 64\n  num_bottlenecks: 8\n  models: [a, b]\n  samples_per_prompt: 8\n",
                CliOverrides::default()
            ),
            "/cfg/t.yaml: invalid value for `strategy_config`: num_top_kernels × num_bottlenecks \
             × models × samples_per_prompt is 64 × 8 × 2 × 8 = 8192 candidates a round; at most \
             4096 are accepted: lower one of them"
        );
    }

    /// KernelAgent's own ensemble files mean what its comments say: 5 parents × 3 bottlenecks ×
    /// 3 models × 5 samples = 225 workers, and 2 × 3 × 3 × 5 = 90.
    #[test]
    fn kernelagents_ensemble_files_make_the_rounds_their_comments_count() {
        for (name, per_round, parents) in [
            ("beam_search_diverse_clustered_xl.yaml", 225, 5),
            ("beam_search_diverse_clustered.yaml", 90, 2),
        ] {
            let path = format!(
                "{}/tests/fixtures/kernelagent-configs/{name}",
                env!("CARGO_MANIFEST_DIR")
            );
            let text = std::fs::read_to_string(path).unwrap();
            let run = settings(&text, CliOverrides::default()).unwrap();
            let search = run.search();
            assert_eq!(search.candidates_per_round(), per_round, "{name}");
            assert_eq!(search.expanding_parents(), parents, "{name}");
            let models: Vec<&str> = run.models.iter().map(|m| m.name.as_str()).collect();
            assert_eq!(
                models,
                ["claude-opus-4.6", "gpt-5-4", "gemini-2-5-pro"],
                "{name}"
            );
            assert_eq!(run.ensemble().model_at(1), Some("gpt-5-4"));
        }
    }

    #[test]
    fn a_model_on_the_command_line_replaces_the_models_and_a_file_model_beside_them_is_named() {
        let text = "model: x\nstrategy_config:\n  models: [a, b]\n";
        let run = settings(text, CliOverrides::default()).unwrap();
        assert_eq!(run.models.len(), 2);
        assert!(
            run.warnings
                .iter()
                .any(|w| w.contains("model x is not used")),
            "{:?}",
            run.warnings
        );
        let cli = CliOverrides {
            model: Some("c".into()),
            ..CliOverrides::default()
        };
        let run = settings(text, cli).unwrap();
        assert!(run.models.is_empty());
        assert_eq!(run.search().candidates_per_round(), 4);
        assert!(
            run.warnings
                .iter()
                .any(|w| w.contains("--model c is the run's one model"))
        );
    }

    #[test]
    fn the_noop_platform_simulates_at_most_256_devices() {
        let workers = |n| CliOverrides {
            workers: Some(n),
            ..CliOverrides::default()
        };
        assert_eq!(
            error_of("platform: noop\n", workers(4294967295)),
            "invalid value for --workers: the noop platform simulates 1 to 256 devices, found \
             4294967295"
        );
        assert_eq!(
            error_of(
                "platform: noop\nnum_workers: 257\n",
                CliOverrides::default()
            ),
            "/cfg/t.yaml: invalid value for `num_workers`: the noop platform simulates 1 to 256 \
             devices, found 257"
        );
        assert_eq!(
            settings("platform: noop\n", workers(256))
                .unwrap()
                .num_workers,
            Some(256)
        );
        // A GPU platform clamps to the visible devices instead.
        assert_eq!(
            settings("platform: nvidia\n", workers(4294967295))
                .unwrap()
                .num_workers,
            Some(4294967295)
        );
        assert_eq!(
            error_of("", workers(0)),
            "invalid value for --workers: expected a whole number of at least 1, found 0"
        );
    }

    #[test]
    fn max_rounds_0_is_refused_on_the_command_line_as_in_a_file() {
        let cli = CliOverrides {
            max_rounds: Some(0),
            ..CliOverrides::default()
        };
        assert_eq!(
            error_of("", cli),
            "invalid value for --max-rounds: expected a whole number of at least 1, found 0"
        );
        assert_eq!(
            error_of("max_rounds: 0\n", CliOverrides::default()),
            "t.yaml: invalid value for `max_rounds`: expected a whole number of at least 1, found 0"
        );
    }

    #[test]
    fn max_refinements_defaults_to_three() {
        let defaults = settings("", CliOverrides::default()).unwrap();
        assert_eq!(defaults.max_refinements, 3);
        let off = settings("max_refinements: 0\n", CliOverrides::default()).unwrap();
        assert_eq!(off.max_refinements, 0);
    }

    #[test]
    fn templates_are_relative_to_the_configuration_file() {
        let run = settings(
            "templates:\n  optimization: prompts/opt.j2\n",
            CliOverrides::default(),
        )
        .unwrap();
        assert_eq!(
            run.templates["optimization"],
            PathBuf::from("/cfg/prompts/opt.j2")
        );
    }

    #[test]
    fn early_stop_at_the_roofline_is_off_unless_asked_and_run_yaml_shows_it() {
        let rocm = settings("platform: rocm\n", CliOverrides::default()).unwrap();
        assert!(!rocm.stop_at_roofline);
        assert!(rocm.to_yaml().contains("stop_at_roofline: false"));
        let asked = settings(
            "platform: nvidia\nstop_at_roofline: true\n",
            CliOverrides::default(),
        )
        .unwrap();
        assert!(asked.stop_at_roofline);
    }

    #[test]
    fn rounds_overlap_unless_turned_off_or_a_dollar_budget_is_set() {
        let default = settings("", CliOverrides::default()).unwrap();
        assert!(default.overlaps_rounds());
        assert!(default.to_yaml().contains("overlap_rounds: true"));
        let off = settings("overlap_rounds: false\n", CliOverrides::default()).unwrap();
        assert!(!off.overlaps_rounds());
        let budget = settings(
            "model: gpt-5\nprovider: openai\nbudget_usd: 12.5\nprices:\n  gpt-5:\n    \
             input_usd_per_mtok: 1.25\n    output_usd_per_mtok: 10\n",
            CliOverrides::default(),
        )
        .unwrap();
        assert!(budget.overlap_rounds);
        assert!(!budget.overlaps_rounds());
    }

    #[test]
    fn search_is_paced_in_rounds_unless_steady_is_asked_for() {
        let default = settings("", CliOverrides::default()).unwrap();
        assert_eq!(default.pacing(8), Pacing::Rounds);
        assert!(default.to_yaml().contains("pacing: rounds"));
        let steady = settings(
            "search: steady
",
            CliOverrides::default(),
        )
        .unwrap();
        assert_eq!(steady.pacing(8), Pacing::Steady { max_inflight: 8 });
        assert!(steady.to_yaml().contains("pacing: steady"));
    }

    #[test]
    fn run_yaml_records_the_llm_keys_as_written() {
        let run = settings(
            "model: gpt-5\nprovider: openai\nbase_url: http://relay.example/v1\nmax_tokens: 4096\n\
             temperature: 0.5\nmax_inflight: 3\nrequests_per_minute: 50\ntokens_per_minute: \
             90000\nbudget_usd: 12.5\nrequest_timeout_s: 120\ncontext_window: 200000\nprices:\n  \
             gpt-5:\n    input_usd_per_mtok: 1.25\n    output_usd_per_mtok: 10\n",
            CliOverrides::default(),
        )
        .unwrap();
        let yaml = run.to_yaml();
        let llm = &yaml[yaml.find("\nllm:\n").unwrap() + 1..yaml.find("\nmodel:").unwrap() + 1];
        assert_eq!(
            llm,
            "llm:\n  kind: remote\n  provider: openai\n  model: gpt-5\n  keys:\n    \
             base_url: http://relay.example/v1\n    max_tokens: 4096\n    temperature: 0.5\n    \
             max_inflight: 3\n    requests_per_minute: 50\n    tokens_per_minute: 90000\n    \
             budget_usd: 12.5\n    request_timeout_s: 120.0\n    context_window: 200000\n    \
             prices:\n      gpt-5:\n        input_usd_per_mtok: 1.25\n        \
             output_usd_per_mtok: 10.0\n"
        );
    }
}
