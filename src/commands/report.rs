//! `kactors report RUN_DIR`: report.md and report.html rebuilt from a run's journal, whether the
//! run finished, was killed or is still going. A journal without `run_finished` gets
//! report.live.md and report.live.html, so that the Collector's own report (rewritten after
//! every round) is never written over.

use std::fs;
use std::io::BufReader;
use std::path::PathBuf;

use actors::journal::{JournalReadError, read_journal};
use actors::report::RunSummary;

use crate::cli::ReportArgs;
use crate::console;
use crate::exit;
use crate::run_dir::{LIVE_REPORT, REPORT, RunFiles, resume_command, write_report_files};

use super::{CommandError, refuse};

/// A folder that has no report to give: exit 2, nothing written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(
        "{} is not a run directory: cannot open its journal.jsonl: {source} (kactors report takes the folder of one run, <run-dir>/<strategy>-<timestamp>/)",
        run_dir.display()
    )]
    NoJournal {
        run_dir: PathBuf,
        source: crate::user_file::UserFileError,
    },
    #[error("{}: {source}", journal.display())]
    Journal {
        journal: PathBuf,
        source: JournalReadError,
    },
}

pub(super) fn report(args: ReportArgs) -> Result<i32, CommandError> {
    let journal = args.run_dir.join("journal.jsonl");
    let (file, _) =
        crate::user_file::open_regular(&journal).map_err(|source| ReportError::NoJournal {
            run_dir: args.run_dir.clone(),
            source,
        })?;
    let resume_command = resume_command(
        &std::path::absolute(&args.run_dir).unwrap_or_else(|_| args.run_dir.clone()),
    );
    let mut summary = RunSummary::default();
    summary.resume_with(Some(resume_command.clone()));
    let mut records = 0_usize;
    let mut code = RunFiles(&args.run_dir);
    let torn = read_journal(BufReader::new(file), &mut code, |record| {
        records += 1;
        summary.observe(&record);
    })
    .map_err(|source| ReportError::Journal {
        journal: journal.clone(),
        source,
    })?;
    if let Some(torn) = torn {
        console::err(format_args!(
            "kactors: warning: {}: line {} is torn ({} bytes and no end: a write the run did not finish, as when it is killed); it is left out",
            journal.display(),
            torn.line,
            torn.bytes
        ));
    }
    let finished = summary.is_finished();
    let names = if finished { REPORT } else { LIVE_REPORT };
    let folder = args.out.unwrap_or(args.run_dir);
    let report = summary.render();
    let written = fs::create_dir_all(&folder)
        .and_then(|()| write_report_files(&folder, names, &report.markdown, &report.html));
    let (markdown, html) = match written {
        Ok(paths) => paths,
        Err(error) => {
            let message = format!(
                "failed to write the report into {}: {error}",
                folder.display()
            );
            return Ok(refuse(&message, exit::RUN_FAILED, args.json));
        }
    };
    if args.json {
        console::out(serde_json::json!({
            "type": "report",
            "finished": finished,
            "markdown": markdown.display().to_string(),
            "html": html.display().to_string(),
            "records": records,
            "torn_line": torn.map(|torn| serde_json::json!({"line": torn.line, "bytes": torn.bytes})),
        }));
    } else {
        if !finished {
            console::err(format_args!(
                "kactors: the journal has no run_finished record (the run is still going, or was killed): the report is {} and {}, never the run's own {} and {}; if it was killed, `{resume_command}` goes on from here",
                names.markdown, names.html, REPORT.markdown, REPORT.html
            ));
        }
        console::out(markdown.display());
        console::out(html.display());
    }
    Ok(exit::SUCCESS)
}
