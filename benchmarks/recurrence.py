"""The recurrence benchmark of issue 4: ``python benchmarks/recurrence.py [--quick] [--json PATH]``.

Same as ``kleene bench``; the logic lives in ``kleene.bench`` so that it works from an install.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kleene.bench import run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="only (32, 256, 512) and B at (1, 4096, 512)")
    parser.add_argument("--json", type=Path, default=None, help="also write the records as JSON to PATH")
    parser.add_argument("--backend", default="cpp", help="backend to time (default: %(default)s)")
    parser.add_argument("--threads", type=int, default=None, help="threads for torch and the kernels (default: all)")
    args = parser.parse_args(argv)
    run(quick=args.quick, json_path=args.json, backend=args.backend, threads=args.threads)
    return 0


if __name__ == "__main__":
    sys.exit(main())
