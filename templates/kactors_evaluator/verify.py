"""Verification: a candidate's first call (compile and autotune), then one checked call per
draw, each on a fresh copy of the draw's inputs: its own Triton kernels launched, no PyTorch
operation the allowlist refuses, outputs like the reference's, a fresh output buffer for each
call, an output that changes when the inputs do."""

import time

import torch

import kernel_call

from .gpu import checksum, poison, storage_of
from .protocol import Rejection


def check_candidate(evaluator, candidate, verdict):
    fn, timing_stream = candidate.function, torch.cuda.current_stream().cuda_stream
    # The first call compiles and autotunes, outside the aten recorder: Triton's autotuner
    # runs PyTorch operations of its own (cache flushes, timing) that are not the candidate's.
    inputs = evaluator.fresh_inputs(evaluator.draws[0])
    started = time.perf_counter()
    with evaluator.launch_log.window(), torch.no_grad():
        args, kwargs = candidate.binding.arguments(inputs)
        result = fn(*args, **kwargs)
        torch.cuda.synchronize()
    verdict["compile_s"] = round(time.perf_counter() - started, 4)
    # Every buffer the candidate could hand back again is held and holds NaN from here on:
    # a reused buffer is rejected by address, and an unwritten one cannot pass as an answer.
    held = evaluator.rules.output_tensors(result, inputs)
    for tensor in held:
        poison(tensor)
    held_storages = {storage_of(t) for t in held}
    del result, inputs, args, kwargs
    launched, aten_ops = [], []
    run_s = 0.0
    mutates, side_streams = False, False
    previous_sums = None
    for index, draw in enumerate(evaluator.draws):
        inputs = evaluator.fresh_inputs(draw)
        args, kwargs = candidate.binding.arguments(inputs)
        if index == 0:
            # The verified call, as the profiled wrapper's measured call must be too.
            kernel_call.record_call("evaluator", candidate.path, fn, args, kwargs)
        recorder = evaluator.recorder_class(timing_stream)
        started = time.perf_counter()
        with evaluator.launch_log.window() as log, torch.no_grad():
            with recorder:
                result = fn(*args, **kwargs)
            torch.cuda.synchronize()
        run_s += time.perf_counter() - started
        verdict["run_s"] = round(run_s, 4)
        for name in log.names:
            if name not in launched:
                launched.append(name)
        for name in recorder.ops:
            if name not in aten_ops:
                aten_ops.append(name)
        verdict["launched"], verdict["aten_ops"] = launched, aten_ops
        side_streams = side_streams or recorder.off_stream
        side_streams = side_streams or any(s != timing_stream for s in log.streams)
        evaluator.rules.check_own_work(log.names, recorder.ops, f"draw {index}")
        outputs = evaluator.rules.output_tensors(result, inputs)
        input_storages = {storage_of(v) for v in inputs if isinstance(v, torch.Tensor)}
        for tensor in outputs:
            storage = storage_of(tensor)
            if storage in held_storages:
                raise Rejection(
                    f"kernel_function returned the same output buffer for different inputs "
                    f"(draw {index} got a buffer an earlier call returned)"
                )
        evaluator.rules.check_outputs(outputs, draw, f"draw {index} (seed {draw.seed})", verdict)
        sums = checksum(outputs)
        if (
            index > 0
            and sums == previous_sums
            and draw.expected_sums != evaluator.draws[index - 1].expected_sums
        ):
            raise Rejection(
                f"the output did not change when the inputs did (draws {index - 1} and {index})",
                plain=True,
            )
        previous_sums = sums
        mutates = mutates or any(
            isinstance(mine, torch.Tensor) and not torch.equal(mine, pristine)
            for mine, pristine in zip(inputs, draw.inputs)
        )
        mutates = mutates or any(storage_of(t) in input_storages for t in outputs)
        for tensor in outputs:
            poison(tensor)
        held.extend(outputs)
        held_storages.update(storage_of(t) for t in outputs)
        del result, inputs, args, kwargs
    candidate.kernel_names = launched
    candidate.mutates_inputs = mutates
    candidate.side_streams = side_streams
