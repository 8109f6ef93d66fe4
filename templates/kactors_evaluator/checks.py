"""The rules a candidate's outputs and its own work are judged by: the comparison with the
reference (a Triton kernel, one read of each side), the tolerance, and what kernel_function
may launch and run besides its own Triton kernels."""

import math
import re

import torch
import triton
import triton.language as tl

from .allowlist import disallowed_ops
from .gpu import as_tensor_list
from .protocol import Rejection

# atol = rtol by dtype, as KernelAgent's test.py uses for bf16.
DEFAULT_TOLERANCE = {"bfloat16": 1e-2, "float16": 1e-2, "float32": 1e-4}
# Elements per program of the comparison kernel.
COMPARE_BLOCK = 4096
# Inductor names the Triton kernels it generates triton_<kind>_...: a candidate that hands its
# work to torch.compile launches Triton kernels without having written any.
INDUCTOR_KERNEL_NAME = re.compile(r"^triton_(poi|red|per|tem|for|unk|spl)_")


@triton.jit
def compare_blocks(
    a_ptr,
    e_ptr,
    abs_ptr,
    rel_ptr,
    bad_ptr,
    nonfinite_ptr,
    sq_diff_ptr,
    sq_ref_ptr,
    n,
    atol,
    rtol,
    BLOCK: tl.constexpr,
):
    # Per block: max |a - e|, max |a - e| / |e| where e != 0 (both over finite differences),
    # the elements out of tolerance, the non-finite elements of a, and the sums of (a - e)^2
    # and e^2 over finite values (the relative L2 error and the reference's scale). One read
    # of each side: a 3.5 GiB output is compared in about 2 ms, where float32 torch operations
    # took 70 ms.
    block = tl.program_id(0)
    offsets = block.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = offsets < n
    a = tl.load(a_ptr + offsets, mask=inside, other=0.0).to(tl.float32)
    e = tl.load(e_ptr + offsets, mask=inside, other=0.0).to(tl.float32)
    diff = tl.abs(a - e)
    # Finite means an exponent that is not all ones; bit tests survive any float rewriting.
    a_finite = (a.to(tl.int32, bitcast=True) & 0x7F800000) != 0x7F800000
    e_finite = (e.to(tl.int32, bitcast=True) & 0x7F800000) != 0x7F800000
    diff_finite = (diff.to(tl.int32, bitcast=True) & 0x7F800000) != 0x7F800000
    # A NaN difference compares false: out of tolerance, as in torch.allclose.
    good = (diff <= atol + rtol * tl.abs(e)) & a_finite
    usable = inside & diff_finite
    rel_usable = usable & (e != 0.0)
    rel = diff / tl.where(rel_usable, tl.abs(e), 1.0)
    tl.store(abs_ptr + block, tl.max(tl.where(usable, diff, 0.0), axis=0))
    tl.store(rel_ptr + block, tl.max(tl.where(rel_usable, rel, 0.0), axis=0))
    tl.store(bad_ptr + block, tl.sum(tl.where(inside & (good == 0), 1, 0), axis=0))
    tl.store(nonfinite_ptr + block, tl.sum(tl.where(inside & (a_finite == 0), 1, 0), axis=0))
    tl.store(sq_diff_ptr + block, tl.sum(tl.where(usable, diff * diff, 0.0), axis=0))
    tl.store(sq_ref_ptr + block, tl.sum(tl.where(inside & e_finite, e * e, 0.0), axis=0))


class Comparison:
    """What compare found: the largest errors, the elements out of tolerance, the non-finite
    elements of the output, and the squared L2 norms of the difference and of the reference."""

    def __init__(self, max_abs, max_rel, bad, nonfinite, sq_diff, sq_ref, n):
        self.max_abs = max_abs
        self.max_rel = max_rel
        self.bad = bad
        self.nonfinite = nonfinite
        self.sq_diff = sq_diff
        self.sq_ref = sq_ref
        self.n = n

    def rel_l2(self):
        """||a - e|| / ||e||, or None for an all-zero reference, where it means nothing."""
        return math.sqrt(self.sq_diff / self.sq_ref) if self.sq_ref > 0 else None


def compare(actual, expected, atol, rtol):
    """The Comparison of `actual` with `expected`.

    The tolerance is torch.allclose's, |actual - expected| <= atol + rtol * |expected|, in
    float32. A NaN or Inf in actual is always out of tolerance. The relative error is taken
    where expected is non-zero; both maxima and the difference's norm leave out non-finite
    differences.
    """
    a = actual.detach().contiguous().view(-1)
    e = expected.detach().contiguous().view(-1)
    n = a.numel()
    if n == 0:
        return Comparison(0.0, 0.0, 0, 0, 0.0, 0.0, 0)
    blocks = triton.cdiv(n, COMPARE_BLOCK)
    maxima = torch.empty((2, blocks), dtype=torch.float32, device=a.device)
    counts = torch.empty((2, blocks), dtype=torch.int32, device=a.device)
    squares = torch.empty((2, blocks), dtype=torch.float32, device=a.device)
    # No fused multiply-add: atol + rtol * |e| rounds as torch.allclose's separate operations
    # do, so an element exactly at the tolerance gets the same verdict.
    compare_blocks[(blocks,)](
        a,
        e,
        maxima[0],
        maxima[1],
        counts[0],
        counts[1],
        squares[0],
        squares[1],
        n,
        atol,
        rtol,
        BLOCK=COMPARE_BLOCK,
        num_warps=8,
        enable_fp_fusion=False,
    )
    values = torch.cat(
        [maxima.amax(dim=1).double(), counts.sum(dim=1).double(), squares.double().sum(dim=1)]
    ).tolist()
    return Comparison(values[0], values[1], int(values[2]), int(values[3]), values[4], values[5], n)


def reference_scale(expected):
    """The reference's typical magnitude, its root mean square over finite values: the
    absolute tolerance shrinks with it below 1 (issue 18), so that outputs of order 1e-6 are not
    judged by a tolerance of 1e-2."""
    comparison = compare(expected, expected, math.inf, 0.0)
    return math.sqrt(comparison.sq_ref / comparison.n) if comparison.n else 0.0


class Rules:
    """The tolerance and the allowlist one evaluator child judges every candidate by.

    An output passes when every element is within |a - e| <= atol' + rtol * |e| and the whole
    is within ||a - e|| / ||e|| <= rel_l2. atol' is atol times the reference's RMS where that
    is below 1, else atol itself: KernelAgent's 1e-2 where outputs are of order one, and a
    tolerance that scales with outputs far smaller than that.
    """

    def __init__(self, atol, rtol, rel_l2, allowlist):
        self.atol = atol
        self.rtol = rtol
        self.rel_l2 = rel_l2
        self.allowlist = allowlist

    def applied_atol(self, scale):
        return self.atol * scale if 0.0 < scale < 1.0 else self.atol

    def describe(self, scale):
        """The rule an output of this reference scale is judged by, in words."""
        applied = self.applied_atol(scale)
        scaled = (
            f" (atol {self.atol:g} times the reference's RMS {scale:.3g})"
            if applied != self.atol
            else ""
        )
        return (
            f"|a - e| <= {applied:.3g} + {self.rtol:g} × |e|{scaled}, "
            f"and ||a - e|| / ||e|| <= {self.rel_l2:g}"
        )

    def check_own_work(self, launch_names, op_names, which):
        if not launch_names:
            raise Rejection(f"no triton kernel launched during kernel_function ({which})")
        generated = sorted({n for n in launch_names if INDUCTOR_KERNEL_NAME.match(n)})
        if generated:
            raise Rejection(
                f"kernel_function launched kernels generated by torch.compile, not its own: "
                f"{', '.join(generated)} ({which})"
            )
        rejected = disallowed_ops(op_names, self.allowlist)
        if rejected:
            raise Rejection(
                f"kernel_function ran PyTorch operations that are not allowed: "
                f"{', '.join(rejected)} ({which}); see data/aten_allowlist.yaml"
            )

    def output_tensors(self, result, inputs):
        if result is None:
            # KernelAgent's in-place convention: the result is written into the first input.
            if not inputs or not isinstance(inputs[0], torch.Tensor):
                raise Rejection("kernel_function returned None and its first input is not a tensor")
            return [inputs[0]]
        return as_tensor_list(result, "kernel_function")

    def check_outputs(self, outputs, expected_outputs, scales, which, errors):
        """Rejects outputs unlike the reference (`expected_outputs`, each of RMS `scales`);
        errors' max_abs_err, max_rel_err and rel_l2_err grow to the largest seen, also when
        the outputs are rejected, and its `rule` is the first output's."""
        if len(outputs) != len(expected_outputs):
            raise Rejection(
                f"kernel_function returned {len(outputs)} tensors, the reference "
                f"{len(expected_outputs)} ({which})",
                plain=True,
            )
        for position, (actual, expected, scale) in enumerate(
            zip(outputs, expected_outputs, scales)
        ):
            label = which if len(outputs) == 1 else f"{which}, output {position}"
            if actual.device.type != expected.device.type:
                raise Rejection(
                    f"output is on {actual.device}, expected {expected.device} ({label})",
                    plain=True,
                )
            if tuple(actual.shape) != tuple(expected.shape):
                raise Rejection(
                    f"output shape {tuple(actual.shape)}, expected {tuple(expected.shape)} "
                    f"({label})",
                    plain=True,
                )
            atol = self.applied_atol(scale)
            found = compare(actual, expected, atol, self.rtol)
            errors["max_abs_err"] = max(errors.get("max_abs_err") or 0.0, found.max_abs)
            errors["max_rel_err"] = max(errors.get("max_rel_err") or 0.0, found.max_rel)
            rel_l2 = found.rel_l2()
            if rel_l2 is not None:
                errors["rel_l2_err"] = max(errors.get("rel_l2_err") or 0.0, rel_l2)
            if errors.get("rule") is None:
                errors["rule"] = self.describe(scale)
            if found.nonfinite:
                raise Rejection(
                    f"output holds {found.nonfinite} NaN or Inf values ({label})", plain=True
                )
            if found.bad:
                raise Rejection(
                    f"{found.bad} of {actual.numel()} output elements exceed atol={atol:.3g}, "
                    f"rtol={self.rtol}: max abs err {found.max_abs:.6g}, max rel err "
                    f"{found.max_rel:.6g} (output dtype {actual.dtype}, reference dtype "
                    f"{expected.dtype}; {self.describe(scale)}) ({label})",
                    plain=True,
                )
            if rel_l2 is not None and rel_l2 > self.rel_l2:
                raise Rejection(
                    f"the relative L2 error ||a - e|| / ||e|| is {rel_l2:.3g}, above "
                    f"{self.rel_l2:g} ({label})",
                    plain=True,
                )
