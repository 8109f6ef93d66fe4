"""Issue 19: which Landlock rules CUDA needs. Each variant restricts a fresh python3 with one
ruleset, then initialises CUDA and runs one Triton kernel; prints one line per variant.

    python3 landlock_variants.py WRITABLE_DIR
"""

import subprocess
import sys

CHILD = r'''
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
abi = libc.syscall(444, None, 0, 1)
count = 13 if abi == 1 else 14 if abi == 2 else 15 if abi < 5 else 16
handled = sum(1 << i for i in range(count))
IOCTL_DEV = 1 << 15
READ = (1 << 0) | (1 << 2) | (1 << 3)
variant, write_dir = sys.argv[1], sys.argv[2]
if variant == "no_ioctl_handling":
    handled &= ~IOCTL_DEV
class Ruleset(ctypes.Structure):
    _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]
class PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed", ctypes.c_uint64), ("fd", ctypes.c_int32)]
attr = Ruleset(handled, 3 if abi >= 4 else 0, 3 if abi >= 6 else 0)
fd = libc.syscall(444, ctypes.byref(attr), ctypes.sizeof(Ruleset) if abi >= 6 else 16, 0)
rules = {"/": READ, "/dev": handled, write_dir: handled}
if variant in ("plus_tmp", "plus_tmp_shm_proc"):
    rules["/tmp"] = handled
if variant in ("plus_proc", "plus_tmp_shm_proc"):
    rules["/proc"] = handled
if variant == "plus_tmp_shm_proc":
    rules["/dev/shm"] = handled
if variant == "everything_writable":
    rules = {"/": handled}
if variant == "plus_sys":
    rules["/sys"] = handled
if variant == "plus_all_listed":
    for extra in ("/tmp", "/proc", "/sys", "/dev/shm"):
        rules[extra] = handled
if variant == "read_write_no_make":
    rules["/"] = READ | (1 << 1) | (1 << 14 if abi >= 3 else 0)
for path, allowed in rules.items():
    if not os.path.exists(path):
        continue
    pfd = os.open(path, os.O_PATH)
    rule = PathBeneath(allowed & handled, pfd)
    assert libc.syscall(445, fd, 1, ctypes.byref(rule), 0) == 0, (path, os.strerror(ctypes.get_errno()))
assert libc.prctl(38, 1, 0, 0, 0) == 0
assert libc.syscall(446, fd, 0) == 0
os.environ["TRITON_CACHE_DIR"] = os.path.join(write_dir, "triton")
try:
    import torch
    x = torch.ones(1024, device="cuda")
    torch.cuda.synchronize()
    import triton, triton.language as tl
    @triton.jit
    def double(x, y, n, BLOCK: tl.constexpr):
        o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y + o, tl.load(x + o, mask=o < n) * 2, mask=o < n)
    y = torch.empty_like(x)
    double[(1,)](x, y, 1024, BLOCK=1024)
    print("cuda and triton ok", bool(torch.equal(y, x * 2)))
except Exception as error:
    print("FAILED", type(error).__name__, str(error).splitlines()[0][:200])
'''

VARIANTS = [
    "everything_writable",
    "base",
    "no_ioctl_handling",
    "plus_tmp",
    "plus_proc",
    "plus_sys",
    "plus_tmp_shm_proc",
    "plus_all_listed",
    "read_write_no_make",
]

for variant in VARIANTS:
    result = subprocess.run(
        [sys.executable, "-c", CHILD, variant, sys.argv[1]],
        capture_output=True,
        text=True,
        timeout=120,
    )
    last = (result.stdout.strip().splitlines() or result.stderr.strip().splitlines() or ["?"])[-1]
    print(f"{variant:22s} {last}", flush=True)
