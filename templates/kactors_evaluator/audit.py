"""The audit (issue 11): after every candidate call the child checks that nothing it keeps or
depends on changed. GPU checksums of every tensor it keeps, the identity of every function and
setting a verification depends on, the threads and processes it runs, the device memory it
holds. A change is tampering: the verdict says what changed, and the child is replaced."""

import gc
import os
import resource
import signal
import sys
import threading

import torch
import triton
import triton.language as tl

import kernel_call

from .protocol import EvaluatorError
from .snapshots import identity_key, namespace_keys, state_changes
from .zygote import children_of

PACKAGE = __name__.rpartition(".")[0]
# Words (of 4 bytes where the tensor allows) per program of the checksum kernel.
CHECKSUM_BLOCK = 8192


@triton.jit
def checksum_blocks(words_ptr, sums_ptr, n, BLOCK: tl.constexpr):
    # Per block: the int64 sum of each word mixed with its position, so that zeroing,
    # swapping or shifting words changes the sum, not only changing their total.
    block = tl.program_id(0)
    offsets = block.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = offsets < n
    words = tl.load(words_ptr + offsets, mask=inside, other=0).to(tl.int64)
    mixed = (words + 1 + offsets * 0x2545F4914F6CDD1D) * 0x5851F42D4C957F2D
    mixed = mixed ^ (mixed >> 31)
    tl.store(sums_ptr + block, tl.sum(tl.where(inside, mixed, 0), axis=0))


def checksum_words(tensor):
    """A tensor's bytes as one flat run of words (int32 where its size and offset allow)."""
    flat = tensor.detach()
    if flat.device.type != "cuda":
        flat = flat.to("cuda")
    flat = flat.contiguous().reshape(-1)
    for dtype in (torch.int32, torch.int16, torch.uint8):
        try:
            return flat.view(dtype)
        except RuntimeError:
            continue
    raise EvaluatorError(f"cannot read a {tensor.dtype} tensor as words for its checksum")


def checksums_of(tensors):
    """One 64-bit checksum per tensor, as 16 hex digits, from the checksum kernel: one pass over
    each tensor's bytes (about 4 TB/s on an H200), then one host synchronization for all."""
    parts = []
    for tensor in tensors:
        words = checksum_words(tensor)
        blocks = triton.cdiv(words.numel(), CHECKSUM_BLOCK)
        sums = torch.zeros(max(blocks, 1), dtype=torch.int64, device=words.device)
        if blocks:
            checksum_blocks[(blocks,)](
                words, sums, words.numel(), BLOCK=CHECKSUM_BLOCK, num_warps=8
            )
        parts.append(sums.sum())
    if not parts:
        return []
    return [format(value & 0xFFFFFFFFFFFFFFFF, "016x") for value in torch.stack(parts).tolist()]


def kernel_keys(function):
    """What identifies one of the evaluator's own Triton kernels: the JITFunction's attributes,
    its pre-run hooks and each compiled variant (replaceable in its cache)."""
    keys = {name: identity_key(value) for name, value in list(vars(function).items())}
    keys["pre_run_hooks"] = ("value", repr([id(hook) for hook in function.pre_run_hooks]))
    for device, caches in list(function.device_caches.items()):
        for key, kernel in list(caches[0].items()):
            own = vars(kernel)
            keys[f"compiled variant {device}/{hash(key)}"] = (
                id(kernel),
                repr(own.get("function")),
                id(own.get("run", own.get("_run"))),
            )
    return keys


# ---------------------------------------------------------------------------------------------
# What a candidate could change behind the evaluator's back


# Modules whose functions a verification or the protocol depends on: a function of theirs that
# a candidate replaced (or removed) is tampering. Names added to a module are not (torch adds
# some lazily).
WATCHED_MODULES = (
    "builtins",
    "torch",
    "torch._C",
    "torch.nn.functional",
    "torch.cuda",
    "torch.backends.cuda",
    "torch.backends.cudnn",
    "torch.utils._python_dispatch",
    "triton",
    "triton.language",
    "triton.runtime.jit",
    "triton.runtime.autotuner",
    "triton.compiler.compiler",
    "contextlib",
    "ctypes",
    "gc",
    "importlib.util",
    "inspect",
    "json",
    "json.encoder",
    "linecache",
    "math",
    "os",
    "re",
    "signal",
    "socket",
    "sys",
    "threading",
    "time",
    "traceback",
    "types",
)
# Classes whose attributes a verification depends on; here an added attribute counts too, since
# it shadows an inherited one (torch.Tensor.clone added over TensorBase's).
WATCHED_CLASSES = (
    ("torch", "Tensor"),
    ("torch._C", "TensorBase"),
    ("torch.nn", "Module"),
    ("torch.cuda", "Event"),
    ("torch.cuda", "Stream"),
    ("torch.utils._python_dispatch", "TorchDispatchMode"),
    ("triton.runtime.jit", "JITFunction"),
    ("triton.runtime.jit", "KernelInterface"),
    ("triton.runtime.autotuner", "Autotuner"),
    ("triton.compiler.compiler", "CompiledKernel"),
    ("json", "JSONEncoder"),
)


def watched_namespaces(recorder_class):
    """(label, namespace, callables only, additions count) for every module and class that the
    audit watches, resolved once, in the zygote: a candidate that swaps a module in sys.modules
    is seen by the sys.modules section, not followed."""
    namespaces = []
    for name in WATCHED_MODULES:
        module = sys.modules.get(name)
        if module is not None:
            namespaces.append((f"{name}.", module, True, False))
    for module_name, class_name in WATCHED_CLASSES:
        cls = getattr(sys.modules.get(module_name), class_name, None)
        if isinstance(cls, type):
            namespaces.append((f"{module_name}.{class_name}.", cls, False, True))
    namespaces.append(("AtenRecorder.", recorder_class, False, True))
    # The evaluator's own modules, and kernel_call, which loads, binds and launches every
    # candidate: every attribute of theirs and of their classes.
    own = sorted(
        (name, module)
        for name, module in list(sys.modules.items())
        if name == PACKAGE or name.startswith(PACKAGE + ".")
    )
    for label, module in own + [
        ("__main__", sys.modules["__main__"]),
        ("kernel_call", kernel_call),
    ]:
        namespaces.append((f"{label}.", module, False, True))
        for name, value in list(vars(module).items()):
            if isinstance(value, type) and value.__module__ == module.__name__:
                namespaces.append((f"{label}.{name}.", value, False, True))
    return namespaces


def settings_snapshot():
    """The process-wide settings a reference or a timing depends on, each as its repr."""
    values = {}

    def put(name, read):
        try:
            values[name] = repr(read())
        except Exception as error:
            values[name] = f"<unreadable: {type(error).__name__}>"

    matmul = torch.backends.cuda.matmul
    for flag in (
        "allow_tf32",
        "allow_fp16_reduced_precision_reduction",
        "allow_bf16_reduced_precision_reduction",
    ):
        put(f"torch.backends.cuda.matmul.{flag}", lambda flag=flag: getattr(matmul, flag))
    for flag in ("enabled", "benchmark", "deterministic", "allow_tf32"):
        put(f"torch.backends.cudnn.{flag}", lambda flag=flag: getattr(torch.backends.cudnn, flag))
    put("torch.get_float32_matmul_precision()", torch.get_float32_matmul_precision)
    put("torch.are_deterministic_algorithms_enabled()", torch.are_deterministic_algorithms_enabled)
    put(
        "torch.is_deterministic_algorithms_warn_only_enabled()",
        torch.is_deterministic_algorithms_warn_only_enabled,
    )
    put("torch.get_default_dtype()", torch.get_default_dtype)
    if hasattr(torch, "get_default_device"):
        put("torch.get_default_device()", torch.get_default_device)
    # torch.set_default_device and any mode a candidate entered and left open sit on these.
    put("the torch function mode stack's depth", torch._C._len_torch_function_stack)
    put("the torch dispatch mode stack's depth", torch._C._len_torch_dispatch_stack)
    put("torch.is_grad_enabled()", torch.is_grad_enabled)
    put("torch.is_inference_mode_enabled()", torch.is_inference_mode_enabled)
    put("torch.get_num_threads()", torch.get_num_threads)
    put("torch.cuda.current_device()", torch.cuda.current_device)
    put("torch.cuda.current_stream()", lambda: torch.cuda.current_stream().cuda_stream)
    put("torch.cuda.is_current_stream_capturing()", torch.cuda.is_current_stream_capturing)
    if hasattr(torch.cuda, "get_per_process_memory_fraction"):
        put(
            "torch.cuda.get_per_process_memory_fraction()",
            torch.cuda.get_per_process_memory_fraction,
        )
    runtime = getattr(getattr(triton, "knobs", None), "runtime", None)
    for hook in (
        "launch_enter_hook",
        "launch_exit_hook",
        "kernel_load_start_hook",
        "kernel_load_end_hook",
    ):
        chain = getattr(runtime, hook, None)
        put(
            f"triton.knobs.runtime.{hook}",
            lambda chain=chain: (id(chain), [id(call) for call in getattr(chain, "calls", ())]),
        )
    for hook in ("jit_cache_hook", "jit_post_compile_hook", "add_stages_inspection_hook"):
        put(f"triton.knobs.runtime.{hook}", lambda hook=hook: id(getattr(runtime, hook, None)))
    for group_name in dir(getattr(triton, "knobs", None)):
        group = getattr(triton.knobs, group_name, None)
        if type(group).__name__.endswith("_knobs"):
            # Only what was set explicitly: reading a knob may run a tool (ptxas --version).
            put(f"triton.knobs.{group_name}", lambda group=group: sorted(vars(group).items()))
    put("sys.gettrace()", sys.gettrace)
    put("sys.getprofile()", sys.getprofile)
    if hasattr(threading, "gettrace"):
        put("threading.gettrace()", threading.gettrace)
        put("threading.getprofile()", threading.getprofile)
    for hook in ("excepthook", "unraisablehook", "displayhook"):
        put(f"sys.{hook}", lambda hook=hook: getattr(sys, hook))
    put("threading.excepthook", lambda: threading.excepthook)
    put("sys.getswitchinterval()", sys.getswitchinterval)
    put("sys.getrecursionlimit()", sys.getrecursionlimit)
    put("sys.meta_path", lambda: [id(finder) for finder in sys.meta_path])
    put("sys.path_hooks", lambda: [id(hook) for hook in sys.path_hooks])
    put("gc.isenabled()", gc.isenabled)
    put("gc.get_threshold()", gc.get_threshold)
    put("gc.callbacks", lambda: [id(callback) for callback in gc.callbacks])
    for number in sorted(signal.valid_signals()):
        if number in (signal.SIGKILL, signal.SIGSTOP):
            continue
        put(f"the handler of signal {number}", lambda number=number: signal.getsignal(number))
    for timer in ("ITIMER_REAL", "ITIMER_VIRTUAL", "ITIMER_PROF"):
        put(
            f"signal.getitimer({timer})",
            lambda timer=timer: signal.getitimer(getattr(signal, timer)),
        )
    for limit in ("AS", "DATA", "NOFILE", "CPU", "FSIZE", "NPROC", "STACK", "CORE", "MEMLOCK"):
        if hasattr(resource, f"RLIMIT_{limit}"):
            put(
                f"resource limit RLIMIT_{limit}",
                lambda limit=limit: resource.getrlimit(getattr(resource, f"RLIMIT_{limit}")),
            )
    put("the CPU affinity", lambda: sorted(os.sched_getaffinity(0)))
    put("the scheduling priority", lambda: os.getpriority(os.PRIO_PROCESS, 0))
    return values


def torch_owned(thread):
    """Whether a Python thread runs torch's own code (torch.compile's worker pool keeps threads
    that come and go after a reference was timed)."""
    target = getattr(thread, "_target", None) or getattr(thread, "function", None)
    return getattr(target, "__module__", None) is not None and (
        target.__module__ == "torch" or target.__module__.startswith("torch.")
    )


def task_names():
    """{thread id: name} of this process's threads, as the kernel lists them."""
    names = {}
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/comm", encoding="utf-8", errors="replace") as comm:
                names[task] = comm.read().strip()
        except OSError:
            continue
    return names


# ---------------------------------------------------------------------------------------------


def guard_audit_hooks():
    """Audit hooks cannot be removed once added, and run inside whatever runs later: refuse
    every new one, so that no candidate can leave code behind that way."""

    def refuse_new_hooks(event, _args):
        if event == "sys.addaudithook":
            raise RuntimeError("the kactors evaluator accepts no audit hooks")

    sys.addaudithook(refuse_new_hooks)


class Audit:
    """One evaluator child's audit of itself: what it keeps, taken at start, and the state a
    candidate's code found, taken right before that code first ran in a request.

    `own_kernels` are the evaluator's own Triton kernels (name, JITFunction): each compiled
    variant is watched, since a candidate could replace one in its cache.
    """

    # Attributes that change from request to request by the audit's own hand.
    VOLATILE = frozenset({"state_before", "memory_baseline", "reserved_baseline"})

    def __init__(self, evaluator, own_kernels):
        self.evaluator = evaluator
        self.own_kernels = tuple(own_kernels) + (("checksum_blocks", checksum_blocks),)
        self.namespaces = watched_namespaces(evaluator.recorder_class)
        self.tensor_names = None
        self.expected_checksums = None
        self.state_before = None
        self.memory_baseline = None
        self.reserved_baseline = None

    def start(self):
        """The ready message's `integrity`: every kept tensor's name and checksum."""
        named = list(self.evaluator.kept_tensors())
        self.tensor_names = [name for name, _ in named]
        self.expected_checksums = checksums_of([tensor for _, tensor in named])
        return {"tensors": self.tensor_names, "checksums": self.expected_checksums}

    def begin(self):
        self.state_before = self.snapshot()

    def check(self, candidate_unloaded):
        """(each kept tensor's checksum, what changed since begin)."""
        torch.cuda.synchronize()
        named = list(self.evaluator.kept_tensors())
        checksums = checksums_of([tensor for _, tensor in named])
        names = [name for name, _ in named]
        changes = []
        if names != self.tensor_names:
            changes.append(f"the evaluator's tensors are now {names}, not {self.tensor_names}")
        else:
            changes.extend(
                f"{name} changed (its GPU checksum differs)"
                for name, now, then in zip(names, checksums, self.expected_checksums)
                if now != then
            )
        sections, tasks, threads, children = self.state_before
        changes.extend(state_changes(sections, self.snapshot()[0]))
        changes.extend(self.left_running(tasks, threads, children))
        if candidate_unloaded:
            changes.extend(self.leftover_memory())
        return checksums, changes

    def snapshot(self):
        """(sections for state_changes, thread ids, Python thread idents, child processes).

        A section that cannot be read (an attribute this Triton lacks) is recorded as such: the
        same in every snapshot, it reports nothing, and it never fails a candidate.
        """
        sections = {}

        def add(label, additions_count, read):
            try:
                sections[label] = (additions_count, read())
            except Exception as error:
                sections[label] = (False, {"(unreadable)": ("value", type(error).__name__)})

        for label, namespace, callables_only, additions_count in self.namespaces:
            add(
                label,
                additions_count,
                lambda namespace=namespace, callables_only=callables_only: namespace_keys(
                    namespace, callables_only
                ),
            )
        for label, owner in (("evaluator state: ", self.evaluator), ("audit state: ", self)):
            add(
                label,
                True,
                lambda owner=owner: {
                    k: identity_key(v) for k, v in vars(owner).items() if k not in owner.VOLATILE
                },
            )
        add("evaluator data: ", False, self.data_keys)
        add(
            "sys.modules entry ",
            False,
            lambda: {
                name: (id(module),)
                for name, module in list(sys.modules.items())
                if name in WATCHED_MODULES
                or name.split(".")[0] in ("triton", PACKAGE)
                or name == "kernel_call"
            },
        )
        add(
            "triton's driver: ",
            False,
            lambda: {k: identity_key(v) for k, v in vars(triton.runtime.driver.active).items()},
        )
        for name, kernel in self.own_kernels:
            add(f"evaluator kernel {name}: ", False, lambda kernel=kernel: kernel_keys(kernel))
        add("setting ", True, settings_snapshot)
        add("setting $", True, lambda: {k: repr(v) for k, v in os.environ.items()})
        return (
            sections,
            set(task_names()),
            {thread.ident for thread in threading.enumerate()},
            children_of(os.getpid()),
        )

    def data_keys(self):
        evaluator = self.evaluator
        keys = {"draws": (id(evaluator.draws), len(evaluator.draws))}
        for index, draw in enumerate(evaluator.draws):
            keys[f"draw {index}"] = (
                id(draw),
                id(draw.inputs),
                id(draw.expected),
                draw.seed,
                draw.expected_sums,
                tuple(identity_key(v) for v in draw.inputs),
                tuple(id(t) for t in draw.expected),
            )
        for name, tensor in evaluator.kept_tensors():
            keys[name] = (
                id(tensor),
                tensor.data_ptr(),
                tuple(tensor.shape),
                tuple(tensor.stride()),
                tensor.storage_offset(),
                str(tensor.dtype),
                str(tensor.device),
            )
        for name, module in evaluator.model.named_modules():
            keys[f"model module {name or '(root)'}"] = tuple(
                sorted((k, identity_key(v)) for k, v in vars(module).items())
            ) + tuple(len(v) for k, v in sorted(vars(module).items()) if k.endswith("_hooks"))
        rules = evaluator.rules
        keys["rules"] = tuple(
            sorted((k, identity_key(v)) for k, v in vars(rules).items() if k != "allowlist")
        )
        keys["allowlist"] = tuple(sorted(rules.allowlist.items()))
        keys["settings"] = tuple(sorted((k, repr(v)) for k, v in vars(evaluator.settings).items()))
        return keys

    def left_running(self, tasks, threads, children):
        """Threads and processes that the candidate started and left running."""
        found = []
        python = [t for t in threading.enumerate() if t.ident not in threads and not torch_owned(t)]
        if python:
            found.append(f"it left Python threads running: {', '.join(t.name for t in python)}")
        python_ids = {str(t.native_id) for t in python}
        torch_ids = {str(t.native_id) for t in threading.enumerate() if torch_owned(t)}
        native = {
            task: name
            for task, name in task_names().items()
            # The CUDA driver and torch's C++ start helper threads of their own (cuda-EvtHandlr,
            # pt_autograd_0 and others).
            if task not in tasks
            and task not in python_ids
            and task not in torch_ids
            and not name.startswith(("cuda", "pt_"))
        }
        if native:
            found.append(f"it left threads running: {', '.join(sorted(native.values()))}")
        processes = children_of(os.getpid()) - children
        if processes:
            found.append(
                f"it left child processes running: pids {', '.join(map(str, sorted(processes)))}"
            )
        return found

    def reset_memory_baseline(self):
        """What the evaluator itself holds on the device: after a candidate is unloaded, no more
        may stay allocated, and no more reserved once the allocator's cache is emptied."""
        gc.collect()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        self.memory_baseline = torch.cuda.memory_allocated()
        self.reserved_baseline = torch.cuda.memory_reserved()

    def leftover_memory(self):
        """Device memory a candidate kept after it was unloaded: tensors stashed where the
        evaluator does not look, a CUDA graph or a memory pool."""
        found = []
        torch.cuda.synchronize()
        if torch.cuda.memory_allocated() > self.memory_baseline:
            gc.collect()
        allocated = torch.cuda.memory_allocated()
        if allocated > self.memory_baseline:
            found.append(
                f"{allocated - self.memory_baseline} bytes of device memory stayed allocated "
                f"after the candidate was unloaded"
            )
        torch.cuda.empty_cache()
        reserved = torch.cuda.memory_reserved()
        if reserved > self.reserved_baseline:
            found.append(
                f"{reserved - self.reserved_baseline} bytes of device memory stayed reserved "
                f"after the candidate was unloaded (a CUDA graph or a memory pool)"
            )
        return found
