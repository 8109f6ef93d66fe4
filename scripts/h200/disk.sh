#!/usr/bin/env bash
# Issue 13's disk bound, measured on one H200 in one call: a rounds-mode run on the matvec example
# (replayed variants, ncu on), then what each candidate's folder held in caches (caches_removed)
# and what it keeps. Run from the repository root with the release binary at $KACTORS:
#   OUT=/some/folder KACTORS=target/release/kactors bash scripts/h200/disk.sh
set -uo pipefail
OUT=${OUT:-/tmp/kactors-disk}
KACTORS=${KACTORS:-target/release/kactors}
ROUNDS=${ROUNDS:-3}
# PLATFORM=noop rehearses the script on a machine without a GPU.
PLATFORM=${PLATFORM:-nvidia}
export PYTHONUNBUFFERED=1
mkdir -p "$OUT"
WORK=$(mktemp -d)
{
    date -u +%Y-%m-%dT%H:%M:%SZ
    nvidia-smi --query-gpu=name,uuid,driver_version --format=csv || echo "no nvidia-smi"
    python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
} > "$OUT/machine.txt" 2>&1
python3 scripts/h200/matvec_variants.py examples/optimize_01_matvec "$WORK/kernel" $((ROUNDS * 8))
mkdir -p "$WORK/configs"
cat > "$WORK/configs/disk.yaml" <<YAML
platform: $PLATFORM
provider: replay
num_workers: 1
max_rounds: $ROUNDS
strategy_config: {num_top_kernels: 2, num_bottlenecks: 4}
YAML
timeout 500 "$KACTORS" run --strategy disk --config-dir "$WORK/configs" --kernel-dir "$WORK/kernel" \
    --run-dir "$WORK/runs" > /dev/null 2> "$OUT/run.stderr"
echo "run exit $?" >> "$OUT/run.stderr"
RUN=$(ls -d "$WORK"/runs/*/ | head -1)
python3 - "$RUN" > "$OUT/disk.md" <<'PY'
import json, os, pathlib, statistics, sys

run = pathlib.Path(sys.argv[1])
records = [json.loads(line) for line in (run / "journal.jsonl").read_text().splitlines() if line.strip()]
removed = {r["candidate"]: r["bytes"] for r in records if r["type"] == "caches_removed"}
measured = [r["bytes"] for r in records if r["type"] == "run_dir_measured"]
finished = [r for r in records if r["type"] == "run_finished"]
beam = next((r["beam"] for r in reversed(records) if r["type"] == "beam_updated"), [])

def size(path: pathlib.Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())

folders = {}
for folder in sorted((run / "candidates").iterdir()):
    digits = "".join(c for c in folder.name if c.isdigit())
    if digits:
        folders[int(digits)] = size(folder)
kept = [folders[c] for c in removed if c in folders]
held = [removed[c] + folders.get(c, 0) for c in removed]
others = {c: b for c, b in folders.items() if c not in removed}

def line(name, values):
    if not values:
        return f"| {name} | 0 | – | – | – |"
    return f"| {name} | {len(values)} | {statistics.median(values) / 1e3:.1f} | {max(values) / 1e3:.1f} | {sum(values) / 1e6:.2f} |"

print(f"run: {run.name}; outcome: {finished[-1]['outcome'] + ' (' + finished[-1]['reason'] + ')' if finished else 'none'}")
print(f"candidate folders: {len(folders)}; caches removed from {len(removed)}; the last beam: {[m['candidate'] for m in beam]}")
print(f"run directory: {size(run) / 1e6:.2f} MB now; journaled measurements (MB): {[round(b / 1e6, 2) for b in measured]}")
print()
print("| per candidate folder | folders | median kB | max kB | total MB |")
print("|---|---|---|---|---|")
print(line("caches removed (caches_removed bytes)", list(removed.values())))
print(line("what stays of those candidates", kept))
print(line("what they held before the removal", held))
print(line("candidates that keep their caches (initial, beam, unresolved)", list(others.values())))
print()
print("what stays, by file name, over the candidates whose caches were removed (kB):")
names = {}
for c in removed:
    for folder in (run / "candidates").iterdir():
        if "".join(ch for ch in folder.name if ch.isdigit()) == str(c):
            for f in folder.rglob("*"):
                if f.is_file():
                    names.setdefault(f.relative_to(folder).as_posix().split("/")[0], []).append(f.stat().st_size)
for name, sizes in sorted(names.items()):
    print(f"- {name}: {len(sizes)} files, median {statistics.median(sizes) / 1e3:.1f}, max {max(sizes) / 1e3:.1f}")
PY
cat "$OUT/disk.md"
cp "$RUN/journal.jsonl" "$OUT/journal.jsonl"
cp "$RUN/report.md" "$OUT/report.md" 2>/dev/null
(cd "$RUN" && find . -type f -printf '%s %p\n' | sort -k2) > "$OUT/files.txt"
