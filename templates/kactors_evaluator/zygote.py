"""The zygote and its children's processes (issue 11). The process kactors starts imports torch
and Triton, never makes a CUDA context and never runs a candidate: it forks the evaluator child,
relays each request to it and its reply back over a socket pair of their own, and replaces a
child that died, broke the protocol or said it restarts, with every process it left behind.
Needs neither torch nor Triton."""

import ctypes
import json
import os
import select
import signal
import socket
import sys
import time
import traceback

from .protocol import TAMPERED, EvaluatorError, json_object, request_header, unjudged_verdict

# The longest line the zygote takes from a child (a reply with a long traceback fits): a child
# that writes more is broken, and is replaced.
MAX_CHILD_LINE = 64 << 20
REQUESTS_FD = 3
REPLIES_FD = 4
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36


def prctl(option, value):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, ctypes.c_ulong(value), *(ctypes.c_ulong(0),) * 3) != 0:
        number = ctypes.get_errno()
        raise OSError(number, f"prctl({option}, {value}): {os.strerror(number)}")


def children_of(pid):
    """The ids of the processes whose parent is `pid`, zombies included."""
    found = set()
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
        for task in tasks:
            with open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as listing:
                found.update(int(word) for word in listing.read().split())
        return found
    except (OSError, ValueError):
        # No children file in this kernel, or a thread ended meanwhile: read every process.
        return children_by_scan(pid)


def children_by_scan(pid):
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 1 and fields[1] == str(pid):
            found.add(int(entry))
    return found


def describe_status(status):
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    if os.WIFEXITED(status):
        return f"exit status {os.WEXITSTATUS(status)}"
    return f"wait status {status}"


def excerpt(line, limit=300):
    text = line.decode("utf-8", errors="replace").strip()
    return text if len(text) <= limit else text[:limit] + "…"


class LineReader:
    """Lines from a descriptor, read as select() says there is data."""

    def __init__(self, fd, limit):
        self.fd = fd
        self.limit = limit
        self.buffer = bytearray()
        self.closed = False

    def line(self):
        """The next whole line without its newline, or None. A line longer than the limit is an
        error: its writer is broken."""
        end = self.buffer.find(b"\n")
        if end < 0:
            if len(self.buffer) > self.limit:
                raise EvaluatorError(f"a line of more than {self.limit} bytes")
            return None
        line = bytes(self.buffer[:end])
        del self.buffer[: end + 1]
        return line

    def has_line(self):
        return b"\n" in self.buffer

    def read_some(self):
        try:
            chunk = os.read(self.fd, 1 << 16)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if chunk:
            self.buffer += chunk
        else:
            self.closed = True


class Child:
    """One evaluator child as the zygote sees it."""

    def __init__(self, pid, connection):
        self.pid = pid
        self.connection = connection
        self.reader = LineReader(connection.fileno(), MAX_CHILD_LINE)
        self.status = None
        try:
            self.pidfd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self.pidfd = None

    def exited(self):
        """Whether it exited (and was reaped), without waiting."""
        if self.status is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                pid, status = self.pid, 0
            if pid == self.pid:
                self.status = status
        return self.status is not None

    def exit_status(self, timeout):
        """How it ended, waiting up to `timeout` seconds for it to end; None if it did not."""
        deadline = time.monotonic() + timeout
        while not self.exited() and time.monotonic() < deadline:
            time.sleep(0.01)
        return describe_status(self.status) if self.status is not None else None

    def next_line(self):
        """Its next line, or None once it exited or closed its end (what it wrote before is
        read first). A line over the limit raises EvaluatorError."""
        self.connection.setblocking(False)
        while True:
            line = self.reader.line()
            if line is not None:
                return line
            if self.reader.closed or self.exited():
                self.drain()
                if not self.reader.has_line():
                    return None
                continue
            watched = [self.connection.fileno()] + ([self.pidfd] if self.pidfd else [])
            readable, _, _ = select.select(watched, [], [], None if self.pidfd else 0.2)
            if self.connection.fileno() in readable:
                self.reader.read_some()

    def drain(self):
        """Reads what it wrote before it exited (a descendant may hold its end open: no wait)."""
        self.connection.setblocking(False)
        while not self.reader.closed:
            before = len(self.reader.buffer)
            self.reader.read_some()
            if len(self.reader.buffer) == before:
                return


class Zygote:
    """The process kactors starts: forks evaluator children, relays the protocol, replaces them.

    `make_child(connection)` runs in a freshly forked child and returns its exit status; the
    child's first line is `ready` or `startup_failed`, then one reply per request. The zygote
    never runs a candidate: it only forwards lines, and checks that each line from a child is
    the reply to the request it forwarded (the id matches). A child that writes anything else,
    or anything when no request is pending, or dies, or says `restarting`, is killed with all
    its descendants (the zygote is their subreaper) and a fresh child is forked, whose `ready`
    goes to kactors before the next reply. `fork_hazard()` says why forking is unsafe, or None.
    """

    def __init__(self, make_child, fork_hazard=lambda: None, log=sys.stderr):
        self.make_child = make_child
        self.fork_hazard = fork_hazard
        self.log = log
        self.child = None
        self.generation = -1

    def run(self, requests_fd=REQUESTS_FD, replies_fd=REPLIES_FD):
        self.requests_fd = requests_fd
        self.replies_fd = replies_fd
        self.requests = LineReader(requests_fd, MAX_CHILD_LINE)
        self.own_descendants()
        try:
            if not self.start_child():
                return 2
            while True:
                line = self.requests.line()
                if line is None:
                    if self.requests.closed:
                        return 0
                    if self.wait_for_request():
                        self.requests.read_some()
                    elif not self.restart("it wrote or exited while no request was pending"):
                        return 2
                    continue
                if not self.forward(line):
                    return 0 if self.stopping else 2
        finally:
            self.stop_child()

    def own_descendants(self):
        """Orphans of a child's descendants become the zygote's, so that it can end them; and no
        process of the same user may read or write the zygote's memory."""
        for option, value in ((PR_SET_CHILD_SUBREAPER, 1), (PR_SET_DUMPABLE, 0)):
            try:
                prctl(option, value)
            except OSError as error:
                self.note(f"cannot protect the zygote: {error}")

    def note(self, text):
        print(f"kactors evaluator zygote: {text}", file=self.log, flush=True)

    def send(self, message):
        self.send_line(json.dumps(message, allow_nan=False).encode())

    def send_line(self, line):
        data = line + b"\n"
        while data:
            written = os.write(self.replies_fd, data)
            data = data[written:]

    def wait_for_request(self):
        """True when kactors wrote; False when the child wrote or exited meanwhile."""
        while True:
            watched = [self.requests_fd, self.child.connection.fileno()]
            if self.child.pidfd is not None:
                watched.append(self.child.pidfd)
            readable, _, _ = select.select(watched, [], [], None if self.child.pidfd else 0.2)
            if self.requests_fd in readable:
                return True
            if readable or self.child.exited():
                return False

    def forward(self, line):
        """Relays one request and its reply; False when the zygote must end."""
        self.stopping = False
        request_id, op = request_header(line)
        if op == "shutdown":
            self.send({"type": "reply", "id": request_id, "ok": True, "seconds": 0.0})
            self.stopping = True
            return False
        started = time.perf_counter()
        try:
            self.child.connection.sendall(line + b"\n")
        except OSError:
            pass  # its death is seen below
        outcome, detail = self.await_reply(request_id)
        if outcome in ("reply", "restarting"):
            self.send_line(detail)
            return True if outcome == "reply" else self.restart("its reply says it restarts")
        seconds = round(time.perf_counter() - started, 4)
        header = {"type": "reply", "id": request_id, "seconds": seconds, "restarting": True}
        if outcome == "broke" and op in ("verify", "time"):
            # Only the candidate's code can have written this line: the child writes replies.
            found = f"it wrote into the evaluator's reply channel: {detail}"
            verdict = unjudged_verdict() if op == "verify" else {}
            verdict.update(passed=False, reason=f"{TAMPERED}: {found}", tampered=found)
            self.send({**header, "ok": True, **verdict})
        elif outcome == "broke":
            error = f"the evaluator child broke the protocol: {detail}"
            self.send({**header, "ok": False, "error": error, "traceback": None, "fatal": False})
        else:
            error = f"the evaluator child died without answering ({detail})"
            self.send({**header, "ok": False, "error": error, "traceback": None, "fatal": True})
        return self.restart(f"it {outcome}: {detail}")

    def await_reply(self, request_id):
        """("reply" or "restarting", the reply line), ("broke", an excerpt of what it wrote
        instead) or ("died", how)."""
        try:
            line = self.child.next_line()
        except EvaluatorError as error:
            return "broke", str(error)
        if line is None:
            return "died", self.child.exit_status(1.0) or "it closed its end of the channel"
        message = json_object(line)
        if message.get("type") != "reply" or message.get("id") != request_id:
            return "broke", excerpt(line)
        return ("restarting" if message.get("restarting") is True else "reply"), line

    def restart(self, why):
        self.note(f"child {self.generation} ends ({why}); forking a fresh one")
        self.stop_child()
        return self.start_child()

    def start_child(self):
        """Forks a child and forwards its first line; False when it could not start."""
        hazard = self.fork_hazard()
        if hazard is not None:
            self.send({"type": "startup_failed", "error": hazard, "traceback": None})
            return False
        self.generation += 1
        ours, theirs = socket.socketpair()
        zygote = os.getpid()
        pid = os.fork()
        if pid == 0:
            status = 70
            try:
                ours.close()
                os.close(self.requests_fd)
                os.close(self.replies_fd)
                prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
                # Only the zygote needs to be out of reach of other processes.
                prctl(PR_SET_DUMPABLE, 1)
                if os.getppid() == zygote:
                    status = self.make_child(theirs)
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(status if isinstance(status, int) else 70)
        theirs.close()
        self.child = Child(pid, ours)
        first, why = self.first_line()
        if first is None:
            self.send({"type": "startup_failed", "error": why, "traceback": None})
            self.stop_child()
            return False
        first["generation"] = self.generation
        self.send(first)
        if first["type"] != "ready":
            self.stop_child()
            return False
        return True

    def first_line(self):
        """(the child's ready or startup_failed message, None) or (None, what went wrong)."""
        try:
            line = self.child.next_line()
        except EvaluatorError as error:
            return None, f"the evaluator child's first line is too long: {error}"
        if line is None:
            status = self.child.exit_status(1.0) or "it closed its end of the channel"
            return None, f"the evaluator child exited before it was ready ({status})"
        message = json_object(line)
        if message.get("type") in ("ready", "startup_failed"):
            return message, None
        return None, f"the evaluator child's first line is not its ready message: {excerpt(line)}"

    def stop_child(self):
        """Kills the child and every process descended from it, and reaps them all."""
        child, self.child = self.child, None
        if child is None:
            return
        if not child.exited():
            try:
                os.kill(child.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                os.waitpid(child.pid, 0)
            except ChildProcessError:
                pass
        child.connection.close()
        if child.pidfd is not None:
            os.close(child.pidfd)
        # The child's orphans are the zygote's now; each killed one may hand over more.
        for _ in range(1000):
            orphans = children_of(os.getpid())
            if not orphans:
                return
            for pid in orphans:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            for pid in orphans:
                try:
                    os.waitpid(pid, 0)
                except ChildProcessError:
                    pass
        self.note("descendants of an evaluator child kept appearing; some may be left")
