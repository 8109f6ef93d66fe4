//! `kactors run --strategy all`: every strategy whose platform fits this host, one after another.
//!
//! KernelAgent's runner takes every file of its configuration folder as a strategy, so an AMD
//! configuration runs on an NVIDIA host. Here a strategy runs only when its platform fits the
//! vendor `kactors devices` decides for this host; noop is left out when a GPU platform fits;
//! a strategy that resolves to the same settings as one run before it is left out too. The
//! runs share one LLM budget and one max_time, and end with a comparison on stderr and in
//! `<run-dir>/all-<timestamp>.md` and `.json`. The choosing is plain functions (`choose`,
//! `worst_exit_code`); `run_all` carries it out.

use std::fmt;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use actors::journal::{history, read_journal};
use actors::report::{Headline, RunSummary};

use crate::cli::RunArgs;
use crate::config::{ConfigError, RunSettings, Strategies};
use crate::console;
use crate::devices::{HostEnvironment, select_devices};
use crate::exit;
use crate::run_dir::{RunFiles, folder_stamp};
use crate::vendor::{Platform, PlatformRequest, Vendor};

use super::super::CommandError;
use super::super::settings::settings_of;
use super::execute::{Launch, Spent, execute};
use super::invocation::Invocation;

/// The name `--strategy` takes for every strategy that fits.
pub(crate) const ALL: &str = "all";

/// What this host's GPUs allow, as `kactors devices` without `--strategy` decides it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum HostPlatform {
    Gpu(Vendor),
    /// No GPU is visible (or the vendor tools say nothing usable): why.
    NoGpu {
        why: String,
    },
}

/// A strategy file as found: its settings with the command line's overrides, or why it is not
/// run (`Skip::NotAStrategy` or `Skip::Unloadable`).
pub(crate) struct Offered {
    pub name: String,
    pub settings: Result<RunSettings, Skip>,
}

/// Why a strategy is not run.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Skip {
    NotAStrategy(String),
    /// A file that means to be a strategy (it sets `strategy:` or `platform:`) but does not
    /// load: a YAML error, a mistyped key. Not skipped quietly but refused, as `--strategy
    /// NAME` would refuse it (exit 2).
    Unloadable(String),
    /// A file `all.yaml`: `--strategy all` cannot name it alone.
    Reserved,
    NoopBesideGpu(Vendor),
    OtherVendor {
        wants: Vendor,
        host: Vendor,
    },
    NoGpu {
        wants: PlatformRequest,
        why: String,
    },
    SameAs(String),
    /// The runs before it spent the whole max_time.
    TimeSpent {
        max_time: String,
    },
    Interrupted(&'static str),
}

impl fmt::Display for Skip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Skip::NotAStrategy(why) => write!(f, "not a strategy: {why}"),
            Skip::Unloadable(why) => write!(f, "refused: {why}"),
            Skip::Reserved => f.write_str(
                "`all` names every strategy, so a file all.yaml is never run by --strategy all; rename it",
            ),
            Skip::NoopBesideGpu(vendor) => write!(
                f,
                "the noop platform only simulates devices, and this host's {vendor} GPUs fit"
            ),
            Skip::OtherVendor { wants, host } => write!(
                f,
                "its platform is {wants}, and this host's GPUs are {host} (as `kactors devices` decides)"
            ),
            Skip::NoGpu {
                wants: PlatformRequest::Detect,
                why,
            } => write!(f, "it runs on the GPUs detected: {why}"),
            Skip::NoGpu { wants, why } => write!(f, "its platform is {}: {why}", wants.name()),
            Skip::SameAs(earlier) => write!(
                f,
                "it resolves to the same settings as `{earlier}`, run before it"
            ),
            Skip::TimeSpent { max_time } => write!(
                f,
                "the runs before it spent the whole max_time ({max_time})"
            ),
            Skip::Interrupted(signal) => write!(f, "interrupted by {signal} before it started"),
        }
    }
}

/// One strategy and whether it runs (its settings) or why not.
pub(crate) struct Choice {
    pub strategy: String,
    pub verdict: Result<RunSettings, Skip>,
}

/// Which strategies run on `host`, in the order offered (name order): those whose platform
/// fits, noop only where no GPU platform does, each only if no strategy before it resolves to
/// the same settings.
pub(crate) fn choose(offered: Vec<Offered>, host: &HostPlatform) -> Vec<Choice> {
    let mut chosen: Vec<(String, serde_json::Value)> = Vec::new();
    offered
        .into_iter()
        .map(|offer| {
            let verdict = offer.settings.and_then(|settings| {
                if offer.name == ALL {
                    return Err(Skip::Reserved);
                }
                let platform = fitting_platform(settings.platform, host)?;
                let resolved = resolved_settings(&settings, platform);
                if let Some((earlier, _)) = chosen.iter().find(|(_, seen)| *seen == resolved) {
                    return Err(Skip::SameAs(earlier.clone()));
                }
                chosen.push((offer.name.clone(), resolved));
                Ok(settings)
            });
            Choice {
                strategy: offer.name,
                verdict,
            }
        })
        .collect()
}

/// The platform a strategy runs on here, or why it does not fit.
fn fitting_platform(wants: PlatformRequest, host: &HostPlatform) -> Result<Platform, Skip> {
    match (wants, host) {
        (PlatformRequest::Exactly(Platform::Noop), HostPlatform::Gpu(vendor)) => {
            Err(Skip::NoopBesideGpu(*vendor))
        }
        (PlatformRequest::Exactly(Platform::Noop), HostPlatform::NoGpu { .. }) => {
            Ok(Platform::Noop)
        }
        (PlatformRequest::Exactly(Platform::Vendor(wants)), HostPlatform::Gpu(host))
            if wants != *host =>
        {
            Err(Skip::OtherVendor { wants, host: *host })
        }
        (_, HostPlatform::Gpu(vendor)) => Ok(Platform::Vendor(*vendor)),
        (wants, HostPlatform::NoGpu { why }) => Err(Skip::NoGpu {
            wants,
            why: why.clone(),
        }),
    }
}

/// The settings a run would use on `platform`, without what names the strategy's file: two
/// strategies with the same are one run.
fn resolved_settings(settings: &RunSettings, platform: Platform) -> serde_json::Value {
    let mut value = serde_json::to_value(settings).expect("run settings serialise to JSON");
    if let Some(fields) = value.as_object_mut() {
        fields.remove("strategy");
        fields.remove("config_file");
        fields.insert("platform".into(), platform.name().into());
    }
    value
}

/// How bad an exit code is for `--strategy all`, worst highest: a strategy refused (2: it never
/// ran, and a configuration or the host needs fixing), a run that failed (1), an interrupt
/// (130: asked for), then 0. A code kactors never gives counts as the worst.
fn severity(code: i32) -> u8 {
    match code {
        exit::SUCCESS => 0,
        exit::INTERRUPTED => 1,
        exit::RUN_FAILED => 2,
        exit::USAGE => 3,
        _ => 4,
    }
}

/// The exit code of `--strategy all`: the worst of its runs'.
pub(crate) fn worst_exit_code(codes: impl IntoIterator<Item = i32>) -> i32 {
    codes
        .into_iter()
        .max_by_key(|code| severity(*code))
        .unwrap_or(exit::SUCCESS)
}

/// What became of one strategy that was started.
#[derive(Clone, Debug)]
pub(crate) struct Ran {
    pub strategy: String,
    pub exit_code: i32,
    pub run_dir: Option<PathBuf>,
    /// The run's figures from its journal; none for a refused strategy.
    pub headline: Option<Headline>,
    /// Why it was refused (exit 2) before it ran.
    pub refused: Option<String>,
}

impl Ran {
    fn outcome(&self) -> (&'static str, String) {
        if let Some(why) = &self.refused {
            return ("refused", why.clone());
        }
        match self.headline.as_ref().and_then(|h| h.outcome.as_ref()) {
            Some((outcome, reason)) => (outcome.name(), reason.clone()),
            None => ("unfinished", "the journal has no run_finished".into()),
        }
    }

    fn best_ms(&self) -> Option<f64> {
        self.headline.as_ref()?.best.map(|(_, ms)| ms)
    }

    fn speedup(&self) -> Option<f64> {
        let headline = self.headline.as_ref()?;
        let (best, initial) = (headline.best?.1, headline.initial_ms?);
        (best > 0.0).then(|| initial / best)
    }

    fn provenance(&self) -> Option<&'static str> {
        let headline = self.headline.as_ref()?;
        Some(if headline.simulated {
            "simulated"
        } else {
            "measured"
        })
    }
}

/// The comparison as report.md-style Markdown: a row per strategy run, then those skipped.
pub(crate) fn comparison_markdown(
    ran: &[Ran],
    skipped: &[(String, Skip)],
    exit_code: i32,
) -> String {
    let cell = |text: &str| text.lines().next().unwrap_or_default().replace('|', "\\|");
    let dash = || "–".to_string();
    let mut out = format!(
        "# kactors run --strategy all\n\nExit code {exit_code} (the worst of the runs').\n\n\
         | strategy | exit | outcome | best (ms) | vs initial | candidates | wall time | provenance | run directory |\n\
         |---|---|---|---|---|---|---|---|---|\n"
    );
    for run in ran {
        let (outcome, reason) = run.outcome();
        let headline = run.headline.as_ref();
        out.push_str(&format!(
            "| {} | {} | {outcome}: {} | {} | {} | {} | {} | {} | {} |\n",
            run.strategy,
            run.exit_code,
            cell(&reason),
            run.best_ms().map_or_else(dash, |ms| format!("{ms:.4}")),
            run.speedup().map_or_else(dash, |x| format!("{x:.2}×")),
            headline.map_or_else(dash, |h| h.candidates.to_string()),
            headline.map_or_else(dash, |h| format!("{:.1} s", h.wall.as_secs_f64())),
            run.provenance().map_or_else(dash, str::to_string),
            run.run_dir
                .as_ref()
                .map_or_else(dash, |dir| dir.display().to_string()),
        ));
    }
    if !skipped.is_empty() {
        out.push_str("\nSkipped:\n\n");
        for (strategy, why) in skipped {
            out.push_str(&format!("- {strategy}: {}\n", cell(&why.to_string())));
        }
    }
    out
}

/// The comparison as one JSON object, the summary file's and `--json`'s last line.
pub(crate) fn comparison_json(
    ran: &[Ran],
    skipped: &[(String, Skip)],
    exit_code: i32,
) -> serde_json::Value {
    let runs: Vec<serde_json::Value> = ran
        .iter()
        .map(|run| {
            let (outcome, reason) = run.outcome();
            let headline = run.headline.as_ref();
            serde_json::json!({
                "strategy": run.strategy,
                "exit_code": run.exit_code,
                "outcome": outcome,
                "reason": reason,
                "best_candidate": headline.and_then(|h| h.best).map(|(id, _)| id.0),
                "best_ms": run.best_ms(),
                "initial_ms": headline.and_then(|h| h.initial_ms),
                "speedup_vs_initial": run.speedup(),
                "candidates": headline.map(|h| h.candidates),
                "wall_s": headline.map(|h| h.wall.as_secs_f64()),
                "provenance": run.provenance(),
                "run_dir": run.run_dir,
            })
        })
        .collect();
    let skipped: Vec<serde_json::Value> = skipped
        .iter()
        .map(|(strategy, why)| serde_json::json!({"strategy": strategy, "reason": why.to_string()}))
        .collect();
    serde_json::json!({
        "type": "comparison",
        "strategy": ALL,
        "exit_code": exit_code,
        "runs": runs,
        "skipped": skipped,
    })
}

/// `kactors run --strategy all`.
pub(super) fn run_all(args: &RunArgs) -> Result<i32, CommandError> {
    let started = Instant::now();
    let started_at = SystemTime::now();
    let base = Invocation::of(args)?;
    let python = base
        .overrides
        .python
        .clone()
        .unwrap_or_else(|| PathBuf::from("python3"));
    let choices = choose(offer(&base)?, &host_platform(python));
    let mut skipped = Vec::new();
    let mut to_run = Vec::new();
    let mut refused = Vec::new();
    for choice in choices {
        match choice.verdict {
            Ok(settings) => to_run.push((choice.strategy, settings)),
            Err(Skip::Unloadable(why)) => {
                refused.push(refused_run(choice.strategy, why, None, args.json));
            }
            Err(why) => {
                say_skipped(&choice.strategy, &why, args.json);
                skipped.push((choice.strategy, why));
            }
        }
    }
    if to_run.is_empty() && refused.is_empty() {
        return Err(CommandError::Usage(
            "--strategy all found no strategy that fits this host: each was skipped (the lines above say why)".into(),
        ));
    }
    let names: Vec<&str> = to_run.iter().map(|(name, _)| name.as_str()).collect();
    if !names.is_empty() {
        console::err(format_args!(
            "kactors: --strategy all runs {} in turn",
            names.join(", ")
        ));
    }
    let mut ran: Vec<Ran> = refused;
    let mut spent_usd = 0.0;
    for (strategy, settings) in to_run {
        let skip = if let Some(signal) = crate::signals::first_interrupt() {
            Some(Skip::Interrupted(signal))
        } else {
            settings
                .max_time()
                .filter(|limit| started.elapsed() >= *limit)
                .map(|_| Skip::TimeSpent {
                    max_time: settings.max_time.clone().unwrap_or_default(),
                })
        };
        if let Some(why) = skip {
            say_skipped(&strategy, &why, args.json);
            skipped.push((strategy, why));
            continue;
        }
        let invocation = Invocation {
            strategy: strategy.clone(),
            ..base.clone()
        };
        let run = run_one(invocation, &args.run_dir, args.json, spent_usd, started);
        spent_usd += run.1;
        ran.push(run.0);
    }
    let exit_code = worst_exit_code(ran.iter().map(|run| run.exit_code));
    let markdown = comparison_markdown(&ran, &skipped, exit_code);
    let mut json = comparison_json(&ran, &skipped, exit_code);
    match write_summary(&args.run_dir, started_at, &markdown, &json) {
        Ok((md, json_path)) => {
            json["summary"] = serde_json::json!({"markdown": md, "json": json_path});
            console::err(format_args!(
                "kactors: --strategy all: comparison (also in {}):",
                md.display()
            ));
        }
        Err(error) => console::err(format_args!(
            "kactors: warning: --strategy all: the comparison could not be written under {}: {error}",
            args.run_dir.display()
        )),
    }
    for line in markdown.lines().skip(2) {
        console::err(line);
    }
    if args.json {
        console::out(json);
    }
    Ok(exit_code)
}

/// Every strategy file with its settings under the command line's overrides. A flag out of its
/// range refuses the whole command (it would refuse every strategy).
fn offer(base: &Invocation) -> Result<Vec<Offered>, CommandError> {
    Strategies::new(base.config_dir.clone())
        .all()?
        .into_iter()
        .map(|file| match settings_of(&file, &base.overrides) {
            Ok(settings) => Ok(Offered {
                name: file.name,
                settings: Ok(settings),
            }),
            Err(error @ ConfigError::InvalidFlag { .. }) => Err(error.into()),
            Err(error) => Ok(Offered {
                settings: Err(not_loaded(&file.text, error.to_string())),
                name: file.name,
            }),
        })
        .collect()
}

/// Why a file whose settings do not load is not run: one that sets a strategy's own keys
/// (`strategy:` or `platform:` at the top level) is a strategy with a mistake, refused; any
/// other YAML file in the folder (a technique taxonomy) is not a strategy.
fn not_loaded(text: &str, why: String) -> Skip {
    let strategy_like = text.lines().any(|line| {
        ["strategy:", "platform:"]
            .iter()
            .any(|key| line.starts_with(key))
    });
    if strategy_like {
        Skip::Unloadable(why)
    } else {
        Skip::NotAStrategy(why)
    }
}

/// The vendor `kactors devices` decides for this host, or why there is none.
fn host_platform(python: PathBuf) -> HostPlatform {
    let request = crate::gpus::detect_request(None);
    match select_devices(&request, &HostEnvironment::from_process(python)) {
        Ok(selection) => match selection.platform.vendor() {
            Some(vendor) => HostPlatform::Gpu(vendor),
            None => HostPlatform::NoGpu {
                why: "the detected platform is noop".into(),
            },
        },
        Err(error) => HostPlatform::NoGpu {
            why: error.to_string(),
        },
    }
}

fn say_skipped(strategy: &str, why: &Skip, json: bool) {
    console::err(format_args!(
        "kactors: --strategy all: skipped {strategy}: {why}"
    ));
    if json {
        console::out(serde_json::json!({
            "type": "strategy_skipped",
            "strategy": strategy,
            "reason": why.to_string(),
        }));
    }
}

/// Runs one strategy to its end, counting what the runs before it spent of the budget (dollars)
/// and of max_time (since `started`); answers what became of it and the dollars it spent. A
/// strategy refused before it ran (exit 2) is said and answered, and the others go on.
fn run_one(
    invocation: Invocation,
    parent: &Path,
    json: bool,
    spent_usd: f64,
    started: Instant,
) -> (Ran, f64) {
    let strategy = invocation.strategy.clone();
    let mut run_dir = None;
    let spent = Spent {
        replayed: &[],
        usd: spent_usd,
        time: Duration::ZERO,
    };
    let attempt = Launch::prepare_after(invocation, parent, &spent).and_then(|mut launch| {
        launch.time_spent = started.elapsed();
        let created = match super::create_run_dir(&launch, parent) {
            Ok(created) => created,
            Err(error) => return Err(launch.abandon(error)),
        };
        run_dir = Some(created.root().to_path_buf());
        execute(launch, created, json, None)
    });
    match attempt {
        Ok(exit_code) => {
            let (headline, spent) = run_dir
                .as_deref()
                .and_then(read_run)
                .map_or((None, 0.0), |(headline, spent)| (Some(headline), spent));
            let ran = Ran {
                strategy,
                exit_code,
                run_dir,
                headline,
                refused: None,
            };
            (ran, spent)
        }
        Err(error) => (refused_run(strategy, error.to_string(), run_dir, json), 0.0),
    }
}

/// A strategy refused before it ran (exit 2): said on stderr (and as JSON), and kept for the
/// comparison.
fn refused_run(strategy: String, message: String, run_dir: Option<PathBuf>, json: bool) -> Ran {
    console::err(format_args!("kactors: error: {strategy}: {message}"));
    if json {
        console::out(serde_json::json!({
            "type": "error",
            "strategy": strategy,
            "exit_code": exit::USAGE,
            "message": message,
        }));
    }
    Ran {
        strategy,
        exit_code: exit::USAGE,
        run_dir,
        headline: None,
        refused: Some(message),
    }
}

/// A run's figures and the dollars it spent, from its journal.
pub(in crate::commands) fn read_run(root: &Path) -> Option<(Headline, f64)> {
    let (file, _) = crate::user_file::open_regular(&root.join("journal.jsonl")).ok()?;
    let mut summary = RunSummary::default();
    let mut records = Vec::new();
    read_journal(BufReader::new(file), &mut RunFiles(root), |record| {
        summary.observe(&record);
        records.push(record);
    })
    .ok()?;
    let spent = history(&records).map_or(0.0, |h| h.spent_usd);
    Some((summary.headline(), spent))
}

/// `<run-dir>/all-<timestamp>.md` and `.json`, beside the runs' own folders.
fn write_summary(
    parent: &Path,
    started_at: SystemTime,
    markdown: &str,
    json: &serde_json::Value,
) -> std::io::Result<(PathBuf, PathBuf)> {
    std::fs::create_dir_all(parent)?;
    let stem = format!("all-{}", folder_stamp(started_at));
    let mut suffix = 1;
    let (md, json_path) = loop {
        let name = if suffix == 1 {
            stem.clone()
        } else {
            format!("{stem}-{suffix}")
        };
        let (md, json_path) = (
            parent.join(format!("{name}.md")),
            parent.join(format!("{name}.json")),
        );
        if !md.exists() && !json_path.exists() {
            break (md, json_path);
        }
        suffix += 1;
    };
    std::fs::write(&md, markdown)?;
    let mut text = serde_json::to_string_pretty(json).expect("the comparison serialises");
    text.push('\n');
    std::fs::write(&json_path, text)?;
    Ok((md, json_path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{CliOverrides, StrategyFile, StrategySource, parse_config, resolve};

    fn offered(name: &str, yaml: &str) -> Offered {
        let file = StrategyFile {
            name: name.into(),
            source: StrategySource::File(format!("/cfg/{name}.yaml").into()),
            text: yaml.into(),
        };
        let settings = parse_config(&file.display_name(), yaml)
            .and_then(|config| resolve(&file, &config, &CliOverrides::default()))
            .map_err(|error| not_loaded(yaml, error.to_string()));
        Offered {
            name: name.into(),
            settings,
        }
    }

    /// Each strategy with `run` or the reason it is skipped.
    fn check(host: HostPlatform, strategies: &[(&str, &str)], expected: &[(&str, &str)]) {
        let offered = strategies
            .iter()
            .map(|(name, yaml)| offered(name, yaml))
            .collect();
        let got: Vec<(String, String)> = choose(offered, &host)
            .into_iter()
            .map(|choice| {
                let verdict = match choice.verdict {
                    Ok(_) => "run".to_string(),
                    Err(why) => why.to_string(),
                };
                (choice.strategy, verdict)
            })
            .collect();
        let expected: Vec<(String, String)> = expected
            .iter()
            .map(|(name, verdict)| (name.to_string(), verdict.to_string()))
            .collect();
        assert_eq!(got, expected);
    }

    const BEAM: &str =
        "strategy: beam_search\nnum_workers: 4\nmax_rounds: 5\nmodel: claude-opus-4-5\n";

    fn shipped_like() -> Vec<(&'static str, String)> {
        vec![
            ("amd", format!("platform: rocm\n{BEAM}")),
            ("beam_search", BEAM.to_string()),
            (
                "greedy",
                "strategy: greedy\nnum_workers: 1\nmodel: claude-opus-4-5\n".into(),
            ),
            ("noop", "platform: noop\nprovider: replay\n".into()),
            ("nvidia", format!("platform: nvidia\n{BEAM}")),
        ]
    }

    fn as_refs<'a>(strategies: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
        strategies
            .iter()
            .map(|(name, yaml)| (*name, yaml.as_str()))
            .collect()
    }

    #[test]
    fn on_an_nvidia_host_the_amd_configuration_and_noop_are_skipped_and_nvidia_runs_once() {
        check(
            HostPlatform::Gpu(Vendor::Nvidia),
            &as_refs(&shipped_like()),
            &[
                (
                    "amd",
                    "its platform is rocm, and this host's GPUs are nvidia (as `kactors devices` decides)",
                ),
                ("beam_search", "run"),
                ("greedy", "run"),
                (
                    "noop",
                    "the noop platform only simulates devices, and this host's nvidia GPUs fit",
                ),
                (
                    "nvidia",
                    "it resolves to the same settings as `beam_search`, run before it",
                ),
            ],
        );
    }

    #[test]
    fn on_an_amd_host_the_nvidia_configuration_is_skipped_and_amd_runs_once() {
        check(
            HostPlatform::Gpu(Vendor::Rocm),
            &as_refs(&shipped_like()),
            &[
                ("amd", "run"),
                (
                    "beam_search",
                    "it resolves to the same settings as `amd`, run before it",
                ),
                ("greedy", "run"),
                (
                    "noop",
                    "the noop platform only simulates devices, and this host's rocm GPUs fit",
                ),
                (
                    "nvidia",
                    "its platform is nvidia, and this host's GPUs are rocm (as `kactors devices` decides)",
                ),
            ],
        );
    }

    #[test]
    fn without_a_gpu_only_noop_runs_and_each_gpu_strategy_says_why_not() {
        let host = HostPlatform::NoGpu {
            why: "no GPU visible: nvidia-smi was not found on PATH".into(),
        };
        check(
            host,
            &as_refs(&shipped_like()),
            &[
                (
                    "amd",
                    "its platform is rocm: no GPU visible: nvidia-smi was not found on PATH",
                ),
                (
                    "beam_search",
                    "it runs on the GPUs detected: no GPU visible: nvidia-smi was not found on PATH",
                ),
                (
                    "greedy",
                    "it runs on the GPUs detected: no GPU visible: nvidia-smi was not found on PATH",
                ),
                ("noop", "run"),
                (
                    "nvidia",
                    "its platform is nvidia: no GPU visible: nvidia-smi was not found on PATH",
                ),
            ],
        );
    }

    #[test]
    fn a_file_that_is_not_a_strategy_a_twin_and_a_file_named_all_are_skipped_by_name_and_a_mistyped_strategy_refused()
     {
        let host = HostPlatform::NoGpu { why: "none".into() };
        check(
            host,
            &[
                ("all", "platform: noop\nmax_rounds: 7\n"),
                ("dry", "platform: noop\nmax_rounds: 2\n"),
                (
                    "dry_again",
                    "# the same run, written again\nplatform: noop\nmax_rounds: 2\n",
                ),
                ("longer", "platform: noop\nmax_rounds: 3\n"),
                ("mistyped", "platform: noop\nmax_roundz: 3\n"),
                ("techniques_default", "techniques:\n  - tiling\n"),
            ],
            &[
                (
                    "all",
                    "`all` names every strategy, so a file all.yaml is never run by --strategy all; rename it",
                ),
                ("dry", "run"),
                (
                    "dry_again",
                    "it resolves to the same settings as `dry`, run before it",
                ),
                ("longer", "run"),
                (
                    "mistyped",
                    "refused: /cfg/mistyped.yaml: unknown key `max_roundz`; did you mean `max_rounds`?",
                ),
                (
                    "techniques_default",
                    "not a strategy: /cfg/techniques_default.yaml: not a strategy configuration but a \
                     technique taxonomy (a top-level `techniques` list, which KernelAgent's \
                     technique_clustering reads)",
                ),
            ],
        );
    }

    #[test]
    fn the_worst_exit_code_is_a_refusal_then_a_failure_then_an_interrupt() {
        let check = |codes: &[i32], worst: i32| {
            assert_eq!(worst_exit_code(codes.iter().copied()), worst, "{codes:?}");
        };
        check(&[], 0);
        check(&[0, 0], 0);
        check(&[0, 130], 130);
        check(&[130, 1, 0], 1);
        check(&[1, 2, 130], 2);
        check(&[2, 0], 2);
    }
}
