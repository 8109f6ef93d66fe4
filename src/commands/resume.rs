//! `kactors resume RUN_DIR`: goes on with a run a kill, a signal or a full disk ended. The run
//! directory is held first (a second run or resume on it is refused), then the journal is read
//! (a torn last line cut off), the invocation in run.yaml resolved again and compared with what
//! the run started with, the children the dead process left ended, and the search goes on from
//! the journal's fold.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::time::SystemTime;

use actors::journal::{
    DeviceDescription, Event, JournalRecord, MAX_LINE_BYTES, OLDEST_RESUMABLE_VERSION,
    SCHEMA_VERSION, TornLine, history, read_journal,
};
use actors::search_state::Resume;

use crate::cli::ResumeArgs;
use crate::console;
use crate::run_dir::{RunDirectory, RunFiles};
use crate::user_file::open_regular;

use super::CommandError;
use super::run::{KernelFingerprint, Launch, RecordedRun, execute, settings_changes};

/// The journal's whole records, and its torn last line if the process died writing it.
fn read_records(root: &Path) -> Result<(Vec<JournalRecord>, Option<TornLine>, u64), CommandError> {
    let path = root.join("journal.jsonl");
    let unreadable = |why: String| {
        CommandError::Environment(format!("cannot resume from {}: {why}", path.display()))
    };
    let (file, metadata) = open_regular(&path).map_err(|error| unreadable(error.to_string()))?;
    let length = metadata.len();
    let mut records = Vec::new();
    let torn = read_journal(BufReader::new(file), &mut RunFiles(root), |record| {
        records.push(record)
    })
    .map_err(|error| unreadable(error.to_string()))?;
    let whole_bytes = length.saturating_sub(torn.map_or(0, |torn| torn.bytes as u64));
    let version = first_version(&path).map_err(|error| unreadable(error.to_string()))?;
    if version.is_some_and(|version| version < u64::from(OLDEST_RESUMABLE_VERSION)) {
        return Err(CommandError::Environment(format!(
            "cannot resume {}: its journal is of schema version {}, which kactors reads for reports \
             but cannot rebuild a search from (resume needs version {OLDEST_RESUMABLE_VERSION} to \
             {SCHEMA_VERSION}); `kactors report` still reads it, and a new run is the way on",
            root.display(),
            version.unwrap_or_default(),
        )));
    }
    Ok((records, torn, whole_bytes))
}

/// The schema version (`v`) of the journal's first record, which the run's first process wrote.
fn first_version(path: &Path) -> Result<Option<u64>, String> {
    let (file, _) = open_regular(path).map_err(|error| error.to_string())?;
    let mut first = Vec::new();
    BufReader::new(file)
        .take(MAX_LINE_BYTES + 1)
        .read_until(b'\n', &mut first)
        .map_err(|error| error.to_string())?;
    Ok(serde_json::from_slice::<serde_json::Value>(&first)
        .ok()
        .and_then(|record| record["v"].as_u64()))
}

/// A device as a resume compares it: its id, where it is (`n2:1` under Slurm) and its UUID.
type DevicePlace = (u32, String, Option<String>);

fn devices_by_place(devices: &[DeviceDescription]) -> Vec<DevicePlace> {
    devices
        .iter()
        .map(|device| (device.device.0, device.location(), device.uuid.clone()))
        .collect()
}

/// The devices `run_started` names, by id, place and UUID: a resume must run on the same ones,
/// since the journal's candidates are placed on them (their agents' steps are new).
fn recorded_devices(records: &[JournalRecord]) -> Vec<DevicePlace> {
    records
        .iter()
        .find_map(|record| match &record.event {
            Event::RunStarted { devices, .. } => Some(devices_by_place(devices)),
            _ => None,
        })
        .unwrap_or_default()
}

/// What changed since the run started (settings, kernel files), which `--force` lets a resume
/// go on with; a resume on other devices, or with changes and no `--force`, is refused.
fn changes_since_the_start(
    launch: &Launch,
    records: &[JournalRecord],
    recorded: &RecordedRun,
    root: &Path,
    force: bool,
) -> Result<Vec<String>, CommandError> {
    let now_devices = devices_by_place(&launch.placement.describe());
    let was_devices = recorded_devices(records);
    if now_devices != was_devices {
        return Err(CommandError::Environment(format!(
            "cannot resume {}: it ran on devices {was_devices:?} and would now run on {now_devices:?}; a resume needs the same devices (check --gpus and CUDA_VISIBLE_DEVICES or HIP_VISIBLE_DEVICES)",
            root.display()
        )));
    }
    let now_settings = serde_yaml::to_value(&launch.settings).map_err(|error| {
        CommandError::Environment(format!("failed to compare the settings: {error}"))
    })?;
    let mut changes = settings_changes(&recorded.settings, &now_settings);
    changes.extend(KernelFingerprint::of(&launch.kernel.root).changes_since(&recorded.kernel));
    if !changes.is_empty() {
        if !force {
            return Err(CommandError::Environment(format!(
                "cannot resume {}: it changed since the run started: {}; resume with --force to go on with what is there now",
                root.display(),
                changes.join("; ")
            )));
        }
        console::err(format_args!(
            "kactors: warning: resuming with --force although it changed since the run started: {}",
            changes.join("; ")
        ));
    }
    Ok(changes)
}

pub(super) fn resume(args: ResumeArgs) -> Result<i32, CommandError> {
    if args
        .run_dir
        .join(crate::bench::record::BENCH_JOURNAL)
        .is_file()
    {
        return Err(CommandError::Usage(format!(
            "{} is a bench's folder, not a run's: go on with `kactors bench --resume {}`",
            args.run_dir.display(),
            args.run_dir.display()
        )));
    }
    let (root, lock) = RunDirectory::hold(&args.run_dir)?;
    let recorded = RecordedRun::read(&root)?;
    let (records, torn, whole_bytes) = read_records(&root)?;
    let history = history(&records).ok_or_else(|| {
        CommandError::Environment(format!(
            "cannot resume {}: its journal has no record",
            root.display()
        ))
    })?;
    history.resumable().map_err(|why| {
        CommandError::Environment(format!(
            "cannot resume {}: {why} (`kactors report {}` shows it)",
            root.display(),
            root.display()
        ))
    })?;

    recorded.invocation.enter_working_dir()?;
    let run_parent = root.parent().unwrap_or(&root);
    let launch = Launch::prepare(recorded.invocation.clone(), run_parent, Some(&history))?;
    let changes = match changes_since_the_start(&launch, &records, &recorded, &root, args.force) {
        Ok(changes) => changes,
        Err(error) => return Err(launch.abandon(error)),
    };

    let orphans_ended = crate::process::end_orphans_of_run(
        &root,
        std::time::Duration::from_secs_f64(launch.settings.kill_grace_s),
    );
    if orphans_ended > 0 {
        console::err(format_args!(
            "kactors: ended {orphans_ended} process group(s) the previous process left running"
        ));
    }
    if let Some(torn) = torn {
        console::err(format_args!(
            "kactors: the journal's last line (line {}, {} bytes) was cut short by the previous process's death and is left out",
            torn.line, torn.bytes
        ));
    }
    let gap_s = SystemTime::now()
        .duration_since(history.last_record_at)
        .map_or(0.0, |gap| gap.as_secs_f64());
    console::err(format_args!(
        "kactors: resuming {}: the previous process ended ({}) {}; it had searched for {}",
        root.display(),
        history.previous_end,
        humantime::format_duration(std::time::Duration::from_secs(gap_s as u64)).to_string()
            + " ago",
        humantime::format_duration(std::time::Duration::from_secs(history.time_spent.as_secs())),
    ));
    let run_dir = match RunDirectory::reopen(&root, whole_bytes, lock) {
        Ok(run_dir) => run_dir,
        Err(error) => return Err(launch.abandon(error.into())),
    };
    execute(
        launch,
        run_dir,
        args.json,
        Some(Resume {
            records,
            in_flight_at_two_deaths: history.in_flight_at_two_deaths,
            previous_end: history.previous_end,
            gap_s,
            orphans_ended,
            torn_line: torn.is_some(),
            forced_changes: changes,
        }),
    )
}
