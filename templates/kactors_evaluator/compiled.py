"""Compiled duplicates (issue 23): a fingerprint of what one call of a candidate ran, so that
kactors can tell a candidate whose compiled kernels are an earlier one's and not time it again.

The fingerprint covers, in launch order, each Triton launch's compiled code, grid, num_warps,
num_ctas and shared memory, and the PyTorch operations the call made around them: two calls
with the same fingerprint put the same work on the device.

The code is the kernel's assembly text (PTX on NVIDIA, AMDGCN on AMD), normalized, rather than
its binary (cubin, hsaco): both hold the kernel's name (the entry symbol, PTX's parameter names,
AMD's symbol table and metadata) and the candidate's source lines and file path (line info and
debug sections), so two kernels that differ only in their names or in where their lines sit
have different binaries for the same machine code. The assembly text can be normalized: its
debug lines and sections and comments left out, debug-range labels left out and the others
numbered by first use, and the kernel's name replaced wherever it stands as a name of its own.
A difference normalization cannot see (instructions scheduled in another order) only misses a
duplicate; it never makes two different kernels one.

It imports neither torch nor Triton: it reads Triton's objects by their attributes, and CI tests
it with plain python3 (tests/python/test_evaluator_parts.py).
"""

import contextlib
import hashlib
import json
import re

# Where code came from, not what it does.
DEBUG_LINE = re.compile(r"^\s*(\.loc\b|\.file\b|\.cfi_)")
PTX_DEBUG_SECTION = re.compile(r"^\s*\.section\s+\.debug")
AMD_SECTION = re.compile(r"^\s*\.section\s+(\S+)")
DEBUG_LABEL = re.compile(r"^\s*(\$L__tmp|\.Ltmp)\d+:\s*$")
LABEL = re.compile(r"[$.]L[A-Za-z_$][\w$]*")
PLACEHOLDER = "__kactors_kernel__"
# Attribute chains that lead from a decorator (autotune, heuristics) to its JITFunction.
MAX_WRAPPERS = 8


# Each assembly's comment marker (PTX ends its statements with `;`, which AMDGCN's comments
# start with).
COMMENT = {"ptx": "//", "amdgcn": ";"}


def normalized_assembly(text, name, comment):
    """PTX or AMDGCN text as it is compared: without debug lines, debug sections, comments
    (from `comment` on) and debug-range labels, its other labels numbered by first use, and
    `name` (the kernel's) as a placeholder wherever it is a name of its own (PTX names
    parameters `<name>_param_<i>`, AMDGCN its descriptor `<name>.kd`)."""
    kept = []
    in_ptx_debug = False
    in_amd_debug = False
    for raw in text.splitlines():
        if in_ptx_debug:
            if raw.strip() == "}":
                in_ptx_debug = False
            continue
        if PTX_DEBUG_SECTION.match(raw) and "{" in raw:
            in_ptx_debug = "}" not in raw.split("{", 1)[1]
            continue
        section = AMD_SECTION.match(raw)
        if section:
            in_amd_debug = section.group(1).startswith(".debug")
            if in_amd_debug:
                continue
        elif raw.strip().startswith((".text", ".amdgpu_metadata", ".end_amdgpu_metadata")):
            in_amd_debug = False
        if in_amd_debug or DEBUG_LINE.match(raw) or DEBUG_LABEL.match(raw):
            continue
        line = raw.split(comment, 1)[0].strip()
        if line:
            kept.append(" ".join(line.split()))
    body = "\n".join(kept)
    if name:
        # Not before a `.`: a kernel named `mov` leaves `mov.u32` be; AMD's descriptor `.kd`
        # is the name's own.
        own = re.compile(r"(?<![\w$.])" + re.escape(name) + r"(?=_param_\d|\.kd\b|(?![\w$.]))")
        body = own.sub(PLACEHOLDER, body)
    labels = {}

    def numbered(match):
        return labels.setdefault(match.group(0), f"$L{len(labels)}")

    return LABEL.sub(numbered, body)


def assembly_digest(asm, name):
    """The SHA-256 of a kernel's normalized assembly (PTX, else AMDGCN), or None when it has
    neither."""
    for key, comment in COMMENT.items():
        text = asm.get(key) if hasattr(asm, "get") else None
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        if isinstance(text, str) and text:
            normalized = normalized_assembly(text, name, comment)
            return hashlib.sha256(normalized.encode()).hexdigest()
    return None


def fingerprint(launches, aten_ops):
    """The call's fingerprint: the SHA-256 of its launches (each a digest, grid, num_warps,
    num_ctas, shared) and PyTorch operations, in order."""
    text = json.dumps({"launches": launches, "aten_ops": list(aten_ops)}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def jit_functions(namespace):
    """The Triton JITFunctions among a namespace's values (a candidate's globals), each found
    through the decorators around it (autotune, heuristics keep theirs in .fn)."""
    found = []
    for value in list(namespace.values()):
        for _ in range(MAX_WRAPPERS):
            if value is None or isinstance(value, type):
                break
            if isinstance(getattr(value, "device_caches", None), dict):
                if all(value is not other for other in found):
                    found.append(value)
                break
            value = getattr(value, "fn", None)
    return found


def compiled_kernels(jit_function):
    """The kernels a JITFunction compiled, on every device: Triton 3.3 and later keep a tuple
    whose first item is the key → CompiledKernel dict, earlier ones the dict itself."""
    kernels = []
    for cache in list(jit_function.device_caches.values()):
        table = cache[0] if isinstance(cache, tuple) and cache else cache
        if isinstance(table, dict):
            kernels.extend(table.values())
    return kernels


class LaunchRecord:
    """The launches of the kernels it wraps, while a recording is open."""

    def __init__(self):
        self.launches = []
        # Every kernel it could not read (no assembly): the recording has no fingerprint.
        self.unreadable = False

    def wrap(self, kernel):
        """Replaces the kernel's launcher with one that notes the launch first; answers how to
        put the original back, or None for a kernel with no launcher (never loaded: it never
        launched). Triton 3.4 and later keep the launcher in `_run` behind a `run` property,
        earlier ones in `run` itself."""
        own = getattr(kernel, "__dict__", {})
        attribute = "_run" if "_run" in own else "run"
        original = own.get(attribute)
        if original is None:
            return None
        digest = assembly_digest(getattr(kernel, "asm", {}), getattr(kernel, "name", None))
        metadata = getattr(kernel, "metadata", None)
        config = [getattr(metadata, key, None) for key in ("num_warps", "num_ctas", "shared")]
        if digest is None:
            self.unreadable = True

        def run(grid_0, grid_1, grid_2, *rest, **options):
            self.launches.append([digest, [grid_0, grid_1, grid_2], *config])
            return original(grid_0, grid_1, grid_2, *rest, **options)

        setattr(kernel, attribute, run)

        def restore():
            setattr(kernel, attribute, original)

        return restore


@contextlib.contextmanager
def recording(namespace):
    """Records the launches of every kernel the namespace's JITFunctions compiled, for the
    length of the block (one call, after the compiling one)."""
    record = LaunchRecord()
    restores = []
    try:
        for jit_function in jit_functions(namespace):
            for kernel in compiled_kernels(jit_function):
                restore = record.wrap(kernel)
                if restore is not None:
                    restores.append(restore)
        yield record
    finally:
        for restore in reversed(restores):
            restore()


def call_fingerprint(record, launched, aten_ops):
    """The fingerprint of a recorded call, or None when it cannot be trusted: a launch came
    from a kernel the recording did not wrap (its count is not the launch hook's), a kernel's
    assembly could not be read, or nothing launched."""
    if record.unreadable or not record.launches or len(record.launches) != launched:
        return None
    return fingerprint(record.launches, aten_ops)
