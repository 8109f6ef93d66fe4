# expect: memo
"""Issue 18's adversary: a memo keyed by content, a ring of 4.

It fingerprints 4096 evenly spaced elements of A and B on the GPU, keeps its last 4
results in a ring, and on a fingerprint it has seen copies the kept result out instead of
computing. Every call launches Triton kernels, returns a fresh buffer, and the values are right
for inputs it has seen: the evaluator of old timed it at the cost of a copy.
"""

import torch
import triton
import triton.language as tl

SLOTS = 4
BY_ADDRESS = False


@triton.jit
def _matvec_pipelined_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_cm,
    BLOCK_M: tl.constexpr,
    BLOCK_K: tl.constexpr,
    NUM_STAGES: tl.constexpr,
):
    pid = tl.program_id(0)
    # 64-bit row indices: row * stride_am reaches 2^31 in A.
    rows = pid.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < M
    cols = tl.arange(0, BLOCK_K)
    a_rows = a_ptr + rows[:, None] * stride_am
    acc = tl.zeros([BLOCK_M, BLOCK_K], dtype=tl.float32)
    for k0 in tl.range(0, K, BLOCK_K, num_stages=NUM_STAGES):
        k = k0 + cols
        k_ok = k < K
        b = tl.load(b_ptr + k * stride_bk, mask=k_ok, other=0.0, eviction_policy="evict_last").to(
            tl.float32
        )
        a = tl.load(
            a_rows + k[None, :] * stride_ak,
            mask=row_ok[:, None] & k_ok[None, :],
            other=0.0,
            eviction_policy="evict_first",
        )
        acc += a.to(tl.float32) * b[None, :]
    out = tl.sum(acc, axis=1)
    tl.store(c_ptr + rows * stride_cm, out.to(c_ptr.dtype.element_ty), mask=row_ok)


SAMPLES = 4096


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
