//! The replay LLM provider: offline answers from files. Each request for code (a seed of
//! generation, a refinement, an optimization) gets the next
//! Python file of the replay folder in name order, in the order the requests are sent (so the
//! same request gets the same file however the replies arrive, and a resumed run hands out
//! the files as the run left alone would), after a configured latency; after the last file it
//! answers "exhausted". A bottleneck analysis gets "no analysis available" and a
//! reflexion an empty text. A missing or empty folder is exhausted from the start: the run
//! evaluates the initial kernel and ends, with a warning that says how to add candidates.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use actors::model::KernelSource;
use actors::ports::{LlmError, LlmProvider, LlmReply, LlmRequest, LocalFuture, RequestKind};

use crate::user_file::read_text;

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("failed to read the replay folder {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

pub struct ReplayProvider {
    files: Vec<PathBuf>,
    /// The file index each request for code got, by request id.
    assigned: RefCell<HashMap<String, usize>>,
    next: Cell<usize>,
    latency: Duration,
    /// The most bytes read of one file (max_source_bytes).
    max_bytes: u64,
    warning: Option<String>,
}

impl ReplayProvider {
    pub fn from_dir(dir: &Path, latency: Duration) -> Result<Self, ReplayError> {
        let read_error = |source| ReplayError::Read {
            path: dir.to_path_buf(),
            source,
        };
        let mut files = Vec::new();
        let missing = match std::fs::read_dir(dir) {
            Ok(entries) => {
                for entry in entries {
                    let path = entry.map_err(read_error)?.path();
                    if path.is_file() && path.extension().is_some_and(|ext| ext == "py") {
                        files.push(path);
                    }
                }
                None
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Some("does not exist"),
            Err(error) => return Err(read_error(error)),
        };
        let why = missing.or(files.is_empty().then_some("has no .py files"));
        let warning = why.map(|why| {
            format!(
                "the replay folder {0} {why}: the replay provider has no candidates, so the run \
                 evaluates the initial kernel and ends; put .py files defining kernel_function \
                 in {0}, or set replay_dir",
                dir.display()
            )
        });
        files.sort();
        Ok(ReplayProvider {
            files,
            assigned: RefCell::new(HashMap::new()),
            next: Cell::new(0),
            latency,
            max_bytes: *crate::config::ranges::MAX_SOURCE_BYTES.end(),
            warning,
        })
    }

    /// Reads at most `max_bytes` of each file: a larger one fails its request.
    pub fn reading_at_most(mut self, max_bytes: u64) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    /// What the person starting the run should know: the folder is missing or empty.
    pub fn warning(&self) -> Option<&str> {
        self.warning.as_deref()
    }

    /// A resumed run: the requests for code its journal records, in the order they were sent,
    /// had the first files; a request sent again gets its file again.
    pub fn continuing_after(self, code_requests: &[String]) -> Self {
        for request_id in code_requests {
            self.file_index(request_id);
        }
        self
    }

    fn file_index(&self, request_id: &str) -> usize {
        *self
            .assigned
            .borrow_mut()
            .entry(request_id.to_string())
            .or_insert_with(|| {
                let index = self.next.get();
                self.next.set(index + 1);
                index
            })
    }
}

fn text_reply(text: &str) -> LlmReply {
    LlmReply {
        text: text.to_string(),
        code: None,
        truncated: false,
        usage: None,
        cost_usd: None,
    }
}

impl LlmProvider for ReplayProvider {
    /// A replayed reply keeps its file's code in a fenced block, which a kept one is read from.
    fn kept_reply(&self, text: String) -> LlmReply {
        crate::llm::kept_reply(text)
    }

    fn complete(
        self: Rc<Self>,
        request: LlmRequest,
    ) -> LocalFuture<'static, Result<LlmReply, LlmError>> {
        let file = match request.kind {
            RequestKind::Optimize | RequestKind::Seed | RequestKind::Refine => Some(
                self.files
                    .get(self.file_index(&request.request_id))
                    .cloned(),
            ),
            RequestKind::Analysis | RequestKind::Reflexion => None,
        };
        Box::pin(async move {
            tokio::time::sleep(self.latency).await;
            match (request.kind, file) {
                (RequestKind::Analysis, _) => Ok(text_reply("no analysis available")),
                (RequestKind::Reflexion, _) => Ok(text_reply("")),
                (RequestKind::Optimize | RequestKind::Seed | RequestKind::Refine, file) => {
                    let file = file.flatten().ok_or(LlmError::Exhausted)?;
                    let (path, limit) = (file.clone(), self.max_bytes);
                    // The bounded reader blocks (briefly: it refuses what is not a regular file
                    // before reading), so off the actors' thread.
                    let read = tokio::task::spawn_blocking(move || read_text(&path, limit)).await;
                    let code = match read {
                        Ok(Ok(code)) => code,
                        Ok(Err(error)) => {
                            return Err(LlmError::Failed(format!("replay file: {error}")));
                        }
                        Err(error) => {
                            return Err(LlmError::Failed(format!(
                                "failed to read replay file {}: {error}",
                                file.display()
                            )));
                        }
                    };
                    let name = file
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    Ok(LlmReply {
                        text: format!("Replayed from {name}.\n\n```python\n{code}```\n"),
                        code: Some(KernelSource::new(code)),
                        truncated: false,
                        usage: None,
                        cost_usd: None,
                    })
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    fn request(kind: RequestKind) -> LlmRequest {
        asking(
            kind,
            &format!("{kind:?}-{}", NEXT_ID.fetch_add(1, Ordering::Relaxed)),
        )
    }

    static NEXT_ID: AtomicUsize = AtomicUsize::new(0);

    fn asking(kind: RequestKind, request_id: &str) -> LlmRequest {
        LlmRequest {
            request_id: request_id.into(),
            kind,
            candidate: actors::model::CandidateId(1),
            round: 1,
            system: String::new(),
            prompt: String::new(),
            model: None,
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn answers_in_name_order_then_exhausted() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("02_b.py"),
            "def kernel_function(): return 2\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("01_a.py"),
            "def kernel_function(): return 1\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("notes.txt"), "not a candidate").unwrap();
        let provider = Rc::new(ReplayProvider::from_dir(dir.path(), Duration::ZERO).unwrap());
        let first = provider
            .clone()
            .complete(request(RequestKind::Optimize))
            .await
            .unwrap();
        assert_eq!(
            first.code.unwrap().text(),
            "def kernel_function(): return 1\n"
        );
        let analysis = provider
            .clone()
            .complete(request(RequestKind::Analysis))
            .await
            .unwrap();
        assert_eq!(analysis.text, "no analysis available");
        let second = provider
            .clone()
            .complete(request(RequestKind::Refine))
            .await
            .unwrap();
        assert_eq!(
            second.code.unwrap().text(),
            "def kernel_function(): return 2\n"
        );
        assert_eq!(
            provider
                .clone()
                .complete(request(RequestKind::Optimize))
                .await,
            Err(LlmError::Exhausted)
        );
        assert_eq!(
            provider
                .complete(request(RequestKind::Reflexion))
                .await
                .unwrap()
                .text,
            ""
        );
    }

    fn code_of(reply: Result<LlmReply, LlmError>) -> String {
        reply.unwrap().code.unwrap().text().to_string()
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_request_keeps_its_file_and_a_resumed_provider_goes_on_after_the_journal() {
        let dir = tempfile::tempdir().unwrap();
        for k in 0..4 {
            std::fs::write(dir.path().join(format!("{k}.py")), format!("# {k}\n")).unwrap();
        }
        let provider = Rc::new(ReplayProvider::from_dir(dir.path(), Duration::ZERO).unwrap());
        // Files go by the order requests are sent, not the order replies complete in.
        let first = provider
            .clone()
            .complete(asking(RequestKind::Optimize, "r1-c1"));
        let second = provider
            .clone()
            .complete(asking(RequestKind::Optimize, "r1-c2"));
        assert_eq!(code_of(second.await), "# 1\n");
        assert_eq!(code_of(first.await), "# 0\n");
        let again = provider.complete(asking(RequestKind::Optimize, "r1-c1"));
        assert_eq!(code_of(again.await), "# 0\n");

        // The process died with r1-c2 in flight: the resumed provider gives it its file again.
        let resumed = Rc::new(
            ReplayProvider::from_dir(dir.path(), Duration::ZERO)
                .unwrap()
                .continuing_after(&["r1-c1".into(), "r1-c2".into()]),
        );
        let new = resumed
            .clone()
            .complete(asking(RequestKind::Refine, "r1-c1-refine1"));
        let in_flight = resumed.complete(asking(RequestKind::Optimize, "r1-c2"));
        assert_eq!(code_of(new.await), "# 2\n");
        assert_eq!(code_of(in_flight.await), "# 1\n");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_missing_or_empty_folder_is_exhausted_from_the_start_with_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.txt"), "not a candidate").unwrap();
        let missing = dir.path().join("candidates");
        for (folder, why) in [
            (dir.path().to_path_buf(), "has no .py files"),
            (missing.clone(), "does not exist"),
        ] {
            let provider = Rc::new(ReplayProvider::from_dir(&folder, Duration::ZERO).unwrap());
            assert_eq!(
                provider.warning(),
                Some(
                    format!(
                        "the replay folder {0} {why}: the replay provider has no candidates, so \
                         the run evaluates the initial kernel and ends; put .py files defining \
                         kernel_function in {0}, or set replay_dir",
                        folder.display()
                    )
                    .as_str()
                )
            );
            assert_eq!(
                provider.complete(request(RequestKind::Optimize)).await,
                Err(LlmError::Exhausted)
            );
        }
    }

    #[test]
    fn a_folder_with_candidates_has_no_warning_and_a_file_is_no_folder() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("01.py"), "def kernel_function(): pass\n").unwrap();
        let provider = ReplayProvider::from_dir(dir.path(), Duration::ZERO).unwrap();
        assert_eq!(provider.warning(), None);
        let error = ReplayProvider::from_dir(&dir.path().join("01.py"), Duration::ZERO)
            .err()
            .unwrap();
        assert!(
            error
                .to_string()
                .starts_with("failed to read the replay folder "),
            "{error}"
        );
    }
}
