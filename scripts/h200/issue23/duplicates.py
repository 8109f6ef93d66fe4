#!/usr/bin/env python3
"""The matvec example with two variants of 01_row_tiles.py among its replay candidates
(scripts/h200/issue23/issue23.sh): 01a renames its Triton kernel, 01b renames it and swaps two
independent lines. Their tokens differ from 01's, so only their compiled code can tell: 01a's
normalized PTX is 01's, 01b's is not (the swap moves instructions; seen on the H200, 2026-12-04).

    python3 duplicates.py EXAMPLE_DIR KERNEL_DIR
"""

import shutil
import sys
from pathlib import Path

SWAPPED = ("    row_ok = rows < M\n", "    cols = tl.arange(0, BLOCK_K)\n")


def main(example, kernel):
    shutil.copytree(example, kernel)
    source = (kernel / "candidates" / "01_row_tiles.py").read_text()
    renamed = source.replace("_matvec_tile_kernel", "_rows_by_tiles")
    if renamed == source or SWAPPED[0] + SWAPPED[1] not in renamed:
        sys.exit("01_row_tiles.py changed: the duplicates cannot be made from it")
    (kernel / "candidates" / "01a_renamed.py").write_text(renamed)
    swapped = renamed.replace(SWAPPED[0] + SWAPPED[1], SWAPPED[1] + SWAPPED[0])
    (kernel / "candidates" / "01b_renamed_reordered.py").write_text(swapped)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
