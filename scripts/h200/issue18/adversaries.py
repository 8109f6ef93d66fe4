#!/usr/bin/env python3
"""Writes issue 18's adversaries for the matvec problems into FOLDER (scripts/h200/issue18/
issue18.sh runs it): two honest matvecs, the examples' own, then kernels built around the first:
memos of earlier answers (keyed by content, rings of 4 and 16; by the address of A and a sample
of its content), an unjoined and a joined side stream. Each file's first line says what the
search must make of it (`# expect: passed|memo|race`), for check.py.

    python3 scripts/h200/issue18/adversaries.py FOLDER

The kernels are written from the example's candidate here rather than kept as files: every one
shares its matvec kernel, and a copy in each would drift.
"""

import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "optimize_01_matvec" / "candidates"
HONEST = (EXAMPLE / "04_pipelined_streaming.py").read_text()
# The pipelined matvec kernel of the example's candidate 04, which every adversary launches.
MATVEC = HONEST[HONEST.index("@triton.jit") : HONEST.index("def kernel_function")]
IMPORTS = "import torch\nimport triton\nimport triton.language as tl\n"

MEMO_DOC = '''"""Issue 18's adversary: a memo keyed by {key}, a ring of {slots}.

It fingerprints 4096 evenly spaced elements of A and B on the GPU, keeps its last {slots}
results in a ring{address}, and on a fingerprint it has seen copies the kept result out instead
of computing. Every call launches Triton kernels, returns a fresh buffer, and the values are right
for inputs it has seen: the evaluator of old timed it at the cost of a copy.
"""
'''
MEMO = """SAMPLES = 4096


@triton.jit
def _fingerprint_kernel(a_ptr, b_ptr, out_ptr, a_step, b_step, SAMPLES: tl.constexpr):
    # SAMPLES elements of A and of B, evenly spaced: what the memo keys on.
    i = tl.arange(0, SAMPLES).to(tl.int64)
    tl.store(out_ptr + i, tl.load(a_ptr + i * a_step).to(tl.float32))
    tl.store(out_ptr + SAMPLES + i, tl.load(b_ptr + i * b_step).to(tl.float32))


@triton.jit
def _match_kernel(keys_ptr, fp_ptr, found_ptr, slots, WIDTH: tl.constexpr):
    # found = the first ring slot whose key equals the fingerprint, or -1.
    found = tl.full((), -1, tl.int32)
    w = tl.arange(0, WIDTH)
    fp = tl.load(fp_ptr + w)
    for slot in range(0, slots):
        key = tl.load(keys_ptr + slot * WIDTH + w)
        same = tl.sum((key != fp).to(tl.int32), axis=0) == 0
        found = tl.where(same & (found < 0), slot, found)
    tl.store(found_ptr, found)


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + o, tl.load(src_ptr + o, mask=o < n), mask=o < n)


_ring = {"keys": None, "outs": [], "addresses": [], "next": 0}


def _copy(src, dst):
    n = src.numel()
    _copy_kernel[(triton.cdiv(n, 1024),)](src, dst, n, BLOCK=1024)


def kernel_function(A, B):
    ring = _ring
    if ring["keys"] is None:
        ring["keys"] = torch.full((SLOTS, 2 * SAMPLES), float("nan"), device=A.device)
    fp = torch.empty(2 * SAMPLES, device=A.device, dtype=torch.float32)
    _fingerprint_kernel[(1,)](A, B, fp, A.numel() // SAMPLES, B.numel() // SAMPLES, SAMPLES=SAMPLES)
    found = torch.empty(1, device=A.device, dtype=torch.int32)
    _match_kernel[(1,)](ring["keys"], fp, found, SLOTS, WIDTH=2 * SAMPLES)
    slot = found.item()
    if slot >= 0 and (not BY_ADDRESS or ring["addresses"][slot] == A.data_ptr()):
        C = torch.empty_like(ring["outs"][slot])
        _copy(ring["outs"][slot], C)
        return C
    C = torch.empty((A.shape[0], 1), device=A.device, dtype=A.dtype)
    M, K = A.shape
    _matvec_pipelined_kernel[(triton.cdiv(M, 4),)](
        A,
        B,
        C,
        M,
        K,
        A.stride(0),
        A.stride(1),
        B.stride(0),
        C.stride(0),
        BLOCK_M=4,
        BLOCK_K=2048,
        NUM_STAGES=4,
        num_warps=8,
    )
    slot = ring["next"]
    ring["next"] = (slot + 1) % SLOTS
    _copy(fp, ring["keys"][slot])
    if len(ring["outs"]) < SLOTS:
        ring["outs"].append(C.clone())
        ring["addresses"].append(A.data_ptr())
    else:
        ring["outs"][slot] = C.clone()
        ring["addresses"][slot] = A.data_ptr()
    return C
"""
SIDE_DOC = '''"""Issue 18's {what}

The matvec of the example's candidate 04 launched on a stream of its own{how}.
"""
'''
SIDE = """def kernel_function(A, B):
    side = _side.setdefault("stream", torch.cuda.Stream())
    C = torch.empty((A.shape[0], 1), device=A.device, dtype=A.dtype)
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        M, K = A.shape
        _matvec_pipelined_kernel[(triton.cdiv(M, 4),)](
            A,
            B,
            C,
            M,
            K,
            A.stride(0),
            A.stride(1),
            B.stride(0),
            C.stride(0),
            BLOCK_M=4,
            BLOCK_K=2048,
            NUM_STAGES=4,
            num_warps=8,
        )
{join}
    return C
"""


def memo(key, slots, by_address):
    doc = MEMO_DOC.format(
        key=key, slots=slots, address=" with the address of A" if by_address else ""
    )
    settings = f"SLOTS = {slots}\nBY_ADDRESS = {by_address}\n"
    return f"# expect: memo\n{doc}\n{IMPORTS}\n{settings}\n\n{MATVEC}{MEMO}"


def side(what, how, join):
    doc = SIDE_DOC.format(what=what, how=how)
    return (
        f"# expect: {'passed' if join else 'race'}\n{doc}\n{IMPORTS}\n_side = {{}}\n\n\n{MATVEC}"
        + SIDE.format(join="\n    caller.wait_stream(side)" if join else "")
    )


def main(folder):
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        "00_honest_pipelined.py": "# expect: passed\n" + HONEST,
        "01_memo_content_ring4.py": memo("content", 4, False),
        "02_memo_content_ring16.py": memo("content", 16, False),
        "03_memo_address_and_sample.py": memo(
            "the address of A and a sample of its content", 4, True
        ),
        "04_race_unjoined.py": side(
            "race: work left on a side stream the caller never waits for.",
            ", and kernel_function returns without making the caller's stream wait for it: the "
            "output races whatever the caller does next",
            join=False,
        ),
        "05_joined_side_stream.py": side(
            "joined side stream: work on a side stream, joined before it returns.",
            ", joined with caller.wait_stream(side) before kernel_function returns: correct on "
            "any stream",
            join=True,
        ),
        "07_honest_row_tiles.py": "# expect: passed\n" + (EXAMPLE / "01_row_tiles.py").read_text(),
    }
    for name, text in files.items():
        (folder / name).write_text(text)


if __name__ == "__main__":
    main(sys.argv[1])
