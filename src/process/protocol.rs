//! The two pipes of a child that speaks a line protocol with kactors: requests on the child's
//! fd 3, replies on its fd 4. stdout and stderr never carry the protocol, so whatever a kernel,
//! a compiler or a driver prints cannot corrupt it.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::unistd::pipe2;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::pipe;

/// The child reads requests from this descriptor.
pub(super) const REQUESTS_FD: RawFd = 3;
/// The child writes replies to this descriptor.
pub(super) const REPLIES_FD: RawFd = 4;

/// kactors' ends of a child's protocol pipes. The two halves are separate so that one task can
/// write while another waits for replies, and so that dropping `requests` tells the child (EOF
/// on fd 3) that no more requests will come.
#[derive(Debug)]
pub struct ProtocolPipes {
    pub requests: RequestWriter,
    pub replies: ReplyReader,
}

#[derive(Debug)]
pub struct RequestWriter(pipe::Sender);

impl RequestWriter {
    /// Writes `line` and a newline. Not cancel safe: a request abandoned half-written leaves
    /// the protocol out of step, so the child must then be restarted.
    pub async fn send_line(&mut self, line: &str) -> io::Result<()> {
        if line.contains('\n') {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a protocol request must be one line, without a newline",
            ));
        }
        let mut framed = Vec::with_capacity(line.len() + 1);
        framed.extend_from_slice(line.as_bytes());
        framed.push(b'\n');
        self.0.write_all(&framed).await
    }
}

#[derive(Debug)]
pub struct ReplyReader {
    pipe: BufReader<pipe::Receiver>,
    /// The part of a reply line read so far, kept across calls so that a `recv_line` dropped in
    /// a `select!` loses nothing.
    partial_line: Vec<u8>,
}

impl ReplyReader {
    /// The next reply line, without its newline; `None` once every writer has closed the pipe
    /// (the child exited) between lines. Cancel safe.
    pub async fn recv_line(&mut self) -> io::Result<Option<String>> {
        self.pipe.read_until(b'\n', &mut self.partial_line).await?;
        if self.partial_line.is_empty() {
            return Ok(None);
        }
        let mut line = std::mem::take(&mut self.partial_line);
        if line.pop() != Some(b'\n') {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "the reply pipe closed inside a line ({} bytes without a newline)",
                    line.len() + 1
                ),
            ));
        }
        String::from_utf8(line)
            .map(Some)
            .map_err(|error| io::Error::new(io::ErrorKind::InvalidData, error))
    }
}

/// The child's ends of the two pipes, between their creation and the spawn.
pub(super) struct ChildEnds {
    pub(super) requests: OwnedFd,
    pub(super) replies: OwnedFd,
}

impl ChildEnds {
    pub(super) fn fds(&self) -> [BorrowedFd<'_>; 2] {
        [self.requests.as_fd(), self.replies.as_fd()]
    }
}

/// Makes both pipes; the child's ends are placed above fd 4 so that putting one on fd 3 or 4
/// in the child can never overwrite the other before it is placed. All four ends are
/// close-on-exec: the child gets only the copies `place_child_ends` makes.
pub(super) fn protocol_pipes() -> io::Result<(ProtocolPipes, ChildEnds)> {
    let (child_requests, parent_requests) = pipe2(OFlag::O_CLOEXEC)?;
    let (parent_replies, child_replies) = pipe2(OFlag::O_CLOEXEC)?;
    let child_ends = ChildEnds {
        requests: above_protocol_fds(child_requests)?,
        replies: above_protocol_fds(child_replies)?,
    };
    // Registering with tokio needs the runtime and sets the ends non-blocking.
    let parent_ends = ProtocolPipes {
        requests: RequestWriter(pipe::Sender::from_owned_fd(parent_requests)?),
        replies: ReplyReader {
            pipe: BufReader::new(pipe::Receiver::from_owned_fd(parent_replies)?),
            partial_line: Vec::new(),
        },
    };
    Ok((parent_ends, child_ends))
}

fn above_protocol_fds(fd: OwnedFd) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() > REPLIES_FD {
        return Ok(fd);
    }
    let copy = fcntl(&fd, FcntlArg::F_DUPFD_CLOEXEC(REPLIES_FD + 1))?;
    // SAFETY: F_DUPFD_CLOEXEC returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(copy) })
}

/// Runs in the child between fork and exec, so it may only make async-signal-safe calls:
/// dup2 and errno. Both sources are above fd 4 (see `protocol_pipes`), and a descriptor made by
/// dup2 onto a different number does not inherit close-on-exec, so both survive the exec.
pub(super) fn place_child_ends(requests: RawFd, replies: RawFd) -> io::Result<()> {
    for (source, target) in [(requests, REQUESTS_FD), (replies, REPLIES_FD)] {
        // SAFETY: dup2 on descriptors this process holds; the target is replaced atomically.
        if unsafe { nix::libc::dup2(source, target) } == -1 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::time::Duration;

    use super::*;
    use crate::process::spawn;
    use crate::process::test_support::Scratch;

    #[tokio::test]
    async fn json_lines_go_through_the_pipes_while_the_child_prints_garbage() {
        let scratch = Scratch::new();
        let script = r#"
import json, os, sys
requests = os.fdopen(3, "r")
replies = os.fdopen(4, "w")
for line in requests:
    print("garbage on stdout {not json", flush=True)
    print("garbage on stderr", file=sys.stderr, flush=True)
    request = json.loads(line)
    replies.write(json.dumps({"id": request["id"], "double": request["x"] * 2}) + "\n")
    replies.flush()
print("no more requests", flush=True)
"#;
        let mut child = spawn(&scratch.python(script, true)).unwrap();
        let ProtocolPipes {
            mut requests,
            mut replies,
        } = child.protocol.take().unwrap();

        for (id, x) in [(1, 2), (2, 21), (3, -5)] {
            requests
                .send_line(&format!(r#"{{"id": {id}, "x": {x}}}"#))
                .await
                .unwrap();
            let expected = format!(r#"{{"id": {id}, "double": {}}}"#, x * 2);
            assert_eq!(replies.recv_line().await.unwrap(), Some(expected));
        }
        // The child sees EOF on fd 3 only if no copy of the write end leaked into it, and the
        // reply pipe ends only if kactors kept no copy of the child's end.
        drop(requests);
        assert!(child.wait().await.unwrap().success());
        assert_eq!(replies.recv_line().await.unwrap(), None);

        let garbage = "garbage on stdout {not json\ngarbage on stderr\n";
        assert_eq!(
            scratch.log(),
            format!("{}no more requests\n", garbage.repeat(3))
        );
    }

    #[tokio::test]
    async fn a_request_must_be_one_line() {
        let (mut pipes, _child_ends) = protocol_pipes().unwrap();
        let error = pipes.requests.send_line("{\"id\":\n1}").await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
    }

    /// Writes `bytes` as the child would and closes the child's end, then reads replies until
    /// the end or an error.
    async fn check_replies(bytes: &[u8], expected: &[Result<Option<&str>, io::ErrorKind>]) {
        let (mut pipes, child_ends) = protocol_pipes().unwrap();
        std::fs::File::from(child_ends.replies)
            .write_all(bytes)
            .unwrap();
        let mut read = Vec::new();
        loop {
            let reply = pipes
                .replies
                .recv_line()
                .await
                .map_err(|error| error.kind());
            let last = !matches!(reply, Ok(Some(_)));
            read.push(reply);
            if last {
                break;
            }
        }
        let expected: Vec<_> = expected
            .iter()
            .map(|reply| reply.map(|line| line.map(str::to_string)))
            .collect();
        assert_eq!(read, expected, "{bytes:?}");
    }

    #[tokio::test]
    async fn replies_are_lines_until_the_pipe_closes() {
        check_replies(b"", &[Ok(None)]).await;
        check_replies(
            b"one\n\ntwo\n",
            &[Ok(Some("one")), Ok(Some("")), Ok(Some("two")), Ok(None)],
        )
        .await;
        check_replies(
            b"one\npartial",
            &[Ok(Some("one")), Err(io::ErrorKind::UnexpectedEof)],
        )
        .await;
        check_replies(b"\xff\xfe\n", &[Err(io::ErrorKind::InvalidData)]).await;
    }

    #[tokio::test]
    async fn a_reply_read_that_is_given_up_loses_nothing() {
        let (mut pipes, child_ends) = protocol_pipes().unwrap();
        let mut child_replies = std::fs::File::from(child_ends.replies);
        child_replies.write_all(b"par").unwrap();

        let given_up =
            tokio::time::timeout(Duration::from_millis(50), pipes.replies.recv_line()).await;
        assert!(given_up.is_err(), "no line is complete yet");
        child_replies.write_all(b"tial\n").unwrap();

        assert_eq!(
            pipes.replies.recv_line().await.unwrap().as_deref(),
            Some("partial")
        );
    }
}
