//! The configuration schema: every key kactors reads, every key KernelAgent knows that kactors
//! does not use (accepted with one warning), and an error naming the nearest valid key for
//! anything else. Parsed by hand from a YAML mapping rather than with serde's
//! `deny_unknown_fields`, whose messages name neither the file nor the nearest key.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::RangeInclusive;
use std::path::PathBuf;

use serde::de::DeserializeOwned;
use serde_yaml::{Mapping, Value};

use crate::llm::LlmKeys;
use crate::vendor::{Platform, Vendor};

use super::ranges::{
    BENCHMARK_REPEAT, BENCHMARK_WARMUP, MAX_CANDIDATES, MAX_DURATION_S, MAX_INFLIGHT,
    MAX_REFINEMENTS, MAX_SOURCE_BYTES, MODEL_WEIGHT, MODELS, NUM_SEEDS, SAMPLES_PER_PROMPT,
    SEARCH_FACTOR, max_duration_words, parse_max_time,
};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(
        "unknown strategy `{name}`: {}expected one of {available} (configs/<name>.yaml, built in or in --config-dir)",
        nearest.as_ref().map(|near| format!("did you mean `{near}`? ")).unwrap_or_default()
    )]
    UnknownStrategy {
        name: String,
        /// The strategy it is a typo of, if it is close enough to one.
        nearest: Option<String>,
        available: String,
    },
    #[error("failed to read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    File(#[from] crate::user_file::UserFileError),
    #[error("{file}: not valid YAML: {message}")]
    Yaml { file: String, message: String },
    #[error("{file}: expected a mapping of keys at the top level")]
    NotAMapping { file: String },
    #[error(
        "{file}: not a strategy configuration but a technique taxonomy (a top-level `techniques` \
         list, which KernelAgent's technique_clustering reads)"
    )]
    TechniqueTaxonomy { file: String },
    #[error("{file}: unknown key `{key}`{suggestion}")]
    UnknownKey {
        file: String,
        key: String,
        suggestion: String,
    },
    #[error("{file}: invalid value for `{key}`: {message}")]
    InvalidValue {
        file: String,
        key: String,
        message: String,
    },
    #[error("invalid value for {flag}: {message}")]
    InvalidFlag { flag: &'static str, message: String },
    #[error(
        "max_time ({max_time}) is shorter than the {} kactors keeps free before it ({} for the \
         evaluations in flight, {} for the finale, {} for the shutdown): not even the initial \
         kernel could be evaluated; give at least --max-time {smallest}s (or lower {step_key} \
         or kill_grace_s)",
        humantime::format_duration(*reserved),
        humantime::format_duration(*grace),
        humantime::format_duration(*finale),
        humantime::format_duration(*shutdown)
    )]
    MaxTimeTooShort {
        max_time: String,
        reserved: std::time::Duration,
        grace: std::time::Duration,
        finale: std::time::Duration,
        shutdown: std::time::Duration,
        smallest: u64,
        step_key: &'static str,
    },
}

/// `platform:` as written: one platform for every component, or a map from component to
/// platform.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlatformSpec {
    One(Platform),
    Components(BTreeMap<String, Platform>),
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct StrategyConfig {
    pub num_top_kernels: Option<u32>,
    pub num_bottlenecks: Option<u32>,
    pub max_no_improvement: Option<u32>,
    /// P: how many of the beam's N parents a round expands (KernelAgent's key).
    pub num_expanding_parents: Option<u32>,
    /// C: proposals drawn from one prompt (KernelAgent's key).
    pub samples_per_prompt: Option<u32>,
    /// K models sharing the proposals by weight (KernelAgent's list of names, or kactors'
    /// entries with a weight); empty: the run's one `model`.
    pub models: Vec<ModelEntry>,
}

/// One entry of `strategy_config.models`: a name (KernelAgent writes only that), or a mapping
/// with a weight and, for a model of another provider than the file's, its provider and URL.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ModelEntry {
    pub name: String,
    pub weight: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
}

/// The keys of a `models` entry written as a mapping.
pub const MODEL_ENTRY_KEYS: &[&str] = &["name", "weight", "provider", "base_url"];

#[derive(Clone, Debug, Default, PartialEq)]
pub struct PlatformKwargs {
    pub ncu_bin_path: Option<PathBuf>,
    pub rocprof_bin_path: Option<PathBuf>,
}

/// One configuration file, validated key by key; every field is optional because the command
/// line and the defaults fill the rest.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ConfigFile {
    pub strategy: Option<String>,
    /// How the search is paced: `rounds` (the default) or `steady`.
    pub search: Option<String>,
    pub num_workers: Option<u32>,
    pub strategy_config: StrategyConfig,
    pub model: Option<String>,
    pub high_reasoning_effort: Option<bool>,
    pub max_rounds: Option<u32>,
    /// How long the run may take, as written (`8h`); checked when read.
    pub max_time: Option<String>,
    pub max_candidates: Option<u64>,
    pub gpu_name: Option<String>,
    pub benchmark_warmup: Option<u32>,
    pub benchmark_repeat: Option<u32>,
    pub bottleneck_override: Option<String>,
    pub test_timeout_s: Option<f64>,
    /// Further attempts at a candidate that failed verification; 0 turns refinement off.
    pub max_refinements: Option<u32>,
    /// Seed kernels asked for when the run starts with generation (no input.py, or --generate).
    pub num_seeds: Option<u32>,
    /// Which verified seeds make the first beam: `first_seed` (the default) or `all_seeds`.
    pub generation: Option<String>,
    /// kactors' own prompt templates replaced by files, relative to the configuration file.
    pub templates: BTreeMap<String, PathBuf>,
    pub platform: Option<PlatformSpec>,
    pub platform_kwargs: PlatformKwargs,
    pub python: Option<PathBuf>,
    pub provider: Option<String>,
    pub replay_dir: Option<PathBuf>,
    pub replay_latency_s: Option<f64>,
    pub noop_eval_s: Option<f64>,
    pub kill_grace_s: Option<f64>,
    /// How long to wait for a GPU that another kactors run holds; 0 fails at once.
    pub gpu_wait_s: Option<f64>,
    /// The largest input.py and problem.py accepted, in bytes.
    pub max_source_bytes: Option<u64>,
    /// Stop a device's evaluator while its profiler runs; default true on ROCm only.
    pub stop_evaluator_for_profile: Option<bool>,
    /// The most one profiler invocation may take before the Watchdog ends it.
    pub profile_pass_timeout_s: Option<f64>,
    /// The most one whole profile may take, every pass and retry counted.
    pub profile_budget_s: Option<f64>,
    /// End the run once the best kernel is at its roofline; off unless set.
    pub stop_at_roofline: Option<bool>,
    /// Rounds mode: prepare the next round's certain parents before the round ends; on unless
    /// set false.
    pub overlap_rounds: Option<bool>,
    /// Where the devices' processes run: `local`, `slurm` or `auto`.
    pub launcher: Option<String>,
    /// How much of the sandbox for candidate code a run insists on (issue 19).
    pub sandbox: Option<crate::sandbox::SandboxSetting>,
    /// How long a node agent may leave a ping unanswered before its step is cancelled.
    pub agent_timeout_s: Option<f64>,
    /// The keys `llm::resolve` reads, in the llm module's own type.
    pub llm: LlmKeys,
    /// Warnings for the user: KernelAgent keys that kactors does not use, templates it ignores.
    pub warnings: Vec<String>,
}

/// Top-level keys kactors reads.
pub const TOP_LEVEL_KEYS: &[&str] = &[
    "strategy",
    "search",
    "num_workers",
    "strategy_config",
    "model",
    "openai_model",
    "high_reasoning_effort",
    "max_rounds",
    "max_time",
    "max_candidates",
    "gpu_name",
    "benchmark_warmup",
    "benchmark_repeat",
    "bottleneck_override",
    "test_timeout_s",
    "max_refinements",
    "num_seeds",
    "generation",
    "templates",
    "platform",
    "platform_kwargs",
    "python",
    "provider",
    "replay_dir",
    "replay_latency_s",
    "noop_eval_s",
    "kill_grace_s",
    "gpu_wait_s",
    "stop_evaluator_for_profile",
    "max_source_bytes",
    "profile_pass_timeout_s",
    "profile_budget_s",
    "stop_at_roofline",
    "overlap_rounds",
    "launcher",
    "sandbox",
    "agent_timeout_s",
    "base_url",
    "max_tokens",
    "temperature",
    "max_inflight",
    "requests_per_minute",
    "tokens_per_minute",
    "budget_usd",
    "request_timeout_s",
    "context_window",
    "prices",
];

pub const STRATEGY_CONFIG_KEYS: &[&str] = &[
    "num_top_kernels",
    "num_bottlenecks",
    "max_no_improvement",
    "num_expanding_parents",
    "samples_per_prompt",
    "models",
];

pub const PLATFORM_KWARGS_KEYS: &[&str] = &["ncu_bin_path", "rocprof_bin_path"];

/// Platform components that kactors has: the evaluator's verification and timing, the profiler
/// and the analyses built on it. `profiler: noop` switches profiling off.
pub const PLATFORM_COMPONENTS: &[&str] = &[
    "verifier",
    "benchmarker",
    "worker_runner",
    "specs_provider",
    "profiler",
    "roofline_analyzer",
    "bottleneck_analyzer",
];

/// Keys that KernelAgent's configuration files use and kactors does not: accepted, so that
/// KernelAgent users keep their files, and listed in one warning.
pub const KERNELAGENT_ONLY_KEYS: &[&str] = &[
    "divergence_threshold",
    "target_platform",
    "use_rag",
    "sol_improvement_threshold",
    "workers_per_gpu",
    "candidate_pool_size",
    "technique_clustering",
    "ncu_bin_path",
];

pub const KERNELAGENT_ONLY_COMPONENTS: &[&str] = &["rag_prescriber"];

/// kactors' prompt templates, which `templates:` may replace (templates/<name>.j2). `platform`
/// is the platform guidance the prompts that ask for code include.
pub const TEMPLATE_NAMES: &[&str] = &[
    "system",
    "platform",
    "optimization",
    "analysis",
    "refinement",
    "reflexion",
];

/// KernelAgent's template names: their files expect other variables, so they are not used.
pub const KERNELAGENT_TEMPLATE_NAMES: &[&str] = &[
    "kernel_optimization",
    "reflexion_prompt",
    "triton_guidelines",
];

struct Reader<'a> {
    file: &'a str,
    ignored: Vec<String>,
}

impl Reader<'_> {
    fn value<T: DeserializeOwned>(
        &self,
        key: &str,
        value: &Value,
        expected: &str,
    ) -> Result<T, ConfigError> {
        serde_yaml::from_value(value.clone()).map_err(|_| ConfigError::InvalidValue {
            file: self.file.to_string(),
            key: key.to_string(),
            message: format!("expected {expected}, found {}", describe(value)),
        })
    }

    /// One of `choices`, named `what` in the refusal of any other
    /// (`unknown launcher "x": expected local, slurm or auto`).
    fn choice(
        &self,
        key: &str,
        value: &Value,
        what: &str,
        choices: &[&str],
    ) -> Result<String, ConfigError> {
        let expected = match choices {
            [] => String::new(),
            [only] => only.to_string(),
            [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
        };
        let chosen: String = self.value(key, value, &expected)?;
        if !choices.contains(&chosen.as_str()) {
            return Err(ConfigError::InvalidValue {
                file: self.file.to_string(),
                key: key.to_string(),
                message: format!("unknown {what} \"{chosen}\": expected {expected}"),
            });
        }
        Ok(chosen)
    }

    fn mapping<'v>(&self, key: &str, value: &'v Value) -> Result<&'v Mapping, ConfigError> {
        value.as_mapping().ok_or_else(|| ConfigError::InvalidValue {
            file: self.file.to_string(),
            key: key.to_string(),
            message: format!("expected a mapping, found {}", describe(value)),
        })
    }

    fn key_name(&self, key: &Value, path: &str) -> Result<String, ConfigError> {
        key.as_str()
            .map(str::to_string)
            .ok_or_else(|| ConfigError::InvalidValue {
                file: self.file.to_string(),
                key: path.to_string(),
                message: format!("keys must be strings, found {}", describe(key)),
            })
    }

    fn unknown(&self, key: &str, prefix: &str, valid: &[&str]) -> ConfigError {
        let full = format!("{prefix}{key}");
        let suggestion = match nearest(key, valid) {
            Some(near) => format!("; did you mean `{prefix}{near}`?"),
            None => format!("; valid keys here: {}", valid.join(", ")),
        };
        ConfigError::UnknownKey {
            file: self.file.to_string(),
            key: full,
            suggestion,
        }
    }

    fn positive(&self, key: &str, value: &Value) -> Result<u32, ConfigError> {
        let number: u32 = self.value(key, value, "a whole number of at least 1")?;
        if number == 0 {
            return Err(ConfigError::InvalidValue {
                file: self.file.to_string(),
                key: key.to_string(),
                message: "expected a whole number of at least 1, found 0".into(),
            });
        }
        Ok(number)
    }

    /// A whole number within `range`, both ends included.
    fn whole<T>(&self, key: &str, value: &Value, range: RangeInclusive<T>) -> Result<T, ConfigError>
    where
        T: TryFrom<u64> + PartialOrd + fmt::Display,
    {
        value
            .as_u64()
            .and_then(|number| T::try_from(number).ok())
            .filter(|number| range.contains(number))
            .ok_or_else(|| ConfigError::InvalidValue {
                file: self.file.to_string(),
                key: key.to_string(),
                message: format!(
                    "expected a whole number from {} to {}, found {}",
                    range.start(),
                    range.end(),
                    describe(value)
                ),
            })
    }

    /// A number of seconds from 0 to [`MAX_DURATION_S`].
    fn seconds(&self, key: &str, value: &Value) -> Result<f64, ConfigError> {
        value
            .as_f64()
            .filter(|seconds| (0.0..=MAX_DURATION_S).contains(seconds))
            .ok_or_else(|| ConfigError::InvalidValue {
                file: self.file.to_string(),
                key: key.to_string(),
                message: format!(
                    "expected a number of seconds from 0 to {}, found {}",
                    max_duration_words(),
                    describe(value)
                ),
            })
    }
}

fn describe(value: &Value) -> String {
    match value {
        Value::Null => "nothing".into(),
        Value::Bool(b) => format!("`{b}`"),
        Value::Number(n) => format!("`{n}`"),
        Value::String(s) => format!("\"{s}\""),
        Value::Sequence(_) => "a list".into(),
        Value::Mapping(_) => "a mapping".into(),
        Value::Tagged(_) => "a tagged value".into(),
    }
}

/// The valid key closest to `key` by edit distance, if it is close enough to be a typo.
pub fn nearest<'k>(key: &str, valid: &[&'k str]) -> Option<&'k str> {
    let limit = (key.len() / 3).max(2);
    valid
        .iter()
        .map(|candidate| (edit_distance(key, candidate), *candidate))
        .filter(|(distance, _)| *distance <= limit)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != *cb);
            current.push(substitution.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

fn parse_platform_name(
    reader: &Reader<'_>,
    key: &str,
    value: &Value,
) -> Result<Platform, ConfigError> {
    let name: String = reader.value(key, value, "one of noop, nvidia, rocm")?;
    match name.as_str() {
        "noop" => Ok(Platform::Noop),
        "nvidia" | "cuda" => Ok(Platform::Vendor(Vendor::Nvidia)),
        "rocm" | "amd" => Ok(Platform::Vendor(Vendor::Rocm)),
        other => Err(ConfigError::InvalidValue {
            file: reader.file.to_string(),
            key: key.to_string(),
            message: format!("unknown platform \"{other}\": expected one of noop, nvidia, rocm"),
        }),
    }
}

fn parse_platform(reader: &mut Reader<'_>, value: &Value) -> Result<PlatformSpec, ConfigError> {
    if value.is_string() {
        return Ok(PlatformSpec::One(parse_platform_name(
            reader, "platform", value,
        )?));
    }
    let mut components = BTreeMap::new();
    for (key, value) in reader.mapping("platform", value)? {
        let component = reader.key_name(key, "platform")?;
        let path = format!("platform.{component}");
        if KERNELAGENT_ONLY_COMPONENTS.contains(&component.as_str()) {
            reader.ignored.push(path);
            continue;
        }
        if !PLATFORM_COMPONENTS.contains(&component.as_str()) {
            let mut valid: Vec<&str> = PLATFORM_COMPONENTS.to_vec();
            valid.extend_from_slice(KERNELAGENT_ONLY_COMPONENTS);
            return Err(reader.unknown(&component, "platform.", &valid));
        }
        components.insert(component, parse_platform_name(reader, &path, value)?);
    }
    Ok(PlatformSpec::Components(components))
}

/// `strategy_config.models`: a list of names or of `{name, weight, provider, base_url}`, each
/// named once; an error names the entry at fault (`strategy_config.models[1]`).
fn parse_models(reader: &Reader<'_>, value: &Value) -> Result<Vec<ModelEntry>, ConfigError> {
    let key = "strategy_config.models";
    let invalid = |key: String, message: String| ConfigError::InvalidValue {
        file: reader.file.to_string(),
        key,
        message,
    };
    let expected = "a list of model names, or of mappings with name and weight (name: claude-opus-4-5, weight: 2)";
    let Some(items) = value.as_sequence() else {
        return Err(invalid(
            key.into(),
            format!("expected {expected}, found {}", describe(value)),
        ));
    };
    if !MODELS.contains(&items.len()) {
        return Err(invalid(
            key.into(),
            format!(
                "expected from {} to {} models, found {}",
                MODELS.start(),
                MODELS.end(),
                items.len()
            ),
        ));
    }
    let mut entries: Vec<ModelEntry> = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let at = format!("{key}[{index}]");
        let entry = match item {
            Value::String(name) => ModelEntry {
                name: name.clone(),
                weight: 1,
                provider: None,
                base_url: None,
            },
            Value::Mapping(mapping) => {
                let mut entry = ModelEntry {
                    name: String::new(),
                    weight: 1,
                    provider: None,
                    base_url: None,
                };
                for (inner, value) in mapping {
                    let inner = reader.key_name(inner, &at)?;
                    let path = format!("{at}.{inner}");
                    match inner.as_str() {
                        "name" => entry.name = reader.value(&path, value, "a model name")?,
                        "weight" => entry.weight = reader.whole(&path, value, MODEL_WEIGHT)?,
                        "provider" => {
                            entry.provider = Some(reader.value(&path, value, "a provider name")?)
                        }
                        "base_url" => {
                            entry.base_url = Some(reader.value(
                                &path,
                                value,
                                "a URL such as http://localhost:8000/v1",
                            )?)
                        }
                        other => {
                            return Err(reader.unknown(other, &format!("{at}."), MODEL_ENTRY_KEYS));
                        }
                    }
                }
                entry
            }
            other => {
                return Err(invalid(
                    at,
                    format!(
                        "expected a model name or a mapping with name and weight, found {}",
                        describe(other)
                    ),
                ));
            }
        };
        if entry.name.trim().is_empty() {
            return Err(invalid(
                at,
                "expected a model name: `name` is missing or empty".into(),
            ));
        }
        if let Some(first) = entries.iter().position(|e| e.name == entry.name) {
            return Err(invalid(
                at,
                format!(
                    "model {} is listed twice (also {key}[{first}]): give it one entry with the weight it should have",
                    entry.name
                ),
            ));
        }
        entries.push(entry);
    }
    Ok(entries)
}

/// Parses one configuration file's text. `file` names it in every error.
pub fn parse_config(file: &str, text: &str) -> Result<ConfigFile, ConfigError> {
    let document: Value = serde_yaml::from_str(text).map_err(|error| ConfigError::Yaml {
        file: file.to_string(),
        message: error.to_string(),
    })?;
    let top = match &document {
        Value::Mapping(mapping) => mapping.clone(),
        Value::Null => Mapping::new(),
        _ => {
            return Err(ConfigError::NotAMapping {
                file: file.to_string(),
            });
        }
    };
    // KernelAgent keeps its technique taxonomy beside its configurations.
    if top.get("techniques").is_some_and(Value::is_sequence) {
        return Err(ConfigError::TechniqueTaxonomy {
            file: file.to_string(),
        });
    }
    let mut reader = Reader {
        file,
        ignored: Vec::new(),
    };
    let mut config = ConfigFile::default();
    for (key, value) in &top {
        let key = reader.key_name(key, "")?;
        let key = key.as_str();
        match key {
            "strategy" => {
                config.strategy = Some(reader.choice(
                    key,
                    value,
                    "search strategy",
                    &["beam_search", "greedy"],
                )?)
            }
            "search" => {
                config.search = Some(reader.choice(key, value, "search", &["rounds", "steady"])?)
            }
            "launcher" => {
                config.launcher =
                    Some(reader.choice(key, value, "launcher", &["local", "slurm", "auto"])?)
            }
            "sandbox" => {
                let setting: String =
                    reader.value(key, value, crate::sandbox::SandboxSetting::ACCEPTED)?;
                let Some(setting) = crate::sandbox::SandboxSetting::parse(&setting) else {
                    return Err(ConfigError::InvalidValue {
                        file: file.to_string(),
                        key: key.to_string(),
                        message: format!(
                            "unknown sandbox \"{setting}\": expected {}",
                            crate::sandbox::SandboxSetting::ACCEPTED
                        ),
                    });
                };
                config.sandbox = Some(setting);
            }
            "agent_timeout_s" => {
                let seconds = reader.seconds(key, value)?;
                if seconds == 0.0 {
                    return Err(ConfigError::InvalidValue {
                        file: file.to_string(),
                        key: key.to_string(),
                        message: "expected a number of seconds more than 0: a node agent needs \
                                  some time to answer"
                            .into(),
                    });
                }
                config.agent_timeout_s = Some(seconds);
            }
            "num_workers" => config.num_workers = Some(reader.positive(key, value)?),
            "strategy_config" => {
                for (inner, value) in reader.mapping(key, value)? {
                    let inner = reader.key_name(inner, key)?;
                    let path = format!("strategy_config.{inner}");
                    match inner.as_str() {
                        "num_top_kernels" => {
                            config.strategy_config.num_top_kernels =
                                Some(reader.whole(&path, value, SEARCH_FACTOR)?)
                        }
                        "num_bottlenecks" => {
                            config.strategy_config.num_bottlenecks =
                                Some(reader.whole(&path, value, SEARCH_FACTOR)?)
                        }
                        "max_no_improvement" => {
                            config.strategy_config.max_no_improvement =
                                Some(reader.positive(&path, value)?)
                        }
                        "num_expanding_parents" => {
                            config.strategy_config.num_expanding_parents =
                                Some(reader.whole(&path, value, SEARCH_FACTOR)?)
                        }
                        "samples_per_prompt" => {
                            config.strategy_config.samples_per_prompt =
                                Some(reader.whole(&path, value, SAMPLES_PER_PROMPT)?)
                        }
                        "models" => config.strategy_config.models = parse_models(&reader, value)?,
                        other if KERNELAGENT_ONLY_KEYS.contains(&other) => {
                            reader.ignored.push(path)
                        }
                        other => {
                            return Err(reader.unknown(
                                other,
                                "strategy_config.",
                                STRATEGY_CONFIG_KEYS,
                            ));
                        }
                    }
                }
            }
            "model" | "openai_model" => {
                let model: String = reader.value(key, value, "a model name")?;
                if config
                    .model
                    .as_ref()
                    .is_some_and(|existing| *existing != model)
                {
                    return Err(ConfigError::InvalidValue {
                        file: file.to_string(),
                        key: key.to_string(),
                        message:
                            "`model` and its alias `openai_model` name different models: keep one"
                                .into(),
                    });
                }
                config.model = Some(model);
            }
            "high_reasoning_effort" => {
                config.high_reasoning_effort = Some(reader.value(key, value, "true or false")?)
            }
            "max_rounds" => config.max_rounds = Some(reader.positive(key, value)?),
            "max_time" => {
                let text: String = reader.value(key, value, "a duration such as 8h")?;
                parse_max_time(&text).map_err(|message| ConfigError::InvalidValue {
                    file: file.to_string(),
                    key: key.to_string(),
                    message,
                })?;
                config.max_time = Some(text);
            }
            "max_candidates" => {
                config.max_candidates = Some(reader.whole(key, value, MAX_CANDIDATES)?)
            }
            "gpu_name" => config.gpu_name = Some(reader.value(key, value, "a GPU name")?),
            "benchmark_warmup" => {
                config.benchmark_warmup = Some(reader.whole(key, value, BENCHMARK_WARMUP)?)
            }
            "benchmark_repeat" => {
                config.benchmark_repeat = Some(reader.whole(key, value, BENCHMARK_REPEAT)?)
            }
            "bottleneck_override" => {
                config.bottleneck_override =
                    Some(reader.value(key, value, "memory, compute or underutilized")?)
            }
            "test_timeout_s" => config.test_timeout_s = Some(reader.seconds(key, value)?),
            "max_refinements" => {
                config.max_refinements = Some(reader.whole(key, value, MAX_REFINEMENTS)?)
            }
            "num_seeds" => config.num_seeds = Some(reader.whole(key, value, NUM_SEEDS)?),
            "generation" => {
                config.generation =
                    Some(reader.choice(key, value, "generation", &["first_seed", "all_seeds"])?)
            }
            "templates" => {
                for (name, value) in reader.mapping(key, value)? {
                    let name = reader.key_name(name, key)?;
                    let path = format!("templates.{name}");
                    if KERNELAGENT_TEMPLATE_NAMES.contains(&name.as_str()) {
                        config.warnings.push(format!(
                            "{file}: `{path}` is a KernelAgent template; its variables differ from kactors' and it is not used (kactors' templates: {})",
                            TEMPLATE_NAMES.join(", ")
                        ));
                        continue;
                    }
                    if !TEMPLATE_NAMES.contains(&name.as_str()) {
                        return Err(reader.unknown(&name, "templates.", TEMPLATE_NAMES));
                    }
                    config
                        .templates
                        .insert(name, reader.value::<PathBuf>(&path, value, "a file path")?);
                }
            }
            "platform" => config.platform = Some(parse_platform(&mut reader, value)?),
            "platform_kwargs" => {
                for (inner, value) in reader.mapping(key, value)? {
                    let inner = reader.key_name(inner, key)?;
                    let path = format!("platform_kwargs.{inner}");
                    match inner.as_str() {
                        "ncu_bin_path" => {
                            config.platform_kwargs.ncu_bin_path =
                                Some(reader.value(&path, value, "a file path")?)
                        }
                        "rocprof_bin_path" => {
                            config.platform_kwargs.rocprof_bin_path =
                                Some(reader.value(&path, value, "a file path")?)
                        }
                        other => {
                            return Err(reader.unknown(
                                other,
                                "platform_kwargs.",
                                PLATFORM_KWARGS_KEYS,
                            ));
                        }
                    }
                }
            }
            "python" => {
                config.python = Some(reader.value(key, value, "a path to a Python interpreter")?)
            }
            "provider" => config.provider = Some(reader.value(key, value, "a provider name")?),
            "replay_dir" => {
                config.replay_dir = Some(reader.value(key, value, "a directory path")?)
            }
            "replay_latency_s" => config.replay_latency_s = Some(reader.seconds(key, value)?),
            "noop_eval_s" => config.noop_eval_s = Some(reader.seconds(key, value)?),
            "kill_grace_s" => config.kill_grace_s = Some(reader.seconds(key, value)?),
            "gpu_wait_s" => config.gpu_wait_s = Some(reader.seconds(key, value)?),
            "profile_pass_timeout_s" => {
                config.profile_pass_timeout_s = Some(reader.seconds(key, value)?)
            }
            "profile_budget_s" => config.profile_budget_s = Some(reader.seconds(key, value)?),
            "max_source_bytes" => {
                config.max_source_bytes = Some(reader.whole(key, value, MAX_SOURCE_BYTES)?)
            }
            "stop_at_roofline" => {
                config.stop_at_roofline = Some(reader.value(key, value, "true or false")?)
            }
            "overlap_rounds" => {
                config.overlap_rounds = Some(reader.value(key, value, "true or false")?)
            }
            "stop_evaluator_for_profile" => {
                config.stop_evaluator_for_profile =
                    Some(reader.value(key, value, "true or false")?)
            }
            "base_url" => {
                config.llm.base_url =
                    Some(reader.value(key, value, "a URL such as http://localhost:8000/v1")?)
            }
            "max_tokens" => config.llm.max_tokens = Some(reader.positive(key, value)?),
            "temperature" => {
                config.llm.temperature = Some(reader.value(key, value, "a number such as 0.7")?)
            }
            "max_inflight" => {
                config.llm.max_inflight = Some(reader.whole(key, value, MAX_INFLIGHT)?)
            }
            "requests_per_minute" => {
                config.llm.requests_per_minute = Some(reader.positive(key, value)?)
            }
            "tokens_per_minute" => {
                config.llm.tokens_per_minute =
                    Some(reader.value(key, value, "a whole number of tokens")?)
            }
            "budget_usd" => {
                config.llm.budget_usd = Some(reader.value(key, value, "an amount in US dollars")?)
            }
            "request_timeout_s" => config.llm.request_timeout_s = Some(reader.seconds(key, value)?),
            "context_window" => {
                config.llm.context_window =
                    Some(reader.value(key, value, "a whole number of tokens")?)
            }
            "prices" => {
                config.llm.prices = reader.value(
                    key,
                    value,
                    "a mapping from model name to {input_usd_per_mtok, output_usd_per_mtok}",
                )?
            }
            other if KERNELAGENT_ONLY_KEYS.contains(&other) => {
                reader.ignored.push(other.to_string())
            }
            other => return Err(reader.unknown(other, "", TOP_LEVEL_KEYS)),
        }
    }
    if !reader.ignored.is_empty() {
        config.warnings.push(format!(
            "{file}: ignoring KernelAgent keys that kactors does not use: {}",
            reader.ignored.join(", ")
        ));
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_of(text: &str) -> String {
        parse_config("configs/test.yaml", text)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn an_unknown_key_is_named_with_the_nearest_valid_key() {
        assert_eq!(
            error_of("num_worker: 4\n"),
            "configs/test.yaml: unknown key `num_worker`; did you mean `num_workers`?"
        );
        assert_eq!(
            error_of("strategy_config:\n  num_top_kernel: 2\n"),
            "configs/test.yaml: unknown key `strategy_config.num_top_kernel`; did you mean `strategy_config.num_top_kernels`?"
        );
    }

    #[test]
    fn an_unknown_key_far_from_any_lists_the_valid_ones() {
        let message = error_of("platform_kwargs:\n  frobnicate: 1\n");
        assert!(message.contains("unknown key `platform_kwargs.frobnicate`; valid keys here: ncu_bin_path, rocprof_bin_path"), "{message}");
    }

    #[test]
    fn kernelagent_keys_are_accepted_with_one_warning() {
        let config = parse_config(
            "ka.yaml",
            "strategy: beam_search\ndivergence_threshold: 50.0\ntarget_platform: cuda\nstrategy_config:\n  workers_per_gpu: 4\n  candidate_pool_size: 2\nplatform:\n  profiler: nvidia\n  rag_prescriber: nvidia\n",
        )
        .unwrap();
        assert_eq!(
            config.warnings,
            vec![
                "ka.yaml: ignoring KernelAgent keys that kactors does not use: divergence_threshold, target_platform, strategy_config.workers_per_gpu, strategy_config.candidate_pool_size, platform.rag_prescriber"
            ]
        );
    }

    /// Issue 22: KernelAgent's ensemble keys are read, in its spelling and in kactors' own.
    #[test]
    fn kernelagent_ensemble_keys_are_read_as_it_writes_them() {
        let config = parse_config(
            "ka.yaml",
            "strategy_config:\n  num_expanding_parents: 2\n  samples_per_prompt: 5\n  models:\n    - claude-opus-4.6\n    - gpt-5-4\n",
        )
        .unwrap();
        let strategy = &config.strategy_config;
        assert_eq!(strategy.num_expanding_parents, Some(2));
        assert_eq!(strategy.samples_per_prompt, Some(5));
        let models: Vec<(&str, u32)> = strategy
            .models
            .iter()
            .map(|m| (m.name.as_str(), m.weight))
            .collect();
        assert_eq!(models, [("claude-opus-4.6", 1), ("gpt-5-4", 1)]);
        assert!(config.warnings.is_empty(), "{:?}", config.warnings);

        let weighted = parse_config(
            "k.yaml",
            "strategy_config:\n  models:\n    - {name: a, weight: 3, provider: openai_compatible, base_url: http://h/v1}\n    - b\n",
        )
        .unwrap();
        let first = &weighted.strategy_config.models[0];
        assert_eq!(
            (first.weight, first.provider.as_deref()),
            (3, Some("openai_compatible"))
        );
        assert_eq!(first.base_url.as_deref(), Some("http://h/v1"));
    }

    #[test]
    fn a_bad_models_entry_is_named_with_what_would_be_accepted() {
        let models = |list: &str| error_of(&format!("strategy_config:\n  models: {list}\n"));
        assert_eq!(
            models("claude"),
            "configs/test.yaml: invalid value for `strategy_config.models`: expected a list of model names, or of mappings with name and weight (name: claude-opus-4-5, weight: 2), found \"claude\""
        );
        assert_eq!(
            models("[]"),
            "configs/test.yaml: invalid value for `strategy_config.models`: expected from 1 to 16 models, found 0"
        );
        assert_eq!(
            models("[a, {name: b, weight: 0}]"),
            "configs/test.yaml: invalid value for `strategy_config.models[1].weight`: expected a whole number from 1 to 100, found `0`"
        );
        assert_eq!(
            models("[a, {weight: 2}]"),
            "configs/test.yaml: invalid value for `strategy_config.models[1]`: expected a model name: `name` is missing or empty"
        );
        assert_eq!(
            models("[a, b, a]"),
            "configs/test.yaml: invalid value for `strategy_config.models[2]`: model a is listed twice (also strategy_config.models[0]): give it one entry with the weight it should have"
        );
        assert_eq!(
            models("[{name: a, wieght: 2}]"),
            "configs/test.yaml: unknown key `strategy_config.models[0].wieght`; did you mean `strategy_config.models[0].weight`?"
        );
        assert_eq!(
            models("[7]"),
            "configs/test.yaml: invalid value for `strategy_config.models[0]`: expected a model name or a mapping with name and weight, found `7`"
        );
        assert_eq!(
            error_of("strategy_config:\n  samples_per_prompt: 0\n"),
            "configs/test.yaml: invalid value for `strategy_config.samples_per_prompt`: expected a whole number from 1 to 64, found `0`"
        );
        assert_eq!(
            error_of("strategy_config:\n  num_expanding_parents: 0\n"),
            "configs/test.yaml: invalid value for `strategy_config.num_expanding_parents`: expected a whole number from 1 to 4096, found `0`"
        );
    }

    #[test]
    fn search_takes_rounds_or_steady() {
        let config = parse_config("a.yaml", "search: steady\n").unwrap();
        assert_eq!(config.search.as_deref(), Some("steady"));
        assert_eq!(
            error_of("search: eager\n"),
            "configs/test.yaml: invalid value for `search`: unknown search \"eager\": expected rounds or steady"
        );
    }

    #[test]
    fn context_window_is_a_whole_number_of_tokens() {
        let config = parse_config("a.yaml", "context_window: 32768\n").unwrap();
        assert_eq!(config.llm.context_window, Some(32_768));
        assert!(error_of("context_window: -1\n").contains("expected a whole number of tokens"));
    }

    #[test]
    fn openai_model_is_an_alias_of_model() {
        let config = parse_config("a.yaml", "openai_model: gpt-5\n").unwrap();
        assert_eq!(config.model.as_deref(), Some("gpt-5"));
        assert!(error_of("model: a\nopenai_model: b\n").contains("name different models"));
    }

    #[test]
    fn values_of_the_wrong_type_name_the_key_and_what_is_accepted() {
        assert_eq!(
            error_of("num_workers: four\n"),
            "configs/test.yaml: invalid value for `num_workers`: expected a whole number of at least 1, found \"four\""
        );
        assert_eq!(
            error_of("platform: tpu\n"),
            "configs/test.yaml: invalid value for `platform`: unknown platform \"tpu\": expected one of noop, nvidia, rocm"
        );
        assert_eq!(
            error_of("strategy: annealing\n"),
            "configs/test.yaml: invalid value for `strategy`: unknown search strategy \"annealing\": expected beam_search or greedy"
        );
    }

    #[test]
    fn a_platform_map_keeps_each_component() {
        let config =
            parse_config("m.yaml", "platform:\n  verifier: rocm\n  profiler: noop\n").unwrap();
        let PlatformSpec::Components(components) = config.platform.unwrap() else {
            panic!("a map")
        };
        assert_eq!(components["verifier"], Platform::Vendor(Vendor::Rocm));
        assert_eq!(components["profiler"], Platform::Noop);
    }

    /// Issue 14: where the devices' processes run, and how long a node agent may stay silent.
    #[test]
    fn sandbox_is_required_best_effort_or_off() {
        for setting in ["required", "best_effort", "off"] {
            check("sandbox", setting, None);
        }
        check(
            "sandbox",
            "none",
            Some("unknown sandbox \"none\": expected required, best_effort or off"),
        );
    }

    #[test]
    fn launcher_is_local_slurm_or_auto_and_an_agent_gets_some_time() {
        for launcher in ["local", "slurm", "auto"] {
            check("launcher", launcher, None);
        }
        check(
            "launcher",
            "kubernetes",
            Some("unknown launcher \"kubernetes\": expected local, slurm or auto"),
        );
        check("agent_timeout_s", "2.5", None);
        check(
            "agent_timeout_s",
            "604801",
            Some("expected a number of seconds from 0 to 604800 s (7 days), found `604801`"),
        );
        check(
            "agent_timeout_s",
            "0",
            Some(
                "expected a number of seconds more than 0: a node agent needs some time to answer",
            ),
        );
    }

    #[test]
    fn max_refinements_takes_a_whole_number_and_zero() {
        let config = parse_config("r.yaml", "max_refinements: 0\n").unwrap();
        assert_eq!(config.max_refinements, Some(0));
        assert_eq!(
            error_of("max_refinements: -1\n"),
            "configs/test.yaml: invalid value for `max_refinements`: expected a whole number from 0 to 100, found `-1`"
        );
    }

    /// Issue 20: generation's keys, range-checked like the others.
    #[test]
    fn num_seeds_and_generation_are_checked_when_read() {
        let config = parse_config("r.yaml", "num_seeds: 8\ngeneration: all_seeds\n").unwrap();
        assert_eq!(config.num_seeds, Some(8));
        assert_eq!(config.generation.as_deref(), Some("all_seeds"));
        assert_eq!(
            error_of("num_seeds: 0\n"),
            "configs/test.yaml: invalid value for `num_seeds`: expected a whole number from 1 to 256, found `0`"
        );
        assert_eq!(
            error_of("generation: every_seed\n"),
            "configs/test.yaml: invalid value for `generation`: unknown generation \"every_seed\": expected first_seed or all_seeds"
        );
    }

    /// `key: value` alone in a file: accepted (`None`), or the error's message after the key.
    fn check(key: &str, value: &str, expected: Option<&str>) {
        let text = format!("{key}: {value}\n");
        let outcome = parse_config("c.yaml", &text).err().map(|e| e.to_string());
        let expected =
            expected.map(|message| format!("c.yaml: invalid value for `{key}`: {message}"));
        assert_eq!(outcome, expected, "{text}");
    }

    const DURATION_KEYS: &[&str] = &[
        "noop_eval_s",
        "replay_latency_s",
        "kill_grace_s",
        "request_timeout_s",
        "test_timeout_s",
        "profile_pass_timeout_s",
        "profile_budget_s",
        "gpu_wait_s",
    ];

    #[test]
    fn every_duration_is_at_most_a_week() {
        let expected = |found: &str| {
            format!("expected a number of seconds from 0 to 604800 s (7 days), found {found}")
        };
        for key in DURATION_KEYS {
            check(key, "1e300", Some(&expected("`1e300`")));
            check(key, "604801", Some(&expected("`604801`")));
            check(key, "-1", Some(&expected("`-1`")));
            check(key, ".inf", Some(&expected("`.inf`")));
            check(key, ".nan", Some(&expected("`.nan`")));
            check(key, "soon", Some(&expected("\"soon\"")));
            check(key, "604800", None);
            check(key, "0.25", None);
            check(key, "0", None);
        }
    }

    #[test]
    fn every_count_has_a_range() {
        let cases: &[(&str, &str, Option<&str>)] = &[
            ("benchmark_warmup", "0", None),
            ("benchmark_warmup", "10000", None),
            (
                "benchmark_warmup",
                "10001",
                Some("expected a whole number from 0 to 10000, found `10001`"),
            ),
            (
                "benchmark_repeat",
                "0",
                Some("expected a whole number from 1 to 10000, found `0`"),
            ),
            ("benchmark_repeat", "10000", None),
            ("max_refinements", "100", None),
            (
                "max_refinements",
                "4294967296",
                Some("expected a whole number from 0 to 100, found `4294967296`"),
            ),
            ("max_inflight", "1024", None),
            (
                "max_inflight",
                "1025",
                Some("expected a whole number from 1 to 1024, found `1025`"),
            ),
            (
                "max_inflight",
                "2.5",
                Some("expected a whole number from 1 to 1024, found `2.5`"),
            ),
            ("max_source_bytes", "67108864", None),
            (
                "max_source_bytes",
                "67108865",
                Some("expected a whole number from 1 to 67108864, found `67108865`"),
            ),
        ];
        for (key, value, expected) in cases {
            check(key, value, *expected);
        }
    }

    #[test]
    fn each_search_factor_is_at_most_4096() {
        for inner in ["num_top_kernels", "num_bottlenecks"] {
            let text = format!("strategy_config:\n  {inner}: 65536\n");
            assert_eq!(
                parse_config("c.yaml", &text).unwrap_err().to_string(),
                format!(
                    "c.yaml: invalid value for `strategy_config.{inner}`: expected a whole number from 1 to 4096, found `65536`"
                )
            );
            let text = format!("strategy_config:\n  {inner}: 4096\n");
            parse_config("c.yaml", &text).unwrap();
        }
    }

    #[test]
    fn every_template_name_has_a_shipped_template() {
        for name in TEMPLATE_NAMES {
            let path = format!("{}/templates/{name}.j2", env!("CARGO_MANIFEST_DIR"));
            assert!(std::path::Path::new(&path).is_file(), "{path}");
        }
    }

    #[test]
    fn kernelagent_templates_are_warned_about_and_not_used() {
        let config = parse_config("t.yaml", "templates:\n  kernel_optimization: x.j2\n").unwrap();
        assert!(config.templates.is_empty());
        assert!(
            config.warnings[0]
                .contains("`templates.kernel_optimization` is a KernelAgent template")
        );
    }

    #[test]
    fn every_configuration_file_kernelagent_ships_loads() {
        let folder = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/kernelagent-configs"
        );
        let mut loaded = 0;
        let mut taxonomies = Vec::new();
        for entry in std::fs::read_dir(folder).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|ext| ext != "yaml") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            match parse_config(&name, &text) {
                Ok(_) => loaded += 1,
                Err(ConfigError::TechniqueTaxonomy { file }) => taxonomies.push(file),
                Err(error) => panic!("{error}"),
            }
        }
        assert_eq!(loaded, 17, "KernelAgent ships 17 configuration files");
        assert_eq!(taxonomies, ["techniques_default.yaml"]);
    }
}
