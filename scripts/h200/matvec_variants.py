"""Writes a kernel directory for the issue 13 run: the matvec example's files, and as its replay
candidates `count` variants of examples/optimize_01_matvec/candidates/01_row_tiles.py that differ
in BLOCK_M, BLOCK_K and num_warps (each a different kernel, none autotuned).

    python3 scripts/h200/matvec_variants.py EXAMPLE_DIR OUT_DIR COUNT
"""

import itertools
import pathlib
import shutil
import sys


def main() -> None:
    example, out, count = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), int(sys.argv[3])
    (out / "candidates").mkdir(parents=True, exist_ok=True)
    for name in ("input.py", "problem.py", "test.py"):
        shutil.copy(example / name, out / name)
    template = (example / "candidates" / "01_row_tiles.py").read_text()
    assert "BLOCK_M = 4" in template and "BLOCK_K=2048" in template and "num_warps=8" in template
    shapes = [
        (m, k, w)
        for m, k, w in itertools.product((1, 2, 4, 8, 16), (256, 512, 1024, 2048, 4096), (2, 4, 8))
        if m * k <= 16384
    ]
    if count > len(shapes):
        sys.exit(f"at most {len(shapes)} variants")
    # Spread the picks over the shapes, so that early and late candidates are alike.
    picks = [shapes[i * len(shapes) // count] for i in range(count)]
    for index, (m, k, w) in enumerate(picks):
        source = (
            template.replace("BLOCK_M = 4", f"BLOCK_M = {m}")
            .replace("BLOCK_K=2048", f"BLOCK_K={k}")
            .replace("num_warps=8", f"num_warps={w}")
        )
        (out / "candidates" / f"{index:03d}_m{m}_k{k}_w{w}.py").write_text(source)


if __name__ == "__main__":
    main()
