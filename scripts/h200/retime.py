"""Times a run's initial and best kernels, PyTorch eager and torch.compile again in one fresh
evaluator process, interleaved (two passes), through the evaluator's own protocol, and measures
the device's copy bandwidth. Prints one JSON object.

usage: retime.py EVALUATOR ALLOWLIST KERNEL_DIR INITIAL.py BEST.py WORK_DIR
"""

import json
import os
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

evaluator, allowlist, kernel_dir, initial, best, work = sys.argv[1:7]
work = Path(work)
work.mkdir(parents=True, exist_ok=True)
config = json.dumps({"allowlist": os.path.abspath(allowlist), "seeds": 3, "benchmark_warmup": 25, "benchmark_repeat": 100})


def start():
    requests_read, requests_write = os.pipe()
    replies_read, replies_write = os.pipe()

    def place_pipes():
        # dup first: a pipe end that already is fd 3 or 4 would keep its close-on-exec flag.
        a, b = os.dup(requests_read), os.dup(replies_write)
        os.dup2(a, 3)
        os.dup2(b, 4)

    log = open(work / "retime-evaluator.log", "ab")
    child = subprocess.Popen(
        [sys.executable, os.path.abspath(evaluator), "--kernel-dir", os.path.abspath(kernel_dir), "--config", config],
        stdin=subprocess.DEVNULL, stdout=log, stderr=log, preexec_fn=place_pipes, close_fds=False, cwd=work,
        start_new_session=True,
    )
    os.close(requests_read)
    os.close(replies_write)
    return child, os.fdopen(requests_write, "w"), os.fdopen(replies_read, "r")


child, requests, replies = start()
ready, _, _ = select.select([replies], [], [], 600)
ready_line = json.loads(replies.readline()) if ready else None
next_id = 0


def ask(request):
    global next_id
    next_id += 1
    requests.write(json.dumps(dict(request, id=next_id)) + "\n")
    requests.flush()
    answered, _, _ = select.select([replies], [], [], 600)
    return json.loads(replies.readline()) if answered else {"ok": False, "error": "no reply in 600 s"}


kernels = {}
for name, source in (("initial", initial), ("best", best)):
    folder = work / name
    folder.mkdir(exist_ok=True)
    shutil.copy(source, folder / "kernel.py")
    kernels[name] = folder / "kernel.py"

result = {"ready": ready_line, "verify": {}, "passes": []}
for name, path in kernels.items():
    result["verify"][name] = ask({"op": "verify", "candidate": str(path), "cache_dir": str(path.parent / "cache")})
for _ in range(2):
    timings = {}
    for name, path in kernels.items():
        # time reuses the module its verify loaded, so verify each kernel again before timing it.
        ask({"op": "verify", "candidate": str(path), "cache_dir": str(path.parent / "cache")})
        timings[name] = ask({"op": "time", "candidate": str(path)})
    for which in ("eager", "compile"):
        timings[which] = ask({"op": "time_reference", "which": which})
    result["passes"].append(timings)
ask({"op": "shutdown"})
child.wait(timeout=60)

import torch  # noqa: E402  (only after the evaluator is gone: the GPU is ours alone)

buffer = torch.empty(2 * 1024**3, dtype=torch.uint8, device="cuda")
target = torch.empty_like(buffer)
for _ in range(3):
    target.copy_(buffer)
start_event, end_event = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
samples = []
for _ in range(10):
    start_event.record()
    target.copy_(buffer)
    end_event.record()
    torch.cuda.synchronize()
    samples.append(start_event.elapsed_time(end_event))
samples.sort()
median_ms = samples[len(samples) // 2]
result["copy_bandwidth_gbps"] = 2 * buffer.numel() / (median_ms / 1e3) / 1e9
print(json.dumps(result))
