#!/usr/bin/env python3
"""What isolating one candidate from the next costs on a GPU, measured side by side (issue 11).

    python3 scripts/h200/isolation_costs.py KERNEL_DIR [KERNEL_DIR ...] > costs.json

For each kernel directory it measures, in one call:
- fork: a server that imported torch and Triton but made no CUDA context forks a child per
  candidate; the child makes its context, draws the inputs (3 seeds) on the GPU, computes the
  references and runs the directory's input.py once (its Triton kernel compiled by an earlier
  child, so loaded from Triton's on-disk cache), then exits. Wall time from fork to reap.
- warm checks: in one warm process holding 3 draws and their references, the time of GPU
  checksums over every input and reference, and of a fingerprint of the functions and settings a
  verification depends on.
Prints one JSON object per kernel directory and a short table on stderr.
"""

import importlib.util
import json
import os
import sys
import time

T0 = time.perf_counter()
import torch  # noqa: E402
import triton  # noqa: E402

IMPORT_S = time.perf_counter() - T0
SEEDS = (0, 1, 2)


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cast(value, dtype):
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.to(dtype)
    return value


def draws_and_references(problem, dtype):
    torch.set_default_device("cuda")
    model = problem.Model(*problem.get_init_inputs()).to("cuda").to(dtype)
    draws, references = [], []
    for seed in SEEDS:
        torch.manual_seed(seed)
        inputs = [cast(x, dtype) for x in problem.get_inputs()]
        draws.append(inputs)
        with torch.no_grad():
            references.append(model(*inputs))
    torch.cuda.synchronize()
    return draws, references


def child(kernel_dir, pipe_w):
    marks = {}
    start = time.perf_counter()
    torch.cuda.init()
    torch.empty(1, device="cuda")
    torch.cuda.synchronize()
    marks["context_s"] = time.perf_counter() - start
    problem = load(os.path.join(kernel_dir, "problem.py"), "problem")
    dtype = getattr(problem, "DTYPE", torch.bfloat16)
    t = time.perf_counter()
    draws, references = draws_and_references(problem, dtype)
    marks["draws_and_references_s"] = time.perf_counter() - t
    t = time.perf_counter()
    kernel = load(os.path.join(kernel_dir, "input.py"), "candidate")
    out = kernel.kernel_function(*draws[0])
    torch.cuda.synchronize()
    marks["candidate_first_call_s"] = time.perf_counter() - t
    marks["max_abs_err"] = float((out.float() - references[0].float()).abs().max())
    marks["in_child_s"] = time.perf_counter() - start
    os.write(pipe_w, json.dumps(marks).encode())
    os._exit(0)


def fork_once(kernel_dir):
    assert not torch.cuda.is_initialized(), "the server must hold no CUDA context"
    r, w = os.pipe()
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            child(kernel_dir, w)
        finally:
            os._exit(1)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    _, status = os.waitpid(pid, 0)
    marks = json.loads(data or b"{}")
    marks["fork_to_reap_s"] = time.perf_counter() - start
    marks["exit_status"] = status
    return marks


def warm_checks(kernel_dir):
    """In this process (which now makes a context): checksums and the fingerprint."""
    problem = load(os.path.join(kernel_dir, "problem.py"), "problem_warm")
    dtype = getattr(problem, "DTYPE", torch.bfloat16)
    draws, references = draws_and_references(problem, dtype)
    tensors = [t for d in draws for t in d if isinstance(t, torch.Tensor)] + references
    total_bytes = sum(t.numel() * t.element_size() for t in tensors)

    def checksum(t):
        flat = t.detach().reshape(-1)
        if flat.element_size() == 2:
            words = flat.view(torch.int16).to(torch.int64)
        elif flat.element_size() == 4:
            words = flat.view(torch.int32).to(torch.int64)
        else:
            words = flat.view(torch.int64)
        return int(words.sum()), int((words * words).sum())

    def checksum_chunked(t, chunk=1 << 28):
        flat = t.detach().reshape(-1)
        view = {2: torch.int16, 4: torch.int32, 8: torch.int64}[flat.element_size()]
        words = flat.view(view)
        a = torch.zeros((), dtype=torch.int64)
        b = torch.zeros((), dtype=torch.int64)
        for i in range(0, words.numel(), chunk):
            part = words[i : i + chunk].to(torch.int64)
            a += part.sum()
            b += (part * part).sum()
        return int(a), int(b)

    timings = {}
    for name, fn in (("checksum_chunked_s", checksum_chunked),):
        fn(tensors[0])
        torch.cuda.synchronize()
        runs = []
        for _ in range(3):
            t = time.perf_counter()
            sums = [fn(x) for x in tensors]
            torch.cuda.synchronize()
            runs.append(time.perf_counter() - t)
        timings[name] = min(runs)

    def fingerprint():
        parts = []
        for module in (torch, torch.Tensor, torch.nn.functional, torch.cuda, triton):
            for attr in dir(module):
                try:
                    parts.append((attr, id(getattr(module, attr))))
                except Exception:
                    pass
        parts.append(torch.backends.cuda.matmul.allow_tf32)
        parts.append(torch.backends.cudnn.allow_tf32)
        parts.append(torch.get_float32_matmul_precision())
        parts.append(torch.are_deterministic_algorithms_enabled())
        parts.append(torch.get_default_dtype())
        parts.append(torch.cuda.current_stream().cuda_stream)
        parts.append(hash(frozenset(os.environ.items())))
        return hash(tuple(parts)), len(parts)

    runs = []
    for _ in range(5):
        t = time.perf_counter()
        _, count = fingerprint()
        runs.append(time.perf_counter() - t)
    timings["fingerprint_s"] = min(runs)
    timings["fingerprint_items"] = count
    timings["checked_bytes"] = total_bytes
    del sums
    return timings


def main():
    results = []
    for kernel_dir in sys.argv[1:]:
        forks = [fork_once(kernel_dir) for _ in range(4)]
        results.append({"kernel_dir": kernel_dir, "import_s": IMPORT_S, "forks": forks})
        print(json.dumps(results[-1]), flush=True)
    for kernel_dir, result in zip(sys.argv[1:], results):
        result["warm"] = warm_checks(kernel_dir)
        print(json.dumps({"kernel_dir": kernel_dir, "warm": result["warm"]}), flush=True)
    for result in results:
        later = result["forks"][1:]
        walls = sorted(f["fork_to_reap_s"] for f in later)
        ctx = sorted(f.get("context_s", float("nan")) for f in later)
        draws = sorted(f.get("draws_and_references_s", float("nan")) for f in later)
        cand = sorted(f.get("candidate_first_call_s", float("nan")) for f in later)
        print(
            f"{result['kernel_dir']}: fork-to-reap {walls}, context {ctx}, draws+refs {draws}, "
            f"candidate call {cand}, warm {result['warm']}",
            file=sys.stderr,
        )


if __name__ == "__main__":
    main()
