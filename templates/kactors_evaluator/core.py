"""The evaluator child's state and its requests: the problem's model and input draws with their
references, the candidate loaded, and verify, time and time_reference, each judged and then
audited. Forked by the zygote; makes the CUDA context in `start`."""

import os
import sys
import time
from pathlib import Path

import torch
import triton

import kernel_call

from . import timing, verify
from .verify import StreamGate
from .allowlist import load_allowlist
from .audit import Audit, checksums_of, guard_audit_hooks
from .checks import DEFAULT_TOLERANCE, Rules, compare, compare_blocks, reference_scale
from .draws import gib, plan_draws
from .gpu import (
    MEMORY_CAP_VARIABLE,
    aten_recorder_class,
    as_tensor_list,
    available_memory,
    cap_memory,
    checksum,
    clone_values,
    context_is_usable,
    describe_device,
    is_poisoned_context_error,
    scratch_root,
    set_triton_cache_dir,
    tensor_bytes,
)
from .protocol import (
    TAMPERED,
    Channel,
    EvaluatorError,
    InputsDoNotFit,
    Rejection,
    candidate_file,
    failed_reply,
    rejected,
    sanitize,
    serve,
    startup_failed,
    unjudged_verdict,
)

# Test-only (see evaluator.py's docstring); kactors never sets it.
INTEGRITY_VARIABLE = "KACTORS_EVALUATOR_INTEGRITY"
MIN_L2_FLUSH_BYTES = 256 << 20


class Draw:
    """One input draw: pristine inputs (never handed to a candidate) and its reference output."""

    def __init__(self, seed, inputs, expected):
        self.seed = seed
        self.inputs = inputs
        self.expected = expected
        self.expected_sums = checksum(expected)
        # Each reference output's RMS: how small the absolute tolerance gets (checks.Rules).
        self.scales = [reference_scale(t) for t in expected]


class Candidate:
    def __init__(self, path, module, function, binding):
        self.path = path
        self.module = module
        self.function = function
        # kernel_call.Binding: the arguments after the inputs, from the model's attributes.
        self.binding = binding
        # None until a verify request of this process has judged it.
        self.passed = None
        self.kernel_names = []
        # Unknown until verified: time such a candidate the careful way.
        self.mutates_inputs = True
        self.side_streams = True


class Evaluator:
    # Attributes of the evaluator that change from request to request by its own hand; the
    # audit leaves them out of its snapshot of the evaluator's state.
    VOLATILE = frozenset(
        {
            "candidate",
            "candidates_loaded",
            "compiled_model",
            "ran_candidate_code",
        }
    )

    def __init__(self, kernel_dir, settings):
        self.kernel_dir = kernel_dir
        self.settings = settings
        self.allowlist = load_allowlist(settings.allowlist_path)
        self.launch_log = kernel_call.LaunchLog()
        self.stream_gate = StreamGate()
        self.recorder_class = None
        self.audit = None
        self.candidate = None
        self.candidates_loaded = 0
        self.compiled_model = None
        self.integrity = os.environ.get(INTEGRITY_VARIABLE, "on") != "off"
        self.ran_candidate_code = False

    def prepare(self):
        """In the zygote: what every child needs and no CUDA context does. The first use of a
        dispatch mode took 5 s on the H200 (lazy imports inside torch): a tiny CPU operation
        under one here pays that once for all children. (Not under the recorder, which asks
        CUDA for the current stream; and too small for CPU threads to start, which would not
        survive a fork.)"""
        kernel_call.install_launch_hook(triton, self.launch_log)
        kernel_call.install_launch_hook(triton, self.stream_gate)
        self.recorder_class = aten_recorder_class()
        from torch.utils._python_dispatch import TorchDispatchMode

        class FirstUse(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                str(func)
                return func(*args, **(kwargs or {}))

        with torch.no_grad(), FirstUse():
            probe = torch.ones(8)
            torch.empty_like(probe).copy_(probe)
        self.audit = Audit(
            self,
            own_kernels=[
                ("compare_blocks", compare_blocks),
                ("change_blocks", timing.change_blocks),
            ],
        )

    def fork_hazard(self):
        """Why a child forked now could not use CUDA, or None."""
        if torch.cuda.is_initialized():
            return "the zygote made a CUDA context: a forked child could not use the device"
        return None

    def start(self):
        started = time.perf_counter()
        torch.cuda.set_device(0)
        device, versions, props = describe_device()
        cap_gib = os.environ.get(MEMORY_CAP_VARIABLE)
        self.memory_cap = None if cap_gib is None else cap_memory(cap_gib, props.total_memory)
        sys.path.append(str(self.kernel_dir))
        problem = kernel_call.load_module(self.kernel_dir / "problem.py", "kactors_problem")
        try:
            # The --config dtype wins, then problem.DTYPE, then bf16.
            self.dtype = kernel_call.resolve_dtype(torch, self.settings.dtype, problem)
        except kernel_call.CallError as error:
            raise EvaluatorError(str(error)) from None
        tolerance = DEFAULT_TOLERANCE[str(self.dtype).replace("torch.", "")]
        atol = self.settings.atol if self.settings.atol is not None else tolerance
        rtol = self.settings.rtol if self.settings.rtol is not None else tolerance
        rel_l2 = self.settings.rel_l2 if self.settings.rel_l2 is not None else tolerance
        self.rules = Rules(atol, rtol, rel_l2, self.allowlist)
        self.declared_min_bytes = declared_min_bytes(problem)
        l2_bytes = getattr(props, "L2_cache_size", 0) or 0
        flush_bytes = self.settings.l2_flush_bytes or max(2 * l2_bytes, MIN_L2_FLUSH_BYTES)
        memory = self.draw_inputs(problem, flush_bytes, props)
        memory["l2_bytes"] = l2_bytes
        memory["declared_min_bytes"] = self.declared_min_bytes
        self.l2_flush = torch.zeros(flush_bytes, dtype=torch.uint8, device="cuda")
        self.warm_up_own_paths()
        ready = {
            "type": "ready",
            "device": device,
            "versions": versions,
            "dtype": str(self.dtype).replace("torch.", ""),
            "draws": len(self.draws),
            "seeds": self.settings.seeds,
            "memory": memory,
            "atol": atol,
            "rtol": rtol,
            "rel_l2": rel_l2,
            "first_seed": self.settings.first_seed,
            "l2_flush_bytes": flush_bytes,
        }
        if self.integrity:
            ready["integrity"] = self.audit.start()
        self.audit.reset_memory_baseline()
        ready["setup_s"] = round(time.perf_counter() - started, 4)
        return ready

    def draw_inputs(self, problem, flush_bytes, props):
        """Builds the model and the draws: all `seeds` when they fit in the device's memory,
        else as many as fit but at least two, judged from the first draw's size and peak."""
        first = self.settings.first_seed
        seeds = list(range(first, first + self.settings.seeds))
        device_name = props.name
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        # torch.device("cuda") as a context only around the problem's own code: set globally
        # it would add a Python function-mode hop to every torch call of every timed run.
        with torch.device("cuda"):
            self.model = kernel_call.build_model(torch, problem, self.dtype, seeds[0])
            self.draws = []
            try:
                self.draws.append(self.make_draw(problem, seeds[0]))
            except torch.OutOfMemoryError as error:
                raise InputsDoNotFit(
                    f"the problem's inputs do not fit on {device_name}: more than "
                    f"{gib(torch.cuda.max_memory_allocated() - before)} needed for one draw, "
                    f"{gib(available_memory(self.memory_cap))} free"
                ) from error
            first = self.draws[0]
            sizes = {
                "inputs_bytes": sum(tensor_bytes(v) for v in first.inputs),
                "outputs_bytes": sum(tensor_bytes(t) for t in first.expected),
                "first_draw_peak_bytes": torch.cuda.max_memory_allocated() - before,
                "flush_bytes": flush_bytes,
            }
            # What this process may hold: what its allocator holds now plus what the device
            # has free, within a cap where one is set.
            available = available_memory(self.memory_cap) + torch.cuda.memory_reserved()
            keep, needed = plan_draws(len(seeds), sizes, available, device_name)
            for seed in seeds[1:keep]:
                try:
                    self.draws.append(self.make_draw(problem, seed))
                except torch.OutOfMemoryError:
                    if len(self.draws) < 2:
                        raise InputsDoNotFit(
                            f"the problem's inputs do not fit on {device_name}: "
                            f"{gib(needed[1])} needed, {gib(available)} free"
                        ) from None
                    break
        if len(self.draws) < len(seeds):
            print(
                f"kactors evaluator: {len(self.draws)} of {len(seeds)} input draws kept: "
                f"{len(seeds)} need {gib(needed[-1])}, {gib(available)} free",
                file=sys.stderr,
                flush=True,
            )
        return {"available_bytes": available, "needed_bytes": needed, **sizes}

    def make_draw(self, problem, seed):
        inputs = kernel_call.draw_inputs(torch, problem, self.dtype, seed)
        with torch.no_grad():
            expected = as_tensor_list(self.model(*inputs), "Model.forward")
        return Draw(seed, inputs, [t.detach() for t in expected])

    def warm_up_own_paths(self):
        """The comparison, the checksums, the events and the CPU's thread pool have first-use
        costs, and starting a thread pool inside a candidate's call would look like a thread the
        candidate left: pay them here, in setup_s, not in the first candidate's overhead."""
        probe = torch.ones(1024, device="cuda", dtype=self.dtype)
        with torch.no_grad(), self.recorder_class(torch.cuda.current_stream().cuda_stream):
            copy = torch.empty_like(probe)
            copy.copy_(probe)
        compare(copy, probe, self.rules.atol, self.rules.rtol)
        timing.change_content([probe], [copy], 1 << 40)
        reference_scale(copy)
        checksum([copy])
        checksums_of([copy, self.l2_flush])
        torch.ones(1 << 16).sum().item()
        self.stream_gate.calibrate()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        self.l2_flush.zero_()
        end.record()
        end.synchronize()
        start.elapsed_time(end)

    def reference_of(self, inputs):
        """The problem's reference outputs for `inputs` (left as they are) and their scales."""
        with torch.device("cuda"), torch.no_grad():
            expected = as_tensor_list(self.model(*clone_values(inputs)), "Model.forward")
        expected = [t.detach() for t in expected]
        return expected, [reference_scale(t) for t in expected]

    def kept_tensors(self):
        """(name, tensor) for every tensor the evaluator keeps between requests, as they are now."""
        for index, draw in enumerate(self.draws):
            for position, value in enumerate(draw.inputs):
                if isinstance(value, torch.Tensor):
                    yield f"draw {index} input {position}", value
            for position, value in enumerate(draw.expected):
                yield f"draw {index} reference {position}", value
        for name, value in self.model.named_parameters():
            yield f"model parameter {name}", value
        for name, value in self.model.named_buffers():
            yield f"model buffer {name}", value
        yield "L2 flush buffer", self.l2_flush

    # -- requests -------------------------------------------------------------------------------

    def handle(self, request):
        """The reply to one request past its type and id: {"ok": True, ...} or a failure."""
        op = request.get("op")
        if op in ("verify", "time"):
            return self.judge(op, request)
        if op == "time_reference":
            body = self.time_reference(request)
            # PyTorch's own code (torch.compile's above all) may keep memory: the new baseline.
            self.audit.reset_memory_baseline()
            return {"ok": True, **body}
        raise EvaluatorError(f"unknown op {op!r}; accepted: verify, time, time_reference, shutdown")

    def failure(self, error):
        """A failed request's reply fields (called inside the `except`)."""
        return failed_reply(error, is_poisoned_context_error(error) or not context_is_usable())

    def judge(self, op, request):
        """Runs a verify or time request, then audits what the candidate's code left behind.

        A change to the evaluator's state makes the verdict "tampered with the evaluator's
        state", whatever the candidate's output was; after that, after any failure of the
        candidate's code and after any rejection that is not a plain wrong answer the reply says
        `restarting`: the child exits and the zygote forks a fresh one.
        """
        self.audit.state_before = None
        self.ran_candidate_code = False
        body = failure = None
        try:
            body = self.verify(request) if op == "verify" else self.time_candidate(request)
        except BaseException as error:  # a candidate may raise anything, SystemExit included
            if is_poisoned_context_error(error) or not context_is_usable():
                return failed_reply(error, fatal=True)
            failure = failed_reply(error, fatal=False)
        plain = body is not None and body.pop("plain", False)
        ends_candidate = body is None or op == "time" or not body["passed"]
        if ends_candidate:
            self.unload_candidate()
        reply = failure if body is None else {"ok": True, **body}
        if self.integrity and self.audit.state_before is not None:
            started = time.perf_counter()
            try:
                checksums, changes = self.audit.check(ends_candidate)
            except BaseException as error:
                # A sticky device error shows here at the latest: the synchronize fails.
                if is_poisoned_context_error(error) or not context_is_usable():
                    return failed_reply(error, fatal=True)
                # Whatever broke the audit itself was done to the evaluator's state.
                checksums = []
                changes = [f"the evaluator's own audit failed: {type(error).__name__}: {error}"]
            integrity = {"checksums": checksums, "audit_s": round(time.perf_counter() - started, 4)}
            if changes:
                found = "; ".join(changes)
                reason = f"{TAMPERED}: {found}"
                verdict = unjudged_verdict() if op == "verify" else {}
                if op == "verify" and body is not None:
                    verdict.update(body)
                verdict.update(passed=False, reason=reason)
                return {
                    "ok": True,
                    **verdict,
                    "tampered": found,
                    "integrity": integrity,
                    "restarting": True,
                }
            reply["integrity"] = integrity
        rejected_body = body is not None and not body["passed"] and not plain
        reply["restarting"] = self.ran_candidate_code and (failure is not None or rejected_body)
        return reply

    def begin_candidate_code(self):
        """Called right before the candidate's code first runs in a request (its import, or its
        first call): what the audit compares with."""
        self.ran_candidate_code = True
        if self.integrity:
            self.audit.begin()

    def load_candidate(self, path):
        self.candidate = None
        if not path.is_file():
            raise EvaluatorError(f"candidate {path} does not exist")
        self.candidates_loaded += 1
        # Generated code is untrusted: whatever it writes by a relative path lands in its own
        # folder of the run directory, never in the kernel directory or another candidate's.
        os.chdir(path.parent)
        name = f"kactors_candidate_{self.candidates_loaded}"
        sys.modules.pop(f"kactors_candidate_{self.candidates_loaded - 1}", None)
        self.begin_candidate_code()
        module = kernel_call.load_module(path, name)
        try:
            function = kernel_call.kernel_function_of(module, path)
            binding = kernel_call.bind(function, len(self.draws[0].inputs), self.model)
        except kernel_call.CallError as error:
            raise Rejection(str(error)) from None
        self.candidate = Candidate(path, module, function, binding)
        return self.candidate

    def unload_candidate(self):
        candidate, self.candidate = self.candidate, None
        if candidate is not None:
            sys.modules.pop(candidate.module.__name__, None)

    def fresh_inputs(self, draw):
        return clone_values(draw.inputs)

    def verify(self, request):
        path = candidate_file(request)
        set_triton_cache_dir(Path(request["cache_dir"]))
        verdict = unjudged_verdict()
        try:
            candidate = self.load_candidate(path)
            # Failed until proven otherwise: an exception below leaves it untimeable.
            candidate.passed = False
            verify.check_candidate(self, candidate, verdict)
            candidate.passed = verdict["passed"] = True
        except Rejection as rejection:
            verdict["reason"] = str(rejection)
            verdict["plain"] = rejection.plain
        return verdict

    def time_candidate(self, request):
        path = candidate_file(request)
        warmup, repeat = timing.benchmark_counts(self.settings, request)
        candidate = self.candidate
        if candidate is None or candidate.path != path:
            # A restarted evaluator: compile again (its Triton cache makes that quick) and time
            # it the careful way, since what verify would have learnt about it is unknown.
            cache_dir = request.get("cache_dir") or str(scratch_root() / "triton-cache" / path.stem)
            set_triton_cache_dir(Path(cache_dir))
            try:
                candidate = self.load_candidate(path)
            except Rejection as rejection:
                return rejected(str(rejection), rejection.plain)
            warmup = max(warmup, 1)
        elif candidate.passed is False:
            raise EvaluatorError(f"candidate {path} failed verification; it is not timed")
        else:
            self.begin_candidate_code()
        return timing.benchmark(
            self,
            candidate.function,
            candidate.binding,
            warmup,
            repeat,
            restore_every_call=candidate.mutates_inputs,
            device_wide_end=candidate.side_streams,
            candidate_kernels=candidate.kernel_names,
        )

    def time_reference(self, request):
        which = request.get("which")
        warmup, repeat = timing.benchmark_counts(self.settings, request)
        if which == "eager":
            function = self.model
        elif which == "compile":
            # Inductor's own Triton kernels go to a cache of their own, not a candidate's.
            set_triton_cache_dir(scratch_root() / "torch-compile-cache")
            if self.compiled_model is None:
                self.compiled_model = torch.compile(self.model)
                # The first call compiles; it must not be a sample.
                warmup = max(warmup, 1)
            function = self.compiled_model
        else:
            raise EvaluatorError(f"time_reference which={which!r}; accepted: eager, compile")
        return timing.benchmark(
            self,
            function,
            kernel_call.Binding([], []),
            warmup,
            repeat,
            restore_every_call=False,
            device_wide_end=False,
            candidate_kernels=None,
        )


def declared_min_bytes(problem):
    """problem.py's MIN_BYTES: the bytes a correct kernel must move at least, declared by a
    problem whose output does not depend on all of its inputs (issue 18); None when absent."""
    value = getattr(problem, "MIN_BYTES", None)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise EvaluatorError(
            f"problem.py MIN_BYTES must be a whole number of bytes >= 0, got {value!r}"
        )
    return value


def serve_child(evaluator, connection):
    """The evaluator child, forked by the zygote: makes the CUDA context, builds the inputs and
    references, says `ready` and serves requests over `connection` (never fds 3 and 4)."""
    guard_audit_hooks()
    requests = connection.makefile("r", encoding="utf-8")
    channel = Channel(connection.makefile("w", encoding="utf-8"))
    try:
        ready = evaluator.start()
    except (Exception, SystemExit) as error:
        channel.send(startup_failed(error))
        return 2
    channel.send(sanitize(ready))
    return serve(evaluator, requests, channel)
