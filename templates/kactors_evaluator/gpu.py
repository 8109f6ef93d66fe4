"""The device and the tensors as the evaluator child handles them: torch and Triton imported,
the device described, its memory, sticky errors, the aten recorder, Triton's cache folder."""

import os
import platform
import re
import shutil
from pathlib import Path

import torch
import triton

from .draws import gib
from .protocol import EvaluatorError, Rejection

# Test-only (see evaluator.py's docstring); kactors never sets it.
MEMORY_CAP_VARIABLE = "KACTORS_EVALUATOR_MEMORY_CAP_GIB"
# Messages of errors after which the CUDA/HIP context is unusable (sticky errors).
POISONED_CONTEXT = re.compile(
    r"illegal memory access|illegal instruction|misaligned address|unspecified launch failure"
    r"|device-side assert|CUDA error|cudaError|CUDA_ERROR|HIP error|hipError"
    r"|Triton Error \[(CUDA|HIP)\]"
)


def aten_recorder_class():
    from torch.utils._python_dispatch import TorchDispatchMode

    class AtenRecorder(TorchDispatchMode):
        """Records every aten operation of a call, and whether one ran off the timing stream."""

        def __init__(self, timing_stream, on_side_stream=None):
            super().__init__()
            self.ops = []
            self.timing_stream = timing_stream
            self.off_stream = False
            # Called with the stream an operation is about to run on, when it is not the
            # timing stream, before the operation is queued there (verify's stream gate).
            self.on_side_stream = on_side_stream

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func))
            stream = torch.cuda.current_stream().cuda_stream
            if stream != self.timing_stream:
                self.off_stream = True
                if self.on_side_stream is not None:
                    self.on_side_stream(stream)
            return func(*args, **(kwargs or {}))

    return AtenRecorder


def scratch_root():
    """Where the evaluator's own caches go: the sandbox's scratch (KACTORS_SCRATCH, a bounded
    tmpfs and the one folder a sandboxed evaluator may write), else the working directory."""
    return Path(os.environ.get("KACTORS_SCRATCH") or os.getcwd())


def set_triton_cache_dir(path):
    """Points Triton at `path`. In the sandbox's scratch, which is bounded, the cache the
    evaluator used before (another candidate's) is removed first: nothing reads it again but a
    restarted child, which compiles anew."""
    previous = os.environ.get("TRITON_CACHE_DIR")
    scratch = os.environ.get("KACTORS_SCRATCH")
    if scratch and previous and Path(previous) != path and Path(previous).parent == path.parent:
        if Path(previous).is_relative_to(scratch):
            shutil.rmtree(previous, ignore_errors=True)
    path.mkdir(parents=True, exist_ok=True)
    os.environ["TRITON_CACHE_DIR"] = str(path)
    cache_knobs = getattr(getattr(triton, "knobs", None), "cache", None)
    if cache_knobs is not None and hasattr(cache_knobs, "dir"):
        cache_knobs.dir = str(path)


def is_poisoned_context_error(error):
    accelerator_error = getattr(torch, "AcceleratorError", None)
    if accelerator_error is not None and isinstance(error, accelerator_error):
        return True
    return bool(POISONED_CONTEXT.search(f"{type(error).__name__}: {error}"))


def context_is_usable():
    try:
        probe = torch.ones(1, device="cuda")
        probe.add_(1)
        torch.cuda.synchronize()
        return probe.item() == 2.0
    except Exception:
        return False


def clone_values(values):
    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


def as_tensor_list(value, what):
    if isinstance(value, torch.Tensor):
        return [value]
    if (
        isinstance(value, (tuple, list))
        and value
        and all(isinstance(v, torch.Tensor) for v in value)
    ):
        return list(value)
    raise Rejection(
        f"{what} returned {type(value).__name__}, expected a tensor or a tuple of tensors"
    )


def storage_of(tensor):
    return tensor.untyped_storage().data_ptr()


def poison(tensor):
    if tensor.is_floating_point() or tensor.is_complex():
        tensor.fill_(float("nan"))


def tensor_bytes(value):
    return value.numel() * value.element_size() if isinstance(value, torch.Tensor) else 0


def cap_memory(cap_gib, total_bytes):
    """Caps this process's device memory at `cap_gib` GiB (a test of smaller GPUs); the cap in
    bytes."""
    try:
        cap = int(float(cap_gib) * (1 << 30))
    except ValueError:
        cap = 0
    if not 0 < cap <= total_bytes:
        raise EvaluatorError(
            f"{MEMORY_CAP_VARIABLE}={cap_gib!r} must be a number of GiB above 0 and at most the "
            f"device's {gib(total_bytes)}"
        )
    torch.cuda.set_per_process_memory_fraction(cap / total_bytes, 0)
    return cap


def available_memory(cap):
    """Bytes this process could still allocate on the device: its free memory, within the cap."""
    free, _ = torch.cuda.mem_get_info()
    if cap is not None:
        free = min(free, cap - torch.cuda.memory_reserved())
    return max(free, 0)


def checksum(tensors):
    """One float64 sum per tensor: equal outputs give equal sums (reductions are deterministic)."""
    return tuple(torch.sum(t, dtype=torch.float64).item() for t in tensors)


def pci_bus_id(props, uuid):
    domain = getattr(props, "pci_domain_id", None)
    bus = getattr(props, "pci_bus_id", None)
    device = getattr(props, "pci_device_id", None)
    if isinstance(domain, int) and isinstance(bus, int) and isinstance(device, int):
        # nvidia-smi's form: 00000000:19:00.0
        return f"{domain:08X}:{bus:02X}:{device:02X}.0"
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByUUID(uuid)
        bus_id = pynvml.nvmlDeviceGetPciInfo(handle).busId
        return bus_id.decode() if isinstance(bus_id, bytes) else str(bus_id)
    except Exception:
        return None


def driver_version():
    try:
        import pynvml

        pynvml.nvmlInit()
        version = pynvml.nvmlSystemGetDriverVersion()
        return version.decode() if isinstance(version, bytes) else str(version)
    except Exception:
        pass
    for path, pattern in (
        ("/proc/driver/nvidia/version", r"Kernel Module\s+([0-9][0-9.]*)"),
        ("/sys/module/amdgpu/version", r"([0-9][0-9A-Za-z.\-]*)"),
    ):
        try:
            match = re.search(pattern, Path(path).read_text())
        except OSError:
            continue
        if match:
            return match.group(1)
    return None


def describe_device():
    index = torch.cuda.current_device()
    props = torch.cuda.get_device_properties(index)
    uuid = getattr(props, "uuid", None)
    uuid = str(uuid) if uuid is not None else None
    if uuid and torch.version.hip is None and not uuid.startswith(("GPU-", "MIG-")):
        uuid = "GPU-" + uuid
    device = {
        "name": props.name,
        "uuid": uuid,
        "pci_bus_id": pci_bus_id(props, uuid),
        "index": index,
    }
    versions = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
        "hip": torch.version.hip,
        "driver": driver_version(),
    }
    return device, versions, props
