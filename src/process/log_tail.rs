//! The end of a child's log, for the message that says why the child failed: read through
//! tokio, so no actor's thread waits on the disk, and never more than its last few kilobytes,
//! however long the log grew.

use std::io::{self, SeekFrom};
use std::path::Path;

use tokio::io::{AsyncReadExt, AsyncSeekExt};

/// How many lines of a child's log a failure message quotes.
const TAIL_LINES: usize = 12;
/// How much of the end of a log is read to find them.
const TAIL_BYTES: u64 = 4096;

/// The last non-empty lines of the log at `path` (at most twelve, from its last 4 KiB), oldest
/// first, without their trailing blanks.
pub async fn log_tail(path: &Path) -> io::Result<Vec<String>> {
    let mut file = tokio::fs::File::open(path).await?;
    let length = file.metadata().await?.len();
    file.seek(SeekFrom::Start(length.saturating_sub(TAIL_BYTES)))
        .await?;
    let mut end = Vec::new();
    file.take(TAIL_BYTES).read_to_end(&mut end).await?;
    let text = String::from_utf8_lossy(&end);
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim_end)
        .filter(|line| !line.is_empty())
        .collect();
    Ok(lines[lines.len().saturating_sub(TAIL_LINES)..]
        .iter()
        .map(|line| line.to_string())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_tail_is_the_last_lines_that_say_something() {
        let temp = tempfile::tempdir().unwrap();
        let log = temp.path().join("evaluator.log");
        let mut text = String::new();
        for line in 1..=40 {
            text.push_str(&format!("line {line}  \n\n"));
        }
        tokio::fs::write(&log, text).await.unwrap();
        let expected: Vec<String> = (29..=40).map(|line| format!("line {line}")).collect();
        assert_eq!(log_tail(&log).await.unwrap(), expected);
    }

    #[tokio::test]
    async fn a_huge_log_is_read_from_its_end_only() {
        let temp = tempfile::tempdir().unwrap();
        let log = temp.path().join("evaluator.log");
        // 8 MiB of one line, then the two that matter.
        let end = "\nTraceback (most recent call last):\nRuntimeError: boom\n";
        let mut text = "x".repeat(8 << 20);
        text.push_str(end);
        tokio::fs::write(&log, text).await.unwrap();
        let tail = log_tail(&log).await.unwrap();
        assert_eq!(tail.len(), 3, "a cut line of x, then the two lines");
        assert_eq!(tail[0].len(), TAIL_BYTES as usize - end.len());
        assert_eq!(
            tail[1..],
            ["Traceback (most recent call last):", "RuntimeError: boom"]
        );
    }

    #[tokio::test]
    async fn a_missing_log_is_an_error() {
        let temp = tempfile::tempdir().unwrap();
        assert!(log_tail(&temp.path().join("absent.log")).await.is_err());
    }
}
