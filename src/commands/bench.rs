//! `kactors bench`: a batch of problems, each an ordinary kactors run of its own (generation,
//! then a bounded search) in a run directory under the bench's folder, which `kactors report`
//! and `kactors resume` understand as any run. Each run is a `kactors run` child (a `kactors
//! resume` one when the bench goes on), started one after another or several at once, each on
//! its own share of the devices; bench.jsonl records which problems started and how each
//! ended, so `kactors bench --resume DIR` finishes the batch. Each run's results (its exit,
//! best kernel, PyTorch's references) are read from its own records, never measured again.
//!
//! ```text
//! <run-dir>/bench-<UTC time>/
//!   bench.jsonl                  the bench's journal (src/bench/record.rs)
//!   bench.lock                   held by the process working there
//!   problems/<name>/problem.py   a problem file, staged as a kernel directory
//!   logs/<name>.log              the run's stdout and stderr
//!   runs/<name>/<strategy>-<UTC time>/   the problem's run directory
//!   bench.md, bench.json, bench.html
//! ```

use std::collections::{BTreeMap, VecDeque};
use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use tokio::signal::unix::{SignalKind, signal};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::bench::figures::{ProblemResult, Status};
use crate::bench::problems::{Problem, ProblemKind, find_problems};
use crate::bench::record::{
    BENCH_JOURNAL, BENCH_SCHEMA, BenchEvent, BenchHistory, BenchJournal, BenchOutcome, BenchPlan,
    Ending, Start, read_bench_journal,
};
use crate::bench::render::BenchSummary;
use crate::cli::{BenchArgs, ConfigDirArg};
use crate::config::CliOverrides;
use crate::config::ranges::parse_max_time;
use crate::console;
use crate::exit;
use crate::process::pid_lock::{Locked, try_lock};
use crate::process::{ChildEnv, ChildSpec, ProcessGroup, Protocol, RunningChild};

use super::CommandError;
use super::run::read_run;
use super::settings::load_strategy;
use crate::placement::launches_on_slurm;

/// How long a run the bench stopped (its budget, an interrupt) has to end cleanly after its
/// SIGTERM before its group is killed: a run's own shutdown takes kill_grace_s and a few seconds.
const STOP_GRACE: Duration = Duration::from_secs(60);

/// `kactors bench`: a new bench, or `--resume DIR`.
pub(super) fn bench(args: BenchArgs) -> Result<i32, CommandError> {
    let Prepared {
        dir,
        _lock,
        history,
        plan,
        budget,
        slots,
    } = match &args.resume {
        Some(dir) => resumed(dir, args.budget.as_deref())?,
        None => started(&args)?,
    };
    let mut journal = BenchJournal::open(&dir).map_err(|error| write_error(&dir, &error))?;
    let first = if history.is_some() {
        BenchEvent::BenchResumed {
            budget: args.budget.clone(),
        }
    } else {
        BenchEvent::BenchStarted { plan: plan.clone() }
    };
    journal
        .append(SystemTime::now(), first)
        .map_err(|error| write_error(&dir, &error))?;
    console::err(format_args!("kactors: bench directory {}", dir.display()));
    let mut bench = Bench {
        dir,
        plan,
        journal,
        slots,
    };
    let tasks = bench.tasks(history.as_ref())?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| {
            CommandError::Environment(format!("failed to start a runtime: {error}"))
        })?;
    let stopped = runtime.block_on(bench.run(tasks, budget))?;
    bench.finish(stopped)
}

/// A bench ready to run: its folder held, what it was asked, and what a resumed one did.
struct Prepared {
    dir: PathBuf,
    _lock: crate::process::pid_lock::PidLock,
    history: Option<BenchHistory>,
    plan: BenchPlan,
    budget: Option<Budget>,
    slots: Vec<Option<Vec<u32>>>,
}

/// A new bench: the problems found, the flags checked against the strategy, the folder made and
/// the problem files staged in it.
fn started(args: &BenchArgs) -> Result<Prepared, CommandError> {
    let (Some(strategy), Some(problems)) = (&args.strategy, &args.problems) else {
        return Err(CommandError::Usage(
            "kactors bench needs --strategy and --problems, or --resume BENCH_DIR".into(),
        ));
    };
    let budget = parse_budget(args.budget.as_deref())?;
    let problems =
        find_problems(problems).map_err(|error| CommandError::Usage(error.to_string()))?;
    let cwd = std::env::current_dir()
        .map_err(|error| CommandError::Environment(format!("no working folder: {error}")))?;
    let absolute = |path: &Path| cwd.join(path);
    let plan = BenchPlan {
        schema: BENCH_SCHEMA,
        strategy: strategy.clone(),
        config_dir: args.config_dir.config_dir.as_deref().map(&absolute),
        max_rounds: args.max_rounds,
        max_time: args.max_time.clone(),
        budget: args.budget.clone(),
        parallel: args.parallel,
        provider: args.provider.clone(),
        model: args.model.clone(),
        // A bare name is looked up on PATH, as a run does; a path is made absolute.
        python: args.python.as_ref().map(|python| {
            if python.components().count() > 1 {
                absolute(python.as_path())
            } else {
                python.clone()
            }
        }),
        gpus: args.gpus.clone(),
        cwd: cwd.clone(),
        problems,
    };
    // The flags refuse the bench now, as they would refuse every run.
    let settings = load_strategy(&plan_config_dir(&plan), strategy, &overrides(&plan))?.settings;
    let slots = device_slots(&plan)?;
    let dir = new_bench_dir(&cwd.join(&args.run_dir))?;
    for problem in plan.problems.iter().filter(|p| p.kind == ProblemKind::File) {
        let staged = dir.join("problems").join(&problem.name);
        let text = crate::user_file::read_bytes(&problem.source, settings.max_source_bytes)
            .map_err(|error| CommandError::Usage(error.to_string()))?;
        std::fs::create_dir_all(&staged)
            .and_then(|()| std::fs::write(staged.join("problem.py"), text))
            .map_err(|error| write_error(&dir, &error))?;
    }
    Ok(Prepared {
        _lock: hold(&dir)?,
        dir,
        history: None,
        plan,
        budget,
        slots,
    })
}

/// A bench to go on with: its journal read, a budget left.
fn resumed(dir: &Path, budget: Option<&str>) -> Result<Prepared, CommandError> {
    let dir = &std::path::absolute(dir)
        .map_err(|error| CommandError::Usage(format!("{}: {error}", dir.display())))?;
    let lock = hold(dir)?;
    let records = read_bench_journal(dir).map_err(|error| {
        CommandError::Usage(format!(
            "cannot resume the bench {}: {error}",
            dir.display()
        ))
    })?;
    let history = BenchHistory::of(&records).ok_or_else(|| {
        CommandError::Usage(format!("{} holds no bench_started record", dir.display()))
    })?;
    if history.unfinished().is_empty() {
        return Err(CommandError::Usage(format!(
            "the bench {} is over: every problem's run ended; bench.md has the results",
            dir.display()
        )));
    }
    let limit = parse_budget(budget.or(history.budget.as_deref()))?;
    if let Some(limit) = &limit
        && history.time_spent >= limit.left
    {
        return Err(CommandError::Usage(format!(
            "the bench's budget ({}) is spent: {} problem(s) are not finished; give a larger --budget to go on",
            limit.label,
            history.unfinished().len()
        )));
    }
    let left = limit.map(|limit| Budget {
        left: limit.left - history.time_spent,
        label: limit.label,
    });
    let plan = history.plan.clone();
    Ok(Prepared {
        dir: dir.to_path_buf(),
        _lock: lock,
        slots: device_slots(&plan)?,
        history: Some(history),
        plan,
        budget: left,
    })
}

/// The bench's budget: the time left of it, and the budget as written.
struct Budget {
    left: Duration,
    label: String,
}

fn parse_budget(budget: Option<&str>) -> Result<Option<Budget>, CommandError> {
    budget
        .map(|text| {
            parse_max_time(text)
                .map(|left| Budget {
                    left,
                    label: text.to_string(),
                })
                .map_err(|why| CommandError::Usage(format!("--budget {text}: {why}")))
        })
        .transpose()
}

fn hold(dir: &Path) -> Result<crate::process::pid_lock::PidLock, CommandError> {
    match try_lock(&dir.join("bench.lock")) {
        Ok(Locked::Held(lock)) => Ok(lock),
        Ok(Locked::Busy { holder }) => Err(CommandError::Usage(format!(
            "the bench {} is in use by another kactors process ({holder})",
            dir.display()
        ))),
        Err(error) => Err(CommandError::Usage(format!(
            "cannot lock the bench {}: {error}",
            dir.display()
        ))),
    }
}

fn write_error(dir: &Path, error: &std::io::Error) -> CommandError {
    CommandError::Environment(format!(
        "cannot write in the bench {}: {error}",
        dir.display()
    ))
}

/// `<parent>/bench-<UTC time>/`, made new (a suffix where two benches start in one second).
fn new_bench_dir(parent: &Path) -> Result<PathBuf, CommandError> {
    std::fs::create_dir_all(parent).map_err(|error| write_error(parent, &error))?;
    let stem = format!("bench-{}", crate::run_dir::folder_stamp(SystemTime::now()));
    crate::run_dir::create_stamped_folder(parent, &stem)
        .map_err(|error| write_error(parent, &error))
}

fn plan_config_dir(plan: &BenchPlan) -> ConfigDirArg {
    ConfigDirArg {
        config_dir: plan.config_dir.clone(),
    }
}

fn overrides(plan: &BenchPlan) -> CliOverrides {
    CliOverrides {
        max_rounds: plan.max_rounds,
        max_time: plan.max_time.clone(),
        provider: plan.provider.clone(),
        model: plan.model.clone(),
        python: plan.python.clone(),
        generate: true,
        ..CliOverrides::default()
    }
}

/// The devices each of `--parallel N` problems at once gets: the devices a run of the strategy
/// would use, in N contiguous shares, never one device in two shares. One at a time: the
/// strategy's own choice (with `--gpus`, those).
fn device_slots(plan: &BenchPlan) -> Result<Vec<Option<Vec<u32>>>, CommandError> {
    if plan.parallel <= 1 {
        return Ok(vec![plan.gpus.clone()]);
    }
    let settings =
        load_strategy(&plan_config_dir(plan), &plan.strategy, &overrides(plan))?.settings;
    let host = crate::devices::HostEnvironment::from_process(settings.python.clone());
    if launches_on_slurm(&settings, &host)? {
        return Err(CommandError::Usage(
            "--parallel shares this machine's devices; under launcher slurm run the problems one at a time".into(),
        ));
    }
    let selection = crate::devices::select_devices(
        &crate::gpus::device_request(&settings, plan.gpus.clone()),
        &host,
    )?;
    let devices: Vec<u32> = selection.devices.iter().map(|device| device.id).collect();
    share_devices(&devices, plan.parallel as usize)
        .ok_or_else(|| {
            CommandError::Usage(format!(
                "--parallel {} needs a device for each problem running at once, and a run of `{}` has {} ({}); lower --parallel",
                plan.parallel,
                plan.strategy,
                devices.len(),
                if settings.platform == crate::vendor::PlatformRequest::NOOP {
                    "num_workers simulated devices"
                } else {
                    "the devices visible, after --gpus"
                }
            ))
        })
        .map(|shares| shares.into_iter().map(Some).collect())
}

/// `devices` in `n` contiguous shares as even as can be; none when there are fewer than `n`.
fn share_devices(devices: &[u32], n: usize) -> Option<Vec<Vec<u32>>> {
    if n == 0 || devices.len() < n {
        return None;
    }
    Some(
        (0..n)
            .map(|i| devices[i * devices.len() / n..(i + 1) * devices.len() / n].to_vec())
            .collect(),
    )
}

/// One problem's run to start: anew, or resumed in its run directory, on the devices it had.
struct Task {
    problem: Problem,
    resume: Option<PathBuf>,
    devices: Option<Option<Vec<u32>>>,
}

/// Why the bench stopped its runs before they ended.
#[derive(Clone, Debug)]
enum Stop {
    Budget(String),
    Signal(&'static str),
}

impl Stop {
    fn why(&self) -> String {
        match self {
            Stop::Budget(budget) => format!("the bench's budget ({budget}) ran out"),
            Stop::Signal(signal) => format!("the bench was interrupted by {signal}"),
        }
    }
}

struct Bench {
    dir: PathBuf,
    plan: BenchPlan,
    journal: BenchJournal,
    slots: Vec<Option<Vec<u32>>>,
}

/// A run going on: its problem, its slot, its process group.
struct Running {
    problem: Problem,
    slot: usize,
    group: ProcessGroup,
}

impl Bench {
    fn record(&mut self, event: BenchEvent) -> Result<(), CommandError> {
        self.journal
            .append(SystemTime::now(), event)
            .map_err(|error| write_error(&self.dir, &error))
    }

    /// The problems' folder of runs: `--run-dir` of its `kactors run`.
    fn runs_of(&self, problem: &Problem) -> PathBuf {
        self.dir.join("runs").join(&problem.name)
    }

    /// Where the run's stdout and stderr go.
    fn log_of(&self, problem: &Problem) -> PathBuf {
        self.dir.join("logs").join(format!("{}.log", problem.name))
    }

    fn kernel_dir(&self, problem: &Problem) -> PathBuf {
        match problem.kind {
            ProblemKind::File => self.dir.join("problems").join(&problem.name),
            ProblemKind::KernelDir => problem.source.clone(),
        }
    }

    /// The problem's run directory, once its run made one.
    fn run_dir_of(&self, problem: &Problem) -> Option<PathBuf> {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(self.runs_of(problem))
            .ok()?
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .filter(|path| path.join("journal.jsonl").is_file())
            .collect();
        dirs.sort();
        dirs.pop()
    }

    /// What is left to do: every problem of a new bench; of a resumed one, those whose run is
    /// not over. A run that ended before the bench died has its ending read from its journal
    /// and recorded; one that did not is resumed on the devices it had.
    fn tasks(&mut self, history: Option<&BenchHistory>) -> Result<VecDeque<Task>, CommandError> {
        let Some(history) = history else {
            return Ok(self
                .plan
                .problems
                .iter()
                .map(|problem| Task {
                    problem: problem.clone(),
                    resume: None,
                    devices: None,
                })
                .collect());
        };
        let devices_of = devices_started_on(&self.dir);
        let mut tasks = VecDeque::new();
        for problem in history
            .unfinished()
            .into_iter()
            .cloned()
            .collect::<Vec<_>>()
        {
            let Some(run_dir) = self.run_dir_of(&problem) else {
                tasks.push_back(Task {
                    problem,
                    resume: None,
                    devices: None,
                });
                continue;
            };
            let outcome = read_run(&run_dir).and_then(|(headline, _)| headline.outcome);
            match outcome {
                Some((outcome, _)) if outcome != actors::journal::RunOutcome::Interrupted => {
                    self.record(BenchEvent::ProblemFinished {
                        problem: problem.name.clone(),
                        exit_code: Some(exit::of_outcome(outcome)),
                        signal: None,
                        run_dir: Some(run_dir),
                        stopped: None,
                        from_journal: true,
                    })?;
                }
                _ => tasks.push_back(Task {
                    devices: devices_of.get(&problem.name).cloned(),
                    problem,
                    resume: Some(run_dir),
                }),
            }
        }
        Ok(tasks)
    }

    /// The command line of a problem's run.
    fn arguments(&self, task: &Task, devices: &Option<Vec<u32>>) -> Vec<OsString> {
        if let Some(run_dir) = &task.resume {
            return vec!["resume".into(), run_dir.into()];
        }
        let plan = &self.plan;
        let mut args: Vec<OsString> = vec![
            "run".into(),
            "--strategy".into(),
            plan.strategy.clone().into(),
            "--kernel-dir".into(),
            self.kernel_dir(&task.problem).into(),
            "--run-dir".into(),
            self.runs_of(&task.problem).into(),
            "--generate".into(),
        ];
        let mut flag = |name: &str, value: Option<OsString>| {
            if let Some(value) = value {
                args.push(name.into());
                args.push(value);
            }
        };
        flag("--config-dir", plan.config_dir.clone().map(Into::into));
        flag(
            "--max-rounds",
            plan.max_rounds.map(|r| r.to_string().into()),
        );
        flag("--max-time", plan.max_time.clone().map(Into::into));
        flag("--provider", plan.provider.clone().map(Into::into));
        flag("--model", plan.model.clone().map(Into::into));
        flag("--python", plan.python.clone().map(Into::into));
        flag(
            "--gpus",
            devices.as_ref().map(|devices| {
                let ids: Vec<String> = devices.iter().map(u32::to_string).collect();
                ids.join(",").into()
            }),
        );
        args
    }

    /// Starts a problem's run as a child of its own process group, which dies with the bench.
    fn start(&mut self, task: &Task, slot: usize) -> Result<RunningChild, String> {
        let devices = self.slots[slot].clone();
        let runs = self.runs_of(&task.problem);
        let log = self.log_of(&task.problem);
        for folder in [Some(runs.as_path()), log.parent()].into_iter().flatten() {
            std::fs::create_dir_all(folder).map_err(|error| error.to_string())?;
        }
        let program = std::env::current_exe().map_err(|error| error.to_string())?;
        let spec = ChildSpec {
            program,
            args: self.arguments(task, &devices),
            cwd: self.plan.cwd.clone(),
            env: ChildEnv::of_kactors_itself(),
            log_path: log,
            protocol: Protocol::None,
            label: format!("the run of problem {}", task.problem.name),
        };
        crate::process::spawn(&spec).map_err(|error| error.to_string())
    }

    /// The index of the first task that can start now, and the slot it takes: a resumed run
    /// waits for the slot of the devices it had, where there is one.
    fn next(&self, tasks: &VecDeque<Task>, free: &[bool]) -> Option<(usize, usize)> {
        tasks.iter().enumerate().find_map(|(index, task)| {
            let own = task
                .devices
                .as_ref()
                .and_then(|had| self.slots.iter().position(|slot| slot == had));
            match own {
                Some(slot) => free[slot].then_some((index, slot)),
                None => free.iter().position(|f| *f).map(|slot| (index, slot)),
            }
        })
    }

    /// Runs the tasks, as many at once as there are slots, until all ended or the bench
    /// stopped (its budget, a signal): then the runs going on are ended cleanly (SIGTERM: each
    /// journals its interruption, and a resume goes on with it) and nothing more starts.
    async fn run(
        &mut self,
        mut tasks: VecDeque<Task>,
        budget: Option<Budget>,
    ) -> Result<Option<Stop>, CommandError> {
        let signals = signal(SignalKind::interrupt()).and_then(|interrupts| {
            Ok((
                interrupts,
                signal(SignalKind::terminate())?,
                signal(SignalKind::hangup())?,
            ))
        });
        let (mut interrupts, mut terminations, mut hangups) = signals.map_err(|error| {
            CommandError::Environment(format!("failed to install the signal handlers: {error}"))
        })?;
        let budget_end = budget.as_ref().map(|budget| Instant::now() + budget.left);
        let mut free = vec![true; self.slots.len()];
        let mut running: BTreeMap<u64, Running> = BTreeMap::new();
        let mut waits: JoinSet<(u64, std::io::Result<std::process::ExitStatus>, RunningChild)> =
            JoinSet::new();
        let mut stop: Option<Stop> = None;
        let mut kill_at: Option<Instant> = None;
        let mut next_key = 0u64;
        loop {
            while stop.is_none()
                && let Some((index, slot)) = self.next(&tasks, &free)
            {
                let Some(task) = tasks.remove(index) else {
                    break;
                };
                self.record(BenchEvent::ProblemStarted {
                    problem: task.problem.name.clone(),
                    start: if task.resume.is_some() {
                        Start::Resume
                    } else {
                        Start::Run
                    },
                    devices: self.slots[slot].clone(),
                })?;
                console::err(format_args!(
                    "kactors: bench: {} {}{}",
                    task.problem.name,
                    if task.resume.is_some() {
                        "resumed"
                    } else {
                        "started"
                    },
                    self.slots[slot]
                        .as_ref()
                        .map(|devices| format!(" on devices {devices:?}"))
                        .unwrap_or_default()
                ));
                match self.start(&task, slot) {
                    Ok(mut child) => {
                        free[slot] = false;
                        let key = next_key;
                        next_key += 1;
                        running.insert(
                            key,
                            Running {
                                problem: task.problem,
                                slot,
                                group: child.group(),
                            },
                        );
                        waits.spawn(async move {
                            let status = child.wait().await;
                            (key, status, child)
                        });
                    }
                    Err(why) => self.ended(
                        &task.problem,
                        None,
                        Some(format!("kactors could not be started: {why}")),
                    )?,
                }
            }
            if running.is_empty() {
                return Ok(stop);
            }
            let stopping =
                |stop: &mut Option<Stop>, why: Stop, running: &BTreeMap<u64, Running>| {
                    if stop.is_none() {
                        console::err(format_args!(
                            "kactors: bench: {}; ending the runs going on",
                            why.why()
                        ));
                        *stop = Some(why);
                    }
                    for run in running.values() {
                        let _ = run.group.terminate();
                    }
                };
            tokio::select! {
                Some(joined) = waits.join_next() => {
                    let Ok((key, status, child)) = joined else {
                        continue;
                    };
                    let Some(run) = running.remove(&key) else {
                        continue;
                    };
                    free[run.slot] = true;
                    let stopped = stop.as_ref().map(Stop::why);
                    self.ended(&run.problem, status.ok(), stopped)?;
                    // Its leader reaped only now, after the last signal that could reach its group.
                    drop(child);
                }
                Some(()) = interrupts.recv() => {
                    stopping(&mut stop, Stop::Signal("SIGINT"), &running);
                    kill_at.get_or_insert(Instant::now() + STOP_GRACE);
                }
                Some(()) = terminations.recv() => {
                    stopping(&mut stop, Stop::Signal("SIGTERM"), &running);
                    kill_at.get_or_insert(Instant::now() + STOP_GRACE);
                }
                Some(()) = hangups.recv() => {}
                () = sleep_until(budget_end), if budget_end.is_some() && stop.is_none() => {
                    let label = budget.as_ref().map(|b| b.label.clone()).unwrap_or_default();
                    stopping(&mut stop, Stop::Budget(label), &running);
                    kill_at = Some(Instant::now() + STOP_GRACE);
                }
                () = sleep_until(kill_at), if kill_at.is_some() => {
                    for run in running.values() {
                        let _ = run.group.kill();
                    }
                    kill_at = None;
                }
            }
        }
    }

    /// A run ended: its exit recorded, and said.
    fn ended(
        &mut self,
        problem: &Problem,
        status: Option<std::process::ExitStatus>,
        stopped: Option<String>,
    ) -> Result<(), CommandError> {
        let exit_code = status.and_then(|status| status.code());
        let signal = status.and_then(|status| status.signal());
        // A run that ended by itself while the bench was stopping is over all the same.
        let stopped = stopped.filter(|_| exit_code == Some(exit::INTERRUPTED) || signal.is_some());
        let run_dir = self.run_dir_of(problem);
        self.record(BenchEvent::ProblemFinished {
            problem: problem.name.clone(),
            exit_code,
            signal,
            run_dir: run_dir.clone(),
            stopped: stopped.clone(),
            from_journal: false,
        })?;
        let how = match (exit_code, signal, &stopped) {
            (_, _, Some(why)) => format!("not finished: {why}"),
            (Some(code), _, None) => format!("exit {code}"),
            (None, Some(signal), None) => format!("killed by signal {signal}"),
            (None, None, None) => "ended without an exit code".into(),
        };
        console::err(format_args!(
            "kactors: bench: {} ended ({how}){}",
            problem.name,
            run_dir
                .map(|dir| format!("; run directory {}", dir.display()))
                .unwrap_or_default()
        ));
        Ok(())
    }

    /// The bench's end: recorded, and its files written from the records.
    fn finish(mut self, stopped: Option<Stop>) -> Result<i32, CommandError> {
        let (outcome, reason) = match &stopped {
            Some(stop @ Stop::Signal(_)) => (BenchOutcome::Interrupted, stop.why()),
            Some(stop @ Stop::Budget(_)) => (BenchOutcome::Completed, stop.why()),
            None => (
                BenchOutcome::Completed,
                "every problem's run ended".to_string(),
            ),
        };
        self.record(BenchEvent::BenchFinished {
            outcome,
            reason: reason.clone(),
        })?;
        let records = read_bench_journal(&self.dir)
            .map_err(|error| CommandError::Environment(error.to_string()))?;
        let history = BenchHistory::of(&records).ok_or_else(|| {
            CommandError::Environment(format!("{}: no bench_started record", BENCH_JOURNAL))
        })?;
        let results: Vec<ProblemResult> = self
            .plan
            .problems
            .iter()
            .map(|problem| self.result(problem, history.endings.get(&problem.name), &reason))
            .collect();
        let summary = BenchSummary {
            strategy: &self.plan.strategy,
            outcome,
            reason: &reason,
            dir: &self.dir,
            results: &results,
        };
        let files = summary.render();
        let mut json = serde_json::to_string_pretty(&files.json).expect("bench.json serialises");
        json.push('\n');
        let written = [
            ("bench.md", files.markdown.as_str()),
            ("bench.json", json.as_str()),
            ("bench.html", files.html.as_str()),
        ]
        .into_iter()
        .try_for_each(|(name, text)| std::fs::write(self.dir.join(name), text));
        if let Err(error) = written {
            console::err(format_args!(
                "kactors: error: the bench's files could not be written in {}: {error}",
                self.dir.display()
            ));
            return Ok(exit::RUN_FAILED);
        }
        for line in files.markdown.lines().skip(2) {
            console::err(line);
        }
        for name in ["bench.md", "bench.json", "bench.html"] {
            console::out(self.dir.join(name).display());
        }
        if outcome == BenchOutcome::Interrupted {
            console::err(format_args!(
                "kactors: bench interrupted; to go on: kactors bench --resume {}",
                self.dir.display()
            ));
            return Ok(exit::INTERRUPTED);
        }
        Ok(exit::SUCCESS)
    }

    fn result(
        &self,
        problem: &Problem,
        ending: Option<&Ending>,
        stop_reason: &str,
    ) -> ProblemResult {
        let run_dir = ending
            .and_then(|ending| ending.run_dir.clone())
            .or_else(|| self.run_dir_of(problem));
        let status = match ending {
            None => Status::NotStarted {
                why: stop_reason.to_string(),
            },
            Some(ending) if ending.is_final() => Status::Ended {
                exit_code: ending.exit_code.unwrap_or_default(),
            },
            Some(ending) => Status::NotFinished {
                why: match (&ending.stopped, ending.exit_code, ending.signal) {
                    (Some(why), _, _) => why.clone(),
                    (None, Some(exit::INTERRUPTED), _) => "its run was interrupted".into(),
                    (None, Some(code), _) => format!("its run exited with {code}"),
                    (None, None, Some(signal)) => format!("its run was killed by signal {signal}"),
                    (None, None, None) => "its run ended without an exit code".into(),
                },
            },
        };
        ProblemResult {
            error: last_error(&self.log_of(problem)),
            name: problem.name.clone(),
            status,
            headline: run_dir
                .as_deref()
                .and_then(read_run)
                .map(|(headline, _)| headline),
            run_dir,
        }
    }
}

/// The most bytes of a run's output read for its last error line.
const MAX_LOG_BYTES: u64 = 16 << 20;

/// The last `kactors: error: …` line of a run's output, without the prefix.
fn last_error(log: &Path) -> Option<String> {
    let bytes = crate::user_file::read_bytes(log, MAX_LOG_BYTES).ok()?;
    String::from_utf8_lossy(&bytes)
        .lines()
        .rev()
        .find_map(|line| line.strip_prefix("kactors: error: "))
        .map(str::to_string)
}

/// Each problem's devices as its latest `problem_started` gave them.
fn devices_started_on(dir: &Path) -> BTreeMap<String, Option<Vec<u32>>> {
    let mut devices = BTreeMap::new();
    for record in read_bench_journal(dir).unwrap_or_default() {
        if let BenchEvent::ProblemStarted {
            problem,
            devices: on,
            ..
        } = record.event
        {
            devices.insert(problem, on);
        }
    }
    devices
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_devices_are_shared_out_in_contiguous_disjoint_shares() {
        assert_eq!(
            share_devices(&[0, 1, 2, 3], 2),
            Some(vec![vec![0, 1], vec![2, 3]])
        );
        assert_eq!(
            share_devices(&[0, 1, 2, 3, 4], 2),
            Some(vec![vec![0, 1], vec![2, 3, 4]])
        );
        assert_eq!(
            share_devices(&[4, 7, 9], 3),
            Some(vec![vec![4], vec![7], vec![9]])
        );
        assert_eq!(share_devices(&[0], 2), None);
    }
}
