//! The Collector: the only writer of kactors' records. It stamps every event with the run's
//! clock, appends it to the journal, shows progress, creates each candidate's folder before
//! anything runs in it, and writes best_kernel.py and report.md at the end. Disk work happens on
//! a thread of its own so that no handler blocks; the thread keeps the records in order.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc;
use std::thread;

use actix::prelude::*;
use tokio::sync::oneshot;

use crate::journal::{Event, JournalRecord};
use crate::model::CandidateId;
use crate::ports::{Clock, ProgressSink, RunStore};
use crate::report::RunSummary;

/// Journal an event.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Record(pub Event);

/// Create a candidate's folder and write its files (kernel.py, prompt, reply) before it runs.
#[derive(Message)]
#[rtype(result = "Result<PathBuf, String>")]
pub struct PrepareCandidate {
    pub candidate: CandidateId,
    pub files: Vec<(String, String)>,
}

/// Make `<run>/<name>/` with these files; answers its path.
#[derive(Message)]
#[rtype(result = "Result<PathBuf, String>")]
pub struct PrepareFolder {
    pub name: String,
    pub files: Vec<(String, String)>,
}

/// Write a file into an existing candidate folder (results, analyses).
#[derive(Message)]
#[rtype(result = "()")]
pub struct WriteCandidateFile {
    pub candidate: CandidateId,
    pub name: String,
    pub contents: String,
}

/// The last record of a run: journal it, write best_kernel.py and report.md, then answer.
/// Answers with the first disk error of the run, if there was one.
#[derive(Message)]
#[rtype(result = "Result<(), String>")]
pub struct FinishRun {
    pub event: Event,
    pub best_source: Option<String>,
}

enum Command {
    Append(JournalRecord),
    Prepare(
        CandidateId,
        Vec<(String, String)>,
        oneshot::Sender<Result<PathBuf, String>>,
    ),
    Write(CandidateId, String, String),
    Folder(
        String,
        Vec<(String, String)>,
        oneshot::Sender<Result<PathBuf, String>>,
    ),
    Finish(
        JournalRecord,
        Option<String>,
        String,
        oneshot::Sender<Result<(), String>>,
    ),
}

pub struct Collector {
    clock: Arc<dyn Clock>,
    summary: RunSummary,
    commands: mpsc::Sender<Command>,
}

impl Collector {
    pub fn new(
        store: Box<dyn RunStore>,
        progress: Box<dyn ProgressSink>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let (commands, receiver) = mpsc::channel();
        thread::Builder::new()
            .name("kactors-collector".into())
            .spawn(move || write_records(store, progress, receiver))
            .expect("the collector's writer thread starts");
        Collector {
            clock,
            summary: RunSummary::default(),
            commands,
        }
    }

    fn stamp(&mut self, event: Event) -> JournalRecord {
        let record = JournalRecord {
            t: self.clock.now(),
            event,
        };
        self.summary.observe(&record);
        record
    }
}

impl Actor for Collector {
    type Context = Context<Self>;
}

/// The writer thread: runs until the Collector is gone. The first disk error is remembered and
/// reported when the run finishes; later records are still attempted.
fn write_records(
    mut store: Box<dyn RunStore>,
    mut progress: Box<dyn ProgressSink>,
    commands: mpsc::Receiver<Command>,
) {
    let mut first_error: Option<String> = None;
    for command in commands {
        match command {
            Command::Append(record) => {
                remember(store.append(&record), "the journal", &mut first_error);
                progress.record(&record);
            }
            Command::Prepare(candidate, files, reply) => {
                let result = store.create_candidate_folder(candidate).and_then(|folder| {
                    for (name, contents) in &files {
                        store.write_candidate_file(candidate, name, contents)?;
                    }
                    Ok(folder)
                });
                let _ = reply.send(result.map_err(|error| {
                    format!("failed to prepare the folder of candidate {candidate}: {error}")
                }));
            }
            Command::Folder(name, files, reply) => {
                let result = store
                    .prepare_folder(&name, &files)
                    .map_err(|error| format!("failed to prepare {name}/: {error}"));
                let _ = reply.send(result);
            }
            Command::Write(candidate, name, contents) => {
                let result = store.write_candidate_file(candidate, &name, &contents);
                remember(
                    result,
                    &format!("{name} of candidate {candidate}"),
                    &mut first_error,
                );
            }
            Command::Finish(record, best_source, report, reply) => {
                remember(store.append(&record), "the journal", &mut first_error);
                progress.record(&record);
                if let Some(source) = best_source {
                    remember(
                        store.write_best_kernel(&source),
                        "best_kernel.py",
                        &mut first_error,
                    );
                }
                remember(store.write_report(&report), "report.md", &mut first_error);
                let _ = reply.send(match first_error.take() {
                    Some(error) => Err(error),
                    None => Ok(()),
                });
            }
        }
    }
}

fn remember(result: std::io::Result<()>, what: &str, first_error: &mut Option<String>) {
    if let Err(error) = result {
        tracing::error!("failed to write {what}: {error}");
        first_error.get_or_insert_with(|| format!("failed to write {what}: {error}"));
    }
}

impl Handler<Record> for Collector {
    type Result = ();

    fn handle(&mut self, message: Record, _: &mut Context<Self>) {
        let record = self.stamp(message.0);
        let _ = self.commands.send(Command::Append(record));
    }
}

impl Handler<PrepareCandidate> for Collector {
    type Result = ResponseFuture<Result<PathBuf, String>>;

    fn handle(&mut self, message: PrepareCandidate, _: &mut Context<Self>) -> Self::Result {
        let (reply, answer) = oneshot::channel();
        let _ = self
            .commands
            .send(Command::Prepare(message.candidate, message.files, reply));
        Box::pin(async move {
            answer
                .await
                .unwrap_or_else(|_| Err("the collector's writer thread is gone".into()))
        })
    }
}

impl Handler<PrepareFolder> for Collector {
    type Result = ResponseFuture<Result<PathBuf, String>>;

    fn handle(&mut self, message: PrepareFolder, _: &mut Context<Self>) -> Self::Result {
        let (reply, answer) = oneshot::channel();
        let _ = self
            .commands
            .send(Command::Folder(message.name, message.files, reply));
        Box::pin(async move {
            answer
                .await
                .unwrap_or_else(|_| Err("the collector's writer thread is gone".into()))
        })
    }
}

impl Handler<WriteCandidateFile> for Collector {
    type Result = ();

    fn handle(&mut self, message: WriteCandidateFile, _: &mut Context<Self>) {
        let _ = self.commands.send(Command::Write(
            message.candidate,
            message.name,
            message.contents,
        ));
    }
}

impl Handler<FinishRun> for Collector {
    type Result = ResponseFuture<Result<(), String>>;

    fn handle(&mut self, message: FinishRun, _: &mut Context<Self>) -> Self::Result {
        let record = self.stamp(message.event);
        let report = self.summary.render_markdown();
        let (reply, answer) = oneshot::channel();
        let _ = self
            .commands
            .send(Command::Finish(record, message.best_source, report, reply));
        Box::pin(async move {
            answer
                .await
                .unwrap_or_else(|_| Err("the collector's writer thread is gone".into()))
        })
    }
}
