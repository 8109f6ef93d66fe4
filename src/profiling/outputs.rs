//! What a profile's children leave behind and how a failure quotes it: the end of a log, the
//! wrapper's list of launched kernels, the profile's fresh folder; and the file checks and
//! error text the profilers and the checks share.

use std::error::Error;
use std::io;
use std::path::{Path, PathBuf};

use super::absolute;
use crate::process::log_tail;

/// An error and its sources, joined by ": ".
pub fn error_chain(error: &dyn Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

/// `reason`, then the last lines of the log at `path`, if it has any.
pub async fn with_log_tail(reason: &str, path: &Path) -> String {
    match log_tail(path).await {
        Ok(tail) if !tail.is_empty() => {
            format!("{reason}; {} ends: {}", path.display(), tail.join(" | "))
        }
        _ => reason.to_string(),
    }
}

/// The names of the Triton kernels the wrapper's measured call launched (its `--kernels-out`).
pub async fn read_kernels_out(path: &Path) -> Result<Vec<String>, String> {
    let text = tokio::fs::read_to_string(path).await.map_err(|error| {
        format!(
            "the wrapper wrote no list of launched kernels at {}: {error}",
            path.display()
        )
    })?;
    serde_json::from_str(&text).map_err(|error| {
        format!(
            "list of launched kernels {} is not a JSON list of names: {error}",
            path.display()
        )
    })
}

/// Makes a fresh folder for one profile under `folder`: `profile`, else `profile-2`, ... A
/// kernel profiled again (the best kernel at the end of a run) gets a new one, so that no file
/// of the earlier profile is ever read as this one's.
pub async fn create_profile_dir(folder: &Path) -> io::Result<PathBuf> {
    let folder = absolute(folder);
    tokio::fs::create_dir_all(&folder).await?;
    for attempt in 1..=1000 {
        let name = match attempt {
            1 => "profile".to_string(),
            n => format!("profile-{n}"),
        };
        let dir = folder.join(name);
        match tokio::fs::create_dir(&dir).await {
            Ok(()) => return Ok(dir),
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(error) => return Err(error),
        }
    }
    Err(io::Error::other(format!(
        "{} holds 1000 profile folders already",
        folder.display()
    )))
}

/// Whether `path` is a file this user may execute. Blocking: call it off the runtime's thread.
pub fn is_executable_file(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .is_ok_and(|metadata| metadata.is_file() && metadata.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn each_profile_of_a_folder_gets_a_new_profile_dir() {
        let temp = tempfile::tempdir().unwrap();
        let folder = temp.path().join("candidate_3");
        let first = create_profile_dir(&folder).await.unwrap();
        let second = create_profile_dir(&folder).await.unwrap();
        assert_eq!(first, folder.join("profile"));
        assert_eq!(second, folder.join("profile-2"));
    }

    #[tokio::test]
    async fn a_failure_quotes_the_end_of_the_log() {
        let temp = tempfile::tempdir().unwrap();
        let log = temp.path().join("output.log");
        let mut text = String::new();
        for line in 1..=40 {
            text.push_str(&format!("line {line}\n\n"));
        }
        tokio::fs::write(&log, text).await.unwrap();
        let message = with_log_tail("ncu exited with status 1", &log).await;
        let expected_tail = (29..=40)
            .map(|line| format!("line {line}"))
            .collect::<Vec<_>>()
            .join(" | ");
        assert_eq!(
            message,
            format!(
                "ncu exited with status 1; {} ends: {expected_tail}",
                log.display()
            )
        );
        assert_eq!(
            with_log_tail("no log", &temp.path().join("absent.log")).await,
            "no log"
        );
    }

    #[tokio::test]
    async fn kernels_out_must_be_a_list_of_names() {
        let temp = tempfile::tempdir().unwrap();
        let path = temp.path().join("kernels.json");
        let missing = read_kernels_out(&path).await.unwrap_err();
        assert!(missing.starts_with("the wrapper wrote no list of launched kernels at"));
        tokio::fs::write(&path, "{\"a\": 1}").await.unwrap();
        let wrong = read_kernels_out(&path).await.unwrap_err();
        assert!(wrong.contains("is not a JSON list of names"), "{wrong}");
        tokio::fs::write(&path, "[\"main_kernel\", \"reduce_kernel\"]\n")
            .await
            .unwrap();
        assert_eq!(
            read_kernels_out(&path).await.unwrap(),
            ["main_kernel", "reduce_kernel"]
        );
    }
}
