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
    /// Another process holds it: `pid N`, or, in the moment between its lock and its pid (the
    /// file still empty, or naming a holder that is gone), a process that is starting.
    Busy {
        holder: String,
    },
}

/// The holder of a lock that has not written its pid yet: two processes started together, and
/// the other one took the lock a moment before this one.
pub const STARTING: &str =
    "another kactors process is starting there just now; its pid is not written yet";

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
            let mut text = String::new();
            let written: Option<u32> = file
                .read_to_string(&mut text)
                .ok()
                .and_then(|_| text.trim().parse().ok());
            let holder = match written {
                None => STARTING.to_string(),
                Some(pid) if Path::new(&format!("/proc/{pid}")).exists() => format!("pid {pid}"),
                // The file still names the holder before (a new one has locked it and not yet
                // written), or a process of another host sharing the folder.
                Some(pid) => format!(
                    "the lock file names pid {pid}, which does not run on this host: {STARTING}, \
                     or it runs on another node"
                ),
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

    #[test]
    fn a_holder_that_has_not_written_its_pid_yet_is_one_that_is_starting() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        for (before, said) in [
            ("", STARTING.to_string()),
            (
                "999999999",
                format!(
                    "the lock file names pid 999999999, which does not run on this host: \
                     {STARTING}, or it runs on another node"
                ),
            ),
        ] {
            std::fs::write(&path, before).unwrap();
            let taken = File::open(&path).unwrap();
            let _held = Flock::lock(taken, FlockArg::LockExclusiveNonblock).unwrap();
            match try_lock(&path).unwrap() {
                Locked::Busy { holder } => assert_eq!(holder, said, "{before:?}"),
                Locked::Held(_) => panic!("a held lock is not taken twice"),
            }
        }
    }
}
