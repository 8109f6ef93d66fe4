"""Issue 19: CUDA and Triton under Landlock (reads everywhere, writes only to one folder, device
files' ioctls allowed), then what a candidate could still do."""

import ctypes
import os
import socket
import sys

libc = ctypes.CDLL(None, use_errno=True)
CREATE, ADD, RESTRICT = 444, 445, 446
VERSION = 1 << 0
abi = libc.syscall(CREATE, None, 0, VERSION)
print("landlock abi", abi, flush=True)
# Access rights by ABI: 1..13 in order (execute .. ioctl_dev).
rights = [1 << i for i in range(16)]
count = 13 if abi == 1 else 14 if abi == 2 else 15 if abi < 5 else 16
handled = 0
for r in rights[:count]:
    handled |= r
READ = (1 << 0) | (1 << 2) | (1 << 3)  # execute, read_file, read_dir


class Ruleset(ctypes.Structure):
    _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed", ctypes.c_uint64), ("fd", ctypes.c_int32)]


net = (1 << 0) | (1 << 1) if abi >= 4 else 0  # bind_tcp, connect_tcp
scoped = (1 << 0) | (1 << 1) if abi >= 6 else 0  # abstract unix sockets, signals
attr = Ruleset(handled, net, scoped)
size = ctypes.sizeof(Ruleset) if abi >= 6 else (16 if abi >= 4 else 8)
fd = libc.syscall(CREATE, ctypes.byref(attr), size, 0)
assert fd >= 0, os.strerror(ctypes.get_errno())
write_dir = sys.argv[1]
os.makedirs(write_dir, exist_ok=True)
for path, allowed in (("/", READ), ("/dev", handled), (write_dir, handled), ("/proc", READ | (1 << 1))):
    pfd = os.open(path, os.O_PATH)
    rule = PathBeneath(allowed & handled, pfd)
    assert libc.syscall(ADD, fd, 1, ctypes.byref(rule), 0) == 0, (path, os.strerror(ctypes.get_errno()))
assert libc.prctl(38, 1, 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS
assert libc.syscall(RESTRICT, fd, 0) == 0, os.strerror(ctypes.get_errno())
print("restricted", flush=True)
os.environ["TRITON_CACHE_DIR"] = os.path.join(write_dir, "triton")
import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def double(x, y, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + o, tl.load(x + o, mask=o < n) * 2, mask=o < n)


x = torch.randn(4096, device="cuda")
y = torch.empty_like(x)
double[(4,)](x, y, 4096, BLOCK=1024)
print("triton under landlock:", bool(torch.equal(y, x * 2)), flush=True)
for target in ("/root/.bashrc", sys.prefix + "/lib/evil.pth", "/tmp/outside"):
    try:
        open(target, "a").close()
        print("wrote", target)
    except OSError as e:
        print("refused", target, e.strerror)
try:
    with open(f"/proc/{os.getppid()}/environ", "rb") as f:
        print("read parent environ", len(f.read()), "bytes")
except OSError as e:
    print("parent environ refused:", e.strerror)
try:
    socket.create_connection(("127.0.0.1", 9), timeout=1)
    print("tcp connected")
except OSError as e:
    print("tcp refused:", e.strerror)
