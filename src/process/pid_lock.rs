//! An advisory lock file that names its holder: taken without waiting, held until dropped or
//! until the process ends (the kernel releases a flock with its last descriptor, so a killed
//! process never leaves anything locked). The pid inside is only for the message a refused
//! taker prints.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

#[derive(Debug)]
pub struct PidLock {
    path: PathBuf,
    _file: Flock<File>,
}

impl PidLock {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[derive(Debug)]
pub enum Locked {
    Held(PidLock),
    /// Another process holds it: `pid N`, or `pid unknown` if it wrote none yet.
    Busy {
        holder: String,
    },
}

/// Takes the lock at `path` (created if missing, never removed: removing a lock file another
/// process is opening would let two processes lock different files for one thing).
pub fn try_lock(path: &Path) -> io::Result<Locked> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(mut file) => {
            file.set_len(0)?;
            write!(file, "{}", std::process::id())?;
            Ok(Locked::Held(PidLock {
                path: path.to_path_buf(),
                _file: file,
            }))
        }
        Err((mut file, errno)) if errno == Errno::EWOULDBLOCK => {
            let mut holder = String::new();
            let holder = match file.read_to_string(&mut holder) {
                Ok(_) if !holder.trim().is_empty() => format!("pid {}", holder.trim()),
                _ => "pid unknown".to_string(),
            };
            Ok(Locked::Busy { holder })
        }
        Err((_, errno)) => Err(io::Error::from(errno)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_taker_is_refused_and_told_who_holds_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let Locked::Held(first) = try_lock(&path).unwrap() else {
            panic!("the first taker gets it");
        };
        match try_lock(&path).unwrap() {
            Locked::Busy { holder } => assert_eq!(holder, format!("pid {}", std::process::id())),
            Locked::Held(_) => panic!("a held lock is not taken twice"),
        }
        drop(first);
        assert!(matches!(try_lock(&path).unwrap(), Locked::Held(_)));
    }
}
