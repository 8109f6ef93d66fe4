"""Verification: a candidate's first call (compile and autotune), then one checked call per
draw, each on a fresh copy of the draw's inputs: its own Triton kernels launched, no PyTorch
operation the allowlist refuses, its output complete on the caller's stream when it returns,
outputs like the reference's, a fresh output buffer for each call, an output that changes when
the inputs do."""

import contextlib
import time

import torch

import kernel_call

from . import compiled
from .gpu import checksum, poison, storage_of
from .protocol import Rejection

UNJOINED = (
    "the output was not ready on the caller's stream: kernel_function left work on another "
    "stream that the caller does not wait for"
)
# How long the gate holds a side stream back: twice the call's time before, within bounds. A
# caller's stream whose own work outlasts the gate could hide an unjoined stream, so the gate
# errs long; it costs only candidates that use side streams.
GATE_MIN_S = 0.005
GATE_MAX_S = 1.0


class StreamGate:
    """Holds back the work a call puts on any stream but the caller's (issue 18).

    Armed for one call, it queues a spin of a known length (torch.cuda._sleep) on each other
    stream right before the first Triton launch or PyTorch operation the call puts there, as
    Triton's launch hook and the aten recorder report them. When kernel_function returns, the
    caller's stream alone is waited for: if the caller's stream waits for that work (an event,
    wait_stream), the spin and the work are over by then; if it does not, a held-back stream
    is still busy, and the output was not ready where the caller would read it. Waiting for the
    whole device instead, as a synchronize does, hides the race.
    """

    def __init__(self):
        self.caller = None
        self.cycles = 0
        self.held = []
        self.cycles_per_s = None

    def calibrate(self):
        """Measures the device's spin rate once (cycles per second of torch.cuda._sleep)."""
        cycles = 1 << 20
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(cycles)
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        end.synchronize()
        self.cycles_per_s = cycles / max(start.elapsed_time(end) / 1e3, 1e-6)

    @contextlib.contextmanager
    def armed(self, caller, seconds):
        self.caller = caller
        self.cycles = int(self.cycles_per_s * seconds)
        self.held = []
        try:
            yield self
        finally:
            self.caller = None

    def __call__(self, metadata):
        """Triton's launch-enter hook."""
        if self.caller is None:
            return
        data = getattr(metadata, "data", metadata)
        if isinstance(data, dict):
            self.hold(data.get("stream"))

    def hold(self, stream):
        if self.caller is None or stream is None or stream == self.caller or stream in self.held:
            return
        self.held.append(stream)
        with torch.cuda.stream(torch.cuda.ExternalStream(stream)):
            torch.cuda._sleep(self.cycles)

    def unjoined(self):
        """Whether a held-back stream is still busy (call it once the caller's stream is done)."""
        return any(not torch.cuda.ExternalStream(stream).query() for stream in self.held)


def check_candidate(evaluator, candidate, verdict):
    caller = torch.cuda.current_stream()
    fn, timing_stream = candidate.function, caller.cuda_stream
    # The first call compiles and autotunes, outside the aten recorder: Triton's autotuner
    # runs PyTorch operations of its own (cache flushes, timing) that are not the candidate's.
    inputs = evaluator.fresh_inputs(evaluator.draws[0])
    started = time.perf_counter()
    with evaluator.launch_log.window(), torch.no_grad():
        args, kwargs = candidate.binding.arguments(inputs)
        result = fn(*args, **kwargs)
        torch.cuda.synchronize()
    previous_call_s = time.perf_counter() - started
    verdict["compile_s"] = round(previous_call_s, 4)
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
        gate = evaluator.stream_gate
        recorder = evaluator.recorder_class(timing_stream, on_side_stream=gate.hold)
        hold_s = min(max(2 * previous_call_s, GATE_MIN_S), GATE_MAX_S)
        # The first checked call's launches make the candidate's compiled fingerprint: its
        # kernels are compiled and tuned by now (issue 23).
        launches = (
            compiled.recording(getattr(fn, "__globals__", {}))
            if index == 0
            else contextlib.nullcontext()
        )
        started = time.perf_counter()
        with evaluator.launch_log.window() as log, torch.no_grad(), launches as record:
            with gate.armed(timing_stream, hold_s), recorder:
                result = fn(*args, **kwargs)
            caller_done = torch.cuda.Event()
            caller_done.record(caller)
            caller_done.synchronize()
            unjoined = gate.unjoined()
            torch.cuda.synchronize()
        call_s = time.perf_counter() - started
        run_s += call_s
        # The next gate's length, from this call's own time: without the spin it held back.
        previous_call_s = max(call_s - (hold_s if gate.held else 0.0), 0.0)
        if unjoined:
            raise Rejection(f"{UNJOINED} (draw {index})")
        verdict["run_s"] = round(run_s, 4)
        if record is not None:
            verdict["compiled"] = compiled.call_fingerprint(record, len(log.names), recorder.ops)
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
        evaluator.rules.check_outputs(
            outputs, draw.expected, draw.scales, f"draw {index} (seed {draw.seed})", verdict
        )
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
