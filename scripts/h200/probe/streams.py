"""Issue 18's stream check, tried alone: a Triton kernel on a side stream, joined or not, with a
spin (torch.cuda._sleep) put in front of the first launch on any stream but the caller's. After
kernel_function returns, the caller's stream is waited on alone; a side stream still busy then
means the caller's stream does not wait for the work."""

import sys
import time

import torch
import triton
import triton.language as tl


@triton.jit
def add_one(x, y, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offsets < n
    tl.store(y + offsets, tl.load(x + offsets, mask=inside) + 1, mask=inside)


def launch(x, y):
    add_one[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)


def same_stream(x):
    y = torch.empty_like(x)
    launch(x, y)
    return y


def side(x, join, how="wait_stream"):
    stream = torch.cuda.Stream()
    y = torch.empty_like(x)
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        launch(x, y)
        done = torch.cuda.Event()
        done.record(stream)
    if join and how == "wait_stream":
        torch.cuda.current_stream().wait_stream(stream)
    elif join:
        torch.cuda.current_stream().wait_event(done)
    return y


caller = None
gated = set()
cycles = 0


def hook(metadata):
    data = getattr(metadata, "data", metadata)
    stream = data.get("stream")
    if stream is not None and stream != caller and stream not in gated and cycles:
        gated.add(stream)
        with torch.cuda.stream(torch.cuda.ExternalStream(stream)):
            torch.cuda._sleep(cycles)


triton.knobs.runtime.launch_enter_hook = hook
props = torch.cuda.get_device_properties(0)
clock_khz = getattr(props, "clock_rate", 0) or 1980000
print(f"clock_rate {clock_khz} kHz", flush=True)
x = torch.randn(1 << 24, device="cuda")
for name, fn in (
    ("same stream", same_stream),
    ("unjoined", lambda x: side(x, False)),
    ("joined wait_stream", lambda x: side(x, True)),
    ("joined wait_event", lambda x: side(x, True, "event")),
):
    for gate_ms in (0, 20):
        cycles = int(gate_ms * 1e-3 * clock_khz * 1e3)
        verdicts = []
        for trial in range(5):
            torch.cuda.synchronize()
            caller = torch.cuda.current_stream().cuda_stream
            gated.clear()
            started = time.perf_counter()
            y = fn(x)
            end = torch.cuda.Event()
            end.record()
            end.synchronize()
            busy = [s for s in gated if not torch.cuda.ExternalStream(s).query()]
            right = bool(torch.equal(y, x + 1))
            torch.cuda.synchronize()
            verdicts.append((bool(busy), right, round((time.perf_counter() - started) * 1e3, 2)))
        print(f"{name:20s} gate {gate_ms:2d} ms: (side busy, right at once, ms) {verdicts}", flush=True)
sys.exit(0)
