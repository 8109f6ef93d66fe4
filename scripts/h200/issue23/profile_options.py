"""Issue 23 part 2, measured before choosing: what a parent's profile costs the device today
(`kactors profile`: a fresh process under ncu per profile, as the Profiler runs it) against one
warm process under `ncu --profile-from-start off` that profiles kernel after kernel
(warm_profiler.py), on the same matvec variants, side by side in one call. Prints a Markdown
table and what ncu's CSV held (one row per profiled kernel launch, or not).

    python3 scripts/h200/issue23/profile_options.py KACTORS WORK

The warm process is run under ncu with the arguments the Profiler gives (src/nvidia/ncu.rs's
ncu_command_args: the same metrics, sections, clock and cache control), read from there.
CUPTI range profiling inside the evaluator (cupti-python) is not measured: the H200 machine has
no network to install it and its Python has no CUPTI binding.
"""

import json
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
KACTORS, WORK = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
VARIANTS = 4


def ncu_metrics():
    source = (ROOT / "src/nvidia/ncu.rs").read_text()
    table = source[source.index("pub const NCU_METRICS") :]
    table = table[: table.index("\n];")]
    return re.findall(r'metric\(\s*"([^"]+)"', table)


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    kernel = WORK / "kernel"
    subprocess.run(
        [sys.executable, str(ROOT / "scripts/h200/matvec_variants.py"), str(ROOT / "examples/optimize_01_matvec"), str(kernel), str(VARIANTS)],
        check=True,
    )
    variants = sorted((kernel / "candidates").glob("*.py"))

    cold = []
    for variant in variants:
        began = time.monotonic()
        done = subprocess.run(
            [str(KACTORS), "profile", "--strategy", "nvidia", "--kernel-dir", str(kernel), "--kernel", str(variant), "--run-dir", str(WORK / "cold"), "--json"],
            capture_output=True,
            text=True,
        )
        seconds = time.monotonic() - began
        report = json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else {}
        cold.append({"candidate": variant.name, "seconds": seconds, "ok": report.get("ok"), "duration_ms": report.get("duration_ms"), "error": report.get("error")})

    log = WORK / "warm-ncu.csv"
    ncu = shutil.which("ncu") or "/usr/local/cuda/bin/ncu"
    command = [
        ncu, "--target-processes", "all", "--profile-from-start", "off", "--clock-control", "none",
        "--cache-control", "all", "--section", "SpeedOfLight", "--metrics", ",".join(ncu_metrics()),
        "--csv", "--page", "raw", "--print-units", "base", "--log-file", str(log),
        sys.executable, str(Path(__file__).with_name("warm_profiler.py")), str(kernel), *map(str, variants),
    ]
    began = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True)
    warm_wall = time.monotonic() - began
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    start = next((line["start_s"] for line in lines if "start_s" in line), None)
    warm = [line for line in lines if "candidate" in line]
    csv = log.read_text(errors="replace") if log.exists() else ""
    rows = [line for line in csv.splitlines() if line.startswith('"') and not line.startswith('"ID"')]
    data_rows = [row for row in rows if re.match(r'"\d+"', row)]

    print(f"# Issue 23 part 2: a parent's profile, today's against a warm ncu process ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})\n")
    print(f"{len(variants)} matvec variants (scripts/h200/matvec_variants.py), each profiled once.\n")
    print("| candidate | today: `kactors profile` wall (s) | ok | warm: load (s) | warm: warm-up calls (s) | warm: the profiled call (s) |")
    print("|---|---|---|---|---|---|")
    for today, warmed in zip(cold, warm + [{}] * (len(cold) - len(warm))):
        print(
            f"| {today['candidate']} | {today['seconds']:.2f} | {today['ok']} | {warmed.get('load_s', '–')} | {warmed.get('warmup_s', '–')} | {warmed.get('profiled_s', '–')} |"
        )
    if cold:
        print(f"\nToday, median per profile: {statistics.median(c['seconds'] for c in cold):.2f} s (each a process under ncu: Python, torch, the CUDA context, compilation, the replayed call).")
    if warm:
        per = [w["load_s"] + w["warmup_s"] + w["profiled_s"] for w in warm]
        print(f"Warm process: start once {start} s; then per kernel, median {statistics.median(per):.2f} s (load + warm-up + profiled call), of which the profiled call {statistics.median(w['profiled_s'] for w in warm):.2f} s; the whole process {warm_wall:.1f} s with ncu's exit.")
    print(f"\nncu's CSV of the warm process: {len(data_rows)} data rows for {len(warm)} profiled calls (kernels launched per call: {[w.get('kernels') for w in warm]}); ncu exit {done.returncode}.")
    if done.returncode != 0 or not warm:
        print("\n```\n" + (done.stderr[-3000:] or "(no stderr)") + "\n```")
    for c in cold:
        if not c["ok"]:
            print(f"\ntoday's profile of {c['candidate']} failed: {c['error']}")


main()
