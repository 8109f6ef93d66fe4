//! The one way kactors reads a file the user gave it: the kernel directory's input.py,
//! problem.py and test.py, strategy files and the prompt templates they name, replay files,
//! `.env`, and a run directory's run.yaml and journal (`kactors resume` and `report`). Each is refused unless it is a regular file, before a byte is read (a FIFO would
//! block the read forever, a device such as /dev/zero would never end), and never more than
//! its limit plus one byte is read, so a file that grows while it is read is refused too rather
//! than exhausting the memory. Errors name the file and the limit.

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum UserFileError {
    #[error("failed to read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "{path} is {kind}, not a regular file: kactors reads only regular files it is given (a \
         FIFO or a device never ends, or blocks the read); give the file itself"
    )]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error("{path} is {size} bytes, more than the {limit} bytes kactors reads from it")]
    TooLarge {
        path: PathBuf,
        size: u64,
        limit: u64,
    },
    #[error("{path} is not UTF-8 text: {source}")]
    NotText {
        path: PathBuf,
        #[source]
        source: std::string::FromUtf8Error,
    },
}

impl UserFileError {
    /// Whether the file does not exist (for a file that may be left out, such as `.env`).
    pub fn is_missing(&self) -> bool {
        matches!(self, UserFileError::Read { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }
}

/// What a file that is not a regular one is, for the message.
fn kind_of(file_type: std::fs::FileType) -> &'static str {
    if file_type.is_fifo() {
        "a FIFO (named pipe)"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else if file_type.is_socket() {
        "a socket"
    } else if file_type.is_dir() {
        "a directory"
    } else {
        "not a file"
    }
}

/// The regular file at `path` (links followed), open for reading; anything else refused
/// before a byte is read. For a file read as a stream with bounds of its own (a journal, by
/// lines of at most `MAX_LINE_BYTES`).
pub fn open_regular(path: &Path) -> Result<(File, std::fs::Metadata), UserFileError> {
    let error = |source| UserFileError::Read {
        path: path.to_path_buf(),
        source,
    };
    // O_NONBLOCK: opening a FIFO with no writer returns at once instead of waiting for one;
    // the type is then read from the descriptor itself, so it is the file that is read. On a
    // regular file the flag changes nothing.
    let file = File::options()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(path)
        .map_err(error)?;
    let metadata = file.metadata().map_err(error)?;
    if !metadata.is_file() {
        return Err(UserFileError::NotRegular {
            path: path.to_path_buf(),
            kind: kind_of(metadata.file_type()),
        });
    }
    Ok((file, metadata))
}

/// The bytes of the regular file at `path` (links followed), at most `limit` of them.
pub fn read_bytes(path: &Path, limit: u64) -> Result<Vec<u8>, UserFileError> {
    let (file, metadata) = open_regular(path)?;
    let too_large = |size| UserFileError::TooLarge {
        path: path.to_path_buf(),
        size,
        limit,
    };
    if metadata.len() > limit {
        return Err(too_large(metadata.len()));
    }
    let mut bytes = Vec::with_capacity(metadata.len() as usize);
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|source| UserFileError::Read {
            path: path.to_path_buf(),
            source,
        })?;
    if bytes.len() as u64 > limit {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

/// The UTF-8 text of the regular file at `path`, at most `limit` bytes of it.
pub fn read_text(path: &Path, limit: u64) -> Result<String, UserFileError> {
    String::from_utf8(read_bytes(path, limit)?).map_err(|source| UserFileError::NotText {
        path: path.to_path_buf(),
        source,
    })
}

/// The most kactors reads of a strategy file, a prompt template or `.env`: far more than any
/// is, far less than could hurt.
pub const MAX_SETTINGS_BYTES: u64 = 1 << 20;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regular_file_is_read_up_to_its_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("input.py");
        std::fs::write(&path, "twelve bytes").unwrap();
        assert_eq!(read_text(&path, 12).unwrap(), "twelve bytes");
        let refused = read_text(&path, 11).unwrap_err().to_string();
        assert_eq!(
            refused,
            format!(
                "{} is 12 bytes, more than the 11 bytes kactors reads from it",
                path.display()
            )
        );
    }

    #[test]
    fn a_fifo_a_device_and_a_folder_are_refused_unread() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("input.py");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let zero = dir.path().join("problem.py");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        for (path, kind) in [
            (fifo, "a FIFO (named pipe)"),
            (zero, "a character device"),
            (dir.path().to_path_buf(), "a directory"),
        ] {
            let refused = read_bytes(&path, 1 << 30).unwrap_err();
            assert!(
                matches!(&refused, UserFileError::NotRegular { kind: found, .. } if *found == kind),
                "{refused}"
            );
            assert!(refused.to_string().starts_with(&path.display().to_string()));
        }
    }

    #[test]
    fn a_missing_file_says_so() {
        let dir = tempfile::tempdir().unwrap();
        assert!(
            read_bytes(&dir.path().join(".env"), 10)
                .unwrap_err()
                .is_missing()
        );
    }
}
