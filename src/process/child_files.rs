//! The files a child was given that another process might keep open, and who holds them now:
//! what the leak check looks for beside the child's group. Apart from `spawn.rs`, which records
//! them, and `leak.rs`, which looks, so that neither imports the other.

use std::fs;
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use nix::sys::stat::fstat;
use nix::unistd::Pid;

/// The files a child was given that someone else might keep open: its log and its protocol
/// pipes.
#[derive(Clone, Debug)]
pub(super) struct ChildFiles(Vec<FileIdentity>);

/// A file as /proc shows it: the text of a `/proc/<pid>/fd/<n>` link (a path, or `pipe:[1234]`
/// for a pipe), then its device and inode to be sure. Comparing the link text first means
/// the scan never stats a file it does not care about, which on a hung network file system
/// could block.
#[derive(Clone, Debug, PartialEq, Eq)]
struct FileIdentity {
    link: PathBuf,
    device: u64,
    inode: u64,
}

impl ChildFiles {
    pub(super) fn of(files: &[impl AsFd]) -> io::Result<ChildFiles> {
        files
            .iter()
            .map(|file| {
                let fd = file.as_fd();
                let link = fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))?;
                let stat = fstat(fd)?;
                Ok(FileIdentity {
                    link,
                    device: stat.st_dev,
                    inode: stat.st_ino,
                })
            })
            .collect::<io::Result<Vec<_>>>()
            .map(ChildFiles)
    }

    /// The processes, other than this one, that hold one of the files. Processes of other
    /// users cannot be looked into and are skipped: a child becomes one only through a setuid
    /// program.
    pub(super) fn holders(&self) -> io::Result<Vec<Pid>> {
        let own_pid = std::process::id().to_string();
        let mut holders = Vec::new();
        for entry in fs::read_dir("/proc")? {
            let name = entry?.file_name();
            let Some(pid) = name
                .to_str()
                .filter(|name| *name != own_pid)
                .and_then(|name| name.parse().ok())
            else {
                continue;
            };
            if self.held_by(pid) {
                holders.push(Pid::from_raw(pid));
            }
        }
        Ok(holders)
    }

    fn held_by(&self, pid: i32) -> bool {
        // A process that exited meanwhile, or that we may not look into, holds nothing we see.
        let Ok(descriptors) = fs::read_dir(format!("/proc/{pid}/fd")) else {
            return false;
        };
        descriptors.flatten().any(|descriptor| {
            let Ok(link) = fs::read_link(descriptor.path()) else {
                return false;
            };
            self.0.iter().any(|file| {
                file.link == link
                    && fs::metadata(descriptor.path()).is_ok_and(|metadata| {
                        metadata.dev() == file.device && metadata.ino() == file.inode
                    })
            })
        })
    }
}
