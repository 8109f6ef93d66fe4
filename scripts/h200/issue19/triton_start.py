#!/usr/bin/env python3
"""What a first Triton launch costs a fresh process on the H200, plainly with Triton's cache in
a warm $HOME, plainly with an empty TRITON_HOME, and through the sandbox's launcher (whose
TRITON_HOME is its fresh scratch): the question behind issue 19's first evaluation, which takes
about 2 s longer in the sandbox while later candidates do not.

    python3 triton_start.py KACTORS WORK
"""

import os
import shutil
import statistics
import subprocess
import sys
import time

KERNEL = """
import torch, triton, triton.language as tl
@triton.jit
def double(x_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n) * 2, mask=offsets < n)
x = torch.ones(4096, device="cuda")
double[(4,)](x, 4096, BLOCK=1024)
torch.cuda.synchronize()
"""


def main(kactors, work):
    os.makedirs(work, exist_ok=True)
    home = os.path.join(work, "home")
    sandbox = [kactors, "sandbox-exec", "--level", "required", "--scratch", f"{work}/scratch",
               "--scratch-bytes", str(1 << 30), "--max-tasks", "4096", "--max-file-bytes", str(8 << 30),
               "--writable", work, "--hide", work, "--"]

    # Triton reads a kernel's source from its file, so the kernel cannot come with -c.
    script = os.path.join(work, "first_launch.py")
    with open(script, "w") as f:
        f.write(KERNEL)

    def once(prefix, env):
        began = time.perf_counter()
        subprocess.run(prefix + [sys.executable, script], check=True, env=env)
        return time.perf_counter() - began

    def warm_home():
        return dict(os.environ, HOME=home)

    def empty_triton_home():
        fresh = os.path.join(work, "fresh-triton-home")
        shutil.rmtree(fresh, ignore_errors=True)
        return dict(os.environ, HOME=home, TRITON_HOME=fresh)

    once([], warm_home())
    samples = {"plain, warm ~/.triton": [], "plain, empty TRITON_HOME": [], "sandboxed": []}
    for _ in range(5):
        samples["plain, warm ~/.triton"].append(once([], warm_home()))
        samples["plain, empty TRITON_HOME"].append(once([], empty_triton_home()))
        samples["sandboxed"].append(once(sandbox, warm_home()))
    print("| process | median s | samples s |\n|---|---|---|")
    for what, times in samples.items():
        print(f"| {what} | {statistics.median(times):.3f} | {' '.join(f'{t:.3f}' for t in times)} |")
    warm = statistics.median(samples["plain, warm ~/.triton"])
    print(f"INFO an empty Triton cache costs {1000 * (statistics.median(samples['plain, empty TRITON_HOME']) - warm):+.0f} ms, "
          f"the sandbox {1000 * (statistics.median(samples['sandboxed']) - warm):+.0f} ms, over a warm ~/.triton (medians of 5)")


if __name__ == "__main__":
    main(*sys.argv[1:])
