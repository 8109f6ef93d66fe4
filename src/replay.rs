//! The replay LLM provider: offline answers from files. Each request for code gets the next
//! Python file of the replay folder in name order, after a configured latency; after the last
//! file it answers "exhausted". A bottleneck analysis gets "no analysis available" and a
//! reflexion an empty text.

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use actors::model::KernelSource;
use actors::ports::{LlmError, LlmProvider, LlmReply, LlmRequest, LocalFuture, RequestKind};

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("failed to read the replay folder {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the replay folder {0} has no .py files: put the candidate kernels the replay provider should answer with there"
    )]
    Empty(PathBuf),
}

pub struct ReplayProvider {
    files: Vec<PathBuf>,
    next: Cell<usize>,
    latency: Duration,
}

impl ReplayProvider {
    pub fn from_dir(dir: &Path, latency: Duration) -> Result<Self, ReplayError> {
        let entries = std::fs::read_dir(dir).map_err(|source| ReplayError::Read {
            path: dir.to_path_buf(),
            source,
        })?;
        let mut files = Vec::new();
        for entry in entries {
            let path = entry
                .map_err(|source| ReplayError::Read {
                    path: dir.to_path_buf(),
                    source,
                })?
                .path();
            if path.is_file() && path.extension().is_some_and(|ext| ext == "py") {
                files.push(path);
            }
        }
        if files.is_empty() {
            return Err(ReplayError::Empty(dir.to_path_buf()));
        }
        files.sort();
        Ok(ReplayProvider {
            files,
            next: Cell::new(0),
            latency,
        })
    }

    fn take_next_file(&self) -> Option<PathBuf> {
        let index = self.next.get();
        let file = self.files.get(index)?.clone();
        self.next.set(index + 1);
        Some(file)
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
    fn complete(
        self: Rc<Self>,
        request: LlmRequest,
    ) -> LocalFuture<'static, Result<LlmReply, LlmError>> {
        Box::pin(async move {
            tokio::time::sleep(self.latency).await;
            match request.kind {
                RequestKind::Analysis => Ok(text_reply("no analysis available")),
                RequestKind::Reflexion => Ok(text_reply("")),
                RequestKind::Optimize | RequestKind::Refine => {
                    let file = self.take_next_file().ok_or(LlmError::Exhausted)?;
                    let code = tokio::fs::read_to_string(&file).await.map_err(|error| {
                        LlmError::Failed(format!(
                            "failed to read replay file {}: {error}",
                            file.display()
                        ))
                    })?;
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
    use super::*;

    fn request(kind: RequestKind) -> LlmRequest {
        LlmRequest {
            request_id: "r".into(),
            kind,
            candidate: actors::model::CandidateId(1),
            round: 1,
            system: String::new(),
            prompt: String::new(),
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

    #[test]
    fn an_empty_folder_is_an_error_that_says_what_to_put_there() {
        let dir = tempfile::tempdir().unwrap();
        let error = ReplayProvider::from_dir(dir.path(), Duration::ZERO)
            .err()
            .unwrap();
        assert!(error.to_string().contains("has no .py files"), "{error}");
    }
}
