//! The Collector: the only writer of kactors' records. It stamps every event with the run's
//! clock, appends it to the journal, shows progress, creates each candidate's folder before
//! anything runs in it, rewrites best_kernel.py whenever the best changes, and rewrites
//! report.md and report.html after the first round, then at a round's end once the pause its
//! size asks for has passed (2 ms a candidate, at most a minute), and at the end. Disk work
//! (and the report's rendering) happens on a thread of its own so that no handler blocks; the
//! thread keeps the records in order.
//!
//! Nothing is journaled after `run_finished`: a record that comes later is refused and reported.
//!
//! A run whose records cannot be kept must not go on: the first failed write (a full disk) and
//! the writer thread's death, for whatever reason, reach the Supervisor as `RecordsFailed`.

mod disk;
mod failures;

pub use disk::RemoveCaches;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc;
use std::thread;
use std::time::SystemTime;

use actix::prelude::*;
use tokio::sync::{oneshot, watch};

use crate::journal::{Event, JournalRecord, ReplyFile, whole_millis};
use crate::model::{CandidateId, RankedKernel};
use crate::ports::{Clock, LlmReply, ProgressSink, RunStore};
use crate::report::RunSummary;
use crate::search_state::{Exchange, PendingRequest};
use failures::{FirstError, Reporter};

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

/// Keep an LLM exchange in a candidate's folder: the prompt, the reply and the code it proposes
/// (by attempt, `journal::code_file_name`), each synced to disk, before the reply's record is
/// journaled, which then names the code by its hash. Answers the reply's file and SHA-256.
#[derive(Message)]
#[rtype(result = "Result<ReplyFile, String>")]
pub struct KeepReply {
    pub candidate: CandidateId,
    pub prompt: (String, String),
    pub reply: (String, String),
    pub code: Option<(String, String)>,
}

impl KeepReply {
    /// A reply to keep where its request's exchange says, beside the prompt (its user
    /// message) it answered; its code too, for a request for code that got some.
    pub fn of(exchange: Exchange, prompt: String, reply: &LlmReply) -> Self {
        let code = exchange
            .code
            .zip(reply.code.as_ref())
            .map(|(name, code)| (name, code.text().to_string()));
        KeepReply {
            candidate: exchange.candidate,
            prompt: (exchange.prompt, prompt),
            reply: (exchange.reply, reply.text.clone()),
            code,
        }
    }
}

/// Write a file into an existing candidate folder (results, analyses).
#[derive(Message)]
#[rtype(result = "()")]
pub struct WriteCandidateFile {
    pub candidate: CandidateId,
    pub name: String,
    pub contents: String,
}

/// The best verified kernel changed: best_kernel.py is rewritten at once (write, fsync, rename),
/// so that a run that dies still leaves its best kernel.
#[derive(Message)]
#[rtype(result = "()")]
pub struct BestChanged {
    pub candidate: CandidateId,
    pub time_ms: f64,
    pub source: String,
}

impl BestChanged {
    pub fn of(kernel: &RankedKernel) -> Self {
        BestChanged {
            candidate: kernel.id,
            time_ms: kernel.time_ms,
            source: kernel.source.text().to_string(),
        }
    }
}

/// A reply a resumed run looks for before it asks again: its request's id, and where it would
/// be kept (the candidate's folder and the file's name).
#[derive(Clone, Debug, PartialEq)]
pub struct KeptReplyWanted {
    pub request_id: String,
    pub candidate: CandidateId,
    pub name: String,
}

impl KeptReplyWanted {
    /// The reply of a request the fold found pending, where its exchange keeps it.
    pub fn of(request: &PendingRequest) -> Self {
        let exchange = request.exchange();
        KeptReplyWanted {
            request_id: request.request_id.clone(),
            candidate: exchange.candidate,
            name: exchange.reply,
        }
    }
}

/// Read the replies kept for requests a resumed run finds pending. Answers the text of each
/// one kept, by request id; one that cannot be read is asked again.
#[derive(Message)]
#[rtype(result = "Vec<(String, String)>")]
pub struct ReadKeptReplies(pub Vec<KeptReplyWanted>);

/// A resumed run's records so far: the report, the progress shown and the run's end count them
/// too. Nothing is written.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Seed(pub Vec<JournalRecord>);

/// The last record of a run: journal it, write best_kernel.py, report.md and report.html, then
/// answer.
/// Answers with the first disk error of the run, if there was one. A `run_finished` that names
/// no best kernel gets the best this Collector was told of (after a Manager that died).
#[derive(Message)]
#[rtype(result = "Result<(), String>")]
pub struct FinishRun {
    pub event: Event,
    pub best_source: Option<String>,
}

/// The run directory could not be written (the first failure, with the path and the OS error),
/// or the writer thread died. Sent once, to whoever the Collector was started for.
#[derive(Message, Clone, Debug, PartialEq)]
#[rtype(result = "()")]
pub struct RecordsFailed {
    pub message: String,
}

/// When the report is rewritten besides each round's end and the run's, and what it tells a
/// reader whose run was killed.
#[derive(Clone, Debug, Default)]
pub struct ReportSettings {
    /// In steady search, whose virtual rounds can stay open long after their last candidate was
    /// planned: also once more than this many candidates (N × M) finished since the last
    /// rewrite, so that the report is never more than N × M candidates behind. (A round that
    /// closes on time rewrites it first.)
    pub every: Option<u32>,
    /// `kactors resume <dir>`: how a run killed now would go on.
    pub resume_command: Option<String>,
}

const WRITER_GONE: &str = "the collector's writer thread is gone";

enum Command {
    Append(JournalRecord),
    Prepare(
        CandidateId,
        Vec<(String, String)>,
        oneshot::Sender<Result<PathBuf, String>>,
    ),
    Write(CandidateId, String, String),
    Best(String),
    /// A candidate's caches, with when the Collector was told (the record's time).
    RemoveCaches(CandidateId, SystemTime),
    Seed(Vec<JournalRecord>),
    ReadReplies(Vec<KeptReplyWanted>, oneshot::Sender<Vec<(String, String)>>),
    Folder(
        String,
        Vec<(String, String)>,
        oneshot::Sender<Result<PathBuf, String>>,
    ),
    Finish(
        JournalRecord,
        Option<String>,
        oneshot::Sender<Result<(), String>>,
    ),
}

pub struct Collector {
    clock: Arc<dyn Clock>,
    commands: mpsc::Sender<Command>,
    best: Option<(CandidateId, f64)>,
    /// What stopped the writer thread, published by it, for the answers it can no longer give.
    failure: watch::Receiver<Option<String>>,
}

/// The writer thread's answer to a request; unanswered, what the thread died of, once it has
/// said so (a dying thread drops the request's reply before its last words reach us).
async fn answer_of<T>(
    answer: oneshot::Receiver<Result<T, String>>,
    mut failure: watch::Receiver<Option<String>>,
) -> Result<T, String> {
    if let Ok(answered) = answer.await {
        return answered;
    }
    match failure.wait_for(Option::is_some).await {
        Ok(first) => Err(first.clone().unwrap_or_else(|| WRITER_GONE.into())),
        Err(_) => Err(WRITER_GONE.into()),
    }
}

impl Collector {
    /// Starts the writer thread. `failed` hears of the first write that fails and of the
    /// thread's death.
    pub fn new(
        store: Box<dyn RunStore>,
        progress: Box<dyn ProgressSink>,
        clock: Arc<dyn Clock>,
        reports: ReportSettings,
        failed: Recipient<RecordsFailed>,
    ) -> Self {
        let (commands, receiver) = mpsc::channel();
        let (failure_sender, failure) = watch::channel(None);
        let report = Reporter {
            failed,
            failure: Arc::new(failure_sender),
        };
        let report_start = report.clone();
        let spawned = thread::Builder::new()
            .name("kactors-collector".into())
            .spawn(move || {
                let died = catch_unwind(AssertUnwindSafe(|| {
                    write_records(store, progress, reports, receiver, &report)
                }));
                if let Err(panic) = died {
                    report.failed(format!(
                        "the collector's writer thread died: {}",
                        panic_message(panic.as_ref())
                    ));
                }
            });
        if let Err(error) = spawned {
            // Without the thread nothing can be recorded: the run stops before it starts.
            report_start.failed(format!(
                "failed to start the collector's writer thread: {error}"
            ));
        }
        Collector {
            clock,
            commands,
            best: None,
            failure,
        }
    }

    /// The record of an event, at the millisecond the journal keeps: the report rendered live
    /// is then the report of the journal read back.
    fn stamp(&self, event: Event) -> JournalRecord {
        JournalRecord {
            t: whole_millis(self.clock.now()),
            event,
        }
    }
}

impl Actor for Collector {
    type Context = Context<Self>;
}

/// The least time between two rewrites of the report, per candidate it holds: rendering costs
/// about 10 µs a candidate (the 10,000-candidate soak, issue 24), so 2 ms a candidate keeps
/// rewrites under 1% of the run's time however long it grows, while a young run's report is
/// rewritten at each due point (issue 22).
const REPORT_PAUSE_PER_CANDIDATE: std::time::Duration = std::time::Duration::from_millis(2);
/// The most time between two rewrites that are due: a long run's report is at most a minute
/// behind.
const REPORT_PAUSE_MOST: std::time::Duration = std::time::Duration::from_secs(60);

/// The most commands the writer thread takes before it syncs the journal.
const MOST_PER_SYNC: usize = 512;

/// The writer thread: runs until the Collector is gone. It takes the commands queued so far, at
/// most `MOST_PER_SYNC`, then syncs the journal once (group commit: a sync costs milliseconds,
/// and a busy run makes hundreds of records a second). The first disk error is reported at once
/// through `failed` and again when the run finishes; later writes are still attempted (a freed
/// disk lets the last records through) but not reported again. It keeps the run's summary,
/// record by record, and rewrites the report after the first `round_finished` (in steady
/// search, each N × M candidates), then after one once its pause has passed (2 ms a candidate
/// it holds, at most a minute), and at the end.
fn write_records(
    store: Box<dyn RunStore>,
    progress: Box<dyn ProgressSink>,
    reports: ReportSettings,
    commands: mpsc::Receiver<Command>,
    failed: &Reporter,
) {
    let mut summary = RunSummary::default();
    summary.resume_with(reports.resume_command);
    let mut writer = Writer {
        store,
        progress,
        report_every: reports.every,
        finished_since_report: 0,
        finished_total: 0,
        failed,
        errors: FirstError::default(),
        summary,
        unsynced: false,
        measured_at: None,
        reported_at: None,
        finished: false,
    };
    while let Ok(first) = commands.recv() {
        writer.handle(first);
        for command in commands.try_iter().take(MOST_PER_SYNC) {
            writer.handle(command);
        }
        writer.sync();
    }
}

struct Writer<'a> {
    store: Box<dyn RunStore>,
    progress: Box<dyn ProgressSink>,
    report_every: Option<u32>,
    /// Candidates finished since the report was last rewritten, and in all.
    finished_since_report: u32,
    finished_total: u32,
    failed: &'a Reporter,
    errors: FirstError,
    summary: RunSummary,
    unsynced: bool,
    /// When the run directory was last measured (the time of the record that prompted it).
    measured_at: Option<SystemTime>,
    /// When report.md and report.html were last rewritten at a round's end (its record's time).
    reported_at: Option<SystemTime>,
    /// `run_finished` is journaled: it is the journal's last record, whatever comes after it.
    finished: bool,
}

impl Writer<'_> {
    fn append(&mut self, record: &JournalRecord) {
        if self.finished {
            // Something still working after the end (a bug where it is sent): kept out of the
            // journal, whose readers take `run_finished` as the end, and said in kactors.log.
            tracing::error!(
                "a `{}` record came after run_finished and was not journaled",
                record.to_json()["type"].as_str().unwrap_or("?")
            );
            return;
        }
        self.finished = matches!(record.event, Event::RunFinished { .. });
        let appended = self.store.append(record);
        let _ = self.errors.note(appended, "the journal", self.failed);
        self.unsynced = true;
        self.summary.observe(record);
        self.progress.record(record);
    }

    fn sync(&mut self) {
        if std::mem::take(&mut self.unsynced) {
            let synced = self.store.sync_journal();
            let _ = self.errors.note(synced, "the journal", self.failed);
        }
    }

    fn handle(&mut self, command: Command) {
        match command {
            Command::Append(record) => {
                self.append(&record);
                if let Event::CandidateFinished { candidate, .. } = &record.event
                    && *candidate != CandidateId::INITIAL
                {
                    self.finished_since_report += 1;
                    self.finished_total += 1;
                }
                // A round's end, or in steady search N × M candidates since the last rewrite;
                // paced by what the report holds (a 100,000-candidate run spends a bounded share
                // of its time rendering), and always at the end.
                let due = matches!(record.event, Event::RoundFinished { .. })
                    || self
                        .report_every
                        .is_some_and(|every| self.finished_since_report > every);
                if due && self.report_due(record.t) {
                    self.reported_at = Some(record.t);
                    self.measure_if_due(record.t);
                    self.rewrite_report();
                }
            }
            Command::RemoveCaches(candidate, t) => self.remove_caches(candidate, t),
            Command::Prepare(candidate, files, reply) => {
                let store = &mut self.store;
                let result = store.create_candidate_folder(candidate).and_then(|folder| {
                    for (name, contents) in &files {
                        store.write_candidate_file(candidate, name, contents)?;
                    }
                    Ok(folder)
                });
                let what = format!("the folder of candidate {candidate}");
                let _ = reply.send(self.errors.note(result, &what, self.failed));
            }
            Command::Folder(name, files, reply) => {
                let result = self.store.prepare_folder(&name, &files);
                let what = format!("{name}/");
                let _ = reply.send(self.errors.note(result, &what, self.failed));
            }
            Command::Write(candidate, name, contents) => {
                let result = self.store.write_candidate_file(candidate, &name, &contents);
                let what = format!("{name} of candidate {candidate}");
                let _ = self.errors.note(result, &what, self.failed);
            }
            Command::Seed(records) => {
                for record in &records {
                    self.summary.observe(record);
                }
                self.progress.seed(&records);
            }
            Command::ReadReplies(wanted, reply) => {
                let kept = wanted
                    .into_iter()
                    .filter_map(|wanted| {
                        match self.store.read_kept_reply(wanted.candidate, &wanted.name) {
                            Ok(text) => text.map(|text| (wanted.request_id, text)),
                            Err(error) => {
                                tracing::warn!(
                                    "the reply kept for request {} could not be read, so it is asked again: {error}",
                                    wanted.request_id
                                );
                                None
                            }
                        }
                    })
                    .collect();
                let _ = reply.send(kept);
            }
            Command::Best(source) => {
                let written = self.store.write_best_kernel(&source);
                let _ = self.errors.note(written, "best_kernel.py", self.failed);
            }
            Command::Finish(record, best_source, reply) => {
                self.measure(record.t);
                self.append(&record);
                self.sync();
                if let Some(source) = best_source {
                    let written = self.store.write_best_kernel(&source);
                    let _ = self.errors.note(written, "best_kernel.py", self.failed);
                }
                self.rewrite_report();
                let _ = reply.send(match self.errors.first.take() {
                    Some(error) => Err(error),
                    None => Ok(()),
                });
            }
        }
    }

    /// Whether a due rewrite at `t` happens: the first one does, then one once the pause the
    /// report's size asks for has passed, since rendering costs what the run holds so far (a
    /// long run has thousands of rounds). The end always rewrites it.
    fn report_due(&self, t: SystemTime) -> bool {
        let pause =
            (REPORT_PAUSE_PER_CANDIDATE * self.finished_total.max(1)).min(REPORT_PAUSE_MOST);
        self.reported_at
            .is_none_or(|last| t.duration_since(last).unwrap_or_default() >= pause)
    }

    /// report.md and report.html as the records so far show the run.
    fn rewrite_report(&mut self) {
        self.finished_since_report = 0;
        let report = self.summary.render();
        let written = self.store.write_report(&report.markdown, &report.html);
        let _ = self
            .errors
            .note(written, "report.md and report.html", self.failed);
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|text| text.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
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
        let failure = self.failure.clone();
        let _ = self
            .commands
            .send(Command::Prepare(message.candidate, message.files, reply));
        Box::pin(answer_of(answer, failure))
    }
}

impl Handler<PrepareFolder> for Collector {
    type Result = ResponseFuture<Result<PathBuf, String>>;

    fn handle(&mut self, message: PrepareFolder, _: &mut Context<Self>) -> Self::Result {
        let (reply, answer) = oneshot::channel();
        let failure = self.failure.clone();
        let _ = self
            .commands
            .send(Command::Folder(message.name, message.files, reply));
        Box::pin(answer_of(answer, failure))
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

impl Handler<KeepReply> for Collector {
    type Result = ResponseFuture<Result<ReplyFile, String>>;

    fn handle(&mut self, message: KeepReply, _: &mut Context<Self>) -> Self::Result {
        let (reply, answer) = oneshot::channel();
        let failure = self.failure.clone();
        let file = format!("candidates/{}/{}", message.candidate, message.reply.0);
        let sha256 = crate::journal::sha256_hex(&message.reply.1);
        let files = [message.prompt, message.reply]
            .into_iter()
            .chain(message.code)
            .collect();
        let _ = self
            .commands
            .send(Command::Prepare(message.candidate, files, reply));
        Box::pin(async move {
            answer_of(answer, failure)
                .await
                .map(|_| ReplyFile { file, sha256 })
        })
    }
}

impl Handler<Seed> for Collector {
    type Result = ();

    fn handle(&mut self, message: Seed, _: &mut Context<Self>) {
        let _ = self.commands.send(Command::Seed(message.0));
    }
}

impl Handler<ReadKeptReplies> for Collector {
    type Result = ResponseFuture<Vec<(String, String)>>;

    fn handle(&mut self, message: ReadKeptReplies, _: &mut Context<Self>) -> Self::Result {
        let (reply, answer) = oneshot::channel();
        let _ = self.commands.send(Command::ReadReplies(message.0, reply));
        // Without the writer thread nothing was read: every request is asked again.
        Box::pin(async move { answer.await.unwrap_or_default() })
    }
}

impl Handler<BestChanged> for Collector {
    type Result = ();

    fn handle(&mut self, message: BestChanged, _: &mut Context<Self>) {
        self.best = Some((message.candidate, message.time_ms));
        let _ = self.commands.send(Command::Best(message.source));
    }
}

impl Handler<FinishRun> for Collector {
    type Result = ResponseFuture<Result<(), String>>;

    fn handle(&mut self, message: FinishRun, _: &mut Context<Self>) -> Self::Result {
        let mut event = message.event;
        if let Event::RunFinished {
            best_candidate: best_candidate @ None,
            best_ms,
            ..
        } = &mut event
            && let Some((candidate, time_ms)) = self.best
        {
            *best_candidate = Some(candidate);
            *best_ms = Some(time_ms);
        }
        let record = self.stamp(event);
        let (reply, answer) = oneshot::channel();
        let failure = self.failure.clone();
        let _ = self
            .commands
            .send(Command::Finish(record, message.best_source, reply));
        Box::pin(answer_of(answer, failure))
    }
}
